// SPDX-License-Identifier: GPL-2.0-only
/* The compressed-nodatasum class: a file with compressed extents whose inode
 * says nodatasum (which no kernel should have let compress) loses the flag,
 * when every compressed extent of it decompresses whole; the check then runs
 * again and the csums class checksums the data that lacks them. Data without
 * checksums is the danger: the kernel decompresses what it reads unverified.
 * btrfs check 7.3 reports the combination and leaves it. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "check/compressed_extent.h"
#include "check/repair.h"
#include "check/repair_links.h"
#include "check/repair_notes.h"
#include <btk/format.h>
#include <btk/item_check.h>
#include <btk/tree.h>

#define SAY_MAX REPAIR_SAY_MAX
/* the kernel's largest compressed extent is 128 KiB of data: anything far past that is damage */
#define COMPRESSED_MAX (1u << 20)

/* 0 when the compressed extent d decompresses to what its file extent uses, 1 when not, -errno. */
static int extent_whole(struct repair_ctx *r, const uint8_t *d)
{
	uint64_t dlen = file_extent_disk_num_bytes(d), ram = file_extent_ram_bytes(d);
	uint64_t want = file_extent_offset(d) + file_extent_num_bytes(d);
	uint8_t *src, *out;
	long got;
	int ret;

	if (!dlen || dlen > COMPRESSED_MAX || !ram || ram > COMPRESSED_MAX)
		return 1;
	src = malloc(dlen);
	out = malloc(ram);
	if (!src || !out) {
		free(src);
		free(out);
		return -ENOMEM;
	}
	ret = extent_data_read(r->fs, file_extent_disk_bytenr(d), src, dlen);
	got = ret ? 0 : compressed_extent_decompress(file_extent_compression(d), src, dlen, r->fs->sectorsize, out, ram);
	free(src);
	free(out);
	if (got == -ENOMEM)
		return -ENOMEM;
	/* the stream may stop at the file's end inside its last sector */
	return ret || got <= 0 || (uint64_t)got + r->fs->sectorsize <= want;
}

/* 1 when every compressed extent of the inode decompresses, 0 when one does not, -errno. */
static int compressed_extents_whole(struct repair_ctx *r, const struct tree_root_ptr *root, uint64_t ino,
				    uint64_t *bad_at)
{
	struct btrfs_key min = { ino, BTRFS_EXTENT_DATA_KEY, 0 }, max = { ino, BTRFS_EXTENT_DATA_KEY, (uint64_t)-1 }, k;
	const uint8_t *d;
	uint32_t size;
	struct tree_iter it;
	int ret, bad = 0;

	tree_iter_init(&it, r->fs, root, &min, &max);
	while (!bad && (ret = tree_iter_next(&it, &k, &d, &size)) == 1) {
		/* (extent_whole reads the whole struct) */
		if (!item_is_whole(r->fs, &k, d, size) || file_extent_type(d) == BTRFS_FILE_EXTENT_INLINE ||
		    !file_extent_disk_bytenr(d) || file_extent_compression(d) == BTRFS_COMPRESS_NONE)
			continue;
		if ((bad = extent_whole(r, d)) > 0)
			*bad_at = k.offset;
	}
	tree_iter_release(&it);
	if (bad < 0)
		return bad;
	return ret < 0 ? ret : !bad;
}

static int fix_inode(struct repair_ctx *r, uint64_t root, uint64_t ino)
{
	struct tree_root_ptr rp;
	struct tree_path path;
	uint64_t bad_at = 0;
	uint8_t *item;
	int ret = trans_get_root(r->t, root, &rp);

	if (!ret && (ret = compressed_extents_whole(r, &rp, ino, &bad_at)) == 0) {
		r->left++;
		repair_say(r, "root %" PRIu64 " inode %" PRIu64 ": the compressed extent at %" PRIu64
			   " does not decompress: nodatasum left", root, ino, bad_at);
		return 0;
	}
	if (ret < 0)
		return ret;
	ret = link_inode_for_update(r, root, ino, &item, &path);
	if (!ret && (inode_flags(item) & BTRFS_INODE_NODATASUM)) {
		uint64_t from = inode_flags(item);
		inode_set_flags(item, from & ~(uint64_t)BTRFS_INODE_NODATASUM);
		if (r->changes++ < SAY_MAX)
			repair_say(r, "root %" PRIu64 " inode %" PRIu64 ": compressed extents decompress, nodatasum "
				   "cleared (flags 0x%" PRIx64 " -> 0x%" PRIx64 "); their checksums follow", root, ino,
				   from, inode_flags(item));
	}
	tree_path_release(r->fs, &path);
	return ret;
}

int repair_compressed_nodatasum(struct repair_ctx *r)
{
	return repair_each_noted_inode(r, NOTES_NODATASUM, fix_inode);
}
