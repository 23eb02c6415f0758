// SPDX-License-Identifier: GPL-2.0-only
/* --fsid: rewrite the fsid everywhere it is stored. Tree block headers carry
 * it, so every tree block is rewritten in place with a new checksum, on
 * every copy (copy-on-write would need twice the metadata space and still
 * rewrite everything). A crash must not leave a filesystem that nothing can
 * open, so the change follows a protocol that a second run recognizes and
 * finishes:
 *
 *   0. check   every tree block is read: one without a good copy stops the
 *              change before anything is written (it could never finish).
 *   1. mark    one commit: superblock flag CHANGING_FSID, and the new fsid
 *              in the superblock's metadata_uuid field (unused without the
 *              METADATA_UUID bit, which --fsid refuses). The fsid itself
 *              stays the old one. The kernel refuses a superblock with this
 *              flag, so the filesystem does not mount from here on.
 *   2. rewrite every tree block the extent tree lists (then the root and
 *              chunk trees, walked, for good measure): each copy whose
 *              header is not yet the new fsid is written again with it; in
 *              chunk tree leaves the device items' fsid changes too. Blocks
 *              carry either fsid meanwhile; btk opens such a filesystem
 *              with fs_open_options.fsid_change, which accepts both.
 *   3. switch  one commit: fsid = new (and the superblock's device item);
 *              the flag stays, the metadata_uuid field keeps the new fsid.
 *   4. done    one commit: flag cleared, metadata_uuid field zeroed.
 *
 * A second run reads every member's superblock: no flag anywhere -> a new
 * change; a flag, and some superblock whose fsid is already the new one ->
 * every block was rewritten: steps 3 and 4; otherwise steps 1 (again, for
 * devices a crash left unmarked) to 4. The new fsid comes from the
 * metadata_uuid field, so an interrupted change always finishes with the
 * fsid it started with. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uuid/uuid.h>

#include "common/cli.h"
#include "common/messages.h"
#include "common/sizes.h"
#include <btk/blockgroups.h>
#include <btk/csum.h>
#include <btk/ebitmap.h>
#include <btk/extent_scan.h>
#include <btk/item_check.h>
#include <btk/super.h>
#include <btk/tree.h>
#include <btk/volumes.h>
#include <btk/walk.h>
#include "tune/tune.h"

enum fsid_phase { PHASE_MARK, PHASE_REWRITE, PHASE_SWITCH };

struct rewrite {
	struct fs_info *fs;
	uint8_t old_fsid[16], new_fsid[16];
	struct ebitmap *done;     /* tree blocks handled */
	uint8_t *copy, *image;
	uint64_t blocks, copies_written;
	struct progress *progress;
	bool verify_only;         /* a pass that only checks every block has a good copy */
};

/* Metadata written with parity would need the parity rewritten too. */
static int check_profiles(struct fs_info *fs)
{
	for (size_t i = 0; i < fs_chunk_count(fs); i++) {
		const struct chunk *c = fs_chunk(fs, i);
		if ((c->type & (BTRFS_BLOCK_GROUP_METADATA | BTRFS_BLOCK_GROUP_SYSTEM)) &&
		    (c->type & (BTRFS_BLOCK_GROUP_RAID5 | BTRFS_BLOCK_GROUP_RAID6))) {
			msg_error("metadata chunk %llu is RAID5/6: rewriting its blocks in place would need "
				  "the parity rewritten as well, which btk does not do",
				  (unsigned long long)c->logical);
			return -EOPNOTSUPP;
		}
	}
	return 0;
}

struct fsid_pair {
	const uint8_t *old_fsid, *new_fsid;
};

static int check_device_item(void *arg, const struct btrfs_key *key, const uint8_t *data, uint32_t size)
{
	const struct fsid_pair *f = arg;
	struct item_view v = item_view_of(data, size);

	if (!item_view_has_fixed(&v, key->type))
		return 0;
	if (memcmp(dev_item_fsid_ptr(data), f->old_fsid, 16) && memcmp(dev_item_fsid_ptr(data), f->new_fsid, 16)) {
		msg_error("device %llu belongs to filesystem %s (a seed device): changing the fsid of a "
			  "sprouted filesystem is not supported", (unsigned long long)key->offset,
			  tune_uuid_str(dev_item_fsid_ptr(data)));
		return -EOPNOTSUPP;
	}
	return 0;
}

/* Device items of other fsids are seed devices: their blocks keep the seed's fsid. */
static int check_device_items(struct fs_info *fs, const uint8_t *old_fsid, const uint8_t *new_fsid)
{
	struct fsid_pair f = { old_fsid, new_fsid };
	int ret = volumes_each_dev_item(fs, check_device_item, &f);

	if (ret < 0 && ret != -EOPNOTSUPP)
		msg_errno(ret, "reading the device items: %s", fs_error_message(fs));
	return ret < 0 ? ret : 0;
}

/* The new image of a block: header fsid, and device items in chunk tree leaves. */
static void make_image(struct rewrite *r, uint8_t *img)
{
	struct fs_info *fs = r->fs;

	memcpy(header_fsid_ptr(img), r->new_fsid, 16);
	if (header_owner(img) == BTRFS_CHUNK_TREE_OBJECTID && header_level(img) == 0) {
		for (unsigned i = 0; i < header_nritems(img); i++) {
			struct btrfs_key key;
			struct item_view v = leaf_item_view(img, i);
			uint8_t *di = leaf_item_data(img, i);
			key_from_disk(&key, item_key_ptr(leaf_item(img, i)));
			if (key.objectid != BTRFS_DEV_ITEMS_OBJECTID || key.type != BTRFS_DEV_ITEM_KEY ||
			    !item_view_has_fixed(&v, key.type))
				continue;
			if (!memcmp(dev_item_fsid_ptr(di), r->old_fsid, 16))
				memcpy(dev_item_fsid_ptr(di), r->new_fsid, 16);
		}
	}
	csum_compute(fs->csum_type, img + BTRFS_CSUM_SIZE, fs->nodesize - BTRFS_CSUM_SIZE, header_csum_ptr(img));
}

/* Give every copy of the block at bytenr the new fsid. A copy that is bad
 * gets the good one's new image, like a scrub would repair it. With
 * verify_only, just make sure there is a good copy. */
static int rewrite_block(struct rewrite *r, uint64_t bytenr)
{
	struct fs_info *fs = r->fs;
	struct phys_copy copies[MAX_COPIES];
	uint64_t contig;
	int n, good = -1, ret;
	bool resumed;

	ret = ebitmap_test_and_set(r->done, bytenr, fs->nodesize);
	if (ret)
		return ret < 0 ? ret : 0;
	n = volumes_map(fs, bytenr, fs->nodesize, copies, &contig);
	if (n < 0)
		return n;
	if (contig < fs->nodesize)
		return fs_error(fs, -EUCLEAN, "tree block %llu crosses a stripe", (unsigned long long)bytenr);
	r->blocks++;
	progress_add(r->progress, fs->nodesize);
	for (int m = 0; m < n && good < 0; m++) {
		if (!copies[m].dev)
			return fs_error(fs, -ENODEV, "device %llu is missing", (unsigned long long)copies[m].devid);
		if (io_read(copies[m].dev->io, r->image, fs->nodesize, copies[m].physical) == 0 &&
		    block_verify(fs, bytenr, r->image, NULL) == BLOCK_OK)
			good = m;
	}
	if (good < 0)
		return fs_error(fs, -EUCLEAN, "tree block %llu: no good copy", (unsigned long long)bytenr);
	if (r->verify_only) {
		r->copies_written += (uint64_t)n;
		return 0;
	}
	/* a good copy with the new fsid: an interrupted run got here already */
	resumed = memcmp(header_fsid_ptr(r->image), r->new_fsid, 16) == 0;
	make_image(r, r->image);
	for (int m = 0; m < n; m++) {
		/* copies done before the interruption stay as they are */
		if (resumed && io_read(copies[m].dev->io, r->copy, fs->nodesize, copies[m].physical) == 0 &&
		    memcmp(r->copy, r->image, fs->nodesize) == 0)
			continue;
		ret = io_write(copies[m].dev->io, r->image, fs->nodesize, copies[m].physical);
		if (ret)
			return fs_error(fs, ret, "writing tree block %llu to device %llu: %s",
					(unsigned long long)bytenr, (unsigned long long)copies[m].devid,
					strerror(-ret));
		r->copies_written++;
	}
	return 0;
}

static int rewrite_extent(void *arg, const struct extent_rec *e)
{
	int ret;

	if (!e->tree_block)
		return 0;
	if ((ret = rewrite_block(arg, e->bytenr)))
		return ret;
	return cli_cancelled() ? -ECANCELED : 0;
}

/* Every tree block the extent tree knows, in logical order. */
static int rewrite_extent_tree_blocks(struct rewrite *r)
{
	int ret = extent_tree_each(r->fs, &r->fs->extent_root, 0, (uint64_t)-1, rewrite_extent, r);

	return ret < 0 ? ret : 0;
}

static int walk_visit(void *arg, const struct tree_block *b)
{
	struct rewrite *r = arg;

	return rewrite_block(r, b->bytenr);
}

/* The trees the superblock points at, walked: they must be complete even
 * if the extent tree missed a block. */
static int rewrite_super_trees(struct rewrite *r)
{
	struct tree_walk_ops ops = { walk_visit, NULL, r };
	int ret = tree_walk(r->fs, &r->fs->chunk_root, &ops, NULL);

	if (!ret)
		ret = tree_walk(r->fs, &r->fs->tree_root, &ops, NULL);
	return ret;
}

static uint64_t metadata_bytes(struct fs_info *fs)
{
	struct block_group_list bgs;
	uint64_t total = 0;

	if (fs_read_block_groups(fs, &bgs))
		return 0;
	for (size_t i = 0; i < bgs.count; i++)
		if (bgs.groups[i].flags & (BTRFS_BLOCK_GROUP_METADATA | BTRFS_BLOCK_GROUP_SYSTEM))
			total += bgs.groups[i].used;
	block_group_list_free(&bgs);
	return total;
}

/* One pass over every tree block: checking (verify_only) or rewriting. */
static int rewrite_all(struct rewrite *r, const struct tune_opts *o, bool verify_only)
{
	struct fs_info *fs = r->fs;
	char s1[SIZE_BUF_LEN];
	int ret;

	r->verify_only = verify_only;
	r->blocks = r->copies_written = 0;
	r->done = ebitmap_create(fs->nodesize);
	r->copy = malloc(fs->nodesize);
	r->image = malloc(fs->nodesize);
	if (!r->done || !r->copy || !r->image) {
		ret = -ENOMEM;
		goto out;
	}
	r->progress = progress_create(verify_only ? "reading tree blocks" : "rewriting tree blocks",
				      metadata_bytes(fs), o->progress);
	cli_enable_cancel();
	ret = rewrite_extent_tree_blocks(r);
	if (!ret)
		ret = rewrite_super_trees(r);
	progress_finish(r->progress);
	r->progress = NULL;
	if (ret == -ECANCELED && verify_only) {
		msg_error("cancelled: nothing was changed");
	} else if (ret == -ECANCELED) {
		msg_error("cancelled: the fsid change is unfinished; run 'btk-tune --fsid' again to finish it");
	} else if (ret && verify_only) {
		msg_errno(ret, "%s", fs_error_message(fs));
		msg_error("every tree block must be readable before its fsid is rewritten: nothing was changed "
			  "(check the filesystem first)");
	} else if (ret) {
		msg_errno(ret, "rewriting tree blocks: %s", fs_error_message(fs));
		msg_error("the fsid change is unfinished: fix the problem and run 'btk-tune --fsid' again");
	} else if (verify_only && o->dry_run) {
		printf("tree blocks: %llu (%s, %llu copies) would be rewritten, each has a good copy\n",
		       (unsigned long long)r->blocks, size_format(r->blocks * fs->nodesize, s1, sizeof(s1), SIZE_HUMAN),
		       (unsigned long long)r->copies_written);
	} else if (!verify_only) {
		printf("tree blocks: %llu rewritten (%llu copies written)\n", (unsigned long long)r->blocks,
		       (unsigned long long)r->copies_written);
	}
out:
	ebitmap_destroy(r->done);
	free(r->copy);
	free(r->image);
	r->done = NULL;
	r->copy = r->image = NULL;
	return ret;
}

struct super_edit {
	enum { EDIT_MARK, EDIT_SWITCH, EDIT_DONE } what;
	const uint8_t *new_fsid;
};

static int commit_super(struct fs_info *fs, const struct super_edit *e)
{
	struct trans *t;
	uint8_t *sb;
	int ret = trans_start(fs, &t);

	if (ret) {
		msg_errno(ret, "cannot start a transaction: %s", fs_error_message(fs));
		return ret;
	}
	sb = trans_super(t);
	switch (e->what) {
	case EDIT_MARK:
		super_set_flags(sb, super_flags(sb) | BTRFS_SUPER_FLAG_CHANGING_FSID);
		memcpy(super_metadata_uuid_ptr(sb), e->new_fsid, 16);
		break;
	case EDIT_SWITCH:
		super_set_flags(sb, super_flags(sb) | BTRFS_SUPER_FLAG_CHANGING_FSID);
		memcpy(super_metadata_uuid_ptr(sb), e->new_fsid, 16);
		memcpy(super_fsid_ptr(sb), e->new_fsid, 16);
		break;
	case EDIT_DONE:
		super_set_flags(sb, super_flags(sb) & ~BTRFS_SUPER_FLAG_CHANGING_FSID);
		memset(super_metadata_uuid_ptr(sb), 0, 16);
		break;
	}
	ret = trans_commit(t);
	if (ret)
		msg_errno(ret, "commit failed: %s", fs_error_message(fs));
	return ret;
}

/* Where an earlier run stopped, from every member's superblock. */
static int find_phase(struct fs_info *fs, const struct tune_opts *o, struct rewrite *r,
		      enum fsid_phase *phase)
{
	struct member_supers m;
	const uint8_t *flagged = NULL;
	bool switched = false;
	int ret = member_supers_read(fs, &m);

	if (ret) {
		msg_errno(ret, "%s", fs_error_message(fs));
		return ret;
	}
	for (unsigned i = 0; i < m.count; i++) {
		if (!(super_flags(m.sb[i]) & BTRFS_SUPER_FLAG_CHANGING_FSID))
			continue;
		if (flagged && memcmp(super_metadata_uuid_ptr(flagged), super_metadata_uuid_ptr(m.sb[i]), 16)) {
			msg_error("the devices disagree about the fsid being changed to (%s or %s)",
				  tune_uuid_str(super_metadata_uuid_ptr(flagged)),
				  tune_uuid_str(super_metadata_uuid_ptr(m.sb[i])));
			ret = -EUCLEAN;
			goto out;
		}
		flagged = m.sb[i];
	}
	if (!flagged) {
		*phase = PHASE_MARK;
		memcpy(r->old_fsid, fs->fsid, 16);
		if (o->fsid_given)
			memcpy(r->new_fsid, o->fsid_value, 16);
		else
			uuid_generate(r->new_fsid);
		goto out;
	}
	memcpy(r->new_fsid, super_metadata_uuid_ptr(flagged), 16);
	if (o->fsid_given && memcmp(o->fsid_value, r->new_fsid, 16)) {
		msg_error("an fsid change to %s was interrupted: finish it first with --fsid or --fsid=%s",
			  tune_uuid_str(r->new_fsid), tune_uuid_str(r->new_fsid));
		ret = -EINVAL;
		goto out;
	}
	memset(r->old_fsid, 0, 16);
	for (unsigned i = 0; i < m.count; i++) {
		if (!memcmp(super_fsid_ptr(m.sb[i]), r->new_fsid, 16))
			switched = true;
		else
			memcpy(r->old_fsid, super_fsid_ptr(m.sb[i]), 16);
	}
	*phase = switched ? PHASE_SWITCH : PHASE_REWRITE;
	msg_info("finishing an interrupted fsid change (%s)",
		 switched ? "every tree block was rewritten already" : "rewriting tree blocks");
out:
	member_supers_free(&m);
	return ret;
}

/* From now on new blocks get the new fsid and either is accepted. */
static void use_new_fsid(struct fs_info *fs, const struct rewrite *r)
{
	memcpy(fs->metadata_uuid, r->new_fsid, 16);
	memcpy(fs->fsid_alt, r->old_fsid, 16);
	fs->fsid_alt_valid = !tune_uuid_is_zero(r->old_fsid);
}

int tune_fsid(struct fs_info *fs, const struct tune_opts *o)
{
	struct rewrite r = { .fs = fs };
	enum fsid_phase phase;
	struct super_edit e = { EDIT_MARK, r.new_fsid };
	int ret;

	if (fs->incompat & BTRFS_FEATURE_INCOMPAT_METADATA_UUID) {
		msg_error("METADATA_UUID is set: tree blocks carry the metadata_uuid %s, not the fsid, so "
			  "there is nothing to rewrite. Use --metadata-uuid=UUID to change the fsid, or "
			  "--metadata-uuid=%s to return to the original fsid before rewriting it with --fsid",
			  tune_uuid_str(fs->metadata_uuid), tune_uuid_str(fs->metadata_uuid));
		return -EINVAL;
	}
	if ((ret = check_profiles(fs)) || (ret = find_phase(fs, o, &r, &phase)))
		return ret;
	if (phase == PHASE_MARK && !memcmp(r.old_fsid, r.new_fsid, 16)) {
		printf("fsid: %s already: nothing to change\n", tune_uuid_str(r.new_fsid));
		return 0;
	}
	ret = check_device_items(fs, phase == PHASE_SWITCH ? r.new_fsid : r.old_fsid, r.new_fsid);
	if (ret)
		return ret;
	printf("fsid: %s -> %s%s\n", tune_uuid_str(tune_uuid_is_zero(r.old_fsid) ? fs->fsid : r.old_fsid),
	       tune_uuid_str(r.new_fsid), o->dry_run ? " (dry run)" : "");
	if (o->dry_run)
		return phase == PHASE_SWITCH ? 0 : rewrite_all(&r, o, true);
	/* a block no copy of which can be read would leave the change stuck */
	if (phase == PHASE_MARK && (ret = rewrite_all(&r, o, true)))
		return ret;
	if (phase != PHASE_SWITCH) {
		ret = commit_super(fs, &e);
		if (ret)
			return ret;
		use_new_fsid(fs, &r);
		ret = rewrite_all(&r, o, false);
		if (ret)
			return ret;
		/* cached blocks still show the old fsid (device items!): read afresh */
		block_cache_destroy(fs);
		ret = block_cache_create(fs, 0);
		if (ret)
			return ret;
	} else {
		use_new_fsid(fs, &r);
	}
	e.what = EDIT_SWITCH;
	ret = commit_super(fs, &e);
	if (ret)
		return ret;
	memcpy(fs->fsid, r.new_fsid, 16);
	e.what = EDIT_DONE;
	ret = commit_super(fs, &e);
	if (ret)
		return ret;
	fs->fsid_alt_valid = false;
	return 0;
}
