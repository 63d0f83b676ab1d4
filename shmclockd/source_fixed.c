/* SPDX-License-Identifier: MIT */
/*
 * `fixed` (AWSIM's `unity`): frame time. Frames of StepNs of simulated time
 * (default 1e9 / PublishHz, i.e. real time at scale 1) come PublishHz x
 * TimeScale times per real second; between frames the clock holds still.
 *
 * Frames are counted from the real time that passed, not from wake-ups: a
 * thread cannot wake a million times a second (scale 1e4 at 100 Hz), and a
 * wake-up that comes late must not lose the frames it owes. So each tick
 * publishes every frame due since the last one, as one step of whole
 * frames, and the clock thread wakes at most about a thousand times a
 * second for this source (or at PublishHz when that is higher).
 */
#include <math.h>

#include "source.h"

static int64_t fixed_step(const struct shmclockd_config *c)
{
	return c->step_ns > 0 ? c->step_ns : 1000000000 / c->hz;
}

/* The clock thread's own: one clock per daemon. */
static int64_t last_mono; /* 0: count from the next tick */
static double carry;      /* the fraction of a frame due at last_mono */

static int fixed_start(shmclock_writer_t *w, const struct shmclockd_config *c)
{
	last_mono = 0;
	return shmclock_writer_advance(w, c->has_start ? c->start_ns : 0);
}

static void fixed_tick(shmclock_writer_t *w, const struct shmclockd_config *c, int64_t mono)
{
	shmclock_info_t in;
	double due;
	int64_t n, step = fixed_step(c);

	shmclock_writer_info(w, &in);
	if (!in.initialized || in.paused) {
		last_mono = 0; /* resumed: frames come from the resume on */
		return;
	}
	if (!last_mono) {
		/* The first tick of a run is a frame, as it always was. */
		last_mono = mono;
		carry = 0;
		shmclock_writer_step(w, step);
		return;
	}
	due = (double)(mono - last_mono) * c->hz * in.scale / 1e9 + carry;
	last_mono = mono;
	n = (int64_t)floor(due);
	carry = due - (double)n;
	if (n <= 0)
		return;
	/* Saturating: a huge scale must not wrap the step. */
	shmclock_writer_step(w, n > INT64_MAX / step ? INT64_MAX : n * step);
}

static int64_t fixed_period(const struct shmclockd_config *c, double scale)
{
	double frame = 1e9 / c->hz / scale;
	double floor_ns = 1e9 / c->hz < 1e6 ? 1e9 / c->hz : 1e6;

	return frame < floor_ns ? (int64_t)floor_ns : frame > 3.6e12 ? 3600000000000 : (int64_t)frame;
}

const struct source_ops source_fixed_ops = {
	.scalable = true,
	.start = fixed_start,
	.tick = fixed_tick,
	.period = fixed_period,
};
