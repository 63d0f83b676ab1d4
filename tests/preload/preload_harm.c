/* SPDX-License-Identifier: MIT */
/*
 * Programs the shim must not harm (issue 28): each case does what real
 * programs do, checks its own result, and says "ok CASE ..." (exit 0) or
 * "FAIL CASE: why" (exit 1). Every case passes without the shim; the test
 * (test_preload.c) runs them under it, on a system-source clock at scale 1.
 *
 *   select-small  a select() set sized to nfds (8 bytes, at the end of a
 *                 page, as OpenSSH allocates it): no crash, right answers
 *   select-big    a set for an fd >= 1024 (1500): the event that comes
 *                 100 ms into a 2 s select is seen
 *   dup2-hidden   dup2() of a pipe over every descriptor the program did not
 *                 open (the shim's): the program's data stays its own, and
 *                 the timerfd still ticks
 *   close-range   close_range(3, ~0U) / closefrom(3) after timerfds, then new
 *                 pipes: they stay open and the process stays idle
 *   alarm-read    alarm(1) + a blocking read, 6 times, with and without
 *                 SA_RESTART, and 3 times while SIGALRM is blocked for 2.5 s:
 *                 every alarm arrives, once
 *   cancel-sleep  pthread_cancel of a thread in nanosleep / clock_nanosleep
 *   tfd-fast      a 20 us periodic timerfd keeps firing for 1 s
 *   cancel-close  a thread cancelled in close() of its timerfd: the shim
 *                 stays usable (no lock left held)
 *   tfd-move      a timerfd moved by F_DUPFD / dup and close of the original
 *                 keeps ticking under its new number
 *   vfork-alarm   a vfork child's alarm() is its own, not the parent's
 *   select-open-max  select(sysconf(_SC_OPEN_MAX), &fd_set) at a page's end
 *   tfd-churn     3000 timerfds made and closed: open() still gets the
 *                 lowest free number
 *   stress        200 threads (and 20 in a forked child) each arming, reading
 *                 and closing (or dup2-ing over) 20 timerfds in turn
 *   many-timers   300 timerfds and 300 POSIX timers; under RLIMIT_NOFILE 20
 *                 at least half as many timerfds as descriptors were free
 *   select-emfile select(1 << 20, &fd_set) at a page's end with every
 *                 descriptor taken (the table's size cannot be read)
 *   place-race    dup2/dup3/close_range onto numbers near the table's top
 *                 while other threads create timerfds, whose copies go there
 *   vfork-close   a vfork child closing a timerfd's second name leaves the
 *                 parent's timerfd ticking under it
 *   sigmask       signal masks as a program sets and reads them: SIGUSR1
 *                 blocked stays pending until unblocked (then handled
 *                 once), in the main thread and in a new one; a mask that
 *                 blocks SIGSYS reads back with SIGSYS (issue 33: the trap
 *                 answers sigprocmask; a first version lost every change)
 *   timers-across-changes  a 20 ms POSIX timer's expiries and a blocked
 *                 alarm while the test rescales and pauses the clock (run
 *                 by test_preload.c on a clock it changes, not by harmless())
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <linux/close_range.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_UNSHARE
#define CLOSE_RANGE_UNSHARE (1U << 1)
#endif

static const char *kase;

static int fail(const char *fmt, ...)
{
	va_list ap;

	printf("FAIL %s: ", kase);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	return 1;
}

static double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static double cpu(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ------------------------------------------------------------ select */

static int select_small(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	char *m = mmap(NULL, 2 * (size_t)pg, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	fd_mask *set;
	struct timeval tv;
	int p[2], r;

	if (m == MAP_FAILED || mprotect(m + pg, (size_t)pg, PROT_NONE) || pipe(p))
		return fail("set-up: %s", strerror(errno));
	if (p[0] >= 64)
		return fail("pipe at %d", p[0]);
	set = (fd_mask *)(m + pg - sizeof(fd_mask)); /* the last word of the page */
	*set = (fd_mask)1 << p[0];
	tv = (struct timeval){ 0, 200000 };
	r = select(p[0] + 1, (fd_set *)set, NULL, NULL, &tv);
	if (r != 0 || *set != 0)
		return fail("nothing to read: select %d, set %#lx", r, (unsigned long)*set);
	(void)!write(p[1], "x", 1);
	*set = (fd_mask)1 << p[0];
	tv = (struct timeval){ 2, 0 };
	r = select(p[0] + 1, (fd_set *)set, NULL, NULL, &tv);
	if (r != 1 || *set != (fd_mask)1 << p[0])
		return fail("a byte to read: select %d", r);
	printf("ok select-small\n");
	return 0;
}

static int late_fd;

static void *write_later(void *arg)
{
	(void)arg;
	usleep(100000);
	(void)!write(late_fd, "x", 1);
	return NULL;
}

static int select_big(void)
{
	enum { FD = 1500 };
	size_t words = FD / (8 * sizeof(fd_mask)) + 1;
	fd_mask *set = calloc(words, sizeof(fd_mask));
	struct rlimit rl;
	struct timeval tv = { 2, 0 };
	pthread_t th;
	double t0;
	int p[2], r;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return fail("getrlimit");
	if (rl.rlim_cur <= FD) {
		if (rl.rlim_max <= FD) {
			printf("skip select-big: RLIMIT_NOFILE hard limit %lu\n",
			       (unsigned long)rl.rlim_max);
			return 77;
		}
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (pipe(p) || dup2(p[0], FD) != FD)
		return fail("set-up: %s", strerror(errno));
	set[FD / (8 * sizeof(fd_mask))] = (fd_mask)1 << (FD % (8 * sizeof(fd_mask)));
	late_fd = p[1];
	pthread_create(&th, NULL, write_later, NULL);
	t0 = mono();
	r = select(FD + 1, (fd_set *)set, NULL, NULL, &tv);
	pthread_join(th, NULL);
	if (r != 1 || !(set[FD / (8 * sizeof(fd_mask))] >> (FD % (8 * sizeof(fd_mask))) & 1))
		return fail("select %d after %.2f s: the event at fd %d was lost", r, mono() - t0,
			    FD);
	printf("ok select-big %.3f s\n", mono() - t0);
	return 0;
}

/* ------------------------------------------------------------ descriptors */

/* Which descriptors are open now: a bitmap of the first 65536. */
static void open_fds(unsigned char *bits)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int self = d ? dirfd(d) : -1;

	memset(bits, 0, 8192);
	while (d && (e = readdir(d))) {
		int fd = atoi(e->d_name);

		if (e->d_name[0] != '.' && fd != self && fd < 65536)
			bits[fd / 8] |= (unsigned char)(1 << fd % 8);
	}
	if (d)
		closedir(d);
}

static bool has(const unsigned char *bits, int fd)
{
	return bits[fd / 8] >> fd % 8 & 1;
}

static int arm(int fd, long period_ns)
{
	struct itimerspec its = { { 0, period_ns }, { 0, period_ns } };

	return timerfd_settime(fd, 0, &its, NULL);
}

/* A timerfd read within 5 s (non-blocking polls: a lost timer must not
 * hang the test). */
static uint64_t ticks(int tfd)
{
	uint64_t n = 0;

	for (int i = 0; i < 500; i++) {
		struct timespec ts = { 0, 10000000 };
		struct timeval tv = { 0, 0 };
		fd_set rd;

		FD_ZERO(&rd);
		FD_SET(tfd, &rd);
		if (select(tfd + 1, &rd, NULL, NULL, &tv) == 1 && read(tfd, &n, sizeof(n)) == 8)
			return n;
		nanosleep(&ts, NULL);
	}
	return 0;
}

static int dup2_hidden(void)
{
	static unsigned char before[8192], after[8192];
	int tfd, p[2], hidden = 0;

	open_fds(before);
	tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	if (tfd < 0 || arm(tfd, 50000000) || pipe(p))
		return fail("set-up: %s", strerror(errno));
	usleep(200000); /* the shim's helpers are running */
	open_fds(after);
	for (int fd = 3; fd < 65536; fd++) {
		char buf[8] = "";

		if (!has(after, fd) || has(before, fd) || fd == tfd || fd == p[0] || fd == p[1])
			continue;
		hidden++;
		/* The number is free as far as the program knows: closing it,
		 * duplicating it fail as for any number not open; F_DUPFD from
		 * it gives it (the lowest free number at or above it). */
		if (close(fd) != -1 || errno != EBADF || dup(fd) != -1 || errno != EBADF ||
		    fcntl(fd, F_GETFD) != -1 || errno != EBADF)
			return fail("%d is open to the program", fd);
		if (fcntl(p[0], F_DUPFD, fd) != fd)
			return fail("F_DUPFD from %d did not give %d", fd, fd);
		if (close(fd))
			return fail("close %d: %s", fd, strerror(errno));
		/* CLOSE_RANGE_CLOEXEC on a free number closes and marks nothing. */
		if (close_range((unsigned)fd, (unsigned)fd, CLOSE_RANGE_CLOEXEC) && errno != ENOSYS &&
		    errno != EINVAL)
			return fail("close_range(%d, CLOEXEC): %s", fd, strerror(errno));
		/* A bad source leaves the target as it was: free. */
		if (dup2(-1, fd) != -1 || errno != EBADF || dup3(-1, fd, 0) != -1 || errno != EBADF)
			return fail("dup2/dup3 of a bad source onto %d did not fail with EBADF", fd);
		/* Every other number by dup3 (with O_CLOEXEC), the rest by dup2. */
		if (hidden % 2 ? dup3(p[0], fd, O_CLOEXEC) != fd : dup2(p[0], fd) != fd)
			return fail("dup%d onto %d: %s", hidden % 2 ? 3 : 2, fd, strerror(errno));
		if (write(p[1], "hello", 5) != 5)
			return fail("write");
		usleep(100000); /* the shim's helpers had time to steal it */
		if (fcntl(fd, F_SETFL, O_NONBLOCK) || read(fd, buf, sizeof(buf)) != 5 ||
		    strcmp(buf, "hello"))
			return fail("the program's pipe at %d lost its data (%s)", fd, buf);
		if (close(fd))
			return fail("close %d: %s", fd, strerror(errno));
	}
	/* At the top of the table: F_DUPFD from just below the limit gets
	 * the last number, whoever had it. */
	{
		struct rlimit rl;
		int top, r;

		getrlimit(RLIMIT_NOFILE, &rl);
		top = rl.rlim_cur > 65536 ? 65536 : (int)rl.rlim_cur;
		if (top > 65536 || fcntl(top - 1, F_GETFD) != -1) {
			/* the program's own: nothing to check */
		} else if ((r = fcntl(p[0], F_DUPFD, top - 1)) != top - 1) {
			return fail("F_DUPFD from %d gave %d", top - 1, r);
		} else {
			close(r);
		}
	}
	/* A bad source onto the program's timerfd: it stays and ticks. */
	if (dup2(-1, tfd) != -1 || errno != EBADF || dup3(-1, tfd, 0) != -1 || errno != EBADF)
		return fail("dup2/dup3 of a bad source onto the timerfd did not fail with EBADF");
	if (!ticks(tfd))
		return fail("the timerfd stopped after %d dup2", hidden);
	if (arm(tfd, 20000000) || !ticks(tfd))
		return fail("the timerfd cannot be re-armed after %d dup2", hidden);
	printf("ok dup2-hidden %d\n", hidden);
	return 0;
}

static int close_range_case(bool from)
{
	int t1 = timerfd_create(CLOCK_MONOTONIC, 0), t2 = timerfd_create(CLOCK_REALTIME, 0);
	int p[3][2];
	double c0, w0;

	if (t1 < 0 || t2 < 0 || arm(t1, 10000000) || arm(t2, 30000000))
		return fail("set-up: %s", strerror(errno));
	usleep(100000);
	if (from)
		closefrom(3);
	else if (syscall(SYS_close_range, 3, ~0U, 0) && errno == ENOSYS)
		return printf("skip close-range: no close_range\n"), 77;
	else if (close_range(3, ~0U, 0))
		return fail("close_range: %s", strerror(errno));
	for (int i = 0; i < 3; i++)
		if (pipe(p[i]))
			return fail("pipe: %s", strerror(errno));
	/* The shim's helpers had time to use the numbers they thought theirs. */
	c0 = cpu();
	w0 = mono();
	usleep(1000000);
	for (int i = 0; i < 3; i++) {
		char c = 0;

		if (write(p[i][1], "y", 1) != 1 || read(p[i][0], &c, 1) != 1 || c != 'y')
			return fail("pipe %d (%d, %d): %s", i, p[i][0], p[i][1], strerror(errno));
	}
	if (cpu() - c0 > 0.5 * (mono() - w0))
		return fail("%.2f s of CPU in %.2f s idle", cpu() - c0, mono() - w0);
	/* New timerfds work after it. */
	t1 = timerfd_create(CLOCK_MONOTONIC, 0);
	if (t1 < 0 || arm(t1, 20000000) || !ticks(t1))
		return fail("a timerfd made afterwards does not tick");
	printf("ok %s\n", kase);
	return 0;
}

/* ------------------------------------------------------------ signals */

static _Atomic int alarms;
static int wake_fd;

/* Counts the alarm and ends the read (write is async-signal-safe): with
 * SA_RESTART the read goes on after the handler and gets the byte. */
static void on_alarm(int s)
{
	(void)s;
	alarms++;
	(void)!write(wake_fd, "a", 1);
}

static void *unblock_later(void *arg)
{
	/* A lost alarm leaves the read blocked: end it after 5 s. */
	struct timespec ts = { 5, 0 };

	(void)arg;
	clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
	(void)!write(wake_fd, "w", 1);
	return NULL;
}

static int alarm_read(void)
{
	int lost = 0, rounds = 6;

	for (int restart = 0; restart < 2; restart++) {
		struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = restart ? SA_RESTART : 0 };

		sigemptyset(&sa.sa_mask);
		sigaction(SIGALRM, &sa, NULL);
		for (int i = 0; i < rounds; i++) {
			int p[2], before = alarms;
			pthread_t th;
			char c = 0;
			ssize_t r;

			if (pipe(p))
				return fail("pipe");
			wake_fd = p[1];
			pthread_create(&th, NULL, unblock_later, NULL);
			alarm(1);
			r = read(p[0], &c, 1);
			if (restart ? !(r == 1 && c == 'a') : !(r == -1 && errno == EINTR))
				lost++;
			pthread_cancel(th);
			pthread_join(th, NULL);
			if (alarms != before + 1)
				lost++;
			close(p[0]);
			close(p[1]);
		}
	}
	/* An alarm that comes while the program blocks SIGALRM stays pending
	 * until it unblocks it, however long that is. */
	for (int i = 0; i < 3; i++) {
		struct timespec ts = { 2, 500000000 };
		sigset_t m, p;
		int before = alarms, pending;

		sigemptyset(&m);
		sigaddset(&m, SIGALRM);
		sigprocmask(SIG_BLOCK, &m, NULL);
		alarm(1);
		clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
		sigpending(&p);
		pending = sigismember(&p, SIGALRM);
		sigprocmask(SIG_UNBLOCK, &m, NULL);
		if (!pending || alarms != before + 1)
			return fail("an alarm due while blocked: pending %d, %d handled", pending,
				    alarms - before);
	}
	if (lost)
		return fail("%d of %d alarms lost or doubled", lost, 2 * rounds);
	printf("ok alarm-read %d\n", 2 * rounds + 3);
	return 0;
}

static void *sleep_long(void *arg)
{
	struct timespec ts = { 30, 0 };

	(void)arg;
	if (arg)
		clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
	else
		nanosleep(&ts, NULL);
	return NULL;
}

/* nanosleep and clock_nanosleep are cancellation points. */
static int cancel_sleep(void)
{
	for (int k = 0; k < 2; k++) {
		pthread_t th;
		void *res = NULL;
		double t0;

		pthread_create(&th, NULL, sleep_long, k ? &th : NULL);
		usleep(100000);
		t0 = mono();
		pthread_cancel(th);
		pthread_join(th, &res);
		if (res != PTHREAD_CANCELED || mono() - t0 > 10)
			return fail("%s: the sleeping thread was not cancelled (%.1f s)",
				    k ? "clock_nanosleep" : "nanosleep", mono() - t0);
	}
	printf("ok cancel-sleep\n");
	return 0;
}

/* ------------------------------------------------------------ stress */

static _Atomic int stress_bad;

/* One timerfd after another: armed 1 ms ahead, it must fire (once) within
 * 5 s; closed, or replaced by dup2 of a pipe, then the next. */
static void *stress_one(void *arg)
{
	int id = (int)(intptr_t)arg, p[2];

	if (pipe(p))
		return (void *)1;
	for (int i = 0; i < 20; i++) {
		struct itimerspec its = { { 0, 0 }, { 0, 1000000 } };
		int fd = timerfd_create(i % 2 ? CLOCK_REALTIME : CLOCK_MONOTONIC, TFD_NONBLOCK);
		uint64_t n = 0;

		if (fd < 0 || timerfd_settime(fd, 0, &its, NULL)) {
			stress_bad++;
			break;
		}
		n = ticks(fd);
		if (n != 1) {
			printf("thread %d round %d: %llu expiries\n", id, i, (unsigned long long)n);
			stress_bad++;
		}
		if ((i + id) % 3 == 0)
			dup2(p[0], fd); /* the number is the pipe's now */
		close(fd);
	}
	close(p[0]);
	close(p[1]);
	return NULL;
}

static int stress_run(int threads)
{
	pthread_t th[200];

	for (int i = 0; i < threads; i++)
		if (pthread_create(&th[i], NULL, stress_one, (void *)(intptr_t)i))
			return fail("pthread_create %d", i);
	for (int i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	return stress_bad;
}

static int stress(void)
{
	pid_t pid = fork();
	int st, bad;

	if (pid == 0)
		_exit(stress_run(20) ? 1 : 0);
	bad = stress_run(200);
	waitpid(pid, &st, 0);
	if (bad || !WIFEXITED(st) || WEXITSTATUS(st))
		return fail("%d bad timerfd rounds in 200 threads, child status %d", bad, st);
	printf("ok stress 4000 timerfds in 200 threads, 400 in a forked child\n");
	return 0;
}

/* ------------------------------------------------------------ review */

/* A fast periodic timerfd (20 us) keeps firing: no expiry leaves the shim's
 * timerfd thread without its next wake-up. */
static int tfd_fast(void)
{
	int t = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
	struct itimerspec its = { { 0, 20000 }, { 0, 20000 } };
	double end, t0 = mono();
	uint64_t total = 0;
	int stalls = 0;

	if (t < 0 || timerfd_settime(t, 0, &its, NULL))
		return fail("set-up: %s", strerror(errno));
	for (end = t0 + 1.0; mono() < end;) {
		struct timespec to = { 0, 500000000 }; /* real: a raw ppoll */
		struct pollfd p = { t, POLLIN, 0 };
		uint64_t k;

		if (syscall(SYS_ppoll, &p, 1, &to, NULL, 8) == 0)
			stalls++;
		else if (read(t, &k, 8) == 8)
			total += k;
	}
	if (stalls || total < 1000)
		return fail("%llu expiries in 1 s at 20 us, %d half-second stalls",
			    (unsigned long long)total, stalls);
	printf("ok tfd-fast %llu\n", (unsigned long long)total);
	return 0;
}

static void *cancelled_close(void *arg)
{
	int t = timerfd_create(CLOCK_MONOTONIC, 0);

	(void)arg;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	pthread_cancel(pthread_self());
	pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
	close(t); /* a cancellation point: cancelled here, as without the shim */
	return NULL;
}

/* A thread cancelled in close() of its timerfd leaves the shim usable. */
static int cancel_close(void)
{
	int t2 = timerfd_create(CLOCK_MONOTONIC, 0);
	pthread_t th;
	void *rv;

	pthread_create(&th, NULL, cancelled_close, NULL);
	pthread_join(th, &rv);
	if (rv != PTHREAD_CANCELED)
		return fail("the thread was not cancelled in close");
	alarm(0);
	if (close(t2) || arm(timerfd_create(CLOCK_MONOTONIC, 0), 1000000))
		return fail("after the cancel: %s", strerror(errno));
	printf("ok cancel-close\n");
	return 0;
}

/* A timerfd moved to another number (F_DUPFD, then the original closed)
 * keeps ticking and answering timerfd_gettime there. */
static int tfd_move(void)
{
	int t = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK), m;
	struct itimerspec cur;

	if (t < 0 || arm(t, 50000000))
		return fail("set-up");
	m = fcntl(t, F_DUPFD_CLOEXEC, 10);
	close(t);
	if (!ticks(m) || timerfd_gettime(m, &cur))
		return fail("the timerfd moved from %d to %d stopped", t, m);
	m = dup(t = m);
	close(t);
	if (!ticks(m) || timerfd_gettime(m, &cur))
		return fail("the timerfd dup'ed to %d stopped", m);
	printf("ok tfd-move\n");
	return 0;
}

static volatile sig_atomic_t vfork_alarms;

static void on_vfork_alarm(int s)
{
	(void)s;
	vfork_alarms++;
}

/* A vfork child's alarm() before exec is its own: the parent's alarm
 * stays as it was, and no SIGALRM of the child's comes to the parent. */
static int vfork_alarm(void)
{
	struct timespec ts = { 2, 0 };
	unsigned left;
	pid_t c;

	signal(SIGALRM, on_vfork_alarm);
	alarm(100);
	c = vfork();
	if (c == 0) {
		alarm(1);
		execl("/bin/true", "true", (char *)NULL);
		_exit(127);
	}
	waitpid(c, NULL, 0);
	left = alarm(100);
	nanosleep(&ts, NULL);
	alarm(0);
	if (left < 90 || vfork_alarms)
		return fail("the parent's alarm: %u s left, %d SIGALRM", left, (int)vfork_alarms);
	printf("ok vfork-alarm\n");
	return 0;
}

/* select(sysconf(_SC_OPEN_MAX), &plain_fd_set): the kernel reads no more
 * than its table's bits, and the table stays small with the shim's
 * descriptors too. The set ends a page; a canary run checks nothing
 * after it is written. */
static int select_open_max(void)
{
	long pg = sysconf(_SC_PAGESIZE), nfds = sysconf(_SC_OPEN_MAX);
	char *m = mmap(NULL, 2 * (size_t)pg, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	fd_set *rd = (fd_set *)(m + pg - sizeof(fd_set));
	struct timeval tv = { 0, 100000 };
	int p[2], t, r;

	closefrom(3);
	t = timerfd_create(CLOCK_MONOTONIC, 0); /* the shim's copy is made */
	if (t < 0 || pipe(p) || mprotect(m + pg, (size_t)pg, PROT_NONE))
		return fail("set-up: %s", strerror(errno));
	FD_ZERO(rd);
	FD_SET(p[0], rd);
	r = select((int)nfds, rd, NULL, NULL, &tv);
	if (r != 0)
		return fail("select(%ld, fd_set) = %d (%s)", nfds, r, strerror(errno));
	(void)!write(p[1], "x", 1);
	FD_SET(p[0], rd);
	tv = (struct timeval){ 1, 0 };
	if (select((int)nfds, rd, NULL, NULL, &tv) != 1 || !FD_ISSET(p[0], rd))
		return fail("select(%ld, fd_set) missed the byte", nfds);
	printf("ok select-open-max %ld\n", nfds);
	return 0;
}

/* Timerfds made and closed by the thousand leave the numbers the program
 * gets where they were: the lowest free one. */
static int tfd_churn(void)
{
	struct rlimit rl = { 256, 256 };
	int before, after;

	closefrom(3); /* nothing inherited in the way */
	if (setrlimit(RLIMIT_NOFILE, &rl))
		return fail("setrlimit: %s", strerror(errno));
	before = open("/dev/null", O_RDONLY);
	close(before);
	for (int i = 0; i < 3000; i++) {
		int t = timerfd_create(CLOCK_MONOTONIC, 0);

		if (t < 0)
			return fail("timerfd %d: %s", i, strerror(errno));
		close(t);
	}
	/* One alive (with the shim's copy, wherever it put it): the program's
	 * next numbers are the next free ones. */
	if (timerfd_create(CLOCK_MONOTONIC, 0) != before)
		return fail("the last timerfd is not at %d", before);
	after = open("/dev/null", O_RDONLY);
	if (after != before + 1)
		return fail("open gave %d, not %d, after 3000 timerfds", after, before + 1);
	printf("ok tfd-churn\n");
	return 0;
}

/* ------------------------------------------------------------ limits */

static int open_count(void)
{
	static unsigned char bits[8192];
	int n = 0;

	open_fds(bits);
	for (int fd = 0; fd < 65536; fd++)
		n += has(bits, fd);
	return n;
}

static int many_timers(void)
{
	struct sigevent sev = { .sigev_notify = SIGEV_NONE };
	struct rlimit rl = { 20, 20 };
	int n, free_fds, made = 0;
	pid_t pid;
	int st;

	for (n = 0; n < 300; n++) {
		timer_t t;
		int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);

		if (fd < 0)
			return fail("timerfd %d: %s", n, strerror(errno));
		if (arm(fd, 100000000))
			return fail("arming timerfd %d: %s", n, strerror(errno));
		if (timer_create(CLOCK_MONOTONIC, &sev, &t))
			return fail("timer %d: %s", n, strerror(errno));
	}
	/* A child with RLIMIT_NOFILE 20 (one with no timerfd yet). */
	pid = fork();
	if (pid == 0) {
		closefrom(3);
		if (setrlimit(RLIMIT_NOFILE, &rl))
			_exit(2);
		free_fds = 20 - open_count();
		while (timerfd_create(CLOCK_MONOTONIC, 0) >= 0)
			made++;
		printf("timerfds %d of %d free descriptors\n", made, free_fds);
		fflush(stdout);
		_exit(2 * made >= free_fds - 1 ? 0 : 1);
	}
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		return fail("under RLIMIT_NOFILE 20 (status %d)", st);
	printf("ok many-timers\n");
	return 0;
}

/* select(huge nfds, &fd_set) with every descriptor taken: the shim cannot
 * open /proc/self/status to learn the table's size, and must still read no
 * more of the set than the kernel would (it ends a page). */
static int select_emfile(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	char *m = mmap(NULL, 2 * (size_t)pg, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	fd_set *rd = (fd_set *)(m + pg - sizeof(fd_set));
	struct rlimit rl = { 128, 128 };
	struct timeval tv = { 1, 0 };
	int p[2], t, r, filled = 0;

	closefrom(3);
	if (setrlimit(RLIMIT_NOFILE, &rl) || pipe(p) || mprotect(m + pg, (size_t)pg, PROT_NONE))
		return fail("set-up: %s", strerror(errno));
	t = timerfd_create(CLOCK_MONOTONIC, 0); /* the shim is in play */
	if (t < 0)
		return fail("timerfd_create: %s", strerror(errno));
	while (open("/dev/null", O_RDONLY) >= 0)
		filled++;
	if (errno != EMFILE)
		return fail("filling the table: %s", strerror(errno));
	(void)!write(p[1], "x", 1);
	FD_ZERO(rd);
	FD_SET(p[0], rd);
	r = select(1 << 20, rd, NULL, NULL, &tv);
	if (r != 1 || !FD_ISSET(p[0], rd))
		return fail("select(1 << 20, fd_set) at EMFILE = %d (%s)", r, strerror(errno));
	printf("ok select-emfile (%d descriptors filled the table)\n", filled);
	return 0;
}

/* Threads dup2 (and dup3, close_range) onto numbers near the top of the
 * table while others create timerfds, whose copies the shim places there:
 * the program's number is always the program's (open, its pipe, closable),
 * whatever placement it raced. */
#define RACE_TOP 64
static _Atomic bool race_stop;
static _Atomic int race_bad;
static char race_why[160];

static void *race_dup(void *arg)
{
	int i = (int)(uintptr_t)arg, p[2];
	unsigned seed = (unsigned)i;
	long n = 0;

	if (pipe(p))
		return NULL;
	while (!atomic_load(&race_stop)) {
		/* Each racer its own five numbers at the top: its pipe's. */
		int fd = RACE_TOP - 1 - 5 * i - (int)(rand_r(&seed) % 5), how = (int)(n++ % 3), r;
		char c;

		r = how == 2 ? dup3(p[1], fd, O_CLOEXEC) : dup2(p[1], fd);
		if (r != fd) {
			/* Another racer's number, or EBUSY from the kernel mid-open. */
			if (errno == EBUSY)
				continue;
			snprintf(race_why, sizeof(race_why), "dup%d onto %d: %s", how == 2 ? 3 : 2,
				 fd, strerror(errno));
			atomic_fetch_add(&race_bad, 1);
			break;
		}
		/* The program's pipe now: a write through it lands there. */
		if (fcntl(fd, F_GETFD) < 0 || write(fd, "x", 1) != 1) {
			snprintf(race_why, sizeof(race_why), "the program's %d after dup2: %s", fd,
				 strerror(errno));
			atomic_fetch_add(&race_bad, 1);
			break;
		}
		while (read(p[0], &c, 1) != 1)
			;
		r = how == 1 ? close_range((unsigned)fd, (unsigned)fd, 0) : close(fd);
		if (r) {
			snprintf(race_why, sizeof(race_why), "close %d: %s", fd, strerror(errno));
			atomic_fetch_add(&race_bad, 1);
			break;
		}
	}
	return NULL;
}

static void *race_tfd(void *arg)
{
	(void)arg;
	while (!atomic_load(&race_stop)) {
		int t = timerfd_create(CLOCK_MONOTONIC, 0);

		if (t >= 0)
			close(t);
	}
	return NULL;
}

static int place_race(void)
{
	struct rlimit rl = { RACE_TOP, RACE_TOP };
	pthread_t th[6];
	int t;

	closefrom(3);
	if (setrlimit(RLIMIT_NOFILE, &rl))
		return fail("setrlimit: %s", strerror(errno));
	for (int i = 0; i < 6; i++)
		pthread_create(&th[i], NULL, i < 3 ? race_dup : race_tfd, (void *)(uintptr_t)i);
	usleep(1500000);
	atomic_store(&race_stop, true);
	for (int i = 0; i < 6; i++)
		pthread_join(th[i], NULL);
	if (atomic_load(&race_bad))
		return fail("%s", race_why);
	t = timerfd_create(CLOCK_MONOTONIC, 0);
	if (t < 0 || arm(t, 20000000) || !ticks(t))
		return fail("a timerfd after the race does not tick");
	printf("ok place-race\n");
	return 0;
}

/* A vfork child that closes the parent's second name of a timerfd (as
 * CPython's subprocess does before exec) closes its own copy only: the
 * parent's timerfd keeps ticking under that name once the first is closed. */
static int vfork_close(void)
{
	int t = timerfd_create(CLOCK_MONOTONIC, 0), t2;
	pid_t c;

	if (t < 0 || (t2 = dup(t)) < 0 || arm(t, 20000000))
		return fail("set-up: %s", strerror(errno));
	c = vfork();
	if (c == 0) {
		close(t2);
		closefrom(3);
		_exit(0);
	}
	if (c < 0)
		return fail("vfork: %s", strerror(errno));
	waitpid(c, NULL, 0);
	close(t);
	if (!ticks(t2))
		return fail("the timerfd stopped once the vfork child closed its copy");
	printf("ok vfork-close\n");
	return 0;
}

/* A periodic POSIX timer (SIGUSR1 every 20 ms, blocked 35 ms at a time,
 * no SA_RESTART) and a
 * one-shot setitimer whose SIGALRM stays blocked, while the test changes
 * the clock (scale, pause, resume): the expiries the timer's signals carry
 * (1 + si_overrun each) are the periods that passed on the program's
 * CLOCK_MONOTONIC, and the alarm is pending exactly once. A re-plan that
 * dropped a queued signal loses its expiries; one that fired twice adds. */
static _Atomic long usr1_exp, alrm_seen;

static void on_usr1(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	atomic_fetch_add(&usr1_exp, 1 + (si->si_overrun > 0 ? si->si_overrun : 0));
}

static void on_alrm(int sig)
{
	(void)sig;
	atomic_fetch_add(&alrm_seen, 1);
}

static int timers_across_changes(void)
{
	struct sigaction sa = { .sa_sigaction = on_usr1, .sa_flags = SA_SIGINFO };
	struct sigevent sev = { .sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGUSR1 };
	struct itimerspec per = { { 0, 20000000 }, { 0, 20000000 } }, off = { 0 };
	struct itimerval once = { { 0, 0 }, { 0, 700000 } };
	struct timespec nap = { 0, 7000000 };
	sigset_t alrm, usr1, pend;
	double t0a, t0, t1, t1b;
	long lo, hi, got;
	timer_t id;
	int sig;

	sigaction(SIGUSR1, &sa, NULL);
	signal(SIGALRM, on_alrm);
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	sigprocmask(SIG_BLOCK, &alrm, NULL);
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	if (timer_create(CLOCK_MONOTONIC, &sev, &id) || setitimer(ITIMER_REAL, &once, NULL))
		return fail("set-up: %s", strerror(errno));
	t0a = mono();
	timer_settime(id, 0, &per, NULL);
	t0 = mono();
	printf("armed\n");
	/* SIGUSR1 blocked most of the time: its signal is queued (its
	 * overruns counting up) when the clock changes. */
	while (mono() - t0 < 2.0) {
		struct timespec held = { 0, 35000000 };

		sigprocmask(SIG_BLOCK, &usr1, NULL);
		while (nanosleep(&held, &held))
			;
		sigprocmask(SIG_UNBLOCK, &usr1, NULL);
		nanosleep(&nap, NULL); /* EINTR by SIGUSR1: fine */
	}
	t1 = mono();
	timer_settime(id, 0, &off, NULL);
	t1b = mono();
	/* Between the periods surely passed while armed and those that may
	 * have (readings on either side of arming and disarming), one more
	 * each way for the real timer's rounding. */
	lo = (long)((t1 - t0) / 0.020) - 1;
	hi = (long)((t1b - t0a) / 0.020) + 1;
	got = atomic_load(&usr1_exp);
	if (got < lo || got > hi)
		return fail("%ld expiries of a 20 ms timer in %.3f s of the program's clock "
			    "(want %ld to %ld)", got, t1 - t0, lo, hi);
	sigpending(&pend);
	if (!sigismember(&pend, SIGALRM))
		return fail("the blocked alarm (700 ms) is not pending after %.3f s", t1 - t0);
	sigwait(&alrm, &sig);
	sigpending(&pend);
	if (sigismember(&pend, SIGALRM))
		return fail("the alarm came twice");
	sigprocmask(SIG_UNBLOCK, &alrm, NULL);
	nanosleep(&(struct timespec){ 0, 200000000 }, NULL);
	if (atomic_load(&alrm_seen))
		return fail("a one-shot alarm came again");
	printf("ok timers-across-changes %ld expiries in %.3f s\n", got, t1 - t0);
	return 0;
}

/* ------------------------------------------------------------ masks */

static volatile sig_atomic_t usr1_seen;

static void on_usr1_count(int sig)
{
	(void)sig;
	usr1_seen++;
}

static int mask_round(const char *who)
{
	sigset_t one, cur, pend;

	sigemptyset(&one);
	sigaddset(&one, SIGUSR1);
	usr1_seen = 0;
	if (pthread_sigmask(SIG_BLOCK, &one, NULL))
		return fail("%s: pthread_sigmask", who);
	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	if (!sigismember(&cur, SIGUSR1))
		return fail("%s: SIGUSR1 not in the mask read back after blocking it", who);
	pthread_kill(pthread_self(), SIGUSR1);
	if (usr1_seen)
		return fail("%s: the handler ran while SIGUSR1 was blocked", who);
	sigpending(&pend);
	if (!sigismember(&pend, SIGUSR1))
		return fail("%s: SIGUSR1 not pending while blocked", who);
	pthread_sigmask(SIG_UNBLOCK, &one, NULL);
	if (usr1_seen != 1)
		return fail("%s: the handler ran %d times on unblocking, not once", who,
			    (int)usr1_seen);
	return 0;
}

static void *mask_thread(void *arg)
{
	(void)arg;
	return (void *)(intptr_t)mask_round("a new thread");
}

static int sigmask_case(void)
{
	struct sigaction sa;
	sigset_t sys, cur, orig;
	pthread_t th;
	void *ret;
	int r;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1_count;
	sigaction(SIGUSR1, &sa, NULL);
	if ((r = mask_round("the main thread")))
		return r;
	if (pthread_create(&th, NULL, mask_thread, NULL) || pthread_join(th, &ret))
		return fail("pthread_create");
	if (ret)
		return 1;
	sigemptyset(&sys);
	sigaddset(&sys, SIGSYS);
	pthread_sigmask(SIG_BLOCK, &sys, &orig);
	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	pthread_sigmask(SIG_SETMASK, &orig, NULL);
	if (!sigismember(&cur, SIGSYS))
		return fail("SIGSYS not in the mask read back after blocking it");
	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	if (sigismember(&cur, SIGSYS))
		return fail("SIGSYS still in the mask after restoring the one before");
	printf("ok %s\n", kase);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	kase = argc > 1 ? argv[1] : "";
	if (!strcmp(kase, "select-small"))
		return select_small();
	if (!strcmp(kase, "select-big"))
		return select_big();
	if (!strcmp(kase, "dup2-hidden"))
		return dup2_hidden();
	if (!strcmp(kase, "close-range"))
		return close_range_case(false);
	if (!strcmp(kase, "closefrom"))
		return close_range_case(true);
	if (!strcmp(kase, "alarm-read"))
		return alarm_read();
	if (!strcmp(kase, "cancel-sleep"))
		return cancel_sleep();
	if (!strcmp(kase, "tfd-fast"))
		return tfd_fast();
	if (!strcmp(kase, "cancel-close"))
		return cancel_close();
	if (!strcmp(kase, "tfd-move"))
		return tfd_move();
	if (!strcmp(kase, "vfork-alarm"))
		return vfork_alarm();
	if (!strcmp(kase, "select-open-max"))
		return select_open_max();
	if (!strcmp(kase, "tfd-churn"))
		return tfd_churn();
	if (!strcmp(kase, "stress"))
		return stress();
	if (!strcmp(kase, "many-timers"))
		return many_timers();
	if (!strcmp(kase, "select-emfile"))
		return select_emfile();
	if (!strcmp(kase, "place-race"))
		return place_race();
	if (!strcmp(kase, "vfork-close"))
		return vfork_close();
	if (!strcmp(kase, "timers-across-changes"))
		return timers_across_changes();
	if (!strcmp(kase, "sigmask"))
		return sigmask_case();
	fprintf(stderr, "usage: preload-harm select-small|select-big|dup2-hidden|close-range|"
			"closefrom|alarm-read|cancel-sleep|tfd-fast|cancel-close|tfd-move|vfork-alarm|"
			"select-open-max|tfd-churn|stress|many-timers|select-emfile|place-race|"
			"vfork-close|timers-across-changes|sigmask\n");
	return 2;
}
