// SPDX-License-Identifier: LGPL-2.1-or-later
/* Inode paths from the name back references (btk/inode_path.h). */
#include <errno.h>
#include <string.h>

#include <btk/inode_path.h>
#include <btk/item_check.h>
#include <btk/tree.h>

/* The first name of ino: its parent directory and name (pointing into the
 * leaf held by path). 0, -ENOENT when it has none, -errno. */
static int first_name(struct fs_info *fs, const struct tree_root_ptr *root, uint64_t ino, struct tree_path *path,
		      uint64_t *parent, const char **name, uint32_t *name_len)
{
	struct btrfs_key key = { ino, BTRFS_INODE_REF_KEY, 0 };
	const uint8_t *d;
	struct item_view v;
	struct item_entry e;
	uint32_t size, off = 0;
	int ret = tree_search(fs, root, &key, path);

	if (ret)
		return ret < 0 ? ret : -ENOENT;
	tree_item_key(path, &key);
	if (key.objectid != ino || (key.type != BTRFS_INODE_REF_KEY && key.type != BTRFS_INODE_EXTREF_KEY))
		return -ENOENT;
	d = tree_item_data(path, &size);
	v = item_view_of(d, size);
	if (item_entry_next(key.type, &v, &off, &e) != 1)
		return -ENOENT;   /* empty, or its first name runs past the item */
	*parent = key.type == BTRFS_INODE_REF_KEY ? key.offset : inode_extref_parent_objectid(e.hdr);
	*name_len = e.name_len;
	*name = (const char *)e.name;
	return 0;
}

/* Put s (n bytes) before out[*pos]; false when it does not fit. */
static bool prepend(char *out, size_t *pos, const char *s, size_t n)
{
	if (n > *pos)
		return false;
	*pos -= n;
	memcpy(out + *pos, s, n);
	return true;
}

int inode_path(struct fs_info *fs, const struct tree_root_ptr *root, uint64_t ino, char *out, size_t len)
{
	const size_t reserve = 3;   /* room always kept for "?" or "..." */
	const char *mark = "?";
	size_t pos;
	int ret = 1;                /* the depth bound ends a loop of names: partial */

	if (len < 8)
		return -EINVAL;
	pos = len - 1;
	out[pos] = 0;
	for (unsigned depth = 0; depth < INODE_PATH_MAX_DEPTH; depth++) {
		struct tree_path path;
		const char *name;
		uint32_t name_len;
		uint64_t parent;

		if (ino == BTRFS_FIRST_FREE_OBJECTID) {   /* the top directory */
			ret = 0;
			break;
		}
		tree_path_init(&path);
		ret = first_name(fs, root, ino, &path, &parent, &name, &name_len);
		if (!ret && parent == ino)   /* a directory that is its own parent */
			ret = -ENOENT;
		if (!ret && (size_t)name_len + 1 + reserve > pos) {
			mark = "...";
			ret = -ENOSPC;
		}
		if (!ret) {
			prepend(out, &pos, name, name_len);
			prepend(out, &pos, "/", 1);
		}
		tree_path_release(fs, &path);
		if (ret)
			break;
		ino = parent;
		ret = 1;
	}
	if (ret) {
		prepend(out, &pos, mark, strlen(mark));
		if (ret == -ENOENT || ret == -ENOSPC)
			ret = 1;
	} else if (pos == len - 1) {
		prepend(out, &pos, "/", 1);
	}
	memmove(out, out + pos, len - pos);
	return ret;
}
