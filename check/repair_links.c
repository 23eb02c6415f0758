// SPDX-License-Identifier: GPL-2.0-only
/* Adding and removing single names in dir items, dir indexes, xattr items,
 * inode refs and extrefs, inside a repair's transaction. An item is read
 * whole, rebuilt without (or with) the one entry, and written back. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check/repair_links.h"
#include <btk/csum.h>
#include <btk/item_check.h>
#include <btk/tree.h>

static bool is_ref_type(uint8_t type)
{
	return type == BTRFS_INODE_REF_KEY || type == BTRFS_INODE_EXTREF_KEY;
}

bool link_entry_next(uint8_t type, const uint8_t *d, uint32_t size, uint32_t *off, struct link_entry *e)
{
	struct item_view v = item_view_of(d, size);
	bool ref = type == BTRFS_INODE_REF_KEY || type == BTRFS_INODE_EXTREF_KEY;
	struct item_entry ent;

	/* (dir items, dir indexes and xattrs share the entry layout) */
	if (item_entry_next(ref ? type : BTRFS_DIR_ITEM_KEY, &v, off, &ent) != 1)
		return false;
	*e = (struct link_entry){ .off = ent.off, .size = ent.len, .name = ent.name, .len = ent.name_len };
	if (type == BTRFS_INODE_REF_KEY) {
		e->index = inode_ref_index(ent.hdr);
	} else if (type == BTRFS_INODE_EXTREF_KEY) {
		e->index = inode_extref_index(ent.hdr);
		e->parent = inode_extref_parent_objectid(ent.hdr);
	} else {
		e->type = dir_item_type(ent.hdr);
		key_from_disk(&e->loc, dir_item_location_ptr(ent.hdr));
	}
	return true;
}

/* Read the item at key into a new buffer of nodesize bytes: 0, -ENOENT, -errno. */
static int read_item(struct repair_ctx *r, uint64_t root, const struct btrfs_key *key, uint8_t **buf,
		     uint32_t *size)
{
	struct tree_root_ptr rp;
	int ret = trans_get_root(r->t, root, &rp);

	*buf = NULL;
	if (ret)
		return ret;
	*buf = malloc(r->fs->nodesize);
	if (!*buf)
		return -ENOMEM;
	*size = r->fs->nodesize;
	ret = tree_lookup(r->fs, &rp, key, *buf, size);
	if (!ret && *size > r->fs->nodesize)
		ret = fs_error(r->fs, -EUCLEAN, "item (%" PRIu64 " %u %" PRIu64 ") larger than a block", key->objectid,
			       key->type, key->offset);
	if (ret) {
		free(*buf);
		*buf = NULL;
	}
	return ret;
}

/* Append entry (n bytes) to the item at key, or create the item with it. */
int link_append(struct repair_ctx *r, uint64_t root, const struct btrfs_key *key, const uint8_t *entry,
			uint32_t n)
{
	uint8_t *buf;
	uint32_t size;
	int ret = read_item(r, root, key, &buf, &size);

	if (ret == -ENOENT)
		return trans_insert_item(r->t, root, key, entry, n);
	if (ret)
		return ret;
	if (size + n > r->fs->nodesize / 2)
		ret = fs_error(r->fs, -ENOSPC, "item (%" PRIu64 " %u %" PRIu64 ") would grow too large",
			       key->objectid, key->type, key->offset);
	else {
		uint8_t *grown = realloc(buf, size + n);
		if (!grown)
			ret = -ENOMEM;
		else {
			buf = grown;
			memcpy(buf + size, entry, n);
			ret = trans_update_item(r->t, root, key, buf, size + n);
		}
	}
	free(buf);
	return ret;
}

static uint32_t make_dir_entry(uint8_t *e, const struct btrfs_key *loc, uint64_t transid, const uint8_t *name,
			       uint16_t len, uint8_t type)
{
	memset(e, 0, sizeof(struct btrfs_dir_item));
	key_to_disk(dir_item_location_ptr(e), loc);
	dir_item_set_transid(e, transid);
	dir_item_set_data_len(e, 0);
	dir_item_set_name_len(e, len);
	dir_item_set_type(e, type);
	memcpy(e + sizeof(struct btrfs_dir_item), name, len);
	return sizeof(struct btrfs_dir_item) + len;
}

#define DIR_ENTRY_MAX (sizeof(struct btrfs_dir_item) + 256)

/* The entry naming inode `child` (its bytes in e, DIR_ENTRY_MAX long), or -EINVAL for a name
 * no directory may hold. The dir item and the dir index of a name carry the same entry. */
static int inode_dir_entry(struct repair_ctx *r, const uint8_t *name, uint16_t len, uint64_t child, uint8_t type,
			   uint8_t *e)
{
	struct btrfs_key loc = { child, BTRFS_INODE_ITEM_KEY, 0 };

	if (len == 0 || len > BTRFS_NAME_MAX)
		return -EINVAL;
	return (int)make_dir_entry(e, &loc, trans_transid(r->t), name, len, type);
}

int link_add_subvol_entry(struct repair_ctx *r, uint64_t root, uint64_t dir, uint64_t index, const uint8_t *name,
			  uint16_t len, uint64_t subvol)
{
	struct btrfs_key loc = { subvol, BTRFS_ROOT_ITEM_KEY, (uint64_t)-1 };
	struct btrfs_key key = { dir, index ? BTRFS_DIR_INDEX_KEY : BTRFS_DIR_ITEM_KEY,
				 index ? index : btrfs_name_hash(name, len) };
	uint8_t e[DIR_ENTRY_MAX];

	if (len == 0 || len > BTRFS_NAME_MAX)
		return -EINVAL;
	len = (uint16_t)make_dir_entry(e, &loc, trans_transid(r->t), name, len, BTRFS_FT_DIR);
	if (index)
		return trans_insert_item(r->t, root, &key, e, len);
	return link_append(r, root, &key, e, len);
}

int link_add_dir_item(struct repair_ctx *r, uint64_t root, uint64_t dir, const uint8_t *name, uint16_t len,
		      uint64_t child, uint8_t type)
{
	struct btrfs_key key = { dir, BTRFS_DIR_ITEM_KEY, btrfs_name_hash(name, len) };
	uint8_t e[DIR_ENTRY_MAX];
	int n = inode_dir_entry(r, name, len, child, type, e);

	/* a dir item holds every name of its hash: append to it */
	return n < 0 ? n : link_append(r, root, &key, e, (uint32_t)n);
}

int link_add_dir_index(struct repair_ctx *r, uint64_t root, uint64_t dir, uint64_t index, const uint8_t *name,
		       uint16_t len, uint64_t child, uint8_t type)
{
	struct btrfs_key key = { dir, BTRFS_DIR_INDEX_KEY, index };
	uint8_t e[DIR_ENTRY_MAX];
	int n = inode_dir_entry(r, name, len, child, type, e);

	return n < 0 ? n : trans_insert_item(r->t, root, &key, e, (uint32_t)n);
}

int link_add_ref(struct repair_ctx *r, uint64_t root, uint64_t child, uint64_t dir, uint64_t index,
		 const uint8_t *name, uint16_t len)
{
	struct btrfs_key key = { child, BTRFS_INODE_REF_KEY, dir };
	uint8_t e[sizeof(struct btrfs_inode_ref) + 256];
	int ret;

	if (len == 0 || len > BTRFS_NAME_MAX)
		return -EINVAL;
	inode_ref_set_index(e, index);
	inode_ref_set_name_len(e, len);
	memcpy(e + sizeof(struct btrfs_inode_ref), name, len);
	ret = link_append(r, root, &key, e, sizeof(struct btrfs_inode_ref) + len);
	/* a ref item full of names: the name goes into an extref, as the kernel puts it */
	if (ret == -ENOSPC && (r->fs->incompat & BTRFS_FEATURE_INCOMPAT_EXTENDED_IREF) && child != dir)
		ret = link_add_extref(r, root, child, dir, index, name, len);
	return ret;
}

int link_add_extref(struct repair_ctx *r, uint64_t root, uint64_t child, uint64_t dir, uint64_t index,
		    const uint8_t *name, uint16_t len)
{
	struct btrfs_key key = { child, BTRFS_INODE_EXTREF_KEY, btrfs_extref_hash(dir, name, len) };
	uint8_t e[sizeof(struct btrfs_inode_extref) + 256];

	if (len == 0 || len > BTRFS_NAME_MAX)
		return -EINVAL;
	inode_extref_set_parent_objectid(e, dir);
	inode_extref_set_index(e, index);
	inode_extref_set_name_len(e, len);
	memcpy(e + sizeof(struct btrfs_inode_extref), name, len);
	return link_append(r, root, &key, e, sizeof(struct btrfs_inode_extref) + len);
}

/* The entry called name in buf (of parent dir, for extrefs): 1 and *e, or 0. */
static int find_entry(uint8_t type, const uint8_t *buf, uint32_t size, uint64_t dir, const uint8_t *name,
		      uint16_t len, struct link_entry *e)
{
	uint32_t off = 0;

	while (link_entry_next(type, buf, size, &off, e))
		if (e->len == len && !memcmp(e->name, name, len) &&
		    (type != BTRFS_INODE_EXTREF_KEY || e->parent == dir))
			return 1;
	return 0;
}

/* The dir entry called name that names inode child, when two entries of
 * one item share the name (a duplicate): 1 and *e, or 0. */
static int find_dir_entry_of(uint8_t type, const uint8_t *buf, uint32_t size, const uint8_t *name, uint16_t len,
			     uint64_t child, struct link_entry *e)
{
	uint32_t off = 0;

	if (type != BTRFS_DIR_ITEM_KEY && type != BTRFS_DIR_INDEX_KEY)
		return 0;
	while (link_entry_next(type, buf, size, &off, e))
		if (e->len == len && !memcmp(e->name, name, len) && e->loc.type == BTRFS_INODE_ITEM_KEY &&
		    e->loc.objectid == child)
			return 1;
	return 0;
}

int link_remove(struct repair_ctx *r, uint64_t root, const struct btrfs_key *key, uint64_t dir,
		const uint8_t *name, uint16_t len)
{
	return link_remove_of(r, root, key, dir, name, len, 0);
}

int link_remove_of(struct repair_ctx *r, uint64_t root, const struct btrfs_key *key, uint64_t dir,
		   const uint8_t *name, uint16_t len, uint64_t child)
{
	struct link_entry e;
	uint8_t *buf;
	uint32_t size;
	int ret = read_item(r, root, key, &buf, &size);

	if (ret)
		return ret;
	if (!(child && find_dir_entry_of(key->type, buf, size, name, len, child, &e)) &&
	    !find_entry(key->type, buf, size, dir, name, len, &e))
		ret = -ENOENT;
	else if (e.size == size)
		ret = trans_delete_item(r->t, root, key);
	else {
		memmove(buf + e.off, buf + e.off + e.size, size - e.off - e.size);
		ret = trans_update_item(r->t, root, key, buf, size - e.size);
	}
	free(buf);
	return ret;
}

int link_set_ref_index(struct repair_ctx *r, uint64_t root, const struct btrfs_key *key, uint64_t dir,
		       const uint8_t *name, uint16_t len, uint64_t index)
{
	struct link_entry e;
	uint8_t *buf;
	uint32_t size;
	int ret;

	if (!is_ref_type(key->type))
		return -EINVAL;
	ret = read_item(r, root, key, &buf, &size);
	if (ret)
		return ret;
	if (!find_entry(key->type, buf, size, dir, name, len, &e))
		ret = -ENOENT;
	else {
		if (key->type == BTRFS_INODE_REF_KEY)
			inode_ref_set_index(buf + e.off, index);
		else
			inode_extref_set_index(buf + e.off, index);
		ret = trans_update_item(r->t, root, key, buf, size);
	}
	free(buf);
	return ret;
}

int link_last_key(struct repair_ctx *r, uint64_t root, const struct btrfs_key *max, struct btrfs_key *found)
{
	struct tree_root_ptr rp;
	struct tree_path path;
	int ret = trans_get_root(r->t, root, &rp);

	if (ret)
		return ret;
	tree_path_init(&path);
	ret = tree_search_le(r->fs, &rp, max, &path);
	if (ret == 0)
		tree_item_key(&path, found);
	tree_path_release(r->fs, &path);
	return ret < 0 ? ret : !ret;
}

int link_next_index(struct repair_ctx *r, uint64_t root, uint64_t dir, uint64_t *index)
{
	struct btrfs_key max = { dir, BTRFS_DIR_INDEX_KEY, (uint64_t)-1 }, found;
	int ret = link_last_key(r, root, &max, &found);

	*index = 2;
	if (ret == 1 && found.objectid == dir && found.type == BTRFS_DIR_INDEX_KEY && found.offset >= 2)
		*index = found.offset + 1;
	return ret < 0 ? ret : 0;
}

int link_inode_for_update(struct repair_ctx *r, uint64_t root, uint64_t ino, uint8_t **item,
			  struct tree_path *path)
{
	struct btrfs_key key = { ino, BTRFS_INODE_ITEM_KEY, 0 };
	uint32_t size;
	int ret;

	tree_path_init(path);
	ret = trans_item_for_update(r->t, root, &key, item, &size, path);
	if (ret == 0 && !item_has_fixed(BTRFS_INODE_ITEM_KEY, size))
		ret = fs_error(r->fs, -EUCLEAN, "root %" PRIu64 " inode %" PRIu64 ": inode item is %u bytes", root, ino,
			       size);
	return ret;
}

int link_has_ref(struct repair_ctx *r, uint64_t root, uint64_t ino)
{
	struct btrfs_key key = { ino, BTRFS_INODE_REF_KEY, 0 }, k;
	struct tree_root_ptr rp;
	struct tree_path path;
	int ret = trans_get_root(r->t, root, &rp);

	if (ret)
		return ret;
	tree_path_init(&path);
	ret = tree_search(r->fs, &rp, &key, &path);
	if (ret == 0) {
		tree_item_key(&path, &k);
		ret = k.objectid == ino && (k.type == BTRFS_INODE_REF_KEY || k.type == BTRFS_INODE_EXTREF_KEY);
	} else if (ret == 1) {
		ret = 0;
	}
	tree_path_release(r->fs, &path);
	return ret;
}

int link_inode_mode(struct repair_ctx *r, uint64_t root, uint64_t ino, uint32_t *mode)
{
	struct btrfs_key key = { ino, BTRFS_INODE_ITEM_KEY, 0 };
	uint8_t buf[sizeof(struct btrfs_inode_item)];
	uint32_t size = sizeof(buf);
	struct tree_root_ptr rp;
	struct item_view v;
	int ret = trans_get_root(r->t, root, &rp);

	if (!ret)
		ret = tree_lookup(r->fs, &rp, &key, buf, &size);
	if (ret == -ENOENT)
		return 0;
	if (ret)
		return ret;
	v = item_view_copied(buf, sizeof(buf), size);
	if (!item_view_has_fixed(&v, key.type))
		return 0;
	*mode = inode_mode(buf);
	return 1;
}

void link_init_inode_item(struct repair_ctx *r, uint8_t *item, uint32_t mode, uint32_t nlink)
{
	uint64_t now = (uint64_t)time(NULL);

	inode_set_generation(item, trans_transid(r->t));
	inode_set_transid(item, trans_transid(r->t));
	inode_set_nlink(item, nlink);
	inode_set_mode(item, mode);
	timespec_set_sec(inode_atime_ptr(item), now);
	timespec_set_sec(inode_ctime_ptr(item), now);
	timespec_set_sec(inode_mtime_ptr(item), now);
	timespec_set_sec(inode_otime_ptr(item), now);
}
