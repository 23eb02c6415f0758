// SPDX-License-Identifier: LGPL-2.1-or-later
/* Superblock reading and validation. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <btk/csum.h>
#include <btk/super.h>

#define WHY(...) (snprintf(why, whylen, __VA_ARGS__), -EUCLEAN)

static int is_power_of_2(uint64_t v)
{
	return v && !(v & (v - 1));
}

const uint8_t *super_metadata_fsid(const uint8_t *sb)
{
	if (super_incompat_flags(sb) & BTRFS_FEATURE_INCOMPAT_METADATA_UUID)
		return super_metadata_uuid_ptr(sb);
	return super_fsid_ptr(sb);
}

int super_update_csum(uint8_t *sb)
{
	uint8_t csum[BTRFS_CSUM_SIZE];
	int ret = csum_compute(super_csum_type(sb), sb + BTRFS_CSUM_SIZE,
			       BTRFS_SUPER_INFO_SIZE - BTRFS_CSUM_SIZE, csum);
	if (ret)
		return ret;
	memcpy(super_csum_ptr(sb), csum, BTRFS_CSUM_SIZE);
	return 0;
}

/* Geometry and tree-pointer sanity, after magic and checksum passed. */
static int super_validate_fields(const uint8_t *sb, char *why, size_t whylen)
{
	uint32_t sectorsize = super_sectorsize(sb);
	uint32_t nodesize = super_nodesize(sb);
	const uint8_t *dev = super_dev_item_ptr(sb);

	if (!is_power_of_2(sectorsize) || sectorsize < 4096 || sectorsize > 65536)
		return WHY("invalid sectorsize %u", sectorsize);
	if (!is_power_of_2(nodesize) || nodesize < sectorsize || nodesize > 65536)
		return WHY("invalid nodesize %u", nodesize);
	if (super_stripesize(sb) != 0 && !is_power_of_2(super_stripesize(sb)))
		return WHY("invalid stripesize %u", super_stripesize(sb));
	if (super_root(sb) % sectorsize || super_chunk_root(sb) % sectorsize ||
	    super_log_root(sb) % sectorsize)
		return WHY("tree root not aligned to sectorsize %u", sectorsize);
	if (!super_root(sb) || !super_chunk_root(sb))
		return WHY("root tree or chunk tree pointer is zero");
	if (super_root_level(sb) >= BTRFS_MAX_LEVEL || super_chunk_root_level(sb) >= BTRFS_MAX_LEVEL ||
	    super_log_root_level(sb) >= BTRFS_MAX_LEVEL)
		return WHY("tree root level out of range");
	if (super_sys_chunk_array_size(sb) > BTRFS_SYSTEM_CHUNK_ARRAY_SIZE)
		return WHY("system chunk array size %u too large", super_sys_chunk_array_size(sb));
	if (super_sys_chunk_array_size(sb) < sizeof(struct btrfs_disk_key) + chunk_item_size(1))
		return WHY("system chunk array too small (%u bytes)", super_sys_chunk_array_size(sb));
	if (super_num_devices(sb) == 0)
		return WHY("number of devices is 0");
	if (super_total_bytes(sb) == 0)
		return WHY("total_bytes is 0");
	if (super_generation(sb) == 0)
		return WHY("generation is 0");
	if (super_chunk_root_generation(sb) > super_generation(sb))
		return WHY("chunk root generation %llu is newer than the superblock's %llu",
			   (unsigned long long)super_chunk_root_generation(sb),
			   (unsigned long long)super_generation(sb));
	if (memcmp(dev_item_fsid_ptr(dev), super_metadata_fsid(sb), BTRFS_FSID_SIZE) != 0)
		return WHY("dev_item fsid does not match the metadata fsid");
	if (dev_item_devid(dev) == 0)
		return WHY("dev_item devid is 0");
	return 0;
}

int super_validate(const uint8_t *sb, uint64_t offset, char *why, size_t whylen)
{
	uint8_t csum[BTRFS_CSUM_SIZE];
	unsigned type, size;

	if (super_magic(sb) != BTRFS_MAGIC)
		return WHY("no btrfs magic");
	if (super_bytenr(sb) != offset)
		return WHY("bytenr %llu does not match its offset %llu",
			   (unsigned long long)super_bytenr(sb), (unsigned long long)offset);
	type = super_csum_type(sb);
	size = csum_size(type);
	if (!size)
		return WHY("unknown checksum type %u", type);
	csum_compute(type, sb + BTRFS_CSUM_SIZE, BTRFS_SUPER_INFO_SIZE - BTRFS_CSUM_SIZE, csum);
	if (memcmp(csum, super_csum_ptr(sb), size) != 0)
		return WHY("checksum mismatch");
	return super_validate_fields(sb, why, whylen);
}

int super_read_copy(struct io_dev *io, int mirror, uint8_t buf[BTRFS_SUPER_INFO_SIZE],
		    struct super_copy *info)
{
	uint64_t offset = btrfs_super_offset(mirror);
	int ret;

	memset(info, 0, sizeof(*info));
	info->mirror = mirror;
	info->offset = offset;
	ret = io_read(io, buf, BTRFS_SUPER_INFO_SIZE, offset);
	if (ret) {
		info->status = ret;
		snprintf(info->why, sizeof(info->why), "%s",
			 ret == -ENXIO ? "beyond the end of the device" : "read error");
		return ret;
	}
	if (super_magic(buf) == BTRFS_MAGIC)
		info->generation = super_generation(buf);
	info->status = super_validate(buf, offset, info->why, sizeof(info->why));
	return info->status;
}

int super_read_best(struct io_dev *io, int mirror, uint8_t buf[BTRFS_SUPER_INFO_SIZE],
		    struct super_copy copies[BTRFS_SUPER_MIRROR_MAX])
{
	uint8_t tmp[BTRFS_SUPER_INFO_SIZE];
	int best = -1;

	for (int i = 0; i < BTRFS_SUPER_MIRROR_MAX; i++) {
		if (super_read_copy(io, i, tmp, &copies[i]) != 0)
			continue;
		if (mirror >= 0 && i != mirror)
			continue;
		if (best < 0 || copies[i].generation > copies[best].generation) {
			best = i;
			memcpy(buf, tmp, BTRFS_SUPER_INFO_SIZE);
		}
	}
	if (best >= 0)
		return best;
	if (mirror >= 0)
		return copies[mirror].status ? copies[mirror].status : -EUCLEAN;
	/* Nothing valid: the primary's reason is the most useful one. */
	return copies[0].status == -ENXIO ? -ENXIO : -EUCLEAN;
}

bool super_copy_kept(uint64_t dev_total_bytes, int mirror)
{
	return !dev_total_bytes || btrfs_super_offset(mirror) + BTRFS_SUPER_INFO_SIZE < dev_total_bytes;
}

bool super_member_preferred(const uint8_t *sb, const uint8_t *cur)
{
	bool seed = super_flags(sb) & BTRFS_SUPER_FLAG_SEEDING, cur_seed = super_flags(cur) & BTRFS_SUPER_FLAG_SEEDING;

	if (seed != cur_seed)
		return cur_seed;
	if (memcmp(super_fsid_ptr(sb), super_fsid_ptr(cur), BTRFS_FSID_SIZE) != 0)
		return false;
	if (super_generation(sb) != super_generation(cur))
		return super_generation(sb) > super_generation(cur);
	return dev_item_devid(super_dev_item_ptr(sb)) < dev_item_devid(super_dev_item_ptr(cur));
}
