// SPDX-License-Identifier: GPL-2.0-only
/* Snapshot lineages (snap_plan.h): the subvolume trees linked by uuid and
 * parent_uuid (and by a shared parent_uuid, so siblings stay together after
 * their source is deleted), each group ordered by the time of its contents. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check/snap_plan.h"
#include <btk/item_check.h>
#include <btk/walk.h>

struct root_info {
	uint8_t uuid[16], parent[16];
	uint64_t ctransid, otransid, id;
	uint32_t idx, set;          /* set: union-find parent */
};

struct plan_build {
	const struct fs_roots *roots;
	struct root_info *info;
};

static bool uuid_zero(const uint8_t *u)
{
	static const uint8_t zero[16];
	return !memcmp(u, zero, 16);
}

static int read_root_info(void *arg, const struct tree_root_ptr *root, const uint8_t *item, uint32_t size)
{
	struct plan_build *b = arg;
	const struct tree_root_ptr *r = fs_roots_find(b->roots, root->objectid);
	struct item_view v = item_view_of(item, size);
	struct root_info *in;

	if (!r || r->bytenr != root->bytenr)
		return 0;
	in = &b->info[r - b->roots->v];
	if (ITEM_VIEW_STRUCT(&v, 0, struct btrfs_root_item)) {   /* older items have no uuids: a lineage of their own */
		memcpy(in->uuid, root_item_uuid_ptr(item), 16);
		memcpy(in->parent, root_item_parent_uuid_ptr(item), 16);
		in->ctransid = root_item_ctransid(item);
		in->otransid = root_item_otransid(item);
	}
	return 0;
}

static uint32_t find_set(struct root_info *in, uint32_t i)
{
	while (in[i].set != i) {
		in[i].set = in[in[i].set].set;
		i = in[i].set;
	}
	return i;
}

static void join_sets(struct root_info *in, uint32_t a, uint32_t b)
{
	a = find_set(in, a);
	b = find_set(in, b);
	if (a != b)
		in[a > b ? a : b].set = a < b ? a : b;   /* the smaller index leads: stable lineage order */
}

static int cmp_uuid(const void *a, const void *b)
{
	const struct root_info *x = *(struct root_info *const *)a, *y = *(struct root_info *const *)b;
	int c = memcmp(x->uuid, y->uuid, 16);
	return c ? c : (x->idx > y->idx) - (x->idx < y->idx);
}

static int cmp_parent(const void *a, const void *b)
{
	const struct root_info *x = *(struct root_info *const *)a, *y = *(struct root_info *const *)b;
	int c = memcmp(x->parent, y->parent, 16);
	return c ? c : (x->idx > y->idx) - (x->idx < y->idx);
}

/* Lineage order: the set, then the time of the contents (a read-only
 * snapshot's last change is its creation; the source changes last), then id. */
static int cmp_member(const void *a, const void *b)
{
	const struct root_info *x = *(struct root_info *const *)a, *y = *(struct root_info *const *)b;

	if (x->set != y->set)
		return x->set < y->set ? -1 : 1;
	if (x->ctransid != y->ctransid)
		return x->ctransid < y->ctransid ? -1 : 1;
	if (x->otransid != y->otransid)
		return x->otransid < y->otransid ? -1 : 1;
	return (x->id > y->id) - (x->id < y->id);
}

/* Link every root to its source (uuid == parent_uuid) and to its siblings. */
static void link_sets(struct root_info *info, struct root_info **by, size_t n)
{
	for (size_t i = 0; i < n; i++)
		by[i] = &info[i];
	qsort(by, n, sizeof(*by), cmp_uuid);
	for (size_t i = 0; i < n; i++) {
		size_t lo = 0, hi = n;
		if (uuid_zero(info[i].parent))
			continue;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			if (memcmp(by[mid]->uuid, info[i].parent, 16) < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < n && !memcmp(by[lo]->uuid, info[i].parent, 16))
			join_sets(info, (uint32_t)i, by[lo]->idx);
	}
	qsort(by, n, sizeof(*by), cmp_parent);
	for (size_t i = 1; i < n; i++)
		if (!uuid_zero(by[i]->parent) && !memcmp(by[i]->parent, by[i - 1]->parent, 16))
			join_sets(info, by[i]->idx, by[i - 1]->idx);
}

static struct snap_lineage *new_lineage(struct snap_plan *p, size_t n)
{
	struct snap_lineage *l;

	if (p->nlin == p->caplin) {
		size_t cap = p->caplin ? p->caplin * 2 : 16;
		struct snap_lineage *v = realloc(p->lin, cap * sizeof(*v));
		if (!v)
			return NULL;
		p->lin = v;
		p->caplin = cap;
	}
	l = &p->lin[p->nlin];
	memset(l, 0, sizeof(*l));
	l->members = calloc(n, sizeof(*l->members));
	l->ids = calloc(n, sizeof(*l->ids));
	l->dirty = calloc(n, sizeof(*l->dirty));
	l->ndirty = calloc(n, sizeof(*l->ndirty));
	if (!l->members || !l->ids || !l->dirty || !l->ndirty) {
		free(l->members);
		free(l->ids);
		free(l->dirty);
		free(l->ndirty);
		return NULL;
	}
	l->n = n;
	p->nlin++;
	return l;
}

int snap_plan_build(struct check_ctx *ctx, const struct fs_roots *roots, bool enable, struct snap_plan *plan)
{
	struct plan_build b = { roots, NULL };
	struct root_info **by = NULL;
	size_t n = roots->n;
	int ret = -ENOMEM;

	memset(plan, 0, sizeof(*plan));
	plan->nroots = n;
	plan->lineage = calloc(n ? n : 1, sizeof(*plan->lineage));
	plan->seq = calloc(n ? n : 1, sizeof(*plan->seq));
	plan->inodes = calloc(n ? n : 1, sizeof(*plan->inodes));
	b.info = calloc(n ? n : 1, sizeof(*b.info));
	by = calloc(n ? n : 1, sizeof(*by));
	if (!plan->lineage || !plan->seq || !plan->inodes || !b.info || !by)
		goto out;
	for (size_t i = 0; i < n; i++) {
		b.info[i].idx = b.info[i].set = (uint32_t)i;
		b.info[i].id = roots->v[i].objectid;
	}
	/* an unreadable root tree was reported already: every tree then stands alone */
	if (enable && fs_each_live_subvolume(ctx->fs, &ctx->fs->tree_root, SUBVOLS_DATA_RELOC | SUBVOLS_WALKABLE,
					     read_root_info, &b) == 0)
		link_sets(b.info, by, n);
	for (size_t i = 0; i < n; i++) {
		b.info[i].set = find_set(b.info, (uint32_t)i);
		by[i] = &b.info[i];
	}
	qsort(by, n, sizeof(*by), cmp_member);
	for (size_t i = 0; i < n;) {
		size_t k = i;
		struct snap_lineage *l;
		while (k < n && by[k]->set == by[i]->set)
			k++;
		if (!(l = new_lineage(plan, k - i)))
			goto out;
		for (size_t m = 0; m < k - i; m++) {
			l->members[m] = by[i + m]->idx;
			l->ids[m] = by[i + m]->id;
			plan->lineage[by[i + m]->idx] = (uint32_t)(plan->nlin - 1);
			plan->seq[by[i + m]->idx] = (uint32_t)m;
		}
		i = k;
	}
	ret = 0;
out:
	free(b.info);
	free(by);
	return ret;
}

void snap_plan_free(struct snap_plan *plan)
{
	for (size_t i = 0; i < plan->nlin; i++) {
		struct snap_lineage *l = &plan->lin[i];
		for (size_t m = 0; m < l->n; m++)
			free(l->dirty[m]);
		for (size_t h = 0; h < l->nheld; h++)
			free(l->held[h].detail);
		free(l->held);
		free(l->members);
		free(l->ids);
		free(l->dirty);
		free(l->ndirty);
		free(l->subvols);
	}
	free(plan->lin);
	free(plan->lineage);
	free(plan->seq);
	free(plan->inodes);
	memset(plan, 0, sizeof(*plan));
}

bool snap_plan_is_head(const struct snap_plan *plan, size_t i)
{
	return plan->seq[i] == 0;
}

int snap_plan_split(struct snap_plan *plan, uint32_t li, uint32_t seq)
{
	size_t n = plan->lin[li].n - seq;
	struct snap_lineage *l, *old;

	if (!(l = new_lineage(plan, n)))
		return -ENOMEM;
	old = &plan->lin[li];   /* (new_lineage may move the array) */
	for (size_t m = 0; m < n; m++) {
		l->members[m] = old->members[seq + m];
		l->ids[m] = old->ids[seq + m];
		l->dirty[m] = old->dirty[seq + m];
		l->ndirty[m] = old->ndirty[seq + m];
		old->dirty[seq + m] = NULL;
		plan->lineage[l->members[m]] = (uint32_t)(plan->nlin - 1);
		plan->seq[l->members[m]] = (uint32_t)m;
	}
	old->n = seq;
	return 0;
}

bool snap_runs_have(const struct ino_run *v, size_t n, uint64_t ino)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (ino >= v[mid].lo && ino <= v[mid].hi)
			return true;
		if (v[mid].hi < ino)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

bool snap_plan_dirty(const struct snap_plan *plan, uint32_t li, uint32_t seq, uint64_t ino)
{
	const struct snap_lineage *l = &plan->lin[li];

	return seq > 0 && seq < l->n && snap_runs_have(l->dirty[seq], l->ndirty[seq], ino);
}

uint32_t snap_plan_next_dirty(const struct snap_plan *plan, uint32_t li, uint32_t seq, uint64_t ino)
{
	const struct snap_lineage *l = &plan->lin[li];

	for (uint32_t s = seq + 1; s < l->n; s++)
		if (snap_runs_have(l->dirty[s], l->ndirty[s], ino))
			return s;
	return (uint32_t)l->n;
}

int snap_plan_hold(struct snap_lineage *l, uint64_t ino, uint32_t seq, enum problem_code code, const char *detail)
{
	if (l->nheld == SNAP_HELD_MAX)
		return -ENOSPC;
	if (l->nheld == l->capheld) {
		size_t cap = l->capheld ? l->capheld * 2 : 64;
		struct snap_held *v = realloc(l->held, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		l->held = v;
		l->capheld = cap;
	}
	if (!(l->held[l->nheld].detail = strdup(detail)))
		return -ENOMEM;
	l->held[l->nheld].ino = ino;
	l->held[l->nheld].seq = seq;
	l->held[l->nheld].code = code;
	l->nheld++;
	return 0;
}

/* A problem's text past its "root N" prefix: the same problem in another member. */
static const char *past_root(const char *detail)
{
	const char *p = detail;

	if (strncmp(p, "root ", 5))
		return detail;
	for (p += 5; *p >= '0' && *p <= '9'; p++)
		;
	return p;
}

static int held_cmp(const void *a, const void *b)
{
	const struct snap_held *x = a, *y = b;

	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	if (x->code != y->code)
		return x->code < y->code ? -1 : 1;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

void snap_plan_flush_held(struct check_ctx *ctx, struct snap_plan *plan, uint32_t li)
{
	struct snap_lineage *l = &plan->lin[li];

	/* by inode: a problem found again in the member where its inode changed,
	 * the same but for the root, is one problem of both ranges */
	if (l->nheld)
		qsort(l->held, l->nheld, sizeof(*l->held), held_cmp);
	for (size_t h = 0; h < l->nheld;) {
		struct snap_held *p = &l->held[h];
		uint32_t end = snap_plan_next_dirty(plan, li, p->seq, p->ino);
		size_t k = h + 1;
		for (; k < l->nheld; k++) {
			struct snap_held *q = &l->held[k];
			if (q->ino != p->ino || q->code != p->code || q->seq != end ||
			    strcmp(past_root(q->detail), past_root(p->detail)))
				break;
			end = snap_plan_next_dirty(plan, li, q->seq, q->ino);
		}
		ctx->report_roots = l->ids + p->seq;
		ctx->n_report_roots = end - p->seq;
		report_problem(ctx, p->code, "%s", p->detail);
		for (; h < k; h++)
			free(l->held[h].detail);
	}
	ctx->report_roots = NULL;
	ctx->n_report_roots = 0;
	l->nheld = 0;
}

int snap_plan_keep_subvol(struct snap_lineage *l, const struct root_rec *r)
{
	if (l->nsubvols == l->capsubvols) {
		size_t cap = l->capsubvols ? l->capsubvols * 2 : 16;
		struct root_rec *v = realloc(l->subvols, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		l->subvols = v;
		l->capsubvols = cap;
	}
	l->subvols[l->nsubvols++] = *r;
	return 0;
}
