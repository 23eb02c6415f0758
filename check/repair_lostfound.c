// SPDX-License-Identifier: GPL-2.0-only
/* Inodes without a name are linked into /lost+found of their subvolume, as
 * btrfs check does: a directory called lost+found in the subvolume's top
 * directory (made, mode 0700, when there is none), each inode named by its
 * inode number (with ".INO" appended while that name is taken). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "check/fs_check.h"
#include "check/repair_links.h"
#include <btk/csum.h>
#include <btk/tree.h>

#define LF_NAME "lost+found"
#define SAY_MAX 100

/* The inode the entry called name in dir names: 1 and *child and *type, 0 when none. */
static int lookup_name(struct repair_ctx *r, uint64_t root, uint64_t dir, const char *name, uint64_t *child,
		       uint8_t *type)
{
	struct btrfs_key key = { dir, BTRFS_DIR_ITEM_KEY, btrfs_name_hash(name, strlen(name)) };
	struct tree_root_ptr rp;
	struct tree_path path;
	struct link_entry e;
	uint32_t size, off = 0;
	const uint8_t *d;
	int ret = trans_get_root(r->t, root, &rp), found = 0;

	if (ret)
		return ret;
	tree_path_init(&path);
	ret = tree_search(r->fs, &rp, &key, &path);
	if (ret == 0) {
		struct btrfs_key k;
		tree_item_key(&path, &k);
		d = tree_item_data(&path, &size);
		if (key_compare(&k, &key) == 0)
			while (!found && link_entry_next(BTRFS_DIR_ITEM_KEY, d, size, &off, &e))
				if (e.len == strlen(name) && !memcmp(e.name, name, e.len)) {
					*child = e.loc.objectid;
					*type = e.type;
					found = 1;
				}
	}
	tree_path_release(r->fs, &path);
	return ret < 0 ? ret : found;
}

/* Add size_delta to the inode's size and, with nlink >= 0, set its nlink. */
static int update_inode(struct repair_ctx *r, uint64_t root, uint64_t ino, int64_t size_delta, int64_t nlink)
{
	struct tree_path path;
	uint8_t *item;
	int ret = link_inode_for_update(r, root, ino, &item, &path);

	if (!ret) {
		inode_set_size(item, inode_size(item) + (uint64_t)size_delta);
		if (nlink >= 0)
			inode_set_nlink(item, (uint32_t)nlink);
	}
	tree_path_release(r->fs, &path);
	return ret;
}

/* One past the highest inode number of the tree. */
static int next_free_ino(struct repair_ctx *r, uint64_t root, uint64_t *ino)
{
	struct btrfs_key max = { BTRFS_LAST_FREE_OBJECTID, 255, (uint64_t)-1 }, found;
	int ret = link_last_key(r, root, &max, &found);

	*ino = BTRFS_FIRST_FREE_OBJECTID + 1;
	if (ret == 1 && found.objectid >= BTRFS_FIRST_FREE_OBJECTID)
		*ino = found.objectid + 1;
	return ret < 0 ? ret : 0;
}

/* Link child (of file type ftype) into dir as name: ref, dir item, dir index, dir size. */
static int add_link(struct repair_ctx *r, uint64_t root, uint64_t dir, uint64_t child, const char *name,
		    uint8_t ftype)
{
	uint16_t len = (uint16_t)strlen(name);
	uint64_t index;
	int ret;

	if ((ret = link_next_index(r, root, dir, &index)) ||
	    (ret = link_add_ref(r, root, child, dir, index, (const uint8_t *)name, len)) ||
	    (ret = link_add_dir_item(r, root, dir, (const uint8_t *)name, len, child, ftype)) ||
	    (ret = link_add_dir_index(r, root, dir, index, (const uint8_t *)name, len, child, ftype)))
		return ret;
	return update_inode(r, root, dir, 2 * (int64_t)len, -1);
}

static int make_lostfound(struct repair_ctx *r, uint64_t root, uint64_t *lf)
{
	struct btrfs_key key = { 0, BTRFS_INODE_ITEM_KEY, 0 };
	uint8_t item[sizeof(struct btrfs_inode_item)] = { 0 };
	int ret = next_free_ino(r, root, lf);

	if (ret)
		return ret;
	key.objectid = *lf;
	link_init_inode_item(r, item, S_IFDIR | 0700, 1);
	if ((ret = trans_insert_item(r->t, root, &key, item, sizeof(item))))
		return ret;
	r->changes++;
	repair_say(r, "root %" PRIu64 ": made /" LF_NAME " (inode %" PRIu64 ")", root, *lf);
	return add_link(r, root, BTRFS_FIRST_FREE_OBJECTID, *lf, LF_NAME, BTRFS_FT_DIR);
}

/* The inode of the subvolume's /lost+found: found, or made. */
static int lostfound_dir(struct repair_ctx *r, uint64_t root, uint64_t *lf)
{
	uint32_t mode = 0;
	uint8_t type;
	int ret = lookup_name(r, root, BTRFS_FIRST_FREE_OBJECTID, LF_NAME, lf, &type);

	if (ret < 0)
		return ret;
	if (ret == 0)
		return make_lostfound(r, root, lf);
	ret = link_inode_mode(r, root, *lf, &mode);
	if (ret < 0)
		return ret;
	if (ret == 0 || !S_ISDIR(mode))
		return fs_error(r->fs, -EEXIST, "root %" PRIu64 ": /" LF_NAME " is not a directory", root);
	return 0;
}

int lostfound_link(struct repair_ctx *r, uint64_t root, uint64_t ino)
{
	char name[256];
	uint64_t lf, other;
	uint32_t mode = 0;
	uint8_t type;
	size_t len;
	int ret = link_inode_mode(r, root, ino, &mode);

	if (ret <= 0) {
		r->left += ret == 0;
		return ret;
	}
	if ((ret = lostfound_dir(r, root, &lf)))
		return ret;
	len = (size_t)snprintf(name, sizeof(name), "%" PRIu64, ino);
	while ((ret = lookup_name(r, root, lf, name, &other, &type)) == 1) {
		if (len + 21 >= sizeof(name))
			return fs_error(r->fs, -EEXIST, "root %" PRIu64 ": no free name for inode %" PRIu64 " in /"
					LF_NAME, root, ino);
		len += (size_t)snprintf(name + len, sizeof(name) - len, ".%" PRIu64, ino);
	}
	if (ret < 0)
		return ret;
	type = mode_to_ftype(mode);
	if ((ret = add_link(r, root, lf, ino, name, type == BTRFS_FT_UNKNOWN ? BTRFS_FT_REG_FILE : type)) ||
	    (ret = update_inode(r, root, ino, 0, 1)))
		return ret;
	if (r->changes++ < SAY_MAX)
		repair_say(r, "root %" PRIu64 " inode %" PRIu64 ": linked as /" LF_NAME "/%s", root, ino, name);
	return 0;
}

int lostfound_link_subvol(struct repair_ctx *r, uint64_t subvol, uint64_t *dir, uint64_t *index, char *name,
			  uint16_t *len)
{
	const uint64_t root = BTRFS_FS_TREE_OBJECTID;
	uint64_t other;
	uint8_t type;
	size_t n;
	int ret = lostfound_dir(r, root, dir);

	if (ret)
		return ret;
	n = (size_t)snprintf(name, 256, "subvol-%" PRIu64, subvol);
	while ((ret = lookup_name(r, root, *dir, name, &other, &type)) == 1) {
		if (n + 21 >= 256)
			return fs_error(r->fs, -EEXIST, "no free name for subvolume %" PRIu64 " in /" LF_NAME, subvol);
		n += (size_t)snprintf(name + n, 256 - n, ".%" PRIu64, subvol);
	}
	*len = (uint16_t)n;
	if (ret < 0 || (ret = link_next_index(r, root, *dir, index)) ||
	    (ret = link_add_subvol_entry(r, root, *dir, *index, (const uint8_t *)name, *len, subvol)) ||
	    (ret = link_add_subvol_entry(r, root, *dir, 0, (const uint8_t *)name, *len, subvol)))
		return ret;
	return update_inode(r, root, *dir, 2 * (int64_t)*len, -1);
}
