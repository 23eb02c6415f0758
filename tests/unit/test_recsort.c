// SPDX-License-Identifier: GPL-2.0-only
/* recsort: records come back in the order qsort gives, within the memory
 * budget, for inputs that stay in memory, spill one run, many runs, or need
 * merges on disk; no spill file is ever visible; and recjoin reports exactly
 * the left-only / right-only / matched keys. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <btk/recsort.h>

#include "tests/unit/under_valgrind.h"

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)

static uint64_t rng_state;

/* recsort_options.raw for the sorters sort_and_compare makes */
static bool spill_raw;

static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

/* ---- a private tmpdir, to see what recsort leaves in it ------------------- */

static char tmpdir[64];

static void make_tmpdir(void)
{
	strcpy(tmpdir, "/tmp/test_recsort.XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir));
}

static int files_in_tmpdir(void)
{
	DIR *d = opendir(tmpdir);
	struct dirent *de;
	int n = 0;

	cr_assert_not_null(d);
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static void remove_tmpdir(void)
{
	cr_assert_eq(files_in_tmpdir(), 0, "spill files left in %s", tmpdir);
	cr_assert_eq(rmdir(tmpdir), 0);
}

/* ---- records ------------------------------------------------------------------ */

struct rec16 {
	uint64_t key, seq;
};

struct rec32 {
	uint64_t w[4];
};

struct rec12 {
	uint32_t a, b, c;
};

static int cmp16_total(const void *x, const void *y, void *arg)
{
	const struct rec16 *a = x, *b = y;

	(void)arg;
	if (a->key != b->key)
		return a->key < b->key ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static int cmp16_key(const void *x, const void *y, void *arg)
{
	const struct rec16 *a = x, *b = y;

	(void)arg;
	return a->key < b->key ? -1 : a->key > b->key;
}

static int cmp32(const void *x, const void *y, void *arg)
{
	const struct rec32 *a = x, *b = y;

	(void)arg;
	for (int i = 0; i < 4; i++)
		if (a->w[i] != b->w[i])
			return a->w[i] < b->w[i] ? -1 : 1;
	return 0;
}

static int cmp12(const void *x, const void *y, void *arg)
{
	const struct rec12 *a = x, *b = y;

	(void)arg;
	if (a->a != b->a)
		return a->a < b->a ? -1 : 1;
	if (a->b != b->b)
		return a->b < b->b ? -1 : 1;
	return a->c < b->c ? -1 : a->c > b->c;
}

static recsort_cmp_fn qsort_cmp;

static int qsort_adapter(const void *a, const void *b)
{
	return qsort_cmp(a, b, NULL);
}

/* Sort n records through recsort; the output must be qsort's, byte for byte,
 * under a total order (for key-only orders: ordered, and the same multiset).
 * Returns the stats; the spill dir must stay empty throughout. */
static struct recsort_stats sort_and_compare(const void *in, size_t n, size_t size,
					     recsort_cmp_fn cmp, int total, size_t budget,
					     unsigned jobs)
{
	struct recsort *rs = recsort_create(size, cmp, NULL, budget, &(struct recsort_options){ .tmpdir = tmpdir, .raw = spill_raw });
	unsigned char *want = malloc(n * size + 1), *got = malloc(n * size + 1);
	struct recsort_stats st;
	const void *rec;
	size_t i = 0;
	int ret;

	cr_assert_not_null(rs);
	cr_assert(want && got);
	if (jobs > 1)
		cr_assert_eq(recsort_set_jobs(rs, jobs), 0);
	for (size_t k = 0; k < n; k++) {
		cr_assert_eq(recsort_add(rs, (const unsigned char *)in + k * size), 0);
		if (k % 20000 == 0)
			cr_assert_eq(files_in_tmpdir(), 0, "a spill file is visible");
	}
	cr_assert_eq(recsort_finish(rs), 0);
	cr_assert_eq(files_in_tmpdir(), 0);
	while ((ret = recsort_next(rs, &rec)) == 1) {
		cr_assert_lt(i, n, "more records out than in");
		cr_assert_eq((uintptr_t)rec % (size % 8 == 0 ? 8 : 4), 0, "misaligned record");
		if (i)
			cr_assert_leq(cmp(got + (i - 1) * size, rec, NULL), 0, "out of order at %zu", i);
		memcpy(got + i * size, rec, size);
		i++;
	}
	cr_assert_eq(ret, 0);
	cr_assert_eq(i, n, "%zu records out, %zu in", i, n);
	cr_assert_eq(recsort_next(rs, &rec), 0);
	recsort_get_stats(rs, &st);
	cr_assert_eq(st.records, n);
	cr_assert_leq(st.peak_memory, budget, "peak %llu > budget %zu",
		      (unsigned long long)st.peak_memory, budget);
	recsort_destroy(rs);
	cr_assert_eq(files_in_tmpdir(), 0);

	memcpy(want, in, n * size);
	qsort_cmp = total ? cmp : cmp16_total;
	qsort(want, n, size, qsort_adapter);
	if (!total)
		qsort(got, n, size, qsort_adapter);   /* equal keys: any order */
	cr_assert(n == 0 || memcmp(want, got, n * size) == 0, "output differs from qsort");
	free(want);
	free(got);
	return st;
}

static struct rec16 *random16(size_t n, uint64_t keys)
{
	struct rec16 *r = malloc((n + 1) * sizeof(*r));

	cr_assert_not_null(r);
	for (size_t i = 0; i < n; i++)
		r[i] = (struct rec16){ keys ? rnd() % keys : rnd(), i };
	return r;
}

Test(recsort, in_memory_no_runs, .init = make_tmpdir, .fini = remove_tmpdir)
{
	struct rec16 *in;
	struct recsort_stats st;

	rng_state = 1;
	in = random16(100000, 0);
	st = sort_and_compare(in, 100000, sizeof(*in), cmp16_total, 1, 8 * MiB, 1);
	cr_assert_eq(st.runs, 0);
	cr_assert_eq(st.spilled_bytes, 0);
	free(in);
}

Test(recsort, zero_and_one_records, .init = make_tmpdir, .fini = remove_tmpdir)
{
	struct rec16 one = { 5, 0 };
	struct recsort_stats st;

	st = sort_and_compare(&one, 0, sizeof(one), cmp16_total, 1, 64 * KiB, 1);
	cr_assert_eq(st.peak_memory, st.memory);
	st = sort_and_compare(&one, 1, sizeof(one), cmp16_total, 1, 64 * KiB, 1);
	cr_assert_eq(st.runs, 0);
}

Test(recsort, one_run_spilled, .init = make_tmpdir, .fini = remove_tmpdir)
{
	/* A little more than fits: one run on disk, the tail merged from memory. */
	size_t budget = 1 * MiB, fits = (budget - budget / 16 - 4096) / 16;
	struct rec16 *in;
	struct recsort_stats st;

	rng_state = 2;
	in = random16(fits + 1000, 0);
	st = sort_and_compare(in, fits + 1000, sizeof(*in), cmp16_total, 1, budget, 1);
	cr_assert_eq(st.runs, 1);
	cr_assert_eq(st.merges, 0);
	/* frames: random records barely compress, each frame has an 8-byte header */
	cr_assert_gt(st.spilled_bytes, 0);
	cr_assert_leq(st.spilled_bytes, fits * 16 + 8 * (fits * 16 / 2048 + 1));
	free(in);
}

Test(recsort, spilled_runs_are_compressed, .init = make_tmpdir, .fini = remove_tmpdir)
{
	/* Few distinct keys: sorted runs compress well. Stored raw
	 * (recsort_options.raw), the same records spill at least their size. */
	size_t budget = 1 * MiB, n = 3 * (budget / 16);
	struct recsort_stats packed, raw;
	struct rec16 *in;

	rng_state = 5;
	in = random16(n, 16);
	packed = sort_and_compare(in, n, sizeof(*in), cmp16_total, 1, budget, 1);
	spill_raw = true;
	raw = sort_and_compare(in, n, sizeof(*in), cmp16_total, 1, budget, 1);
	spill_raw = false;
	cr_assert_gt(packed.runs, 1);
	cr_assert_eq(packed.runs, raw.runs);
	cr_assert_geq(raw.spilled_bytes, (raw.records - budget / 16) * 16);
	cr_assert_lt(packed.spilled_bytes * 2, raw.spilled_bytes);
	free(in);
}

Test(recsort, many_runs_one_merge, .init = make_tmpdir, .fini = remove_tmpdir)
{
	struct rec16 *in;
	struct recsort_stats st;

	rng_state = 3;
	in = random16(300000, 0);
	st = sort_and_compare(in, 300000, sizeof(*in), cmp16_total, 1, 512 * KiB, 1);
	cr_assert_geq(st.runs, 8);
	cr_assert_eq(st.merges, 0, "%llu merges", (unsigned long long)st.merges);
	free(in);
}

Test(recsort, multi_pass_merges, .init = make_tmpdir, .fini = remove_tmpdir)
{
	/* 64 KiB: 13 runs per merge at most; 700k records make ~190 runs, so
	 * runs are merged on disk while collecting and again before reading. */
	struct rec16 *in;
	struct recsort_stats st;

	rng_state = 4;
	in = random16(700000, 0);
	st = sort_and_compare(in, 700000, sizeof(*in), cmp16_total, 1, 64 * KiB, 1);
	cr_assert_gt(st.runs, 150);
	cr_assert_gt(st.merges, 12);
	cr_assert_gt(st.spilled_bytes, 2 * 700000 * 16);
	free(in);
}

Test(recsort, equal_keys, .init = make_tmpdir, .fini = remove_tmpdir)
{
	struct rec16 *in;

	rng_state = 5;
	/* Few distinct keys, and all keys equal: in memory and spilled. */
	in = random16(200000, 3);
	sort_and_compare(in, 200000, sizeof(*in), cmp16_key, 0, 8 * MiB, 1);
	sort_and_compare(in, 200000, sizeof(*in), cmp16_key, 0, 96 * KiB, 1);
	for (size_t i = 0; i < 200000; i++)
		in[i].key = 7;
	sort_and_compare(in, 200000, sizeof(*in), cmp16_key, 0, 8 * MiB, 1);
	sort_and_compare(in, 200000, sizeof(*in), cmp16_key, 0, 96 * KiB, 1);
	free(in);
}

Test(recsort, sorted_reversed_and_organ_pipe_inputs, .init = make_tmpdir, .fini = remove_tmpdir)
{
	size_t n = 100000;
	struct rec16 *in = random16(n, 0);

	for (size_t i = 0; i < n; i++)
		in[i].key = i;
	sort_and_compare(in, n, sizeof(*in), cmp16_total, 1, 8 * MiB, 1);
	for (size_t i = 0; i < n; i++)
		in[i].key = n - i;
	sort_and_compare(in, n, sizeof(*in), cmp16_total, 1, 8 * MiB, 1);
	for (size_t i = 0; i < n; i++)
		in[i].key = i < n / 2 ? i : n - i;
	sort_and_compare(in, n, sizeof(*in), cmp16_total, 1, 256 * KiB, 1);
	free(in);
}

Test(recsort, records_of_32_and_12_bytes, .init = make_tmpdir, .fini = remove_tmpdir)
{
	size_t n = 150000;
	struct rec32 *a = malloc(n * sizeof(*a));
	struct rec12 *b = malloc(n * sizeof(*b));
	struct recsort_stats st;

	cr_assert(a && b);
	rng_state = 6;
	for (size_t i = 0; i < n; i++) {
		a[i] = (struct rec32){ { rnd() % 50, rnd() % 1000, rnd(), i } };
		b[i] = (struct rec12){ (uint32_t)(rnd() % 100), (uint32_t)rnd(), (uint32_t)i };
	}
	st = sort_and_compare(a, n, sizeof(*a), cmp32, 1, 8 * MiB, 1);
	cr_assert_eq(st.runs, 0);
	st = sort_and_compare(a, n, sizeof(*a), cmp32, 1, 128 * KiB, 1);
	cr_assert_gt(st.merges, 0);
	st = sort_and_compare(b, n, sizeof(*b), cmp12, 1, 100 * KiB, 1);
	cr_assert_gt(st.runs, 1);
	free(a);
	free(b);
}

Test(recsort, parallel_sort_jobs, .init = make_tmpdir, .fini = remove_tmpdir)
{
	struct rec16 *in;
	struct recsort_stats st;

	/* a quarter under valgrind, in a quarter of the budget: as many runs */
	const size_t n = valgrind_reps(400000, 4, 1), small = valgrind_reps(1 * MiB, 4, 1);

	rng_state = 7;
	in = random16(n, 1000);
	st = sort_and_compare(in, n, sizeof(*in), cmp16_total, 1, 16 * MiB, 4);
	cr_assert_eq(st.runs, 0);
	st = sort_and_compare(in, n, sizeof(*in), cmp16_total, 1, small, 4);
	cr_assert_gt(st.runs, 4);
	st = sort_and_compare(in, n, sizeof(*in), cmp16_key, 0, small, 3);
	free(in);
}

/* Peak resident memory, reset before measuring; 0 if not available. */
static long vm_kib(const char *field)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, strlen(field)))
			v = atol(line + strlen(field));
	fclose(f);
	return v;
}

Test(recsort, resident_memory_stays_in_budget, .init = make_tmpdir, .fini = remove_tmpdir)
{
	/* 96 MiB of records generated on the fly through a 16 MiB budget: the
	 * process's peak resident set grows by the budget, not the data. (Under
	 * valgrind, whose resident set says nothing, an eighth of it.) */
	const int scaled = RUNNING_ON_VALGRIND;
	const size_t n = scaled ? 768 * KiB : 6 * MiB, budget = scaled ? 2 * MiB : 16 * MiB;
	struct recsort *rs = recsort_create(16, cmp16_key, NULL, budget, &(struct recsort_options){ .tmpdir = tmpdir, .raw = spill_raw });
	struct recsort_stats st;
	uint64_t sum_in = 0, sum_out = 0, last = 0;
	const struct rec16 *rec;
	long before, peak;
	FILE *f;
	int ret;

	cr_assert_not_null(rs);
	f = fopen("/proc/self/clear_refs", "w");
	if (f) {
		fputs("5", f);   /* reset the peak resident set size */
		fclose(f);
	}
	before = vm_kib("VmRSS:");
	rng_state = 8;
	for (size_t i = 0; i < n; i++) {
		struct rec16 r = { rnd() >> 8, i };

		sum_in += r.key * 31 + r.seq;
		cr_assert_eq(recsort_add(rs, &r), 0);
	}
	cr_assert_eq(recsort_finish(rs), 0);
	for (size_t i = 0; (ret = recsort_next(rs, (const void **)&rec)) == 1; i++) {
		cr_assert_geq(rec->key, last);
		last = rec->key;
		sum_out += rec->key * 31 + rec->seq;
	}
	cr_assert_eq(ret, 0);
	cr_assert_eq(sum_in, sum_out);
	peak = vm_kib("VmHWM:");
	recsort_get_stats(rs, &st);
	cr_assert_leq(st.peak_memory, budget);
	cr_assert_gt(st.runs, 5);
	if (before && peak && !scaled)
		cr_assert_lt((size_t)(peak - before) * KiB, budget + budget / 4,
			     "resident set grew by %ld KiB for a %zu KiB budget", peak - before,
			     budget / KiB);
	recsort_destroy(rs);
}

Test(recsort, bad_calls)
{
	struct recsort *rs;
	const void *rec;
	struct rec16 r = { 1, 2 };

	errno = 0;
	cr_assert_null(recsort_create(0, cmp16_key, NULL, MiB, NULL));
	cr_assert_eq(errno, EINVAL);
	cr_assert_null(recsort_create(16, NULL, NULL, MiB, NULL));
	cr_assert_null(recsort_create(16, cmp16_key, NULL, 1000, NULL));
	cr_assert_null(recsort_create(1 << 20, cmp16_key, NULL, MiB, NULL));
	cr_assert_null(recsort_create(60000, cmp16_key, NULL, 64 * KiB, NULL));
	rs = recsort_create(16, cmp16_key, NULL, MiB, NULL);
	cr_assert_not_null(rs);
	cr_assert_eq(recsort_record_size(rs), 16);
	cr_assert_eq(recsort_next(rs, &rec), -EINVAL);
	cr_assert_eq(recsort_set_jobs(rs, 0), -EINVAL);
	cr_assert_eq(recsort_set_jobs(rs, 65), -EINVAL);
	cr_assert_eq(recsort_add(rs, &r), 0);
	cr_assert_eq(recsort_set_jobs(rs, 2), -EINVAL);
	cr_assert_eq(recsort_finish(rs), 0);
	cr_assert_eq(recsort_finish(rs), -EINVAL);
	cr_assert_eq(recsort_add(rs, &r), -EINVAL);
	cr_assert_eq(recsort_next(rs, &rec), 1);
	cr_assert_eq(recsort_next(rs, &rec), 0);
	recsort_destroy(rs);
	recsort_destroy(NULL);
}

Test(recsort, spill_errors_are_reported_and_stick, .init = make_tmpdir, .fini = remove_tmpdir)
{
	struct recsort *rs;
	struct rec16 r = { 1, 2 };
	struct rlimit lim = { 256 * KiB, 256 * KiB };
	int ret = 0;
	size_t i;

	/* A tmpdir that does not exist. */
	rs = recsort_create(16, cmp16_key, NULL, 64 * KiB, &(struct recsort_options){ .tmpdir = "/nonexistent/dir" });
	cr_assert_not_null(rs);
	for (i = 0; i < 100000 && !ret; i++)
		ret = recsort_add(rs, &r);
	cr_assert_eq(ret, -ENOENT);
	cr_assert_eq(recsort_add(rs, &r), -ENOENT);
	cr_assert_eq(recsort_finish(rs), -ENOENT);
	recsort_destroy(rs);

	/* A full disk, as a file size limit: write fails with EFBIG. */
	signal(SIGXFSZ, SIG_IGN);
	cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
	rs = recsort_create(16, cmp16_key, NULL, 64 * KiB, &(struct recsort_options){ .tmpdir = tmpdir });
	cr_assert_not_null(rs);
	ret = 0;
	for (i = 0; i < 1000000 && !ret; i++)
		ret = recsort_add(rs, &r);
	cr_assert_eq(ret, -EFBIG);
	cr_assert_eq(recsort_finish(rs), -EFBIG);
	recsort_destroy(rs);
}

/* ---- recjoin ------------------------------------------------------------------ */

/* An observed or declared reference: key = extent, val = who. */
struct ref {
	uint64_t key, val;
};

static int ref_cmp_key(const void *a, const void *b, void *arg)
{
	(void)arg;
	return cmp16_key(a, b, NULL);
}

static int ref_cmp_full(const void *a, const void *b, void *arg)
{
	(void)arg;
	return cmp16_total(a, b, NULL);
}

struct seen {
	char text[4096];
	size_t len;
	int stop_after;
	int calls;
};

/* Render each group as "kind:key:nleft:nright " after checking its keys. */
static int record_group(const struct recjoin_group *g, void *arg)
{
	static const char kind[] = "LRB";
	struct seen *s = arg;
	const struct ref *l = g->left, *r = g->right;
	uint64_t key = g->nleft ? l[0].key : r[0].key;

	for (size_t i = 0; i < g->nleft; i++)
		cr_assert_eq(l[i].key, key);
	for (size_t i = 0; i < g->nright; i++)
		cr_assert_eq(r[i].key, key);
	cr_assert_eq(g->kind, g->nleft && g->nright ? RECJOIN_BOTH
			      : g->nleft	     ? RECJOIN_LEFT_ONLY
						     : RECJOIN_RIGHT_ONLY);
	s->len += (size_t)snprintf(s->text + s->len, sizeof(s->text) - s->len, "%c%llu:%zu:%zu ",
				   kind[g->kind], (unsigned long long)key, g->nleft, g->nright);
	if (++s->calls == s->stop_after)
		return 42;
	return 0;
}

static struct recsort *refs_sorted(const struct ref *refs, size_t n, size_t budget)
{
	struct recsort *rs = recsort_create(sizeof(struct ref), ref_cmp_full, NULL, budget, &(struct recsort_options){ .tmpdir = tmpdir, .raw = spill_raw });

	cr_assert_not_null(rs);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(recsort_add(rs, &refs[i]), 0);
	cr_assert_eq(recsort_finish(rs), 0);
	return rs;
}

static int run_join(const struct ref *l, size_t nl, const struct ref *r, size_t nr, int group_unmatched,
		    struct seen *s, struct recjoin *out)
{
	struct recjoin j = {
		.left = refs_sorted(l, nl, MiB),
		.right = refs_sorted(r, nr, MiB),
		.cmp = ref_cmp_key,
		.cmp_left = group_unmatched ? ref_cmp_key : NULL,
		.cmp_right = group_unmatched ? ref_cmp_key : NULL,
		.group = record_group,
		.arg = s,
	};
	int ret = recjoin_run(&j);

	recsort_destroy(j.left);
	recsort_destroy(j.right);
	if (out)
		*out = j;
	return ret;
}

Test(recjoin, hand_built_example, .init = make_tmpdir, .fini = remove_tmpdir)
{
	/* Observed (left) and declared (right) references to extents 1..9. */
	const struct ref left[] = { { 4, 1 }, { 1, 1 }, { 9, 0 }, { 4, 2 }, { 2, 1 },
				    { 1, 2 }, { 4, 3 }, { 7, 1 }, { 9, 1 } };
	const struct ref right[] = { { 7, 2 }, { 5, 1 }, { 1, 9 }, { 3, 1 },
				     { 4, 1 }, { 5, 2 }, { 7, 1 } };
	struct seen s = { .len = 0 };
	struct recjoin j;

	cr_assert_eq(run_join(left, 9, right, 7, 1, &s, &j), 0);
	cr_assert_str_eq(s.text, "B1:2:1 L2:1:0 R3:0:1 B4:3:1 R5:0:2 B7:1:2 L9:2:0 ");
	cr_assert_eq(j.groups[RECJOIN_BOTH], 3);
	cr_assert_eq(j.groups[RECJOIN_LEFT_ONLY], 2);
	cr_assert_eq(j.groups[RECJOIN_RIGHT_ONLY], 2);

	/* Without same-side comparators, unmatched records come one by one. */
	memset(&s, 0, sizeof(s));
	cr_assert_eq(run_join(left, 9, right, 7, 0, &s, NULL), 0);
	cr_assert_str_eq(s.text, "B1:2:1 L2:1:0 R3:0:1 B4:3:1 R5:0:1 R5:0:1 B7:1:2 L9:1:0 L9:1:0 ");

	/* One side empty, both empty. */
	memset(&s, 0, sizeof(s));
	cr_assert_eq(run_join(left, 3, right, 0, 1, &s, NULL), 0);
	cr_assert_str_eq(s.text, "L1:1:0 L4:1:0 L9:1:0 ");
	memset(&s, 0, sizeof(s));
	cr_assert_eq(run_join(left, 0, right, 2, 1, &s, NULL), 0);
	cr_assert_str_eq(s.text, "R5:0:1 R7:0:1 ");
	memset(&s, 0, sizeof(s));
	cr_assert_eq(run_join(left, 0, right, 0, 1, &s, NULL), 0);
	cr_assert_str_eq(s.text, "");

	/* The callback stops the join. */
	memset(&s, 0, sizeof(s));
	s.stop_after = 2;
	cr_assert_eq(run_join(left, 9, right, 7, 1, &s, NULL), 42);
	cr_assert_str_eq(s.text, "B1:2:1 L2:1:0 ");
}

/* A right side read from an array already in key order (the checker's
 * extent-tree scan): each record is handed out through a one-record buffer
 * the next call overwrites, as a scan's would be. */
struct ref_stream {
	const struct ref *r;
	size_t n, i;
	struct ref cur;
	int fail_at;                  /* > 0: the fail_at-th call returns -EIO */
};

static int stream_next(void *arg, const void **rec)
{
	struct ref_stream *st = arg;

	if (st->fail_at && (size_t)st->fail_at == st->i + 1)
		return -EIO;
	if (st->i == st->n)
		return 0;
	st->cur = st->r[st->i++];
	*rec = &st->cur;
	return 1;
}

Test(recjoin, right_side_from_a_stream, .init = make_tmpdir, .fini = remove_tmpdir)
{
	const struct ref left[] = { { 4, 1 }, { 1, 1 }, { 9, 0 }, { 4, 2 }, { 2, 1 },
				    { 1, 2 }, { 4, 3 }, { 7, 1 }, { 9, 1 } };
	const struct ref right[] = { { 1, 9 }, { 3, 1 }, { 4, 1 }, { 5, 1 }, { 5, 2 }, { 7, 1 }, { 7, 2 } };
	struct ref_stream st = { .r = right, .n = 7 };
	struct seen s = { .len = 0 };
	struct recjoin j = { .left = refs_sorted(left, 9, MiB), .right_next = stream_next, .right_arg = &st,
			     .right_size = sizeof(struct ref), .cmp = ref_cmp_key, .cmp_left = ref_cmp_key,
			     .cmp_right = ref_cmp_key, .group = record_group, .arg = &s };

	/* the same groups as from a sorter (hand_built_example) */
	cr_assert_eq(recjoin_run(&j), 0);
	cr_assert_str_eq(s.text, "B1:2:1 L2:1:0 R3:0:1 B4:3:1 R5:0:2 B7:1:2 L9:2:0 ");
	recsort_destroy(j.left);

	/* the stream's error ends the join */
	memset(&s, 0, sizeof(s));
	st = (struct ref_stream){ .r = right, .n = 7, .fail_at = 3 };
	j.left = refs_sorted(left, 9, MiB);
	cr_assert_eq(recjoin_run(&j), -EIO);
	recsort_destroy(j.left);

	/* neither a sorter nor a stream on the right */
	j.left = refs_sorted(left, 9, MiB);
	j.right_next = NULL;
	cr_assert_eq(recjoin_run(&j), -EINVAL);
	recsort_destroy(j.left);
}

Test(recjoin, unfinished_sorter_is_refused, .init = make_tmpdir, .fini = remove_tmpdir)
{
	struct ref one = { 1, 1 };
	struct seen s = { .len = 0 };
	struct recjoin j = { .cmp = ref_cmp_key, .group = record_group, .arg = &s };

	j.left = recsort_create(sizeof(one), ref_cmp_full, NULL, MiB, &(struct recsort_options){ .tmpdir = tmpdir });
	j.right = refs_sorted(&one, 1, MiB);
	cr_assert_eq(recjoin_run(&j), -EINVAL);
	recsort_destroy(j.left);
	recsort_destroy(j.right);
	j.left = j.right = NULL;
	cr_assert_eq(recjoin_run(&j), -EINVAL);
}

struct counts {
	uint32_t *left, *right;       /* per key, from the reference */
	uint64_t nkeys, next_key;     /* groups must come in key order */
	uint64_t groups[3];
};

static int check_group(const struct recjoin_group *g, void *arg)
{
	struct counts *c = arg;
	const struct ref *l = g->left, *r = g->right;
	uint64_t key = g->nleft ? l[0].key : r[0].key;

	cr_assert_geq(key, c->next_key, "groups out of order");
	/* Every key in between had no records at all. */
	for (uint64_t k = c->next_key; k < key; k++)
		cr_assert(c->left[k] == 0 && c->right[k] == 0, "key %llu skipped",
			  (unsigned long long)k);
	cr_assert_eq(g->nleft, c->left[key], "key %llu: %zu left, want %u", (unsigned long long)key,
		     g->nleft, c->left[key]);
	cr_assert_eq(g->nright, c->right[key], "key %llu: %zu right, want %u",
		     (unsigned long long)key, g->nright, c->right[key]);
	for (size_t i = 0; i < g->nleft; i++)
		cr_assert_eq(l[i].key, key);
	for (size_t i = 0; i < g->nright; i++)
		cr_assert_eq(r[i].key, key);
	c->next_key = key + 1;
	c->groups[g->kind]++;
	return 0;
}

Test(recjoin, random_differential_spilled, .init = make_tmpdir, .fini = remove_tmpdir)
{
	const uint64_t nkeys = 20000;
	const size_t nl = 120000, nr = 90000;
	struct ref *l = malloc(nl * sizeof(*l)), *r = malloc(nr * sizeof(*r));
	struct counts c = { calloc(nkeys, 4), calloc(nkeys, 4), nkeys, 0, { 0 } };
	uint64_t want[3] = { 0 };
	struct recjoin j = {
		.cmp = ref_cmp_key,
		.cmp_left = ref_cmp_key,
		.cmp_right = ref_cmp_key,
		.group = check_group,
		.arg = &c,
	};
	struct recsort_stats st;

	cr_assert(l && r && c.left && c.right);
	rng_state = 11;
	/* Skewed keys: some heavy, many absent on one side. */
	for (size_t i = 0; i < nl; i++) {
		l[i] = (struct ref){ ((rnd() % nkeys) * (rnd() % 2) + rnd() % 3) % nkeys, i };
		c.left[l[i].key]++;
	}
	for (size_t i = 0; i < nr; i++) {
		r[i] = (struct ref){ rnd() % (nkeys / 2) * 2, i };
		c.right[r[i].key]++;
	}
	for (uint64_t k = 0; k < nkeys; k++)
		if (c.left[k] || c.right[k])
			want[c.left[k] && c.right[k] ? RECJOIN_BOTH
			     : c.left[k]	     ? RECJOIN_LEFT_ONLY
						     : RECJOIN_RIGHT_ONLY]++;
	/* Small budgets: both sides spill and merge on disk. */
	j.left = refs_sorted(l, nl, 96 * KiB);
	j.right = refs_sorted(r, nr, 64 * KiB);
	recsort_get_stats(j.left, &st);
	cr_assert_gt(st.runs, 10);
	cr_assert_eq(recjoin_run(&j), 0);
	for (uint64_t k = c.next_key; k < nkeys; k++)
		cr_assert(c.left[k] == 0 && c.right[k] == 0);
	for (int k = 0; k < 3; k++) {
		cr_assert_eq(c.groups[k], want[k], "kind %d: %llu groups, want %llu", k,
			     (unsigned long long)c.groups[k], (unsigned long long)want[k]);
		cr_assert_eq(j.groups[k], want[k]);
	}
	cr_assert_gt(j.peak_group_bytes, 0);
	recsort_destroy(j.left);
	recsort_destroy(j.right);
	free(l);
	free(r);
	free(c.left);
	free(c.right);
}
