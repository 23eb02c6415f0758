// SPDX-License-Identifier: GPL-2.0-only
/* Extent items from their references: see extent_items.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "check/extent_items.h"
#include "common/cli.h"
#include <btk/backref.h>

static struct backref fix_backref(const struct extent_fix *f)
{
	return (struct backref){ .type = (uint8_t)f->type, .id = f->a, .objectid = f->b, .offset = f->c };
}

/* The kernel's inline order on extent_fix records. */
static int fix_inline_cmp(const void *x, const void *y)
{
	struct backref p = fix_backref(x), q = fix_backref(y);

	return backref_inline_cmp(&p, &q);
}

int extent_item_put_refs(struct fs_info *fs, struct trans *t, uint64_t bytenr, struct extent_fix *refs,
			 size_t n, uint8_t *out, uint32_t *osize, uint64_t *total)
{
	uint32_t max_inline = backref_max_inline(fs->nodesize);

	*total = 0;
	qsort(refs, n, sizeof(*refs), fix_inline_cmp);
	for (size_t i = 0; i < n; i++) {
		struct backref r = fix_backref(&refs[i]);
		uint32_t len = extent_inline_ref_size(r.type);
		bool data = r.type == BTRFS_EXTENT_DATA_REF_KEY || r.type == BTRFS_SHARED_DATA_REF_KEY;
		uint32_t count = data ? (uint32_t)refs[i].count : 1;
		int ret = 0;

		if (!len)
			return fs_error(fs, -EUCLEAN, "extent %" PRIu64 ": reference type %u", bytenr, r.type);
		if (data && (!refs[i].count || refs[i].count > UINT32_MAX))
			return fs_error(fs, -EUCLEAN, "extent %" PRIu64 ": reference count %" PRIu64, bytenr,
					refs[i].count);
		*total += count;
		if (*osize + len <= max_inline) {
			*osize += backref_put_inline(out + *osize, &r, count);
			continue;
		}
		if ((ret = backref_insert_keyed(t, bytenr, &r, count)) < 0)
			return ret;
	}
	return 0;
}

int extent_notes_each(struct check_ctx *found, struct fs_info *fs,
		      int (*fn)(void *arg, const struct extent_fix *hdr, struct extent_fix *refs, size_t n), void *arg)
{
	struct extent_fix hdr, *refs = NULL;
	size_t n = 0, cap = 0;
	const void *rec;
	bool have = false;
	int ret;

	while ((ret = repair_notes_next(found, NOTES_EXTENTS, &rec)) == 1) {
		const struct extent_fix *f = rec;

		if (cli_cancelled()) {
			ret = fs_error(fs, -ECANCELED, "cancelled");
			break;
		}
		if (f->type == 0) {
			if (have && (ret = fn(arg, &hdr, refs, n)) < 0)
				break;
			hdr = *f;
			n = 0;
			have = true;
			continue;
		}
		if (!have || f->bytenr != hdr.bytenr) {
			ret = fs_error(fs, -EINVAL, "repair notes out of order at %" PRIu64, f->bytenr);
			break;
		}
		if (n == cap) {
			size_t c = cap ? cap * 2 : 64;
			struct extent_fix *v = realloc(refs, c * sizeof(*v));
			if (!v) {
				ret = -ENOMEM;
				break;
			}
			refs = v;
			cap = c;
		}
		refs[n++] = *f;
	}
	if (ret == 0 && have)
		ret = fn(arg, &hdr, refs, n);
	free(refs);
	return ret < 0 ? ret : 0;
}
