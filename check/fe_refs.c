// SPDX-License-Identifier: GPL-2.0-only
/* Data references of an extent by file (check/fe_refs.h). */
#include <errno.h>

#include "check/fe_refs.h"
#include <btk/format.h>
#include <btk/item_check.h>
#include <btk/tree.h>

#define ANY_ROOT UINT64_MAX

static void refs_add(struct fe_refs *o, const uint8_t *data_ref, uint64_t root, uint64_t ino)
{
	if ((root == ANY_ROOT || data_ref_root(data_ref) == root) && data_ref_objectid(data_ref) == ino &&
	    o->n < FE_REFS_MAX && !fe_refs_have(o, data_ref_offset(data_ref)))
		o->v[o->n++] = data_ref_offset(data_ref);
}

static int refs_collect(struct repair_ctx *r, uint64_t bytenr, uint64_t root, uint64_t ino, struct fe_refs *o)
{
	struct btrfs_key min = { bytenr, 0, 0 }, max = { bytenr, (uint8_t)-1, (uint64_t)-1 }, k;
	struct tree_root_ptr rp;
	struct tree_iter it;
	const uint8_t *d;
	uint32_t size;
	int ret = trans_get_root(r->t, BTRFS_EXTENT_TREE_OBJECTID, &rp);

	o->n = 0;
	if (ret)
		return ret;
	tree_iter_init(&it, r->fs, &rp, &min, &max);
	while ((ret = tree_iter_next(&it, &k, &d, &size)) == 1) {
		struct item_view v = item_view_of(d, size);
		struct inline_ref_view ref;
		uint32_t cur;

		if (k.type == BTRFS_EXTENT_DATA_REF_KEY && size >= sizeof(struct btrfs_extent_data_ref))
			refs_add(o, d, root, ino);
		if (k.type != BTRFS_EXTENT_ITEM_KEY)
			continue;
		cur = extent_item_refs_start(&k, &v);
		while (inline_ref_next(&v, &cur, &ref) == 1)
			if (ref.type == BTRFS_EXTENT_DATA_REF_KEY)
				refs_add(o, ref.body, root, ino);
	}
	tree_iter_release(&it);
	return ret < 0 ? ret : 0;
}

int fe_refs_of(struct repair_ctx *r, uint64_t bytenr, uint64_t root, uint64_t ino, struct fe_refs *o)
{
	return refs_collect(r, bytenr, root, ino, o);
}

int fe_refs_of_any_root(struct repair_ctx *r, uint64_t bytenr, uint64_t ino, struct fe_refs *o)
{
	return refs_collect(r, bytenr, ANY_ROOT, ino, o);
}

bool fe_refs_have(const struct fe_refs *o, uint64_t off)
{
	for (size_t i = 0; i < o->n; i++)
		if (o->v[i] == off)
			return true;
	return false;
}
