// SPDX-License-Identifier: GPL-2.0-only
/* Checksums: the four algorithms give the published test vectors in the
 * byte order btrfs stores them, and the dir-item name hash matches the key
 * mkfs.btrfs wrote for "default" in the root tree of a real filesystem. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <btk/csum.h>
#include <btk/tree.h>
#include "tests/unit/fixtures.h"

/* Bit-at-a-time crc32c (Castagnoli, reflected 0x82F63B78), raw register in
 * and out: an implementation independent of the ISA-L one under test. */
static uint32_t ref_crc32c(uint32_t crc, const void *data, size_t len)
{
	const uint8_t *p = data;

	while (len--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0x82F63B78U & (0U - (crc & 1)));
	}
	return crc;
}

static void hex_to_bytes(const char *hex, uint8_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		cr_assert_eq(sscanf(hex + 2 * i, "%2x", &v), 1);
		out[i] = (uint8_t)v;
	}
}

/* csum_compute(type, data) must equal the expected digest bytes, zero-padded to 32. */
static void expect_digest(unsigned type, const char *data, const uint8_t *want, size_t want_len)
{
	uint8_t out[BTRFS_CSUM_SIZE], padded[BTRFS_CSUM_SIZE] = { 0 };

	memset(out, 0xcc, sizeof(out));
	cr_assert_eq(csum_compute(type, data, strlen(data), out), 0, "%s", csum_name(type));
	memcpy(padded, want, want_len);
	cr_assert_arr_eq(out, padded, BTRFS_CSUM_SIZE, "%s(\"%s\") differs from the test vector",
			 csum_name(type), data);
}

Test(csum, crc32c_check_value)
{
	/* the CRC-32C "check" value; btrfs stores the inverted register, little-endian */
	const uint8_t want[4] = { 0x83, 0x92, 0x06, 0xe3 };

	cr_assert_eq(~crc32c_btrfs(~0U, "123456789", 9), 0xe3069283U);
	expect_digest(BTRFS_CSUM_TYPE_CRC32, "123456789", want, 4);
	cr_assert_eq(~crc32c_btrfs(~0U, "", 0), 0U);
}

Test(csum, crc32c_matches_reference_for_all_lengths_and_seeds)
{
	/* ISA-L switches to vector code for long and unaligned buffers: cover both */
	static uint8_t buf[5000];
	uint32_t x = 1;

	for (size_t i = 0; i < sizeof(buf); i++) {
		x = x * 1664525 + 1013904223;
		buf[i] = (uint8_t)(x >> 24);
	}
	for (size_t len = 0; len < 300; len++)
		cr_assert_eq(crc32c_btrfs(~0U, buf + (len & 7), len), ref_crc32c(~0U, buf + (len & 7), len),
			     "length %zu", len);
	cr_assert_eq(crc32c_btrfs(0x12345678, buf, sizeof(buf)), ref_crc32c(0x12345678, buf, sizeof(buf)));
	cr_assert_eq(crc32c_btrfs(~0U, buf + 3, 4093), ref_crc32c(~0U, buf + 3, 4093));
	cr_assert_eq(crc32c_btrfs(0, buf, 4096), ref_crc32c(0, buf, 4096));
}

Test(csum, xxhash64_vectors)
{
	/* XXH64 with seed 0; btrfs stores the 64-bit value little-endian */
	const uint8_t empty[8] = { 0x99, 0xe9, 0xd8, 0x51, 0x37, 0xdb, 0x46, 0xef };
	const uint8_t abc[8] = { 0x99, 0x09, 0x77, 0xad, 0xf5, 0x2c, 0xbc, 0x44 };

	expect_digest(BTRFS_CSUM_TYPE_XXHASH, "", empty, 8);
	expect_digest(BTRFS_CSUM_TYPE_XXHASH, "abc", abc, 8);
}

Test(csum, sha256_vectors)
{
	uint8_t abc[32], empty[32];

	hex_to_bytes("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", abc, 32);
	hex_to_bytes("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", empty, 32);
	expect_digest(BTRFS_CSUM_TYPE_SHA256, "abc", abc, 32);
	expect_digest(BTRFS_CSUM_TYPE_SHA256, "", empty, 32);
}

Test(csum, blake2b_256_vectors)
{
	uint8_t abc[32], empty[32];

	hex_to_bytes("bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319", abc, 32);
	hex_to_bytes("0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8", empty, 32);
	expect_digest(BTRFS_CSUM_TYPE_BLAKE2, "abc", abc, 32);
	expect_digest(BTRFS_CSUM_TYPE_BLAKE2, "", empty, 32);
}

Test(csum, unknown_type_is_rejected)
{
	uint8_t out[BTRFS_CSUM_SIZE];

	memset(out, 0xcc, sizeof(out));
	cr_assert_eq(csum_compute(4, "abc", 3, out), -EINVAL);
	cr_assert_eq(csum_compute(0xffff, "abc", 3, out), -EINVAL);
}

Test(csum, sizes_and_names)
{
	cr_assert_eq(csum_size(BTRFS_CSUM_TYPE_CRC32), 4);
	cr_assert_eq(csum_size(BTRFS_CSUM_TYPE_XXHASH), 8);
	cr_assert_eq(csum_size(BTRFS_CSUM_TYPE_SHA256), 32);
	cr_assert_eq(csum_size(BTRFS_CSUM_TYPE_BLAKE2), 32);
	cr_assert_eq(csum_size(4), 0);
	cr_assert_eq(csum_size(0xffff), 0);
	cr_assert_str_eq(csum_name(BTRFS_CSUM_TYPE_CRC32), "crc32c");
	cr_assert_str_eq(csum_name(BTRFS_CSUM_TYPE_XXHASH), "xxhash64");
	cr_assert_str_eq(csum_name(BTRFS_CSUM_TYPE_SHA256), "sha256");
	cr_assert_str_eq(csum_name(BTRFS_CSUM_TYPE_BLAKE2), "blake2b");
	cr_assert_null(csum_name(4));
	cr_assert_null(csum_name(0xffff));
}

Test(csum, name_hash_of_default_matches_mkfs)
{
	/* `btrfs inspect-internal dump-tree -t root` of any mkfs'd filesystem:
	 *   item 6 key (ROOT_TREE_DIR DIR_ITEM 2378154706) ... name: default */
	cr_assert_eq(btrfs_name_hash("default", 7), 2378154706ULL);
	cr_assert_eq(btrfs_name_hash("default", 7), ref_crc32c((uint32_t)~1U, "default", 7));
	cr_assert_eq(btrfs_name_hash("", 0), (uint64_t)(uint32_t)~1U);
}

Test(csum, name_hash_finds_default_dir_item_in_real_root_tree)
{
	struct fs_info *fs = fixture_open("small", NULL);
	struct btrfs_key key = { BTRFS_ROOT_TREE_DIR_OBJECTID, BTRFS_DIR_ITEM_KEY,
				 btrfs_name_hash("default", 7) };
	uint8_t item[256];
	uint32_t size = sizeof(item);
	int ret = tree_lookup(fs, &fs->tree_root, &key, item, &size);

	cr_assert_eq(ret, 0, "no DIR_ITEM keyed by the hash of \"default\": %d %s", ret, btk_error_msg());
	cr_assert_geq(size, sizeof(struct btrfs_dir_item) + 7);
	cr_assert_eq(dir_item_name_len(item), 7);
	cr_assert_eq(memcmp(item + sizeof(struct btrfs_dir_item), "default", 7), 0);
	fs_close(fs);
}

Test(csum, extref_hash_is_crc32c_seeded_with_parent)
{
	cr_assert_eq(btrfs_extref_hash(256, "name", 4), ref_crc32c(256, "name", 4));
	cr_assert_eq(btrfs_extref_hash(0x100000101ULL, "name", 4), ref_crc32c(0x101, "name", 4));
	cr_assert_neq(btrfs_extref_hash(256, "name", 4), btrfs_extref_hash(257, "name", 4));
}
