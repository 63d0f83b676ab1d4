/* SPDX-License-Identifier: MIT */
/* A reader's handle: shared by reader.c, jump.c and time.c. */
#ifndef SHMCLOCK_CLOCK_H
#define SHMCLOCK_CLOCK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/types.h>

#include <urcu/list.h>

#include "common.h"

/* What a reader compares to notice a jump: the jump epoch, the source id
 * and the INIT bit. A change sends it through jump delivery. */
#define SHMCLOCK_KEY_FLAGS (SHMCLOCK_F_SOURCE_MASK | SHMCLOCK_F_INIT)

static inline uint64_t shmclock__key(uint64_t jump_epoch, uint32_t flags)
{
	return (jump_epoch << 16) | (flags & SHMCLOCK_KEY_FLAGS);
}

static_assert(SHMCLOCK_KEY_FLAGS == 0xff01u, "frozen ABI: the static header compares 0xff01");
/* The static header compares (flags & 0xff11) with the key: the STALE bit,
 * never in the key, sends every read of a stale clock to now_checked(). */
static_assert(((SHMCLOCK_KEY_FLAGS | SHMCLOCK_F_STALE) == 0xff11u) &&
		      !(SHMCLOCK_KEY_FLAGS & SHMCLOCK_F_STALE),
	      "the static header's mask is the key's flags plus STALE");

struct shmclock_jump_reg;

/* ThreadSanitizer annotations for liburcu's orderings. */
#include "tsan.h" /* libshmclock/common */

struct shmclock {
	/* Frozen ABI (the inline fast path reads both). */
	const struct shmclock_seg *seg;
	_Atomic uint64_t seen_key;     /* key this process has delivered */

	bool fallback;                 /* seg is our own page of system time */
	uid_t owner;                   /* the segment file's owner */
	char name[SHMCLOCK_NAME_MAX + 1];

	pthread_mutex_t jump_lock;     /* one delivery at a time */
	pthread_mutex_t reg_lock;      /* registry updates */
	struct cds_list_head regs;     /* RCU list of struct shmclock_jump_reg */
	struct shmclock_jump_reg *graveyard; /* removed inside a callback */
	uint64_t next_id;

	_Atomic uint32_t cancel_gen;   /* shmclock_cancel_sleeps() */
	/* No callbacks, ever (the preload shim): delivering a jump only
	 * records its key, with no lock, so reads stay async-signal-safe. */
	bool jumps_off;

	pthread_mutex_t watch_lock;
	pthread_t watcher;
	bool watching;
	_Atomic bool watch_stop;

	/* Clocks with callbacks (!jumps_off) are on one list, for fork (jump.c). */
	struct cds_list_head fork_node;
	/* In a child: fix-ups left for the first read there (jump.c). */
	_Atomic bool forked;
	bool rewatch;                  /* start the watcher again */
	uint64_t key_at_fork;          /* seen_key, stood in for by KEY_FORKED */
};

/*
 * The fast paths of shmclock_now_monotonic() and shmclock_now_unix()
 * (the static header's read, R1-R6, plus the one field each adds), inline:
 * from a segment @seg and a handle's seen key @key (the preload shim keeps
 * both at hand: its clock_gettime keeps the value in a register, with no
 * call, and its first seq load waits for one load), or from a handle.
 * 1 when answered; 0 sends the caller to the exported function, which
 * reads again and takes the checked path.
 */
static inline __attribute__((always_inline)) int
shmclock__fast_monotonic_at(const struct shmclock_seg *seg, const _Atomic uint64_t *key, int64_t *ns)
{
	const struct shmclock_record *rec = (const struct shmclock_record *)(const void *)
		((const unsigned char *)seg + SHMCLOCK_RECORD_OFFSET);
	int64_t sim, jt = 0;

	if (!shmclock_static_read_at(rec, key, shmclock__mono_ns, &seg->jump_total_ns, &sim, &jt, NULL))
		return 0;
	*ns = shmclock__sat_sub(sim, jt);
	return 1;
}

static inline __attribute__((always_inline)) int
shmclock__fast_unix_at(const struct shmclock_seg *seg, const _Atomic uint64_t *key, int64_t *unix_ns)
{
	const struct shmclock_record *rec = (const struct shmclock_record *)(const void *)
		((const unsigned char *)seg + SHMCLOCK_RECORD_OFFSET);
	int64_t sim, uz = 0;
	uint32_t flags = 0;

	if (!shmclock_static_read_at(rec, key, shmclock__mono_ns, &seg->unix_at_zero_ns, &sim, &uz, &flags))
		return 0;
	*unix_ns = shmclock__sat_add(sim, (flags & SHMCLOCK_F_UNIX_ZERO) ? uz : 0);
	return 1;
}

static inline int shmclock__fast_monotonic(struct shmclock *clk, int64_t *ns)
{
	return shmclock__fast_monotonic_at(clk->seg, &clk->seen_key, ns);
}

static inline int shmclock__fast_unix(struct shmclock *clk, int64_t *unix_ns)
{
	return shmclock__fast_unix_at(clk->seg, &clk->seen_key, unix_ns);
}

/* seen_key in a forked child until its first read: no record has this key
 * (bits 1-7 of a key are always 0), so every read takes the slow path. */
#define SHMCLOCK_KEY_FORKED UINT64_MAX

static_assert(offsetof(struct shmclock, seg) == 0, "frozen ABI");
static_assert(offsetof(struct shmclock, seen_key) == 8, "frozen ABI");

#endif
