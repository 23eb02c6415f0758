// SPDX-License-Identifier: GPL-2.0-only
/* btk-inspect tree: every item of every tree (or one tree, or one block),
 * as text or as one JSON object per item / node pointer. */
#include <argp.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli.h"
#include "common/messages.h"
#include "common/sizes.h"
#include "inspect/inspect.h"
#include "inspect/item_json.h"
#include <btk/item_check.h>
#include <btk/names.h>
#include <btk/walk.h>

struct tree_args {
	enum cli_format format;
	bool have_tree, have_block;
	uint64_t tree, block;
	int mirror;
	char **paths;
	unsigned npaths;
};

struct tree_printer {
	struct fs_info *fs;
	const struct tree_args *args;
	uint64_t tree;           /* objectid of the tree being walked */
	uint64_t bad_blocks;
	uint64_t malformed_items;
};

static const struct argp_option tree_options[] = {
	{ "tree", 't', "TREE", 0, "Only this tree: a number or a name (root, extent, chunk, dev, fs, "
				  "csum, quota, uuid, free-space, block-group, raid-stripe, data-reloc, log)", 0 },
	{ "block", 'b', "BYTENR", 0, "Only the tree block at logical address BYTENR", 0 },
	{ "format", 'f', "FORMAT", 0, "Output format: text (default) or jsonl", 0 },
	{ "super", 's', "N", 0, "Use superblock copy N (0, 1 or 2)", 0 },
	{ 0 }
};

static error_t tree_parse(int key, char *arg, struct argp_state *state)
{
	struct tree_args *a = state->input;

	switch (key) {
	case 't':
		if (tree_id_parse(arg, &a->tree))
			argp_error(state, "unknown tree '%s'", arg);
		a->have_tree = true;
		break;
	case 'b':
		if (u64_parse(arg, &a->block))
			argp_error(state, "invalid block address '%s'", arg);
		a->have_block = true;
		break;
	case 's':
		if (strlen(arg) != 1 || arg[0] < '0' || arg[0] > '2')
			argp_error(state, "--super takes 0, 1 or 2");
		a->mirror = arg[0] - '0';
		break;
	case 'f':
		cli_argp_format(state, arg, CLI_FORMAT_MASK(CLI_FORMAT_TEXT) | CLI_FORMAT_MASK(CLI_FORMAT_JSONL),
				&a->format);
		break;
	default: return cli_argp_devices(key, state, &a->paths, &a->npaths);
	}
	return 0;
}

static struct json_object *key_json(const struct btrfs_key *k)
{
	struct json_object *a = json_object_new_array_ext(3);

	json_object_array_add(a, json_object_new_uint64(k->objectid));
	json_object_array_add(a, json_object_new_uint64(k->type));
	json_object_array_add(a, json_object_new_uint64(k->offset));
	return a;
}

static void print_key_text(const struct btrfs_key *k)
{
	char buf[KEY_TYPE_NAME_BUF];

	printf("key (%" PRIu64 " %s %" PRIu64 ")", k->objectid, key_type_name_or_number(k->type, buf),
	       k->offset);
}

static void print_leaf(struct tree_printer *p, const struct tree_block *b)
{
	unsigned n = block_nritems(b);
	bool jsonl = p->args->format == CLI_FORMAT_JSONL;

	if (!jsonl) {
		uint32_t used = n * (uint32_t)sizeof(struct btrfs_item);
		if (n)
			used += p->fs->nodesize - (uint32_t)sizeof(struct btrfs_header) -
				item_offset(leaf_item(b->data, n - 1));
		printf("leaf %" PRIu64 " items %u free space %u generation %" PRIu64 " owner %" PRIu64 "\n",
		       b->bytenr, n, p->fs->nodesize - (uint32_t)sizeof(struct btrfs_header) - used,
		       block_generation(b), block_owner(b));
	}
	for (unsigned slot = 0; slot < n; slot++) {
		const uint8_t *item = leaf_item(b->data, slot);
		struct btrfs_key k;
		struct json_object *fields;
		int malformed = 0;
		char tbuf[KEY_TYPE_NAME_BUF];
		struct item_verdict vd;

		key_from_disk(&k, item_key_ptr(item));
		fields = item_fields_json(&k, leaf_item_data(b->data, slot), item_size(item),
					  p->fs->csum_size, p->tree, &malformed);
		/* what the decoder could not lay out, or what the kernel would refuse */
		if (item_check_fs(p->fs, &k, leaf_item_data(b->data, slot), item_size(item), &vd))
			malformed = 1;
		if (malformed)
			p->malformed_items++;
		if (jsonl) {
			struct json_object *o = json_object_new_object();
			json_object_object_add(o, "tree", json_object_new_uint64(p->tree));
			json_object_object_add(o, "block", json_object_new_uint64(b->bytenr));
			json_object_object_add(o, "slot", json_object_new_int((int)slot));
			json_object_object_add(o, "key", key_json(&k));
			json_object_object_add(o, "type",
					       json_object_new_string(key_type_name_or_number(k.type, tbuf)));
			json_object_object_add(o, "size", json_object_new_uint64(item_size(item)));
			json_object_object_add(o, "fields", fields);
			if (malformed)
				json_object_object_add(o, "malformed", json_object_new_boolean(1));
			puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
			json_object_put(o);
		} else {
			printf("\titem %u ", slot);
			print_key_text(&k);
			printf(" itemoff %u itemsize %u%s\n", item_offset(item), item_size(item),
			       malformed ? " (malformed)" : "");
			item_fields_text(stdout, fields, 2);
			json_object_put(fields);
		}
	}
}

static void print_node(struct tree_printer *p, const struct tree_block *b)
{
	unsigned n = block_nritems(b), level = block_level(b);

	if (p->args->format != CLI_FORMAT_JSONL)
		printf("node %" PRIu64 " level %u items %u free %u generation %" PRIu64 " owner %" PRIu64 "\n",
		       b->bytenr, level, n,
		       (unsigned)((p->fs->nodesize - sizeof(struct btrfs_header)) / sizeof(struct btrfs_key_ptr)) - n,
		       block_generation(b), block_owner(b));
	for (unsigned slot = 0; slot < n; slot++) {
		const uint8_t *ptr = node_key_ptr(b->data, slot);
		struct btrfs_key k;

		key_from_disk(&k, key_ptr_key_ptr(ptr));
		if (p->args->format == CLI_FORMAT_JSONL) {
			printf("{\"tree\":%" PRIu64 ",\"block\":%" PRIu64 ",\"level\":%u,\"slot\":%u,"
			       "\"key\":[%" PRIu64 ",%u,%" PRIu64 "],\"blockptr\":%" PRIu64
			       ",\"generation\":%" PRIu64 "}\n",
			       p->tree, b->bytenr, level, slot, k.objectid, k.type, k.offset,
			       key_ptr_blockptr(ptr), key_ptr_generation(ptr));
		} else {
			printf("\t");
			print_key_text(&k);
			printf(" block %" PRIu64 " gen %" PRIu64 "\n", key_ptr_blockptr(ptr),
			       key_ptr_generation(ptr));
		}
	}
}

static int print_block(void *arg, const struct tree_block *b)
{
	struct tree_printer *p = arg;

	if (block_level(b) == 0)
		print_leaf(p, b);
	else
		print_node(p, b);
	return 0;
}

static void report_bad_block(void *arg, uint64_t bytenr, int level, int err, const char *why)
{
	struct tree_printer *p = arg;

	p->bad_blocks++;
	fflush(stdout);
	msg_error("tree %" PRIu64 ": cannot read block %" PRIu64 " (level %d): %s", p->tree, bytenr, level,
		  why);
	(void)err;
}

static int print_tree(struct tree_printer *p, const struct tree_root_ptr *root)
{
	struct tree_walk_ops ops = { print_block, report_bad_block, p };
	const char *name = tree_name(root->objectid);
	int ret;

	p->tree = root->objectid;
	if (p->args->format != CLI_FORMAT_JSONL) {
		if (name)
			printf("%s (%" PRId64 ") root %" PRIu64 " level %u\n", name, (int64_t)root->objectid,
			       root->bytenr, root->level);
		else
			printf("tree %" PRIu64 " root %" PRIu64 " level %u\n", root->objectid, root->bytenr,
			       root->level);
	}
	ret = tree_walk(p->fs, root, &ops, NULL);
	if (ret) {
		fflush(stdout);
		msg_error("tree %" PRIu64 ": %s", root->objectid, btk_error_msg());
		p->bad_blocks++;
	}
	return 0;
}

static int print_one_block(struct tree_printer *p, uint64_t bytenr)
{
	struct tree_block *b;
	int ret = block_read(p->fs, bytenr, &BLOCK_EXPECT_ANY, &b);

	if (ret) {
		msg_error("block %" PRIu64 ": %s", bytenr, btk_error_msg());
		return ret;
	}
	p->tree = block_owner(b);
	print_block(p, b);
	block_put(p->fs, b);
	return 0;
}

int cmd_tree(int argc, char **argv)
{
	static const struct argp argp = { tree_options, tree_parse, "DEVICE...",
		"Print the items of the trees of the filesystem on DEVICE(s): all trees, one tree "
		"(-t) or one block (-b). With --format jsonl, one JSON object per item and per node "
		"pointer.", NULL, NULL, NULL };
	static char outbuf[1 << 16];
	struct tree_args a = { .format = CLI_FORMAT_TEXT, .mirror = -1 };
	struct tree_printer p = { .args = &a };
	struct inspect_notes notes = { 0 };
	struct fs_info *fs;
	int ret = 0;

	argp_parse(&argp, argc, argv, 0, NULL, &a);
	setvbuf(stdout, outbuf, _IOFBF, sizeof(outbuf));
	fs = inspect_open(a.paths, a.npaths, a.mirror, false, &notes);
	if (!fs)
		return 1;
	p.fs = fs;
	if (a.have_block) {
		ret = print_one_block(&p, a.block);
	} else if (a.have_tree) {
		struct tree_root_ptr root;
		if (a.tree == BTRFS_TREE_LOG_OBJECTID) {
			root = (struct tree_root_ptr){ a.tree, super_log_root(fs_super(fs)), 0,
						       super_log_root_level(fs_super(fs)) };
			ret = root.bytenr ? 0 : -ENOENT;
		} else {
			ret = fs_find_root(fs, a.tree, &root);
		}
		if (ret == -ENOENT)
			msg_error("tree %" PRIu64 " does not exist on this filesystem", a.tree);
		else if (ret)
			msg_error("cannot find tree %" PRIu64 ": %s", a.tree, btk_error_msg());
		else
			print_tree(&p, &root);
	} else {
		struct fs_tree_list list;
		ret = fs_list_trees(fs, &list);
		if (ret)
			msg_error("cannot list the trees: %s", btk_error_msg());
		for (size_t i = 0; !ret && i < list.count; i++)
			print_tree(&p, &list.roots[i]);
		fs_tree_list_free(&list);
	}
	fflush(stdout);
	if (p.malformed_items)
		msg_warning("%" PRIu64 " malformed item(s)", p.malformed_items);
	fs_close(fs);
	return inspect_status(ret || p.bad_blocks, &notes);
}
