/* SPDX-License-Identifier: GPL-2.0-only */
/* btk-check --repair: what the checker found, repaired class by class.
 *
 * A repair class fixes one family of problems (the problem table's codes it
 * lists). Classes that change trees run in their own copy-on-write
 * transaction, committed atomically (a failure aborts it and leaves the
 * filesystem as the previous class left it); classes that rewrite a bad copy
 * of a block or superblock from a good one write raw, then flush. Every
 * write goes through the undo recorder unless --no-undo. After the last
 * class the filesystem is opened again and checked again: what remains
 * decides the exit status (fsck(8): 1 all corrected, 4 some remain). */
#ifndef BTK_CHECK_REPAIR_H
#define BTK_CHECK_REPAIR_H

#include <stdbool.h>
#include <stdint.h>

#include "check/check.h"
#include <btk/trans.h>

struct repair_options {
	bool enabled;          /* --repair, or a --rebuild-* option */
	bool yes;              /* --yes: no questions */
	bool dry_run;          /* --dry-run: say what would be written, write nothing */
	bool preen;            /* -p/-a: only the classes safe unattended (repair_class.unattended) */
	bool no_undo;          /* --no-undo */
	const char *undo_path; /* --undo-file; NULL: the default (repair_preflight sets it) */
	bool rebuild_fst;      /* --rebuild-free-space-tree */
	bool rebuild_uuid;     /* --rebuild-uuid-tree */
	bool clear_log;        /* --clear-log */
	bool rebuild_csum;     /* --rebuild-csum-tree */
	bool rebuild_extent;   /* --rebuild-extent-tree */
	char default_undo[4096]; /* the default undo path (common/undo_path.h) */
};

/* What main.c lends the repair: running every phase, printing a run's summary. */
struct repair_hooks {
	int (*detect)(struct check_ctx *ctx);
	void (*summary)(struct check_ctx *ctx);
};

/* The state one repair class works on. */
struct repair_ctx {
	struct fs_info *fs;              /* opened writable (in memory only for a dry run) */
	struct check_ctx *found;         /* the check that found the problems (and its notes) */
	const struct repair_options *opts;
	const char *class_name;
	struct trans *t;                 /* transactional classes: their transaction */
	uint64_t changes;                /* changes made (a dry run: that would be made) */
	uint64_t left;                   /* problems of the class it knowingly left unrepaired */
	struct json_object *actions;     /* with --format json */
};

/* Keys a class collects in one walk and changes after (check/repair_keys.c). */
struct repair_keys {
	struct btrfs_key *keys;
	size_t n, cap;
};
int repair_keys_push(struct repair_keys *l, const struct btrfs_key *k);
/* How many changes a class names one by one before it sums up the rest. */
#define REPAIR_SAY_MAX 50
/* Call fn once for each inode (root, ino) of a repair-notes list of struct
 * inode_fix records (enum repair_note_list), sorted, repeats skipped; then
 * say how many changes the summary lines left out (check/repair_keys.c). */
int repair_each_noted_inode(struct repair_ctx *r, int list, int (*fn)(struct repair_ctx *r, uint64_t root,
									uint64_t ino));

/* One line of what a class changes (or, in a dry run, would change). */
void repair_say(struct repair_ctx *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The classes (check/repair_*.c). Each returns 0 (r->changes counts what it
 * did) or -errno with btk_error_msg() set; transactional ones only change r->t. */
int repair_super_copies(struct repair_ctx *r);
int repair_tree_block_copies(struct repair_ctx *r);
int repair_space_counters(struct repair_ctx *r);
int repair_free_space_tree(struct repair_ctx *r);
int repair_uuid_tree(struct repair_ctx *r);
int repair_extent_refs(struct repair_ctx *r);
int repair_rebuild_extent_tree(struct repair_ctx *r); /* check/repair_rebuild.c */
int repair_inodes(struct repair_ctx *r);
int repair_inode_items(struct repair_ctx *r); /* check/repair_inodes.c */
int repair_root_items(struct repair_ctx *r);
int repair_root_fields(struct repair_ctx *r); /* check/repair_root_fields.c */
/* check/root_recreate.c: part of root-items, root items of named subvolumes whose item is gone */
int repair_root_items_recreate(struct repair_ctx *r);
int repair_stray_items(struct repair_ctx *r);
int repair_item_fields(struct repair_ctx *r);
int repair_chunk_items(struct repair_ctx *r);
int repair_data_reloc_tree(struct repair_ctx *r); /* check/repair_data_reloc.c */
/* check/repair_quota_tree.c: part of qgroups, 1 when it made the quota tree again */
int repair_quota_tree_remake(struct repair_ctx *r);
int repair_names(struct repair_ctx *r);      /* check/repair_names.c */
/* check/repair_log.c: runs its own transaction (trans_start refuses a log tree) */
int repair_clear_log(struct repair_ctx *r);
int repair_csums(struct repair_ctx *r);      /* check/repair_csums.c */
int repair_root_refs(struct repair_ctx *r);  /* check/repair_roots.c */
int repair_subvol_links(struct repair_ctx *r); /* check/repair_subvol_links.c */
int repair_qgroups(struct repair_ctx *r);    /* check/repair_qgroups.c */
int repair_subvol_orphans(struct repair_ctx *r); /* check/repair_subvol_orphans.c */
int repair_extent_generations(struct repair_ctx *r); /* check/repair_extent_gens.c */
int repair_dev_extents(struct repair_ctx *r); /* check/repair_dev_extents.c */
int repair_num_devices(struct repair_ctx *r); /* check/repair_num_devices.c */
int repair_file_extent_bytenrs(struct repair_ctx *r); /* check/repair_bytenrs.c */
int repair_file_extent_ranges(struct repair_ctx *r); /* check/repair_fe_ranges.c */
int repair_file_extent_fields(struct repair_ctx *r); /* check/repair_fe_fields.c */
int repair_file_extent_overlap(struct repair_ctx *r); /* check/repair_fe_overlap.c */
int repair_root_generations(struct repair_ctx *r); /* check/repair_root_gens.c */
int repair_stripe_crossing(struct repair_ctx *r); /* check/repair_stripe_cross.c */
int repair_compressed_nodatasum(struct repair_ctx *r); /* check/repair_compressed.c */
int repair_dir_links(struct repair_ctx *r); /* check/repair_dir_links.c */
int repair_backup_roots(struct repair_ctx *r); /* check/repair_backup_roots.c */
int repair_block_group_flags(struct repair_ctx *r); /* check/repair_bg_flags.c */
int repair_sys_chunk_array(struct repair_ctx *r); /* check/repair_sys_chunks.c */
int repair_tree_block_owners(struct repair_ctx *r); /* check/repair_owners.c */
struct tree_block;
/* check/repair_salvage.c: copy the blocks of tree that want() picks to fresh blocks */
int repair_rewrite_tree_blocks(struct repair_ctx *r, uint64_t tree,
			       bool (*want)(uint64_t tree, const struct tree_block *b));
/* A tree block of len bytes at bytenr lies across a 64 KiB stripe boundary. */
bool tree_block_crosses_stripe(uint64_t bytenr, uint64_t len);
/* check/repair_lost.c: drops unreadable subvolume-tree blocks; _covers: every
 * unreadable block the check found is in a subvolume tree it can do that for */
int repair_lost_blocks(struct repair_ctx *r);
/* check/repair_salvage.c: blocks read as their salvaged view, copied to fresh blocks */
int repair_salvaged_blocks(struct repair_ctx *r);
bool repair_lost_covers(const struct check_ctx *ctx);

/* The classes in the order they run (for --list-problems and the registry's
 * unit test): their number, the i-th one's name (and whether -p runs it),
 * whether its code list names code. */
unsigned repair_class_count(void);
const char *repair_class_name(unsigned i, bool *unattended);
bool repair_class_lists(unsigned i, enum problem_code code);

/* The repair class that fixes code (the one that runs unasked when several
 * do), NULL when it is reported only; *unattended: whether -p runs it. */
const char *repair_class_of(enum problem_code code, bool *unattended);

/* Block group used and superblock bytes_used from the committed extent tree,
 * plus adjust[i] bytes for the i-th block group (fs_read_block_groups order;
 * NULL: none): what a class that created or deleted extent items needs. */
int repair_block_groups_used(struct repair_ctx *r, const int64_t *adjust);

/* Before any check work: whether a repair may write this filesystem at all
 * (the feature gate) and where its undo file goes. 0, or the exit status with
 * the reason in why (the caller prints it and puts it in the JSON document). */
int repair_preflight(const struct fs_info *fs, struct repair_options *o, char *why, size_t why_len);

/* Repair what ctx found on the filesystem of paths (opened again writable
 * with fo's settings), then check again with hooks->detect on a fresh
 * read-only open, which replaces ctx->fs. Returns the fsck exit status. */
int repair_filesystem(struct check_ctx *ctx, const struct repair_options *o, char **paths, unsigned npaths,
		      const struct fs_open_options *fo, const struct repair_hooks *hooks);

#endif
