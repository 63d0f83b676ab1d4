/* SPDX-License-Identifier: MIT */
/*
 * hosts --followers N,N,...: a fleet (issue 57). For each N, one leader
 * shmclockd and N follower shmclockds, started afresh, in a network
 * namespace of the benchmark's own when it runs as root (so that every UDP
 * datagram the kernel counts there is the fleet's), on loopback otherwise.
 * Discovery as doc/hosts.md gives it for a fleet: the leader at a known
 * participant index, each follower naming it as its only peer.
 *
 * Per N: datagrams/s and the daemons' CPU at rest; then changes at 10/s
 * (pause and resume in turn): the commit, from the control request to the
 * change fresh in every follower's segment (the leader's too), its p50,
 * p99 and max; the leader's Lead after them; datagrams/s and CPU meanwhile.
 * The baseline is the fleet of one follower, in the same run: each row's
 * ratios are to it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dds/version.h>

#include "bench.h"
#include "control_client.h"
#include "hosts/dist.h"

#define FLEET_LIST_MAX 16

/* One follower per N from a list "1,2,4": false on anything else. */
static bool parse_list(const char *s, int *n, int *count)
{
	char *end;

	*count = 0;
	while (*s && *count < FLEET_LIST_MAX) {
		long v = strtol(s, &end, 10);

		if (end == s || v < 1 || v > DIST_MEMBERS_MAX || (*end && *end != ','))
			return false;
		n[(*count)++] = (int)v;
		s = *end ? end + 1 : end;
	}
	return *count > 0 && !*s;
}

/* Loopback up in this (new) namespace. */
static int lo_up(void)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), r = -1;

	if (fd < 0)
		return -1;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP;
		r = ioctl(fd, SIOCSIFFLAGS, &ifr);
	}
	close(fd);
	return r;
}

/* UDP datagrams delivered in this namespace so far (-1: unknown). */
static double udp_in(void)
{
	char head[512], vals[512];
	FILE *f = fopen("/proc/net/snmp", "r");
	double v = -1;

	if (!f)
		return -1;
	while (fgets(head, sizeof(head), f)) {
		if (strncmp(head, "Udp: ", 5) || !fgets(vals, sizeof(vals), f))
			continue;
		/* InDatagrams is the first counter. */
		if (!strncmp(head, "Udp: InDatagrams", 16))
			v = strtod(vals + 5, NULL);
		break;
	}
	fclose(f);
	return v;
}

struct fleet {
	const char *daemon, *rt;
	int n, domain;
	pid_t pid[DIST_MEMBERS_MAX + 1]; /* [0] the leader */
	char name[DIST_MEMBERS_MAX + 1][64];
	shmclock_t *clk[DIST_MEMBERS_MAX + 1];
};

/* The leader's status "distribute" object (cJSON_Delete the root). */
static cJSON *leader_dist(const struct fleet *f, cJSON **root)
{
	static char buf[1 << 18];
	char sock[256];
	cJSON *d;

	snprintf(sock, sizeof(sock), "%s/%s.sock", f->rt, f->name[0]);
	*root = NULL;
	if (control_client_request(sock, "{\"v\":1,\"cmd\":\"status\"}\n", buf, sizeof(buf), 10000))
		return NULL;
	*root = cJSON_Parse(buf);
	d = cJSON_GetObjectItem(cJSON_GetObjectItem(*root, "status"), "distribute");
	return d;
}

static double leader_num(const struct fleet *f, const char *key)
{
	cJSON *root, *d = leader_dist(f, &root), *v = cJSON_GetObjectItem(d, key);
	double x = cJSON_IsNumber(v) ? v->valuedouble : -1;

	cJSON_Delete(root);
	return x;
}

static int leader_members(const struct fleet *f)
{
	cJSON *root, *d = leader_dist(f, &root);
	int n = cJSON_GetArraySize(cJSON_GetObjectItem(d, "followers"));

	cJSON_Delete(root);
	return n;
}

static pid_t start(const struct fleet *f, int i, const char *uri)
{
	char json[512], path[256];
	FILE *c;

	if (i == 0)
		snprintf(json, sizeof(json),
			 "{\"Name\":\"%s\",\"TimeSource\":\"simulation\",\"Ros2\":{\"Domain\":%d},"
			 "\"Distribute\":{\"Publish\":true,\"Clock\":\"%s\"}}",
			 f->name[0], f->domain, f->name[0]);
	else
		snprintf(json, sizeof(json),
			 "{\"Name\":\"%s\",\"TimeSource\":\"leader\",\"Ros2\":{\"Domain\":%d},"
			 "\"Distribute\":{\"Clock\":\"%s\"}}", f->name[i], f->domain, f->name[0]);
	snprintf(path, sizeof(path), "%s/fleet-%d.json", f->rt, i);
	if (!(c = fopen(path, "w")))
		return -1;
	fputs(json, c);
	fclose(c);
	setenv("CYCLONEDDS_URI", uri, 1);
	/* Errors only: a straggler's warning would cut the table. */
	char *argv[] = { (char *)f->daemon, "--notify-fd", "-c", path, "--log-level=error", NULL };

	return bench_spawn(argv, true);
}

static void stop(struct fleet *f)
{
	char path[256];

	for (int i = 0; i <= f->n; i++) {
		shmclock_close(f->clk[i]);
		f->clk[i] = NULL;
		if (f->pid[i] > 0) {
			kill(f->pid[i], SIGTERM);
			waitpid(f->pid[i], NULL, 0);
			f->pid[i] = 0;
		}
		shmclock_unlink(f->name[i]);
		snprintf(path, sizeof(path), "%s/fleet-%d.json", f->rt, i);
		unlink(path);
	}
}

/* CPU seconds of the leader (@lead) and of all followers (@flw) so far. */
static void cpu(const struct fleet *f, double *lead, double *flw)
{
	double s;

	*lead = bench_proc_cpu(f->pid[0], &s) ? s : 0;
	*flw = 0;
	for (int i = 1; i <= f->n; i++)
		*flw += bench_proc_cpu(f->pid[i], &s) ? s : 0;
}

/* One change: the time from its request until it is fresh in every
 * segment (ns), -1 on a refusal, 3e9 when a host never took it. */
static double one_change(const struct fleet *f, bool pause)
{
	char sock[256];
	uint64_t before[DIST_MEMBERS_MAX + 1];
	bool seen[DIST_MEMBERS_MAX + 1] = { false };
	int left = f->n + 1;
	static char reply[1 << 18]; /* the reply carries the status: every follower */
	struct bench_req a = { .buf = reply, .len = sizeof(reply) };
	int64_t t0, done = 0;

	for (int i = 0; i <= f->n; i++) {
		shmclock_info_t in;

		shmclock_info(f->clk[i], &in);
		before[i] = in.commits;
	}
	snprintf(sock, sizeof(sock), "%s/%s.sock", f->rt, f->name[0]);
	a.sock = sock;
	a.req = pause ? "{\"v\":1,\"cmd\":\"pause\"}\n" : "{\"v\":1,\"cmd\":\"resume\"}\n";
	t0 = bench_mono_ns();
	if (bench_req_start(&a)) {
		fprintf(stderr, "shmclock-bench: no thread for a control request\n");
		return -1;
	}
	while (left && bench_mono_ns() - t0 < 3000000000LL) {
		for (int i = 0; i <= f->n; i++) {
			shmclock_info_t in;

			if (seen[i])
				continue;
			shmclock_info(f->clk[i], &in);
			if (in.commits != before[i] && in.paused == pause && !in.stale) {
				seen[i] = true;
				left--;
				done = bench_mono_ns();
			}
		}
		/* Not a core of its own: the daemons need both. */
		bench_sleep_s(0.0002);
	}
	if (bench_req_join(&a)) {
		fprintf(stderr, "shmclock-bench: the leader refused a change: %.200s\n", a.buf);
		return -1;
	}
	return left ? 3e9 : (double)(done - t0);
}

/* What a stretch of time cost: datagrams, the leader's and the
 * followers' CPU seconds, and its length (s). window_open() notes the
 * counters, window_close() turns them into the differences. */
struct window {
	double udp, lead, flw, secs;
};

static void window_open(const struct fleet *f, struct window *w)
{
	w->udp = udp_in();
	cpu(f, &w->lead, &w->flw);
	w->secs = (double)bench_mono_ns() / 1e9;
}

static void window_close(const struct fleet *f, struct window *w)
{
	double lead, flw;

	cpu(f, &lead, &flw);
	w->udp = udp_in() - w->udp;
	w->lead = lead - w->lead;
	w->flw = flw - w->flw;
	w->secs = (double)bench_mono_ns() / 1e9 - w->secs;
}

struct row {
	int n;
	struct bench_stats commit;
	double lead_ms, lead_cpu_rest, lead_cpu_chg, flw_cpu_rest, dgram_rest, dgram_chg;
	double held_p50_ms, held_p99_ms; /* from announcing a change until every member held it */
	double fleet_cpu_ms;            /* the followers' CPU per change, beyond their rest */
	double postponed, lost;
};

/* One fleet of @n followers, measured into @r. 0, or -1. */
static int run_one(struct fleet *f, int n, int changes, double rest, bool counted,
		   struct row *r)
{
	char leader_uri[512], follower_uri[768];
	int port = 7400 + 250 * f->domain + 10; /* participant index 0's discovery port */
	double *c = calloc((size_t)changes, sizeof(double));
	struct window w;
	int rc = -1;

	if (!c)
		return -1;
	snprintf(leader_uri, sizeof(leader_uri),
		 "<CycloneDDS><Domain id=\"any\"><General><Interfaces><NetworkInterface "
		 "address=\"127.0.0.1\"/></Interfaces><AllowMulticast>false</AllowMulticast>"
		 "</General><Discovery><ParticipantIndex>0</ParticipantIndex></Discovery></Domain>"
		 "</CycloneDDS>");
	snprintf(follower_uri, sizeof(follower_uri),
		 "<CycloneDDS><Domain id=\"any\"><General><Interfaces><NetworkInterface "
		 "address=\"127.0.0.1\"/></Interfaces><AllowMulticast>false</AllowMulticast>"
		 "</General><Discovery><ParticipantIndex>none</ParticipantIndex><Peers><Peer "
		 "address=\"127.0.0.1:%d\"/></Peers></Discovery></Domain></CycloneDDS>", port);
	memset(r, 0, sizeof(*r));
	r->n = n;
	f->n = n;
	for (int i = 0; i <= n; i++)
		snprintf(f->name[i], sizeof(f->name[i]), "bench-fleet-%d-%d", (int)getpid(), i);
	for (int i = 0; i <= n; i++)
		if ((f->pid[i] = start(f, i, i ? follower_uri : leader_uri)) < 0) {
			fprintf(stderr, "shmclock-bench: %s did not start (set SHMCLOCKD; built with "
					"Cyclone DDS?)\n", f->daemon);
			goto out;
		}
	/* Every follower a member, every segment fresh. */
	for (int64_t deadline = bench_mono_ns() + 60000000000LL;;) {
		bool fresh = leader_members(f) == n;

		for (int i = 0; i <= n && fresh; i++) {
			shmclock_info_t in;

			if (!f->clk[i] && shmclock_open(f->name[i], &f->clk[i]))
				fresh = false;
			else if (shmclock_info(f->clk[i], &in) || in.stale)
				fresh = false;
		}
		if (fresh)
			break;
		if (bench_mono_ns() > deadline) {
			fprintf(stderr, "shmclock-bench: %d followers never all joined (%d did)\n", n,
				leader_members(f));
			goto out;
		}
		bench_sleep_s(0.05);
	}
	bench_sleep_s(2); /* joins and discovery settle */
	window_open(f, &w);
	bench_sleep_s(rest);
	window_close(f, &w);
	r->dgram_rest = counted ? w.udp / w.secs : -1;
	r->lead_cpu_rest = w.lead / w.secs * 100;
	r->flw_cpu_rest = w.flw / w.secs * 100 / n;
	r->postponed = leader_num(f, "postponed");
	r->lost = leader_num(f, "lost_followers");
	window_open(f, &w);
	for (int k = 0; k < changes; k++) {
		int64_t start_ns = bench_mono_ns();
		double left;

		if ((c[k] = one_change(f, k % 2 == 0)) < 0)
			goto out;
		left = 0.1 - (double)(bench_mono_ns() - start_ns) / 1e9;
		if (left > 0)
			bench_sleep_s(left);
	}
	window_close(f, &w);
	r->dgram_chg = counted ? w.udp / w.secs : -1;
	r->lead_cpu_chg = w.lead / w.secs * 100;
	r->fleet_cpu_ms = (w.flw - r->flw_cpu_rest / 100 * n * w.secs) / changes * 1e3;
	r->held_p50_ms = leader_num(f, "ack_p50_ns") / 1e6;
	r->held_p99_ms = leader_num(f, "ack_p99_ns") / 1e6;
	r->commit = bench_summarise(c, changes);
	r->lead_ms = leader_num(f, "lead_current_ns") / 1e6;
	r->postponed = leader_num(f, "postponed") - r->postponed;
	r->lost = leader_num(f, "lost_followers") - r->lost;
	rc = 0;
out:
	stop(f);
	free(c);
	return rc;
}

int bench_fleet(const struct bench_opts *o, cJSON *out)
{
	int ns[FLEET_LIST_MAX], count, changes = o->samples ? (int)o->samples : o->quick ? 30 : 100;
	double rest = o->duration_s > 0 ? o->duration_s : o->quick ? 3 : 10;
	char rt[128], daemon_path[256];
	struct fleet f = { .rt = rt };
	struct row rows[FLEET_LIST_MAX];
	int home = -1, rc = 1;
	bool counted = false;
	char *saved_uri = NULL;
	cJSON *jr;

	if (!parse_list(o->followers, ns, &count)) {
		fprintf(stderr, "shmclock-bench: --followers takes numbers from 1 to %d separated by "
				"commas (at most %d), not '%s'\n", DIST_MEMBERS_MAX, FLEET_LIST_MAX,
			o->followers);
		return 2;
	}
	f.daemon = bench_find("SHMCLOCKD", "shmclockd", "shmclockd", SHMCLOCKD_INSTALLED,
			      daemon_path, sizeof(daemon_path));
	f.domain = 1 + (int)(getpid() % 200);
	if (bench_runtime_dir(rt, sizeof(rt)))
		return 1;
	/* A namespace of its own (this thread's; setns back at the end), so
	 * that the datagrams counted are the fleet's. */
	if (geteuid() == 0 && (home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)) >= 0 &&
	    unshare(CLONE_NEWNET) == 0) {
		counted = lo_up() == 0 && udp_in() >= 0;
		if (!counted) {
			/* Loopback down there: back to the machine's. */
			printf("  (a network namespace without loopback: on the machine's; "
			       "datagrams not counted)\n");
			if (setns(home, CLONE_NEWNET))
				perror("shmclock-bench: setns back");
			close(home);
			home = -1;
		}
	} else {
		printf("  (%s: on the machine's loopback; datagrams not counted, they would "
		       "include everyone's)\n", geteuid() ? "not root" : strerror(errno));
		if (home >= 0)
			close(home);
		home = -1;
	}
	printf("hosts --followers: one leader, N followers, each fleet started afresh%s; Cyclone "
	       "DDS %s on 127.0.0.1, followers' one peer the leader; %d changes at 10/s (pause, "
	       "resume), commit = request to fresh in every segment\n",
	       counted ? " in a network namespace of its own" : "", DDS_VERSION, changes);
	printf("  %9s %22s %7s %13s %10s %13s %24s\n", "followers", "commit p50/p99/max", "Lead",
	       "all held", "followers'", "leader CPU %", "datagrams/s at rest");
	printf("  %9s %22s %7s %13s %10s %13s %24s\n", "", "(ms)", "(ms)", "p50/p99 (ms)",
	       "CPU/change", "rest/changes", "(a follower) / changes");
	/* Each daemon gets its own (start()); the caller's is put back. */
	{
		const char *u = getenv("CYCLONEDDS_URI");

		saved_uri = u ? strdup(u) : NULL;
	}
	jr = cJSON_AddArrayToObject(out, "fleet");
	for (int k = 0; k < count; k++) {
		struct row *r = &rows[k];
		cJSON *j;

		if (run_one(&f, ns[k], changes, rest, counted, r))
			goto out;
		printf("  %9d %6.1f /%6.1f /%6.1f %7.1f %5.1f /%6.1f %7.2f ms %5.1f /%6.1f %8.0f (%5.1f) /%6.0f\n",
		       r->n, r->commit.p50 / 1e6, r->commit.p99 / 1e6, r->commit.max / 1e6, r->lead_ms,
		       r->held_p50_ms, r->held_p99_ms, r->fleet_cpu_ms, r->lead_cpu_rest, r->lead_cpu_chg,
		       r->dgram_rest, r->dgram_rest / r->n, r->dgram_chg);
		if (r->postponed > 0 || r->lost > 0)
			printf("  %9s %.0f changes postponed, %.0f followers lost\n", "", r->postponed,
			       r->lost);
		j = cJSON_CreateObject();
		cJSON_AddNumberToObject(j, "followers", r->n);
		bench_json_stats(j, &r->commit);
		cJSON_AddNumberToObject(j, "lead_ms", r->lead_ms);
		cJSON_AddNumberToObject(j, "leader_cpu_rest_pct", r->lead_cpu_rest);
		cJSON_AddNumberToObject(j, "leader_cpu_changes_pct", r->lead_cpu_chg);
		cJSON_AddNumberToObject(j, "follower_cpu_rest_pct", r->flw_cpu_rest);
		cJSON_AddNumberToObject(j, "followers_cpu_per_change_ms", r->fleet_cpu_ms);
		cJSON_AddNumberToObject(j, "all_held_p50_ms", r->held_p50_ms);
		cJSON_AddNumberToObject(j, "all_held_p99_ms", r->held_p99_ms);
		cJSON_AddNumberToObject(j, "datagrams_rest_per_s", r->dgram_rest);
		cJSON_AddNumberToObject(j, "datagrams_changes_per_s", r->dgram_chg);
		cJSON_AddNumberToObject(j, "postponed", r->postponed);
		cJSON_AddNumberToObject(j, "lost", r->lost);
		cJSON_AddItemToArray(jr, j);
	}
	/* The ratios to the first fleet (its smallest, as given). */
	for (int k = 1; k < count; k++)
		printf("  %d followers against %d: commit p50 %.2fx; datagrams at rest per follower "
		       "%.2fx\n", rows[k].n, rows[0].n, rows[k].commit.p50 / rows[0].commit.p50,
		       counted ? (rows[k].dgram_rest / rows[k].n) / (rows[0].dgram_rest / rows[0].n)
			       : NAN);
	rc = 0;
out:
	if (saved_uri)
		setenv("CYCLONEDDS_URI", saved_uri, 1);
	else
		unsetenv("CYCLONEDDS_URI");
	free(saved_uri);
	if (home >= 0) {
		if (setns(home, CLONE_NEWNET))
			perror("shmclock-bench: setns back");
		close(home);
	}
	rmdir(rt);
	return rc;
}
