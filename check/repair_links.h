/* SPDX-License-Identifier: GPL-2.0-only */
/* Names in a subvolume tree, changed inside a repair's transaction: the
 * entries of dir items, dir indexes and xattr items, and the names of inode
 * refs and extrefs, added or removed one at a time (an item holding several
 * names keeps the others). Used by the names and inodes repair classes. */
#ifndef BTK_CHECK_REPAIR_LINKS_H
#define BTK_CHECK_REPAIR_LINKS_H

#include <stdbool.h>
#include <stdint.h>

#include "check/repair.h"

#define BTRFS_NAME_MAX 255   /* longest name; the link_add_* calls refuse longer (-EINVAL) */

/* One name of an item, as link_entry_next reads it. */
struct link_entry {
	uint32_t off, size;     /* where the entry lies in the item, header included */
	const uint8_t *name;
	uint16_t len;
	uint64_t index;         /* inode ref / extref */
	uint64_t parent;        /* extref */
	struct btrfs_key loc;   /* dir item / dir index / xattr */
	uint8_t type;           /* dir item / dir index / xattr */
};

/* The next entry of an item of key type `type` from *off: true and *e, or
 * false at the end or at an entry that does not fit the item. */
bool link_entry_next(uint8_t type, const uint8_t *d, uint32_t size, uint32_t *off, struct link_entry *e);

/* Append one whole entry (n bytes) to the item at key, or create the item. */
int link_append(struct repair_ctx *r, uint64_t root, const struct btrfs_key *key, const uint8_t *entry, uint32_t n);
/* Add name -> child (a BTRFS_FT_* type) to dir's DIR_ITEM keyed by the name's
 * hash, next to the names already there. */
int link_add_dir_item(struct repair_ctx *r, uint64_t root, uint64_t dir, const uint8_t *name, uint16_t len,
		      uint64_t child, uint8_t type);
/* Add name -> subvolume subvol (location (subvol, ROOT_ITEM, -1)) to dir:
 * its DIR_INDEX (dir, index), -EEXIST if taken; with index 0 its DIR_ITEM. */
int link_add_subvol_entry(struct repair_ctx *r, uint64_t root, uint64_t dir, uint64_t index, const uint8_t *name,
			  uint16_t len, uint64_t subvol);
/* Add the DIR_INDEX (dir, index): -EEXIST if that index is taken. */
int link_add_dir_index(struct repair_ctx *r, uint64_t root, uint64_t dir, uint64_t index, const uint8_t *name,
		       uint16_t len, uint64_t child, uint8_t type);
/* Add name (in dir, with index) to child's INODE_REF item for dir (to an
 * extref when that item is full and the filesystem has extrefs). */
int link_add_ref(struct repair_ctx *r, uint64_t root, uint64_t child, uint64_t dir, uint64_t index,
		 const uint8_t *name, uint16_t len);
/* Add an extref of child (keyed by the extref hash of dir and name). */
int link_add_extref(struct repair_ctx *r, uint64_t root, uint64_t child, uint64_t dir, uint64_t index,
		    const uint8_t *name, uint16_t len);
/* Remove the entry called name from the item at key (a dir item, dir index,
 * xattr, inode ref or extref; for an extref, of parent dir): the item goes
 * with its last entry. -ENOENT when there is no such entry. */
int link_remove(struct repair_ctx *r, uint64_t root, const struct btrfs_key *key, uint64_t dir,
		const uint8_t *name, uint16_t len);
/* The same, for a dir item or dir index preferring the entry that names
 * inode child (of two entries with one name). */
int link_remove_of(struct repair_ctx *r, uint64_t root, const struct btrfs_key *key, uint64_t dir,
		   const uint8_t *name, uint16_t len, uint64_t child);
/* Set the index of name in the inode ref or extref item at key. */
int link_set_ref_index(struct repair_ctx *r, uint64_t root, const struct btrfs_key *key, uint64_t dir,
		       const uint8_t *name, uint16_t len, uint64_t index);
/* The last key <= max in the tree: 1 and *found, 0 when none, -errno. */
int link_last_key(struct repair_ctx *r, uint64_t root, const struct btrfs_key *max, struct btrfs_key *found);
/* The inode item of ino, to change in place (trans_item_for_update; path
 * initialised here, released by the caller whatever the result). */
int link_inode_for_update(struct repair_ctx *r, uint64_t root, uint64_t ino, uint8_t **item,
			  struct tree_path *path);
/* The index after the highest DIR_INDEX of dir (2 for an empty directory). */
int link_next_index(struct repair_ctx *r, uint64_t root, uint64_t dir, uint64_t *index);

/* 1 when inode ino of root has an inode ref or extref (to any parent), 0 when not, -errno. */
int link_has_ref(struct repair_ctx *r, uint64_t root, uint64_t ino);
/* 1 and *mode when inode ino of root has an inode item, 0 when not, -errno. */
int link_inode_mode(struct repair_ctx *r, uint64_t root, uint64_t ino, uint32_t *mode);
/* Fill a zeroed inode item for an inode the repair creates: generation and
 * transid of this transaction, every time stamp now. */
void link_init_inode_item(struct repair_ctx *r, uint8_t *item, uint32_t mode, uint32_t nlink);

/* Link inode ino of root into /lost+found of its subvolume (made when
 * missing), named by its inode number, and set its nlink to 1.
 * check/repair_lostfound.c. */
int lostfound_link(struct repair_ctx *r, uint64_t root, uint64_t ino);
/* Link subvolume subvol into /lost+found of the top-level subvolume (made
 * when missing) as "subvol-ID": its dir item and dir index, the directory's
 * size; *dir, *index and name (256 bytes, *len long) say where, for its root
 * refs. check/repair_lostfound.c. */
int lostfound_link_subvol(struct repair_ctx *r, uint64_t subvol, uint64_t *dir, uint64_t *index, char *name,
			  uint16_t *len);

/* The names of inode child whose parent dir is no directory and holds no
 * entries (a damaged ref's parent): removed, and the inode linked into
 * /lost+found when it has no other name left. check/repair_parentless.c. */
int names_drop_parentless(struct repair_ctx *r, uint64_t root, uint64_t dir, uint64_t child);
/* 1 when dir of root is no directory (no inode item, or another type) and
 * holds no dir item or dir index, 0 when it is or does, -errno. */
int names_parent_missing(struct repair_ctx *r, uint64_t root, uint64_t dir);

/* What an inode's items say its counters are (check/repair_recount.c). */
struct inode_counts {
	uint64_t names;       /* names in inode refs and extrefs */
	uint64_t dir_size;    /* name lengths of its dir items and dir indexes */
	uint64_t bytes;       /* bytes of its file extents (inline: their length) */
	uint64_t end;         /* where its last file extent ends */
};
/* Count the items of inode ino in the tree at root. 0 or -errno. */
int inode_count_items(struct repair_ctx *r, const struct tree_root_ptr *root, uint64_t ino,
		      struct inode_counts *c);
/* Recompute one counter of an inode from its items (code: PR_INODE_NLINK,
 * PR_DIR_ISIZE or PR_INODE_NBYTES), as the inodes class does; says what it
 * changed (nothing when it was right). An inode whose nlink is recomputed and
 * that has no name left is linked into /lost+found. check/repair_recount.c. */
int repair_inode_recount(struct repair_ctx *r, uint64_t root, uint64_t ino, enum problem_code code);

/* An inode whose items survived its inode item (or a subvolume's top
 * directory that names point into, or an inode only a directory entry still
 * names): a new inode item from those items, as btrfs check makes it: the
 * type hint says (a BTRFS_FT_* type from a directory entry; BTRFS_FT_UNKNOWN:
 * none), else the type its directory entry or its items say (the top
 * directory: a directory), mode 0755, 0777 (symlinks) or 0644, nlink its names, size its
 * entries' name lengths or the end of its last extent, nbytes its extents,
 * owner root, times now. Nothing when it has an inode item. check/repair_inodes.c. */
int repair_make_inode_item(struct repair_ctx *r, uint64_t root, uint64_t ino, uint8_t hint);
/* Inodes of root whose inode item was in a block the lost-blocks class
 * dropped and that a surviving dir item or dir index names: an inode item
 * made for each (repair_make_inode_item, the entry's type as hint).
 * check/repair_lost_inodes.c. */
int repair_lost_named_inodes(struct repair_ctx *r, uint64_t root);

/* Without the no-holes feature: an explicit hole file extent for each range
 * up to the size (rounded up to a sector) that no file extent covers, as the
 * kernel would have written. check/repair_holes.c. */
int repair_inode_holes(struct repair_ctx *r, uint64_t root, uint64_t ino);
/* An uncompressed inline extent's ram_bytes becomes the size of its data (the
 * nbytes recount counts that size already). check/repair_holes.c. */
int repair_inline_ram_bytes(struct repair_ctx *r, uint64_t root, uint64_t ino);
/* A compressed inline extent's ram_bytes becomes the length its data
 * decompresses to (a sector at most), and nbytes is counted again. */
int repair_inline_compressed_ram(struct repair_ctx *r, uint64_t root, uint64_t ino);

#endif
