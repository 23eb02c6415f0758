// SPDX-License-Identifier: GPL-2.0-only
/* The subvol-links class: a subvolume is linked into its parent by four
 * items that carry one name: ROOT_REF (parent -> child) and ROOT_BACKREF
 * (child -> parent) with the directory, the index and the name; the parent
 * directory's DIR_INDEX at that index and DIR_ITEM under the name's hash,
 * each naming (child, ROOT_ITEM, -1). The kernel looks a subvolume up through
 * all four (a name whose ref does not match reads as an empty directory).
 * One transaction:
 *  - a ref and backref that differ (root-ref-mismatch): the one whose name,
 *    directory and index the parent's dir entries carry is copied over the
 *    other;
 *  - a ref pair without its dir item or dir index (root-dir-entry-missing):
 *    the entry is added again in the parent directory (the check runs again
 *    after, and the inodes class sets the directory's size); an entry of
 *    that name that names a subvolume that does not exist is pointed at it;
 *  - a live subvolume without refs (root-unreferenced) that one directory
 *    entry pair still names: the ref and backref are made from it (of entries
 *    in several subvolumes, the copies a snapshot took are told apart by the
 *    subvolumes' creation generations and parent uuids); one no entry pair
 *    names is linked into the top level's /lost+found as subvol-ID;
 *  - a snapshot's placeholder for a subvolume nested in its source (entries
 *    without refs) whose dir index has no dir item (root-dir-entry-missing):
 *    the dir item is made again from the index's entry (the kernel finds a
 *    name only through its dir item).
 * What no surviving item tells (two disagreeing halves neither entry
 * confirms, a subvolume no entry names) is left. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check/repair.h"
#include "check/repair_links.h"
#include "check/repair_notes.h"
#include "common/grow.h"
#include <btk/csum.h>
#include <btk/item_check.h>
#include <btk/key.h>
#include <btk/tree.h>

/* One name of a subvolume: (dir, index, name) in the parent. */
struct link_name {
	uint64_t dir, index;
	uint16_t len;
	uint8_t name[BTRFS_NAME_MAX];
};

struct rref {
	uint64_t parent, child;
	uint8_t type;                /* ROOT_REF or ROOT_BACKREF */
	struct link_name n;
};

struct live_root {
	uint64_t id, otransid;       /* otransid 0: not known (an old item) */
	uint8_t uuid[BTRFS_UUID_SIZE], parent_uuid[BTRFS_UUID_SIZE];
};

struct links_scan {
	struct rref *refs;
	size_t n, cap;
	struct live_root *roots;     /* live subvolumes, in id order */
	size_t nroots, rcap;
};

static int scan_item(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct links_scan *s = arg;
	struct item_view v = item_view_of(d, size);
	struct item_entry e;
	uint32_t off = 0;

	if (k->type == BTRFS_ROOT_ITEM_KEY && key_is_subvolume_id(k->objectid) &&
	    item_has_fixed(BTRFS_ROOT_ITEM_KEY, size) && root_item_refs(d)) {
		struct live_root *lr = grow_array(s->roots, &s->rcap, s->nroots, sizeof(*lr), 32);
		if (!lr)
			return -ENOMEM;
		s->roots = lr;
		lr = &s->roots[s->nroots++];
		*lr = (struct live_root){ .id = k->objectid };
		if (ITEM_VIEW_STRUCT(&v, 0, struct btrfs_root_item)) {
			lr->otransid = root_item_otransid(d);
			memcpy(lr->uuid, root_item_uuid_ptr(d), BTRFS_UUID_SIZE);
			memcpy(lr->parent_uuid, root_item_parent_uuid_ptr(d), BTRFS_UUID_SIZE);
		}
	} else if ((k->type == BTRFS_ROOT_REF_KEY || k->type == BTRFS_ROOT_BACKREF_KEY) &&
		   item_entry_next(k->type, &v, &off, &e) == 1 && e.name_len && e.name_len <= BTRFS_NAME_MAX) {
		bool back = k->type == BTRFS_ROOT_BACKREF_KEY;
		struct rref *r = grow_array(s->refs, &s->cap, s->n, sizeof(*r), 32);
		if (!r)
			return -ENOMEM;
		s->refs = r;
		r = &s->refs[s->n++];
		*r = (struct rref){ .parent = back ? k->offset : k->objectid, .child = back ? k->objectid : k->offset,
				    .type = k->type, .n = { .dir = root_ref_dirid(d), .index = root_ref_sequence(d),
							     .len = (uint16_t)e.name_len } };
		memcpy(r->n.name, e.name, e.name_len);
	}
	return 0;
}

static int cmp_ref(const void *a, const void *b)
{
	const struct rref *x = a, *y = b;

	if (x->child != y->child)
		return x->child < y->child ? -1 : 1;
	if (x->parent != y->parent)
		return x->parent < y->parent ? -1 : 1;
	return (int)x->type - (int)y->type;
}

static const struct live_root *live(const struct links_scan *s, uint64_t id)
{
	size_t lo = 0, hi = s->nroots;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->roots[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < s->nroots && s->roots[lo].id == id ? &s->roots[lo] : NULL;
}

/* The item at key of tree root, in a new buffer of nodesize bytes (size 0
 * when there is none): 0 or -errno (then *buf is NULL). */
static int read_entries(struct repair_ctx *r, uint64_t root, const struct btrfs_key *key, uint8_t **buf,
			uint32_t *size)
{
	struct tree_root_ptr rp;
	int ret;

	*size = r->fs->nodesize;
	if (!(*buf = malloc(*size)))
		return -ENOMEM;
	ret = trans_get_root(r->t, root, &rp);
	if (!ret)
		ret = tree_lookup(r->fs, &rp, key, *buf, size);
	if (ret == -ENOENT) {
		btk_error_clear();
		ret = 0;
		*size = 0;
	}
	if (ret) {
		free(*buf);
		*buf = NULL;
	}
	return ret;
}

/* Whether the item at key of tree root holds an entry called n that names
 * subvolume child: 1 yes, 0 no entry of that name, 2 one of that name naming
 * something else (or, for a dir index, another name); -errno. */
static int entry_state(struct repair_ctx *r, uint64_t root, const struct btrfs_key *key, const struct link_name *n,
		       uint64_t child, struct btrfs_key *other)
{
	uint32_t size, off = 0;
	uint8_t *buf;
	struct link_entry e;
	int ret = read_entries(r, root, key, &buf, &size), state = 0, seen = 0;

	while (!ret && size <= r->fs->nodesize && state != 1 && link_entry_next(key->type, buf, size, &off, &e)) {
		seen++;
		if (e.len == n->len && !memcmp(e.name, n->name, n->len)) {
			state = e.loc.objectid == child && e.loc.type == BTRFS_ROOT_ITEM_KEY ? 1 : 2;
			*other = e.loc;
		}
	}
	free(buf);
	/* a dir index holds one name: another one there takes the index */
	if (!ret && !state && seen && key->type == BTRFS_DIR_INDEX_KEY)
		state = 2;
	return ret < 0 ? ret : state;
}

/* The two dir entries name n carries in parent: *item and *index as entry_state says. */
static int entries_of(struct repair_ctx *r, uint64_t parent, const struct link_name *n, uint64_t child, int *item,
		      int *index)
{
	struct btrfs_key ki = { n->dir, BTRFS_DIR_ITEM_KEY, btrfs_name_hash(n->name, n->len) };
	struct btrfs_key kx = { n->dir, BTRFS_DIR_INDEX_KEY, n->index }, other;

	if ((*item = entry_state(r, parent, &ki, n, child, &other)) < 0)
		return *item;
	if ((*index = entry_state(r, parent, &kx, n, child, &other)) < 0)
		return *index;
	return 0;
}

static int found_any(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	(void)k, (void)d, (void)size;
	*(bool *)arg = true;
	return 1;
}

/* Whether the root tree has a root item for tree id (of any offset). */
static int root_item_exists(struct repair_ctx *r, uint64_t id)
{
	struct btrfs_key min = { id, BTRFS_ROOT_ITEM_KEY, 0 }, max = { id, BTRFS_ROOT_ITEM_KEY, (uint64_t)-1 };
	struct tree_root_ptr rp;
	bool found = false;
	int ret = trans_get_root(r->t, BTRFS_ROOT_TREE_OBJECTID, &rp);

	if (!ret)
		ret = tree_each_item_in(r->fs, &rp, &min, &max, found_any, &found);
	return ret < 0 ? ret : found;
}

/* Whether parent's root ref to subvolume other links it as name n (in
 * n's directory): 1 yes, 0 no (or no such ref), -errno. */
static int ref_claims_name(struct repair_ctx *r, uint64_t parent, uint64_t other, const struct link_name *n)
{
	struct btrfs_key k = { parent, BTRFS_ROOT_REF_KEY, other };
	uint8_t d[sizeof(struct btrfs_root_ref) + BTRFS_NAME_MAX];
	uint32_t size = sizeof(d);
	struct tree_root_ptr rp;
	int ret = trans_get_root(r->t, BTRFS_ROOT_TREE_OBJECTID, &rp);

	if (!ret)
		ret = tree_lookup(r->fs, &rp, &k, d, &size);
	if (ret == -ENOENT) {
		btk_error_clear();
		return 0;
	}
	if (ret)
		return ret;
	return size >= sizeof(struct btrfs_root_ref) && root_ref_dirid(d) == n->dir &&
	       root_ref_name_len(d) == n->len && size - sizeof(struct btrfs_root_ref) >= n->len &&
	       !memcmp(d + sizeof(struct btrfs_root_ref), n->name, n->len);
}

/* The entry called n in the item at key names another subvolume, one that
 * does not exist or whose own root ref from parent does not link it by that
 * name (a damaged id: the ref pair of child does): point it at child (1), or
 * leave it (0: it names what exists and claims the name, or no subvolume);
 * -errno. */
static int retarget(struct repair_ctx *r, uint64_t parent, const struct btrfs_key *key, const struct link_name *n,
		    uint64_t child)
{
	struct btrfs_key other = { 0 }, loc = { child, BTRFS_ROOT_ITEM_KEY, (uint64_t)-1 };
	struct tree_path path;
	struct link_entry e;
	uint32_t size, off = 0;
	uint8_t *item;
	int ret = entry_state(r, parent, key, n, child, &other);

	if (ret != 2 || other.type != BTRFS_ROOT_ITEM_KEY)
		return ret < 0 ? ret : 0;
	if ((ret = root_item_exists(r, other.objectid)) > 0)
		ret = ref_claims_name(r, parent, other.objectid, n);
	if (ret)
		return ret < 0 ? ret : 0;
	tree_path_init(&path);
	ret = trans_item_for_update(r->t, parent, key, &item, &size, &path);
	while (!ret && link_entry_next(key->type, item, size, &off, &e))
		if (e.len == n->len && !memcmp(e.name, n->name, n->len)) {
			key_to_disk(dir_item_location_ptr(item + e.off), &loc);
			break;
		}
	tree_path_release(r->fs, &path);
	if (ret)
		return ret;
	r->changes++;
	repair_say(r, "subvolume %" PRIu64 ": %s (%" PRIu64 " %u %" PRIu64 ") '%.*s' in %" PRIu64 " named subvolume %"
		   PRIu64 ", which does not link there by that name: pointed at it", child,
		   key->type == BTRFS_DIR_ITEM_KEY ? "dir item" :
		   "dir index", key->objectid, key->type, key->offset, (int)n->len, (const char *)n->name, parent,
		   other.objectid);
	return 1;
}

static void put_ref(uint8_t *d, const struct link_name *n)
{
	root_ref_set_dirid(d, n->dir);
	root_ref_set_sequence(d, n->index);
	root_ref_set_name_len(d, n->len);
	memcpy(d + sizeof(struct btrfs_root_ref), n->name, n->len);
}

/* Write the ROOT_REF or ROOT_BACKREF of (parent, child) as name n (replacing one there). */
static int write_ref(struct repair_ctx *r, uint64_t parent, uint64_t child, uint8_t type, const struct link_name *n,
		     bool exists)
{
	struct btrfs_key k = type == BTRFS_ROOT_REF_KEY ? (struct btrfs_key){ parent, type, child }
						       : (struct btrfs_key){ child, type, parent };
	uint8_t d[sizeof(struct btrfs_root_ref) + BTRFS_NAME_MAX];
	uint32_t size = (uint32_t)sizeof(struct btrfs_root_ref) + n->len;

	put_ref(d, n);
	r->changes++;
	return exists ? trans_update_item(r->t, BTRFS_ROOT_TREE_OBJECTID, &k, d, size)
		      : trans_insert_item(r->t, BTRFS_ROOT_TREE_OBJECTID, &k, d, size);
}

static const char *ref_name(uint8_t type)
{
	return type == BTRFS_ROOT_REF_KEY ? "root ref" : "root backref";
}

/* The item at key (n's dir item or dir index) holds an entry naming
 * subvolume child by another name, one that is not the key's (for a dir
 * item: its hash is not the key's; a dir index holds one name): a damaged
 * copy of n, removed so that n is written there (1); 0 none; -errno. */
static int drop_damaged_name(struct repair_ctx *r, uint64_t parent, const struct btrfs_key *key,
			     const struct link_name *n, uint64_t child)
{
	uint32_t size, off = 0;
	uint8_t *buf, name[BTRFS_NAME_MAX];
	struct link_entry e;
	uint16_t len = 0;
	int ret = read_entries(r, parent, key, &buf, &size);

	while (!ret && !len && size <= r->fs->nodesize && link_entry_next(key->type, buf, size, &off, &e))
		if (e.loc.objectid == child && e.loc.type == BTRFS_ROOT_ITEM_KEY && e.len <= BTRFS_NAME_MAX &&
		    (e.len != n->len || memcmp(e.name, n->name, n->len)) &&
		    (key->type == BTRFS_DIR_INDEX_KEY || btrfs_name_hash(e.name, e.len) != key->offset)) {
			len = e.len;
			memcpy(name, e.name, len);
		}
	free(buf);
	if (ret || !len)
		return ret;
	if ((ret = link_remove_of(r, parent, key, n->dir, name, len, child)))
		return ret;
	r->changes++;
	repair_say(r, "subvolume %" PRIu64 ": %s (%" PRIu64 " %u %" PRIu64 ") in %" PRIu64 " named it '%.*s', a "
		   "damaged copy of '%.*s': removed", child, key->type == BTRFS_DIR_ITEM_KEY ? "dir item" : "dir index",
		   key->objectid, key->type, key->offset, parent, (int)len, (const char *)name, (int)n->len,
		   (const char *)n->name);
	return 1;
}

/* Add the dir entries of name n (subvolume child in parent) that are missing. */
static int add_entries(struct repair_ctx *r, uint64_t parent, uint64_t child, const struct link_name *n)
{
	struct btrfs_key ki = { n->dir, BTRFS_DIR_ITEM_KEY, btrfs_name_hash(n->name, n->len) };
	struct btrfs_key kx = { n->dir, BTRFS_DIR_INDEX_KEY, n->index };
	uint32_t mode;
	int item, index, ret = entries_of(r, parent, n, child, &item, &index);

	if (ret || (item == 1 && index == 1))
		return ret;
	if ((item != 1 && (ret = drop_damaged_name(r, parent, &ki, n, child)) < 0) ||
	    (index != 1 && (ret = drop_damaged_name(r, parent, &kx, n, child)) < 0))
		return ret;
	if (ret && (ret = entries_of(r, parent, n, child, &item, &index)))
		return ret;
	/* the name taken by an entry naming a subvolume that is gone: that entry is this name */
	if (item == 2 && (ret = retarget(r, parent, &ki, n, child)) != 0)
		item = ret < 0 ? item : 1;
	if (index == 2 && ret >= 0 && (ret = retarget(r, parent, &kx, n, child)) != 0)
		index = ret < 0 ? index : 1;
	if (ret < 0 || (item == 1 && index == 1))
		return ret < 0 ? ret : 0;
	/* a name taken by something else, or no directory to hold it: nothing says which is right */
	if (item == 2 || index == 2 || (ret = link_inode_mode(r, parent, n->dir, &mode)) <= 0 || !S_ISDIR(mode)) {
		r->left++;
		repair_say(r, "subvolume %" PRIu64 " in %" PRIu64 " dir %" PRIu64 " '%.*s': its dir entry cannot be "
			   "added (%s)", child, parent, n->dir, (int)n->len, (const char *)n->name,
			   item == 2 || index == 2 ? "the name is taken" : "no such directory");
		return ret < 0 ? ret : 0;
	}
	if (!index) {
		if ((ret = link_add_subvol_entry(r, parent, n->dir, n->index, n->name, n->len, child)))
			return ret;
		r->changes++;
		repair_say(r, "subvolume %" PRIu64 ": dir index (%" PRIu64 " %" PRIu64 ") '%.*s' added in %" PRIu64,
			   child, n->dir, n->index, (int)n->len, (const char *)n->name, parent);
	}
	if (!item) {
		if ((ret = link_add_subvol_entry(r, parent, n->dir, 0, n->name, n->len, child)))
			return ret;
		r->changes++;
		repair_say(r, "subvolume %" PRIu64 ": dir item '%.*s' added in %" PRIu64 " dir %" PRIu64, child,
			   (int)n->len, (const char *)n->name, parent, n->dir);
	}
	return 0;
}

static bool same_name(const struct link_name *a, const struct link_name *b)
{
	return a->dir == b->dir && a->index == b->index && a->len == b->len && !memcmp(a->name, b->name, a->len);
}

/* One (parent, child) pair with a ref, a backref or both. */
static int fix_pair(struct repair_ctx *r, const struct links_scan *s, const struct rref *g, size_t n)
{
	const struct rref *ref = NULL, *back = NULL;
	int ri, rx, bi, bx, ret;

	for (size_t i = 0; i < n; i++)
		*(g[i].type == BTRFS_ROOT_REF_KEY ? &ref : &back) = &g[i];
	/* half a pair, or either side gone: the root-refs class's */
	if (!ref || !back || !live(s, g->child) || !live(s, g->parent))
		return 0;
	if (same_name(&ref->n, &back->n))
		return add_entries(r, g->parent, g->child, &ref->n);
	if ((ret = entries_of(r, g->parent, &ref->n, g->child, &ri, &rx)) ||
	    (ret = entries_of(r, g->parent, &back->n, g->child, &bi, &bx)))
		return ret;
	if ((ri == 1 && rx == 1) == (bi == 1 && bx == 1)) {
		r->left++;
		repair_say(r, "root ref and backref %" PRIu64 " -> %" PRIu64 " differ and %s: left", g->parent, g->child,
			   ri == 1 && rx == 1 ? "the dir entries name both" : "no dir entry pair confirms either");
		return 0;
	}
	{
		const struct rref *good = ri == 1 && rx == 1 ? ref : back, *bad = good == ref ? back : ref;
		repair_say(r, "%s %" PRIu64 " -> %" PRIu64 ": dir %" PRIu64 ", index %" PRIu64 ", '%.*s' from its %s "
			   "(the dir entries' name)", ref_name(bad->type), g->parent, g->child, good->n.dir,
			   good->n.index, (int)good->n.len, (const char *)good->n.name, ref_name(good->type));
		return write_ref(r, g->parent, g->child, bad->type, &good->n, true);
	}
}

/* A dir index of some subvolume naming child (the entry's parent is where it was found). */
struct found_name {
	uint64_t parent;
	struct link_name n;
};

struct name_search {
	struct repair_ctx *r;
	uint64_t parent, child;
	struct found_name *v;
	size_t n, cap;
};

static int find_index(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct name_search *s = arg;
	struct link_entry e;
	uint32_t off = 0;

	if (k->type != BTRFS_DIR_INDEX_KEY || !link_entry_next(k->type, d, size, &off, &e) ||
	    e.loc.objectid != s->child || e.loc.type != BTRFS_ROOT_ITEM_KEY || !e.len || e.len > BTRFS_NAME_MAX)
		return 0;
	struct found_name *f = grow_array(s->v, &s->cap, s->n, sizeof(*f), 4);
	if (!f)
		return -ENOMEM;
	s->v = f;
	f = &s->v[s->n++];
	*f = (struct found_name){ .parent = s->parent, .n = { .dir = k->objectid, .index = k->offset, .len = e.len } };
	memcpy(f->n.name, e.name, e.len);
	return 0;
}

/* The live subvolume a snapshot was taken of (by its parent uuid), or NULL. */
static const struct live_root *source_of(const struct links_scan *s, const struct live_root *snap)
{
	static const uint8_t zero[BTRFS_UUID_SIZE];

	if (!snap || !memcmp(snap->parent_uuid, zero, sizeof(zero)))
		return NULL;
	for (size_t i = 0; i < s->nroots; i++)
		if (!memcmp(s->roots[i].uuid, snap->parent_uuid, BTRFS_UUID_SIZE))
			return &s->roots[i];
	return NULL;
}

/* Made after child (both creation generations known): it cannot be where child was made. */
static bool made_after(const struct live_root *p, const struct live_root *child)
{
	return p && p->id != BTRFS_FS_TREE_OBJECTID && p->otransid && child->otransid && p->otransid > child->otransid;
}

static bool has_name(const struct name_search *ns, uint64_t parent, const struct link_name *n)
{
	for (size_t i = 0; i < ns->n; i++)
		if (ns->v[i].parent == parent && same_name(&ns->v[i].n, n))
			return true;
	return false;
}

/* Where child's name is, of the entry pairs naming it (1 and *pick, 0 when
 * not one place): a snapshot's copy of an entry its source still has is a
 * copy; one its source lost, made after child, was the source's (its entries
 * are added back there); a subvolume made after child is no place for it. */
static int pick_name(const struct links_scan *s, const struct name_search *ns, const struct live_root *child,
		     struct found_name *pick)
{
	unsigned picks = 0;

	for (size_t i = 0; i < ns->n; i++) {
		struct found_name f = ns->v[i];
		const struct live_root *p = live(s, f.parent), *src = source_of(s, p);
		if (src && has_name(ns, src->id, &f.n))
			continue;
		if (src && made_after(p, child) && !made_after(src, child))
			f.parent = src->id;
		else if (made_after(p, child))
			continue;
		if (picks && pick->parent == f.parent && same_name(&pick->n, &f.n))
			continue;
		*pick = f;
		picks++;
	}
	return picks == 1;
}

/* A subvolume whose name is lost: linked into the top level's /lost+found. */
static int link_lost_subvol(struct repair_ctx *r, const struct live_root *child, const char *why)
{
	struct link_name n = { 0 };
	char name[256];
	int ret = lostfound_link_subvol(r, child->id, &n.dir, &n.index, name, &n.len);

	if (ret)
		return ret;
	memcpy(n.name, name, n.len);
	r->changes++;
	repair_say(r, "subvolume %" PRIu64 " has no root ref and %s: linked as /lost+found/%s", child->id, why, name);
	if (!(ret = write_ref(r, BTRFS_FS_TREE_OBJECTID, child->id, BTRFS_ROOT_REF_KEY, &n, false)))
		ret = write_ref(r, BTRFS_FS_TREE_OBJECTID, child->id, BTRFS_ROOT_BACKREF_KEY, &n, false);
	return ret;
}

/* A live subvolume without refs: the ref pair (and the entries) from the one place its name is. */
static int fix_unreferenced(struct repair_ctx *r, const struct links_scan *s, const struct live_root *child)
{
	struct name_search ns = { .r = r, .child = child->id };
	struct found_name pick;
	size_t kept = 0;
	int ret = 0;

	for (size_t i = 0; !ret && i < s->nroots; i++) {
		struct tree_root_ptr rp;
		ns.parent = s->roots[i].id;
		if (ns.parent == child->id || (ret = trans_get_root(r->t, ns.parent, &rp)))
			continue;
		ret = tree_each_item(r->fs, &rp, find_index, &ns);
	}
	/* only whole entry pairs count */
	for (size_t i = 0; !ret && i < ns.n; i++) {
		int item, index;
		if (!(ret = entries_of(r, ns.v[i].parent, &ns.v[i].n, child->id, &item, &index)) && item == 1)
			ns.v[kept++] = ns.v[i];
	}
	ns.n = kept;
	if (!ret && !pick_name(s, &ns, child, &pick)) {
		ret = link_lost_subvol(r, child, ns.n ? "the dir entries naming it do not tell one place"
						      : "no dir entry pair names it");
	} else if (!ret) {
		repair_say(r, "subvolume %" PRIu64 ": root ref and backref from %" PRIu64 " dir %" PRIu64 " index %" PRIu64
			   " '%.*s'", child->id, pick.parent, pick.n.dir, pick.n.index, (int)pick.n.len,
			   (const char *)pick.n.name);
		if (!(ret = write_ref(r, pick.parent, child->id, BTRFS_ROOT_REF_KEY, &pick.n, false)) &&
		    !(ret = write_ref(r, pick.parent, child->id, BTRFS_ROOT_BACKREF_KEY, &pick.n, false)))
			ret = add_entries(r, pick.parent, child->id, &pick.n);
	}
	free(ns.v);
	return ret;
}

static int placeholder_dir_item(struct repair_ctx *r, const struct name_fix *f);

int repair_subvol_links(struct repair_ctx *r)
{
	const void *rec;
	struct links_scan s = { 0 };
	struct tree_root_ptr rp;
	int ret = trans_get_root(r->t, BTRFS_ROOT_TREE_OBJECTID, &rp);

	if (!ret)
		ret = tree_each_item(r->fs, &rp, scan_item, &s);
	if (!ret && s.n)
		qsort(s.refs, s.n, sizeof(*s.refs), cmp_ref);
	for (size_t i = 0, j; !ret && i < s.n; i = j) {
		for (j = i + 1; j < s.n && s.refs[j].parent == s.refs[i].parent && s.refs[j].child == s.refs[i].child;)
			j++;
		ret = fix_pair(r, &s, &s.refs[i], j - i);
	}
	/* the live subvolumes no ref names (refs sorted by child) */
	for (size_t i = 0, k = 0; !ret && i < s.nroots; i++) {
		while (k < s.n && s.refs[k].child < s.roots[i].id)
			k++;
		if ((k < s.n && s.refs[k].child == s.roots[i].id) || s.roots[i].id == BTRFS_FS_TREE_OBJECTID)
			continue;
		ret = fix_unreferenced(r, &s, &s.roots[i]);
	}
	while (!ret && (ret = repair_notes_next(r->found, NOTES_PLACEHOLDERS, &rec)) == 1)
		ret = placeholder_dir_item(r, rec);
	free(s.refs);
	free(s.roots);
	return ret < 0 ? ret : 0;
}

/* The dir item of a placeholder whose dir index the check found alone: the
 * index's entry (location, transid, type, name) copied under the name's hash,
 * unless a dir item there has the name already. */
static int placeholder_dir_item(struct repair_ctx *r, const struct name_fix *f)
{
	struct btrfs_key kx = { f->dir, BTRFS_DIR_INDEX_KEY, f->child }, ki, other;
	uint32_t size = r->fs->nodesize, off = 0;
	uint8_t *buf = malloc(size);
	struct link_name n = { .dir = f->dir, .index = f->child };
	struct tree_root_ptr rp;
	struct link_entry e;
	int ret, state;

	if (!buf)
		return -ENOMEM;
	ret = trans_get_root(r->t, f->root, &rp);
	if (!ret)
		ret = tree_lookup(r->fs, &rp, &kx, buf, &size);
	if (ret || !link_entry_next(BTRFS_DIR_INDEX_KEY, buf, size, &off, &e) || e.loc.type != BTRFS_ROOT_ITEM_KEY ||
	    !e.len || e.len > BTRFS_NAME_MAX) {
		btk_error_clear();
		free(buf);
		return ret == -ENOMEM ? ret : 0;
	}
	n.len = e.len;
	memcpy(n.name, e.name, e.len);
	ki = (struct btrfs_key){ f->dir, BTRFS_DIR_ITEM_KEY, btrfs_name_hash(n.name, n.len) };
	state = entry_state(r, f->root, &ki, &n, e.loc.objectid, &other);
	if (state == 0 && (ret = link_append(r, f->root, &ki, buf + e.off, e.size)) == 0) {
		r->changes++;
		repair_say(r, "root %" PRIu64 " dir %" PRIu64 ": dir item '%.*s' of the placeholder for subvolume %"
			   PRIu64 " made again from its dir index %" PRIu64, f->root, f->dir, (int)n.len,
			   (const char *)n.name, e.loc.objectid, f->child);
	} else if (state == 2) {
		r->left++;
		repair_say(r, "root %" PRIu64 " dir %" PRIu64 ": the name '%.*s' of dir index %" PRIu64 " is taken by "
			   "another dir item: left", f->root, f->dir, (int)n.len, (const char *)n.name, f->child);
	}
	free(buf);
	return state < 0 ? state : ret;
}
