/* SPDX-License-Identifier: MIT */
/*
 * panel: what shmclock-panel costs the clock it watches, and itself.
 * shmclockd runs at PublishHz 10000 (as in flood: a clock thread whose
 * lateness shows any load) and reports how late each tick ran; we diff its
 * histogram and its CPU time across phases of equal length:
 *
 *   no panel     the daemon alone: the baseline
 *   panel idle   shmclock-panel -n NAME, no page open
 *   N streams    N clients read /events as a browser's EventSource does
 *                (10 by default: "10 browsers")
 *
 * The panel reads the segment every frame (50 ms) and asks the daemon for
 * status once a second whatever the number of pages, so the daemon's cost
 * should not grow with browsers; the panel's own CPU and memory do, and are
 * printed beside it. Figures only: nothing here passes or fails on speed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define STREAMS 10

/* What each stream client saw (in shared memory: the clients are one
 * forked process). */
struct stream_seen {
	uint64_t bytes, events;
	int status; /* the HTTP status of the reply, 0 until it came */
	int closed; /* the panel closed the stream */
};

static int connect_local(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* The stream clients: every stream read as fast as it comes, events
 * counted (an event ends with an empty line). Runs until killed. */
static void streams_run(int port, int n, struct stream_seen *seen)
{
	struct pollfd pf[STREAMS];
	char req[128], buf[16384], prev[STREAMS] = { 0 };
	bool head[STREAMS];

	snprintf(req, sizeof(req),
		 "GET /events HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAccept: text/event-stream\r\n\r\n", port);
	for (int i = 0; i < n; i++) {
		pf[i].fd = connect_local(port);
		pf[i].events = POLLIN;
		head[i] = true;
		if (pf[i].fd < 0 || send(pf[i].fd, req, strlen(req), MSG_NOSIGNAL) < 0)
			seen[i].closed = 1;
	}
	for (;;) {
		if (poll(pf, (nfds_t)n, -1) < 0 && errno != EINTR)
			_exit(1);
		for (int i = 0; i < n; i++) {
			ssize_t got;

			if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			got = read(pf[i].fd, buf, sizeof(buf));
			if (got <= 0) {
				seen[i].closed = 1;
				close(pf[i].fd);
				pf[i].fd = -1;
				continue;
			}
			if (head[i]) {
				/* "HTTP/1.1 200 OK": the status; the headers' blank
				 * line is not an event, the first counted is. */
				seen[i].status = got > 12 ? atoi(buf + 9) : -1;
				head[i] = false;
				prev[i] = 0;
			}
			for (ssize_t k = 0; k < got; k++) {
				if (buf[k] == '\n' && prev[i] == '\n')
					seen[i].events++;
				prev[i] = buf[k]; /* "\n\r\n" (chunk framing) is none */
			}
			seen[i].bytes += (uint64_t)got;
		}
	}
}

enum phase { NO_PANEL, PANEL_IDLE, PANEL_STREAMS, NPHASES };

struct phase_out {
	struct bench_ticks t;
	double daemon_cpu, panel_cpu; /* fractions of one core */
	struct bench_usage panel_end;
	double events_per_s_min, events_per_s_max, bytes_per_s;
	int streams_ok;
};

/* Measures one phase of @secs: the daemon @d and (if > 0) the panel @pp. */
static int measure(const char *sock, pid_t d, pid_t pp, double secs, struct stream_seen *seen,
		   int nstreams, struct phase_out *o)
{
	struct bench_ticks a, b;
	struct bench_usage pa = { 0 };
	double da, db;
	uint64_t ev0[STREAMS], by0 = 0, by1 = 0;
	int64_t t0, t1;

	memset(o, 0, sizeof(*o));
	if (bench_ticks_get(sock, &a) < 0 || !bench_proc_cpu(d, &da) ||
	    (pp > 0 && !bench_proc_usage(pp, &pa)))
		return -1;
	for (int i = 0; i < nstreams; i++) {
		ev0[i] = seen[i].events;
		by0 += seen[i].bytes;
	}
	t0 = bench_mono_ns();
	bench_sleep_s(secs);
	t1 = bench_mono_ns();
	if (bench_ticks_get(sock, &b) < 0 || !bench_proc_cpu(d, &db) ||
	    (pp > 0 && !bench_proc_usage(pp, &o->panel_end)))
		return -1;
	secs = (double)(t1 - t0) / 1e9;
	bench_ticks_diff(&a, &b, &o->t);
	o->daemon_cpu = (db - da) / secs;
	if (pp > 0)
		o->panel_cpu = (o->panel_end.cpu_s - pa.cpu_s) / secs;
	o->events_per_s_min = nstreams ? 1e300 : 0;
	for (int i = 0; i < nstreams; i++) {
		double e = (double)(seen[i].events - ev0[i]) / secs;

		by1 += seen[i].bytes;
		o->events_per_s_min = e < o->events_per_s_min ? e : o->events_per_s_min;
		o->events_per_s_max = e > o->events_per_s_max ? e : o->events_per_s_max;
		o->streams_ok += seen[i].status == 200 && !seen[i].closed;
	}
	o->bytes_per_s = (double)(by1 - by0) / secs;
	return 0;
}

static void stop(pid_t *pid, int sig)
{
	if (*pid > 0) {
		kill(*pid, sig);
		waitpid(*pid, NULL, 0);
	}
	*pid = -1;
}

int bench_panel(const struct bench_opts *o, cJSON *out)
{
	static const char *const phase_name[] = { "no panel (baseline)", "panel, no page open",
						  "panel, 10 event streams" };
	double secs = o->duration_s > 0 ? o->duration_s : o->quick ? 1.5 : 10.0;
	char dpath[4096], ppath[4096], rt[48], name[48], sock[108], line[256];
	const char *daemon = bench_find("SHMCLOCKD", "shmclockd", "shmclockd", SHMCLOCKD_INSTALLED,
					dpath, sizeof(dpath));
	const char *panel = bench_find("SHMCLOCK_PANEL", "shmclockd/panel", "shmclock-panel",
				       SHMCLOCK_PANEL_INSTALLED, ppath, sizeof(ppath));
	char *dargv[] = { (char *)daemon, "--notify-fd", "-n", name, "--hz", "10000",
			  "--remove-on-exit", "--log-level=error", NULL };
	char *pargv[] = { (char *)panel, "-n", name, "--listen", "127.0.0.1:0", NULL };
	struct stream_seen *seen = bench_shared(sizeof(*seen) * STREAMS);
	cJSON *results = cJSON_AddArrayToObject(out, "results");
	struct phase_out ph[NPHASES];
	pid_t d, pp = -1, clients = -1;
	const char *at;
	int port = 0, rc = 1;

	if (!seen || bench_runtime_dir(rt, sizeof(rt)))
		return 1;
	snprintf(name, sizeof(name), "bench-panel-%d", (int)getpid());
	snprintf(sock, sizeof(sock), "%s/%s.sock", rt, name);
	printf("panel: shmclockd at PublishHz 10000 without a panel, with shmclock-panel and no\n"
	       "page open, and with %d clients reading its event stream; %.3g s per phase%s.\n"
	       "x: ratio to the daemon alone\n",
	       STREAMS, secs, o->quick ? " (quick)" : "");
	cJSON_AddNumberToObject(out, "seconds", secs);
	cJSON_AddNumberToObject(out, "hz", 10000);
	cJSON_AddNumberToObject(out, "streams", STREAMS);
	cJSON_AddStringToObject(out, "shmclock_panel", panel);
	d = bench_spawn(dargv, true);
	if (d < 0) {
		fprintf(stderr, "shmclock-bench: %s did not start (set SHMCLOCKD)\n", daemon);
		rmdir(rt);
		return 1;
	}
	printf("  %-24s %9s %9s %9s %9s %6s %9s %6s | %9s %9s %9s %9s\n", "phase", "p50 us", "p99 us",
	       "p99.9 us", "max us", "p99 x", "daemon", "CPU x", "panel", "VmRSS", "RssAnon",
	       "events/s");
	for (int i = 0; i < NPHASES; i++) {
		cJSON *j;
		double p50, p99, p999, mx;

		if (i == PANEL_IDLE) {
			pp = bench_spawn_line(pargv, line, sizeof(line));
			at = pp > 0 ? strstr(line, "http://127.0.0.1:") : NULL;
			port = at ? atoi(at + 17) : 0;
			if (port <= 0) {
				fprintf(stderr, "shmclock-bench: %s did not start (set SHMCLOCK_PANEL): %s\n",
					panel, line[0] ? line : "no output");
				goto out;
			}
		}
		if (i == PANEL_STREAMS) {
			clients = fork();
			if (clients == 0)
				streams_run(port, STREAMS, seen);
			if (clients < 0)
				goto out;
		}
		/* The warm-up: the panel's first status rounds, the streams'
		 * first (full) frames. */
		bench_sleep_s(1.0);
		if (measure(sock, d, pp, secs, seen, i == PANEL_STREAMS ? STREAMS : 0, &ph[i]) < 0) {
			fprintf(stderr, "shmclock-bench: the daemon or the panel stopped answering in "
					"phase '%s'\n", phase_name[i]);
			goto out;
		}
		p50 = (double)latehist_quantile(ph[i].t.hist, 0.5) / 1e3;
		p99 = (double)latehist_quantile(ph[i].t.hist, 0.99) / 1e3;
		p999 = (double)latehist_quantile(ph[i].t.hist, 0.999) / 1e3;
		mx = (double)bench_hist_max(ph[i].t.hist) / 1e3;
		{
			double base99 = (double)latehist_quantile(ph[0].t.hist, 0.99) / 1e3;

			printf("  %-24s %9.1f %9.1f %9.1f %9.1f %5.2fx %7.3f %% %5.2fx |", phase_name[i],
			       p50, p99, p999, mx, base99 > 0 ? p99 / base99 : 0, ph[i].daemon_cpu * 100,
			       ph[0].daemon_cpu > 0 ? ph[i].daemon_cpu / ph[0].daemon_cpu : 0);
		}
		if (i == NO_PANEL)
			printf(" %9s %9s %9s %9s\n", "-", "-", "-", "-");
		else if (i == PANEL_IDLE)
			printf(" %7.3f %% %5ld KiB %5ld KiB %9s\n", ph[i].panel_cpu * 100,
			       ph[i].panel_end.rss_kib, ph[i].panel_end.anon_kib, "-");
		else
			printf(" %7.3f %% %5ld KiB %5ld KiB %4.1f-%4.1f\n", ph[i].panel_cpu * 100,
			       ph[i].panel_end.rss_kib, ph[i].panel_end.anon_kib,
			       ph[i].events_per_s_min, ph[i].events_per_s_max);
		j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "name", phase_name[i]);
		cJSON_AddNumberToObject(j, "ticks", ph[i].t.count);
		cJSON_AddNumberToObject(j, "skipped", ph[i].t.skipped);
		cJSON_AddNumberToObject(j, "late_p50_ns", p50 * 1e3);
		cJSON_AddNumberToObject(j, "late_p99_ns", p99 * 1e3);
		cJSON_AddNumberToObject(j, "late_p999_ns", p999 * 1e3);
		cJSON_AddNumberToObject(j, "late_max_ns", mx * 1e3);
		cJSON_AddNumberToObject(j, "daemon_cpu_fraction", ph[i].daemon_cpu);
		cJSON_AddNumberToObject(j, "status_requests", ph[i].t.answered);
		if (i != NO_PANEL) {
			cJSON_AddNumberToObject(j, "panel_cpu_fraction", ph[i].panel_cpu);
			cJSON_AddNumberToObject(j, "panel_rss_kib", (double)ph[i].panel_end.rss_kib);
			cJSON_AddNumberToObject(j, "panel_rss_anon_kib", (double)ph[i].panel_end.anon_kib);
		}
		if (i == PANEL_STREAMS) {
			cJSON_AddNumberToObject(j, "streams_open", ph[i].streams_ok);
			cJSON_AddNumberToObject(j, "events_per_s_min", ph[i].events_per_s_min);
			cJSON_AddNumberToObject(j, "events_per_s_max", ph[i].events_per_s_max);
			cJSON_AddNumberToObject(j, "bytes_per_s", ph[i].bytes_per_s);
		}
		cJSON_AddItemToArray(results, j);
	}
	{
		double r99 = (double)latehist_quantile(ph[0].t.hist, 0.99);

		r99 = r99 > 0 ? (double)latehist_quantile(ph[PANEL_STREAMS].t.hist, 0.99) / r99 : 0;
		printf("  with %d event streams against no panel: the daemon's tick lateness p99 %.2fx, "
		       "its CPU %.2fx;\n  the panel: %.3f %% of a core, %ld KiB resident; %d of %d streams "
		       "open, %.0f bytes/s in all; status requests answered: %.0f (no panel), %.0f (streams)\n",
		       STREAMS, r99,
		       ph[0].daemon_cpu > 0 ? ph[PANEL_STREAMS].daemon_cpu / ph[0].daemon_cpu : 0,
		       ph[PANEL_STREAMS].panel_cpu * 100, ph[PANEL_STREAMS].panel_end.rss_kib,
		       ph[PANEL_STREAMS].streams_ok, STREAMS, ph[PANEL_STREAMS].bytes_per_s,
		       ph[0].t.answered, ph[PANEL_STREAMS].t.answered);
		cJSON_AddNumberToObject(out, "late_p99_ratio", r99);
		cJSON_AddNumberToObject(out, "daemon_cpu_ratio",
					ph[0].daemon_cpu > 0
						? ph[PANEL_STREAMS].daemon_cpu / ph[0].daemon_cpu : 0);
	}
	rc = 0;
out:
	stop(&clients, SIGKILL);
	stop(&pp, SIGTERM);
	stop(&d, SIGTERM);
	unlink(sock);
	rmdir(rt);
	return rc;
}
