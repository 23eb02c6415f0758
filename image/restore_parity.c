// SPDX-License-Identifier: GPL-2.0-only
/* RAID5/6 parity for the original layout: every full stripe a restore
 * writes into is noted, and at the end its data stripes are read back from
 * the outputs (parts the image did not cover read as whatever the output
 * holds, zeros on a new file) and P, and for RAID6 Q, written beside them,
 * so that scrub finds every restored stripe consistent. Q is the kernel's
 * RAID6 syndrome: the sum of g^k * D_k over GF(2^8) (polynomial 0x11d,
 * generator 2), data stripe k in full-stripe order. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "image/restore.h"
#include <btk/ebitmap.h>

static unsigned parity_stripes(const struct chunk *c)
{
	uint64_t p = c->type & BTRFS_BLOCK_GROUP_PROFILE_MASK;

	return p == BTRFS_BLOCK_GROUP_RAID6 ? 2 : p == BTRFS_BLOCK_GROUP_RAID5 ? 1 : 0;
}

int parity_note(struct restore_ctx *r, uint64_t logical, uint64_t len)
{
	const struct chunk *c = rs_chunk_lookup(r, logical);
	unsigned np = c ? parity_stripes(c) : 0;
	uint64_t full, first, last;

	if (!np || !len || c->num_stripes <= np || !c->stripe_len)
		return 0;
	if (!r->parity_rows && !(r->parity_rows = ebitmap_create(4096)))
		return -ENOMEM;
	full = (uint64_t)(c->num_stripes - np) * c->stripe_len;
	first = (logical - c->logical) / full;
	last = (logical + len - 1 - c->logical) / full;
	return ebitmap_set(r->parity_rows, c->logical + first * full, (last - first + 1) * full);
}

/* Multiply every byte of a word by 2 in GF(2^8) (polynomial 0x11d). */
static inline uint64_t gf_mul2(uint64_t v)
{
	uint64_t hi = (v & 0x8080808080808080ull) >> 7;

	return ((v & 0x7f7f7f7f7f7f7f7full) << 1) ^ (hi * 0x1d);
}

/* P and Q of one full stripe: data[k] for k in 0..n-1, stripe_len bytes each. */
static void compute_pq(uint8_t *const *data, unsigned n, size_t len, uint8_t *p, uint8_t *q)
{
	for (size_t off = 0; off < len; off += 8) {
		uint64_t wp = 0, wq = 0, d;
		for (unsigned k = n; k-- > 0;) {
			memcpy(&d, data[k] + off, 8);
			wp ^= d;
			wq = gf_mul2(wq) ^ d;
		}
		memcpy(p + off, &wp, 8);
		if (q)
			memcpy(q + off, &wq, 8);
	}
}

/* Recompute the parity of one full stripe (row) of chunk c. */
static int fix_row(struct restore_ctx *r, const struct chunk *c, uint64_t row, uint8_t *buf)
{
	unsigned np = parity_stripes(c), n = c->num_stripes, nd = n - np;
	size_t sl = c->stripe_len;
	uint8_t *data[256];
	uint8_t *p = buf + (size_t)nd * sl, *q = np == 2 ? p + sl : NULL;
	int ret;

	for (unsigned k = 0; k < n; k++) {
		const struct chunk_stripe *s = &c->stripes[(row + k) % n];
		if (!s->dev)
			return rs_error(r, "chunk at %llu names device %llu, which the image does not have",
					(unsigned long long)c->logical, (unsigned long long)s->devid);
		if (k >= nd)
			continue;
		data[k] = buf + (size_t)k * sl;
		ret = io_read(s->dev->io, data[k], sl, s->physical + row * sl);
		if (ret == -ENXIO)
			memset(data[k], 0, sl);
		else if (ret)
			return rs_error(r, "reading back %s: %s", s->dev->io->path, strerror(-ret)), ret;
	}
	compute_pq(data, nd, sl, p, q);
	for (unsigned k = nd; k < n; k++) {
		const struct chunk_stripe *s = &c->stripes[(row + k) % n];
		ret = io_write(s->dev->io, k == nd ? p : q, sl, s->physical + row * sl);
		if (ret)
			return rs_error(r, "writing parity to %s: %s", s->dev->io->path, strerror(-ret)), ret;
		r->written_bytes += sl;
	}
	return 0;
}

int parity_finish(struct restore_ctx *r)
{
	uint64_t from = 0, start, len;
	uint8_t *buf = NULL;
	size_t cap = 0;
	int ret;

	if (!r->parity_rows)
		return 0;
	while ((ret = ebitmap_next_set(r->parity_rows, from, &start, &len)) == 1) {
		from = start + len;
		while (len) {
			const struct chunk *c = rs_chunk_lookup(r, start);
			uint64_t full, row;
			size_t need;
			if (!c || !parity_stripes(c))
				return rs_error(r, "parity: %llu is in no RAID5/6 chunk", (unsigned long long)start);
			full = (uint64_t)(c->num_stripes - parity_stripes(c)) * c->stripe_len;
			row = (start - c->logical) / full;
			need = (size_t)c->num_stripes * c->stripe_len;
			if (c->num_stripes > 256 || c->stripe_len % 8 || c->logical + (row + 1) * full > start + len)
				return rs_error(r, "parity: unusable RAID5/6 chunk at %llu",
						(unsigned long long)c->logical);
			if (need > cap) {
				uint8_t *t = realloc(buf, need);
				if (!t) {
					free(buf);
					return -ENOMEM;
				}
				buf = t;
				cap = need;
			}
			if ((ret = fix_row(r, c, row, buf))) {
				free(buf);
				return ret;
			}
			len -= c->logical + (row + 1) * full - start;
			start = c->logical + (row + 1) * full;
		}
	}
	free(buf);
	return ret < 0 ? ret : 0;
}
