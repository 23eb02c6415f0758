// SPDX-License-Identifier: GPL-2.0-only
/* ebitmap: every call against naive references (a byte per unit over a small
 * space, a sorted interval list over a huge sparse one), the forms regions
 * take, and the memory a checker on a 20 TiB filesystem would pay. */
#include <criterion/criterion.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <btk/ebitmap.h>
#include "under_valgrind.h"

#define KiB (1024ULL)
#define MiB (1024ULL * KiB)
#define GiB (1024ULL * MiB)
#define TiB (1024ULL * GiB)
#define REGION 32768ULL            /* units per region (see ebitmap.h) */

static uint64_t rng_state;

static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static uint64_t rnd_below(uint64_t n)
{
	return n ? rnd() % n : 0;
}

static struct ebitmap *make(uint64_t unit)
{
	struct ebitmap *eb = ebitmap_create(unit);

	cr_assert_not_null(eb);
	return eb;
}

/* ---- reference 1: one byte per unit over [base, base + n units) ---------- */

struct dense_ref {
	uint64_t base, unit, n;
	uint8_t *b;
};

static int dense_test(const struct dense_ref *d, uint64_t u, uint64_t k)
{
	uint64_t c = 0;

	for (uint64_t i = u; i < u + k; i++)
		c += d->b[i];
	return c == 0 ? EBITMAP_NONE : c == k ? EBITMAP_ALL : EBITMAP_PARTIAL;
}

/* Compare every set range, every clear range and the count. */
static void dense_check_all(struct ebitmap *eb, const struct dense_ref *d)
{
	uint64_t from = d->base, start, len, c = 0, u = 0, runs = 0;
	uint64_t limit = d->base + d->n * d->unit;   /* 0 at the top of the space */
	struct ebitmap_stats st;

	while (u < d->n) {
		uint64_t s, e;

		while (u < d->n && !d->b[u])
			u++;
		if (u == d->n)
			break;
		s = u;
		while (u < d->n && d->b[u])
			u++;
		e = u;
		c += e - s;
		runs++;
		cr_assert_eq(ebitmap_next_set(eb, from, &start, &len), 1, "next_set from %#llx",
			     (unsigned long long)from);
		cr_assert_eq(start, d->base + s * d->unit, "set range start %#llx want %#llx",
			     (unsigned long long)start, (unsigned long long)(d->base + s * d->unit));
		cr_assert_eq(len, (e - s) * d->unit, "set range at %#llx: len %#llx want %#llx",
			     (unsigned long long)start, (unsigned long long)len,
			     (unsigned long long)((e - s) * d->unit));
		from = start + len;
	}
	if (from != 0 || d->base == 0)
		cr_assert_eq(ebitmap_next_set(eb, from, &start, &len), 0);
	cr_assert_eq(ebitmap_count(eb), c * d->unit);
	ebitmap_stats(eb, &st);
	cr_assert_eq(st.ranges, runs);
	cr_assert_eq(st.bytes_set, c * d->unit);

	/* The clear ranges within the space. */
	from = d->base;
	u = 0;
	while (u < d->n) {
		uint64_t s;

		while (u < d->n && d->b[u])
			u++;
		if (u == d->n)
			break;
		s = u;
		while (u < d->n && !d->b[u])
			u++;
		cr_assert_eq(ebitmap_next_clear(eb, from, limit, &start, &len), 1);
		cr_assert_eq(start, d->base + s * d->unit);
		cr_assert_eq(len, (u - s) * d->unit);
		from = start + len;
	}
	if (from != limit)
		cr_assert_eq(ebitmap_next_clear(eb, from, limit, &start, &len), 0);
}

/* A random range in units: mostly short, some long, some on region edges. */
static void pick_range(uint64_t n, uint64_t *u, uint64_t *k)
{
	uint64_t r = rnd_below(100);

	if (r < 45) {
		*u = rnd_below(n);
		*k = 1 + rnd_below(4);
	} else if (r < 70) {
		*u = rnd_below(n);
		*k = 1 + rnd_below(300);
	} else if (r < 80) {
		*u = rnd_below(n);
		*k = 1 + rnd_below(n);
	} else if (r < 95) {
		/* Around a region boundary. */
		uint64_t edge = (1 + rnd_below(n / REGION)) * REGION;

		*u = edge - rnd_below(3) * (r & 1 ? 1 : REGION / 2) - rnd_below(2);
		*k = 1 + rnd_below(r & 2 ? 4 : 3 * REGION);
	} else {
		/* Whole regions. */
		*u = rnd_below(n / REGION) * REGION;
		*k = (1 + rnd_below(2)) * REGION;
	}
	if (*u >= n)
		*u = n - 1;
	if (*k > n - *u)
		*k = n - *u;
}

static void dense_op(struct ebitmap *eb, struct dense_ref *d, int op, uint64_t u, uint64_t k)
{
	uint64_t addr = d->base + u * d->unit, len = k * d->unit;
	int want = dense_test(d, u, k), got;

	switch (op) {
	case 0:
		cr_assert_eq(ebitmap_set(eb, addr, len), 0);
		memset(d->b + u, 1, k);
		break;
	case 1:
		cr_assert_eq(ebitmap_clear(eb, addr, len), 0);
		memset(d->b + u, 0, k);
		break;
	case 2:
		got = ebitmap_test(eb, addr, len);
		cr_assert_eq(got, want, "test(+%llu units, %llu units) = %d want %d",
			     (unsigned long long)u, (unsigned long long)k, got, want);
		break;
	default:
		got = ebitmap_test_and_set(eb, addr, len);
		cr_assert_eq(got, want, "test_and_set(+%llu units, %llu units) = %d want %d",
			     (unsigned long long)u, (unsigned long long)k, got, want);
		memset(d->b + u, 1, k);
		break;
	}
}

/* Random operations over 5 regions at base: every result checked, everything
 * compared every 100 operations; phases of dense scatter and wide clears push
 * regions into bit chunks and back. */
static void dense_differential(uint64_t unit, uint64_t base, uint64_t seed)
{
	struct dense_ref d = { .base = base, .unit = unit, .n = 5 * REGION };
	struct ebitmap *eb = make(unit);
	struct ebitmap_stats st;

	rng_state = seed;
	d.b = calloc(d.n, 1);
	cr_assert_not_null(d.b);
	for (int round = 0; round < 6; round++) {
		/* Scatter: many short sets in one region, then random traffic. */
		uint64_t reg = rnd_below(5) * REGION;

		for (int i = 0; i < (int)valgrind_reps(2500, 5, 300); i++) {
			uint64_t u = reg + rnd_below(REGION - 4);

			dense_op(eb, &d, rnd_below(8) ? 0 : 1, u, 1 + rnd_below(3));
		}
		if (round & 1) {
			/* Most of it cleared: the bit chunk goes back to runs. */
			uint64_t keep = 50 + rnd_below(200);

			dense_op(eb, &d, 1, reg + keep, REGION - 2 * keep);
		}
		for (int i = 0; i < (int)valgrind_reps(3000, 5, 300); i++) {
			uint64_t u, k;

			pick_range(d.n, &u, &k);
			dense_op(eb, &d, (int)rnd_below(4), u, k);
			if (i % 100 == 0)
				dense_check_all(eb, &d);
		}
		dense_check_all(eb, &d);
	}
	ebitmap_stats(eb, &st);
	cr_assert_gt(st.to_bits, 0, "no region ever became a bit chunk");
	cr_assert_gt(st.to_runs, 0, "no bit chunk ever went back to runs");
	ebitmap_clear(eb, base, d.n * unit);
	cr_assert_eq(ebitmap_count(eb), 0);
	ebitmap_stats(eb, &st);
	cr_assert_eq(st.leaves, 0);
	ebitmap_destroy(eb);
	free(d.b);
}

Test(ebitmap, differential_small_space)
{
	dense_differential(4096, 0, 1);
}

Test(ebitmap, differential_unaligned_base_unit_16k)
{
	/* The space starts mid-region, so region edges fall mid-space. */
	dense_differential(16384, 16384 * 12345, 2);
}

Test(ebitmap, differential_top_of_address_space)
{
	/* Ranges that end exactly at 2^64. */
	dense_differential(4096, 0 - 5 * REGION * 4096, 3);
}

/* ---- reference 2: sorted intervals of units, inclusive -------------------- */

struct ival {
	uint64_t s, e;
};

struct sparse_ref {
	struct ival *v;
	size_t n, cap;
};

static void sparse_put(struct ival *out, size_t *no, struct ival x)
{
	out[(*no)++] = x;
}

static void sparse_apply(struct sparse_ref *r, uint64_t a, uint64_t b, int set)
{
	struct ival *out = malloc((r->n + 2) * sizeof(*out));
	size_t no = 0, i = 0;

	cr_assert_not_null(out);
	if (set) {
		struct ival m = { a, b };

		for (; i < r->n && r->v[i].e + 1 < a; i++)
			sparse_put(out, &no, r->v[i]);
		for (; i < r->n && r->v[i].s <= b + 1; i++) {
			if (r->v[i].s < m.s)
				m.s = r->v[i].s;
			if (r->v[i].e > m.e)
				m.e = r->v[i].e;
		}
		sparse_put(out, &no, m);
		for (; i < r->n; i++)
			sparse_put(out, &no, r->v[i]);
	} else {
		for (; i < r->n; i++) {
			struct ival x = r->v[i];

			if (x.e < a || x.s > b) {
				sparse_put(out, &no, x);
				continue;
			}
			if (x.s < a)
				sparse_put(out, &no, (struct ival){ x.s, a - 1 });
			if (x.e > b)
				sparse_put(out, &no, (struct ival){ b + 1, x.e });
		}
	}
	free(r->v);
	r->v = out;
	r->n = no;
}

static int sparse_test(const struct sparse_ref *r, uint64_t a, uint64_t b)
{
	uint64_t c = 0;

	for (size_t i = 0; i < r->n; i++) {
		uint64_t s = r->v[i].s > a ? r->v[i].s : a, e = r->v[i].e < b ? r->v[i].e : b;

		if (s <= e)
			c += e - s + 1;
	}
	return c == 0 ? EBITMAP_NONE : c == b - a + 1 ? EBITMAP_ALL : EBITMAP_PARTIAL;
}

static void sparse_check_all(struct ebitmap *eb, const struct sparse_ref *r, unsigned shift)
{
	uint64_t from = 0, start, len, c = 0;
	uint64_t top = UINT64_MAX >> shift;   /* last unit */

	for (size_t i = 0; i < r->n; i++) {
		cr_assert_eq(ebitmap_next_set(eb, from, &start, &len), 1);
		cr_assert_eq(start >> shift, r->v[i].s, "range %zu starts at unit %#llx want %#llx", i,
			     (unsigned long long)(start >> shift), (unsigned long long)r->v[i].s);
		cr_assert_eq(len >> shift, r->v[i].e - r->v[i].s + 1, "range %zu length", i);
		c += r->v[i].e - r->v[i].s + 1;
		if (r->v[i].e == top)
			break;
		from = (r->v[i].e + 1) << shift;
		if (i + 1 == r->n)
			cr_assert_eq(ebitmap_next_set(eb, from, &start, &len), 0);
	}
	cr_assert_eq(ebitmap_count(eb), c << shift);

	/* Gaps, up to the top of the space. */
	from = 0;
	for (size_t i = 0; i <= r->n; i++) {
		uint64_t gs = i == 0 ? 0 : r->v[i - 1].e + 1;
		uint64_t ge = i == r->n ? top : r->v[i].s - 1;
		int ret;

		if (i > 0 && r->v[i - 1].e == top)
			break;
		if (i < r->n && r->v[i].s == gs)
			continue;
		ret = ebitmap_next_clear(eb, from, 0, &start, &len);
		cr_assert_eq(ret, 1, "gap %zu", i);
		cr_assert_eq(start >> shift, gs);
		if (ge == top && gs == 0)
			cr_assert_eq(len, (top << shift));   /* 2^64 reported as 2^64 - unit */
		else
			cr_assert_eq(len >> shift, ge - gs + 1, "gap %zu length", i);
		if (ge == top)
			break;
		from = (ge + 1) << shift;
	}
}

/* Units near a few anchors spread over the whole space, lengths from one unit
 * to millions of regions. */
static void sparse_pick(unsigned shift, uint64_t *a, uint64_t *b)
{
	uint64_t top = UINT64_MAX >> shift;
	uint64_t anchors[] = { 0, top / 2 + 1, top - (1ULL << 30), 1ULL << 30 };
	uint64_t base = anchors[rnd_below(4)], off, len;
	unsigned lg = (unsigned)rnd_below(36);

	off = rnd_below(1ULL << 32) & ~(rnd_below(3) ? 0 : REGION - 1);
	len = 1 + rnd_below(1ULL << lg);
	if (rnd_below(4) == 0)
		len = (1 + rnd_below(4)) * REGION;
	if (base > top - off)
		off = top - base;
	*a = base + off;
	if (len - 1 > top - *a)
		len = top - *a + 1;
	*b = *a + len - 1;
}

Test(ebitmap, differential_huge_sparse_space)
{
	unsigned shift = 12;
	struct ebitmap *eb = make(1ULL << shift);
	struct sparse_ref r = { 0 };

	rng_state = 42;
	for (int i = 0; i < (int)valgrind_reps(20000, 5, 2000); i++) {
		uint64_t a, b;
		int op = (int)rnd_below(5), want, got;

		sparse_pick(shift, &a, &b);
		want = sparse_test(&r, a, b);
		got = -1;
		switch (op) {
		case 0:
		case 1:
			cr_assert_eq(ebitmap_set(eb, a << shift, (b - a + 1) << shift), 0);
			sparse_apply(&r, a, b, 1);
			break;
		case 2:
			cr_assert_eq(ebitmap_clear(eb, a << shift, (b - a + 1) << shift), 0);
			sparse_apply(&r, a, b, 0);
			break;
		case 3:
			got = ebitmap_test(eb, a << shift, (b - a + 1) << shift);
			break;
		default:
			got = ebitmap_test_and_set(eb, a << shift, (b - a + 1) << shift);
			sparse_apply(&r, a, b, 1);
			break;
		}
		if (got >= 0 || op >= 3)
			cr_assert_eq(got, want, "op %d: unit %#llx..%#llx: %d want %d", i,
				     (unsigned long long)a, (unsigned long long)b, got, want);
		if (i % 250 == 0)
			sparse_check_all(eb, &r, shift);
	}
	sparse_check_all(eb, &r, shift);
	ebitmap_destroy(eb);
	free(r.v);
}

/* ---- specific behaviour ------------------------------------------------------ */

Test(ebitmap, rejects_bad_unit_and_unaligned_ranges)
{
	struct ebitmap *eb;
	uint64_t s, l;

	errno = 0;
	cr_assert_null(ebitmap_create(0));
	cr_assert_eq(errno, EINVAL);
	cr_assert_null(ebitmap_create(1));
	cr_assert_null(ebitmap_create(4097));
	eb = make(4096);
	cr_assert_eq(ebitmap_unit(eb), 4096);
	cr_assert_eq(ebitmap_set(eb, 100, 4096), -EINVAL);
	cr_assert_eq(ebitmap_set(eb, 4096, 100), -EINVAL);
	cr_assert_eq(ebitmap_clear(eb, 1, 4096), -EINVAL);
	cr_assert_eq(ebitmap_test(eb, 0, 1), -EINVAL);
	cr_assert_eq(ebitmap_test_and_set(eb, 4095, 4096), -EINVAL);
	cr_assert_eq(ebitmap_next_set(eb, 12, &s, &l), -EINVAL);
	cr_assert_eq(ebitmap_next_clear(eb, 0, 12, &s, &l), -EINVAL);
	/* Past the end of the address space. */
	cr_assert_eq(ebitmap_set(eb, 0 - 8192ULL, 3 * 4096), -EINVAL);
	cr_assert_eq(ebitmap_count(eb), 0);
	/* Empty ranges. */
	cr_assert_eq(ebitmap_set(eb, 4096, 0), 0);
	cr_assert_eq(ebitmap_test(eb, 4096, 0), EBITMAP_NONE);
	cr_assert_eq(ebitmap_count(eb), 0);
	cr_assert_eq(ebitmap_next_set(eb, 0, &s, &l), 0);
	cr_assert_eq(ebitmap_next_clear(eb, 8192, 8192, &s, &l), 0);
	cr_assert_eq(ebitmap_next_clear(eb, 8192, 4096, &s, &l), 0);
	ebitmap_destroy(eb);
	ebitmap_destroy(NULL);
}

Test(ebitmap, visited_blocks_and_overlaps)
{
	struct ebitmap *eb = make(4096);

	/* 16 KiB tree blocks: a second visit and a partial overlap are seen. */
	cr_assert_eq(ebitmap_test_and_set(eb, 30 * MiB, 16 * KiB), EBITMAP_NONE);
	cr_assert_eq(ebitmap_test_and_set(eb, 30 * MiB + 16 * KiB, 16 * KiB), EBITMAP_NONE);
	cr_assert_eq(ebitmap_test_and_set(eb, 30 * MiB, 16 * KiB), EBITMAP_ALL);
	cr_assert_eq(ebitmap_test_and_set(eb, 30 * MiB + 24 * KiB, 16 * KiB), EBITMAP_PARTIAL);
	cr_assert_eq(ebitmap_count(eb), 40 * KiB);
	cr_assert_eq(ebitmap_test(eb, 30 * MiB, 40 * KiB), EBITMAP_ALL);
	cr_assert_eq(ebitmap_test(eb, 30 * MiB - 4096, 8192), EBITMAP_PARTIAL);
	ebitmap_destroy(eb);
}

Test(ebitmap, ranges_merge_across_regions_and_spans)
{
	struct ebitmap *eb = make(4096);
	uint64_t region = REGION * 4096, s, l;
	struct ebitmap_stats st;

	/* Partial, full, full, partial: one range. */
	cr_assert_eq(ebitmap_set(eb, 3 * region - 8192, 2 * region + 16384), 0);
	cr_assert_eq(ebitmap_next_set(eb, 0, &s, &l), 1);
	cr_assert_eq(s, 3 * region - 8192);
	cr_assert_eq(l, 2 * region + 16384);
	ebitmap_stats(eb, &st);
	cr_assert_eq(st.ranges, 1);
	cr_assert_eq(st.regions_full, 2);
	cr_assert_eq(st.full_spans, 1);
	cr_assert_eq(st.regions_inline, 2);
	/* Filling the partial regions joins them into the span. */
	cr_assert_eq(ebitmap_set(eb, 2 * region, region), 0);
	cr_assert_eq(ebitmap_set(eb, 5 * region, region), 0);
	ebitmap_stats(eb, &st);
	cr_assert_eq(st.full_spans, 1);
	cr_assert_eq(st.regions_full, 4);
	cr_assert_eq(st.regions_inline + st.regions_runs + st.regions_bits, 0);
	/* A hole in the middle of the span. */
	cr_assert_eq(ebitmap_clear(eb, 4 * region + 4096, 4096), 0);
	ebitmap_stats(eb, &st);
	cr_assert_eq(st.full_spans, 2);
	cr_assert_eq(st.regions_full, 3);
	cr_assert_eq(st.ranges, 2);
	cr_assert_eq(ebitmap_next_clear(eb, 2 * region, 0, &s, &l), 1);
	cr_assert_eq(s, 4 * region + 4096);
	cr_assert_eq(l, 4096);
	cr_assert_eq(ebitmap_next_clear(eb, 4 * region + 8192, 0, &s, &l), 1);
	cr_assert_eq(s, 6 * region);
	cr_assert_eq(l, 0 - 6 * region);
	cr_assert_eq(ebitmap_next_clear(eb, 4 * region + 8192, 6 * region, &s, &l), 0);
	/* Clearing whole regions out of the middle of a span. */
	cr_assert_eq(ebitmap_clear(eb, 2 * region, 2 * region), 0);
	cr_assert_eq(ebitmap_test(eb, 2 * region, 2 * region), EBITMAP_NONE);
	cr_assert_eq(ebitmap_count(eb), 2 * region - 4096);
	ebitmap_destroy(eb);
}

Test(ebitmap, whole_address_space)
{
	struct ebitmap *eb = make(2);
	uint64_t s, l;
	struct ebitmap_stats st;

	cr_assert_eq(ebitmap_set(eb, 0, 1ULL << 63), 0);
	cr_assert_eq(ebitmap_set(eb, 1ULL << 63, 1ULL << 63), 0);   /* ends at 2^64 */
	cr_assert_eq(ebitmap_count(eb), UINT64_MAX);
	cr_assert_eq(ebitmap_test(eb, 0, UINT64_MAX - 1), EBITMAP_ALL);
	cr_assert_eq(ebitmap_next_set(eb, 0, &s, &l), 1);
	cr_assert_eq(s, 0);
	cr_assert_eq(l, UINT64_MAX - 1);
	cr_assert_eq(ebitmap_next_clear(eb, 0, 0, &s, &l), 0);
	ebitmap_stats(eb, &st);
	cr_assert_eq(st.full_spans, 1);
	cr_assert_lt(st.memory_bytes, 1024);
	/* Punch the last unit and the first. */
	cr_assert_eq(ebitmap_clear(eb, UINT64_MAX - 1, 2), 0);
	cr_assert_eq(ebitmap_clear(eb, 0, 2), 0);
	cr_assert_eq(ebitmap_count(eb), UINT64_MAX - 3);
	cr_assert_eq(ebitmap_next_clear(eb, 2, 0, &s, &l), 1);
	cr_assert_eq(s, UINT64_MAX - 1);
	cr_assert_eq(l, 2);
	cr_assert_eq(ebitmap_next_set(eb, 0, &s, &l), 1);
	cr_assert_eq(s, 2);
	cr_assert_eq(l, UINT64_MAX - 3);
	ebitmap_clear_all(eb);
	cr_assert_eq(ebitmap_count(eb), 0);
	cr_assert_eq(ebitmap_set(eb, 4, 4), 0);
	cr_assert_eq(ebitmap_count(eb), 4);
	ebitmap_destroy(eb);
}

Test(ebitmap, conversions_both_ways)
{
	struct ebitmap *eb = make(4096);
	struct ebitmap_stats st;
	uint64_t base = 7 * REGION * 4096;

	/* 1024 separate runs still fit the run array... */
	for (uint64_t i = 0; i < 1024; i++)
		cr_assert_eq(ebitmap_set(eb, base + i * 3 * 4096, 4096), 0);
	ebitmap_stats(eb, &st);
	cr_assert_eq(st.regions_runs, 1);
	cr_assert_eq(st.regions_bits, 0);
	/* ... the 1025th makes it a bit chunk. */
	cr_assert_eq(ebitmap_set(eb, base + 1024 * 3 * 4096, 4096), 0);
	ebitmap_stats(eb, &st);
	cr_assert_eq(st.regions_bits, 1);
	cr_assert_eq(st.regions_runs, 0);
	cr_assert_eq(st.to_bits, 1);
	cr_assert_eq(st.ranges, 1025);
	/* Joining runs down to 513 keeps the chunk (hysteresis)... */
	for (uint64_t i = 0; i < 512; i++)
		cr_assert_eq(ebitmap_set(eb, base + i * 3 * 4096, 3 * 4096), 0);
	ebitmap_stats(eb, &st);
	cr_assert_eq(st.ranges, 513);
	cr_assert_eq(st.regions_bits, 1);
	/* ... 512 brings back runs. */
	cr_assert_eq(ebitmap_set(eb, base + 512 * 3 * 4096, 3 * 4096), 0);
	ebitmap_stats(eb, &st);
	cr_assert_eq(st.ranges, 512);
	cr_assert_eq(st.regions_bits, 0);
	cr_assert_eq(st.regions_runs, 1);
	cr_assert_eq(st.to_runs, 1);
	/* Clearing to two runs goes inline, filling makes it full, clearing
	 * everything removes it. */
	cr_assert_eq(ebitmap_set(eb, base + (REGION - 1) * 4096, 4096), 0);
	cr_assert_eq(ebitmap_clear(eb, base + 4096, (REGION - 2) * 4096), 0);
	ebitmap_stats(eb, &st);
	cr_assert_eq(st.regions_inline, 1);
	cr_assert_eq(st.ranges, 2);
	cr_assert_eq(ebitmap_set(eb, base, REGION * 4096), 0);
	ebitmap_stats(eb, &st);
	cr_assert_eq(st.regions_full, 1);
	cr_assert_eq(ebitmap_clear(eb, base, REGION * 4096), 0);
	ebitmap_stats(eb, &st);
	cr_assert_eq(st.full_spans + st.regions_inline + st.regions_runs + st.regions_bits, 0);
	cr_assert_lt(st.memory_bytes, 256, "%llu bytes left", (unsigned long long)st.memory_bytes);
	ebitmap_destroy(eb);
}

Test(ebitmap, bit_chunk_to_full_and_empty)
{
	struct ebitmap *eb = make(16384);
	struct ebitmap_stats st;

	/* Every other unit: a bit chunk; then the gaps: one full region. */
	for (uint64_t i = 0; i < REGION; i += 2)
		cr_assert_eq(ebitmap_set(eb, i * 16384, 16384), 0);
	ebitmap_stats(eb, &st);
	cr_assert_eq(st.regions_bits, 1);
	for (uint64_t i = 1; i < REGION; i += 2)
		cr_assert_eq(ebitmap_test_and_set(eb, i * 16384, 16384), EBITMAP_NONE);
	ebitmap_stats(eb, &st);
	cr_assert_eq(st.regions_full, 1);
	cr_assert_eq(st.regions_bits, 0);
	/* And back down to nothing, one unit at a time in reverse. */
	for (uint64_t i = REGION; i-- > 0;)
		cr_assert_eq(ebitmap_clear(eb, i * 16384, 16384), 0);
	ebitmap_stats(eb, &st);
	cr_assert_eq(st.bytes_set, 0);
	cr_assert_eq(st.leaves, 0);
	ebitmap_destroy(eb);
}

/* ---- memory ------------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Heap bytes in use by the process, if glibc counts them here (not under
 * ASan or valgrind, whose allocators replace it). */
static uint64_t heap_in_use(void)
{
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
}

/* Our own accounting must match what malloc really holds. */
static void assert_accounting_real(uint64_t heap_before, const struct ebitmap_stats *st)
{
	uint64_t real = heap_in_use() - heap_before;

	if (heap_before == 0 && heap_in_use() == 0)
		return;
	cr_assert(real <= st->memory_bytes + st->memory_bytes / 20 + 64 * KiB &&
		  st->memory_bytes <= real + real / 20 + 64 * KiB,
		  "accounted %llu bytes, malloc holds %llu", (unsigned long long)st->memory_bytes,
		  (unsigned long long)real);
}

Test(ebitmap, memory_scattered_units_over_20tib)
{
	const uint64_t n = 1000000, units = 20 * TiB / 4096;
	uint64_t *u = malloc(n * sizeof(*u));
	uint64_t heap0, distinct = 0, ranges = 0, from = 0, s, l;
	struct ebitmap *eb;
	struct ebitmap_stats st;

	cr_assert_not_null(u);
	rng_state = 7;
	for (uint64_t i = 0; i < n; i++)
		u[i] = rnd_below(units);
	heap0 = heap_in_use();
	eb = make(4096);
	for (uint64_t i = 0; i < n; i++)
		cr_assert_eq(ebitmap_set(eb, u[i] * 4096, 4096), 0);
	ebitmap_stats(eb, &st);
	assert_accounting_real(heap0, &st);

	qsort(u, n, sizeof(*u), cmp_u64);
	for (uint64_t i = 0; i < n; i++) {
		if (i && u[i] == u[i - 1])
			continue;
		distinct++;
		if (!i || u[i] != u[i - 1] + 1)
			ranges++;
	}
	cr_assert_eq(st.bytes_set, distinct * 4096);
	cr_assert_eq(st.ranges, ranges);
	cr_assert_lt(st.bytes_per_range, 32.0, "%.1f bytes per range", st.bytes_per_range);
	cr_assert_leq(st.peak_memory_bytes, st.memory_bytes + st.memory_bytes / 8);
	/* Everything is found again, in order. */
	for (uint64_t i = 0; i < n; i++)
		cr_assert_eq(ebitmap_test(eb, u[i] * 4096, 4096), EBITMAP_ALL);
	for (uint64_t k = 0; ebitmap_next_set(eb, from, &s, &l) == 1; k++)
		from = s + l;
	ebitmap_destroy(eb);
	free(u);
}

Test(ebitmap, memory_one_unit_per_region)
{
	/* The worst case for entries: every range alone in its region. */
	const uint64_t n = 1000000;
	uint64_t heap0 = heap_in_use();
	struct ebitmap *eb = make(4096);
	struct ebitmap_stats st;

	rng_state = 9;
	for (uint64_t i = 0; i < n; i++) {
		/* A permutation of the regions: random order, each region once. */
		uint64_t r = (i * 0x9E3779B1ULL) % 1000003ULL;

		cr_assert_eq(ebitmap_set(eb, (r * 3 * REGION + rnd_below(REGION)) * 4096, 4096), 0);
	}
	ebitmap_stats(eb, &st);
	assert_accounting_real(heap0, &st);
	cr_assert_eq(st.ranges, n);
	cr_assert_eq(st.regions_inline, n);
	cr_assert_lt(st.bytes_per_range, 32.0, "%.1f bytes per range", st.bytes_per_range);
	ebitmap_destroy(eb);
}

Test(ebitmap, memory_dense_1tib)
{
	struct ebitmap *eb = make(4096);
	struct ebitmap_stats st;
	uint64_t base = 3 * TiB + 123 * 4096;

	/* Extents of 1 MiB in physical order, as a checker marks them. */
	for (uint64_t off = 0; off < 1 * TiB; off += MiB)
		cr_assert_eq(ebitmap_set(eb, base + off, MiB), 0);
	ebitmap_stats(eb, &st);
	cr_assert_eq(st.bytes_set, TiB);
	cr_assert_eq(st.ranges, 1);
	cr_assert_leq(st.peak_memory_bytes, 32 * MiB);   /* 1 bit per unit would be 32 MiB */
	cr_assert_lt(st.memory_bytes, 1 * KiB, "%llu bytes", (unsigned long long)st.memory_bytes);
	cr_assert_eq(ebitmap_test(eb, base, TiB), EBITMAP_ALL);
	cr_assert_eq(ebitmap_test(eb, base - 4096, TiB), EBITMAP_PARTIAL);
	ebitmap_destroy(eb);
}

Test(ebitmap, memory_bit_chunks_cost_a_bit_per_unit)
{
	const uint64_t regions = 64;
	uint64_t heap0 = heap_in_use();
	struct ebitmap *eb = make(4096);
	struct ebitmap_stats st;
	double bits_per_unit;

	/* Every other unit: the densest run pattern, stored as bits. */
	for (uint64_t i = 0; i < regions * REGION; i += 2)
		cr_assert_eq(ebitmap_set(eb, (GiB / 4096 + i) * 4096, 4096), 0);
	ebitmap_stats(eb, &st);
	assert_accounting_real(heap0, &st);
	cr_assert_eq(st.regions_bits, regions);
	bits_per_unit = (double)st.memory_bytes * 8 / (double)(regions * REGION);
	cr_assert_lt(bits_per_unit, 1.05, "%.3f bits per unit", bits_per_unit);
	cr_assert_lt(st.peak_memory_bytes, st.memory_bytes + 16 * KiB);
	ebitmap_destroy(eb);
}
