/* SPDX-License-Identifier: MIT */
/*
 * daemon: shmclockd's CPU share and resident memory while it serves a
 * clock, at PublishHz 100 and 10000. The baseline is a process that only
 * sleeps (`sleep`, from coreutils), measured the same way in the same run:
 * what any process costs on this machine.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

/* CPU fraction of one core over @secs after a warm-up, and memory at the
 * end. */
static bool measure(pid_t pid, double secs, double *cpu, struct bench_usage *end)
{
	struct bench_usage a;
	int64_t t0, t1;

	bench_sleep_s(0.3);
	t0 = bench_mono_ns();
	if (!bench_proc_usage(pid, &a))
		return false;
	bench_sleep_s(secs);
	t1 = bench_mono_ns();
	if (!bench_proc_usage(pid, end))
		return false;
	*cpu = (end->cpu_s - a.cpu_s) / ((double)(t1 - t0) / 1e9);
	return true;
}

int bench_daemon(const struct bench_opts *o, cJSON *out)
{
	static const char *hz[] = { "100", "10000" };
	double secs = o->duration_s > 0 ? o->duration_s : o->quick ? 1.0 : 10.0;
	char path[4096], rt[64], name[64], sleep_arg[32];
	cJSON *results = cJSON_AddArrayToObject(out, "results");
	const char *daemon = bench_find("SHMCLOCKD", "shmclockd", "shmclockd", SHMCLOCKD_INSTALLED, path,
					sizeof(path));
	struct bench_usage base_u, u;
	double base_cpu, cpu;
	pid_t pid;

	if (bench_runtime_dir(rt, sizeof(rt)))
		return 1;
	cJSON_AddNumberToObject(out, "seconds", secs);
	cJSON_AddStringToObject(out, "shmclockd", daemon);
	printf("daemon: shmclockd's CPU share of one core and memory over %.3g s%s\n", secs,
	       o->quick ? " (quick)" : "");
	printf("  %-30s %12s %12s %12s\n", "process", "CPU", "VmRSS", "RssAnon");

	snprintf(sleep_arg, sizeof(sleep_arg), "%d", (int)secs + 5);
	{
		char *argv[] = { "sleep", sleep_arg, NULL };

		pid = bench_spawn(argv, false);
		if (pid < 0 || !measure(pid, secs, &base_cpu, &base_u)) {
			fprintf(stderr, "shmclock-bench: could not measure the baseline\n");
			return 1;
		}
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		printf("  %-30s %10.3f %% %8ld KiB %8ld KiB\n", "baseline: sleep", base_cpu * 100,
		       base_u.rss_kib, base_u.anon_kib);
	}
	for (size_t i = 0; i < sizeof(hz) / sizeof(hz[0]); i++) {
		char *argv[] = { (char *)daemon, "--notify-fd", "-n", name, "--hz", (char *)hz[i],
				 "--remove-on-exit", "--log-level=warn", NULL };
		char label[64];
		cJSON *j = cJSON_CreateObject();

		snprintf(name, sizeof(name), "bench-daemon-%d-%zu", (int)getpid(), i);
		pid = bench_spawn(argv, true);
		if (pid < 0) {
			fprintf(stderr, "shmclock-bench: %s did not start (set SHMCLOCKD)\n", daemon);
			rmdir(rt);
			return 1;
		}
		if (!measure(pid, secs, &cpu, &u)) {
			fprintf(stderr, "shmclock-bench: shmclockd exited while measured\n");
			return 1;
		}
		kill(pid, SIGTERM);
		waitpid(pid, NULL, 0);
		snprintf(label, sizeof(label), "shmclockd PublishHz %s", hz[i]);
		printf("  %-30s %10.3f %% %8ld KiB %8ld KiB\n", label, cpu * 100, u.rss_kib,
		       u.anon_kib);
		cJSON_AddStringToObject(j, "name", label);
		cJSON_AddNumberToObject(j, "hz", atof(hz[i]));
		cJSON_AddNumberToObject(j, "cpu_fraction", cpu);
		cJSON_AddNumberToObject(j, "rss_kib", (double)u.rss_kib);
		cJSON_AddNumberToObject(j, "rss_anon_kib", (double)u.anon_kib);
		cJSON_AddItemToArray(results, j);
		if (i == 0) {
			printf("  %-58s %8.3f %%  target < 0.5 %%  %s\n", "  CPU at 100 Hz", cpu * 100,
			       cpu < 0.005 ? "met" : "NOT MET");
			printf("  %-58s %8.2f MiB target < 4 MiB  %s\n", "  resident memory at 100 Hz",
			       (double)u.rss_kib / 1024, u.rss_kib < 4096 ? "met" : "NOT MET");
		}
	}
	cJSON_AddNumberToObject(out, "baseline_cpu_fraction", base_cpu);
	cJSON_AddNumberToObject(out, "baseline_rss_kib", (double)base_u.rss_kib);
	rmdir(rt);
	return 0;
}
