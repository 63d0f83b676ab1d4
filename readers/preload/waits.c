/* SPDX-License-Identifier: MIT */
/*
 * Waits with a timeout: poll, ppoll, select, pselect, epoll_wait,
 * epoll_pwait, epoll_pwait2, sigtimedwait, the pthread condition waits, semaphores,
 * timed mutex and rwlock locks, timed joins, message queues. Each is one
 * small function around shim_wait() (core.c): the real call is made with
 * real-time slices of at most SLICE_NS, re-planned from the clock after
 * each, so the wait ends when the simulated deadline is reached, follows a
 * pause or a new scale within a slice, and burns no CPU while paused.
 *
 * Which timeouts are simulated: relative ones (poll, select, epoll) when
 * CLOCK_MONOTONIC is; absolute ones when their clock is (CLOCK_REALTIME for
 * the calls that take no clock). Relative timeouts last their simulated
 * duration whatever jumps happen; absolute CLOCK_REALTIME ones follow jumps.
 */
#include "preload.h"

#include <fcntl.h>
#include <mqueue.h>
#include <stdlib.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/select.h>

static int (*r_poll)(struct pollfd *, nfds_t, int);
static int (*r_ppoll)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
static int (*r_select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
static int (*r_pselect)(int, fd_set *, fd_set *, fd_set *, const struct timespec *,
			const sigset_t *);
static int (*r_epoll_wait)(int, struct epoll_event *, int, int);
static int (*r_epoll_pwait)(int, struct epoll_event *, int, int, const sigset_t *);
static int (*r_epoll_pwait2)(int, struct epoll_event *, int, const struct timespec *,
			     const sigset_t *);
static int (*r_cond_timedwait)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
static int (*r_cond_clockwait)(pthread_cond_t *, pthread_mutex_t *, clockid_t,
			       const struct timespec *);
static int (*r_sem_timedwait)(sem_t *, const struct timespec *);
static int (*r_sem_clockwait)(sem_t *, clockid_t, const struct timespec *);
static int (*r_mutex_timedlock)(pthread_mutex_t *, const struct timespec *);
static int (*r_mutex_clocklock)(pthread_mutex_t *, clockid_t, const struct timespec *);
static int (*r_rw_timedrd)(pthread_rwlock_t *, const struct timespec *);
static int (*r_rw_timedwr)(pthread_rwlock_t *, const struct timespec *);
static int (*r_rw_clockrd)(pthread_rwlock_t *, clockid_t, const struct timespec *);
static int (*r_rw_clockwr)(pthread_rwlock_t *, clockid_t, const struct timespec *);
static int (*r_timedjoin)(pthread_t, void **, const struct timespec *);
static int (*r_clockjoin)(pthread_t, void **, clockid_t, const struct timespec *);
static int (*r_mq_timedsend)(mqd_t, const char *, size_t, unsigned, const struct timespec *);
static ssize_t (*r_mq_timedreceive)(mqd_t, char *, size_t, unsigned *, const struct timespec *);
static int (*r_sigtimedwait)(const sigset_t *, siginfo_t *, const struct timespec *);

void shim_resolve_waits(void)
{
	RESOLVE(r_poll, "poll");
	RESOLVE(r_ppoll, "ppoll");
	RESOLVE(r_select, "select");
	RESOLVE(r_pselect, "pselect");
	RESOLVE(r_epoll_wait, "epoll_wait");
	RESOLVE(r_epoll_pwait, "epoll_pwait");
	RESOLVE_OPT(r_epoll_pwait2, "epoll_pwait2");
	RESOLVE(r_cond_timedwait, "pthread_cond_timedwait");
	RESOLVE(r_cond_clockwait, "pthread_cond_clockwait");
	RESOLVE(r_sem_timedwait, "sem_timedwait");
	RESOLVE(r_sem_clockwait, "sem_clockwait");
	RESOLVE(r_mutex_timedlock, "pthread_mutex_timedlock");
	RESOLVE(r_mutex_clocklock, "pthread_mutex_clocklock");
	RESOLVE(r_rw_timedrd, "pthread_rwlock_timedrdlock");
	RESOLVE(r_rw_timedwr, "pthread_rwlock_timedwrlock");
	RESOLVE(r_rw_clockrd, "pthread_rwlock_clockrdlock");
	RESOLVE(r_rw_clockwr, "pthread_rwlock_clockwrlock");
	RESOLVE(r_timedjoin, "pthread_timedjoin_np");
	RESOLVE(r_clockjoin, "pthread_clockjoin_np");
	RESOLVE_OPT(r_mq_timedsend, "mq_timedsend");
	RESOLVE_OPT(r_mq_timedreceive, "mq_timedreceive");
	RESOLVE(r_sigtimedwait, "sigtimedwait");
}

/* A real absolute time on clock @rclk, @slice ns from now. */
static struct timespec real_abs(clockid_t rclk, int64_t slice)
{
	struct timespec now, abs;

	shim_real_gettime(rclk, &now);
	ns_to_ts(ts_to_ns(&now) + slice, &abs);
	return abs;
}

static struct timespec slice_ts(int64_t slice)
{
	struct timespec ts;

	ns_to_ts(slice, &ts);
	return ts;
}

/* Milliseconds for a slice, rounded up: never a busy 0 before the end. */
static int slice_ms(int64_t slice)
{
	return (int)((slice + 999999) / 1000000);
}

/* ------------------------------------------------------------ poll */

struct poll_ctx {
	struct pollfd *fds;
	nfds_t n;
	const sigset_t *mask;
};

static int poll_once(void *ctx, int64_t slice, bool *expired)
{
	struct poll_ctx *c = ctx;
	struct timespec ts = slice_ts(slice);
	int r = r_ppoll(c->fds, c->n, &ts, c->mask);

	*expired = r == 0;
	return r;
}

EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *tmo, const sigset_t *mask)
{
	struct poll_ctx c = { fds, n, mask };
	struct deadline d;

	if (!tmo || !sim_on(CLOCK_MONOTONIC) || bad_ts(tmo))
		return r_ppoll(fds, n, tmo, mask);
	d = dl_after(ts_to_ns(tmo));
	return shim_wait_sig(&d, poll_once, &c, &c.mask);
}

EXPORT int poll(struct pollfd *fds, nfds_t n, int ms)
{
	struct poll_ctx c = { fds, n, NULL };
	struct deadline d;

	if (ms <= 0 || !sim_on(CLOCK_MONOTONIC))
		return r_poll(fds, n, ms);
	d = dl_after((int64_t)ms * 1000000);
	return shim_wait_sig(&d, poll_once, &c, &c.mask);
}

/* ------------------------------------------------------------ select */

/*
 * The caller's sets are howmany(nfds, NFDBITS) words long, whatever
 * FD_SETSIZE says: programs allocate them to fit (OpenSSH, libevent), and a
 * set may be larger than an fd_set for fds >= FD_SETSIZE. Only those words
 * are copied and restored: on the stack up to SEL_STACK_WORDS per set, else
 * in an anonymous mapping (select is async-signal-safe: no malloc).
 */
#define SEL_STACK_WORDS 64 /* 4096 fds */
#define SEL_WORDS(n) (((size_t)(n) + 8 * sizeof(fd_mask) - 1) / (8 * sizeof(fd_mask)))

struct select_ctx {
	int nfds;
	fd_set *set[3];   /* read, write, except (NULL: none) */
	fd_mask *save[3]; /* their words as the caller passed them */
	size_t words;
	const sigset_t *mask;
	bool again;
};

static int select_once(void *ctx, int64_t slice, bool *expired)
{
	struct select_ctx *c = ctx;
	struct timespec ts = slice_ts(slice);
	int r;

	/* select() rewrites the sets: each slice starts from the caller's. */
	if (c->again)
		for (int k = 0; k < 3; k++)
			if (c->set[k])
				memcpy(c->set[k], c->save[k], c->words * sizeof(fd_mask));
	c->again = true;
	r = r_pselect(c->nfds, c->set[0], c->set[1], c->set[2], &ts, c->mask);
	*expired = r == 0;
	return r;
}

/* The kernel's descriptor table size (/proc/self/status FDSize), or -1.
 * open, read and close only: select is async-signal-safe. */
static int fd_table_size(void)
{
	char buf[2048], *p;
	ssize_t n;
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	shim_real_close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	p = strstr(buf, "\nFDSize:");
	return p ? atoi(p + 8) : -1;
}

/*
 * The nfds whose words the caller's sets surely have, or -1 if unknown.
 * The kernel reads no further than its descriptor table (FDSize), which a
 * program's nfds (sysconf(_SC_OPEN_MAX), INT_MAX) may overstate: neither do
 * we, and the kernel is told the same. When the table's size cannot be read
 * (no /proc, or no descriptor free to read it with) the call goes to the
 * kernel as it is, in real time: copying nfds bits of a set that has fewer
 * would crash the program.
 */
static int select_nfds(int nfds)
{
	int size;

	if (nfds <= FD_SETSIZE)
		return nfds;
	size = fd_table_size();
	if (size <= 0)
		return -1;
	return size < nfds ? size : nfds;
}

static int select_sim(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, const sigset_t *mask,
		      const struct deadline *d)
{
	struct select_ctx c = { .nfds = nfds, .set = { rd, wr, ex }, .mask = mask };
	fd_mask stack[3][SEL_STACK_WORDS];
	void *map = MAP_FAILED;
	size_t len = 0;
	int r;

	c.words = nfds > 0 ? SEL_WORDS(nfds) : 0;
	if (c.words > SEL_STACK_WORDS) {
		len = 3 * c.words * sizeof(fd_mask);
		map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (map == MAP_FAILED) {
			errno = ENOMEM;
			return -1;
		}
	}
	for (int k = 0; k < 3; k++) {
		c.save[k] = map != MAP_FAILED ? (fd_mask *)map + k * c.words : stack[k];
		if (c.set[k])
			memcpy(c.save[k], c.set[k], c.words * sizeof(fd_mask));
	}
	r = shim_wait_sig(d, select_once, &c, &c.mask);
	if (map != MAP_FAILED) {
		int e = errno;

		munmap(map, len);
		errno = e;
	}
	return r;
}

EXPORT int select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tv)
{
	struct deadline d;
	int64_t left;
	int r, n;

	if (!tv || !sim_on(CLOCK_MONOTONIC) || tv->tv_sec < 0 || tv->tv_usec < 0 ||
	    tv->tv_usec >= 1000000 || (n = select_nfds(nfds)) < 0)
		return r_select(nfds, rd, wr, ex, tv);
	d = dl_after(sec_to_ns((int64_t)tv->tv_sec, (int64_t)tv->tv_usec * 1000));
	r = select_sim(n, rd, wr, ex, NULL, &d);
	/* Linux reports the simulated time not slept. */
	left = dl_left(&d);
	tv->tv_sec = (time_t)(left / NS);
	tv->tv_usec = (suseconds_t)(left % NS / 1000);
	return r;
}

EXPORT int pselect(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, const struct timespec *tmo,
		   const sigset_t *mask)
{
	struct deadline d;
	int n;

	if (!tmo || !sim_on(CLOCK_MONOTONIC) || bad_ts(tmo) || (n = select_nfds(nfds)) < 0)
		return r_pselect(nfds, rd, wr, ex, tmo, mask);
	d = dl_after(ts_to_ns(tmo));
	return select_sim(n, rd, wr, ex, mask, &d);
}

/* ------------------------------------------------------------ epoll */

struct epoll_ctx {
	int ep;
	struct epoll_event *ev;
	int max;
	const sigset_t *mask;
};

static int epoll_once(void *ctx, int64_t slice, bool *expired)
{
	struct epoll_ctx *c = ctx;
	int r;

	if (r_epoll_pwait2) {
		struct timespec ts = slice_ts(slice);

		r = r_epoll_pwait2(c->ep, c->ev, c->max, &ts, c->mask);
		if (r < 0 && errno == ENOSYS) /* a kernel before 5.11 */
			r_epoll_pwait2 = NULL;
		else
			goto out;
	}
	r = r_epoll_pwait(c->ep, c->ev, c->max, slice_ms(slice), c->mask);
out:
	*expired = r == 0;
	return r;
}

static int epoll_sim(int ep, struct epoll_event *ev, int max, int64_t ns, const sigset_t *mask)
{
	struct epoll_ctx c = { ep, ev, max, mask };
	struct deadline d = dl_after(ns);

	return shim_wait_sig(&d, epoll_once, &c, &c.mask);
}

EXPORT int epoll_wait(int ep, struct epoll_event *ev, int max, int ms)
{
	if (ms <= 0 || !sim_on(CLOCK_MONOTONIC))
		return r_epoll_wait(ep, ev, max, ms);
	return epoll_sim(ep, ev, max, (int64_t)ms * 1000000, NULL);
}

EXPORT int epoll_pwait(int ep, struct epoll_event *ev, int max, int ms, const sigset_t *mask)
{
	if (ms <= 0 || !sim_on(CLOCK_MONOTONIC))
		return r_epoll_pwait(ep, ev, max, ms, mask);
	return epoll_sim(ep, ev, max, (int64_t)ms * 1000000, mask);
}

EXPORT int epoll_pwait2(int ep, struct epoll_event *ev, int max, const struct timespec *tmo,
			const sigset_t *mask)
{
	if (!r_epoll_pwait2) {
		errno = ENOSYS;
		return -1;
	}
	if (!tmo || !sim_on(CLOCK_MONOTONIC) || bad_ts(tmo) || (!tmo->tv_sec && !tmo->tv_nsec))
		return r_epoll_pwait2(ep, ev, max, tmo, mask);
	return epoll_sim(ep, ev, max, ts_to_ns(tmo), mask);
}

/* ------------------------------------------------------------ condition variables */

struct cond_ctx {
	pthread_cond_t *c;
	pthread_mutex_t *m;
	clockid_t rclk;
};

static int cond_once(void *ctx, int64_t slice, bool *expired)
{
	struct cond_ctx *c = ctx;
	struct timespec abs = real_abs(c->rclk, slice);
	int r = r_cond_clockwait(c->c, c->m, c->rclk, &abs);

	*expired = r == ETIMEDOUT;
	return r;
}

EXPORT int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t id,
				  const struct timespec *abs)
{
	struct cond_ctx x = { c, m, id };
	struct deadline d;

	if (!sim_on(id) || bad_ts(abs))
		return r_cond_clockwait(c, m, id, abs);
	d = dl_at(id, abs);
	return shim_wait(&d, cond_once, &x);
}

/*
 * The clock a condvar was initialised with. POSIX offers no way to ask a
 * condvar (only its attributes) and programs do not tell us, so we read
 * where glibc keeps it: bit 1 of __wrefs (nptl pthread_cond_common.c since
 * glibc 2.25: 0 CLOCK_REALTIME, 1 CLOCK_MONOTONIC). That is private, so it
 * is believed only after shim_wrefs_probe() has seen it hold on this very
 * glibc at start-up; otherwise every condvar is taken as CLOCK_REALTIME
 * (the default, and what PTHREAD_COND_INITIALIZER gives) and we say so once.
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

void shim_wrefs_probe(void)
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
		shim_say("shmclock-preload: this libc does not say which clock a condition variable "
			 "uses; pthread_cond_timedwait timeouts are taken as CLOCK_REALTIME\n");
}

EXPORT int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m,
				  const struct timespec *abs)
{
	clockid_t id = wrefs_known && wrefs_clock_bit(c) ? CLOCK_MONOTONIC : CLOCK_REALTIME;

	if (!sim_on(id) || bad_ts(abs))
		return r_cond_timedwait(c, m, abs);
	return pthread_cond_clockwait(c, m, id, abs);
}

/* ------------------------------------------------------------ semaphores */

static int sem_once(void *ctx, int64_t slice, bool *expired)
{
	struct timespec abs = real_abs(CLOCK_MONOTONIC, slice);
	int r = r_sem_clockwait(ctx, CLOCK_MONOTONIC, &abs);

	*expired = r < 0 && errno == ETIMEDOUT;
	return r;
}

EXPORT int sem_clockwait(sem_t *sem, clockid_t id, const struct timespec *abs)
{
	struct deadline d;

	if (!sim_on(id) || bad_ts(abs))
		return r_sem_clockwait(sem, id, abs);
	d = dl_at(id, abs);
	return shim_wait(&d, sem_once, sem);
}

EXPORT int sem_timedwait(sem_t *sem, const struct timespec *abs)
{
	if (!sim_on(CLOCK_REALTIME) || bad_ts(abs))
		return r_sem_timedwait(sem, abs);
	return sem_clockwait(sem, CLOCK_REALTIME, abs);
}

/* ------------------------------------------------------------ locks and joins */

enum lock_kind { L_MUTEX, L_RDLOCK, L_WRLOCK, L_JOIN };

struct lock_ctx {
	enum lock_kind kind;
	void *obj;
	pthread_t th;
	void **ret;
};

static int lock_once(void *ctx, int64_t slice, bool *expired)
{
	struct lock_ctx *c = ctx;
	struct timespec abs = real_abs(CLOCK_MONOTONIC, slice);
	int r = EINVAL;

	switch (c->kind) {
	case L_MUTEX:
		r = r_mutex_clocklock(c->obj, CLOCK_MONOTONIC, &abs);
		break;
	case L_RDLOCK:
		r = r_rw_clockrd(c->obj, CLOCK_MONOTONIC, &abs);
		break;
	case L_WRLOCK:
		r = r_rw_clockwr(c->obj, CLOCK_MONOTONIC, &abs);
		break;
	case L_JOIN:
		r = r_clockjoin(c->th, c->ret, CLOCK_MONOTONIC, &abs);
		break;
	}
	*expired = r == ETIMEDOUT;
	return r;
}

static int lock_sim(struct lock_ctx *c, clockid_t id, const struct timespec *abs)
{
	struct deadline d = dl_at(id, abs);

	return shim_wait(&d, lock_once, c);
}

EXPORT int pthread_mutex_clocklock(pthread_mutex_t *m, clockid_t id, const struct timespec *abs)
{
	struct lock_ctx c = { .kind = L_MUTEX, .obj = m };

	if (!sim_on(id) || bad_ts(abs))
		return r_mutex_clocklock(m, id, abs);
	return lock_sim(&c, id, abs);
}

EXPORT int pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *abs)
{
	if (!sim_on(CLOCK_REALTIME) || bad_ts(abs))
		return r_mutex_timedlock(m, abs);
	return pthread_mutex_clocklock(m, CLOCK_REALTIME, abs);
}

EXPORT int pthread_rwlock_clockrdlock(pthread_rwlock_t *l, clockid_t id, const struct timespec *abs)
{
	struct lock_ctx c = { .kind = L_RDLOCK, .obj = l };

	if (!sim_on(id) || bad_ts(abs))
		return r_rw_clockrd(l, id, abs);
	return lock_sim(&c, id, abs);
}

EXPORT int pthread_rwlock_clockwrlock(pthread_rwlock_t *l, clockid_t id, const struct timespec *abs)
{
	struct lock_ctx c = { .kind = L_WRLOCK, .obj = l };

	if (!sim_on(id) || bad_ts(abs))
		return r_rw_clockwr(l, id, abs);
	return lock_sim(&c, id, abs);
}

EXPORT int pthread_rwlock_timedrdlock(pthread_rwlock_t *l, const struct timespec *abs)
{
	if (!sim_on(CLOCK_REALTIME) || bad_ts(abs))
		return r_rw_timedrd(l, abs);
	return pthread_rwlock_clockrdlock(l, CLOCK_REALTIME, abs);
}

EXPORT int pthread_rwlock_timedwrlock(pthread_rwlock_t *l, const struct timespec *abs)
{
	if (!sim_on(CLOCK_REALTIME) || bad_ts(abs))
		return r_rw_timedwr(l, abs);
	return pthread_rwlock_clockwrlock(l, CLOCK_REALTIME, abs);
}

EXPORT int pthread_clockjoin_np(pthread_t th, void **ret, clockid_t id, const struct timespec *abs)
{
	struct lock_ctx c = { .kind = L_JOIN, .th = th, .ret = ret };

	if (!sim_on(id) || bad_ts(abs))
		return r_clockjoin(th, ret, id, abs);
	return lock_sim(&c, id, abs);
}

EXPORT int pthread_timedjoin_np(pthread_t th, void **ret, const struct timespec *abs)
{
	if (!sim_on(CLOCK_REALTIME) || bad_ts(abs))
		return r_timedjoin(th, ret, abs);
	return pthread_clockjoin_np(th, ret, CLOCK_REALTIME, abs);
}

/* ------------------------------------------------------------ message queues */

struct mq_ctx {
	mqd_t q;
	char *buf;
	size_t len;
	unsigned prio, *prio_out;
	bool send;
};

static int mq_once(void *ctx, int64_t slice, bool *expired)
{
	struct mq_ctx *c = ctx;
	/* These take only CLOCK_REALTIME; a real step of it within a slice
	 * makes that one slice longer or shorter, no more. */
	struct timespec abs = real_abs(CLOCK_REALTIME, slice);
	ssize_t r = c->send ? r_mq_timedsend(c->q, c->buf, c->len, c->prio, &abs)
			    : r_mq_timedreceive(c->q, c->buf, c->len, c->prio_out, &abs);

	*expired = r < 0 && errno == ETIMEDOUT;
	/* mq_timedreceive's length is at most the queue's msgsize (an int
	 * in /proc/sys/fs/mqueue). */
	return (int)r;
}

EXPORT int mq_timedsend(mqd_t q, const char *msg, size_t len, unsigned prio,
			const struct timespec *abs)
{
	struct mq_ctx c = { .q = q, .buf = (char *)msg, .len = len, .prio = prio, .send = true };
	struct deadline d;

	if (!r_mq_timedsend) {
		errno = ENOSYS;
		return -1;
	}
	if (!sim_on(CLOCK_REALTIME) || bad_ts(abs))
		return r_mq_timedsend(q, msg, len, prio, abs);
	d = dl_at(CLOCK_REALTIME, abs);
	return shim_wait(&d, mq_once, &c);
}

EXPORT ssize_t mq_timedreceive(mqd_t q, char *msg, size_t len, unsigned *prio,
			       const struct timespec *abs)
{
	struct mq_ctx c = { .q = q, .buf = msg, .len = len, .prio_out = prio };
	struct deadline d;

	if (!r_mq_timedreceive) {
		errno = ENOSYS;
		return -1;
	}
	if (!sim_on(CLOCK_REALTIME) || bad_ts(abs))
		return r_mq_timedreceive(q, msg, len, prio, abs);
	d = dl_at(CLOCK_REALTIME, abs);
	return shim_wait(&d, mq_once, &c);
}

/* ------------------------------------------------------------ signals */

struct sigwait_ctx {
	const sigset_t *set;
	siginfo_t *info;
};

static int sigwait_once(void *ctx, int64_t slice, bool *expired)
{
	struct sigwait_ctx *c = ctx;
	struct timespec ts = slice_ts(slice);
	int r = r_sigtimedwait(c->set, c->info, &ts);

	*expired = r < 0 && errno == EAGAIN;
	return r;
}

/* A relative timeout, as poll's. */
EXPORT int sigtimedwait(const sigset_t *set, siginfo_t *info, const struct timespec *tmo)
{
	struct sigwait_ctx c = { set, info };
	struct deadline d;

	if (!tmo || !sim_on(CLOCK_MONOTONIC) || bad_ts(tmo))
		return r_sigtimedwait(set, info, tmo);
	d = dl_after(ts_to_ns(tmo));
	return shim_wait(&d, sigwait_once, &c);
}
