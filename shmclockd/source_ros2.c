/* SPDX-License-Identifier: MIT */
/* `ros2`: time is the ROS 2 topic /clock, followed over DDS (ros2.c): each
 * sample is published as a stepped value, no extrapolation, TimeScale
 * ignored (as AWSIM's table says); a backward sample is a jump.
 * Uninitialized until the first sample, unless the config gives a
 * StartTime. */
#include "source.h"

static int ros2_start(shmclock_writer_t *w, const struct shmclockd_config *c)
{
	return c->has_start ? shmclock_writer_advance(w, c->start_ns) : 0;
}

const struct source_ops source_ros2_ops = {
	.feed = FEED_ROS2,
	.start = ros2_start,
};
