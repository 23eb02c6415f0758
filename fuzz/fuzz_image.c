// SPDX-License-Identifier: GPL-2.0-only
/* libFuzzer harness over whole filesystems: the input is a compact list of
 * patches onto the metadata of a small real filesystem (a base image), and
 * every run opens the patched filesystem, walks every tree, decodes every
 * patched leaf item, iterates the root tree forwards and the fs tree
 * backwards, reads the block groups and closes.
 *
 * Input layout and bases: fuzz/base.h (flag bits 0..4); here bits 5..7
 * exactly 001 decode the items of unpatched leaves too (rare on purpose:
 * decoding every item of the image is most of a run's cost). */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/base.h"
#include "inspect/item_json.h"
#include <btk/blockgroups.h>
#include <btk/csum.h>
#include <btk/fs.h>
#include <btk/super.h>
#include <btk/tree.h>
#include <btk/volumes.h>
#include <btk/walk.h>
#include "libfs/volumes_internal.h"

#define FUZZ_DECODE_ALL(flags) (((flags) >> 5) == 1)

static bool decode_all;  /* this run: decode every item (FUZZ_DECODE_ALL or new csum_size) */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void note_sink(void *arg, enum fs_note_level level, const char *msg)
{
	(void)arg;
	(void)level;
	(void)msg;
}

struct walk_ctx {
	struct fs_info *fs;
	struct fuzz_base *base;
	uint64_t owner;
	uint64_t items;
};

static void decode_item(struct walk_ctx *w, const struct btrfs_key *key, const uint8_t *data,
			uint32_t size, uint64_t owner)
{
	int malformed;
	struct json_object *obj = item_fields_json(key, data, size, w->fs->csum_size, owner, &malformed);

	/* no item_fields_text: fuzz_items covers it, and here it would double the time */
	json_object_put(obj);
	w->items++;
}

static bool ranges_meet(uint64_t lo1, uint64_t hi1, uint64_t lo2, uint64_t hi2)
{
	return lo1 < hi2 && lo2 < hi1;
}

/* Item decoding is a function of the item's key and bytes (and the
 * superblock's csum_size): an item no patch touched decodes exactly as in
 * the pristine image, so skip it unless asked to, and spend the time on
 * what changed; fuzz_items covers the decoders at full speed. */
static bool item_worth_decoding(const struct fuzz_base *b, const struct tree_block *tb, unsigned slot)
{
	const uint8_t *item = leaf_item(tb->data, slot);
	uint64_t head = sizeof(struct btrfs_header) + (uint64_t)slot * sizeof(struct btrfs_item);
	uint64_t body = sizeof(struct btrfs_header) + (uint64_t)item_offset(item);

	if (decode_all)
		return true;
	for (size_t i = b->ndevs; i < b->nblocks; i++) {
		const struct fuzz_block *fb = &b->blocks[i];
		if (fb->logical != tb->bytenr)
			continue;
		if (!fb->touched)
			return false;
		return ranges_meet(head, head + sizeof(struct btrfs_item), fb->dirty_lo, fb->dirty_hi) ||
		       ranges_meet(body, body + item_size(item), fb->dirty_lo, fb->dirty_hi);
	}
	return true; /* not a block of the base */
}

static int walk_visit(void *arg, const struct tree_block *tb)
{
	struct walk_ctx *w = arg;

	if (block_level(tb) != 0)
		return 0;
	for (unsigned slot = 0; slot < block_nritems(tb); slot++) {
		struct btrfs_key key;
		if (!item_worth_decoding(w->base, tb, slot))
			continue;
		block_key(tb, slot, &key);
		decode_item(w, &key, leaf_item_data(tb->data, slot), item_size(leaf_item(tb->data, slot)),
			    w->owner);
	}
	return 0;
}

static void walk_bad_block(void *arg, uint64_t bytenr, int level, int err, const char *why)
{
	(void)arg;
	(void)bytenr;
	(void)level;
	(void)err;
	(void)why;
}

/* A few pieces of every chunk through the chunk map, every copy: its start,
 * across its first stripe boundary and its end; the mapping of each profile
 * the (patched) chunk items describe, as data readers use it. */
static void read_chunks(struct fs_info *fs)
{
	uint8_t buf[8192];

	for (size_t i = 0; i < fs->chunks->count; i++) {
		const struct chunk *c = fs->chunks->chunks[i];
		uint64_t len = c->length < sizeof(buf) ? c->length : sizeof(buf);
		uint64_t at[3] = { 0, c->stripe_len - len / 2, c->length - len };
		int copies = volumes_num_copies(fs, c->logical);
		const char *volatile name = profile_name(c->type);

		(void)name;
		for (int m = 0; m < copies; m++)
			for (int k = 0; k < 3; k++)
				if (at[k] <= c->length - len)
					volumes_read(fs, c->logical + at[k], buf, len, m);
	}
}

/* What a checker does with a tree root: every copy verified on its own. */
static void check_root_copies(struct fs_info *fs, const struct tree_root_ptr *root)
{
	struct block_expect e = { .generation = root->generation, .level = root->level };
	uint8_t *buf = malloc(fs->nodesize);
	int copies = volumes_num_copies(fs, root->bytenr);

	for (int m = 0; buf && m < copies; m++) {
		const char *volatile why = block_problem_name(block_read_copy(fs, root->bytenr, m, &e, buf));
		(void)why;
	}
	free(buf);
}

static void exercise(struct fuzz_base *b, struct fs_info *fs)
{
	struct btrfs_key min = { 0, 0, 0 }, max = { (uint64_t)-1, 255, (uint64_t)-1 }, key;
	struct walk_ctx w = { .fs = fs, .base = b };
	struct tree_walk_ops ops = { .visit = walk_visit, .bad_block = walk_bad_block, .arg = &w };
	struct block_group_list bgs;
	struct fs_tree_list trees;
	struct tree_iter it;
	struct tree_path path;
	const uint8_t *data;
	uint32_t size;
	int ret;

	if (fs->csum_size != b->csum_size)
		decode_all = true; /* EXTENT_CSUM items decode differently */

	if (fs_list_trees(fs, &trees) == 0) {
		for (size_t t = 0; t < trees.count; t++) {
			struct tree_root_ptr found;
			uint64_t bad;
			w.owner = trees.roots[t].objectid;
			tree_walk(fs, &trees.roots[t], &ops, &bad);
			check_root_copies(fs, &trees.roots[t]);
			fs_find_root(fs, trees.roots[t].objectid, &found);
		}
		fs_tree_list_free(&trees);
	}

	tree_iter_init(&it, fs, &fs->tree_root, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &data, &size)) == 1)
		if (item_worth_decoding(b, it.path.nodes[0], (unsigned)it.path.slots[0]))
			decode_item(&w, &key, data, size, BTRFS_ROOT_TREE_OBJECTID);
	tree_iter_release(&it);

	/* backwards through the fs tree, from its last item */
	if (fs->fs_root.bytenr) {
		tree_path_init(&path);
		ret = tree_search_le(fs, &fs->fs_root, &max, &path);
		while (ret == 0) {
			tree_item_key(&path, &key);
			data = tree_item_data(&path, &size);
			(void)data;
			ret = tree_prev(fs, &path);
		}
		tree_path_release(fs, &path);
	}

	if (fs_read_block_groups(fs, &bgs) == 0)
		block_group_list_free(&bgs);
	read_chunks(fs);
	if (fuzz_verbose)
		fprintf(stderr, "fuzz_image: %llu leaf items decoded\n", (unsigned long long)w.items);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_base *b;
	struct fs_info *fs;
	char msg[512] = "";
	unsigned flags;

	if (size < 1)
		return 0;
	flags = data[0];
	b = fuzz_patch(data, size);
	decode_all = FUZZ_DECODE_ALL(flags);

	if (fuzz_open(b, flags, note_sink, &fs, msg, sizeof(msg)) == 0) {
		exercise(b, fs);
		fs_close(fs);
	} else if (fuzz_verbose) {
		fprintf(stderr, "fuzz_image: open failed: %s\n", msg);
	}
	fuzz_restore_blocks(b);
	return 0;
}
