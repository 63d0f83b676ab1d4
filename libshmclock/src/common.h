/* SPDX-License-Identifier: MIT */
/* common.c: helpers every other file of libshmclock shares (names, header
 * checks, futexes, saturating arithmetic, the clock reading). */
#ifndef SHMCLOCK_COMMON_H
#define SHMCLOCK_COMMON_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <shmclock/shmclock.h> /* SHMCLOCK_NAME_MAX */

#include "sat.h" /* libshmclock/common: shmclock__sat_add, shmclock__sat_sub */
#include "segment.h"

#define SHMCLOCK_EXPORT __attribute__((visibility("default")))

#define SHMCLOCK_SHM_PREFIX "/shmclock."
#define SHMCLOCK_SHM_DIR "/dev/shm"
/* "/shmclock." + SHMCLOCK_NAME_MAX name chars + NUL, and room for a
 * temporary suffix. */
#define SHMCLOCK_PATH_MAX 128

/* 0 if `name` is a valid clock name, -EINVAL otherwise. */
int shmclock__check_name(const char *name);
/* Writes "/shmclock.<name>" (the shm_open name). Name must be valid. */
void shmclock__shm_name(char out[SHMCLOCK_PATH_MAX], const char *name);
/* Validates the header of a mapped segment of `file_size` bytes. */
int shmclock__check_header(const struct shmclock_seg *seg, int64_t file_size);

static inline int64_t shmclock__ts_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

typedef int (*shmclock__gettime_fn)(clockid_t clock, struct timespec *ts);

/*
 * The vDSO's own __vdso_clock_gettime when the kernel provides one, else
 * libc's clock_gettime. Calling the vDSO directly skips libc's wrapper on
 * the hot path, and it keeps our reads correct inside the LD_PRELOAD shim,
 * which interposes clock_gettime itself.
 */
extern shmclock__gettime_fn shmclock__gettime;

/* This process's time namespace's CLOCK_MONOTONIC offset in ns, from
 * /proc/self/timens_offsets: 0 in the initial namespace, and where the
 * file cannot be read (a kernel without time namespaces, no /proc). */
int64_t shmclock__timens_mono_offset(void);

/* CLOCK_MONOTONIC in ns: the one steady-time reading of the library and
 * the preload shim (the fast path's R2 included). */
static inline int64_t shmclock__mono_ns(void)
{
	struct timespec ts;

	/* The vDSO serves this without a system call on the usual clock sources. */
	shmclock__gettime(CLOCK_MONOTONIC, &ts);
	return shmclock__ts_ns(&ts);
}

static inline int64_t shmclock__realtime_ns(void)
{
	struct timespec ts;

	/* Not libc's clock_gettime: inside the LD_PRELOAD shim that symbol
	 * is the shim's, which would answer with simulated time. */
	shmclock__gettime(CLOCK_REALTIME, &ts);
	return shmclock__ts_ns(&ts);
}

/*
 * The time function, the one formula readers and writers share (it lives in
 * the static header because the inline fast path compiles it into callers).
 * Writers re-anchor with this very function so the new mapping equals the
 * old one at the anchor, to the nanosecond. It is monotonic in `mono`
 * (floor of a product with a non-negative factor), which the monotonicity
 * argument in writer.c relies on. A clock reading before mono_base yields
 * sim_base, never a value from before the anchor.
 */
#define shmclock__eval shmclock_static_eval

static inline bool shmclock__writer_alive(uint32_t lock_word)
{
	return (lock_word & SHMCLOCK_LOCK_TID_MASK) != 0 &&
	       !(lock_word & SHMCLOCK_LOCK_OWNER_DIED);
}

/* Initialises a process-shared robust mutex (the writer's lock, a lockstep
 * participant's slot): its owner's death is reported by the kernel, through
 * the futex word, to whoever looks. 0 or a positive errno, as pthreads. */
int shmclock__robust_mutex_init(pthread_mutex_t *m);

/* FUTEX_WAIT on a shared word, with a relative timeout in ns (INT64_MAX:
 * none; < 0: -ETIMEDOUT at once, never a wait without a bound). */
int shmclock__futex_wait(const _Atomic uint32_t *word, uint32_t val, int64_t timeout_ns);
void shmclock__futex_wake_all(_Atomic uint32_t *word);
/* FUTEX_WAIT with an absolute CLOCK_MONOTONIC deadline (INT64_MAX: none). */
int shmclock__futex_wait_until(const _Atomic uint32_t *word, uint32_t val, int64_t deadline_mono);
/* A CLOCK_MONOTONIC deadline in ns as the absolute timespec a futex wait
 * takes, in *@ts (negative: 0); NULL for INT64_MAX (no deadline). */
struct timespec *shmclock__deadline_ts(int64_t deadline_mono, struct timespec *ts);
void shmclock__futex_wake_ro(const _Atomic uint32_t *word);

static inline void shmclock__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

#endif
