/* libFuzzer harness over whole filesystems: the input is a compact list of
 * patches onto the metadata of a small real filesystem (a base image), and
 * every run opens the patched filesystem, walks every tree, decodes every
 * patched leaf item, iterates the root tree forwards and the fs tree
 * backwards, reads the block groups and closes.
 *
 * Input layout:
 *   byte 0        flags (FUZZ_*)
 *   then patches  u8 block, u16le offset, u8 len, len bytes (cut at the end)
 * Blocks 0..ndevs-1 are the primary superblocks (4 KiB at 64 KiB) of the
 * base's devices, the following ones its tree blocks in walk order; block
 * and offset are taken modulo their count / size, so every input means
 * something. With FUZZ_FIX_CSUMS the harness then recomputes the checksums
 * of every patched block and superblock, so mutations get past checksum
 * verification to the parsers behind it.
 *
 * Two bases, loaded once: FUZZ_RAID picks the second.
 *   $BTK_FUZZ_BASE       one device: items of every kind, DUP metadata
 *                        (default BTK_FUZZ_BASE_DEFAULT: $(B)/fuzz/base.img)
 *   $BTK_FUZZ_RAID_BASE  colon-separated devices: RAID6 metadata on three
 *                        (default BTK_FUZZ_RAID_DEFAULT: $(B)/fuzz/raid-{1,2,3}.img)
 * made by tests/images/fuzz/make-base.sh; the Makefile unpacks them. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inspect/item_json.h"
#include "libfs/blockgroups.h"
#include "libfs/csum.h"
#include "libfs/fs.h"
#include "libfs/super.h"
#include "libfs/tree.h"
#include "libfs/volumes.h"
#include "libfs/walk.h"

#ifndef BTK_FUZZ_BASE_DEFAULT
#define BTK_FUZZ_BASE_DEFAULT "build/fuzz/base.img"
#endif
#ifndef BTK_FUZZ_RAID_DEFAULT
#define BTK_FUZZ_RAID_DEFAULT "build/fuzz/raid-1.img:build/fuzz/raid-2.img:build/fuzz/raid-3.img"
#endif

#define FUZZ_FIX_CSUMS (1U << 0)   /* recompute checksums of what was patched */
#define FUZZ_FIRST_COPY (1U << 1)  /* patch only the first copy of DUP blocks */
#define FUZZ_SMALL_CACHE (1U << 2) /* a cache of a few blocks: eviction paths */
#define FUZZ_DROP_DEVICE (1U << 3) /* open without the last device (degraded) */
#define FUZZ_RAID (1U << 4)        /* the multi-device base */
/* bits 5..7 exactly 001: decode the items of unpatched leaves too (rare on
 * purpose: decoding every item of the image is most of a run's cost) */
#define FUZZ_DECODE_ALL(flags) (((flags) >> 5) == 1)
#define FUZZ_MAX_BLOCKS 4096
#define FUZZ_MAX_DEVS 8

/* One patchable region of a base and where its copies are. */
struct fuzz_block {
	uint64_t logical;  /* tree blocks: bytenr */
	uint32_t len;
	unsigned ncopies;
	unsigned dev[MAX_COPIES];
	uint64_t physical[MAX_COPIES];
	bool touched;
	uint32_t dirty_lo, dirty_hi; /* bytes the patches changed: [lo, hi) */
};

struct fuzz_base {
	const char *name;
	uint8_t *image[FUZZ_MAX_DEVS]; /* the devices: patched, restored after each run */
	size_t size[FUZZ_MAX_DEVS];
	unsigned ndevs;
	uint8_t *pristine;    /* original bytes of every block copy, back to back */
	size_t *pristine_off; /* per block: offset of its copies in pristine */
	struct fuzz_block *blocks; /* ndevs superblocks, then tree blocks */
	size_t nblocks;
	uint32_t nodesize;
	uint16_t csum_type;
	uint16_t csum_size;
};

static struct fuzz_base bases[2];
static bool loaded;
static bool verbose;     /* $BTK_FUZZ_VERBOSE: say what each run reached */
static bool decode_all;  /* this run: decode every item (FUZZ_DECODE_ALL or new csum_size) */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void die(const char *what, const char *detail)
{
	fprintf(stderr, "fuzz_image: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
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
static int open_base(struct fuzz_base *b, unsigned n, const struct fs_open_options *opts,
		     struct fs_info **fs, char *msg, size_t msglen)
{
	struct io_dev *ios[FUZZ_MAX_DEVS];

	for (unsigned i = 0; i < n; i++) {
		if (io_open_mem(b->image[i], b->size[i], false, &ios[i])) {
			while (i--)
				io_close(ios[i]);
			snprintf(msg, msglen, "io_open_mem failed");
			return -ENOMEM;
		}
	}
	return fs_open_devices(ios, n, opts, fs, msg, msglen);
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
	if (open_base(b, b->ndevs, NULL, &cc.fs, msg, sizeof(msg)))
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
	if (verbose)
		fprintf(stderr, "fuzz_image: base %s: %u device(s), %zu tree blocks, nodesize %u\n", name,
			b->ndevs, b->nblocks - b->ndevs, b->nodesize);
}

static void load_bases(void)
{
	const char *single = getenv("BTK_FUZZ_BASE");
	const char *raid = getenv("BTK_FUZZ_RAID_BASE");

	verbose = getenv("BTK_FUZZ_VERBOSE") != NULL;
	base_load(&bases[0], "single", single && *single ? single : BTK_FUZZ_BASE_DEFAULT);
	base_load(&bases[1], "raid", raid && *raid ? raid : BTK_FUZZ_RAID_DEFAULT);
	loaded = true;
}

static uint8_t *copy_at(struct fuzz_base *b, const struct fuzz_block *fb, unsigned c)
{
	return b->image[fb->dev[c]] + fb->physical[c];
}

static void restore_blocks(struct fuzz_base *b)
{
	for (size_t i = 0; i < b->nblocks; i++) {
		struct fuzz_block *fb = &b->blocks[i];
		if (!fb->touched)
			continue;
		for (unsigned c = 0; c < fb->ncopies; c++)
			memcpy(copy_at(b, fb, c), b->pristine + b->pristine_off[i] + (size_t)c * fb->len,
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
			memcpy(copy_at(b, fb, c) + off, data + pos, len);
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
	uint8_t *sb = copy_at(b, &b->blocks[0], 0);
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
			uint8_t *blk = copy_at(b, fb, c);
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
			super_update_csum(copy_at(b, &b->blocks[d], 0));
}

static void note_sink(void *arg, enum fs_note_level level, const char *msg)
{
	(void)arg;
	(void)level;
	(void)msg;
}

struct walk_ctx {
	struct fs_info *fs;
	struct fuzz_base *base;
	uint64_t owner;
	uint64_t items;
};

static void decode_item(struct walk_ctx *w, const struct btrfs_key *key, const uint8_t *data,
			uint32_t size, uint64_t owner)
{
	int malformed;
	struct json_object *obj = item_fields_json(key, data, size, w->fs->csum_size, owner, &malformed);

	/* no item_fields_text: fuzz_items covers it, and here it would double the time */
	json_object_put(obj);
	w->items++;
}

static bool ranges_meet(uint64_t lo1, uint64_t hi1, uint64_t lo2, uint64_t hi2)
{
	return lo1 < hi2 && lo2 < hi1;
}

/* Item decoding is a function of the item's key and bytes (and the
 * superblock's csum_size): an item no patch touched decodes exactly as in
 * the pristine image, so skip it unless asked to, and spend the time on
 * what changed; fuzz_items covers the decoders at full speed. */
static bool item_worth_decoding(const struct fuzz_base *b, const struct tree_block *tb, unsigned slot)
{
	const uint8_t *item = leaf_item(tb->data, slot);
	uint64_t head = sizeof(struct btrfs_header) + (uint64_t)slot * sizeof(struct btrfs_item);
	uint64_t body = sizeof(struct btrfs_header) + (uint64_t)item_offset(item);

	if (decode_all)
		return true;
	for (size_t i = b->ndevs; i < b->nblocks; i++) {
		const struct fuzz_block *fb = &b->blocks[i];
		if (fb->logical != tb->bytenr)
			continue;
		if (!fb->touched)
			return false;
		return ranges_meet(head, head + sizeof(struct btrfs_item), fb->dirty_lo, fb->dirty_hi) ||
		       ranges_meet(body, body + item_size(item), fb->dirty_lo, fb->dirty_hi);
	}
	return true; /* not a block of the base */
}

static int walk_visit(void *arg, const struct tree_block *tb)
{
	struct walk_ctx *w = arg;

	if (block_level(tb) != 0)
		return 0;
	for (unsigned slot = 0; slot < block_nritems(tb); slot++) {
		struct btrfs_key key;
		if (!item_worth_decoding(w->base, tb, slot))
			continue;
		block_key(tb, slot, &key);
		decode_item(w, &key, leaf_item_data(tb->data, slot), item_size(leaf_item(tb->data, slot)),
			    w->owner);
	}
	return 0;
}

static void walk_bad_block(void *arg, uint64_t bytenr, int level, int err, const char *why)
{
	(void)arg;
	(void)bytenr;
	(void)level;
	(void)err;
	(void)why;
}

/* A few pieces of every chunk through the chunk map, every copy: its start,
 * across its first stripe boundary and its end; the mapping of each profile
 * the (patched) chunk items describe, as data readers use it. */
static void read_chunks(struct fs_info *fs)
{
	uint8_t buf[8192];

	for (size_t i = 0; i < fs->chunks->count; i++) {
		const struct chunk *c = fs->chunks->chunks[i];
		uint64_t len = c->length < sizeof(buf) ? c->length : sizeof(buf);
		uint64_t at[3] = { 0, c->stripe_len - len / 2, c->length - len };
		int copies = volumes_num_copies(fs, c->logical);
		const char *volatile name = profile_name(c->type);

		(void)name;
		for (int m = 0; m < copies; m++)
			for (int k = 0; k < 3; k++)
				if (at[k] <= c->length - len)
					volumes_read(fs, c->logical + at[k], buf, len, m);
	}
}

/* What a checker does with a tree root: every copy verified on its own. */
static void check_root_copies(struct fs_info *fs, const struct tree_root_ptr *root)
{
	struct block_expect e = { .generation = root->generation, .level = root->level };
	uint8_t *buf = malloc(fs->nodesize);
	int copies = volumes_num_copies(fs, root->bytenr);

	for (int m = 0; buf && m < copies; m++) {
		const char *volatile why = block_problem_name(block_read_copy(fs, root->bytenr, m, &e, buf));
		(void)why;
	}
	free(buf);
}

static void exercise(struct fuzz_base *b, struct fs_info *fs)
{
	struct btrfs_key min = { 0, 0, 0 }, max = { (uint64_t)-1, 255, (uint64_t)-1 }, key;
	struct walk_ctx w = { .fs = fs, .base = b };
	struct tree_walk_ops ops = { .visit = walk_visit, .bad_block = walk_bad_block, .arg = &w };
	struct block_group_list bgs;
	struct fs_tree_list trees;
	struct tree_iter it;
	struct tree_path path;
	const uint8_t *data;
	uint32_t size;
	int ret;

	if (fs->csum_size != b->csum_size)
		decode_all = true; /* EXTENT_CSUM items decode differently */

	if (fs_list_trees(fs, &trees) == 0) {
		for (size_t t = 0; t < trees.count; t++) {
			struct tree_root_ptr found;
			uint64_t bad;
			w.owner = trees.roots[t].objectid;
			tree_walk(fs, &trees.roots[t], &ops, &bad);
			check_root_copies(fs, &trees.roots[t]);
			fs_find_root(fs, trees.roots[t].objectid, &found);
		}
		fs_tree_list_free(&trees);
	}

	tree_iter_init(&it, fs, &fs->tree_root, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &data, &size)) == 1)
		if (item_worth_decoding(b, it.path.nodes[0], (unsigned)it.path.slots[0]))
			decode_item(&w, &key, data, size, BTRFS_ROOT_TREE_OBJECTID);
	tree_iter_release(&it);

	/* backwards through the fs tree, from its last item */
	if (fs->fs_root.bytenr) {
		tree_path_init(&path);
		ret = tree_search_le(fs, &fs->fs_root, &max, &path);
		while (ret == 0) {
			tree_item_key(&path, &key);
			data = tree_item_data(&path, &size);
			(void)data;
			ret = tree_prev(fs, &path);
		}
		tree_path_release(fs, &path);
	}

	if (fs_read_block_groups(fs, &bgs) == 0)
		block_group_list_free(&bgs);
	read_chunks(fs);
	if (verbose)
		fprintf(stderr, "fuzz_image: %llu leaf items decoded\n", (unsigned long long)w.items);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fs_open_options opts;
	struct fuzz_base *b;
	struct fs_info *fs;
	char msg[512] = "";
	unsigned flags, ndevs;

	if (!loaded)
		load_bases();
	if (size < 1)
		return 0;
	flags = data[0];
	b = &bases[(flags & FUZZ_RAID) ? 1 : 0];
	apply_patches(b, data, size, flags);
	if (flags & FUZZ_FIX_CSUMS)
		fix_csums(b, flags);
	decode_all = FUZZ_DECODE_ALL(flags);

	fs_open_options_init(&opts);
	opts.scan_devices = false;
	opts.note = note_sink;
	/* room for every block of a base, but far below the 32 MiB default
	 * whose hash table would dominate the run time */
	opts.cache_bytes = (flags & FUZZ_SMALL_CACHE) ? 4 * (uint64_t)b->nodesize : 1 << 20;
	ndevs = (flags & FUZZ_DROP_DEVICE) && b->ndevs > 1 ? b->ndevs - 1 : b->ndevs;
	if (open_base(b, ndevs, &opts, &fs, msg, sizeof(msg)) == 0) {
		exercise(b, fs);
		fs_close(fs);
	} else if (verbose) {
		fprintf(stderr, "fuzz_image: open failed: %s\n", msg);
	}
	restore_blocks(b);
	return 0;
}
