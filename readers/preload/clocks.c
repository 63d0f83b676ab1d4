/* SPDX-License-Identifier: MIT */
/* Reading the clocks: clock_gettime, gettimeofday, time, timespec_get,
 * clock_getres. */
#include "preload.h"

#include <sys/time.h>

int (*shim_real_gettime)(clockid_t, struct timespec *);
static int (*r_gettimeofday)(struct timeval *, void *);
static time_t (*r_time)(time_t *);
static int (*r_timespec_get)(struct timespec *, int);
static int (*r_clock_getres)(clockid_t, struct timespec *);

void shim_resolve_clocks(void)
{
	RESOLVE(shim_real_gettime, "clock_gettime");
	RESOLVE(r_gettimeofday, "gettimeofday");
	RESOLVE(r_time, "time");
	RESOLVE(r_timespec_get, "timespec_get");
	RESOLVE(r_clock_getres, "clock_getres");
	/* Without a vDSO the library reads libc's clock_gettime, which is
	 * ours here: point it at the real one. */
	if (shmclock__gettime == clock_gettime)
		shmclock__gettime = shim_real_gettime;
}

/*
 * The last whole second clock_gettime answered, for each group (the
 * realtime group, the jump-free one): nearly every read falls in the same
 * second as the one before, and a subtraction then replaces the division,
 * the longest step after the clock reading (the vDSO's own trick: it
 * counts on from its last tick's second). Relaxed: any second stored here
 * is a base the check proves or refutes; only a second >= 0 is stored, so
 * that nothing overflows.
 */
static _Atomic int64_t last_sec[2];

static inline void ts_from_ns(int64_t ns, struct timespec *ts, _Atomic int64_t *hint)
{
	int64_t s = atomic_load_explicit(hint, memory_order_relaxed);
	uint64_t r = (uint64_t)ns - (uint64_t)(s * NS);

	if (__builtin_expect(r < (uint64_t)NS, 1)) {
		ts->tv_sec = (time_t)s;
		ts->tv_nsec = (long)r;
		return;
	}
	ns_to_ts(ns, ts);
	if (ns >= 0)
		atomic_store_explicit(hint, (int64_t)ts->tv_sec, memory_order_relaxed);
}

EXPORT int clock_gettime(clockid_t id, struct timespec *ts)
{
	int64_t ns;

	if (sim_on(id) && sim_read(id, &ns)) {
		ts_from_ns(ns, ts, &last_sec[is_rt(id)]);
		return 0;
	}
	return shim_real_gettime(id, ts);
}

/* glibc declares tv nonnull, yet its gettimeofday accepts NULL; so do we. */
#pragma GCC diagnostic ignored "-Wnonnull-compare"
EXPORT int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
	struct timespec ts;
	int64_t ns;

	if (!sim_on(CLOCK_REALTIME) || !sim_read(CLOCK_REALTIME, &ns))
		return r_gettimeofday(tv, tz);
	if (tz)
		r_gettimeofday(NULL, tz); /* obsolete; the real one fills it */
	if (tv) {
		ns_to_ts(ns, &ts);
		tv->tv_sec = ts.tv_sec;
		tv->tv_usec = (suseconds_t)(ts.tv_nsec / 1000);
	}
	return 0;
}

EXPORT time_t time(time_t *t)
{
	struct timespec ts;
	int64_t ns;

	if (!sim_on(CLOCK_REALTIME) || !sim_read(CLOCK_REALTIME, &ns))
		return r_time(t);
	ns_to_ts(ns, &ts);
	if (t)
		*t = ts.tv_sec;
	return ts.tv_sec;
}

EXPORT int timespec_get(struct timespec *ts, int base)
{
	int64_t ns;

	if (base != TIME_UTC || !sim_on(CLOCK_REALTIME) || !sim_read(CLOCK_REALTIME, &ns))
		return r_timespec_get(ts, base);
	ns_to_ts(ns, ts);
	return base;
}

/* A simulated clock is a nanosecond count, the coarse ones too (they read
 * it in full): 1 ns, as the vDSO's function under the shim and the
 * supervisor say. */
EXPORT int clock_getres(clockid_t id, struct timespec *res)
{
	if (!sim_on(id))
		return r_clock_getres(id, res);
	if (res) {
		res->tv_sec = 0;
		res->tv_nsec = 1;
	}
	return 0;
}
