/* SPDX-License-Identifier: MIT */
/*
 * record: what recording a run (shmclockd --record, issue 55) costs the
 * clock. A fixed-source shmclockd at PublishHz 10000 commits a change of
 * the time function at every tick: 10 000 changes a second, each one
 * recorded. We diff its tick-lateness histogram (its own, via status) and
 * its CPU time (all its threads: the recorder's too) over phases of equal
 * length, alternating a daemon without a recording and one with, twice
 * each, and print the ratios; then the bytes each change took in the file
 * and the changes dropped (none expected: the recorder's ring holds 1.6 s).
 * Figures only: nothing here passes or fails on speed.
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "control_client.h"

#define PHASES 4 /* off, on, off, on */

struct phase {
	struct bench_ticks t;
	double cpu;               /* fraction of one core */
	double written, dropped;  /* recording phases: from status */
	double bytes;             /* the file's length at the end */
};

/* The daemon's status "record" object's @key, or -1. */
static double record_num(const char *sock, const char *key)
{
	char buf[32768];
	cJSON *st, *rec, *v;
	double x = -1;

	if (control_client_request(sock, "{\"v\":1,\"cmd\":\"status\"}\n", buf, sizeof(buf), 10000))
		return -1;
	st = cJSON_Parse(buf);
	rec = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(st, "status"),
					       "record");
	v = cJSON_GetObjectItemCaseSensitive(rec, key);
	if (cJSON_IsNumber(v))
		x = v->valuedouble;
	cJSON_Delete(st);
	return x;
}

static int run_phase(const char *daemon, const char *rt, int i, bool record, double secs,
		     struct phase *ph)
{
	char name[64], sock[160], file[160];
	char *argv[] = { (char *)daemon, "--notify-fd", "-n", name, "--socket", sock, "--source",
			 "fixed", "--hz", "10000", "--remove-on-exit", "--log-level=error",
			 record ? "--record" : NULL, file, NULL };
	struct bench_ticks a, b;
	double ca, cb;
	int64_t t0, t1;
	pid_t d;
	int rc = -1;

	snprintf(name, sizeof(name), "bench-record-%d-%d", (int)getpid(), i);
	snprintf(sock, sizeof(sock), "%s/%s.sock", rt, name);
	snprintf(file, sizeof(file), "%s/%s.mcap", rt, name);
	memset(ph, 0, sizeof(*ph));
	d = bench_spawn(argv, true);
	if (d < 0)
		return -1;
	bench_sleep_s(0.5); /* the warm-up: the first chunks */
	if (bench_ticks_get(sock, &a) < 0 || !bench_proc_cpu(d, &ca))
		goto out;
	t0 = bench_mono_ns();
	bench_sleep_s(secs);
	t1 = bench_mono_ns();
	if (bench_ticks_get(sock, &b) < 0 || !bench_proc_cpu(d, &cb))
		goto out;
	bench_ticks_diff(&a, &b, &ph->t);
	ph->cpu = (cb - ca) / ((double)(t1 - t0) / 1e9);
	if (record) {
		ph->written = record_num(sock, "written");
		ph->dropped = record_num(sock, "dropped");
	}
	rc = 0;
out:
	kill(d, SIGTERM);
	waitpid(d, NULL, 0);
	if (record) {
		struct stat st;

		if (!stat(file, &st))
			ph->bytes = (double)st.st_size;
		unlink(file);
	}
	unlink(sock);
	return rc;
}

int bench_record(const struct bench_opts *o, cJSON *out)
{
	double secs = o->duration_s > 0 ? o->duration_s : o->quick ? 1.5 : 10.0;
	char dpath[4096], rt[48];
	const char *daemon = bench_find("SHMCLOCKD", "shmclockd", "shmclockd", SHMCLOCKD_INSTALLED,
					dpath, sizeof(dpath));
	cJSON *results = cJSON_AddArrayToObject(out, "results");
	struct phase ph[PHASES];
	double p99[2] = { 0, 0 }, cpu[2] = { 0, 0 }, bytes = 0, written = 0, dropped = 0;

	if (bench_runtime_dir(rt, sizeof(rt)))
		return 1;
	printf("record: a fixed-source shmclockd at PublishHz 10000 (a change of the time function\n"
	       "at every tick: 10 000 changes a second), without --record and with it, alternated,\n"
	       "%.3g s per phase%s. x: ratio to the phases without\n",
	       secs, o->quick ? " (quick)" : "");
	cJSON_AddNumberToObject(out, "seconds", secs);
	cJSON_AddNumberToObject(out, "changes_per_s", 10000);
	printf("  %-22s %9s %9s %9s %9s %9s %9s %9s\n", "phase", "p50 us", "p99 us", "p99.9 us",
	       "max us", "CPU", "written", "dropped");
	for (int i = 0; i < PHASES; i++) {
		bool rec = i % 2;
		cJSON *j;
		double q50, q99, q999, mx;

		if (run_phase(daemon, rt, i, rec, secs, &ph[i]) < 0) {
			fprintf(stderr, "shmclock-bench: %s did not run (set SHMCLOCKD)\n", daemon);
			rmdir(rt);
			return 1;
		}
		q50 = (double)latehist_quantile(ph[i].t.hist, 0.5) / 1e3;
		q99 = (double)latehist_quantile(ph[i].t.hist, 0.99) / 1e3;
		q999 = (double)latehist_quantile(ph[i].t.hist, 0.999) / 1e3;
		mx = (double)bench_hist_max(ph[i].t.hist) / 1e3;
		p99[rec] += q99 / 2;
		cpu[rec] += ph[i].cpu / 2;
		if (rec) {
			bytes += ph[i].bytes;
			written += ph[i].written;
			dropped += ph[i].dropped;
		}
		printf("  %-22s %9.1f %9.1f %9.1f %9.1f %7.2f %% %9.0f %9.0f\n",
		       rec ? "recording" : "not recording", q50, q99, q999, mx, ph[i].cpu * 100,
		       rec ? ph[i].written : 0, rec ? ph[i].dropped : 0);
		j = cJSON_CreateObject();
		cJSON_AddBoolToObject(j, "recording", rec);
		cJSON_AddNumberToObject(j, "late_p50_us", q50);
		cJSON_AddNumberToObject(j, "late_p99_us", q99);
		cJSON_AddNumberToObject(j, "late_p999_us", q999);
		cJSON_AddNumberToObject(j, "late_max_us", mx);
		cJSON_AddNumberToObject(j, "cpu_fraction", ph[i].cpu);
		if (rec) {
			cJSON_AddNumberToObject(j, "written", ph[i].written);
			cJSON_AddNumberToObject(j, "dropped", ph[i].dropped);
			cJSON_AddNumberToObject(j, "file_bytes", ph[i].bytes);
		}
		cJSON_AddItemToArray(results, j);
	}
	{
		double rp = p99[0] > 0 ? p99[1] / p99[0] : 0, rc = cpu[0] > 0 ? cpu[1] / cpu[0] : 0;
		/* The bytes a change takes: the files' lengths (each with its
		 * start and summary, written at exit) over the changes they
		 * hold. */
		double per = written > 0 ? bytes / written : 0;

		printf("  recording against not: tick lateness p99 %.2fx, the daemon's CPU %.2fx "
		       "(%.2f %% of a core more);\n  %.0f bytes per change (files of %.0f bytes for "
		       "%.0f changes), %.0f dropped\n",
		       rp, rc, (cpu[1] - cpu[0]) * 100, per, bytes, written, dropped);
		cJSON_AddNumberToObject(out, "late_p99_ratio", rp);
		cJSON_AddNumberToObject(out, "cpu_ratio", rc);
		cJSON_AddNumberToObject(out, "bytes_per_change", per);
		cJSON_AddNumberToObject(out, "dropped", dropped);
	}
	rmdir(rt);
	return 0;
}
