/* SPDX-License-Identifier: MIT */
/*
 * A histogram of how late the clock thread's ticks run, in log-linear
 * buckets (8 per power of two: at most 12.5% wide), as HdrHistogram does
 * at low precision. One writer (the clock thread) adds with relaxed atomics;
 * anyone may read a copy at any time. Status replies carry the non-empty
 * buckets, so a client can subtract two replies and summarise an interval.
 */
#ifndef SHMCLOCKD_LATEHIST_H
#define SHMCLOCKD_LATEHIST_H

#include <stdatomic.h>
#include <stdint.h>

#define LATEHIST_SUB 8                            /* buckets per octave */
#define LATEHIST_TOP 40                           /* 2^40 ns (18 min) and above: last bucket */
#define LATEHIST_N (LATEHIST_SUB + (LATEHIST_TOP - 3) * LATEHIST_SUB)

struct latehist {
	_Atomic uint64_t n[LATEHIST_N];
};

/* The bucket holding @ns (negative counts as 0). */
int latehist_index(int64_t ns);
/* The smallest value bucket @i holds. */
int64_t latehist_lo(int i);
/* The largest value bucket @i holds. */
int64_t latehist_hi(int i);

/* Counts one value (the single writer). */
void latehist_add(struct latehist *h, int64_t ns);
/* Copies the counts out; returns their sum. */
uint64_t latehist_copy(const struct latehist *h, uint64_t out[LATEHIST_N]);
/* The value at quantile @q (0..1) of @counts, as its bucket's upper bound
 * (an overestimate by at most 12.5%); 0 when empty. */
int64_t latehist_quantile(const uint64_t counts[LATEHIST_N], double q);
/* The same, capped at @max, the exact largest value counted (a bucket's upper
 * bound may lie above it). */
int64_t latehist_quantile_max(const uint64_t counts[LATEHIST_N], double q, int64_t max);

#endif
