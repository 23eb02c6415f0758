// SPDX-License-Identifier: LGPL-2.1-or-later
/* Extent bitmap: per-region runs, bit chunks or full spans, held as 16-byte
 * entries in a two-level sorted array (see ebitmap.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <btk/ebitmap.h>

#define REGION_SHIFT 15
#define REGION_UNITS (1u << REGION_SHIFT)
#define REGION_LAST (REGION_UNITS - 1)
#define BITS_WORDS (REGION_UNITS / 64)
/* A run array becomes a bit chunk above this many runs (4 + 4n > 4104 bytes)... */
#define RUNS_TO_BITS 1024
/* ... and a bit chunk becomes runs again at this many or fewer. */
#define BITS_TO_RUNS 512
#define LEAF_MAX 256
#define INLINE_NONE 0xFFFF

enum kind { K_INLINE, K_RUNS, K_BITS, K_FULL };

struct run {
	uint16_t start, last;     /* unit offsets in the region, inclusive */
};

struct runs {
	uint32_t n, cap;
	struct run r[];
};

struct bits {
	uint32_t count;           /* units set */
	uint32_t nruns;           /* maximal runs of set units */
	uint64_t w[BITS_WORDS];
};

struct entry {
	uint64_t key;             /* region index << 2 | kind */
	union {
		uint64_t nreg;            /* K_FULL: consecutive full regions */
		struct run inl[2];        /* K_INLINE: inl[1].start == INLINE_NONE: one run */
		struct runs *runs;        /* K_RUNS: 3..RUNS_TO_BITS+1 runs */
		struct bits *bits;        /* K_BITS */
	} u;
};
_Static_assert(sizeof(struct entry) == 16, "entries are 16 bytes");

struct leaf {
	uint32_t n, cap;
	struct entry e[];
};

struct pos {
	size_t l;                 /* leaf */
	uint32_t i;               /* entry in the leaf */
};

struct ebitmap {
	unsigned shift;           /* log2(unit) */
	uint64_t total_units;     /* 2^64 / unit */
	uint64_t last_region;
	struct leaf **leaves;     /* sorted; none is empty */
	size_t nleaves, cap_leaves;
	struct pos cur;           /* last entry found or inserted */
	uint64_t units_set;
	uint64_t mem, peak;
	uint64_t to_bits, to_runs;
};

/* ---- memory, counted as glibc heap chunks ------------------------------- */

static uint64_t heap_cost(size_t n)
{
	uint64_t c = ((uint64_t)n + 8 + 15) & ~(uint64_t)15;

	return c < 32 ? 32 : c;
}

static void mem_add(struct ebitmap *eb, size_t n)
{
	eb->mem += heap_cost(n);
	if (eb->mem > eb->peak)
		eb->peak = eb->mem;
}

static void *eb_alloc(struct ebitmap *eb, size_t n)
{
	void *p = malloc(n);

	if (p)
		mem_add(eb, n);
	return p;
}

static void eb_free(struct ebitmap *eb, void *p, size_t n)
{
	if (!p)
		return;
	free(p);
	eb->mem -= heap_cost(n);
}

static void *eb_realloc(struct ebitmap *eb, void *p, size_t oldn, size_t newn)
{
	void *q = realloc(p, newn);

	if (!q)
		return NULL;
	if (p)
		eb->mem -= heap_cost(oldn);
	mem_add(eb, newn);
	return q;
}

static size_t runs_bytes(uint32_t cap) { return sizeof(struct runs) + cap * sizeof(struct run); }
static size_t leaf_bytes(uint32_t cap) { return sizeof(struct leaf) + cap * sizeof(struct entry); }

/* ---- entries -------------------------------------------------------------- */

static inline uint64_t e_idx(const struct entry *e) { return e->key >> 2; }
static inline enum kind e_kind(const struct entry *e) { return (enum kind)(e->key & 3); }
static inline uint64_t mkkey(uint64_t idx, enum kind k) { return idx << 2 | k; }

/* Last region the entry covers. */
static inline uint64_t e_end(const struct entry *e)
{
	return e_idx(e) + (e_kind(e) == K_FULL ? e->u.nreg - 1 : 0);
}

/* The runs of a run-kind entry; inline runs are copied to tmp. */
static const struct run *e_runs(const struct entry *e, struct run tmp[2], uint32_t *n)
{
	if (e_kind(e) == K_RUNS) {
		*n = e->u.runs->n;
		return e->u.runs->r;
	}
	tmp[0] = e->u.inl[0];
	tmp[1] = e->u.inl[1];
	*n = e->u.inl[1].start == INLINE_NONE ? 1 : 2;
	return tmp;
}

static void free_payload(struct ebitmap *eb, struct entry *e)
{
	if (e_kind(e) == K_RUNS)
		eb_free(eb, e->u.runs, runs_bytes(e->u.runs->cap));
	else if (e_kind(e) == K_BITS)
		eb_free(eb, e->u.bits, sizeof(struct bits));
}

/* ---- run arrays ----------------------------------------------------------- */

/* First run ending at or after x. */
static uint32_t runs_ending_from(const struct run *r, uint32_t n, uint32_t x)
{
	uint32_t lo = 0, hi = n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (r[mid].last < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* First run starting after x. */
static uint32_t runs_starting_after(const struct run *r, uint32_t n, uint32_t x)
{
	uint32_t lo = 0, hi = n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (r[mid].start <= x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static uint32_t runs_overlap(const struct run *r, uint32_t lo, uint32_t hi, uint32_t a, uint32_t b)
{
	uint32_t covered = 0;

	for (uint32_t i = lo; i < hi; i++) {
		uint32_t s = r[i].start > a ? r[i].start : a;
		uint32_t l = r[i].last < b ? r[i].last : b;

		if (s <= l)
			covered += l - s + 1;
	}
	return covered;
}

/* Add [a, b] to a sorted array of maximal runs with room for one more;
 * returns the units newly set. */
static uint32_t runs_set(struct run *r, uint32_t *n, uint32_t a, uint32_t b)
{
	uint32_t lo = runs_ending_from(r, *n, a ? a - 1 : 0);
	uint32_t hi = runs_starting_after(r, *n, b + 1);
	uint32_t covered;
	struct run m;

	if (lo >= hi) {
		memmove(r + lo + 1, r + lo, (*n - lo) * sizeof(*r));
		r[lo] = (struct run){ (uint16_t)a, (uint16_t)b };
		(*n)++;
		return b - a + 1;
	}
	covered = runs_overlap(r, lo, hi, a, b);
	m.start = r[lo].start < a ? r[lo].start : (uint16_t)a;
	m.last = r[hi - 1].last > b ? r[hi - 1].last : (uint16_t)b;
	r[lo] = m;
	memmove(r + lo + 1, r + hi, (*n - hi) * sizeof(*r));
	*n -= hi - lo - 1;
	return b - a + 1 - covered;
}

/* Remove [a, b], splitting a run if needed (room for one more); returns the
 * units cleared. */
static uint32_t runs_clear(struct run *r, uint32_t *n, uint32_t a, uint32_t b)
{
	uint32_t lo = runs_ending_from(r, *n, a);
	uint32_t hi = runs_starting_after(r, *n, b);
	struct run piece[2];
	uint32_t np = 0, covered;

	if (lo >= hi)
		return 0;
	covered = runs_overlap(r, lo, hi, a, b);
	if (r[lo].start < a)
		piece[np++] = (struct run){ r[lo].start, (uint16_t)(a - 1) };
	if (r[hi - 1].last > b)
		piece[np++] = (struct run){ (uint16_t)(b + 1), r[hi - 1].last };
	memmove(r + lo + np, r + hi, (*n - hi) * sizeof(*r));
	memcpy(r + lo, piece, np * sizeof(*r));
	*n = *n - (hi - lo) + np;
	return covered;
}

static int runs_full(const struct run *r, uint32_t n)
{
	return n == 1 && r[0].start == 0 && r[0].last == REGION_LAST;
}

/* ---- bit chunks ----------------------------------------------------------- */

static inline uint64_t word_mask(unsigned lo, unsigned hi)
{
	return (~0ULL << lo) & (~0ULL >> (63 - hi));
}

/* Mask of bits [a, b] in word k (k within a>>6 .. b>>6). */
static inline uint64_t range_mask(uint32_t k, uint32_t a, uint32_t b)
{
	return word_mask(k == a >> 6 ? a & 63 : 0, k == b >> 6 ? b & 63 : 63);
}

static uint32_t bits_set(uint64_t *w, uint32_t a, uint32_t b)
{
	uint32_t n = 0;

	for (uint32_t k = a >> 6; k <= b >> 6; k++) {
		uint64_t m = range_mask(k, a, b);

		n += (uint32_t)__builtin_popcountll(m & ~w[k]);
		w[k] |= m;
	}
	return n;
}

static uint32_t bits_clear(uint64_t *w, uint32_t a, uint32_t b)
{
	uint32_t n = 0;

	for (uint32_t k = a >> 6; k <= b >> 6; k++) {
		uint64_t m = range_mask(k, a, b);

		n += (uint32_t)__builtin_popcountll(m & w[k]);
		w[k] &= ~m;
	}
	return n;
}

static uint32_t bits_popcount(const uint64_t *w, uint32_t a, uint32_t b)
{
	uint32_t n = 0;

	for (uint32_t k = a >> 6; k <= b >> 6; k++)
		n += (uint32_t)__builtin_popcountll(range_mask(k, a, b) & w[k]);
	return n;
}

/* Set bits in [a, b] whose predecessor is clear: run starts. */
static uint32_t bits_starts(const uint64_t *w, uint32_t a, uint32_t b)
{
	uint32_t n = 0;

	for (uint32_t k = a >> 6; k <= b >> 6; k++) {
		uint64_t prev = k ? w[k - 1] >> 63 : 0;
		uint64_t s = w[k] & ~(w[k] << 1 | prev);

		n += (uint32_t)__builtin_popcountll(range_mask(k, a, b) & s);
	}
	return n;
}

/* First bit >= from equal to want, or REGION_UNITS. */
static uint32_t bits_next(const uint64_t *w, uint32_t from, int want)
{
	uint32_t k = from >> 6;
	uint64_t x;

	if (from >= REGION_UNITS)
		return REGION_UNITS;
	x = (want ? w[k] : ~w[k]) & (~0ULL << (from & 63));
	while (!x) {
		if (++k == BITS_WORDS)
			return REGION_UNITS;
		x = want ? w[k] : ~w[k];
	}
	return k * 64 + (uint32_t)__builtin_ctzll(x);
}

/* ---- one region's content -------------------------------------------------- */

/* First set / clear offset >= off in a single-region entry, or REGION_UNITS. */
static uint32_t region_next(const struct entry *e, uint32_t off, int want_set)
{
	struct run tmp[2];
	const struct run *r;
	uint32_t n, i;

	if (off >= REGION_UNITS)
		return REGION_UNITS;
	if (e_kind(e) == K_FULL)
		return want_set ? off : REGION_UNITS;
	if (e_kind(e) == K_BITS)
		return bits_next(e->u.bits->w, off, want_set);
	r = e_runs(e, tmp, &n);
	i = runs_ending_from(r, n, off);
	if (want_set)
		return i == n ? REGION_UNITS : (r[i].start > off ? r[i].start : off);
	if (i == n || r[i].start > off)
		return off;
	return (uint32_t)r[i].last + 1;   /* runs are maximal: the next unit is clear */
}

static int region_test(const struct entry *e, uint32_t a, uint32_t b)
{
	struct run tmp[2];
	const struct run *r;
	uint32_t n, i;

	if (e_kind(e) == K_FULL)
		return EBITMAP_ALL;
	if (e_kind(e) == K_BITS) {
		uint32_t c = bits_popcount(e->u.bits->w, a, b);

		return c == 0 ? EBITMAP_NONE : c == b - a + 1 ? EBITMAP_ALL : EBITMAP_PARTIAL;
	}
	r = e_runs(e, tmp, &n);
	i = runs_ending_from(r, n, a);
	if (i == n || r[i].start > b)
		return EBITMAP_NONE;
	if (r[i].start <= a && r[i].last >= b)
		return EBITMAP_ALL;
	return EBITMAP_PARTIAL;
}

/* Units set in the entry. */
static uint64_t entry_count(const struct entry *e)
{
	struct run tmp[2];
	const struct run *r;
	uint32_t n;
	uint64_t c = 0;

	if (e_kind(e) == K_FULL)
		return e->u.nreg * REGION_UNITS;
	if (e_kind(e) == K_BITS)
		return e->u.bits->count;
	r = e_runs(e, tmp, &n);
	for (uint32_t i = 0; i < n; i++)
		c += (uint32_t)r[i].last - r[i].start + 1;
	return c;
}

/* Maximal runs inside the entry (a span counts as one). */
static uint64_t entry_runs(const struct entry *e)
{
	struct run tmp[2];
	uint32_t n;

	if (e_kind(e) == K_FULL)
		return 1;
	if (e_kind(e) == K_BITS)
		return e->u.bits->nruns;
	e_runs(e, tmp, &n);
	return n;
}

/* ---- the sorted entry array ----------------------------------------------- */

static inline struct entry *at(const struct ebitmap *eb, struct pos p)
{
	return &eb->leaves[p.l]->e[p.i];
}

static int pos_next(const struct ebitmap *eb, struct pos *p)
{
	if (p->i + 1 < eb->leaves[p->l]->n) {
		p->i++;
		return 1;
	}
	if (p->l + 1 < eb->nleaves) {
		p->l++;
		p->i = 0;
		return 1;
	}
	return 0;
}

static int pos_prev(const struct ebitmap *eb, struct pos *p)
{
	if (p->i > 0) {
		p->i--;
		return 1;
	}
	if (p->l > 0) {
		p->l--;
		p->i = eb->leaves[p->l]->n - 1;
		return 1;
	}
	return 0;
}

/* The last entry whose region index is <= r: 1 and *out, or 0 (none; *out is
 * the first position). Tries the cursor and its successor first. */
static int find_le(struct ebitmap *eb, uint64_t r, struct pos *out)
{
	struct pos p = eb->cur;
	size_t lo, hi;
	const struct leaf *lf;
	uint32_t a, b;

	if (p.l < eb->nleaves && p.i < eb->leaves[p.l]->n && e_idx(at(eb, p)) <= r) {
		for (int step = 0; step < 2; step++) {
			struct pos q = p;

			if (!pos_next(eb, &q) || e_idx(at(eb, q)) > r) {
				*out = eb->cur = p;
				return 1;
			}
			p = q;
		}
	}
	lo = 0;
	hi = eb->nleaves;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (e_idx(&eb->leaves[mid]->e[0]) <= r)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0) {
		*out = (struct pos){ 0, 0 };
		return 0;
	}
	lf = eb->leaves[lo - 1];
	a = 0;
	b = lf->n;
	while (a < b) {
		uint32_t mid = a + (b - a) / 2;

		if (e_idx(&lf->e[mid]) <= r)
			a = mid + 1;
		else
			b = mid;
	}
	*out = eb->cur = (struct pos){ lo - 1, a - 1 };
	return 1;
}

/* The entry covering region r, if any. */
static int find_covering(struct ebitmap *eb, uint64_t r, struct pos *p)
{
	return find_le(eb, r, p) && e_end(at(eb, *p)) >= r;
}

static int leaves_reserve(struct ebitmap *eb, size_t n)
{
	size_t cap = eb->cap_leaves ? eb->cap_leaves : 4;
	struct leaf **nl;

	if (n <= eb->cap_leaves)
		return 0;
	while (cap < n)
		cap *= 2;
	nl = eb_realloc(eb, eb->leaves, eb->cap_leaves * sizeof(*nl), cap * sizeof(*nl));
	if (!nl)
		return -ENOMEM;
	eb->leaves = nl;
	eb->cap_leaves = cap;
	return 0;
}

static uint32_t leaf_next_cap(uint32_t cap)
{
	cap = cap < 64 ? cap * 2 : cap + 64;
	return cap > LEAF_MAX ? LEAF_MAX : cap;
}

static int leaf_resize(struct ebitmap *eb, size_t l, uint32_t cap)
{
	struct leaf *lf = eb->leaves[l];
	struct leaf *nl = eb_realloc(eb, lf, leaf_bytes(lf->cap), leaf_bytes(cap));

	if (!nl)
		return -ENOMEM;
	nl->cap = cap;
	eb->leaves[l] = nl;
	return 0;
}

static struct leaf *leaf_new(struct ebitmap *eb, uint32_t cap)
{
	struct leaf *lf = eb_alloc(eb, leaf_bytes(cap));

	if (lf) {
		lf->n = 0;
		lf->cap = cap;
	}
	return lf;
}

/* Insert e at p (p.i may equal the leaf's count: append). Nothing changes on
 * failure. The cursor is left on the new entry. */
static int insert_at(struct ebitmap *eb, struct pos p, const struct entry *e)
{
	struct leaf *lf;

	if (eb->nleaves == 0) {
		if (leaves_reserve(eb, 1) || !(lf = leaf_new(eb, 4)))
			return -ENOMEM;
		eb->leaves[0] = lf;
		eb->nleaves = 1;
		p = (struct pos){ 0, 0 };
	}
	lf = eb->leaves[p.l];
	if (lf->n == LEAF_MAX) {
		/* Split; appending at the very end leaves the full leaf full. */
		int append = p.l == eb->nleaves - 1 && p.i == lf->n;
		uint32_t keep = append ? lf->n : lf->n / 2;
		uint32_t move = lf->n - keep;
		struct leaf *nl;

		if (leaves_reserve(eb, eb->nleaves + 1))
			return -ENOMEM;
		nl = leaf_new(eb, append ? 4 : leaf_next_cap(move));
		if (!nl)
			return -ENOMEM;
		memcpy(nl->e, lf->e + keep, move * sizeof(struct entry));
		nl->n = move;
		lf->n = keep;
		memmove(eb->leaves + p.l + 2, eb->leaves + p.l + 1,
			(eb->nleaves - p.l - 1) * sizeof(*eb->leaves));
		eb->leaves[p.l + 1] = nl;
		eb->nleaves++;
		if (p.i > keep || append) {
			p.l++;
			p.i -= keep;
		}
		lf = eb->leaves[p.l];
	}
	if (lf->n == lf->cap) {
		if (leaf_resize(eb, p.l, leaf_next_cap(lf->cap)))
			return -ENOMEM;
		lf = eb->leaves[p.l];
	}
	memmove(lf->e + p.i + 1, lf->e + p.i, (lf->n - p.i) * sizeof(struct entry));
	lf->e[p.i] = *e;
	lf->n++;
	eb->cur = p;
	return 0;
}

/* Insert e right after the last entry with a smaller region index. */
static int insert_sorted(struct ebitmap *eb, const struct entry *e)
{
	struct pos p;

	if (find_le(eb, e_idx(e), &p))
		p.i++;
	return insert_at(eb, p, e);
}

static void leaf_remove(struct ebitmap *eb, size_t l)
{
	eb_free(eb, eb->leaves[l], leaf_bytes(eb->leaves[l]->cap));
	memmove(eb->leaves + l, eb->leaves + l + 1, (eb->nleaves - l - 1) * sizeof(*eb->leaves));
	eb->nleaves--;
}

/* Merge leaf l with its successor when both are small, and give back unused
 * capacity; allocation failures just leave things as they are. */
static void leaf_tidy(struct ebitmap *eb, size_t l)
{
	struct leaf *lf;

	if (l >= eb->nleaves)
		return;
	if (l + 1 < eb->nleaves) {
		struct leaf *nx = eb->leaves[l + 1];
		uint32_t sum = eb->leaves[l]->n + nx->n;

		if (sum <= LEAF_MAX / 2 &&
		    (eb->leaves[l]->cap >= sum || !leaf_resize(eb, l, sum))) {
			lf = eb->leaves[l];
			memcpy(lf->e + lf->n, nx->e, nx->n * sizeof(struct entry));
			lf->n = sum;
			leaf_remove(eb, l + 1);
		}
	}
	lf = eb->leaves[l];
	if (lf->cap > 8 && lf->n < lf->cap / 4)
		leaf_resize(eb, l, lf->n * 2 > 4 ? lf->n * 2 : 4);
}

/* Delete count entries from p on, freeing their payloads. */
static void delete_at(struct ebitmap *eb, struct pos p, size_t count)
{
	size_t first = p.l;

	while (count && p.l < eb->nleaves) {
		struct leaf *lf = eb->leaves[p.l];
		uint32_t k = lf->n - p.i < count ? lf->n - p.i : (uint32_t)count;

		for (uint32_t j = p.i; j < p.i + k; j++)
			free_payload(eb, &lf->e[j]);
		memmove(lf->e + p.i, lf->e + p.i + k, (lf->n - p.i - k) * sizeof(struct entry));
		lf->n -= k;
		count -= k;
		if (lf->n == 0)
			leaf_remove(eb, p.l);
		else
			p.l++;
		p.i = 0;
	}
	leaf_tidy(eb, first);
	if (first > 0)
		leaf_tidy(eb, first - 1);
	eb->cur = (struct pos){ 0, 0 };
}

/* ---- region forms ----------------------------------------------------------- */

/* The entry at p holds full regions: join it with full neighbours. */
static void full_merge(struct ebitmap *eb, uint64_t r)
{
	struct pos p, q;
	struct entry *e;

	if (!find_le(eb, r, &p))
		return;
	e = at(eb, p);
	q = p;
	if (pos_next(eb, &q) && e_kind(at(eb, q)) == K_FULL && e_idx(at(eb, q)) == e_end(e) + 1) {
		e->u.nreg += at(eb, q)->u.nreg;
		delete_at(eb, q, 1);
		find_le(eb, r, &p);
		e = at(eb, p);
	}
	q = p;
	if (pos_prev(eb, &q) && e_kind(at(eb, q)) == K_FULL && e_end(at(eb, q)) + 1 == e_idx(e)) {
		at(eb, q)->u.nreg += e->u.nreg;
		delete_at(eb, p, 1);
	}
}

static struct bits *runs_to_bits(struct ebitmap *eb, const struct run *r, uint32_t n)
{
	struct bits *bt = eb_alloc(eb, sizeof(*bt));

	if (!bt)
		return NULL;
	memset(bt, 0, sizeof(*bt));
	for (uint32_t i = 0; i < n; i++)
		bt->count += bits_set(bt->w, r[i].start, r[i].last);
	bt->nruns = n;
	eb->to_bits++;
	return bt;
}

/* Store n runs (n >= 1, not a full region) into e, choosing inline / array /
 * bits. The old payload is freed on success only. */
static int store_runs(struct ebitmap *eb, struct entry *e, const struct run *r, uint32_t n)
{
	uint64_t idx = e_idx(e);
	struct runs *rs;

	if (n <= 2) {
		struct run r0 = r[0];
		struct run r1 = n == 2 ? r[1] : (struct run){ INLINE_NONE, INLINE_NONE };

		free_payload(eb, e);    /* r may point into it */
		e->key = mkkey(idx, K_INLINE);
		e->u.inl[0] = r0;
		e->u.inl[1] = r1;
		return 0;
	}
	if (n > RUNS_TO_BITS) {
		struct bits *bt = runs_to_bits(eb, r, n);

		if (!bt)
			return -ENOMEM;
		free_payload(eb, e);
		e->key = mkkey(idx, K_BITS);
		e->u.bits = bt;
		return 0;
	}
	rs = eb_alloc(eb, runs_bytes(n + 2));
	if (!rs)
		return -ENOMEM;
	rs->n = n;
	rs->cap = n + 2;
	memcpy(rs->r, r, n * sizeof(*r));
	free_payload(eb, e);
	e->key = mkkey(idx, K_RUNS);
	e->u.runs = rs;
	return 0;
}

/* Runs of a bit chunk (at most max), for converting back. */
static uint32_t bits_to_runs(const uint64_t *w, struct run *r, uint32_t max)
{
	uint32_t n = 0, s = bits_next(w, 0, 1);

	while (s < REGION_UNITS && n < max) {
		uint32_t c = bits_next(w, s, 0);

		r[n++] = (struct run){ (uint16_t)s, (uint16_t)(c - 1) };
		s = bits_next(w, c, 1);
	}
	return n;
}

/* After a change to the single-region entry at p: drop it if empty, make it a
 * full span if full, and move it to its smaller form. */
static void region_normalize(struct ebitmap *eb, struct pos p)
{
	struct entry *e = at(eb, p);
	uint64_t r = e_idx(e);

	if (e_kind(e) == K_BITS) {
		struct bits *bt = e->u.bits;

		if (bt->count == 0) {
			delete_at(eb, p, 1);
		} else if (bt->count == REGION_UNITS) {
			free_payload(eb, e);
			e->key = mkkey(r, K_FULL);
			e->u.nreg = 1;
			full_merge(eb, r);
		} else if (bt->nruns <= BITS_TO_RUNS) {
			struct run tmp[BITS_TO_RUNS];
			uint32_t n = bits_to_runs(bt->w, tmp, BITS_TO_RUNS);

			if (store_runs(eb, e, tmp, n) == 0)
				eb->to_runs++;
		}
		return;
	}
	if (e_kind(e) == K_RUNS) {
		struct runs *rs = e->u.runs;

		if (rs->n == 0) {
			delete_at(eb, p, 1);
		} else if (runs_full(rs->r, rs->n)) {
			free_payload(eb, e);
			e->key = mkkey(r, K_FULL);
			e->u.nreg = 1;
			full_merge(eb, r);
		} else if (rs->n <= 2 || rs->n > RUNS_TO_BITS) {
			store_runs(eb, e, rs->r, rs->n);
		} else if (rs->cap > 8 && rs->n < rs->cap / 4) {
			struct runs *nr = eb_realloc(eb, rs, runs_bytes(rs->cap), runs_bytes(rs->n * 2));

			if (nr) {
				nr->cap = nr->n * 2;
				e->u.runs = nr;
			}
		}
	}
}

/* Set or clear offsets [a, b] of the single-region entry at p. */
static int region_modify(struct ebitmap *eb, struct pos p, uint32_t a, uint32_t b, int set)
{
	struct entry *e = at(eb, p);

	if (e_kind(e) == K_BITS) {
		struct bits *bt = e->u.bits;
		uint32_t hi = b < REGION_LAST ? b + 1 : b;
		uint32_t before = bits_starts(bt->w, a, hi);

		if (set) {
			uint32_t d = bits_set(bt->w, a, b);

			bt->count += d;
			eb->units_set += d;
		} else {
			uint32_t d = bits_clear(bt->w, a, b);

			bt->count -= d;
			eb->units_set -= d;
		}
		bt->nruns = bt->nruns + bits_starts(bt->w, a, hi) - before;
	} else if (e_kind(e) == K_RUNS) {
		struct runs *rs = e->u.runs;

		if (rs->n == rs->cap) {
			uint32_t cap = rs->cap + rs->cap / 2 + 2;
			struct runs *nr = eb_realloc(eb, rs, runs_bytes(rs->cap), runs_bytes(cap));

			if (!nr)
				return -ENOMEM;
			nr->cap = cap;
			e->u.runs = rs = nr;
		}
		if (set)
			eb->units_set += runs_set(rs->r, &rs->n, a, b);
		else
			eb->units_set -= runs_clear(rs->r, &rs->n, a, b);
	} else {
		struct run tmp[3];
		uint32_t n, d;
		int ret;

		e_runs(e, tmp, &n);
		d = set ? runs_set(tmp, &n, a, b) : runs_clear(tmp, &n, a, b);
		if (n == 0) {
			delete_at(eb, p, 1);
			eb->units_set -= d;
			return 0;
		}
		if (runs_full(tmp, n)) {
			e->key = mkkey(e_idx(e), K_FULL);
			e->u.nreg = 1;
			eb->units_set += d;
			full_merge(eb, e_idx(e));
			return 0;
		}
		ret = store_runs(eb, e, tmp, n);
		if (ret)
			return ret;
		if (set)
			eb->units_set += d;
		else
			eb->units_set -= d;
		return 0;
	}
	region_normalize(eb, p);
	return 0;
}

/* Clear [a, b] of region r inside the full span at p: the span becomes up to
 * three entries. The count follows what is actually stored on ENOMEM. */
static int full_punch(struct ebitmap *eb, struct pos p, uint64_t r, uint32_t a, uint32_t b)
{
	struct entry *e = at(eb, p);
	uint64_t idx = e_idx(e), end = e_end(e);
	struct entry piece[3];
	uint64_t units[3];
	int np = 0, ret = 0;

	if (r > idx) {
		piece[np] = (struct entry){ .key = mkkey(idx, K_FULL), .u.nreg = r - idx };
		units[np++] = (r - idx) * REGION_UNITS;
	}
	if (a > 0 || b < REGION_LAST) {
		struct entry *m = &piece[np];

		m->key = mkkey(r, K_INLINE);
		if (a > 0 && b < REGION_LAST) {
			m->u.inl[0] = (struct run){ 0, (uint16_t)(a - 1) };
			m->u.inl[1] = (struct run){ (uint16_t)(b + 1), REGION_LAST };
		} else {
			m->u.inl[0] = a > 0 ? (struct run){ 0, (uint16_t)(a - 1) }
					    : (struct run){ (uint16_t)(b + 1), REGION_LAST };
			m->u.inl[1] = (struct run){ INLINE_NONE, INLINE_NONE };
		}
		units[np++] = REGION_UNITS - (b - a + 1);
	}
	if (end > r) {
		piece[np] = (struct entry){ .key = mkkey(r + 1, K_FULL), .u.nreg = end - r };
		units[np++] = (end - r) * REGION_UNITS;
	}
	eb->units_set -= (end - idx + 1) * REGION_UNITS;
	if (np == 0) {
		delete_at(eb, p, 1);
		return 0;
	}
	*e = piece[0];
	eb->units_set += units[0];
	eb->cur = p;
	for (int i = 1; i < np && !ret; i++) {
		struct pos q = { eb->cur.l, eb->cur.i + 1 };

		ret = insert_at(eb, q, &piece[i]);
		if (!ret)
			eb->units_set += units[i];
	}
	return ret;
}

/* Set or clear offsets [a, b] of region r. */
static int region_set_clear(struct ebitmap *eb, uint64_t r, uint32_t a, uint32_t b, int set)
{
	struct pos p;
	struct entry ne;
	int ret;

	if (find_covering(eb, r, &p)) {
		if (e_kind(at(eb, p)) != K_FULL)
			return region_modify(eb, p, a, b, set);
		return set ? 0 : full_punch(eb, p, r, a, b);
	}
	if (!set)
		return 0;
	if (a == 0 && b == REGION_LAST) {
		ne = (struct entry){ .key = mkkey(r, K_FULL), .u.nreg = 1 };
	} else {
		ne.key = mkkey(r, K_INLINE);
		ne.u.inl[0] = (struct run){ (uint16_t)a, (uint16_t)b };
		ne.u.inl[1] = (struct run){ INLINE_NONE, INLINE_NONE };
	}
	ret = insert_sorted(eb, &ne);
	if (ret)
		return ret;
	eb->units_set += b - a + 1;
	if (e_kind(&ne) == K_FULL)
		full_merge(eb, r);
	return 0;
}

/* Set whole regions [fr, lr]: everything there and any full span touching it
 * becomes one span. */
static int span_set(struct ebitmap *eb, uint64_t fr, uint64_t lr)
{
	uint64_t lo = fr, hi = lr, had = 0;
	struct pos s, q;
	size_t k = 0;
	int have;

	if (fr > 0 && find_le(eb, fr - 1, &s)) {
		const struct entry *e = at(eb, s);

		have = (e_kind(e) == K_FULL && e_end(e) >= fr - 1) || pos_next(eb, &s);
	} else {
		s = (struct pos){ 0, 0 };
		have = eb->nleaves > 0;
	}
	for (q = s; have; have = pos_next(eb, &q)) {
		const struct entry *e = at(eb, q);
		uint64_t idx = e_idx(e), end = e_end(e);

		if (idx > lr + 1 || (idx == lr + 1 && e_kind(e) != K_FULL))
			break;
		if (e_kind(e) == K_FULL) {
			uint64_t ol = idx > fr ? idx : fr, oh = end < lr ? end : lr;

			if (ol <= oh)
				had += (oh - ol + 1) * REGION_UNITS;
		} else {
			had += entry_count(e);
		}
		if (idx < lo)
			lo = idx;
		if (end > hi)
			hi = end;
		k++;
	}
	if (k == 0) {
		struct entry ne = { .key = mkkey(fr, K_FULL), .u.nreg = lr - fr + 1 };
		int ret = insert_sorted(eb, &ne);

		if (ret)
			return ret;
	} else {
		struct entry *e = at(eb, s);

		free_payload(eb, e);
		e->key = mkkey(lo, K_FULL);
		e->u.nreg = hi - lo + 1;
		q = s;
		if (k > 1 && pos_next(eb, &q))
			delete_at(eb, q, k - 1);
	}
	eb->units_set += (lr - fr + 1) * REGION_UNITS - had;
	return 0;
}

/* Clear whole regions [fr, lr], trimming spans that reach outside. */
static int span_clear(struct ebitmap *eb, uint64_t fr, uint64_t lr)
{
	struct pos s, q;
	size_t k = 0;
	int have;

	if (find_le(eb, fr, &s)) {
		struct entry *e = at(eb, s);
		uint64_t idx = e_idx(e), end = e_end(e);

		if (end >= fr && idx < fr) {
			/* A span from before fr: keep its head. */
			e->u.nreg = fr - idx;
			if (end > lr) {
				struct entry tail = { .key = mkkey(lr + 1, K_FULL), .u.nreg = end - lr };
				int ret;

				eb->units_set -= (end - fr + 1) * REGION_UNITS;
				eb->cur = s;
				ret = insert_at(eb, (struct pos){ s.l, s.i + 1 }, &tail);
				if (!ret)
					eb->units_set += (end - lr) * REGION_UNITS;
				return ret;
			}
			eb->units_set -= (end - fr + 1) * REGION_UNITS;
			have = pos_next(eb, &s);
		} else {
			have = end >= fr || pos_next(eb, &s);
		}
	} else {
		s = (struct pos){ 0, 0 };
		have = eb->nleaves > 0;
	}
	for (q = s; have; have = pos_next(eb, &q)) {
		struct entry *e = at(eb, q);
		uint64_t idx = e_idx(e), end = e_end(e);

		if (idx > lr)
			break;
		if (end > lr) {
			/* A span running past lr: keep its tail. */
			eb->units_set -= (lr - idx + 1) * REGION_UNITS;
			e->key = mkkey(lr + 1, K_FULL);
			e->u.nreg = end - lr;
			break;
		}
		eb->units_set -= entry_count(e);
		k++;
	}
	if (k)
		delete_at(eb, s, k);
	return 0;
}

/* ---- ranges --------------------------------------------------------------- */

/* Validate a byte range: 1 with its first and last unit, 0 if empty, -EINVAL. */
static int range_units(const struct ebitmap *eb, uint64_t start, uint64_t len, uint64_t *u0,
		       uint64_t *u1)
{
	uint64_t mask = (1ULL << eb->shift) - 1;

	if ((start | len) & mask)
		return -EINVAL;
	if (len == 0)
		return 0;
	if (len - 1 > UINT64_MAX - start)
		return -EINVAL;
	*u0 = start >> eb->shift;
	*u1 = (start + (len - 1)) >> eb->shift;
	return 1;
}

static int set_clear(struct ebitmap *eb, uint64_t start, uint64_t len, int set)
{
	uint64_t u0, u1, r0, r1, fr, lr;
	uint32_t a, b;
	int ret = range_units(eb, start, len, &u0, &u1);

	if (ret <= 0)
		return ret;
	r0 = u0 >> REGION_SHIFT;
	r1 = u1 >> REGION_SHIFT;
	a = (uint32_t)(u0 & REGION_LAST);
	b = (uint32_t)(u1 & REGION_LAST);
	if (r0 == r1)
		return region_set_clear(eb, r0, a, b, set);
	fr = r0;
	lr = r1;
	if (a != 0) {
		ret = region_set_clear(eb, r0, a, REGION_LAST, set);
		if (ret)
			return ret;
		fr++;
	}
	if (b != REGION_LAST)
		lr--;
	if (fr <= lr) {
		ret = set ? span_set(eb, fr, lr) : span_clear(eb, fr, lr);
		if (ret)
			return ret;
	}
	if (b != REGION_LAST)
		ret = region_set_clear(eb, r1, 0, b, set);
	return ret;
}

int ebitmap_set(struct ebitmap *eb, uint64_t start, uint64_t len)
{
	return set_clear(eb, start, len, 1);
}

int ebitmap_clear(struct ebitmap *eb, uint64_t start, uint64_t len)
{
	return set_clear(eb, start, len, 0);
}

static int combine(int have, int part)
{
	if (have < 0)
		return part;
	return have == part ? have : EBITMAP_PARTIAL;
}

static int test_region(struct ebitmap *eb, uint64_t r, uint32_t a, uint32_t b)
{
	struct pos p;

	if (!find_covering(eb, r, &p))
		return EBITMAP_NONE;
	return region_test(at(eb, p), a, b);
}

/* Whole regions [fr, lr]: all set only if full spans cover them. */
static int test_span(struct ebitmap *eb, uint64_t fr, uint64_t lr)
{
	struct pos p;
	const struct entry *e;
	int found = find_le(eb, fr, &p);

	if (found && e_end(at(eb, p)) >= fr) {
		for (e = at(eb, p); e_kind(e) == K_FULL; e = at(eb, p)) {
			uint64_t end = e_end(e);

			if (end >= lr)
				return EBITMAP_ALL;
			if (!pos_next(eb, &p) || e_idx(at(eb, p)) != end + 1)
				break;
		}
		return EBITMAP_PARTIAL;
	}
	if (found ? !pos_next(eb, &p) : eb->nleaves == 0)
		return EBITMAP_NONE;
	return e_idx(at(eb, p)) <= lr ? EBITMAP_PARTIAL : EBITMAP_NONE;
}

int ebitmap_test(struct ebitmap *eb, uint64_t start, uint64_t len)
{
	uint64_t u0, u1, r0, r1, fr, lr;
	uint32_t a, b;
	int res = -1;
	int ret = range_units(eb, start, len, &u0, &u1);

	if (ret <= 0)
		return ret < 0 ? ret : EBITMAP_NONE;
	r0 = u0 >> REGION_SHIFT;
	r1 = u1 >> REGION_SHIFT;
	a = (uint32_t)(u0 & REGION_LAST);
	b = (uint32_t)(u1 & REGION_LAST);
	if (r0 == r1)
		return test_region(eb, r0, a, b);
	fr = r0;
	lr = r1;
	if (a != 0) {
		res = test_region(eb, r0, a, REGION_LAST);
		if (res == EBITMAP_PARTIAL)
			return res;
		fr++;
	}
	if (b != REGION_LAST)
		lr--;
	if (fr <= lr) {
		res = combine(res, test_span(eb, fr, lr));
		if (res == EBITMAP_PARTIAL)
			return res;
	}
	if (b != REGION_LAST)
		res = combine(res, test_region(eb, r1, 0, b));
	return res;
}

int ebitmap_test_and_set(struct ebitmap *eb, uint64_t start, uint64_t len)
{
	int was = ebitmap_test(eb, start, len);
	int ret;

	if (was < 0 || was == EBITMAP_ALL)
		return was;
	ret = ebitmap_set(eb, start, len);
	return ret < 0 ? ret : was;
}

/* ---- iteration ------------------------------------------------------------ */

/* First set unit >= u: 1 and *s, or 0. */
static int next_set_unit(struct ebitmap *eb, uint64_t u, uint64_t *s)
{
	uint64_t r = u >> REGION_SHIFT;
	const struct entry *e;
	struct pos p;

	if (find_le(eb, r, &p)) {
		e = at(eb, p);
		if (e_end(e) >= r) {
			uint32_t off = region_next(e, (uint32_t)(u & REGION_LAST), 1);

			if (off < REGION_UNITS) {
				*s = (r << REGION_SHIFT) + off;
				return 1;
			}
		}
		if (!pos_next(eb, &p))
			return 0;
	} else if (eb->nleaves == 0) {
		return 0;
	}
	e = at(eb, p);
	*s = (e_idx(e) << REGION_SHIFT) + region_next(e, 0, 1);
	return 1;
}

/* Last unit of the set run holding unit s, across regions. */
static uint64_t set_run_last(struct ebitmap *eb, uint64_t s)
{
	struct pos p;
	const struct entry *e;
	uint64_t last;

	if (!find_covering(eb, s >> REGION_SHIFT, &p))
		return s;   /* not reached: s is set */
	for (e = at(eb, p);; e = at(eb, p)) {
		uint64_t r = s >> REGION_SHIFT;

		if (e_kind(e) == K_FULL) {
			last = e_end(e) << REGION_SHIFT | REGION_LAST;
		} else {
			uint32_t off = region_next(e, (uint32_t)(s & REGION_LAST), 0);

			if (off < REGION_UNITS)
				return (r << REGION_SHIFT) + off - 1;
			last = r << REGION_SHIFT | REGION_LAST;
		}
		if (!pos_next(eb, &p))
			return last;
		e = at(eb, p);
		if (e_idx(e) != (last >> REGION_SHIFT) + 1 || region_next(e, 0, 1) != 0)
			return last;
		s = e_idx(e) << REGION_SHIFT;
	}
}

/* Bytes of n units, 2^64 reported as 2^64 - unit. */
static uint64_t units_bytes(const struct ebitmap *eb, uint64_t n)
{
	if (n >= eb->total_units)
		n = eb->total_units - 1;
	return n << eb->shift;
}

int ebitmap_next_set(struct ebitmap *eb, uint64_t from, uint64_t *start, uint64_t *len)
{
	uint64_t s, last;

	if (from & ((1ULL << eb->shift) - 1))
		return -EINVAL;
	if (!next_set_unit(eb, from >> eb->shift, &s))
		return 0;
	last = set_run_last(eb, s);
	*start = s << eb->shift;
	*len = units_bytes(eb, last - s + 1);
	return 1;
}

int ebitmap_next_clear(struct ebitmap *eb, uint64_t from, uint64_t limit, uint64_t *start,
		       uint64_t *len)
{
	uint64_t mask = (1ULL << eb->shift) - 1;
	uint64_t x = from >> eb->shift, lim, s;
	struct pos p;

	if ((from | limit) & mask)
		return -EINVAL;
	lim = limit ? limit >> eb->shift : eb->total_units;
	for (;;) {
		uint64_t r = x >> REGION_SHIFT;
		const struct entry *e;
		uint32_t off;

		if (x >= lim)
			return 0;
		if (!find_covering(eb, r, &p))
			break;
		e = at(eb, p);
		if (e_kind(e) == K_FULL) {
			if (e_end(e) >= eb->last_region)
				return 0;
			x = (e_end(e) + 1) << REGION_SHIFT;
			continue;
		}
		off = region_next(e, (uint32_t)(x & REGION_LAST), 0);
		if (off < REGION_UNITS) {
			x = (r << REGION_SHIFT) + off;
			break;
		}
		if (r >= eb->last_region)
			return 0;
		x = (r + 1) << REGION_SHIFT;
	}
	if (x >= lim)
		return 0;
	if (!next_set_unit(eb, x, &s) || s > lim)
		s = lim;
	*start = x << eb->shift;
	*len = units_bytes(eb, s - x);
	return 1;
}

uint64_t ebitmap_count(const struct ebitmap *eb)
{
	if (eb->units_set >= eb->total_units)
		return UINT64_MAX;
	return eb->units_set << eb->shift;
}

/* ---- life cycle and statistics ------------------------------------------ */

struct ebitmap *ebitmap_create(uint64_t unit)
{
	struct ebitmap *eb;

	if (unit < 2 || (unit & (unit - 1))) {
		errno = EINVAL;
		return NULL;
	}
	eb = calloc(1, sizeof(*eb));
	if (!eb) {
		errno = ENOMEM;
		return NULL;
	}
	eb->shift = (unsigned)__builtin_ctzll(unit);
	eb->total_units = 1ULL << (64 - eb->shift);
	eb->last_region = (eb->total_units - 1) >> REGION_SHIFT;
	mem_add(eb, sizeof(*eb));
	return eb;
}

uint64_t ebitmap_unit(const struct ebitmap *eb)
{
	return 1ULL << eb->shift;
}

void ebitmap_clear_all(struct ebitmap *eb)
{
	for (size_t l = 0; l < eb->nleaves; l++) {
		struct leaf *lf = eb->leaves[l];

		for (uint32_t i = 0; i < lf->n; i++)
			free_payload(eb, &lf->e[i]);
		eb_free(eb, lf, leaf_bytes(lf->cap));
	}
	eb_free(eb, eb->leaves, eb->cap_leaves * sizeof(*eb->leaves));
	eb->leaves = NULL;
	eb->nleaves = eb->cap_leaves = 0;
	eb->cur = (struct pos){ 0, 0 };
	eb->units_set = 0;
}

void ebitmap_destroy(struct ebitmap *eb)
{
	if (!eb)
		return;
	ebitmap_clear_all(eb);
	free(eb);
}

/* Does the entry's first / last unit belong to a set run? */
static int entry_first_set(const struct entry *e) { return region_next(e, 0, 1) == 0; }

static int entry_last_set(const struct entry *e)
{
	struct run tmp[2];
	const struct run *r;
	uint32_t n;

	if (e_kind(e) == K_FULL)
		return 1;
	if (e_kind(e) == K_BITS)
		return (int)(e->u.bits->w[BITS_WORDS - 1] >> 63);
	r = e_runs(e, tmp, &n);
	return r[n - 1].last == REGION_LAST;
}

void ebitmap_stats(struct ebitmap *eb, struct ebitmap_stats *st)
{
	const struct entry *prev = NULL;

	memset(st, 0, sizeof(*st));
	st->unit = 1ULL << eb->shift;
	st->bytes_set = ebitmap_count(eb);
	st->memory_bytes = eb->mem;
	st->peak_memory_bytes = eb->peak;
	st->leaves = eb->nleaves;
	st->to_bits = eb->to_bits;
	st->to_runs = eb->to_runs;
	for (size_t l = 0; l < eb->nleaves; l++) {
		for (uint32_t i = 0; i < eb->leaves[l]->n; i++) {
			const struct entry *e = &eb->leaves[l]->e[i];

			switch (e_kind(e)) {
			case K_INLINE: st->regions_inline++; break;
			case K_RUNS: st->regions_runs++; break;
			case K_BITS: st->regions_bits++; break;
			case K_FULL:
				st->full_spans++;
				st->regions_full += e->u.nreg;
				break;
			}
			st->ranges += entry_runs(e);
			if (prev && e_end(prev) + 1 == e_idx(e) && entry_last_set(prev) &&
			    entry_first_set(e))
				st->ranges--;
			prev = e;
		}
	}
	if (st->ranges)
		st->bytes_per_range = (double)st->memory_bytes / (double)st->ranges;
}
