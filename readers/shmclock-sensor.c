/* SPDX-License-Identifier: MIT */
/*
 * shmclock-sensor: an example sensor model. It produces frames at a
 * simulated rate and stamps each, as OSI SensorData does, with its
 * measurement time and its publish time (measurement + modelled latency),
 * sleeping in simulated time. Frames are pipelined, as a real sensor's
 * are: a latency longer than the period delays each frame's publication,
 * not the next measurement. It keeps working through pause (it waits),
 * scale changes (its frames come faster or slower in real time) and jumps
 * (a jump restarts its schedule; the frames in flight are dropped).
 *
 * With --lockstep it is a lockstep participant instead: the clock waits
 * for each of its measurements and publications (it grants the next one
 * when it is done with the current), so it never misses a frame, however
 * slow it is or however fast the clock may run.
 *
 * Output, one line per event:
 *   frame N measured NS published NS missed M [unix ISO]
 *   jump DELTA_NS epoch E
 *   drop N (clock jumped while processing)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <shmclock/lockstep.h>
#include <shmclock/time.h>

#include "cli.h"

static shmclock_t *clk;
static shmclock_cancel_t cancel_tok = SHMCLOCK_CANCEL_INIT;
static _Atomic bool jumped; /* set by the post-jump callback */
static volatile sig_atomic_t stopping; /* --lockstep: SIGINT/SIGTERM */

/* Frames measured and not yet published: a ring, oldest at head. */
#define INFLIGHT 4096
static struct frame {
	int64_t measured;
	uint64_t missed;
} inflight[INFLIGHT];

static void usage(FILE *f)
{
	fputs("usage: shmclock-sensor [-n NAME] [--rate HZ] [--latency DURATION] [--frames N]\n"
	      "                       [--lockstep[=WHO]]\n"
	      "\n"
	      "A sensor model in simulated time: a frame every 1/HZ simulated seconds\n"
	      "(default 10 Hz), published LATENCY later (default 20ms), N frames (default:\n"
	      "until SIGINT/SIGTERM). Prints one line per frame, jump and dropped frame.\n"
	      "\n"
	      "  -n, --name NAME         clock name (default: $SHMCLOCK_NAME, else default)\n"
	      "  -r, --rate HZ           frames per simulated second\n"
	      "  -l, --latency DURATION  modelled processing latency (simulated)\n"
	      "  -N, --frames N          stop after N frames\n"
	      "  -L, --lockstep[=WHO]    join the clock's lockstep as WHO (default\n"
	      "                          shmclock-sensor-PID): the clock waits for every\n"
	      "                          measurement and publication (shmclockd --lockstep)\n"
	      "  -h, --help              this help\n",
	      f);
}

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
	/* An atomic store and a futex wake: async-signal-safe. */
	shmclock_cancel(clk, &cancel_tok);
}

static void on_jump(const shmclock_jump_t *j, bool before, void *user)
{
	(void)user;
	if (!before) {
		printf("jump %" PRId64 " epoch %" PRIu64 "\n", j->delta_ns, j->jump_epoch);
		atomic_store(&jumped, true);
	}
}

/*
 * --lockstep: the same frames, as a participant. Each event (a measurement
 * every period, a publication LATENCY after each) is a due time: grant it,
 * wait for the clock to reach it, do it. Returns the exit status.
 */
static int run_lockstep(const char *name, const char *who, int64_t period, int64_t latency,
			long frames)
{
	shmclock_lockstep_t *p;
	int64_t next_measure;
	long head = 0, tail = 0;
	int r;

	r = shmclock_lockstep_join(name, who, &p);
	if (r) {
		fprintf(stderr, "shmclock-sensor: lockstep of clock '%s': %s\n", name,
			shmclock_lockstep_strerror(NULL, r));
		return 1;
	}
	next_measure = (shmclock_lockstep_joined_at(p) / period + 1) * period;
	while ((frames < 0 || head < frames) && !stopping) {
		bool measure = (frames < 0 || tail < frames) && tail - head < INFLIGHT;
		int64_t publish = head < tail ? inflight[head % INFLIGHT].measured + latency : INT64_MAX;
		int64_t due = measure && next_measure < publish ? next_measure : publish;

		/* In slices, so that SIGINT/SIGTERM can end the wait; granting
		 * the same time again changes nothing. */
		while ((r = shmclock_lockstep_advance(p, due, shmclock_msec(200))) == -ETIMEDOUT &&
		       !stopping)
			;
		if (r)
			break;
		if (due == publish) {
			printf("frame %ld measured %" PRId64 " published %" PRId64 " missed 0\n", head,
			       inflight[head % INFLIGHT].measured, publish);
			head++;
		}
		if (measure && due == next_measure) {
			inflight[tail++ % INFLIGHT] = (struct frame){ next_measure, 0 };
			next_measure += period;
		}
	}
	if (r && r != -ETIMEDOUT)
		fprintf(stderr, "shmclock-sensor: lockstep: %s\n", shmclock_lockstep_strerror(p, r));
	shmclock_lockstep_leave(p);
	return r && r != -ETIMEDOUT ? 1 : 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_OPTION_NAME,
		{ "rate", required_argument, NULL, 'r' },
		{ "latency", required_argument, NULL, 'l' },
		{ "frames", required_argument, NULL, 'N' },
		{ "lockstep", optional_argument, NULL, 'L' },
		CLI_OPTION_HELP,
		{ 0 }
	};
	const char *name = NULL, *who = NULL;
	bool lockstep = false;
	char who_buf[40];
	double hz = 10;
	long frames = -1;
	int64_t latency = 20000000;
	shmclock_jump_threshold_t th = { .min_forward_ns = 1, .min_backward_ns = 1 };
	shmclock_rate_t rate;
	char why[200];
	int c, r;

	while ((c = getopt_long(argc, argv, "n:r:l:N:h", opts, NULL)) != -1) {
		switch (c) {
		case 'n':
			name = optarg;
			break;
		case 'r':
			if (!cli_positive("shmclock-sensor", "--rate", optarg, 1e6, &hz))
				return 2;
			/* The period must fit in int64_t ns (rates below ~1.1e-10 Hz). */
			if (1e9 / hz >= 9.2e18) {
				fprintf(stderr, "shmclock-sensor: --rate %s is too low (at least 1e-9 Hz)\n",
					optarg);
				return 2;
			}
			break;
		case 'l':
			if (!cli_duration("shmclock-sensor", "--latency", optarg, &latency))
				return 2;
			break;
		case 'N':
			if (!cli_count("shmclock-sensor", "--frames", optarg, &frames))
				return 2;
			break;
		case 'L':
			lockstep = true;
			who = optarg;
			break;
		case 'h':
		default:
			return cli_help(usage, c);
		}
	}
	if (cli_no_args("shmclock-sensor", argc, argv, optind))
		return 2;
	name = cli_clock_name(name);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (lockstep) {
		if (!who) {
			snprintf(who_buf, sizeof(who_buf), "shmclock-sensor-%d", (int)getpid());
			who = who_buf;
		}
		signal(SIGINT, on_signal);
		signal(SIGTERM, on_signal);
		return run_lockstep(name, who, (int64_t)(1e9 / hz), latency, frames);
	}
	r = shmclock_open_wait(name, 0, shmclock_sec(10), &clk);
	if (r)
		return cli_open_failed("shmclock-sensor", name, r);
	shmclock_jump_callback_add(clk, th, on_jump, NULL, NULL);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	r = shmclock_rate_init(&rate, clk, shmclock_nsec((int64_t)(1e9 / hz)));
	if (r) {
		fprintf(stderr, "shmclock-sensor: --rate %g: %s\n", hz, shmclock_strerror(r));
		shmclock_close(clk);
		return 2;
	}
	rate.cancel = &cancel_tok;

	/*
	 * Two kinds of event, in simulated-time order: the next measurement
	 * (a rate boundary) and the publication of the oldest frame in flight
	 * (its measurement + LATENCY). head..tail are frame numbers.
	 */
	for (long head = 0, tail = 0; frames < 0 || head < frames;) {
		bool measure_done = frames >= 0 && tail >= frames;

		if (atomic_exchange(&jumped, false)) {
			/* Frames measured on the other side of a jump mean nothing. */
			for (; head < tail; head++)
				printf("drop %ld (clock jumped while processing)\n", head);
			continue;
		}
		if (head < tail &&
		    (measure_done || tail - head == INFLIGHT ||
		     rate.next_ns >= inflight[head % INFLIGHT].measured + latency)) {
			const struct frame *f = &inflight[head % INFLIGHT];
			shmclock_sim_time_t published = { f->measured + latency };
			shmclock_sys_time_t unix_time;
			char iso[64] = "";

			r = shmclock_sleep_until_ex(clk, published, SHMCLOCK_SLEEP_JUMP_ERROR,
						    SHMCLOCK_DURATION_INFINITE, &cancel_tok);
			if (r == -EINTR)
				continue; /* the jump callback has set `jumped` */
			if (r)
				break;
			if (!shmclock_sim_to_sys(clk, (shmclock_sim_time_t){ f->measured }, &unix_time))
				snprintf(iso, sizeof(iso), " unix %s",
					 time_format_iso(unix_time.ns, why, sizeof(why)));
			printf("frame %ld measured %" PRId64 " published %" PRId64 " missed %" PRIu64 "%s\n",
			       head, f->measured, published.ns, f->missed, iso);
			head++;
			continue;
		}
		{
			shmclock_sim_time_t measured;
			uint64_t missed;

			r = shmclock_rate_sleep(&rate, &missed);
			if (r)
				break;
			shmclock_sim_now(clk, &measured);
			inflight[tail % INFLIGHT] = (struct frame){ measured.ns, missed };
			tail++;
		}
	}
	shmclock_close(clk);
	return r == -ECANCELED || r == 0 ? 0 : 1;
}
