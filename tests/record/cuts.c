/* SPDX-License-Identifier: MIT */
/*
 * record-cuts FILE START: the recording FILE cut at every length from
 * START to its whole size, each read by shmclock's own reader (tl_load_mem,
 * what the replay and shmclock-cat --mcap use): one line per length, the
 * number of whole function changes it gives and whether it said the file
 * was cut short ("LEN COUNT CUT"), or "LEN error MESSAGE". For
 * record_e2e.py, which compares the counts with @mcap/core's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timeline.h"

int main(int argc, char **argv)
{
	FILE *f;
	long size, start;
	unsigned char *buf;

	if (argc != 3 || !(f = fopen(argv[1], "rb"))) {
		fprintf(stderr, "usage: record-cuts FILE START\n");
		return 2;
	}
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	rewind(f);
	buf = malloc((size_t)size + 1);
	if (!buf || fread(buf, 1, (size_t)size, f) != (size_t)size)
		return 1;
	fclose(f);
	start = atol(argv[2]);
	for (long n = start < 0 ? 0 : start; n <= size; n++) {
		struct tl_recording rec;
		char err[256];

		/* A copy of exactly n bytes: a reader that looked past them
		 * would be caught by ASan. */
		unsigned char *cut = malloc((size_t)n + 1);

		memcpy(cut, buf, (size_t)n);
		if (tl_load_mem(cut, (size_t)n, &rec, err, sizeof(err)))
			printf("%ld error %s\n", n, err);
		else
			printf("%ld %zu %d\n", n, rec.nchanges, rec.truncated);
		tl_free(&rec);
		free(cut);
	}
	free(buf);
	return 0;
}
