/* SPDX-License-Identifier: MIT */
/*
 * Timers on a simulated clock: POSIX timers, alarm(), setitimer(ITIMER_REAL)
 * and timerfds. Each is a real CLOCK_MONOTONIC timer (the kernel delivers
 * it, so sigevent and epoll semantics stay intact) plus its expiry in
 * simulated time; a helper thread re-plans every real timer from its
 * simulated expiry on each change of the clock.
 *
 * Timelines (preload.h): a timer armed with a relative value, or on a
 * monotonic clock, expires on the jump-free timeline; one armed at an
 * absolute CLOCK_REALTIME time follows jumps.
 *
 * A timerfd is handed to the program as an eventfd: read(2) gives the
 * expiry count and epoll sees it readable, as with a timerfd. The shim
 * keeps a real timerfd per timer in a second helper thread's epoll, reads
 * its expiries and adds them to the eventfd, so that re-planning the real
 * one (which resets the kernel's count) loses none. Differences, documented
 * in the README: TFD_TIMER_CANCEL_ON_SET is ignored; re-arming a blocking
 * timerfd does not clear expiries not yet read; after fork the child's copy
 * is not driven (POSIX timers do not survive fork either).
 */
#include "preload.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <unistd.h>

#ifndef KCMP_FILE
#define KCMP_FILE 0
#endif

#define MAX_TIMERS 64

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
/* The helper's own wait: a call from inside the shim to epoll_wait would
 * bind to ours and wait in simulated time. */
static int (*r_epoll_wait)(int, struct epoll_event *, int, int);

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
	RESOLVE(r_epoll_wait, "epoll_wait");
}

enum { K_POSIX, K_TFD };

struct sim_timer {
	bool used;
	bool armed;      /* has a pending simulated expiry */
	bool real_armed; /* the real timer runs on the current mapping */
	bool mono_tl;    /* expires on the jump-free timeline */
	int kind;
	timer_t real;    /* K_POSIX */
	int fd;          /* K_TFD: the program's eventfd */
	int own_fd;      /* K_TFD: our duplicate of it, for writing */
	int rfd;         /* K_TFD: the real timerfd */
	bool nonblock;   /* K_TFD: created with TFD_NONBLOCK */
	clockid_t clock;
	int64_t next;       /* next expiry on its timeline */
	int64_t interval;   /* simulated period, 0: one-shot */
	int64_t real_first; /* real monotonic instant planned for `next` */
	int64_t real_int;   /* real period planned */
};

static pthread_mutex_t tlock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_timer timers[MAX_TIMERS];
static int alarm_slot = -1; /* the timer behind alarm() and ITIMER_REAL */
static bool helper_running;
static int tfd_ep = -1;     /* the timerfd helper's epoll */
static bool tfd_helper_running;

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
		if (timers[i].used && timers[i].kind == K_POSIX && timers[i].real == id)
			return &timers[i];
	return NULL;
}

/* Whether the program's fd still is our eventfd (it may have closed it and
 * got the number back for something else). Without kcmp (seccomp, an old
 * kernel) we believe it. */
static bool tfd_same(const struct sim_timer *t)
{
	long r = syscall(SYS_kcmp, (long)getpid(), (long)getpid(), KCMP_FILE, (long)t->fd,
			 (long)t->own_fd);

	return r == 0 || (r < 0 && (errno == ENOSYS || errno == EPERM));
}

static void tfd_drop(struct sim_timer *t)
{
	epoll_ctl(tfd_ep, EPOLL_CTL_DEL, t->rfd, NULL);
	close(t->rfd);
	close(t->own_fd);
	t->used = false;
}

static struct sim_timer *tfd_find(int fd)
{
	for (int i = 0; i < MAX_TIMERS; i++) {
		struct sim_timer *t = &timers[i];

		if (t->used && t->kind == K_TFD && t->fd == fd) {
			if (tfd_same(t))
				return t;
			tfd_drop(t); /* closed by the program: forget it */
		}
	}
	return NULL;
}

/* Hand @k expiries to the program's timerfd. */
static void tfd_deliver(struct sim_timer *t, uint64_t k)
{
	if (k)
		(void)!write(t->own_fd, &k, sizeof(k));
}

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

	if (t->kind == K_TFD) {
		uint64_t k = 0;

		/* Always drained: a readable real timerfd would keep waking
		 * the helper's level-triggered epoll. */
		if (read(t->rfd, &k, sizeof(k)) == (ssize_t)sizeof(k) && k && t->armed &&
		    t->real_armed) {
			expired(t, (int64_t)k);
			tfd_deliver(t, k);
		}
		return;
	}
	if (!t->armed || !t->real_armed)
		return;
	if (r_timer_gettime(t->real, &cur))
		return;
	left = ts_to_ns(&cur.it_value);
	if (left == 0) {
		t->armed = false; /* one-shot: fired */
		return;
	}
	if (t->real_int > 0) {
		/* Periodic: count the expiries the kernel has delivered since
		 * the plan, and move the plan's origin past them too, so that a
		 * second look (timer_gettime, then the helper's re-plan) does not
		 * count them again and push the next expiry out. */
		now = real_mono();
		expired(t, (now + left - t->real_first + t->real_int / 2) / t->real_int);
	}
}

static void real_set(struct sim_timer *t, int abs, const struct itimerspec *its)
{
	if (t->kind == K_TFD)
		r_timerfd_settime(t->rfd, abs ? TFD_TIMER_ABSTIME : 0, its, NULL);
	else
		r_timer_settime(t->real, abs ? TIMER_ABSTIME : 0, its, NULL);
}

/* Plan the real timer from the current mapping. tlock held. */
static void rearm(struct sim_timer *t)
{
	struct itimerspec its = { { 0, 0 }, { 0, 0 } };
	shmclock_info_t i;
	int64_t now, due;
	int r;

	timer_sync(t);
	t->real_armed = false;
	if (!t->armed) {
		real_set(t, 0, &its);
		return;
	}
	if (shmclock_info(shim_clk, &i) || !i.initialized)
		return; /* looked at again on the next change */
	r = shmclock__plan(shim_clk, t->mono_tl, t->next, &now, &due);
	if (r < 0)
		return;
	if (r == 0 && (i.paused || i.stepped || !(i.scale > 0) || t->kind == K_TFD)) {
		/* Due now, and no running mapping to plan with (or a timerfd,
		 * whose count we keep ourselves): fire what is due. */
		int64_t k = 1;

		if (t->interval > 0) {
			k = (now - t->next) / t->interval + 1;
			t->next = shmclock__sat_add(t->next, k * t->interval);
		} else {
			t->armed = false;
		}
		if (t->kind == K_TFD) {
			tfd_deliver(t, (uint64_t)k);
			if (!t->armed) {
				real_set(t, 0, &its);
				return;
			}
			r = shmclock__plan(shim_clk, t->mono_tl, t->next, &now, &due);
			if (r < 0)
				return;
		} else {
			its.it_value.tv_nsec = 1;
			real_set(t, 0, &its);
			return;
		}
	}
	if (r == 2 || i.paused || i.stepped || !(i.scale > 0)) {
		real_set(t, 0, &its); /* wait for the next change */
		return;
	}
	if (r == 0)
		due = i.mono_ns;
	t->real_first = due > i.mono_ns ? due : i.mono_ns + 1;
	t->real_int = t->interval > 0 ? (int64_t)((double)t->interval / i.scale) : 0;
	if (t->interval > 0 && t->real_int < 1)
		t->real_int = 1;
	ns_to_ts(t->real_first, &its.it_value);
	ns_to_ts(t->real_int, &its.it_interval);
	real_set(t, 1, &its);
	t->real_armed = true;
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

/* Re-plans every armed timer on each change of the clock. */
static void *helper_main(void *arg)
{
	(void)arg;
	for (;;) {
		/* Taken before planning: a change after this makes the wait
		 * below return at once. */
		uint32_t tok = shmclock_change_token(shim_clk);
		sigset_t old;

		tlock_take(&old);
		for (int k = 0; k < MAX_TIMERS; k++)
			if (timers[k].used && timers[k].armed)
				rearm(&timers[k]);
		tlock_drop(&old);
		/* A second at most: a periodic timer's count stays fresh. */
		shmclock_wait_change(shim_clk, tok, shmclock_sec(1));
	}
	return NULL;
}

/* Moves the real timerfds' expiries to the program's timerfds, and forgets
 * the ones the program has closed (within a second). */
static void *tfd_main(void *arg)
{
	(void)arg;
	for (;;) {
		struct epoll_event ev[16];
		int n = r_epoll_wait(tfd_ep, ev, 16, 1000);
		sigset_t old;

		tlock_take(&old);
		for (int k = 0; k < n; k++) {
			struct sim_timer *t = &timers[ev[k].data.u32];

			if (t->used && t->kind == K_TFD)
				timer_sync(t);
		}
		for (int k = 0; k < MAX_TIMERS; k++)
			if (timers[k].used && timers[k].kind == K_TFD && !tfd_same(&timers[k]))
				tfd_drop(&timers[k]);
		tlock_drop(&old);
	}
	return NULL;
}

/* tlock held. */
static int helper_start(void)
{
	int r;

	if (helper_running)
		return 0;
	r = start_thread(helper_main);
	if (r == 0)
		helper_running = true;
	return r;
}

/* tlock held. */
static int tfd_helper_start(void)
{
	int r;

	if (tfd_helper_running)
		return 0;
	if (tfd_ep < 0 && (tfd_ep = epoll_create1(EPOLL_CLOEXEC)) < 0)
		return errno;
	r = start_thread(tfd_main);
	if (r == 0)
		tfd_helper_running = true;
	return r;
}

/* Timers and the helper threads do not survive fork (POSIX); the child's
 * copies of our descriptors are closed. */
void shim_timers_after_fork(void)
{
	pthread_mutex_init(&tlock, NULL);
	for (int i = 0; i < MAX_TIMERS; i++) {
		if (timers[i].used && timers[i].kind == K_TFD) {
			close(timers[i].rfd);
			close(timers[i].own_fd);
		}
	}
	if (tfd_ep >= 0)
		close(tfd_ep);
	tfd_ep = -1;
	memset(timers, 0, sizeof(timers));
	alarm_slot = -1;
	helper_running = false;
	tfd_helper_running = false;
}

/* tlock held. A free slot, or -1. */
static int timer_slot(void)
{
	for (int i = 0; i < MAX_TIMERS; i++)
		if (!timers[i].used)
			return i;
	return -1;
}

/* tlock held. A slot for a new simulated POSIX timer around @real, or -1. */
static int timer_add(timer_t real, clockid_t id)
{
	int i = timer_slot();

	if (i >= 0)
		timers[i] = (struct sim_timer){ .used = true, .kind = K_POSIX, .real = real,
						.clock = id };
	return i;
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
	 * read cannot block (our duplicate shares the program's O_NONBLOCK). */
	if (t->kind == K_TFD && t->nonblock) {
		uint64_t k;

		(void)!read(t->own_fd, &k, sizeof(k));
	}
	t->interval = ts_to_ns(&v->it_interval);
	t->armed = v->it_value.tv_sec || v->it_value.tv_nsec;
	if (t->armed) {
		struct deadline d = abs ? dl_at(t->clock, &v->it_value)
					: dl_after(ts_to_ns(&v->it_value));

		t->mono_tl = d.mono;
		t->next = d.target;
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
	int r;

	if (sim_active() &&
	    settime((struct tkey){ .id = id }, flags & TIMER_ABSTIME, false, v, old, &r))
		return r;
	return r_timer_settime(id, flags, v, old);
}

EXPORT int timer_gettime(timer_t id, struct itimerspec *cur)
{
	if (sim_active() && gettime((struct tkey){ .id = id }, cur))
		return 0;
	return r_timer_gettime(id, cur);
}

EXPORT int timer_delete(timer_t id)
{
	struct sim_timer *t;
	sigset_t o;

	if (sim_active()) {
		tlock_take(&o);
		t = timer_find(id);
		if (t)
			t->used = false;
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

/* ------------------------------------------------------------ timerfd */

/* Above the descriptors programs count on; the lowest free one if the
 * limit is lower. */
static int dup_high(int fd)
{
	int r = fcntl(fd, F_DUPFD_CLOEXEC, 512);

	return r >= 0 ? r : fcntl(fd, F_DUPFD_CLOEXEC, 0);
}

EXPORT int timerfd_create(int id, int flags)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int efd, own = -1, rfd = -1, slot = -1, err = EMFILE;
	sigset_t o;

	if (!sim_on(id) || (flags & ~(TFD_NONBLOCK | TFD_CLOEXEC)))
		return r_timerfd_create(id, flags);
	/* The kernel's checks: a clock a timerfd can have. */
	if (id != CLOCK_REALTIME && id != CLOCK_MONOTONIC && id != CLOCK_BOOTTIME &&
	    id != CLOCK_REALTIME_ALARM && id != CLOCK_BOOTTIME_ALARM)
		return r_timerfd_create(id, flags);
	efd = eventfd(0, (flags & TFD_NONBLOCK ? EFD_NONBLOCK : 0) |
				 (flags & TFD_CLOEXEC ? EFD_CLOEXEC : 0));
	if (efd < 0)
		return -1;
	tlock_take(&o);
	if ((err = tfd_helper_start()))
		goto fail;
	err = EMFILE;
	own = dup_high(efd);
	rfd = r_timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (own < 0 || rfd < 0) {
		err = errno;
		goto fail;
	}
	/* A stale entry for this number (closed unseen) goes first. */
	(void)tfd_find(efd);
	slot = timer_slot();
	if (slot < 0) {
		err = EMFILE;
		goto fail;
	}
	ev.data.u32 = (uint32_t)slot;
	if (epoll_ctl(tfd_ep, EPOLL_CTL_ADD, rfd, &ev)) {
		err = errno;
		goto fail;
	}
	timers[slot] = (struct sim_timer){ .used = true, .kind = K_TFD, .fd = efd, .own_fd = own,
					   .rfd = rfd, .nonblock = flags & TFD_NONBLOCK,
					   .clock = id };
	if ((err = helper_start())) {
		tfd_drop(&timers[slot]);
		tlock_drop(&o);
		close(efd);
		errno = err;
		return -1;
	}
	tlock_drop(&o);
	return efd;
fail:
	tlock_drop(&o);
	if (own >= 0)
		close(own);
	if (rfd >= 0)
		close(rfd);
	close(efd);
	errno = err;
	return -1;
}

EXPORT int timerfd_settime(int fd, int flags, const struct itimerspec *v, struct itimerspec *old)
{
	int r;

	if (sim_active() &&
	    settime((struct tkey){ .tfd = true, .fd = fd }, flags & TFD_TIMER_ABSTIME,
		    flags & ~(TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET), v, old, &r))
		return r;
	return r_timerfd_settime(fd, flags, v, old);
}

EXPORT int timerfd_gettime(int fd, struct itimerspec *cur)
{
	if (sim_active() && gettime((struct tkey){ .tfd = true, .fd = fd }, cur))
		return 0;
	return r_timerfd_gettime(fd, cur);
}
