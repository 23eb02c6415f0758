/* SPDX-License-Identifier: GPL-2.0-only */
/* Snapshot lineages for the inode and name checks (doc/design.md,
 * "Snapshots: checking each unique subtree once"): which subvolume trees are
 * checked in full (a lineage's head) and which as a delta against the member
 * before them; the inodes each delta found changed; the per-inode problems
 * held until the lineage is done, to be reported once for every member that
 * shares them. */
#ifndef BTK_CHECK_SNAP_PLAN_H
#define BTK_CHECK_SNAP_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "check/fs_check.h"

/* Past this many held problems a lineage's remaining members are checked in full. */
#define SNAP_HELD_MAX 65536

struct snap_held {
	uint64_t ino;
	uint32_t seq;           /* the member it was found in */
	enum problem_code code;
	char *detail;
};

/* Inodes lo..hi (a dirty set is kept as runs: a leaf's inodes are mostly consecutive). */
struct ino_run {
	uint64_t lo, hi;
};

struct snap_lineage {
	uint32_t *members;      /* indexes into fs_roots.v, in order; [0] is the head */
	uint64_t *ids;          /* their tree ids, for the reports */
	struct ino_run **dirty; /* per member: its dirty inodes, sorted runs (the head: none) */
	size_t *ndirty;
	size_t n;
	struct snap_held *held;
	size_t nheld, capheld;
	struct root_rec *subvols;  /* the last member checked: its dir entries naming subvolumes */
	size_t nsubvols, capsubvols;
	bool full_only;         /* too many held problems: members from here on checked in full */
};

struct snap_plan {
	size_t nroots;
	uint32_t *lineage;      /* per root: index into lin */
	uint32_t *seq;          /* per root: its place in that lineage */
	uint64_t *inodes;       /* per root: its inode items (a delta's: the one before's, changed) */
	struct snap_lineage *lin;
	size_t nlin, caplin;
	/* for -v */
	uint64_t delta_roots, diff_blocks, reused_blocks, dirty_inodes;
	uint64_t dirty_bytes;   /* the dirty sets' memory, bounded (snap_delta.c) */
};

/* Group the live subvolume trees roots into lineages (every tree its own
 * when !enable). 0 or -ENOMEM. */
int snap_plan_build(struct check_ctx *ctx, const struct fs_roots *roots, bool enable, struct snap_plan *plan);
void snap_plan_free(struct snap_plan *plan);
/* Root i is the head of its lineage (checked in full)? */
bool snap_plan_is_head(const struct snap_plan *plan, size_t i);
/* Member seq of lineage l becomes the head of a new lineage with the members
 * after it (it is checked in full): 0 or -ENOMEM. */
int snap_plan_split(struct snap_plan *plan, uint32_t l, uint32_t seq);
/* ino is in one of the n sorted runs. */
bool snap_runs_have(const struct ino_run *v, size_t n, uint64_t ino);
/* Inode ino is dirty in member seq of lineage l (seq 0: never). */
bool snap_plan_dirty(const struct snap_plan *plan, uint32_t l, uint32_t seq, uint64_t ino);
/* The first member after seq in which ino is dirty (lin->n: none). */
uint32_t snap_plan_next_dirty(const struct snap_plan *plan, uint32_t l, uint32_t seq, uint64_t ino);
/* Hold a per-inode problem of member seq: 0, or -ENOSPC past SNAP_HELD_MAX, -ENOMEM. */
int snap_plan_hold(struct snap_lineage *lin, uint64_t ino, uint32_t seq, enum problem_code code,
		   const char *detail);
/* Keep a dir entry naming a subvolume, for the next member: 0 or -ENOMEM. */
int snap_plan_keep_subvol(struct snap_lineage *lin, const struct root_rec *r);
/* Report lineage l's held problems, each once for the members sharing it. */
void snap_plan_flush_held(struct check_ctx *ctx, struct snap_plan *plan, uint32_t l);

#endif
