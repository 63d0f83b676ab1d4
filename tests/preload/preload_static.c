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
 * with EINTR and a remainder of what its clock did not show gone (to
 * within a simulated second), slept then: "timeout" when both
 * held; eintr_wait: a 5 s nanosleep with a SIGUSR1 handler (no SA_RESTART)
 * that the test signals: "timeout" when it ended with EINTR (the test
 * pauses the clock, so nothing else ends it).
 *
 * POSIX timers, timerfds and clock_getres (issue 33, answered by the
 * supervisor's listener): posix_timer (a CLOCK_MONOTONIC timer of period 1
 * s, SIGEV_SIGNAL blocked and waited for, expiries counted with si_overrun
 * up to five in five simulated s; its signal left pending over 2.5 s in
 * between, a signal must come with si_overrun >= 1, and timer_getoverrun
 * agree with each); timer_thread_id (a
 * relative CLOCK_REALTIME one-shot of 5 s to this thread, SIGEV_THREAD_ID);
 * timer_sigev_thread (SIGEV_THREAD, absolute on CLOCK_MONOTONIC: static
 * glibc's helper thread takes the signal and starts the function, which
 * posts a semaphore waited for without a timeout); timer_abs_rt (an
 * absolute CLOCK_REALTIME one-shot); timerfd_periodic (period 1 s, read
 * until five expiries, one read after 2.5 s must count at least two, and
 * never more expiries than whole seconds gone);
 * timerfd_abs_rt and timerfd_abs_mono (TFD_TIMER_ABSTIME, waited for by
 * poll and epoll without a timeout); getres (clock_getres of every
 * simulated clock, the coarse ones too, is 1 ns, then a 5 s nanosleep).
 * timer_robust is not a wait: creating timers ends with EAGAIN (the
 * supervisor's bound), bad pointers get EFAULT, a timer deleted by another
 * thread is gone, 1500 timerfds made and closed (more than the supervisor
 * keeps at once), a fork child has no POSIX timer but shares a timerfd,
 * and an exec'd image (this program again, "timer_exec ID") has no timer
 * left: prints "robust ok" or what failed.
 *
 * handler (issue 52: shutdown as a service manager or a harness does it):
 * handlers for SIGHUP, SIGINT, SIGQUIT, SIGTERM and SIGUSR1; prints
 * "ready", waits for a signal, then goes on gathering for 5 simulated s
 * (a duplicate would arrive meanwhile), prints "got SIG from PID code C"
 * for each signal it took, then "handled N" and exits with 40 + the first
 * signal's number: a graceful shutdown whose output and status show.
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
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <pthread.h>
#include <semaphore.h>
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

static sem_t fired;

static void on_timer_thread(union sigval v)
{
	if (v.sival_int == 0x5eed)
		sem_post(&fired);
}

/* Waits for @sig (blocked), SI_TIMER with @value; 1 + its overrun, or -1. */
static int timer_signal(int sig, int value, timer_t t)
{
	sigset_t set;
	siginfo_t si;

	sigemptyset(&set);
	sigaddset(&set, sig);
	if (sigwaitinfo(&set, &si) != sig || si.si_code != SI_TIMER ||
	    si.si_value.sival_int != value || si.si_overrun < 0 ||
	    (t && timer_getoverrun(t) != si.si_overrun))
		return -1;
	return 1 + si.si_overrun;
}

static void block(int sig)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(SIG_BLOCK, &set, NULL);
}

static timer_t mk_timer(clockid_t c, int notify, int sig, int value)
{
	struct sigevent ev;
	timer_t t = 0;

	memset(&ev, 0, sizeof(ev));
	ev.sigev_notify = notify;
	ev.sigev_signo = sig;
	ev.sigev_value.sival_int = value;
	ev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
	if (notify == SIGEV_THREAD)
		ev.sigev_notify_function = on_timer_thread;
	return timer_create(c, &ev, &t) ? (timer_t)-1 : t;
}

static struct timespec at_plus(clockid_t c, int s)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	ts.tv_sec += s;
	return ts;
}

static void *delete_it(void *t)
{
	return (void *)(intptr_t)timer_delete(*(timer_t *)t);
}

#define FAIL(...) do { printf("robust FAIL " __VA_ARGS__); putchar('\n'); return 1; } while (0)

/* The robustness checks (not a wait): "robust ok" or the first failure. */
static int robust(const char *self)
{
	static timer_t many[6000];
	struct itimerspec one = { { 0, 0 }, { 0, 500000000 } }, cur;
	struct timespec res;
	timer_t t, gone;
	pthread_t th;
	void *ret;
	int n = 0, tfd, st;
	uint64_t x;
	pid_t pid;
	char arg[32];

	/* A bound, with the kernel's errno. */
	while (n < 6000 && !(errno = 0) &&
	       (many[n] = mk_timer(CLOCK_MONOTONIC, SIGEV_NONE, 0, 0)) != (timer_t)-1)
		n++;
	if (n == 6000 || errno != EAGAIN || n < 100)
		FAIL("creating 6000 timers: %d, then %s (want EAGAIN)", n, strerror(errno));
	while (n > 0)
		if (timer_delete(many[--n]))
			FAIL("timer_delete: %s", strerror(errno));
	/* Bad pointers: EFAULT, and the supervisor goes on. */
	if (syscall(SYS_timer_create, CLOCK_MONOTONIC, (void *)8, &t) != -1 || errno != EFAULT)
		FAIL("timer_create(bad sigevent): %s", strerror(errno));
	if (syscall(SYS_timer_create, CLOCK_MONOTONIC, NULL, (void *)8) != -1 || errno != EFAULT)
		FAIL("timer_create(bad id pointer): %s", strerror(errno));
	t = mk_timer(CLOCK_MONOTONIC, SIGEV_SIGNAL, SIGUSR2, 7);
	if (t == (timer_t)-1)
		FAIL("timer_create: %s", strerror(errno));
	if (syscall(SYS_timer_settime, t, 0, (void *)8, NULL) != -1 || errno != EFAULT)
		FAIL("timer_settime(bad value): %s", strerror(errno));
	if (syscall(SYS_timer_gettime, t, (void *)8) != -1 || errno != EFAULT)
		FAIL("timer_gettime(bad pointer): %s", strerror(errno));
	if (syscall(SYS_clock_getres, CLOCK_MONOTONIC, (void *)8) != -1 || errno != EFAULT)
		FAIL("clock_getres(bad pointer): %s", strerror(errno));
	if (clock_getres(CLOCK_MONOTONIC, &res) || res.tv_sec || res.tv_nsec != 1)
		FAIL("clock_getres(CLOCK_MONOTONIC) after the bad pointers");
	/* Deleted from another thread: gone for this one. */
	gone = mk_timer(CLOCK_REALTIME, SIGEV_SIGNAL, SIGUSR2, 8);
	if (pthread_create(&th, NULL, delete_it, &gone) || pthread_join(th, &ret) || ret)
		FAIL("timer_delete from another thread");
	if (timer_settime(gone, 0, &one, NULL) != -1 || errno != EINVAL)
		FAIL("timer_settime of a deleted timer: %s", strerror(errno));
	/* Still served: a 0.5 s timer fires. */
	block(SIGUSR2);
	if (timer_settime(t, 0, &one, NULL) || timer_signal(SIGUSR2, 7, t) != 1)
		FAIL("a timer after the bad calls did not fire as one");
	/* Timerfds made and closed, more than the supervisor keeps at once:
	 * the closed ones make room. */
	for (int i = 0; i < 1500; i++) {
		tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
		if (tfd < 0)
			FAIL("timerfd_create number %d: %s", i, strerror(errno));
		close(tfd);
	}
	/* fork: the child has no POSIX timer, shares the timerfd. */
	tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	if (tfd < 0 || timerfd_settime(tfd, 0, &one, NULL))
		FAIL("timerfd: %s", strerror(errno));
	if (timerfd_settime(tfd, 0, (void *)8, NULL) != -1 || errno != EFAULT)
		FAIL("timerfd_settime(bad value): %s", strerror(errno));
	if (timerfd_gettime(0, &cur) != -1 || errno != EINVAL)
		FAIL("timerfd_gettime(stdin): %s", strerror(errno));
	pid = fork();
	if (pid == 0) {
		if (timer_gettime(t, &cur) != -1 || errno != EINVAL)
			_exit(1);
		_exit(read(tfd, &x, sizeof(x)) == sizeof(x) && x == 1 ? 0 : 2);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
		FAIL("fork: the child had the timer (1), or not the timerfd's expiry (2): %d",
		     WEXITSTATUS(st));
	/* exec: the timer is gone in the new image. */
	snprintf(arg, sizeof(arg), "%ld", (long)(intptr_t)t);
	pid = fork();
	if (pid == 0) {
		timer_t again = mk_timer(CLOCK_MONOTONIC, SIGEV_NONE, 0, 0);

		/* The same id in this process, then exec. */
		snprintf(arg, sizeof(arg), "%ld", (long)(intptr_t)again);
		execl(self, self, "timer_exec", arg, (char *)NULL);
		_exit(2);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
		FAIL("exec: the timer survived into the new image (%d)", WEXITSTATUS(st));
	timer_delete(t);
	close(tfd);
	puts("robust ok");
	return 0;
}

static volatile sig_atomic_t got_n;
static siginfo_t got[16];

static void take(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	(void)sig;
	if (got_n < 16)
		got[got_n] = *si;
	got_n++;
}

static int handler_mode(void)
{
	static const int sigs[] = { SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1 };
	struct sigaction sa = { .sa_sigaction = take, .sa_flags = SA_SIGINFO | SA_RESTART };
	int64_t until;

	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
	puts("ready");
	while (!got_n)
		pause();
	until = now(CLOCK_MONOTONIC) + 5 * (int64_t)1000000000;
	while (now(CLOCK_MONOTONIC) < until) {
		struct timespec step = { 0, 100000000 };

		nanosleep(&step, NULL);
	}
	for (int i = 0; i < got_n && i < 16; i++)
		printf("got %s from %d code %d\n", strsignal(got[i].si_signo), (int)got[i].si_pid,
		       got[i].si_code);
	printf("handled %d\n", (int)got_n);
	return 40 + got[0].si_signo;
}

int main(int argc, char **argv)
{
	const char *m = argc > 1 ? argv[1] : "";
	struct timespec rel = { WAIT_S, 0 };
	int64_t m0, m1;
	bool ok, agree;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(m, "timer_robust"))
		return robust(argv[0]);
	if (!strcmp(m, "handler"))
		return handler_mode();
	if (!strcmp(m, "timer_exec") && argc > 2) {
		struct itimerspec cur;

		return timer_gettime((timer_t)(intptr_t)atol(argv[2]), &cur) == -1 && errno == EINVAL
			       ? 0 : 3;
	}
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
		int64_t t0 = now(CLOCK_MONOTONIC), slept, left;

		r = nanosleep(&rel, &rem);
		/* The signal comes about 2 s in (the child's own sleep; a child
		 * late is the machine's doing, not the shim's): what is left is
		 * what this clock did not show gone, never less, and at most a
		 * simulated second more (a preemption around the call; at scale
		 * 10 a tenth of a real second). Real time counted instead would
		 * leave 4.8 s after 2 simulated. */
		slept = now(CLOCK_MONOTONIC) - t0;
		left = (int64_t)rem.tv_sec * NS + rem.tv_nsec;
		ok = r < 0 && errno == EINTR && got_usr1 && slept < WAIT_S * NS &&
		     left >= WAIT_S * NS - slept - 1000000 && left <= WAIT_S * NS - slept + NS;
		if (ok)
			ok = nanosleep(&rem, NULL) == 0;
		waitpid(pid, NULL, 0);
	} else if (!strcmp(m, "eintr_wait")) {
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_usr1;
		sigaction(SIGUSR1, &sa, NULL);
		ok = nanosleep(&rel, NULL) < 0 && errno == EINTR && got_usr1;
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
	} else if (!strcmp(m, "posix_timer")) {
		/* Period 1 s: five expiries, one signal held over two. */
		struct itimerspec v = { { 1, 0 }, { 1, 0 } }, cur;
		struct timespec hold = { 2, 500000000 };
		timer_t t;
		int n = 0, k;
		bool over = false;
		int64_t t0 = now(CLOCK_MONOTONIC);

		block(SIGUSR1);
		t = mk_timer(CLOCK_MONOTONIC, SIGEV_SIGNAL, SIGUSR1, 0x5eed);
		ok = t != (timer_t)-1 && timer_settime(t, 0, &v, NULL) == 0 &&
		     timer_gettime(t, &cur) == 0 && cur.it_interval.tv_sec == 1 &&
		     cur.it_value.tv_sec <= 1;
		ok = ok && (k = timer_signal(SIGUSR1, 0x5eed, t)) > 0 && (n += k);
		/* Expiries at 2 and 3 s while the signal of the one at 2 s is
		 * still pending: one of the next signals carries an overrun. */
		ok = ok && nanosleep(&hold, NULL) == 0;
		while (ok && n < 5) {
			ok = (k = timer_signal(SIGUSR1, 0x5eed, t)) > 0 && (n += k);
			over = over || k > 1;
		}
		/* No expiry was lost to the pending signal: the one that came
		 * while it was pending is carried as an overrun (over). Five or
		 * more, never more than the whole seconds gone: the fifth signal
		 * taken late carries the sixth expiry as its overrun (at scale 10
		 * a tenth of a real second of scheduling delay is a simulated
		 * second: one run of the tarball's suite beside the panel's
		 * browser test failed a bound of 5.9 simulated s, and "exactly
		 * five" is the same bound). */
		ok = ok && over && n >= 5 && (int64_t)n * NS <= now(CLOCK_MONOTONIC) - t0 &&
		     timer_delete(t) == 0;
	} else if (!strcmp(m, "timer_thread_id")) {
		struct itimerspec v = { { 0, 0 }, rel };
		timer_t t;

		block(SIGRTMIN + 3);
		t = mk_timer(CLOCK_REALTIME, SIGEV_THREAD_ID, SIGRTMIN + 3, 0x5eed);
		ok = t != (timer_t)-1 && timer_settime(t, 0, &v, NULL) == 0 &&
		     timer_signal(SIGRTMIN + 3, 0x5eed, t) == 1;
	} else if (!strcmp(m, "timer_sigev_thread")) {
		struct itimerspec v = { { 0, 0 }, at_plus(CLOCK_MONOTONIC, WAIT_S) };
		timer_t t;

		sem_init(&fired, 0, 0);
		t = mk_timer(CLOCK_MONOTONIC, SIGEV_THREAD, 0, 0x5eed);
		ok = t != (timer_t)-1 && timer_settime(t, TIMER_ABSTIME, &v, NULL) == 0;
		while (ok && sem_wait(&fired) && errno == EINTR)
			;
	} else if (!strcmp(m, "timer_abs_rt")) {
		struct itimerspec v = { { 0, 0 }, at_plus(CLOCK_REALTIME, WAIT_S) };
		timer_t t;

		block(SIGUSR1);
		t = mk_timer(CLOCK_REALTIME, SIGEV_SIGNAL, SIGUSR1, 0x5eed);
		ok = t != (timer_t)-1 && timer_settime(t, TIMER_ABSTIME, &v, NULL) == 0 &&
		     timer_signal(SIGUSR1, 0x5eed, t) == 1;
	} else if (!strcmp(m, "timerfd_periodic")) {
		struct itimerspec v = { { 1, 0 }, { 1, 0 } }, cur;
		struct timespec hold = { 2, 500000000 };
		int fd = timerfd_create(CLOCK_MONOTONIC, 0);
		uint64_t x, n = 0;
		int64_t t0 = now(CLOCK_MONOTONIC);

		ok = fd >= 0 && timerfd_settime(fd, 0, &v, NULL) == 0 &&
		     timerfd_gettime(fd, &cur) == 0 && cur.it_interval.tv_sec == 1 &&
		     cur.it_value.tv_sec <= 1 && read(fd, &x, 8) == 8 && (n += x);
		/* The expiries at 2 and 3 s, read at once. */
		ok = ok && nanosleep(&hold, NULL) == 0 && read(fd, &x, 8) == 8 && x >= 2 &&
		     (n += x);
		while (ok && n < 5)
			ok = read(fd, &x, 8) == 8 && (n += x);
		/* More than one expiry a second would be one early (a late
		 * read may get two at once: that is the overrun count). */
		ok = ok && (int64_t)n * NS <= now(CLOCK_MONOTONIC) - t0;
	} else if (!strcmp(m, "timerfd_abs_rt") || !strcmp(m, "timerfd_abs_mono")) {
		clockid_t c = m[12] == 'r' ? CLOCK_REALTIME : CLOCK_MONOTONIC;
		struct itimerspec v = { { 0, 0 }, at_plus(c, WAIT_S) };
		int fd = timerfd_create(c, TFD_NONBLOCK), ep = epoll_create1(0);
		struct epoll_event e = { .events = EPOLLIN };
		struct pollfd pf = { fd, POLLIN, 0 };
		uint64_t x = 0;

		ok = fd >= 0 && timerfd_settime(fd, TFD_TIMER_ABSTIME, &v, NULL) == 0 &&
		     read(fd, &x, 8) == -1 && errno == EAGAIN;
		if (c == CLOCK_REALTIME)
			ok = ok && poll(&pf, 1, -1) == 1;
		else
			ok = ok && epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) == 0 &&
			     epoll_wait(ep, &e, 1, -1) == 1;
		ok = ok && read(fd, &x, 8) == 8 && x == 1;
	} else if (!strcmp(m, "getres")) {
		static const clockid_t ids[] = { CLOCK_REALTIME, CLOCK_MONOTONIC, CLOCK_BOOTTIME,
						 CLOCK_REALTIME_COARSE, CLOCK_MONOTONIC_COARSE,
						 CLOCK_MONOTONIC_RAW };
		struct timespec res;

		ok = true;
		for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
			ok = ok && clock_getres(ids[i], &res) == 0 && !res.tv_sec &&
			     res.tv_nsec == 1;
		ok = ok && clock_getres(CLOCK_MONOTONIC, NULL) == 0 && nanosleep(&rel, NULL) == 0;
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
