// SPDX-License-Identifier: LGPL-2.1-or-later
/* The users of a data extent from its back references (btk/data_users.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include <btk/item_check.h>
#include <btk/data_users.h>
#include <btk/inode_path.h>
#include <btk/tree.h>

/* Items stepped over backwards (keyed references of earlier extents, block
 * group items) before giving up the search for the extent item. */
#define STEP_MAX 65536
/* File extent items of one inode looked at for the one a reference names. */
#define EXTENT_STEPS 256

struct users {
	struct fs_info *fs;
	uint64_t bytenr;
	struct data_user *out;
	size_t max, n;
	uint64_t more;
};

/* Where the file's first extent item on the extent starts: a data reference
 * keeps only that offset minus the extent offset (which wraps below 0 when a
 * file uses a later part of the extent only). The reference's offset (0 when
 * wrapped) when the subvolume tree does not tell. */
static uint64_t file_offset(struct users *u, uint64_t root_id, uint64_t ino, uint64_t ref_offset)
{
	uint64_t from = ref_offset >> 63 ? 0 : ref_offset;
	struct btrfs_key key = { ino, BTRFS_EXTENT_DATA_KEY, from };
	struct tree_root_ptr root;
	struct tree_path path;
	int ret;

	if (fs_find_root(u->fs, root_id, &root) || !root.bytenr) {
		u->fs->errmsg[0] = 0;
		return from;
	}
	tree_path_init(&path);
	ret = tree_search(u->fs, &root, &key, &path);
	for (unsigned steps = 0; ret == 0 && steps < EXTENT_STEPS; steps++) {
		uint32_t size;
		const uint8_t *d = tree_item_data(&path, &size);
		struct item_view v = item_view_of(d, size);

		tree_item_key(&path, &key);
		if (key.objectid != ino || key.type != BTRFS_EXTENT_DATA_KEY)
			break;
		if (ITEM_VIEW_STRUCT(&v, 0, struct btrfs_file_extent_item) && file_extent_type(d) != BTRFS_FILE_EXTENT_INLINE &&
		    file_extent_disk_bytenr(d) == u->bytenr && key.offset - file_extent_offset(d) == ref_offset) {
			from = key.offset;
			break;
		}
		ret = tree_next(u->fs, &path);
	}
	if (ret < 0)
		u->fs->errmsg[0] = 0;
	tree_path_release(u->fs, &path);
	return from;
}

/* One user, unless it is there already (a shared leaf repeats what a
 * subvolume's own reference names). */
static void add(struct users *u, uint64_t root, uint64_t ino, uint64_t offset)
{
	for (size_t i = 0; i < u->n; i++)
		if (u->out[i].root == root && u->out[i].ino == ino && u->out[i].offset == offset)
			return;
	if (u->n < u->max)
		u->out[u->n++] = (struct data_user){ root, ino, offset };
	else
		u->more++;
}

/* An EXTENT_DATA_REF (its body at d). */
static void add_ref(struct users *u, const uint8_t *d)
{
	uint64_t root = data_ref_root(d), ino = data_ref_objectid(d);

	if (u->n >= u->max)   /* past the bound: counted without a lookup */
		u->more++;
	else
		add(u, root, ino, file_offset(u, root, ino, data_ref_offset(d)));
}

/* A shared reference: the file extents of the parent leaf that point at the
 * extent, under the leaf's owner. A leaf that does not read is skipped. */
static void add_shared(struct users *u, uint64_t parent)
{
	struct block_expect leaf = { .generation = 0, .level = 0 };
	struct tree_block *b;

	if (u->n >= u->max) {   /* past the bound: count, do not read */
		u->more++;
		return;
	}
	if (block_read(u->fs, parent, &leaf, &b)) {
		u->fs->errmsg[0] = 0;
		return;
	}
	for (unsigned i = 0; i < block_nritems(b); i++) {
		struct item_view v = leaf_item_view(b->data, i);
		const uint8_t *d = ITEM_VIEW_STRUCT(&v, 0, struct btrfs_file_extent_item);
		struct btrfs_key k;
		block_key(b, i, &k);
		if (k.type != BTRFS_EXTENT_DATA_KEY || !d ||
		    file_extent_type(d) == BTRFS_FILE_EXTENT_INLINE || file_extent_disk_bytenr(d) != u->bytenr)
			continue;
		add(u, block_owner(b), k.objectid, k.offset);
	}
	block_put(u->fs, b);
}

/* The inline references after the extent item header (a data extent's: no
 * tree block info), up to the first that does not fit. */
static void add_inline(struct users *u, const uint8_t *d, uint32_t size)
{
	struct item_view v = item_view_of(d, size);
	uint32_t pos = sizeof(struct btrfs_extent_item);
	struct inline_ref_view r;

	while (inline_ref_next(&v, &pos, &r) == 1) {
		if (r.type == BTRFS_EXTENT_DATA_REF_KEY)
			add_ref(u, r.body);
		else if (r.type == BTRFS_SHARED_DATA_REF_KEY)
			add_shared(u, get_le64(r.body));
	}
}

/* Position path at the data extent item that holds logical. 0 or -errno. */
static int find_extent(struct fs_info *fs, uint64_t logical, struct tree_path *path, struct btrfs_key *ek)
{
	struct btrfs_key key = { logical, BTRFS_EXTENT_ITEM_KEY, UINT64_MAX };
	int ret = tree_search_le(fs, &fs->extent_root, &key, path);

	for (unsigned steps = 0; ret == 0 && steps < STEP_MAX; steps++) {
		tree_item_key(path, ek);
		if (ek->type == BTRFS_EXTENT_ITEM_KEY || ek->type == BTRFS_METADATA_ITEM_KEY) {
			uint32_t size;
			const uint8_t *d = tree_item_data(path, &size);
			struct item_view v = item_view_of(d, size);

			if (ek->type != BTRFS_EXTENT_ITEM_KEY || logical - ek->objectid >= ek->offset ||
			    !(extent_flags_in(&v) & BTRFS_EXTENT_FLAG_DATA) || v.past_end)
				return -ENOENT;
			return 0;
		}
		ret = tree_prev(fs, path);
	}
	return ret < 0 ? ret : -ENOENT;
}

int data_users_find(struct fs_info *fs, uint64_t logical, struct data_user *out, size_t max, size_t *n,
		    uint64_t *more, uint64_t *start, uint64_t *len)
{
	struct users u = { .fs = fs, .out = out, .max = max };
	struct tree_path path;
	struct btrfs_key key;
	const uint8_t *d;
	struct item_view v;
	uint32_t size;
	int ret;

	*n = 0;
	*more = 0;
	tree_path_init(&path);
	ret = find_extent(fs, logical, &path, &key);
	if (ret)
		goto out;
	u.bytenr = *start = key.objectid;
	*len = key.offset;
	d = tree_item_data(&path, &size);
	add_inline(&u, d, size);
	/* the keyed references follow the extent item */
	while ((ret = tree_next(fs, &path)) == 0) {
		tree_item_key(&path, &key);
		if (key.objectid != u.bytenr)
			break;
		d = tree_item_data(&path, &size);
		v = item_view_of(d, size);
		if (key.type == BTRFS_EXTENT_DATA_REF_KEY && item_view_has_fixed(&v, key.type))
			add_ref(&u, d);
		else if (key.type == BTRFS_SHARED_DATA_REF_KEY)
			add_shared(&u, key.offset);
	}
	ret = ret < 0 ? ret : 0;
	*n = u.n;
	*more = u.more;
out:
	tree_path_release(fs, &path);
	return ret;
}

void data_user_describe(struct fs_info *fs, const struct data_user *u, char *buf, size_t len)
{
	struct tree_root_ptr root;
	char path[512];

	if (fs_find_root(fs, u->root, &root) || !root.bytenr) {
		fs->errmsg[0] = 0;
		snprintf(path, sizeof(path), "(no subvolume tree)");
	} else if (inode_path(fs, &root, u->ino, path, sizeof(path)) < 0) {
		fs->errmsg[0] = 0;
	}
	snprintf(buf, len, "subvolume %" PRIu64 " inode %" PRIu64 " %s at offset %" PRIu64, u->root, u->ino, path,
		 u->offset);
}
