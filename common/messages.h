/* SPDX-License-Identifier: GPL-2.0-only */
/* Messages to stderr, the one voice of every btk program:
 *
 *   btk-check: error: cannot open /dev/sdb: Permission denied
 *   btk-check: warning: superblock copy 1 is stale
 *   btk-check: using superblock copy 0 at 65536
 *
 * Results go to stdout; everything here goes to stderr. The program name and
 * the verbosity are set once at startup (msg_configure or the two setters)
 * and are the only state kept in this module. A transient status line (the
 * progress line) is drawn through msg_status_line() so that a message
 * printed meanwhile first clears it and then draws it again below. */
#ifndef BTK_COMMON_MESSAGES_H
#define BTK_COMMON_MESSAGES_H

#include <stdarg.h>
#include <btk/fs.h>

enum msg_verbosity {
	MSG_QUIET = -1,   /* errors and warnings only, no status line */
	MSG_NORMAL = 0,   /* + info */
	MSG_VERBOSE = 1,  /* + msg_verbose() */
};

struct msg_config {
	const char *program;            /* "btk-check"; NULL keeps the current one */
	enum msg_verbosity verbosity;
};

/* Set program name and verbosity at startup. The name is not copied. */
void msg_configure(const struct msg_config *cfg);
void msg_set_program(const char *name);
void msg_set_verbosity(enum msg_verbosity verbosity);
enum msg_verbosity msg_get_verbosity(void);
const char *msg_program(void);

/* "prog: error: ...", always shown. */
void msg_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "prog: error: ...: strerror(-err)"; err is a negative errno (a positive
 * one is accepted too). */
void msg_errno(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "prog: warning: ...", always shown. */
void msg_warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "prog: ...", hidden by --quiet. */
void msg_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "prog: ...", only with --verbose. */
void msg_verbose(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* va_list form of the above: level as for msg_fs_note (0 info, 1 warning,
 * 2 error). */
void msg_vprint(enum fs_note_level level, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

/* A libfs note callback (struct fs_open_options.note): info notes are shown
 * unless quiet, warnings and errors always. arg is unused (pass NULL). */
void msg_fs_note(void *arg, enum fs_note_level level, const char *text);

/* Draw (or redraw) the transient status line on stderr, replacing the
 * previous one; nothing is drawn when quiet. msg_status_end() leaves the
 * last line in place and moves to the next line; msg_status_clear() erases
 * it. Safe to call from several threads. */
void msg_status_line(const char *text);
void msg_status_end(void);
void msg_status_clear(void);

#endif
