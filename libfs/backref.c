// SPDX-License-Identifier: LGPL-2.1-or-later
/* Back references of existing extents, for copying tree blocks that
 * snapshots share. An extent item counts its references (`refs`) and lists
 * them inline after the item (sorted by type, then by a sequence number
 * that decreases: the root or parent for tree and shared refs, a hash for
 * data refs) or, when the item would grow too large, as keyed items beside
 * it. These functions add and drop one reference and set item flags, in the
 * transaction's extent tree, at once: the caller's next decision (how a
 * block is shared) must see them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <btk/csum.h>
#include <btk/ctree_ops.h>
#include "libfs/trans_internal.h"
#include <btk/item_check.h>
#include <btk/tree.h>

#define EXTENT_DATA_REF_PROBES 64

uint64_t backref_seq(const struct backref *r)
{
	return r->type == BTRFS_EXTENT_DATA_REF_KEY ? btrfs_extent_data_ref_hash(r->id, r->objectid, r->offset) : r->id;
}

int backref_inline_cmp(const void *a, const void *b)
{
	const struct backref *p = a, *q = b;
	uint64_t sp, sq;

	if (p->type != q->type)
		return p->type < q->type ? -1 : 1;
	sp = backref_seq(p);
	sq = backref_seq(q);
	return sp > sq ? -1 : sp < sq;
}

uint32_t backref_max_inline(uint32_t nodesize)
{
	return leaf_data_size(nodesize) / 16 - (uint32_t)sizeof(struct btrfs_item);
}

uint32_t backref_put_inline(uint8_t *p, const struct backref *r, uint32_t count)
{
	uint32_t len = extent_inline_ref_size(r->type);

	if (!len)
		return 0;
	memset(p, 0, len);
	inline_ref_set_type(p, r->type);
	if (r->type == BTRFS_EXTENT_DATA_REF_KEY) {
		data_ref_set_root(p + 1, r->id);
		data_ref_set_objectid(p + 1, r->objectid);
		data_ref_set_offset(p + 1, r->offset);
		data_ref_set_count(p + 1, count);
		return len;
	}
	inline_ref_set_offset(p, r->id);
	if (r->type == BTRFS_SHARED_DATA_REF_KEY)
		shared_data_ref_set_count(p + sizeof(struct btrfs_extent_inline_ref), count);
	return len;
}

void backref_put_keyed(uint64_t bytenr, const struct backref *r, uint32_t count, uint64_t key_offset,
		       struct btrfs_key *key, uint8_t *data, uint32_t *size)
{
	memset(data, 0, sizeof(struct btrfs_extent_data_ref));
	*size = 0;
	*key = (struct btrfs_key){ bytenr, r->type, r->id };
	if (r->type == BTRFS_EXTENT_DATA_REF_KEY) {
		key->offset = key_offset;
		data_ref_set_root(data, r->id);
		data_ref_set_objectid(data, r->objectid);
		data_ref_set_offset(data, r->offset);
		data_ref_set_count(data, count);
		*size = sizeof(struct btrfs_extent_data_ref);
	} else if (r->type == BTRFS_SHARED_DATA_REF_KEY) {
		shared_data_ref_set_count(data, count);
		*size = sizeof(struct btrfs_shared_data_ref);
	}
}

int backref_insert_keyed(struct trans *t, uint64_t bytenr, const struct backref *r, uint32_t count)
{
	uint8_t data[sizeof(struct btrfs_extent_data_ref)];
	uint64_t off = backref_seq(r);
	struct btrfs_key key;
	uint32_t size;
	int ret;

	if (r->type != BTRFS_EXTENT_DATA_REF_KEY) {
		backref_put_keyed(bytenr, r, count, 0, &key, data, &size);
		return trans_insert_item(t, BTRFS_EXTENT_TREE_OBJECTID, &key, data, size);
	}
	for (int i = 0; i < EXTENT_DATA_REF_PROBES; i++, off++) {
		backref_put_keyed(bytenr, r, count, off, &key, data, &size);
		ret = trans_insert_item(t, BTRFS_EXTENT_TREE_OBJECTID, &key, data, size);
		if (ret != -EEXIST)
			return ret;
	}
	return fs_error(t->fs, -EUCLEAN, "extent %llu: too many data reference hash collisions",
			(unsigned long long)bytenr);
}

/* One loaded extent item. */
struct xitem {
	struct btrfs_key key;
	uint8_t *buf;
	uint32_t size, cap;
	uint32_t refs_start;     /* offset of the first inline ref */
};

static int xitem_load(struct trans *t, const struct extent_target *x, struct xitem *it)
{
	struct fs_info *fs = t->fs;
	struct tree_root_ptr root;
	int ret = trans_get_root(t, BTRFS_EXTENT_TREE_OBJECTID, &root);

	it->cap = fs->nodesize;
	it->buf = malloc(it->cap);
	if (!it->buf)
		return -ENOMEM;
	if (ret)
		return ret;
	if (x->tree)
		it->key = (struct btrfs_key){ x->bytenr, BTRFS_METADATA_ITEM_KEY, x->level };
	else
		it->key = (struct btrfs_key){ x->bytenr, BTRFS_EXTENT_ITEM_KEY, x->num_bytes };
	it->size = it->cap;
	ret = tree_lookup(fs, &root, &it->key, it->buf, &it->size);
	if (ret == -ENOENT && x->tree) {
		it->key = (struct btrfs_key){ x->bytenr, BTRFS_EXTENT_ITEM_KEY, fs->nodesize };
		it->size = it->cap;
		ret = tree_lookup(fs, &root, &it->key, it->buf, &it->size);
	}
	if (ret == -ENOENT)
		return fs_error(fs, -EUCLEAN, "extent %llu has no extent item", (unsigned long long)x->bytenr);
	if (ret)
		return ret;
	it->refs_start = (uint32_t)sizeof(struct btrfs_extent_item);
	if (it->key.type == BTRFS_EXTENT_ITEM_KEY && x->tree)
		it->refs_start += (uint32_t)sizeof(struct btrfs_tree_block_info);
	if (it->size < it->refs_start || it->size > it->cap - 64)
		return fs_error(fs, -EUCLEAN, "extent item of %llu has a bad size %u", (unsigned long long)x->bytenr,
				it->size);
	return 0;
}

static bool inline_matches(const uint8_t *p, const struct backref *r)
{
	if (inline_ref_type(p) != r->type)
		return false;
	if (r->type == BTRFS_EXTENT_DATA_REF_KEY) {
		const uint8_t *d = p + 1;
		return data_ref_root(d) == r->id && data_ref_objectid(d) == r->objectid && data_ref_offset(d) == r->offset;
	}
	return inline_ref_offset(p) == r->id;
}

/* Walk the inline refs: *match at the matching one (or 0), *insert where a
 * new one belongs. */
static int inline_find(struct trans *t, const struct xitem *it, const struct backref *r, uint32_t *match,
		       uint32_t *insert)
{
	uint64_t want = backref_seq(r);
	uint32_t off = it->refs_start;

	*match = 0;
	*insert = 0;
	while (off < it->size) {
		const uint8_t *p = it->buf + off;
		uint8_t type = inline_ref_type(p);
		uint32_t len = extent_inline_ref_size(type);
		uint64_t seq;
		if (!len || off + len > it->size)
			return fs_error(t->fs, -EUCLEAN, "extent item of %llu: bad inline reference at %u",
					(unsigned long long)it->key.objectid, off);
		if (inline_matches(p, r)) {
			*match = off;
			return 0;
		}
		seq = type == BTRFS_EXTENT_DATA_REF_KEY
			      ? btrfs_extent_data_ref_hash(data_ref_root(p + 1), data_ref_objectid(p + 1), data_ref_offset(p + 1))
			      : inline_ref_offset(p);
		if (!*insert && type != BTRFS_EXTENT_OWNER_REF_KEY &&
		    (type > r->type || (type == r->type && seq < want)))
			*insert = off;
		off += len;
	}
	if (!*insert)
		*insert = it->size;
	return 0;
}

/* The keyed reference item of r: 0 with its key (and, for data, its count), -ENOENT. */
static int keyed_find(struct trans *t, uint64_t bytenr, const struct backref *r, struct btrfs_key *key,
		      uint8_t *item, uint32_t *size, uint64_t *free_offset)
{
	struct tree_root_ptr root;
	int ret = trans_get_root(t, BTRFS_EXTENT_TREE_OBJECTID, &root);

	if (ret)
		return ret;
	if (r->type != BTRFS_EXTENT_DATA_REF_KEY) {
		uint32_t want = r->type == BTRFS_SHARED_DATA_REF_KEY ? sizeof(struct btrfs_shared_data_ref) : 0;

		*key = (struct btrfs_key){ bytenr, r->type, r->id };
		ret = tree_lookup(t->fs, &root, key, item, size);
		if (ret == 0 && *size != want)
			return fs_error(t->fs, -EUCLEAN, "extent %llu: keyed reference of type %u has %u bytes, not %u",
					(unsigned long long)bytenr, r->type, *size, want);
		return ret;
	}
	/* hash collisions take the next offsets */
	for (uint64_t off = btrfs_extent_data_ref_hash(r->id, r->objectid, r->offset), i = 0; i < EXTENT_DATA_REF_PROBES; i++, off++) {
		uint32_t cap = *size;
		*key = (struct btrfs_key){ bytenr, BTRFS_EXTENT_DATA_REF_KEY, off };
		ret = tree_lookup(t->fs, &root, key, item, size);
		if (ret == -ENOENT) {
			*free_offset = off;
			*size = cap;
			return -ENOENT;
		}
		if (ret)
			return ret;
		if (*size != sizeof(struct btrfs_extent_data_ref))
			return fs_error(t->fs, -EUCLEAN, "extent %llu: data reference item of %u bytes",
					(unsigned long long)bytenr, *size);
		if (data_ref_root(item) == r->id &&
		    data_ref_objectid(item) == r->objectid && data_ref_offset(item) == r->offset)
			return 0;
		*size = cap;
	}
	return fs_error(t->fs, -EUCLEAN, "extent %llu: too many data reference hash collisions",
			(unsigned long long)bytenr);
}

static int xitem_store(struct trans *t, struct xitem *it)
{
	return trans_update_item(t, BTRFS_EXTENT_TREE_OBJECTID, &it->key, it->buf, it->size);
}

int backref_lookup(struct trans *t, const struct extent_target *x, uint64_t *refs, uint64_t *flags)
{
	struct xitem it = { 0 };
	int ret = xitem_load(t, x, &it);

	if (!ret) {
		*refs = extent_refs(it.buf);
		*flags = extent_flags(it.buf);
	}
	free(it.buf);
	return ret;
}

int backref_set_flags(struct trans *t, const struct extent_target *x, uint64_t flags)
{
	struct xitem it = { 0 };
	int ret = xitem_load(t, x, &it);

	if (!ret) {
		extent_set_flags(it.buf, extent_flags(it.buf) | flags);
		ret = xitem_store(t, &it);
	}
	free(it.buf);
	return ret;
}

int backref_add(struct trans *t, const struct extent_target *x, const struct backref *r)
{
	struct xitem it = { 0 };
	uint8_t kitem[sizeof(struct btrfs_extent_data_ref)];
	uint32_t match, insert, ksize = sizeof(kitem), len = extent_inline_ref_size(r->type);
	uint32_t max_inline = backref_max_inline(t->fs->nodesize);
	uint64_t free_offset = 0;
	struct btrfs_key kkey;
	bool data = r->type == BTRFS_EXTENT_DATA_REF_KEY || r->type == BTRFS_SHARED_DATA_REF_KEY;
	int ret = xitem_load(t, x, &it);

	if (!ret)
		ret = inline_find(t, &it, r, &match, &insert);
	if (ret)
		goto out;
	if (match && !data) {
		ret = fs_error(t->fs, -EUCLEAN, "tree block %llu already has that reference", (unsigned long long)x->bytenr);
		goto out;
	}
	if (match) {
		uint8_t *p = it.buf + match;
		if (r->type == BTRFS_EXTENT_DATA_REF_KEY)
			data_ref_set_count(p + 1, data_ref_count(p + 1) + 1);
		else
			shared_data_ref_set_count(p + sizeof(struct btrfs_extent_inline_ref),
						  shared_data_ref_count(p + sizeof(struct btrfs_extent_inline_ref)) + 1);
	} else if ((ret = keyed_find(t, x->bytenr, r, &kkey, kitem, &ksize, &free_offset)) == 0) {
		if (!data) {
			ret = fs_error(t->fs, -EUCLEAN, "tree block %llu already has that reference",
				       (unsigned long long)x->bytenr);
			goto out;
		}
		if (r->type == BTRFS_EXTENT_DATA_REF_KEY)
			data_ref_set_count(kitem, data_ref_count(kitem) + 1);
		else
			shared_data_ref_set_count(kitem, shared_data_ref_count(kitem) + 1);
		ret = trans_update_item(t, BTRFS_EXTENT_TREE_OBJECTID, &kkey, kitem, ksize);
		if (ret)
			goto out;
	} else if (ret != -ENOENT) {
		goto out;
	} else if (it.size + len <= max_inline) {
		uint8_t *p = it.buf + insert;
		memmove(p + len, p, it.size - insert);
		backref_put_inline(p, r, 1);
		it.size += len;
	} else {
		/* the item is as large as it may grow: a keyed reference */
		backref_put_keyed(x->bytenr, r, 1, free_offset, &kkey, kitem, &ksize);
		ret = trans_insert_item(t, BTRFS_EXTENT_TREE_OBJECTID, &kkey, kitem, ksize);
		if (ret)
			goto out;
	}
	extent_set_refs(it.buf, extent_refs(it.buf) + 1);
	ret = xitem_store(t, &it);
out:
	free(it.buf);
	return ret;
}

int backref_drop(struct trans *t, const struct extent_target *x, const struct backref *r, uint64_t *refs_left)
{
	struct xitem it = { 0 };
	uint8_t kitem[sizeof(struct btrfs_extent_data_ref)];
	uint32_t match, insert, ksize = sizeof(kitem);
	uint64_t free_offset = 0;
	struct btrfs_key kkey;
	int ret = xitem_load(t, x, &it);

	if (!ret)
		ret = inline_find(t, &it, r, &match, &insert);
	if (ret)
		goto out;
	if (extent_refs(it.buf) == 0) {
		ret = fs_error(t->fs, -EUCLEAN, "extent %llu has no references", (unsigned long long)x->bytenr);
		goto out;
	}
	if (match) {
		uint8_t *p = it.buf + match;
		uint32_t count = 1;
		if (r->type == BTRFS_EXTENT_DATA_REF_KEY) {
			count = data_ref_count(p + 1);
			data_ref_set_count(p + 1, count - 1);
		} else if (r->type == BTRFS_SHARED_DATA_REF_KEY) {
			uint8_t *c = p + sizeof(struct btrfs_extent_inline_ref);
			count = shared_data_ref_count(c);
			shared_data_ref_set_count(c, count - 1);
		}
		if (count <= 1) {
			uint32_t len = extent_inline_ref_size(r->type);
			memmove(p, p + len, it.size - match - len);
			it.size -= len;
		}
	} else if ((ret = keyed_find(t, x->bytenr, r, &kkey, kitem, &ksize, &free_offset)) == 0) {
		uint32_t count = 1;
		if (r->type == BTRFS_EXTENT_DATA_REF_KEY) {
			count = data_ref_count(kitem);
			data_ref_set_count(kitem, count - 1);
		} else if (r->type == BTRFS_SHARED_DATA_REF_KEY) {
			count = shared_data_ref_count(kitem);
			shared_data_ref_set_count(kitem, count - 1);
		}
		ret = count <= 1 ? trans_delete_item(t, BTRFS_EXTENT_TREE_OBJECTID, &kkey)
				 : trans_update_item(t, BTRFS_EXTENT_TREE_OBJECTID, &kkey, kitem, ksize);
		if (ret)
			goto out;
	} else {
		if (ret == -ENOENT)
			ret = fs_error(t->fs, -EUCLEAN, "extent %llu lacks the reference to drop (type %u, %llu)",
				       (unsigned long long)x->bytenr, r->type, (unsigned long long)r->id);
		goto out;
	}
	*refs_left = extent_refs(it.buf) - 1;
	if (*refs_left == 0) {
		if (!x->tree) {
			ret = fs_error(t->fs, -EOPNOTSUPP, "dropping the last reference of data extent %llu",
				       (unsigned long long)x->bytenr);
			goto out;
		}
		ret = trans_delete_item(t, BTRFS_EXTENT_TREE_OBJECTID, &it.key);
		if (!ret)
			ret = trans_squota_block_freed(t, x->bytenr, extent_generation(it.buf),
						       r->type == BTRFS_TREE_BLOCK_REF_KEY ? r->id : 0);
		if (!ret)
			ret = alloc_free_tree_block(t, x->bytenr);
		goto out;
	}
	extent_set_refs(it.buf, *refs_left);
	ret = xitem_store(t, &it);
out:
	free(it.buf);
	return ret;
}

/* Whether data extent x has an extent item (1), has none (0), or -errno. */
static int data_extent_present(struct trans *t, const struct extent_target *x)
{
	struct fs_info *fs = t->fs;
	struct btrfs_key key = { x->bytenr, BTRFS_EXTENT_ITEM_KEY, x->num_bytes };
	struct tree_root_ptr root;
	uint8_t *buf = malloc(fs->nodesize);
	uint32_t size = fs->nodesize;
	int ret = buf ? trans_get_root(t, BTRFS_EXTENT_TREE_OBJECTID, &root) : -ENOMEM;

	if (!ret)
		ret = tree_lookup(fs, &root, &key, buf, &size);
	free(buf);
	return ret == -ENOENT ? 0 : ret ? ret : 1;
}

int backref_mod_children(struct trans *t, const struct tree_block *b, uint64_t owner, bool full, bool add)
{
	unsigned level = block_level(b), n = block_nritems(b);

	for (unsigned i = 0; i < n; i++) {
		struct extent_target x = { 0 };
		struct backref r = { 0 };
		uint64_t left;
		int ret = 0;

		if (level > 0) {
			x = (struct extent_target){ .bytenr = key_ptr_blockptr(node_key_ptr(b->data, i)), .tree = true,
						    .level = (uint8_t)(level - 1) };
			r = full ? (struct backref){ BTRFS_SHARED_BLOCK_REF_KEY, b->bytenr, 0, 0 }
				 : (struct backref){ BTRFS_TREE_BLOCK_REF_KEY, owner, 0, 0 };
		} else {
			struct btrfs_key key;
			struct item_view v = leaf_item_view(b->data, i);
			const uint8_t *fe = ITEM_VIEW_STRUCT(&v, 0, struct btrfs_file_extent_item);
			block_key(b, i, &key);
			if (key.type != BTRFS_EXTENT_DATA_KEY || !fe)
				continue;
			if (file_extent_type(fe) != BTRFS_FILE_EXTENT_REG &&
			    file_extent_type(fe) != BTRFS_FILE_EXTENT_PREALLOC)
				continue;
			if (file_extent_disk_bytenr(fe) == 0)
				continue; /* a hole */
			x = (struct extent_target){ .bytenr = file_extent_disk_bytenr(fe),
						    .num_bytes = file_extent_disk_num_bytes(fe) };
			if (t->dangling_file_extents && (ret = data_extent_present(t, &x)) <= 0) {
				if (ret < 0)
					return ret;
				continue;   /* the repair that set the flag recounts them */
			}
			r = full ? (struct backref){ BTRFS_SHARED_DATA_REF_KEY, b->bytenr, 0, 0 }
				 : (struct backref){ BTRFS_EXTENT_DATA_REF_KEY, owner, key.objectid,
						     key.offset - file_extent_offset(fe) };
		}
		ret = add ? backref_add(t, &x, &r) : backref_drop(t, &x, &r, &left);
		if (ret)
			return ret;
	}
	return 0;
}
