// SPDX-License-Identifier: GPL-2.0-only
/* The item-fields repair class: fields and key parts whose only valid value
 * the format fixes, set to it. The kernel's tree checker refuses a leaf
 * holding any of them (so the whole leaf is unreadable), and btrfs check
 * 7.3 does not look at most of them:
 *   - an inode item's key offset (always 0): the item is keyed again, unless
 *     an inode item with offset 0 is already there (then it is left);
 *   - the location key of a dir entry naming an inode (offset 0) and of an
 *     xattr (all zero); the type of an xattr (xattr) and of an entry naming a
 *     subvolume (directory);
 *   - a dev extent's chunk tree (3) and chunk objectid (256);
 *   - a block group item's chunk objectid (256);
 *   - the location of a dir entry naming a subvolume by an id no subvolume
 *     can have: the subvolume the parent's root ref of that directory and
 *     name (and index, for a dir index) links there, when exactly one does;
 *   - a root item's key offset of -1 (the kernel's search for a tree's
 *     newest root item would find it exactly): keyed again at 0, or for a
 *     snapshot (it has a parent uuid) at its otransid, as the kernel keys it.
 *   - an inode's mode whose file type its own items contradict with items of
 *     one kind (inode-type-items): a directory with file extents and no
 *     entries becomes a file (a symlink when its dir index says so), a
 *     non-directory with entries and no extents a directory, a symlink with
 *     regular extents a regular file, a subvolume's top directory a
 *     directory; permissions kept. The check runs again after, so the names and inodes classes
 *     then see the type that the inode's items and entries agree on.
 * Other malformed items are left to the classes of their kind. The check
 * runs again after this class (check/repair.c), so what is still malformed
 * keeps blocking the classes that trust item contents. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <uuid/uuid.h>

#include "check/fs_check.h"
#include "check/repair.h"
#include "common/grow.h"
#include <btk/item_check.h>
#include <btk/key.h>
#include <btk/trans.h>
#include <btk/tree.h>
#include <btk/walk.h>

enum mend_kind {
	MEND_INODE_KEY,      /* re-key an inode item to offset 0 */
	MEND_DIR_LOCATIONS,  /* location keys of a dir item, dir index or xattr */
	MEND_DEV_EXTENT,     /* chunk tree and chunk objectid */
	MEND_BLOCK_GROUP,    /* chunk objectid */
	MEND_ROOT_KEY,       /* re-key a root item from offset -1 */
	MEND_SUBVOL_LOCATION, /* a dir entry's subvolume id, from the root refs */
	MEND_INODE_TYPE,     /* an inode's mode type, from its items (ftype) */
};

struct mend {
	uint64_t tree;
	struct btrfs_key key;
	enum mend_kind kind;
	uint8_t ftype;       /* MEND_INODE_TYPE: the type the items give */
};

/* The inode being scanned, for inode-type-items. */
struct type_scan {
	uint64_t ino, top;
	uint8_t ftype;       /* its mode's (BTRFS_FT_UNKNOWN: no inode item seen) */
	bool entries, extents, regular;
};

struct mend_scan {
	struct fs_info *fs;
	struct mend *v;
	size_t n, cap;
	uint64_t tree;
	bool types;          /* look for inode-type-items */
	struct type_scan ty;
};

static int add_mend(struct mend_scan *s, const struct btrfs_key *k, enum mend_kind kind)
{
	struct mend *v = grow_array(s->v, &s->cap, s->n, sizeof(*v), 16);

	if (!v)
		return -ENOMEM;
	s->v = v;
	s->v[s->n++] = (struct mend){ s->tree, *k, kind, BTRFS_FT_UNKNOWN };
	return 0;
}

/* The location key an entry of an item of key type `type` must have, from
 * the one it has: true (and *want) when it breaks a rule that fixes it. */
static bool location_mended(uint8_t type, const struct btrfs_key *loc, struct btrfs_key *want)
{
	*want = *loc;
	if (type == BTRFS_XATTR_ITEM_KEY)
		*want = (struct btrfs_key){ 0, 0, 0 };
	else if (loc->type == BTRFS_INODE_ITEM_KEY)
		want->offset = 0;
	return want->objectid != loc->objectid || want->type != loc->type || want->offset != loc->offset;
}

static int found_item(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	(void)k, (void)d, (void)size;
	*(bool *)arg = true;
	return 1;
}

/* Whether the root tree has a root item for tree id. */
static bool root_exists(struct fs_info *fs, uint64_t id)
{
	struct btrfs_key min = { id, BTRFS_ROOT_ITEM_KEY, 0 }, max = { id, BTRFS_ROOT_ITEM_KEY, (uint64_t)-1 };
	bool found = false;

	if (tree_each_item_in(fs, &fs->tree_root, &min, &max, found_item, &found) < 0)
		btk_error_clear();
	return found;
}

/* The file type an entry of an item of key type `type` must have whatever
 * it says (an xattr's; a subvolume that exists is a directory: an inode's
 * entry damaged into a subvolume's is the names class's), else
 * BTRFS_FT_UNKNOWN. */
static uint8_t entry_type_fixed(struct fs_info *fs, uint8_t type, const struct btrfs_key *loc)
{
	if (type == BTRFS_XATTR_ITEM_KEY)
		return BTRFS_FT_XATTR;
	return loc->type == BTRFS_ROOT_ITEM_KEY && root_exists(fs, loc->objectid) ? BTRFS_FT_DIR : BTRFS_FT_UNKNOWN;
}

/* Whether any entry of a dir item, dir index or xattr item has a location
 * (or a type that the location or the item's kind fixes) to mend; with
 * `apply`, the entries are mended in place (data writable). */
static bool dir_locations(struct fs_info *fs, uint8_t type, uint8_t *data, uint32_t size, bool apply)
{
	struct item_view v = item_view_of(data, size);
	struct item_entry e;
	uint32_t off = 0;
	bool any = false;

	while (item_entry_next(type, &v, &off, &e) == 1) {
		struct btrfs_key loc, want;
		uint8_t ftype, have = dir_item_type(e.hdr);

		key_from_disk(&loc, dir_item_location_ptr(e.hdr));
		ftype = have == (type == BTRFS_XATTR_ITEM_KEY ? BTRFS_FT_XATTR : BTRFS_FT_DIR) ? BTRFS_FT_UNKNOWN
			: entry_type_fixed(fs, type, &loc);
		if (ftype != BTRFS_FT_UNKNOWN && (have & ~BTRFS_FT_ENCRYPTED) != ftype) {
			any = true;
			if (apply)
				dir_item_set_type(data + e.off, ftype | (have & BTRFS_FT_ENCRYPTED));
		}
		if (!location_mended(type, &loc, &want))
			continue;
		any = true;
		if (apply)
			key_to_disk(dir_item_location_ptr(data + e.off), &want);
	}
	return any;
}

/* A subvolume location whose id the kernel's tree checker refuses (a
 * subvolume is 5 or in [256, 2^48)). */
static bool subvol_location_bad(const struct btrfs_key *loc)
{
	return loc->type == BTRFS_ROOT_ITEM_KEY && loc->objectid != BTRFS_FS_TREE_OBJECTID &&
	       (loc->objectid < BTRFS_FIRST_FREE_OBJECTID || loc->objectid >> 48);
}

/* Whether a dir item or dir index has an entry naming a subvolume by a bad id. */
static bool has_bad_subvol_location(uint8_t type, const uint8_t *data, uint32_t size)
{
	struct item_view v = item_view_of(data, size);
	struct item_entry e;
	uint32_t off = 0;

	while (item_entry_next(type, &v, &off, &e) == 1) {
		struct btrfs_key loc;

		key_from_disk(&loc, dir_item_location_ptr(e.hdr));
		if (subvol_location_bad(&loc))
			return true;
	}
	return false;
}

/* The inode scanned last is done: note a mode its items contradict. */
static int type_scan_finish(struct mend_scan *s)
{
	struct type_scan *t = &s->ty;
	uint8_t want = inode_type_by_items(t->ftype, t->entries, t->extents, t->regular);
	struct btrfs_key k = { t->ino, BTRFS_INODE_ITEM_KEY, 0 };
	int ret = 0;

	if (t->ino == t->top)   /* a subvolume's top directory */
		want = t->ftype != BTRFS_FT_DIR && t->ftype != BTRFS_FT_UNKNOWN ? BTRFS_FT_DIR : BTRFS_FT_UNKNOWN;
	if (t->ino && want != BTRFS_FT_UNKNOWN && !(ret = add_mend(s, &k, MEND_INODE_TYPE)))
		s->v[s->n - 1].ftype = want;
	*t = (struct type_scan){ .top = t->top };
	return ret;
}

static int type_scan_item(struct mend_scan *s, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct type_scan *t = &s->ty;
	int ret;

	if (k->objectid != t->ino && (ret = type_scan_finish(s)))
		return ret;
	t->ino = k->objectid;
	if (k->type == BTRFS_INODE_ITEM_KEY && size >= sizeof(struct btrfs_inode_item))
		t->ftype = mode_to_ftype(inode_mode(d));
	t->entries |= k->type == BTRFS_DIR_ITEM_KEY || k->type == BTRFS_DIR_INDEX_KEY;
	t->extents |= k->type == BTRFS_EXTENT_DATA_KEY;
	t->regular |= k->type == BTRFS_EXTENT_DATA_KEY && size >= sizeof(struct btrfs_file_extent_item) &&
		      file_extent_type(d) != BTRFS_FILE_EXTENT_INLINE;
	return 0;
}

static int scan_subvol_item(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct mend_scan *s = arg;
	int ret;

	if (s->types && (ret = type_scan_item(s, k, d, size)))
		return ret;
	if (k->type == BTRFS_INODE_ITEM_KEY && k->offset)
		return add_mend(s, k, MEND_INODE_KEY);
	if ((k->type == BTRFS_DIR_ITEM_KEY || k->type == BTRFS_DIR_INDEX_KEY || k->type == BTRFS_XATTR_ITEM_KEY) &&
	    dir_locations(s->fs, k->type, (uint8_t *)d, size, false))
		return add_mend(s, k, MEND_DIR_LOCATIONS);
	if ((k->type == BTRFS_DIR_ITEM_KEY || k->type == BTRFS_DIR_INDEX_KEY) && has_bad_subvol_location(k->type, d, size))
		return add_mend(s, k, MEND_SUBVOL_LOCATION);
	return 0;
}

static int scan_subvol(void *arg, const struct tree_root_ptr *root, const uint8_t *item, uint32_t size)
{
	struct mend_scan *s = arg;

	int ret;

	s->tree = root->objectid;
	s->ty = (struct type_scan){ .top = BTRFS_FIRST_FREE_OBJECTID };
	if (size >= sizeof(struct btrfs_root_item) - sizeof(((struct btrfs_root_item *)0)->reserved))
		s->ty.top = root_item_root_dirid(item);
	ret = tree_each_item(s->fs, root, scan_subvol_item, s);
	if (!ret && s->types)
		ret = type_scan_finish(s);
	return ret;
}

static int scan_dev_extent(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct mend_scan *s = arg;

	if (k->type != BTRFS_DEV_EXTENT_KEY || size != sizeof(struct btrfs_dev_extent))
		return 0;
	if (dev_extent_chunk_tree(d) != BTRFS_CHUNK_TREE_OBJECTID ||
	    dev_extent_chunk_objectid(d) != BTRFS_FIRST_CHUNK_TREE_OBJECTID)
		return add_mend(s, k, MEND_DEV_EXTENT);
	return 0;
}

static int scan_block_group(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct mend_scan *s = arg;

	if (k->type == BTRFS_BLOCK_GROUP_ITEM_KEY && size == sizeof(struct btrfs_block_group_item) &&
	    block_group_chunk_objectid(d) != BTRFS_FIRST_CHUNK_TREE_OBJECTID)
		return add_mend(s, k, MEND_BLOCK_GROUP);
	return 0;
}

static int scan_global(struct repair_ctx *r, struct mend_scan *s, uint64_t tree, uint8_t type, tree_item_fn fn)
{
	struct btrfs_key min = { 0, type, 0 }, max = { (uint64_t)-1, type, (uint64_t)-1 };
	struct tree_root_ptr ptr;

	if (trans_get_root(r->t, tree, &ptr) || !ptr.bytenr) {
		btk_error_clear();
		return 0;
	}
	s->tree = tree;
	return tree_each_item_in(r->fs, &ptr, &min, &max, fn, s);
}

static int scan_root_item(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	(void)d, (void)size;
	return k->type == BTRFS_ROOT_ITEM_KEY && k->offset == (uint64_t)-1 ? add_mend(arg, k, MEND_ROOT_KEY) : 0;
}

/* The item at m->key keyed again at want (its data unchanged); 1 when an
 * item already holds that key, or the item is not of want_size (nothing
 * changed; 0 accepts any size up to a node's). */
static int rekey_item(struct repair_ctx *r, const struct mend *m, const struct btrfs_key *want, uint32_t want_size)
{
	uint8_t *item = malloc(r->fs->nodesize);
	struct tree_root_ptr root;
	uint32_t size = r->fs->nodesize;
	int ret = item ? trans_get_root(r->t, m->tree, &root) : -ENOMEM;

	if (!ret)
		ret = tree_lookup(r->fs, &root, want, item, &size);
	if (ret != -ENOENT) {
		free(item);
		return ret ? ret : 1;
	}
	btk_error_clear();
	size = r->fs->nodesize;
	ret = tree_lookup(r->fs, &root, &m->key, item, &size);
	if (!ret && want_size && size != want_size)
		ret = 1;   /* a size the item-malformed report names: not mended here */
	if (!ret)
		ret = trans_delete_item(r->t, m->tree, &m->key);
	if (!ret)
		ret = trans_insert_item(r->t, m->tree, want, item, size);
	free(item);
	return ret;
}

/* An inode item at (ino, INODE_ITEM, offset != 0) keyed again at offset 0. */
static int rekey_inode(struct repair_ctx *r, const struct mend *m)
{
	struct btrfs_key want = { m->key.objectid, BTRFS_INODE_ITEM_KEY, 0 };

	return rekey_item(r, m, &want, sizeof(struct btrfs_inode_item));
}

/* A root item keyed at offset -1 keyed again where the kernel keys it: a
 * snapshot at its otransid, any other tree at 0 (a relocation tree's offset
 * names its subvolume, which is not known: left). */
static int rekey_root(struct repair_ctx *r, const struct mend *m)
{
	struct btrfs_key want = { m->key.objectid, BTRFS_ROOT_ITEM_KEY, 0 };
	struct btrfs_root_item item;
	struct tree_root_ptr root;
	uint32_t size = sizeof(item);
	int ret;

	if (m->key.objectid == BTRFS_TREE_RELOC_OBJECTID)
		return 1;
	memset(&item, 0, sizeof(item));
	ret = trans_get_root(r->t, m->tree, &root);
	if (!ret)
		ret = tree_lookup(r->fs, &root, &m->key, &item, &size);
	if (ret)
		return ret;
	if (size == sizeof(item) && !uuid_is_null(item.parent_uuid) &&
	    root_item_otransid(&item) <= r->fs->generation)
		want.offset = root_item_otransid(&item);
	return rekey_item(r, m, &want, 0);
}

/* The root ref of a parent's directory entry being searched for. */
struct ref_search {
	const struct btrfs_key *entry_key;   /* (dir, DIR_ITEM or DIR_INDEX, hash or index) */
	const uint8_t *name;
	uint16_t len;
	uint64_t child;
	unsigned found;
};

static int match_ref(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct ref_search *rs = arg;
	struct item_view v = item_view_of(d, size);
	struct item_entry e;
	uint32_t off = 0;

	if (item_entry_next(BTRFS_ROOT_REF_KEY, &v, &off, &e) != 1 || root_ref_dirid(d) != rs->entry_key->objectid ||
	    e.name_len != rs->len || memcmp(e.name, rs->name, rs->len) ||
	    (rs->entry_key->type == BTRFS_DIR_INDEX_KEY && root_ref_sequence(d) != rs->entry_key->offset))
		return 0;
	rs->child = k->offset;
	rs->found++;
	return 0;
}

/* The subvolume that tree parent's root refs link as the entry called name
 * of the item at entry_key: 0 when none or several do. */
static uint64_t subvol_of_name(struct repair_ctx *r, uint64_t parent, const struct btrfs_key *entry_key,
			       const uint8_t *name, uint16_t len)
{
	struct btrfs_key min = { parent, BTRFS_ROOT_REF_KEY, 0 }, max = { parent, BTRFS_ROOT_REF_KEY, (uint64_t)-1 };
	struct ref_search rs = { .entry_key = entry_key, .name = name, .len = len };
	struct tree_root_ptr rp;

	if (trans_get_root(r->t, BTRFS_ROOT_TREE_OBJECTID, &rp) ||
	    tree_each_item_in(r->fs, &rp, &min, &max, match_ref, &rs) < 0) {
		btk_error_clear();
		return 0;
	}
	return rs.found == 1 ? rs.child : 0;
}

/* The entries of a dir item or dir index naming a subvolume by a bad id get
 * the id the root refs give their name; 1 when none could be mended. */
static int mend_subvol_locations(struct repair_ctx *r, const struct mend *m)
{
	uint32_t size = r->fs->nodesize, off = 0;
	uint8_t *item = malloc(size);
	struct tree_root_ptr root;
	struct item_view v;
	struct item_entry e;
	bool any = false;
	int ret = item ? trans_get_root(r->t, m->tree, &root) : -ENOMEM;

	if (!ret)
		ret = tree_lookup(r->fs, &root, &m->key, item, &size);
	v = item_view_of(item, ret ? 0 : size);
	while (!ret && item_entry_next(m->key.type, &v, &off, &e) == 1) {
		struct btrfs_key loc;
		uint64_t child;

		key_from_disk(&loc, dir_item_location_ptr(e.hdr));
		if (!subvol_location_bad(&loc) || !(child = subvol_of_name(r, m->tree, &m->key, e.name, e.name_len)))
			continue;
		loc.objectid = child;
		key_to_disk(dir_item_location_ptr(item + e.off), &loc);
		any = true;
	}
	if (!ret && any)
		ret = trans_update_item(r->t, m->tree, &m->key, item, size);
	free(item);
	return ret ? ret : !any;
}

/* The file type the dir index of inode ino's first ref names: BTRFS_FT_UNKNOWN when none. */
static uint8_t indexed_type(struct repair_ctx *r, const struct tree_root_ptr *root, uint64_t ino)
{
	struct btrfs_key min = { ino, BTRFS_INODE_REF_KEY, 0 }, max = { ino, BTRFS_INODE_REF_KEY, (uint64_t)-1 }, k;
	uint8_t buf[sizeof(struct btrfs_dir_item) + BTRFS_NAME_LEN];
	uint32_t size = sizeof(buf);
	struct tree_iter it;
	const uint8_t *d;
	uint32_t dsize;
	struct btrfs_key idx = { 0 }, loc;
	int ret;

	tree_iter_init(&it, r->fs, root, &min, &max);
	if (tree_iter_next(&it, &k, &d, &dsize) == 1 && dsize >= sizeof(struct btrfs_inode_ref))
		idx = (struct btrfs_key){ k.offset, BTRFS_DIR_INDEX_KEY, inode_ref_index(d) };
	tree_iter_release(&it);
	btk_error_clear();
	if (!idx.objectid)
		return BTRFS_FT_UNKNOWN;
	ret = tree_lookup(r->fs, root, &idx, buf, &size);
	if (ret || size < sizeof(struct btrfs_dir_item)) {
		btk_error_clear();
		return BTRFS_FT_UNKNOWN;
	}
	key_from_disk(&loc, dir_item_location_ptr(buf));
	return loc.objectid == ino ? dir_item_type(buf) & ~BTRFS_FT_ENCRYPTED : BTRFS_FT_UNKNOWN;
}

/* An inode's mode given the file type its items say (permissions kept). */
static int mend_inode_type(struct repair_ctx *r, const struct mend *m)
{
	uint8_t ftype = m->ftype;
	struct tree_root_ptr root;
	struct tree_path path;
	uint32_t size, type;
	uint8_t *item;
	int ret = trans_get_root(r->t, m->tree, &root);

	if (ret)
		return ret;
	if (ftype == BTRFS_FT_REG_FILE && indexed_type(r, &root, m->key.objectid) == BTRFS_FT_SYMLINK)
		ftype = BTRFS_FT_SYMLINK;
	type = ftype == BTRFS_FT_DIR ? S_IFDIR : ftype == BTRFS_FT_SYMLINK ? S_IFLNK : S_IFREG;
	tree_path_init(&path);
	ret = trans_item_for_update(r->t, m->tree, &m->key, &item, &size, &path);
	if (!ret && size >= sizeof(struct btrfs_inode_item))
		inode_set_mode(item, (inode_mode(item) & 07777) | type);
	else if (!ret)
		ret = 1;
	tree_path_release(r->fs, &path);
	return ret;
}

/* Mend the fields of the item in place; 1 when there was nothing to mend. */
static int mend_fields(struct repair_ctx *r, const struct mend *m)
{
	struct tree_path path;
	uint8_t *data;
	uint32_t size;
	int ret, none = 0;

	tree_path_init(&path);
	ret = trans_item_for_update(r->t, m->tree, &m->key, &data, &size, &path);
	if (!ret && m->kind == MEND_DIR_LOCATIONS)
		none = !dir_locations(r->fs, m->key.type, data, size, true);
	else if (!ret && m->kind == MEND_DEV_EXTENT && size == sizeof(struct btrfs_dev_extent)) {
		dev_extent_set_chunk_tree(data, BTRFS_CHUNK_TREE_OBJECTID);
		dev_extent_set_chunk_objectid(data, BTRFS_FIRST_CHUNK_TREE_OBJECTID);
	} else if (!ret && m->kind == MEND_BLOCK_GROUP && size == sizeof(struct btrfs_block_group_item))
		block_group_set_chunk_objectid(data, BTRFS_FIRST_CHUNK_TREE_OBJECTID);
	else if (!ret)
		none = 1;
	tree_path_release(r->fs, &path);
	return ret ? ret : none;
}

static const char *mend_what(enum mend_kind kind)
{
	switch (kind) {
	case MEND_INODE_KEY: return "inode item keyed at offset 0";
	case MEND_DIR_LOCATIONS: return "entry location keys set to what the format demands";
	case MEND_DEV_EXTENT: return "dev extent chunk tree 3, chunk objectid 256";
	case MEND_BLOCK_GROUP: return "block group chunk objectid 256";
	case MEND_ROOT_KEY: return "root item keyed again";
	case MEND_SUBVOL_LOCATION: return "entry names the subvolume its root ref links there";
	case MEND_INODE_TYPE: return "mode of the file type its items give";
	}
	return "";
}

int repair_item_fields(struct repair_ctx *r)
{
	struct mend_scan s = { .fs = r->fs, .types = r->found->counts[PR_INODE_TYPE_ITEMS] > 0 };
	int ret = fs_each_live_subvolume(r->fs, &r->fs->tree_root, SUBVOLS_DATA_RELOC | SUBVOLS_WALKABLE,
					 scan_subvol, &s);

	if (!ret)
		ret = scan_global(r, &s, BTRFS_DEV_TREE_OBJECTID, BTRFS_DEV_EXTENT_KEY, scan_dev_extent);
	if (!ret)
		ret = scan_global(r, &s, trans_block_group_tree(r->t), BTRFS_BLOCK_GROUP_ITEM_KEY, scan_block_group);
	if (!ret)
		ret = scan_global(r, &s, BTRFS_ROOT_TREE_OBJECTID, BTRFS_ROOT_ITEM_KEY, scan_root_item);

	for (size_t i = 0; !ret && i < s.n; i++) {
		const struct mend *m = &s.v[i];

		ret = m->kind == MEND_INODE_KEY ? rekey_inode(r, m) : m->kind == MEND_ROOT_KEY ? rekey_root(r, m)
			: m->kind == MEND_SUBVOL_LOCATION ? mend_subvol_locations(r, m)
			: m->kind == MEND_INODE_TYPE ? mend_inode_type(r, m) : mend_fields(r, m);
		if (ret == 1) {
			r->left++;
			ret = 0;
			continue;
		}
		if (ret == -ENOENT)
			ret = 0;  /* a shared leaf already mended through another tree */
		else if (!ret && r->changes++ < REPAIR_SAY_MAX)
			repair_say(r, "tree %" PRIu64 " item (%" PRIu64 " %u %" PRIu64 "): %s", m->tree,
				   m->key.objectid, m->key.type, m->key.offset, mend_what(m->kind));
	}
	if (!ret && r->changes > REPAIR_SAY_MAX)
		repair_say(r, "... %" PRIu64 " more", r->changes - REPAIR_SAY_MAX);
	free(s.v);
	return ret;
}
