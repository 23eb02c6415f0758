// SPDX-License-Identifier: GPL-2.0-only
/* Planning a profile change: which chunks change, which stripes stay,
 * where new stripes go. Only the mirror family (single, DUP, RAID1,
 * RAID1C3, RAID1C4) keeps every block at its logical address. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/sizes.h"
#include "convert/convert.h"
#include <btk/item_check.h>
#include <btk/volumes.h>

#define MIRROR_FAMILY                                                                      \
	(BTRFS_BLOCK_GROUP_DUP | BTRFS_BLOCK_GROUP_RAID1 | BTRFS_BLOCK_GROUP_RAID1C3 |         \
	 BTRFS_BLOCK_GROUP_RAID1C4)

int profile_parse(const char *s, uint64_t *profile, char *msg, size_t msglen)
{
	static const struct { const char *name; uint64_t bits; } names[] = {
		{ "single", 0 }, { "dup", BTRFS_BLOCK_GROUP_DUP }, { "raid1", BTRFS_BLOCK_GROUP_RAID1 },
		{ "raid1c3", BTRFS_BLOCK_GROUP_RAID1C3 }, { "raid1c4", BTRFS_BLOCK_GROUP_RAID1C4 },
	};
	static const char *const striped[] = { "raid0", "raid10", "raid5", "raid6" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcasecmp(s, names[i].name)) {
			*profile = names[i].bits;
			return 0;
		}
	for (size_t i = 0; i < sizeof(striped) / sizeof(striped[0]); i++)
		if (!strcasecmp(s, striped[i])) {
			snprintf(msg, msglen, "%s spreads blocks over devices, so converting to it moves every "
				 "block: use 'btrfs balance start -mconvert=%s' on the mounted filesystem", s, s);
			return -EINVAL;
		}
	snprintf(msg, msglen, "unknown profile '%s' (single, dup, raid1, raid1c3, raid1c4)", s);
	return -EINVAL;
}

/* Target profile for a chunk type, or -1 when it does not change. */
static int64_t target_for(const struct profile_targets *tg, uint64_t type)
{
	if (type & BTRFS_BLOCK_GROUP_SYSTEM)
		return tg->have_sys ? (int64_t)tg->sys : -1;
	if ((type & BTRFS_BLOCK_GROUP_DATA) && (type & BTRFS_BLOCK_GROUP_METADATA)) {
		if (tg->have_meta && tg->have_data && tg->meta == tg->data)
			return (int64_t)tg->meta;
		return -1;
	}
	if (type & BTRFS_BLOCK_GROUP_METADATA)
		return tg->have_meta ? (int64_t)tg->meta : -1;
	return tg->have_data ? (int64_t)tg->data : -1;
}

/* A mixed (data and metadata) chunk asked to change with only one of its
 * two kinds, or to two different profiles: the change is not clear. */
static bool mixed_target_unclear(const struct profile_targets *tg, uint64_t type)
{
	uint64_t cur = type & BTRFS_BLOCK_GROUP_PROFILE_MASK;

	if (!(type & BTRFS_BLOCK_GROUP_DATA) || !(type & BTRFS_BLOCK_GROUP_METADATA))
		return false;
	return (tg->have_meta && tg->meta != cur) || (tg->have_data && tg->data != cur);
}

static bool device_used(const struct stripe_place *v, unsigned n, uint64_t devid)
{
	for (unsigned i = 0; i < n; i++)
		if (v[i].devid == devid)
			return true;
	return false;
}

/* Keep old stripes that fit the target (DUP: all on one device; RAIDx:
 * distinct devices), then place new ones in free device space. */
static int plan_stripes(struct fs_info *fs, struct chunk_plan *p, const struct chunk_plan *done, size_t ndone,
			char *msg, size_t msglen)
{
	unsigned want = profile_copies(p->new_profile);
	bool dup = p->new_profile == BTRFS_BLOCK_GROUP_DUP;
	struct stripe_place *avoid;
	uint64_t *avoid_len;
	unsigned navoid = 0;
	size_t cap = want;
	int ret = 0;

	p->nnew = 0;
	for (unsigned i = 0; i < p->nold && p->nnew < want; i++) {
		const struct stripe_place *s = &p->old_stripes[i];
		if (dup ? (p->nnew && s->devid != p->new_stripes[0].devid)
			: device_used(p->new_stripes, p->nnew, s->devid))
			continue;
		p->added[p->nnew] = false;
		p->new_stripes[p->nnew++] = *s;
	}
	/* device space promised to earlier plans is not free any more: all of it
	 * (a large filesystem gains thousands of stripes in one conversion) */
	for (size_t k = 0; k < ndone; k++)
		cap += done[k].nnew;
	avoid = malloc(cap * sizeof(*avoid));
	avoid_len = malloc(cap * sizeof(*avoid_len));
	if (!avoid || !avoid_len) {
		ret = -ENOMEM;
		goto out;
	}
	for (size_t k = 0; k < ndone; k++)
		for (unsigned i = 0; i < done[k].nnew; i++)
			if (done[k].added[i]) {
				avoid[navoid] = done[k].new_stripes[i];
				avoid_len[navoid++] = done[k].stripe_size;
			}
	while (p->nnew < want) {
		uint64_t best_dev = 0, best_phys = 0, best_free = 0;
		for (unsigned d = 0; d < fs_num_devices(fs); d++) {
			const struct fs_device *dev = fs_device(fs, d);
			uint64_t phys;
			if (!dev->io || (dup ? dev->devid != p->new_stripes[0].devid
					     : device_used(p->new_stripes, p->nnew, dev->devid)))
				continue;
			if (device_find_free(fs, dev->devid, p->stripe_size, avoid, avoid_len, navoid, &phys))
				continue;
			/* prefer the device with the most room after the stripe */
			if (!best_dev || dev->total_bytes - phys > best_free) {
				best_dev = dev->devid;
				best_phys = phys;
				best_free = dev->total_bytes - phys;
			}
		}
		if (!best_dev) {
			snprintf(msg, msglen, "chunk %llu: no device has %llu bytes free for another %s copy%s",
				 (unsigned long long)p->logical, (unsigned long long)p->stripe_size,
				 profile_name(p->new_profile),
				 dup ? "" : " (each copy needs its own device)");
			ret = -ENOSPC;
			goto out;
		}
		p->added[p->nnew] = true;
		p->new_stripes[p->nnew++] = (struct stripe_place){ best_dev, best_phys };
		avoid[navoid] = p->new_stripes[p->nnew - 1];
		avoid_len[navoid++] = p->stripe_size;
	}
out:
	free(avoid);
	free(avoid_len);
	return ret;
}

/* Copies of a chunk with these stripes that a target profile can keep:
 * DUP keeps those on one device, the RAID1 family one per device. */
static unsigned stripes_kept(const struct chunk *c, uint64_t target)
{
	unsigned best = 0, distinct = 0;

	for (unsigned i = 0; i < c->num_stripes; i++) {
		unsigned same = 0, earlier = 0;
		for (unsigned k = 0; k < c->num_stripes; k++) {
			same += c->stripes[k].devid == c->stripes[i].devid;
			earlier += k < i && c->stripes[k].devid == c->stripes[i].devid;
		}
		best = same > best ? same : best;
		distinct += earlier == 0;
	}
	return target == BTRFS_BLOCK_GROUP_DUP ? best : distinct;
}

static int add_dev_extent_len(void *arg, const struct btrfs_key *key, const uint8_t *data, uint32_t size)
{
	struct item_view v = item_view_of(data, size);

	if (item_view_has_fixed(&v, key->type))
		*(uint64_t *)arg += dev_extent_length(data);
	return 0;
}

/* A refusal for want of device space says how much the whole conversion
 * needs for its new copies and how much each device has unallocated. */
static void append_space_note(struct fs_info *fs, const struct profile_targets *tg, char *msg, size_t msglen)
{
	uint64_t need = 0;
	size_t len;
	char s1[SIZE_BUF_LEN];

	for (size_t i = 0; i < fs_chunk_count(fs); i++) {
		const struct chunk *c = fs_chunk(fs, i);
		int64_t target = target_for(tg, c->type);
		unsigned want, kept;
		if (target < 0 || (uint64_t)target == (c->type & BTRFS_BLOCK_GROUP_PROFILE_MASK))
			continue;
		want = profile_copies((uint64_t)target);
		kept = stripes_kept(c, (uint64_t)target);
		if (want > kept)
			need += (want - kept) * chunk_stripe_size(c->length, c->type, c->num_stripes, c->sub_stripes);
	}
	len = strlen(msg);
	snprintf(msg + len, msglen - len, "; the new copies need %s of unallocated device space in all, the devices have",
		 size_format(need, s1, sizeof(s1), SIZE_HUMAN));
	for (unsigned d = 0; d < fs_num_devices(fs); d++) {
		uint64_t used = 1ULL << 20;   /* the first MiB of a device is never allocated */
		if (volumes_each_dev_extent(fs, &fs->dev_root, fs_device(fs, d)->devid, add_dev_extent_len, &used) < 0)
			continue;
		len = strlen(msg);
		snprintf(msg + len, msglen - len, "%s %s (devid %llu)", d ? "," : "",
			 size_format(fs_device(fs, d)->total_bytes > used ? fs_device(fs, d)->total_bytes - used : 0, s1,
				     sizeof(s1), SIZE_HUMAN),
			 (unsigned long long)fs_device(fs, d)->devid);
	}
}

int profile_plan(struct fs_info *fs, const struct profile_targets *tg, struct chunk_plan **plans,
		 size_t *nplans, char *msg, size_t msglen)
{
	struct chunk_plan *v = calloc(fs_chunk_count(fs) ? fs_chunk_count(fs) : 1, sizeof(*v));
	size_t n = 0;

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < fs_chunk_count(fs); i++) {
		const struct chunk *c = fs_chunk(fs, i);
		uint64_t cur = c->type & BTRFS_BLOCK_GROUP_PROFILE_MASK;
		int64_t target = target_for(tg, c->type);
		struct chunk_plan *p = &v[n];
		unsigned devices = 0;
		int ret;

		if (target < 0 && mixed_target_unclear(tg, c->type)) {
			snprintf(msg, msglen, "chunk %llu holds data and metadata (mixed block groups): give --metadata "
				 "and --data the same profile", (unsigned long long)c->logical);
			free(v);
			return -EINVAL;
		}
		if (target < 0 || (uint64_t)target == cur)
			continue;
		if (cur & ~MIRROR_FAMILY) {
			snprintf(msg, msglen, "chunk %llu is %s: blocks of striped profiles move when the "
				 "profile changes; use 'btrfs balance' on the mounted filesystem",
				 (unsigned long long)c->logical, profile_name(cur));
			free(v);
			return -EINVAL;
		}
		for (unsigned d = 0; d < fs_num_devices(fs); d++)
			devices += fs_device(fs, d)->io != NULL;
		if ((uint64_t)target != BTRFS_BLOCK_GROUP_DUP && profile_copies((uint64_t)target) > devices) {
			snprintf(msg, msglen, "%s needs %u devices; the filesystem has %u",
				 profile_name((uint64_t)target), profile_copies((uint64_t)target), devices);
			free(v);
			return -EINVAL;
		}
		if (c->num_stripes > 8) {
			free(v);
			return -EINVAL;
		}
		p->logical = c->logical;
		p->length = c->length;
		p->type = c->type;
		p->stripe_size = chunk_stripe_size(c->length, c->type, c->num_stripes, c->sub_stripes);
		p->new_profile = (uint64_t)target;
		p->nold = c->num_stripes;
		for (unsigned s = 0; s < c->num_stripes; s++)
			p->old_stripes[s] = (struct stripe_place){ c->stripes[s].devid, c->stripes[s].physical };
		ret = plan_stripes(fs, p, v, n, msg, msglen);
		if (ret == -ENOSPC)
			append_space_note(fs, tg, msg, msglen);
		if (ret) {
			free(v);
			return ret;
		}
		n++;
	}
	*plans = v;
	*nplans = n;
	return 0;
}

/* Does old stripe i of the plan stay in the new stripe set? */
bool plan_old_stays(const struct chunk_plan *p, unsigned i)
{
	for (unsigned k = 0; k < p->nnew; k++)
		if (!p->added[k] && p->new_stripes[k].devid == p->old_stripes[i].devid &&
		    p->new_stripes[k].physical == p->old_stripes[i].physical)
			return true;
	return false;
}

/* The open device with this devid, or NULL: where a plan's stripe is read and written. */
struct io_dev *convert_device_io(struct fs_info *fs, uint64_t devid)
{
	for (unsigned i = 0; i < fs_num_devices(fs); i++)
		if (fs_device(fs, i)->devid == devid)
			return fs_device(fs, i)->io;
	return NULL;
}
