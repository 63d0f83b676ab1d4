/* SPDX-License-Identifier: MIT */
/*
 * shmclock-run's supervisor: simulated time for programs that cannot load
 * the shim (statically linked C, Go built with CGO_ENABLED=0), issue 33.
 *
 * The program runs under ptrace, with a seccomp filter (filter.h) that
 * sends only the time system calls to the supervisor: the waits to the
 * tracer (SECCOMP_RET_TRACE), the reads to a listener a thread answers
 * without stopping the program (SECCOMP_RET_USER_NOTIF, several times
 * cheaper than a ptrace stop: shmclock-bench bypass); the rest of its
 * calls run at full speed. At each exec of a
 * static program the tracer hides the vDSO from it (its AT_SYSINFO_EHDR
 * auxiliary vector entry becomes AT_IGNORE, before any of its code runs),
 * so that libc and Go's runtime, finding none, read the clock with the
 * system call, which the tracer answers:
 *
 *   clock_gettime, gettimeofday, time     written into the program, the
 *                                         call skipped
 *   alarm, setitimer, getitimer           ITIMER_REAL kept by the
 *     (ITIMER_REAL)                       supervisor, SIGALRM sent when due
 *   timer_create, _settime, _gettime,     POSIX timers kept by the
 *     _getoverrun, _delete                supervisor, their signals sent
 *                                         when due (SI_TIMER)
 *   timerfd_create, _settime, _gettime    an eventfd installed in the
 *                                         program, expiries added to it
 *   clock_getres                          1 ns
 *   nanosleep, clock_nanosleep, futex     re-planned: the call runs with a
 *     waits with a timeout, poll, ppoll,  real timeout of at most 20 ms,
 *     epoll_wait, epoll_pwait(2),         and is made again, with the
 *     rt_sigtimedwait                     program's own arguments, until
 *                                         the simulated deadline is
 *                                         reached or something else ends it
 *
 * Relative waits end on the jump-free timeline, absolute CLOCK_REALTIME
 * ones on the world's, as in the shim (preload.h). The real timeout of a
 * slice goes in 16 bytes below the thread's red zone (rsp - 144 and
 * lower): the kernel reads it on entry, before anything could be put
 * there. select and pselect6 start each slice from the program's sets,
 * saved at the first.
 *
 * The tracer follows fork, vfork, clone and exec of the whole tree. A
 * dynamic program in it loads the shim (LD_PRELOAD stays set, with
 * SHMCLOCK_TRAP=1): its own trap sees its calls first (SECCOMP_RET_TRAP
 * wins over RET_TRACE), and the tracer lets through what it sends. One
 * whose environment lost LD_PRELOAD is supervised as a static one is. When the tracer dies its tracees die with it
 * (PTRACE_O_EXITKILL). x86-64 only.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <shmclock/shmclock.h>

#include "clocks.h"
#include "escapes.h"
#include "preload/filter.h"
#include "relay.h"
#include "supervise/sv.h"
#include "supervise.h"


struct esc_page *supervise_report;
int (*supervise_report_done)(int code);

#if defined(__x86_64__)

/* What the tracer tells shmclock-run's part, in order: { kind, value }. */
enum sv_report {
	SV_RUNNING,   /* value: the program's pid */
	SV_EXITED,    /* value: its wait status */
	SV_NOT_RUN,   /* value: the exit code (the reason said on stderr) */
};

shmclock_t *sv_clk;
unsigned sv_mask;
bool sv_quiet;

static void report_to(int fd, enum sv_report kind, int v)
{
	int m[2] = { kind, v };

	if (fd >= 0)
		(void)!write(fd, m, sizeof(m));
}

/*
 * The tracer process: starts the program and follows its tree until the
 * last of it has exited. Reports to shmclock-run on @report (enum
 * sv_report): SV_RUNNING with the program's pid once it runs, SV_EXITED
 * with its wait status when it exits, or SV_NOT_RUN with an exit code when
 * it could not be run (having said why).
 */
static int tracer(char **argv, const char *name, unsigned clocks, bool q, int report)
{
	int rep[2], lsock[2], st;
	pid_t child, pid;
	long opts = PTRACE_O_TRACESECCOMP | PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK |
		    PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL |
		    PTRACE_O_TRACESYSGOOD;
	size_t live = 1;
	int r;

	const char *v = getenv("SHMCLOCK_VDSO");
	/* SHMCLOCK_VDSO=0: the vDSO as it is (as in the shim; the tests
	 * check that hiding it is what makes a static program's reads
	 * follow). */
	bool hide = !v || strcmp(v, "0");

	/* Until it ignores them (relay_tracer_init(), once the program is
	 * forked: it must not inherit that), a group's signals wait. */
	sigset_t all, orig;

	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &orig);
	sv_mask = clocks;
	sv_quiet = q;
	r = shmclock_open(name, &sv_clk);
	if (r) {
		fprintf(stderr, PROG ": clock '%s': %s\n", name, shmclock_strerror(r));
		report_to(report, SV_NOT_RUN, 1);
		return 1;
	}
	if (pipe2(rep, O_CLOEXEC) || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, lsock)) {
		fprintf(stderr, PROG ": pipe: %s\n", strerror(errno));
		report_to(report, SV_NOT_RUN, 1);
		return 1;
	}
	child = fork();
	if (child < 0) {
		fprintf(stderr, PROG ": fork: %s\n", strerror(errno));
		report_to(report, SV_NOT_RUN, 1);
		return 1;
	}
	if (child == 0) {
		/* Says what went wrong on the pipe (an int: the step, then
		 * errno); an exec that works closes it. */
		int msg[2] = { 0, 0 };

		sigprocmask(SIG_SETMASK, &orig, NULL);
		close(rep[0]);
		close(lsock[0]);
		if (report >= 0)
			close(report);
		if (ptrace(PTRACE_TRACEME, 0, NULL, NULL)) {
			msg[0] = 1;
			msg[1] = errno;
		} else if (raise(SIGSTOP)) {
			msg[0] = 2;
			msg[1] = errno;
		} else if ((r = sv_install_filter(lsock[1]))) {
			msg[0] = 3;
			msg[1] = -r;
		} else {
			/* The escape report: the counter faults from the exec on. */
			if (supervise_report)
				(void)prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0);
			execvp(argv[0], argv);
			msg[0] = 4;
			msg[1] = errno;
		}
		(void)!write(rep[1], msg, sizeof(msg));
		_exit(127);
	}
	/* A group's signals (^C, a service manager's SIGTERM, a hangup, a
	 * harness's killpg) reach the program itself: the tracer stays to see
	 * them through rather than die and take the tree with it (EXITKILL).
	 * relay.h says why each comes once. */
	relay_tracer_init(getppid());
	sigprocmask(SIG_SETMASK, &orig, NULL);
	close(rep[1]);
	close(lsock[1]);
	if (waitpid(child, &st, __WALL) != child || !WIFSTOPPED(st)) {
		int msg[2] = { 0, 0 };

		if (read(rep[0], msg, sizeof(msg)) == (ssize_t)sizeof(msg) && msg[0] == 1)
			fprintf(stderr,
				PROG ": %s is statically linked and must run under ptrace, which "
				     "this system denies (%s: YAMA ptrace_scope, a container or a "
				     "seccomp policy); not run\n",
				argv[0], strerror(msg[1]));
		else
			fprintf(stderr, PROG ": %s: the supervised process did not start\n",
				argv[0]);
		report_to(report, SV_NOT_RUN, 126);
		return 126;
	}
	if (ptrace(PTRACE_SETOPTIONS, child, NULL, (void *)opts)) {
		fprintf(stderr, PROG ": %s: ptrace options: %s; not run\n", argv[0], strerror(errno));
		kill(child, SIGKILL);
		waitpid(child, NULL, __WALL);
		report_to(report, SV_NOT_RUN, 126);
		return 126;
	}
	sv_find(child, true)->known = true;
	ptrace(PTRACE_CONT, child, NULL, NULL);
	report_to(report, SV_RUNNING, child);
	/* Nothing more to say: the terminal and the pipes of shmclock-run's
	 * caller are not held open by the tracer (it may outlive the
	 * program, for an orphan of its tree). */
	{
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);

		if (null >= 0) {
			dup2(null, 0);
			dup2(null, 1);
			dup2(null, 2);
			if (null > 2)
				close(null);
		}
	}
	/* The filter is in place (or the child failed: no message). */
	sv_listener = sv_receive_listener(lsock[0]);
	close(lsock[0]);
	if (sv_listener >= 0) {
		pthread_t th;
		pthread_attr_t a;

		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&sv_it_cond, &ca);
		if (pthread_create(&th, &a, sv_answer_reads, NULL) ||
		    pthread_create(&th, &a, sv_fire_itimers, NULL)) {
			fprintf(stderr, PROG ": %s: cannot start the thread that answers reads; not "
					"run\n",
				argv[0]);
			kill(child, SIGKILL);
			report_to(report, SV_NOT_RUN, 126);
		return 126;
		}
		pthread_attr_destroy(&a);
	}
	while (live > 0) {
		pid = waitpid(-1, &st, __WALL);
		if (pid < 0 && errno == EINTR)
			continue;
		if (pid < 0)
			break;
		struct thr *t = sv_find(pid, true);
		int sig, ev;

		if (!t)
			continue;
		if (WIFEXITED(st) || WIFSIGNALED(st)) {
			sv_itimer_exit(pid); /* a group leader: its process is gone */
			sv_pt_forget(pid);
			if (pid == child) {
				/* shmclock-run returns now; the tracer stays
				 * while anything of the tree lives on, so it
				 * no longer dies with shmclock-run (before the
				 * report: shmclock-run may end at once). */
				prctl(PR_SET_PDEATHSIG, 0);
				report_to(report, SV_EXITED, st);
				close(report);
				report = -1;
			}
			t->used = false;
			live--;
			continue;
		}
		if (!WIFSTOPPED(st))
			continue;
		if (!t->known) {
			/* A new tracee: its first stop. */
			t->known = true;
			live++;
			if (WSTOPSIG(st) == SIGSTOP) {
				ptrace(PTRACE_CONT, pid, NULL, NULL);
				continue;
			}
		}
		sig = WSTOPSIG(st);
		ev = st >> 16;
		if (sig == (SIGTRAP | 0x80)) {
			if (t->in_slice)
				sv_on_slice_exit(pid, t);
			else
				ptrace(PTRACE_CONT, pid, NULL, NULL);
		} else if (sig == SIGTRAP && ev == PTRACE_EVENT_SECCOMP) {
			sv_on_call(pid, t);
		} else if (sig == SIGTRAP && ev == PTRACE_EVENT_EXEC) {
			/* After exec the thread group is one thread, with the
			 * group leader's id; the others are gone, and the thread
			 * that called exec (if not the leader) is never reported
			 * again under its own id. */
			unsigned long former;

			if (!ptrace(PTRACE_GETEVENTMSG, pid, NULL, &former) && (pid_t)former != pid) {
				struct thr *f = sv_find((pid_t)former, false);

				if (f) {
					f->used = false;
					live--;
				}
			}
			t->waiting = t->in_slice = false;
			sv_proc_forget(pid);
			sv_pt_forget(pid); /* POSIX timers end at exec */
			sv_esc_forget(pid);
			if (sv_proc_static(pid) && hide)
				sv_hide_vdso(pid);
			ptrace(PTRACE_CONT, pid, NULL, NULL);
		} else if (sig == SIGTRAP && ev) {
			/* fork, vfork, clone: the new one is traced already,
			 * and stops on its own. */
			unsigned long msg;

			if (!ptrace(PTRACE_GETEVENTMSG, pid, NULL, &msg)) {
				struct thr *c = sv_find((pid_t)msg, false);

				if (!c) {
					c = sv_find((pid_t)msg, true);
					if (c) {
						c->known = false;
					}
				}
			}
			ptrace(PTRACE_CONT, pid, NULL, NULL);
		} else if (sig == SIGSEGV && sv_esc_emulate(pid)) {
			/* A trapped rdtsc, emulated: no signal is delivered. */
			ptrace(PTRACE_CONT, pid, NULL, NULL);
		} else {
			siginfo_t si;

			/* A signal for the program: delivered. A group stop
			 * (no siginfo) is let go: job control is not kept
			 * under the supervisor. */
			if ((sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU) &&
			    ptrace(PTRACE_GETSIGINFO, pid, NULL, &si))
				sig = 0;
			/* A group's signal and shmclock-run's relay of it: one
			 * delivery (relay.h). */
			if (relay_relays(sig) && sv_tgid_of(pid) == child)
				sig = relay_deliver(pid, sig);
			if (sig && t->waiting && !t->in_slice)
				sv_between_slices(pid, t);
			ptrace(PTRACE_CONT, pid, NULL, (void *)(long)sig);
		}
	}
	shmclock_close(sv_clk);
	return 0;
}

/*
 * shmclock-run's part: the tracer runs in a process of its own, so that
 * shmclock-run returns with the program's status when the program exits,
 * as without a supervisor, while the tracer stays as long as something it
 * traces lives (an orphan the program left still needs it: its time calls
 * go nowhere without it) and ends with the last.
 */
int supervise(char **argv, const char *name, unsigned clocks, bool q)
{
	int rep[2], m[2] = { 0, 0 }, got = 0;
	pid_t tr;

	if (pipe2(rep, O_CLOEXEC)) {
		fprintf(stderr, PROG ": pipe: %s\n", strerror(errno));
		return 1;
	}
	pid_t self = getpid();

	tr = fork();
	if (tr < 0) {
		fprintf(stderr, PROG ": fork: %s\n", strerror(errno));
		return 1;
	}
	if (tr == 0) {
		/* The tracer dies with the pid the user started (a harness's
		 * kill -9 of it): and with the tracer, the tree (EXITKILL).
		 * Until the program exits: then it stays for the program's
		 * orphans (tracer()). */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != self)
			_exit(126);
		close(rep[0]);
		_exit(tracer(argv, name, clocks, q, rep[1]));
	}
	close(rep[1]);
	/* Until the program is known, the signals relay.h relays are held
	 * (blocked), not lost: a harness's SIGINT right after the start
	 * reaches the program. */
	sigset_t held, old;

	sigemptyset(&held);
	for (int sig = 1; sig < NSIG; sig++)
		if (relay_relays(sig))
			sigaddset(&held, sig);
	sigprocmask(SIG_BLOCK, &held, &old);
	for (;;) {
		ssize_t n = read(rep[0], m, sizeof(m));

		if (n < 0 && errno == EINTR)
			continue;
		if (n != (ssize_t)sizeof(m))
			break;
		if (m[0] == SV_RUNNING) {
			relay_start(m[1]);
			sigprocmask(SIG_SETMASK, &old, NULL);
			continue;
		}
		got = 1;
		break;
	}
	close(rep[0]);
	if (!got) {
		fprintf(stderr, PROG ": %s: the supervisor ended before the program\n", argv[0]);
		return 126;
	}
	if (m[0] == SV_NOT_RUN) {
		waitpid(tr, NULL, 0);
		return m[1];
	}
	/* The tracer goes on alone while the tree lives (then exits,
	 * reparented). */
	if (supervise_report_done) {
		int code = WIFSIGNALED(m[1]) ? 128 + WTERMSIG(m[1]) : WEXITSTATUS(m[1]);
		int now = supervise_report_done(code);

		if (now != code)
			return now;
	}
	if (WIFSIGNALED(m[1])) {
		/* Die of the same signal, as a shell expects of the command
		 * (without a core of our own). */
		struct rlimit no = { 0, 0 };

		setrlimit(RLIMIT_CORE, &no);
		signal(WTERMSIG(m[1]), SIG_DFL);
		kill(getpid(), WTERMSIG(m[1]));
		return 128 + WTERMSIG(m[1]);
	}
	return WEXITSTATUS(m[1]);
}

#else

int supervise(char **argv, const char *name, unsigned clocks, bool q)
{
	(void)name;
	(void)clocks;
	(void)q;
	fprintf(stderr, PROG ": %s is statically linked: supervising it is for x86-64 only; not "
			"run\n",
		argv[0]);
	return 126;
}

#endif

