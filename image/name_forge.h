/* SPDX-License-Identifier: GPL-2.0-only */
/* Forging replacement names with a chosen crc32c: crc32c is affine over
 * GF(2), so the last 4 bytes of a name can be solved for any target hash
 * given the bytes before them; shorter names are searched. */
#ifndef BTK_IMAGE_NAME_FORGE_H
#define BTK_IMAGE_NAME_FORGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct forge_rng {
	uint64_t state;
};
uint64_t forge_rand(struct forge_rng *rng);

/* The raw crc32c of a name with a seed (btrfs name hash: seed ~1; inode
 * extref hash: seed = parent objectid). */
uint32_t forge_hash(uint32_t seed, const void *name, size_t len);

/* A name is usable in a directory: no NUL or '/', not "." or "..". */
bool forge_name_ok(const uint8_t *name, size_t len);

/* Rewrite name[fixed..len) so that forge_hash(seed, name, len) == target and
 * the result differs from orig (same length) and is usable. Needs
 * len - fixed >= 4. 0, or -EAGAIN when no such name turned up. */
int forge_solve(struct forge_rng *rng, uint8_t *name, size_t len, size_t fixed,
		const uint8_t *orig, uint32_t seed, uint32_t target);

/* Accept callback for forge_search: may the hash h be used? */
typedef bool (*forge_accept_fn)(void *ctx, uint32_t h);

/* Find a usable name != orig, rewriting name[fixed..len), whose hash lies in
 * [lo, hi] and passes accept (may be NULL); for len - fixed <= 2 every
 * candidate is tried. 0 with *hash set, or -EAGAIN. */
int forge_search(struct forge_rng *rng, uint8_t *name, size_t len, size_t fixed,
		 const uint8_t *orig, uint32_t seed, uint32_t lo, uint32_t hi,
		 forge_accept_fn accept, void *ctx, uint32_t *hash);

/* Find a usable name != orig whose hash is as close to target as this can
 * make it (equal when len - fixed >= 5). 0 with *hash set, or -EAGAIN. */
int forge_nearest(struct forge_rng *rng, uint8_t *name, size_t len, size_t fixed,
		  const uint8_t *orig, uint32_t seed, uint32_t target, uint32_t *hash);

#endif
