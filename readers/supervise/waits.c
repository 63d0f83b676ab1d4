/* SPDX-License-Identifier: MIT */
/*
 * The calls the tracer answers: clock reads when there is no listener,
 * and waits re-planned in slices of real time until their simulated
 * deadline (nanosleep, futex, poll, select, epoll, sigtimedwait ...).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <linux/futex.h>
#include <poll.h>
#include "sv.h"

#if defined(__x86_64__)

/* Simulated ns left before @t's deadline (<= 0: reached). */
static int64_t left(const struct thr *t)
{
	int64_t now;

	if (!read_clock(!t->mono, &now))
		return 0;
	return t->target - now;
}

/* The real length of the next slice. */
static int64_t slice(const struct thr *t)
{
	shmclock_info_t i;
	int64_t l = left(t), real;

	if (l <= 0)
		return 0;
	if (shmclock_info(sv_clk, &i) || !i.initialized || i.paused || i.stepped || i.scale <= 0)
		return SLICE_NS;
	real = (int64_t)((double)l / i.scale);
	return real < 1000 ? 1000 : real > SLICE_NS ? SLICE_NS : real;
}

/* Skip the call with @ret as its result. */
static void skip(pid_t pid, struct user_regs_struct *r, long ret)
{
	r->orig_rax = (unsigned long long)-1;
	r->rax = (unsigned long long)ret;
	ptrace(PTRACE_SETREGS, pid, NULL, r);
}

static bool answer_read(pid_t pid, struct user_regs_struct *r)
{
	int64_t ns;

	switch (r->orig_rax) {
	case SYS_clock_gettime: {
		struct timespec ts;

		if (!sim((long)r->rdi) || !read_clock(is_rt((long)r->rdi), &ns))
			return false;
		ts = ns_ts(ns);
		skip(pid, r, sv_poke(pid, r->rsi, &ts, sizeof(ts)) ? 0 : -EFAULT);
		return true;
	}
	case SYS_gettimeofday: {
		struct timeval tv;
		struct timespec ts;

		if (!sim(CLOCK_REALTIME) || !read_clock(true, &ns))
			return false;
		ts = ns_ts(ns);
		tv.tv_sec = ts.tv_sec;
		tv.tv_usec = ts.tv_nsec / 1000;
		if (r->rsi) { /* the obsolete timezone: zero */
			uint64_t z = 0;

			sv_poke(pid, r->rsi, &z, sizeof(z));
		}
		skip(pid, r, !r->rdi || sv_poke(pid, r->rdi, &tv, sizeof(tv)) ? 0 : -EFAULT);
		return true;
	}
	case SYS_time: {
		time_t t;

		if (!sim(CLOCK_REALTIME) || !read_clock(true, &ns))
			return false;
		t = (time_t)(ns_ts(ns).tv_sec);
		if (r->rdi)
			sv_poke(pid, r->rdi, &t, sizeof(t));
		skip(pid, r, (long)t);
		return true;
	}
	}
	return false;
}

/* A relative timeout of @ns from now, on the jump-free timeline. */
static bool plan_after(struct thr *t, int64_t ns)
{
	int64_t now;

	if (!read_clock(false, &now))
		return false;
	t->mono = true;
	t->start = now;
	t->target = now + ns;
	return true;
}

/* An absolute timeout @abs on clock @id. */
static bool plan_at(struct thr *t, long id, int64_t abs)
{
	t->mono = !is_rt(id);
	t->target = abs;
	return read_clock(false, &t->start);
}

static bool read_ts(pid_t pid, uint64_t addr, int64_t *ns)
{
	struct timespec ts;

	if (!addr || !sv_peek(pid, addr, &ts, sizeof(ts)) || ts.tv_nsec < 0 || ts.tv_nsec >= NS ||
	    ts.tv_sec < 0)
		return false;
	*ns = ts_ns(&ts);
	return true;
}

static void drop_sets(struct thr *t)
{
	for (int k = 0; k < 3; k++) {
		free(t->sets[k]);
		t->sets[k] = NULL;
	}
	t->setlen = 0;
}

/* select's sets, saved before the first slice (rdi: nfds; rsi, rdx, r10:
 * the sets). */
static bool save_sets(pid_t pid, struct thr *t, const struct user_regs_struct *r)
{
	uint64_t at[3] = { r->rsi, r->rdx, r->r10 };

	drop_sets(t);
	t->setlen = (((size_t)(int)r->rdi + 63) / 64) * 8;
	for (int k = 0; k < 3; k++) {
		if (!at[k] || !t->setlen)
			continue;
		t->sets[k] = malloc(t->setlen);
		if (!t->sets[k] || !sv_peek(pid, at[k], t->sets[k], t->setlen)) {
			drop_sets(t);
			return false;
		}
	}
	return true;
}

/* Whether @r is a wait the tracer re-plans; plans @t's deadline. */
static bool plan_wait(pid_t pid, struct thr *t, const struct user_regs_struct *r)
{
	int64_t ns;
	long cmd;

	switch (r->orig_rax) {
	case SYS_nanosleep:
		return sim(CLOCK_MONOTONIC) && read_ts(pid, r->rdi, &ns) && plan_after(t, ns);
	case SYS_clock_nanosleep:
		if (!sim((long)r->rdi) || !read_ts(pid, r->rdx, &ns))
			return false;
		return r->rsi & TIMER_ABSTIME ? plan_at(t, (long)r->rdi, ns) : plan_after(t, ns);
	case SYS_futex:
		cmd = (long)r->rsi & FUTEX_CMD_MASK;
		if ((cmd != FUTEX_WAIT && cmd != FUTEX_WAIT_BITSET) || !read_ts(pid, r->r10, &ns))
			return false;
		if (cmd == FUTEX_WAIT)
			return sim(CLOCK_MONOTONIC) && plan_after(t, ns);
		{
			long id = (long)r->rsi & FUTEX_CLOCK_REALTIME ? CLOCK_REALTIME
								       : CLOCK_MONOTONIC;

			return sim(id) && plan_at(t, id, ns);
		}
	case SYS_epoll_wait:
	case SYS_epoll_pwait:
		return (int)r->r10 > 0 && sim(CLOCK_MONOTONIC) &&
		       plan_after(t, (int64_t)(int)r->r10 * 1000000);
	case SYS_poll:
		return (int)r->rdx > 0 && sim(CLOCK_MONOTONIC) &&
		       plan_after(t, (int64_t)(int)r->rdx * 1000000);
	case SYS_ppoll:
	case SYS_rt_sigtimedwait:
		return sim(CLOCK_MONOTONIC) && read_ts(pid, r->rdx, &ns) && plan_after(t, ns);
	case SYS_select:
	case SYS_pselect6:
		if (!sim(CLOCK_MONOTONIC) || (int)r->rdi < 0 || (int)r->rdi > 65536)
			return false;
		if (r->orig_rax == SYS_select) {
			struct timeval tv;

			if (!r->r8 || !sv_peek(pid, r->r8, &tv, sizeof(tv)) || tv.tv_sec < 0 ||
			    tv.tv_usec < 0 || tv.tv_usec >= 1000000)
				return false;
			ns = (int64_t)tv.tv_sec * NS + (int64_t)tv.tv_usec * 1000;
		} else if (!read_ts(pid, r->r8, &ns)) {
			return false;
		}
		return save_sets(pid, t, r) && plan_after(t, ns);
#ifdef SYS_epoll_pwait2
	case SYS_epoll_pwait2:
		return sim(CLOCK_MONOTONIC) && read_ts(pid, r->r10, &ns) && plan_after(t, ns);
#endif
	}
	return false;
}

/* The program's call, made with a real timeout of @sl ns instead of its
 * own (the registers are the program's: t->orig). */
static void run_slice(pid_t pid, struct thr *t, int64_t sl)
{
	struct user_regs_struct r = t->orig;
	uint64_t scratch = ((uint64_t)r.rsp - SCRATCH_BELOW) & ~(uint64_t)15;
	struct timespec ts = ns_ts(sl);
	int ms = (int)((sl + 999999) / 1000000);

	switch (t->nr) {
	case SYS_nanosleep:
	case SYS_clock_nanosleep:
		r.orig_rax = SYS_nanosleep;
		r.rdi = scratch;
		r.rsi = 0;
		break;
	case SYS_futex: {
		struct timespec now;

		clock_gettime(CLOCK_MONOTONIC, &now);
		ts = ns_ts(ts_ns(&now) + sl);
		if (((long)r.rsi & FUTEX_CMD_MASK) == FUTEX_WAIT)
			r.r9 = FUTEX_BITSET_MATCH_ANY;
		r.rsi = (uint64_t)(FUTEX_WAIT_BITSET | ((long)r.rsi & FUTEX_PRIVATE_FLAG));
		r.r10 = scratch;
		break;
	}
	case SYS_epoll_wait:
	case SYS_epoll_pwait:
		r.r10 = (uint64_t)ms;
		break;
	case SYS_poll:
		r.rdx = (uint64_t)ms;
		break;
	case SYS_ppoll:
	case SYS_rt_sigtimedwait:
		r.rdx = scratch;
		break;
	case SYS_select:
	case SYS_pselect6: {
		uint64_t at[3] = { r.rsi, r.rdx, r.r10 };

		for (int k = 0; k < 3; k++)
			if (t->sets[k])
				sv_poke(pid, at[k], t->sets[k], t->setlen);
		if (t->nr == SYS_select) {
			/* A timeval, not a timespec. */
			ts.tv_nsec /= 1000;
		}
		r.r8 = scratch;
		break;
	}
	default: /* epoll_pwait2 */
		r.r10 = scratch;
		break;
	}
	sv_poke(pid, scratch, &ts, sizeof(ts));
	ptrace(PTRACE_SETREGS, pid, NULL, &r);
	t->in_slice = true;
	ptrace(PTRACE_SYSCALL, pid, NULL, NULL);
}

/* A seccomp stop. */
void sv_on_call(pid_t pid, struct thr *t)
{
	struct user_regs_struct r;
	int64_t sl;

	if (ptrace(PTRACE_GETREGS, pid, NULL, &r))
		return;
	if (!sv_proc_static(pid) || answer_read(pid, &r)) {
		ptrace(PTRACE_CONT, pid, NULL, NULL);
		return;
	}
	/* The same call again after a slice or a restart: the same deadline
	 * (after an EINTR the program's next call has other arguments, or
	 * is the same call resumed, which ends at the same time anyway). */
	if (!t->waiting || t->nr != (long)r.orig_rax || r.rdi != t->orig.rdi ||
	    r.rsi != t->orig.rsi || r.rdx != t->orig.rdx || r.r10 != t->orig.r10 ||
	    r.r8 != t->orig.r8 || r.r9 != t->orig.r9) {
		if (!plan_wait(pid, t, &r)) {
			ptrace(PTRACE_CONT, pid, NULL, NULL);
			return;
		}
		t->waiting = true;
		t->nr = (long)r.orig_rax;
		t->orig = r;
	}
	sl = slice(t);
	run_slice(pid, t, sl > 0 ? sl : 0);
}

static bool slice_expired(long nr, long ret)
{
	switch (nr) {
	case SYS_nanosleep:
	case SYS_clock_nanosleep:
		return ret == 0;
	case SYS_futex:
		return ret == -ETIMEDOUT;
	case SYS_rt_sigtimedwait:
		return ret == -EAGAIN;
	default:
		return ret == 0;
	}
}

/* A relative sleep ended by a handler reports what is left (a slice's own
 * remainder goes nowhere): written where the program asked. */
static void write_remainder(pid_t pid, const struct thr *t)
{
	const struct user_regs_struct *o = &t->orig;
	uint64_t rem = t->nr == SYS_nanosleep ? o->rsi
		       : t->nr == SYS_clock_nanosleep && !(o->rsi & TIMER_ABSTIME) ? o->r10
										 : 0;

	if (rem) {
		int64_t l = left(t);
		struct timespec ts = ns_ts(l > 0 ? l : 0);

		sv_poke(pid, rem, &ts, sizeof(ts));
	}
}

/* The exit of a slice: again, or the program's result. */
void sv_on_slice_exit(pid_t pid, struct thr *t)
{
	struct user_regs_struct r, o = t->orig;
	long ret;

	t->in_slice = false;
	if (ptrace(PTRACE_GETREGS, pid, NULL, &r))
		return;
	ret = (long)r.rax;
	/* Interrupted by a signal: the program's own registers back, with the
	 * kernel's restart code, and the kernel decides as for any call:
	 * made again (the same deadline: its stop comes back here) when no
	 * handler runs or SA_RESTART says so, else EINTR for the program. A
	 * restart block would resume the slice instead of the program's call,
	 * so it becomes ERESTARTNOHAND. */
	if (ret <= -512 && ret >= -516) {
		write_remainder(pid, t);
		o.rax = (unsigned long long)(ret == -516 ? -514 : ret);
		ptrace(PTRACE_SETREGS, pid, NULL, &o);
		ptrace(PTRACE_CONT, pid, NULL, NULL);
		return;
	}
	/* A slice that ran out before the deadline: the program's call is
	 * made again. */
	if (slice_expired(t->nr, ret) && left(t) > 0) {
		o.rip -= 2; /* the syscall instruction */
		o.rax = o.orig_rax;
		ptrace(PTRACE_SETREGS, pid, NULL, &o);
		ptrace(PTRACE_CONT, pid, NULL, NULL);
		return;
	}
	t->waiting = false;
	if (t->nr == SYS_select || t->nr == SYS_pselect6) {
		/* Linux reports the simulated time not waited. */
		int64_t l = left(t);
		struct timespec ts = ns_ts(l > 0 ? l : 0);

		if (t->nr == SYS_select)
			ts.tv_nsec /= 1000;
		sv_poke(pid, o.r8, &ts, sizeof(ts));
		drop_sets(t);
	}
	if (slice_expired(t->nr, ret) && (t->nr == SYS_clock_nanosleep))
		ret = 0;
	if (ret == -EINTR && t->nr == SYS_nanosleep && o.rsi) {
		int64_t now = t->start, rem;
		struct timespec ts;

		read_clock(false, &now);
		rem = t->target - now;
		ts = ns_ts(rem > 0 ? rem : 0);
		sv_poke(pid, o.rsi, &ts, sizeof(ts));
	}
	o.rax = (unsigned long long)ret;
	ptrace(PTRACE_SETREGS, pid, NULL, &o);
	ptrace(PTRACE_CONT, pid, NULL, NULL);
}

/*
 * A signal for a thread between two slices of its wait: the slice ran out
 * and on_slice_exit made the program's call again (RIP back on the syscall
 * instruction), then the kernel, on its way back to the program, found the
 * signal. Were the handler run from there, the call would be made again
 * after it, as if SA_RESTART, and a nanosleep would never end with EINTR
 * (preload_apps' static:eintr under a jump did that once in CI). Put back
 * as the kernel leaves a call a signal interrupted: after the instruction,
 * -ERESTARTNOHAND, so that the kernel decides as for its own calls: EINTR
 * once a handler runs, the call made again otherwise (the same deadline).
 * At this stop the kernel has not yet looked at the return value: it
 * does once the signal is delivered or dropped (handle_signal).
 */
void sv_between_slices(pid_t pid, struct thr *t)
{
	struct user_regs_struct r;

	if (ptrace(PTRACE_GETREGS, pid, NULL, &r) || r.rip != t->orig.rip - 2 ||
	    r.rax != t->orig.orig_rax || r.orig_rax != t->orig.orig_rax)
		return;
	write_remainder(pid, t);
	r.rip = t->orig.rip;
	r.rax = (unsigned long long)-514; /* ERESTARTNOHAND */
	ptrace(PTRACE_SETREGS, pid, NULL, &r);
}

#endif
