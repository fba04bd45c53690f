# awa_shard — PGXS build of the sharded job-queue extension (C++17).
EXTENSION = awa_shard
EXTVERSION = 1.1

MODULE_big = awa_shard
SRCS = $(sort $(wildcard src/*.cpp))
OBJS = $(SRCS:.cpp=.o)

# The full install script of EXTVERSION is built from the schema sources, sql/schema/*.sql
# concatenated in file-name order (docs/design.md, "Releases"); it is a build product, never
# committed. The released scripts and the hand-written update scripts are committed files;
# released ones are never edited again.
SCHEMA_SRCS = $(sort $(wildcard sql/schema/*.sql))
DATA_built = sql/$(EXTENSION)--$(EXTVERSION).sql
DATA = $(filter-out $(DATA_built),$(sort $(wildcard sql/$(EXTENSION)--*.sql)))
EXTRA_CLEAN = test/unit/unit_tests test/output_iso

# Tests are picked up by wildcard: add a file, get a test.
REGRESS = $(patsubst sql/%.sql,%,$(filter-out sql/$(EXTENSION)--%,$(sort $(wildcard sql/*.sql))))
# The suites' databases are made by REGRESS_PREP (test/installcheck_databases.sql), as
# pg_regress would make them plus background maintenance switched off in them.
REGRESS_OPTS = --inputdir=. --use-existing
ISOLATION = $(patsubst test/specs/%.spec,%,$(sort $(wildcard test/specs/*.spec)))
ISOLATION_OPTS = --inputdir=test --outputdir=test/output_iso --use-existing
REGRESS_PREP = installcheck-databases

PG_CONFIG ?= pg_config
PG_CXXFLAGS = -std=c++17 -Wno-register -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -fno-omit-frame-pointer
SHLIB_LINK = -lstdc++

# Debian builds PostgreSQL with LLVM; clang's bitcode step would not get PG_CXXFLAGS.
override with_llvm = no

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# make installcheck runs against any PostgreSQL 15 with the extension installed: preloaded or
# not, background maintenance on or off, prepared transactions allowed or not
# (expected/<test>_N.out where outputs differ by design). First it makes the suites'
# databases, with background maintenance switched off in them (REGRESS_PREP, set above PGXS).
installcheck-databases:
	$(bindir)/psql -X -q -d template1 -f test/installcheck_databases.sql

.PHONY: installcheck-databases

$(DATA_built): $(SCHEMA_SRCS)
	cat $^ > $@

# Every object depends on the shared headers (PGXS tracks no header dependencies).
$(OBJS): $(wildcard src/*.hpp)

# Pure C++ unit tests: no PostgreSQL header, no server.
UNIT_SRCS = $(sort $(wildcard test/unit/*.cpp)) src/ordering_hash.cpp src/shard_math.cpp src/cron.cpp
test/unit/unit_tests: $(UNIT_SRCS) $(wildcard src/*.hpp)
	$(CXX) -std=c++17 -O2 -Wall -Wextra -Isrc -o $@ $(UNIT_SRCS)

unitcheck: test/unit/unit_tests
	test/unit/unit_tests

.PHONY: unitcheck
