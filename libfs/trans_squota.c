// SPDX-License-Identifier: LGPL-2.1-or-later
/* Simple quotas (squota) as a transaction changes tree blocks: each tree
 * block of a subvolume counts, referenced and exclusive, toward the subvolume
 * its header names and every qgroup above it, from the quota's enable
 * generation on. Like the kernel, a block whose extent item is inserted adds
 * nodesize to its tree's qgroups and one whose extent item goes takes it from
 * its header owner's; the sums go into the qgroup info items at commit.
 * Traditional qgroups are marked inconsistent instead (extent_refs.c). */
#include <errno.h>
#include <stdlib.h>

#include "libfs/trans_internal.h"
#include <btk/item_check.h>
#include <btk/tree.h>

/* a qgroup id's level (0: a subvolume's own group) */
#define QGROUP_LEVEL(id) ((uint64_t)(id) >> 48)
/* qgroups a subvolume's group can be below, counted through (a loop guard) */
#define SQUOTA_MAX_GROUPS 256

struct squota_delta {
	uint64_t root;
	int64_t bytes;
};

struct trans_squota {
	bool loaded, on;
	uint64_t enable_gen;
	struct squota_delta *d;
	size_t n, cap;
};

static bool is_subvol_tree(uint64_t id)
{
	return id == BTRFS_FS_TREE_OBJECTID || ((int64_t)id >= (int64_t)BTRFS_FIRST_FREE_OBJECTID && !QGROUP_LEVEL(id));
}

/* Whether simple quotas are on, and since when, as this transaction sees the
 * quota tree's status item (read once). */
static int squota_load(struct trans *t, struct trans_squota *s)
{
	struct btrfs_key key = { 0, BTRFS_QGROUP_STATUS_KEY, 0 };
	struct btrfs_qgroup_status_item st;
	struct tree_root_ptr quota;
	uint32_t size = sizeof(st);
	int ret;

	s->loaded = true;
	if (!(t->fs->incompat & BTRFS_FEATURE_INCOMPAT_SIMPLE_QUOTA))
		return 0;
	if (trans_get_root(t, BTRFS_QUOTA_TREE_OBJECTID, &quota) != 0) {
		btk_error_clear();
		return 0;
	}
	ret = tree_lookup(t->fs, &quota, &key, &st, &size);
	if (ret == -ENOENT || (!ret && size < sizeof(st))) {
		btk_error_clear();
		return 0;
	}
	if (ret)
		return ret;
	if ((qgroup_status_flags(&st) & (BTRFS_QGROUP_STATUS_FLAG_ON | BTRFS_QGROUP_STATUS_FLAG_SIMPLE_MODE)) !=
	    (BTRFS_QGROUP_STATUS_FLAG_ON | BTRFS_QGROUP_STATUS_FLAG_SIMPLE_MODE))
		return 0;
	s->on = true;
	s->enable_gen = qgroup_status_enable_gen(&st);
	return 0;
}

static int squota_add(struct trans_squota *s, uint64_t root, int64_t bytes)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->d[i].root == root) {
			s->d[i].bytes += bytes;
			return 0;
		}
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 8;
		struct squota_delta *d = realloc(s->d, cap * sizeof(*d));
		if (!d)
			return -ENOMEM;
		s->d = d;
		s->cap = cap;
	}
	s->d[s->n++] = (struct squota_delta){ root, bytes };
	return 0;
}

int trans_squota_tree_block(struct trans *t, uint64_t owner, uint64_t generation, bool added)
{
	struct trans_squota *s = t->squota;
	int ret;

	if (!(t->fs->incompat & BTRFS_FEATURE_INCOMPAT_SIMPLE_QUOTA))
		return 0;
	if (!s) {
		if (!(s = t->squota = calloc(1, sizeof(*s))))
			return -ENOMEM;
	}
	if (!s->loaded && (ret = squota_load(t, s)))
		return ret;
	if (!s->on || !is_subvol_tree(owner) || generation < s->enable_gen)
		return 0;
	return squota_add(s, owner, added ? (int64_t)t->fs->nodesize : -(int64_t)t->fs->nodesize);
}

int trans_squota_block_freed(struct trans *t, uint64_t bytenr, uint64_t generation, uint64_t root)
{
	struct tree_block *b;
	uint64_t owner = root;

	if (!(t->fs->incompat & BTRFS_FEATURE_INCOMPAT_SIMPLE_QUOTA))
		return 0;
	/* the header names the owner; a block that cannot be read (a repair drops
	 * it) is taken as the tree's that referenced it */
	if (block_read(t->fs, bytenr, &BLOCK_EXPECT_ANY, &b) == 0) {
		owner = block_owner(b);
		block_put(t->fs, b);
	} else {
		btk_error_clear();
	}
	return trans_squota_tree_block(t, owner, generation, false);
}

/* Add bytes to both numbers of one qgroup's info item (a group without one is
 * left alone, as the kernel leaves a group it does not know). */
static int info_add(struct trans *t, uint64_t qgroupid, int64_t bytes)
{
	struct btrfs_key key = { 0, BTRFS_QGROUP_INFO_KEY, qgroupid };
	struct tree_path path;
	uint8_t *item;
	uint32_t size;
	int ret;

	tree_path_init(&path);
	ret = trans_item_for_update(t, BTRFS_QUOTA_TREE_OBJECTID, &key, &item, &size, &path);
	if (!ret && size >= sizeof(struct btrfs_qgroup_info_item)) {
		uint64_t rfer = qgroup_info_rfer(item), excl = qgroup_info_excl(item);
		/* (numbers already wrong stay at 0 rather than wrap) */
		qgroup_info_set_rfer(item, bytes < 0 && rfer < (uint64_t)-bytes ? 0 : rfer + (uint64_t)bytes);
		qgroup_info_set_excl(item, bytes < 0 && excl < (uint64_t)-bytes ? 0 : excl + (uint64_t)bytes);
		qgroup_info_set_generation(item, t->transid);
	}
	tree_path_release(t->fs, &path);
	if (ret == -ENOENT)
		btk_error_clear();
	return ret == -ENOENT ? 0 : ret;
}

/* The groups one level or more above qgroupid (relation items keyed by the
 * child name the parent in their offset; parents have higher ids) that are
 * not in groups[0..*n) yet are appended. */
static int add_parents(struct trans *t, uint64_t qgroupid, uint64_t *groups, size_t *n)
{
	struct btrfs_key min = { qgroupid, BTRFS_QGROUP_RELATION_KEY, qgroupid + 1 };
	struct btrfs_key max = { qgroupid, BTRFS_QGROUP_RELATION_KEY, (uint64_t)-1 }, k;
	struct tree_root_ptr quota;
	struct tree_iter it;
	const uint8_t *d;
	uint32_t size;
	int ret;

	if ((ret = trans_get_root(t, BTRFS_QUOTA_TREE_OBJECTID, &quota)))
		return ret;
	tree_iter_init(&it, t->fs, &quota, &min, &max);
	while ((ret = tree_iter_next(&it, &k, &d, &size)) == 1) {
		size_t i;
		for (i = 0; i < *n && groups[i] != k.offset; i++)
			;
		if (i == *n && *n < SQUOTA_MAX_GROUPS)
			groups[(*n)++] = k.offset;
	}
	tree_iter_release(&it);
	return ret;
}

/* One subvolume's change: its group and every group above it. */
static int apply_delta(struct trans *t, const struct squota_delta *d)
{
	uint64_t groups[SQUOTA_MAX_GROUPS];
	size_t n = 1;
	int ret = 0;

	groups[0] = d->root;
	for (size_t i = 0; i < n && !ret; i++) {
		if (!(ret = info_add(t, groups[i], d->bytes)))
			ret = add_parents(t, groups[i], groups, &n);
	}
	return ret;
}

int trans_squota_apply(struct trans *t)
{
	struct trans_squota *s = t->squota;
	int ret = 0;

	if (!s)
		return 0;
	/* editing the quota tree copies only its own blocks: no new changes here */
	for (size_t i = 0; i < s->n && !ret; i++)
		if (s->d[i].bytes)
			ret = apply_delta(t, &s->d[i]);
	s->n = 0;
	return ret;
}

void trans_squota_release(struct trans *t)
{
	if (!t->squota)
		return;
	free(t->squota->d);
	free(t->squota);
	t->squota = NULL;
}
