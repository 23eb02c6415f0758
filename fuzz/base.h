/* SPDX-License-Identifier: GPL-2.0-only */
/* The bases of the whole-filesystem harnesses: an input is a compact list of
 * patches onto the metadata of a small real filesystem (a base image).
 *
 * Input layout:
 *   byte 0        flags (FUZZ_* below; bits 5..7 are the harness's own)
 *   then patches  u8 block, u16le offset, u8 len, len bytes (cut at the end)
 * Blocks 0..ndevs-1 are the primary superblocks (4 KiB at 64 KiB) of the
 * base's devices, the following ones its tree blocks in walk order; block
 * and offset are taken modulo their count / size, so every input means
 * something. With FUZZ_FIX_CSUMS the checksums of every patched block and
 * superblock are recomputed, so mutations get past checksum verification to
 * the parsers behind it.
 *
 * Two bases, loaded once: FUZZ_RAID picks the second.
 *   $BTK_FUZZ_BASE       one device: items of every kind, DUP metadata
 *                        (default BTK_FUZZ_BASE_DEFAULT: $(B)/fuzz/base.img)
 *   $BTK_FUZZ_RAID_BASE  colon-separated devices: RAID6 metadata on three
 *                        (default BTK_FUZZ_RAID_DEFAULT: $(B)/fuzz/raid-{1,2,3}.img)
 * made by tests/images/fuzz/make-base.sh; the Makefile unpacks them. */
#ifndef BTK_FUZZ_BASE_H
#define BTK_FUZZ_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <btk/fs.h>
#include <btk/volumes.h>

#define FUZZ_FIX_CSUMS (1U << 0)   /* recompute checksums of what was patched */
#define FUZZ_FIRST_COPY (1U << 1)  /* patch only the first copy of DUP blocks */
#define FUZZ_SMALL_CACHE (1U << 2) /* a cache of a few blocks: eviction paths */
#define FUZZ_DROP_DEVICE (1U << 3) /* open without the last device (degraded) */
#define FUZZ_RAID (1U << 4)        /* the multi-device base */
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

extern bool fuzz_verbose; /* $BTK_FUZZ_VERBOSE: say what each run reached */

/* Load the bases (first call), pick one by data[0] (size >= 1), apply the
 * patches of the input and fix checksums per its flags. */
struct fuzz_base *fuzz_patch(const uint8_t *data, size_t size);
/* Open the patched base over memory devices (without its last with
 * FUZZ_DROP_DEVICE; a cache of four blocks with FUZZ_SMALL_CACHE), notes to note. */
int fuzz_open(struct fuzz_base *b, unsigned flags, void (*note)(void *, enum fs_note_level, const char *),
	      struct fs_info **fs, char *msg, size_t msglen);
/* Put back the pristine bytes of every patched block. */
void fuzz_restore_blocks(struct fuzz_base *b);
uint8_t *fuzz_copy_at(struct fuzz_base *b, const struct fuzz_block *fb, unsigned c);

#endif
