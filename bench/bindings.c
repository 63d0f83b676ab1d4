/* SPDX-License-Identifier: MIT */
/*
 * bindings: the cost of a read from C++ and from Python against each
 * language's own monotonic clock, in the same process. The measuring is
 * done by two helpers in those languages (shmclock-bench-cxx and
 * shmclock-bench-python.py, found next to this program or installed in
 * libexec), each printing one JSON object; this turns them into tables.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

/* Runs argv, returns its stdout (malloc'd, NUL-terminated) or NULL. */
static char *run_helper(char **argv, const char *pythonpath)
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
		if (pythonpath)
			setenv("PYTHONPATH", pythonpath, 1);
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

/* Prints one helper's table and target line; adds it to @out. */
static int report(const char *text, cJSON *out)
{
	cJSON *doc = cJSON_Parse(text), *c;
	const cJSON *lang, *goal;
	double base = 0, ratio = 0;
	int i = 0;

	if (!doc)
		return -1;
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
	return 0;
}

int bench_bindings(const struct bench_opts *o, cJSON *out)
{
	char cxx_buf[PATH_MAX], py_buf[PATH_MAX], samples[32];
	const char *cxx = bench_find("SHMCLOCK_BENCH_CXX", "bench", "shmclock-bench-cxx",
				     SHMCLOCK_LIBEXEC "/shmclock-bench-cxx", cxx_buf, sizeof(cxx_buf));
	const char *py = bench_find("SHMCLOCK_BENCH_PY", "bench", "shmclock-bench-python.py",
				    SHMCLOCK_LIBEXEC "/shmclock-bench-python.py", py_buf, sizeof(py_buf));
	const char *python = getenv("SHMCLOCK_PYTHON");
	const char *pythonpath = getenv("PYTHONPATH");
	cJSON *langs = cJSON_AddArrayToObject(out, "languages");
	int failed = 0;
	char *text;

	/* The build tree's module unless the caller says otherwise. */
	if (!pythonpath && access(SHMCLOCK_PYTHON_BUILD_PATH "/shmclock/__init__.py", R_OK) == 0)
		pythonpath = SHMCLOCK_PYTHON_BUILD_PATH;
	if (!python || !*python)
		python = SHMCLOCK_PYTHON_EXE;
	snprintf(samples, sizeof(samples), "%ld", o->samples ? o->samples : o->quick ? 20000 : 200000);
	printf("bindings: the cost of a read from C++ and Python, against each language's own\n"
	       "monotonic clock in the same process\n\n");
	{
		char *argv[] = { (char *)cxx, samples, NULL };

		text = run_helper(argv, NULL);
		if (!text || report(text, langs)) {
			fprintf(stderr, "shmclock-bench: the C++ helper (%s) failed\n", cxx);
			failed = 1;
		}
		free(text);
	}
	snprintf(samples, sizeof(samples), "%ld", o->samples ? o->samples : o->quick ? 5000 : 50000);
	{
		char *argv[] = { (char *)python, (char *)py, samples, NULL };

		text = run_helper(argv, pythonpath);
		if (!text || report(text, langs)) {
			fprintf(stderr, "shmclock-bench: the Python helper (%s %s) failed: is the module "
					"built (python3-dev)?\n", python, py);
			failed = 1;
		}
		free(text);
	}
	return failed;
}
