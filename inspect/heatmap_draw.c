// SPDX-License-Identifier: GPL-2.0-only
/* The picture of btk-inspect heatmap; see heatmap_draw.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "inspect/heatmap_draw.h"
#include <btk/format.h>

#define CELLS_MAX (256u * 256u)
#define FONT_SCALE 2

static const uint8_t background[3] = { 255, 255, 255 };

int canvas_init(struct canvas *c, unsigned width, unsigned height)
{
	c->width = width;
	c->height = height;
	c->rgb = malloc((size_t)width * height * 3);
	if (!c->rgb)
		return -ENOMEM;
	memset(c->rgb, 255, (size_t)width * height * 3);
	return 0;
}

void canvas_free(struct canvas *c)
{
	free(c->rgb);
	c->rgb = NULL;
}

static void put(struct canvas *c, unsigned x, unsigned y, const uint8_t rgb[3])
{
	if (x < c->width && y < c->height)
		memcpy(c->rgb + ((size_t)y * c->width + x) * 3, rgb, 3);
}

static void rect(struct canvas *c, unsigned x, unsigned y, unsigned w, unsigned h, const uint8_t rgb[3])
{
	for (unsigned j = 0; j < h; j++)
		for (unsigned i = 0; i < w; i++)
			put(c, x + i, y + j, rgb);
}

void heat_colour(uint64_t type, double fill, uint8_t out[3])
{
	static const uint8_t data[3] = { 30, 110, 235 }, meta[3] = { 240, 140, 0 }, sys[3] = { 200, 30, 60 },
			     mixed[3] = { 40, 170, 60 };
	const uint8_t *base = meta;
	double v;

	if ((type & BTRFS_BLOCK_GROUP_DATA) && (type & BTRFS_BLOCK_GROUP_METADATA))
		base = mixed;
	else if (type & BTRFS_BLOCK_GROUP_DATA)
		base = data;
	else if (type & BTRFS_BLOCK_GROUP_SYSTEM)
		base = sys;
	if (fill < 0)
		fill = 0;
	if (fill > 1)
		fill = 1;
	v = 0.25 + 0.75 * fill; /* an empty chunk is dark, a full one its full colour */
	for (int i = 0; i < 3; i++)
		out[i] = (uint8_t)(base[i] * v + 0.5);
}

/* Cells of tile t at unit bytes per cell: at least one. */
static uint64_t tile_cells(const struct heat_tile *t, uint64_t unit)
{
	uint64_t n = (t->length + unit / 2) / unit;

	return n ? n : 1;
}

static uint64_t total_cells(const struct heat_tile *tiles, unsigned n, uint64_t unit)
{
	uint64_t sum = 0;

	for (unsigned i = 0; i < n; i++)
		sum += tile_cells(&tiles[i], unit);
	return sum;
}

/* The bytes per cell: the smallest tile's length, doubled until the cells fit
 * a grid whose cells are at least 4 pixels wide within max_side. */
static uint64_t cell_unit(const struct heat_tile *tiles, unsigned n, unsigned max_side, unsigned *grid)
{
	uint64_t unit = UINT64_MAX, cells;
	unsigned g;

	for (unsigned i = 0; i < n; i++)
		if (tiles[i].length && tiles[i].length < unit)
			unit = tiles[i].length;
	if (unit == UINT64_MAX)
		unit = 1;
	for (;;) {
		cells = total_cells(tiles, n, unit);
		for (g = 1; (uint64_t)g * g < cells; g *= 2)
			;
		if ((g * 4 <= max_side && cells <= CELLS_MAX) || unit > UINT64_MAX / 2)
			break;
		unit *= 2;
	}
	*grid = g;
	return unit;
}

unsigned heat_map_side(const struct heat_tile *tiles, unsigned n, unsigned max_side)
{
	unsigned g;

	cell_unit(tiles, n, max_side, &g);
	return max_side / g * g;
}

/* Cell d of the Hilbert curve that fills a g x g grid (g a power of two). */
static void hilbert_cell(unsigned g, uint64_t d, unsigned *x, unsigned *y)
{
	unsigned rx, ry, t;

	*x = *y = 0;
	for (unsigned s = 1; s < g; s *= 2) {
		rx = 1 & (unsigned)(d / 2);
		ry = 1 & (unsigned)(d ^ rx);
		if (!ry) {
			if (rx) {
				*x = s - 1 - *x;
				*y = s - 1 - *y;
			}
			t = *x, *x = *y, *y = t;
		}
		*x += s * rx;
		*y += s * ry;
		d /= 4;
	}
}

void heat_map_draw(struct canvas *c, unsigned x0, unsigned y0, unsigned side, const struct heat_tile *tiles,
		   unsigned n)
{
	unsigned g, cell;
	uint64_t unit = cell_unit(tiles, n, side, &g), d = 0;
	int *owner = malloc((size_t)g * g * sizeof(*owner));

	if (!owner)
		return;
	cell = side / g;
	for (size_t i = 0; i < (size_t)g * g; i++)
		owner[i] = -1;
	for (unsigned t = 0; t < n; t++)
		for (uint64_t k = tile_cells(&tiles[t], unit); k; k--, d++) {
			unsigned x, y;
			hilbert_cell(g, d, &x, &y);
			owner[(size_t)y * g + x] = (int)t;
		}
	for (unsigned y = 0; y < g; y++)
		for (unsigned x = 0; x < g; x++) {
			int t = owner[(size_t)y * g + x];
			uint8_t rgb[3];
			if (t < 0)
				continue;
			heat_colour(tiles[t].type, tiles[t].fill, rgb);
			rect(c, x0 + x * cell, y0 + y * cell, cell, cell, rgb);
			/* the right and bottom edges against another tile (or none) */
			if (x + 1 == g || owner[(size_t)y * g + x + 1] != t)
				rect(c, x0 + x * cell + cell - 1, y0 + y * cell, 1, cell, background);
			if (y + 1 == g || owner[(size_t)(y + 1) * g + x] != t)
				rect(c, x0 + x * cell, y0 + y * cell + cell - 1, cell, 1, background);
		}
	free(owner);
}

/* A 3x5 font: each glyph five rows of three bits (bit 2 the left column). */
static const struct {
	char ch;
	uint8_t rows[5];
} font[] = {
	{ 'a', { 2, 5, 7, 5, 5 } }, { 'b', { 6, 5, 6, 5, 6 } }, { 'c', { 3, 4, 4, 4, 3 } },
	{ 'd', { 6, 5, 5, 5, 6 } }, { 'e', { 7, 4, 6, 4, 7 } }, { 'f', { 7, 4, 6, 4, 4 } },
	{ 'g', { 3, 4, 5, 5, 3 } }, { 'h', { 5, 5, 7, 5, 5 } }, { 'i', { 7, 2, 2, 2, 7 } },
	{ 'j', { 1, 1, 1, 5, 2 } }, { 'k', { 5, 5, 6, 5, 5 } }, { 'l', { 4, 4, 4, 4, 7 } },
	{ 'm', { 5, 7, 7, 5, 5 } }, { 'n', { 6, 5, 5, 5, 5 } }, { 'o', { 2, 5, 5, 5, 2 } },
	{ 'p', { 6, 5, 6, 4, 4 } }, { 'q', { 2, 5, 5, 6, 3 } }, { 'r', { 6, 5, 6, 5, 5 } },
	{ 's', { 3, 4, 2, 1, 6 } }, { 't', { 7, 2, 2, 2, 2 } }, { 'u', { 5, 5, 5, 5, 7 } },
	{ 'v', { 5, 5, 5, 5, 2 } }, { 'w', { 5, 5, 7, 7, 5 } }, { 'x', { 5, 5, 2, 5, 5 } },
	{ 'y', { 5, 5, 2, 2, 2 } }, { 'z', { 7, 1, 2, 4, 7 } }, { '0', { 7, 5, 5, 5, 7 } },
	{ '1', { 2, 6, 2, 2, 7 } }, { '2', { 6, 1, 2, 4, 7 } }, { '3', { 6, 1, 2, 1, 6 } },
	{ '4', { 5, 5, 7, 1, 1 } }, { '5', { 7, 4, 6, 1, 6 } }, { '6', { 3, 4, 7, 5, 7 } },
	{ '7', { 7, 1, 2, 2, 2 } }, { '8', { 7, 5, 7, 5, 7 } }, { '9', { 7, 5, 7, 1, 6 } },
	{ '%', { 5, 1, 2, 4, 5 } }, { '+', { 0, 2, 7, 2, 0 } }, { '-', { 0, 0, 7, 0, 0 } },
	{ ':', { 0, 2, 0, 2, 0 } }, { '.', { 0, 0, 0, 0, 2 } }, { '/', { 1, 1, 2, 4, 4 } },
	{ '(', { 1, 2, 2, 2, 1 } }, { ')', { 4, 2, 2, 2, 4 } },
};

void canvas_text(struct canvas *c, unsigned x, unsigned y, const char *s, const uint8_t rgb[3])
{
	for (; *s; s++, x += 4 * FONT_SCALE) {
		char ch = (*s >= 'A' && *s <= 'Z') ? (char)(*s - 'A' + 'a') : *s;
		for (size_t f = 0; f < sizeof(font) / sizeof(font[0]); f++) {
			if (font[f].ch != ch)
				continue;
			for (unsigned r = 0; r < 5; r++)
				for (unsigned b = 0; b < 3; b++)
					if (font[f].rows[r] & (4u >> b))
						rect(c, x + b * FONT_SCALE, y + r * FONT_SCALE, FONT_SCALE, FONT_SCALE, rgb);
			break;
		}
	}
}

unsigned heat_legend_draw(struct canvas *c, unsigned x0, unsigned y0)
{
	static const struct {
		uint64_t type;
		const char *name;
	} kinds[] = {
		{ BTRFS_BLOCK_GROUP_DATA, "data" },
		{ BTRFS_BLOCK_GROUP_METADATA, "metadata" },
		{ BTRFS_BLOCK_GROUP_SYSTEM, "system" },
		{ BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_METADATA, "data+metadata" },
	};
	static const uint8_t ink[3] = { 0, 0, 0 };
	const unsigned sw = 12, row = 16;
	unsigned y = y0;

	canvas_text(c, x0, y, "fill: 0% 50% 100%", ink);
	y += row;
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++, y += row) {
		for (unsigned s = 0; s < 3; s++) {
			uint8_t rgb[3];
			heat_colour(kinds[k].type, s / 2.0, rgb);
			/* kept apart by a pixel of background: the swatches are not map tiles */
			rect(c, x0 + 6 * 4 * FONT_SCALE + s * (sw + 2), y, sw, sw, rgb);
		}
		canvas_text(c, x0 + 6 * 4 * FONT_SCALE + 3 * (sw + 2) + 6, y + 1, kinds[k].name, ink);
	}
	return y - y0;
}
