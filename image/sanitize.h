/* SPDX-License-Identifier: GPL-2.0-only */
/* Sanitizing tree blocks for a shareable metadata image: file names,
 * xattr names, subvolume names are replaced by same-length random names
 * (re-keyed, or hash-preserving in collide mode), and inline file data,
 * xattr values and symlink targets are wiped, with the checksum recomputed
 * so that the restored filesystem still checks clean. */
#ifndef BTK_IMAGE_SANITIZE_H
#define BTK_IMAGE_SANITIZE_H

#include <stdint.h>

enum sanitize_mode { SANITIZE_NONE, SANITIZE_RANDOM, SANITIZE_COLLIDE };

struct sanitizer;
/* A sanitizer for blocks of one filesystem (csum_type, nodesize); seed
 * makes the random choices reproducible. */
int sanitizer_new(struct sanitizer **s, enum sanitize_mode mode, uint16_t csum_type,
		  uint32_t nodesize, uint64_t seed);
/* Sanitize one tree block in place and recompute its checksum. A leaf: names,
 * inline data, xattr values, symlink targets; in random mode keys may change,
 * and the leaf's new first key is recorded. A node: each pointer's key is
 * replaced by its child's new first key when that child changed. Call it on a
 * node only after all its children (post-order). Returns 0, or a negative
 * errno (sanitizer_error() says why) on a block it cannot parse or cannot
 * rename without breaking the tree. */
int sanitize_tree_block(struct sanitizer *s, uint8_t *block);
/* Optional first pass, before any sanitize_tree_block: show every leaf (nodes
 * are ignored) of every tree once. It records which key range each copy of a
 * dir item or inode extref allows (snapshots and log trees hold copies in
 * leaves split differently), so random mode can pick new hashes that fit
 * every copy. Without it, random mode may fail with -EAGAIN on a filesystem
 * with snapshots or a log tree. 0 or negative errno. */
int sanitize_prescan(struct sanitizer *s, const uint8_t *block);
/* sanitize_prescan over every leaf of every tree that can hold names (each
 * shared block once): what a dumper calls right after sanitizer_new. 0 or
 * negative errno (the filesystem's or the sanitizer's message says why). */
struct fs_info;
int sanitize_prescan_fs(struct sanitizer *s, struct fs_info *fs);
/* Replace the filesystem label of a superblock (BTRFS_SUPER_INFO_SIZE bytes)
 * with same-length random characters and recompute its checksum. 0 or
 * -EINVAL on an unknown checksum type. */
int sanitize_super(struct sanitizer *s, uint8_t *super);
/* Counts for reporting. */
struct sanitize_stats {
	uint64_t names;        /* distinct names replaced */
	uint64_t items;        /* name-bearing items rewritten */
	uint64_t rekeyed;      /* items whose key offset changed */
	uint64_t wiped_bytes;  /* inline data / xattr value / symlink bytes zeroed or replaced */
	uint64_t resorted;     /* leaves whose items had to be re-sorted */
	uint64_t fallbacks;    /* collide mode: names too short, randomized instead */
};
void sanitizer_stats(const struct sanitizer *s, struct sanitize_stats *out);
/* Message about the last error of sanitize_tree_block (or ""). */
const char *sanitizer_error(const struct sanitizer *s);
void sanitizer_free(struct sanitizer *s);

#endif
