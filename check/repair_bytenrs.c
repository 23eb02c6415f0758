// SPDX-License-Identifier: GPL-2.0-only
/* The file-extent-bytenr class: a file extent whose disk bytenr points where
 * no extent is, while an extent of the same length declares a reference from
 * that very file (root, inode, offset) that nothing uses, had its bytenr
 * damaged: it points at that extent again (as btrfs check --repair does).
 * The check runs again after it, so the other classes see the result. */
#include <inttypes.h>
#include <stdlib.h>

#include "check/repair.h"
#include "check/repair_notes.h"
#include <btk/format.h>
#include <btk/item_check.h>
#include <btk/tree.h>

/* The file extents of (root, ino) at disk bytenr `bad` whose data ref offset is `offset`. */
static int find_users(struct repair_ctx *r, const struct bytenr_fix *bad, struct repair_keys *out)
{
	struct btrfs_key min = { bad->ino, BTRFS_EXTENT_DATA_KEY, 0 }, max = { bad->ino, BTRFS_EXTENT_DATA_KEY,
									     (uint64_t)-1 }, k;
	struct tree_root_ptr rp;
	struct tree_iter it;
	const uint8_t *d;
	uint32_t size;
	int ret = trans_get_root(r->t, bad->root, &rp);

	if (ret)
		return ret;
	tree_iter_init(&it, r->fs, &rp, &min, &max);
	while ((ret = tree_iter_next(&it, &k, &d, &size)) == 1) {
		struct item_view v = item_view_of(d, size);

		if (ITEM_VIEW_STRUCT(&v, 0, struct btrfs_file_extent_item) && file_extent_type(d) != BTRFS_FILE_EXTENT_INLINE &&
		    file_extent_disk_bytenr(d) == bad->bytenr && k.offset - file_extent_offset(d) == bad->offset &&
		    (ret = repair_keys_push(out, &k)) < 0)
			break;
	}
	tree_iter_release(&it);
	return ret < 0 ? ret : 0;
}

static int point_back(struct repair_ctx *r, const struct bytenr_fix *bad, const struct bytenr_fix *good)
{
	struct repair_keys users = { 0 };
	int ret = find_users(r, bad, &users);

	for (size_t i = 0; !ret && i < users.n; i++) {
		struct tree_path path;
		uint8_t *item;
		uint32_t size;
		tree_path_init(&path);
		ret = trans_item_for_update(r->t, bad->root, &users.keys[i], &item, &size, &path);
		if (!ret) {
			file_extent_set_disk_bytenr(item, good->bytenr);
			r->changes++;
			repair_say(r, "root %" PRIu64 " inode %" PRIu64 " extent at %" PRIu64 ": disk bytenr %" PRIu64
				   " -> %" PRIu64 " (the extent that names it)", bad->root, bad->ino, users.keys[i].offset,
				   bad->bytenr, good->bytenr);
		}
		tree_path_release(r->fs, &path);
	}
	if (!ret && !users.n)
		r->left++;
	free(users.keys);
	return ret;
}

int repair_file_extent_bytenrs(struct repair_ctx *r)
{
	struct bytenr_fix group[3];
	const void *rec;
	size_t n = 0;
	int ret;

	/* groups of one (root, ino, offset): a lone bad user and a lone unused ref of its length pair up */
	for (;;) {
		ret = repair_notes_next(r->found, NOTES_BYTENRS, &rec);
		const struct bytenr_fix *f = ret == 1 ? rec : NULL;
		if (n && (!f || f->root != group[0].root || f->ino != group[0].ino || f->offset != group[0].offset)) {
			if (n == 2 && group[0].kind == 0 && group[1].kind == 1 && group[0].len == group[1].len &&
			    (ret = point_back(r, &group[0], &group[1])) < 0)
				return ret;
			else if (!(n == 2 && group[0].kind == 0 && group[1].kind == 1 && group[0].len == group[1].len))
				r->left += group[0].kind == 0;
			n = 0;
		}
		if (!f)
			break;
		if (n < 3)
			group[n] = *f;
		n += n < 3;
	}
	return ret;
}
