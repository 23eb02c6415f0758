// SPDX-License-Identifier: GPL-2.0-only
/* The progress line as the user reads it: phase, sizes, percentage, rate
 * and ETA; and a progress object that is off does not write anything. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdint.h>
#include "common/messages.h"
#include "common/progress.h"

#define MiB (1024ull * 1024)
#define GiB (1024 * MiB)

static const char *line(const struct progress_snapshot *s)
{
	static char buf[256];

	return progress_format(s, buf, sizeof(buf));
}

Test(progress_format, halfway_with_eta)
{
	struct progress_snapshot s = {
		.phase = "checking extents", .done = 3 * GiB / 2, .total = 3 * GiB, .elapsed = 12.8,
	};

	/* 1536 MiB in 12.8 s = 120 MiB/s; 1536 MiB to go = 12.8 s -> 0:13 */
	cr_assert_str_eq(line(&s),
			 "checking extents: 1.50GiB / 3.00GiB (50.0%), 120.0MiB/s, ETA 0:13");
}

Test(progress_format, hours_in_eta)
{
	struct progress_snapshot s = {
		.phase = "scan", .done = 100 * MiB, .total = 100 * MiB + 3723ull * MiB, .elapsed = 100,
	};

	/* 1 MiB/s, 3723 MiB left = 1:02:03 */
	cr_assert_str_eq(line(&s), "scan: 100.00MiB / 3.73GiB (2.6%), 1.0MiB/s, ETA 1:02:03");
}

Test(progress_format, nothing_done_yet)
{
	struct progress_snapshot s = { .phase = "scan", .done = 0, .total = 8 * MiB, .elapsed = 0 };

	cr_assert_str_eq(line(&s), "scan: 0.00B / 8.00MiB (0.0%), 0.0MiB/s, ETA --:--");
}

Test(progress_format, done_beyond_total_caps_at_100)
{
	struct progress_snapshot s = { .phase = "scan", .done = 9 * MiB, .total = 8 * MiB, .elapsed = 3 };

	cr_assert_str_eq(line(&s), "scan: 9.00MiB / 8.00MiB (100.0%), 3.0MiB/s, ETA 0:00");
}

Test(progress_format, unknown_total)
{
	struct progress_snapshot s = { .phase = "reading", .done = 64 * MiB, .elapsed = 2 };

	cr_assert_str_eq(line(&s), "reading: 64.00MiB, 32.0MiB/s");
}

Test(progress_format, finished_shows_elapsed)
{
	struct progress_snapshot s = {
		.phase = "checking extents", .done = 3 * GiB, .total = 3 * GiB, .elapsed = 75.2,
		.finished = true,
	};

	cr_assert_str_eq(line(&s),
			 "checking extents: 3.00GiB (100.0%), 40.9MiB/s, done in 1:15");
	s.total = 0;
	cr_assert_str_eq(line(&s), "checking extents: 3.00GiB, 40.9MiB/s, done in 1:15");
}

Test(progress_format, truncates_to_buffer)
{
	struct progress_snapshot s = { .phase = "checking extents", .done = 1, .total = 2, .elapsed = 1 };
	char buf[9];

	cr_assert_str_eq(progress_format(&s, buf, sizeof(buf)), "checking");
}

/* What the test wrote to stderr so far (redirected by criterion). */
static const char *stderr_text(void)
{
	static char out[512];
	size_t n;

	fflush(stderr);
	n = fread(out, 1, sizeof(out) - 1, cr_get_redirected_stderr());
	out[n] = '\0';
	return out;
}

Test(progress, off_or_null_writes_nothing, .init = cr_redirect_stderr)
{
	struct progress *p = progress_create("phase", 100, PROGRESS_OFF);

	cr_assert_not_null(p);
	cr_assert_not(progress_enabled(p));
	progress_update(p, 10);
	progress_add(p, 10);
	progress_next_phase(p, "second", 5);
	progress_finish(p);
	/* every call is a no-op on NULL */
	progress_update(NULL, 1);
	progress_add(NULL, 1);
	progress_next_phase(NULL, "x", 1);
	progress_finish(NULL);
	cr_assert_not(progress_enabled(NULL));
	fflush(stderr);
	cr_assert_stderr_eq_str("");
}

Test(progress, forced_draws_first_and_final_line, .init = cr_redirect_stderr)
{
	struct progress *p;

	msg_set_verbosity(MSG_NORMAL);
	p = progress_create("copy", 4 * MiB, PROGRESS_FORCE);
	cr_assert(progress_enabled(p));
	progress_update(p, 1 * MiB);   /* first update draws at once */
	progress_add(p, 3 * MiB);      /* too soon after: no redraw */
	progress_finish(p);            /* a phase under a second: its line is erased, none left */
	const char *out = stderr_text();

	cr_assert(strncmp(out, "\rcopy: 1.00MiB / 4.00MiB (25.0%), ", 34) == 0, "got: %s", out);
	cr_assert_null(strstr(out, "done in"), "a quick phase leaves no final line: %s", out);
	cr_assert_null(strchr(out, '\n'), "nothing stays on the terminal: %s", out);
	cr_assert(out[strlen(out) - 1] == '\r', "the line is erased: %s", out);
	cr_assert_null(strstr(out, "4.00MiB / 4.00MiB"), "the second update should not redraw: %s", out);
}

Test(progress, plain_lines_for_logs, .init = cr_redirect_stderr)
{
	struct progress *p;

	msg_set_verbosity(MSG_NORMAL);
	p = progress_create("start", 0, PROGRESS_PLAIN);
	progress_next_phase(p, "empty", 0);  /* the placeholder: nothing done, no line */
	progress_next_phase(p, "copy", 4 * MiB);
	progress_update(p, 1 * MiB);         /* a log gets no line at a phase's start */
	progress_add(p, 3 * MiB);
	progress_next_phase(p, "nothing", 0); /* an empty phase: no line */
	progress_finish(p);
	const char *out = stderr_text();

	cr_assert_null(strchr(out, '\r'), "no carriage return in a log: %s", out);
	cr_assert(strncmp(out, "copy: 4.00MiB (100.0%), ", 24) == 0, "got: %s", out);
	cr_assert(strstr(out, ", done in 0:00\n") != NULL && strchr(out, '\n') == out + strlen(out) - 1,
		  "one line: %s", out);
}

Test(progress, quiet_hides_forced_line, .init = cr_redirect_stderr)
{
	struct progress *p;

	msg_set_verbosity(MSG_QUIET);
	p = progress_create("copy", 4 * MiB, PROGRESS_FORCE);
	cr_assert_not(progress_enabled(p));
	progress_update(p, 1 * MiB);
	progress_finish(p);
	fflush(stderr);
	cr_assert_stderr_eq_str("");
}

Test(progress, total_set_after_the_phase_began, .init = cr_redirect_stderr)
{
	struct progress *p;

	msg_set_verbosity(MSG_NORMAL);
	p = progress_create("walk", 0, PROGRESS_FORCE);
	progress_set_total(p, 8 * MiB);   /* known once the phase has looked around */
	progress_update(p, 2 * MiB);
	progress_finish(p);
	const char *out = stderr_text();

	cr_assert(strncmp(out, "\rwalk: 2.00MiB / 8.00MiB (25.0%), ", 34) == 0, "got: %s", out);
}

Test(progress_format, overall_share_and_eta)
{
	struct progress_snapshot s = {
		.phase = "tree blocks", .done = 4 * MiB, .total = 8 * MiB, .elapsed = 2,
		.has_overall = true, .overall = 0.25, .overall_elapsed = 10,
	};

	/* a quarter of the run's cost in 10 s: 30 s to go */
	cr_assert_str_eq(line(&s), "tree blocks: 4.00MiB / 8.00MiB (50.0%), 2.0MiB/s, ETA 0:02; overall 25%, ETA 0:30");
	s.overall = 0;
	cr_assert_str_eq(line(&s), "tree blocks: 4.00MiB / 8.00MiB (50.0%), 2.0MiB/s, ETA 0:02; overall 0%, ETA --:--");
	s.finished = true;
	cr_assert_str_eq(line(&s), "tree blocks: 4.00MiB (50.0%), 2.0MiB/s, done in 0:02");
}
