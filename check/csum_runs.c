// SPDX-License-Identifier: GPL-2.0-only
/* Data ranges that should carry checksums, merged and in order (csum_runs.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check/csum_runs.h"
#include "check/fs_check.h"
#include <btk/item_check.h>
#include <btk/recsort.h>
#include <btk/walk.h>

static int run_cmp(const void *a, const void *b, void *arg)
{
	const struct csum_run *x = a, *y = b;

	(void)arg;
	return x->start < y->start ? -1 : x->start > y->start;
}

int csum_runs_open_extents(struct csum_runs *s, struct fs_info *fs)
{
	struct btrfs_key min = { 0, BTRFS_EXTENT_ITEM_KEY, 0 }, max = { (uint64_t)-1, 255, (uint64_t)-1 };

	memset(s, 0, sizeof(*s));
	s->fs = fs;
	tree_iter_init(&s->it, fs, &fs->extent_root, &min, &max);
	s->it_open = true;
	return 0;
}

/* The parts of data extents that regular file extents of checksummed inodes
 * of one subvolume tree use, into the sorter. */
static int tree_used_extents(struct csum_runs *s, const struct tree_root_ptr *root)
{
	struct btrfs_key min = { 0, 0, 0 }, max = { (uint64_t)-1, 255, (uint64_t)-1 }, key;
	uint64_t ino = 0, flags = 0;
	struct tree_iter it;
	const uint8_t *d;
	uint32_t size;
	int ret;

	tree_iter_init(&it, s->fs, root, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &d, &size)) == 1) {
		struct item_view v = item_view_of(d, size);

		if (key.type == BTRFS_INODE_ITEM_KEY && item_view_has_fixed(&v, key.type)) {
			ino = key.objectid;
			flags = inode_flags(d);
		} else if (key.type == BTRFS_EXTENT_DATA_KEY && ITEM_VIEW_STRUCT(&v, 0, struct btrfs_file_extent_item) &&
			   file_extent_type(d) == BTRFS_FILE_EXTENT_REG && file_extent_disk_bytenr(d) &&
			   !(ino == key.objectid && INODE_FLAGS_NODATASUM(flags))) {
			/* the part the file uses (compressed: all of it), as the kernel wrote checksums:
			 * the unwritten rest of a preallocated extent has none */
			uint64_t dlen = file_extent_disk_num_bytes(d);
			bool whole = file_extent_compression(d) != 0;
			uint64_t lo = whole ? 0 : file_extent_offset(d), hi = whole ? dlen : lo + file_extent_num_bytes(d);
			struct csum_run r;
			if (hi > dlen || hi < lo)
				hi = dlen;
			if (lo > hi)
				lo = hi;
			r = (struct csum_run){ file_extent_disk_bytenr(d) + lo, hi - lo };
			if (hi > lo && (ret = recsort_add(s->rs, &r)) < 0)
				break;
		}
	}
	tree_iter_release(&it);
	return ret < 0 ? ret : 0;
}

static int root_used_extents(void *arg, const struct tree_root_ptr *root, const uint8_t *item, uint32_t size)
{
	(void)item;
	(void)size;
	return tree_used_extents(arg, root);
}

int csum_runs_open_used(struct csum_runs *s, struct fs_info *fs, size_t memory_budget)
{
	int ret;

	memset(s, 0, sizeof(*s));
	s->fs = fs;
	if (!(s->rs = recsort_create(sizeof(struct csum_run), run_cmp, NULL, memory_budget,
				     &fs->knobs.recsort)))
		return fs_error(fs, -errno, "cannot create a sorter for the used data ranges");
	ret = fs_each_live_subvolume(fs, &fs->tree_root, SUBVOLS_WALKABLE, root_used_extents, s);
	if (ret >= 0)
		ret = recsort_finish(s->rs);
	return ret < 0 ? ret : 0;
}

/* The next range as the source has it (not merged): 1, 0 at the end, -errno. */
static int raw_next(struct csum_runs *s, struct csum_run *out)
{
	struct btrfs_key key;
	const uint8_t *data;
	const void *rec;
	uint32_t size;
	int ret;

	if (s->rs) {
		if ((ret = recsort_next(s->rs, &rec)) == 1)
			memcpy(out, rec, sizeof(*out));
		return ret;
	}
	while ((ret = tree_iter_next(&s->it, &key, &data, &size)) == 1) {
		struct item_view v = item_view_of(data, size);

		if (key.type == BTRFS_EXTENT_ITEM_KEY && (extent_flags_in(&v) & BTRFS_EXTENT_FLAG_DATA) && !v.past_end) {
			*out = (struct csum_run){ key.objectid, key.offset };
			return 1;
		}
	}
	return ret;
}

int csum_runs_next(struct csum_runs *s, struct csum_run *run)
{
	int ret;

	if (!s->pending) {
		if (s->eof)
			return 0;
		if ((ret = raw_next(s, &s->next)) <= 0) {
			s->eof = ret == 0;
			return ret;
		}
	}
	*run = s->next;
	s->pending = false;
	/* ranges come sorted by start: take in every one that overlaps or touches */
	while (!s->eof) {
		uint64_t end = run->start + run->len;
		if ((ret = raw_next(s, &s->next)) < 0)
			return ret;
		if (ret == 0) {
			s->eof = true;
			break;
		}
		if (s->next.start > end) {
			s->pending = true;
			break;
		}
		if (s->next.start + s->next.len > end)
			run->len = s->next.start + s->next.len - run->start;
	}
	s->runs++;
	s->bytes += run->len;
	return 1;
}

void csum_runs_close(struct csum_runs *s)
{
	if (s->rs) {
		struct recsort_stats st;
		recsort_get_stats(s->rs, &st);
		s->spilled_bytes = st.spilled_bytes;
		recsort_destroy(s->rs);
		s->rs = NULL;
	}
	if (s->it_open)
		tree_iter_release(&s->it);
	s->it_open = false;
}
