-- awa_shard 0.16 -> 1.0 is migration v017: reshape steps (pieces of sql/upgrade/) followed by
-- the function pieces of sql/1.0/.
\echo Use "ALTER EXTENSION awa_shard UPDATE TO '1.0'" to load this file. \quit
