// SPDX-License-Identifier: GPL-2.0-only
/* Helpers shared by the filesystem-tree and subvolume checks: name
 * fingerprints, sorter budgets, reading a sorted stream group by group, and
 * the inode lookups the error paths use. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check/fs_check.h"
#include <btk/item_check.h>
#include <btk/tree.h>

uint64_t name_fingerprint(const uint8_t *name, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < len; i++) {
		h ^= name[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

int root_rec_cmp(const void *a, const void *b, void *arg)
{
	const struct root_rec *x = a, *y = b;

	(void)arg;
	if (x->a != y->a) return x->a < y->a ? -1 : 1;
	if (x->b != y->b) return x->b < y->b ? -1 : 1;
	if (x->c != y->c) return x->c < y->c ? -1 : 1;
	if (x->d != y->d) return x->d < y->d ? -1 : 1;
	if (x->kind != y->kind) return x->kind < y->kind ? -1 : 1;
	return 0;
}

size_t fs_check_sort_budget(const struct check_ctx *ctx, unsigned n)
{
	/* half of the budget for the sorters; the block cache has its own share */
	size_t b = check_sort_budget(ctx, 2 * (n ? n : 1));

	return b < 4 * RECSORT_MIN_BUDGET ? 4 * RECSORT_MIN_BUDGET : b;
}

int group_reader_init(struct group_reader *g, struct recsort *rs, int (*same_group)(const void *, const void *))
{
	memset(g, 0, sizeof(*g));
	g->rs = rs;
	g->same_group = same_group;
	g->size = recsort_record_size(rs);
	g->buf = malloc(g->size * (FS_GROUP_MAX + 1));
	return g->buf ? 0 : -ENOMEM;
}

int group_reader_next(struct group_reader *g, size_t *n, bool *more)
{
	uint8_t *next = g->buf + g->size * FS_GROUP_MAX;   /* the look-ahead record */
	const void *rec;
	int ret;

	*n = 0;
	*more = false;
	if (!g->have_next) {
		ret = recsort_next(g->rs, &rec);
		if (ret <= 0)
			return ret;
		g->records++;
		memcpy(next, rec, g->size);
	}
	memcpy(g->buf, next, g->size);
	*n = 1;
	g->have_next = false;
	while ((ret = recsort_next(g->rs, &rec)) == 1) {
		g->records++;
		if (!g->same_group(g->buf, rec)) {
			memcpy(next, rec, g->size);
			g->have_next = true;
			break;
		}
		if (*n < FS_GROUP_MAX)
			memcpy(g->buf + g->size * (*n)++, rec, g->size);
		else
			*more = true;
	}
	return ret < 0 ? ret : 1;
}

void group_reader_free(struct group_reader *g)
{
	free(g->buf);
	g->buf = NULL;
}

const struct tree_root_ptr *fs_roots_find(const struct fs_roots *r, uint64_t id)
{
	size_t lo = 0, hi = r->n;

	while (lo < hi) {   /* the list is in root-tree (id) order */
		size_t mid = (lo + hi) / 2;
		if (r->v[mid].objectid == id)
			return &r->v[mid];
		if (r->v[mid].objectid < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

int fs_lookup_inode(struct check_ctx *ctx, const struct tree_root_ptr *root, uint64_t ino, uint32_t *mode,
		    uint32_t *nlink)
{
	struct btrfs_key key = { ino, BTRFS_INODE_ITEM_KEY, 0 };
	uint8_t buf[sizeof(struct btrfs_inode_item)];
	uint32_t size = sizeof(buf);
	struct item_view v;
	int ret;

	if (!root)
		return 0;
	ret = tree_lookup(ctx->fs, root, &key, buf, &size);
	if (ret == -ENOENT)
		return 0;
	if (ret)
		return ret;
	v = item_view_copied(buf, sizeof(buf), size);
	if (!item_view_has_fixed(&v, key.type))
		return 0;
	*mode = inode_mode(buf);
	*nlink = inode_nlink(buf);
	return 1;
}

uint8_t mode_to_ftype(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return BTRFS_FT_REG_FILE;
	case S_IFDIR: return BTRFS_FT_DIR;
	case S_IFCHR: return BTRFS_FT_CHRDEV;
	case S_IFBLK: return BTRFS_FT_BLKDEV;
	case S_IFIFO: return BTRFS_FT_FIFO;
	case S_IFSOCK: return BTRFS_FT_SOCK;
	case S_IFLNK: return BTRFS_FT_SYMLINK;
	default: return BTRFS_FT_UNKNOWN;
	}
}
