/* SPDX-License-Identifier: MIT */
/* `fixed` (AWSIM's `unity`): frame time. Each clock-thread tick advances
 * the clock by StepNs (default 1e9 / PublishHz, i.e. real time at scale 1);
 * TimeScale makes the ticks come faster or slower. Stepped between ticks. */
#include "source.h"

static int64_t fixed_step(const struct shmclockd_config *c)
{
	return c->step_ns > 0 ? c->step_ns : 1000000000 / c->hz;
}

static int fixed_start(shmclock_writer_t *w, const struct shmclockd_config *c)
{
	return shmclock_writer_advance(w, c->has_start ? c->start_ns : 0);
}

static void fixed_tick(shmclock_writer_t *w, const struct shmclockd_config *c, int64_t mono)
{
	shmclock_info_t in;

	(void)mono;
	shmclock_writer_info(w, &in);
	if (in.initialized && !in.paused)
		shmclock_writer_step(w, fixed_step(c));
}

static int64_t fixed_period(const struct shmclockd_config *c, double scale)
{
	double p = 1e9 / c->hz / scale;

	return p < 1000 ? 1000 : p > 3.6e12 ? 3600000000000 : (int64_t)p;
}

const struct source_ops source_fixed = {
	.name = "fixed",
	.alias = "unity",
	.id = SHMCLOCK_SOURCE_FIXED,
	.stepped = true,
	.scalable = true,
	.start = fixed_start,
	.tick = fixed_tick,
	.period = fixed_period,
};
