/* SPDX-License-Identifier: MIT */
/* Names, header validation, futex helpers and messages. */
#define _GNU_SOURCE
#include <assert.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <shmclock/shmclock.h>

#include "common.h"

shmclock__gettime_fn shmclock__gettime = clock_gettime;

/*
 * Runs when the library is loaded, before any handle exists, so the hot
 * path reads a plain pointer that never changes afterwards; before the
 * object's other constructors (a priority): the preload shim, which embeds
 * the library, sets its own reader in its constructor (escape.c's, while
 * rdtsc traps) and must find this one done; 102: escape.c's 101 runs
 * first, to lift a counter trap inherited from the supervisor before
 * this probe reads the vDSO. glibc registers
 * the vDSO as the loaded object "linux-vdso.so.1"; RTLD_NOLOAD only looks
 * it up. Without it (another libc, an old kernel) libc's call is used.
 */
__attribute__((constructor(102))) static void resolve_vdso(void)
{
	void *h = dlopen("linux-vdso.so.1", RTLD_LAZY | RTLD_NOLOAD);
	void *f;

	if (!h)
		return;
	f = dlsym(h, "__vdso_clock_gettime");
	if (f) {
		struct timespec ts;
		shmclock__gettime_fn fn;

		/* POSIX allows the object-to-function pointer conversion dlsym needs. */
		memcpy(&fn, &f, sizeof(fn));
		if (fn(CLOCK_MONOTONIC, &ts) == 0)
			shmclock__gettime = fn;
	}
	dlclose(h);
}

SHMCLOCK_EXPORT int shmclock_check_name(const char *name)
{
	return shmclock__check_name(name);
}

int shmclock__check_name(const char *name)
{
	size_t n;

	if (!name)
		return -EINVAL;
	for (n = 0; name[n]; n++) {
		char c = name[n];

		if (n >= SHMCLOCK_NAME_MAX)
			return -EINVAL;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-'))
			return -EINVAL;
	}
	return n ? 0 : -EINVAL;
}

void shmclock__shm_name(char out[SHMCLOCK_PATH_MAX], const char *name)
{
	snprintf(out, SHMCLOCK_PATH_MAX, "%s%s", SHMCLOCK_SHM_PREFIX, name);
}

static bool all_zero(const uint8_t *p, size_t n)
{
	while (n--)
		if (*p++)
			return false;
	return true;
}

/*
 * Validate in the order chrony's cmdmon validates a request: the length
 * first (the file size, checked before mapping by the caller and again
 * here), then the identity (magic, version), then the layout and the
 * reserved bytes. Only the header, the gap before the next line and the
 * tail are immutable after creation, so only they are checked for zero.
 */
int shmclock__check_header(const struct shmclock_seg *seg, int64_t file_size)
{
	if (file_size != SHMCLOCK_SEG_SIZE)
		return -EPROTO;
	if (seg->magic != SHMCLOCK_MAGIC)
		return -EPROTO;
	if (seg->abi_version != SHMCLOCK_ABI_VERSION)
		return -EPROTO;
	if (seg->size != SHMCLOCK_SEG_SIZE)
		return -EPROTO;
	if (seg->record_off != offsetof(struct shmclock_seg, seq) ||
	    seg->backup_off != offsetof(struct shmclock_seg, b_flags))
		return -EPROTO;
	if (!all_zero(seg->reserved0, sizeof(seg->reserved0)) ||
	    !all_zero(seg->reserved6, sizeof(seg->reserved6)) ||
	    !all_zero(seg->tail, sizeof(seg->tail)))
		return -EPROTO;
	return 0;
}

int64_t shmclock__timens_mono_offset(void)
{
	char buf[256], *line;
	long long sec, nsec;
	ssize_t n;
	int fd = open("/proc/self/timens_offsets", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	/* "monotonic <sec> <nsec>" (and a boottime line, which no clock of
	 * ours reads). */
	line = strstr(buf, "monotonic");
	if (line && sscanf(line, "monotonic %lld %lld", &sec, &nsec) == 2)
		return (int64_t)sec * 1000000000 + nsec;
	return 0;
}

int shmclock__robust_mutex_init(pthread_mutex_t *m)
{
	pthread_mutexattr_t a;
	int r;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	r = pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
	return r;
}

int shmclock__futex_wait(const _Atomic uint32_t *word, uint32_t val, int64_t timeout_ns)
{
	struct timespec ts, *tsp = NULL;
	long r;

	/* A timeout already past returns at once: a caller whose arithmetic
	 * overran its deadline must not sleep until somebody wakes it (the
	 * lockstep fallback once did, issue 30). */
	if (timeout_ns < 0)
		return -ETIMEDOUT;
	if (timeout_ns != INT64_MAX) {
		ts.tv_sec = (time_t)(timeout_ns / 1000000000);
		ts.tv_nsec = (long)(timeout_ns % 1000000000);
		tsp = &ts;
	}
	/* Shared (not FUTEX_PRIVATE): the word is in a mapping other processes
	 * share. FUTEX_WAIT only reads the word, so a PROT_READ mapping works. */
	r = syscall(SYS_futex, word, FUTEX_WAIT, val, tsp, NULL, 0);
	return r == 0 ? 0 : -errno;
}

void shmclock__futex_wake_all(_Atomic uint32_t *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

SHMCLOCK_EXPORT const char *shmclock_strerror(int err)
{
	switch (err) {
	case 0:
		return "success";
#define SHMCLOCK_STRERROR_CASE(name, msg) \
	case -name:                       \
		return msg;
	SHMCLOCK_ERRNO_MAP(SHMCLOCK_STRERROR_CASE)
#undef SHMCLOCK_STRERROR_CASE
	default:
		return err < 0 ? strerror(-err) : "unknown status";
	}
}

/* A source's time either arrives in steps or runs between them: not both. */
#define SHMCLOCK_SOURCE_FLAGS_OK(value, id, name, alias, flags, help)                          \
	static_assert(((flags) & (SHMCLOCK_SOURCE_F_STEPPED | SHMCLOCK_SOURCE_F_CONTINUOUS)) != \
			      (SHMCLOCK_SOURCE_F_STEPPED | SHMCLOCK_SOURCE_F_CONTINUOUS),      \
		      "the " #name " source is both stepped and continuous");
SHMCLOCK_SOURCE_MAP(SHMCLOCK_SOURCE_FLAGS_OK)
#undef SHMCLOCK_SOURCE_FLAGS_OK

SHMCLOCK_EXPORT const char *shmclock_source_name(int source)
{
	/* A value in the map twice is a duplicate case: it does not compile. */
	switch (source) {
#define SHMCLOCK_SOURCE_NAME_CASE(value, id, name, alias, flags, help) \
	case SHMCLOCK_SOURCE_##id:                                      \
		return #name;
	SHMCLOCK_SOURCE_MAP(SHMCLOCK_SOURCE_NAME_CASE)
#undef SHMCLOCK_SOURCE_NAME_CASE
	case SHMCLOCK_SOURCE_NONE:
		return "none";
	default:
		return "unknown";
	}
}

SHMCLOCK_EXPORT const char *shmclock_version(void)
{
	return SHMCLOCK_VERSION_STRING;
}

struct timespec *shmclock__deadline_ts(int64_t deadline_mono, struct timespec *ts)
{
	if (deadline_mono == INT64_MAX)
		return NULL;
	if (deadline_mono < 0)
		deadline_mono = 0;
	ts->tv_sec = (time_t)(deadline_mono / 1000000000);
	ts->tv_nsec = (long)(deadline_mono % 1000000000);
	return ts;
}

int shmclock__futex_wait_until(const _Atomic uint32_t *word, uint32_t val, int64_t deadline_mono)
{
	struct timespec ts, *tsp = shmclock__deadline_ts(deadline_mono, &ts);
	long r;

	/* FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC deadline, so a
	 * wake-up computed from the mapping does not drift with our own
	 * latency. Shared, read-only: as in shmclock__futex_wait. */
	r = syscall(SYS_futex, word, FUTEX_WAIT_BITSET, val, tsp, NULL, FUTEX_BITSET_MATCH_ANY);
	return r == 0 ? 0 : -errno;
}

/*
 * FUTEX_WAKE only looks the word up (the kernel takes a read reference), so
 * it works on a PROT_READ mapping and changes nothing there. Used to cancel
 * this process's sleepers; sleepers elsewhere wake, re-check and sleep on.
 */
void shmclock__futex_wake_ro(const _Atomic uint32_t *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}
