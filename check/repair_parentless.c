// SPDX-License-Identifier: GPL-2.0-only
/* Names into a parent that is not there: an inode ref or extref whose parent
 * directory has no inode item or is not a directory, and that holds no dir
 * item or dir index either, is a damaged ref (its parent field or key offset
 * garbled), not a directory to rebuild. The names class removes such names
 * after it has settled every other directory, so that the inode's real name,
 * re-created from its surviving dir entries, is there by then; an inode left
 * without a name is linked into /lost+found. A parent that does hold entries
 * is a directory whose inode item is damaged: left for the check to report. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check/repair_links.h"
#include <btk/tree.h>

#define SAY_MAX 100
#define MAX_NAMES 16

struct pl_name {
	struct btrfs_key key;
	uint16_t len;
	uint8_t name[BTRFS_NAME_MAX];
};

/* 1 when dir holds any dir item or dir index, 0 when not, -errno. */
static int has_entries(struct repair_ctx *r, const struct tree_root_ptr *rp, uint64_t dir)
{
	struct btrfs_key min = { dir, BTRFS_DIR_ITEM_KEY, 0 }, max = { dir, BTRFS_DIR_INDEX_KEY, (uint64_t)-1 }, k;
	struct tree_iter it;
	const uint8_t *d;
	uint32_t size;
	int ret;

	tree_iter_init(&it, r->fs, rp, &min, &max);
	while ((ret = tree_iter_next(&it, &k, &d, &size)) == 1)
		if (k.type == BTRFS_DIR_ITEM_KEY || k.type == BTRFS_DIR_INDEX_KEY)
			break;
	tree_iter_release(&it);
	return ret;
}

/* The names child's refs and extrefs give it in dir, at most MAX_NAMES: how many, or -errno. */
static int names_in(struct repair_ctx *r, const struct tree_root_ptr *rp, uint64_t dir, uint64_t child,
		    struct pl_name *v)
{
	struct btrfs_key min = { child, BTRFS_INODE_REF_KEY, 0 }, max = { child, BTRFS_INODE_EXTREF_KEY, (uint64_t)-1 };
	struct btrfs_key k;
	struct tree_iter it;
	struct link_entry e;
	const uint8_t *d;
	uint32_t size, off;
	int ret, n = 0;

	tree_iter_init(&it, r->fs, rp, &min, &max);
	while ((ret = tree_iter_next(&it, &k, &d, &size)) == 1) {
		if (k.type == BTRFS_INODE_REF_KEY && k.offset != dir)
			continue;
		for (off = 0; link_entry_next(k.type, d, size, &off, &e);) {
			if ((k.type == BTRFS_INODE_EXTREF_KEY && e.parent != dir) || !e.len || e.len > BTRFS_NAME_MAX)
				continue;
			if (n == MAX_NAMES) {
				ret = -E2BIG;
				goto out;
			}
			v[n].key = k;
			v[n].len = e.len;
			memcpy(v[n].name, e.name, e.len);
			n++;
		}
	}
out:
	tree_iter_release(&it);
	return ret < 0 ? ret : n;
}

int names_parent_missing(struct repair_ctx *r, uint64_t root, uint64_t dir)
{
	struct tree_root_ptr rp;
	uint32_t mode = 0;
	int ret = link_inode_mode(r, root, dir, &mode);

	if (ret < 0 || (ret == 1 && S_ISDIR(mode)))
		return ret < 0 ? ret : 0;
	if ((ret = trans_get_root(r->t, root, &rp)) || (ret = has_entries(r, &rp, dir)) < 0)
		return ret;
	return !ret;
}

int names_drop_parentless(struct repair_ctx *r, uint64_t root, uint64_t dir, uint64_t child)
{
	struct pl_name *v;
	struct tree_root_ptr rp;
	int ret, n;

	/* a subvolume's top directory is made again by the inode-items class, not dropped */
	if (dir == BTRFS_FIRST_FREE_OBJECTID || dir == child) {
		r->left++;
		return 0;
	}
	if ((ret = names_parent_missing(r, root, dir)) <= 0) {
		r->left += ret == 0;   /* it holds entries: a directory whose inode item is damaged */
		return ret;
	}
	if ((ret = trans_get_root(r->t, root, &rp)))
		return ret;
	if (!(v = calloc(MAX_NAMES, sizeof(*v))))
		return -ENOMEM;
	if ((n = names_in(r, &rp, dir, child, v)) == -E2BIG) {
		r->left++;
		n = 0;
	}
	for (int i = 0; i < n && (ret = link_remove(r, root, &v[i].key, dir, v[i].name, v[i].len)) == 0; i++)
		if (r->changes++ < SAY_MAX)
			repair_say(r, "root %" PRIu64 " inode %" PRIu64 ": %s into parent %" PRIu64 " removed (no such "
				   "directory)", root, child, v[i].key.type == BTRFS_INODE_REF_KEY ? "inode ref" :
				   "inode extref", dir);
	free(v);
	if (n < 0 || (ret && ret != -ENOENT))
		return n < 0 ? n : ret;
	/* its link count from the names left, or /lost+found when none is */
	return n ? repair_inode_recount(r, root, child, PR_INODE_NLINK) : 0;
}
