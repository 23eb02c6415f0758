// SPDX-License-Identifier: GPL-2.0-only
/* Explicit holes where a file without the no-holes feature lacks file
 * extents, and an uncompressed inline extent's ram_bytes from its data
 * (check/repair_links.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check/inline_extent.h"
#include "check/repair.h"
#include "check/repair_links.h"
#include <btk/format.h>
#include <btk/item_check.h>
#include <btk/tree.h>

#define SAY_MAX 50

struct gap {
	uint64_t start, len;
};

struct gaps {
	struct gap *v;
	size_t n, cap;
};

static int gap_add(struct gaps *g, uint64_t start, uint64_t end)
{
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 16;
		struct gap *v = realloc(g->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		g->v = v;
		g->cap = cap;
	}
	g->v[g->n++] = (struct gap){ start, end - start };
	return 0;
}

/* The sector-aligned ranges below the rounded-up size that no file extent covers. */
static int find_gaps(struct repair_ctx *r, const struct tree_root_ptr *root, uint64_t ino, struct gaps *g,
		     uint64_t *isize)
{
	struct btrfs_key min = { ino, 0, 0 }, max = { ino, BTRFS_EXTENT_DATA_KEY, (uint64_t)-1 }, k;
	uint32_t ss = r->fs->sectorsize, size;
	uint64_t end = 0;
	bool have_inode = false;
	const uint8_t *d;
	struct tree_iter it;
	int ret;

	tree_iter_init(&it, r->fs, root, &min, &max);
	while ((ret = tree_iter_next(&it, &k, &d, &size)) == 1) {
		struct item_view v = item_view_of(d, size);
		uint64_t e;
		uint8_t type;

		if (k.type == BTRFS_INODE_ITEM_KEY && item_view_has_fixed(&v, k.type)) {
			have_inode = true;
			*isize = inode_size(d);
		}
		if (k.type != BTRFS_EXTENT_DATA_KEY)
			continue;
		type = file_extent_type_in(&v);
		if (type == BTRFS_FILE_EXTENT_INLINE)
			e = k.offset + (file_extent_ram_bytes_in(&v) + ss - 1) / ss * ss;
		else
			e = k.offset + file_extent_num_bytes_in(&v);
		if (v.past_end)
			continue;
		if (k.offset > end && k.offset % ss == 0 && end % ss == 0 && (ret = gap_add(g, end, k.offset)))
			break;
		if (e > end)
			end = e;
	}
	tree_iter_release(&it);
	if (ret < 0)
		return ret;
	if (!have_inode)
		return -ENOENT;
	uint64_t want = *isize / ss * ss + (*isize % ss ? ss : 0);
	/* (want < isize: the rounding wrapped past 2^64) */
	if (want > end && end % ss == 0 && want >= *isize)
		ret = gap_add(g, end, want);
	return ret;
}

static int insert_hole(struct repair_ctx *r, uint64_t root, uint64_t ino, const struct gap *gap)
{
	struct btrfs_key key = { ino, BTRFS_EXTENT_DATA_KEY, gap->start };
	uint8_t fe[sizeof(struct btrfs_file_extent_item)];

	memset(fe, 0, sizeof(fe));
	file_extent_set_generation(fe, trans_transid(r->t));
	file_extent_set_ram_bytes(fe, gap->len);
	file_extent_set_type(fe, BTRFS_FILE_EXTENT_REG);
	file_extent_set_num_bytes(fe, gap->len);
	return trans_insert_item(r->t, root, &key, fe, sizeof(fe));
}

int repair_inline_ram_bytes(struct repair_ctx *r, uint64_t root, uint64_t ino)
{
	struct btrfs_key key = { ino, BTRFS_EXTENT_DATA_KEY, 0 };
	struct tree_path path;
	uint8_t *item;
	uint32_t size;
	int ret;

	tree_path_init(&path);
	ret = trans_item_for_update(r->t, root, &key, &item, &size, &path);
	if (!ret && size > BTRFS_FILE_EXTENT_INLINE_DATA_START && file_extent_type(item) == BTRFS_FILE_EXTENT_INLINE &&
	    file_extent_compression(item) == BTRFS_COMPRESS_NONE) {
		uint64_t from = file_extent_ram_bytes(item), to = size - BTRFS_FILE_EXTENT_INLINE_DATA_START;
		file_extent_set_ram_bytes(item, to);
		if (r->changes++ < SAY_MAX)
			repair_say(r, "root %" PRIu64 " inode %" PRIu64 ": inline extent ram_bytes %" PRIu64 " -> %" PRIu64
				   " (its data)", root, ino, from, to);
	} else if (!ret || ret == -ENOENT) {
		r->left++;
		ret = 0;
	}
	tree_path_release(r->fs, &path);
	return ret;
}

int repair_inline_compressed_ram(struct repair_ctx *r, uint64_t root, uint64_t ino)
{
	struct btrfs_key key = { ino, BTRFS_EXTENT_DATA_KEY, 0 };
	uint32_t cap = r->fs->sectorsize + 1, size;
	uint8_t *out = malloc(cap), *item;
	struct tree_path path;
	long got = -1;
	int ret;

	if (!out)
		return -ENOMEM;
	tree_path_init(&path);
	ret = trans_item_for_update(r->t, root, &key, &item, &size, &path);
	if (!ret && size > BTRFS_FILE_EXTENT_INLINE_DATA_START && file_extent_type(item) == BTRFS_FILE_EXTENT_INLINE &&
	    file_extent_compression(item) != BTRFS_COMPRESS_NONE)
		got = inline_extent_decompress(file_extent_compression(item), item + BTRFS_FILE_EXTENT_INLINE_DATA_START,
					       size - BTRFS_FILE_EXTENT_INLINE_DATA_START, out, cap);
	if (!ret && got > 0 && (uint64_t)got < cap) {
		uint64_t from = file_extent_ram_bytes(item);
		file_extent_set_ram_bytes(item, (uint64_t)got);
		if (r->changes++ < SAY_MAX)
			repair_say(r, "root %" PRIu64 " inode %" PRIu64 ": compressed inline extent ram_bytes %" PRIu64
				   " -> %ld (what it decompresses to)", root, ino, from, got);
	} else if (!ret || ret == -ENOENT) {
		r->left++;
		ret = 0;
	}
	tree_path_release(r->fs, &path);
	free(out);
	/* nbytes counts ram_bytes: count it again */
	return ret ? ret : repair_inode_recount(r, root, ino, PR_INODE_NBYTES);
}

/* A symlink whose target (its one inline extent) is gone: a hole cannot
 * stand for it (btrfs check wants a symlink's extent inline), so its size
 * becomes 0 -- the target is lost either way. 1: not a symlink. */
static int empty_symlink(struct repair_ctx *r, uint64_t root, uint64_t ino)
{
	struct btrfs_key key = { ino, BTRFS_INODE_ITEM_KEY, 0 };
	struct tree_path path;
	uint8_t *item;
	uint32_t size;
	int ret;

	tree_path_init(&path);
	ret = trans_item_for_update(r->t, root, &key, &item, &size, &path);
	if (!ret && (!item_has_fixed(BTRFS_INODE_ITEM_KEY, size) || !S_ISLNK(inode_mode(item))))
		ret = 1;
	if (!ret) {
		uint64_t from = inode_size(item);
		inode_set_size(item, 0);
		if (r->changes++ < SAY_MAX)
			repair_say(r, "root %" PRIu64 " inode %" PRIu64 ": symlink without its target: size %" PRIu64
				   " -> 0", root, ino, from);
	}
	tree_path_release(r->fs, &path);
	return ret;
}

int repair_inode_holes(struct repair_ctx *r, uint64_t root, uint64_t ino)
{
	struct tree_root_ptr rp;
	struct gaps g = { 0 };
	uint64_t isize = 0;
	int ret = trans_get_root(r->t, root, &rp);

	if (!ret)
		ret = find_gaps(r, &rp, ino, &g, &isize);
	if (ret == -ENOENT) { /* no inode item: the inode-items class's business */
		r->left++;
		ret = 0;
	}
	/* a symlink has one inline extent at 0 or none: a gap is all of it */
	if (!ret && g.n && (ret = empty_symlink(r, root, ino)) != 1) {
		free(g.v);
		return ret;
	}
	if (ret == 1)
		ret = 0;
	for (size_t i = 0; !ret && i < g.n; i++) {
		ret = insert_hole(r, root, ino, &g.v[i]);
		if (!ret && r->changes++ < SAY_MAX)
			repair_say(r, "root %" PRIu64 " inode %" PRIu64 ": hole [%" PRIu64 ", %" PRIu64 ") made explicit",
				   root, ino, g.v[i].start, g.v[i].start + g.v[i].len);
	}
	free(g.v);
	return ret;
}
