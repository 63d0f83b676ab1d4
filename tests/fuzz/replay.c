/* SPDX-License-Identifier: MIT */
/*
 * A main() for a fuzz target built without libFuzzer (any compiler): runs
 * every file named on the command line, or found in a directory named
 * there, through LLVMFuzzerTestOneInput once. The seed corpora and the
 * inputs fuzzing once crashed on are regression tests in every build.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long n;

	if (!f) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (fseek(f, 0, SEEK_END) < 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) < 0) {
		fprintf(stderr, "replay: %s: cannot size it\n", path);
		fclose(f);
		return -1;
	}
	/* Exactly n bytes, so ASan sees a read past the input. */
	buf = malloc(n ? (size_t)n : 1);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		fprintf(stderr, "replay: %s: short read\n", path);
		free(buf);
		fclose(f);
		return -1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)n);
	free(buf);
	return 0;
}

static int cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
	int runs = 0, failed = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE|DIR...\n"
				"Runs each input once through the fuzz target.\n", argv[0]);
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		struct stat st;

		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		if (S_ISDIR(st.st_mode)) {
			struct dirent **ents;
			int n = scandir(argv[i], &ents, NULL, NULL);

			if (n < 0) {
				fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
				return 1;
			}
			char **names = calloc((size_t)n, sizeof(*names));
			int k = 0;

			for (int j = 0; j < n; j++) {
				if (ents[j]->d_name[0] != '.' &&
				    asprintf(&names[k], "%s/%s", argv[i], ents[j]->d_name) >= 0)
					k++;
				free(ents[j]);
			}
			free(ents);
			/* In name order, so a failure reproduces the same way. */
			qsort(names, (size_t)k, sizeof(*names), cmp);
			for (int j = 0; j < k; j++) {
				failed += run_file(names[j]) < 0;
				runs++;
				free(names[j]);
			}
			free(names);
		} else {
			failed += run_file(argv[i]) < 0;
			runs++;
		}
	}
	printf("replay: %d inputs, %d unreadable\n", runs, failed);
	return failed || runs == 0;
}
