/* SPDX-License-Identifier: MIT */
/* shmclock-cat: print a clock's simulation time, once or continuously. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <shmclock/time.h>

#include "cli.h"
#ifdef SHMCLOCK_HAVE_TIMELINE
#include "timeline.h"
#endif

enum fmt { FMT_NS, FMT_S, FMT_ISO };

static void usage(FILE *f)
{
	fputs("usage: shmclock-cat [-n NAME] [--follow HZ] [--count N] [--format ns|s|iso]\n"
	      "                    [--fallback-system]\n"
	      "       shmclock-cat --mcap FILE [--json] [--until TIME]\n"
	      "\n"
	      "Print the simulation time of clock NAME (default: $SHMCLOCK_NAME, else default).\n"
	      "\n"
	      "  -n, --name NAME      clock name\n"
	      "  -f, --follow HZ      print HZ times per real second until interrupted\n"
	      "      --count N        with --follow: stop after N lines\n"
	      "      --format F       ns (default), s (seconds, 9 decimals), or iso\n"
	      "                       (simulated-world UTC date: needs UnixTimeAtZero,\n"
	      "                       or a system-source clock)\n"
	      "      --fallback-system  read system time if the clock does not exist\n"
	      "      --mcap FILE      print the timeline of a recording (shmclockd's Record):\n"
	      "                       each change of the time function and its cause, and\n"
	      "                       lockstep's events, in order\n"
	      "      --json           with --mcap: one JSON object a line, as recorded\n"
	      "      --until TIME     with --mcap: only what happened up to simulated TIME\n"
	      "  -h, --help           this help\n"
	      "\n"
	      "Exit status: 0 printed, 1 clock error (or a file that is no recording),\n"
	      "2 bad arguments. A recording cut short (a crash) prints what is whole\n"
	      "and says where it stops.\n",
	      f);
}

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int print_one(shmclock_t *clk, enum fmt fmt)
{
	static int warned;
	shmclock_sim_time_t t;
	char buf[64];
	int r = shmclock_sim_now(clk, &t);

	if (r == -ESTALE && !warned) {
		fprintf(stderr, "shmclock-cat: warning: %s\n", shmclock_strerror(r));
		warned = 1;
	} else if (r && r != -ESTALE) {
		fprintf(stderr, "shmclock-cat: %s: %s\n", shmclock_name(clk), shmclock_strerror(r));
		return 1;
	}
	switch (fmt) {
	case FMT_NS:
		printf("%lld\n", (long long)t.ns);
		break;
	case FMT_S:
		printf("%s\n", duration_format(t.ns, buf, sizeof(buf)));
		break;
	case FMT_ISO: {
		shmclock_sys_time_t u;

		r = shmclock_sim_to_sys(clk, t, &u);
		if (r) {
			fprintf(stderr, "shmclock-cat: %s: no UNIX time of simulation zero "
				"(set UnixTimeAtZero, or use --format s)\n", shmclock_name(clk));
			return 1;
		}
		printf("%s\n", time_format_iso(u.ns, buf, sizeof(buf)));
		break;
	}
	}
	fflush(stdout);
	return 0;
}

#ifdef SHMCLOCK_HAVE_TIMELINE
/* @s in place with its control characters as '?': a file's strings (a
 * participant's name, a command's argument) never drive the terminal. */
static char *printable(char *s)
{
	for (char *p = s; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	return s;
}

/* The timeline of recording @path: changes and events in the order they
 * happened (wall-clock time), up to simulated @until. */
static int print_mcap(const char *path, bool json, int64_t until)
{
	struct tl_recording rec;
	char err[256], when[48], sim[48], what[96], why[160], line[1024];
	size_t i = 0, j = 0, k = 0;

	if (tl_load(path, &rec, err, sizeof(err))) {
		fprintf(stderr, "shmclock-cat: %s\n", err);
		return 1;
	}
	if (!json)
		printf("clock '%s': %zu changes, %zu lockstep events, %zu hosts events\n"
		       "%-20s %-24s %-28s %s\n",
		       printable(rec.clock), rec.nchanges, rec.nevents, rec.nhosts, "SIM TIME",
		       "WALL (UTC)", "FUNCTION", "CAUSE");
	while (i < rec.nchanges || j < rec.nevents || k < rec.nhosts) {
		/* The three in the order they happened (wall-clock time),
		 * each taken only while it has entries left: a file's times
		 * may be anything. */
		bool hc = i < rec.nchanges, he = j < rec.nevents, hh = k < rec.nhosts;
		int64_t wc = hc ? rec.changes[i].wall_ns : 0;
		int64_t we = he ? rec.events[j].wall_ns : 0;
		int64_t wh = hh ? rec.hosts[k].wall_ns : 0;
		bool ev = he && (!hc || we < wc) && (!hh || we <= wh);

		if (hh && (!hc || wh < wc) && (!he || wh < we)) {
			struct tl_hosts *h = &rec.hosts[k++];

			if (h->sim_ns > until)
				continue;
			if (json) {
				tl_hosts_json(h, line, sizeof(line));
				printf("{\"hosts\":%s}\n", line);
				continue;
			}
			printf("%-20s %-24s hosts %s %s%s%s%s\n", duration_format(h->sim_ns, sim, sizeof(sim)),
			       time_format_iso(h->wall_ns, when, sizeof(when)), printable(h->event),
			       printable(h->host), h->term ? " term " : "",
			       h->term ? (snprintf(what, sizeof(what), "%llu",
						   (unsigned long long)h->term), what) : "",
			       h->detail[0] ? (snprintf(why, sizeof(why), " (%s)", printable(h->detail)), why)
					    : "");
			continue;
		}
		if (ev) {
			struct tl_lockstep *e = &rec.events[j++];

			if (e->sim_ns > until)
				continue;
			if (json) {
				tl_lockstep_json(e, line, sizeof(line));
				printf("{\"lockstep\":%s}\n", line);
				continue;
			}
			printf("%-20s %-24s lockstep %s %s (pid %lld)\n",
			       duration_format(e->sim_ns, sim, sizeof(sim)),
			       time_format_iso(e->wall_ns, when, sizeof(when)), printable(e->event),
			       printable(e->who),
			       (long long)e->pid);
			continue;
		}
		{
			const struct tl_change *c = &rec.changes[i];

			i++;
			if (c->sim_base > until)
				continue;
			if (json) {
				tl_change_json(c, line, sizeof(line));
				printf("{\"function\":%s}\n", line);
				continue;
			}
			tl_describe(i > 1 ? c - 1 : NULL, c, what, sizeof(what));
			tl_cause_text(&c->cause, why, sizeof(why));
			printable(why);
			printf("%-20s %-24s %-28s %s\n", duration_format(c->sim_base, sim, sizeof(sim)),
			       time_format_iso(c->wall_ns, when, sizeof(when)), what, why);
		}
	}
	fflush(stdout);
	if (rec.truncated)
		fprintf(stderr, "shmclock-cat: %s is cut short: %s\n", path, rec.note);
	tl_free(&rec);
	return 0;
}
#endif

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_OPTION_NAME,
		{ "follow", required_argument, NULL, 'f' },
		{ "count", required_argument, NULL, 'c' },
		{ "format", required_argument, NULL, 'F' },
		{ "fallback-system", no_argument, NULL, 'S' },
		{ "mcap", required_argument, NULL, 'M' },
		{ "json", no_argument, NULL, 'J' },
		{ "until", required_argument, NULL, 'U' },
		CLI_OPTION_HELP,
		{ 0 }
	};
	const char *name = NULL;
	double hz = 0;
	long count = -1;
	enum fmt fmt = FMT_NS;
	unsigned flags = 0;
	const char *mcap = NULL;
	bool json = false;
	int64_t until = INT64_MAX;
	shmclock_t *clk;
	int c, r;

	while ((c = getopt_long(argc, argv, "n:f:h", opts, NULL)) != -1) {
		switch (c) {
		case 'n':
			name = optarg;
			break;
		case 'f':
			if (!cli_positive("shmclock-cat", "--follow", optarg, 100000, &hz))
				return 2;
			break;
		case 'c':
			if (!cli_count("shmclock-cat", "--count", optarg, &count))
				return 2;
			break;
		case 'F':
			if (!strcmp(optarg, "ns"))
				fmt = FMT_NS;
			else if (!strcmp(optarg, "s"))
				fmt = FMT_S;
			else if (!strcmp(optarg, "iso"))
				fmt = FMT_ISO;
			else {
				fprintf(stderr, "shmclock-cat: --format is ns, s or iso, not '%s'\n", optarg);
				return 2;
			}
			break;
		case 'S':
			flags |= SHMCLOCK_OPEN_FALLBACK_SYSTEM;
			break;
		case 'M':
			mcap = optarg;
			break;
		case 'J':
			json = true;
			break;
		case 'U': {
			char why[160];

			if (duration_parse(optarg, &until, why, sizeof(why))) {
				fprintf(stderr, "shmclock-cat: --until: %s\n", why);
				return 2;
			}
			break;
		}
		case 'h':
		default:
			return cli_help(usage, c);
		}
	}
	if (cli_no_args("shmclock-cat", argc, argv, optind))
		return 2;
	if (!mcap && (json || until != INT64_MAX)) {
		fprintf(stderr, "shmclock-cat: --json and --until go with --mcap FILE\n");
		return 2;
	}
	if (mcap) {
#ifdef SHMCLOCK_HAVE_TIMELINE
		return print_mcap(mcap, json, until);
#else
		fprintf(stderr, "shmclock-cat: --mcap: this build has no cJSON, so no recordings\n");
		return 2;
#endif
	}
	name = cli_clock_name(name);
	r = shmclock_open_ex(name, flags, &clk);
	if (r)
		return cli_open_failed("shmclock-cat", name, r);
	if (hz == 0) {
		r = print_one(clk, fmt);
	} else {
		/* Real-time pacing on absolute deadlines: the rate does not drift. */
		int64_t period = (int64_t)(1e9 / hz);
		struct timespec next;

		signal(SIGINT, on_signal);
		signal(SIGTERM, on_signal);
		signal(SIGPIPE, on_signal);
		clock_gettime(CLOCK_MONOTONIC, &next);
		r = 0;
		for (long n = 0; !stop && (count < 0 || n < count); n++) {
			r = print_one(clk, fmt);
			if (r)
				break;
			next.tv_nsec += period % 1000000000;
			next.tv_sec += period / 1000000000 + next.tv_nsec / 1000000000;
			next.tv_nsec %= 1000000000;
			if (count < 0 || n + 1 < count)
				clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
		}
	}
	shmclock_close(clk);
	return r;
}
