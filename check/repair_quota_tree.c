// SPDX-License-Identifier: GPL-2.0-only
/* Part of the qgroups class: a quota tree the check could not read whole is
 * dropped and made again as enabling quotas makes it: the status item (on,
 * and inconsistent: the numbers are not known until a rescan, which the
 * kernel and btrfs check both accept) and an info and a limit item for the
 * top level and every live subvolume. What the lost tree held beyond that
 * (limits, higher-level groups and their relations) is lost with it. Simple
 * quotas, whose numbers no rescan gives back, are left. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "check/repair.h"
#include "common/grow.h"
#include <btk/format.h>
#include <btk/item_check.h>
#include <btk/key.h>
#include <btk/super.h>
#include <btk/tree.h>

struct subvol_ids {
	uint64_t *v;
	size_t n, cap;
};

static int live_subvol(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size);
static int add_qgroup(struct repair_ctx *r, uint64_t id);

/* 1 when the quota tree was made again, 0 when it reads (or is left), -errno. */
int repair_quota_tree_remake(struct repair_ctx *r)
{
	uint8_t status[sizeof(struct btrfs_qgroup_status_item)] = { 0 };
	struct btrfs_key sk = { 0, BTRFS_QGROUP_STATUS_KEY, 0 };
	struct subvol_ids s = { 0 };
	struct tree_root_ptr rp;
	uint64_t unreadable = 0;
	int ret;

	if (!check_tree_unreadable(r->found, BTRFS_QUOTA_TREE_OBJECTID))
		return 0;
	if (super_incompat_flags(trans_super(r->t)) & BTRFS_FEATURE_INCOMPAT_SIMPLE_QUOTA) {
		r->left++;
		repair_say(r, "the quota tree is unreadable and quotas are simple: no rescan gives their numbers back, "
			   "left as it is");
		return 0;
	}
	if ((ret = trans_get_root(r->t, BTRFS_ROOT_TREE_OBJECTID, &rp)) ||
	    (ret = tree_each_item(r->fs, &rp, live_subvol, &s)) < 0)
		goto out;
	if ((trans_get_root(r->t, BTRFS_QUOTA_TREE_OBJECTID, &rp) == 0 &&
	     (ret = trans_delete_damaged_tree(r->t, BTRFS_QUOTA_TREE_OBJECTID, &unreadable))) ||
	    (ret = trans_create_tree(r->t, BTRFS_QUOTA_TREE_OBJECTID)))
		goto out;
	qgroup_status_set_version(status, 1);
	qgroup_status_set_generation(status, trans_transid(r->t));
	qgroup_status_set_flags(status, BTRFS_QGROUP_STATUS_FLAG_ON | BTRFS_QGROUP_STATUS_FLAG_INCONSISTENT);
	if ((ret = trans_insert_item(r->t, BTRFS_QUOTA_TREE_OBJECTID, &sk, status, sizeof(status))) ||
	    (ret = add_qgroup(r, BTRFS_FS_TREE_OBJECTID)))
		goto out;
	for (size_t i = 0; !ret && i < s.n; i++)
		if (i == 0 || s.v[i] != s.v[i - 1])
			ret = add_qgroup(r, s.v[i]);
	if (!ret) {
		r->changes++;
		repair_say(r, "the quota tree had %" PRIu64 " unreadable block(s): made again for the top level and %zu "
			   "subvolume(s), marked for a rescan (limits and higher-level groups are lost)", unreadable,
			   s.n);
		ret = 1;
	}
out:
	free(s.v);
	return ret;
}

/* Root items of live subvolumes (not the top level, added first), in key order. */
static int live_subvol(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct subvol_ids *s = arg;
	uint64_t *p;

	if (k->type != BTRFS_ROOT_ITEM_KEY || k->objectid < BTRFS_FIRST_FREE_OBJECTID ||
	    !key_is_subvolume_id(k->objectid) || !item_has_fixed(BTRFS_ROOT_ITEM_KEY, size) || !root_item_refs(d))
		return 0;
	if (!(p = grow_array(s->v, &s->cap, s->n, sizeof(*p), 32)))
		return -ENOMEM;
	s->v = p;
	s->v[s->n++] = k->objectid;
	return 0;
}

/* The info and limit items of level-0 group id, zero. */
static int add_qgroup(struct repair_ctx *r, uint64_t id)
{
	uint8_t info[sizeof(struct btrfs_qgroup_info_item)] = { 0 }, limit[sizeof(struct btrfs_qgroup_limit_item)] = { 0 };
	struct btrfs_key ik = { 0, BTRFS_QGROUP_INFO_KEY, id }, lk = { 0, BTRFS_QGROUP_LIMIT_KEY, id };
	int ret;

	qgroup_info_set_generation(info, trans_transid(r->t));
	if ((ret = trans_insert_item(r->t, BTRFS_QUOTA_TREE_OBJECTID, &ik, info, sizeof(info))))
		return ret;
	return trans_insert_item(r->t, BTRFS_QUOTA_TREE_OBJECTID, &lk, limit, sizeof(limit));
}
