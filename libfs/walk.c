/* Depth-first walk of a tree with an explicit stack (no recursion, one
 * referenced block per level), and the list of trees to walk. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "libfs/prefetch.h"
#include "libfs/tree.h"
#include "libfs/walk.h"

struct walk_level {
	struct tree_block *block;
	unsigned next_slot;
};

/* A node is about to have its children read: announce them. */
static int walk_prefetch(struct fs_info *fs, const struct tree_walk_ops *ops, const struct tree_walk_prefetch *pf,
			 const struct tree_block *node)
{
	struct prefetch_filter f = { .first = 0, .end = block_nritems(node), .all_copies = pf->all_copies,
				     .skip = pf->skip, .one_copy = pf->one_copy, .arg = ops->arg };

	return block_prefetch_children(fs, node, &f);
}

int tree_walk(struct fs_info *fs, const struct tree_root_ptr *root, const struct tree_walk_ops *ops,
	      uint64_t *bad_blocks)
{
	static const struct tree_walk_prefetch first_copies = { false, NULL, NULL };

	return tree_walk_prefetching(fs, root, ops, &first_copies, bad_blocks);
}

int tree_walk_prefetching(struct fs_info *fs, const struct tree_root_ptr *root, const struct tree_walk_ops *ops,
			  const struct tree_walk_prefetch *pf, uint64_t *bad_blocks)
{
	struct walk_level stack[BTRFS_MAX_LEVEL];
	struct block_expect e = { .generation = root->generation, .level = root->level };
	struct tree_block *b;
	uint64_t bad = 0;
	int depth = 0, ret;

	if (bad_blocks)
		*bad_blocks = 0;
	ret = block_read(fs, root->bytenr, &e, &b);
	if (ret)
		return ret;
	ret = ops->visit(ops->arg, b);
	if (ret < 0 || ret == 1 || block_level(b) == 0) {
		block_put(fs, b);
		return ret < 0 ? ret : 0;
	}
	stack[0] = (struct walk_level){ b, 0 };
	ret = walk_prefetch(fs, ops, pf, b);
	while (depth >= 0 && !ret) {
		struct walk_level *top = &stack[depth];
		struct tree_block *child;
		int r;

		if (top->next_slot >= block_nritems(top->block)) {
			block_put(fs, top->block);
			depth--;
			continue;
		}
		r = block_read_child(fs, top->block, top->next_slot++, &child);
		if (r) {
			const uint8_t *ptr = node_key_ptr(top->block->data, top->next_slot - 1);
			bad++;
			if (r == -ENOMEM) {
				ret = r;
				break;
			}
			if (ops->bad_block)
				ops->bad_block(ops->arg, key_ptr_blockptr(ptr), (int)block_level(top->block) - 1,
					       r, fs->errmsg);
			continue;
		}
		r = ops->visit(ops->arg, child);
		if (r < 0) {
			block_put(fs, child);
			ret = r;
			break;
		}
		if (r == 1 || block_level(child) == 0 || depth + 1 >= BTRFS_MAX_LEVEL) {
			block_put(fs, child);
			continue;
		}
		stack[++depth] = (struct walk_level){ child, 0 };
		ret = walk_prefetch(fs, ops, pf, child);
	}
	for (; depth >= 0; depth--)
		block_put(fs, stack[depth].block);
	if (bad_blocks)
		*bad_blocks = bad;
	return ret;
}

static int tree_list_push(struct fs_tree_list *list, const struct tree_root_ptr *root)
{
	struct tree_root_ptr *v = realloc(list->roots, (list->count + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	list->roots = v;
	list->roots[list->count++] = *root;
	return 0;
}

/* The log root tree (from the superblock; its transid is not recorded, so
 * generation 0) and the per-subvolume log trees its root items point at. */
static int list_log_trees(struct fs_info *fs, struct fs_tree_list *out)
{
	struct tree_root_ptr log = { BTRFS_TREE_LOG_OBJECTID, super_log_root(fs->super), 0,
				     super_log_root_level(fs->super) };
	struct btrfs_key min = { 0, 0, 0 }, max = { (uint64_t)-1, 255, (uint64_t)-1 }, key;
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size;
	int ret = tree_list_push(out, &log);

	if (ret)
		return ret;
	tree_iter_init(&it, fs, &log, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &data, &size)) == 1) {
		struct tree_root_ptr r = { key.objectid, 0, 0, 0 };
		if (key.type != BTRFS_ROOT_ITEM_KEY || size < BTRFS_ROOT_ITEM_V1_SIZE)
			continue;
		r.bytenr = root_item_bytenr(data);
		r.generation = root_item_generation(data);
		r.level = root_item_level(data);
		if (!r.bytenr || r.level >= BTRFS_MAX_LEVEL)
			continue;
		if ((ret = tree_list_push(out, &r)))
			break;
	}
	tree_iter_release(&it);
	return ret < 0 ? ret : 0;
}

int fs_list_trees(struct fs_info *fs, struct fs_tree_list *out)
{
	struct btrfs_key min = { 0, 0, 0 }, max = { (uint64_t)-1, 255, (uint64_t)-1 }, key;
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size;
	int ret;

	memset(out, 0, sizeof(*out));
	if ((ret = tree_list_push(out, &fs->tree_root)) || (ret = tree_list_push(out, &fs->chunk_root)))
		goto fail;
	tree_iter_init(&it, fs, &fs->tree_root, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &data, &size)) == 1) {
		struct tree_root_ptr r;
		if (key.type != BTRFS_ROOT_ITEM_KEY || size < BTRFS_ROOT_ITEM_V1_SIZE)
			continue;
		r.objectid = key.objectid;
		r.bytenr = root_item_bytenr(data);
		r.generation = root_item_generation(data);
		r.level = root_item_level(data);
		if (!r.bytenr || r.level >= BTRFS_MAX_LEVEL)
			continue;
		if ((ret = tree_list_push(out, &r)))
			break;
	}
	tree_iter_release(&it);
	if (ret < 0)
		goto fail;
	if (super_log_root(fs->super)) {
		ret = list_log_trees(fs, out);
		if (ret)
			goto fail;
	}
	return 0;
fail:
	fs_tree_list_free(out);
	return ret;
}

void fs_tree_list_free(struct fs_tree_list *list)
{
	free(list->roots);
	list->roots = NULL;
	list->count = 0;
}
