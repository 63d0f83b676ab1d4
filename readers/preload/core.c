/* SPDX-License-Identifier: MIT */
/*
 * libshmclock-preload.so: simulated time for programs that know nothing of
 * shmclock. Loaded with LD_PRELOAD (shmclock-run does it), it answers the
 * time functions from a live shmclock and makes sleeps, timeouts and timers
 * run in simulated time, so the program follows pause, scale, steps and
 * jumps. What each clock shows, and which waits follow jumps: preload.h.
 *
 * Environment (read once, at the first call):
 *   SHMCLOCK_NAME    the clock (default "default")
 *   SHMCLOCK_CLOCKS  which clocks follow it: a comma list of realtime,
 *                    monotonic, boottime, or "all" / "none" (default all)
 *   SHMCLOCK_QUIET   1: do not say on stderr that the real clocks are used
 *
 * The files, by family: this one (set-up, reading, and the one wait in
 * simulated time every timeout uses), clocks.c, sleeps.c, waits.c (poll,
 * select, epoll, condition variables, semaphores, locks, joins, message
 * queues), timers.c (POSIX timers, alarm, setitimer, timerfd). Adding an
 * interposed call with a timeout is one small function around shim_wait()
 * plus its line in preload.map.
 *
 * The hot path (clock_gettime and friends) is one atomic load of the state
 * plus a shmclock read: no allocation, no lock, no system call, and it is
 * async-signal-safe because the handle never runs jump callbacks.
 */
#include "preload.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

_Atomic int shim_state;
shmclock_t *shim_clk;
struct shim_fast shim_fast;
unsigned shim_mask;
static bool quiet;
static __thread bool in_init;

/* ------------------------------------------------------------ set-up */

void shim_say(const char *fmt, ...)
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

void *shim_real_opt(const char *sym)
{
	return dlsym(RTLD_NEXT, sym);
}

void *shim_real(const char *sym)
{
	void *f = dlsym(RTLD_NEXT, sym);

	if (!f) {
		shim_say("shmclock-preload: %s not found in libc\n", sym);
		abort();
	}
	return f;
}

static void child_after_fork(void)
{
	shim_pid = getpid();
	shim_timers_after_fork();
}

static int do_init(void)
{
	const char *name = getenv("SHMCLOCK_NAME");
	const char *q = getenv("SHMCLOCK_QUIET");
	const char *bad = NULL;
	size_t badlen = 0;
	shmclock_info_t info;
	int r;

	quiet = q && *q && strcmp(q, "0");
	shim_resolve_clocks();
	shim_resolve_sleeps();
	shim_resolve_waits();
	shim_resolve_timers();
	shim_resolve_signals();
	if (!name || !*name)
		name = "default";
	if (shmclock_parse_clocks(getenv("SHMCLOCK_CLOCKS"), &shim_mask, &bad, &badlen))
		shim_say("shmclock-preload: SHMCLOCK_CLOCKS: unknown clock '%.*s' ignored\n",
			 (int)(badlen < 31 ? badlen : 31), bad);
	if (!shim_mask)
		return ST_REAL;
	/* No callbacks, ever: a read only records a jump's key, with no lock,
	 * so reads stay async-signal-safe. */
	r = shmclock_open_ex(name, SHMCLOCK_OPEN_NO_CALLBACKS, &shim_clk);
	if (r) {
		shim_say("shmclock-preload: clock '%s': %s; using the real clocks\n", name,
			 shmclock_strerror(r));
		return ST_REAL;
	}
	r = shmclock_info(shim_clk, &info);
	if (r || !info.initialized || !info.writer_alive) {
		shim_say("shmclock-preload: clock '%s' %s; using the real clocks\n", name,
			 r ? shmclock_strerror(r)
			   : !info.initialized ? "has not started" : "has no live writer");
		shmclock_close(shim_clk);
		shim_clk = NULL;
		return ST_REAL;
	}
	shim_fast.seg = shim_clk->seg;
	shim_fast.key = &shim_clk->seen_key;
	shim_wrefs_probe();
	shim_pid = getpid();
	pthread_atfork(shim_timers_before_fork, shim_timers_after_fork_parent, child_after_fork);
	return ST_SIM;
}

/*
 * For the programs that skip libc (after ST_SIM: the replacements read the
 * clock without initialising): the vDSO's time symbols, then the
 * system-call trap. SHMCLOCK_VDSO=0 leaves the vDSO as it is (the tests
 * check that the redirection is what makes a program follow).
 */
static void bypass_setup(void)
{
	const char *v = getenv("SHMCLOCK_VDSO");
	int r = 0;

	if (!v || strcmp(v, "0"))
		r = shim_vdso_redirect();
	if (r < 0)
		shim_say("shmclock-preload: the vDSO's time functions cannot be redirected (%s); "
			 "programs that call them directly read the real clocks\n",
			 strerror(-r));
	(void)shim_trap_setup(true);
	shim_esc_setup();
}

__attribute__((noinline)) bool shim_init_slow(void)
{
	int expect = ST_UNINIT;

	/* Our own set-up reading the time (dlsym, the library): real clocks.
	 * The pointers are resolved first thing in do_init. */
	if (in_init)
		return false;
	if (atomic_compare_exchange_strong_explicit(&shim_state, &expect, ST_INIT,
						    memory_order_acquire, memory_order_acquire)) {
		int st;

		in_init = true;
		st = do_init();
		in_init = false;
		/* Release pairs with the acquire loads in sim_on(): whoever
		 * sees ST_SIM sees shim_clk, shim_mask and the real pointers. */
		atomic_store_explicit(&shim_state, st, memory_order_release);
		if (st == ST_SIM)
			bypass_setup();
		else
			(void)shim_trap_setup(false); /* an inherited one answers in real time */
		if (st != ST_SIM)
			shim_esc_setup(); /* the report, on the real clocks */
		return st == ST_SIM;
	}
	while ((expect = atomic_load_explicit(&shim_state, memory_order_acquire)) == ST_INIT)
		sched_yield();
	return expect == ST_SIM;
}

static __attribute__((constructor)) void shim_ctor(void)
{
	(void)sim_on(CLOCK_REALTIME);
}

/* ------------------------------------------------------------ reading */

static _Atomic bool warned_stuck;

/*
 * A writer stopped in the middle of an update does not delay the read (the
 * library returns the last committed time); one stopped within the first
 * instructions of an update makes the library wait up to a second and
 * answer -EAGAIN, and then we ask again: a clock that is being set blocks
 * its readers, it never lies to them.
 */
bool sim_read_slow(clockid_t id, int64_t *ns, int r)
{
	for (;;) {
		if (r == 0 || r == -ESTALE)
			return true;
		if (!atomic_exchange_explicit(&warned_stuck, true, memory_order_relaxed))
			shim_say("shmclock-preload: clock '%s': %s; waiting for it\n",
				 shmclock_name(shim_clk), shmclock_strerror(r));
		if (r != -EAGAIN)
			return false; /* -ENODATA cannot follow a start; kept safe */
		r = is_rt(id) ? shmclock_now_unix(shim_clk, ns) : shmclock_now_monotonic(shim_clk, ns);
	}
}

int64_t mono_now_or(int64_t dflt)
{
	int64_t now = dflt;
	int r = shmclock_now_monotonic(shim_clk, &now);

	return r == 0 || r == -ESTALE ? now : dflt;
}

int64_t sim_offset(clockid_t id)
{
	shmclock_info_t i;

	if (!is_rt(id) || shmclock_info(shim_clk, &i) || !i.has_unix_at_zero)
		return 0;
	return i.unix_at_zero_ns;
}

/* ------------------------------------------------------------ deadlines */

struct deadline dl_after(int64_t ns)
{
	return (struct deadline){ true, shmclock__sat_add(mono_now_or(0), ns) };
}

struct deadline dl_at(clockid_t id, const struct timespec *abs)
{
	if (is_rt(id))
		return (struct deadline){ false, shmclock__sat_sub(ts_to_ns(abs), sim_offset(id)) };
	return (struct deadline){ true, ts_to_ns(abs) };
}

int64_t dl_left(const struct deadline *d)
{
	int64_t now = INT64_MIN, due;
	int r = shmclock__plan(shim_clk, d->mono, d->target, &now, &due);

	if (r <= 0 || now == INT64_MIN)
		return 0; /* reached, or the clock cannot tell */
	return shmclock__sat_sub(d->target, now);
}

int64_t dl_slice(const struct deadline *d)
{
	int64_t now, due, left;
	int r = shmclock__plan(shim_clk, d->mono, d->target, &now, &due);

	if (r == 0)
		return 0;
	if (r != 1)
		return SLICE_NS; /* paused, stepped, or not answering: look again */
	left = due - shmclock__mono_ns();
	return left <= 0 ? 1 : left < SLICE_NS ? left : SLICE_NS;
}

int shim_wait_sig(const struct deadline *d, int (*once)(void *ctx, int64_t slice, bool *expired),
		  void *ctx, const sigset_t **mask)
{
	const sigset_t *prog = *mask;
	sigset_t block, orig;
	int r, e;

	/* Not the signals a fault raises: blocked, they would kill. */
	sigfillset(&block);
	sigdelset(&block, SIGSEGV);
	sigdelset(&block, SIGBUS);
	sigdelset(&block, SIGFPE);
	sigdelset(&block, SIGILL);
	sigdelset(&block, SIGTRAP);
	sigdelset(&block, SIGSYS);
	pthread_sigmask(SIG_BLOCK, &block, &orig);
	if (!prog)
		*mask = &orig;
	r = shim_wait(d, once, ctx);
	e = errno;
	*mask = prog;
	pthread_sigmask(SIG_SETMASK, &orig, NULL);
	errno = e;
	return r;
}

int shim_wait(const struct deadline *d, int (*once)(void *ctx, int64_t slice, bool *expired),
	      void *ctx)
{
	for (;;) {
		int64_t sl = dl_slice(d);
		bool expired = false;
		int r;

		/* The slice's real call is the real one, trap or not. */
		shim_passthru++;
		r = once(ctx, sl, &expired);
		shim_passthru--;

		if (!expired || sl == 0)
			return r;
	}
}
