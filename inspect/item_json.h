/* SPDX-License-Identifier: GPL-2.0-only */
/* Decoding of one leaf item into a JSON object of its fields, for
 * `btk-inspect tree` (jsonl and text). The field names and shapes are a
 * contract: doc/inspect-tree-jsonl.md. */
#ifndef BTK_ITEM_JSON_H
#define BTK_ITEM_JSON_H

#include <stdint.h>
#include <stdio.h>
#include <json-c/json.h>

#include <btk/key.h>

/* The decoded fields of the item with this key and body. csum_size is the
 * filesystem's checksum size (for EXTENT_CSUM), owner_tree the tree the leaf
 * belongs to. Returns a new object (never NULL except when out of memory);
 * unknown key types give {}. *malformed (may be NULL) is set to 0, or to 1
 * when the item is too short or inconsistent for its type: then the object
 * holds whatever could be decoded. Never reads outside data[0..size). */
struct json_object *item_fields_json(const struct btrfs_key *key, const uint8_t *data, uint32_t size,
				     unsigned csum_size, uint64_t owner_tree, int *malformed);

/* Print an object made by item_fields_json readably: scalar fields run on
 * lines of about 100 columns, nested objects and arrays of objects go on
 * their own lines one level deeper. indent is the number of leading tabs. */
void item_fields_text(FILE *out, struct json_object *fields, int indent);

#endif
