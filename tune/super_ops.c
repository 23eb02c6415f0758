// SPDX-License-Identifier: GPL-2.0-only
/* Superblock-only changes: label, seeding flag, incompat feature bits. They
 * go into the superblock image of the first transaction; nothing else of
 * the filesystem changes for them. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/messages.h"
#include <btk/names.h>
#include <btk/super.h>
#include <btk/volumes.h>
#include "tune/tune.h"

static const struct {
	const char *name;
	uint64_t bit;
} incompat_names[] = {
	{ "extref", BTRFS_FEATURE_INCOMPAT_EXTENDED_IREF },
	{ "skinny-metadata", BTRFS_FEATURE_INCOMPAT_SKINNY_METADATA },
	{ "no-holes", BTRFS_FEATURE_INCOMPAT_NO_HOLES },
};

bool tune_uuid_is_zero(const uint8_t *uuid)
{
	static const uint8_t zero[16];

	return memcmp(uuid, zero, 16) == 0;
}

const char *tune_uuid_str(const uint8_t *uuid)
{
	static char bufs[4][UUID_STR_BUF];
	static unsigned next;
	char *b = bufs[next++ % 4];

	uuid_to_str(uuid, b);
	return b;
}

int tune_check_super_changes(struct fs_info *fs, const struct tune_opts *o)
{
	uint64_t flags = super_flags(fs_super(fs));

	if (o->seeding >= 0 && (fs->incompat & BTRFS_FEATURE_INCOMPAT_METADATA_UUID)) {
		msg_error("the seeding flag cannot change while METADATA_UUID is set: devices sprouted "
			  "from a seed find it by its fsid (set the fsid back with --metadata-uuid first)");
		return -EINVAL;
	}
	if (o->seeding == 0 && (flags & BTRFS_SUPER_FLAG_SEEDING))
		msg_warning("clearing the seeding flag: filesystems sprouted from this seed may no longer "
			    "mount if it is written to");
	if ((o->fsid || o->metadata_uuid) && (flags & BTRFS_SUPER_FLAG_SEEDING)) {
		msg_error("this is a seed filesystem: filesystems sprouted from it find it by its fsid, "
			  "which must not change (clear the seeding flag first if nothing was sprouted)");
		return -EINVAL;
	}
	return 0;
}

void tune_apply_super_changes(struct fs_info *fs, const struct tune_opts *o, uint8_t *sb, bool *changed)
{
	const char *verb = o->dry_run ? "would be " : "";

	(void)fs;
	if (o->label) {
		char old[BTRFS_LABEL_SIZE + 1];
		memcpy(old, super_label_ptr(sb), BTRFS_LABEL_SIZE);
		old[BTRFS_LABEL_SIZE] = 0;
		if (strcmp(old, o->label) == 0) {
			printf("label: unchanged ('%s')\n", old);
		} else {
			printf("label: '%s' -> '%s'%s\n", old, o->label, o->dry_run ? " (dry run)" : "");
			memset(super_label_ptr(sb), 0, BTRFS_LABEL_SIZE);
			memcpy(super_label_ptr(sb), o->label, strlen(o->label));
			*changed = true;
		}
	}
	if (o->seeding >= 0) {
		uint64_t flags = super_flags(sb);
		bool on = flags & BTRFS_SUPER_FLAG_SEEDING;
		if (on == (o->seeding == 1)) {
			printf("seeding: already %s\n", on ? "on" : "off");
		} else {
			printf("seeding: %s -> %s%s\n", on ? "on" : "off", on ? "off" : "on",
			       o->dry_run ? " (dry run)" : "");
			super_set_flags(sb, on ? flags & ~BTRFS_SUPER_FLAG_SEEDING : flags | BTRFS_SUPER_FLAG_SEEDING);
			*changed = true;
		}
	}
	for (size_t i = 0; i < sizeof(incompat_names) / sizeof(incompat_names[0]); i++) {
		uint64_t incompat = super_incompat_flags(sb);
		if (!(o->enable_incompat & incompat_names[i].bit))
			continue;
		if (incompat & incompat_names[i].bit) {
			printf("feature %s: already enabled\n", incompat_names[i].name);
			continue;
		}
		printf("feature %s: %senabled\n", incompat_names[i].name, verb);
		super_set_incompat_flags(sb, incompat | incompat_names[i].bit);
		*changed = true;
	}
}
