/* SPDX-License-Identifier: MIT */
/*
 * The plain clock mode (mode.h): the clock thread ticks at the source's
 * period (the fixed source steps, the system source follows UTC, the
 * heartbeat shows the writer alive) and publishes /clock at Ros2.PublishHz.
 * The distribute mode ticks the same way, with a hook of its own.
 */
#ifndef SHMCLOCKD_MODE_PLAIN_H
#define SHMCLOCKD_MODE_PLAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "mode.h"

struct mode_plain {
	struct clock_mode m;
	/* At each tick, after the source's (NULL: nothing). */
	void (*on_tick)(struct mode_plain *p, const struct clock_env *env, int64_t now);
	/* the rest: the clock thread's */
	bool dirty;                      /* the period may have changed */
	int64_t period, next;            /* real time between ticks; the next tick */
	int64_t pub_period, pub_next;    /* /clock: a rate in real time of its own */
	int64_t win_mono, win_sim;       /* the achieved scale's window */
	uint64_t win_epoch;
};

extern const struct clock_mode_ops mode_plain_ops;

/* A plain mode (NULL: no memory). */
struct clock_mode *mode_plain_create(void);

/* @p as a plain mode with @on_tick, for a mode built on it. */
void mode_plain_init(struct mode_plain *p,
		     void (*on_tick)(struct mode_plain *p, const struct clock_env *env, int64_t now));

#endif
