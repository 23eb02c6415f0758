/* The sanitizer's memory: which new name each (directory, original name)
 * got, with the hash ranges every copy of its items allows, and which new
 * first key each changed tree block got. Chained hash tables that grow. */
#ifndef BTK_IMAGE_SANITIZE_MAP_H
#define BTK_IMAGE_SANITIZE_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "libfs/key.h"

struct smap_node {
	struct smap_node *next;
	uint64_t hash;
};

struct smap {
	struct smap_node **buckets;
	size_t mask, count;
};

struct name_entry {
	struct smap_node node;
	uint64_t dir;
	uint16_t len;
	bool chosen;               /* names[len..] holds the new name */
	bool has_ext;              /* an inode extref carries it too */
	uint32_t name_lo, name_hi; /* where its dir items' hash may go (every copy's leaf) */
	uint32_t ext_lo, ext_hi;   /* the same for its extref hash */
	uint8_t names[];           /* original, then new */
};

struct key_entry {
	struct smap_node node;
	uint64_t bytenr;
	struct btrfs_key key;
};

int smap_init(struct smap *m);
/* Frees every entry (they were malloc'ed with the node first) and the table. */
void smap_release(struct smap *m);

struct name_entry *name_find(struct smap *m, uint64_t dir, const uint8_t *name, size_t len);
/* The entry of (dir, name), created unconstrained and unchosen when missing; NULL on ENOMEM. */
struct name_entry *name_get(struct smap *m, uint64_t dir, const uint8_t *orig, size_t len);
void name_set(struct name_entry *e, const uint8_t *repl);

struct key_entry *key_find(struct smap *m, uint64_t bytenr);
/* Remember that the block at bytenr now starts with key. 0 or -ENOMEM. */
int key_record(struct smap *m, uint64_t bytenr, const struct btrfs_key *key);

#endif
