/* SPDX-License-Identifier: MIT */
/* Lockstep, the participant's side: join, grant, advance, leave (the
 * protocol, steps J, G and L: lockstep_layout.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <shmclock/lockstep.h>

#include "lockstep_layout.h"
#include "writer_seg.h"

struct shmclock_lockstep {
	shmclock_t *clk;
	struct ls_seg *ls;
	struct ls_slot *slot;
	uint32_t incarnation;
	int64_t last;       /* our last grant (the join time before any) */
	int64_t joined_at;
	uint32_t yield_backoff; /* waits left without yielding (yield_briefly) */
	const char *why;    /* the check the last refused grant failed */
	struct ls_stats *stats; /* our figures (0x4040 + 0x400 * slot) */
	int64_t granted_mono;   /* CLOCK_MONOTONIC of our last grant */
	int64_t seen;       /* the clock's time as we saw it last (never goes back) */
	unsigned forks;     /* `forks` when this process joined */
};

/* fork()s that made this process, counted in each child: a handle joined
 * before a fork is the parent's participant, not the child's copy's (its
 * grants would overwrite the parent's, its leave end the parent's
 * membership). Relaxed: read and written by this process's threads only,
 * the child's one thread first. */
static _Atomic unsigned forks;

static void count_fork(void)
{
	atomic_fetch_add_explicit(&forks, 1, memory_order_relaxed);
}

__attribute__((constructor)) static void watch_forks(void)
{
	pthread_atfork(NULL, NULL, count_fork);
}

static bool forked(const shmclock_lockstep_t *p)
{
	return atomic_load_explicit(&forks, memory_order_relaxed) != p->forks;
}

/* -ESTALE when the clock's writer is gone or is not the one that made
 * this participants' segment. */
static int writer_check(const shmclock_lockstep_t *p)
{
	const struct shmclock_seg *s = p->clk->seg;

	if (!shmclock__writer_alive(atomic_load_explicit(&s->writer_lock.word,
							 memory_order_acquire)) ||
	    atomic_load_explicit(&s->writer_generation, memory_order_relaxed) !=
		    p->ls->writer_generation ||
	    !atomic_load_explicit(&s->lockstep, memory_order_relaxed))
		return -ESTALE;
	return 0;
}

static bool still_member(const shmclock_lockstep_t *p)
{
	return atomic_load_explicit(&p->slot->state, memory_order_acquire) == LS_MEMBER &&
	       atomic_load_explicit(&p->slot->incarnation, memory_order_relaxed) == p->incarnation;
}

/* Take a free slot: its mutex is the claim (J1). NULL if none is free;
 * *soon is then set when a slot waits for the host to free it (its owner
 * left or died), so that a join right after a leave does not fail. */
static struct ls_slot *claim_slot(struct ls_seg *ls, bool *soon)
{
	*soon = false;
	for (unsigned i = 0; i < LS_SLOTS; i++) {
		struct ls_slot *sl = &ls->slot[i];
		int r = pthread_mutex_trylock(&sl->lock.mutex);
		uint32_t st;

		if (r == EOWNERDEAD)
			r = pthread_mutex_consistent(&sl->lock.mutex);
		if (r) {
			st = atomic_load_explicit(&sl->state, memory_order_acquire);
			*soon |= st == LS_LEFT;
			continue;
		}
		/* Not FREE: the host has not yet noticed that a former
		 * owner died or left; it will once we unlock. */
		st = atomic_load_explicit(&sl->state, memory_order_acquire);
		if (st == LS_FREE)
			return sl;
		*soon = true;
		pthread_mutex_unlock(&sl->lock.mutex);
	}
	return NULL;
}

#define JOIN_TIMEOUT_NS 2000000000

SHMCLOCK_EXPORT int shmclock_lockstep_join(const char *name, const char *who,
					   shmclock_lockstep_t **out)
{
	shmclock_lockstep_t *p;
	int64_t deadline;
	int r;

	if (!out || shmclock__ls_check_who(who) || shmclock__check_name(name))
		return -EINVAL;
	*out = NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	r = shmclock_open_ex(name, SHMCLOCK_OPEN_NO_CALLBACKS, &p->clk);
	if (r)
		goto fail;
	if (!atomic_load_explicit(&p->clk->seg->lockstep, memory_order_acquire)) {
		r = -EOPNOTSUPP;
		goto fail;
	}
	r = shmclock__ls_map_segment(name, p->clk, true, &p->ls);
	/* In lockstep (the flag above) with no participant file: not here
	 * (a container given only the clock's file), not "not lockstep". */
	if (r == -EOPNOTSUPP)
		r = -ENXIO;
	if (r)
		goto fail;
	r = writer_check(p);
	if (r)
		goto fail;
	if (shmclock__ls_name_taken(p->ls, who, -1)) {
		r = -EEXIST;
		goto fail;
	}
	deadline = shmclock__mono_ns() + JOIN_TIMEOUT_NS;
	for (;;) {
		bool soon;
		struct timespec ms = { 0, 1000000 };

		p->slot = claim_slot(p->ls, &soon);
		if (p->slot)
			break;
		if (!soon || shmclock__mono_ns() >= deadline) {
			r = -ENOSPC;
			goto fail;
		}
		shmclock__ls_kick_host(p->ls, false);
		nanosleep(&ms, NULL);
	}
	who_set(p->slot, who);
	atomic_store_explicit(&p->slot->pid, (int32_t)getpid(), memory_order_relaxed);
	atomic_store_explicit(&p->slot->tid, (int32_t)syscall(SYS_gettid), memory_order_relaxed);
	atomic_store_explicit(&p->slot->granted_mono, 0, memory_order_relaxed);
	p->stats = &p->ls->stats[p->slot - p->ls->slot];
	atomic_store_explicit(&p->stats->grants, 0, memory_order_relaxed);
	atomic_store_explicit(&p->stats->steps, 0, memory_order_relaxed);
	atomic_store_explicit(&p->stats->work_ns, 0, memory_order_relaxed);
	atomic_store_explicit(&p->stats->wait_ns, 0, memory_order_relaxed);
	atomic_store_explicit(&p->stats->returned_mono, 0, memory_order_relaxed);
	for (unsigned i = 0; i < LS_HIST; i++) {
		atomic_store_explicit(&p->stats->work_hist[i], 0, memory_order_relaxed);
		atomic_store_explicit(&p->stats->wait_hist[i], 0, memory_order_relaxed);
	}
	/* J1. Pairs with the host's acquire load of state (H1): who and pid
	 * are there when it sees JOINING. */
	atomic_store_explicit(&p->slot->state, LS_JOINING, memory_order_release);
	shmclock__ls_kick_host(p->ls, false);
	for (;;) {
		uint32_t a = atomic_load_explicit(&p->slot->ack, memory_order_acquire);
		uint32_t st = atomic_load_explicit(&p->slot->state, memory_order_acquire);
		uint32_t joining = LS_JOINING;

		if (st == LS_MEMBER)
			break; /* J2: acquire pairs with the host's CAS (H1) */
		r = writer_check(p);
		if (!r && st != LS_JOINING)
			/* Refused: for a name that another joiner took first,
			 * say so. */
			r = shmclock__ls_name_taken(p->ls, who, (int)(p->slot - p->ls->slot))
				    ? -EEXIST
				    : -ECANCELED;
		if (!r && shmclock__mono_ns() >= deadline)
			r = -ETIMEDOUT;
		/* Withdraw, unless the host accepted us just now. */
		if (r && atomic_compare_exchange_strong_explicit(&p->slot->state, &joining, LS_FREE,
								 memory_order_acq_rel,
								 memory_order_acquire)) {
			pthread_mutex_unlock(&p->slot->lock.mutex);
			goto fail;
		}
		if (r && joining == LS_MEMBER)
			break;
		if (r) { /* evicted before it began: leave the slot to the host */
			pthread_mutex_unlock(&p->slot->lock.mutex);
			goto fail;
		}
		shmclock__futex_wait(&p->slot->ack, a, 10000000);
	}
	p->incarnation = atomic_load_explicit(&p->slot->incarnation, memory_order_relaxed);
	p->forks = atomic_load_explicit(&forks, memory_order_relaxed);
	p->joined_at = atomic_load_explicit(&p->slot->joined_sim_ns, memory_order_relaxed);
	p->last = p->seen = p->joined_at;
	*out = p;
	return 0;
fail:
	if (p->ls)
		munmap(p->ls, LS_SIZE);
	shmclock_close(p->clk);
	free(p);
	return r;
}

SHMCLOCK_EXPORT int shmclock_lockstep_grant(shmclock_lockstep_t *p, int64_t until_ns)
{
	int64_t max;

	if (!p)
		return -EINVAL;
	if (__builtin_expect(forked(p), 0)) {
		p->why = "this process is a fork of the one that joined: the participant is "
			 "the parent's (join again here)";
		return -EPERM;
	}
	if (!still_member(p))
		return -ECANCELED;
	if (until_ns < p->last) {
		p->why = p->last == p->joined_at
				 ? "a grant before the clock time this participant joined at"
				 : "a grant before this participant's last grant (grants never go back)";
		return -EINVAL;
	}
	if (until_ns == INT64_MAX) {
		p->why = "a grant of INT64_MAX: beyond the clock's range";
		return -EINVAL;
	}
	if (until_ns == p->last)
		return 0;
	/* The horizon. A lockstep clock never goes back, so the time we saw
	 * last is a lower bound of its time now: a step shorter than the
	 * horizon needs no read of the clock. Relaxed: the host may change
	 * the horizon at any time (reload); either value is a valid check. */
	max = atomic_load_explicit(&p->slot->max_ahead_ns, memory_order_relaxed);
	if (until_ns > shmclock__sat_add(p->seen, max)) {
		int64_t now;
		int r = shmclock_now(p->clk, &now);

		if ((r == 0 || r == -ESTALE) && now > p->seen)
			p->seen = now;
		if (until_ns > shmclock__sat_add(p->seen, max)) {
			p->why = "a grant beyond the horizon: the clock's time + the writer's "
				 "MaxGrantAhead (--max-grant-ahead)";
			return -EINVAL;
		}
	}
	/* Our figures: the work since our last return from advance ends. */
	{
		int64_t now = shmclock__mono_ns();
		int64_t ret = atomic_load_explicit(&p->stats->returned_mono, memory_order_relaxed);

		if (ret) {
			stat_add(&p->stats->work_ns, p->stats->work_hist, now - ret);
			atomic_store_explicit(&p->stats->returned_mono, 0, memory_order_relaxed);
		}
		stat_inc(&p->stats->grants);
		p->granted_mono = now;
		/* Relaxed: a statistic; the grant's release below orders it
		 * for a host that reads it after the grant anyway. */
		atomic_store_explicit(&p->slot->granted_mono, now, memory_order_relaxed);
	}
	/* G1. Pairs with the host's acquire load of grant_ns (H2): all this
	 * participant did before is visible to whoever sees the clock at
	 * until_ns (the host commits it after that load). seq_cst for
	 * kick_host's scan of the other grants. */
	atomic_store_explicit(&p->slot->grant_ns, until_ns, memory_order_seq_cst);
	p->last = until_ns;
	shmclock__ls_kick_host(p->ls, true);
	return 0;
}

/* The clock reading of this thread's last shmclock_now() in advance(): the
 * instant it returns at, for its waiting time, without reading the clock
 * once more (a step is a few microseconds: a reading is ~1% of it). */
static _Thread_local int64_t read_mono;

static int64_t mono_kept(void)
{
	return read_mono = shmclock__mono_ns();
}

/* shmclock_now(), keeping its clock reading in read_mono (0 when the slow
 * path answered). */
static int now_keeping_mono(shmclock_t *clk, int64_t *now)
{
	if (__builtin_expect(shmclock_static_read(clk, mono_kept, NULL, now, NULL, NULL), 1))
		return 0;
	read_mono = 0;
	return shmclock_now(clk, now);
}

/* How long a waiter sleeps between checks of the writer's life: a dead
 * writer wakes nobody. */
#define LIFE_SLICE_NS 100000000

SHMCLOCK_EXPORT int shmclock_lockstep_advance(shmclock_lockstep_t *p, int64_t until_ns,
					      shmclock_duration_t timeout)
{
	const struct shmclock_seg *s;
	int64_t deadline;
	int r = shmclock_lockstep_grant(p, until_ns);

	if (r)
		return r;
	s = p->clk->seg;
	if (p->yield_backoff)
		p->yield_backoff--;
	deadline = timeout.ns < 0 ? INT64_MAX : shmclock__sat_add(shmclock__mono_ns(), timeout.ns);
	for (int spins = 0;; spins++) {
		/* Acquire: a commit after this load changes the word, so the
		 * wait below returns at once (pairs with writer.c's release
		 * increment after the commit). */
		uint32_t tok = atomic_load_explicit(&s->change_futex, memory_order_acquire);
		int64_t now, left;

		r = now_keeping_mono(p->clk, &now);
		if ((r == 0 || r == -ESTALE) && now >= until_ns) {
			int64_t m = read_mono ? read_mono : shmclock__mono_ns();

			p->seen = now;
			/* Our figures: the wait since our grant ends, work begins. */
			if (p->granted_mono)
				stat_add(&p->stats->wait_ns, p->stats->wait_hist, m - p->granted_mono);
			stat_inc(&p->stats->steps);
			atomic_store_explicit(&p->stats->returned_mono, m, memory_order_relaxed);
			return 0;
		}
		if (!still_member(p))
			return -ECANCELED;
		r = writer_check(p);
		if (r)
			return r;
		if (spins < SHMCLOCK_LS_PARTICIPANT_YIELDS && !p->yield_backoff) {
			if (!shmclock__ls_yield_briefly(&p->yield_backoff))
				spins = SHMCLOCK_LS_PARTICIPANT_YIELDS;
			continue;
		}
		left = deadline == INT64_MAX ? INT64_MAX : deadline - shmclock__mono_ns();
		if (left <= 0)
			return -ETIMEDOUT;
		shmclock__futex_wait(&s->change_futex, tok, left < LIFE_SLICE_NS ? left : LIFE_SLICE_NS);
	}
}

SHMCLOCK_EXPORT const char *shmclock_lockstep_strerror(const shmclock_lockstep_t *p, int err)
{
	switch (err) {
	case 0:
		return "success";
	case -EINVAL:
		if (p && p->why)
			return p->why;
		return "invalid argument: a grant before the participant's last one, beyond the "
		       "clock's time + MaxGrantAhead or INT64_MAX; or a participant name that is "
		       "not 1 to " SHMCLOCK__XSTR(SHMCLOCK_LOCKSTEP_WHO_MAX) " bytes of UTF-8 without "
		       "control characters; or a bad clock name";
	case -ENOENT:
		return "no such clock";
	case -EOPNOTSUPP:
		return "the clock is not in lockstep mode (shmclockd --lockstep N; a follower, --source "
		       "leader, becomes a lockstep host once it hears a leader in lockstep)";
	case -ENXIO:
		return "the clock is in lockstep mode, but its participant file "
		       "(/dev/shm/shmclock-lockstep.NAME) is not here: in a container, mount it beside "
		       "the clock's (doc/containers.md)";
	case -ENOSPC:
		return "all " SHMCLOCK__XSTR(SHMCLOCK_LOCKSTEP_SLOTS) " participant slots of this clock "
		       "are taken";
	case -EEXIST:
		return "a participant of this name has joined this clock already: names are "
		       "unique per clock";
	case -EACCES:
		return "not allowed to join: neither the clock's user nor in its ControlGroup";
	case -EPERM:
		if (p && p->why && forked(p))
			return p->why;
		return "the lockstep segment is not owned by the clock's owner: not believed";
	case -EPROTO:
		return "not a lockstep segment of this ABI version";
	case -ESTALE:
		return "the clock's writer is gone or was replaced (join again)";
	case -ETIMEDOUT:
		return "timed out: the clock did not reach the grant in time (or the writer did "
		       "not answer a join)";
	case -ECANCELED:
		return "this participant was evicted (by hand, a stall, or a broken slot), or its "
		       "join was refused";
	default:
		return shmclock_strerror(err);
	}
}

SHMCLOCK_EXPORT int64_t shmclock_lockstep_max_ahead(const shmclock_lockstep_t *p)
{
	return p ? atomic_load_explicit(&p->ls->max_ahead_ns, memory_order_relaxed) : 0;
}

SHMCLOCK_EXPORT int64_t shmclock_lockstep_joined_at(const shmclock_lockstep_t *p)
{
	return p ? p->joined_at : 0;
}

SHMCLOCK_EXPORT shmclock_t *shmclock_lockstep_clock(shmclock_lockstep_t *p)
{
	return p ? p->clk : NULL;
}

SHMCLOCK_EXPORT void shmclock_lockstep_leave(shmclock_lockstep_t *p)
{
	bool mine;

	if (!p)
		return;
	if (forked(p)) {
		/* This process's copy of its parent's participant: the
		 * membership, the slot and its lock are the parent's. Only the
		 * copy goes (this process's robust list never held the lock). */
		munmap(p->ls, LS_SIZE);
		shmclock_close(p->clk);
		free(p);
		return;
	}
	/* The slot's robust lock is the joining thread's (its TID in the lock
	 * word; relaxed: only this thread's own TID matters, which only this
	 * thread writes). */
	mine = (atomic_load_explicit(&p->slot->lock.word, memory_order_relaxed) &
		SHMCLOCK_LOCK_TID_MASK) == (uint32_t)gettid();
	if (still_member(p)) {
		/* L1. Release: pairs with the host's acquire load of state. */
		atomic_store_explicit(&p->slot->state, LS_LEFT, memory_order_release);
		shmclock__ls_kick_host(p->ls, false);
	}
	if (!mine) {
		/* Another thread (the header says: the joining one). It cannot
		 * release the lock (EPERM), and unmapping it under the joining
		 * thread's robust list would leave the kernel unable to release
		 * it when that thread ends: the slot lost for good. Left, the
		 * clock stops waiting for it now; the slot frees when the
		 * joining thread ends. The mapping stays for that. */
		shmclock_close(p->clk);
		free(p);
		return;
	}
	/* Evicted: the host frees the slot once it sees the lock released. */
	pthread_mutex_unlock(&p->slot->lock.mutex);
	munmap(p->ls, LS_SIZE);
	shmclock_close(p->clk);
	free(p);
}
