# fencing: PGXS build of a C++17 PostgreSQL extension.
#
#   make            build the module            make install   install it
#   make test       install what is missing, build, install, run every suite
#                   on a throwaway cluster (see tests/scripts/test.sh)
#   make test-ha    the full HA profile: fencing under Patroni (three nodes,
#                   one etcd) through switchovers, failovers and a zombie
#   make demo       the settlement-batch story on a throwaway cluster
#   make unit       only the pure C++ unit tests (no PostgreSQL needed)

EXTENSION   = fencing
EXTVERSION  = 1.2
MODULE_big  = fencing

CORE_SRCS = $(wildcard src/core/*.cpp)
PG_SRCS   = $(wildcard src/pg/*.cpp)
OBJS      = $(CORE_SRCS:.cpp=.o) $(PG_SRCS:.cpp=.o)

# Every extension script: the install script of the first release and the
# update scripts of every later one (fencing--<from>--<to>.sql). A new version
# ships as an update script only; CREATE EXTENSION of it runs the chain.
DATA      = $(sort $(wildcard sql/fencing--*.sql))
# Installed as <docdir>/extension/fencing.md: a name of our own in the
# shared documentation directory (a copy of README.md, made by the build).
DOCS      = docs/fencing.md

# pg_regress: every sql/*.sql except the install script, in name order.
REGRESS      = $(sort $(patsubst sql/%.sql,%,$(filter-out sql/fencing--%,$(wildcard sql/*.sql))))
# Each test creates the extension itself (00_smoke creates and drops it).
REGRESS_OPTS = --inputdir=.
ISOLATION      = $(sort $(patsubst tests/isolation/specs/%.spec,%,$(wildcard tests/isolation/specs/*.spec)))
ISOLATION_OPTS = --inputdir=tests/isolation --load-extension=fencing

PG_CPPFLAGS = -I$(srcdir)/src -DFENCING_VERSION='"$(EXTVERSION)"'
PG_CXXFLAGS = -std=c++17 -fvisibility=hidden -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -Wno-register
SHLIB_LINK  = -lstdc++

EXTRA_CLEAN = tests/unit/unit_tests results regression.diffs regression.out tests/isolation/output_iso docs/fencing.md

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs 2>/dev/null)
ifneq ($(wildcard $(PGXS)),)
# No LLVM bitcode for the JIT: it would need clang and gains nothing here.
override with_llvm = no
override autodepend = yes
include $(PGXS)
# PGXS installs DOCS under their file names but uninstalls them by their
# path in this tree (docs/fencing.md): remove the installed file itself.
uninstall: uninstall-fencing-docs
.PHONY: uninstall-fencing-docs
uninstall-fencing-docs:
	rm -f '$(DESTDIR)$(docdir)/$(docmoduledir)/fencing.md'
else
all:
	@echo "pg_config / PGXS not found: install postgresql-server-dev-15 (make test and make demo do it for you)" >&2
	@exit 1
endif

all: docs/fencing.md

# The lock-tag numbers are defined once, in src/pg/lock_tags.hpp; the
# extension scripts name the constant beside each number they write, and this
# check (before anything is compiled) fails when the two disagree.
.PHONY: check-lock-tags
check-lock-tags:
	@sh $(srcdir)/tests/scripts/check_lock_tags.sh $(srcdir)
$(OBJS): | check-lock-tags
docs/fencing.md: README.md
	cp $< $@

# ---- pure C++ unit tests (GoogleTest), no PostgreSQL header involved -------
UNIT_SRCS = $(wildcard tests/unit/*.cpp)
tests/unit/unit_tests: $(UNIT_SRCS) $(CORE_SRCS) $(wildcard src/core/*.hpp)
	$(CXX) -std=c++17 -O1 -g -Wall -Wextra -Isrc -o $@ $(UNIT_SRCS) $(CORE_SRCS) -lgtest -lgtest_main -pthread

.PHONY: unit test test-long test-ha demo bench
unit: tests/unit/unit_tests
	tests/unit/unit_tests

test:
	bash tests/scripts/test.sh quick

test-long:
	bash tests/scripts/test.sh long

test-ha:
	bash tests/scripts/test.sh ha

demo:
	bash tests/scripts/demo.sh

bench:
	bash tests/scripts/bench.sh
