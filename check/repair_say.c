// SPDX-License-Identifier: GPL-2.0-only
/* One line of what a repair class did (or would do, dry run): to stdout, or
 * into the JSON document's actions. Every repair class calls it, so it lives
 * below repair.c, which calls the classes. */
#include <stdarg.h>
#include <stdio.h>

#include "check/repair.h"

void repair_say(struct repair_ctx *r, const char *fmt, ...)
{
	char line[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (r->actions) {
		struct json_object *o = json_object_new_object();
		json_object_object_add(o, "class", json_object_new_string(r->class_name));
		json_object_object_add(o, "action", json_object_new_string(line));
		json_object_array_add(r->actions, o);
		return;
	}
	printf("repair %s: %s%s\n", r->class_name, r->opts->dry_run ? "would: " : "", line);
}
