/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The on-disk layout of undo files (doc/undo-format.md), shared by the
 * recorder (undo.c) and the reader (undo_apply.c). Everything is
 * little-endian; every checksum is crc32c (Castagnoli, standard: seed ~0,
 * result inverted), the one btrfs uses. */
#ifndef BTK_UNDO_FORMAT_H
#define BTK_UNDO_FORMAT_H

#include <stdint.h>
#include <btk/csum.h>

#define UNDO_MAGIC "BTKUNDO1"
#define UNDO_VERSION 1U
#define UNDO_HEADER_SIZE 256U

/* header */
#define UH_MAGIC 0          /* 8 bytes */
#define UH_VERSION 8        /* u32 */
#define UH_HEADER_SIZE 12   /* u32 */
#define UH_FSID 16          /* 16 bytes */
#define UH_GEN_BEFORE 32    /* u64 */
#define UH_BLOCK_SIZE 40    /* u32 */
#define UH_STATE 44         /* u32 */
#define UH_CREATED 48       /* u64 */
#define UH_CRC 252          /* u32, over bytes [0, 252) */

#define UNDO_STATE_RECORDING 0U
#define UNDO_STATE_FINISHED 1U

/* batch header: a group of records checksummed together */
#define UNDO_BATCH_MAGIC 0x42444e55U /* "UNDB" */
#define UNDO_BATCH_HEADER_SIZE 32U
#define UB_MAGIC 0          /* u32 */
#define UB_NRECORDS 4       /* u32 */
#define UB_SEQ 8            /* u64: 0, 1, 2, ... */
#define UB_PAYLOAD_LEN 16   /* u64, a multiple of 8 */
#define UB_PAYLOAD_CRC 24   /* u32 */
#define UB_HEADER_CRC 28    /* u32, over bytes [0, 28) */
#define UNDO_BATCH_PAYLOAD_MAX (1ULL << 30)

/* records, 8-byte aligned inside a batch payload */
#define UNDO_REC_DEVICE 1U
#define UNDO_REC_DATA 2U
#define UNDO_REC_SUPER 3U
#define UR_TYPE 0           /* u16 */
#define UR_DEV 4            /* u32: device index, in order of DEVICE records */
/* DEVICE */
#define UR_DEVICE_DEVID 8   /* u64 */
#define UR_DEVICE_UUID 16   /* 16 bytes */
#define UR_DEVICE_SIZE 32   /* u64 */
#define UNDO_REC_DEVICE_LEN 40U
/* DATA: old bytes follow the 24-byte head, padded to 8 */
#define UR_DATA_OFFSET 8    /* u64 */
#define UR_DATA_LENGTH 16   /* u32 */
#define UNDO_REC_DATA_HEAD 24U
/* SUPER: a superblock copy the operation wrote */
#define UR_SUPER_OFFSET 8   /* u64: where on the device */
#define UR_SUPER_GEN 16     /* u64 */
#define UR_SUPER_FSID 24    /* 16 bytes */
#define UR_SUPER_CRC 40     /* u32: crc32c of the 4096 bytes written */
#define UNDO_REC_SUPER_LEN 48U

/* trailer, the last 64 bytes of a finished file */
#define UNDO_TRAILER_MAGIC 0x54444e55U /* "UNDT" */
#define UNDO_TRAILER_SIZE 64U
#define UT_MAGIC 0          /* u32 */
#define UT_VERSION 4        /* u32 */
#define UT_GEN_AFTER 8      /* u64 */
#define UT_BATCHES 16       /* u64 */
#define UT_RECORDS 24       /* u64: DATA records */
#define UT_OFFSET 32        /* u64: where the trailer starts */
#define UT_BODY_CRC 40      /* u32: crc32c of bytes [UNDO_HEADER_SIZE, UT_OFFSET) */
#define UT_CRC 60           /* u32, over bytes [0, 60) */

static inline uint32_t undo_crc(const void *p, size_t n)
{
	return ~crc32c_btrfs(~0U, p, n);
}

static inline uint64_t undo_align8(uint64_t v)
{
	return (v + 7) & ~(uint64_t)7;
}

#endif
