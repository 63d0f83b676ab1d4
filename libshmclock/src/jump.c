/* SPDX-License-Identifier: MIT */
/*
 * Jump callbacks (rcl's time jump callbacks, per process).
 *
 * Detection costs the fast path one compare: shmclock_now() builds a key
 * from the record's jump epoch, source and INIT bit and compares it with
 * clk->seen_key. On a difference the reading thread comes here, takes
 * jump_lock, runs the pre-jump callbacks, publishes the new key with a
 * release store, runs the post-jump callbacks. Other threads that read the
 * new record meanwhile see the old key, come here too and block on
 * jump_lock until delivery is over: no thread of the process is given the
 * new time before the pre-jump callbacks have returned.
 *
 * The registry is an RCU list (liburcu, bulletproof flavour: threads need
 * no registration, which suits a library). Delivery walks it inside a read
 * critical section; add and remove take reg_lock and never block a reader.
 * A callback may remove registrations: it cannot wait for a grace period
 * from inside a read section, so those are unlinked at once and freed by
 * the next remove or at close.
 *
 * fork(): only the forking thread goes on in a child. A lock another thread
 * held stays held there for ever, and a watcher thread is gone while its
 * handle says it runs (close would join a thread that does not exist). The
 * handlers at the end of this file keep a child's clocks usable: callbacks,
 * watchers, sleeps and close go on there as in the parent.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>

#include <urcu/urcu-bp.h>
#include <urcu/rculist.h>

#include <shmclock/time.h>

#include "clock.h"
#include "jump.h"
#include "protocol.h"

struct shmclock_jump_reg {
	struct cds_list_head node;
	shmclock_jump_threshold_t th;
	shmclock_jump_cb cb;
	void *user;
	uint64_t id;
	struct shmclock_jump_reg *next_dead;
};

/*
 * The clocks whose callbacks this thread is running, innermost first: a
 * callback of clock A may read clock B, which delivers B's jump on this
 * thread. A stack, not one pointer: the nested delivery must leave A marked,
 * or the callback's next read of A would wait for A's jump_lock, which this
 * thread holds, and a remove inside it would wait for a grace period inside
 * its own read section.
 */
struct delivery {
	const struct shmclock *clk;
	struct delivery *outer;
};
static _Thread_local struct delivery *delivering;

static bool delivering_on_this_thread(const struct shmclock *clk)
{
	for (const struct delivery *d = delivering; d; d = d->outer)
		if (d->clk == clk)
			return true;
	return false;
}

/* Grace periods in progress in this process (see fork_prepare). */
static _Atomic int grace_periods;
/* A child forked while a grace period was in progress: liburcu-bp's state
 * there is unknown, so removals wait for the delivery lock instead (every
 * walk of a registry holds it). */
static _Atomic bool no_grace;

void shmclock__jump_init(struct shmclock *clk)
{
	struct shmclock_params p;
	int64_t mono;
	uint32_t lock;

	pthread_mutex_init(&clk->jump_lock, NULL);
	pthread_mutex_init(&clk->reg_lock, NULL);
	pthread_mutex_init(&clk->watch_lock, NULL);
	CDS_INIT_LIST_HEAD(&clk->regs);
	clk->next_id = 1;
	/* What exists at open is not a jump. */
	if (shmclock__snapshot(clk->seg, &p, &mono, &lock) == -EAGAIN)
		p.jump_epoch = 0, p.flags = 0;
	atomic_store_explicit(&clk->seen_key, shmclock__key(p.jump_epoch, p.flags),
			      memory_order_relaxed);
}

static void fork_untrack(struct shmclock *clk);

static void free_graveyard(struct shmclock *clk)
{
	while (clk->graveyard) {
		struct shmclock_jump_reg *r = clk->graveyard;

		clk->graveyard = r->next_dead;
		free(r);
	}
}

void shmclock__jump_fini(struct shmclock *clk)
{
	struct shmclock_jump_reg *r, *tmp;

	shmclock_jump_watch(clk, false);
	fork_untrack(clk);
	/* The caller guarantees no other thread uses clk any more. */
	cds_list_for_each_entry_safe(r, tmp, &clk->regs, node)
		free(r);
	free_graveyard(clk);
	pthread_mutex_destroy(&clk->jump_lock);
	pthread_mutex_destroy(&clk->reg_lock);
	pthread_mutex_destroy(&clk->watch_lock);
}

static bool wants(const shmclock_jump_threshold_t *th, const shmclock_jump_t *j)
{
	if ((j->kind & SHMCLOCK_JUMP_CLOCK_CHANGE) && th->on_clock_change)
		return true;
	if ((j->kind & SHMCLOCK_JUMP_FORWARD) && th->min_forward_ns > 0 &&
	    j->delta_ns >= th->min_forward_ns)
		return true;
	if ((j->kind & SHMCLOCK_JUMP_BACKWARD) && th->min_backward_ns > 0 &&
	    -j->delta_ns >= th->min_backward_ns)
		return true;
	return false;
}

static void run_callbacks(struct shmclock *clk, const shmclock_jump_t *j, bool before)
{
	struct shmclock_jump_reg *r;
	/* In a child forked during a grace period, liburcu-bp's locks may be
	 * held by threads that did not come along: a new thread's first read
	 * lock would wait for them for ever. There the walk is protected by
	 * jump_lock alone, which the caller holds and removals wait for. */
	bool rcu = !atomic_load_explicit(&no_grace, memory_order_relaxed);

	if (rcu)
		urcu_bp_read_lock();
	cds_list_for_each_entry_rcu(r, &clk->regs, node) {
		/* What rcu_dereference orders, for TSan (pairs with add). */
		shmclock__tsan_acquire(r);
		if (wants(&r->th, j))
			r->cb(j, before, r->user);
		/* This reader is done with r before the grace period ends
		 * (pairs with the acquire after synchronize in remove). */
		shmclock__tsan_release(r);
	}
	if (rcu)
		urcu_bp_read_unlock();
}

static void fork_resume(struct shmclock *clk);

bool shmclock__jump_deliver(struct shmclock *clk)
{
	struct shmclock_params p;
	shmclock_jump_t j = { 0 };
	uint64_t key, old;
	int64_t mono;
	uint32_t lock;

	struct delivery me = { clk, delivering };

	/* Pairs with the release store in fork_child. */
	if (atomic_load_explicit(&clk->forked, memory_order_acquire))
		fork_resume(clk);

	/* A callback reading a clock whose jump this thread is delivering. */
	if (delivering_on_this_thread(clk))
		return false;
	if (clk->jumps_off) {
		if (shmclock__snapshot(clk->seg, &p, &mono, &lock) != -EAGAIN)
			/* Nobody to run before the jump; pairs as the store below. */
			atomic_store_explicit(&clk->seen_key, shmclock__key(p.jump_epoch, p.flags),
					      memory_order_release);
		return true;
	}
	pthread_mutex_lock(&clk->jump_lock);
	if (shmclock__snapshot(clk->seg, &p, &mono, &lock) == -EAGAIN)
		goto out;
	key = shmclock__key(p.jump_epoch, p.flags);
	old = atomic_load_explicit(&clk->seen_key, memory_order_relaxed);
	/* A forked child's stand-in, if fork_resume has not put the real key
	 * back yet: never a jump of its own. */
	if (old == SHMCLOCK_KEY_FORKED)
		old = clk->key_at_fork;
	if (key == old)
		goto out; /* another thread delivered it while we waited */
	j.jump_epoch = p.jump_epoch;
	j.source = (int)((p.flags & SHMCLOCK_F_SOURCE_MASK) >> SHMCLOCK_F_SOURCE_SHIFT);
	if ((key ^ old) & SHMCLOCK_KEY_FLAGS)
		j.kind |= SHMCLOCK_JUMP_CLOCK_CHANGE;
	if (p.jump_epoch > (old >> 16)) {
		j.jumps = (uint32_t)(p.jump_epoch - (old >> 16));
		j.delta_ns = p.last_jump_ns;
		if (j.delta_ns > 0)
			j.kind |= SHMCLOCK_JUMP_FORWARD;
		else if (j.delta_ns < 0)
			j.kind |= SHMCLOCK_JUMP_BACKWARD;
	} else if (p.jump_epoch < (old >> 16)) {
		j.kind |= SHMCLOCK_JUMP_CLOCK_CHANGE; /* a new clock under the same name */
	}
	delivering = &me;
	run_callbacks(clk, &j, true);
	/* Pairs with the acquire load of seen_key in shmclock_now: a thread
	 * that sees the new key also sees what the pre-jump callbacks did. */
	atomic_store_explicit(&clk->seen_key, key, memory_order_release);
	run_callbacks(clk, &j, false);
	delivering = me.outer;
out:
	pthread_mutex_unlock(&clk->jump_lock);
	/* A callback of this delivery forked: this is the child. */
	if (atomic_load_explicit(&clk->forked, memory_order_acquire))
		fork_resume(clk);
	return true;
}

SHMCLOCK_EXPORT int shmclock_jump_callback_add(shmclock_t *clk, shmclock_jump_threshold_t th,
					       shmclock_jump_cb cb, void *user, uint64_t *id)
{
	struct shmclock_jump_reg *r;

	if (!clk || !cb || th.min_forward_ns < 0 || th.min_backward_ns < 0 || clk->jumps_off)
		return -EINVAL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->th = th;
	r->cb = cb;
	r->user = user;
	pthread_mutex_lock(&clk->reg_lock);
	r->id = clk->next_id++;
	/* For TSan: the release that rcu_assign_pointer is (pairs with the
	 * acquire in run_callbacks). */
	shmclock__tsan_release(r);
	/* Publishes the initialised entry (rcu_assign_pointer inside). */
	cds_list_add_tail_rcu(&r->node, &clk->regs);
	pthread_mutex_unlock(&clk->reg_lock);
	if (id)
		*id = r->id;
	return 0;
}

SHMCLOCK_EXPORT int shmclock_jump_callback_remove(shmclock_t *clk, uint64_t id)
{
	struct shmclock_jump_reg *r, *found = NULL, *dead;

	pthread_mutex_lock(&clk->reg_lock);
	cds_list_for_each_entry(r, &clk->regs, node) {
		if (r->id == id) {
			found = r;
			cds_list_del_rcu(&r->node);
			found->next_dead = clk->graveyard;
			clk->graveyard = found;
			break;
		}
	}
	/* Inside a callback (of any clock) we are in a read section: waiting
	 * for a grace period would wait for ourselves. Freed later. */
	if (!found || delivering) {
		pthread_mutex_unlock(&clk->reg_lock);
		return found ? 0 : -ENOENT;
	}
	if (atomic_load_explicit(&no_grace, memory_order_relaxed)) {
		pthread_mutex_unlock(&clk->reg_lock);
		/* A delivery that may still see the entry holds jump_lock;
		 * one that starts later does not find it. Freed at close. */
		pthread_mutex_lock(&clk->jump_lock);
		pthread_mutex_unlock(&clk->jump_lock);
		return 0;
	}
	/* Take the list before the grace period: every entry on it was
	 * unlinked before synchronize starts, so its readers are waited for. */
	dead = clk->graveyard;
	clk->graveyard = NULL;
	/* Counted before reg_lock is released: fork_prepare, holding every
	 * reg_lock, sees every grace period that may already hold liburcu's
	 * lock. */
	atomic_fetch_add_explicit(&grace_periods, 1, memory_order_relaxed);
	pthread_mutex_unlock(&clk->reg_lock);
	urcu_bp_synchronize_rcu();
	atomic_fetch_sub_explicit(&grace_periods, 1, memory_order_relaxed);
	while (dead) {
		r = dead->next_dead;
		/* For TSan: the grace period has ordered every reader's use
		 * of the entry before this free (pairs with run_callbacks). */
		shmclock__tsan_acquire(dead);
		free(dead);
		dead = r;
	}
	return 0;
}

/* The clock whose watcher this thread is (clk->watcher may be stored by
 * pthread_create only after the thread has started). */
static _Thread_local const struct shmclock *watcher_of;

bool shmclock__on_own_watcher(const struct shmclock *clk)
{
	return watcher_of == clk;
}

static void *watcher(void *arg)
{
	struct shmclock *clk = arg;
	const struct shmclock_seg *s = clk->seg;

	watcher_of = clk;
	while (!atomic_load_explicit(&clk->watch_stop, memory_order_acquire)) {
		/* Acquire pairs with the writer's release increment in commit_end:
		 * loaded before the check, so a later commit changes it and the
		 * wait below returns at once instead of missing the change. */
		uint32_t w = atomic_load_explicit(&s->change_futex, memory_order_acquire);
		int64_t t;

		shmclock_now(clk, &t); /* delivers a pending jump */
		/* Bounded: a dead writer's successor or a stop both show up. */
		shmclock__futex_wait_until(&s->change_futex, w, shmclock__mono_ns() + 100000000);
	}
	return NULL;
}

static bool fork_resume_locked(struct shmclock *clk);

/* With watch_lock held. */
static int watch_start_locked(struct shmclock *clk)
{
	int r;

	atomic_store_explicit(&clk->watch_stop, false, memory_order_relaxed);
	r = -shmclock__thread_start(&clk->watcher, NULL, watcher, clk);
	clk->watching = r == 0;
	return r;
}

SHMCLOCK_EXPORT int shmclock_jump_watch(shmclock_t *clk, bool on)
{
	int r = 0;

	pthread_mutex_lock(&clk->watch_lock);
	/* In a forked child: whatever is asked now replaces the restart the
	 * first read would make (a watcher started here, or a close joining
	 * it, never meets fork_resume waiting for this lock). */
	fork_resume_locked(clk);
	if (on && !clk->watching) {
		r = watch_start_locked(clk);
	} else if (!on && clk->watching) {
		/* The watcher cannot wait for itself (a callback that closes
		 * its own clock: see shmclock_jump_watch). */
		if (shmclock__on_own_watcher(clk)) {
			pthread_mutex_unlock(&clk->watch_lock);
			return -EDEADLK;
		}
		/* Pairs with the watcher's acquire load of watch_stop. */
		atomic_store_explicit(&clk->watch_stop, true, memory_order_release);
		shmclock__futex_wake_ro(&clk->seg->change_futex);
		pthread_join(clk->watcher, NULL);
		clk->watching = false;
	}
	pthread_mutex_unlock(&clk->watch_lock);
	return r;
}

/* ------------------------------------------------------------------ fork */

/*
 * The clocks with callbacks (the preload shim's have none: it never comes
 * here, and registers no handler), and the handlers, registered once the
 * first of them opens.
 *
 * prepare takes the list lock and every registry lock (each held only for
 * an insert or an unlink, never across a callback or a grace period), so
 * that no registry is half-linked in the child; and liburcu-bp's own locks
 * (its fork support), unless a grace period is in progress or this thread
 * is inside a read section: either may wait for a callback that waits for
 * what the forking thread holds (a Python callback waiting for the GIL that
 * os.fork() holds) — then the child does without grace periods (no_grace).
 * In such a child liburcu-bp is not used at all (its locks may be held by
 * threads that are gone): registries are walked under their delivery lock
 * only, which removals wait for instead of a grace period.
 * The delivery locks are not taken (a callback may fork): in the child,
 * those of clocks this thread is not delivering are made anew, their
 * holders being gone, and so are the watch locks. Watchers start again at
 * the first read in the child (fork_resume), never inside fork().
 */
static pthread_mutex_t fork_lock = PTHREAD_MUTEX_INITIALIZER;
static CDS_LIST_HEAD(fork_clocks);
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static bool fork_urcu; /* prepare took liburcu-bp's locks */

static void fork_prepare(void)
{
	struct shmclock *clk;

	pthread_mutex_lock(&fork_lock);
	cds_list_for_each_entry(clk, &fork_clocks, fork_node)
		pthread_mutex_lock(&clk->reg_lock);
	/* Never again in a no_grace child: liburcu-bp's locks may be held
	 * there by threads that are gone. */
	fork_urcu = !delivering && !atomic_load_explicit(&grace_periods, memory_order_relaxed) &&
		    !atomic_load_explicit(&no_grace, memory_order_relaxed);
	if (fork_urcu)
		urcu_bp_before_fork();
}

static void fork_parent(void)
{
	struct shmclock *clk;

	if (fork_urcu)
		urcu_bp_after_fork_parent();
	cds_list_for_each_entry(clk, &fork_clocks, fork_node)
		pthread_mutex_unlock(&clk->reg_lock);
	pthread_mutex_unlock(&fork_lock);
}

static void fork_child(void)
{
	struct shmclock *clk;

	if (fork_urcu)
		urcu_bp_after_fork_child();
	else
		atomic_store_explicit(&no_grace, true, memory_order_relaxed);
	atomic_store_explicit(&grace_periods, 0, memory_order_relaxed);
	cds_list_for_each_entry(clk, &fork_clocks, fork_node) {
		pthread_mutex_unlock(&clk->reg_lock);
		pthread_mutex_init(&clk->watch_lock, NULL);
		/* Its thread did not come along. Another starts at the first
		 * read here, not now: a thread created inside fork() may wait
		 * for ever for a lock that fork left held (ASan's allocator
		 * did), and POSIX allows only async-signal-safe calls here. */
		if (clk->watching && shmclock__on_own_watcher(clk)) {
			/* A callback on the watcher forked: this thread is the
			 * child's watcher, and goes on as one. */
			clk->rewatch = false;
		} else {
			clk->rewatch = clk->watching;
			clk->watching = false;
		}
		if (!delivering_on_this_thread(clk)) {
			pthread_mutex_init(&clk->jump_lock, NULL);
			/* The first read comes to jump_deliver, and fork_resume. */
			clk->key_at_fork = atomic_load_explicit(&clk->seen_key, memory_order_relaxed);
			atomic_store_explicit(&clk->seen_key, SHMCLOCK_KEY_FORKED, memory_order_relaxed);
		}
		/* Pairs with the acquire loads in jump_deliver. */
		atomic_store_explicit(&clk->forked, true, memory_order_release);
	}
	pthread_mutex_unlock(&fork_lock);
}

/* The first read of a clock in a forked child: its key back, its watcher
 * started again. */
static void fork_resume(struct shmclock *clk)
{
	pthread_mutex_lock(&clk->watch_lock);
	if (fork_resume_locked(clk) && !clk->watching)
		watch_start_locked(clk);
	pthread_mutex_unlock(&clk->watch_lock);
}

/* With watch_lock held: the child's key back, then `forked` cleared (in
 * that order: a reader that sees it cleared finds the real key). Returns
 * whether the watcher is to start again. */
static bool fork_resume_locked(struct shmclock *clk)
{
	uint64_t forked_key = SHMCLOCK_KEY_FORKED;
	bool again;

	if (!atomic_load_explicit(&clk->forked, memory_order_relaxed))
		return false;
	/* Release: a reader that sees the key sees what came before it
	 * (as the store in jump_deliver). */
	atomic_compare_exchange_strong_explicit(&clk->seen_key, &forked_key, clk->key_at_fork,
						memory_order_release, memory_order_relaxed);
	again = clk->rewatch;
	clk->rewatch = false;
	/* Pairs with the acquire loads in jump_deliver. */
	atomic_store_explicit(&clk->forked, false, memory_order_release);
	return again;
}

static void fork_register(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/*
 * The threads the library starts (watchers, timers, a close on behalf of a
 * watcher) never start while another thread forks. glibc's pthread_create,
 * when it reuses the stack of a thread that has ended, frees that thread's
 * dynamically allocated TLS blocks (those of libraries loaded by dlopen: a
 * Python module's) after it has released the lock of its stack lists, and
 * fork() does not wait for it. A child forked in between gets that stack
 * with pointers to blocks freed already, and the child's next thread on it
 * frees them again: heap corruption in the child ("double free or
 * corruption (fasttop)", a block two threads use at once). So each thread
 * of ours is created under spawn_lock, which the prepare handler takes:
 * a fork waits for a pthread_create of ours to return. It is held across
 * pthread_create alone, which waits for nothing a forking thread holds in
 * its prepare handlers (glibc takes its malloc locks after them). Handlers
 * of their own, not fork_prepare's: a program that only starts timers
 * keeps liburcu-bp out of its forks.
 */
static pthread_mutex_t spawn_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t spawn_once = PTHREAD_ONCE_INIT;

static void spawn_prepare(void)
{
	pthread_mutex_lock(&spawn_lock);
}

/* In the parent and in the child alike: the forking thread holds it. */
static void spawn_release(void)
{
	pthread_mutex_unlock(&spawn_lock);
}

static void spawn_register(void)
{
	pthread_atfork(spawn_prepare, spawn_release, spawn_release);
}

int shmclock__thread_start(pthread_t *thread, const pthread_attr_t *attr, void *(*fn)(void *),
			   void *arg)
{
	int r;

	/* Before the lock: pthread_atfork waits for a fork in progress,
	 * whose prepare handler may be waiting for this lock. */
	pthread_once(&spawn_once, spawn_register);
	pthread_mutex_lock(&spawn_lock);
	r = pthread_create(thread, attr, fn, arg);
	pthread_mutex_unlock(&spawn_lock);
	return r;
}

void shmclock__fork_track(struct shmclock *clk)
{
	pthread_once(&fork_once, fork_register);
	pthread_mutex_lock(&fork_lock);
	cds_list_add(&clk->fork_node, &fork_clocks);
	pthread_mutex_unlock(&fork_lock);
}

static void fork_untrack(struct shmclock *clk)
{
	if (clk->jumps_off)
		return; /* never tracked (shmclock_open_ex) */
	pthread_mutex_lock(&fork_lock);
	cds_list_del(&clk->fork_node);
	pthread_mutex_unlock(&fork_lock);
}
