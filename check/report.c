// SPDX-License-Identifier: GPL-2.0-only
/* report_problem(): the one policy for text and JSON output of problems. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "check/check.h"
#include "common/messages.h"

/* What the phase running reported so far. */
struct report_pending {
	char *text;               /* text lines, in order */
	size_t len, cap;
	size_t json_mark;         /* ctx->json_problems entries before the phase */
	uint64_t counts[PR__COUNT];
};

static void pending_note(struct report_pending *p, enum problem_code code);
static void pending_text(struct report_pending *p, const char *sev, const char *id, const char *detail);
/* A problem shared by several snapshots: " [in N roots: a b c ...]" (the
 * first 8 named). */
static void append_roots(const struct check_ctx *ctx, char *detail, size_t size)
{
	size_t len = strlen(detail);

	len += (size_t)snprintf(detail + len, len < size ? size - len : 0, " [in %zu roots:", ctx->n_report_roots);
	for (size_t i = 0; i < ctx->n_report_roots && i < 8 && len < size; i++)
		len += (size_t)snprintf(detail + len, size - len, " %" PRIu64, ctx->report_roots[i]);
	if (len < size)
		snprintf(detail + len, size - len, "%s]", ctx->n_report_roots > 8 ? " ..." : "");
}

void report_problem(struct check_ctx *ctx, enum problem_code code, const char *fmt, ...)
{
	const struct problem_def *def = problem_lookup(code);
	char detail[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	if (!def)
		return;
	if (ctx->report_hook && ctx->report_hook(ctx->report_hook_arg, code, detail))
		return;
	if (ctx->n_report_roots > 1)
		append_roots(ctx, detail, sizeof(detail));
	ctx->counts[code]++;
	if (ctx->pending)
		pending_note(ctx->pending, code);
	if (def->severity == SEV_ERROR)
		ctx->errors++;
	else
		ctx->warnings++;
	/* every problem is counted (and noted for --repair); only the first
	 * REPORT_SHOW_MAX of each kind are shown, the summary says how many more */
	if (ctx->counts[code] > REPORT_SHOW_MAX)
		return;
	if (ctx->opts->format == CLI_FORMAT_JSON) {
		struct json_object *o = json_object_new_object();
		json_object_object_add(o, "code", json_object_new_int(code));
		json_object_object_add(o, "id", json_object_new_string(def->id));
		json_object_object_add(o, "severity",
				       json_object_new_string(def->severity == SEV_ERROR ? "error" : "warning"));
		json_object_object_add(o, "summary", json_object_new_string(def->summary));
		json_object_object_add(o, "detail", json_object_new_string(detail));
		if (ctx->n_report_roots > 1) {
			struct json_object *a = json_object_new_array();
			for (size_t i = 0; i < ctx->n_report_roots; i++)
				json_object_array_add(a, json_object_new_int64((int64_t)ctx->report_roots[i]));
			json_object_object_add(o, "roots", a);
		}
		json_object_array_add(ctx->json_problems, o);
		return;
	}
	if (ctx->pending) {
		pending_text(ctx->pending, def->severity == SEV_ERROR ? "ERROR" : "warning", def->id, detail);
		return;
	}
	fflush(stdout);
	printf("%s [%s]: %s\n", def->severity == SEV_ERROR ? "ERROR" : "warning", def->id, detail);
}

int report_phase_begin(struct check_ctx *ctx)
{
	struct report_pending *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	p->json_mark = ctx->json_problems ? json_object_array_length(ctx->json_problems) : 0;
	ctx->pending = p;
	return 0;
}

void report_phase_end(struct check_ctx *ctx, bool finished)
{
	struct report_pending *p = ctx->pending;

	if (!p)
		return;
	ctx->pending = NULL;
	if (finished) {
		if (p->len) {
			fflush(stdout);
			fwrite(p->text, 1, p->len, stdout);
		}
	} else {
		size_t n = ctx->json_problems ? json_object_array_length(ctx->json_problems) : 0;
		if (n > p->json_mark)
			json_object_array_del_idx(ctx->json_problems, p->json_mark, n - p->json_mark);
		for (unsigned c = 0; c < PR__COUNT; c++) {
			const struct problem_def *def = problem_lookup(c);
			if (!p->counts[c] || !def)
				continue;
			ctx->counts[c] -= p->counts[c];
			if (def->severity == SEV_ERROR)
				ctx->errors -= p->counts[c];
			else
				ctx->warnings -= p->counts[c];
		}
	}
	free(p->text);
	free(p);
}

/* Count a problem of the phase running (to take it back when cancelled). */
static void pending_note(struct report_pending *p, enum problem_code code)
{
	p->counts[code]++;
}

/* Hold a text line of the phase running; without memory, show it now. */
static void pending_text(struct report_pending *p, const char *sev, const char *id, const char *detail)
{
	int n = snprintf(NULL, 0, "%s [%s]: %s\n", sev, id, detail);

	if (n < 0)
		return;
	if (p->len + (size_t)n + 1 > p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 4096;
		char *t;
		while (cap < p->len + (size_t)n + 1)
			cap *= 2;
		if ((t = realloc(p->text, cap)) == NULL) {
			fflush(stdout);
			printf("%s [%s]: %s\n", sev, id, detail);
			return;
		}
		p->text = t;
		p->cap = cap;
	}
	snprintf(p->text + p->len, p->cap - p->len, "%s [%s]: %s\n", sev, id, detail);
	p->len += (size_t)n;
}
