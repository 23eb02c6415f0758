/* Derived trees rebuilt in a transaction: the free-space tree from the
 * extent tree (libfs/free_space_tree.c, with the v1 space cache cleared) and
 * the uuid tree from the root items (libfs/uuid_tree.c). */
#include <inttypes.h>

#include "check/repair.h"
#include "libfs/free_space_tree.h"
#include "libfs/uuid_tree.h"

int repair_free_space_tree(struct repair_ctx *r)
{
	struct fst_build_stats st;
	int ret;

	if (!(r->fs->compat_ro & BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE)) {
		repair_say(r, "the filesystem has no free-space tree: nothing to rebuild "
			   "('btk-tune --enable free-space-tree' makes one)");
		return 0;
	}
	ret = fst_build(r->fs, r->t, &st);
	if (ret)
		return ret;
	repair_say(r, "%s for %zu block group(s), %" PRIu64 " free extent(s)",
		   st.replaced ? "rebuilt" : "built", st.groups, st.extents);
	if (st.v1_caches && st.v1_removed)
		repair_say(r, "v1 space cache: %zu cache(s) removed", st.v1_caches);
	else if (st.v1_caches)
		repair_say(r, "v1 space cache: %zu cache(s) invalidated, left for the kernel (%s)", st.v1_caches,
			   st.v1_why);
	r->changes++;
	return 0;
}

int repair_uuid_tree(struct repair_ctx *r)
{
	struct uuid_tree_stats st;
	int ret = uuid_tree_rebuild(r->fs, r->t, &st);

	if (ret)
		return ret;
	repair_say(r, "%s with %u item(s): %u subvolume uuid(s), %u received uuid(s)",
		   st.replaced ? "rebuilt" : "created", st.items, st.subvols, st.received);
	r->changes++;
	return 0;
}
