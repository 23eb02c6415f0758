// SPDX-License-Identifier: GPL-2.0-only
/* The table of qgroups the check builds: growing arrays, lookup by id and
 * the accounting of one extent to every group above its subvolumes. Shared
 * by phase_qgroups.c and qgroups_reach.c, so it lives below both. */
#include <errno.h>
#include <stdlib.h>

#include "check/qgroups.h"

void *qgroups_grow(void *arr, size_t n, size_t *cap, size_t elem)
{
	size_t c = *cap ? *cap * 2 : 16;
	void *p;

	if (n < *cap)
		return arr;
	if (!(p = realloc(arr, c * elem)))
		return NULL;
	*cap = c;
	return p;
}

struct qgroup *qgroup_find(struct qgroup_table *t, uint64_t id)
{
	size_t lo = 0, hi = t->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->g[mid].id == id)
			return &t->g[mid];
		if (t->g[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

int qgroups_push(uint32_t **a, size_t *n, size_t *cap, uint32_t v)
{
	uint32_t *p = qgroups_grow(*a, *n, cap, sizeof(*p));

	if (!p)
		return -ENOMEM;
	*a = p;
	p[(*n)++] = v;
	return 0;
}

int qgroup_account(struct qgroup_table *t, const uint64_t *roots, size_t k, uint64_t bytes)
{
	size_t ntouched = 0;

	if (!k)
		return 0;
	t->extent_seq++;
	for (size_t i = 0; i < k; i++) {
		struct qgroup *g0 = qgroup_find(t, roots[i]);
		size_t nstack = 0;

		if (!g0)
			continue; /* a subvolume without a qgroup still counts in k */
		t->root_seq++;
		if (qgroups_push(&t->stack, &nstack, &t->stack_cap, (uint32_t)(g0 - t->g)) < 0)
			return -ENOMEM;
		while (nstack) {
			struct qgroup *g = &t->g[t->stack[--nstack]];
			if (g->root_stamp == t->root_seq)
				continue; /* reached twice from this root (or a relation loop) */
			g->root_stamp = t->root_seq;
			if (g->extent_stamp != t->extent_seq) {
				g->extent_stamp = t->extent_seq;
				g->count = 0;
				if (qgroups_push(&t->touched, &ntouched, &t->touched_cap, (uint32_t)(g - t->g)) < 0)
					return -ENOMEM;
			}
			g->count++;
			for (size_t j = 0; j < g->nparents; j++)
				if (qgroups_push(&t->stack, &nstack, &t->stack_cap, g->parents[j]) < 0)
					return -ENOMEM;
		}
	}
	for (size_t i = 0; i < ntouched; i++) {
		struct qgroup *g = &t->g[t->touched[i]];
		g->rfer += bytes;
		if (g->count == k)
			g->excl += bytes;
	}
	return 0;
}
