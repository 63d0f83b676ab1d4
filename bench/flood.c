/* SPDX-License-Identifier: MIT */
/*
 * flood: does abuse of the control socket delay the clock thread? shmclockd
 * runs at PublishHz 10000 and reports how late each tick ran (status
 * "ticks.late_hist"); we diff that histogram across phases of equal length:
 *
 *   quiet     nothing else runs
 *   busy      a baseline: N processes spin on the CPU and touch no socket
 *             (what that load costs the clock thread through the scheduler
 *             alone, on this machine)
 *   churn     the other baseline: N processes run the connect flood's kernel
 *             work (connect, accept, a request, a reply, close) on sockets
 *             of their own, without shmclockd
 *   connect   N processes connect, ask for status, close, as fast as they can
 *   slow      N processes keep 64 connections (twice the client table)
 *             dribbling a byte at a time, and send over-long lines
 *
 * The control socket is served by the daemon's main thread; the clock
 * thread shares nothing with it but the CPU (and the kernel). Set against
 * `busy` and `churn`, the floods show what shmclockd's own handling adds.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "control_client.h"

#define FLOOD_PROCS 4
#define SLOW_CONNS 16 /* per process: 64 in all */

static char sock_path[108];

/* One status request; the reply line into buf. 0 or -1. */
static int status_line(char *buf, size_t len)
{
	return control_client_request(sock_path, "{\"cmd\":\"status\"}\n", buf, len, -1) ? -1 : 0;
}

static void spin_load(void)
{
	for (;;)
		bench_sink++;
}

/* The connect flood's system calls, against a listener of our own. */
static void churn_load(int id, volatile uint64_t *done)
{
	static char reply[1024];
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	char buf[256];
	int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	memset(reply, 'x', sizeof(reply) - 1);
	reply[sizeof(reply) - 2] = '\n';
	snprintf(a.sun_path, sizeof(a.sun_path), "%s/churn%d", getenv("SHMCLOCK_RUNTIME_DIR"), id);
	unlink(a.sun_path);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 16) < 0)
		_exit(1);
	for (;;) {
		int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), s;

		if (connect(c, (struct sockaddr *)&a, sizeof(a)) < 0 || (s = accept(l, NULL, NULL)) < 0)
			_exit(1);
		send(c, "{\"cmd\":\"status\"}\n", 17, MSG_NOSIGNAL);
		recv(s, buf, sizeof(buf), 0);
		send(s, reply, sizeof(reply) - 1, MSG_NOSIGNAL);
		recv(c, buf, sizeof(buf), 0);
		close(s);
		close(c);
		(*done)++;
	}
}

static void connect_load(volatile uint64_t *done)
{
	char buf[4096];

	for (;;)
		if (status_line(buf, sizeof(buf)) == 0)
			(*done)++;
}

static void slow_load(volatile uint64_t *done)
{
	static char junk[8192];
	int fds[SLOW_CONNS];

	memset(junk, 'x', sizeof(junk));
	for (int i = 0; i < SLOW_CONNS; i++)
		fds[i] = control_client_connect(sock_path);
	for (unsigned k = 0;; k++) {
		for (int i = 0; i < SLOW_CONNS; i++) {
			if (fds[i] < 0 && (fds[i] = control_client_connect(sock_path)) < 0)
				continue;
			/* Every 8th round one connection sends an over-long line;
			 * the rest dribble one byte of a request never finished. */
			if ((k + (unsigned)i) % 8 == 0 ?
				    send(fds[i], junk, sizeof(junk), MSG_NOSIGNAL | MSG_DONTWAIT) < 0 :
				    send(fds[i], "{", 1, MSG_NOSIGNAL) < 0) {
				close(fds[i]);
				fds[i] = -1; /* dropped by the daemon: come back */
			}
			(*done)++;
		}
		usleep(5000);
	}
}

enum phase { QUIET, BUSY, CHURN, CONNECT, SLOW, NPHASES };
static const char *const phase_name[] = { "quiet", "busy (baseline)", "churn (baseline)",
					  "connect flood", "slow clients" };

static int run_phase(enum phase ph, double secs, struct bench_ticks *out, uint64_t *ops)
{
	volatile uint64_t *done = bench_shared(sizeof(uint64_t) * FLOOD_PROCS);
	pid_t kids[FLOOD_PROCS] = { 0 };
	struct bench_ticks a, b;

	if (bench_ticks_get(sock_path, &a) < 0)
		return -1;
	for (int i = 0; ph != QUIET && i < FLOOD_PROCS; i++) {
		kids[i] = fork();
		if (kids[i] == 0) {
			if (ph == BUSY)
				spin_load();
			else if (ph == CHURN)
				churn_load(i, &done[i]);
			else if (ph == CONNECT)
				connect_load(&done[i]);
			else
				slow_load(&done[i]);
			_exit(0);
		}
	}
	bench_sleep_s(secs);
	for (int i = 0; i < FLOOD_PROCS; i++)
		if (kids[i] > 0) {
			kill(kids[i], SIGKILL);
			waitpid(kids[i], NULL, 0);
			if (ph == CHURN) {
				char p[160];

				snprintf(p, sizeof(p), "%s/churn%d", getenv("SHMCLOCK_RUNTIME_DIR"), i);
				unlink(p);
			}
		}
	if (bench_ticks_get(sock_path, &b) < 0)
		return -1;
	bench_ticks_diff(&a, &b, out);
	*ops = 0;
	for (int i = 0; i < FLOOD_PROCS; i++)
		*ops += done[i];
	return 0;
}

/* One daemon (SCHED_FIFO at @prio, or normal for 0) through every phase.
 * Returns 0, or 1 when it did not start or stopped answering. */
static int run_daemon(int prio, double secs, const char *daemon, cJSON *results)
{
	char name[48], prio_arg[16];
	char *argv[] = { (char *)daemon, "--notify-fd", "-n", name, "--hz", "10000",
			 "--sched-priority", prio_arg, "--remove-on-exit", "--log-level=error", NULL };
	struct bench_ticks t[NPHASES];
	double base_p99 = 0;
	int rc = 0;
	pid_t pid;

	snprintf(prio_arg, sizeof(prio_arg), "%d", prio);
	snprintf(name, sizeof(name), "bench-flood-%d-%d", (int)getpid(), prio);
	snprintf(sock_path, sizeof(sock_path), "%s/%s.sock", getenv("SHMCLOCK_RUNTIME_DIR"), name);
	pid = bench_spawn(argv, true);
	if (pid < 0) {
		fprintf(stderr, "shmclock-bench: %s did not start (set SHMCLOCKD)\n", daemon);
		return 1;
	}
	printf("  clock thread: %s\n", prio ? "SCHED_FIFO (--sched-priority 50)" : "normal scheduling");
	printf("  %-18s %8s %8s %9s %9s %9s %9s %7s %10s\n", "phase", "ticks", "skipped", "p50 us",
	       "p99 us", "p99.9 us", "max us", "p99 x", "requests");
	for (int ph = 0; ph < NPHASES; ph++) {
		uint64_t ops;
		double p50, p99, p999, mx;
		cJSON *j;

		if (run_phase((enum phase)ph, secs, &t[ph], &ops) < 0) {
			fprintf(stderr, "shmclock-bench: status request failed in phase %s\n",
				phase_name[ph]);
			rc = 1;
			break;
		}
		p50 = (double)latehist_quantile(t[ph].hist, 0.5) / 1e3;
		p99 = (double)latehist_quantile(t[ph].hist, 0.99) / 1e3;
		p999 = (double)latehist_quantile(t[ph].hist, 0.999) / 1e3;
		mx = (double)bench_hist_max(t[ph].hist) / 1e3;
		if (ph == BUSY)
			base_p99 = p99;
		printf("  %-18s %8.0f %8.0f %9.1f %9.1f %9.1f %9.1f ", phase_name[ph], t[ph].count,
		       t[ph].skipped, p50, p99, p999, mx);
		if (ph >= BUSY && base_p99 > 0)
			printf("%6.2fx", p99 / base_p99);
		else
			printf("%7s", "");
		if (ph >= CHURN)
			printf(" %10llu", (unsigned long long)ops);
		printf("\n");
		j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "name", phase_name[ph]);
		cJSON_AddNumberToObject(j, "sched_priority", prio);
		cJSON_AddNumberToObject(j, "ticks", t[ph].count);
		cJSON_AddNumberToObject(j, "skipped", t[ph].skipped);
		cJSON_AddNumberToObject(j, "late_p50_ns", p50 * 1e3);
		cJSON_AddNumberToObject(j, "late_p99_ns", p99 * 1e3);
		cJSON_AddNumberToObject(j, "late_p999_ns", p999 * 1e3);
		cJSON_AddNumberToObject(j, "late_max_ns", mx * 1e3);
		cJSON_AddNumberToObject(j, "client_ops", (double)ops);
		cJSON_AddNumberToObject(j, "answered", t[ph].answered);
		cJSON_AddNumberToObject(j, "errors", t[ph].errors);
		cJSON_AddNumberToObject(j, "dropped", t[ph].dropped);
		cJSON_AddNumberToObject(j, "evicted", t[ph].evicted);
		cJSON_AddItemToArray(results, j);
	}
	if (!rc)
		printf("  answered %.0f status requests in the connect flood; in the slow phase "
		       "dropped %.0f clients (%.0f evicted for new ones, %.0f over-long lines)\n",
		       t[CONNECT].answered, t[SLOW].dropped, t[SLOW].evicted, t[SLOW].errors);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	unlink(sock_path);
	return rc;
}

int bench_flood(const struct bench_opts *o, cJSON *out)
{
	double secs = o->duration_s > 0 ? o->duration_s : o->quick ? 1.0 : 5.0;
	char path[4096], rt[48];
	const char *daemon = bench_find("SHMCLOCKD", "shmclockd", "shmclockd", SHMCLOCKD_INSTALLED, path,
					sizeof(path));
	cJSON *results = cJSON_AddArrayToObject(out, "results");
	int rc;

	if (bench_runtime_dir(rt, sizeof(rt)))
		return 1;
	printf("flood: shmclockd's tick lateness at 10 kHz while %d processes abuse its control\n"
	       "socket, %.3g s per phase%s; p99 x: ratio to the busy baseline (ticks late by a\n"
	       "period or more count as skipped)\n",
	       FLOOD_PROCS, secs, o->quick ? " (quick)" : "");
	cJSON_AddNumberToObject(out, "seconds", secs);
	cJSON_AddNumberToObject(out, "hz", 10000);
	rc = run_daemon(0, secs, daemon, results);
	if (!rc) {
		/* SCHED_FIFO needs CAP_SYS_NICE: without it shmclockd warns and
		 * runs normally, and the second table would only repeat the first. */
		struct sched_param sp = { .sched_priority = 1 };

		if (sched_setscheduler(0, SCHED_FIFO, &sp) == 0) {
			sp.sched_priority = 0;
			sched_setscheduler(0, SCHED_OTHER, &sp);
			rc = run_daemon(50, secs, daemon, results);
		} else {
			printf("  (SCHED_FIFO not permitted here: %s; its table is skipped)\n",
			       strerror(errno));
		}
	}
	rmdir(rt);
	return rc;
}
