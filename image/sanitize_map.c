/* The sanitizer's hash tables (see sanitize_map.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "image/name_forge.h"
#include "image/sanitize_map.h"

int smap_init(struct smap *m)
{
	m->mask = 1023;
	m->count = 0;
	m->buckets = calloc(m->mask + 1, sizeof(*m->buckets));
	return m->buckets ? 0 : -ENOMEM;
}

void smap_release(struct smap *m)
{
	for (size_t i = 0; m->buckets && i <= m->mask; i++)
		for (struct smap_node *n = m->buckets[i], *next; n; n = next) {
			next = n->next;
			free(n);
		}
	free(m->buckets);
	m->buckets = NULL;
}

static size_t slot(const struct smap *m, uint64_t hash)
{
	return (size_t)((hash * 0x9e3779b97f4a7c15ULL) >> 20) & m->mask;
}

/* Double the table when it gets full; on allocation failure just stay slower. */
static void smap_grow(struct smap *m)
{
	size_t old = m->mask;
	struct smap_node **ot = m->buckets, **t = calloc(2 * (old + 1), sizeof(*t));

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
	free(ot);
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

static uint64_t name_key(uint64_t dir, const uint8_t *name, size_t len)
{
	return ((uint64_t)forge_hash((uint32_t)dir ^ (uint32_t)(dir >> 32), name, len) << 32) ^ dir;
}

struct name_entry *name_find(struct smap *m, uint64_t dir, const uint8_t *name, size_t len)
{
	uint64_t h = name_key(dir, name, len);

	for (struct smap_node *n = m->buckets[slot(m, h)]; n; n = n->next) {
		struct name_entry *e = (struct name_entry *)n;

		if (n->hash == h && e->dir == dir && e->len == len && !memcmp(e->names, name, len))
			return e;
	}
	return NULL;
}

struct name_entry *name_get(struct smap *m, uint64_t dir, const uint8_t *orig, size_t len)
{
	struct name_entry *e = name_find(m, dir, orig, len);

	if (e)
		return e;
	e = calloc(1, sizeof(*e) + 2 * len);
	if (!e)
		return NULL;
	e->dir = dir;
	e->len = (uint16_t)len;
	e->name_hi = e->ext_hi = UINT32_MAX;
	memcpy(e->names, orig, len);
	smap_insert(m, &e->node, name_key(dir, orig, len));
	return e;
}

void name_set(struct name_entry *e, const uint8_t *repl)
{
	memcpy(e->names + e->len, repl, e->len);
	e->chosen = true;
}

struct key_entry *key_find(struct smap *m, uint64_t bytenr)
{
	for (struct smap_node *n = m->buckets[slot(m, bytenr)]; n; n = n->next)
		if (n->hash == bytenr)
			return (struct key_entry *)n;
	return NULL;
}

int key_record(struct smap *m, uint64_t bytenr, const struct btrfs_key *key)
{
	struct key_entry *e = key_find(m, bytenr);

	if (!e) {
		e = malloc(sizeof(*e));
		if (!e)
			return -ENOMEM;
		e->bytenr = bytenr;
		smap_insert(m, &e->node, bytenr);
	}
	e->key = *key;
	return 0;
}
