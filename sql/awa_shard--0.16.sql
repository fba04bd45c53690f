-- awa_shard 0.16: the pre-shard layout (written with migration v017).
\echo Use "CREATE EXTENSION awa_shard VERSION '0.16'" to load this file. \quit
