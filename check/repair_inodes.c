/* The inodes repair class: link counts, directory sizes and nbytes the
 * check found wrong are recomputed from the inode's own items (its names in
 * inode refs and extrefs, its dir entries' name lengths, its file extents)
 * and written into the inode item, in one transaction. The check notes which
 * inodes (repair_notes.h); the values are recomputed here, from the same
 * items and by the same rules as check/phase_fs_items.c. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "check/repair.h"
#include "check/repair_notes.h"
#include "libfs/tree.h"

#define SAY_MAX 100

struct inode_counts {
	uint64_t names;       /* names in inode refs and extrefs */
	uint64_t dir_size;    /* name lengths of its dir items and dir indexes */
	uint64_t bytes;       /* bytes of its file extents (inline: their length) */
};

static void count_refs(const struct btrfs_key *k, const uint8_t *d, uint32_t size, struct inode_counts *c)
{
	uint32_t hdr = k->type == BTRFS_INODE_REF_KEY ? sizeof(struct btrfs_inode_ref)
						       : sizeof(struct btrfs_inode_extref);

	for (uint32_t off = 0; size - off >= hdr;) {
		uint16_t len = k->type == BTRFS_INODE_REF_KEY ? inode_ref_name_len(d + off)
							     : inode_extref_name_len(d + off);
		if (size - off - hdr < len)
			break;
		c->names++;
		off += hdr + len;
	}
}

static void count_dir_entries(const uint8_t *d, uint32_t size, struct inode_counts *c)
{
	const uint32_t hdr = sizeof(struct btrfs_dir_item);

	for (uint32_t off = 0; size - off >= hdr;) {
		uint32_t len = dir_item_name_len(d + off), data_len = dir_item_data_len(d + off);
		if (size - off - hdr < len + data_len)
			break;
		c->dir_size += len;
		off += hdr + len + data_len;
	}
}

static void count_extent(const uint8_t *d, uint32_t size, struct inode_counts *c)
{
	if (size < BTRFS_FILE_EXTENT_INLINE_DATA_START)
		return;
	if (file_extent_type(d) == BTRFS_FILE_EXTENT_INLINE)
		c->bytes += file_extent_ram_bytes(d);
	else if (size >= sizeof(struct btrfs_file_extent_item) && file_extent_disk_bytenr(d))
		c->bytes += file_extent_num_bytes(d);
}

static int count_inode(struct repair_ctx *r, const struct tree_root_ptr *root, uint64_t ino,
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
			count_extent(d, size, c);
			break;
		}
	}
	tree_iter_release(&it);
	return ret < 0 ? ret : 0;
}

static int fix_inode(struct repair_ctx *r, const struct inode_fix *f, uint64_t *said)
{
	struct btrfs_key key = { f->ino, BTRFS_INODE_ITEM_KEY, 0 };
	struct tree_root_ptr root;
	struct inode_counts c;
	struct tree_path path;
	uint8_t *item;
	uint32_t size;
	int ret = trans_get_root(r->t, f->root, &root);

	if (!ret)
		ret = count_inode(r, &root, f->ino, &c);
	if (ret)
		return ret;
	tree_path_init(&path);
	ret = trans_item_for_update(r->t, f->root, &key, &item, &size, &path);
	if (ret == 0 && size < sizeof(struct btrfs_inode_item))
		ret = fs_error(r->fs, -EUCLEAN, "root %" PRIu64 " inode %" PRIu64 ": inode item is %u bytes", f->root,
			       f->ino, size);
	if (ret == 0) {
		const char *what = NULL;
		uint64_t from = 0, to = 0;
		if (f->code == PR_INODE_NLINK) {
			/* a subvolume's top directory has no name inside the subvolume */
			to = c.names ? c.names : (f->ino == BTRFS_FIRST_FREE_OBJECTID ? 1 : 0);
			from = inode_nlink(item);
			what = "nlink";
			if (to > UINT32_MAX)
				ret = fs_error(r->fs, -EUCLEAN, "inode %" PRIu64 " has too many names", f->ino);
			else
				inode_set_nlink(item, (uint32_t)to);
		} else if (f->code == PR_DIR_ISIZE) {
			from = inode_size(item);
			to = c.dir_size;
			what = "size";
			inode_set_size(item, to);
		} else if (f->code == PR_INODE_NBYTES) {
			from = inode_nbytes(item);
			to = c.bytes;
			what = "nbytes";
			inode_set_nbytes(item, to);
		}
		if (what && !ret) {
			r->changes++;
			if ((*said)++ < SAY_MAX)
				repair_say(r, "root %" PRIu64 " inode %" PRIu64 ": %s %" PRIu64 " -> %" PRIu64, f->root,
					   f->ino, what, from, to);
		}
	}
	tree_path_release(r->fs, &path);
	return ret;
}

int repair_inodes(struct repair_ctx *r)
{
	const void *rec;
	uint64_t said = 0;
	int ret;

	while ((ret = repair_notes_next(r->found, NOTES_INODES, &rec)) == 1)
		if ((ret = fix_inode(r, rec, &said)) < 0)
			return ret;
	if (ret < 0)
		return ret;
	if (said > SAY_MAX)
		repair_say(r, "... %" PRIu64 " more", said - SAY_MAX);
	return 0;
}
