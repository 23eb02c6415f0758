// SPDX-License-Identifier: GPL-2.0-only
/* The problem table, from the registry check/problems.def. Sorted by code;
 * tests/unit/test_problems.c checks that it is sorted, complete, free of
 * duplicate ids and agrees with the repair classes. */
#include <stddef.h>

#include "check/problems.h"

static const struct problem_def table[] = {
#define PROBLEM(code, id, sev, detector, classes, summary, man) \
	{ PR_##code, id, SEV_##sev, summary, detector, classes, man },
#include "check/problems.def"
#undef PROBLEM
};

_Static_assert(sizeof(table) / sizeof(table[0]) == PR__COUNT - 1, "every code has a table entry");

const struct problem_def *problem_lookup(enum problem_code code)
{
	if (code < 1 || code >= PR__COUNT)
		return NULL;
	return &table[code - 1];
}

const struct problem_def *problem_table(unsigned *count)
{
	*count = (unsigned)(sizeof(table) / sizeof(table[0]));
	return table;
}
