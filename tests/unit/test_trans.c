// SPDX-License-Identifier: GPL-2.0-only
/* Copy-on-write transactions on real images (4, 16 and 64 KiB nodes): item
 * insert, delete, resize and in-place update, a tree growing to two levels
 * of nodes and shrinking back to one leaf, a tree deleted and made anew in
 * one transaction. After every commit the image is opened afresh and the
 * tree walked (tree_walk) and iterated (tree_iter) against a model of what
 * it must hold; each block must have its extent item and the root item its
 * size. At the end the reference checker (btrfs check) must find the image
 * clean: extent tree, block group `used`, free-space tree and all.
 *
 * The tree under test is the uuid tree (its items are opaque arrays of le64
 * to the checker): keys (random, UUID_KEY_SUBVOL, random), sizes multiples
 * of 8. Its original items are part of the model, so the image ends valid. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <btk/block.h>
#include <btk/super.h>
#include <btk/trans.h>
#include <btk/tree.h>
#include <btk/volumes.h>
#include <btk/walk.h>
#include "tests/unit/fixtures.h"

#include "tests/unit/under_valgrind.h"
#include "libfs/volumes_internal.h"

#define TREE BTRFS_UUID_TREE_OBJECTID

/* ------------------------------------------------------------ the image */

/* A private copy-on-write mapping of a fixture image: every open of it sees
 * what the previous commits wrote; the file itself never changes. */
struct image {
	uint8_t *buf;
	size_t size;
};

static void image_load(const char *recipe, struct image *img)
{
	fixture_image_copy(recipe, &img->buf, &img->size);
}

static void image_release(struct image *img)
{
	munmap(img->buf, img->size);
}

/* What the next opens take (each test runs in its own process): a dirty
 * budget (0: the default) and the test knobs. */
static uint64_t test_dirty_budget;
static struct fs_test_knobs test_knobs;

static struct fs_info *image_open(struct image *img, bool writable)
{
	struct fs_open_options opts;
	struct fs_info *fs;
	struct io_dev *io;

	cr_assert_eq(io_open_mem(img->buf, img->size, false, &io), 0);
	fs_open_options_init(&opts);
	opts.writable = writable;
	opts.trans_dirty_bytes = test_dirty_budget;
	opts.knobs = test_knobs;
	cr_assert_eq(fs_open_devices(&io, 1, &opts, &fs), 0, "opening the image: %s", btk_error_msg());
	return fs;
}

/* ------------------------------------------------------------ the model */

struct mitem {
	struct btrfs_key key;
	uint32_t size;
	uint8_t *data;
};

struct model {
	struct mitem *v;
	size_t n, cap;
	uint64_t rng;
};

static uint64_t rnd(struct model *m)
{
	m->rng ^= m->rng << 13;
	m->rng ^= m->rng >> 7;
	m->rng ^= m->rng << 17;
	return m->rng;
}

/* Index of the first item >= key. */
static size_t model_find(const struct model *m, const struct btrfs_key *key)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (key_compare(&m->v[mid].key, key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void fill(struct model *m, uint8_t *data, uint32_t size)
{
	for (uint32_t i = 0; i < size; i += 8) {
		uint64_t r = rnd(m);
		memcpy(data + i, &r, size - i < 8 ? size - i : 8);
	}
}

static void model_put(struct model *m, const struct btrfs_key *key, const uint8_t *data, uint32_t size)
{
	size_t i = model_find(m, key);

	if (i < m->n && key_compare(&m->v[i].key, key) == 0) {
		free(m->v[i].data);
	} else {
		if (m->n == m->cap) {
			m->cap = m->cap ? m->cap * 2 : 256;
			m->v = realloc(m->v, m->cap * sizeof(*m->v));
			cr_assert_not_null(m->v);
		}
		memmove(&m->v[i + 1], &m->v[i], (m->n - i) * sizeof(*m->v));
		m->n++;
		m->v[i].key = *key;
	}
	m->v[i].size = size;
	m->v[i].data = malloc(size ? size : 1);
	cr_assert_not_null(m->v[i].data);
	memcpy(m->v[i].data, data, size);
}

static void model_del(struct model *m, size_t i)
{
	free(m->v[i].data);
	memmove(&m->v[i], &m->v[i + 1], (m->n - i - 1) * sizeof(*m->v));
	m->n--;
}

static void model_free(struct model *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->v[i].data);
	free(m->v);
}

/* ------------------------------------------------------------ checking */

struct walk_stats {
	struct fs_info *fs;
	uint64_t blocks, items;
	int max_level;
	unsigned bad_owner, no_extent_item;
};

static int check_block(void *arg, const struct tree_block *b)
{
	struct walk_stats *w = arg;
	struct btrfs_key skinny = { b->bytenr, BTRFS_METADATA_ITEM_KEY, block_level(b) };
	struct btrfs_key fat = { b->bytenr, BTRFS_EXTENT_ITEM_KEY, w->fs->nodesize };
	uint8_t item[64];
	uint32_t size = sizeof(item);

	w->blocks++;
	if ((int)block_level(b) > w->max_level)
		w->max_level = (int)block_level(b);
	if (block_level(b) == 0)
		w->items += block_nritems(b);
	if (block_owner(b) != TREE)
		w->bad_owner++;
	if (tree_lookup(w->fs, &w->fs->extent_root, &skinny, item, &size) != 0) {
		size = sizeof(item);
		if (tree_lookup(w->fs, &w->fs->extent_root, &fat, item, &size) != 0)
			w->no_extent_item++;
	}
	return 0;
}

/* Header generation of the root tree's root block. */
static uint64_t block_generation_of_root(struct fs_info *fs)
{
	struct tree_block *b;
	uint64_t gen;

	cr_assert_eq(block_read(fs, fs->tree_root.bytenr, &BLOCK_EXPECT_ANY, &b), 0);
	gen = block_generation(b);
	block_put(fs, b);
	return gen;
}

/* Open the image afresh and compare the tree with the model; returns the
 * root level. */
static int verify(struct image *img, const struct model *m, const char *when)
{
	struct fs_info *fs = image_open(img, false);
	struct walk_stats w = { .fs = fs };
	struct tree_walk_ops ops = { check_block, NULL, &w };
	struct btrfs_key min = { 0, 0, 0 }, max = { (uint64_t)-1, 255, (uint64_t)-1 }, key;
	struct btrfs_key rkey = { TREE, BTRFS_ROOT_ITEM_KEY, 0 };
	uint8_t root_item[sizeof(struct btrfs_root_item)];
	uint32_t rsize = sizeof(root_item);
	struct tree_root_ptr root;
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size;
	uint64_t bad = 0;
	size_t i = 0;
	int ret;

	cr_assert_eq(fs_find_root(fs, TREE, &root), 0, "%s: no tree %d: %s", when, (int)TREE, btk_error_msg());
	/* the kernel reads the root tree expecting the superblock's generation */
	cr_assert_eq(block_generation_of_root(fs), fs->generation, "%s: root tree generation", when);
	ret = tree_walk(fs, &root, &ops, &bad);
	cr_assert_eq(ret, 0, "%s: tree_walk: %s", when, btk_error_msg());
	cr_assert_eq(bad, 0, "%s: %llu unreadable blocks", when, (unsigned long long)bad);
	cr_assert_eq(w.bad_owner, 0, "%s: blocks with the wrong owner", when);
	cr_assert_eq(w.no_extent_item, 0, "%s: %u blocks without an extent item", when, w.no_extent_item);
	cr_assert_eq(w.items, m->n, "%s: %llu items in the leaves, model has %zu", when,
		     (unsigned long long)w.items, m->n);
	cr_assert_eq(w.max_level, root.level, "%s: walk saw level %d, root says %u", when, w.max_level, root.level);
	cr_assert_eq(tree_lookup(fs, &fs->tree_root, &rkey, root_item, &rsize), 0);
	cr_assert_eq(root_item_bytes_used(root_item), w.blocks * fs->nodesize,
		     "%s: root item bytes_used %llu, tree has %llu blocks", when,
		     (unsigned long long)root_item_bytes_used(root_item), (unsigned long long)w.blocks);

	tree_iter_init(&it, fs, &root, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &data, &size)) == 1) {
		cr_assert_lt(i, m->n, "%s: more items than the model", when);
		cr_assert_eq(key_compare(&key, &m->v[i].key), 0, "%s: item %zu key (%llu %u %llu), model (%llu %u %llu)",
			     when, i, (unsigned long long)key.objectid, key.type, (unsigned long long)key.offset,
			     (unsigned long long)m->v[i].key.objectid, m->v[i].key.type,
			     (unsigned long long)m->v[i].key.offset);
		cr_assert_eq(size, m->v[i].size, "%s: item %zu size %u, model %u", when, i, size, m->v[i].size);
		cr_assert(memcmp(data, m->v[i].data, size) == 0, "%s: item %zu data differs", when, i);
		i++;
	}
	tree_iter_release(&it);
	cr_assert_eq(ret, 0, "%s: tree_iter: %s", when, btk_error_msg());
	cr_assert_eq(i, m->n, "%s: %zu items iterated, model has %zu", when, i, m->n);
	fs_close(fs);
	return root.level;
}

/* The reference checker over the image, when btrfs-progs is installed. */
static void btrfs_check_clean(struct image *img)
{
	fixture_btrfs_check_clean(img->buf, img->size);
}

/* ------------------------------------------------------------ operations */

struct session {
	struct image img;
	struct fs_info *fs;
	struct trans *t;
	struct model m;
	unsigned commits;
};

static void begin(struct session *s)
{
	int ret;

	s->fs = image_open(&s->img, true);
	ret = trans_start(s->fs, &s->t);
	cr_assert_eq(ret, 0, "trans_start: %s", btk_error_msg());
}

/* Commit, close, check the image against the model; returns the root level. */
static int commit_and_verify(struct session *s, const char *phase)
{
	char when[128];
	int ret = trans_commit(s->t);

	cr_assert_eq(ret, 0, "%s: commit %u failed: %d %s", phase, s->commits, ret, btk_error_msg());
	s->t = NULL;
	fs_close(s->fs);
	s->fs = NULL;
	snprintf(when, sizeof(when), "%s, after commit %u", phase, ++s->commits);
	return verify(&s->img, &s->m, when);
}

/* Mostly a tenth to a quarter of a leaf; one item in 16 larger than half a
 * leaf, up to the largest that fits (a split must then make a leaf of its own). */
static uint32_t item_size_for(struct session *s)
{
	uint32_t ns = s->fs->nodesize;
	uint32_t lo = ns / 10, hi = ns / 4;

	if (rnd(&s->m) % 16 == 0) {
		lo = ns / 2 + 8;
		hi = ns - (uint32_t)sizeof(struct btrfs_header) - (uint32_t)sizeof(struct btrfs_item) + 1;
	}
	return (uint32_t)((lo + rnd(&s->m) % (hi - lo)) & ~7u);
}

static void op_insert(struct session *s)
{
	struct btrfs_key key = { rnd(&s->m), BTRFS_UUID_KEY_SUBVOL, rnd(&s->m) };
	uint32_t size = item_size_for(s);
	uint8_t *data = malloc(size);
	int ret;

	fill(&s->m, data, size);
	ret = trans_insert_item(s->t, TREE, &key, data, size);
	cr_assert_eq(ret, 0, "insert of %u bytes: %d %s", size, ret, btk_error_msg());
	model_put(&s->m, &key, data, size);
	/* a second insert of the same key is refused */
	cr_assert_eq(trans_insert_item(s->t, TREE, &key, data, size), -EEXIST);
	free(data);
}

static void op_delete(struct session *s, size_t i)
{
	struct btrfs_key key = s->m.v[i].key;
	int ret = trans_delete_item(s->t, TREE, &key);

	cr_assert_eq(ret, 0, "delete: %d %s", ret, btk_error_msg());
	model_del(&s->m, i);
	cr_assert_eq(trans_delete_item(s->t, TREE, &key), -ENOENT);
}

/* Replace the data with a new size (grow or shrink, crossing leaves). */
static void op_resize(struct session *s, size_t i)
{
	uint32_t size = item_size_for(s);
	uint8_t *data;
	int ret;

	if (rnd(&s->m) % 3 == 0)
		size = (s->m.v[i].size / 2) & ~7u; /* shrink, down to empty */
	data = malloc(size ? size : 1);
	fill(&s->m, data, size);
	ret = trans_update_item(s->t, TREE, &s->m.v[i].key, data, size);
	cr_assert_eq(ret, 0, "resize %u -> %u: %d %s", s->m.v[i].size, size, ret, btk_error_msg());
	model_put(&s->m, &s->m.v[i].key, data, size);
	free(data);
}

/* Change bytes in place through trans_item_for_update. */
static void op_poke(struct session *s, size_t i)
{
	struct tree_path path;
	uint8_t *data;
	uint32_t size;
	int ret;

	tree_path_init(&path);
	ret = trans_item_for_update(s->t, TREE, &s->m.v[i].key, &data, &size, &path);
	cr_assert_eq(ret, 0, "item_for_update: %d %s", ret, btk_error_msg());
	cr_assert_eq(size, s->m.v[i].size);
	for (uint32_t k = 0; k < size; k += 13) {
		data[k] ^= 0xa5;
		s->m.v[i].data[k] ^= 0xa5;
	}
	tree_path_release(s->fs, &path);
}

/* The tree's current items go into the model. */
static void load_model(struct session *s)
{
	struct btrfs_key min = { 0, 0, 0 }, max = { (uint64_t)-1, 255, (uint64_t)-1 }, key;
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size;
	int ret;

	tree_iter_init(&it, s->fs, &s->fs->uuid_root, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &data, &size)) == 1)
		model_put(&s->m, &key, data, size);
	tree_iter_release(&it);
	cr_assert_eq(ret, 0);
}

/* Metadata chunks of an image (committed state). */
static size_t metadata_chunks(struct image *img)
{
	struct fs_info *fs = image_open(img, false);
	size_t n = 0;

	for (size_t i = 0; i < fs->chunks->count; i++)
		n += !!(fs->chunks->chunks[i]->type & BTRFS_BLOCK_GROUP_METADATA);
	fs_close(fs);
	return n;
}

/* Grow to `target` levels of nodes, churn, shrink to one leaf, then delete
 * and make the tree anew in one transaction; the original items remain.
 * Growing and shrinking commit every `every` operations. Returns how many
 * metadata chunks the image has at the end. */
static size_t grow_churn_shrink(const char *recipe, int target, unsigned churn_ops, unsigned every, uint64_t seed)
{
	struct session s = { .m = { .rng = seed } };
	struct model original = { 0 };
	int level = 0, max_level = 0, prev;
	size_t chunks;
	unsigned n;

	image_load(recipe, &s.img);
	begin(&s);
	load_model(&s);
	for (size_t i = 0; i < s.m.n; i++)
		model_put(&original, &s.m.v[i].key, s.m.v[i].data, s.m.v[i].size);

	/* grow */
	for (n = 1; level < target; n++) {
		op_insert(&s);
		if (n % every == 0) {
			level = commit_and_verify(&s, "grow");
			max_level = level > max_level ? level : max_level;
			begin(&s);
		}
		cr_assert_lt(n, 200000, "the tree did not reach level %d", target);
	}
	cr_assert_geq(max_level, target);

	/* churn: resize, poke, delete, insert */
	for (n = 1; n <= churn_ops; n++) {
		uint64_t r = rnd(&s.m) % 100;
		size_t i = s.m.n ? (size_t)(rnd(&s.m) % s.m.n) : 0;
		if (!s.m.n || r < 25)
			op_insert(&s);
		else if (r < 60)
			op_resize(&s, i);
		else if (r < 70)
			op_poke(&s, i);
		else
			op_delete(&s, i);
		if (n % 100 == 0) {
			commit_and_verify(&s, "churn");
			begin(&s);
		}
	}

	/* shrink: delete everything in random order; levels only go down */
	prev = commit_and_verify(&s, "churn");
	begin(&s);
	for (n = 1; s.m.n; n++) {
		op_delete(&s, (size_t)(rnd(&s.m) % s.m.n));
		if (n % every == 0 || !s.m.n) {
			level = commit_and_verify(&s, "shrink");
			cr_assert_leq(level, prev, "the tree grew while shrinking");
			prev = level;
			begin(&s);
		}
	}
	cr_assert_eq(prev, 0, "an empty tree must be a single leaf");

	/* delete the tree and make it again in the same transaction */
	cr_assert_eq(trans_delete_tree(s.t, TREE), 0, "delete tree: %s", btk_error_msg());
	cr_assert_eq(trans_create_tree(s.t, TREE), 0, "create tree: %s", btk_error_msg());
	cr_assert_eq(trans_create_tree(s.t, TREE), -EEXIST);
	for (size_t i = 0; i < original.n; i++) {
		cr_assert_eq(trans_insert_item(s.t, TREE, &original.v[i].key, original.v[i].data, original.v[i].size), 0);
		model_put(&s.m, &original.v[i].key, original.v[i].data, original.v[i].size);
	}
	commit_and_verify(&s, "recreate");

	cr_log_info("%s: grew to level %d, %u commits", recipe, max_level, s.commits);
	btrfs_check_clean(&s.img);
	chunks = metadata_chunks(&s.img);
	model_free(&s.m);
	model_free(&original);
	image_release(&s.img);
	return chunks;
}

/* ------------------------------------------------------------ tests */

Test(trans, grow_churn_shrink_4k)
{
	grow_churn_shrink("deep", 2, 600, 150, 0x4b1d);
}

Test(trans, grow_churn_shrink_16k)
{
	grow_churn_shrink("small", 2, 600, 150, 0x16c0de);
}

Test(trans, grow_churn_shrink_64k)
{
	/* level 2 would take ~2000 leaves of 64 KiB: more than the image holds */
	grow_churn_shrink("n64k", 1, 400, 150, 0x64);
}

Test(trans, grow_churn_shrink_64k_two_levels)
{
	/* ~2000 leaves of 64 KiB: far more than mkfs's metadata chunk, so the
	 * transactions allocate new chunks (libfs/chunk_alloc.c) on the way */
	struct image img;
	size_t before, after;

	/* 130 MiB of tree blocks: too slow under valgrind (the 4/16 KiB runs cover
	 * the code); returning, not cr_skip_test(), which leaves criterion's own
	 * allocations behind for memcheck to report */
	if (RUNNING_ON_VALGRIND) {
		cr_log_info("skipped under valgrind: 130 MiB of tree blocks");
		return;
	}
	image_load("n64k-roomy", &img);
	before = metadata_chunks(&img);
	image_release(&img);
	after = grow_churn_shrink("n64k-roomy", 2, 200, 1000, 0x64642);
	cr_assert_gt(after, before, "no new metadata chunk: %zu before, %zu after", before, after);
}

/* An aborted transaction leaves every byte of the devices as it was. */
Test(trans, abort_writes_nothing)
{
	struct session s = { .m = { .rng = 7 } };
	uint8_t *before;

	/* under the dirty budget nothing is written before the commit (past it,
	 * only space the old filesystem leaves free: small_dirty_budget_abort) */
	test_dirty_budget = 0;
	image_load("small", &s.img);
	before = malloc(s.img.size);
	cr_assert_not_null(before);
	memcpy(before, s.img.buf, s.img.size);
	begin(&s);
	for (int i = 0; i < 300; i++)
		op_insert(&s);
	memcpy(super_label_ptr(trans_super(s.t)), "aborted", 7);
	trans_abort(s.t);
	fs_close(s.fs);
	cr_assert(memcmp(before, s.img.buf, s.img.size) == 0, "an aborted transaction wrote to the device");
	free(before);
	model_free(&s.m);
	image_release(&s.img);
}

/* A dirty budget of 4 blocks (fs_open_options.trans_dirty_bytes): one transaction of
 * 1500 inserts, resizes and pokes writes blocks before its commit and reads
 * them back to change them again, yet holds no more dirty blocks than the
 * budget and what one operation copies; the result is what the model says,
 * and the reference checker finds it clean. */
Test(trans, small_dirty_budget)
{
	struct session s = { .m = { .rng = 0xb0d9e7 } };
	struct trans_mem_stats st;

	test_dirty_budget = 64 << 10;
	image_load("small", &s.img);
	begin(&s);
	load_model(&s);
	for (unsigned n = 0; n < (RUNNING_ON_VALGRIND ? 400u : 1500u); n++) {
		uint64_t r = rnd(&s.m) % 100;
		size_t i = s.m.n ? (size_t)(rnd(&s.m) % s.m.n) : 0;
		if (!s.m.n || r < 70)
			op_insert(&s);
		else if (r < 85)
			op_resize(&s, i);
		else
			op_poke(&s, i);
	}
	cr_assert_eq(trans_commit(s.t), 0, "commit: %s", btk_error_msg());
	s.t = NULL;
	st = s.fs->trans_stats;
	cr_log_info("peak %llu dirty blocks, %llu written early, %llu changed again",
		    (unsigned long long)st.peak_dirty_blocks, (unsigned long long)st.written_early,
		    (unsigned long long)st.adopted_again);
	cr_assert_eq(st.dirty_budget, 64 << 10);
	cr_assert_gt(st.written_early, 100, "only %llu blocks written early", (unsigned long long)st.written_early);
	cr_assert_gt(st.adopted_again, 0, "no block written early was changed again");
	/* 4 blocks of budget + one operation's copies and splits on two trees */
	cr_assert_leq(st.peak_dirty_blocks, 4 + 16, "%llu dirty blocks at once", (unsigned long long)st.peak_dirty_blocks);
	fs_close(s.fs);
	verify(&s.img, &s.m, "small budget");
	btrfs_check_clean(&s.img);
	model_free(&s.m);
	image_release(&s.img);
}

/* The same budget, aborted: blocks were written, but only where the old
 * filesystem has free space; with a limit of 16 queued references, they were
 * applied to the extent tree before the abort too. It reads as before and
 * checks clean. */
Test(trans, small_dirty_budget_abort)
{
	struct session s = { .m = { .rng = 0xab0e7 } };

	test_dirty_budget = 32 << 10;
	test_knobs.trans_refs_max = 16;
	image_load("small", &s.img);
	begin(&s);
	load_model(&s);
	for (unsigned n = 0; n < 600; n++) {
		struct btrfs_key key = { rnd(&s.m), BTRFS_UUID_KEY_SUBVOL, rnd(&s.m) };
		uint8_t data[800];
		fill(&s.m, data, sizeof(data));
		cr_assert_eq(trans_insert_item(s.t, TREE, &key, data, sizeof(data)), 0, "%s", btk_error_msg());
	}
	trans_abort(s.t);
	cr_assert_gt(s.fs->trans_stats.written_early, 10);
	cr_assert_gt(s.fs->trans_stats.refs_early_runs, 0);
	fs_close(s.fs);
	verify(&s.img, &s.m, "aborted with blocks written early");
	btrfs_check_clean(&s.img);
	model_free(&s.m);
	image_release(&s.img);
}

/* ------------------------------------------------ queued extent references */

#define REFS_LIMIT 16
/* what one tree operation may queue above the limit before the next one applies it */
#define REFS_SLACK 48

/* One transaction of inserts, resizes, pokes and deletes (deletes free blocks
 * the transaction made, whose references may be queued or applied already). */
static void churn_one_transaction(struct session *s, unsigned ops)
{
	for (unsigned n = 0; n < ops; n++) {
		uint64_t r = rnd(&s->m) % 100;
		size_t i = s->m.n ? (size_t)(rnd(&s->m) % s->m.n) : 0;
		if (!s->m.n || r < 55)
			op_insert(s);
		else if (r < 70)
			op_resize(s, i);
		else if (r < 80)
			op_poke(s, i);
		else
			op_delete(s, i);
	}
}

/* A no-op edit of the extent item of the uuid tree's root block through the
 * transaction, as a repair makes: the queue must then wait for the commit. */
static void edit_extent_item(struct session *s)
{
	struct btrfs_key key = { s->fs->uuid_root.bytenr, BTRFS_METADATA_ITEM_KEY, s->fs->uuid_root.level };
	struct tree_path path;
	uint8_t *data;
	uint32_t size;

	tree_path_init(&path);
	if (trans_item_for_update(s->t, BTRFS_EXTENT_TREE_OBJECTID, &key, &data, &size, &path) == -ENOENT) {
		key = (struct btrfs_key){ s->fs->uuid_root.bytenr, BTRFS_EXTENT_ITEM_KEY, s->fs->nodesize };
		cr_assert_eq(trans_item_for_update(s->t, BTRFS_EXTENT_TREE_OBJECTID, &key, &data, &size, &path), 0,
			     "%s", btk_error_msg());
	}
	tree_path_release(s->fs, &path);
}

/* A limit of 16 queued references (fs_test_knobs.trans_refs_max) and a small dirty
 * budget, one transaction of 1200 operations on a committed tree of a few
 * hundred items: the result is what the model says (every block with its
 * extent item, root item sizes) and what the reference checker finds clean.
 * Returns the transactions' statistics. With `keep`, the caller edits an
 * extent item first, so the queue must wait for the commit. */
static struct trans_mem_stats small_refs_limit(bool keep, uint64_t seed)
{
	struct session s = { .m = { .rng = seed } };
	struct trans_mem_stats st;
	test_knobs.trans_refs_max = REFS_LIMIT;
	test_dirty_budget = 128 << 10;
	image_load("small", &s.img);
	begin(&s);
	load_model(&s);
	churn_one_transaction(&s, 300);
	commit_and_verify(&s, "before");
	begin(&s);
	if (keep)
		edit_extent_item(&s);
	churn_one_transaction(&s, RUNNING_ON_VALGRIND ? 300u : 1200u);
	cr_assert_eq(trans_commit(s.t), 0, "%s", btk_error_msg());
	st = s.fs->trans_stats;
	fs_close(s.fs);
	verify(&s.img, &s.m, keep ? "limit, queue kept" : "limit");
	btrfs_check_clean(&s.img);
	model_free(&s.m);
	image_release(&s.img);
	cr_log_info("refs: limit %llu, peak %llu, %llu applied early in %llu runs, %llu spilled",
		    (unsigned long long)st.refs_limit, (unsigned long long)st.peak_queued_refs,
		    (unsigned long long)st.refs_applied_early, (unsigned long long)st.refs_early_runs,
		    (unsigned long long)st.refs_spilled);
	cr_assert_eq(st.refs_limit, REFS_LIMIT);
	cr_assert_leq(st.peak_queued_refs, REFS_LIMIT + REFS_SLACK, "%llu references queued at once",
		      (unsigned long long)st.peak_queued_refs);
	return st;
}

/* Past the limit the queue is applied at the next tree operation, many times. */
Test(trans, small_refs_limit_applied_early)
{
	struct trans_mem_stats st = small_refs_limit(false, 0x5eed1);

	/* 300 operations under valgrind, 1200 otherwise */
	cr_assert_gt(st.refs_early_runs, RUNNING_ON_VALGRIND ? 3u : 10u, "the queue was applied early %llu times",
		     (unsigned long long)st.refs_early_runs);
}

/* A transaction that edits extent items itself never applies its queue
 * early: past the limit it spills to disk and comes back at the commit. */
Test(trans, small_refs_limit_kept_for_commit)
{
	struct trans_mem_stats st;

	test_knobs.recsort.run_records = 64; /* runs of 64 entries go to disk */
	st = small_refs_limit(true, 0x5eed3);

	cr_assert_eq(st.refs_early_runs, 0, "a transaction that edits extent items applied its queue early");
	cr_assert_gt(st.refs_spilled, 100, "only %llu references spilled", (unsigned long long)st.refs_spilled);
}

/* A commit that changes only the superblock still writes a new root of the
 * root tree with the new generation (the kernel refuses the filesystem
 * otherwise: "parent transid verify failed"), and the label arrives. */
Test(trans, superblock_only_commit)
{
	struct session s = { .m = { .rng = 9 } };
	struct fs_info *fs;
	uint64_t gen;

	image_load("small", &s.img);
	begin(&s);
	gen = s.fs->generation;
	load_model(&s);
	memset(super_label_ptr(trans_super(s.t)), 0, BTRFS_LABEL_SIZE);
	memcpy(super_label_ptr(trans_super(s.t)), "relabelled", 10);
	commit_and_verify(&s, "label");
	fs = image_open(&s.img, false);
	cr_assert_eq(fs->generation, gen + 1);
	cr_assert_eq(block_generation_of_root(fs), gen + 1);
	cr_assert_str_eq((const char *)super_label_ptr(fs->super), "relabelled");
	fs_close(fs);
	btrfs_check_clean(&s.img);
	model_free(&s.m);
	image_release(&s.img);
}

/* A superblock flagged with an interrupted fsid change is written only by
 * opens that say they handle it (fs_open_options.fsid_change). */
Test(trans, refuses_interrupted_fsid_change)
{
	struct image img;
	struct fs_info *fs;
	struct trans *t;
	struct io_dev *io;
	struct fs_open_options opts;

	image_load("small", &img);
	fs = image_open(&img, true);
	cr_assert_eq(trans_start(fs, &t), 0);
	super_set_flags(trans_super(t), super_flags(trans_super(t)) | BTRFS_SUPER_FLAG_CHANGING_FSID_V2);
	cr_assert_eq(trans_commit(t), 0, "%s", btk_error_msg());
	fs_close(fs);

	fs = image_open(&img, true);
	cr_assert_eq(trans_start(fs, &t), -EBUSY);
	fs_close(fs);

	cr_assert_eq(io_open_mem(img.buf, img.size, false, &io), 0);
	fs_open_options_init(&opts);
	opts.writable = true;
	opts.fsid_change = true;
	cr_assert_eq(fs_open_devices(&io, 1, &opts, &fs), 0, "%s", btk_error_msg());
	cr_assert_eq(trans_start(fs, &t), 0, "%s", btk_error_msg());
	trans_abort(t);
	fs_close(fs);
	image_release(&img);
}

/* A log tree refuses trans_start; trans_start_with(drop_log_tree) lets it
 * through, keeps the log in the in-memory superblock until the commit (an
 * abort leaves it there), and commits superblocks without it. */
Test(trans, drop_log_tree_option)
{
	const struct trans_options drop = { .drop_log_tree = true };
	struct image img;
	struct fs_info *fs;
	struct trans *t;
	uint64_t log;

	image_load("small", &img);
	fs = image_open(&img, true);
	log = fs->tree_root.bytenr;   /* any tree block: nothing reads the log here */
	cr_assert_eq(trans_start(fs, &t), 0);
	super_set_log_root(trans_super(t), log);
	cr_assert_eq(trans_commit(t), 0, "%s", btk_error_msg());
	fs_close(fs);

	fs = image_open(&img, true);
	cr_assert_eq(super_log_root(fs->super), log);
	cr_assert_eq(trans_start(fs, &t), -EBUSY);
	cr_assert_null(t);
	cr_assert_eq(trans_start_with(fs, &drop, &t), 0, "%s", btk_error_msg());
	cr_assert_eq(super_log_root(trans_super(t)), 0);
	trans_abort(t);
	cr_assert_eq(super_log_root(fs->super), log, "an aborted drop must leave the log in place");
	cr_assert_eq(trans_start_with(fs, &drop, &t), 0, "%s", btk_error_msg());
	cr_assert_eq(trans_space_keep_until_commit(t, log, fs->nodesize), 0, "%s", btk_error_msg());
	cr_assert_eq(trans_commit(t), 0, "%s", btk_error_msg());
	cr_assert_eq(super_log_root(fs->super), 0);
	fs_close(fs);

	fs = image_open(&img, true);
	cr_assert_eq(super_log_root(fs->super), 0);
	cr_assert_eq(trans_start(fs, &t), 0, "%s", btk_error_msg());
	trans_abort(t);
	fs_close(fs);
	btrfs_check_clean(&img);
	image_release(&img);
}

/* A tree that does not exist is -ENOENT (not -ENOMEM) to trans_get_root. */
Test(trans, missing_tree_is_enoent)
{
	struct image img;
	struct fs_info *fs;
	struct trans *t;
	struct tree_root_ptr r;

	image_load("small", &img);
	fs = image_open(&img, true);
	cr_assert_eq(trans_start(fs, &t), 0);
	cr_assert_eq(trans_get_root(t, BTRFS_RAID_STRIPE_TREE_OBJECTID, &r), -ENOENT);
	cr_assert_eq(trans_delete_item(t, BTRFS_RAID_STRIPE_TREE_OBJECTID, &(struct btrfs_key){ 1, 1, 1 }), -ENOENT);
	trans_abort(t);
	fs_close(fs);
	image_release(&img);
}

/* fs_super_stripe_ranges: every superblock copy that lies in a chunk's
 * stripe is covered by one of the chunk's ranges, and every range holds one. */
Test(trans, super_stripe_ranges)
{
	struct image img;
	struct fs_info *fs;
	unsigned found = 0;

	image_load("small", &img);
	fs = image_open(&img, false);
	for (size_t i = 0; i < fs->chunks->count; i++) {
		const struct chunk *c = fs->chunks->chunks[i];
		uint64_t starts[48], lens[48];
		int n = fs_super_stripe_ranges(fs, c->logical, starts, lens, 48);

		cr_assert_geq(n, 0);
		for (int k = 0; k < n; k++) {
			struct phys_copy copies[MAX_COPIES];
			uint64_t contig;
			int nc = volumes_map(fs, starts[k], lens[k], copies, &contig);
			bool holds = false;

			cr_assert_gt(nc, 0);
			cr_assert(starts[k] >= c->logical && starts[k] + lens[k] <= c->logical + c->length);
			for (int m = 0; m < nc; m++)
				for (int s = 0; s < BTRFS_SUPER_MIRROR_MAX; s++)
					holds |= btrfs_super_offset(s) >= copies[m].physical &&
						 btrfs_super_offset(s) < copies[m].physical + lens[k];
			cr_assert(holds, "range %llu+%llu of chunk %llu holds no superblock copy",
				  (unsigned long long)starts[k], (unsigned long long)lens[k],
				  (unsigned long long)c->logical);
			found++;
		}
		for (unsigned s = 0; s < c->num_stripes; s++)
			for (int m = 0; m < BTRFS_SUPER_MIRROR_MAX; m++) {
				uint64_t sb = btrfs_super_offset(m);
				bool covered = false;
				if (sb < c->stripes[s].physical || sb >= c->stripes[s].physical + c->length)
					continue;
				for (int k = 0; k < n; k++)
					covered |= sb >= c->stripes[s].physical + (starts[k] - c->logical) &&
						   sb < c->stripes[s].physical + (starts[k] - c->logical) + lens[k];
				cr_assert(covered, "superblock copy %d in chunk %llu is not excluded", m,
					  (unsigned long long)c->logical);
			}
	}
	/* the copy at 64 MiB lies in one of the image's chunks */
	cr_assert_gt(found, 0);
	cr_assert_eq(fs_super_stripe_ranges(fs, 12345, (uint64_t[1]){ 0 }, (uint64_t[1]){ 0 }, 1), -ENOENT);
	fs_close(fs);
	image_release(&img);
}
