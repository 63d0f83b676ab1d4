/* SPDX-License-Identifier: MIT */
/* Argument helpers shared by the reader programs: one message style, exit 2. */
#ifndef SHMCLOCK_READERS_CLI_H
#define SHMCLOCK_READERS_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "duration.h"

/* A number in (0, max]; false after printing "PROG: --OPT ..." to stderr. */
static inline bool cli_positive(const char *prog, const char *opt, const char *arg, double max,
				double *out)
{
	char *end;
	double v = strtod(arg, &end);

	if (end == arg || *end || !(v > 0) || v > max) {
		fprintf(stderr, "%s: %s takes a number in (0, %g], not '%s'\n", prog, opt, max, arg);
		return false;
	}
	*out = v;
	return true;
}

/* A whole number >= 1. */
static inline bool cli_count(const char *prog, const char *opt, const char *arg, long *out)
{
	char *end;
	long v = strtol(arg, &end, 10);

	if (end == arg || *end || v < 1) {
		fprintf(stderr, "%s: %s takes a whole number >= 1, not '%s'\n", prog, opt, arg);
		return false;
	}
	*out = v;
	return true;
}

/* A duration >= 0 ("250ms", "1.5s", seconds). */
static inline bool cli_duration(const char *prog, const char *opt, const char *arg, int64_t *out)
{
	char why[200];
	int64_t v;

	if (duration_parse(arg, &v, why, sizeof(why))) {
		fprintf(stderr, "%s: %s '%s': %s\n", prog, opt, arg, why);
		return false;
	}
	if (v < 0) {
		fprintf(stderr, "%s: %s '%s': must not be negative\n", prog, opt, arg);
		return false;
	}
	*out = v;
	return true;
}

/* -n NAME, else $SHMCLOCK_NAME, else "default" (as shmclockctl). */
static inline const char *cli_clock_name(const char *given)
{
	const char *env = getenv("SHMCLOCK_NAME");

	if (given && *given)
		return given;
	return env && *env ? env : "default";
}

#endif
