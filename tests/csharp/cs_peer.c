/* SPDX-License-Identifier: MIT */
/*
 * The C side of the C# tests (test_shmclock.cs): a reader or a writer of a
 * clock in a process of its own, driven line by line on stdin.
 *
 *   cs-peer reader NAME    now           -> "R NS" (R: 0 or a negative errno)
 *   cs-peer writer NAME    set NS | advance NS | step NS | scale X |
 *                          pause | resume  -> "R"
 *                          now           -> "R NS"
 *
 * It answers "ready" once the clock is open, and exits on EOF (so it never
 * outlives the test that started it) or "quit". Exit: 0; 1 open failed.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shmclock/writer.h>

int main(int argc, char **argv)
{
	shmclock_writer_t *w = NULL;
	shmclock_t *clk = NULL;
	char line[256];
	int r;

	if (argc != 3 || (strcmp(argv[1], "reader") && strcmp(argv[1], "writer"))) {
		fprintf(stderr, "usage: cs-peer reader|writer NAME\n");
		return 2;
	}
	r = !strcmp(argv[1], "reader") ? shmclock_open(argv[2], &clk) : shmclock_writer_open(argv[2], &w);
	if (r) {
		fprintf(stderr, "cs-peer: %s: %s\n", argv[2], shmclock_strerror(r));
		return 1;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");
	while (fgets(line, sizeof(line), stdin)) {
		char cmd[32] = "";
		int64_t ns = 0;
		double x = 0;

		sscanf(line, "%31s", cmd);
		if (!strcmp(cmd, "quit"))
			break;
		if (!strcmp(cmd, "now")) {
			r = clk ? shmclock_now(clk, &ns) : shmclock_writer_now(w, &ns);
			printf("%d %" PRId64 "\n", r, ns);
			continue;
		}
		if (!w) {
			printf("%d\n", -22);
			continue;
		}
		if (!strcmp(cmd, "set") && sscanf(line, "%*s %" SCNd64, &ns) == 1)
			r = shmclock_writer_set_time(w, ns);
		else if (!strcmp(cmd, "advance") && sscanf(line, "%*s %" SCNd64, &ns) == 1)
			r = shmclock_writer_advance(w, ns);
		else if (!strcmp(cmd, "step") && sscanf(line, "%*s %" SCNd64, &ns) == 1)
			r = shmclock_writer_step(w, ns);
		else if (!strcmp(cmd, "scale") && sscanf(line, "%*s %lf", &x) == 1)
			r = shmclock_writer_set_scale(w, x);
		else if (!strcmp(cmd, "pause"))
			r = shmclock_writer_pause(w);
		else if (!strcmp(cmd, "resume"))
			r = shmclock_writer_resume(w);
		else
			r = -22;
		printf("%d\n", r);
	}
	shmclock_writer_close(w);
	shmclock_close(clk);
	return 0;
}
