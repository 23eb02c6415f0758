/* SPDX-License-Identifier: GPL-2.0-only */
/* RUNNING_ON_VALGRIND where valgrind's header is installed (0 elsewhere), and
 * how much of a long loop a unit test runs under memcheck: memcheck covers
 * every line just as well with fewer repetitions, at ~30x the cost of each. */
#ifndef BTK_TESTS_UNDER_VALGRIND_H
#define BTK_TESTS_UNDER_VALGRIND_H

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

/* n natively; n / divisor under valgrind (at least min). */
static inline unsigned long valgrind_reps(unsigned long n, unsigned long divisor, unsigned long min)
{
	if (!RUNNING_ON_VALGRIND)
		return n;
	return n / divisor > min ? n / divisor : min;
}

#endif
