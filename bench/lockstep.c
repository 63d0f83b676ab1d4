/* SPDX-License-Identifier: MIT */
/*
 * lockstep: steps per second, and the round trip of one step, with 1, 2, 4
 * and 8 no-op participant processes: shmclockd --lockstep N (each
 * participant: advance(t += 1 ms) in a loop) against a coordinator over
 * Unix sockets written the way people write one (send "go" to every
 * participant, then wait for every "done"), measured in the same run.
 *
 * The round trip of a step: for shmclock, participant 0's advance() (its
 * grant until the clock reaches it, which needs every other grant); for the
 * sockets, the coordinator's first "go" until its last "done".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <shmclock/lockstep.h>

#include "bench.h"

#define MS 1000000LL

struct shared {
	_Atomic int failed;
	int64_t t0, t1;   /* participant 0: first and last step, CLOCK_MONOTONIC */
	double rtt[];     /* participant 0: each step's round trip, ns */
};

static void participant(const char *clock, int i, long steps, struct shared *sh)
{
	shmclock_lockstep_t *p;
	char who[32];
	int r;

	snprintf(who, sizeof(who), "bench-%d", i);
	r = shmclock_lockstep_join(clock, who, &p);
	if (r) {
		fprintf(stderr, "shmclock-bench: join: %s\n", shmclock_strerror(r));
		sh->failed = 1;
		_exit(1);
	}
	for (long s = 0; s < steps; s++) {
		int64_t a = bench_mono_ns();

		r = shmclock_lockstep_advance(p, (s + 1) * MS, shmclock_sec(10));
		if (r) {
			fprintf(stderr, "shmclock-bench: advance: %s\n", shmclock_strerror(r));
			sh->failed = 1;
			_exit(1);
		}
		if (i == 0) {
			int64_t b = bench_mono_ns();

			sh->rtt[s] = (double)(b - a);
			if (s == 0)
				sh->t0 = b;
			sh->t1 = b;
		}
	}
	shmclock_lockstep_leave(p);
	_exit(0);
}

/* shmclockd --lockstep n: 0, or -1 with a message. */
static int run_shmclock(const char *daemon, int n, long steps, struct shared *sh)
{
	char name[64], narg[16];
	char *argv[] = { (char *)daemon, "--notify-fd", "-n", name, "--source", "fixed",
			 "--lockstep", narg, "--remove-on-exit", "--log-level=warn", NULL };
	pid_t d, kids[8];
	int rc = 0;

	snprintf(name, sizeof(name), "bench-lockstep-%d-%d", (int)getpid(), n);
	snprintf(narg, sizeof(narg), "%d", n);
	d = bench_spawn(argv, true);
	if (d < 0) {
		fprintf(stderr, "shmclock-bench: %s did not start\n", daemon);
		return -1;
	}
	sh->failed = 0;
	for (int i = 0; i < n; i++) {
		kids[i] = fork();
		if (kids[i] == 0)
			participant(name, i, steps, sh);
	}
	for (int i = 0; i < n; i++) {
		int st;

		waitpid(kids[i], &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			rc = -1;
	}
	kill(d, SIGTERM);
	waitpid(d, NULL, 0);
	return rc || sh->failed ? -1 : 0;
}

/* The baseline: a coordinator and n participants over socketpairs. */
static int run_sockets(int n, long steps, struct shared *sh)
{
	int fd[8][2];
	pid_t kids[8];
	char c = 'g';

	for (int i = 0; i < n; i++) {
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd[i]) < 0)
			return -1;
		kids[i] = fork();
		if (kids[i] == 0) {
			char b;

			/* Not the coordinator's ends: they must close (EOF)
			 * when the coordinator closes them. */
			for (int j = 0; j <= i; j++)
				close(fd[j][0]);
			/* A no-op participant: "go" in, "done" out. */
			while (read(fd[i][1], &b, 1) == 1)
				if (write(fd[i][1], "d", 1) != 1)
					break;
			_exit(0);
		}
		close(fd[i][1]);
	}
	for (long s = 0; s < steps; s++) {
		int64_t a = bench_mono_ns(), b;

		for (int i = 0; i < n; i++)
			if (write(fd[i][0], &c, 1) != 1)
				return -1;
		for (int i = 0; i < n; i++)
			if (read(fd[i][0], &c, 1) != 1)
				return -1;
		b = bench_mono_ns();
		sh->rtt[s] = (double)(b - a);
		if (s == 0)
			sh->t0 = b;
		sh->t1 = b;
	}
	for (int i = 0; i < n; i++) {
		close(fd[i][0]);
		waitpid(kids[i], NULL, 0);
	}
	return 0;
}

int bench_lockstep(const struct bench_opts *o, cJSON *out)
{
	static const int counts[] = { 1, 2, 4, 8 };
	long steps = o->samples > 0 ? o->samples : o->quick ? 20000 : 200000;
	char path[4096];
	const char *daemon = bench_find("SHMCLOCKD", "shmclockd", "shmclockd", SHMCLOCKD_INSTALLED, path,
					sizeof(path));
	struct shared *sh = bench_shared(sizeof(*sh) + (size_t)steps * sizeof(double));
	cJSON *results = cJSON_AddArrayToObject(out, "results");
	char rt[64];

	if (bench_runtime_dir(rt, sizeof(rt)))
		return 1;
	cJSON_AddNumberToObject(out, "steps", (double)steps);
	printf("lockstep: steps per second and one step's round trip, %ld steps of no-op\n"
	       "participant processes%s; baseline: a coordinator over Unix sockets (go / done)\n",
	       steps, o->quick ? " (quick)" : "");
	printf("  %-13s %-9s %12s %10s %10s %12s\n", "participants", "via", "steps/s", "p50 us",
	       "p99 us", "vs sockets");
	for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
		int n = counts[k];
		double rate[2] = { 0, 0 };
		struct bench_stats st[2];
		cJSON *j = cJSON_CreateObject();

		cJSON_AddNumberToObject(j, "participants", n);
		/* Sockets first, then shmclock: the baseline in the same run. */
		for (int v = 0; v < 2; v++) {
			int r = v == 0 ? run_sockets(n, steps, sh) : run_shmclock(daemon, n, steps, sh);
			cJSON *f = cJSON_CreateObject();

			if (r) {
				fprintf(stderr, "shmclock-bench: lockstep with %d participants (%s) failed\n", n,
					v ? "shmclock" : "sockets");
				rmdir(rt);
				return 1;
			}
			rate[v] = (double)(steps - 1) / ((double)(sh->t1 - sh->t0) / 1e9);
			st[v] = bench_summarise(sh->rtt, steps);
			cJSON_AddNumberToObject(f, "steps_per_s", rate[v]);
			bench_json_stats(f, &st[v]);
			cJSON_AddItemToObject(j, v ? "shmclock" : "sockets", f);
			printf("  %-13d %-9s %12.0f %10.2f %10.2f", n, v ? "shmclock" : "sockets", rate[v],
			       st[v].p50 / 1e3, st[v].p99 / 1e3);
			if (v)
				printf(" %11.2fx", rate[1] / rate[0]);
			printf("\n");
		}
		cJSON_AddNumberToObject(j, "speedup", rate[1] / rate[0]);
		cJSON_AddItemToArray(results, j);
	}
	rmdir(rt);
	return 0;
}
