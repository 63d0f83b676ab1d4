/* SPDX-License-Identifier: MIT */
/*
 * The shim's own descriptors, invisible to the program: one per simulated
 * timerfd (timers.c), kept at the top of RLIMIT_NOFILE, close-on-exec.
 *
 * A program may close, dup2 or close_range over any number, including
 * ones it never opened: without the shim those numbers are free. So every
 * call that can take a descriptor away is interposed and does exactly what
 * it would do without the shim:
 *   - close, fcntl, dup, dup2 or dup3 *of* one of ours: EBADF (not open,
 *     as far as the program knows);
 *   - dup2 or dup3 *onto* one of ours: ours moves to another free number
 *     first, then the program's call runs;
 *   - close_range and closefrom: the range is closed around ours;
 *   - dup and fcntl(F_DUPFD*): when the kernel would have handed out one
 *     of our numbers without the shim, ours moves and the program gets it.
 * The shim itself never reads, writes or closes a number the program owns.
 *
 * Which numbers are ours: a bitmap, lock-free to read (close() is
 * async-signal-safe and must stay so); chunks are mapped on demand and
 * never freed. A child made by vfork, posix_spawn or a raw clone shares
 * this memory but not the descriptor table: there (getpid() is not the
 * shim's) every call passes through untouched.
 *
 * Not reachable: descriptors closed by raw system calls, and read/write
 * on our numbers (the kernel says EBADF to neither, as they are open).
 */
/* fcntl and fcntl64 are both defined here, by those names: the 64-bit
 * file-offset redirect of <fcntl.h> would name both fcntl64. (On 64-bit
 * targets they are one call.) */
#undef _FILE_OFFSET_BITS
#include "preload.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_UNSHARE
#define CLOSE_RANGE_UNSHARE (1U << 1)
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* Highest number the shim puts its descriptors at: the soft limit, but no
 * higher than FD_SETSIZE. The kernel sizes a process's table to its highest
 * descriptor, and select() reads as many bits of the caller's sets as the
 * table has: a program's select(sysconf(_SC_OPEN_MAX), &fd_set) reads its
 * 128 bytes and no more only while the table is not larger. */
#define FD_TOP_MAX FD_SETSIZE

#define CHUNK_BITS (8 * 4096) /* one page per chunk */
#define NCHUNKS 4096          /* 128 Mi descriptors */
#define WORD_BITS 64

static _Atomic(_Atomic uint64_t *) own_map[NCHUNKS];
static _Atomic int own_count; /* descriptors marked ours */
pid_t shim_pid;

static int (*r_close)(int);
static int (*r_dup)(int);
static int (*r_dup2)(int, int);
static int (*r_dup3)(int, int, int);
static int (*r_fcntl)(int, int, ...);
static int (*r_close_range)(unsigned, unsigned, int);
static void (*r_closefrom)(int);
static _Atomic bool resolved;

/* Resolved at the first call, whoever makes it: a program's constructor may
 * close a descriptor before the shim is set up. */
static void fds_resolve(void)
{
	if (atomic_load_explicit(&resolved, memory_order_acquire))
		return;
	RESOLVE(r_close, "close");
	RESOLVE(r_dup, "dup");
	RESOLVE(r_dup2, "dup2");
	RESOLVE(r_dup3, "dup3");
	RESOLVE(r_fcntl, "fcntl");
	RESOLVE_OPT(r_close_range, "close_range");
	RESOLVE_OPT(r_closefrom, "closefrom");
	/* Release pairs with the acquire above: the pointers are seen set. */
	atomic_store_explicit(&resolved, true, memory_order_release);
}

int shim_real_close(int fd)
{
	fds_resolve();
	return r_close(fd);
}

/* ------------------------------------------------------------ the set */

static _Atomic uint64_t *word_of(int fd, bool make)
{
	unsigned c = (unsigned)fd / CHUNK_BITS;
	_Atomic uint64_t *w;

	if (fd < 0 || c >= NCHUNKS)
		return NULL;
	/* Acquire pairs with the release of the CAS below: a chunk seen is a
	 * mapped, zeroed chunk. */
	w = atomic_load_explicit(&own_map[c], memory_order_acquire);
	if (!w && make) {
		void *m = mmap(NULL, CHUNK_BITS / 8, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		_Atomic uint64_t *expect = NULL;

		if (m == MAP_FAILED)
			return NULL;
		w = m;
		if (!atomic_compare_exchange_strong_explicit(&own_map[c], &expect, w,
							     memory_order_release,
							     memory_order_acquire)) {
			munmap(m, CHUNK_BITS / 8);
			w = expect;
		}
	}
	return w ? w + ((unsigned)fd % CHUNK_BITS) / WORD_BITS : NULL;
}

bool shim_fd_is_own(int fd)
{
	_Atomic uint64_t *w;

	if (!atomic_load_explicit(&own_count, memory_order_relaxed))
		return false;
	w = word_of(fd, false);
	return w && (atomic_load_explicit(w, memory_order_relaxed) >> ((unsigned)fd % WORD_BITS) & 1);
}

static void mark(int fd, bool on)
{
	_Atomic uint64_t *w = word_of(fd, on);
	uint64_t bit = 1ull << ((unsigned)fd % WORD_BITS);

	if (!w)
		return;
	if (on) {
		atomic_fetch_or_explicit(w, bit, memory_order_relaxed);
		atomic_fetch_add_explicit(&own_count, 1, memory_order_relaxed);
	} else if (atomic_fetch_and_explicit(w, ~bit, memory_order_relaxed) & bit) {
		atomic_fetch_sub_explicit(&own_count, 1, memory_order_relaxed);
	}
}

/* The lowest of ours in [lo, hi], or -1. */
static int own_next(int lo, int hi)
{
	if (lo < 0)
		lo = 0;
	for (int fd = lo; fd <= hi && fd >= 0;) {
		unsigned c = (unsigned)fd / CHUNK_BITS;
		_Atomic uint64_t *w;
		uint64_t bits;

		if (c >= NCHUNKS)
			return -1;
		w = atomic_load_explicit(&own_map[c], memory_order_acquire);
		if (!w) {
			fd = (int)((c + 1) * CHUNK_BITS);
			continue;
		}
		bits = atomic_load_explicit(&w[((unsigned)fd % CHUNK_BITS) / WORD_BITS],
					    memory_order_relaxed) >>
		       ((unsigned)fd % WORD_BITS);
		if (bits) {
			int found = fd + __builtin_ctzll(bits);

			return found <= hi ? found : -1;
		}
		fd = (fd / WORD_BITS + 1) * WORD_BITS;
	}
	return -1;
}

/* The calls come from the process whose descriptors the set describes. */
static bool mine(void)
{
	return getpid() == shim_pid;
}

/* ------------------------------------------------------------ ours */

/* A free number near the top of the table for a copy of @fd (close-on-exec),
 * or -1. F_DUPFD gives the lowest free number at or above its argument:
 * asked from just below our lowest downwards, the first answer is free and
 * high. */
static int dup_high(int fd)
{
	struct rlimit rl;
	int top = FD_TOP_MAX, n, r;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < (rlim_t)top)
		top = (int)rl.rlim_cur;
	/* From the top down, in growing steps: the first answer is the lowest
	 * free number at or above a point near the top. */
	for (int step = 1, n0 = top - 1; n0 >= 0; n0 -= step, step = step < 64 ? step * 2 : 64) {
		n = n0;
		r = r_fcntl(fd, F_DUPFD_CLOEXEC, n);
		if (r >= 0)
			return r;
		if (errno != EMFILE && errno != EINVAL)
			return -1;
	}
	return -1;
}

int shim_fd_adopt(int fd)
{
	int own;

	fds_resolve();
	own = dup_high(fd);
	if (own >= 0)
		mark(own, true);
	return own;
}

int shim_fd_move(int fd)
{
	int to = dup_high(fd);

	if (to >= 0)
		mark(to, true);
	shim_fd_release(fd);
	return to;
}

void shim_fd_release(int fd)
{
	mark(fd, false);
	syscall(SYS_close, fd); /* not a cancellation point */
}

void shim_fd_forget(int fd)
{
	mark(fd, false);
}

/* Before a call that closes the program's descriptors [lo, hi]: the
 * simulated timerfds among them are forgotten. Before, not after: once the
 * number is free, another thread's timerfd_create may get it. */
static void closing(int lo, int hi)
{
	if (shim_timers_live())
		shim_timers_closed(lo, hi);
}

/*
 * dup(@fd) or fcntl(@fd, F_DUPFD*, @min) gave @got (or failed with @err,
 * EMFILE when nothing is free): without the shim it would have given the
 * lowest of our numbers at or above @min below @got, had there been one.
 * Ours moves and the program gets it. F_DUPFD again, not dup3 onto it: a
 * number another thread has taken meanwhile is never closed under it.
 */
static int dup_as_without(int fd, int min, bool cloexec, int got, int err)
{
	int want, r;

	if (!atomic_load_explicit(&own_count, memory_order_relaxed) || !mine())
		goto out;
	want = own_next(min, got >= 0 ? got - 1 : INT32_MAX);
	if (want < 0)
		goto out;
	shim_timers_claim(want);
	r = r_fcntl(fd, cloexec ? F_DUPFD_CLOEXEC : F_DUPFD, want);
	if (r < 0)
		goto out;
	if (got >= 0)
		r_close(got);
	return r;
out:
	errno = err;
	return got;
}

/* ------------------------------------------------------------ interposed */

static int ebadf(void)
{
	errno = EBADF;
	return -1;
}

EXPORT int close(int fd)
{
	fds_resolve();
	if (shim_fd_is_own(fd) && mine())
		return ebadf();
	/* Closed even when interrupted (Linux); EBADF: it was not open. */
	closing(fd, fd);
	return r_close(fd);
}

EXPORT int dup(int fd)
{
	int r;

	fds_resolve();
	if (shim_fd_is_own(fd) && mine())
		return ebadf();
	r = r_dup(fd);
	if (r >= 0 || errno == EMFILE)
		r = dup_as_without(fd, 0, false, r, errno);
	if (r >= 0 && shim_timers_live())
		shim_timers_dup(fd, r);
	return r;
}

/*
 * dup2, dup3, close_range and closefrom name numbers the program need not
 * own yet (without the shim they are free), and one of them may be where a
 * copy of ours is being placed at that very moment: the kernel has handed
 * the number out, its bit is not set yet. So they run under the timers'
 * lock, which every placement (and every release) holds: when they look,
 * each of our numbers is placed and marked or not there at all, and none is
 * placed until they are done. Signals are blocked while it is held, so a
 * handler calling them cannot wait for its own thread. close() of a number
 * the program does not own races with the program's own threads anyway: it
 * stays lock-free.
 */
EXPORT int dup2(int old, int new)
{
	sigset_t o;
	int r, err;

	fds_resolve();
	if (!mine())
		return r_dup2(old, new);
	shim_timers_lock(&o);
	if (shim_fd_is_own(old)) {
		r = -1;
		err = EBADF;
	} else {
		if (old != new) {
			shim_timers_claim_locked(new); /* ours at @new moves first */
			if (r_fcntl(old, F_GETFD) >= 0) /* else dup2 fails, new stays */
				shim_timers_closed_locked(new, new);
		}
		r = r_dup2(old, new);
		err = errno;
		if (r >= 0)
			shim_timers_dup_locked(old, new);
	}
	shim_timers_unlock(&o);
	errno = err;
	return r;
}

EXPORT int dup3(int old, int new, int flags)
{
	sigset_t o;
	int r, err;

	fds_resolve();
	if (old == new || !mine()) /* EINVAL before any descriptor is looked at */
		return r_dup3(old, new, flags);
	shim_timers_lock(&o);
	if (shim_fd_is_own(old)) {
		r = -1;
		err = EBADF;
	} else {
		shim_timers_claim_locked(new);
		if (r_fcntl(old, F_GETFD) >= 0 && !(flags & ~O_CLOEXEC))
			shim_timers_closed_locked(new, new);
		r = r_dup3(old, new, flags);
		err = errno;
		if (r >= 0)
			shim_timers_dup_locked(old, new);
	}
	shim_timers_unlock(&o);
	errno = err;
	return r;
}

static int fcntl_any(int fd, int cmd, void *arg)
{
	int r;

	fds_resolve();
	if (shim_fd_is_own(fd) && mine())
		return ebadf();
	r = r_fcntl(fd, cmd, arg);
	if ((cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) && (r >= 0 || errno == EMFILE))
		r = dup_as_without(fd, (int)(intptr_t)arg, cmd == F_DUPFD_CLOEXEC, r, errno);
	if ((cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) && r >= 0 && shim_timers_live())
		shim_timers_dup(fd, r);
	return r;
}

/* glibc reads the optional argument as a pointer too. */
EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return fcntl_any(fd, cmd, arg);
}

EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return fcntl_any(fd, cmd, arg);
}

static int real_close_range(unsigned lo, unsigned hi, int flags)
{
	if (r_close_range)
		return r_close_range(lo, hi, flags);
	return (int)syscall(SYS_close_range, lo, hi, flags);
}

/* close_range(2) around ours. */
static int close_around(unsigned lo, unsigned hi, int flags)
{
	int r = 0;

	if (!atomic_load_explicit(&own_count, memory_order_relaxed) || !mine() || lo > hi)
		return real_close_range(lo, hi, flags);
	if (flags & CLOSE_RANGE_UNSHARE) {
		/* Unshared once, before the pieces. */
		if (unshare(CLONE_FILES))
			return -1;
		flags &= ~(int)CLOSE_RANGE_UNSHARE;
	}
	for (unsigned at = lo;;) {
		int own = lo > (unsigned)INT32_MAX ? -1
			  : own_next((int)at, hi > (unsigned)INT32_MAX ? INT32_MAX : (int)hi);
		unsigned end = own < 0 ? hi : (unsigned)own - 1;

		if (own != (int)at && end >= at && real_close_range(at, end, flags))
			r = -1;
		if (own < 0 || (unsigned)own >= hi)
			break;
		at = (unsigned)own + 1;
	}
	return r;
}

EXPORT int close_range(unsigned lo, unsigned hi, int flags)
{
	sigset_t o;
	int r, err;

	fds_resolve();
	if (!mine())
		return real_close_range(lo, hi, flags);
	shim_timers_lock(&o); /* see dup2 */
	/* CLOSE_RANGE_CLOEXEC closes nothing; bad flags or range neither. */
	if (lo <= hi && !(flags & ~(int)(CLOSE_RANGE_UNSHARE | CLOSE_RANGE_CLOEXEC)) &&
	    !(flags & CLOSE_RANGE_CLOEXEC))
		shim_timers_closed_locked((int)(lo > (unsigned)INT32_MAX ? INT32_MAX : lo),
					  (int)(hi > (unsigned)INT32_MAX ? INT32_MAX : hi));
	r = close_around(lo, hi, flags);
	err = errno;
	shim_timers_unlock(&o);
	errno = err;
	return r;
}

EXPORT void closefrom(int lo)
{
	sigset_t o;
	int err = errno;

	fds_resolve();
	if (lo < 0)
		lo = 0;
	if (!mine()) {
		if (real_close_range((unsigned)lo, ~0U, 0) && r_closefrom)
			r_closefrom(lo);
		return;
	}
	shim_timers_lock(&o); /* see dup2 */
	shim_timers_closed_locked(lo, INT32_MAX);
	/* No close_range (a kernel before 5.9): libc's, or one by one around ours. */
	if (close_around((unsigned)lo, ~0U, 0)) {
		if (!atomic_load_explicit(&own_count, memory_order_relaxed) && r_closefrom) {
			r_closefrom(lo);
		} else {
			struct rlimit rl;
			int top = 1 << 20;

			if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < (rlim_t)top)
				top = (int)rl.rlim_cur;
			for (int fd = lo; fd < top; fd++)
				if (!shim_fd_is_own(fd))
					r_close(fd);
		}
	}
	shim_timers_unlock(&o);
	errno = err; /* closefrom reports nothing */
}
