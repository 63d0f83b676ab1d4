/* SPDX-License-Identifier: MIT */
/* The daemon's tick-lateness histogram: buckets cover every value once,
 * are at most 12.5% wide, and quantiles land in the right bucket. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "latehist.h"

Test(latehist, every_value_falls_in_a_bucket_that_holds_it)
{
	unsigned seed = 7;

	for (int i = 0; i < 200000; i++) {
		/* Every magnitude: a random value below a random power of two. */
		int64_t v = (int64_t)(((uint64_t)rand_r(&seed) << 31 | (uint64_t)rand_r(&seed)) &
				      ((1ULL << (rand_r(&seed) % 42)) - 1));
		int b = latehist_index(v);

		cr_assert(b >= 0 && b < LATEHIST_N, "index %d of %lld", b, (long long)v);
		cr_assert(latehist_lo(b) <= v && v <= latehist_hi(b), "%lld not in bucket %d [%lld, %lld]",
			  (long long)v, b, (long long)latehist_lo(b), (long long)latehist_hi(b));
	}
	cr_assert_eq(latehist_index(-5), 0);
	cr_assert_eq(latehist_index(INT64_MAX), LATEHIST_N - 1);
}

Test(latehist, buckets_are_contiguous_and_at_most_an_eighth_wide)
{
	for (int b = 0; b + 1 < LATEHIST_N; b++) {
		cr_assert_eq(latehist_hi(b) + 1, latehist_lo(b + 1), "gap after bucket %d", b);
		cr_assert_eq(latehist_index(latehist_lo(b)), b);
		cr_assert_eq(latehist_index(latehist_hi(b)), b);
		if (latehist_lo(b) >= 8)
			cr_assert_leq((double)(latehist_hi(b) - latehist_lo(b) + 1) / (double)latehist_lo(b),
				      0.125 + 1e-12, "bucket %d", b);
	}
}

Test(latehist, quantiles_of_known_data)
{
	static struct latehist h;
	uint64_t c[LATEHIST_N];

	/* 990 ticks 40 us late, 9 at 1 ms, 1 at 50 ms. */
	for (int i = 0; i < 990; i++)
		latehist_add(&h, 40000);
	for (int i = 0; i < 9; i++)
		latehist_add(&h, 1000000);
	latehist_add(&h, 50000000);
	cr_assert_eq(latehist_copy(&h, c), 1000);
	cr_assert_eq(latehist_index(latehist_quantile(c, 0.5)), latehist_index(40000));
	cr_assert_eq(latehist_index(latehist_quantile(c, 0.99)), latehist_index(40000));
	cr_assert_eq(latehist_index(latehist_quantile(c, 0.995)), latehist_index(1000000));
	cr_assert_eq(latehist_index(latehist_quantile(c, 1.0)), latehist_index(50000000));
	cr_assert_geq(latehist_quantile(c, 0.5), 40000, "an upper bound, never below");
	cr_assert_gt(latehist_quantile(c, 1.0), 50000000, "the bucket's bound lies above");
	cr_assert_eq(latehist_quantile_max(c, 1.0, 50000000), 50000000, "capped at the max");
	cr_assert_eq(latehist_quantile_max(c, 0.5, 50000000), latehist_quantile(c, 0.5));
	memset(c, 0, sizeof(c));
	cr_assert_eq(latehist_quantile(c, 0.5), 0);
}
