/* SPDX-License-Identifier: GPL-2.0-only */
/* Problems about one tree block that several trees reach (an unreadable
 * block snapshots share), held while the trees are walked and reported once
 * at the end, for the first tree that reached the block, naming every tree
 * that did ("[in N roots: ...]", JSON "roots"). Bounded: past
 * SHARED_REPORTS_MAX blocks, hold refuses and the caller reports at once. */
#ifndef BTK_CHECK_SHARED_REPORTS_H
#define BTK_CHECK_SHARED_REPORTS_H

#include <stddef.h>
#include <stdint.h>

#include "check/check.h"

#define SHARED_REPORTS_MAX 4096

struct shared_report {
	enum problem_code code;
	uint64_t bytenr;
	char *detail;            /* as the first tree saw it */
	uint64_t *roots;
	size_t nroots, cap;
};

struct shared_reports {
	struct shared_report *v;
	size_t n, cap;
};

/* Hold problem code about block bytenr reached from tree root (detail: its
 * text for that tree). 0 when held; -ENOMEM or -E2BIG when not (report it now). */
int shared_reports_hold(struct shared_reports *s, enum problem_code code, uint64_t bytenr, uint64_t root,
			const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Report every held problem once, in the order first held, and forget them. */
void shared_reports_flush(struct check_ctx *ctx, struct shared_reports *s);
void shared_reports_free(struct shared_reports *s);

#endif
