/* SPDX-License-Identifier: MIT */
/* `leader`: time is a leader shmclockd's time function, received over DDS
 * from another host (mode_distribute.c, "Several hosts" in the README) and
 * committed exactly, translated to this host's CLOCK_MONOTONIC.
 * Uninitialized until the first function arrives; TimeScale, pause and
 * the other changes belong to the leader. */
#include "source.h"

static int leader_start(shmclock_writer_t *w, const struct shmclockd_config *c)
{
	(void)w;
	(void)c;
	return 0;
}

const struct source_ops source_leader_ops = {
	.feed = FEED_LEADER,
	.start = leader_start,
};
