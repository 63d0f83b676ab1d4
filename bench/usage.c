/* SPDX-License-Identifier: MIT */
/*
 * What a process under measurement costs (CPU of all its threads, resident
 * memory) and how late a daemon's clock thread ran (its own histogram, from
 * status): shared by daemon, flood and panel.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <string.h>

#include "bench.h"
#include "control_client.h"

/* The first field of each task's schedstat is its time on a CPU in ns
 * (clock ticks in /proc/PID/stat are 10 ms, too coarse for a process that
 * sleeps 99.9% of the time). */
bool bench_proc_cpu(pid_t pid, double *cpu_s)
{
	char path[64];
	DIR *d;
	struct dirent *e;
	unsigned long long sum = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return false;
	while ((e = readdir(d))) {
		char p[320];
		unsigned long long ns;
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "/proc/%d/task/%s/schedstat", (int)pid, e->d_name);
		f = fopen(p, "r");
		if (f) {
			if (fscanf(f, "%llu", &ns) == 1)
				sum += ns;
			fclose(f);
		}
	}
	closedir(d);
	*cpu_s = (double)sum / 1e9;
	return true;
}

bool bench_proc_usage(pid_t pid, struct bench_usage *u)
{
	char path[64], buf[256];
	FILE *f;

	if (!bench_proc_cpu(pid, &u->cpu_s))
		return false;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return false;
	u->rss_kib = u->anon_kib = 0;
	while (fgets(buf, sizeof(buf), f)) {
		sscanf(buf, "VmRSS: %ld", &u->rss_kib);
		sscanf(buf, "RssAnon: %ld", &u->anon_kib);
	}
	fclose(f);
	return true;
}

static double num(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

int bench_ticks_get(const char *sock, struct bench_ticks *t)
{
	static char buf[65536];
	cJSON *root, *st, *tk, *ctl, *pair;

	memset(t, 0, sizeof(*t));
	if (control_client_request(sock, "{\"cmd\":\"status\"}\n", buf, sizeof(buf), -1))
		return -1;
	root = cJSON_Parse(buf);
	st = cJSON_GetObjectItemCaseSensitive(root, "status");
	tk = cJSON_GetObjectItemCaseSensitive(st, "ticks");
	ctl = cJSON_GetObjectItemCaseSensitive(st, "control");
	if (!tk || !ctl) {
		cJSON_Delete(root);
		return -1;
	}
	t->count = num(tk, "count");
	t->skipped = num(tk, "skipped");
	cJSON_ArrayForEach(pair, cJSON_GetObjectItemCaseSensitive(tk, "late_hist"))
	{
		const cJSON *lo = cJSON_GetArrayItem(pair, 0), *n = cJSON_GetArrayItem(pair, 1);

		if (cJSON_IsNumber(lo) && cJSON_IsNumber(n))
			t->hist[latehist_index((int64_t)lo->valuedouble)] += (uint64_t)n->valuedouble;
	}
	t->answered = num(ctl, "answered");
	t->errors = num(ctl, "errors");
	t->dropped = num(ctl, "dropped");
	t->evicted = num(ctl, "evicted");
	cJSON_Delete(root);
	return 0;
}

void bench_ticks_diff(const struct bench_ticks *a, const struct bench_ticks *b,
		      struct bench_ticks *out)
{
	out->count = b->count - a->count;
	out->skipped = b->skipped - a->skipped;
	for (int i = 0; i < LATEHIST_N; i++)
		out->hist[i] = b->hist[i] - a->hist[i];
	out->answered = b->answered - a->answered;
	out->errors = b->errors - a->errors;
	out->dropped = b->dropped - a->dropped;
	out->evicted = b->evicted - a->evicted;
}

int64_t bench_hist_max(const uint64_t *h)
{
	for (int i = LATEHIST_N - 1; i >= 0; i--)
		if (h[i])
			return latehist_hi(i) == INT64_MAX ? latehist_lo(i) : latehist_hi(i);
	return 0;
}
