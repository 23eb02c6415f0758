// SPDX-License-Identifier: GPL-2.0-only
/* The sanitizer's hash tables (see sanitize_map.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <xxhash.h>

#include "image/map_arena.h"
#include "image/sanitize_map.h"

int smap_init(struct smap *m, struct map_arena *arena)
{
	uint64_t key[2] = { 0x243f6a8885a308d3ULL, 0x13198a2e03707344ULL };

	/* the digest key only has to be unknown: a fixed one if no randomness */
	if (getrandom(key, sizeof(key), GRND_NONBLOCK) != (ssize_t)sizeof(key))
		key[0] ^= (uint64_t)(uintptr_t)m;
	memcpy(m->digest_key, key, sizeof(key));
	m->arena = arena;
	m->mask = 1023;
	m->count = 0;
	m->buckets = map_arena_alloc(arena, (m->mask + 1) * sizeof(*m->buckets));
	return m->buckets ? 0 : -ENOMEM;
}

void smap_release(struct smap *m)
{
	m->buckets = NULL;
	m->count = 0;
}

static size_t slot(const struct smap *m, uint64_t hash)
{
	return (size_t)((hash * 0x9e3779b97f4a7c15ULL) >> 20) & m->mask;
}

/* Double the table when it gets full; on allocation failure just stay slower. */
static void smap_grow(struct smap *m)
{
	size_t old = m->mask;
	struct smap_node **ot = m->buckets, **t = map_arena_alloc(m->arena, 2 * (old + 1) * sizeof(*t));

	if (!t)
		return;
	m->buckets = t;
	m->mask = 2 * old + 1;
	for (size_t i = 0; i <= old; i++)
		for (struct smap_node *n = ot[i], *next; n; n = next) {
			size_t b = slot(m, n->hash);

			next = n->next;
			n->next = t[b];
			t[b] = n;
		}
	map_arena_touch(m->arena, m->count + (old + 1) * sizeof(*t) / 4096);
}

static void smap_insert(struct smap *m, struct smap_node *n, uint64_t hash)
{
	size_t b = slot(m, hash);

	n->hash = hash;
	n->next = m->buckets[b];
	m->buckets[b] = n;
	if (++m->count > m->mask)
		smap_grow(m);
}

/* The keyed digest of a name in a directory. */
static void name_digest(const struct smap *m, uint64_t dir, const uint8_t *name, size_t len, uint64_t out[2])
{
	XXH128_hash_t h = XXH3_128bits_withSeed(name, len, m->digest_key[0] ^ (dir * 0x9e3779b97f4a7c15ULL));

	out[0] = h.low64 ^ m->digest_key[1];
	out[1] = h.high64;
}

static struct name_entry *find_digest(struct smap *m, uint64_t dir, size_t len, const uint64_t d[2])
{
	size_t steps = 1;

	for (struct smap_node *n = m->buckets[slot(m, d[0])]; n; n = n->next, steps++) {
		struct name_entry *e = (struct name_entry *)n;

		if (n->hash == d[0] && e->dir == dir && e->len == len && e->digest[1] == d[1]) {
			map_arena_touch(m->arena, steps + 1);
			return e;
		}
	}
	map_arena_touch(m->arena, steps);
	return NULL;
}

struct name_entry *name_find(struct smap *m, uint64_t dir, const uint8_t *name, size_t len)
{
	uint64_t d[2];

	name_digest(m, dir, name, len, d);
	return find_digest(m, dir, len, d);
}

struct name_entry *name_get(struct smap *m, uint64_t dir, const uint8_t *orig, size_t len)
{
	struct name_entry *e;
	uint64_t d[2];

	name_digest(m, dir, orig, len, d);
	if ((e = find_digest(m, dir, len, d)))
		return e;
	e = map_arena_alloc(m->arena, sizeof(*e) + len);
	if (!e)
		return NULL;
	e->dir = dir;
	e->len = (uint16_t)len;
	e->name_hi = e->ext_hi = UINT32_MAX;
	memcpy(e->digest, d, sizeof(e->digest));
	smap_insert(m, &e->node, d[0]);
	return e;
}

void name_set(struct name_entry *e, const uint8_t *repl)
{
	memcpy(e->repl, repl, e->len);
	e->chosen = true;
}

struct key_entry *key_find(struct smap *m, uint64_t bytenr)
{
	size_t steps = 1;

	for (struct smap_node *n = m->buckets[slot(m, bytenr)]; n; n = n->next, steps++)
		if (n->hash == bytenr) {
			map_arena_touch(m->arena, steps + 1);
			return (struct key_entry *)n;
		}
	map_arena_touch(m->arena, steps);
	return NULL;
}

int key_record(struct smap *m, uint64_t bytenr, const struct btrfs_key *key)
{
	struct key_entry *e = key_find(m, bytenr);

	if (!e) {
		e = map_arena_alloc(m->arena, sizeof(*e));
		if (!e)
			return -ENOMEM;
		e->bytenr = bytenr;
		smap_insert(m, &e->node, bytenr);
	}
	e->key = *key;
	return 0;
}
