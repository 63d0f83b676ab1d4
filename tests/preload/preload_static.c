/* SPDX-License-Identifier: MIT */
/*
 * A statically linked program (it cannot load the shim), run under
 * shmclock-run's supervisor by tests/preload/preload_apps.py (issue 33):
 * one wait of 5 s of its own time, which must time out.
 *
 *   preload-static MODE [COMMAND...]
 *
 * Prints "ready" just before the wait, then "done M0 M1 OUTCOME" as
 * preload-waits does, with libc's clock_gettime(CLOCK_MONOTONIC) (static
 * glibc reads the vDSO, which the supervisor hides). Before and after, libc's
 * gettimeofday and time must agree with CLOCK_REALTIME within 2 s, else
 * OUTCOME is "clock-mismatch".
 *
 * Modes: nanosleep, clock_nanosleep_abs_rt (absolute CLOCK_REALTIME), poll
 * (no descriptor), select (a pipe nobody writes), alarm (SIGALRM blocked
 * and waited for), setitimer (five periods of 1 s, counted), futex (FUTEX_WAIT on a word nobody changes); exec: forks
 * and runs COMMAND (a dynamic program: it follows through the shim), and
 * "timeout" when it exits 0; eintr: a child sends SIGUSR1 (a handler
 * without SA_RESTART) 2 simulated s into a 5 s nanosleep, which must end
 * with EINTR and a remainder of about 3 s, slept then: "timeout" when both
 * held.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
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

static bool clocks_agree(void)
{
	struct timeval tv;
	int64_t rt = now(CLOCK_REALTIME), tod, t;

	gettimeofday(&tv, NULL);
	tod = (int64_t)tv.tv_sec * NS + (int64_t)tv.tv_usec * 1000;
	t = (int64_t)time(NULL) * NS;
	return llabs(tod - rt) < 2 * NS && llabs(t - rt) < 2 * NS;
}

static volatile sig_atomic_t got_usr1;

static void on_usr1(int sig)
{
	(void)sig;
	got_usr1 = 1;
}

int main(int argc, char **argv)
{
	const char *m = argc > 1 ? argv[1] : "";
	struct timespec rel = { WAIT_S, 0 };
	int64_t m0, m1;
	bool ok, agree;

	setvbuf(stdout, NULL, _IOLBF, 0);
	agree = clocks_agree();
	puts("ready");
	m0 = now(CLOCK_MONOTONIC);
	if (!strcmp(m, "nanosleep")) {
		ok = nanosleep(&rel, NULL) == 0;
	} else if (!strcmp(m, "clock_nanosleep_abs_rt")) {
		struct timespec abs;

		clock_gettime(CLOCK_REALTIME, &abs);
		abs.tv_sec += WAIT_S;
		ok = clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &abs, NULL) == 0;
	} else if (!strcmp(m, "select")) {
		/* A pipe's read end that never becomes readable. */
		int p[2];
		fd_set rd;
		struct timeval tv = { WAIT_S, 0 };

		if (pipe(p))
			return 1;
		FD_ZERO(&rd);
		FD_SET(p[0], &rd);
		ok = select(p[0] + 1, &rd, NULL, NULL, &tv) == 0 && !FD_ISSET(p[0], &rd);
	} else if (!strcmp(m, "poll")) {
		ok = poll(NULL, 0, WAIT_S * 1000) == 0;
	} else if (!strcmp(m, "futex")) {
		static uint32_t word;

		ok = syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, &rel, NULL, 0) < 0 &&
		     errno == ETIMEDOUT;
	} else if (!strcmp(m, "eintr")) {
		struct sigaction sa;
		struct timespec rem = { 0, 0 }, two = { 2, 0 };
		pid_t pid;
		int r;

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_usr1;
		sigaction(SIGUSR1, &sa, NULL);
		pid = fork();
		if (pid == 0) {
			nanosleep(&two, NULL);
			kill(getppid(), SIGUSR1);
			_exit(0);
		}
		r = nanosleep(&rel, &rem);
		ok = r < 0 && errno == EINTR && got_usr1 && rem.tv_sec >= 2 && rem.tv_sec <= 3;
		if (ok)
			ok = nanosleep(&rem, NULL) == 0;
		waitpid(pid, NULL, 0);
	} else if (!strcmp(m, "alarm")) {
		sigset_t al;

		/* SIGALRM blocked, then waited for. */
		sigemptyset(&al);
		sigaddset(&al, SIGALRM);
		sigprocmask(SIG_BLOCK, &al, NULL);
		ok = alarm(WAIT_S) == 0 && sigwaitinfo(&al, NULL) == SIGALRM;
	} else if (!strcmp(m, "setitimer")) {
		/* Five periods of 1 s: the fifth SIGALRM ends the wait. */
		struct itimerval v = { { 1, 0 }, { 1, 0 } }, cur;
		sigset_t al;
		int n = 0;

		sigemptyset(&al);
		sigaddset(&al, SIGALRM);
		sigprocmask(SIG_BLOCK, &al, NULL);
		ok = setitimer(ITIMER_REAL, &v, NULL) == 0 && getitimer(ITIMER_REAL, &cur) == 0 &&
		     cur.it_interval.tv_sec == 1 && cur.it_value.tv_sec <= 1;
		while (ok && n < 5)
			ok = sigwaitinfo(&al, NULL) == SIGALRM && ++n;
		v.it_value.tv_sec = v.it_interval.tv_sec = 0;
		setitimer(ITIMER_REAL, &v, NULL);
	} else if (!strcmp(m, "exec") && argc > 2) {
		pid_t pid = fork();
		int st = 0;

		if (pid == 0) {
			execvp(argv[2], argv + 2);
			_exit(127);
		}
		ok = pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && !WEXITSTATUS(st);
	} else {
		fprintf(stderr, "preload-static: unknown mode '%s'\n", m);
		return 2;
	}
	m1 = now(CLOCK_MONOTONIC);
	agree = agree && clocks_agree();
	printf("done %lld %lld %s\n", (long long)m0, (long long)m1,
	       !agree ? "clock-mismatch" : ok ? "timeout" : "no-timeout");
	return 0;
}
