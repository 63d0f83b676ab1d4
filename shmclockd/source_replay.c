/* SPDX-License-Identifier: MIT */
/* `replay`: time is a recording's time function (Replay, --replay FILE;
 * doc/record.md), published again by mode_replay.c at the recording's pace:
 * the same pauses, rates, steps and jumps at the same simulated instants.
 * TimeScale, set and step belong to the recording; pause, resume and seek
 * act on the replay. */
#include "source.h"

static int replay_start(shmclock_writer_t *w, const struct shmclockd_config *c)
{
	(void)w;
	(void)c;
	return 0; /* the mode's start publishes the recording's first function */
}

const struct source_ops source_replay_ops = {
	.feed = FEED_NONE,
	.start = replay_start,
};
