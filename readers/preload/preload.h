/* SPDX-License-Identifier: MIT */
/*
 * libshmclock-preload.so, shared by its files: set-up and state (core.c),
 * reading the simulated clocks (clocks.c), sleeps (sleeps.c), waits with
 * timeouts (waits.c), timers (timers.c), the program's signal handlers
 * (signals.c). Everything here has hidden
 * visibility: the shim exports only what preload.map names.
 *
 * The clocks, as a program under the shim sees them:
 *   realtime   CLOCK_REALTIME(_COARSE), gettimeofday, time, timespec_get:
 *              the simulated world's UNIX time (shmclock_now_unix()); it
 *              follows every jump, as a real machine's clock follows a
 *              settimeofday.
 *   monotonic  CLOCK_MONOTONIC(_RAW, _COARSE), and boottime, CLOCK_BOOTTIME
 *              (_ALARM): the jump-free simulated time
 *              (shmclock_now_monotonic()): the rate, pauses and steps move
 *              it, no jump does, forwards or backwards. It never decreases.
 *
 * Waits, on two timelines (struct deadline):
 *   - relative timeouts and sleeps, and absolute ones on a monotonic clock,
 *     end on the jump-free timeline: they last their simulated duration
 *     whatever jumps happen (POSIX: setting a clock does not affect relative
 *     timers);
 *   - absolute CLOCK_REALTIME ones end on the simulation timeline: they
 *     follow jumps (a jump past the deadline ends the wait).
 */
#ifndef SHMCLOCK_PRELOAD_H
#define SHMCLOCK_PRELOAD_H

#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include <shmclock/shmclock.h>
#include <shmclock/time.h>

#include "clock.h"  /* the library's fast paths, inline (sim_read) */
#include "common.h" /* shmclock__mono_ns, shmclock__gettime, saturating arithmetic */
#include "shim.h"   /* the library's sleep flags and shmclock__plan for the shim */
#include "clocks.h"

#define EXPORT __attribute__((visibility("default")))
#define NS 1000000000LL
/* Longest real-time slice of a wait with a timeout (waits.c): a pause or a
 * new scale is followed within one. While paused a waiter wakes 1 / SLICE
 * times a second and burns no CPU in between. */
#define SLICE_NS 20000000LL

enum { ST_UNINIT, ST_INIT, ST_SIM, ST_REAL };

extern _Atomic int shim_state;
extern shmclock_t *shim_clk;
/* Where shim_clk's fast path reads, found once at set-up (core.c) and
 * published with ST_SIM: the first seq load waits for one load (this),
 * not three (shim_clk, its segment, the record line). */
struct shim_fast {
	const struct shmclock_seg *seg;
	const _Atomic uint64_t *key;
};
extern struct shim_fast shim_fast;
extern unsigned shim_mask;

/* One line on stderr (write(2): no stdio state touched), unless quiet. */
__attribute__((format(printf, 1, 2))) void shim_say(const char *fmt, ...);

/* The next definition of @sym (libc's); aborts, saying so, if none. */
void *shim_real(const char *sym);
/* Same, NULL when this libc lacks it. */
void *shim_real_opt(const char *sym);

/* POSIX allows the object-to-function pointer conversion dlsym needs. */
#define RESOLVE(ptr, sym)                        \
	do {                                     \
		void *f_ = shim_real(sym);       \
		memcpy(&(ptr), &f_, sizeof(f_)); \
	} while (0)
#define RESOLVE_OPT(ptr, sym)                    \
	do {                                     \
		void *f_ = shim_real_opt(sym);   \
		memcpy(&(ptr), &f_, sizeof(f_)); \
	} while (0)

/* Each family resolves the functions it stands in front of (at set-up,
 * before anything is simulated). */
void shim_resolve_clocks(void);
void shim_resolve_sleeps(void);
void shim_resolve_waits(void);
void shim_resolve_timers(void);
/* The real clock_gettime (clocks.c). */
extern int (*shim_real_gettime)(clockid_t, struct timespec *);
/* Timers do not survive fork (timers.c). */
void shim_timers_after_fork(void);
/* The shim's own descriptors (fds.c): hidden from the program. */
extern pid_t shim_pid; /* the process they belong to */
/* A copy of @fd at a free number near the top of the table, marked ours
 * (close-on-exec); -1 with errno. */
int shim_fd_adopt(int fd);
/* Ours at @fd moves to another free number (returned; -1: none, then it
 * is closed); the program is about to take @fd. */
int shim_fd_move(int fd);
/* Close one of ours. */
void shim_fd_release(int fd);
/* Ours at @fd is ours no more (someone else's file is there now): unmarked,
 * not closed. */
void shim_fd_forget(int fd);
bool shim_fd_is_own(int fd);
/* close(2) itself, not the interposed one. */
int shim_real_close(int fd);
/* What fds.c asks of the timers (timers.c): move ours from @fd; forget the
 * program's timerfds among [lo, hi], which it is closing; whether any
 * timerfd exists. */
void shim_timers_claim(int fd);
void shim_timers_closed(int lo, int hi);
/* The program's @to is a copy of its @from now. */
void shim_timers_dup(int from, int to);
/* The timer table's lock, which every placement of one of our descriptors
 * holds (signals blocked, cancellation off while held), and the three
 * calls above for a caller that holds it. */
void shim_timers_lock(sigset_t *old);
void shim_timers_unlock(const sigset_t *old);
void shim_timers_claim_locked(int fd);
void shim_timers_closed_locked(int lo, int hi);
void shim_timers_dup_locked(int from, int to);
/* fork waits for the timer table's lock (core.c's pthread_atfork). */
void shim_timers_before_fork(void);
void shim_timers_after_fork_parent(void);
bool shim_timers_live(void);
/* Condition variables: which clock glibc says a condvar uses (waits.c). */
void shim_wrefs_probe(void);

bool shim_init_slow(void);

/* The vDSO's time symbols point at the shim's readers (vdso.c): the count
 * of symbols rewritten, or -errno. */
int shim_vdso_redirect(void);
/* The system-call trap (trap.c): installs it as SHMCLOCK_TRAP says
 * (@live: the clock answers; if not, only the handler of an inherited
 * filter is installed); whether it is on. */
bool shim_trap_setup(bool live);
extern _Atomic bool shim_trap_on;
/* System calls the trap answered so far in this process. */
unsigned long shim_trap_count(void);
/* The trap's handling of a signal the shim takes besides SIGSYS (@sig:
 * SIGSEGV, escape.c): installs @h, the program's action kept aside and
 * what rt_sigaction shows it from then on; 0 or -errno. */
int shim_trap_take(int sig, void (*h)(int, siginfo_t *, void *));
/* A @sig that is not the shim's: the program's action. */
void shim_trap_forward(int sig, siginfo_t *si, void *uc);
/* The escape report (escape.c): on under shmclock-run -v / --strict
 * ($SHMCLOCK_REPORT), after the trap's set-up. */
extern _Atomic bool shim_esc_on;
void shim_esc_setup(void);
/* Set while the shim calls into libc for a real call that the trap would
 * catch: the trap makes it as it is. */
extern __thread int shim_passthru __attribute__((tls_model("initial-exec")));
/* For the rest of the enclosing block, calls into libc that trap are made
 * as they are (the timers' real calls: the trap also answers the program's
 * raw timer calls, through the same functions). */
static inline int shim_passthru_begin(void)
{
	return ++shim_passthru;
}
static inline void shim_passthru_end(int *unused)
{
	(void)unused;
	--shim_passthru;
}
#define SHIM_PASSTHRU_SCOPE \
	int shim_passthru_guard_ __attribute__((cleanup(shim_passthru_end), unused)) = \
		shim_passthru_begin()

/* A system call that never traps: -errno on failure. */
long shim_raw(long nr, long a, long b, long c, long d, long e, long f);
/* The signal-aware sleep's futex wait (trap.c, x86-64): FUTEX_WAIT_BITSET
 * on @word until @ts (absolute CLOCK_MONOTONIC, NULL: none), unless
 * *@handled is not @seen at the last instruction before the wait, which
 * then returns -EINTR; 0 or -errno. Never traps. */
long shim_sigwait(const _Atomic uint32_t *word, uint32_t val, const struct timespec *ts,
		  const _Atomic unsigned long *handled, unsigned long seen);
/* From a signal handler: the interrupted thread @uc (a ucontext_t) was in
 * shim_sigwait, past its check and not yet waiting, and is sent to return
 * -EINTR instead; whether it was. */
bool shim_sigwait_divert(void *uc);
/* The program's signal handlers (signals.c): around a signal-aware sleep,
 * so that one run from its start ends it (the count at the start of a
 * sleep it interrupted, a handler's own sleep, is kept in @outer). */
void shim_sig_mark(unsigned long *outer);
void shim_sig_unmark(const unsigned long *outer);
void shim_resolve_signals(void);

/* Whether @id is simulated (initialising on the first call). */
static inline bool sim_on(clockid_t id)
{
	int st = atomic_load_explicit(&shim_state, memory_order_acquire);

	if (__builtin_expect(st < ST_SIM, 0) && !shim_init_slow())
		return false;
	if (st == ST_REAL)
		return false;
	return (unsigned)id < 32 && (shim_mask & (1u << id));
}

/* The shim has a simulated clock (no initialisation). */
static inline bool sim_active(void)
{
	return atomic_load_explicit(&shim_state, memory_order_acquire) == ST_SIM;
}

static inline bool is_rt(clockid_t id)
{
	return (SHMCLOCK_G_REALTIME >> id) & 1;
}

/* ------------------------------------------------------------ conversions */

static inline void ns_to_ts(int64_t ns, struct timespec *ts)
{
	int64_t s, r;

	/* Unsigned where it can: the usual case, one step shorter. */
	if (__builtin_expect(ns >= 0, 1)) {
		ts->tv_sec = (time_t)((uint64_t)ns / NS);
		ts->tv_nsec = (long)((uint64_t)ns % NS);
		return;
	}
	s = ns / NS;
	r = ns % NS;

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

static inline bool bad_ts(const struct timespec *ts)
{
	return !ts || ts->tv_nsec < 0 || ts->tv_nsec >= NS || ts->tv_sec < 0;
}


/* ------------------------------------------------------------ reading */

bool sim_read_slow(clockid_t id, int64_t *ns, int r);

/*
 * The simulated value of clock @id: the world's UNIX time for the realtime
 * group, the jump-free time for the others. Never the real clock once the
 * program has seen simulated time; false only if the clock can never
 * answer (core.c, sim_read_slow).
 */
static inline __attribute__((always_inline)) bool sim_read(clockid_t id, int64_t *ns)
{
	int r;

	/* The library's fast path inline: the value stays in a register on
	 * its way to the caller's timespec (bench: shmclock-bench read). */
	if (__builtin_expect(is_rt(id) ? shmclock__fast_unix_at(shim_fast.seg, shim_fast.key, ns)
				       : shmclock__fast_monotonic_at(shim_fast.seg, shim_fast.key, ns),
			     1))
		return true;
	r = is_rt(id) ? shmclock_now_unix(shim_clk, ns) : shmclock_now_monotonic(shim_clk, ns);

	if (__builtin_expect(r == 0 || r == -ESTALE, 1))
		return true;
	return sim_read_slow(id, ns, r);
}

/* The offset from clock @id's values to its timeline: UnixTimeAtZero for
 * the realtime group (values minus it are simulation time), 0 otherwise. */
int64_t sim_offset(clockid_t id);

/* The jump-free time now, or @dflt when the clock cannot answer. */
int64_t mono_now_or(int64_t dflt);

/* ------------------------------------------------------------ deadlines */

/* Where a wait ends: @target on the jump-free timeline (@mono) or on the
 * simulation timeline. */
struct deadline {
	bool mono;
	int64_t target;
};

/* A relative timeout of @ns simulated ns from now. */
struct deadline dl_after(int64_t ns);
/* An absolute timeout @abs on clock @id. */
struct deadline dl_at(clockid_t id, const struct timespec *abs);
/* Simulated ns left (0 once reached). */
int64_t dl_left(const struct deadline *d);

/*
 * The one wait in simulated time. @once makes the real call with a timeout
 * of @slice real ns (0: do not wait, just look) and sets *expired when that
 * timeout ran out; shim_wait repeats it, re-planned from the clock each
 * time, until it returns without *expired or the deadline is reached, and
 * returns what the last call returned. A pause, a scale change or a step is
 * followed within one slice (SLICE_NS).
 */
int shim_wait(const struct deadline *d, int (*once)(void *ctx, int64_t slice, bool *expired),
	      void *ctx);

/*
 * shim_wait for the calls that take a signal mask (ppoll, pselect,
 * epoll_pwait, and poll, select, epoll_wait as if with the thread's own):
 * between slices every signal stays blocked, and each slice's real call
 * sets *@mask (the caller's, or the thread's as it was) atomically for its
 * wait, so a signal that comes while the shim re-plans interrupts the next
 * slice with EINTR at once instead of being handled unseen, the wait going
 * on to its deadline (CPython's test_selectors saw a 30 s select survive
 * an alarm that way on a loaded machine). *@mask is the field the once
 * function passes to the real call.
 */
int shim_wait_sig(const struct deadline *d, int (*once)(void *ctx, int64_t slice, bool *expired),
		  void *ctx, const sigset_t **mask);

/* The next real-time slice of a wait for @d: 0 once reached, else at most
 * SLICE_NS (SLICE_NS while paused or stepped). */
int64_t dl_slice(const struct deadline *d);

#endif
