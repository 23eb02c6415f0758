/* SPDX-License-Identifier: GPL-2.0-only */
/* Sizes on the command line and in output.
 *
 * Parsing follows btrfs-progs: a decimal number with an optional binary unit
 * K, M, G, T, P or E (any case), optionally followed by "i", "iB" or "B":
 * "4096", "16K", "16k", "16KiB", "2G", "2GiB", "512MB" (= 512 MiB), "4096B".
 * Every unit is a power of 1024; there are no decimal (1000) units.
 *
 * Formatting has three modes:
 *   SIZE_RAW    "1610612736"   plain bytes
 *   SIZE_HUMAN  "1.50GiB"      two decimals in the largest unit, exactly like
 *                              btrfs-progs' pretty_size() ("512.00B")
 *   SIZE_EXACT  "1536MiB"      the largest unit that divides the value, so
 *                              the text parses back to the same number
 *                              ("0B", "4097B", "16KiB") */
#ifndef BTK_COMMON_SIZES_H
#define BTK_COMMON_SIZES_H

#include <stddef.h>
#include <stdint.h>

enum size_mode { SIZE_RAW, SIZE_HUMAN, SIZE_EXACT };

/* Long enough for any u64 in any mode. */
#define SIZE_BUF_LEN 32

/* Parse a size as above into *out. Returns 0, -EINVAL for anything that is
 * not a size (empty, sign, garbage, unknown unit, whitespace) or -ERANGE
 * when it does not fit in 64 bits. *out is untouched on error. */
int size_parse(const char *s, uint64_t *out);

/* Format bytes into buf (len bytes, SIZE_BUF_LEN is always enough; shorter
 * output is truncated) and return buf, for use inside printf arguments. */
const char *size_format(uint64_t bytes, char *buf, size_t len, enum size_mode mode);

/* Parse an unsigned 64-bit number: decimal, or hexadecimal with a 0x / 0X
 * prefix. Returns 0, -EINVAL (empty, sign, garbage) or -ERANGE. */
int u64_parse(const char *s, uint64_t *out);

#endif
