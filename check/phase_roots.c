// SPDX-License-Identifier: GPL-2.0-only
/* Subvolumes: root items against their root blocks; ROOT_REF <-> ROOT_BACKREF
 * <-> the DIR_ITEM / DIR_INDEX in the parent subvolume (collected by the
 * filesystem-tree phase); deleted subvolumes <-> orphan items; the uuid tree
 * against the uuids the root items declare. All joins go through sorters. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>

#include "check/fs_check.h"
#include "check/fs_lost.h"
#include "check/repair_notes.h"
#include "common/messages.h"
#include <btk/item_check.h>
#include <btk/block.h>
#include <btk/csum.h>
#include <btk/endian_access.h>
#include <btk/tree.h>

struct roots_scan {
	struct check_ctx *ctx;
	struct recsort *links;      /* root_rec: refs, backrefs, dir entries, liveness */
	struct recsort *uuids;      /* root_rec: expected and found uuid entries */
	bool have_entries;          /* the dir entries of the fs trees are in links */
	uint32_t seen_roots;        /* bit n: the root tree has a root item for tree n < 32 */
	bool seen_data_reloc;       /* and for the data relocation tree */
	int err;
};

static bool uuid_is_zero(const uint8_t *u)
{
	static const uint8_t zero[BTRFS_UUID_SIZE];
	return memcmp(u, zero, sizeof(zero)) == 0;
}

static void add(struct roots_scan *s, struct recsort *rs, const struct root_rec *r)
{
	int ret;

	if (s->err)
		return;
	if ((ret = recsort_add(rs, r)))
		s->err = ret;
}

/* The uuid-tree entry a root item implies, the way the kernel's uuid scan
 * (and libfs/uuid_tree.c) derive it: key (uuid[0..8] le64, type, uuid[8..16] le64). */
static void expect_uuid(struct roots_scan *s, const uint8_t *uuid, uint8_t type, uint64_t subvol)
{
	struct root_rec r = { .a = get_le64(uuid), .b = get_le64(uuid + 8), .c = type, .d = subvol,
			      .kind = ROOTREC_UUID_EXPECTED };

	if (!uuid_is_zero(uuid))
		add(s, s->uuids, &r);
}

/* What the kernel's tree checker refuses in a root item (it then refuses the
 * whole leaf of the root tree, and the mount): newer generations, a misaligned
 * bytenr, levels beyond the maximum, unknown flags. */
static void check_root_item_fields(struct check_ctx *ctx, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	/* (one past the superblock's: the transaction that was running, as the
	 * kernel's tree checker allows) */
	uint64_t gen = ctx->fs->generation, limit = gen + 1, flags = root_item_flags(d);
	struct item_view v = item_view_of(d, size);

	/* (an old, v1, item ends before generation_v2) */
	if (ITEM_VIEW_STRUCT(&v, 0, struct btrfs_root_item) && root_item_generation_v2(d) > limit)
		report_problem(ctx, PR_ROOT_ITEM_BAD, "root %" PRIu64 ": generation_v2 %" PRIu64 " is newer than the "
			       "filesystem's %" PRIu64, k->objectid, root_item_generation_v2(d), gen);
	if (root_item_last_snapshot(d) > limit)
		report_problem(ctx, PR_ROOT_ITEM_BAD, "root %" PRIu64 ": last snapshot %" PRIu64 " is newer than the "
			       "filesystem's %" PRIu64, k->objectid, root_item_last_snapshot(d), gen);
	if (root_item_bytenr(d) % ctx->fs->sectorsize)
		report_problem(ctx, PR_ROOT_ITEM_BAD, "root %" PRIu64 ": bytenr %" PRIu64 " is not sector aligned",
			       k->objectid, root_item_bytenr(d));
	if (root_item_level(d) >= BTRFS_MAX_LEVEL || root_item_drop_level(d) >= BTRFS_MAX_LEVEL)
		report_problem(ctx, PR_ROOT_ITEM_BAD, "root %" PRIu64 ": level %u, drop level %u (at most %d)",
			       k->objectid, root_item_level(d), root_item_drop_level(d), BTRFS_MAX_LEVEL - 1);
	if (flags & ~(BTRFS_ROOT_SUBVOL_RDONLY | BTRFS_ROOT_SUBVOL_DEAD))
		report_problem(ctx, PR_ROOT_ITEM_BAD, "root %" PRIu64 ": unknown flags 0x%" PRIx64, k->objectid, flags);
	/* the kernel finds a tree's root item by searching past the last offset:
	 * an item at that offset is found exactly, which it calls corruption */
	if (k->offset == (uint64_t)-1)
		report_problem(ctx, PR_ITEM_MALFORMED, "root %" PRIu64 ": root item keyed at offset -1", k->objectid);
}

/* An inode item of the root tree (the default directory, free-space cache
 * inodes): what the kernel's tree checker refuses in any leaf. Only a wrong
 * mode is repaired. */
static void check_root_tree_inode(struct check_ctx *ctx, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	uint64_t gen = ctx->fs->generation, limit = gen + 1;   /* the kernel's limit */
	struct item_verdict vd;
	uint32_t mode;

	if (item_check_fs(ctx->fs, k, d, size, &vd) && vd.fault == ITEM_TOO_SMALL) {
		report_problem(ctx, PR_ITEM_MALFORMED, "root tree inode %" PRIu64 ": item is %u bytes", k->objectid, size);
		return;
	}
	mode = inode_mode(d);
	if (vd.fault == ITEM_BAD_KEY)
		report_problem(ctx, PR_ITEM_MALFORMED, "root tree inode %" PRIu64 ": key offset %" PRIu64 ", not 0",
			       k->objectid, k->offset);
	if (inode_flags(d) & ~INODE_KNOWN_FLAGS)
		report_problem(ctx, PR_INODE_FLAGS_UNKNOWN, "root tree inode %" PRIu64 ": flags 0x%" PRIx64,
			       k->objectid, inode_flags(d));
	/* (the free-space cache inodes, from 256 up, are regular files of mode 0600: the reference
	 * holds them to it) */
	if (k->objectid >= BTRFS_FIRST_FREE_OBJECTID && mode != (S_IFREG | 0600) && inode_nlink(d) == 1 &&
	    inode_generation(d) <= limit && inode_transid(d) <= limit) {
		/* the rest is sound: the repair gives it back the mode of its kind */
		report_problem(ctx, PR_ROOT_TREE_INODE_MODE, "free-space cache inode %" PRIu64 ": mode 0%o, not "
			       "0100600", k->objectid, mode);
		repair_note_inode_problem(ctx, PR_ROOT_TREE_INODE_MODE, BTRFS_ROOT_TREE_OBJECTID, k->objectid);
	} else if (mode_to_ftype(mode) == BTRFS_FT_UNKNOWN || (mode & ~(uint32_t)(S_IFMT | 07777)) ||
	    (S_ISDIR(mode) && inode_nlink(d) > 1) ||
	    (k->objectid >= BTRFS_FIRST_FREE_OBJECTID && mode != (S_IFREG | 0600)) ||
	    inode_generation(d) > limit || inode_transid(d) > limit)
		report_problem(ctx, PR_ITEM_MALFORMED, "root tree inode %" PRIu64 ": mode 0%o, nlink %u, generation %"
			       PRIu64 ", transid %" PRIu64 " (filesystem generation %" PRIu64 ")", k->objectid, mode,
			       inode_nlink(d), inode_generation(d), inode_transid(d), gen);
}

/* An inode ref (or extref) of the root tree (the default subvolume's name):
 * its refs fill the item exactly, as the kernel's tree checker wants of any
 * tree. */
static void check_root_tree_inode_ref(struct check_ctx *ctx, const struct btrfs_key *k, const uint8_t *d,
				      uint32_t size)
{
	bool ext = k->type == BTRFS_INODE_EXTREF_KEY;
	struct item_verdict vd;

	/* (and no empty name) */
	if (item_check_fs(ctx->fs, k, d, size, &vd) && (item_fault_is_size(vd.fault) || vd.fault == ITEM_NAME_LEN))
		report_problem(ctx, PR_ITEM_MALFORMED, "root tree inode %sref (%" PRIu64 " %" PRIu64 "): %u bytes do not "
			       "hold whole refs", ext ? "ext" : "", k->objectid, k->offset, size);
}

static int found_item(void *arg, const struct btrfs_key *key, const uint8_t *data, uint32_t size)
{
	(void)key, (void)data, (void)size;
	*(bool *)arg = true;
	return 1;
}

/* Whether a dir entry of the root tree names a subvolume directory that has
 * a root item (an unreadable root tree: the tree-block phase's finding). */
static bool names_subvolume(struct check_ctx *ctx, const uint8_t *e)
{
	struct btrfs_key loc, min, max;
	bool found = false;

	key_from_disk(&loc, dir_item_location_ptr(e));
	if (loc.type != BTRFS_ROOT_ITEM_KEY || !key_is_subvolume_id(loc.objectid) || dir_item_type(e) != BTRFS_FT_DIR)
		return false;
	min = (struct btrfs_key){ loc.objectid, BTRFS_ROOT_ITEM_KEY, 0 };
	max = (struct btrfs_key){ loc.objectid, BTRFS_ROOT_ITEM_KEY, (uint64_t)-1 };
	return tree_each_item_in(ctx->fs, &ctx->fs->tree_root, &min, &max, found_item, &found) < 0 || found;
}

/* A dir item of the root tree (the default subvolume's name, "default"):
 * whole entries, names of 1 to 255 bytes without data, and the name's hash
 * in the key, as the kernel's tree checker wants of any tree; each names a
 * subvolume, which the kernel mounts when no other is asked for. */
static void check_root_tree_dir_item(struct check_ctx *ctx, const struct btrfs_key *k, const uint8_t *d,
				     uint32_t size)
{
	struct item_view v = item_view_of(d, size);
	const char *why = NULL;
	struct item_entry e;
	enum item_fault f;
	uint32_t off = 0;
	int ret;

	while (!why && (ret = item_entry_next(k->type, &v, &off, &e)) != 0) {
		if (ret < 0)
			why = "entries do not fill the item";
		else if ((f = item_entry_check(k->type, &e)) == ITEM_NAME_LEN || f == ITEM_DATA_LEN)
			why = "name or data length out of range";
		else if (k->type == BTRFS_DIR_ITEM_KEY && btrfs_name_hash(e.name, e.name_len) != k->offset)
			why = "the name does not hash to the key";
		else if (!names_subvolume(ctx, e.hdr))
			why = "it names no subvolume (the kernel mounts the default subvolume it names)";
	}
	if (why)
		report_problem(ctx, PR_ITEM_MALFORMED, "root tree dir item (%" PRIu64 " %u %" PRIu64 "): %s",
			       k->objectid, k->type, k->offset, why);
}

/* A file extent of the root tree (free-space cache inodes): what the
 * kernel's tree checker refuses in any leaf. Not repaired. */
static void check_root_tree_file_extent(struct check_ctx *ctx, const struct btrfs_key *k, const uint8_t *d,
					uint32_t size)
{
	struct item_verdict vd;
	const char *why;

	if (!item_check_fs(ctx->fs, k, d, size, &vd))
		return;
	if (vd.fault == ITEM_TOO_SMALL)
		why = "item too small";
	else if (vd.fault == ITEM_BAD_KEY || (vd.fault == ITEM_BAD_SIZE && file_extent_type(d) == BTRFS_FILE_EXTENT_INLINE))
		why = "inline extent offset or size";
	else if (vd.fault == ITEM_BAD_SIZE)
		why = "item size";
	else
		why = vd.why;
	report_problem(ctx, PR_ITEM_MALFORMED, "root tree file extent (%" PRIu64 " %" PRIu64 "): %s (%u bytes)",
		       k->objectid, k->offset, why, size);
}

/* The extent item of a subvolume's root block has the block's generation (the
 * reference's check of outdated root items compares the two): look it up
 * skinny, then old-style. A missing or unreadable item is the extents phase's. */
static void check_root_extent_generation(struct check_ctx *ctx, uint64_t root, const struct tree_block *b)
{
	struct fs_info *fs = ctx->fs;
	struct btrfs_key skinny = { b->bytenr, BTRFS_METADATA_ITEM_KEY, block_level(b) };
	struct btrfs_key full = { b->bytenr, BTRFS_EXTENT_ITEM_KEY, fs->nodesize };
	uint8_t item[sizeof(struct btrfs_extent_item)];
	uint32_t size = sizeof(item);
	struct item_view v;

	if (tree_lookup(fs, &fs->extent_root, &skinny, item, &size) != 0) {
		size = sizeof(item);
		if (tree_lookup(fs, &fs->extent_root, &full, item, &size) != 0)
			return;
	}
	v = item_view_copied(item, sizeof(item), size);
	if (item_view_has_fixed(&v, BTRFS_EXTENT_ITEM_KEY) && extent_generation(item) != block_generation(b))
		report_problem(ctx, PR_EXTENT_GENERATION, "root %" PRIu64 ": root block %" PRIu64 " has generation %"
			       PRIu64 ", its extent item %" PRIu64, root, b->bytenr, block_generation(b),
			       extent_generation(item));
}

/* A root item against the block it points at. */
static void check_root_item(struct roots_scan *s, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct check_ctx *ctx = s->ctx;
	struct block_expect any = BLOCK_EXPECT_ANY;
	struct tree_block *b;
	bool subvol = key_is_subvolume_id(k->objectid);
	struct root_rec r = { .b = k->objectid };
	struct item_view v = item_view_of(d, size);
	struct item_verdict vd;

	if (item_check_fs(ctx->fs, k, d, size, &vd) && vd.fault == ITEM_TOO_SMALL) {
		report_problem(ctx, PR_ITEM_MALFORMED, "root item %" PRIu64 " is %u bytes", k->objectid, size);
		return;
	}
	bool future = root_item_generation(d) > ctx->fs->generation + 1;   /* the kernel's limit */

	if (future)
		report_problem(ctx, PR_ROOT_ITEM_GENERATION, "root %" PRIu64 ": generation %" PRIu64 " is newer than "
			       "the filesystem's %" PRIu64, k->objectid, root_item_generation(d), ctx->fs->generation);
	check_root_item_fields(ctx, k, d, size);
	/* libfs reads the extent tree from the current backup root then (fs_info.extent_root_item) */
	if (k->objectid == BTRFS_EXTENT_TREE_OBJECTID && ctx->fs->extent_root_item.bytenr) {
		report_problem(ctx, PR_ROOT_ITEM_BAD, "root 2: the extent tree's root item names block %" PRIu64
			       " (generation %" PRIu64 ", level %u), which does not read as its root; the backup root "
			       "of generation %" PRIu64 " names block %" PRIu64 " (level %u)", root_item_bytenr(d),
			       root_item_generation(d), root_item_level(d), ctx->fs->generation,
			       ctx->fs->extent_root.bytenr, ctx->fs->extent_root.level);
		return;
	}
	if (root_item_bytenr(d) && block_read(ctx->fs, root_item_bytenr(d), &any, &b) == 0) {
		/* a generation from the future against a sound block: that one problem (the block's is right) */
		bool explained = future && block_generation(b) <= ctx->fs->generation && block_level(b) == root_item_level(d);
		if (!explained && (block_generation(b) != root_item_generation(d) || block_level(b) != root_item_level(d)))
			report_problem(ctx, PR_ROOT_ITEM_BAD, "root %" PRIu64 ": item says generation %" PRIu64
				       " level %u, block %" PRIu64 " has generation %" PRIu64 " level %u",
				       k->objectid, root_item_generation(d), root_item_level(d), b->bytenr,
				       block_generation(b), block_level(b));
		if (subvol || k->objectid == BTRFS_DATA_RELOC_TREE_OBJECTID)
			check_root_extent_generation(ctx, k->objectid, b);
		block_put(ctx->fs, b);
	}   /* an unreadable root block is the tree-block phase's finding */
	if (!subvol && k->objectid != BTRFS_DATA_RELOC_TREE_OBJECTID)
		return;
	if (root_item_root_dirid(d) != BTRFS_FIRST_FREE_OBJECTID)
		report_problem(ctx, PR_ROOT_ITEM_BAD, "root %" PRIu64 ": root directory %" PRIu64 ", not 256",
			       k->objectid, root_item_root_dirid(d));
	if (!subvol)
		return;
	/* the top level is never deleted: refs 0 there is a damaged count */
	if (k->objectid == BTRFS_FS_TREE_OBJECTID && !root_item_refs(d))
		report_problem(ctx, PR_ROOT_ITEM_BAD, "root 5: refs 0 (the top level is never deleted)");
	r.kind = root_item_refs(d) || k->objectid == BTRFS_FS_TREE_OBJECTID ? ROOTREC_ROOT_LIVE : ROOTREC_ROOT_DEAD;
	r.c = root_item_refs(d);
	add(s, s->links, &r);
	if (r.kind == ROOTREC_ROOT_DEAD)
		return;
	/* old (v1) items have no uuids */
	if (ITEM_VIEW_STRUCT(&v, 0, struct btrfs_root_item)) {
		expect_uuid(s, root_item_uuid_ptr(d), BTRFS_UUID_KEY_SUBVOL, k->objectid);
		expect_uuid(s, root_item_received_uuid_ptr(d), BTRFS_UUID_KEY_RECEIVED_SUBVOL, k->objectid);
	}
}

static void root_ref(struct roots_scan *s, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	bool back = k->type == BTRFS_ROOT_BACKREF_KEY;
	struct item_view v = item_view_of(d, size);
	struct item_entry e;
	uint32_t off = 0;
	struct root_rec r = { .a = back ? k->offset : k->objectid, .b = back ? k->objectid : k->offset,
			      .kind = back ? ROOTREC_BACKREF : ROOTREC_REF };

	/* (one ref, its name filling the item: a root ref holds one name) */
	if (item_entry_next(k->type, &v, &off, &e) != 1 || !e.name_len || off != size) {
		report_problem(s->ctx, PR_ITEM_MALFORMED, "root %s (%" PRIu64 " %" PRIu64 ") is %u bytes",
			       back ? "backref" : "ref", k->objectid, k->offset, size);
		return;
	}
	r.c = root_ref_dirid(d);
	r.d = root_ref_sequence(d);
	r.name_len = root_ref_name_len(d);
	r.fp = name_fingerprint(e.name, r.name_len);
	add(s, s->links, &r);
	/* (c = 1: a backref, counted against the root item's refs) */
	r = (struct root_rec){ .b = r.b, .c = back, .kind = ROOTREC_ROOT_NAMED };
	add(s, s->links, &r);
}

static int root_tree_item(void *arg, const struct btrfs_key *key, const uint8_t *data, uint32_t size)
{
	struct roots_scan *s = arg;

	if (key->type == BTRFS_ROOT_ITEM_KEY) {
		/* the kernel finds the trees other than subvolumes by (id, ROOT_ITEM, 0) exactly */
		if (key->objectid < BTRFS_FIRST_FREE_OBJECTID && key->objectid != BTRFS_FS_TREE_OBJECTID &&
		    key->offset != 0)
			report_problem(s->ctx, PR_ROOT_ITEM_BAD, "root %" PRIu64 ": root item keyed at offset %" PRIu64
				       ", not 0: the kernel does not find it", key->objectid, key->offset);
		if (key->objectid < 32)
			s->seen_roots |= 1u << key->objectid;
		/* (keyed at another offset: item-malformed, the item-fields class keys it again) */
		s->seen_data_reloc |= key->objectid == BTRFS_DATA_RELOC_TREE_OBJECTID;
		check_root_item(s, key, data, size);
	} else if (key->type == BTRFS_INODE_ITEM_KEY) {
		check_root_tree_inode(s->ctx, key, data, size);
	} else if (key->type == BTRFS_INODE_REF_KEY || key->type == BTRFS_INODE_EXTREF_KEY) {
		check_root_tree_inode_ref(s->ctx, key, data, size);
	} else if (key->type == BTRFS_DIR_ITEM_KEY || key->type == BTRFS_DIR_INDEX_KEY) {
		check_root_tree_dir_item(s->ctx, key, data, size);
	} else if (key->type == BTRFS_EXTENT_DATA_KEY) {
		check_root_tree_file_extent(s->ctx, key, data, size);
	} else if (key->type == BTRFS_ROOT_REF_KEY || key->type == BTRFS_ROOT_BACKREF_KEY) {
		root_ref(s, key, data, size);
	} else if (key->type == BTRFS_ORPHAN_ITEM_KEY && key->objectid == BTRFS_ORPHAN_OBJECTID) {
		struct root_rec r = { .b = key->offset, .kind = ROOTREC_ROOT_ORPHAN };
		add(s, s->links, &r);
	}
	return s->err ? 1 : 0;
}

/* The trees the kernel does not mount without (the block-group tree when its
 * compat_ro flag is set, the data relocation tree, whose repair class makes it
 * again; the free-space tree is rebuilt by its repair class):
 * a missing root item is not a tree that can be left out, and its blocks are
 * not leaked. Every repair is refused. */
static void check_required_roots(struct roots_scan *s)
{
	static const uint64_t always[] = { BTRFS_EXTENT_TREE_OBJECTID, BTRFS_DEV_TREE_OBJECTID,
					   BTRFS_FS_TREE_OBJECTID, BTRFS_CSUM_TREE_OBJECTID };
	uint64_t compat_ro = s->ctx->fs->compat_ro;
	uint32_t want = 0;

	for (size_t i = 0; i < sizeof(always) / sizeof(always[0]); i++)
		want |= 1u << always[i];
	if (compat_ro & BTRFS_FEATURE_COMPAT_RO_BLOCK_GROUP_TREE)
		want |= 1u << BTRFS_BLOCK_GROUP_TREE_OBJECTID;
	for (unsigned id = 0; id < 32; id++)
		if ((want & ~s->seen_roots) & (1u << id)) {
			check_note_unreadable_tree(s->ctx, id);
			s->ctx->stats.root_items_missing++;
			report_problem(s->ctx, PR_TREE_ROOT_UNREADABLE, "tree %u: the root tree has no root item for it",
				       id);
		}
	/* the kernel loads the data relocation tree at every mount since Linux 5.11 */
	if (!s->seen_data_reloc) {
		check_note_unreadable_tree(s->ctx, BTRFS_DATA_RELOC_TREE_OBJECTID);
		s->ctx->stats.root_items_missing++;
		report_problem(s->ctx, PR_TREE_ROOT_UNREADABLE, "data relocation tree: the root tree has no root item "
			       "for it");
	}
}

static int scan_root_tree(struct roots_scan *s)
{
	int ret = tree_each_item(s->ctx->fs, &s->ctx->fs->tree_root, root_tree_item, s);

	if (ret < 0 && ret != -ENOMEM) {
		report_problem(s->ctx, PR_TREE_ROOT_UNREADABLE, "root tree: %s", btk_error_msg());
		ret = 0;
	} else if (ret >= 0 && !s->err) {
		check_required_roots(s);
	}
	return ret < 0 ? ret : s->err;
}

static int same_pair(const void *a, const void *b)
{
	const struct root_rec *x = a, *y = b;
	return x->a == y->a && x->b == y->b;
}

static const struct root_rec *find_kind(const struct root_rec *g, size_t n, enum root_kind kind)
{
	for (size_t i = 0; i < n; i++)
		if (g[i].kind == kind)
			return &g[i];
	return NULL;
}

static bool has_entry(const struct root_rec *g, size_t n, enum root_kind kind, const struct root_rec *ref)
{
	for (size_t i = 0; i < n; i++)
		if (g[i].kind == kind && g[i].c == ref->c && g[i].fp == ref->fp && g[i].name_len == ref->name_len &&
		    (kind == ROOTREC_DIR_ITEM || g[i].d == ref->d))
			return true;
	return false;
}

/* How many root backrefs name the subvolume of group g. */
static uint64_t count_backrefs(const struct root_rec *g, size_t n)
{
	uint64_t count = 0;

	for (size_t i = 0; i < n; i++)
		count += g[i].kind == ROOTREC_ROOT_NAMED && g[i].c;
	return count;
}

/* Deleted subvolumes and orphan items: group (0, id). A root item's refs
 * count the root backrefs naming it (the kernel adds and drops one with
 * each link): refs that disagree with backrefs there are wrong in the item,
 * even 0 (a deleted subvolume has no backref left). */
static void judge_liveness(struct roots_scan *s, const struct root_rec *g, size_t n)
{
	const struct root_rec *item = find_kind(g, n, ROOTREC_ROOT_LIVE);
	bool live = item, dead = find_kind(g, n, ROOTREC_ROOT_DEAD);
	bool orphan = find_kind(g, n, ROOTREC_ROOT_ORPHAN), named = find_kind(g, n, ROOTREC_ROOT_NAMED);
	uint64_t backrefs = count_backrefs(g, n);

	if (!item)
		item = find_kind(g, n, ROOTREC_ROOT_DEAD);
	if (item && backrefs && item->c != backrefs && g->b != BTRFS_FS_TREE_OBJECTID) {
		report_problem(s->ctx, PR_ROOT_ITEM_BAD, "root %" PRIu64 ": refs %" PRIu64 ", but %" PRIu64
			       " root backref%s name%s it", g->b, item->c, backrefs, backrefs == 1 ? "" : "s",
			       backrefs == 1 ? "s" : "");
		dead = false;
		live = true;
	}
	if (dead && !orphan)
		report_problem(s->ctx, PR_ROOT_ORPHAN_MISSING, "subvolume %" PRIu64 " has refs 0 but no orphan item",
			       g->b);
	if (live && !named && g->b != BTRFS_FS_TREE_OBJECTID)
		report_problem(s->ctx, PR_ROOT_UNREFERENCED, "subvolume %" PRIu64 " has no root ref or backref", g->b);
	if (named && !live && !dead)
		report_problem(s->ctx, PR_ROOT_DIR_ENTRY_DANGLING, "subvolume %" PRIu64 " has root refs but no root item",
			       g->b);
	if (orphan && !dead)
		report_problem(s->ctx, PR_ORPHAN_ITEM_BAD, "orphan item for subvolume %" PRIu64 ", which %s", g->b,
			       live ? "is still referenced" : "does not exist");
}

/* The entries of directory dir of subvolume parent may be in an unreadable block. */
static bool dir_entries_lost(const struct check_ctx *ctx, uint64_t parent, uint64_t dir)
{
	struct btrfs_key first = { dir, BTRFS_DIR_ITEM_KEY, 0 }, last = { dir, BTRFS_DIR_INDEX_KEY, UINT64_MAX };

	return fs_lost_meets(ctx->fs_lost, parent, &first, &last);
}

/* One (parent, child) pair: ref, backref and the parent's dir entries. */
static void judge_pair(struct roots_scan *s, const struct root_rec *g, size_t n)
{
	const struct root_rec *ref = find_kind(g, n, ROOTREC_REF), *back = find_kind(g, n, ROOTREC_BACKREF);
	const struct root_rec *any = ref ? ref : back;
	uint64_t parent = g->a, child = g->b;

	if (ref && !back)
		report_problem(s->ctx, PR_ROOT_BACKREF_MISSING, "root ref %" PRIu64 " -> %" PRIu64 " has no backref",
			       parent, child);
	if (back && !ref)
		report_problem(s->ctx, PR_ROOT_REF_MISSING, "root backref %" PRIu64 " -> %" PRIu64 " has no ref",
			       parent, child);
	if (ref && back && (ref->c != back->c || ref->d != back->d || ref->fp != back->fp ||
			    ref->name_len != back->name_len))
		report_problem(s->ctx, PR_ROOT_REF_MISMATCH, "root ref and backref %" PRIu64 " -> %" PRIu64
			       " differ: dir %" PRIu64 "/%" PRIu64 ", sequence %" PRIu64 "/%" PRIu64 ", name length %u/%u",
			       parent, child, ref->c, back->c, ref->d, back->d, ref->name_len, back->name_len);
	if (!s->have_entries)
		return;
	/* Entries without a ref are legal: a snapshot keeps the entries of the
	 * subvolumes nested in its source, and they read as empty directories,
	 * found by name through the dir item like every other entry. */
	for (size_t i = 0; !any && i < n; i++)
		if (g[i].kind == ROOTREC_DIR_INDEX && !has_entry(g, n, ROOTREC_DIR_ITEM, &g[i]) &&
		    !dir_entries_lost(s->ctx, parent, g[i].c)) {
			report_problem(s->ctx, PR_ROOT_DIR_ENTRY_MISSING, "subvolume %" PRIu64 " in %" PRIu64 " dir %"
				       PRIu64 ": the placeholder's dir index %" PRIu64 " has no dir item (the name is "
				       "listed but not found)", child, parent, g[i].c, g[i].d);
			repair_note_placeholder(s->ctx, parent, g[i].c, g[i].d);
		}
	if (any && (!has_entry(g, n, ROOTREC_DIR_ITEM, any) || !has_entry(g, n, ROOTREC_DIR_INDEX, any)) &&
	    !dir_entries_lost(s->ctx, parent, any->c))
		report_problem(s->ctx, PR_ROOT_DIR_ENTRY_MISSING, "subvolume %" PRIu64 " in %" PRIu64 " dir %"
			       PRIu64 ": no matching %s", child, parent, any->c,
			       has_entry(g, n, ROOTREC_DIR_ITEM, any) ? "dir index" : "dir item");
}

static int same_uuid_entry(const void *a, const void *b)
{
	const struct root_rec *x = a, *y = b;
	return x->a == y->a && x->b == y->b && x->c == y->c && x->d == y->d;
}

static int uuid_tree_item(void *arg, const struct btrfs_key *key, const uint8_t *data, uint32_t size)
{
	struct roots_scan *s = arg;

	if (key->type != BTRFS_UUID_KEY_SUBVOL && key->type != BTRFS_UUID_KEY_RECEIVED_SUBVOL)
		return 0;
	struct item_verdict vd;

	if (item_check_fs(s->ctx->fs, key, data, size, &vd))
		report_problem(s->ctx, PR_ITEM_MALFORMED, "uuid item (%" PRIx64 " %u %" PRIx64 ") is %u bytes",
			       key->objectid, key->type, key->offset, size);
	for (uint32_t off = 0; off + 8 <= size; off += 8) {
		struct root_rec r = { .a = key->objectid, .b = key->offset, .c = key->type,
				      .d = get_le64(data + off), .kind = ROOTREC_UUID_FOUND };
		add(s, s->uuids, &r);
	}
	return s->err ? 1 : 0;
}

static int scan_uuid_tree(struct roots_scan *s)
{
	int ret = tree_each_item(s->ctx->fs, &s->ctx->fs->uuid_root, uuid_tree_item, s);

	/* an unreadable uuid tree is the tree-block phase's finding: no verdict
	 * on its entries then (1: skip the join) */
	if (ret < 0 && ret != -ENOMEM)
		return 1;
	return ret < 0 ? ret : s->err;
}

static void judge_uuid(struct roots_scan *s, const struct root_rec *g, size_t n)
{
	bool expected = find_kind(g, n, ROOTREC_UUID_EXPECTED), found = find_kind(g, n, ROOTREC_UUID_FOUND);
	const char *what = g->c == BTRFS_UUID_KEY_SUBVOL ? "uuid" : "received uuid";

	if (expected && !found)
		report_problem(s->ctx, PR_UUID_TREE_MISSING, "subvolume %" PRIu64 ": %s %016" PRIx64 "%016" PRIx64
			       " is not in the uuid tree", g->d, what, g->a, g->b);
	else if (found && !expected)
		report_problem(s->ctx, PR_UUID_TREE_EXTRA, "uuid tree: %s %016" PRIx64 "%016" PRIx64 " -> subvolume %"
			       PRIu64 ", which no root item declares", what, g->a, g->b, g->d);
}

static int run_groups(struct roots_scan *s, struct recsort *rs, int (*same)(const void *, const void *),
		      bool uuids)
{
	struct group_reader g;
	size_t n;
	bool more;
	int ret = recsort_finish(rs);

	if (ret || (ret = group_reader_init(&g, rs, same)))
		return ret;
	while ((ret = group_reader_next(&g, &n, &more)) == 1) {
		const struct root_rec *recs = (const struct root_rec *)g.buf;
		if (uuids)
			judge_uuid(s, recs, n);
		else if (recs->a == 0)
			judge_liveness(s, recs, n);
		else
			judge_pair(s, recs, n);
	}
	group_reader_free(&g);
	return ret < 0 ? ret : 0;
}

int check_subvolumes(struct check_ctx *ctx)
{
	struct roots_scan s = { .ctx = ctx };
	struct fs_info *fs = ctx->fs;
	/* not when uuid_tree_generation is stale (an older kernel or tool wrote
	 * last): the kernel checks the tree at mount then, adding what is missing
	 * and dropping what no subvolume has */
	bool stale = super_uuid_tree_generation(fs_super(fs)) != super_generation(fs_super(fs));
	bool check_uuids = fs->uuid_root.bytenr != 0 && !stale;
	int ret;

	if (fs->uuid_root.bytenr && stale)
		msg_verbose("the uuid tree's generation %" PRIu64 " is not the filesystem's %" PRIu64 ": not checked (the "
			    "kernel checks and mends it at the next mount)", super_uuid_tree_generation(fs_super(fs)),
			 super_generation(fs_super(fs)));

	s.have_entries = ctx->subvol_entries != NULL;
	s.links = ctx->subvol_entries;
	ctx->subvol_entries = NULL;
	if (!s.links)
		s.links = recsort_create(sizeof(struct root_rec), root_rec_cmp, NULL, fs_check_sort_budget(ctx, 16),
				       &ctx->fs->knobs.recsort);
	s.uuids = recsort_create(sizeof(struct root_rec), root_rec_cmp, NULL, fs_check_sort_budget(ctx, 16),
				       &ctx->fs->knobs.recsort);
	if (!s.links || !s.uuids) {
		ret = -ENOMEM;
		goto out;
	}
	ret = scan_root_tree(&s);
	if (!ret)
		ret = run_groups(&s, s.links, same_pair, false);
	if (!ret && check_uuids && !(ret = scan_uuid_tree(&s)))
		ret = run_groups(&s, s.uuids, same_uuid_entry, true);
	if (ret == 1)
		ret = 0;
out:
	recsort_destroy(s.links);
	recsort_destroy(s.uuids);
	return ret;
}
