// SPDX-License-Identifier: GPL-2.0-only
/* The file-extent-ranges class: a regular file extent whose offset and length
 * reach past its extent (the data on disk, or decompressed) had its offset or
 * its length damaged, and the extent's data references say which. A file's
 * reference is keyed by file offset minus extent offset: when the one the
 * item implies is missing and one reference of the same file names an offset
 * that fits, the item's offset comes back from it; when it is there, the
 * length is cut to what the extent holds and to where the next file extent
 * starts. The check runs again after it (check/repair.c). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "check/fe_refs.h"
#include "check/repair.h"
#include "check/repair_notes.h"
#include <btk/format.h>
#include <btk/tree.h>

/* The one reference offset that puts the item at key_off inside the extent
 * (limit bytes of it, sector aligned); false when none or several do. */
static bool offset_that_fits(const struct fe_refs *o, uint64_t key_off, uint64_t num, uint64_t limit,
			     uint32_t ss, uint64_t *out)
{
	size_t fits = 0;

	for (size_t i = 0; i < o->n; i++) {
		uint64_t off = key_off - o->v[i];
		if (o->v[i] <= key_off && off % ss == 0 && off < limit && num <= limit - off && (!fits || *out != off)) {
			*out = off;
			fits++;
		}
	}
	return fits == 1;
}

/* The file extent at key (regular or prealloc, with a disk extent), next the
 * start of the item after it: its offset or its length set back. */
static int fix_item(struct repair_ctx *r, uint64_t root, const struct btrfs_key *key, uint64_t next)
{
	uint32_t ss = r->fs->sectorsize, size;
	struct fe_refs refs;
	struct tree_path path;
	uint64_t limit, off, num, want = 0;
	uint8_t *item;
	int ret;

	tree_path_init(&path);
	ret = trans_item_for_update(r->t, root, key, &item, &size, &path);
	if (ret || size < sizeof(struct btrfs_file_extent_item) || !file_extent_disk_bytenr(item) ||
	    file_extent_type(item) == BTRFS_FILE_EXTENT_INLINE)
		goto out;
	limit = file_extent_compression(item) != BTRFS_COMPRESS_NONE ? file_extent_ram_bytes(item)
								      : file_extent_disk_num_bytes(item);
	off = file_extent_offset(item);
	num = file_extent_num_bytes(item);
	if (off <= limit && num <= limit - off)
		goto out; /* it fits (again) */
	ret = fe_refs_of(r, file_extent_disk_bytenr(item), root, key->objectid, &refs);
	if (ret)
		goto out;
	if (!fe_refs_have(&refs, key->offset - off) && offset_that_fits(&refs, key->offset, num, limit, ss, &want)) {
		file_extent_set_offset(item, want);
		if (r->changes++ < REPAIR_SAY_MAX)
			repair_say(r, "root %" PRIu64 " inode %" PRIu64 " extent at %" PRIu64 ": offset %" PRIu64
				   " -> %" PRIu64 " (its extent's reference)", root, key->objectid, key->offset, off, want);
		goto out;
	}
	want = off < limit ? (limit - off) / ss * ss : 0;
	if (next > key->offset && next - key->offset < want)
		want = (next - key->offset) / ss * ss;
	if (!fe_refs_have(&refs, key->offset - off) || !want) {
		r->left++;
		goto out;
	}
	file_extent_set_num_bytes(item, want);
	if (r->changes++ < REPAIR_SAY_MAX)
		repair_say(r, "root %" PRIu64 " inode %" PRIu64 " extent at %" PRIu64 ": length %" PRIu64 " -> %" PRIu64
			   " (what its extent holds)", root, key->objectid, key->offset, num, want);
out:
	tree_path_release(r->fs, &path);
	return ret == -ENOENT ? 0 : ret;
}

/* Every file extent of (root, ino) that reaches past its extent. */
static int fix_inode(struct repair_ctx *r, uint64_t root, uint64_t ino)
{
	struct btrfs_key min = { ino, BTRFS_EXTENT_DATA_KEY, 0 }, max = { ino, BTRFS_EXTENT_DATA_KEY, (uint64_t)-1 }, k;
	struct repair_keys keys = { 0 };
	struct tree_root_ptr rp;
	struct tree_iter it;
	const uint8_t *d;
	uint32_t size;
	int ret = trans_get_root(r->t, root, &rp);

	if (ret)
		return ret;
	tree_iter_init(&it, r->fs, &rp, &min, &max);
	while ((ret = tree_iter_next(&it, &k, &d, &size)) == 1)
		if ((ret = repair_keys_push(&keys, &k)) < 0)
			break;
	tree_iter_release(&it);
	for (size_t i = 0; ret >= 0 && i < keys.n; i++)
		ret = fix_item(r, root, &keys.keys[i], i + 1 < keys.n ? keys.keys[i + 1].offset : (uint64_t)-1);
	free(keys.keys);
	return ret < 0 ? ret : 0;
}

int repair_file_extent_ranges(struct repair_ctx *r)
{
	return repair_each_noted_inode(r, NOTES_FILE_EXTENTS, fix_inode);
}
