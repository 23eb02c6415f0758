// SPDX-License-Identifier: GPL-2.0-only
/* btk-image info: what an image holds. Reads it to the end, so every frame,
 * record and checksum is verified on the way. */
#include <argp.h>
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <uuid/uuid.h>

#include "common/cli.h"
#include "common/json_doc.h"
#include "common/messages.h"
#include "image/image.h"
#include "image/sanitize.h"
#include <btk/csum.h>

struct info_args {
	const char *in;
	enum cli_format format;
	struct cli_common_options common;
};

enum { OPT_FORMAT = 256 };

static const struct argp_option info_options[] = {
	{ "format", OPT_FORMAT, "FMT", 0, "Output format: text (default) or json", 0 },
	{ 0 }
};

static error_t info_parse(int key, char *arg, struct argp_state *state)
{
	struct info_args *a = state->input;

	switch (key) {
	case ARGP_KEY_INIT:
		state->child_inputs[0] = &a->common;
		break;
	case OPT_FORMAT:
		cli_argp_format(state, arg, CLI_FORMAT_MASK(CLI_FORMAT_TEXT) | CLI_FORMAT_MASK(CLI_FORMAT_JSON), &a->format);
		break;
	case ARGP_KEY_ARG:
		if (a->in)
			argp_error(state, "one image at a time");
		a->in = arg;
		break;
	case ARGP_KEY_END:
		if (!a->in)
			argp_usage(state);
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

static const char *sanitize_name(unsigned m)
{
	return m == SANITIZE_RANDOM ? "random" : m == SANITIZE_COLLIDE ? "collide" : "none";
}

static void uuid_str(const uint8_t *u, char out[37])
{
	uuid_unparse(u, out);
}

struct info_counts {
	uint64_t tree_blocks, tree_bytes, data_records, data_bytes, supers;
	uint64_t image_bytes, frames;
};

static json_object *info_json(const struct img_source *src, const struct img_header *h, const struct info_counts *c)
{
	json_object *o = json_object_new_object(), *devs = json_object_new_array();
	char u[37];

	json_object_object_add(o, "format", json_object_new_string(src->format == IMG_FORMAT_BTK ? "btk" : "btrfs-image"));
	json_object_object_add(o, "version", json_object_new_int((int)h->version));
	uuid_str(h->fsid, u);
	json_object_object_add(o, "fsid", json_object_new_string(u));
	uuid_str(h->metadata_uuid, u);
	json_object_object_add(o, "metadata_uuid", json_object_new_string(u));
	json_object_object_add(o, "nodesize", json_object_new_int64(h->nodesize));
	json_object_object_add(o, "sectorsize", json_object_new_int64(h->sectorsize));
	json_object_object_add(o, "csum_type", json_object_new_string(csum_name(h->csum_type) ? csum_name(h->csum_type) : "unknown"));
	json_object_object_add(o, "generation", json_object_new_int64((int64_t)h->generation));
	json_object_object_add(o, "created", json_object_new_int64((int64_t)h->created));
	json_object_object_add(o, "compression", json_object_new_string(src->format == IMG_FORMAT_BTK
		? img_compress_name(h->compression) : "zlib"));
	json_object_object_add(o, "sanitize", json_object_new_string(sanitize_name(h->sanitize)));
	json_object_object_add(o, "data_included", json_object_new_boolean(!!(h->flags & IMG_FLAG_DATA)));
	json_object_object_add(o, "num_devices", json_object_new_int64(h->num_devices));
	for (uint32_t i = 0; src->format == IMG_FORMAT_BTK && i < h->num_devices; i++) {
		json_object *d = json_object_new_object();
		json_object_object_add(d, "devid", json_object_new_int64((int64_t)h->devices[i].devid));
		json_object_object_add(d, "total_bytes", json_object_new_int64((int64_t)h->devices[i].total_bytes));
		json_object_object_add(d, "bytes_used", json_object_new_int64((int64_t)h->devices[i].bytes_used));
		uuid_str(h->devices[i].uuid, u);
		json_object_object_add(d, "uuid", json_object_new_string(u));
		json_object_array_add(devs, d);
	}
	json_object_object_add(o, "devices", devs);
	json_object_object_add(o, "sys_chunk_array_size", json_object_new_int64(h->sys_chunk_array_size));
	json_object_object_add(o, "superblocks", json_object_new_int64((int64_t)c->supers));
	json_object_object_add(o, "tree_blocks", json_object_new_int64((int64_t)c->tree_blocks));
	json_object_object_add(o, "tree_bytes", json_object_new_int64((int64_t)c->tree_bytes));
	json_object_object_add(o, "data_records", json_object_new_int64((int64_t)c->data_records));
	json_object_object_add(o, "data_bytes", json_object_new_int64((int64_t)c->data_bytes));
	json_object_object_add(o, "frames", json_object_new_int64((int64_t)c->frames));
	json_object_object_add(o, "image_bytes", json_object_new_int64((int64_t)c->image_bytes));
	json_object_object_add(o, "compression_ratio", json_object_new_double(
		c->image_bytes ? (double)(c->tree_bytes + c->data_bytes) / (double)c->image_bytes : 0.0));
	return o;
}

static void info_text(const struct img_source *src, const struct img_header *h, const struct info_counts *c)
{
	char u[37];

	printf("format:           %s", src->format == IMG_FORMAT_BTK ? "btk" : "btrfs-image (v0)");
	if (src->format == IMG_FORMAT_BTK)
		printf(" version %u", h->version);
	uuid_str(h->fsid, u);
	printf("\nfsid:             %s\n", u);
	uuid_str(h->metadata_uuid, u);
	printf("metadata_uuid:    %s\n", u);
	printf("nodesize:         %u\nsectorsize:       %u\n", h->nodesize, h->sectorsize);
	printf("checksum:         %s\n", csum_name(h->csum_type) ? csum_name(h->csum_type) : "unknown");
	printf("generation:       %llu\n", (unsigned long long)h->generation);
	printf("compression:      %s\n", src->format == IMG_FORMAT_BTK ? img_compress_name(h->compression) : "zlib");
	printf("sanitized:        %s\n", sanitize_name(h->sanitize));
	printf("data included:    %s\n", h->flags & IMG_FLAG_DATA ? "yes" : "no");
	printf("devices:          %u\n", h->num_devices);
	for (uint32_t i = 0; src->format == IMG_FORMAT_BTK && i < h->num_devices; i++) {
		uuid_str(h->devices[i].uuid, u);
		printf("  devid %llu  size %llu  used %llu  uuid %s\n", (unsigned long long)h->devices[i].devid,
		       (unsigned long long)h->devices[i].total_bytes, (unsigned long long)h->devices[i].bytes_used, u);
	}
	printf("superblocks:      %llu\n", (unsigned long long)c->supers);
	printf("tree blocks:      %llu (%llu bytes)\n", (unsigned long long)c->tree_blocks,
	       (unsigned long long)c->tree_bytes);
	printf("data:             %llu bytes in %llu records\n", (unsigned long long)c->data_bytes,
	       (unsigned long long)c->data_records);
	if (src->format == IMG_FORMAT_BTK)
		printf("frames:           %llu\n", (unsigned long long)c->frames);
	if (c->image_bytes)
		printf("image size:       %llu bytes (compression ratio %.2f)\n", (unsigned long long)c->image_bytes,
		       (double)(c->tree_bytes + c->data_bytes) / (double)c->image_bytes);
}

int cmd_info(int argc, char **argv)
{
	static const struct argp_child children[] = { { &cli_common_argp, 0, NULL, 0 }, { 0 } };
	static const struct argp argp = { info_options, info_parse, "IMAGE",
		"Describe a metadata image (btk or btrfs-image format; - reads stdin): header, devices, "
		"counts and sizes, sanitize mode, compression ratio. The whole image is read and verified.",
		children, NULL, NULL };
	struct info_args a = { 0 };
	struct img_source src;
	struct img_record rec;
	struct info_counts c = { 0 };
	struct img_totals t;
	const struct img_header *h;
	struct stat st;
	int ret;

	argp_parse(&argp, argc, argv, 0, NULL, &a);
	if ((ret = img_source_open(&src, a.in))) {
		msg_error("%s", img_source_error(&src));
		img_source_close(&src);
		return 1;
	}
	while ((ret = img_source_next(&src, &rec)) == 1) {
		if (rec.type == IMG_REC_SUPER) {
			c.supers += rec.copy == 0;
		} else if (rec.type == IMG_REC_TREE) {
			c.tree_blocks++;
			c.tree_bytes += rec.len;
		} else {
			c.data_records++;
			c.data_bytes += rec.len;
		}
	}
	if (ret < 0) {
		msg_error("%s", img_source_error(&src));
		img_source_close(&src);
		return 1;
	}
	h = src.format == IMG_FORMAT_BTK ? btk_reader_header(src.btk) : &src.header;
	if (src.format == IMG_FORMAT_BTK) {
		btk_reader_totals(src.btk, &t);
		c.image_bytes = t.image_bytes;
		c.frames = t.frames;
	} else if (strcmp(a.in, "-") && !stat(a.in, &st)) {
		c.image_bytes = (uint64_t)st.st_size;
	}
	if (a.format == CLI_FORMAT_JSON) {
		json_object *o = info_json(&src, h, &c), *doc = json_doc_new();
		json_object_object_add(doc, "command", json_object_new_string("info"));
		json_object_object_foreach(o, key, val)
			json_object_object_add(doc, key, json_object_get(val));
		json_object_put(o);
		json_doc_print(doc);
	} else {
		info_text(&src, h, &c);
	}
	img_source_close(&src);
	return 0;
}
