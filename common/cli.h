/* SPDX-License-Identifier: GPL-2.0-only */
/* Command-line plumbing shared by every btk program: argp glue (--version,
 * --format, the common -q/-v/--progress options), fsck-style exit codes,
 * cancellation by SIGINT/SIGTERM/SIGHUP and removal of temporary files.
 *
 * A program's main() starts with
 *
 *	cli_init("btk-check", FSCK_EXIT_USAGE);
 *
 * which names the program for messages, makes --version print
 * "btk-check (btk) 0.1.0", makes argp usage errors exit with the given
 * status, installs the signal handlers and the exit-time cleanup. */
#ifndef BTK_COMMON_CLI_H
#define BTK_COMMON_CLI_H

#include <argp.h>
#include <stdbool.h>
#include "common/progress.h"

#ifndef BTK_VERSION
#define BTK_VERSION "unknown"
#endif

/* fsck(8) exit codes, used by btk-check. Other programs exit 0 or 1. */
enum fsck_exit {
	FSCK_EXIT_CLEAN = 0,        /* no errors */
	FSCK_EXIT_CORRECTED = 1,    /* errors corrected */
	FSCK_EXIT_UNCORRECTED = 4,  /* errors left uncorrected */
	FSCK_EXIT_ERROR = 8,        /* operational error */
	FSCK_EXIT_USAGE = 16,       /* usage or syntax error */
	FSCK_EXIT_CANCELLED = 32,   /* cancelled by the user */
};

/* Set up a program; see above. program is not copied (use a literal). */
void cli_init(const char *program, int usage_exit_status);

/* "btk-check (btk) 0.1.0"; what --version prints. */
const char *cli_version_string(void);

/* Output formats selectable with --format. */
enum cli_format { CLI_FORMAT_TEXT, CLI_FORMAT_JSON, CLI_FORMAT_JSONL };
#define CLI_FORMAT_MASK(f) (1u << (f))

/* Parse a --format argument ("text", "json", "jsonl") that must be one of
 * the formats in allowed (a mask of CLI_FORMAT_MASK bits). Returns 0 or
 * -EINVAL. */
int cli_parse_format(const char *arg, unsigned allowed, enum cli_format *out);
/* The same inside an argp parser: on a bad value reports
 * "invalid --format 'x' (expected text or json)" through argp_error(),
 * which exits with the usage status. */
void cli_argp_format(struct argp_state *state, const char *arg, unsigned allowed,
		     enum cli_format *out);
const char *cli_format_name(enum cli_format format);

/* The positional DEVICE... arguments, inside an argp parser: returns 0 after
 * taking them for ARGP_KEY_ARGS, calls argp_usage() for ARGP_KEY_NO_ARGS, and
 * returns ARGP_ERR_UNKNOWN for every other key (so it can end a switch). */
error_t cli_argp_devices(int key, struct argp_state *state, char ***paths, unsigned *npaths);

/* The common options, as an argp child parser:
 *   -q, --quiet     only errors and warnings, no progress line
 *   -v, --verbose   more messages
 *   --progress      show the progress line even when stderr is no terminal
 *   --progress=plain  whole progress lines for logs
 * -q and -v set the message verbosity directly; --progress is recorded in
 * the struct cli_common_options passed as the child's input (set
 * state->child_inputs[i] in the parent's ARGP_KEY_INIT), if any. Add it as
 *   { &cli_common_argp, 0, NULL, 0 }
 * to the parent's children. */
struct cli_common_options {
	bool progress;
	bool progress_plain;   /* --progress=plain */
};
extern const struct argp cli_common_argp;
/* PROGRESS_FORCE with --progress, PROGRESS_PLAIN with --progress=plain,
 * else PROGRESS_AUTO (quiet hides it either way). */
enum progress_mode cli_progress_mode(const struct cli_common_options *opts);

/* Cancellation. By default SIGINT, SIGTERM and SIGHUP remove the registered
 * temporary files and kill the program as usual. After
 * cli_enable_cancel() the first such signal only sets a flag that long
 * loops poll with cli_cancelled() to stop cleanly (exit status
 * FSCK_EXIT_CANCELLED for btk-check); a second one kills as before. */
void cli_enable_cancel(void);
bool cli_cancelled(void);
/* The signal that cancelled, 0 if none. */
int cli_cancel_signal(void);

/* Temporary files removed at exit() and on a fatal signal, by the process
 * that registered them. cli_unregister_tempfile() forgets one (after it was
 * renamed into place or removed by the caller). Returns 0 or -ENOMEM. */
int cli_register_tempfile(const char *path);
void cli_unregister_tempfile(const char *path);
/* Remove every registered file now (also done at exit). */
void cli_remove_tempfiles(void);

#endif
