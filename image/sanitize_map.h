/* SPDX-License-Identifier: GPL-2.0-only */
/* The sanitizer's memory: which new name each (directory, original name)
 * got, with the hash ranges every copy of its items allows, and which new
 * first key each changed tree block got. Chained hash tables that grow, in
 * a map_arena: their resident size is bounded, the rest is in a temporary
 * file. Original names are not stored: an entry is found by a keyed 128-bit
 * digest of the name (key random per map), so neither memory nor the file
 * holds one. */
#ifndef BTK_IMAGE_SANITIZE_MAP_H
#define BTK_IMAGE_SANITIZE_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <btk/key.h>

struct map_arena;

struct smap_node {
	struct smap_node *next;
	uint64_t hash;
};

struct smap {
	struct map_arena *arena;   /* not owned */
	struct smap_node **buckets;
	size_t mask, count;
	uint64_t digest_key[2];
};

struct name_entry {
	struct smap_node node;
	uint64_t dir;
	uint64_t digest[2];        /* keyed digest of the original name */
	uint16_t len;
	bool chosen;               /* repl holds the new name */
	bool has_ext;              /* an inode extref carries it too */
	uint32_t name_lo, name_hi; /* where its dir items' hash may go (every copy's leaf) */
	uint32_t ext_lo, ext_hi;   /* the same for its extref hash */
	uint8_t repl[];            /* the new name, len bytes */
};

struct key_entry {
	struct smap_node node;
	uint64_t bytenr;
	struct btrfs_key key;
};

/* A map whose entries live in arena (which outlives it). */
int smap_init(struct smap *m, struct map_arena *arena);
/* Forget the table (the arena owns the memory). */
void smap_release(struct smap *m);

struct name_entry *name_find(struct smap *m, uint64_t dir, const uint8_t *name, size_t len);
/* The entry of (dir, name), created unconstrained and unchosen when missing; NULL on ENOMEM. */
struct name_entry *name_get(struct smap *m, uint64_t dir, const uint8_t *orig, size_t len);
void name_set(struct name_entry *e, const uint8_t *repl);

struct key_entry *key_find(struct smap *m, uint64_t bytenr);
/* Remember that the block at bytenr now starts with key. 0 or -ENOMEM. */
int key_record(struct smap *m, uint64_t bytenr, const struct btrfs_key *key);

#endif
