// SPDX-License-Identifier: LGPL-2.1-or-later
/* Commit: bring the derived metadata in step (extent references, root items,
 * block group items, the free-space tree) until nothing changes any more,
 * then write every dirty block to every copy, flush, write the superblocks,
 * flush. The superblock write is the commit point. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <btk/blockgroups.h>
#include <btk/csum.h>
#include <btk/ebitmap.h>
#include <btk/item_check.h>
#include <btk/super.h>
#include "libfs/trans_internal.h"
#include <btk/tree.h>
#include <btk/volumes.h>

#define COMMIT_MAX_ROUNDS 64

/* The key of a tree's root item: a snapshot's carries the generation it
 * was made in as its offset, other trees' 0. */
static int root_item_key(struct trans *t, uint64_t objectid, struct btrfs_key *key)
{
	struct btrfs_key min = { objectid, BTRFS_ROOT_ITEM_KEY, 0 }, max = { objectid, BTRFS_ROOT_ITEM_KEY, (uint64_t)-1 };
	struct tree_root_ptr root;
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size;
	int ret = trans_get_root(t, BTRFS_ROOT_TREE_OBJECTID, &root);

	if (ret)
		return ret;
	tree_iter_init(&it, t->fs, &root, &min, &max);
	ret = tree_iter_next(&it, key, &data, &size);
	tree_iter_release(&it);
	return ret == 1 ? 0 : ret == 0 ? -ENOENT : ret;
}

/* Root items of changed trees (the root and chunk trees live in the superblock). */
static int update_root_items(struct trans *t)
{
	for (size_t i = 0; i < trans_root_count(t); i++) {
		struct trans_root *r = trans_root_at(t, i);
		struct btrfs_key key;
		struct tree_path path;
		uint8_t *item;
		uint32_t size;
		int ret;

		if (!r->changed || r->deleted || r->ptr.objectid == BTRFS_ROOT_TREE_OBJECTID ||
		    r->ptr.objectid == BTRFS_CHUNK_TREE_OBJECTID)
			continue;
		r->changed = false;
		ret = root_item_key(t, r->ptr.objectid, &key);
		if (ret)
			return ret == -ENOENT ? fs_error(t->fs, -EUCLEAN, "tree %llu has no root item",
							 (unsigned long long)r->ptr.objectid) : ret;
		tree_path_init(&path);
		ret = trans_item_for_update(t, BTRFS_ROOT_TREE_OBJECTID, &key, &item, &size, &path);
		if (ret == 0 && !item_has_fixed(BTRFS_ROOT_ITEM_KEY, size))
			ret = fs_error(t->fs, -EUCLEAN, "root item %llu too small",
				       (unsigned long long)r->ptr.objectid);
		if (ret == 0) {
			root_item_set_bytenr(item, r->ptr.bytenr);
			root_item_set_generation(item, r->ptr.generation);
			root_item_set_level(item, r->ptr.level);
			root_item_set_bytes_used(item, root_item_bytes_used(item) + (uint64_t)r->bytes_delta);
			r->bytes_delta = 0;
			if (size >= offsetof(struct btrfs_root_item, uuid))
				root_item_set_generation_v2(item, r->ptr.generation);
		}
		tree_path_release(t->fs, &path);
		if (ret)
			return ret;
	}
	return 0;
}

static int update_block_group_items(struct trans *t)
{
	uint64_t tree = trans_block_group_tree(t);

	for (size_t i = 0; i < alloc_group_count(t); i++) {
		struct alloc_group *g = alloc_group_at(t, i);
		struct btrfs_key key = { g->start, BTRFS_BLOCK_GROUP_ITEM_KEY, g->length };
		struct tree_path path;
		uint8_t *item;
		uint32_t size;
		int ret;

		if (g->used_delta == g->written_delta)
			continue;
		tree_path_init(&path);
		ret = trans_item_for_update(t, tree, &key, &item, &size, &path);
		if (ret == -ENOENT && (super_flags(t->super) & BTRFS_SUPER_FLAG_CHANGING_BG_TREE)) {
			/* a conversion in batches: the item may still be in the other tree */
			tree_path_release(t->fs, &path);
			ret = trans_item_for_update(t, tree == BTRFS_EXTENT_TREE_OBJECTID ? BTRFS_BLOCK_GROUP_TREE_OBJECTID
									    : BTRFS_EXTENT_TREE_OBJECTID,
						    &key, &item, &size, &path);
		}
		if (ret == 0 && !item_has_fixed(key.type, size))
			ret = -EUCLEAN;
		if (ret == 0) {
			block_group_set_used(item, block_group_used(item) + (uint64_t)(g->used_delta - g->written_delta));
			g->written_delta = g->used_delta;
		}
		tree_path_release(t->fs, &path);
		if (ret)
			return ret == -ENOENT ? fs_error(t->fs, -EUCLEAN, "block group %llu has no item",
							 (unsigned long long)g->start) : ret;
	}
	return 0;
}

/* The free-space-tree items of a group as the transaction sees them now. */
struct fst_items {
	struct btrfs_key *keys;
	size_t n, cap;
	bool bitmaps;          /* any bitmap item, or the info says bitmaps */
	bool have_info;
};

static int fst_collect(struct trans *t, struct alloc_group *g, struct fst_items *out)
{
	struct btrfs_key min = { g->start, 0, 0 }, max = { g->start + g->length - 1, 255, (uint64_t)-1 }, key;
	struct tree_root_ptr root;
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size;
	int ret = trans_get_root(t, BTRFS_FREE_SPACE_TREE_OBJECTID, &root);

	memset(out, 0, sizeof(*out));
	if (ret)
		return ret;
	tree_iter_init(&it, t->fs, &root, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &data, &size)) == 1) {
		if (key.type == BTRFS_FREE_SPACE_INFO_KEY) {
			struct item_view v = item_view_of(data, size);

			out->have_info = true;
			/* (flags ends the struct: a short item reads as 0) */
			if (free_space_info_flags_in(&v) & BTRFS_FREE_SPACE_USING_BITMAPS)
				out->bitmaps = true;
			continue;
		}
		if (key.type == BTRFS_FREE_SPACE_BITMAP_KEY)
			out->bitmaps = true;
		if (out->n == out->cap) {
			size_t cap = out->cap ? out->cap * 2 : 64;
			struct btrfs_key *v = realloc(out->keys, cap * sizeof(*v));
			if (!v) {
				ret = -ENOMEM;
				break;
			}
			out->keys = v;
			out->cap = cap;
		}
		out->keys[out->n++] = key;
	}
	tree_iter_release(&it);
	if (ret < 0) {
		free(out->keys);
		out->keys = NULL;
	}
	return ret < 0 ? ret : 0;
}

/* Bring a group's free-space-tree items in line with the allocator's map,
 * touching only what differs, so that repeated rounds of the commit loop
 * settle: an allocation made by this very update changes one extent, and
 * the next round changes only that one. Bitmap items are replaced by extents. */
static int fst_sync_group(struct trans *t, struct alloc_group *g)
{
	uint8_t info[sizeof(struct btrfs_free_space_info)];
	uint64_t from = g->start, end = g->start + g->length, s, l;
	struct btrfs_key info_key = { g->start, BTRFS_FREE_SPACE_INFO_KEY, g->length };
	struct fst_items have;
	size_t i = 0;
	uint32_t count = 0;
	int ret;

	g->fst_stale = false;
	ret = fst_collect(t, g, &have);
	if (ret)
		return ret;
	/* merge the sorted existing keys with the sorted wanted extents */
	for (;;) {
		bool more = from < end && ebitmap_next_clear(g->used, from, end, &s, &l) == 1;
		struct btrfs_key want = { s, BTRFS_FREE_SPACE_EXTENT_KEY, l };
		while (i < have.n && (!more || key_compare(&have.keys[i], &want) < 0)) {
			ret = trans_delete_item(t, BTRFS_FREE_SPACE_TREE_OBJECTID, &have.keys[i++]);
			if (ret)
				goto out;
		}
		if (!more)
			break;
		count++;
		from = s + l;
		if (i < have.n && key_compare(&have.keys[i], &want) == 0) {
			i++;
			continue;
		}
		ret = trans_insert_item(t, BTRFS_FREE_SPACE_TREE_OBJECTID, &want, NULL, 0);
		if (ret)
			goto out;
	}
	free_space_info_set_extent_count(info, count);
	free_space_info_set_flags(info, 0);
	ret = have.have_info ? trans_update_item(t, BTRFS_FREE_SPACE_TREE_OBJECTID, &info_key, info, sizeof(info))
			     : trans_insert_item(t, BTRFS_FREE_SPACE_TREE_OBJECTID, &info_key, info, sizeof(info));
out:
	free(have.keys);
	return ret;
}

/* Free-space items wholly below the lowest chunk: mkfs leaves them of its
 * temporary chunks (6.14 with DUP metadata, and older versions). No block
 * group owns them, the kernel never reads them, and btrfs check 7.x reports
 * them; every commit drops them, as it keeps the rest of the tree exact. */
static int drop_fst_below_chunks(struct trans *t, const struct tree_root_ptr *fst)
{
	const struct chunk *lowest = fs_chunk(t->fs, 0);
	struct btrfs_key min = { 0, 0, 0 }, max, key, *keys = NULL;
	struct tree_iter it;
	const uint8_t *data;
	size_t n = 0, cap = 0;
	uint32_t size;
	int ret;

	if (!lowest || !lowest->logical)
		return 0;
	max = (struct btrfs_key){ lowest->logical - 1, 255, (uint64_t)-1 };
	tree_iter_init(&it, t->fs, fst, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &data, &size)) == 1) {
		if (key.type != BTRFS_FREE_SPACE_INFO_KEY && key.type != BTRFS_FREE_SPACE_EXTENT_KEY &&
		    key.type != BTRFS_FREE_SPACE_BITMAP_KEY)
			continue;
		if (!key.offset || key.objectid + key.offset < key.objectid || key.objectid + key.offset > lowest->logical)
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			struct btrfs_key *v = realloc(keys, ncap * sizeof(*v));
			if (!v) {
				ret = -ENOMEM;
				break;
			}
			keys = v;
			cap = ncap;
		}
		keys[n++] = key;
	}
	tree_iter_release(&it);
	for (size_t i = 0; ret >= 0 && i < n; i++)
		ret = trans_delete_item(t, BTRFS_FREE_SPACE_TREE_OBJECTID, &keys[i]);
	free(keys);
	return ret < 0 ? ret : 0;
}

/* The flag and the tree as this transaction will commit them: a transaction
 * may create the free-space tree (btk-tune) or delete it. A group whose blocks
 * were only freed was never loaded by the allocator: load it now. */
static int update_free_space_tree(struct trans *t)
{
	struct tree_root_ptr fst;
	int ret;

	if (!(super_compat_ro_flags(t->super) & BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE))
		return 0;
	ret = trans_get_root(t, BTRFS_FREE_SPACE_TREE_OBJECTID, &fst);
	if (ret == -ENOENT)
		return 0;
	if (ret || (ret = drop_fst_below_chunks(t, &fst)))
		return ret;
	for (size_t i = 0; i < alloc_group_count(t); i++) {
		struct alloc_group *g = alloc_group_at(t, i);
		if (!g->fst_stale)
			continue;
		if (!g->used && (ret = alloc_group_load(t, g)))
			return ret;
		ret = fst_sync_group(t, g);
		if (ret)
			return ret;
	}
	return 0;
}

/* The kernel reads the root tree expecting the superblock's generation
 * (else "parent transid verify failed"): every commit writes a new root of
 * the root tree, also one that changes nothing but superblock fields. */
static int cow_root_tree(struct trans *t)
{
	struct btrfs_key key = { 0, 0, 0 };
	struct tree_root_ptr root;
	struct tree_path path;
	int ret = trans_get_root(t, BTRFS_ROOT_TREE_OBJECTID, &root);

	if (ret || root.generation == t->transid)
		return ret;
	tree_path_init(&path);
	ret = trans_search(t, BTRFS_ROOT_TREE_OBJECTID, &key, 0, &path);
	tree_path_release(t->fs, &path);
	return ret < 0 ? ret : 0;
}

/* The rounds apply the queued references themselves: none in between. */
static int commit_rounds(struct trans *t)
{
	for (int round = 0; round < COMMIT_MAX_ROUNDS; round++) {
		uint64_t events = alloc_events(t);
		int ret;

		if ((ret = chunk_alloc_write_items(t)) || (ret = extent_refs_run(t)) || (ret = trans_squota_apply(t)) ||
		    (ret = update_root_items(t)) ||
		    (ret = update_block_group_items(t)) || (ret = update_free_space_tree(t)))
			return ret;
		if (alloc_events(t) == events && !trans_refs_queued(t) && !chunk_alloc_items_pending(t))
			return 0;
	}
	return fs_error(t->fs, -ELOOP, "commit did not settle after %d rounds", COMMIT_MAX_ROUNDS);
}

int commit_stabilize(struct trans *t)
{
	int ret = cow_root_tree(t);

	if (!ret)
		ret = trans_refs_free_deferred(t);
	if (ret)
		return ret;
	trans_refs_busy_begin(t);
	ret = commit_rounds(t);
	trans_refs_busy_end(t);
	return ret;
}

static int flush_devices(struct trans *t)
{
	for (unsigned i = 0; i < t->fs->num_devices; i++) {
		struct fs_device *d = &t->fs->devices[i];
		int ret = d->io ? io_flush(d->io) : 0;
		if (ret)
			return fs_error(t->fs, ret, "flushing %s: %s", d->path, strerror(-ret));
	}
	return 0;
}

/* Rotate the backup roots: the slot after the newest takes this commit's roots. */
static void fill_backup_roots(struct trans *t, uint8_t *sb)
{
	uint8_t *backups = super_super_roots_ptr(sb);
	int newest = 0;
	uint8_t *b;
	struct tree_root_ptr r;

	for (int i = 1; i < BTRFS_NUM_BACKUP_ROOTS; i++)
		if (backup_tree_root_gen(backups + i * sizeof(struct btrfs_root_backup)) >
		    backup_tree_root_gen(backups + newest * sizeof(struct btrfs_root_backup)))
			newest = i;
	b = backups + ((newest + 1) % BTRFS_NUM_BACKUP_ROOTS) * sizeof(struct btrfs_root_backup);
	memset(b, 0, sizeof(struct btrfs_root_backup));
#define BACKUP(field, id)                                                      \
	if (trans_get_root(t, id, &r) == 0) {                                  \
		backup_set_##field(b, r.bytenr);                               \
		backup_set_##field##_gen(b, r.generation);                     \
		backup_set_##field##_level(b, r.level);                        \
	}
	BACKUP(tree_root, BTRFS_ROOT_TREE_OBJECTID)
	BACKUP(chunk_root, BTRFS_CHUNK_TREE_OBJECTID)
	BACKUP(extent_root, BTRFS_EXTENT_TREE_OBJECTID)
	BACKUP(fs_root, BTRFS_FS_TREE_OBJECTID)
	BACKUP(dev_root, BTRFS_DEV_TREE_OBJECTID)
	BACKUP(csum_root, BTRFS_CSUM_TREE_OBJECTID)
#undef BACKUP
	backup_set_total_bytes(b, super_total_bytes(sb));
	backup_set_bytes_used(b, super_bytes_used(sb));
	backup_set_num_devices(b, super_num_devices(sb));
}

/* The device's own dev item, refreshed from the chunk tree of this commit. */
static int device_super(struct trans *t, const struct fs_device *d, uint8_t *sb)
{
	struct tree_root_ptr chunk;
	struct btrfs_key key = { BTRFS_DEV_ITEMS_OBJECTID, BTRFS_DEV_ITEM_KEY, d->devid };
	uint8_t item[sizeof(struct btrfs_dev_item)];
	uint32_t size = sizeof(item);
	int ret;

	memcpy(sb, t->super, BTRFS_SUPER_INFO_SIZE);
	ret = trans_get_root(t, BTRFS_CHUNK_TREE_OBJECTID, &chunk);
	if (ret == 0)
		ret = tree_lookup(t->fs, &chunk, &key, item, &size);
	if (ret)
		return fs_error(t->fs, ret, "device %llu has no dev item", (unsigned long long)d->devid);
	if (size != sizeof(item))
		return fs_error(t->fs, -EUCLEAN, "device %llu: dev item of %u bytes", (unsigned long long)d->devid,
				size);
	/* a damaged item would make the superblock unreadable: keep the old one */
	if (dev_item_devid(item) != d->devid)
		return fs_error(t->fs, -EUCLEAN, "device %llu: its dev item says devid %llu",
				(unsigned long long)d->devid, (unsigned long long)dev_item_devid(item));
	memcpy(super_dev_item_ptr(sb), item, sizeof(item));
	return 0;
}

static int write_superblocks(struct trans *t)
{
	uint8_t sb[BTRFS_SUPER_INFO_SIZE];

	/* every device's superblock is made before any is written: none or all */
	for (unsigned i = 0; i < t->fs->num_devices; i++) {
		int ret = device_super(t, &t->fs->devices[i], sb);
		if (ret)
			return ret;
	}
	for (unsigned i = 0; i < t->fs->num_devices; i++) {
		struct fs_device *d = &t->fs->devices[i];
		int ret = device_super(t, d, sb);
		if (ret)
			return ret;
		for (int m = 0; m < BTRFS_SUPER_MIRROR_MAX; m++) {
			uint64_t off = btrfs_super_offset(m);
			if (off + BTRFS_SUPER_INFO_SIZE > io_size(d->io))
				break;
			super_set_bytenr(sb, off);
			ret = super_update_csum(sb);
			if (!ret)
				ret = io_write(d->io, sb, sizeof(sb), off);
			if (ret)
				return fs_error(t->fs, ret, "writing superblock %d of %s: %s", m, d->path,
						strerror(-ret));
		}
	}
	return 0;
}

/* After the commit the in-memory view follows the new filesystem. */
static void adopt_new_state(struct trans *t)
{
	struct fs_info *fs = t->fs;
	struct {
		uint64_t id;
		struct tree_root_ptr *dst;
	} map[] = {
		{ BTRFS_ROOT_TREE_OBJECTID, &fs->tree_root }, { BTRFS_CHUNK_TREE_OBJECTID, &fs->chunk_root },
		{ BTRFS_EXTENT_TREE_OBJECTID, &fs->extent_root }, { BTRFS_DEV_TREE_OBJECTID, &fs->dev_root },
		{ BTRFS_FS_TREE_OBJECTID, &fs->fs_root }, { BTRFS_CSUM_TREE_OBJECTID, &fs->csum_root },
		{ BTRFS_QUOTA_TREE_OBJECTID, &fs->quota_root }, { BTRFS_UUID_TREE_OBJECTID, &fs->uuid_root },
		{ BTRFS_FREE_SPACE_TREE_OBJECTID, &fs->free_space_root },
		{ BTRFS_BLOCK_GROUP_TREE_OBJECTID, &fs->block_group_root },
		{ BTRFS_RAID_STRIPE_TREE_OBJECTID, &fs->raid_stripe_root },
	};

	for (size_t i = 0; i < trans_root_count(t); i++) {
		const struct trans_root *r = trans_root_at(t, i);
		for (size_t k = 0; k < sizeof(map) / sizeof(map[0]); k++)
			if (r->ptr.objectid == map[k].id) {
				*map[k].dst = r->ptr;
				if (r->deleted)
					map[k].dst->bytenr = 0;
			}
	}
	memcpy(fs->super, t->super, BTRFS_SUPER_INFO_SIZE);
	fs->generation = t->transid;
	fs->incompat = super_incompat_flags(t->super);
	fs->compat_ro = super_compat_ro_flags(t->super);
	trans_writeback_clean(t);
}

int commit_write(struct trans *t)
{
	struct tree_root_ptr root, chunk;
	int ret;

	ret = trans_writeback_write_dirty(t);
	if (ret)
		return ret;
	ret = trans_writeback_finish(t);
	if (ret)
		return ret;
	ret = flush_devices(t);
	if (ret)
		return ret;
	if ((ret = trans_get_root(t, BTRFS_ROOT_TREE_OBJECTID, &root)) ||
	    (ret = trans_get_root(t, BTRFS_CHUNK_TREE_OBJECTID, &chunk)))
		return ret;
	/* A uuid tree the kernel trusted stays trusted (no rescan at mount): no
	 * transaction changes subvolume uuids without rebuilding it. */
	if (super_uuid_tree_generation(t->super) == t->fs->generation)
		super_set_uuid_tree_generation(t->super, t->transid);
	super_set_generation(t->super, t->transid);
	super_set_root(t->super, root.bytenr);
	super_set_root_level(t->super, root.level);
	super_set_chunk_root(t->super, chunk.bytenr);
	super_set_chunk_root_level(t->super, chunk.level);
	super_set_chunk_root_generation(t->super, chunk.generation);
	super_set_bytes_used(t->super, super_bytes_used(t->super) + (uint64_t)alloc_bytes_used_delta(t));
	fill_backup_roots(t, t->super);
	ret = write_superblocks(t);
	if (ret)
		return ret;
	t->committed = true; /* from here on the devices may hold the new filesystem */
	ret = flush_devices(t);
	if (ret)
		return ret;
	adopt_new_state(t);
	return 0;
}

/* The kernel trusts quota numbers only while the qgroup status item's
 * generation is the filesystem's (else it marks them inconsistent at mount):
 * keep it current when it was. A transaction that changes what subvolumes
 * own sets the INCONSISTENT flag itself (libfs/backref.c). */
static int commit_keep_qgroup_status(struct trans *t)
{
	struct btrfs_key key = { 0, BTRFS_QGROUP_STATUS_KEY, 0 };
	struct tree_root_ptr quota;
	struct tree_path path;
	uint8_t *item;
	uint32_t size;
	int ret;

	/* an fsid change rewrites blocks in place between its commits: leave
	 * its commits exactly as they are (quotas stay as stale as before) */
	if (t->fs->fsid_change)
		return 0;
	ret = trans_get_root(t, BTRFS_QUOTA_TREE_OBJECTID, &quota);
	if (ret == -ENOENT)
		return 0;
	if (ret)
		return ret;
	tree_path_init(&path);
	ret = trans_item_for_update(t, BTRFS_QUOTA_TREE_OBJECTID, &key, &item, &size, &path);
	if (ret == 0 && item_has_fixed(key.type, size) && qgroup_status_generation(item) == t->fs->generation)
		qgroup_status_set_generation(item, trans_transid(t));
	tree_path_release(t->fs, &path);
	return ret == -ENOENT ? 0 : ret;
}

int trans_commit(struct trans *t)
{
	struct fs_info *fs = t->fs;
	int ret;

	if (fs_cancel_requested(fs)) {
		trans_abort(t);
		return fs_error(fs, -ECANCELED, "cancelled before the commit: the transaction was dropped whole");
	}
	ret = commit_keep_qgroup_status(t);

	if (!ret)
		ret = commit_stabilize(t);

	if (!ret)
		ret = commit_write(t);
	if (ret) {
		trans_abort(t);
		return ret;
	}
	trans_writeback_put_dirty(t);
	trans_abort(t); /* frees what is left; nothing dirty remains */
	return 0;
}
