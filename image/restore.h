/* SPDX-License-Identifier: GPL-2.0-only */
/* State of one btk-image restore, shared by the stream side (restore.c)
 * and the one-device layout (restore_single.c). */
#ifndef BTK_IMAGE_RESTORE_H
#define BTK_IMAGE_RESTORE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "image/image.h"
#include <btk/fs.h>
#include <btk/volumes.h>

enum restore_layout { LAYOUT_AUTO, LAYOUT_ORIGINAL, LAYOUT_SINGLE };

/* A tree block kept in memory until it can be written (chunk and dev tree). */
struct held_block {
	uint64_t bytenr;
	uint8_t *data;
};

/* Held blocks in arrival order, an index by address, and the addresses
 * their nodes point at (held.c). */
struct held_list {
	struct held_block *v;
	size_t n, cap;
	size_t *slots, mask;        /* index + 1 into v, open addressing */
	uint64_t *refs;             /* children of held nodes, each once */
	size_t nrefs, refcap;
	size_t *ref_slots, ref_mask;
	size_t missing;             /* refs not held */
};

/* A device as the chunk tree's dev item describes it. */
struct src_device {
	uint64_t devid;
	uint8_t item[sizeof(struct btrfs_dev_item)];
};

/* A superblock record of the image: one copy of one device's superblock. */
struct img_super {
	uint64_t devid;
	unsigned copy;
	uint8_t data[BTRFS_SUPER_INFO_SIZE];
};

/* Where the one-device layout puts a chunk. */
struct placement {
	uint64_t type;           /* new type and profile */
	unsigned ncopies;        /* 1 single, 2 DUP */
	uint64_t physical[2];
};

/* A record set aside until the chunk tree is complete. */
struct spilled {
	uint64_t logical, offset;
	uint32_t len;
	uint16_t type;
};

struct restore_ctx {
	enum restore_layout layout;
	char **outs;
	unsigned nouts;
	struct img_source src;
	/* what the image says */
	uint8_t super[BTRFS_SUPER_INFO_SIZE]; /* the one super_member_preferred picks */
	bool have_super;
	struct img_super *supers; /* every SUPER record */
	size_t nsupers;
	/* the chunk tree, collected first */
	struct held_list chunk_blocks;
	bool chunks_complete;
	bool outputs_touched;     /* the first output was extended or marked */
	struct src_device *devs;  /* sorted by devid */
	unsigned ndevs;
	/* a filesystem context holding the source chunk map and the output devices */
	struct fs_info *fs;
	struct io_dev **ios;      /* the outputs (owned by fs), in the order given */
	/* one-device layout */
	struct placement *place;  /* parallel to the chunk map (rs_chunk) */
	uint64_t new_size;
	struct held_list dev_blocks;
	int out_fd;
	struct img_frame *cur_frame;  /* the frame of the record being placed, or NULL */
	struct ebitmap *parity_rows;  /* RAID5/6 full stripes written into (logical ranges) */
	/* records before the chunk tree was complete */
	FILE *spill;
	struct spilled *sp;
	size_t nsp, spcap;
	uint64_t spill_off;
	/* figures */
	uint64_t tree_blocks, data_bytes, written_bytes;
	struct progress *prog;
	bool prog_by_image;          /* progress counts image bytes read (frame offsets), not records */
	char err[512];
};

/* The source chunk map, through libfs' chunk calls only. */
static inline size_t rs_chunk_count(const struct restore_ctx *r) { return fs_chunk_count(r->fs); }
static inline const struct chunk *rs_chunk(const struct restore_ctx *r, size_t i) { return fs_chunk(r->fs, i); }
static inline const struct chunk *rs_chunk_lookup(const struct restore_ctx *r, uint64_t logical)
{
	return fs_chunk_lookup(r->fs, logical);
}
static inline size_t rs_chunk_find_index(const struct restore_ctx *r, uint64_t logical)
{
	return fs_chunk_find_index(r->fs, logical);
}

/* RAID5/6 (restore_parity.c): note the full stripes a write touches; at the
 * end, recompute their parity from what the outputs hold. */
int parity_note(struct restore_ctx *r, uint64_t logical, uint64_t len);
int parity_finish(struct restore_ctx *r);

/* Keep a copy of a block (once per address); O(1) amortised. */
int held_add(struct held_list *l, uint64_t bytenr, const uint8_t *data, uint32_t len);
struct held_block *held_find(struct held_list *l, uint64_t bytenr);
/* Some other held node points at bytenr. */
bool held_referenced(const struct held_list *l, uint64_t bytenr);
void held_free(struct held_list *l);

/* Recompute a tree block's checksum in place. */
void restore_block_csum(struct restore_ctx *r, uint8_t *block);

/* Record a message on the context: -EUCLEAN. */
int rs_error(struct restore_ctx *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Write [logical, logical+len) to every copy in the layout being restored. */
int restore_write(struct restore_ctx *r, uint64_t logical, const uint8_t *data, uint32_t len);
/* Flush, then write every superblock copy within size: verbatim[copy] when
 * given (verbatim may be NULL), else base with bytenr, dev_item (unless NULL)
 * and the checksum set; flush again. */
int restore_write_supers(struct restore_ctx *r, struct io_dev *io, const uint8_t *base,
			 const uint8_t *dev_item, const uint8_t *const *verbatim, uint64_t size);

/* One-device layout: place every chunk (after the chunk tree is complete),
 * map a logical range, patch a block on its way out, rewrite the chunk and
 * dev trees and write the superblock at the end. */
int single_place_chunks(struct restore_ctx *r);
/* Copies of [logical, logical+len) (one chunk) on the output: 0 or -ENOENT. */
int single_map(struct restore_ctx *r, uint64_t logical, uint64_t *phys, unsigned *ncopies, uint64_t *contig);
/* Write [logical, logical+len) to every copy of the one-device layout. */
int single_write(struct restore_ctx *r, uint64_t logical, const uint8_t *data, uint32_t len);
/* restore_util.c: a reference on the current frame when data lies in it. */
const struct io_ref *restore_frame_hold(const struct restore_ctx *r, const uint8_t *data, uint32_t len,
					struct io_ref *hold);
/* Give a block group item leaf its new profile flags (leaves of the extent
 * and block-group trees); 1 if it changed. */
int single_patch_block_groups(struct restore_ctx *r, uint8_t *block);
int single_finish(struct restore_ctx *r);

#endif
