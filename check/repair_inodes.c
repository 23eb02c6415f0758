// SPDX-License-Identifier: GPL-2.0-only
/* The inodes repair class: link counts, directory sizes and nbytes the
 * check found wrong are recomputed from the inode's own items (its names in
 * inode refs and extrefs, its dir entries' name lengths, its file extents)
 * and written into the inode item, in one transaction. The check notes which
 * inodes (repair_notes.h); the values are recomputed here, from the same
 * items and by the same rules as check/phase_fs_items.c. Besides: a mode
 * without a file type gets the type its directory entry (or its own items)
 * says, a generation from the future the transaction's, an inode without
 * names is linked into /lost+found (check/repair_lostfound.c), and an orphan
 * item for an inode that is gone or still named is removed. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>

#include "check/fs_check.h"
#include "check/repair.h"
#include "check/repair_links.h"
#include "check/repair_notes.h"
#include <btk/csum_tree.h>
#include <btk/tree.h>

#define SAY_MAX 100

static uint32_t ftype_to_mode(uint8_t ftype)
{
	static const uint32_t modes[] = {
		[BTRFS_FT_REG_FILE] = S_IFREG, [BTRFS_FT_DIR] = S_IFDIR, [BTRFS_FT_CHRDEV] = S_IFCHR,
		[BTRFS_FT_BLKDEV] = S_IFBLK, [BTRFS_FT_FIFO] = S_IFIFO, [BTRFS_FT_SOCK] = S_IFSOCK,
		[BTRFS_FT_SYMLINK] = S_IFLNK,
	};

	return ftype < sizeof(modes) / sizeof(modes[0]) ? modes[ftype] : 0;
}

/* The file type an inode's names or items say: its first name's dir index
 * entry, else a directory when it has entries or is a tree's top directory
 * (inode 256, or its ref names itself: ".."), a file when it has extents. */
static int guess_ftype(struct repair_ctx *r, const struct tree_root_ptr *root, uint64_t ino, uint8_t *ftype)
{
	struct btrfs_key min = { ino, 0, 0 }, max = { ino, 255, (uint64_t)-1 }, k, idx = { 0, 0, 0 };
	bool entries = false, extents = false, top = ino == BTRFS_FIRST_FREE_OBJECTID;
	struct tree_iter it;
	const uint8_t *d;
	uint32_t size;
	int ret;

	tree_iter_init(&it, r->fs, root, &min, &max);
	while ((ret = tree_iter_next(&it, &k, &d, &size)) == 1) {
		struct link_entry e;
		uint32_t off = 0;
		if (k.type == BTRFS_INODE_REF_KEY && !idx.objectid && link_entry_next(k.type, d, size, &off, &e))
			idx = (struct btrfs_key){ k.offset, BTRFS_DIR_INDEX_KEY, e.index };
		else if (k.type == BTRFS_INODE_EXTREF_KEY && !idx.objectid && link_entry_next(k.type, d, size, &off, &e))
			idx = (struct btrfs_key){ e.parent, BTRFS_DIR_INDEX_KEY, e.index };
		entries |= k.type == BTRFS_DIR_ITEM_KEY || k.type == BTRFS_DIR_INDEX_KEY;
		extents |= k.type == BTRFS_EXTENT_DATA_KEY;
		top |= k.type == BTRFS_INODE_REF_KEY && k.offset == ino;
	}
	tree_iter_release(&it);
	if (ret < 0)
		return ret;
	*ftype = entries || top ? BTRFS_FT_DIR : extents ? BTRFS_FT_REG_FILE : BTRFS_FT_UNKNOWN;
	if (idx.objectid) {
		uint8_t buf[sizeof(struct btrfs_dir_item)];
		uint32_t n = sizeof(buf);
		struct btrfs_key loc;
		ret = tree_lookup(r->fs, root, &idx, buf, &n);
		if (ret == -ENOENT)
			return 0;
		if (ret)
			return ret;
		struct item_view v = item_view_copied(buf, sizeof(buf), n);
		const uint8_t *at = dir_item_location_ptr_in(&v);
		uint8_t type = dir_item_type_in(&v) & ~BTRFS_FT_ENCRYPTED;

		if (v.past_end)
			return 0;
		key_from_disk(&loc, at);
		if (loc.objectid == ino && ftype_to_mode(type))
			*ftype = type;
	}
	return 0;
}

int repair_make_inode_item(struct repair_ctx *r, uint64_t root, uint64_t ino, uint8_t hint)
{
	struct btrfs_key key = { ino, BTRFS_INODE_ITEM_KEY, 0 };
	uint8_t item[sizeof(struct btrfs_inode_item)] = { 0 }, ftype = BTRFS_FT_UNKNOWN;
	struct tree_root_ptr rp;
	struct inode_counts c;
	uint32_t mode = 0, perm;
	int ret = link_inode_mode(r, root, ino, &mode);

	if (ret != 0)
		return ret < 0 ? ret : 0;   /* made already, or there all along */
	if ((ret = trans_get_root(r->t, root, &rp)) || (ret = inode_count_items(r, &rp, ino, &c)) ||
	    (ret = guess_ftype(r, &rp, ino, &ftype)))
		return ret;
	if (ftype_to_mode(hint))
		ftype = hint;
	if (ino == BTRFS_FIRST_FREE_OBJECTID)
		ftype = BTRFS_FT_DIR;
	else if (ftype == BTRFS_FT_UNKNOWN)
		ftype = BTRFS_FT_REG_FILE;
	if (c.names > UINT32_MAX)
		return fs_error(r->fs, -EUCLEAN, "inode %" PRIu64 " has too many names", ino);
	perm = ftype == BTRFS_FT_DIR ? 0755 : ftype == BTRFS_FT_SYMLINK ? 0777 : 0644;
	link_init_inode_item(r, item, ftype_to_mode(ftype) | perm,
			     (uint32_t)(c.names ? c.names : ino == BTRFS_FIRST_FREE_OBJECTID));
	inode_set_size(item, ftype == BTRFS_FT_DIR ? c.dir_size : c.end);
	inode_set_nbytes(item, c.bytes);
	if ((ret = trans_insert_item(r->t, root, &key, item, sizeof(item))))
		return ret;
	/* a top directory names itself ".." in its own inode ref */
	if (ino == BTRFS_FIRST_FREE_OBJECTID && !c.names &&
	    (ret = link_add_ref(r, root, ino, ino, 0, (const uint8_t *)"..", 2)))
		return ret;
	if (r->changes++ < SAY_MAX)
		repair_say(r, "root %" PRIu64 " inode %" PRIu64 ": inode item made (mode 0%o, nlink %u, size %" PRIu64
			   ")", root, ino, inode_mode(item), inode_nlink(item), inode_size(item));
	return 0;
}

int repair_inode_items(struct repair_ctx *r)
{
	const void *rec;
	int ret = 0;

	/* the notes are read once: without a missing inode item they are left to
	 * the inodes class, which runs on the same findings when nothing changed here */
	while (r->found->counts[PR_INODE_ITEM_MISSING] &&
	       (ret = repair_notes_next(r->found, NOTES_INODES, &rec)) == 1) {
		const struct inode_fix *f = rec;
		if (f->code == PR_INODE_ITEM_MISSING &&
		    (ret = repair_make_inode_item(r, f->root, f->ino, BTRFS_FT_UNKNOWN)) < 0)
			return ret;
	}
	if (ret < 0)
		return ret;
	/* a missing parent that is not a subvolume's top directory is not made here */
	if (!r->changes)
		r->left += r->found->counts[PR_DIR_PARENT_MISSING];
	if (r->changes > SAY_MAX)
		repair_say(r, "... %" PRIu64 " more", r->changes - SAY_MAX);
	return 0;
}

/* Whether regular file ino of tree rp has checksums for the data of one of
 * its extents (1), none (0), or -errno. */
static int file_has_csums(struct repair_ctx *r, const struct tree_root_ptr *rp, uint64_t ino)
{
	struct btrfs_key min = { ino, BTRFS_EXTENT_DATA_KEY, 0 }, max = { ino, BTRFS_EXTENT_DATA_KEY, (uint64_t)-1 }, k;
	struct tree_iter it;
	const uint8_t *d;
	uint32_t size;
	int ret, found = 0;

	tree_iter_init(&it, r->fs, rp, &min, &max);
	while (!found && (ret = tree_iter_next(&it, &k, &d, &size)) == 1) {
		struct csum_tree_cursor c;
		const uint8_t *csums;
		uint64_t lo, hi, at;

		if (size < sizeof(struct btrfs_file_extent_item) || file_extent_type(d) != BTRFS_FILE_EXTENT_REG ||
		    !(at = file_extent_disk_bytenr(d)))
			continue;
		if ((ret = csum_tree_open(&c, r->fs, at, at + file_extent_disk_num_bytes(d))) < 0)
			break;
		ret = csum_tree_next(&c, &lo, &hi, &csums);
		csum_tree_close(&c);
		if (ret < 0)
			break;
		found = ret;
	}
	tree_iter_release(&it);
	return ret < 0 ? ret : found;
}

/* Whether inode ino of tree rp has a verity descriptor: 1, 0, -errno. */
static int has_verity(struct repair_ctx *r, const struct tree_root_ptr *rp, uint64_t ino)
{
	struct btrfs_key min = { ino, BTRFS_VERITY_DESC_ITEM_KEY, 0 }, max = { ino, BTRFS_VERITY_DESC_ITEM_KEY, 0 }, k;
	struct tree_iter it;
	const uint8_t *d;
	uint32_t size;
	int ret;

	tree_iter_init(&it, r->fs, rp, &min, &max);
	ret = tree_iter_next(&it, &k, &d, &size);
	tree_iter_release(&it);
	return ret;
}

/* Mode without a file type, a generation from the future, immutable or
 * append on a symlink, flags the kernel does not know (its tree checker refuses
 * the leaf), a free-space cache inode's mode: the inode item's fields. */
static int fix_inode_item(struct repair_ctx *r, uint64_t root, uint64_t ino, enum problem_code code)
{
	struct tree_root_ptr rp;
	struct tree_path path;
	uint8_t ftype = BTRFS_FT_UNKNOWN, *item;
	int ret = trans_get_root(r->t, root, &rp);

	int csummed = 0, verity = 0;

	if (!ret && code == PR_INODE_MODE_INVALID)
		ret = guess_ftype(r, &rp, ino, &ftype);
	/* unknown flags: the field is damaged, NODATASUM with the rest; the checksums tell */
	if (!ret && code == PR_INODE_FLAGS_UNKNOWN && (csummed = file_has_csums(r, &rp, ino)) < 0)
		ret = csummed;
	if (!ret && code == PR_INODE_FLAGS_UNKNOWN && (verity = has_verity(r, &rp, ino)) < 0)
		ret = verity;
	if (ret)
		return ret;
	if (code == PR_INODE_MODE_INVALID && ftype == BTRFS_FT_UNKNOWN) {
		r->left++;
		repair_say(r, "root %" PRIu64 " inode %" PRIu64 ": nothing tells its file type, mode left", root, ino);
		return 0;
	}
	ret = link_inode_for_update(r, root, ino, &item, &path);
	if (ret == 0 && code == PR_ROOT_TREE_INODE_MODE) {
		uint32_t from = inode_mode(item);
		inode_set_mode(item, S_IFREG | 0600);
		if (r->changes++ < SAY_MAX)
			repair_say(r, "root tree free-space cache inode %" PRIu64 ": mode 0%o -> 0100600", ino, from);
	} else if (ret == 0 && code == PR_INODE_FLAGS_TYPE) {
		uint64_t from = inode_flags(item), to = from & ~(BTRFS_INODE_IMMUTABLE | BTRFS_INODE_APPEND);
		inode_set_flags(item, to);
		if (r->changes++ < SAY_MAX)
			repair_say(r, "root %" PRIu64 " symlink %" PRIu64 ": flags 0x%" PRIx64 " -> 0x%" PRIx64, root, ino,
				   from, to);
	} else if (ret == 0 && code == PR_INODE_FLAGS_UNKNOWN) {
		/* the kernel refuses the leaf for them: no kernel wrote them */
		uint64_t from = inode_flags(item), to = from & INODE_KNOWN_FLAGS;
		if (csummed)   /* the kernel writes no checksums for a NODATASUM (or NODATACOW) file */
			to &= ~(uint64_t)(BTRFS_INODE_NODATASUM | BTRFS_INODE_NODATACOW);
		if (!verity)   /* the kernel reads no file of the verity flag without its descriptor */
			to &= ~(1ULL << 32);
		inode_set_flags(item, to);
		if (r->changes++ < SAY_MAX)
			repair_say(r, "root %" PRIu64 " inode %" PRIu64 ": unknown flags cleared, 0x%" PRIx64 " -> 0x%" PRIx64,
				   root, ino, from, to);
	} else if (ret == 0 && code == PR_INODE_MODE_INVALID) {
		uint32_t from = inode_mode(item), to = (from & 07777) | ftype_to_mode(ftype);
		inode_set_mode(item, to);
		if (r->changes++ < SAY_MAX)
			repair_say(r, "root %" PRIu64 " inode %" PRIu64 ": mode 0%o -> 0%o", root, ino, from, to);
	} else if (ret == 0) {
		uint64_t now = trans_transid(r->t), gen = inode_generation(item), tid = inode_transid(item);
		if (gen > r->fs->generation)
			inode_set_generation(item, now);
		if (tid > r->fs->generation)
			inode_set_transid(item, now);
		if (r->changes++ < SAY_MAX)
			repair_say(r, "root %" PRIu64 " inode %" PRIu64 ": generation %" PRIu64 " transid %" PRIu64
				   " -> %" PRIu64 " %" PRIu64, root, ino, gen, tid, inode_generation(item),
				   inode_transid(item));
	}
	tree_path_release(r->fs, &path);
	return ret;
}

/* An orphan item whose inode is gone or still has names: removed. */
static int fix_orphan_item(struct repair_ctx *r, uint64_t root, uint64_t ino)
{
	struct btrfs_key key = { BTRFS_ORPHAN_OBJECTID, BTRFS_ORPHAN_ITEM_KEY, ino };
	int ret = trans_delete_item(r->t, root, &key);

	if (ret == -ENOENT)
		return 0;
	if (!ret && r->changes++ < SAY_MAX)
		repair_say(r, "root %" PRIu64 ": orphan item for inode %" PRIu64 " removed", root, ino);
	return ret;
}

/* An inode without names into /lost+found, unless the names class named it since the check. */
static int unreachable_link(struct repair_ctx *r, uint64_t root, uint64_t ino)
{
	struct tree_root_ptr rp;
	struct inode_counts c;
	int ret = trans_get_root(r->t, root, &rp);

	if (!ret)
		ret = inode_count_items(r, &rp, ino, &c);
	if (ret || c.names)
		return ret;
	return lostfound_link(r, root, ino);
}

static int fix_inode(struct repair_ctx *r, const struct inode_fix *f)
{
	switch (f->code) {
	case PR_INODE_NLINK:
	case PR_DIR_ISIZE:
	case PR_INODE_NBYTES:
		return repair_inode_recount(r, f->root, f->ino, f->code);
	case PR_INODE_MODE_INVALID:
	case PR_INODE_GENERATION:
	case PR_INODE_FLAGS_TYPE:
	case PR_INODE_FLAGS_UNKNOWN:
	case PR_ROOT_TREE_INODE_MODE:
		return fix_inode_item(r, f->root, f->ino, f->code);
	case PR_INODE_UNREACHABLE:
		return unreachable_link(r, f->root, f->ino);
	case PR_ORPHAN_ITEM_BAD:
		return fix_orphan_item(r, f->root, f->ino);
	case PR_FILE_EXTENT_HOLE:
		return repair_inode_holes(r, f->root, f->ino);
	case PR_FILE_EXTENT_INLINE:
		return repair_inline_ram_bytes(r, f->root, f->ino);
	case PR_INLINE_EXTENT_CORRUPT:
		return repair_inline_compressed_ram(r, f->root, f->ino);
	default:
		return 0;
	}
}

int repair_inodes(struct repair_ctx *r)
{
	const void *rec;
	int ret;

	while ((ret = repair_notes_next(r->found, NOTES_INODES, &rec)) == 1)
		if ((ret = fix_inode(r, rec)) < 0)
			return ret;
	if (ret < 0)
		return ret;
	if (r->changes > SAY_MAX)
		repair_say(r, "... %" PRIu64 " more", r->changes - SAY_MAX);
	return 0;
}
