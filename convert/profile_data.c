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
#include "libfs/csum.h"
#include "libfs/tree.h"

#define PIECE (1u << 20) /* bytes of one extent handled at a time */
#define MAX_SECTORS (PIECE / 4096)

/* The csum items of one chunk's range, walked forward with the data. */
struct csum_cursor {
	struct fs_info *fs;
	struct tree_iter it;
	bool open, done;
	uint64_t start;        /* logical address of the current item's first sector */
	uint32_t n;            /* sectors it covers */
	const uint8_t *csums;
};

struct data_verify {
	struct fs_info *fs;
	const struct chunk_plan *plan;
	struct verify_stats *st;
	struct csum_cursor cur;
	uint8_t *bufs[8], *good;
	char *msg;
	size_t msglen;
};

/* Start at the csum item that covers `from` (it may begin before the chunk). */
static int csum_cursor_open(struct csum_cursor *c, struct fs_info *fs, uint64_t from, uint64_t to)
{
	struct btrfs_key min = { BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, from };
	struct btrfs_key max = { BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, to - 1 }, k;
	struct tree_path path;
	int ret;

	memset(c, 0, sizeof(*c));
	c->fs = fs;
	if (!fs->csum_root.bytenr) {
		c->done = true;
		return 0;
	}
	tree_path_init(&path);
	ret = tree_search_le(fs, &fs->csum_root, &min, &path);
	if (ret == 0) {
		tree_item_key(&path, &k);
		if (k.objectid == min.objectid && k.type == min.type)
			min.offset = k.offset;
	}
	tree_path_release(fs, &path);
	if (ret < 0)
		return ret;
	tree_iter_init(&c->it, fs, &fs->csum_root, &min, &max);
	c->open = true;
	return 0;
}

static void csum_cursor_close(struct csum_cursor *c)
{
	if (c->open)
		tree_iter_release(&c->it);
	c->open = false;
}

/* The expected checksum of the sector at `logical` (ascending calls only):
 * 1 with *csum set, 0 when the csum tree has none, -errno. */
static int csum_cursor_get(struct csum_cursor *c, uint64_t logical, const uint8_t **csum)
{
	uint32_t ss = c->fs->sectorsize;

	while (!c->done && (c->n == 0 || c->start + (uint64_t)c->n * ss <= logical)) {
		struct btrfs_key k;
		const uint8_t *d;
		uint32_t size;
		int ret = tree_iter_next(&c->it, &k, &d, &size);
		if (ret < 0)
			return ret;
		if (ret == 0) {
			c->done = true;
			c->n = 0;
			break;
		}
		c->start = k.offset;
		c->n = size / c->fs->csum_size;
		c->csums = d;
	}
	if (c->done || logical < c->start)
		return 0;
	*csum = c->csums + (logical - c->start) / ss * c->fs->csum_size;
	return 1;
}

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
	ret = csum_cursor_open(&d->cur, fs, p->logical, p->logical + p->length);
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
	csum_cursor_close(&d->cur);
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
		ret = csum_cursor_get(&d->cur, pos + (uint64_t)s * ss, &want[s]);
		if (ret < 0)
			return ret;
		if (ret == 0) {
			want[s] = NULL;
			d->st->data_unverified += ss;
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
