/* SPDX-License-Identifier: MIT */
/*
 * The program's signal handlers, counted, so that a signal-aware sleep
 * (sleeps.c) ends with EINTR whenever a handler ran on its thread while it
 * slept, as nanosleep does.
 *
 * Why: the sleep waits on the clock's change futex, and every commit wakes
 * it to look at the clock and wait again. A signal that lands after the
 * wake, before the next wait, has its handler run there, in user space;
 * the next wait never hears of it, and the sleep went on to its end (at a
 * fixed step of 10 kHz, 2 to 3 % of all signals; an hour's sleep waiting
 * for SIGTERM's handler overslept by the hour). A wait with a signal mask
 * (ppoll's) would close that window, but none waits on a futex.
 *
 * How (the way glibc and musl close the same window for thread
 * cancellation): sigaction and signal put the shim's trampoline in front
 * of the program's handler. It counts the handlers run on its thread, and
 * when the thread it interrupted was in shim_sigwait (trap.c) between the
 * count's check and the system call, sends it to return -EINTR instead of
 * waiting. So a handler that ran before the check is seen by the check,
 * one that interrupts after it diverts the thread, and one during the wait
 * ends the wait (the kernel's EINTR, or a restart, which leaves the thread
 * on the system call: diverted too).
 *
 * Not wrapped: the faults (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP,
 * SIGSYS), which only the thread's own instructions raise, never a sleep,
 * and which the system-call trap takes itself; glibc's own signals; and
 * handlers installed by raw rt_sigaction (they keep the futex wait's own
 * EINTR). sigaction shows the program its own handler and flags. signal()
 * has glibc's BSD semantics (SA_RESTART, the signal blocked in its
 * handler), without siginterrupt()'s exceptions.
 */
#include "preload.h"

#include <stdint.h>

static int (*r_sigaction)(int, const struct sigaction *, struct sigaction *);
static sighandler_t (*r_signal)(int, sighandler_t);
static sighandler_t (*r_sysv_signal)(int, sighandler_t);

/* What the program asked for: its handler and whether it takes siginfo. */
static struct {
	_Atomic(void *) fn;
	_Atomic bool info;
} acts[NSIG];

/* Handlers run on this thread, and the count when its sleep began. */
static _Thread_local _Atomic unsigned long handled __attribute__((tls_model("initial-exec")));
static _Thread_local unsigned long seen __attribute__((tls_model("initial-exec")));

static void trampoline(int sig, siginfo_t *si, void *uc)
{
	void *fn;

	(void)shim_sigwait_divert(uc);
	/* Read by this thread's next check: the same thread, after the
	 * handler returned. */
	atomic_fetch_add_explicit(&handled, 1, memory_order_relaxed);
	/* Acquire pairs with the release store in sigaction(). */
	fn = atomic_load_explicit(&acts[sig].fn, memory_order_acquire);
	if ((uintptr_t)fn <= 1)
		return; /* changed to SIG_DFL or SIG_IGN while on its way */
	if (atomic_load_explicit(&acts[sig].info, memory_order_relaxed)) {
		void (*h)(int, siginfo_t *, void *);

		memcpy(&h, &fn, sizeof(h));
		h(sig, si, uc);
	} else {
		void (*h)(int);

		memcpy(&h, &fn, sizeof(h));
		h(sig);
	}
}

static bool wrapped(int sig)
{
	switch (sig) {
	case SIGKILL:
	case SIGSTOP:
	case SIGSEGV:
	case SIGBUS:
	case SIGILL:
	case SIGFPE:
	case SIGTRAP:
	case SIGSYS:
		return false;
	default:
		return sig > 0 && sig < NSIG && (sig < 32 || sig >= SIGRTMIN);
	}
}

/* Whether sleeps are simulated here at all (initialising on the first
 * call); if not, nothing is wrapped. */
static bool active(void)
{
	(void)sim_on(CLOCK_REALTIME);
	return atomic_load_explicit(&shim_state, memory_order_acquire) == ST_SIM;
}

EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	void *prev_fn, *fn = NULL;
	bool prev_info, ours = false;
	struct sigaction k;
	const struct sigaction *pass = act;
	int r;

	if (!r_sigaction)
		RESOLVE(r_sigaction, "sigaction");
	if (!wrapped(sig) || !active())
		return r_sigaction(sig, act, old);
	prev_fn = atomic_load_explicit(&acts[sig].fn, memory_order_relaxed);
	prev_info = atomic_load_explicit(&acts[sig].info, memory_order_relaxed);
	if (act) {
		memcpy(&fn, &act->sa_handler, sizeof(fn));
		/* Not SIG_DFL, SIG_IGN, SIG_ERR; nor the trampoline itself
		 * (an action read by a raw rt_sigaction and set back): as
		 * the program's handler it would call itself. */
		ours = (uintptr_t)fn > 1 && (uintptr_t)fn != UINTPTR_MAX &&
		       act->sa_sigaction != trampoline;
	}
	if (ours) {
		k = *act;
		k.sa_sigaction = trampoline;
		k.sa_flags |= SA_SIGINFO;
		/* Before the kernel can call the trampoline for it; release
		 * pairs with the acquire load there. */
		atomic_store_explicit(&acts[sig].info, (act->sa_flags & SA_SIGINFO) != 0,
				      memory_order_relaxed);
		atomic_store_explicit(&acts[sig].fn, fn, memory_order_release);
		pass = &k;
	}
	r = r_sigaction(sig, pass, old);
	if (r && ours) {
		atomic_store_explicit(&acts[sig].info, prev_info, memory_order_relaxed);
		atomic_store_explicit(&acts[sig].fn, prev_fn, memory_order_release);
	}
	if (!r && old && old->sa_sigaction == trampoline) {
		/* What the program had set: its handler, its flags. */
		memcpy(&old->sa_handler, &prev_fn, sizeof(prev_fn));
		if (!prev_info)
			old->sa_flags &= ~SA_SIGINFO;
	}
	return r;
}

static sighandler_t set_handler(int sig, sighandler_t h, int flags, bool block_self)
{
	struct sigaction a, o;

	memset(&a, 0, sizeof(a));
	a.sa_handler = h;
	sigemptyset(&a.sa_mask);
	if (block_self)
		sigaddset(&a.sa_mask, sig);
	a.sa_flags = flags;
	if (sigaction(sig, &a, &o) < 0)
		return SIG_ERR;
	return o.sa_handler;
}

EXPORT sighandler_t signal(int sig, sighandler_t h)
{
	if (!r_signal)
		RESOLVE(r_signal, "signal");
	if (!wrapped(sig) || !active())
		return r_signal(sig, h);
	return set_handler(sig, h, SA_RESTART, true);
}

sighandler_t bsd_signal(int sig, sighandler_t h); /* glibc declares it for X/Open only */
EXPORT sighandler_t bsd_signal(int sig, sighandler_t h)
{
	return signal(sig, h);
}

EXPORT sighandler_t sysv_signal(int sig, sighandler_t h)
{
	if (!r_sysv_signal)
		RESOLVE(r_sysv_signal, "sysv_signal");
	if (!wrapped(sig) || !active())
		return r_sysv_signal(sig, h);
	return set_handler(sig, h, SA_RESETHAND | SA_NODEFER, false);
}

void shim_sig_mark(unsigned long *outer)
{
	*outer = seen;
	seen = atomic_load_explicit(&handled, memory_order_relaxed);
}

void shim_sig_unmark(const unsigned long *outer)
{
	seen = *outer;
}

/* The library's wait for a signal-aware sleep (shim.h). */
static int signal_wait(const _Atomic uint32_t *word, uint32_t val, int64_t deadline_mono)
{
	struct timespec ts;
	long r = shim_sigwait(word, val, shmclock__deadline_ts(deadline_mono, &ts), &handled, seen);

	return r < 0 ? (int)r : 0;
}

void shim_resolve_signals(void)
{
	RESOLVE(r_sigaction, "sigaction");
	RESOLVE(r_signal, "signal");
	RESOLVE(r_sysv_signal, "sysv_signal");
	shmclock__signal_wait = signal_wait;
}
