// SPDX-License-Identifier: GPL-2.0-only
/* Chunks <-> dev extents <-> devices, the system chunk array against the
 * chunk tree, and chunks <-> block group items. All of these are small
 * (one entry per chunk stripe), so they are checked in memory. */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "check/check.h"
#include <btk/item_check.h>
#include <btk/blockgroups.h>
#include <btk/io.h>
#include <btk/tree.h>
#include <btk/volumes.h>

struct dev_extent_rec {
	uint64_t devid, physical, length, chunk_offset;
	bool matched;
};

struct dev_rec {
	uint64_t devid, total_bytes, bytes_used, extent_sum;
	uint8_t uuid[BTRFS_UUID_SIZE];
	bool fsid_ok;           /* the dev item names this filesystem */
	bool fsid_seed;         /* ... or one of its seed filesystems */
};

static int load_dev_extents(struct check_ctx *ctx, struct dev_extent_rec **out, size_t *n)
{
	struct btrfs_key min = { 0, BTRFS_DEV_EXTENT_KEY, 0 }, max = { (uint64_t)-1, 255, (uint64_t)-1 }, key;
	struct dev_extent_rec *v = NULL;
	size_t count = 0, cap = 0;
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size;
	int ret;

	tree_iter_init(&it, ctx->fs, &ctx->fs->dev_root, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &data, &size)) == 1) {
		struct item_verdict vd;

		if (key.type != BTRFS_DEV_EXTENT_KEY)
			continue;
		if (item_check_fs(ctx->fs, &key, data, size, &vd) && vd.fault == ITEM_TOO_SMALL) {
			report_problem(ctx, PR_ITEM_MALFORMED, "dev extent (%" PRIu64 ", %" PRIu64 ") is %u bytes",
				       key.objectid, key.offset, size);
			continue;
		}
		if (vd.fault == ITEM_BAD_FIELD)
			report_problem(ctx, PR_ITEM_MALFORMED, "dev extent (%" PRIu64 ", %" PRIu64 "): chunk tree %" PRIu64
				       ", chunk objectid %" PRIu64 ", chunk offset %" PRIu64 ", length %" PRIu64
				       " (the tree checker wants 3, 256 and sector aligned)", key.objectid, key.offset,
				       dev_extent_chunk_tree(data), dev_extent_chunk_objectid(data),
				       dev_extent_chunk_offset(data), dev_extent_length(data));
		if (count == cap) {
			struct dev_extent_rec *nv;
			cap = cap ? cap * 2 : 256;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				ret = -ENOMEM;
				break;
			}
			v = nv;
		}
		v[count++] = (struct dev_extent_rec){ key.objectid, key.offset, dev_extent_length(data),
						      dev_extent_chunk_offset(data), false };
	}
	tree_iter_release(&it);
	if (ret < 0) {
		free(v);
		return ret;
	}
	*out = v;
	*n = count;
	return 0;
}

static struct dev_extent_rec *find_dev_extent(struct dev_extent_rec *v, size_t n, uint64_t devid,
					      uint64_t physical)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid].devid < devid || (v[mid].devid == devid && v[mid].physical < physical))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && v[lo].devid == devid && v[lo].physical == physical ? &v[lo] : NULL;
}

static void check_stripes(struct check_ctx *ctx, struct dev_extent_rec *ext, size_t n)
{
	const struct fs_info *fs = ctx->fs;

	for (size_t i = 0; i < fs_chunk_count(fs); i++) {
		const struct chunk *c = fs_chunk(fs, i);
		uint64_t stripe_size = chunk_stripe_size(c->length, c->type, c->num_stripes, c->sub_stripes);
		for (unsigned s = 0; s < c->num_stripes; s++) {
			struct dev_extent_rec *e = find_dev_extent(ext, n, c->stripes[s].devid, c->stripes[s].physical);
			if (!e) {
				report_problem(ctx, PR_CHUNK_NO_DEV_EXTENT,
					       "chunk %" PRIu64 " stripe %u (devid %" PRIu64 " physical %" PRIu64 ")",
					       c->logical, s, c->stripes[s].devid, c->stripes[s].physical);
				continue;
			}
			e->matched = true;
			if (e->chunk_offset != c->logical || e->length != stripe_size)
				report_problem(ctx, PR_DEV_EXTENT_MISMATCH,
					       "dev extent devid %" PRIu64 " physical %" PRIu64 ": chunk %" PRIu64
					       " length %" PRIu64 ", chunk expects %" PRIu64 " length %" PRIu64,
					       e->devid, e->physical, e->chunk_offset, e->length, c->logical, stripe_size);
		}
	}
}

struct dev_load {
	struct check_ctx *ctx;
	struct dev_rec *v;
	size_t count;
};

static int load_device(void *arg, const struct btrfs_key *key, const uint8_t *data, uint32_t size)
{
	struct dev_load *l = arg;
	struct item_verdict vd;
	struct dev_rec *r;

	if (l->count >= fs_num_devices(l->ctx->fs))
		return 1; /* more dev items than devices: the tree is not read to the end */
	if (item_check_fs(l->ctx->fs, key, data, size, &vd) && vd.fault == ITEM_TOO_SMALL) {
		report_problem(l->ctx, PR_ITEM_MALFORMED, "dev item %" PRIu64 " is %u bytes", key->offset, size);
		return 0;
	}
	/* a commit copies this item into the device's superblock */
	if (vd.fault == ITEM_BAD_FIELD)
		report_problem(l->ctx, PR_ITEM_MALFORMED, "dev item %" PRIu64 " says devid %" PRIu64, key->offset,
			       dev_item_devid(data));
	r = &l->v[l->count++];
	*r = (struct dev_rec){ key->offset, dev_item_total_bytes(data), dev_item_bytes_used(data), 0, { 0 }, false, false };
	memcpy(r->uuid, dev_item_uuid_ptr(data), BTRFS_UUID_SIZE);
	r->fsid_ok = !memcmp(dev_item_fsid_ptr(data), l->ctx->fs->metadata_uuid, BTRFS_FSID_SIZE);
	r->fsid_seed = fs_fsid_is_seed(l->ctx->fs, dev_item_fsid_ptr(data));
	return 0;
}

/* The dev items of the chunk tree; *whole: the tree was read to the end. */
static struct dev_rec *load_devices(struct check_ctx *ctx, size_t *n, bool *whole)
{
	struct dev_load l = { ctx, calloc(fs_num_devices(ctx->fs) ? fs_num_devices(ctx->fs) : 1, sizeof(*l.v)), 0 };

	if (!l.v)
		return NULL;
	*whole = volumes_each_dev_item(ctx->fs, load_device, &l) == 0;
	*n = l.count;
	return l.v;
}

static bool has_dev_item(const struct dev_rec *devs, size_t ndev, uint64_t devid)
{
	for (size_t k = 0; k < ndev; k++)
		if (devs[k].devid == devid)
			return true;
	return false;
}

/* The kernel finds a device by devid, uuid and fsid: a member device whose
 * dev item has another uuid or fsid, or a chunk stripe naming a uuid its
 * device's dev item does not have, is a missing device to it (and the mount
 * fails); nor does it mount a device smaller than its dev item says. */
static void check_dev_uuids(struct check_ctx *ctx, const struct dev_rec *devs, size_t ndev)
{
	struct btrfs_key min = { BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY, 0 }, key;
	struct btrfs_key max = { BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY, (uint64_t)-1 };
	const struct fs_info *fs = ctx->fs;
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size;

	for (unsigned i = 0; i < fs_num_devices(fs); i++)
		for (size_t k = 0; fs_device(fs, i)->io && k < ndev; k++) {
			if (devs[k].devid != fs_device(fs, i)->devid)
				continue;
			bool fsid_ok = fs_device(fs, i)->seed ? devs[k].fsid_seed : devs[k].fsid_ok;

			if (memcmp(devs[k].uuid, fs_device(fs, i)->uuid, BTRFS_UUID_SIZE) || !fsid_ok)
				report_problem(ctx, PR_DEV_ITEM_MISSING, "member device %s (devid %" PRIu64 "): its dev "
					       "item has another %s", fs_device(fs, i)->path, fs_device(fs, i)->devid,
					       fsid_ok ? "uuid" : "fsid");
			if (devs[k].total_bytes > io_size(fs_device(fs, i)->io))
				report_problem(ctx, PR_DEV_TOTAL_BYTES, "dev item %" PRIu64 ": total_bytes %" PRIu64
					       ", the device has %" PRIu64, devs[k].devid, devs[k].total_bytes,
					       io_size(fs_device(fs, i)->io));
		}
	tree_iter_init(&it, ctx->fs, &ctx->fs->chunk_root, &min, &max);
	while (tree_iter_next(&it, &key, &data, &size) == 1) {
		if (size < chunk_item_size(1) || chunk_item_size(chunk_num_stripes(data)) != size)
			continue;       /* the open reported it */
		for (unsigned s = 0; s < chunk_num_stripes(data); s++) {
			const uint8_t *st = chunk_stripe(data, s);
			for (size_t k = 0; k < ndev; k++)
				if (devs[k].devid == stripe_devid(st) &&
				    memcmp(devs[k].uuid, stripe_dev_uuid_ptr(st), BTRFS_UUID_SIZE))
					report_problem(ctx, PR_ITEM_MALFORMED, "chunk %" PRIu64 " stripe %u: devid %" PRIu64
						       " with a uuid its dev item does not have", key.offset, s,
						       stripe_devid(st));
		}
	}
	tree_iter_release(&it);
}

/* Every member device and every dev extent has a dev item, and the dev items
 * number the superblock's num_devices (the kernel mounts nothing else). */
static void check_dev_items(struct check_ctx *ctx, const struct dev_rec *devs, size_t ndev,
			    const struct dev_extent_rec *ext, size_t n)
{
	const struct fs_info *fs = ctx->fs;

	if (ndev != super_num_devices(fs_super(fs)))
		report_problem(ctx, PR_SUPER_NUM_DEVICES, "the chunk tree has %zu dev item(s), the superblock says %"
			       PRIu64 " device(s)", ndev, super_num_devices(fs_super(fs)));
	for (unsigned i = 0; i < fs_num_devices(fs); i++)
		if (fs_device(fs, i)->io && !has_dev_item(devs, ndev, fs_device(fs, i)->devid))
			report_problem(ctx, PR_DEV_ITEM_MISSING, "member device %s (devid %" PRIu64 ") has no dev item",
				       fs_device(fs, i)->path, fs_device(fs, i)->devid);
	for (size_t i = 0; i < n; i++)
		if ((i == 0 || ext[i - 1].devid != ext[i].devid) && !has_dev_item(devs, ndev, ext[i].devid))
			report_problem(ctx, PR_DEV_ITEM_MISSING, "dev extents of devid %" PRIu64 " (the first at %" PRIu64
				       ") name a device without a dev item", ext[i].devid, ext[i].physical);
}

static void check_dev_extents(struct check_ctx *ctx, struct dev_extent_rec *ext, size_t n)
{
	size_t ndev = 0;
	bool whole = false;
	struct dev_rec *devs = load_devices(ctx, &ndev, &whole);
	uint64_t total = 0;

	if (devs && whole)
		check_dev_items(ctx, devs, ndev, ext, n);
	if (devs)
		check_dev_uuids(ctx, devs, ndev);

	for (size_t i = 0; i < n; i++) {
		struct dev_rec *d = NULL;
		if (!ext[i].matched)
			report_problem(ctx, PR_DEV_EXTENT_NO_CHUNK, "dev extent devid %" PRIu64 " physical %" PRIu64
				       " length %" PRIu64 " (chunk %" PRIu64 ")",
				       ext[i].devid, ext[i].physical, ext[i].length, ext[i].chunk_offset);
		if (i && ext[i - 1].devid == ext[i].devid &&
		    ext[i - 1].physical + ext[i - 1].length > ext[i].physical)
			report_problem(ctx, PR_DEV_EXTENT_OVERLAP, "devid %" PRIu64 ": dev extents at %" PRIu64
				       " and %" PRIu64 " overlap", ext[i].devid, ext[i - 1].physical, ext[i].physical);
		for (size_t k = 0; devs && k < ndev; k++)
			if (devs[k].devid == ext[i].devid)
				d = &devs[k];
		if (!d)
			continue;
		d->extent_sum += ext[i].length;
		if (ext[i].physical + ext[i].length > d->total_bytes)
			report_problem(ctx, PR_DEV_EXTENT_BEYOND_DEVICE, "devid %" PRIu64 ": dev extent at %" PRIu64
				       " ends beyond the device size %" PRIu64, d->devid, ext[i].physical, d->total_bytes);
	}
	for (size_t k = 0; devs && k < ndev; k++) {
		total += devs[k].total_bytes;
		if (devs[k].total_bytes % ctx->fs->sectorsize)
			report_problem(ctx, PR_DEV_SIZE_UNALIGNED, "devid %" PRIu64 ": total_bytes %" PRIu64 " is not a "
				       "multiple of %u", devs[k].devid, devs[k].total_bytes, ctx->fs->sectorsize);
		if (devs[k].bytes_used != devs[k].extent_sum)
			report_problem(ctx, PR_DEV_BYTES_USED, "devid %" PRIu64 ": bytes_used %" PRIu64
				       ", dev extents sum to %" PRIu64, devs[k].devid, devs[k].bytes_used,
				       devs[k].extent_sum);
	}
	/* (smaller, the kernel refuses to mount; larger, it and btrfs check only warn) */
	if (devs && ndev == fs_num_devices(ctx->fs) && total != super_total_bytes(fs_super(ctx->fs)))
		report_problem(ctx, total > super_total_bytes(fs_super(ctx->fs)) ? PR_SUPER_TOTAL_BYTES
			       : PR_SUPER_TOTAL_BYTES_LARGE, "superblock total_bytes %" PRIu64
			       ", devices sum to %" PRIu64, super_total_bytes(fs_super(ctx->fs)), total);
	free(devs);
}

/* A chunk of the system chunk array against the chunk tree's item, byte for
 * byte but for the owner, which nothing reads (the kernel maps the array's
 * chunk and skips the tree's; the reference does not compare the two). */
static bool sys_chunk_same(const uint8_t *tree, const uint8_t *array, uint32_t size)
{
	const size_t owner = offsetof(struct btrfs_chunk, owner), after = owner + sizeof(uint64_t);

	return size >= after && memcmp(tree, array, owner) == 0 && memcmp(tree + after, array + after, size - after) == 0;
}

/* Every chunk of the system chunk array must be in the chunk tree (see
 * sys_chunk_same), and every SYSTEM chunk of the tree must be in the array. */
static void check_sys_chunk_array(struct check_ctx *ctx)
{
	struct fs_info *fs = ctx->fs;
	const uint8_t *array = super_sys_chunk_array_ptr(fs_super(fs));
	uint32_t size = super_sys_chunk_array_size(fs_super(fs)), pos = 0;
	size_t in_array = 0, system_chunks = 0;

	while (pos + sizeof(struct btrfs_disk_key) + sizeof(struct btrfs_chunk) <= size) {
		struct btrfs_key key;
		uint8_t item[4096];
		uint32_t isize, tsize = sizeof(item);

		key_from_disk(&key, array + pos);
		/* the kernel reads only the offset (and the type) of the array's keys */
		key.objectid = BTRFS_FIRST_CHUNK_TREE_OBJECTID;
		pos += sizeof(struct btrfs_disk_key);
		isize = (uint32_t)chunk_item_size(chunk_num_stripes(array + pos));
		if (isize > size - pos)
			break;
		in_array++;
		if (tree_lookup(fs, &fs->chunk_root, &key, item, &tsize) != 0 || tsize != isize ||
		    !sys_chunk_same(item, array + pos, isize))
			report_problem(ctx, PR_SYS_CHUNK_NOT_IN_TREE, "system chunk %" PRIu64
				       " of the superblock array is missing or different in the chunk tree", key.offset);
		pos += isize;
	}
	for (size_t i = 0; i < fs_chunk_count(fs); i++)
		if (fs_chunk(fs, i)->type & BTRFS_BLOCK_GROUP_SYSTEM)
			system_chunks++;
	if (system_chunks > in_array)
		report_problem(ctx, PR_SYS_CHUNK_MISSING, "%zu system chunk(s) in the chunk tree, %zu in the "
			       "superblock array", system_chunks, in_array);
}

static void check_block_groups(struct check_ctx *ctx)
{
	struct block_group_list bgs;
	uint64_t used = 0;

	if (fs_read_block_groups(ctx->fs, &bgs) != 0) {
		report_problem(ctx, PR_CHUNK_NO_BLOCK_GROUP, "cannot read block group items: %s", btk_error_msg());
		return;
	}
	for (size_t i = 0; i < bgs.count; i++) {
		const struct block_group *bg = &bgs.groups[i];
		const struct chunk *c = fs_chunk_lookup(ctx->fs, bg->start);
		if (bg->missing) {
			report_problem(ctx, PR_CHUNK_NO_BLOCK_GROUP, "chunk %" PRIu64 " length %" PRIu64, bg->start,
				       bg->length);
			continue;
		}
		used += bg->used;
		if (bg->chunk_objectid != BTRFS_FIRST_CHUNK_TREE_OBJECTID)
			report_problem(ctx, PR_ITEM_MALFORMED, "block group %" PRIu64 ": chunk objectid %" PRIu64
				       ", the tree checker wants 256", bg->start, bg->chunk_objectid);
		if (c && bg->flags != c->type)
			report_problem(ctx, PR_BLOCK_GROUP_FLAGS, "block group %" PRIu64 ": flags 0x%" PRIx64
				       ", chunk type 0x%" PRIx64, bg->start, bg->flags, c->type);
	}
	if (used != super_bytes_used(fs_super(ctx->fs)))
		report_problem(ctx, PR_SUPER_BYTES_USED, "superblock bytes_used %" PRIu64
			       ", block groups sum to %" PRIu64, super_bytes_used(fs_super(ctx->fs)), used);
	block_group_list_free(&bgs);
}

void check_block_group_chunk(struct check_ctx *ctx, const struct btrfs_key *k)
{
	const struct chunk *c = fs_chunk_lookup(ctx->fs, k->objectid);

	if (!c || c->logical != k->objectid || c->length != k->offset)
		report_problem(ctx, PR_BLOCK_GROUP_NO_CHUNK, "block group %" PRIu64 "+%" PRIu64 ": no chunk of its "
			       "start and length", k->objectid, k->offset);
}

/* The block group items of a separate block-group tree (the extent tree's
 * are met by the extents phase's walk). */
static int check_block_group_tree_items(struct check_ctx *ctx)
{
	struct btrfs_key min = { 0, BTRFS_BLOCK_GROUP_ITEM_KEY, 0 }, max = { (uint64_t)-1, BTRFS_BLOCK_GROUP_ITEM_KEY,
									     (uint64_t)-1 }, key;
	const struct tree_root_ptr *bgt = fs_block_group_tree(ctx->fs);
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size;
	int ret;

	if (bgt == &ctx->fs->extent_root || !bgt->bytenr)
		return 0;
	tree_iter_init(&it, ctx->fs, bgt, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &data, &size)) == 1)
		if (key.type == BTRFS_BLOCK_GROUP_ITEM_KEY)
			check_block_group_chunk(ctx, &key);
	tree_iter_release(&it);
	return ret == -ENOMEM ? ret : 0;   /* an unreadable tree: reported by the tree-block walk */
}

/* Every chunk item of the chunk tree is valid and in the chunk map (the
 * open leaves out what does not validate or overlaps another chunk). */
static int check_chunk_items(struct check_ctx *ctx)
{
	struct btrfs_key min = { BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY, 0 };
	struct btrfs_key max = { BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY, (uint64_t)-1 }, key;
	struct fs_info *fs = ctx->fs;
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size;
	int ret;

	tree_iter_init(&it, fs, &fs->chunk_root, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &data, &size)) == 1) {
		const struct chunk *c;
		if (key.type != BTRFS_CHUNK_ITEM_KEY)
			continue;
		if (chunk_item_validate(fs, key.offset, data, size)) {
			report_problem(ctx, PR_ITEM_MALFORMED, "%s (left out of the chunk map)", btk_error_msg());
			continue;
		}
		c = fs_chunk_lookup(fs, key.offset);
		if (!c || c->logical != key.offset || c->length != chunk_length(data))
			report_problem(ctx, PR_ITEM_MALFORMED, "chunk at %" PRIu64 " length %" PRIu64 " overlaps "
				       "another chunk (left out of the chunk map)", key.offset, chunk_length(data));
	}
	tree_iter_release(&it);
	return ret == -ENOMEM ? ret : 0;   /* an unreadable chunk tree: reported by the tree-block walk */
}

int check_chunks(struct check_ctx *ctx)
{
	struct dev_extent_rec *ext = NULL;
	size_t n = 0;
	int ret;

	if ((ret = check_chunk_items(ctx)))
		return ret;
	check_sys_chunk_array(ctx);
	if (ctx->fs->dev_root.bytenr) {
		ret = load_dev_extents(ctx, &ext, &n);
		if (ret == -ENOMEM)
			return ret;
		if (ret)
			report_problem(ctx, PR_TREE_BLOCK_UNREADABLE, "dev tree: %s", btk_error_msg());
		check_stripes(ctx, ext, n);
		check_dev_extents(ctx, ext, n);
		free(ext);
	}
	check_block_groups(ctx);
	return check_block_group_tree_items(ctx);
}
