/* SPDX-License-Identifier: GPL-2.0-only */
/* Shared scaffolding of the libfs unit tests: real btrfs images made by
 * mkfs.btrfs --rootdir (built once, cached under $TMPDIR/btk-unit-fixtures/),
 * private in-memory copies of them that a test may corrupt, and a collector
 * for the notes libfs reports. Linked into every unit test binary. */
#ifndef BTK_TESTS_FIXTURES_H
#define BTK_TESTS_FIXTURES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <btk/fs.h>
#include <btk/io.h>

/* Recipes (all single-device, metadata DUP unless said, 3000 small files in three
 * directories plus twenty 20 KiB files):
 *   "small"  - default 16 KiB nodes, crc32c
 *   "deep"   - 4 KiB nodes: the fs tree has level >= 2
 *   "xxhash" - 16 KiB nodes, --csum xxhash
 *   "n64k"   - 64 KiB nodes
 *   "n64k-roomy" - 64 KiB nodes, single metadata, a 640 MiB image: room
 *              for new metadata chunks (about 130 MiB of tree blocks)
 * Every image is larger than 64 MiB + 4 KiB, so superblock copy 1 exists. */

/* Path of the image of a recipe, building it on first use (under a lock, so
 * parallel test processes share one build). Skips the calling test when
 * mkfs.btrfs is not installed. 0 or -errno. */
int fixture_image(const char *recipe_name, char *path_out, size_t len);

/* A memory io over a private copy-on-write mapping of an image file: writes
 * (corruptions) change this process's memory, never the file. 0 or -errno. */
int fixture_load_memory(const char *path, struct io_dev **io);
/* The same, but the device ends after `size` bytes (a truncated copy). */
int fixture_load_memory_size(const char *path, size_t size, struct io_dev **io);

/* fixture_image + fixture_load_memory + fs_open_devices; asserts success.
 * opts may be NULL (defaults, no note callback). Close with fs_close. */
struct fs_info *fixture_open(const char *recipe_name, const struct fs_open_options *opts);

/* Output of `btrfs inspect-internal dump-tree -t <tree>` for a recipe's
 * image, cached beside it. Skips the test when btrfs is not installed.
 * malloc'ed, NUL-terminated. */
char *fixture_dump_tree(const char *recipe_name, const char *tree);

/* Lines of a text (dump-tree output) that start with `prefix` and, when
 * `contains` is not NULL, contain it. Linear: fine on megabytes under ASan. */
size_t fixture_count_lines(const char *text, const char *prefix, const char *contains);

/* Notes collected through fs_open_options.note (note_arg = the log). */
struct note_log {
	unsigned count[3];   /* by enum fs_note_level */
	unsigned total;
	char last[512];
	char all[8192];      /* every note, one per line (truncated when full) */
};
void fixture_note(void *arg, enum fs_note_level level, const char *msg);

/* Overwrite copy `mirror` (0-based; -1: every copy) of the tree block at
 * logical bytenr with garbage through the device io, then drop the block
 * cache so the next read sees the damage. 0 or -errno. */
int fixture_corrupt_block(struct fs_info *fs, uint64_t bytenr, int mirror);
/* Empty the block cache (same budget) so the next reads go to the devices. */
void fixture_drop_cache(struct fs_info *fs, uint64_t budget);

/* A fresh file under $TMPDIR of `size` bytes (sparse zeros) or with the
 * first `size` bytes of `src` when src is not NULL. Asserts success;
 * the caller unlinks it. */
void fixture_temp_file(char *path_out, size_t len, const char *src, uint64_t size);

/* A private copy-on-write mapping of a recipe's image (munmap it after):
 * writes stay in this process, so every open of the buffer sees what the
 * previous commits wrote while the file never changes. */
void fixture_image_copy(const char *recipe_name, uint8_t **buf, size_t *size);
/* fs_open_devices over such a buffer (a memory io); asserts success. */
struct fs_info *fixture_open_buffer(uint8_t *buf, size_t size, bool writable);

/* The reference checker (btrfs check --readonly) over an image held in
 * memory: fails the test with its report when it finds problems; only warns
 * when btrfs-progs is not installed. */
void fixture_btrfs_check_clean(const void *buf, size_t size);

#endif
