# fencing: PGXS build of a C++17 PostgreSQL extension.
#
#   make            build the module            make install   install it
#   make test       install what is missing, build, install, run every suite
#                   on a throwaway cluster (see tests/scripts/test.sh)
#   make test-ha    the full HA profile: fencing under Patroni (three nodes,
#                   one etcd) through switchovers, failovers and a zombie
#   make demo       the settlement-batch story on a throwaway cluster
#   make unit       only the pure C++ unit tests (no PostgreSQL needed)
#   make dist       the release archive fencing-<version>.zip (PGXN)
#
# Every path is taken from $(srcdir), so the build also works in a directory
# of its own (as Debian's pg_buildext builds, in build-<major>):
#   make -C build -f "$PWD/Makefile" VPATH="$PWD" PG_CONFIG=...

EXTENSION   = fencing
EXTVERSION  = 1.2
MODULE_big  = fencing

# Sources relative to the source directory; objects are made in the build
# directory under the same relative names.
fencing_src = $(sort $(patsubst $(srcdir)/%,%,$(wildcard $(srcdir)/$(1))))
CORE_SRCS = $(call fencing_src,src/core/*.cpp)
PG_SRCS   = $(call fencing_src,src/pg/*.cpp)
OBJS      = $(CORE_SRCS:.cpp=.o) $(PG_SRCS:.cpp=.o)

# The extension scripts. The install script of the current version,
# fencing--$(EXTVERSION).sql, is built from one source, sql/fencing.sql (the
# complete API of this version; CREATE EXTENSION runs it alone), into the
# build directory (not tracked; `make clean` removes it). Beside it, the
# released scripts, as they were released: the install script of 1.0 and the
# update scripts (fencing--<from>--<to>.sql), the path of ALTER EXTENSION
# fencing UPDATE from every earlier release. A change of an SQL object goes
# into sql/fencing.sql and into the current update script; the upgrade suite
# compares a database updated from every release with a fresh install.
EXTENSION_SCRIPT = sql/$(EXTENSION)--$(EXTVERSION).sql
DATA       = $(filter-out $(EXTENSION_SCRIPT),$(call fencing_src,sql/$(EXTENSION)--*.sql))
# An absolute name: a copy in the source directory (an earlier build there)
# is never taken for it through VPATH.
DATA_built = $(CURDIR)/$(EXTENSION_SCRIPT)
# README.md is installed as <docdir>/extension/fencing.md (a name of our own
# in the shared documentation directory; install-fencing-docs below).

# pg_regress: every sql/*.sql except the extension scripts and their source,
# in name order.
REGRESS      = $(patsubst sql/%.sql,%,$(filter-out sql/$(EXTENSION)--% sql/$(EXTENSION).sql,$(call fencing_src,sql/*.sql)))
# Each test creates the extension itself (00_smoke creates and drops it).
REGRESS_OPTS = --inputdir=$(srcdir)
ISOLATION      = $(patsubst tests/isolation/specs/%.spec,%,$(call fencing_src,tests/isolation/specs/*.spec))
ISOLATION_OPTS = --inputdir=$(srcdir)/tests/isolation --load-extension=fencing

PG_CPPFLAGS = -I$(srcdir)/src -DFENCING_VERSION='"$(EXTVERSION)"'
PG_CXXFLAGS = -std=c++17 -fvisibility=hidden -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -Wno-register
SHLIB_LINK  = -lstdc++

EXTRA_CLEAN = tests/unit/unit_tests results regression.diffs regression.out tests/isolation/output_iso output_iso

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs 2>/dev/null)
ifneq ($(wildcard $(PGXS)),)
# No LLVM bitcode for the JIT: it would need clang and gains nothing here.
override with_llvm = no
override autodepend = yes
include $(PGXS)
# Flags of the PostgreSQL build that this machine's compilers do not accept
# are left out: the packages of newer majors are built with newer compilers
# (PostgreSQL 17 and 18 pass -fexcess-precision=standard, which g++ before 13
# refuses for C++: an error, not a warning). One compiler call when every
# flag is accepted; one per flag otherwise (each with -Wformat, which
# -Werror=format-security needs beside it).
fencing_accepts = $(shell $(1) -Wformat $(2) -c -o /dev/null /dev/null >/dev/null 2>&1 && echo yes)
ifneq ($(call fencing_accepts,$(CXX) -x c++,$(CXXFLAGS)),yes)
override CXXFLAGS := $(foreach f,$(CXXFLAGS),$(if $(call fencing_accepts,$(CXX) -x c++,$(f)),$(f)))
endif
ifneq ($(call fencing_accepts,$(CC) -x c,$(CFLAGS)),yes)
override CFLAGS := $(foreach f,$(CFLAGS),$(if $(call fencing_accepts,$(CC) -x c,$(f)),$(f)))
endif
install: install-fencing-docs
uninstall: uninstall-fencing-docs
.PHONY: install-fencing-docs uninstall-fencing-docs
install-fencing-docs: installdirs
	$(MKDIR_P) '$(DESTDIR)$(docdir)/$(docmoduledir)'
	$(INSTALL_DATA) $(srcdir)/README.md '$(DESTDIR)$(docdir)/$(docmoduledir)/fencing.md'
uninstall-fencing-docs:
	rm -f '$(DESTDIR)$(docdir)/$(docmoduledir)/fencing.md'
else
srcdir = $(or $(VPATH),$(patsubst %/,%,$(dir $(firstword $(MAKEFILE_LIST)))))
all:
	@echo "pg_config / PGXS not found: install postgresql-server-dev-15 (make test and make demo do it for you)" >&2
	@exit 1
endif

# The install script of the current version: a copy of its source.
$(CURDIR)/$(EXTENSION_SCRIPT): sql/$(EXTENSION).sql
	@mkdir -p '$(@D)'
	cp $< '$@'

# A build in a directory of its own makes the object directories there
# first (as directories they would be found through VPATH in the source tree,
# so no rule could make them).
ifneq ($(abspath $(srcdir)),$(CURDIR))
$(shell mkdir -p $(sort $(dir $(OBJS))) tests/unit)
endif

# The lock-tag numbers are defined once, in src/pg/lock_tags.hpp; the
# extension scripts name the constant beside each number they write, and this
# check (before anything is compiled) fails when the two disagree.
.PHONY: check-lock-tags
check-lock-tags:
	@sh $(srcdir)/tests/scripts/check_lock_tags.sh $(srcdir)
$(OBJS): | check-lock-tags

# ---- pure C++ unit tests (GoogleTest), no PostgreSQL header involved -------
UNIT_SRCS = $(call fencing_src,tests/unit/*.cpp)
tests/unit/unit_tests: $(addprefix $(srcdir)/,$(UNIT_SRCS) $(CORE_SRCS)) $(wildcard $(srcdir)/src/core/*.hpp)
	$(CXX) -std=c++17 -O1 -g -Wall -Wextra -I$(srcdir)/src -o $@ $(addprefix $(srcdir)/,$(UNIT_SRCS) $(CORE_SRCS)) -lgtest -lgtest_main -pthread

# ---- the release archive (PGXN) ----------------------------------------------
# fencing-<version>.zip of the committed tree (DIST_REV, default HEAD), every
# file under fencing-<version>/, in the current directory; <version> is the
# control file's version as the three-part semantic version PGXN requires
# (1.2 is 1.2.0), and META.json must say the same.
DIST_REV     ?= HEAD
DISTVERSION   = $(EXTVERSION)$(if $(word 3,$(subst ., ,$(EXTVERSION))),,.0)
DISTNAME      = $(EXTENSION)-$(DISTVERSION)
.PHONY: dist
dist:
	@control=$$(sed -n "s/^default_version *= *'\(.*\)'.*/\1/p" $(srcdir)/$(EXTENSION).control); \
	if [ "$$control" != "$(EXTVERSION)" ]; then \
	  echo "$(EXTENSION).control says version $$control, the Makefile $(EXTVERSION)" >&2; exit 1; fi; \
	if ! git -C $(srcdir) show $(DIST_REV):META.json | grep -q '^   "version": "$(DISTVERSION)",$$'; then \
	  echo "META.json of $(DIST_REV) does not say \"version\": \"$(DISTVERSION)\"" >&2; exit 1; fi
	git -C $(srcdir) archive --format=zip --prefix=$(DISTNAME)/ -o $(CURDIR)/$(DISTNAME).zip $(DIST_REV)
	@echo "$(CURDIR)/$(DISTNAME).zip"

# One TAP file (or more) against the PostgreSQL that pg_config names, the
# PGXS way (as root or any user; the nodes are the files' own throwaway
# clusters, each preloading fencing):
#   make prove_installcheck PROVE_TESTS=tests/tap/076_supervisor.pl
PROVE_TESTS ?= tests/tap/*.pl
.PHONY: prove_installcheck
prove_installcheck:
	rm -rf '$(CURDIR)/tmp_check' && mkdir -p '$(CURDIR)/tmp_check'
	printf "shared_preload_libraries = 'fencing'\n" > '$(CURDIR)/tmp_check/preload.conf'
	cd $(srcdir) && TESTDIR='$(CURDIR)' TEMP_CONFIG='$(CURDIR)/tmp_check/preload.conf' \
	  PATH="$(bindir):$$PATH" PG_REGRESS='$(pgxsdir)/src/test/regress/pg_regress' \
	  $(PROVE) -I '$(pgxsdir)/src/test/perl' -I tests/tap $(PROVE_FLAGS) $(PROVE_TESTS)

# The C++ style (.clang-format; clang-format 14, Debian 12's): `make format`
# rewrites the files, `make format-check` (run by make test) fails on a diff.
FORMAT_SRCS = $(sort $(wildcard $(srcdir)/src/*/*.cpp $(srcdir)/src/*/*.hpp $(srcdir)/tests/unit/*.cpp))
.PHONY: format format-check
format:
	clang-format -i $(FORMAT_SRCS)
format-check:
	clang-format --dry-run --Werror $(FORMAT_SRCS)

.PHONY: unit test test-long test-ha demo bench
unit: tests/unit/unit_tests
	tests/unit/unit_tests

test:
	bash $(srcdir)/tests/scripts/test.sh quick

test-long:
	bash $(srcdir)/tests/scripts/test.sh long

test-ha:
	bash $(srcdir)/tests/scripts/test.sh ha

demo:
	bash $(srcdir)/tests/scripts/demo.sh

bench:
	bash $(srcdir)/tests/scripts/bench.sh
