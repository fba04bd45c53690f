-- awa_shard: the full install script of the current version, concatenated by the build
-- from sql/schema/*.sql in file-name order (docs/design.md §11). Edit the sources, never
-- the generated sql/awa_shard--<version>.sql.
\echo Use "CREATE EXTENSION awa_shard" to load this file. \quit
