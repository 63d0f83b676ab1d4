/* SPDX-License-Identifier: MIT */
/*
 * shmclock-bench: measure shmclock against its baselines in the same run.
 *
 *   shmclock-bench read [--quick] [--json FILE] [--samples N] [--batch N]
 *
 * `read` times one read of each contender: bare clock_gettime(MONOTONIC)
 * (the floor) and shmclock_now(). Reads are timed in batches so that the
 * timer does not dominate, and the contenders take turns batch by batch so
 * that the noise of a shared machine falls on all of them alike.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <shmclock/shmclock.h>
#include <shmclock/time.h>
#include <shmclock/static/shmclock.h>
#include <shmclock/writer.h>

struct contender {
	const char *name;
	/* Performs `n` reads; returns a value the compiler cannot drop. */
	int64_t (*batch)(void *ctx, int n);
	void *ctx;
	double *samples; /* ns per read, one per batch */
};

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t batch_clock_gettime(void *ctx, int n)
{
	struct timespec ts;
	int64_t acc = 0;

	(void)ctx;
	for (int i = 0; i < n; i++) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		acc += ts.tv_nsec;
	}
	return acc;
}

static int64_t batch_shmclock_now(void *ctx, int n)
{
	shmclock_t *clk = ctx;
	int64_t acc = 0, t;

	for (int i = 0; i < n; i++) {
		shmclock_now(clk, &t);
		acc += t;
	}
	return acc;
}

/* The opt-in inline fast path, compiled into this file. */
static int64_t batch_shmclock_now_inline(void *ctx, int n)
{
	shmclock_t *clk = ctx;
	int64_t acc = 0, t;

	for (int i = 0; i < n; i++) {
		shmclock_static_now(clk, &t);
		acc += t;
	}
	return acc;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double pct(const double *sorted, int n, double p)
{
	int i = (int)(p / 100.0 * (n - 1) + 0.5);

	return sorted[i < 0 ? 0 : i >= n ? n - 1 : i];
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: shmclock-bench read [--quick] [--json FILE] [--samples N] [--batch N]\n"
		"\n"
		"  read        cost of one read: clock_gettime(CLOCK_MONOTONIC) vs shmclock_now()\n"
		"  --quick     a few seconds' run, for CI\n"
		"  --json FILE also write the figures as JSON to FILE ('-' for stdout)\n"
		"  --samples N batches per contender (default 200000, quick 20000)\n"
		"  --batch N   reads per timed batch (default 50)\n"
		"\n"
		"usage: shmclock-bench sleep [--quick] [--json FILE] [--samples N] [--period MS]\n"
		"\n"
		"  sleep       lateness of waking: clock_nanosleep(TIMER_ABSTIME) vs\n"
		"              shmclock_sleep_until() on a clock at scale 1, alternating\n"
		"  --samples N sleeps per contender (default 2000, quick 300)\n"
		"  --period MS sleep length (default 2)\n");
}

volatile int64_t bench_sink; /* keeps the reads alive */

/* A private clock at 0, scale 1, for one run; removed by bench_clock_close. */
static int bench_clock_open(char *name, size_t len, shmclock_writer_t **w, shmclock_t **clk)
{
	int r;

	snprintf(name, len, "bench-%d", (int)getpid());
	r = shmclock_writer_open(name, w);
	if (r == 0)
		r = shmclock_writer_set_time(*w, 0);
	if (r == 0)
		r = shmclock_open(name, clk);
	if (r)
		fprintf(stderr, "shmclock-bench: clock %s: %s\n", name, shmclock_strerror(r));
	return r;
}

static void bench_clock_close(const char *name, shmclock_writer_t *w, shmclock_t *clk)
{
	shmclock_close(clk);
	shmclock_writer_close(w);
	shmclock_unlink(name);
}

/* --json FILE: '-' is stdout. NULL (with a message) if it cannot be opened. */
static FILE *json_open(const char *path)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "w") : stdout;

	if (!f)
		fprintf(stderr, "shmclock-bench: %s: %s\n", path, strerror(errno));
	return f;
}

static int cmd_read(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "quick", no_argument, NULL, 'q' },
		{ "json", required_argument, NULL, 'j' },
		{ "samples", required_argument, NULL, 's' },
		{ "batch", required_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *json = NULL;
	int samples = 200000, batch = 50, quick = 0, c;
	char name[64];
	shmclock_writer_t *w;
	shmclock_t *clk;
	FILE *jf = NULL;

	while ((c = getopt_long(argc, argv, "qj:s:b:h", opts, NULL)) != -1) {
		switch (c) {
		case 'q':
			quick = 1;
			samples = 20000;
			break;
		case 'j':
			json = optarg;
			break;
		case 's':
			samples = atoi(optarg);
			break;
		case 'b':
			batch = atoi(optarg);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (samples < 100 || batch < 1) {
		fprintf(stderr, "shmclock-bench: --samples must be >= 100 and --batch >= 1\n");
		return 2;
	}
	if (bench_clock_open(name, sizeof(name), &w, &clk))
		return 1;

	struct contender cs[] = {
		{ "clock_gettime(MONOTONIC)", batch_clock_gettime, NULL, NULL },
		{ "shmclock_now", batch_shmclock_now, clk, NULL },
		{ "shmclock_now (inline)", batch_shmclock_now_inline, clk, NULL },
	};
	int nc = (int)(sizeof(cs) / sizeof(cs[0]));

	for (int k = 0; k < nc; k++) {
		cs[k].samples = calloc((size_t)samples, sizeof(double));
		if (!cs[k].samples) {
			fprintf(stderr, "shmclock-bench: out of memory\n");
			return 1;
		}
		bench_sink += cs[k].batch(cs[k].ctx, 10000); /* warm up */
	}
	for (int i = 0; i < samples; i++) {
		for (int k = 0; k < nc; k++) {
			int64_t t0 = mono_ns();

			bench_sink += cs[k].batch(cs[k].ctx, batch);
			cs[k].samples[i] = (double)(mono_ns() - t0) / batch;
		}
	}

	if (json && !(jf = json_open(json)))
		return 1;
	printf("read: ns per read, %d batches of %d reads each%s\n", samples, batch,
	       quick ? " (quick)" : "");
	printf("%-28s %8s %8s %8s %8s %10s\n", "contender", "p50", "p99", "p99.9", "max",
	       "p50 ratio");
	if (jf)
		fprintf(jf, "{\"bench\":\"read\",\"samples\":%d,\"batch\":%d,\"results\":[", samples,
			batch);
	double base = 0;
	for (int k = 0; k < nc; k++) {
		qsort(cs[k].samples, (size_t)samples, sizeof(double), cmp_double);
		double p50 = pct(cs[k].samples, samples, 50), p99 = pct(cs[k].samples, samples, 99);
		double p999 = pct(cs[k].samples, samples, 99.9), mx = cs[k].samples[samples - 1];

		if (k == 0)
			base = p50;
		printf("%-28s %8.2f %8.2f %8.2f %8.2f %9.3fx\n", cs[k].name, p50, p99, p999, mx,
		       p50 / base);
		if (jf)
			fprintf(jf,
				"%s{\"name\":\"%s\",\"p50\":%.3f,\"p99\":%.3f,\"p999\":%.3f,"
				"\"max\":%.3f,\"ratio_p50\":%.4f}",
				k ? "," : "", cs[k].name, p50, p99, p999, mx, p50 / base);
		free(cs[k].samples);
	}
	if (jf) {
		fprintf(jf, "]}\n");
		if (jf != stdout)
			fclose(jf);
	}
	bench_clock_close(name, w, clk);
	return 0;
}

/* How late each sleeper wakes after its deadline, in ns. */
static int cmd_sleep(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "quick", no_argument, NULL, 'q' },
		{ "json", required_argument, NULL, 'j' },
		{ "samples", required_argument, NULL, 's' },
		{ "period", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *json = NULL;
	int samples = 2000, quick = 0, c, r;
	double period_ms = 2;
	char name[64];
	shmclock_writer_t *w;
	shmclock_t *clk;
	double *late[2];
	static const char *names[2] = { "clock_nanosleep(ABSTIME)", "shmclock_sleep_until" };

	while ((c = getopt_long(argc, argv, "qj:s:p:h", opts, NULL)) != -1) {
		switch (c) {
		case 'q':
			quick = 1;
			samples = 300;
			break;
		case 'j':
			json = optarg;
			break;
		case 's':
			samples = atoi(optarg);
			break;
		case 'p':
			period_ms = atof(optarg);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (samples < 10 || !(period_ms > 0) || period_ms > 1000) {
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
	int64_t period = (int64_t)(period_ms * 1e6);

	for (int i = 0; i < samples; i++) {
		/* Baseline: an absolute monotonic deadline. */
		int64_t deadline = mono_ns() + period;
		struct timespec ts = { (time_t)(deadline / 1000000000), (long)(deadline % 1000000000) };

		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
		late[0][i] = (double)(mono_ns() - deadline);

		/* shmclock: a simulated deadline; lateness measured against the
		 * monotonic instant at which the clock reaches it. */
		shmclock_sim_time_t now, target;
		shmclock_steady_time_t due;

		shmclock_sim_now(clk, &now);
		target = shmclock_sim_add(now, shmclock_nsec(period));
		shmclock_sim_to_steady(clk, target, &due);
		r = shmclock_sleep_until(clk, target, 0);
		late[1][i] = (double)(mono_ns() - due.ns);
		if (r) {
			fprintf(stderr, "shmclock-bench: sleep_until: %s\n", shmclock_strerror(r));
			return 1;
		}
	}

	FILE *jf = NULL;

	if (json && !(jf = json_open(json)))
		return 1;
	printf("sleep: wake-up lateness in us, %d sleeps of %.3g ms each, alternating%s\n", samples,
	       period_ms, quick ? " (quick)" : "");
	printf("%-28s %8s %8s %8s %8s %10s\n", "contender", "p50", "p90", "p99", "max", "p50 ratio");
	if (jf)
		fprintf(jf, "{\"bench\":\"sleep\",\"samples\":%d,\"period_ms\":%g,\"results\":[",
			samples, period_ms);
	double base = 0;

	for (int k = 0; k < 2; k++) {
		qsort(late[k], (size_t)samples, sizeof(double), cmp_double);
		double p50 = pct(late[k], samples, 50) / 1e3, p90 = pct(late[k], samples, 90) / 1e3;
		double p99 = pct(late[k], samples, 99) / 1e3, mx = late[k][samples - 1] / 1e3;

		if (k == 0)
			base = p50;
		printf("%-28s %8.1f %8.1f %8.1f %8.1f %9.3fx\n", names[k], p50, p90, p99, mx,
		       p50 / base);
		if (jf)
			fprintf(jf,
				"%s{\"name\":\"%s\",\"p50_us\":%.2f,\"p90_us\":%.2f,\"p99_us\":%.2f,"
				"\"max_us\":%.2f,\"ratio_p50\":%.4f}",
				k ? "," : "", names[k], p50, p90, p99, mx, p50 / base);
		free(late[k]);
	}
	if (jf) {
		fprintf(jf, "]}\n");
		if (jf != stdout)
			fclose(jf);
	}
	bench_clock_close(name, w, clk);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "read"))
		return cmd_read(argc - 1, argv + 1);
	if (!strcmp(argv[1], "sleep"))
		return cmd_sleep(argc - 1, argv + 1);
	fprintf(stderr, "shmclock-bench: unknown command '%s' (try --help)\n", argv[1]);
	return 2;
}
