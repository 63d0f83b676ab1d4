/* SPDX-License-Identifier: MIT */
/*
 * <shmclock/time.h> — the reader-side time API, after ROS 2's Clock and Time
 * design (rcl/rclcpp), without its known problems: sleeps wake on pause,
 * resume, scale changes and steps without polling; a paused clock blocks a
 * sleeper instead of hanging it forever (timeouts, cancel); backward jumps
 * never stretch a relative sleep; time is never stale between messages,
 * because there are no messages.
 *
 * Time kinds are distinct struct types, so the compiler refuses to mix
 * them: a steady (CLOCK_MONOTONIC) time cannot be compared with or
 * subtracted from a simulation or system time, and a time is not a
 * duration. Convert explicitly (shmclock_sim_to_sys, shmclock_sim_to_steady).
 *
 * Errors are negative errnos as in <shmclock/shmclock.h>, plus:
 *   -ETIMEDOUT  the caller's real-time timeout passed
 *   -ECANCELED  shmclock_cancel() / shmclock_cancel_sleeps() woke the sleeper
 *   -EINTR      the clock jumped and the caller asked for SHMCLOCK_SLEEP_JUMP_ERROR
 */
#ifndef SHMCLOCK_TIME_H
#define SHMCLOCK_TIME_H

#ifndef __cplusplus
#include <stdatomic.h>
#endif
#include <stdbool.h>
#include <stdint.h>

#include <shmclock/shmclock.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ kinds */

typedef struct shmclock_sim_time { int64_t ns; } shmclock_sim_time_t;       /* simulation */
typedef struct shmclock_sys_time { int64_t ns; } shmclock_sys_time_t;       /* UNIX (CLOCK_REALTIME) */
typedef struct shmclock_steady_time { int64_t ns; } shmclock_steady_time_t; /* CLOCK_MONOTONIC */
typedef struct shmclock_duration { int64_t ns; } shmclock_duration_t;

/* A value of a kind: a compound literal in C, aggregate initialization in
 * C++ (which has no compound literals); <shmclock/shmclock.hpp> wraps all
 * of this in std::chrono types. */
#ifdef __cplusplus
#define SHMCLOCK__MAKE(type, v) (type{ (v) })
#else
#define SHMCLOCK__MAKE(type, v) ((type){ (v) })
#endif

#define SHMCLOCK_DURATION_INFINITE SHMCLOCK__MAKE(shmclock_duration_t, -1)

static inline shmclock_duration_t shmclock_nsec(int64_t ns) { return SHMCLOCK__MAKE(shmclock_duration_t, ns); }
static inline shmclock_duration_t shmclock_usec(int64_t us) { return SHMCLOCK__MAKE(shmclock_duration_t, us * 1000); }
static inline shmclock_duration_t shmclock_msec(int64_t ms) { return SHMCLOCK__MAKE(shmclock_duration_t, ms * 1000000); }
static inline shmclock_duration_t shmclock_sec(double s)
{
	return SHMCLOCK__MAKE(shmclock_duration_t, (int64_t)(s * 1e9));
}

/* Per kind: explicit construction, time + duration, time - time, compare. */
#define SHMCLOCK__KIND(kind)                                                                   \
	static inline shmclock_##kind##_time_t shmclock_##kind##_time(int64_t ns)              \
	{                                                                                      \
		return SHMCLOCK__MAKE(shmclock_##kind##_time_t, ns);                           \
	}                                                                                      \
	static inline shmclock_##kind##_time_t shmclock_##kind##_add(shmclock_##kind##_time_t t, \
								    shmclock_duration_t d)     \
	{                                                                                      \
		return SHMCLOCK__MAKE(shmclock_##kind##_time_t, t.ns + d.ns);                  \
	}                                                                                      \
	static inline shmclock_duration_t shmclock_##kind##_diff(shmclock_##kind##_time_t a,    \
								 shmclock_##kind##_time_t b)    \
	{                                                                                      \
		return SHMCLOCK__MAKE(shmclock_duration_t, a.ns - b.ns);                       \
	}                                                                                      \
	static inline int shmclock_##kind##_cmp(shmclock_##kind##_time_t a,                    \
						shmclock_##kind##_time_t b)                    \
	{                                                                                      \
		return (a.ns > b.ns) - (a.ns < b.ns);                                          \
	}
SHMCLOCK__KIND(sim)
SHMCLOCK__KIND(sys)
SHMCLOCK__KIND(steady)
#undef SHMCLOCK__KIND

/* ------------------------------------------------------------------ now */

/* shmclock_now() as a simulation time; 0 / -ESTALE / -ENODATA as there. */
int shmclock_sim_now(shmclock_t *clk, shmclock_sim_time_t *t);
shmclock_steady_time_t shmclock_steady_now(void);
shmclock_sys_time_t shmclock_sys_now(void);

/*
 * OSI: simulated-world UNIX time of simulation time @t, when the clock
 * carries the UNIX time of simulation zero (-EOPNOTSUPP when it does not).
 */
int shmclock_sim_to_sys(shmclock_t *clk, shmclock_sim_time_t t, shmclock_sys_time_t *out);

/*
 * The CLOCK_MONOTONIC instant at which the clock reaches @t under its
 * current rate (now if already reached). -EOVERFLOW while paused or
 * stepped: no instant is known; -ENODATA not started; -EAGAIN the writer
 * is stuck at the start of an update.
 */
int shmclock_sim_to_steady(shmclock_t *clk, shmclock_sim_time_t t, shmclock_steady_time_t *out);

/* ------------------------------------------------------------------ open */

/* Read system time (CLOCK_REALTIME at open, advanced by CLOCK_MONOTONIC)
 * when the named clock does not exist: ROS's use_sim_time=false case. */
#define SHMCLOCK_OPEN_FALLBACK_SYSTEM 0x1u
/* Start a watcher thread that delivers jump callbacks even when no thread
 * of this process reads the clock (see shmclock_jump_watch). */
#define SHMCLOCK_OPEN_WATCH_JUMPS 0x2u
/* Believe a segment whoever owns it. By default only segments owned by root,
 * this user, or a user named in $SHMCLOCK_TRUST (user names or uids,
 * separated by commas; "*": anyone) are opened; others give -EPERM, since
 * anyone can create a clock under a free name in /dev/shm and set any time.
 * Root is uid 0 of the initial user namespace: in a container with a user
 * namespace, the container's root is trusted only if named. An owner
 * outside this user namespace (the overflow uid: the host's root seen from
 * a rootless container) gives -EREMOTE; SHMCLOCK_TRUST=outside believes it
 * where this namespace maps no user to the overflow uid, so that nobody in
 * it could have made the file (doc/containers.md). */
#define SHMCLOCK_OPEN_TRUST_ANY_OWNER 0x4u
/* Reads never run or wait for jump callbacks, and none can be added
 * (-EINVAL). For bindings whose callbacks need a lock of their own (Python's
 * GIL): their reads must not wait for a callback that waits for that lock.
 * Such a binding runs its callbacks on a second handle's watcher thread. */
#define SHMCLOCK_OPEN_NO_CALLBACKS 0x8u

/* shmclock_open() with flags. @name NULL with FALLBACK_SYSTEM: system time. */
int shmclock_open_ex(const char *name, unsigned flags, shmclock_t **out);

/* True when @clk reads system time because its clock did not exist. */
bool shmclock_is_fallback(const shmclock_t *clk);

/*
 * Wait (real time, at most @timeout; SHMCLOCK_DURATION_INFINITE: forever)
 * until clock @name exists and has been initialized, then open it.
 * -ETIMEDOUT if it did not start in time.
 */
int shmclock_open_wait(const char *name, unsigned flags, shmclock_duration_t timeout,
		       shmclock_t **out);

/* Wait until an open clock has a value (an external source's first one). */
int shmclock_wait_started(shmclock_t *clk, shmclock_duration_t timeout);

/*
 * Change notification without polling: take a token, read what you need,
 * then wait for the next change (any commit: a new value of a stepped
 * source, a scale, a pause, a jump). Every process waiting is woken by the
 * writer's commit (a futex on the read-only page).
 *
 *	uint32_t tok = shmclock_change_token(clk);
 *	... shmclock_now(clk, &t) ...
 *	shmclock_wait_change(clk, tok, SHMCLOCK_DURATION_INFINITE);
 *
 * Returns 0 once the clock has changed since @token was taken (at once if
 * it already has), or -ETIMEDOUT after @timeout of real time.
 */
uint32_t shmclock_change_token(shmclock_t *clk);
int shmclock_wait_change(shmclock_t *clk, uint32_t token, shmclock_duration_t timeout);

/* ------------------------------------------------------------------ jumps */

enum shmclock_jump_kind {
	SHMCLOCK_JUMP_FORWARD = 1,
	SHMCLOCK_JUMP_BACKWARD = 2,
	SHMCLOCK_JUMP_CLOCK_CHANGE = 4, /* source changed, or the clock started */
};

/* Which jumps a callback wants (rcl_jump_threshold_t, with magnitudes). */
typedef struct shmclock_jump_threshold {
	bool on_clock_change;
	int64_t min_forward_ns;  /* > 0: forward jumps of at least this; 0: none */
	int64_t min_backward_ns; /* > 0: backward jumps of at least this size; 0: none */
} shmclock_jump_threshold_t;

typedef struct shmclock_jump {
	unsigned kind;           /* enum shmclock_jump_kind bits */
	int64_t delta_ns;        /* signed size of the jump (the last one if several) */
	uint64_t jump_epoch;     /* the clock's jump epoch after it */
	uint32_t jumps;          /* jumps since the last delivery (> 1: collapsed) */
	int source;              /* enum shmclock_source after it */
} shmclock_jump_t;

/* Called twice per matching jump: before=true, then before=false. */
typedef void (*shmclock_jump_cb)(const shmclock_jump_t *jump, bool before, void *user);

/*
 * Register a jump callback; *@id identifies it for removal. Safe from any
 * thread while others read (the registry is RCU-protected; reads take no
 * lock). Within a process, every pre-jump call (before=true) returns before
 * any thread's shmclock_now / sleep is given the new time; those threads
 * wait meanwhile. Callbacks run on the thread that first reads after the
 * jump, or on the watcher thread; they may read the clock and add or
 * remove callbacks.
 */
int shmclock_jump_callback_add(shmclock_t *clk, shmclock_jump_threshold_t threshold,
			       shmclock_jump_cb cb, void *user, uint64_t *id);
/* After it returns (outside a callback) @id's callback is not running and
 * will not run again. -ENOENT for an unknown id. */
int shmclock_jump_callback_remove(shmclock_t *clk, uint64_t id);

/*
 * Start / stop the watcher thread that delivers jumps nobody reads. Stopping
 * it from one of its own callbacks gives -EDEADLK (it cannot wait for
 * itself). shmclock_close() from a callback on the clock's watcher closes it
 * on a thread of its own once the callback has returned; from a callback run
 * by a thread that reads the clock it must not be called (that read is
 * still using the clock).
 *
 * fork(): a child goes on with the clocks its parent opened. Reads, sleeps
 * and callbacks work there as before and shmclock_close() is safe; a
 * callback may itself fork. The watcher starts again at the first read of
 * the clock in the child (not inside fork(), where POSIX allows no thread to
 * be started), or when shmclock_jump_watch(clk, true) is called there. A
 * thread of the parent that was inside a pre-jump callback at the fork does
 * not exist in the child: that jump is delivered again there (one inside a
 * post-jump callback: the rest of them are not run in the child).
 */
int shmclock_jump_watch(shmclock_t *clk, bool on);

/* ------------------------------------------------------------------ sleep */

/* A jump (set, backward advance, source change) ends the sleep with -EINTR.
 * Without it the sleep goes on: sleep_until keeps its absolute target;
 * sleep_for counts a backward jump as no time elapsed (rclcpp#2383), so its
 * target moves back by the jump, and a forward jump as time elapsed. */
#define SHMCLOCK_SLEEP_JUMP_ERROR 0x1u

/* A cancel token: one per sleeper or timer that must be woken on its own. */
typedef struct shmclock_cancel {
#ifdef __cplusplus
	int cancelled; /* the same bytes: only the library touches it, atomically */
#else
	_Atomic int cancelled;
#endif
} shmclock_cancel_t;

#define SHMCLOCK_CANCEL_INIT { 0 }

/*
 * Sleep until simulation time reaches @t. Wakes at the right moment across
 * pause, resume, scale changes and steps without polling: it waits on the
 * segment's change futex with the monotonic deadline the current mapping
 * gives, and re-evaluates on every change. While paused (or before the clock
 * starts) it blocks until a change, at most @timeout of real time
 * (SHMCLOCK_DURATION_INFINITE: no limit). @cancel may be NULL.
 * Returns 0 once reached, or -ETIMEDOUT, -ECANCELED, -EINTR.
 */
int shmclock_sleep_until_ex(shmclock_t *clk, shmclock_sim_time_t t, unsigned flags,
			    shmclock_duration_t timeout, shmclock_cancel_t *cancel);
int shmclock_sleep_for_ex(shmclock_t *clk, shmclock_duration_t d, unsigned flags,
			  shmclock_duration_t timeout, shmclock_cancel_t *cancel);
int shmclock_sleep_until(shmclock_t *clk, shmclock_sim_time_t t, unsigned flags);
int shmclock_sleep_for(shmclock_t *clk, shmclock_duration_t d, unsigned flags);

/* Wake the sleeper(s) of @cancel with -ECANCELED (sticky until reset): at
 * once, or within 50 ms when the cancel races a sleeper into its wait (a
 * reader cannot change the shared word sleepers wait on). */
void shmclock_cancel(shmclock_t *clk, shmclock_cancel_t *cancel);
void shmclock_cancel_reset(shmclock_cancel_t *cancel);
/* Wake every sleep on @clk that started before this call, with -ECANCELED
 * (rclcpp's Clock::cancel_sleep_or_wait). */
void shmclock_cancel_sleeps(shmclock_t *clk);

/* ------------------------------------------------------------------ rate */

typedef struct shmclock_rate {
	shmclock_t *clk;
	int64_t period_ns;
	int64_t next_ns;         /* next deadline, simulation ns, once scheduled */
	uint64_t epoch;          /* jump epoch the deadline belongs to */
	uint64_t missed_total;
	shmclock_cancel_t *cancel;
	bool scheduled;          /* next_ns is set (any value, 0 included) */
} shmclock_rate_t;

/* A fixed simulated period; the first rate_sleep ends one period from now. */
int shmclock_rate_init(shmclock_rate_t *r, shmclock_t *clk, shmclock_duration_t period);
/*
 * Sleep until the next period boundary. Missed boundaries (the caller took
 * longer than a period) are skipped and counted in *@missed (may be NULL);
 * a backward jump restarts the schedule from the new time.
 */
int shmclock_rate_sleep(shmclock_rate_t *r, uint64_t *missed);
void shmclock_rate_reset(shmclock_rate_t *r);

typedef struct shmclock_timer shmclock_timer_t;
typedef void (*shmclock_timer_cb)(shmclock_sim_time_t now, uint64_t missed, void *user);

/* Call @cb every @period of simulated time, on a thread of its own. */
int shmclock_timer_start(shmclock_t *clk, shmclock_duration_t period, shmclock_timer_cb cb,
			 void *user, shmclock_timer_t **out);
/* Stop and join (not from inside @cb). Returns how many times cb ran. */
uint64_t shmclock_timer_stop(shmclock_timer_t *timer);

#ifdef __cplusplus
}
#endif

#endif
