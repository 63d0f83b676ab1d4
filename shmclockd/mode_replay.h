/* SPDX-License-Identifier: MIT */
/*
 * The replay mode (mode.h), the replay source's (source_replay.c): a
 * recording's time function published again (doc/record.md). Recorded
 * CLOCK_MONOTONIC instants become this host's by one offset, so each
 * change takes effect exactly as long after the replay's start as it did
 * after the recording's, with the recorded simulated base, rate and mode:
 * readers see the recorded function to the nanosecond. Each change is
 * decided ahead (shmclock_writer_freeze_at and SHMCLOCK_FN_AHEAD, as a
 * follower host's): readers switch at its instant by themselves, however
 * late the clock thread runs. Changes closer together than the clock
 * thread can schedule them are applied late (never backwards) and counted.
 *
 * pause and resume act on the replay (the rest of the recording waits);
 * set T seeks: the replay jumps to where the recording first shows T and
 * goes on from there. scale and step are the recording's: refused.
 */
#ifndef SHMCLOCKD_MODE_REPLAY_H
#define SHMCLOCKD_MODE_REPLAY_H

#include <stddef.h>

#include "config.h"
#include "mode.h"

/* Loads @c->replay: 0, or -errno with a one-line @err (the file's name,
 * what is wrong, where). */
int mode_replay_create(const struct shmclockd_config *c, struct clock_mode **out, char *err,
		       size_t errlen);

#endif
