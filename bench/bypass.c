/* SPDX-License-Identifier: MIT */
/*
 * bypass: what the shim's ways of reaching programs that skip libc cost
 * (issue 33), against the bare calls, in the same run:
 *
 *   reads   clock_gettime(CLOCK_MONOTONIC) made through libc (the shim's
 *           interposed function), through the vDSO's own symbol (redirected
 *           to the shim's reader), and as a raw system call (trapped by the
 *           seccomp filter, answered by the SIGSYS handler);
 *   sleeps  a 1 us nanosleep through libc and as a raw system call.
 *
 * The bare figures are this process's (no shim); the others come from a
 * child under the shim on a private running clock (scale 1), once with the
 * trap on and once off: the libc rows must not move (the filter costs
 * only the system calls it sees, and the libc read makes none), the raw
 * rows show the trap's price. Reads are timed in batches; sleeps one by
 * one. p50 of each.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

typedef int (*gettime_fn)(clockid_t, struct timespec *);

enum { R_LIBC, R_VDSO, R_RAW, S_LIBC, S_RAW, N_ROWS };

static const char *const row_name[N_ROWS] = {
	"read: libc clock_gettime", "read: the vDSO's clock_gettime",
	"read: syscall(SYS_clock_gettime)", "sleep 1 us: libc nanosleep",
	"sleep 1 us: syscall(SYS_nanosleep)",
};

static gettime_fn vdso_fn(void)
{
	void *h = dlopen("linux-vdso.so.1", RTLD_LAZY | RTLD_NOLOAD);
	void *f = h ? dlsym(h, "__vdso_clock_gettime") : NULL;
	gettime_fn fn = NULL;

	memcpy(&fn, &f, sizeof(fn));
	return fn;
}

static int raw_gettime(clockid_t c, struct timespec *ts)
{
	return (int)syscall(SYS_clock_gettime, c, ts);
}

/* p50 ns of one read with @fn: @samples batches of @batch. */
static double time_reads(gettime_fn fn, long samples, int batch)
{
	double *v = malloc(sizeof(double) * (size_t)samples);
	struct timespec ts;
	struct bench_stats st;
	volatile long acc = 0;

	if (!v)
		return -1;
	for (long s = 0; s < samples; s++) {
		int64_t t0 = bench_mono_ns();

		for (int i = 0; i < batch; i++) {
			fn(CLOCK_MONOTONIC, &ts);
			acc += ts.tv_nsec;
		}
		v[s] = (double)(bench_mono_ns() - t0) / batch;
	}
	st = bench_summarise(v, samples);
	free(v);
	return st.p50;
}

/* p50 ns of one 1 us sleep, libc's or raw. */
static double time_sleeps(bool raw, long samples)
{
	double *v = malloc(sizeof(double) * (size_t)samples);
	struct timespec us = { 0, 1000 };
	struct bench_stats st;

	if (!v)
		return -1;
	for (long s = 0; s < samples; s++) {
		int64_t t0 = bench_mono_ns();

		if (raw)
			syscall(SYS_nanosleep, &us, NULL);
		else
			nanosleep(&us, NULL);
		v[s] = (double)(bench_mono_ns() - t0);
	}
	st = bench_summarise(v, samples);
	free(v);
	return st.p50;
}

static void measure_all(double out[N_ROWS], long reads, int batch, long sleeps)
{
	gettime_fn v = vdso_fn();

	out[R_LIBC] = time_reads(clock_gettime, reads, batch);
	out[R_VDSO] = v ? time_reads(v, reads, batch) : -1;
	out[R_RAW] = time_reads(raw_gettime, reads, batch / 10 ? batch / 10 : 1);
	out[S_LIBC] = time_sleeps(false, sleeps);
	out[S_RAW] = time_sleeps(true, sleeps);
}

/* The child under the shim: its figures, one "%d %f" line each. */
int bench_bypass_child(const char *args)
{
	long reads = 0, sleeps = 0;
	int batch = 0;
	double r[N_ROWS];

	if (sscanf(args, "%ld,%d,%ld", &reads, &batch, &sleeps) != 3 || reads <= 0 || batch <= 0 ||
	    sleeps <= 0)
		return 2;
	measure_all(r, reads, batch, sleeps);
	for (int i = 0; i < N_ROWS; i++)
		printf("%d %.3f\n", i, r[i]);
	return 0;
}

static bool run_child(const char *shim, const char *clock, const char *trap, const char *args,
		      double out[N_ROWS])
{
	char e1[4200], e2[128], e3[64], e4[64];
	char *env[] = { e1, e2, e3, e4, NULL };
	char *argv[] = { "/proc/self/exe", "__bypass-child", (char *)args, NULL };
	char *text, *line, *save = NULL;
	int got = 0;

	snprintf(e1, sizeof(e1), "LD_PRELOAD=%s", shim);
	snprintf(e2, sizeof(e2), "SHMCLOCK_NAME=%s", clock);
	snprintf(e3, sizeof(e3), "SHMCLOCK_TRAP=%s", trap);
	snprintf(e4, sizeof(e4), "SHMCLOCK_QUIET=1");
	text = bench_run_helper(argv, env);
	if (!text)
		return false;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		int i;
		double x;

		if (sscanf(line, "%d %lf", &i, &x) == 2 && i >= 0 && i < N_ROWS) {
			out[i] = x;
			got++;
		}
	}
	free(text);
	return got == N_ROWS;
}

int bench_bypass(const struct bench_opts *o, cJSON *out)
{
	long reads = o->samples > 0 ? o->samples : o->quick ? 200 : 2000;
	int batch = o->batch > 0 ? o->batch : 200;
	long sleeps = o->quick ? 300 : 3000;
	char name[64], path[4096], args[64];
	const char *shim;
	shmclock_writer_t *w;
	shmclock_t *clk;
	double bare[N_ROWS], on[N_ROWS], off[N_ROWS];
	cJSON *rows = cJSON_AddArrayToObject(out, "results");
	int rc = 0;

	shim = bench_find("SHMCLOCK_PRELOAD", "readers", "libshmclock-preload.so",
			  SHMCLOCK_PRELOAD_INSTALLED, path, sizeof(path));
	if (access(shim, R_OK)) {
		fprintf(stderr, "shmclock-bench: bypass: no preload shim at %s\n", shim);
		return 1;
	}
	if (bench_clock_open(name, sizeof(name), &w, &clk))
		return 1;
	snprintf(args, sizeof(args), "%ld,%d,%ld", reads, batch, sleeps);
	measure_all(bare, reads, batch, sleeps);
	if (!run_child(shim, name, "1", args, on) || !run_child(shim, name, "0", args, off)) {
		fprintf(stderr, "shmclock-bench: bypass: the child under the shim gave no figures\n");
		rc = 1;
		goto out;
	}
	printf("bypass: reads and 1 us sleeps without libc's time functions, under the shim\n"
	       "(p50, ns; ratio to the same call made bare, without the shim)\n\n");
	printf("  %-38s %12s %14s %8s %14s %8s\n", "call", "bare", "shim, trap on", "ratio",
	       "shim, no trap", "ratio");
	for (int i = 0; i < N_ROWS; i++) {
		cJSON *r = cJSON_CreateObject();

		printf("  %-38s %12.1f %14.1f %7.2fx %14.1f %7.2fx\n", row_name[i], bare[i], on[i],
		       on[i] / bare[i], off[i], off[i] / bare[i]);
		cJSON_AddStringToObject(r, "name", row_name[i]);
		cJSON_AddNumberToObject(r, "bare_p50_ns", bare[i]);
		cJSON_AddNumberToObject(r, "trap_p50_ns", on[i]);
		cJSON_AddNumberToObject(r, "no_trap_p50_ns", off[i]);
		cJSON_AddItemToArray(rows, r);
	}
	printf("\n  libc clock_gettime under the shim, trap on / trap off: %.2fx\n",
	       on[R_LIBC] / off[R_LIBC]);
	cJSON_AddNumberToObject(out, "libc_read_trap_on_vs_off", on[R_LIBC] / off[R_LIBC]);
out:
	bench_clock_close(name, w, clk);
	return rc;
}
