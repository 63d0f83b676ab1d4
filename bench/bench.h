/* SPDX-License-Identifier: MIT */
/* shmclock-bench: what the subcommands share. */
#ifndef SHMCLOCK_BENCH_H
#define SHMCLOCK_BENCH_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include <shmclock/shmclock.h>
#include <shmclock/writer.h>

#include "latehist.h"

/* Options every subcommand accepts; each uses the ones that apply. */
struct bench_opts {
	bool quick;
	const char *json;   /* --json FILE */
	long samples;       /* 0: the subcommand's default */
	int batch;          /* reads per timed batch */
	double period_ms;   /* sleep: sleep length */
	double duration_s;  /* propagate, daemon: seconds per run (0: default) */
	int subscribers;    /* propagate */
	const char *followers; /* hosts: a fleet of each size listed ("1,2,4") */
	bool hosts;         /* lockstep: between two hosts (network namespaces) */
	bool secure;        /* hosts: with and without DDS Security */
};

/* A summary of a set of samples (sorted in place). */
struct bench_stats {
	double p50, p90, p99, p999, max;
};

int64_t bench_mono_ns(void);
/* Sorts @v and summarises it. */
struct bench_stats bench_summarise(double *v, long n);
double bench_pct(const double *sorted, long n, double p);
/* Adds {"p50_ns":..,...} to @obj. */
void bench_json_stats(cJSON *obj, const struct bench_stats *s);
/* The CDF of sorted @v as [[percentile, value], ...] for the plot. */
cJSON *bench_json_cdf(const double *sorted, long n);
/* The machine the figures come from. */
cJSON *bench_machine(void);
int bench_ncpu(void);

/* A private clock at 0, scale 1, for one run; removed by bench_clock_close. */
int bench_clock_open(char *name, size_t len, shmclock_writer_t **w, shmclock_t **clk);
void bench_clock_close(const char *name, shmclock_writer_t *w, shmclock_t *clk);

/* A file next to the running program (../DIR/FILE), else @fallback.
 * $ENV overrides both. */
const char *bench_find(const char *env, const char *dir, const char *file, const char *fallback,
		       char *buf, size_t len);

/* Starts argv (execvp); with @notify, the argument "--notify-fd" is
 * replaced by --notify-fd=N and we wait (5 s) for READY=1 on it. The pid,
 * or -1 (the child is reaped). */
pid_t bench_spawn(char **argv, bool notify);
/* Starts argv with its stdout on a pipe and reads what it prints first
 * (within 5 s) into @line (NUL-terminated). The pid, or -1 (reaped). */
pid_t bench_spawn_line(char **argv, char *line, size_t len);
/* Starts argv with its stdout on @out (the caller keeps and closes it).
 * The pid, or -1. */
pid_t bench_spawn_to(char **argv, int out);
void bench_sleep_s(double s);
/* A control request on a thread of its own, so that the caller can watch
 * the segments meanwhile: bench_req_start, then bench_req_join, whose
 * result is 0 when the daemon answered "ok":true (the reply in @buf). */
struct bench_req {
	const char *sock, *req;
	char *buf;
	size_t len;
	int rc;
	pthread_t thread;
};
int bench_req_start(struct bench_req *a);
int bench_req_join(struct bench_req *a);
/* A private runtime directory for the daemons a run starts
 * (/tmp/shmclock-bench-PID, exported as SHMCLOCK_RUNTIME_DIR). 0, or -1
 * with a message. The caller removes it. */
int bench_runtime_dir(char *rt, size_t len);

/* What a process costs: CPU time of all its threads (s), VmRSS, RssAnon. */
struct bench_usage {
	double cpu_s;
	long rss_kib, anon_kib;
};
/* Each false when @pid is gone. */
bool bench_proc_cpu(pid_t pid, double *cpu_s);
bool bench_proc_usage(pid_t pid, struct bench_usage *u);

/* A daemon's tick counters and lateness histogram (status "ticks"), and
 * its control socket's counters (status "control"). */
struct bench_ticks {
	double count, skipped;
	uint64_t hist[LATEHIST_N];
	double answered, errors, dropped, evicted;
};
/* The first @key in the status of daemon @name (its socket in @rt): a
 * number, 1 or 0 for true or false; -1 when it is not there or the daemon
 * does not answer. */
double bench_status_num(const char *rt, const char *name, const char *key);
/* Asks the daemon at @sock for status. 0, or -1. */
int bench_ticks_get(const char *sock, struct bench_ticks *t);
/* @out = @b - @a: what happened between two status replies. */
void bench_ticks_diff(const struct bench_ticks *a, const struct bench_ticks *b,
		      struct bench_ticks *out);
/* The largest non-empty bucket's upper bound: the interval's max, to 12.5%. */
int64_t bench_hist_max(const uint64_t *h);

/* Shared memory for forked children (zeroed). */
void *bench_shared(size_t n);

/* Prints "name ... ratio" table rows. */
void bench_row(const char *name, const struct bench_stats *s, double base_p50, double unit);
void bench_header(const char *unit_note);

/* Each subcommand: fills @out (its JSON object) and prints its table. */
int bench_read(const struct bench_opts *o, cJSON *out);
int bench_scale(const struct bench_opts *o, cJSON *out);
int bench_propagate(const struct bench_opts *o, cJSON *out);
int bench_sleep(const struct bench_opts *o, cJSON *out);
int bench_waits(const struct bench_opts *o, cJSON *out);
int bench_waits_child(const char *mode);
int bench_bypass(const struct bench_opts *o, cJSON *out);
int bench_bypass_child(const char *args);
int bench_daemon(const struct bench_opts *o, cJSON *out);
int bench_lockstep(const struct bench_opts *o, cJSON *out);
int bench_flood(const struct bench_opts *o, cJSON *out);
int bench_panel(const struct bench_opts *o, cJSON *out);
int bench_record(const struct bench_opts *o, cJSON *out);
int bench_dds(const struct bench_opts *o, cJSON *out);
int bench_hosts(const struct bench_opts *o, cJSON *out);
/* hosts --secure (hosts_secure.c). */
int bench_hosts_secure(const struct bench_opts *o, cJSON *out);
int bench_fleet(const struct bench_opts *o, cJSON *out);
int bench_bindings(const struct bench_opts *o, cJSON *out);
/* Runs argv (execvp) with @env ("K=V" strings, NULL-terminated; may be
 * NULL) added; its stdout (malloc'd, NUL-terminated), or NULL when it
 * could not run or failed. */
char *bench_run_helper(char **argv, char **env);
/* Prints a helper's JSON ({"language", "contenders": [{name, p50, p99,
 * p999, max}], "goal"}) as a table with ratios to the first contender and
 * the goal line; adds the parsed object (with "ratio") to the array @out
 * and returns it, or NULL when @text is not JSON. */
cJSON *bench_report_helper(const char *text, cJSON *out);
int bench_csharp(const struct bench_opts *o, cJSON *out);
int bench_plot(const char *json_path, const char *png_path, const char *what);

extern volatile int64_t bench_sink; /* keeps the reads alive */

#endif
