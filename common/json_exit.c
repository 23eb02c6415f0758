// SPDX-License-Identifier: GPL-2.0-only
/* The JSON document of a run that fails before printing its own; see
 * json_exit.h. argp and getopt print usage errors straight to stderr, so the
 * message is taken from there: when JSON was asked for, stderr becomes an
 * unbuffered stream that writes through to descriptor 2 and remembers the
 * last lines (the GNU C library lets a program assign stderr). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <json-c/json.h>

#include "common/json_doc.h"
#include "common/json_exit.h"

#define LINE_MAX_KEPT 512

/* Per process by nature: what the exit handler needs. */
static struct {
	bool armed;
	bool in_hint;         /* inside argp's wrapped hint */
	char cur[LINE_MAX_KEPT];   /* the line being written */
	size_t cur_len;
	char last_error[LINE_MAX_KEPT];   /* last "prog: error: ..." line */
	char last_other[LINE_MAX_KEPT];   /* last other line but argp's hint */
} jx;

/* "--format json", "--format=json" and argp's unambiguous abbreviations
 * ("--form json"), before "--". */
bool json_exit_requested(int argc, char **argv)
{
	static const char opt[] = "--format";

	for (int i = 1; i < argc && argv[i]; i++) {
		const char *a = argv[i], *eq = strchr(a, '=');
		size_t n = eq ? (size_t)(eq - a) : strlen(a);

		if (strcmp(a, "--") == 0)
			break;
		if (n < 6 || n > sizeof(opt) - 1 || strncmp(a, opt, n) != 0)
			continue;
		if (eq ? strcmp(eq + 1, "json") == 0 : i + 1 < argc && argv[i + 1] && strcmp(argv[i + 1], "json") == 0)
			return true;
	}
	return false;
}

/* A finished stderr line: drop the "btk-prog: " (or "path/btk-prog sub: ")
 * and "error: " prefixes, keep it unless it is argp's "Try `prog --help' or
 * ... for more information." hint, which argp may wrap over two lines. */
static void line_done(void)
{
	char *s = jx.cur, *colon = strstr(s, ": ");
	size_t len = jx.cur_len;
	bool is_error = false, hint_ends;

	jx.cur[len] = '\0';
	jx.cur_len = 0;
	hint_ends = len >= 12 && strcmp(s + len - 12, "information.") == 0;
	if (jx.in_hint) {
		jx.in_hint = !hint_ends;
		return;
	}
	if (strncmp(s, "Try `", 5) == 0 || strncmp(s, "Try '", 5) == 0) {
		jx.in_hint = !hint_ends;
		return;
	}
	if (colon && memmem(s, (size_t)(colon - s), "btk-", 4))
		s = colon + 2;
	if (strncmp(s, "error: ", 7) == 0) {
		s += 7;
		is_error = true;
	}
	if (*s)
		snprintf(is_error ? jx.last_error : jx.last_other, LINE_MAX_KEPT, "%s", s);
}

/* Keep the lines of what goes to stderr; a carriage return starts the line
 * again (the progress line redraws itself that way). */
static void keep_lines(const char *buf, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (buf[i] == '\n')
			line_done();
		else if (buf[i] == '\r')
			jx.cur_len = 0;
		else if (jx.cur_len < LINE_MAX_KEPT - 1)
			jx.cur[jx.cur_len++] = buf[i];
	}
}

static ssize_t tee_write(void *cookie, const char *buf, size_t len)
{
	size_t done = 0;

	(void)cookie;
	keep_lines(buf, len);
	while (done < len) {
		ssize_t n = write(STDERR_FILENO, buf + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return done ? (ssize_t)done : -1;
		done += (size_t)n;
	}
	return (ssize_t)len;
}

static void print_at_exit(int status, void *arg)
{
	struct json_object *doc;
	const char *error;

	(void)arg;
	if (!status || json_doc_was_printed())
		return;
	error = jx.last_error[0] ? jx.last_error : jx.last_other[0] ? jx.last_other : "failed";
	doc = json_doc_new();
	if (!doc)
		return;
	json_object_object_add(doc, "error", json_object_new_string(error));
	json_object_object_add(doc, "exit_status", json_object_new_int(status));
	json_doc_print(doc);
}

void json_exit_guard(int argc, char **argv)
{
	static const cookie_io_functions_t tee = { .write = tee_write };
	FILE *f;

	if (jx.armed || !json_exit_requested(argc, argv))
		return;
	jx.armed = true;
	fflush(stderr);
	f = fopencookie(NULL, "w", tee);
	if (f) {
		setvbuf(f, NULL, _IONBF, 0);
		stderr = f;
	}
	on_exit(print_at_exit, NULL);
}
