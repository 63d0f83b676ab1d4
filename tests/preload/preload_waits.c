/* SPDX-License-Identifier: MIT */
/*
 * A program that knows nothing of shmclock, run under the preload shim by
 * tests/preload/preload_apps.py: one wait of 5 s (of whatever time its clock shows)
 * with the call MODE names, which must time out.
 *
 *   preload-waits MODE
 *
 * Prints "ready" just before the wait, then "done M0 M1 OUTCOME": the
 * CLOCK_MONOTONIC readings (ns) before and after, and "timeout" when the
 * call ended as a timeout, anything else when it did not.
 *
 * Relative timeouts: poll, ppoll, select, pselect, epoll_wait, epoll_pwait,
 * epoll_pwait2, sigtimedwait (SIGUSR2, blocked), nanosleep, timerfd (a one-shot CLOCK_MONOTONIC timerfd in
 * an epoll with no timeout), timerfd_periodic (a 1 s periodic one, read
 * with blocking reads until 5 expiries have come: "timeout" if 5 or more,
 * and no more than the whole seconds its clock shows since it was set),
 * timerfd_abs_mono. Absolute CLOCK_MONOTONIC:
 * sem_clockwait, mutex_clocklock, cond_mono. Absolute CLOCK_REALTIME:
 * sem_timedwait, mutex_timedlock, rwlock_timedrdlock, rwlock_timedwrlock,
 * timedjoin, mq_timedreceive, cond_timedwait, timerfd_abs_rt.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define NS 1000000000LL
#define WAIT_S 5

static int64_t now(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (int64_t)ts.tv_sec * NS + ts.tv_nsec;
}

static struct timespec in5(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	ts.tv_sec += WAIT_S;
	return ts;
}

static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static sem_t holding;

/* No sleeps to wait for it: under a paused clock they would not end. */
static void *hold(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&held);
	pthread_rwlock_wrlock(&rw);
	sem_post(&holding);
	pause();
	return NULL;
}

static void *forever(void *arg)
{
	(void)arg;
	pause();
	return NULL;
}

/* 1: the call timed out; 0: it did not. */
static int run(const char *mode)
{
	int p[2], ep, r;
	struct timespec ts = { WAIT_S, 0 };

	if (pipe(p))
		return -1;
	ep = epoll_create1(0);
	{
		struct epoll_event ev = { .events = EPOLLIN };

		epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev);
	}
	if (!strcmp(mode, "poll")) {
		struct pollfd f = { p[0], POLLIN, 0 };

		puts("ready"), fflush(stdout);
		return poll(&f, 1, WAIT_S * 1000) == 0;
	}
	if (!strcmp(mode, "ppoll")) {
		struct pollfd f = { p[0], POLLIN, 0 };

		puts("ready"), fflush(stdout);
		return ppoll(&f, 1, &ts, NULL) == 0;
	}
	if (!strcmp(mode, "select") || !strcmp(mode, "pselect")) {
		fd_set rd;
		struct timeval tv = { WAIT_S, 0 };

		FD_ZERO(&rd);
		FD_SET(p[0], &rd);
		puts("ready"), fflush(stdout);
		if (mode[0] == 's')
			return select(p[0] + 1, &rd, NULL, NULL, &tv) == 0;
		return pselect(p[0] + 1, &rd, NULL, NULL, &ts, NULL) == 0;
	}
	if (!strncmp(mode, "epoll_", 6)) {
		struct epoll_event ev;

		puts("ready"), fflush(stdout);
		if (!strcmp(mode, "epoll_wait"))
			return epoll_wait(ep, &ev, 1, WAIT_S * 1000) == 0;
		if (!strcmp(mode, "epoll_pwait"))
			return epoll_pwait(ep, &ev, 1, WAIT_S * 1000, NULL) == 0;
		r = epoll_pwait2(ep, &ev, 1, &ts, NULL);
		if (r < 0 && errno == ENOSYS)
			return 1; /* a kernel without it: nothing to wait with */
		return r == 0;
	}
	if (!strcmp(mode, "sigtimedwait")) {
		sigset_t m;

		sigemptyset(&m);
		sigaddset(&m, SIGUSR2);
		sigprocmask(SIG_BLOCK, &m, NULL);
		puts("ready"), fflush(stdout);
		return sigtimedwait(&m, NULL, &ts) == -1 && errno == EAGAIN;
	}
	if (!strcmp(mode, "nanosleep")) {
		puts("ready"), fflush(stdout);
		return nanosleep(&ts, NULL) == 0;
	}
	if (!strcmp(mode, "timerfd_periodic")) {
		int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
		struct itimerspec its = { { 1, 0 }, { 1, 0 } };
		uint64_t n, total = 0;
		int64_t t0;

		if (tfd < 0)
			return -1;
		puts("ready"), fflush(stdout);
		t0 = now(CLOCK_MONOTONIC);
		if (timerfd_settime(tfd, 0, &its, NULL))
			return -1;
		while (total < WAIT_S && read(tfd, &n, sizeof(n)) == sizeof(n))
			total += n;
		/* A read late by a period gets two expiries (the kernel's
		 * overrun count too), so 6 is fine on a loaded machine; what
		 * must not happen is an expiry before its second. */
		return total >= WAIT_S && (int64_t)total * NS <= now(CLOCK_MONOTONIC) - t0;
	}
	if (!strncmp(mode, "timerfd", 7)) {
		bool rt = !strcmp(mode, "timerfd_abs_rt");
		int tfd = timerfd_create(rt ? CLOCK_REALTIME : CLOCK_MONOTONIC, TFD_CLOEXEC);
		struct itimerspec its = { { 0, 0 }, { WAIT_S, 0 } };
		struct epoll_event ev = { .events = EPOLLIN }, out;
		uint64_t n = 0;

		if (tfd < 0)
			return -1;
		epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev);
		puts("ready"), fflush(stdout);
		if (strcmp(mode, "timerfd")) /* absolute */
			its.it_value = in5(rt ? CLOCK_REALTIME : CLOCK_MONOTONIC);
		if (timerfd_settime(tfd, strcmp(mode, "timerfd") ? TFD_TIMER_ABSTIME : 0, &its, NULL))
			return -1;
		if (epoll_wait(ep, &out, 1, -1) != 1)
			return 0;
		return read(tfd, &n, sizeof(n)) == sizeof(n) && n == 1;
	}
	if (!strncmp(mode, "sem_", 4)) {
		sem_t s;
		struct timespec abs;

		sem_init(&s, 0, 0);
		puts("ready"), fflush(stdout);
		if (!strcmp(mode, "sem_timedwait")) {
			abs = in5(CLOCK_REALTIME);
			return sem_timedwait(&s, &abs) < 0 && errno == ETIMEDOUT;
		}
		abs = in5(CLOCK_MONOTONIC);
		return sem_clockwait(&s, CLOCK_MONOTONIC, &abs) < 0 && errno == ETIMEDOUT;
	}
	if (!strncmp(mode, "mutex_", 6) || !strncmp(mode, "rwlock_", 7)) {
		pthread_t th;
		struct timespec abs;

		sem_init(&holding, 0, 0);
		pthread_create(&th, NULL, hold, NULL);
		while (sem_wait(&holding))
			;
		puts("ready"), fflush(stdout);
		if (!strcmp(mode, "mutex_clocklock")) {
			abs = in5(CLOCK_MONOTONIC);
			return pthread_mutex_clocklock(&held, CLOCK_MONOTONIC, &abs) == ETIMEDOUT;
		}
		abs = in5(CLOCK_REALTIME);
		if (!strcmp(mode, "mutex_timedlock"))
			return pthread_mutex_timedlock(&held, &abs) == ETIMEDOUT;
		if (!strcmp(mode, "rwlock_timedrdlock"))
			return pthread_rwlock_timedrdlock(&rw, &abs) == ETIMEDOUT;
		return pthread_rwlock_timedwrlock(&rw, &abs) == ETIMEDOUT;
	}
	if (!strcmp(mode, "timedjoin")) {
		pthread_t th;
		struct timespec abs;

		pthread_create(&th, NULL, forever, NULL);
		puts("ready"), fflush(stdout);
		abs = in5(CLOCK_REALTIME);
		return pthread_timedjoin_np(th, NULL, &abs) == ETIMEDOUT;
	}
	if (!strncmp(mode, "cond_", 5)) {
		pthread_condattr_t a;
		pthread_cond_t c;
		pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
		clockid_t id = strcmp(mode, "cond_mono") ? CLOCK_REALTIME : CLOCK_MONOTONIC;
		struct timespec abs;

		pthread_condattr_init(&a);
		pthread_condattr_setclock(&a, id);
		pthread_cond_init(&c, &a);
		pthread_mutex_lock(&m);
		puts("ready"), fflush(stdout);
		abs = in5(id);
		do
			r = pthread_cond_timedwait(&c, &m, &abs);
		while (r == 0); /* spurious */
		return r == ETIMEDOUT;
	}
	if (!strcmp(mode, "mq_timedreceive")) {
		char name[64], buf[64];
		struct mq_attr attr = { .mq_maxmsg = 1, .mq_msgsize = sizeof(buf) };
		struct timespec abs;
		mqd_t q;

		snprintf(name, sizeof(name), "/shmclock-test-%d", (int)getpid());
		q = mq_open(name, O_RDWR | O_CREAT | O_EXCL, 0600, &attr);
		if (q == (mqd_t)-1)
			return -1;
		mq_unlink(name);
		puts("ready"), fflush(stdout);
		abs = in5(CLOCK_REALTIME);
		return mq_timedreceive(q, buf, sizeof(buf), NULL, &abs) < 0 && errno == ETIMEDOUT;
	}
	fprintf(stderr, "preload-waits: unknown mode '%s'\n", mode);
	exit(2);
}

int main(int argc, char **argv)
{
	int64_t m0, m1;
	int r;

	if (argc != 2) {
		fprintf(stderr, "usage: preload-waits MODE\n");
		return 2;
	}
	m0 = now(CLOCK_MONOTONIC);
	r = run(argv[1]);
	m1 = now(CLOCK_MONOTONIC);
	printf("done %lld %lld %s\n", (long long)m0, (long long)m1,
	       r == 1 ? "timeout" : r == 0 ? "no-timeout" : "error");
	return 0;
}
