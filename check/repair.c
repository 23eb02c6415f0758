// SPDX-License-Identifier: GPL-2.0-only
/* btk-check --repair: choose the repair classes the found problems call for,
 * ask (or take --yes), open the filesystem writable with an undo file, run
 * each class (transactional ones in their own transaction), then check again
 * on a fresh read-only open. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check/repair.h"
#include "check/repair_notes.h"
#include "common/messages.h"
#include "common/undo_path.h"
#include <btk/ebitmap.h>
#include <btk/chunk_edit.h>
#include <btk/features.h>
#include <btk/names.h>
#include <btk/volumes.h>

#define MAX_CODES 16
#define MAX_BLOCKERS 20

struct repair_class {
	const char *name;
	const char *question;          /* "Rewrite ...?" without the question mark */
	enum problem_code codes[MAX_CODES]; /* the problems it fixes; 0 ends the list */
	bool transaction;              /* runs in its own transaction */
	bool (*forced)(const struct repair_options *o); /* asked for explicitly */
	int (*run)(struct repair_ctx *r);
	/* problems that make this class unsafe, besides transaction_blockers; 0 ends */
	enum problem_code blockers[MAX_BLOCKERS];
	/* safe unattended (fsck -p/-a, "preen"): the repair takes no decision -- it
	 * copies a good copy over a bad one or recomputes what other items
	 * determine -- and loses nothing */
	bool unattended;
};

static bool fst_forced(const struct repair_options *o) { return o->rebuild_fst; }
static bool uuid_forced(const struct repair_options *o) { return o->rebuild_uuid; }
static bool log_forced(const struct repair_options *o) { return o->clear_log; }
static bool csum_forced(const struct repair_options *o) { return o->rebuild_csum; }
static bool extent_forced(const struct repair_options *o) { return o->rebuild_extent; }

/* In the order they run: raw rewrites of bad copies first, so that every
 * transaction after them reads good blocks wherever it reads. */
static const struct repair_class classes[] = {
	{ "superblock-copies", "Rewrite bad or stale superblock copies from the good copy of their device",
	  { PR_SUPER_COPY_INVALID, PR_SUPER_COPY_STALE, PR_SUPER_COPY_DIFFERS, PR_SUPER_COPY_MISSING }, false, NULL,
	  repair_super_copies, { 0 }, true },
	/* it writes through the chunk map: not while a dev extent disagrees with
	 * the chunks (a stripe moved by damage would send the copy elsewhere) */
	{ "tree-block-copies", "Rewrite bad copies of tree blocks from a good copy",
	  { PR_TREE_BLOCK_BAD_COPY }, false, NULL, repair_tree_block_copies,
	  { PR_DEV_EXTENT_NO_CHUNK, PR_DEV_EXTENT_MISMATCH }, true },
	/* its own transaction (check/repair_log.c): the others cannot start one while a log exists */
	{ "clear-log", "Clear the log tree (what was fsynced since the last commit is lost)",
	  /* a log whose replay would leave data without checksums: dropped, as btrfs check --repair does */
	  { PR_LOG_CSUM_MISSING }, false, log_forced, repair_clear_log, { 0 }, false },
	/* wanted for unreadable subvolume-tree blocks (no problem code of its own): the classes after
	 * it are chosen from a check run again once it committed (repair_filesystem) */
	{ "lost-blocks", "Drop the subvolume-tree blocks that no copy gives back (the items they held are lost; "
	  "what other trees say about them is repaired after)",
	  { 0 }, true, NULL, repair_lost_blocks, { 0 }, false },
	/* the classes after it are chosen from a check run again once it committed (repair_filesystem):
	 * what the dropped entries held shows up there */
	{ "tree-salvage", "Rewrite damaged tree blocks from their salvaged view (items re-laid out or sorted, "
	  "entries that cannot be made valid dropped, level, pointer generation and parent key fixed)",
	  { PR_LEAF_ITEM_OFFSETS, PR_KEY_ORDER, PR_TREE_BLOCK_LEVEL, PR_TREE_BLOCK_TRANSID, PR_TREE_BLOCK_FIRST_KEY,
	    PR_TREE_BLOCK_NRITEMS }, true, NULL, repair_salvaged_blocks, { 0 }, false },
	{ "tree-block-owner", "Copy tree blocks whose header names another tree as owner (the copy is the tree's; "
	  "a subvolume-tree block is copied in every tree that reaches it, the one that made it first)",
	  { PR_TREE_BLOCK_OWNER }, true, NULL,
	  repair_tree_block_owners, { 0 }, false },
	/* before anything reads the extents of the lost chunk; the chunk map is read again after its
	 * commit, and the check runs again */
	{ "chunk-items", "Make lost chunk items again from their block group and dev extents (single, DUP and "
	  "RAID1-family chunks)", { PR_BLOCK_GROUP_NO_CHUNK }, true, NULL, repair_chunk_items, { 0 }, false },
	/* the references of the file extents it deletes go in the check run again after it */
	{ "stray-items", "Delete subvolume-tree items nothing reads: unknown key types, the deprecated free-inode "
	  "cache, file extents of device, fifo and socket inodes, malformed names (made again from their mirrors "
	  "by names); and items of a key type foreign to their tree",
	  { PR_ITEM_UNKNOWN_TYPE, PR_INODE_CACHE, PR_FILE_EXTENT_NOT_FILE, PR_ITEM_FOREIGN_TYPE, PR_ITEM_MALFORMED },
	  true, NULL, repair_stray_items,
	  /* a root item pointing at another tree's block shows that tree's items as strays */
	  { PR_ROOT_ITEM_OUTDATED }, false },
	/* the check runs again after it: what is still malformed blocks the classes that trust items */
	{ "item-fields", "Set item fields and key offsets whose only valid value the format fixes (an inode "
	  "item's key offset, entry location keys, dev extents' and block groups' chunk objectid and tree)",
	  { PR_ITEM_MALFORMED, PR_INODE_TYPE_ITEMS, PR_DIR_ENTRY_TYPE }, true, NULL, repair_item_fields, { 0 }, false },
	/* before anything judges extent references: the check runs again after it (repair_filesystem) */
	{ "root-items", "Point root items that name an older root block at their tree's newest root block",
	  { PR_ROOT_ITEM_OUTDATED, PR_ROOT_DIR_ENTRY_DANGLING }, true, NULL, repair_root_items, { 0 }, false },
	/* after root-items, which points a lost root item at the old tree where it is still there;
	 * wanted for an unreadable or missing data relocation tree (no problem code of its own); the
	 * check runs again after it: the old tree's blocks are leaked until extent-refs frees them */
	{ "data-reloc-tree", "Make the data relocation tree again, empty, when no copy of it can be read or its "
	  "root item is gone", { 0 }, true, NULL, repair_data_reloc_tree, { 0 }, false },
	/* the check runs again after it: the extent tree it points at is judged then */
	{ "root-item-fields", "Set root item fields the kernel refuses or another copy contradicts (the extent tree's "
	  "misdirected root item from the backup root, unknown flags, generations from the future, the root "
	  "directory, the generation of a root block's extent item)",
	  { PR_ROOT_ITEM_BAD, PR_EXTENT_GENERATION }, true, NULL, repair_root_fields,
	  /* generations from the future are root-generations' (the blocks themselves are copied) */
	  { PR_ROOT_ITEM_GENERATION, PR_TREE_BLOCK_GENERATION }, false },
	/* replaces extent-refs and free-space-tree; what the extent tree lacked or held wrongly is
	 * fixed, unreadable blocks of other trees make it refuse (check/repair_rebuild.c) */
	{ "extent-tree", "Rebuild the whole extent tree from the trees that use the extents (references, "
	  "block group items, space counters and free-space tree)",
	  { PR_EXTENT_REF_MISSING, PR_EXTENT_REF_UNUSED, PR_EXTENT_REF_COUNT, PR_EXTENT_REFS_TOTAL,
	    PR_TREE_BLOCK_NOT_ALLOCATED, PR_TREE_BLOCK_LEAKED, PR_DATA_EXTENT_NOT_ALLOCATED, PR_BLOCK_GROUP_USED,
	    PR_SUPER_BYTES_USED, PR_FREE_SPACE_MISMATCH, PR_FREE_SPACE_INFO_COUNT, PR_EXTENT_OVERLAP, PR_EXTENT_TYPE,
	    PR_TREE_BLOCK_UNREADABLE, PR_TREE_ROOT_UNREADABLE, PR_CHUNK_NO_BLOCK_GROUP },
	  true, extent_forced, repair_rebuild_extent_tree,
	  /* a subvolume named by root refs but without its root item: its blocks look leaked, and
	   * dropping their references would free a snapshot that a new root item could give back */
	  { PR_DEVICE_MISSING, PR_DEV_EXTENT_OVERLAP, PR_ROOT_DIR_ENTRY_DANGLING, PR_ROOT_ITEM_OUTDATED }, false },
	/* before extent-refs, which would otherwise drop the extent and make one where the bytenr points;
	 * the check runs again after it */
	{ "file-extent-bytenr", "Point file extents whose disk bytenr lost its extent back at the extent that "
	  "names them (or give them its disk length; one pointing outside every data chunk becomes a hole)",
	  { PR_DATA_EXTENT_NOT_ALLOCATED, PR_FILE_EXTENT_BAD_RANGE }, true, NULL, repair_file_extent_bytenrs, { 0 },
	  false },
	/* before extent-refs: a file extent's offset names the reference it needs; the check runs again after it */
	{ "file-extent-ranges", "Set back the offset or length of file extents that reach past their extent, from "
	  "the extent's references", { PR_FILE_EXTENT_BAD }, true, NULL, repair_file_extent_ranges, { 0 }, false },
	/* before extent-refs: what it sets decides the references; the check runs again after it */
	{ "file-extent-fields", "Set file extent fields the kernel refuses (encryption, encoding, unknown compression "
	  "or type, a generation from the future) from the item, its data and checksums (a range nothing decodes "
	  "becomes a hole)", { PR_FILE_EXTENT_BAD }, true, NULL, repair_file_extent_fields, { 0 }, false },
	/* after the fields (an unknown type has no range), before extent-refs; the check runs again after it */
	{ "file-extent-overlap", "Put overlapping file extents back where their extents' references say, or cut "
	  "the earlier one's length at the later one's start", { PR_FILE_EXTENT_OVERLAP }, true, NULL,
	  repair_file_extent_overlap, { PR_FILE_EXTENT_BAD }, false },
	{ "extent-refs", "Rewrite wrong extent references from the trees that use the extents (counts, missing "
	  "and extra references, items without users, missing items)",
	  { PR_EXTENT_REF_MISSING, PR_EXTENT_REF_UNUSED, PR_EXTENT_REF_COUNT, PR_EXTENT_REFS_TOTAL,
	    PR_TREE_BLOCK_NOT_ALLOCATED, PR_TREE_BLOCK_LEAKED, PR_DATA_EXTENT_NOT_ALLOCATED,
	    PR_EXTENT_INLINE_REF_BAD, PR_EXTENT_LEVEL, PR_EXTENT_TYPE,
	    PR_EXTENT_FULL_BACKREF }, true, NULL,
	  /* a subvolume-tree block's owner says which root its data refs name: a wrong one misleads */
	  repair_extent_refs, { PR_ROOT_DIR_ENTRY_DANGLING, PR_ROOT_ITEM_OUTDATED, PR_TREE_BLOCK_OWNER }, false },
	{ "stripe-crossing", "Copy tree blocks that cross a 64 KiB stripe boundary to aligned places",
	  { PR_TREE_BLOCK_CROSSES_STRIPE }, true, NULL, repair_stripe_crossing, { 0 }, false },
	/* its trees unreadable for that alone do not stop it (it checks); the check runs again after it */
	{ "root-generations", "Give root items from the future their root block's generation (a root block from the "
	  "future too: copied on write)",
	  { PR_ROOT_ITEM_GENERATION, PR_TREE_BLOCK_GENERATION }, true, NULL, repair_root_generations, { 0 }, false },
	/* the commit writes the superblock with the array */
	{ "sys-chunk-array", "Rebuild the superblock's system chunk array from the chunk tree's system chunks",
	  { PR_SYS_CHUNK_NOT_IN_TREE, PR_SYS_CHUNK_MISSING }, true, NULL, repair_sys_chunk_array, { 0 }, true },
	/* the commit fills the next slot with the current roots */
	{ "backup-roots", "Clear superblock backup roots that name no roots", { PR_SUPER_BACKUP_ROOT_BAD }, true,
	  NULL, repair_backup_roots, { 0 }, true },
	/* the commit writes the superblock with the count */
	{ "num-devices", "Set the superblock's num_devices to the number of dev items", { PR_SUPER_NUM_DEVICES }, true,
	  NULL, repair_num_devices, { PR_DEVICE_MISSING }, false },
	/* before space-counters, which then counts the devices' bytes without them */
	{ "dev-extents", "Remove dev extents that no chunk accounts for, give chunk stripes without one a dev "
	  "extent (or, when a dev extent elsewhere is plainly the one it lost, the stripe that place), dev "
	  "extents that disagree with the stripe starting there its chunk and length, and of two overlapping dev "
	  "extents the one no stripe names its stripe's length or place (or remove it when its chunk has all its own)",
	  { PR_DEV_EXTENT_NO_CHUNK, PR_CHUNK_NO_DEV_EXTENT, PR_DEV_EXTENT_MISMATCH, PR_DEV_EXTENT_OVERLAP }, true, NULL,
	  repair_dev_extents, { 0 }, false },
	{ "block-group-flags", "Set block group flags that differ from their chunk's type to the type",
	  { PR_BLOCK_GROUP_FLAGS }, true, NULL, repair_block_group_flags, { 0 }, true },
	{ "space-counters", "Recompute block group used bytes, superblock bytes_used and total_bytes, and "
	  "device bytes_used (a dev item larger than its device: the device's size)",
	  { PR_BLOCK_GROUP_USED, PR_SUPER_BYTES_USED, PR_SUPER_TOTAL_BYTES, PR_DEV_BYTES_USED, PR_DEV_TOTAL_BYTES,
	    PR_SUPER_TOTAL_BYTES_LARGE, PR_DEV_SIZE_UNALIGNED }, true,
	  NULL,
	  repair_space_counters,
	  /* device bytes_used from dev extents that are themselves wrong would be no better */
	  { PR_CHUNK_NO_DEV_EXTENT, PR_DEV_EXTENT_NO_CHUNK, PR_DEV_EXTENT_MISMATCH, PR_DEV_EXTENT_BEYOND_DEVICE }, true },
	{ "free-space-tree", "Rebuild the free-space tree from the extent tree (and clear the v1 space cache)",
	  { PR_FREE_SPACE_MISMATCH, PR_FREE_SPACE_INFO_COUNT, PR_FREE_SPACE_ORPHAN, PR_BGT_NO_FST,
	    PR_FREE_SPACE_LEFTOVER }, true, fst_forced,
	  repair_free_space_tree, { 0 }, true },
	/* before csums: the check runs again after it and finds the checksums the data now lacks */
	{ "compressed-nodatasum", "Clear nodatasum on files with compressed extents that decompress whole (their "
	  "checksums are then computed from the data)", { PR_FILE_EXTENT_COMPRESSED_NODATASUM }, true, NULL,
	  repair_compressed_nodatasum, { 0 }, false },
	{ "csums", "Fix the csum tree: merge overlapping items, trim items of a wrong size, remove checksums "
	  "outside data extents (and of data only NODATASUM files use); where checksums are missing (or with --rebuild-csum-tree) recompute them "
	  "from the data (a csum tree with unreadable blocks is dropped whole first)",
	  { PR_CSUM_ITEM_SIZE, PR_CSUM_OVERLAP, PR_CSUM_OUTSIDE_EXTENT, PR_CSUM_MISSING, PR_CSUM_NODATASUM }, true,
	  csum_forced, repair_csums,
	  /* which data extents exist comes from the extent tree */
	  { PR_EXTENT_REF_MISSING, PR_EXTENT_REF_UNUSED, PR_EXTENT_REF_COUNT, PR_EXTENT_REFS_TOTAL }, false },
	{ "extent-generations", "Bring extent items' generations from the future back (a tree block's own "
	  "generation, else the filesystem's)", { PR_EXTENT_ITEM_GENERATION }, true, NULL, repair_extent_generations,
	  { 0 }, false },
	{ "root-orphans", "Add the orphan item a deleted subvolume lacks, so that the kernel drops it",
	  { PR_ROOT_ORPHAN_MISSING }, true, NULL, repair_subvol_orphans, { 0 }, false },
	/* the numbers come from the check's accounting of the extents as they were */
	{ "qgroups", "Set each quota group's referenced and exclusive bytes to what the extents give",
	  { PR_QGROUP_MISMATCH }, true, NULL, repair_qgroups,
	  { PR_EXTENT_REF_MISSING, PR_EXTENT_REF_UNUSED, PR_EXTENT_REF_COUNT, PR_EXTENT_REFS_TOTAL,
	    PR_QGROUP_ITEM_BAD }, false },
	{ "root-refs", "Re-create missing root refs and root backrefs from their mirror items",
	  { PR_ROOT_REF_MISSING, PR_ROOT_BACKREF_MISSING }, true, NULL, repair_root_refs, { 0 }, false },
	/* after root-refs, which makes whole pairs of halves (the check runs again after it: the
	 * links are judged then, the dangling halves gone); the check runs again after it too, so
	 * the inodes class sets the sizes of the directories it added names to */
	{ "subvol-links", "Make subvolume links whole: a root ref or backref that differs from its mirror and "
	  "from the parent's dir entries from the one the entries confirm, missing dir entries of a subvolume "
	  "from its root refs, the root refs of an unreferenced subvolume from the one dir entry pair naming it",
	  { PR_ROOT_REF_MISMATCH, PR_ROOT_DIR_ENTRY_MISSING, PR_ROOT_UNREFERENCED }, true, NULL,
	  repair_subvol_links, { PR_ITEM_MALFORMED }, false },
	{ "uuid-tree", "Rebuild the uuid tree from the subvolumes' root items",
	  { PR_UUID_TREE_MISSING, PR_UUID_TREE_EXTRA }, true, uuid_forced,
	  repair_uuid_tree, { 0 }, true },
	/* the last three change subvolume trees, whose shared blocks need right extent references; the
	 * check runs again after this one (repair_filesystem), so names and inodes see the new items */
	{ "inode-items", "Re-create missing inode items from the inodes' surviving items (type, mode 0755 or "
	  "0644, link count, size and nbytes from their names, entries and extents), and subvolume top "
	  "directories that names point into",
	  { PR_INODE_ITEM_MISSING, PR_DIR_PARENT_MISSING }, true, NULL, repair_inode_items,
	  { PR_ITEM_MALFORMED, PR_EXTENT_REF_MISSING, PR_EXTENT_REF_UNUSED, PR_EXTENT_REF_COUNT,
	    PR_EXTENT_REFS_TOTAL }, false },
	/* before names and inodes, which it unblocks; the check runs again after it */
	{ "dir-links", "Remove every name but the first of directories with more than one name",
	  { PR_DIR_HARDLINK }, true, NULL, repair_dir_links,
	  { PR_INODE_ITEM_MISSING, PR_ITEM_MALFORMED, PR_FILE_EXTENT_NOT_FILE }, false },
	{ "names", "Re-create missing or wrong dir items, dir indexes and inode refs from the surviving ones, "
	  "re-key names under a wrong hash, remove entries naming nothing and refs into a parent that is not there, "
	  "remove or clean names holding '/' or NUL "
	  "(check/repair_names.c)",
	  { PR_DIR_ITEM_MISSING, PR_DIR_INDEX_MISSING, PR_INODE_REF_MISSING, PR_DIR_ITEM_INDEX_MISMATCH, PR_NAME_HASH,
	    PR_DIR_ENTRY_TYPE, PR_DIR_ENTRY_DANGLING, PR_DIR_PARENT_MISSING, PR_NAME_INVALID, PR_NAME_DUPLICATE }, true,
	  NULL, repair_names,
	  { PR_INODE_ITEM_MISSING, PR_ITEM_MALFORMED, PR_EXTENT_REF_MISSING,
	    PR_EXTENT_REF_UNUSED, PR_EXTENT_REF_COUNT, PR_EXTENT_REFS_TOTAL,
	    /* an inode whose mode and items disagree on its type: which one lies is not known */
	    PR_FILE_EXTENT_NOT_FILE, PR_DIR_HARDLINK }, false },
	{ "inodes", "Recompute wrong inode link counts, directory sizes and nbytes from the inodes' items, give "
	  "modes their file type, bring generations from the future back, link inodes without names into "
	  "/lost+found, remove stray orphan items, clear immutable and append on symlinks and flags the kernel does not know, make holes explicit where "
	  "files without no-holes lack extents",
	  { PR_INODE_NLINK, PR_DIR_ISIZE, PR_INODE_NBYTES, PR_INODE_MODE_INVALID, PR_INODE_GENERATION,
	    PR_INODE_UNREACHABLE, PR_ORPHAN_ITEM_BAD, PR_INODE_FLAGS_TYPE, PR_ROOT_TREE_INODE_MODE,
	    PR_FILE_EXTENT_HOLE, PR_FILE_EXTENT_INLINE, PR_INLINE_EXTENT_CORRUPT, PR_INODE_FLAGS_UNKNOWN }, true, NULL,
	  repair_inodes,
	  /* with names or extents missing or damaged, the items do not tell the right values */
	  { PR_INODE_ITEM_MISSING, PR_DIR_ITEM_MISSING, PR_DIR_INDEX_MISSING, PR_INODE_REF_MISSING,
	    PR_DIR_ENTRY_DANGLING, PR_DIR_ITEM_INDEX_MISMATCH, PR_NAME_HASH, PR_ITEM_MALFORMED,
	    PR_FILE_EXTENT_OVERLAP, PR_FILE_EXTENT_BAD, PR_DIR_PARENT_MISSING,
	    PR_EXTENT_REF_MISSING, PR_EXTENT_REF_UNUSED, PR_EXTENT_REF_COUNT, PR_EXTENT_REFS_TOTAL, PR_NAME_INVALID,
	    PR_FILE_EXTENT_NOT_FILE, PR_DIR_HARDLINK }, false },
};
#define NCLASSES (sizeof(classes) / sizeof(classes[0]))

/* The extent-tree rebuild runs only when asked for, checks what makes it
 * unsafe itself (only its blockers[] apply), and does the work of the
 * extent-refs and free-space-tree classes, which then do not run. */
static bool class_on_request_only(const struct repair_class *c)
{
	return c->run == repair_rebuild_extent_tree;
}

static bool class_superseded(const struct repair_class *c, const struct repair_options *o)
{
	return o->rebuild_extent && (c->run == repair_extent_refs || c->run == repair_free_space_tree);
}

/* Problems that make any transaction unsafe: the allocator trusts the extent
 * tree to say which blocks are free, and every tree it changes must be readable. */
static const enum problem_code transaction_blockers[] = {
	PR_DEVICE_MISSING, PR_TREE_BLOCK_UNREADABLE, PR_TREE_ROOT_UNREADABLE, PR_TREE_BLOCK_NOT_ALLOCATED,
	PR_EXTENT_OVERLAP, PR_EXTENT_OUTSIDE_CHUNK, PR_CHUNK_NO_BLOCK_GROUP, PR_BLOCK_GROUP_NO_CHUNK,
	PR_DEV_EXTENT_OVERLAP, PR_DATA_EXTENT_NOT_ALLOCATED,
	/* the commit writes every device's item into the superblock; the allocator finds metadata
	 * space by the chunk's type: with either wrong, the commit would only roll back */
	PR_DEV_ITEM_MISSING, PR_BLOCK_GROUP_FLAGS,
};

static bool class_fixes(const struct repair_class *c, enum problem_code code)
{
	for (unsigned i = 0; i < MAX_CODES && c->codes[i]; i++)
		if (c->codes[i] == code)
			return true;
	return false;
}

unsigned repair_class_count(void)
{
	return NCLASSES;
}

const char *repair_class_name(unsigned i, bool *unattended)
{
	if (i >= NCLASSES)
		return NULL;
	if (unattended)
		*unattended = classes[i].unattended;
	return classes[i].name;
}

bool repair_class_lists(unsigned i, enum problem_code code)
{
	return i < NCLASSES && class_fixes(&classes[i], code);
}

const char *repair_class_of(enum problem_code code, bool *unattended)
{
	const struct repair_class *found = NULL;

	for (size_t i = 0; i < NCLASSES; i++)
		if (class_fixes(&classes[i], code) && (!found || class_on_request_only(found)))
			found = &classes[i];
	if (unattended)
		*unattended = found && found->unattended;
	return found ? found->name : NULL;
}

static void mark_fixed(const struct repair_class *c, bool *fixed)
{
	for (unsigned i = 0; i < MAX_CODES && c->codes[i]; i++)
		fixed[c->codes[i]] = true;
}

static uint64_t class_problems(const struct repair_class *c, const struct check_ctx *ctx)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < MAX_CODES && c->codes[i]; i++)
		n += ctx->counts[c->codes[i]];
	return n;
}

/* The trees a class builds anew from others (so unreadable blocks in them do
 * not stop it, and are gone after it): how many, in trees[0..2). */
static unsigned class_rebuilt_trees(const struct repair_class *c, uint64_t trees[2])
{
	if (c->run == repair_rebuild_extent_tree) {
		trees[0] = BTRFS_EXTENT_TREE_OBJECTID;
		trees[1] = BTRFS_FREE_SPACE_TREE_OBJECTID;
		return 2;
	}
	trees[0] = c->run == repair_free_space_tree ? BTRFS_FREE_SPACE_TREE_OBJECTID
		   : c->run == repair_uuid_tree ? BTRFS_UUID_TREE_OBJECTID
		   : c->run == repair_csums ? BTRFS_CSUM_TREE_OBJECTID
		   : c->run == repair_dev_extents ? BTRFS_DEV_TREE_OBJECTID
		   : c->run == repair_data_reloc_tree ? BTRFS_DATA_RELOC_TREE_OBJECTID
		   : c->run == repair_qgroups ? BTRFS_QUOTA_TREE_OBJECTID : 0;
	return trees[0] ? 1 : 0;
}

static bool is_unreadable_code(enum problem_code code)
{
	return code == PR_TREE_BLOCK_UNREADABLE || code == PR_TREE_ROOT_UNREADABLE;
}

/* A class that drops unreadable blocks: the check is run again after it. */
static bool class_drops_blocks(const struct repair_class *c)
{
	return c->run == repair_lost_blocks;
}

/* Every unreadable block the check found is in a tree class c rebuilds (or drops). */
static bool class_rebuilds_unreadable(const struct repair_class *c, const struct check_ctx *ctx)
{
	uint64_t trees[2];
	unsigned n = class_rebuilt_trees(c, trees);

	if (class_drops_blocks(c))
		return repair_lost_covers(ctx);
	return n && check_unreadable_only_in(ctx, trees, n);
}

/* A class after which the check runs again, the classes after it chosen from
 * what it finds then: one that drops blocks, or makes inode items. */
static bool class_checks_again(const struct repair_class *c)
{
	return class_drops_blocks(c) || c->run == repair_inode_items || c->run == repair_root_items ||
	       c->run == repair_data_reloc_tree ||
	       c->run == repair_stray_items || c->run == repair_file_extent_bytenrs || c->run == repair_item_fields ||
	       c->run == repair_file_extent_ranges || c->run == repair_chunk_items ||
	       c->run == repair_file_extent_fields || c->run == repair_file_extent_overlap ||
	       c->run == repair_root_generations || c->run == repair_salvaged_blocks ||
	       c->run == repair_compressed_nodatasum || c->run == repair_dir_links ||
	       c->run == repair_tree_block_owners || c->run == repair_sys_chunk_array ||
	       c->run == repair_root_fields || c->run == repair_subvol_links || c->run == repair_root_refs ||
	       c->run == repair_rebuild_extent_tree;
}

/* Class c rebuilds a tree the check could not read whole: it runs for that. */
static bool class_wanted_for_unreadable(const struct repair_class *c, const struct check_ctx *ctx)
{
	uint64_t trees[2];
	unsigned n = class_rebuilt_trees(c, trees);

	if (class_drops_blocks(c))
		return repair_lost_covers(ctx);
	/* its root item made again for the block the extent tree names as the tree's root */
	if (c->run == repair_root_items && ctx->stats.root_items_missing)
		return true;
	for (unsigned i = 0; i < n; i++)
		if ((ctx->counts[PR_TREE_BLOCK_UNREADABLE] || ctx->counts[PR_TREE_ROOT_UNREADABLE]) &&
		    check_tree_unreadable(ctx, trees[i]))
			return true;
	return false;
}

/* The extent tree is rebuilt unasked when blocks of it that no copy gives
 * back are the only blocks the check could not read: nothing else can make a
 * transaction safe again, and every tree it is rebuilt from reads whole. */
static bool extent_tree_lost(const struct repair_class *c, const struct check_ctx *ctx)
{
	return c->run == repair_rebuild_extent_tree && check_tree_unreadable(ctx, BTRFS_EXTENT_TREE_OBJECTID) &&
	       class_rebuilds_unreadable(c, ctx);
}

/* After class c succeeded: what it fixed, and the unreadable blocks when they
 * were all in trees it rebuilt. */
static void mark_class_fixed(const struct repair_class *c, const struct check_ctx *ctx, bool *fixed)
{
	mark_fixed(c, fixed);
	if (class_rebuilds_unreadable(c, ctx))
		fixed[PR_TREE_BLOCK_UNREADABLE] = fixed[PR_TREE_ROOT_UNREADABLE] = true;
}

/* The root-items class keeps every block the check found in use without an
 * extent item from the allocator (they are mostly the stale tree's): those
 * do not make it unsafe. Nor do unreadable roots (class_blocker): pointing
 * a root item at its tree's real root is what makes that tree readable. */
static bool class_keeps_unallocated(const struct repair_class *c, enum problem_code code)
{
	return c->run == repair_root_items && code == PR_TREE_BLOCK_NOT_ALLOCATED;
}

/* Extents without items are what a salvaged extent tree shows until the
 * classes after the salvage add them back; the salvage keeps every block the
 * check reached from the allocator (check/repair_salvage.c) and allocates no
 * data. */
static bool salvage_tolerates(const struct repair_class *c, enum problem_code code)
{
	return c->run == repair_salvaged_blocks &&
	       (code == PR_TREE_BLOCK_NOT_ALLOCATED || code == PR_DATA_EXTENT_NOT_ALLOCATED);
}

/* A problem found that makes class c unsafe and that no class before it
 * fixes (fixed[code]: a class that runs earlier repairs every such problem). */
static const struct problem_def *class_blocker(const struct repair_class *c, const struct check_ctx *ctx,
					       const bool *fixed)
{
	for (size_t i = 0; c->transaction && !class_on_request_only(c) &&
			   i < sizeof(transaction_blockers) / sizeof(transaction_blockers[0]);
	     i++)
		if (ctx->counts[transaction_blockers[i]] && !fixed[transaction_blockers[i]] &&
		    !salvage_tolerates(c, transaction_blockers[i]) &&
		    !class_fixes(c, transaction_blockers[i]) && !class_keeps_unallocated(c, transaction_blockers[i]) &&
		    !(c->run == repair_root_generations && transaction_blockers[i] == PR_TREE_ROOT_UNREADABLE) &&
		    /* the extents of the lost chunk are outside every chunk until it is made */
		    !(c->run == repair_chunk_items && transaction_blockers[i] == PR_EXTENT_OUTSIDE_CHUNK) &&
		    !(c->run == repair_root_items && is_unreadable_code(transaction_blockers[i])) &&
		    !(is_unreadable_code(transaction_blockers[i]) && class_rebuilds_unreadable(c, ctx)))
			return problem_lookup(transaction_blockers[i]);
	for (unsigned i = 0; i < MAX_BLOCKERS && c->blockers[i]; i++)
		if (ctx->counts[c->blockers[i]] && !fixed[c->blockers[i]])
			return problem_lookup(c->blockers[i]);
	return NULL;
}

/* The profile of the metadata (or system) block groups when every one of
 * them is RAID5 or RAID6: the allocator writes no parity, so a transaction
 * has nowhere to write its tree blocks. NULL when transactions can run. */
static const char *parity_only_metadata(const struct fs_info *fs)
{
	static const uint64_t kinds[] = { BTRFS_BLOCK_GROUP_METADATA, BTRFS_BLOCK_GROUP_SYSTEM };
	const uint64_t parity = BTRFS_BLOCK_GROUP_RAID5 | BTRFS_BLOCK_GROUP_RAID6;

	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		uint64_t seen = 0;
		bool writable = false;
		for (size_t i = 0; fs && i < fs_chunk_count(fs) && !writable; i++) {
			const struct chunk *c = fs_chunk(fs, i);
			if (!(c->type & kinds[k]))
				continue;
			seen |= c->type;
			writable = !(c->type & parity);
		}
		if (!writable && (seen & parity))
			return seen & BTRFS_BLOCK_GROUP_RAID6 ? "RAID6" : "RAID5";
	}
	return NULL;
}

/* y/N on the terminal; anything but yes is no. */
static bool ask(const char *question, uint64_t problems)
{
	char line[64];

	fflush(stdout);
	if (problems)
		fprintf(stderr, "%s (%" PRIu64 " problem(s))? [y/N] ", question, problems);
	else
		fprintf(stderr, "%s? [y/N] ", question);
	fflush(stderr);
	if (!fgets(line, sizeof(line), stdin))
		return false;
	return line[0] == 'y' || line[0] == 'Y';
}

int repair_preflight(const struct fs_info *fs, struct repair_options *o, char *why, size_t why_len)
{
	char gate[400];

	if (features_check_write(fs->incompat, fs->compat_ro, gate, sizeof(gate))) {
		snprintf(why, why_len, "cannot repair: %s", gate);
		return FSCK_EXIT_ERROR;
	}
	if (o->dry_run || o->no_undo || o->undo_path)
		return 0;
	if (undo_default_path("btk-check", fs->fsid, fs->generation, o->default_undo, sizeof(o->default_undo),
			      why, why_len))
		return FSCK_EXIT_ERROR;
	o->undo_path = o->default_undo;
	return 0;
}

void check_ctx_reset(struct check_ctx *ctx)
{
	memset(ctx->counts, 0, sizeof(ctx->counts));
	ctx->errors = ctx->warnings = 0;
	json_object_put(ctx->json_problems);
	ctx->json_problems = json_object_new_array();
	memset(&ctx->stats, 0, sizeof(ctx->stats));
	ebitmap_destroy(ctx->visited);
	ctx->visited = NULL;
	repair_notes_free(ctx);
	ctx->infer_full_backref = false; /* the check after a repair trusts the extent tree again */
	ctx->cancelled_phase = NULL;
}

/* One class on the open filesystem: its transaction, or its raw writes. */
static int run_class(const struct repair_class *c, struct repair_ctx *r)
{
	int ret;

	r->class_name = c->name;
	r->changes = 0;
	r->left = 0;
	/* a failure of this class is told by what it records, not by a failure it
	 * (or the check) handled before: failures a class goes past stay recorded */
	btk_error_clear();
	if (!c->transaction)
		return c->run(r);
	ret = trans_start(r->fs, &r->t);
	if (ret)
		return fs_error(r->fs, ret, "cannot start a transaction: %s", btk_error_msg());
	ret = c->run(r);
	if (ret || r->opts->dry_run || !r->changes) {
		trans_abort(r->t);
		r->t = NULL;
		return ret;
	}
	ret = trans_commit(r->t);
	r->t = NULL;
	/* the chunks it made: the map the next classes and the check read */
	if (!ret && c->run == repair_chunk_items)
		ret = volumes_reload(r->fs);
	if (ret)
		return ret;
	repair_say(r, "committed (generation %" PRIu64 ")", r->fs->generation);
	return 0;
}

/* A free-space tree the check found wrong must not tell the allocator where
 * space is free (it could hand out blocks in use): until a class fixed it,
 * each transaction reads free space from the extent tree instead. A commit
 * sets the flag again from the superblock, so this runs before every class. */
static void fst_distrust(const struct check_ctx *ctx, struct repair_ctx *r, const bool *fixed)
{
	if ((ctx->counts[PR_FREE_SPACE_MISMATCH] && !fixed[PR_FREE_SPACE_MISMATCH]) ||
	    (ctx->counts[PR_FREE_SPACE_INFO_COUNT] && !fixed[PR_FREE_SPACE_INFO_COUNT]))
		r->fs->compat_ro &= ~(uint64_t)BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE_VALID;
}

static struct fs_info *open_for_repair(const struct repair_options *o, char **paths, unsigned npaths,
				       const struct fs_open_options *fo, const char *undo_path)
{
	struct fs_open_options opts = *fo;
	struct fs_info *fs;

	/* a dry run reads only: whatever it does in memory cannot reach the devices */
	opts.writable = !o->dry_run;
	opts.undo_path = o->dry_run ? NULL : undo_path;
	if (fs_open((const char *const *)paths, npaths, &opts, &fs)) {
		msg_error("%s", btk_error_msg());
		return NULL;
	}
	if (o->dry_run)
		fs->writable = true; /* transactions run in memory and are aborted */
	return fs;
}

/* Which classes from start on run: wanted by the problems or the options, not
 * blocked, accepted; none after one the check runs again after (they are
 * chosen from what it finds then). */
static unsigned choose_classes(const struct check_ctx *ctx, const struct repair_options *o, bool run[NCLASSES],
			       size_t start, const char *parity_meta)
{
	bool fixed[PR__COUNT] = { false };
	unsigned n = 0;

	for (size_t i = start; i < NCLASSES; i++)
		run[i] = false;
	for (size_t i = start; i < NCLASSES; i++) {
		const struct repair_class *c = &classes[i];
		uint64_t problems = class_problems(c, ctx);
		const struct problem_def *blocker;

		run[i] = false;
		if (!problems && !(c->forced && c->forced(o)) && !class_wanted_for_unreadable(c, ctx))
			continue;
		if ((class_on_request_only(c) && !c->forced(o) && !extent_tree_lost(c, ctx)) ||
		    class_superseded(c, o))
			continue;
		/* a bytenr pointed back needs an extent that declares an unused reference; a disk length
		 * the extent's; a hole a file extent outside every data chunk */
		if (c->run == repair_file_extent_bytenrs && !ctx->counts[PR_EXTENT_REF_UNUSED] &&
		    !ctx->counts[PR_FILE_EXTENT_BAD_RANGE] && !repair_notes_count(ctx, NOTES_HOLES))
			continue;
		if (c->transaction && parity_meta) {
			msg_warning("not repairing %s: the metadata is %s, and this version writes no parity "
				    "(a transaction has nowhere to write tree blocks)", c->name, parity_meta);
			continue;
		}
		if (o->preen && !c->unattended) {
			msg_warning("not repairing %s unattended (-p): it needs a decision; run btk-check --repair",
				    c->name);
			continue;
		}
		blocker = class_blocker(c, ctx, fixed);
		if (blocker) {
			msg_warning("not repairing %s: %s is unsafe while problems like [%s] remain",
				    c->name, c->transaction ? "a transaction" : "it", blocker->id);
			continue;
		}
		if (!o->yes && !o->dry_run && !ask(c->question, problems)) {
			msg_info("%s: left as it is", c->name);
			continue;
		}
		run[i] = true;
		mark_class_fixed(c, ctx, fixed);
		n++;
		if (class_checks_again(c))
			break;
	}
	return n;
}

/* Check the filesystem as the last class committed it (on the open repair
 * filesystem), so that the classes after it work from what is there now;
 * with infer_full_backref, to collect the references a rebuild of the extent
 * tree needs (the trees alone say them). */
static int detect_again(struct check_ctx *ctx, struct repair_ctx *r, const struct repair_hooks *hooks,
			const char *why, bool infer_full_backref)
{
	int ret;

	check_ctx_reset(ctx);
	ctx->infer_full_backref = infer_full_backref;
	ctx->fs = r->fs;
	if (ctx->opts->format != CLI_FORMAT_JSON)
		printf("checking again %s\n", why);
	ctx->progress = progress_create("checking again", 0, ctx->opts->progress);
	ret = hooks->detect(ctx);
	progress_finish(ctx->progress);
	ctx->progress = NULL;
	ctx->fs = NULL;
	return ret;
}

static void print_actions(struct check_ctx *ctx, struct json_object *actions, const char *undo_path,
			  bool dry_run)
{
	struct json_object *o;

	if (!actions)
		return;
	o = json_object_new_object();
	json_object_object_add(o, "repairs", actions);
	json_object_object_add(o, "dry_run", json_object_new_boolean(dry_run));
	if (undo_path)
		json_object_object_add(o, "undo_file", json_object_new_string(undo_path));
	check_output_section(ctx, "repair", o);
}

/* Simple quotas count each tree block toward the subvolume that allocated
 * it: a class after qgroups that copies a snapshot's shared block gives the
 * copy to the snapshot and takes the old block from its first owner, so on
 * such a filesystem the numbers are set again from a check after the classes.
 * Returns 1 when that failed, with *changes counting what it changed. */
static int recount_simple_quotas(struct check_ctx *ctx, struct repair_ctx *r, const struct repair_hooks *hooks,
				 uint64_t *changes)
{
	bool none[PR__COUNT] = { false };
	int ret;

	if (!(r->fs->incompat & BTRFS_FEATURE_INCOMPAT_SIMPLE_QUOTA))
		return 0;
	if (detect_again(ctx, r, hooks, "after the repair (simple quotas)", false))
		return 1;
	for (size_t i = 0; i < NCLASSES; i++) {
		if (classes[i].run != repair_qgroups || !ctx->counts[PR_QGROUP_MISMATCH] ||
		    class_blocker(&classes[i], ctx, none))
			continue;
		ret = run_class(&classes[i], r);
		*changes += r->changes;
		if (ret) {
			msg_errno(ret, "repairing %s failed, that class was rolled back: %s", classes[i].name,
				  btk_error_msg()[0] ? btk_error_msg() : "error");
			return 1;
		}
	}
	return 0;
}

int repair_filesystem(struct check_ctx *ctx, const struct repair_options *o, char **paths, unsigned npaths,
		      const struct fs_open_options *fo, const struct repair_hooks *hooks)
{
	struct repair_ctx r = { .found = ctx, .opts = o };
	bool run[NCLASSES], failed = false, fixed[PR__COUNT] = { false };
	const char *undo_path = NULL;
	uint64_t changes = 0;
	unsigned committed = 0;   /* classes that changed something and committed */
	const char *parity_meta = parity_only_metadata(ctx->fs);
	unsigned chosen = choose_classes(ctx, o, run, 0, parity_meta);
	int ret;

	if (!chosen) {
		if (ctx->errors)
			msg_info("nothing was repaired");
		return ctx->errors ? FSCK_EXIT_UNCORRECTED : FSCK_EXIT_CLEAN;
	}
	if (!o->dry_run && !o->no_undo) {
		undo_path = o->undo_path; /* repair_preflight chose the default */
		if (!undo_path) {
			msg_error("no undo file chosen (repair_preflight did not run)");
			return FSCK_EXIT_ERROR;
		}
	}
	fs_close(ctx->fs);
	ctx->fs = NULL;
	r.fs = open_for_repair(o, paths, npaths, fo, undo_path);
	if (!r.fs)
		return FSCK_EXIT_ERROR;
	if (ctx->opts->format == CLI_FORMAT_JSON)
		r.actions = json_object_new_array();
	if (undo_path)
		msg_info("undo file: %s ('btk-undo %s DEVICE...' rolls the repair back)", undo_path, undo_path);
	for (size_t i = 0; i < NCLASSES; i++) {
		const struct problem_def *blocker;
		if (!run[i])
			continue;
		if (cli_cancelled())
			break;
		/* chosen unasked (extent_tree_lost): the check ran trusting the extent tree */
		if (classes[i].run == repair_rebuild_extent_tree && !ctx->infer_full_backref &&
		    (ret = detect_again(ctx, &r, hooks, "to collect the references the extent tree is rebuilt from",
					true))) {
			failed = true;
			break;
		}
		/* a class before this one was to fix what blocks it, and did not */
		if ((blocker = class_blocker(&classes[i], ctx, fixed))) {
			msg_warning("not repairing %s: problems like [%s] were not repaired", classes[i].name, blocker->id);
			continue;
		}
		fst_distrust(ctx, &r, fixed);
		ret = run_class(&classes[i], &r);
		changes += r.changes;
		committed += !ret && r.changes && !o->dry_run;
		if (!ret && !r.left)
			mark_class_fixed(&classes[i], ctx, fixed);
		if (ret) {
			msg_errno(ret, "repairing %s failed, that class was rolled back: %s", classes[i].name,
				  btk_error_msg()[0] ? btk_error_msg() : "error");
			failed = true;
		} else if (!r.changes) {
			repair_say(&r, "nothing to change");
			/* nothing changed: the classes after it are chosen from the same findings */
			if (class_checks_again(&classes[i]))
				choose_classes(ctx, o, run, i + 1, parity_meta);
		} else if (class_checks_again(&classes[i]) && !o->dry_run) {
			char why[96];

			snprintf(why, sizeof(why), "after %s", classes[i].name);
			if ((ret = detect_again(ctx, &r, hooks, why, false))) {
				failed = true;
				break;
			}
			memset(fixed, 0, sizeof(fixed));
			choose_classes(ctx, o, run, i + 1, parity_meta);
		}
	}
	if (!failed && committed && !cli_cancelled() && recount_simple_quotas(ctx, &r, hooks, &changes))
		failed = true;
	ret = 0;
	if (!o->dry_run && changes) {
		ret = fs_finish_undo(r.fs);
		if (ret) {
			msg_errno(ret, "%s", btk_error_msg());
			failed = true;
		}
	}
	print_actions(ctx, r.actions, changes ? undo_path : NULL, o->dry_run);
	fs_close(r.fs);
	if (cli_cancelled()) {
		/* between classes: each class committed whole, or not at all */
		if (committed)
			msg_warning("repair cancelled: %u repair class(es) were committed whole before it, nothing "
				    "after it; run btk-check again", committed);
		else
			msg_warning("repair cancelled: nothing was committed");
		return FSCK_EXIT_CANCELLED;
	}
	if (o->dry_run) {
		msg_info("dry run: nothing was written");
		return (ctx->errors ? FSCK_EXIT_UNCORRECTED : FSCK_EXIT_CLEAN) | (failed ? FSCK_EXIT_ERROR : 0);
	}

	/* check again, from what is on the devices now */
	{
		if (fs_open((const char *const *)paths, npaths, fo, &ctx->fs)) {
			msg_error("opening the repaired filesystem: %s", btk_error_msg());
			return FSCK_EXIT_ERROR;
		}
	}
	check_ctx_reset(ctx);
	if (ctx->opts->format != CLI_FORMAT_JSON)
		printf("checking again after the repair\n");
	ctx->progress = progress_create("checking again", 0, ctx->opts->progress);
	ret = hooks->detect(ctx);
	progress_finish(ctx->progress);
	ctx->progress = NULL;
	if (ret == FSCK_EXIT_CANCELLED)
		hooks->summary(ctx);   /* the repair is committed; says the check after it was cancelled */
	if (ret)
		return ret;
	hooks->summary(ctx);
	if (ctx->errors)
		ret = FSCK_EXIT_UNCORRECTED;
	else
		ret = changes ? FSCK_EXIT_CORRECTED : FSCK_EXIT_CLEAN;
	return ret | (failed ? FSCK_EXIT_ERROR : 0);
}
