// SPDX-License-Identifier: GPL-2.0-only
/* The trees holding a tree block by their own reference (owner_refs.h). */
#include <errno.h>

#include "check/owner_refs.h"
#include <btk/block.h>
#include <btk/format.h>
#include <btk/item_view.h>
#include <btk/tree.h>

static void add_root(struct owner_refs *r, uint64_t root)
{
	size_t i = r->n;

	for (size_t k = 0; k < r->n; k++)
		if (r->roots[k] == root)
			return;
	if (r->n == OWNER_REFS_MAX) {
		r->more = true;
		return;
	}
	for (; i > 0 && r->roots[i - 1] > root; i--)
		r->roots[i] = r->roots[i - 1];
	r->roots[i] = root;
	r->n++;
}

/* The flags and inline references of an EXTENT_ITEM or METADATA_ITEM. */
static void read_extent_item(struct owner_refs *r, const struct btrfs_key *key, const uint8_t *data, uint32_t size)
{
	struct item_view v = item_view_of(data, size);
	uint32_t at = sizeof(struct btrfs_extent_item);

	if (!item_view_ptr(&v, 0, at))
		return;
	r->found = true;
	r->full = extent_flags(data) & BTRFS_BLOCK_FLAG_FULL_BACKREF;
	if (key->type == BTRFS_EXTENT_ITEM_KEY)
		at += sizeof(struct btrfs_tree_block_info);
	while (item_view_ptr(&v, at, sizeof(struct btrfs_extent_inline_ref))) {
		const uint8_t *ref = data + at;
		uint32_t len = extent_inline_ref_size(inline_ref_type(ref));
		if (!len)
			break;
		if (inline_ref_type(ref) == BTRFS_TREE_BLOCK_REF_KEY)
			add_root(r, inline_ref_offset(ref));
		at += len;
	}
}

int owner_refs_read(struct fs_info *fs, const struct tree_root_ptr *extent_root, uint64_t bytenr,
		    struct owner_refs *out)
{
	struct btrfs_key min = { bytenr, BTRFS_EXTENT_ITEM_KEY, 0 }, max = { bytenr, BTRFS_TREE_BLOCK_REF_KEY, (uint64_t)-1 };
	struct btrfs_key key;
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size;
	int ret;

	*out = (struct owner_refs){ .n = 0 };
	if (!extent_root->bytenr)
		return -ENOENT;
	tree_iter_init(&it, fs, extent_root, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &data, &size)) == 1) {
		if (key.type == BTRFS_EXTENT_ITEM_KEY || key.type == BTRFS_METADATA_ITEM_KEY)
			read_extent_item(out, &key, data, size);
		else if (key.type == BTRFS_TREE_BLOCK_REF_KEY)
			add_root(out, key.offset);
	}
	tree_iter_release(&it);
	return ret < 0 ? ret : 0;
}

bool owner_refs_hold(const struct owner_refs *r, uint64_t root)
{
	for (size_t i = 0; i < r->n; i++)
		if (r->roots[i] == root)
			return true;
	return r->more;   /* not known: taken as held */
}

int tree_reaches_block(struct fs_info *fs, const struct tree_root_ptr *root, const struct btrfs_key *key,
		       unsigned level, uint64_t bytenr)
{
	struct block_expect e = { .generation = root->generation, .level = root->level };
	struct tree_block *b, *child;
	unsigned slot = 0;
	int ret;

	if (root->bytenr == bytenr)
		return 1;
	if (root->level <= level)
		return 0;
	if ((ret = block_read(fs, root->bytenr, &e, &b)))
		return ret;
	for (;;) {
		struct btrfs_key k;
		/* the last child whose key is <= key */
		for (slot = 0; slot + 1 < block_nritems(b); slot++) {
			block_key(b, slot + 1, &k);
			if (key_compare(&k, key) > 0)
				break;
		}
		if (!block_nritems(b) || block_level(b) == level + 1)
			break;
		ret = block_read_child(fs, b, slot, &child);
		block_put(fs, b);
		if (ret)
			return ret;
		b = child;
	}
	ret = block_nritems(b) && key_ptr_blockptr(node_key_ptr(b->data, slot)) == bytenr;
	block_put(fs, b);
	return ret;
}
