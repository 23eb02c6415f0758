// SPDX-License-Identifier: GPL-2.0-only
/* Per-item checks of a subvolume tree: inode items, inode refs and extrefs,
 * dir items, dir indexes and xattrs, file extents. What needs the other end
 * of a name (the parent directory, the child inode) is emitted as join
 * records; what one inode's items decide is checked in fs_inode_finish. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check/inline_extent.h"
#include "check/phase_fs.h"
#include "check/repair_notes.h"
#include <btk/item_check.h>
#include <btk/csum.h>
#include <btk/names.h>

#define BTRFS_NAME_LEN 255

void fs_emit_link(struct fs_walk *w, struct recsort *rs, const struct link_rec *r)
{
	struct link_rec c = *r;
	int ret;

	if (w->err)
		return;
	c.lineage = w->lineage;
	c.seq = w->seq;
	if (w->mark_root) {   /* a record the delta's tree no longer has (snap_plan.h) */
		c.root = w->mark_root;
		c.flags |= LINK_F_GONE;
	}
	ret = 1;
	if (w->pending)
		ret = delta_links_hold(w->pending, rs == w->by_index ? 0 : rs == w->by_hash ? 1 : 2, &c);
	if (ret == 1)
		ret = recsort_add(rs, &c);
	if (ret)
		w->err = ret;
}

static void malformed(struct fs_walk *w, const struct btrfs_key *k, const char *what, uint32_t size)
{
	report_problem(w->ctx, PR_ITEM_MALFORMED, "root %" PRIu64 " item (%" PRIu64 " %u %" PRIu64 "): %s (%u bytes)",
		       w->root->objectid, k->objectid, k->type, k->offset, what, size);
}

void fs_item_inode(struct fs_walk *w, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct inode_state *s = &w->ino;
	/* the kernel's tree checker and btrfs check allow one past the superblock's
	 * generation (the transaction that was running): so does this */
	uint64_t gen_limit = w->ctx->fs->generation + 1;
	struct item_verdict vd;
	uint32_t mode;

	if (item_check_fs(w->ctx->fs, k, d, size, &vd) && vd.fault == ITEM_TOO_SMALL) {
		malformed(w, k, "inode item too small", size);
		return;
	}
	if (vd.fault == ITEM_BAD_KEY)
		malformed(w, k, "inode item key offset is not 0", size);
	w->inodes++;
	s->have_item = true;
	mode = inode_mode(d);
	s->mode = mode;
	s->nlink = inode_nlink(d);
	s->isize = inode_size(d);
	s->nbytes = inode_nbytes(d);
	s->flags = inode_flags(d);
	s->ftype = mode_to_ftype(mode);
	/* bits beyond the file type and permissions: the kernel refuses the leaf */
	if (s->ftype == BTRFS_FT_UNKNOWN || (mode & ~(uint32_t)(S_IFMT | 07777))) {
		report_problem(w->ctx, PR_INODE_MODE_INVALID, "root %" PRIu64 " inode %" PRIu64 ": mode 0%o",
			       w->root->objectid, k->objectid, mode);
		repair_note_inode_problem(w->ctx, PR_INODE_MODE_INVALID, w->root->objectid, k->objectid);
	}
	if (inode_generation(d) > gen_limit || inode_transid(d) > gen_limit) {
		report_problem(w->ctx, PR_INODE_GENERATION, "root %" PRIu64 " inode %" PRIu64 ": generation %" PRIu64
			       " transid %" PRIu64 ", filesystem generation %" PRIu64, w->root->objectid, k->objectid,
			       inode_generation(d), inode_transid(d), gen_limit - 1);
		repair_note_inode_problem(w->ctx, PR_INODE_GENERATION, w->root->objectid, k->objectid);
	}
	if (inode_flags(d) & ~INODE_KNOWN_FLAGS) {
		report_problem(w->ctx, PR_INODE_FLAGS_UNKNOWN, "root %" PRIu64 " inode %" PRIu64 ": flags 0x%" PRIx64,
			       w->root->objectid, k->objectid, inode_flags(d));
		repair_note_inode_problem(w->ctx, PR_INODE_FLAGS_UNKNOWN, w->root->objectid, k->objectid);
	}
	/* (chattr refuses them on a symlink: only damage sets them) */
	if (s->ftype == BTRFS_FT_SYMLINK && (inode_flags(d) & (BTRFS_INODE_IMMUTABLE | BTRFS_INODE_APPEND))) {
		report_problem(w->ctx, PR_INODE_FLAGS_TYPE, "root %" PRIu64 " symlink %" PRIu64 ": flags 0x%" PRIx64
			       " (immutable or append)", w->root->objectid, k->objectid, inode_flags(d));
		repair_note_inode_problem(w->ctx, PR_INODE_FLAGS_TYPE, w->root->objectid, k->objectid);
	}
}

/* One name of the inode being streamed, from its ref or extref. */
static void emit_ref(struct fs_walk *w, uint64_t child, uint64_t parent, uint64_t index, const uint8_t *name,
		     uint16_t len)
{
	struct link_rec r = { .root = w->root->objectid, .dir = parent, .key = index,
			      .fp = name_fingerprint(name, len), .child = child, .index = index,
			      .name_len = len, .kind = LINK_REF, .type = w->ino.ftype,
			      .flags = w->ino.have_item ? 0 : LINK_F_NO_INODE };

	w->ino.names++;
	/* the subvolume's root directory names itself ".." (index 0) and has no entry */
	if (child == parent && child == w->root_dirid) {
		if (index != 0 || len != 2 || memcmp(name, "..", 2) != 0)
			report_problem(w->ctx, PR_ITEM_MALFORMED, "root %" PRIu64 " inode %" PRIu64 ": the root "
				       "directory's ref to itself is index %" PRIu64 " name '%.*s', not index 0 name '..'",
				       w->root->objectid, child, index, (int)(len < 64 ? len : 64), (const char *)name);
		return;
	}
	fs_emit_link(w, w->by_index, &r);
	r.key = btrfs_name_hash(name, len);
	fs_emit_link(w, w->by_hash, &r);
}

/* A file name with '/' or NUL in it: the kernel's readdir fails (EIO) on
 * the directory that lists it. A name between directory dir and inode child
 * goes to the names class; one naming a subvolume (child 0) is only reported. */
static void check_name_chars(struct fs_walk *w, const struct btrfs_key *k, const uint8_t *name, uint16_t len,
			     uint32_t size, uint64_t dir, uint64_t child)
{
	if (!memchr(name, '/', len) && !memchr(name, 0, len))
		return;
	if (!child) {
		malformed(w, k, "name holds '/' or NUL", size);
		return;
	}
	report_problem(w->ctx, PR_NAME_INVALID, "root %" PRIu64 " item (%" PRIu64 " %u %" PRIu64 "): the name of "
		       "inode %" PRIu64 " in dir %" PRIu64 " holds '/' or NUL", w->root->objectid, k->objectid, k->type,
		       k->offset, child, dir);
	repair_note_name(w->ctx, PR_NAME_INVALID, w->root->objectid, dir, child);
}

void fs_item_inode_ref(struct fs_walk *w, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct item_view v = item_view_of(d, size);
	struct item_entry e;
	uint32_t off = 0;
	int ret;

	while ((ret = item_entry_next(k->type, &v, &off, &e)) == 1) {
		/* (the validator bounds a ref's name by the item only: the 255 is the namespace's) */
		if (item_entry_check(k->type, &e) == ITEM_NAME_LEN || e.name_len > BTRFS_NAME_LEN)
			malformed(w, k, "inode ref name length out of range", size);
		check_name_chars(w, k, e.name, e.name_len, size, k->offset, k->objectid);
		emit_ref(w, k->objectid, k->offset, inode_ref_index(e.hdr), e.name, e.name_len);
	}
	if (ret < 0)
		malformed(w, k, "inode ref truncated", size);
}

void fs_item_inode_extref(struct fs_walk *w, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct item_view v = item_view_of(d, size);
	struct item_entry ent;
	uint32_t off = 0;
	int ret;

	while ((ret = item_entry_next(k->type, &v, &off, &ent)) == 1) {
		const uint8_t *e = ent.hdr;
		const uint16_t len = ent.name_len;
		const uint32_t hdr = (uint32_t)(ent.name - ent.hdr);

		check_name_chars(w, k, e + hdr, len, size, inode_extref_parent_objectid(e), k->objectid);
		if (btrfs_extref_hash(inode_extref_parent_objectid(e), e + hdr, len) != k->offset) {
			report_problem(w->ctx, PR_NAME_HASH, "root %" PRIu64 " inode %" PRIu64 ": extref in parent %"
				       PRIu64 " is keyed %" PRIu64 ", its name hashes to %" PRIu64, w->root->objectid,
				       k->objectid, inode_extref_parent_objectid(e), k->offset,
				       btrfs_extref_hash(inode_extref_parent_objectid(e), e + hdr, len));
			repair_note_name(w->ctx, PR_NAME_HASH, w->root->objectid, inode_extref_parent_objectid(e),
					 k->objectid);
		}
		emit_ref(w, k->objectid, inode_extref_parent_objectid(e), inode_extref_index(e), e + hdr, len);
	}
	if (ret < 0)
		malformed(w, k, "inode extref truncated", size);
}

/* A dir entry (DIR_ITEM / DIR_INDEX) naming the subvolume `child`. */
static void emit_subvol_entry(struct fs_walk *w, const struct btrfs_key *k, uint64_t child, const uint8_t *name,
			      uint16_t len)
{
	struct root_rec r = { .a = w->root->objectid, .b = child, .c = k->objectid,
			      .d = k->type == BTRFS_DIR_INDEX_KEY ? k->offset : 0,
			      .fp = name_fingerprint(name, len), .name_len = len,
			      .kind = k->type == BTRFS_DIR_INDEX_KEY ? ROOTREC_DIR_INDEX : ROOTREC_DIR_ITEM };
	int ret;

	if (!w->subvols || w->err || w->mark_root)
		return;
	ret = recsort_add(w->subvols, &r);
	if (!ret && w->held)   /* carried to the lineage's next member (snap_delta.c) */
		ret = snap_plan_keep_subvol(&w->plan->lin[w->lineage], &r);
	if (ret)
		w->err = ret;
}

/* The location key rules of the kernel's tree checker (it refuses the leaf
 * otherwise): an xattr's is all zero; an inode's offset is 0; a subvolume's
 * names a subvolume tree id (5 or [256, 2^48)). Returns what is wrong, NULL
 * when the key is fine. */
static const char *location_key_bad(const struct btrfs_key *k, const struct btrfs_key *loc)
{
	if (k->type == BTRFS_XATTR_ITEM_KEY)
		return loc->objectid || loc->type || loc->offset ? "xattr location key is not zero" : NULL;
	if (loc->type == BTRFS_ROOT_ITEM_KEY)
		return loc->objectid == BTRFS_FS_TREE_OBJECTID ||
		       (loc->objectid >= BTRFS_FIRST_FREE_OBJECTID && loc->objectid >> 48 == 0) ? NULL :
		       "location names no subvolume tree";
	/* another type is reported with the entry; an inode number out of range
	 * names no inode: a dangling entry, which the names class removes */
	return loc->type == BTRFS_INODE_ITEM_KEY && loc->offset ? "location key offset is not 0" : NULL;
}

static void dir_entry(struct fs_walk *w, const struct btrfs_key *k, const uint8_t *e, const uint8_t *name,
		      uint16_t len)
{
	struct btrfs_key loc;
	const char *why;
	uint8_t type = dir_item_type(e) & ~BTRFS_FT_ENCRYPTED;
	struct link_rec r = { .root = w->root->objectid, .dir = k->objectid, .key = k->offset,
			      .fp = name_fingerprint(name, len), .name_len = len, .type = type };

	key_from_disk(&loc, dir_item_location_ptr(e));
	why = location_key_bad(k, &loc);
	if (why)
		report_problem(w->ctx, PR_ITEM_MALFORMED, "root %" PRIu64 " item (%" PRIu64 " %u %" PRIu64 "): %s "
			       "(%" PRIu64 " %u %" PRIu64 ")", w->root->objectid, k->objectid, k->type, k->offset, why,
			       loc.objectid, loc.type, loc.offset);
	if (k->type == BTRFS_XATTR_ITEM_KEY) {
		if (type != BTRFS_FT_XATTR)
			report_problem(w->ctx, PR_DIR_ENTRY_TYPE, "root %" PRIu64 " inode %" PRIu64
				       ": xattr has type %u", w->root->objectid, k->objectid, type);
		return;
	}
	w->ino.dir_size += len;
	if (type == BTRFS_FT_UNKNOWN || type >= BTRFS_FT_XATTR)
		report_problem(w->ctx, PR_DIR_ENTRY_TYPE, "root %" PRIu64 " dir %" PRIu64 ": entry of type %u",
			       w->root->objectid, k->objectid, type);
	if (loc.type == BTRFS_ROOT_ITEM_KEY) {
		if (type != BTRFS_FT_DIR)
			report_problem(w->ctx, PR_DIR_ENTRY_TYPE, "root %" PRIu64 " dir %" PRIu64
				       ": entry for subvolume %" PRIu64 " has type %u", w->root->objectid,
				       k->objectid, loc.objectid, type);
		emit_subvol_entry(w, k, loc.objectid, name, len);
		return;
	}
	if (loc.type != BTRFS_INODE_ITEM_KEY) {
		report_problem(w->ctx, PR_ITEM_MALFORMED, "root %" PRIu64 " dir %" PRIu64 ": entry location has key "
			       "type %u", w->root->objectid, k->objectid, loc.type);
		return;
	}
	if (w->changed && !snap_ranges_has(w->changed, k))
		return;   /* a delta's unchanged entry: the record of the snapshot before stands */
	r.child = loc.objectid;
	r.kind = k->type == BTRFS_DIR_INDEX_KEY ? LINK_DIR_INDEX : LINK_DIR_ITEM;
	fs_emit_link(w, k->type == BTRFS_DIR_INDEX_KEY ? w->by_index : w->by_hash, &r);
}

/* Whether an entry of a dir item before offset `end` (whole entries, checked
 * before) has this name. */
static bool name_earlier(const uint8_t *d, uint32_t end, const uint8_t *name, uint32_t len)
{
	struct item_view v = item_view_of(d, end);
	struct item_entry e;
	uint32_t off = 0;

	while (item_entry_next(BTRFS_DIR_ITEM_KEY, &v, &off, &e) == 1)
		if (e.name_len == len && !memcmp(e.name, name, len))
			return true;
	return false;
}

void fs_item_dir_entries(struct fs_walk *w, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct item_view v = item_view_of(d, size);
	struct item_entry ent;
	enum item_fault f;
	uint32_t off = 0;
	unsigned n = 0;
	int ret;

	for (; (ret = item_entry_next(k->type, &v, &off, &ent)) == 1; n++) {
		const uint8_t *e = ent.hdr;
		const uint32_t len = ent.name_len, hdr = (uint32_t)(ent.name - ent.hdr);

		if ((f = item_entry_check(k->type, &ent)) == ITEM_NAME_LEN || f == ITEM_DATA_LEN)
			malformed(w, k, "dir entry name or data length out of range", size);
		if (k->type != BTRFS_XATTR_ITEM_KEY) {
			struct btrfs_key loc;
			key_from_disk(&loc, dir_item_location_ptr(e));
			check_name_chars(w, k, e + hdr, (uint16_t)len, size, k->objectid,
					 loc.type == BTRFS_INODE_ITEM_KEY ? loc.objectid : 0);
		}
		if (k->type != BTRFS_DIR_INDEX_KEY && btrfs_name_hash(e + hdr, len) != k->offset) {
			struct btrfs_key loc;
			report_problem(w->ctx, PR_NAME_HASH, "root %" PRIu64 " inode %" PRIu64 ": %s keyed %" PRIu64
				       ", its name hashes to %" PRIu64, w->root->objectid, k->objectid,
				       k->type == BTRFS_XATTR_ITEM_KEY ? "xattr" : "dir item", k->offset,
				       btrfs_name_hash(e + hdr, len));
			key_from_disk(&loc, dir_item_location_ptr(e));
			repair_note_name(w->ctx, PR_NAME_HASH, w->root->objectid, k->objectid,
					 k->type == BTRFS_XATTR_ITEM_KEY || loc.type != BTRFS_INODE_ITEM_KEY ? 0 : loc.objectid);
		}
		if (k->type == BTRFS_DIR_INDEX_KEY && n > 0)
			malformed(w, k, "dir index holds more than one entry", size);
		if (k->type == BTRFS_DIR_ITEM_KEY && n > 0 && name_earlier(d, off, e + hdr, len)) {
			struct btrfs_key loc;
			report_problem(w->ctx, PR_NAME_DUPLICATE, "root %" PRIu64 " dir %" PRIu64 ": dir item (key %"
				       PRIu64 ") holds the name '%.*s' twice", w->root->objectid, k->objectid, k->offset,
				       (int)(len < 64 ? len : 64), (const char *)(e + hdr));
			/* the later entry's inode: the names class renames it */
			key_from_disk(&loc, dir_item_location_ptr(e));
			if (loc.type == BTRFS_INODE_ITEM_KEY)
				repair_note_name(w->ctx, PR_NAME_DUPLICATE, w->root->objectid, k->objectid, loc.objectid);
		}
		dir_entry(w, k, e, e + hdr, (uint16_t)len);
	}
	if (ret < 0)
		malformed(w, k, "dir item truncated", size);
}

static uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

static const char RANGE_BEYOND_RAM[] = "range beyond the decompressed size";
static const char RANGE_BEYOND_DISK[] = "range beyond the disk extent";
static const char UNKNOWN_COMPRESSION[] = "unknown compression";
static const char UNKNOWN_ENCODING[] = "unknown encryption or encoding";
static const char UNKNOWN_TYPE[] = "unknown extent type";
static const char PREALLOC_COMPRESSED[] = "preallocated extent is compressed";
static const char FUTURE_GENERATION[] = "generation newer than the filesystem's";
static const char RAM_BYTES_UNALIGNED[] = "ram_bytes not sector aligned";
static const char RAM_BYTES_SHORT[] = "ram_bytes shorter than the uncompressed range it holds";

/* A fault the file-extent-ranges class can take back from the extent's references. */
static bool range_fault(const char *why)
{
	return why == RANGE_BEYOND_RAM || why == RANGE_BEYOND_DISK;
}

/* A fault of the fields the file-extent-fields class sets from the item, its data and checksums. */
static bool field_fault(const char *why)
{
	return why == UNKNOWN_COMPRESSION || why == UNKNOWN_ENCODING || why == UNKNOWN_TYPE ||
	       why == PREALLOC_COMPRESSED || why == FUTURE_GENERATION || why == RAM_BYTES_UNALIGNED ||
	       why == RAM_BYTES_SHORT;
}

/* A regular or prealloc extent's own fields; returns false when malformed. */
static bool regular_extent_ok(struct fs_walk *w, const struct btrfs_key *k, const uint8_t *d, const char **why)
{
	uint32_t ss = w->ctx->fs->sectorsize;
	uint64_t num = file_extent_num_bytes(d), off = file_extent_offset(d);
	uint8_t comp = file_extent_compression(d);

	/* (the kernel's tree checker holds the offset into the extent to it too) */
	if (k->offset % ss || num % ss || num == 0 || off % ss)
		*why = "offset or length not sector aligned";
	else if (file_extent_type(d) == BTRFS_FILE_EXTENT_PREALLOC && comp != BTRFS_COMPRESS_NONE)
		*why = PREALLOC_COMPRESSED;
	else if (file_extent_ram_bytes(d) % ss)
		*why = RAM_BYTES_UNALIGNED;    /* the tree checker refuses the leaf */
	else if (file_extent_disk_bytenr(d) == 0)   /* a hole: the kernel writes ram_bytes as its length */
		*why = off + num > file_extent_ram_bytes(d) ? RAM_BYTES_SHORT : NULL;
	else if (file_extent_disk_num_bytes(d) == 0 || file_extent_disk_num_bytes(d) % ss ||
		 file_extent_disk_bytenr(d) % ss)
		*why = "disk range not sector aligned";
	else if (comp != BTRFS_COMPRESS_NONE && file_extent_ram_bytes(d) == 0)
		*why = RAM_BYTES_SHORT;    /* its data says how long it is */
	else if (comp != BTRFS_COMPRESS_NONE && off + num > file_extent_ram_bytes(d))
		*why = RANGE_BEYOND_RAM;
	else if (comp == BTRFS_COMPRESS_NONE && off + num > file_extent_disk_num_bytes(d))
		*why = RANGE_BEYOND_DISK;
	/* the kernel writes an uncompressed extent's ram_bytes as its disk length; btrfs check
	 * calls one that does not hold the range invalid */
	else if (comp == BTRFS_COMPRESS_NONE && off + num > file_extent_ram_bytes(d))
		*why = RAM_BYTES_SHORT;
	return *why == NULL;
}

/* btrfs-image dumps zero every inline extent's data: no compressed stream is
 * all zeroes, so such a payload is a restored image, not damage to repair. */
static bool inline_payload_zeroed(const uint8_t *d, uint32_t size)
{
	if (size <= BTRFS_FILE_EXTENT_INLINE_DATA_START)
		return false;
	for (uint32_t i = BTRFS_FILE_EXTENT_INLINE_DATA_START; i < size; i++)
		if (d[i])
			return false;
	return true;
}

/* A compressed inline extent decompresses to exactly its ram_bytes (at most
 * a sector: checked before); lzo is not built in and is not checked. Inline
 * data that is all zeros is what btrfs-image leaves of it (a metadata dump
 * holds no file data, and btrfs check does not decompress it): a warning. */
static void check_inline_data(struct fs_walk *w, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	uint64_t ram = file_extent_ram_bytes(d), cap = (uint64_t)w->ctx->fs->sectorsize + 1;
	uint8_t *out;
	long got;

	out = malloc(cap);
	if (!out)
		return;
	if (inline_payload_zeroed(d, size)) {
		free(out);
		report_problem(w->ctx, PR_INLINE_EXTENT_ZEROED, "root %" PRIu64 " inode %" PRIu64 ": compressed "
			       "inline extent (%s) holds only zeroes: its data was left out of a metadata image",
			       w->root->objectid, k->objectid, compression_name(file_extent_compression(d)));
		return;
	}
	/* room for a sector and one byte: the stream's own length when it is a sector or less */
	got = inline_extent_decompress(file_extent_compression(d), d + BTRFS_FILE_EXTENT_INLINE_DATA_START,
				       size - BTRFS_FILE_EXTENT_INLINE_DATA_START, out, cap);
	free(out);
	/* a whole stream of another length: only ram_bytes is wrong (the inodes class sets it) */
	if (got > 0 && (uint64_t)got != ram && (uint64_t)got <= w->ctx->fs->sectorsize)
		repair_note_inode_problem(w->ctx, PR_INLINE_EXTENT_CORRUPT, w->root->objectid, k->objectid);
	if (got == -EUCLEAN || (got >= 0 && (uint64_t)got != ram))
		report_problem(w->ctx, PR_INLINE_EXTENT_CORRUPT, "root %" PRIu64 " inode %" PRIu64 ": inline extent "
			       "(%s, %u bytes) %s %" PRIu64, w->root->objectid, k->objectid,
			       compression_name(file_extent_compression(d)), (unsigned)(size - BTRFS_FILE_EXTENT_INLINE_DATA_START),
			       got < 0 ? "does not decompress; ram_bytes" : "decompresses to a length other than",
			       ram);
}

/* An inode with no names and nlink 0 is deleted and waits for (or is in the
 * middle of) its eviction: the kernel drops a file's extents from the end
 * without updating nbytes or the size, so its sums and holes say nothing (the
 * orphan join still wants its orphan item; a directory's size is still
 * checked, as btrfs check does). */
static bool inode_being_dropped(const struct inode_state *s)
{
	return s->have_item && s->nlink == 0 && s->names == 0;
}

void fs_item_file_extent(struct fs_walk *w, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct inode_state *s = &w->ino;
	uint32_t ss = w->ctx->fs->sectorsize;
	const char *why = NULL;
	uint64_t end;
	uint8_t type;

	struct item_verdict vd;

	if (item_check_fs(w->ctx->fs, k, d, size, &vd) && vd.fault == ITEM_TOO_SMALL) {
		malformed(w, k, "file extent too small", size);
		return;
	}
	type = file_extent_type(d);
	if (s->have_item && s->ftype != BTRFS_FT_REG_FILE && s->ftype != BTRFS_FT_SYMLINK && s->ftype != BTRFS_FT_UNKNOWN)
		report_problem(w->ctx, PR_FILE_EXTENT_NOT_FILE, "root %" PRIu64 " inode %" PRIu64 " (mode 0%o): "
			       "file extent at %" PRIu64, w->root->objectid, k->objectid, s->mode, k->offset);
	if (file_extent_compression(d) > BTRFS_COMPRESS_ZSTD)
		why = UNKNOWN_COMPRESSION;
	else if (file_extent_encryption(d) || file_extent_other_encoding(d))
		why = UNKNOWN_ENCODING;
	if (type == BTRFS_FILE_EXTENT_INLINE) {
		uint64_t ram = file_extent_ram_bytes(d);
		/* (the item is not too small: the inline data is what follows the header) */
		uint32_t data_len = size - BTRFS_FILE_EXTENT_INLINE_DATA_START;
		/* the validator's size fault of an inline extent: uncompressed, data not ram_bytes long */
		if (k->offset != 0 || ram > ss || ram == 0 || vd.fault == ITEM_BAD_SIZE) {
			report_problem(w->ctx, PR_FILE_EXTENT_INLINE, "root %" PRIu64 " inode %" PRIu64 ": inline extent "
				       "at %" PRIu64 ", %" PRIu64 " bytes (item %u bytes)", w->root->objectid,
				       k->objectid, k->offset, ram, size);
			/* only ram_bytes is wrong: the item's data says what it is */
			if (k->offset == 0 && file_extent_compression(d) == BTRFS_COMPRESS_NONE && !why &&
			    data_len && data_len <= ss)
				repair_note_inode_problem(w->ctx, PR_FILE_EXTENT_INLINE, w->root->objectid, k->objectid);
		} else if (file_extent_compression(d) != BTRFS_COMPRESS_NONE && !why)
			check_inline_data(w, k, d, size);
		s->found_bytes += ram;
		end = k->offset + round_up(ram, ss);
	} else if (type == BTRFS_FILE_EXTENT_REG || type == BTRFS_FILE_EXTENT_PREALLOC) {
		if (vd.fault == ITEM_BAD_SIZE) {
			malformed(w, k, "file extent has the wrong size", size);
			return;
		}
		if (!why)
			regular_extent_ok(w, k, d, &why);
		/* the kernel writes a symlink's target inline, always: btrfs check calls another extent too large */
		if (!why && s->have_item && s->ftype == BTRFS_FT_SYMLINK)
			why = "a symlink's extent is not inline";
		/* nothing would catch bad compressed data: the kernel's decompression trusts checksums */
		if (file_extent_disk_bytenr(d) && file_extent_compression(d) != BTRFS_COMPRESS_NONE &&
		    (s->flags & BTRFS_INODE_NODATASUM)) {
			report_problem(w->ctx, PR_FILE_EXTENT_COMPRESSED_NODATASUM, "root %" PRIu64 " inode %" PRIu64
				       ": extent at %" PRIu64 " is compressed (%s), the inode has no data checksums",
				       w->root->objectid, k->objectid, k->offset,
				       compression_name(file_extent_compression(d)));
			repair_note_nodatasum(w->ctx, w->root->objectid, k->objectid);
		}
		if (file_extent_disk_bytenr(d))
			s->found_bytes += file_extent_num_bytes(d);
		end = k->offset + file_extent_num_bytes(d);
	} else {
		why = UNKNOWN_TYPE;
		end = k->offset;
	}
	/* written in a transaction after the last committed one: `btrfs check` says invalid generation */
	if (!why && file_extent_generation(d) > w->ctx->fs->generation + 1)
		why = FUTURE_GENERATION;
	if (why) {
		report_problem(w->ctx, PR_FILE_EXTENT_BAD, "root %" PRIu64 " inode %" PRIu64 " extent at %" PRIu64
			       ": %s", w->root->objectid, k->objectid, k->offset, why);
		if (range_fault(why))
			repair_note_file_extent(w->ctx, w->root->objectid, k->objectid);
		else if (field_fault(why))
			repair_note_fe_fields(w->ctx, w->root->objectid, k->objectid);
	}
	if (k->offset < s->extent_end) {
		report_problem(w->ctx, PR_FILE_EXTENT_OVERLAP, "root %" PRIu64 " inode %" PRIu64 ": extent at %" PRIu64
			       " overlaps the one ending at %" PRIu64, w->root->objectid, k->objectid, k->offset,
			       s->extent_end);
		repair_note_fe_overlap(w->ctx, w->root->objectid, k->objectid);
	} else if (!w->no_holes && k->offset > s->extent_end && !inode_being_dropped(s) &&
		 !fs_lost_inode(w->lost, w->root->objectid, k->objectid)) {
		report_problem(w->ctx, PR_FILE_EXTENT_HOLE, "root %" PRIu64 " inode %" PRIu64 ": no extent for [%"
			       PRIu64 ", %" PRIu64 ")", w->root->objectid, k->objectid, s->extent_end, k->offset);
		repair_note_inode_problem(w->ctx, PR_FILE_EXTENT_HOLE, w->root->objectid, k->objectid);
	}
	if (end > s->extent_end)
		s->extent_end = end;
}

void fs_inode_finish(struct fs_walk *w)
{
	struct inode_state *s = &w->ino;
	uint64_t root = w->root->objectid;

	/* some of its items are in an unreadable block: the sums are unknown */
	if (!s->have_item || fs_lost_inode(w->lost, root, s->ino))
		return;
	if (s->ftype == BTRFS_FT_DIR && s->isize != s->dir_size) {
		report_problem(w->ctx, PR_DIR_ISIZE, "root %" PRIu64 " dir %" PRIu64 ": size %" PRIu64
			       ", its entries add up to %" PRIu64, root, s->ino, s->isize, s->dir_size);
		repair_note_inode_problem(w->ctx, PR_DIR_ISIZE, root, s->ino);
	}
	if (inode_being_dropped(s)) {
		struct link_rec r = { .root = root, .key = s->ino, .child = s->ino, .kind = LINK_NEED_ORPHAN };
		fs_emit_link(w, w->orphans, &r);
		return;
	}
	if ((s->ftype == BTRFS_FT_REG_FILE || s->ftype == BTRFS_FT_SYMLINK) && s->nbytes != s->found_bytes) {
		report_problem(w->ctx, PR_INODE_NBYTES, "root %" PRIu64 " inode %" PRIu64 ": nbytes %" PRIu64
			       ", its extents add up to %" PRIu64, root, s->ino, s->nbytes, s->found_bytes);
		repair_note_inode_problem(w->ctx, PR_INODE_NBYTES, root, s->ino);
	}
	/* (a size within a sector of 2^64 rounds up to 0: compared unrounded, the
	 * extents' end being sector aligned) */
	if (s->ftype == BTRFS_FT_REG_FILE && !w->no_holes &&
	    (s->extent_end < round_up(s->isize, w->ctx->fs->sectorsize) || s->extent_end < s->isize)) {
		report_problem(w->ctx, PR_FILE_EXTENT_HOLE, "root %" PRIu64 " inode %" PRIu64 ": no extent for [%"
			       PRIu64 ", %" PRIu64 ")", root, s->ino, s->extent_end, s->isize);
		repair_note_inode_problem(w->ctx, PR_FILE_EXTENT_HOLE, root, s->ino);
	}
	/* a symlink's target is its inline extent: without it, btrfs check counts the
	 * size as uncovered (a hole cannot stand in for a target) */
	if (s->ftype == BTRFS_FT_SYMLINK && !w->no_holes && s->extent_end < s->isize) {
		report_problem(w->ctx, PR_FILE_EXTENT_HOLE, "root %" PRIu64 " symlink %" PRIu64 ": no extent for [%"
			       PRIu64 ", %" PRIu64 ") of its target", root, s->ino, s->extent_end, s->isize);
		repair_note_inode_problem(w->ctx, PR_FILE_EXTENT_HOLE, root, s->ino);
	}
	/* (a subvolume's top directory counts its ".." ref: one name; a wrong
	 * nlink on a directory with one name is inode-nlink, which repairs it) */
	if (s->ftype == BTRFS_FT_DIR && s->names > 1) {
		report_problem(w->ctx, PR_DIR_HARDLINK, "root %" PRIu64 " dir %" PRIu64 ": nlink %u, %" PRIu64
			       " name(s)", root, s->ino, s->nlink, s->names);
		repair_note_dir_links(w->ctx, root, s->ino);
	}
	if (s->names == 0 && s->nlink == 0) {
		struct link_rec r = { .root = root, .key = s->ino, .child = s->ino, .kind = LINK_NEED_ORPHAN };
		fs_emit_link(w, w->orphans, &r);
	} else if (s->nlink != s->names) {
		report_problem(w->ctx, PR_INODE_NLINK, "root %" PRIu64 " inode %" PRIu64 ": nlink %u, %" PRIu64
			       " name(s)", root, s->ino, s->nlink, s->names);
		repair_note_inode_problem(w->ctx, PR_INODE_NLINK, root, s->ino);
	}
}
