// SPDX-License-Identifier: GPL-2.0-only
/* btk-inspect super: every superblock field of each device given. */
#include <argp.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli.h"
#include "common/json_doc.h"
#include "common/messages.h"
#include "inspect/inspect.h"
#include "inspect/item_json.h"
#include "inspect/super_json.h"
#include <btk/target.h>
#include <btk/super.h>

struct super_args {
	bool all_copies;
	int mirror;
	enum cli_format format;
	char **paths;
	unsigned npaths;
	struct json_object *devices; /* --format json: the document's "devices" */
};

static const struct argp_option super_options[] = {
	{ "all-copies", 'a', NULL, 0, "Show every superblock copy, valid or not", 0 },
	{ "super", 's', "N", 0, "Show copy N (0, 1 or 2) instead of the newest valid one", 0 },
	{ "format", 'f', "FORMAT", 0, "Output format: text (default) or json", 0 },
	{ 0 }
};

static error_t super_parse(int key, char *arg, struct argp_state *state)
{
	struct super_args *a = state->input;

	switch (key) {
	case 'a': a->all_copies = true; break;
	case 's':
		if (strlen(arg) != 1 || arg[0] < '0' || arg[0] > '2')
			argp_error(state, "--super takes 0, 1 or 2");
		a->mirror = arg[0] - '0';
		break;
	case 'f': cli_argp_format(state, arg, CLI_FORMAT_MASK(CLI_FORMAT_TEXT) | CLI_FORMAT_MASK(CLI_FORMAT_JSON), &a->format); break;
	default: return cli_argp_devices(key, state, &a->paths, &a->npaths);
	}
	return 0;
}

/* JSON: the device's entry in the one document ("superblock", or with
 * --all-copies "copies"); text: the fields under a heading. */
static void emit(const struct super_args *a, const char *path, struct json_object *o, const char *heading)
{
	if (a->format == CLI_FORMAT_JSON) {
		struct json_object *d = json_object_new_object();
		json_object_object_add(d, "path", json_object_new_string(path));
		json_object_object_add(d, a->all_copies ? "copies" : "superblock", json_object_get(o));
		json_object_array_add(a->devices, d);
		return;
	}
	if (heading)
		printf("%s\n", heading);
	item_fields_text(stdout, o, 0);
}

/* One device: the chosen copy, or all copies with their validity. */
static int show_device(const struct super_args *a, const char *path)
{
	struct super_copy copies[BTRFS_SUPER_MIRROR_MAX];
	uint8_t sb[BTRFS_SUPER_INFO_SIZE];
	struct io_dev *io;
	struct target_spec spec = { .flags = TARGET_READ_ONLY };
	char why[600];
	int ret, damaged = 0;

	if ((ret = target_check(path, &spec, why, sizeof(why)))) {
		msg_error("%s", why);
		return ret;
	}
	ret = io_open_file(path, IO_OPEN_EXCL, &io);
	if (ret) {
		msg_errno(ret, "cannot open %s", path);
		return ret;
	}
	if (a->all_copies) {
		struct json_object *list = json_object_new_array();
		int present = 0, valid = 0;
		for (int i = 0; i < BTRFS_SUPER_MIRROR_MAX; i++) {
			struct json_object *o;
			super_read_copy(io, i, sb, &copies[i]);
			if (copies[i].status == -ENXIO)
				continue;
			present++;
			valid += copies[i].status == 0;
			o = copies[i].status == 0 || super_magic(sb) == BTRFS_MAGIC ? super_to_json(sb)
										 : json_object_new_object();
			json_object_object_add(o, "mirror", json_object_new_int(i));
			json_object_object_add(o, "valid", json_object_new_boolean(copies[i].status == 0));
			if (copies[i].status)
				json_object_object_add(o, "why", json_object_new_string(copies[i].why));
			if (a->format == CLI_FORMAT_TEXT) {
				char heading[300];
				snprintf(heading, sizeof(heading), "superblock copy %d at %llu: %s%s%s", i,
					 (unsigned long long)copies[i].offset, copies[i].status ? "INVALID" : "valid",
					 copies[i].status ? ": " : "", copies[i].why);
				emit(a, path, o, heading);
				json_object_put(o);
			} else {
				json_object_array_add(list, o);
			}
		}
		if (a->format == CLI_FORMAT_JSON && present)
			emit(a, path, list, NULL);
		json_object_put(list);
		io_close(io);
		if (!present) {
			msg_error("%s: too small to hold a superblock: not a btrfs filesystem", path);
			return -EINVAL;
		}
		if (!valid) {
			msg_error("%s: no valid superblock copy: not a btrfs filesystem, or a damaged one", path);
			return -EUCLEAN;
		}
		return 0;
	}
	ret = super_read_best(io, a->mirror, sb, copies);
	io_close(io);
	if (ret < 0) {
		int m = a->mirror >= 0 ? a->mirror : 0;
		if (a->mirror < 0 && !strcmp(copies[0].why, "no btrfs magic") &&
		    copies[1].status && copies[2].status)
			msg_error("%s: not a btrfs filesystem (no valid superblock)", path);
		else
			msg_error("%s: superblock copy %d is not valid: %s", path, m, copies[m].why);
		return ret;
	}
	for (int i = 0; i < BTRFS_SUPER_MIRROR_MAX; i++)
		if (copies[i].status && copies[i].status != -ENXIO && (a->mirror < 0 || i == a->mirror) &&
		    ++damaged)
			msg_warning("%s: superblock copy %d (at %llu) is invalid: %s", path, i,
				    (unsigned long long)copies[i].offset, copies[i].why);
	if (ret != 0 && a->mirror < 0 && ++damaged)
		msg_warning("%s: using superblock copy %d", path, ret);
	{
		struct json_object *o = super_to_json(sb);
		char heading[300];
		snprintf(heading, sizeof(heading), "superblock of %s (copy %d at %llu)", path, ret,
			 (unsigned long long)copies[ret].offset);
		emit(a, path, o, a->format == CLI_FORMAT_TEXT ? heading : NULL);
		json_object_put(o);
	}
	return damaged ? INSPECT_DAMAGED : 0;
}

int cmd_super(int argc, char **argv)
{
	static const struct argp argp = { super_options, super_parse, "DEVICE...",
		"Print the superblock of each DEVICE: every field, the backup roots and the "
		"system chunk array. By default the newest valid copy is shown.", NULL, NULL, NULL };
	struct super_args a = { .mirror = -1, .format = CLI_FORMAT_TEXT };
	int failed = 0;

	argp_parse(&argp, argc, argv, 0, NULL, &a);
	if (a.format == CLI_FORMAT_JSON)
		a.devices = json_object_new_array();
	for (unsigned i = 0; i < a.npaths; i++) {
		int r = show_device(&a, a.paths[i]);
		if (r < 0)
			failed = INSPECT_ERROR;
		else if (r == INSPECT_DAMAGED && !failed)
			failed = INSPECT_DAMAGED;
	}
	if (a.devices) {
		struct json_object *doc = json_doc_new();
		json_object_object_add(doc, "command", json_object_new_string("super"));
		json_object_object_add(doc, "devices", a.devices);
		json_object_object_add(doc, "exit_status", json_object_new_int(failed));
		json_doc_print(doc);
	}
	return failed;
}
