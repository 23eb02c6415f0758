// SPDX-License-Identifier: GPL-2.0-only
/* Command-line plumbing; see cli.h. The state here is per process by
 * nature: the program's version string, the cancellation flag a signal
 * handler sets, and the list of temporary files to remove. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common/cli.h"
#include "common/messages.h"

static const int caught_signals[] = { SIGINT, SIGTERM, SIGHUP };

static char version_string[128] = "btk (btk) " BTK_VERSION;

static volatile sig_atomic_t cancel_enabled;
static volatile sig_atomic_t cancel_signal;

/* A registered temporary file. Nodes are only ever prepended and are freed
 * only at exit, so the signal handler can walk the list at any moment;
 * unregistering just clears active. */
struct tempfile {
	struct tempfile *next;
	pid_t pid;
	volatile sig_atomic_t active;
	char path[];
};

static struct tempfile *volatile tempfiles;
static pthread_mutex_t tempfiles_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t atexit_once = PTHREAD_ONCE_INIT;

/* Async-signal-safe: unlink() and getpid() only. */
static void remove_tempfiles_now(void)
{
	pid_t self = getpid();
	struct tempfile *t;

	for (t = tempfiles; t; t = t->next) {
		if (t->active && t->pid == self) {
			t->active = 0;
			unlink(t->path);
		}
	}
}

static void on_signal(int sig)
{
	struct sigaction dfl;

	if (cancel_enabled && !cancel_signal) {
		cancel_signal = sig;
		return;
	}
	remove_tempfiles_now();
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&dfl.sa_mask);
	sigaction(sig, &dfl, NULL);
	/* Delivered, with the default action, when the handler returns. */
	raise(sig);
}

/* Block the caught signals in this thread while the list changes. */
static void block_signals(sigset_t *old)
{
	sigset_t set;
	size_t i;

	sigemptyset(&set);
	for (i = 0; i < sizeof(caught_signals) / sizeof(caught_signals[0]); i++)
		sigaddset(&set, caught_signals[i]);
	pthread_sigmask(SIG_BLOCK, &set, old);
}

static void restore_signals(const sigset_t *old)
{
	pthread_sigmask(SIG_SETMASK, old, NULL);
}

static void cleanup_at_exit(void)
{
	struct tempfile *t, *next;
	sigset_t old;

	block_signals(&old);
	pthread_mutex_lock(&tempfiles_lock);
	remove_tempfiles_now();
	t = tempfiles;
	tempfiles = NULL;
	pthread_mutex_unlock(&tempfiles_lock);
	restore_signals(&old);
	for (; t; t = next) {
		next = t->next;
		free(t);
	}
}

static void register_atexit(void)
{
	atexit(cleanup_at_exit);
}

static void print_version(FILE *stream, struct argp_state *state)
{
	(void)state;
	fprintf(stream, "%s\n", version_string);
}

void cli_init(const char *program, int usage_exit_status)
{
	struct sigaction sa;
	size_t i;

	msg_set_program(program);
	snprintf(version_string, sizeof(version_string), "%s (btk) %s", program, BTK_VERSION);
	argp_program_version_hook = print_version;
	argp_err_exit_status = usage_exit_status;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < sizeof(caught_signals) / sizeof(caught_signals[0]); i++)
		sigaddset(&sa.sa_mask, caught_signals[i]);
	for (i = 0; i < sizeof(caught_signals) / sizeof(caught_signals[0]); i++)
		sigaction(caught_signals[i], &sa, NULL);
	pthread_once(&atexit_once, register_atexit);
}

const char *cli_version_string(void)
{
	return version_string;
}

static const char *const format_names[] = {
	[CLI_FORMAT_TEXT] = "text",
	[CLI_FORMAT_JSON] = "json",
	[CLI_FORMAT_JSONL] = "jsonl",
};
#define NUM_FORMATS (sizeof(format_names) / sizeof(format_names[0]))

const char *cli_format_name(enum cli_format format)
{
	if ((unsigned)format >= NUM_FORMATS)
		return "?";
	return format_names[format];
}

int cli_parse_format(const char *arg, unsigned allowed, enum cli_format *out)
{
	unsigned i;

	if (!arg)
		return -EINVAL;
	for (i = 0; i < NUM_FORMATS; i++) {
		if ((allowed & CLI_FORMAT_MASK(i)) && strcmp(arg, format_names[i]) == 0) {
			*out = (enum cli_format)i;
			return 0;
		}
	}
	return -EINVAL;
}

void cli_argp_format(struct argp_state *state, const char *arg, unsigned allowed,
		     enum cli_format *out)
{
	char expected[64] = "";
	unsigned i, n = 0, count = 0;

	if (cli_parse_format(arg, allowed, out) == 0)
		return;
	for (i = 0; i < NUM_FORMATS; i++)
		count += !!(allowed & CLI_FORMAT_MASK(i));
	for (i = 0; i < NUM_FORMATS; i++) {
		size_t used = strlen(expected);

		if (!(allowed & CLI_FORMAT_MASK(i)))
			continue;
		n++;
		snprintf(expected + used, sizeof(expected) - used, "%s%s",
			 n == 1 ? "" : n == count ? " or " : ", ", format_names[i]);
	}
	argp_error(state, "invalid --format '%s' (expected %s)", arg ? arg : "", expected);
}

enum { OPT_PROGRESS = 0x1000 };

static const struct argp_option common_options[] = {
	{ "quiet", 'q', NULL, 0, "Print only errors and warnings, no progress line", -1 },
	{ "verbose", 'v', NULL, 0, "Print more messages", -1 },
	{ "progress", OPT_PROGRESS, "plain", OPTION_ARG_OPTIONAL,
	  "Show the progress line even when stderr is not a terminal; =plain: whole lines for logs "
	  "(each phase's end, and every few seconds), no carriage returns", -1 },
	{ 0 }
};

static error_t parse_common(int key, char *arg, struct argp_state *state)
{
	struct cli_common_options *opts = state->input;

	switch (key) {
	case 'q':
		msg_set_verbosity(MSG_QUIET);
		break;
	case 'v':
		msg_set_verbosity(MSG_VERBOSE);
		break;
	case OPT_PROGRESS:
		if (arg && strcmp(arg, "plain"))
			argp_error(state, "invalid --progress=%s (only --progress or --progress=plain)", arg);
		if (opts) {
			opts->progress = true;
			opts->progress_plain = arg != NULL;
		}
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

const struct argp cli_common_argp = {
	.options = common_options,
	.parser = parse_common,
};

enum progress_mode cli_progress_mode(const struct cli_common_options *opts)
{
	if (opts && opts->progress_plain)
		return PROGRESS_PLAIN;
	return opts && opts->progress ? PROGRESS_FORCE : PROGRESS_AUTO;
}

void cli_enable_cancel(void)
{
	cancel_enabled = 1;
}

bool cli_cancelled(void)
{
	return cancel_signal != 0;
}

int cli_cancel_signal(void)
{
	return cancel_signal;
}

int cli_register_tempfile(const char *path)
{
	size_t len = strlen(path) + 1;
	struct tempfile *t = malloc(sizeof(*t) + len);
	sigset_t old;

	if (!t)
		return -ENOMEM;
	memcpy(t->path, path, len);
	t->pid = getpid();
	t->active = 1;
	pthread_once(&atexit_once, register_atexit);

	block_signals(&old);
	pthread_mutex_lock(&tempfiles_lock);
	t->next = tempfiles;
	tempfiles = t;
	pthread_mutex_unlock(&tempfiles_lock);
	restore_signals(&old);
	return 0;
}

void cli_unregister_tempfile(const char *path)
{
	pid_t self = getpid();
	struct tempfile *t;
	sigset_t old;

	block_signals(&old);
	pthread_mutex_lock(&tempfiles_lock);
	for (t = tempfiles; t; t = t->next) {
		if (t->active && t->pid == self && strcmp(t->path, path) == 0) {
			t->active = 0;
			break;
		}
	}
	pthread_mutex_unlock(&tempfiles_lock);
	restore_signals(&old);
}

void cli_remove_tempfiles(void)
{
	sigset_t old;

	block_signals(&old);
	pthread_mutex_lock(&tempfiles_lock);
	remove_tempfiles_now();
	pthread_mutex_unlock(&tempfiles_lock);
	restore_signals(&old);
}

error_t cli_argp_devices(int key, struct argp_state *state, char ***paths, unsigned *npaths)
{
	switch (key) {
	case ARGP_KEY_ARGS:
		*paths = state->argv + state->next;
		*npaths = (unsigned)(state->argc - state->next);
		return 0;
	case ARGP_KEY_NO_ARGS:
		argp_usage(state);
		return 0;
	default:
		return ARGP_ERR_UNKNOWN;
	}
}
