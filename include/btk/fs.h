/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* struct fs_info: the one context every libfs call hangs off, and the calls
 * that open and close a filesystem. libfs never prints and never exits:
 * errors come back as negative errno with a typed record of why in the
 * calling thread's btk_last_error() (btk/error.h), and notes (a bad mirror, a fallback superblock) go to the caller's callback. */
#ifndef BTK_FS_H
#define BTK_FS_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <btk/error.h>
#include <btk/format.h>
#include <btk/io.h>
#include <btk/key.h>
#include <btk/recsort.h>

struct block_cache;
struct chunk_alloc_hints;
struct chunk_map;
struct undo_file;
struct wlog_writer;

enum fs_note_level { FS_NOTE_INFO, FS_NOTE_WARNING, FS_NOTE_ERROR };

/* One member device of the filesystem. */
struct fs_device {
	uint64_t devid;
	uint8_t uuid[BTRFS_UUID_SIZE];
	char *path;            /* NULL when the device is missing */
	struct io_dev *io;     /* NULL when missing */
	uint64_t total_bytes;  /* from the dev item of its superblock */
	/* A seed device of a sprouted filesystem: its superblock is the seed
	 * filesystem's (another fsid, read-only for btrfs). */
	bool seed;
};

/* A tree root as the superblock or a root item points at it. */
struct tree_root_ptr {
	uint64_t objectid;
	uint64_t bytenr;
	uint64_t generation;
	uint8_t level;
};

/* Knobs for tests and measurements, zero by default. libfs reads no
 * environment: the programs fill these (common/env_knobs.c, from $BTK_*). */
struct fs_test_knobs {
	/* the block groups a transaction finds count as full, so its first
	 * tree block needs a new chunk ($BTK_TEST_ALLOC_FULL) */
	bool alloc_full;
	/* extent reference changes a transaction queues in memory before it
	 * applies or spills them; 0: derived from the dirty budget ($BTK_TRANS_REFS_MAX) */
	size_t trans_refs_max;
	/* a note (FS_NOTE_INFO) of each commit's memory figures ($BTK_TRANS_STATS) */
	bool trans_stats;
	/* the sorters' spill options ($BTK_RECSORT_RUN_RECORDS, $BTK_RECSORT_RAW) */
	struct recsort_options recsort;
};

struct fs_open_options {
	int super_mirror;          /* -1: newest valid copy; 0..2: that copy */
	bool writable;             /* open devices read-write */
	bool scan_devices;         /* find other members by fsid with libblkid */
	bool allow_missing;        /* open even with missing devices (degraded) */
	bool chunk_only;           /* stop after the chunk tree (no root tree) */
	uint64_t cache_bytes;      /* tree-block cache budget; 0 = default (32 MiB) */
	/* Dirty tree blocks a transaction keeps in memory before it writes the
	 * ones no path holds to their (new, unreferenced) places ahead of the
	 * commit; 0 = default (256 MiB). */
	uint64_t trans_dirty_bytes;
	void (*note)(void *arg, enum fs_note_level level, const char *msg);
	void *note_arg;
	/* Asked at the start of every commit: true refuses it (the transaction
	 * is dropped whole, -ECANCELED), so an interrupted writer leaves the
	 * filesystem as the last whole commit left it. NULL: never. */
	bool (*cancelled)(void);
	/* Writable opens only. undo_path: save the old bytes of everything the
	 * operation overwrites there (btk/undo.h; the file must not exist).
	 * write_log_path: log every write and flush (btk/wlog.h; appended to
	 * if it exists), for crash tests. */
	const char *undo_path;
	const char *write_log_path;
	/* Writable opens of paths: each member's writes go through the batched
	 * backend (libfs/io_batch.c: queued, written sorted and in bulk, with
	 * O_DIRECT where the device takes it), the writer btk-image restore
	 * uses; the write log and the undo recorder stack on it the same way. */
	bool batched_writes;
	/* For btk-tune's fsid changes (doc/btk-tune.8, "FSID CHANGE"): open a
	 * filesystem whose fsid or metadata_uuid change was interrupted. Member
	 * devices may then carry either the old or the new fsid, and while the
	 * superblock has CHANGING_FSID set, tree blocks may carry the fsid or
	 * the one its metadata_uuid field records (fs_info.fsid_alt). Writing
	 * (trans_start) is refused on such a filesystem without this option. */
	bool fsid_change;
	/* For btk-check, which reports the damage itself: open despite it. A
	 * chunk item that does not validate is left out of the chunk map, an
	 * unreadable chunk tree leaves the chunks read so far, a root item that
	 * cannot be used leaves that tree's root 0, and an unreadable root tree
	 * root is replaced by the newest backup root that reads
	 * (fs_info.tree_root_backup). */
	bool tolerate_damage;
	struct fs_test_knobs knobs;
};

/* What transactions kept in memory (libfs/trans_writeback.c). */
struct trans_mem_stats {
	uint64_t dirty_budget;      /* bytes, of the last transaction */
	uint64_t peak_dirty_blocks; /* most dirty blocks one transaction held at once */
	uint64_t written_early;     /* blocks written before their commit */
	uint64_t adopted_again;     /* ... that the transaction changed again later */
	uint64_t peak_queued_refs;  /* most extent reference changes queued in memory at once */
	uint64_t refs_limit;        /* queued changes past which they are applied or spilled (last) */
	uint64_t refs_early_runs;   /* times a queue was applied before its commit ... */
	uint64_t refs_applied_early;/* ... and the changes it held */
	uint64_t refs_spilled;      /* changes queued on disk (libfs/recsort.c) */
};

/* The members of struct fs_info that only libfs names (doc/design.md, "The
 * libfs API boundary"): everywhere else they go by another name, so callers
 * cannot reach them and read them through the functions below. The layout
 * is the same either way. libfs, its tests and the few program files
 * scripts/api-check allows are built with -DBTK_LIBFS_PRIVATE. */
#ifdef BTK_LIBFS_PRIVATE
#define FS_PRIVATE(name) name
#else
#define FS_PRIVATE(name) libfs_private_##name
#endif

struct fs_info {
	/* superblock in use (a verified copy) and where it came from */
	uint8_t FS_PRIVATE(super)[BTRFS_SUPER_INFO_SIZE]; /* fs_super() */
	int super_mirror;
	uint64_t generation;
	uint32_t nodesize;
	uint32_t sectorsize;
	uint16_t csum_type;
	uint16_t csum_size;
	uint64_t incompat;
	uint64_t compat_ro;
	uint8_t fsid[BTRFS_FSID_SIZE];          /* super fsid */
	uint8_t metadata_uuid[BTRFS_FSID_SIZE]; /* what tree blocks carry */
	/* Also accepted in tree blocks while an fsid rewrite is under way
	 * (fs_open_options.fsid_change): the other of old and new fsid. */
	uint8_t fsid_alt[BTRFS_FSID_SIZE];
	bool fsid_alt_valid;
	bool fsid_change;                       /* opened with that option */
	/* A sprouted filesystem: the fsids its seed devices go by. Tree blocks
	 * written before the sprout carry one of them. */
	uint8_t (*seed_fsids)[BTRFS_FSID_SIZE];
	unsigned nseed_fsids;

	struct fs_device *FS_PRIVATE(devices); /* fs_device() */
	unsigned FS_PRIVATE(num_devices);       /* fs_num_devices() */
	unsigned missing_devices;

	struct chunk_map *FS_PRIVATE(chunks);  /* fs_chunk(), fs_chunk_lookup() */
	struct block_cache *FS_PRIVATE(cache);

	struct tree_root_ptr chunk_root;
	struct tree_root_ptr tree_root;
	/* fs_open_options.tolerate_damage: the backup root slot whose root tree
	 * is in use because the superblock's could not be read, or -1 */
	int tree_root_backup;
	bool tolerate_damage;
	/* tolerate_damage left something out (a chunk, a tree, the newest root
	 * tree): what is mapped is not the whole filesystem, so trans_start
	 * refuses to write */
	bool damage_tolerated;
	/* from the root tree (bytenr 0 when the tree does not exist) */
	struct tree_root_ptr extent_root, dev_root, fs_root, csum_root, quota_root,
		uuid_root, free_space_root, block_group_root, raid_stripe_root;
	/* tolerate_damage: the extent tree's root item names a block that does not
	 * read as its root, and the backup root of the current generation names
	 * one that does: extent_root is that one, extent_root_item what the item
	 * says (bytenr 0: the item is used) */
	struct tree_root_ptr extent_root_item;

	bool writable;
	void (*note)(void *arg, enum fs_note_level level, const char *msg);
	void *note_arg;
	bool (*FS_PRIVATE(cancelled))(void); /* fs_open_options.cancelled: fs_cancel_requested() */
	struct undo_file *undo;     /* with fs_open_options.undo_path */
	struct wlog_writer *wlog;   /* with a write log */
	uint64_t trans_dirty_bytes; /* fs_open_options.trans_dirty_bytes */
	struct fs_test_knobs knobs; /* fs_open_options.knobs */
	struct trans_mem_stats trans_stats; /* over every transaction so far */
	/* Bumped when the copies of mapped addresses change (chunk_map_set_stripes):
	 * blocks a transaction wrote early must be written again to the new set. */
	uint64_t chunk_map_epoch;
	/* Set by a conversion around its transaction (btk/chunk_edit.h): the
	 * profile and the device space off limits for chunks it allocates. */
	const struct chunk_alloc_hints *FS_PRIVATE(alloc_hints); /* fs_set_alloc_hints() */
	/* With tolerate_damage: blocks that verify but are laid out wrong are
	 * read as their salvaged view (btk/block_salvage.h), logged here. */
	bool FS_PRIVATE(salvage); /* fs_set_salvage() */
	struct block_salvage_log *salvage_log;
};

void fs_open_options_init(struct fs_open_options *opts);
/* Whether fsid is one of a sprouted filesystem's seed fsids. */
bool fs_fsid_is_seed(const struct fs_info *fs, const uint8_t *fsid);
/* Open a filesystem from the given member paths: superblock, devices, chunk
 * map, root tree. On error returns -errno, *out stays NULL and
 * btk_last_error() holds the reason (always a message, at least strerror). */
int fs_open(const char *const *paths, unsigned npaths, const struct fs_open_options *opts,
	    struct fs_info **out);
/* The same over already opened devices (memory buffers, write logs, ...);
 * the ios are owned by the filesystem from then on, even on error. No
 * mount check and no device scan are done. */
int fs_open_devices(struct io_dev **ios, unsigned n, const struct fs_open_options *opts,
		    struct fs_info **out);
void fs_close(struct fs_info *fs);
/* An fs_info for a filesystem known from its superblock alone (an image
 * being restored): geometry, fsids and tree roots of super, an empty chunk
 * map (chunk_map_add_item fills it), no device, no cache, nothing read.
 * fs_attach_device adds the devices; fs_close frees it all. -EUCLEAN with
 * the reason in btk_last_error() when the geometry is unusable. */
int fs_create_from_super(const uint8_t *super, struct fs_info **out);
/* Attach an opened device (taking io, closed on error) as member devid;
 * every chunk stripe on devid now maps to it. uuid may be NULL. */
int fs_attach_device(struct fs_info *fs, uint64_t devid, const uint8_t *uuid, struct io_dev *io,
		     uint64_t total_bytes);
/* Add a chunk item (from the chunk tree or the sys_chunk_array) to the
 * chunk map of an fs from fs_create_from_super (fs_open reads them itself).
 * Validates geometry; -EUCLEAN with a message on nonsense. */
int chunk_map_add_item(struct fs_info *fs, uint64_t logical, const uint8_t *item, uint32_t size);
/* Every opened (non-seed) device holds the bytes its dev item says: 0, or
 * -ENOSPC with the message in btk_last_error(). A writable open refuses such a
 * device itself; a reader that is about to reopen for writing asks first. */
int fs_check_device_sizes(struct fs_info *fs);
/* Seal the undo file after the operation's last successful commit: flushes
 * every device and records the generation now on disk, so btk-undo accepts
 * the file only while that generation is current. Without this call the
 * file stays unfinished (it still rolls back a failed or crashed run). 0
 * when there is no undo file; else 0 or -errno with btk_last_error() set. */
int fs_finish_undo(struct fs_info *fs);

/* Record an error on the calling thread (btk_last_error()), its kind taken
 * from err; returns err for tail calls. fs names the filesystem the failing
 * call was about (the record itself is per thread, not per fs). The message
 * may wrap the previous one: fs_error(fs, ret, "...: %s", btk_error_msg()). */
int fs_error(struct fs_info *fs, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The same with the kind given, where err alone is ambiguous (a checksum
 * mismatch and a corrupt block are both -EUCLEAN; a feature gate -EINVAL). */
int fs_error_kind(struct fs_info *fs, int err, enum btk_err_kind kind, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Pass a note to the caller's callback (or drop it). */
void fs_note(struct fs_info *fs, enum fs_note_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Look up a tree's root by objectid (well-known trees and subvolumes). */
int fs_find_root(struct fs_info *fs, uint64_t objectid, struct tree_root_ptr *out);

/* What programs read of the fields behind functions (libfs/fs_access.c):
 * the member devices (index 0 .. fs_num_devices()-1, missing ones included,
 * with a NULL path and io) and the superblock in use (read-only: a change
 * goes through a transaction). Errors: btk_last_error() (btk/error.h). */
unsigned fs_num_devices(const struct fs_info *fs);
const struct fs_device *fs_device(const struct fs_info *fs, unsigned i);
const uint8_t *fs_super(const struct fs_info *fs);
/* Whether the caller's fs_open_options.cancelled callback asks to stop now
 * (false without one): long loops outside libfs poll it between steps. */
bool fs_cancel_requested(const struct fs_info *fs);
/* Set the chunk-allocation hints a conversion passes around its transaction
 * (btk/chunk_edit.h; NULL: none); the pointer must outlive their use. */
void fs_set_alloc_hints(struct fs_info *fs, const struct chunk_alloc_hints *hints);
/* Read blocks that verify but are laid out wrong as their salvaged view (on)
 * or not at all (off); returns the previous setting, to put back. */
bool fs_set_salvage(struct fs_info *fs, bool on);

#endif
