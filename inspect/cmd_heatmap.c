// SPDX-License-Identifier: GPL-2.0-only
/* btk-inspect heatmap: a PNG of the filesystem's chunks, each a block of
 * pixels along a Hilbert curve in logical-address order (or, with --by
 * physical, one map per device in physical order), coloured by type and
 * brighter the fuller. Each map's place is recorded in a tEXt chunk
 * "btk-map" = "X Y SIDE TILES [devid N]" for programs (and the tests). */
#include <argp.h>
#include <errno.h>
#include <inttypes.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli.h"
#include "common/messages.h"
#include "common/sizes.h"
#include "inspect/heatmap_draw.h"
#include "inspect/inspect.h"
#include <btk/blockgroups.h>
#include <btk/volumes.h>

#define MARGIN 8
#define TITLE_H 20
#define MAX_MAPS 64

struct heatmap_args {
	const char *out;
	bool physical;
	unsigned size;
	char **paths;
	unsigned npaths;
};

/* One square map: its tiles and where it goes. */
struct heat_map {
	struct heat_tile *tiles;
	unsigned ntiles;
	uint64_t devid;   /* --by physical */
	unsigned x, y, side;
};

enum { OPT_BY = 256 };

static const struct argp_option heatmap_options[] = {
	{ "output", 'o', "FILE", 0, "Write the PNG to FILE (required)", 0 },
	{ "by", OPT_BY, "ORDER", 0, "logical (default: one map of the chunks by logical address) or physical "
	  "(one map per device: the stripes of the chunks by physical offset)", 0 },
	{ "size", 's', "PIXELS", 0, "Side of each map (default 512, 64-4096)", 0 },
	{ 0 }
};

static error_t heatmap_parse(int key, char *arg, struct argp_state *state)
{
	struct heatmap_args *a = state->input;
	uint64_t v;

	switch (key) {
	case 'o': a->out = arg; break;
	case OPT_BY:
		if (strcmp(arg, "logical") && strcmp(arg, "physical"))
			argp_error(state, "invalid --by '%s' (expected logical or physical)", arg);
		a->physical = !strcmp(arg, "physical");
		break;
	case 's':
		if (u64_parse(arg, &v) || v < 64 || v > 4096)
			argp_error(state, "invalid --size '%s' (64 to 4096 pixels)", arg);
		a->size = (unsigned)v;
		break;
	case ARGP_KEY_END:
		if (!a->out)
			argp_error(state, "give the PNG file with -o FILE");
		break;
	default: return cli_argp_devices(key, state, &a->paths, &a->npaths);
	}
	return 0;
}

/* used / length of the chunk at logical, from its block group (0 without one). */
static double chunk_fill(const struct block_group_list *bgs, const struct chunk *c)
{
	for (size_t i = 0; i < bgs->count; i++)
		if (bgs->groups[i].start == c->logical && bgs->groups[i].length)
			return (double)bgs->groups[i].used / (double)bgs->groups[i].length;
	return 0;
}

static int by_start(const void *a, const void *b)
{
	const struct heat_tile *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* The maps: one of every chunk, or one per device of its stripes. */
static int collect(struct fs_info *fs, const struct block_group_list *bgs, bool physical, struct heat_map *maps,
		   unsigned *nmaps)
{
	unsigned n = physical ? fs_num_devices(fs) : 1;

	if (n > MAX_MAPS)
		n = MAX_MAPS;
	for (unsigned m = 0; m < n; m++) {
		struct heat_map *hm = &maps[m];
		hm->devid = physical ? fs_device(fs, m)->devid : 0;
		hm->tiles = calloc(fs_chunk_count(fs) * (physical ? 4 : 1) + 1, sizeof(*hm->tiles));
		if (!hm->tiles)
			return -ENOMEM;
		for (size_t i = 0; i < fs_chunk_count(fs); i++) {
			const struct chunk *c = fs_chunk(fs, i);
			double fill = chunk_fill(bgs, c);
			if (!physical) {
				hm->tiles[hm->ntiles++] = (struct heat_tile){ c->logical, c->length, c->type, fill };
				continue;
			}
			for (unsigned s = 0; s < c->num_stripes && hm->ntiles < fs_chunk_count(fs) * 4; s++)
				if (c->stripes[s].devid == hm->devid)
					hm->tiles[hm->ntiles++] = (struct heat_tile){
						c->stripes[s].physical,
						chunk_stripe_size(c->length, c->type, c->num_stripes, c->sub_stripes), c->type,
						fill };
		}
		qsort(hm->tiles, hm->ntiles, sizeof(*hm->tiles), by_start);
	}
	*nmaps = n;
	return 0;
}

static int write_png(const char *path, const struct canvas *c, const struct heat_map *maps, unsigned nmaps)
{
	FILE *f = fopen(path, "wb");
	png_structp png;
	png_infop info;
	png_text text[MAX_MAPS + 1];
	char values[MAX_MAPS][96];
	int ret = 0;

	if (!f)
		return -errno;
	png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
	info = png ? png_create_info_struct(png) : NULL;
	if (!info) {
		png_destroy_write_struct(&png, NULL);
		fclose(f);
		return -ENOMEM;
	}
	if (setjmp(png_jmpbuf(png))) {
		png_destroy_write_struct(&png, &info);
		fclose(f);
		return -EIO;
	}
	png_init_io(png, f);
	png_set_IHDR(png, info, c->width, c->height, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
		     PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
	memset(text, 0, sizeof(text));
	text[0].compression = PNG_TEXT_COMPRESSION_NONE;
	text[0].key = (char *)"Software";
	text[0].text = (char *)"btk-inspect heatmap";
	for (unsigned m = 0; m < nmaps; m++) {
		int n = snprintf(values[m], sizeof(values[m]), "%u %u %u %u", maps[m].x, maps[m].y, maps[m].side,
				 maps[m].ntiles);
		if (maps[m].devid && n > 0 && (size_t)n < sizeof(values[m]))
			snprintf(values[m] + n, sizeof(values[m]) - (size_t)n, " devid %" PRIu64, maps[m].devid);
		text[m + 1].compression = PNG_TEXT_COMPRESSION_NONE;
		text[m + 1].key = (char *)"btk-map";
		text[m + 1].text = values[m];
	}
	png_set_text(png, info, text, (int)nmaps + 1);
	png_write_info(png, info);
	for (unsigned y = 0; y < c->height; y++)
		png_write_row(png, c->rgb + (size_t)y * c->width * 3);
	png_write_end(png, NULL);
	png_destroy_write_struct(&png, &info);
	if (fclose(f))
		ret = -errno;
	return ret;
}

/* Lay the maps out side by side under the title, the legend below; draw. */
static int render(const struct heatmap_args *a, struct heat_map *maps, unsigned nmaps, struct canvas *c)
{
	static const uint8_t ink[3] = { 0, 0, 0 };
	unsigned width = MARGIN, height, side_max = 0, legend_y;
	char label[64];
	int ret;

	for (unsigned m = 0; m < nmaps; m++) {
		maps[m].side = heat_map_side(maps[m].tiles, maps[m].ntiles, a->size);
		maps[m].x = width;
		maps[m].y = MARGIN + TITLE_H + (a->physical ? TITLE_H : 0);
		width += maps[m].side + MARGIN;
		if (maps[m].side > side_max)
			side_max = maps[m].side;
	}
	if (width < 300)
		width = 300;
	legend_y = MARGIN + TITLE_H + (a->physical ? TITLE_H : 0) + side_max + MARGIN;
	height = legend_y + 90;
	if ((ret = canvas_init(c, width, height)))
		return ret;
	canvas_text(c, MARGIN, MARGIN, a->physical ? "chunks by physical offset" : "chunks by logical address", ink);
	for (unsigned m = 0; m < nmaps; m++) {
		if (a->physical) {
			snprintf(label, sizeof(label), "devid %" PRIu64, maps[m].devid);
			canvas_text(c, maps[m].x, MARGIN + TITLE_H, label, ink);
		}
		heat_map_draw(c, maps[m].x, maps[m].y, maps[m].side, maps[m].tiles, maps[m].ntiles);
	}
	heat_legend_draw(c, MARGIN, legend_y);
	return 0;
}

int cmd_heatmap(int argc, char **argv)
{
	static const struct argp argp = { heatmap_options, heatmap_parse, "DEVICE...",
		"Draw the chunks of the filesystem into a PNG: each chunk a block of pixels along a Hilbert "
		"curve in logical-address order (--by physical: one map per device), coloured by type "
		"(data, metadata, system), brighter the fuller, with a legend.", NULL, NULL, NULL };
	struct heatmap_args a = { .size = 512 };
	struct heat_map maps[MAX_MAPS];
	struct block_group_list bgs = { 0 };
	struct inspect_notes notes = { 0 };
	struct canvas c = { 0 };
	unsigned nmaps = 0, tiles = 0;
	struct fs_info *fs;
	int ret;

	memset(maps, 0, sizeof(maps));
	argp_parse(&argp, argc, argv, 0, NULL, &a);
	fs = inspect_open(a.paths, a.npaths, -1, false, &notes);
	if (!fs)
		return INSPECT_ERROR;
	ret = fs_read_block_groups(fs, &bgs);
	if (ret)
		msg_warning("cannot read the block groups (every chunk drawn as empty): %s", btk_error_msg());
	ret = collect(fs, &bgs, a.physical, maps, &nmaps);
	if (!ret)
		ret = render(&a, maps, nmaps, &c);
	if (!ret && (ret = write_png(a.out, &c, maps, nmaps)))
		msg_errno(ret, "cannot write %s", a.out);
	else if (ret)
		msg_errno(ret, "drawing the heatmap");
	for (unsigned m = 0; m < nmaps; m++)
		tiles += maps[m].ntiles;
	if (!ret)
		msg_info("%s: %u tile(s) in %u map(s)", a.out, tiles, nmaps);
	for (unsigned m = 0; m < MAX_MAPS; m++)
		free(maps[m].tiles);
	canvas_free(&c);
	block_group_list_free(&bgs);
	fs_close(fs);
	return inspect_status(ret != 0, &notes);
}
