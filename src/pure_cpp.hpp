/*
 * pure_cpp.hpp — included first by every pure C++ source file. Pure files are unit-tested
 * without a server, so they must not see a PostgreSQL header.
 */
#pragma once

#if defined(PG_VERSION_NUM) || defined(POSTGRES_H)
#error "a pure C++ file of awa_shard included a PostgreSQL header"
#endif
