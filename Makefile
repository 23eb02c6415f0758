# btk: one non-recursive Makefile.  ./autogen.sh && ./configure && make
# Objects and programs go to $(B) (default build/); `make B=build-asan SANITIZE=yes`
# builds a second, sanitized tree beside the first.
-include config.mk
ifeq ($(wildcard config.mk),)
$(error run ./autogen.sh && ./configure first)
endif

B ?= build
PYTEST ?= python3 -m pytest
BASE_CFLAGS := -std=gnu11 -Wall -Wextra -Wshadow -Wno-unused-parameter -Wmissing-prototypes \
	-Wstrict-prototypes -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -I. $(WERROR) \
	-DBTK_VERSION='"$(VERSION)"'
ifeq ($(SANITIZE),yes)
BASE_CFLAGS += -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
LDFLAGS += -fsanitize=address,undefined
endif
ALL_CFLAGS = $(BASE_CFLAGS) $(DEP_CFLAGS) $(CFLAGS)
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
ifneq ($(wildcard tune/*.c),)
PROGRAMS += btk-tune btk-undo
btk-tune_SRC := $(filter-out tune/undo_main.c,$(wildcard tune/*.c))
btk-undo_SRC := tune/undo_main.c
endif

PROG_BINS := $(addprefix $(B)/,$(PROGRAMS))
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(B)/tests/unit/%,$(UNIT_SRC))
UNIT_HELPERS := $(filter-out $(UNIT_SRC),$(wildcard tests/unit/*.c))
MANPAGES := $(wildcard doc/*.8)

all: $(PROG_BINS)

$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

$(LIBFS_A): $(patsubst %.c,$(B)/%.o,$(LIBFS_SRC))
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

unit: $(UNIT_BINS)

# Unit tests, then the pytest suite (real filesystems; kernel tests need root).
check: all unit
	@set -e; for t in $(UNIT_BINS); do echo "== $$t"; $$t --jobs 2 --short-filename; done
	BTK_BUILD_DIR=$(abspath $(B)) $(PYTEST) -q tests/scripts $(PYTEST_ARGS)

# The same suite built with ASan + UBSan in build-asan/.
check-asan:
	$(MAKE) B=build-asan SANITIZE=yes check PYTEST_ARGS="$(PYTEST_ARGS)"

# Unit tests and a few tool runs under valgrind memcheck: zero errors, zero leaks.
check-valgrind: all unit
	tests/valgrind.sh $(abspath $(B)) $(UNIT_BINS)

# The sample filesystem (tests/images/make-sample.sh) for trying the tools.
$(B)/sample.img: tests/images/sample.img.xz
	@mkdir -p $(dir $@)
	xz -dc $< > $@

sample: $(B)/sample.img
.PHONY: sample

# What CI runs: everything.
check-all: check check-valgrind check-asan

install: all
	install -d $(DESTDIR)$(bindir) $(DESTDIR)$(mandir)/man8
	install -m 755 $(PROG_BINS) $(DESTDIR)$(bindir)
	$(if $(MANPAGES),install -m 644 $(MANPAGES) $(DESTDIR)$(mandir)/man8)

clean:
	rm -rf $(B) build-asan

.PHONY: all unit check check-asan check-valgrind check-all install clean
.SECONDARY:
-include $(shell find $(B) -name '*.d' 2>/dev/null)
