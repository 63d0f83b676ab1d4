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
 * Also: TimeFunction messages per second at steady state (no changes).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
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

#define NCLOCKS 4 /* leader, function follower, /clock 100 Hz, /clock 1 kHz */

static const char *labels[NCLOCKS] = {
	"leader",
	"time function (TimeSource leader)",
	"/clock at 100 Hz (TimeSource ros2)",
	"/clock at 1 kHz (TimeSource ros2)",
};

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

static int ctl(const char *rt, const char *name, const char *req, char *buf, size_t len)
{
	char sock[256];

	snprintf(sock, sizeof(sock), "%s/%s.sock", rt, name);
	return control_client_request(sock, req, buf, len, 10000);
}

/* A clock's value at CLOCK_MONOTONIC @t, from a snapshot. */
static double value_at(const shmclock_info_t *in, int64_t t)
{
	if (in->paused || in->stepped)
		return (double)in->sim_ns;
	return (double)in->sim_ns + (double)(t - in->mono_ns) * in->scale;
}

/* The leader's "sent" count, from its status. */
static long sent_count(const char *rt, const char *name)
{
	char buf[8192], *p;

	if (ctl(rt, name, "{\"v\":1,\"cmd\":\"status\"}\n", buf, sizeof(buf)))
		return -1;
	p = strstr(buf, "\"sent\":");
	return p ? strtol(p + 7, NULL, 10) : -1;
}

int bench_hosts(const struct bench_opts *o, cJSON *out)
{
	long changes = o->samples ? o->samples : o->quick ? 60 : 400;
	double quiet = o->quick ? 2.0 : 5.0;
	char rt[128], path[256], daemon_path[256], names[NCLOCKS][64], json[512];
	const char *daemon = bench_find("SHMCLOCKD", "shmclockd", "shmclockd", SHMCLOCKD_INSTALLED,
					daemon_path, sizeof(daemon_path));
	int base = 1 + (int)(getpid() % 200);
	pid_t pids[NCLOCKS] = { 0 };
	struct pub pubs[2] = { { .domain = base + 1, .hz = 100 }, { .domain = base + 2, .hz = 1000 } };
	shmclock_t *clk[NCLOCKS] = { 0 };
	double *err[NCLOCKS] = { 0 };
	long n = 0, cap = changes * 40 + 16;
	cJSON *jr = cJSON_AddArrayToObject(out, "followers");
	int rc = 1;

	if (!getenv("CYCLONEDDS_URI"))
		setenv("CYCLONEDDS_URI", ROS2_LOOPBACK_URI, 1);
	if (bench_runtime_dir(rt, sizeof(rt)))
		return 1;
	for (int i = 0; i < NCLOCKS; i++) {
		static const char *tags[NCLOCKS] = { "lead", "fn", "c100", "c1k" };

		snprintf(names[i], sizeof(names[i]), "bench-hosts-%d-%s", (int)getpid(), tags[i]);
		err[i] = calloc((size_t)cap, sizeof(double));
	}
	snprintf(json, sizeof(json),
		 "{\"Name\":\"%s\",\"TimeSource\":\"simulation\",\"Ros2\":{\"Domain\":%d},"
		 "\"Distribute\":{\"Publish\":true,\"Clock\":\"%s\",\"Lead\":\"5ms\"}}",
		 names[0], base, names[0]);
	write_config(rt, "lead", json, path, sizeof(path));
	{
		char *argv[] = { (char *)daemon, "--notify-fd", "-c", path, "--log-level=warn", NULL };

		pids[0] = bench_spawn(argv, true);
	}
	snprintf(json, sizeof(json),
		 "{\"Name\":\"%s\",\"TimeSource\":\"leader\",\"Ros2\":{\"Domain\":%d},"
		 "\"Distribute\":{\"Clock\":\"%s\"}}", names[1], base, names[0]);
	write_config(rt, "fn", json, path, sizeof(path));
	{
		char *argv[] = { (char *)daemon, "--notify-fd", "-c", path, "--log-level=warn", NULL };

		pids[1] = bench_spawn(argv, true);
	}
	for (int i = 0; i < 2; i++) {
		snprintf(json, sizeof(json),
			 "{\"Name\":\"%s\",\"TimeSource\":\"ros2\",\"Ros2\":{\"Domain\":%d,"
			 "\"StaleAfter\":\"10s\"}}", names[2 + i], pubs[i].domain);
		write_config(rt, i ? "c1k" : "c100", json, path, sizeof(path));
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

	/* The scenario: a change, then the clocks sampled every ~2.5 ms over
	 * 100 ms, at one instant each time. */
	srand((unsigned)getpid());
	bool paused = false;

	for (long c = 0; c < changes; c++) {
		static const double scales[] = { 0.25, 0.5, 1, 2, 4 };
		char req[128], buf[4096];
		int k = rand() % 10;
		bool toggle = paused || k < 1;

		/* Mostly running: a pause lasts until the next change. */
		if (toggle)
			snprintf(req, sizeof(req), "{\"v\":1,\"cmd\":\"%s\"}\n", paused ? "resume" : "pause");
		else if (k < 8)
			snprintf(req, sizeof(req), "{\"v\":1,\"cmd\":\"scale\",\"value\":%g}\n",
				 scales[rand() % 5]);
		else
			snprintf(req, sizeof(req), "{\"v\":1,\"cmd\":\"set\",\"time\":\"%ds\"}\n",
				 100 + rand() % 10000);
		if (ctl(rt, names[0], req, buf, sizeof(buf)) || !strstr(buf, "\"ok\":true")) {
			fprintf(stderr, "shmclock-bench: the leader refused %s: %s", req, buf);
			goto out;
		}
		if (toggle)
			paused = !paused;
		for (int s = 0; s < 40 && n < cap; s++, n++) {
			shmclock_info_t in[NCLOCKS];
			int64_t t = 0;

			bench_sleep_s(0.0025);
			for (int i = 0; i < NCLOCKS; i++) {
				shmclock_info(clk[i], &in[i]);
				if (in[i].mono_ns > t)
					t = in[i].mono_ns;
			}
			for (int i = 1; i < NCLOCKS; i++)
				err[i][n] = fabs(value_at(&in[i], t) - value_at(&in[0], t));
		}
	}
	/* Steady state: the TimeFunction messages of a clock nobody changes. */
	long s0 = sent_count(rt, names[0]);
	bench_sleep_s(quiet);
	long s1 = sent_count(rt, names[0]);
	double rate = s0 >= 0 && s1 >= 0 ? (double)(s1 - s0) / quiet : -1;

	printf("hosts: follower minus leader at the same instant, %ld changes on the leader (pause, "
	       "resume, scale, set), %ld samples each; one host, Cyclone DDS %s on 127.0.0.1\n",
	       changes, n, DDS_VERSION);
	printf("  %-40s %11s %11s %11s %12s\n", "follower", "p50", "p99", "max", "p99 ratio");
	struct bench_stats st[NCLOCKS];

	for (int i = 3; i >= 1; i--)
		st[i] = bench_summarise(err[i], n);
	for (int i = 1; i < NCLOCKS; i++) {
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
	printf("  %-58s %8.1f /s  target <= 10 /s   %s\n", "TimeFunction messages at steady state",
	       rate, rate >= 0 && rate <= 10 ? "met" : "NOT MET");
	cJSON_AddNumberToObject(out, "changes", (double)changes);
	cJSON_AddNumberToObject(out, "samples", (double)n);
	cJSON_AddNumberToObject(out, "steady_messages_per_s", rate);
	rc = 0;
out:
	for (int i = 0; i < 2; i++)
		if (pubs[i].leader) {
			atomic_store(&pubs[i].stop, true);
			pthread_join(pubs[i].thread, NULL);
		}
	for (int i = 0; i < NCLOCKS; i++) {
		shmclock_close(clk[i]);
		if (pids[i] > 0) {
			kill(pids[i], SIGTERM);
			waitpid(pids[i], NULL, 0);
		}
		shmclock_unlink(names[i]);
		free(err[i]);
		snprintf(path, sizeof(path), "%s/%s.json", rt, i == 0 ? "lead" : i == 1 ? "fn" :
							    i == 2 ? "c100" : "c1k");
		unlink(path);
	}
	rmdir(rt);
	return rc;
}
