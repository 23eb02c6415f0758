// SPDX-License-Identifier: GPL-2.0-only
/* The extent-refs repair class: every extent the reference join found wrong
 * (check/phase_refs.c notes it with the references the trees make to it) gets
 * its item and references rewritten from those, in one transaction: counts
 * corrected, missing references added (inline while the item has room, keyed
 * after that), extra ones removed, items without users deleted (with their
 * checksums, for data), missing items created (skinny or not, as the
 * filesystem is). Block group used and bytes_used follow from the extents
 * created and deleted; the free-space tree follows at commit.
 *
 * The space of every item to create is claimed first, before any tree block
 * is copied, so the allocator cannot put a new block on an extent in use. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "check/extent_items.h"
#include "check/repair.h"
#include "check/repair_notes.h"
#include <btk/blockgroups.h>
#include <btk/block.h>
#include <btk/csum.h>
#include <btk/ctree_ops.h>
#include <btk/endian_access.h>
#include <btk/item_check.h>
#include <btk/tree.h>

#define SAY_MAX 100          /* lines of detail; then only the totals */
#define MAX_DATA_EXTENT (128ull << 20)

struct xrepair {
	struct repair_ctx *r;
	struct block_group_list bgs;
	int64_t *adjust;          /* bytes of extents created minus deleted, per block group */
	struct extent_fix hdr;
	struct extent_fix *refs;  /* the references the current extent must have */
	size_t nrefs;
	uint64_t rewritten, created, deleted, said;
};

static int adjust_space(struct xrepair *x, uint64_t bytenr, uint64_t len, bool used)
{
	for (size_t i = 0; i < x->bgs.count; i++) {
		const struct block_group *g = &x->bgs.groups[i];
		if (bytenr >= g->start && bytenr - g->start < g->length) {
			x->adjust[i] += used ? (int64_t)len : -(int64_t)len;
			/* an item off the sector grid never held its space: nothing to free */
			if (!used && (bytenr | len) % x->r->fs->sectorsize)
				return 0;
			return trans_extent_space(x->r->t, bytenr, len, used);
		}
	}
	return fs_error(x->r->fs, -EUCLEAN, "extent %" PRIu64 " lies in no block group", bytenr);
}

/* Claim the space of every extent item to create: it must overlap no extent. */
static int claim_space(struct xrepair *x)
{
	struct fs_info *fs = x->r->fs;
	const void *rec;
	int ret;

	while ((ret = repair_notes_next(x->r->found, NOTES_CLAIMS, &rec)) == 1) {
		const struct extent_claim *cl = rec;
		const uint64_t c[2] = { cl->bytenr, cl->len };
		uint64_t from = c[0] > MAX_DATA_EXTENT ? c[0] - MAX_DATA_EXTENT : 0;
		struct btrfs_key min = { from, 0, 0 }, max = { c[0] + c[1] - 1, 255, (uint64_t)-1 }, k;
		struct tree_iter it;
		const uint8_t *d;
		uint32_t size;

		tree_iter_init(&it, fs, &fs->extent_root, &min, &max);
		while ((ret = tree_iter_next(&it, &k, &d, &size)) == 1) {
			uint64_t len = extent_key_length(&k, fs->nodesize);
			/* an item off the sector grid, or of a length the kernel refuses, holds no space (this
			 * class deletes it, or makes it again at its users' length) */
			if (k.objectid % fs->sectorsize || extent_length_refused(k.objectid, len, fs->sectorsize))
				continue;
			if (k.objectid < c[0] + c[1] && k.objectid + len > c[0]) {
				ret = fs_error(fs, -EUCLEAN, "an extent item for %" PRIu64 "+%" PRIu64 " would overlap "
					       "extent %" PRIu64 "+%" PRIu64, c[0], c[1], k.objectid, len);
				break;
			}
		}
		tree_iter_release(&it);
		if (ret < 0 || (ret = adjust_space(x, c[0], c[1], true)) < 0)
			return ret;
	}
	return ret;
}

/* The current extent's item (copied into item, *size) and its keyed
 * references (deleted now: they are written again from x->refs). */
static int take_existing(struct xrepair *x, struct btrfs_key *ikey, uint8_t *item, uint32_t *size)
{
	struct trans *t = x->r->t;
	struct fs_info *fs = x->r->fs;
	struct btrfs_key min = { x->hdr.bytenr, 0, 0 }, max = { x->hdr.bytenr, 255, (uint64_t)-1 }, k;
	struct btrfs_key *keyed = NULL;
	size_t nkeyed = 0, cap = 0;
	struct tree_root_ptr root;
	struct tree_iter it;
	const uint8_t *d;
	uint32_t dsize;
	int ret = trans_get_root(t, BTRFS_EXTENT_TREE_OBJECTID, &root);

	*size = 0;
	if (ret)
		return ret;
	tree_iter_init(&it, fs, &root, &min, &max);
	while ((ret = tree_iter_next(&it, &k, &d, &dsize)) == 1) {
		if (k.type == BTRFS_EXTENT_ITEM_KEY || k.type == BTRFS_METADATA_ITEM_KEY) {
			if (*size || dsize > fs->nodesize) {
				ret = fs_error(fs, -EUCLEAN, "extent %" PRIu64 " has two extent items", k.objectid);
				break;
			}
			*ikey = k;
			memcpy(item, d, dsize);
			*size = dsize;
		} else if (k.type == BTRFS_TREE_BLOCK_REF_KEY || k.type == BTRFS_SHARED_BLOCK_REF_KEY ||
			   k.type == BTRFS_EXTENT_DATA_REF_KEY || k.type == BTRFS_SHARED_DATA_REF_KEY) {
			if (nkeyed == cap) {
				struct btrfs_key *v = realloc(keyed, (cap = cap ? cap * 2 : 16) * sizeof(*v));
				if (!v) {
					ret = -ENOMEM;
					break;
				}
				keyed = v;
			}
			keyed[nkeyed++] = k;
		}
	}
	tree_iter_release(&it);
	for (size_t i = 0; ret >= 0 && i < nkeyed; i++)
		ret = trans_delete_item(t, BTRFS_EXTENT_TREE_OBJECTID, &keyed[i]);
	free(keyed);
	return ret < 0 ? ret : 0;
}

/* Remove the checksums of [start, end) (a data extent without users):
 * items inside go, items across an end keep their part outside. */
static int delete_csums(struct xrepair *x, uint64_t start, uint64_t end)
{
	struct trans *t = x->r->t;
	struct fs_info *fs = x->r->fs;
	uint32_t csize = csum_size(fs->csum_type), ss = fs->sectorsize;
	uint64_t from = start > MAX_DATA_EXTENT ? start - MAX_DATA_EXTENT : 0;
	struct btrfs_key min = { BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, from },
			 max = { BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, end - 1 }, k;
	struct tree_root_ptr root;
	int ret;

	for (;;) {
		struct tree_iter it;
		const uint8_t *d;
		uint32_t size;
		uint8_t *copy = NULL;
		bool found = false;

		if ((ret = trans_get_root(t, BTRFS_CSUM_TREE_OBJECTID, &root)))
			return ret == -ENOENT ? 0 : ret;
		tree_iter_init(&it, fs, &root, &min, &max);
		while ((ret = tree_iter_next(&it, &k, &d, &size)) == 1) {
			uint64_t kend = k.offset + (uint64_t)(size / csize) * ss;
			if (kend <= start)
				continue;
			found = true;
			copy = malloc(size ? size : 1);
			if (!copy)
				ret = -ENOMEM;
			else
				memcpy(copy, d, size);
			break;
		}
		tree_iter_release(&it);
		if (ret < 0 || !found)
			return ret < 0 ? ret : 0;
		{
			uint64_t kend = k.offset + (uint64_t)(size / csize) * ss;
			ret = trans_delete_item(t, BTRFS_CSUM_TREE_OBJECTID, &k);
			if (!ret && k.offset < start)
				ret = trans_insert_item(t, BTRFS_CSUM_TREE_OBJECTID, &k, copy,
							(uint32_t)((start - k.offset) / ss * csize));
			if (!ret && kend > end) {
				struct btrfs_key tail = { k.objectid, k.type, end };
				uint32_t skip = (uint32_t)((end - k.offset) / ss * csize);
				ret = trans_insert_item(t, BTRFS_CSUM_TREE_OBJECTID, &tail, copy + skip, size - skip);
			}
		}
		free(copy);
		if (ret)
			return ret;
	}
}

/* The header of an item to create: key, extent item, tree block info. */
static int new_item_header(struct xrepair *x, struct btrfs_key *key, uint8_t *item, uint32_t *size)
{
	struct fs_info *fs = x->r->fs;
	bool tree = x->hdr.c & EXTENT_FIX_TREE;
	struct tree_block *b;
	struct btrfs_key first = { 0, 0, 0 };
	int ret;

	memset(item, 0, sizeof(struct btrfs_extent_item) + sizeof(struct btrfs_tree_block_info));
	extent_set_generation(item, trans_transid(x->r->t));
	extent_set_flags(item, x->hdr.b ? x->hdr.b : tree ? BTRFS_EXTENT_FLAG_TREE_BLOCK : BTRFS_EXTENT_FLAG_DATA);
	*size = sizeof(struct btrfs_extent_item);
	if (!tree) {
		*key = (struct btrfs_key){ x->hdr.bytenr, BTRFS_EXTENT_ITEM_KEY, x->hdr.a };
		return 0;
	}
	ret = block_read(fs, x->hdr.bytenr, &BLOCK_EXPECT_ANY, &b);
	if (ret)
		return ret;
	extent_set_generation(item, header_generation(b->data));
	if (fs->incompat & BTRFS_FEATURE_INCOMPAT_SKINNY_METADATA) {
		*key = (struct btrfs_key){ x->hdr.bytenr, BTRFS_METADATA_ITEM_KEY, block_level(b) };
	} else {
		uint8_t *info = item + sizeof(struct btrfs_extent_item);
		if (block_nritems(b))
			block_key(b, 0, &first);
		*key = (struct btrfs_key){ x->hdr.bytenr, BTRFS_EXTENT_ITEM_KEY, fs->nodesize };
		key_to_disk(tree_block_info_key_ptr(info), &first);
		tree_block_info_set_level(info, (uint8_t)block_level(b));
		*size += sizeof(struct btrfs_tree_block_info);
	}
	block_put(fs, b);
	return 0;
}

/* Rewrite one extent from x->hdr and x->refs. */
static int fix_extent(struct xrepair *x)
{
	struct repair_ctx *r = x->r;
	struct fs_info *fs = r->fs;
	uint8_t *item = malloc(fs->nodesize), *out = NULL;
	struct btrfs_key ikey = { 0, 0, 0 };
	uint32_t size, head, osize;
	uint64_t total = 0, old_refs = 0, len = x->hdr.a;
	struct item_view v;
	int ret;

	if (!item)
		return -ENOMEM;
	ret = take_existing(x, &ikey, item, &size);
	if (ret)
		goto out;
	v = item_view_of(item, size);
	if (size && (x->hdr.c & EXTENT_FIX_REPLACE) && x->nrefs) {
		/* its flags said no kind: the item goes, and is made again below as a missing one */
		if ((ret = trans_delete_item(r->t, BTRFS_EXTENT_TREE_OBJECTID, &ikey)))
			goto out;
		if (x->said++ < SAY_MAX)
			repair_say(r, "extent %" PRIu64 ": item (%" PRIu64 " %u %" PRIu64 ", flags %#" PRIx64 ") removed, made "
				   "again from its users", ikey.objectid, ikey.objectid, ikey.type, ikey.offset,
				   extent_flags_in(&v));
		size = 0;
	}
	if (size) {
		bool tree_info = ikey.type == BTRFS_EXTENT_ITEM_KEY && (extent_flags_in(&v) & BTRFS_EXTENT_FLAG_TREE_BLOCK);
		const void *ref;

		head = (uint32_t)sizeof(struct btrfs_extent_item) + (tree_info ? (uint32_t)sizeof(struct btrfs_tree_block_info) : 0);
		if (size < head) {
			ret = fs_error(fs, -EUCLEAN, "extent item %" PRIu64 " is %u bytes", ikey.objectid, size);
			goto out;
		}
		old_refs = extent_refs(item);
		len = extent_key_length(&ikey, fs->nodesize);
		/* a simple-quota owner reference stays, first */
		if ((ref = ITEM_VIEW_STRUCT(&v, head, struct btrfs_extent_inline_ref)) &&
		    inline_ref_type(ref) == BTRFS_EXTENT_OWNER_REF_KEY)
			head += sizeof(struct btrfs_extent_inline_ref);
	} else if (x->nrefs) {
		/* simple quotas: a data extent's owner reference says whom it counts toward; which
		 * subvolume allocated a lost item is not known (the numbers follow: check/repair.c) */
		if (!(x->hdr.c & EXTENT_FIX_TREE) && (fs->incompat & BTRFS_FEATURE_INCOMPAT_SIMPLE_QUOTA)) {
			ret = fs_error(fs, -EOPNOTSUPP, "data extent items are not made again with simple quotas on");
			goto out;
		}
		ret = new_item_header(x, &ikey, item, &head);
		if (ret)
			goto out;
	} else {
		/* keyed references without an item: already deleted */
		goto done;
	}
	if (!x->nrefs) {
		/* no user: the extent goes, and with it the checksums of data */
		ret = trans_delete_item(r->t, BTRFS_EXTENT_TREE_OBJECTID, &ikey);
		if (!ret)
			ret = adjust_space(x, ikey.objectid, len, false);
		if (!ret && !(extent_flags(item) & BTRFS_EXTENT_FLAG_TREE_BLOCK))
			ret = delete_csums(x, ikey.objectid, ikey.objectid + len);
		if (ret)
			goto out;
		x->deleted++;
		if (x->said++ < SAY_MAX)
			repair_say(r, "extent %" PRIu64 "+%" PRIu64 ": no user, deleted", ikey.objectid, len);
		goto done;
	}
	out = malloc(fs->nodesize);
	if (!out) {
		ret = -ENOMEM;
		goto out;
	}
	memcpy(out, item, head);
	osize = head;
	if (size && (x->hdr.c & EXTENT_FIX_FLAGS))
		extent_set_flags(out, x->hdr.b);
	ret = extent_item_put_refs(fs, r->t, x->hdr.bytenr, x->refs, x->nrefs, out, &osize, &total);
	if (ret)
		goto out;
	extent_set_refs(out, total);
	if (size) {
		ret = trans_update_item(r->t, BTRFS_EXTENT_TREE_OBJECTID, &ikey, out, osize);
		x->rewritten++;
		if (!ret && x->said++ < SAY_MAX)
			repair_say(r, "extent %" PRIu64 "+%" PRIu64 ": references rewritten (%zu), refs %" PRIu64 " -> %"
				   PRIu64, ikey.objectid, len, x->nrefs, old_refs, total);
	} else {
		ret = trans_insert_item(r->t, BTRFS_EXTENT_TREE_OBJECTID, &ikey, out, osize);
		x->created++;
		if (!ret && x->said++ < SAY_MAX)
			repair_say(r, "extent %" PRIu64 "+%" PRIu64 ": %s item created with %" PRIu64 " reference(s)",
				   ikey.objectid, len, (x->hdr.c & EXTENT_FIX_TREE) ? "tree block" : "data", total);
	}
done:
	r->changes++;
out:
	free(out);
	free(item);
	return ret;
}

static int fix_one(void *arg, const struct extent_fix *hdr, struct extent_fix *refs, size_t n)
{
	struct xrepair *x = arg;
	int ret;

	x->hdr = *hdr;
	x->refs = refs;
	x->nrefs = n;
	ret = fix_extent(x);
	x->refs = NULL;
	return ret;
}

int repair_extent_refs(struct repair_ctx *r)
{
	struct fs_info *fs = r->fs;
	struct xrepair x = { .r = r };
	int ret;

	r->left = repair_notes_unfixable(r->found);
	if (super_log_root(fs_super(fs)))
		return fs_error(fs, -EOPNOTSUPP, "a log tree is present: mount the filesystem once to replay it");
	if (!repair_notes_count(r->found, NOTES_EXTENTS)) {
		if (repair_notes_unfixable(r->found))
			repair_say(r, "%" PRIu64 " extent(s) cannot be repaired safely (see the problems)",
				   repair_notes_unfixable(r->found));
		return 0;
	}
	ret = fs_read_block_groups(fs, &x.bgs);
	if (ret)
		return ret;
	x.adjust = calloc(x.bgs.count ? x.bgs.count : 1, sizeof(*x.adjust));
	ret = x.adjust ? claim_space(&x) : -ENOMEM;
	if (!ret)
		ret = extent_notes_each(r->found, fs, fix_one, &x);
	if (!ret && (x.created || x.deleted))
		ret = repair_block_groups_used(r, x.adjust);
	if (!ret) {
		if (x.said > SAY_MAX)
			repair_say(r, "... %" PRIu64 " more", x.said - SAY_MAX);
		repair_say(r, "%" PRIu64 " extent(s) rewritten, %" PRIu64 " created, %" PRIu64 " deleted", x.rewritten,
			   x.created, x.deleted);
		if (repair_notes_unfixable(r->found))
			repair_say(r, "%" PRIu64 " extent(s) left: they cannot be repaired safely",
				   repair_notes_unfixable(r->found));
		/* what subvolumes reference changed: the quota numbers no longer follow */
		if (r->changes && (ret = trans_mark_qgroups_inconsistent(r->t)) > 0)
			repair_say(r, "quota groups marked inconsistent ('btrfs quota rescan' recomputes them)");
		ret = ret < 0 ? ret : 0;
	}
	free(x.adjust);
	block_group_list_free(&x.bgs);
	return ret;
}
