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
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
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

/*
 * --hosts: lockstep between two hosts, network namespaces A and B joined by
 * a veth pair (root), n no-op participants on each: a leader shmclockd in A
 * (Lockstep with Distribute.Publish) and a follower host in B (TimeSource
 * leader with Lockstep), against a coordinator over TCP in A across the same
 * veth pair (each participant sends "done", the coordinator answers "go"
 * to all once all are done), in the same run. The round trip: participant
 * 0's (in A) advance, or its "done" until its "go".
 */
#define LH_ADDR_A "10.79.0.1"
#define LH_ADDR_B "10.79.0.2"

struct lh {
	char ns[2][40];
	int nsfd[2];
	const char *daemon;
	const char *rt;
	bool made;
};

static int lh_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int lh_sh(const char *fmt, ...)
{
	char cmd[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	strncat(cmd, " >/dev/null 2>&1", sizeof(cmd) - strlen(cmd) - 1);
	return system(cmd) == 0 ? 0 : -1;
}

static void lh_down(struct lh *h)
{
	for (int i = 0; i < 2; i++) {
		if (h->nsfd[i] >= 0)
			close(h->nsfd[i]);
		h->nsfd[i] = -1;
		if (h->made)
			lh_sh("ip netns del %s", h->ns[i]);
	}
	h->made = false;
}

/* The two hosts and their link; 0, or -1 (said). */
static int lh_up(struct lh *h)
{
	static const char *const addr[2] = { LH_ADDR_A, LH_ADDR_B };
	char path[128];
	int pid = (int)getpid();

	for (int i = 0; i < 2; i++) {
		snprintf(h->ns[i], sizeof(h->ns[i]), "shmclock-bench-%c-%d", 'A' + i, pid);
		h->nsfd[i] = -1;
	}
	h->made = true;
	if (lh_sh("ip netns add %s", h->ns[0]) || lh_sh("ip netns add %s", h->ns[1]) ||
	    lh_sh("ip link add sbA%d type veth peer name sbB%d", pid, pid) ||
	    lh_sh("ip link set sbA%d netns %s", pid, h->ns[0]) ||
	    lh_sh("ip link set sbB%d netns %s", pid, h->ns[1])) {
		fprintf(stderr, "shmclock-bench: cannot make two network namespaces and a veth pair "
				"(ip netns, ip link)\n");
		return -1;
	}
	for (int i = 0; i < 2; i++) {
		if (lh_sh("ip -n %s addr add %s/24 dev sb%c%d", h->ns[i], addr[i], 'A' + i, pid) ||
		    lh_sh("ip -n %s link set sb%c%d up", h->ns[i], 'A' + i, pid) ||
		    lh_sh("ip -n %s link set lo up", h->ns[i])) {
			fprintf(stderr, "shmclock-bench: cannot set up the veth pair\n");
			return -1;
		}
		snprintf(path, sizeof(path), "/run/netns/%s", h->ns[i]);
		h->nsfd[i] = open(path, O_RDONLY | O_CLOEXEC);
		if (h->nsfd[i] < 0) {
			fprintf(stderr, "shmclock-bench: %s: %s\n", path, strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* CYCLONEDDS_URI for a DDS participant in host @i: its end of the veth
 * pair, both hosts as unicast peers. */
static void lh_dds_env(int i)
{
	char uri[1024];

	snprintf(uri, sizeof(uri),
		 "<CycloneDDS><Domain id=\"any\"><General><Interfaces><NetworkInterface address=\"%s\"/>"
		 "</Interfaces><AllowMulticast>false</AllowMulticast></General><Discovery>"
		 "<ParticipantIndex>auto</ParticipantIndex><Peers><Peer address=\"" LH_ADDR_A "\"/>"
		 "<Peer address=\"" LH_ADDR_B "\"/></Peers></Discovery></Domain></CycloneDDS>",
		 i ? LH_ADDR_B : LH_ADDR_A);
	setenv("CYCLONEDDS_URI", uri, 1);
}

/* A shmclockd in host @i with the config @json (its clock @name). */
static pid_t lh_daemon(struct lh *h, int i, const char *tag, const char *json)
{
	char cfg[256];
	char *argv[] = { "ip", "netns", "exec", h->ns[i], (char *)h->daemon, "--notify-fd", "-c",
			 cfg, "--remove-on-exit", "--reset", "--log-level=warn", NULL };
	FILE *f;

	snprintf(cfg, sizeof(cfg), "%s/%s.json", h->rt, tag);
	f = fopen(cfg, "w");
	if (!f)
		return -1;
	fputs(json, f);
	fclose(f);
	lh_dds_env(i);
	return bench_spawn(argv, true);
}

/*
 * The floor under any step between hosts: a bare DDS round trip across the
 * same veth pair, no shmclock in it (Cyclone's own ddsperf, best effort as
 * the lockstep topics, answered on the receiving thread as they are: ping
 * in A, pong in B). A step needs at least one (a grant to the leader, its
 * decision back: issue 53's "one message each way per host"), plus the
 * participants' wake-ups on both hosts. ddsperf prints once a second the
 * round trips done ("cnt") and half their time ("50%"); the first second
 * (discovery) is left out. *rate round trips/s, *p50 the median round trip
 * (ns): 0, or -1 (said).
 */
static int lh_dds_floor(struct lh *h, int secs, double *rate, double *p50)
{
	char dur[16], line[512];
	char *pong[] = { "ip", "netns", "exec", h->ns[1], "ddsperf", "-u", "-D", dur, "pong", NULL };
	char *ping[] = { "ip", "netns", "exec", h->ns[0], "ddsperf", "-u", "-D", dur, "ping",
			 "listener", NULL };
	pid_t pp = -1, pi;
	int p[2], n = 0, st, null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	double cnt = 0, lat = 0;
	FILE *f;

	snprintf(dur, sizeof(dur), "%d", secs + 3);
	lh_dds_env(1);
	if (null >= 0)
		pp = bench_spawn_to(pong, null);
	snprintf(dur, sizeof(dur), "%d", secs + 1);
	lh_dds_env(0);
	if (null >= 0)
		close(null);
	if (pp <= 0 || pipe2(p, O_CLOEXEC) < 0) {
		fprintf(stderr, "shmclock-bench: cannot run ddsperf (cyclonedds-tools)\n");
		if (pp > 0)
			kill(pp, SIGTERM), waitpid(pp, NULL, 0);
		return -1;
	}
	pi = bench_spawn_to(ping, p[1]);
	close(p[1]);
	f = fdopen(p[0], "r");
	while (f && fgets(line, sizeof(line), f)) {
		const char *c = strstr(line, " cnt "), *m = strstr(line, " 50% ");
		double v;

		/* "[pid] 2.000  vm:6132 size 12 mean 33.1us min ... 50% 28.5us ... cnt 15021" */
		if (!c || !m || sscanf(c, " cnt %lf", &v) != 1 || v <= 0)
			continue;
		if (n++ == 0)
			continue; /* discovery's second */
		cnt += v;
		lat += strtod(m + 5, NULL) * v;
	}
	if (f)
		fclose(f);
	else
		close(p[0]);
	waitpid(pi, &st, 0);
	kill(pp, SIGTERM);
	waitpid(pp, NULL, 0);
	if (n < 2) {
		fprintf(stderr, "shmclock-bench: ddsperf ping across the veth pair printed no round "
				"trips\n");
		return -1;
	}
	*rate = cnt / (n - 1);
	/* each second's median, weighted by its round trips: half a round
	 * trip, in us; a whole one, in ns */
	*p50 = 2e3 * lat / cnt;
	return 0;
}

static int lh_wait_kids(pid_t *kids, int n)
{
	int rc = 0;

	for (int i = 0; i < n; i++) {
		int st;

		waitpid(kids[i], &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			rc = -1;
	}
	return rc;
}

static int lh_shmclock(struct lh *h, int n, long steps, struct shared *sh)
{
	char names[2][64], wire[64], json[512];
	pid_t d[2], kids[16];
	int rc;

	for (int i = 0; i < 2; i++)
		snprintf(names[i], sizeof(names[i]), "bench-lsh-%d-%c%d", (int)getpid(), 'A' + i, n);
	snprintf(wire, sizeof(wire), "bench-lsh-%d-%d", (int)getpid(), n);
	snprintf(json, sizeof(json), "{\"Name\": \"%s\", \"TimeSource\": \"fixed\", \"Lockstep\": "
		 "{\"Participants\": %d}, \"Distribute\": {\"Publish\": true, \"Clock\": \"%s\"}}",
		 names[0], 2 * n, wire);
	d[0] = lh_daemon(h, 0, "leader", json);
	snprintf(json, sizeof(json), "{\"Name\": \"%s\", \"TimeSource\": \"leader\", \"Lockstep\": "
		 "{\"Participants\": %d}, \"Distribute\": {\"Clock\": \"%s\"}}", names[1], n, wire);
	d[1] = d[0] > 0 ? lh_daemon(h, 1, "host", json) : -1;
	if (d[0] <= 0 || d[1] <= 0) {
		fprintf(stderr, "shmclock-bench: %s did not start in a network namespace\n", h->daemon);
		if (d[0] > 0) {
			kill(d[0], SIGTERM);
			waitpid(d[0], NULL, 0);
		}
		return -1;
	}
	sh->failed = 0;
	/* Participant 0 (the one timed) on the leader's host; the others
	 * half there, half on the follower host. */
	for (int i = 0; i < 2 * n; i++) {
		kids[i] = fork();
		if (kids[i] == 0)
			participant(names[i < n ? 0 : 1], i, steps, sh);
	}
	rc = lh_wait_kids(kids, 2 * n);
	for (int i = 0; i < 2; i++) {
		kill(d[i], SIGTERM);
		waitpid(d[i], NULL, 0);
	}
	return rc || sh->failed ? -1 : 0;
}

/* A TCP participant in host @host: "done", then wait for "go". */
static void lh_tcp_participant(struct lh *h, int host, int i, int port, long steps,
			       struct shared *sh)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd, one = 1;
	char c = 'd';

	if (setns(h->nsfd[host], CLONE_NEWNET) < 0)
		_exit(1);
	inet_pton(AF_INET, LH_ADDR_A, &a.sin_addr);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	for (int k = 0; k < 500 && connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0; k++) {
		close(fd);
		fd = socket(AF_INET, SOCK_STREAM, 0);
		usleep(10000);
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	for (long s = 0; s < steps; s++) {
		int64_t t = bench_mono_ns();

		if (write(fd, &c, 1) != 1 || read(fd, &c, 1) != 1)
			_exit(1);
		if (i == 0) {
			int64_t b = bench_mono_ns();

			sh->rtt[s] = (double)(b - t);
			if (s == 0)
				sh->t0 = b;
			sh->t1 = b;
		}
	}
	_exit(0);
}

/* The coordinator in host A: every "done", then "go" to all. */
static void lh_tcp_coordinator(struct lh *h, int n, int port, long steps, int ready)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int l, fd[16], one = 1;
	char c;

	if (setns(h->nsfd[0], CLONE_NEWNET) < 0)
		_exit(1);
	inet_pton(AF_INET, LH_ADDR_A, &a.sin_addr);
	l = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 16) < 0)
		_exit(1);
	if (write(ready, "r", 1) != 1)
		_exit(1);
	for (int i = 0; i < n; i++) {
		fd[i] = accept(l, NULL, NULL);
		if (fd[i] < 0)
			_exit(1);
		setsockopt(fd[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
	for (long s = 0; s < steps; s++) {
		for (int i = 0; i < n; i++)
			if (read(fd[i], &c, 1) != 1)
				_exit(1);
		for (int i = 0; i < n; i++)
			if (write(fd[i], "g", 1) != 1)
				_exit(1);
	}
	_exit(0);
}

static int lh_tcp(struct lh *h, int n, long steps, struct shared *sh)
{
	int port = 40000 + (int)(getpid() % 20000), p[2];
	pid_t coord, kids[16];
	char c;
	int rc;

	if (pipe(p) < 0)
		return -1;
	coord = fork();
	if (coord == 0) {
		close(p[0]);
		lh_tcp_coordinator(h, 2 * n, port, steps, p[1]);
	}
	close(p[1]);
	if (read(p[0], &c, 1) != 1) {
		close(p[0]);
		waitpid(coord, NULL, 0);
		return -1;
	}
	close(p[0]);
	for (int i = 0; i < 2 * n; i++) {
		kids[i] = fork();
		if (kids[i] == 0)
			lh_tcp_participant(h, i < n ? 0 : 1, i, port, steps, sh);
	}
	rc = lh_wait_kids(kids, 2 * n);
	return lh_wait_kids(&coord, 1) || rc ? -1 : 0;
}

/* What a table compares: the baseline's name (and JSON key), the count's
 * column and JSON key, and how to run contender @v (0 the baseline, 1
 * shmclock) with @n participants: 0, or -1 when it failed. */
struct compare {
	const char *base, *base_key, *count_col, *count_key;
	int (*run)(const struct compare *c, int v, int n, long steps, struct shared *sh);
	const char *daemon;
	struct lh *hosts;
	double (*rates)[2]; /* each row's steps/s, baseline and shmclock (or NULL) */
};

/* The table, a row per count, the baseline first in each: 0, or 1 (said). */
static int compare_rows(const struct compare *c, const int *counts, size_t nc, long steps,
			struct shared *sh, cJSON *results)
{
	printf("  %-13s %-9s %12s %10s %10s %12s\n", c->count_col, "via", "steps/s", "p50 us",
	       "p99 us", "vs baseline");
	for (size_t k = 0; k < nc; k++) {
		int n = counts[k];
		double rate[2] = { 0, 0 };
		struct bench_stats st[2];
		cJSON *j = cJSON_CreateObject();

		cJSON_AddNumberToObject(j, c->count_key, n);
		cJSON_AddItemToArray(results, j);
		for (int v = 0; v < 2; v++) {
			cJSON *f;

			if (c->run(c, v, n, steps, sh)) {
				fprintf(stderr, "shmclock-bench: lockstep with %d %s (%s) failed\n", n,
					c->count_col, v ? "shmclock" : c->base);
				return 1;
			}
			rate[v] = (double)(steps - 1) / ((double)(sh->t1 - sh->t0) / 1e9);
			st[v] = bench_summarise(sh->rtt, steps);
			f = cJSON_AddObjectToObject(j, v ? "shmclock" : c->base_key);
			cJSON_AddNumberToObject(f, "steps_per_s", rate[v]);
			bench_json_stats(f, &st[v]);
			printf("  %-13d %-9s %12.0f %10.2f %10.2f", n, v ? "shmclock" : c->base, rate[v],
			       st[v].p50 / 1e3, st[v].p99 / 1e3);
			if (v)
				printf(" %11.2fx", rate[1] / rate[0]);
			printf("\n");
		}
		cJSON_AddNumberToObject(j, "speedup", rate[1] / rate[0]);
		if (c->rates)
			c->rates[k][0] = rate[0], c->rates[k][1] = rate[1];
	}
	return 0;
}

static int run_local(const struct compare *c, int v, int n, long steps, struct shared *sh)
{
	return v ? run_shmclock(c->daemon, n, steps, sh) : run_sockets(n, steps, sh);
}

static int run_hosts(const struct compare *c, int v, int n, long steps, struct shared *sh)
{
	return v ? lh_shmclock(c->hosts, n, steps, sh) : lh_tcp(c->hosts, n, steps, sh);
}

/*
 * What bounds a step between hosts from below, measured here: one bare DDS
 * round trip (@floor round trips/s, p50 @rtt ns: lh_dds_floor), and, in
 * sequence with it, one host's own lockstep step with n participants (one
 * shmclockd here, no network): on the follower host, its participants'
 * last grant wakes its daemon, which then promises; the leader's time back
 * wakes them. A step between hosts can be no faster than 1 / (1 / floor +
 * 1 / local). @rates: the table's steps/s, TCP and shmclock, for @counts
 * 1, 2, 4. 0, or 1 (said).
 */
static int lh_bound(struct lh *h, long steps, struct shared *sh, const int *counts,
		    double (*rates)[2], double floor, double rtt, cJSON *f)
{
	printf("floor: a bare DDS round trip across the same veth pair (Cyclone's ddsperf, best "
	       "effort, no shmclock):\n  %.0f round trips/s, p50 %.2f us\n", floor, rtt / 1e3);
	cJSON_AddNumberToObject(f, "dds_round_trips_per_s", floor);
	cJSON_AddNumberToObject(f, "dds_p50_us", rtt / 1e3);
	printf("  %-13s %14s %14s %14s %14s\n", "per host", "one host", "bound", "goal", "shmclock");
	for (int k = 0; k < 3; k += 2) {
		int n = counts[k];
		double local, bound, goal = (k ? 2 : 1) * rates[k][0];
		char key[32];
		cJSON *j;

		if (run_shmclock(h->daemon, n, steps, sh)) {
			fprintf(stderr, "shmclock-bench: lockstep with %d participants on one host "
					"failed\n", n);
			return 1;
		}
		local = (double)(steps - 1) / ((double)(sh->t1 - sh->t0) / 1e9);
		bound = 1 / (1 / floor + 1 / local);
		printf("  %-13d %14.0f %14.0f %14.0f %14.0f\n", n, local, bound, goal, rates[k][1]);
		snprintf(key, sizeof(key), "per_host_%d", n);
		j = cJSON_AddObjectToObject(f, key);
		cJSON_AddNumberToObject(j, "one_host_steps_per_s", local);
		cJSON_AddNumberToObject(j, "bound_steps_per_s", bound);
		cJSON_AddNumberToObject(j, "goal_steps_per_s", goal);
		cJSON_AddNumberToObject(j, "shmclock_steps_per_s", rates[k][1]);
	}
	printf("  (steps/s. one host: lockstep with n participants and one shmclockd, no network;\n"
	       "  bound: one DDS round trip and one host's step in sequence; goal: issue 53's, 1x "
	       "TCP at 1 per host, 2x at 4)\n");
	return 0;
}

static int bench_lockstep_hosts(const struct bench_opts *o, cJSON *out, const char *daemon,
				const char *rt, struct shared *sh, long steps)
{
	static const int counts[] = { 1, 2, 4 };
	struct lh h = { .daemon = daemon, .rt = rt, .nsfd = { -1, -1 } };
	double rates[3][2], floor, rtt;
	const struct compare c = { "TCP", "tcp", "per host", "participants_per_host", run_hosts,
				   daemon, &h, rates };
	int rc = 1;

	if (geteuid()) {
		printf("lockstep --hosts: needs root (network namespaces); skipped\n");
		return 0;
	}
	if (!lh_up(&h)) {
		printf("lockstep --hosts: 2 hosts (network namespaces, a veth pair), N no-op "
		       "participants on each, %ld steps%s;\nbaseline: a coordinator over TCP on host A "
		       "(done / go)\n", steps, o->quick ? " (quick)" : "");
		rc = compare_rows(&c, counts, sizeof(counts) / sizeof(counts[0]), steps, sh,
				  cJSON_AddArrayToObject(out, "hosts"));
	}
	/* The goal (issue 53): 1x TCP at 1 per host, 2x at 4 per host, against
	 * the fastest a step between hosts can be here. */
	if (!rc)
		rc = lh_dds_floor(&h, o->quick ? 2 : 5, &floor, &rtt)
			     ? 1
			     : lh_bound(&h, steps, sh, counts, rates, floor, rtt,
					cJSON_AddObjectToObject(out, "hosts_floor"));
	lh_down(&h);
	unsetenv("CYCLONEDDS_URI"); /* each daemon's own (lh_daemon) */
	return rc;
}

int bench_lockstep(const struct bench_opts *o, cJSON *out)
{
	static const int counts[] = { 1, 2, 4, 8 };
	long steps = o->samples > 0 ? o->samples : o->quick ? 20000 : 200000;
	char path[4096];
	const char *daemon = bench_find("SHMCLOCKD", "shmclockd", "shmclockd", SHMCLOCKD_INSTALLED, path,
					sizeof(path));
	struct shared *sh = bench_shared(sizeof(*sh) + (size_t)steps * sizeof(double));
	const struct compare c = { "sockets", "sockets", "participants", "participants", run_local,
				   daemon, NULL, NULL };
	char rt[64];
	int r;

	if (bench_runtime_dir(rt, sizeof(rt)))
		return 1;
	cJSON_AddNumberToObject(out, "steps", (double)steps);
	if (o->hosts) {
		/* Steps take a network round trip: fewer of them. */
		long hs = o->samples > 0 ? o->samples : o->quick ? 2000 : 20000;

		r = bench_lockstep_hosts(o, out, daemon, rt, sh, hs < steps ? hs : steps);
	} else {
		printf("lockstep: steps per second and one step's round trip, %ld steps of no-op\n"
		       "participant processes%s; baseline: a coordinator over Unix sockets (go / "
		       "done)\n", steps, o->quick ? " (quick)" : "");
		r = compare_rows(&c, counts, sizeof(counts) / sizeof(counts[0]), steps, sh,
				 cJSON_AddArrayToObject(out, "results"));
	}
	rmdir(rt);
	return r;
}
