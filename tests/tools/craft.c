// SPDX-License-Identifier: GPL-2.0-only
/* btk-craft: insert, replace and delete raw items through libfs transactions,
 * for test images whose layout the kernel no longer writes (an inline extent
 * followed by a regular one, an orphan item beside a half-truncated inode, a
 * dev extent without a chunk). Tree blocks stay valid (checksums, parent keys,
 * extent-tree refs of tree blocks); what the items say is the caller's business.
 *
 *   btk-craft DEV... < EDITS
 *
 * One edit a line, applied in order, one transaction committed at the end:
 *   ins TREE OBJECTID,TYPE,OFFSET HEX     insert an item (the key must be free)
 *   set TREE OBJECTID,TYPE,OFFSET HEX     replace an item's data (size may change)
 *   del TREE OBJECTID,TYPE,OFFSET         delete an item
 * TREE is a number; TYPE a number or a key type name (INODE_ITEM). HEX may be
 * empty ("-"). Blank lines and lines starting with # are skipped.
 * Exit status 0, 1 on errors (nothing committed), 2 on usage errors. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sizes.h"
#include "common/env_knobs.h"
#include <btk/fs.h>
#include <btk/names.h>
#include <btk/trans.h>

static int parse_type(const char *s, uint8_t *out)
{
	uint64_t v;

	if (!u64_parse(s, &v) && v <= 255) {
		*out = (uint8_t)v;
		return 0;
	}
	return key_type_from_name(s, out);
}

/* "OBJECTID,TYPE,OFFSET"; the objectid and offset may be negative (-1 = 2^64-1). */
static int parse_key(char *s, struct btrfs_key *key)
{
	char *a = strchr(s, ','), *b = a ? strchr(a + 1, ',') : NULL, *end;

	if (!a || !b)
		return -EINVAL;
	*a++ = 0;
	*b++ = 0;
	errno = 0;
	key->objectid = *s == '-' ? (uint64_t)strtoll(s, &end, 0) : strtoull(s, &end, 0);
	if (errno || *end)
		return -EINVAL;
	key->offset = *b == '-' ? (uint64_t)strtoll(b, &end, 0) : strtoull(b, &end, 0);
	if (errno || *end)
		return -EINVAL;
	return parse_type(a, &key->type);
}

static int parse_hex(const char *s, uint8_t *buf, uint32_t max, uint32_t *len)
{
	size_t n = strcmp(s, "-") ? strlen(s) : 0;

	if (n % 2 || n / 2 > max)
		return -EINVAL;
	for (size_t i = 0; i < n / 2; i++) {
		unsigned v;
		if (sscanf(s + 2 * i, "%2x", &v) != 1)
			return -EINVAL;
		buf[i] = (uint8_t)v;
	}
	*len = (uint32_t)(n / 2);
	return 0;
}

static int apply_line(struct trans *t, char *line, uint8_t *buf, uint32_t max)
{
	char *op = strtok(line, " \t\n"), *tree_s = strtok(NULL, " \t\n"), *key_s = strtok(NULL, " \t\n");
	char *hex = strtok(NULL, " \t\n");
	struct btrfs_key key;
	uint64_t tree;
	uint32_t len = 0;

	if (!op || *op == '#')
		return 0;
	if (!tree_s || !key_s || u64_parse(tree_s, &tree) || parse_key(key_s, &key))
		return -EINVAL;
	if (!strcmp(op, "del"))
		return trans_delete_item(t, tree, &key);
	if (!hex || parse_hex(hex, buf, max, &len))
		return -EINVAL;
	if (!strcmp(op, "ins"))
		return trans_insert_item(t, tree, &key, buf, len);
	if (!strcmp(op, "set"))
		return trans_update_item(t, tree, &key, buf, len);
	return -EINVAL;
}

int main(int argc, char **argv)
{
	struct fs_open_options oo;
	struct fs_info *fs;
	struct trans *t = NULL;
	char line[140000];
	uint8_t *buf;
	unsigned lineno = 0;
	int ret;

	if (argc < 2) {
		fprintf(stderr, "usage: btk-craft DEV... < EDITS\n");
		return 2;
	}
	fs_open_options_init(&oo);
	oo.writable = true;
	env_knobs_fill(&oo);
	ret = fs_open((const char *const *)&argv[1], (unsigned)(argc - 1), &oo, &fs);
	if (ret) {
		fprintf(stderr, "btk-craft: %s\n", btk_error_msg());
		return 1;
	}
	buf = malloc(65536);
	ret = buf ? trans_start(fs, &t) : -ENOMEM;
	if (ret)
		fprintf(stderr, "btk-craft: %s (%s)\n", btk_error_msg(), strerror(-ret));
	while (!ret && fgets(line, sizeof(line), stdin)) {
		lineno++;
		ret = apply_line(t, line, buf, 65536);
		if (ret)
			fprintf(stderr, "btk-craft: line %u: %s (%s)\n", lineno, btk_error_msg()[0] ? btk_error_msg() : "failed",
				strerror(-ret));
	}
	if (!ret) {
		ret = trans_commit(t);
		t = NULL;
		if (ret)
			fprintf(stderr, "btk-craft: commit: %s (%s)\n", btk_error_msg(), strerror(-ret));
	}
	trans_abort(t);
	free(buf);
	fs_close(fs);
	return ret ? 1 : 0;
}
