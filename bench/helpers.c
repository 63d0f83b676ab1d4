/* SPDX-License-Identifier: MIT */
/*
 * Benchmark helpers in other languages (bindings: C++ and Python; csharp:
 * C# under Mono): each measures in its own process and prints one JSON
 * object with its contenders; these run it and turn that into a table.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

char *bench_run_helper(char **argv, char **env)
{
	int p[2], st;
	size_t used = 0, cap = 4096;
	char *buf = malloc(cap);
	pid_t pid;

	if (!buf || pipe(p) < 0) {
		free(buf);
		return NULL;
	}
	pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		for (char **e = env; e && *e; e++)
			putenv(*e);
		execvp(argv[0], argv);
		fprintf(stderr, "shmclock-bench: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(p[1]);
	for (;;) {
		ssize_t n;

		if (used + 1 >= cap) {
			char *b = realloc(buf, cap *= 2);

			if (!b)
				break;
			buf = b;
		}
		n = read(p[0], buf + used, cap - 1 - used);
		if (n <= 0)
			break;
		used += (size_t)n;
	}
	buf[used] = 0;
	close(p[0]);
	if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
		free(buf);
		return NULL;
	}
	return buf;
}

cJSON *bench_report_helper(const char *text, cJSON *out)
{
	cJSON *doc = cJSON_Parse(text), *c;
	const cJSON *lang, *goal;
	double base = 0, ratio = 0;
	int i = 0;

	if (!doc)
		return NULL;
	lang = cJSON_GetObjectItemCaseSensitive(doc, "language");
	goal = cJSON_GetObjectItemCaseSensitive(doc, "goal");
	printf(" %s\n", cJSON_IsString(lang) ? lang->valuestring : "?");
	bench_header("ns per call");
	cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(doc, "contenders")) {
		struct bench_stats s = { 0 };
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(c, "name");

		s.p50 = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(c, "p50"));
		s.p99 = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(c, "p99"));
		s.p999 = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(c, "p999"));
		s.max = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(c, "max"));
		if (i++ == 0)
			base = s.p50;
		bench_row(cJSON_IsString(n) ? n->valuestring : "?", &s, base, 1);
		ratio = base > 0 ? s.p50 / base : 0;
	}
	if (cJSON_IsNumber(goal))
		printf("  read p50 / baseline p50: %.3fx  target <= %.2fx  %s\n\n", ratio,
		       goal->valuedouble, ratio <= goal->valuedouble ? "met" : "NOT MET");
	cJSON_AddNumberToObject(doc, "ratio", ratio);
	cJSON_AddItemToArray(out, doc);
	return doc;
}

