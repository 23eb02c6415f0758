# SPDX-License-Identifier: GPL-2.0-only
# btk: one non-recursive Makefile.  ./autogen.sh && ./configure && make
# Objects and programs go to $(B) (default build/); `make B=build-asan SANITIZE=yes`
# builds a second, sanitized tree beside the first.
-include config.mk
ifeq ($(wildcard config.mk),)
$(error run ./autogen.sh && ./configure first)
endif

B ?= build
# Debian's python3 (scripts/install-deps installs pytest and pytest-xdist for it)
# rather than whatever python3 comes first in PATH.
PYTHON ?= $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3)
PYTEST ?= $(PYTHON) -m pytest
# Four test workers when pytest-xdist is there: the suite mostly waits on the kernel
# (loop devices, mounts, syncs), so even on 2 cores 4 workers halve its time.
PYTEST_JOBS ?= $(shell $(PYTHON) -c 'import xdist' 2>/dev/null && echo "-n 4")
BASE_CFLAGS := -std=gnu11 -Wall -Wextra -Wshadow -Wno-unused-parameter -Wmissing-prototypes \
	-Wstrict-prototypes -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -I. -Iinclude $(WERROR) \
	-DBTK_VERSION='"$(VERSION)"'
ifeq ($(SANITIZE),yes)
BASE_CFLAGS += -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
LDFLAGS += -fsanitize=address,undefined
# What the sanitizers advise (-O1), with line tables only (-g1: a report still names
# file and line): it compiles in 55 % of the time -O2 -g takes, and the suite
# that runs on it spends its time in the kernel and the reference tools, not in btk.
SANITIZE_OPT ?= -O1 -g1
endif
ALL_CFLAGS = $(BASE_CFLAGS) $(PRIVATE_CFLAGS) $(DEP_CFLAGS) $(CPPFLAGS) $(CFLAGS) $(SANITIZE_OPT)
# libfs's private side (doc/design.md, "The libfs API boundary"): libfs, its
# tests and the program files scripts/api-check allows (its ALLOW table; it
# fails when this list differs) see the members of struct fs_info that
# programs read through functions.
LIBFS_PRIVATE_PROGRAM_SRC :=
$(B)/libfs/%.o $(B)/pic/libfs/%.o $(B)/tests/%.o: PRIVATE_CFLAGS = -DBTK_LIBFS_PRIVATE
$(patsubst %.c,$(B)/%.o,$(LIBFS_PRIVATE_PROGRAM_SRC)): PRIVATE_CFLAGS = -DBTK_LIBFS_PRIVATE
LIBS = -lpthread $(DEP_LIBS)

LIBFS_SRC := $(wildcard libfs/*.c)
COMMON_SRC := $(wildcard common/*.c)
LIBFS_A := $(B)/libfs.a
COMMON_A := $(B)/libcommon.a

# Every program is the .c files of its directory (minus other programs' mains).
PROGRAMS := btk-inspect
btk-inspect_SRC := $(wildcard inspect/*.c)
ifneq ($(wildcard check/*.c),)
PROGRAMS += btk-check
btk-check_SRC := $(wildcard check/*.c)
endif
ifneq ($(wildcard convert/*.c),)
PROGRAMS += btk-convert
btk-convert_SRC := $(wildcard convert/*.c)
endif
ifneq ($(wildcard image/*.c),)
PROGRAMS += btk-image
btk-image_SRC := $(wildcard image/*.c)
endif
ifneq ($(wildcard tune/tune_main.c),)
PROGRAMS += btk-tune
btk-tune_SRC := $(filter-out tune/undo_main.c,$(wildcard tune/*.c))
endif
ifneq ($(wildcard tune/undo_main.c),)
PROGRAMS += btk-undo
btk-undo_SRC := tune/undo_main.c
endif

PROG_BINS := $(addprefix $(B)/,$(PROGRAMS))
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(B)/tests/unit/%,$(UNIT_SRC))
UNIT_HELPERS := $(filter-out $(UNIT_SRC),$(wildcard tests/unit/*.c))
MANPAGES := $(wildcard doc/*.8)

all: $(PROG_BINS)

# `make V=1` shows the full commands.
ifeq ($(V),1)
Q :=
else
Q := @
endif

$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

# libfs is compiled once, position-independent ($(B)/pic/, rule in install.mk):
# the programs link it as libfs.a, and libbtk.so and libbtk.a are the same
# objects, so `make install` (and a package build) compiles no source twice.
$(LIBFS_A): $(patsubst %.c,$(B)/pic/%.o,$(LIBFS_SRC))
	@rm -f $@
	$(AR) rcs $@ $^

$(COMMON_A): $(patsubst %.c,$(B)/%.o,$(COMMON_SRC))
	@rm -f $@
	$(AR) rcs $@ $^

define program_rule
$(B)/$(1): $(patsubst %.c,$(B)/%.o,$($(1)_SRC)) $(COMMON_A) $(LIBFS_A)
	$$(CC) $$(LDFLAGS) -o $$@ $$^ $$(LIBS)
endef
$(foreach p,$(PROGRAMS),$(eval $(call program_rule,$(p))))

$(B)/tests/unit/test_%: $(B)/tests/unit/test_%.o $(patsubst %.c,$(B)/%.o,$(UNIT_HELPERS)) $(COMMON_A) $(LIBFS_A)
	$(CC) $(LDFLAGS) -o $@ $^ $(CRITERION_LIBS) $(LIBS)

# Unit tests of image/ modules link the objects they test.
$(B)/tests/unit/test_sanitize: $(B)/image/sanitize.o $(B)/image/sanitize_map.o $(B)/image/map_arena.o $(B)/image/name_forge.o
$(B)/tests/unit/test_fmt_btrfs_image: $(B)/image/fmt_btrfs_image.o $(B)/image/imgio.o
$(B)/tests/unit/test_restore_held: $(B)/image/held.o
# The problem registry's test compares it with the repair classes: btk-check's objects but its main.
CHECK_OBJS_NO_MAIN = $(filter-out $(B)/check/main.o,$(patsubst %.c,$(B)/%.o,$(wildcard check/*.c)))
$(B)/tests/unit/test_problems: $(B)/tests/unit/test_problems.o $(CHECK_OBJS_NO_MAIN) $(COMMON_A) $(LIBFS_A)
	$(CC) $(LDFLAGS) -o $@ $^ $(CRITERION_LIBS) $(LIBS)

unit: $(UNIT_BINS)

# A limit per unit-test binary (instead of criterion's per-test .timeout,
# whose watchdog leaks in the runner when tests run in parallel: LeakSanitizer
# reports it under check-asan).
UNIT_TIMEOUT ?= 900
# UNIT_RUN=no: build the unit tests but leave running them to another pass
# (check-all: check-valgrind runs each under memcheck, failing on its exit status)
UNIT_RUN ?= yes

# Unit tests, then the pytest suite (real filesystems; kernel tests need root).
check: all unit
	scripts/spdx-check
	$(PYTHON) scripts/file-cycles $(B)
	scripts/api-check
	@set -e; [ "$(UNIT_RUN)" = no ] || for t in $(UNIT_BINS); do echo "== $$t"; \
		timeout $(UNIT_TIMEOUT) $$t --jobs 2 --short-filename; done
	BTK_BUILD_DIR=$(abspath $(B)) $(PYTEST) -q --durations=15 $(PYTEST_JOBS) tests/scripts $(PYTEST_SKIP_FUZZ) $(PYTEST_ARGS)

# The same suite built with ASan + UBSan in build-asan/, minus the tests marked slow
# (crash replays, big images, packaging: they exercise the reference tools or the
# build more than btk's code), those marked no_sanitize (no btk code to judge) and
# those marked extended (check-extended's). The fuzz replays run here, linked from
# these objects.
check-asan:
	$(MAKE) B=build-asan SANITIZE=yes FUZZ_REPLAY=yes check PYTEST_ARGS="-m 'not slow and not no_sanitize and not extended' $(PYTEST_ARGS)"

# The wider damage matrices (tests marked extended: every tree and position
# of a damage kind CI tests a few cells of); minutes, so not part of check-all.
check-extended: all unit test-tools
	BTK_BUILD_DIR=$(abspath $(B)) $(PYTEST) -q $(PYTEST_JOBS) -m extended tests/scripts $(PYTEST_ARGS)

# The unit tests memcheck runs: those of code whose bytes reach a disk or an
# image (tree building, transactions, the I/O stack, undo,
# write log, image writers). Memcheck's uninitialised-byte tracking, which
# ASan lacks, guards exactly what is written; each process costs it ~1.5 s of
# start-up, so the read-only tests are left to the ASan + UBSan pass, which
# runs every unit test. The sorter's spill files (recsort) are left there too:
# only the sorter reads them back, and it cost memcheck two minutes.
VALGRIND_UNITS := backref block block_salvage chunk_alloc csum_tree ctree_ops ctree_split fmt_btrfs_image \
	free_space_tree io io_batch leaf_build restore_held sanitize super trans trans_drop undo \
	uuid_tree wlog
VALGRIND_UNIT_BINS := $(patsubst %,$(B)/tests/unit/test_%,$(VALGRIND_UNITS))
$(if $(filter-out $(UNIT_SRC),$(patsubst %,tests/unit/test_%.c,$(VALGRIND_UNITS))),\
	$(error VALGRIND_UNITS names a unit test that does not exist: \
		$(filter-out $(UNIT_SRC),$(patsubst %,tests/unit/test_%.c,$(VALGRIND_UNITS)))))

# Those unit tests and a few tool runs under valgrind memcheck: zero errors, zero leaks.
check-valgrind: all unit
	tests/valgrind.sh $(abspath $(B)) $(VALGRIND_UNIT_BINS)

# The sample filesystem (tests/images/make-sample.sh) for trying the tools.
$(B)/sample.img: tests/images/sample.img.xz
	@mkdir -p $(dir $@)
	xz -dc $< > $@

sample: $(B)/sample.img
.PHONY: sample

# What CI runs: everything, each thing once. Every test runs in the build that
# can judge most: the sanitized pass runs the unit tests, the fuzz replays and
# every pytest test a sanitizer can judge; the plain pass runs the rest (the
# tests marked slow or no_sanitize), so no test runs twice; valgrind runs the
# unit tests and a few tool runs on the plain build, beside the sanitized pass:
# valgrind keeps the CPU busy while the suite waits on loop devices and mounts
# (its output is printed when both are done; either failing fails check-all).
# The sanitized tree is compiled (niced) while the plain pass runs, for the same
# reason: that pass mostly waits on the kernel, and the compile was the longest
# stretch of the sanitized pass.
ASAN_BUILD_GOALS := all unit test-tools fuzz-replay
check-all:
	@mkdir -p $(B); rm -f $(B)/asan-build.log $(B)/asan-build.rc; \
	{ nice -n 10 $(MAKE) -j2 --no-print-directory B=build-asan SANITIZE=yes FUZZ_REPLAY=yes \
	    $(ASAN_BUILD_GOALS) >$(B)/asan-build.log 2>&1; echo $$? >$(B)/asan-build.rc; } & \
	plain=0; $(MAKE) -j2 check FUZZ_REPLAY=no UNIT_RUN=no \
	    PYTEST_ARGS="-m '(slow or no_sanitize) and not extended' $(PYTEST_ARGS)" || plain=$$?; \
	wait; echo "== sanitized build (ran beside the plain pass): exit $$(cat $(B)/asan-build.rc)"; \
	tail -n 3 $(B)/asan-build.log; [ $$plain -eq 0 ]
	@rm -f $(B)/check-valgrind.log $(B)/check-valgrind.rc; \
	{ $(MAKE) --no-print-directory check-valgrind >$(B)/check-valgrind.log 2>&1; \
	  echo $$? >$(B)/check-valgrind.rc; } & \
	asan=0; $(MAKE) check-asan || asan=$$?; wait; \
	echo "== check-valgrind (ran beside check-asan)"; cat $(B)/check-valgrind.log; \
	vg=$$(cat $(B)/check-valgrind.rc 2>/dev/null || echo 1); \
	echo "check-asan: exit $$asan, check-valgrind: exit $$vg"; [ $$asan -eq 0 ] && [ $$vg -eq 0 ]

# install, uninstall, lib (libbtk.so/.a, btk.pc), dist
include install.mk

clean:
	rm -rf $(B) build-asan

.PHONY: all unit check check-asan check-valgrind check-all check-extended install clean
.SECONDARY:
-include $(shell find $(B) -name '*.d' 2>/dev/null)

# ---------------------------------------------------------------------------
# Fuzzing (fuzz/): libFuzzer harnesses, and the replay of the inputs they
# ever crashed on (tests/images/fuzz/<harness>/) as a regression test.
#   make fuzz                  clang + libFuzzer + ASan/UBSan: $(B)/fuzz/fuzz_*
#   make check-fuzz-regress    $(CC) + ASan/UBSan replay of the kept inputs
# Run a fuzzer:  $(B)/fuzz/fuzz_image -max_total_time=600 CORPUS_DIR tests/images/fuzz/image
# The library sources are compiled here for each flavour (not taken from
# $(B)/*.o) and archived, so a harness links only what it uses.
FUZZ_CC ?= $(or $(shell command -v clang 2>/dev/null),$(shell command -v clang-14 2>/dev/null),clang)
FUZZ_HARNESSES := image items
FUZZ_LIB_SRC = $(LIBFS_SRC) $(COMMON_SRC) inspect/item_json.c
# fuzz/base.c: the patched base filesystems of fuzz_image and fuzz_check
FUZZ_LIB_SRC += fuzz/base.c
# fuzz_check: every read-only phase of btk-check (check/*.c but its main)
FUZZ_HARNESSES += check
FUZZ_LIB_SRC += $(filter-out check/main.c,$(wildcard check/*.c))
# fuzz_imgfile: the image readers of btk-image (and the sanitizer behind them)
ifneq ($(wildcard image/fmt_btk_read.c),)
FUZZ_HARNESSES += imgfile
FUZZ_LIB_SRC += image/fmt_btrfs_image.c image/fmt_btk_read.c image/fmt_btk_write.c image/imgio.c \
	image/sanitize.c image/sanitize_map.c image/map_arena.c image/name_forge.c
endif
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
# the filesystems fuzz_image patches (tests/images/fuzz/make-base.sh)
FUZZ_BASE := $(B)/fuzz/base.img
FUZZ_RAID_BASE := $(B)/fuzz/raid-1.img $(B)/fuzz/raid-2.img $(B)/fuzz/raid-3.img
fuzz_colon_list = $(subst $(eval) ,:,$(strip $(abspath $(1))))
FUZZ_CFLAGS = $(filter-out $(WERROR),$(BASE_CFLAGS)) -DBTK_LIBFS_PRIVATE $(DEP_CFLAGS) -g -O1 \
	-DBTK_FUZZ_BASE_DEFAULT='"$(abspath $(FUZZ_BASE))"' \
	-DBTK_FUZZ_RAID_DEFAULT='"$(call fuzz_colon_list,$(FUZZ_RAID_BASE))"'

$(B)/fuzz/%.img: tests/images/fuzz/%.img.xz
	@mkdir -p $(dir $@)
	xz -dc $< > $@.tmp && mv $@.tmp $@

$(B)/fuzz/clang/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link $(FUZZ_SAN) -MMD -MP -c -o $@ $<

$(B)/fuzz/cc/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(FUZZ_CFLAGS) $(FUZZ_SAN) -MMD -MP -c -o $@ $<

$(B)/fuzz/lib-clang.a: $(patsubst %.c,$(B)/fuzz/clang/%.o,$(FUZZ_LIB_SRC))
	@rm -f $@
	$(AR) rcs $@ $^

$(B)/fuzz/lib-cc.a: $(patsubst %.c,$(B)/fuzz/cc/%.o,$(FUZZ_LIB_SRC))
	@rm -f $@
	$(AR) rcs $@ $^

$(B)/fuzz/fuzz_%: $(B)/fuzz/clang/fuzz/fuzz_%.o $(B)/fuzz/lib-clang.a
	$(FUZZ_CC) -fsanitize=fuzzer $(FUZZ_SAN) -o $@ $^ $(LIBS)

# The replays: in a sanitized build ($(B) is build-asan: check-asan) from its own
# objects, so that check-all compiles the library with ASan once, not twice;
# in a plain build from objects of their own (lib-cc.a).
ifeq ($(SANITIZE),yes)
# the harnesses may use libfs' private side (scripts/api-check)
$(B)/fuzz/asan/%.o: PRIVATE_CFLAGS = -DBTK_LIBFS_PRIVATE
$(B)/fuzz/asan/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(filter-out $(WERROR),$(ALL_CFLAGS)) -DBTK_FUZZ_BASE_DEFAULT='"$(abspath $(FUZZ_BASE))"' \
		-DBTK_FUZZ_RAID_DEFAULT='"$(call fuzz_colon_list,$(FUZZ_RAID_BASE))"' -MMD -MP -c -o $@ $<

FUZZ_ASAN_OBJS = $(patsubst %.c,$(B)/%.o,$(filter-out fuzz/base.c $(LIBFS_SRC) $(COMMON_SRC),$(FUZZ_LIB_SRC))) \
	$(B)/fuzz/asan/fuzz/base.o $(COMMON_A) $(LIBFS_A)
$(B)/fuzz/replay_%: $(B)/fuzz/asan/fuzz/replay.o $(B)/fuzz/asan/fuzz/fuzz_%.o $(FUZZ_ASAN_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)
else
$(B)/fuzz/replay_%: $(B)/fuzz/cc/fuzz/replay.o $(B)/fuzz/cc/fuzz/fuzz_%.o $(B)/fuzz/lib-cc.a
	$(CC) $(FUZZ_SAN) -o $@ $^ $(LIBS)
endif

fuzz: $(addprefix $(B)/fuzz/fuzz_,$(FUZZ_HARNESSES)) $(FUZZ_BASE) $(FUZZ_RAID_BASE)

fuzz-replay: $(addprefix $(B)/fuzz/replay_,$(FUZZ_HARNESSES)) $(FUZZ_BASE) $(FUZZ_RAID_BASE)

check-fuzz-regress: fuzz-replay
	@set -e; for h in $(FUZZ_HARNESSES); do \
		echo "== replay_$$h tests/images/fuzz/$$h"; \
		ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		BTK_FUZZ_BASE=$(abspath $(FUZZ_BASE)) BTK_FUZZ_RAID_BASE=$(call fuzz_colon_list,$(FUZZ_RAID_BASE)) \
		$(B)/fuzz/replay_$$h tests/images/fuzz/$$h 2>$(B)/fuzz/replay_$$h.log \
			|| { tail -n 60 $(B)/fuzz/replay_$$h.log; exit 1; }; \
		echo "   $$(grep -c '^replay: ' $(B)/fuzz/replay_$$h.log) inputs, no sanitizer report"; \
	done

.PHONY: fuzz fuzz-replay check-fuzz-regress
# ------------------------------------------------------------ end of fuzzing

# ---------------------------------------------------------------------------
# Test tools (tests/tools/): programs the pytest suite drives.
#   btk-wlog-replay   count / replay crash states of a write log (include/btk/wlog.h)
#   btk-corrupt       damage an image on purpose (tests/images/corrupt/README.md)
#   btk-trans-xattr   add xattrs to a file through libfs transactions
#   btk-craft         insert/replace/delete raw items (layouts the kernel no longer writes)
TEST_TOOLS := $(B)/tests/tools/btk-wlog-replay $(B)/tests/tools/btk-corrupt $(B)/tests/tools/btk-trans-xattr \
	$(B)/tests/tools/btk-craft

$(B)/tests/tools/btk-corrupt: $(B)/tests/tools/btk_corrupt.o $(B)/tests/tools/btk_corrupt_fields.o \
		$(COMMON_A) $(LIBFS_A)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

$(B)/tests/tools/btk-wlog-replay: $(B)/tests/tools/wlog_replay.o $(COMMON_A) $(LIBFS_A)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

$(B)/tests/tools/btk-trans-xattr: $(B)/tests/tools/trans_xattr.o $(COMMON_A) $(LIBFS_A)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

$(B)/tests/tools/btk-craft: $(B)/tests/tools/craft.o $(COMMON_A) $(LIBFS_A)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

test-tools: $(TEST_TOOLS)
# The fuzz replays are ASan + UBSan builds whatever the flavour. `make check`
# builds and runs them; check-all leaves them to its sanitized pass
# (FUZZ_REPLAY=no for the plain one), which links them from the objects it
# has compiled anyway.
FUZZ_REPLAY ?= yes
ifeq ($(FUZZ_REPLAY),yes)
check: test-tools fuzz-replay
else
check: test-tools
PYTEST_SKIP_FUZZ := --ignore=tests/scripts/test_fuzz_regress.py
endif

.PHONY: test-tools
# -------------------------------------------------------- end of test tools
