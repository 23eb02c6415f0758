/* SPDX-License-Identifier: GPL-2.0-only */
/* btk-convert: shared declarations. */
#ifndef BTK_CONVERT_H
#define BTK_CONVERT_H

#include <stdbool.h>
#include <stdint.h>
#include <btk/chunk_edit.h>
#include <btk/fs.h>

int cmd_profile(int argc, char **argv);
int cmd_bg_tree(int argc, char **argv);

/* One chunk's change of profile. */
struct chunk_plan {
	uint64_t logical, length, type;
	uint64_t stripe_size;
	uint64_t new_profile;
	unsigned nold, nnew;
	struct stripe_place old_stripes[8];
	struct stripe_place new_stripes[8];
	bool added[8];             /* new_stripes[i] is not one of the old stripes */
};

struct profile_targets {
	bool have_meta, have_sys, have_data;
	uint64_t meta, sys, data;  /* profile bits */
};

/* Parse "single", "dup", "raid1", "raid1c3", "raid1c4" (and refuse the
 * striped profiles with an explanation). 0 or -EINVAL with msg set. */
int profile_parse(const char *s, uint64_t *profile, char *msg, size_t msglen);
/* Plan every chunk that changes; msg explains a refusal. */
int profile_plan(struct fs_info *fs, const struct profile_targets *tg, struct chunk_plan **plans,
		 size_t *nplans, char *msg, size_t msglen);

struct verify_stats {
	uint64_t blocks, bytes_read, bytes_written, repaired;
	uint64_t data_bytes, data_unverified, data_repaired; /* bytes, bytes, sectors */
	double seconds;
};
/* Read and checksum-verify every tree block of the planned chunks on the
 * stripes that stay, repair bad copies from good ones, and fill new
 * stripes. -EUCLEAN (msg names the block) when a block has no good copy. */
int profile_verify_and_copy(struct fs_info *fs, const struct chunk_plan *plans, size_t nplans,
			    bool verify, struct verify_stats *st, char *msg, size_t msglen);

/* Does old stripe i of the plan stay in the new stripe set? */
bool plan_old_stays(const struct chunk_plan *p, unsigned i);
struct io_dev *convert_device_io(struct fs_info *fs, uint64_t devid);

/* Data extents of one planned chunk (profile_data.c): verified against the
 * csum tree on the copies that stay, repaired, copied to added stripes. */
struct data_verify;
int data_verify_begin(struct fs_info *fs, const struct chunk_plan *p, struct verify_stats *st, char *msg,
		      size_t msglen, struct data_verify **out);
int data_verify_extent(struct data_verify *d, uint64_t bytenr, uint64_t len);
void data_verify_end(struct data_verify *d);

#endif
