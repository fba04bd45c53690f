# awa_shard — PGXS build of the sharded job-queue extension (C++17).
EXTENSION = awa_shard
EXTVERSION = 1.0

MODULE_big = awa_shard
SRCS = $(sort $(wildcard src/*.cpp))
OBJS = $(SRCS:.cpp=.o)

# Install scripts are assembled from the ordered pieces in sql/1.0/ (objects) and
# sql/upgrade/ (the v017 reshape); see docs/design.md.
INSTALL_PIECES = $(sort $(wildcard sql/1.0/*.sql))
FUNCTION_PIECES = $(filter-out sql/1.0/0%,$(INSTALL_PIECES))
UPGRADE_PIECES = $(sort $(wildcard sql/upgrade/*.sql))
GENERATED_SQL = sql/$(EXTENSION)--$(EXTVERSION).sql sql/$(EXTENSION)--0.16--$(EXTVERSION).sql
DATA = sql/$(EXTENSION)--0.16.sql $(GENERATED_SQL)
EXTRA_CLEAN = $(GENERATED_SQL) test/unit/unit_tests

# Tests are picked up by wildcard: add a file, get a test.
REGRESS = $(patsubst sql/%.sql,%,$(filter-out sql/$(EXTENSION)--%,$(sort $(wildcard sql/*.sql))))
REGRESS_OPTS = --inputdir=. --load-extension=$(EXTENSION)
ISOLATION = $(patsubst test/specs/%.spec,%,$(sort $(wildcard test/specs/*.spec)))
ISOLATION_OPTS = --inputdir=test --outputdir=test/output_iso

PG_CONFIG ?= pg_config
PG_CXXFLAGS = -std=c++17 -Wno-register -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -fno-omit-frame-pointer
SHLIB_LINK = -lstdc++

# Debian builds PostgreSQL with LLVM; clang's bitcode step would not get PG_CXXFLAGS.
override with_llvm = no

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

all: $(GENERATED_SQL)

sql/$(EXTENSION)--$(EXTVERSION).sql: $(INSTALL_PIECES)
	cat $^ > $@

sql/$(EXTENSION)--0.16--$(EXTVERSION).sql: $(UPGRADE_PIECES) $(FUNCTION_PIECES)
	cat $^ > $@

# Pure C++ unit tests: no PostgreSQL header, no server.
UNIT_SRCS = $(sort $(wildcard test/unit/*.cpp)) src/ordering_hash.cpp src/shard_math.cpp
test/unit/unit_tests: $(UNIT_SRCS) $(wildcard src/*.hpp)
	$(CXX) -std=c++17 -O2 -Wall -Wextra -Isrc -o $@ $(UNIT_SRCS)

unitcheck: test/unit/unit_tests
	test/unit/unit_tests

.PHONY: unitcheck
