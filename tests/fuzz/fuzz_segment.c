/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: arbitrary bytes as a segment file, opened and read the way
 * every reader does (shmclock_open, shmclock_now, shmclock_now_unix,
 * shmclock_info). Beyond not crashing: a segment is accepted only with a
 * valid header, and reading never changes a byte of it.
 *
 * One adjustment keeps each run short: a segment whose seq is odd while its
 * lock word names a live writer that has not published the anchor of its
 * update makes a reader wait up to a second for that writer (by design);
 * such inputs get the lock word's OWNER_DIED bit, which sends the reader
 * down the dead-writer path (the backup copy) instead. With an anchor
 * published the reader does not wait (the stuck-writer path): left as is.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <shmclock/shmclock.h>
#include <shmclock/static/shmclock.h>
#include <shmclock/time.h>

#include "fuzz.h"
#include "common.h"
#include "segment.h"

static char name[64], shm[80];

static void cleanup(void)
{
	shm_unlink(shm);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static _Alignas(SHMCLOCK_CACHELINE) uint8_t before[SHMCLOCK_SEG_SIZE * 2];
	static uint8_t after[sizeof(before)];
	shmclock_t *clk = NULL;
	static const int64_t targets[] = { INT64_MIN, -1, 0, 1000000000, INT64_MAX / 2, INT64_MAX };
	shmclock_info_t info;
	int64_t t;
	int fd, r;

	if (size > sizeof(before))
		return 0;
	if (!name[0]) {
		snprintf(name, sizeof(name), "fuzz-segment-%d", (int)getpid());
		snprintf(shm, sizeof(shm), "/shmclock.%s", name);
		atexit(cleanup);
		fuzz_cleanup_hook = cleanup;
	}
	memcpy(before, data, size);
	if (size >= offsetof(struct shmclock_seg, b_mono_base) + 8) {
		uint32_t seq, lock;
		int64_t anchor, b_mono_base;

		memcpy(&seq, before + offsetof(struct shmclock_seg, seq), 4);
		memcpy(&lock, before + offsetof(struct shmclock_seg, writer_lock), 4);
		memcpy(&anchor, before + offsetof(struct shmclock_seg, anchor_mono_ns), 8);
		memcpy(&b_mono_base, before + offsetof(struct shmclock_seg, b_mono_base), 8);
		if ((seq & 1) && (lock & SHMCLOCK_LOCK_TID_MASK) && !(lock & SHMCLOCK_LOCK_OWNER_DIED) &&
		    anchor <= b_mono_base) {
			lock |= SHMCLOCK_LOCK_OWNER_DIED;
			memcpy(before + offsetof(struct shmclock_seg, writer_lock), &lock, 4);
		}
	}
	fd = shm_open(shm, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	FUZZ_CHECK(fd >= 0, "shm_open %s: %s", shm, strerror(errno));
	FUZZ_CHECK(write(fd, before, size) == (ssize_t)size, "write: %s", strerror(errno));

	r = shmclock_open(name, &clk);
	if (r == 0) {
		const struct shmclock_seg *s = (const void *)before;

		FUZZ_CHECK(size == SHMCLOCK_SEG_SIZE && s->magic == SHMCLOCK_MAGIC &&
				   s->abi_version == SHMCLOCK_ABI_VERSION,
			   "accepted a segment with a bad header (%zu bytes)", size);
		r = shmclock_now(clk, &t);
		FUZZ_CHECK(r == 0 || r == -ESTALE || r == -ENODATA || r == -EAGAIN,
			   "shmclock_now returned %d", r);
		r = shmclock_now_unix(clk, &t);
		FUZZ_CHECK(r == 0 || r == -ESTALE || r == -ENODATA || r == -EAGAIN,
			   "shmclock_now_unix returned %d", r);
		r = shmclock_now_monotonic(clk, &t);
		FUZZ_CHECK(r == 0 || r == -ESTALE || r == -ENODATA || r == -EAGAIN,
			   "shmclock_now_monotonic returned %d", r);
		r = shmclock_static_now(clk, &t);
		FUZZ_CHECK(r == 0 || r == -ESTALE || r == -ENODATA || r == -EAGAIN,
			   "shmclock_static_now returned %d", r);
		r = shmclock_info(clk, &info);
		FUZZ_CHECK(r == 0 || r == -EAGAIN, "shmclock_info returned %d", r);
		if (r == 0)
			FUZZ_CHECK(info.heartbeat_age_ns >= -1, "heartbeat age %lld",
				   (long long)info.heartbeat_age_ns);
		/* The conversions do arithmetic on every field they read. */
		for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
			shmclock_sim_time_t st = { targets[i] };
			shmclock_steady_time_t steady;
			shmclock_sys_time_t sys;

			r = shmclock_sim_to_steady(clk, st, &steady);
			FUZZ_CHECK(r == 0 || r == -ENODATA || r == -EAGAIN || r == -EOVERFLOW,
				   "shmclock_sim_to_steady returned %d", r);
			r = shmclock_sim_to_sys(clk, st, &sys);
			FUZZ_CHECK(r == 0 || r == -EAGAIN || r == -EOPNOTSUPP,
				   "shmclock_sim_to_sys returned %d", r);
		}
		shmclock_close(clk);
	} else if (r == -EXDEV) {
		/* A valid header whose writer's time namespace offset is not
		 * this process's (issue 52): refused, never read off. */
		int64_t off;

		FUZZ_CHECK(size == SHMCLOCK_SEG_SIZE, "-EXDEV for a segment of %zu bytes", size);
		memcpy(&off, before + offsetof(struct shmclock_seg, writer_timens_mono_ns), 8);
		FUZZ_CHECK(off != 0, "-EXDEV for a writer in this time namespace");
	} else if (r == -ESTALE) {
		/* A copy claiming a live writer (issue 56): the writer line
		 * names another file, and the lock word a live holder. */
		uint64_t ino;
		uint32_t lock;

		FUZZ_CHECK(size == SHMCLOCK_SEG_SIZE, "-ESTALE for a segment of %zu bytes", size);
		memcpy(&ino, before + offsetof(struct shmclock_seg, writer_file_ino), 8);
		memcpy(&lock, before + offsetof(struct shmclock_seg, writer_lock), 4);
		FUZZ_CHECK(ino != 0 && shmclock__writer_alive(lock),
			   "-ESTALE at open for a segment that names no file or no live writer");
	} else {
		FUZZ_CHECK(r == -EPROTO, "shmclock_open returned %d, not -EPROTO", r);
	}
	FUZZ_CHECK(pread(fd, after, sizeof(after), 0) == (ssize_t)size &&
			   memcmp(before, after, size) == 0,
		   "reading changed the segment");
	close(fd);
	return 0;
}
