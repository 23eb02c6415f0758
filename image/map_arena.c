// SPDX-License-Identifier: GPL-2.0-only
/* The sanitizer maps' memory (see map_arena.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "image/map_arena.h"

#define REGION_MIN (16u << 20)
#define PAGE 4096u
#define CHECK_PAGES 1024u        /* pages touched between looks at the real resident size */

struct region {
	uint8_t *base;
	size_t len, used;
	bool file;               /* mapped from the file, else heap */
};

struct map_arena {
	int fd;                  /* the temporary file, -1: heap regions */
	uint64_t file_size;
	struct region *r;
	size_t nr, cap;
	size_t budget;
	size_t mapped;           /* bytes handed out, all regions */
	size_t touched;          /* pages touched since the last look */
	int statm;               /* /proc/self/statm, or -1: trim on touches alone */
	uint64_t base_shared;    /* file-backed resident pages before any region */
	unsigned long trims;
};

/* File-backed resident pages of the process (the regions, libraries). */
static uint64_t shared_pages(int fd)
{
	char buf[256];
	unsigned long long size, res, shared;
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);

	if (n <= 0)
		return 0;
	buf[n] = 0;
	return sscanf(buf, "%llu %llu %llu", &size, &res, &shared) == 3 ? shared : 0;
}

/* An unlinked file in tmpdir: O_TMPFILE, else mkstemp and unlink. */
static int open_tmp(const char *dir)
{
	char path[4096];
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

	if (fd >= 0)
		return fd;
	if ((size_t)snprintf(path, sizeof(path), "%s/btk-sanitize-XXXXXX", dir) >= sizeof(path))
		return -1;
	fd = mkostemp(path, O_CLOEXEC);
	if (fd >= 0)
		unlink(path);
	return fd;
}

struct map_arena *map_arena_new(size_t budget, const char *tmpdir)
{
	struct map_arena *a = calloc(1, sizeof(*a));
	const char *env = getenv("BTK_SANITIZE_MAP_BUDGET");

	if (!a)
		return NULL;
	if (env && *env)
		budget = (size_t)strtoull(env, NULL, 10);
	a->budget = budget;
	if (!tmpdir || !*tmpdir)
		tmpdir = getenv("TMPDIR");
	if (!tmpdir || !*tmpdir)
		tmpdir = "/tmp";
	a->fd = open_tmp(tmpdir);
	a->statm = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	if (a->statm >= 0)
		a->base_shared = shared_pages(a->statm);
	return a;
}

/* A new region of at least n bytes (file-backed when possible). */
static int add_region(struct map_arena *a, size_t n)
{
	size_t len = n > REGION_MIN ? (n + PAGE - 1) / PAGE * PAGE : REGION_MIN;
	struct region *v;
	void *p = NULL;
	bool file = false;

	if (a->nr == a->cap) {
		size_t cap = a->cap ? 2 * a->cap : 8;
		if (!(v = realloc(a->r, cap * sizeof(*v))))
			return -ENOMEM;
		a->r = v;
		a->cap = cap;
	}
	if (a->fd >= 0 && !ftruncate(a->fd, (off_t)(a->file_size + len))) {
		p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, a->fd, (off_t)a->file_size);
		if (p == MAP_FAILED) {
			p = NULL;
		} else {
			a->file_size += len;
			file = true;
			madvise(p, len, MADV_RANDOM); /* no fault-around: a touch maps one page */
		}
	}
	if (!p && !(p = calloc(1, len)))
		return -ENOMEM;
	a->r[a->nr++] = (struct region){ p, len, 0, file };
	return 0;
}

void *map_arena_alloc(struct map_arena *a, size_t n)
{
	struct region *r = a->nr ? &a->r[a->nr - 1] : NULL;
	void *p;

	n = (n + 15) & ~(size_t)15;
	if (!r || r->len - r->used < n) {
		if (add_region(a, n))
			return NULL;
		r = &a->r[a->nr - 1];
	}
	p = r->base + r->used;
	r->used += n;
	a->mapped += n;
	map_arena_touch(a, (n + PAGE - 1) / PAGE);
	return p;
}

/* Past the budget (every CHECK_PAGES touches the real figure is read;
 * without /proc, the touches count): drop every region from the process. */
void map_arena_touch(struct map_arena *a, size_t pages)
{
	uint64_t shared;

	if (a->fd < 0 || a->mapped <= a->budget)
		return;
	a->touched += pages;
	if (a->touched < (a->statm >= 0 && a->budget / PAGE > CHECK_PAGES ? CHECK_PAGES : a->budget / PAGE))
		return;
	a->touched = 0;
	if (a->statm >= 0) {
		shared = shared_pages(a->statm);
		if (shared <= a->base_shared || (shared - a->base_shared) * PAGE <= a->budget)
			return;
	}
	for (size_t i = 0; i < a->nr; i++)
		if (a->r[i].file)
			madvise(a->r[i].base, a->r[i].len, MADV_DONTNEED);
	a->trims++;
}

unsigned long map_arena_trims(const struct map_arena *a)
{
	return a->trims;
}

void map_arena_free(struct map_arena *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < a->nr; i++) {
		if (a->r[i].file)
			munmap(a->r[i].base, a->r[i].len);
		else
			free(a->r[i].base);
	}
	if (a->fd >= 0)
		close(a->fd);
	if (a->statm >= 0)
		close(a->statm);
	free(a->r);
	free(a);
}
