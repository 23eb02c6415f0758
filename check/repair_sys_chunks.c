// SPDX-License-Identifier: GPL-2.0-only
/* The sys-chunk-array class: the superblock's system chunk array is a copy
 * of the chunk tree's SYSTEM chunk items (the kernel reads the chunk tree
 * through it). It is rebuilt from those items when each chunk of the array
 * is in the tree at the same place (length, type, stripe length, stripes' devices
 * and offsets): the items may differ only in fields that move no data. A
 * chunk the two place differently stripe by stripe (same length, type and
 * number of stripes) is put where the dev extents and the chunk tree's
 * blocks say it is (check/sys_chunk_place.c): the tree's item, the array
 * and the chunk map in memory all take that place. Anything else is left as
 * it is (which side is right is not known). */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "check/repair.h"
#include "check/sys_chunk_place.h"
#include <btk/format.h>
#include <btk/super.h>
#include <btk/tree.h>
#include <btk/volumes.h>

/* The tree's chunk item t and the array's a describe the same chunk but
 * perhaps for where its stripes lie. */
static bool same_geometry(const uint8_t *t, uint32_t tsize, const uint8_t *a, uint32_t asize)
{
	return tsize == asize && chunk_length(t) == chunk_length(a) && chunk_type(t) == chunk_type(a) &&
	       chunk_num_stripes(t) == chunk_num_stripes(a) && chunk_stripe_len(t) == chunk_stripe_len(a) &&
	       /* (sub_stripes places data in RAID10 only: elsewhere the kernel reads neither) */
	       (!(chunk_type(a) & BTRFS_BLOCK_GROUP_RAID10) || chunk_sub_stripes(t) == chunk_sub_stripes(a));
}

/* ... and place its data in the same place. */
static bool same_place(const uint8_t *t, uint32_t tsize, const uint8_t *a, uint32_t asize)
{
	if (!same_geometry(t, tsize, a, asize))
		return false;
	for (unsigned i = 0; i < chunk_num_stripes(a); i++)
		if (stripe_devid(chunk_stripe(t, i)) != stripe_devid(chunk_stripe(a, i)) ||
		    stripe_offset(chunk_stripe(t, i)) != stripe_offset(chunk_stripe(a, i)))
			return false;
	return true;
}

/* Put the chunk at key whose stripes the tree (t) and the array (a) place
 * differently where sys_chunk_place says: the tree's item takes the array's
 * stripes it got wrong, the chunk map in memory the right ones (the array
 * is rebuilt from the tree after). 0, 1 (left: said), or -errno. */
static int place_chunk(struct repair_ctx *r, const struct btrfs_key *key, uint8_t *t, uint32_t tsize,
		       const uint8_t *a)
{
	unsigned n = chunk_num_stripes(t);
	struct chunk_stripe right[MAX_COPIES];
	char from[MAX_COPIES], why[256];
	bool tree_wrong = false;
	int ret;

	if (n > MAX_COPIES)
		return 1;
	ret = sys_chunk_place(r->fs, key->offset, t, a, from, why, sizeof(why));
	if (ret < 0)
		return ret;
	if (ret) {
		repair_say(r, "system chunk %" PRIu64 ": the array and the chunk tree place it differently, and which "
			   "is right is not clear (%s): left as it is", key->offset, why);
		return 1;
	}
	for (unsigned i = 0; i < n; i++) {
		uint8_t *ts = chunk_stripe(t, i);
		const uint8_t *as = chunk_stripe(a, i);
		if (from[i] == 'a') {
			memcpy(ts, as, sizeof(struct btrfs_stripe));
			tree_wrong = true;
		}
		if (from[i])
			repair_say(r, "system chunk %" PRIu64 " stripe %u: devid %" PRIu64 " at %" PRIu64 ", as %s says "
				   "(the %s was wrong)", key->offset, i, stripe_devid(ts), stripe_offset(ts),
				   from[i] == 'a' ? "the array" : "the chunk tree", from[i] == 'a' ? "tree" : "array");
		right[i] = (struct chunk_stripe){ .devid = stripe_devid(ts), .physical = stripe_offset(ts) };
	}
	if (tree_wrong && (ret = trans_update_item(r->t, BTRFS_CHUNK_TREE_OBJECTID, key, t, tsize)))
		return ret;
	r->changes += tree_wrong;
	/* what this transaction writes to the chunk goes to the right places */
	return chunk_map_set_stripes(r->fs, key->offset, right, n);
}

/* Every chunk of the array sb holds is at the same place in the chunk tree
 * (or is put there): 0, or 1 (said) when one is not. */
static int array_chunks_placed(struct repair_ctx *r, const uint8_t *sb)
{
	const uint8_t *array = super_sys_chunk_array_ptr(sb);
	uint32_t size = super_sys_chunk_array_size(sb), pos = 0;
	int ret;

	while (pos + sizeof(struct btrfs_disk_key) + sizeof(struct btrfs_chunk) <= size) {
		struct btrfs_key key;
		uint8_t item[BTRFS_SYSTEM_CHUNK_ARRAY_SIZE];
		uint32_t isize, tsize = sizeof(item);

		key_from_disk(&key, array + pos);
		key.objectid = BTRFS_FIRST_CHUNK_TREE_OBJECTID;
		pos += sizeof(struct btrfs_disk_key);
		isize = (uint32_t)chunk_item_size(chunk_num_stripes(array + pos));
		if (isize > size - pos || tree_lookup(r->fs, &r->fs->chunk_root, &key, item, &tsize) != 0 ||
		    !same_geometry(item, tsize, array + pos, isize)) {
			repair_say(r, "system chunk %" PRIu64 ": the chunk tree places it elsewhere, or not at all: the "
				   "system chunk array is left as it is", key.offset);
			return 1;
		}
		if (!same_place(item, tsize, array + pos, isize) &&
		    (ret = place_chunk(r, &key, item, tsize, array + pos)) != 0)
			return ret;
		pos += isize;
	}
	return 0;
}

/* The SYSTEM chunk items of the chunk tree, as a system chunk array. */
static int build_array(struct repair_ctx *r, uint8_t *out, uint32_t *used)
{
	struct btrfs_key min = { BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY, 0 };
	struct btrfs_key max = { BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY, (uint64_t)-1 }, key;
	struct tree_root_ptr chunk_root;
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size;
	int ret = trans_get_root(r->t, BTRFS_CHUNK_TREE_OBJECTID, &chunk_root);

	*used = 0;
	if (ret)
		return ret;
	tree_iter_init(&it, r->fs, &chunk_root, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &data, &size)) == 1) {
		if (key.type != BTRFS_CHUNK_ITEM_KEY || size < sizeof(struct btrfs_chunk) ||
		    !(chunk_type(data) & BTRFS_BLOCK_GROUP_SYSTEM))
			continue;
		if (*used + sizeof(struct btrfs_disk_key) + size > BTRFS_SYSTEM_CHUNK_ARRAY_SIZE) {
			ret = fs_error(r->fs, -ENOSPC, "the system chunks of the chunk tree overflow the array");
			break;
		}
		key_to_disk(out + *used, &key);
		memcpy(out + *used + sizeof(struct btrfs_disk_key), data, size);
		*used += (uint32_t)sizeof(struct btrfs_disk_key) + size;
	}
	tree_iter_release(&it);
	return ret < 0 ? ret : 0;
}

int repair_sys_chunk_array(struct repair_ctx *r)
{
	uint8_t *sb = trans_super(r->t);
	uint8_t fresh[BTRFS_SYSTEM_CHUNK_ARRAY_SIZE] = { 0 };
	uint32_t used;
	int ret;

	if ((ret = array_chunks_placed(r, sb)) != 0) {
		r->left += ret > 0;
		return ret < 0 ? ret : 0;
	}
	ret = build_array(r, fresh, &used);
	if (ret)
		return ret;
	if (!used) {
		r->left++;
		repair_say(r, "the chunk tree has no system chunk: the system chunk array is left as it is");
		return 0;
	}
	if (used == super_sys_chunk_array_size(sb) && !memcmp(fresh, super_sys_chunk_array_ptr(sb), used))
		return 0;
	memcpy(super_sys_chunk_array_ptr(sb), fresh, BTRFS_SYSTEM_CHUNK_ARRAY_SIZE);
	super_set_sys_chunk_array_size(sb, used);
	r->changes++;
	repair_say(r, "system chunk array rebuilt from the chunk tree's system chunks (%u bytes)", used);
	return 0;
}
