// SPDX-License-Identifier: GPL-2.0-only
/* btk-image restore: read an image (native or btrfs-image, file or pipe),
 * collect the chunk tree first (records that arrive before it is complete
 * wait in a temporary file), then write every block at its physical place:
 * on every stripe of the original devices, or on one device with the chunk
 * and dev trees rewritten (restore_single.c). Each output's superblocks are
 * replaced by an in-progress mark first and written last, after a flush. */
#include <argp.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cli.h"
#include "common/messages.h"
#include "common/progress.h"
#include "image/restore.h"
#include <btk/block.h>
#include <btk/csum.h>
#include <btk/ebitmap.h>
#include <btk/features.h>
#include <btk/item_check.h>
#include <btk/super.h>
#include <btk/target.h>

#define RESTORE_MARK_MAGIC "_BTKRST_"

struct restore_args {
	enum restore_layout layout;
	char *in;
	char **outs;
	unsigned nouts;
	bool force;
	struct cli_common_options common;
};

enum { OPT_LAYOUT = 256 };

static const struct argp_option restore_options[] = {
	{ "layout", OPT_LAYOUT, "LAYOUT", 0, "original: onto as many devices as the source had, every block at "
	  "its original place on every stripe; single: onto one device, chunk and dev trees rewritten. "
	  "Default: original, or single when one output is given for a multi-device image", 0 },
	{ "force", 'f', NULL, 0, "overwrite outputs that hold a filesystem or another signature libblkid "
	  "knows (mounted outputs, outputs in use and the image itself are refused all the same)", 0 },
	{ 0 }
};

static error_t restore_parse(int key, char *arg, struct argp_state *state)
{
	struct restore_args *a = state->input;

	switch (key) {
	case ARGP_KEY_INIT:
		state->child_inputs[0] = &a->common;
		break;
	case 'f':
		a->force = true;
		break;
	case OPT_LAYOUT:
		if (!strcmp(arg, "original"))
			a->layout = LAYOUT_ORIGINAL;
		else if (!strcmp(arg, "single"))
			a->layout = LAYOUT_SINGLE;
		else
			argp_error(state, "invalid --layout '%s' (expected original or single)", arg);
		break;
	case ARGP_KEY_ARGS:
		if (state->argc - state->next < 2)
			argp_error(state, "need the image (a file or -) and at least one output");
		a->in = state->argv[state->next];
		a->outs = state->argv + state->next + 1;
		a->nouts = (unsigned)(state->argc - state->next - 1);
		break;
	case ARGP_KEY_NO_ARGS:
		argp_usage(state);
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

/* ---------------------------------------------------------------- superblocks */

static int take_super(struct restore_ctx *r, const struct img_record *rec)
{
	struct img_super *v;

	if (rec->len != BTRFS_SUPER_INFO_SIZE)
		return rs_error(r, "superblock record of %u bytes", rec->len);
	if (super_magic(rec->data) != BTRFS_MAGIC)
		return rs_error(r, "the image's superblock of device %llu has no btrfs magic",
				(unsigned long long)rec->logical);
	if (r->nsupers >= 4 * BTK_IMG_MAX_DEVICES)
		return rs_error(r, "too many superblock records");
	v = realloc(r->supers, (r->nsupers + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	r->supers = v;
	v += r->nsupers++;
	v->devid = rec->logical;
	v->copy = rec->copy;
	memcpy(v->data, rec->data, BTRFS_SUPER_INFO_SIZE);
	if (rec->copy == 0 && (!r->have_super || super_member_preferred(rec->data, r->super))) {
		memcpy(r->super, rec->data, BTRFS_SUPER_INFO_SIZE);
		r->have_super = true;
	}
	return 0;
}

/* The fs_info that carries the geometry, the chunk map and the outputs. */
static int setup_fs(struct restore_ctx *r)
{
	int ret = fs_create_from_super(r->super, &r->fs);

	return ret == -EUCLEAN ? rs_error(r, "the image: %s", btk_error_msg()) : ret;
}

/* ---------------------------------------------------------------- the chunk tree */

/* Every block the chunk tree needs is here: the root and each node's children. */
static bool chunk_tree_complete(struct restore_ctx *r)
{
	return held_find(&r->chunk_blocks, super_chunk_root(r->super)) && !r->chunk_blocks.missing;
}

static int cmp_dev(const void *a, const void *b)
{
	const struct src_device *x = a, *y = b;

	return x->devid < y->devid ? -1 : x->devid > y->devid;
}

/* Read the chunk and dev items out of the chunk tree's leaves. */
static int parse_chunk_tree(struct restore_ctx *r)
{
	for (size_t i = 0; i < r->chunk_blocks.n; i++) {
		const uint8_t *b = r->chunk_blocks.v[i].data;
		if (header_level(b) != 0)
			continue;
		for (unsigned s = 0; s < header_nritems(b); s++) {
			const uint8_t *item = leaf_item(b, s), *data = leaf_item_data(b, s);
			uint32_t size = item_size(item);
			struct btrfs_key key;
			int ret;

			key_from_disk(&key, item_key_ptr(item));
			if (key.type == BTRFS_CHUNK_ITEM_KEY) {
				if ((ret = chunk_map_add_item(r->fs, key.offset, data, size)))
					return rs_error(r, "chunk tree: %s", btk_error_msg());
			} else if (key.type == BTRFS_DEV_ITEM_KEY) {
				struct item_view iv = item_view_of(data, size);
				struct src_device *v;
				if (!ITEM_VIEW_STRUCT(&iv, 0, struct btrfs_dev_item))
					return rs_error(r, "chunk tree: dev item %llu too small",
							(unsigned long long)key.offset);
				v = realloc(r->devs, (r->ndevs + 1) * sizeof(*v));
				if (!v)
					return -ENOMEM;
				r->devs = v;
				memset(&v[r->ndevs], 0, sizeof(v[0]));
				v[r->ndevs].devid = dev_item_devid(data);
				memcpy(v[r->ndevs].item, data, sizeof(struct btrfs_dev_item));
				r->ndevs++;
			}
		}
	}
	if (!r->ndevs || !rs_chunk_count(r))
		return rs_error(r, "the image's chunk tree has no devices or no chunks");
	qsort(r->devs, r->ndevs, sizeof(*r->devs), cmp_dev);
	return 0;
}

/* ---------------------------------------------------------------- outputs */

/* The bytes output i must hold. */
static uint64_t output_size(const struct restore_ctx *r, unsigned i)
{
	return r->layout == LAYOUT_SINGLE ? r->new_size : dev_item_total_bytes(r->devs[i].item);
}

/* A block device output must hold size bytes (a regular file is extended). */
static int check_output_size(struct restore_ctx *r, const char *path, uint64_t size)
{
	struct stat st;
	uint64_t bytes = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC), ret = 0;

	if (fd < 0)
		return errno == ENOENT ? 0 : (rs_error(r, "cannot open %s: %s", path, strerror(errno)), -errno);
	if (fstat(fd, &st) == 0 && S_ISBLK(st.st_mode)) {
		if (ioctl(fd, BLKGETSIZE64, &bytes) < 0)
			ret = rs_error(r, "%s: cannot read its size: %s", path, strerror(errno));
		else if ((ret = target_check_size(path, bytes, size, r->err, sizeof(r->err))))
			snprintf(r->err + strlen(r->err), sizeof(r->err) - strlen(r->err), "; nothing was written");
	}
	close(fd);
	return ret;
}

/* Open (creating or extending a regular file to) size bytes. */
static int prepare_output(struct restore_ctx *r, const char *path, uint64_t size)
{
	struct stat st;
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644), ret = 0;

	if (fd < 0)
		return rs_error(r, "cannot open %s: %s", path, strerror(errno)), -errno;
	if (fstat(fd, &st) < 0) {
		ret = -errno;
	} else if (S_ISREG(st.st_mode)) {
		if ((uint64_t)st.st_size < size && ftruncate(fd, (off_t)size) < 0)
			ret = -errno;
	} else if (S_ISBLK(st.st_mode)) {
		uint64_t bytes = 0;
		if (ioctl(fd, BLKGETSIZE64, &bytes) < 0)
			ret = -errno;
		else if (bytes < size)
			ret = rs_error(r, "%s holds %llu bytes, the restore needs %llu", path,
				       (unsigned long long)bytes, (unsigned long long)size);
	} else {
		ret = rs_error(r, "%s is neither a regular file nor a block device", path);
	}
	close(fd);
	if (ret && !r->err[0])
		snprintf(r->err, sizeof(r->err), "cannot prepare %s: %s", path, strerror(-ret));
	return ret;
}

/* The in-progress mark: every superblock copy within size becomes a block
 * without the btrfs magic (RESTORE_MARK_MAGIC instead). */
static int write_marks(struct restore_ctx *r, struct io_dev *io, uint64_t size)
{
	uint8_t mark[BTRFS_SUPER_INFO_SIZE] = { 0 };
	int ret;

	memcpy(mark + offsetof(struct btrfs_super_block, magic), RESTORE_MARK_MAGIC, 8);
	memcpy(mark + offsetof(struct btrfs_super_block, fsid), r->fs->fsid, 16);
	for (int m = 0; m < BTRFS_SUPER_MIRROR_MAX; m++) {
		uint64_t off = btrfs_super_offset(m);
		if (off + BTRFS_SUPER_INFO_SIZE > size)
			break;
		if ((ret = io_write(io, mark, sizeof(mark), off)))
			return ret;
	}
	return io_flush(io);
}

/* Whether a device's superblock is a seed filesystem's (SEEDING, another fsid). */
static bool image_is_sprouted(const struct restore_ctx *r)
{
	for (size_t k = 0; k < r->nsupers; k++)
		if ((super_flags(r->supers[k].data) & BTRFS_SUPER_FLAG_SEEDING) &&
		    memcmp(super_fsid_ptr(r->supers[k].data), super_fsid_ptr(r->super), BTRFS_FSID_SIZE) != 0)
			return true;
	return false;
}

/* The feature gate (libfs/features.h): an image of a format btk does not know
 * is not restored; the single layout rewrites the chunk and dev trees, so it
 * also needs every feature to be one btk writes. */
static int restore_check_features(struct restore_ctx *r)
{
	uint64_t incompat = super_incompat_flags(r->super), compat_ro = super_compat_ro_flags(r->super);
	char why[400];

	if (features_check_read(incompat, why, sizeof(why)) ||
	    (r->layout == LAYOUT_SINGLE && features_check_write(incompat, compat_ro, why, sizeof(why))))
		return rs_error(r, "%s", why);
	return 0;
}

/* Every output through libfs' batched writer (direct writes unless
 * BTK_RESTORE_DIO=0), attached to the fs: the chunk map's stripes on each
 * devid point at its output from then on. */
static int open_batched(struct restore_ctx *r)
{
	const char *env = getenv("BTK_RESTORE_DIO");
	struct io_dev **ios = calloc(r->nouts, sizeof(*ios));
	int ret;

	if (!ios)
		return -ENOMEM;
	r->ios = ios;
	ret = io_open_batched((const char *const *)r->outs, r->nouts,
			      IO_OPEN_EXCL | (env && !strcmp(env, "0") ? IO_OPEN_NO_DIRECT : 0), ios);
	if (ret)
		return rs_error(r, "cannot open the outputs for writing: %s", strerror(-ret)), ret;
	for (unsigned i = 0; i < r->nouts; i++) {
		uint64_t size = output_size(r, i);
		ret = r->layout == LAYOUT_SINGLE
			? fs_attach_device(r->fs, 1, NULL, ios[i], size)
			: fs_attach_device(r->fs, r->devs[i].devid, dev_item_uuid_ptr(r->devs[i].item), ios[i], size);
		if (ret) {
			for (unsigned k = i + 1; k < r->nouts; k++) {
				io_close(ios[k]);
				ios[k] = NULL;
			}
			return rs_error(r, "%s: %s", r->outs[i], btk_error_text(ret)), ret;
		}
	}
	return 0;
}

static int open_outputs(struct restore_ctx *r)
{
	int ret;

	if (r->layout == LAYOUT_AUTO)
		r->layout = (r->nouts == 1 && r->ndevs > 1) ? LAYOUT_SINGLE : LAYOUT_ORIGINAL;
	if ((ret = restore_check_features(r)))
		return ret;
	if (r->layout == LAYOUT_SINGLE) {
		if (r->nouts != 1)
			return rs_error(r, "--layout single restores onto one output, %u given", r->nouts);
		if (image_is_sprouted(r))
			return rs_error(r, "the image is of a sprouted filesystem (its seed devices keep their own "
					"fsid): restore it onto %u outputs (--layout original)", r->ndevs);
		if ((ret = single_place_chunks(r)))
			return ret;
	} else if (r->nouts != r->ndevs) {
		return rs_error(r, "the image has %u device(s), %u output(s) given (use --layout single for one)",
				r->ndevs, r->nouts);
	}
	/* every output is big enough before the first byte goes to any */
	for (unsigned i = 0; i < r->nouts; i++)
		if ((ret = check_output_size(r, r->outs[i], output_size(r, i))))
			return ret;
	r->outputs_touched = true;
	for (unsigned i = 0; i < r->nouts; i++)
		if ((ret = prepare_output(r, r->outs[i], output_size(r, i))))
			return ret;
	if ((ret = open_batched(r)))
		return ret;
	for (unsigned i = 0; i < r->nouts; i++)
		if ((ret = write_marks(r, r->ios[i], output_size(r, i))))
			return rs_error(r, "writing to %s: %s", r->outs[i], strerror(-ret)), ret;
	return 0;
}

/* A record once the chunk map is known. */
static int place_record(struct restore_ctx *r, uint16_t type, uint64_t logical, const uint8_t *data, uint32_t len)
{
	if (!r->prog_by_image)
		progress_add(r->prog, len);
	if (type == IMG_REC_DATA) {
		r->data_bytes += len;
		return restore_write(r, logical, data, len);
	}
	r->tree_blocks++;
	if (r->layout == LAYOUT_SINGLE && len == r->fs->nodesize) {
		uint64_t owner = header_owner(data);
		if (owner == BTRFS_CHUNK_TREE_OBJECTID)
			return 0; /* an unreachable chunk-tree block: the rewritten tree replaces it */
		bool edited = owner == BTRFS_DEV_TREE_OBJECTID ||
			      ((owner == BTRFS_EXTENT_TREE_OBJECTID || owner == BTRFS_BLOCK_GROUP_TREE_OBJECTID) &&
			       header_level(data) == 0);
		/* blocks the single layout parses and rewrites must be sound first */
		if (edited) {
			enum block_problem p = block_verify(r->fs, logical, data, &BLOCK_EXPECT_ANY);
			if (p != BLOCK_OK)
				return rs_error(r, "tree block %llu in the image is bad: %s", (unsigned long long)logical,
						block_problem_name(p));
		}
		if (owner == BTRFS_DEV_TREE_OBJECTID)
			return held_add(&r->dev_blocks, logical, data, len);
		if (edited) {
			uint8_t *copy = malloc(len);
			int ret;
			if (!copy)
				return -ENOMEM;
			memcpy(copy, data, len);
			ret = single_patch_block_groups(r, copy);
			if (ret >= 0)
				ret = restore_write(r, logical, copy, len);
			free(copy);
			return ret;
		}
	}
	return restore_write(r, logical, data, len);
}

static int spill_record(struct restore_ctx *r, const struct img_record *rec)
{
	if (!r->spill && !(r->spill = tmpfile()))
		return rs_error(r, "cannot create a temporary file: %s", strerror(errno)), -errno;
	if (r->nsp == r->spcap) {
		size_t cap = r->spcap ? r->spcap * 2 : 1024;
		struct spilled *v = realloc(r->sp, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		r->sp = v;
		r->spcap = cap;
	}
	if (fwrite(rec->data, 1, rec->len, r->spill) != rec->len)
		return rs_error(r, "writing the temporary file: %s", strerror(errno)), -EIO;
	r->sp[r->nsp++] = (struct spilled){ rec->logical, r->spill_off, rec->len, rec->type };
	r->spill_off += rec->len;
	return 0;
}

static int replay_spill(struct restore_ctx *r)
{
	uint8_t *buf;
	int ret = 0;

	if (!r->nsp)
		return 0;
	if (fflush(r->spill))
		return rs_error(r, "writing the temporary file: %s", strerror(errno)), -EIO;
	buf = malloc(BTK_IMG_FRAME_RAW_MAX);
	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < r->nsp && !ret; i++) {
		if (fseeko(r->spill, (off_t)r->sp[i].offset, SEEK_SET) ||
		    fread(buf, 1, r->sp[i].len, r->spill) != r->sp[i].len)
			ret = rs_error(r, "reading the temporary file: %s", ferror(r->spill) ? strerror(errno) : "short");
		else
			ret = place_record(r, r->sp[i].type, r->sp[i].logical, buf, r->sp[i].len);
	}
	free(buf);
	fclose(r->spill);
	r->spill = NULL;
	r->nsp = 0;
	return ret;
}

/* The chunk tree is complete: map, open the outputs, write what waited. */
static int chunks_ready(struct restore_ctx *r)
{
	int ret;

	if ((ret = parse_chunk_tree(r)) || (ret = open_outputs(r)))
		return ret;
	r->chunks_complete = true;
	if (r->layout == LAYOUT_ORIGINAL)
		for (size_t i = 0; i < r->chunk_blocks.n; i++)
			if ((ret = place_record(r, IMG_REC_TREE, r->chunk_blocks.v[i].bytenr, r->chunk_blocks.v[i].data,
						r->fs->nodesize)))
				return ret;
	return replay_spill(r);
}

static int take_record(struct restore_ctx *r, const struct img_record *rec)
{
	int ret;

	if (rec->type == IMG_REC_SUPER) {
		if ((ret = take_super(r, rec)))
			return ret;
		if (!r->fs && (ret = setup_fs(r)))
			return ret;
		return 0;
	}
	if (r->chunks_complete)
		return place_record(r, rec->type, rec->logical, rec->data, rec->len);
	if (rec->type == IMG_REC_TREE && r->fs && rec->len == r->fs->nodesize &&
	    header_owner(rec->data) == BTRFS_CHUNK_TREE_OBJECTID) {
		enum block_problem p = block_verify(r->fs, rec->logical, rec->data, &BLOCK_EXPECT_ANY);
		if (p != BLOCK_OK)
			return rs_error(r, "chunk tree block %llu in the image is bad: %s",
					(unsigned long long)rec->logical, block_problem_name(p));
		if ((ret = held_add(&r->chunk_blocks, rec->logical, rec->data, rec->len)))
			return ret;
		if (chunk_tree_complete(r))
			return chunks_ready(r);
		return 0;
	}
	return spill_record(r, rec);
}

/* The image's copy of one device's superblock, or NULL. */
static const uint8_t *find_super(const struct restore_ctx *r, uint64_t devid, unsigned copy)
{
	for (size_t k = 0; k < r->nsupers; k++)
		if (r->supers[k].devid == devid && r->supers[k].copy == copy)
			return r->supers[k].data;
	return NULL;
}

/* Each device gets its own superblocks from the image byte for byte; a copy
 * the image does not hold is made from the device's primary copy (a seed
 * device's is not the filesystem's), and a device the image has no
 * superblock of (a btrfs-image dump holds one) gets the filesystem's with
 * its own dev item. */
static int finish_original(struct restore_ctx *r)
{
	int ret = parity_finish(r);

	if (ret)
		return ret;
	for (unsigned i = 0; i < r->nouts; i++) {
		const struct src_device *d = &r->devs[i];
		const uint8_t *verbatim[BTRFS_SUPER_MIRROR_MAX];
		for (unsigned m = 0; m < BTRFS_SUPER_MIRROR_MAX; m++)
			verbatim[m] = find_super(r, d->devid, m);
		ret = restore_write_supers(r, r->ios[i], verbatim[0] ? verbatim[0] : r->super,
					   verbatim[0] ? NULL : d->item, verbatim, output_size(r, i));
		if (ret)
			return rs_error(r, "writing the superblocks of %s: %s", r->outs[i], strerror(-ret)), ret;
	}
	return 0;
}

static void restore_free(struct restore_ctx *r)
{
	img_source_close(&r->src);
	held_free(&r->chunk_blocks);
	held_free(&r->dev_blocks);
	if (r->spill)
		fclose(r->spill);
	free(r->sp);
	free(r->supers);
	free(r->devs);
	free(r->place);
	ebitmap_destroy(r->parity_rows);
	fs_close(r->fs);
	free(r->ios);
}

static int check_targets(const struct restore_args *a);

int cmd_restore(int argc, char **argv)
{
	static const struct argp_child children[] = { { &cli_common_argp, 0, NULL, 0 }, { 0 } };
	static const struct argp argp = { restore_options, restore_parse, "IMAGE OUTPUT...",
		"Restore a metadata image (btk or btrfs-image format; - reads stdin) onto files or devices. "
		"Regular files are created or extended as needed. The outputs' superblocks are replaced by an "
		"in-progress mark (magic " RESTORE_MARK_MAGIC ") first and written last, so an interrupted "
		"restore is never taken for a filesystem. Outputs that are mounted, in use, the image, or "
		"(without -f) hold a filesystem or another signature are refused before anything is written "
		"(see TARGETS in btk-image(8)).", children, NULL, NULL };
	struct restore_args a = { 0 };
	struct restore_ctx r = { 0 };
	struct img_record rec;
	struct stat st;
	int ret;

	argp_parse(&argp, argc, argv, 0, NULL, &a);
	if (check_targets(&a))
		return 1;
	r.layout = a.layout;
	r.outs = a.outs;
	r.nouts = a.nouts;
	if ((ret = img_source_open(&r.src, a.in))) {
		msg_error("%s", img_source_error(&r.src));
		restore_free(&r);
		return 1;
	}
	cli_enable_cancel();
	r.prog = progress_create("restoring", 0, cli_progress_mode(&a.common));
	/* a btk image file: the share of it read gives a percentage and an ETA */
	if (r.src.format == IMG_FORMAT_BTK && strcmp(a.in, "-") && !stat(a.in, &st) && S_ISREG(st.st_mode)) {
		r.prog_by_image = true;
		progress_next_phase(r.prog, "restoring (image read)", (uint64_t)st.st_size);
	}
	while ((ret = img_source_next(&r.src, &rec)) == 1) {
		if (cli_cancelled()) {
			ret = -ECANCELED;
			snprintf(r.err, sizeof(r.err), "cancelled");
			break;
		}
		r.cur_frame = rec.frame; /* writes of rec's bytes may reference its frame */
		if (r.prog_by_image)
			progress_update(r.prog, rec.frame_offset);
		ret = take_record(&r, &rec);
		r.cur_frame = NULL;
		if (ret)
			break;
	}
	if (ret < 0 && !r.err[0])
		snprintf(r.err, sizeof(r.err), "%s", ret == -ENOMEM ? "out of memory" : img_source_error(&r.src));
	if (!ret && !r.have_super)
		ret = rs_error(&r, "the image has no superblock");
	if (!ret && !r.chunks_complete)
		ret = rs_error(&r, "the image does not hold the whole chunk tree");
	if (!ret)
		ret = r.layout == LAYOUT_SINGLE ? single_finish(&r) : finish_original(&r);
	if (!ret && r.prog_by_image)
		progress_update(r.prog, (uint64_t)st.st_size); /* read to its end */
	progress_finish(r.prog);
	if (ret) {
		msg_error("%s", r.err[0] ? r.err : strerror(-ret));
		if (r.outputs_touched)
			msg_error("the outputs are incomplete: their superblocks carry the in-progress mark "
				  RESTORE_MARK_MAGIC);
		else
			msg_error("nothing was written to the outputs");
	} else {
		msg_info("restored %llu tree blocks%s onto %u device(s), layout %s", (unsigned long long)r.tree_blocks,
			 r.data_bytes ? " and data" : "", r.nouts, r.layout == LAYOUT_SINGLE ? "single" : "original");
	}
	restore_free(&r);
	return ret ? 1 : 0;
}

/* Every output passes the target check (libfs/target.h) before the image is
 * read: not mounted or in use, not the image, not another output, and
 * (without --force) holding no filesystem or other signature. */
static int check_targets(const struct restore_args *a)
{
	const char *others[a->nouts + 1];
	struct target_spec spec = { .flags = TARGET_NEW_CONTENT | TARGET_MAY_CREATE | (a->force ? TARGET_FORCE : 0),
				    .others = others };
	char why[600];
	int ret;

	for (unsigned i = 0; i < a->nouts; i++) {
		spec.nothers = 0;
		if (strcmp(a->in, "-"))
			others[spec.nothers++] = a->in;
		for (unsigned j = 0; j < a->nouts; j++) {
			if (j == i)
				continue;
			if (!strcmp(a->outs[i], a->outs[j])) {
				msg_error("%s is given twice as an output; nothing was written", a->outs[i]);
				return -EINVAL;
			}
			others[spec.nothers++] = a->outs[j];
		}
		if ((ret = target_check(a->outs[i], &spec, why, sizeof(why)))) {
			msg_error("refusing to restore: %s%s; nothing was written", why,
				  ret == -EEXIST ? " (-f/--force overwrites it)" : "");
			return -EINVAL;
		}
	}
	return 0;
}
