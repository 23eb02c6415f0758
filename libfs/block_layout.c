// SPDX-License-Identifier: LGPL-2.1-or-later
/* Whether a tree block's items (a leaf) or pointers (a node) are laid out as
 * the format requires: a check of the buffer alone, shared by the verified
 * read (block.c) and the salvage of a block that fails it (block_salvage.c). */
#include <btk/block.h>

/* Leaf layout: item headers grow up from the header, data grows down from
 * the end; each item's data must lie in between, without overlap. */
static enum block_problem verify_leaf_items(const uint8_t *buf, uint32_t nodesize)
{
	uint32_t nritems = header_nritems(buf);
	uint32_t data_area = nodesize - (uint32_t)sizeof(struct btrfs_header);
	uint32_t prev_start = data_area;
	struct btrfs_key prev, key;

	if ((uint64_t)nritems * sizeof(struct btrfs_item) > data_area)
		return BLOCK_BAD_NRITEMS;
	for (uint32_t i = 0; i < nritems; i++) {
		const uint8_t *item = leaf_item(buf, i);
		uint32_t off = item_offset(item), size = item_size(item);

		key_from_disk(&key, item_key_ptr(item));
		if (i && key_compare(&prev, &key) >= 0)
			return BLOCK_BAD_ITEMS;
		prev = key;
		if ((uint64_t)off + size != prev_start)
			return BLOCK_BAD_ITEMS; /* items must be packed back to back */
		if (off < nritems * sizeof(struct btrfs_item))
			return BLOCK_BAD_ITEMS;
		prev_start = off;
	}
	return BLOCK_OK;
}

static enum block_problem verify_node_ptrs(const uint8_t *buf, uint32_t nodesize, uint32_t sectorsize)
{
	uint32_t nritems = header_nritems(buf);
	struct btrfs_key prev, key;

	if (nritems == 0 ||
	    (uint64_t)nritems * sizeof(struct btrfs_key_ptr) > nodesize - sizeof(struct btrfs_header))
		return BLOCK_BAD_NRITEMS;
	for (uint32_t i = 0; i < nritems; i++) {
		const uint8_t *ptr = node_key_ptr(buf, i);
		key_from_disk(&key, key_ptr_key_ptr(ptr));
		if (i && key_compare(&prev, &key) >= 0)
			return BLOCK_BAD_ITEMS;
		if (key_ptr_blockptr(ptr) == 0 || key_ptr_blockptr(ptr) % sectorsize)
			return BLOCK_BAD_ITEMS;   /* the kernel's tree checker refuses the node */
		prev = key;
	}
	return BLOCK_OK;
}

enum block_problem block_verify_layout(const struct fs_info *fs, const uint8_t *buf)
{
	return header_level(buf) == 0 ? verify_leaf_items(buf, fs->nodesize)
				       : verify_node_ptrs(buf, fs->nodesize, fs->sectorsize);
}
