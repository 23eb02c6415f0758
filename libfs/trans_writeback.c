// SPDX-License-Identifier: LGPL-2.1-or-later
/* Early writeback: a transaction keeps at most a budget of dirty tree blocks
 * in memory. Past it, the dirty blocks no path holds are checksummed and
 * written to their places at once. Each is a block this transaction
 * allocated, at an address the committed superblock does not reach, so a
 * crash before the commit still finds the old filesystem whole. They leave
 * the dirty list (and, under the cache's budget, memory); when the
 * transaction changes one again it is read back and changed in place (it is
 * already a copy: no second one) and written again. The commit keeps its
 * order: every block, flush, superblocks, flush. Writes go through the
 * devices' io stack, so the undo file and the write log see them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <btk/csum.h>
#include <btk/ebitmap.h>
#include "libfs/trans_internal.h"
#include <btk/volumes.h>

#define TRANS_DIRTY_BUDGET_DEFAULT (256ULL << 20)

/* The dirty blocks of a transaction and those written before its commit. */
struct trans_writeback {
	struct tree_block **dirty;  /* blocks to write; the transaction holds a reference */
	size_t ndirty, dirty_cap;
	/* Past dirty_budget bytes, dirty blocks no path holds are written to
	 * their places before the commit and leave the dirty list; `written`
	 * holds them until the transaction changes one again
	 * (trans_adopt_block) or frees it. */
	uint64_t dirty_budget;
	struct ebitmap *written;
	uint64_t written_epoch;     /* fs->chunk_map_epoch when the first was written */
	size_t peak_dirty;
	uint64_t written_early, adopted_again;
};

uint64_t trans_dirty_budget(const struct fs_info *fs)
{
	return fs->trans_dirty_bytes ? fs->trans_dirty_bytes : TRANS_DIRTY_BUDGET_DEFAULT;
}

int trans_write_block(struct trans *t, struct tree_block *b)
{
	struct phys_copy copies[MAX_COPIES];
	uint8_t csum[BTRFS_CSUM_SIZE];
	uint64_t contig;
	int n;

	header_set_flags(b->data, header_flags(b->data) | BTRFS_HEADER_FLAG_WRITTEN);
	csum_compute(t->fs->csum_type, b->data + BTRFS_CSUM_SIZE, b->len - BTRFS_CSUM_SIZE, csum);
	memcpy(header_csum_ptr(b->data), csum, BTRFS_CSUM_SIZE);
	n = volumes_map(t->fs, b->bytenr, b->len, copies, &contig);
	if (n < 0)
		return n;
	if (contig < b->len)
		return fs_error(t->fs, -EUCLEAN, "tree block %llu crosses a stripe", (unsigned long long)b->bytenr);
	for (int i = 0; i < n; i++) {
		int ret;
		if (!copies[i].dev)
			return fs_error(t->fs, -ENODEV, "device %llu is missing", (unsigned long long)copies[i].devid);
		ret = io_write(copies[i].dev->io, b->data, b->len, copies[i].physical);
		if (ret)
			return fs_error(t->fs, ret, "writing tree block %llu to device %llu: %s",
					(unsigned long long)b->bytenr, (unsigned long long)copies[i].devid,
					strerror(-ret));
	}
	return 0;
}

/* Write unheld dirty blocks (only leaves, or any level) from the oldest on
 * until at most `target` stay dirty; the others keep their order. */
static int writeback_pass(struct trans *t, bool leaves_only, size_t target)
{
	size_t out = 0, left = t->writeback->ndirty;
	int ret = 0;

	for (size_t i = 0; i < t->writeback->ndirty; i++) {
		struct tree_block *b = t->writeback->dirty[i];
		/* refs 1: only the transaction holds it, no path or iterator */
		if (ret || left <= target || b->refs != 1 || (leaves_only && block_level(b) != 0)) {
			t->writeback->dirty[out++] = b;
			continue;
		}
		ret = trans_write_block(t, b);
		if (!ret)
			ret = ebitmap_set(t->writeback->written, b->bytenr, b->len);
		if (ret) {
			t->writeback->dirty[out++] = b;
			continue;
		}
		b->dirty = false;
		block_put(t->fs, b); /* stays cached, unreferenced: the cache may evict it */
		t->writeback->written_early++;
		left--;
	}
	t->writeback->ndirty = out;
	return ret;
}

int trans_writeback_maybe(struct trans *t)
{
	uint64_t ns = t->fs->nodesize;
	size_t target;
	int ret;

	if ((uint64_t)t->writeback->ndirty * ns <= t->writeback->dirty_budget)
		return 0;
	if (!t->writeback->written) {
		t->writeback->written = ebitmap_create(ns);
		if (!t->writeback->written)
			return -ENOMEM;
		t->writeback->written_epoch = t->fs->chunk_map_epoch;
	}
	/* down to half the budget, so the next writeback is many operations away;
	 * leaves first: the nodes above them come back on every search */
	target = (size_t)(t->writeback->dirty_budget / 2 / ns);
	ret = writeback_pass(t, true, target);
	if (!ret && t->writeback->ndirty > target)
		ret = writeback_pass(t, false, target);
	return ret;
}

int trans_adopt_block(struct trans *t, struct tree_block *b)
{
	int ret;

	if (b->dirty)
		return 1;
	if (!t->writeback->written || block_generation(b) != t->transid ||
	    ebitmap_test(t->writeback->written, b->bytenr, b->len) != EBITMAP_ALL)
		return 0;
	ret = trans_mark_dirty(t, b);
	if (!ret)
		ret = ebitmap_clear(t->writeback->written, b->bytenr, b->len);
	if (ret)
		return ret;
	t->writeback->adopted_again++;
	return 1;
}

int trans_writeback_finish(struct trans *t)
{
	uint64_t from = 0, start, len;
	int ret = 0;

	if (!t->writeback->written || t->writeback->written_epoch == t->fs->chunk_map_epoch)
		return 0;
	/* the copies of some chunk changed after blocks were written early: the
	 * first copy holds them (the old stripes come first), write every copy */
	while (!ret && ebitmap_next_set(t->writeback->written, from, &start, &len) == 1) {
		for (uint64_t x = start; !ret && x < start + len; x += t->fs->nodesize) {
			struct block_expect e = { .generation = t->transid, .level = -1 };
			struct tree_block *b;
			ret = block_read(t->fs, x, &e, &b);
			if (!ret) {
				ret = trans_write_block(t, b);
				block_put(t->fs, b);
			}
		}
		from = start + len;
	}
	return ret;
}

void trans_writeback_release(struct trans *t, bool aborted)
{
	struct trans_writeback *w = t->writeback;
	uint64_t from = 0, start, len;

	if (!w)
		return;
	for (size_t i = 0; i < w->ndirty; i++)
		block_put(t->fs, w->dirty[i]);
	free(w->dirty);
	if (!w->written) {
		free(w);
		t->writeback = NULL;
		return;
	}
	/* an aborted transaction's blocks must not be found in the cache later */
	while (aborted && ebitmap_next_set(w->written, from, &start, &len) == 1) {
		for (uint64_t x = start; x < start + len; x += t->fs->nodesize) {
			struct tree_block *b;
			if (!block_is_cached(t->fs, x) || block_read(t->fs, x, &BLOCK_EXPECT_ANY, &b))
				continue;
			if (b->refs == 1)
				block_forget(t->fs, b);
			else
				block_put(t->fs, b);
		}
		from = start + len;
	}
	ebitmap_destroy(w->written);
	free(w);
	t->writeback = NULL;
}

int trans_writeback_init(struct trans *t)
{
	t->writeback = calloc(1, sizeof(*t->writeback));
	if (!t->writeback)
		return -ENOMEM;
	t->writeback->dirty_budget = trans_dirty_budget(t->fs);
	return 0;
}

int trans_mark_dirty(struct trans *t, struct tree_block *b)
{
	struct trans_writeback *w = t->writeback;

	if (b->dirty)
		return 0;
	if (w->ndirty == w->dirty_cap) {
		size_t cap = w->dirty_cap ? w->dirty_cap * 2 : 64;
		struct tree_block **v = realloc(w->dirty, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		w->dirty = v;
		w->dirty_cap = cap;
	}
	b->dirty = true;
	block_hold(t->fs, b);
	w->dirty[w->ndirty++] = b;
	if (w->ndirty > w->peak_dirty)
		w->peak_dirty = w->ndirty;
	return 0;
}

/* A block this transaction created is gone again: never write it. */
void trans_forget_dirty(struct trans *t, struct tree_block *b)
{
	struct trans_writeback *w = t->writeback;

	for (size_t i = 0; i < w->ndirty; i++) {
		if (w->dirty[i] != b)
			continue;
		w->dirty[i] = w->dirty[--w->ndirty];
		b->dirty = false;
		block_forget(t->fs, b); /* the transaction's reference */
		return;
	}
}

int trans_writeback_write_dirty(struct trans *t)
{
	for (size_t i = 0; i < t->writeback->ndirty; i++) {
		int ret = trans_write_block(t, t->writeback->dirty[i]);
		if (ret)
			return ret;
	}
	return 0;
}

void trans_writeback_clean(struct trans *t)
{
	for (size_t i = 0; i < t->writeback->ndirty; i++)
		t->writeback->dirty[i]->dirty = false;
}

void trans_writeback_put_dirty(struct trans *t)
{
	struct trans_writeback *w = t->writeback;

	for (size_t i = 0; i < w->ndirty; i++) {
		block_put(t->fs, w->dirty[i]);
		w->dirty[i] = NULL;
	}
	w->ndirty = 0;
}

void trans_writeback_forget_dirty(struct trans *t)
{
	struct trans_writeback *w = t->writeback;

	for (size_t i = 0; w && i < w->ndirty; i++) {
		w->dirty[i]->dirty = false;
		block_forget(t->fs, w->dirty[i]);
		w->dirty[i] = NULL;
	}
	if (w)
		w->ndirty = 0;
}

void trans_writeback_figures(const struct trans *t, struct trans_figures *f)
{
	const struct trans_writeback *w = t->writeback;

	if (!w)
		return;
	f->dirty_budget = w->dirty_budget;
	f->peak_dirty = w->peak_dirty;
	f->written_early = w->written_early;
	f->adopted_again = w->adopted_again;
}
