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
#define PHASE_MAX 128

struct progress {
	char phase[PHASE_MAX];
	uint64_t total;
	uint64_t start_ns;
	bool enabled;
	_Atomic uint64_t done;
	_Atomic uint64_t next_draw_ns;  /* no redraw before this time */
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

const char *progress_format(const struct progress_snapshot *s, char *buf, size_t len)
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
	switch (mode) {
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

static void draw(struct progress *p, uint64_t now, bool finished)
{
	struct progress_snapshot s = {
		.phase = p->phase,
		.done = atomic_load(&p->done),
		.total = p->total,
		.elapsed = (double)(now - p->start_ns) / 1e9,
		.finished = finished,
	};
	char line[256];

	machine_line(p, finished);
	if (p->enabled)
		msg_status_line(progress_format(&s, line, sizeof(line)));
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
	if (!atomic_compare_exchange_strong(&p->next_draw_ns, &next, now + REDRAW_NS))
		return;
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

static void end_line(struct progress *p)
{
	if (!p->enabled) {
		machine_line(p, true);
		return;
	}
	draw(p, now_ns(), true);
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
	end_line(p);
	machine_pass++; /* the first phase a program names with progress_next_phase() is pass 1 */
	set_phase(p, phase, total);
}

void progress_finish(struct progress *p)
{
	if (!p)
		return;
	end_line(p);
	free(p);
}
