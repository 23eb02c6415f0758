// SPDX-License-Identifier: LGPL-2.1-or-later
/* Tree-block salvage (block_salvage.h): a leaf's items are kept where their
 * key and data range can be made valid and re-laid out packed from the end
 * of the leaf in key order; a node's pointers are kept where their key is in
 * order (a key out of order is replaced by its child's first key). The
 * generation, level and first key the parent expects are weighed here: one
 * of them may disagree, not two (a stale or misdirected pointer disagrees in
 * several, and is no block to salvage). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <btk/item_check.h>
#include <btk/block_salvage.h>
#include <btk/error.h>
#include <btk/format.h>
#include <btk/names.h>
#include <btk/volumes.h>

#define HDR ((uint32_t)sizeof(struct btrfs_header))
#define ITEM ((uint32_t)sizeof(struct btrfs_item))
#define KPTR ((uint32_t)sizeof(struct btrfs_key_ptr))
#define SALVAGE_LOG_MAX 65536

struct entry {
	struct btrfs_key key;
	uint32_t off, size;       /* leaves: the data range (relative to the header's end) */
	uint8_t raw[KPTR];        /* nodes: the pointer as on disk */
	unsigned slot;
};

/* Whether size bytes of data fit what an item of this key type holds (the
 * validator's size rules: item_check.h): 1 yes (or a type whose size is
 * free), 0 no. */
static int item_fits_type(const struct btrfs_key *k, const uint8_t *d, uint32_t size, uint16_t csum_size)
{
	/* sizes only: the values are what a salvage cannot judge */
	const struct item_geometry g = { .csum_size = csum_size };
	struct item_view v = item_view_of(d, size);
	struct item_verdict vd;

	if (!k->type || !key_type_name(k->type))
		return 0;   /* no key type of the format: not an item */
	return item_check_sizes(&g, k, &v, &vd) == 0;
}

static int entry_cmp_key(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	int c = key_compare(&x->key, &y->key);

	return c ? c : (x->slot > y->slot) - (x->slot < y->slot);
}

static int entry_cmp_off(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;

	return (x->off < y->off) ? 1 : (x->off > y->off) ? -1 : 0;   /* from the end of the leaf down */
}

/* An entry left out; only a real one (not a stale header past the items in
 * use) widens the key range of what was lost. */
static void note_drop(struct block_salvage *s, const struct btrfs_key *k, bool real)
{
	s->dropped++;
	if (!real)
		return;
	if (!s->have_dropped || key_compare(k, &s->dropped_lo) < 0)
		s->dropped_lo = *k;
	if (!s->have_dropped || key_compare(k, &s->dropped_hi) > 0)
		s->dropped_hi = *k;
	s->have_dropped = true;
}

/* Whether the original item ranges already tile [lowest offset, data end)
 * without overlap, each fitting its type: then only the key order is wrong. */
static bool ranges_tile(struct entry *v, unsigned n, const uint8_t *data, uint32_t area, uint16_t csum_size)
{
	uint32_t end = area;
	bool ok = true;

	for (unsigned i = 0; i < n; i++)
		if ((uint64_t)v[i].off + v[i].size > area ||
		    !item_fits_type(&v[i].key, data + v[i].off, v[i].size, csum_size))
			return false;
	qsort(v, n, sizeof(*v), entry_cmp_off);
	for (unsigned i = 0; i < n && ok; i++) {
		ok = v[i].off + v[i].size == end;
		end = v[i].off;
	}
	return ok && (uint64_t)n * ITEM <= end;
}

/* One item in slot order, its range corrected where a single field of it is
 * off: the candidate that packs against the previous item (and the next
 * item's end) and fits its type wins. false: no candidate fits. */
static bool place_item(struct entry *it, const struct entry *next, uint32_t prev_start, bool prev_known,
		       uint32_t min_off, const uint8_t *data, uint16_t csum_size, bool *relaid)
{
	uint32_t cand_off[3] = { it->off, 0, it->off }, cand_size[3] = { it->size, it->size, 0 };
	int best = -1, best_score = -1;

	if (prev_known && it->size <= prev_start)
		cand_off[1] = prev_start - it->size;
	if (prev_known && it->off < prev_start)
		cand_size[2] = prev_start - it->off;
	for (int c = 0; c < 3; c++) {
		uint32_t off = cand_off[c], size = cand_size[c];
		int score;
		if (c > 0 && !prev_known)
			break;
		if ((c == 1 && it->size > prev_start) || (c == 2 && it->off >= prev_start))
			continue;
		if (off < min_off || (uint64_t)off + size > prev_start ||
		    !item_fits_type(&it->key, data + off, size, csum_size))
			continue;
		/* a corrected range must not swallow the next item's (when that one lies where items may) */
		if (c > 0 && next && next->off >= min_off && (uint64_t)next->off + next->size <= prev_start &&
		    off < next->off + next->size && (uint64_t)off + size > next->off)
			continue;
		score = (prev_known && off + size == prev_start) * 4 + (!next || next->off + next->size == off) * 2 +
			(c == 0);
		if (score > best_score) {
			best = c;
			best_score = score;
		}
	}
	if (best < 0)
		return false;
	*relaid = best != 0;
	it->off = cand_off[best];
	it->size = cand_size[best];
	return true;
}

/* Item p is lost whole, and the items after it go on as a leaf would: each
 * packed against the one before, below the prefix's data, keys rising on
 * from the prefix's last key. */
static bool rest_is_whole(const struct entry *v, unsigned p, unsigned n, uint32_t end)
{
	if (v[p + 1].off + (uint64_t)v[p + 1].size > end || (p > 0 && key_compare(&v[p - 1].key, &v[p + 1].key) >= 0))
		return false;
	for (unsigned j = p + 2; j < n; j++)
		if (v[j].off + (uint64_t)v[j].size != v[j - 1].off || key_compare(&v[j - 1].key, &v[j].key) >= 0)
			return false;
	return true;
}

/* How many of the n item headers are items: past the longest prefix packed
 * from the end of the leaf, headers that would overlap that prefix's data,
 * or a tail in which no item packs against the one before it, are what an
 * nritems too large reaches into (stale or zeroed headers). */
static unsigned items_in_use(const struct entry *v, unsigned n, const uint8_t *data, uint32_t area,
			     uint16_t csum_size)
{
	uint32_t end = area;
	unsigned p = 0;

	while (p < n && v[p].off + (uint64_t)v[p].size == end && (uint64_t)(p + 1) * ITEM <= v[p].off &&
	       item_fits_type(&v[p].key, data + v[p].off, v[p].size, csum_size)) {
		end = v[p].off;
		p++;
	}
	if (p == n || p + 1 == n)
		return n;   /* whole, or only the last item is off: it may be put back */
	if ((uint64_t)n * ITEM > end)
		return p;
	/* item p with one field off: the next one ends where p starts, by p's
	 * offset or by its size (a tail of stale headers chains only with itself) */
	if (v[p + 1].off + (uint64_t)v[p + 1].size == v[p].off ||
	    (v[p].size <= end && v[p + 1].off + (uint64_t)v[p + 1].size == end - v[p].size))
		return n;
	return rest_is_whole(v, p, n, end) ? n : p;
}

/* The leaf's items: which to keep, with their data ranges. n in, kept out. */
static unsigned leaf_keep(struct fs_info *fs, const uint8_t *buf, struct entry *v, unsigned n, struct block_salvage *s)
{
	const uint8_t *data = buf + HDR;
	uint32_t area = fs->nodesize - HDR, prev_start = area, low = area;
	bool prev_known = true;
	unsigned kept = 0, used, drops_inside = 0;   /* drops before the last item kept */
	uint32_t dropped_before;
	struct entry *tmp = malloc(n * sizeof(*tmp) + 1);

	if (tmp && n) {
		memcpy(tmp, v, n * sizeof(*tmp));
		if (ranges_tile(tmp, n, data, area, fs->csum_size)) {
			free(tmp);
			return n;
		}
	}
	free(tmp);
	used = items_in_use(v, n, data, area, fs->csum_size);
	for (unsigned i = used; i < n; i++)
		note_drop(s, &v[i].key, false);
	if (used < n)
		s->what |= SALVAGE_NRITEMS;
	n = used;
	dropped_before = s->dropped;
	for (unsigned i = 0; i < n; i++) {
		bool relaid = false;
		/* item headers end where the data begins: the rest are no items */
		if ((uint64_t)(kept + 1) * ITEM > low) {
			for (; i < n; i++)
				note_drop(s, &v[i].key, false);
			break;
		}
		if (!place_item(&v[i], i + 1 < n ? &v[i + 1] : NULL, prev_start, prev_known, n * ITEM, data,
				fs->csum_size, &relaid)) {
			note_drop(s, &v[i].key, true);
			prev_known = false;   /* the next item ends at or below prev_start */
			continue;
		}
		if (relaid) {
			s->relaid++;
			s->what |= SALVAGE_ITEM_LAYOUT;
		}
		prev_start = v[i].off;
		prev_known = true;
		if (v[i].off < low)
			low = v[i].off;
		v[kept++] = v[i];
		drops_inside = s->dropped - dropped_before;
	}
	/* what follows the last item that fits is no item: nritems is too large */
	if (s->dropped - dropped_before > drops_inside)
		s->what |= SALVAGE_NRITEMS;
	if (drops_inside)
		s->what |= SALVAGE_ITEM_LAYOUT;
	/* the headers of the items kept must end below their data */
	while (kept && (uint64_t)kept * ITEM > low) {
		unsigned lowest = 0;
		for (unsigned i = 1; i < kept; i++)
			if (v[i].off < v[lowest].off)
				lowest = i;
		note_drop(s, &v[lowest].key, true);
		s->what |= SALVAGE_ITEM_LAYOUT;
		v[lowest] = v[--kept];
		low = area;
		for (unsigned i = 0; i < kept; i++)
			if (v[i].off < low)
				low = v[i].off;
	}
	return kept;
}

/* Whether the keys of v rise strictly leaving out slot skip. */
static bool rises_without(const struct entry *v, unsigned n, unsigned skip)
{
	const struct btrfs_key *prev = NULL;

	for (unsigned i = 0; i < n; i++) {
		if (i == skip)
			continue;
		if (prev && key_compare(prev, &v[i].key) >= 0)
			return false;
		prev = &v[i].key;
	}
	return true;
}

/* A leaf whose keys rise but at one slot, and only leaving out that slot
 * (not its neighbour) makes them rise: that key is what was damaged, not
 * where the item sits (sorting would keep it under a key it never had).
 * Two neighbours out of order with each other are a swap: sorted. The slot
 * to drop, or n. */
static unsigned lone_key_out_of_order(const struct entry *v, unsigned n, const struct block_expect *e)
{
	unsigned at = n, descents = 0;
	bool drop_left, drop_right;

	for (unsigned i = 1; i < n; i++)
		if (key_compare(&v[i - 1].key, &v[i].key) >= 0) {
			descents++;
			at = i;
		}
	if (descents != 1)
		return n;
	drop_left = rises_without(v, n, at - 1);
	drop_right = rises_without(v, n, at);
	/* either would do, but the first key is the one the parent names: the
	 * key after it is the damaged one (sorting would put it first) */
	if (drop_left && drop_right && at == 1 && e && e->first_key && !key_compare(&v[0].key, e->first_key))
		return at;
	return drop_left == drop_right ? n : drop_left ? at - 1 : at;
}

/* Whether k fits at slot j of v in place of its key. */
static bool key_fits_at(const struct entry *v, unsigned n, unsigned j, const struct btrfs_key *k)
{
	return (j == 0 || key_compare(&v[j - 1].key, k) < 0) && (j + 1 >= n || key_compare(k, &v[j + 1].key) < 0);
}

/* A lone key out of order next to keys of its own type: keys of one type
 * that lie together share their objectid mostly (a directory's entries, a
 * file's extents, the chunk items), so the objectid a neighbour of that type
 * has (both, when they agree, also in type) is tried for the damaged one.
 * true when that puts the key in order. */
static bool lone_key_from_neighbours(struct entry *v, unsigned n, unsigned j)
{
	struct btrfs_key k = v[j].key;
	const struct entry *nb[2] = { j > 0 ? &v[j - 1] : NULL, j + 1 < n ? &v[j + 1] : NULL };

	if (nb[0] && nb[1] && nb[0]->key.objectid == nb[1]->key.objectid && nb[0]->key.type == nb[1]->key.type) {
		k.objectid = nb[0]->key.objectid;
		if (!key_fits_at(v, n, j, &k))
			k.type = nb[0]->key.type;
		if (key_fits_at(v, n, j, &k)) {
			v[j].key = k;
			return true;
		}
	}
	/* a neighbour of its type first; then any neighbour: an inode's items lie
	 * together (its inode item, refs, xattrs, extents), so a file extent
	 * whose objectid went wrong between its inode's ref and the next inode's
	 * item is that inode's */
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < 2; i++) {
			k = v[j].key;
			if (!nb[i] || (pass == 0 && nb[i]->key.type != k.type))
				continue;
			k.objectid = nb[i]->key.objectid;
			if (key_fits_at(v, n, j, &k)) {
				v[j].key = k;
				return true;
			}
		}
	return false;
}

/* A leaf being salvaged (keys_order of a node has none): where a root item's
 * data is, and how its root block is read. */
struct leaf_reads {
	struct fs_info *fs;
	const uint8_t *buf;
	const struct block_salvage_reads *reads;
};

/* A root item keyed out of order in a root-tree leaf: the root block it
 * points at names its tree in the header's owner, the objectid the key had
 * (type and offset kept). true when that puts the key in order. */
static bool root_key_from_owner(const struct leaf_reads *lr, struct entry *v, unsigned n, unsigned j)
{
	struct btrfs_key k = v[j].key;
	const uint8_t *d;
	uint64_t owner;

	if (!lr || !lr->reads || !lr->reads->root_owner || header_owner(lr->buf) != BTRFS_ROOT_TREE_OBJECTID ||
	    k.type != BTRFS_ROOT_ITEM_KEY || v[j].size < BTRFS_ROOT_ITEM_V1_SIZE)
		return false;
	d = lr->buf + HDR + v[j].off;
	if (root_item_level(d) >= BTRFS_MAX_LEVEL ||
	    lr->reads->root_owner(lr->fs, root_item_bytenr(d), root_item_generation(d), root_item_level(d), &owner)) {
		btk_error_clear();
		return false;
	}
	k.objectid = owner;
	if (!key_fits_at(v, n, j, &k))
		return false;
	v[j].key = k;
	return true;
}

/* In a root-tree leaf whose keys do not rise, each root item at a slot where
 * they fall is given the objectid its root block names (root_key_from_owner),
 * before anything guesses from the neighbours or takes two keys for a swap. */
static void root_keys_from_owners(const struct leaf_reads *lr, struct entry *v, unsigned n, uint32_t area,
				  struct block_salvage *s)
{
	for (unsigned j = 0; j < n; j++) {
		bool falls = (j > 0 && key_compare(&v[j - 1].key, &v[j].key) >= 0) ||
			     (j + 1 < n && key_compare(&v[j].key, &v[j + 1].key) >= 0);
		if (falls && v[j].off <= area && v[j].size <= area - v[j].off && root_key_from_owner(lr, v, n, j))
			s->what |= SALVAGE_KEY_ORDER;
	}
}

/* Sort by key; drop duplicates and keys outside (lo, hi); in a leaf, mend or
 * drop a lone key out of order (lone_key_out_of_order). */
static unsigned keys_order(struct entry *v, unsigned n, const struct block_expect *e, bool leaf,
			   struct block_salvage *s)
{
	unsigned kept = 0, lone = leaf ? lone_key_out_of_order(v, n, e) : n;

	if (lone < n && lone_key_from_neighbours(v, n, lone)) {
		s->what |= SALVAGE_KEY_ORDER;
	} else if (lone < n) {
		s->what |= SALVAGE_KEY_ORDER;
		note_drop(s, &v[lone].key, true);
		memmove(&v[lone], &v[lone + 1], (n - lone - 1) * sizeof(*v));
		n--;
	}
	for (unsigned i = 1; i < n; i++)
		if (key_compare(&v[i - 1].key, &v[i].key) >= 0)
			s->what |= SALVAGE_KEY_ORDER;
	qsort(v, n, sizeof(*v), entry_cmp_key);
	for (unsigned i = 0; i < n; i++) {
		bool dup = kept && key_compare(&v[kept - 1].key, &v[i].key) == 0;
		/* a key outside the parent's range is not the item's own key: which keys are lost is not known */
		if (dup || (e && e->lo_key && key_compare(&v[i].key, e->lo_key) <= 0) ||
		    (e && e->hi_key && key_compare(&v[i].key, e->hi_key) >= 0)) {
			s->what |= SALVAGE_KEY_ORDER;
			note_drop(s, &v[i].key, dup);
			continue;
		}
		v[kept++] = v[i];
	}
	return kept;
}

/* Two neighbouring keys out of order with each other while the items' data
 * lie in slot order (the second item's right below the first's): the keys
 * were swapped, not the items, so the keys go back (sorting would give each
 * item the other's data). Only where each then fits its data's size and
 * both fit between their neighbours. Not dev extents: one moved past its
 * neighbour looks the same, and their chunks' stripes tell which it was
 * (the dev-extents repair), once sorted. */
static void swap_keys_back(struct entry *v, unsigned n, const uint8_t *data, uint32_t area, uint16_t csum_size,
			   struct block_salvage *s)
{
	for (unsigned i = 0; i + 1 < n; i++) {
		struct btrfs_key k = v[i].key;
		if (k.type == BTRFS_DEV_EXTENT_KEY || v[i + 1].key.type == BTRFS_DEV_EXTENT_KEY)
			continue;
		if (key_compare(&v[i].key, &v[i + 1].key) <= 0 || (uint64_t)v[i].off + v[i].size > area ||
		    v[i + 1].off + (uint64_t)v[i + 1].size != v[i].off)
			continue;
		if ((i > 0 && key_compare(&v[i - 1].key, &v[i + 1].key) >= 0) ||
		    (i + 2 < n && key_compare(&v[i].key, &v[i + 2].key) >= 0))
			continue;
		if (!item_fits_type(&v[i + 1].key, data + v[i].off, v[i].size, csum_size) ||
		    !item_fits_type(&v[i].key, data + v[i + 1].off, v[i + 1].size, csum_size))
			continue;
		v[i].key = v[i + 1].key;
		v[i + 1].key = k;
		s->what |= SALVAGE_KEY_ORDER;
	}
}

/* A leaf whose parent names its first key but whose nritems is 0 (no leaf
 * below a node is empty; the kernel refuses it): the items are still there
 * when the headers from slot 0 pack from the end of the block, rising, and
 * the first is the key the parent names. Their count, or 0. */
static uint32_t emptied_leaf_items(const struct fs_info *fs, const uint8_t *buf, const struct btrfs_key *first)
{
	uint32_t area = fs->nodesize - HDR, end = area, n = 0;
	struct btrfs_key prev = { 0 }, k;

	for (; (uint64_t)(n + 1) * ITEM <= end; n++) {
		const uint8_t *it = leaf_item(buf, n);
		key_from_disk(&k, item_key_ptr(it));
		if (item_offset(it) + (uint64_t)item_size(it) != end || item_offset(it) < (n + 1) * ITEM ||
		    (n == 0 ? key_compare(&k, first) != 0 : key_compare(&prev, &k) >= 0) ||
		    !item_fits_type(&k, buf + HDR + item_offset(it), item_size(it), fs->csum_size))
			break;
		end = item_offset(it);
		prev = k;
	}
	return n;
}

static int salvage_leaf(struct fs_info *fs, uint8_t *buf, const struct block_expect *e,
			const struct block_salvage_reads *reads, struct block_salvage *s)
{
	struct leaf_reads lr = { fs, buf, reads };
	uint32_t area = fs->nodesize - HDR, n = header_nritems(buf), end = area;
	struct entry *v;
	uint8_t *out;

	if (n == 0 && e && e->first_key && (n = emptied_leaf_items(fs, buf, e->first_key)))
		s->what |= SALVAGE_NRITEMS;
	if ((uint64_t)n * ITEM > area) {
		n = area / ITEM;
		s->what |= SALVAGE_NRITEMS;
	}
	v = calloc(n + 1, sizeof(*v));
	out = calloc(1, fs->nodesize);
	if (!v || !out) {
		free(v);
		free(out);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < n; i++) {
		const uint8_t *it = leaf_item(buf, i);
		key_from_disk(&v[i].key, item_key_ptr(it));
		v[i].off = item_offset(it);
		v[i].size = item_size(it);
		v[i].slot = i;
	}
	root_keys_from_owners(&lr, v, n, area, s);
	swap_keys_back(v, n, buf + HDR, area, fs->csum_size, s);
	n = leaf_keep(fs, buf, v, n, s);
	n = keys_order(v, n, e, true, s);
	memcpy(out, buf, HDR);
	for (uint32_t i = 0; i < n; i++) {
		uint8_t *it = leaf_item(out, i);
		end -= v[i].size;
		key_to_disk(item_key_ptr(it), &v[i].key);
		item_set_offset(it, end);
		item_set_size(it, v[i].size);
		memcpy(out + HDR + end, buf + HDR + v[i].off, v[i].size);
	}
	header_set_nritems(out, n);
	memcpy(buf, out, fs->nodesize);
	free(out);
	free(v);
	return 0;
}

/* A pointer that can lead somewhere: aligned, in a chunk, not from the future. */
static bool ptr_plausible(struct fs_info *fs, const uint8_t *p)
{
	uint64_t bytenr = key_ptr_blockptr(p), gen = key_ptr_generation(p);

	return bytenr && bytenr % fs->sectorsize == 0 && gen <= fs->generation &&
	       volumes_num_copies(fs, bytenr) > 0;
}

static int salvage_node(struct fs_info *fs, uint8_t *buf, const struct block_expect *e,
			block_child_key_fn read_child_key, struct block_salvage *s)
{
	uint32_t n = header_nritems(buf), max = (fs->nodesize - HDR) / KPTR, kept = 0, last = 0;
	unsigned level = header_level(buf);
	struct entry *v;

	if (n > max) {
		n = max;
		s->what |= SALVAGE_NRITEMS;
	}
	/* nritems 0 under a parent (no node is empty): the pointers from slot 0
	 * that lead somewhere with rising keys, the first the one the parent names */
	if (n == 0 && e && e->first_key) {
		struct btrfs_key k, prev = { 0 };
		for (; n < max && ptr_plausible(fs, node_key_ptr(buf, n)); n++) {
			key_from_disk(&k, key_ptr_key_ptr(node_key_ptr(buf, n)));
			if (n == 0 ? key_compare(&k, e->first_key) != 0 : key_compare(&prev, &k) >= 0)
				break;
			prev = k;
		}
		if (n)
			s->what |= SALVAGE_NRITEMS;
	}
	v = calloc(n + 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++)
		if (ptr_plausible(fs, node_key_ptr(buf, i)))
			last = i + 1;
	for (uint32_t i = 0; i < n; i++) {
		const uint8_t *p = node_key_ptr(buf, i);
		struct btrfs_key k;
		if (!ptr_plausible(fs, p)) {
			/* past the last pointer that leads somewhere: nritems is too large */
			s->what |= i >= last ? SALVAGE_NRITEMS : SALVAGE_KEY_ORDER;
			key_from_disk(&k, key_ptr_key_ptr(p));
			note_drop(s, &k, i < last);
			continue;
		}
		memcpy(v[kept].raw, p, KPTR);
		key_from_disk(&v[kept].key, key_ptr_key_ptr(p));
		v[kept].slot = i;
		kept++;
	}
	/* a key out of order with its neighbours: its child tells the right one */
	for (uint32_t i = 0; i < kept; i++) {
		bool bad = (i > 0 && key_compare(&v[i - 1].key, &v[i].key) >= 0) ||
			   (i + 1 < kept && key_compare(&v[i].key, &v[i + 1].key) >= 0);
		struct btrfs_key k;
		if (!bad || read_child_key(fs, v[i].raw, level - 1, &k) != 0)
			continue;
		if (key_compare(&k, &v[i].key)) {
			v[i].key = k;
			key_to_disk(key_ptr_key_ptr(v[i].raw), &k);
			s->what |= SALVAGE_KEY_ORDER;
		}
	}
	kept = keys_order(v, kept, e, false, s);
	for (uint32_t i = 0; i < kept; i++)
		memcpy(node_key_ptr(buf, i), v[i].raw, KPTR);
	memset(node_key_ptr(buf, kept), 0, (size_t)(max - kept) * KPTR);
	header_set_nritems(buf, kept);
	free(v);
	return 0;
}

/* How many entries of buf look valid if it were a block of level `level`. */
static unsigned level_fit(struct fs_info *fs, const uint8_t *buf, unsigned level)
{
	uint32_t n = header_nritems(buf), fit = 0, area = fs->nodesize - HDR;

	if (level == 0) {
		uint32_t end = area;
		for (uint32_t i = 0; i < n && (uint64_t)(i + 1) * ITEM <= area; i++) {
			const uint8_t *it = leaf_item(buf, i);
			if (item_offset(it) + (uint64_t)item_size(it) != end || item_offset(it) < (i + 1) * ITEM)
				break;
			end = item_offset(it);
			fit++;
		}
		return fit;
	}
	for (uint32_t i = 0; i < n && (uint64_t)(i + 1) * KPTR <= area; i++)
		if (ptr_plausible(fs, node_key_ptr(buf, i)))
			fit++;
	return fit;
}

/* A node whose header names another node level than its parent: the header
 * is wrong only if its first child is of the level below the parent's (read
 * as is: no salvage may bend the child to the question). */
static bool children_fit_level(struct fs_info *fs, const uint8_t *buf, unsigned want, block_child_key_fn read_child_key)
{
	uint32_t n = header_nritems(buf), max = (fs->nodesize - HDR) / KPTR;
	struct btrfs_key k;
	bool was, fits;

	for (uint32_t i = 0; read_child_key && i < n && i < max; i++) {
		if (!ptr_plausible(fs, node_key_ptr(buf, i)))
			continue;
		was = fs_set_salvage(fs, false);
		fits = read_child_key(fs, node_key_ptr(buf, i), want - 1, &k) == 0;
		fs_set_salvage(fs, was);
		if (!fits)
			btk_error_clear();
		return fits;
	}
	return false;
}

int block_salvage_view(struct fs_info *fs, uint64_t bytenr, uint8_t *buf, const struct block_expect *e,
		       const struct block_salvage_reads *reads, struct block_salvage *s)
{
	block_child_key_fn read_child_key = reads ? reads->child_key : NULL;
	unsigned level = header_level(buf), want = level, mismatches = 0;
	uint64_t gen = header_generation(buf);
	struct btrfs_key first;
	int ret;

	memset(s, 0, sizeof(*s));
	s->bytenr = bytenr;
	s->owner = header_owner(buf);
	s->header_level = (uint8_t)level;
	s->header_generation = gen;
	s->nritems_before = header_nritems(buf);
	/* a block newer than the filesystem is salvaged only under a pointer that
	 * names a generation of the filesystem (its copy gets a current one) */
	if (gen == 0 || (gen > fs->generation && !(e && e->generation && e->generation <= fs->generation)) ||
	    (e && e->owner && header_owner(buf) != e->owner))
		return -EUCLEAN;
	if (e && e->generation && gen != e->generation) {
		s->what |= SALVAGE_TRANSID;
		s->expected_generation = e->generation;
		mismatches++;
	}
	if (e && e->level >= 0 && (unsigned)e->level != level) {
		want = (unsigned)e->level;
		/* a block that is what its header says and not what the parent
		 * says: the parent would be wrong, and that is not mended here */
		if (level_fit(fs, buf, want) == 0 || level_fit(fs, buf, want) < level_fit(fs, buf, level) ||
		    (want && level && !children_fit_level(fs, buf, want, read_child_key)))
			return -EUCLEAN;
		s->what |= SALVAGE_LEVEL;
		header_set_level(buf, (uint8_t)want);
		mismatches++;
	}
	if (e && e->first_key && header_nritems(buf) > 0) {
		const uint8_t *k0 = want ? key_ptr_key_ptr(node_key_ptr(buf, 0)) : item_key_ptr(leaf_item(buf, 0));
		key_from_disk(&first, k0);
		if (key_compare(&first, e->first_key))
			mismatches++;
	}
	if (mismatches > 1)
		return -EUCLEAN;
	ret = want ? salvage_node(fs, buf, e, read_child_key, s) : salvage_leaf(fs, buf, e, reads, s);
	if (ret)
		return ret == -ENOMEM ? ret : -EUCLEAN;
	s->level = (uint8_t)want;
	s->nritems_after = header_nritems(buf);
	if (e && e->first_key) {
		s->have_expected_first = true;
		s->expected_first = *e->first_key;
		if (s->nritems_after) {
			key_from_disk(&s->first, want ? key_ptr_key_ptr(node_key_ptr(buf, 0))
						      : item_key_ptr(leaf_item(buf, 0)));
			if (key_compare(&s->first, e->first_key))
				s->what |= SALVAGE_FIRST_KEY;
		}
	}
	if (block_verify_layout(fs, buf) != BLOCK_OK && s->nritems_after)
		return -EUCLEAN;
	return s->what ? 0 : -EUCLEAN;
}

const struct block_salvage_log *block_salvage_log(const struct fs_info *fs)
{
	return fs->salvage_log;
}

const struct block_salvage *block_salvage_find(const struct fs_info *fs, uint64_t bytenr)
{
	const struct block_salvage_log *l = fs->salvage_log;

	for (size_t i = 0; l && i < l->n; i++)
		if (l->v[i].bytenr == bytenr)
			return &l->v[i];
	return NULL;
}

int block_salvage_note(struct fs_info *fs, const struct block_salvage *s)
{
	struct block_salvage_log *l = fs->salvage_log;

	if (block_salvage_find(fs, s->bytenr))
		return 0;
	if (!l) {
		l = calloc(1, sizeof(*l));
		if (!l)
			return -ENOMEM;
		fs->salvage_log = l;
	}
	if (l->n >= SALVAGE_LOG_MAX)
		return -ENOSPC;   /* past this many, a block is unreadable as before */
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		struct block_salvage *v = realloc(l->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = *s;
	return 0;
}

void block_salvage_log_free(struct fs_info *fs)
{
	if (!fs->salvage_log)
		return;
	free(fs->salvage_log->v);
	free(fs->salvage_log);
	fs->salvage_log = NULL;
}
