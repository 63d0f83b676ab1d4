/* SPDX-License-Identifier: MIT */
/*
 * csharp: a read from C# (Shmclock.Clock.Now) against Stopwatch.GetTimestamp
 * in the same Mono process, and AWSIM's design — a lock-protected GetTime()
 * read by a 100 Hz clock thread and 1, 4, 8 sensor threads — against
 * ShmclockTimeSource under the same load. The measuring is done by
 * shmclock-bench-csharp.exe (bindings_csharp.cs) under mono, built next to
 * this program (only when Mono is found, as this command); this turns its
 * JSON into tables.
 *
 * Mono's P/Invoke costs more under its default hybrid thread suspension
 * (each call enters and leaves a GC-safe region) than under the
 * preemptive suspension of older Mono, so the read is measured under both;
 * Clock reads by raw internal calls instead where it can (Clock.FastPath,
 * shown in the heading: "raw internal calls" or "P/Invoke").
 */
#define _GNU_SOURCE
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static void awsim_table(const cJSON *loads, int ncpu)
{
	const cJSON *l;

	printf(" AWSIM's design: a 100 Hz clock thread and N sensor threads reading as fast as\n"
	       " they can (%d cores); per read (batches of 10), and the clock thread's lateness\n\n", ncpu);
	printf("  %-8s %-22s %10s %10s %10s %12s %12s %12s\n", "sensors", "time source", "read p50",
	       "read p99", "reads/s", "late p50", "late p99", "late max");
	cJSON_ArrayForEach(l, loads) {
		static const char *const kinds[] = { "lock", "shmclock" };
		static const char *const names[] = { "lock (AWSIM)", "ShmclockTimeSource" };
		int n = (int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(l, "sensors"));
		double p99[2] = { 0, 0 };

		for (int k = 0; k < 2; k++) {
			const cJSON *s = cJSON_GetObjectItemCaseSensitive(l, kinds[k]);
#define F(key) cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(s, key))
			p99[k] = F("read_p99");
			printf("  %-8d %-22s %7.0f ns %7.0f ns %9.2fM %9.0f us %9.0f us %9.0f us\n", n,
			       names[k], F("read_p50"), F("read_p99"), F("reads_per_s") / 1e6,
			       F("late_p50_us"), F("late_p99_us"), F("late_max_us"));
#undef F
		}
		printf("  %-8s read p99: lock / shmclock %.1fx\n", "", p99[1] > 0 ? p99[0] / p99[1] : 0);
	}
	printf("\n");
}

int bench_csharp(const struct bench_opts *o, cJSON *out)
{
	char exe_buf[PATH_MAX], samples[32], seconds[32];
	const char *exe = bench_find("SHMCLOCK_BENCH_CS", "bench", "shmclock-bench-csharp.exe",
				     SHMCLOCK_CSHARP_HELPER, exe_buf, sizeof(exe_buf));
	const char *mono = getenv("SHMCLOCK_MONO");
	char *env[] = { "LD_LIBRARY_PATH=" SHMCLOCK_CSHARP_LIBDIR, "MONO_PATH=" SHMCLOCK_CSHARP_DLLDIR,
			NULL, NULL };
	cJSON *langs = cJSON_AddArrayToObject(out, "languages"), *doc;
	int failed = 0;

	if (!mono || !*mono)
		mono = SHMCLOCK_MONO_EXE;
	snprintf(samples, sizeof(samples), "%ld", o->samples ? o->samples : o->quick ? 20000 : 200000);
	snprintf(seconds, sizeof(seconds), "%g", o->duration_s > 0 ? o->duration_s : o->quick ? 0.5 : 3);
	printf("csharp: a read from C# (Mono) against Stopwatch.GetTimestamp in the same process;\n"
	       "AWSIM's lock-protected GetTime against ShmclockTimeSource under load\n\n");
	for (int pre = 0; pre < 2; pre++) {
		char *argv[] = { (char *)mono, (char *)exe, samples, pre ? "0" : seconds, NULL };
		char *text;

		env[2] = pre ? "MONO_THREADS_SUSPEND=preemptive" : NULL;
		text = bench_run_helper(argv, env);
		doc = text ? bench_report_helper(text, langs) : NULL;
		if (!doc) {
			fprintf(stderr, "shmclock-bench: the C# helper (%s %s) failed\n", mono, exe);
			failed = 1;
		} else if (cJSON_GetObjectItemCaseSensitive(doc, "awsim")) {
			awsim_table(cJSON_GetObjectItemCaseSensitive(doc, "awsim"), bench_ncpu());
		}
		free(text);
	}
	return failed;
}
