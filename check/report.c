/* report_problem(): the one policy for text and JSON output of problems. */
#include <stdarg.h>
#include <stdio.h>

#include "check/check.h"
#include "common/messages.h"

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
		json_object_array_add(ctx->json_problems, o);
		return;
	}
	fflush(stdout);
	printf("%s [%s]: %s\n", def->severity == SEV_ERROR ? "ERROR" : "warning", def->id, detail);
}
