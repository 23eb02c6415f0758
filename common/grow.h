/* SPDX-License-Identifier: GPL-2.0-only */
/* Growing an array by doubling: the one way the tools' small lists grow. */
#ifndef BTK_COMMON_GROW_H
#define BTK_COMMON_GROW_H

#include <stdlib.h>

/* The array v (elem bytes each, *cap of them) with room for element n: v
 * itself when it has it, else v moved to twice the capacity (first to begin
 * with); NULL when out of memory (v is then left as it was). */
static inline void *grow_array(void *v, size_t *cap, size_t n, size_t elem, size_t first)
{
	size_t c;
	void *p;

	if (n < *cap)
		return v;
	c = *cap ? *cap * 2 : first;
	if ((p = realloc(v, c * elem)))
		*cap = c;
	return p;
}

#endif
