// SPDX-License-Identifier: GPL-2.0-only
/* json_exit_requested: which command lines ask for the JSON document that a
 * usage error must print too (common/json_exit.c). */
#include <criterion/criterion.h>

#include "common/json_exit.h"

static bool asks(int argc, char **argv)
{
	return json_exit_requested(argc, argv);
}

#define ARGV(...) (char *[]){ "btk-check", __VA_ARGS__, NULL }
#define ARGC(...) ((int)(sizeof((char *[]){ "btk-check", __VA_ARGS__ }) / sizeof(char *)))
#define ASKS(...) asks(ARGC(__VA_ARGS__), ARGV(__VA_ARGS__))

Test(json_exit, separate_and_joined_forms)
{
	cr_assert(ASKS("--format", "json", "dev"));
	cr_assert(ASKS("dev", "--format=json"));
	cr_assert(ASKS("-q", "--format", "json"));
}

Test(json_exit, unambiguous_abbreviations_only)
{
	cr_assert(ASKS("--form", "json"));
	cr_assert(ASKS("--forma=json"));
	cr_assert_not(ASKS("--for", "json"));      /* could be --force */
	cr_assert_not(ASKS("--formats", "json"));
}

Test(json_exit, other_formats_and_values)
{
	cr_assert_not(ASKS("--format", "text"));
	cr_assert_not(ASKS("--format", "jsonl"));
	cr_assert_not(ASKS("--format=jsonl"));
	cr_assert_not(ASKS("--format"));          /* no value at the end */
	cr_assert_not(ASKS("json", "--format"));
	cr_assert_not(ASKS("-f", "json"));        /* -f is --force for btk-check */
}

Test(json_exit, not_after_double_dash)
{
	cr_assert_not(ASKS("--", "--format", "json"));
	cr_assert(ASKS("--format", "json", "--", "dev"));
}
