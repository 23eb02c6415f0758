/* SPDX-License-Identifier: GPL-2.0-only */
/* The picture of btk-inspect heatmap: tiles laid along a Hilbert curve in an
 * RGB canvas, a legend in a tiny bitmap font. No I/O (cmd_heatmap.c writes
 * the PNG); exposed for cmd_heatmap.c only. */
#ifndef BTK_INSPECT_HEATMAP_DRAW_H
#define BTK_INSPECT_HEATMAP_DRAW_H

#include <stdint.h>

/* One tile: a chunk (or, per device, one stripe of a chunk). */
struct heat_tile {
	uint64_t start;   /* logical (or physical) address: tiles are drawn in this order */
	uint64_t length;
	uint64_t type;    /* BTRFS_BLOCK_GROUP_* */
	double fill;      /* used / length, 0..1 */
};

struct canvas {
	unsigned width, height;
	uint8_t *rgb;     /* width * height * 3 */
};

/* A white canvas, or -ENOMEM. */
int canvas_init(struct canvas *c, unsigned width, unsigned height);
void canvas_free(struct canvas *c);

/* The side in pixels of the square map that tiles[] take at most
 * max_side pixels for, and its cells' size: every tile gets cells in
 * proportion to its length (at least one), cells placed along a Hilbert
 * curve of a power-of-two grid. */
unsigned heat_map_side(const struct heat_tile *tiles, unsigned n, unsigned max_side);
/* Draw tiles (sorted by start) into the square of side `side` at (x0, y0):
 * each cell a block of pixels coloured by type, brighter the fuller; a
 * one-pixel line of the background between cells of different tiles, so each
 * tile is one connected region. */
void heat_map_draw(struct canvas *c, unsigned x0, unsigned y0, unsigned side, const struct heat_tile *tiles,
		   unsigned n);
/* The legend from (x0, y0): a swatch per type at empty and full, with names;
 * returns its height. */
unsigned heat_legend_draw(struct canvas *c, unsigned x0, unsigned y0);
/* Text in the canvas's bitmap font (lowercase letters, digits, a few signs). */
void canvas_text(struct canvas *c, unsigned x, unsigned y, const char *s, const uint8_t rgb[3]);
/* The colour of a tile of this type and fill. */
void heat_colour(uint64_t type, double fill, uint8_t out[3]);

#endif
