// SPDX-License-Identifier: GPL-2.0-only
/* The bases of the whole-filesystem harnesses (fuzz_image.c, fuzz_check.c):
 * small real filesystems loaded once, patched by each input, restored after
 * each run; see fuzz/base.h. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/base.h"
#include <btk/csum.h>
#include <btk/super.h>
#include <btk/tree.h>
#include <btk/volumes.h>
#include <btk/walk.h>

#ifndef BTK_FUZZ_BASE_DEFAULT
#define BTK_FUZZ_BASE_DEFAULT "build/fuzz/base.img"
#endif
#ifndef BTK_FUZZ_RAID_DEFAULT
#define BTK_FUZZ_RAID_DEFAULT "build/fuzz/raid-1.img:build/fuzz/raid-2.img:build/fuzz/raid-3.img"
#endif

static struct fuzz_base bases[2];
static bool loaded;
bool fuzz_verbose;

static void die(const char *what, const char *detail)
{
	fprintf(stderr, "fuzz: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
	exit(1);
}

static void load_file(const char *path, uint8_t **out, size_t *size)
{
	FILE *f = fopen(path, "rb");
	long len = 0;

	if (!f)
		die("cannot open a base image (set BTK_FUZZ_BASE / BTK_FUZZ_RAID_BASE)", path);
	if (fseek(f, 0, SEEK_END) || (len = ftell(f)) <= 0 || fseek(f, 0, SEEK_SET))
		die("cannot size a base image", path);
	*out = malloc((size_t)len);
	if (!*out || fread(*out, 1, (size_t)len, f) != (size_t)len)
		die("cannot read a base image", path);
	*size = (size_t)len;
	fclose(f);
}

/* The devices of a base as memory backends over its buffers; n may be
 * fewer than the base has (degraded). */
static int open_devices(struct fuzz_base *b, unsigned n, const struct fs_open_options *opts,
		     struct fs_info **fs, char *msg, size_t msglen)
{
	struct io_dev *ios[FUZZ_MAX_DEVS];
	int ret;

	for (unsigned i = 0; i < n; i++) {
		if (io_open_mem(b->image[i], b->size[i], false, &ios[i])) {
			while (i--)
				io_close(ios[i]);
			snprintf(msg, msglen, "io_open_mem failed");
			return -ENOMEM;
		}
	}
	ret = fs_open_devices(ios, n, opts, fs);
	if (ret)
		snprintf(msg, msglen, "%s", btk_error_msg());
	return ret;
}

struct collect_ctx {
	struct fuzz_base *base;
	struct fs_info *fs;
};

static int collect_visit(void *arg, const struct tree_block *tb)
{
	struct collect_ctx *cc = arg;
	struct fuzz_base *b = cc->base;
	struct phys_copy copies[MAX_COPIES];
	struct fuzz_block *fb;
	uint64_t contig;
	int n;

	if (b->nblocks >= FUZZ_MAX_BLOCKS)
		return 0;
	for (size_t i = b->ndevs; i < b->nblocks; i++)
		if (b->blocks[i].logical == tb->bytenr)
			return 0; /* reached twice */
	n = volumes_map(cc->fs, tb->bytenr, cc->fs->nodesize, copies, &contig);
	if (n <= 0 || contig < cc->fs->nodesize)
		return 0;
	fb = &b->blocks[b->nblocks++];
	memset(fb, 0, sizeof(*fb));
	fb->logical = tb->bytenr;
	fb->len = cc->fs->nodesize;
	fb->ncopies = (unsigned)n;
	for (int i = 0; i < n; i++) {
		if (!copies[i].dev)
			die("a base block lies on a missing device", b->name);
		fb->dev[i] = (unsigned)(copies[i].dev - cc->fs->devices);
		fb->physical[i] = copies[i].physical;
	}
	return 0;
}

/* Read a base's devices and list their superblocks and every tree block. */
static void base_load(struct fuzz_base *b, const char *name, const char *paths)
{
	struct fs_tree_list trees;
	struct collect_ctx cc = { .base = b };
	struct tree_walk_ops ops = { .visit = collect_visit, .arg = &cc };
	char *list = strdup(paths), *save = NULL, *path;
	char msg[512] = "";
	size_t total = 0;

	b->name = name;
	for (path = strtok_r(list, ":", &save); path; path = strtok_r(NULL, ":", &save)) {
		if (b->ndevs == FUZZ_MAX_DEVS)
			die("too many devices in a base", paths);
		load_file(path, &b->image[b->ndevs], &b->size[b->ndevs]);
		b->ndevs++;
	}
	free(list);
	if (!b->ndevs)
		die("no device in a base", name);
	b->blocks = calloc(FUZZ_MAX_BLOCKS, sizeof(*b->blocks));
	if (!b->blocks)
		die("out of memory", NULL);
	for (unsigned d = 0; d < b->ndevs; d++)
		b->blocks[d] = (struct fuzz_block){ .len = BTRFS_SUPER_INFO_SIZE, .ncopies = 1,
						    .dev = { d }, .physical = { btrfs_super_offset(0) } };
	b->nblocks = b->ndevs;
	if (open_devices(b, b->ndevs, NULL, &cc.fs, msg, sizeof(msg)))
		die("a base does not open", msg);
	b->nodesize = cc.fs->nodesize;
	b->csum_type = cc.fs->csum_type;
	b->csum_size = cc.fs->csum_size;
	if (fs_list_trees(cc.fs, &trees))
		die("cannot list the trees of a base", name);
	for (size_t t = 0; t < trees.count; t++)
		tree_walk(cc.fs, &trees.roots[t], &ops, NULL);
	fs_tree_list_free(&trees);
	fs_close(cc.fs);

	b->pristine_off = calloc(b->nblocks, sizeof(*b->pristine_off));
	if (!b->pristine_off)
		die("out of memory", NULL);
	for (size_t i = 0; i < b->nblocks; i++) {
		b->pristine_off[i] = total;
		total += (size_t)b->blocks[i].len * b->blocks[i].ncopies;
	}
	b->pristine = malloc(total);
	if (!b->pristine)
		die("out of memory", NULL);
	for (size_t i = 0; i < b->nblocks; i++) {
		struct fuzz_block *fb = &b->blocks[i];
		for (unsigned c = 0; c < fb->ncopies; c++) {
			if (fb->physical[c] + fb->len > b->size[fb->dev[c]])
				die("a block lies past the end of its device", name);
			memcpy(b->pristine + b->pristine_off[i] + (size_t)c * fb->len,
			       b->image[fb->dev[c]] + fb->physical[c], fb->len);
		}
	}
	if (fuzz_verbose)
		fprintf(stderr, "fuzz: base %s: %u device(s), %zu tree blocks, nodesize %u\n", name,
			b->ndevs, b->nblocks - b->ndevs, b->nodesize);
}

static void load_bases(void)
{
	const char *single = getenv("BTK_FUZZ_BASE");
	const char *raid = getenv("BTK_FUZZ_RAID_BASE");

	fuzz_verbose = getenv("BTK_FUZZ_VERBOSE") != NULL;
	base_load(&bases[0], "single", single && *single ? single : BTK_FUZZ_BASE_DEFAULT);
	base_load(&bases[1], "raid", raid && *raid ? raid : BTK_FUZZ_RAID_DEFAULT);
	loaded = true;
}

uint8_t *fuzz_copy_at(struct fuzz_base *b, const struct fuzz_block *fb, unsigned c)
{
	return b->image[fb->dev[c]] + fb->physical[c];
}

void fuzz_restore_blocks(struct fuzz_base *b)
{
	for (size_t i = 0; i < b->nblocks; i++) {
		struct fuzz_block *fb = &b->blocks[i];
		if (!fb->touched)
			continue;
		for (unsigned c = 0; c < fb->ncopies; c++)
			memcpy(fuzz_copy_at(b, fb, c), b->pristine + b->pristine_off[i] + (size_t)c * fb->len,
			       fb->len);
		fb->touched = false;
		fb->dirty_lo = fb->dirty_hi = 0;
	}
}

static void apply_patches(struct fuzz_base *b, const uint8_t *data, size_t size, unsigned flags)
{
	size_t pos = 1;

	while (pos + 4 <= size) {
		struct fuzz_block *fb = &b->blocks[data[pos] % b->nblocks];
		uint32_t off = (uint32_t)(data[pos + 1] | data[pos + 2] << 8) % fb->len;
		size_t len = data[pos + 3];
		unsigned ncopies = (flags & FUZZ_FIRST_COPY) ? 1 : fb->ncopies;

		pos += 4;
		if (len > size - pos)
			len = size - pos;
		if (len > fb->len - off)
			len = fb->len - off;
		for (unsigned c = 0; c < ncopies; c++)
			memcpy(fuzz_copy_at(b, fb, c) + off, data + pos, len);
		if (!fb->touched || off < fb->dirty_lo)
			fb->dirty_lo = off;
		if (!fb->touched || off + len > fb->dirty_hi)
			fb->dirty_hi = off + (uint32_t)len;
		fb->touched = true;
		pos += len;
	}
}

/* Make the patched blocks pass checksum verification: tree blocks with the
 * (possibly patched) checksum type and nodesize of the first superblock,
 * then the superblocks. */
static void fix_csums(struct fuzz_base *b, unsigned flags)
{
	uint8_t *sb = fuzz_copy_at(b, &b->blocks[0], 0);
	unsigned type = super_csum_type(sb);
	uint32_t nodesize = super_nodesize(sb);
	uint8_t csum[BTRFS_CSUM_SIZE];

	if (!csum_size(type))
		type = b->csum_type;
	if (nodesize < 4096 || nodesize > 65536 || (nodesize & (nodesize - 1)))
		nodesize = b->nodesize;
	for (size_t i = b->ndevs; i < b->nblocks; i++) {
		struct fuzz_block *fb = &b->blocks[i];
		unsigned ncopies = (flags & FUZZ_FIRST_COPY) ? 1 : fb->ncopies;
		if (!fb->touched && type == b->csum_type && nodesize == b->nodesize)
			continue;
		for (unsigned c = 0; c < ncopies; c++) {
			uint8_t *blk = fuzz_copy_at(b, fb, c);
			if (fb->physical[c] + nodesize > b->size[fb->dev[c]])
				continue;
			/* only the csum field is written: it lies within the patchable block */
			csum_compute(type, blk + BTRFS_CSUM_SIZE, nodesize - BTRFS_CSUM_SIZE, csum);
			memcpy(blk, csum, BTRFS_CSUM_SIZE);
		}
		fb->touched = true;
	}
	for (unsigned d = 0; d < b->ndevs; d++)
		if (b->blocks[d].touched)
			super_update_csum(fuzz_copy_at(b, &b->blocks[d], 0));
}

struct fuzz_base *fuzz_patch(const uint8_t *data, size_t size)
{
	struct fuzz_base *b;

	if (!loaded)
		load_bases();
	b = &bases[(data[0] & FUZZ_RAID) ? 1 : 0];
	apply_patches(b, data, size, data[0]);
	if (data[0] & FUZZ_FIX_CSUMS)
		fix_csums(b, data[0]);
	return b;
}

int fuzz_open(struct fuzz_base *b, unsigned flags, void (*note)(void *, enum fs_note_level, const char *),
	      struct fs_info **fs, char *msg, size_t msglen)
{
	unsigned ndevs = (flags & FUZZ_DROP_DEVICE) && b->ndevs > 1 ? b->ndevs - 1 : b->ndevs;
	struct fs_open_options opts;

	fs_open_options_init(&opts);
	opts.scan_devices = false;
	opts.note = note;
	/* room for every block of a base, but far below the 32 MiB default
	 * whose hash table would dominate the run time */
	opts.cache_bytes = (flags & FUZZ_SMALL_CACHE) ? 4 * (uint64_t)b->nodesize : 1 << 20;
	return open_devices(b, ndevs, &opts, fs, msg, msglen);
}
