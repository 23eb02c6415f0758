// SPDX-License-Identifier: GPL-2.0-only
/* Problems of tree blocks several trees reach, reported once (shared_reports.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/shared_reports.h"

static int add_root(struct shared_report *r, uint64_t root)
{
	for (size_t i = 0; i < r->nroots; i++)
		if (r->roots[i] == root)
			return 0;
	if (r->nroots == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 4;
		uint64_t *v = realloc(r->roots, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		r->roots = v;
		r->cap = cap;
	}
	r->roots[r->nroots++] = root;
	return 0;
}

int shared_reports_hold(struct shared_reports *s, enum problem_code code, uint64_t bytenr, uint64_t root,
			const char *fmt, ...)
{
	struct shared_report *r;
	char detail[512];
	va_list ap;

	for (size_t i = 0; i < s->n; i++)
		if (s->v[i].code == code && s->v[i].bytenr == bytenr)
			return add_root(&s->v[i], root);
	if (s->n == SHARED_REPORTS_MAX)
		return -E2BIG;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 8;
		struct shared_report *v = realloc(s->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	r = &s->v[s->n];
	*r = (struct shared_report){ .code = code, .bytenr = bytenr, .detail = strdup(detail) };
	if (!r->detail || add_root(r, root)) {
		free(r->detail);
		free(r->roots);
		return -ENOMEM;
	}
	s->n++;
	return 0;
}

static int u64_order(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

void shared_reports_flush(struct check_ctx *ctx, struct shared_reports *s)
{
	for (size_t i = 0; i < s->n; i++) {
		qsort(s->v[i].roots, s->v[i].nroots, sizeof(uint64_t), u64_order);
		ctx->report_roots = s->v[i].roots;
		ctx->n_report_roots = s->v[i].nroots;
		report_problem(ctx, s->v[i].code, "%s", s->v[i].detail);
	}
	ctx->report_roots = NULL;
	ctx->n_report_roots = 0;
	shared_reports_free(s);
}

void shared_reports_free(struct shared_reports *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->v[i].detail);
		free(s->v[i].roots);
	}
	free(s->v);
	*s = (struct shared_reports){ 0 };
}
