/* SPDX-License-Identifier: MIT */
/* The SHMCLOCK_CLOCKS list, one grammar for the preload shim and shmclock-run. */
#ifndef SHMCLOCK_READERS_CLOCKS_H
#define SHMCLOCK_READERS_CLOCKS_H

#include <string.h>
#include <time.h>

/* Clock groups: a bit per clockid (Linux's static ids are all < 16). */
#define SHMCLOCK_G_REALTIME ((1u << CLOCK_REALTIME) | (1u << CLOCK_REALTIME_COARSE))
#define SHMCLOCK_G_MONOTONIC \
	((1u << CLOCK_MONOTONIC) | (1u << CLOCK_MONOTONIC_RAW) | (1u << CLOCK_MONOTONIC_COARSE))
#define SHMCLOCK_G_BOOTTIME ((1u << CLOCK_BOOTTIME) | (1u << CLOCK_BOOTTIME_ALARM))
#define SHMCLOCK_G_ALL (SHMCLOCK_G_REALTIME | SHMCLOCK_G_MONOTONIC | SHMCLOCK_G_BOOTTIME)

/*
 * "realtime,monotonic,boottime" (any subset), "all", "none"; empty or NULL
 * is "all". Returns 0 and the mask in *mask, or -1 with *bad pointing at the
 * first unknown name (its length in *badlen); *mask then holds the rest.
 */
static inline int shmclock_parse_clocks(const char *s, unsigned *mask, const char **bad,
					size_t *badlen)
{
	int r = 0;

	*mask = 0;
	if (!s || !*s || !strcmp(s, "all")) {
		*mask = SHMCLOCK_G_ALL;
		return 0;
	}
	if (!strcmp(s, "none"))
		return 0;
	while (*s) {
		size_t n = strcspn(s, ",");

		if (n == 8 && !strncmp(s, "realtime", n))
			*mask |= SHMCLOCK_G_REALTIME;
		else if (n == 9 && !strncmp(s, "monotonic", n))
			*mask |= SHMCLOCK_G_MONOTONIC;
		else if (n == 8 && !strncmp(s, "boottime", n))
			*mask |= SHMCLOCK_G_BOOTTIME;
		else if (n && r == 0) {
			*bad = s;
			*badlen = n;
			r = -1;
		}
		s += n + (s[n] == ',');
	}
	return r;
}

#endif
