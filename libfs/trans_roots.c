// SPDX-License-Identifier: LGPL-2.1-or-later
/* The trees' roots as a transaction sees them (looked up in the committed
 * trees on first use, then moved by copy-on-write) and its superblock image. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "libfs/trans_internal.h"

struct trans_roots {
	struct trans_root *roots;
	size_t nroots, roots_cap;
};

int trans_roots_init(struct trans *t)
{
	t->root_set = calloc(1, sizeof(*t->root_set));
	return t->root_set ? 0 : -ENOMEM;
}

void trans_roots_release(struct trans *t)
{
	if (!t->root_set)
		return;
	free(t->root_set->roots);
	free(t->root_set);
	t->root_set = NULL;
}

/* Room for one more entry, zeroed (not counted yet); NULL: out of memory. */
static struct trans_root *root_slot(struct trans_roots *s)
{
	struct trans_root *r;

	if (s->nroots == s->roots_cap) {
		size_t cap = s->roots_cap ? s->roots_cap * 2 : 16;
		r = realloc(s->roots, cap * sizeof(*r));
		if (!r)
			return NULL;
		s->roots = r;
		s->roots_cap = cap;
	}
	r = &s->roots[s->nroots];
	memset(r, 0, sizeof(*r));
	return r;
}

struct trans_root *trans_root_add(struct trans *t)
{
	struct trans_root *r = root_slot(t->root_set);

	if (r)
		t->root_set->nroots++;
	return r;
}

size_t trans_root_count(const struct trans *t)
{
	return t->root_set->nroots;
}

struct trans_root *trans_root_at(struct trans *t, size_t i)
{
	return &t->root_set->roots[i];
}

struct trans_root *trans_root_entry(struct trans *t, uint64_t objectid)
{
	struct trans_root *r;

	for (size_t i = 0; i < t->root_set->nroots; i++)
		if (t->root_set->roots[i].ptr.objectid == objectid)
			return &t->root_set->roots[i];
	r = root_slot(t->root_set);
	if (!r) {
		fs_error(t->fs, -ENOMEM, "out of memory");
		return NULL;
	}
	if (objectid == BTRFS_ROOT_TREE_OBJECTID)
		r->ptr = t->fs->tree_root;
	else if (objectid == BTRFS_CHUNK_TREE_OBJECTID)
		r->ptr = t->fs->chunk_root;
	else {
		int ret = fs_find_root(t->fs, objectid, &r->ptr);
		/* every failure recorded: trans_root_entry_err() reads the record */
		if (ret == -ENOENT)
			fs_error(t->fs, -ENOENT, "tree %llu does not exist", (unsigned long long)objectid);
		else if (ret == -ENOMEM)
			fs_error(t->fs, -ENOMEM, "out of memory");
		if (ret)
			return NULL;
	}
	t->root_set->nroots++;
	return r;
}

int trans_get_root(struct trans *t, uint64_t objectid, struct tree_root_ptr *out)
{
	struct trans_root *r = trans_root_entry(t, objectid);

	if (!r)
		return trans_root_entry_err();
	if (r->deleted)
		return -ENOENT;
	*out = r->ptr;
	return 0;
}

int trans_set_root(struct trans *t, const struct tree_root_ptr *ptr)
{
	struct trans_root *r;

	if (ptr->objectid == BTRFS_ROOT_TREE_OBJECTID || ptr->objectid == BTRFS_CHUNK_TREE_OBJECTID)
		return -EINVAL;   /* the superblock names those */
	if (!(r = trans_root_entry(t, ptr->objectid)))
		return trans_root_entry_err();
	if (r->deleted || r->created)
		return -EINVAL;
	r->ptr = *ptr;
	r->changed = true;
	return 0;
}

int trans_adopt_root(struct trans *t, const struct tree_root_ptr *ptr)
{
	struct trans_root *r;

	if (ptr->objectid == BTRFS_ROOT_TREE_OBJECTID || ptr->objectid == BTRFS_CHUNK_TREE_OBJECTID)
		return -EINVAL;   /* the superblock names those */
	for (size_t i = 0; i < t->root_set->nroots; i++)
		if (t->root_set->roots[i].ptr.objectid == ptr->objectid)
			return fs_error(t->fs, -EEXIST, "tree %llu is known already", (unsigned long long)ptr->objectid);
	if (!(r = trans_root_add(t)))
		return -ENOMEM;
	r->ptr = *ptr;
	r->changed = true;
	return 0;
}

uint64_t trans_block_group_tree(struct trans *t)
{
	struct tree_root_ptr bgt;

	if ((super_compat_ro_flags(t->super) & BTRFS_FEATURE_COMPAT_RO_BLOCK_GROUP_TREE) &&
	    trans_get_root(t, BTRFS_BLOCK_GROUP_TREE_OBJECTID, &bgt) == 0)
		return BTRFS_BLOCK_GROUP_TREE_OBJECTID;
	return BTRFS_EXTENT_TREE_OBJECTID;
}

uint64_t trans_transid(const struct trans *t)
{
	return t->transid;
}

void trans_tolerate_dangling_file_extents(struct trans *t)
{
	t->dangling_file_extents = true;
}

uint8_t *trans_super(struct trans *t)
{
	return t->super;
}

/* What a caller returns when trans_root_entry() gave NULL: -ENOMEM, or
 * -ENOENT for a tree that does not exist or does not read. */
int trans_root_entry_err(void)
{
	return btk_last_error()->err == -ENOMEM ? -ENOMEM : -ENOENT;
}
