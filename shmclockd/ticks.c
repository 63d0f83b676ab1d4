/* SPDX-License-Identifier: MIT */
/* The clock thread's tick statistics (ticks.h). */
#include <cjson/cJSON.h>

#include "ticks.h"

void tick_stats_init(struct tick_stats *t)
{
	atomic_init(&t->ticks, 0);
	atomic_init(&t->late_ticks, 0);
	atomic_init(&t->worst_lateness_ns, 0);
	atomic_init(&t->achieved_scale, 0.0);
	for (int i = 0; i < LATEHIST_N; i++)
		atomic_init(&t->lateness.n[i], 0);
}

void tick_stats_record(struct tick_stats *t, int64_t late)
{
	/* Relaxed, all of them: statistics for status. */
	if (late > atomic_load_explicit(&t->worst_lateness_ns, memory_order_relaxed))
		atomic_store_explicit(&t->worst_lateness_ns, late, memory_order_relaxed);
	latehist_add(&t->lateness, late);
	atomic_fetch_add_explicit(&t->ticks, 1, memory_order_relaxed);
}

void tick_stats_skipped(struct tick_stats *t, uint64_t missed)
{
	atomic_fetch_add_explicit(&t->late_ticks, missed, memory_order_relaxed);
}

void tick_stats_set_achieved(struct tick_stats *t, double scale)
{
	atomic_store_explicit(&t->achieved_scale, scale, memory_order_relaxed);
}

double tick_stats_achieved(const struct tick_stats *t)
{
	return atomic_load_explicit(&t->achieved_scale, memory_order_relaxed);
}

/* Counts, lateness quantiles, and the non-empty buckets ([lowest ns,
 * count] pairs) so a client can diff two replies. */
void tick_stats_status(const struct tick_stats *ts, cJSON *st)
{
	uint64_t counts[LATEHIST_N];
	cJSON *t = cJSON_CreateObject(), *hist = cJSON_CreateArray();
	int64_t worst;

	latehist_copy(&ts->lateness, counts);
	/* Relaxed: statistics, nothing is ordered by them. */
	cJSON_AddNumberToObject(t, "count",
				(double)atomic_load_explicit(&ts->ticks, memory_order_relaxed));
	cJSON_AddNumberToObject(t, "skipped",
				(double)atomic_load_explicit(&ts->late_ticks, memory_order_relaxed));
	/* A quantile is its bucket's upper bound, which may exceed the exact
	 * maximum in that bucket: capped there (status once showed p99 1.835 ms
	 * above a max of 1.706 ms). */
	worst = atomic_load_explicit(&ts->worst_lateness_ns, memory_order_relaxed);
	cJSON_AddNumberToObject(t, "late_p50_ns", (double)latehist_quantile_max(counts, 0.5, worst));
	cJSON_AddNumberToObject(t, "late_p99_ns", (double)latehist_quantile_max(counts, 0.99, worst));
	cJSON_AddNumberToObject(t, "late_p999_ns",
				(double)latehist_quantile_max(counts, 0.999, worst));
	cJSON_AddNumberToObject(t, "late_max_ns", (double)worst);
	for (int i = 0; i < LATEHIST_N; i++) {
		if (counts[i]) {
			cJSON *pair = cJSON_CreateArray();

			cJSON_AddItemToArray(pair, cJSON_CreateNumber((double)latehist_lo(i)));
			cJSON_AddItemToArray(pair, cJSON_CreateNumber((double)counts[i]));
			cJSON_AddItemToArray(hist, pair);
		}
	}
	cJSON_AddItemToObject(t, "late_hist", hist);
	cJSON_AddItemToObject(st, "ticks", t);
}