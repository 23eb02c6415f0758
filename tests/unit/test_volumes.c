// SPDX-License-Identifier: GPL-2.0-only
/* The chunk map: synthetic chunk items of every profile map logical
 * addresses to the physical places worked out by hand, reads through the
 * map return the right device bytes, and nonsense geometry is refused. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <btk/volumes.h>
#include "libfs/volumes_internal.h"

#define K64 65536ULL
#define GiB (1ULL << 30)
#define MiB (1ULL << 20)
#define L0 (1ULL << 30) /* logical start of the test chunks */

static struct fs_info *new_fs(void)
{
	struct fs_info *fs = calloc(1, sizeof(*fs));

	cr_assert_not_null(fs);
	fs->sectorsize = 4096;
	fs->nodesize = 16384;
	fs->chunks = calloc(1, sizeof(*fs->chunks));
	cr_assert_not_null(fs->chunks);
	return fs;
}

/* Build a chunk item: stripe i on devid devids[i] at phys[i]. Returns its size. */
static uint32_t build_chunk(uint8_t *item, uint64_t length, uint64_t type, unsigned num, unsigned sub,
			    const uint64_t *devids, const uint64_t *phys)
{
	memset(item, 0, chunk_item_size(num));
	chunk_set_length(item, length);
	chunk_set_owner(item, BTRFS_EXTENT_TREE_OBJECTID);
	chunk_set_stripe_len(item, K64);
	chunk_set_type(item, type);
	chunk_set_io_align(item, K64);
	chunk_set_io_width(item, K64);
	chunk_set_sector_size(item, 4096);
	chunk_set_num_stripes(item, (uint16_t)num);
	chunk_set_sub_stripes(item, (uint16_t)sub);
	for (unsigned i = 0; i < num; i++) {
		stripe_set_devid(chunk_stripe(item, i), devids[i]);
		stripe_set_offset(chunk_stripe(item, i), phys[i]);
		memset(stripe_dev_uuid_ptr(chunk_stripe(item, i)), (int)devids[i], BTRFS_UUID_SIZE);
	}
	return (uint32_t)chunk_item_size(num);
}

/* Devices 1..n, stripe i on device i+1 at (i+1) GiB. */
static const uint64_t devids[4] = { 1, 2, 3, 4 };
static const uint64_t phys[4] = { 1 * GiB, 2 * GiB, 3 * GiB, 4 * GiB };

static void add_chunk(struct fs_info *fs, uint64_t logical, uint64_t length, uint64_t type, unsigned num,
		      unsigned sub)
{
	uint8_t item[512];
	uint32_t size = build_chunk(item, length, type, num, sub, devids, phys);
	int ret = chunk_map_add_item(fs, logical, item, size);

	cr_assert_eq(ret, 0, "%s with %u stripes refused: %s", profile_name(type), num, fs->errmsg);
}

struct where {
	uint64_t devid, physical;
};

/* Map L0 + offset and compare every copy and the contiguous length. */
static void expect_map(struct fs_info *fs, uint64_t offset, int ncopies, const struct where *want,
		       uint64_t want_contig)
{
	struct phys_copy copies[MAX_COPIES];
	uint64_t contig = 0;
	int n = volumes_map(fs, L0 + offset, 4096, copies, &contig);

	cr_assert_eq(n, ncopies, "offset %llu: %d copies, want %d (%s)", (unsigned long long)offset, n,
		     ncopies, fs->errmsg);
	for (int i = 0; i < n; i++) {
		cr_assert_eq(copies[i].devid, want[i].devid, "offset %llu copy %d: devid %llu, want %llu",
			     (unsigned long long)offset, i, (unsigned long long)copies[i].devid,
			     (unsigned long long)want[i].devid);
		cr_assert_eq(copies[i].physical, want[i].physical,
			     "offset %llu copy %d: physical %llu, want %llu", (unsigned long long)offset, i,
			     (unsigned long long)copies[i].physical, (unsigned long long)want[i].physical);
		cr_assert_null(copies[i].dev, "no device was opened");
	}
	cr_assert_eq(contig, want_contig, "offset %llu: contig %llu, want %llu", (unsigned long long)offset,
		     (unsigned long long)contig, (unsigned long long)want_contig);
}

#define ONE(d, p) ((const struct where[]){ { d, p } })
#define TWO(d1, p1, d2, p2) ((const struct where[]){ { d1, p1 }, { d2, p2 } })

Test(volumes_map, single)
{
	struct fs_info *fs = new_fs();
	uint64_t len = 8 * MiB;

	add_chunk(fs, L0, len, BTRFS_BLOCK_GROUP_DATA, 1, 0);
	expect_map(fs, 0, 1, ONE(1, 1 * GiB), len);
	expect_map(fs, 5000, 1, ONE(1, 1 * GiB + 5000), len - 5000);
	expect_map(fs, len - 4096, 1, ONE(1, 1 * GiB + len - 4096), 4096);
	cr_assert_eq(volumes_num_copies(fs, L0 + 77), 1);
	fs_close(fs);
}

Test(volumes_map, dup)
{
	struct fs_info *fs = new_fs();
	uint8_t item[256];
	const uint64_t dev[2] = { 1, 1 }, ph[2] = { 22 * MiB, 30 * MiB };
	uint64_t len = 8 * MiB;

	cr_assert_eq(chunk_map_add_item(fs, L0, item,
					build_chunk(item, len, BTRFS_BLOCK_GROUP_METADATA | BTRFS_BLOCK_GROUP_DUP,
						    2, 0, dev, ph)),
		     0, "%s", fs->errmsg);
	expect_map(fs, 0, 2, TWO(1, 22 * MiB, 1, 30 * MiB), len);
	expect_map(fs, 123 * 4096, 2, TWO(1, 22 * MiB + 123 * 4096, 1, 30 * MiB + 123 * 4096),
		   len - 123 * 4096);
	cr_assert_eq(volumes_num_copies(fs, L0), 2);
	fs_close(fs);
}

Test(volumes_map, raid1_raid1c3_raid1c4)
{
	struct fs_info *fs = new_fs();
	uint64_t len = 16 * MiB, off = 3 * MiB + 4096;

	add_chunk(fs, L0, len, BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_RAID1, 2, 0);
	add_chunk(fs, L0 + len, len, BTRFS_BLOCK_GROUP_METADATA | BTRFS_BLOCK_GROUP_RAID1C3, 3, 0);
	add_chunk(fs, L0 + 2 * len, len, BTRFS_BLOCK_GROUP_SYSTEM | BTRFS_BLOCK_GROUP_RAID1C4, 4, 0);
	expect_map(fs, off, 2, TWO(1, 1 * GiB + off, 2, 2 * GiB + off), len - off);
	expect_map(fs, len + off, 3,
		   ((const struct where[]){ { 1, 1 * GiB + off }, { 2, 2 * GiB + off }, { 3, 3 * GiB + off } }),
		   len - off);
	expect_map(fs, 2 * len + off, 4,
		   ((const struct where[]){ { 1, 1 * GiB + off },
					    { 2, 2 * GiB + off },
					    { 3, 3 * GiB + off },
					    { 4, 4 * GiB + off } }),
		   len - off);
	cr_assert_eq(volumes_num_copies(fs, L0), 2);
	cr_assert_eq(volumes_num_copies(fs, L0 + len), 3);
	cr_assert_eq(volumes_num_copies(fs, L0 + 2 * len), 4);
	fs_close(fs);
}

Test(volumes_map, raid0_three_stripes)
{
	struct fs_info *fs = new_fs();
	uint64_t len = 3 * K64 * 10;

	add_chunk(fs, L0, len, BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_RAID0, 3, 0);
	/* stripe n of the chunk is on stripe index n % 3, row n / 3 */
	expect_map(fs, 0, 1, ONE(1, 1 * GiB), K64);
	expect_map(fs, K64 + 100, 1, ONE(2, 2 * GiB + 100), K64 - 100);
	expect_map(fs, 2 * K64, 1, ONE(3, 3 * GiB), K64);
	expect_map(fs, 3 * K64 + 5 * 4096, 1, ONE(1, 1 * GiB + K64 + 5 * 4096), K64 - 5 * 4096);
	expect_map(fs, 7 * K64, 1, ONE(2, 2 * GiB + 2 * K64), K64);
	expect_map(fs, 29 * K64 + 4096, 1, ONE(3, 3 * GiB + 9 * K64 + 4096), K64 - 4096);
	cr_assert_eq(volumes_num_copies(fs, L0), 1);
	fs_close(fs);
}

Test(volumes_map, raid10_four_stripes)
{
	struct fs_info *fs = new_fs();
	uint64_t len = 2 * K64 * 16;

	add_chunk(fs, L0, len, BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_RAID10, 4, 2);
	/* two mirrored pairs (0,1) and (2,3); stripe n goes to pair n % 2, row n / 2 */
	expect_map(fs, 0, 2, TWO(1, 1 * GiB, 2, 2 * GiB), K64);
	expect_map(fs, K64, 2, TWO(3, 3 * GiB, 4, 4 * GiB), K64);
	expect_map(fs, 2 * K64 + 4096, 2, TWO(1, 1 * GiB + K64 + 4096, 2, 2 * GiB + K64 + 4096), K64 - 4096);
	expect_map(fs, 5 * K64 + 8192, 2, TWO(3, 3 * GiB + 2 * K64 + 8192, 4, 4 * GiB + 2 * K64 + 8192),
		   K64 - 8192);
	cr_assert_eq(volumes_num_copies(fs, L0), 2);
	fs_close(fs);
}

Test(volumes_map, raid5_three_stripes)
{
	struct fs_info *fs = new_fs();
	uint64_t len = 2 * K64 * 8;

	add_chunk(fs, L0, len, BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_RAID5, 3, 0);
	/* 2 data stripes per row; data stripe k of row r is on stripe (r + k) % 3 */
	expect_map(fs, 0, 1, ONE(1, 1 * GiB), K64);                       /* r0 k0 -> 0 */
	expect_map(fs, K64, 1, ONE(2, 2 * GiB), K64);                     /* r0 k1 -> 1 */
	expect_map(fs, 2 * K64 + 5, 1, ONE(2, 2 * GiB + K64 + 5), K64 - 5); /* r1 k0 -> 1 */
	expect_map(fs, 3 * K64, 1, ONE(3, 3 * GiB + K64), K64);           /* r1 k1 -> 2 */
	expect_map(fs, 4 * K64, 1, ONE(3, 3 * GiB + 2 * K64), K64);       /* r2 k0 -> 2 */
	expect_map(fs, 5 * K64 + 4096, 1, ONE(1, 1 * GiB + 2 * K64 + 4096), K64 - 4096); /* r2 k1 -> 0 */
	expect_map(fs, 6 * K64, 1, ONE(1, 1 * GiB + 3 * K64), K64);       /* r3 k0 -> 0 */
	cr_assert_eq(volumes_num_copies(fs, L0), 1);
	fs_close(fs);
}

Test(volumes_map, raid6_four_stripes)
{
	struct fs_info *fs = new_fs();
	uint64_t len = 2 * K64 * 8;

	add_chunk(fs, L0, len, BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_RAID6, 4, 0);
	/* 2 data stripes per row; data stripe k of row r is on stripe (r + k) % 4 */
	expect_map(fs, 0, 1, ONE(1, 1 * GiB), K64);                 /* r0 k0 -> 0 */
	expect_map(fs, K64, 1, ONE(2, 2 * GiB), K64);               /* r0 k1 -> 1 */
	expect_map(fs, 2 * K64, 1, ONE(2, 2 * GiB + K64), K64);     /* r1 k0 -> 1 */
	expect_map(fs, 3 * K64, 1, ONE(3, 3 * GiB + K64), K64);     /* r1 k1 -> 2 */
	expect_map(fs, 4 * K64, 1, ONE(3, 3 * GiB + 2 * K64), K64); /* r2 k0 -> 2 */
	expect_map(fs, 5 * K64 + 12288, 1, ONE(4, 4 * GiB + 2 * K64 + 12288), K64 - 12288); /* r2 k1 -> 3 */
	expect_map(fs, 6 * K64, 1, ONE(4, 4 * GiB + 3 * K64), K64); /* r3 k0 -> 3 */
	expect_map(fs, 7 * K64, 1, ONE(1, 1 * GiB + 3 * K64), K64); /* r3 k1 -> 0 */
	cr_assert_eq(volumes_num_copies(fs, L0), 1);
	fs_close(fs);
}

Test(volumes_map, striped_contig_stops_at_chunk_end)
{
	struct fs_info *fs = new_fs();

	/* a RAID0 chunk whose length is not a multiple of its stripes */
	add_chunk(fs, L0, K64 + 8192, BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_RAID0, 2, 0);
	expect_map(fs, K64 + 4096, 1, ONE(2, 2 * GiB + 4096), 4096);
	fs_close(fs);
}

Test(chunk_map, lookup_boundaries_and_order)
{
	struct fs_info *fs = new_fs();
	struct phys_copy copies[MAX_COPIES];
	const struct chunk *c;
	uint64_t len = 8 * MiB;

	/* added out of order, kept sorted */
	add_chunk(fs, L0 + 2 * len, len, BTRFS_BLOCK_GROUP_DATA, 1, 0);
	add_chunk(fs, L0, len, BTRFS_BLOCK_GROUP_DATA, 1, 0);
	add_chunk(fs, L0 + 4 * len, len, BTRFS_BLOCK_GROUP_DATA, 1, 0);
	cr_assert_eq(fs->chunks->count, 3);
	for (size_t i = 1; i < fs->chunks->count; i++)
		cr_assert_lt(fs->chunks->chunks[i - 1]->logical, fs->chunks->chunks[i]->logical);

	cr_assert_null(chunk_map_lookup(fs->chunks, 0));
	cr_assert_null(chunk_map_lookup(fs->chunks, L0 - 1));
	c = chunk_map_lookup(fs->chunks, L0);
	cr_assert_not_null(c);
	cr_assert_eq(c->logical, L0);
	cr_assert_eq(c->length, len);
	cr_assert_eq(c->num_stripes, 1);
	cr_assert_eq(c->stripes[0].devid, 1);
	cr_assert_eq(c->stripes[0].physical, 1 * GiB);
	cr_assert_eq(chunk_map_lookup(fs->chunks, L0 + len - 1), c);
	cr_assert_null(chunk_map_lookup(fs->chunks, L0 + len), "gap between chunks");
	cr_assert_eq(chunk_map_lookup(fs->chunks, L0 + 2 * len)->logical, L0 + 2 * len);
	cr_assert_eq(chunk_map_lookup(fs->chunks, L0 + 5 * len - 1)->logical, L0 + 4 * len);
	cr_assert_null(chunk_map_lookup(fs->chunks, L0 + 5 * len));
	cr_assert_null(chunk_map_lookup(NULL, L0));

	cr_assert_eq(volumes_map(fs, L0 + len, 4096, copies, NULL), -ENOENT);
	cr_assert(strstr(fs->errmsg, "not in any chunk"), "%s", fs->errmsg);
	cr_assert_eq(volumes_num_copies(fs, L0 + len), 0);
	fs_close(fs);
}

Test(chunk_map, same_chunk_twice_is_merged)
{
	struct fs_info *fs = new_fs();

	/* the system chunks appear both in the superblock and in the chunk tree */
	add_chunk(fs, L0, 8 * MiB, BTRFS_BLOCK_GROUP_SYSTEM | BTRFS_BLOCK_GROUP_DUP, 2, 0);
	add_chunk(fs, L0, 8 * MiB, BTRFS_BLOCK_GROUP_SYSTEM | BTRFS_BLOCK_GROUP_DUP, 2, 0);
	cr_assert_eq(fs->chunks->count, 1);
	fs_close(fs);
}

/* chunk_map_add_item must refuse the item with -EUCLEAN and a message, and leave the map alone. */
static void expect_refused(struct fs_info *fs, uint64_t logical, const uint8_t *item, uint32_t size,
			   const char *what)
{
	size_t before = fs->chunks->count;
	int ret;

	fs->errmsg[0] = 0;
	ret = chunk_map_add_item(fs, logical, item, size);
	cr_assert_eq(ret, -EUCLEAN, "%s: accepted (%d)", what, ret);
	cr_assert(strstr(fs->errmsg, "chunk"), "%s: message \"%s\"", what, fs->errmsg);
	cr_assert_eq(fs->chunks->count, before, "%s: map changed", what);
	/* the validation alone (btk-check reports the items the open left out); an
	 * overlap is the map's to refuse */
	if (!strstr(fs->errmsg, "overlaps"))
		cr_assert_eq(chunk_item_validate(fs, logical, item, size), -EUCLEAN, "%s: valid", what);
}

#define REFUSE(what, logical, length, type, num, sub)                                           \
	do {                                                                                    \
		uint8_t it[512];                                                                \
		uint32_t sz = build_chunk(it, length, type, num, sub, devids, phys);            \
		expect_refused(fs, logical, it, sz, what);                                      \
	} while (0)

Test(chunk_map, invalid_geometry_is_refused)
{
	struct fs_info *fs = new_fs();
	const uint64_t D = BTRFS_BLOCK_GROUP_DATA;

	REFUSE("DUP with 3 stripes", L0, 8 * MiB, D | BTRFS_BLOCK_GROUP_DUP, 3, 0);
	REFUSE("DUP with 1 stripe", L0, 8 * MiB, D | BTRFS_BLOCK_GROUP_DUP, 1, 0);
	REFUSE("single with 2 stripes", L0, 8 * MiB, D, 2, 0);
	REFUSE("RAID1 with 1 stripe", L0, 8 * MiB, D | BTRFS_BLOCK_GROUP_RAID1, 1, 0);
	REFUSE("RAID1C3 with 2 stripes", L0, 8 * MiB, D | BTRFS_BLOCK_GROUP_RAID1C3, 2, 0);
	REFUSE("RAID1C4 with 3 stripes", L0, 8 * MiB, D | BTRFS_BLOCK_GROUP_RAID1C4, 3, 0);
	REFUSE("RAID10 with sub_stripes 1", L0, 8 * MiB, D | BTRFS_BLOCK_GROUP_RAID10, 4, 1);
	REFUSE("RAID10 with 3 stripes", L0, 8 * MiB, D | BTRFS_BLOCK_GROUP_RAID10, 3, 2);
	REFUSE("RAID5 with 1 stripe", L0, 8 * MiB, D | BTRFS_BLOCK_GROUP_RAID5, 1, 0);
	REFUSE("RAID6 with 2 stripes", L0, 8 * MiB, D | BTRFS_BLOCK_GROUP_RAID6, 2, 0);
	REFUSE("two profiles", L0, 8 * MiB, D | BTRFS_BLOCK_GROUP_RAID1 | BTRFS_BLOCK_GROUP_DUP, 2, 0);
	REFUSE("no data/metadata/system bit", L0, 8 * MiB, BTRFS_BLOCK_GROUP_DUP, 2, 0);
	REFUSE("zero length", L0, 0, D, 1, 0);
	REFUSE("unaligned length", L0, 8 * MiB + 512, D, 1, 0);
	REFUSE("unaligned logical", L0 + 100, 8 * MiB, D, 1, 0);
	REFUSE("length wraps around", (UINT64_MAX & ~4095ULL) - 4 * 4096, 8 * MiB, D, 1, 0);
	fs_close(fs);
}

/* A chunk valid but for a type bit a newer format defines is mapped: its
 * blocks stay readable (the feature gate decides whether to write). */
Test(chunk_map, unknown_type_bits_are_mapped)
{
	struct fs_info *fs = new_fs();
	uint8_t it[512];
	uint32_t sz = build_chunk(it, 8 * MiB, BTRFS_BLOCK_GROUP_DATA | (1ULL << 40), 1, 0, devids, phys);

	cr_assert_eq(chunk_item_validate(fs, L0, it, sz), 0);
	cr_assert_eq(chunk_map_add_item(fs, L0, it, sz), 0);
	cr_assert_not_null(chunk_map_lookup(fs->chunks, L0 + 4096));
	/* the same bit on a broken geometry is still refused */
	sz = build_chunk(it, 8 * MiB, BTRFS_BLOCK_GROUP_DATA | (1ULL << 40), 2, 0, devids, phys);
	cr_assert_eq(chunk_item_validate(fs, L0 + 64 * MiB, it, sz), -EUCLEAN);
	fs_close(fs);
}

Test(chunk_map, malformed_items_are_refused)
{
	struct fs_info *fs = new_fs();
	uint8_t item[512];
	uint32_t size;

	size = build_chunk(item, 8 * MiB, BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_RAID1, 2, 0, devids, phys);
	expect_refused(fs, L0, item, size - 1, "item shorter than its stripes");
	expect_refused(fs, L0, item, size + 32, "item longer than its stripes");
	expect_refused(fs, L0, item, 40, "item smaller than one stripe");
	chunk_set_num_stripes(item, 0);
	expect_refused(fs, L0, item, (uint32_t)chunk_item_size(0), "zero stripes");
	size = build_chunk(item, 8 * MiB, BTRFS_BLOCK_GROUP_DATA, 1, 0, devids, phys);
	chunk_set_stripe_len(item, 0);
	expect_refused(fs, L0, item, size, "stripe_len 0");
	chunk_set_stripe_len(item, 3 * 4096);
	expect_refused(fs, L0, item, size, "stripe_len not a power of two");
	fs_close(fs);
}

Test(chunk_map, overlapping_chunks_are_refused)
{
	struct fs_info *fs = new_fs();
	const uint64_t D = BTRFS_BLOCK_GROUP_DATA;

	add_chunk(fs, L0, 8 * MiB, D, 1, 0);
	add_chunk(fs, L0 + 16 * MiB, 8 * MiB, D, 1, 0);
	REFUSE("starts inside another", L0 + 4 * MiB, 8 * MiB, D, 1, 0);
	cr_assert(strstr(fs->errmsg, "overlaps"), "%s", fs->errmsg);
	REFUSE("ends inside another", L0 - 4 * MiB, 8 * MiB, D, 1, 0);
	REFUSE("covers another", L0 + 12 * MiB, 16 * MiB, D, 1, 0);
	REFUSE("same start, other length", L0, 4 * MiB, D, 1, 0);
	REFUSE("same range, other profile", L0, 8 * MiB, D | BTRFS_BLOCK_GROUP_RAID1, 2, 0);
	/* the gap between them is free */
	add_chunk(fs, L0 + 8 * MiB, 8 * MiB, D, 1, 0);
	cr_assert_eq(fs->chunks->count, 3);
	fs_close(fs);
}

Test(profiles, names_and_copies)
{
	static const struct {
		uint64_t flags;
		const char *name;
		unsigned copies;
	} t[] = {
		{ 0, "single", 1 },
		{ BTRFS_BLOCK_GROUP_DUP, "DUP", 2 },
		{ BTRFS_BLOCK_GROUP_RAID0, "RAID0", 1 },
		{ BTRFS_BLOCK_GROUP_RAID1, "RAID1", 2 },
		{ BTRFS_BLOCK_GROUP_RAID1C3, "RAID1C3", 3 },
		{ BTRFS_BLOCK_GROUP_RAID1C4, "RAID1C4", 4 },
		{ BTRFS_BLOCK_GROUP_RAID10, "RAID10", 2 },
		{ BTRFS_BLOCK_GROUP_RAID5, "RAID5", 1 },
		{ BTRFS_BLOCK_GROUP_RAID6, "RAID6", 1 },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		/* the type bits do not change the profile */
		uint64_t f = t[i].flags | BTRFS_BLOCK_GROUP_METADATA | BTRFS_BLOCK_GROUP_DATA;
		cr_assert_str_eq(profile_name(t[i].flags), t[i].name);
		cr_assert_str_eq(profile_name(f), t[i].name);
		cr_assert_eq(profile_copies(f), t[i].copies, "%s", t[i].name);
	}
	cr_assert_str_eq(profile_name(BTRFS_BLOCK_GROUP_RAID1 | BTRFS_BLOCK_GROUP_RAID0), "unknown");
}

/* ---- reading through the map from memory devices ---- */

#define DEV_SIZE (4 * MiB)

/* The byte a test filesystem holds at a logical offset. */
static uint8_t pattern(uint64_t off)
{
	return (uint8_t)(off * 131 + (off >> 12) * 7 + 3);
}

static void add_mem_devices(struct fs_info *fs, unsigned n, uint8_t **bufs)
{
	fs->devices = calloc(n, sizeof(*fs->devices));
	cr_assert_not_null(fs->devices);
	fs->num_devices = n;
	for (unsigned i = 0; i < n; i++) {
		bufs[i] = calloc(1, DEV_SIZE);
		cr_assert_not_null(bufs[i]);
		fs->devices[i].devid = i + 1;
		fs->devices[i].total_bytes = DEV_SIZE;
		cr_assert_eq(io_open_mem(bufs[i], DEV_SIZE, true, &fs->devices[i].io), 0);
	}
}

Test(volumes_read, raid0_reads_cross_stripes_in_order)
{
	struct fs_info *fs = new_fs();
	uint8_t *bufs[2], item[256], *out;
	const uint64_t ph[2] = { 1 * MiB, 2 * MiB };
	uint64_t len = 2 * K64 * 8;

	add_mem_devices(fs, 2, bufs);
	cr_assert_eq(chunk_map_add_item(fs, L0, item,
					build_chunk(item, len, BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_RAID0,
						    2, 0, devids, ph)),
		     0, "%s", fs->errmsg);
	cr_assert_eq(fs->chunks->chunks[0]->stripes[0].dev, &fs->devices[0]);
	/* lay the logical pattern out as RAID0 would: stripe n on device n % 2, row n / 2 */
	for (uint64_t off = 0; off < len; off++) {
		uint64_t n = off / K64;
		bufs[n % 2][ph[n % 2] + (n / 2) * K64 + off % K64] = pattern(off);
	}
	out = malloc(len);
	cr_assert_not_null(out);
	cr_assert_eq(volumes_read(fs, L0 + 1000, out, 5 * K64 + 17, 0), 0, "%s", fs->errmsg);
	for (uint64_t i = 0; i < 5 * K64 + 17; i++)
		cr_assert_eq(out[i], pattern(1000 + i), "logical offset %llu", (unsigned long long)(1000 + i));
	cr_assert_eq(volumes_read(fs, L0, out, len, 0), 0);
	for (uint64_t i = 0; i < len; i++)
		cr_assert_eq(out[i], pattern(i));
	cr_assert_eq(volumes_read(fs, L0, out, 4096, 1), -EINVAL, "RAID0 has one copy");
	cr_assert_eq(volumes_read(fs, L0 + len - 100, out, 4096, 0), -ENOENT, "read runs off the chunk");
	free(out);
	fs_close(fs);
}

Test(volumes_read, dup_mirror_selects_the_copy)
{
	struct fs_info *fs = new_fs();
	uint8_t *bufs[1], item[256], out[4096];
	const uint64_t dev[2] = { 1, 1 }, ph[2] = { 1 * MiB, 3 * MiB };

	add_mem_devices(fs, 1, bufs);
	cr_assert_eq(chunk_map_add_item(fs, L0, item,
					build_chunk(item, MiB, BTRFS_BLOCK_GROUP_METADATA | BTRFS_BLOCK_GROUP_DUP,
						    2, 0, dev, ph)),
		     0, "%s", fs->errmsg);
	memset(bufs[0] + 1 * MiB + 8192, 0x11, 4096);
	memset(bufs[0] + 3 * MiB + 8192, 0x22, 4096);
	cr_assert_eq(volumes_read(fs, L0 + 8192, out, sizeof(out), 0), 0);
	cr_assert_eq(out[0], 0x11);
	cr_assert_eq(out[4095], 0x11);
	cr_assert_eq(volumes_read(fs, L0 + 8192, out, sizeof(out), 1), 0);
	cr_assert_eq(out[0], 0x22);
	cr_assert_eq(volumes_read(fs, L0 + 8192, out, sizeof(out), 2), -EINVAL);
	cr_assert_eq(volumes_read(fs, L0 - 4096, out, sizeof(out), 0), -ENOENT);
	fs_close(fs);
}

Test(volumes_read, missing_device_is_enodev)
{
	struct fs_info *fs = new_fs();
	uint8_t *bufs[1], out[4096];

	add_mem_devices(fs, 1, bufs);
	/* stripe 1 is on devid 2, which is not present */
	add_chunk(fs, L0, 8 * MiB, BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_RAID1, 2, 0);
	cr_assert_not_null(fs->chunks->chunks[0]->stripes[0].dev);
	cr_assert_null(fs->chunks->chunks[0]->stripes[1].dev);
	cr_assert_eq(volumes_read(fs, L0, out, sizeof(out), 1), -ENODEV);
	fs_close(fs);
}

/* ---- the superblock's system chunk array ---- */

static void set_sys_array(struct fs_info *fs, const uint8_t *data, uint32_t size)
{
	memset(super_sys_chunk_array_ptr(fs->super), 0, BTRFS_SYSTEM_CHUNK_ARRAY_SIZE);
	memcpy(super_sys_chunk_array_ptr(fs->super), data, size);
	super_set_sys_chunk_array_size(fs->super, size);
}

Test(sys_chunk_array, parses_every_chunk)
{
	struct fs_info *fs = new_fs();
	uint8_t array[1024];
	uint32_t pos = 0;
	struct btrfs_key key = { BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY, L0 };

	key_to_disk(array + pos, &key);
	pos += sizeof(struct btrfs_disk_key);
	pos += build_chunk(array + pos, 8 * MiB, BTRFS_BLOCK_GROUP_SYSTEM | BTRFS_BLOCK_GROUP_RAID1, 2, 0,
			   devids, phys);
	key.offset = L0 + 8 * MiB;
	key_to_disk(array + pos, &key);
	pos += sizeof(struct btrfs_disk_key);
	pos += build_chunk(array + pos, 4 * MiB, BTRFS_BLOCK_GROUP_SYSTEM, 1, 0, devids, phys);
	set_sys_array(fs, array, pos);
	cr_assert_eq(volumes_read_sys_chunk_array(fs), 0, "%s", fs->errmsg);
	cr_assert_eq(fs->chunks->count, 2);
	cr_assert_eq(volumes_num_copies(fs, L0 + 4096), 2);
	cr_assert_eq(volumes_num_copies(fs, L0 + 8 * MiB + 4096), 1);

	/* truncated in the middle of the second chunk */
	fs_close(fs);
	fs = new_fs();
	set_sys_array(fs, array, pos - 10);
	cr_assert_eq(volumes_read_sys_chunk_array(fs), -EUCLEAN);
	cr_assert(strstr(fs->errmsg, "truncated"), "%s", fs->errmsg);

	/* a key that is not a chunk item */
	fs_close(fs);
	fs = new_fs();
	array[sizeof(uint64_t)] = BTRFS_DEV_ITEM_KEY;
	set_sys_array(fs, array, pos);
	cr_assert_eq(volumes_read_sys_chunk_array(fs), -EUCLEAN);
	cr_assert(strstr(fs->errmsg, "key type"), "%s", fs->errmsg);
	fs_close(fs);
}
