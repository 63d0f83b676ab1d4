/* SPDX-License-Identifier: MIT */
/*
 * bindings: the cost of a read from C++ and from Python against each
 * language's own monotonic clock, in the same process. The measuring is
 * done by two helpers in those languages (shmclock-bench-cxx and
 * shmclock-bench-python.py, found next to this program or installed in
 * libexec), each printing one JSON object; helpers.c turns them into tables.
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

int bench_bindings(const struct bench_opts *o, cJSON *out)
{
	char cxx_buf[PATH_MAX], py_buf[PATH_MAX], samples[32];
	const char *cxx = bench_find("SHMCLOCK_BENCH_CXX", "bench", "shmclock-bench-cxx",
				     SHMCLOCK_LIBEXEC "/shmclock-bench-cxx", cxx_buf, sizeof(cxx_buf));
	const char *py = bench_find("SHMCLOCK_BENCH_PY", "bench", "shmclock-bench-python.py",
				    SHMCLOCK_LIBEXEC "/shmclock-bench-python.py", py_buf, sizeof(py_buf));
	const char *python = getenv("SHMCLOCK_PYTHON");
	const char *pythonpath = getenv("PYTHONPATH");
	char pyenv[PATH_MAX + 16];
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

		text = bench_run_helper(argv, NULL);
		if (!text || !bench_report_helper(text, langs)) {
			fprintf(stderr, "shmclock-bench: the C++ helper (%s) failed\n", cxx);
			failed = 1;
		}
		free(text);
	}
	snprintf(samples, sizeof(samples), "%ld", o->samples ? o->samples : o->quick ? 5000 : 50000);
	{
		char *argv[] = { (char *)python, (char *)py, samples, NULL };
		char *env[] = { pyenv, NULL };

		snprintf(pyenv, sizeof(pyenv), "PYTHONPATH=%s", pythonpath ? pythonpath : "");
		text = bench_run_helper(argv, pythonpath ? env : NULL);
		if (!text || !bench_report_helper(text, langs)) {
			fprintf(stderr, "shmclock-bench: the Python helper (%s %s) failed: is the module "
					"built (python3-dev)?\n", python, py);
			failed = 1;
		}
		free(text);
	}
	return failed;
}
