/* SPDX-License-Identifier: MIT */
/*
 * libshmclock-preload.so: simulated time for programs that know nothing of
 * shmclock. Loaded with LD_PRELOAD (shmclock-run does it), it answers the
 * time functions from a live shmclock and makes sleeps and timeouts wait in
 * simulated time, so the program follows pause, scale, steps and jumps.
 *
 * Environment (read once, at the first call):
 *   SHMCLOCK_NAME    the clock (default "default")
 *   SHMCLOCK_CLOCKS  which clocks follow it: a comma list of realtime,
 *                    monotonic, boottime, or "all" / "none" (default all)
 *   SHMCLOCK_QUIET   1: do not say on stderr that the real clocks are used
 *
 * realtime: CLOCK_REALTIME(_COARSE), gettimeofday, time, timespec_get show
 *   the simulated world's UNIX time (shmclock_now_unix()).
 * monotonic: CLOCK_MONOTONIC(_RAW, _COARSE) read the simulation time.
 * boottime: CLOCK_BOOTTIME(_ALARM) read the simulation time.
 * CPU-time clocks are never touched.
 *
 * The hot path (clock_gettime and friends) is one atomic load of the state
 * plus a shmclock read: no allocation, no lock, no system call, and it is
 * async-signal-safe because the handle never runs jump callbacks.
 *
 * Sleeps (nanosleep, clock_nanosleep, usleep, sleep) wait on the clock's
 * change futex with a signal-aware sleep, so a signal handler ends them with
 * EINTR as the real ones do. Timeouts of poll, ppoll, select and the
 * pthread condition waits are waited in real-time slices of at most
 * SLICE_NS, re-planned from the clock each time, so that a pause or a new
 * scale is followed within a slice. POSIX timers, alarm() and
 * setitimer(ITIMER_REAL) on a simulated clock are real CLOCK_MONOTONIC
 * timers that a helper thread re-arms on every change of the clock; the
 * kernel still delivers them, so sigevent semantics stay intact.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <shmclock/shmclock.h>
#include <shmclock/time.h>

#include "clock.h" /* the internal sleep flag */
#include "clocks.h"

#define EXPORT __attribute__((visibility("default")))
#define NS 1000000000LL
/* Longest real-time slice of a poll/select/condvar timeout (see above). */
#define SLICE_NS 20000000LL
#define MAX_TIMERS 64

#define G_REALTIME SHMCLOCK_G_REALTIME

enum { ST_UNINIT, ST_INIT, ST_SIM, ST_REAL };

static _Atomic int state;
static shmclock_t *clk;
static unsigned sim_mask;
static bool quiet;
static __thread bool in_init;

/* The functions we stand in front of. */
static int (*r_clock_gettime)(clockid_t, struct timespec *);
static int (*r_gettimeofday)(struct timeval *, void *);
static time_t (*r_time)(time_t *);
static int (*r_timespec_get)(struct timespec *, int);
static int (*r_nanosleep)(const struct timespec *, struct timespec *);
static int (*r_clock_nanosleep)(clockid_t, int, const struct timespec *, struct timespec *);
static int (*r_usleep)(useconds_t);
static unsigned (*r_sleep)(unsigned);
static int (*r_poll)(struct pollfd *, nfds_t, int);
static int (*r_ppoll)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
static int (*r_select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
static int (*r_cond_timedwait)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
static int (*r_cond_clockwait)(pthread_cond_t *, pthread_mutex_t *, clockid_t,
			       const struct timespec *);
static int (*r_timer_create)(clockid_t, struct sigevent *, timer_t *);
static int (*r_timer_settime)(timer_t, int, const struct itimerspec *, struct itimerspec *);
static int (*r_timer_gettime)(timer_t, struct itimerspec *);
static int (*r_timer_delete)(timer_t);
static unsigned (*r_alarm)(unsigned);
static int (*r_setitimer)(__itimer_which_t, const struct itimerval *, struct itimerval *);
static int (*r_getitimer)(__itimer_which_t, struct itimerval *);

/* ------------------------------------------------------------ set-up */

/* One line on stderr (write(2): no stdio state touched), unless quiet. */
__attribute__((format(printf, 1, 2))) static void say(const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	int n;

	if (quiet)
		return;
	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* Cut short (a long clock name, say): still one whole line. */
	if (n >= (int)sizeof(msg))
		memcpy(msg + sizeof(msg) - 5, "...\n", 5);
	if (n > 0)
		(void)!write(2, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
}

static void *real(const char *sym)
{
	void *f = dlsym(RTLD_NEXT, sym);

	if (!f) {
		say("shmclock-preload: %s not found in libc\n", sym);
		abort();
	}
	return f;
}

/* POSIX allows the object-to-function pointer conversion dlsym needs. */
#define RESOLVE(ptr, sym)                     \
	do {                                  \
		void *f_ = real(sym);         \
		memcpy(&(ptr), &f_, sizeof(f_)); \
	} while (0)

static void resolve_all(void)
{
	RESOLVE(r_clock_gettime, "clock_gettime");
	RESOLVE(r_gettimeofday, "gettimeofday");
	RESOLVE(r_time, "time");
	RESOLVE(r_timespec_get, "timespec_get");
	RESOLVE(r_nanosleep, "nanosleep");
	RESOLVE(r_clock_nanosleep, "clock_nanosleep");
	RESOLVE(r_usleep, "usleep");
	RESOLVE(r_sleep, "sleep");
	RESOLVE(r_poll, "poll");
	RESOLVE(r_ppoll, "ppoll");
	RESOLVE(r_select, "select");
	RESOLVE(r_cond_timedwait, "pthread_cond_timedwait");
	RESOLVE(r_cond_clockwait, "pthread_cond_clockwait");
	RESOLVE(r_timer_create, "timer_create");
	RESOLVE(r_timer_settime, "timer_settime");
	RESOLVE(r_timer_gettime, "timer_gettime");
	RESOLVE(r_timer_delete, "timer_delete");
	RESOLVE(r_alarm, "alarm");
	RESOLVE(r_setitimer, "setitimer");
	RESOLVE(r_getitimer, "getitimer");
	/* Without a vDSO the library reads libc's clock_gettime, which is
	 * ours here: point it at the real one. */
	if (shmclock__gettime == clock_gettime)
		shmclock__gettime = r_clock_gettime;
}

static void child_after_fork(void);
static void wrefs_probe(void);

static int do_init(void)
{
	const char *name = getenv("SHMCLOCK_NAME");
	const char *q = getenv("SHMCLOCK_QUIET");
	shmclock_info_t info;
	int r;

	quiet = q && *q && strcmp(q, "0");
	resolve_all();
	if (!name || !*name)
		name = "default";
	{
		const char *bad = NULL;
		size_t badlen = 0;

		if (shmclock_parse_clocks(getenv("SHMCLOCK_CLOCKS"), &sim_mask, &bad, &badlen))
			say("shmclock-preload: SHMCLOCK_CLOCKS: unknown clock '%.*s' ignored\n",
			    (int)(badlen < 31 ? badlen : 31), bad);
	}
	if (!sim_mask)
		return ST_REAL;
	/* No callbacks, ever: a read only records a jump's key, with no lock,
	 * so reads stay async-signal-safe. */
	r = shmclock_open_ex(name, SHMCLOCK_OPEN_NO_CALLBACKS, &clk);
	if (r) {
		say("shmclock-preload: clock '%s': %s; using the real clocks\n", name,
		    shmclock_strerror(r));
		return ST_REAL;
	}
	r = shmclock_info(clk, &info);
	if (r || !info.initialized || !info.writer_alive) {
		say("shmclock-preload: clock '%s' %s; using the real clocks\n", name,
		    r ? shmclock_strerror(r)
		      : !info.initialized ? "has not started" : "has no live writer");
		shmclock_close(clk);
		clk = NULL;
		return ST_REAL;
	}
	wrefs_probe();
	pthread_atfork(NULL, NULL, child_after_fork);
	return ST_SIM;
}

static __attribute__((noinline)) bool init_slow(void)
{
	int expect = ST_UNINIT;

	/* Our own set-up reading the time (dlsym, the library): real clocks.
	 * The pointers are resolved first thing in do_init. */
	if (in_init)
		return false;
	if (atomic_compare_exchange_strong_explicit(&state, &expect, ST_INIT, memory_order_acquire,
						    memory_order_acquire)) {
		int st;

		in_init = true;
		st = do_init();
		in_init = false;
		/* Release pairs with the acquire loads in sim_on(): whoever
		 * sees ST_SIM sees clk, sim_mask and the real pointers. */
		atomic_store_explicit(&state, st, memory_order_release);
		return st == ST_SIM;
	}
	while ((expect = atomic_load_explicit(&state, memory_order_acquire)) == ST_INIT)
		sched_yield();
	return expect == ST_SIM;
}

/* Whether @id is simulated (initialising on the first call). */
static inline bool sim_on(clockid_t id)
{
	int st = atomic_load_explicit(&state, memory_order_acquire);

	if (__builtin_expect(st < ST_SIM, 0) && !init_slow())
		return false;
	if (st == ST_REAL)
		return false;
	return (unsigned)id < 32 && (sim_mask & (1u << id));
}

static __attribute__((constructor)) void shim_ctor(void)
{
	(void)sim_on(CLOCK_REALTIME);
}

/* ------------------------------------------------------------ reading */

static inline bool is_rt(clockid_t id)
{
	return (G_REALTIME >> id) & 1;
}

static void ns_to_ts(int64_t ns, struct timespec *ts)
{
	int64_t s = ns / NS, r = ns % NS;

	if (r < 0) {
		r += NS;
		s--;
	}
	ts->tv_sec = (time_t)s;
	ts->tv_nsec = (long)r;
}

/* Seconds and a fraction as ns, saturating: a timeout of {LONG_MAX, 0}
 * (forever, to most programs) must not wrap into the past. */
static inline int64_t sec_to_ns(int64_t sec, int64_t frac_ns)
{
	int64_t s;

	if (__builtin_mul_overflow(sec, (int64_t)NS, &s))
		return sec > 0 ? INT64_MAX : INT64_MIN;
	return shmclock__sat_add(s, frac_ns);
}

static inline int64_t ts_to_ns(const struct timespec *ts)
{
	return sec_to_ns((int64_t)ts->tv_sec, ts->tv_nsec);
}

static _Atomic bool warned_stuck;

/*
 * Simulated time of clock @id. Never the real clock once the program has
 * seen simulated time: the two differ by anything up to the machine's
 * uptime. A writer stopped in the middle of an update does not delay the
 * read (the library returns the last committed time); one stopped within
 * the first instructions of an update makes the library wait up to a
 * second and answer -EAGAIN, and then we ask again: a clock that is being
 * set blocks its readers, it never lies to them.
 */
static inline bool sim_read(clockid_t id, int64_t *ns)
{
	for (;;) {
		int r = is_rt(id) ? shmclock_now_unix(clk, ns) : shmclock_now(clk, ns);

		if (__builtin_expect(r == 0 || r == -ESTALE, 1))
			return true;
		if (!atomic_exchange_explicit(&warned_stuck, true, memory_order_relaxed))
			say("shmclock-preload: clock '%s': %s; waiting for it\n", shmclock_name(clk),
			    shmclock_strerror(r));
		if (r != -EAGAIN)
			return false; /* -ENODATA cannot follow a start; kept safe */
	}
}

EXPORT int clock_gettime(clockid_t id, struct timespec *ts)
{
	int64_t ns;

	if (sim_on(id) && sim_read(id, &ns)) {
		ns_to_ts(ns, ts);
		return 0;
	}
	return r_clock_gettime(id, ts);
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

/* ------------------------------------------------------------ sleeping */

/* The simulation time, or @dflt when the clock cannot answer. */
static int64_t sim_now_or(int64_t dflt)
{
	int64_t now = dflt;
	int r = shmclock_now(clk, &now);

	return r == 0 || r == -ESTALE ? now : dflt;
}

/* The offset from clock @id's values to simulation time (UnixTimeAtZero
 * for the realtime group, 0 for the others). */
static int64_t sim_offset(clockid_t id)
{
	shmclock_info_t i;

	if (!is_rt(id) || shmclock_info(clk, &i) || !i.has_unix_at_zero)
		return 0;
	return i.unix_at_zero_ns;
}

static bool bad_ts(const struct timespec *ts)
{
	return !ts || ts->tv_nsec < 0 || ts->tv_nsec >= NS || ts->tv_sec < 0;
}

/*
 * Sleep on simulated clock @id, as clock_nanosleep() does: an absolute
 * target in @id's values, or a relative one. Returns 0 or an error number;
 * EINTR when a signal handler ran, with *rem set for relative sleeps.
 */
static int sim_nanosleep(clockid_t id, bool abs, const struct timespec *req, struct timespec *rem)
{
	int64_t start = 0, req_ns, target;
	int r;

	if (!req || req->tv_nsec < 0 || req->tv_nsec >= NS || (!abs && req->tv_sec < 0))
		return EINVAL;
	req_ns = ts_to_ns(req);
	if (abs) {
		target = req_ns - sim_offset(id);
		r = shmclock_sleep_until_ex(clk, (shmclock_sim_time_t){ target }, SHMCLOCK__SLEEP_SIGNAL,
					    SHMCLOCK_DURATION_INFINITE, NULL);
	} else {
		start = sim_now_or(0);
		r = shmclock_sleep_for_ex(clk, shmclock_nsec(req_ns), SHMCLOCK__SLEEP_SIGNAL,
					  SHMCLOCK_DURATION_INFINITE, NULL);
	}
	if (r == -EINTR) {
		if (!abs && rem) {
			int64_t now = sim_now_or(start);

			ns_to_ts(req_ns - (now - start) > 0 ? req_ns - (now - start) : 0, rem);
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

/* ------------------------------------------------------------ timeouts */

/* Real monotonic time, never ours. */
static int64_t real_mono(void)
{
	struct timespec ts;

	r_clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts_to_ns(&ts);
}

/*
 * The next real-time slice (ns) of a wait for simulated time @target: the
 * time the clock's current mapping needs to reach it, at most SLICE_NS
 * (SLICE_NS while paused or stepped). 0 once reached.
 */
static int64_t slice_to(int64_t target)
{
	shmclock_steady_time_t due;
	int64_t now, left;
	int r;

	now = sim_now_or(INT64_MIN);
	if (now >= target)
		return 0;
	r = shmclock_sim_to_steady(clk, (shmclock_sim_time_t){ target }, &due);
	if (r)
		return SLICE_NS; /* paused, stepped, or not answering: look again */
	left = due.ns - real_mono();
	return left <= 0 ? 1 : left < SLICE_NS ? left : SLICE_NS;
}

EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *tmo, const sigset_t *mask)
{
	int64_t target;

	if (!tmo || !sim_on(CLOCK_MONOTONIC) || bad_ts(tmo))
		return r_ppoll(fds, n, tmo, mask);
	target = shmclock__sat_add(sim_now_or(0), ts_to_ns(tmo));
	for (;;) {
		int64_t sl = slice_to(target);
		struct timespec ts;
		int r;

		ns_to_ts(sl, &ts);
		r = r_ppoll(fds, n, &ts, mask);
		if (r != 0 || sl == 0)
			return r;
	}
}

EXPORT int poll(struct pollfd *fds, nfds_t n, int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	if (ms <= 0 || !sim_on(CLOCK_MONOTONIC))
		return r_poll(fds, n, ms);
	return ppoll(fds, n, &ts, NULL);
}

EXPORT int select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tv)
{
	fd_set r0, w0, e0;
	int64_t target;

	if (!tv || !sim_on(CLOCK_MONOTONIC) || tv->tv_sec < 0 || tv->tv_usec < 0)
		return r_select(nfds, rd, wr, ex, tv);
	target = shmclock__sat_add(sim_now_or(0), sec_to_ns((int64_t)tv->tv_sec, (int64_t)tv->tv_usec * 1000));
	/* select() rewrites the sets: each slice starts from the caller's. */
	if (rd)
		r0 = *rd;
	if (wr)
		w0 = *wr;
	if (ex)
		e0 = *ex;
	for (;;) {
		int64_t sl = slice_to(target);
		struct timeval t = { (time_t)(sl / NS), (suseconds_t)((sl % NS + 999) / 1000) };
		int r = r_select(nfds, rd, wr, ex, &t);

		if (r != 0 || sl == 0) {
			int64_t left = target - sim_now_or(target);

			/* Linux reports the time not slept. */
			left = left > 0 ? left : 0;
			tv->tv_sec = (time_t)(left / NS);
			tv->tv_usec = (suseconds_t)(left % NS / 1000);
			return r;
		}
		if (rd)
			*rd = r0;
		if (wr)
			*wr = w0;
		if (ex)
			*ex = e0;
	}
}

/* A condition wait until simulated @target, in slices on the real clock
 * @rclk (the condvar's own clock). */
static int cond_wait_sim(pthread_cond_t *c, pthread_mutex_t *m, clockid_t rclk, int64_t target)
{
	for (;;) {
		int64_t sl = slice_to(target);
		struct timespec now, abs;
		int r;

		if (sl == 0)
			return ETIMEDOUT;
		r_clock_gettime(rclk, &now);
		ns_to_ts(ts_to_ns(&now) + sl, &abs);
		r = r_cond_clockwait(c, m, rclk, &abs);
		if (r != ETIMEDOUT)
			return r;
	}
}

EXPORT int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t id,
				  const struct timespec *abs)
{
	if (!sim_on(id) || bad_ts(abs))
		return r_cond_clockwait(c, m, id, abs);
	return cond_wait_sim(c, m, id, shmclock__sat_sub(ts_to_ns(abs), sim_offset(id)));
}

/*
 * The clock a condvar was initialised with. POSIX offers no way to ask a
 * condvar (only its attributes) and programs do not tell us, so we read
 * where glibc keeps it: bit 1 of __wrefs (nptl pthread_cond_common.c since
 * glibc 2.25: 0 CLOCK_REALTIME, 1 CLOCK_MONOTONIC). That is private, so it
 * is believed only after wrefs_probe() has seen it hold on this very glibc
 * at start-up; otherwise every condvar is taken as CLOCK_REALTIME (the
 * default, and what PTHREAD_COND_INITIALIZER gives) and we say so once.
 */
static bool wrefs_known;

static bool wrefs_clock_bit(const pthread_cond_t *c)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 25))
	return c->__data.__wrefs & 2;
#else
	(void)c;
	return false;
#endif
}

static void wrefs_probe(void)
{
	pthread_condattr_t a;
	pthread_cond_t mono, real;
	bool ok = false;

	if (!pthread_condattr_init(&a)) {
		if (!pthread_condattr_setclock(&a, CLOCK_MONOTONIC) && !pthread_cond_init(&mono, &a)) {
			ok = wrefs_clock_bit(&mono);
			pthread_cond_destroy(&mono);
		}
		if (!pthread_condattr_setclock(&a, CLOCK_REALTIME) && !pthread_cond_init(&real, &a)) {
			ok = ok && !wrefs_clock_bit(&real);
			pthread_cond_destroy(&real);
		}
		pthread_condattr_destroy(&a);
	}
	wrefs_known = ok;
	if (!ok)
		say("shmclock-preload: this libc does not say which clock a condition variable "
		    "uses; pthread_cond_timedwait timeouts are taken as CLOCK_REALTIME\n");
}

EXPORT int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m,
				  const struct timespec *abs)
{
	clockid_t id = wrefs_known && wrefs_clock_bit(c) ? CLOCK_MONOTONIC : CLOCK_REALTIME;

	if (!sim_on(id) || bad_ts(abs))
		return r_cond_timedwait(c, m, abs);
	return cond_wait_sim(c, m, id, shmclock__sat_sub(ts_to_ns(abs), sim_offset(id)));
}

/* ------------------------------------------------------------ timers */

/*
 * A timer on a simulated clock: a real CLOCK_MONOTONIC timer (the kernel
 * delivers it) plus its expiry in simulated time. Whenever the clock's
 * mapping changes, rearm() re-plans the real one from the simulated expiry.
 */
struct sim_timer {
	bool used;
	bool armed;      /* has a pending simulated expiry */
	bool real_armed; /* the real timer runs on the current mapping */
	timer_t real;
	clockid_t clock;
	int64_t next;     /* next simulated expiry */
	int64_t interval; /* simulated period, 0: one-shot */
	int64_t real_first; /* real monotonic instant planned for `next` */
	int64_t real_int;   /* real period planned */
};

static pthread_mutex_t tlock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_timer timers[MAX_TIMERS];
static int alarm_slot = -1; /* the timer behind alarm() and ITIMER_REAL */
static bool helper_running;

/* Timer calls may come from signal handlers (timer_settime is
 * async-signal-safe): signals stay blocked while tlock is held. */
static void tlock_take(sigset_t *old)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, old);
	pthread_mutex_lock(&tlock);
}

static void tlock_drop(const sigset_t *old)
{
	pthread_mutex_unlock(&tlock);
	pthread_sigmask(SIG_SETMASK, old, NULL);
}

static struct sim_timer *timer_find(timer_t id)
{
	for (int i = 0; i < MAX_TIMERS; i++)
		if (timers[i].used && timers[i].real == id)
			return &timers[i];
	return NULL;
}

/* Learn from the kernel what happened since the last plan. tlock held. */
static void timer_sync(struct sim_timer *t)
{
	struct itimerspec cur;
	int64_t left, now;

	if (!t->armed || !t->real_armed || r_timer_gettime(t->real, &cur))
		return;
	left = ts_to_ns(&cur.it_value);
	if (left == 0) {
		/* One-shot: fired. */
		t->armed = false;
		return;
	}
	if (t->real_int > 0) {
		/* Periodic: count the expiries the kernel has delivered since
		 * the plan, and move the plan's origin past them too, so that a
		 * second look (timer_gettime, then the helper's re-plan) does not
		 * count them again and push the next expiry out. */
		int64_t k;

		now = real_mono();
		k = (now + left - t->real_first + t->real_int / 2) / t->real_int;
		t->next += k * t->interval;
		t->real_first += k * t->real_int;
	}
}

/* Plan the real timer from the current mapping. tlock held. */
static void rearm(struct sim_timer *t)
{
	struct itimerspec its = { { 0, 0 }, { 0, 0 } };
	shmclock_steady_time_t due;
	shmclock_info_t i;
	int64_t now;

	timer_sync(t);
	t->real_armed = false;
	if (!t->armed) {
		r_timer_settime(t->real, 0, &its, NULL);
		return;
	}
	if (shmclock_info(clk, &i) || !i.initialized)
		return; /* looked at again on the next change */
	now = i.sim_ns;
	if (i.paused || i.stepped || !(i.scale > 0)) {
		/* No running mapping: fire what is due now, else wait for the
		 * next change. */
		if (now >= t->next) {
			its.it_value.tv_nsec = 1;
			if (t->interval > 0)
				t->next += ((now - t->next) / t->interval + 1) * t->interval;
			else
				t->armed = false;
		}
		r_timer_settime(t->real, 0, &its, NULL);
		return;
	}
	if (shmclock_sim_to_steady(clk, (shmclock_sim_time_t){ t->next }, &due))
		return;
	t->real_first = due.ns > i.mono_ns ? due.ns : i.mono_ns + 1;
	t->real_int = t->interval > 0 ? (int64_t)((double)t->interval / i.scale) : 0;
	if (t->interval > 0 && t->real_int < 1)
		t->real_int = 1;
	ns_to_ts(t->real_first, &its.it_value);
	ns_to_ts(t->real_int, &its.it_interval);
	if (r_timer_settime(t->real, TIMER_ABSTIME, &its, NULL) == 0)
		t->real_armed = true;
}

/* Re-plans every armed timer on each change of the clock. */
static void *helper_main(void *arg)
{
	(void)arg;
	for (;;) {
		/* Taken before planning: a change after this makes the wait
		 * below return at once. */
		uint32_t tok = shmclock_change_token(clk);
		sigset_t old;

		tlock_take(&old);
		for (int k = 0; k < MAX_TIMERS; k++)
			if (timers[k].used && timers[k].armed)
				rearm(&timers[k]);
		tlock_drop(&old);
		/* A second at most: a periodic timer's count stays fresh. */
		shmclock_wait_change(clk, tok, shmclock_sec(1));
	}
	return NULL;
}

/* tlock held. */
static int helper_start(void)
{
	pthread_attr_t a;
	pthread_t th;
	sigset_t all, old;
	int r;

	if (helper_running)
		return 0;
	/* The helper never runs the program's signal handlers. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&a, 64 * 1024);
	r = pthread_create(&th, &a, helper_main, NULL);
	pthread_attr_destroy(&a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r == 0)
		helper_running = true;
	return r;
}

/* Timers and the helper thread do not survive fork (POSIX). */
static void child_after_fork(void)
{
	pthread_mutex_init(&tlock, NULL);
	memset(timers, 0, sizeof(timers));
	alarm_slot = -1;
	helper_running = false;
}

/* tlock held. A slot for a new simulated timer around @real, or -1. */
static int timer_add(timer_t real, clockid_t id)
{
	for (int i = 0; i < MAX_TIMERS; i++) {
		if (!timers[i].used) {
			timers[i] = (struct sim_timer){ .used = true, .real = real, .clock = id };
			return i;
		}
	}
	return -1;
}

EXPORT int timer_create(clockid_t id, struct sigevent *sev, timer_t *out)
{
	sigset_t old;
	timer_t real_t;
	int slot;

	if (!sim_on(id))
		return r_timer_create(id, sev, out);
	if (r_timer_create(CLOCK_MONOTONIC, sev, &real_t))
		return -1;
	tlock_take(&old);
	slot = timer_add(real_t, id);
	if (slot >= 0 && helper_start()) {
		timers[slot].used = false;
		slot = -1;
	}
	tlock_drop(&old);
	if (slot < 0) {
		r_timer_delete(real_t);
		errno = EAGAIN;
		return -1;
	}
	*out = real_t;
	return 0;
}

/* tlock held. */
static void sim_get(const struct sim_timer *t, struct itimerspec *cur)
{
	int64_t left = t->armed ? t->next - sim_now_or(t->next) : 0;

	if (t->armed && left <= 0)
		left = 1;
	ns_to_ts(left, &cur->it_value);
	ns_to_ts(t->interval, &cur->it_interval);
}

/* tlock held: arm (or disarm) @t as timer_settime() would. */
static void sim_set(struct sim_timer *t, int flags, const struct itimerspec *v,
		    struct itimerspec *old)
{
	timer_sync(t);
	if (old)
		sim_get(t, old);
	t->interval = ts_to_ns(&v->it_interval);
	t->armed = v->it_value.tv_sec || v->it_value.tv_nsec;
	if (t->armed) {
		int64_t val = ts_to_ns(&v->it_value);

		t->next = (flags & TIMER_ABSTIME) ? val - sim_offset(t->clock)
						  : shmclock__sat_add(sim_now_or(0), val);
	}
	t->real_armed = false;
	rearm(t);
}

static bool bad_its(const struct itimerspec *v)
{
	return !v || v->it_value.tv_nsec < 0 || v->it_value.tv_nsec >= NS ||
	       v->it_interval.tv_nsec < 0 || v->it_interval.tv_nsec >= NS ||
	       v->it_value.tv_sec < 0 || v->it_interval.tv_sec < 0;
}

EXPORT int timer_settime(timer_t id, int flags, const struct itimerspec *v, struct itimerspec *old)
{
	struct sim_timer *t;
	sigset_t o;

	if (atomic_load_explicit(&state, memory_order_acquire) != ST_SIM)
		return r_timer_settime(id, flags, v, old);
	tlock_take(&o);
	t = timer_find(id);
	if (!t) {
		tlock_drop(&o);
		return r_timer_settime(id, flags, v, old);
	}
	if (bad_its(v)) {
		tlock_drop(&o);
		errno = EINVAL;
		return -1;
	}
	sim_set(t, flags, v, old);
	tlock_drop(&o);
	return 0;
}

EXPORT int timer_gettime(timer_t id, struct itimerspec *cur)
{
	struct sim_timer *t;
	sigset_t o;

	if (atomic_load_explicit(&state, memory_order_acquire) != ST_SIM)
		return r_timer_gettime(id, cur);
	tlock_take(&o);
	t = timer_find(id);
	if (t) {
		timer_sync(t);
		sim_get(t, cur);
	}
	tlock_drop(&o);
	return t ? 0 : r_timer_gettime(id, cur);
}

EXPORT int timer_delete(timer_t id)
{
	struct sim_timer *t;
	sigset_t o;

	if (atomic_load_explicit(&state, memory_order_acquire) == ST_SIM) {
		tlock_take(&o);
		t = timer_find(id);
		if (t)
			t->used = false;
		tlock_drop(&o);
	}
	return r_timer_delete(id);
}

/* tlock held: the timer behind alarm() and ITIMER_REAL (SIGALRM to the
 * process), created on first use. NULL if none can be made. */
static struct sim_timer *alarm_timer(void)
{
	struct sigevent sev = { .sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGALRM };
	timer_t real_t;

	if (alarm_slot >= 0)
		return &timers[alarm_slot];
	if (r_timer_create(CLOCK_MONOTONIC, &sev, &real_t))
		return NULL;
	alarm_slot = timer_add(real_t, CLOCK_MONOTONIC);
	if (alarm_slot < 0 || helper_start()) {
		if (alarm_slot >= 0)
			timers[alarm_slot].used = false;
		alarm_slot = -1;
		r_timer_delete(real_t);
		return NULL;
	}
	return &timers[alarm_slot];
}

EXPORT int setitimer(__itimer_which_t which, const struct itimerval *nv, struct itimerval *ov)
{
	struct itimerspec v, o;
	struct sim_timer *t;
	sigset_t s;

	if (which != ITIMER_REAL || !sim_on(CLOCK_REALTIME) || !nv)
		return r_setitimer(which, nv, ov);
	if (nv->it_value.tv_usec < 0 || nv->it_value.tv_usec >= 1000000 ||
	    nv->it_interval.tv_usec < 0 || nv->it_interval.tv_usec >= 1000000) {
		errno = EINVAL;
		return -1;
	}
	v.it_value = (struct timespec){ nv->it_value.tv_sec, nv->it_value.tv_usec * 1000 };
	v.it_interval = (struct timespec){ nv->it_interval.tv_sec, nv->it_interval.tv_usec * 1000 };
	tlock_take(&s);
	t = alarm_timer();
	if (t)
		sim_set(t, 0, &v, &o);
	tlock_drop(&s);
	if (!t)
		return r_setitimer(which, nv, ov);
	if (ov) {
		ov->it_value = (struct timeval){ o.it_value.tv_sec, o.it_value.tv_nsec / 1000 };
		ov->it_interval = (struct timeval){ o.it_interval.tv_sec, o.it_interval.tv_nsec / 1000 };
	}
	return 0;
}

EXPORT int getitimer(__itimer_which_t which, struct itimerval *cur)
{
	struct itimerspec c = { { 0, 0 }, { 0, 0 } };
	sigset_t s;

	if (which != ITIMER_REAL || !sim_on(CLOCK_REALTIME) || !cur)
		return r_getitimer(which, cur);
	tlock_take(&s);
	if (alarm_slot >= 0) {
		timer_sync(&timers[alarm_slot]);
		sim_get(&timers[alarm_slot], &c);
	}
	tlock_drop(&s);
	cur->it_value = (struct timeval){ c.it_value.tv_sec, c.it_value.tv_nsec / 1000 };
	cur->it_interval = (struct timeval){ c.it_interval.tv_sec, c.it_interval.tv_nsec / 1000 };
	return 0;
}

EXPORT unsigned alarm(unsigned secs)
{
	struct itimerval nv = { { 0, 0 }, { (time_t)secs, 0 } }, ov;

	if (!sim_on(CLOCK_REALTIME))
		return r_alarm(secs);
	if (setitimer(ITIMER_REAL, &nv, &ov))
		return 0;
	/* As glibc: rounded to the nearest second, and a pending alarm never
	 * reports 0 seconds left. */
	unsigned left = (unsigned)ov.it_value.tv_sec;

	if (ov.it_value.tv_usec >= 500000 || (left == 0 && ov.it_value.tv_usec > 0))
		left++;
	return left;
}
