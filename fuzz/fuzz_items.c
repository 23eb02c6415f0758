// SPDX-License-Identifier: GPL-2.0-only
/* libFuzzer harness over the item decoders: (key, item bytes) straight into
 * item_fields_json, and its result through item_fields_text; on the way the
 * same bytes go through the name lookups of libfs/names.h and the item
 * validator of libfs/item_check.h (with its entry and inline-ref walkers).
 *
 * Input layout (FUZZ_ITEM_HEADER bytes, then the item body to the end):
 *   u8 key type, u8 csum_size, u8 owner tree (see owner_of),
 *   u64le objectid, u64le offset, body...
 * The body is passed with its exact size, so any read past it is caught. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inspect/item_json.h"
#include <btk/item_check.h>
#include <btk/format.h>
#include <btk/names.h>

#define FUZZ_ITEM_HEADER 19

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t owner_of(uint8_t v)
{
	/* small values are tree objectids as they are; a few high ones are the
	 * negative (reloc, log) trees */
	if (v >= 0xf0)
		return (uint64_t)-(int64_t)(0x100 - v);
	return v;
}

/* Names of the header's values, a flags string cut to a fuzzed length, and
 * the start of the body parsed as a command-line tree id. */
static void exercise_names(const struct btrfs_key *key, const uint8_t *data, size_t size)
{
	char type_buf[KEY_TYPE_NAME_BUF], flags_buf[BG_FLAGS_STR_BUF], id[64];
	const char *volatile sink;
	uint64_t tree;
	size_t n = size - FUZZ_ITEM_HEADER < sizeof(id) - 1 ? size - FUZZ_ITEM_HEADER : sizeof(id) - 1;
	size_t len = 1 + data[1] % sizeof(flags_buf);

	sink = key_type_name_or_number(key->type, type_buf);
	sink = tree_name(key->objectid);
	sink = compression_name(data[1]);
	sink = file_extent_type_name(data[1]);
	sink = dir_type_name(data[2]);
	(void)sink;
	block_group_flags_str(key->offset, flags_buf, len);
	if (memchr(flags_buf, 0, len) == NULL)
		abort(); /* not terminated within the length given */
	memcpy(id, data + FUZZ_ITEM_HEADER, n);
	id[n] = 0;
	tree_id_parse(id, &tree);
}

/* The validator and its walkers on the body: a verdict within its set, at
 * an offset inside the item; walkers that end or fail, never read past. */
static void exercise_validator(const struct btrfs_key *key, const uint8_t *body, uint32_t size, uint8_t csum_size)
{
	struct item_geometry g = { 4096, 16384, csum_size, BTRFS_FEATURE_INCOMPAT_SKINNY_METADATA };
	struct item_view v = item_view_of(body, size);
	struct item_verdict vd;
	struct item_entry e;
	struct inline_ref_view r;
	uint32_t off = 0;
	int ret = item_check(&g, key, &v, &vd);

	if ((ret != 0 && ret != -EUCLEAN) || (ret == 0) != (vd.fault == ITEM_OK) || (ret && !vd.why) ||
	    vd.at > size || vd.fault > ITEM_FAULT_LAST)
		abort();
	while ((ret = item_entry_next(key->type, &v, &off, &e)) == 1)
		if (e.off + e.len != off || off > size || e.name + e.name_len > body + size ||
		    item_entry_check(key->type, &e) > ITEM_FAULT_LAST)
			abort();
	if (key->type == BTRFS_EXTENT_ITEM_KEY || key->type == BTRFS_METADATA_ITEM_KEY) {
		off = extent_item_refs_start(key, &v);
		while ((ret = inline_ref_next(&v, &off, &r)) == 1)
			if (r.off + r.len != off || off > size)
				abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static FILE *devnull;
	struct btrfs_key key;
	struct json_object *obj;
	int malformed;

	if (!devnull) {
		devnull = fopen("/dev/null", "w");
		if (!devnull)
			abort();
	}
	if (size < FUZZ_ITEM_HEADER)
		return 0;
	key.type = data[0];
	key.objectid = get_le64(data + 3);
	key.offset = get_le64(data + 11);
	exercise_names(&key, data, size);
	exercise_validator(&key, size > FUZZ_ITEM_HEADER ? data + FUZZ_ITEM_HEADER : NULL,
			   (uint32_t)(size - FUZZ_ITEM_HEADER), data[1]);
	obj = item_fields_json(&key, size > FUZZ_ITEM_HEADER ? data + FUZZ_ITEM_HEADER : NULL,
			       (uint32_t)(size - FUZZ_ITEM_HEADER), data[1], owner_of(data[2]), &malformed);
	if (!obj)
		return 0;
	if (malformed != 0 && malformed != 1)
		abort();
	item_fields_text(devnull, obj, 0);
	/* the JSON must serialize (no invalid UTF-8 or dangling objects) */
	(void)json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN);
	json_object_put(obj);
	return 0;
}
