/* SPDX-License-Identifier: MIT */
/*
 * hosts --secure (issue 54): what DDS Security costs between hosts. A
 * leader shmclockd and three followers (TimeSource leader) on loopback,
 * started twice in the same run: without Ros2.Security, then with an
 * enclave each from a keystore shmclock-pki makes here (a leader's for the
 * leader, followers' for the followers; signed, not encrypted: its
 * default). Each time: the changes' control request to its reply (the
 * leader answers once the change is committed, after every follower held
 * it: the two-phase commit's round trips), p50 and p99; the messages a
 * second at rest (the leader's heartbeats and the followers' leases); the
 * leader's CPU at rest. The baseline is the unsecured run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dds/dds.h>
#include <dds/version.h>

#include "bench.h"
#include "control_client.h"
#include "ros2_qos.h"

#define SEC_FOLLOWERS 3

struct sec_run {
	double c2c_p50, c2c_p99, msgs_per_s, leader_cpu;
	long changes;
};

static int run_cmd(char *const argv[])
{
	pid_t p = fork();
	int st = 0;

	if (p == 0) {
		/* What it made is said by the table; a failure by our line. */
		if (!freopen("/dev/null", "w", stderr))
			_exit(127);
		execvp(argv[0], argv);
		_exit(127);
	}
	if (p < 0 || waitpid(p, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* One run: @enclaves NULL (plain) or the keystore's enclaves directory. */
static int one_run(const char *daemon, const char *rt, const char *enclaves, int domain, long changes,
		   double quiet, struct sec_run *out)
{
	char names[1 + SEC_FOLLOWERS][64], path[512], json[1024], sec[400] = "", req[128];
	pid_t pids[1 + SEC_FOLLOWERS] = { 0 };
	double *c2c = calloc((size_t)changes, sizeof(double));
	int rc = -1;
	long n = 0;

	for (int i = 0; i <= SEC_FOLLOWERS; i++) {
		snprintf(names[i], sizeof(names[i]), "bench-sec-%d-%s%d", (int)getpid(),
			 enclaves ? "s" : "p", i);
		if (enclaves) /* daemon i's enclave is "eI" (bench_hosts_secure) */
			snprintf(sec, sizeof(sec), ",\"Security\":\"%s/e%d\"", enclaves, i);
		if (i == 0)
			snprintf(json, sizeof(json),
				 "{\"Name\":\"%s\",\"TimeSource\":\"simulation\",\"Ros2\":{\"Domain\":%d%s},"
				 "\"Distribute\":{\"Publish\":true,\"Clock\":\"%s\",\"Lead\":\"5ms\"}}",
				 names[0], domain, sec, names[0]);
		else
			snprintf(json, sizeof(json),
				 "{\"Name\":\"%s\",\"TimeSource\":\"leader\",\"Ros2\":{\"Domain\":%d%s},"
				 "\"Distribute\":{\"Clock\":\"%s\"}}", names[i], domain, sec, names[0]);
		snprintf(path, sizeof(path), "%s/%s.json", rt, names[i]);
		FILE *f = fopen(path, "w");

		if (!f)
			goto out;
		fputs(json, f);
		fclose(f);
		char *argv[] = { (char *)daemon, "--notify-fd", "-c", path, "--log-level=warn", NULL };

		if ((pids[i] = bench_spawn(argv, true)) < 0) {
			fprintf(stderr, "shmclock-bench: %s did not start (%s)\n", names[i],
				enclaves ? "secured" : "plain");
			goto out;
		}
	}
	/* Every follower a fresh member. */
	for (int64_t deadline = bench_mono_ns() + 30000000000LL;;) {
		int fresh = 0;

		for (int i = 1; i <= SEC_FOLLOWERS; i++)
			fresh += bench_status_num(rt, names[i], "stale") == 0;
		if (fresh == SEC_FOLLOWERS)
			break;
		if (bench_mono_ns() > deadline) {
			fprintf(stderr, "shmclock-bench: the followers are not fresh after 30 s (%s)\n",
				enclaves ? "secured" : "plain");
			goto out;
		}
		bench_sleep_s(0.05);
	}
	bench_sleep_s(0.5);
	snprintf(path, sizeof(path), "%s/%s.sock", rt, names[0]);
	for (long c = 0; c < changes; c++) {
		static const char *const cmds[] = { "pause", "resume", "scale" };
		char reply[4096];
		int64_t t0;

		if (c % 3 == 2)
			snprintf(req, sizeof(req), "{\"v\":1,\"cmd\":\"scale\",\"value\":%g}\n",
				 (c / 3) % 2 ? 2.0 : 1.0);
		else
			snprintf(req, sizeof(req), "{\"v\":1,\"cmd\":\"%s\"}\n", cmds[c % 3]);
		t0 = bench_mono_ns();
		if (control_client_request(path, req, reply, sizeof(reply), 10000) ||
		    !strstr(reply, "\"ok\":true")) {
			fprintf(stderr, "shmclock-bench: the leader refused %s", req);
			goto out;
		}
		c2c[n++] = (double)(bench_mono_ns() - t0);
		bench_sleep_s(0.02);
	}
	{
		double s0 = bench_status_num(rt, names[0], "sent"), a0 = 0, s1, a1 = 0, cpu0, cpu1;

		for (int i = 1; i <= SEC_FOLLOWERS; i++)
			a0 += bench_status_num(rt, names[i], "acks_sent");
		bench_proc_cpu(pids[0], &cpu0);
		bench_sleep_s(quiet);
		bench_proc_cpu(pids[0], &cpu1);
		s1 = bench_status_num(rt, names[0], "sent");
		for (int i = 1; i <= SEC_FOLLOWERS; i++)
			a1 += bench_status_num(rt, names[i], "acks_sent");
		out->msgs_per_s = (s1 - s0 + a1 - a0) / quiet;
		out->leader_cpu = 100 * (cpu1 - cpu0) / quiet;
	}
	{
		struct bench_stats st = bench_summarise(c2c, n);

		out->c2c_p50 = st.p50;
		out->c2c_p99 = st.p99;
		out->changes = n;
	}
	rc = 0;
out:
	for (int i = 0; i <= SEC_FOLLOWERS; i++) {
		if (pids[i] > 0) {
			kill(pids[i], SIGTERM);
			waitpid(pids[i], NULL, 0);
		}
		shmclock_unlink(names[i]);
		snprintf(path, sizeof(path), "%s/%s.json", rt, names[i]);
		unlink(path);
	}
	free(c2c);
	return rc;
}

int bench_hosts_secure(const struct bench_opts *o, cJSON *out)
{
	long changes = o->samples ? o->samples : o->quick ? 30 : 300;
	double quiet = o->quick ? 2.0 : 5.0;
	char rt[128], daemon_path[256], pki_path[256], ks[256], enc[300];
	const char *daemon = bench_find("SHMCLOCKD", "shmclockd", "shmclockd", SHMCLOCKD_INSTALLED,
					daemon_path, sizeof(daemon_path));
	const char *pki = bench_find("SHMCLOCK_PKI", "shmclockd", "shmclock-pki", "shmclock-pki",
				     pki_path, sizeof(pki_path));
	int domain = 1 + (int)(getpid() % 200);
	struct sec_run plain = { 0 }, secured = { 0 };
	char dom[16];
	int rc = 1;

	if (!getenv("CYCLONEDDS_URI"))
		setenv("CYCLONEDDS_URI", ROS2_LOOPBACK_URI, 1);
	if (bench_runtime_dir(rt, sizeof(rt)))
		return 1;
	snprintf(ks, sizeof(ks), "%s/keystore", rt);
	snprintf(enc, sizeof(enc), "%s/enclaves", ks);
	snprintf(dom, sizeof(dom), "%d", domain);
	{
		/* The leader's enclave e0, the followers' e1.. */
		char *init[] = { (char *)pki, "init", ks, "--domain", dom, NULL };
		int bad = run_cmd(init);

		for (int i = 0; i <= SEC_FOLLOWERS && !bad; i++) {
			char e[16];
			char *one[] = { (char *)pki, i ? "follower" : "leader", ks, e, NULL };

			snprintf(e, sizeof(e), "e%d", i);
			bad = run_cmd(one);
		}
		if (bad) {
			fprintf(stderr, "shmclock-bench: %s could not make a keystore (openssl "
					"installed? set SHMCLOCK_PKI)\n", pki);
			goto out;
		}
	}
	if (one_run(daemon, rt, NULL, domain, changes, quiet, &plain) ||
	    one_run(daemon, rt, enc, domain, changes, quiet, &secured))
		goto out;
	printf("hosts --secure: a leader and %d followers on 127.0.0.1, Cyclone DDS %s, %ld changes "
	       "(pause, resume, scale), without and with DDS Security (signed)\n",
	       SEC_FOLLOWERS, DDS_VERSION, plain.changes);
	printf("  %-44s %12s %12s %8s\n", "", "plain", "secured", "ratio");
	printf("  %-44s %9.3f ms %9.3f ms %7.2fx\n", "control request to commit, p50",
	       plain.c2c_p50 / 1e6, secured.c2c_p50 / 1e6, secured.c2c_p50 / plain.c2c_p50);
	printf("  %-44s %9.3f ms %9.3f ms %7.2fx\n", "control request to commit, p99",
	       plain.c2c_p99 / 1e6, secured.c2c_p99 / 1e6, secured.c2c_p99 / plain.c2c_p99);
	printf("  %-44s %9.1f /s %9.1f /s %7.2fx\n", "messages at rest (heartbeats, leases)",
	       plain.msgs_per_s, secured.msgs_per_s, secured.msgs_per_s / plain.msgs_per_s);
	printf("  %-44s %10.2f %% %10.2f %% %7.2fx\n", "the leader's CPU at rest", plain.leader_cpu,
	       secured.leader_cpu, plain.leader_cpu > 0 ? secured.leader_cpu / plain.leader_cpu : 0);
	{
		const struct sec_run *runs[] = { &plain, &secured };
		static const char *const keys[] = { "plain", "secured" };

		for (int i = 0; i < 2; i++) {
			cJSON *j = cJSON_AddObjectToObject(out, keys[i]);

			cJSON_AddNumberToObject(j, "changes", (double)runs[i]->changes);
			cJSON_AddNumberToObject(j, "control_to_commit_p50_ns", runs[i]->c2c_p50);
			cJSON_AddNumberToObject(j, "control_to_commit_p99_ns", runs[i]->c2c_p99);
			cJSON_AddNumberToObject(j, "messages_at_rest_per_s", runs[i]->msgs_per_s);
			cJSON_AddNumberToObject(j, "leader_cpu_percent", runs[i]->leader_cpu);
		}
	}
	rc = 0;
out:
	{
		char *rm[] = { "rm", "-rf", ks, NULL };

		run_cmd(rm);
	}
	rmdir(rt);
	return rc;
}
