// SPDX-License-Identifier: GPL-2.0-only
/* The one-device restore layout: every chunk gets new room on device 1
 * (mirrored metadata becomes DUP, everything else single), the chunk and
 * dev trees are rewritten in place (same blocks, same logical addresses,
 * items redistributed over their leaves), block group flags follow the new
 * profiles, and the superblock describes one device. Logical addresses do
 * not change, so no other tree block needs touching. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "image/restore.h"
#include <btk/block.h>
#include <btk/leaf_build.h>
#include <btk/super.h>

#define MiB (1ULL << 20)

/* Items of a tree being rebuilt, each owning a copy of its data. */
struct item_list {
	struct leaf_entry *v;
	size_t n, cap;
};

static int items_push(struct item_list *l, const struct btrfs_key *key, const void *data, uint32_t size)
{
	uint8_t *copy = malloc(size ? size : 1);

	if (!copy)
		return -ENOMEM;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		struct leaf_entry *v = realloc(l->v, cap * sizeof(*v));
		if (!v) {
			free(copy);
			return -ENOMEM;
		}
		l->v = v;
		l->cap = cap;
	}
	memcpy(copy, data, size);
	l->v[l->n++] = (struct leaf_entry){ *key, copy, size };
	return 0;
}

static void items_free(struct item_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free((void *)l->v[i].data);
	free(l->v);
}

/* The profile a chunk or block group gets on one device. */
static uint64_t single_profile(uint64_t flags)
{
	if ((flags & (BTRFS_BLOCK_GROUP_METADATA | BTRFS_BLOCK_GROUP_SYSTEM)) && profile_copies(flags) >= 2)
		return BTRFS_BLOCK_GROUP_DUP;
	return 0;
}

static bool overlaps_super(uint64_t start, uint64_t len)
{
	for (int m = 0; m < BTRFS_SUPER_MIRROR_MAX; m++) {
		uint64_t off = btrfs_super_offset(m);
		if (start < off + BTRFS_SUPER_INFO_SIZE && off < start + len)
			return true;
	}
	return false;
}

int single_place_chunks(struct restore_ctx *r)
{
	uint64_t cursor = MiB;

	r->place = calloc(rs_chunk_count(r), sizeof(*r->place));
	if (!r->place)
		return -ENOMEM;
	for (size_t i = 0; i < rs_chunk_count(r); i++) {
		const struct chunk *c = rs_chunk(r, i);
		struct placement *p = &r->place[i];
		uint64_t prof = single_profile(c->type);

		p->type = (c->type & ~BTRFS_BLOCK_GROUP_PROFILE_MASK) | prof;
		p->ncopies = prof == BTRFS_BLOCK_GROUP_DUP ? 2 : 1;
		for (unsigned k = 0; k < p->ncopies; k++) {
			while (overlaps_super(cursor, c->length))
				cursor = (btrfs_super_offset(1) > cursor ? btrfs_super_offset(1) : btrfs_super_offset(2)) +
					 MiB;
			p->physical[k] = cursor;
			cursor += c->length;
			cursor = (cursor + MiB - 1) & ~(MiB - 1);
		}
	}
	r->new_size = cursor;
	return 0;
}

int single_map(struct restore_ctx *r, uint64_t logical, uint64_t *phys, unsigned *ncopies, uint64_t *contig)
{
	size_t i = rs_chunk_find_index(r, logical);
	const struct chunk *c;

	if (i >= rs_chunk_count(r) || rs_chunk(r, i)->logical > logical)
		return -ENOENT;
	c = rs_chunk(r, i);
	for (unsigned k = 0; k < r->place[i].ncopies; k++)
		phys[k] = r->place[i].physical[k] + (logical - c->logical);
	*ncopies = r->place[i].ncopies;
	*contig = c->logical + c->length - logical;
	return 0;
}

/* Write [logical, logical+len) to every copy of the one-device layout. */
int single_write(struct restore_ctx *r, uint64_t logical, const uint8_t *data, uint32_t len)
{
	struct io_dev *io = r->ios[0];
	struct io_ref hold;

	while (len) {
		uint64_t phys[2], contig;
		unsigned n;
		uint32_t k;
		int ret;

		if (single_map(r, logical, phys, &n, &contig))
			return rs_error(r, "logical address %llu of the image is in no chunk", (unsigned long long)logical);
		k = contig < len ? (uint32_t)contig : len;
		for (unsigned i = 0; i < n; i++) {
			if ((ret = io_write_ref(io, data, k, phys[i], restore_frame_hold(r, data, k, &hold))))
				return rs_error(r, "writing %s: %s", io->path, strerror(-ret)), ret;
			r->written_bytes += k;
		}
		logical += k;
		data += k;
		len -= k;
	}
	return 0;
}

int single_patch_block_groups(struct restore_ctx *r, uint8_t *block)
{
	int changed = 0;

	if (block_verify(r->fs, header_bytenr(block), block, &BLOCK_EXPECT_ANY) != BLOCK_OK)
		return 0; /* written as it is: not ours to judge */
	for (unsigned s = 0; s < header_nritems(block); s++) {
		const uint8_t *item = leaf_item(block, s);
		uint8_t *data = leaf_item_data(block, s);
		uint64_t flags, nf;

		if (disk_key_type(item_key_ptr(item)) != BTRFS_BLOCK_GROUP_ITEM_KEY ||
		    item_size(item) < sizeof(struct btrfs_block_group_item))
			continue;
		flags = block_group_flags(data);
		nf = (flags & ~BTRFS_BLOCK_GROUP_PROFILE_MASK) | single_profile(flags);
		if (nf != flags) {
			block_group_set_flags(data, nf);
			changed = 1;
		}
	}
	if (changed)
		restore_block_csum(r, block);
	return changed;
}

/* ---------------------------------------------------------------- refilling a tree */

struct tree_shape {
	struct held_block **leaves;   /* in key order */
	struct held_block **nodes;    /* children before parents */
	size_t nleaves, nnodes;
};

static int shape_add(struct held_block ***v, size_t *n, struct held_block *b)
{
	if (!(*n & (*n + 1))) { /* n + 1 a power of two: double */
		struct held_block **p = realloc(*v, 2 * (*n + 1) * sizeof(*p));
		if (!p)
			return -ENOMEM;
		*v = p;
	}
	(*v)[(*n)++] = b;
	return 0;
}

static int shape_collect(struct restore_ctx *r, struct held_list *l, uint64_t bytenr, int depth,
			 struct tree_shape *sh)
{
	struct held_block *b = held_find(l, bytenr);
	int ret;

	if (!b)
		return rs_error(r, "tree block %llu is missing from the image", (unsigned long long)bytenr);
	if (depth > BTRFS_MAX_LEVEL)
		return rs_error(r, "tree at %llu is too deep", (unsigned long long)bytenr);
	if (header_level(b->data) == 0)
		return shape_add(&sh->leaves, &sh->nleaves, b);
	for (unsigned s = 0; s < header_nritems(b->data); s++)
		if ((ret = shape_collect(r, l, key_ptr_blockptr(node_key_ptr(b->data, s)), depth + 1, sh)))
			return ret;
	return shape_add(&sh->nodes, &sh->nnodes, b);
}

static void first_key_of(const uint8_t *b, uint8_t disk_key[sizeof(struct btrfs_disk_key)])
{
	if (header_level(b) == 0)
		memcpy(disk_key, item_key_ptr(leaf_item(b, 0)), sizeof(struct btrfs_disk_key));
	else
		memcpy(disk_key, key_ptr_key_ptr(node_key_ptr(b, 0)), sizeof(struct btrfs_disk_key));
}

/* Put items (sorted) into the leaves of the tree at root, fix the node keys,
 * recompute checksums and write every block of the tree. */
static int refill_tree(struct restore_ctx *r, struct held_list *blocks, uint64_t root, const struct item_list *items,
		       const char *what)
{
	struct tree_shape sh = { 0 };
	size_t *counts = NULL, pos = 0;
	int ret;

	if ((ret = shape_collect(r, blocks, root, 0, &sh)))
		goto out;
	counts = calloc(sh.nleaves, sizeof(*counts));
	if (!counts) {
		ret = -ENOMEM;
		goto out;
	}
	if (leaf_build_distribute(items->v, items->n, sh.nleaves, r->fs->nodesize, counts)) {
		ret = rs_error(r, "the rewritten %s tree does not fit its %zu leaves", what, sh.nleaves);
		goto out;
	}
	for (size_t l = 0; l < sh.nleaves; l++) {
		if ((ret = leaf_build(sh.leaves[l]->data, r->fs->nodesize, items->v + pos, counts[l]))) {
			ret = rs_error(r, "the rewritten %s tree's items are out of order", what);
			goto out;
		}
		pos += counts[l];
		restore_block_csum(r, sh.leaves[l]->data);
	}
	for (size_t n = 0; n < sh.nnodes; n++) {
		uint8_t *b = sh.nodes[n]->data;
		for (unsigned s = 0; s < header_nritems(b); s++) {
			uint8_t *ptr = node_key_ptr(b, s);
			struct held_block *child = held_find(blocks, key_ptr_blockptr(ptr));
			first_key_of(child->data, key_ptr_key_ptr(ptr));
		}
		restore_block_csum(r, b);
	}
	for (size_t l = 0; l < sh.nleaves && !ret; l++)
		ret = single_write(r, sh.leaves[l]->bytenr, sh.leaves[l]->data, r->fs->nodesize);
	for (size_t n = 0; n < sh.nnodes && !ret; n++)
		ret = single_write(r, sh.nodes[n]->bytenr, sh.nodes[n]->data, r->fs->nodesize);
out:
	free(sh.leaves);
	free(sh.nodes);
	free(counts);
	return ret;
}

/* The old items of a tree, in key order (copies: the leaves get rewritten). */
static int old_items(struct restore_ctx *r, struct held_list *blocks, uint64_t root, struct item_list *out)
{
	struct tree_shape sh = { 0 };
	int ret = shape_collect(r, blocks, root, 0, &sh);

	for (size_t l = 0; !ret && l < sh.nleaves; l++) {
		const uint8_t *b = sh.leaves[l]->data;
		if (block_verify(r->fs, sh.leaves[l]->bytenr, b, &BLOCK_EXPECT_ANY) != BLOCK_OK) {
			ret = rs_error(r, "tree block %llu in the image is bad", (unsigned long long)sh.leaves[l]->bytenr);
			break;
		}
		for (unsigned s = 0; !ret && s < header_nritems(b); s++) {
			struct btrfs_key key;
			key_from_disk(&key, item_key_ptr(leaf_item(b, s)));
			ret = items_push(out, &key, leaf_item_data(b, s), item_size(leaf_item(b, s)));
		}
	}
	free(sh.leaves);
	free(sh.nodes);
	return ret;
}

/* ---------------------------------------------------------------- the new trees */

struct single_dev {
	uint8_t item[sizeof(struct btrfs_dev_item)];
	const uint8_t *uuid;
	uint64_t old_devid;
	uint8_t sys_array[BTRFS_SYSTEM_CHUNK_ARRAY_SIZE];   /* the new system chunk items */
	uint32_t sys_size;
};

static void make_dev_item(struct restore_ctx *r, struct single_dev *d)
{
	uint64_t used = 0;

	for (size_t i = 0; i < rs_chunk_count(r); i++)
		used += rs_chunk(r, i)->length * r->place[i].ncopies;
	memcpy(d->item, r->devs[0].item, sizeof(d->item));
	d->old_devid = r->devs[0].devid;
	dev_item_set_devid(d->item, 1);
	dev_item_set_total_bytes(d->item, r->new_size);
	dev_item_set_bytes_used(d->item, used);
	d->uuid = dev_item_uuid_ptr(d->item);
}

static int make_chunk_item(struct restore_ctx *r, size_t idx, const uint8_t *old, uint32_t old_size,
			   const struct single_dev *d, uint8_t *out, uint32_t *out_size)
{
	const struct placement *p = &r->place[idx];

	if (old_size < chunk_item_size(1))
		return rs_error(r, "chunk item too small");
	memcpy(out, old, sizeof(struct btrfs_chunk));
	chunk_set_type(out, p->type);
	chunk_set_num_stripes(out, (uint16_t)p->ncopies);
	chunk_set_sub_stripes(out, 1);
	for (unsigned k = 0; k < p->ncopies; k++) {
		uint8_t *s = chunk_stripe(out, k);
		stripe_set_devid(s, 1);
		stripe_set_offset(s, p->physical[k]);
		memcpy(stripe_dev_uuid_ptr(s), d->uuid, BTRFS_UUID_SIZE);
	}
	*out_size = (uint32_t)chunk_item_size(p->ncopies);
	return 0;
}

static int new_chunk_tree(struct restore_ctx *r, struct single_dev *d, struct item_list *out)
{
	struct item_list old = { 0 };
	uint8_t buf[chunk_item_size(2)];
	int ret = old_items(r, &r->chunk_blocks, super_chunk_root(r->super), &old);

	for (size_t i = 0; !ret && i < old.n; i++) {
		struct btrfs_key key = old.v[i].key;
		if (key.type == BTRFS_DEV_ITEM_KEY) {
			if (key.offset != d->old_devid)
				continue;
			key.offset = 1;
			ret = items_push(out, &key, d->item, sizeof(d->item));
		} else if (key.type == BTRFS_CHUNK_ITEM_KEY) {
			size_t idx = rs_chunk_find_index(r, key.offset);
			uint32_t size = 0;
			if (idx >= rs_chunk_count(r) || rs_chunk(r, idx)->logical != key.offset)
				ret = rs_error(r, "chunk %llu vanished", (unsigned long long)key.offset);
			else if (!(ret = make_chunk_item(r, idx, old.v[i].data, old.v[i].size, d, buf, &size)))
				ret = items_push(out, &key, buf, size);
			if (!ret && (chunk_type(buf) & BTRFS_BLOCK_GROUP_SYSTEM)) {
				if (d->sys_size + sizeof(struct btrfs_disk_key) + size > sizeof(d->sys_array))
					ret = rs_error(r, "the system chunks do not fit the superblock's array");
				else {
					key_to_disk(d->sys_array + d->sys_size, &key);
					memcpy(d->sys_array + d->sys_size + sizeof(struct btrfs_disk_key), buf, size);
					d->sys_size += (uint32_t)sizeof(struct btrfs_disk_key) + size;
				}
			}
		} else {
			ret = items_push(out, &key, old.v[i].data, old.v[i].size);
		}
	}
	items_free(&old);
	return ret;
}

static int cmp_items(const void *a, const void *b)
{
	const struct leaf_entry *x = a, *y = b;

	return key_compare(&x->key, &y->key);
}

static int new_dev_tree(struct restore_ctx *r, const struct single_dev *d, uint64_t root, struct item_list *out)
{
	struct item_list old = { 0 };
	uint8_t ext[sizeof(struct btrfs_dev_extent)];
	const uint8_t *ct_uuid = header_chunk_tree_uuid_ptr(r->chunk_blocks.v[0].data);
	int ret = old_items(r, &r->dev_blocks, root, &old);

	for (size_t i = 0; !ret && i < old.n; i++) {
		struct btrfs_key key = old.v[i].key;
		if (key.type == BTRFS_DEV_EXTENT_KEY || key.type == BTRFS_DEV_REPLACE_KEY)
			continue;
		if (key.objectid == BTRFS_DEV_STATS_OBJECTID && key.type == BTRFS_PERSISTENT_ITEM_KEY) {
			if (key.offset != d->old_devid)
				continue;
			key.offset = 1;
		}
		ret = items_push(out, &key, old.v[i].data, old.v[i].size);
	}
	items_free(&old);
	for (size_t i = 0; !ret && i < rs_chunk_count(r); i++) {
		const struct chunk *c = rs_chunk(r, i);
		for (unsigned k = 0; !ret && k < r->place[i].ncopies; k++) {
			struct btrfs_key key = { 1, BTRFS_DEV_EXTENT_KEY, r->place[i].physical[k] };
			memset(ext, 0, sizeof(ext));
			dev_extent_set_chunk_tree(ext, BTRFS_CHUNK_TREE_OBJECTID);
			dev_extent_set_chunk_objectid(ext, BTRFS_FIRST_CHUNK_TREE_OBJECTID);
			dev_extent_set_chunk_offset(ext, c->logical);
			dev_extent_set_length(ext, c->length);
			memcpy(dev_extent_chunk_tree_uuid_ptr(ext), ct_uuid, BTRFS_UUID_SIZE);
			ret = items_push(out, &key, ext, sizeof(ext));
		}
	}
	if (!ret)
		qsort(out->v, out->n, sizeof(out->v[0]), cmp_items);
	return ret;
}

/* The dev tree's root: the held block no held node points at. */
static int dev_tree_root(struct restore_ctx *r, uint64_t *root)
{
	struct held_list *l = &r->dev_blocks;
	int best = -1;

	for (size_t i = 0; i < l->n; i++) {
		if (!held_referenced(l, l->v[i].bytenr) && (best < 0 || header_level(l->v[i].data) > header_level(l->v[best].data) ||
				    (header_level(l->v[i].data) == header_level(l->v[best].data) &&
				     header_generation(l->v[i].data) > header_generation(l->v[best].data))))
			best = (int)i;
	}
	if (best < 0)
		return rs_error(r, "the image holds no dev tree");
	*root = l->v[best].bytenr;
	return 0;
}

static int new_super(struct restore_ctx *r, const struct single_dev *d, uint8_t *sb)
{
	uint8_t *backups = super_super_roots_ptr(sb);

	memcpy(sb, r->super, BTRFS_SUPER_INFO_SIZE);
	super_set_num_devices(sb, 1);
	super_set_total_bytes(sb, r->new_size);
	memcpy(super_dev_item_ptr(sb), d->item, sizeof(d->item));
	memset(super_sys_chunk_array_ptr(sb), 0, BTRFS_SYSTEM_CHUNK_ARRAY_SIZE);
	memcpy(super_sys_chunk_array_ptr(sb), d->sys_array, d->sys_size);
	super_set_sys_chunk_array_size(sb, d->sys_size);
	for (int b = 0; b < BTRFS_NUM_BACKUP_ROOTS; b++) {
		uint8_t *bk = backups + b * sizeof(struct btrfs_root_backup);
		backup_set_num_devices(bk, 1);
		backup_set_total_bytes(bk, r->new_size);
	}
	return 0;
}

int single_finish(struct restore_ctx *r)
{
	struct item_list chunk_items = { 0 }, dev_items = { 0 };
	struct single_dev d;
	uint8_t sb[BTRFS_SUPER_INFO_SIZE];
	uint64_t dev_root = 0;
	int ret;

	memset(&d, 0, sizeof(d));
	make_dev_item(r, &d);
	if ((ret = dev_tree_root(r, &dev_root)) || (ret = new_chunk_tree(r, &d, &chunk_items)) ||
	    (ret = new_dev_tree(r, &d, dev_root, &dev_items)))
		goto out;
	if ((ret = refill_tree(r, &r->chunk_blocks, super_chunk_root(r->super), &chunk_items, "chunk")) ||
	    (ret = refill_tree(r, &r->dev_blocks, dev_root, &dev_items, "dev")))
		goto out;
	if ((ret = new_super(r, &d, sb)))
		goto out;
	ret = restore_write_supers(r, r->ios[0], sb, NULL, NULL, r->new_size);
	if (ret)
		rs_error(r, "writing the superblocks of %s: %s", r->outs[0], strerror(-ret));
out:
	items_free(&chunk_items);
	items_free(&dev_items);
	return ret;
}
