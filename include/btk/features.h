/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The feature gate: which superblock feature flags btk reads, which it also
 * writes, and what it does with the ones it does not know. Every program
 * opens through fs_open, which asks here; nothing else decides. Pure
 * lookups over a table: nothing here prints or allocates. */
#ifndef BTK_FEATURES_H
#define BTK_FEATURES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum feature_set { FEATURE_COMPAT, FEATURE_COMPAT_RO, FEATURE_INCOMPAT };

enum feature_support {
	FEATURE_RW,        /* read, checked and kept consistent by every writer */
	FEATURE_READ_ONLY, /* read (maybe partly interpreted), never written */
};

struct feature_desc {
	enum feature_set set;
	uint64_t bit;
	const char *name;      /* as mkfs.btrfs -O and btk messages spell it */
	const char *dump_name; /* as dump-super -f prints it */
	enum feature_support support;
	/* FEATURE_READ_ONLY: why btk does not write it */
	const char *why;
	/* btk reads the filesystem but does not interpret what the feature adds:
	 * a reader should say that its results may be incomplete */
	bool partly_read;
};

/* The table row of one bit, or NULL when btk does not know it. */
const struct feature_desc *feature_lookup(enum feature_set set, uint64_t bit);
/* The bits of flags that btk does not know. */
uint64_t features_unknown(enum feature_set set, uint64_t flags);
/* The known bits of flags that btk reads but does not write. */
uint64_t features_read_only(enum feature_set set, uint64_t flags);
/* The known bits of flags whose structures btk does not interpret. */
uint64_t features_partly_read(enum feature_set set, uint64_t flags);
/* "name (0x..), unknown 0x..." for the bits of flags, into buf; returns buf. */
const char *features_list(enum feature_set set, uint64_t flags, char *buf, size_t len);
/* dump-super -f style names of each bit ("FREE_SPACE_TREE", or "unknown
 * flag: 0x..." for a bit btk does not know), one call per set bit: the i-th name,
 * or NULL past the last. */
const char *features_dump_name(enum feature_set set, uint64_t flags, unsigned i, char *buf, size_t len);
/* Whether a superblock with these flags may be read: 0, or -EOPNOTSUPP with
 * msg naming the incompat bits btk does not know (nothing opens then). */
int features_check_read(uint64_t incompat, char *msg, size_t len);
/* Whether it may be written: 0, or -EOPNOTSUPP with msg naming every bit
 * that forbids it (unknown incompat or compat_ro bits, known read-only ones). */
int features_check_write(uint64_t incompat, uint64_t compat_ro, char *msg, size_t len);

#endif
