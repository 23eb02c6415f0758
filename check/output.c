// SPDX-License-Identifier: GPL-2.0-only
/* What btk-check prints around the phases' findings: which filesystem it
 * checks (text: the first lines; JSON: the "filesystem" object), and the one
 * JSON document of the run, which the summaries of the check, the repair and
 * the check after it fill in before main() prints it; and --list-problems. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "check/check.h"
#include "check/repair.h"
#include "common/json_doc.h"
#include <btk/names.h>

static void fs_label(const struct fs_info *fs, char *out, size_t len)
{
	const uint8_t *label = super_label_ptr(fs_super(fs));
	size_t n = strnlen((const char *)label, BTRFS_LABEL_SIZE);

	if (n >= len)
		n = len - 1;
	memcpy(out, label, n);
	out[n] = '\0';
}

static struct json_object *filesystem_json(const struct fs_info *fs, char uuid[UUID_STR_BUF],
					   const char *label)
{
	struct json_object *o = json_object_new_object(), *devs = json_object_new_array();

	for (unsigned i = 0; i < fs_num_devices(fs); i++) {
		struct json_object *d = json_object_new_object();
		json_object_object_add(d, "devid", json_object_new_uint64(fs_device(fs, i)->devid));
		json_object_object_add(d, "path", fs_device(fs, i)->path ? json_object_new_string(fs_device(fs, i)->path) : NULL);
		json_object_object_add(d, "missing", json_object_new_boolean(!fs_device(fs, i)->path));
		json_object_array_add(devs, d);
	}
	json_object_object_add(o, "devices", devs);
	json_object_object_add(o, "fsid", json_object_new_string(uuid));
	json_object_object_add(o, "label", json_object_new_string(label));
	json_object_object_add(o, "generation", json_object_new_uint64(fs->generation));
	return o;
}

void check_output_begin(struct check_ctx *ctx)
{
	const struct fs_info *fs = ctx->fs;
	char uuid[UUID_STR_BUF], label[BTRFS_LABEL_SIZE + 1];

	uuid_to_str(fs->fsid, uuid);
	fs_label(fs, label, sizeof(label));
	if (ctx->opts->format == CLI_FORMAT_JSON) {
		if (!ctx->json_doc)
			ctx->json_doc = json_doc_new();
		json_object_object_add(ctx->json_doc, "filesystem", filesystem_json(fs, uuid, label));
		return;
	}
	printf("Checking filesystem on");
	for (unsigned i = 0; i < fs_num_devices(fs); i++)
		printf("%s %s", i ? "," : "", fs_device(fs, i)->path ? fs_device(fs, i)->path : "(missing)");
	printf("\nUUID: %s\n", uuid);
	if (label[0])
		printf("Label: %s\n", label);
}

void check_output_summary(struct check_ctx *ctx, struct json_object *summary)
{
	struct json_object *doc;

	if (!ctx->json_doc)
		ctx->json_doc = json_doc_new();
	doc = ctx->json_doc;
	if (json_object_object_get_ex(doc, "problems", NULL)) {
		/* the check after a repair */
		json_object_object_add(doc, "after_repair", summary);
		return;
	}
	json_object_object_foreach(summary, key, val)
		json_object_object_add(doc, key, json_object_get(val));
	json_object_put(summary);
}

void check_output_end(struct check_ctx *ctx, int status, const char *error)
{
	struct json_object *doc;

	if (ctx->opts->format != CLI_FORMAT_JSON)
		return;
	if (!ctx->json_doc)
		ctx->json_doc = json_doc_new();
	doc = ctx->json_doc;
	ctx->json_doc = NULL;
	if (error)
		json_object_object_add(doc, "error", json_object_new_string(error));
	json_object_object_add(doc, "cancelled", json_object_new_boolean(!!(status & FSCK_EXIT_CANCELLED)));
	json_object_object_add(doc, "exit_status", json_object_new_int(status));
	json_doc_print(doc);
}

void check_output_end_failed(struct check_ctx *ctx, int status, int err)
{
	if (ctx->opts->format == CLI_FORMAT_JSON) {
		if (!ctx->json_doc)
			ctx->json_doc = json_doc_new();
		json_object_object_add(ctx->json_doc, "error_kind",
				       json_object_new_string(btk_err_kind_name(btk_error_kind(err))));
	}
	check_output_end(ctx, status, btk_error_text(err));
}

/* The registry's space-separated classes as a JSON array. */
static struct json_object *classes_json(const char *list)
{
	struct json_object *arr = json_object_new_array();

	while (list && *list) {
		const char *end = strchr(list, ' ');
		size_t n = end ? (size_t)(end - list) : strlen(list);
		json_object_array_add(arr, json_object_new_string_len(list, (int)n));
		list += n + (end ? 1 : 0);
	}
	return arr;
}

/* --list-problems: the problem registry (check/problems.def), as text or one
 * JSON document (scripts/gen-problems-man makes the man page's PROBLEMS
 * section from it). */
int check_list_problems(enum cli_format format)
{
	unsigned n;
	const struct problem_def *t = problem_table(&n);
	struct json_object *doc = NULL, *arr = NULL;

	if (format == CLI_FORMAT_JSON) {
		doc = json_doc_new();
		arr = json_object_new_array();
		json_object_object_add(doc, "problems", arr);
	}
	for (unsigned i = 0; i < n; i++) {
		const char *sev = t[i].severity == SEV_ERROR ? "error" : "warning";
		bool preen = false;
		const char *klass = repair_class_of(t[i].code, &preen);
		if (!arr) {
			printf("%-26s %-7s %-28s%s %s\n", t[i].id, sev, t[i].classes ? t[i].classes : "-",
			       preen ? " (-p)" : "", t[i].summary);
			continue;
		}
		struct json_object *o = json_object_new_object();
		json_object_object_add(o, "code", json_object_new_int(t[i].code));
		json_object_object_add(o, "id", json_object_new_string(t[i].id));
		json_object_object_add(o, "severity", json_object_new_string(sev));
		json_object_object_add(o, "detector", t[i].detector ? json_object_new_string(t[i].detector) : NULL);
		json_object_object_add(o, "repair_class", klass ? json_object_new_string(klass) : NULL);
		json_object_object_add(o, "repair_classes", classes_json(t[i].classes));
		json_object_object_add(o, "preen", json_object_new_boolean(preen));
		json_object_object_add(o, "summary", json_object_new_string(t[i].summary));
		json_object_object_add(o, "man", t[i].man ? json_object_new_string(t[i].man) : NULL);
		json_object_array_add(arr, o);
	}
	json_doc_print(doc);
	return 0;
}
