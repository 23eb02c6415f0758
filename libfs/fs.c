// SPDX-License-Identifier: LGPL-2.1-or-later
/* Opening and closing a filesystem: devices, superblock, chunk map, roots. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uuid/uuid.h>

#include <btk/block.h>
#include <btk/block_salvage.h>
#include <btk/csum.h>
#include "libfs/devscan.h"
#include <btk/features.h>
#include "libfs/mounted.h"
#include <btk/item_check.h>
#include <btk/target.h>
#include <btk/super.h>
#include <btk/tree.h>
#include <btk/undo.h>
#include <btk/volumes.h>
#include <btk/wlog.h>
#include "libfs/volumes_internal.h"

void fs_open_options_init(struct fs_open_options *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->super_mirror = -1;
	opts->scan_devices = true;
	opts->allow_missing = true;
}

static void uuid_str(const uint8_t *uuid, char out[37])
{
	uuid_unparse_lower(uuid, out);
}

/* Say which superblock copies were bad when the one in use is not the primary,
 * or when the primary is damaged but a newer backup won anyway. A zoned
 * filesystem (sb) keeps its copies in log zones: the fixed offsets hold none. */
static void note_super_copies(struct fs_info *fs, const char *path, int chosen,
			      const struct super_copy *copies, const uint8_t *sb)
{
	bool zoned = super_incompat_flags(sb) & BTRFS_FEATURE_INCOMPAT_ZONED;

	for (int i = 0; i < BTRFS_SUPER_MIRROR_MAX; i++) {
		if (copies[i].status == 0 || copies[i].status == -ENXIO || (zoned && i > 0))
			continue;
		fs_note(fs, FS_NOTE_WARNING, "%s: superblock copy %d (at %llu) is invalid: %s", path,
			i, (unsigned long long)copies[i].offset, copies[i].why);
	}
	if (chosen != 0)
		fs_note(fs, FS_NOTE_WARNING, "%s: using superblock copy %d (generation %llu)", path, chosen,
			(unsigned long long)copies[chosen].generation);
}

static struct fs_device *fs_add_device(struct fs_info *fs, uint64_t devid, const uint8_t *uuid)
{
	struct fs_device *v = realloc(fs->devices, (fs->num_devices + 1) * sizeof(*v));

	if (!v)
		return NULL;
	fs->devices = v;
	v = &fs->devices[fs->num_devices++];
	memset(v, 0, sizeof(*v));
	v->devid = devid;
	memcpy(v->uuid, uuid, BTRFS_UUID_SIZE);
	return v;
}

static struct fs_device *fs_device_by_devid(struct fs_info *fs, uint64_t devid)
{
	for (unsigned i = 0; i < fs->num_devices; i++)
		if (fs->devices[i].devid == devid)
			return &fs->devices[i];
	return NULL;
}

/* Stack the write log, then the undo recorder, over an accepted member of a
 * writable open (the log nearest the device: it records what reaches the
 * disk). sb is the member's superblock. On error io is closed. */
static int fs_wrap_member_io(struct fs_info *fs, struct io_dev **io, const char *path,
			     const struct fs_open_options *opts, const uint8_t *sb,
			     const struct super_copy *copies)
{
	const char *log = opts->write_log_path;
	const uint8_t *di = super_dev_item_ptr(sb);
	struct io_dev *wrapped;
	uint64_t newest = 0;
	int ret = 0;

	if (!fs->writable)
		return 0;
	if (log && *log) {
		if (!fs->wlog && (ret = wlog_create(log, &fs->wlog)))
			ret = fs_error(fs, ret, "cannot open the write log %s: %s", log, strerror(-ret));
		else if ((ret = wlog_add_device(fs->wlog, *io, &wrapped)))
			ret = fs_error(fs, ret, "%s: cannot log its writes: %s", path, strerror(-ret));
		else
			*io = wrapped;
	}
	if (!ret && opts->undo_path) {
		/* "before" is the newest generation on disk, whichever copy is used */
		for (int i = 0; i < BTRFS_SUPER_MIRROR_MAX; i++)
			if (copies[i].status == 0 && copies[i].generation > newest)
				newest = copies[i].generation;
		if (!fs->undo && (ret = undo_create(opts->undo_path, super_fsid_ptr(sb), newest, &fs->undo)))
			ret = ret == -EEXIST
				? fs_error(fs, ret, "undo file %s already exists: move it away or choose "
					   "another name", opts->undo_path)
				: fs_error(fs, ret, "cannot create the undo file %s: %s", opts->undo_path,
					   strerror(-ret));
		else if ((ret = undo_add_device(fs->undo, dev_item_devid(di), dev_item_uuid_ptr(di), *io,
						&wrapped)))
			ret = fs_error(fs, ret, "%s: cannot record its old bytes: %s", path, strerror(-ret));
		else
			*io = wrapped;
	}
	if (ret)
		io_close(*io);
	return ret;
}

static bool uuid_is_zero(const uint8_t *u)
{
	static const uint8_t zero[BTRFS_UUID_SIZE];

	return memcmp(u, zero, BTRFS_UUID_SIZE) == 0;
}

/* The fsids a superblock may go by: its fsid, its metadata fsid, and during
 * an interrupted fsid change (btk-tune) the one its metadata_uuid field
 * records. */
static unsigned super_fsid_names(const uint8_t *sb, const uint8_t *out[3])
{
	unsigned n = 0;

	out[n++] = super_fsid_ptr(sb);
	out[n++] = super_metadata_fsid(sb);
	if ((super_flags(sb) & (BTRFS_SUPER_FLAG_CHANGING_FSID | BTRFS_SUPER_FLAG_CHANGING_FSID_V2)) &&
	    !uuid_is_zero(super_metadata_uuid_ptr(sb)))
		out[n++] = super_metadata_uuid_ptr(sb);
	return n;
}

/* Members share the fsid; with fs_open_options.fsid_change, devices caught
 * in the middle of an fsid change (one of them flagged) may share any name. */
static bool same_filesystem(const uint8_t *a, const uint8_t *b, bool fsid_change)
{
	const uint8_t *na[3], *nb[3];
	unsigned ca, cb;
	uint64_t changing = BTRFS_SUPER_FLAG_CHANGING_FSID | BTRFS_SUPER_FLAG_CHANGING_FSID_V2;

	if (memcmp(super_fsid_ptr(a), super_fsid_ptr(b), BTRFS_FSID_SIZE) == 0)
		return true;
	if (!fsid_change || !((super_flags(a) | super_flags(b)) & changing))
		return false;
	ca = super_fsid_names(a, na);
	cb = super_fsid_names(b, nb);
	for (unsigned i = 0; i < ca; i++)
		for (unsigned k = 0; k < cb; k++)
			if (memcmp(na[i], nb[k], BTRFS_FSID_SIZE) == 0)
				return true;
	return false;
}

static int fs_note_seed_fsid(struct fs_info *fs, const uint8_t *fsid)
{
	uint8_t (*v)[BTRFS_FSID_SIZE];

	if (fs_fsid_is_seed(fs, fsid))
		return 0;
	v = realloc(fs->seed_fsids, (fs->nseed_fsids + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	memcpy(v[fs->nseed_fsids++], fsid, BTRFS_FSID_SIZE);
	fs->seed_fsids = v;
	return 0;
}

/* A device of another filesystem belongs to a sprouted one when it is a seed
 * (SEEDING flag: *seed is set), or when it is the sprout and the devices so
 * far were its seeds (its superblock becomes the one in use). -EINVAL
 * otherwise. Whether the chunk tree really lists a seed is checked once it
 * is read (fs_check_seed_devices). */
static int fs_accept_seed_member(struct fs_info *fs, const uint8_t *sb, int chosen, bool *seed)
{
	int ret;

	if (super_flags(sb) & BTRFS_SUPER_FLAG_SEEDING) {
		*seed = true;
		return fs_note_seed_fsid(fs, super_metadata_fsid(sb));
	}
	if (!super_member_preferred(sb, fs->super) || fs->nseed_fsids)
		return -EINVAL;
	ret = fs_note_seed_fsid(fs, super_metadata_fsid(fs->super));
	if (ret)
		return ret;
	for (unsigned i = 0; i < fs->num_devices; i++)
		fs->devices[i].seed = true;
	memcpy(fs->super, sb, BTRFS_SUPER_INFO_SIZE);
	fs->super_mirror = chosen;
	return 0;
}

/* Whether a further member's superblock (of the same fsid) names the
 * filesystem instead of the one in use (super_member_preferred); never when
 * a copy was asked for (--super). */
static bool newer_member_super(const struct fs_info *fs, const uint8_t *sb, const struct fs_open_options *opts)
{
	return opts->super_mirror < 0 && super_member_preferred(sb, fs->super);
}

static int fs_check_member_size(struct fs_info *fs, struct io_dev *io, const char *path, const uint8_t *sb);

/* The feature gate (btk/features.h) on a member's superblock, before any
 * byte is written or an undo file made: unknown incompat bits open nothing, a
 * writable open refuses what btk must not write; a reader is told (once) what
 * it reads without fully understanding. */
static int fs_gate_features(struct fs_info *fs, const uint8_t *sb, const char *path, bool first)
{
	uint64_t incompat = super_incompat_flags(sb), compat_ro = super_compat_ro_flags(sb);
	uint64_t partly = features_partly_read(FEATURE_INCOMPAT, incompat);
	uint64_t unk_ro = features_unknown(FEATURE_COMPAT_RO, compat_ro);
	char why[400], names[256];
	int ret;

	ret = fs->writable ? features_check_write(incompat, compat_ro, why, sizeof(why))
			   : features_check_read(incompat, why, sizeof(why));
	if (ret)
		return fs_error_kind(fs, ret, BTK_ERR_UNSUPPORTED, "%s: %s", path, why);
	if (!first)
		return 0;
	if (unk_ro)
		fs_note(fs, FS_NOTE_WARNING, "unknown compat_ro feature flags 0x%llx: btk reads the filesystem "
			"but does not know what they add, and will not write it", (unsigned long long)unk_ro);
	if (partly)
		fs_note(fs, FS_NOTE_WARNING, "btk does not interpret %s: what depends on it is not checked "
			"and may be reported wrongly", features_list(FEATURE_INCOMPAT, partly, names, sizeof(names)));
	return 0;
}

/* Add an opened member device (taking ownership of io); the first member's
 * superblock becomes fs->super. */
static int fs_add_member_io(struct fs_info *fs, struct io_dev *io, const char *path,
			    const struct fs_open_options *opts, bool first)
{
	struct super_copy copies[BTRFS_SUPER_MIRROR_MAX];
	uint8_t sb[BTRFS_SUPER_INFO_SIZE];
	struct fs_device *dev;
	const uint8_t *di;
	bool seed = false;
	int chosen, ret;

	/* On errors io is closed only after the message is made: path may be io->path. */
	chosen = super_read_best(io, first ? opts->super_mirror : -1, sb, copies);
	if (chosen < 0) {
		int mirror = first && opts->super_mirror >= 0 ? opts->super_mirror : 0;
		if (copies[0].status && !strcmp(copies[0].why, "no btrfs magic") && mirror == 0 &&
		    copies[1].status && copies[2].status)
			ret = fs_error(fs, -EINVAL, "%s: not a btrfs filesystem (no valid superblock)", path);
		else if (copies[mirror].status == -ENXIO)
			ret = fs_error(fs, -EINVAL, "%s: superblock copy %d lies beyond the end of the device",
				       path, mirror);
		else
			ret = fs_error(fs, -EUCLEAN, "%s: no valid superblock (copy %d: %s)", path, mirror,
				       copies[mirror].why);
		io_close(io);
		return ret;
	}
	note_super_copies(fs, path, chosen, copies, sb);
	ret = fs_gate_features(fs, sb, path, first);
	if (ret) {
		io_close(io);
		return ret;
	}
	if (first) {
		memcpy(fs->super, sb, sizeof(sb));
		fs->super_mirror = chosen;
	} else if (!same_filesystem(fs->super, sb, opts->fsid_change) &&
		   (ret = fs_accept_seed_member(fs, sb, chosen, &seed)) != 0) {
		if (ret == -EINVAL)
			ret = fs_error(fs, ret, "%s belongs to another filesystem (different fsid)", path);
		io_close(io);
		return ret;
	} else if (!seed && newer_member_super(fs, sb, opts)) {
		/* like the kernel: the member with the newest superblock names the
		 * filesystem (a commit that crashed before every member's copy
		 * was written leaves the others a generation behind) */
		memcpy(fs->super, sb, sizeof(sb));
		fs->super_mirror = chosen;
	}
	di = super_dev_item_ptr(sb);
	if (fs_device_by_devid(fs, dev_item_devid(di))) {
		ret = fs_error(fs, -EINVAL, "%s: device id %llu given twice", path,
			       (unsigned long long)dev_item_devid(di));
		io_close(io);
		return ret;
	}
	/* a writer refuses a short device before anything (the undo file included) is written */
	if (fs->writable && !seed && (ret = fs_check_member_size(fs, io, path, sb)))
		return ret;
	ret = fs_wrap_member_io(fs, &io, path, opts, sb, copies);
	if (ret)
		return ret;
	dev = fs_add_device(fs, dev_item_devid(di), dev_item_uuid_ptr(di));
	if (!dev) {
		io_close(io);
		return -ENOMEM;
	}
	dev->io = io;
	dev->path = strdup(path);
	dev->total_bytes = dev_item_total_bytes(di);
	dev->seed = seed;
	if (io_size(io) < dev->total_bytes)
		fs_note(fs, FS_NOTE_WARNING,
			"%s is smaller (%llu bytes) than the filesystem expects (%llu bytes): truncated?",
			path, (unsigned long long)io_size(io), (unsigned long long)dev->total_bytes);
	return 0;
}

int fs_check_device_sizes(struct fs_info *fs)
{
	char why[600];

	for (unsigned i = 0; i < fs->num_devices; i++) {
		const struct fs_device *d = &fs->devices[i];
		int ret;
		if (!d->io || d->seed)
			continue;
		if ((ret = target_check_size(d->path, io_size(d->io), d->total_bytes, why, sizeof(why))))
			return fs_error(fs, ret, "%s; nothing was written", why);
	}
	return 0;
}

/* A writable member must hold the bytes its dev item says (closes io if not). */
static int fs_check_member_size(struct fs_info *fs, struct io_dev *io, const char *path, const uint8_t *sb)
{
	char why[600];
	int ret = target_check_size(path, io_size(io), dev_item_total_bytes(super_dev_item_ptr(sb)), why,
				    sizeof(why));

	if (!ret)
		return 0;
	ret = fs_error(fs, ret, "%s; nothing was written", why);
	io_close(io);
	return ret;
}

/* Open one member path (refusing a mounted one, and for a writer one in use) and add it. */
static int fs_add_member(struct fs_info *fs, const char *path, const struct fs_open_options *opts,
			 bool first)
{
	struct target_spec spec = { .flags = opts->writable ? 0 : TARGET_READ_ONLY };
	struct io_dev *io;
	char why[600];
	int ret;

	if ((ret = target_check(path, &spec, why, sizeof(why))))
		return fs_error(fs, ret, "%s", why);
	if (opts->writable && opts->batched_writes)
		ret = io_open_batched(&path, 1, IO_OPEN_EXCL, &io);
	else
		ret = io_open_file(path, IO_OPEN_EXCL | (opts->writable ? IO_OPEN_WRITE : 0), &io);
	if (ret == -EBUSY)
		return fs_error(fs, ret, "%s is in use (mounted or opened exclusively): unmount it first", path);
	if (ret)
		return fs_error(fs, ret, "cannot open %s: %s", path, strerror(-ret));
	return fs_add_member_io(fs, io, path, opts, first);
}

/* Add members found by fsid that were not given on the command line. */
static int fs_scan_members(struct fs_info *fs, const struct fs_open_options *opts)
{
	char **paths;
	unsigned n;
	int ret = devscan_find_members(fs->fsid, &paths, &n);

	if (ret)
		return 0; /* scanning is best effort: missing devices are reported later */
	for (unsigned i = 0; i < n; i++) {
		struct super_copy copies[BTRFS_SUPER_MIRROR_MAX];
		uint8_t sb[BTRFS_SUPER_INFO_SIZE];
		struct io_dev *io;
		bool known;

		if (io_open_file(paths[i], 0, &io))
			continue;
		ret = super_read_best(io, -1, sb, copies);
		io_close(io);
		if (ret < 0)
			continue;
		known = fs_device_by_devid(fs, dev_item_devid(super_dev_item_ptr(sb))) != NULL;
		if (!known && fs_add_member(fs, paths[i], opts, false) == 0)
			fs_note(fs, FS_NOTE_INFO, "found member device %s", paths[i]);
	}
	devscan_free(paths, n);
	return 0;
}

static void fs_load_super_fields(struct fs_info *fs)
{
	const uint8_t *sb = fs->super;

	fs->generation = super_generation(sb);
	fs->nodesize = super_nodesize(sb);
	fs->sectorsize = super_sectorsize(sb);
	fs->csum_type = super_csum_type(sb);
	fs->csum_size = (uint16_t)csum_size(fs->csum_type);
	fs->incompat = super_incompat_flags(sb);
	fs->compat_ro = super_compat_ro_flags(sb);
	memcpy(fs->fsid, super_fsid_ptr(sb), BTRFS_FSID_SIZE);
	memcpy(fs->metadata_uuid, super_metadata_fsid(sb), BTRFS_FSID_SIZE);
	/* an fsid rewrite under way: blocks carry the old fsid or the new one */
	fs->fsid_alt_valid = fs->fsid_change && (super_flags(sb) & BTRFS_SUPER_FLAG_CHANGING_FSID) &&
			     !(fs->incompat & BTRFS_FEATURE_INCOMPAT_METADATA_UUID) &&
			     !uuid_is_zero(super_metadata_uuid_ptr(sb));
	if (fs->fsid_alt_valid)
		memcpy(fs->fsid_alt, super_metadata_uuid_ptr(sb), BTRFS_FSID_SIZE);
	fs->chunk_root = (struct tree_root_ptr){ BTRFS_CHUNK_TREE_OBJECTID, super_chunk_root(sb),
						 super_chunk_root_generation(sb),
						 super_chunk_root_level(sb) };
	fs->tree_root = (struct tree_root_ptr){ BTRFS_ROOT_TREE_OBJECTID, super_root(sb),
						super_generation(sb), super_root_level(sb) };
}

static void fs_resolve_stripe_devices(struct fs_info *fs);

struct missing_scan {
	struct fs_info *fs;
	bool allow_missing;
	unsigned seeds_listed;  /* opened seed devices the chunk tree lists */
	bool foreign_seed;      /* an opened seed device it does not list */
};

/* An opened seed device must be one the chunk tree lists: same uuid, and a
 * dev item naming a seed fsid. */
static int check_seed_device(struct missing_scan *m, const struct fs_device *d, const uint8_t *data)
{
	if (memcmp(d->uuid, dev_item_uuid_ptr(data), BTRFS_UUID_SIZE) == 0 &&
	    fs_fsid_is_seed(m->fs, dev_item_fsid_ptr(data))) {
		m->seeds_listed++;
		return 0;
	}
	m->foreign_seed = true;
	return fs_error(m->fs, -EINVAL, "%s is a seed device, but not one of this filesystem", d->path);
}

static int note_missing_device(void *arg, const struct btrfs_key *key, const uint8_t *data, uint32_t size)
{
	struct missing_scan *m = arg;
	struct fs_info *fs = m->fs;
	const struct fs_device *known;
	struct item_view v = item_view_of(data, size);
	char u[37];

	if (!item_view_has_fixed(&v, key->type))
		return 0;
	if ((known = fs_device_by_devid(fs, key->offset)) != NULL)
		return known->seed && known->io ? check_seed_device(m, known, data) : 0;
	if (!fs_add_device(fs, key->offset, dev_item_uuid_ptr(data)))
		return -ENOMEM;
	/* the device array moved: stripes must not keep pointing into the old one
	 * while the iteration reads the next leaf of the chunk tree */
	fs_resolve_stripe_devices(fs);
	fs->devices[fs->num_devices - 1].total_bytes = dev_item_total_bytes(data);
	fs->missing_devices++;
	uuid_str(dev_item_uuid_ptr(data), u);
	fs_note(fs, m->allow_missing ? FS_NOTE_WARNING : FS_NOTE_ERROR,
		"device devid %llu uuid %s is missing", (unsigned long long)key->offset, u);
	return 0;
}

/* The fsids of seed filesystems whose devices the chunk tree lists but that
 * were not given: each is looked up with libblkid (fs_scan_seed_members). */
struct seed_fsid_list {
	struct fs_info *fs;
	uint8_t (*v)[BTRFS_FSID_SIZE];
	unsigned n;
};

static int note_seed_fsid_to_scan(void *arg, const struct btrfs_key *key, const uint8_t *data, uint32_t size)
{
	struct seed_fsid_list *l = arg;
	struct item_view item = item_view_of(data, size);
	const uint8_t *fsid = dev_item_fsid_ptr_in(&item);
	uint8_t (*v)[BTRFS_FSID_SIZE];

	if (!item_view_has_fixed(&item, key->type) || fs_device_by_devid(l->fs, key->offset) ||
	    memcmp(fsid, l->fs->metadata_uuid, BTRFS_FSID_SIZE) == 0)
		return 0;
	for (unsigned i = 0; i < l->n; i++)
		if (memcmp(l->v[i], fsid, BTRFS_FSID_SIZE) == 0)
			return 0;
	if (!(v = realloc(l->v, (l->n + 1) * sizeof(*v))))
		return -ENOMEM;
	memcpy(v[l->n++], fsid, BTRFS_FSID_SIZE);
	l->v = v;
	return 0;
}

/* Seed devices not given on the command line: find them by their fsid
 * (best effort, like fs_scan_members). */
static void fs_scan_seed_members(struct fs_info *fs, const struct fs_open_options *opts)
{
	struct seed_fsid_list l = { fs, NULL, 0 };

	if (volumes_each_dev_item(fs, note_seed_fsid_to_scan, &l) == 0) {
		for (unsigned i = 0; i < l.n; i++) {
			char **paths;
			unsigned n;

			if (devscan_find_members(l.v[i], &paths, &n))
				continue;
			for (unsigned k = 0; k < n; k++)
				if (fs_add_member(fs, paths[k], opts, false) == 0)
					fs_note(fs, FS_NOTE_INFO, "found seed device %s", paths[k]);
			devscan_free(paths, n);
		}
		fs_resolve_stripe_devices(fs);
	}
	btk_error_clear();
	free(l.v);
}

/* Record every device the chunk tree knows; those not opened are missing. */
static int fs_note_missing_devices(struct fs_info *fs, bool allow_missing)
{
	struct missing_scan m = { fs, allow_missing, 0, false };
	int ret = volumes_each_dev_item(fs, note_missing_device, &m);
	unsigned seeds = 0;

	if (m.foreign_seed)
		return ret;
	if (ret < 0 && ret != -ENOMEM && fs->tolerate_damage) {
		fs->damage_tolerated = true;
		ret = 0; /* volumes_read_chunk_tree noted the unreadable chunk tree */
	}
	if (ret < 0)
		return ret;
	for (unsigned i = 0; i < fs->num_devices; i++)
		seeds += fs->devices[i].seed && fs->devices[i].io;
	if (seeds > m.seeds_listed && !fs->damage_tolerated)
		return fs_error(fs, -EINVAL, "a seed device given is not one of this filesystem");
	if (fs->missing_devices && !allow_missing)
		return fs_error(fs, -ENODEV, "%u device(s) missing", fs->missing_devices);
	return 0;
}

/* Chunk stripes point at devices; the array moved while devices were added. */
static void fs_resolve_stripe_devices(struct fs_info *fs)
{
	for (size_t i = 0; i < fs->chunks->count; i++) {
		struct chunk *c = fs->chunks->chunks[i];
		for (unsigned s = 0; s < c->num_stripes; s++) {
			struct fs_device *d = fs_device_by_devid(fs, c->stripes[s].devid);
			c->stripes[s].dev = d && d->io ? d : NULL;
		}
	}
}

/* With tolerate_damage: a root item's level beyond the maximum, while its
 * block reads as the tree's root of the item's generation: the block's level
 * is used (true), the item left for the check to report and the repair to
 * set. */
static bool root_level_from_block(struct fs_info *fs, struct tree_root_ptr *root)
{
	struct block_expect ex = { .generation = root->generation, .level = -1, .owner = root->objectid };
	struct tree_block *b;
	bool salvaged;

	if (!fs->tolerate_damage || !root->bytenr)
		return false;
	if (block_read(fs, root->bytenr, &ex, &b)) {
		btk_error_clear();
		return false;
	}
	salvaged = b->salvaged;
	if (!salvaged) {
		fs_note(fs, FS_NOTE_WARNING, "root item of tree %llu: level %u; its root block %llu has level %u",
			(unsigned long long)root->objectid, root->level, (unsigned long long)root->bytenr,
			block_level(b));
		root->level = block_level(b);
	}
	block_put(fs, b);
	return !salvaged;
}

int fs_find_root(struct fs_info *fs, uint64_t objectid, struct tree_root_ptr *out)
{
	struct btrfs_key key = { objectid, BTRFS_ROOT_ITEM_KEY, 0 }, found;
	struct tree_path path;
	const uint8_t *data;
	uint32_t size;
	int ret;

	if (objectid == BTRFS_ROOT_TREE_OBJECTID) {
		*out = fs->tree_root;
		return 0;
	}
	if (objectid == BTRFS_CHUNK_TREE_OBJECTID) {
		*out = fs->chunk_root;
		return 0;
	}
	/* its item misdirected: the backup root's (fs_try_backup_extent_root) */
	if (objectid == BTRFS_EXTENT_TREE_OBJECTID && fs->extent_root_item.bytenr) {
		*out = fs->extent_root;
		return 0;
	}
	memset(out, 0, sizeof(*out));
	out->objectid = objectid;
	tree_path_init(&path);
	ret = tree_search(fs, &fs->tree_root, &key, &path);
	if (ret == 0) {
		tree_item_key(&path, &found);
		if (found.objectid != objectid || found.type != BTRFS_ROOT_ITEM_KEY) {
			ret = -ENOENT;
		} else {
			data = tree_item_data(&path, &size);
			if (!item_has_fixed(BTRFS_ROOT_ITEM_KEY, size)) {
				ret = fs_error(fs, -EUCLEAN, "root item of tree %llu too small (%u bytes)",
					       (unsigned long long)objectid, size);
			} else {
				out->bytenr = root_item_bytenr(data);
				out->generation = root_item_generation(data);
				out->level = root_item_level(data);
				if (out->level >= BTRFS_MAX_LEVEL && !root_level_from_block(fs, out))
					ret = fs_error(fs, -EUCLEAN, "root item of tree %llu: level %u",
						       (unsigned long long)objectid, out->level);
			}
		}
	} else if (ret == 1) {
		ret = -ENOENT;
	}
	tree_path_release(fs, &path);
	return ret;
}

/* Locate the well-known trees; a missing optional tree leaves bytenr 0. */
static int fs_load_roots(struct fs_info *fs)
{
	static const struct { uint64_t id; size_t offset; } roots[] = {
		{ BTRFS_EXTENT_TREE_OBJECTID, offsetof(struct fs_info, extent_root) },
		{ BTRFS_DEV_TREE_OBJECTID, offsetof(struct fs_info, dev_root) },
		{ BTRFS_FS_TREE_OBJECTID, offsetof(struct fs_info, fs_root) },
		{ BTRFS_CSUM_TREE_OBJECTID, offsetof(struct fs_info, csum_root) },
		{ BTRFS_QUOTA_TREE_OBJECTID, offsetof(struct fs_info, quota_root) },
		{ BTRFS_UUID_TREE_OBJECTID, offsetof(struct fs_info, uuid_root) },
		{ BTRFS_FREE_SPACE_TREE_OBJECTID, offsetof(struct fs_info, free_space_root) },
		{ BTRFS_BLOCK_GROUP_TREE_OBJECTID, offsetof(struct fs_info, block_group_root) },
		{ BTRFS_RAID_STRIPE_TREE_OBJECTID, offsetof(struct fs_info, raid_stripe_root) },
	};
	for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
		struct tree_root_ptr *dst = (struct tree_root_ptr *)((char *)fs + roots[i].offset);
		int ret = fs_find_root(fs, roots[i].id, dst);
		if (ret == -ENOENT) {
			dst->bytenr = 0;
			continue;
		}
		if (ret && ret != -ENOMEM && fs->tolerate_damage) {
			fs_note(fs, FS_NOTE_WARNING, "tree %llu left out: %s", (unsigned long long)roots[i].id,
				btk_error_msg());
			fs->damage_tolerated = true;
			dst->bytenr = 0;
			continue;
		}
		if (ret)
			return ret;
	}
	return 0;
}

/* With tolerate_damage: an extent tree root item whose block does not read
 * as the extent tree's root (another tree's block, zeroed space, a wrong
 * level) while the backup root of the current generation names one that
 * does: that one is used, and the item's pointer kept for the check to
 * report (the repair writes the item). Only the current generation's backup:
 * an older extent tree does not tell which blocks are in use now. */
static void fs_try_backup_extent_root(struct fs_info *fs)
{
	struct block_expect ex = { .generation = fs->extent_root.generation, .level = fs->extent_root.level,
				   .owner = BTRFS_EXTENT_TREE_OBJECTID };
	struct tree_block *b;

	if (!fs->extent_root.bytenr)
		return;
	if (block_read(fs, fs->extent_root.bytenr, &ex, &b) == 0) {
		bool salvaged = b->salvaged;
		block_put(fs, b);
		if (!salvaged)
			return;
	}
	btk_error_clear();
	for (int i = 0; i < BTRFS_NUM_BACKUP_ROOTS; i++) {
		const uint8_t *r = super_super_roots_ptr(fs->super) + (size_t)i * sizeof(struct btrfs_root_backup);
		struct tree_root_ptr p = { BTRFS_EXTENT_TREE_OBJECTID, backup_extent_root(r), backup_extent_root_gen(r),
					   backup_extent_root_level(r) };
		if (backup_tree_root_gen(r) != fs->generation || !p.bytenr || p.level >= BTRFS_MAX_LEVEL ||
		    p.generation > fs->generation)
			continue;
		ex = (struct block_expect){ .generation = p.generation, .level = p.level,
					    .owner = BTRFS_EXTENT_TREE_OBJECTID };
		if (block_read(fs, p.bytenr, &ex, &b)) {
			btk_error_clear();
			continue;
		}
		bool salvaged = b->salvaged;
		block_put(fs, b);
		if (salvaged)
			continue;
		fs_note(fs, FS_NOTE_WARNING, "extent tree root %llu does not read as its root: using the one backup "
			"root %d names (%llu)", (unsigned long long)fs->extent_root.bytenr, i,
			(unsigned long long)p.bytenr);
		fs->extent_root_item = fs->extent_root;
		fs->extent_root = p;
		return;
	}
}

/* A root tree root read back: its header names the root tree, or it names
 * another owner but holds root items (a block of another tree written in the
 * same transaction holds none): then it stays, and the check reports the
 * owner. */
static bool root_tree_block_usable(struct fs_info *fs, const struct tree_block *b)
{
	if (block_owner(b) == BTRFS_ROOT_TREE_OBJECTID)
		return true;
	for (unsigned i = 0; i < block_nritems(b); i++) {
		struct btrfs_key key;
		block_key(b, i, &key);
		if (key.type == BTRFS_ROOT_ITEM_KEY) {
			fs_note(fs, FS_NOTE_WARNING, "root tree root %llu has owner %llu",
				(unsigned long long)b->bytenr, (unsigned long long)block_owner(b));
			return true;
		}
	}
	fs_error(fs, -EUCLEAN, "tree block %llu: owner mismatch", (unsigned long long)b->bytenr);
	return false;
}

/* With tolerate_damage: when the superblock's root tree root cannot be read,
 * use the newest backup root whose root tree root can (what mounting with
 * rescue=usebackuproot does). -EUCLEAN when none does (the unreadable one
 * stays). */
static int fs_try_backup_tree_root(struct fs_info *fs)
{
	/* the owner is weighed apart: a wrong one alone is the check's to report */
	struct block_expect ex = { .generation = fs->tree_root.generation, .level = fs->tree_root.level };
	const uint8_t *bk[BTRFS_NUM_BACKUP_ROOTS];
	char why[BTK_ERR_MSG_MAX];
	struct tree_block *b;
	int slot[BTRFS_NUM_BACKUP_ROOTS], n = 0;

	if (block_read(fs, fs->tree_root.bytenr, &ex, &b) == 0) {
		bool usable = root_tree_block_usable(fs, b);
		block_put(fs, b);
		if (usable)
			return 0;
	}
	snprintf(why, sizeof(why), "%s", btk_error_msg());
	/* the usable slots, newest first */
	for (int i = 0; i < BTRFS_NUM_BACKUP_ROOTS; i++) {
		const uint8_t *r = super_super_roots_ptr(fs->super) + (size_t)i * sizeof(struct btrfs_root_backup);
		int k = n++;
		if (!backup_tree_root(r) || backup_tree_root(r) == fs->tree_root.bytenr ||
		    backup_tree_root_gen(r) > fs->generation || backup_tree_root_level(r) >= BTRFS_MAX_LEVEL) {
			n--;
			continue;
		}
		for (; k > 0 && backup_tree_root_gen(bk[k - 1]) < backup_tree_root_gen(r); k--) {
			bk[k] = bk[k - 1];
			slot[k] = slot[k - 1];
		}
		bk[k] = r;
		slot[k] = i;
	}
	for (int k = 0; k < n; k++) {
		ex = (struct block_expect){ .generation = backup_tree_root_gen(bk[k]),
					    .level = backup_tree_root_level(bk[k]), .owner = BTRFS_ROOT_TREE_OBJECTID };
		if (block_read(fs, backup_tree_root(bk[k]), &ex, &b))
			continue;
		block_put(fs, b);
		fs_note(fs, FS_NOTE_WARNING, "root tree root %llu unreadable (%s): using backup root %d "
			"(generation %llu)", (unsigned long long)fs->tree_root.bytenr, why, slot[k],
			(unsigned long long)backup_tree_root_gen(bk[k]));
		fs->tree_root = (struct tree_root_ptr){ BTRFS_ROOT_TREE_OBJECTID, backup_tree_root(bk[k]),
							backup_tree_root_gen(bk[k]), backup_tree_root_level(bk[k]) };
		fs->tree_root_backup = slot[k];
		fs->damage_tolerated = true;
		return 0;
	}
	fs_note(fs, FS_NOTE_WARNING, "root tree root %llu unreadable and no backup root reads: %s",
		(unsigned long long)fs->tree_root.bytenr, why);
	fs->damage_tolerated = true;
	return fs_error(fs, -EUCLEAN, "%s", why);
}

/* Everything after the members are added: chunk map, devices, roots. */
static int fs_open_steps(struct fs_info *fs, const struct fs_open_options *opts, bool may_scan)
{
	int ret;

	fs_load_super_fields(fs);
	if (may_scan && opts->scan_devices && fs->num_devices < super_num_devices(fs->super)) {
		ret = fs_scan_members(fs, opts);
		if (ret)
			return ret;
	}
	ret = block_cache_create(fs, opts->cache_bytes);
	if (ret)
		return ret;
	ret = volumes_read_sys_chunk_array(fs);
	if (ret)
		return ret;
	ret = volumes_read_chunk_tree(fs);
	if (ret)
		return fs_error(fs, ret, "cannot read the chunk tree: %s", btk_error_msg());
	if (may_scan && opts->scan_devices)
		fs_scan_seed_members(fs, opts);
	ret = fs_note_missing_devices(fs, opts->allow_missing);
	if (ret)
		return ret;
	fs_resolve_stripe_devices(fs);
	if (opts->chunk_only)
		return 0;
	/* no usable root tree: every other tree's root stays 0 */
	if (fs->tolerate_damage && fs_try_backup_tree_root(fs))
		return 0;
	ret = fs_load_roots(fs);
	if (ret)
		return fs_error(fs, ret, "cannot read the root tree: %s", btk_error_msg());
	if (fs->tolerate_damage)
		fs_try_backup_extent_root(fs);
	return 0;
}

/* Shared body of fs_open and fs_open_devices: exactly one of paths / ios is set. */
static int fs_open_common(const char *const *paths, struct io_dev **ios, unsigned n,
			  const struct fs_open_options *opts, struct fs_info **out)
{
	struct fs_open_options defaults;
	struct fs_info *fs;
	int ret = 0;
	unsigned i;

	*out = NULL;
	btk_error_clear();   /* what a failure below did not record is told by strerror */
	if (!opts) {
		fs_open_options_init(&defaults);
		opts = &defaults;
	}
	if (n == 0)
		return btk_error_set(-EINVAL, BTK_ERR_NONE, "no device given");
	fs = calloc(1, sizeof(*fs));
	if (!fs) {
		for (i = 0; ios && i < n; i++)
			io_close(ios[i]);
		return btk_error_set(-ENOMEM, BTK_ERR_NONE, "%s", strerror(ENOMEM));
	}
	fs->note = opts->note;
	fs->note_arg = opts->note_arg;
	fs->cancelled = opts->cancelled;
	fs->writable = opts->writable;
	fs->fsid_change = opts->fsid_change;
	fs->tolerate_damage = opts->tolerate_damage;
	fs->salvage = opts->tolerate_damage;
	fs->tree_root_backup = -1;
	fs->trans_dirty_bytes = opts->trans_dirty_bytes;
	fs->knobs = opts->knobs;
	for (i = 0; i < n && !ret; i++)
		ret = paths ? fs_add_member(fs, paths[i], opts, i == 0)
			    : fs_add_member_io(fs, ios[i], ios[i]->path, opts, i == 0);
	for (; ios && i < n; i++)
		io_close(ios[i]); /* not reached after an error: still ours to close */
	if (!ret)
		ret = fs_open_steps(fs, opts, paths != NULL);
	if (!ret && fs->writable && fs->nseed_fsids)
		ret = fs_error(fs, -EROFS, "the filesystem is sprouted from a seed device: btk does not write "
			       "to sprouted filesystems");
	if (ret) {
		/* the record is about this failure, with at least strerror's words */
		if (btk_last_error()->err != ret)
			fs_error(fs, ret, "%s", btk_error_msg()[0] ? btk_error_msg() : strerror(-ret));
		fs_close(fs);
		return ret;
	}
	*out = fs;
	return 0;
}

int fs_open(const char *const *paths, unsigned npaths, const struct fs_open_options *opts,
	    struct fs_info **out)
{
	return fs_open_common(paths, NULL, npaths, opts, out);
}

int fs_open_devices(struct io_dev **ios, unsigned n, const struct fs_open_options *opts,
		    struct fs_info **out)
{
	return fs_open_common(NULL, ios, n, opts, out);
}

int fs_create_from_super(const uint8_t *super, struct fs_info **out)
{
	struct fs_info *fs = calloc(1, sizeof(*fs));
	uint32_t ns = super_nodesize(super), ss = super_sectorsize(super);

	*out = NULL;
	if (!fs)
		return -ENOMEM;
	memcpy(fs->super, super, BTRFS_SUPER_INFO_SIZE);
	fs->tree_root_backup = -1;
	fs_load_super_fields(fs);
	fs->chunks = calloc(1, sizeof(*fs->chunks));
	if (!fs->chunks) {
		fs_close(fs);
		return -ENOMEM;
	}
	if (ns < 4096 || ns > 65536 || (ns & (ns - 1)) || ss < 4096 || ss > ns || (ss & (ss - 1)) ||
	    !fs->csum_size) {
		fs_error(fs, -EUCLEAN, "the superblock has an unusable geometry (nodesize %u, sectorsize "
			 "%u, checksum type %u)", ns, ss, fs->csum_type);
		fs_close(fs);
		return -EUCLEAN;
	}
	*out = fs;
	return 0;
}

int fs_attach_device(struct fs_info *fs, uint64_t devid, const uint8_t *uuid, struct io_dev *io,
		     uint64_t total_bytes)
{
	static const uint8_t zero[BTRFS_UUID_SIZE];
	struct fs_device *d;

	if (fs_device_by_devid(fs, devid)) {
		io_close(io);
		return fs_error(fs, -EEXIST, "device id %llu attached twice", (unsigned long long)devid);
	}
	d = fs_add_device(fs, devid, uuid ? uuid : zero);
	if (!d || !(d->path = strdup(io->path))) {
		io_close(io);
		return -ENOMEM;
	}
	d->io = io;
	d->total_bytes = total_bytes;
	fs_resolve_stripe_devices(fs);
	return 0;
}

int fs_finish_undo(struct fs_info *fs)
{
	int ret;

	if (!fs->undo)
		return 0;
	ret = undo_finish(fs->undo, 0);
	if (ret)
		return fs_error(fs, ret, "cannot finish the undo file: %s", strerror(-ret));
	return 0;
}

void fs_close(struct fs_info *fs)
{
	if (!fs)
		return;
	block_cache_destroy(fs);
	block_salvage_log_free(fs);
	chunk_map_free(fs->chunks);
	for (unsigned i = 0; i < fs->num_devices; i++) {
		io_close(fs->devices[i].io);
		free(fs->devices[i].path);
	}
	/* after the devices: closing them pushes their last writes */
	undo_close(fs->undo);
	wlog_close(fs->wlog);
	free(fs->devices);
	free(fs->seed_fsids);
	free(fs);
}
