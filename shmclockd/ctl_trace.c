/* SPDX-License-Identifier: MIT */
/*
 * shmclockctl trace: every lockstep step as Chrome trace-event JSON
 * (Perfetto, chrome://tracing). A participant's life is working (from a
 * return from advance to its next grant) and waiting (from the grant to
 * the return); it writes both instants and their sums in its own slot.
 * We sample those every TRACE_SAMPLE_NS, read-only: nothing is added to a
 * participant's or the daemon's path.
 *
 * Between two samples a participant may have made several steps. The sums
 * say exactly how long it worked and waited in all; when it made one step
 * (the usual case) that is each slice's exact length, and when it made
 * more, the slices are the interval's sums shared equally among its steps
 * (marked "estimated"). Either way the slices alternate and their lengths
 * add up to the real time observed.
 *
 * Participants on other hosts (lockstep between hosts) are not in this
 * host's segment: the daemon's status names them (members with a "host",
 * from the leader's roster) and whether each holds the clock. We ask for
 * it every TRACE_REMOTE_NS and draw each as a track of "holding" and "not
 * holding" slices, estimated (to the request's period and the roster's).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include <shmclock/lockstep.h>
#include <shmclock/shmclock.h>
#include <shmclock/time.h>

#include "control_client.h"
#include "ctl_trace.h"
#include "duration.h"

#define TRACE_SAMPLE_NS 500000LL   /* 0.5 ms */
#define TRACE_RTF_NS 100000000LL   /* a real-time factor point every 100 ms */
#define TRACE_REMOTE_NS 50000000LL /* the daemon's status every 50 ms */
#define TRACE_REMOTE_MAX 64        /* remote participants drawn (SHMCLOCK_LOCKSTEP_SLOTS per host) */

/* A participant on another host, from the daemon's status. */
struct remote {
	char key[200];      /* NAME@HOST */
	int tid;
	bool holding;
	int64_t since;      /* its current slice began (trace time, ns) */
	bool seen;          /* in the last status */
	bool gone;          /* left (its track ended), until it is back */
};

struct track {
	bool used;
	uint32_t incarnation;
	int tid;
	bool working;       /* its current slice */
	int64_t cursor;     /* where its current slice began (trace time, ns) */
	int64_t end;        /* where its last written slice ended */
	struct shmclock_lockstep_sample last;
};

struct trace {
	FILE *f;
	int64_t t0;         /* CLOCK_MONOTONIC of the trace's start */
	bool first;
	int next_tid;
	uint64_t slices, estimated, advances;
};

static void event(struct trace *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void event(struct trace *t, const char *fmt, ...)
{
	va_list ap;

	fputs(t->first ? "\n" : ",\n", t->f);
	t->first = false;
	va_start(ap, fmt);
	vfprintf(t->f, fmt, ap);
	va_end(ap);
}

/* @s as a JSON string's contents (names are checked UTF-8 without control
 * characters; quotes and backslashes remain). */
static const char *json_str(const char *s, char *buf, size_t len)
{
	size_t n = 0;

	for (; *s && n + 3 < len; s++) {
		if (*s == '"' || *s == '\\')
			buf[n++] = '\\';
		buf[n++] = *s;
	}
	buf[n] = 0;
	return buf;
}

/* A slice of @k; @steps > 1: an estimate (marked). One of length 0 is
 * written too: the kinds must alternate in the file, and a slice clipped to
 * nothing between its neighbours is still one of the participant's. */
static void slice(struct trace *t, struct track *k, bool working, int64_t start, int64_t dur,
		  uint64_t steps)
{
	if (dur < 0)
		dur = 0;
	event(t, "{\"name\":\"%s\",\"cat\":\"lockstep\",\"ph\":\"X\",\"pid\":1,\"tid\":%d,"
		 "\"ts\":%.3f,\"dur\":%.3f%s}",
	      working ? "working" : "waiting", k->tid, start / 1e3, dur / 1e3,
	      steps > 1 ? ",\"args\":{\"estimated\":true}" : "");
	t->slices++;
	t->estimated += steps > 1;
}

/* What @k did between its last sample and @s. */
static void advance_track(struct trace *t, struct track *k, const struct shmclock_lockstep_sample *s)
{
	uint64_t g = s->grants - k->last.grants, r = s->steps - k->last.steps;
	int64_t dw = s->work_ns - k->last.work_ns, dv = s->wait_ns - k->last.wait_ns;
	uint64_t n = g + r;
	bool w = k->working;
	int64_t at = k->cursor;

	/* Completed slices alternate from the current kind: g working ones
	 * (each ends at a grant) and r waiting ones (each at a return). */
	for (uint64_t i = 0; i < n; i++) {
		int64_t d = w ? dw / (int64_t)(g ? g : 1) : dv / (int64_t)(r ? r : 1);

		/* Never before the track's last slice ended (the participant's
		 * own stamp may be a little earlier than the sums reach), and
		 * clipped at the trace's start: slices stay in order. */
		bool clipped = false;

		if (at < k->end) {
			d -= k->end - at;
			at = k->end;
			clipped = true;
		}
		if (at < 0) {
			d += at;
			at = 0;
			clipped = true;
		}
		if (d < 0)
			d = 0;
		/* A clipped slice is an estimate too (marked). */
		slice(t, k, w, at, d, clipped && (w ? g : r) < 2 ? 2 : (w ? g : r));
		at += d;
		k->end = at;
		w = !w;
	}
	/* The kind the slices above end in: they alternate by construction,
	 * whatever moment of a step the sample's fields were read at. */
	k->working = w;
	/* The instant the current slice began, as the participant wrote it. */
	if (n) {
		k->cursor = (k->working ? s->returned_mono : s->granted_mono) - t->t0;
		if (k->cursor < k->end)
			k->cursor = k->end;
	}
	k->last = *s;
}

static void remote_slice(struct trace *t, const struct remote *m, int64_t end)
{
	event(t, "{\"name\":\"%s\",\"cat\":\"lockstep\",\"ph\":\"X\",\"pid\":1,\"tid\":%d,"
		 "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"estimated\":true,\"remote\":true}}",
	      m->holding ? "holding" : "not holding", m->tid, m->since / 1e3,
	      (end > m->since ? end - m->since : 0) / 1e3);
	t->slices++;
	t->estimated++;
}

/* The daemon's status at @sock: each member with a host (another host's
 * participant) into @rs, a track for each new one, a slice for each that
 * changed between holding and not. */
static void sample_remote(struct trace *t, const char *sock, struct remote *rs, int *nrs, int64_t now)
{
	static char buf[1 << 17];
	cJSON *reply, *members, *m;
	char key[200], who[400];

	if (!sock[0] || control_client_request(sock, "{\"v\":1,\"cmd\":\"status\"}\n", buf,
						 sizeof(buf), 200) < 0)
		return;
	reply = cJSON_Parse(buf);
	members = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(reply, "status"),
						 "lockstep"),
		"members");
	for (int i = 0; i < *nrs; i++)
		rs[i].seen = false;
	cJSON_ArrayForEach(m, members) {
		const cJSON *host = cJSON_GetObjectItemCaseSensitive(m, "host"),
			    *name = cJSON_GetObjectItemCaseSensitive(m, "name");
		bool holding = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "holding"));
		int i;

		if (!cJSON_IsString(host) || !cJSON_IsString(name))
			continue;
		snprintf(key, sizeof(key), "%s@%s", name->valuestring, host->valuestring);
		for (i = 0; i < *nrs && strcmp(rs[i].key, key); i++)
			;
		if (i == *nrs) {
			if (*nrs == TRACE_REMOTE_MAX)
				continue;
			memset(&rs[i], 0, sizeof(rs[i]));
			snprintf(rs[i].key, sizeof(rs[i].key), "%s", key);
			rs[i].tid = t->next_tid++;
			rs[i].holding = holding;
			rs[i].since = now - t->t0;
			(*nrs)++;
			snprintf(who, sizeof(who), "%s on %s", name->valuestring, host->valuestring);
			event(t, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,"
				 "\"args\":{\"name\":\"%s (remote, sampled)\"}}",
			      rs[i].tid, json_str(who, buf, sizeof(buf)));
		} else if (rs[i].gone || rs[i].holding != holding) {
			if (!rs[i].gone)
				remote_slice(t, &rs[i], now - t->t0);
			rs[i].gone = false;
			rs[i].holding = holding;
			rs[i].since = now - t->t0;
		}
		rs[i].seen = true;
	}
	/* Gone from the roster (left, evicted, its host lost): its track ends. */
	for (int i = 0; i < *nrs; i++)
		if (!rs[i].seen && !rs[i].gone) {
			remote_slice(t, &rs[i], now - t->t0);
			rs[i].gone = true;
		}
	cJSON_Delete(reply);
}

static volatile sig_atomic_t interrupted;

static void on_sig(int sig)
{
	(void)sig;
	interrupted = 1;
}

int ctl_trace(const char *name, const char *sock, int argc, char **argv)
{
	static struct remote remotes[TRACE_REMOTE_MAX];
	int nremote = 0;
	int64_t next_remote;
	static const struct option opts[] = {
		{ "seconds", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct shmclock_lockstep_sample cur[SHMCLOCK_LOCKSTEP_SLOTS];
	struct track tracks[SHMCLOCK_LOCKSTEP_SLOTS] = { 0 };
	shmclock_lockstep_observer_t *o;
	struct trace t = { .first = true, .next_tid = 1 };
	double seconds = -1;
	int64_t end, last_sim = INT64_MIN, rtf_mono, rtf_sim = 0, now;
	char who[200];
	const char *path;
	int c, r;

	optind = 1;
	while ((c = getopt_long(argc, argv, "s:h", opts, NULL)) != -1) {
		if (c == 's') {
			if (number_parse(optarg, &seconds) || !(seconds > 0) || seconds > 86400) {
				fprintf(stderr, "shmclockctl: trace --seconds takes seconds from 0 to 86400, not '%s'\n",
					optarg);
				return 2;
			}
		} else if (c == 'h') {
			printf("usage: shmclockctl [-n NAME] trace " TRACE_ARGS "\n  " TRACE_HELP "\n");
			return 0;
		} else {
			return 2;
		}
	}
	if (seconds < 0 || optind + 1 != argc) {
		fprintf(stderr, "shmclockctl: usage: trace --seconds S FILE (FILE - for standard output)\n");
		return 2;
	}
	path = argv[optind];
	r = shmclock_lockstep_observe(name, &o);
	if (r) {
		fprintf(stderr, "shmclockctl: trace: clock '%s': %s\n", name,
			r == -EOPNOTSUPP ? "not a lockstep clock (shmclockd --lockstep N)"
					 : shmclock_lockstep_strerror(NULL, r));
		return 1;
	}
	t.f = strcmp(path, "-") ? fopen(path, "w") : stdout;
	if (!t.f) {
		fprintf(stderr, "shmclockctl: trace: %s: %s\n", path, strerror(errno));
		shmclock_lockstep_observe_close(o);
		return 1;
	}
	signal(SIGINT, on_sig);
	signal(SIGTERM, on_sig);
	fprintf(t.f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[");
	event(&t, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":\"clock %s\"}}", name);
	event(&t, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"clock advances\"}}");
	t.t0 = shmclock_steady_now().ns;
	end = t.t0 + (int64_t)(seconds * 1e9);
	rtf_mono = t.t0;
	next_remote = t.t0;
	for (;;) {
		struct timespec ts = { 0, TRACE_SAMPLE_NS };
		unsigned n = shmclock_lockstep_observe_sample(o, cur, SHMCLOCK_LOCKSTEP_SLOTS);
		int64_t sim;

		now = shmclock_steady_now().ns;
		r = shmclock_now(shmclock_lockstep_observe_clock(o), &sim);
		if (r == 0 || r == -ESTALE) {
			if (last_sim != INT64_MIN && sim != last_sim) {
				event(&t, "{\"name\":\"advance\",\"cat\":\"clock\",\"ph\":\"i\",\"s\":\"t\",\"pid\":1,"
					  "\"tid\":0,\"ts\":%.3f,\"args\":{\"sim_ns\":%" PRId64 "}}",
				      (now - t.t0) / 1e3, sim);
				t.advances++;
			}
			if (last_sim == INT64_MIN)
				rtf_sim = sim;
			last_sim = sim;
			if (now - rtf_mono >= TRACE_RTF_NS) {
				event(&t, "{\"name\":\"real-time factor\",\"ph\":\"C\",\"pid\":1,\"ts\":%.3f,"
					  "\"args\":{\"factor\":%.6g}}",
				      (now - t.t0) / 1e3, (double)(sim - rtf_sim) / (double)(now - rtf_mono));
				rtf_mono = now;
				rtf_sim = sim;
			}
		}
		for (unsigned i = 0; i < n && i < SHMCLOCK_LOCKSTEP_SLOTS; i++) {
			struct track *k = &tracks[cur[i].p.slot];

			if (!k->used || k->incarnation != cur[i].incarnation) {
				/* A new member (or a slot taken again): a track of its own. */
				if (k->used)
					slice(&t, k, k->working, k->cursor, now - t.t0 - k->cursor, 1);
				memset(k, 0, sizeof(*k));
				k->used = true;
				k->incarnation = cur[i].incarnation;
				k->tid = t.next_tid++;
				k->last = cur[i];
				k->working = cur[i].returned_mono != 0;
				k->cursor = (k->working ? cur[i].returned_mono : cur[i].granted_mono) - t.t0;
				/* Begun before the trace: from its start; no instant
				 * written yet (no grant so far): from now. */
				if (!(k->working ? cur[i].returned_mono : cur[i].granted_mono))
					k->cursor = now - t.t0;
				else if (k->cursor < 0)
					k->cursor = 0;
				event(&t, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,"
					  "\"args\":{\"name\":\"%s (pid %d)\"}}",
				      k->tid, json_str(cur[i].p.who, who, sizeof(who)), (int)cur[i].p.pid);
				continue;
			}
			advance_track(&t, k, &cur[i]);
		}
		if (now >= next_remote) {
			sample_remote(&t, sock, remotes, &nremote, now);
			next_remote = now + TRACE_REMOTE_NS;
		}
		if (now >= end || interrupted)
			break;
		nanosleep(&ts, NULL);
	}
	for (int i = 0; i < nremote; i++)
		if (!remotes[i].gone)
			remote_slice(&t, &remotes[i], now - t.t0);
	/* Each track's current slice, up to the end. */
	for (int i = 0; i < SHMCLOCK_LOCKSTEP_SLOTS; i++)
		if (tracks[i].used)
			slice(&t, &tracks[i], tracks[i].working, tracks[i].cursor,
			      now - t.t0 - tracks[i].cursor, 1);
	fprintf(t.f, "\n],\"otherData\":{\"clock\":\"%s\",\"duration_s\":%.6f,\"slices\":%" PRIu64
		     ",\"estimated_slices\":%" PRIu64 ",\"advances_seen\":%" PRIu64
		     ",\"remote_participants\":%d}}\n",
		name, (now - t.t0) / 1e9, t.slices, t.estimated, t.advances, nremote);
	r = ferror(t.f);
	if (t.f != stdout)
		r |= fclose(t.f);
	else
		fflush(stdout);
	shmclock_lockstep_observe_close(o);
	if (r) {
		fprintf(stderr, "shmclockctl: trace: writing %s failed\n", path);
		return 1;
	}
	fprintf(stderr, "shmclockctl: trace: %.1f s, %" PRIu64 " slices (%" PRIu64
			" shared among several steps), %" PRIu64 " advances seen\n",
		(now - t.t0) / 1e9, t.slices, t.estimated, t.advances);
	return 0;
}
