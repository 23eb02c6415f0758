// SPDX-License-Identifier: GPL-2.0-only
/* libfs/chunk_alloc.c: a new metadata or system chunk allocated inside a
 * transaction, on a real DUP image. The chunk takes the profile of the
 * existing ones, its stripes lie on free device space (no dev extent, no
 * superblock copy), the allocator hands out blocks from it at once, and the
 * commit writes the chunk item (and, for system chunks, the superblock's
 * system chunk array), the dev extents, the devices' bytes_used, the block
 * group item and its free-space-tree entries: reopened, the filesystem
 * maps the chunk and the reference checker finds it clean. An aborted
 * transaction leaves the chunk map as it was. */
#include <criterion/criterion.h>
#include <string.h>
#include <sys/mman.h>

#include <btk/chunk_edit.h>
#include <btk/ebitmap.h>
#include <btk/super.h>
#include "libfs/trans_internal.h"
#include <btk/tree.h>
#include <btk/volumes.h>
#include "tests/unit/fixtures.h"
#include "libfs/volumes_internal.h"

static uint64_t dev_bytes_used(struct fs_info *fs)
{
	struct btrfs_key key = { BTRFS_DEV_ITEMS_OBJECTID, BTRFS_DEV_ITEM_KEY, 1 };
	uint8_t item[sizeof(struct btrfs_dev_item)];
	uint32_t size = sizeof(item);

	cr_assert_eq(tree_lookup(fs, &fs->chunk_root, &key, item, &size), 0);
	return dev_item_bytes_used(item);
}

/* Committed dev extents of device 1 that overlap [start, start + len). */
static unsigned overlapping_dev_extents(struct fs_info *fs, uint64_t start, uint64_t len)
{
	struct btrfs_key min = { 1, BTRFS_DEV_EXTENT_KEY, 0 }, max = { 1, BTRFS_DEV_EXTENT_KEY, (uint64_t)-1 }, key;
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size;
	unsigned n = 0;

	tree_iter_init(&it, fs, &fs->dev_root, &min, &max);
	while (tree_iter_next(&it, &key, &data, &size) == 1)
		n += key.offset < start + len && key.offset + dev_extent_length(data) > start;
	tree_iter_release(&it);
	return n;
}

static const struct chunk *last_chunk(struct fs_info *fs)
{
	return fs->chunks->chunks[fs->chunks->count - 1];
}

static void new_chunk_for(uint64_t tree, uint64_t kind)
{
	uint8_t *buf;
	size_t size, count;
	uint64_t used, bytenr, stripe;
	uint32_t sys_array;
	struct fs_info *fs;
	struct trans *t;
	const struct chunk *c;
	struct btrfs_key bg_key, fst_key;
	uint8_t item[64];
	uint32_t isize;

	fixture_image_copy("small", &buf, &size);
	fs = fixture_open_buffer(buf, size, true);
	count = fs->chunks->count;
	used = dev_bytes_used(fs);
	sys_array = super_sys_chunk_array_size(fs->super);

	cr_assert_eq(trans_start(fs, &t), 0);
	cr_assert_eq(chunk_alloc_for_tree(t, tree), 0, "%s", btk_error_msg());
	cr_assert_eq(fs->chunks->count, count + 1);
	c = last_chunk(fs);
	cr_assert(c->type & kind);
	cr_assert_eq(c->type & BTRFS_BLOCK_GROUP_PROFILE_MASK, BTRFS_BLOCK_GROUP_DUP);
	cr_assert_eq(c->num_stripes, 2);
	stripe = c->length;
	for (unsigned s = 0; s < 2; s++) {
		uint64_t p = c->stripes[s].physical;
		cr_assert_geq(p, 1ULL << 20);
		cr_assert_leq(p + stripe, fs->devices[0].total_bytes);
		for (int m = 0; m < BTRFS_SUPER_MIRROR_MAX; m++)
			cr_assert(btrfs_super_offset(m) + BTRFS_SUPER_INFO_SIZE <= p || btrfs_super_offset(m) >= p + stripe,
				  "stripe %u covers superblock copy %d", s, m);
		cr_assert_eq(overlapping_dev_extents(fs, p, stripe), 0, "stripe %u lies on a committed dev extent", s);
	}
	cr_assert_neq(c->stripes[0].physical, c->stripes[1].physical);
	/* the allocator uses it at once */
	alloc_group_at(t, alloc_group_count(t) - 1)->cursor = c->logical;
	for (size_t i = 0; i + 1 < alloc_group_count(t); i++) {
		struct alloc_group *g = alloc_group_at(t, i);
		if (!(g->flags & kind))
			continue;
		/* the old groups are full */
		cr_assert_eq(alloc_group_load(t, g), 0);
		cr_assert_eq(ebitmap_set(g->used, g->start, g->length), 0);
	}
	cr_assert_eq(alloc_tree_block(t, tree, &bytenr), 0, "alloc: %s", btk_error_msg());
	cr_assert(bytenr >= c->logical && bytenr < c->logical + c->length);
	trans_abort(t);
	cr_assert_eq(fs->chunks->count, count, "an aborted transaction left its chunk in the map");
	fs_close(fs);

	/* again, committed */
	fs = fixture_open_buffer(buf, size, true);
	cr_assert_eq(trans_start(fs, &t), 0);
	cr_assert_eq(chunk_alloc_for_tree(t, tree), 0, "%s", btk_error_msg());
	cr_assert_eq(trans_commit(t), 0, "commit: %s", btk_error_msg());
	fs_close(fs);

	fs = fixture_open_buffer(buf, size, false);
	cr_assert_eq(fs->chunks->count, count + 1, "the reopened filesystem does not map the new chunk");
	c = last_chunk(fs);
	cr_assert(c->type & kind);
	cr_assert_eq(dev_bytes_used(fs), used + 2 * c->length);
	bg_key = (struct btrfs_key){ c->logical, BTRFS_BLOCK_GROUP_ITEM_KEY, c->length };
	isize = sizeof(item);
	cr_assert_eq(tree_lookup(fs, &fs->extent_root, &bg_key, item, &isize), 0, "no block group item");
	cr_assert_eq(block_group_flags(item), c->type);
	fst_key = (struct btrfs_key){ c->logical, BTRFS_FREE_SPACE_INFO_KEY, c->length };
	isize = sizeof(item);
	cr_assert_eq(tree_lookup(fs, &fs->free_space_root, &fst_key, item, &isize), 0, "no free-space info");
	if (kind == BTRFS_BLOCK_GROUP_SYSTEM)
		cr_assert_gt(super_sys_chunk_array_size(fs->super), sys_array, "the system chunk array did not grow");
	else
		cr_assert_eq(super_sys_chunk_array_size(fs->super), sys_array);
	fs_close(fs);
	fixture_btrfs_check_clean(buf, size);
	munmap(buf, size);
}

Test(chunk_alloc, metadata_chunk)
{
	new_chunk_for(BTRFS_FS_TREE_OBJECTID, BTRFS_BLOCK_GROUP_METADATA);
}

Test(chunk_alloc, system_chunk)
{
	new_chunk_for(BTRFS_CHUNK_TREE_OBJECTID, BTRFS_BLOCK_GROUP_SYSTEM);
}

/* Where a metadata chunk would go now: allocated in a transaction that is
 * then aborted. */
static void probe_chunk(struct fs_info *fs, struct stripe_place *place, uint64_t *len, unsigned *n)
{
	struct trans *t;
	const struct chunk *c;

	cr_assert_eq(trans_start(fs, &t), 0);
	cr_assert_eq(chunk_alloc_for_tree(t, BTRFS_FS_TREE_OBJECTID), 0, "%s", btk_error_msg());
	c = last_chunk(fs);
	*n = c->num_stripes;
	for (unsigned s = 0; s < c->num_stripes; s++) {
		place[s] = (struct stripe_place){ c->stripes[s].devid, c->stripes[s].physical };
		len[s] = c->length;
	}
	trans_abort(t);
}

/* A conversion's hints (fs->alloc_hints): the new chunk takes the profile
 * asked for, not the existing groups' one, and stays off the reserved device
 * ranges (here: exactly where it would have gone without them). */
Test(chunk_alloc, conversion_hints)
{
	struct stripe_place place[4];
	uint64_t len[4];
	unsigned n;
	uint8_t *buf;
	size_t size;
	struct fs_info *fs;
	struct trans *t;
	const struct chunk *c;
	struct chunk_alloc_hints hints;

	fixture_image_copy("small", &buf, &size);
	fs = fixture_open_buffer(buf, size, true);
	probe_chunk(fs, place, len, &n);
	cr_assert_eq(n, 2);
	hints = (struct chunk_alloc_hints){ 0 /* single */, -1, place, len, n };
	fs->alloc_hints = &hints;
	cr_assert_eq(trans_start(fs, &t), 0);
	cr_assert_eq(chunk_alloc_for_tree(t, BTRFS_FS_TREE_OBJECTID), 0, "%s", btk_error_msg());
	c = last_chunk(fs);
	cr_assert_eq(c->type, BTRFS_BLOCK_GROUP_METADATA, "type %llu", (unsigned long long)c->type);
	cr_assert_eq(c->num_stripes, 1);
	for (unsigned s = 0; s < n; s++)
		cr_assert(c->stripes[0].devid != place[s].devid || c->stripes[0].physical >= place[s].physical + len[s] ||
			  c->stripes[0].physical + c->length <= place[s].physical,
			  "the new chunk lies on reserved range %u", s);
	/* a system chunk keeps the existing profile (-1) */
	cr_assert_eq(chunk_alloc_for_tree(t, BTRFS_CHUNK_TREE_OBJECTID), 0, "%s", btk_error_msg());
	cr_assert_eq(last_chunk(fs)->type, BTRFS_BLOCK_GROUP_SYSTEM | BTRFS_BLOCK_GROUP_DUP);
	cr_assert_eq(trans_commit(t), 0, "commit: %s", btk_error_msg());
	fs->alloc_hints = NULL;
	fs_close(fs);
	fixture_btrfs_check_clean(buf, size);
	munmap(buf, size);
}
