// SPDX-License-Identifier: GPL-2.0-only
/* The csum tree repaired in one transaction. Fixing: each item keeps the
 * checksums of its blocks that no earlier item has (overlaps go to the item
 * that starts first), that lie in a data extent (extent tree) and that make
 * whole checksums (a wrong size is trimmed); what survives of an item stays
 * one item, or several where pieces were cut out. --rebuild-csum-tree:
 * checksums recomputed from the data of every extent that a regular file
 * extent of an inode without NODATASUM uses; blocks that cannot be read
 * from any copy get none, and the report names their extent and the files
 * that use it (libfs/data_users.h). A csum tree
 * with unreadable blocks is dropped whole and rebuilt that way. Checksums
 * of data that only NODATASUM files use (csum-nodatasum): the fix keeps the
 * checksums of the parts checksummed files use, and only those.
 *
 * Either way the new items are compared with the old ones and only the items
 * that differ are deleted or inserted. Everything streams in key order: the
 * old items from the committed csum tree (which the transaction leaves as it
 * is until the commit, so no cursor needs searching again after a change), the
 * new ones as they are made, merged with the data ranges (check/csum_runs.h).
 * Memory: a few tree paths, one item's worth of checksums, a 1 MiB read
 * buffer, and for a rebuild a sorter within the --memory-limit share; the
 * transaction's dirty blocks come on top. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "check/csum_runs.h"
#include "check/fs_check.h"
#include "check/repair.h"
#include "common/messages.h"
#include <btk/csum.h>
#include <btk/data_users.h>
#include <btk/tree.h>
#include <btk/volumes.h>

#define SAY_MAX 20
#define READ_MAX (1ULL << 20)
#define NAMED_EXTENTS 4   /* extents with unreadable blocks named per run */
#define NAMED_USERS 8     /* files named per extent */

/* An extent with unreadable blocks and the files that use it. */
struct named {
	uint64_t start, len, more;
	struct data_user users[NAMED_USERS];
	size_t n;
};

struct cfix {
	struct repair_ctx *r;
	struct fs_info *fs;
	unsigned csize;
	uint64_t max_item;         /* bytes of data one item may cover */
	struct csum_runs runs;     /* data extents (a fix) or used ranges (a rebuild) */
	bool runs_open, have_run;
	struct csum_run run;       /* a fix: the current run of data extents */
	/* the old items, from the committed tree: the one at old_start is next */
	struct tree_iter old;
	bool old_open, old_have;
	uint64_t old_start;
	const uint8_t *old_data;
	uint32_t old_size;
	uint64_t nold, deleted, inserted;
	uint64_t unreadable, said;
};

static const struct btrfs_key csum_min = { BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, 0 };
static const struct btrfs_key csum_max = { BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, (uint64_t)-1 };

static int old_advance(struct cfix *x)
{
	struct btrfs_key key;
	int ret = tree_iter_next(&x->old, &key, &x->old_data, &x->old_size);

	x->old_have = ret == 1;
	if (ret == 1) {
		x->old_start = key.offset;
		x->nold++;
	}
	return ret < 0 ? ret : 0;
}

/* Delete the old item the cursor is at (its key still holds it in the
 * transaction's tree), and move on. */
static int old_delete(struct cfix *x)
{
	struct btrfs_key k = { BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, x->old_start };
	int ret = trans_delete_item(x->r->t, BTRFS_CSUM_TREE_OBJECTID, &k);

	if (ret)
		return ret;
	x->deleted++;
	return old_advance(x);
}

/* A new item covering len bytes of data from start, in ascending order of
 * start: the old items before it have no equal and go; an equal old item
 * stays and the new one is not written, a different one is replaced. */
static int new_item(struct cfix *x, uint64_t start, uint64_t len, const uint8_t *sums)
{
	uint32_t bytes = (uint32_t)(len / x->fs->sectorsize * x->csize);
	struct btrfs_key k = { BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, start };
	int ret = 0;

	while (!ret && x->old_have && x->old_start < start)
		ret = old_delete(x);
	if (ret)
		return ret;
	if (x->old_have && x->old_start == start) {
		if (x->old_size == bytes && !memcmp(x->old_data, sums, bytes))
			return old_advance(x);
		if ((ret = old_delete(x)))
			return ret;
	}
	if ((ret = trans_insert_item(x->r->t, BTRFS_CSUM_TREE_OBJECTID, &k, sums, bytes)))
		return ret;
	x->inserted++;
	return 0;
}

/* The end of the data-extent run that holds pos, or 0 if none holds it;
 * *from: the start of the next run after pos (UINT64_MAX if none). Calls
 * come with pos ascending. */
static int extent_end_at(struct cfix *x, uint64_t pos, uint64_t *from, uint64_t *end)
{
	int ret;

	while (x->have_run && x->run.start + x->run.len <= pos) {
		if ((ret = csum_runs_next(&x->runs, &x->run)) < 0)
			return ret;
		x->have_run = ret == 1;
	}
	*from = x->have_run ? x->run.start : UINT64_MAX;
	*end = x->have_run && x->run.start <= pos ? x->run.start + x->run.len : 0;
	return 0;
}

/* A fix: what survives of each old item (in the data extents, above what
 * earlier items cover, whole checksums) as new items. */
static int fix_items(struct cfix *x)
{
	uint32_t ss = x->fs->sectorsize, size;
	uint64_t covered = 0;
	struct btrfs_key key;
	struct tree_iter it;
	const uint8_t *data;
	int ret;

	if ((ret = csum_runs_next(&x->runs, &x->run)) < 0)
		return ret;
	x->have_run = ret == 1;
	tree_iter_init(&it, x->fs, &x->fs->csum_root, &csum_min, &csum_max);
	while ((ret = tree_iter_next(&it, &key, &data, &size)) == 1) {
		uint64_t len = (uint64_t)(size / x->csize) * ss, pos, end = key.offset + len;

		if (end < key.offset) /* past the end of the address space: clamp */
			end = UINT64_MAX;
		if (key.offset % ss)
			continue;
		pos = key.offset > covered ? key.offset : covered;
		while (pos < end) {
			uint64_t next, stop;
			if ((ret = extent_end_at(x, pos, &next, &stop)) < 0)
				break;
			if (!stop) {
				pos = next;
				continue;
			}
			if (stop > end)
				stop = end;
			ret = new_item(x, pos, stop - pos, data + (pos - key.offset) / ss * x->csize);
			if (ret)
				break;
			pos = stop;
		}
		if (ret < 0)
			break;
		if (end > covered)
			covered = end;
	}
	tree_iter_release(&it);
	return ret < 0 ? ret : 0;
}

/* The csum tree's items under another key than checksums have (the kernel
 * rejects a leaf that holds one): removed. */
static int remove_foreign_items(struct cfix *x)
{
	struct btrfs_key min = { 0, 0, 0 }, max = { (uint64_t)-1, 255, (uint64_t)-1 }, key;
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size;
	int ret;

	tree_iter_init(&it, x->fs, &x->fs->csum_root, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &data, &size)) == 1) {
		if (key.objectid == BTRFS_EXTENT_CSUM_OBJECTID && key.type == BTRFS_EXTENT_CSUM_KEY)
			continue;
		if ((ret = trans_delete_item(x->r->t, BTRFS_CSUM_TREE_OBJECTID, &key)))
			break;
		repair_say(x->r, "item (%" PRIu64 " %u %" PRIu64 ") removed: no checksum item has that key",
			   key.objectid, key.type, key.offset);
		x->deleted++;
	}
	tree_iter_release(&it);
	return ret < 0 ? ret : 0;
}

/* One sector from any copy that reads; -EIO when none does. */
static int read_sector(struct fs_info *fs, uint64_t logical, uint8_t *buf)
{
	int copies = volumes_num_copies(fs, logical), ret = -EIO;

	for (int m = 0; m < copies; m++)
		if ((ret = volumes_read(fs, logical, buf, fs->sectorsize, m)) == 0)
			return 0;
	return ret;
}

/* The extent that holds the unreadable block at logical, unless it is the
 * last one named already: looked up while the report has room. */
static void note_extent(struct cfix *x, uint64_t logical, struct named *v, size_t *n)
{
	struct named *e = &v[*n];

	if (x->said >= SAY_MAX || *n == NAMED_EXTENTS || (*n && logical - v[*n - 1].start < v[*n - 1].len))
		return;
	if (data_users_find(x->fs, logical, e->users, NAMED_USERS, &e->n, &e->more, &e->start, &e->len))
		return;
	++*n;
}

/* One line per file that uses each extent. */
static void say_users(struct cfix *x, const struct named *v, size_t n)
{
	char line[560];

	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j < v[i].n; j++) {
			data_user_describe(x->fs, &v[i].users[j], line, sizeof(line));
			repair_say(x->r, "extent %" PRIu64 "+%" PRIu64 " is used by %s", v[i].start, v[i].len, line);
		}
		if (v[i].more)
			repair_say(x->r, "extent %" PRIu64 "+%" PRIu64 " is used by %" PRIu64 " more file extent(s)",
				   v[i].start, v[i].len, v[i].more);
		if (!v[i].n && !v[i].more)
			repair_say(x->r, "extent %" PRIu64 "+%" PRIu64 " has no readable data reference", v[i].start,
				   v[i].len);
	}
}

/* Checksums of [start, start+len) into new items (split at unreadable blocks and at max_item). */
static int csum_range(struct cfix *x, uint64_t start, uint64_t len, uint8_t *buf, uint8_t *sums)
{
	uint32_t ss = x->fs->sectorsize;
	uint64_t run = start, nrun = 0, bad = 0;  /* the item being built: [run, run + nrun sectors) */
	struct named named[NAMED_EXTENTS];
	size_t nnamed = 0;
	int ret = 0;

	for (uint64_t off = 0; off < len && !ret; off += READ_MAX) {
		uint64_t n = len - off < READ_MAX ? len - off : READ_MAX;
		bool whole = volumes_read(x->fs, start + off, buf, n, 0) == 0;

		for (uint64_t s = 0; s < n && !ret; s += ss) {
			uint8_t c[BTRFS_CSUM_SIZE];
			if (!whole && read_sector(x->fs, start + off + s, buf + s)) {
				bad++;
				note_extent(x, start + off + s, named, &nnamed);
				if (nrun)
					ret = new_item(x, run, nrun * ss, sums);
				nrun = 0;
				continue;
			}
			if (!nrun)
				run = start + off + s;
			csum_compute(x->fs->csum_type, buf + s, ss, c);
			memcpy(sums + nrun * x->csize, c, x->csize);
			if (++nrun * ss == x->max_item) {
				ret = new_item(x, run, nrun * ss, sums);
				nrun = 0;
			}
		}
	}
	if (!ret && nrun)
		ret = new_item(x, run, nrun * ss, sums);
	if (bad) {
		x->unreadable += bad;
		if (x->said++ < SAY_MAX)
			repair_say(x->r, "data extent %" PRIu64 "+%" PRIu64 ": %" PRIu64
				   " block(s) cannot be read from any copy and get no checksum", start, len, bad);
		say_users(x, named, nnamed);
	}
	return ret;
}

/* A rebuild: checksums of every used run, from the data. */
static int rebuild(struct cfix *x)
{
	uint8_t *buf = malloc(READ_MAX), *sums = malloc(x->max_item / x->fs->sectorsize * x->csize);
	int ret = buf && sums ? 0 : -ENOMEM;
	struct csum_run run;

	while (!ret && (ret = csum_runs_next(&x->runs, &run)) == 1) {
		uint64_t start = run.start - run.start % x->fs->sectorsize;
		uint64_t end = run.start + run.len;
		end += (x->fs->sectorsize - end % x->fs->sectorsize) % x->fs->sectorsize;
		ret = csum_range(x, start, end - start, buf, sums);
	}
	free(buf);
	free(sums);
	return ret < 0 ? ret : 0;
}

/* A csum tree the check could not read whole is dropped (its blocks below the
 * unreadable ones found through the extent tree) and started again empty: the
 * rebuild then writes every checksum anew. 1 when dropped. */
static int drop_damaged_csum_tree(struct repair_ctx *r)
{
	uint64_t unreadable;
	int ret;

	struct tree_root_ptr rp;

	if (!check_tree_unreadable(r->found, BTRFS_CSUM_TREE_OBJECTID))
		return 0;
	unreadable = 0;
	/* without a root item (and no block found for it) there is nothing to drop */
	if ((trans_get_root(r->t, BTRFS_CSUM_TREE_OBJECTID, &rp) == 0 &&
	     (ret = trans_delete_damaged_tree(r->t, BTRFS_CSUM_TREE_OBJECTID, &unreadable))) ||
	    (ret = trans_create_tree(r->t, BTRFS_CSUM_TREE_OBJECTID)))
		return ret;
	repair_say(r, "the old csum tree had %" PRIu64 " unreadable block(s): dropped whole, rebuilt from the data",
		   unreadable);
	r->changes++;
	return 1;
}

/* The old items left after the last new one have no equal: removed. */
static int old_finish(struct cfix *x)
{
	int ret = 0;

	while (!ret && x->old_have)
		ret = old_delete(x);
	return ret;
}

static void cfix_release(struct cfix *x)
{
	if (x->runs_open) {
		csum_runs_close(&x->runs);
		if (x->runs.spilled_bytes)
			msg_verbose("csums: the used data ranges were sorted with %" PRIu64 " bytes spilled to disk",
				    x->runs.spilled_bytes);
	}
	x->runs_open = false;
	if (x->old_open)
		tree_iter_release(&x->old);
	x->old_open = false;
}

int repair_csums(struct repair_ctx *r)
{
	struct cfix x = { .r = r, .fs = r->fs, .csize = r->fs->csum_size };
	uint32_t leaf_data = r->fs->nodesize - (uint32_t)sizeof(struct btrfs_header);
	/* missing checksums can only come from the data: recompute them all (trimming
	 * damaged items first would leave exactly such holes) */
	bool rebuild_all = r->opts->rebuild_csum || r->found->counts[PR_CSUM_MISSING] > 0;
	/* checksums of data that only NODATASUM files use: the fix keeps only the used parts */
	bool keep_used = r->found->counts[PR_CSUM_NODATASUM] > 0;
	int ret, dropped;

	if (!r->fs->csum_root.bytenr)
		return fs_error(r->fs, -EUCLEAN, "the filesystem has no csum tree");
	/* like the kernel: room for two item headers left in a leaf */
	x.max_item = ((leaf_data - 2 * sizeof(struct btrfs_item)) / x.csize - 1) * (uint64_t)r->fs->sectorsize;
	if ((dropped = drop_damaged_csum_tree(r)) < 0)
		return dropped;
	rebuild_all = rebuild_all || dropped;
	ret = rebuild_all || keep_used ? csum_runs_open_used(&x.runs, r->fs, check_sort_budget(r->found, 4))
				       : csum_runs_open_extents(&x.runs, r->fs);
	x.runs_open = true;
	if (!ret && !dropped) {  /* a dropped tree has no old items left */
		tree_iter_init(&x.old, r->fs, &r->fs->csum_root, &csum_min, &csum_max);
		x.old_open = true;
		ret = old_advance(&x);
	}
	if (!ret)
		ret = rebuild_all ? rebuild(&x) : fix_items(&x);
	if (!ret)
		ret = old_finish(&x);
	if (!ret && x.said > SAY_MAX)
		repair_say(r, "... %" PRIu64 " more extent(s) with unreadable blocks", x.said - SAY_MAX);
	if (!ret && rebuild_all)
		repair_say(r, "checksums recomputed from the data: %" PRIu64 " bytes in %" PRIu64
			   " run(s) of data extents%s", x.runs.bytes, x.runs.runs,
			   x.unreadable ? "; unreadable blocks have none" : "");
	cfix_release(&x);
	if (!ret && !dropped)
		ret = remove_foreign_items(&x);
	if (ret)
		return ret;
	if (x.deleted || x.inserted) {
		repair_say(r, "%" PRIu64 " csum item(s) removed or replaced, %" PRIu64 " written (%" PRIu64 " kept)",
			   x.deleted, x.inserted, x.nold - x.deleted);
		r->changes++;
	}
	return 0;
}
