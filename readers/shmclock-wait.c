/* SPDX-License-Identifier: MIT */
/* shmclock-wait: block until simulated time reaches TIME (shell scripts, CI). */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shmclock/time.h>

#include "cli.h"

static void usage(FILE *f)
{
	fputs("usage: shmclock-wait [-n NAME] [-t|--timeout DURATION] [--for] TIME\n"
	      "\n"
	      "Block until the simulation time of clock NAME (default: $SHMCLOCK_NAME, else\n"
	      "default) reaches TIME: 1.5s, 250ms, 100us, 42ns, 2m, 1h, seconds, or an\n"
	      "ISO-8601 UTC date. Waits for the clock to exist and start. Wakes at the\n"
	      "right moment across pause, resume, scale changes and steps.\n"
	      "\n"
	      "  -n, --name NAME        clock name\n"
	      "  -t, --timeout DURATION give up after DURATION of real time (exit 3)\n"
	      "      --for              TIME is a duration from now (simulated)\n"
	      "  -h, --help             this help\n"
	      "\n"
	      "Exit status: 0 reached, 1 clock error, 2 bad arguments, 3 timed out.\n",
	      f);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_OPTION_NAME,
		{ "timeout", required_argument, NULL, 't' },
		{ "for", no_argument, NULL, 'F' },
		CLI_OPTION_HELP,
		{ 0 }
	};
	const char *name = NULL;
	shmclock_duration_t timeout = SHMCLOCK_DURATION_INFINITE;
	bool relative = false;
	char why[200];
	int64_t target;
	shmclock_t *clk;
	int64_t t0 = shmclock_steady_now().ns;
	int c, r;

	while ((c = getopt_long(argc, argv, "n:t:h", opts, NULL)) != -1) {
		switch (c) {
		case 'n':
			name = optarg;
			break;
		case 't':
			if (!cli_duration("shmclock-wait", "--timeout", optarg, &timeout.ns))
				return 2;
			break;
		case 'F':
			relative = true;
			break;
		case 'h':
		default:
			return cli_help(usage, c);
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "shmclock-wait: %s (try --help)\n",
			optind >= argc ? "TIME is required" : "one TIME only");
		return 2;
	}
	if ((relative ? duration_parse : time_parse)(argv[optind], &target, why, sizeof(why))) {
		fprintf(stderr, "shmclock-wait: TIME '%s': %s\n", argv[optind], why);
		return 2;
	}
	name = cli_clock_name(name);
	r = shmclock_open_wait(name, 0, timeout, &clk);
	if (r == -ETIMEDOUT) {
		fprintf(stderr, "shmclock-wait: clock '%s' did not start within the timeout\n", name);
		return 3;
	}
	if (r)
		return cli_open_failed("shmclock-wait", name, r);
	if (timeout.ns >= 0) {
		timeout.ns -= shmclock_steady_now().ns - t0;
		if (timeout.ns < 0)
			timeout.ns = 0;
	}
	r = relative ? shmclock_sleep_for_ex(clk, shmclock_nsec(target), 0, timeout, NULL)
		     : shmclock_sleep_until_ex(clk, shmclock_sim_time(target), 0, timeout, NULL);
	shmclock_close(clk);
	if (r == -ETIMEDOUT) {
		fprintf(stderr, "shmclock-wait: clock '%s' did not reach %s within the timeout\n",
			name, argv[optind]);
		return 3;
	}
	if (r) {
		fprintf(stderr, "shmclock-wait: %s\n", shmclock_strerror(r));
		return 1;
	}
	return 0;
}
