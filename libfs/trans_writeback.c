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

/* A size in bytes with an optional K, M or G suffix; 0 when malformed. */
static uint64_t parse_budget(const char *s)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return 0;
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	default: break;
	}
	return *end ? 0 : (uint64_t)v;
}

uint64_t trans_dirty_budget(const struct fs_info *fs)
{
	/* a test knob: force the writeback with a budget of a few blocks */
	const char *env = getenv("BTK_TRANS_DIRTY_BUDGET");
	uint64_t v = env ? parse_budget(env) : 0;

	if (v)
		return v;
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
	size_t out = 0, left = t->ndirty;
	int ret = 0;

	for (size_t i = 0; i < t->ndirty; i++) {
		struct tree_block *b = t->dirty[i];
		/* refs 1: only the transaction holds it, no path or iterator */
		if (ret || left <= target || b->refs != 1 || (leaves_only && block_level(b) != 0)) {
			t->dirty[out++] = b;
			continue;
		}
		ret = trans_write_block(t, b);
		if (!ret)
			ret = ebitmap_set(t->written, b->bytenr, b->len);
		if (ret) {
			t->dirty[out++] = b;
			continue;
		}
		b->dirty = false;
		block_put(t->fs, b); /* stays cached, unreferenced: the cache may evict it */
		t->written_early++;
		left--;
	}
	t->ndirty = out;
	return ret;
}

int trans_writeback_maybe(struct trans *t)
{
	uint64_t ns = t->fs->nodesize;
	size_t target;
	int ret;

	if ((uint64_t)t->ndirty * ns <= t->dirty_budget)
		return 0;
	if (!t->written) {
		t->written = ebitmap_create(ns);
		if (!t->written)
			return -ENOMEM;
		t->written_epoch = t->fs->chunk_map_epoch;
	}
	/* down to half the budget, so the next writeback is many operations away;
	 * leaves first: the nodes above them come back on every search */
	target = (size_t)(t->dirty_budget / 2 / ns);
	ret = writeback_pass(t, true, target);
	if (!ret && t->ndirty > target)
		ret = writeback_pass(t, false, target);
	return ret;
}

int trans_adopt_block(struct trans *t, struct tree_block *b)
{
	int ret;

	if (b->dirty)
		return 1;
	if (!t->written || block_generation(b) != t->transid ||
	    ebitmap_test(t->written, b->bytenr, b->len) != EBITMAP_ALL)
		return 0;
	ret = trans_mark_dirty(t, b);
	if (!ret)
		ret = ebitmap_clear(t->written, b->bytenr, b->len);
	if (ret)
		return ret;
	t->adopted_again++;
	return 1;
}

int trans_writeback_finish(struct trans *t)
{
	uint64_t from = 0, start, len;
	int ret = 0;

	if (!t->written || t->written_epoch == t->fs->chunk_map_epoch)
		return 0;
	/* the copies of some chunk changed after blocks were written early: the
	 * first copy holds them (the old stripes come first), write every copy */
	while (!ret && ebitmap_next_set(t->written, from, &start, &len) == 1) {
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
	struct trans_mem_stats *s = &t->fs->trans_stats;
	uint64_t from = 0, start, len;

	s->dirty_budget = t->dirty_budget;
	if (t->peak_dirty > s->peak_dirty_blocks)
		s->peak_dirty_blocks = t->peak_dirty;
	s->written_early += t->written_early;
	s->adopted_again += t->adopted_again;
	if (t->peak_refs > s->peak_queued_refs)
		s->peak_queued_refs = t->peak_refs;
	s->refs_limit = t->refs_limit;
	s->refs_early_runs += t->refs_early_runs;
	s->refs_applied_early += t->refs_applied_early;
	s->refs_spilled += t->refs_spilled_total;
	if (!aborted && getenv("BTK_TRANS_STATS"))
		fs_note(t->fs, FS_NOTE_INFO,
			"transaction %llu: at most %zu dirty tree blocks in memory (budget %llu bytes), "
			"%llu written before the commit, %llu of them changed again; at most %zu extent "
			"reference changes queued in memory (%zu bytes; limit %zu), %llu applied before the "
			"commit in %llu runs, %llu through a spilling sorter",
			(unsigned long long)t->transid, t->peak_dirty, (unsigned long long)t->dirty_budget,
			(unsigned long long)t->written_early, (unsigned long long)t->adopted_again, t->peak_refs,
			t->peak_refs * sizeof(struct delayed_ref), t->refs_limit,
			(unsigned long long)t->refs_applied_early, (unsigned long long)t->refs_early_runs,
			(unsigned long long)t->refs_spilled_total);
	if (!t->written)
		return;
	/* an aborted transaction's blocks must not be found in the cache later */
	while (aborted && ebitmap_next_set(t->written, from, &start, &len) == 1) {
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
	ebitmap_destroy(t->written);
	t->written = NULL;
}
