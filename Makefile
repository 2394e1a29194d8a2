# PGXS build of statesman (C++17). EXTVERSION comes from the control file only.
EXTENSION  = statesman
EXTVERSION = $(shell sed -n "s/^default_version *= *'\(.*\)'/\1/p" $(EXTENSION).control)

PG_CONFIG ?= pg_config

MODULE_big = statesman
OBJS = \
	src/module.o \
	src/pg/guard.o \
	src/pg/work.o \
	src/pg/jsonb_format.o \
	src/pg/bulk_insert.o \
	src/store/names.o \
	src/store/append.o \
	src/store/revision_hints.o \
	src/store/capture.o \
	src/feed/message_format.o \
	src/feed/message.o \
	src/feed/page.o \
	src/feed/ticks.o \
	src/feed/ticker.o \
	src/worker/worker_slots.o \
	src/worker/backoff.o \
	src/worker/launcher.o \
	src/worker/database_worker.o \
	src/worker/dispatcher.o \
	src/worker/backfill.o \
	src/sinks/io.o \
	src/sinks/sink_types.o \
	src/sinks/sink_options_sql.o \
	src/sinks/table.o \
	src/sinks/redis.o \
	src/sinks/postgres.o \
	src/sinks/routing.o \
	src/sinks/format.o \
	src/sinks/nats.o \
	src/sinks/kafka.o \
	src/sinks/rabbitmq.o \
	src/sinks/webhook_signature.o \
	src/sinks/webhook.o

# One full install script, built (below); the released versions' install scripts are not kept:
# the upgrade test takes them from git (make upgrade-bases, test/upgrade/releases).
DATA_built = sql/$(EXTENSION)--$(EXTVERSION).sql
DATA       = $(filter-out $(DATA_built), $(wildcard sql/$(EXTENSION)--*--*.sql))
EXTRA_CLEAN = sql/$(EXTENSION)--$(EXTVERSION).sql test/unit/build

LIBPQ_INCLUDEDIR := $(shell $(PG_CONFIG) --includedir)
PG_CPPFLAGS = -I$(CURDIR)/include -DSTATESMAN_VERSION='"$(EXTVERSION)"'
PG_CXXFLAGS = -std=c++17 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -Wno-register -fno-omit-frame-pointer
# The redis sink uses hiredis, the postgres sink libpq (as dblink and postgres_fdw do), the nats
# sink nats.c (libnats), the kafka sink librdkafka, the rabbitmq sink rabbitmq-c (librabbitmq), the
# webhook sink libcurl and OpenSSL's libcrypto (its HMAC-SHA256 signature).
SHLIB_LINK  = -lhiredis -lpq -lnats -lrdkafka -lrabbitmq -lcurl -lcrypto -lstdc++

# Only the postgres sink sees libpq's headers (it never includes the server's).
src/sinks/postgres.o: CXXFLAGS += -I$(LIBPQ_INCLUDEDIR)

# No JIT bitcode: the C++ parts are not meant for LLVM inlining.
override with_llvm = no

# Each object is rebuilt when a header it includes changes (PGXS's dependency tracking, .deps/):
# a class's layout that changed under objects built before would break at run time.
override autodepend = yes

# ---- Tests, in the PGXS layout ----------------------------------------------------------------
#   test/sql + test/expected   pg_regress, in test/schedule's order  (make installcheck)
#   test/specs + test/expected isolation                              (make installcheck)
#   test/t                     Perl TAP, own clusters                 (make prove_installcheck)
#   test/pgtap                 pgTAP (pg_prove; ./scripts/test pgtap)
#   test/unit                  C++ without a server                  (make unit)
# The top-level `expected` is a symlink to test/expected: the repository's layout keeps an
# expected/ at the top, while PGXS reads the files from test/ (--inputdir=test).
#
# installcheck runs against the server PGHOST/PGPORT name, which must preload the library with
# its workers off (test/statesman.conf; the tests drive delivery themselves with dispatch_once):
#   shared_preload_libraries = 'statesman'
#   statesman.enabled = off
# For a server without them, `make installcheck-temp` runs regress and isolation in throwaway
# instances that pg_regress starts with that file as --temp-config (as a non-root user).
REGRESS        = $(shell sed -n 's/^test: *//p' test/schedule)
REGRESS_OPTS   = --inputdir=test
ISOLATION      = $(sort $(basename $(notdir $(wildcard test/specs/*.spec))))
ISOLATION_OPTS = --inputdir=test
# The TAP tests start their own clusters (PostgreSQL::Test::Cluster) with the installed binaries;
# they cannot run as root. PROVE_TESTS picks some: make prove_installcheck PROVE_TESTS=test/t/002_delivery.pl
TAP_TESTS      = 1
PROVE_TESTS   ?= test/t/*.pl

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# The version is compiled in (STATESMAN_VERSION): a new version rebuilds everything.
$(OBJS): $(EXTENSION).control

# The install script is built from its sections (sql/install/NN_*.sql, in file-name order).
INSTALL_SECTIONS = $(sort $(wildcard sql/install/*.sql))
sql/$(EXTENSION)--$(EXTVERSION).sql: $(INSTALL_SECTIONS) $(EXTENSION).control
	awk 'FNR == 1 && NR != 1 { print "" } { print }' $(INSTALL_SECTIONS) >$@

# The helpers of the TAP tests (test/t/Statesman/*.pm).
PG_PROVE_FLAGS += -I $(CURDIR)/test/t

# PGXS's prove_installcheck, with the scratch directory settable (TAP_TESTDIR: tmp_check/ under
# it holds the clusters and their logs) and the source tree named for tests that build from it.
TAP_TESTDIR ?= $(CURDIR)
define prove_installcheck
rm -rf '$(TAP_TESTDIR)'/tmp_check && \
$(MKDIR_P) '$(TAP_TESTDIR)'/tmp_check && \
   TESTDIR='$(TAP_TESTDIR)' PATH="$(bindir):$$PATH" PGPORT='6$(DEF_PGPORT)' \
   STATESMAN_SOURCE_DIR='$(CURDIR)' PG_REGRESS='$(top_builddir)/src/test/regress/pg_regress' \
   $(PROVE) $(PG_PROVE_FLAGS) $(PROVE_FLAGS) $(PROVE_TESTS)
endef

.PHONY: prove_installcheck installcheck-temp upgrade-bases unit
prove_installcheck:
	$(prove_installcheck)

# Regress and isolation in temporary instances (initdb + a postmaster of the installed
# binaries, configured by test/statesman.conf), for when no suitable server runs.
installcheck-temp: upgrade-bases
ifdef REGRESS
	$(pg_regress_installcheck) --temp-instance=tmp_check --temp-config=test/statesman.conf \
	  $(REGRESS_OPTS) $(REGRESS)
endif
ifdef ISOLATION
	$(pg_isolation_regress_installcheck) --temp-instance=tmp_check_iso --temp-config=test/statesman.conf \
	  $(ISOLATION_OPTS) $(ISOLATION)
endif

# The released versions' install scripts, rebuilt from git for the upgrade test only
# (test/sql/upgrade.sql creates 0.1.0 and 0.3.0 and updates them): each is the release's
# sql/statesman.sql, from its tag, or from the commit test/upgrade/releases records when the
# clone has no tags. They go into the installation's extension directory (written only when
# they differ), never into sql/: the repository keeps one full install script.
UPGRADE_BASES = 0.1.0 0.3.0
EXTENSION_DIR = $(DESTDIR)$(datadir)/extension
upgrade-bases:
	@for v in $(UPGRADE_BASES); do \
	  f='$(EXTENSION_DIR)'/$(EXTENSION)--$$v.sql; tmp=$$(mktemp) || exit 1; \
	  if ! test/upgrade/base-script $$v >$$tmp; then \
	    rm -f $$tmp; test -f $$f || exit 1; echo "upgrade-bases: keeping the installed $$f"; continue; \
	  fi; \
	  cmp -s $$tmp $$f || { echo "upgrade-bases: $$f"; $(INSTALL_DATA) $$tmp $$f; } || { rm -f $$tmp; exit 1; }; \
	  rm -f $$tmp; \
	done
installcheck: upgrade-bases

# Unit tests of the C++ that needs no server (plain g++; the conninfo redaction links libpq,
# the client library). Each test/unit/test_*.cpp is one program printing TAP.
UNIT_TESTS   = $(patsubst test/unit/%.cpp,test/unit/build/%,$(wildcard test/unit/test_*.cpp))
UNIT_SOURCES = src/worker/backoff.cpp src/feed/message_format.cpp src/store/names.cpp \
               src/sinks/io.cpp src/sinks/postgres.cpp src/sinks/routing.cpp src/sinks/format.cpp \
               src/sinks/webhook_signature.cpp
UNIT_CXXFLAGS = -std=c++17 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -O1 -g \
                -Iinclude -Itest/unit
test/unit/build/%.o: src/%.cpp $(wildcard include/statesman/*.hpp include/statesman/*/*.hpp)
	@$(MKDIR_P) $(dir $@)
	$(CXX) $(UNIT_CXXFLAGS) $(if $(filter sinks/postgres,$*),-I$(LIBPQ_INCLUDEDIR)) -c -o $@ $<
test/unit/build/test_%: test/unit/test_%.cpp test/unit/tap.hpp $(wildcard include/statesman/*.hpp include/statesman/*/*.hpp) \
                        $(patsubst src/%.cpp,test/unit/build/%.o,$(UNIT_SOURCES))
	$(CXX) $(UNIT_CXXFLAGS) -o $@ $< $(patsubst src/%.cpp,test/unit/build/%.o,$(UNIT_SOURCES)) -lpq -lcrypto
unit: $(UNIT_TESTS)
	@failed=0; for t in $(UNIT_TESTS); do echo "# $$t"; $$t || failed=1; done; exit $$failed

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
