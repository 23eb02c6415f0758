// SPDX-License-Identifier: GPL-2.0-only
/* Sizes on the command line and in output; see sizes.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include "common/sizes.h"

static const char *const binary_suffix[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Parse the leading run of digits in base 10 or 16 at *sp, advancing *sp.
 * At least one digit is required. */
static int parse_digits(const char **sp, unsigned base, uint64_t *out)
{
	const char *s = *sp;
	uint64_t v = 0;
	int d;

	if (hex_value(*s) < 0 || (unsigned)hex_value(*s) >= base)
		return -EINVAL;
	while ((d = hex_value(*s)) >= 0 && (unsigned)d < base) {
		if (v > (UINT64_MAX - (unsigned)d) / base)
			return -ERANGE;
		v = v * base + (unsigned)d;
		s++;
	}
	*sp = s;
	*out = v;
	return 0;
}

int u64_parse(const char *s, uint64_t *out)
{
	unsigned base = 10;
	uint64_t v;
	int ret;

	if (!s || !is_digit(*s))
		return -EINVAL;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		s += 2;
	}
	ret = parse_digits(&s, base, &v);
	if (ret)
		return ret;
	if (*s)
		return -EINVAL;
	*out = v;
	return 0;
}

/* Power of 1024 of a unit letter, or -1 if it is not one. */
static int unit_shift(char c)
{
	switch (c) {
	case 'k': case 'K': return 10;
	case 'm': case 'M': return 20;
	case 'g': case 'G': return 30;
	case 't': case 'T': return 40;
	case 'p': case 'P': return 50;
	case 'e': case 'E': return 60;
	default: return -1;
	}
}

int size_parse(const char *s, uint64_t *out)
{
	uint64_t v;
	int shift = 0;
	int ret;

	if (!s || !is_digit(*s))
		return -EINVAL;
	ret = parse_digits(&s, 10, &v);
	if (ret)
		return ret;
	if (*s && unit_shift(*s) >= 0) {
		shift = unit_shift(*s++);
		if (*s == 'i' || *s == 'I')
			s++;
	}
	if (*s == 'b' || *s == 'B')
		s++;
	if (*s)
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = v << shift;
	return 0;
}

/* pretty_size() of btrfs-progs: divide by 1024 while the value is at least
 * 1024, then print the value before the last (truncating) division, divided
 * by 1024, with two decimals. Done in double, which is exact here as the
 * dividend is below 2^20. */
static void format_human(uint64_t bytes, char *buf, size_t len)
{
	uint64_t last = bytes;
	unsigned divs = 0;
	double value;

	while (bytes >= 1024) {
		last = bytes;
		bytes /= 1024;
		divs++;
	}
	value = divs ? (double)last / 1024.0 : (double)last;
	snprintf(buf, len, "%.2f%s", value, binary_suffix[divs]);
}

static void format_exact(uint64_t bytes, char *buf, size_t len)
{
	unsigned divs = 0;

	while (bytes && (bytes & 1023) == 0 && divs < 6) {
		bytes >>= 10;
		divs++;
	}
	snprintf(buf, len, "%" PRIu64 "%s", bytes, binary_suffix[divs]);
}

const char *size_format(uint64_t bytes, char *buf, size_t len, enum size_mode mode)
{
	if (!len)
		return buf;
	switch (mode) {
	case SIZE_HUMAN:
		format_human(bytes, buf, len);
		break;
	case SIZE_EXACT:
		format_exact(bytes, buf, len);
		break;
	default:
		snprintf(buf, len, "%" PRIu64, bytes);
		break;
	}
	return buf;
}
