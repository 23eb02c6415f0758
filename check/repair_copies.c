// SPDX-License-Identifier: GPL-2.0-only
/* Repairs from a good copy: superblock copies that are invalid, stale or
 * different are rewritten from the newest valid copy of the same device (each
 * device has its own dev item), and bad copies of tree blocks from the copy
 * that verified. Raw writes through the device stack (so the undo file saves
 * the old bytes), then a flush. No transaction: the good copy already is the
 * filesystem, only the bad one changes. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "check/repair.h"
#include <btk/ebitmap.h>
#include <btk/super.h>
#include <btk/volumes.h>
#include <btk/walk.h>

static int flush_all(struct fs_info *fs)
{
	for (unsigned i = 0; i < fs_num_devices(fs); i++) {
		int ret = fs_device(fs, i)->io ? io_flush(fs_device(fs, i)->io) : 0;
		if (ret)
			return fs_error(fs, ret, "flushing %s: %s", fs_device(fs, i)->path, strerror(-ret));
	}
	return 0;
}

/* Every copy of one device's superblock made equal to its newest valid copy. */
static int fix_device_supers(struct repair_ctx *r, const struct fs_device *dev)
{
	struct super_copy copies[BTRFS_SUPER_MIRROR_MAX], info;
	uint8_t good[BTRFS_SUPER_INFO_SIZE], want[BTRFS_SUPER_INFO_SIZE], have[BTRFS_SUPER_INFO_SIZE];
	int ret = super_read_best(dev->io, -1, good, copies); /* the best copy's index */

	if (ret < 0)
		return fs_error(r->fs, ret, "%s: no valid superblock copy to repair from", dev->path);
	ret = 0;
	if (super_generation(good) != r->fs->generation) {
		repair_say(r, "%s: left alone: its newest superblock has generation %" PRIu64 ", not %" PRIu64,
			   dev->path, super_generation(good), r->fs->generation);
		return 0;
	}
	for (int m = 0; m < BTRFS_SUPER_MIRROR_MAX; m++) {
		uint64_t off = btrfs_super_offset(m);
		int rc = super_read_copy(dev->io, m, have, &info);

		if (rc == -ENXIO || off + BTRFS_SUPER_INFO_SIZE > io_size(dev->io) ||
		    !super_copy_kept(dev->total_bytes, m))
			continue; /* the device is too small for this copy */
		memcpy(want, good, sizeof(want));
		super_set_bytenr(want, off);
		if ((ret = super_update_csum(want)))
			return fs_error(r->fs, ret, "%s: cannot checksum superblock copy %d", dev->path, m);
		if (rc == 0 && memcmp(want, have, sizeof(want)) == 0)
			continue;
		repair_say(r, "%s: superblock copy %d (at %" PRIu64 ", %s) rewritten from the copy of generation %"
			   PRIu64, dev->path, m, off, rc ? info.why : info.generation < r->fs->generation ? "stale"
			   : "different", super_generation(good));
		r->changes++;
		if (r->opts->dry_run)
			continue;
		if ((ret = io_write(dev->io, want, sizeof(want), off)))
			return fs_error(r->fs, ret, "writing superblock copy %d of %s: %s", m, dev->path,
					strerror(-ret));
	}
	return 0;
}

int repair_super_copies(struct repair_ctx *r)
{
	for (unsigned i = 0; i < fs_num_devices(r->fs); i++) {
		int ret;
		if (!fs_device(r->fs, i)->io)
			continue;
		ret = fix_device_supers(r, fs_device(r->fs, i));
		if (ret)
			return ret;
	}
	return r->opts->dry_run ? 0 : flush_all(r->fs);
}

struct copy_walk {
	struct repair_ctx *r;
	struct ebitmap *visited;
	uint8_t *buf;
	uint64_t tree;
	int err;                /* a write failed: stop */
};

/* Write the good image of a block over copy m. */
static int write_copy(struct copy_walk *w, const struct tree_block *b, int m)
{
	struct fs_info *fs = w->r->fs;
	struct phys_copy copies[MAX_COPIES];
	uint64_t contig;
	int n = volumes_map(fs, b->bytenr, fs->nodesize, copies, &contig);
	int ret;

	if (n < 0)
		return n;
	if (m >= n || !copies[m].dev || contig < fs->nodesize)
		return fs_error(fs, -EUCLEAN, "tree block %" PRIu64 ": cannot place copy %d", b->bytenr, m + 1);
	ret = io_write(copies[m].dev->io, b->data, fs->nodesize, copies[m].physical);
	if (ret)
		return fs_error(fs, ret, "writing copy %d of tree block %" PRIu64 ": %s", m + 1, b->bytenr,
				strerror(-ret));
	return 0;
}

static int visit_block(void *arg, const struct tree_block *b)
{
	struct copy_walk *w = arg;
	struct fs_info *fs = w->r->fs;
	const struct chunk *c = fs_chunk_lookup(fs, b->bytenr);
	struct block_expect e = { .generation = block_generation(b), .level = (int)block_level(b) };
	int seen = ebitmap_test_and_set(w->visited, b->bytenr, fs->nodesize), n;

	if (seen < 0)
		return seen;
	if (seen)
		return 1;
	/* parity profiles have no second copy to rewrite from */
	if (!c || (c->type & (BTRFS_BLOCK_GROUP_RAID5 | BTRFS_BLOCK_GROUP_RAID6)))
		return 0;
	n = volumes_num_copies(fs, b->bytenr);
	for (int m = 0; m < n; m++) {
		enum block_problem p;
		int ret;
		if (m == b->mirror)
			continue;
		p = block_read_copy(fs, b->bytenr, m, &e, w->buf);
		if (p == BLOCK_OK || p == BLOCK_DEV_MISSING)
			continue;
		repair_say(w->r, "tree %" PRIu64 ": block %" PRIu64 " copy %d (%s) rewritten from copy %d", w->tree,
			   b->bytenr, m + 1, block_problem_name(p), b->mirror + 1);
		w->r->changes++;
		if (!w->r->opts->dry_run && (ret = write_copy(w, b, m)))
			return w->err = ret;
	}
	return 0;
}

int repair_tree_block_copies(struct repair_ctx *r)
{
	struct fs_info *fs = r->fs;
	struct copy_walk w = { .r = r };
	struct fs_tree_list list;
	int ret;

	w.visited = ebitmap_create(fs->sectorsize);
	w.buf = malloc(fs->nodesize);
	if (!w.visited || !w.buf) {
		ret = -ENOMEM;
		goto out;
	}
	ret = fs_list_trees(fs, &list);
	if (ret)
		goto out;
	for (size_t i = 0; i < list.count && !ret; i++) {
		struct tree_walk_ops ops = { visit_block, NULL, &w };
		/* what a deleted subvolume's drop freed may be in use elsewhere */
		struct tree_walk_prefetch pf = { false, NULL, NULL, list.drops[i].level ? &list.drops[i] : NULL, NULL };
		w.tree = list.roots[i].objectid;
		ret = tree_walk_prefetching(fs, &list.roots[i], &ops, &pf, NULL);
		/* an unreadable root has no good copy to repair from: next tree */
		if (ret && !w.err && ret != -ENOMEM)
			ret = 0;
	}
	fs_tree_list_free(&list);
	if (!ret && !r->opts->dry_run)
		ret = flush_all(fs);
out:
	ebitmap_destroy(w.visited);
	free(w.buf);
	return ret;
}
