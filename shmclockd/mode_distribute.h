/* SPDX-License-Identifier: MIT */
/*
 * The clock mode between hosts (mode.h, mode_distribute.c): a leader
 * (Distribute.Publish) sends its time function, a follower (TimeSource
 * "leader") applies it at the same instant. Both tick as the plain mode.
 */
#ifndef SHMCLOCKD_MODE_DISTRIBUTE_H
#define SHMCLOCKD_MODE_DISTRIBUTE_H

#include <stdbool.h>

#include "config.h"
#include "mode.h"

struct ros2;
struct ros2_api;

/* A leader (cfg->dist_publish) or a follower (FEED_LEADER) over the DDS
 * link @r; NULL on no memory. */
struct clock_mode *mode_distribute_create(const struct shmclockd_config *cfg, struct ros2 *r,
					  const struct ros2_api *api);
/* Its id on the wire, unique per run (host/pid/start): a follower's names
 * the partition of its echoes (ros2_api.dist_follow). */
const char *mode_distribute_id(const struct clock_mode *m);
/* A follower's: it has heard a leader's function (clock thread). */
bool mode_distribute_following(const struct clock_mode *m);

#endif
