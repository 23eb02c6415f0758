// SPDX-License-Identifier: GPL-2.0-only
/* The stray-items repair class: items of a subvolume tree that nothing
 * reads are deleted, in one transaction: items of a key type no subvolume
 * tree holds (the kernel ignores them), the deprecated free-inode cache
 * (its inode, extents and free-space items, as btrfs check --repair and
 * btrfs rescue clear-ino-cache remove them), and file extents of device,
 * fifo and socket inodes (the kernel never reads them; a directory's are
 * left: a directory's mode is as likely the damage). The check runs again
 * after it, so the extents those file extents used lose their references
 * in the extent-refs class. Items of a global tree of a key type that tree
 * does not hold are deleted too; and malformed name items (refs, dir items,
 * dir indexes, xattrs: their mirrors give them back in the names class). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "check/key_types.h"
#include "check/repair.h"
#include "common/grow.h"
#include <btk/item_check.h>
#include <btk/trans.h>
#include <btk/walk.h>

#define SAY_MAX 100

struct stray {
	uint64_t root;
	struct btrfs_key key;
	const char *why;
};

struct stray_scan {
	struct fs_info *fs;
	struct stray *v;
	size_t n, cap;
	uint64_t root;
	uint64_t ino;       /* the last inode item seen */
	uint32_t mode;
};

static int add_stray(struct stray_scan *s, const struct btrfs_key *k, const char *why)
{
	struct stray *v = grow_array(s->v, &s->cap, s->n, sizeof(*v), 64);

	if (!v)
		return -ENOMEM;
	s->v = v;
	s->v[s->n++] = (struct stray){ s->root, *k, why };
	return 0;
}

static bool special_mode(uint32_t mode)
{
	return S_ISCHR(mode) || S_ISBLK(mode) || S_ISFIFO(mode) || S_ISSOCK(mode);
}

static bool names_type(uint8_t type)
{
	return type == BTRFS_INODE_REF_KEY || type == BTRFS_INODE_EXTREF_KEY || type == BTRFS_DIR_ITEM_KEY ||
	       type == BTRFS_DIR_INDEX_KEY || type == BTRFS_XATTR_ITEM_KEY;
}

/* A name item the kernel refuses the leaf for: its entries do not fit it,
 * a name or data length is out of range, or a dir entry's location key is of
 * neither an inode nor a subvolume. What it says is lost with it; the names
 * class makes it again from its mirrors (dir item, dir index, inode ref)
 * after, as btrfs check --repair does with such a dir index. (A wrong entry
 * type is the names class's, the other fields of a location key the
 * item-fields class's.) NULL: fine. */
static const char *malformed_name_item(const struct fs_info *fs, const struct btrfs_key *k, const uint8_t *d,
				       uint32_t size)
{
	struct item_view v = item_view_of(d, size);
	struct item_verdict vd;
	struct item_entry e;
	uint32_t off = 0;

	if (item_check_fs(fs, k, d, size, &vd) && vd.fault != ITEM_ENTRY_TYPE && vd.fault != ITEM_UNKNOWN_BITS)
		return vd.why;
	while ((k->type == BTRFS_DIR_ITEM_KEY || k->type == BTRFS_DIR_INDEX_KEY) &&
	       item_entry_next(k->type, &v, &off, &e) == 1) {
		struct btrfs_key loc;
		key_from_disk(&loc, dir_item_location_ptr(e.hdr));
		if (loc.type != BTRFS_INODE_ITEM_KEY && loc.type != BTRFS_ROOT_ITEM_KEY)
			return "dir entry location is neither an inode nor a subvolume";
	}
	return NULL;
}

static int scan_item(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct stray_scan *s = arg;
	struct item_view v = item_view_of(d, size);
	const char *why;

	if (!key_type_in_subvolume(k->type))
		return add_stray(s, k, "a key type no subvolume tree holds");
	if (names_type(k->type) && (why = malformed_name_item(s->fs, k, d, size)))
		return add_stray(s, k, why);
	if (k->objectid == BTRFS_FREE_INO_OBJECTID || k->objectid == BTRFS_FREE_SPACE_OBJECTID)
		return add_stray(s, k, "the deprecated free-inode cache");
	if (k->type == BTRFS_INODE_ITEM_KEY && item_view_has_fixed(&v, k->type)) {
		s->ino = k->objectid;
		s->mode = inode_mode(d);
	} else if (k->type == BTRFS_EXTENT_DATA_KEY && k->objectid == s->ino && special_mode(s->mode)) {
		return add_stray(s, k, "a file extent of a device, fifo or socket inode");
	}
	return 0;
}

static int scan_tree(void *arg, const struct tree_root_ptr *root, const uint8_t *item, uint32_t size)
{
	struct stray_scan *s = arg;

	(void)item, (void)size;
	s->root = root->objectid;
	s->ino = 0;
	return tree_each_item(s->fs, root, scan_item, s);
}

static int scan_global_item(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct stray_scan *s = arg;

	(void)d, (void)size;
	return key_type_in_tree(s->root, k->type) == 0 ? add_stray(s, k, "a key type this tree does not hold") : 0;
}

/* Items of the global trees whose key type the tree does not hold (a dev
 * extent in the extent tree): nothing reads them where they are, and btrfs
 * check's readers can stumble on them. */
static int scan_global_trees(struct repair_ctx *r, struct stray_scan *s)
{
	static const uint64_t trees[] = {
		BTRFS_ROOT_TREE_OBJECTID, BTRFS_EXTENT_TREE_OBJECTID, BTRFS_CHUNK_TREE_OBJECTID, BTRFS_DEV_TREE_OBJECTID,
		BTRFS_CSUM_TREE_OBJECTID, BTRFS_QUOTA_TREE_OBJECTID, BTRFS_UUID_TREE_OBJECTID,
		BTRFS_FREE_SPACE_TREE_OBJECTID, BTRFS_BLOCK_GROUP_TREE_OBJECTID, BTRFS_RAID_STRIPE_TREE_OBJECTID,
	};
	struct tree_root_ptr ptr;
	int ret = 0;

	for (size_t i = 0; !ret && i < sizeof(trees) / sizeof(trees[0]); i++) {
		if (trans_get_root(r->t, trees[i], &ptr) || !ptr.bytenr) {
			btk_error_clear();
			continue;   /* a tree this filesystem does not have */
		}
		s->root = trees[i];
		ret = tree_each_item(r->fs, &ptr, scan_global_item, s);
	}
	return ret;
}

int repair_stray_items(struct repair_ctx *r)
{
	struct stray_scan s = { .fs = r->fs };
	int ret = fs_each_live_subvolume(r->fs, &r->fs->tree_root, SUBVOLS_DATA_RELOC | SUBVOLS_WALKABLE, scan_tree,
					 &s);

	if (!ret)
		ret = scan_global_trees(r, &s);

	for (size_t i = 0; !ret && i < s.n; i++) {
		const struct stray *st = &s.v[i];
		ret = trans_delete_item(r->t, st->root, &st->key);
		if (ret == -ENOENT)
			ret = 0;
		else if (!ret && r->changes++ < SAY_MAX)
			repair_say(r, "root %" PRIu64 " item (%" PRIu64 " %u %" PRIu64 ") deleted: %s", st->root,
				   st->key.objectid, st->key.type, st->key.offset, st->why);
	}
	if (!ret && r->changes > SAY_MAX)
		repair_say(r, "... %" PRIu64 " more", r->changes - SAY_MAX);
	free(s.v);
	return ret;
}
