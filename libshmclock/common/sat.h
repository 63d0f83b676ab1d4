/* SPDX-License-Identifier: MIT */
/* Saturating arithmetic on int64_t nanoseconds: the one copy the library,
 * the daemon and the preload shim share. */
#ifndef SHMCLOCK_COMMON_SAT_H
#define SHMCLOCK_COMMON_SAT_H

#include <stdint.h>

/* a + b, clamped to the int64_t range instead of wrapping. */
static inline int64_t shmclock__sat_add(int64_t a, int64_t b)
{
	int64_t r;

	if (__builtin_add_overflow(a, b, &r))
		return b > 0 ? INT64_MAX : INT64_MIN;
	return r;
}

/* a - b, clamped likewise. */
static inline int64_t shmclock__sat_sub(int64_t a, int64_t b)
{
	int64_t r;

	if (__builtin_sub_overflow(a, b, &r))
		return b < 0 ? INT64_MAX : INT64_MIN;
	return r;
}

#endif
