// SPDX-License-Identifier: GPL-2.0-only
/* A growable list of keys, for classes that find the items to change with one
 * walk and change them after, and the walk of a list of noted inodes
 * (check/repair.h). */
#include <errno.h>
#include <stdlib.h>

#include <inttypes.h>

#include "check/repair.h"
#include "check/repair_notes.h"

int repair_keys_push(struct repair_keys *l, const struct btrfs_key *k)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 8;
		struct btrfs_key *v = realloc(l->keys, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		l->keys = v;
		l->cap = cap;
	}
	l->keys[l->n++] = *k;
	return 0;
}

int repair_each_noted_inode(struct repair_ctx *r, int list, int (*fn)(struct repair_ctx *r, uint64_t root,
									uint64_t ino))
{
	uint64_t root = 0, ino = 0;
	const void *rec;
	int ret;

	while ((ret = repair_notes_next(r->found, (enum repair_note_list)list, &rec)) == 1) {
		const struct inode_fix *f = rec;
		if (f->root == root && f->ino == ino)
			continue;
		root = f->root;
		ino = f->ino;
		if ((ret = fn(r, root, ino)) < 0)
			return ret;
	}
	if (ret < 0)
		return ret;
	if (r->changes > REPAIR_SAY_MAX)
		repair_say(r, "... %" PRIu64 " more", r->changes - REPAIR_SAY_MAX);
	return 0;
}
