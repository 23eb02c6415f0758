// SPDX-License-Identifier: LGPL-2.1-or-later
/* The per-thread error record (see btk/error.h): set by fs_error() and
 * btk_error_set(), read by the caller on the same thread. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <btk/error.h>

static _Thread_local struct btk_error last;

static const char *const kind_names[] = {
	[BTK_ERR_NONE] = "none",         [BTK_ERR_IO] = "io",
	[BTK_ERR_CSUM] = "csum",         [BTK_ERR_CORRUPT] = "corrupt",
	[BTK_ERR_UNSUPPORTED] = "unsupported", [BTK_ERR_NOSPC] = "nospc",
	[BTK_ERR_CANCELLED] = "cancelled", [BTK_ERR_BUSY] = "busy",
	[BTK_ERR_INVALID] = "invalid",   [BTK_ERR_NOMEM] = "nomem",
	[BTK_ERR_NOTFOUND] = "notfound", [BTK_ERR_EXISTS] = "exists",
	[BTK_ERR_MISSING] = "missing",   [BTK_ERR_INTERNAL] = "internal",
};

const char *btk_err_kind_name(enum btk_err_kind kind)
{
	if ((unsigned)kind >= sizeof(kind_names) / sizeof(kind_names[0]) || !kind_names[kind])
		return "internal";
	return kind_names[kind];
}

enum btk_err_kind btk_err_kind_of(int err)
{
	switch (err < 0 ? -err : err) {
	case 0: return BTK_ERR_NONE;
	case EIO: return BTK_ERR_IO;
	case EUCLEAN: case EBADMSG: return BTK_ERR_CORRUPT;
	case EOPNOTSUPP: case EROFS: return BTK_ERR_UNSUPPORTED;
	case ENOSPC: case EFBIG: case E2BIG: return BTK_ERR_NOSPC;
	case ECANCELED: return BTK_ERR_CANCELLED;
	case EBUSY: return BTK_ERR_BUSY;
	case EINVAL: return BTK_ERR_INVALID;
	case ENOMEM: return BTK_ERR_NOMEM;
	case ENOENT: return BTK_ERR_NOTFOUND;
	case EEXIST: return BTK_ERR_EXISTS;
	case ENODEV: return BTK_ERR_MISSING;
	default: return BTK_ERR_INTERNAL;
	}
}

const struct btk_error *btk_last_error(void)
{
	return &last;
}

const char *btk_error_msg(void)
{
	return last.msg;
}

enum btk_err_kind btk_error_kind(int err)
{
	return err && last.err == err ? last.kind : btk_err_kind_of(err);
}

const char *btk_error_text(int err)
{
	return last.msg[0] ? last.msg : strerror(err < 0 ? -err : err);
}

int btk_error_vset(int err, enum btk_err_kind kind, const char *fmt, va_list ap)
{
	char buf[sizeof(last.msg)];

	/* formatted aside: the old message may be one of the arguments */
	vsnprintf(buf, sizeof(buf), fmt, ap);
	last.err = err;
	last.kind = kind != BTK_ERR_NONE ? kind : btk_err_kind_of(err);
	last.bytenr = 0;
	last.devid = 0;
	memcpy(last.msg, buf, sizeof(buf));
	return err;
}

int btk_error_set(int err, enum btk_err_kind kind, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	btk_error_vset(err, kind, fmt, ap);
	va_end(ap);
	return err;
}

void btk_error_locate(uint64_t bytenr, uint64_t devid)
{
	last.bytenr = bytenr;
	last.devid = devid;
}

void btk_error_clear(void)
{
	last.err = 0;
	last.kind = BTK_ERR_NONE;
	last.bytenr = 0;
	last.devid = 0;
	last.msg[0] = 0;
}

void btk_error_pass(struct btk_error *slot)
{
	if (last.err && !slot->err)
		*slot = last;
}

int btk_error_adopt(const struct btk_error *slot)
{
	if (slot->err)
		last = *slot;
	return slot->err;
}
