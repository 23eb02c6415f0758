// SPDX-License-Identifier: GPL-2.0-only
/* image/held: restore's held tree blocks. A block is found by address, a
 * second copy of one is ignored, "every child held" follows blocks arriving
 * in any order, and a node's pointers make their targets referenced; a
 * hundred thousand blocks take linear time (the list used to be scanned for
 * every block, and every node's children for every new block). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "image/restore.h"
#include <btk/format.h>

#define NODE 4096
#define HDR sizeof(struct btrfs_header)

static void make_block(uint8_t *b, uint64_t bytenr, unsigned level, const uint64_t *children, unsigned n)
{
	memset(b, 0, NODE);
	header_set_bytenr(b, bytenr);
	header_set_level(b, (uint8_t)level);
	header_set_nritems(b, n);
	for (unsigned i = 0; i < n; i++)
		key_ptr_set_blockptr(node_key_ptr(b, i), children[i]);
}

Test(held, children_arrive_in_any_order)
{
	struct held_list l = { 0 };
	uint8_t b[NODE];
	uint64_t kids[] = { 8192, 12288, 16384 };

	make_block(b, 12288, 0, NULL, 0);
	cr_assert_eq(held_add(&l, 12288, b, NODE), 0);     /* a child before its parent */
	cr_assert_eq(l.missing, 0);
	make_block(b, 4096, 1, kids, 3);
	cr_assert_eq(held_add(&l, 4096, b, NODE), 0);
	cr_assert_eq(l.missing, 2, "two children still missing, got %zu", l.missing);
	cr_assert(held_referenced(&l, 8192) && held_referenced(&l, 12288) && !held_referenced(&l, 4096));
	make_block(b, 8192, 0, NULL, 0);
	cr_assert_eq(held_add(&l, 8192, b, NODE), 0);
	cr_assert_eq(held_add(&l, 8192, b, NODE), 0);       /* a second copy changes nothing */
	cr_assert_eq(l.n, 3);
	cr_assert_eq(l.missing, 1);
	make_block(b, 16384, 0, NULL, 0);
	b[200] = 0x5a;
	cr_assert_eq(held_add(&l, 16384, b, NODE), 0);
	cr_assert_eq(l.missing, 0);
	cr_assert_not_null(held_find(&l, 16384));
	cr_assert_eq(held_find(&l, 16384)->data[200], 0x5a);
	cr_assert_null(held_find(&l, 20480));
	held_free(&l);
}

Test(held, many_blocks_in_linear_time)
{
	enum { N = 200000, FAN = 100 };
	struct held_list l = { 0 };
	static uint8_t b[NODE];
	uint64_t kids[FAN];
	clock_t t0 = clock();

	/* nodes first (each naming FAN leaves), then the leaves, last to first */
	for (unsigned n = 0; n < N / FAN; n++) {
		for (unsigned k = 0; k < FAN; k++)
			kids[k] = (uint64_t)(N + 1 + n * FAN + k) * NODE;
		make_block(b, (uint64_t)(n + 1) * NODE, 1, kids, FAN);
		cr_assert_eq(held_add(&l, (uint64_t)(n + 1) * NODE, b, HDR + FAN * sizeof(struct btrfs_key_ptr)), 0);
	}
	cr_assert_eq(l.missing, N);
	for (unsigned i = N; i-- > 0;) {
		make_block(b, (uint64_t)(N + 1 + i) * NODE, 0, NULL, 0);
		cr_assert_eq(held_add(&l, (uint64_t)(N + 1 + i) * NODE, b, HDR), 0);
	}
	cr_assert_eq(l.missing, 0);
	for (unsigned i = 0; i < N; i += 997)
		cr_assert_not_null(held_find(&l, (uint64_t)(N + 1 + i) * NODE));
	cr_assert_lt((double)(clock() - t0) / CLOCKS_PER_SEC, 15.0, "held blocks are not linear");
	held_free(&l);
}
