# SPDX-License-Identifier: GPL-2.0-only
# Installation, the library, the release tarball (included by the Makefile).
#
#   make install [DESTDIR=...]   programs, libbtk (shared + static), its headers,
#                                btk.pc, man pages, doc/*.md, bash completions,
#                                and the fsck(8) helper $(sbindir)/fsck.btrfs
#   make uninstall [DESTDIR=...] removes exactly what install put there
#   make lib                     $(B)/libbtk.so.* and $(B)/libbtk.a only
#   make dist                    btk-VERSION.tar.xz: git's files plus ./configure
#
# libbtk is libfs/ (LGPL-2.1-or-later, libfs/COPYING), compiled once into
# position-independent objects ($(B)/pic/): the programs link them as libfs.a,
# libbtk.so and libbtk.a are made of the same ones. The public API is
# include/btk/*.h (doc/design.md, "The libfs API boundary"), installed as
# $(includedir)/btk/*.h; the headers left in libfs/ are the library's private
# side and are never installed.
#
# The programs go to $(bindir), as btrfs-progs' do. $(sbindir) (configure
# --sbindir, default $(exec_prefix)/sbin) holds one thing: fsck.btrfs, a
# symlink to btk-check, which is where e2fsprogs and btrfs-progs put their
# fsck(8) helpers (fsck -t btrfs runs the first fsck.btrfs on PATH, or in
# /sbin without PATH). An fsck.btrfs that is not btk's (btrfs-progs' script)
# is left alone and named; uninstall removes only btk's link. The Debian
# package does not ship it (debian/not-installed): btrfs-progs owns the name.

LIB_SOVERSION := 0
LIB_SO := libbtk.so.$(LIB_SOVERSION)
LIB_SO_FULL := $(LIB_SO).0.0
LIBBTK_SO := $(B)/$(LIB_SO_FULL)
LIBBTK_A := $(B)/libbtk.a
LIBFS_PIC_OBJ := $(patsubst %.c,$(B)/pic/%.o,$(LIBFS_SRC))
# every public header (btk/btk.h includes them all)
PUBLIC_HEADERS := $(wildcard include/btk/*.h)
PROGRAM_DOCS := $(wildcard doc/*.md) README.md LICENSING.md COPYING
COMPLETION := contrib/bash-completion/btk
PKGCONFIG_REQUIRES := blkid uuid liblz4 libisal libgcrypt libxxhash

$(B)/pic/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC [PIC] $<")
	$(Q)$(CC) $(ALL_CFLAGS) -fPIC -MMD -MP -c -o $@ $<

$(LIBBTK_SO): $(LIBFS_PIC_OBJ)
	$(CC) $(CFLAGS) $(LDFLAGS) -shared -Wl,-soname,$(LIB_SO) -o $@ $^ -Wl,--as-needed $(LIBS)
	ln -sf $(LIB_SO_FULL) $(B)/$(LIB_SO)
	ln -sf $(LIB_SO) $(B)/libbtk.so

$(LIBBTK_A): $(LIBFS_A)
	cp $< $@

# rewritten every time: make install prefix=... must not keep an older prefix
$(B)/btk.pc: install.mk config.mk FORCE
	@mkdir -p $(dir $@)
	printf '%s\n' 'prefix=$(prefix)' 'exec_prefix=$(exec_prefix)' 'libdir=$(libdir)' \
		'includedir=$(includedir)' '' 'Name: btk' \
		'Description: libbtk: read and write unmounted btrfs filesystems (the library of btk)' \
		'Version: $(VERSION)' 'Requires.private: $(PKGCONFIG_REQUIRES)' \
		'Libs: -L$${libdir} -lbtk' 'Libs.private: -lpthread' \
		'Cflags: -I$${includedir} -D_FILE_OFFSET_BITS=64 -D_DEFAULT_SOURCE' > $@

# not part of `make` (all), which compiles the same objects: this only links
lib: $(LIBBTK_SO) $(LIBBTK_A) $(B)/btk.pc

install: all lib
	install -d $(DESTDIR)$(bindir) $(DESTDIR)$(mandir)/man8 $(DESTDIR)$(libdir)/pkgconfig \
		$(DESTDIR)$(includedir)/btk $(DESTDIR)$(docdir) $(DESTDIR)$(bashcompletiondir)
	install -m 755 $(PROG_BINS) $(DESTDIR)$(bindir)
	$(if $(MANPAGES),install -m 644 $(MANPAGES) $(DESTDIR)$(mandir)/man8)
	install -m 755 $(LIBBTK_SO) $(DESTDIR)$(libdir)
	ln -sf $(LIB_SO_FULL) $(DESTDIR)$(libdir)/$(LIB_SO)
	ln -sf $(LIB_SO) $(DESTDIR)$(libdir)/libbtk.so
	install -m 644 $(LIBBTK_A) $(DESTDIR)$(libdir)
	install -m 644 $(B)/btk.pc $(DESTDIR)$(libdir)/pkgconfig
	install -m 644 $(PUBLIC_HEADERS) $(DESTDIR)$(includedir)/btk
	install -m 644 $(PROGRAM_DOCS) $(DESTDIR)$(docdir)
	install -m 644 libfs/COPYING $(DESTDIR)$(docdir)/COPYING.LGPL
	for p in $(PROGRAMS); do install -m 644 $(COMPLETION) $(DESTDIR)$(bashcompletiondir)/$$p; done
	$(call install_fsck_link)

uninstall:
	rm -f $(addprefix $(DESTDIR)$(bindir)/,$(PROGRAMS))
	rm -f $(addprefix $(DESTDIR)$(mandir)/man8/,$(notdir $(MANPAGES)))
	rm -f $(DESTDIR)$(libdir)/$(LIB_SO_FULL) $(DESTDIR)$(libdir)/$(LIB_SO) $(DESTDIR)$(libdir)/libbtk.so \
		$(DESTDIR)$(libdir)/libbtk.a $(DESTDIR)$(libdir)/pkgconfig/btk.pc
	rm -f $(addprefix $(DESTDIR)$(includedir)/btk/,$(notdir $(PUBLIC_HEADERS)))
	-rmdir $(DESTDIR)$(includedir)/btk 2>/dev/null
	rm -f $(addprefix $(DESTDIR)$(docdir)/,$(notdir $(PROGRAM_DOCS)) COPYING.LGPL)
	-rmdir $(DESTDIR)$(docdir) 2>/dev/null
	rm -f $(addprefix $(DESTDIR)$(bashcompletiondir)/,$(PROGRAMS))
	if [ "$$(readlink $(DESTDIR)$(sbindir)/fsck.btrfs)" = "$(bindir)/btk-check" ]; then \
		rm -f $(DESTDIR)$(sbindir)/fsck.btrfs; fi
	-rmdir $(DESTDIR)$(sbindir) 2>/dev/null

# $(sbindir)/fsck.btrfs -> $(bindir)/btk-check, unless another fsck.btrfs is there.
define install_fsck_link
	install -d $(DESTDIR)$(sbindir)
	@link=$(DESTDIR)$(sbindir)/fsck.btrfs; \
	if [ -e "$$link" -o -L "$$link" ] && [ "$$(readlink "$$link")" != "$(bindir)/btk-check" ]; then \
		echo "install: leaving $$link alone (not btk's: another package's fsck.btrfs)"; \
	else \
		echo "ln -sf $(bindir)/btk-check $$link"; ln -sf $(bindir)/btk-check "$$link"; \
	fi
endef

# The release tarball: the files git tracks at HEAD, plus ./configure (so that
# it builds with ./configure && make, without autoconf). Built from a clean
# export, not from the working tree.
DIST_NAME := $(PACKAGE_TARNAME)-$(VERSION)
dist:
	@git rev-parse --git-dir >/dev/null 2>&1 || { echo "make dist needs a git checkout"; exit 1; }
	rm -rf $(B)/dist && mkdir -p $(B)/dist
	git archive --format=tar --prefix=$(DIST_NAME)/ HEAD | tar -x -C $(B)/dist
	cd $(B)/dist/$(DIST_NAME) && autoreconf -fi >/dev/null 2>&1 && rm -rf autom4te.cache
	tar -C $(B)/dist -cJf $(DIST_NAME).tar.xz $(DIST_NAME)
	rm -rf $(B)/dist
	@echo "$(DIST_NAME).tar.xz"

.PHONY: lib install uninstall dist

FORCE:
