// SPDX-License-Identifier: GPL-2.0-only
/* After the lost-blocks class dropped a subvolume tree's unreadable blocks:
 * an inode whose inode item lay in a lost block, and that a directory entry
 * elsewhere still names, gets an inode item again, of the type that entry
 * says (as btrfs check rebuilds such inodes). Without it the check run after
 * the drop would see only dangling entries, and the names class would remove
 * them: the inode (its name and type, and what other items of it survive)
 * would be gone. What the new item lacks (its inode ref, its link count) is
 * repaired by the classes after, from the check run again. Nothing the lost
 * block held is made up: a file whose extents were lost stays empty. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "check/fs_lost.h"
#include "check/repair_links.h"
#include "common/grow.h"
#include <btk/tree.h>

/* An inode a surviving directory entry names, and the type it gives it. */
struct named_inode {
	uint64_t ino;
	uint8_t ftype;
};

struct named_list {
	struct named_inode *v;
	size_t n, cap;
};

static int named_push(struct named_list *l, uint64_t ino, uint8_t ftype)
{
	struct named_inode *v;

	if (l->n && l->v[l->n - 1].ino == ino)
		return 0;   /* a directory's dir item and dir index come one after the other */
	if (!(v = grow_array(l->v, &l->cap, l->n, sizeof(*v), 16)))
		return -ENOMEM;
	l->v = v;
	l->v[l->n++] = (struct named_inode){ ino, ftype };
	return 0;
}

static int named_cmp(const void *a, const void *b)
{
	const struct named_inode *x = a, *y = b;

	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* The inodes of root that surviving dir items and dir indexes name and whose
 * inode item may have been lost with the dropped blocks. */
static int find_named_lost(struct repair_ctx *r, uint64_t root, struct named_list *l)
{
	struct btrfs_key min = { BTRFS_FIRST_FREE_OBJECTID, 0, 0 };
	struct btrfs_key max = { BTRFS_LAST_FREE_OBJECTID, 255, (uint64_t)-1 }, k;
	const struct fs_lost *lost = r->found->fs_lost;
	struct tree_root_ptr rp;
	struct tree_iter it;
	const uint8_t *d;
	uint32_t size;
	int ret = trans_get_root(r->t, root, &rp);

	if (ret)
		return ret;
	tree_iter_init(&it, r->fs, &rp, &min, &max);
	while ((ret = tree_iter_next(&it, &k, &d, &size)) == 1) {
		struct link_entry e;
		uint32_t off = 0;
		int err = 0;
		if (k.type != BTRFS_DIR_ITEM_KEY && k.type != BTRFS_DIR_INDEX_KEY)
			continue;
		while (!err && link_entry_next(k.type, d, size, &off, &e))
			if (e.loc.type == BTRFS_INODE_ITEM_KEY && e.loc.objectid >= BTRFS_FIRST_FREE_OBJECTID &&
			    e.loc.objectid <= BTRFS_LAST_FREE_OBJECTID &&
			    fs_lost_key(lost, root, e.loc.objectid, BTRFS_INODE_ITEM_KEY, 0))
				err = named_push(l, e.loc.objectid, (uint8_t)(e.type & ~BTRFS_FT_ENCRYPTED));
		if (err) {
			ret = err;
			break;
		}
	}
	tree_iter_release(&it);
	if (ret < 0)
		return ret;
	if (l->n)
		qsort(l->v, l->n, sizeof(*l->v), named_cmp);
	return 0;
}

int repair_lost_named_inodes(struct repair_ctx *r, uint64_t root)
{
	struct named_list l = { 0 };
	int ret = find_named_lost(r, root, &l);

	for (size_t i = 0; !ret && i < l.n; i++)
		if (!i || l.v[i].ino != l.v[i - 1].ino)
			ret = repair_make_inode_item(r, root, l.v[i].ino, l.v[i].ftype);
	free(l.v);
	return ret;
}
