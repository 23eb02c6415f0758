// SPDX-License-Identifier: LGPL-2.1-or-later
/* Bulk leaf building (see leaf_build.h). */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include <btk/ctree_ops.h>
#include <btk/leaf_build.h>

static uint64_t entry_bytes(const struct leaf_entry *e)
{
	return CTREE_ITEM_SIZE + (uint64_t)e->size;
}

/* One pass of leaf_build_distribute: balanced aims each leaf at its share
 * of the bytes, else each leaf takes what fits (keeping one entry for each
 * leaf after it). */
static int distribute_pass(const struct leaf_entry *e, size_t n, size_t nleaves, uint32_t cap, bool balanced,
			   size_t *counts)
{
	uint64_t total = 0, cum = 0;
	size_t i = 0;

	for (size_t k = 0; k < n; k++)
		total += entry_bytes(&e[k]);
	for (size_t leaf = 0; leaf < nleaves; leaf++) {
		uint64_t target = total * (leaf + 1) / nleaves, used = 0;
		size_t start = i, leaves_after = nleaves - leaf - 1;

		while (i < n) {
			uint64_t w = entry_bytes(&e[i]);
			if (i > start && (used + w > cap || (balanced && cum + w > target && leaves_after)))
				break;
			if (i > start && n - i - 1 < leaves_after)
				break;
			if (used + w > cap)
				return -ENOSPC;
			used += w;
			cum += w;
			i++;
			if (n - i == leaves_after)
				break;
		}
		counts[leaf] = i - start;
	}
	return i == n ? 0 : -ENOSPC;
}

int leaf_build_distribute(const struct leaf_entry *e, size_t n, size_t nleaves, uint32_t nodesize,
			  size_t *counts)
{
	uint32_t cap;

	if (!ctree_nodesize_valid(nodesize) || !nleaves)
		return -EINVAL;
	if (n < nleaves)
		return -ENOSPC;
	cap = leaf_data_size(nodesize);
	if (!distribute_pass(e, n, nleaves, cap, true, counts))
		return 0;
	return distribute_pass(e, n, nleaves, cap, false, counts);
}

int leaf_build(uint8_t *leaf, uint32_t nodesize, const struct leaf_entry *e, size_t n)
{
	uint64_t total = 0;
	uint32_t end;

	if (!ctree_nodesize_valid(nodesize) || header_level(leaf) != 0)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (i && key_compare(&e[i - 1].key, &e[i].key) >= 0)
			return -EINVAL;
		total += entry_bytes(&e[i]);
	}
	if (total > leaf_data_size(nodesize))
		return -ENOSPC;
	memset(leaf + CTREE_HEADER_SIZE, 0, nodesize - CTREE_HEADER_SIZE);
	header_set_nritems(leaf, (uint32_t)n);
	end = leaf_data_size(nodesize);
	for (size_t i = 0; i < n; i++) {
		uint8_t *item = leaf_item(leaf, (unsigned)i);
		end -= e[i].size;
		key_to_disk(item_key_ptr(item), &e[i].key);
		item_set_offset(item, end);
		item_set_size(item, e[i].size);
		if (e[i].size)
			memcpy(leaf + CTREE_HEADER_SIZE + end, e[i].data, e[i].size);
	}
	return 0;
}
