/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Names of on-disk constants as dump-tree style tools print them: key types,
 * trees, block-group profiles, file extent and dir entry types. Pure lookups:
 * nothing here prints or allocates. */
#ifndef BTK_NAMES_H
#define BTK_NAMES_H

#include <stddef.h>
#include <stdint.h>

/* Enough for "UNKNOWN.255" and its terminator. */
#define KEY_TYPE_NAME_BUF 16
/* Enough for every type bit, every profile bit and a 64-bit hex remainder. */
#define BG_FLAGS_STR_BUF 128
/* A canonical uuid string and its terminator. */
#define UUID_STR_BUF 37

/* "INODE_ITEM", "EXTENT_CSUM", ... as btrfs-progs dump-tree prints them, or
 * NULL for a type it does not know. */
const char *key_type_name(uint8_t type);
/* NAME as key_type_name() gives it, case ignored: 0 and *out, or -EINVAL */
int key_type_from_name(const char *name, uint8_t *out);
/* The name, or "UNKNOWN.<n>" written into buf[KEY_TYPE_NAME_BUF]. */
const char *key_type_name_or_number(uint8_t type, char *buf);

/* "ROOT_TREE", "FS_TREE", "TREE_LOG", ... for the well-known tree ids, NULL
 * for subvolumes and anything else. */
const char *tree_name(uint64_t objectid);
/* Parse a tree id given on the command line: a decimal number ("-6" means
 * 2^64-6, like the negative ids of the log and reloc trees) or a short name,
 * case-insensitive, '-' and '_' alike, with or without "_tree": root, extent,
 * chunk, dev, fs, csum, quota, uuid, free-space, block-group, raid-stripe,
 * data-reloc, log (also tree-log), reloc (also tree-reloc).
 * 0 with *out set, or -EINVAL. */
int tree_id_parse(const char *s, uint64_t *out);

/* Block-group / chunk type flags as "DATA|RAID1", "METADATA|DUP", "SYSTEM"
 * (single has no profile name), "DATA|METADATA" for mixed groups. Bits it
 * does not know are appended as "|0x..."; flags 0 gives "0x0". Truncates
 * safely to len (BG_FLAGS_STR_BUF always suffices). */
void block_group_flags_str(uint64_t flags, char *buf, size_t len);

/* "none", "zlib", "lzo", "zstd", or NULL. */
const char *compression_name(uint8_t compression);
/* "inline", "regular", "prealloc", or NULL. */
const char *file_extent_type_name(uint8_t type);
/* "FILE", "DIR", "CHRDEV", "BLKDEV", "FIFO", "SOCK", "SYMLINK", "XATTR", or
 * NULL (also for 0, BTRFS_FT_UNKNOWN). The BTRFS_FT_ENCRYPTED bit is ignored. */
const char *dir_type_name(uint8_t type);

/* Lowercase canonical form "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx". */
void uuid_to_str(const uint8_t uuid[16], char out[UUID_STR_BUF]);

#endif
