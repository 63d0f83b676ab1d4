/* SPDX-License-Identifier: MIT */
/*
 * hosts: how far a follower's clock is from its leader's, sending the time
 * function (a leader shmclockd, Distribute.Publish; a follower, TimeSource
 * leader) against sending samples of it (/clock at 100 Hz and 1 kHz, read
 * by shmclockd's ros2 source), in one run on the same scenario: random
 * changes on the leader (pause, resume, scale, set) while the clocks run.
 *
 * Every clock lives on this host, so the leader's and the followers'
 * segments are read at the same instant of one kernel clock: the error is
 * the protocol's alone (on real hosts add their clock synchronisation
 * error). Cyclone DDS on 127.0.0.1; the /clock publishers are this
 * program's threads, reading the leader's clock as a simulator would.
 * Also: TimeFunction messages per second at steady state (no changes)
 * with three time-function followers; the time from a control command to
 * its commit on every host (the leader's and each follower's segment); and
 * the random changes again with a CPU hog on every core (follower error,
 * late changes).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <dds/dds.h>
#include <dds/version.h>

#include "Clock.h"
#include "bench.h"
#include "control_client.h"
#include "ros2_qos.h"

/* leader, function follower, /clock 100 Hz, /clock 1 kHz, two more
 * function followers (messages at rest, control to commit) */
#define NCLOCKS 6
#define NCOMPARED 4 /* the first four: the error table */

static const char *labels[NCLOCKS] = {
	"leader",
	"time function (TimeSource leader)",
	"/clock at 100 Hz (TimeSource ros2)",
	"/clock at 1 kHz (TimeSource ros2)",
	"time function, 2nd follower",
	"time function, 3rd follower",
};

/* Their config files' and clock names' tags. */
static const char *tags[NCLOCKS] = { "lead", "fn", "c100", "c1k", "fn2", "fn3" };

/* The hosts whose commits a control command is timed to (index in the
 * clocks): the leader and the three function followers. */
static const int timed[] = { 0, 1, 4, 5 };
#define NTIMED 4

/* CPU hogs: one busy child per core, at the default priority. */
static void hogs(pid_t *pids, int n, bool start)
{
	for (int i = 0; i < n; i++) {
		if (start) {
			pids[i] = fork();
			if (pids[i] == 0) {
				/* Never outlives the benchmark. */
				prctl(PR_SET_PDEATHSIG, SIGKILL);
				for (volatile unsigned long x = 0;; x++)
					;
			}
		} else if (pids[i] > 0) {
			kill(pids[i], SIGKILL);
			waitpid(pids[i], NULL, 0);
		}
	}
}

struct pub {
	int domain, hz;
	const char *leader;
	_Atomic bool stop;
	pthread_t thread;
};

/* A simulator's /clock publisher: the leader's time at @hz, on absolute
 * deadlines. */
static void *pub_main(void *arg)
{
	struct pub *p = arg;
	dds_entity_t pp = dds_create_participant((dds_domainid_t)p->domain, NULL, NULL);
	dds_entity_t tp = dds_create_topic(pp, &rosgraph_msgs_msg_dds__Clock__desc, "rt/clock", NULL,
					   NULL);
	dds_qos_t *q = ros2_clock_qos(DDS_RELIABILITY_RELIABLE);
	dds_entity_t wr = dds_create_writer(pp, tp, q, NULL);
	shmclock_t *clk = NULL;
	int64_t next = bench_mono_ns(), period = 1000000000 / p->hz;

	dds_delete_qos(q);
	while (shmclock_open(p->leader, &clk) && !atomic_load(&p->stop))
		bench_sleep_s(0.01);
	while (!atomic_load(&p->stop)) {
		rosgraph_msgs_msg_dds__Clock_ m;
		int64_t t;
		struct timespec ts;

		if (clk && shmclock_now(clk, &t) == 0) {
			m.clock.sec = (int32_t)(t / 1000000000);
			m.clock.nanosec = (uint32_t)(t % 1000000000);
			dds_write(wr, &m);
		}
		next += period;
		ts.tv_sec = next / 1000000000;
		ts.tv_nsec = next % 1000000000;
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
	}
	shmclock_close(clk);
	dds_delete(pp);
	return NULL;
}

static int write_config(const char *rt, const char *tag, const char *json, char *path,
			size_t len)
{
	FILE *f;

	snprintf(path, len, "%s/%s.json", rt, tag);
	f = fopen(path, "w");
	if (!f)
		return -1;
	fputs(json, f);
	fclose(f);
	return 0;
}

/* A clock's value at CLOCK_MONOTONIC @t, from a snapshot. */
static double value_at(const shmclock_info_t *in, int64_t t)
{
	if (in->paused || in->stepped)
		return (double)in->sim_ns;
	return (double)in->sim_ns + (double)(t - in->mono_ns) * in->scale;
}

/*
 * The scenario: a random change on the leader (pause, resume, scale, set),
 * timed to its commit on every host, then the clocks sampled every ~2.5 ms
 * over 100 ms, at one instant each time: |follower - leader| into err[i]
 * for the compared followers (err[0]: unused). Returns 0, or -1 when the
 * leader refused a change.
 */
struct scenario {
	const char *rt, *leader;
	shmclock_t **clk;
	double **err;  /* per clock, cap samples */
	long cap, n;
	double *c2c[NTIMED]; /* control to commit, ns, per timed host */
	long nc;
	bool paused;
};

static int one_change(struct scenario *sc)
{
	static const double scales[] = { 0.25, 0.5, 1, 2, 4 };
	char req[128], sock[256];
	int k = rand() % 10;
	bool toggle = sc->paused || k < 1, seen[NTIMED] = { false };
	uint64_t before[NTIMED];
	char reply[4096];
	struct bench_req a = { .buf = reply, .len = sizeof(reply) };
	int64_t t0;
	int left = NTIMED;

	/* Mostly running: a pause lasts until the next change. */
	if (toggle)
		snprintf(req, sizeof(req), "{\"v\":1,\"cmd\":\"%s\"}\n", sc->paused ? "resume" : "pause");
	else if (k < 8)
		snprintf(req, sizeof(req), "{\"v\":1,\"cmd\":\"scale\",\"value\":%g}\n",
			 scales[rand() % 5]);
	else
		snprintf(req, sizeof(req), "{\"v\":1,\"cmd\":\"set\",\"time\":\"%ds\"}\n",
			 100 + rand() % 10000);
	for (int h = 0; h < NTIMED; h++) {
		shmclock_info_t in;

		shmclock_info(sc->clk[timed[h]], &in);
		before[h] = in.commits;
	}
	snprintf(sock, sizeof(sock), "%s/%s.sock", sc->rt, sc->leader);
	a.sock = sock;
	a.req = req;
	t0 = bench_mono_ns();
	if (bench_req_start(&a)) {
		fprintf(stderr, "shmclock-bench: no thread for a control request\n");
		return -1;
	}
	/* Each host's first commit after the request (at most 2 s). */
	while (left && bench_mono_ns() - t0 < 2000000000) {
		for (int h = 0; h < NTIMED; h++) {
			shmclock_info_t in;

			if (seen[h])
				continue;
			shmclock_info(sc->clk[timed[h]], &in);
			if (in.commits != before[h]) {
				seen[h] = true;
				left--;
				sc->c2c[h][sc->nc] = (double)(bench_mono_ns() - t0);
			}
		}
		bench_sleep_s(0.00002);
	}
	if (bench_req_join(&a)) {
		fprintf(stderr, "shmclock-bench: the leader refused %s: %s", req, a.buf);
		return -1;
	}
	for (int h = 0; h < NTIMED; h++)
		if (!seen[h])
			sc->c2c[h][sc->nc] = 2e9;
	sc->nc++;
	if (toggle)
		sc->paused = !sc->paused;
	for (int s = 0; s < 40 && sc->n < sc->cap; s++, sc->n++) {
		shmclock_info_t in[NCLOCKS];
		int64_t t = 0;

		bench_sleep_s(0.0025);
		for (int i = 0; i < NCOMPARED; i++) {
			shmclock_info(sc->clk[i], &in[i]);
			if (in[i].mono_ns > t)
				t = in[i].mono_ns;
		}
		for (int i = 1; i < NCOMPARED; i++)
			sc->err[i][sc->n] = fabs(value_at(&in[i], t) - value_at(&in[0], t));
	}
	return 0;
}

static int hosts_one(const struct bench_opts *o, cJSON *out)
{
	long changes = o->samples ? o->samples : o->quick ? 60 : 400;
	double quiet = o->quick ? 2.0 : 5.0;
	char rt[128], path[256], daemon_path[256], names[NCLOCKS][64], json[512];
	const char *daemon = bench_find("SHMCLOCKD", "shmclockd", "shmclockd", SHMCLOCKD_INSTALLED,
					daemon_path, sizeof(daemon_path));
	int base = 1 + (int)(getpid() % 200);
	pid_t pids[NCLOCKS] = { 0 }, hog[64] = { 0 };
	int nhog = bench_ncpu() < 64 ? bench_ncpu() : 64;
	struct pub pubs[2] = { { .domain = base + 1, .hz = 100 }, { .domain = base + 2, .hz = 1000 } };
	shmclock_t *clk[NCLOCKS] = { 0 };
	double *err[NCLOCKS] = { 0 };
	long cap = changes * 40 + 16;
	struct scenario sc = { .rt = rt, .clk = clk, .err = err, .cap = cap };
	cJSON *jr = cJSON_AddArrayToObject(out, "followers");
	int rc = 1;

	if (!getenv("CYCLONEDDS_URI"))
		setenv("CYCLONEDDS_URI", ROS2_LOOPBACK_URI, 1);
	if (bench_runtime_dir(rt, sizeof(rt)))
		return 1;
	for (int i = 0; i < NCLOCKS; i++) {
		snprintf(names[i], sizeof(names[i]), "bench-hosts-%d-%s", (int)getpid(), tags[i]);
		err[i] = calloc((size_t)cap, sizeof(double));
	}
	for (int h = 0; h < NTIMED; h++)
		sc.c2c[h] = calloc((size_t)changes + 16, sizeof(double));
	sc.leader = names[0];
	snprintf(json, sizeof(json),
		 "{\"Name\":\"%s\",\"TimeSource\":\"simulation\",\"Ros2\":{\"Domain\":%d},"
		 "\"Distribute\":{\"Publish\":true,\"Clock\":\"%s\",\"Lead\":\"5ms\"}}",
		 names[0], base, names[0]);
	write_config(rt, tags[0], json, path, sizeof(path));
	{
		char *argv[] = { (char *)daemon, "--notify-fd", "-c", path, "--log-level=warn", NULL };

		pids[0] = bench_spawn(argv, true);
	}
	for (int i = 1; i < NCLOCKS; i += i == 1 ? 3 : 1) {
		snprintf(json, sizeof(json),
			 "{\"Name\":\"%s\",\"TimeSource\":\"leader\",\"Ros2\":{\"Domain\":%d},"
			 "\"Distribute\":{\"Clock\":\"%s\"}}", names[i], base, names[0]);
		write_config(rt, tags[i], json, path, sizeof(path));
		char *argv[] = { (char *)daemon, "--notify-fd", "-c", path, "--log-level=warn", NULL };

		pids[i] = bench_spawn(argv, true);
	}
	for (int i = 0; i < 2; i++) {
		snprintf(json, sizeof(json),
			 "{\"Name\":\"%s\",\"TimeSource\":\"ros2\",\"Ros2\":{\"Domain\":%d,"
			 "\"StaleAfter\":\"10s\"}}", names[2 + i], pubs[i].domain);
		write_config(rt, tags[2 + i], json, path, sizeof(path));
		char *argv[] = { (char *)daemon, "--notify-fd", "-c", path, "--log-level=warn", NULL };

		pids[2 + i] = bench_spawn(argv, true);
	}
	for (int i = 0; i < NCLOCKS; i++)
		if (pids[i] < 0) {
			fprintf(stderr, "shmclock-bench: %s did not start (set SHMCLOCKD; built with "
					"Cyclone DDS?)\n", daemon);
			goto out;
		}
	for (int i = 0; i < 2; i++) {
		pubs[i].leader = names[0];
		pthread_create(&pubs[i].thread, NULL, pub_main, &pubs[i]);
	}
	/* Every follower has a time. */
	for (int i = 0; i < NCLOCKS; i++) {
		int64_t deadline = bench_mono_ns() + 20000000000LL, t;

		while (shmclock_open(names[i], &clk[i]) || shmclock_now(clk[i], &t) == -ENODATA) {
			if (bench_mono_ns() > deadline) {
				fprintf(stderr, "shmclock-bench: %s never got a time\n", names[i]);
				goto out;
			}
			bench_sleep_s(0.02);
		}
	}
	bench_sleep_s(0.5);

	srand((unsigned)getpid());
	for (long c = 0; c < changes; c++)
		if (one_change(&sc))
			goto out;
	long n = sc.n;

	/* The same with a CPU hog on every core: the time function's error
	 * and the changes that reached the follower after their instant. */
	struct scenario hs = sc;
	double late0 = bench_status_num(rt, names[1], "late_changes"), late1;
	struct bench_stats hst;

	hs.n = 0;
	hs.nc = 0;
	hs.err = calloc(NCLOCKS, sizeof(double *));
	for (int i = 0; i < NCLOCKS; i++)
		hs.err[i] = calloc((size_t)cap, sizeof(double));
	for (int h = 0; h < NTIMED; h++)
		hs.c2c[h] = calloc((size_t)changes + 16, sizeof(double));
	hogs(hog, nhog, true);
	for (long c = 0; c < changes / 2 && !one_change(&hs); c++)
		;
	hogs(hog, nhog, false);
	late1 = bench_status_num(rt, names[1], "late_changes");
	hst = bench_summarise(hs.err[1], hs.n);

	/* Steady state: the messages of a clock nobody changes: the leader's
	 * heartbeats and the three function followers' leases (two-phase). */
	double s0 = bench_status_num(rt, names[0], "sent"), a0 = 0, a1 = 0;

	for (int h = 1; h < NTIMED; h++)
		a0 += bench_status_num(rt, names[timed[h]], "acks_sent");
	bench_sleep_s(quiet);
	double s1 = bench_status_num(rt, names[0], "sent");

	for (int h = 1; h < NTIMED; h++)
		a1 += bench_status_num(rt, names[timed[h]], "acks_sent");
	double rate = s0 >= 0 && s1 >= 0 ? (s1 - s0 + a1 - a0) / quiet : -1;
	double ack_rate = (a1 - a0) / quiet;

	printf("hosts: follower minus leader at the same instant, %ld changes on the leader (pause, "
	       "resume, scale, set), %ld samples each; one host, Cyclone DDS %s on 127.0.0.1\n",
	       changes, n, DDS_VERSION);
	printf("  %-40s %11s %11s %11s %12s\n", "follower", "p50", "p99", "max", "p99 ratio");
	struct bench_stats st[NCLOCKS];

	for (int i = 3; i >= 1; i--)
		st[i] = bench_summarise(err[i], n);
	for (int i = 1; i < NCOMPARED; i++) {
		cJSON *j = cJSON_CreateObject();

		printf("  %-40s %8.3f us %8.3f us %8.3f us %11.0fx\n", labels[i], st[i].p50 / 1e3,
		       st[i].p99 / 1e3, st[i].max / 1e3,
		       st[1].p99 > 0 ? st[i].p99 / st[1].p99 : INFINITY);
		cJSON_AddStringToObject(j, "name", labels[i]);
		bench_json_stats(j, &st[i]);
		cJSON_AddItemToArray(jr, j);
	}
	printf("  (ratio: that follower's p99 over the time function's; /clock error is "
	       "simulated time, so it grows with the scale)\n");
	printf("  %-58s %8.3f us target <= 1 us     %s\n", "time function p99", st[1].p99 / 1e3,
	       st[1].p99 <= 1000 ? "met" : "NOT MET");
	printf("  %-58s %8.3f us target <= 10 us    %s\n", "time function max", st[1].max / 1e3,
	       st[1].max <= 10000 ? "met" : "NOT MET");
	printf("  %-58s %8.0fx   target >= 1000x   %s\n", "better than /clock at 100 Hz (p99)",
	       st[1].p99 > 0 ? st[2].p99 / st[1].p99 : INFINITY,
	       st[1].p99 <= 0 || st[2].p99 / st[1].p99 >= 1000 ? "met" : "NOT MET");
	printf("  %-58s %8.1f /s  target <= 10 /s   %s\n",
	       "messages at steady state, 3 followers (their leases included)", rate,
	       rate >= 0 && rate <= 10 ? "met" : "NOT MET");
	printf("    (of which the followers' acknowledgements: %.1f /s; lead now %.3f ms, ack p99 "
	       "%.3f ms on the leader)\n",
	       ack_rate, bench_status_num(rt, names[0], "lead_current_ns") / 1e6,
	       bench_status_num(rt, names[0], "ack_p99_ns") / 1e6);
	printf("  with a CPU hog on each of the %d cores, %ld changes: time function p50 %.3f us, "
	       "p99 %.3f us, max %.3f us; %.0f late changes\n",
	       nhog, hs.nc, hst.p50 / 1e3, hst.p99 / 1e3, hst.max / 1e3, late1 - late0);
	printf("  control command to its commit (ms)    %10s %10s %10s %10s\n", "idle p50", "idle p99",
	       "hog p50", "hog p99");
	cJSON *jc = cJSON_AddArrayToObject(out, "control_to_commit");

	for (int h = 0; h < NTIMED; h++) {
		struct bench_stats a = bench_summarise(sc.c2c[h], sc.nc),
				   b = bench_summarise(hs.c2c[h], hs.nc);
		cJSON *j = cJSON_CreateObject();

		printf("    %-36s %10.3f %10.3f %10.3f %10.3f\n", labels[timed[h]], a.p50 / 1e6,
		       a.p99 / 1e6, b.p50 / 1e6, b.p99 / 1e6);
		cJSON_AddStringToObject(j, "host", labels[timed[h]]);
		bench_json_stats(j, &a);
		cJSON_AddItemToArray(jc, j);
	}
	{
		cJSON *j = cJSON_AddObjectToObject(out, "cpu_hog");

		cJSON_AddNumberToObject(j, "cores", nhog);
		cJSON_AddNumberToObject(j, "changes", (double)hs.nc);
		cJSON_AddNumberToObject(j, "late_changes", late1 - late0);
		bench_json_stats(j, &hst);
	}
	for (int i = 0; i < NCLOCKS; i++)
		free(hs.err[i]);
	free(hs.err);
	for (int h = 0; h < NTIMED; h++)
		free(hs.c2c[h]);
	cJSON_AddNumberToObject(out, "changes", (double)changes);
	cJSON_AddNumberToObject(out, "samples", (double)n);
	cJSON_AddNumberToObject(out, "steady_messages_per_s", rate);
	cJSON_AddNumberToObject(out, "steady_acks_per_s", ack_rate);
	rc = 0;
out:
	for (int i = 0; i < 2; i++)
		if (pubs[i].leader) {
			atomic_store(&pubs[i].stop, true);
			pthread_join(pubs[i].thread, NULL);
		}
	for (int h = 0; h < NTIMED; h++)
		free(sc.c2c[h]);
	for (int i = 0; i < NCLOCKS; i++) {
		shmclock_close(clk[i]);
		if (pids[i] > 0) {
			kill(pids[i], SIGTERM);
			waitpid(pids[i], NULL, 0);
		}
		shmclock_unlink(names[i]);
		free(err[i]);
		snprintf(path, sizeof(path), "%s/%s.json", rt, tags[i]);
		unlink(path);
	}
	rmdir(rt);
	return rc;
}

int bench_hosts(const struct bench_opts *o, cJSON *out)
{
	/* --followers: a fleet of each size (fleet.c) instead; --secure: the
	 * cost of DDS Security (hosts_secure.c). */
	if (o->secure)
		return bench_hosts_secure(o, out);
	return o->followers ? bench_fleet(o, out) : hosts_one(o, out);
}
