/* SPDX-License-Identifier: GPL-2.0-only */
/* btk-tune: what the options ask for, and the operations that carry it out.
 *
 * Every change but --fsid is made in one copy-on-write transaction (the
 * superblock write is the commit point); --metadata-uuid adds a second
 * commit, --fsid rewrites every tree block in place under a superblock flag
 * (tune/fsid.c describes the protocol). A dry run performs the transaction
 * in memory over devices opened read-only and aborts it. */
#ifndef BTK_TUNE_TUNE_H
#define BTK_TUNE_TUNE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/progress.h"
#include <btk/fs.h>
#include <btk/trans.h>

struct tune_opts {
	const char *label;            /* --label, NULL: unchanged */
	int seeding;                  /* --seeding: -1 unchanged, 0 off, 1 on */
	uint64_t enable_incompat;     /* --enable extref|skinny-metadata|no-holes */
	bool enable_fst;              /* --enable free-space-tree */
	bool metadata_uuid;           /* --metadata-uuid[=UUID] */
	bool metadata_uuid_given;
	uint8_t metadata_uuid_value[16];
	bool fsid;                    /* --fsid[=UUID] */
	bool fsid_given;
	uint8_t fsid_value[16];
	bool rebuild_uuid_tree;
	bool dry_run;
	const char *undo_path;
	enum progress_mode progress;
};

/* The superblock of every member device as each device has it now (the
 * newest valid copy), for the resumable fsid changes. */
struct member_supers {
	unsigned count;
	uint8_t (*sb)[BTRFS_SUPER_INFO_SIZE];
};
int member_supers_read(struct fs_info *fs, struct member_supers *out);
void member_supers_free(struct member_supers *m);

/* super_ops.c: label, seeding, feature bits. Validate against the open
 * filesystem (-EINVAL with a message printed when a request cannot be
 * honoured) and apply to the superblock image of the transaction, printing
 * each change. *changed tells whether anything differs. */
int tune_check_super_changes(struct fs_info *fs, const struct tune_opts *o);
void tune_apply_super_changes(struct fs_info *fs, const struct tune_opts *o, uint8_t *sb, bool *changed);

/* metadata_uuid.c: --metadata-uuid, two commits (CHANGING_FSID_V2 first). */
int tune_metadata_uuid(struct fs_info *fs, const struct tune_opts *o);
/* fsid.c: --fsid, the in-place rewrite of every tree block; resumable. */
int tune_fsid(struct fs_info *fs, const struct tune_opts *o);
/* Whether the filesystem (any member) is in the middle of an fsid change:
 * 0 no, 1 an --fsid rewrite (CHANGING_FSID), 2 a --metadata-uuid change
 * (CHANGING_FSID_V2), or -errno. */
int tune_fsid_change_pending(struct fs_info *fs);

/* free_space_tree.c: build the free-space tree from the extent tree in t,
 * dropping the v1 space cache. Prints what it did. */
int tune_build_free_space_tree(struct fs_info *fs, struct trans *t);
/* uuid_tree.c: delete and rebuild the uuid tree from the root items. */
int tune_rebuild_uuid_tree(struct fs_info *fs, struct trans *t);

/* "xxxxxxxx-xxxx-..." of a 16-byte uuid, in a static rotating buffer (two
 * calls may share one printf). */
const char *tune_uuid_str(const uint8_t *uuid);
bool tune_uuid_is_zero(const uint8_t *uuid);

#endif
