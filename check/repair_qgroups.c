// SPDX-License-Identifier: GPL-2.0-only
/* The qgroups class: each quota group's info item gets the numbers the
 * extents give (the check's accounting, traditional or simple quotas), as a
 * rescan would leave them; an unreadable quota tree is made again first
 * (check/repair_quota_tree.c). */
#include <errno.h>
#include <inttypes.h>

#include "check/repair.h"
#include "check/repair_notes.h"
#include <btk/format.h>
#include <btk/item_check.h>
#include <btk/tree.h>

static int set_info(struct repair_ctx *r, const struct qgroup_fix *f)
{
	struct btrfs_key key = { 0, BTRFS_QGROUP_INFO_KEY, f->id };
	struct tree_path path;
	uint8_t *item;
	uint32_t size;
	int ret;

	tree_path_init(&path);
	ret = trans_item_for_update(r->t, BTRFS_QUOTA_TREE_OBJECTID, &key, &item, &size, &path);
	if (ret == 0 && item_has_fixed(key.type, size)) {
		uint64_t rfer = qgroup_info_rfer(item), excl = qgroup_info_excl(item);
		qgroup_info_set_generation(item, trans_transid(r->t));
		qgroup_info_set_rfer(item, f->rfer);
		qgroup_info_set_rfer_cmpr(item, f->rfer);
		qgroup_info_set_excl(item, f->excl);
		qgroup_info_set_excl_cmpr(item, f->excl);
		r->changes++;
		repair_say(r, "qgroup %" PRIu64 "/%" PRIu64 ": referenced %" PRIu64 " -> %" PRIu64 ", exclusive %"
			   PRIu64 " -> %" PRIu64, f->id >> 48, f->id & (((uint64_t)1 << 48) - 1), rfer, f->rfer, excl,
			   f->excl);
	} else if (ret == 0 || ret == -ENOENT) {
		r->left++;
		ret = 0;
	}
	tree_path_release(r->fs, &path);
	return ret;
}

int repair_qgroups(struct repair_ctx *r)
{
	const void *rec;
	int ret = repair_quota_tree_remake(r);

	if (ret)
		return ret < 0 ? ret : 0;
	while ((ret = repair_notes_next(r->found, NOTES_QGROUPS, &rec)) == 1)
		if ((ret = set_info(r, rec)) < 0)
			return ret;
	return ret;
}
