/* SPDX-License-Identifier: GPL-2.0-only */
/* Internal interface of the filesystem-tree checks (phase_fs*.c) and the
 * subvolume checks (phase_roots.c): the records they emit for the joins, and
 * a sorted-group reader over one recsort stream. */
#ifndef BTK_CHECK_FS_CHECK_H
#define BTK_CHECK_FS_CHECK_H

#include <stdint.h>

#include "check/check.h"
#include <btk/key.h>
#include <btk/recsort.h>
#include <btk/tree.h>

/* One side of a name join. Sorted by (root, dir, key[, fp]), then kind.
 * Names are compared by length and a 64-bit fingerprint, so records stay
 * small whatever the name length. */
struct link_rec {
	uint64_t root;      /* subvolume tree the name lives in */
	uint64_t dir;       /* parent directory inode */
	uint64_t key;       /* dir index, or name hash */
	uint64_t fp;        /* name fingerprint */
	uint64_t child;     /* inode (or subvolume) the name points at */
	uint64_t index;     /* index number the ref carries (hash join) */
	uint16_t name_len;
	uint8_t kind;       /* enum link_kind */
	uint8_t type;       /* BTRFS_FT_* of the entry, or of the inode's mode */
	uint32_t flags;     /* LINK_F_* */
	uint32_t lineage;   /* snapshot lineage of root (snap_plan.h): sorted by it instead of root */
	uint32_t seq;       /* root's place in it: versions of one group are adjacent */
};
#define LINK_F_NO_INODE 1   /* a ref of an inode that has no inode item */
#define LINK_F_GONE 2       /* not in this snapshot any more: the record before it (snap_plan.h) */
/* inode flags the kernel knows: any other makes it refuse the leaf (ro flags: on a rw mount) */
#define INODE_KNOWN_FLAGS (0xfffULL | BTRFS_INODE_ROOT_ITEM_INIT | (1ULL << 32) /* ro: verity */)
/* The file type an inode's own items give when the type of its mode
 * contradicts them, else BTRFS_FT_UNKNOWN: a directory never has file
 * extents, only a directory has entries of its own, and a symlink has no
 * regular extent. Items of one kind only say which (a file's: regular or
 * symlink, see the caller). */
static inline uint8_t inode_type_by_items(uint8_t ftype, bool entries, bool extents, bool regular)
{
	if (ftype == BTRFS_FT_DIR && extents && !entries)
		return BTRFS_FT_REG_FILE;
	/* (a symlink's target is one inline extent) */
	if (ftype == BTRFS_FT_SYMLINK && regular && !entries)
		return BTRFS_FT_REG_FILE;
	if (ftype != BTRFS_FT_DIR && ftype != BTRFS_FT_UNKNOWN && entries && !extents)
		return BTRFS_FT_DIR;
	return BTRFS_FT_UNKNOWN;
}

/* Whether inode flags make a file NODATASUM: not when they hold bits no
 * kernel knows (the field is damaged, its NODATASUM bit as likely as any;
 * the inodes class settles it with the unknown bits, from the checksums). */
#define INODE_FLAGS_NODATASUM(flags) \
	(((flags) & BTRFS_INODE_NODATASUM) && !((flags) & ~INODE_KNOWN_FLAGS))

enum link_kind {
	LINK_REF = 1,       /* INODE_REF or INODE_EXTREF, child side */
	LINK_DIR_ITEM,      /* DIR_ITEM entry, directory side */
	LINK_DIR_INDEX,     /* DIR_INDEX entry, directory side */
	LINK_NEED_ORPHAN,   /* inode without names: fine only with an orphan item */
	LINK_ORPHAN,        /* ORPHAN_ITEM */
};

/* Records for the subvolume joins (phase_roots.c). */
struct root_rec {
	uint64_t a, b;      /* sort key: (parent, child) or uuid key parts */
	uint64_t c, d;      /* dirid / sequence(index), or uuid type / subvolume */
	uint64_t fp;
	uint16_t name_len;
	uint8_t kind;       /* enum root_kind */
	uint8_t pad[5];
};

enum root_kind {
	ROOTREC_REF = 1,        /* ROOT_REF (a=parent, b=child, c=dirid, d=sequence) */
	ROOTREC_BACKREF,        /* ROOT_BACKREF, same fields */
	ROOTREC_DIR_ITEM,       /* DIR_ITEM naming a subvolume (c=dir, d=0) */
	ROOTREC_DIR_INDEX,      /* DIR_INDEX naming a subvolume (c=dir, d=index) */
	ROOTREC_UUID_EXPECTED,  /* from a root item (a,b = uuid key, c=type, d=subvol) */
	ROOTREC_UUID_FOUND,     /* from the uuid tree */
	ROOTREC_ROOT_LIVE,      /* a=0, b=subvolume: root item with refs != 0 */
	ROOTREC_ROOT_DEAD,      /* a=0, b=subvolume: root item with refs == 0 */
	ROOTREC_ROOT_ORPHAN,    /* a=0, b=subvolume: ORPHAN_ITEM in the root tree */
	ROOTREC_ROOT_NAMED,     /* a=0, b=subvolume: it has a root ref or backref */
};

/* Order of root_rec: (a, b, c, d, kind). */
int root_rec_cmp(const void *a, const void *b, void *arg);

/* The fingerprint names are compared by (FNV-1a 64). */
uint64_t name_fingerprint(const uint8_t *name, size_t len);

/* The budget for each of n sorters live at once, from --memory-limit. */
size_t fs_check_sort_budget(const struct check_ctx *ctx, unsigned n);

/* Reads a finished sorter group by group: records comparing equal under
 * same_group are handed out together (at most FS_GROUP_MAX; *more is set
 * when a group had more). */
#define FS_GROUP_MAX 64
struct group_reader {
	struct recsort *rs;
	int (*same_group)(const void *a, const void *b);
	size_t size;
	uint8_t *buf;          /* FS_GROUP_MAX + 1 records */
	bool have_next;
	uint64_t records;      /* read from rs so far (for progress) */
};
int group_reader_init(struct group_reader *g, struct recsort *rs, int (*same_group)(const void *, const void *));
/* 1 with *n records in g->buf, 0 at the end, -errno. */
int group_reader_next(struct group_reader *g, size_t *n, bool *more);
void group_reader_free(struct group_reader *g);

/* The subvolume trees phase_fs checked, for lookups on the error paths. */
struct fs_roots {
	struct tree_root_ptr *v;
	size_t n;
	uint64_t bytes;     /* their root items' bytes_used: what the walk reads, for progress */
	uint64_t *used;     /* each one's bytes_used */
};
const struct tree_root_ptr *fs_roots_find(const struct fs_roots *r, uint64_t id);
/* Look up an inode item: 1 found (mode in *mode, nlink in *nlink), 0 absent, -errno. */
int fs_lookup_inode(struct check_ctx *ctx, const struct tree_root_ptr *root, uint64_t ino, uint32_t *mode,
		    uint32_t *nlink);

/* BTRFS_FT_* for an inode mode, or BTRFS_FT_UNKNOWN. */
uint8_t mode_to_ftype(uint32_t mode);

#endif
