// SPDX-License-Identifier: GPL-2.0-only
/* btk-inspect map: the chunk map, or where the copies of one address live. */
#include <argp.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/cli.h"
#include "common/json_doc.h"
#include "common/messages.h"
#include "common/sizes.h"
#include "inspect/inspect.h"
#include <btk/names.h>
#include <btk/volumes.h>

struct map_args {
	bool have_logical;
	uint64_t logical;
	enum cli_format format;
	char **paths;
	unsigned npaths;
};

static const struct argp_option map_options[] = {
	{ "logical", 'l', "ADDR", 0, "Show the device and physical offset of every copy of ADDR", 0 },
	{ "format", 'f', "FORMAT", 0, "Output format: text (default) or json", 0 },
	{ 0 }
};

static error_t map_parse(int key, char *arg, struct argp_state *state)
{
	struct map_args *a = state->input;

	switch (key) {
	case 'l':
		if (u64_parse(arg, &a->logical))
			argp_error(state, "invalid address '%s'", arg);
		a->have_logical = true;
		break;
	case 'f':
		cli_argp_format(state, arg, CLI_FORMAT_MASK(CLI_FORMAT_TEXT) | CLI_FORMAT_MASK(CLI_FORMAT_JSON),
				&a->format);
		break;
	default: return cli_argp_devices(key, state, &a->paths, &a->npaths);
	}
	return 0;
}

static const char *device_path(const struct fs_device *d)
{
	return d && d->path ? d->path : "<missing>";
}

static struct json_object *chunk_json(const struct chunk *c)
{
	struct json_object *o = json_object_new_object(), *stripes = json_object_new_array();
	char flags[BG_FLAGS_STR_BUF];

	block_group_flags_str(c->type, flags, sizeof(flags));
	json_object_object_add(o, "logical", json_object_new_uint64(c->logical));
	json_object_object_add(o, "length", json_object_new_uint64(c->length));
	json_object_object_add(o, "type", json_object_new_uint64(c->type));
	json_object_object_add(o, "flags", json_object_new_string(flags));
	json_object_object_add(o, "profile", json_object_new_string(profile_name(c->type)));
	json_object_object_add(o, "stripe_len", json_object_new_uint64(c->stripe_len));
	for (unsigned s = 0; s < c->num_stripes; s++) {
		struct json_object *st = json_object_new_object();
		json_object_object_add(st, "devid", json_object_new_uint64(c->stripes[s].devid));
		json_object_object_add(st, "physical", json_object_new_uint64(c->stripes[s].physical));
		json_object_array_add(stripes, st);
	}
	json_object_object_add(o, "stripes", stripes);
	return o;
}

/* The chunk map: text lines, or the document's "chunks". */
static void print_chunks(struct fs_info *fs, struct json_object *doc)
{
	char flags[BG_FLAGS_STR_BUF], len[32];
	struct json_object *list = doc ? json_object_new_array() : NULL;

	for (size_t i = 0; i < fs_chunk_count(fs); i++) {
		const struct chunk *c = fs_chunk(fs, i);
		if (list) {
			json_object_array_add(list, chunk_json(c));
			continue;
		}
		block_group_flags_str(c->type, flags, sizeof(flags));
		size_format(c->length, len, sizeof(len), SIZE_HUMAN);
		printf("chunk %" PRIu64 " length %" PRIu64 " (%s) %s %s stripes %u\n", c->logical, c->length,
		       len, flags, profile_name(c->type), c->num_stripes);
		for (unsigned s = 0; s < c->num_stripes; s++)
			printf("\tstripe %u devid %" PRIu64 " physical %" PRIu64 " %s\n", s, c->stripes[s].devid,
			       c->stripes[s].physical, device_path(c->stripes[s].dev));
	}
	if (list)
		json_object_object_add(doc, "chunks", list);
}

/* Every copy of one logical address: text lines, or the document's
 * "logical", "chunk", "profile" and "copies". */
static int print_logical(struct fs_info *fs, uint64_t logical, struct json_object *doc)
{
	struct phys_copy copies[MAX_COPIES];
	const struct chunk *c = fs_chunk_lookup(fs, logical);
	uint64_t contig;
	int n = volumes_map(fs, logical, 1, copies, &contig);
	struct json_object *list = NULL;

	if (n < 0) {
		msg_error("%s", btk_error_msg());
		return 1;
	}
	if (doc) {
		json_object_object_add(doc, "logical", json_object_new_uint64(logical));
		json_object_object_add(doc, "chunk", json_object_new_uint64(c->logical));
		json_object_object_add(doc, "profile", json_object_new_string(profile_name(c->type)));
		list = json_object_new_array();
		json_object_object_add(doc, "copies", list);
	} else {
		printf("logical %" PRIu64 " in chunk %" PRIu64 " (%s), %d cop%s\n", logical, c->logical,
		       profile_name(c->type), n, n == 1 ? "y" : "ies");
	}
	for (int i = 0; i < n; i++) {
		if (list) {
			struct json_object *o = json_object_new_object();
			json_object_object_add(o, "mirror", json_object_new_int(i + 1));
			json_object_object_add(o, "devid", json_object_new_uint64(copies[i].devid));
			json_object_object_add(o, "physical", json_object_new_uint64(copies[i].physical));
			json_object_object_add(o, "path", json_object_new_string(device_path(copies[i].dev)));
			json_object_array_add(list, o);
		} else {
			printf("\tmirror %d devid %" PRIu64 " physical %" PRIu64 " %s\n", i + 1, copies[i].devid,
			       copies[i].physical, device_path(copies[i].dev));
		}
	}
	return 0;
}

int cmd_map(int argc, char **argv)
{
	static const struct argp argp = { map_options, map_parse, "DEVICE...",
		"Print the chunk map (logical ranges, profiles, stripes), or with --logical the "
		"device and physical offset of every copy of one logical address.", NULL, NULL, NULL };
	struct map_args a = { .format = CLI_FORMAT_TEXT };
	struct inspect_notes notes = { 0 };
	struct fs_info *fs;
	struct json_object *doc = NULL;
	int ret = 0;

	argp_parse(&argp, argc, argv, 0, NULL, &a);
	fs = inspect_open(a.paths, a.npaths, -1, true, &notes);
	if (!fs)
		return 1;
	if (a.format == CLI_FORMAT_JSON) {
		doc = json_doc_new();
		json_object_object_add(doc, "command", json_object_new_string("map"));
	}
	if (a.have_logical)
		ret = print_logical(fs, a.logical, doc);
	else
		print_chunks(fs, doc);
	json_doc_print(doc);
	fs_close(fs);
	return inspect_status(ret != 0, &notes);
}
