// SPDX-License-Identifier: GPL-2.0-only
/* The file-extent-fields class: file extent fields the kernel's tree checker
 * refuses the leaf for (or btrfs check calls invalid), set from what the
 * rest of the item, the data and the checksums say. Encryption and
 * other_encoding go to 0 (no kernel writes another value). An unknown
 * compression becomes the decompressor that gives the extent's ram_bytes
 * back; none does: uncompressed when the data is as long as ram_bytes (the
 * kernel keeps a compressed extent only when it is smaller), else the range
 * becomes a hole (an inline extent is dropped: a hole too). An unknown type
 * becomes inline for an item of another size than a regular extent's, else
 * regular when checksums cover its data (or it is compressed, or a hole),
 * preallocated when not. A generation from the future becomes its data
 * extent's (else the inode's transid; at most the filesystem's). A ram_bytes
 * off the sector grid or shorter than its range becomes what the kernel
 * writes: an uncompressed extent's disk length, a hole's length, a compressed
 * extent's decompressed length (to the sector). Extent references, nbytes and
 * checksums follow from the check run again after it (check/repair.c). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "check/compressed_extent.h"
#include "check/inline_extent.h"
#include "check/repair.h"
#include "check/repair_notes.h"
#include <btk/csum_tree.h>
#include <btk/format.h>
#include <btk/tree.h>

#define NR_COMPRESS (BTRFS_COMPRESS_ZSTD + 1)
#define NR_TYPES (BTRFS_FILE_EXTENT_PREALLOC + 1)
/* the kernel's largest compressed extent is 128 KiB either way: past a MiB is damage */
#define COMPRESSED_MAX (1u << 20)

/* What becomes of one file extent item. */
struct fe_plan {
	struct btrfs_key key;
	bool drop;          /* delete the item (an inline extent nothing decodes) */
	bool hole;          /* a regular extent nothing decodes: its range a hole */
	uint8_t type, compression;
	uint64_t generation, ram_bytes;
};

/* The inode's transid and flags (0 when it has no item). */
struct fe_inode {
	uint64_t transid, flags;
};

/* The compression (BTRFS_COMPRESS_*) whose decompressor gives ram bytes
 * back from src (within the last sector: a stream may end at the file's end),
 * or -1. inline: the item's data layout, else a disk extent's. */
static int compression_that_decodes(const uint8_t *src, size_t len, uint64_t ram, uint32_t ss, bool inl)
{
	static const unsigned tries[] = { BTRFS_COMPRESS_ZLIB, BTRFS_COMPRESS_LZO, BTRFS_COMPRESS_ZSTD };
	uint8_t *out;
	int found = -1;

	if (!ram || ram > COMPRESSED_MAX || !(out = malloc(ram + 1)))
		return -1;
	for (size_t i = 0; i < sizeof(tries) / sizeof(tries[0]) && found < 0; i++) {
		long got = inl ? inline_extent_decompress(tries[i], src, len, out, ram + 1)
			       : compressed_extent_decompress(tries[i], src, len, ss, out, ram);
		if (got > 0 && (uint64_t)got <= ram && (inl ? (uint64_t)got == ram : (uint64_t)got + ss > ram))
			found = (int)tries[i];
	}
	free(out);
	return found;
}

/* An inline extent's compression; -1: nothing decodes it. */
static int inline_compression(const uint8_t *d, uint32_t size, uint32_t ss)
{
	const uint8_t *data = d + BTRFS_FILE_EXTENT_INLINE_DATA_START;
	uint32_t len = size - BTRFS_FILE_EXTENT_INLINE_DATA_START;
	int c = compression_that_decodes(data, len, file_extent_ram_bytes(d), ss, true);

	if (c >= 0)
		return c;
	return len == file_extent_ram_bytes(d) ? BTRFS_COMPRESS_NONE : -1;
}

/* A regular extent's compression; -1: nothing decodes it and it is shorter
 * than its ram_bytes (so it was compressed). */
static int regular_compression(struct repair_ctx *r, const uint8_t *d)
{
	uint64_t dlen = file_extent_disk_num_bytes(d), ram = file_extent_ram_bytes(d);
	uint8_t *src;
	int c = -1;

	if (dlen && dlen <= COMPRESSED_MAX && (src = malloc(dlen))) {
		if (!extent_data_read(r->fs, file_extent_disk_bytenr(d), src, dlen))
			c = compression_that_decodes(src, dlen, ram, r->fs->sectorsize, false);
		free(src);
	}
	if (c >= 0)
		return c;
	return dlen >= ram ? BTRFS_COMPRESS_NONE : -1;
}

/* A compressed extent's ram_bytes from its data: the length it decompresses
 * to, up to the sector (0 when nothing decodes it). */
static uint64_t decoded_ram_bytes(struct repair_ctx *r, const uint8_t *d, uint8_t compression)
{
	uint64_t dlen = file_extent_disk_num_bytes(d), got = 0;
	uint32_t ss = r->fs->sectorsize;
	uint8_t *src, *out = NULL;
	long n;

	if (!dlen || dlen > COMPRESSED_MAX || !(src = malloc(dlen)))
		return 0;
	if (!extent_data_read(r->fs, file_extent_disk_bytenr(d), src, dlen) && (out = malloc(COMPRESSED_MAX)) &&
	    (n = compressed_extent_decompress(compression, src, dlen, ss, out, COMPRESSED_MAX)) > 0)
		got = ((uint64_t)n + ss - 1) / ss * ss;
	free(out);
	free(src);
	return got;
}

/* ram_bytes the kernel would have written: an uncompressed extent's disk
 * length, a hole's length, a compressed extent's decoded length; the item's
 * own when it holds its range and is sector aligned. */
static uint64_t planned_ram_bytes(struct repair_ctx *r, const uint8_t *d, const struct fe_plan *p)
{
	uint64_t ram = file_extent_ram_bytes(d), ss = r->fs->sectorsize, want;
	uint64_t need = file_extent_offset(d) + file_extent_num_bytes(d);

	if (p->hole || p->type == BTRFS_FILE_EXTENT_INLINE || (!(ram % ss) && ram >= need))
		return ram;
	if (!file_extent_disk_bytenr(d))
		want = file_extent_num_bytes(d);
	else if (p->compression == BTRFS_COMPRESS_NONE)
		want = file_extent_disk_num_bytes(d);
	else
		want = decoded_ram_bytes(r, d, p->compression);
	return want && !(want % ss) && want >= need ? want : ram;
}

/* Whether the csum tree holds a checksum in [start, start+len). */
static int checksummed(struct repair_ctx *r, uint64_t start, uint64_t len)
{
	struct csum_tree_cursor c;
	const uint8_t *cs;
	uint64_t lo, hi;
	int ret = csum_tree_open(&c, r->fs, start, start + len);

	if (ret)
		return ret;
	ret = csum_tree_next(&c, &lo, &hi, &cs);
	csum_tree_close(&c);
	return ret < 0 ? ret : ret == 1;
}

/* The type of an item whose type is unknown. */
static int guess_type(struct repair_ctx *r, const struct btrfs_key *k, const uint8_t *d, uint32_t size,
		      const struct fe_inode *ino, uint8_t *type)
{
	uint32_t ss = r->fs->sectorsize;
	int ret;

	*type = BTRFS_FILE_EXTENT_REG;
	if (size != sizeof(struct btrfs_file_extent_item)) {
		*type = BTRFS_FILE_EXTENT_INLINE;
		return 0;
	}
	/* a regular extent's size, but fields only an inline extent of that size could have */
	if (k->offset == 0 && (file_extent_disk_bytenr(d) % ss || file_extent_num_bytes(d) % ss ||
			       !file_extent_num_bytes(d)) && inline_compression(d, size, ss) >= 0) {
		*type = BTRFS_FILE_EXTENT_INLINE;
		return 0;
	}
	if (!file_extent_disk_bytenr(d) || file_extent_compression(d) != BTRFS_COMPRESS_NONE ||
	    (ino->flags & BTRFS_INODE_NODATASUM))
		return 0;
	/* the kernel checksums what it writes; a preallocated range has none */
	ret = checksummed(r, file_extent_disk_bytenr(d) + file_extent_offset(d), file_extent_num_bytes(d));
	if (ret < 0)
		return ret;
	if (!ret)
		*type = BTRFS_FILE_EXTENT_PREALLOC;
	return 0;
}

/* The generation of a file extent from the future: its data extent's (the
 * transaction that wrote it), else the inode's transid, at most the
 * filesystem's generation. */
static uint64_t past_generation(struct repair_ctx *r, const uint8_t *d, uint32_t size, const struct fe_inode *ino)
{
	uint64_t gen = ino->transid;
	struct btrfs_extent_item ei;
	uint32_t eisize = sizeof(ei);
	struct tree_root_ptr rp;

	if (size >= sizeof(struct btrfs_file_extent_item) && file_extent_type(d) != BTRFS_FILE_EXTENT_INLINE &&
	    file_extent_disk_bytenr(d) && !trans_get_root(r->t, BTRFS_EXTENT_TREE_OBJECTID, &rp)) {
		struct btrfs_key k = { file_extent_disk_bytenr(d), BTRFS_EXTENT_ITEM_KEY, file_extent_disk_num_bytes(d) };
		if (!tree_lookup(r->fs, &rp, &k, &ei, &eisize) && eisize >= sizeof(ei) &&
		    extent_generation((const uint8_t *)&ei) && extent_generation((const uint8_t *)&ei) <= r->fs->generation)
			gen = extent_generation((const uint8_t *)&ei);
	}
	return gen && gen <= r->fs->generation ? gen : r->fs->generation;
}

/* What to do with the item at k (data d): 1 and *p when it changes, 0 when not. */
static int plan_item(struct repair_ctx *r, const struct btrfs_key *k, const uint8_t *d, uint32_t size,
		     const struct fe_inode *ino, struct fe_plan *p)
{
	uint64_t gen_limit = r->fs->generation + 1;
	int ret, c;

	if (size < BTRFS_FILE_EXTENT_INLINE_DATA_START)
		return 0;
	*p = (struct fe_plan){ .key = *k, .type = file_extent_type(d), .compression = file_extent_compression(d),
			       .generation = file_extent_generation(d) };
	if (p->type >= NR_TYPES && (ret = guess_type(r, k, d, size, ino, &p->type)) < 0)
		return ret;
	if (p->type != BTRFS_FILE_EXTENT_INLINE && size < sizeof(struct btrfs_file_extent_item))
		return 0;    /* malformed: not this class's */
	if (p->type == BTRFS_FILE_EXTENT_INLINE) {
		if (p->compression >= NR_COMPRESS) {
			c = inline_compression(d, size, r->fs->sectorsize);
			p->drop = c < 0;
			p->compression = c < 0 ? BTRFS_COMPRESS_NONE : (uint8_t)c;
		}
	} else if (!file_extent_disk_bytenr(d)) {
		p->compression = BTRFS_COMPRESS_NONE;
	} else if (p->compression >= NR_COMPRESS ||
		   (p->type == BTRFS_FILE_EXTENT_PREALLOC && p->compression != BTRFS_COMPRESS_NONE)) {
		c = regular_compression(r, d);
		p->hole = c < 0;
		p->compression = c < 0 ? BTRFS_COMPRESS_NONE : (uint8_t)c;
		/* a preallocated extent is never compressed: what decodes was written */
		if (p->compression != BTRFS_COMPRESS_NONE || p->hole)
			p->type = BTRFS_FILE_EXTENT_REG;
	}
	if (p->generation > gen_limit)
		p->generation = past_generation(r, d, size, ino);
	p->ram_bytes = planned_ram_bytes(r, d, p);
	return p->drop || p->hole || p->type != file_extent_type(d) || p->compression != file_extent_compression(d) ||
	       p->generation != file_extent_generation(d) || file_extent_encryption(d) ||
	       file_extent_other_encoding(d) || p->ram_bytes != file_extent_ram_bytes(d);
}

static void say_plan(struct repair_ctx *r, uint64_t root, const struct fe_plan *p, const uint8_t *d)
{
	if (r->changes++ >= REPAIR_SAY_MAX)
		return;
	if (p->drop || p->hole)
		repair_say(r, "root %" PRIu64 " inode %" PRIu64 " extent at %" PRIu64 ": compression %u decodes as "
			   "nothing: %s", root, p->key.objectid, p->key.offset, file_extent_compression(d),
			   p->drop ? "inline extent dropped" : "its range becomes a hole");
	else
		repair_say(r, "root %" PRIu64 " inode %" PRIu64 " extent at %" PRIu64 ": type %u -> %u, compression "
			   "%u -> %u, encryption %u, other_encoding %u -> 0, generation %" PRIu64 " -> %" PRIu64
			   ", ram_bytes %" PRIu64 " -> %" PRIu64, root, p->key.objectid, p->key.offset,
			   file_extent_type(d), p->type, file_extent_compression(d), p->compression,
			   file_extent_encryption(d), file_extent_other_encoding(d), file_extent_generation(d),
			   p->generation, file_extent_ram_bytes(d), p->ram_bytes);
}

static int apply_plan(struct repair_ctx *r, uint64_t root, const struct fe_plan *p)
{
	struct tree_path path;
	uint8_t *d;
	uint32_t size;
	int ret;

	tree_path_init(&path);
	ret = trans_item_for_update(r->t, root, &p->key, &d, &size, &path);
	if (!ret) {
		say_plan(r, root, p, d);
		if (!p->drop) {
			file_extent_set_type(d, p->type);
			file_extent_set_compression(d, p->compression);
			file_extent_set_encryption(d, 0);
			file_extent_set_other_encoding(d, 0);
			file_extent_set_generation(d, p->generation);
			if (p->type != BTRFS_FILE_EXTENT_INLINE)
				file_extent_set_ram_bytes(d, p->ram_bytes);
		}
		if (p->hole) {
			file_extent_set_ram_bytes(d, file_extent_num_bytes(d));
			file_extent_set_disk_bytenr(d, 0);
			file_extent_set_disk_num_bytes(d, 0);
			file_extent_set_offset(d, 0);
		}
	}
	tree_path_release(r->fs, &path);
	if (!ret && p->drop)
		ret = trans_delete_item(r->t, root, &p->key);
	return ret;
}

/* Plans for every file extent of (root, ino) that changes. */
struct fe_plans {
	struct fe_plan *v;
	size_t n, cap;
};

static int plans_push(struct fe_plans *l, const struct fe_plan *p)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 8;
		struct fe_plan *v = realloc(l->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = *p;
	return 0;
}

static int fix_inode(struct repair_ctx *r, uint64_t root, uint64_t ino)
{
	struct btrfs_key min = { ino, BTRFS_EXTENT_DATA_KEY, 0 }, max = { ino, BTRFS_EXTENT_DATA_KEY, (uint64_t)-1 }, k;
	struct btrfs_key ikey = { ino, BTRFS_INODE_ITEM_KEY, 0 };
	struct btrfs_inode_item ii;
	uint32_t isize = sizeof(ii), size;
	struct fe_inode info = { 0 };
	struct fe_plans plans = { 0 };
	struct tree_root_ptr rp;
	struct tree_iter it;
	const uint8_t *d;
	int ret = trans_get_root(r->t, root, &rp);

	if (ret)
		return ret;
	if (!tree_lookup(r->fs, &rp, &ikey, &ii, &isize) && isize >= sizeof(ii)) {
		info.transid = inode_transid((const uint8_t *)&ii);
		info.flags = inode_flags((const uint8_t *)&ii);
	}
	tree_iter_init(&it, r->fs, &rp, &min, &max);
	while ((ret = tree_iter_next(&it, &k, &d, &size)) == 1) {
		struct fe_plan p;
		int want = plan_item(r, &k, d, size, &info, &p);
		if (want < 0 || (want && (want = plans_push(&plans, &p)) < 0)) {
			ret = want;
			break;
		}
	}
	tree_iter_release(&it);
	for (size_t i = 0; ret >= 0 && i < plans.n; i++)
		ret = apply_plan(r, root, &plans.v[i]);
	free(plans.v);
	return ret < 0 ? ret : 0;
}

int repair_file_extent_fields(struct repair_ctx *r)
{
	return repair_each_noted_inode(r, NOTES_FE_FIELDS, fix_inode);
}
