/* SPDX-License-Identifier: MIT */
/*
 * What every program's command line does the same way (shmclockctl, the
 * readers, shmclock-bench, shmclock-panel): the clock's name, its checks,
 * opening it, the arguments left over, option values; one message style,
 * "PROG: ...", exit status 2 for a bad command line and 1 for a clock that
 * cannot be opened. Header-only: the programs each take what they use.
 */
#ifndef SHMCLOCK_COMMON_CLI_H
#define SHMCLOCK_COMMON_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <shmclock/shmclock.h>

#include "duration.h"

/* The rows every program's option table has: -n/--name NAME, -h/--help. */
#define CLI_OPTION_NAME { "name", required_argument, NULL, 'n' }
#define CLI_OPTION_HELP { "help", no_argument, NULL, 'h' }

/*
 * The end of an option switch, for -h and for whatever getopt refused
 * (it said why): the usage on stdout and 0 for -h, on stderr and 2 else.
 *	case 'h':
 *	default:
 *		return cli_help(usage, c);
 */
static inline int cli_help(void (*usage)(FILE *f), int c)
{
	usage(c == 'h' ? stdout : stderr);
	return c == 'h' ? 0 : 2;
}

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

/* -n NAME, else $SHMCLOCK_NAME, else "default". */
static inline const char *cli_clock_name(const char *given)
{
	const char *env = getenv("SHMCLOCK_NAME");

	if (given && *given)
		return given;
	return env && *env ? env : "default";
}

/* 0 for a valid clock name, else 2 after "PROG: bad clock name ...". */
static inline int cli_check_name(const char *prog, const char *name)
{
	if (!shmclock_check_name(name))
		return 0;
	fprintf(stderr, "%s: bad clock name '%s' (1 to %d of [A-Za-z0-9_.-])\n", prog, name,
		SHMCLOCK_NAME_MAX);
	return 2;
}

/* A clock that could not be opened (@err from shmclock_open*()): 1, the
 * programs' exit status for it, after "PROG: clock 'NAME': why". */
static inline int cli_open_failed(const char *prog, const char *name, int err)
{
	fprintf(stderr, "%s: clock '%s': %s\n", prog, name, shmclock_strerror(err));
	return 1;
}

/* After the options: 0 when no argument is left, else 2 after "PROG:
 * unexpected argument 'ARG' (try --help)". */
static inline int cli_no_args(const char *prog, int argc, char *const *argv, int optind)
{
	if (optind >= argc)
		return 0;
	fprintf(stderr, "%s: unexpected argument '%s' (try --help)\n", prog, argv[optind]);
	return 2;
}

#endif
