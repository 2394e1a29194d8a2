# PGXS build of statesman (C++17). EXTVERSION comes from the control file only.
EXTENSION  = statesman
EXTVERSION = $(shell sed -n "s/^default_version *= *'\(.*\)'/\1/p" $(EXTENSION).control)

PG_CONFIG ?= pg_config

MODULE_big = statesman
OBJS = \
	src/module.o \
	src/pg/guard.o \
	src/pg/work.o \
	src/store/names.o \
	src/store/append.o \
	src/feed/message_format.o \
	src/feed/message.o \
	src/worker/worker_slots.o \
	src/worker/backoff.o \
	src/worker/launcher.o \
	src/worker/database_worker.o \
	src/worker/dispatcher.o \
	src/sinks/io.o \
	src/sinks/sink_types.o \
	src/sinks/sink_options_sql.o \
	src/sinks/table.o \
	src/sinks/redis.o \
	src/sinks/postgres.o

DATA_built = sql/$(EXTENSION)--$(EXTVERSION).sql
DATA       = $(filter-out $(DATA_built), $(wildcard sql/$(EXTENSION)--*.sql))
EXTRA_CLEAN = sql/$(EXTENSION)--$(EXTVERSION).sql

LIBPQ_INCLUDEDIR := $(shell $(PG_CONFIG) --includedir)
PG_CPPFLAGS = -I$(CURDIR)/include -DSTATESMAN_VERSION='"$(EXTVERSION)"'
PG_CXXFLAGS = -std=c++17 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -Wno-register -fno-omit-frame-pointer
# The redis sink uses hiredis, the postgres sink libpq (as dblink and postgres_fdw do).
SHLIB_LINK  = -lhiredis -lpq -lstdc++

# Only the postgres sink sees libpq's headers (it never includes the server's).
src/sinks/postgres.o: CXXFLAGS += -I$(LIBPQ_INCLUDEDIR)

# No JIT bitcode: the C++ parts are not meant for LLVM inlining.
override with_llvm = no

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# The version is compiled in (STATESMAN_VERSION): a new version rebuilds everything.
$(OBJS): $(EXTENSION).control

# The install script is built from its sections (sql/install/NN_*.sql, in file-name order).
INSTALL_SECTIONS = $(sort $(wildcard sql/install/*.sql))
sql/$(EXTENSION)--$(EXTVERSION).sql: $(INSTALL_SECTIONS) $(EXTENSION).control
	awk 'FNR == 1 && NR != 1 { print "" } { print }' $(INSTALL_SECTIONS) >$@

.PHONY: test bench demo lint format
test:
	./scripts/test

bench:
	BENCH_WRITE_DOCS=1 ./scripts/bench

demo:
	./scripts/demo

# The C++ sources that .clang-format covers.
FORMAT_FILES = $(sort $(shell find src include examples $(wildcard test/unit) -name '*.cpp' -o -name '*.hpp' -o -name '*.h'))
CLANG_FORMAT ?= clang-format

format:
	$(CLANG_FORMAT) -i $(FORMAT_FILES)

lint:
	cppcheck --quiet --inline-suppr --error-exitcode=1 --enable=warning,performance,portability --std=c++17 -Iinclude src
	$(CLANG_FORMAT) --dry-run --Werror $(FORMAT_FILES)
