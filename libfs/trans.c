// SPDX-License-Identifier: LGPL-2.1-or-later
/* Transaction state: start and end, roots, dirty blocks. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <btk/chunk_edit.h>
#include <btk/ebitmap.h>
#include <btk/features.h>
#include "libfs/trans_internal.h"

/* New blocks carry the chunk tree uuid the existing blocks carry. */
static int trans_read_chunk_tree_uuid(struct trans *t)
{
	struct tree_block *b;
	struct block_expect e = { .generation = t->fs->tree_root.generation, .level = t->fs->tree_root.level };
	int ret = block_read(t->fs, t->fs->tree_root.bytenr, &e, &b);

	if (ret)
		return ret;
	memcpy(t->chunk_tree_uuid, header_chunk_tree_uuid_ptr(b->data), BTRFS_UUID_SIZE);
	block_put(t->fs, b);
	return 0;
}

int trans_check_state(struct fs_info *fs)
{
	char why[400];
	int ret;

	/* a dry run opens read-only: the feature gate of fs_open did not ask */
	if ((ret = features_check_write(fs->incompat, fs->compat_ro, why, sizeof(why))))
		return fs_error(fs, ret, "%s", why);
	if (fs->missing_devices)
		return fs_error(fs, -ENODEV, "cannot write with %u device(s) missing", fs->missing_devices);
	if (fs->damage_tolerated)
		return fs_error(fs, -EUCLEAN, "the filesystem was opened despite damage to its chunk or root "
				"trees (part of it is not mapped): it cannot be written");
	/* the log's blocks have no extent items: a transaction could reuse them */
	if (super_log_root(fs->super))
		return fs_error(fs, -EBUSY, "the filesystem has a log tree to replay: mount it once first (or "
				"drop it with 'btk-check --clear-log', losing what was fsynced since the last commit)");
	if ((super_flags(fs->super) & (BTRFS_SUPER_FLAG_CHANGING_FSID | BTRFS_SUPER_FLAG_CHANGING_FSID_V2)) &&
	    !fs->fsid_change)
		return fs_error(fs, -EBUSY, "an fsid change was interrupted: finish it first (btk-tune --fsid "
				"or --metadata-uuid)");
	return 0;
}

int trans_start(struct fs_info *fs, struct trans **out)
{
	struct trans *t;
	int ret;

	*out = NULL;
	if (!fs->writable)
		return fs_error(fs, -EROFS, "the filesystem was opened read-only");
	if ((ret = trans_check_state(fs)))
		return ret;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->fs = fs;
	t->transid = fs->generation + 1;
	t->dirty_budget = trans_dirty_budget(fs);
	memcpy(t->super, fs->super, sizeof(t->super));
	ret = trans_read_chunk_tree_uuid(t);
	if (!ret)
		ret = trans_refs_init(t);
	if (!ret)
		ret = alloc_init(t);
	if (ret) {
		trans_abort(t);
		return ret;
	}
	*out = t;
	return 0;
}

uint64_t trans_transid(const struct trans *t)
{
	return t->transid;
}

uint8_t *trans_super(struct trans *t)
{
	return t->super;
}

static void trans_free(struct trans *t)
{
	for (size_t i = 0; i < t->ndirty; i++)
		block_put(t->fs, t->dirty[i]);
	trans_writeback_release(t, !t->committed);
	free(t->dirty);
	free(t->roots);
	trans_refs_release(t);
	free(t->new_chunks);
	alloc_release(t);
	free(t);
}

void trans_abort(struct trans *t)
{
	if (!t)
		return;
	/* dirty blocks must not stay in the cache: they were never written */
	for (size_t i = 0; i < t->ndirty; i++) {
		t->dirty[i]->dirty = false;
		block_forget(t->fs, t->dirty[i]);
		t->dirty[i] = NULL;
	}
	t->ndirty = 0;
	/* chunks it allocated are in the chunk map, not on disk: read the map again */
	if (t->nnew_chunks && !t->committed)
		volumes_reload(t->fs);
	trans_free(t);
}

struct trans_root *trans_root_entry(struct trans *t, uint64_t objectid)
{
	struct trans_root *r;

	for (size_t i = 0; i < t->nroots; i++)
		if (t->roots[i].ptr.objectid == objectid)
			return &t->roots[i];
	if (t->nroots == t->roots_cap) {
		size_t cap = t->roots_cap ? t->roots_cap * 2 : 16;
		r = realloc(t->roots, cap * sizeof(*r));
		if (!r)
			return NULL;
		t->roots = r;
		t->roots_cap = cap;
	}
	r = &t->roots[t->nroots];
	memset(r, 0, sizeof(*r));
	if (objectid == BTRFS_ROOT_TREE_OBJECTID)
		r->ptr = t->fs->tree_root;
	else if (objectid == BTRFS_CHUNK_TREE_OBJECTID)
		r->ptr = t->fs->chunk_root;
	else {
		int ret = fs_find_root(t->fs, objectid, &r->ptr);
		/* callers tell "no such tree" from -ENOMEM by the message */
		if (ret == -ENOENT)
			fs_error(t->fs, -ENOENT, "tree %llu does not exist", (unsigned long long)objectid);
		if (ret)
			return NULL;
	}
	t->nroots++;
	return r;
}

int trans_get_root(struct trans *t, uint64_t objectid, struct tree_root_ptr *out)
{
	struct trans_root *r = trans_root_entry(t, objectid);

	if (!r)
		return t->fs->errmsg[0] ? -ENOENT : -ENOMEM;
	if (r->deleted)
		return -ENOENT;
	*out = r->ptr;
	return 0;
}

int trans_mark_dirty(struct trans *t, struct tree_block *b)
{
	if (b->dirty)
		return 0;
	if (t->ndirty == t->dirty_cap) {
		size_t cap = t->dirty_cap ? t->dirty_cap * 2 : 64;
		struct tree_block **v = realloc(t->dirty, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		t->dirty = v;
		t->dirty_cap = cap;
	}
	b->dirty = true;
	block_hold(t->fs, b);
	t->dirty[t->ndirty++] = b;
	if (t->ndirty > t->peak_dirty)
		t->peak_dirty = t->ndirty;
	return 0;
}

/* A block this transaction created is gone again: never write it. */
void trans_forget_dirty(struct trans *t, struct tree_block *b)
{
	for (size_t i = 0; i < t->ndirty; i++) {
		if (t->dirty[i] != b)
			continue;
		t->dirty[i] = t->dirty[--t->ndirty];
		b->dirty = false;
		block_forget(t->fs, b); /* the transaction's reference */
		return;
	}
}

uint64_t trans_block_group_tree(struct trans *t)
{
	struct tree_root_ptr bgt;

	if ((super_compat_ro_flags(t->super) & BTRFS_FEATURE_COMPAT_RO_BLOCK_GROUP_TREE) &&
	    trans_get_root(t, BTRFS_BLOCK_GROUP_TREE_OBJECTID, &bgt) == 0)
		return BTRFS_BLOCK_GROUP_TREE_OBJECTID;
	return BTRFS_EXTENT_TREE_OBJECTID;
}
