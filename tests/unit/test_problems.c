/* The problem table of btk-check: sorted by code, complete, unique ids. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <string.h>

#include "check/problems.c"

Test(problems, sorted_and_complete)
{
	unsigned n;
	const struct problem_def *t = problem_table(&n);

	cr_assert_eq(n, PR__COUNT - 1);
	for (unsigned i = 0; i < n; i++) {
		cr_assert_eq((unsigned)t[i].code, i + 1, "entry %u has code %d", i, t[i].code);
		cr_assert_eq(problem_lookup(t[i].code), &t[i]);
		cr_assert(t[i].summary && t[i].summary[0]);
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
