/* SPDX-License-Identifier: MIT */
/*
 * <shmclock/static/shmclock.h> — the inline read fast path (C only).
 *
 * Opt in by defining SHMCLOCK_INLINE_FASTPATH before including
 * <shmclock/shmclock.h>: shmclock_now() calls then compile to this inline
 * function, saving a call and a stack frame (see bench/README.md for what
 * that buys). Anything unusual (the writer mid-update, an uninitialized
 * clock, a dead writer) falls back to the exported shmclock_now().
 *
 * FROZEN ABI. Everything here is compiled into callers, so it can never
 * change within a segment ABI version (1, 2 and 3 share all of it):
 *   - a shmclock_t begins with the address of its read-only mapping,
 *     followed by the 64-bit jump key the process has delivered (jump
 *     epoch << 16 | source bits | INIT bit of the record's flags); any
 *     difference goes to shmclock_now(), which runs the jump callbacks;
 *   - the record line of the segment is struct shmclock_record below, at
 *     offset SHMCLOCK_RECORD_OFFSET (the full layout is in the library's
 *     src/segment.h, which static_asserts that the two agree);
 *   - the time function is shmclock_static_eval().
 */
#ifndef SHMCLOCK_STATIC_SHMCLOCK_H
#define SHMCLOCK_STATIC_SHMCLOCK_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#define SHMCLOCK_RECORD_OFFSET 0x40
#define SHMCLOCK_FLAG_INIT 0x1u
#define SHMCLOCK_FLAG_STALE 0x10u /* the writer lost its leader: -ESTALE */
#define SHMCLOCK_LOCK_TID_MASK 0x3fffffffu
#define SHMCLOCK_LOCK_OWNER_DIED 0x40000000u

/* The 64-byte cache line a read touches. */
struct shmclock_record {
	_Atomic uint32_t seq;            /* odd while the writer updates */
	_Atomic uint32_t flags;          /* SHMCLOCK_FLAG_INIT, ... */
	_Atomic int64_t mono_base;       /* CLOCK_MONOTONIC ns of the anchor */
	_Atomic int64_t sim_base;        /* simulation ns at the anchor */
	_Atomic uint64_t mult;           /* rate, 32.32 fixed point; 0 paused */
	_Atomic uint64_t jump_epoch;
	_Atomic int64_t last_jump_ns;
	_Atomic int64_t unix_at_zero_ns;
	_Atomic uint32_t writer_lock;    /* robust futex word of the writer */
	uint32_t lock_rest;
};

/*
 * The time function: sim_base + (mono - mono_base) * mult / 2^32, never
 * below sim_base, saturating at INT64_MAX. Monotonic in mono.
 */
static inline int64_t shmclock_static_eval(int64_t mono_base, int64_t sim_base, uint64_t mult,
					   int64_t mono)
{
	__extension__ typedef unsigned __int128 u128;
	u128 p;
	uint64_t hi, lo;
	int64_t d;

	if (mono <= mono_base || mult == 0)
		return sim_base;
	/* mono > mono_base: the difference fits in uint64_t, not always in int64_t. */
	p = (u128)((uint64_t)mono - (uint64_t)mono_base) * mult;
	hi = (uint64_t)(p >> 64);
	lo = (uint64_t)p;
	/* p >> 32 > INT64_MAX exactly when bit 95 or above is set. */
	if (hi >> 31)
		return INT64_MAX;
	/* p >> 32 from its two halves: a shift each, side by side, then an
	 * OR; one shrd waits for both halves and takes 3 cycles (the value is
	 * on the critical path of every read: bench/README.md, read). */
	d = (int64_t)((hi << 32) | (lo >> 32));
	if (sim_base > 0 && d > INT64_MAX - sim_base)
		return INT64_MAX;
	return sim_base + d;
}

int shmclock_now(struct shmclock *clk, int64_t *sim_ns);

/*
 * @p, at an address that depends on @now, a clock reading: a load through
 * it is performed after the clock was read. The protocol's argument needs
 * a reader that still sees the old seq to have read its clock before the
 * writer's anchor, so the seq re-read must come after the clock reading.
 * No fence gives that: the clock is read by an instruction (rdtsc, the
 * counter register), not a load, and a later load may be performed before
 * it (x86's vDSO puts lfence before rdtsc, nothing after: a commit landing
 * in that window made reads 20 ns backwards at millions of commits per
 * second). A data dependency does: the address goes through a zero the
 * compiler cannot see and the CPU does not treat as one.
 */
static inline const _Atomic uint32_t *shmclock_static_after(const _Atomic uint32_t *p, int64_t now)
{
	__extension__ unsigned long z = (unsigned long)now;

#if defined(__x86_64__) || defined(__i386__)
	__asm__("and $0, %0" : "+r"(z));
#elif defined(__aarch64__)
	__asm__("and %0, %0, xzr" : "+r"(z));
#else
	/* No dependency to build: the best a fence can do. */
	atomic_thread_fence(memory_order_seq_cst);
	z = 0;
#endif
	return (const _Atomic uint32_t *)(const void *)((const unsigned char *)(const void *)p + z);
}

/*
 * The read fast path, the one copy of it: shmclock_static_now() below and
 * the library's shmclock_now() family (src/reader.c) are both this inline
 * function. Model steps R1-R6 (the library's src/seqlock.pml; the protocol
 * and its ordering argument: src/protocol.c).
 *
 * @mono reads CLOCK_MONOTONIC (a constant at every call site, so it is
 * inlined: the library reads the vDSO directly, so that the preload shim,
 * which interposes clock_gettime, never calls itself). @extra, if not NULL,
 * is one more 64-bit field of the segment, loaded inside the same seq window
 * into *extra_val (the UNIX time of zero, the jump total).
 *
 * shmclock_static_read_at() takes the record line @r and the handle's seen
 * key directly (the preload shim keeps both at hand: one load fewer before
 * the first seq load); shmclock_static_read() finds them from a handle.
 *
 * Returns 1 with *sim_ns (and *flags, *extra_val) set when one consistent
 * read found an initialized clock, a live writer and no jump this process
 * has not delivered; 0 when the caller must take the slow path.
 */
static inline __attribute__((always_inline)) int
shmclock_static_read_at(const struct shmclock_record *r, const _Atomic uint64_t *seen_key,
			int64_t (*mono)(void), const _Atomic int64_t *extra, int64_t *sim_ns,
			int64_t *extra_val, uint32_t *flags_out)
{
	uint32_t s1, flags, lock;
	int64_t mono_base, sim_base, now, x = 0;
	uint64_t mult, epoch;

	/* R1. Pairs with the release store of the even seq in the writer's
	 * commit (W5) and recovery (V3). */
	s1 = atomic_load_explicit(&r->seq, memory_order_acquire);
	if (__builtin_expect(s1 & 1, 0))
		return 0;
	/* R2: the clock reading first, so that the record's fields need not
	 * live across the call; still inside the window the two seq loads
	 * bracket, which is all the protocol asks of it. */
	now = mono();
	/* R3 */
	flags = atomic_load_explicit(&r->flags, memory_order_relaxed);
	mono_base = atomic_load_explicit(&r->mono_base, memory_order_relaxed);
	sim_base = atomic_load_explicit(&r->sim_base, memory_order_relaxed);
	mult = atomic_load_explicit(&r->mult, memory_order_relaxed);
	epoch = atomic_load_explicit(&r->jump_epoch, memory_order_relaxed);
	if (extra)
		x = atomic_load_explicit(extra, memory_order_relaxed);
	lock = atomic_load_explicit(&r->writer_lock, memory_order_relaxed); /* R4 */
	/* R5. Pairs with the writer's full fence after its odd store (W2):
	 * orders the loads above and the clock reading before the re-read. */
	atomic_thread_fence(memory_order_acquire);
	/* Three predicted branches, not one OR of every check: the branchless
	 * chain put the key's load and a dozen ALU steps in front of the only
	 * branch, ~1.5 ns per read on the 2-vCPU machine (bench/README.md). */
	if (__builtin_expect(atomic_load_explicit(shmclock_static_after(&r->seq, now),
						  memory_order_relaxed) != s1,
			     0))
		return 0;
	/* Acquire pairs with the release store of the key after the pre-jump
	 * callbacks (library, jump delivery). STALE is never in the key: a
	 * stale clock always takes the checked path (-ESTALE). */
	if (__builtin_expect(((epoch << 16) | (flags & 0xff11u)) !=
				     atomic_load_explicit(seen_key, memory_order_acquire),
			     0))
		return 0;
	if (__builtin_expect(!(flags & SHMCLOCK_FLAG_INIT) | !(lock & SHMCLOCK_LOCK_TID_MASK) |
				     !!(lock & SHMCLOCK_LOCK_OWNER_DIED),
			     0))
		return 0;
	*sim_ns = shmclock_static_eval(mono_base, sim_base, mult, now); /* R6 */
	if (extra)
		*extra_val = x;
	if (flags_out)
		*flags_out = flags;
	return 1;
}

/* The same read from a handle @clk: its record line and its seen key are
 * where the frozen ABI puts them (the first two words of the handle). */
static inline __attribute__((always_inline)) int
shmclock_static_read(struct shmclock *clk, int64_t (*mono)(void), const _Atomic int64_t *extra,
		     int64_t *sim_ns, int64_t *extra_val, uint32_t *flags_out)
{
	/* Through void *: the record line is 64-byte aligned in the mapping. */
	const struct shmclock_record *r = (const struct shmclock_record *)(const void *)
		(*(const unsigned char *const *)(const void *)clk + SHMCLOCK_RECORD_OFFSET);
	const _Atomic uint64_t *seen_key = (const _Atomic uint64_t *)(const void *)
		((const unsigned char *)(const void *)clk + 8);

	return shmclock_static_read_at(r, seen_key, mono, extra, sim_ns, extra_val, flags_out);
}

static inline int64_t shmclock_static_mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline int shmclock_static_now(struct shmclock *clk, int64_t *sim_ns)
{
	if (__builtin_expect(shmclock_static_read(clk, shmclock_static_mono, NULL, sim_ns, NULL, NULL),
			     1))
		return 0;
	return shmclock_now(clk, sim_ns);
}

#endif
