/* SPDX-License-Identifier: MIT */
/*
 * The clock thread's tick statistics: how many ticks, how late, and the
 * rate simulated time actually ran at. A ticking mode records them on the
 * clock thread; status reads them on the main thread (all relaxed atomics:
 * statistics, nothing is ordered by them).
 */
#ifndef SHMCLOCKD_TICKS_H
#define SHMCLOCKD_TICKS_H

#include <stdatomic.h>
#include <stdint.h>

#include "latehist.h"

struct cJSON;

struct tick_stats {
	_Atomic uint64_t ticks, late_ticks;
	_Atomic int64_t worst_lateness_ns;
	struct latehist lateness;        /* how late each tick ran */
	/* The rate simulated time actually ran at over the last second of
	 * running (the fixed source may fall short of TimeScale); 0: unknown. */
	_Atomic double achieved_scale;
};

void tick_stats_init(struct tick_stats *t);
/* A tick that ran @late ns after its deadline (clock thread). */
void tick_stats_record(struct tick_stats *t, int64_t late);
/* @missed whole periods skipped for having fallen behind (clock thread). */
void tick_stats_skipped(struct tick_stats *t, uint64_t missed);
void tick_stats_set_achieved(struct tick_stats *t, double scale);
double tick_stats_achieved(const struct tick_stats *t);
/* Status: the "ticks" object into @st. */
void tick_stats_status(const struct tick_stats *t, struct cJSON *st);

#endif
