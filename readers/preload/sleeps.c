/* SPDX-License-Identifier: MIT */
/*
 * Sleeps: nanosleep, clock_nanosleep, usleep, sleep. They wait on the
 * clock's change futex with a signal-aware sleep (no slices: nothing else
 * can end them), so a signal handler ends them with EINTR as the real ones
 * do. Relative sleeps and absolute ones on a monotonic clock end on the
 * jump-free timeline, absolute CLOCK_REALTIME ones on the simulation
 * timeline (preload.h).
 *
 * A handler that runs between two of those waits (a commit woke the
 * sleeper) ends the sleep too: signals.c counts them.
 *
 * They stay cancellation points, as the real ones are: the futex wait is
 * not one, so the wait runs with asynchronous cancellation, which is safe
 * there (the shim's handle takes no lock, allocates nothing, changes
 * nothing a cancel could leave half done).
 */
#include "preload.h"

#include <pthread.h>

static int (*r_nanosleep)(const struct timespec *, struct timespec *);
static int (*r_clock_nanosleep)(clockid_t, int, const struct timespec *, struct timespec *);
static int (*r_usleep)(useconds_t);
static unsigned (*r_sleep)(unsigned);

void shim_resolve_sleeps(void)
{
	RESOLVE(r_nanosleep, "nanosleep");
	RESOLVE(r_clock_nanosleep, "clock_nanosleep");
	RESOLVE(r_usleep, "usleep");
	RESOLVE(r_sleep, "sleep");
}

/*
 * Sleep on simulated clock @id, as clock_nanosleep() does: an absolute
 * target in @id's values, or a relative one. Returns 0 or an error number;
 * EINTR when a signal handler ran, with *rem set for relative sleeps.
 */
static int sim_nanosleep(clockid_t id, bool abs, const struct timespec *req, struct timespec *rem)
{
	const unsigned sig = SHMCLOCK__SLEEP_SIGNAL;
	int64_t start = 0, req_ns;
	unsigned long outer;
	int r, cancel_type;

	if (!req || req->tv_nsec < 0 || req->tv_nsec >= NS || (!abs && req->tv_sec < 0))
		return EINVAL;
	/* First: a handler from here on ends the sleep. */
	shim_sig_mark(&outer);
	req_ns = ts_to_ns(req);
	/* Acts on a cancel pending already (when enabled), and on one that
	 * comes during the sleep. */
	pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &cancel_type);
	if (abs && is_rt(id)) {
		r = shmclock_sleep_until_ex(shim_clk, (shmclock_sim_time_t){ req_ns - sim_offset(id) },
					    sig, SHMCLOCK_DURATION_INFINITE, NULL);
	} else if (abs) {
		r = shmclock_sleep_until_ex(shim_clk, (shmclock_sim_time_t){ req_ns },
					    sig | SHMCLOCK__SLEEP_MONO, SHMCLOCK_DURATION_INFINITE, NULL);
	} else {
		start = mono_now_or(0);
		r = shmclock_sleep_for_ex(shim_clk, shmclock_nsec(req_ns), sig | SHMCLOCK__SLEEP_MONO,
					  SHMCLOCK_DURATION_INFINITE, NULL);
	}
	shim_sig_unmark(&outer);
	pthread_setcanceltype(cancel_type, NULL);
	if (r == -EINTR) {
		if (!abs && rem) {
			int64_t slept = mono_now_or(start) - start;

			ns_to_ts(req_ns - slept > 0 ? req_ns - slept : 0, rem);
		}
		return EINTR;
	}
	return r ? -r : 0;
}

EXPORT int clock_nanosleep(clockid_t id, int flags, const struct timespec *req,
			   struct timespec *rem)
{
	if (!sim_on(id))
		return r_clock_nanosleep(id, flags, req, rem);
	return sim_nanosleep(id, flags & TIMER_ABSTIME, req, rem);
}

EXPORT int nanosleep(const struct timespec *req, struct timespec *rem)
{
	int r;

	if (!sim_on(CLOCK_MONOTONIC))
		return r_nanosleep(req, rem);
	if (bad_ts(req)) {
		errno = EINVAL;
		return -1;
	}
	r = sim_nanosleep(CLOCK_MONOTONIC, false, req, rem);
	if (r) {
		errno = r;
		return -1;
	}
	return 0;
}

EXPORT int usleep(useconds_t us)
{
	struct timespec ts = { (time_t)(us / 1000000), (long)(us % 1000000) * 1000 };

	if (!sim_on(CLOCK_MONOTONIC))
		return r_usleep(us);
	return nanosleep(&ts, NULL);
}

EXPORT unsigned sleep(unsigned s)
{
	struct timespec ts = { (time_t)s, 0 }, rem = { 0, 0 };

	if (!sim_on(CLOCK_MONOTONIC))
		return r_sleep(s);
	if (nanosleep(&ts, &rem) == 0)
		return 0;
	return (unsigned)rem.tv_sec + (rem.tv_nsec > 0);
}
