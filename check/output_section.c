// SPDX-License-Identifier: GPL-2.0-only
/* A section of the run's one JSON document, added by a part of the check
 * (the repair's report): below output.c, which also lists the problems with
 * their repair classes and so calls into repair.c. */
#include "check/check.h"
#include "common/json_doc.h"

void check_output_section(struct check_ctx *ctx, const char *key, struct json_object *value)
{
	if (!ctx->json_doc)
		ctx->json_doc = json_doc_new();
	json_object_object_add(ctx->json_doc, key, value);
}
