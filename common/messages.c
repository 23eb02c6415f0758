// SPDX-License-Identifier: GPL-2.0-only
/* Messages to stderr; see messages.h. All output to stderr happens under
 * flockfile(stderr), which also guards the status-line state below. */
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include "common/messages.h"

#define STATUS_MAX 512

static const char *program_name = "btk";
static enum msg_verbosity verbosity = MSG_NORMAL;

/* The status line currently on screen (guarded by the stderr lock). */
static struct {
	char text[STATUS_MAX];
	size_t shown;     /* columns drawn last time; 0 = no line on screen */
} status;

void msg_configure(const struct msg_config *cfg)
{
	if (cfg->program)
		program_name = cfg->program;
	verbosity = cfg->verbosity;
}

void msg_set_program(const char *name)
{
	if (name)
		program_name = name;
}

void msg_set_verbosity(enum msg_verbosity v)
{
	verbosity = v;
}

enum msg_verbosity msg_get_verbosity(void)
{
	return verbosity;
}

const char *msg_program(void)
{
	return program_name;
}

/* Width of the terminal on stderr, or 0 when it is not a terminal. */
static size_t stderr_columns(void)
{
	struct winsize ws;

	if (!isatty(STDERR_FILENO))
		return 0;
	if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		return ws.ws_col;
	return 80;
}

/* Erase the status line from the screen; the text is kept for redrawing. */
static void status_erase_locked(void)
{
	if (!status.shown)
		return;
	fprintf(stderr, "\r%*s\r", (int)status.shown, "");
	status.shown = 0;
}

/* Draw status.text, overwriting what was there; truncated to the terminal
 * width so that a carriage return always gets back to its start. */
static void status_draw_locked(void)
{
	size_t cols = stderr_columns();
	size_t len = strlen(status.text);
	size_t pad = 0;

	if (!len)
		return;
	if (cols && len > cols - 1)
		len = cols - 1;
	if (status.shown > len)
		pad = status.shown - len;
	fprintf(stderr, "\r%.*s%*s", (int)len, status.text, (int)pad, "");
	if (pad)
		fprintf(stderr, "\r%.*s", (int)len, status.text);
	status.shown = len;
	fflush(stderr);
}

static void print_locked(const char *level, const char *fmt, va_list ap, int err)
{
	status_erase_locked();
	fputs(program_name, stderr);
	fputs(": ", stderr);
	if (level) {
		fputs(level, stderr);
		fputs(": ", stderr);
	}
	vfprintf(stderr, fmt, ap);
	if (err)
		fprintf(stderr, ": %s", strerror(err < 0 ? -err : err));
	fputc('\n', stderr);
	status_draw_locked();
	fflush(stderr);
}

static void print_message(const char *level, int err, const char *fmt, va_list ap)
{
	flockfile(stderr);
	print_locked(level, fmt, ap, err);
	funlockfile(stderr);
}

void msg_vprint(enum fs_note_level level, const char *fmt, va_list ap)
{
	switch (level) {
	case FS_NOTE_ERROR:
		print_message("error", 0, fmt, ap);
		break;
	case FS_NOTE_WARNING:
		print_message("warning", 0, fmt, ap);
		break;
	default:
		if (verbosity >= MSG_NORMAL)
			print_message(NULL, 0, fmt, ap);
		break;
	}
}

void msg_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	print_message("error", 0, fmt, ap);
	va_end(ap);
}

void msg_errno(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	print_message("error", err, fmt, ap);
	va_end(ap);
}

void msg_warning(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	print_message("warning", 0, fmt, ap);
	va_end(ap);
}

void msg_info(const char *fmt, ...)
{
	va_list ap;

	if (verbosity < MSG_NORMAL)
		return;
	va_start(ap, fmt);
	print_message(NULL, 0, fmt, ap);
	va_end(ap);
}

void msg_verbose(const char *fmt, ...)
{
	va_list ap;

	if (verbosity < MSG_VERBOSE)
		return;
	va_start(ap, fmt);
	print_message(NULL, 0, fmt, ap);
	va_end(ap);
}

void msg_fs_note(void *arg, enum fs_note_level level, const char *text)
{
	(void)arg;
	switch (level) {
	case FS_NOTE_ERROR:
		msg_error("%s", text);
		break;
	case FS_NOTE_WARNING:
		msg_warning("%s", text);
		break;
	default:
		msg_info("%s", text);
		break;
	}
}

void msg_status_line(const char *text)
{
	if (verbosity < MSG_NORMAL)
		return;
	flockfile(stderr);
	snprintf(status.text, sizeof(status.text), "%s", text);
	status_draw_locked();
	funlockfile(stderr);
}

void msg_status_end(void)
{
	flockfile(stderr);
	if (status.shown) {
		fputc('\n', stderr);
		fflush(stderr);
	}
	status.shown = 0;
	status.text[0] = '\0';
	funlockfile(stderr);
}

void msg_status_clear(void)
{
	flockfile(stderr);
	status_erase_locked();
	fflush(stderr);
	status.text[0] = '\0';
	funlockfile(stderr);
}
