/* SPDX-License-Identifier: MIT */
/*
 * shmclockctl: control a running shmclockd over its socket, or watch a
 * clock through the shared segment.
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <shmclock/shmclock.h>
#include <shmclock/time.h>

#include "cli.h"
#include "control_client.h"
#include "ctl_trace.h"
#include "duration.h"
#include "paths.h"
#include "protocol.h"
#include "status_json.h"

/* The protocol's commands (protocol.h), then this program's own. */
#define WATCH_ARGS "[--interval MS] [--count N]"
#define WATCH_HELP "show the live clock (read from shared memory)"
#define TOP_ARGS "[--interval MS] [--count N]"
#define TOP_HELP "lockstep: who holds the clock and why it is slow, refreshed in place"

static void usage(FILE *f)
{
	char syn[80];

	fprintf(f, "usage: shmclockctl [-n NAME] [--socket PATH] COMMAND [ARGS]\n\ncommands:\n");
	for (size_t i = 0; i < PROTO_NCMDS; i++)
		fprintf(f, "  %-8s %-30s %s\n", proto_cmds[i].name,
			proto_synopsis(&proto_cmds[i], syn, sizeof(syn)), proto_cmds[i].help);
	fprintf(f, "  %-8s %-30s %s\n", "watch", WATCH_ARGS, WATCH_HELP);
	fprintf(f, "  %-8s %-30s %s\n", "top", TOP_ARGS, TOP_HELP);
	fprintf(f, "  %-8s %-30s %s\n", "trace", TRACE_ARGS, TRACE_HELP);
	fprintf(f, "\n  -n, --name NAME   clock name (default: $SHMCLOCK_NAME, else default)\n"
		   "      --socket PATH control socket (default: the daemon's default for NAME)\n"
		   "  -t, --timeout S   wait at most S seconds for the daemon's reply (default 5;\n"
		   "                    0: forever); exit status 3 when it does not come\n"
		   "  -h, --help        this help; COMMAND --help for one command\n");
}

static int command_help(const char *cmd)
{
	const struct proto_cmd *pc = proto_find(cmd);
	char syn[80];

	if (pc)
		printf("usage: shmclockctl [-n NAME] %s %s\n  %s\n", pc->name,
		       proto_synopsis(pc, syn, sizeof(syn)), pc->help);
	else if (!strcmp(cmd, "watch"))
		printf("usage: shmclockctl [-n NAME] watch %s\n  %s\n", WATCH_ARGS, WATCH_HELP);
	else if (!strcmp(cmd, "top"))
		printf("usage: shmclockctl [-n NAME] top %s\n  %s\n", TOP_ARGS, TOP_HELP);
	else if (!strcmp(cmd, "trace"))
		printf("usage: shmclockctl [-n NAME] trace %s\n  %s\n", TRACE_ARGS, TRACE_HELP);
	else
		return 1;
	return 0;
}

/* How long to wait for the daemon's reply, ms (--timeout). */
static int timeout_ms = 5000;

/* One request, one reply line. Returns the parsed reply or NULL (message
 * printed; *rc is the exit status). */
static cJSON *request_fd(const char *sock, const char *line, int pass, int *rc)
{
	/* Lockstep status with 64 participants and their figures. */
	static char buf[65536];
	cJSON *reply;
	int r = control_client_request_fd(sock, line, pass, buf, sizeof(buf), timeout_ms);

	*rc = 1;
	if (r == -ETIMEDOUT) {
		/* The request is in the daemon's socket: a daemon that was only
		 * stopped (SIGSTOP, a debugger) will still apply it later. */
		fprintf(stderr, "shmclockctl: shmclockd at %s did not answer within %g s (stopped, or "
				"overloaded?); the request may still be applied when it runs again\n",
			sock, timeout_ms / 1000.0);
		*rc = 3;
		return NULL;
	}
	if (r == -ENAMETOOLONG) {
		fprintf(stderr, "shmclockctl: socket path too long: %s\n", sock);
		return NULL;
	}
	if (r < 0 && r != -EPROTO) {
		fprintf(stderr, "shmclockctl: no shmclockd at %s: %s\n", sock, strerror(-r));
		return NULL;
	}
	reply = cJSON_Parse(buf);
	if (!reply)
		fprintf(stderr, "shmclockctl: the daemon sent no valid reply\n");
	return reply;
}

static cJSON *request(const char *sock, const char *line, int *rc)
{
	return request_fd(sock, line, -1, rc);
}

static void print_status(const cJSON *st)
{
	char buf[64];

	printf("clock       %s\n", str_of(st, "name"));
	printf("source      %s%s\n", str_of(st, "source"), bool_of(st, "stepped") ? " (stepped)" : "");
	if (bool_of(st, "initialized"))
		printf("time        %s\n", str_of(st, "sim"));
	else
		printf("time        (not initialized)\n");
	if (cJSON_GetObjectItemCaseSensitive(st, "sim_unix"))
		printf("world time  %s\n", str_of(st, "sim_unix"));
	printf("scale       %g%s", num_of(st, "scale"), bool_of(st, "paused") ? "  PAUSED" : "");
	if (cJSON_GetObjectItemCaseSensitive(st, "scale_achieved") &&
	    fabs(num_of(st, "scale_achieved") / num_of(st, "scale") - 1) > 0.01)
		printf("  (achieved %g)", num_of(st, "scale_achieved"));
	printf("\n");
	printf("jump epoch  %.0f (last jump %s)\n", num_of(st, "jump_epoch"),
	       duration_format((int64_t)num_of(st, "last_jump_ns"), buf, sizeof(buf)));
	printf("publish     %.0f Hz, %.0f commits\n", num_of(st, "publish_hz"), num_of(st, "commits"));
	printf("writer      pid %.0f\n", num_of(st, "writer_pid"));
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(st, "ticks");
	if (t) {
		char p50[32], p99[32], mx[32];

		printf("ticks       %.0f (%.0f skipped), late p50 %s p99 %s max %s\n", num_of(t, "count"),
		       num_of(t, "skipped"), duration_format((int64_t)num_of(t, "late_p50_ns"), p50, sizeof(p50)),
		       duration_format((int64_t)num_of(t, "late_p99_ns"), p99, sizeof(p99)),
		       duration_format((int64_t)num_of(t, "late_max_ns"), mx, sizeof(mx)));
	}
	t = cJSON_GetObjectItemCaseSensitive(st, "record");
	if (t)
		printf("record      %s: %.0f changes and events written, %.0f dropped%s%s\n",
		       str_of(t, "file"), num_of(t, "written"), num_of(t, "dropped"),
		       *str_of(t, "error") ? "  ERROR: " : "", str_of(t, "error"));
	t = cJSON_GetObjectItemCaseSensitive(st, "replay");
	if (t)
		printf("replay      %s: %.0f of %.0f changes%s%s\n", str_of(t, "file"),
		       num_of(t, "applied"), num_of(t, "changes"), bool_of(t, "paused") ? ", paused" : "",
		       bool_of(t, "truncated") ? " (the file is cut short)" : "");
	t = cJSON_GetObjectItemCaseSensitive(st, "ros2");
	if (t && bool_of(t, "following")) {
		char age[32] = "no sample yet";
		double a = num_of(t, "last_sample_age_ns");

		if (a >= 0) {
			char d[32];

			snprintf(age, sizeof(age), "last %s ago", duration_format((int64_t)a, d, sizeof(d)));
		}
		printf("ros2        domain %.0f, following /clock: %.0f samples at %.1f Hz, %s%s\n",
		       num_of(t, "domain"), num_of(t, "samples"), num_of(t, "rate_hz"), age,
		       bool_of(t, "stale") ? "  STALE" : "");
	}
	if (t && bool_of(t, "publishing"))
		printf("ros2        domain %.0f, publishing /clock at %.0f Hz: %.0f samples\n",
		       num_of(t, "domain"), num_of(t, "publish_hz"), num_of(t, "published"));
	t = cJSON_GetObjectItemCaseSensitive(st, "lockstep");
	if (t) {
		const cJSON *m, *ms = cJSON_GetObjectItemCaseSensitive(t, "members");
		int n = cJSON_GetArraySize(ms);

		char req[32] = "";

		/* A follower host may require none of its own. */
		if (num_of(t, "participants_required") > 0)
			snprintf(req, sizeof(req), " of %.0f", num_of(t, "participants_required"));
		printf("lockstep    %d%s participants%s, %.0f advances, %.0f deaths (on death: %s)%s\n",
		       n, req, bool_of(t, "running") ? "" : ", waiting for joins",
		       num_of(t, "advances"), num_of(t, "deaths"), str_of(t, "on_death"),
		       bool_of(t, "aborted") ? "  ABORTED" : "");
		if (cJSON_GetObjectItemCaseSensitive(t, "last_death"))
			printf("            last death: %s\n", str_of(t, "last_death"));
		if (cJSON_GetObjectItemCaseSensitive(t, "last_eviction"))
			printf("            last eviction: %s (%.0f stalls)\n", str_of(t, "last_eviction"),
			       num_of(t, "stalls"));
		if (cJSON_GetObjectItemCaseSensitive(t, "steps_per_s"))
			printf("            %.0f steps/s, real-time factor %.3g since it started%s%s\n",
			       num_of(t, "steps_per_s"), num_of(t, "realtime_factor"),
			       cJSON_GetObjectItemCaseSensitive(t, "last_to_grant_most") ? "; last to grant most often: " : "",
			       cJSON_GetObjectItemCaseSensitive(t, "last_to_grant_most") ? str_of(t, "last_to_grant_most") : "");
		if (cJSON_GetObjectItemCaseSensitive(t, "leader"))
			printf("            a host of leader %s (%s): heard %s%s, promised %s%s, "
			       "%.0f promises repeated, lost by it %.0f times\n", str_of(t, "leader"),
			       bool_of(t, "counted") ? "counted" : "not counted yet",
			       cJSON_GetObjectItemCaseSensitive(t, "heard_ns") ? str_of(t, "heard_ns")
									    : "nothing",
			       cJSON_GetObjectItemCaseSensitive(t, "heard_ns") ? " ns" : "",
			       str_of(t, "promised_ns"), strcmp(str_of(t, "promised_ns"), "none") ? " ns" : "",
			       num_of(t, "promise_repeats"),
			       num_of(t, "host_evictions"));
		cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(t, "hosts"))
			printf("  host %s: %.0f participants, promise %s%s, heard %.3fs ago, "
			       "round trip %.0f us, %.0f deaths\n", str_of(m, "host"),
			       num_of(m, "participants"), str_of(m, "promise_ns"),
			       strcmp(str_of(m, "promise_ns"), "none") ? " ns" : "", num_of(m, "heard_s"),
			       num_of(m, "rtt_us"), num_of(m, "deaths"));
		cJSON_ArrayForEach(m, ms) {
			printf("  %-20s pid %-7.0f grant %-18s", str_of(m, "name"), num_of(m, "pid"),
			       str_of(m, "grant"));
			if (cJSON_GetObjectItemCaseSensitive(m, "host"))
				printf(" on %s", str_of(m, "host"));
			if (cJSON_GetObjectItemCaseSensitive(m, "holding_for_s"))
				printf(" HOLDING for %.3fs", num_of(m, "holding_for_s"));
			printf("\n");
			if (cJSON_GetObjectItemCaseSensitive(m, "steps"))
				printf("    %.0f steps, %.0f grants; working p50 %.1f us p99 %.1f us (%.3fs); "
				       "waiting p50 %.1f us p99 %.1f us (%.3fs); last to grant %.0f\n",
				       num_of(m, "steps"), num_of(m, "grants"), num_of(m, "work_p50_us"),
				       num_of(m, "work_p99_us"), num_of(m, "work_s"), num_of(m, "wait_p50_us"),
				       num_of(m, "wait_p99_us"), num_of(m, "wait_s"), num_of(m, "last_to_grant"));
		}
	}
	t = cJSON_GetObjectItemCaseSensitive(st, "distribute");
	if (t && !strcmp(str_of(t, "role"), "leader")) {
		printf("leading     clock '%s' as %s: %.0f changes, Lead %.3f ms, %.0f messages\n",
		       str_of(t, "clock"), str_of(t, "leader"), num_of(t, "changes"),
		       num_of(t, "lead_ns") / 1e6, num_of(t, "sent"));
	} else if (t) {
		printf("following   clock '%s' from %s: %.0f changes (%.0f late, worst %.3f ms), "
		       "%.0f leaders, on loss %s%s\n",
		       str_of(t, "clock"), str_of(t, "leader")[0] ? str_of(t, "leader") : "(none yet)",
		       num_of(t, "changes"), num_of(t, "late_changes"), num_of(t, "worst_late_ns") / 1e6,
		       num_of(t, "leaders"), str_of(t, "on_leader_loss"),
		       bool_of(t, "awaiting_echo") ? "  STALE: until the leader echoes its lease (it does "
						     "not wait for this host yet)"
		       : bool_of(t, "stale")       ? "  STALE: the leader is silent, or lost"
						   : "");
	}
	if (t && bool_of(t, "conflict"))
		printf("CONFLICT    another live leader of clock '%s': %s (term %.0f); this %s term "
		       "%.0f%s: run one leader per clock\n",
		       str_of(t, "clock"), str_of(t, "conflict_with"), num_of(t, "conflict_term"),
		       strcmp(str_of(t, "role"), "leader") ? "host follows" : "leader has",
		       num_of(t, "term"), bool_of(t, "deposed") ? " and stopped publishing" : "");
	t = cJSON_GetObjectItemCaseSensitive(st, "control");
	if (t)
		printf("control     %.0f answered, %.0f errors, %.0f refused, %.0f dropped, %.0f clients\n",
		       num_of(t, "answered"), num_of(t, "errors"), num_of(t, "refused"),
		       num_of(t, "dropped"), num_of(t, "clients"));
}

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
	(void)sig;
	interrupted = 1;
}

/* watch: a conflict between leaders of the clock the daemon reports (its
 * status, not the segment); quiet when there is none or no daemon. */
static void watch_conflict(const char *sock, char *out, size_t len)
{
	static char buf[65536];
	cJSON *reply, *t;

	out[0] = 0;
	if (!sock[0] || control_client_request(sock, "{\"v\":1,\"cmd\":\"status\"}\n", buf,
						 sizeof(buf), 500) < 0)
		return;
	reply = cJSON_Parse(buf);
	t = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(reply, "status"),
					     "distribute");
	if (t && bool_of(t, "conflict"))
		snprintf(out, len, "  CONFLICT with leader %s (term %.0f)", str_of(t, "conflict_with"),
			 num_of(t, "conflict_term"));
	cJSON_Delete(reply);
}

static int watch(const char *name, const char *sock, int argc, char **argv)
{
	char conflict[160] = "";
	static const struct option opts[] = {
		{ "interval", required_argument, NULL, 'i' },
		{ "count", required_argument, NULL, 'c' },
		CLI_OPTION_HELP,
		{ 0 },
	};
	long interval = 100, count = -1;
	bool tty = isatty(STDOUT_FILENO);
	shmclock_t *clk;
	int c, r;

	optind = 1;
	while ((c = getopt_long(argc, argv, "i:c:h", opts, NULL)) != -1) {
		if (c == 'i')
			interval = strtol(optarg, NULL, 10);
		else if (c == 'c')
			count = strtol(optarg, NULL, 10);
		else if (c == 'h')
			return command_help("watch");
		else
			return 2;
	}
	if (interval < 1) {
		fprintf(stderr, "shmclockctl: --interval must be at least 1 ms\n");
		return 2;
	}
	r = shmclock_open(name, &clk);
	if (r)
		return cli_open_failed("shmclockctl", name, r);
	signal(SIGINT, on_sigint);
	signal(SIGTERM, on_sigint);
	for (long i = 0; !interrupted && (count < 0 || i < count); i++) {
		shmclock_info_t in;
		char t[64];
		struct timespec ts = { interval / 1000, (interval % 1000) * 1000000 };

		if (shmclock_info(clk, &in)) {
			fprintf(stderr, "shmclockctl: the writer is stuck mid-update\n");
			continue;
		}
		/* Between hosts: the daemon's word on conflicting leaders, about
		 * once a second. */
		if (i % (interval >= 1000 ? 1 : 1000 / interval) == 0)
			watch_conflict(sock, conflict, sizeof(conflict));
		printf("%s%-22s scale %-8g %-7s %-10s epoch %-4llu writer %s%s%s",
		       tty ? "\r\033[K" : "",
		       in.initialized ? duration_format(in.sim_ns, t, sizeof(t)) : "(uninitialized)",
		       in.scale, in.paused ? "PAUSED" : in.stepped ? "stepped" : "running",
		       shmclock_source_name(in.source), (unsigned long long)in.jump_epoch,
		       in.writer_alive ? (in.stale ? "alive, STALE" : "alive") : "DEAD", conflict,
		       tty ? "" : "\n");
		fflush(stdout);
		if (count < 0 || i + 1 < count)
			nanosleep(&ts, NULL);
	}
	if (tty)
		printf("\n");
	shmclock_close(clk);
	return 0;
}

/* top: the lockstep status as a table, every --interval ms; in place on a
 * terminal (cursor home, clear), frames one after another otherwise. The
 * rates are over the last interval (since the start for the first frame). */
static int top(const char *sock, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "interval", required_argument, NULL, 'i' },
		{ "count", required_argument, NULL, 'c' },
		CLI_OPTION_HELP,
		{ 0 },
	};
	static const char line[] = "{\"v\":1,\"cmd\":\"status\"}\n";
	long interval = 1000, count = -1;
	bool tty = isatty(STDOUT_FILENO);
	double prev_adv = -1, prev_sim = 0;
	int64_t prev_mono = 0;
	int c, rc = 0;
	char *end;

	optind = 1;
	while ((c = getopt_long(argc, argv, "i:c:h", opts, NULL)) != -1) {
		if (c == 'i' || c == 'c') {
			long v = strtol(optarg, &end, 10);

			if (end == optarg || *end || v < 1) {
				fprintf(stderr, "shmclockctl: top --%s takes a whole number >= 1: %s\n",
					c == 'i' ? "interval" : "count", optarg);
				return 2;
			}
			*(c == 'i' ? &interval : &count) = v;
		} else if (c == 'h') {
			return command_help("top");
		} else {
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "shmclockctl: top takes no argument '%s'\n", argv[optind]);
		return 2;
	}
	signal(SIGINT, on_sigint);
	signal(SIGTERM, on_sigint);
	for (long i = 0; !interrupted && (count < 0 || i < count); i++) {
		struct timespec ts = { interval / 1000, (interval % 1000) * 1000000 };
		cJSON *reply = request(sock, line, &rc), *st, *t, *m, *ms;
		int64_t mono = shmclock_steady_now().ns;
		double adv, sim, rate, rtf;
		char g[64];

		if (!reply)
			return rc;
		st = cJSON_GetObjectItemCaseSensitive(reply, "status");
		t = cJSON_GetObjectItemCaseSensitive(st, "lockstep");
		if (!t) {
			fprintf(stderr, "shmclockctl: top is for a lockstep clock (shmclockd --lockstep N)\n");
			cJSON_Delete(reply);
			return 1;
		}
		adv = num_of(t, "advances");
		sim = strtod(str_of(st, "sim_ns"), NULL);
		if (prev_adv >= 0 && mono > prev_mono) {
			rate = (adv - prev_adv) / ((double)(mono - prev_mono) / 1e9);
			rtf = (sim - prev_sim) / (double)(mono - prev_mono);
		} else {
			rate = num_of(t, "steps_per_s");
			rtf = num_of(t, "realtime_factor");
		}
		prev_adv = adv;
		prev_sim = sim;
		prev_mono = mono;
		ms = cJSON_GetObjectItemCaseSensitive(t, "members");
		printf("%sclock %s at %s  %.0f steps/s  real-time factor %.3g  %s%s\n", tty ? "\033[H\033[2J" : "",
		       str_of(st, "name"), str_of(st, "sim"), rate, rtf,
		       bool_of(t, "running") ? "" : "waiting for joins  ",
		       bool_of(t, "aborted") ? "ABORTED" : "");
		printf("%d participants, %.0f deaths, %.0f stalls; last to grant most often: %s\n",
		       cJSON_GetArraySize(ms), num_of(t, "deaths"), num_of(t, "stalls"),
		       cJSON_GetObjectItemCaseSensitive(t, "last_to_grant_most") ? str_of(t, "last_to_grant_most") : "-");
		printf("%-20s %7s %9s %9s %9s %9s %9s %16s %7s %10s\n", "PARTICIPANT", "PID", "STEPS",
		       "WORK p50", "p99 us", "WAIT p50", "p99 us", "GRANT", "LAST%", "HOLDING s");
		cJSON_ArrayForEach(m, ms) {
			char hold[32] = "-";

			if (cJSON_GetObjectItemCaseSensitive(m, "holding_for_s"))
				snprintf(hold, sizeof(hold), "%.3f", num_of(m, "holding_for_s"));
			if (cJSON_GetObjectItemCaseSensitive(m, "host")) {
				/* A remote participant: its figures are on its host. */
				printf("%-20.20s %7.0f %9s on host %.50s\n", str_of(m, "name"),
				       num_of(m, "pid"), "-", str_of(m, "host"));
				continue;
			}
			printf("%-20.20s %7.0f %9.0f %9.1f %9.1f %9.1f %9.1f %16s %7.1f %10s\n",
			       str_of(m, "name"), num_of(m, "pid"), num_of(m, "steps"),
			       num_of(m, "work_p50_us"), num_of(m, "work_p99_us"), num_of(m, "wait_p50_us"),
			       num_of(m, "wait_p99_us"),
			       duration_format((int64_t)strtod(str_of(m, "grant_ns"), NULL), g, sizeof(g)),
			       adv > 0 ? 100.0 * num_of(m, "last_to_grant") / adv : 0.0, hold);
		}
		if (!tty)
			printf("\n");
		fflush(stdout);
		cJSON_Delete(reply);
		if (count < 0 || i + 1 < count)
			nanosleep(&ts, NULL);
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_OPTION_NAME,
		{ "socket", required_argument, NULL, 's' },
		{ "timeout", required_argument, NULL, 't' },
		CLI_OPTION_HELP,
		{ 0 },
	};
	const char *name = cli_clock_name(NULL), *sockopt = getenv("SHMCLOCK_SOCKET");
	char sock[108], *line = NULL;
	const struct proto_cmd *pc;
	cJSON *req, *reply;
	const cJSON *ok;
	bool json = false;
	const char *cmd, *rec_file = NULL;
	int c, rc, pass = -1;

	while ((c = getopt_long(argc, argv, "+n:t:h", opts, NULL)) != -1) {
		double t;

		switch (c) {
		case 't':
			if (number_parse(optarg, &t) || !(t >= 0) || t > 86400) {
				fprintf(stderr, "shmclockctl: --timeout takes seconds from 0 (forever) to 86400, not '%s'\n",
					optarg);
				return 2;
			}
			timeout_ms = t == 0 ? -1 : t * 1000 < 1 ? 1 : (int)(t * 1000);
			break;
		case 'n':
			name = optarg;
			sockopt = NULL;
			break;
		case 's':
			sockopt = optarg;
			break;
		case 'h':
		default:
			return cli_help(usage, c);
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	if (cli_check_name("shmclockctl", name))
		return 2;
	cmd = argv[optind];
	argc -= optind;
	argv += optind;
	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		if (command_help(cmd)) {
			fprintf(stderr, "shmclockctl: unknown command '%s' (see --help)\n", cmd);
			return 2;
		}
		return 0;
	}
	if (sockopt && *sockopt)
		snprintf(sock, sizeof(sock), "%s", sockopt);
	else if (paths_default_socket(name, sock, sizeof(sock))) {
		fprintf(stderr, "shmclockctl: default socket path too long; use --socket\n");
		return 2;
	}
	if (!strcmp(cmd, "trace"))
		return ctl_trace(name, sock, argc, argv);
	if (!strcmp(cmd, "watch"))
		return watch(name, sock, argc, argv);

	if (!strcmp(cmd, "top"))
		return top(sock, argc, argv);
	/* seek T: set T (on a replay, a seek). */
	if (!strcmp(cmd, "seek"))
		cmd = "set";
	/* record start FILE, record stop: other words for record FILE and
	 * record-stop. */
	if (!strcmp(cmd, "record") && argc == 3 && !strcmp(argv[1], "start")) {
		argv[1] = argv[2];
		argc = 2;
	} else if (!strcmp(cmd, "record") && argc == 2 && !strcmp(argv[1], "stop")) {
		cmd = "record-stop";
		argc = 1;
	}
	pc = proto_find(cmd);
	if (!pc) {
		fprintf(stderr, "shmclockctl: unknown command '%s' (see --help)\n", cmd);
		return 2;
	}
	if (pc->kind == CMD_RECORD) {
		if (argc != 2) {
			fprintf(stderr, "shmclockctl: record needs exactly one FILE (see record --help)\n");
			return 2;
		}
		/* Made here, with this user's rights, and passed open: the
		 * daemon opens no path a client names. Never over a file. */
		rec_file = argv[1];
		pass = open(rec_file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (pass < 0) {
			fprintf(stderr, "shmclockctl: record: %s: %s%s\n", rec_file, strerror(errno),
				errno == EEXIST ? " (a recording is never written over a file)" : "");
			return 1;
		}
		argc = 1;
	}
	req = cJSON_CreateObject();
	cJSON_AddNumberToObject(req, "v", CONTROL_PROTOCOL);
	if (pc->nargs == 0) {
		json = argc == 2 && !strcmp(argv[1], "--json") && pc->kind == CMD_STATUS;
		if (argc > 1 + json) {
			fprintf(stderr, "shmclockctl: %s takes no argument '%s'\n", cmd, argv[1 + json]);
			cJSON_Delete(req);
			return 2;
		}
	} else if ((size_t)argc != 1 + pc->nargs) {
		static const char *const count[] = { "", "one argument", "two arguments",
						     "three arguments", "four arguments" };

		_Static_assert(sizeof(count) / sizeof(count[0]) > PROTO_ARGS_MAX, "a count in words");
		fprintf(stderr, "shmclockctl: %s needs exactly %s (see %s --help)\n", cmd,
			count[pc->nargs], cmd);
		cJSON_Delete(req);
		return 2;
	}
	/* Sent as typed, each under its key: the daemon's parser is the one
	 * authority. */
	for (size_t i = 0; i < pc->nargs; i++)
		cJSON_AddStringToObject(req, pc->args[i].key, argv[1 + i]);
	cJSON_AddStringToObject(req, "cmd", cmd);
	line = cJSON_PrintUnformatted(req);
	cJSON_Delete(req);
	if (!line)
		return 1;
	{
		size_t n = strlen(line);
		char *l = realloc(line, n + 2);

		if (!l) {
			free(line);
			return 1;
		}
		line = l;
		line[n] = '\n';
		line[n + 1] = 0;
	}
	reply = request_fd(sock, line, pass, &rc);
	free(line);
	if (pass >= 0)
		close(pass);
	/* Not recording: the file made for it goes (the daemon closed its
	 * copy, or never had it). */
	if (rec_file && (!reply || !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "ok"))))
		unlink(rec_file);
	if (!reply)
		return rc;
	ok = cJSON_GetObjectItemCaseSensitive(reply, "ok");
	if (!cJSON_IsTrue(ok)) {
		const cJSON *e = cJSON_GetObjectItemCaseSensitive(reply, "error");

		fprintf(stderr, "shmclockctl: %s: %s\n", cmd,
			cJSON_IsString(e) ? e->valuestring : "the daemon refused");
		rc = 1;
	} else if (json) {
		char *s = cJSON_PrintUnformatted(reply);

		printf("%s\n", s);
		free(s);
		rc = 0;
	} else {
		if (!strcmp(cmd, "status"))
			print_status(cJSON_GetObjectItemCaseSensitive(reply, "status"));
		rc = 0;
	}
	cJSON_Delete(reply);
	return rc;
}
