/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Superblocks: read one copy, validate every field, pick the newest valid. */
#ifndef BTK_SUPER_H
#define BTK_SUPER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <btk/format.h>
#include <btk/io.h>

/* Result of reading one superblock copy. */
struct super_copy {
	int mirror;
	uint64_t offset;
	int status;            /* 0 valid; -ENXIO beyond the device; -EUCLEAN invalid; -EIO */
	uint64_t generation;   /* when it parsed far enough */
	char why[160];         /* what was wrong with it */
};

/* Read copy `mirror` of the superblock of one device into buf and validate it. */
int super_read_copy(struct io_dev *io, int mirror, uint8_t buf[BTRFS_SUPER_INFO_SIZE],
		    struct super_copy *info);
/* Read all copies and keep the valid one with the highest generation (or the
 * one `mirror` names when >= 0). Fills copies[BTRFS_SUPER_MIRROR_MAX]. */
int super_read_best(struct io_dev *io, int mirror, uint8_t buf[BTRFS_SUPER_INFO_SIZE],
		    struct super_copy copies[BTRFS_SUPER_MIRROR_MAX]);
/* Validate a superblock image found at byte `offset`: magic, checksum, geometry,
 * flags, tree pointers. 0 or -EUCLEAN with why filled in. */
int super_validate(const uint8_t *sb, uint64_t offset, char *why, size_t whylen);
/* Whether the kernel writes copy `mirror` of a device at each commit: only
 * the copies that end before the size its dev item gives (0: unknown, all). */
bool super_copy_kept(uint64_t dev_total_bytes, int mirror);
/* Recompute the checksum of a superblock image in place. */
int super_update_csum(uint8_t *sb);
/* The fsid tree blocks carry: metadata_uuid when that feature is on, else fsid. */
const uint8_t *super_metadata_fsid(const uint8_t *sb);
/* Whether member superblock sb names the filesystem rather than cur, the one
 * chosen so far, both of one filesystem's members (a sprout's seeds too): a
 * seed device's (SEEDING) never beats another's; among members of one fsid
 * the newest generation wins, then the lowest devid. fs_open and btk-image
 * restore both choose by it. */
bool super_member_preferred(const uint8_t *sb, const uint8_t *cur);

#endif
