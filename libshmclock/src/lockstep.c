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
 *  0x008   4     abi_version      SHMCLOCK_ABI_VERSION (2)
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
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <shmclock/lockstep.h>

#include "clock.h"
#include "common.h"
#include "writer_seg.h"







/*
 * Before sleeping on a futex, a waiter yields the CPU a few times and looks
 * again: the next commit (or grant) is usually microseconds away, and on a
 * machine with fewer cores than processes the yield hands the core to the
 * very process that makes it. Measured with shmclock-bench lockstep on 2
 * cores, 4 participants: no spin 15k steps/s; 64 busy spins 17k; 4 yields
 * here and 16 in the host 34k. An idle core returns from a yield at once,
 * so a lone participant gets a short spin (290k steps/s).
 */
#define PARTICIPANT_YIELDS 4
#define HOST_YIELDS 16
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

/* One yield; false (and *backoff set) if it handed the core away for long. */
static bool yield_briefly(uint32_t *backoff)
{
	int64_t t0 = shmclock__mono_ns();

	sched_yield();
	if (shmclock__mono_ns() - t0 <= YIELD_SLOW_NS)
		return true;
	*backoff = YIELD_BACKOFF;
	return false;
}

#define LS_MAGIC UINT64_C(0x534c4b4c434d4853) /* "SHMCLKLS" little endian */
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

static uint32_t lock_word(const struct ls_slot *sl)
{
	/* Pairs with glibc's release on unlock and the kernel's store of
	 * OWNER_DIED: what the owner wrote before is visible once we see it. */
	return atomic_load_explicit(&sl->lock.word, memory_order_acquire);
}

static void who_get(const struct ls_slot *sl, char out[SHMCLOCK_LOCKSTEP_WHO_MAX + 1])
{
	size_t i;

	for (i = 0; i < SHMCLOCK_LOCKSTEP_WHO_MAX; i++) {
		out[i] = atomic_load_explicit(&sl->who[i], memory_order_relaxed);
		if (!out[i])
			break;
	}
	out[i] = 0;
}

static void who_set(struct ls_slot *sl, const char *who)
{
	size_t i = 0;

	for (; who[i] && i < SHMCLOCK_LOCKSTEP_WHO_MAX; i++)
		atomic_store_explicit(&sl->who[i], who[i], memory_order_relaxed);
	for (; i < sizeof(sl->who); i++)
		atomic_store_explicit(&sl->who[i], 0, memory_order_relaxed);
}

static void ls_path(char *out, size_t n, const char *name, bool shm_name)
{
	snprintf(out, n, "%s%s%s", shm_name ? "" : SHMCLOCK_SHM_DIR, LS_PREFIX, name);
}

static int futex_waitv2(_Atomic uint32_t *shared, uint32_t sval, uint32_t *priv, uint32_t pval,
			int64_t deadline)
{
	/* struct futex_waitv from linux/futex.h (5.16); spelled out so that
	 * older headers build. */
	struct {
		uint64_t val;
		uint64_t uaddr;
		uint32_t flags;
		uint32_t reserved;
	} w[2] = {
		{ sval, (uintptr_t)shared, 2 /* FUTEX2_SIZE_U32 */, 0 },
		{ pval, (uintptr_t)priv, 2 | 128 /* FUTEX2_PRIVATE */, 0 },
	};
	struct timespec ts = { (time_t)(deadline / 1000000000), (long)(deadline % 1000000000) };

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif
	return (int)syscall(SYS_futex_waitv, w, priv ? 2 : 1, 0,
			    deadline == INT64_MAX ? NULL : &ts, CLOCK_MONOTONIC);
}

/* ---- figures ----------------------------------------------------------- */

/* Bucket of a duration: 0 below 1024 ns, then 4 per power of two. */
static unsigned hist_bucket(int64_t ns)
{
	unsigned o, b;

	if (ns < 1024)
		return 0;
	o = 63u - (unsigned)__builtin_clzll((uint64_t)ns);
	b = 1 + (o - 10) * 4 + (unsigned)((ns >> (o - 2)) & 3);
	return b < LS_HIST ? b : LS_HIST - 1;
}

/* The middle of bucket @b, ns. */
static int64_t hist_value(unsigned b)
{
	unsigned o = (b - 1) / 4 + 10, sub = (b - 1) % 4;

	if (!b)
		return 512;
	return (int64_t)((4 * 2 + 2 * sub + 1) * (UINT64_C(1) << (o - 2))) / 2;
}

/* One writer per stats block (the participant's thread): plain load and
 * store, relaxed (readers are statistics). */
static void stat_add(_Atomic int64_t *sum, _Atomic uint32_t *hist, int64_t ns)
{
	_Atomic uint32_t *h = &hist[hist_bucket(ns)];

	atomic_store_explicit(sum, atomic_load_explicit(sum, memory_order_relaxed) + ns,
			      memory_order_relaxed);
	atomic_store_explicit(h, atomic_load_explicit(h, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

static void stat_inc(_Atomic uint64_t *n)
{
	atomic_store_explicit(n, atomic_load_explicit(n, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

static int64_t hist_pct(const _Atomic uint32_t *hist, double q)
{
	uint32_t c[LS_HIST];
	uint64_t total = 0, acc = 0;

	for (unsigned i = 0; i < LS_HIST; i++)
		total += c[i] = atomic_load_explicit(&hist[i], memory_order_relaxed);
	if (!total)
		return 0;
	for (unsigned i = 0; i < LS_HIST; i++) {
		acc += c[i];
		if ((double)acc >= q * (double)total)
			return hist_value(i);
	}
	return hist_value(LS_HIST - 1);
}

/* ---- participants ------------------------------------------------------ */

struct shmclock_lockstep {
	shmclock_t *clk;
	struct ls_seg *ls;
	struct ls_slot *slot;
	uint32_t incarnation;
	int64_t last;       /* our last grant (the join time before any) */
	int64_t joined_at;
	uint32_t yield_backoff; /* waits left without yielding (yield_briefly) */
	const char *why;    /* the check the last refused grant failed */
	struct ls_stats *stats; /* our figures (0x4040 + 0x400 * slot) */
	int64_t granted_mono;   /* CLOCK_MONOTONIC of our last grant */
	int64_t seen;       /* the clock's time as we saw it last (never goes back) */
};

/*
 * A participant's name: 1 to 64 bytes of UTF-8 in its shortest form,
 * without surrogates, beyond U+10FFFF, or control characters (C0, DEL,
 * C1). It goes into logs and status --json as it is, so anything else
 * (a Latin-1 "caf\xe9") would make them invalid.
 */
static int check_who(const char *who)
{
	const unsigned char *s = (const unsigned char *)who;
	size_t n = 0;

	if (!who)
		return -EINVAL;
	while (s[n]) {
		uint32_t cp, min;
		unsigned len;

		if (s[n] < 0x80) {
			cp = s[n];
			len = 1;
			min = 0;
		} else if ((s[n] & 0xe0) == 0xc0) {
			cp = s[n] & 0x1f;
			len = 2;
			min = 0x80;
		} else if ((s[n] & 0xf0) == 0xe0) {
			cp = s[n] & 0x0f;
			len = 3;
			min = 0x800;
		} else if ((s[n] & 0xf8) == 0xf0) {
			cp = s[n] & 0x07;
			len = 4;
			min = 0x10000;
		} else {
			return -EINVAL; /* a continuation byte first, or 0xf8-0xff */
		}
		for (unsigned k = 1; k < len; k++) {
			if ((s[n + k] & 0xc0) != 0x80)
				return -EINVAL; /* also stops at the NUL */
			cp = cp << 6 | (s[n + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || cp < 0x20 ||
		    (cp >= 0x7f && cp <= 0x9f))
			return -EINVAL;
		n += len;
		if (n > SHMCLOCK_LOCKSTEP_WHO_MAX)
			return -EINVAL;
	}
	return n ? 0 : -EINVAL;
}

/* -ESTALE when the clock's writer is gone or is not the one that made
 * this participants' segment. */
static int writer_check(const shmclock_lockstep_t *p)
{
	const struct shmclock_seg *s = p->clk->seg;

	if (!shmclock__writer_alive(atomic_load_explicit(&s->writer_lock.word,
							 memory_order_acquire)) ||
	    atomic_load_explicit(&s->writer_generation, memory_order_relaxed) !=
		    p->ls->writer_generation ||
	    !atomic_load_explicit(&s->lockstep, memory_order_relaxed))
		return -ESTALE;
	return 0;
}

static bool still_member(const shmclock_lockstep_t *p)
{
	return atomic_load_explicit(&p->slot->state, memory_order_acquire) == LS_MEMBER &&
	       atomic_load_explicit(&p->slot->incarnation, memory_order_relaxed) == p->incarnation;
}

/*
 * Tell the host. @grant: a grant (not a join or leave, which always wake
 * it). A grant wakes the host only when no member's grant is still at or
 * below the time the host is blocked at: with four participants due at
 * the same time, one wake-up per step instead of four.
 */
static void kick_host(struct ls_seg *ls, bool grant)
{
	int64_t at;

	/* seq_cst, with the host's seq_cst stores of block_at_ns and
	 * host_waiting and its load of grant_futex (host_wait): either the
	 * host sees this increment before it sleeps, or we see it waiting,
	 * with the block_at_ns it published. */
	atomic_fetch_add_explicit(&ls->grant_futex, 1, memory_order_seq_cst);
	if (!atomic_load_explicit(&ls->host_waiting, memory_order_seq_cst))
		return;
	if (grant) {
		at = atomic_load_explicit(&ls->block_at_ns, memory_order_seq_cst);
		/* seq_cst loads: of two last grants made at once, at least one
		 * sees the other's (Dekker on the grant stores). */
		for (unsigned i = 0; i < LS_SLOTS; i++)
			if (atomic_load_explicit(&ls->slot[i].state, memory_order_seq_cst) == LS_MEMBER &&
			    atomic_load_explicit(&ls->slot[i].grant_ns, memory_order_seq_cst) <= at)
				return; /* somebody still holds the clock there */
	}
	syscall(SYS_futex, &ls->grant_futex, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* Maps the participants' segment of @clk: read-write for a participant,
 * read-only for an observer. */
static int map_segment(const char *name, const shmclock_t *clk, bool writable, struct ls_seg **out)
{
	char path[SHMCLOCK_PATH_MAX + 32];
	struct ls_seg *ls;
	struct stat st;
	int fd, r = 0;

	ls_path(path, sizeof(path), name, false);
	fd = open(path, (writable ? O_RDWR : O_RDONLY) | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -EOPNOTSUPP : -errno;
	if (fstat(fd, &st) < 0)
		r = -errno;
	else if (!S_ISREG(st.st_mode) || st.st_size != (off_t)LS_SIZE)
		r = -EPROTO;
	else if (st.st_uid != clk->owner)
		r = -EPERM; /* not made by the clock's owner: not believed */
	if (r) {
		close(fd);
		return r;
	}
	ls = mmap(NULL, LS_SIZE, PROT_READ | (writable ? PROT_WRITE : 0), MAP_SHARED, fd, 0);
	close(fd);
	if (ls == MAP_FAILED)
		return -errno;
	if (ls->magic != LS_MAGIC || ls->abi_version != SHMCLOCK_ABI_VERSION ||
	    ls->size != LS_SIZE || ls->slots != LS_SLOTS || ls->slot_size != sizeof(struct ls_slot)) {
		munmap(ls, LS_SIZE);
		return -EPROTO;
	}
	*out = ls;
	return 0;
}

/* Take a free slot: its mutex is the claim (J1). NULL if none is free;
 * *soon is then set when a slot waits for the host to free it (its owner
 * left or died), so that a join right after a leave does not fail. */
static struct ls_slot *claim_slot(struct ls_seg *ls, bool *soon)
{
	*soon = false;
	for (unsigned i = 0; i < LS_SLOTS; i++) {
		struct ls_slot *sl = &ls->slot[i];
		int r = pthread_mutex_trylock(&sl->lock.mutex);
		uint32_t st;

		if (r == EOWNERDEAD)
			r = pthread_mutex_consistent(&sl->lock.mutex);
		if (r) {
			st = atomic_load_explicit(&sl->state, memory_order_acquire);
			*soon |= st == LS_LEFT;
			continue;
		}
		/* Not FREE: the host has not yet noticed that a former
		 * owner died or left; it will once we unlock. */
		st = atomic_load_explicit(&sl->state, memory_order_acquire);
		if (st == LS_FREE)
			return sl;
		*soon = true;
		pthread_mutex_unlock(&sl->lock.mutex);
	}
	return NULL;
}

#define JOIN_TIMEOUT_NS 2000000000

SHMCLOCK_EXPORT int shmclock_lockstep_join(const char *name, const char *who,
					   shmclock_lockstep_t **out)
{
	shmclock_lockstep_t *p;
	int64_t deadline;
	int r;

	if (!out || check_who(who) || shmclock__check_name(name))
		return -EINVAL;
	*out = NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	r = shmclock_open_ex(name, SHMCLOCK_OPEN_NO_CALLBACKS, &p->clk);
	if (r)
		goto fail;
	if (!atomic_load_explicit(&p->clk->seg->lockstep, memory_order_acquire)) {
		r = -EOPNOTSUPP;
		goto fail;
	}
	r = map_segment(name, p->clk, true, &p->ls);
	if (r)
		goto fail;
	r = writer_check(p);
	if (r)
		goto fail;
	deadline = shmclock__mono_ns() + JOIN_TIMEOUT_NS;
	for (;;) {
		bool soon;
		struct timespec ms = { 0, 1000000 };

		p->slot = claim_slot(p->ls, &soon);
		if (p->slot)
			break;
		if (!soon || shmclock__mono_ns() >= deadline) {
			r = -ENOSPC;
			goto fail;
		}
		kick_host(p->ls, false);
		nanosleep(&ms, NULL);
	}
	who_set(p->slot, who);
	atomic_store_explicit(&p->slot->pid, (int32_t)getpid(), memory_order_relaxed);
	atomic_store_explicit(&p->slot->tid, (int32_t)syscall(SYS_gettid), memory_order_relaxed);
	atomic_store_explicit(&p->slot->granted_mono, 0, memory_order_relaxed);
	p->stats = &p->ls->stats[p->slot - p->ls->slot];
	atomic_store_explicit(&p->stats->grants, 0, memory_order_relaxed);
	atomic_store_explicit(&p->stats->steps, 0, memory_order_relaxed);
	atomic_store_explicit(&p->stats->work_ns, 0, memory_order_relaxed);
	atomic_store_explicit(&p->stats->wait_ns, 0, memory_order_relaxed);
	atomic_store_explicit(&p->stats->returned_mono, 0, memory_order_relaxed);
	for (unsigned i = 0; i < LS_HIST; i++) {
		atomic_store_explicit(&p->stats->work_hist[i], 0, memory_order_relaxed);
		atomic_store_explicit(&p->stats->wait_hist[i], 0, memory_order_relaxed);
	}
	/* J1. Pairs with the host's acquire load of state (H1): who and pid
	 * are there when it sees JOINING. */
	atomic_store_explicit(&p->slot->state, LS_JOINING, memory_order_release);
	kick_host(p->ls, false);
	for (;;) {
		uint32_t a = atomic_load_explicit(&p->slot->ack, memory_order_acquire);
		uint32_t st = atomic_load_explicit(&p->slot->state, memory_order_acquire);
		uint32_t joining = LS_JOINING;

		if (st == LS_MEMBER)
			break; /* J2: acquire pairs with the host's CAS (H1) */
		r = writer_check(p);
		if (!r && st != LS_JOINING)
			r = -ECANCELED;
		if (!r && shmclock__mono_ns() >= deadline)
			r = -ETIMEDOUT;
		/* Withdraw, unless the host accepted us just now. */
		if (r && atomic_compare_exchange_strong_explicit(&p->slot->state, &joining, LS_FREE,
								 memory_order_acq_rel,
								 memory_order_acquire)) {
			pthread_mutex_unlock(&p->slot->lock.mutex);
			goto fail;
		}
		if (r && joining == LS_MEMBER)
			break;
		if (r) { /* evicted before it began: leave the slot to the host */
			pthread_mutex_unlock(&p->slot->lock.mutex);
			goto fail;
		}
		shmclock__futex_wait(&p->slot->ack, a, 10000000);
	}
	p->incarnation = atomic_load_explicit(&p->slot->incarnation, memory_order_relaxed);
	p->joined_at = atomic_load_explicit(&p->slot->joined_sim_ns, memory_order_relaxed);
	p->last = p->seen = p->joined_at;
	*out = p;
	return 0;
fail:
	if (p->ls)
		munmap(p->ls, LS_SIZE);
	shmclock_close(p->clk);
	free(p);
	return r;
}

SHMCLOCK_EXPORT int shmclock_lockstep_grant(shmclock_lockstep_t *p, int64_t until_ns)
{
	int64_t max;

	if (!p)
		return -EINVAL;
	if (!still_member(p))
		return -ECANCELED;
	if (until_ns < p->last) {
		p->why = p->last == p->joined_at
				 ? "a grant before the clock time this participant joined at"
				 : "a grant before this participant's last grant (grants never go back)";
		return -EINVAL;
	}
	if (until_ns == INT64_MAX) {
		p->why = "a grant of INT64_MAX: beyond the clock's range";
		return -EINVAL;
	}
	if (until_ns == p->last)
		return 0;
	/* The horizon. A lockstep clock never goes back, so the time we saw
	 * last is a lower bound of its time now: a step shorter than the
	 * horizon needs no read of the clock. Relaxed: the host may change
	 * the horizon at any time (reload); either value is a valid check. */
	max = atomic_load_explicit(&p->slot->max_ahead_ns, memory_order_relaxed);
	if (until_ns > shmclock__sat_add(p->seen, max)) {
		int64_t now;
		int r = shmclock_now(p->clk, &now);

		if ((r == 0 || r == -ESTALE) && now > p->seen)
			p->seen = now;
		if (until_ns > shmclock__sat_add(p->seen, max)) {
			p->why = "a grant beyond the horizon: the clock's time + the writer's "
				 "MaxGrantAhead (--max-grant-ahead)";
			return -EINVAL;
		}
	}
	/* Our figures: the work since our last return from advance ends. */
	{
		int64_t now = shmclock__mono_ns();
		int64_t ret = atomic_load_explicit(&p->stats->returned_mono, memory_order_relaxed);

		if (ret) {
			stat_add(&p->stats->work_ns, p->stats->work_hist, now - ret);
			atomic_store_explicit(&p->stats->returned_mono, 0, memory_order_relaxed);
		}
		stat_inc(&p->stats->grants);
		p->granted_mono = now;
		/* Relaxed: a statistic; the grant's release below orders it
		 * for a host that reads it after the grant anyway. */
		atomic_store_explicit(&p->slot->granted_mono, now, memory_order_relaxed);
	}
	/* G1. Pairs with the host's acquire load of grant_ns (H2): all this
	 * participant did before is visible to whoever sees the clock at
	 * until_ns (the host commits it after that load). seq_cst for
	 * kick_host's scan of the other grants. */
	atomic_store_explicit(&p->slot->grant_ns, until_ns, memory_order_seq_cst);
	p->last = until_ns;
	kick_host(p->ls, true);
	return 0;
}

/* The clock reading of this thread's last shmclock_now() in advance(): the
 * instant it returns at, for its waiting time, without reading the clock
 * once more (a step is a few microseconds: a reading is ~1% of it). */
static _Thread_local int64_t read_mono;

static int64_t mono_kept(void)
{
	return read_mono = shmclock__mono_ns();
}

/* shmclock_now(), keeping its clock reading in read_mono (0 when the slow
 * path answered). */
static int now_keeping_mono(shmclock_t *clk, int64_t *now)
{
	if (__builtin_expect(shmclock_static_read(clk, mono_kept, NULL, now, NULL, NULL), 1))
		return 0;
	read_mono = 0;
	return shmclock_now(clk, now);
}

/* How long a waiter sleeps between checks of the writer's life: a dead
 * writer wakes nobody. */
#define LIFE_SLICE_NS 100000000

SHMCLOCK_EXPORT int shmclock_lockstep_advance(shmclock_lockstep_t *p, int64_t until_ns,
					      shmclock_duration_t timeout)
{
	const struct shmclock_seg *s;
	int64_t deadline;
	int r = shmclock_lockstep_grant(p, until_ns);

	if (r)
		return r;
	s = p->clk->seg;
	if (p->yield_backoff)
		p->yield_backoff--;
	deadline = timeout.ns < 0 ? INT64_MAX : shmclock__sat_add(shmclock__mono_ns(), timeout.ns);
	for (int spins = 0;; spins++) {
		/* Acquire: a commit after this load changes the word, so the
		 * wait below returns at once (pairs with writer.c's release
		 * increment after the commit). */
		uint32_t tok = atomic_load_explicit(&s->change_futex, memory_order_acquire);
		int64_t now, left;

		r = now_keeping_mono(p->clk, &now);
		if ((r == 0 || r == -ESTALE) && now >= until_ns) {
			int64_t m = read_mono ? read_mono : shmclock__mono_ns();

			p->seen = now;
			/* Our figures: the wait since our grant ends, work begins. */
			if (p->granted_mono)
				stat_add(&p->stats->wait_ns, p->stats->wait_hist, m - p->granted_mono);
			stat_inc(&p->stats->steps);
			atomic_store_explicit(&p->stats->returned_mono, m, memory_order_relaxed);
			return 0;
		}
		if (!still_member(p))
			return -ECANCELED;
		r = writer_check(p);
		if (r)
			return r;
		if (spins < PARTICIPANT_YIELDS && !p->yield_backoff) {
			if (!yield_briefly(&p->yield_backoff))
				spins = PARTICIPANT_YIELDS;
			continue;
		}
		left = deadline == INT64_MAX ? INT64_MAX : deadline - shmclock__mono_ns();
		if (left <= 0)
			return -ETIMEDOUT;
		shmclock__futex_wait(&s->change_futex, tok, left < LIFE_SLICE_NS ? left : LIFE_SLICE_NS);
	}
}

SHMCLOCK_EXPORT const char *shmclock_lockstep_strerror(const shmclock_lockstep_t *p, int err)
{
	switch (err) {
	case 0:
		return "success";
	case -EINVAL:
		if (p && p->why)
			return p->why;
		return "invalid argument: a grant before the participant's last one, beyond the "
		       "clock's time + MaxGrantAhead or INT64_MAX; or a participant name that is "
		       "not 1 to 64 bytes of UTF-8 without control characters; or a bad clock name";
	case -ENOENT:
		return "no such clock";
	case -EOPNOTSUPP:
		return "the clock is not in lockstep mode (shmclockd --lockstep N)";
	case -ENOSPC:
		return "all 64 participant slots of this clock are taken";
	case -EACCES:
		return "not allowed to join: neither the clock's user nor in its ControlGroup";
	case -EPERM:
		return "the lockstep segment is not owned by the clock's owner: not believed";
	case -EPROTO:
		return "not a lockstep segment of this ABI version";
	case -ESTALE:
		return "the clock's writer is gone or was replaced (join again)";
	case -ETIMEDOUT:
		return "timed out: the clock did not reach the grant in time (or the writer did "
		       "not answer a join)";
	case -ECANCELED:
		return "this participant was evicted (by hand, a stall, or a broken slot), or its "
		       "join was refused";
	default:
		return shmclock_strerror(err);
	}
}

SHMCLOCK_EXPORT int64_t shmclock_lockstep_max_ahead(const shmclock_lockstep_t *p)
{
	return p ? atomic_load_explicit(&p->ls->max_ahead_ns, memory_order_relaxed) : 0;
}

SHMCLOCK_EXPORT int64_t shmclock_lockstep_joined_at(const shmclock_lockstep_t *p)
{
	return p ? p->joined_at : 0;
}

SHMCLOCK_EXPORT shmclock_t *shmclock_lockstep_clock(shmclock_lockstep_t *p)
{
	return p ? p->clk : NULL;
}

SHMCLOCK_EXPORT void shmclock_lockstep_leave(shmclock_lockstep_t *p)
{
	if (!p)
		return;
	if (still_member(p)) {
		/* L1. Release: pairs with the host's acquire load of state. */
		atomic_store_explicit(&p->slot->state, LS_LEFT, memory_order_release);
		kick_host(p->ls, false);
	}
	/* Evicted: the host frees the slot once it sees the lock released. */
	pthread_mutex_unlock(&p->slot->lock.mutex);
	munmap(p->ls, LS_SIZE);
	shmclock_close(p->clk);
	free(p);
}

/* ---- the host ---------------------------------------------------------- */

struct shmclock_lockstep_host {
	shmclock_writer_t *w;
	struct shmclock_seg *clock;
	struct ls_seg *ls;
	char path[SHMCLOCK_PATH_MAX + 32];
	dev_t dev;
	ino_t ino;
	uint64_t members;   /* bit i: slot i is a member (as of the last scan) */
	int32_t tid[LS_SLOTS]; /* the joining thread of slot i, recorded at
				* acceptance: its lock word must name it */
	int64_t max_ahead_check; /* the largest horizon ever set: a member
				  * beyond it broke the protocol */
	int last_granter;   /* the member with the latest grant at the last scan */
	/* How often slot i's grant was the last the clock waited for (any
	 * thread reads them: relaxed, statistics). */
	_Atomic uint64_t last_count[LS_SLOTS];
	int64_t now_sim;    /* the clock's time at the last scan or commit */
	int64_t held_sim;   /* ... at the last shmclock_lockstep_host_committed() */
	uint32_t yield_backoff; /* waits left without yielding (yield_briefly) */
};

SHMCLOCK_EXPORT int shmclock_lockstep_host_create(shmclock_writer_t *w, const char *name,
						  unsigned mode, gid_t gid,
						  shmclock_lockstep_host_t **out)
{
	char tmp[SHMCLOCK_PATH_MAX + 32], tmp_path[SHMCLOCK_PATH_MAX + 48];
	shmclock_lockstep_host_t *h;
	struct stat st;
	int fd, r;

	if (!w || !out || shmclock__check_name(name) || (mode & ~0660u))
		return -EINVAL;
	*out = NULL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->w = w;
	h->clock = shmclock__writer_seg(w);
	ls_path(h->path, sizeof(h->path), name, false);
	/* Made whole under a temporary name, then renamed into place: a
	 * joiner never sees half a segment, and a predecessor's is replaced. */
	snprintf(tmp, sizeof(tmp), "/shmclock-tmp.%d.lockstep.%s", (int)getpid(), name);
	snprintf(tmp_path, sizeof(tmp_path), "%s%s", SHMCLOCK_SHM_DIR, tmp);
	shm_unlink(tmp);
	fd = shm_open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		free(h);
		return -errno;
	}
	if ((gid != (gid_t)-1 && fchown(fd, (uid_t)-1, gid) < 0) || fchmod(fd, mode) < 0 ||
	    ftruncate(fd, LS_SIZE) < 0 || fstat(fd, &st) < 0) {
		r = -errno;
		goto fail;
	}
	r = -posix_fallocate(fd, 0, LS_SIZE);
	if (r)
		goto fail;
	h->ls = mmap(NULL, LS_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (h->ls == MAP_FAILED) {
		r = -errno;
		h->ls = NULL;
		goto fail;
	}
	h->ls->magic = LS_MAGIC;
	h->ls->abi_version = SHMCLOCK_ABI_VERSION;
	h->ls->size = LS_SIZE;
	h->ls->slots = LS_SLOTS;
	h->ls->slot_size = sizeof(struct ls_slot);
	h->ls->writer_generation =
		atomic_load_explicit(&h->clock->writer_generation, memory_order_relaxed);
	atomic_store_explicit(&h->ls->max_ahead_ns, SHMCLOCK_LOCKSTEP_MAX_AHEAD_DEFAULT,
			      memory_order_relaxed);
	h->max_ahead_check = SHMCLOCK_LOCKSTEP_MAX_AHEAD_DEFAULT;
	for (unsigned i = 0; i < LS_SLOTS; i++)
		shmclock__robust_mutex_init(&h->ls->slot[i].lock.mutex);
	if (rename(tmp_path, h->path) < 0) {
		r = -errno;
		goto fail;
	}
	close(fd);
	h->dev = st.st_dev;
	h->ino = st.st_ino;
	/* Release: a joiner that sees the mark finds the file in place. */
	atomic_store_explicit(&h->clock->lockstep, 1, memory_order_release);
	*out = h;
	return 0;
fail:
	if (h->ls)
		munmap(h->ls, LS_SIZE);
	close(fd);
	shm_unlink(tmp);
	free(h);
	return r;
}

SHMCLOCK_EXPORT uint32_t shmclock_lockstep_host_token(shmclock_lockstep_host_t *h)
{
	/* Acquire: pairs with the participants' increments (kick_host). */
	return atomic_load_explicit(&h->ls->grant_futex, memory_order_acquire);
}

static void fill(const struct ls_slot *sl, unsigned i, struct shmclock_lockstep_participant *p)
{
	p->slot = i;
	p->pid = atomic_load_explicit(&sl->pid, memory_order_relaxed);
	who_get(sl, p->who);
	/* Checked at the join, but a member can rewrite its name since:
	 * logs and status --json get valid UTF-8 whatever it wrote. */
	if (check_who(p->who))
		for (char *c = p->who; *c; c++)
			if ((unsigned char)*c >= 0x7f || (unsigned char)*c < 0x20)
				*c = '?';
	p->grant_ns = atomic_load_explicit(&sl->grant_ns, memory_order_acquire);
	p->joined_sim_ns = atomic_load_explicit(&sl->joined_sim_ns, memory_order_relaxed);
	p->holding_since_ns = atomic_load_explicit(&sl->holding_since, memory_order_relaxed);
}

static void free_slot(shmclock_lockstep_host_t *h, unsigned i)
{
	struct ls_slot *sl = &h->ls->slot[i];

	atomic_store_explicit(&sl->holding_since, 0, memory_order_relaxed);
	atomic_store_explicit(&sl->pid, 0, memory_order_relaxed);
	who_set(sl, "");
	/* Release: a joiner that sees FREE sees the slot cleared. */
	atomic_store_explicit(&sl->state, LS_FREE, memory_order_release);
	h->members &= ~(UINT64_C(1) << i);
}

/* A join the host accepts: a name of the documented set, and a slot lock
 * held by the thread the joiner says it is (tid, written before JOINING). */
static bool join_valid(const struct ls_slot *sl, uint32_t word)
{
	char who[SHMCLOCK_LOCKSTEP_WHO_MAX + 1];
	int32_t tid = atomic_load_explicit(&sl->tid, memory_order_relaxed);

	who_get(sl, who);
	return !check_who(who) && tid > 0 && (word & SHMCLOCK_LOCK_TID_MASK) == (uint32_t)tid;
}

/* MEMBER -> EVICTED: its calls return -ECANCELED; the slot is free again
 * once its lock is released. -ENOENT: not a member (any more). */
static int evict_slot(shmclock_lockstep_host_t *h, unsigned i)
{
	struct ls_slot *sl = &h->ls->slot[i];
	uint32_t member = LS_MEMBER;

	if (!atomic_compare_exchange_strong_explicit(&sl->state, &member, LS_EVICTED,
						     memory_order_acq_rel, memory_order_relaxed))
		return -ENOENT; /* it left meanwhile: the next scan says so */
	h->members &= ~(UINT64_C(1) << i);
	atomic_fetch_add_explicit(&sl->ack, 1, memory_order_release);
	shmclock__futex_wake_all(&sl->ack);
	/* It may sleep on the clock: wake it without a commit (a change of
	 * the word is only a hint to sleepers). Release: pairs with the
	 * participant's acquire load of change_futex before it re-checks its
	 * state. */
	atomic_fetch_add_explicit(&h->clock->change_futex, 1, memory_order_release);
	shmclock__futex_wake_all(&h->clock->change_futex);
	return 0;
}

SHMCLOCK_EXPORT void shmclock_lockstep_host_scan(shmclock_lockstep_host_t *h, int64_t now_sim,
						 shmclock_lockstep_event_cb cb, void *user,
						 int64_t *min_grant, unsigned *members)
{
	struct shmclock_lockstep_participant info;
	int64_t min = INT64_MAX, latest = INT64_MIN;
	unsigned n = 0;

	h->now_sim = now_sim;
	h->last_granter = -1;
	for (unsigned i = 0; i < LS_SLOTS; i++) {
		struct ls_slot *sl = &h->ls->slot[i];
		/* H2: the lock word first, then the state, then the grant: a
		 * grant we count belongs to a participant whose lock was alive
		 * after (or when) it was made. */
		uint32_t word = lock_word(sl);
		bool alive = shmclock__writer_alive(word);
		uint32_t st = atomic_load_explicit(&sl->state, memory_order_acquire);
		uint32_t joining = LS_JOINING;
		uint64_t bit = UINT64_C(1) << i;
		int64_t g;

		switch (st) {
		case LS_FREE:
			continue;
		case LS_JOINING:
			if (!alive) { /* died while joining */
				atomic_compare_exchange_strong_explicit(&sl->state, &joining, LS_FREE,
									memory_order_acq_rel,
									memory_order_relaxed);
				continue;
			}
			if (!join_valid(sl, word)) {
				/* Refused: the joiner sees FREE and gets -ECANCELED
				 * (the CAS fails if it withdrew meanwhile). */
				if (atomic_compare_exchange_strong_explicit(&sl->state, &joining, LS_FREE,
									    memory_order_acq_rel,
									    memory_order_relaxed)) {
					atomic_fetch_add_explicit(&sl->ack, 1, memory_order_release);
					shmclock__futex_wake_all(&sl->ack);
					if (cb) {
						fill(sl, i, &info);
						cb(SHMCLOCK_LOCKSTEP_REFUSED, &info, user);
					}
				}
				continue;
			}
			h->tid[i] = atomic_load_explicit(&sl->tid, memory_order_relaxed);
			/* Before the CAS below (release): the joiner sees it. */
			atomic_store_explicit(&sl->max_ahead_ns,
					      atomic_load_explicit(&h->ls->max_ahead_ns,
								   memory_order_relaxed),
					      memory_order_relaxed);
			atomic_store_explicit(&h->last_count[i], 0, memory_order_relaxed);
			atomic_store_explicit(&sl->grant_ns, now_sim, memory_order_relaxed);
			atomic_store_explicit(&sl->joined_sim_ns, now_sim, memory_order_relaxed);
			atomic_store_explicit(&sl->holding_since, 0, memory_order_relaxed);
			atomic_fetch_add_explicit(&sl->incarnation, 1, memory_order_relaxed);
			/* H1. Release: the joiner that sees MEMBER sees the
			 * values above. It may have withdrawn meanwhile (CAS). */
			if (!atomic_compare_exchange_strong_explicit(&sl->state, &joining, LS_MEMBER,
								     memory_order_acq_rel,
								     memory_order_relaxed))
				continue;
			atomic_fetch_add_explicit(&sl->ack, 1, memory_order_release);
			shmclock__futex_wake_all(&sl->ack);
			h->members |= UINT64_C(1) << i;
			if (cb) {
				fill(sl, i, &info);
				cb(SHMCLOCK_LOCKSTEP_JOINED, &info, user);
			}
			break;
		case LS_MEMBER:
			if (!(h->members & bit)) {
				/* Never accepted by us: written by hand. */
				free_slot(h, i);
				continue;
			}
			if (!alive) {
				if (cb) {
					fill(sl, i, &info);
					cb(SHMCLOCK_LOCKSTEP_DIED, &info, user);
				}
				free_slot(h, i);
				continue;
			}
			/* Alive, but is it still the thread that joined? A lock
			 * word naming any other (TID 1 lives for ever) would
			 * hold the clock as long as that one lives. */
			if ((word & SHMCLOCK_LOCK_TID_MASK) != (uint32_t)h->tid[i] ||
			    atomic_load_explicit(&sl->grant_ns, memory_order_relaxed) >
				    shmclock__sat_add(now_sim, h->max_ahead_check)) {
				if (cb) {
					fill(sl, i, &info);
					cb(SHMCLOCK_LOCKSTEP_INVALID, &info, user);
				}
				evict_slot(h, i);
				continue;
			}
			break;
		case LS_LEFT:
			if (cb) {
				fill(sl, i, &info);
				cb(SHMCLOCK_LOCKSTEP_LEFT, &info, user);
			}
			free_slot(h, i);
			continue;
		case LS_EVICTED:
		default:
			/* An evicted participant's slot is free once its lock
			 * is released; garbage in state is no member. */
			if (!alive || st != LS_EVICTED)
				free_slot(h, i);
			continue;
		}
		h->members |= bit;
		/* Acquire: pairs with the release store of the grant (G1). */
		g = atomic_load_explicit(&sl->grant_ns, memory_order_acquire);
		if (g < min)
			min = g;
		n++;
		{
			/* Relaxed: a statistic, on the line the grant is on. */
			int64_t gm = atomic_load_explicit(&sl->granted_mono, memory_order_relaxed);

			if (gm > latest) {
				latest = gm;
				h->last_granter = (int)i;
			}
		}
	}
	*min_grant = min;
	*members = n;
}

SHMCLOCK_EXPORT void shmclock_lockstep_host_committed(shmclock_lockstep_host_t *h, int64_t now_sim)
{
	/* The clock moved: whoever holds it now has held it since now. */
	bool moved = now_sim != h->held_sim;
	int64_t mono = 0;

	if (moved && h->last_granter >= 0 && (h->members & (UINT64_C(1) << h->last_granter)))
		atomic_fetch_add_explicit(&h->last_count[h->last_granter], 1, memory_order_relaxed);
	h->now_sim = h->held_sim = now_sim;
	for (uint64_t m = h->members; m; m &= m - 1) {
		struct ls_slot *sl = &h->ls->slot[__builtin_ctzll(m)];
		bool holds = atomic_load_explicit(&sl->grant_ns, memory_order_relaxed) <= now_sim;
		int64_t since = atomic_load_explicit(&sl->holding_since, memory_order_relaxed);

		if (holds && (!since || moved)) {
			if (!mono)
				mono = shmclock__mono_ns();
			atomic_store_explicit(&sl->holding_since, mono, memory_order_relaxed);
		} else if (!holds && since) {
			atomic_store_explicit(&sl->holding_since, 0, memory_order_relaxed);
		}
	}
}

/* Without futex_waitv: how long a host sleeps at most before it looks at
 * the private word of a caller that does not call host_kick(). */
#define ALSO_SLICE_NS 100000000

SHMCLOCK_EXPORT void shmclock_lockstep_host_kick(shmclock_lockstep_host_t *h)
{
	/* seq_cst: as kick_host's increment, with the host's seq_cst store
	 * of host_waiting and its load of grant_futex (Dekker): either the
	 * host sees the increment before it sleeps, or the wake finds it. */
	atomic_fetch_add_explicit(&h->ls->grant_futex, 1, memory_order_seq_cst);
	syscall(SYS_futex, &h->ls->grant_futex, FUTEX_WAKE, 1, NULL, NULL, 0);
}

SHMCLOCK_EXPORT int shmclock_lockstep_host_set_max_ahead(shmclock_lockstep_host_t *h, int64_t ns)
{
	if (!h || ns <= 0)
		return -EINVAL;
	/* Relaxed: participants check it before granting, and either value
	 * is a valid horizon while it changes. The host's own check of grants
	 * uses the largest ever set, so a grant made under a larger horizon
	 * is never held against its participant. */
	atomic_store_explicit(&h->ls->max_ahead_ns, ns, memory_order_relaxed);
	for (unsigned i = 0; i < LS_SLOTS; i++)
		atomic_store_explicit(&h->ls->slot[i].max_ahead_ns, ns, memory_order_relaxed);
	if (ns > h->max_ahead_check)
		h->max_ahead_check = ns;
	return 0;
}

SHMCLOCK_EXPORT void shmclock_lockstep_host_wait(shmclock_lockstep_host_t *h, uint32_t token,
						 uint32_t *also, uint32_t also_val,
						 int64_t deadline_mono)
{
	struct ls_seg *ls = h->ls;

	if (h->yield_backoff)
		h->yield_backoff--;
	for (int i = 0; i < HOST_YIELDS && !h->yield_backoff; i++) {
		if (atomic_load_explicit(&ls->grant_futex, memory_order_acquire) != token ||
		    (also && __atomic_load_n(also, __ATOMIC_ACQUIRE) != also_val))
			return;
		if (!yield_briefly(&h->yield_backoff))
			break;
	}
	/* Blocked at the clock's time, not at a grant loaded anew: one that
	 * moved since the scan would hide the last grant we wait for (the
	 * spin model's mutant LS_BLOCK_AT_FRESH hangs). seq_cst: pairs with
	 * kick_host's increment and loads (Dekker). */
	atomic_store_explicit(&ls->block_at_ns, h->now_sim, memory_order_seq_cst);
	atomic_store_explicit(&ls->host_waiting, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&ls->grant_futex, memory_order_seq_cst) == token &&
	    futex_waitv2(&ls->grant_futex, token, also, also_val, deadline_mono) < 0 &&
	    errno == ENOSYS) {
		/* No futex_waitv (Linux < 5.16): the grant word only, which
		 * shmclock_lockstep_host_kick() bumps for whoever changes
		 * *also. An absolute deadline: one already past (the yields
		 * above can overrun it) returns at once, where a relative
		 * timeout computed from it went negative, which FUTEX_WAIT
		 * took as none at all. A caller that does not kick is seen
		 * within ALSO_SLICE_NS. */
		int64_t until = deadline_mono;

		if (also) {
			int64_t cap = shmclock__sat_add(shmclock__mono_ns(), ALSO_SLICE_NS);

			if (cap < until)
				until = cap;
		}
		if (!also || __atomic_load_n(also, __ATOMIC_ACQUIRE) == also_val)
			shmclock__futex_wait_until(&ls->grant_futex, token, until);
	}
	atomic_store_explicit(&ls->host_waiting, 0, memory_order_relaxed);
}

SHMCLOCK_EXPORT int shmclock_lockstep_host_evict(shmclock_lockstep_host_t *h, const char *who)
{
	char name[SHMCLOCK_LOCKSTEP_WHO_MAX + 1];

	if (!who)
		return -EINVAL;
	for (uint64_t m = h->members; m; m &= m - 1) {
		unsigned i = (unsigned)__builtin_ctzll(m);

		who_get(&h->ls->slot[i], name);
		if (!strcmp(name, who) && !evict_slot(h, i))
			return 0;
	}
	return -ENOENT;
}

SHMCLOCK_EXPORT int shmclock_lockstep_host_evict_slot(shmclock_lockstep_host_t *h, unsigned slot)
{
	if (!h || slot >= LS_SLOTS || !(h->members & (UINT64_C(1) << slot)))
		return -ENOENT;
	return evict_slot(h, slot);
}

SHMCLOCK_EXPORT unsigned shmclock_lockstep_host_list(shmclock_lockstep_host_t *h,
						     struct shmclock_lockstep_participant *out,
						     unsigned max)
{
	unsigned n = 0;

	/* Any thread: only loads of the shared slots. */
	for (unsigned i = 0; i < LS_SLOTS; i++) {
		const struct ls_slot *sl = &h->ls->slot[i];

		if (atomic_load_explicit(&sl->state, memory_order_acquire) != LS_MEMBER)
			continue;
		if (n < max)
			fill(sl, i, &out[n]);
		n++;
	}
	return n;
}

SHMCLOCK_EXPORT int shmclock_lockstep_host_stats(shmclock_lockstep_host_t *h, unsigned slot,
						 struct shmclock_lockstep_stats *out)
{
	const struct ls_stats *st;
	int64_t ret;

	if (!h || !out || slot >= LS_SLOTS ||
	    atomic_load_explicit(&h->ls->slot[slot].state, memory_order_acquire) != LS_MEMBER)
		return -ENOENT;
	/* Any thread: relaxed loads of figures the participant writes. */
	st = &h->ls->stats[slot];
	memset(out, 0, sizeof(*out));
	out->grants = atomic_load_explicit(&st->grants, memory_order_relaxed);
	out->steps = atomic_load_explicit(&st->steps, memory_order_relaxed);
	out->last_to_grant = atomic_load_explicit(&h->last_count[slot], memory_order_relaxed);
	out->work_ns = atomic_load_explicit(&st->work_ns, memory_order_relaxed);
	out->wait_ns = atomic_load_explicit(&st->wait_ns, memory_order_relaxed);
	out->work_p50_ns = hist_pct(st->work_hist, 0.50);
	out->work_p99_ns = hist_pct(st->work_hist, 0.99);
	out->wait_p50_ns = hist_pct(st->wait_hist, 0.50);
	out->wait_p99_ns = hist_pct(st->wait_hist, 0.99);
	ret = atomic_load_explicit(&st->returned_mono, memory_order_relaxed);
	if (ret) {
		out->working_for_ns = shmclock__mono_ns() - ret;
		if (out->working_for_ns < 0)
			out->working_for_ns = 0;
	}
	return 0;
}

SHMCLOCK_EXPORT void shmclock_lockstep_host_destroy(shmclock_lockstep_host_t *h)
{
	struct stat st;

	if (!h)
		return;
	atomic_store_explicit(&h->clock->lockstep, 0, memory_order_release);
	/* Only our file: a successor may have put its own in place. */
	if (stat(h->path, &st) == 0 && st.st_dev == h->dev && st.st_ino == h->ino)
		unlink(h->path);
	munmap(h->ls, LS_SIZE);
	free(h);
}

/*
 * Observers (shmclockctl trace): the participants' segment mapped
 * read-only, sampled with relaxed loads of what participants write anyway.
 * Nothing here is on a participant's or the host's path; a sample may mix
 * a participant's figures from either side of a step, which the caller
 * sees as a step between two samples.
 */
struct shmclock_lockstep_observer {
	shmclock_t *clk;
	struct ls_seg *ls;
};

SHMCLOCK_EXPORT int shmclock_lockstep_observe(const char *name,
					      shmclock_lockstep_observer_t **out)
{
	shmclock_lockstep_observer_t *o;
	int r;

	if (!out)
		return -EINVAL;
	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	r = shmclock_open(name, &o->clk);
	if (!r)
		r = map_segment(name, o->clk, false, &o->ls);
	if (r) {
		shmclock_close(o->clk);
		free(o);
		return r;
	}
	*out = o;
	return 0;
}

SHMCLOCK_EXPORT unsigned shmclock_lockstep_observe_sample(shmclock_lockstep_observer_t *o,
							  struct shmclock_lockstep_sample *out,
							  unsigned max)
{
	unsigned n = 0;

	for (unsigned i = 0; i < LS_SLOTS; i++) {
		const struct ls_slot *sl = &o->ls->slot[i];
		const struct ls_stats *st = &o->ls->stats[i];
		struct shmclock_lockstep_sample *x;

		/* Acquire: pairs with the host's release of MEMBER; the
		 * figures are relaxed (statistics, nothing ordered by them). */
		if (atomic_load_explicit(&sl->state, memory_order_acquire) != LS_MEMBER)
			continue;
		if (n >= max) {
			n++;
			continue;
		}
		x = &out[n++];
		memset(x, 0, sizeof(*x));
		fill(sl, i, &x->p);
		x->incarnation = atomic_load_explicit(&sl->incarnation, memory_order_relaxed);
		x->grants = atomic_load_explicit(&st->grants, memory_order_relaxed);
		x->steps = atomic_load_explicit(&st->steps, memory_order_relaxed);
		x->work_ns = atomic_load_explicit(&st->work_ns, memory_order_relaxed);
		x->wait_ns = atomic_load_explicit(&st->wait_ns, memory_order_relaxed);
		x->granted_mono = atomic_load_explicit(&sl->granted_mono, memory_order_relaxed);
		x->returned_mono = atomic_load_explicit(&st->returned_mono, memory_order_relaxed);
	}
	return n;
}

SHMCLOCK_EXPORT shmclock_t *shmclock_lockstep_observe_clock(shmclock_lockstep_observer_t *o)
{
	return o ? o->clk : NULL;
}

SHMCLOCK_EXPORT void shmclock_lockstep_observe_close(shmclock_lockstep_observer_t *o)
{
	if (!o)
		return;
	munmap(o->ls, LS_SIZE);
	shmclock_close(o->clk);
	free(o);
}
