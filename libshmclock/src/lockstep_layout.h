/* SPDX-License-Identifier: MIT */
/*
 * Lockstep: participants grant, the clock's writer (the host) advances to
 * the smallest grant. The participants' segment is a wire format like the
 * clock page: /dev/shm/shmclock-lockstep.<name> ("shmclock-" cannot begin a
 * clock's own file, "shmclock.<name>"), native endian, every byte not named
 * here zero. Mode: the writer's user, plus its group with ControlGroup.
 *
 *  off     size  field            meaning
 *  ---- header (written once, at creation) --------------------------------
 *  0x000   8     magic            LS_MAGIC ("SHMCLKLS" as a u64)
 *  0x008   4     abi_version      LS_ABI_VERSION (2: its own, not the clock
 *                                 segment's, which went to 3 without this
 *                                 layout changing)
 *  0x00c   4     size             0x14040, must equal the file size
 *  0x010   4     slots            64
 *  0x014   4     slot_size        256
 *  0x018   4     writer_generation the clock's writer_generation when the
 *                                 host made this file: a participant of an
 *                                 older file sees a newer clock writer and
 *                                 gets -ESTALE
 *  0x01c   4     reserved, zero
 *  ---- header, live ------------------------------------------------------
 *  0x020   4     grant_futex      participants: ++ after every grant, join
 *                                 and leave; the host FUTEX_WAITs on it
 *  0x024   4     host_waiting     host: 1 while it sleeps (or is about to):
 *                                 only then do participants FUTEX_WAKE
 *  0x028   8     block_at_ns      host, before it sleeps: the clock's time,
 *                                 where members that granted no more hold
 *                                 it; a grant wakes the host only when no
 *                                 member's grant is that low any more
 *  0x030   8     max_ahead_ns     host: a grant may be at most this far
 *                                 ahead of the clock's time (MaxGrantAhead);
 *                                 participants check it before granting
 *  0x038   8     reserved, zero
 *  ---- slot i at 0x040 + 0x100 * i ---------------------------------------
 *  +0x00   4     state            LS_FREE, LS_JOINING (participant), LS_MEMBER
 *                                 (host accepted), LS_LEFT (participant),
 *                                 LS_EVICTED (host)
 *  +0x04   4     ack              host: ++ and FUTEX_WAKE when it accepts
 *                                 or evicts; the joiner waits on it
 *  +0x08   8     grant_ns         participant: its grant (release store)
 *  +0x10   4     pid              participant (information)
 *  +0x14   4     incarnation      host: ++ at each acceptance, so a handle
 *                                 whose slot was freed and reused knows
 *  +0x18   8     joined_sim_ns    host: clock time at acceptance
 *  +0x20   8     holding_since    host: CLOCK_MONOTONIC since which the
 *                                 clock has waited at this grant, or 0
 *  +0x28   4     tid              participant: the joining thread's TID
 *                                 (gettid); the host records it with the
 *                                 pid at acceptance and drops a member whose
 *                                 lock word names another thread
 *  +0x2c   4     reserved, zero
 *  +0x30   8     granted_mono     participant: CLOCK_MONOTONIC of its last
 *                                 grant (relaxed; beside grant_ns, so the
 *                                 host's scan reads it without another
 *                                 cache line): the latest is the one whose
 *                                 grant let the clock move
 *  +0x38   8     max_ahead_ns     host: the header's max_ahead_ns, copied
 *                                 at acceptance and at every change, so
 *                                 that a grant's check reads the line the
 *                                 grant is written to (the header's line
 *                                 bounces with grant_futex)
 *  +0x40  64     lock             process-shared robust pthread_mutex_t; the
 *                                 participant's joining thread holds it. Its
 *                                 first word is the futex word: the owner's
 *                                 TID, bit 30 set by the kernel when the
 *                                 owner exits without unlocking
 *  +0x80  72     who              participant name, NUL-terminated
 *  +0xc8  56     reserved, zero
 *  ---- stats of slot i at 0x4040 + 0x400 * i (participant: its own
 *       figures, relaxed stores by its one thread; zeroed at its join) -----
 *  +0x000  8     grants           grants made
 *  +0x008  8     steps            returns from advance at the grant
 *  +0x010  8     work_ns          real time from a return from advance to
 *                                 its next grant, summed (working)
 *  +0x018  8     wait_ns          real time from a grant to the return from
 *                                 advance, summed (waiting)
 *  +0x020  8     returned_mono    CLOCK_MONOTONIC of the last return from
 *                                 advance; 0 once it granted again
 *  +0x028 88     reserved, zero
 *  +0x080 448    work_hist        112 u32 buckets of working times: 0 below
 *                                 1024 ns, then 4 per power of two
 *  +0x240 448    wait_hist        the same for waiting times
 *
 * Protocol (the steps J*, G*, H* are those of the lockstep part of the
 * spin model, seqlock.pml):
 *
 *   join:  trylock a slot's mutex (EOWNERDEAD: make it consistent); the
 *          slot must be FREE, else unlock and try the next one. Write who
 *          and pid, state = JOINING (release)                         J1
 *          grant_futex++, wake the host; wait for state == MEMBER     J2
 *   host:  JOINING with a live lock: grant = joined = now, CAS MEMBER  H1
 *   grant: grant_ns = T (seq_cst) ; grant_futex++ (seq_cst) ;
 *          host_waiting and no member's grant <= block_at? FUTEX_WAKE G1
 *   host wait: block_at = the clock's time ; host_waiting = 1 ;
 *          grant_futex still the token read before the scan? FUTEX_WAIT
 *          (with a timeout: deaths wake nobody)
 *   host:  per slot: lock word (acquire), state (acquire), grant
 *          (acquire). A dead lock (0 or OWNER_DIED) with state
 *          JOINING/MEMBER is a death: the slot is freed, its grant no
 *          longer counts. min over MEMBER grants; the caller commits
 *          min(...) to the clock page                                 H2
 *   leave: state = LEFT (release), grant_futex++, unlock               L1
 *
 * Why a killed participant cannot let the clock pass its last grant: the
 * host counts a MEMBER's grant for as long as its lock is alive, and a dead
 * lock is seen before (or at the same scan as) the slot being counted
 * without it, since the host loads the word before the state and grant.
 * A death only removes the participant; it never lowers or raises another's
 * grant. Why nothing hangs: a dead lock is visible without the dead
 * process's help, and the host scans at least every few milliseconds.
 *
 * Happens-before (the header's guarantee): participant work -> G1 release
 * store of grant_ns -> host's acquire load in H2 -> the host's commit of
 * T (writer.c, seq release) -> a participant's acquire read of T.
 */
#ifndef SHMCLOCK_LOCKSTEP_LAYOUT_H
#define SHMCLOCK_LOCKSTEP_LAYOUT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <shmclock/lockstep.h>

#include "clock.h"
#include "common.h"

/*
 * Before sleeping on a futex, a waiter yields the CPU a few times and looks
 * again: the next commit (or grant) is usually microseconds away, and on a
 * machine with fewer cores than processes the yield hands the core to the
 * very process that makes it. Measured with shmclock-bench lockstep on 2
 * cores, 4 participants: no spin 15k steps/s; 64 busy spins 17k; 4 yields
 * here and 16 in the host 34k. An idle core returns from a yield at once,
 * so a lone participant gets a short spin (290k steps/s).
 */
#define SHMCLOCK_LS_PARTICIPANT_YIELDS 4
#define SHMCLOCK_LS_HOST_YIELDS 16
/*
 * But a yield hands the core to *any* runnable process: with an unrelated
 * busy process on the core, CFS runs that one for a whole time slice
 * (milliseconds), and 20 runs of the determinism scenario under a CPU hog
 * took 71 s instead of 6. A yield that takes longer than this means exactly
 * that: the waiter then skips yielding for its next YIELD_BACKOFF waits and
 * goes straight to the futex, which wakes it at once when its time comes.
 */
#define YIELD_SLOW_NS 500000
#define YIELD_BACKOFF 1024

#define LS_MAGIC UINT64_C(0x534c4b4c434d4853) /* "SHMCLKLS" little endian */
#define LS_ABI_VERSION 2u
#define LS_SLOTS SHMCLOCK_LOCKSTEP_SLOTS
#define LS_PREFIX "/shmclock-lockstep."

enum { LS_FREE, LS_JOINING, LS_MEMBER, LS_LEFT, LS_EVICTED };

struct ls_slot {
	_Atomic uint32_t state;
	_Atomic uint32_t ack;
	_Atomic int64_t grant_ns;
	_Atomic int32_t pid;
	_Atomic uint32_t incarnation;
	_Atomic int64_t joined_sim_ns;
	_Atomic int64_t holding_since;
	_Atomic int32_t tid;
	uint32_t reserved0;
	_Atomic int64_t granted_mono;
	_Atomic int64_t max_ahead_ns;
	union {
		pthread_mutex_t mutex;
		_Atomic uint32_t word;
		uint8_t pad[64];
	} lock;
	/* Bytes, each accessed atomically (relaxed): status may list a slot
	 * while it changes hands. */
	_Atomic char who[72];
	uint8_t reserved1[56];
};

#define LS_HIST 112

struct ls_stats {
	_Atomic uint64_t grants;
	_Atomic uint64_t steps;
	_Atomic int64_t work_ns;
	_Atomic int64_t wait_ns;
	_Atomic int64_t returned_mono;
	uint8_t reserved[88];
	_Atomic uint32_t work_hist[LS_HIST];
	_Atomic uint32_t wait_hist[LS_HIST];
};

struct ls_seg {
	uint64_t magic;
	uint32_t abi_version;
	uint32_t size;
	uint32_t slots;
	uint32_t slot_size;
	uint32_t writer_generation;
	uint32_t reserved0;
	_Atomic uint32_t grant_futex;
	_Atomic uint32_t host_waiting;
	_Atomic int64_t block_at_ns;
	_Atomic int64_t max_ahead_ns;
	uint8_t reserved1[8];
	struct ls_slot slot[LS_SLOTS];
	struct ls_stats stats[LS_SLOTS];
};

static_assert(sizeof(pthread_mutex_t) <= 64, "the slot's lock must fit");
static_assert(sizeof(struct ls_slot) == 0x100, "slot layout");
static_assert(offsetof(struct ls_slot, grant_ns) == 0x08, "slot layout");
static_assert(offsetof(struct ls_slot, incarnation) == 0x14, "slot layout");
static_assert(offsetof(struct ls_slot, holding_since) == 0x20, "slot layout");
static_assert(offsetof(struct ls_slot, tid) == 0x28, "slot layout");
static_assert(offsetof(struct ls_slot, lock) == 0x40, "slot layout");
static_assert(offsetof(struct ls_slot, who) == 0x80, "slot layout");
static_assert(offsetof(struct ls_seg, grant_futex) == 0x20, "layout");
static_assert(offsetof(struct ls_seg, block_at_ns) == 0x28, "layout");
static_assert(offsetof(struct ls_seg, max_ahead_ns) == 0x30, "layout");
static_assert(offsetof(struct ls_seg, slot) == 0x40, "layout");
static_assert(offsetof(struct ls_slot, granted_mono) == 0x30, "slot layout");
static_assert(offsetof(struct ls_slot, max_ahead_ns) == 0x38, "slot layout");
static_assert(sizeof(struct ls_stats) == 0x400, "stats layout");
static_assert(offsetof(struct ls_stats, work_hist) == 0x80, "stats layout");
static_assert(offsetof(struct ls_stats, wait_hist) == 0x240, "stats layout");
static_assert(offsetof(struct ls_seg, stats) == 0x4040, "layout");
static_assert(sizeof(struct ls_seg) == 0x14040, "layout");

#define LS_SIZE sizeof(struct ls_seg)

static inline uint32_t lock_word(const struct ls_slot *sl)
{
	/* Pairs with glibc's release on unlock and the kernel's store of
	 * OWNER_DIED: what the owner wrote before is visible once we see it. */
	return atomic_load_explicit(&sl->lock.word, memory_order_acquire);
}

static inline void who_get(const struct ls_slot *sl, char out[SHMCLOCK_LOCKSTEP_WHO_MAX + 1])
{
	size_t i;

	for (i = 0; i < SHMCLOCK_LOCKSTEP_WHO_MAX; i++) {
		out[i] = atomic_load_explicit(&sl->who[i], memory_order_relaxed);
		if (!out[i])
			break;
	}
	out[i] = 0;
}

static inline void who_set(struct ls_slot *sl, const char *who)
{
	size_t i = 0;

	for (; who[i] && i < SHMCLOCK_LOCKSTEP_WHO_MAX; i++)
		atomic_store_explicit(&sl->who[i], who[i], memory_order_relaxed);
	for (; i < sizeof(sl->who); i++)
		atomic_store_explicit(&sl->who[i], 0, memory_order_relaxed);
}

static inline void ls_path(char *out, size_t n, const char *name, bool shm_name)
{
	snprintf(out, n, "%s%s%s", shm_name ? "" : SHMCLOCK_SHM_DIR, LS_PREFIX, name);
}

/* ---- figures ----------------------------------------------------------- */

/* Bucket of a duration: 0 below 1024 ns, then 4 per power of two. */
static inline unsigned hist_bucket(int64_t ns)
{
	unsigned o, b;

	if (ns < 1024)
		return 0;
	o = 63u - (unsigned)__builtin_clzll((uint64_t)ns);
	b = 1 + (o - 10) * 4 + (unsigned)((ns >> (o - 2)) & 3);
	return b < LS_HIST ? b : LS_HIST - 1;
}

/* The middle of bucket @b, ns. */
static inline int64_t hist_value(unsigned b)
{
	unsigned o = (b - 1) / 4 + 10, sub = (b - 1) % 4;

	if (!b)
		return 512;
	return (int64_t)((4 * 2 + 2 * sub + 1) * (UINT64_C(1) << (o - 2))) / 2;
}

/* One writer per stats block (the participant's thread): plain load and
 * store, relaxed (readers are statistics). */
static inline void stat_add(_Atomic int64_t *sum, _Atomic uint32_t *hist, int64_t ns)
{
	_Atomic uint32_t *h = &hist[hist_bucket(ns)];

	atomic_store_explicit(sum, atomic_load_explicit(sum, memory_order_relaxed) + ns,
			      memory_order_relaxed);
	atomic_store_explicit(h, atomic_load_explicit(h, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

static inline void stat_inc(_Atomic uint64_t *n)
{
	atomic_store_explicit(n, atomic_load_explicit(n, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

/* ---- what participants and the host share beyond the layout ----------- */
/* (lockstep_layout.c) */

/* One yield; false (and *backoff set) if it handed the core away for long. */
bool shmclock__ls_yield_briefly(uint32_t *backoff);

/* futex_waitv (Linux 5.16) on the shared word, and on a private one of the
 * caller's if @priv: 0 or -1 with errno, as the system call. */
int shmclock__ls_futex_waitv2(_Atomic uint32_t *shared, uint32_t sval, uint32_t *priv,
			      uint32_t pval, int64_t deadline);

/* The @q quantile of a histogram, ns (the middle of its bucket). */
int64_t shmclock__ls_hist_pct(const _Atomic uint32_t *hist, double q);

/*
 * A participant's name: 1 to SHMCLOCK_LOCKSTEP_WHO_MAX bytes of UTF-8 in
 * its shortest form, without surrogates, beyond U+10FFFF, or control
 * characters (C0, DEL, C1). It goes into logs and status --json as it is,
 * so anything else (a Latin-1 "caf\xe9") would make them invalid.
 */
int shmclock__ls_check_who(const char *who);

/*
 * Whether a live member other than slot @self (-1: none) is called @who:
 * names are unique per clock (issue 52), so that `evict NAME`, status and
 * the metrics name one participant. The host refuses a join under a taken
 * name; a joiner asks first, and again when refused, to say why.
 */
bool shmclock__ls_name_taken(const struct ls_seg *ls, const char *who, int self);

/*
 * Tell the host. @grant: a grant (not a join or leave, which always wake
 * it). A grant wakes the host only when no member's grant is still at or
 * below the time the host is blocked at: with four participants due at
 * the same time, one wake-up per step instead of four.
 */
void shmclock__ls_kick_host(struct ls_seg *ls, bool grant);

/* Maps the participants' segment of @clk: read-write for a participant,
 * read-only for an observer. */
int shmclock__ls_map_segment(const char *name, const shmclock_t *clk, bool writable,
			     struct ls_seg **out);

/* What the host and observers list of slot @i (relaxed loads). */
void shmclock__ls_fill(const struct ls_slot *sl, unsigned i,
		       struct shmclock_lockstep_participant *p);

#endif
