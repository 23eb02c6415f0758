// SPDX-License-Identifier: LGPL-2.1-or-later
/* External sort of fixed-size records within a memory budget, and a
 * merge-join of two sorted streams (see recsort.h). */
#include <errno.h>
#include <fcntl.h>
#include <lz4.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <btk/recsort.h>
#include "libfs/fdio.h"

#define MAX_RECORD (64 * 1024)
#define MAX_JOBS 64
#define MIN_IO_BUF 4096           /* smallest read buffer of a merge */
#define MAX_FAN_IN 256            /* runs merged at once: buffers >= arena/256 */
#define PAR_MIN_RECORDS 4096      /* per thread, below that one thread sorts */

enum state { ADDING, READING_MEMORY, READING_MERGE, DONE };

struct run {
	uint64_t off;             /* byte offset in the spill file */
	uint64_t nrec;
	unsigned level;           /* times its records were merged on disk */
};

/* One input of a merge: buffered records and what is left in the file. */
struct source {
	const unsigned char *cur, *end;
	unsigned char *buf;
	size_t buf_recs;
	uint64_t off, left;
};

struct merge {
	struct source *src;
	unsigned *heap;           /* sources by current record, smallest first */
	size_t nsrc, nheap;
	int pending;              /* heap[0]'s record was handed out: advance it */
};

struct chunk {
	size_t first, n;          /* records of the arena sorted as one piece */
};

struct recsort {
	size_t size;
	recsort_cmp_fn cmp;
	void *arg;
	char *tmpdir;
	unsigned jobs;
	enum state state;
	int error;

	unsigned char *arena;     /* mmap'd on the first add */
	size_t arena_len, arena_hw, page;
	size_t min_buf;           /* bytes, a multiple of the record size */
	size_t nbuf, cap;         /* records collected in the arena */
	struct chunk chunks[MAX_JOBS];
	size_t nchunks;

	int fd;                   /* spill file, -1 until needed */
	uint64_t file_end;
	size_t frame_recs;        /* records per frame of a spilled run */
	unsigned char *zbuf;      /* one frame, compressed (header first) */
	size_t zcap;
	bool compress;
	struct run *runs;
	size_t nruns, cap_runs;

	struct merge m;           /* the final merge */
	size_t read_i;            /* READING_MEMORY position */

	uint64_t meta;            /* heap bytes besides the arena */
	struct recsort_stats st;
};

/* ---- memory accounting ------------------------------------------------------ */

static uint64_t heap_cost(size_t n)
{
	uint64_t c = ((uint64_t)n + 8 + 15) & ~(uint64_t)15;

	return c < 32 ? 32 : c;
}

static void mem_note(struct recsort *rs)
{
	uint64_t touched = (rs->arena_hw + rs->page - 1) / rs->page * rs->page;

	rs->st.memory = touched + rs->meta;
	if (rs->st.memory > rs->st.peak_memory)
		rs->st.peak_memory = rs->st.memory;
}

static void arena_touch(struct recsort *rs, size_t end)
{
	if (end > rs->arena_hw) {
		rs->arena_hw = end;
		mem_note(rs);
	}
}

static void *meta_alloc(struct recsort *rs, size_t n)
{
	void *p = malloc(n);

	if (p) {
		rs->meta += heap_cost(n);
		mem_note(rs);
	}
	return p;
}

static void meta_free(struct recsort *rs, void *p, size_t n)
{
	if (p) {
		free(p);
		rs->meta -= heap_cost(n);
		mem_note(rs);
	}
}

/* ---- in-place sort --------------------------------------------------------- */

struct sorter {
	size_t size;
	recsort_cmp_fn cmp;
	void *arg;
};

static inline void swap_words(unsigned char *a, unsigned char *b, size_t size)
{
	for (; size >= 8; size -= 8, a += 8, b += 8) {
		uint64_t t;

		memcpy(&t, a, 8);
		memcpy(a, b, 8);
		memcpy(b, &t, 8);
	}
}

/* Swap two records; the common sizes get a loop the compiler unrolls. */
static void rec_swap(unsigned char *a, unsigned char *b, size_t size)
{
	switch (size) {
	case 8: swap_words(a, b, 8); return;
	case 16: swap_words(a, b, 16); return;
	case 24: swap_words(a, b, 24); return;
	case 32: swap_words(a, b, 32); return;
	}
	for (; size >= 8; size -= 8, a += 8, b += 8) {
		uint64_t t;

		memcpy(&t, a, 8);
		memcpy(a, b, 8);
		memcpy(b, &t, 8);
	}
	for (; size; size--, a++, b++) {
		unsigned char t = *a;

		*a = *b;
		*b = t;
	}
}

static inline int rec_cmp(const struct sorter *s, const unsigned char *a, const unsigned char *b)
{
	return s->cmp(a, b, s->arg);
}

static void insertion_sort(const struct sorter *s, unsigned char *base, size_t n)
{
	size_t sz = s->size;

	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && rec_cmp(s, base + (j - 1) * sz, base + j * sz) > 0; j--)
			rec_swap(base + (j - 1) * sz, base + j * sz, sz);
}

static void sift_down_records(const struct sorter *s, unsigned char *base, size_t i, size_t n)
{
	size_t sz = s->size;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= n)
			return;
		if (c + 1 < n && rec_cmp(s, base + c * sz, base + (c + 1) * sz) < 0)
			c++;
		if (rec_cmp(s, base + i * sz, base + c * sz) >= 0)
			return;
		rec_swap(base + i * sz, base + c * sz, sz);
		i = c;
	}
}

static void heap_sort(const struct sorter *s, unsigned char *base, size_t n)
{
	for (size_t i = n / 2; i-- > 0;)
		sift_down_records(s, base, i, n);
	for (size_t end = n; end-- > 1;) {
		rec_swap(base, base + end * s->size, s->size);
		sift_down_records(s, base, 0, end);
	}
}

static unsigned char *median3(const struct sorter *s, unsigned char *a, unsigned char *b,
			      unsigned char *c)
{
	if (rec_cmp(s, a, b) < 0) {
		if (rec_cmp(s, b, c) < 0)
			return b;
		return rec_cmp(s, a, c) < 0 ? c : a;
	}
	if (rec_cmp(s, a, c) < 0)
		return a;
	return rec_cmp(s, b, c) < 0 ? c : b;
}

/* Quicksort (median of 3 or 9, Hoare partition: equal keys split evenly),
 * heapsort when the depth budget runs out, insertion sort for small pieces. */
static void intro_sort(const struct sorter *s, unsigned char *base, size_t n, unsigned depth)
{
	size_t sz = s->size;

	while (n > 16) {
		unsigned char *lo = base, *mid = base + n / 2 * sz, *hi = base + (n - 1) * sz;
		size_t i = 0, j = n;

		if (depth-- == 0) {
			heap_sort(s, base, n);
			return;
		}
		if (n > 128) {
			size_t d = n / 8 * sz;

			lo = median3(s, lo, lo + d, lo + 2 * d);
			mid = median3(s, mid - d, mid, mid + d);
			hi = median3(s, hi - 2 * d, hi - d, hi);
		}
		rec_swap(base, median3(s, lo, mid, hi), sz);
		for (;;) {
			do
				i++;
			while (i < n && rec_cmp(s, base + i * sz, base) < 0);
			do
				j--;
			while (rec_cmp(s, base + j * sz, base) > 0);
			if (i >= j)
				break;
			rec_swap(base + i * sz, base + j * sz, sz);
		}
		rec_swap(base, base + j * sz, sz);
		/* Recurse into the smaller side, loop on the larger. */
		if (j < n - j - 1) {
			intro_sort(s, base, j, depth);
			base += (j + 1) * sz;
			n -= j + 1;
		} else {
			intro_sort(s, base + (j + 1) * sz, n - j - 1, depth);
			n = j;
		}
	}
	insertion_sort(s, base, n);
}

static void sort_records(const struct sorter *s, unsigned char *base, size_t n)
{
	unsigned depth = 0;

	for (size_t m = n; m > 1; m >>= 1)
		depth += 2;
	intro_sort(s, base, n, depth);
}

struct sort_task {
	const struct sorter *s;
	unsigned char *base;
	size_t n;
};

static void *sort_thread(void *p)
{
	struct sort_task *t = p;

	sort_records(t->s, t->base, t->n);
	return NULL;
}

/* Sort the collected records as rs->nchunks pieces, one per thread. */
static void sort_buffer(struct recsort *rs)
{
	struct sorter s = { rs->size, rs->cmp, rs->arg };
	struct sort_task task[MAX_JOBS];
	pthread_t tid[MAX_JOBS];
	int started[MAX_JOBS] = { 0 };
	size_t k = rs->jobs;

	if (k > rs->nbuf / PAR_MIN_RECORDS)
		k = rs->nbuf / PAR_MIN_RECORDS;
	if (k < 1)
		k = 1;
	rs->nchunks = k;
	for (size_t i = 0; i < k; i++) {
		rs->chunks[i].first = rs->nbuf * i / k;
		rs->chunks[i].n = rs->nbuf * (i + 1) / k - rs->chunks[i].first;
		task[i] = (struct sort_task){ &s, rs->arena + rs->chunks[i].first * rs->size,
					      rs->chunks[i].n };
	}
	for (size_t i = 1; i < k; i++)
		started[i] = pthread_create(&tid[i], NULL, sort_thread, &task[i]) == 0;
	sort_thread(&task[0]);
	for (size_t i = 1; i < k; i++) {
		if (started[i])
			pthread_join(tid[i], NULL);
		else
			sort_thread(&task[i]);   /* no thread: do it here */
	}
}

/* ---- spill file ------------------------------------------------------------------ */

static int write_full(int fd, const void *buf, size_t len, uint64_t off)
{
	return fd_write_full(fd, buf, len, off);
}

static int read_full(int fd, void *buf, size_t len, uint64_t off)
{
	int ret = fd_read_full(fd, buf, len, off);

	return ret == -ENODATA ? -EIO : ret; /* the file lost data we wrote */
}

/* The spill file: created and unlinked at once, so only the fd knows it. */
static int spill_open(struct recsort *rs)
{
	size_t n = strlen(rs->tmpdir) + sizeof("/btk-recsort-XXXXXX");
	char *path;

	if (rs->fd >= 0)
		return 0;
	path = malloc(n);
	if (!path)
		return -ENOMEM;
	snprintf(path, n, "%s/btk-recsort-XXXXXX", rs->tmpdir);
	rs->fd = mkostemp(path, O_CLOEXEC);
	if (rs->fd < 0) {
		int err = -errno;

		free(path);
		return err;
	}
	unlink(path);
	free(path);
	return 0;
}

/* Give back disk space that has been read and will not be read again. */
static void spill_release(struct recsort *rs, uint64_t off, uint64_t len)
{
#ifdef FALLOC_FL_PUNCH_HOLE
	if (len)
		(void)fallocate(rs->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
				(off_t)len);
#else
	(void)rs;
	(void)off;
	(void)len;
#endif
}

static int runs_append(struct recsort *rs, struct run r)
{
	if (rs->nruns == rs->cap_runs) {
		size_t cap = rs->cap_runs ? rs->cap_runs * 2 : 16;
		struct run *nr = meta_alloc(rs, cap * sizeof(*nr));

		if (!nr)
			return -ENOMEM;
		if (rs->nruns)
			memcpy(nr, rs->runs, rs->nruns * sizeof(*nr));
		meta_free(rs, rs->runs, rs->cap_runs * sizeof(*nr));
		rs->runs = nr;
		rs->cap_runs = cap;
	}
	rs->runs[rs->nruns++] = r;
	return 0;
}

/* A run on disk is a sequence of frames of at most frame_recs records: this
 * header, then the records lz4-compressed (comp bytes) or as they are
 * (comp 0, when lz4 does not make them shorter). */
struct frame_hdr {
	uint32_t raw, comp;
};

/* Append records to the end of the spill file, as frames. */
static int spill_write(struct recsort *rs, const unsigned char *recs, size_t n)
{
	int ret = spill_open(rs);

	if (!ret && !rs->zbuf) {
		rs->zcap = sizeof(struct frame_hdr) + (size_t)LZ4_compressBound((int)(rs->frame_recs * rs->size));
		if (!(rs->zbuf = meta_alloc(rs, rs->zcap)))
			return -ENOMEM;
	}
	for (size_t i = 0; i < n && !ret;) {
		size_t k = n - i < rs->frame_recs ? n - i : rs->frame_recs;
		const unsigned char *src = recs + i * rs->size;
		struct frame_hdr h = { .raw = (uint32_t)(k * rs->size) };
		int c = rs->compress ? LZ4_compress_default((const char *)src, (char *)rs->zbuf + sizeof(h),
							    (int)h.raw, (int)(rs->zcap - sizeof(h))) : 0;

		if (c > 0 && (uint32_t)c < h.raw)
			h.comp = (uint32_t)c;
		else
			memcpy(rs->zbuf + sizeof(h), src, h.raw);
		memcpy(rs->zbuf, &h, sizeof(h));
		c = (int)(sizeof(h) + (h.comp ? h.comp : h.raw));
		ret = write_full(rs->fd, rs->zbuf, (size_t)c, rs->file_end);
		rs->file_end += (uint64_t)c;
		rs->st.spilled_bytes += (uint64_t)c;
		i += k;
	}
	return ret;
}

/* Append records to the spill file as one run. */
static int spill_run(struct recsort *rs, const unsigned char *recs, size_t n, uint64_t *off)
{
	*off = rs->file_end;
	return spill_write(rs, recs, n);
}

/* ---- k-way merge --------------------------------------------------------------- */

static int src_less(const struct recsort *rs, const struct merge *m, unsigned a, unsigned b)
{
	int c = rs->cmp(m->src[a].cur, m->src[b].cur, rs->arg);

	return c < 0 || (c == 0 && a < b);   /* ties: earlier source first */
}

static void heap_sift(const struct recsort *rs, struct merge *m, size_t i)
{
	for (;;) {
		size_t c = 2 * i + 1;
		unsigned t;

		if (c >= m->nheap)
			return;
		if (c + 1 < m->nheap && src_less(rs, m, m->heap[c + 1], m->heap[c]))
			c++;
		if (!src_less(rs, m, m->heap[c], m->heap[i]))
			return;
		t = m->heap[i];
		m->heap[i] = m->heap[c];
		m->heap[c] = t;
		i = c;
	}
}

/* Refill a file source's buffer with as many whole frames as it holds (at
 * least one: buffers are never shorter than a frame); an exhausted source
 * ends with cur == end. */
static int src_fill(struct recsort *rs, struct source *s)
{
	unsigned char *dst = s->buf;
	size_t frame = rs->frame_recs * rs->size;

	s->cur = s->end = s->buf;
	while (s->left && (size_t)(s->buf + s->buf_recs * rs->size - dst) >= frame) {
		struct frame_hdr h;
		int ret = read_full(rs->fd, &h, sizeof(h), s->off);

		if (ret)
			return ret;
		/* the file is ours, but a bad frame must not overrun the buffer */
		if (!h.raw || h.raw % rs->size || h.raw > frame || h.raw / rs->size > s->left ||
		    (h.comp && h.comp > rs->zcap - sizeof(h)))
			return -EIO;
		if (h.comp) {
			ret = read_full(rs->fd, rs->zbuf, h.comp, s->off + sizeof(h));
			if (!ret && LZ4_decompress_safe((const char *)rs->zbuf, (char *)dst, (int)h.comp,
							(int)h.raw) != (int)h.raw)
				ret = -EIO;
		} else {
			ret = read_full(rs->fd, dst, h.raw, s->off + sizeof(h));
		}
		if (ret)
			return ret;
		spill_release(rs, s->off, sizeof(h) + (h.comp ? h.comp : h.raw));
		s->off += sizeof(h) + (h.comp ? h.comp : h.raw);
		s->left -= h.raw / rs->size;
		dst += h.raw;
	}
	s->end = dst;
	return 0;
}

static void merge_free(struct recsort *rs, struct merge *m)
{
	meta_free(rs, m->src, m->nsrc * sizeof(*m->src));
	meta_free(rs, m->heap, m->nsrc * sizeof(*m->heap));
	memset(m, 0, sizeof(*m));
}

static int merge_alloc(struct recsort *rs, struct merge *m, size_t nsrc)
{
	memset(m, 0, sizeof(*m));
	m->src = meta_alloc(rs, nsrc * sizeof(*m->src));
	m->heap = meta_alloc(rs, nsrc * sizeof(*m->heap));
	m->nsrc = nsrc;
	if (!m->src || !m->heap) {
		merge_free(rs, m);
		return -ENOMEM;
	}
	memset(m->src, 0, nsrc * sizeof(*m->src));
	return 0;
}

/* Fill every file source and build the heap. */
static int merge_start(struct recsort *rs, struct merge *m)
{
	for (size_t i = 0; i < m->nsrc; i++) {
		struct source *s = &m->src[i];

		if (s->buf) {
			int ret = src_fill(rs, s);

			if (ret)
				return ret;
		}
		if (s->cur < s->end)
			m->heap[m->nheap++] = (unsigned)i;
	}
	for (size_t i = m->nheap / 2; i-- > 0;)
		heap_sift(rs, m, i);
	m->pending = 0;
	return 0;
}

/* The smallest record left: 1, 0 at the end, -errno. */
static int merge_pop(struct recsort *rs, struct merge *m, const void **rec)
{
	if (m->pending) {
		struct source *s = &m->src[m->heap[0]];

		m->pending = 0;
		s->cur += rs->size;
		if (s->cur == s->end && s->buf) {
			int ret = src_fill(rs, s);

			if (ret)
				return ret;
		}
		if (s->cur == s->end)
			m->heap[0] = m->heap[--m->nheap];
		heap_sift(rs, m, 0);
	}
	if (!m->nheap)
		return 0;
	*rec = m->src[m->heap[0]].cur;
	m->pending = 1;
	return 1;
}

static size_t align16(size_t x) { return (x + 15) & ~(size_t)15; }

/* Give k file sources equal buffers out of [mem, mem + len). */
static void carve_buffers(struct recsort *rs, struct source *src, size_t k, unsigned char *mem,
			  size_t len)
{
	size_t slot = len / k;
	size_t recs = slot > 16 ? (slot - 16) / rs->size : 0;

	if (recs == 0)
		recs = 1;   /* not reached: budgets are checked */
	for (size_t i = 0; i < k; i++) {
		unsigned char *b = (unsigned char *)align16((size_t)(mem + i * slot));

		src[i].buf = b;
		src[i].buf_recs = recs;
	}
	arena_touch(rs, (size_t)(mem - rs->arena) + len);
}

/* Merge the runs listed in which[0..k) into one new run on disk, using
 * [mem, mem + len) for k input buffers and one output buffer. */
static int merge_runs(struct recsort *rs, const size_t *which, size_t k, unsigned char *mem,
		      size_t len)
{
	struct merge m;
	struct run out = { .off = rs->file_end };
	size_t slot = len / (k + 1), out_recs, nout = 0;
	unsigned char *obuf;
	const void *rec;
	int ret;

	ret = merge_alloc(rs, &m, k);
	if (ret)
		return ret;
	carve_buffers(rs, m.src, k, mem, slot * k);
	obuf = (unsigned char *)align16((size_t)(mem + slot * k));
	out_recs = (size_t)(mem + len - obuf) / rs->size;
	arena_touch(rs, (size_t)(mem - rs->arena) + len);
	for (size_t i = 0; i < k; i++) {
		const struct run *r = &rs->runs[which[i]];

		m.src[i].off = r->off;
		m.src[i].left = r->nrec;
		out.nrec += r->nrec;
		if (r->level >= out.level)
			out.level = r->level + 1;
	}
	ret = merge_start(rs, &m);
	while (!ret) {
		ret = merge_pop(rs, &m, &rec);
		if (ret <= 0)
			break;
		memcpy(obuf + nout * rs->size, rec, rs->size);
		ret = 0;
		if (++nout == out_recs) {
			ret = spill_write(rs, obuf, nout);
			nout = 0;
		}
	}
	if (!ret && nout)
		ret = spill_write(rs, obuf, nout);
	merge_free(rs, &m);
	if (ret)
		return ret;
	/* Drop the inputs (which[] is ascending), append the result. */
	for (size_t i = k; i-- > 0;) {
		memmove(rs->runs + which[i], rs->runs + which[i] + 1,
			(rs->nruns - which[i] - 1) * sizeof(*rs->runs));
		rs->nruns--;
	}
	rs->st.merges++;
	return runs_append(rs, out);
}

/* Runs a merge with len bytes of buffers can take at once (k inputs + output). */
static size_t fan_in(const struct recsort *rs, size_t len)
{
	size_t k = len / rs->min_buf;

	k = k > 1 ? k - 1 : 1;
	return k > MAX_FAN_IN ? MAX_FAN_IN : k;
}

/* While collecting: as soon as fan-in runs share a level, merge them, so
 * there are never more than (fan-in - 1) runs per level. */
static int compact_levels(struct recsort *rs)
{
	size_t f = fan_in(rs, rs->arena_len);
	size_t which[MAX_FAN_IN];

	for (unsigned level = 0;; level++) {
		size_t k = 0, any = 0;

		for (size_t i = 0; i < rs->nruns; i++) {
			if (rs->runs[i].level >= level)
				any = 1;
			if (rs->runs[i].level == level && k < f)
				which[k++] = i;
		}
		if (!any)
			return 0;
		if (k == f) {
			int ret = merge_runs(rs, which, k, rs->arena, rs->arena_len);

			if (ret)
				return ret;
			level--;   /* this level may hold more */
		}
	}
}

static int cmp_run_size(const void *a, const void *b)
{
	const struct run *x = a, *y = b;

	return x->nrec < y->nrec ? -1 : x->nrec > y->nrec;
}

/* Merge the smallest runs until at most max remain. */
static int reduce_runs(struct recsort *rs, size_t max, unsigned char *mem, size_t len)
{
	size_t f = fan_in(rs, len);
	size_t which[MAX_FAN_IN];

	while (rs->nruns > max) {
		size_t k = rs->nruns - max + 1;
		int ret;

		if (k > f)
			k = f;
		qsort(rs->runs, rs->nruns, sizeof(*rs->runs), cmp_run_size);
		for (size_t i = 0; i < k; i++)
			which[i] = i;
		ret = merge_runs(rs, which, k, mem, len);
		if (ret)
			return ret;
	}
	return 0;
}

/* Write the sorted chunks of the arena out as runs; the arena is empty after. */
static int spill_chunks(struct recsort *rs)
{
	int ret = 0;

	for (size_t i = 0; i < rs->nchunks && !ret; i++) {
		struct run r = { .nrec = rs->chunks[i].n };

		ret = spill_run(rs, rs->arena + rs->chunks[i].first * rs->size, r.nrec, &r.off);
		if (!ret)
			ret = runs_append(rs, r);
		if (!ret)
			rs->st.runs++;
	}
	rs->nbuf = 0;
	rs->nchunks = 0;
	return ret;
}

/* The arena is full: sort it, write it out, merge runs if a level is full. */
static int spill_buffer(struct recsort *rs)
{
	int ret;

	sort_buffer(rs);
	ret = spill_chunks(rs);
	return ret ? ret : compact_levels(rs);
}

/* ---- public API ---------------------------------------------------------------- */

struct recsort *recsort_create(size_t record_size, recsort_cmp_fn cmp, void *arg,
			       size_t memory_budget, const struct recsort_options *opts)
{
	static const struct recsort_options defaults;
	const char *tmpdir;
	struct recsort *rs;
	size_t arena, min_buf;
	long page = sysconf(_SC_PAGESIZE);

	if (!record_size || record_size > MAX_RECORD || !cmp || memory_budget < RECSORT_MIN_BUDGET) {
		errno = EINVAL;
		return NULL;
	}
	/* The arena; the rest (1/16 + 4 KiB) is for the run table and merge state. */
	arena = (memory_budget - memory_budget / 16 - 4096) & ~(size_t)15;
	min_buf = arena / MAX_FAN_IN > MIN_IO_BUF ? arena / MAX_FAN_IN : MIN_IO_BUF;
	min_buf = (min_buf + record_size - 1) / record_size * record_size;
	if (arena < 3 * (min_buf + 16)) {
		errno = EINVAL;
		return NULL;
	}
	if (!opts)
		opts = &defaults;
	tmpdir = opts->tmpdir;
	if (!tmpdir || !*tmpdir)
		tmpdir = getenv("TMPDIR");
	if (!tmpdir || !*tmpdir)
		tmpdir = "/tmp";
	rs = calloc(1, sizeof(*rs));
	if (!rs || !(rs->tmpdir = strdup(tmpdir))) {
		free(rs);
		errno = ENOMEM;
		return NULL;
	}
	rs->size = record_size;
	rs->cmp = cmp;
	rs->arg = arg;
	rs->jobs = 1;
	rs->fd = -1;
	rs->page = page > 0 ? (size_t)page : 4096;
	rs->arena_len = arena;
	rs->min_buf = min_buf;
	/* half the smallest buffer, which a merge buffer (less alignment) always exceeds */
	rs->frame_recs = min_buf / 2 / record_size ? min_buf / 2 / record_size : 1;
	rs->compress = !opts->raw;
	rs->cap = arena / record_size;
	if (opts->run_records && opts->run_records < rs->cap)
		rs->cap = opts->run_records;
	rs->st.budget = memory_budget;
	rs->meta = heap_cost(sizeof(*rs)) + heap_cost(strlen(rs->tmpdir) + 1);
	mem_note(rs);
	return rs;
}

int recsort_set_jobs(struct recsort *rs, unsigned jobs)
{
	if (rs->state != ADDING || rs->st.records || jobs < 1 || jobs > MAX_JOBS)
		return -EINVAL;
	rs->jobs = jobs;
	return 0;
}

size_t recsort_record_size(const struct recsort *rs)
{
	return rs->size;
}

int recsort_add(struct recsort *rs, const void *record)
{
	if (rs->error)
		return rs->error;
	if (rs->state != ADDING)
		return -EINVAL;
	if (!rs->arena) {
		void *p = mmap(NULL, rs->arena_len, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

		if (p == MAP_FAILED)
			return -ENOMEM;
		rs->arena = p;
	}
	if (rs->nbuf == rs->cap) {
		int ret = spill_buffer(rs);

		if (ret)
			return rs->error = ret;
	}
	memcpy(rs->arena + rs->nbuf * rs->size, record, rs->size);
	rs->nbuf++;
	rs->st.records++;
	arena_touch(rs, rs->nbuf * rs->size);
	return 0;
}

/* Set up the final merge: the file runs through buffers after the tail, and
 * the tail's sorted chunks read in place. */
static int finish_merge(struct recsort *rs, size_t tail_bytes)
{
	size_t nfile = rs->nruns, nsrc = nfile + (tail_bytes ? rs->nchunks : 0);
	unsigned char *mem = rs->arena + align16(tail_bytes);
	int ret = merge_alloc(rs, &rs->m, nsrc);

	if (ret)
		return ret;
	if (nfile)
		carve_buffers(rs, rs->m.src, nfile, mem, rs->arena_len - align16(tail_bytes));
	for (size_t i = 0; i < nfile; i++) {
		rs->m.src[i].off = rs->runs[i].off;
		rs->m.src[i].left = rs->runs[i].nrec;
	}
	for (size_t i = nfile; i < nsrc; i++) {
		const struct chunk *c = &rs->chunks[i - nfile];
		struct source *s = &rs->m.src[i];

		s->cur = rs->arena + c->first * rs->size;
		s->end = s->cur + c->n * rs->size;
	}
	rs->state = READING_MERGE;
	return merge_start(rs, &rs->m);
}

int recsort_finish(struct recsort *rs)
{
	size_t tail, avail;
	int ret = 0;

	if (rs->error)
		return rs->error;
	if (rs->state != ADDING)
		return -EINVAL;
	if (rs->nbuf == 0 && rs->nruns == 0) {
		rs->state = DONE;   /* no records at all */
		return 0;
	}
	sort_buffer(rs);
	if (rs->nruns == 0) {
		if (rs->nchunks <= 1) {
			rs->state = READING_MEMORY;
			rs->read_i = 0;
			return 0;
		}
		ret = finish_merge(rs, rs->nbuf * rs->size);
		return ret ? (rs->error = ret) : 0;
	}
	/* Keep the tail in memory if it leaves room for the runs' buffers. */
	tail = rs->nbuf * rs->size;
	avail = rs->arena_len - align16(tail);
	if (tail > rs->arena_len / 2 || rs->nruns > avail / rs->min_buf) {
		ret = spill_chunks(rs);
		tail = 0;
		avail = rs->arena_len;
	}
	if (!ret)
		ret = reduce_runs(rs, avail / rs->min_buf, rs->arena + align16(tail), avail);
	if (!ret)
		ret = finish_merge(rs, tail);
	return ret ? (rs->error = ret) : 0;
}

int recsort_next(struct recsort *rs, const void **record)
{
	int ret;

	if (rs->error)
		return rs->error;
	switch (rs->state) {
	case READING_MEMORY:
		if (rs->read_i == rs->nbuf) {
			rs->state = DONE;
			return 0;
		}
		*record = rs->arena + rs->read_i++ * rs->size;
		return 1;
	case READING_MERGE:
		ret = merge_pop(rs, &rs->m, record);
		if (ret < 0)
			return rs->error = ret;
		if (ret == 0)
			rs->state = DONE;
		return ret;
	case DONE:
		return 0;
	default:
		return -EINVAL;
	}
}

void recsort_get_stats(const struct recsort *rs, struct recsort_stats *out)
{
	*out = rs->st;
}

void recsort_destroy(struct recsort *rs)
{
	if (!rs)
		return;
	merge_free(rs, &rs->m);
	meta_free(rs, rs->zbuf, rs->zcap);
	if (rs->arena)
		munmap(rs->arena, rs->arena_len);
	if (rs->fd >= 0)
		close(rs->fd);
	free(rs->runs);
	free(rs->tmpdir);
	free(rs);
}

/* ---- merge-join ----------------------------------------------------------------- */

struct group_buf {
	unsigned char *p;
	size_t n, cap, size;
};

static int group_push(struct group_buf *g, const void *rec, size_t *peak)
{
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 16;
		unsigned char *np = realloc(g->p, cap * g->size);

		if (!np)
			return -ENOMEM;
		g->p = np;
		g->cap = cap;
		if (cap * g->size > *peak)
			*peak = cap * g->size;
	}
	memcpy(g->p + g->n * g->size, rec, g->size);
	g->n++;
	return 0;
}

/* The next record of one side of the join (right: the sorter or the stream). */
static int side_next(struct recjoin *j, int right, const void **cur)
{
	if (!right)
		return recsort_next(j->left, cur);
	return j->right ? recsort_next(j->right, cur) : j->right_next(j->right_arg, cur);
}

/* Add to g the records of one side that eq says equal the first record of
 * key (g itself or the other side's group), after the one already pushed.
 * On return *have and *cur describe the first record after the group. */
static int group_collect(struct recjoin *j, int right, struct group_buf *g, int *have,
			 const void **cur, int (*eq)(const void *, const void *, void *),
			 const struct group_buf *key, int key_first)
{
	int ret;

	for (;;) {
		ret = side_next(j, right, cur);
		if (ret < 0)
			return ret;
		*have = ret;
		if (!ret || !eq)
			return 0;
		/* key->p is re-read: pushing to g may move it. */
		if ((key_first ? eq(key->p, *cur, j->arg) : eq(*cur, key->p, j->arg)) != 0)
			return 0;
		ret = group_push(g, *cur, &j->peak_group_bytes);
		if (ret)
			return ret;
	}
}

int recjoin_run(struct recjoin *j)
{
	struct group_buf lg = { .size = 0 }, rg = { .size = 0 };
	const void *l = NULL, *r = NULL;
	int hl, hr, ret = 0;

	if (!j || !j->left || (!j->right && (!j->right_next || !j->right_size)) || !j->cmp || !j->group)
		return -EINVAL;
	memset(j->groups, 0, sizeof(j->groups));
	j->peak_group_bytes = 0;
	lg.size = j->left->size;
	rg.size = j->right ? j->right->size : j->right_size;
	hl = side_next(j, 0, &l);
	hr = side_next(j, 1, &r);
	if (hl < 0 || hr < 0)
		return hl < 0 ? hl : hr;
	while (hl || hr) {
		struct recjoin_group g;
		int c = !hl ? 1 : !hr ? -1 : j->cmp(l, r, j->arg);

		lg.n = rg.n = 0;
		if (c < 0) {
			ret = group_push(&lg, l, &j->peak_group_bytes);
			if (!ret)
				ret = group_collect(j, 0, &lg, &hl, &l, j->cmp_left, &lg, 1);
			g.kind = RECJOIN_LEFT_ONLY;
		} else if (c > 0) {
			ret = group_push(&rg, r, &j->peak_group_bytes);
			if (!ret)
				ret = group_collect(j, 1, &rg, &hr, &r, j->cmp_right, &rg, 1);
			g.kind = RECJOIN_RIGHT_ONLY;
		} else {
			ret = group_push(&lg, l, &j->peak_group_bytes);
			if (!ret)
				ret = group_push(&rg, r, &j->peak_group_bytes);
			/* Left records equal to the right key, right ones equal to the left key. */
			if (!ret)
				ret = group_collect(j, 0, &lg, &hl, &l, j->cmp, &rg, 0);
			if (!ret)
				ret = group_collect(j, 1, &rg, &hr, &r, j->cmp, &lg, 1);
			g.kind = RECJOIN_BOTH;
		}
		if (ret)
			break;
		g.left = lg.p;
		g.nleft = lg.n;
		g.right = rg.p;
		g.nright = rg.n;
		j->groups[g.kind]++;
		ret = j->group(&g, j->arg);
		if (ret)
			break;
	}
	free(lg.p);
	free(rg.p);
	return ret;
}
