/*
 * pure_cpp.hpp — the last include of every pure C++ file (pg_duckdb's cpp_only_file.hpp).
 *
 * Pure files (ordering_hash, shard_math and their unit tests) run without a server, so
 * they must not see a PostgreSQL header, not even through another header. Included
 * last, this checks everything included before it. No include guard: each inclusion
 * checks again.
 */
#if defined(PG_VERSION_NUM) || defined(POSTGRES_H) || defined(FMGR_H)
#error "a pure C++ file of awa_shard included a PostgreSQL header"
#endif
