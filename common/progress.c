// SPDX-License-Identifier: GPL-2.0-only
/* A progress line on stderr; see progress.h. */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "common/messages.h"
#include "common/progress.h"
#include "common/sizes.h"

#define REDRAW_NS (250ull * 1000 * 1000)
#define PLAIN_EVERY_NS (5000ull * 1000 * 1000)
/* a phase's last line stays on a terminal only if the phase took this long */
#define KEEP_LINE_NS (1000ull * 1000 * 1000)
#define PHASE_MAX 128
#define PLAN_MAX 32

struct progress {
	char phase[PHASE_MAX];
	uint64_t total;
	uint64_t start_ns;
	bool enabled;
	bool plain;                     /* PROGRESS_PLAIN: whole lines, no carriage return */
	_Atomic uint64_t done;
	_Atomic uint64_t next_draw_ns;  /* no redraw before this time */
	/* progress_plan(): the phases' expected costs, the one running (-1:
	 * none yet) and when the first began */
	double plan[PLAN_MAX];
	unsigned nplan;
	int cur;
	uint64_t plan_start_ns;
};

/* progress_machine_output(): the e2fsck -C lines' file descriptor (-1: none),
 * the device they name and the pass number of the current phase (one
 * process, one filesystem: set once by main) */
static int machine_fd = -1;
static char machine_device[256];
static unsigned machine_pass;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* "0:07", "12:34", "1:02:03". */
static void format_duration(double seconds, char *buf, size_t len)
{
	uint64_t s;

	if (seconds < 0)
		seconds = 0;
	if (seconds > 359999999.0)      /* keep it printable: ~11 years */
		seconds = 359999999.0;
	s = (uint64_t)(seconds + 0.5);
	if (s >= 3600)
		snprintf(buf, len, "%u:%02u:%02u", (unsigned)(s / 3600),
			 (unsigned)(s / 60 % 60), (unsigned)(s % 60));
	else
		snprintf(buf, len, "%u:%02u", (unsigned)(s / 60), (unsigned)(s % 60));
}

/* "; overall 42%, ETA 1:05" after a line of a planned run. */
static void overall_suffix(const struct progress_snapshot *s, char *buf, size_t len)
{
	char when[32];

	if (!s->has_overall || len == 0) {
		if (len)
			buf[0] = '\0';
		return;
	}
	if (s->overall > 0 && s->overall_elapsed > 0)
		format_duration(s->overall_elapsed * (1 - s->overall) / s->overall, when, sizeof(when));
	else
		snprintf(when, sizeof(when), "--:--");
	snprintf(buf, len, "; overall %.0f%%, ETA %s", s->overall * 100, when);
}

/* The line of the phase alone. */
static const char *progress_format_phase(const struct progress_snapshot *s, char *buf, size_t len)
{
	char done[SIZE_BUF_LEN], total[SIZE_BUF_LEN], when[32], percent[16];
	double rate = 0;

	if (!len)
		return buf;
	if (s->elapsed > 0)
		rate = (double)s->done / s->elapsed;
	size_format(s->done, done, sizeof(done), SIZE_HUMAN);

	if (s->finished) {
		format_duration(s->elapsed, when, sizeof(when));
		if (s->total)
			snprintf(percent, sizeof(percent), " (%.1f%%)",
				 s->done >= s->total ? 100.0 : (double)s->done * 100.0 / (double)s->total);
		else
			percent[0] = '\0';
		snprintf(buf, len, "%s: %s%s, %.1fMiB/s, done in %s", s->phase, done, percent,
			 rate / (1024 * 1024), when);
		return buf;
	}
	if (!s->total) {
		snprintf(buf, len, "%s: %s, %.1fMiB/s", s->phase, done, rate / (1024 * 1024));
		return buf;
	}

	size_format(s->total, total, sizeof(total), SIZE_HUMAN);
	if (s->done >= s->total)
		snprintf(when, sizeof(when), "0:00");
	else if (rate > 0)
		format_duration((double)(s->total - s->done) / rate, when, sizeof(when));
	else
		snprintf(when, sizeof(when), "--:--");
	snprintf(buf, len, "%s: %s / %s (%.1f%%), %.1fMiB/s, ETA %s", s->phase, done, total,
		 s->done >= s->total ? 100.0 : (double)s->done * 100.0 / (double)s->total,
		 rate / (1024 * 1024), when);
	return buf;
}

const char *progress_format(const struct progress_snapshot *s, char *buf, size_t len)
{
	size_t n;

	progress_format_phase(s, buf, len);
	n = strlen(buf);
	if (!s->finished)
		overall_suffix(s, buf + n, len - n);
	return buf;
}

void progress_machine_output(int fd, const char *device)
{
	machine_fd = fd;
	snprintf(machine_device, sizeof(machine_device), "%s", device ? device : "");
}

/* One "pass current max device" line; a phase of unknown size counts 0 of 1
 * until it ends. */
static void machine_line(struct progress *p, bool finished)
{
	uint64_t done = atomic_load(&p->done), max = p->total ? p->total : 1;
	char line[400];
	int n;

	if (machine_fd < 0 || !machine_pass)
		return;
	if (finished || done > max)
		done = finished ? max : (p->total ? max : 0);
	else if (!p->total)
		done = 0;
	n = snprintf(line, sizeof(line), "%u %" PRIu64 " %" PRIu64 " %s\n", machine_pass, done, max, machine_device);
	if (n > 0 && write(machine_fd, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1) < 0)
		machine_fd = -1; /* the reader went away: stop, do not fail the check */
}

static void set_phase(struct progress *p, const char *phase, uint64_t total)
{
	snprintf(p->phase, sizeof(p->phase), "%s", phase ? phase : "");
	p->total = total;
	p->start_ns = now_ns();
	atomic_store(&p->done, 0);
	atomic_store(&p->next_draw_ns, p->start_ns);
}

struct progress *progress_create(const char *phase, uint64_t total, enum progress_mode mode)
{
	struct progress *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->cur = -1;
	switch (mode) {
	case PROGRESS_PLAIN:
		p->plain = true;
		/* fall through */
	case PROGRESS_FORCE:
		p->enabled = true;
		break;
	case PROGRESS_AUTO:
		p->enabled = isatty(STDERR_FILENO);
		break;
	default:
		p->enabled = false;
		break;
	}
	set_phase(p, phase, total);
	return p;
}

bool progress_enabled(const struct progress *p)
{
	return p && p->enabled && msg_get_verbosity() >= MSG_NORMAL;
}

void progress_plan(struct progress *p, const double *costs, unsigned n)
{
	if (!p)
		return;
	p->nplan = n < PLAN_MAX ? n : PLAN_MAX;
	for (unsigned i = 0; i < p->nplan; i++)
		p->plan[i] = costs[i] > 0 ? costs[i] : 0;
	p->cur = -1;
}

/* The share of the planned cost done: the phases before the current one,
 * and the current one's share of its total (none while its total is unknown). */
static double overall_fraction(const struct progress *p, uint64_t done)
{
	double sum = 0, before = 0, frac = 0;

	for (unsigned i = 0; i < p->nplan; i++) {
		sum += p->plan[i];
		if ((int)i < p->cur)
			before += p->plan[i];
	}
	if (sum <= 0)
		return 0;
	if (p->total && p->cur >= 0 && (unsigned)p->cur < p->nplan)
		frac = done >= p->total ? 1.0 : (double)done / (double)p->total;
	if (p->cur >= 0 && (unsigned)p->cur < p->nplan)
		before += frac * p->plan[p->cur];
	return before / sum;
}

static void draw(struct progress *p, uint64_t now, bool finished)
{
	uint64_t done = atomic_load(&p->done);
	struct progress_snapshot s = {
		.phase = p->phase,
		.done = done,
		.total = p->total,
		.elapsed = (double)(now - p->start_ns) / 1e9,
		.finished = finished,
		.has_overall = p->nplan && p->cur >= 0,
		.overall = p->nplan ? overall_fraction(p, done) : 0,
		.overall_elapsed = (double)(now - p->plan_start_ns) / 1e9,
	};
	char line[320];

	machine_line(p, finished);
	if (!p->enabled)
		return;
	progress_format(&s, line, sizeof(line));
	if (!p->plain) {
		msg_status_line(line);
		return;
	}
	if (msg_get_verbosity() >= MSG_NORMAL) {
		flockfile(stderr);
		fprintf(stderr, "%s\n", line);
		fflush(stderr);
		funlockfile(stderr);
	}
}

/* Redraw unless another thread did within the last REDRAW_NS. */
static void maybe_draw(struct progress *p)
{
	uint64_t now, next;

	if (!p->enabled && machine_fd < 0)
		return;
	now = now_ns();
	next = atomic_load(&p->next_draw_ns);
	if (now < next)
		return;
	if (!atomic_compare_exchange_strong(&p->next_draw_ns, &next, now + (p->plain ? PLAIN_EVERY_NS : REDRAW_NS)))
		return;
	if (p->plain && next == p->start_ns)
		return; /* a log gets no line at a phase's start, only every few seconds and at its end */
	draw(p, now, false);
}

void progress_update(struct progress *p, uint64_t done)
{
	if (!p)
		return;
	atomic_store(&p->done, done);
	maybe_draw(p);
}

void progress_add(struct progress *p, uint64_t delta)
{
	if (!p)
		return;
	atomic_fetch_add(&p->done, delta);
	maybe_draw(p);
}

/* The end of a phase: its final line stays (a log: always; a terminal: if
 * it took long enough to be worth a line), else it is erased for the next. */
static void end_line(struct progress *p)
{
	uint64_t now = now_ns();

	if (!p->enabled) {
		machine_line(p, true);
		return;
	}
	if (now - p->start_ns < KEEP_LINE_NS && (!p->plain || !atomic_load(&p->done))) {
		/* a terminal keeps no line of a quick phase, a log none of an empty one */
		machine_line(p, true);
		if (!p->plain)
			msg_status_clear();
		return;
	}
	draw(p, now, true);
	if (!p->plain)
		msg_status_end();
}

void progress_set_total(struct progress *p, uint64_t total)
{
	if (p)
		p->total = total;
}

void progress_next_phase(struct progress *p, const char *phase, uint64_t total)
{
	if (!p)
		return;
	if (p->cur >= 0 || p->phase[0])
		end_line(p);
	machine_pass++; /* the first phase a program names with progress_next_phase() is pass 1 */
	if (p->cur < 0)
		p->plan_start_ns = now_ns();
	p->cur++;
	set_phase(p, phase, total);
}

void progress_finish(struct progress *p)
{
	if (!p)
		return;
	end_line(p);
	free(p);
}
