/* SPDX-License-Identifier: MIT */
/*
 * The read side of the segment protocol (protocol.c): what every reader of
 * the page, and a writer recovering it, shares. Knows the page, not the
 * handles: it calls nothing above it.
 */
#ifndef SHMCLOCK_PROTOCOL_H
#define SHMCLOCK_PROTOCOL_H

#include <stdint.h>

#include "common.h"

/* One consistent read of the whole state and a clock reading inside it:
 * 0, -ESTALE (the values come from a dead writer), or -EAGAIN. */
int shmclock__snapshot(const struct shmclock_seg *s, struct shmclock_params *p, int64_t *mono,
		       uint32_t *lock);

struct shmclock_info;
/* Fill a public info struct from one parameter copy and a clock reading. */
void shmclock__fill_info(const struct shmclock_seg *s, const struct shmclock_params *p,
			 int64_t mono, uint32_t lock, struct shmclock_info *info);

#endif
