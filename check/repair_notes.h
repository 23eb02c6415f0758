/* SPDX-License-Identifier: GPL-2.0-only */
/* What the detectors note for --repair, beyond the problem counts: the
 * extents whose references must be rewritten (with the references the trees
 * were seen to make), the space of extent items to create, and the inodes
 * whose counters are wrong. Kept in spilling sorters (libfs/recsort), so a
 * filesystem with millions of bad references stays within the memory budget.
 * Collected only when the check runs for a repair (check_options.repair). */
#ifndef BTK_CHECK_REPAIR_NOTES_H
#define BTK_CHECK_REPAIR_NOTES_H

#include <stdint.h>

#include "check/check.h"

/* One record of an extent to rewrite. type 0 is the extent itself: a = its
 * length, b = its flags (BTRFS_EXTENT_FLAG_*), c = EXTENT_FIX_* bits. The
 * others are the references it must have (BTRFS_*_REF_KEY; a = root or
 * parent, b = inode, c = offset, count). Sorted by (bytenr, type, a, b, c). */
struct extent_fix {
	uint64_t bytenr;
	uint64_t a, b, c;
	uint64_t count;
	uint32_t type;
	uint32_t pad;
};
#define EXTENT_FIX_HAS_ITEM 1u  /* an extent item exists (else: create one) */
#define EXTENT_FIX_TREE 2u      /* a tree block */
/* the item's flags said neither (or both) data and tree block: it is made
 * again whole, as a missing one would be (with b: its right flags) */
#define EXTENT_FIX_REPLACE 4u
/* the item stays, its flags become b (a tree block's full-backref flag) */
#define EXTENT_FIX_FLAGS 8u
/* --rebuild-extent-tree notes a tree block's level in c above this shift and
 * its generation in count (type 0 only) */
#define EXTENT_FIX_LEVEL_SHIFT 8

/* The space of an extent item to create. */
struct extent_claim {
	uint64_t bytenr, len;
};

/* An inode counter to recompute (PR_INODE_NLINK, PR_DIR_ISIZE, PR_INODE_NBYTES). */
struct inode_fix {
	uint64_t root, ino;
	uint32_t code;
	uint32_t pad;
};

/* A name to reconcile (check/repair_names.c): a directory and an inode that
 * a dir item, dir index, inode ref or extref joins; child 0 with code
 * PR_NAME_HASH: inode `dir` has xattrs keyed with a wrong name hash (with
 * another code: an entry names inode 0). Sorted by (root, dir, child, code). */
struct name_fix {
	uint64_t root, dir, child;
	uint32_t code;
	uint32_t pad;
};

/* A quota group's numbers as the extents give them (PR_QGROUP_MISMATCH). */
struct qgroup_fix {
	uint64_t id, rfer, excl;
};

/* A data reference by (root, inode, offset) whose extent is not where the
 * file extent says (kind 0: the file extent's disk bytenr, no extent item
 * there) or that an extent declares without a user (kind 1): a pair of the
 * two is a file extent whose disk bytenr went wrong. Kind 2: the file
 * extent's disk length differs from its extent item's (len). Offset
 * BYTENR_FIX_ANY: a user through a shared leaf (any offset). Sorted by (root,
 * ino, offset, kind, bytenr). */
#define BYTENR_FIX_ANY UINT64_MAX
struct bytenr_fix {
	uint64_t root, ino, offset, bytenr, len;
	uint32_t kind;
	uint32_t pad;
};

struct repair_notes;

/* Each returns 0 or -errno; nothing is noted unless ctx->opts->repair. */
int repair_note_extent(struct check_ctx *ctx, const struct extent_fix *f);
/* Space an extent item will be created for: claimed before any tree changes. */
int repair_note_claim(struct check_ctx *ctx, uint64_t bytenr, uint64_t len);
int repair_note_inode(struct check_ctx *ctx, enum problem_code code, uint64_t root, uint64_t ino);
/* From the inode detectors (check/phase_fs_items.c), with --repair: an inode
 * whose nlink, size or nbytes the inodes class recomputes. */
void repair_note_inode_problem(struct check_ctx *ctx, enum problem_code code, uint64_t root, uint64_t ino);
/* From the file extent detector, with --repair: an inode with nodatasum and
 * compressed extents (the compressed-nodatasum class; struct inode_fix records). */
void repair_note_nodatasum(struct check_ctx *ctx, uint64_t root, uint64_t ino);
/* An inode with a regular file extent whose range does not fit its extent
 * (the file-extent-ranges class; struct inode_fix records). */
void repair_note_file_extent(struct check_ctx *ctx, uint64_t root, uint64_t ino);
/* An inode with a file extent whose fields the kernel refuses (the
 * file-extent-fields class), or with file extents that overlap (the
 * file-extent-overlap class); struct inode_fix records. */
void repair_note_fe_fields(struct check_ctx *ctx, uint64_t root, uint64_t ino);
void repair_note_fe_overlap(struct check_ctx *ctx, uint64_t root, uint64_t ino);
/* A directory with more than one name (the dir-links class). */
void repair_note_dir_links(struct check_ctx *ctx, uint64_t root, uint64_t ino);
/* From the name detectors (check/phase_fs_join.c, phase_fs_items.c), with
 * --repair: a name between dir and child the names class reconciles. */
void repair_note_name(struct check_ctx *ctx, enum problem_code code, uint64_t root, uint64_t dir, uint64_t child);
/* From the subvolume join (check/phase_roots.c), with --repair: a dir index
 * (dir, index) of subvolume parent naming a subvolume nested in the
 * snapshot's source (a placeholder) that has no dir item (the subvol-links
 * class; struct name_fix records: root parent, dir, child the index). */
void repair_note_placeholder(struct check_ctx *ctx, uint64_t parent, uint64_t dir, uint64_t index);
/* From the reference join (check/phase_refs.c), with --repair. */
int repair_note_bytenr(struct check_ctx *ctx, const struct bytenr_fix *f);
/* A file extent pointing outside every data chunk (struct bytenr_fix, kind 0):
 * a hole unless its bytenr is pointed back (the file-extent-bytenr class). */
int repair_note_hole(struct check_ctx *ctx, const struct bytenr_fix *f);
/* From the qgroup comparison (check/phase_qgroups.c), with --repair. */
int repair_note_qgroup(struct check_ctx *ctx, uint64_t id, uint64_t rfer, uint64_t excl);
/* An extent that needs a repair but cannot have one (its references are too
 * many to hold, or it is damaged in a way only reported). */
void repair_note_unfixable(struct check_ctx *ctx);

enum repair_note_list { NOTES_EXTENTS, NOTES_CLAIMS, NOTES_INODES, NOTES_NAMES, NOTES_QGROUPS, NOTES_BYTENRS, NOTES_NODATASUM,
			    NOTES_DIR_LINKS, NOTES_FILE_EXTENTS, NOTES_HOLES, NOTES_FE_FIELDS, NOTES_FE_OVERLAP,
			    NOTES_PLACEHOLDERS, NOTES__COUNT };
/* Read one list back in order (after the check): 1 and *rec, 0 at the end, -errno. */
int repair_notes_next(struct check_ctx *ctx, enum repair_note_list which, const void **rec);
uint64_t repair_notes_count(const struct check_ctx *ctx, enum repair_note_list which);
uint64_t repair_notes_unfixable(const struct check_ctx *ctx);
void repair_notes_free(struct check_ctx *ctx);

#endif
