// SPDX-License-Identifier: GPL-2.0-only
/* Root refs <-> root backrefs, in one transaction. A ROOT_REF (parent,
 * child) and its ROOT_BACKREF (child, parent) carry the same dirid, sequence
 * and name: a missing one is re-created from its mirror, and so is a
 * malformed one (its name does not fill it) beside a whole one. One whose parent or
 * child subvolume has no root item is dangling and removed. A pair that
 * exists but differs (root-ref-mismatch) is the subvol-links class's: the
 * parent's dir entries tell which half is right (check/repair_subvol_links.c). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "check/repair.h"
#include <btk/tree.h>

struct rref {
	uint64_t parent, child;
	uint8_t type;          /* BTRFS_ROOT_REF_KEY or BTRFS_ROOT_BACKREF_KEY */
	uint32_t size;
	uint8_t *data;
};

struct rscan {
	struct rref *refs;
	size_t n, cap;
	uint64_t *roots;       /* objectids with a root item, sorted */
	size_t nroots, rcap;
};

static int grow(void **p, size_t *cap, size_t n, size_t each)
{
	void *q;

	if (n < *cap)
		return 0;
	q = realloc(*p, (*cap ? *cap * 2 : 64) * each);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = *cap ? *cap * 2 : 64;
	return 0;
}

static int add_item(struct rscan *s, const struct btrfs_key *k, const uint8_t *data, uint32_t size)
{
	struct rref *r;

	if (k->type == BTRFS_ROOT_ITEM_KEY) {
		if (grow((void **)&s->roots, &s->rcap, s->nroots, sizeof(*s->roots)))
			return -ENOMEM;
		s->roots[s->nroots++] = k->objectid;
		return 0;
	}
	if (grow((void **)&s->refs, &s->cap, s->n, sizeof(*s->refs)))
		return -ENOMEM;
	r = &s->refs[s->n];
	r->type = k->type;
	r->parent = k->type == BTRFS_ROOT_REF_KEY ? k->objectid : k->offset;
	r->child = k->type == BTRFS_ROOT_REF_KEY ? k->offset : k->objectid;
	r->size = size;
	r->data = malloc(size ? size : 1);
	if (!r->data)
		return -ENOMEM;
	memcpy(r->data, data, size);
	s->n++;
	return 0;
}

static int scan(struct fs_info *fs, struct rscan *s)
{
	struct btrfs_key min = { 0, 0, 0 }, max = { (uint64_t)-1, 255, (uint64_t)-1 }, key;
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size;
	int ret;

	tree_iter_init(&it, fs, &fs->tree_root, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &data, &size)) == 1)
		if (key.type == BTRFS_ROOT_ITEM_KEY || key.type == BTRFS_ROOT_REF_KEY ||
		    key.type == BTRFS_ROOT_BACKREF_KEY)
			if ((ret = add_item(s, &key, data, size)) < 0)
				break;
	tree_iter_release(&it);
	return ret < 0 ? ret : 0;
}

static int cmp_ref(const void *a, const void *b)
{
	const struct rref *x = a, *y = b;

	if (x->parent != y->parent)
		return x->parent < y->parent ? -1 : 1;
	if (x->child != y->child)
		return x->child < y->child ? -1 : 1;
	return (int)x->type - (int)y->type;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static bool root_exists(const struct rscan *s, uint64_t id)
{
	return bsearch(&id, s->roots, s->nroots, sizeof(id), cmp_u64) != NULL;
}

static struct btrfs_key ref_key(uint64_t parent, uint64_t child, uint8_t type)
{
	struct btrfs_key k = { parent, type, child };

	if (type == BTRFS_ROOT_BACKREF_KEY)
		k = (struct btrfs_key){ child, type, parent };
	return k;
}

static const char *type_name(uint8_t type)
{
	return type == BTRFS_ROOT_REF_KEY ? "root ref" : "root backref";
}

/* One (parent, child) group of one or two items. */
/* Whether a root ref or backref holds one whole name, filling the item. */
static bool ref_whole(const struct rref *x)
{
	uint32_t len;

	if (x->size < sizeof(struct btrfs_root_ref))
		return false;
	len = root_ref_name_len(x->data);
	return len && len <= BTRFS_NAME_LEN && x->size == sizeof(struct btrfs_root_ref) + len;
}

/* A pair whose one half is malformed (its name does not fill it): made again
 * from the other half, as a missing one is. */
static int fix_malformed_half(struct repair_ctx *r, const struct rref *a, const struct rref *b)
{
	const struct rref *good = ref_whole(a) ? a : b, *bad = good == a ? b : a;
	struct btrfs_key k;

	if (ref_whole(bad) || !ref_whole(good))
		return 0;
	k = ref_key(bad->parent, bad->child, bad->type);
	repair_say(r, "%s %" PRIu64 " -> %" PRIu64 ": malformed, made again from its %s", type_name(bad->type),
		   bad->parent, bad->child, type_name(good->type));
	r->changes++;
	return trans_update_item(r->t, BTRFS_ROOT_TREE_OBJECTID, &k, good->data, good->size);
}

static int fix_pair(struct repair_ctx *r, const struct rscan *s, const struct rref *g, size_t n)
{
	struct btrfs_key k;
	uint8_t missing;
	int ret;

	if (n == 2)
		return fix_malformed_half(r, &g[0], &g[1]);
	if (!root_exists(s, g->parent) || !root_exists(s, g->child)) {
		k = ref_key(g->parent, g->child, g->type);
		repair_say(r, "%s %" PRIu64 " -> %" PRIu64 ": removed (subvolume %" PRIu64 " does not exist)",
			   type_name(g->type), g->parent, g->child, root_exists(s, g->parent) ? g->child : g->parent);
		r->changes++;
		return trans_delete_item(r->t, BTRFS_ROOT_TREE_OBJECTID, &k);
	}
	missing = g->type == BTRFS_ROOT_REF_KEY ? BTRFS_ROOT_BACKREF_KEY : BTRFS_ROOT_REF_KEY;
	k = ref_key(g->parent, g->child, missing);
	repair_say(r, "%s %" PRIu64 " -> %" PRIu64 ": re-created from its %s", type_name(missing), g->parent,
		   g->child, type_name(g->type));
	r->changes++;
	ret = trans_insert_item(r->t, BTRFS_ROOT_TREE_OBJECTID, &k, g->data, g->size);
	return ret;
}

int repair_root_refs(struct repair_ctx *r)
{
	struct rscan s = { 0 };
	int ret = scan(r->fs, &s);

	if (!ret) {
		qsort(s.refs, s.n, sizeof(*s.refs), cmp_ref);
		qsort(s.roots, s.nroots, sizeof(*s.roots), cmp_u64);
	}
	for (size_t i = 0, j; !ret && i < s.n; i = j) {
		for (j = i + 1; j < s.n && s.refs[j].parent == s.refs[i].parent && s.refs[j].child == s.refs[i].child;)
			j++;
		ret = fix_pair(r, &s, &s.refs[i], j - i);
	}
	for (size_t i = 0; i < s.n; i++)
		free(s.refs[i].data);
	free(s.refs);
	free(s.roots);
	return ret;
}
