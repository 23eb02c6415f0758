/* SPDX-License-Identifier: GPL-2.0-only */
/* Quota groups: the internals shared by phase_qgroups.c (the quota tree, the
 * comparison, simple quotas) and qgroups_reach.c (which subvolumes reach each
 * extent, for traditional qgroups). */
#ifndef BTK_CHECK_QGROUPS_H
#define BTK_CHECK_QGROUPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "check/check.h"

/* A qgroup id is level << 48 | subvolume id. */
#define QGROUP_LEVEL(id) ((uint64_t)(id) >> 48)
#define QGROUP_SUBVOL(id) ((uint64_t)(id) & (((uint64_t)1 << 48) - 1))

/* A tree whose extents quotas account: the top-level tree or a subvolume. */
static inline bool qgroup_is_fstree(uint64_t id)
{
	return id == BTRFS_FS_TREE_OBJECTID || ((int64_t)id >= (int64_t)BTRFS_FIRST_FREE_OBJECTID && !QGROUP_LEVEL(id));
}

struct qgroup {
	uint64_t id;
	uint64_t disk_rfer, disk_excl;  /* the info item */
	uint64_t rfer, excl;            /* computed from the extents */
	bool has_info, has_limit;
	uint32_t *parents;              /* indices of the groups this one is a member of */
	size_t nparents, parents_cap;
	uint64_t extent_stamp, count;   /* per extent: how many of its roots are below this group */
	uint64_t root_stamp;            /* per root: group already counted for it */
};

/* Every qgroup of the quota tree, sorted by id; small (one per subvolume and
 * per higher-level group), so kept in memory like the kernel does. */
struct qgroup_table {
	struct qgroup *g;
	size_t n, cap;
	uint64_t extent_seq, root_seq;
	uint32_t *stack, *touched;
	size_t stack_cap, touched_cap;
};

/* Room for element n of a growable array (doubling its capacity *cap when
 * full): the array, moved or not, or NULL when out of memory (the old one
 * is then still valid). */
void *qgroups_grow(void *arr, size_t n, size_t *cap, size_t elem);
/* Append v to the growable index array *a: 0 or -ENOMEM. */
int qgroups_push(uint32_t **a, size_t *n, size_t *cap, uint32_t v);

/* The group with this id, or NULL. */
struct qgroup *qgroup_find(struct qgroup_table *t, uint64_t id);
/* One extent of `bytes` reached by the k distinct subvolumes roots[]: counts
 * toward the referenced bytes of each of their groups and of every group
 * above them, and toward the exclusive bytes of each group all k are below
 * (the kernel's rule). Simple quotas call it with the owner alone (k = 1).
 * 0 or -ENOMEM. */
int qgroup_account(struct qgroup_table *t, const uint64_t *roots, size_t k, uint64_t bytes);

/* Traditional qgroups: what the tree walk collects. */
struct qgroup_seed {
	uint64_t bytenr, root;
	uint8_t level;
};

struct qgroup_state {
	bool configured;                /* the quota status has been read */
	bool collect_reach;             /* traditional qgroups to verify: collect edges */
	bool collect_owners;            /* simple quotas to verify: sum tree blocks by owner */
	uint64_t enable_gen;            /* simple quotas: extents older than this are not counted */
	struct recsort *edges;          /* struct qgroup_edge: child pointers of subvolume blocks */
	struct qgroup_seed *seeds;      /* the root block of each subvolume */
	size_t nseeds, seeds_cap;
	uint64_t *owner_bytes;          /* simple quotas: pairs (owner, bytes), sorted by owner */
	size_t nowners, owners_cap;
	int error;                      /* sticky -errno from collecting */
};

/* A pointer from a block of a subvolume (level plevel) to a tree block, or
 * from a leaf to a data extent (bytes = its disk length). */
struct qgroup_edge {
	uint64_t parent, child, bytes;
	uint32_t plevel, pad;
};

/* The memory budget of one sorter of this phase. */
size_t qgroups_sort_budget(const struct check_ctx *ctx);
/* Traditional qgroups: from the edges and seeds, every tree block and data
 * extent with the subvolumes that reach it, accounted into t. 0 or -errno. */
int qgroups_reach_account(struct check_ctx *ctx, struct qgroup_state *st, struct qgroup_table *t);
/* Tree-walk side of traditional qgroups: the edges and seeds of one block. */
int qgroups_reach_observe(struct check_ctx *ctx, struct qgroup_state *st, const struct tree_root_ptr *root,
			  const struct tree_block *b, bool first);

#endif
