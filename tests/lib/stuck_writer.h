/* SPDX-License-Identifier: MIT */
/*
 * A writer stopped in the middle of an update, made by hand in its segment
 * (what a SIGSTOP at the wrong instruction would leave): for the library's
 * and the shim's tests of what readers do meanwhile.
 */
#ifndef SHMCLOCK_TEST_STUCK_WRITER_H
#define SHMCLOCK_TEST_STUCK_WRITER_H

#include <criterion/criterion.h>
#include <shmclock/static/shmclock.h>

#include "../helpers.h"
#include "segment.h"

/* Puts a live writer's clock into the state of an update stopped right
 * after its anchor (writer.c, commit_begin after W2a): seq odd, anchor
 * published. Returns the writable mapping. */
static inline struct shmclock_seg *stop_mid_update(const char *name, int64_t *anchor)
{
	struct shmclock_seg *seg = map_clock_rw(name);

	cr_assert_not_null(seg);
	atomic_fetch_add(&seg->seq, 1);
	atomic_thread_fence(memory_order_seq_cst);
	*anchor = now_mono();
	atomic_store(&seg->anchor_mono_ns, *anchor);
	return seg;
}

/* ... and completes it as a pause at the anchor would (W4, W5). */
static inline void finish_as_pause(struct shmclock_seg *seg, int64_t anchor)
{
	int64_t v = shmclock_static_eval(atomic_load(&seg->mono_base), atomic_load(&seg->sim_base),
					 atomic_load(&seg->mult), anchor);

	atomic_store(&seg->mono_base, anchor);
	atomic_store(&seg->sim_base, v);
	atomic_store(&seg->mult, 0);
	atomic_store(&seg->flags, atomic_load(&seg->flags) | SHMCLOCK_F_PAUSED);
	atomic_fetch_add(&seg->seq, 1);
	munmap(seg, SHMCLOCK_SEG_SIZE);
}

#endif
