/* SPDX-License-Identifier: MIT */
/*
 * The read side of the segment protocol, all of it: the record and backup
 * loads, the complete snapshot, the wait for a writer caught mid-update
 * (dead, or alive and stuck), and info. The fast path (R1-R6) is inlined
 * into the reader's handle (reader.c, now_fast) for speed; it follows the
 * same steps and falls back here.
 *
 * Read protocol (a seqlock with a backup copy for a writer that died):
 *
 *   s1 = seq (acquire)                 odd: the writer is mid-update -> slow path  R1
 *   mono = clock_gettime(MONOTONIC)    vDSO, no system call                      R2
 *   params (relaxed)                   all on the record cache line              R3
 *   writer_lock (relaxed)              tells the caller the writer is gone       R4
 *   fence (acquire)                                                              R5
 *   s2 = seq (relaxed)                 s1 != s2: retry                           R5
 *   value = eval(params, mono)                                                   R6
 *
 * Slow path with a dead writer (wait_writer): writer_lock shows OWNER_DIED
 * (S1), backup loads (S2), mono = clock (S3), fence (acquire) and seq still
 * s1 (S4), else retry.
 *
 * Slow path with a live writer mid-update: fence (acquire, T0), next_seq
 * and the published anchor (T1), mono = clock (T2), the backup loads (or
 * the next line's, below), fence (acquire) and seq still s1 (T3); if the
 * anchor is this update's (T4: later than the backup's mono_base), the
 * value is the backup's function at min(mono, anchor): the last committed
 * time, frozen at the instant the update takes effect (an update that
 * keeps the function publishes SHMCLOCK_ANCHOR_NONE: the cap is then no
 * cap, and the value is that function at mono, which is also the
 * function after the commit: writer.c, W2n). Else the writer is
 * within the few instructions between its odd store and W2a: spin, yield,
 * then sleep on the change futex, at most SHMCLOCK_STUCK_NS.
 *
 * Decided ahead (segment.h, the next line; writer.c, N1 N2): when next_seq
 * is s1 and the clock has reached the anchor, the value is the next line's
 * function at mono, whether the writer is alive (T4) or dead (S5): readers
 * switch to a change at its instant by themselves, however late the writer
 * commits it. A live writer's update that is open and undecided
 * (next_seq == s1 + 1: freeze_at) holds a reader past its instant at the
 * anchor, and the read says so (-ESTALE: held).
 *
 * Why the frozen value is safe (T4): a reader that returned a value with
 * the old mapping read its clock before the odd store was visible to it,
 * so before this reader's T2 (which follows its R1 load of the odd seq):
 * its value is at most old(min(mono, anchor)) when mono <= anchor, and at
 * most old(anchor) otherwise, since its clock was before the writer's
 * anchor too (the argument below). Every later read, with the new mapping,
 * gets new(t) for a t >= anchor, and new(anchor) = old(anchor). A stuck
 * writer therefore freezes readers' time; it never makes it jump back, and
 * it never makes a reader wait.
 *
 * R1..R6 and S1..S4 are the reader's steps in the Promela model next to
 * this file (seqlock.pml); spin checks it in CI (tests/lib/spin_check.sh).
 *
 * Why time cannot go backwards across readers: the writer makes seq odd,
 * executes a full fence and only then reads the clock to anchor the new
 * mapping (writer.c). A reader that returns a value computed with the old
 * mapping read seq2 before the odd store was visible, and it read its clock
 * before seq2, so its clock reading is earlier than the writer's anchor:
 *
 *   reader:  mono_r ........ seq2 (still even)
 *   writer:                          seq odd | fence | mono_w = clock
 *   => mono_r < mono_w => old(mono_r) <= old(mono_w) == new(mono_w) <= new(later)
 *
 * A reader that uses the new mapping read seq1 after the even store, so its
 * clock reading is after mono_w. Both halves need the clock to agree with
 * real-time order across CPUs, which CLOCK_MONOTONIC guarantees.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <string.h>

#include <shmclock/shmclock.h>

#include "protocol.h"

/* Spin this many times on an odd seq, then yield, then sleep on the futex
 * in slices that double up to a cap (a commit wakes us at once anyway; the
 * slices only bound how long a lost wake-up could cost). */
#define SPIN_LIMIT 128
#define YIELD_NS 200000            /* 200 us of sched_yield() */
#define SLEEP_SLICE_MIN_NS 50000
#define SLEEP_SLICE_MAX_NS 2000000

/*
 * seq is odd: wait for the writer, but never forever. A dead writer is seen
 * through its robust lock word (the kernel marks it when the writer exits
 * for any reason); its last committed state is in the backup line. A live
 * writer that was descheduled mid-update needs the CPU we would burn, so
 * after a short spin we yield, then sleep on the change futex.
 *
 * Returns 0 when seq has moved on (the caller retries the fast path), 1 with
 * *p filled from the backup and *mono read while that backup was the
 * committed state (the writer is dead), 2 likewise with *mono capped at the
 * published anchor of the update in progress (the writer is alive, T1-T4
 * at the top), 3 as 2 but held past an undecided instant, or -EAGAIN. In
 * every case *p is the next line's function instead when the update was
 * decided ahead and *mono has reached its anchor (T4, S5).
 *
 * The clock reading belongs inside the window the seq re-check closes, as
 * on the fast path. Taken after the re-check (as this code once did), a
 * reader stalled there could evaluate the dead writer's function at a time
 * past the next writer's anchor after that writer had paused the clock,
 * and return more than a later read: backwards time. The model
 * (seqlock.pml) found it; its mutant MUTANT_CLOCK_AFTER_RECHECK keeps it.
 */
static int wait_writer(const struct shmclock_seg *s, uint32_t odd, struct shmclock_params *p,
		       int64_t *mono)
{
	int64_t start = 0, now, slice = SLEEP_SLICE_MIN_NS;
	int spins = 0;

	for (;;) {
		uint32_t lock = atomic_load_explicit(&s->writer_lock.word, memory_order_relaxed);
		uint32_t cur, change;

		/* Model step S1: the lock word. */
		if (!shmclock__writer_alive(lock)) {
			/* S5. Pairs with the dead writer's release store of
			 * next_seq (writer.c, N2): who sees its decision sees the
			 * next line and the anchor it was decided for (a new
			 * writer keeps that anchor: attach_segment, V0). */
			uint32_t next = atomic_load_explicit(&s->next_seq, memory_order_acquire);
			int64_t anchor = next == odd ? atomic_load_explicit(&s->n_anchor_ns,
									   memory_order_relaxed)
						     : INT64_MAX;

			/* S3: the clock reading, before the re-check. */
			*mono = shmclock__mono_ns();
			/* S2: the backup loads, or the decided function's. */
			if (*mono >= anchor)
				shmclock__load_next(s, p);
			else
				shmclock__load_backup(s, p);
			/* S4. Pairs with the release fences before the writer's odd
			 * store (writer.c, commit_begin, W1) and before its backup
			 * stores (commit_end W6, recover V5): the backup we loaded is
			 * the one completed before seq became `odd`, and no writer
			 * has anchored a newer function before our clock reading, if
			 * seq is still `odd`. */
			atomic_thread_fence(memory_order_acquire);
			/* The re-read after the clock reading: shmclock_static_after. */
			if (atomic_load_explicit(shmclock_static_after(&s->seq, *mono),
						 memory_order_relaxed) == odd)
				return 1;
			return 0;
		} else {
			/* T1: next_seq, and the anchor the writer published after
			 * its odd store (writer.c, commit_begin, W2a). */
			int64_t anchor, m, at = INT64_MAX;
			uint32_t next;
			bool decided;

			/* T0. Pairs with the release fence of a writer taking the
			 * clock over (writer.c, attach_segment, V0): the lock word
			 * showed it alive, so the anchor below is not one its dead
			 * predecessor left. */
			atomic_thread_fence(memory_order_acquire);
			/* Acquire pairs with the release stores of next_seq (N2,
			 * and freeze_at's mark): who sees this update's decision
			 * (or mark) sees its next line and its anchor. */
			next = atomic_load_explicit(&s->next_seq, memory_order_acquire);
			anchor = atomic_load_explicit(&s->anchor_mono_ns, memory_order_relaxed);
			/* Decided: the instant the decision is for, from the next
			 * line (anchor_mono_ns may have been withdrawn meanwhile by a
			 * writer opening the segment, V0). */
			decided = next == odd;
			if (decided)
				at = atomic_load_explicit(&s->n_anchor_ns, memory_order_relaxed);
			/* T2: the clock reading, after R1 saw seq odd. */
			m = shmclock__mono_ns();
			if (m >= at)
				shmclock__load_next(s, p);
			else
				shmclock__load_backup(s, p);
			/* T3. Pairs with the release fences before the writer's odd
			 * store (W1) and after it (the seq_cst fence W2, before
			 * W2a): if seq is still `odd`, the backup is the state
			 * committed before it, and an anchor newer than that
			 * state's mono_base is this update's. */
			atomic_thread_fence(memory_order_acquire);
			if (atomic_load_explicit(shmclock_static_after(&s->seq, m),
						 memory_order_relaxed) != odd)
				return 0;
			/* T4: decided, the next function from its instant on and
			 * the last committed one before it (m < at: no cap needed);
			 * else the last committed one, frozen at this update's
			 * anchor. */
			if (decided) {
				*mono = m;
				return 2;
			}
			if (anchor > p->mono_base) {
				*mono = m < anchor ? m : anchor;
				return next == odd + 1 && m > anchor ? 3 : 2;
			}
		}
		if (spins < SPIN_LIMIT) {
			spins++;
			shmclock__cpu_relax();
		} else {
			now = shmclock__mono_ns();
			if (!start)
				start = now;
			if (now - start > SHMCLOCK_STUCK_NS)
				return -EAGAIN;
			if (now - start < YIELD_NS) {
				sched_yield();
			} else {
				/* Read the futex word before re-checking seq: a commit
				 * between the two changes the word, and the wait returns
				 * at once (pairs with the increment after the even store). */
				change = atomic_load_explicit(&s->change_futex, memory_order_acquire);
				if (atomic_load_explicit(&s->seq, memory_order_acquire) != odd)
					return 0;
				shmclock__futex_wait(&s->change_futex, change, slice);
				if (slice < SLEEP_SLICE_MAX_NS)
					slice *= 2;
			}
		}
		cur = atomic_load_explicit(&s->seq, memory_order_acquire);
		if (cur != odd)
			return 0;
	}
}

/*
 * One consistent read of the whole parameter set (record, or the backup of
 * a dead writer) and a clock reading inside it. The slower, complete
 * version of shmclock_now(), for info and the callers that need it all.
 * Returns 0, -ESTALE (the values come from a dead writer), or -EAGAIN.
 */
int shmclock__snapshot(const struct shmclock_seg *s, struct shmclock_params *p, int64_t *mono,
		       uint32_t *lock)
{
	for (;;) {
		uint32_t s1 = atomic_load_explicit(&s->seq, memory_order_acquire);
		int r;

		if (s1 & 1) {
			r = wait_writer(s, s1, p, mono);
			if (r < 0)
				return r;
			if (r == 1) {
				*lock = atomic_load_explicit(&s->writer_lock.word, memory_order_relaxed);
				return -ESTALE;
			}
			if (r >= 2) {
				*lock = atomic_load_explicit(&s->writer_lock.word, memory_order_relaxed);
				return shmclock__writer_alive(*lock) && r == 2 ? 0 : -ESTALE;
			}
			continue;
		}
		shmclock__load_record(s, p);
		*lock = atomic_load_explicit(&s->writer_lock.word, memory_order_relaxed);
		*mono = shmclock__mono_ns();
		/* R5 (this path reads the clock after the record; the model
		 * checks now_fast's order, the argument at the top of this file
		 * covers both: the reading lies inside the window). Pairs
		 * with the writer's fence after its odd store (commit_begin, W2):
		 * if any load above saw a new value, the re-read sees seq moved. */
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(shmclock_static_after(&s->seq, *mono), memory_order_relaxed) !=
		    s1)
			continue;
		return shmclock__writer_alive(*lock) ? 0 : -ESTALE;
	}
}

int64_t shmclock__open_anchor(const struct shmclock_seg *s, int64_t mono)
{
	/* A hint, not a read of the function: a seq or anchor that moves on
	 * meanwhile belongs to a commit, which wakes the planner anyway
	 * (change_futex). */
	int64_t a;

	if (!(atomic_load_explicit(&s->seq, memory_order_acquire) & 1))
		return INT64_MAX;
	a = atomic_load_explicit(&s->anchor_mono_ns, memory_order_relaxed);
	return a > mono ? a : INT64_MAX;
}

void shmclock__fill_info(const struct shmclock_seg *s, const struct shmclock_params *p,
			 int64_t mono, uint32_t lock, shmclock_info_t *info)
{
	int64_t hb = atomic_load_explicit(&s->heartbeat_mono_ns, memory_order_relaxed);

	memset(info, 0, sizeof(*info));
	info->mono_ns = mono;
	info->initialized = p->flags & SHMCLOCK_F_INIT;
	info->sim_ns = info->initialized ? shmclock__eval(p->mono_base, p->sim_base, p->mult, mono) : 0;
	info->scale = (double)p->nominal_mult / 4294967296.0;
	info->source = (int)((p->flags & SHMCLOCK_F_SOURCE_MASK) >> SHMCLOCK_F_SOURCE_SHIFT);
	info->paused = p->flags & SHMCLOCK_F_PAUSED;
	info->stepped = p->flags & SHMCLOCK_F_STEPPED;
	info->stale = p->flags & SHMCLOCK_F_STALE;
	info->has_unix_at_zero = p->flags & SHMCLOCK_F_UNIX_ZERO;
	info->unix_at_zero_ns = info->has_unix_at_zero ? p->unix_at_zero_ns : 0;
	info->jump_epoch = p->jump_epoch;
	info->last_jump_ns = p->last_jump_ns;
	info->jump_total_ns = p->jump_total_ns;
	info->writer_alive = shmclock__writer_alive(lock);
	info->writer_pid = atomic_load_explicit(&s->writer_pid, memory_order_relaxed);
	info->writer_generation = atomic_load_explicit(&s->writer_generation, memory_order_relaxed);
	info->writer_start_unix_ns = atomic_load_explicit(&s->writer_start_unix_ns, memory_order_relaxed);
	/* hb comes from the segment: any value, so no signed overflow. */
	if (!hb)
		info->heartbeat_age_ns = -1;
	else if (hb > mono)
		info->heartbeat_age_ns = 0;
	else if ((uint64_t)mono - (uint64_t)hb > (uint64_t)INT64_MAX)
		info->heartbeat_age_ns = INT64_MAX;
	else
		info->heartbeat_age_ns = (int64_t)((uint64_t)mono - (uint64_t)hb);
	info->commits = atomic_load_explicit(&s->commits, memory_order_relaxed);
}

