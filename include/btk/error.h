/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The typed error record: what went wrong in the last libfs call that failed
 * on this thread. libfs functions return 0 or -errno; a failing one records
 * why in the calling thread's record (like errno, one per thread, so worker
 * threads and other filesystems never overwrite it). Read it with
 * btk_last_error() right after a call returned < 0; it stays until the next
 * error recorded on the same thread. A worker thread's record reaches the
 * thread that joins it only through btk_error_pass() / btk_error_adopt(). */
#ifndef BTK_ERROR_H
#define BTK_ERROR_H

#include <stdarg.h>
#include <stdint.h>

/* What kind of failure, for decisions (exit codes, refusals) that must not
 * parse the message. Derived from the errno unless the recorder says. */
enum btk_err_kind {
	BTK_ERR_NONE = 0,     /* no error recorded */
	BTK_ERR_IO,           /* the device failed a read or a write (EIO) */
	BTK_ERR_CSUM,         /* data or a block read back with a wrong checksum */
	BTK_ERR_CORRUPT,      /* on-disk structures are inconsistent (EUCLEAN, EBADMSG) */
	BTK_ERR_UNSUPPORTED,  /* a feature or layout btk does not handle (EOPNOTSUPP, EROFS) */
	BTK_ERR_NOSPC,        /* no room on the devices or in an item (ENOSPC) */
	BTK_ERR_CANCELLED,    /* the caller's cancel hook said stop (ECANCELED) */
	BTK_ERR_BUSY,         /* mounted or opened exclusively elsewhere (EBUSY) */
	BTK_ERR_INVALID,      /* a bad argument or not a btrfs device (EINVAL) */
	BTK_ERR_NOMEM,        /* out of memory (ENOMEM) */
	BTK_ERR_NOTFOUND,     /* what was looked up is not there (ENOENT) */
	BTK_ERR_EXISTS,       /* what was to be created is there already (EEXIST) */
	BTK_ERR_MISSING,      /* a member device is missing (ENODEV) */
	BTK_ERR_INTERNAL,     /* any other errno */
};

#define BTK_ERR_MSG_MAX 512

struct btk_error {
	int err;                /* -errno the failing call returned; 0 = none */
	enum btk_err_kind kind;
	uint64_t bytenr;        /* the logical address concerned, 0 when none */
	uint64_t devid;         /* the device concerned, 0 when none */
	char msg[BTK_ERR_MSG_MAX];
};

/* "io", "csum", "corrupt", ... (stable: JSON output may carry it). */
const char *btk_err_kind_name(enum btk_err_kind kind);
/* The kind an errno value (negative or positive) stands for by default. */
enum btk_err_kind btk_err_kind_of(int err);

/* The calling thread's record (never NULL; err == 0 when none yet). */
const struct btk_error *btk_last_error(void);
/* Its message ("" when none). */
const char *btk_error_msg(void);
/* The kind of the failure that returned err: the record's when it was
 * recorded with that err (an explicit kind: checksum, feature gate), else
 * the errno's own. For decisions: exit codes, refusals, cancellation. */
enum btk_err_kind btk_error_kind(int err);
/* What to print for a failure that returned err: the record's message, or
 * strerror(-err) when there is none. (Not matched against the record's err:
 * callers may turn one errno into another and keep the message, as
 * trans_get_root() does with -EIO -> -ENOENT.) */
const char *btk_error_text(int err);

/* Record an error on the calling thread (kind BTK_ERR_NONE: from err);
 * returns err. The message is formatted before the record changes, so the
 * old message may be an argument (to add context). */
int btk_error_set(int err, enum btk_err_kind kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int btk_error_vset(int err, enum btk_err_kind kind, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));
/* Name the block and device (0: none) of the record just set. */
void btk_error_locate(uint64_t bytenr, uint64_t devid);
/* Forget the calling thread's record: for code that asks afterwards whether
 * a callee recorded anything (a failure with no record versus one with). */
void btk_error_clear(void);

/* Handing a worker's error to the joiner: the worker copies its record into
 * slot (a place of its own in the shared state) before it returns; only the
 * first error is kept. After pthread_join, the joiner calls
 * btk_error_adopt(slot), which makes it its own record when slot holds one
 * (and returns slot->err, 0 when none). */
void btk_error_pass(struct btk_error *slot);
int btk_error_adopt(const struct btk_error *slot);

#endif
