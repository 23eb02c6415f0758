/* report_problem(): the one policy for text and JSON output of problems. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "check/check.h"
#include "common/messages.h"

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
	fflush(stdout);
	printf("%s [%s]: %s\n", def->severity == SEV_ERROR ? "ERROR" : "warning", def->id, detail);
}
