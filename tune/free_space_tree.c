// SPDX-License-Identifier: GPL-2.0-only
/* --enable free-space-tree: build the free-space tree from the extent tree
 * (libfs/free_space_tree.c) and say what was done with the v1 space cache. */
#include <stdio.h>

#include "common/messages.h"
#include "common/sizes.h"
#include <btk/free_space_tree.h>
#include "tune/tune.h"

int tune_build_free_space_tree(struct fs_info *fs, struct trans *t)
{
	struct fst_build_stats st;
	char s1[SIZE_BUF_LEN];
	int ret = fst_build(fs, t, &st);

	if (ret)
		return ret;
	if (st.replaced)
		msg_info("a free-space tree exists but is not marked valid: building it again");
	printf("free-space-tree: built for %zu block group(s), %llu free extent(s)\n", st.groups,
	       (unsigned long long)st.extents);
	if (!st.v1_caches)
		printf("v1 space cache: none\n");
	else if (st.v1_removed)
		printf("v1 space cache: %zu cache(s) removed, %s freed\n", st.v1_caches,
		       size_format(st.v1_freed, s1, sizeof(s1), SIZE_HUMAN));
	else
		printf("v1 space cache: %zu cache(s) left for the kernel to remove at the next mount (%s); "
		       "invalidated\n", st.v1_caches, st.v1_why);
	return 0;
}
