-- lifecycle_leases: every attempt exit in leases mode (the checks are in lifecycle_checks.psql,
-- shared with lifecycle_receipts.sql, so both modes pass exactly the same suite).
\set VERBOSITY terse
\set receipts false
\set q lifecycle_leases
\set ukey '\\x1ea5'
\i sql/lifecycle_checks.psql
