// SPDX-License-Identifier: GPL-2.0-only
/* Sizes as a user types them and as btk prints them: the binary units of
 * btrfs-progs, its pretty_size() output, and hex/decimal numbers. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include "common/sizes.h"

static uint64_t parsed(const char *s)
{
	uint64_t v = 0xdeadbeef;
	int ret = size_parse(s, &v);

	cr_assert_eq(ret, 0, "size_parse(\"%s\") = %d", s, ret);
	return v;
}

static void rejected(const char *s, int err)
{
	uint64_t v = 12345;
	int ret = size_parse(s, &v);

	cr_assert_eq(ret, err, "size_parse(\"%s\") = %d, want %d", s, ret, err);
	cr_assert_eq(v, 12345, "size_parse(\"%s\") changed the output on error", s);
}

Test(size_parse, plain_bytes)
{
	cr_assert_eq(parsed("0"), 0);
	cr_assert_eq(parsed("4096"), 4096);
	cr_assert_eq(parsed("4096B"), 4096);
	cr_assert_eq(parsed("18446744073709551615"), UINT64_MAX);
}

Test(size_parse, binary_units_any_case)
{
	cr_assert_eq(parsed("16K"), 16384);
	cr_assert_eq(parsed("16k"), 16384);
	cr_assert_eq(parsed("16KiB"), 16384);
	cr_assert_eq(parsed("16kib"), 16384);
	cr_assert_eq(parsed("16Ki"), 16384);
	cr_assert_eq(parsed("16KB"), 16384);
	cr_assert_eq(parsed("16M"), 16ull << 20);
	cr_assert_eq(parsed("512MB"), 512ull << 20);
	cr_assert_eq(parsed("2G"), 2ull << 30);
	cr_assert_eq(parsed("2GiB"), 2ull << 30);
	cr_assert_eq(parsed("1T"), 1ull << 40);
	cr_assert_eq(parsed("3P"), 3ull << 50);
	cr_assert_eq(parsed("15E"), 15ull << 60);
}

Test(size_parse, rejects_garbage)
{
	rejected("", -EINVAL);
	rejected("K", -EINVAL);
	rejected("-1", -EINVAL);
	rejected("+1", -EINVAL);
	rejected(" 1", -EINVAL);
	rejected("1 ", -EINVAL);
	rejected("1.5G", -EINVAL);
	rejected("16X", -EINVAL);
	rejected("16KK", -EINVAL);
	rejected("16KiBs", -EINVAL);
	rejected("16i", -EINVAL);
	rejected("0x10", -EINVAL);
	cr_assert_eq(size_parse(NULL, &(uint64_t){ 0 }), -EINVAL);
}

Test(size_parse, rejects_overflow)
{
	rejected("18446744073709551616", -ERANGE);
	rejected("99999999999999999999999", -ERANGE);
	rejected("16E", -ERANGE);
	rejected("16384P", -ERANGE);
	cr_assert_eq(parsed("16383P"), 16383ull << 50);
}

Test(u64_parse, decimal_and_hex)
{
	uint64_t v;

	cr_assert_eq(u64_parse("0", &v), 0);
	cr_assert_eq(v, 0);
	cr_assert_eq(u64_parse("30408704", &v), 0);
	cr_assert_eq(v, 30408704);
	cr_assert_eq(u64_parse("010", &v), 0);
	cr_assert_eq(v, 10, "a leading zero is not octal");
	cr_assert_eq(u64_parse("0x1d00000", &v), 0);
	cr_assert_eq(v, 0x1d00000);
	cr_assert_eq(u64_parse("0XFFFFFFFFFFFFFFFF", &v), 0);
	cr_assert_eq(v, UINT64_MAX);
	cr_assert_eq(u64_parse("18446744073709551615", &v), 0);
	cr_assert_eq(v, UINT64_MAX);
}

Test(u64_parse, rejects)
{
	uint64_t v = 7;

	cr_assert_eq(u64_parse("", &v), -EINVAL);
	cr_assert_eq(u64_parse("0x", &v), -EINVAL);
	cr_assert_eq(u64_parse("-1", &v), -EINVAL);
	cr_assert_eq(u64_parse(" 1", &v), -EINVAL);
	cr_assert_eq(u64_parse("12a", &v), -EINVAL);
	cr_assert_eq(u64_parse("0x12g", &v), -EINVAL);
	cr_assert_eq(u64_parse("16K", &v), -EINVAL);
	cr_assert_eq(u64_parse("18446744073709551616", &v), -ERANGE);
	cr_assert_eq(u64_parse("0x10000000000000000", &v), -ERANGE);
	cr_assert_eq(v, 7);
}

static void formats_as(uint64_t bytes, enum size_mode mode, const char *want)
{
	char buf[SIZE_BUF_LEN];
	const char *got = size_format(bytes, buf, sizeof(buf), mode);

	cr_assert_eq(got, buf);
	cr_assert_str_eq(got, want, "size_format(%llu, %d) = \"%s\", want \"%s\"",
			 (unsigned long long)bytes, mode, got, want);
}

Test(size_format, raw)
{
	formats_as(0, SIZE_RAW, "0");
	formats_as(1610612736, SIZE_RAW, "1610612736");
	formats_as(UINT64_MAX, SIZE_RAW, "18446744073709551615");
}

/* The same text as btrfs-progs pretty_size(), so outputs can be compared. */
Test(size_format, human_like_btrfs_progs)
{
	formats_as(0, SIZE_HUMAN, "0.00B");
	formats_as(512, SIZE_HUMAN, "512.00B");
	formats_as(1023, SIZE_HUMAN, "1023.00B");
	formats_as(1024, SIZE_HUMAN, "1.00KiB");
	formats_as(1536, SIZE_HUMAN, "1.50KiB");
	formats_as(16384, SIZE_HUMAN, "16.00KiB");
	formats_as(1048575, SIZE_HUMAN, "1024.00KiB");
	formats_as(8ull << 20, SIZE_HUMAN, "8.00MiB");
	formats_as(1610612736, SIZE_HUMAN, "1.50GiB");
	formats_as(5ull << 40, SIZE_HUMAN, "5.00TiB");
	formats_as(3ull << 50, SIZE_HUMAN, "3.00PiB");
	formats_as(UINT64_MAX, SIZE_HUMAN, "16.00EiB");
}

Test(size_format, exact_round_trips)
{
	static const uint64_t values[] = { 0, 1, 4097, 16384, 1536ull << 20, 1ull << 30,
					   UINT64_MAX, 15ull << 60, 3ull << 40 };
	char buf[SIZE_BUF_LEN];
	size_t i;

	formats_as(0, SIZE_EXACT, "0B");
	formats_as(4097, SIZE_EXACT, "4097B");
	formats_as(16384, SIZE_EXACT, "16KiB");
	formats_as(1536ull << 20, SIZE_EXACT, "1536MiB");
	formats_as(1ull << 30, SIZE_EXACT, "1GiB");
	formats_as(1ull << 62, SIZE_EXACT, "4EiB");
	for (i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		uint64_t back;

		size_format(values[i], buf, sizeof(buf), SIZE_EXACT);
		cr_assert_eq(size_parse(buf, &back), 0, "\"%s\" does not parse", buf);
		cr_assert_eq(back, values[i], "\"%s\" parses to %llu", buf, (unsigned long long)back);
	}
}

Test(size_format, truncates_to_buffer)
{
	char buf[4];

	size_format(1610612736, buf, sizeof(buf), SIZE_RAW);
	cr_assert_str_eq(buf, "161");
	cr_assert_eq(size_format(1, buf, 0, SIZE_RAW), buf);
}
