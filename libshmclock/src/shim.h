/* SPDX-License-Identifier: MIT */
/*
 * The library's private entry points for the preload shim
 * (readers/preload), and nobody else: not exported from libshmclock.so
 * (the shim links its own copy of the library), never a promise to other
 * callers. time.c implements them.
 */
#ifndef SHMCLOCK_SHIM_H
#define SHMCLOCK_SHIM_H

#include <stdbool.h>
#include <stdint.h>

struct shmclock;

/* Sleep flag for the preload shim (not public): a signal handler run
 * during the sleep ends it with -EINTR, as nanosleep does. The shim never
 * sets SHMCLOCK_SLEEP_JUMP_ERROR, so -EINTR cannot mean a jump there. */
#define SHMCLOCK__SLEEP_SIGNAL 0x80000000u
/* Sleep flag for the preload shim: the target (absolute or relative) is on
 * the jump-free timeline (shmclock_now_monotonic()), which no jump moves. */
#define SHMCLOCK__SLEEP_MONO 0x40000000u

/*
 * The wait of a SHMCLOCK__SLEEP_SIGNAL sleep, when the shim sets it (NULL:
 * shmclock__futex_wait_until). As that one, and -EINTR once a signal
 * handler ran on this thread since the sleep began, wherever it ran: in
 * the wait, or between two waits (after a commit woke the sleeper), where
 * the futex wait would never hear of it (readers/preload/signals.c).
 */
extern int (*shmclock__signal_wait)(const _Atomic uint32_t *word, uint32_t val,
				    int64_t deadline_mono);

/*
 * For the preload shim's waits in real-time slices: where the timeline
 * stands (@mono_tl: the jump-free one, else the simulation time) and the
 * CLOCK_MONOTONIC instant at which the clock's current function reaches
 * @target on it. Returns 0 reached (*now set); 1 not yet, *now and *due
 * set; 2 not yet and no running function to say when (paused, stepped, not
 * started: wait for a change); -EAGAIN the writer is stuck mid-update.
 */
int shmclock__plan(struct shmclock *clk, bool mono_tl, int64_t target, int64_t *now,
		   int64_t *due);

/*
 * CLOCK_MONOTONIC of the instant of an update open now and still ahead,
 * else INT64_MAX: a function decided for it takes effect there by itself,
 * with no change to wake anyone, so what was planned is planned again there.
 */
int64_t shmclock__replan_at(struct shmclock *clk);

#endif
