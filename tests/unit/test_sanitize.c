// SPDX-License-Identifier: GPL-2.0-only
/* image/sanitize + image/name_forge: crafted leaves and nodes are sanitized;
 * names change but keep their length (and, in collide mode, their hash), dir
 * item / dir index / inode ref agree, keys match the new hashes, leaves stay
 * sorted, data is wiped, checksums are valid and parents follow their
 * children's new first keys. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "image/map_arena.h"
#include "image/name_forge.h"
#include "image/sanitize.h"
#include "image/sanitize_map.h"
#include <btk/csum.h>
#include <btk/format.h>
#include <btk/key.h>

#define NODESIZE 16384
#define HDR sizeof(struct btrfs_header)

struct titem {
	struct btrfs_key key;
	uint8_t data[512];
	uint32_t size;
};

static int titem_cmp(const void *a, const void *b)
{
	return key_compare(&((const struct titem *)a)->key, &((const struct titem *)b)->key);
}

static void block_csum(uint8_t *block, uint16_t csum_type)
{
	uint8_t out[BTRFS_CSUM_SIZE];

	csum_compute(csum_type, block + BTRFS_CSUM_SIZE, NODESIZE - BTRFS_CSUM_SIZE, out);
	memcpy(block, out, BTRFS_CSUM_SIZE);
}

static bool csum_ok(const uint8_t *block, uint16_t csum_type)
{
	uint8_t out[BTRFS_CSUM_SIZE];

	csum_compute(csum_type, block + BTRFS_CSUM_SIZE, NODESIZE - BTRFS_CSUM_SIZE, out);
	return !memcmp(block, out, csum_size(csum_type));
}

/* A leaf of the given items (sorted here), data packed from the end. */
static uint8_t *make_leaf(uint64_t bytenr, uint64_t owner, struct titem *items, unsigned n, uint16_t csum_type)
{
	uint8_t *b = calloc(1, NODESIZE);
	uint32_t pos = NODESIZE - HDR;

	qsort(items, n, sizeof(*items), titem_cmp);
	header_set_bytenr(b, bytenr);
	header_set_owner(b, owner);
	header_set_nritems(b, n);
	header_set_level(b, 0);
	header_set_generation(b, 7);
	for (unsigned i = 0; i < n; i++) {
		uint8_t *it = leaf_item(b, i);

		pos -= items[i].size;
		memcpy(b + HDR + pos, items[i].data, items[i].size);
		key_to_disk(item_key_ptr(it), &items[i].key);
		item_set_offset(it, pos);
		item_set_size(it, items[i].size);
	}
	block_csum(b, csum_type);
	return b;
}

static void add_dir(struct titem *t, uint64_t dir, uint8_t type, uint64_t idx, const char *name,
		    const char *value, uint64_t child)
{
	size_t nl = strlen(name), vl = value ? strlen(value) : 0;
	struct btrfs_key loc = { child, BTRFS_INODE_ITEM_KEY, 0 };

	memset(t, 0, sizeof(*t));
	t->key.objectid = dir;
	t->key.type = type;
	t->key.offset = type == BTRFS_DIR_INDEX_KEY ? idx : btrfs_name_hash(name, nl);
	key_to_disk(dir_item_location_ptr(t->data), &loc);
	dir_item_set_transid(t->data, 7);
	dir_item_set_name_len(t->data, (uint16_t)nl);
	dir_item_set_data_len(t->data, (uint16_t)vl);
	dir_item_set_type(t->data, type == BTRFS_XATTR_ITEM_KEY ? 8 : 1);
	memcpy(t->data + sizeof(struct btrfs_dir_item), name, nl);
	if (vl)
		memcpy(t->data + sizeof(struct btrfs_dir_item) + nl, value, vl);
	t->size = (uint32_t)(sizeof(struct btrfs_dir_item) + nl + vl);
}

static void add_ref(struct titem *t, uint64_t ino, uint64_t parent, uint64_t idx, const char *name)
{
	size_t nl = strlen(name);

	memset(t, 0, sizeof(*t));
	t->key = (struct btrfs_key){ ino, BTRFS_INODE_REF_KEY, parent };
	inode_ref_set_index(t->data, idx);
	inode_ref_set_name_len(t->data, (uint16_t)nl);
	memcpy(t->data + sizeof(struct btrfs_inode_ref), name, nl);
	t->size = (uint32_t)(sizeof(struct btrfs_inode_ref) + nl);
}

static void add_inode(struct titem *t, uint64_t ino, uint32_t mode)
{
	memset(t, 0, sizeof(*t));
	t->key = (struct btrfs_key){ ino, BTRFS_INODE_ITEM_KEY, 0 };
	inode_set_mode(t->data, mode);
	t->size = sizeof(struct btrfs_inode_item);
}

static void add_inline(struct titem *t, uint64_t ino, const char *content)
{
	size_t n = strlen(content), start = BTRFS_FILE_EXTENT_INLINE_DATA_START;

	memset(t, 0, sizeof(*t));
	t->key = (struct btrfs_key){ ino, BTRFS_EXTENT_DATA_KEY, 0 };
	file_extent_set_generation(t->data, 7);
	file_extent_set_ram_bytes(t->data, n);
	file_extent_set_type(t->data, BTRFS_FILE_EXTENT_INLINE);
	memcpy(t->data + start, content, n);
	t->size = (uint32_t)(start + n);
}

/* Item slot with this objectid and type (the first one), or -1. */
static int find_slot(const uint8_t *leaf, uint64_t objectid, uint8_t type, unsigned nth)
{
	for (unsigned i = 0; i < header_nritems(leaf); i++) {
		struct btrfs_key k;

		key_from_disk(&k, item_key_ptr(leaf_item(leaf, i)));
		if (k.objectid == objectid && k.type == type && nth-- == 0)
			return (int)i;
	}
	return -1;
}

static struct btrfs_key slot_key(const uint8_t *leaf, int slot)
{
	struct btrfs_key k;

	key_from_disk(&k, item_key_ptr(leaf_item(leaf, (unsigned)slot)));
	return k;
}

/* Name of the first entry of a dir item / dir index / inode ref. */
static const uint8_t *entry_name(const uint8_t *leaf, int slot, uint16_t *len)
{
	const uint8_t *d = leaf_item_data(leaf, (unsigned)slot);
	struct btrfs_key k = slot_key(leaf, slot);

	if (k.type == BTRFS_INODE_REF_KEY) {
		*len = inode_ref_name_len(d);
		return d + sizeof(struct btrfs_inode_ref);
	}
	*len = dir_item_name_len(d);
	return d + sizeof(struct btrfs_dir_item);
}

static void assert_sorted_and_packed(const uint8_t *leaf)
{
	uint32_t end = NODESIZE - HDR;

	for (unsigned i = 0; i < header_nritems(leaf); i++) {
		const uint8_t *it = leaf_item(leaf, i);

		cr_assert_eq(item_offset(it) + item_size(it), end, "item %u data is not packed", i);
		end = item_offset(it);
		if (i) {
			struct btrfs_key a = slot_key(leaf, (int)i - 1), b = slot_key(leaf, (int)i);

			cr_assert_lt(key_compare(&a, &b), 0, "items %u and %u out of order", i - 1, i);
		}
	}
}

static const char *const secret_names[] = { "hello_world.txt", "ab", "user.secretattr", "topsecret",
					    "inline file contents", "/target/path/x" };

/* The fs-tree leaf every test starts from: dir 256 holds a long-named file
 * 257 (with an xattr and inline data) and a short-named symlink 258. */
static uint8_t *sample_leaf(uint16_t csum_type)
{
	struct titem t[16];
	unsigned n = 0;

	add_inode(&t[n++], 256, S_IFDIR | 0755);
	add_ref(&t[n++], 256, 256, 0, "..");
	add_dir(&t[n++], 256, BTRFS_DIR_ITEM_KEY, 0, "hello_world.txt", NULL, 257);
	add_dir(&t[n++], 256, BTRFS_DIR_ITEM_KEY, 0, "ab", NULL, 258);
	add_dir(&t[n++], 256, BTRFS_DIR_INDEX_KEY, 2, "hello_world.txt", NULL, 257);
	add_dir(&t[n++], 256, BTRFS_DIR_INDEX_KEY, 3, "ab", NULL, 258);
	add_inode(&t[n++], 257, S_IFREG | 0644);
	add_ref(&t[n++], 257, 256, 2, "hello_world.txt");
	add_dir(&t[n++], 257, BTRFS_XATTR_ITEM_KEY, 0, "user.secretattr", "topsecret", 0);
	add_inline(&t[n++], 257, "inline file contents");
	add_inode(&t[n++], 258, S_IFLNK | 0777);
	add_ref(&t[n++], 258, 256, 3, "ab");
	add_inline(&t[n++], 258, "/target/path/x");
	return make_leaf(1 << 20, BTRFS_FS_TREE_OBJECTID, t, n, csum_type);
}

/* Checks common to both modes; returns the new names of 257 and 258. */
static void check_sample(const uint8_t *leaf, uint16_t csum_type, char name257[16], char name258[3])
{
	uint16_t len;
	const uint8_t *p;
	int s;

	cr_assert(csum_ok(leaf, csum_type), "checksum not recomputed");
	assert_sorted_and_packed(leaf);
	for (size_t i = 0; i < sizeof(secret_names) / sizeof(secret_names[0]); i++)
		cr_assert_null(memmem(leaf, NODESIZE, secret_names[i], strlen(secret_names[i])),
			       "'%s' survived", secret_names[i]);
	cr_assert_not_null(memmem(leaf, NODESIZE, "..", 2), "the root dir's '..' ref must stay");

	/* inode ref names, then every dir item / dir index agrees with them */
	s = find_slot(leaf, 257, BTRFS_INODE_REF_KEY, 0);
	p = entry_name(leaf, s, &len);
	cr_assert_eq(len, 15);
	memcpy(name257, p, 15);
	name257[15] = 0;
	s = find_slot(leaf, 258, BTRFS_INODE_REF_KEY, 0);
	p = entry_name(leaf, s, &len);
	cr_assert_eq(len, 2);
	memcpy(name258, p, 2);
	name258[2] = 0;
	cr_assert(forge_name_ok((const uint8_t *)name257, 15) && forge_name_ok((const uint8_t *)name258, 2));

	for (unsigned nth = 0; nth < 2; nth++) {
		s = find_slot(leaf, 256, BTRFS_DIR_ITEM_KEY, nth);
		cr_assert_geq(s, 0);
		p = entry_name(leaf, s, &len);
		cr_assert(len == 15 ? !memcmp(p, name257, 15) : len == 2 && !memcmp(p, name258, 2),
			  "dir item %u does not match its inode ref", nth);
		cr_assert_eq(slot_key(leaf, s).offset, btrfs_name_hash(p, len), "dir item key is not its name hash");
		s = find_slot(leaf, 256, BTRFS_DIR_INDEX_KEY, nth);
		p = entry_name(leaf, s, &len);
		cr_assert(slot_key(leaf, s).offset == 2 ? len == 15 && !memcmp(p, name257, 15)
							: len == 2 && !memcmp(p, name258, 2),
			  "dir index %u does not match its inode ref", nth);
	}

	/* the xattr: namespace kept, rest renamed, key is the hash, value zeroed */
	s = find_slot(leaf, 257, BTRFS_XATTR_ITEM_KEY, 0);
	p = entry_name(leaf, s, &len);
	cr_assert_eq(len, 15);
	cr_assert(!memcmp(p, "user.", 5));
	cr_assert_eq(slot_key(leaf, s).offset, btrfs_name_hash(p, len));
	for (unsigned i = 0; i < 9; i++)
		cr_assert_eq(p[len + i], 0, "xattr value not zeroed");

	/* inline data zeroed, the symlink target replaced by printable bytes */
	s = find_slot(leaf, 257, BTRFS_EXTENT_DATA_KEY, 0);
	p = leaf_item_data(leaf, (unsigned)s);
	cr_assert_eq(item_size(leaf_item(leaf, (unsigned)s)), BTRFS_FILE_EXTENT_INLINE_DATA_START + 20);
	for (unsigned i = 0; i < 20; i++)
		cr_assert_eq(p[BTRFS_FILE_EXTENT_INLINE_DATA_START + i], 0);
	cr_assert_eq(file_extent_ram_bytes(p), 20);
	s = find_slot(leaf, 258, BTRFS_EXTENT_DATA_KEY, 0);
	p = leaf_item_data(leaf, (unsigned)s);
	for (unsigned i = 0; i < 14; i++) {
		uint8_t c = p[BTRFS_FILE_EXTENT_INLINE_DATA_START + i];

		cr_assert(c > ' ' && c < 127 && c != '/', "symlink byte %u is %#x", i, c);
	}
}

Test(sanitize, random_mode_renames_rekeys_and_wipes)
{
	uint16_t types[] = { BTRFS_CSUM_TYPE_CRC32, BTRFS_CSUM_TYPE_XXHASH, BTRFS_CSUM_TYPE_SHA256,
			     BTRFS_CSUM_TYPE_BLAKE2 };

	for (unsigned c = 0; c < 4; c++) {
		struct sanitizer *s;
		struct sanitize_stats st;
		uint8_t *leaf = sample_leaf(types[c]);
		char n257[16], n258[3];

		cr_assert_eq(sanitizer_new(&s, SANITIZE_RANDOM, types[c], NODESIZE, 42 + c), 0);
		cr_assert_eq(sanitize_tree_block(s, leaf), 0, "%s", sanitizer_error(s));
		check_sample(leaf, types[c], n257, n258);
		sanitizer_stats(s, &st);
		cr_assert_eq(st.names, 2, "two directory entries renamed, got %llu", (unsigned long long)st.names);
		cr_assert_geq(st.rekeyed, 2, "random mode re-keys the dir items and the xattr");
		sanitizer_free(s);
		free(leaf);
	}
}

Test(sanitize, collide_mode_keeps_hashes_of_long_names)
{
	struct sanitizer *s;
	struct sanitize_stats st;
	uint8_t *leaf = sample_leaf(BTRFS_CSUM_TYPE_CRC32);
	char n257[16], n258[3];
	int slot;

	cr_assert_eq(sanitizer_new(&s, SANITIZE_COLLIDE, BTRFS_CSUM_TYPE_CRC32, NODESIZE, 1), 0);
	cr_assert_eq(sanitize_tree_block(s, leaf), 0, "%s", sanitizer_error(s));
	check_sample(leaf, BTRFS_CSUM_TYPE_CRC32, n257, n258);
	cr_assert_eq(btrfs_name_hash(n257, 15), btrfs_name_hash("hello_world.txt", 15), "collide keeps the hash");
	slot = find_slot(leaf, 257, BTRFS_XATTR_ITEM_KEY, 0);
	cr_assert_eq(slot_key(leaf, slot).offset, btrfs_name_hash("user.secretattr", 15));
	sanitizer_stats(s, &st);
	cr_assert_eq(st.fallbacks, 1, "only the 2-byte name falls back to random");
	sanitizer_free(s);
	free(leaf);
}

/* The inode ref of a name met before its dir item (another leaf) decides the
 * name; the dir item then takes it and still fits. */
Test(sanitize, names_agree_across_leaves)
{
	struct sanitizer *s;
	struct titem a[4], b[4];
	uint8_t *first, *second;
	const uint8_t *p1, *p2;
	uint16_t l1, l2;
	int s1, s2;

	add_inode(&a[0], 300, S_IFREG | 0644);
	add_ref(&a[1], 300, 400, 2, "renamed_into_newer_dir");
	add_ref(&a[2], 301, 400, 3, "xyz");
	first = make_leaf(1 << 20, 5, a, 3, 0);
	add_inode(&b[0], 400, S_IFDIR | 0755);
	add_dir(&b[1], 400, BTRFS_DIR_ITEM_KEY, 0, "renamed_into_newer_dir", NULL, 300);
	add_dir(&b[2], 400, BTRFS_DIR_ITEM_KEY, 0, "xyz", NULL, 301);
	add_dir(&b[3], 400, BTRFS_DIR_INDEX_KEY, 2, "renamed_into_newer_dir", NULL, 300);
	second = make_leaf(2 << 20, 5, b, 4, 0);

	cr_assert_eq(sanitizer_new(&s, SANITIZE_RANDOM, 0, NODESIZE, 7), 0);
	cr_assert_eq(sanitize_tree_block(s, first), 0, "%s", sanitizer_error(s));
	cr_assert_eq(sanitize_tree_block(s, second), 0, "%s", sanitizer_error(s));
	assert_sorted_and_packed(second);
	s1 = find_slot(first, 300, BTRFS_INODE_REF_KEY, 0);
	p1 = entry_name(first, s1, &l1);
	for (unsigned nth = 0; nth < 2; nth++) {
		s2 = find_slot(second, 400, BTRFS_DIR_ITEM_KEY, nth);
		p2 = entry_name(second, s2, &l2);
		cr_assert_eq(slot_key(second, s2).offset, btrfs_name_hash(p2, l2));
		if (l2 == l1)
			cr_assert(!memcmp(p1, p2, l1), "inode ref and dir item disagree");
	}
	s2 = find_slot(second, 400, BTRFS_DIR_INDEX_KEY, 0);
	p2 = entry_name(second, s2, &l2);
	cr_assert(l2 == l1 && !memcmp(p1, p2, l1), "inode ref and dir index disagree");
	cr_assert_null(memmem(first, NODESIZE, "renamed_into", 12));
	cr_assert_null(memmem(second, NODESIZE, "renamed_into", 12));
	cr_assert(csum_ok(first, 0) && csum_ok(second, 0));
	sanitizer_free(s);
	free(first);
	free(second);
}

/* A leaf starting with a dir item gets a new first key; its parent follows. */
Test(sanitize, parent_follows_new_first_key)
{
	struct sanitizer *s;
	struct titem t[3];
	uint8_t *leaf, *node = calloc(1, NODESIZE);
	struct btrfs_key before, after, in_node;
	bool moved = false;

	for (uint64_t seed = 1; seed < 40 && !moved; seed++) {
		add_dir(&t[0], 500, BTRFS_DIR_ITEM_KEY, 0, "q", NULL, 501);
		add_dir(&t[1], 500, BTRFS_DIR_ITEM_KEY, 0, "some_longer_name", NULL, 502);
		add_dir(&t[2], 500, BTRFS_DIR_INDEX_KEY, 9, "q", NULL, 501);
		leaf = make_leaf(3 << 20, 5, t, 3, 0);
		before = slot_key(leaf, 0);
		memset(node, 0, NODESIZE);
		header_set_bytenr(node, 4 << 20);
		header_set_owner(node, 5);
		header_set_level(node, 1);
		header_set_nritems(node, 2);
		key_to_disk(key_ptr_key_ptr(node_key_ptr(node, 0)), &before);
		key_ptr_set_blockptr(node_key_ptr(node, 0), 3 << 20);
		key_to_disk(key_ptr_key_ptr(node_key_ptr(node, 1)), &(struct btrfs_key){ 600, 1, 0 });
		key_ptr_set_blockptr(node_key_ptr(node, 1), 5 << 20);
		block_csum(node, 0);

		cr_assert_eq(sanitizer_new(&s, SANITIZE_RANDOM, 0, NODESIZE, seed), 0);
		cr_assert_eq(sanitize_tree_block(s, leaf), 0, "%s", sanitizer_error(s));
		assert_sorted_and_packed(leaf);
		after = slot_key(leaf, 0);
		cr_assert_geq(key_compare(&after, &before), 0, "the first key may only grow");
		cr_assert_eq(sanitize_tree_block(s, node), 0, "%s", sanitizer_error(s));
		key_from_disk(&in_node, key_ptr_key_ptr(node_key_ptr(node, 0)));
		cr_assert_eq(key_compare(&in_node, &after), 0, "node key does not follow its child");
		cr_assert(csum_ok(node, 0));
		moved = key_compare(&after, &before) != 0;
		sanitizer_free(s);
		free(leaf);
	}
	cr_assert(moved, "no seed moved the first key: the test proves nothing");
	free(node);
}

Test(sanitize, none_mode_changes_nothing)
{
	struct sanitizer *s;
	uint8_t *leaf = sample_leaf(0), *copy = malloc(NODESIZE);

	memcpy(copy, leaf, NODESIZE);
	cr_assert_eq(sanitizer_new(&s, SANITIZE_NONE, 0, NODESIZE, 1), 0);
	cr_assert_eq(sanitize_tree_block(s, leaf), 0);
	cr_assert(!memcmp(copy, leaf, NODESIZE));
	sanitizer_free(s);
	free(leaf);
	free(copy);
}

Test(sanitize, garbage_leaf_is_refused)
{
	struct sanitizer *s;
	uint8_t *leaf = sample_leaf(0);

	item_set_size(leaf_item(leaf, 3), 60000);
	cr_assert_eq(sanitizer_new(&s, SANITIZE_RANDOM, 0, NODESIZE, 1), 0);
	cr_assert_lt(sanitize_tree_block(s, leaf), 0);
	cr_assert_neq(sanitizer_error(s)[0], 0);
	sanitizer_free(s);
	free(leaf);
}

Test(name_forge, solve_hits_any_target)
{
	struct forge_rng rng = { 5 };
	const uint8_t orig[] = "abcdefgh";

	for (uint32_t i = 0; i < 2000; i++) {
		uint8_t name[8];
		uint32_t target = (uint32_t)forge_rand(&rng);

		memcpy(name, orig, 8);
		cr_assert_eq(forge_solve(&rng, name, 8, 0, orig, ~1U, target), 0);
		cr_assert_eq(forge_hash(~1U, name, 8), target);
		cr_assert(forge_name_ok(name, 8) && memcmp(name, orig, 8));
	}
}

Test(name_forge, short_names_search_and_nearest)
{
	struct forge_rng rng = { 9 };
	uint8_t name[3] = { 'a', 'b', 'c' };
	const uint8_t orig[3] = { 'a', 'b', 'c' };
	uint32_t h, target = btrfs_name_hash(orig, 3);

	cr_assert_eq(forge_search(&rng, name, 3, 0, orig, ~1U, 0, UINT32_MAX / 4, NULL, NULL, &h), 0);
	cr_assert_eq(forge_hash(~1U, name, 3), h);
	cr_assert_leq(h, UINT32_MAX / 4);
	memcpy(name, orig, 3);
	cr_assert_eq(forge_nearest(&rng, name, 3, 0, orig, ~1U, target, &h), 0);
	cr_assert(memcmp(name, orig, 3));
	cr_assert_lt(h > target ? h - target : target - h, 1U << 26, "nearest is not near");
	memcpy(name, "x", 1);
	cr_assert_eq(forge_search(&rng, name, 1, 0, (const uint8_t *)"x", ~1U, 0, UINT32_MAX, NULL, NULL, &h), 0);
	cr_assert(forge_name_ok(name, 1) && name[0] != 'x');
}

Test(sanitize, properties_stay_and_label_goes)
{
	struct sanitizer *s;
	struct titem t[3];
	uint8_t *leaf, *super = calloc(1, BTRFS_SUPER_INFO_SIZE);
	uint8_t out[BTRFS_CSUM_SIZE];
	int slot;

	add_inode(&t[0], 300, S_IFDIR | 0755);
	add_dir(&t[1], 300, BTRFS_XATTR_ITEM_KEY, 0, "btrfs.compression", "zstd", 0);
	add_dir(&t[2], 300, BTRFS_XATTR_ITEM_KEY, 0, "user.comment", "private", 0);
	leaf = make_leaf(1 << 20, 5, t, 3, 0);
	cr_assert_eq(sanitizer_new(&s, SANITIZE_RANDOM, 0, NODESIZE, 3), 0);
	cr_assert_eq(sanitize_tree_block(s, leaf), 0, "%s", sanitizer_error(s));
	cr_assert_not_null(memmem(leaf, NODESIZE, "btrfs.compressionzstd", 21), "a property was renamed or wiped");
	cr_assert_null(memmem(leaf, NODESIZE, "comment", 7));
	cr_assert_null(memmem(leaf, NODESIZE, "private", 7));
	slot = find_slot(leaf, 300, BTRFS_XATTR_ITEM_KEY, 1);
	cr_assert_geq(slot, 0);
	assert_sorted_and_packed(leaf);

	super_set_csum_type(super, BTRFS_CSUM_TYPE_SHA256);
	memcpy(super_label_ptr(super), "my secret label", 15);
	cr_assert_eq(sanitize_super(s, super), 0);
	cr_assert_null(memmem(super, BTRFS_SUPER_INFO_SIZE, "secret", 6));
	cr_assert_eq(strlen((const char *)super_label_ptr(super)), 15);
	csum_compute(BTRFS_CSUM_TYPE_SHA256, super + BTRFS_CSUM_SIZE, BTRFS_SUPER_INFO_SIZE - BTRFS_CSUM_SIZE, out);
	cr_assert(!memcmp(super, out, 32), "superblock checksum not recomputed");
	{
		/* another device's superblock: the same new label */
		uint8_t *other = calloc(1, BTRFS_SUPER_INFO_SIZE);

		super_set_csum_type(other, BTRFS_CSUM_TYPE_SHA256);
		memcpy(super_label_ptr(other), "my secret label", 15);
		cr_assert_eq(sanitize_super(s, other), 0);
		cr_assert(!memcmp(super_label_ptr(other), super_label_ptr(super), 16));
		free(other);
	}
	sanitizer_free(s);
	free(leaf);
	free(super);
}

/* A snapshot's copy of a directory leaf split differently: without a prescan
 * a random hash chosen in one copy may not fit the other; with it, both
 * copies get the same name and keys that fit their leaves. */
Test(sanitize, prescan_makes_copies_agree)
{
	static const char *const names[] = { "alpha_one", "bravo_two", "charlie_3", "delta_four", "echo_five",
					     "foxtrot_6", "golf_seven" };
	struct titem a[10], b[8];
	unsigned na = 0, nb = 0;
	uint8_t *la, *lb;
	struct sanitizer *s;

	/* copy A: every dir item of dir 700 between two other inodes (any hash fits);
	 * copy B: only those up to the median hash, the last one ending the leaf, so
	 * its range for (700 DIR_ITEM) ends at the median */
	uint64_t hashes[7], median;
	for (unsigned i = 0; i < 7; i++)
		hashes[i] = btrfs_name_hash(names[i], strlen(names[i]));
	median = hashes[0];
	for (unsigned i = 0; i < 7; i++) {
		unsigned below = 0;

		for (unsigned j = 0; j < 7; j++)
			below += hashes[j] < hashes[i];
		if (below == 3)
			median = hashes[i];
	}
	add_inode(&a[na++], 699, S_IFREG | 0644);
	for (unsigned i = 0; i < 7; i++) {
		add_dir(&a[na++], 700, BTRFS_DIR_ITEM_KEY, 0, names[i], NULL, 800 + i);
		if (hashes[i] <= median)
			add_dir(&b[nb++], 700, BTRFS_DIR_ITEM_KEY, 0, names[i], NULL, 800 + i);
	}
	add_inode(&a[na++], 701, S_IFREG | 0644);
	la = make_leaf(1 << 20, 5, a, na, 0);
	lb = make_leaf(2 << 20, 256, b, nb, 0);
	cr_assert_eq(sanitizer_new(&s, SANITIZE_RANDOM, 0, NODESIZE, 11), 0);
	cr_assert_eq(sanitize_prescan(s, la), 0);
	cr_assert_eq(sanitize_prescan(s, lb), 0);
	cr_assert_eq(sanitize_tree_block(s, la), 0, "%s", sanitizer_error(s));
	cr_assert_eq(sanitize_tree_block(s, lb), 0, "%s", sanitizer_error(s));
	assert_sorted_and_packed(la);
	assert_sorted_and_packed(lb);
	for (unsigned i = 0; i < nb; i++) {
		int sb = (int)i, sa;
		struct btrfs_key kb = slot_key(lb, sb);
		uint16_t l1, l2;
		const uint8_t *p2 = entry_name(lb, sb, &l2), *p1 = NULL;

		cr_assert_eq(kb.objectid, 700);
		cr_assert_eq(kb.offset, btrfs_name_hash(p2, l2));
		cr_assert_leq(kb.offset, median, "a copy's dir item left its leaf's range");
		for (sa = 0; sa < (int)na; sa++) {
			struct btrfs_key ka = slot_key(la, sa);

			if (ka.offset == kb.offset)
				p1 = entry_name(la, sa, &l1);
		}
		cr_assert_not_null(p1, "the copies were renamed differently");
		cr_assert(l1 == l2 && !memcmp(p1, p2, l1));
	}
	for (unsigned i = 0; i < 7; i++)
		cr_assert_null(memmem(la, NODESIZE, names[i], strlen(names[i])));
	sanitizer_free(s);
	free(la);
	free(lb);
}

/* The name map over an arena with a 64 KiB resident budget: dropped to its file
 * again and again, every entry is still found with its new name, and no
 * original name is stored (entries hold digests). */
Test(sanitize_map, bounded_arena_keeps_entries)
{
	struct map_arena *a = map_arena_new(1 << 16, NULL);
	struct smap m;
	enum { N = 20000 };
	char name[32], repl[32];

	cr_assert_not_null(a);
	cr_assert_eq(smap_init(&m, a), 0);
	for (unsigned i = 0; i < N; i++) {
		int len = snprintf(name, sizeof(name), "secret-name-%u", i);
		struct name_entry *e = name_get(&m, i % 97, (const uint8_t *)name, (size_t)len);
		cr_assert_not_null(e);
		cr_assert(!e->chosen);
		snprintf(repl, sizeof(repl), "%0*u", len, N - i);
		name_set(e, (const uint8_t *)repl);
		cr_assert_null(memmem(e, sizeof(*e) + (size_t)len, name, (size_t)len), "original name stored");
	}
	cr_assert_gt(map_arena_trims(a), 0, "the arena was never trimmed");
	for (unsigned i = 0; i < N; i++) {
		int len = snprintf(name, sizeof(name), "secret-name-%u", i);
		struct name_entry *e = name_find(&m, i % 97, (const uint8_t *)name, (size_t)len);
		cr_assert_not_null(e, "entry %u lost", i);
		snprintf(repl, sizeof(repl), "%0*u", len, N - i);
		cr_assert(e->chosen && !memcmp(e->repl, repl, (size_t)len), "entry %u changed", i);
		cr_assert_null(name_find(&m, i % 97 + 1, (const uint8_t *)name, (size_t)len));
	}
	smap_release(&m);
	map_arena_free(a);
}
