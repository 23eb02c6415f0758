// SPDX-License-Identifier: GPL-2.0-only
/* Forging replacement names with a chosen crc32c (see name_forge.h).
 *
 * The raw crc32c satisfies crc(s, p || x) = crc(s, p || 0000) ^ crc(0, x) for
 * a 4-byte tail x, and x -> crc(0, x) is a linear bijection of 32-bit
 * vectors; inverting it once gives the tail for any target hash. */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "image/name_forge.h"
#include <btk/csum.h>

static const char alphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-";

/* Basis of the tail map: vec[p] has highest bit p and is the image of comb[p]. */
static uint32_t basis_vec[32], basis_comb[32];
static pthread_once_t basis_once = PTHREAD_ONCE_INIT;

uint64_t forge_rand(struct forge_rng *rng)
{
	uint64_t x = rng->state ? rng->state : 0x9e3779b97f4a7c15ULL;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	rng->state = x;
	return x * 0x2545f4914f6cdd1dULL;
}

uint32_t forge_hash(uint32_t seed, const void *name, size_t len)
{
	return crc32c_btrfs(seed, name, len);
}

static void basis_build(void)
{
	for (int j = 0; j < 32; j++) {
		uint8_t x[4] = { 0 };
		uint32_t v, c = 1U << j;

		x[j / 8] = (uint8_t)(1U << (j % 8));
		v = forge_hash(0, x, 4);
		for (int p = 31; p >= 0 && v; p--) {
			if (!(v >> p & 1))
				continue;
			if (!basis_vec[p]) {
				basis_vec[p] = v;
				basis_comb[p] = c;
				v = 0;
				break;
			}
			v ^= basis_vec[p];
			c ^= basis_comb[p];
		}
	}
}

/* The tail x with crc(0, x) == y, bit by bit. */
static uint32_t tail_slow(uint32_t y)
{
	uint32_t x = 0;

	for (int p = 31; p >= 0; p--) {
		if (y >> p & 1) {
			y ^= basis_vec[p];
			x ^= basis_comb[p];
		}
	}
	return x;
}

/* The same map is linear: one table per byte of y. */
static uint32_t tail_table[4][256];

static void tables_build(void)
{
	basis_build();
	for (int b = 0; b < 4; b++)
		for (uint32_t v = 0; v < 256; v++)
			tail_table[b][v] = tail_slow(v << (8 * b));
}

static uint32_t tail_for(uint32_t y)
{
	pthread_once(&basis_once, tables_build);
	return tail_table[0][y & 0xff] ^ tail_table[1][(y >> 8) & 0xff] ^ tail_table[2][(y >> 16) & 0xff] ^
	       tail_table[3][y >> 24];
}

bool forge_name_ok(const uint8_t *name, size_t len)
{
	if (!len || (len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
		return false;
	return !memchr(name, 0, len) && !memchr(name, '/', len);
}

/* Printable ASCII but space and '/'. */
static bool tail_nice(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] <= ' ' || p[i] >= 0x7f || p[i] == '/')
			return false;
	return true;
}

static void fill_alpha(struct forge_rng *rng, uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)alphabet[forge_rand(rng) % (sizeof(alphabet) - 1)];
}

/* Any byte but NUL and '/'. */
static uint8_t any_byte(struct forge_rng *rng)
{
	for (;;) {
		uint8_t b = (uint8_t)forge_rand(rng);

		if (b && b != '/')
			return b;
	}
}

/* Solve the last 4 bytes of name for target, keeping everything before. */
static void solve_tail(uint8_t *name, size_t len, uint32_t seed, uint32_t target)
{
	uint32_t x;

	memset(name + len - 4, 0, 4);
	x = tail_for(target ^ forge_hash(seed, name, len));
	name[len - 4] = (uint8_t)x;
	name[len - 3] = (uint8_t)(x >> 8);
	name[len - 2] = (uint8_t)(x >> 16);
	name[len - 1] = (uint8_t)(x >> 24);
}

int forge_solve(struct forge_rng *rng, uint8_t *name, size_t len, size_t fixed,
		const uint8_t *orig, uint32_t seed, uint32_t target)
{
	size_t free_len = len - fixed;
	int tries = free_len > 4 ? 4096 : 1;

	if (len < fixed + 4)
		return -EINVAL;
	fill_alpha(rng, name + fixed, free_len - 4);
	for (int t = 0; t < tries; t++) {
		/* vary the last (up to) 4 bytes before the tail: cheap on long names */
		if (t && free_len > 4) {
			size_t n = free_len - 4 < 4 ? free_len - 4 : 4;

			fill_alpha(rng, name + len - 4 - n, n);
		}
		solve_tail(name, len, seed, target);
		/* the first half of the tries insists on a printable tail */
		if (free_len > 4 && t < tries / 2 && !tail_nice(name + len - 4, 4))
			continue;
		if (forge_name_ok(name, len) && memcmp(name, orig, len))
			return 0;
	}
	return -EAGAIN;
}

/* Every candidate of a free part of 1 or 2 bytes, reservoir-sampling one in range. */
static int search_all(struct forge_rng *rng, uint8_t *name, size_t len, size_t fixed,
		      const uint8_t *orig, uint32_t seed, uint32_t lo, uint32_t hi,
		      forge_accept_fn accept, void *ctx, uint32_t *hash)
{
	uint8_t best[2] = { 0, 0 };
	uint64_t found = 0;
	size_t free_len = len - fixed;
	unsigned n = free_len == 1 ? 256 : 65536;

	for (unsigned v = 0; v < n; v++) {
		uint32_t h;

		name[fixed] = (uint8_t)v;
		if (free_len == 2)
			name[fixed + 1] = (uint8_t)(v >> 8);
		if (!forge_name_ok(name, len) || !memcmp(name, orig, len))
			continue;
		h = forge_hash(seed, name, len);
		if (h < lo || h > hi || (accept && !accept(ctx, h)))
			continue;
		if (forge_rand(rng) % ++found == 0) {
			best[0] = name[fixed];
			best[1] = free_len == 2 ? name[fixed + 1] : 0;
		}
	}
	if (!found)
		return -EAGAIN;
	memcpy(name + fixed, best, free_len);
	*hash = forge_hash(seed, name, len);
	return 0;
}

int forge_search(struct forge_rng *rng, uint8_t *name, size_t len, size_t fixed,
		 const uint8_t *orig, uint32_t seed, uint32_t lo, uint32_t hi,
		 forge_accept_fn accept, void *ctx, uint32_t *hash)
{
	size_t free_len = len - fixed;

	if (len <= fixed || lo > hi)
		return -EINVAL;
	if (free_len <= 2) {
		/* a wide range is hit by a few random tries; else try everything */
		for (int t = 0; free_len == 2 && t < 64; t++) {
			uint32_t h;

			name[fixed] = any_byte(rng);
			name[fixed + 1] = any_byte(rng);
			if (!forge_name_ok(name, len) || !memcmp(name, orig, len))
				continue;
			h = forge_hash(seed, name, len);
			if (h >= lo && h <= hi && (!accept || accept(ctx, h))) {
				*hash = h;
				return 0;
			}
		}
		return search_all(rng, name, len, fixed, orig, seed, lo, hi, accept, ctx, hash);
	}
	if (free_len >= 4) {
		/* pick a target in range, then solve for it */
		uint64_t width = (uint64_t)hi - lo + 1;

		for (int t = 0; t < 256; t++) {
			uint32_t target = (uint32_t)(lo + forge_rand(rng) % width);

			if (accept && !accept(ctx, target))
				continue;
			if (!forge_solve(rng, name, len, fixed, orig, seed, target)) {
				*hash = target;
				return 0;
			}
		}
	}
	for (long t = 0; t < (1L << 21); t++) {
		uint32_t h;

		if (t < (1L << 16))
			fill_alpha(rng, name + fixed, free_len);
		else
			for (size_t i = fixed; i < len; i++)
				name[i] = any_byte(rng);
		if (!forge_name_ok(name, len) || !memcmp(name, orig, len))
			continue;
		h = forge_hash(seed, name, len);
		if (h >= lo && h <= hi && (!accept || accept(ctx, h))) {
			*hash = h;
			return 0;
		}
	}
	return -EAGAIN;
}

static uint32_t dist(uint32_t a, uint32_t b)
{
	return a > b ? a - b : b - a;
}

int forge_nearest(struct forge_rng *rng, uint8_t *name, size_t len, size_t fixed,
		  const uint8_t *orig, uint32_t seed, uint32_t target, uint32_t *hash)
{
	size_t free_len = len - fixed;
	uint8_t best[4];
	uint32_t best_d = UINT32_MAX;
	bool have = false;

	if (len <= fixed)
		return -EINVAL;
	if (free_len >= 5 && !forge_solve(rng, name, len, fixed, orig, seed, target)) {
		*hash = target;
		return 0;
	}
	if (free_len >= 4) {
		for (uint32_t d = 1; d < (1U << 20); d++) {
			for (int sgn = 0; sgn < 2; sgn++) {
				uint32_t t = sgn ? target - d : target + d;

				if (sgn ? t > target : t < target)
					continue; /* wrapped */
				if (!forge_solve(rng, name, len, fixed, orig, seed, t)) {
					*hash = t;
					return 0;
				}
			}
		}
		return -EAGAIN;
	}
	/* 1 free byte: every candidate; 2 or 3: 4096 samples (the best is ~2^20 away) */
	for (long t = 0; t < (free_len == 1 ? 256L : 4096L); t++) {
		uint32_t h;

		if (free_len == 1) {
			name[fixed] = (uint8_t)t;
		} else {
			for (size_t i = fixed; i < len; i++)
				name[i] = any_byte(rng);
		}
		if (!forge_name_ok(name, len) || !memcmp(name, orig, len))
			continue;
		h = forge_hash(seed, name, len);
		if (!have || dist(h, target) < best_d) {
			best_d = dist(h, target);
			memcpy(best, name + fixed, free_len);
			have = true;
		}
	}
	if (!have)
		return -EAGAIN;
	memcpy(name + fixed, best, free_len);
	*hash = forge_hash(seed, name, len);
	return 0;
}
