/* SPDX-License-Identifier: MIT */
/* `simulation`: starts at StartTime (default 0), runs with CLOCK_MONOTONIC
 * times TimeScale. Continuous: readers extrapolate, ticks write nothing. */
#include "source.h"

static int simulation_start(shmclock_writer_t *w, const struct shmclockd_config *c)
{
	return shmclock_writer_set_time(w, c->has_start ? c->start_ns : 0);
}

const struct source_ops source_simulation_ops = {
	.scalable = true,
	.start = simulation_start,
};
