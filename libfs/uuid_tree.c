// SPDX-License-Identifier: LGPL-2.1-or-later
/* Rebuilding the uuid tree. It maps subvolume uuids (and received
 * uuids) to subvolume ids, for send/receive and `btrfs subvolume show`. It
 * is derived data: delete it and build it again from the root items, the
 * way the kernel's uuid scan does (btrfs_uuid_scan_kthread):
 *   - root items of the top-level subvolume (5) and of subvolume ids
 *     256 .. BTRFS_LAST_FREE_OBJECTID, with refs != 0 (not being deleted)
 *     and a full-size item (older ones have no uuids);
 *   - key (first 8 bytes of the uuid as le64, UUID_KEY_SUBVOL or
 *     UUID_KEY_RECEIVED_SUBVOL, last 8 bytes as le64) (btrfs_uuid_to_key);
 *   - the item is an array of le64 subvolume ids, in root item order,
 *     without duplicates.
 * The superblock's uuid_tree_generation then equals the generation of the
 * commit, so the kernel does not rescan it at mount. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <btk/endian_access.h>
#include <btk/super.h>
#include <btk/tree.h>
#include <btk/uuid_tree.h>
#include <btk/walk.h>

struct uuid_entry {
	struct btrfs_key key;
	uint64_t subvol;
	size_t order;
};

struct uuid_list {
	struct uuid_entry *v;
	size_t n, cap;
};

static int list_add(struct uuid_list *l, const uint8_t *uuid, uint8_t type, uint64_t subvol)
{
	struct uuid_entry *e;

	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		e = realloc(l->v, cap * sizeof(*e));
		if (!e)
			return -ENOMEM;
		l->v = e;
		l->cap = cap;
	}
	e = &l->v[l->n];
	e->key.objectid = get_le64(uuid);
	e->key.type = type;
	e->key.offset = get_le64(uuid + 8);
	e->subvol = subvol;
	e->order = l->n++;
	return 0;
}

static int entry_cmp(const void *a, const void *b)
{
	const struct uuid_entry *x = a, *y = b;
	int c = key_compare(&x->key, &y->key);

	if (c)
		return c;
	return x->order < y->order ? -1 : x->order > y->order;
}

static bool uuid_is_zero(const uint8_t *uuid)
{
	static const uint8_t zero[BTRFS_UUID_SIZE];

	return memcmp(uuid, zero, sizeof(zero)) == 0;
}

struct uuid_collect {
	struct uuid_list *l;
	unsigned *subvols, *received;
};

static int collect_root(void *arg, const struct tree_root_ptr *root, const uint8_t *data, uint32_t size)
{
	struct uuid_collect *c = arg;
	int ret;

	(void)size;
	if (!uuid_is_zero(root_item_uuid_ptr(data))) {
		if ((ret = list_add(c->l, root_item_uuid_ptr(data), BTRFS_UUID_KEY_SUBVOL, root->objectid)))
			return ret;
		(*c->subvols)++;
	}
	if (!uuid_is_zero(root_item_received_uuid_ptr(data))) {
		ret = list_add(c->l, root_item_received_uuid_ptr(data), BTRFS_UUID_KEY_RECEIVED_SUBVOL, root->objectid);
		if (ret)
			return ret;
		(*c->received)++;
	}
	return 0;
}

/* The root items as this transaction sees the root tree. */
static int collect(struct fs_info *fs, struct trans *t, struct uuid_list *l, unsigned *subvols,
		   unsigned *received)
{
	struct uuid_collect c = { l, subvols, received };
	struct tree_root_ptr root;
	int ret = trans_get_root(t, BTRFS_ROOT_TREE_OBJECTID, &root);

	if (ret || (ret = fs_each_live_subvolume(fs, &root, SUBVOLS_FULL_ITEM, collect_root, &c)) < 0)
		return ret;
	return 0;
}

/* One item per key: the ids of its entries, duplicates dropped. */
static int insert_items(struct fs_info *fs, struct trans *t, const struct uuid_list *l, unsigned *items)
{
	uint8_t *buf = malloc(l->n * 8 + 8);
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < l->n && !ret;) {
		size_t k = i, n = 0;
		for (; k < l->n && key_compare(&l->v[k].key, &l->v[i].key) == 0; k++) {
			bool dup = false;
			for (size_t j = 0; j < n && !dup; j++)
				dup = get_le64(buf + 8 * j) == l->v[k].subvol;
			if (!dup)
				put_le64(buf + 8 * n++, l->v[k].subvol);
		}
		ret = trans_insert_item(t, BTRFS_UUID_TREE_OBJECTID, &l->v[i].key, buf, (uint32_t)(8 * n));
		(*items)++;
		i = k;
	}
	free(buf);
	return ret;
}

int uuid_tree_rebuild(struct fs_info *fs, struct trans *t, struct uuid_tree_stats *st)
{
	struct uuid_list l = { 0 };
	struct tree_root_ptr old = { 0 };
	int ret;

	memset(st, 0, sizeof(*st));
	ret = collect(fs, t, &l, &st->subvols, &st->received);
	if (ret) {
		fs_error(fs, ret, "reading the root items: %s", btk_error_msg());
		goto out;
	}
	qsort(l.v, l.n, sizeof(*l.v), entry_cmp);
	ret = trans_get_root(t, BTRFS_UUID_TREE_OBJECTID, &old);
	if (ret == 0) {
		st->replaced = true;
		ret = trans_delete_tree(t, BTRFS_UUID_TREE_OBJECTID);
		if (ret) {
			fs_error(fs, ret, "deleting the uuid tree: %s", btk_error_msg());
			goto out;
		}
	} else if (ret != -ENOENT) {
		goto out;
	}
	ret = trans_create_tree(t, BTRFS_UUID_TREE_OBJECTID);
	if (!ret)
		ret = insert_items(fs, t, &l, &st->items);
	if (ret) {
		fs_error(fs, ret, "building the uuid tree: %s", btk_error_msg());
		goto out;
	}
	super_set_uuid_tree_generation(trans_super(t), trans_transid(t));
out:
	free(l.v);
	return ret;
}
