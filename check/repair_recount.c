// SPDX-License-Identifier: GPL-2.0-only
/* An inode's counters recomputed from its own items (names in inode refs and
 * extrefs, dir entries' name lengths, file extents) and written into its
 * inode item: shared by the inodes class (repair_inodes.c) and the fixes it
 * calls (repair_holes.c, repair_names.c, ...), so it lives below them. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "check/repair.h"
#include "check/repair_links.h"
#include <btk/item_check.h>
#include <btk/tree.h>

#define SAY_MAX 100

static void count_refs(const struct btrfs_key *k, const uint8_t *d, uint32_t size, struct inode_counts *c)
{
	struct item_view v = item_view_of(d, size);
	struct item_entry e;
	uint32_t off = 0;

	/* (up to the first entry that does not fit) */
	while (item_entry_next(k->type, &v, &off, &e) == 1)
		c->names++;
}

static void count_dir_entries(const uint8_t *d, uint32_t size, struct inode_counts *c)
{
	struct item_view v = item_view_of(d, size);
	struct item_entry e;
	uint32_t off = 0;

	/* (up to the first entry that does not fit) */
	while (item_entry_next(BTRFS_DIR_ITEM_KEY, &v, &off, &e) == 1)
		c->dir_size += e.name_len;
}

static void count_extent(uint64_t offset, const uint8_t *d, uint32_t size, struct inode_counts *c)
{
	struct item_view v = item_view_of(d, size);
	uint8_t type = file_extent_type_in(&v);
	uint64_t bytenr, num;

	if (v.past_end)
		return;
	if (type == BTRFS_FILE_EXTENT_INLINE) {
		/* uncompressed, the data is what counts (a wrong ram_bytes is made right from it) */
		uint64_t ram = file_extent_compression_in(&v) == BTRFS_COMPRESS_NONE
				       ? size - BTRFS_FILE_EXTENT_INLINE_DATA_START : file_extent_ram_bytes_in(&v);
		c->bytes += ram;
		c->end = offset + ram;
		return;
	}
	bytenr = file_extent_disk_bytenr_in(&v);
	num = file_extent_num_bytes_in(&v);
	if (v.past_end)
		return;
	if (bytenr)
		c->bytes += num;
	c->end = offset + num;
}

int inode_count_items(struct repair_ctx *r, const struct tree_root_ptr *root, uint64_t ino,
		      struct inode_counts *c)
{
	struct btrfs_key min = { ino, 0, 0 }, max = { ino, 255, (uint64_t)-1 }, k;
	struct tree_iter it;
	const uint8_t *d;
	uint32_t size;
	int ret;

	memset(c, 0, sizeof(*c));
	tree_iter_init(&it, r->fs, root, &min, &max);
	while ((ret = tree_iter_next(&it, &k, &d, &size)) == 1) {
		switch (k.type) {
		case BTRFS_INODE_REF_KEY:
		case BTRFS_INODE_EXTREF_KEY:
			count_refs(&k, d, size, c);
			break;
		case BTRFS_DIR_ITEM_KEY:
		case BTRFS_DIR_INDEX_KEY:
			count_dir_entries(d, size, c);
			break;
		case BTRFS_EXTENT_DATA_KEY:
			count_extent(k.offset, d, size, c);
			break;
		}
	}
	tree_iter_release(&it);
	return ret < 0 ? ret : 0;
}

/* Set one counter of the inode item to its recomputed value. */
static int set_counter(struct repair_ctx *r, uint64_t root, uint64_t ino, enum problem_code code,
		       const struct inode_counts *c)
{
	struct tree_path path;
	const char *what = NULL;
	uint64_t from = 0, to = 0;
	uint8_t *item;
	int ret = link_inode_for_update(r, root, ino, &item, &path);

	if (ret == 0 && code == PR_INODE_NLINK) {
		/* a subvolume's top directory has no name inside the subvolume */
		to = c->names ? c->names : (ino == BTRFS_FIRST_FREE_OBJECTID ? 1 : 0);
		from = inode_nlink(item);
		what = "nlink";
		if (to > UINT32_MAX)
			ret = fs_error(r->fs, -EUCLEAN, "inode %" PRIu64 " has too many names", ino);
		else
			inode_set_nlink(item, (uint32_t)to);
	} else if (ret == 0 && code == PR_DIR_ISIZE) {
		from = inode_size(item);
		to = c->dir_size;
		what = "size";
		inode_set_size(item, to);
	} else if (ret == 0 && code == PR_INODE_NBYTES) {
		from = inode_nbytes(item);
		to = c->bytes;
		what = "nbytes";
		inode_set_nbytes(item, to);
	}
	if (what && !ret && from != to) {
		if (r->changes++ < SAY_MAX)
			repair_say(r, "root %" PRIu64 " inode %" PRIu64 ": %s %" PRIu64 " -> %" PRIu64, root, ino, what,
				   from, to);
	}
	tree_path_release(r->fs, &path);
	return ret;
}

/* A subvolume's top directory that lost its ".." inode ref (its one name,
 * as the kernel and btrfs check count it): the ref again, and nlink 1. */
static int top_dir_ref(struct repair_ctx *r, uint64_t root, struct inode_counts *c)
{
	const uint64_t ino = BTRFS_FIRST_FREE_OBJECTID;
	int ret = link_add_ref(r, root, ino, ino, 0, (const uint8_t *)"..", 2);

	if (ret)
		return ret;
	if (r->changes++ < SAY_MAX)
		repair_say(r, "root %" PRIu64 " inode %" PRIu64 ": its \"..\" inode ref made again", root, ino);
	c->names = 1;
	return set_counter(r, root, ino, PR_INODE_NLINK, c);
}

int repair_inode_recount(struct repair_ctx *r, uint64_t root, uint64_t ino, enum problem_code code)
{
	struct tree_root_ptr rp;
	struct inode_counts c;
	int ret = trans_get_root(r->t, root, &rp);

	if (!ret)
		ret = inode_count_items(r, &rp, ino, &c);
	if (!ret && code == PR_INODE_NLINK && !c.names && ino != BTRFS_FIRST_FREE_OBJECTID)
		return lostfound_link(r, root, ino);   /* no name left: nlink 0 would lose it */
	if (!ret && code == PR_INODE_NLINK && !c.names)
		return top_dir_ref(r, root, &c);
	return ret ? ret : set_counter(r, root, ino, code, &c);
}
