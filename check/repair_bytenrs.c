// SPDX-License-Identifier: GPL-2.0-only
/* The file-extent-bytenr class: a file extent whose disk bytenr points where
 * no extent is (or inside another extent), while an extent of the same length
 * declares a reference from that very file (root, inode, offset) that nothing
 * uses, had its bytenr damaged: it points at that extent again (as btrfs
 * check --repair does). An uncompressed one whose disk length is too short
 * for the range it uses takes the length of the extent item that holds its
 * reference (as btrfs check --repair does). One that points outside every data chunk, with no such extent to
 * go back to, becomes a hole: there is no data to keep (the inodes class
 * recounts nbytes after). The check runs again after it, so the other classes
 * see the result. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include <btk/volumes.h>

#include "check/fe_kind.h"
#include "check/repair.h"
#include "check/repair_notes.h"
#include <btk/format.h>
#include <btk/item_check.h>
#include <btk/key.h>
#include <btk/tree.h>

/* The file extents of (root, ino) at disk bytenr `bad` whose data ref offset is `offset`. */
static int find_users(struct repair_ctx *r, const struct bytenr_fix *bad, struct repair_keys *out)
{
	struct btrfs_key min = { bad->ino, BTRFS_EXTENT_DATA_KEY, 0 }, max = { bad->ino, BTRFS_EXTENT_DATA_KEY,
									     (uint64_t)-1 }, k;
	struct tree_root_ptr rp;
	struct tree_iter it;
	const uint8_t *d;
	uint32_t size;
	int ret = trans_get_root(r->t, bad->root, &rp);

	if (ret)
		return ret;
	tree_iter_init(&it, r->fs, &rp, &min, &max);
	while ((ret = tree_iter_next(&it, &k, &d, &size)) == 1) {
		struct item_view v = item_view_of(d, size);

		if (ITEM_VIEW_STRUCT(&v, 0, struct btrfs_file_extent_item) && fe_kind_regular(file_extent_type(d), size) &&
		    file_extent_disk_bytenr(d) == bad->bytenr &&
		    (bad->offset == BYTENR_FIX_ANY || k.offset - file_extent_offset(d) == bad->offset) &&
		    (bad->kind != 2 || file_extent_disk_num_bytes(d) != bad->len) &&
		    (ret = repair_keys_push(out, &k)) < 0)
			break;
	}
	tree_iter_release(&it);
	return ret < 0 ? ret : 0;
}

/* Whether [bytenr, +len) lies in one data chunk (else no extent item can be made there). */
static bool in_data_chunk(const struct fs_info *fs, uint64_t bytenr, uint64_t len)
{
	const struct chunk *c = fs_chunk_lookup(fs, bytenr);

	return c && (c->type & BTRFS_BLOCK_GROUP_DATA) && bytenr - c->logical <= c->length &&
	       len <= c->length - (bytenr - c->logical);
}

/* What becomes of one user of bad (good: the extent it points back at, or
 * NULL): true when the item was changed. */
typedef bool (*user_fix)(struct repair_ctx *r, const struct bytenr_fix *bad, const struct bytenr_fix *good,
			 const struct btrfs_key *k, uint8_t *item);

/* Rewrite each user of bad in its tree (kind 0: no extent where it points;
 * kind 2: a wrong disk length) with fix; *found counts them. 0 or -errno. */
static int rewrite_users(struct repair_ctx *r, const struct bytenr_fix *bad, const struct bytenr_fix *good,
			 user_fix fix, size_t *found)
{
	struct repair_keys users = { 0 };
	int ret = find_users(r, bad, &users);

	for (size_t i = 0; !ret && i < users.n; i++) {
		struct tree_path path;
		uint8_t *item;
		uint32_t size;
		tree_path_init(&path);
		ret = trans_item_for_update(r->t, bad->root, &users.keys[i], &item, &size, &path);
		if (!ret && fix(r, bad, good, &users.keys[i], item))
			r->changes++;
		else if (!ret)
			r->left++;
		tree_path_release(r->fs, &path);
	}
	*found += users.n;
	free(users.keys);
	return ret;
}

static int note_subvol(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct repair_keys *ids = arg;
	struct item_view v = item_view_of(d, size);

	if (k->type != BTRFS_ROOT_ITEM_KEY || !key_is_subvolume_id(k->objectid) || !item_view_has_fixed(&v, k->type))
		return 0;
	return repair_keys_push(ids, k) < 0 ? -ENOMEM : 0;
}

/* The users of bad in every subvolume tree: a leaf shared with snapshots
 * holds the same file extent for each of them. 0 or -errno. */
static int rewrite_users_everywhere(struct repair_ctx *r, const struct bytenr_fix *bad, const struct bytenr_fix *good,
				    user_fix fix)
{
	struct repair_keys ids = { 0 };
	struct tree_root_ptr rp;
	size_t found = 0;
	int ret = trans_get_root(r->t, BTRFS_ROOT_TREE_OBJECTID, &rp);

	if (!ret)
		ret = tree_each_item(r->fs, &rp, note_subvol, &ids);
	for (size_t i = 0; ret >= 0 && i < ids.n; i++) {
		struct bytenr_fix in = *bad;
		in.root = ids.keys[i].objectid;
		ret = rewrite_users(r, &in, good, fix, &found);
	}
	if (ret >= 0 && !found)
		r->left++;
	free(ids.keys);
	return ret < 0 ? ret : 0;
}

static bool set_bytenr(struct repair_ctx *r, const struct bytenr_fix *bad, const struct bytenr_fix *good,
		       const struct btrfs_key *k, uint8_t *item)
{
	file_extent_set_disk_bytenr(item, good->bytenr);
	repair_say(r, "root %" PRIu64 " inode %" PRIu64 " extent at %" PRIu64 ": disk bytenr %" PRIu64 " -> %" PRIu64
		   " (the extent that names it)", bad->root, bad->ino, k->offset, bad->bytenr, good->bytenr);
	return true;
}

/* The extent's data is nowhere: the range reads as zeros from now on. */
static bool make_hole(struct repair_ctx *r, const struct bytenr_fix *bad, const struct bytenr_fix *good,
		      const struct btrfs_key *k, uint8_t *item)
{
	uint64_t num = file_extent_num_bytes(item);

	(void)good;
	file_extent_set_type(item, BTRFS_FILE_EXTENT_REG);
	file_extent_set_disk_bytenr(item, 0);
	file_extent_set_disk_num_bytes(item, 0);
	file_extent_set_offset(item, 0);
	file_extent_set_ram_bytes(item, num);
	file_extent_set_compression(item, BTRFS_COMPRESS_NONE);
	repair_say(r, "root %" PRIu64 " inode %" PRIu64 " extent at %" PRIu64 ": disk bytenr %" PRIu64
		   " is in no data chunk: a hole of %" PRIu64 " bytes", bad->root, bad->ino, k->offset, bad->bytenr, num);
	return true;
}

/* Only where the file extent is the one that is wrong: uncompressed, the
 * range it uses does not fit its own disk length and fits the item's (an
 * extent item's length damaged instead leaves its users consistent). */
static bool set_disk_length(struct repair_ctx *r, const struct bytenr_fix *bad, const struct bytenr_fix *good,
			    const struct btrfs_key *k, uint8_t *item)
{
	uint64_t used = file_extent_offset(item) + file_extent_num_bytes(item);

	(void)good;
	if (file_extent_compression(item) != BTRFS_COMPRESS_NONE || used <= file_extent_disk_num_bytes(item) ||
	    used > bad->len)
		return false;
	repair_say(r, "root %" PRIu64 " inode %" PRIu64 " extent at %" PRIu64 ": disk length %" PRIu64 " -> %" PRIu64
		   " (its extent item's)", bad->root, bad->ino, k->offset, file_extent_disk_num_bytes(item), bad->len);
	file_extent_set_disk_num_bytes(item, bad->len);
	return true;
}

/* The file extents of one (root, ino, offset) that went wrong, by the kinds of their notes. */
static int repair_group(struct repair_ctx *r, const struct bytenr_fix *g, size_t n)
{
	size_t bad = 0;
	int ret = 0;

	/* a lone bad user and a lone unused ref of its length pair up */
	if (n == 2 && g[0].kind == 0 && g[1].kind == 1 && g[0].len == g[1].len)
		return rewrite_users_everywhere(r, &g[0], &g[1], set_bytenr);
	for (size_t i = 0; i < n && !ret; i++) {
		if (g[i].kind == 2)
			ret = rewrite_users_everywhere(r, &g[i], NULL, set_disk_length);
		else if (g[i].kind == 0)
			bad++;
	}
	/* (one outside every data chunk becomes a hole after: fix_holes) */
	if (!(bad == 1 && n == 1 && !in_data_chunk(r->fs, g[0].bytenr, g[0].len)))
		r->left += bad;
	return ret;
}

/* The file extents outside every data chunk that no group pointed back:
 * holes (those pointed back no longer point there and are not found). */
static int fix_holes(struct repair_ctx *r)
{
	const void *rec;
	int ret;

	while ((ret = repair_notes_next(r->found, NOTES_HOLES, &rec)) == 1) {
		size_t left = r->left;
		if ((ret = rewrite_users_everywhere(r, rec, NULL, make_hole)) < 0)
			return ret;
		r->left = left;
	}
	return ret;
}

int repair_file_extent_bytenrs(struct repair_ctx *r)
{
	struct bytenr_fix group[3];
	const void *rec;
	size_t n = 0;
	int ret;

	/* the file extents it rewrites may name no extent item: a shared leaf copied leaves them out */
	trans_tolerate_dangling_file_extents(r->t);
	/* groups of one (root, ino, offset) */
	for (;;) {
		ret = repair_notes_next(r->found, NOTES_BYTENRS, &rec);
		const struct bytenr_fix *f = ret == 1 ? rec : NULL;
		if (ret < 0)
			return ret;
		if (n && (!f || f->root != group[0].root || f->ino != group[0].ino || f->offset != group[0].offset)) {
			if ((ret = repair_group(r, group, n)) < 0)
				return ret;
			n = 0;
		}
		if (!f)
			break;
		if (n < 3)
			group[n] = *f;
		n += n < 3;
	}
	return fix_holes(r);
}
