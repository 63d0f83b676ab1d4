/* SPDX-License-Identifier: MIT */
/*
 * record-sampler NAME SECONDS PERIOD_US: a reader's samples of clock NAME,
 * one line each: CLOCK_MONOTONIC and the simulation time of one snapshot
 * (shmclock_info), and 1 when the read was held (-ESTALE) else 0. For
 * record_e2e.py, which checks them against a recording's function.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <shmclock/shmclock.h>

int main(int argc, char **argv)
{
	shmclock_t *clk;
	struct timespec next;
	double secs;
	long period_us;
	int r;

	if (argc != 4) {
		fprintf(stderr, "usage: record-sampler NAME SECONDS PERIOD_US\n");
		return 2;
	}
	secs = atof(argv[2]);
	period_us = atol(argv[3]);
	for (int i = 0; (r = shmclock_open(argv[1], &clk)); i++) {
		if (i == 500) {
			fprintf(stderr, "record-sampler: %s: %s\n", argv[1], shmclock_strerror(r));
			return 1;
		}
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
	}
	clock_gettime(CLOCK_MONOTONIC, &next);
	for (long n = 0; n < (long)(secs * 1e6 / (double)period_us); n++) {
		shmclock_info_t in;

		r = shmclock_info(clk, &in);
		if ((r == 0 || r == -ESTALE) && in.initialized)
			printf("%lld %lld %d\n", (long long)in.mono_ns, (long long)in.sim_ns,
			       r == -ESTALE || in.stale);
		next.tv_nsec += period_us * 1000;
		next.tv_sec += next.tv_nsec / 1000000000;
		next.tv_nsec %= 1000000000;
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
	}
	shmclock_close(clk);
	return 0;
}
