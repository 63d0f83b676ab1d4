/* SPDX-License-Identifier: MIT */
/*
 * shmclock-bench: measure shmclock against its baselines in the same run.
 * Each subcommand prints a table with the ratio to its baseline; --json
 * writes the same figures for machines; `plot` turns that JSON into a PNG.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "cli.h"

static void usage(FILE *f)
{
	fputs("usage: shmclock-bench COMMAND [options]\n"
	      "       shmclock-bench plot RESULTS.json OUT.png [read|lockstep]\n"
	      "\n"
	      "commands (each against its baseline, measured in the same run):\n"
	      "  read       cost of one read: clock_gettime, shmclock_now, the preload shim,\n"
	      "             libfaketime, an AWSIM-style mutex source; idle, on every core,\n"
	      "             and with the writer committing 1k/10k/100k changes per second\n"
	      "  scale      per-read cost with 1..32 reader processes and threads at once\n"
	      "  propagate  commit-to-reader latency vs a Unix datagram per subscriber;\n"
	      "             staleness and subscriber CPU with ticks at 100 Hz and 1 kHz\n"
	      "  sleep      wake-up lateness: shmclock_sleep_until vs clock_nanosleep\n"
	      "  daemon     shmclockd's CPU share and resident memory at 100 and 10000 Hz\n"
	      "  dds        /clock over Cyclone DDS vs shmclock: delivery latency, and subscriber\n"
	      "             CPU at 1 kHz for 1, 4, 8 subscribers (built with Cyclone DDS)\n"
	      "  hosts      follower minus leader: the time function (TimeSource leader) vs\n"
	      "             /clock at 100 Hz and 1 kHz, one scenario; messages/s at rest with 3\n"
	      "             followers; control to commit on every host; with a CPU hog.\n"
	      "             With --followers: a fleet of each size, in a network namespace of\n"
	      "             its own (root): commit, Lead, CPU and datagrams/s at rest and at\n"
	      "             10 changes/s, against the first size. With --secure: a leader\n"
	      "             and 3 followers without and with DDS Security (shmclock-pki's\n"
	      "             enclaves): control to commit, messages/s and CPU at rest\n"
	      "  flood      shmclockd's tick lateness at 10 kHz under a connection flood and\n"
	      "             slow clients vs the same CPU load without sockets\n"
	      "  panel      shmclockd's tick lateness and CPU with shmclock-panel serving 10\n"
	      "             event streams vs no panel; the panel's own CPU and memory\n"
	      "  record     shmclockd's tick lateness and CPU recording 10 000 changes a second\n"
	      "             (--record) vs not recording; bytes per change in the file\n"
	      "  waits      a waiter under the preload shim on a paused clock: wake-ups and\n"
	      "             CPU per second (poll, select, epoll, semaphore, condvar, sleep)\n"
	      "             vs the same epoll wait without the shim\n"
	      "  bypass     programs that skip libc under the shim: a read through libc,\n"
	      "             through the vDSO's symbol and as a raw system call (trapped),\n"
	      "             and a 1 us sleep through libc and raw, trap on and off, vs bare\n"
	      "  lockstep   steps/s and one step's round trip with 1, 2, 4, 8 participants:\n"
	      "             shmclockd --lockstep vs a coordinator over Unix sockets. With\n"
	      "             --hosts: 2 hosts (network namespaces, a veth pair; root), 1, 2, 4\n"
	      "             participants on each, vs a coordinator over TCP across them\n"
	      "  bindings   a read from C++ (sim_clock::now vs steady_clock::now) and Python\n"
	      "             (Clock.now vs time.monotonic_ns), each in its own process\n"
	      "  csharp     a read from C# (Clock.Now vs Stopwatch.GetTimestamp, under Mono), and\n"
	      "             AWSIM's lock-protected GetTime vs ShmclockTimeSource with a 100 Hz\n"
	      "             clock thread and 1, 4, 8 sensor threads (built with Mono)\n"
	      "  all        all of the above, one JSON document\n"
	      "  plot       read-latency CDFs of every contender on one chart, or lockstep\n"
	      "             steps/s against participants (gnuplot)\n"
	      "\n",
	      f);
	fputs("options:\n"
	      "  -q, --quick          a run of seconds, for CI (default: a few minutes in all)\n"
	      "  -j, --json FILE      also write the figures as JSON ('-': stdout, tables then\n"
	      "                       go to stderr)\n"
	      "  -s, --samples N      batches (read, scale), sleeps (sleep) or steps (lockstep)\n"
	      "                       per contender\n"
	      "  -b, --batch N        reads per timed batch (default 50)\n"
	      "  -p, --period MS      sleep: sleep length (default 2)\n"
	      "  -d, --duration S     propagate, daemon, flood, panel, record, waits, csharp:\n"
	      "                       seconds per measured run\n"
	      "  -S, --subscribers N  propagate: subscriber processes (default 4)\n"
	      "  -F, --followers LIST hosts: fleets of these sizes, e.g. 1,2,4,8,16 (1 to 32)\n"
	      "  -H, --hosts          lockstep: between two hosts (root)\n"
	      "  -X, --secure         hosts: without and with DDS Security\n"
	      "  -h, --help           this help\n",
	      f);
}

static const struct {
	const char *name;
	int (*run)(const struct bench_opts *, cJSON *);
} cmds[] = {
	{ "read", bench_read },
	{ "scale", bench_scale },
	{ "propagate", bench_propagate },
	{ "sleep", bench_sleep },
	{ "daemon", bench_daemon },
	{ "flood", bench_flood },
	{ "panel", bench_panel },
	{ "record", bench_record },
	{ "waits", bench_waits },
	{ "bypass", bench_bypass },
	{ "lockstep", bench_lockstep },
#ifdef SHMCLOCK_HAVE_BINDINGS
	{ "bindings", bench_bindings },
#endif
#ifdef SHMCLOCK_HAVE_CSHARP
	{ "csharp", bench_csharp },
#endif
#ifdef SHMCLOCK_HAVE_ROS2
	{ "dds", bench_dds },
	{ "hosts", bench_hosts },
#endif
};

static bool parse_num(const char *opt, const char *arg, double lo, double hi, double *out)
{
	char *end;
	double v = strtod(arg, &end);

	if (end == arg || *end || !(v >= lo) || v > hi) {
		fprintf(stderr, "shmclock-bench: %s takes a number in [%g, %g], not '%s'\n", opt, lo,
			hi, arg);
		return false;
	}
	*out = v;
	return true;
}

static int parse(int argc, char **argv, struct bench_opts *o)
{
	static const struct option opts[] = {
		{ "quick", no_argument, NULL, 'q' },
		{ "json", required_argument, NULL, 'j' },
		{ "samples", required_argument, NULL, 's' },
		{ "batch", required_argument, NULL, 'b' },
		{ "period", required_argument, NULL, 'p' },
		{ "duration", required_argument, NULL, 'd' },
		{ "subscribers", required_argument, NULL, 'S' },
		{ "followers", required_argument, NULL, 'F' },
		{ "hosts", no_argument, NULL, 'H' },
		{ "secure", no_argument, NULL, 'X' },
		CLI_OPTION_HELP,
		{ 0 },
	};
	double v;
	int c;

	while ((c = getopt_long(argc, argv, "qj:s:b:p:d:S:F:HXh", opts, NULL)) != -1) {
		switch (c) {
		case 'q':
			o->quick = true;
			break;
		case 'j':
			o->json = optarg;
			break;
		case 's':
			if (!parse_num("--samples", optarg, 10, 1e8, &v))
				return 2;
			o->samples = (long)v;
			break;
		case 'b':
			if (!parse_num("--batch", optarg, 1, 1e6, &v))
				return 2;
			o->batch = (int)v;
			break;
		case 'p':
			if (!parse_num("--period", optarg, 0.001, 1000, &o->period_ms))
				return 2;
			break;
		case 'd':
			if (!parse_num("--duration", optarg, 0.1, 3600, &o->duration_s))
				return 2;
			break;
		case 'S':
			if (!parse_num("--subscribers", optarg, 1, 64, &v))
				return 2;
			o->subscribers = (int)v;
			break;
		case 'F':
			o->followers = optarg;
			break;
		case 'H':
			o->hosts = true;
			break;
		case 'X':
			o->secure = true;
			break;
		case 'h':
		default:
			return cli_help(usage, c);
		}
	}
	if (cli_no_args("shmclock-bench", argc, argv, optind))
		return 2;
	return -1;
}

int main(int argc, char **argv)
{
	struct bench_opts o = { 0 };
	cJSON *doc, *benches = NULL;
	FILE *jf = NULL;
	int r, first = -1, last = -1;

	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	/* Internal: the waiter bench_waits runs under the shim. */
	if (!strcmp(argv[1], "__waits-child") && argc == 3)
		return bench_waits_child(argv[2]);
	/* Internal: bench_bypass's figures under the shim. */
	if (!strcmp(argv[1], "__bypass-child") && argc == 3)
		return bench_bypass_child(argv[2]);
	if (!strcmp(argv[1], "plot")) {
		if (argc < 4 || argc > 5 ||
		    (argc == 5 && strcmp(argv[4], "read") && strcmp(argv[4], "lockstep"))) {
			fprintf(stderr, "usage: shmclock-bench plot RESULTS.json OUT.png [read|lockstep]\n");
			return 2;
		}
		return bench_plot(argv[2], argv[3], argc == 5 ? argv[4] : "read");
	}
	for (int i = 0; i < (int)(sizeof(cmds) / sizeof(cmds[0])); i++)
		if (!strcmp(argv[1], cmds[i].name))
			first = last = i;
	if (!strcmp(argv[1], "all")) {
		first = 0;
		last = (int)(sizeof(cmds) / sizeof(cmds[0])) - 1;
	}
	if (first < 0) {
		fprintf(stderr, "shmclock-bench: unknown command '%s' (try --help)\n", argv[1]);
		return 2;
	}
	r = parse(argc - 1, argv + 1, &o);
	if (r >= 0)
		return r;

	if (o.json) {
		if (!strcmp(o.json, "-")) {
			/* JSON owns stdout; the tables move to stderr. */
			int fd = dup(1);

			jf = fd >= 0 ? fdopen(fd, "w") : NULL;
			if (jf)
				dup2(2, 1);
		} else {
			jf = fopen(o.json, "w");
		}
		if (!jf) {
			fprintf(stderr, "shmclock-bench: %s: %s\n", o.json, strerror(errno));
			return 1;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	doc = cJSON_CreateObject();
	cJSON_AddItemToObject(doc, "machine", bench_machine());
	cJSON_AddBoolToObject(doc, "quick", o.quick);
	if (first != last)
		benches = cJSON_AddArrayToObject(doc, "benches");
	r = 0;
	for (int i = first; i <= last && r == 0; i++) {
		cJSON *b = benches ? cJSON_CreateObject() : doc;

		cJSON_AddStringToObject(b, "bench", cmds[i].name);
		if (benches) {
			cJSON_AddItemToArray(benches, b);
			printf("\n");
		}
		r = cmds[i].run(&o, b);
	}
	if (jf) {
		char *s = cJSON_Print(doc);

		if (!s || fputs(s, jf) < 0 || fputc('\n', jf) < 0 || fclose(jf)) {
			fprintf(stderr, "shmclock-bench: writing %s failed\n", o.json);
			r = r ? r : 1;
		}
		free(s);
	}
	cJSON_Delete(doc);
	return r;
}
