-- hash: the portable ordering-key hash and shard_for_ordering_key, bit-exact against
-- every row of the reference vectors (reference/hash-vectors.tsv), plus bounds.
\set VERBOSITY terse

-- pg_temp.err(sql): 'ok', or the SQLSTATE and message of the statement.
\set ECHO none
\i sql/err.psql
\set ECHO all

-- The vectors, copied literally (key bytes, unsigned hash, int8 hash, shard for S = 1, 2, 4, 8, 64).
CREATE TEMP TABLE hash_vectors (label text, key bytea, hash_u64 numeric, hash_i8 bigint,
                                s1 int, s2 int, s4 int, s8 int, s64 int);
INSERT INTO hash_vectors VALUES
    ('(empty)', '\x', 14695981039346656037, -3750763034362895579, 0, 1, 1, 5, 37),
    ('a', '\x61', 12638153115695167552, -5808590958014384064, 0, 0, 0, 0, 0),
    ('customer-42', '\x637573746f6d65722d3432', 695220319317454988, 695220319317454988, 0, 0, 0, 4, 12),
    ('order:1001', '\x6f726465723a31303031', 14549007610802403233, -3897736462907148383, 0, 1, 1, 1, 33),
    ('1000 x 0xff', decode(repeat('ff', 1000), 'hex'), 7051640515306827253, 7051640515306827253, 0, 1, 1, 5, 53),
    ('account-42', '\x6163636f756e742d3432', 12338786926562354871, -6107957147147196745, 0, 1, 3, 7, 55),
    ('é (UTF-8 c3 a9)', '\xc3a9', 590898472587934703, 590898472587934703, 0, 1, 3, 7, 47),
    ('shard-fixture-0', '\x73686172642d666978747572652d30', 16207703326091768408, -2239040747617783208, 0, 0, 0, 0, 24),
    ('shard-fixture-3', '\x73686172642d666978747572652d33', 16207703326091768411, -2239040747617783205, 0, 1, 3, 3, 27);

-- Computed values, one row per vector.
SELECT label, length(key) AS bytes, awa.ordering_key_hash(key) AS hash,
       awa.shard_for_ordering_key(key, 1) AS s1, awa.shard_for_ordering_key(key, 2) AS s2,
       awa.shard_for_ordering_key(key, 4) AS s4, awa.shard_for_ordering_key(key, 8) AS s8,
       awa.shard_for_ordering_key(key, 64) AS s64
  FROM hash_vectors ORDER BY label COLLATE "C";

-- Every vector matches: int8 form, unsigned form, and all five shard counts.
SELECT count(*) AS vectors,
       count(*) FILTER (WHERE awa.ordering_key_hash(key) = hash_i8) AS hash_int8_ok,
       count(*) FILTER (WHERE (awa.ordering_key_hash(key)::numeric + 18446744073709551616) % 18446744073709551616
                              = hash_u64) AS hash_u64_ok,
       count(*) FILTER (WHERE awa.shard_for_ordering_key(key, 1) = s1 AND awa.shard_for_ordering_key(key, 2) = s2
                          AND awa.shard_for_ordering_key(key, 4) = s4 AND awa.shard_for_ordering_key(key, 8) = s8
                          AND awa.shard_for_ordering_key(key, 64) = s64) AS shards_ok,
       count(*) FILTER (WHERE awa.shard_for_ordering_key(key, 64) = hash_u64 % 64
                          AND awa.shard_for_ordering_key(key, 8) = hash_u64 % 8) AS unsigned_modulo_ok
  FROM hash_vectors;

-- The text overloads hash the UTF-8 bytes: same hash and shard as the bytea form.
SELECT t AS key_text, awa.ordering_key_hash(t) = awa.ordering_key_hash(convert_to(t, 'UTF8')) AS same_hash,
       awa.shard_for_ordering_key(t, 64) = awa.shard_for_ordering_key(convert_to(t, 'UTF8'), 64) AS same_shard_64,
       awa.shard_for_ordering_key(t, 4) AS s4_text, awa.shard_for_ordering_key(convert_to(t, 'UTF8'), 4) AS s4_bytea
  FROM unnest(ARRAY['a', 'customer-42', 'account-42', 'é', '']) AS t ORDER BY t COLLATE "C";
SELECT awa.ordering_key_hash('é'::text) AS e_acute_text, awa.ordering_key_hash('\xc3a9'::bytea) AS e_acute_bytea,
       awa.shard_for_ordering_key('é'::text, 64) AS e_acute_s64;

-- NULL key -> NULL (no key); the empty key is a key (the FNV offset basis, not NULL, not 0).
SELECT awa.ordering_key_hash(NULL::bytea) IS NULL AS null_hash_bytea,
       awa.ordering_key_hash(NULL::text) IS NULL AS null_hash_text,
       awa.shard_for_ordering_key(NULL::bytea, 4) IS NULL AS null_shard_bytea,
       awa.shard_for_ordering_key(NULL::text, 4) IS NULL AS null_shard_text,
       awa.ordering_key_hash(''::bytea) AS empty_hash_bytea,
       awa.ordering_key_hash(''::text) AS empty_hash_text,
       awa.shard_for_ordering_key(''::bytea, 2) AS empty_s2,
       awa.shard_for_ordering_key(''::text, 64) AS empty_text_s64;

-- S outside 1..64 is an error naming the argument (22023), NULL S is 22004, for both overloads,
-- whether or not the key is NULL.
SELECT s, pg_temp.err(format('SELECT awa.shard_for_ordering_key(%L::bytea, %s)', 'a', s)) AS bytea_key,
       pg_temp.err(format('SELECT awa.shard_for_ordering_key(%L::text, %s)', 'a', s)) AS text_key,
       pg_temp.err(format('SELECT awa.shard_for_ordering_key(NULL::bytea, %s)', s)) AS null_key
  FROM unnest(ARRAY['0', '65', '-1', '2147483647', 'NULL::int', '1', '64']) AS s ORDER BY s;

-- A database whose encoding is not UTF-8: the text overload still hashes UTF-8 bytes.
\set regress_db :DBNAME
CREATE DATABASE hash_latin1 TEMPLATE template0 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C';
ALTER DATABASE hash_latin1 SET awa_shard.maintenance = off;
\c hash_latin1
SET client_encoding = 'UTF8';
CREATE EXTENSION awa_shard;
SELECT current_setting('server_encoding') AS server_encoding,
       octet_length('é'::text) AS bytes_in_db,
       awa.ordering_key_hash('é'::text) AS e_acute_text,
       awa.ordering_key_hash('é'::text) = 590898472587934703 AS matches_vector,
       awa.shard_for_ordering_key('é'::text, 4) AS e_acute_s4;
\c :regress_db
DROP DATABASE hash_latin1;
