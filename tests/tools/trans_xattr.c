// SPDX-License-Identifier: GPL-2.0-only
/* btk-trans-xattr: add extended attributes to a file through libfs
 * transactions, for tests that need a writer of ordinary, kernel-readable
 * items (filling metadata until new chunks are needed, writing into a
 * snapshot's tree).
 *
 *   btk-trans-xattr [--tree ID] [--inode INO] [--count N] [--size BYTES]
 *                   [--per-commit N] [--prefix NAME] DEV...
 *
 * Adds N xattrs named PREFIX%06u (default "user.btk.") with BYTES-byte values
 * (byte j of value i is (i * 131 + j * 7 + 1) mod 256) to inode INO (256) of
 * tree ID (5, the top-level subvolume), committing every --per-commit items
 * (default: once at the end). Prints the chunk count before and after;
 * libfs's notes go to stderr.
 * Exit status 0, 1 on errors, 2 on usage errors. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sizes.h"
#include "common/env_knobs.h"
#include "libfs/volumes_internal.h"
#include <btk/csum.h>
#include <btk/fs.h>
#include <btk/trans.h>
#include <btk/tree.h>
#include <btk/volumes.h>

struct opts {
	uint64_t tree, inode, count, size, per_commit;
	const char *prefix;
	const char *const *devs;
	unsigned ndevs;
};

static int usage(void)
{
	fprintf(stderr, "usage: btk-trans-xattr [--tree ID] [--inode INO] [--count N] [--size BYTES]\n"
			"                       [--per-commit N] [--prefix NAME] DEV...\n");
	return 2;
}

static int parse(int argc, char **argv, struct opts *o)
{
	int i;

	*o = (struct opts){ .tree = BTRFS_FS_TREE_OBJECTID, .inode = BTRFS_FIRST_FREE_OBJECTID, .count = 1,
			    .size = 16, .prefix = "user.btk." };
	for (i = 1; i + 1 < argc && !strncmp(argv[i], "--", 2); i += 2) {
		uint64_t *v = !strcmp(argv[i], "--tree")	 ? &o->tree
			      : !strcmp(argv[i], "--inode")	 ? &o->inode
			      : !strcmp(argv[i], "--count")	 ? &o->count
			      : !strcmp(argv[i], "--size")	 ? &o->size
			      : !strcmp(argv[i], "--per-commit") ? &o->per_commit
								 : NULL;
		if (!strcmp(argv[i], "--prefix")) {
			o->prefix = argv[i + 1];
			continue;
		}
		if (!v || u64_parse(argv[i + 1], v))
			return -1;
	}
	if (i >= argc || o->size > 65535 || strlen(o->prefix) > 200)
		return -1;
	o->devs = (const char *const *)&argv[i];
	o->ndevs = (unsigned)(argc - i);
	return 0;
}

static int add_xattr(struct trans *t, const struct opts *o, uint64_t i, uint8_t *buf)
{
	char name[256];
	int nlen = snprintf(name, sizeof(name), "%s%06" PRIu64, o->prefix, i);
	struct btrfs_key key = { o->inode, BTRFS_XATTR_ITEM_KEY, btrfs_name_hash(name, (size_t)nlen) };
	struct btrfs_key none = { 0, 0, 0 };
	uint8_t *p = buf + sizeof(struct btrfs_dir_item);

	memset(buf, 0, sizeof(struct btrfs_dir_item));
	key_to_disk(dir_item_location_ptr(buf), &none);
	dir_item_set_transid(buf, trans_transid(t));
	dir_item_set_data_len(buf, (uint16_t)o->size);
	dir_item_set_name_len(buf, (uint16_t)nlen);
	dir_item_set_type(buf, BTRFS_FT_XATTR);
	memcpy(p, name, (size_t)nlen);
	for (uint64_t j = 0; j < o->size; j++)
		p[nlen + j] = (uint8_t)(i * 131 + j * 7 + 1);
	return trans_insert_item(t, o->tree, &key, buf,
				 (uint32_t)(sizeof(struct btrfs_dir_item) + (size_t)nlen + o->size));
}

static int run(struct fs_info *fs, const struct opts *o, uint64_t *commits)
{
	struct btrfs_key ikey = { o->inode, BTRFS_INODE_ITEM_KEY, 0 };
	uint8_t *buf = malloc(sizeof(struct btrfs_dir_item) + 256 + o->size);
	struct tree_root_ptr root;
	struct trans *t = NULL;
	uint8_t inode[sizeof(struct btrfs_inode_item)];
	uint32_t isize = sizeof(inode);
	int ret;

	if (!buf)
		return -ENOMEM;
	ret = fs_find_root(fs, o->tree, &root);
	if (!ret)
		ret = tree_lookup(fs, &root, &ikey, inode, &isize);
	if (ret) {
		fprintf(stderr, "btk-trans-xattr: no inode %" PRIu64 " in tree %" PRIu64 "\n", o->inode, o->tree);
		goto out;
	}
	for (uint64_t i = 0; i < o->count; i++) {
		if (!t && (ret = trans_start(fs, &t)))
			goto out;
		if ((ret = add_xattr(t, o, i, buf)))
			goto out;
		if (o->per_commit && (i + 1) % o->per_commit == 0) {
			ret = trans_commit(t);
			t = NULL;
			if (ret)
				goto out;
			++*commits;
		}
	}
	if (t) {
		ret = trans_commit(t);
		t = NULL;
		if (!ret)
			++*commits;
	}
out:
	trans_abort(t);
	free(buf);
	return ret;
}

/* libfs's notes (BTK_TRANS_STATS=1: what each transaction kept in memory) go to stderr. */
static void note_to_stderr(void *arg, enum fs_note_level level, const char *msg)
{
	(void)arg;
	(void)level;
	fprintf(stderr, "btk-trans-xattr: %s\n", msg);
}

int main(int argc, char **argv)
{
	struct fs_open_options oo;
	struct fs_info *fs;
	struct opts o;
	uint64_t commits = 0;
	size_t before;
	int ret;

	if (parse(argc, argv, &o))
		return usage();
	fs_open_options_init(&oo);
	oo.writable = true;
	oo.note = note_to_stderr;
	env_knobs_fill(&oo);
	ret = fs_open(o.devs, o.ndevs, &oo, &fs);
	if (ret) {
		fprintf(stderr, "btk-trans-xattr: %s\n", btk_error_msg());
		return 1;
	}
	before = fs->chunks->count;
	ret = run(fs, &o, &commits);
	if (ret)
		fprintf(stderr, "btk-trans-xattr: %s (%s)\n", btk_error_msg()[0] ? btk_error_msg() : "failed", strerror(-ret));
	else
		printf("xattrs %" PRIu64 " commits %" PRIu64 " chunks %zu -> %zu\n", o.count, commits, before,
		       fs->chunks->count);
	fs_close(fs);
	return ret ? 1 : 0;
}
