/* SPDX-License-Identifier: MIT */
/*
 * A program that knows nothing of shmclock, run under the preload shim by
 * test_preload.c. It uses only libc's time functions.
 *
 *   preload-probe threads N MS   N threads (up to 256) read CLOCK_MONOTONIC
 *       and CLOCK_REALTIME for MS of simulated time; a forked child reads
 *       too. Prints "reads R backward B first F last L child C bad X", X
 *       the readings whose tv_nsec was outside [0, 1e9).
 *   preload-probe eintr          a signal handler ends a 100 s nanosleep:
 *       prints "rc -1 errno EINTR rem S" (rem in whole seconds).
 *   preload-probe signals N      N times: a thread sends SIGUSR1 to the
 *       main thread while it sleeps an hour with nanosleep, at a random
 *       moment 0.2 to 2 ms after it went to sleep (real time), and waits up
 *       to 2 s of real time for the sleep to end with EINTR; prints
 *       "signals N handled H lost L full F before-call B" (L: sleeps that
 *       went on after their handler ran, not counting one whose signal
 *       came before the nanosleep call, B of those; it stops after 5).
 *   preload-probe sigaction      what sigaction, signal and sysv_signal show
 *       and do with the shim's trampoline in front of the handlers: prints
 *       "sigaction ok", or the first check that failed.
 *   preload-probe alarm          alarm(2) then pause(): prints "alarm".
 *   preload-probe forever        select() on a pipe with a timeout of
 *       {LONG_MAX, 0} while a thread writes to it 300 ms later: prints
 *       "ready" (or "timed out", what a wrapped timeout gave).
 *   preload-probe timer          a 100 ms periodic CLOCK_MONOTONIC timer,
 *       looked at once with timer_gettime after 450 ms: prints how many
 *       expiries arrived in 2 s ("expiries N").
 *   preload-probe sigthreads N   N threads (up to 256) sleep an hour with
 *       nanosleep; SIGUSR1 goes to each in turn (pthread_kill) once it
 *       waits in the kernel: its sleep, and no other, must end with EINTR
 *       (within 10 s of real time: else lost). Then a forked child's sleep
 *       (kill to the child) and a re-executed image: SIGUSR1 back at SIG_DFL
 *       there, SIGUSR2 still ignored, and its own handler's signal ending
 *       its sleep. Prints "sigthreads N interrupted I spurious S lost L
 *       child C exec E" (C, E: 1 when right).
 *   preload-probe tfdclose       creates and closes 8 armed timerfds, waits
 *       1.5 s of real time (a raw system call: the clock may be paused), and
 *       prints how many descriptors more than before are open ("extra N":
 *       the shim's own for those timerfds must be gone).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

static _Atomic uint64_t bad;

static int64_t now(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	/* Every timespec as filled, not only its total. */
	if (ts.tv_nsec < 0 || ts.tv_nsec >= 1000000000)
		atomic_fetch_add_explicit(&bad, 1, memory_order_relaxed);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t span_ns;
static _Atomic uint64_t reads, backward;

static void *reader(void *arg)
{
	int64_t start = now(CLOCK_MONOTONIC), last = start, lastrt = now(CLOCK_REALTIME);
	uint64_t n = 0, back = 0;

	(void)arg;
	while (last - start < span_ns) {
		int64_t m = now(CLOCK_MONOTONIC), r = now(CLOCK_REALTIME);

		/* Pause, resume and scale changes are continuous: neither clock
		 * may step back. */
		back += (m < last) + (r < lastrt);
		last = m;
		lastrt = r;
		n++;
	}
	atomic_fetch_add(&reads, n);
	atomic_fetch_add(&backward, back);
	return NULL;
}

static int cmd_threads(int n, long ms)
{
	pthread_t th[256];
	int64_t first = now(CLOCK_MONOTONIC), child = -1;
	pid_t pid;
	int st;

	span_ns = ms * 1000000LL;
	if (n < 1 || n > 256)
		return 2;
	for (int i = 0; i < n; i++)
		pthread_create(&th[i], NULL, reader, NULL);
	/* fork while the readers run: the child's clock still works. */
	pid = fork();
	if (pid == 0) {
		int64_t a = now(CLOCK_MONOTONIC);

		_exit(a >= first ? 0 : 1);
	}
	if (pid > 0 && waitpid(pid, &st, 0) == pid)
		child = WIFEXITED(st) ? WEXITSTATUS(st) : 99;
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	printf("reads %llu backward %llu first %lld last %lld child %lld bad %llu\n",
	       (unsigned long long)reads, (unsigned long long)backward, (long long)first,
	       (long long)now(CLOCK_MONOTONIC), (long long)child, (unsigned long long)bad);
	return 0;
}

static void on_usr1(int s)
{
	(void)s;
}

static void *poke(void *arg)
{
	/* Real time, so that it fires whatever the clock does: the shim
	 * never simulates CLOCK_TAI. */
	struct timespec ts = { 0, 100000000 };

	clock_nanosleep(CLOCK_TAI, 0, &ts, NULL);
	pthread_kill(*(pthread_t *)arg, SIGUSR1);
	return NULL;
}

static int cmd_eintr(void)
{
	struct sigaction sa;
	struct timespec req = { 100, 0 }, rem = { 0, 0 };
	pthread_t self = pthread_self(), th;
	int r, e;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sa.sa_flags = SA_RESTART; /* nanosleep ends with EINTR all the same */
	sigaction(SIGUSR1, &sa, NULL);
	pthread_create(&th, NULL, poke, &self);
	r = nanosleep(&req, &rem);
	e = errno;
	pthread_join(th, NULL);
	printf("rc %d errno %s rem %ld\n", r, e == EINTR ? "EINTR" : strerror(e), (long)rem.tv_sec);
	return 0;
}

/* signals: the sleeper's state, shared with the sender. */
static _Atomic unsigned long sleeps_begun, sleeps_ended, handlers_run;
static _Atomic bool signals_done;
static pthread_t sleeper_thread;
static long signals_wanted;

/* Signals handled while the sleeper was still in this program's own code,
 * before its nanosleep call (the PLT stub included): a real nanosleep
 * would not see those either, so a sleep that goes on after one is not
 * counted as lost (a sleeper preempted there on a busy machine). */
static _Atomic unsigned long before_call;
extern const char __executable_start[], etext[];

static void count_usr1(int s, siginfo_t *si, void *uc)
{
	(void)s;
	(void)si;
	atomic_fetch_add(&handlers_run, 1);
#if defined(__x86_64__)
	{
		uintptr_t ip = (uintptr_t)((ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP];

		if (ip >= (uintptr_t)__executable_start && ip < (uintptr_t)etext)
			atomic_fetch_add(&before_call, 1);
	}
#else
	(void)uc;
#endif
}

static int64_t real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_TAI, &ts); /* never simulated */
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void real_sleep_ns(int64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000), (long)(ns % 1000000000) };

	while (clock_nanosleep(CLOCK_TAI, 0, &ts, &ts) == EINTR)
		;
}

static void *send_signals(void *arg)
{
	pthread_t sleeper = sleeper_thread;
	unsigned long n = 0, lost = 0, early;
	unsigned seed = 12345;

	(void)arg;
	for (long i = 0; i < signals_wanted && lost < 5; i++) {
		int64_t t0;

		/* Into its next sleep, then a moment more: the signal lands
		 * in the sleep, anywhere (between two of its waits too). */
		while (atomic_load(&sleeps_begun) == n)
			real_sleep_ns(20000);
		n = atomic_load(&sleeps_begun);
		real_sleep_ns(200000 + rand_r(&seed) % 1800000);
		early = atomic_load(&before_call);
		pthread_kill(sleeper, SIGUSR1);
		t0 = real_ns();
		while (atomic_load(&sleeps_ended) < n && real_ns() - t0 < 2000000000)
			real_sleep_ns(50000);
		if (atomic_load(&sleeps_ended) < n) {
			if (atomic_load(&before_call) == early)
				lost++;
			/* Another to end that sleep; counted too. */
			while (atomic_load(&sleeps_ended) < n) {
				pthread_kill(sleeper, SIGUSR1);
				real_sleep_ns(10000000);
			}
		}
	}
	atomic_store(&signals_done, true);
	while (atomic_load(&sleeps_ended) < atomic_load(&sleeps_begun)) {
		pthread_kill(sleeper, SIGUSR1);
		real_sleep_ns(10000000);
	}
	return (void *)(uintptr_t)lost;
}

static int cmd_signals(long n)
{
	struct sigaction sa;
	struct timespec hour = { 3600, 0 };
	pthread_t th;
	void *lost;
	unsigned long full = 0;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = count_usr1;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGUSR1, &sa, NULL);
	sleeper_thread = pthread_self();
	signals_wanted = n;
	pthread_create(&th, NULL, send_signals, NULL);
	while (!atomic_load(&signals_done)) {
		int r;

		atomic_fetch_add(&sleeps_begun, 1);
		r = nanosleep(&hour, NULL);
		atomic_fetch_add(&sleeps_ended, 1);
		if (r == 0)
			full++;
		else if (errno != EINTR)
			return 1;
	}
	pthread_join(th, &lost);
	printf("signals %ld handled %lu lost %lu full %lu before-call %lu\n", n,
	       (unsigned long)handlers_run, (unsigned long)(uintptr_t)lost, full,
	       (unsigned long)before_call);
	return 0;
}

/* sigthreads: each sleeper's count of sleeps begun and ended, and the
 * handlers run on it. */
#define SIGTHREADS_MAX 256
static struct sleeper_slot {
	_Atomic unsigned long begun, ended, eintr;
	_Atomic pid_t tid;
} slots[SIGTHREADS_MAX];
static _Atomic bool sigthreads_stop;
static _Thread_local unsigned long usr1_here;

static void usr1_count_here(int s)
{
	(void)s;
	usr1_here++;
	atomic_fetch_add(&handlers_run, 1);
}

static void *hour_sleeper(void *arg)
{
	struct sleeper_slot *sl = arg;
	struct timespec hour = { 3600, 0 };

	atomic_store(&sl->tid, (pid_t)syscall(SYS_gettid));
	while (!atomic_load(&sigthreads_stop)) {
		unsigned long before = usr1_here;
		int r;

		atomic_fetch_add(&sl->begun, 1);
		r = nanosleep(&hour, NULL);
		/* An EINTR without a handler run on this thread is not one. */
		if (r < 0 && errno == EINTR && usr1_here != before)
			atomic_fetch_add(&sl->eintr, 1);
		atomic_fetch_add(&sl->ended, 1);
	}
	return NULL;
}

/* Whether thread @tid of process @pid is blocked in a system call (its
 * sleep's wait, not on its way to it). */
static bool in_wait(pid_t pid, pid_t tid)
{
	char path[64], buf[64] = "";
	FILE *f;
	long nr = -1;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
	f = fopen(path, "r");
	if (!f)
		return false;
	if (fgets(buf, sizeof(buf), f))
		nr = strtol(buf, NULL, 10);
	fclose(f);
	return nr == SYS_futex || nr == SYS_nanosleep || nr == SYS_clock_nanosleep;
}

/* Waits in real time until @cond(@arg) or @ns passed; whether it came. */
static bool wait_real(bool (*cond)(void *), void *arg, int64_t ns)
{
	int64_t t0 = real_ns();

	for (;;) {
		if (cond(arg)) /* once: it may reap a child */
			return true;
		if (real_ns() - t0 >= ns)
			return false;
		real_sleep_ns(100000);
	}
}

static bool slot_waits(void *arg)
{
	struct sleeper_slot *sl = arg;
	pid_t tid = atomic_load(&sl->tid);

	return tid && atomic_load(&sl->begun) > atomic_load(&sl->ended) && in_wait(getpid(), tid);
}

struct slot_end {
	struct sleeper_slot *sl;
	unsigned long was;
};

static bool slot_ended(void *arg)
{
	struct slot_end *e = arg;

	return atomic_load(&e->sl->ended) > e->was;
}

static bool child_waits(void *arg)
{
	pid_t c = *(pid_t *)arg;

	return in_wait(c, c);
}

struct child_exit {
	pid_t c;
	int st;
};

static bool child_exited(void *arg)
{
	struct child_exit *e = arg;

	return waitpid(e->c, &e->st, WNOHANG) == e->c;
}

/* The re-executed image: SIGUSR1 at SIG_DFL (exec resets a caught
 * signal), SIGUSR2 still ignored (exec keeps that), and a handler of its
 * own ends its sleep. Exit 0 when all three hold. */
static int cmd_sigexec(void)
{
	struct sigaction old;
	struct timespec hour = { 3600, 0 };

	if (sigaction(SIGUSR1, NULL, &old) || old.sa_handler != SIG_DFL)
		return 3;
	if (sigaction(SIGUSR2, NULL, &old) || old.sa_handler != SIG_IGN)
		return 4;
	signal(SIGUSR1, usr1_count_here);
	/* The parent signals once this process waits. */
	return nanosleep(&hour, NULL) < 0 && errno == EINTR && usr1_here == 1 ? 0 : 5;
}

/* Forks; the child runs @fn (or, with @exec, re-executes this program
 * as "sigexec"). SIGUSR1 goes to the child once its only thread waits;
 * whether it exited 0 within 10 s of real time. */
static bool child_ends_on_signal(int (*fn)(void), bool exec)
{
	pid_t c = fork();
	struct child_exit e = { c, -1 };

	if (c == 0) {
		if (exec) {
			execl("/proc/self/exe", "preload-probe", "sigexec", (char *)NULL);
			_exit(6);
		}
		_exit(fn());
	}
	if (c < 0)
		return false;
	if (!wait_real(child_waits, &c, INT64_C(10000000000)))
		fprintf(stderr, "sigthreads: child %d never waited\n", (int)c);
	kill(c, SIGUSR1);
	if (!wait_real(child_exited, &e, INT64_C(10000000000))) {
		kill(c, SIGKILL);
		waitpid(c, &e.st, 0);
		return false;
	}
	return WIFEXITED(e.st) && WEXITSTATUS(e.st) == 0;
}

static int child_sleep(void)
{
	struct timespec hour = { 3600, 0 };
	unsigned long before = usr1_here;

	return nanosleep(&hour, NULL) < 0 && errno == EINTR && usr1_here == before + 1 ? 0 : 1;
}

static int cmd_sigthreads(int n)
{
	pthread_t th[SIGTHREADS_MAX];
	unsigned long spurious = 0, lost = 0, interrupted = 0;
	bool child, exec;

	if (n < 1 || n > SIGTHREADS_MAX)
		return 2;
	signal(SIGUSR1, usr1_count_here);
	signal(SIGUSR2, SIG_IGN);
	for (int i = 0; i < n; i++)
		if (pthread_create(&th[i], NULL, hour_sleeper, &slots[i]))
			return 1;
	for (int i = 0; i < n; i++) {
		struct sleeper_slot *sl = &slots[i];
		unsigned long others[SIGTHREADS_MAX];
		struct slot_end e = { sl, 0 };

		/* In its sleep, blocked in the kernel (between two waits a
		 * signal is the other test's business). */
		if (!wait_real(slot_waits, sl, INT64_C(10000000000)))
			return 1;
		for (int j = 0; j < n; j++)
			others[j] = atomic_load(&slots[j].ended);
		e.was = others[i];
		pthread_kill(th[i], SIGUSR1);
		if (wait_real(slot_ended, &e, INT64_C(10000000000)))
			interrupted += atomic_load(&sl->eintr) == 1;
		else
			lost++;
		for (int j = 0; j < n; j++)
			if (j != i && atomic_load(&slots[j].ended) != others[j])
				spurious++;
	}
	child = child_ends_on_signal(child_sleep, false);
	exec = child_ends_on_signal(NULL, true);
	atomic_store(&sigthreads_stop, true);
	for (int i = 0; i < n; i++) {
		while (atomic_load(&slots[i].ended) < atomic_load(&slots[i].begun) ||
		       !atomic_load(&slots[i].begun)) {
			pthread_kill(th[i], SIGUSR1);
			real_sleep_ns(1000000);
		}
		pthread_join(th[i], NULL);
	}
	printf("sigthreads %d interrupted %lu spurious %lu lost %lu child %d exec %d\n", n, interrupted,
	       spurious, lost, child, exec);
	return 0;
}

static volatile sig_atomic_t h1_ran, h2_ran, h2_signo;

static void h1(int s)
{
	(void)s;
	h1_ran++;
}

static void h2(int s, siginfo_t *si, void *uc)
{
	(void)uc;
	h2_ran++;
	h2_signo = si && si->si_signo == s ? s : -1;
}

#define CHECK(c)                                           \
	do {                                               \
		if (!(c)) {                                \
			printf("failed: %s (line %d)\n", #c, __LINE__); \
			return 0;                          \
		}                                          \
	} while (0)

static int cmd_sigaction(void)
{
	struct sigaction a, o;

	memset(&a, 0, sizeof(a));
	a.sa_handler = h1;
	a.sa_flags = SA_RESTART;
	CHECK(sigaction(SIGUSR1, &a, &o) == 0 && o.sa_handler == SIG_DFL);
	CHECK(sigaction(SIGUSR1, NULL, &o) == 0 && o.sa_handler == h1);
	CHECK((o.sa_flags & SA_RESTART) && !(o.sa_flags & SA_SIGINFO));
	raise(SIGUSR1);
	CHECK(h1_ran == 1);
	memset(&a, 0, sizeof(a));
	a.sa_sigaction = h2;
	a.sa_flags = SA_SIGINFO;
	CHECK(sigaction(SIGUSR1, &a, &o) == 0 && o.sa_handler == h1 && !(o.sa_flags & SA_SIGINFO));
	CHECK(sigaction(SIGUSR1, NULL, &o) == 0 && o.sa_sigaction == h2 &&
	      (o.sa_flags & SA_SIGINFO));
	raise(SIGUSR1);
	CHECK(h2_ran == 1 && h2_signo == SIGUSR1 && h1_ran == 1);
	/* Set back what was read: the same handler, not a loop. */
	CHECK(sigaction(SIGUSR1, &o, NULL) == 0);
	raise(SIGUSR1);
	CHECK(h2_ran == 2);
	CHECK(sigaction(SIGUSR1, NULL, &o) == 0 && signal(SIGUSR1, SIG_IGN) == o.sa_handler);
	raise(SIGUSR1);
	CHECK(h2_ran == 2);
	CHECK(signal(SIGUSR1, h1) == SIG_IGN);
	CHECK(sigaction(SIGUSR1, NULL, &o) == 0 && o.sa_handler == h1 && (o.sa_flags & SA_RESTART));
	CHECK(sigismember(&o.sa_mask, SIGUSR1) == 1);
	raise(SIGUSR1);
	CHECK(h1_ran == 2);
	CHECK(sysv_signal(SIGUSR2, h1) == SIG_DFL);
	raise(SIGUSR2);
	CHECK(h1_ran == 3);
	CHECK(sigaction(SIGUSR2, NULL, &o) == 0 && o.sa_handler == SIG_DFL); /* reset */
	CHECK(sigaction(SIGKILL, &a, NULL) == -1 && errno == EINVAL);
	CHECK(sigaction(0, &a, NULL) == -1 && errno == EINVAL);
	CHECK(sigaction(SIGRTMIN + 1, &a, NULL) == 0);
	raise(SIGRTMIN + 1);
	CHECK(h2_ran == 3 && h2_signo == SIGRTMIN + 1);
	puts("sigaction ok");
	return 0;
}

static volatile sig_atomic_t got_alarm;

static void on_alarm(int s)
{
	(void)s;
	got_alarm = 1;
}

static int cmd_alarm(void)
{
	signal(SIGALRM, on_alarm);
	alarm(2);
	while (!got_alarm)
		pause();
	printf("alarm\n");
	return 0;
}

static _Atomic int expiries;

/* Each signal carries the expiries it stands for: 1 + its overrun (a
 * signal still pending at the next expiry is not sent again). */
static void on_timer(int s, siginfo_t *si, void *uc)
{
	(void)s;
	(void)uc;
	atomic_fetch_add(&expiries, 1 + si->si_overrun);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, ms % 1000 * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int cmd_timer(void)
{
	struct sigevent sev = { .sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGRTMIN };
	struct itimerspec its = { { 0, 100000000 }, { 0, 100000000 } }, cur;
	struct sigaction sa;
	timer_t t;
	int64_t t0, t1;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_timer;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigaction(SIGRTMIN, &sa, NULL);
	t0 = now(CLOCK_MONOTONIC);
	if (timer_create(CLOCK_MONOTONIC, &sev, &t) || timer_settime(t, 0, &its, NULL))
		return 1;
	sleep_ms(450);
	timer_gettime(t, &cur);
	sleep_ms(1550);
	timer_delete(t);
	t1 = now(CLOCK_MONOTONIC);
	/* A signal of the last expiry may still be on its way: the count
	 * against the time gone is checked to within one. */
	printf("expiries %d in %lld ms\n", atomic_load(&expiries), (long long)((t1 - t0) / 1000000));
	return 0;
}

static int pipe_fds[2];

static void *write_later(void *arg)
{
	struct timespec ts = { 0, 300000000 };

	(void)arg;
	nanosleep(&ts, NULL);
	if (write(pipe_fds[1], "x", 1) != 1)
		perror("write");
	return NULL;
}

static int cmd_forever(void)
{
	struct timeval tv = { .tv_sec = (time_t)(~0ULL >> 1), .tv_usec = 0 }; /* LONG_MAX */
	pthread_t th;
	fd_set rd;
	int r;

	if (pipe(pipe_fds))
		return 1;
	pthread_create(&th, NULL, write_later, NULL);
	FD_ZERO(&rd);
	FD_SET(pipe_fds[0], &rd);
	r = select(pipe_fds[0] + 1, &rd, NULL, NULL, &tv);
	printf("%s\n", r == 1 && FD_ISSET(pipe_fds[0], &rd) ? "ready" : "timed out");
	pthread_join(th, NULL);
	return 0;
}

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

static int cmd_tfdclose(void)
{
	struct itimerspec its = { { 0, 0 }, { 3600, 0 } };
	struct timespec real = { 1, 500000000 };
	int before = open_fds();

	for (int i = 0; i < 8; i++) {
		int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);

		if (fd < 0 || timerfd_settime(fd, 0, &its, NULL))
			return 1;
		close(fd);
	}
	/* Real time, whatever the clock does: not through the shim. */
	syscall(SYS_nanosleep, &real, NULL);
	printf("extra %d\n", open_fds() - before);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc == 4 && !strcmp(argv[1], "threads"))
		return cmd_threads(atoi(argv[2]), atol(argv[3]));
	if (argc == 2 && !strcmp(argv[1], "eintr"))
		return cmd_eintr();
	if (argc == 2 && !strcmp(argv[1], "alarm"))
		return cmd_alarm();
	if (argc == 2 && !strcmp(argv[1], "sigaction"))
		return cmd_sigaction();
	if (argc == 3 && !strcmp(argv[1], "signals"))
		return cmd_signals(atol(argv[2]));
	if (argc == 2 && !strcmp(argv[1], "forever"))
		return cmd_forever();
	if (argc == 2 && !strcmp(argv[1], "timer"))
		return cmd_timer();
	if (argc == 2 && !strcmp(argv[1], "tfdclose"))
		return cmd_tfdclose();
	if (argc == 3 && !strcmp(argv[1], "sigthreads"))
		return cmd_sigthreads(atoi(argv[2]));
	if (argc == 2 && !strcmp(argv[1], "sigexec"))
		return cmd_sigexec();
	fprintf(stderr, "usage: preload-probe threads N MS | eintr | signals N | sigthreads N | sigaction | alarm | "
			"forever | timer | tfdclose\n");
	return 2;
}
