// SPDX-License-Identifier: GPL-2.0-only
/* The file-extent-overlap class: two file extents of an inode whose file
 * ranges overlap (the kernel's tree checker refuses such a leaf). The data
 * references of the extents say which item is wrong: each names the file
 * offset its file extent was written at (minus its offset into the extent).
 * An item whose key disagrees with its extent's references goes back to the
 * one place they name where it overlaps nothing; when none does, it is
 * dropped (its range a hole: its data's place is unknown). When both agree
 * (or say nothing), the earlier one's length grew: it is cut at the later
 * one's start, except that a hole after data gives way from its front.
 * Extent references, nbytes, holes and checksums follow from the check run
 * again after it (check/repair.c). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "check/fe_refs.h"
#include "check/repair.h"
#include "check/repair_notes.h"
#include <btk/format.h>
#include <btk/tree.h>

#define FE_SIZE sizeof(struct btrfs_file_extent_item)
/* fixes per inode before it is left as it is: each removes an overlap or an item */
#define MAX_ROUNDS 64

/* One file extent item of the inode. */
struct fe {
	struct btrfs_key key;
	uint8_t d[FE_SIZE]; /* its first bytes (an inline extent's header only) */
	uint32_t size;
	uint64_t end;       /* the end of its file range */
};

struct fe_list {
	struct fe *v;
	size_t n, cap;
};

enum ref_verdict { REF_NONE, REF_AGREES, REF_DISAGREES };

static bool is_regular(const struct fe *e)
{
	return e->size >= FE_SIZE && file_extent_type(e->d) != BTRFS_FILE_EXTENT_INLINE;
}

static bool has_data(const struct fe *e)
{
	return is_regular(e) && file_extent_disk_bytenr(e->d);
}

static int load(struct repair_ctx *r, uint64_t root, uint64_t ino, struct fe_list *l)
{
	struct btrfs_key min = { ino, BTRFS_EXTENT_DATA_KEY, 0 }, max = { ino, BTRFS_EXTENT_DATA_KEY, (uint64_t)-1 };
	struct tree_root_ptr rp;
	struct tree_iter it;
	struct fe e;
	const uint8_t *d;
	int ret = trans_get_root(r->t, root, &rp);

	l->n = 0;
	if (ret)
		return ret;
	tree_iter_init(&it, r->fs, &rp, &min, &max);
	while ((ret = tree_iter_next(&it, &e.key, &d, &e.size)) == 1) {
		if (e.size < BTRFS_FILE_EXTENT_INLINE_DATA_START)
			continue;
		memset(e.d, 0, sizeof(e.d));
		memcpy(e.d, d, e.size < FE_SIZE ? e.size : FE_SIZE);
		if (file_extent_type(e.d) == BTRFS_FILE_EXTENT_INLINE)
			e.end = (file_extent_ram_bytes(e.d) + r->fs->sectorsize - 1) / r->fs->sectorsize * r->fs->sectorsize;
		else if (e.size >= FE_SIZE)
			e.end = e.key.offset + file_extent_num_bytes(e.d);
		else
			continue;
		if (e.end < e.key.offset)
			e.end = UINT64_MAX;
		if (l->n == l->cap) {
			size_t cap = l->cap ? 2 * l->cap : 16;
			struct fe *v = realloc(l->v, cap * sizeof(*v));
			if (!v) {
				ret = -ENOMEM;
				break;
			}
			l->v = v;
			l->cap = cap;
		}
		l->v[l->n++] = e;
	}
	tree_iter_release(&it);
	return ret < 0 ? ret : 0;
}

/* Whether the extent's references (of this tree, else of any tree's inode
 * of this number) name the item's key; *refs: what they name. */
static int verdict(struct repair_ctx *r, uint64_t root, const struct fe *e, struct fe_refs *refs, enum ref_verdict *v)
{
	int ret;

	refs->n = 0;
	*v = REF_NONE;
	if (!has_data(e))
		return 0;
	ret = fe_refs_of(r, file_extent_disk_bytenr(e->d), root, e->key.objectid, refs);
	if (!ret && !refs->n)
		ret = fe_refs_of_any_root(r, file_extent_disk_bytenr(e->d), e->key.objectid, refs);
	if (ret || !refs->n)
		return ret;
	*v = e->key.offset >= file_extent_offset(e->d) &&
	     fe_refs_have(refs, e->key.offset - file_extent_offset(e->d)) ? REF_AGREES : REF_DISAGREES;
	return 0;
}

/* Whether [start, start+len) overlaps no item of l but skip, and no item starts at start. */
static bool place_free(const struct fe_list *l, size_t skip, uint64_t start, uint64_t len)
{
	for (size_t i = 0; i < l->n; i++)
		if (i != skip && (l->v[i].key.offset == start || (l->v[i].key.offset < start + len && start < l->v[i].end)))
			return false;
	return true;
}

/* The one place the references name for item i where it overlaps nothing. */
static bool ref_place(const struct fe_list *l, size_t i, const struct fe_refs *refs, uint32_t ss, uint64_t *out)
{
	const struct fe *e = &l->v[i];
	uint64_t len = e->end - e->key.offset;
	size_t fits = 0;

	for (size_t j = 0; j < refs->n; j++) {
		uint64_t at = refs->v[j] + file_extent_offset(e->d);
		if (at < refs->v[j] || at % ss || at + len < at || !place_free(l, i, at, len))
			continue;
		*out = at;
		fits++;
	}
	return fits == 1;
}

/* Item e again under key offset `at` with length num and offset off into
 * its extent (its other fields as they are); num 0: deleted. */
static int rewrite(struct repair_ctx *r, uint64_t root, const struct fe *e, uint64_t at, uint64_t num, uint64_t off)
{
	struct btrfs_key k = e->key;
	uint8_t d[FE_SIZE];
	int ret;

	if (at == e->key.offset && num) {
		struct tree_path path;
		uint8_t *item;
		uint32_t size;
		tree_path_init(&path);
		ret = trans_item_for_update(r->t, root, &e->key, &item, &size, &path);
		if (!ret && size >= FE_SIZE) {
			file_extent_set_num_bytes(item, num);
			file_extent_set_offset(item, off);
		}
		tree_path_release(r->fs, &path);
		return ret;
	}
	if ((ret = trans_delete_item(r->t, root, &e->key)) || !num)
		return ret;
	memcpy(d, e->d, FE_SIZE);
	file_extent_set_num_bytes(d, num);
	file_extent_set_offset(d, off);
	k.offset = at;
	return trans_insert_item(r->t, root, &k, d, FE_SIZE);
}

/* Resolve the overlap of item c with the item p before it: 1 when an item
 * changed, 0 when it is left (r->left counts it), -errno. */
static int resolve(struct repair_ctx *r, uint64_t root, const struct fe_list *l, size_t p, size_t c)
{
	const struct fe *P = &l->v[p], *C = &l->v[c];
	uint32_t ss = r->fs->sectorsize;
	struct fe_refs prefs, crefs;
	enum ref_verdict pv, cv;
	uint64_t at;
	int ret;

	if ((ret = verdict(r, root, P, &prefs, &pv)) || (ret = verdict(r, root, C, &crefs, &cv)))
		return ret;
	if (cv == REF_DISAGREES && ref_place(l, c, &crefs, ss, &at)) {
		repair_say(r, "root %" PRIu64 " inode %" PRIu64 " extent at %" PRIu64 ": back to %" PRIu64
			   " (its extent's reference)", root, C->key.objectid, C->key.offset, at);
		ret = rewrite(r, root, C, at, C->end - C->key.offset, file_extent_offset(C->d));
	} else if (pv == REF_DISAGREES && ref_place(l, p, &prefs, ss, &at)) {
		repair_say(r, "root %" PRIu64 " inode %" PRIu64 " extent at %" PRIu64 ": back to %" PRIu64
			   " (its extent's reference)", root, P->key.objectid, P->key.offset, at);
		ret = rewrite(r, root, P, at, P->end - P->key.offset, file_extent_offset(P->d));
	} else if (cv == REF_DISAGREES || pv == REF_DISAGREES) {
		const struct fe *drop = cv == REF_DISAGREES ? C : P;
		repair_say(r, "root %" PRIu64 " inode %" PRIu64 " extent at %" PRIu64 ": dropped (its extent's "
			   "references name no free place for it)", root, drop->key.objectid, drop->key.offset);
		ret = trans_delete_item(r->t, root, &drop->key);
	} else if (is_regular(C) && !has_data(C) && has_data(P)) {
		/* a hole after data gives way from its front (its end, and where it ends in its
		 * nominal extent, stay where they were) */
		uint64_t from = P->end, num = C->end > from ? (C->end - from) / ss * ss : 0;
		repair_say(r, "root %" PRIu64 " inode %" PRIu64 " hole at %" PRIu64 ": %s", root, C->key.objectid,
			   C->key.offset, num ? "starts where the extent before it ends" : "dropped (inside the extent "
			   "before it)");
		ret = rewrite(r, root, C, from, num, file_extent_offset(C->d) + (C->end - C->key.offset - num));
	} else if (is_regular(P) && C->key.offset > P->key.offset &&
		   (C->key.offset - P->key.offset) % ss == 0) {
		repair_say(r, "root %" PRIu64 " inode %" PRIu64 " extent at %" PRIu64 ": length %" PRIu64 " -> %" PRIu64
			   " (the next extent starts there)", root, P->key.objectid, P->key.offset,
			   P->end - P->key.offset, C->key.offset - P->key.offset);
		ret = rewrite(r, root, P, P->key.offset, C->key.offset - P->key.offset, file_extent_offset(P->d));
	} else {
		r->left++;
		return 0;
	}
	return ret ? ret : 1;
}

static int fix_inode(struct repair_ctx *r, uint64_t root, uint64_t ino)
{
	struct fe_list l = { 0 };
	int ret = 0;

	for (unsigned round = 0; round < MAX_ROUNDS && ret >= 0; round++) {
		size_t p = 0, c = 0;
		if ((ret = load(r, root, ino, &l)) < 0)
			break;
		for (size_t i = 1; i < l.n && !c; i++) {
			if (l.v[i].key.offset < l.v[p].end)
				c = i;
			else if (l.v[i].end > l.v[p].end)
				p = i;
		}
		if (!c)
			break;
		if ((ret = resolve(r, root, &l, p, c)) <= 0)
			break;
		r->changes++;
	}
	free(l.v);
	return ret < 0 ? ret : 0;
}

int repair_file_extent_overlap(struct repair_ctx *r)
{
	return repair_each_noted_inode(r, NOTES_FE_OVERLAP, fix_inode);
}
