// SPDX-License-Identifier: GPL-2.0-only
/* Part of the root-items class: a subvolume that root refs name but whose
 * root item is gone (root-dir-entry-dangling) gets a new root item when its
 * tree is still there: the extent tree names its root block (the one block
 * of the top level with a tree-block reference from the subvolume), which
 * reads with that owner. The uuid and received uuid come from the uuid tree
 * where it maps one to the subvolume; the rest is what the kernel writes for
 * a new subvolume, with last_snapshot the filesystem's generation (every
 * block may then be shared, which the kernel verifies before it frees one)
 * and no read-only flag (which is lost). Without that, the extent-refs class
 * would free the subvolume's blocks and the names would lead nowhere.
 * A tree the kernel needs (dev, fs, csum, free-space, block-group, data
 * relocation; the quota and uuid trees too) whose root item is gone, most
 * often keyed wrong and dropped by the salvage, gets one again the same way,
 * with what mkfs writes in it. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "check/repair.h"
#include "check/root_outdated.h"
#include "common/grow.h"
#include <btk/block.h>
#include <btk/key.h>
#include <btk/tree.h>

struct named_ids {
	uint64_t *v;               /* subvolumes root refs name, then those with a root item */
	size_t n, cap;
	uint64_t *have;
	size_t nhave, hcap;
};

static int push(uint64_t **v, size_t *n, size_t *cap, uint64_t id)
{
	uint64_t *p = grow_array(*v, cap, *n, sizeof(*p), 32);

	if (!p)
		return -ENOMEM;
	*v = p;
	p[(*n)++] = id;
	return 0;
}

static int scan_root_tree(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct named_ids *s = arg;

	(void)d, (void)size;
	if (k->type == BTRFS_ROOT_ITEM_KEY)
		return push(&s->have, &s->nhave, &s->hcap, k->objectid);
	if (k->type == BTRFS_ROOT_REF_KEY && k->offset >= BTRFS_FIRST_FREE_OBJECTID && key_is_subvolume_id(k->offset))
		return push(&s->v, &s->n, &s->cap, k->offset);
	if (k->type == BTRFS_ROOT_BACKREF_KEY && key_is_subvolume_id(k->objectid) &&
	    k->objectid >= BTRFS_FIRST_FREE_OBJECTID)
		return push(&s->v, &s->n, &s->cap, k->objectid);
	return 0;
}

struct uuid_find {
	uint64_t id;
	uint8_t uuid[BTRFS_UUID_SIZE], received[BTRFS_UUID_SIZE];
	unsigned found, found_received;
};

static int scan_uuid(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct uuid_find *u = arg;
	bool subvol = k->type == BTRFS_UUID_KEY_SUBVOL;

	if (!subvol && k->type != BTRFS_UUID_KEY_RECEIVED_SUBVOL)
		return 0;
	for (uint32_t off = 0; off + 8 <= size; off += 8) {
		if (get_le64(d + off) != u->id)
			continue;
		uint8_t *dst = subvol ? u->uuid : u->received;
		put_le64(dst, k->objectid);
		put_le64(dst + 8, k->offset);
		(*(subvol ? &u->found : &u->found_received))++;
	}
	return 0;
}

/* The uuids the uuid tree maps to subvolume id (one each at most; else none). */
static void find_uuids(struct repair_ctx *r, struct uuid_find *u)
{
	struct tree_root_ptr rp;

	if (trans_get_root(r->t, BTRFS_UUID_TREE_OBJECTID, &rp) || tree_each_item(r->fs, &rp, scan_uuid, u) < 0) {
		btk_error_clear();
		u->found = u->found_received = 0;
	}
	if (u->found != 1)
		memset(u->uuid, 0, sizeof(u->uuid));
	if (u->found_received != 1)
		memset(u->received, 0, sizeof(u->received));
}

static int make_root_item(struct repair_ctx *r, uint64_t id, const struct root_fix *f, bool subvol)
{
	struct btrfs_key key = { id, BTRFS_ROOT_ITEM_KEY, 0 };
	uint8_t item[sizeof(struct btrfs_root_item)] = { 0 };
	uint8_t *inode = root_item_inode_ptr(item);
	struct uuid_find u = { .id = id };
	uint64_t now = (uint64_t)time(NULL);
	int ret;

	if (subvol)
		find_uuids(r, &u);
	inode_set_generation(inode, 1);
	inode_set_size(inode, 3);
	inode_set_nlink(inode, 1);
	inode_set_nbytes(inode, r->fs->nodesize);
	inode_set_mode(inode, S_IFDIR | 0755);
	root_item_set_generation(item, f->new_generation);
	if (subvol || id == BTRFS_DATA_RELOC_TREE_OBJECTID)
		root_item_set_root_dirid(item, BTRFS_FIRST_FREE_OBJECTID);
	root_item_set_bytenr(item, f->new_bytenr);
	root_item_set_bytes_used(item, r->fs->nodesize);
	if (subvol)
		root_item_set_last_snapshot(item, r->fs->generation);
	root_item_set_refs(item, 1);
	root_item_set_level(item, f->new_level);
	root_item_set_generation_v2(item, f->new_generation);
	memcpy(root_item_uuid_ptr(item), u.uuid, BTRFS_UUID_SIZE);
	memcpy(root_item_received_uuid_ptr(item), u.received, BTRFS_UUID_SIZE);
	if (subvol) {
		root_item_set_ctransid(item, f->new_generation);
		timespec_set_sec(root_item_ctime_ptr(item), now);
	}
	if ((ret = trans_insert_item(r->t, BTRFS_ROOT_TREE_OBJECTID, &key, item, sizeof(item))))
		return ret;
	r->changes++;
	repair_say(r, "%s %" PRIu64 ": root item made again for root block %" PRIu64 " (generation %" PRIu64
		   ", level %u)%s", subvol ? "subvolume" : "tree", id, f->new_bytenr, f->new_generation, f->new_level,
		   u.found == 1 ? ", uuid from the uuid tree" : "");
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* One subvolume named (or a tree the kernel needs: adopt, and !subvol but for the fs tree) but without a
 * root item. A tree the extent tree names no root block for is left to the
 * class that makes it anew (dev-extents, csums, free-space-tree,
 * data-reloc-tree, uuid-tree), or was never there (the quota tree). */
static int recreate(struct repair_ctx *r, uint64_t id, bool subvol, bool adopt)
{
	struct root_fix f;
	struct block_expect e;
	struct tree_block *b;
	int ret = root_block_find(r->fs, id, &f);

	if (ret <= 0 && !subvol) {
		btk_error_clear();
		return ret < 0 && ret != -EIO ? ret : 0;
	}
	if (ret <= 0) {
		btk_error_clear();
		r->left++;
		repair_say(r, "subvolume %" PRIu64 " has root refs but no root item, and the extent tree names no one "
			   "root block for it: left", id);
		return ret < 0 && ret != -EIO ? ret : 0;
	}
	e = (struct block_expect){ .generation = f.new_generation, .level = f.new_level, .owner = id };
	if (f.new_generation > r->fs->generation || block_read(r->fs, f.new_bytenr, &e, &b)) {
		btk_error_clear();
		r->left++;
		repair_say(r, "%s %" PRIu64 ": its root block %" PRIu64 " does not read as its root: left",
			   subvol ? "subvolume" : "tree", id, f.new_bytenr);
		return 0;
	}
	ret = b->salvaged;
	block_put(r->fs, b);
	if (ret) {
		r->left++;
		return 0;
	}
	if ((ret = make_root_item(r, id, &f, subvol)) || !adopt)
		return ret;
	/* the trees the filesystem keeps open: the check that runs again after this class reads them */
	return trans_adopt_root(r->t, &(struct tree_root_ptr){ .objectid = id, .bytenr = f.new_bytenr,
							       .generation = f.new_generation, .level = f.new_level });
}

int repair_root_items_recreate(struct repair_ctx *r)
{
	/* the trees other than the extent tree (found through itself) whose root item a damaged key
	 * took (the salvage drops it): the extent tree names their root block by its owner */
	static const uint64_t global[] = { BTRFS_DEV_TREE_OBJECTID, BTRFS_FS_TREE_OBJECTID,
					   BTRFS_CSUM_TREE_OBJECTID, BTRFS_QUOTA_TREE_OBJECTID,
					   BTRFS_UUID_TREE_OBJECTID, BTRFS_FREE_SPACE_TREE_OBJECTID,
					   BTRFS_BLOCK_GROUP_TREE_OBJECTID, BTRFS_DATA_RELOC_TREE_OBJECTID };
	struct named_ids s = { 0 };
	struct tree_root_ptr rp;
	int ret = trans_get_root(r->t, BTRFS_ROOT_TREE_OBJECTID, &rp);

	if (!ret)
		ret = tree_each_item(r->fs, &rp, scan_root_tree, &s);
	if (!ret && s.nhave)
		qsort(s.have, s.nhave, sizeof(*s.have), cmp_u64);
	if (!ret && s.n) {
		qsort(s.v, s.n, sizeof(*s.v), cmp_u64);
	}
	for (size_t i = 0; !ret && i < s.n; i++)
		if ((i == 0 || s.v[i] != s.v[i - 1]) && !(s.nhave && bsearch(&s.v[i], s.have, s.nhave,
									  sizeof(*s.have), cmp_u64)))
			ret = recreate(r, s.v[i], true, false);
	for (size_t i = 0; !ret && i < sizeof(global) / sizeof(global[0]); i++)
		if (!s.nhave || !bsearch(&global[i], s.have, s.nhave, sizeof(*s.have), cmp_u64))
			ret = recreate(r, global[i], global[i] == BTRFS_FS_TREE_OBJECTID, true);
	free(s.v);
	free(s.have);
	return ret < 0 ? ret : 0;
}
