// SPDX-License-Identifier: GPL-2.0-only
/* btk-corrupt: damage an unmounted btrfs image on purpose, one edit per run,
 * for the btk-check corruption corpus (tests/images/corrupt/README.md).
 *
 * Targets: a superblock field (every or one copy), a tree block by logical
 * address (header fields, item headers, key pointers, raw bytes), an item by
 * tree and key (a named field, raw bytes, or deletion), raw device bytes.
 * Tree blocks get a fresh checksum unless --no-csum; --copy N damages one
 * copy (mirror) of a block only. Edits are in place: nothing is COWed, so the
 * rest of the filesystem stays as it was. --batch FILE applies many edits
 * (one per line) with the filesystem opened once.
 *
 * Exit status 0, 1 on errors, 2 on usage errors. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/env_knobs.h"
#include <btk/block.h>
#include <btk/csum.h>
#include <btk/ctree_ops.h>
#include <btk/fs.h>
#include <btk/names.h>
#include <btk/super.h>
#include <btk/tree.h>
#include <btk/volumes.h>
#include "tests/tools/btk_corrupt_fields.h"

#define ALL (-1)

struct corrupt {
	char **paths;
	unsigned npaths;
	/* target */
	bool super, delete, get, no_csum, have_block, have_key, insert, append;
	const char *raw, *tree, *batch;
	const char *split; /* --split-csum N: checksums kept by the first half */
	uint64_t bytenr;
	struct btrfs_key key;
	/* change */
	const char *field, *value, *bytes, *offset;
	/* where */
	int copy, super_copy, device;
	/* state */
	struct fs_info *fs;
	struct io_dev **wio; /* write handles per device, opened lazily */
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: btk-corrupt [OPTIONS] DEVICE...\n"
		"Damage an unmounted btrfs filesystem on purpose (test tool; one edit per run,\n"
		"or many with --batch).\n"
		"Target (one of):\n"
		"  -S, --super               a superblock field\n"
		"  -b, --block BYTENR        a tree block, by logical address\n"
		"  -t, --tree TREE -k, --key OBJECTID,TYPE,OFFSET\n"
		"                            an item (TYPE: number or name like INODE_ITEM)\n"
		"  -r, --raw OFFSET          bytes at a byte offset of a device (with --bytes)\n"
		"Change (one of):\n"
		"  -f, --field NAME -v, --value V\n"
		"                            set a field; V: N, 0xN, +N, -N, ^MASK (xor); byte fields\n"
		"                            (uuids, names): HEX, ^HEX (xor) or str:TEXT\n"
		"  -o, --offset OFF -B, --bytes HEX\n"
		"                            raw bytes at an offset in the block, item data or superblock\n"
		"  -d, --delete              delete the item (the parent keys follow a new first item)\n"
		"  -I, --insert -B HEX       insert a new item with data HEX into the leaf where its key\n"
		"                            goes (in place: it must fit; the parent keys follow)\n"
		"  -A, --append -B HEX       append HEX to the item's data (in place: it must fit)\n"
		"  -P, --split-csum N        split an EXTENT_CSUM item after N checksums into two\n"
		"                            contiguous items (a valid layout the kernel leaves at times)\n"
		"  -g, --get                 print the field's value and change nothing\n"
		"Where:\n"
		"  -c, --copy N|all          tree-block copy (1-based, as btk-inspect map); default all\n"
		"  -s, --super-copy N|all    superblock copy 0, 1 or 2; default all that exist\n"
		"  -D, --device N            device number in the DEVICE list (0-based); default all\n"
		"                            with --super, 0 with --raw\n"
		"  -n, --no-csum             leave the checksum stale\n"
		"  -l, --list-fields         list the field names and exit\n"
		"      --batch FILE          apply the edits in FILE, one per line, each written as\n"
		"                            the options of one run without DEVICE (e.g. \"-t extent\n"
		"                            -k 13631488,EXTENT_ITEM,4096 -f refs -v +1\"); blank lines\n"
		"                            and lines starting with # are skipped; FILE - is stdin.\n"
		"                            The filesystem is opened once; stops at the first\n"
		"                            failing line (its exit status)\n"
		"  -h, --help\n");
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	bool neg = s[0] == '-';

	errno = 0;
	*out = strtoull(s + neg, &end, 0);
	if (errno || end == s + neg || *end)
		return -EINVAL;
	if (neg)
		*out = (uint64_t)0 - *out;
	return 0;
}

static int parse_key_type(const char *s, uint8_t *out)
{
	uint64_t v;

	if (!parse_u64(s, &v) && v <= 255) {
		*out = (uint8_t)v;
		return 0;
	}
	return key_type_from_name(s, out);
}

static int parse_key(const char *s, struct btrfs_key *key)
{
	char buf[128], *a, *b;

	if (strlen(s) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, s);
	a = strchr(buf, ',');
	b = a ? strchr(a + 1, ',') : NULL;
	if (!a || !b)
		return -EINVAL;
	*a++ = 0;
	*b++ = 0;
	return parse_u64(buf, &key->objectid) || parse_key_type(a, &key->type) || parse_u64(b, &key->offset)
		       ? -EINVAL : 0;
}

static int parse_copy(const char *s, int *out)
{
	uint64_t v;

	if (!strcmp(s, "all")) {
		*out = ALL;
		return 0;
	}
	if (parse_u64(s, &v) || v > 16)
		return -EINVAL;
	*out = (int)v;
	return 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)(c | 0x20);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Hex digits (spaces and dashes ignored, so uuids paste) into out[max]. */
static int parse_hex(const char *s, uint8_t *out, size_t max, size_t *len)
{
	size_t n = 0;

	while (*s) {
		int hi, lo;
		if (*s == ' ' || *s == '-') {
			s++;
			continue;
		}
		hi = hexval(s[0]);
		lo = s[1] ? hexval(s[1]) : -1;
		if (hi < 0 || lo < 0 || n == max)
			return -EINVAL;
		out[n++] = (uint8_t)(hi << 4 | lo);
		s += 2;
	}
	*len = n;
	return n ? 0 : -EINVAL;
}

static void print_bytes(const uint8_t *p, uint32_t n)
{
	for (uint32_t i = 0; i < n && i < 64; i++)
		printf("%02x", p[i]);
	if (n > 64)
		printf("...");
}

static uint64_t get_num(const uint8_t *p, uint32_t w)
{
	return w == 1 ? get_le8(p) : w == 2 ? get_le16(p) : w == 4 ? get_le32(p) : get_le64(p);
}

static void put_num(uint8_t *p, uint32_t w, uint64_t v)
{
	if (w == 1)
		put_le8(p, (uint8_t)v);
	else if (w == 2)
		put_le16(p, (uint16_t)v);
	else if (w == 4)
		put_le32(p, (uint32_t)v);
	else
		put_le64(p, v);
}

/* Apply --value to the field at p (width w) and print old -> new. */
static int set_field(const char *what, uint8_t *p, uint32_t w, const char *value, bool get)
{
	bool number = w == 1 || w == 2 || w == 4 || w == 8;
	uint8_t bytes[4096];
	size_t n = 0;

	printf("%s: ", what);
	if (number)
		printf("%" PRIu64 " (0x%" PRIx64 ")", get_num(p, w), get_num(p, w));
	else
		print_bytes(p, w);
	if (get) {
		printf("\n");
		return 0;
	}
	if (!value) {
		fprintf(stderr, "\nbtk-corrupt: --field needs --value (or --get)\n");
		return -EINVAL;
	}
	if (number) {
		uint64_t old = get_num(p, w), v;
		int ret = parse_u64(value + (value[0] == '+' || value[0] == '^' || value[0] == '-'), &v);
		if (ret)
			goto bad;
		v = value[0] == '+' ? old + v : value[0] == '-' ? old - v : value[0] == '^' ? old ^ v : v;
		put_num(p, w, v);
		printf(" -> %" PRIu64 " (0x%" PRIx64 ")\n", get_num(p, w), get_num(p, w));
		return 0;
	}
	if (!strncmp(value, "str:", 4)) {
		n = strlen(value + 4);
		if (n > w)
			goto bad;
		memcpy(p, value + 4, n);
	} else if (value[0] == '^') {
		if (parse_hex(value + 1, bytes, w, &n))
			goto bad;
		for (size_t i = 0; i < n; i++)
			p[i] ^= bytes[i];
	} else {
		if (parse_hex(value, bytes, w, &n))
			goto bad;
		memcpy(p, bytes, n);
	}
	printf(" -> ");
	print_bytes(p, w);
	printf("\n");
	return 0;
bad:
	fprintf(stderr, "\nbtk-corrupt: bad value '%s' for a %u-byte field\n", value, w);
	return -EINVAL;
}

/* --offset/--bytes inside a buffer of len bytes. */
static int set_bytes(struct corrupt *c, uint8_t *buf, uint32_t len)
{
	uint8_t bytes[4096];
	uint64_t off;
	size_t n;

	if (parse_u64(c->offset ? c->offset : "0", &off) || parse_hex(c->bytes, bytes, sizeof(bytes), &n) ||
	    off > len || n > len - off) {
		fprintf(stderr, "btk-corrupt: bad --offset/--bytes for a %u-byte target\n", len);
		return -EINVAL;
	}
	printf("bytes at %" PRIu64 ": ", off);
	print_bytes(buf + off, (uint32_t)n);
	memcpy(buf + off, bytes, n);
	printf(" -> ");
	print_bytes(buf + off, (uint32_t)n);
	printf("\n");
	return 0;
}

static struct io_dev *write_io(struct corrupt *c, unsigned dev)
{
	const char *path = c->fs ? c->fs->devices[dev].path : c->paths[dev];
	int ret;

	if (!c->wio[dev] && path && (ret = io_open_file(path, IO_OPEN_WRITE, &c->wio[dev])) != 0)
		fprintf(stderr, "btk-corrupt: %s: %s\n", path, strerror(-ret));
	return c->wio[dev];
}

/* Superblock copies: read, change, re-checksum, write back. */
static int corrupt_super(struct corrupt *c)
{
	int done = 0;

	for (unsigned d = 0; d < c->npaths; d++) {
		struct io_dev *io;
		if (c->device != ALL && (unsigned)c->device != d)
			continue;
		if (!(io = write_io(c, d)))
			return 1;
		for (int m = 0; m < BTRFS_SUPER_MIRROR_MAX; m++) {
			uint8_t sb[BTRFS_SUPER_INFO_SIZE];
			uint64_t at = btrfs_super_offset(m);
			struct field_loc loc;
			const char *why = NULL;
			char what[80];
			int ret;

			if ((c->super_copy != ALL && c->super_copy != m) || at + sizeof(sb) > io_size(io))
				continue;
			if ((ret = io_read(io, sb, sizeof(sb), at)) != 0) {
				fprintf(stderr, "btk-corrupt: %s: reading copy %d: %s\n", io->path, m, strerror(-ret));
				return 1;
			}
			snprintf(what, sizeof(what), "%s copy %d %s", io->path, m, c->field ? c->field : "");
			if (c->field) {
				if (super_field(c->field, &loc, &why)) {
					fprintf(stderr, "btk-corrupt: %s: %s\n", c->field, why);
					return 2;
				}
				if (set_field(what, sb + loc.off, loc.width, c->value, c->get))
					return 2;
			} else if (set_bytes(c, sb, sizeof(sb))) {
				return 2;
			}
			if (c->get)
				continue;
			if (!c->no_csum)
				super_update_csum(sb);
			if ((ret = io_write(io, sb, sizeof(sb), at)) != 0) {
				fprintf(stderr, "btk-corrupt: %s: writing copy %d: %s\n", io->path, m, strerror(-ret));
				return 1;
			}
			done++;
		}
	}
	if (!done && !c->get) {
		fprintf(stderr, "btk-corrupt: no superblock copy matched\n");
		return 1;
	}
	return 0;
}

static int corrupt_raw(struct corrupt *c)
{
	uint8_t bytes[4096];
	uint64_t off;
	size_t n;
	struct io_dev *io;
	int ret;

	if (parse_u64(c->raw, &off) || !c->bytes || parse_hex(c->bytes, bytes, sizeof(bytes), &n)) {
		fprintf(stderr, "btk-corrupt: --raw needs an offset and --bytes HEX\n");
		return 2;
	}
	if (!(io = write_io(c, c->device == ALL ? 0 : (unsigned)c->device)))
		return 1;
	if ((ret = io_write(io, bytes, n, off)) != 0) {
		fprintf(stderr, "btk-corrupt: %s: %s\n", io->path, strerror(-ret));
		return 1;
	}
	printf("%s: %zu bytes written at %" PRIu64 "\n", io->path, n, off);
	return 0;
}

/* Drop a block just rewritten from the cache, so a later edit (--batch) reads
 * what is now on disk instead of the stale cached image. */
static void forget_cached(struct fs_info *fs, uint64_t bytenr)
{
	struct tree_block *b;

	if (block_is_cached(fs, bytenr) && block_read(fs, bytenr, &BLOCK_EXPECT_ANY, &b) == 0)
		block_forget(fs, b);
}

/* Write a block image to the chosen copies, with a fresh checksum unless --no-csum. */
static int write_block(struct corrupt *c, uint64_t bytenr, uint8_t *buf)
{
	struct fs_info *fs = c->fs;
	struct phys_copy copies[MAX_COPIES];
	uint64_t contig;
	int n = volumes_map(fs, bytenr, fs->nodesize, copies, &contig), written = 0;

	if (n < 0) {
		fprintf(stderr, "btk-corrupt: block %" PRIu64 " is not mapped\n", bytenr);
		return 1;
	}
	if (!c->no_csum) {
		uint8_t csum[BTRFS_CSUM_SIZE];
		csum_compute(fs->csum_type, buf + BTRFS_CSUM_SIZE, fs->nodesize - BTRFS_CSUM_SIZE, csum);
		memcpy(header_csum_ptr(buf), csum, BTRFS_CSUM_SIZE);
	}
	for (int i = 0; i < n; i++) {
		struct io_dev *io;
		int ret;
		if ((c->copy != ALL && c->copy != i + 1) || !copies[i].dev)
			continue;
		if (!(io = write_io(c, (unsigned)(copies[i].dev - fs->devices))))
			return 1;
		if ((ret = io_write(io, buf, fs->nodesize, copies[i].physical)) != 0) {
			fprintf(stderr, "btk-corrupt: %s: %s\n", io->path, strerror(-ret));
			return 1;
		}
		printf("block %" PRIu64 " copy %d written (devid %" PRIu64 " physical %" PRIu64 ")\n", bytenr, i + 1,
		       copies[i].devid, copies[i].physical);
		written++;
	}
	forget_cached(fs, bytenr);
	if (!written) {
		fprintf(stderr, "btk-corrupt: block %" PRIu64 " has no copy %d\n", bytenr, c->copy);
		return 1;
	}
	return 0;
}

/* Remove item `slot` from a leaf image: its data, its header, the count. */
static void leaf_delete_item(uint8_t *leaf, unsigned slot)
{
	const uint32_t hdr = sizeof(struct btrfs_header), isz = sizeof(struct btrfs_item);
	unsigned n = header_nritems(leaf);
	uint8_t *it = leaf + hdr + slot * isz;
	uint32_t off = item_offset(it), size = item_size(it);
	uint32_t low = item_offset(leaf + hdr + (n - 1) * isz); /* the lowest data offset */

	memmove(leaf + hdr + low + size, leaf + hdr + low, off - low);
	for (unsigned j = slot + 1; j < n; j++) {
		uint8_t *o = leaf + hdr + j * isz;
		item_set_offset(o, item_offset(o) + size);
	}
	memmove(it, it + isz, (n - slot - 1) * isz);
	memset(leaf + hdr + (n - 1) * isz, 0, isz);
	header_set_nritems(leaf, n - 1);
}

/* Split item `slot` of a leaf after `at` bytes of its data into two items, the
 * second keyed `second_offset`; data offsets stay decreasing with the slot. */
static int leaf_split_item(uint8_t *leaf, unsigned slot, uint32_t at, uint64_t second_offset)
{
	const uint32_t hdr = sizeof(struct btrfs_header), isz = sizeof(struct btrfs_item);
	unsigned n = header_nritems(leaf);
	uint8_t *it = leaf + hdr + slot * isz, *next = it + isz, *tmp;
	uint32_t off = item_offset(it), size = item_size(it);
	uint32_t low = item_offset(leaf + hdr + (n - 1) * isz);

	if (!at || at >= size || low < (n + 1) * isz || !(tmp = malloc(size)))
		return -1;
	/* the second half's bytes move down to `off`, the first half's up above them */
	memcpy(tmp, leaf + hdr + off + at, size - at);
	memcpy(tmp + size - at, leaf + hdr + off, at);
	memcpy(leaf + hdr + off, tmp, size);
	free(tmp);
	memmove(next + isz, next, (n - slot - 1) * isz);
	memcpy(next, it, isz);
	item_set_offset(it, off + size - at);
	item_set_size(it, at);
	item_set_offset(next, off);
	item_set_size(next, size - at);
	put_le64(next + 9, second_offset); /* disk key: objectid 8, type 1, offset 8 */
	header_set_nritems(leaf, n + 1);
	return 0;
}

/* After the first item of a leaf changed, the key pointers above it must follow. */
static int fix_parent_keys(struct corrupt *c, struct tree_path *path, const uint8_t *first_key)
{
	uint8_t *buf = malloc(c->fs->nodesize);
	int ret = 0;

	if (!buf)
		return 1;
	for (int level = 1; level < BTRFS_MAX_LEVEL && path->nodes[level]; level++) {
		struct tree_block *p = path->nodes[level];
		unsigned slot = (unsigned)path->slots[level];
		memcpy(buf, p->data, c->fs->nodesize);
		memcpy(buf + sizeof(struct btrfs_header) + slot * sizeof(struct btrfs_key_ptr), first_key,
		       sizeof(struct btrfs_disk_key));
		printf("parent %" PRIu64 " slot %u key updated\n", p->bytenr, slot);
		if ((ret = write_block(c, p->bytenr, buf)) != 0 || slot != 0)
			break;
	}
	free(buf);
	return ret;
}

static int find_tree(struct corrupt *c, struct tree_root_ptr *root)
{
	uint64_t id;
	int ret;

	if (tree_id_parse(c->tree, &id)) {
		fprintf(stderr, "btk-corrupt: bad tree '%s'\n", c->tree);
		return 2;
	}
	if ((ret = fs_find_root(c->fs, id, root)) != 0 || !root->bytenr) {
		fprintf(stderr, "btk-corrupt: tree %s not found: %s\n", c->tree, ret ? btk_error_msg() : "no root");
		return 1;
	}
	return 0;
}

/* --insert: a new item in the leaf its key belongs to, written in place. */
static int insert_item(struct corrupt *c, struct tree_root_ptr *root)
{
	struct fs_info *fs = c->fs;
	struct tree_path path;
	uint8_t data[4096], *leaf = NULL;
	size_t n = 0;
	unsigned slot;
	uint32_t size;
	int ret;

	/* ("-": an empty item, as orphan items are) */
	if (!c->bytes || (strcmp(c->bytes, "-") && parse_hex(c->bytes, data, sizeof(data), &n))) {
		fprintf(stderr, "btk-corrupt: --insert needs --bytes HEX (at most %zu bytes; - for none)\n",
			sizeof(data));
		return 2;
	}
	size = (uint32_t)n;
	tree_path_init(&path);
	ret = tree_search(fs, root, &c->key, &path);
	if (ret == 0) {
		struct btrfs_key found;
		tree_item_key(&path, &found);
		if (!key_compare(&found, &c->key))
			ret = -EEXIST;
	} else if (ret == 1) {
		/* beyond the last item: after it */
		tree_path_release(fs, &path);
		ret = tree_search_le(fs, root, &c->key, &path);
		path.slots[0]++;
	}
	if (ret) {
		fprintf(stderr, "btk-corrupt: tree %s: %s\n", c->tree, ret == -EEXIST ? "the key exists" : btk_error_msg());
		ret = 1;
		goto out;
	}
	slot = (unsigned)path.slots[0];
	if (!(leaf = malloc(fs->nodesize))) {
		ret = 1;
		goto out;
	}
	memcpy(leaf, path.nodes[0]->data, fs->nodesize);
	if ((ret = leaf_insert_items(leaf, fs->nodesize, slot, &c->key, &size, 1)) != 0) {
		fprintf(stderr, "btk-corrupt: cannot insert into leaf %" PRIu64 ": %s\n", path.nodes[0]->bytenr,
			strerror(-ret));
		ret = 1;
		goto out;
	}
	memcpy(leaf_item_data(leaf, slot), data, size);
	printf("tree %s item (%" PRIu64 " %u %" PRIu64 ") inserted in block %" PRIu64 " slot %u (%u bytes)\n",
	       c->tree, c->key.objectid, c->key.type, c->key.offset, path.nodes[0]->bytenr, slot, size);
	ret = write_block(c, path.nodes[0]->bytenr, leaf);
	if (!ret && slot == 0)
		ret = fix_parent_keys(c, &path, item_key_ptr(leaf + sizeof(struct btrfs_header)));
out:
	free(leaf);
	tree_path_release(fs, &path);
	return ret;
}

static int corrupt_item(struct corrupt *c)
{
	struct fs_info *fs = c->fs;
	struct tree_root_ptr root;
	struct tree_path path;
	struct btrfs_key found;
	struct field_loc loc;
	const char *why = NULL;
	uint8_t *leaf = NULL, *item;
	unsigned slot;
	char what[160];
	int ret;

	if ((ret = find_tree(c, &root)) != 0)
		return ret;
	if (c->insert)
		return insert_item(c, &root);
	tree_path_init(&path);
	ret = tree_search(fs, &root, &c->key, &path);
	if (ret == 0)
		tree_item_key(&path, &found);
	if (ret != 0 || found.objectid != c->key.objectid || found.type != c->key.type ||
	    found.offset != c->key.offset) {
		fprintf(stderr, "btk-corrupt: tree %s has no item (%" PRIu64 " %u %" PRIu64 ")%s%s\n", c->tree,
			c->key.objectid, c->key.type, c->key.offset, ret < 0 ? ": " : "", ret < 0 ? btk_error_msg() : "");
		ret = 1;
		goto out;
	}
	slot = (unsigned)path.slots[0];
	leaf = malloc(fs->nodesize);
	if (!leaf) {
		ret = 1;
		goto out;
	}
	memcpy(leaf, path.nodes[0]->data, fs->nodesize);
	item = leaf + sizeof(struct btrfs_header) + item_offset(leaf + sizeof(struct btrfs_header) +
							       slot * sizeof(struct btrfs_item));
	snprintf(what, sizeof(what), "tree %s item (%" PRIu64 " %u %" PRIu64 ") in block %" PRIu64 " slot %u %s",
		 c->tree, found.objectid, found.type, found.offset, path.nodes[0]->bytenr, slot,
		 c->field ? c->field : "");
	if (c->delete) {
		if (header_nritems(leaf) < 2 && path.nodes[1]) {
			fprintf(stderr, "btk-corrupt: deleting the only item would leave an empty leaf\n");
			ret = 1;
			goto out;
		}
		printf("%s deleted\n", what);
		leaf_delete_item(leaf, slot);
	} else if (c->append) {
		uint8_t data[4096];
		size_t n;
		uint32_t size = item_size(leaf + sizeof(struct btrfs_header) + slot * sizeof(struct btrfs_item));
		if (parse_hex(c->bytes, data, sizeof(data), &n) ||
		    leaf_resize_item(leaf, fs->nodesize, slot, size + (uint32_t)n)) {
			fprintf(stderr, "btk-corrupt: cannot append to %s\n", what);
			ret = 2;
			goto out;
		}
		memcpy(leaf_item_data(leaf, slot) + size, data, n);
		printf("%s: %zu bytes appended\n", what, n);
	} else if (c->split) {
		uint64_t n;
		uint32_t size = item_size(leaf + sizeof(struct btrfs_header) + slot * sizeof(struct btrfs_item));
		if (found.type != BTRFS_EXTENT_CSUM_KEY || parse_u64(c->split, &n) ||
		    n * fs->csum_size >= size || !n ||
		    leaf_split_item(leaf, slot, (uint32_t)n * fs->csum_size, found.offset + n * fs->sectorsize)) {
			fprintf(stderr, "btk-corrupt: cannot split %s after %s checksums\n", what, c->split);
			ret = 2;
			goto out;
		}
		printf("%s split after %" PRIu64 " checksums\n", what, n);
	} else if (c->field && (!strncmp(c->field, "key.", 4) || !strncmp(c->field, "item.", 5))) {
		char name[64];
		snprintf(name, sizeof(name), "item%u.%s", slot, c->field + (c->field[0] == 'k' ? 0 : 5));
		if (block_field(leaf, fs->nodesize, name, &loc, &why) ||
		    set_field(what, leaf + loc.off, loc.width, c->value, c->get)) {
			fprintf(stderr, "btk-corrupt: %s: %s\n", c->field, why ? why : "bad value");
			ret = 2;
			goto out;
		}
	} else if (c->field) {
		uint32_t size = item_size(leaf + sizeof(struct btrfs_header) + slot * sizeof(struct btrfs_item));
		if (item_field(found.type, item, size, fs->csum_size, c->field, &loc, &why) ||
		    set_field(what, item + loc.off, loc.width, c->value, c->get)) {
			fprintf(stderr, "btk-corrupt: %s: %s\n", c->field, why ? why : "bad value");
			ret = 2;
			goto out;
		}
	} else {
		uint32_t size = item_size(leaf + sizeof(struct btrfs_header) + slot * sizeof(struct btrfs_item));
		printf("%s\n", what);
		if (set_bytes(c, item, size)) {
			ret = 2;
			goto out;
		}
	}
	ret = 0;
	if (c->get)
		goto out;
	ret = write_block(c, path.nodes[0]->bytenr, leaf);
	if (!ret && c->delete && slot == 0 && header_nritems(leaf) > 0)
		ret = fix_parent_keys(c, &path, item_key_ptr(leaf + sizeof(struct btrfs_header)));
out:
	free(leaf);
	tree_path_release(fs, &path);
	return ret;
}

static int corrupt_block(struct corrupt *c)
{
	struct fs_info *fs = c->fs;
	struct tree_block *b;
	struct field_loc loc;
	const char *why = NULL;
	uint8_t *buf;
	char what[96];
	int ret;

	if ((ret = block_read(fs, c->bytenr, &BLOCK_EXPECT_ANY, &b)) != 0) {
		fprintf(stderr, "btk-corrupt: block %" PRIu64 ": %s\n", c->bytenr, btk_error_msg());
		return 1;
	}
	buf = malloc(fs->nodesize);
	if (!buf) {
		block_put(fs, b);
		return 1;
	}
	memcpy(buf, b->data, fs->nodesize);
	block_put(fs, b);
	snprintf(what, sizeof(what), "block %" PRIu64 " %s", c->bytenr, c->field ? c->field : "");
	if (c->field) {
		if (block_field(buf, fs->nodesize, c->field, &loc, &why)) {
			fprintf(stderr, "btk-corrupt: %s: %s\n", c->field, why);
			ret = 2;
		} else {
			ret = set_field(what, buf + loc.off, loc.width, c->value, c->get) ? 2 : 0;
		}
	} else {
		ret = set_bytes(c, buf, fs->nodesize) ? 2 : 0;
	}
	if (!ret && !c->get)
		ret = write_block(c, c->bytenr, buf);
	free(buf);
	return ret;
}

static int parse_args(struct corrupt *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "super", no_argument, NULL, 'S' }, { "block", required_argument, NULL, 'b' },
		{ "tree", required_argument, NULL, 't' }, { "key", required_argument, NULL, 'k' },
		{ "raw", required_argument, NULL, 'r' }, { "field", required_argument, NULL, 'f' },
		{ "value", required_argument, NULL, 'v' }, { "offset", required_argument, NULL, 'o' },
		{ "bytes", required_argument, NULL, 'B' }, { "delete", no_argument, NULL, 'd' },
		{ "split-csum", required_argument, NULL, 'P' }, { "insert", no_argument, NULL, 'I' },
		{ "append", no_argument, NULL, 'A' },
		{ "get", no_argument, NULL, 'g' }, { "copy", required_argument, NULL, 'c' },
		{ "super-copy", required_argument, NULL, 's' }, { "device", required_argument, NULL, 'D' },
		{ "no-csum", no_argument, NULL, 'n' }, { "list-fields", no_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' }, { "batch", required_argument, NULL, 'F' }, { 0 }
	};
	int o, targets;
	uint64_t v;

	c->copy = c->super_copy = c->device = ALL;
	while ((o = getopt_long(argc, argv, "Sb:t:k:r:f:v:o:B:dP:IAgc:s:D:nlh", opts, NULL)) != -1) {
		switch (o) {
		case 'S': c->super = true; break;
		case 'b':
			if (parse_u64(optarg, &c->bytenr))
				return -1;
			c->have_block = true;
			break;
		case 't': c->tree = optarg; break;
		case 'k':
			if (parse_key(optarg, &c->key))
				return -1;
			c->have_key = true;
			break;
		case 'r': c->raw = optarg; break;
		case 'f': c->field = optarg; break;
		case 'v': c->value = optarg; break;
		case 'o': c->offset = optarg; break;
		case 'B': c->bytes = optarg; break;
		case 'd': c->delete = true; break;
		case 'I': c->insert = true; break;
		case 'A': c->append = true; break;
		case 'P': c->split = optarg; break;
		case 'g': c->get = true; break;
		case 'c': if (parse_copy(optarg, &c->copy)) return -1; break;
		case 's': if (parse_copy(optarg, &c->super_copy) || c->super_copy > 2) return -1; break;
		case 'D':
			if (parse_u64(optarg, &v) || v > 64)
				return -1;
			c->device = (int)v;
			break;
		case 'n': c->no_csum = true; break;
		case 'l': list_fields(); exit(0);
		case 'h': usage(stdout); exit(0);
		case 'F': c->batch = optarg; break;
		default: return -1;
		}
	}
	c->paths = argv + optind;
	c->npaths = (unsigned)(argc - optind);
	targets = c->super + c->have_block + (c->tree || c->have_key) + !!c->raw;
	if (c->batch)
		return targets || c->field || c->bytes || c->delete || c->split || c->get || !c->npaths ? -1 : 0;
	if (targets != 1 || !c->npaths || (c->tree && !c->have_key) || (c->have_key && !c->tree))
		return -1;
	if (c->device != ALL && (unsigned)c->device >= c->npaths)
		return -1;
	/* exactly one kind of change */
	if (!c->raw && (!!c->field + (!!c->bytes && !c->insert && !c->append) + c->delete + !!c->split +
			c->insert + c->append) != 1)
		return -1;
	if ((c->delete || c->split || c->insert || c->append) && !c->tree)
		return -1;
	if ((c->insert || c->append) && !c->bytes)
		return -1;
	return 0;
}

static int corrupt_one(struct corrupt *c)
{
	return c->super ? corrupt_super(c) : c->raw ? corrupt_raw(c) : c->have_block ? corrupt_block(c)
											  : corrupt_item(c);
}

#define BATCH_MAX_ARGS 64

/* One --batch line: parse it as the options of a run (with the outer DEVICEs)
 * into a fresh edit that shares the open filesystem and write handles. */
static int batch_line(struct corrupt *outer, char *line, unsigned lineno)
{
	char *argv[BATCH_MAX_ARGS + 2];
	struct corrupt c = { 0 };
	int argc = 0;

	argv[argc++] = (char *)"btk-corrupt";
	for (char *t = strtok(line, " \t\r\n"); t; t = strtok(NULL, " \t\r\n")) {
		if (argc == BATCH_MAX_ARGS) {
			fprintf(stderr, "btk-corrupt: --batch line %u: too many words\n", lineno);
			return 2;
		}
		argv[argc++] = t;
	}
	if (argc == 1 || argv[1][0] == '#')
		return 0;
	if (argc + outer->npaths > BATCH_MAX_ARGS + 1) {
		fprintf(stderr, "btk-corrupt: --batch: too many devices\n");
		return 2;
	}
	for (unsigned i = 0; i < outer->npaths; i++)
		argv[argc++] = outer->paths[i];
	argv[argc] = NULL;
	optind = 0; /* restart getopt (glibc: a full reinitialisation) */
	if (parse_args(&c, argc, argv) || c.batch) {
		fprintf(stderr, "btk-corrupt: --batch line %u: bad edit\n", lineno);
		return 2;
	}
	c.fs = outer->fs;
	c.wio = outer->wio;
	return corrupt_one(&c);
}

static int run_batch(struct corrupt *c)
{
	FILE *f = strcmp(c->batch, "-") ? fopen(c->batch, "r") : stdin;
	char *line = NULL;
	size_t cap = 0;
	unsigned lineno = 0, done = 0;
	int ret = 0;

	if (!f) {
		fprintf(stderr, "btk-corrupt: %s: %s\n", c->batch, strerror(errno));
		return 1;
	}
	while (!ret && getline(&line, &cap, f) >= 0) {
		ret = batch_line(c, line, ++lineno);
		done += !ret;
	}
	if (!ret && ferror(f)) {
		fprintf(stderr, "btk-corrupt: %s: read error\n", c->batch);
		ret = 1;
	}
	printf("batch: %u of %u lines done\n", done, lineno);
	free(line);
	if (f != stdin)
		fclose(f);
	return ret;
}

int main(int argc, char **argv)
{
	struct corrupt c = { 0 };
	struct fs_open_options fo;
	int ret;

	if (parse_args(&c, argc, argv)) {
		usage(stderr);
		return 2;
	}
	c.wio = calloc(c.npaths, sizeof(*c.wio));
	if (!c.wio)
		return 1;
	if (c.super || c.raw) {
		ret = corrupt_one(&c);
	} else {
		fs_open_options_init(&fo);
		env_knobs_fill(&fo);
		if ((ret = fs_open((const char *const *)c.paths, c.npaths, &fo, &c.fs)) != 0) {
			fprintf(stderr, "btk-corrupt: %s\n", btk_error_msg());
			free(c.wio);
			return 1;
		}
		ret = c.batch ? run_batch(&c) : corrupt_one(&c);
	}
	for (unsigned i = 0; i < c.npaths; i++)
		if (c.wio[i]) {
			if (io_flush(c.wio[i]) && !ret)
				ret = 1;
			io_close(c.wio[i]);
		}
	free(c.wio);
	if (c.fs)
		fs_close(c.fs);
	return ret;
}
