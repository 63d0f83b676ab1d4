/* SPDX-License-Identifier: MIT */
/*
 * The read side of the segment protocol (protocol.c): what every reader of
 * the page, and a writer recovering it, shares. Knows the page, not the
 * handles: it calls nothing above it.
 */
#ifndef SHMCLOCK_PROTOCOL_H
#define SHMCLOCK_PROTOCOL_H

#include <stdbool.h>
#include <stdint.h>

#include "common.h"

/* One consistent read of the whole state and a clock reading inside it:
 * 0, -ESTALE (the values come from a dead writer, or, with *lock showing
 * the writer alive, the reader is held at an undecided instant: see
 * shmclock__held), or -EAGAIN. */
int shmclock__snapshot(const struct shmclock_seg *s, struct shmclock_params *p, int64_t *mono,
		       uint32_t *lock);

/* Whether a snapshot that returned @r with @lock is held at the instant of
 * an update not yet decided (freeze_at): time waits for the commit there. */
static inline bool shmclock__held(int r, uint32_t lock)
{
	return r == -ESTALE && shmclock__writer_alive(lock);
}

/* The anchor of an update open after a snapshot read its clock at @mono,
 * if it lies ahead (else INT64_MAX): a function decided for it takes
 * effect there by itself, with no commit to wake anyone, so a plan made
 * from the snapshot is made again there. */
int64_t shmclock__open_anchor(const struct shmclock_seg *s, int64_t mono);

struct shmclock_info;
/* Fill a public info struct from one parameter copy and a clock reading. */
void shmclock__fill_info(const struct shmclock_seg *s, const struct shmclock_params *p,
			 int64_t mono, uint32_t lock, struct shmclock_info *info);

#endif
