// SPDX-License-Identifier: GPL-2.0-only
/* --metadata-uuid: change the fsid that mount and blkid use without touching
 * a single tree block. Tree blocks and device items keep carrying the
 * filesystem's original fsid; the superblock records it as metadata_uuid and
 * sets the METADATA_UUID incompat bit. Going back to the original fsid
 * clears the bit again.
 *
 * Like btrfstune -m/-M it takes two commits: the first sets the superblock
 * flag CHANGING_FSID_V2, the second makes the change and clears the flag.
 * A crash between the devices' superblock writes leaves some devices with
 * the new fsid and some flagged with the old one; the kernel refuses flagged
 * devices, and running --metadata-uuid again finishes the change (libfs
 * accepts such a device set with fs_open_options.fsid_change). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <uuid/uuid.h>

#include "common/messages.h"
#include <btk/super.h>
#include "tune/tune.h"

/* Newest generation among the members that finished (no flag), or 0. */
static const uint8_t *finished_member(const struct member_supers *m)
{
	const uint8_t *best = NULL;
	bool any_flagged = false;

	for (unsigned i = 0; i < m->count; i++)
		any_flagged |= (super_flags(m->sb[i]) & BTRFS_SUPER_FLAG_CHANGING_FSID_V2) != 0;
	if (!any_flagged)
		return NULL;
	for (unsigned i = 0; i < m->count; i++) {
		if (super_flags(m->sb[i]) & BTRFS_SUPER_FLAG_CHANGING_FSID_V2)
			continue;
		if (!best || super_generation(m->sb[i]) > super_generation(best))
			best = m->sb[i];
	}
	return best;
}

static int commit_super(struct fs_info *fs, void (*edit)(uint8_t *sb, const void *arg), const void *arg)
{
	struct trans *t;
	int ret = trans_start(fs, &t);

	if (ret) {
		msg_errno(ret, "cannot start a transaction: %s", btk_error_msg());
		return ret;
	}
	edit(trans_super(t), arg);
	ret = trans_commit(t);
	if (ret)
		msg_errno(ret, "commit failed: %s", btk_error_msg());
	return ret;
}

static void set_changing_flag(uint8_t *sb, const void *arg)
{
	(void)arg;
	super_set_flags(sb, super_flags(sb) | BTRFS_SUPER_FLAG_CHANGING_FSID_V2);
}

struct final_state {
	const uint8_t *meta;   /* what tree blocks carry: never changes */
	const uint8_t *fsid;   /* the fsid wanted */
};

static void set_final_state(uint8_t *sb, const void *arg)
{
	const struct final_state *f = arg;
	uint64_t incompat = super_incompat_flags(sb);

	if (memcmp(f->fsid, f->meta, BTRFS_FSID_SIZE) == 0) {
		incompat &= ~BTRFS_FEATURE_INCOMPAT_METADATA_UUID;
		memset(super_metadata_uuid_ptr(sb), 0, BTRFS_FSID_SIZE);
	} else {
		incompat |= BTRFS_FEATURE_INCOMPAT_METADATA_UUID;
		memcpy(super_metadata_uuid_ptr(sb), f->meta, BTRFS_FSID_SIZE);
	}
	memcpy(super_fsid_ptr(sb), f->fsid, BTRFS_FSID_SIZE);
	super_set_incompat_flags(sb, incompat);
	super_set_flags(sb, super_flags(sb) & ~BTRFS_SUPER_FLAG_CHANGING_FSID_V2);
}

int tune_metadata_uuid(struct fs_info *fs, const struct tune_opts *o)
{
	struct member_supers m;
	uint8_t meta[16], target[16];
	const uint8_t *finished;
	bool pending = false, current_ok = true;
	struct final_state f = { meta, target };
	int ret;

	ret = member_supers_read(fs, &m);
	if (ret) {
		msg_errno(ret, "%s", btk_error_msg());
		return ret;
	}
	memcpy(meta, fs->metadata_uuid, 16);
	finished = finished_member(&m);
	for (unsigned i = 0; i < m.count; i++) {
		pending |= (super_flags(m.sb[i]) & BTRFS_SUPER_FLAG_CHANGING_FSID_V2) != 0;
		current_ok &= memcmp(super_fsid_ptr(m.sb[i]), super_fsid_ptr(m.sb[0]), 16) == 0;
	}
	if (o->metadata_uuid_given)
		memcpy(target, o->metadata_uuid_value, 16);
	else if (finished)
		memcpy(target, super_fsid_ptr(finished), 16);
	else
		uuid_generate(target);
	member_supers_free(&m);

	if (!pending && current_ok && memcmp(target, fs->fsid, 16) == 0) {
		printf("metadata_uuid: the fsid is %s already: nothing to change\n", tune_uuid_str(target));
		return 0;
	}
	if (pending)
		msg_info("finishing an interrupted metadata_uuid change");
	printf("fsid: %s -> %s%s\n", tune_uuid_str(fs->fsid), tune_uuid_str(target),
	       o->dry_run ? " (dry run)" : "");
	if (memcmp(target, meta, 16) == 0)
		printf("metadata_uuid: back to the original fsid, METADATA_UUID %s\n",
		       o->dry_run ? "would be cleared" : "cleared");
	else
		printf("metadata_uuid: %s (tree blocks keep it), METADATA_UUID %s\n", tune_uuid_str(meta),
		       o->dry_run ? "would be set" : "set");
	if (o->dry_run)
		return 0;
	if (!(super_flags(fs_super(fs)) & BTRFS_SUPER_FLAG_CHANGING_FSID_V2)) {
		ret = commit_super(fs, set_changing_flag, NULL);
		if (ret)
			return ret;
	}
	ret = commit_super(fs, set_final_state, &f);
	if (ret)
		return ret;
	memcpy(fs->fsid, target, 16);
	return 0;
}
