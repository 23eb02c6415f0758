/* Filesystem trees: every subvolume (the top level, every subvolume and
 * snapshot, the data reloc tree) item by item in key order. The items of one
 * inode are contiguous, so per-inode checks keep one inode's state; names
 * (ref <-> dir item <-> dir index) and orphans are joined afterwards through
 * sorters that spill to disk, so memory does not grow with the number of
 * inodes. Subvolume trees are walked one by one: blocks shared between
 * snapshots are read again for each (the block cache absorbs part of it). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "check/phase_fs.h"
#include "check/repair_notes.h"
#include "common/messages.h"
#include "libfs/block.h"

static bool is_subvolume_tree(uint64_t id)
{
	return key_is_subvolume_id(id) || id == BTRFS_DATA_RELOC_TREE_OBJECTID;
}

static int collect_root(void *arg, const struct btrfs_key *key, const uint8_t *data, uint32_t size)
{
	struct fs_roots *out = arg;
	struct tree_root_ptr *v;

	if (key->type != BTRFS_ROOT_ITEM_KEY || !is_subvolume_tree(key->objectid) || size < BTRFS_ROOT_ITEM_V1_SIZE ||
	    root_item_refs(data) == 0 || !root_item_bytenr(data) || root_item_level(data) >= BTRFS_MAX_LEVEL)
		return 0;
	if ((out->n & (out->n - 1)) == 0 && out->n >= 16) {   /* grow at 16, 32, 64... */
		if (!(v = realloc(out->v, out->n * 2 * sizeof(*v))))
			return -ENOMEM;
		out->v = v;
	}
	out->bytes += root_item_bytes_used(data);
	out->v[out->n++] = (struct tree_root_ptr){ key->objectid, root_item_bytenr(data), root_item_generation(data),
						   root_item_level(data) };
	return 0;
}

/* The live subvolume trees (refs != 0; deleted ones await cleanup and may be
 * half dropped), in id order. Memory: one entry per subvolume. */
static int collect_roots(struct check_ctx *ctx, struct fs_roots *out)
{
	memset(out, 0, sizeof(*out));
	if (!(out->v = malloc(16 * sizeof(*out->v))))
		return -ENOMEM;
	return tree_each_item(ctx->fs, &ctx->fs->tree_root, collect_root, out);
}

static void inode_start(struct fs_walk *w, uint64_t ino)
{
	memset(&w->ino, 0, sizeof(w->ino));
	w->ino.ino = ino;
}

static int walk_item(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct fs_walk *w = arg;

	if (k->objectid == BTRFS_ORPHAN_OBJECTID && k->type == BTRFS_ORPHAN_ITEM_KEY) {
		struct link_rec r = { .root = w->root->objectid, .key = k->offset, .child = k->offset,
				      .kind = LINK_ORPHAN };
		fs_emit_link(w, w->orphans, &r);
		return w->err ? 1 : 0;
	}
	if (k->objectid < BTRFS_FIRST_FREE_OBJECTID || k->objectid > BTRFS_LAST_FREE_OBJECTID)
		return 0;   /* not an inode (free-inode cache and the like) */
	if (k->objectid != w->ino.ino) {
		fs_inode_finish(w);
		inode_start(w, k->objectid);
		if (k->type != BTRFS_INODE_ITEM_KEY && !fs_lost_inode(w->lost, w->root->objectid, k->objectid)) {
			report_problem(w->ctx, PR_INODE_ITEM_MISSING, "root %" PRIu64 " inode %" PRIu64
				       ": first item is of type %u", w->root->objectid, k->objectid, k->type);
			repair_note_inode_problem(w->ctx, PR_INODE_ITEM_MISSING, w->root->objectid, k->objectid);
		}
	}
	switch (k->type) {
	case BTRFS_INODE_ITEM_KEY: fs_item_inode(w, k, d, size); break;
	case BTRFS_INODE_REF_KEY: fs_item_inode_ref(w, k, d, size); break;
	case BTRFS_INODE_EXTREF_KEY: fs_item_inode_extref(w, k, d, size); break;
	case BTRFS_DIR_ITEM_KEY:
	case BTRFS_DIR_INDEX_KEY:
	case BTRFS_XATTR_ITEM_KEY: fs_item_dir_entries(w, k, d, size); break;
	case BTRFS_EXTENT_DATA_KEY: fs_item_file_extent(w, k, d, size); break;
	default: break;
	}
	if ((++w->items & 4095) == 0 && cli_cancelled())
		return 1;   /* progress: fs_walk_items counts the blocks */
	return w->err ? 1 : 0;
}

static int walk_tree(struct fs_walk *w, const struct tree_root_ptr *root)
{
	int ret;

	w->root = root;
	w->root_dirid = BTRFS_FIRST_FREE_OBJECTID;
	inode_start(w, 0);
	ret = fs_walk_items(w, root, walk_item);
	fs_inode_finish(w);
	if (ret < 0 && ret != -ENOMEM) {
		/* an unreadable root block: the tree-block phase reported it; go on */
		report_problem(w->ctx, PR_TREE_ROOT_UNREADABLE, "root %" PRIu64 ": walk stopped: %s",
			       root->objectid, w->ctx->fs->errmsg);
		ret = 0;
	}
	return ret < 0 ? ret : w->err;
}

static struct recsort *link_sorter(struct check_ctx *ctx, recsort_cmp_fn cmp, unsigned share)
{
	struct recsort *rs = recsort_create(sizeof(struct link_rec), cmp, NULL, fs_check_sort_budget(ctx, share),
					    NULL);

	if (rs)
		recsort_set_jobs(rs, ctx->opts->jobs);
	return rs;
}

static struct recsort *subvol_sorter_create(struct check_ctx *ctx)
{
	return recsort_create(sizeof(struct root_rec), root_rec_cmp, NULL, fs_check_sort_budget(ctx, 16), NULL);
}

int check_fs_trees(struct check_ctx *ctx)
{
	struct fs_walk w = { .ctx = ctx };
	struct block_cache_stats c0, c1;
	struct fs_roots roots;
	int ret;

	w.no_holes = ctx->fs->incompat & BTRFS_FEATURE_INCOMPAT_NO_HOLES;
	ret = collect_roots(ctx, &roots);
	if (ret) {
		report_problem(ctx, PR_TREE_ROOT_UNREADABLE, "root tree: %s", ctx->fs->errmsg);
		free(roots.v);
		return ret == -ENOMEM ? ret : 0;
	}
	progress_set_total(ctx->progress, roots.bytes);
	fs_lost_destroy(ctx->fs_lost);   /* a run before a repair left it */
	ctx->fs_lost = w.lost = calloc(1, sizeof(*w.lost));
	w.by_index = link_sorter(ctx, link_cmp_index, 4);
	w.by_hash = link_sorter(ctx, link_cmp_hash, 4);
	w.orphans = link_sorter(ctx, link_cmp_orphan, 16);
	ctx->subvol_entries = w.subvols = subvol_sorter_create(ctx);
	if (!w.lost || !w.by_index || !w.by_hash || !w.orphans || !w.subvols) {
		ret = -ENOMEM;
		goto out;
	}
	block_cache_get_stats(ctx->fs, &c0);
	for (size_t i = 0; i < roots.n && !ret && !cli_cancelled(); i++)
		ret = walk_tree(&w, &roots.v[i]);
	ctx->stats.inodes += w.inodes;
	block_cache_get_stats(ctx->fs, &c1);
	/* snapshots share blocks: how often the walk found them cached */
	msg_verbose("filesystem trees: %zu subvolume tree(s), %" PRIu64 " inodes; block cache %" PRIu64 " hits, %"
		    PRIu64 " misses", roots.n, w.inodes, c1.hits - c0.hits, c1.misses - c0.misses);
	if (!ret && !cli_cancelled())
		ret = fs_join_links(ctx, &w, &roots);
out:
	if (ret || cli_cancelled()) {   /* the subvolume phase will not run */
		recsort_destroy(ctx->subvol_entries);
		ctx->subvol_entries = NULL;
	}
	recsort_destroy(w.by_index);
	recsort_destroy(w.by_hash);
	recsort_destroy(w.orphans);
	free(roots.v);
	return ret;
}
