// SPDX-License-Identifier: GPL-2.0-only
/* The dir-links class: a directory with more than one name (the kernel
 * allows one: its ".." would be ambiguous) keeps the name of its first inode
 * ref -- the lowest parent, then the lowest index -- and loses the others
 * (dir item, dir index, inode ref or extref). A directory that also has file
 * extents is left: its mode may be the part that lies. The check runs again
 * after it; the inodes class then sets the link count and the parents' sizes.
 * btrfs check 7.3 reports such a directory and its --repair leaves it. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "check/repair.h"
#include "check/repair_links.h"
#include "check/repair_notes.h"
#include "libfs/csum.h"
#include "libfs/format.h"
#include "libfs/tree.h"

#define SAY_MAX REPAIR_SAY_MAX

struct dir_name {
	uint64_t parent, index;
	uint16_t len;
	uint8_t name[BTRFS_NAME_MAX];
};

struct dir_names {
	struct dir_name *v;
	size_t n, cap;
	bool extents;   /* the inode has file extent items */
};

static int names_add(struct dir_names *l, uint64_t parent, const struct link_entry *e)
{
	if (e->len > BTRFS_NAME_MAX)
		return 0;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 4;
		struct dir_name *v = realloc(l->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n] = (struct dir_name){ .parent = parent, .index = e->index, .len = e->len };
	memcpy(l->v[l->n].name, e->name, e->len);
	l->n++;
	return 0;
}

/* The names of ino from its inode refs and extrefs, and whether it has file extents. */
static int read_names(struct repair_ctx *r, const struct tree_root_ptr *root, uint64_t ino, struct dir_names *l)
{
	struct btrfs_key min = { ino, BTRFS_INODE_REF_KEY, 0 }, max = { ino, BTRFS_EXTENT_DATA_KEY, (uint64_t)-1 }, k;
	const uint8_t *d;
	uint32_t size;
	struct tree_iter it;
	int ret;

	tree_iter_init(&it, r->fs, root, &min, &max);
	while ((ret = tree_iter_next(&it, &k, &d, &size)) == 1) {
		struct link_entry e;
		uint32_t off = 0;
		if (k.type == BTRFS_EXTENT_DATA_KEY) {
			l->extents = true;
			continue;
		}
		if (k.type != BTRFS_INODE_REF_KEY && k.type != BTRFS_INODE_EXTREF_KEY)
			continue;
		while (ret >= 0 && link_entry_next(k.type, d, size, &off, &e))
			ret = names_add(l, k.type == BTRFS_INODE_REF_KEY ? k.offset : e.parent, &e);
		if (ret < 0)
			break;
	}
	tree_iter_release(&it);
	return ret < 0 ? ret : 0;
}

static int name_cmp(const void *x, const void *y)
{
	const struct dir_name *p = x, *q = y;

	if (p->parent != q->parent)
		return p->parent < q->parent ? -1 : 1;
	return p->index < q->index ? -1 : p->index > q->index;
}

/* Remove one name of dir ino: its entries in the parent and its ref. */
static int drop_name(struct repair_ctx *r, uint64_t root, uint64_t ino, const struct dir_name *n)
{
	struct btrfs_key item = { n->parent, BTRFS_DIR_ITEM_KEY, btrfs_name_hash(n->name, n->len) };
	struct btrfs_key index = { n->parent, BTRFS_DIR_INDEX_KEY, n->index };
	struct btrfs_key ref = { ino, BTRFS_INODE_REF_KEY, n->parent };
	struct btrfs_key extref = { ino, BTRFS_INODE_EXTREF_KEY, btrfs_extref_hash(n->parent, n->name, n->len) };
	int ret = link_remove_of(r, root, &item, n->parent, n->name, n->len, ino);

	if (ret == 0 || ret == -ENOENT)
		ret = link_remove_of(r, root, &index, n->parent, n->name, n->len, ino);
	if (ret == 0 || ret == -ENOENT)
		ret = link_remove(r, root, &ref, n->parent, n->name, n->len);
	if (ret == -ENOENT)
		ret = link_remove(r, root, &extref, n->parent, n->name, n->len);
	return ret == -ENOENT ? 0 : ret;
}

static int fix_dir(struct repair_ctx *r, uint64_t root, uint64_t ino)
{
	struct dir_names l = { 0 };
	struct tree_root_ptr rp;
	int ret = trans_get_root(r->t, root, &rp);

	if (!ret)
		ret = read_names(r, &rp, ino, &l);
	if (!ret && (l.extents || l.n < 2)) {
		r->left++;
		repair_say(r, "root %" PRIu64 " dir %" PRIu64 ": %s: names left", root, ino,
			   l.extents ? "it has file extents (a file's mode may be wrong)" : "fewer than two refs");
	} else if (!ret) {
		qsort(l.v, l.n, sizeof(*l.v), name_cmp);
		for (size_t i = 1; !ret && i < l.n; i++) {
			ret = drop_name(r, root, ino, &l.v[i]);
			if (!ret && r->changes++ < SAY_MAX)
				repair_say(r, "root %" PRIu64 " dir %" PRIu64 ": name '%.*s' in dir %" PRIu64
					   " removed (kept '%.*s' in dir %" PRIu64 ")", root, ino, (int)l.v[i].len,
					   (const char *)l.v[i].name, l.v[i].parent, (int)l.v[0].len,
					   (const char *)l.v[0].name, l.v[0].parent);
		}
	}
	free(l.v);
	return ret;
}

int repair_dir_links(struct repair_ctx *r)
{
	return repair_each_noted_inode(r, NOTES_DIR_LINKS, fix_dir);
}
