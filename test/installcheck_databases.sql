-- Run by `make installcheck` before the suites (REGRESS_PREP), against any PostgreSQL 15 with
-- the extension installed: preloaded or not, background maintenance on or off, prepared
-- transactions allowed or not (expected/<test>_N.out where the outputs differ by design).
-- It makes the suites' databases itself, as pg_regress would (the suites run with
-- --use-existing), with one more setting: the suites drive promotion, rescue, ring rotation
-- and prune themselves and compare exact results, so background maintenance is switched off
-- in their databases (ALTER DATABASE ... SET awa_shard.maintenance = off, honoured by the
-- launcher and by claims) and stays on for every other database of the server.
\set ON_ERROR_STOP on
\set QUIET on
\set db contrib_regression
\ir installcheck_database.psql
\set db isolation_regression
\ir installcheck_database.psql
