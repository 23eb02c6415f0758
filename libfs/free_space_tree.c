// SPDX-License-Identifier: LGPL-2.1-or-later
/* The free-space tree (space_cache=v2) of every block group, built from the
 * extent tree in a transaction (btk-tune --enable free-space-tree, btk-check
 * --repair).
 *
 * Free space of a group = the group minus its extents (EXTENT_ITEM and
 * METADATA_ITEM ranges) minus the stripes that hold superblock copies
 * (fs_super_stripe_ranges, the allocator's own rule). Each group gets a
 * FREE_SPACE_INFO item and one FREE_SPACE_EXTENT item per free range (no
 * bitmaps: the kernel converts a group to bitmaps when it needs to).
 *
 * The extent tree read here is the transaction's, so blocks this transaction
 * allocates or frees are not in it yet: the commit rewrites the free-space
 * entries of every metadata group it allocated in or freed from, from the
 * allocator's map, once the tree exists in the transaction
 * (libfs/commit.c update_free_space_tree). The result reflects the blocks
 * used to build the tree itself.
 *
 * The v1 space cache goes, like btrfs-progs' btrfs_clear_v1_cache: for each
 * (FREE_SPACE_OBJECTID, 0, group) header in the root tree, the cache inode's
 * items and its data extents (extent item, block group and superblock
 * `used`). Only caches of the usual shape are removed (NODATASUM inode,
 * regular or prealloc extents each referenced once by it and by nothing
 * else); otherwise, and on mixed block groups, every cache is left in place
 * for the kernel, which removes v1 caches when it mounts with the
 * free-space tree. Either way cache_generation becomes (u64)-1, so the v1
 * cache is never trusted again. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <btk/blockgroups.h>
#include <btk/ebitmap.h>
#include <btk/free_space_tree.h>
#include <btk/item_check.h>
#include <btk/super.h>
#include <btk/tree.h>
#include <btk/volumes.h>
#include "libfs/volumes_internal.h"

#define MAX_SUPER_RANGES (3 * 16)

struct v1_cache {
	uint64_t group;              /* key offset of its header */
	uint64_t ino;                /* inode in the root tree */
};

struct v1_extent {
	uint64_t bytenr, len;
};

struct v1_plan {
	struct v1_cache *caches;
	size_t ncaches, caches_cap;
	struct v1_extent *extents;
	size_t nextents, extents_cap;
	struct btrfs_key *keys;      /* root-tree items to delete */
	size_t nkeys, keys_cap;
	bool removable;
	const char *why;             /* when not removable */
};

/* Room for one more element in an array of n with capacity *cap. */
static int grow(void **v, size_t n, size_t *cap, size_t elem)
{
	void *p;

	if (n < *cap)
		return 0;
	p = realloc(*v, (*cap ? *cap * 2 : 16) * elem);
	if (!p)
		return -ENOMEM;
	*v = p;
	*cap = *cap ? *cap * 2 : 16;
	return 0;
}

static int push_key(struct v1_plan *p, const struct btrfs_key *k)
{
	if (grow((void **)&p->keys, p->nkeys, &p->keys_cap, sizeof(*p->keys)))
		return -ENOMEM;
	p->keys[p->nkeys++] = *k;
	return 0;
}

static void plan_free(struct v1_plan *p)
{
	free(p->caches);
	free(p->extents);
	free(p->keys);
}

/* A data extent of a cache inode: removable when the cache inode is its one owner. */
static int check_extent(struct fs_info *fs, struct trans *t, const struct tree_root_ptr *extent_root,
			uint64_t ino, uint64_t bytenr, uint64_t len, struct v1_plan *p)
{
	uint8_t item[128];
	uint32_t size = sizeof(item);
	struct btrfs_key key = { bytenr, BTRFS_EXTENT_ITEM_KEY, len };
	const uint8_t *ref;
	int ret = tree_lookup(fs, extent_root, &key, item, &size);

	if (ret == -ENOENT) {
		p->removable = false;
		p->why = "a cache extent has no extent item";
		return 0;
	}
	if (ret)
		return ret;
	ref = item + sizeof(struct btrfs_extent_item);
	if (size != sizeof(struct btrfs_extent_item) + 1 + sizeof(struct btrfs_extent_data_ref) ||
	    extent_refs(item) != 1 || !(extent_flags(item) & BTRFS_EXTENT_FLAG_DATA) ||
	    inline_ref_type(ref) != BTRFS_EXTENT_DATA_REF_KEY ||
	    data_ref_root(ref + 1) != BTRFS_ROOT_TREE_OBJECTID ||
	    data_ref_objectid(ref + 1) != ino || data_ref_count(ref + 1) != 1) {
		p->removable = false;
		p->why = "a cache extent is shared or has unusual references";
		return 0;
	}
	if (grow((void **)&p->extents, p->nextents, &p->extents_cap, sizeof(*p->extents)))
		return -ENOMEM;
	p->extents[p->nextents++] = (struct v1_extent){ bytenr, len };
	return 0;
}

/* Every item of a cache inode, and its data extents. */
static int plan_inode(struct fs_info *fs, struct trans *t, const struct tree_root_ptr *root,
		      const struct tree_root_ptr *extent_root, uint64_t ino, struct v1_plan *p)
{
	struct btrfs_key min = { ino, 0, 0 }, max = { ino, 255, (uint64_t)-1 }, key;
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size;
	size_t first_extent = p->nextents;
	bool have_inode = false;
	int ret;

	tree_iter_init(&it, fs, root, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &data, &size)) == 1) {
		if ((ret = push_key(p, &key)))
			break;
		struct item_view v = item_view_of(data, size);

		if (key.type == BTRFS_INODE_ITEM_KEY) {
			have_inode = true;
			if (!item_view_has_fixed(&v, key.type) || !(inode_flags(data) & BTRFS_INODE_NODATASUM)) {
				p->removable = false;
				p->why = "a cache inode has data checksums";
			}
		} else if (key.type == BTRFS_EXTENT_DATA_KEY) {
			/* (an item of the bare header is an empty inline extent) */
			uint8_t type = size > BTRFS_FILE_EXTENT_INLINE_DATA_START ? file_extent_type_in(&v) : 0xff;
			if (type != BTRFS_FILE_EXTENT_REG && type != BTRFS_FILE_EXTENT_PREALLOC) {
				p->removable = false;
				p->why = "a cache inode has an inline extent";
				continue;
			}
			if (!ITEM_VIEW_STRUCT(&v, 0, struct btrfs_file_extent_item) || !file_extent_disk_bytenr(data))
				continue;
			for (size_t i = first_extent; i < p->nextents; i++)
				if (p->extents[i].bytenr == file_extent_disk_bytenr(data)) {
					p->removable = false;
					p->why = "a cache extent is referenced twice";
				}
			/* the iterator's data stays valid: lookups use their own path */
			ret = check_extent(fs, t, extent_root, ino, file_extent_disk_bytenr(data),
					   file_extent_disk_num_bytes(data), p);
			if (ret)
				break;
		}
	}
	tree_iter_release(&it);
	if (ret < 0)
		return ret;
	if (!have_inode) {
		p->removable = false;
		p->why = "a cache header points to no inode";
	}
	return 0;
}

static int plan_v1_removal(struct fs_info *fs, struct trans *t, struct v1_plan *p)
{
	struct btrfs_key min = { BTRFS_FREE_SPACE_OBJECTID, 0, 0 };
	struct btrfs_key max = { BTRFS_FREE_SPACE_OBJECTID, 0, (uint64_t)-1 }, key;
	struct tree_root_ptr root, extent_root;
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size;
	int ret;

	p->removable = true;
	if ((ret = trans_get_root(t, BTRFS_ROOT_TREE_OBJECTID, &root)) ||
	    (ret = trans_get_root(t, BTRFS_EXTENT_TREE_OBJECTID, &extent_root)))
		return ret;
	tree_iter_init(&it, fs, &root, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &data, &size)) == 1) {
		struct item_view v = item_view_of(data, size);
		struct btrfs_key loc;

		if (!ITEM_VIEW_STRUCT(&v, 0, struct btrfs_disk_key)) {
			p->removable = false;
			p->why = "a cache header is too small";
			continue;
		}
		key_from_disk(&loc, data);
		if ((ret = grow((void **)&p->caches, p->ncaches, &p->caches_cap, sizeof(*p->caches))) ||
		    (ret = push_key(p, &key)))
			break;
		p->caches[p->ncaches++] = (struct v1_cache){ key.offset, loc.objectid };
	}
	tree_iter_release(&it);
	if (ret < 0)
		return ret;
	if (p->ncaches && (fs->incompat & BTRFS_FEATURE_INCOMPAT_MIXED_GROUPS)) {
		p->removable = false;
		p->why = "mixed block groups";
	}
	for (size_t i = 0; i < p->ncaches && p->removable; i++) {
		ret = plan_inode(fs, t, &root, &extent_root, p->caches[i].ino, p);
		if (ret)
			return ret;
	}
	return 0;
}

/* One data extent gone: its extent item, and the used bytes it counted in. */
static int free_data_extent(struct fs_info *fs, struct trans *t, const struct v1_extent *e)
{
	const struct chunk *c = chunk_map_lookup(fs->chunks, e->bytenr);
	struct btrfs_key key = { e->bytenr, BTRFS_EXTENT_ITEM_KEY, e->len };
	uint64_t bg_tree = (fs->compat_ro & BTRFS_FEATURE_COMPAT_RO_BLOCK_GROUP_TREE) && fs->block_group_root.bytenr
				   ? BTRFS_BLOCK_GROUP_TREE_OBJECTID
				   : BTRFS_EXTENT_TREE_OBJECTID;
	struct tree_path path;
	uint8_t *item;
	uint32_t size;
	int ret;

	if (!c)
		return fs_error(fs, -EUCLEAN, "extent %llu is in no chunk", (unsigned long long)e->bytenr);
	ret = trans_delete_item(t, BTRFS_EXTENT_TREE_OBJECTID, &key);
	if (ret)
		return ret;
	key = (struct btrfs_key){ c->logical, BTRFS_BLOCK_GROUP_ITEM_KEY, c->length };
	tree_path_init(&path);
	ret = trans_item_for_update(t, bg_tree, &key, &item, &size, &path);
	if (ret == 0 && (size < sizeof(struct btrfs_block_group_item) || block_group_used(item) < e->len))
		ret = fs_error(fs, -EUCLEAN, "block group %llu: used bytes do not cover extent %llu",
			       (unsigned long long)c->logical, (unsigned long long)e->bytenr);
	if (ret == 0)
		block_group_set_used(item, block_group_used(item) - e->len);
	tree_path_release(fs, &path);
	if (ret)
		return ret;
	super_set_bytes_used(trans_super(t), super_bytes_used(trans_super(t)) - e->len);
	return 0;
}

static int remove_v1_cache(struct fs_info *fs, struct trans *t, const struct v1_plan *p, uint64_t *freed)
{
	int ret;

	for (size_t i = 0; i < p->nkeys; i++)
		if ((ret = trans_delete_item(t, BTRFS_ROOT_TREE_OBJECTID, &p->keys[i])))
			return ret;
	for (size_t i = 0; i < p->nextents; i++) {
		if ((ret = free_data_extent(fs, t, &p->extents[i])))
			return ret;
		*freed += p->extents[i].len;
	}
	return 0;
}

/* The free-space entries of one block group, from the extent tree as the
 * transaction has it now (its inserts may have changed that tree since the
 * group before: the queued references are applied when they are many). */
static int build_group(struct fs_info *fs, struct trans *t, const struct chunk *c, struct ebitmap *used,
		       uint64_t *nextents)
{
	struct tree_root_ptr extent_root;
	uint64_t end = c->logical + c->length, from, s, l;
	struct btrfs_key min = { c->logical, 0, 0 }, max = { end - 1, 255, (uint64_t)-1 }, key;
	uint64_t starts[MAX_SUPER_RANGES], lens[MAX_SUPER_RANGES];
	uint8_t info[sizeof(struct btrfs_free_space_info)];
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size, count = 0;
	int n, ret = trans_get_root(t, BTRFS_EXTENT_TREE_OBJECTID, &extent_root);

	if (ret)
		return ret;
	ebitmap_clear_all(used);
	tree_iter_init(&it, fs, &extent_root, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &data, &size)) == 1) {
		uint64_t len = extent_key_length(&key, fs->nodesize);
		if (!len)
			continue;
		if (key.objectid < c->logical || len > end - key.objectid) {
			ret = fs_error(fs, -EUCLEAN, "extent %llu+%llu crosses block group %llu",
				       (unsigned long long)key.objectid, (unsigned long long)len,
				       (unsigned long long)c->logical);
			break;
		}
		if ((ret = ebitmap_set(used, key.objectid, len)))
			break;
	}
	tree_iter_release(&it);
	if (ret < 0)
		return ret;
	n = fs_super_stripe_ranges(fs, c->logical, starts, lens, MAX_SUPER_RANGES);
	if (n < 0)
		return n;
	for (int i = 0; i < n; i++)
		if ((ret = ebitmap_set(used, starts[i], lens[i])))
			return ret;
	for (from = c->logical; from < end && ebitmap_next_clear(used, from, end, &s, &l) == 1; from = s + l) {
		key = (struct btrfs_key){ s, BTRFS_FREE_SPACE_EXTENT_KEY, l };
		if ((ret = trans_insert_item(t, BTRFS_FREE_SPACE_TREE_OBJECTID, &key, NULL, 0)))
			return ret;
		count++;
	}
	free_space_info_set_extent_count(info, count);
	free_space_info_set_flags(info, 0);
	key = (struct btrfs_key){ c->logical, BTRFS_FREE_SPACE_INFO_KEY, c->length };
	*nextents += count;
	return trans_insert_item(t, BTRFS_FREE_SPACE_TREE_OBJECTID, &key, info, sizeof(info));
}

int fst_build(struct fs_info *fs, struct trans *t, struct fst_build_stats *st)
{
	struct v1_plan plan = { 0 };
	struct tree_root_ptr old;
	struct ebitmap *used = NULL;
	uint8_t *sb = trans_super(t);
	int ret;

	memset(st, 0, sizeof(*st));
	ret = plan_v1_removal(fs, t, &plan);
	if (ret)
		goto out;
	if (plan.ncaches && plan.removable) {
		ret = remove_v1_cache(fs, t, &plan, &st->v1_freed);
		if (ret)
			goto out;
	}
	st->v1_caches = plan.ncaches;
	st->v1_removed = plan.ncaches && plan.removable;
	st->v1_why = plan.why;
	ret = trans_get_root(t, BTRFS_FREE_SPACE_TREE_OBJECTID, &old);
	if (ret == 0) {
		st->replaced = true;
		ret = trans_delete_tree(t, BTRFS_FREE_SPACE_TREE_OBJECTID);
	} else if (ret == -ENOENT) {
		ret = 0;
	}
	if (!ret)
		ret = trans_create_tree(t, BTRFS_FREE_SPACE_TREE_OBJECTID);
	if (ret)
		goto out;
	used = ebitmap_create(fs->sectorsize);
	if (!used) {
		ret = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < fs->chunks->count && !ret; i++)
		ret = build_group(fs, t, fs->chunks->chunks[i], used, &st->extents);
	if (ret)
		goto out;
	st->groups = fs->chunks->count;
	super_set_compat_ro_flags(sb, super_compat_ro_flags(sb) | BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE |
					      BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE_VALID);
	super_set_cache_generation(sb, (uint64_t)-1);
out:
	if (ret)
		fs_error(fs, ret, "building the free-space tree: %s", fs->errmsg);
	ebitmap_destroy(used);
	plan_free(&plan);
	return ret;
}
