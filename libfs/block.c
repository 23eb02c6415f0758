// SPDX-License-Identifier: LGPL-2.1-or-later
/* Tree-block cache (hash by bytenr + LRU under a byte budget) and verified
 * reads that try every copy. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <btk/block.h>
#include <btk/block_salvage.h>
#include <btk/csum.h>
#include <btk/volumes.h>

/* A block as the cache holds it: the public struct tree_block (btk/block.h)
 * first, then the cache's links, which no caller sees. */
struct cache_entry {
	struct tree_block b;
	struct tree_block *hash_next;
	/* in the LRU list while cached and unreferenced (refs 0) */
	struct tree_block *lru_prev, *lru_next;
	bool cached;              /* in the cache's hash and byte count */
};

static struct cache_entry *ce(const struct tree_block *b)
{
	return (struct cache_entry *)b;
}

struct block_cache {
	struct tree_block **buckets;
	size_t nbuckets;            /* power of two */
	struct cache_entry lru;     /* sentinel: lru.lru_next is the most recent */
	uint64_t budget;
	uint64_t bytes;
	struct block_cache_stats stats;
};

static const char *const problem_names[] = {
	[BLOCK_OK] = "ok",
	[BLOCK_IO_ERROR] = "read error",
	[BLOCK_DEV_MISSING] = "device missing",
	[BLOCK_BAD_CSUM] = "checksum mismatch",
	[BLOCK_BAD_BYTENR] = "bytenr mismatch",
	[BLOCK_BAD_FSID] = "fsid mismatch",
	[BLOCK_BAD_GENERATION] = "generation mismatch (transid)",
	[BLOCK_BAD_LEVEL] = "level mismatch",
	[BLOCK_BAD_OWNER] = "owner mismatch",
	[BLOCK_BAD_FIRST_KEY] = "first key mismatch",
	[BLOCK_BAD_NRITEMS] = "item count out of range",
	[BLOCK_BAD_ITEMS] = "items out of order or outside the block",
	[BLOCK_BAD_FLAGS] = "not flagged as written",
};

const char *block_problem_name(enum block_problem p)
{
	if ((unsigned)p < sizeof(problem_names) / sizeof(problem_names[0]) && problem_names[p])
		return problem_names[p];
	return "unknown problem";
}

static size_t hash_bytenr(const struct block_cache *c, uint64_t bytenr)
{
	uint64_t h = bytenr * 0x9E3779B97F4A7C15ULL;
	return (size_t)(h >> 20) & (c->nbuckets - 1);
}

int block_cache_create(struct fs_info *fs, uint64_t budget)
{
	struct block_cache *c = calloc(1, sizeof(*c));
	size_t want;

	if (!c)
		return -ENOMEM;
	if (!budget)
		budget = 32ULL << 20;
	c->budget = budget;
	want = (size_t)(budget / fs->nodesize) * 2;
	c->nbuckets = 1024;
	while (c->nbuckets < want && c->nbuckets < (1U << 24))
		c->nbuckets <<= 1;
	c->buckets = calloc(c->nbuckets, sizeof(*c->buckets));
	if (!c->buckets) {
		free(c);
		return -ENOMEM;
	}
	c->lru.lru_next = c->lru.lru_prev = &c->lru.b;
	fs->cache = c;
	return 0;
}

static void lru_unlink(struct tree_block *b)
{
	ce(ce(b)->lru_prev)->lru_next = ce(b)->lru_next;
	ce(ce(b)->lru_next)->lru_prev = ce(b)->lru_prev;
}

static void lru_push_front(struct block_cache *c, struct tree_block *b)
{
	ce(b)->lru_next = c->lru.lru_next;
	ce(b)->lru_prev = &c->lru.b;
	ce(c->lru.lru_next)->lru_prev = b;
	c->lru.lru_next = b;
}

static void cache_unhash(struct block_cache *c, struct tree_block *b)
{
	struct tree_block **pp = &c->buckets[hash_bytenr(c, b->bytenr)];

	while (*pp && *pp != b)
		pp = &ce(*pp)->hash_next;
	if (*pp)
		*pp = ce(b)->hash_next;
	ce(b)->hash_next = NULL;
}

/* Take a cached block out of the cache and free it (unreferenced: it is in the LRU). */
static void cache_remove(struct block_cache *c, struct tree_block *b)
{
	cache_unhash(c, b);
	lru_unlink(b);
	c->bytes -= b->len;
	free(b->data);
	free(b);
}

/* Drop least-recently-used unreferenced blocks until under budget. Blocks in
 * use are not in the list, so a transaction holding thousands of dirty
 * blocks costs nothing here. */
static void cache_shrink(struct block_cache *c)
{
	while (c->bytes > c->budget && c->lru.lru_prev != &c->lru.b) {
		cache_remove(c, c->lru.lru_prev);
		c->stats.evictions++;
	}
}

void block_cache_destroy(struct fs_info *fs)
{
	struct block_cache *c = fs->cache;

	if (!c)
		return;
	/* every cached block, referenced or not, is in the hash */
	for (size_t h = 0; h < c->nbuckets; h++) {
		while (c->buckets[h]) {
			struct tree_block *b = c->buckets[h];
			c->buckets[h] = ce(b)->hash_next;
			free(b->data);
			free(b);
		}
	}
	free(c->buckets);
	free(c);
	fs->cache = NULL;
}

void block_cache_get_stats(struct fs_info *fs, struct block_cache_stats *out)
{
	*out = fs->cache->stats;
	out->bytes = fs->cache->bytes;
}

void block_hold(struct fs_info *fs, struct tree_block *b)
{
	(void)fs;
	if (b->refs++ == 0 && ce(b)->cached)
		lru_unlink(b);
}

void block_put(struct fs_info *fs, struct tree_block *b)
{
	if (!b)
		return;
	if (b->refs > 0)
		b->refs--;
	if (b->refs)
		return;
	if (!ce(b)->cached) {
		free(b->data);
		free(b);
		return;
	}
	lru_push_front(fs->cache, b);
	if (fs->cache->bytes > fs->cache->budget)
		cache_shrink(fs->cache);
}

void block_key(const struct tree_block *b, unsigned slot, struct btrfs_key *key)
{
	if (block_level(b) == 0)
		key_from_disk(key, item_key_ptr(leaf_item(b->data, slot)));
	else
		key_from_disk(key, key_ptr_key_ptr(node_key_ptr(b->data, slot)));
}

enum block_problem block_verify_identity(struct fs_info *fs, uint64_t bytenr, const uint8_t *buf)
{
	uint8_t csum[BTRFS_CSUM_SIZE];

	csum_compute(fs->csum_type, buf + BTRFS_CSUM_SIZE, fs->nodesize - BTRFS_CSUM_SIZE, csum);
	if (memcmp(csum, header_csum_ptr(buf), fs->csum_size) != 0)
		return BLOCK_BAD_CSUM;
	if (header_bytenr(buf) != bytenr)
		return BLOCK_BAD_BYTENR;
	if (memcmp(header_fsid_ptr(buf), fs->metadata_uuid, BTRFS_FSID_SIZE) != 0 &&
	    !(fs->fsid_alt_valid && memcmp(header_fsid_ptr(buf), fs->fsid_alt, BTRFS_FSID_SIZE) == 0) &&
	    !fs_fsid_is_seed(fs, header_fsid_ptr(buf)))
		return BLOCK_BAD_FSID;
	if (!(header_flags(buf) & BTRFS_HEADER_FLAG_WRITTEN))
		return BLOCK_BAD_FLAGS;   /* every block written has it: the kernel's tree checker */
	if (header_level(buf) >= BTRFS_MAX_LEVEL)
		return BLOCK_BAD_LEVEL;
	return BLOCK_OK;
}

enum block_problem block_verify(struct fs_info *fs, uint64_t bytenr, const uint8_t *buf,
				const struct block_expect *expect)
{
	enum block_problem p = block_verify_identity(fs, bytenr, buf);
	unsigned level = header_level(buf);

	if (p)
		return p;
	if (expect && expect->level >= 0 && (int)level != expect->level)
		return BLOCK_BAD_LEVEL;
	if (expect && expect->generation && header_generation(buf) != expect->generation)
		return BLOCK_BAD_GENERATION;
	if (expect && expect->owner && header_owner(buf) != expect->owner)
		return BLOCK_BAD_OWNER;
	if ((p = block_verify_layout(fs, buf)))
		return p;
	/* a block below a node is never empty (the kernel checks it as it reads) */
	if (expect && expect->first_key && header_nritems(buf) == 0)
		return BLOCK_BAD_NRITEMS;
	if (expect && expect->first_key && header_nritems(buf) > 0) {
		struct btrfs_key first;
		key_from_disk(&first, level ? key_ptr_key_ptr(node_key_ptr(buf, 0))
					    : item_key_ptr(leaf_item(buf, 0)));
		if (key_compare(&first, expect->first_key) != 0)
			return BLOCK_BAD_FIRST_KEY;
	}
	return BLOCK_OK;
}

enum block_problem block_read_copy(struct fs_info *fs, uint64_t bytenr, int mirror,
				   const struct block_expect *expect, uint8_t *buf)
{
	int ret = volumes_read(fs, bytenr, buf, fs->nodesize, mirror);

	if (ret == -ENODEV)
		return BLOCK_DEV_MISSING;
	if (ret)
		return BLOCK_IO_ERROR;
	return block_verify(fs, bytenr, buf, expect);
}

static struct tree_block *cache_lookup(struct block_cache *c, uint64_t bytenr)
{
	for (struct tree_block *b = c->buckets[hash_bytenr(c, bytenr)]; b; b = ce(b)->hash_next)
		if (b->bytenr == bytenr)
			return b;
	return NULL;
}

/* A cached block still has to satisfy what this referrer expects of it (a
 * salvaged view only while the filesystem reads salvaged views). */
static int cached_matches(const struct fs_info *fs, const struct tree_block *b, const struct block_expect *e)
{
	if (b->salvaged && !fs->salvage)
		return 0;
	if (!e)
		return 1;
	if (e->level >= 0 && block_level(b) != (unsigned)e->level)
		return 0;
	if (b->salvaged)
		return 1;   /* generation and first key were weighed when it was salvaged */
	if (e->generation && block_generation(b) != e->generation)
		return 0;
	if (e->owner && block_owner(b) != e->owner)
		return 0;
	if (e->first_key && block_nritems(b)) {
		struct btrfs_key k;
		block_key(b, 0, &k);
		if (key_compare(&k, e->first_key))
			return 0;
	}
	return 1;
}

/* The first key of the child a pointer leads to (read with no other
 * expectation than its level), or -errno. */
static int child_first_key(struct fs_info *fs, const uint8_t *p, unsigned level, struct btrfs_key *k)
{
	struct block_expect e = { .generation = key_ptr_generation(p), .level = (int)level };
	struct tree_block *b;
	int ret = block_read(fs, key_ptr_blockptr(p), &e, &b);

	if (ret)
		return ret;
	if (!block_nritems(b)) {
		block_put(fs, b);
		return -ENOENT;
	}
	block_key(b, 0, k);
	block_put(fs, b);
	return 0;
}

/* The owner the block a root item points at names in its header (read with
 * no other expectation than the item's generation and level), or -errno. */
static int root_block_owner(struct fs_info *fs, uint64_t bytenr, uint64_t generation, unsigned level,
			    uint64_t *owner)
{
	struct block_expect e = { .generation = generation, .level = (int)level };
	struct tree_block *b;
	int ret = block_read(fs, bytenr, &e, &b);

	if (ret)
		return ret;
	*owner = block_owner(b);
	block_put(fs, b);
	return 0;
}

int block_salvage(struct fs_info *fs, uint64_t bytenr, uint8_t *buf, const struct block_expect *e,
		  struct block_salvage *out)
{
	static const struct block_salvage_reads reads = { child_first_key, root_block_owner };

	return block_salvage_view(fs, bytenr, buf, e, &reads, out);
}

/* No copy verifies: the first copy whose identity does can be salvaged
 * (block_salvage.h) into buf. 0 when it was (and logged), else -EUCLEAN. */
static int salvage_copy(struct fs_info *fs, uint64_t bytenr, const struct block_expect *expect,
			const enum block_problem *problems, int ncopies, uint8_t *buf)
{
	const struct block_salvage *before = block_salvage_find(fs, bytenr);
	struct block_expect again;

	/* read again by a referrer that expects nothing: the same view as before */
	if (before && (!expect || expect->level < 0)) {
		again = expect ? *expect : BLOCK_EXPECT_ANY;
		again.level = before->level;
		expect = &again;
	}
	for (int m = 0; m < ncopies; m++) {
		struct block_salvage s;
		if (problems[m] == BLOCK_IO_ERROR || problems[m] == BLOCK_DEV_MISSING || problems[m] == BLOCK_BAD_CSUM ||
		    problems[m] == BLOCK_BAD_BYTENR || problems[m] == BLOCK_BAD_FSID || problems[m] == BLOCK_BAD_FLAGS ||
		    problems[m] == BLOCK_BAD_OWNER)
			continue;
		if (volumes_read(fs, bytenr, buf, fs->nodesize, m) || block_verify_identity(fs, bytenr, buf))
			continue;
		if (block_salvage(fs, bytenr, buf, expect, &s) == 0 && block_salvage_note(fs, &s) == 0)
			return 0;
	}
	return -EUCLEAN;
}

int block_read(struct fs_info *fs, uint64_t bytenr, const struct block_expect *expect,
	       struct tree_block **out)
{
	struct block_cache *c = fs->cache;
	struct tree_block *b;
	enum block_problem problems[MAX_COPIES];
	uint8_t *buf;
	int ncopies, good = -1;

	*out = NULL;
	if (bytenr % fs->sectorsize)
		return fs_error(fs, -EUCLEAN, "tree block %llu is not aligned to the sector size",
				(unsigned long long)bytenr);
	b = cache_lookup(c, bytenr);
	if (b && cached_matches(fs, b, expect)) {
		c->stats.hits++;
		block_hold(fs, b);
		*out = b;
		return 0;
	}
	if (b && b->refs == 0)
		cache_remove(c, b); /* stale for this referrer: verify afresh */
	c->stats.misses++;
	ncopies = volumes_num_copies(fs, bytenr);
	if (ncopies <= 0)
		return fs_error(fs, -EUCLEAN, "tree block %llu is not in any chunk",
				(unsigned long long)bytenr);
	if (ncopies > MAX_COPIES)
		ncopies = MAX_COPIES;
	buf = malloc(fs->nodesize);
	if (!buf)
		return -ENOMEM;
	for (int m = 0; m < ncopies; m++) {
		problems[m] = block_read_copy(fs, bytenr, m, expect, buf);
		if (problems[m] == BLOCK_OK) {
			good = m;
			break;
		}
		fs_note(fs, FS_NOTE_WARNING, "tree block %llu copy %d: %s%s",
			(unsigned long long)bytenr, m + 1, block_problem_name(problems[m]),
			m + 1 < ncopies ? ", trying the next copy" : "");
	}
	if (good < 0 && fs->salvage && salvage_copy(fs, bytenr, expect, problems, ncopies, buf) == 0)
		good = -2;
	if (good < 0 && good != -2) {
		int all_io = 1, all_csum = 1;
		free(buf);
		for (int m = 0; m < ncopies; m++) {
			if (problems[m] != BLOCK_IO_ERROR && problems[m] != BLOCK_DEV_MISSING)
				all_io = 0;
			if (problems[m] != BLOCK_BAD_CSUM)
				all_csum = 0;
		}
		/* -EUCLEAN either way; the kind tells a checksum mismatch from nonsense */
		fs_error_kind(fs, all_io ? -EIO : -EUCLEAN,
			      all_io ? BTK_ERR_IO : all_csum ? BTK_ERR_CSUM : BTK_ERR_CORRUPT, "tree block %llu: no good copy (%d tried; %s)", (unsigned long long)bytenr, ncopies,
			      block_problem_name(problems[0]));
		btk_error_locate(bytenr, 0);
		return all_io ? -EIO : -EUCLEAN;
	}
	if (good > 0)
		fs_note(fs, FS_NOTE_INFO, "tree block %llu: using copy %d", (unsigned long long)bytenr,
			good + 1);
	b = calloc(1, sizeof(struct cache_entry));
	if (!b) {
		free(buf);
		return -ENOMEM;
	}
	b->bytenr = bytenr;
	b->len = fs->nodesize;
	b->data = buf;
	b->refs = 1;
	b->salvaged = good == -2;
	b->mirror = good < 0 ? 0 : good;
	if (cache_lookup(c, bytenr)) {
		/* an older, still referenced version stays; this one is uncached
		 * (freed at its last put) */
		ce(b)->hash_next = NULL;
	} else {
		size_t h = hash_bytenr(c, bytenr);
		ce(b)->hash_next = c->buckets[h];
		c->buckets[h] = b;
		ce(b)->cached = true;
		c->bytes += b->len;
		if (c->bytes > c->stats.peak_bytes)
			c->stats.peak_bytes = c->bytes;
		cache_shrink(c);
	}
	*out = b;
	return 0;
}

/* Insert a fresh, referenced block (not in the LRU until its last put). */
static void cache_insert(struct block_cache *c, struct tree_block *b)
{
	size_t h = hash_bytenr(c, b->bytenr);

	ce(b)->hash_next = c->buckets[h];
	c->buckets[h] = b;
	ce(b)->cached = true;
	c->bytes += b->len;
	if (c->bytes > c->stats.peak_bytes)
		c->stats.peak_bytes = c->bytes;
}

int block_create(struct fs_info *fs, uint64_t bytenr, struct tree_block **out)
{
	struct block_cache *c = fs->cache;
	struct tree_block *old = cache_lookup(c, bytenr);
	struct tree_block *b;

	*out = NULL;
	if (old) {
		if (old->refs)
			return fs_error(fs, -EEXIST, "block %llu is still in use",
					(unsigned long long)bytenr);
		cache_remove(c, old);
	}
	b = calloc(1, sizeof(struct cache_entry));
	if (!b)
		return -ENOMEM;
	b->data = calloc(1, fs->nodesize);
	if (!b->data) {
		free(b);
		return -ENOMEM;
	}
	b->bytenr = bytenr;
	b->len = fs->nodesize;
	b->refs = 1;
	cache_insert(c, b);
	*out = b;
	return 0;
}

void block_forget(struct fs_info *fs, struct tree_block *b)
{
	struct block_cache *c = fs->cache;

	if (!b)
		return;
	if (ce(b)->cached) {
		cache_unhash(c, b);
		if (b->refs == 0)
			lru_unlink(b);
		c->bytes -= b->len;
		ce(b)->cached = false;
	}
	block_put(fs, b);
}

bool block_is_cached(struct fs_info *fs, uint64_t bytenr)
{
	return cache_lookup(fs->cache, bytenr) != NULL;
}

int block_read_child(struct fs_info *fs, const struct tree_block *parent, unsigned slot,
		     struct tree_block **out)
{
	const uint8_t *ptr = node_key_ptr(parent->data, slot);
	struct btrfs_key first, lo, hi;
	struct block_expect e = {
		.generation = key_ptr_generation(ptr),
		.level = (int)block_level(parent) - 1,
		.first_key = &first,
	};

	key_from_disk(&first, key_ptr_key_ptr(ptr));
	if (slot > 0) {
		block_key(parent, slot - 1, &lo);
		e.lo_key = &lo;
	}
	if (slot + 1 < block_nritems(parent)) {
		block_key(parent, slot + 1, &hi);
		e.hi_key = &hi;
	}
	return block_read(fs, key_ptr_blockptr(ptr), &e, out);
}
