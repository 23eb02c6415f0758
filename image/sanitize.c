// SPDX-License-Identifier: GPL-2.0-only
/* Sanitizing tree blocks (see sanitize.h).
 *
 * Names of directory entries are kept consistent through a map from
 * (directory inode, original name) to the new name (found by a keyed digest
 * of the name, resident size bounded: sanitize_map.h), so that a dir item, its
 * dir index, the inode ref or extref and a root ref all agree wherever they
 * are met (every copy in snapshots and log trees included). The first item
 * that meets a name chooses it:
 *   - a hash-keyed item (dir item, inode extref) picks a hash inside the key
 *     range of its leaf ([first key, last key]) and of every other copy's leaf
 *     that the prescan saw (collide mode: the original hash) and forges a
 *     name with it, re-keying the item;
 *   - any other item (dir index, inode ref, root ref) picks a hash in the
 *     prescanned range too; without a prescan it keeps the original name
 *     hash (or the nearest a short name allows) so that the dir item met
 *     later still fits its leaf.
 * Xattr names are per item (their namespace prefix is kept, btrfs.*
 * properties stay whole). Leaves whose keys moved are re-sorted; a changed
 * first key is remembered by block address and written into the parent
 * node's pointer. Inline data and xattr values are zeroed (compressed inline
 * extents become a valid zlib/zstd/lzo stream of zeros, or zeros if it does not fit),
 * symlink targets become same-length relative paths. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <lzo/lzo1x.h>
#include <zlib.h>
#include <zstd.h>

#include "image/map_arena.h"
#include "image/name_forge.h"
#include "image/sanitize.h"
#include "image/sanitize_map.h"
#include <btk/csum.h>
#include <btk/endian_access.h>
#include <btk/format.h>
#include <btk/item_check.h>
#include <btk/key.h>

#define HDR_SIZE sizeof(struct btrfs_header)
#define ITEM_SIZE sizeof(struct btrfs_item)
#define PTR_SIZE sizeof(struct btrfs_key_ptr)
#define NAME_HASH_SEED ((uint32_t)~1U)
/* Resident bytes of the name and key maps; the rest waits in a temporary file. */
#define SANITIZE_MAP_BUDGET ((size_t)96 << 20)

/* One name inside an item. */
struct ent {
	uint8_t *name;
	uint16_t len;
	uint64_t dir;    /* map key; for extrefs also the hash seed */
	uint8_t *value;  /* xattr value */
	uint16_t value_len;
};

struct sanitizer {
	enum sanitize_mode mode;
	uint16_t csum_type;
	uint32_t nodesize;
	struct forge_rng rng;
	struct map_arena *arena; /* the maps' memory */
	struct smap names;  /* (dir, original name) -> struct name_entry */
	struct smap keys;   /* block address -> its new first key */
	struct sanitize_stats st;
	/* the last inode item seen: symlink targets are in its inline extent */
	uint64_t ino_owner, ino_objectid;
	uint32_t ino_mode;
	bool prescanned;
	struct ent *ents;
	size_t ents_cap;
	char err[256];
};

/* The leaf being sanitized. */
struct leaf {
	uint8_t *block;
	uint32_t nritems;
	struct btrfs_key first, last; /* original bounds of the keys */
	struct btrfs_key *keys;       /* current keys */
	bool moved;
	bool changed;
	uint64_t owner;
	unsigned slot;
};

__attribute__((format(printf, 3, 4)))
static int fail(struct sanitizer *s, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->err, sizeof(s->err), fmt, ap);
	va_end(ap);
	return err;
}

int sanitizer_new(struct sanitizer **sp, enum sanitize_mode mode, uint16_t csum_type,
		  uint32_t nodesize, uint64_t seed)
{
	struct sanitizer *s;

	*sp = NULL;
	if (!csum_size(csum_type) || nodesize < 4096 || nodesize > 65536 || (nodesize & (nodesize - 1)))
		return -EINVAL;
	if (mode != SANITIZE_NONE && mode != SANITIZE_RANDOM && mode != SANITIZE_COLLIDE)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->mode = mode;
	s->csum_type = csum_type;
	s->nodesize = nodesize;
	s->rng.state = seed ^ 0x6a09e667f3bcc908ULL;
	s->arena = map_arena_new(SANITIZE_MAP_BUDGET, NULL);
	if (!s->arena || smap_init(&s->names, s->arena) || smap_init(&s->keys, s->arena)) {
		sanitizer_free(s);
		return -ENOMEM;
	}
	*sp = s;
	return 0;
}

void sanitizer_free(struct sanitizer *s)
{
	if (!s)
		return;
	smap_release(&s->names);
	smap_release(&s->keys);
	map_arena_free(s->arena);
	free(s->ents);
	free(s);
}

void sanitizer_stats(const struct sanitizer *s, struct sanitize_stats *out)
{
	*out = s->st;
}

const char *sanitizer_error(const struct sanitizer *s)
{
	return s->err;
}

/* ------------------------------------------------------------ item parsing */

static int ents_reserve(struct sanitizer *s, size_t n)
{
	struct ent *p;

	if (n <= s->ents_cap)
		return 0;
	p = realloc(s->ents, n * sizeof(*p));
	if (!p)
		return -ENOMEM;
	s->ents = p;
	s->ents_cap = n;
	return 0;
}

/* Split a name-bearing item into its names; -EUCLEAN if it does not parse. */
static int parse_names(struct sanitizer *s, const struct btrfs_key *key, uint8_t *data, uint32_t size,
		       size_t *count)
{
	struct item_view v = item_view_of(data, size);
	uint8_t walk = key->type;
	struct item_entry ent;
	uint32_t cur = 0;
	size_t n = 0;
	int ret;

	ret = ents_reserve(s, size / 10 + 1);
	if (ret)
		return ret;
	/* (dir items, dir indexes and xattrs share the entry layout; anything
	 * else that bears names here is a root ref or backref) */
	if (walk != BTRFS_DIR_ITEM_KEY && walk != BTRFS_DIR_INDEX_KEY && walk != BTRFS_XATTR_ITEM_KEY &&
	    walk != BTRFS_INODE_REF_KEY && walk != BTRFS_INODE_EXTREF_KEY)
		walk = BTRFS_ROOT_REF_KEY;
	while ((ret = item_entry_next(walk, &v, &cur, &ent)) == 1) {
		struct ent *e = &s->ents[n];

		memset(e, 0, sizeof(*e));
		e->len = ent.name_len;
		e->value_len = ent.data_len;
		switch (walk) {
		case BTRFS_DIR_ITEM_KEY:
		case BTRFS_DIR_INDEX_KEY:
		case BTRFS_XATTR_ITEM_KEY:
			e->dir = key->objectid;
			break;
		case BTRFS_INODE_REF_KEY:
			e->dir = key->offset;
			break;
		case BTRFS_INODE_EXTREF_KEY:
			e->dir = inode_extref_parent_objectid(ent.hdr);
			break;
		default:
			e->dir = root_ref_dirid(ent.hdr);
			break;
		}
		e->name = data + ent.off + (ent.name - ent.hdr);
		e->value = e->name + e->len;
		n++;
		if (walk == BTRFS_ROOT_REF_KEY)
			break;
	}
	if (ret < 0)
		return -EUCLEAN;
	*count = n;
	return 0;
}

/* ------------------------------------------------------------ choosing names */

/* Names that stay: "." and "..", the root tree's "default" entry, and
 * btrfs.* xattrs (properties such as btrfs.compression: not user data). */
static bool name_keep(const struct ent *e)
{
	return !forge_name_ok(e->name, e->len) || e->dir == BTRFS_ROOT_TREE_DIR_OBJECTID ||
	       (e->value_len && e->len > 6 && !memcmp(e->name, "btrfs.", 6));
}

/* Bytes of an xattr name that stay: its namespace prefix. */
static size_t xattr_fixed(const struct ent *e)
{
	static const char *const ns[] = { "user.", "trusted.", "security.", "system.", "btrfs." };

	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		size_t n = strlen(ns[i]);

		if (e->len > n && !memcmp(e->name, ns[i], n))
			return n;
	}
	return 0;
}

/* The offsets an item of (objectid, type) may take in this leaf: between its
 * original first and last keys (the neighbours' bounds are unknown here). */
static void leaf_range(const struct leaf *lf, const struct btrfs_key *key, uint32_t *lo, uint32_t *hi)
{
	*lo = 0;
	*hi = UINT32_MAX;
	if (lf->first.objectid == key->objectid && lf->first.type == key->type)
		*lo = lf->first.offset > UINT32_MAX ? UINT32_MAX : (uint32_t)lf->first.offset;
	if (lf->last.objectid == key->objectid && lf->last.type == key->type)
		*hi = lf->last.offset > UINT32_MAX ? UINT32_MAX : (uint32_t)lf->last.offset;
}

struct accept_ctx {
	const struct leaf *lf;
	struct btrfs_key key;
};

/* A new offset for the item in the current slot must not clash with another item. */
static bool offset_free(void *p, uint32_t h)
{
	const struct accept_ctx *c = p;
	struct btrfs_key k = { c->key.objectid, c->key.type, h };

	for (uint32_t i = 0; i < c->lf->nritems; i++)
		if (i != c->lf->slot && !key_compare(&c->lf->keys[i], &k))
			return false;
	return true;
}

static uint32_t ent_seed(const struct btrfs_key *key, const struct ent *e)
{
	return key->type == BTRFS_INODE_EXTREF_KEY ? (uint32_t)e->dir : NAME_HASH_SEED;
}

/* A candidate new name respects what every copy of its items allows. */
static bool name_fits(const struct name_entry *ne, const uint8_t *name)
{
	uint32_t h;

	if (!ne)
		return true;
	h = forge_hash(NAME_HASH_SEED, name, ne->len);
	if (h < ne->name_lo || h > ne->name_hi)
		return false;
	h = forge_hash((uint32_t)ne->dir, name, ne->len);
	return !ne->has_ext || (h >= ne->ext_lo && h <= ne->ext_hi);
}

/* What choosing a name needs to know about the item it is in. */
struct pick {
	uint32_t seed;           /* seed of the hash the item's key holds */
	bool have_t;             /* the key offset is decided already: t */
	uint32_t t, lo, hi;      /* else: a hash in [lo, hi] ... */
	forge_accept_fn accept;  /* ... that accept allows */
	void *ctx;
	uint32_t orig_hash;      /* the original name's hash of that seed */
};

/* Forge a new name for e (rewriting buf[fixed..]) that satisfies pick and the
 * map entry's constraints; sets pk->t to its hash. */
static int pick_name(struct sanitizer *s, const struct ent *e, size_t fixed, const struct name_entry *ne,
		     struct pick *pk, uint8_t *buf)
{
	size_t free_len = e->len - fixed;
	uint32_t h;

	memcpy(buf, e->name, e->len);
	if (pk->have_t) {
		for (int t = 0; free_len >= 4 && t < 64; t++)
			if (!forge_solve(&s->rng, buf, e->len, fixed, e->name, pk->seed, pk->t) && name_fits(ne, buf))
				return 0;
		return -EAGAIN;
	}
	if (s->mode != SANITIZE_COLLIDE || free_len < 5) {
		for (int t = 0; t < 64; t++) {
			if (forge_search(&s->rng, buf, e->len, fixed, e->name, pk->seed, pk->lo, pk->hi, pk->accept,
					 pk->ctx, &h))
				break;
			if (name_fits(ne, buf)) {
				pk->t = h;
				return 0;
			}
		}
	}
	/* collide mode, or nothing else fits: keep the original hash */
	if (free_len >= 5 && pk->orig_hash >= pk->lo && pk->orig_hash <= pk->hi) {
		for (int t = 0; t < 64; t++)
			if (!forge_solve(&s->rng, buf, e->len, fixed, e->name, pk->seed, pk->orig_hash) &&
			    name_fits(ne, buf)) {
				pk->t = pk->orig_hash;
				return 0;
			}
	}
	return -EAGAIN;
}

static size_t ent_fixed(const struct btrfs_key *key, const struct ent *e)
{
	return key->type == BTRFS_XATTR_ITEM_KEY ? xattr_fixed(e) : 0;
}

/* New names for a hash-keyed item (dir item, xattr item, inode extref). */
static int rename_keyed(struct sanitizer *s, struct leaf *lf, struct btrfs_key *key, struct ent *ents, size_t n)
{
	bool mapped = key->type != BTRFS_XATTR_ITEM_KEY;
	uint8_t buf[BTRFS_NAME_LEN + 1];
	struct accept_ctx ctx = { lf, *key };
	struct pick pk = { .accept = offset_free, .ctx = &ctx };
	size_t i;
	int ret;

	leaf_range(lf, key, &pk.lo, &pk.hi);
	/* names chosen elsewhere fix the hash */
	for (i = 0; i < n; i++) {
		struct name_entry *ne;
		uint32_t h;

		if (!mapped || name_keep(&ents[i]))
			continue;
		ne = name_find(&s->names, ents[i].dir, ents[i].name, ents[i].len);
		if (!ne || !ne->chosen)
			continue;
		h = forge_hash(ent_seed(key, &ents[i]), ne->repl, ne->len);
		if (pk.have_t && h != pk.t)
			return fail(s, -EAGAIN, "item (%llu %u %llu): its names were renamed elsewhere to different hashes",
				    (unsigned long long)key->objectid, key->type, (unsigned long long)key->offset);
		pk.t = h;
		pk.have_t = true;
	}
	for (i = 0; i < n && !pk.have_t; i++) {
		if (name_keep(&ents[i]) && key->offset <= UINT32_MAX) {
			pk.t = (uint32_t)key->offset; /* a name that stays pins the hash */
			pk.have_t = true;
		}
	}
	if (pk.have_t && pk.t != key->offset && (pk.t < pk.lo || pk.t > pk.hi || !offset_free(&ctx, pk.t)))
		return fail(s, -EAGAIN, "item (%llu %u %llu): the name chosen for it elsewhere hashes to %u, "
			    "outside what its leaf allows (%u..%u)%s", (unsigned long long)key->objectid,
			    key->type, (unsigned long long)key->offset, pk.t, pk.lo, pk.hi,
			    s->prescanned ? "" : " (no prescan: copies in snapshots or log trees were not seen first)");
	for (i = 0; i < n; i++) {
		struct ent *e = &ents[i];
		size_t fixed = ent_fixed(key, e);
		struct name_entry *ne = NULL;

		if (name_keep(e) || e->len <= fixed)
			continue;
		if (mapped) {
			ne = name_get(&s->names, e->dir, e->name, e->len);
			if (!ne)
				return -ENOMEM;
		}
		if (ne && ne->chosen) {
			memcpy(buf, ne->repl, e->len);
		} else {
			struct pick one;

			pk.seed = ent_seed(key, e);
			pk.orig_hash = key->offset <= UINT32_MAX ? (uint32_t)key->offset : 0;
			one = pk;
			/* every other copy of this item (prescan) narrows the range */
			if (ne && key->type == BTRFS_DIR_ITEM_KEY) {
				one.lo = one.lo > ne->name_lo ? one.lo : ne->name_lo;
				one.hi = one.hi < ne->name_hi ? one.hi : ne->name_hi;
			} else if (ne && ne->has_ext) {
				one.lo = one.lo > ne->ext_lo ? one.lo : ne->ext_lo;
				one.hi = one.hi < ne->ext_hi ? one.hi : ne->ext_hi;
			}
			if (one.lo > one.hi)
				one.lo = one.hi = pk.orig_hash;
			if (!pk.have_t && n > 1 && e->len < fixed + 4)
				return fail(s, -EAGAIN, "item (%llu %u %llu) holds %zu names with one hash, some short: "
					    "cannot rename", (unsigned long long)key->objectid, key->type,
					    (unsigned long long)key->offset, n);
			ret = pick_name(s, e, fixed, ne, &one, buf);
			if (ret)
				return fail(s, ret, "no %u-byte replacement name for item (%llu %u %llu) with a hash in %u..%u",
					    e->len, (unsigned long long)key->objectid, key->type,
					    (unsigned long long)key->offset, one.have_t ? one.t : one.lo,
					    one.have_t ? one.t : one.hi);
			pk.t = one.t;
			pk.have_t = true;
			if (ne) {
				name_set(ne, buf);
				s->st.names++;
			}
			if (s->mode == SANITIZE_COLLIDE && pk.t != key->offset)
				s->st.fallbacks++;
		}
		memcpy(e->name, buf, e->len);
		s->st.items++;
	}
	if (pk.have_t && pk.t != key->offset) {
		key->offset = pk.t;
		lf->moved = true;
		s->st.rekeyed++;
	}
	return 0;
}

/* New names for an item whose key does not depend on them. */
static int rename_free(struct sanitizer *s, const struct btrfs_key *key, struct ent *ents, size_t n)
{
	uint8_t buf[BTRFS_NAME_LEN + 1];
	int ret;

	for (size_t i = 0; i < n; i++) {
		struct ent *e = &ents[i];
		struct name_entry *ne;
		uint32_t orig = forge_hash(NAME_HASH_SEED, e->name, e->len);

		if (name_keep(e))
			continue;
		ne = name_get(&s->names, e->dir, e->name, e->len);
		if (!ne)
			return -ENOMEM;
		if (!ne->chosen) {
			struct pick pk = { .seed = NAME_HASH_SEED, .lo = ne->name_lo, .hi = ne->name_hi,
					   .orig_hash = orig };

			/* unconstrained (no prescan): stay near the original hash so the
			 * dir item met later still fits its leaf */
			if (!s->prescanned && !ne->has_ext) {
				memcpy(buf, e->name, e->len);
				ret = forge_nearest(&s->rng, buf, e->len, 0, e->name, NAME_HASH_SEED, orig, &pk.t);
			} else {
				ret = pick_name(s, e, 0, ne, &pk, buf);
			}
			if (ret)
				return fail(s, ret, "no replacement for a %u-byte name in item (%llu %u %llu)", e->len,
					    (unsigned long long)key->objectid, key->type, (unsigned long long)key->offset);
			name_set(ne, buf);
			s->st.names++;
			if (e->len < 5 && s->mode == SANITIZE_COLLIDE)
				s->st.fallbacks++;
		}
		memcpy(e->name, ne->repl, e->len);
		s->st.items++;
	}
	return 0;
}

/* ------------------------------------------------------------ data wiping */

/* btrfs's lzo layout as an inline extent holds it: le32 length of the whole
 * payload (cap), le32 length of the one segment, the lzo1x stream. Returns
 * the bytes written to buf (of size 8 + bound), 0 on failure. */
static size_t lzo_zeros(const uint8_t *zeros, uint64_t ram, uint8_t *buf, size_t bound, size_t cap)
{
	void *wrk = malloc(LZO1X_1_MEM_COMPRESS);
	lzo_uint len = bound;
	size_t n = 0;

	if (wrk && lzo_init() == LZO_E_OK && lzo1x_1_compress(zeros, ram, buf + 8, &len, wrk) == LZO_E_OK) {
		put_le32(buf, (uint32_t)cap);
		put_le32(buf + 4, (uint32_t)len);
		n = 8 + len;
	}
	free(wrk);
	return n;
}

/* A valid compressed stream of ram zero bytes in out[0..cap), rest zeroed;
 * false if it does not fit. The compressors want room beyond what they
 * write (zstd fails with a capacity of exactly its output), so each writes
 * into a buffer of its bound first. */
static bool zero_stream(uint8_t compression, uint64_t ram, uint8_t *out, size_t cap)
{
	static const uint8_t zeros[65536];
	size_t n = 0, bound = ZSTD_compressBound(ram) + compressBound(ram) + ram / 16 + 64;
	uint8_t *buf;

	if (ram > sizeof(zeros) || !(buf = malloc(8 + bound)))
		return false;
	if (compression == BTRFS_COMPRESS_ZLIB) {
		uLongf len = bound;

		if (compress2(buf, &len, zeros, ram, 9) == Z_OK)
			n = len;
	} else if (compression == BTRFS_COMPRESS_ZSTD) {
		size_t r = ZSTD_compress(buf, bound, zeros, ram, 1);

		n = ZSTD_isError(r) ? 0 : r;
	} else if (compression == BTRFS_COMPRESS_LZO) {
		n = lzo_zeros(zeros, ram, buf, bound, cap);
	}
	if (n && n <= cap) {
		memcpy(out, buf, n);
		memset(out + n, 0, cap - n);
	}
	free(buf);
	return n && n <= cap;
}

static void wipe_inline(struct sanitizer *s, struct leaf *lf, const struct btrfs_key *key, uint8_t *data, uint32_t size)
{
	uint32_t start = BTRFS_FILE_EXTENT_INLINE_DATA_START;
	uint8_t *payload = data + start;
	uint32_t plen;
	uint8_t compression;

	if (size <= start || file_extent_type(data) != BTRFS_FILE_EXTENT_INLINE)
		return;
	plen = size - start;
	compression = file_extent_compression(data);
	if (compression == 0 && lf->owner == s->ino_owner && key->objectid == s->ino_objectid &&
	    S_ISLNK(s->ino_mode)) {
		/* a symlink target: a same-length relative path of harmless characters */
		for (uint32_t i = 0; i < plen; i++)
			payload[i] = (uint8_t)("abcdefghijklmnopqrstuvwxyz0123456789"[forge_rand(&s->rng) % 36]);
	} else if (compression == 0 || !zero_stream(compression, file_extent_ram_bytes(data), payload, plen)) {
		memset(payload, 0, plen);
	}
	s->st.wiped_bytes += plen;
	lf->changed = true;
}

/* ------------------------------------------------------------ leaves and nodes */

static int check_leaf(struct sanitizer *s, const uint8_t *block, uint32_t nritems)
{
	uint32_t data_size = s->nodesize - HDR_SIZE;

	if ((uint64_t)nritems * ITEM_SIZE > data_size)
		return fail(s, -EUCLEAN, "leaf %llu: %u items do not fit", (unsigned long long)header_bytenr(block),
			    nritems);
	for (uint32_t i = 0; i < nritems; i++) {
		const uint8_t *it = leaf_item(block, i);
		uint64_t off = item_offset(it), size = item_size(it);

		if (off < (uint64_t)nritems * ITEM_SIZE || off + size > data_size)
			return fail(s, -EUCLEAN, "leaf %llu: item %u data out of the block",
				    (unsigned long long)header_bytenr(block), i);
	}
	return 0;
}

/* Put the items back in key order, packing their data from the block end. */
static int sort_leaf(struct sanitizer *s, struct leaf *lf)
{
	uint32_t n = lf->nritems, data_size = s->nodesize - HDR_SIZE, pos = data_size;
	uint32_t *order = malloc(n * sizeof(*order));
	uint8_t *copy = malloc(s->nodesize);

	if (!order || !copy) {
		free(order);
		free(copy);
		return -ENOMEM;
	}
	memcpy(copy, lf->block, s->nodesize);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t j = i;

		/* insertion sort: leaves hold a few hundred items */
		while (j > 0 && key_compare(&lf->keys[order[j - 1]], &lf->keys[i]) > 0) {
			order[j] = order[j - 1];
			j--;
		}
		order[j] = i;
	}
	for (uint32_t i = 0; i < n; i++) {
		const uint8_t *src = leaf_item(copy, order[i]);
		uint8_t *dst = leaf_item(lf->block, i);
		uint32_t size = item_size(src);

		pos -= size;
		memcpy(lf->block + HDR_SIZE + pos, copy + HDR_SIZE + item_offset(src), size);
		key_to_disk(item_key_ptr(dst), &lf->keys[order[i]]);
		item_set_offset(dst, pos);
		item_set_size(dst, size);
	}
	for (uint32_t i = 0; i < n; i++)
		key_from_disk(&lf->keys[i], item_key_ptr(leaf_item(lf->block, i)));
	free(order);
	free(copy);
	s->st.resorted++;
	return 0;
}

static void set_csum(struct sanitizer *s, uint8_t *block)
{
	uint8_t out[BTRFS_CSUM_SIZE];

	csum_compute(s->csum_type, block + BTRFS_CSUM_SIZE, s->nodesize - BTRFS_CSUM_SIZE, out);
	memcpy(block, out, BTRFS_CSUM_SIZE);
}

static bool has_names(uint8_t type)
{
	return type == BTRFS_DIR_ITEM_KEY || type == BTRFS_DIR_INDEX_KEY || type == BTRFS_XATTR_ITEM_KEY ||
	       type == BTRFS_INODE_REF_KEY || type == BTRFS_INODE_EXTREF_KEY || type == BTRFS_ROOT_REF_KEY ||
	       type == BTRFS_ROOT_BACKREF_KEY;
}

static int sanitize_item(struct sanitizer *s, struct leaf *lf, unsigned slot)
{
	uint8_t *it = leaf_item(lf->block, slot), *data = leaf_item_data(lf->block, slot);
	struct btrfs_key *key = &lf->keys[slot];
	uint32_t size = item_size(it);
	struct item_view v = item_view_of(data, size);
	size_t n;
	int ret;

	if (key->type == BTRFS_INODE_ITEM_KEY && item_view_has_fixed(&v, key->type)) {
		s->ino_owner = lf->owner;
		s->ino_objectid = key->objectid;
		s->ino_mode = inode_mode(data);
		return 0;
	}
	if (key->type == BTRFS_EXTENT_DATA_KEY) {
		wipe_inline(s, lf, key, data, size);
		return 0;
	}
	/* the root tree's "default" entry and its directory are not user names */
	if (!has_names(key->type) || key->objectid == BTRFS_ROOT_TREE_DIR_OBJECTID)
		return 0;
	ret = parse_names(s, key, data, size, &n);
	if (ret == -EUCLEAN)
		return fail(s, ret, "leaf %llu: item %u (%llu %u %llu) does not parse",
			    (unsigned long long)header_bytenr(lf->block), slot, (unsigned long long)key->objectid,
			    key->type, (unsigned long long)key->offset);
	if (ret)
		return ret;
	lf->slot = slot;
	if (key->type == BTRFS_DIR_ITEM_KEY || key->type == BTRFS_XATTR_ITEM_KEY ||
	    key->type == BTRFS_INODE_EXTREF_KEY)
		ret = rename_keyed(s, lf, key, s->ents, n);
	else
		ret = rename_free(s, key, s->ents, n);
	if (ret)
		return ret;
	for (size_t i = 0; i < n; i++) {
		if (key->type == BTRFS_XATTR_ITEM_KEY && s->ents[i].value_len && !name_keep(&s->ents[i])) {
			memset(s->ents[i].value, 0, s->ents[i].value_len);
			s->st.wiped_bytes += s->ents[i].value_len;
		}
	}
	lf->changed = true;
	return 0;
}

static int sanitize_leaf(struct sanitizer *s, uint8_t *block)
{
	struct leaf lf = { .block = block, .nritems = header_nritems(block), .owner = header_owner(block) };
	struct btrfs_key orig_first;
	int ret;

	ret = check_leaf(s, block, lf.nritems);
	if (ret || !lf.nritems)
		return ret;
	lf.keys = malloc(lf.nritems * sizeof(*lf.keys));
	if (!lf.keys)
		return -ENOMEM;
	for (uint32_t i = 0; i < lf.nritems; i++)
		key_from_disk(&lf.keys[i], item_key_ptr(leaf_item(block, i)));
	lf.first = lf.keys[0];
	lf.last = lf.keys[lf.nritems - 1];
	orig_first = lf.first;
	for (uint32_t i = 0; i < lf.nritems && !ret; i++)
		ret = sanitize_item(s, &lf, i);
	if (!ret && lf.moved) {
		for (uint32_t i = 0; i < lf.nritems; i++)
			key_to_disk(item_key_ptr(leaf_item(block, i)), &lf.keys[i]);
		ret = sort_leaf(s, &lf);
		if (!ret && key_compare(&lf.keys[0], &orig_first))
			ret = key_record(&s->keys, header_bytenr(block), &lf.keys[0]);
	}
	if (!ret && lf.changed)
		set_csum(s, block);
	free(lf.keys);
	return ret;
}

static int sanitize_node(struct sanitizer *s, uint8_t *block)
{
	uint32_t nritems = header_nritems(block);
	bool changed = false;
	struct btrfs_key first;

	if (!nritems || (uint64_t)nritems * PTR_SIZE > s->nodesize - HDR_SIZE)
		return fail(s, -EUCLEAN, "node %llu: %u pointers", (unsigned long long)header_bytenr(block), nritems);
	key_from_disk(&first, key_ptr_key_ptr(node_key_ptr(block, 0)));
	for (uint32_t i = 0; i < nritems; i++) {
		uint8_t *p = node_key_ptr(block, i);
		struct key_entry *e = key_find(&s->keys, key_ptr_blockptr(p));
		struct btrfs_key cur;

		if (!e)
			continue;
		key_from_disk(&cur, key_ptr_key_ptr(p));
		if (key_compare(&cur, &e->key)) {
			key_to_disk(key_ptr_key_ptr(p), &e->key);
			changed = true;
		}
	}
	if (!changed)
		return 0;
	set_csum(s, block);
	{
		struct btrfs_key now;

		key_from_disk(&now, key_ptr_key_ptr(node_key_ptr(block, 0)));
		if (key_compare(&now, &first))
			return key_record(&s->keys, header_bytenr(block), &now);
	}
	return 0;
}

int sanitize_tree_block(struct sanitizer *s, uint8_t *block)
{
	s->err[0] = 0;
	if (s->mode == SANITIZE_NONE)
		return 0;
	if (header_level(block) >= BTRFS_MAX_LEVEL)
		return fail(s, -EUCLEAN, "block %llu: level %u", (unsigned long long)header_bytenr(block),
			    header_level(block));
	return header_level(block) ? sanitize_node(s, block) : sanitize_leaf(s, block);
}

int sanitize_prescan(struct sanitizer *s, const uint8_t *block)
{
	uint32_t nritems = header_nritems(block);
	struct leaf lf = { .block = (uint8_t *)block, .nritems = nritems };
	int ret;

	s->err[0] = 0;
	if (s->mode == SANITIZE_NONE || header_level(block) != 0 || !nritems)
		return 0;
	ret = check_leaf(s, block, nritems);
	if (ret)
		return ret;
	s->prescanned = true;
	key_from_disk(&lf.first, item_key_ptr(leaf_item(block, 0)));
	key_from_disk(&lf.last, item_key_ptr(leaf_item(block, nritems - 1)));
	for (uint32_t i = 0; i < nritems; i++) {
		uint8_t *data = leaf_item_data(block, i);
		struct btrfs_key key;
		uint32_t lo, hi;
		size_t n;

		key_from_disk(&key, item_key_ptr(leaf_item(block, i)));
		if ((key.type != BTRFS_DIR_ITEM_KEY && key.type != BTRFS_INODE_EXTREF_KEY) ||
		    key.objectid == BTRFS_ROOT_TREE_DIR_OBJECTID)
			continue;
		ret = parse_names(s, &key, data, item_size(leaf_item(block, i)), &n);
		if (ret == -EUCLEAN)
			return fail(s, ret, "leaf %llu: item %u (%llu %u %llu) does not parse",
				    (unsigned long long)header_bytenr(block), i, (unsigned long long)key.objectid,
				    key.type, (unsigned long long)key.offset);
		if (ret)
			return ret;
		leaf_range(&lf, &key, &lo, &hi);
		for (size_t j = 0; j < n; j++) {
			struct name_entry *ne;

			if (name_keep(&s->ents[j]))
				continue;
			ne = name_get(&s->names, s->ents[j].dir, s->ents[j].name, s->ents[j].len);
			if (!ne)
				return -ENOMEM;
			if (key.type == BTRFS_DIR_ITEM_KEY) {
				ne->name_lo = ne->name_lo > lo ? ne->name_lo : lo;
				ne->name_hi = ne->name_hi < hi ? ne->name_hi : hi;
			} else {
				if (!ne->has_ext)
					ne->ext_lo = 0, ne->ext_hi = UINT32_MAX;
				ne->has_ext = true;
				ne->ext_lo = ne->ext_lo > lo ? ne->ext_lo : lo;
				ne->ext_hi = ne->ext_hi < hi ? ne->ext_hi : hi;
			}
		}
	}
	return 0;
}

/* The name map's key for filesystem labels (no directory has this inode number). */
#define LABEL_DIR UINT64_MAX

int sanitize_super(struct sanitizer *s, uint8_t *super)
{
	uint8_t *label = super_label_ptr(super);
	uint8_t out[BTRFS_CSUM_SIZE];
	size_t len = strnlen((const char *)label, BTRFS_LABEL_SIZE);

	struct name_entry *ne;

	if (s->mode == SANITIZE_NONE || !len)
		return 0;
	/* every device's copy of the label gets the same replacement */
	ne = name_get(&s->names, LABEL_DIR, label, len);
	if (!ne)
		return -ENOMEM;
	if (!ne->chosen) {
		uint8_t repl[BTRFS_LABEL_SIZE];

		for (size_t i = 0; i < len; i++)
			repl[i] = (uint8_t)("abcdefghijklmnopqrstuvwxyz0123456789"[forge_rand(&s->rng) % 36]);
		name_set(ne, repl);
	}
	memcpy(label, ne->repl, len);
	if (csum_compute(super_csum_type(super), super + BTRFS_CSUM_SIZE, BTRFS_SUPER_INFO_SIZE - BTRFS_CSUM_SIZE, out))
		return fail(s, -EINVAL, "superblock: unknown checksum type %u", super_csum_type(super));
	memcpy(super, out, BTRFS_CSUM_SIZE);
	return 0;
}
