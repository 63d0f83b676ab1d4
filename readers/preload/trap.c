/* SPDX-License-Identifier: MIT */
/*
 * The system-call trap: simulated time for the calls a program makes
 * without libc (Go's runtime, syscall(2), inline assembly). A seccomp
 * filter makes the time-bearing system calls raise SIGSYS instead of
 * running (SECCOMP_RET_TRAP); the shim's handler answers them as the
 * interposed libc functions do, with the registers of the call:
 *
 *   clock_gettime, gettimeofday, time      the simulated clocks
 *   nanosleep, clock_nanosleep             sleeps in simulated time
 *   futex FUTEX_WAIT(_BITSET) with a       waits re-planned in slices
 *     timeout, poll, ppoll, select,          (core.c, shim_wait), as the
 *     pselect6, epoll_wait, epoll_pwait,     libc wrappers are
 *     epoll_pwait2, rt_sigtimedwait with
 *     a timeout
 *   timer_*, setitimer, getitimer, alarm,  timers.c's simulated timers
 *     timerfd_*
 *   rt_sigaction(SIGSYS), and (SIGSEGV)    kept for the program (below)
 *     under the escape report
 *   rt_sigprocmask                         SIGSYS (and SIGSEGV under the
 *                                          report) never really blocked
 *   execve, execveat                       the child keeps the shim; a
 *                                          static one is refused
 *
 * Only waits that carry a timeout trap (a poll with 0 or -1, a futex wait
 * without one go to the kernel at full speed), and never the shim's own:
 * its raw calls go through one small function at a fixed address, the
 * gadget, which the filter lets through by instruction pointer. The
 * address is the same in every process so that the filter, which every
 * child inherits across fork and exec and nobody can remove, still lets
 * the child's own shim through. The shim's calls into libc that trap (a
 * slice of a wait, made through libc's ppoll or pthread_cond_clockwait)
 * are marked by a thread-local flag: the handler makes them as they are.
 *
 * Signals: Go's runtime installs its handler for every signal with raw
 * rt_sigaction, SIGSYS included; the filter traps rt_sigaction on SIGSYS
 * and the handler keeps the program's action aside (what it set is what
 * it reads back), so the trap's handler stays. A SIGSYS that is not the
 * trap's (kill, another seccomp filter's trap) goes to the program's
 * action. The handler runs on the thread's alternate stack when it has one
 * (SA_ONSTACK: Go's signal stack), keeps errno, and is re-entrant.
 *
 * When: SHMCLOCK_TRAP=1 (shmclock-run --trap) always, 0 never, otherwise
 * (auto) for Go programs (their executable has a .go.buildinfo or
 * .note.go.buildid section) and in every process that inherited the
 * filter. A seccomp filter needs no_new_privs: under the trap a set-user-ID
 * program runs with the caller's rights. x86-64 only; elsewhere the shim
 * says so once and the calls keep real time.
 *
 * One file past 800 lines: the SIGSYS handler and each call it answers
 * share the handler's constraints (async-signal-safe, no libc), kept in
 * view together.
 */
#include "preload.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/filter.h>
#include <linux/futex.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <ucontext.h>
#include <unistd.h>

/* Set while the shim makes a call through libc that may trap: the handler
 * makes it as it is. Initial-exec: read in a signal handler. */
__thread int shim_passthru __attribute__((tls_model("initial-exec")));

_Atomic bool shim_trap_on;

/* Whether /proc/self/exe is a Go program: a .go.buildinfo or
 * .note.go.buildid section (every Go linker since 1.13 writes one). */
static bool exe_is_go(void)
{
	char shstr[4096], name[32];
	Elf64_Ehdr eh;
	Elf64_Shdr sh;
	bool go = false;
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_shentsize != sizeof(sh) || eh.e_shstrndx >= eh.e_shnum)
		goto out;
	if (pread(fd, &sh, sizeof(sh), (off_t)(eh.e_shoff + eh.e_shstrndx * sizeof(sh))) !=
	    (ssize_t)sizeof(sh))
		goto out;
	memset(shstr, 0, sizeof(shstr));
	if (pread(fd, shstr, sh.sh_size < sizeof(shstr) - 1 ? sh.sh_size : sizeof(shstr) - 1,
		  (off_t)sh.sh_offset) <= 0)
		goto out;
	for (unsigned i = 0; i < eh.e_shnum && !go; i++) {
		if (pread(fd, &sh, sizeof(sh), (off_t)(eh.e_shoff + i * sizeof(sh))) !=
		    (ssize_t)sizeof(sh))
			break;
		if (sh.sh_name >= sizeof(shstr) - 1)
			continue;
		snprintf(name, sizeof(name), "%s", shstr + sh.sh_name);
		go = !strcmp(name, ".go.buildinfo") || !strcmp(name, ".note.go.buildid");
	}
out:
	shim_real_close(fd);
	return go;
}

#if defined(__x86_64__)

#include <linux/audit.h>

#ifndef SYS_SECCOMP
#define SYS_SECCOMP 1
#endif
#ifndef SA_RESTORER
#define SA_RESTORER 0x04000000
#endif

#include "filter.h"

#define GADGET_ADDR SHIM_GADGET_ADDR
/* SECCOMP_RET_DATA of our traps (si_errno): tells them from another
 * filter's. */
#define TRAP_TAG 0x5c1
#define PROBE_ID SHIM_PROBE_ID
#define PROBE_ERRNO SHIM_PROBE_ERRNO

typedef long (*gadget_fn)(long nr, long a, long b, long c, long d, long e, long f);

/* The gadget: a system call with the C calling convention. Copied to
 * GADGET_ADDR (it is position-independent). */
__asm__(".pushsection .text\n"
	".type shim_gadget_code, @function\n"
	"shim_gadget_code:\n"
	"\tmovq %rdi, %rax\n"
	"\tmovq %rsi, %rdi\n"
	"\tmovq %rdx, %rsi\n"
	"\tmovq %rcx, %rdx\n"
	"\tmovq %r8, %r10\n"
	"\tmovq %r9, %r8\n"
	"\tmovq 8(%rsp), %r9\n"
	"\tsyscall\n"
	"\tret\n"
	/* The signal handler's return (rt_sigreturn), as libc's restorer:
	 * its system call must come from the gadget's page too. */
	"shim_restorer_code:\n"
	"\tmovq $15, %rax\n"
	"\tsyscall\n"
	/* The signal-aware sleep's futex wait (signals.c):
	 * (word, val, timeout, &handled, seen). From sigwait_check to
	 * sigwait_sys inclusive, a signal handler sends the thread to
	 * sigwait_eintr instead of into the wait (shim_sigwait_divert);
	 * before it, the handler's count is what the check sees. */
	"shim_sigwait_code:\n"
	"\tmovq %rdx, %r10\n"
	"\tmovq %rsi, %rdx\n"
	"shim_sigwait_check:\n"
	"\tmovq (%rcx), %rax\n"
	"\tcmpq %r8, %rax\n"
	"\tjne shim_sigwait_eintr\n"
	"\tmovl $9, %esi\n"   /* FUTEX_WAIT_BITSET, shared */
	"\txorl %r8d, %r8d\n"
	"\tmovl $-1, %r9d\n"  /* FUTEX_BITSET_MATCH_ANY */
	"\tmovl $202, %eax\n" /* SYS_futex */
	"shim_sigwait_sys:\n"
	"\tsyscall\n"
	"\tret\n"
	"shim_sigwait_eintr:\n"
	"\tmovq $-4, %rax\n"
	"\tret\n"
	"shim_gadget_end:\n"
	".popsection\n");
extern const char shim_gadget_code[], shim_restorer_code[], shim_gadget_end[];
extern const char shim_sigwait_code[], shim_sigwait_check[], shim_sigwait_sys[],
	shim_sigwait_eintr[];

static _Atomic bool gadget_mapped;

static inline long raw6(long nr, long a, long b, long c, long d, long e, long f)
{
	return ((gadget_fn)GADGET_ADDR)(nr, a, b, c, d, e, f);
}

/* A raw call: -errno on failure. Through the gadget once it is mapped,
 * else straight (nothing traps yet). */
long shim_raw(long nr, long a, long b, long c, long d, long e, long f)
{
	long r;

	if (atomic_load_explicit(&gadget_mapped, memory_order_acquire))
		return raw6(nr, a, b, c, d, e, f);
	__asm__ volatile("movq %5, %%r10\n\tmovq %6, %%r8\n\tmovq %7, %%r9\n\tsyscall"
			 : "=a"(r)
			 : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(d), "r"(e), "r"(f)
			 : "rcx", "r11", "r8", "r9", "r10", "memory");
	return r;
}

/*
 * syscall(2) for the shim's own objects and its copy of libshmclock (the
 * futex waits of sleeps and of the timer threads), linked with
 * --wrap=syscall: through the gadget, so they never trap.
 */
long __wrap_syscall(long nr, ...);
long __wrap_syscall(long nr, ...)
{
	va_list ap;
	long a[6], r;

	va_start(ap, nr);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	r = shim_raw(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	if (r < 0 && r > -4096) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

typedef long (*sigwait_fn)(const _Atomic uint32_t *word, uint32_t val, const struct timespec *ts,
			   const _Atomic unsigned long *handled, unsigned long seen);

/* The copy of the stub that runs: the gadget page's once it is mapped (its
 * system call must not trap), else the one in .text (no trap then). */
static uintptr_t sigwait_base(void)
{
	return atomic_load_explicit(&gadget_mapped, memory_order_acquire)
		       ? GADGET_ADDR
		       : (uintptr_t)shim_gadget_code;
}

long shim_sigwait(const _Atomic uint32_t *word, uint32_t val, const struct timespec *ts,
		  const _Atomic unsigned long *handled, unsigned long seen)
{
	sigwait_fn f;
	uintptr_t at = sigwait_base() + (uintptr_t)(shim_sigwait_code - shim_gadget_code);

	memcpy(&f, &at, sizeof(f));
	return f(word, val, ts, handled, seen);
}

bool shim_sigwait_divert(void *uc_)
{
	greg_t *ip = &((ucontext_t *)uc_)->uc_mcontext.gregs[REG_RIP];
	/* Both copies: the gadget may have been mapped while a thread was in
	 * the one in .text. */
	uintptr_t bases[2] = { GADGET_ADDR, (uintptr_t)shim_gadget_code };

	for (int i = 0; i < 2; i++) {
		uintptr_t b = bases[i], at = (uintptr_t)*ip;

		if (i == 0 && !atomic_load_explicit(&gadget_mapped, memory_order_acquire))
			continue;
		if (at >= b + (uintptr_t)(shim_sigwait_check - shim_gadget_code) &&
		    at <= b + (uintptr_t)(shim_sigwait_sys - shim_gadget_code)) {
			*ip = (greg_t)(b + (uintptr_t)(shim_sigwait_eintr - shim_gadget_code));
			return true;
		}
	}
	return false;
}

static bool map_gadget(void)
{
	size_t len = (size_t)(shim_gadget_end - shim_gadget_code);
	void *p;

	if (atomic_load_explicit(&gadget_mapped, memory_order_acquire))
		return true;
	p = mmap((void *)GADGET_ADDR, 4096, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (p == MAP_FAILED || p != (void *)GADGET_ADDR) {
		if (p != MAP_FAILED)
			munmap(p, 4096); /* a kernel before 4.17 took it as a hint */
		return false;
	}
	memcpy(p, shim_gadget_code, len);
	if (mprotect(p, 4096, PROT_READ | PROT_EXEC))
		return false;
	/* Release pairs with the acquire in shim_raw(): who sees the flag
	 * sees the code. */
	atomic_store_explicit(&gadget_mapped, true, memory_order_release);
	return true;
}

/* ------------------------------------------------------------ SIGSYS */

/* The kernel's struct sigaction (rt_sigaction's). */
struct ksigaction {
	void *handler;
	unsigned long flags;
	void *restorer;
	uint64_t mask;
};

/* The program's SIGSYS and SIGSEGV actions (escape.c takes SIGSEGV), as
 * it set them (or as they were before us). A lock guards them:
 * rt_sigaction may come from any thread. */
static struct ksigaction prog_acts[2];
#define PROG_ACT(sig) prog_acts[(sig) == SIGSEGV]
static _Atomic unsigned prog_seq;
static _Atomic int prog_lock;

static void act_lock(void)
{
	int z = 0;

	while (!atomic_compare_exchange_weak_explicit(&prog_lock, &z, 1, memory_order_acquire,
						      memory_order_relaxed))
		z = 0;
}

static void act_unlock(void)
{
	/* Pairs with the acquire of the next act_lock(). */
	atomic_store_explicit(&prog_lock, 0, memory_order_release);
}

static long emu_sigaction(int sig, const struct ksigaction *act, struct ksigaction *old,
			  size_t sz)
{
	struct ksigaction o;

	if (sz != 8)
		return -EINVAL;
	act_lock();
	o = PROG_ACT(sig);
	if (act)
		PROG_ACT(sig) = *act;
	atomic_fetch_add_explicit(&prog_seq, 1, memory_order_relaxed);
	act_unlock();
	if (old)
		*old = o;
	return 0;
}

/* A SIGSYS (or SIGSEGV) that is not ours: what the program asked for. */
void shim_trap_forward(int sig, siginfo_t *si, void *uc)
{
	struct ksigaction a;
	void (*hp)(int);

	act_lock();
	a = PROG_ACT(sig);
	act_unlock();
	memcpy(&hp, &a.handler, sizeof(hp));
	if (hp == SIG_IGN)
		return;
	if (hp == SIG_DFL) {
		struct ksigaction dfl = { NULL, 0, NULL, 0 }; /* SIG_DFL is 0 */

		/* Dies of it, as without us. */
		shim_raw(SYS_rt_sigaction, sig, (long)&dfl, 0, 8, 0, 0);
		shim_raw(SYS_tgkill, getpid(), shim_raw(SYS_gettid, 0, 0, 0, 0, 0, 0), sig, 0, 0,
			 0);
		return;
	}
	if (a.flags & SA_SIGINFO) {
		void (*h)(int, siginfo_t *, void *);

		memcpy(&h, &a.handler, sizeof(h));
		h(sig, si, uc);
	} else {
		void (*h)(int);

		memcpy(&h, &a.handler, sizeof(h));
		h(sig);
	}
}

static long neg_errno(long r)
{
	return r < 0 ? -errno : r;
}

/* A futex wait with a timeout, in simulated time. */
struct futex_ctx {
	long uaddr;
	int op;
	uint32_t val, bits;
};

static int futex_once(void *ctx, int64_t slice, bool *expired)
{
	struct futex_ctx *c = ctx;
	struct timespec abs;
	long r;

	ns_to_ts(shmclock__mono_ns() + slice, &abs);
	r = raw6(SYS_futex, c->uaddr, FUTEX_WAIT_BITSET | (c->op & FUTEX_PRIVATE_FLAG), c->val,
		 (long)&abs, 0, c->bits);
	*expired = r == -ETIMEDOUT;
	return (int)r;
}

static long emu_futex(const long *a, long nr)
{
	int cmd = (int)a[1] & FUTEX_CMD_MASK;
	const struct timespec *ts = (const struct timespec *)a[3];
	struct futex_ctx c = { a[0], (int)a[1], (uint32_t)a[2], FUTEX_BITSET_MATCH_ANY };
	clockid_t id = cmd == FUTEX_WAIT_BITSET && (a[1] & FUTEX_CLOCK_REALTIME) ? CLOCK_REALTIME
										: CLOCK_MONOTONIC;
	struct deadline d;

	if (cmd == FUTEX_WAIT_BITSET)
		c.bits = (uint32_t)a[5];
	if (!ts || bad_ts(ts) || !c.bits || !sim_on(id))
		return raw6(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	d = cmd == FUTEX_WAIT ? dl_after(ts_to_ns(ts)) : dl_at(id, ts);
	return shim_wait(&d, futex_once, &c);
}

static long emulate(long nr, const long *a)
{
	switch (nr) {
	case SYS_clock_gettime:
		return neg_errno(clock_gettime((clockid_t)a[0], (struct timespec *)a[1]));
	case SYS_gettimeofday:
		return neg_errno(gettimeofday((struct timeval *)a[0], (void *)a[1]));
	case SYS_time:
		return (long)time((time_t *)a[0]);
	case SYS_nanosleep:
		return neg_errno(nanosleep((const struct timespec *)a[0], (struct timespec *)a[1]));
	case SYS_clock_nanosleep:
		return -clock_nanosleep((clockid_t)a[0], (int)a[1], (const struct timespec *)a[2],
					(struct timespec *)a[3]);
	case SYS_futex:
		return emu_futex(a, nr);
	case SYS_poll:
		return neg_errno(poll((struct pollfd *)a[0], (nfds_t)a[1], (int)a[2]));
	case SYS_ppoll:
		return neg_errno(ppoll((struct pollfd *)a[0], (nfds_t)a[1],
				       (const struct timespec *)a[2], (const sigset_t *)a[3]));
	case SYS_select:
		return neg_errno(select((int)a[0], (fd_set *)a[1], (fd_set *)a[2], (fd_set *)a[3],
					(struct timeval *)a[4]));
	case SYS_pselect6: {
		/* The sixth argument: { const sigset_t *ss; size_t len }. */
		const long *sm = (const long *)a[5];

		return neg_errno(pselect((int)a[0], (fd_set *)a[1], (fd_set *)a[2], (fd_set *)a[3],
					 (const struct timespec *)a[4],
					 sm ? (const sigset_t *)sm[0] : NULL));
	}
	case SYS_epoll_wait:
		return neg_errno(epoll_wait((int)a[0], (struct epoll_event *)a[1], (int)a[2],
					    (int)a[3]));
	case SYS_epoll_pwait:
		return neg_errno(epoll_pwait((int)a[0], (struct epoll_event *)a[1], (int)a[2],
					     (int)a[3], (const sigset_t *)a[4]));
#ifdef SYS_epoll_pwait2
	case SYS_epoll_pwait2:
		return neg_errno(epoll_pwait2((int)a[0], (struct epoll_event *)a[1], (int)a[2],
					      (const struct timespec *)a[3], (const sigset_t *)a[4]));
#endif
	case SYS_rt_sigtimedwait:
		return neg_errno(sigtimedwait((const sigset_t *)a[0], (siginfo_t *)a[1],
					      (const struct timespec *)a[2]));
	/* Timers, by timers.c's functions. A kernel timer's id is an int;
	 * glibc's timer_t for one (not SIGEV_THREAD, which the kernel does
	 * not have) is that int. */
	case SYS_timer_create: {
		const struct sigevent *sev = (const struct sigevent *)a[1];
		timer_t t;
		int r;

		if (sev && sev->sigev_notify == SIGEV_THREAD)
			return -EINVAL;
		r = timer_create((clockid_t)a[0], (struct sigevent *)a[1], &t);
		if (r)
			return -errno;
		*(int *)a[2] = (int)(intptr_t)t;
		return 0;
	}
	case SYS_timer_settime:
		return neg_errno(timer_settime((timer_t)(intptr_t)(int)a[0], (int)a[1],
					       (const struct itimerspec *)a[2],
					       (struct itimerspec *)a[3]));
	case SYS_timer_gettime:
		return neg_errno(timer_gettime((timer_t)(intptr_t)(int)a[0],
					       (struct itimerspec *)a[1]));
	case SYS_timer_delete:
		return neg_errno(timer_delete((timer_t)(intptr_t)(int)a[0]));
	case SYS_setitimer:
		return neg_errno(setitimer((__itimer_which_t)a[0], (const struct itimerval *)a[1],
					   (struct itimerval *)a[2]));
	case SYS_getitimer:
		return neg_errno(getitimer((__itimer_which_t)a[0], (struct itimerval *)a[1]));
	case SYS_alarm:
		return (long)alarm((unsigned)a[0]);
	case SYS_timerfd_create:
		return neg_errno(timerfd_create((int)a[0], (int)a[1]));
	case SYS_timerfd_settime:
		return neg_errno(timerfd_settime((int)a[0], (int)a[1],
						 (const struct itimerspec *)a[2],
						 (struct itimerspec *)a[3]));
	case SYS_timerfd_gettime:
		return neg_errno(timerfd_gettime((int)a[0], (struct itimerspec *)a[1]));
	}
	return raw6(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

static _Atomic unsigned long ntraps;

/*
 * rt_sigprocmask: SIGSYS is never really blocked, with SIGSYS blocked a
 * trap would kill the thread (the kernel resets the action of a blocked
 * forced signal): Go blocks every signal on a thread it is setting up for
 * a callback from C, and may sleep meanwhile. Whether the program has it
 * blocked is kept per thread and shown in the old masks it reads, so that
 * the masks it sets are the masks it gets back (CPython's test_signal
 * compares them).
 */
static __thread uint64_t kept_blocked __attribute__((tls_model("initial-exec")));

static long emu_sigprocmask(const long *a, ucontext_t *uc)
{
	/* SIGSEGV too under the escape report: a trapped rdtsc raises it. */
	const uint64_t sys = (1ULL << (SIGSYS - 1)) |
			     (atomic_load_explicit(&shim_esc_on, memory_order_relaxed)
				      ? 1ULL << (SIGSEGV - 1)
				      : 0);
	const uint64_t never = (1ULL << (SIGKILL - 1)) | (1ULL << (SIGSTOP - 1));
	uint64_t was = kept_blocked & sys, now = was;
	uint64_t cur, set = 0, next;

	if (a[3] != 8)
		return -EINVAL;
	/* The mask of the code that made the call: the handler's return
	 * restores it, so a change made here must be made there. */
	memcpy(&cur, &uc->uc_sigmask, sizeof(cur));
	next = cur;
	if (a[1]) {
		memcpy(&set, (const void *)a[1], sizeof(set));
		switch (a[0]) {
		case SIG_BLOCK:
			next = cur | set;
			now = was | (set & sys);
			break;
		case SIG_UNBLOCK:
			next = cur & ~set;
			now = was & ~(set & sys);
			break;
		case SIG_SETMASK:
			next = set;
			now = set & sys;
			break;
		default:
			return -EINVAL;
		}
	}
	if (a[2]) {
		uint64_t old = (cur & ~sys) | was;

		memcpy((void *)a[2], &old, sizeof(old));
	}
	next &= ~(sys | never);
	memcpy(&uc->uc_sigmask, &next, sizeof(next));
	kept_blocked = now;
	return 0;
}

/* What a child needs to find the clock: copied from this process's
 * environment at set-up, added to an exec's environment that lacks them. */
static const char *const keep_vars[] = { "LD_PRELOAD", "SHMCLOCK_NAME", "SHMCLOCK_CLOCKS",
					 "SHMCLOCK_QUIET", "SHMCLOCK_TRAP", "SHMCLOCK_REPORT" };
#define NKEEP (sizeof(keep_vars) / sizeof(keep_vars[0]))
static char keep[NKEEP][512];
static char shim_path[PATH_MAX];

/* Whether the ELF file at @fd has no interpreter (a static executable);
 * for a script ("#!"), whether its interpreter has none. */
static bool fd_is_static(int fd, int depth)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	bool interp = false;

	if (shim_raw(SYS_pread64, fd, (long)&eh, sizeof(eh), 0, 0, 0) != (long)sizeof(eh))
		return false;
	if (!memcmp(eh.e_ident, "#!", 2) && depth == 0) {
		char line[256], *p, *e;
		long n = shim_raw(SYS_pread64, fd, (long)line, sizeof(line) - 1, 0, 0, 0);
		bool st;
		long ifd;

		if (n <= 2)
			return false;
		line[n] = 0;
		for (p = line + 2; *p == ' ' || *p == '\t'; p++)
			;
		for (e = p; *e && *e != ' ' && *e != '\t' && *e != '\n'; e++)
			;
		*e = 0;
		ifd = shim_raw(SYS_openat, AT_FDCWD, (long)p, O_RDONLY | O_CLOEXEC, 0, 0, 0);
		if (ifd < 0)
			return false;
		st = fd_is_static((int)ifd, 1);
		shim_raw(SYS_close, ifd, 0, 0, 0, 0, 0);
		return st;
	}
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(ph))
		return false;
	for (unsigned i = 0; i < eh.e_phnum && !interp; i++) {
		if (shim_raw(SYS_pread64, fd, (long)&ph, sizeof(ph),
			     (long)(eh.e_phoff + i * sizeof(ph)), 0, 0) != (long)sizeof(ph))
			return false;
		interp = ph.p_type == PT_INTERP;
	}
	return !interp;
}

/* Which of keep_vars @envp lacks (bit i), and whether its LD_PRELOAD
 * names the shim. */
static unsigned env_missing(char *const *envp, bool *preload_ok)
{
	unsigned miss = 0;

	*preload_ok = false;
	for (size_t k = 0; k < NKEEP; k++) {
		size_t n = strlen(keep_vars[k]);
		bool found = false;

		if (!keep[k][0])
			continue;
		for (char *const *e = envp; e && *e && !found; e++) {
			if (strncmp(*e, keep_vars[k], n) || (*e)[n] != '=')
				continue;
			found = true;
			if (k == 0)
				*preload_ok = strstr(*e + n + 1, shim_path) != NULL;
		}
		if (!found)
			miss |= 1u << k;
	}
	return miss;
}

/*
 * execve and execveat under the trap. The filter goes with the new program
 * and cannot be taken off, so the new program must be one whose shim
 * answers its traps: a static executable would be killed by its first
 * one, and is refused with EPERM and a line on stderr (run it with
 * shmclock-run, not from a program under the trap); an environment
 * without the shim or the clock's name gets them back (a program that
 * clears its child's environment, as Go's exec.Cmd{Env: ...} may).
 */
static long emu_exec(long nr, const long *a)
{
	const char *path = (const char *)(nr == SYS_execve ? a[0] : a[1]);
	char *const *envp = (char *const *)(nr == SYS_execve ? a[2] : a[3]);
	long dirfd = nr == SYS_execve ? AT_FDCWD : a[0];
	long fd, r;
	bool st, preload_ok;
	unsigned miss;
	char **nenv = NULL;
	size_t len = 0;

	if (nr == SYS_execveat && (a[4] & AT_EMPTY_PATH) && path && !*path)
		fd = shim_raw(SYS_fcntl, dirfd, F_DUPFD_CLOEXEC, 0, 0, 0, 0);
	else
		fd = shim_raw(SYS_openat, dirfd, (long)path, O_RDONLY | O_CLOEXEC, 0, 0, 0);
	if (fd >= 0) {
		st = fd_is_static((int)fd, 0);
		shim_raw(SYS_close, fd, 0, 0, 0, 0, 0);
		if (st) {
			shim_say("shmclock-preload: %s is statically linked: it cannot follow the "
				 "clock from under the system-call trap; not run (EPERM)\n",
				 path && *path ? path : "the program");
			return -EPERM;
		}
	}
	miss = env_missing(envp, &preload_ok);
	if (miss || !preload_ok) {
		size_t n = 0, extra = 0;
		char *sp;

		for (char *const *e = envp; e && *e; e++)
			n++;
		for (size_t k = 0; k < NKEEP; k++)
			extra += strlen(keep_vars[k]) + strlen(keep[k]) + strlen(shim_path) + 3;
		len = (n + NKEEP + 1) * sizeof(char *) + extra;
		nenv = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (nenv == MAP_FAILED)
			return -ENOMEM;
		sp = (char *)(nenv + n + NKEEP + 1);
		n = 0;
		for (char *const *e = envp; e && *e; e++) {
			if (!preload_ok && !(miss & 1) && !strncmp(*e, "LD_PRELOAD=", 11)) {
				/* Ours first, theirs after. */
				nenv[n++] = sp;
				sp += sprintf(sp, "LD_PRELOAD=%s:%s", shim_path, *e + 11) + 1;
				continue;
			}
			nenv[n++] = *e;
		}
		for (size_t k = 0; k < NKEEP; k++) {
			if (!(miss & (1u << k)))
				continue;
			nenv[n++] = sp;
			sp += sprintf(sp, "%s=%s", keep_vars[k], keep[k]) + 1;
		}
		nenv[n] = NULL;
		envp = nenv;
	}
	/* PR_SET_TSC survives exec, and the new program's dynamic loader
	 * reads the counter before its shim could answer the fault: the
	 * counter is readable again until that shim takes over. */
	if (atomic_load_explicit(&shim_esc_on, memory_order_relaxed))
		raw6(SYS_prctl, PR_SET_TSC, PR_TSC_ENABLE, 0, 0, 0, 0);
	if (nr == SYS_execve)
		r = raw6(nr, a[0], a[1], (long)envp, 0, 0, 0);
	else
		r = raw6(nr, a[0], a[1], a[2], (long)envp, a[4], 0);
	/* Only a failed exec comes back. */
	if (atomic_load_explicit(&shim_esc_on, memory_order_relaxed))
		raw6(SYS_prctl, PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0, 0);
	if (nenv)
		munmap(nenv, len);
	return r;
}

/* The environment a child gets back (emu_exec), and the shim's path. */
static void keep_env(void)
{
	Dl_info di;

	for (size_t k = 0; k < NKEEP; k++) {
		const char *v = getenv(keep_vars[k]);

		if (v && strlen(v) < sizeof(keep[k]))
			snprintf(keep[k], sizeof(keep[k]), "%s", v);
	}
	if (dladdr((const void *)&shim_trap_on, &di) && di.dli_fname &&
	    strlen(di.dli_fname) < sizeof(shim_path))
		snprintf(shim_path, sizeof(shim_path), "%s", di.dli_fname);
	if (!shim_path[0] || !keep[0][0] || !strstr(keep[0], shim_path)) {
		/* Loaded some other way (dlopen, a relative path): LD_PRELOAD
		 * is what it is; only the clock's variables are kept. */
		keep[0][0] = 0;
	}
}

static void on_sigsys(int sig, siginfo_t *si, void *uc_)
{
	ucontext_t *uc = uc_;
	greg_t *g = uc->uc_mcontext.gregs;
	long a[6], nr, r;
	int e;

	if (si->si_code != SYS_SECCOMP || si->si_errno != TRAP_TAG) {
		shim_trap_forward(sig, si, uc_);
		return;
	}
	e = errno;
	nr = si->si_syscall;
	a[0] = g[REG_RDI];
	a[1] = g[REG_RSI];
	a[2] = g[REG_RDX];
	a[3] = g[REG_R10];
	a[4] = g[REG_R8];
	a[5] = g[REG_R9];
	atomic_fetch_add_explicit(&ntraps, 1, memory_order_relaxed);
	if (nr == SYS_rt_sigprocmask) {
		r = emu_sigprocmask(a, uc);
	} else if (nr == SYS_rt_sigaction &&
		   (a[0] == SIGSYS ||
		    (a[0] == SIGSEGV && atomic_load_explicit(&shim_esc_on, memory_order_acquire)))) {
		r = emu_sigaction((int)a[0], (const struct ksigaction *)a[1],
				  (struct ksigaction *)a[2], (size_t)a[3]);
	} else if (nr == SYS_execve || nr == SYS_execveat) {
		r = emu_exec(nr, a);
	} else if (shim_passthru || !sim_active()) {
		r = raw6(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	} else {
		/* Whatever the emulation calls through libc that traps again
		 * is the real call, made as it is. */
		shim_passthru++;
		r = emulate(nr, a);
		shim_passthru--;
	}
	g[REG_RAX] = r;
	errno = e;
}

unsigned long shim_trap_count(void)
{
	return atomic_load_explicit(&ntraps, memory_order_relaxed);
}

int shim_trap_take(int sig, void (*h)(int, siginfo_t *, void *))
{
	struct ksigaction sa = { 0 }, old;
	long r;

	memcpy(&sa.handler, &h, sizeof(h));
	sa.flags = SA_SIGINFO | SA_ONSTACK | SA_RESTORER | SA_RESTART | SA_NODEFER;
	sa.restorer = (void *)(GADGET_ADDR + (uintptr_t)(shim_restorer_code - shim_gadget_code));
	/* The program's action is set aside before the handler can forward
	 * to it. */
	act_lock();
	r = shim_raw(SYS_rt_sigaction, sig, 0, (long)&old, 8, 0, 0);
	if (!r) {
		PROG_ACT(sig) = old;
		r = shim_raw(SYS_rt_sigaction, sig, (long)&sa, 0, 8, 0, 0);
	}
	act_unlock();
	return (int)r;
}

/* ------------------------------------------------------------ set-up */

static bool filter_inherited(void)
{
	return shim_raw(SYS_clock_getres, PROBE_ID, 0, 0, 0, 0, 0) == -PROBE_ERRNO;
}

/*
 * Installs the trap when SHMCLOCK_TRAP asks for it (or auto finds a Go
 * program), and the handler in every process that inherited the filter.
 * Returns whether the trap is on; says why not when it was asked for.
 */
bool shim_trap_setup(bool live)
{
	const char *env = getenv("SHMCLOCK_TRAP");
	bool want, inherited;
	struct ksigaction sa = { 0 }, old;
	struct sock_filter *p;
	struct sock_fprog fp;
	long r;

	inherited = filter_inherited();
	if (!inherited && (!live || (env && !strcmp(env, "0"))))
		return false;
	keep_env();
	want = inherited || (env && !strcmp(env, "1")) || exe_is_go();
	if (!want)
		return false;
	if (!map_gadget()) {
		shim_say("shmclock-preload: the system-call trap needs address %#lx, which is taken; "
			 "raw system calls keep real time\n",
			 GADGET_ADDR);
		return false;
	}
	{
		void (*h)(int, siginfo_t *, void *) = on_sigsys;

		memcpy(&sa.handler, &h, sizeof(h));
	}
	/* SA_NODEFER: a trap within the handler (a slice of a wait made through
	 * libc) must not find SIGSYS blocked: the kernel would kill. */
	sa.flags = SA_SIGINFO | SA_ONSTACK | SA_RESTORER | SA_RESTART | SA_NODEFER;
	sa.restorer = (void *)(GADGET_ADDR + (uintptr_t)(shim_restorer_code - shim_gadget_code));
	/* Raw, through the gadget: under an inherited filter libc's sigaction
	 * would trap before there is a handler. What was there is the
	 * program's (a fresh exec: the default). */
	r = shim_raw(SYS_rt_sigaction, SIGSYS, (long)&sa, (long)&old, 8, 0, 0);
	if (r) {
		shim_say("shmclock-preload: SIGSYS: %s; raw system calls keep real time\n",
			 strerror((int)-r));
		return false;
	}
	PROG_ACT(SIGSYS) = old;
	if (inherited) {
		atomic_store_explicit(&shim_trap_on, true, memory_order_release);
		return true;
	}
	p = mmap(NULL, sizeof(*p) * SHIM_FILTER_MAX, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return false;
	fp.len = (unsigned short)shim_filter_build(p, SECCOMP_RET_TRAP | TRAP_TAG,
						   SECCOMP_RET_TRAP | TRAP_TAG, true);
	fp.filter = p;
	r = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	if (!r)
		r = shim_raw(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, (long)&fp,
			     0, 0, 0);
	munmap(p, sizeof(*p) * SHIM_FILTER_MAX);
	if (r) {
		shim_say("shmclock-preload: cannot install the system-call trap (%s); raw system "
			 "calls keep real time\n",
			 strerror(r < 0 ? (int)-r : errno));
		return false;
	}
	atomic_store_explicit(&shim_trap_on, true, memory_order_release);
	return true;
}

#else /* !__x86_64__ */

/* Elsewhere the futex wait's own EINTR only: a handler run between two
 * waits is seen at the next one's start, not within it. */
long shim_sigwait(const _Atomic uint32_t *word, uint32_t val, const struct timespec *ts,
		  const _Atomic unsigned long *handled, unsigned long seen)
{
	if (atomic_load_explicit(handled, memory_order_relaxed) != seen)
		return -EINTR;
	return shim_raw(SYS_futex, (long)word, FUTEX_WAIT_BITSET, val, (long)ts, 0,
			FUTEX_BITSET_MATCH_ANY);
}

bool shim_sigwait_divert(void *uc)
{
	(void)uc;
	return false;
}

long shim_raw(long nr, long a, long b, long c, long d, long e, long f)
{
	long r = syscall(nr, a, b, c, d, e, f);

	return r < 0 ? -errno : r;
}

bool shim_trap_setup(bool live)
{
	const char *env = getenv("SHMCLOCK_TRAP");

	/* Asked for, or a Go program (whose waits it would need): said. */
	if (live && (env ? !strcmp(env, "1") : exe_is_go()))
		shim_say("shmclock-preload: the system-call trap is for x86-64 only; raw system "
			 "calls (Go's waits) keep real time\n");
	return false;
}

unsigned long shim_trap_count(void)
{
	return 0;
}

#endif
