// SPDX-License-Identifier: GPL-2.0-only
/* Data extents of a chunk whose profile changes: read on the copies that
 * stay, each sector checked against the csum tree, bad sectors rewritten
 * from a good copy, new stripes filled from good copies. Data written
 * without checksums (nodatasum files, preallocated extents) cannot be
 * verified: it is read (an I/O error still counts as a bad copy), copied,
 * and counted as unverified. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/convert.h"
#include <btk/csum.h>
#include <btk/csum_tree.h>

#define PIECE (1u << 20) /* bytes of one extent handled at a time */
#define MAX_SECTORS (PIECE / 4096)

struct data_verify {
	struct fs_info *fs;
	const struct chunk_plan *plan;
	struct verify_stats *st;
	struct csum_tree_cursor cur;
	uint8_t *bufs[8], *good;
	char *msg;
	size_t msglen;
};

int data_verify_begin(struct fs_info *fs, const struct chunk_plan *p, struct verify_stats *st, char *msg,
		      size_t msglen, struct data_verify **out)
{
	struct data_verify *d = calloc(1, sizeof(*d));
	int ret;

	*out = NULL;
	if (!d)
		return -ENOMEM;
	*d = (struct data_verify){ .fs = fs, .plan = p, .st = st, .msg = msg, .msglen = msglen };
	for (unsigned i = 0; i < p->nold; i++)
		if (!(d->bufs[i] = malloc(PIECE))) {
			data_verify_end(d);
			return -ENOMEM;
		}
	d->good = malloc(PIECE);
	if (!d->good) {
		data_verify_end(d);
		return -ENOMEM;
	}
	ret = csum_tree_open(&d->cur, fs, p->logical, p->logical + p->length);
	if (ret) {
		data_verify_end(d);
		return ret;
	}
	*out = d;
	return 0;
}

void data_verify_end(struct data_verify *d)
{
	if (!d)
		return;
	csum_tree_close(&d->cur);
	for (unsigned i = 0; i < 8; i++)
		free(d->bufs[i]);
	free(d->good);
	free(d);
}

/* Does old copy i's sector hold what the csum tree expects? */
static bool sector_ok(struct data_verify *d, const uint8_t *data, const uint8_t *want)
{
	uint8_t got[BTRFS_CSUM_SIZE];

	if (!want)
		return true;
	if (csum_compute(d->fs->csum_type, data, d->fs->sectorsize, got))
		return false;
	return memcmp(got, want, d->fs->csum_size) == 0;
}

/* Write `len` bytes of d->good at logical `at` (within the piece at `pos`) to stripe s. */
static int write_stripe(struct data_verify *d, const struct stripe_place *s, uint64_t pos, uint64_t at,
			uint64_t len)
{
	struct io_dev *io = convert_device_io(d->fs, s->devid);
	int ret;

	if (!io)
		return -ENODEV;
	ret = io_write(io, d->good + (at - pos), len, s->physical + (at - d->plan->logical));
	if (!ret)
		d->st->bytes_written += len;
	return ret;
}

/* One piece of at most PIECE bytes at logical `pos`. */
static int data_piece(struct data_verify *d, uint64_t pos, uint32_t len)
{
	const struct chunk_plan *p = d->plan;
	uint32_t ss = d->fs->sectorsize, nsec = len / ss;
	const uint8_t *want[MAX_SECTORS];
	uint8_t sums[MAX_SECTORS][BTRFS_CSUM_SIZE]; /* the cursor's pointers do not outlive its leaf */
	int8_t src[MAX_SECTORS];           /* the old copy whose sector is good, or -1 */
	uint8_t stay_bad[8][MAX_SECTORS / 8];
	bool adds = false, any_stay_bad = false, readok[8] = { false };
	unsigned order[8], norder = 0, missing = nsec;
	int ret;

	if (nsec > MAX_SECTORS)
		return -EINVAL;
	memset(stay_bad, 0, sizeof(stay_bad));
	for (unsigned k = 0; k < p->nnew; k++)
		adds |= p->added[k];
	for (uint32_t s = 0; s < nsec; s++) {
		src[s] = -1;
		ret = csum_tree_get(&d->cur, pos + (uint64_t)s * ss, &want[s]);
		if (ret < 0)
			return ret;
		if (ret == 0) {
			want[s] = NULL;
			d->st->data_unverified += ss;
		} else {
			memcpy(sums[s], want[s], d->fs->csum_size);
			want[s] = sums[s];
		}
	}
	/* the copies that stay first: each is read and checked; the others only as sources */
	for (unsigned i = 0; i < p->nold; i++)
		if (plan_old_stays(p, i))
			order[norder++] = i;
	for (unsigned i = 0; i < p->nold; i++)
		if (!plan_old_stays(p, i))
			order[norder++] = i;
	for (unsigned o = 0; o < norder; o++) {
		unsigned i = order[o];
		bool stays = plan_old_stays(p, i);
		struct io_dev *io = convert_device_io(d->fs, p->old_stripes[i].devid);
		if (!stays && (missing == 0 || (!adds && !any_stay_bad)))
			continue;
		readok[i] = io && io_read(io, d->bufs[i], len, p->old_stripes[i].physical + (pos - p->logical)) == 0;
		d->st->bytes_read += len;
		for (uint32_t s = 0; s < nsec; s++) {
			bool ok = readok[i] && sector_ok(d, d->bufs[i] + (size_t)s * ss, want[s]);
			if (ok && src[s] < 0) {
				src[s] = (int8_t)i;
				memcpy(d->good + (size_t)s * ss, d->bufs[i] + (size_t)s * ss, ss);
				missing--;
			}
			if (!ok && stays) {
				stay_bad[i][s / 8] |= (uint8_t)(1u << (s % 8));
				any_stay_bad = true;
			}
		}
	}
	for (uint32_t s = 0; s < nsec; s++)
		if (src[s] < 0) {
			snprintf(d->msg, d->msglen, "data block %llu (chunk %llu) has no good copy%s: nothing was "
				 "converted", (unsigned long long)(pos + (uint64_t)s * ss),
				 (unsigned long long)p->logical, want[s] ? "" : " (every copy failed to read)");
			return -EUCLEAN;
		}
	for (unsigned i = 0; i < p->nold; i++)
		for (uint32_t s = 0; s < nsec; s++) {
			if (!(stay_bad[i][s / 8] & (1u << (s % 8))))
				continue;
			ret = write_stripe(d, &p->old_stripes[i], pos, pos + (uint64_t)s * ss, ss);
			if (ret)
				return ret;
			d->st->data_repaired++;
		}
	for (unsigned k = 0; k < p->nnew; k++)
		if (p->added[k] && (ret = write_stripe(d, &p->new_stripes[k], pos, pos, len)))
			return ret;
	d->st->data_bytes += len;
	return 0;
}

int data_verify_extent(struct data_verify *d, uint64_t bytenr, uint64_t len)
{
	const struct chunk_plan *p = d->plan;
	uint32_t ss = d->fs->sectorsize;

	if (bytenr < p->logical || len > p->logical + p->length - bytenr || bytenr % ss || len % ss) {
		snprintf(d->msg, d->msglen, "data extent %llu+%llu does not fit chunk %llu: run btk-check",
			 (unsigned long long)bytenr, (unsigned long long)len, (unsigned long long)p->logical);
		return -EUCLEAN;
	}
	while (len) {
		uint32_t n = len > PIECE ? PIECE : (uint32_t)len;
		int ret = data_piece(d, bytenr, n);
		if (ret)
			return ret;
		bytenr += n;
		len -= n;
	}
	return 0;
}
