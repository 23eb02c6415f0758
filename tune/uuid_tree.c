// SPDX-License-Identifier: GPL-2.0-only
/* --rebuild-uuid-tree: delete the uuid tree and build it again from the root
 * items (libfs/uuid_tree.c). */
#include <stdio.h>

#include <btk/uuid_tree.h>
#include "tune/tune.h"

int tune_rebuild_uuid_tree(struct fs_info *fs, struct trans *t)
{
	struct uuid_tree_stats st;
	int ret = uuid_tree_rebuild(fs, t, &st);

	if (ret)
		return ret;
	printf("uuid tree: %s with %u item(s): %u subvolume uuid(s), %u received uuid(s)\n",
	       st.replaced ? "rebuilt" : "created", st.items, st.subvols, st.received);
	return 0;
}
