// SPDX-License-Identifier: GPL-2.0-only
/* btk-image dump: every tree block reachable from every root (log trees
 * included, each block once), each device's superblock and, with --data,
 * the data extents, into a native or btrfs-image stream. Blocks are emitted
 * in post-order (a node after all its children) so the sanitizer can give
 * each node its children's new first keys. */
#include <argp.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cli.h"
#include "common/env_knobs.h"
#include "common/messages.h"
#include "common/progress.h"
#include "common/sizes.h"
#include "image/dump.h"
#include "image/fmt_btrfs_image.h"
#include "image/image.h"
#include "image/sanitize.h"
#include <btk/blockgroups.h>
#include <btk/csum.h>
#include <btk/ebitmap.h>
#include <btk/extent_scan.h>
#include <btk/super.h>
#include <btk/target.h>
#include <btk/tree.h>
#include <btk/volumes.h>
#include <btk/walk.h>

enum { OPT_COMPRESS = 256, OPT_SANITIZE, OPT_DATA, OPT_WALK_EXTENT, OPT_FORMAT, OPT_ZERO_UNUSED, OPT_FRAME_SIZE };

static const struct argp_option dump_options[] = {
	{ "compress-level", 'c', "LEVEL", 0, "Compression level: zstd 1-19 (default 1), lz4 1 (fast, default) "
	  "or 2-12 (LZ4 HC), btrfs-image zlib 0-9 (default 9; 0 stores)", 0 },
	{ "compress", OPT_COMPRESS, "ALG", 0, "Frame compression of a btk image: zstd (default), lz4 or none", 0 },
	{ "jobs", 'j', "N", 0, "Compression threads (default: the number of CPUs)", 0 },
	{ "sanitize", OPT_SANITIZE, "MODE", OPTION_ARG_OPTIONAL, "Hide names: random (default) replaces them "
	  "with same-length random names, collide keeps their crc32c hash (names of 5 bytes or more); inline "
	  "data and xattr values are zeroed (btrfs.* property xattrs are kept), symlink targets replaced by "
	  "same-length random paths, the label replaced", 0 },
	{ "data", OPT_DATA, NULL, 0, "Include the data extents (not with --sanitize)", 0 },
	{ "walk-extent-tree", OPT_WALK_EXTENT, NULL, 0, "Find tree blocks from the extent tree and read them in "
	  "address order instead of walking every tree (faster; log trees are still walked)", 0 },
	{ "format", OPT_FORMAT, "FMT", 0, "Image format: btk (default) or btrfs-image", 0 },
	{ "frame-size", OPT_FRAME_SIZE, "SIZE", 0, "Raw bytes per compressed frame of a btk image, 64K-64M "
	  "(default 16M); memory grows with it: about (jobs + 2) x 2 x SIZE", 0 },
	{ "zero-unused", OPT_ZERO_UNUSED, NULL, 0, "Zero the unused space of leaves and nodes (stale bytes between "
	  "item headers and item data, after a node's last pointer) and recompute the checksum, as btrfs-image "
	  "does: a smaller image on an aged filesystem, and no old names or data left in free leaf space; the "
	  "restored blocks are then not byte-identical (the trees are the same). Always on with --sanitize. "
	  "Default: every tree block is kept byte for byte", 0 },
	{ 0 }
};

static error_t dump_parse(int key, char *arg, struct argp_state *state)
{
	struct dump_args *a = state->input;
	char *end;

	switch (key) {
	case ARGP_KEY_INIT:
		state->child_inputs[0] = &a->common;
		break;
	case 'c':
		a->level = (int)strtol(arg, &end, 10);
		if (*end || a->level < 0 || a->level > 22)
			argp_error(state, "invalid compression level '%s'", arg);
		a->level_set = true;
		break;
	case OPT_COMPRESS:
		if (!strcmp(arg, "zstd"))
			a->comp = IMG_COMPRESS_ZSTD;
		else if (!strcmp(arg, "lz4"))
			a->comp = IMG_COMPRESS_LZ4;
		else if (!strcmp(arg, "none"))
			a->comp = IMG_COMPRESS_NONE;
		else
			argp_error(state, "invalid --compress '%s' (expected zstd, lz4 or none)", arg);
		break;
	case 'j':
		a->jobs = (unsigned)strtoul(arg, &end, 10);
		if (*end || a->jobs < 1 || a->jobs > 256)
			argp_error(state, "invalid --jobs '%s' (1-256)", arg);
		break;
	case OPT_SANITIZE:
		if (!arg || !strcmp(arg, "random"))
			a->sanitize = SANITIZE_RANDOM;
		else if (!strcmp(arg, "collide"))
			a->sanitize = SANITIZE_COLLIDE;
		else
			argp_error(state, "invalid --sanitize '%s' (expected random or collide)", arg);
		break;
	case OPT_DATA: a->data = true; break;
	case OPT_ZERO_UNUSED: a->zero_unused = true; break;
	case OPT_FRAME_SIZE: {
		uint64_t v;
		if (size_parse(arg, &v) || v < BTK_IMG_FRAME_RAW_MIN || v > BTK_IMG_FRAME_RAW_MAX)
			argp_error(state, "invalid --frame-size '%s' (64K to 64M)", arg);
		a->frame_size = (size_t)v;
		break;
	}
	case OPT_WALK_EXTENT: a->walk_extent_tree = true; break;
	case OPT_FORMAT:
		if (!strcmp(arg, "btk"))
			a->format = IMG_FORMAT_BTK;
		else if (!strcmp(arg, "btrfs-image"))
			a->format = IMG_FORMAT_BTRFS_IMAGE;
		else
			argp_error(state, "invalid --format '%s' (expected btk or btrfs-image)", arg);
		break;
	case ARGP_KEY_ARGS:
		a->paths = state->argv + state->next;
		a->npaths = (unsigned)(state->argc - state->next);
		if (a->npaths < 2)
			argp_error(state, "need at least one device and the output (a file or -)");
		a->out = a->paths[--a->npaths];
		break;
	case ARGP_KEY_NO_ARGS:
		argp_usage(state);
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

/* ---------------------------------------------------------------- the sink */

static int sink_add(struct dump_ctx *d, uint16_t type, uint64_t logical, const void *data, uint32_t len)
{
	int ret;

	if (d->bw)
		ret = btk_writer_add(d->bw, type, logical, data, len);
	else
		ret = bimg_writer_add(d->biw, type == IMG_REC_SUPER ? BTRFS_SUPER_INFO_OFFSET : logical, data, len);
	if (ret)
		return ret;
	if (type != IMG_REC_SUPER)
		progress_add(d->prog, len);
	if (type == IMG_REC_TREE) {
		d->blocks++;
		d->tree_bytes += len;
	} else if (type == IMG_REC_DATA) {
		d->data_bytes += len;
	}
	return 0;
}

/* Zero the bytes of a (verified) tree block that hold nothing: between a
 * leaf's item headers and its item data, after a node's last pointer. They
 * are stale leftovers, compress badly and may hold old names. Returns
 * whether anything changed (the checksum must then be recomputed). */
static bool zero_unused(const struct fs_info *fs, uint8_t *b)
{
	const size_t hdr = sizeof(struct btrfs_header);
	unsigned n = header_nritems(b);
	size_t start, end = fs->nodesize;
	bool changed = false;

	if (header_level(b) == 0) {
		start = hdr + (size_t)n * sizeof(struct btrfs_item);
		for (unsigned i = 0; i < n; i++) {
			size_t off = hdr + item_offset(leaf_item(b, i));
			if (off < end)
				end = off;
		}
	} else {
		start = hdr + (size_t)n * sizeof(struct btrfs_key_ptr);
	}
	for (size_t i = start; i < end && i < fs->nodesize; i++)
		if (b[i]) {
			changed = true;
			break;
		}
	if (changed)
		memset(b + start, 0, end - start);
	return changed;
}

/* Sanitize (when asked) and write one tree block; data is a private copy. */
static int emit_block(struct dump_ctx *d, uint64_t bytenr, uint8_t *data)
{
	/* the sanitizer re-checksums only the blocks it renamed in: a zeroed block needs it too */
	bool zeroed = (d->args->zero_unused || d->san) && zero_unused(d->fs, data);

	if (d->san) {
		int ret = sanitize_tree_block(d->san, data);
		if (ret) {
			msg_error("sanitizing the tree block at %llu failed: %s", (unsigned long long)bytenr,
				  sanitizer_error(d->san));
			d->reported = true;
			return ret;
		}
	}
	if (zeroed) {
		uint8_t csum[BTRFS_CSUM_SIZE];
		csum_compute(d->fs->csum_type, data + BTRFS_CSUM_SIZE, d->fs->nodesize - BTRFS_CSUM_SIZE, csum);
		memcpy(header_csum_ptr(data), csum, BTRFS_CSUM_SIZE);
	}
	return sink_add(d, IMG_REC_TREE, bytenr, data, d->fs->nodesize);
}

/* Emit the waiting nodes whose level is at most `level`: the walk has left them. */
static int flush_pending(struct dump_ctx *d, int level)
{
	while (d->npend && (int)d->pend[d->npend - 1].level <= level) {
		struct pending_node *p = &d->pend[--d->npend];
		int ret = emit_block(d, p->bytenr, p->data);
		if (ret)
			return ret;
	}
	return 0;
}

static int dump_visit(void *arg, const struct tree_block *b)
{
	struct dump_ctx *d = arg;
	unsigned level = block_level(b);
	int ret;

	d->visited_any = true;
	if (cli_cancelled())
		return -ECANCELED;
	if ((ret = flush_pending(d, (int)level)))
		return ret;
	ret = ebitmap_test_and_set(d->visited, b->bytenr, d->fs->nodesize);
	if (ret)
		return ret < 0 ? ret : 1; /* reached before (a shared subtree): skip it */
	if (level == 0) {
		memcpy(d->scratch, b->data, d->fs->nodesize);
		return emit_block(d, b->bytenr, d->scratch);
	}
	if (d->npend >= BTRFS_MAX_LEVEL)
		return -EUCLEAN;
	memcpy(d->pend[d->npend].data, b->data, d->fs->nodesize);
	d->pend[d->npend].bytenr = b->bytenr;
	d->pend[d->npend].level = level;
	d->npend++;
	return 0;
}

static void dump_bad_block(void *arg, uint64_t bytenr, int level, int err, const char *why)
{
	struct dump_ctx *d = arg;

	d->bad++;
	msg_warning("tree block %llu (level %d) is unreadable and left out: %s", (unsigned long long)bytenr, level,
		    why && *why ? why : strerror(-err));
}

/* Every block of one tree; of a deleted subvolume being dropped (drop, may
 * be NULL), the blocks still in it. */
static int walk_one_tree(struct dump_ctx *d, const struct tree_root_ptr *root, const struct tree_drop_progress *drop)
{
	struct tree_walk_ops ops = { dump_visit, dump_bad_block, d };
	struct tree_walk_prefetch pf = { false, NULL, NULL, drop && drop->level ? drop : NULL, NULL };
	uint64_t bad = 0;
	int ret;

	if (!root->bytenr)
		return 0;
	d->visited_any = false;
	ret = tree_walk_prefetching(d->fs, root, &ops, &pf, &bad);
	if (!ret)
		ret = flush_pending(d, BTRFS_MAX_LEVEL);
	d->npend = 0;
	if (ret && !d->visited_any && ret != -ENOMEM && ret != -ECANCELED) {
		/* the root itself is unreadable: report it and go on with the other trees */
		d->bad++;
		msg_warning("tree %lld: root block %llu is unreadable and left out: %s", (long long)root->objectid,
			    (unsigned long long)root->bytenr, btk_error_msg());
		return 0;
	}
	return ret;
}

/* ---------------------------------------------------------------- extent-tree mode */

struct block_set {
	struct fs_info *fs;
	struct ebitmap *set;
};

static int add_tree_block(void *arg, const struct extent_rec *e)
{
	const struct block_set *b = arg;
	int ret;

	if (!e->tree_block || e->len != b->fs->nodesize || e->bytenr % b->fs->sectorsize)
		return 0;
	return (ret = ebitmap_set(b->set, e->bytenr, e->len)) < 0 ? ret : 0;
}

/* Every tree block the extent tree records, into `set`. */
static int collect_from_extent_tree(struct dump_ctx *d, struct ebitmap *set)
{
	struct block_set b = { d->fs, set };
	int ret = extent_tree_each(d->fs, &d->fs->extent_root, 0, (uint64_t)-1, add_tree_block, &b);

	return ret < 0 ? ret : 0;
}

/* Read the recorded blocks in address order, in runs of up to 1 MiB. */
static int dump_by_extent_tree(struct dump_ctx *d)
{
	const uint32_t ns = d->fs->nodesize;
	const uint64_t run_max = 1u << 20;
	struct ebitmap *set = ebitmap_create(d->fs->sectorsize);
	uint64_t from = 0, start, len;
	uint8_t *buf = malloc(run_max);
	int ret;

	if (!set || !buf) {
		ret = -ENOMEM;
		goto out;
	}
	if ((ret = collect_from_extent_tree(d, set)))
		goto out;
	while ((ret = ebitmap_next_set(set, from, &start, &len)) == 1) {
		from = start + len;
		while (len) {
			uint64_t n = len < run_max ? len : run_max;
			const struct chunk *c = fs_chunk_lookup(d->fs, start);
			if (c && start + n > c->logical + c->length)
				n = c->logical + c->length - start;
			n -= n % ns;
			if (!n)
				n = ns;
			if (cli_cancelled()) {
				ret = -ECANCELED;
				goto out;
			}
			if (volumes_read(d->fs, start, buf, n, 0))
				memset(buf, 0, n); /* each block falls back to block_read below */
			for (uint64_t off = 0; off < n; off += ns) {
				uint8_t *blk = buf + off;
				struct tree_block *tb = NULL;
				if (ebitmap_test_and_set(d->visited, start + off, ns))
					continue;
				if (block_verify(d->fs, start + off, blk, &BLOCK_EXPECT_ANY) != BLOCK_OK) {
					if (block_read(d->fs, start + off, &BLOCK_EXPECT_ANY, &tb)) {
						dump_bad_block(d, start + off, -1, -EIO, btk_error_msg());
						continue;
					}
					memcpy(blk, tb->data, ns);
					block_put(d->fs, tb);
				}
				if ((ret = emit_block(d, start + off, blk)))
					goto out;
			}
			start += n;
			len -= n;
		}
	}
out:
	ebitmap_destroy(set);
	free(buf);
	return ret < 0 ? ret : 0;
}

/* ---------------------------------------------------------------- data */

struct data_dump {
	struct dump_ctx *d;
	uint8_t *buf;
};

/* One data extent, read from the first copy that reads. */
static int dump_extent(void *arg, const struct extent_rec *e)
{
	struct data_dump *x = arg;
	struct dump_ctx *d = x->d;
	int ret;

	if (!e->data)
		return 0;
	for (uint64_t pos = e->bytenr, end = e->bytenr + e->len; pos < end;) {
		uint32_t n = end - pos < BTK_IMG_MAX_RECORD ? (uint32_t)(end - pos) : BTK_IMG_MAX_RECORD;
		int copies = volumes_num_copies(d->fs, pos), r = -EIO;
		for (int m = 0; m < (copies > 0 ? copies : 1) && r; m++)
			r = volumes_read(d->fs, pos, x->buf, n, m);
		if (r) {
			d->bad++;
			msg_warning("data extent at %llu is unreadable (%s) and left out",
				    (unsigned long long)pos, strerror(-r));
		} else if ((ret = sink_add(d, IMG_REC_DATA, pos, x->buf, n))) {
			return ret;
		}
		pos += n;
	}
	return cli_cancelled() ? -ECANCELED : 0;
}

static int dump_data(struct dump_ctx *d)
{
	struct data_dump x = { d, malloc(BTK_IMG_MAX_RECORD) };
	int ret;

	if (!x.buf)
		return -ENOMEM;
	ret = extent_tree_each(d->fs, &d->fs->extent_root, 0, (uint64_t)-1, dump_extent, &x);
	free(x.buf);
	return ret < 0 ? ret : 0;
}

/* ---------------------------------------------------------------- setup */

static uint64_t bytes_to_dump(struct fs_info *fs, bool data)
{
	struct block_group_list bgs;
	uint64_t total = 0;

	if (fs_read_block_groups(fs, &bgs))
		return 0;
	for (size_t i = 0; i < bgs.count; i++)
		if ((bgs.groups[i].flags & (BTRFS_BLOCK_GROUP_METADATA | BTRFS_BLOCK_GROUP_SYSTEM)) ||
		    (data && (bgs.groups[i].flags & BTRFS_BLOCK_GROUP_DATA)))
			total += bgs.groups[i].used;
	block_group_list_free(&bgs);
	return total;
}

/* The other superblock copies of a device that a restore could not derive
 * from its primary (a log-tree sync writes only the primary): kept verbatim. */
static int dump_super_copies(struct dump_ctx *d, const struct fs_device *dev, const uint8_t *primary)
{
	uint8_t sb[BTRFS_SUPER_INFO_SIZE], derived[BTRFS_SUPER_INFO_SIZE];
	int ret;

	for (int m = 1; m < BTRFS_SUPER_MIRROR_MAX; m++) {
		uint64_t off = btrfs_super_offset(m);
		if (off + BTRFS_SUPER_INFO_SIZE > dev->total_bytes || io_read(dev->io, sb, sizeof(sb), off) ||
		    super_magic(sb) != BTRFS_MAGIC)
			continue; /* a restore writes the derived copy */
		memcpy(derived, primary, sizeof(derived));
		super_set_bytenr(derived, off);
		super_update_csum(derived);
		if (!memcmp(sb, derived, sizeof(sb)))
			continue;
		if ((ret = btk_writer_add_super_copy(d->bw, dev->devid, (unsigned)m, sb)))
			return ret;
	}
	return 0;
}

/* Each present device's own superblock (its dev_item differs). */
static int dump_superblocks(struct dump_ctx *d)
{
	uint8_t sb[BTRFS_SUPER_INFO_SIZE];
	struct super_copy info;
	int ret;

	for (unsigned i = 0; i < fs_num_devices(d->fs); i++) {
		const struct fs_device *dev = fs_device(d->fs, i);
		if (!dev->io)
			continue;
		if (super_read_copy(dev->io, 0, sb, &info) || info.status) {
			memcpy(sb, fs_super(d->fs), sizeof(sb));
			msg_warning("device %llu: primary superblock unreadable, using the filesystem's",
				    (unsigned long long)dev->devid);
		}
		if (d->san && (ret = sanitize_super(d->san, sb)))
			return ret;
		if ((ret = sink_add(d, IMG_REC_SUPER, dev->devid, sb, sizeof(sb))))
			return ret;
		if (!d->bw)
			break; /* btrfs-image holds one superblock */
		if (!d->san && (ret = dump_super_copies(d, dev, sb)))
			return ret;
	}
	return 0;
}

static void fill_header(struct dump_ctx *d, struct img_header *h, struct img_device *devs)
{
	struct fs_info *fs = d->fs;
	uint8_t sb[BTRFS_SUPER_INFO_SIZE];
	struct super_copy info;

	memset(h, 0, sizeof(*h));
	img_header_from_super(h, fs_super(fs));
	h->sanitize = (uint8_t)d->args->sanitize;
	h->flags = IMG_FLAG_POSTORDER | (d->args->data ? IMG_FLAG_DATA : 0);
	if (d->args->walk_extent_tree)
		h->flags &= ~IMG_FLAG_POSTORDER;
	h->num_devices = 0;
	for (unsigned i = 0; i < fs_num_devices(fs); i++) {
		struct img_device *o = &devs[h->num_devices++];
		o->devid = fs_device(fs, i)->devid;
		o->total_bytes = fs_device(fs, i)->total_bytes;
		memcpy(o->uuid, fs_device(fs, i)->uuid, 16);
		o->bytes_used = 0;
		if (fs_device(fs, i)->io && !super_read_copy(fs_device(fs, i)->io, 0, sb, &info) && !info.status)
			o->bytes_used = dev_item_bytes_used(super_dev_item_ptr(sb));
	}
	h->devices = devs;
}

/* Open the output once the target check (libfs/target.h) let it through:
 * not mounted, not a device of fs, holding no filesystem or other signature. */
static int open_output(const struct fs_info *fs, const char *path, int *fd)
{
	const char *members[64];
	struct target_spec spec = { .flags = TARGET_NEW_CONTENT | TARGET_MAY_CREATE, .members = members,
				    .fsid = fs->fsid };
	struct stat st;
	char why[600];
	int ret;

	for (unsigned i = 0; i < fs_num_devices(fs) && spec.nmembers < 64; i++)
		if (fs_device(fs, i)->path)
			members[spec.nmembers++] = fs_device(fs, i)->path;
	if (!strcmp(path, "-")) {
		if (isatty(1)) {
			msg_error("refusing to write an image to a terminal (redirect stdout or give a file)");
			return -EINVAL;
		}
		if ((ret = target_check_fd(1, "stdout", &spec, why, sizeof(why)))) {
			msg_error("refusing to write the image: %s; nothing was written", why);
			return ret;
		}
		*fd = 1;
		return 0;
	}
	if ((ret = target_check(path, &spec, why, sizeof(why)))) {
		msg_error("refusing to write the image: %s%s; nothing was written", why,
			  ret == -EEXIST ? " (remove it, or clear it with wipefs, to use it)" : "");
		return ret;
	}
	*fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (*fd < 0) {
		int err = -errno;
		msg_errno(err, "cannot create %s", path);
		return err;
	}
	/* a failed dump removes a file it wrote, never a device node */
	if (fstat(*fd, &st) == 0 && S_ISREG(st.st_mode))
		cli_register_tempfile(path);
	return 0;
}

/* -c within the range of the compressor it sets (btk-image(8)). */
static int check_level(const struct dump_args *a)
{
	int lo, hi;
	const char *what;

	if (!a->level_set)
		return 0;
	if (a->format == IMG_FORMAT_BTRFS_IMAGE) {
		lo = 0, hi = 9, what = "btrfs-image zlib";
	} else if (a->comp == IMG_COMPRESS_ZSTD) {
		lo = 1, hi = 19, what = "zstd";
	} else if (a->comp == IMG_COMPRESS_LZ4) {
		lo = 1, hi = 12, what = "lz4";
	} else {
		msg_error("-c sets a compression level: not with --compress none");
		return -EINVAL;
	}
	if (a->level < lo || a->level > hi) {
		msg_error("invalid compression level %d: %s takes %d-%d", a->level, what, lo, hi);
		return -EINVAL;
	}
	return 0;
}

static int check_args(const struct dump_args *a)
{
	if (a->sanitize && a->data) {
		msg_error("--data would ship file contents: it cannot be combined with --sanitize");
		return -EINVAL;
	}
	if (a->sanitize && a->walk_extent_tree) {
		/* both modes may re-key (collide does for names too short to keep their
		 * hash), and nodes take their children's new keys only in post-order */
		msg_error("--sanitize re-keys items and needs the tree walk's order: drop --walk-extent-tree");
		return -EINVAL;
	}
	if (a->format == IMG_FORMAT_BTRFS_IMAGE && a->data) {
		msg_error("--data is only supported with --format btk");
		return -EINVAL;
	}
	if (a->format == IMG_FORMAT_BTRFS_IMAGE && a->comp != IMG_COMPRESS_ZSTD) {
		msg_error("--compress applies to --format btk (btrfs-image uses zlib; set its level with -c)");
		return -EINVAL;
	}
	return check_level(a);
}

static int run_dump(struct dump_ctx *d)
{
	struct fs_tree_list trees;
	int ret;

	if ((ret = dump_superblocks(d)))
		return ret;
	/* the chunk tree first: a restore maps everything else with it */
	if ((ret = walk_one_tree(d, &d->fs->chunk_root, NULL)))
		return ret;
	if (d->args->walk_extent_tree && (ret = dump_by_extent_tree(d)))
		return ret;
	if ((ret = fs_list_trees(d->fs, &trees))) {
		msg_error("listing the trees failed: %s", btk_error_msg());
		return ret;
	}
	for (size_t i = 0; i < trees.count && !ret; i++)
		ret = walk_one_tree(d, &trees.roots[i], &trees.drops[i]);
	fs_tree_list_free(&trees);
	if (!ret && d->args->data)
		ret = dump_data(d);
	return ret;
}

int cmd_dump(int argc, char **argv)
{
	static const struct argp_child children[] = { { &cli_common_argp, 0, NULL, 0 }, { 0 } };
	static const struct argp argp = { dump_options, dump_parse, "DEVICE... OUTPUT",
		"Write a metadata image of an unmounted filesystem to OUTPUT (a file, or - for stdout): every "
		"tree block of every tree (log trees included), each device's superblock and the device list; "
		"with --data the file data too. OUTPUT must not be mounted, a device of the filesystem, or hold "
		"a filesystem or another signature (see TARGETS in btk-image(8)). See also doc/image-format.md.", children, NULL, NULL };
	struct dump_args a = { .comp = IMG_COMPRESS_ZSTD };
	struct dump_ctx d = { .args = &a };
	struct fs_open_options fo;
	struct img_device *devs = NULL;
	struct img_header h;
	struct img_totals tot = { 0 };
	char msg[600];
	int fd = -1, ret;
	long ncpu;

	argp_parse(&argp, argc, argv, 0, NULL, &a);
	if (check_args(&a))
		return 1;
	if (!a.jobs) {
		ncpu = sysconf(_SC_NPROCESSORS_ONLN);
		a.jobs = ncpu > 0 ? (unsigned)(ncpu > 64 ? 64 : ncpu) : 1;
	}
	fs_open_options_init(&fo);
	fo.note = msg_fs_note;
	fo.scan_devices = true;
	env_knobs_fill(&fo);
	ret = fs_open((const char *const *)a.paths, a.npaths, &fo, &d.fs);
	if (ret) {
		msg_error("%s", btk_error_msg());
		return 1;
	}
	/* before any long work: the output must be one we may write */
	if ((ret = open_output(d.fs, a.out, &fd)))
		goto out;
	d.visited = ebitmap_create(d.fs->sectorsize);
	d.scratch = malloc(d.fs->nodesize);
	devs = calloc(fs_num_devices(d.fs) ? fs_num_devices(d.fs) : 1, sizeof(*devs));
	for (unsigned i = 0; i < BTRFS_MAX_LEVEL; i++)
		d.pend[i].data = malloc(d.fs->nodesize);
	if (!d.visited || !d.scratch || !devs || !d.pend[BTRFS_MAX_LEVEL - 1].data) {
		msg_error("out of memory");
		ret = -ENOMEM;
		goto out;
	}
	if (a.sanitize && (ret = sanitizer_new(&d.san, (enum sanitize_mode)a.sanitize, d.fs->csum_type,
					       d.fs->nodesize, 0))) {
		msg_errno(ret, "cannot set up the sanitizer");
		goto out;
	}
	/* random mode re-keys dir items: first learn the key ranges of every copy (snapshots, log trees) */
	if (d.san && (ret = sanitize_prescan_fs(d.san, d.fs))) {
		msg_error("sanitizing failed: %s", sanitizer_error(d.san)[0] ? sanitizer_error(d.san) : strerror(-ret));
		goto out;
	}
	fill_header(&d, &h, devs);
	if (a.format == IMG_FORMAT_BTK) {
		struct btk_writer_opts wo = { a.comp, a.level_set ? a.level : 0, a.jobs, a.frame_size };
		ret = btk_writer_open(&d.bw, fd, &h, &wo, msg, sizeof(msg));
		if (ret)
			msg_error("%s", msg);
	} else {
		ret = bimg_writer_open(&d.biw, fd, a.level_set ? a.level : 9);
		if (ret)
			msg_errno(ret, "cannot start the btrfs-image writer");
	}
	if (ret)
		goto out;
	cli_enable_cancel();
	d.prog = progress_create("dumping", bytes_to_dump(d.fs, a.data), cli_progress_mode(&a.common));
	ret = run_dump(&d);
	if (!ret) {
		if (d.bw && (ret = btk_writer_finish(d.bw, &tot)))
			msg_error("%s", btk_writer_error(d.bw));
		if (d.biw) {
			if ((ret = bimg_writer_finish(d.biw)))
				msg_errno(ret, "writing the btrfs-image dump failed");
			bimg_writer_stats(d.biw, &tot.records, &tot.image_bytes);
		}
	} else if (btk_error_kind(ret) == BTK_ERR_CANCELLED) {
		msg_error("cancelled");
	} else if (d.bw && btk_writer_error(d.bw)[0] && strcmp(btk_writer_error(d.bw), "unknown error")) {
		msg_error("%s", btk_writer_error(d.bw));
	} else if (!d.reported) {
		msg_errno(ret, "dump failed%s%s", btk_error_msg()[0] ? ": " : "", btk_error_msg());
	}
	progress_finish(d.prog);
	d.prog = NULL;
	if (!ret && fd != 1 && fsync(fd) && errno != EINVAL) {
		ret = -errno;
		msg_errno(ret, "cannot flush %s", a.out);
	}
	if (!ret) {
		char b1[SIZE_BUF_LEN], b2[SIZE_BUF_LEN], b3[SIZE_BUF_LEN];
		msg_info("%llu tree blocks (%s)%s%s, image %s%s", (unsigned long long)d.blocks,
			 size_format(d.tree_bytes, b1, sizeof(b1), SIZE_HUMAN), d.data_bytes ? ", data " : "",
			 d.data_bytes ? size_format(d.data_bytes, b2, sizeof(b2), SIZE_HUMAN) : "",
			 size_format(tot.image_bytes, b3, sizeof(b3), SIZE_HUMAN),
			 d.bad ? " (some blocks were unreadable: see the warnings)" : "");
		if (strcmp(a.out, "-"))
			cli_unregister_tempfile(a.out);
	}
out:
	progress_finish(d.prog);
	if (d.bw)
		btk_writer_free(d.bw);
	if (d.biw)
		bimg_writer_free(d.biw);
	if (fd > 1)
		close(fd);
	if (d.san)
		sanitizer_free(d.san);
	for (unsigned i = 0; i < BTRFS_MAX_LEVEL; i++)
		free(d.pend[i].data);
	free(d.scratch);
	free(devs);
	ebitmap_destroy(d.visited);
	fs_close(d.fs);
	return ret ? 1 : 0;
}
