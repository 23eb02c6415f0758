// SPDX-License-Identifier: LGPL-2.1-or-later
/* New chunks for tree blocks when the existing metadata (or system) block
 * groups are full. The chunk goes into the chunk map and the allocator at
 * once, so the transaction can keep allocating (also the blocks that hold
 * the new chunk's own items); the items are written at commit: the chunk
 * item (and, for a system chunk, the superblock's system chunk array), one
 * dev extent per stripe, the devices' bytes_used and the block group item.
 * The free-space tree entries of the group come from the allocator's map
 * like those of any other group. Sizes follow the kernel's regular policy:
 * 256 MiB of metadata (1 GiB above 50 GiB of devices), 32 MiB of system, at
 * most a tenth of the devices, on device space no dev extent covers. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <btk/item_check.h>
#include <btk/blockgroups.h>
#include <btk/chunk_edit.h>
#include "libfs/trans_internal.h"
#include <btk/volumes.h>
#include "libfs/volumes_internal.h"

/* The chunks a transaction allocated for tree blocks. */
struct trans_alloc_chunks {
	struct new_chunk *new_chunks;
	size_t nnew_chunks;
};

#define SZ_1M (1ULL << 20)
#define SZ_16M (16ULL << 20)
#define SZ_32M (32ULL << 20)
#define SZ_256M (256ULL << 20)
#define SZ_1G (1ULL << 30)
#define MIN_STRIPE_SIZE (4ULL << 20)

/* Device space this transaction must not hand out again: every dev extent in
 * its dev tree (which holds the committed ones plus those it added, e.g. by
 * a profile change), the stripes of chunks it allocated, and the ranges a
 * conversion reserved (fs->alloc_hints). */
struct taken {
	struct stripe_place *place;
	uint64_t *len;
	unsigned n, cap;
};

static int taken_add(struct taken *tk, uint64_t devid, uint64_t physical, uint64_t len)
{
	if (tk->n == tk->cap) {
		unsigned cap = tk->cap ? tk->cap * 2 : 32;
		struct stripe_place *p = realloc(tk->place, cap * sizeof(*p));
		uint64_t *l;
		if (!p)
			return -ENOMEM;
		tk->place = p;
		l = realloc(tk->len, cap * sizeof(*l));
		if (!l)
			return -ENOMEM;
		tk->len = l;
		tk->cap = cap;
	}
	tk->place[tk->n] = (struct stripe_place){ devid, physical };
	tk->len[tk->n++] = len;
	return 0;
}

static void taken_free(struct taken *tk)
{
	free(tk->place);
	free(tk->len);
}

struct taken_scan {
	struct taken *tk;
	uint64_t *used;
};

static int taken_dev_extent(void *arg, const struct btrfs_key *key, const uint8_t *data, uint32_t size)
{
	struct taken_scan *s = arg;
	struct item_view v = item_view_of(data, size);

	if (!ITEM_VIEW_STRUCT(&v, 0, struct btrfs_dev_extent))
		return 0;
	*s->used += dev_extent_length(data);
	return taken_add(s->tk, key->objectid, key->offset, dev_extent_length(data));
}

/* Taken space of one device; *used is its sum. */
static int taken_collect(struct trans *t, uint64_t devid, struct taken *tk, uint64_t *used)
{
	struct taken_scan scan = { tk, used };
	const struct chunk_alloc_hints *h = t->fs->alloc_hints;
	struct tree_root_ptr dev_root;
	int ret = trans_get_root(t, BTRFS_DEV_TREE_OBJECTID, &dev_root);

	*used = 0;
	if (ret || (ret = volumes_each_dev_extent(t->fs, &dev_root, devid, taken_dev_extent, &scan)) < 0)
		return ret;
	for (size_t i = 0; i < t->alloc_chunks->nnew_chunks; i++) {
		const struct new_chunk *nc = &t->alloc_chunks->new_chunks[i];
		for (unsigned s = 0; s < nc->nstripes; s++) {
			if (nc->devid[s] != devid || nc->items_written)
				continue; /* written ones are in the dev tree already */
			*used += nc->stripe_size;
			if ((ret = taken_add(tk, devid, nc->physical[s], nc->stripe_size)))
				return ret;
		}
	}
	for (unsigned i = 0; h && i < h->nreserved; i++) {
		bool recorded = false;   /* its dev extent is in already: count it once */
		if (h->reserved[i].devid != devid)
			continue;
		for (unsigned k = 0; k < tk->n && !recorded; k++)
			recorded = tk->place[k].physical == h->reserved[i].physical;
		if (recorded)
			continue;
		*used += h->reserved_len[i];
		if ((ret = taken_add(tk, devid, h->reserved[i].physical, h->reserved_len[i])))
			return ret;
	}
	return 0;
}

/* Stripes and devices a profile needs; 0 for profiles not allocated here. */
static unsigned profile_stripes(uint64_t profile, unsigned *per_device)
{
	*per_device = 1;
	switch (profile) {
	case 0: return 1;
	case BTRFS_BLOCK_GROUP_DUP: *per_device = 2; return 2;
	case BTRFS_BLOCK_GROUP_RAID1: return 2;
	case BTRFS_BLOCK_GROUP_RAID1C3: return 3;
	case BTRFS_BLOCK_GROUP_RAID1C4: return 4;
	default: return 0;
	}
}

/* The kernel's size for a new chunk of this type (every profile here keeps
 * one full copy per stripe, so the chunk length is the stripe size). */
static uint64_t wanted_stripe_size(const struct fs_info *fs, uint64_t type)
{
	uint64_t total = 0, max, tenth;

	for (unsigned i = 0; i < fs->num_devices; i++)
		total += fs->devices[i].total_bytes;
	if (type & BTRFS_BLOCK_GROUP_SYSTEM)
		max = SZ_32M;
	else
		max = total > 50 * SZ_1G ? SZ_1G : SZ_256M;
	tenth = total / 10;
	if (tenth < max)
		max = (tenth + SZ_16M - 1) / SZ_16M * SZ_16M;
	return max < MIN_STRIPE_SIZE ? MIN_STRIPE_SIZE : max;
}

struct candidate {
	unsigned dev;        /* index in fs->devices */
	uint64_t free_bytes;
};

static int by_free_desc(const void *a, const void *b)
{
	const struct candidate *x = a, *y = b;

	return x->free_bytes < y->free_bytes ? 1 : x->free_bytes > y->free_bytes ? -1 : 0;
}

/* Place `nstripes` stripes of `size` bytes: per_device on each of the devices
 * with the most free space. -ENOSPC when they do not fit. */
static int place_stripes(struct trans *t, uint64_t size, unsigned nstripes, unsigned per_device,
			 struct new_chunk *nc)
{
	struct fs_info *fs = t->fs;
	struct candidate *cand = calloc(fs->num_devices ? fs->num_devices : 1, sizeof(*cand));
	unsigned ndev = nstripes / per_device, got = 0;
	int ret = 0;

	if (!cand)
		return -ENOMEM;
	for (unsigned i = 0; i < fs->num_devices; i++) {
		struct taken tk = { 0 };
		uint64_t used;
		ret = taken_collect(t, fs->devices[i].devid, &tk, &used);
		taken_free(&tk);
		if (ret)
			goto out;
		cand[i] = (struct candidate){ i, fs->devices[i].total_bytes > used ? fs->devices[i].total_bytes - used : 0 };
	}
	qsort(cand, fs->num_devices, sizeof(*cand), by_free_desc);
	for (unsigned c = 0; c < fs->num_devices && got < ndev; c++) {
		uint64_t devid = fs->devices[cand[c].dev].devid, phys[2];
		struct taken tk = { 0 };
		uint64_t used;
		unsigned k;
		if (!fs->devices[cand[c].dev].io)
			continue;
		ret = taken_collect(t, devid, &tk, &used);
		for (k = 0; ret == 0 && k < per_device; k++) {
			ret = device_find_free(fs, devid, size, tk.place, tk.len, tk.n, &phys[k]);
			if (ret == 0)
				ret = taken_add(&tk, devid, phys[k], size);
		}
		taken_free(&tk);
		if (ret == -ENOSPC) {
			ret = 0;
			continue;
		}
		if (ret)
			goto out;
		for (k = 0; k < per_device; k++) {
			nc->devid[got * per_device + k] = devid;
			nc->physical[got * per_device + k] = phys[k];
		}
		got++;
	}
	ret = got == ndev ? 0 : -ENOSPC;
out:
	free(cand);
	return ret;
}

/* The chunk item (without its key) of a new chunk; returns its size. */
static uint32_t build_chunk_item(struct trans *t, const struct new_chunk *nc, uint8_t *item)
{
	struct stripe_place stripes[NEW_CHUNK_MAX_STRIPES];

	for (unsigned i = 0; i < nc->nstripes; i++)
		stripes[i] = (struct stripe_place){ nc->devid[i], nc->physical[i] };
	return chunk_item_build(t->fs, nc->length, nc->type, stripes, nc->nstripes, item);
}

/* The type (kind and profile) of the new chunk: that of the first existing
 * group that can hold these tree blocks, with the profile a conversion under
 * way asks for (fs->alloc_hints). */
static int template_type(struct trans *t, uint64_t root, uint64_t *type)
{
	uint64_t want = root == BTRFS_CHUNK_TREE_OBJECTID ? BTRFS_BLOCK_GROUP_SYSTEM : BTRFS_BLOCK_GROUP_METADATA;
	const struct chunk_alloc_hints *h = t->fs->alloc_hints;
	int64_t profile = !h ? -1 : want == BTRFS_BLOCK_GROUP_SYSTEM ? h->system_profile : h->metadata_profile;

	for (size_t i = 0; i < alloc_group_count(t); i++) {
		if (alloc_group_at(t, i)->flags & want) {
			*type = alloc_group_at(t, i)->flags & (BTRFS_BLOCK_GROUP_TYPE_MASK | BTRFS_BLOCK_GROUP_PROFILE_MASK);
			if (profile >= 0)
				*type = (*type & ~BTRFS_BLOCK_GROUP_PROFILE_MASK) | (uint64_t)profile;
			return 0;
		}
	}
	return fs_error(t->fs, -ENOSPC, "no %s block group to take the profile of a new chunk from",
			want == BTRFS_BLOCK_GROUP_SYSTEM ? "system" : "metadata");
}

static uint64_t next_logical(const struct fs_info *fs)
{
	uint64_t end = 0;

	for (size_t i = 0; i < fs->chunks->count; i++) {
		const struct chunk *c = fs->chunks->chunks[i];
		if (c->logical + c->length > end)
			end = c->logical + c->length;
	}
	return end;
}

int chunk_alloc_for_tree(struct trans *t, uint64_t root)
{
	struct fs_info *fs = t->fs;
	struct new_chunk nc = { 0 };
	uint8_t item[sizeof(struct btrfs_chunk) + NEW_CHUNK_MAX_STRIPES * sizeof(struct btrfs_stripe)];
	unsigned per_device;
	uint64_t size;
	uint32_t isize;
	int ret;

	if ((ret = template_type(t, root, &nc.type)))
		return ret;
	if (nc.type & (BTRFS_BLOCK_GROUP_RAID5 | BTRFS_BLOCK_GROUP_RAID6))
		return fs_error(fs, -EOPNOTSUPP, "%s metadata: this version does not write parity",
				profile_name(nc.type));
	nc.nstripes = profile_stripes(nc.type & BTRFS_BLOCK_GROUP_PROFILE_MASK, &per_device);
	if (nc.nstripes == 0)
		return fs_error(fs, -ENOSPC, "the %s block groups are full and new %s chunks are not "
				"allocated by this version", root == BTRFS_CHUNK_TREE_OBJECTID ? "system" : "metadata",
				profile_name(nc.type));
	/* the kernel's size, or the largest power-of-two fraction of it that fits */
	for (size = wanted_stripe_size(fs, nc.type);; size /= 2) {
		ret = place_stripes(t, size, nc.nstripes, per_device, &nc);
		if (ret != -ENOSPC || size / 2 < MIN_STRIPE_SIZE)
			break;
	}
	if (ret == -ENOSPC)
		return fs_error(fs, -ENOSPC, "the %s block groups are full and the devices have no room for "
				"a new %s chunk", root == BTRFS_CHUNK_TREE_OBJECTID ? "system" : "metadata",
				profile_name(nc.type));
	if (ret)
		return ret;
	nc.stripe_size = nc.length = size;
	nc.logical = next_logical(fs);
	isize = build_chunk_item(t, &nc, item);
	if (t->alloc_chunks->nnew_chunks % 8 == 0) {
		struct new_chunk *v = realloc(t->alloc_chunks->new_chunks, (t->alloc_chunks->nnew_chunks + 8) * sizeof(*v));
		if (!v)
			return -ENOMEM;
		t->alloc_chunks->new_chunks = v;
	}
	ret = chunk_map_add_item(fs, nc.logical, item, isize);
	if (ret)
		return ret;
	t->alloc_chunks->new_chunks[t->alloc_chunks->nnew_chunks++] = nc;
	{
		struct alloc_group *g = alloc_add_group(t, nc.logical, nc.length, nc.type);
		if (!g)
			return -ENOMEM;
		g->fst_stale = true;
	}
	alloc_note_event(t);
	return 0;
}

/* Append one chunk to the superblock's system chunk array. */
static int sys_chunk_array_append(struct trans *t, uint64_t logical, const uint8_t *item, uint32_t size)
{
	uint8_t *sb = trans_super(t);
	uint32_t used = super_sys_chunk_array_size(sb);
	struct btrfs_key key = { BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY, logical };
	uint8_t *array = super_sys_chunk_array_ptr(sb);

	if (used + sizeof(struct btrfs_disk_key) + size > BTRFS_SYSTEM_CHUNK_ARRAY_SIZE)
		return fs_error(t->fs, -ENOSPC, "the system chunk array has no room for another chunk");
	key_to_disk(array + used, &key);
	memcpy(array + used + sizeof(struct btrfs_disk_key), item, size);
	super_set_sys_chunk_array_size(sb, used + (uint32_t)sizeof(struct btrfs_disk_key) + size);
	return 0;
}

static int write_one(struct trans *t, size_t idx)
{
	struct new_chunk nc = t->alloc_chunks->new_chunks[idx];
	struct btrfs_key key = { BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY, nc.logical };
	struct btrfs_key bg_key = { nc.logical, BTRFS_BLOCK_GROUP_ITEM_KEY, nc.length };
	uint8_t item[sizeof(struct btrfs_chunk) + NEW_CHUNK_MAX_STRIPES * sizeof(struct btrfs_stripe)];
	uint8_t bg[sizeof(struct btrfs_block_group_item)];
	uint32_t isize = build_chunk_item(t, &nc, item);
	int ret;

	/* written before the inserts: they may allocate, and a chunk they
	 * allocate is written by the caller's next pass */
	t->alloc_chunks->new_chunks[idx].items_written = true;
	ret = trans_insert_item(t, BTRFS_CHUNK_TREE_OBJECTID, &key, item, isize);
	if (!ret && (nc.type & BTRFS_BLOCK_GROUP_SYSTEM))
		ret = sys_chunk_array_append(t, nc.logical, item, isize);
	for (unsigned i = 0; !ret && i < nc.nstripes; i++) {
		struct stripe_place s = { nc.devid[i], nc.physical[i] };
		ret = chunk_add_dev_extent(t, nc.logical, &s, nc.stripe_size);
		if (!ret)
			ret = device_add_bytes_used(t, nc.devid[i], (int64_t)nc.stripe_size);
	}
	if (ret)
		return ret;
	block_group_set_used(bg, 0); /* the commit adds what the allocator handed out */
	block_group_set_chunk_objectid(bg, BTRFS_FIRST_CHUNK_TREE_OBJECTID);
	block_group_set_flags(bg, nc.type);
	return trans_insert_item(t, trans_block_group_tree(t), &bg_key, bg, sizeof(bg));
}

int chunk_alloc_write_items(struct trans *t)
{
	for (size_t i = 0; i < t->alloc_chunks->nnew_chunks; i++) {
		int ret;
		if (t->alloc_chunks->new_chunks[i].items_written)
			continue;
		ret = write_one(t, i);
		if (ret)
			return ret;
	}
	return 0;
}

int chunk_alloc_init(struct trans *t)
{
	t->alloc_chunks = calloc(1, sizeof(*t->alloc_chunks));
	return t->alloc_chunks ? 0 : -ENOMEM;
}

void chunk_alloc_release(struct trans *t)
{
	if (!t->alloc_chunks)
		return;
	free(t->alloc_chunks->new_chunks);
	free(t->alloc_chunks);
	t->alloc_chunks = NULL;
}

bool chunk_alloc_any(const struct trans *t)
{
	return t->alloc_chunks && t->alloc_chunks->nnew_chunks;
}

bool chunk_alloc_is_new(const struct trans *t, uint64_t logical)
{
	for (size_t i = 0; i < t->alloc_chunks->nnew_chunks; i++)
		if (t->alloc_chunks->new_chunks[i].logical == logical)
			return true;
	return false;
}

bool chunk_alloc_items_pending(const struct trans *t)
{
	for (size_t i = 0; i < t->alloc_chunks->nnew_chunks; i++)
		if (!t->alloc_chunks->new_chunks[i].items_written)
			return true;
	return false;
}
