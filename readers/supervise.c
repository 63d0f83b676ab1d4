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
#include "supervise.h"

#define PROG "shmclock-run"
#define NS 1000000000LL
#define SLICE_NS 20000000LL
#define SCRATCH_BELOW 160
#ifndef KCMP_FILE
#define KCMP_FILE 0
#endif

struct esc_page *supervise_report;
int (*supervise_report_done)(int code);

#if defined(__x86_64__)

/* What a thread is doing for the tracer. */
struct thr {
	pid_t tid;
	bool used;
	bool known;  /* has stopped once (a new one starts with SIGSTOP) */
	bool waiting; /* a re-planned wait is under way */
	bool in_slice; /* its slice runs: the exit stop comes next */
	long nr;
	struct user_regs_struct orig; /* the program's registers at the call */
	bool mono;     /* deadline on the jump-free timeline, else the world's */
	int64_t target;
	int64_t start; /* jump-free time at the start (rem of nanosleep) */
	/* select, pselect6: the program's three sets as it passed them
	 * (each slice starts from them; the kernel rewrites them), @setlen
	 * bytes each, NULL for a set it did not pass. */
	uint8_t *sets[3];
	size_t setlen;
};

static struct thr *thr;
static size_t nthr;
static shmclock_t *clk;
static unsigned mask;
static bool quiet;

static struct thr *find(pid_t tid, bool add)
{
	struct thr *free_slot = NULL;

	for (size_t i = 0; i < nthr; i++) {
		if (thr[i].used && thr[i].tid == tid)
			return &thr[i];
		if (!thr[i].used && !free_slot)
			free_slot = &thr[i];
	}
	if (!add)
		return NULL;
	if (!free_slot) {
		struct thr *n = realloc(thr, (nthr * 2 + 16) * sizeof(*thr));

		if (!n)
			return NULL;
		memset(n + nthr, 0, (nthr + 16) * sizeof(*thr));
		thr = n;
		free_slot = &thr[nthr];
		nthr = nthr * 2 + 16;
	}
	memset(free_slot, 0, sizeof(*free_slot));
	free_slot->used = true;
	free_slot->tid = tid;
	return free_slot;
}

/* ------------------------------------------------------------ memory */

static bool peek(pid_t pid, uintptr_t addr, void *buf, size_t len)
{
	struct iovec l = { buf, len }, r = { (void *)addr, len };

	return process_vm_readv(pid, &l, 1, &r, 1, 0) == (ssize_t)len;
}

/* Through /proc/PID/mem when process_vm_writev cannot (a read-only page). */
static bool poke(pid_t pid, uintptr_t addr, const void *buf, size_t len)
{
	struct iovec l = { (void *)buf, len }, r = { (void *)addr, len };
	char path[64];
	ssize_t w;
	int fd;

	if (process_vm_writev(pid, &l, 1, &r, 1, 0) == (ssize_t)len)
		return true;
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return false;
	w = pwrite(fd, buf, len, (off_t)addr);
	close(fd);
	return w == (ssize_t)len;
}

/* ------------------------------------------------------------ the clock */

static bool is_rt(long id)
{
	return (SHMCLOCK_G_REALTIME >> id) & 1;
}

static bool sim(long id)
{
	return id >= 0 && id < 32 && (mask & (1u << id));
}

static bool read_clock(bool rt, int64_t *ns)
{
	for (int i = 0; i < 1000; i++) {
		int r = rt ? shmclock_now_unix(clk, ns) : shmclock_now_monotonic(clk, ns);

		if (r == 0 || r == -ESTALE)
			return true;
		if (r != -EAGAIN)
			return false;
	}
	return false;
}

static int64_t ts_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * NS + ts->tv_nsec;
}

static struct timespec ns_ts(int64_t ns)
{
	struct timespec ts = { (time_t)(ns / NS), (long)(ns % NS) };

	if (ts.tv_nsec < 0) {
		ts.tv_nsec += NS;
		ts.tv_sec--;
	}
	return ts;
}

/* Simulated ns left before @t's deadline (<= 0: reached). */
static int64_t left(const struct thr *t)
{
	int64_t now;

	if (!read_clock(!t->mono, &now))
		return 0;
	return t->target - now;
}

/* The real length of the next slice. */
static int64_t slice(const struct thr *t)
{
	shmclock_info_t i;
	int64_t l = left(t), real;

	if (l <= 0)
		return 0;
	if (shmclock_info(clk, &i) || !i.initialized || i.paused || i.stepped || i.scale <= 0)
		return SLICE_NS;
	real = (int64_t)((double)l / i.scale);
	return real < 1000 ? 1000 : real > SLICE_NS ? SLICE_NS : real;
}

/* ------------------------------------------------------------ the calls */

bool supervise_elf_static(int fd)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	bool interp = false;

	if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(ph))
		return false;
	for (unsigned i = 0; i < eh.e_phnum && !interp; i++) {
		if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))) !=
		    (ssize_t)sizeof(ph))
			break;
		interp = ph.p_type == PT_INTERP;
	}
	return !interp;
}

static bool is_static_exe(pid_t pid)
{
	char path[64];
	bool st;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	st = supervise_elf_static(fd);
	close(fd);
	return st;
}

/* Whether process @pid's environment preloads the shim (LD_PRELOAD names
 * libshmclock-preload): a dynamic program that has it answers its own
 * calls. */
static bool env_has_shim(pid_t pid)
{
	char path[64], *buf;
	size_t cap = 1 << 16, len = 0;
	bool found = false;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	buf = malloc(cap + 1);
	while (buf && len < cap && (n = read(fd, buf + len, cap - len)) > 0)
		len += (size_t)n;
	close(fd);
	if (!buf)
		return false;
	buf[len] = 0;
	for (size_t i = 0; i < len && !found; i += strlen(buf + i) + 1)
		found = !strncmp(buf + i, "LD_PRELOAD=", 11) &&
			strstr(buf + i, "libshmclock-preload") != NULL;
	free(buf);
	return found;
}

/* Supervised or not, by process (the thread group): a static program, or a
 * dynamic one that does not preload the shim (its environment was
 * cleared); asked at its first time call after an exec. */
struct proc {
	pid_t tgid;
	int st; /* 0 unknown, 1 static, 2 dynamic */
};
static struct proc procs[256];

static pid_t tgid_of(pid_t tid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return tid;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return tid;
	buf[n] = 0;
	p = strstr(buf, "\nTgid:");
	return p ? (pid_t)atoi(p + 6) : tid;
}

/* The tracer and the listener both ask. */
static pthread_mutex_t procs_lock = PTHREAD_MUTEX_INITIALIZER;

static bool proc_static_tgid(pid_t tgid)
{
	struct proc *slot = &procs[(unsigned)tgid % 256];
	bool st;

	pthread_mutex_lock(&procs_lock);
	if (slot->tgid != tgid || !slot->st) {
		slot->tgid = tgid;
		slot->st = is_static_exe(tgid) || !env_has_shim(tgid) ? 1 : 2;
	}
	st = slot->st == 1;
	pthread_mutex_unlock(&procs_lock);
	return st;
}

static bool proc_static(pid_t tid)
{
	return proc_static_tgid(tgid_of(tid));
}

static void proc_forget(pid_t tgid)
{
	struct proc *slot = &procs[(unsigned)tgid % 256];

	pthread_mutex_lock(&procs_lock);
	if (slot->tgid == tgid)
		slot->st = 0;
	pthread_mutex_unlock(&procs_lock);
}

/* The AT_SYSINFO_EHDR entry of a program just exec'd becomes AT_IGNORE. */
static void hide_vdso(pid_t pid)
{
	struct user_regs_struct r;
	uint64_t w[4096];
	size_t i, n;

	if (ptrace(PTRACE_GETREGS, pid, NULL, &r))
		return;
	/* argc, argv..., NULL, envp..., NULL, auxv pairs. */
	n = sizeof(w) / sizeof(w[0]);
	while (n > 64 && !peek(pid, r.rsp, w, n * sizeof(w[0])))
		n /= 2;
	if (n <= 64)
		return;
	i = 1 + w[0] + 1;
	while (i < n && w[i])
		i++;
	for (i++; i + 1 < n && w[i] != AT_NULL; i += 2) {
		if (w[i] == AT_SYSINFO_EHDR) {
			uint64_t ign = AT_IGNORE;

			poke(pid, r.rsp + i * sizeof(w[0]), &ign, sizeof(ign));
			return;
		}
	}
}

/* Skip the call with @ret as its result. */
static void skip(pid_t pid, struct user_regs_struct *r, long ret)
{
	r->orig_rax = (unsigned long long)-1;
	r->rax = (unsigned long long)ret;
	ptrace(PTRACE_SETREGS, pid, NULL, r);
}

static bool answer_read(pid_t pid, struct user_regs_struct *r)
{
	int64_t ns;

	switch (r->orig_rax) {
	case SYS_clock_gettime: {
		struct timespec ts;

		if (!sim((long)r->rdi) || !read_clock(is_rt((long)r->rdi), &ns))
			return false;
		ts = ns_ts(ns);
		skip(pid, r, poke(pid, r->rsi, &ts, sizeof(ts)) ? 0 : -EFAULT);
		return true;
	}
	case SYS_gettimeofday: {
		struct timeval tv;
		struct timespec ts;

		if (!sim(CLOCK_REALTIME) || !read_clock(true, &ns))
			return false;
		ts = ns_ts(ns);
		tv.tv_sec = ts.tv_sec;
		tv.tv_usec = ts.tv_nsec / 1000;
		if (r->rsi) { /* the obsolete timezone: zero */
			uint64_t z = 0;

			poke(pid, r->rsi, &z, sizeof(z));
		}
		skip(pid, r, !r->rdi || poke(pid, r->rdi, &tv, sizeof(tv)) ? 0 : -EFAULT);
		return true;
	}
	case SYS_time: {
		time_t t;

		if (!sim(CLOCK_REALTIME) || !read_clock(true, &ns))
			return false;
		t = (time_t)(ns_ts(ns).tv_sec);
		if (r->rdi)
			poke(pid, r->rdi, &t, sizeof(t));
		skip(pid, r, (long)t);
		return true;
	}
	}
	return false;
}

/* A relative timeout of @ns from now, on the jump-free timeline. */
static bool plan_after(struct thr *t, int64_t ns)
{
	int64_t now;

	if (!read_clock(false, &now))
		return false;
	t->mono = true;
	t->start = now;
	t->target = now + ns;
	return true;
}

/* An absolute timeout @abs on clock @id. */
static bool plan_at(struct thr *t, long id, int64_t abs)
{
	t->mono = !is_rt(id);
	t->target = abs;
	return read_clock(false, &t->start);
}

static bool read_ts(pid_t pid, uint64_t addr, int64_t *ns)
{
	struct timespec ts;

	if (!addr || !peek(pid, addr, &ts, sizeof(ts)) || ts.tv_nsec < 0 || ts.tv_nsec >= NS ||
	    ts.tv_sec < 0)
		return false;
	*ns = ts_ns(&ts);
	return true;
}

static void drop_sets(struct thr *t)
{
	for (int k = 0; k < 3; k++) {
		free(t->sets[k]);
		t->sets[k] = NULL;
	}
	t->setlen = 0;
}

/* select's sets, saved before the first slice (rdi: nfds; rsi, rdx, r10:
 * the sets). */
static bool save_sets(pid_t pid, struct thr *t, const struct user_regs_struct *r)
{
	uint64_t at[3] = { r->rsi, r->rdx, r->r10 };

	drop_sets(t);
	t->setlen = (((size_t)(int)r->rdi + 63) / 64) * 8;
	for (int k = 0; k < 3; k++) {
		if (!at[k] || !t->setlen)
			continue;
		t->sets[k] = malloc(t->setlen);
		if (!t->sets[k] || !peek(pid, at[k], t->sets[k], t->setlen)) {
			drop_sets(t);
			return false;
		}
	}
	return true;
}

/* Whether @r is a wait the tracer re-plans; plans @t's deadline. */
static bool plan_wait(pid_t pid, struct thr *t, const struct user_regs_struct *r)
{
	int64_t ns;
	long cmd;

	switch (r->orig_rax) {
	case SYS_nanosleep:
		return sim(CLOCK_MONOTONIC) && read_ts(pid, r->rdi, &ns) && plan_after(t, ns);
	case SYS_clock_nanosleep:
		if (!sim((long)r->rdi) || !read_ts(pid, r->rdx, &ns))
			return false;
		return r->rsi & TIMER_ABSTIME ? plan_at(t, (long)r->rdi, ns) : plan_after(t, ns);
	case SYS_futex:
		cmd = (long)r->rsi & FUTEX_CMD_MASK;
		if ((cmd != FUTEX_WAIT && cmd != FUTEX_WAIT_BITSET) || !read_ts(pid, r->r10, &ns))
			return false;
		if (cmd == FUTEX_WAIT)
			return sim(CLOCK_MONOTONIC) && plan_after(t, ns);
		{
			long id = (long)r->rsi & FUTEX_CLOCK_REALTIME ? CLOCK_REALTIME
								       : CLOCK_MONOTONIC;

			return sim(id) && plan_at(t, id, ns);
		}
	case SYS_epoll_wait:
	case SYS_epoll_pwait:
		return (int)r->r10 > 0 && sim(CLOCK_MONOTONIC) &&
		       plan_after(t, (int64_t)(int)r->r10 * 1000000);
	case SYS_poll:
		return (int)r->rdx > 0 && sim(CLOCK_MONOTONIC) &&
		       plan_after(t, (int64_t)(int)r->rdx * 1000000);
	case SYS_ppoll:
	case SYS_rt_sigtimedwait:
		return sim(CLOCK_MONOTONIC) && read_ts(pid, r->rdx, &ns) && plan_after(t, ns);
	case SYS_select:
	case SYS_pselect6:
		if (!sim(CLOCK_MONOTONIC) || (int)r->rdi < 0 || (int)r->rdi > 65536)
			return false;
		if (r->orig_rax == SYS_select) {
			struct timeval tv;

			if (!r->r8 || !peek(pid, r->r8, &tv, sizeof(tv)) || tv.tv_sec < 0 ||
			    tv.tv_usec < 0 || tv.tv_usec >= 1000000)
				return false;
			ns = (int64_t)tv.tv_sec * NS + (int64_t)tv.tv_usec * 1000;
		} else if (!read_ts(pid, r->r8, &ns)) {
			return false;
		}
		return save_sets(pid, t, r) && plan_after(t, ns);
#ifdef SYS_epoll_pwait2
	case SYS_epoll_pwait2:
		return sim(CLOCK_MONOTONIC) && read_ts(pid, r->r10, &ns) && plan_after(t, ns);
#endif
	}
	return false;
}

/* The program's call, made with a real timeout of @sl ns instead of its
 * own (the registers are the program's: t->orig). */
static void run_slice(pid_t pid, struct thr *t, int64_t sl)
{
	struct user_regs_struct r = t->orig;
	uint64_t scratch = ((uint64_t)r.rsp - SCRATCH_BELOW) & ~(uint64_t)15;
	struct timespec ts = ns_ts(sl);
	int ms = (int)((sl + 999999) / 1000000);

	switch (t->nr) {
	case SYS_nanosleep:
	case SYS_clock_nanosleep:
		r.orig_rax = SYS_nanosleep;
		r.rdi = scratch;
		r.rsi = 0;
		break;
	case SYS_futex: {
		struct timespec now;

		clock_gettime(CLOCK_MONOTONIC, &now);
		ts = ns_ts(ts_ns(&now) + sl);
		if (((long)r.rsi & FUTEX_CMD_MASK) == FUTEX_WAIT)
			r.r9 = FUTEX_BITSET_MATCH_ANY;
		r.rsi = (uint64_t)(FUTEX_WAIT_BITSET | ((long)r.rsi & FUTEX_PRIVATE_FLAG));
		r.r10 = scratch;
		break;
	}
	case SYS_epoll_wait:
	case SYS_epoll_pwait:
		r.r10 = (uint64_t)ms;
		break;
	case SYS_poll:
		r.rdx = (uint64_t)ms;
		break;
	case SYS_ppoll:
	case SYS_rt_sigtimedwait:
		r.rdx = scratch;
		break;
	case SYS_select:
	case SYS_pselect6: {
		uint64_t at[3] = { r.rsi, r.rdx, r.r10 };

		for (int k = 0; k < 3; k++)
			if (t->sets[k])
				poke(pid, at[k], t->sets[k], t->setlen);
		if (t->nr == SYS_select) {
			/* A timeval, not a timespec. */
			ts.tv_nsec /= 1000;
		}
		r.r8 = scratch;
		break;
	}
	default: /* epoll_pwait2 */
		r.r10 = scratch;
		break;
	}
	poke(pid, scratch, &ts, sizeof(ts));
	ptrace(PTRACE_SETREGS, pid, NULL, &r);
	t->in_slice = true;
	ptrace(PTRACE_SYSCALL, pid, NULL, NULL);
}

/* A seccomp stop. */
static void on_call(pid_t pid, struct thr *t)
{
	struct user_regs_struct r;
	int64_t sl;

	if (ptrace(PTRACE_GETREGS, pid, NULL, &r))
		return;
	if (!proc_static(pid) || answer_read(pid, &r)) {
		ptrace(PTRACE_CONT, pid, NULL, NULL);
		return;
	}
	/* The same call again after a slice or a restart: the same deadline
	 * (after an EINTR the program's next call has other arguments, or
	 * is the same call resumed, which ends at the same time anyway). */
	if (!t->waiting || t->nr != (long)r.orig_rax || r.rdi != t->orig.rdi ||
	    r.rsi != t->orig.rsi || r.rdx != t->orig.rdx || r.r10 != t->orig.r10 ||
	    r.r8 != t->orig.r8 || r.r9 != t->orig.r9) {
		if (!plan_wait(pid, t, &r)) {
			ptrace(PTRACE_CONT, pid, NULL, NULL);
			return;
		}
		t->waiting = true;
		t->nr = (long)r.orig_rax;
		t->orig = r;
	}
	sl = slice(t);
	run_slice(pid, t, sl > 0 ? sl : 0);
}

static bool slice_expired(long nr, long ret)
{
	switch (nr) {
	case SYS_nanosleep:
	case SYS_clock_nanosleep:
		return ret == 0;
	case SYS_futex:
		return ret == -ETIMEDOUT;
	case SYS_rt_sigtimedwait:
		return ret == -EAGAIN;
	default:
		return ret == 0;
	}
}

/* A relative sleep ended by a handler reports what is left (a slice's own
 * remainder goes nowhere): written where the program asked. */
static void write_remainder(pid_t pid, const struct thr *t)
{
	const struct user_regs_struct *o = &t->orig;
	uint64_t rem = t->nr == SYS_nanosleep ? o->rsi
		       : t->nr == SYS_clock_nanosleep && !(o->rsi & TIMER_ABSTIME) ? o->r10
										 : 0;

	if (rem) {
		int64_t l = left(t);
		struct timespec ts = ns_ts(l > 0 ? l : 0);

		poke(pid, rem, &ts, sizeof(ts));
	}
}

/* The exit of a slice: again, or the program's result. */
static void on_slice_exit(pid_t pid, struct thr *t)
{
	struct user_regs_struct r, o = t->orig;
	long ret;

	t->in_slice = false;
	if (ptrace(PTRACE_GETREGS, pid, NULL, &r))
		return;
	ret = (long)r.rax;
	/* Interrupted by a signal: the program's own registers back, with the
	 * kernel's restart code, and the kernel decides as for any call:
	 * made again (the same deadline: its stop comes back here) when no
	 * handler runs or SA_RESTART says so, else EINTR for the program. A
	 * restart block would resume the slice instead of the program's call,
	 * so it becomes ERESTARTNOHAND. */
	if (ret <= -512 && ret >= -516) {
		write_remainder(pid, t);
		o.rax = (unsigned long long)(ret == -516 ? -514 : ret);
		ptrace(PTRACE_SETREGS, pid, NULL, &o);
		ptrace(PTRACE_CONT, pid, NULL, NULL);
		return;
	}
	/* A slice that ran out before the deadline: the program's call is
	 * made again. */
	if (slice_expired(t->nr, ret) && left(t) > 0) {
		o.rip -= 2; /* the syscall instruction */
		o.rax = o.orig_rax;
		ptrace(PTRACE_SETREGS, pid, NULL, &o);
		ptrace(PTRACE_CONT, pid, NULL, NULL);
		return;
	}
	t->waiting = false;
	if (t->nr == SYS_select || t->nr == SYS_pselect6) {
		/* Linux reports the simulated time not waited. */
		int64_t l = left(t);
		struct timespec ts = ns_ts(l > 0 ? l : 0);

		if (t->nr == SYS_select)
			ts.tv_nsec /= 1000;
		poke(pid, o.r8, &ts, sizeof(ts));
		drop_sets(t);
	}
	if (slice_expired(t->nr, ret) && (t->nr == SYS_clock_nanosleep))
		ret = 0;
	if (ret == -EINTR && t->nr == SYS_nanosleep && o.rsi) {
		int64_t now = t->start, rem;
		struct timespec ts;

		read_clock(false, &now);
		rem = t->target - now;
		ts = ns_ts(rem > 0 ? rem : 0);
		poke(pid, o.rsi, &ts, sizeof(ts));
	}
	o.rax = (unsigned long long)ret;
	ptrace(PTRACE_SETREGS, pid, NULL, &o);
	ptrace(PTRACE_CONT, pid, NULL, NULL);
}

/*
 * A signal for a thread between two slices of its wait: the slice ran out
 * and on_slice_exit made the program's call again (RIP back on the syscall
 * instruction), then the kernel, on its way back to the program, found the
 * signal. Were the handler run from there, the call would be made again
 * after it, as if SA_RESTART, and a nanosleep would never end with EINTR
 * (preload_apps' static:eintr under a jump did that once in CI). Put back
 * as the kernel leaves a call a signal interrupted: after the instruction,
 * -ERESTARTNOHAND, so that the kernel decides as for its own calls: EINTR
 * once a handler runs, the call made again otherwise (the same deadline).
 * At this stop the kernel has not yet looked at the return value: it
 * does once the signal is delivered or dropped (handle_signal).
 */
static void between_slices(pid_t pid, struct thr *t)
{
	struct user_regs_struct r;

	if (ptrace(PTRACE_GETREGS, pid, NULL, &r) || r.rip != t->orig.rip - 2 ||
	    r.rax != t->orig.orig_rax || r.orig_rax != t->orig.orig_rax)
		return;
	write_remainder(pid, t);
	r.rip = t->orig.rip;
	r.rax = (unsigned long long)-514; /* ERESTARTNOHAND */
	ptrace(PTRACE_SETREGS, pid, NULL, &r);
}

/* ------------------------------------------------------------ the loop */

/*
 * Reads come to a listener (SECCOMP_RET_USER_NOTIF): a thread of the
 * supervisor answers them without stopping the program, several times
 * cheaper than a ptrace stop (shmclock-bench bypass). Without one (a kernel
 * before 5.0) they stop for the tracer as the waits do.
 */
static int listener = -1;

/*
 * ITIMER_REAL (alarm, setitimer) of the supervised processes, in simulated
 * time on the jump-free timeline: the listener answers the calls, a thread
 * sends SIGALRM when one is due (to the process, as the kernel's timer
 * does). Kept per process, across exec, as the kernel keeps it; a fork
 * child starts without one.
 */
struct itimer {
	pid_t tgid;
	bool armed;
	int64_t next;     /* jump-free simulated ns */
	int64_t interval; /* 0: one-shot */
};

static struct itimer itimers[256];
static pthread_mutex_t it_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t it_cond;

static struct itimer *it_find(pid_t tgid, bool add)
{
	struct itimer *free_slot = NULL;

	for (size_t i = 0; i < sizeof(itimers) / sizeof(itimers[0]); i++) {
		if (itimers[i].tgid == tgid)
			return &itimers[i];
		if (!itimers[i].tgid && !free_slot)
			free_slot = &itimers[i];
	}
	if (add && free_slot) {
		memset(free_slot, 0, sizeof(*free_slot));
		free_slot->tgid = tgid;
	}
	return add ? free_slot : NULL;
}

/* it_lock held: what is left of @t, as an itimerval. */
static struct itimerval it_get(const struct itimer *t)
{
	struct itimerval v = { { 0, 0 }, { 0, 0 } };
	int64_t now = 0, left;

	if (!t || !t->armed)
		return v;
	read_clock(false, &now);
	left = t->next - now;
	if (left <= 0)
		left = 1000; /* due: as the kernel, never 0 while armed */
	v.it_value.tv_sec = left / NS;
	v.it_value.tv_usec = (left % NS + 999) / 1000;
	if (v.it_value.tv_usec >= 1000000) {
		v.it_value.tv_sec++;
		v.it_value.tv_usec -= 1000000;
	}
	v.it_interval.tv_sec = t->interval / NS;
	v.it_interval.tv_usec = t->interval % NS / 1000;
	return v;
}

/* it_lock held: arm @t with @v (all zero: disarm). */
static void it_set(struct itimer *t, const struct itimerval *v)
{
	int64_t now = 0, val = (int64_t)v->it_value.tv_sec * NS + (int64_t)v->it_value.tv_usec * 1000;

	read_clock(false, &now);
	t->armed = val > 0;
	t->next = now + val;
	t->interval = (int64_t)v->it_interval.tv_sec * NS + (int64_t)v->it_interval.tv_usec * 1000;
	if (!t->armed)
		t->tgid = 0;
	pthread_cond_signal(&it_cond);
}

/* The answer to alarm, setitimer or getitimer from @pid: true with
 * *@val, or false to let the kernel make it (not ITIMER_REAL). */
static bool answer_itimer(pid_t pid, long nr, const uint64_t *args, long *val, bool *ok)
{
	pid_t tgid = tgid_of(pid);
	struct itimerval old, nv;
	struct itimer *t;

	if (nr != SYS_alarm && args[0] != ITIMER_REAL)
		return false;
	if (!sim(CLOCK_REALTIME))
		return false;
	if (nr == SYS_setitimer && args[1] && !peek(pid, args[1], &nv, sizeof(nv))) {
		*ok = false;
		return true;
	}
	pthread_mutex_lock(&it_lock);
	t = it_find(tgid, nr != SYS_getitimer);
	old = it_get(t);
	if (t && nr == SYS_alarm) {
		struct itimerval a = { { 0, 0 }, { (time_t)(unsigned)args[0], 0 } };

		it_set(t, &a);
	} else if (t && nr == SYS_setitimer && args[1]) {
		it_set(t, &nv);
	}
	pthread_mutex_unlock(&it_lock);
	*val = 0;
	if (nr == SYS_alarm) {
		/* Seconds left, rounded as Linux's alarm rounds them. */
		*val = old.it_value.tv_sec;
		if ((!old.it_value.tv_sec && old.it_value.tv_usec) ||
		    old.it_value.tv_usec >= 500000)
			(*val)++;
	} else if (nr == SYS_setitimer && args[2]) {
		*ok = poke(pid, args[2], &old, sizeof(old));
	} else if (nr == SYS_getitimer) {
		*ok = poke(pid, args[1], &old, sizeof(old));
	}
	return true;
}

/*
 * POSIX timers (timer_create ...) and timerfds of the supervised
 * processes on the simulated clocks, answered by the listener and fired by
 * the same thread as the itimers, under it_lock. Timelines as for waits: a
 * relative value, or a monotonic or boottime clock, expires on the
 * jump-free timeline; an absolute CLOCK_REALTIME one on the world's, jumps
 * and all (its periods too, as the kernel's).
 *
 * A POSIX timer lives only in this table, its id in a range the kernel
 * does not reach (it counts its own from 0, for the CPU-time clocks the
 * kernel still serves). Its signal goes with rt_(tg)sigqueueinfo carrying
 * what the kernel's would: SI_TIMER, the id, sigev_value and the overrun.
 * While the previous one is still pending (/proc's SigPnd or ShdPnd), an
 * expiry only adds to the overrun, as the kernel's single queued signal
 * does. Timers die at exec and exit and are not inherited by fork (a
 * table keyed by the thread group).
 *
 * A timerfd is an eventfd installed in the program (SECCOMP_IOCTL_NOTIF_ADDFD
 * answers the call with it): read(2), poll and epoll work natively, the
 * supervisor adds expiry counts through its own copy, and the program's
 * descriptor is known by its open file (kcmp), so dup, fork and exec share
 * it as they share a timerfd. Expiry counts not read are dropped when it is
 * re-armed, as the kernel does.
 */
#define PT_ID_BASE 0x3c100000
#define PT_PER_PROC 4096
#define PT_MAX 16384
#define TFD_MAX 1024

struct ptimer {
	pid_t tgid; /* 0: a free slot */
	int id;
	int clock;
	int notify; /* SIGEV_NONE, SIGEV_SIGNAL, SIGEV_THREAD_ID */
	int signo;
	pid_t tid;    /* SIGEV_THREAD_ID */
	uint64_t value;
	bool armed, mono;
	bool sent;        /* a signal is out, maybe not delivered yet */
	int64_t next;     /* on its timeline */
	int64_t interval; /* 0: one-shot */
	int overrun;      /* expiries not signalled since the last signal */
	int overrun_last; /* what timer_getoverrun answers */
};

struct tfd {
	int fd; /* the supervisor's copy of the eventfd; -1: a free slot */
	int clock;
	bool armed, mono;
	int64_t next, interval;
};

static struct ptimer *ptimers;
static size_t nptimers;
static int pt_next_id = PT_ID_BASE;
static struct tfd tfds[TFD_MAX];
static bool tfds_init;

/* Now on a timer's timeline (@mono: the jump-free one). */
static int64_t tl_now(bool mono)
{
	int64_t now = 0;

	read_clock(!mono, &now);
	return now;
}

static bool pt_clock(long id)
{
	return (id == CLOCK_REALTIME || id == CLOCK_MONOTONIC || id == CLOCK_BOOTTIME) && sim(id);
}

static struct ptimer *pt_find(pid_t tgid, int id)
{
	for (size_t i = 0; i < nptimers; i++)
		if (ptimers[i].tgid == tgid && ptimers[i].id == id)
			return &ptimers[i];
	return NULL;
}

/* Whether signal @sig is pending for @p's target (thread or process). */
static bool pt_pending(const struct ptimer *p)
{
	char path[96], buf[2048], *l;
	const char *key = p->notify == SIGEV_THREAD_ID ? "\nSigPnd:" : "\nShdPnd:";
	ssize_t n;
	int fd;

	if (p->notify == SIGEV_THREAD_ID)
		snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)p->tgid, (int)p->tid);
	else
		snprintf(path, sizeof(path), "/proc/%d/status", (int)p->tgid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	l = strstr(buf, key);
	return l && (strtoull(l + strlen(key), NULL, 16) >> (p->signo - 1)) & 1;
}

/* @a - @b, or @a + @b, saturated. */
static int64_t sat_sub(int64_t a, int64_t b)
{
	int64_t r;

	return __builtin_sub_overflow(a, b, &r) ? (b < 0 ? INT64_MAX : INT64_MIN) : r;
}

static int64_t sat_add64(int64_t a, int64_t b)
{
	int64_t r;

	return __builtin_add_overflow(a, b, &r) ? (b > 0 ? INT64_MAX : INT64_MIN) : r;
}

static int sat_add(int a, int64_t b)
{
	int64_t s = (int64_t)a + b;

	return s > INT32_MAX ? INT32_MAX : (int)s;
}

/* it_lock held: @p is due at @now on its timeline. */
static void pt_fire(struct ptimer *p, int64_t now)
{
	int64_t missed = 0;
	siginfo_t si;

	if (p->interval > 0) {
		missed = sat_sub(now, p->next) / p->interval;
		p->next = sat_add64(p->next, sat_add64(missed * p->interval, p->interval));
	} else {
		p->armed = false;
	}
	if (p->notify == SIGEV_NONE)
		return;
	if (p->sent && pt_pending(p)) {
		p->overrun = sat_add(p->overrun, 1 + missed);
		return;
	}
	p->overrun = sat_add(p->overrun, missed);
	memset(&si, 0, sizeof(si));
	si.si_signo = p->signo;
	si.si_code = SI_TIMER;
	si.si_timerid = p->id;
	si.si_overrun = p->overrun;
	memcpy(&si.si_value, &p->value, sizeof(si.si_value));
	if (p->notify == SIGEV_THREAD_ID)
		syscall(SYS_rt_tgsigqueueinfo, p->tgid, p->tid, p->signo, &si);
	else
		syscall(SYS_rt_sigqueueinfo, p->tgid, p->signo, &si);
	p->overrun_last = p->overrun;
	p->overrun = 0;
	p->sent = true;
}

/* it_lock held: an itimerspec's two values, checked as the kernel checks
 * them; false: EINVAL. */
static bool its_ns(const struct itimerspec *v, int64_t *val, int64_t *intv)
{
	const struct timespec *t[2] = { &v->it_value, &v->it_interval };

	for (int k = 0; k < 2; k++)
		if (t[k]->tv_sec < 0 || t[k]->tv_nsec < 0 || t[k]->tv_nsec >= NS)
			return false;
	/* Beyond 292 years: as far as a time goes (the kernel's KTIME_MAX). */
	*val = v->it_value.tv_sec >= INT64_MAX / NS - 1 ? INT64_MAX : ts_ns(&v->it_value);
	*intv = v->it_interval.tv_sec >= INT64_MAX / NS - 1 ? INT64_MAX : ts_ns(&v->it_interval);
	return true;
}


/* What is left of a timer on its timeline, as timer_gettime says it. */
static struct itimerspec left_its(bool armed, bool mono, int64_t next, int64_t interval,
				  bool due_is_one)
{
	struct itimerspec v;
	int64_t l = 0;

	memset(&v, 0, sizeof(v));
	if (!armed)
		return v;
	l = sat_sub(next, tl_now(mono));
	if (l <= 0)
		l = due_is_one ? 1 : 0;
	v.it_value = ns_ts(l);
	v.it_interval = ns_ts(interval);
	return v;
}

/* it_lock held: arms (or disarms) a timer from the program's value. */
static void arm(bool *armed, bool *mono, int64_t *next, int64_t *interval, int clock,
		bool abs, int64_t val, int64_t intv)
{
	*armed = val > 0;
	*interval = intv;
	if (abs) {
		*mono = !is_rt(clock);
		*next = val;
	} else {
		*mono = true;
		*next = sat_add64(tl_now(true), val);
	}
}

/* timer_create: -errno, 0 answered (*val), 1 the kernel's. */
static int pt_create(pid_t pid, pid_t tgid, const uint64_t *args, long *val,
		     struct ptimer **made)
{
	struct sigevent ev;
	struct ptimer *p = NULL;
	size_t mine = 0;
	int id;

	if (!pt_clock((long)args[0]))
		return 1;
	memset(&ev, 0, sizeof(ev));
	if (args[1]) {
		if (!peek(pid, args[1], &ev, sizeof(ev)))
			return -EFAULT;
	} else {
		ev.sigev_notify = SIGEV_SIGNAL;
		ev.sigev_signo = SIGALRM;
	}
	switch (ev.sigev_notify) {
	case SIGEV_THREAD_ID:
		if (ev._sigev_un._tid <= 0 || tgid_of(ev._sigev_un._tid) != tgid ||
		    kill(ev._sigev_un._tid, 0))
			return -EINVAL;
		/* fall through */
	case SIGEV_SIGNAL:
	case SIGEV_THREAD:
		if (ev.sigev_signo <= 0 || ev.sigev_signo > SIGRTMAX)
			return -EINVAL;
		break;
	case SIGEV_NONE:
		break;
	default:
		return -EINVAL;
	}
	for (size_t i = 0; i < nptimers; i++) {
		if (ptimers[i].tgid == tgid)
			mine++;
		else if (!ptimers[i].tgid && !p)
			p = &ptimers[i];
	}
	if (mine >= PT_PER_PROC)
		return -EAGAIN;
	if (!p) {
		size_t n = nptimers ? nptimers * 2 : 64;
		struct ptimer *g;

		if (n > PT_MAX)
			n = PT_MAX;
		if (n <= nptimers || !(g = realloc(ptimers, n * sizeof(*g))))
			return -EAGAIN;
		memset(g + nptimers, 0, (n - nptimers) * sizeof(*g));
		ptimers = g;
		p = &ptimers[nptimers];
		nptimers = n;
	}
	do {
		id = pt_next_id;
		pt_next_id = pt_next_id == INT32_MAX ? PT_ID_BASE : pt_next_id + 1;
	} while (pt_find(tgid, id));
	if (!poke(pid, args[2], &id, sizeof(id)))
		return -EFAULT;
	memset(p, 0, sizeof(*p));
	p->tgid = tgid;
	p->id = id;
	p->clock = (int)args[0];
	p->notify = ev.sigev_notify == SIGEV_THREAD ? SIGEV_SIGNAL : ev.sigev_notify;
	p->signo = ev.sigev_signo;
	p->tid = ev._sigev_un._tid;
	if (args[1])
		memcpy(&p->value, &ev.sigev_value, sizeof(ev.sigev_value));
	else
		p->value = (uint64_t)(unsigned)id;
	*made = p;
	*val = 0;
	return 0;
}

/* timer_settime, timer_gettime, timer_getoverrun, timer_delete: -errno, 0
 * answered (*val), 1 the kernel's (not one of ours). */
static int pt_call(pid_t pid, pid_t tgid, long nr, const uint64_t *args, long *val)
{
	struct ptimer *p = pt_find(tgid, (int)args[0]);
	struct itimerspec nv, old;
	int64_t v, iv;

	if (!p)
		return 1;
	*val = 0;
	if (p->armed && p->notify == SIGEV_NONE) {
		/* Tracked only: brought up to date when asked. */
		int64_t now = tl_now(p->mono);

		if (p->next <= now)
			pt_fire(p, now);
	}
	old = left_its(p->armed, p->mono, p->next, p->interval, p->notify != SIGEV_NONE);
	switch (nr) {
	case SYS_timer_settime:
		if (!args[2])
			return -EINVAL;
		if (!peek(pid, args[2], &nv, sizeof(nv)))
			return -EFAULT;
		if (!its_ns(&nv, &v, &iv))
			return -EINVAL;
		arm(&p->armed, &p->mono, &p->next, &p->interval, p->clock,
		    args[1] & TIMER_ABSTIME, v, iv);
		p->overrun = 0;
		p->sent = false;
		if (p->notify != SIGEV_NONE) /* nothing for the thread to send */
			pthread_cond_signal(&it_cond);
		if (args[3] && !poke(pid, args[3], &old, sizeof(old)))
			return -EFAULT;
		return 0;
	case SYS_timer_gettime:
		return poke(pid, args[1], &old, sizeof(old)) ? 0 : -EFAULT;
	case SYS_timer_getoverrun:
		*val = p->overrun_last;
		return 0;
	default: /* timer_delete */
		p->tgid = 0;
		return 0;
	}
}

/* A process exec'd or exited: its POSIX timers go. */
static void pt_forget(pid_t tgid)
{
	pthread_mutex_lock(&it_lock);
	for (size_t i = 0; i < nptimers; i++)
		if (ptimers[i].tgid == tgid)
			ptimers[i].tgid = 0;
	pthread_mutex_unlock(&it_lock);
}

/* ---- timerfds */

/* it_lock held: the timerfd that is @pid's descriptor @fd, or NULL. */
static struct tfd *tfd_find(pid_t pid, int fd)
{
	for (size_t i = 0; tfds_init && i < TFD_MAX; i++)
		if (tfds[i].fd >= 0 &&
		    syscall(SYS_kcmp, pid, getpid(), KCMP_FILE, fd, tfds[i].fd) == 0)
			return &tfds[i];
	return NULL;
}

/* it_lock held, the table full: drops the timerfds no process has any
 * more (the program closed each copy; ours is the last). */
static void tfd_sweep(void)
{
	bool held[TFD_MAX] = { false };
	DIR *d = opendir("/proc");
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		char path[300], link[64];
		pid_t pid = (pid_t)atoi(e->d_name);
		struct dirent *f;
		DIR *fdd;

		if (pid <= 0 || pid == getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
		fdd = opendir(path);
		if (!fdd)
			continue;
		while ((f = readdir(fdd))) {
			char lp[600];
			ssize_t n;

			if (f->d_name[0] == '.')
				continue;
			snprintf(lp, sizeof(lp), "%s/%s", path, f->d_name);
			n = readlink(lp, link, sizeof(link) - 1);
			if (n <= 0)
				continue;
			link[n] = 0;
			if (strcmp(link, "anon_inode:[eventfd]"))
				continue;
			for (size_t i = 0; i < TFD_MAX; i++)
				if (tfds[i].fd >= 0 && !held[i] &&
				    syscall(SYS_kcmp, pid, getpid(), KCMP_FILE, atoi(f->d_name),
					    tfds[i].fd) == 0)
					held[i] = true;
		}
		closedir(fdd);
	}
	closedir(d);
	for (size_t i = 0; i < TFD_MAX; i++) {
		if (tfds[i].fd >= 0 && !held[i]) {
			close(tfds[i].fd);
			tfds[i].fd = -1;
		}
	}
}

/* Expiry counts not read yet are dropped (a re-arm). */
static void tfd_drain(struct tfd *t)
{
	uint64_t n;
	struct iovec io = { &n, sizeof(n) };

	(void)!preadv2(t->fd, &io, 1, -1, RWF_NOWAIT);
}

/* it_lock held: @t is due at @now on its timeline. The count is added
 * only if the write cannot block (eventfd's write has no RWF_NOWAIT): a
 * program that filled the counter itself loses the expiries, not the
 * supervisor its thread. */
static void tfd_fire(struct tfd *t, int64_t now)
{
	struct pollfd pf = { t->fd, POLLOUT, 0 };
	uint64_t n = 1;

	if (t->interval > 0) {
		int64_t missed = sat_sub(now, t->next) / t->interval;

		n += (uint64_t)missed;
		t->next = sat_add64(t->next, sat_add64(missed * t->interval, t->interval));
	} else {
		t->armed = false;
	}
	if (poll(&pf, 1, 0) == 1 && (pf.revents & POLLOUT))
		(void)!write(t->fd, &n, sizeof(n));
}

/* timerfd_create: -errno, 0 answered (the notification is answered by
 * the ioctl that installs the descriptor), 1 the kernel's. */
static int tfd_create(const struct seccomp_notif *req)
{
	struct seccomp_notif_addfd add;
	struct tfd *t = NULL;
	long clock = (long)req->data.args[0];
	int flags = (int)req->data.args[1], r;

	if (!pt_clock(clock) || (flags & ~(TFD_CLOEXEC | TFD_NONBLOCK)))
		return 1;
	if (!tfds_init) {
		for (size_t i = 0; i < TFD_MAX; i++)
			tfds[i].fd = -1;
		tfds_init = true;
	}
	for (int pass = 0; pass < 2 && !t; pass++) {
		for (size_t i = 0; i < TFD_MAX && !t; i++)
			if (tfds[i].fd < 0)
				t = &tfds[i];
		if (!t && !pass)
			tfd_sweep();
	}
	if (!t)
		return -EMFILE;
	memset(t, 0, sizeof(*t));
	t->fd = eventfd(0, EFD_CLOEXEC | (flags & TFD_NONBLOCK ? EFD_NONBLOCK : 0));
	if (t->fd < 0) {
		t->fd = -1;
		return -ENFILE;
	}
	t->clock = (int)clock;
	memset(&add, 0, sizeof(add));
	add.id = req->id;
	add.flags = SECCOMP_ADDFD_FLAG_SEND;
	add.srcfd = (uint32_t)t->fd;
	add.newfd_flags = flags & TFD_CLOEXEC ? O_CLOEXEC : 0;
	r = ioctl(listener, SECCOMP_IOCTL_NOTIF_ADDFD, &add);
	if (r < 0) {
		r = errno;
		close(t->fd);
		t->fd = -1;
		/* No SECCOMP_ADDFD_FLAG_SEND (before Linux 5.14): the
		 * kernel's timerfd, on real time. */
		return r == EINVAL ? 1 : r == ENOENT ? 0 : -r;
	}
	return 0;
}

/* timerfd_settime, timerfd_gettime: as pt_call. */
static int tfd_call(pid_t pid, long nr, const uint64_t *args)
{
	struct tfd *t = tfd_find(pid, (int)args[0]);
	struct itimerspec nv, old;
	int64_t v, iv;

	if (!t)
		return 1;
	if (t->armed) {
		int64_t now = tl_now(t->mono);

		if (t->next <= now)
			tfd_fire(t, now);
	}
	old = left_its(t->armed, t->mono, t->next, t->interval, false);
	if (nr == SYS_timerfd_gettime)
		return poke(pid, args[1], &old, sizeof(old)) ? 0 : -EFAULT;
	if (args[1] & ~(uint64_t)(TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET))
		return -EINVAL;
	if (!peek(pid, args[2], &nv, sizeof(nv)))
		return -EFAULT;
	if (!its_ns(&nv, &v, &iv))
		return -EINVAL;
	arm(&t->armed, &t->mono, &t->next, &t->interval, t->clock, args[1] & TFD_TIMER_ABSTIME,
	    v, iv);
	tfd_drain(t);
	pthread_cond_signal(&it_cond);
	if (args[3] && !poke(pid, args[3], &old, sizeof(old)))
		return -EFAULT;
	return 0;
}

/* The answer to the timer calls and clock_getres of a supervised process
 * (-errno, 0 answered with *val, 1 the kernel's); for timerfd_create, 0
 * with *sent: answered already. */
static int answer_timer(const struct seccomp_notif *req, long *val, bool *sent)
{
	pid_t pid = (pid_t)req->pid, tgid;
	const uint64_t *args = (const uint64_t *)req->data.args;
	struct ptimer *made = NULL;
	long nr = req->data.nr;
	int r;

	*sent = false;
	if (nr == SYS_clock_getres) {
		/* Simulated time is a nanosecond count whatever the clock
		 * (the coarse ones read it in full too); the shim says the
		 * same, so any process of the tree gets it, as its reads. */
		struct timespec res = { 0, 1 };

		if (!sim((long)args[0]))
			return 1;
		*val = 0;
		return !args[1] || poke(pid, args[1], &res, sizeof(res)) ? 0 : -EFAULT;
	}
	/* A dynamic program's shim makes its own timers on the kernel's
	 * clocks (without its trap, through here). */
	tgid = tgid_of(pid);
	if (!proc_static_tgid(tgid))
		return 1;
	pthread_mutex_lock(&it_lock);
	switch (nr) {
	case SYS_timer_create:
		r = pt_create(pid, tgid, args, val, &made);
		/* Killed meanwhile, its exit perhaps handled already: the
		 * timer must not outlive it (and signal whoever gets its
		 * pid). Checked under it_lock, which the exit's clean-up
		 * takes after the death. */
		if (r == 0 && made && ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &req->id))
			made->tgid = 0;
		break;
	case SYS_timerfd_create:
		r = tfd_create(req);
		*sent = r == 0;
		break;
	case SYS_timerfd_settime:
	case SYS_timerfd_gettime:
		*val = 0;
		r = tfd_call(pid, nr, args);
		break;
	default:
		r = pt_call(pid, tgid, nr, args, val);
		break;
	}
	pthread_mutex_unlock(&it_lock);
	return r;
}

/* Sends SIGALRM as each itimer comes due, and fires the POSIX timers and
 * timerfds; sleeps in slices meanwhile (a jump of the clock is seen within
 * one). */
static void *fire_itimers(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&it_lock);
	for (;;) {
		int64_t now = 0, now_rt = 0, soonest = INT64_MAX, real;
		struct timespec until;
		shmclock_info_t i;

		read_clock(false, &now);
		read_clock(true, &now_rt);
		for (size_t k = 0; k < sizeof(itimers) / sizeof(itimers[0]); k++) {
			struct itimer *t = &itimers[k];

			if (!t->tgid || !t->armed)
				continue;
			if (t->next <= now) {
				kill(t->tgid, SIGALRM);
				if (t->interval > 0) {
					t->next += t->interval;
					if (t->next <= now)
						t->next = now + t->interval;
				} else {
					t->armed = false;
					t->tgid = 0;
					continue;
				}
			}
			if (t->next - now < soonest)
				soonest = t->next - now;
		}
		for (size_t k = 0; k < nptimers; k++) {
			struct ptimer *p = &ptimers[k];
			int64_t n = p->mono ? now : now_rt;

			/* SIGEV_NONE: nothing to send, brought up to date
			 * when asked. */
			if (!p->tgid || !p->armed || p->notify == SIGEV_NONE)
				continue;
			if (p->next <= n)
				pt_fire(p, n);
			if (p->armed && sat_sub(p->next, n) < soonest)
				soonest = sat_sub(p->next, n);
		}
		for (size_t k = 0; tfds_init && k < TFD_MAX; k++) {
			struct tfd *t = &tfds[k];
			int64_t n = t->mono ? now : now_rt;

			if (t->fd < 0 || !t->armed)
				continue;
			if (t->next <= n)
				tfd_fire(t, n);
			if (t->armed && sat_sub(t->next, n) < soonest)
				soonest = sat_sub(t->next, n);
		}
		if (soonest == INT64_MAX) {
			pthread_cond_wait(&it_cond, &it_lock);
			continue;
		}
		real = SLICE_NS;
		if (!shmclock_info(clk, &i) && i.initialized && !i.paused && !i.stepped &&
		    i.scale > 0) {
			real = (int64_t)((double)soonest / i.scale);
			real = real < 1000 ? 1000 : real > SLICE_NS ? SLICE_NS : real;
		}
		clock_gettime(CLOCK_MONOTONIC, &until);
		until = ns_ts(ts_ns(&until) + real);
		pthread_cond_timedwait(&it_cond, &it_lock, &until);
	}
	return NULL;
}

/* A process has exited: its timer goes with it. */
static void itimer_exit(pid_t tgid)
{
	struct itimer *t;

	pthread_mutex_lock(&it_lock);
	t = it_find(tgid, false);
	if (t) {
		t->armed = false;
		t->tgid = 0;
	}
	pthread_mutex_unlock(&it_lock);
}

static void *answer_reads(void *arg)
{
	struct seccomp_notif *req;
	struct seccomp_notif_resp *resp;
	struct seccomp_notif_sizes sz;

	(void)arg;
	if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sz))
		return NULL;
	req = calloc(1, sz.seccomp_notif > sizeof(*req) ? sz.seccomp_notif : sizeof(*req));
	resp = calloc(1, sz.seccomp_notif_resp > sizeof(*resp) ? sz.seccomp_notif_resp
							       : sizeof(*resp));
	while (req && resp) {
		int64_t ns;
		long nr, val = 0;
		bool ok = true;
		pid_t pid;

		memset(req, 0, sz.seccomp_notif);
		if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, req)) {
			if (errno == EINTR || errno == ENOENT)
				continue;
			break;
		}
		memset(resp, 0, sz.seccomp_notif_resp);
		resp->id = req->id;
		nr = req->data.nr;
		pid = (pid_t)req->pid;
		/* The caller may be gone and its id taken: the answer is
		 * written only while the notification is live. */
		if (ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &req->id))
			continue;
		if (nr == SYS_clock_gettime && sim((long)req->data.args[0]) &&
		    read_clock(is_rt((long)req->data.args[0]), &ns)) {
			struct timespec ts = ns_ts(ns);

			ok = poke(pid, req->data.args[1], &ts, sizeof(ts));
		} else if (nr == SYS_gettimeofday && sim(CLOCK_REALTIME) && read_clock(true, &ns)) {
			struct timespec ts = ns_ts(ns);
			struct timeval tv = { ts.tv_sec, ts.tv_nsec / 1000 };

			ok = !req->data.args[0] || poke(pid, req->data.args[0], &tv, sizeof(tv));
			if (req->data.args[1]) {
				uint64_t z = 0;

				poke(pid, req->data.args[1], &z, sizeof(z));
			}
		} else if (nr == SYS_time && sim(CLOCK_REALTIME) && read_clock(true, &ns)) {
			time_t t = ns_ts(ns).tv_sec;

			if (req->data.args[0])
				ok = poke(pid, req->data.args[0], &t, sizeof(t));
			resp->val = t;
		} else if ((nr == SYS_alarm || nr == SYS_setitimer || nr == SYS_getitimer) &&
			   answer_itimer(pid, nr, (const uint64_t *)req->data.args, &val, &ok)) {
			resp->val = val;
		} else if (nr == SYS_timer_create || nr == SYS_timer_settime ||
			   nr == SYS_timer_gettime || nr == SYS_timer_getoverrun ||
			   nr == SYS_timer_delete || nr == SYS_timerfd_create ||
			   nr == SYS_timerfd_settime || nr == SYS_timerfd_gettime ||
			   nr == SYS_clock_getres) {
			bool sent;
			int r = answer_timer(req, &val, &sent);

			if (sent)
				continue;
			if (r == 1)
				resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
			else if (r < 0)
				resp->error = r;
			else
				resp->val = val;
		} else {
			/* Not a simulated clock: the kernel's call. */
			resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
		}
		if (!ok)
			resp->error = -EFAULT;
		ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, resp);
	}
	free(req);
	free(resp);
	return NULL;
}

/* In the child: the filter, and its listener's descriptor sent to the
 * supervisor on @sock (no descriptor: reads go to the tracer). */
static int install_filter(int sock)
{
	struct sock_filter f[SHIM_FILTER_MAX];
	struct sock_fprog fp;
	char cbuf[CMSG_SPACE(sizeof(int))], one = 1;
	struct iovec iov = { &one, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	long fd;

	fp.filter = f;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -errno;
	fp.len = (unsigned short)shim_filter_build(f, SECCOMP_RET_TRACE, SECCOMP_RET_USER_NOTIF,
						   false);
	fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &fp);
	if (fd < 0) {
		fp.len = (unsigned short)shim_filter_build(f, SECCOMP_RET_TRACE, SECCOMP_RET_TRACE,
							   false);
		if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp))
			return -errno;
	} else {
		struct cmsghdr *c;

		memset(cbuf, 0, sizeof(cbuf));
		m.msg_control = cbuf;
		m.msg_controllen = sizeof(cbuf);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &(int){ (int)fd }, sizeof(int));
	}
	if (sendmsg(sock, &m, 0) != 1)
		return -errno;
	if (fd >= 0)
		close((int)fd);
	return 0;
}

/* The listener the child sent, or -1. */
static int receive_listener(int sock)
{
	char cbuf[CMSG_SPACE(sizeof(int))], one;
	struct iovec iov = { &one, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c;
	int fd = -1;

	if (recvmsg(sock, &m, MSG_CMSG_CLOEXEC) != 1)
		return -1;
	c = CMSG_FIRSTHDR(&m);
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
		memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

/*
 * The tracer process: starts the program and follows its tree until the
 * last of it has exited. Reports to shmclock-run on @report: { 0, pid }
 * once the program runs, { 1, wait status } when it exits, or { 2, exit
 * code } when it could not be run (having said why).
 */
/* ------------------------------------------------------------ escapes */

/*
 * The escape report (escapes.h): the child sets PR_SET_TSC(PR_TSC_SIGSEGV)
 * before its exec (the flag survives exec, fork and clone), so every rdtsc
 * and rdtscp of the tree faults; the tracer sees the SIGSEGV at its
 * signal-delivery stop, reads the instruction at RIP, emulates it with its
 * own counter, steps over it, counts it and suppresses the signal. Any
 * other SIGSEGV is delivered as it was. Dynamic programs of the tree (the
 * shim's) are handled here too: the tracer sees their faults first.
 */

/* Faulting addresses seen, by process (forgotten at its exec): the site. */
static struct {
	pid_t tgid;
	uint64_t rip;
	int site; /* escapes.h's slot; -1 none left, -2 the loader's */
} esc_seen[64];
static unsigned esc_nseen;

static long esc_fd_read(int fd, void *buf, unsigned long len)
{
	return read(fd, buf, len);
}

static void esc_forget(pid_t tgid)
{
	for (unsigned i = 0; i < sizeof(esc_seen) / sizeof(esc_seen[0]); i++)
		if (esc_seen[i].tgid == tgid)
			esc_seen[i].tgid = 0;
}

static void esc_count(pid_t pid, uint64_t rip, uint32_t kind)
{
	struct esc_page *pg = supervise_report;
	pid_t tgid = tgid_of(pid);
	char path[64], obj[ESC_OBJ];
	uint64_t off = rip;
	unsigned i, n = sizeof(esc_seen) / sizeof(esc_seen[0]);
	int fd, site = -1;
	bool ok = false;

	for (i = 0; i < n; i++) {
		if (esc_seen[i].tgid != tgid || esc_seen[i].rip != rip)
			continue;
		site = esc_seen[i].site;
		if (site == -2) {
			atomic_fetch_add_explicit(&pg->loader, 1, memory_order_relaxed);
			return;
		}
		atomic_fetch_add_explicit(&pg->total, 1, memory_order_relaxed);
		if (site < 0)
			atomic_fetch_add_explicit(&pg->unplaced, 1, memory_order_relaxed);
		else
			atomic_fetch_add_explicit(&pg->site[site].count, 1, memory_order_relaxed);
		return;
	}
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ok = esc_where(fd, esc_fd_read, rip, obj, sizeof(obj), &off);
		close(fd);
	}
	if (!ok) {
		snprintf(obj, sizeof(obj), "[unknown]");
		off = rip;
	}
	if (esc_is_loader(obj)) {
		atomic_fetch_add_explicit(&pg->loader, 1, memory_order_relaxed);
		site = -2;
	} else {
		site = esc_record(pg, kind, obj, off, 1);
	}
	i = esc_nseen++ % n;
	esc_seen[i].tgid = tgid;
	esc_seen[i].rip = rip;
	esc_seen[i].site = site;
}

/* At @pid's SIGSEGV stop: whether it was a trapped rdtsc(p), emulated. */
static bool esc_emulate(pid_t pid)
{
	struct user_regs_struct r;
	siginfo_t si;
	uint8_t ins[3];
	uint32_t lo, hi, aux = 0, kind = 0;

	if (!supervise_report || ptrace(PTRACE_GETSIGINFO, pid, NULL, &si) ||
	    si.si_code != SI_KERNEL || ptrace(PTRACE_GETREGS, pid, NULL, &r) ||
	    !peek(pid, r.rip, ins, 2) || ins[0] != 0x0f)
		return false;
	if (ins[1] == 0x31)
		kind = ESC_RDTSC;
	else if (ins[1] == 0x01 && peek(pid, r.rip + 2, ins + 2, 1) && ins[2] == 0xf9)
		kind = ESC_RDTSCP;
	else
		return false;
	/* The tracer's own counter (its TSC is readable): the point is to
	 * report the read, not to simulate the counter. */
	if (kind == ESC_RDTSCP)
		__asm__ volatile("rdtscp" : "=a"(lo), "=d"(hi), "=c"(aux));
	else
		__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	r.rax = lo;
	r.rdx = hi;
	if (kind == ESC_RDTSCP)
		r.rcx = aux;
	r.rip += kind == ESC_RDTSCP ? 3 : 2;
	if (ptrace(PTRACE_SETREGS, pid, NULL, &r))
		return false;
	esc_count(pid, r.rip - (kind == ESC_RDTSCP ? 3 : 2), kind);
	return true;
}

static void report_to(int fd, int kind, int v)
{
	int m[2] = { kind, v };

	if (fd >= 0)
		(void)!write(fd, m, sizeof(m));
}

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
	mask = clocks;
	quiet = q;
	r = shmclock_open(name, &clk);
	if (r) {
		fprintf(stderr, PROG ": clock '%s': %s\n", name, shmclock_strerror(r));
		report_to(report, 2, 1);
		return 1;
	}
	if (pipe2(rep, O_CLOEXEC) || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, lsock)) {
		fprintf(stderr, PROG ": pipe: %s\n", strerror(errno));
		report_to(report, 2, 1);
		return 1;
	}
	child = fork();
	if (child < 0) {
		fprintf(stderr, PROG ": fork: %s\n", strerror(errno));
		report_to(report, 2, 1);
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
		} else if ((r = install_filter(lsock[1]))) {
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
		report_to(report, 2, 126);
		return 126;
	}
	if (ptrace(PTRACE_SETOPTIONS, child, NULL, (void *)opts)) {
		fprintf(stderr, PROG ": %s: ptrace options: %s; not run\n", argv[0], strerror(errno));
		kill(child, SIGKILL);
		waitpid(child, NULL, __WALL);
		report_to(report, 2, 126);
		return 126;
	}
	find(child, true)->known = true;
	ptrace(PTRACE_CONT, child, NULL, NULL);
	report_to(report, 0, child);
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
	listener = receive_listener(lsock[0]);
	close(lsock[0]);
	if (listener >= 0) {
		pthread_t th;
		pthread_attr_t a;

		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&it_cond, &ca);
		if (pthread_create(&th, &a, answer_reads, NULL) ||
		    pthread_create(&th, &a, fire_itimers, NULL)) {
			fprintf(stderr, PROG ": %s: cannot start the thread that answers reads; not "
					"run\n",
				argv[0]);
			kill(child, SIGKILL);
			report_to(report, 2, 126);
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
		struct thr *t = find(pid, true);
		int sig, ev;

		if (!t)
			continue;
		if (WIFEXITED(st) || WIFSIGNALED(st)) {
			itimer_exit(pid); /* a group leader: its process is gone */
			pt_forget(pid);
			if (pid == child) {
				/* shmclock-run returns now; the tracer stays
				 * while anything of the tree lives on, so it
				 * no longer dies with shmclock-run (before the
				 * report: shmclock-run may end at once). */
				prctl(PR_SET_PDEATHSIG, 0);
				report_to(report, 1, st);
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
				on_slice_exit(pid, t);
			else
				ptrace(PTRACE_CONT, pid, NULL, NULL);
		} else if (sig == SIGTRAP && ev == PTRACE_EVENT_SECCOMP) {
			on_call(pid, t);
		} else if (sig == SIGTRAP && ev == PTRACE_EVENT_EXEC) {
			/* After exec the thread group is one thread, with the
			 * group leader's id; the others are gone, and the thread
			 * that called exec (if not the leader) is never reported
			 * again under its own id. */
			unsigned long former;

			if (!ptrace(PTRACE_GETEVENTMSG, pid, NULL, &former) && (pid_t)former != pid) {
				struct thr *f = find((pid_t)former, false);

				if (f) {
					f->used = false;
					live--;
				}
			}
			t->waiting = t->in_slice = false;
			proc_forget(pid);
			pt_forget(pid); /* POSIX timers end at exec */
			esc_forget(pid);
			if (proc_static(pid) && hide)
				hide_vdso(pid);
			ptrace(PTRACE_CONT, pid, NULL, NULL);
		} else if (sig == SIGTRAP && ev) {
			/* fork, vfork, clone: the new one is traced already,
			 * and stops on its own. */
			unsigned long msg;

			if (!ptrace(PTRACE_GETEVENTMSG, pid, NULL, &msg)) {
				struct thr *c = find((pid_t)msg, false);

				if (!c) {
					c = find((pid_t)msg, true);
					if (c) {
						c->known = false;
					}
				}
			}
			ptrace(PTRACE_CONT, pid, NULL, NULL);
		} else if (sig == SIGSEGV && esc_emulate(pid)) {
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
			if (relay_relays(sig) && tgid_of(pid) == child)
				sig = relay_deliver(pid, sig);
			if (sig && t->waiting && !t->in_slice)
				between_slices(pid, t);
			ptrace(PTRACE_CONT, pid, NULL, (void *)(long)sig);
		}
	}
	shmclock_close(clk);
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
		if (m[0] == 0) {
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
	if (m[0] == 2) {
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
