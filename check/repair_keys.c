// SPDX-License-Identifier: GPL-2.0-only
/* A growable list of keys, for classes that find the items to change with one
 * walk and change them after (check/repair.h). */
#include <errno.h>
#include <stdlib.h>

#include "check/repair.h"

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
