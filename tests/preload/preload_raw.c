/* SPDX-License-Identifier: MIT */
/*
 * A dynamic C program that reads and waits without libc's time functions,
 * run under the preload shim by tests/preload/preload_apps.py (issue 33):
 * one wait of 5 s of its own time, which must time out.
 *
 *   preload-raw MODE
 *
 * Prints "ready" just before the wait, then "done M0 M1 OUTCOME" as
 * preload-waits does. M0 and M1 are read with syscall(SYS_clock_gettime)
 * (the raw modes) or with the vDSO's own function (vdso). Every raw mode
 * also checks that gettimeofday and time, as raw system calls, agree with
 * the raw CLOCK_REALTIME (within 2 s) before and after: else OUTCOME is
 * "clock-mismatch" (a simulation-source clock's world is not the host's).
 *
 * Modes, each a raw system call with a relative 5 s timeout unless said:
 *   raw_nanosleep, raw_clock_nanosleep (CLOCK_MONOTONIC), raw_futex
 *   (FUTEX_WAIT on a word nobody changes), raw_ppoll (no descriptor),
 *   raw_epoll_pwait (an empty epoll), raw_pselect6 (no descriptor);
 *   raw_clock_nanosleep_abs_rt: an absolute CLOCK_REALTIME target 5 s on
 *   (it follows jumps); raw_timerfd (timerfd_create and timerfd_settime
 *   made raw, then a blocking read), raw_alarm (alarm made raw, SIGALRM
 *   blocked and waited for), raw_timer (timer_create and timer_settime
 *   made raw, SIGUSR1 waited for);
 *   vdso: polls the vDSO's __vdso_clock_gettime (looked up as programs do,
 *   dlsym on linux-vdso.so.1) every simulated ms (libc's usleep) until it
 *   shows 5 s more; and clock_getres of CLOCK_MONOTONIC_COARSE, through
 *   libc and through the vDSO's __vdso_clock_getres, must say 1 ns (a
 *   simulated clock is a nanosecond count): "no-timeout" otherwise.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define NS 1000000000LL
#define WAIT_S 5

static int64_t raw_now(clockid_t c)
{
	struct timespec ts;

	syscall(SYS_clock_gettime, c, &ts);
	return (int64_t)ts.tv_sec * NS + ts.tv_nsec;
}

/* gettimeofday and time, raw, against the raw CLOCK_REALTIME. */
static bool clocks_agree(void)
{
	struct timeval tv;
	int64_t rt = raw_now(CLOCK_REALTIME), tod, t;

	syscall(SYS_gettimeofday, &tv, NULL);
	tod = (int64_t)tv.tv_sec * NS + (int64_t)tv.tv_usec * 1000;
#ifdef SYS_time
	t = (int64_t)syscall(SYS_time, NULL) * NS;
#else
	t = tod;
#endif
	return llabs(tod - rt) < 2 * NS && llabs(t - rt) < 2 * NS;
}

typedef int (*gettime_fn)(clockid_t, struct timespec *);

static gettime_fn vdso_gettime(void)
{
	void *h = dlopen("linux-vdso.so.1", RTLD_LAZY | RTLD_NOLOAD);
	void *f = h ? dlsym(h, "__vdso_clock_gettime") : NULL;
	gettime_fn fn = NULL;

	if (!f && h)
		f = dlsym(h, "__kernel_clock_gettime");
	memcpy(&fn, &f, sizeof(fn));
	return fn;
}

static int64_t vdso_now(gettime_fn fn)
{
	struct timespec ts;

	fn(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * NS + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	const char *m = argc > 1 ? argv[1] : "";
	struct timespec rel = { WAIT_S, 0 };
	int64_t m0, m1;
	long r;
	bool ok, agree;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(m, "vdso")) {
		gettime_fn fn = vdso_gettime();

		if (!fn) {
			printf("done - - no-vdso\n");
			return 1;
		}
		void *h = dlopen("linux-vdso.so.1", RTLD_LAZY | RTLD_NOLOAD);
		void *g = h ? dlsym(h, "__vdso_clock_getres") : NULL;
		gettime_fn getres = NULL;
		struct timespec res = { 1, 0 }, vres = { 1, 0 };

		memcpy(&getres, &g, sizeof(getres));
		ok = clock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0 && !res.tv_sec &&
		     res.tv_nsec == 1 && getres && getres(CLOCK_MONOTONIC_COARSE, &vres) == 0 &&
		     !vres.tv_sec && vres.tv_nsec == 1;
		puts("ready");
		m0 = vdso_now(fn);
		do
			usleep(1000);
		while ((m1 = vdso_now(fn)) - m0 < WAIT_S * NS);
		printf("done %lld %lld %s\n", (long long)m0, (long long)m1,
		       ok ? "timeout" : "no-timeout");
		return 0;
	}
	agree = clocks_agree();
	puts("ready");
	m0 = raw_now(CLOCK_MONOTONIC);
	if (!strcmp(m, "raw_nanosleep")) {
		r = syscall(SYS_nanosleep, &rel, NULL);
		ok = r == 0;
	} else if (!strcmp(m, "raw_clock_nanosleep")) {
		r = syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, &rel, NULL);
		ok = r == 0;
	} else if (!strcmp(m, "raw_clock_nanosleep_abs_rt")) {
		struct timespec abs;

		syscall(SYS_clock_gettime, CLOCK_REALTIME, &abs);
		abs.tv_sec += WAIT_S;
		r = syscall(SYS_clock_nanosleep, CLOCK_REALTIME, TIMER_ABSTIME, &abs, NULL);
		ok = r == 0;
	} else if (!strcmp(m, "raw_futex")) {
		static uint32_t word;

		r = syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, &rel, NULL, 0);
		ok = r < 0 && errno == ETIMEDOUT;
	} else if (!strcmp(m, "raw_ppoll")) {
		r = syscall(SYS_ppoll, NULL, 0, &rel, NULL, 8);
		ok = r == 0;
	} else if (!strcmp(m, "raw_epoll_pwait")) {
		struct epoll_event ev;
		int ep = epoll_create1(EPOLL_CLOEXEC);

		r = syscall(SYS_epoll_pwait, ep, &ev, 1, WAIT_S * 1000, NULL, 8);
		ok = r == 0;
	} else if (!strcmp(m, "raw_pselect6")) {
		r = syscall(SYS_pselect6, 0, NULL, NULL, NULL, &rel, NULL);
		ok = r == 0;
	} else if (!strcmp(m, "raw_timerfd")) {
		struct itimerspec v = { { 0, 0 }, { WAIT_S, 0 } };
		uint64_t n = 0;
		int fd = (int)syscall(SYS_timerfd_create, CLOCK_MONOTONIC, 0);

		r = fd >= 0 ? syscall(SYS_timerfd_settime, fd, 0, &v, NULL) : -1;
		ok = r == 0 && read(fd, &n, sizeof(n)) == (ssize_t)sizeof(n) && n >= 1;
	} else if (!strcmp(m, "raw_alarm")) {
		sigset_t usr, old;

		/* SIGALRM blocked, then waited for. */
		sigemptyset(&usr);
		sigaddset(&usr, SIGALRM);
		sigprocmask(SIG_BLOCK, &usr, &old);
		r = syscall(SYS_alarm, WAIT_S);
		ok = r == 0 && sigwaitinfo(&usr, NULL) == SIGALRM;
	} else if (!strcmp(m, "raw_timer")) {
		struct sigevent sev;
		struct itimerspec v = { { 0, 0 }, { WAIT_S, 0 } };
		sigset_t usr;
		int id = -1;

		sigemptyset(&usr);
		sigaddset(&usr, SIGUSR1);
		sigprocmask(SIG_BLOCK, &usr, NULL);
		memset(&sev, 0, sizeof(sev));
		sev.sigev_notify = SIGEV_SIGNAL;
		sev.sigev_signo = SIGUSR1;
		r = syscall(SYS_timer_create, CLOCK_MONOTONIC, &sev, &id);
		if (r == 0)
			r = syscall(SYS_timer_settime, id, 0, &v, NULL);
		ok = r == 0 && sigwaitinfo(&usr, NULL) == SIGUSR1;
	} else {
		fprintf(stderr, "preload-raw: unknown mode '%s'\n", m);
		return 2;
	}
	m1 = raw_now(CLOCK_MONOTONIC);
	agree = agree && clocks_agree();
	printf("done %lld %lld %s\n", (long long)m0, (long long)m1,
	       !agree ? "clock-mismatch" : ok ? "timeout" : "no-timeout");
	return 0;
}
