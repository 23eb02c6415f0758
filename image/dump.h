/* SPDX-License-Identifier: GPL-2.0-only */
/* State of one btk-image dump. */
#ifndef BTK_IMAGE_DUMP_H
#define BTK_IMAGE_DUMP_H

#include <stdbool.h>
#include <stdint.h>
#include "common/cli.h"
#include "image/image.h"
#include <btk/fs.h>

struct dump_args {
	char **paths;
	unsigned npaths;
	const char *out;
	int level;
	bool level_set;
	enum img_compress comp;
	unsigned jobs;
	int sanitize;              /* enum sanitize_mode */
	bool data;
	bool walk_extent_tree;
	size_t frame_size;         /* 0: the writer's default */
	bool zero_unused;          /* zero the unused space of tree blocks (always with sanitize) */
	enum img_format format;
	struct cli_common_options common;
};

/* A node read by the walk, waiting for its children to be emitted first. */
struct pending_node {
	uint64_t bytenr;
	unsigned level;
	uint8_t *data;
};

struct dump_ctx {
	const struct dump_args *args;
	struct fs_info *fs;
	struct btk_writer *bw;          /* --format btk */
	struct bimg_writer *biw;        /* --format btrfs-image */
	struct sanitizer *san;
	struct ebitmap *visited;        /* tree blocks already emitted or skipped */
	struct pending_node pend[BTRFS_MAX_LEVEL];
	unsigned npend;
	uint8_t *scratch;
	struct progress *prog;
	uint64_t blocks, tree_bytes, data_bytes, bad;
	bool reported;             /* the error was already shown */
	bool visited_any;          /* the walk of the current tree reached its root */
};

#endif
