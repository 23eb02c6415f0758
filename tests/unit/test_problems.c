// SPDX-License-Identifier: GPL-2.0-only
/* The problem registry of btk-check (check/problems.def): sorted by code,
 * complete, unique well-formed ids, every id with a detector or marked as
 * never reported, and repair classes that agree with check/repair.c's class
 * table (or reported only). */
#include <criterion/criterion.h>
#include <ctype.h>
#include <string.h>

#include "check/problems.h"
#include "check/repair.h"

Test(problems, sorted_and_complete)
{
	unsigned n;
	const struct problem_def *t = problem_table(&n);

	cr_assert_eq(n, PR__COUNT - 1);
	for (unsigned i = 0; i < n; i++) {
		cr_assert_eq((unsigned)t[i].code, i + 1, "entry %u has code %d", i, t[i].code);
		cr_assert_eq(problem_lookup(t[i].code), &t[i]);
		cr_assert(t[i].summary && t[i].summary[0]);
		cr_assert(t[i].detector || (t[i].man && strstr(t[i].man, "Not reported")),
			  "%s: no detector and not marked as never reported", t[i].id);
	}
	cr_assert_null(problem_lookup(0));
	cr_assert_null(problem_lookup(PR__COUNT));
}

Test(problems, ids_unique_and_well_formed)
{
	unsigned n;
	const struct problem_def *t = problem_table(&n);

	for (unsigned i = 0; i < n; i++) {
		for (const char *p = t[i].id; *p; p++)
			cr_assert(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '-',
				  "id '%s' must be lowercase words joined by '-'", t[i].id);
		for (unsigned j = i + 1; j < n; j++)
			cr_assert_str_neq(t[i].id, t[j].id, "duplicate id %s", t[i].id);
	}
}

/* Whether the space-separated list names word. */
static bool names(const char *list, const char *word)
{
	size_t len = strlen(word);

	for (const char *p = list; p && *p;) {
		const char *end = strchr(p, ' ');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		if (n == len && !memcmp(p, word, n))
			return true;
		p = end ? end + 1 : p + n;
	}
	return false;
}

/* Every id has the classes repair.c's table gives it, or none (reported
 * only); the first class the registry names is one that runs unasked. */
Test(problems, classes_agree_with_the_repair_table)
{
	unsigned n, nclasses = repair_class_count();
	const struct problem_def *t = problem_table(&n);

	for (unsigned i = 0; i < n; i++) {
		unsigned listed = 0;
		for (unsigned c = 0; c < nclasses; c++) {
			const char *name = repair_class_name(c, NULL);
			bool in_table = repair_class_lists(c, t[i].code), in_registry = names(t[i].classes, name);
			cr_assert_eq(in_table, in_registry, "%s: class %s is %s the repair table but %s the registry",
				     t[i].id, name, in_table ? "in" : "not in", in_registry ? "in" : "not in");
			listed += in_table;
		}
		if (t[i].classes) {
			cr_assert_eq(strcmp(repair_class_of(t[i].code, NULL), t[i].classes) == 0 ||
					     !strncmp(t[i].classes, repair_class_of(t[i].code, NULL),
						      strlen(repair_class_of(t[i].code, NULL))),
				     true, "%s: the registry's first class is not %s", t[i].id,
				     repair_class_of(t[i].code, NULL));
			cr_assert(listed > 0);
		} else {
			cr_assert_null(repair_class_of(t[i].code, NULL), "%s: reported only in the registry", t[i].id);
		}
	}
}
