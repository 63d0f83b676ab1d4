/* SPDX-License-Identifier: MIT */
/*
 * Reader-side time API: typed now, OSI conversion, waiting for a clock to
 * start, sleeping in simulated time, rates and timers.
 *
 * Sleeping never polls. A sleeper loads the change futex word, takes one
 * consistent snapshot of the time function, and if the target is not yet
 * reached computes the CLOCK_MONOTONIC instant at which the current
 * function reaches it (none while paused or stepped). It then waits on the
 * futex word with that absolute deadline. Every commit of the writer bumps
 * the word and wakes the waiters, so a pause, resume, scale change, step or
 * jump makes the sleeper re-evaluate at once; if nothing changes, the
 * deadline wakes it when the target is reached.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include <shmclock/time.h>

#include "clock.h"
#include "jump.h"
#include "protocol.h"
#include "shim.h"

__extension__ typedef unsigned __int128 u128;

SHMCLOCK_EXPORT int shmclock_sim_now(shmclock_t *clk, shmclock_sim_time_t *t)
{
	return shmclock_now(clk, &t->ns);
}

SHMCLOCK_EXPORT shmclock_steady_time_t shmclock_steady_now(void)
{
	return (shmclock_steady_time_t){ shmclock__mono_ns() };
}

SHMCLOCK_EXPORT shmclock_sys_time_t shmclock_sys_now(void)
{
	return (shmclock_sys_time_t){ shmclock__realtime_ns() };
}

SHMCLOCK_EXPORT int shmclock_sim_to_sys(shmclock_t *clk, shmclock_sim_time_t t,
					shmclock_sys_time_t *out)
{
	shmclock_info_t i;
	int r = shmclock_info(clk, &i);

	if (r && r != -ESTALE)
		return r;
	if (!i.has_unix_at_zero)
		return -EOPNOTSUPP;
	out->ns = shmclock__sat_add(i.unix_at_zero_ns, t.ns);
	return 0;
}

/* The first CLOCK_MONOTONIC instant at which p's function reaches target. */
static int64_t mono_for(const struct shmclock_params *p, int64_t target)
{
	u128 need, dm;

	if (target <= p->sim_base)
		return p->mono_base;
	/* eval = sim_base + floor(dm * mult / 2^32) >= target
	 *   <=> dm >= ceil((target - sim_base) * 2^32 / mult) */
	need = (u128)((uint64_t)target - (uint64_t)p->sim_base) << 32; /* > 0, may pass INT64_MAX */
	dm = (need + p->mult - 1) / p->mult;
	if (dm > (u128)(INT64_MAX - (p->mono_base > 0 ? p->mono_base : 0)))
		return INT64_MAX;
	return p->mono_base + (int64_t)dm;
}

SHMCLOCK_EXPORT int shmclock_sim_to_steady(shmclock_t *clk, shmclock_sim_time_t t,
					   shmclock_steady_time_t *out)
{
	struct shmclock_params p;
	int64_t mono;
	uint32_t lock;
	int r = shmclock__snapshot(clk->seg, &p, &mono, &lock);

	if (r == -EAGAIN)
		return r;
	if (!(p.flags & SHMCLOCK_F_INIT))
		return -ENODATA;
	if (shmclock__eval(p.mono_base, p.sim_base, p.mult, mono) >= t.ns) {
		out->ns = mono;
		return 0;
	}
	if (p.mult == 0)
		return -EOVERFLOW;
	out->ns = mono_for(&p, t.ns);
	return 0;
}

static int64_t deadline_of(shmclock_duration_t timeout)
{
	return timeout.ns < 0 ? INT64_MAX : shmclock__sat_add(shmclock__mono_ns(), timeout.ns);
}

/* What is left of a deadline_of() deadline, as a timeout. */
static shmclock_duration_t remaining(int64_t deadline)
{
	int64_t left;

	if (deadline == INT64_MAX)
		return SHMCLOCK_DURATION_INFINITE;
	left = deadline - shmclock__mono_ns();
	return (shmclock_duration_t){ left > 0 ? left : 0 };
}

SHMCLOCK_EXPORT int shmclock_wait_started(shmclock_t *clk, shmclock_duration_t timeout)
{
	const struct shmclock_seg *s = clk->seg;
	int64_t deadline = deadline_of(timeout);

	for (;;) {
		/* Acquire pairs with the writer's release increment in
		 * commit_end; loaded before the check so no commit is missed. */
		uint32_t w = atomic_load_explicit(&s->change_futex, memory_order_acquire);
		struct shmclock_params p;
		int64_t mono;
		uint32_t lock;
		int r = shmclock__snapshot(s, &p, &mono, &lock);

		if (r != -EAGAIN && (p.flags & SHMCLOCK_F_INIT))
			return 0;
		if (shmclock__mono_ns() >= deadline)
			return -ETIMEDOUT;
		shmclock__futex_wait_until(&s->change_futex, w, deadline);
	}
}

SHMCLOCK_EXPORT uint32_t shmclock_change_token(shmclock_t *clk)
{
	/* Acquire pairs with the writer's release increment in commit_end:
	 * a reader that then sees this token's state sees the commit. */
	return atomic_load_explicit(&clk->seg->change_futex, memory_order_acquire);
}

SHMCLOCK_EXPORT int shmclock_wait_change(shmclock_t *clk, uint32_t token,
					 shmclock_duration_t timeout)
{
	const struct shmclock_seg *s = clk->seg;
	int64_t deadline = deadline_of(timeout);

	for (;;) {
		/* Acquire: as in shmclock_change_token(). */
		if (atomic_load_explicit(&s->change_futex, memory_order_acquire) != token)
			return 0;
		if (shmclock__mono_ns() >= deadline)
			return -ETIMEDOUT;
		/* Returns at once if the word is no longer @token. */
		shmclock__futex_wait_until(&s->change_futex, token, deadline);
	}
}

SHMCLOCK_EXPORT int shmclock_open_wait(const char *name, unsigned flags,
				       shmclock_duration_t timeout, shmclock_t **out)
{
	int64_t deadline = deadline_of(timeout);
	shmclock_t *clk;
	int r;

	if (!out)
		return -EINVAL;
	*out = NULL;
	/* The segment's appearance has no futex to wait on: poll for it
	 * every 5 ms (creation is atomic: the writer links a finished file). */
	while ((r = shmclock_open_ex(name, flags & ~SHMCLOCK_OPEN_FALLBACK_SYSTEM, &clk)) == -ENOENT) {
		int64_t left = deadline - shmclock__mono_ns();
		struct timespec ts = { 0, 5000000 };

		if (left <= 0)
			return -ETIMEDOUT;
		if (left < 5000000)
			ts.tv_nsec = (long)left;
		nanosleep(&ts, NULL);
	}
	if (r)
		return r;
	r = shmclock_wait_started(clk, remaining(deadline));
	if (r) {
		shmclock_close(clk);
		return r;
	}
	*out = clk;
	return 0;
}

/* --------------------------------------------------------------- sleep */

#define SIGNAL_WAIT_MAX_NS (3600 * 1000000000LL)
/*
 * A cancel cannot change the word a sleeper waits on (the segment's change
 * futex, which readers map read-only), so its FUTEX_WAKE finds nobody when
 * it lands between the sleeper's look at the token and its wait, and the
 * sleeper would sleep on to its deadline. Every wait is therefore at most
 * this long before the sleeper looks again: a cancel is seen at once, or
 * in the worst race within this time. (The TSan run of test_threads found
 * it; 20 wake-ups a second per sleeping thread is the price.)
 */
#define CANCEL_RECHECK_NS (50 * 1000000LL)

/* Set by the preload shim only (shim.h). */
int (*shmclock__signal_wait)(const _Atomic uint32_t *word, uint32_t val, int64_t deadline_mono);

static int sleep_core(struct shmclock *clk, int64_t target, bool relative, int64_t rel_ns,
		      unsigned flags, shmclock_duration_t timeout, shmclock_cancel_t *cancel)
{
	const struct shmclock_seg *s = clk->seg;
	int64_t deadline = deadline_of(timeout);
	/* Pairs with the release increment in shmclock_cancel_sleeps. */
	uint32_t gen0 = atomic_load_explicit(&clk->cancel_gen, memory_order_acquire);
	bool started = false;
	uint64_t epoch0 = 0;

	bool mono_tl = flags & SHMCLOCK__SLEEP_MONO;

	if (flags & ~(SHMCLOCK_SLEEP_JUMP_ERROR | SHMCLOCK__SLEEP_SIGNAL | SHMCLOCK__SLEEP_MONO))
		return -EINVAL;
	for (;;) {
		/* Loaded before the snapshot: a commit after this load changes
		 * the word, and the wait below then returns at once. Acquire
		 * pairs with the writer's release increment in commit_end. */
		uint32_t w = atomic_load_explicit(&s->change_futex, memory_order_acquire);
		struct shmclock_params p;
		int64_t mono, mono_open, wake = INT64_MAX;
		uint32_t lock;

		/* Acquire pairs with the release stores in shmclock_cancel*. */
		if ((cancel && atomic_load_explicit(&cancel->cancelled, memory_order_acquire)) ||
		    atomic_load_explicit(&clk->cancel_gen, memory_order_acquire) != gen0)
			return -ECANCELED;
		int r = shmclock__snapshot(s, &p, &mono, &lock);

		if (r == -EAGAIN) {
			/* A live writer stuck mid-update: look again shortly. */
			mono = shmclock__mono_ns();
			wake = mono + 1000000;
		} else {
			/* Callbacks see a jump before this thread acts on it. */
			if (shmclock__key(p.jump_epoch, p.flags) !=
			    atomic_load_explicit(&clk->seen_key, memory_order_acquire))
				shmclock__jump_deliver(clk);
			if (p.flags & SHMCLOCK_F_INIT) {
				int64_t now = shmclock__eval(p.mono_base, p.sim_base, p.mult, mono);
				/* The jump-free timeline: sim - jump_total, so its
				 * target is target + jump_total in simulation time. */
				int64_t jt = mono_tl ? p.jump_total_ns : 0;

				now = shmclock__sat_sub(now, jt);
				if (!started) {
					started = true;
					epoch0 = p.jump_epoch;
					if (relative)
						target = shmclock__sat_add(now, rel_ns);
				} else if (p.jump_epoch != epoch0 && !mono_tl) {
					if (flags & SHMCLOCK_SLEEP_JUMP_ERROR)
						return -EINTR;
					/* rclcpp#2383: a backward jump is no time elapsed. */
					if (relative && p.last_jump_ns < 0)
						target = shmclock__sat_add(target, p.last_jump_ns);
					epoch0 = p.jump_epoch;
				}
				if (now >= target)
					return 0;
				/* Held at an undecided instant: time goes on with
				 * the commit, which wakes us (not at a wake-up
				 * computed from the frozen clock: already past). */
				if (p.mult && !shmclock__held(r, lock))
					wake = mono_for(&p, shmclock__sat_add(target, jt));
				if (wake > (mono_open = shmclock__open_anchor(s, mono)))
					wake = mono_open;
			}
			/* A held snapshot's clock stops at the instant: the
			 * timeout and the re-checks below run on the real one. */
			if (shmclock__held(r, lock))
				mono = shmclock__mono_ns();
		}
		if (mono >= deadline)
			return -ETIMEDOUT;
		if (wake > deadline)
			wake = deadline;
		/* With a timeout the kernel ends the wait with EINTR after a
		 * signal handler even under SA_RESTART; without one it restarts
		 * it unseen. A signal-aware sleep therefore always has one. */
		if ((flags & SHMCLOCK__SLEEP_SIGNAL) && wake - mono > SIGNAL_WAIT_MAX_NS)
			wake = mono + SIGNAL_WAIT_MAX_NS;
		/* Not for the preload shim's signal-aware sleeps: nothing
		 * cancels them. */
		if (!(flags & SHMCLOCK__SLEEP_SIGNAL) && wake - mono > CANCEL_RECHECK_NS)
			wake = mono + CANCEL_RECHECK_NS;
		/* Returns on a commit, a cancel, a signal or the deadline; all
		 * of them lead back to the checks above, except a signal when
		 * the caller asked to see it (the shim's wait sees one handled
		 * between two waits as well). */
		if ((flags & SHMCLOCK__SLEEP_SIGNAL) && shmclock__signal_wait) {
			if (shmclock__signal_wait(&s->change_futex, w, wake) == -EINTR)
				return -EINTR;
		} else if (shmclock__futex_wait_until(&s->change_futex, w, wake) == -EINTR &&
			   (flags & SHMCLOCK__SLEEP_SIGNAL)) {
			return -EINTR;
		}
	}
}

int shmclock__plan(struct shmclock *clk, bool mono_tl, int64_t target, int64_t *now,
		   int64_t *due)
{
	struct shmclock_params p;
	int64_t mono, jt;
	uint32_t lock;

	int r = shmclock__snapshot(clk->seg, &p, &mono, &lock);

	if (r == -EAGAIN)
		return -EAGAIN;
	if (!(p.flags & SHMCLOCK_F_INIT))
		return 2;
	jt = mono_tl ? p.jump_total_ns : 0;
	*now = shmclock__sat_sub(shmclock__eval(p.mono_base, p.sim_base, p.mult, mono), jt);
	if (*now >= target)
		return 0;
	/* Held at an undecided instant: the frozen clock gives a due time
	 * already past, which would fire at once for ever; the commit comes
	 * as a change. */
	if (!p.mult || shmclock__held(r, lock))
		return 2;
	*due = mono_for(&p, shmclock__sat_add(target, jt));
	return 1;
}

int64_t shmclock__replan_at(struct shmclock *clk)
{
	return shmclock__open_anchor(clk->seg, shmclock__mono_ns());
}

SHMCLOCK_EXPORT int shmclock_sleep_until_ex(shmclock_t *clk, shmclock_sim_time_t t,
					    unsigned flags, shmclock_duration_t timeout,
					    shmclock_cancel_t *cancel)
{
	return sleep_core(clk, t.ns, false, 0, flags, timeout, cancel);
}

SHMCLOCK_EXPORT int shmclock_sleep_for_ex(shmclock_t *clk, shmclock_duration_t d, unsigned flags,
					  shmclock_duration_t timeout, shmclock_cancel_t *cancel)
{
	if (d.ns < 0)
		return -EINVAL;
	return sleep_core(clk, 0, true, d.ns, flags, timeout, cancel);
}

SHMCLOCK_EXPORT int shmclock_sleep_until(shmclock_t *clk, shmclock_sim_time_t t, unsigned flags)
{
	return shmclock_sleep_until_ex(clk, t, flags, SHMCLOCK_DURATION_INFINITE, NULL);
}

SHMCLOCK_EXPORT int shmclock_sleep_for(shmclock_t *clk, shmclock_duration_t d, unsigned flags)
{
	return shmclock_sleep_for_ex(clk, d, flags, SHMCLOCK_DURATION_INFINITE, NULL);
}

SHMCLOCK_EXPORT void shmclock_cancel(shmclock_t *clk, shmclock_cancel_t *cancel)
{
	/* Pairs with the sleeper's acquire load of cancelled. */
	atomic_store_explicit(&cancel->cancelled, 1, memory_order_release);
	shmclock__futex_wake_ro(&clk->seg->change_futex);
}

SHMCLOCK_EXPORT void shmclock_cancel_reset(shmclock_cancel_t *cancel)
{
	atomic_store_explicit(&cancel->cancelled, 0, memory_order_relaxed);
}

SHMCLOCK_EXPORT void shmclock_cancel_sleeps(shmclock_t *clk)
{
	/* Pairs with the sleepers' acquire loads of cancel_gen. */
	atomic_fetch_add_explicit(&clk->cancel_gen, 1, memory_order_release);
	shmclock__futex_wake_ro(&clk->seg->change_futex);
}

/* --------------------------------------------------------------- rate */

SHMCLOCK_EXPORT int shmclock_rate_init(shmclock_rate_t *r, shmclock_t *clk,
				       shmclock_duration_t period)
{
	if (!r || !clk || period.ns <= 0)
		return -EINVAL;
	*r = (shmclock_rate_t){ .clk = clk, .period_ns = period.ns };
	return 0;
}

SHMCLOCK_EXPORT void shmclock_rate_reset(shmclock_rate_t *r)
{
	r->scheduled = false;
	r->epoch = 0;
}

SHMCLOCK_EXPORT int shmclock_rate_sleep(shmclock_rate_t *r, uint64_t *missed)
{
	uint64_t m = 0;

	for (;;) {
		shmclock_info_t i;
		int e = shmclock_info(r->clk, &i);

		if (e && e != -ESTALE)
			return e;
		if (!i.initialized) {
			e = shmclock_wait_started(r->clk, SHMCLOCK_DURATION_INFINITE);
			if (e)
				return e;
			continue;
		}
		/* Not next_ns == 0 for "unset": a boundary at simulation time 0
		 * (a clock started before zero) would restart the schedule. */
		if (!r->scheduled || i.jump_epoch != r->epoch) {
			r->scheduled = true;
			/* First call, or the clock jumped (either way): a new
			 * schedule. Boundaries a forward jump passed over are not
			 * the caller's lateness, and counting them overflowed. */
			r->next_ns = shmclock__sat_add(i.sim_ns, r->period_ns);
		} else if (i.sim_ns >= r->next_ns) {
			/* Late: skip the boundaries that passed, this cycle ends now.
			 * (m + 1) * period cannot overflow: m < (2^64) / period. */
			m = ((uint64_t)i.sim_ns - (uint64_t)r->next_ns) / (uint64_t)r->period_ns;
			r->next_ns = (uint64_t)(m + 1) > (uint64_t)INT64_MAX / (uint64_t)r->period_ns
					     ? INT64_MAX
					     : shmclock__sat_add(r->next_ns, (int64_t)(m + 1) * r->period_ns);
			r->epoch = i.jump_epoch;
			break;
		}
		r->epoch = i.jump_epoch;
		e = shmclock_sleep_until_ex(r->clk, (shmclock_sim_time_t){ r->next_ns },
					    SHMCLOCK_SLEEP_JUMP_ERROR, SHMCLOCK_DURATION_INFINITE,
					    r->cancel);
		if (e == -EINTR)
			continue; /* re-plan against the jumped clock */
		if (e)
			return e;
		r->next_ns = shmclock__sat_add(r->next_ns, r->period_ns);
		break;
	}
	r->missed_total += m;
	if (missed)
		*missed = m;
	return 0;
}

/* --------------------------------------------------------------- timer */

struct shmclock_timer {
	shmclock_t *clk;
	shmclock_rate_t rate;
	shmclock_cancel_t cancel;
	shmclock_timer_cb cb;
	void *user;
	pthread_t thread;
	uint64_t runs;
};

static void *timer_main(void *arg)
{
	struct shmclock_timer *t = arg;

	for (;;) {
		uint64_t missed = 0;
		shmclock_sim_time_t now;

		if (shmclock_rate_sleep(&t->rate, &missed))
			break; /* cancelled */
		shmclock_sim_now(t->clk, &now); /* -ESTALE still fills it in */
		t->cb(now, missed, t->user);
		t->runs++;
	}
	return NULL;
}

SHMCLOCK_EXPORT int shmclock_timer_start(shmclock_t *clk, shmclock_duration_t period,
					 shmclock_timer_cb cb, void *user, shmclock_timer_t **out)
{
	struct shmclock_timer *t;
	int r;

	if (!clk || !cb || !out || period.ns <= 0)
		return -EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->clk = clk;
	t->cb = cb;
	t->user = user;
	shmclock_rate_init(&t->rate, clk, period);
	t->rate.cancel = &t->cancel;
	r = shmclock__thread_start(&t->thread, NULL, timer_main, t);
	if (r) {
		free(t);
		return -r;
	}
	*out = t;
	return 0;
}

SHMCLOCK_EXPORT uint64_t shmclock_timer_stop(shmclock_timer_t *t)
{
	uint64_t runs;

	if (!t)
		return 0;
	shmclock_cancel(t->clk, &t->cancel);
	pthread_join(t->thread, NULL);
	runs = t->runs;
	free(t);
	return runs;
}
