/* The csum tree repaired in one transaction. Fixing: each item keeps the
 * checksums of its blocks that no earlier item has (overlaps go to the item
 * that starts first), that lie in a data extent (extent tree) and that make
 * whole checksums (a wrong size is trimmed); what survives of an item stays
 * one item, or several where pieces were cut out. --rebuild-csum-tree:
 * checksums recomputed from the data of every extent that a regular file
 * extent of an inode without NODATASUM uses; blocks that cannot be read
 * from any copy get none, and the report names their extent and the files
 * that use it (libfs/data_users.h). A csum tree
 * with unreadable blocks is dropped whole and rebuilt that way.
 *
 * Either way the new items are compared with the old ones and only the items
 * that differ are deleted or inserted. Memory: the checksums of the whole
 * tree, twice (old and new), plus one entry per data extent. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "check/fs_check.h"
#include "check/repair.h"
#include "libfs/csum.h"
#include "libfs/data_users.h"
#include "libfs/tree.h"
#include "libfs/volumes.h"

#define SAY_MAX 20
#define READ_MAX (1ULL << 20)
#define NAMED_EXTENTS 4   /* extents with unreadable blocks named per run */
#define NAMED_USERS 8     /* files named per extent */

/* An extent with unreadable blocks and the files that use it. */
struct named {
	uint64_t start, len, more;
	struct data_user users[NAMED_USERS];
	size_t n;
};

struct crange {
	uint64_t start, len;
};

/* Checksum items: data holds len / sectorsize checksums. */
struct citem {
	uint64_t start, len;
	uint8_t *data;
};

struct clist {
	struct citem *v;
	size_t n, cap;
};

struct cfix {
	struct repair_ctx *r;
	struct fs_info *fs;
	unsigned csize;
	uint64_t max_item;         /* bytes of data one item may cover */
	struct crange *ext;        /* data extents, sorted, merged where they touch */
	size_t next, next_cap;
	struct clist old, new;
	struct btrfs_key *foreign;  /* items under a key no checksum item has: removed */
	size_t nforeign, foreign_cap;
	uint64_t unreadable, said;
};

static int ranges_add(struct crange **v, size_t *n, size_t *cap, uint64_t start, uint64_t len)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 256;
		struct crange *p = realloc(*v, c * sizeof(*p));
		if (!p)
			return -ENOMEM;
		*v = p;
		*cap = c;
	}
	(*v)[(*n)++] = (struct crange){ start, len };
	return 0;
}

static int cmp_range(const void *a, const void *b)
{
	const struct crange *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* Sort and merge overlapping or touching ranges. */
static void ranges_merge(struct crange *v, size_t *n)
{
	size_t o = 0;

	qsort(v, *n, sizeof(*v), cmp_range);
	for (size_t i = 0; i < *n; i++) {
		if (o && v[i].start <= v[o - 1].start + v[o - 1].len) {
			uint64_t end = v[i].start + v[i].len;
			if (end > v[o - 1].start + v[o - 1].len)
				v[o - 1].len = end - v[o - 1].start;
			continue;
		}
		v[o++] = v[i];
	}
	*n = o;
}

/* An item: old ones keep len = their size in bytes, new ones the data they cover. */
static int clist_add(struct clist *l, uint64_t start, uint64_t len, const uint8_t *data, size_t bytes)
{
	if (l->n == l->cap) {
		size_t c = l->cap ? l->cap * 2 : 256;
		struct citem *p = realloc(l->v, c * sizeof(*p));
		if (!p)
			return -ENOMEM;
		l->v = p;
		l->cap = c;
	}
	l->v[l->n].data = malloc(bytes ? bytes : 1);
	if (!l->v[l->n].data)
		return -ENOMEM;
	memcpy(l->v[l->n].data, data, bytes);
	l->v[l->n].start = start;
	l->v[l->n].len = len;
	l->n++;
	return 0;
}

/* A new item covering len bytes of data from start. */
static int new_item(struct cfix *x, uint64_t start, uint64_t len, const uint8_t *sums)
{
	return clist_add(&x->new, start, len, sums, len / x->fs->sectorsize * x->csize);
}

static void clist_free(struct clist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].data);
	free(l->v);
}

/* Data extents from the extent tree. */
static int read_data_extents(struct cfix *x)
{
	struct btrfs_key min = { 0, BTRFS_EXTENT_ITEM_KEY, 0 }, max = { (uint64_t)-1, 255, (uint64_t)-1 }, key;
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size;
	size_t cap = 0;
	int ret;

	tree_iter_init(&it, x->fs, &x->fs->extent_root, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &data, &size)) == 1)
		if (key.type == BTRFS_EXTENT_ITEM_KEY && size >= sizeof(struct btrfs_extent_item) &&
		    (extent_flags(data) & BTRFS_EXTENT_FLAG_DATA) &&
		    (ret = ranges_add(&x->ext, &x->next, &cap, key.objectid, key.offset)) < 0)
			break;
	tree_iter_release(&it);
	if (ret < 0)
		return ret;
	ranges_merge(x->ext, &x->next);
	return 0;
}

/* The end of the data-extent run that holds pos, or 0 if none holds it;
 * *from: the start of the next run after pos (UINT64_MAX if none). */
static uint64_t extent_end_at(const struct cfix *x, uint64_t pos, uint64_t *from)
{
	size_t lo = 0, hi = x->next;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (x->ext[mid].start + x->ext[mid].len <= pos)
			lo = mid + 1;
		else
			hi = mid;
	}
	*from = lo < x->next ? x->ext[lo].start : UINT64_MAX;
	if (lo < x->next && x->ext[lo].start <= pos)
		return x->ext[lo].start + x->ext[lo].len;
	return 0;
}

/* Every csum item into x->old; with fix, what survives of each into x->new. */
static int read_csum_items(struct cfix *x, bool fix)
{
	struct btrfs_key min = { BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, 0 };
	struct btrfs_key max = { BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, (uint64_t)-1 }, key;
	uint32_t ss = x->fs->sectorsize, size;
	uint64_t covered = 0;
	struct tree_iter it;
	const uint8_t *data;
	int ret;

	tree_iter_init(&it, x->fs, &x->fs->csum_root, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &data, &size)) == 1) {
		uint64_t len = (uint64_t)(size / x->csize) * ss, pos, end = key.offset + len;

		if (end < key.offset) /* past the end of the address space: clamp */
			end = UINT64_MAX;

		/* the old item as it is, whole (its size may be wrong): to compare and delete */
		ret = clist_add(&x->old, key.offset, size, data, size);
		if (ret)
			break;
		if (!fix || key.offset % ss)
			continue;
		pos = key.offset > covered ? key.offset : covered;
		while (pos < end) {
			uint64_t next, stop = extent_end_at(x, pos, &next);
			if (!stop) {
				pos = next;
				continue;
			}
			if (stop > end)
				stop = end;
			ret = new_item(x, pos, stop - pos, data + (pos - key.offset) / ss * x->csize);
			if (ret)
				break;
			pos = stop;
		}
		if (ret)
			break;
		if (end > covered)
			covered = end;
	}
	tree_iter_release(&it);
	return ret < 0 ? ret : 0;
}

/* The csum tree's items under another key than checksums have (the kernel
 * rejects a leaf that holds one), to remove. */
static int read_foreign_items(struct cfix *x)
{
	struct btrfs_key min = { 0, 0, 0 }, max = { (uint64_t)-1, 255, (uint64_t)-1 }, key;
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size;
	int ret;

	tree_iter_init(&it, x->fs, &x->fs->csum_root, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &data, &size)) == 1) {
		if (key.objectid == BTRFS_EXTENT_CSUM_OBJECTID && key.type == BTRFS_EXTENT_CSUM_KEY)
			continue;
		if (x->nforeign == x->foreign_cap) {
			size_t c = x->foreign_cap ? x->foreign_cap * 2 : 16;
			struct btrfs_key *p = realloc(x->foreign, c * sizeof(*p));
			if (!p) {
				ret = -ENOMEM;
				break;
			}
			x->foreign = p;
			x->foreign_cap = c;
		}
		x->foreign[x->nforeign++] = key;
	}
	tree_iter_release(&it);
	return ret < 0 ? ret : 0;
}

/* --rebuild-csum-tree: the parts of data extents that regular file extents
 * of checksummed inodes use, from every subvolume tree. */
static int tree_used_extents(struct cfix *x, const struct tree_root_ptr *root, size_t *cap)
{
	struct btrfs_key min = { 0, 0, 0 }, max = { (uint64_t)-1, 255, (uint64_t)-1 }, key;
	uint64_t ino = 0, flags = 0;
	struct tree_iter it;
	const uint8_t *d;
	uint32_t size;
	int ret;

	tree_iter_init(&it, x->fs, root, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &d, &size)) == 1) {
		if (key.type == BTRFS_INODE_ITEM_KEY && size >= sizeof(struct btrfs_inode_item)) {
			ino = key.objectid;
			flags = inode_flags(d);
		} else if (key.type == BTRFS_EXTENT_DATA_KEY && size >= sizeof(struct btrfs_file_extent_item) &&
			   file_extent_type(d) == BTRFS_FILE_EXTENT_REG && file_extent_disk_bytenr(d) &&
			   !(ino == key.objectid && (flags & BTRFS_INODE_NODATASUM))) {
			/* the part the file uses (compressed: all of it), as the kernel wrote checksums:
			 * the unwritten rest of a preallocated extent has none */
			uint64_t dlen = file_extent_disk_num_bytes(d);
			bool whole = file_extent_compression(d) != 0;
			uint64_t lo = whole ? 0 : file_extent_offset(d), hi = whole ? dlen : lo + file_extent_num_bytes(d);
			if (hi > dlen || hi < lo)
				hi = dlen;
			if (lo > hi)
				lo = hi;
			if (hi > lo && (ret = ranges_add(&x->ext, &x->next, cap, file_extent_disk_bytenr(d) + lo, hi - lo)))
				break;
		}
	}
	tree_iter_release(&it);
	return ret < 0 ? ret : 0;
}

static int collect_used_extents(struct cfix *x)
{
	struct btrfs_key min = { 0, BTRFS_ROOT_ITEM_KEY, 0 }, max = { (uint64_t)-1, BTRFS_ROOT_ITEM_KEY, (uint64_t)-1 };
	struct btrfs_key key;
	struct tree_root_ptr *roots = NULL;
	size_t nroots = 0, cap = 0;
	struct tree_iter it;
	const uint8_t *d;
	uint32_t size;
	int ret;

	tree_iter_init(&it, x->fs, &x->fs->tree_root, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &d, &size)) == 1) {
		struct tree_root_ptr *p;
		bool subvol = key_is_subvolume_id(key.objectid);
		if (key.type != BTRFS_ROOT_ITEM_KEY || !subvol || size < BTRFS_ROOT_ITEM_V1_SIZE ||
		    !root_item_refs(d) || !root_item_bytenr(d) || root_item_level(d) >= BTRFS_MAX_LEVEL)
			continue;
		if (nroots == cap) {
			cap = cap ? cap * 2 : 16;
			if (!(p = realloc(roots, cap * sizeof(*p)))) {
				ret = -ENOMEM;
				break;
			}
			roots = p;
		}
		roots[nroots++] = (struct tree_root_ptr){ key.objectid, root_item_bytenr(d), root_item_generation(d),
							  root_item_level(d) };
	}
	tree_iter_release(&it);
	cap = 0;
	for (size_t i = 0; ret >= 0 && i < nroots; i++)
		ret = tree_used_extents(x, &roots[i], &cap);
	free(roots);
	if (ret < 0)
		return ret;
	ranges_merge(x->ext, &x->next);
	return 0;
}

/* One sector from any copy that reads; -EIO when none does. */
static int read_sector(struct fs_info *fs, uint64_t logical, uint8_t *buf)
{
	int copies = volumes_num_copies(fs, logical), ret = -EIO;

	for (int m = 0; m < copies; m++)
		if ((ret = volumes_read(fs, logical, buf, fs->sectorsize, m)) == 0)
			return 0;
	return ret;
}

/* The extent that holds the unreadable block at logical, unless it is the
 * last one named already: looked up while the report has room. */
static void note_extent(struct cfix *x, uint64_t logical, struct named *v, size_t *n)
{
	struct named *e = &v[*n];

	if (x->said >= SAY_MAX || *n == NAMED_EXTENTS || (*n && logical - v[*n - 1].start < v[*n - 1].len))
		return;
	if (data_users_find(x->fs, logical, e->users, NAMED_USERS, &e->n, &e->more, &e->start, &e->len)) {
		x->fs->errmsg[0] = 0;
		return;
	}
	++*n;
}

/* One line per file that uses each extent. */
static void say_users(struct cfix *x, const struct named *v, size_t n)
{
	char line[560];

	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j < v[i].n; j++) {
			data_user_describe(x->fs, &v[i].users[j], line, sizeof(line));
			repair_say(x->r, "extent %" PRIu64 "+%" PRIu64 " is used by %s", v[i].start, v[i].len, line);
		}
		if (v[i].more)
			repair_say(x->r, "extent %" PRIu64 "+%" PRIu64 " is used by %" PRIu64 " more file extent(s)",
				   v[i].start, v[i].len, v[i].more);
		if (!v[i].n && !v[i].more)
			repair_say(x->r, "extent %" PRIu64 "+%" PRIu64 " has no readable data reference", v[i].start,
				   v[i].len);
	}
}

/* Checksums of [start, start+len) into new items (split at unreadable blocks and at max_item). */
static int csum_range(struct cfix *x, uint64_t start, uint64_t len, uint8_t *buf, uint8_t *sums)
{
	uint32_t ss = x->fs->sectorsize;
	uint64_t run = start, nrun = 0, bad = 0;  /* the item being built: [run, run + nrun sectors) */
	struct named named[NAMED_EXTENTS];
	size_t nnamed = 0;
	int ret = 0;

	for (uint64_t off = 0; off < len && !ret; off += READ_MAX) {
		uint64_t n = len - off < READ_MAX ? len - off : READ_MAX;
		bool whole = volumes_read(x->fs, start + off, buf, n, 0) == 0;

		for (uint64_t s = 0; s < n && !ret; s += ss) {
			uint8_t c[BTRFS_CSUM_SIZE];
			if (!whole && read_sector(x->fs, start + off + s, buf + s)) {
				bad++;
				note_extent(x, start + off + s, named, &nnamed);
				if (nrun)
					ret = new_item(x, run, nrun * ss, sums);
				nrun = 0;
				continue;
			}
			if (!nrun)
				run = start + off + s;
			csum_compute(x->fs->csum_type, buf + s, ss, c);
			memcpy(sums + nrun * x->csize, c, x->csize);
			if (++nrun * ss == x->max_item) {
				ret = new_item(x, run, nrun * ss, sums);
				nrun = 0;
			}
		}
	}
	if (!ret && nrun)
		ret = new_item(x, run, nrun * ss, sums);
	if (bad) {
		x->unreadable += bad;
		if (x->said++ < SAY_MAX)
			repair_say(x->r, "data extent %" PRIu64 "+%" PRIu64 ": %" PRIu64
				   " block(s) cannot be read from any copy and get no checksum", start, len, bad);
		say_users(x, named, nnamed);
	}
	return ret;
}

static int rebuild(struct cfix *x)
{
	uint8_t *buf = malloc(READ_MAX), *sums = malloc(x->max_item / x->fs->sectorsize * x->csize);
	int ret = buf && sums ? 0 : -ENOMEM;

	for (size_t i = 0; !ret && i < x->next; i++) {
		uint64_t start = x->ext[i].start - x->ext[i].start % x->fs->sectorsize;
		uint64_t end = x->ext[i].start + x->ext[i].len;
		end += (x->fs->sectorsize - end % x->fs->sectorsize) % x->fs->sectorsize;
		ret = csum_range(x, start, end - start, buf, sums);
	}
	free(buf);
	free(sums);
	return ret;
}

/* Is the old item (len = item bytes) identical to the new one? */
static bool same_item(const struct cfix *x, const struct citem *o, const struct citem *n)
{
	uint64_t bytes = n->len / x->fs->sectorsize * x->csize;

	return o->start == n->start && o->len == bytes && !memcmp(o->data, n->data, bytes);
}

/* Delete the old items that no new item equals, insert the new ones no old item equals. */
static int apply(struct cfix *x)
{
	uint64_t deleted = 0, inserted = 0;
	size_t i = 0, j = 0;
	bool *keep_old = calloc(x->old.n + 1, 1), *keep_new = calloc(x->new.n + 1, 1);
	int ret = keep_old && keep_new ? 0 : -ENOMEM;

	/* both lists are sorted by start (new items of one start: at most one) */
	while (!ret && i < x->old.n && j < x->new.n) {
		if (x->old.v[i].start < x->new.v[j].start)
			i++;
		else if (x->old.v[i].start > x->new.v[j].start)
			j++;
		else {
			if (same_item(x, &x->old.v[i], &x->new.v[j]))
				keep_old[i] = keep_new[j] = true;
			i++;
			j++;
		}
	}
	for (i = 0; !ret && i < x->old.n; i++) {
		struct btrfs_key k = { BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, x->old.v[i].start };
		if (keep_old[i])
			continue;
		ret = trans_delete_item(x->r->t, BTRFS_CSUM_TREE_OBJECTID, &k);
		deleted++;
	}
	for (j = 0; !ret && j < x->new.n; j++) {
		struct btrfs_key k = { BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, x->new.v[j].start };
		if (keep_new[j])
			continue;
		ret = trans_insert_item(x->r->t, BTRFS_CSUM_TREE_OBJECTID, &k, x->new.v[j].data,
					(uint32_t)(x->new.v[j].len / x->fs->sectorsize * x->csize));
		inserted++;
	}
	free(keep_old);
	free(keep_new);
	for (size_t f = 0; !ret && f < x->nforeign; f++) {
		const struct btrfs_key *k = &x->foreign[f];
		if (!(ret = trans_delete_item(x->r->t, BTRFS_CSUM_TREE_OBJECTID, k)))
			repair_say(x->r, "item (%" PRIu64 " %u %" PRIu64 ") removed: no checksum item has that key",
				   k->objectid, k->type, k->offset);
		deleted++;
	}
	if (ret)
		return ret;
	if (deleted || inserted) {
		repair_say(x->r, "%" PRIu64 " csum item(s) removed or replaced, %" PRIu64 " written (%zu kept)", deleted,
			   inserted, x->old.n - deleted);
		x->r->changes++;
	}
	return 0;
}

static uint64_t total_bytes(const struct cfix *x)
{
	uint64_t n = 0;

	for (size_t i = 0; i < x->next; i++)
		n += x->ext[i].len;
	return n;
}

/* A csum tree the check could not read whole is dropped (its blocks below the
 * unreadable ones found through the extent tree) and started again empty: the
 * rebuild then writes every checksum anew. 1 when dropped. */
static int drop_damaged_csum_tree(struct repair_ctx *r)
{
	uint64_t unreadable;
	int ret;

	if (!check_tree_unreadable(r->found, BTRFS_CSUM_TREE_OBJECTID))
		return 0;
	if ((ret = trans_delete_damaged_tree(r->t, BTRFS_CSUM_TREE_OBJECTID, &unreadable)) ||
	    (ret = trans_create_tree(r->t, BTRFS_CSUM_TREE_OBJECTID)))
		return ret;
	repair_say(r, "the old csum tree had %" PRIu64 " unreadable block(s): dropped whole, rebuilt from the data",
		   unreadable);
	r->changes++;
	return 1;
}

int repair_csums(struct repair_ctx *r)
{
	struct cfix x = { .r = r, .fs = r->fs, .csize = r->fs->csum_size };
	uint32_t leaf_data = r->fs->nodesize - (uint32_t)sizeof(struct btrfs_header);
	/* missing checksums can only come from the data: recompute them all (trimming
	 * damaged items first would leave exactly such holes) */
	bool rebuild_all = r->opts->rebuild_csum || r->found->counts[PR_CSUM_MISSING] > 0;
	int ret, dropped;

	if (!r->fs->csum_root.bytenr)
		return fs_error(r->fs, -EUCLEAN, "the filesystem has no csum tree");
	/* like the kernel: room for two item headers left in a leaf */
	x.max_item = ((leaf_data - 2 * sizeof(struct btrfs_item)) / x.csize - 1) * (uint64_t)r->fs->sectorsize;
	if ((dropped = drop_damaged_csum_tree(r)) < 0) {
		ret = dropped;
		goto out;
	}
	rebuild_all = rebuild_all || dropped;
	ret = rebuild_all ? collect_used_extents(&x) : read_data_extents(&x);
	if (!ret && !dropped)   /* a dropped tree has no old items left */
		ret = read_csum_items(&x, !rebuild_all);
	if (!ret && !dropped)
		ret = read_foreign_items(&x);
	if (!ret && rebuild_all)
		ret = rebuild(&x);
	if (!ret && x.said > SAY_MAX)
		repair_say(r, "... %" PRIu64 " more extent(s) with unreadable blocks", x.said - SAY_MAX);
	if (!ret && rebuild_all)
		repair_say(r, "checksums recomputed from the data: %" PRIu64 " bytes in %zu run(s) of data extents%s",
			   total_bytes(&x), x.next, x.unreadable ? "; unreadable blocks have none" : "");
	if (!ret)
		ret = apply(&x);
out:
	free(x.ext);
	free(x.foreign);
	clist_free(&x.old);
	clist_free(&x.new);
	return ret;
}
