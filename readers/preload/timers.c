/* SPDX-License-Identifier: MIT */
/*
 * Timers on a simulated clock: POSIX timers, alarm(), setitimer(ITIMER_REAL)
 * and timerfds.
 *
 * A POSIX timer (and alarm, setitimer) is a real CLOCK_MONOTONIC timer (the
 * kernel delivers it, so sigevent semantics stay intact) plus its expiry in
 * simulated time. The planning thread re-plans the real timer when a change
 * of the clock moves its real expiry, and only then: since Linux 6.13 a
 * timer_settime() drops a signal of the timer that is queued but not yet
 * delivered, so a re-plan waits while the timer's signal is pending, and a
 * timer that fired in the instant before a re-plan is fired again (its
 * first signal was dropped): a signal is never lost, never added.
 *
 * A timerfd is handed to the program as an eventfd: read(2) gives the
 * expiry count and epoll sees it readable, as with a timerfd. The timerfd
 * thread sleeps (on a private futex, no descriptor) until the next
 * simulated expiry of any timerfd, and adds the expiries to the eventfd
 * through the shim's own copy of it (fds.c: kept out of the program's way,
 * never the program's number). One descriptor per timerfd beyond the
 * program's, and no limit on timers but the kernel's.
 *
 * Timelines (preload.h): a timer armed with a relative value, or on a
 * monotonic clock, expires on the jump-free timeline; one armed at an
 * absolute CLOCK_REALTIME time follows jumps. Differences, documented in
 * shmclock-run(1): TFD_TIMER_CANCEL_ON_SET is ignored; re-arming a blocking
 * timerfd does not clear expiries not yet read; after fork the child's
 * copy of a timerfd is driven by the parent only (as the file is shared),
 * and POSIX timers do not survive fork.
 *
 * One file past 800 lines: the three timer interfaces share one
 * re-arming thread and its lock; split, the lock's rules would span files.
 */
#include "preload.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <unistd.h>

#ifndef KCMP_FILE
#define KCMP_FILE 0
#endif

static int (*r_timer_create)(clockid_t, struct sigevent *, timer_t *);
static int (*r_timer_settime)(timer_t, int, const struct itimerspec *, struct itimerspec *);
static int (*r_timer_gettime)(timer_t, struct itimerspec *);
static int (*r_timer_delete)(timer_t);
static unsigned (*r_alarm)(unsigned);
static int (*r_setitimer)(__itimer_which_t, const struct itimerval *, struct itimerval *);
static int (*r_getitimer)(__itimer_which_t, struct itimerval *);
static int (*r_timerfd_create)(int, int);
static int (*r_timerfd_settime)(int, int, const struct itimerspec *, struct itimerspec *);
static int (*r_timerfd_gettime)(int, struct itimerspec *);
static int (*r_eventfd)(unsigned, int);

void shim_resolve_timers(void)
{
	RESOLVE(r_timer_create, "timer_create");
	RESOLVE(r_timer_settime, "timer_settime");
	RESOLVE(r_timer_gettime, "timer_gettime");
	RESOLVE(r_timer_delete, "timer_delete");
	RESOLVE(r_alarm, "alarm");
	RESOLVE(r_setitimer, "setitimer");
	RESOLVE(r_getitimer, "getitimer");
	RESOLVE(r_timerfd_create, "timerfd_create");
	RESOLVE(r_timerfd_settime, "timerfd_settime");
	RESOLVE(r_timerfd_gettime, "timerfd_gettime");
	RESOLVE(r_eventfd, "eventfd");
}

enum { K_POSIX, K_TFD };

struct sim_timer {
	bool used;
	bool armed;      /* has a pending simulated expiry */
	bool real_armed; /* K_POSIX: the real timer runs on the current plan */
	bool mono_tl;    /* expires on the jump-free timeline */
	int kind;
	timer_t real;    /* K_POSIX */
	int notify;      /* K_POSIX: sigev_notify, */
	int signo;       /* and sigev_signo */
	int fd;          /* K_TFD: the program's eventfd, */
	int alias[4];    /* and up to 4 more numbers it has for it (dup) */
	int nalias;
	int own_fd;      /* K_TFD: our copy of it, for writing (-1: lost) */
	clockid_t clock;
	int64_t next;       /* next expiry on its timeline */
	int64_t interval;   /* simulated period, 0: one-shot */
	int64_t real_first; /* K_POSIX: real monotonic instant planned for `next` */
	int64_t real_int;   /* K_POSIX: real period planned */
};

static pthread_mutex_t tlock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_timer *timers; /* [ntimers], grown on demand */
static int ntimers;
static int alarm_slot = -1; /* the timer behind alarm() and ITIMER_REAL */
static bool plan_running, tfd_running;
static _Atomic int tfd_live;      /* timerfds in the table */
static _Atomic uint32_t tfd_kick; /* bumped to wake the timerfd thread */

/* Timer calls may come from signal handlers (timer_settime is
 * async-signal-safe): signals stay blocked while tlock is held. */
/* Nor can a cancel end a thread that holds it (a close the shim makes
 * under it would otherwise be a cancellation point): cancellation is off
 * meanwhile, and the shim's own reads, writes and closes are raw system
 * calls. */
static __thread int tlock_cancel;

static void tlock_take(sigset_t *old)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, old);
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &tlock_cancel);
	pthread_mutex_lock(&tlock);
}

static void tlock_drop(const sigset_t *old)
{
	pthread_mutex_unlock(&tlock);
	pthread_setcancelstate(tlock_cancel, NULL);
	pthread_sigmask(SIG_SETMASK, old, NULL);
}

/* fork waits for tlock: the child gets the table whole (not mid-realloc,
 * not a descriptor adopted and not yet recorded). */
static sigset_t fork_mask;

void shim_timers_before_fork(void)
{
	tlock_take(&fork_mask);
}

void shim_timers_after_fork_parent(void)
{
	tlock_drop(&fork_mask);
}

/* A vfork or posix_spawn child shares this table with its parent: its
 * timer calls go to the kernel, never into the parent's timers. */
static bool foreign(void)
{
	return getpid() != shim_pid;
}

/* Wake the timerfd thread: a timerfd was set, or the clock changed. The
 * release pairs with its acquire load before it plans: it sees what was
 * set before the bump. */
static void kick(void)
{
	atomic_fetch_add_explicit(&tfd_kick, 1, memory_order_release);
	syscall(SYS_futex, &tfd_kick, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static struct sim_timer *timer_find(timer_t id)
{
	for (int i = 0; i < ntimers; i++)
		if (timers[i].used && timers[i].kind == K_POSIX && timers[i].real == id)
			return &timers[i];
	return NULL;
}

/* Whether the program's fd still is our eventfd (it may have closed it by
 * a raw system call and got the number back for something else). Without
 * kcmp (seccomp, an old kernel) we believe it. */
static bool tfd_same(const struct sim_timer *t)
{
	long r;

	if (t->own_fd < 0)
		return true;
	r = syscall(SYS_kcmp, (long)getpid(), (long)getpid(), KCMP_FILE, (long)t->fd,
		    (long)t->own_fd);
	return r == 0 || (r < 0 && (errno == ENOSYS || errno == EPERM));
}

static void tfd_drop(struct sim_timer *t)
{
	if (t->own_fd >= 0)
		shim_fd_release(t->own_fd);
	t->used = false;
	atomic_fetch_sub_explicit(&tfd_live, 1, memory_order_relaxed);
}

/* Whether the program names @t by @fd. */
static bool tfd_named(const struct sim_timer *t, int fd)
{
	if (t->fd == fd)
		return true;
	for (int k = 0; k < t->nalias; k++)
		if (t->alias[k] == fd)
			return true;
	return false;
}

static struct sim_timer *tfd_find(int fd)
{
	for (int i = 0; i < ntimers; i++) {
		struct sim_timer *t = &timers[i];

		if (t->used && t->kind == K_TFD && tfd_named(t, fd)) {
			if (tfd_same(t))
				return t;
			/* Closed or replaced unseen (a raw system call): which of
			 * the two numbers changed is unknown, so ours is forgotten,
			 * never closed: it may be the program's file now. */
			shim_fd_forget(t->own_fd);
			t->own_fd = -1;
			tfd_drop(t);
		}
	}
	return NULL;
}

/* Hand @k expiries to the program's timerfd: only through our copy, and
 * only while it still is the program's eventfd (kcmp): a program's dup2 or
 * close_range racing the copy's placement may have put its own file at
 * that number. Then the copy is forgotten, never written or closed. */
static void tfd_deliver(struct sim_timer *t, uint64_t k)
{
	if (!k || t->own_fd < 0)
		return;
	if (!tfd_same(t)) {
		shim_fd_forget(t->own_fd);
		t->own_fd = -1;
		return;
	}
	(void)!syscall(SYS_write, t->own_fd, &k, sizeof(k));
}

/* ------------------------------------------------------------ the fds' side */

bool shim_timers_live(void)
{
	return atomic_load_explicit(&tfd_live, memory_order_relaxed) > 0;
}

void shim_timers_lock(sigset_t *old)
{
	tlock_take(old);
}

void shim_timers_unlock(const sigset_t *old)
{
	tlock_drop(old);
}

/* The program takes our number @fd (dup2 onto it): ours moves. tlock held. */
void shim_timers_claim_locked(int fd)
{
	if (shim_fd_is_own(fd)) {
		int to = shim_fd_move(fd);

		for (int i = 0; i < ntimers; i++)
			if (timers[i].used && timers[i].kind == K_TFD && timers[i].own_fd == fd)
				timers[i].own_fd = to;
	}
}

void shim_timers_claim(int fd)
{
	sigset_t o;

	tlock_take(&o);
	shim_timers_claim_locked(fd);
	tlock_drop(&o);
}

/* The program is closing its descriptors [lo, hi] (close, dup2 onto them,
 * close_range): its timerfds among them go. Not from a vfork child
 * (our table is the parent's, our descriptors are not its). By number, not
 * by kcmp, which a seccomp profile may deny. */
void shim_timers_closed_locked(int lo, int hi)
{
	if (foreign()) /* the parent's aliases are the parent's */
		return;
	for (int i = 0; i < ntimers; i++) {
		struct sim_timer *t = &timers[i];
		int kept = 0;

		if (!t->used || t->kind != K_TFD)
			continue;
		for (int k = 0; k < t->nalias; k++)
			if (t->alias[k] < lo || t->alias[k] > hi)
				t->alias[kept++] = t->alias[k];
		t->nalias = kept;
		if (t->fd < lo || t->fd > hi)
			continue;
		if (t->nalias) /* still open under another number */
			t->fd = t->alias[--t->nalias];
		else
			tfd_drop(t);
	}
}

void shim_timers_closed(int lo, int hi)
{
	sigset_t o;

	if (foreign())
		return;
	tlock_take(&o);
	shim_timers_closed_locked(lo, hi);
	tlock_drop(&o);
}

/* The program's number @to is now a copy of its @from (dup, dup2, dup3,
 * F_DUPFD): a timerfd keeps ticking under either. */
void shim_timers_dup_locked(int from, int to)
{
	if (from == to || foreign())
		return;
	for (int i = 0; i < ntimers; i++) {
		struct sim_timer *t = &timers[i];

		if (t->used && t->kind == K_TFD && tfd_named(t, from) && !tfd_named(t, to) &&
		    t->nalias < (int)(sizeof(t->alias) / sizeof(t->alias[0])))
			t->alias[t->nalias++] = to;
	}
}

void shim_timers_dup(int from, int to)
{
	sigset_t o;

	if (from == to || foreign())
		return;
	tlock_take(&o);
	shim_timers_dup_locked(from, to);
	tlock_drop(&o);
}

/* ------------------------------------------------------------ POSIX timers */

/* Account @k expiries of the real timer since the plan. tlock held. */
static void expired(struct sim_timer *t, int64_t k)
{
	if (t->real_int > 0) {
		t->next = shmclock__sat_add(t->next, k * t->interval);
		t->real_first += k * t->real_int;
	} else {
		t->armed = false;
	}
}

/* Learn from the kernel what happened since the last plan. tlock held. */
static void timer_sync(struct sim_timer *t)
{
	struct itimerspec cur;
	int64_t left, now;

	if (t->kind != K_POSIX || !t->armed || !t->real_armed)
		return;
	if (r_timer_gettime(t->real, &cur))
		return;
	left = ts_to_ns(&cur.it_value);
	if (left == 0) {
		t->armed = false; /* one-shot: fired */
		t->real_armed = false;
		return;
	}
	if (t->real_int > 0) {
		/* Periodic: count the expiries the kernel has delivered since
		 * the plan, and move the plan's origin past them too, so that a
		 * second look (timer_gettime, then a re-plan) does not count
		 * them again and push the next expiry out. */
		now = shmclock__mono_ns();
		expired(t, (now + left - t->real_first + t->real_int / 2) / t->real_int);
	}
}

/* Whether a signal of @t may be queued and not delivered yet: only a
 * process-directed one can be seen (in the pending set of the planning
 * thread, which blocks every signal). */
static bool sig_pending(const struct sim_timer *t)
{
	sigset_t p;

	return t->notify == SIGEV_SIGNAL && !sigpending(&p) && sigismember(&p, t->signo) == 1;
}

enum { PLAN_HOLD, PLAN_FIRE, PLAN_RUN };

/*
 * Plan the real timer of @t from the current mapping (tlock held). From the
 * program's own timer_settime (@program), always; from the planning thread,
 * only when the real expiry moves. Returns false when the re-plan must wait
 * (a signal of the timer is pending): look again shortly.
 */
static bool posix_plan(struct sim_timer *t, bool program)
{
	struct itimerspec its = { { 0, 0 }, { 0, 0 } }, old;
	int64_t now, due, first = 0, per = 0;
	shmclock_info_t i;
	bool was = t->real_armed;
	int how, r;

	timer_sync(t);
	if (!t->armed) {
		if (program) {
			r_timer_settime(t->real, 0, &its, NULL);
			t->real_armed = false;
		}
		return true;
	}
	if (shmclock_info(shim_clk, &i) || !i.initialized)
		return true; /* looked at again on the next change */
	r = shmclock__plan(shim_clk, t->mono_tl, t->next, &now, &due);
	if (r < 0)
		return true;
	if (r == 0 && (i.paused || i.stepped || !(i.scale > 0))) {
		how = PLAN_FIRE; /* due, and no running mapping to plan with */
	} else if (r == 2 || i.paused || i.stepped || !(i.scale > 0)) {
		how = PLAN_HOLD; /* wait for the next change */
	} else {
		how = PLAN_RUN;
		if (r == 0)
			due = i.mono_ns;
		first = due > i.mono_ns ? due : i.mono_ns + 1;
		per = t->interval > 0 ? (int64_t)((double)t->interval / i.scale) : 0;
		if (t->interval > 0 && per < 1)
			per = 1;
	}
	if (!program) {
		/* Nothing moved: leave the kernel's timer (and its signal)
		 * alone. A timer held already is disarmed. */
		if (how == PLAN_RUN && was && t->real_int == per &&
		    llabs(t->real_first - first) <= 1000)
			return true;
		if (how == PLAN_HOLD && !was)
			return true;
		if (sig_pending(t))
			return false;
	}
	if (how == PLAN_FIRE) {
		if (t->interval > 0) {
			int64_t k = (now - t->next) / t->interval + 1;

			t->next = shmclock__sat_add(t->next, k * t->interval);
		} else {
			t->armed = false;
		}
		its.it_value.tv_nsec = 1;
	} else if (how == PLAN_RUN) {
		ns_to_ts(first, &its.it_value);
		ns_to_ts(per, &its.it_interval);
	}
	if (r_timer_settime(t->real, how == PLAN_RUN ? TIMER_ABSTIME : 0, &its, &old))
		return true;
	t->real_armed = how == PLAN_RUN;
	t->real_first = first;
	t->real_int = per;
	/* A one-shot that fired between timer_sync and timer_settime: if its
	 * signal is still queued, our settime dropped it. Fire it again. */
	if (!program && was && old.it_interval.tv_sec == 0 && old.it_interval.tv_nsec == 0 &&
	    old.it_value.tv_sec == 0 && old.it_value.tv_nsec == 0 && sig_pending(t)) {
		struct itimerspec now1 = { { 0, 0 }, { 0, 1 } };

		t->armed = false;
		t->real_armed = false;
		r_timer_settime(t->real, 0, &now1, NULL);
	}
	return true;
}

/* The helpers never run the program's signal handlers. */
static int start_thread(void *(*fn)(void *))
{
	pthread_attr_t a;
	pthread_t th;
	sigset_t all, old;
	int r;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&a, 64 * 1024);
	r = pthread_create(&th, &a, fn, NULL);
	pthread_attr_destroy(&a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return r;
}

/* Re-plans the POSIX timers on each change of the clock, and wakes the
 * timerfd thread. Sleeps on the clock's change word otherwise. */
static void *plan_main(void *arg)
{
	(void)arg;
	/* Its calls are the shim's own, all real. */
	shim_passthru = 1;
	for (;;) {
		/* Taken before planning: a change after this makes the wait
		 * below return at once. */
		uint32_t tok = shmclock_change_token(shim_clk);
		bool later = false;
		int64_t at;
		sigset_t old;

		tlock_take(&old);
		for (int k = 0; k < ntimers; k++)
			if (timers[k].used && timers[k].kind == K_POSIX && timers[k].armed &&
			    !posix_plan(&timers[k], false))
				later = true;
		if (atomic_load_explicit(&tfd_live, memory_order_relaxed))
			kick();
		tlock_drop(&old);
		/* A re-plan held back by a pending signal: 1 ms, until the
		 * program has taken it; a change decided for an instant: then. */
		at = shmclock__replan_at(shim_clk);
		if (at != INT64_MAX)
			at = at - shmclock__mono_ns() + 1;
		if (later && (at == INT64_MAX || at > 1000000))
			at = 1000000;
		shmclock_wait_change(shim_clk, tok,
				     at == INT64_MAX ? SHMCLOCK_DURATION_INFINITE
						     : (shmclock_duration_t){ at > 0 ? at : 0 });
	}
	return NULL;
}

/* ------------------------------------------------------------ timerfds */

/* Deliver every timerfd expiry that is due; the real instant of the next
 * one (INT64_MAX: none until a change). tlock held. */
static int64_t tfd_service(void)
{
	int64_t wake = INT64_MAX;

	for (int k = 0; k < ntimers; k++) {
		struct sim_timer *t = &timers[k];
		int64_t now = INT64_MIN, due;
		int r;

		if (!t->used || t->kind != K_TFD || !t->armed)
			continue;
		r = shmclock__plan(shim_clk, t->mono_tl, t->next, &now, &due);
		if (r == 0 && now != INT64_MIN) {
			uint64_t n = 1;

			if (t->interval > 0) {
				n = (uint64_t)((now - t->next) / t->interval) + 1;
				t->next = shmclock__sat_add(t->next, (int64_t)n * t->interval);
				r = shmclock__plan(shim_clk, t->mono_tl, t->next, &now, &due);
			} else {
				t->armed = false;
			}
			tfd_deliver(t, n);
		}
		if (t->armed && r == 1 && due < wake)
			wake = due;
		else if (t->armed && r == 0) /* due again already: at once */
			wake = 0;
		else if (t->armed && r < 0) /* a writer stuck mid-update */
			wake = shmclock__mono_ns() + SLICE_NS;
	}
	/* A change decided for an instant takes effect there by itself (a
	 * held timerfd may run from there): look again then. */
	for (int k = 0; k < ntimers; k++) {
		if (timers[k].used && timers[k].kind == K_TFD && timers[k].armed) {
			int64_t at = shmclock__replan_at(shim_clk);

			if (at < wake)
				wake = at;
			break;
		}
	}
	return wake;
}

static void *tfd_main(void *arg)
{
	(void)arg;
	shim_passthru = 1;
	for (;;) {
		uint32_t seen = atomic_load_explicit(&tfd_kick, memory_order_acquire);
		struct timespec ts, *tsp = NULL;
		int64_t wake;
		sigset_t old;

		tlock_take(&old);
		wake = tfd_service();
		tlock_drop(&old);
		if (wake != INT64_MAX) {
			ns_to_ts(wake, &ts);
			tsp = &ts;
		}
		/* Until the next expiry (absolute CLOCK_MONOTONIC), or a kick. */
		syscall(SYS_futex, &tfd_kick, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, seen, tsp,
			NULL, FUTEX_BITSET_MATCH_ANY);
	}
	return NULL;
}

/* tlock held. */
static int helpers_start(bool tfd)
{
	int r = 0;

	if (!plan_running && !(r = start_thread(plan_main)))
		plan_running = true;
	if (!r && tfd && !tfd_running && !(r = start_thread(tfd_main)))
		tfd_running = true;
	return r;
}

/* Timers and the helper threads do not survive fork (POSIX); the child's
 * copies of our descriptors are closed. */
void shim_timers_after_fork(void)
{
	pthread_mutex_init(&tlock, NULL);
	for (int i = 0; i < ntimers; i++)
		if (timers[i].used && timers[i].kind == K_TFD && timers[i].own_fd >= 0)
			shim_fd_release(timers[i].own_fd);
	free(timers);
	timers = NULL;
	ntimers = 0;
	alarm_slot = -1;
	plan_running = false;
	tfd_running = false;
	atomic_store_explicit(&tfd_live, 0, memory_order_relaxed);
	/* As the prepare handler found them (tlock_take changed both). */
	pthread_setcancelstate(tlock_cancel, NULL);
	pthread_sigmask(SIG_SETMASK, &fork_mask, NULL);
}

/* tlock held. A free slot, or -1 (no memory). */
static int timer_slot(void)
{
	struct sim_timer *grown;
	int n, first = ntimers;

	for (int i = 0; i < ntimers; i++)
		if (!timers[i].used)
			return i;
	n = ntimers ? 2 * ntimers : 16;
	grown = realloc(timers, (size_t)n * sizeof(*timers));
	if (!grown)
		return -1;
	memset(grown + ntimers, 0, (size_t)(n - ntimers) * sizeof(*timers));
	timers = grown;
	ntimers = n;
	return first;
}

/* tlock held. A slot for a new simulated POSIX timer around @real, or -1. */
static int timer_add(timer_t real, clockid_t id, const struct sigevent *sev)
{
	int i = timer_slot();

	if (i >= 0)
		timers[i] = (struct sim_timer){
			.used = true, .kind = K_POSIX, .real = real, .clock = id,
			.notify = sev ? sev->sigev_notify : SIGEV_SIGNAL,
			.signo = sev ? sev->sigev_signo : SIGALRM,
		};
	return i;
}

EXPORT int timer_create(clockid_t id, struct sigevent *sev, timer_t *out)
{
	SHIM_PASSTHRU_SCOPE;
	sigset_t old;
	timer_t real_t;
	int slot;

	if (!sim_on(id) || foreign())
		return r_timer_create(id, sev, out);
	if (r_timer_create(CLOCK_MONOTONIC, sev, &real_t))
		return -1;
	tlock_take(&old);
	slot = timer_add(real_t, id, sev);
	if (slot >= 0 && helpers_start(false)) {
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
	int64_t left = t->armed ? dl_left(&(struct deadline){ t->mono_tl, t->next }) : 0;

	if (t->armed && left <= 0)
		left = 1;
	ns_to_ts(left, &cur->it_value);
	ns_to_ts(t->interval, &cur->it_interval);
}

/* tlock held: arm (or disarm) @t as timer_settime() would; @abs: the value
 * is an absolute time on the timer's clock. */
static void sim_set(struct sim_timer *t, bool abs, const struct itimerspec *v,
		    struct itimerspec *old)
{
	timer_sync(t);
	if (old)
		sim_get(t, old);
	/* Setting a timerfd clears the expiries not read yet. Only where a
	 * read cannot block: our copy shares the program's O_NONBLOCK, as it
	 * is now (fcntl may have changed it since timerfd_create). */
	if (t->kind == K_TFD && t->own_fd >= 0 && (syscall(SYS_fcntl, t->own_fd, F_GETFL) & O_NONBLOCK)) {
		uint64_t k;

		(void)!syscall(SYS_read, t->own_fd, &k, sizeof(k));
	}
	t->interval = ts_to_ns(&v->it_interval);
	t->armed = v->it_value.tv_sec || v->it_value.tv_nsec;
	if (t->armed) {
		struct deadline d = abs ? dl_at(t->clock, &v->it_value)
					: dl_after(ts_to_ns(&v->it_value));

		t->mono_tl = d.mono;
		t->next = d.target;
	}
	if (t->kind == K_TFD)
		kick();
	else
		(void)posix_plan(t, true);
}

static bool bad_its(const struct itimerspec *v)
{
	return !v || v->it_value.tv_nsec < 0 || v->it_value.tv_nsec >= NS ||
	       v->it_interval.tv_nsec < 0 || v->it_interval.tv_nsec >= NS ||
	       v->it_value.tv_sec < 0 || v->it_interval.tv_sec < 0;
}

/* What a program names a simulated timer by: a POSIX timer, or a timerfd. */
struct tkey {
	bool tfd;
	timer_t id;
	int fd;
};

/* tlock held. */
static struct sim_timer *key_find(struct tkey k)
{
	return k.tfd ? tfd_find(k.fd) : timer_find(k.id);
}

/* timer_settime / timerfd_settime on a simulated timer: true with *ret
 * (0, or -1 and errno) when @k is one; false when it is not ours. */
static bool settime(struct tkey k, bool abs, bool bad_flags, const struct itimerspec *v,
		    struct itimerspec *old, int *ret)
{
	struct sim_timer *t;
	bool bad = bad_flags || bad_its(v);
	sigset_t o;

	tlock_take(&o);
	t = key_find(k);
	if (t && !bad)
		sim_set(t, abs, v, old);
	tlock_drop(&o);
	if (t && bad)
		errno = EINVAL;
	*ret = t && bad ? -1 : 0;
	return t != NULL;
}

/* timer_gettime / timerfd_gettime: true with *cur when @k is ours. */
static bool gettime(struct tkey k, struct itimerspec *cur)
{
	struct sim_timer *t;
	sigset_t o;

	tlock_take(&o);
	t = key_find(k);
	if (t) {
		timer_sync(t);
		sim_get(t, cur);
	}
	tlock_drop(&o);
	return t != NULL;
}

EXPORT int timer_settime(timer_t id, int flags, const struct itimerspec *v, struct itimerspec *old)
{
	SHIM_PASSTHRU_SCOPE;
	int r;

	if (sim_active() && !foreign() &&
	    settime((struct tkey){ .id = id }, flags & TIMER_ABSTIME, false, v, old, &r))
		return r;
	return r_timer_settime(id, flags, v, old);
}

EXPORT int timer_gettime(timer_t id, struct itimerspec *cur)
{
	SHIM_PASSTHRU_SCOPE;
	if (sim_active() && !foreign() && gettime((struct tkey){ .id = id }, cur))
		return 0;
	return r_timer_gettime(id, cur);
}

EXPORT int timer_delete(timer_t id)
{
	SHIM_PASSTHRU_SCOPE;
	struct sim_timer *t;
	sigset_t o;

	if (sim_active() && !foreign()) {
		tlock_take(&o);
		t = timer_find(id);
		if (t) {
			t->used = false;
			if (alarm_slot >= 0 && t == &timers[alarm_slot])
				alarm_slot = -1;
		}
		tlock_drop(&o);
	}
	return r_timer_delete(id);
}

/* ------------------------------------------------------------ alarm, itimer */

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
	alarm_slot = timer_add(real_t, CLOCK_MONOTONIC, &sev);
	if (alarm_slot < 0 || helpers_start(false)) {
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
	SHIM_PASSTHRU_SCOPE;
	struct itimerspec v, o;
	struct sim_timer *t;
	sigset_t s;

	if (which != ITIMER_REAL || !sim_on(CLOCK_REALTIME) || !nv || foreign())
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
		sim_set(t, false, &v, &o);
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
	SHIM_PASSTHRU_SCOPE;
	struct itimerspec c = { { 0, 0 }, { 0, 0 } };
	sigset_t s;

	if (which != ITIMER_REAL || !sim_on(CLOCK_REALTIME) || !cur || foreign())
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
	SHIM_PASSTHRU_SCOPE;
	struct itimerval nv = { { 0, 0 }, { (time_t)secs, 0 } }, ov;

	if (!sim_on(CLOCK_REALTIME) || foreign())
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

/* ------------------------------------------------------------ timerfd */

EXPORT int timerfd_create(int id, int flags)
{
	SHIM_PASSTHRU_SCOPE;
	int efd, own, slot = -1, err;
	sigset_t o;

	if (!sim_on(id) || (flags & ~(TFD_NONBLOCK | TFD_CLOEXEC)) || foreign())
		return r_timerfd_create(id, flags);
	/* The kernel's checks: a clock a timerfd can have. */
	if (id != CLOCK_REALTIME && id != CLOCK_MONOTONIC && id != CLOCK_BOOTTIME &&
	    id != CLOCK_REALTIME_ALARM && id != CLOCK_BOOTTIME_ALARM)
		return r_timerfd_create(id, flags);
	efd = r_eventfd(0, (flags & TFD_NONBLOCK ? EFD_NONBLOCK : 0) |
				   (flags & TFD_CLOEXEC ? EFD_CLOEXEC : 0));
	if (efd < 0)
		return -1;
	tlock_take(&o);
	/* An entry for this number is stale (closed unseen, by a raw system
	 * call): the kernel has just handed the number out. */
	for (int i = 0; i < ntimers; i++)
		if (timers[i].used && timers[i].kind == K_TFD && timers[i].fd == efd)
			tfd_drop(&timers[i]);
	own = shim_fd_adopt(efd);
	err = own < 0 ? errno : 0;
	if (!err && (slot = timer_slot()) < 0)
		err = ENOMEM;
	if (!err)
		err = helpers_start(true);
	if (err) {
		/* Released under the lock: a dup2 onto the number waits for it
		 * (fds.c), never lands between the unmark and the close. */
		if (own >= 0)
			shim_fd_release(own);
		tlock_drop(&o);
		shim_real_close(efd);
		errno = err;
		return -1;
	}
	timers[slot] = (struct sim_timer){ .used = true, .kind = K_TFD, .fd = efd, .own_fd = own,
					   .clock = id };
	atomic_fetch_add_explicit(&tfd_live, 1, memory_order_relaxed);
	tlock_drop(&o);
	return efd;
}

EXPORT int timerfd_settime(int fd, int flags, const struct itimerspec *v, struct itimerspec *old)
{
	SHIM_PASSTHRU_SCOPE;
	int r;

	if (sim_active() && !foreign() &&
	    settime((struct tkey){ .tfd = true, .fd = fd }, flags & TFD_TIMER_ABSTIME,
		    flags & ~(TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET), v, old, &r))
		return r;
	return r_timerfd_settime(fd, flags, v, old);
}

EXPORT int timerfd_gettime(int fd, struct itimerspec *cur)
{
	SHIM_PASSTHRU_SCOPE;
	if (sim_active() && !foreign() && gettime((struct tkey){ .tfd = true, .fd = fd }, cur))
		return 0;
	return r_timerfd_gettime(fd, cur);
}
