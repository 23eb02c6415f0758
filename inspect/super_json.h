/* SPDX-License-Identifier: GPL-2.0-only */
/* The superblock as a JSON object (member names of struct btrfs_super_block). */
#ifndef BTK_INSPECT_SUPER_JSON_H
#define BTK_INSPECT_SUPER_JSON_H

#include <json-c/json.h>
#include <stdint.h>

struct json_object *super_to_json(const uint8_t *sb);
struct json_object *hex_json(const uint8_t *bytes, size_t len);
struct json_object *uuid_json(const uint8_t *uuid);

#endif
