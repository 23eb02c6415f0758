// SPDX-License-Identifier: LGPL-2.1-or-later
/* Checksums: crc32c (ISA-L), xxhash64 (libxxhash), sha256 and blake2b-256 (libgcrypt). */
#include <errno.h>
#include <gcrypt.h>
#include <isa-l/crc.h>
#include <pthread.h>
#include <string.h>
#include <xxhash.h>

#include <btk/csum.h>

static pthread_once_t gcrypt_once = PTHREAD_ONCE_INIT;

static void gcrypt_setup(void)
{
	/* Hashing only: no secure memory needed. */
	gcry_check_version(NULL);
	gcry_control(GCRYCTL_DISABLE_SECMEM, 0);
	gcry_control(GCRYCTL_INITIALIZATION_FINISHED, 0);
}

unsigned csum_size(unsigned csum_type)
{
	switch (csum_type) {
	case BTRFS_CSUM_TYPE_CRC32: return 4;
	case BTRFS_CSUM_TYPE_XXHASH: return 8;
	case BTRFS_CSUM_TYPE_SHA256: return 32;
	case BTRFS_CSUM_TYPE_BLAKE2: return 32;
	default: return 0;
	}
}

const char *csum_name(unsigned csum_type)
{
	switch (csum_type) {
	case BTRFS_CSUM_TYPE_CRC32: return "crc32c";
	case BTRFS_CSUM_TYPE_XXHASH: return "xxhash64";
	case BTRFS_CSUM_TYPE_SHA256: return "sha256";
	case BTRFS_CSUM_TYPE_BLAKE2: return "blake2b";
	default: return NULL;
	}
}

/* ISA-L's crc32_iscsi takes and returns the raw register: the btrfs
 * convention (seed ~0 in, result inverted out) is applied by the caller. */
uint32_t crc32c_btrfs(uint32_t seed, const void *data, size_t len)
{
	return crc32_iscsi((unsigned char *)data, (int)len, seed);
}

uint64_t btrfs_name_hash(const void *name, size_t len)
{
	return crc32c_btrfs((uint32_t)~1U, name, len);
}

uint64_t btrfs_extref_hash(uint64_t parent_objectid, const void *name, size_t len)
{
	return crc32c_btrfs((uint32_t)parent_objectid, name, len);
}

uint64_t btrfs_extent_data_ref_hash(uint64_t root, uint64_t objectid, uint64_t offset)
{
	uint8_t le[8];
	uint32_t high, low;

	for (int i = 0; i < 8; i++)
		le[i] = (uint8_t)(root >> (8 * i));
	high = crc32c_btrfs(~0U, le, sizeof(le));
	for (int i = 0; i < 8; i++)
		le[i] = (uint8_t)(objectid >> (8 * i));
	low = crc32c_btrfs(~0U, le, sizeof(le));
	for (int i = 0; i < 8; i++)
		le[i] = (uint8_t)(offset >> (8 * i));
	low = crc32c_btrfs(low, le, sizeof(le));
	return ((uint64_t)high << 31) ^ (uint64_t)low;
}

static int gcrypt_digest(int algo, const void *data, size_t len, uint8_t *out)
{
	pthread_once(&gcrypt_once, gcrypt_setup);
	gcry_md_hash_buffer(algo, out, data, len);
	return 0;
}

int csum_compute(unsigned csum_type, const void *data, size_t len, uint8_t out[BTRFS_CSUM_SIZE])
{
	memset(out, 0, BTRFS_CSUM_SIZE);
	switch (csum_type) {
	case BTRFS_CSUM_TYPE_CRC32: {
		uint32_t crc = ~crc32c_btrfs(~0U, data, len);
		put_le32(out, crc);
		return 0;
	}
	case BTRFS_CSUM_TYPE_XXHASH:
		put_le64(out, XXH64(data, len, 0));
		return 0;
	case BTRFS_CSUM_TYPE_SHA256:
		return gcrypt_digest(GCRY_MD_SHA256, data, len, out);
	case BTRFS_CSUM_TYPE_BLAKE2:
		return gcrypt_digest(GCRY_MD_BLAKE2B_256, data, len, out);
	default:
		return -EINVAL;
	}
}
