/* SPDX-License-Identifier: MIT */
/*
 * sleep: how late a sleeper wakes after its deadline. Baseline:
 * clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME); contender:
 * shmclock_sleep_until() on a clock at scale 1, its lateness measured
 * against the monotonic instant at which the clock reaches the target.
 * The two alternate, sleep by sleep.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include <shmclock/time.h>

#include "bench.h"

int bench_sleep(const struct bench_opts *o, cJSON *out)
{
	long samples = o->samples ? o->samples : o->quick ? 300 : 2000;
	double period_ms = o->period_ms > 0 ? o->period_ms : 2;
	static const char *names[2] = { "clock_nanosleep(ABSTIME)", "shmclock_sleep_until" };
	cJSON *results = cJSON_AddArrayToObject(out, "results");
	struct bench_stats st[2];
	char name[64];
	shmclock_writer_t *w;
	shmclock_t *clk;
	double *late[2];
	int64_t period;

	if (samples < 10 || period_ms > 1000) {
		fprintf(stderr, "shmclock-bench: --samples must be >= 10 and --period in (0, 1000] ms\n");
		return 2;
	}
	if (bench_clock_open(name, sizeof(name), &w, &clk))
		return 1;
	late[0] = calloc((size_t)samples, sizeof(double));
	late[1] = calloc((size_t)samples, sizeof(double));
	if (!late[0] || !late[1]) {
		fprintf(stderr, "shmclock-bench: out of memory\n");
		return 1;
	}
	period = (int64_t)(period_ms * 1e6);
	for (long i = 0; i < samples; i++) {
		int64_t deadline = bench_mono_ns() + period;
		struct timespec ts = { (time_t)(deadline / 1000000000), (long)(deadline % 1000000000) };
		shmclock_sim_time_t now, target;
		shmclock_steady_time_t due;
		int r;

		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
		late[0][i] = (double)(bench_mono_ns() - deadline);

		shmclock_sim_now(clk, &now);
		target = shmclock_sim_add(now, shmclock_nsec(period));
		shmclock_sim_to_steady(clk, target, &due);
		r = shmclock_sleep_until(clk, target, 0);
		late[1][i] = (double)(bench_mono_ns() - due.ns);
		if (r) {
			fprintf(stderr, "shmclock-bench: sleep_until: %s\n", shmclock_strerror(r));
			return 1;
		}
	}
	printf("sleep: wake-up lateness, %ld sleeps of %.3g ms each, alternating%s\n", samples,
	       period_ms, o->quick ? " (quick)" : "");
	bench_header("us late");
	cJSON_AddNumberToObject(out, "samples", (double)samples);
	cJSON_AddNumberToObject(out, "period_ms", period_ms);
	for (int k = 0; k < 2; k++) {
		cJSON *r = cJSON_CreateObject();

		st[k] = bench_summarise(late[k], samples);
		bench_row(names[k], &st[k], st[0].p50, 1000);
		cJSON_AddStringToObject(r, "name", names[k]);
		bench_json_stats(r, &st[k]);
		cJSON_AddNumberToObject(r, "ratio_p50", st[k].p50 / st[0].p50);
		cJSON_AddItemToArray(results, r);
		free(late[k]);
	}
	bench_clock_close(name, w, clk);
	return 0;
}
