/* SPDX-License-Identifier: MIT */
#include <stdatomic.h>

#include "latehist.h"

int latehist_index(int64_t ns)
{
	uint64_t v = ns < 0 ? 0 : (uint64_t)ns;
	int b;

	if (v < LATEHIST_SUB)
		return (int)v;
	b = 63 - __builtin_clzll(v); /* v in [2^b, 2^(b+1)), b >= 3 */
	if (b >= LATEHIST_TOP)
		return LATEHIST_N - 1;
	/* The 3 bits below the leading one pick the sub-bucket. */
	return LATEHIST_SUB + (b - 3) * LATEHIST_SUB + (int)((v >> (b - 3)) & (LATEHIST_SUB - 1));
}

int64_t latehist_lo(int i)
{
	int b, sub;

	if (i < LATEHIST_SUB)
		return i;
	b = (i - LATEHIST_SUB) / LATEHIST_SUB + 3;
	sub = (i - LATEHIST_SUB) % LATEHIST_SUB;
	return (int64_t)(LATEHIST_SUB + sub) << (b - 3);
}

int64_t latehist_hi(int i)
{
	return i >= LATEHIST_N - 1 ? INT64_MAX : latehist_lo(i + 1) - 1;
}

void latehist_add(struct latehist *h, int64_t ns)
{
	_Atomic uint64_t *c = &h->n[latehist_index(ns)];

	/* One writer: a relaxed load and store, no locked instruction on the
	 * tick path. Readers may see a count one behind; nothing pairs. */
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

uint64_t latehist_copy(const struct latehist *h, uint64_t out[LATEHIST_N])
{
	uint64_t sum = 0;

	for (int i = 0; i < LATEHIST_N; i++) {
		out[i] = atomic_load_explicit(&h->n[i], memory_order_relaxed);
		sum += out[i];
	}
	return sum;
}

int64_t latehist_quantile(const uint64_t counts[LATEHIST_N], double q)
{
	uint64_t total = 0, seen = 0, rank;

	for (int i = 0; i < LATEHIST_N; i++)
		total += counts[i];
	if (!total)
		return 0;
	/* The smallest value with at least q of the counts at or below it. */
	rank = (uint64_t)(q * (double)total);
	if ((double)rank < q * (double)total)
		rank++;
	if (rank < 1)
		rank = 1;
	if (rank > total)
		rank = total;
	for (int i = 0; i < LATEHIST_N; i++) {
		seen += counts[i];
		if (seen >= rank)
			return latehist_hi(i) == INT64_MAX ? latehist_lo(i) : latehist_hi(i);
	}
	return 0;
}

int64_t latehist_quantile_max(const uint64_t counts[LATEHIST_N], double q, int64_t max)
{
	int64_t v = latehist_quantile(counts, q);

	return v > max ? max : v;
}
