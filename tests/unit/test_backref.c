// SPDX-License-Identifier: GPL-2.0-only
/* libfs/backref.c: references added to and dropped from existing extent
 * items, inside a transaction on a real image. Inline references must stay
 * in the order the kernel's tree checker demands (type ascending, then the
 * root/parent or data-ref hash descending), a repeated data reference
 * counts up, an item that would grow past a sixteenth of a leaf spills into
 * keyed reference items, and dropping everything that was added gives back
 * the item byte for byte with no keyed item left. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include <btk/csum.h>
#include "libfs/trans_internal.h"
#include <btk/tree.h>
#include "tests/unit/fixtures.h"

struct loaded {
	uint8_t buf[4096];
	uint32_t size;
	struct btrfs_key key;
};

/* The first data extent item of the image (a 20 KiB file's extent). */
static int first_data_extent(struct fs_info *fs, struct extent_target *x)
{
	struct btrfs_key min = { 0, 0, 0 }, max = { (uint64_t)-1, 255, (uint64_t)-1 }, key;
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size;
	int ret;

	tree_iter_init(&it, fs, &fs->extent_root, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &data, &size)) == 1) {
		if (key.type == BTRFS_EXTENT_ITEM_KEY && (extent_flags(data) & BTRFS_EXTENT_FLAG_DATA)) {
			*x = (struct extent_target){ .bytenr = key.objectid, .num_bytes = key.offset };
			break;
		}
	}
	tree_iter_release(&it);
	return ret == 1 ? 0 : -1;
}

static void load(struct trans *t, const struct extent_target *x, struct loaded *l)
{
	struct tree_root_ptr root;

	cr_assert_eq(trans_get_root(t, BTRFS_EXTENT_TREE_OBJECTID, &root), 0);
	l->key = (struct btrfs_key){ x->bytenr, BTRFS_EXTENT_ITEM_KEY, x->num_bytes };
	l->size = sizeof(l->buf);
	cr_assert_eq(tree_lookup(t->fs, &root, &l->key, l->buf, &l->size), 0);
}

static uint64_t seq_of(const uint8_t *p)
{
	if (inline_ref_type(p) != BTRFS_EXTENT_DATA_REF_KEY)
		return inline_ref_offset(p);
	return btrfs_extent_data_ref_hash(data_ref_root(p + 1), data_ref_objectid(p + 1), data_ref_offset(p + 1));
}

/* The tree checker's order, and refs = the sum of the inline counts;
 * returns that sum. */
static uint64_t check_inline_order(const struct loaded *l)
{
	uint32_t off = sizeof(struct btrfs_extent_item);
	uint8_t last_type = 0;
	uint64_t last_seq = (uint64_t)-1, sum = 0;

	while (off < l->size) {
		const uint8_t *p = l->buf + off;
		uint8_t type = inline_ref_type(p);
		uint64_t seq = seq_of(p);
		cr_assert_geq(type, last_type, "inline refs out of type order at %u", off);
		if (type > last_type)
			last_seq = (uint64_t)-1;
		cr_assert_leq(seq, last_seq, "inline refs of type %u out of order at %u", type, off);
		last_type = type;
		last_seq = seq;
		if (type == BTRFS_EXTENT_DATA_REF_KEY) {
			sum += data_ref_count(p + 1);
			off += 1 + sizeof(struct btrfs_extent_data_ref);
		} else if (type == BTRFS_SHARED_DATA_REF_KEY) {
			sum += shared_data_ref_count(p + 9);
			off += 13;
		} else {
			sum++;
			off += 9;
		}
	}
	cr_assert_eq(off, l->size);
	return sum;
}

static unsigned keyed_refs(struct trans *t, uint64_t bytenr)
{
	struct btrfs_key min = { bytenr, BTRFS_TREE_BLOCK_REF_KEY, 0 }, max = { bytenr, BTRFS_SHARED_DATA_REF_KEY, (uint64_t)-1 };
	struct btrfs_key key;
	struct tree_root_ptr root;
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size;
	unsigned n = 0;

	cr_assert_eq(trans_get_root(t, BTRFS_EXTENT_TREE_OBJECTID, &root), 0);
	tree_iter_init(&it, t->fs, &root, &min, &max);
	while (tree_iter_next(&it, &key, &data, &size) == 1)
		n++;
	tree_iter_release(&it);
	return n;
}

Test(backref, add_drop_order_count_and_spill)
{
	struct fs_open_options opts;
	struct fs_info *fs;
	struct trans *t;
	struct extent_target x;
	struct loaded orig, now;
	enum { N = 60 };
	struct backref refs[N];
	uint64_t left;

	fs_open_options_init(&opts);
	opts.writable = true;
	fs = fixture_open("small", &opts);
	cr_assert_eq(first_data_extent(fs, &x), 0, "no data extent in the fixture");
	cr_assert_eq(trans_start(fs, &t), 0);
	load(t, &x, &orig);

	/* data refs of many roots, shared refs of many parents, interleaved */
	for (unsigned i = 0; i < N; i++) {
		refs[i] = i % 3 ? (struct backref){ BTRFS_EXTENT_DATA_REF_KEY, 300 + i * 7919ULL % 1000, 257 + i, 4096ULL * i }
				: (struct backref){ BTRFS_SHARED_DATA_REF_KEY, (1ULL << 30) + 16384ULL * (i * 37 % 61), 0, 0 };
		cr_assert_eq(backref_add(t, &x, &refs[i]), 0, "add %u: %s", i, btk_error_msg());
		load(t, &x, &now);
		cr_assert_eq(extent_refs(now.buf), extent_refs(orig.buf) + i + 1);
		cr_assert_leq(now.size, (fs->nodesize - 101) / 16 - 25, "the item grew past the inline limit");
		cr_assert_eq(check_inline_order(&now) + keyed_refs(t, x.bytenr), extent_refs(now.buf),
			     "refs != inline counts + keyed items after add %u", i);
	}
	cr_assert_gt(keyed_refs(t, x.bytenr), 0, "nothing spilled into keyed references");

	/* the same data reference again counts up instead of adding one */
	cr_assert_eq(backref_add(t, &x, &refs[1]), 0);
	load(t, &x, &now);
	cr_assert_eq(extent_refs(now.buf), extent_refs(orig.buf) + N + 1);
	cr_assert_eq(backref_drop(t, &x, &refs[1], &left), 0);
	cr_assert_eq(left, extent_refs(orig.buf) + N);

	/* dropping everything, in another order, restores the item exactly */
	for (unsigned i = 0; i < N; i++) {
		unsigned k = (i * 17) % N;
		cr_assert_eq(backref_drop(t, &x, &refs[k], &left), 0, "drop %u: %s", k, btk_error_msg());
	}
	cr_assert_eq(left, extent_refs(orig.buf));
	load(t, &x, &now);
	cr_assert_eq(now.size, orig.size);
	cr_assert(memcmp(now.buf, orig.buf, orig.size) == 0, "the extent item differs after add + drop");
	cr_assert_eq(keyed_refs(t, x.bytenr), 0);

	/* a reference that is not there cannot be dropped */
	cr_assert_lt(backref_drop(t, &x, &refs[0], &left), 0);
	trans_abort(t);
	fs_close(fs);
}

/* The one encoder (backref.h) that the write path and the repairs share:
 * inline bytes as the kernel lays them out, the kernel's inline order, keyed
 * items with a data ref's hash as key offset. */
Test(backref, encoder_layout_and_order)
{
	struct backref data = { BTRFS_EXTENT_DATA_REF_KEY, 5, 257, 4096 };
	struct backref shared = { BTRFS_SHARED_DATA_REF_KEY, 30408704, 0, 0 };
	struct backref tree[2] = { { BTRFS_TREE_BLOCK_REF_KEY, 5, 0, 0 }, { BTRFS_TREE_BLOCK_REF_KEY, 256, 0, 0 } };
	struct backref v[4] = { shared, tree[0], data, tree[1] };
	uint8_t p[64], item[32];
	struct btrfs_key key;
	uint32_t size;

	cr_assert_eq(backref_put_inline(p, &data, 3), extent_inline_ref_size(BTRFS_EXTENT_DATA_REF_KEY));
	cr_assert_eq(inline_ref_type(p), BTRFS_EXTENT_DATA_REF_KEY);
	cr_assert_eq(data_ref_root(p + 1), 5);
	cr_assert_eq(data_ref_objectid(p + 1), 257);
	cr_assert_eq(data_ref_offset(p + 1), 4096);
	cr_assert_eq(data_ref_count(p + 1), 3);
	cr_assert_eq(backref_put_inline(p, &shared, 2), 1 + 8 + 4);
	cr_assert_eq(inline_ref_offset(p), 30408704);
	cr_assert_eq(shared_data_ref_count(p + sizeof(struct btrfs_extent_inline_ref)), 2);
	cr_assert_eq(backref_put_inline(p, &tree[0], 1), 1 + 8);
	cr_assert_eq(inline_ref_offset(p), 5);

	qsort(v, 4, sizeof(v[0]), backref_inline_cmp);
	cr_assert(v[0].type == BTRFS_TREE_BLOCK_REF_KEY && v[0].id == 256, "larger root first");
	cr_assert(v[1].type == BTRFS_TREE_BLOCK_REF_KEY && v[1].id == 5);
	cr_assert_eq(v[2].type, BTRFS_EXTENT_DATA_REF_KEY);
	cr_assert_eq(v[3].type, BTRFS_SHARED_DATA_REF_KEY);

	backref_put_keyed(13631488, &data, 7, backref_seq(&data), &key, item, &size);
	cr_assert(key.objectid == 13631488 && key.type == BTRFS_EXTENT_DATA_REF_KEY &&
		  key.offset == btrfs_extent_data_ref_hash(5, 257, 4096));
	cr_assert_eq(size, sizeof(struct btrfs_extent_data_ref));
	cr_assert_eq(data_ref_count(item), 7);
	backref_put_keyed(13631488, &tree[1], 1, 0, &key, item, &size);
	cr_assert(key.type == BTRFS_TREE_BLOCK_REF_KEY && key.offset == 256 && size == 0);
	backref_put_keyed(13631488, &shared, 4, 0, &key, item, &size);
	cr_assert(key.offset == 30408704 && size == sizeof(struct btrfs_shared_data_ref) &&
		  shared_data_ref_count(item) == 4);
}
