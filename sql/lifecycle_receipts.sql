-- lifecycle_receipts: every attempt exit in receipts mode (the checks are in lifecycle_checks.psql,
-- shared with lifecycle_leases.sql, so both modes pass exactly the same suite).
\set VERBOSITY terse
\set receipts true
\set q lifecycle_receipts
\set ukey '\\x10c0'
\i sql/lifecycle_checks.psql
