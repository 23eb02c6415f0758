// SPDX-License-Identifier: LGPL-2.1-or-later
/* The chunk map: which device bytes hold each logical address. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "libfs/volumes_internal.h"
#include <btk/item_check.h>
#include <btk/tree.h>
#include <btk/volumes.h>

const char *profile_name(uint64_t flags)
{
	switch (flags & BTRFS_BLOCK_GROUP_PROFILE_MASK) {
	case 0: return "single";
	case BTRFS_BLOCK_GROUP_DUP: return "DUP";
	case BTRFS_BLOCK_GROUP_RAID0: return "RAID0";
	case BTRFS_BLOCK_GROUP_RAID1: return "RAID1";
	case BTRFS_BLOCK_GROUP_RAID1C3: return "RAID1C3";
	case BTRFS_BLOCK_GROUP_RAID1C4: return "RAID1C4";
	case BTRFS_BLOCK_GROUP_RAID10: return "RAID10";
	case BTRFS_BLOCK_GROUP_RAID5: return "RAID5";
	case BTRFS_BLOCK_GROUP_RAID6: return "RAID6";
	default: return "unknown";
	}
}

unsigned profile_copies(uint64_t flags)
{
	switch (flags & BTRFS_BLOCK_GROUP_PROFILE_MASK) {
	case BTRFS_BLOCK_GROUP_DUP:
	case BTRFS_BLOCK_GROUP_RAID1:
	case BTRFS_BLOCK_GROUP_RAID10: return 2;
	case BTRFS_BLOCK_GROUP_RAID1C3: return 3;
	case BTRFS_BLOCK_GROUP_RAID1C4: return 4;
	default: return 1;
	}
}

uint64_t chunk_stripe_size(uint64_t length, uint64_t type, unsigned num, unsigned sub)
{
	uint64_t p = type & BTRFS_BLOCK_GROUP_PROFILE_MASK;

	if (p == BTRFS_BLOCK_GROUP_RAID0 && num)
		return length / num;
	if (p == BTRFS_BLOCK_GROUP_RAID10 && sub && num / sub)
		return length / (num / sub);
	if (p == BTRFS_BLOCK_GROUP_RAID5 && num > 1)
		return length / (num - 1);
	if (p == BTRFS_BLOCK_GROUP_RAID6 && num > 2)
		return length / (num - 2);
	return length;
}

static struct fs_device *device_by_devid(struct fs_info *fs, uint64_t devid)
{
	for (unsigned i = 0; i < fs->num_devices; i++)
		if (fs->devices[i].devid == devid)
			return &fs->devices[i];
	return NULL;
}

size_t chunk_map_find_index(const struct chunk_map *map, uint64_t logical)
{
	size_t lo = 0, hi = map->count;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct chunk *c = map->chunks[mid];
		if (c->logical + c->length <= logical)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

const struct chunk *chunk_map_lookup(const struct chunk_map *map, uint64_t logical)
{
	size_t i;

	if (!map)
		return NULL;
	i = chunk_map_find_index(map, logical);
	if (i < map->count && map->chunks[i]->logical <= logical)
		return map->chunks[i];
	return NULL;
}

static int chunk_map_insert(struct fs_info *fs, struct chunk *c)
{
	struct chunk_map *map = fs->chunks;
	size_t i = chunk_map_find_index(map, c->logical);

	if (i < map->count && map->chunks[i]->logical < c->logical + c->length) {
		const struct chunk *o = map->chunks[i];
		if (o->logical == c->logical && o->length == c->length && o->type == c->type &&
		    o->num_stripes == c->num_stripes) {
			free(c); /* the same chunk seen in the sys array and the chunk tree */
			return 0;
		}
		uint64_t start = c->logical;
		free(c);
		return fs_error(fs, -EUCLEAN, "chunk at %llu overlaps chunk [%llu, +%llu)",
				(unsigned long long)start, (unsigned long long)o->logical,
				(unsigned long long)o->length);
	}
	if (map->count == map->capacity) {
		size_t cap = map->capacity ? map->capacity * 2 : 64;
		struct chunk **v = realloc(map->chunks, cap * sizeof(*v));
		if (!v) {
			free(c);
			return -ENOMEM;
		}
		map->chunks = v;
		map->capacity = cap;
	}
	memmove(&map->chunks[i + 1], &map->chunks[i], (map->count - i) * sizeof(*map->chunks));
	map->chunks[i] = c;
	map->count++;
	return 0;
}

int chunk_item_validate(struct fs_info *fs, uint64_t logical, const uint8_t *item, uint32_t size)
{
	struct btrfs_key key = { BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY, logical };
	struct item_verdict vd;

	/* the validator's chunk rules; type bits a newer format added do not
	 * keep a chunk out of the map (the feature gate decides about writing) */
	if (item_check_fs(fs, &key, item, size, &vd) == 0 || vd.fault == ITEM_UNKNOWN_BITS)
		return 0;
	return fs_error(fs, -EUCLEAN, "chunk at %llu (type 0x%llx, %u stripes in %u bytes): %s",
			(unsigned long long)logical,
			size >= sizeof(struct btrfs_chunk) ? (unsigned long long)chunk_type(item) : 0ULL,
			size >= sizeof(struct btrfs_chunk) ? chunk_num_stripes(item) : 0, size, vd.why);
}

int chunk_map_add_item(struct fs_info *fs, uint64_t logical, const uint8_t *item, uint32_t size)
{
	unsigned num = chunk_num_stripes(item);
	struct chunk *c;
	int ret = chunk_item_validate(fs, logical, item, size);

	if (ret)
		return ret;
	c = calloc(1, sizeof(*c) + num * sizeof(c->stripes[0]));
	if (!c)
		return -ENOMEM;
	c->logical = logical;
	c->length = chunk_length(item);
	c->type = chunk_type(item);
	c->stripe_len = chunk_stripe_len(item);
	c->num_stripes = (uint16_t)num;
	c->sub_stripes = (uint16_t)chunk_sub_stripes(item);
	for (unsigned i = 0; i < num; i++) {
		const uint8_t *s = chunk_stripe(item, i);
		c->stripes[i].devid = stripe_devid(s);
		c->stripes[i].physical = stripe_offset(s);
		c->stripes[i].dev = device_by_devid(fs, c->stripes[i].devid);
		if (c->stripes[i].dev && !c->stripes[i].dev->io)
			c->stripes[i].dev = NULL;
	}
	return chunk_map_insert(fs, c);
}

int chunk_map_set_stripes(struct fs_info *fs, uint64_t logical, const struct chunk_stripe *stripes,
			  unsigned n)
{
	struct chunk_map *map = fs->chunks;
	size_t i = chunk_map_find_index(map, logical);
	struct chunk *old, *c;

	if (i >= map->count || map->chunks[i]->logical != logical || n == 0 || n > MAX_COPIES)
		return -EINVAL;
	old = map->chunks[i];
	c = malloc(sizeof(*c) + n * sizeof(c->stripes[0]));
	if (!c)
		return -ENOMEM;
	memcpy(c, old, sizeof(*c));
	c->num_stripes = (uint16_t)n;
	for (unsigned s = 0; s < n; s++) {
		c->stripes[s] = stripes[s];
		c->stripes[s].dev = device_by_devid(fs, stripes[s].devid);
		if (c->stripes[s].dev && !c->stripes[s].dev->io)
			c->stripes[s].dev = NULL;
	}
	map->chunks[i] = c;
	free(old);
	fs->chunk_map_epoch++; /* an open transaction's early writes need the new copies too */
	return 0;
}

void chunk_map_free(struct chunk_map *map)
{
	if (!map)
		return;
	for (size_t i = 0; i < map->count; i++)
		free(map->chunks[i]);
	free(map->chunks);
	free(map);
}

int volumes_read_sys_chunk_array(struct fs_info *fs)
{
	const uint8_t *array = super_sys_chunk_array_ptr(fs->super);
	uint32_t size = super_sys_chunk_array_size(fs->super);
	uint32_t pos = 0;
	int ret;

	if (!fs->chunks) {
		fs->chunks = calloc(1, sizeof(*fs->chunks));
		if (!fs->chunks)
			return -ENOMEM;
	}
	while (pos < size) {
		struct btrfs_key key;
		uint32_t item_size;

		if (size - pos < sizeof(struct btrfs_disk_key) + sizeof(struct btrfs_chunk))
			return fs_error(fs, -EUCLEAN, "system chunk array truncated at byte %u", pos);
		key_from_disk(&key, array + pos);
		pos += sizeof(struct btrfs_disk_key);
		if (key.type != BTRFS_CHUNK_ITEM_KEY)
			return fs_error(fs, -EUCLEAN, "system chunk array: unexpected key type %u", key.type);
		item_size = (uint32_t)chunk_item_size(chunk_num_stripes(array + pos));
		if (chunk_num_stripes(array + pos) == 0 || item_size > size - pos)
			return fs_error(fs, -EUCLEAN, "system chunk array: chunk at %llu truncated",
					(unsigned long long)key.offset);
		ret = chunk_map_add_item(fs, key.offset, array + pos, item_size);
		if (ret)
			return ret;
		pos += item_size;
	}
	return 0;
}

static int map_striped(const struct chunk *c, uint64_t offset, struct phys_copy *copies,
		       uint64_t *contig_len)
{
	uint64_t stripe_nr = offset / c->stripe_len;
	uint64_t in_stripe = offset % c->stripe_len;
	uint64_t profile = c->type & BTRFS_BLOCK_GROUP_PROFILE_MASK;
	unsigned idx, n = 1;
	uint64_t row;

	*contig_len = c->stripe_len - in_stripe;
	if (profile == BTRFS_BLOCK_GROUP_RAID0) {
		idx = (unsigned)(stripe_nr % c->num_stripes);
		row = stripe_nr / c->num_stripes;
	} else if (profile == BTRFS_BLOCK_GROUP_RAID10) {
		unsigned groups = c->num_stripes / c->sub_stripes;
		idx = (unsigned)(stripe_nr % groups) * c->sub_stripes;
		row = stripe_nr / groups;
		n = c->sub_stripes;
	} else {
		unsigned parity = profile == BTRFS_BLOCK_GROUP_RAID6 ? 2 : 1;
		unsigned data = c->num_stripes - parity;
		row = stripe_nr / data;
		/* parity rotates: data stripe k of row r sits on device (r + k) mod n */
		idx = (unsigned)((row + stripe_nr % data) % c->num_stripes);
	}
	for (unsigned i = 0; i < n; i++) {
		const struct chunk_stripe *s = &c->stripes[idx + i];
		copies[i].dev = s->dev;
		copies[i].devid = s->devid;
		copies[i].physical = s->physical + row * c->stripe_len + in_stripe;
	}
	return (int)n;
}

int volumes_map(struct fs_info *fs, uint64_t logical, uint64_t len, struct phys_copy *copies,
		uint64_t *contig_len)
{
	const struct chunk *c = chunk_map_lookup(fs->chunks, logical);
	uint64_t offset, profile, dummy;

	if (!contig_len)
		contig_len = &dummy;
	if (!c)
		return fs_error(fs, -ENOENT, "logical address %llu is not in any chunk",
				(unsigned long long)logical);
	offset = logical - c->logical;
	profile = c->type & BTRFS_BLOCK_GROUP_PROFILE_MASK;
	if (profile & (BTRFS_BLOCK_GROUP_RAID0 | BTRFS_BLOCK_GROUP_RAID10 | BTRFS_BLOCK_GROUP_RAID5 |
		       BTRFS_BLOCK_GROUP_RAID6)) {
		int n = map_striped(c, offset, copies, contig_len);
		if (*contig_len > c->length - offset)
			*contig_len = c->length - offset;
		(void)len;
		return n;
	}
	/* single, DUP, RAID1, RAID1C3/4: every stripe is a full copy */
	for (unsigned i = 0; i < c->num_stripes && i < MAX_COPIES; i++) {
		copies[i].dev = c->stripes[i].dev;
		copies[i].devid = c->stripes[i].devid;
		copies[i].physical = c->stripes[i].physical + offset;
	}
	*contig_len = c->length - offset;
	return c->num_stripes < MAX_COPIES ? c->num_stripes : MAX_COPIES;
}

int volumes_num_copies(struct fs_info *fs, uint64_t logical)
{
	const struct chunk *c = chunk_map_lookup(fs->chunks, logical);

	return c ? (int)profile_copies(c->type) : 0;
}

int volumes_read(struct fs_info *fs, uint64_t logical, void *buf, uint64_t len, int mirror)
{
	uint8_t *p = buf;

	while (len) {
		struct phys_copy copies[MAX_COPIES];
		uint64_t contig, chunk_len;
		int n, ret;

		n = volumes_map(fs, logical, len, copies, &contig);
		if (n < 0)
			return n;
		if (mirror >= n)
			return -EINVAL;
		if (!copies[mirror].dev)
			return -ENODEV;
		chunk_len = len < contig ? len : contig;
		ret = io_read(copies[mirror].dev->io, p, chunk_len, copies[mirror].physical);
		if (ret)
			return ret;
		p += chunk_len;
		logical += chunk_len;
		len -= chunk_len;
	}
	return 0;
}
