// SPDX-License-Identifier: GPL-2.0-only
/* The backup-roots class: a superblock backup slot that names roots outside
 * their chunks (or from the future) would send a usebackuproot mount to
 * garbage. Such a slot is cleared (a never-used slot); the commit of this
 * class then fills the next slot with the current roots, as every commit
 * does. */
#include <string.h>

#include "check/repair.h"
#include <btk/format.h>
#include <btk/super.h>

int repair_backup_roots(struct repair_ctx *r)
{
	uint8_t *sb = trans_super(r->t);

	for (int i = 0; i < BTRFS_NUM_BACKUP_ROOTS; i++) {
		if (!backup_root_slot_bad(r->fs, sb, i))
			continue;
		memset(super_super_roots_ptr(sb) + (size_t)i * sizeof(struct btrfs_root_backup), 0,
		       sizeof(struct btrfs_root_backup));
		r->changes++;
		repair_say(r, "backup root %d names blocks that are no roots: cleared", i);
	}
	return 0;
}
