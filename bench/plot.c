/* SPDX-License-Identifier: MIT */
/*
 * plot: the read-latency CDFs of every contender of a `read` run, on one
 * chart, as a PNG (gnuplot, Debian's gnuplot-nox); or, with `lockstep`,
 * steps per second against participants. Input: the JSON of
 * `shmclock-bench read|lockstep --json` or `shmclock-bench all --json`.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)n + 1);
		if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
			free(buf);
			buf = NULL;
		} else if (buf) {
			buf[n] = 0;
		}
	}
	fclose(f);
	return buf;
}

/* The bench object @what in @doc (top level, or inside "benches"). */
static cJSON *find_bench(cJSON *doc, const char *what)
{
	cJSON *b, *benches = cJSON_GetObjectItem(doc, "benches");

	if (cJSON_IsString(cJSON_GetObjectItem(doc, "bench")) &&
	    !strcmp(cJSON_GetObjectItem(doc, "bench")->valuestring, what))
		return doc;
	cJSON_ArrayForEach(b, benches) {
		cJSON *n = cJSON_GetObjectItem(b, "bench");

		if (cJSON_IsString(n) && !strcmp(n->valuestring, what))
			return b;
	}
	return NULL;
}

/* gnuplot strings are single-quoted; a quote in a name would end one. */
static void put_title(FILE *f, const char *s)
{
	fputc('\'', f);
	for (; *s; s++)
		fputc(*s == '\'' ? '"' : *s, f);
	fputc('\'', f);
}

static double num(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItem(o, k);

	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* lockstep: steps per second against the number of participants, shmclock
 * and the socket coordinator, on a log scale. */
static int plot_lockstep(cJSON *doc, const char *json_path, const char *png_path)
{
	cJSON *ls = find_bench(doc, "lockstep"), *res, *r, *m = cJSON_GetObjectItem(doc, "machine");
	char dat[] = "/tmp/shmclock-plot-XXXXXX", t[512];
	FILE *df, *gp;
	int fd, st;

	res = ls ? cJSON_GetObjectItem(ls, "results") : NULL;
	if (!cJSON_IsArray(res) || !cJSON_GetArraySize(res)) {
		fprintf(stderr, "shmclock-bench: %s: no 'lockstep' results (use lockstep --json or all --json)\n",
			json_path);
		return 1;
	}
	fd = mkstemp(dat);
	df = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!df) {
		fprintf(stderr, "shmclock-bench: temporary file: %s\n", strerror(errno));
		return 1;
	}
	/* "participants shmclock sockets" */
	cJSON_ArrayForEach(r, res)
		fprintf(df, "%g %g %g\n", num(r, "participants"),
			num(cJSON_GetObjectItem(r, "shmclock"), "steps_per_s"),
			num(cJSON_GetObjectItem(r, "sockets"), "steps_per_s"));
	fclose(df);
	gp = popen("gnuplot", "w");
	if (!gp) {
		fprintf(stderr, "shmclock-bench: gnuplot: %s (apt-get install gnuplot-nox)\n", strerror(errno));
		unlink(dat);
		return 1;
	}
	fprintf(gp, "set terminal pngcairo size 1000,650 font 'sans,11' noenhanced\nset output ");
	put_title(gp, png_path);
	snprintf(t, sizeof(t), "shmclock-bench lockstep: steps per second  -  %s, %d cpus, %s",
		 cJSON_IsString(cJSON_GetObjectItem(m, "cpu")) ? cJSON_GetObjectItem(m, "cpu")->valuestring : "?",
		 (int)num(m, "cpus"),
		 cJSON_IsString(cJSON_GetObjectItem(m, "date")) ? cJSON_GetObjectItem(m, "date")->valuestring : "?");
	fprintf(gp, "\nset title ");
	put_title(gp, t);
	fprintf(gp, "\nset logscale xy 2\nset xlabel 'no-op participant processes'\n"
		    "set ylabel 'steps per second (log scale)'\nset grid\nset key top right\n"
		    "set xtics (1, 2, 4, 8)\n");
	fprintf(gp, "plot '%s' using 1:2 with linespoints lw 2 pt 7 title 'shmclockd --lockstep (futex)', "
		    "'%s' using 1:3 with linespoints lw 2 pt 5 title 'coordinator over Unix sockets (go / done)'\n",
		dat, dat);
	st = pclose(gp);
	unlink(dat);
	if (st != 0) {
		fprintf(stderr, "shmclock-bench: gnuplot failed (exit %d)\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		return 1;
	}
	printf("%s: lockstep, %d participant counts\n", png_path, cJSON_GetArraySize(res));
	return 0;
}

int bench_plot(const char *json_path, const char *png_path, const char *what)
{
	char *text = slurp(json_path);
	char dat[] = "/tmp/shmclock-plot-XXXXXX";
	cJSON *doc, *rd, *res, *r, *m;
	FILE *df, *gp;
	int fd, st, n = 0;

	if (!text) {
		fprintf(stderr, "shmclock-bench: %s: %s\n", json_path, strerror(errno));
		return 1;
	}
	doc = cJSON_Parse(text);
	free(text);
	if (!doc) {
		fprintf(stderr, "shmclock-bench: %s: not JSON\n", json_path);
		return 1;
	}
	if (!strcmp(what, "lockstep")) {
		st = plot_lockstep(doc, json_path, png_path);
		cJSON_Delete(doc);
		return st;
	}
	rd = find_bench(doc, "read");
	res = rd ? cJSON_GetObjectItem(rd, "results") : NULL;
	if (!cJSON_IsArray(res) || cJSON_GetArraySize(res) == 0) {
		fprintf(stderr, "shmclock-bench: %s: no 'read' results (use read --json or all --json)\n",
			json_path);
		cJSON_Delete(doc);
		return 1;
	}
	fd = mkstemp(dat);
	df = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!df) {
		fprintf(stderr, "shmclock-bench: temporary file: %s\n", strerror(errno));
		cJSON_Delete(doc);
		return 1;
	}
	/* One gnuplot data block per contender: "ns percentile". */
	cJSON_ArrayForEach(r, res) {
		cJSON *pt, *cdf = cJSON_GetObjectItem(r, "cdf");

		if (!cJSON_IsArray(cdf))
			continue;
		/* Up to p99.9: the last few samples are the machine's
		 * interruptions, and would stretch the axis for all. */
		cJSON_ArrayForEach(pt, cdf)
			if (cJSON_GetArrayItem(pt, 0)->valuedouble <= 99.9)
				fprintf(df, "%g %g\n", cJSON_GetArrayItem(pt, 1)->valuedouble,
					cJSON_GetArrayItem(pt, 0)->valuedouble);
		fprintf(df, "\n\n");
		n++;
	}
	fclose(df);

	gp = popen("gnuplot", "w");
	if (!gp) {
		fprintf(stderr, "shmclock-bench: gnuplot: %s (apt-get install gnuplot-nox)\n",
			strerror(errno));
		unlink(dat);
		cJSON_Delete(doc);
		return 1;
	}
	m = cJSON_GetObjectItem(doc, "machine");
	fprintf(gp, "set terminal pngcairo size 1400,900 font 'sans,11' noenhanced\n");
	fprintf(gp, "set output ");
	put_title(gp, png_path);
	fprintf(gp, "\nset title ");
	{
		char t[512];

		snprintf(t, sizeof(t), "shmclock-bench read: ns per read (CDF)  -  %s, %d cpus, %s",
			 cJSON_IsString(cJSON_GetObjectItem(m, "cpu"))
				 ? cJSON_GetObjectItem(m, "cpu")->valuestring
				 : "?",
			 cJSON_IsNumber(cJSON_GetObjectItem(m, "cpus"))
				 ? cJSON_GetObjectItem(m, "cpus")->valueint
				 : 0,
			 cJSON_IsString(cJSON_GetObjectItem(m, "date"))
				 ? cJSON_GetObjectItem(m, "date")->valuestring
				 : "?");
		put_title(gp, t);
	}
	fprintf(gp, "\nset logscale x\nset xlabel 'ns per read (log scale)'\n"
		    "set ylabel 'percentile (to p99.9)'\nset yrange [0:100]\nset grid\n"
		    "set key outside right top vertical\n");
	fprintf(gp, "plot ");
	{
		int i = 0;

		cJSON_ArrayForEach(r, res) {
			char title[160];
			cJSON *ph = cJSON_GetObjectItem(r, "phase"), *nm = cJSON_GetObjectItem(r, "name");

			if (!cJSON_IsArray(cJSON_GetObjectItem(r, "cdf")))
				continue;
			snprintf(title, sizeof(title), "%s [%s]", cJSON_IsString(nm) ? nm->valuestring : "?",
				 cJSON_IsString(ph) ? ph->valuestring : "");
			fprintf(gp, "%s'%s' index %d using 1:2 with lines lw 2 dt %d title ", i ? ", " : "",
				dat, i, 1 + (i / 8) % 4);
			put_title(gp, title);
			i++;
		}
	}
	fprintf(gp, "\n");
	st = pclose(gp);
	unlink(dat);
	cJSON_Delete(doc);
	if (st != 0) {
		fprintf(stderr, "shmclock-bench: gnuplot failed (exit %d)\n",
			WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		return 1;
	}
	printf("%s: %d contenders\n", png_path, n);
	return 0;
}
