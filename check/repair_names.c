// SPDX-License-Identifier: GPL-2.0-only
/* The names repair class: every name joins a directory and an inode three
 * times, in the dir item (keyed by the name's hash), the dir index (keyed by
 * the index) and the inode's ref or extref (which carries the index). For
 * each (directory, inode) the check found at odds, the names of both sides
 * are gathered and each name is decided by what survives:
 *   - first, a name holding '/' or NUL, or one an inode listed before it in
 *     the dir item already has (name-duplicate), is a damaged copy when its
 *     inode has another name there (removed), else it is written again
 *     cleaned, with "_INODE" added where the name is taken (fix_bad_names);
 *   - a name an inode ref claims, or that a dir item and a dir index agree
 *     on, is real: the missing or wrong one of its three is re-created (a
 *     dir item or extref under a wrong hash is re-keyed, a ref's index
 *     follows the dir index);
 *   - a lone dir item or dir index is real too when its inode has no other
 *     name there and its key is not another real name's, else it is a
 *     damaged copy and removed; one naming an inode that does not exist is
 *     removed.
 *   - names in refs into a parent that is not there, nor holds entries, are
 *     removed once the others are settled (check/repair_parentless.c).
 * Then the directory's size and the inodes' link counts are recomputed, and
 * xattrs under a wrong hash are re-keyed. One transaction. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check/fs_check.h"
#include "check/repair_links.h"
#include "check/repair_notes.h"
#include <btk/csum.h>
#include <btk/tree.h>

/* inodes reconciled with one directory at once (their notes come in order) */
#define MAX_CHILDREN (1u << 20)
#define SAY_MAX 100

enum name_src { SRC_ITEM, SRC_INDEX, SRC_REF, SRC_EXTREF };

/* One name seen in the directory's entries or in a child's refs. */
struct nent {
	uint64_t key;        /* key offset of the item it is in */
	uint64_t child;
	uint64_t index;      /* dir index key, or the ref's index */
	uint8_t src;         /* enum name_src */
	uint8_t type;        /* BTRFS_FT_* of an entry */
	uint16_t len;
	bool decided;
	bool bad;            /* the name holds '/' or NUL */
	bool gone;           /* removed from disk for its bad name, renamed here: written again */
	bool dup;            /* bad because an inode before it in the dir item has the name */
	bool root_loc;       /* its location says ROOT_ITEM, of no subvolume: it meant the inode */
	bool maybe;          /* root_loc of a subvolume that exists: the inode's only if its ref claims the name */
	uint8_t name[256];
};

struct ndir {
	struct repair_ctx *r;
	struct tree_root_ptr root;
	uint64_t rootid, dir;
	uint64_t *children;          /* ascending */
	bool *changed;
	bool *real;                  /* it has a name here that was settled */
	size_t nchildren, children_cap;
	bool xattrs, dir_changed;
	struct nent *v;
	size_t n, cap;
	uint64_t next_index;
	/* keys real names hold: dir item hashes and dir indexes */
	uint64_t *held;
	uint8_t *held_src;
	size_t nheld, heldcap;
	/* (dir, child) pairs whose dir is not there: after every other directory */
	struct name_fix *later;
	size_t nlater, latercap;
};

static int child_slot(const struct ndir *d, uint64_t child)
{
	size_t lo = 0, hi = d->nchildren;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (d->children[mid] == child)
			return (int)mid;
		if (d->children[mid] < child)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

static int add_nent(struct ndir *d, enum name_src src, uint64_t key, uint64_t child, uint64_t index, uint8_t type,
		    const uint8_t *name, uint16_t len)
{
	struct nent *e;

	if (len == 0 || len > BTRFS_NAME_MAX) {
		d->r->left++;   /* malformed: the check reports it */
		return 0;
	}
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 16;
		struct nent *v = realloc(d->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		d->v = v;
		d->cap = cap;
	}
	e = &d->v[d->n++];
	memset(e, 0, sizeof(*e));
	e->src = (uint8_t)src;
	e->key = key;
	e->child = child;
	e->index = index;
	e->type = type & ~BTRFS_FT_ENCRYPTED;
	e->len = len;
	memcpy(e->name, name, len);
	e->bad = memchr(name, '/', len) || memchr(name, 0, len);
	return 0;
}

static int hold_key(struct ndir *d, enum name_src src, uint64_t key)
{
	if (d->nheld == d->heldcap) {
		size_t cap = d->heldcap ? d->heldcap * 2 : 16;
		uint64_t *h = realloc(d->held, cap * sizeof(*h));
		uint8_t *s;
		if (!h)
			return -ENOMEM;
		d->held = h;
		s = realloc(d->held_src, cap);
		if (!s)
			return -ENOMEM;
		d->held_src = s;
		d->heldcap = cap;
	}
	d->held[d->nheld] = key;
	d->held_src[d->nheld++] = (uint8_t)src;
	return 0;
}

static bool key_held(const struct ndir *d, enum name_src src, uint64_t key)
{
	for (size_t i = 0; i < d->nheld; i++)
		if (d->held[i] == key && d->held_src[i] == src)
			return true;
	return false;
}

static bool same_name(const struct nent *a, const struct nent *b)
{
	return a->len == b->len && !memcmp(a->name, b->name, a->len);
}

static int found_root(void *arg, const struct btrfs_key *k, const uint8_t *data, uint32_t size)
{
	(void)k, (void)data, (void)size;
	*(bool *)arg = true;
	return 1;
}

/* Whether an entry of the directory whose location is loc names inode
 * loc.objectid: an inode location, or a subvolume location with no root item
 * behind it (its location key damaged; left as it is, it would stay beside
 * the entry written for the inode under the same name); *maybe: a subvolume
 * location of a subvolume that exists (see keep_maybe). */
static bool names_child(struct ndir *d, const struct btrfs_key *loc, bool *root_loc, bool *maybe)
{
	struct btrfs_key min = { loc->objectid, BTRFS_ROOT_ITEM_KEY, 0 };
	struct btrfs_key max = { loc->objectid, BTRFS_ROOT_ITEM_KEY, (uint64_t)-1 };
	struct tree_root_ptr rp;
	bool found = false;

	*root_loc = loc->type == BTRFS_ROOT_ITEM_KEY;
	*maybe = false;
	if (child_slot(d, loc->objectid) < 0 || (loc->type != BTRFS_INODE_ITEM_KEY && !*root_loc))
		return false;
	if (!*root_loc)
		return true;
	if (trans_get_root(d->r->t, BTRFS_ROOT_TREE_OBJECTID, &rp) ||
	    tree_each_item_in(d->r->fs, &rp, &min, &max, found_root, &found) < 0) {
		btk_error_clear();
		return false;
	}
	*maybe = found;
	return true;
}

/* Whether this tree's root ref links subvolume id into the directory by name. */
static bool root_ref_links(struct ndir *d, uint64_t id, const struct nent *e)
{
	struct btrfs_key k = { d->rootid, BTRFS_ROOT_REF_KEY, id };
	uint8_t buf[sizeof(struct btrfs_root_ref) + BTRFS_NAME_LEN];
	uint32_t size = sizeof(buf);
	struct tree_root_ptr rp;

	if (trans_get_root(d->r->t, BTRFS_ROOT_TREE_OBJECTID, &rp) || tree_lookup(d->r->fs, &rp, &k, buf, &size)) {
		btk_error_clear();
		return false;
	}
	return size >= sizeof(struct btrfs_root_ref) && root_ref_dirid(buf) == d->dir &&
	       root_ref_name_len(buf) == e->len && size - sizeof(struct btrfs_root_ref) >= e->len &&
	       !memcmp(buf + sizeof(struct btrfs_root_ref), e->name, e->len);
}

/* An entry naming an existing subvolume whose id is a child's inode number
 * is that inode's damaged entry only when the inode's ref claims the name
 * and no root ref links the subvolume by it (a snapshot keeps the entries
 * of nested subvolumes without refs): the others are dropped from d. */
static void keep_maybe(struct ndir *d)
{
	size_t out = 0;

	for (size_t i = 0; i < d->n; i++) {
		const struct nent *e = &d->v[i];
		bool keep = !e->maybe;

		for (size_t j = 0; !keep && j < d->n; j++)
			keep = d->v[j].src >= SRC_REF && d->v[j].child == e->child && same_name(&d->v[j], e);
		if (keep && e->maybe && root_ref_links(d, e->child, e))
			keep = false;
		if (keep)
			d->v[out++] = *e;
	}
	d->n = out;
}

/* The directory's entries naming one of the children, and the children's refs into it. */
static int gather(struct ndir *d)
{
	struct btrfs_key min = { d->dir, BTRFS_DIR_ITEM_KEY, 0 }, max = { d->dir, BTRFS_DIR_INDEX_KEY, (uint64_t)-1 }, k;
	struct tree_iter it;
	struct link_entry e;
	const uint8_t *data;
	uint32_t size, off;
	int ret;

	tree_iter_init(&it, d->r->fs, &d->root, &min, &max);
	while ((ret = tree_iter_next(&it, &k, &data, &size)) == 1) {
		if (k.type != BTRFS_DIR_ITEM_KEY && k.type != BTRFS_DIR_INDEX_KEY)
			continue;
		for (off = 0; link_entry_next(k.type, data, size, &off, &e);) {
			bool root_loc, maybe;
			size_t had = d->n;

			if (!names_child(d, &e.loc, &root_loc, &maybe))
				continue;
			if ((ret = add_nent(d, k.type == BTRFS_DIR_ITEM_KEY ? SRC_ITEM : SRC_INDEX, k.offset,
					    e.loc.objectid, k.type == BTRFS_DIR_INDEX_KEY ? k.offset : 0, e.type,
					    e.name, e.len)) < 0)
				goto out;
			if (d->n > had) {
				d->v[had].root_loc = root_loc;
				d->v[had].maybe = maybe;
			}
		}
	}
	if (ret < 0)
		goto out;
	for (size_t c = 0; c < d->nchildren; c++) {
		struct btrfs_key cmin = { d->children[c], BTRFS_INODE_REF_KEY, 0 };
		struct btrfs_key cmax = { d->children[c], BTRFS_INODE_EXTREF_KEY, (uint64_t)-1 };
		tree_iter_release(&it);
		tree_iter_init(&it, d->r->fs, &d->root, &cmin, &cmax);
		while ((ret = tree_iter_next(&it, &k, &data, &size)) == 1) {
			if (k.type == BTRFS_INODE_REF_KEY && k.offset != d->dir)
				continue;
			for (off = 0; link_entry_next(k.type, data, size, &off, &e);)
				if ((k.type == BTRFS_INODE_REF_KEY || e.parent == d->dir) &&
				    (ret = add_nent(d, k.type == BTRFS_INODE_REF_KEY ? SRC_REF : SRC_EXTREF, k.offset,
						    k.objectid, e.index, 0, e.name, e.len)) < 0)
					goto out;
		}
		if (ret < 0)
			goto out;
	}
	keep_maybe(d);
out:
	tree_iter_release(&it);
	return ret < 0 ? ret : 0;
}

/* A name for messages: printable bytes, others as '?'. */
static const char *show(const struct nent *e, char *buf)
{
	for (uint16_t i = 0; i < e->len; i++)
		buf[i] = e->name[i] >= 0x20 && e->name[i] < 0x7f ? (char)e->name[i] : '?';
	buf[e->len] = 0;
	return buf;
}

static void note_change(struct ndir *d, uint64_t child, const struct nent *e, const char *what)
{
	char name[257];
	int slot = child_slot(d, child);

	if (slot >= 0)
		d->changed[slot] = true;
	d->dir_changed = true;
	if (d->r->changes++ < SAY_MAX)
		repair_say(d->r, "root %" PRIu64 " dir %" PRIu64 " name \"%s\" (inode %" PRIu64 "): %s", d->rootid, d->dir,
			   show(e, name), child, what);
}

static struct btrfs_key nent_key(const struct ndir *d, const struct nent *e)
{
	static const uint8_t types[] = { BTRFS_DIR_ITEM_KEY, BTRFS_DIR_INDEX_KEY, BTRFS_INODE_REF_KEY,
					 BTRFS_INODE_EXTREF_KEY };
	bool dir_side = e->src == SRC_ITEM || e->src == SRC_INDEX;

	return (struct btrfs_key){ dir_side ? d->dir : e->child, types[e->src], e->key };
}

static int remove_nent(struct ndir *d, const struct nent *e, uint64_t child, const char *why)
{
	static const char *const what[] = { "dir item", "dir index", "inode ref", "inode extref" };
	struct btrfs_key key = nent_key(d, e);
	char msg[120];
	int ret = link_remove_of(d->r, d->rootid, &key, d->dir, e->name, e->len, e->child);

	if (ret == -ENOENT)
		return 0;
	if (ret)
		return ret;
	snprintf(msg, sizeof(msg), "%s (key %" PRIu64 ") removed%s", what[e->src], e->key, why);
	note_change(d, child, e, msg);
	return 0;
}

/* 1 when (dir, DIR_INDEX, index) exists, 0 when not, -errno. */
static int index_taken(struct ndir *d, uint64_t index)
{
	struct btrfs_key key = { d->dir, BTRFS_DIR_INDEX_KEY, index };
	uint8_t buf[sizeof(struct btrfs_dir_item)];
	uint32_t size = sizeof(buf);
	struct tree_root_ptr rp;
	int ret = trans_get_root(d->r->t, d->rootid, &rp);

	if (!ret)
		ret = tree_lookup(d->r->fs, &rp, &key, buf, &size);
	return ret == -ENOENT ? 0 : ret ? ret : 1;
}

static int new_index(struct ndir *d, uint64_t *index)
{
	int ret;

	if (!d->next_index && (ret = link_next_index(d->r, d->rootid, d->dir, &d->next_index)))
		return ret;
	*index = d->next_index++;
	return 0;
}

/* Make the three of name g (members m[0..n)) say child c, of type t, at index x. */
static int settle_name(struct ndir *d, struct nent **m, size_t n, uint64_t c, uint8_t t)
{
	const struct nent *g = m[0];
	uint64_t hash = btrfs_name_hash(g->name, g->len), x = 0;
	bool have_x = false, item_ok = false, index_ok = false, ref_ok = false;
	struct nent *ref = NULL;
	int ret;

	/* the index: the dir index's of this name, else the ref's when free, else a new one */
	for (size_t i = 0; i < n && !have_x; i++)
		if (m[i]->src == SRC_INDEX && m[i]->child == c)
			x = m[i]->key, have_x = true;
	for (size_t i = 0; i < n && !have_x; i++)
		if (m[i]->src == SRC_INDEX)
			x = m[i]->key, have_x = true;
	for (size_t i = 0; i < n; i++)
		if ((m[i]->src == SRC_REF || m[i]->src == SRC_EXTREF) && !ref)
			ref = m[i];
	if (!have_x && ref) {
		if ((ret = index_taken(d, ref->index)) < 0)
			return ret;
		if (!ret && ref->index >= 2)
			x = ref->index, have_x = true;
	}
	if (!have_x && (ret = new_index(d, &x)))
		return ret;
	if ((ret = hold_key(d, SRC_INDEX, x)) || (ret = hold_key(d, SRC_ITEM, hash)))
		return ret;
	if (child_slot(d, c) >= 0)
		d->real[child_slot(d, c)] = true;

	for (size_t i = 0; i < n; i++) {
		struct nent *e = m[i];
		e->decided = true;
		if (e->gone)
			continue;
		if (e->src == SRC_INDEX) {
			if (!index_ok && e->key == x && e->child == c && e->type == t && !e->root_loc)
				index_ok = true;
			else if ((ret = remove_nent(d, e, c, e->key == x ? " (to be rewritten)" : "")))
				return ret;
		} else if (e->src == SRC_ITEM) {
			if (!item_ok && e->key == hash && e->child == c && e->type == t && !e->root_loc)
				item_ok = true;
			else if ((ret = remove_nent(d, e, c, e->key != hash ? " (wrong hash)" : " (to be rewritten)")))
				return ret;
		} else if (e == ref && e->child == c) {
			bool rekey = e->src == SRC_EXTREF && e->key != btrfs_extref_hash(d->dir, e->name, e->len);
			struct btrfs_key key = nent_key(d, e);
			ref_ok = true;
			if (rekey) {
				if ((ret = remove_nent(d, e, c, " (wrong hash)")) ||
				    (ret = link_add_extref(d->r, d->rootid, c, d->dir, x, e->name, e->len)))
					return ret;
				note_change(d, c, e, "inode extref re-keyed");
			} else if (e->index != x) {
				char msg[80];
				if ((ret = link_set_ref_index(d->r, d->rootid, &key, d->dir, e->name, e->len, x)))
					return ret;
				snprintf(msg, sizeof(msg), "ref index %" PRIu64 " -> %" PRIu64, e->index, x);
				note_change(d, c, e, msg);
			}
		} else if ((ret = remove_nent(d, e, e->child, " (a second ref of the name)"))) {
			return ret;
		}
	}
	if (!index_ok) {
		char msg[64];
		if ((ret = link_add_dir_index(d->r, d->rootid, d->dir, x, g->name, g->len, c, t)))
			return ret;
		snprintf(msg, sizeof(msg), "dir index %" PRIu64 " written", x);
		note_change(d, c, g, msg);
	}
	if (!item_ok) {
		if ((ret = link_add_dir_item(d->r, d->rootid, d->dir, g->name, g->len, c, t)))
			return ret;
		note_change(d, c, g, "dir item written");
	}
	if (!ref_ok) {
		if ((ret = link_add_ref(d->r, d->rootid, c, d->dir, x, g->name, g->len)))
			return ret;
		note_change(d, c, g, "inode ref written");
	}
	return 0;
}

/* 1 when child has a real name in this directory (one already settled). */
static bool has_real_name(const struct ndir *d, uint64_t child)
{
	int slot = child_slot(d, child);

	return slot >= 0 && d->real[slot];
}

/* One name (its members m[0..n)) in pass 1 (strong names) or pass 2 (the rest). */
static int decide_name(struct ndir *d, struct nent **m, size_t n, bool strong_pass)
{
	uint64_t c = 0;
	bool refs = false, item = false, index = false, have_c = false;
	uint32_t mode = 0;
	uint8_t t;
	int ret;

	for (size_t i = 0; i < n; i++)
		if (m[i]->src >= SRC_REF) {
			if (have_c && m[i]->child != c) {
				d->r->left++;   /* two inodes claim one name: nothing says which */
				for (size_t j = 0; j < n; j++)
					m[j]->decided = true;
				return 0;
			}
			c = m[i]->child, have_c = refs = true;
		}
	for (size_t i = 0; i < n && !have_c; i++) {
		if ((ret = link_inode_mode(d->r, d->rootid, m[i]->child, &mode)) < 0)
			return ret;
		if (ret)
			c = m[i]->child, have_c = true;
	}
	if (!have_c) {
		if (!strong_pass)
			return 0;
		/* every entry of the name points at an inode that does not exist */
		for (size_t i = 0; i < n; i++) {
			m[i]->decided = true;
			if ((ret = remove_nent(d, m[i], m[i]->child, " (its inode does not exist)")))
				return ret;
		}
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		item |= m[i]->src == SRC_ITEM && m[i]->child == c;
		index |= m[i]->src == SRC_INDEX && m[i]->child == c;
	}
	if (strong_pass != (refs || (item && index)))
		return 0;
	if ((ret = link_inode_mode(d->r, d->rootid, c, &mode)) < 0)
		return ret;
	if (ret == 0) {
		d->r->left++;   /* a ref of an inode without an inode item: not a name's problem */
		for (size_t i = 0; i < n; i++)
			m[i]->decided = true;
		return 0;
	}
	t = mode_to_ftype(mode);
	if (t == BTRFS_FT_UNKNOWN)
		t = m[0]->src < SRC_REF ? m[0]->type : BTRFS_FT_REG_FILE;
	if (!strong_pass) {
		/* a lone entry: a damaged copy when its inode has a real name here or its key is another's */
		bool copy = has_real_name(d, c);
		for (size_t i = 0; i < n && !copy; i++)
			copy = key_held(d, m[i]->src, m[i]->key);
		if (!copy && S_ISDIR(mode) && (ret = link_has_ref(d->r, d->rootid, c)))
			copy = true;   /* a directory has one name, and it has it elsewhere */
		if (ret < 0)
			return ret;
		if (copy) {
			for (size_t i = 0; i < n; i++) {
				m[i]->decided = true;
				if ((ret = remove_nent(d, m[i], c, " (a damaged copy of another name)")))
					return ret;
			}
			return 0;
		}
	}
	return settle_name(d, m, n, c, t);
}

/* 1 when dir already holds a dir item called name (on disk, in this
 * transaction), 0 when not, -errno. */
static int name_in_dir(struct ndir *d, const uint8_t *name, uint16_t len)
{
	struct btrfs_key key = { d->dir, BTRFS_DIR_ITEM_KEY, btrfs_name_hash(name, len) }, k;
	struct tree_root_ptr rp;
	struct tree_iter it;
	struct link_entry e;
	const uint8_t *data;
	uint32_t size, off;
	int ret = trans_get_root(d->r->t, d->rootid, &rp), found = 0;

	if (ret)
		return ret;
	tree_iter_init(&it, d->r->fs, &rp, &key, &key);
	while (!found && (ret = tree_iter_next(&it, &k, &data, &size)) == 1)
		for (off = 0; !found && link_entry_next(k.type, data, size, &off, &e);)
			found = e.len == len && !memcmp(e.name, name, len);
	tree_iter_release(&it);
	return ret < 0 ? ret : found;
}

/* 1 when the dir item of e's name gives the name to another inode before
 * (or without) e's child, 0 when not, -errno. */
static int name_taken_before(struct ndir *d, const struct nent *e)
{
	struct btrfs_key key = { d->dir, BTRFS_DIR_ITEM_KEY, btrfs_name_hash(e->name, e->len) }, k;
	struct tree_root_ptr rp;
	struct tree_iter it;
	struct link_entry le;
	const uint8_t *data;
	uint32_t size, off;
	int ret = trans_get_root(d->r->t, d->rootid, &rp), found = 0, mine = 0;

	if (ret)
		return ret;
	tree_iter_init(&it, d->r->fs, &rp, &key, &key);
	while (!found && !mine && (ret = tree_iter_next(&it, &k, &data, &size)) == 1)
		for (off = 0; !found && !mine && link_entry_next(k.type, data, size, &off, &le);) {
			if (le.len != e->len || memcmp(le.name, e->name, e->len))
				continue;
			mine = le.loc.objectid == e->child;
			found = !mine;
		}
	tree_iter_release(&it);
	return ret < 0 ? ret : found;
}

/* Names of the children that an inode listed before them already has in this
 * directory (name-duplicate): renamed like names holding '/' (fix_bad_names). */
static int mark_duplicates(struct ndir *d)
{
	for (size_t i = 0; i < d->n; i++) {
		int ret;
		if (d->v[i].bad || d->v[i].decided)
			continue;
		if ((ret = name_taken_before(d, &d->v[i])) < 0)
			return ret;
		d->v[i].bad = d->v[i].dup = ret == 1;
	}
	return 0;
}

/* A name for an inode whose only name here holds '/' or NUL: those bytes
 * become '_' (as e2fsck does with '.'), then "_INODE" is added while that is
 * taken. 1 and the name in out (*outlen bytes), 0 when none is free, -errno. */
static int clean_name(struct ndir *d, const struct nent *e, uint8_t *out, uint16_t *outlen)
{
	uint16_t len = e->len;
	int ret;

	for (uint16_t i = 0; i < len; i++)
		out[i] = e->name[i] == '/' || e->name[i] == 0 ? '_' : e->name[i];
	for (int attempt = 0; attempt < 2; attempt++) {
		bool taken = false;
		for (size_t i = 0; i < d->n && !taken; i++)
			taken = !d->v[i].bad && d->v[i].len == len && !memcmp(d->v[i].name, out, len);
		if (!taken && (ret = name_in_dir(d, out, len)) != 0) {
			if (ret < 0)
				return ret;
			taken = true;
		}
		if (!taken) {
			*outlen = len;
			return 1;
		}
		char suffix[24];
		int n = snprintf(suffix, sizeof(suffix), "_%" PRIu64, e->child);
		if (attempt || len + n > BTRFS_NAME_MAX)
			break;
		memcpy(out + len, suffix, (size_t)n);
		len = (uint16_t)(len + n);
	}
	return 0;
}

/* Names holding '/' or NUL, before anything else is decided. An inode with
 * another name here has it as its real one: the bad ones are damaged copies,
 * removed. Else the bad name is its only one: its entries are removed and
 * the name, cleaned (clean_name), is written again in their place with the
 * same index; with no free clean name the inode loses the name (and goes to
 * lost+found when it has no other: repair_inode_recount). */
static int fix_bad_names(struct ndir *d)
{
	for (size_t i = 0; i < d->n; i++) {
		struct nent *b = &d->v[i];
		uint8_t clean[BTRFS_NAME_MAX + 1];
		uint16_t clen = 0;
		bool other = false;
		int renamed = 0, ret;

		if (!b->bad || b->decided)
			continue;
		for (size_t j = 0; j < d->n && !other; j++)
			other = d->v[j].child == b->child && !d->v[j].bad && !d->v[j].gone;
		if (!other && (renamed = clean_name(d, b, clean, &clen)) < 0)
			return renamed;
		/* backwards: b itself, which the others are compared with, comes last */
		for (size_t j = d->n; j-- > i;) {
			struct nent *g = &d->v[j];
			if (!g->bad || g->decided || g->child != b->child || !same_name(g, b))
				continue;
			if ((ret = remove_nent(d, g, g->child, g->dup ? (other ? " (another inode has the name)"
						       : renamed ? " (another inode has the name: renamed)"
						       : " (another inode has the name, and no other is free)")
					       : other ? " (a damaged copy: the name holds '/' or NUL)"
					       : renamed ? " (the name holds '/' or NUL: renamed)"
					       : " (the name holds '/' or NUL, and no clean name is free)")))
				return ret;
			if (!renamed) {
				g->decided = true;
				continue;
			}
			g->bad = false;
			g->gone = true;
			g->len = clen;
			memcpy(g->name, clean, clen);
		}
	}
	return 0;
}

static int settle_dir(struct ndir *d)
{
	struct nent **m = malloc((d->n ? d->n : 1) * sizeof(*m));
	int ret = 0;

	if (!m)
		return -ENOMEM;
	ret = mark_duplicates(d);
	if (!ret)
		ret = fix_bad_names(d);
	for (int pass = 0; pass < 2 && !ret; pass++)
		for (size_t i = 0; i < d->n && !ret; i++) {
			size_t n = 0;
			if (d->v[i].decided)
				continue;
			for (size_t j = i; j < d->n; j++)
				if (!d->v[j].decided && same_name(&d->v[i], &d->v[j]))
					m[n++] = &d->v[j];
			ret = decide_name(d, m, n, pass == 0);
		}
	free(m);
	for (size_t i = 0; i < d->n && !ret; i++)
		if (!d->v[i].decided)
			d->r->left++;
	if (!ret && d->dir_changed)
		ret = repair_inode_recount(d->r, d->rootid, d->dir, PR_DIR_ISIZE);
	for (size_t c = 0; c < d->nchildren && !ret; c++)
		if (d->changed[c] && (ret = link_inode_mode(d->r, d->rootid, d->children[c], &(uint32_t){ 0 })) == 1)
			ret = repair_inode_recount(d->r, d->rootid, d->children[c], PR_INODE_NLINK);
	return ret < 0 ? ret : 0;
}

/* Xattrs of inode ino keyed by a wrong hash: moved to the right key. */
static int rekey_xattrs(struct ndir *d)
{
	struct btrfs_key min = { d->dir, BTRFS_XATTR_ITEM_KEY, 0 }, max = { d->dir, BTRFS_XATTR_ITEM_KEY, (uint64_t)-1 };
	struct btrfs_key k;
	struct tree_iter it;
	struct link_entry e;
	const uint8_t *data;
	uint8_t *moved = NULL;
	uint64_t *from = NULL;
	size_t nmoved = 0, used = 0;
	uint32_t size, off;
	int ret;

	tree_iter_init(&it, d->r->fs, &d->root, &min, &max);
	while ((ret = tree_iter_next(&it, &k, &data, &size)) == 1)
		for (off = 0; link_entry_next(k.type, data, size, &off, &e);) {
			uint8_t *grown;
			uint64_t *f;
			if (btrfs_name_hash(e.name, e.len) == k.offset || e.len > BTRFS_NAME_MAX)
				continue;
			grown = realloc(moved, used + e.size);
			f = realloc(from, (nmoved + 1) * sizeof(*from));
			if (grown)
				moved = grown;
			if (f)
				from = f;
			if (!grown || !f) {
				ret = -ENOMEM;
				goto out;
			}
			memcpy(moved + used, data + e.off, e.size);
			from[nmoved++] = k.offset;
			used += e.size;
		}
	tree_iter_release(&it);
	for (size_t i = 0, at = 0; ret == 0 && i < nmoved; i++) {
		uint32_t o = 0;
		struct btrfs_key old = { d->dir, BTRFS_XATTR_ITEM_KEY, from[i] }, to;
		struct nent show_e = { 0 };
		link_entry_next(BTRFS_XATTR_ITEM_KEY, moved + at, (uint32_t)(used - at), &o, &e);
		to = (struct btrfs_key){ d->dir, BTRFS_XATTR_ITEM_KEY, btrfs_name_hash(e.name, e.len) };
		show_e.len = e.len;
		memcpy(show_e.name, e.name, e.len);
		if ((ret = link_remove(d->r, d->rootid, &old, d->dir, e.name, e.len)) ||
		    (ret = link_append(d->r, d->rootid, &to, moved + at, e.size)))
			break;
		if (d->r->changes++ < SAY_MAX) {
			char name[257];
			repair_say(d->r, "root %" PRIu64 " inode %" PRIu64 " xattr \"%s\": re-keyed", d->rootid, d->dir,
				   show(&show_e, name));
		}
		at += e.size;
	}
out:
	tree_iter_release(&it);
	free(moved);
	free(from);
	return ret < 0 ? ret : 0;
}

/* The children's names into a directory that is not there: dropped at the
 * end (check/repair_parentless.c), once their real names are settled. */
static int defer_dir(struct ndir *d)
{
	for (size_t c = 0; c < d->nchildren; c++) {
		if (d->nlater == d->latercap) {
			size_t cap = d->latercap ? d->latercap * 2 : 16;
			struct name_fix *v = realloc(d->later, cap * sizeof(*v));
			if (!v)
				return -ENOMEM;
			d->later = v;
			d->latercap = cap;
		}
		d->later[d->nlater++] = (struct name_fix){ .root = d->rootid, .dir = d->dir, .child = d->children[c] };
	}
	return 0;
}

static int fix_dir(struct ndir *d)
{
	int ret = trans_get_root(d->r->t, d->rootid, &d->root);

	if (ret)
		return ret;
	if (d->xattrs && (ret = rekey_xattrs(d)))
		return ret;
	if (!d->nchildren)
		return 0;
	if ((ret = names_parent_missing(d->r, d->rootid, d->dir)))
		return ret < 0 ? ret : defer_dir(d);
	if ((ret = gather(d)))
		return ret;
	return settle_dir(d);
}

static int add_child(struct ndir *d, uint64_t child)
{
	if (d->nchildren == d->children_cap) {
		size_t cap = d->children_cap ? d->children_cap * 2 : 64;
		uint64_t *c = realloc(d->children, cap * sizeof(*c));
		bool *ch, *re;
		if (c)
			d->children = c;
		ch = c ? realloc(d->changed, cap) : NULL;
		if (ch)
			d->changed = ch;
		re = ch ? realloc(d->real, cap) : NULL;
		if (!re)
			return -ENOMEM;
		d->real = re;
		d->children_cap = cap;
	}
	d->changed[d->nchildren] = d->real[d->nchildren] = false;
	d->children[d->nchildren++] = child;
	return 0;
}

static void reset_dir(struct ndir *d, const struct name_fix *f)
{
	d->rootid = f->root;
	d->dir = f->dir;
	d->nchildren = d->n = d->nheld = 0;
	d->next_index = 0;
	d->xattrs = d->dir_changed = false;
}

int repair_names(struct repair_ctx *r)
{
	struct ndir d = { .r = r };
	const void *rec;
	bool open = false;
	int ret;

	while ((ret = repair_notes_next(r->found, NOTES_NAMES, &rec)) == 1) {
		const struct name_fix *f = rec;
		if (open && (f->root != d.rootid || f->dir != d.dir)) {
			if ((ret = fix_dir(&d)))
				break;
			open = false;
		}
		if (!open) {
			reset_dir(&d, f);
			open = true;
		}
		/* child 0 with a wrong hash: xattrs; else entries naming inode 0, which never exists */
		if (!f->child && f->code == PR_NAME_HASH)
			d.xattrs = true;
		else if (child_slot(&d, f->child) >= 0)
			continue;
		else if (d.nchildren < MAX_CHILDREN && (d.nchildren == 0 || d.children[d.nchildren - 1] < f->child)) {
			if ((ret = add_child(&d, f->child)))
				break;
		} else {
			r->left++;
		}
	}
	if (ret == 0 && open)
		ret = fix_dir(&d);
	for (size_t i = 0; ret == 0 && i < d.nlater; i++)
		ret = names_drop_parentless(r, d.later[i].root, d.later[i].dir, d.later[i].child);
	free(d.later);
	free(d.children);
	free(d.changed);
	free(d.real);
	free(d.v);
	free(d.held);
	free(d.held_src);
	if (ret < 0)
		return ret;
	if (r->changes > SAY_MAX)
		repair_say(r, "... %" PRIu64 " more", r->changes - SAY_MAX);
	return 0;
}
