/* SPDX-License-Identifier: MIT */
/*
 * A follower that learns its leader's kind (mode.h, mode_follow.c):
 * TimeSource "leader" without Lockstep in the config. It follows as the
 * hosts mode does (mode_distribute.c) until it hears that its leader runs
 * lockstep; then, once and for good, it is a follower host of that clock
 * (mode_lockstep.c between hosts, with no participant count of its own):
 * its participants' segment appears, and they join as on any lockstep
 * clock. A follower that heard a plain leader first stays one.
 */
#ifndef SHMCLOCKD_MODE_FOLLOW_H
#define SHMCLOCKD_MODE_FOLLOW_H

#include <stdbool.h>
#include <stddef.h>

#include <shmclock/writer.h>

#include "config.h"
#include "mode.h"

struct ros2;
struct ros2_api;

/* Over the DDS link @r: 0, or -errno with a one-line message in @err. */
int mode_follow_create(shmclock_writer_t *w, const struct shmclockd_config *c, struct ros2 *r,
		       const struct ros2_api *api, struct clock_mode **out, char *err,
		       size_t errlen);
/* The hosts-mode follower inside (mode_distribute_id names it). */
struct clock_mode *mode_follow_distribute(struct clock_mode *m);
/* The lockstep follower host it became, or NULL (any thread). */
struct clock_mode *mode_follow_lockstep(struct clock_mode *m);
/* The eventfd the lockstep follower host tells its aborts on
 * (mode_lockstep_notify_fd), there from the start. */
int mode_follow_notify_fd(struct clock_mode *m);

#endif
