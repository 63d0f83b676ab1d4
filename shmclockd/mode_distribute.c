/* SPDX-License-Identifier: MIT */
/*
 * Between hosts: a leader sends its time function, not samples of it.
 *
 * Hosts that share a synchronised clock (PTP, chrony) can each compute the
 * leader's time exactly from (effective instant, simulation time there,
 * rate, mode), the instant in a host-independent time scale: CLOCK_TAI
 * when the kernel knows the TAI offset, else CLOCK_REALTIME. The leader
 * schedules each change at its time + Lead and applies it at that instant
 * itself; every follower applies the same function at the same instant,
 * so all hosts pause at the same simulated time and nobody overshoots.
 *
 * The translation to a host's CLOCK_MONOTONIC (where its readers compute)
 * is one offset, sampled between two monotonic readings. CLOCK_REALTIME
 * and CLOCK_MONOTONIC are slewed together by NTP; only a step of the host
 * clock moves the offset. Each tick re-samples it, and a moved offset
 * re-anchors the function: the leader publishes it anew, a follower
 * commits it again, never backwards within an epoch (the writer holds a
 * function that is behind until it catches up).
 *
 * The clock thread never sleeps on an instant: a change waits in a queue
 * (its instant a deadline of the clock thread's loop, the update open
 * meanwhile: freeze_at, withdrawn without a wait if the change is dropped
 * or moved), so status, other commands and SIGTERM go on meanwhile; a
 * leader answers the change's client at its commit. One wait remains: a
 * commit of its own (the stale mark, a new leader's function) while a
 * change decided ahead is staged in the segment completes that change at
 * its instant first (the writer's settle), at most the Lead away (1 s),
 * or the 2 s a follower allows a leader's instant ahead. A
 * follower refuses what no leader may send (dist_check): instants beyond
 * the bound, impossible rates and heartbeats, a function that goes back
 * without a jump; each refusal is counted in status and logged once per
 * leader and kind.
 *
 * Changes are agreed before their instant (two-phase, issue 29), one at
 * a time: a client's change that comes while another is being agreed
 * waits, unannounced (d->waiting), until that one took effect. The leader
 * announces a change (a sample whose committed < change); every
 * follower holds its readers at the instant (freeze_at) from the moment it
 * hears it until it hears that the change is committed, and acknowledges
 * it on TimeAck once it holds it: however late its clock thread runs
 * afterwards, its readers never pass the instant on the function before.
 * The leader decides the commit once every live member acknowledged,
 * only while it can decide it ahead (its instant DIST_OPEN_NS away at
 * least: a decision later, applied late on the leader alone, would put its
 * followers on another function), and says so in
 * every later sample (committed >= change), repeated until each member
 * confirmed it or the instant came;
 * it then commits at the instant itself, as every member does. A change
 * not acknowledged by all half a Lead before its instant is postponed: the
 * leader announces it again under a higher plan at a later instant (Lead
 * doubled meanwhile); a member silent for DIST_LOST_BASE_NS + 2 Lead since
 * the first announcement is declared lost, and the change goes on
 * without it. A member that holds an instant for as long without a commit
 * marks itself stale (it was lost), and is a member again once it applied
 * a committed function. So a follower shows only the leader's function,
 * held at an instant at worst, except while it is marked stale. Members
 * are the followers heard within their lease (each acknowledges at least
 * every DIST_ACK_HB_NS). Lead adapts: DIST_LEAD_MARGIN times the p99 of
 * the time from an announcement to its last acknowledgement, from
 * DIST_LEAD_MIN_NS to 1 s; a leader with no members keeps Distribute.Lead
 * and commits at once, as before. Model: tests/hosts/twophase.pml.
 *
 * A clock mode (mode.h) that ticks as the plain one (mode_plain.h), with
 * the leader's heartbeats and the re-anchoring on each tick. On the clock
 * thread only, except dist_status (under mu).
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <shmclock/time.h>
/* After shmclock.h: shmclock_static_eval(), the function readers evaluate. */
#include <shmclock/static/shmclock.h>

#include "latehist.h"
#include "log.h"
#include "mode_distribute.h"
#include "mode_plain.h"
#include "ros2.h"
#include "source.h"

/* A moved offset larger than this is a step of the host clock. */
#define DIST_REANCHOR_NS 1000
/* A leader decides a change only while its instant is this far away (the
 * decision staged in its segment: its readers switch there by themselves
 * however late this thread runs), and opens the update of a change it did
 * not decide this long before the instant (readers take the slower path
 * meanwhile). A follower opens its hold as soon as it hears the change:
 * no timer of its own stands between its readers and the instant. */
#define DIST_OPEN_NS 1000000

/* Changes waiting for their instants (a leader's clients' changes, a
 * follower's functions announced ahead): more is refused. */
#define DIST_QUEUE_MAX 64
/* A follower accepts instants up to this far ahead of its clock: Lead's
 * largest value (1 s) and as much again for the hosts' clocks and the
 * network. Beyond, the hosts disagree on time (or the sender is broken). */
#define DIST_AHEAD_MAX_NS 2000000000
/* ... and a change of the leader it follows up to this long after its
 * instant (later than this it would have been stale). */
#define DIST_BEHIND_MAX_NS 2000000000
/* A function that goes back by more than this without a jump is refused. */
#define DIST_BACK_TOL_NS 1000
/* A leader listens this long before it publishes: the terms of the
 * leaders before it (the topic's transient-local history) and any live
 * one, so that it takes a term above all of them. */
#define DIST_DISCOVER_NS 500000000
/* Hosts that disagree on time: a message's arrival minus its sending, both
 * on the host clocks (the network's delay plus their offset), the least of
 * the last DIST_SKEW_N, beyond DIST_SKEW_MAX_NS (far above any delay on a
 * network fit for this, far below TAI - UTC). */
#define DIST_SKEW_N 8
#define DIST_SKEW_MAX_NS 250000000
/* ... said once it has lasted this long: the messages that waited while
 * this process did not run (stopped, starved) arrive together, each late
 * by the wait, and pass for an offset until the fresh ones behind them
 * (milliseconds); a real offset lasts. */
#define DIST_SKEW_LAST_NS INT64_C(1000000000)
/* A follower back from silence starts from the leader's present: a sample
 * that arrives later than the hosts' offset and the usual delay by more than
 * this (the shortest Lead: a change decided after it was sent may have taken
 * effect meanwhile) waited somewhere — in this host's buffers while it was
 * stopped or starved, most often, oldest first — and is passed over, for at
 * most DIST_REJOIN_WAIT_NS (a host clock stepped during the silence makes
 * every sample look late). */
#define DIST_REJOIN_LAG_NS DIST_LEAD_MIN_NS
#define DIST_REJOIN_WAIT_NS INT64_C(2000000000)
/* A conflict (two live leaders) shows in status this long after it was
 * last seen. */
#define DIST_CONFLICT_SHOW_NS INT64_C(10000000000)
/* Two-phase: the most followers a leader keeps as members; how often a
 * follower acknowledges at rest (its lease is three of those and a half
 * second); a member that has not acknowledged a change this long plus two
 * Lead after its first announcement is lost (and a follower that holds an
 * instant as long without a commit marks itself stale); the bounds of the
 * adaptive Lead and its margin over the acknowledgements' p99. */
#define DIST_MEMBERS_MAX 32
#define DIST_ACK_HB_NS INT64_C(1000000000)
#define DIST_LEASE_NS (3 * DIST_ACK_HB_NS + 500000000)
/* How long after a follower's leave an acknowledgement from it (best
 * effort) written before the leave is taken as overtaken by it. */
#define DIST_LEAVE_ORDER_NS INT64_C(1000000000)
#define DIST_LOST_BASE_NS INT64_C(500000000)
#define DIST_LEAD_MIN_NS INT64_C(3000000)
#define DIST_LEAD_MAX_NS INT64_C(1000000000)
#define DIST_LEAD_MARGIN 4
#define DIST_ACK_RECENT 32
/* A follower's readers compute time by themselves, stopped or not: they
 * run on the leader's function only as far as the leader waits for this
 * follower, its lease from the last lease it sent, less the hosts' clock
 * offset short of the one reported (DIST_SKEW_MAX_NS). The update is open
 * there (freeze_at: readers stop there, stale), moved on with each lease
 * sent, at most this often. */
#define DIST_LEASE_MARGIN_NS DIST_SKEW_MAX_NS
#define DIST_LEASE_MOVE_NS (DIST_ACK_HB_NS / 2)
/* A follower of a leader that echoes (DIST_F_ECHO) counts its lease from
 * the last lease echoed, not sent: the leases it wrote lately, by stamp
 * (one a second: an echo older than the lease is of no use). */
#define DIST_LRING_N 8

/* A change waiting for its instant. */
struct dist_pending {
	struct cmd *c;          /* leader: the client's command, answered at the commit */
	struct dist_fn fn;      /* as published (leader) or received (follower) */
	int64_t e_mono;         /* the instant on this host's CLOCK_MONOTONIC */
	int64_t sim_base;
	double scale;
	unsigned fl;            /* SHMCLOCK_FN_* */
	bool frozen;            /* the update is open (freeze_at) */
	bool staged;            /* ... and decided ahead: readers switch at the instant */
	/* two-phase: the leader decided it (every member holds it) / a
	 * follower heard it committed */
	bool committed;
	int64_t announced;      /* leader: when announced (under this plan);
				 * follower: when heard */
	int64_t first_announced; /* leader: when first announced */
	bool held;              /* follower: its instant passed uncommitted */
	bool hold_failed;       /* follower: freeze_at refused its hold (said once) */
};

/* A follower known to its leader (two-phase). */
struct dist_member {
	char id[97];
	int64_t seen, lease;    /* CLOCK_MONOTONIC of its last word; its lease */
	uint64_t plan, acked;   /* it holds every change up to acked under plan */
	uint64_t committed;     /* it heard the commits up to this one */
	int64_t last_ack_ns;    /* its last acknowledgement's delay */
	uint64_t late, refused, holds; /* as it reports them */
	int64_t written;        /* the newest stamp of its acknowledgements */
	bool used;
	/* It left (a lease of 0), at left_at, written at left_written (its
	 * clock): the slot keeps its id until reused (not by another for
	 * DIST_LEAVE_ORDER_NS), and an acknowledgement it wrote before the
	 * leave does not take it back (leader_ack). */
	bool left;
	int64_t left_at, left_written;
};

/* What a follower refuses (one log line per leader and kind). */
enum dist_refusal {
	REF_HEARTBEAT,
	REF_RATE,
	REF_TIMEBASE,
	REF_AHEAD,
	REF_BEHIND,
	REF_RANGE,
	REF_BACKWARDS,
	REF_QUEUE,
	REF_GAP,
};

struct dist {
	struct mode_plain plain;  /* first: it ticks as the plain mode */
	const struct ros2_api *api;
	struct ros2 *r;
	bool leader;
	int64_t lead_ns, hb_ns;
	bool run_on_loss;
	int64_t stale_ns;       /* follower: Distribute.StaleAfter (0: three heartbeats) */
	char clock[65];
	/* the function last published (leader) or applied (follower) */
	struct dist_fn fn;
	bool have;
	int64_t off;            /* the offset fn was translated with */
	int64_t next_hb;        /* leader: CLOCK_MONOTONIC of the next heartbeat */
	uint64_t seq;
	/* follower: the function committed last (re-anchoring re-commits it),
	 * and the offset it is in the segment with: not always off, which a
	 * sample queued for later moves on (a re-anchor compared with off
	 * was lost then, and readers ran on the old offset until that
	 * change's instant) */
	struct dist_fn cur;
	int64_t cur_off;
	bool have_cur;          /* ... and the segment holds it (not a loss's own) */
	/* two-phase, leader: its members, the last change decided, the plan
	 * (re-plans so far), the adaptive Lead, the next repetition of what
	 * members have not acknowledged or confirmed */
	struct dist_member members[DIST_MEMBERS_MAX];
	uint64_t committed, plan;
	int64_t lead_cur;
	int64_t recent[DIST_ACK_RECENT]; /* the last acknowledgement delays */
	unsigned recent_n, recent_i;
	int64_t next_repeat;
	bool members_full_logged;
	/* two-phase, follower: its identity, the commits heard, the plan of
	 * what it holds, what it acknowledged last and when, whether it marked
	 * itself stale holding an instant, whether it is a member (it applied
	 * a committed function since it was last stale) */
	char self_id[97];
	uint64_t commit_seen, fplan;
	uint64_t ack_sent_acked, ack_sent_plan, ack_sent_commit;
	int64_t next_lease;     /* when its next lease is due */
	bool hold_stale, joined;
	/* ... how far its readers may go on the leader's function (0: not
	 * known yet), and the instant they stop at meanwhile (if held) */
	int64_t lease_until, lease_at;
	bool lease_held;
	bool leave_due;         /* ... and it says it left once stale, */
	char leave_leader[97];  /* ... to this leader, of this term */
	uint64_t leave_term;
	bool lease_failed;      /* ... and its hold could not be opened (said) */
	/* ... and, with a leader that echoes its leases (DIST_F_ECHO),
	 * whether it waits to be admitted: joined, stale until an echo of a
	 * lease it wrote since (stamped admit_ts on) came and it heard every
	 * change up to the one the echo names (admit_change): the leader
	 * waits for it from then on, not before (a change it decides
	 * meanwhile, this follower may miss). The leases it wrote lately
	 * (stamp, when, how long), its last stamp (CLOCK_REALTIME, never
	 * back), the echoes taken and when the last one came. */
	bool admit_wait, admit_echoed;
	int64_t admit_ts;
	uint64_t admit_change;
	struct dist_lease_sent {
		int64_t ts, mono, lease;
	} lring[DIST_LRING_N];
	unsigned lring_i;
	int64_t last_stamp;
	uint64_t echoes;        /* under mu, with shown_admit (admit_wait) */
	int64_t echo_mono;
	bool shown_admit;
	/* ... and whether it follows again once the function in force it
	 * took after silence (or from a new leader) takes effect: its instant
	 * was still to come, and what the leader shows until then is not
	 * known here (changes it missed). Stale until then. */
	bool rejoin;
	int64_t joined_mono;
	bool gap;               /* a change missed (announced after a gap) */
	bool gap_held;          /* ... and readers held for it */
	int64_t gap_since, gap_at; /* ... seen, and held from */
	/* waiting for their instants, oldest first */
	struct dist_pending q[DIST_QUEUE_MAX];
	unsigned q_first, q_n;
	/* leader: clients' changes not announced yet, oldest first. One
	 * change is agreed at a time: the next is announced once the one
	 * before took effect (leader_next), so that every change has its own
	 * instant, decided ahead on every host, as the model has it. */
	struct cmd *waiting[DIST_QUEUE_MAX];
	unsigned w_first, w_n;
	/* Terms: the leader's own (a follower's is fn.term), the highest it
	 * heard of, when it starts publishing (INT64_MAX: it did), and
	 * whether a live leader above it took over (it stopped publishing). */
	uint64_t term, max_term;
	int64_t announce_at;
	bool deposed;
	char conflict_logged[97];  /* the other leader last logged */
	/* follower: arrival minus sending of the last messages (ring) */
	int64_t skew[DIST_SKEW_N];
	unsigned skew_n, skew_i;
	bool skew_bad, skew_far;  /* said; seen beyond the bound (since skew_far_at) */
	int64_t skew_far_at;
	/* follower: the least arrival minus sending while it followed its
	 * leader (if have_base), and since when late samples are passed over
	 * (0: not) */
	int64_t skew_base, rejoin_skip_at;
	bool have_base;
	/* follower: the kinds of refusal logged for refused_leader */
	char refused_leader[97];
	unsigned refused_logged;
	/* status, under mu */
	pthread_mutex_t mu;
	char leader_id[97];
	uint64_t changes, late, leaders, reanchors, refused, queued;
	char refused_last[200];
	/* the last conflict: another live leader of the clock */
	uint64_t conflicts, conflict_term;
	char conflict_with[97];
	int64_t conflict_mono;
	uint64_t shown_term;     /* the term led or followed */
	int64_t host_offset_ns;  /* follower: this host's clock minus the leader's (+ delay) */
	bool clocks_disagree;
	bool shown_deposed;
	int64_t worst_late_ns, last_late_ns;
	int64_t last_off;
	/* two-phase: postponements, members lost (leader), holds past an
	 * instant and the stale marks they made (follower); the adaptive
	 * Lead, the members as status shows them */
	uint64_t postponed, lost_members, holds, hold_stales;
	uint64_t staged;                    /* changes decided ahead of their instant */
	/* follower: changes this thread first acted on after their instant
	 * (it ran late): its readers showed the function before meanwhile */
	uint64_t ran_past;
	/* follower: its lease ran out (it sent none for that long) */
	uint64_t lease_expired;
	uint64_t holding;       /* follower: the change whose instant its readers stop at */
	int64_t shown_lead;
	unsigned shown_members;
	struct dist_member shown[DIST_MEMBERS_MAX];
	/* leader: from an announcement to its last acknowledgement; from a
	 * client's change to its commit */
	struct latehist acks;
	struct latehist to_commit;
	/* how long after the effective instant each change was committed */
	struct latehist applied;
	/* how late the changes that arrived after their instant were */
	struct latehist lateness;
};

static int64_t mono_ns(void)
{
	return shmclock_steady_now().ns;
}

static clockid_t tb_clock(int tb)
{
	return tb == DIST_TB_TAI ? CLOCK_TAI : CLOCK_REALTIME;
}

/*
 * A test hook: $SHMCLOCKD_TEST_CLOCK_SHIFT names a file holding a number of
 * ns added to this daemon's readings of the host clock, i.e. a step of the
 * host clock on this host alone, which a test cannot make for real without
 * stepping every process on the machine. Re-read at most every 20 ms; the
 * clock thread's alone.
 */
static int64_t test_shift(void)
{
	static const char *path;
	static bool looked;
	static int64_t val, at = INT64_MIN;
	int64_t now;

	if (!looked) {
		path = getenv("SHMCLOCKD_TEST_CLOCK_SHIFT");
		looked = true;
	}
	if (!path || !*path)
		return 0;
	now = mono_ns();
	if (at == INT64_MIN || now - at > 20000000) {
		FILE *f = fopen(path, "r");
		long long v;

		if (f && fscanf(f, "%lld", &v) == 1)
			val = v;
		if (f)
			fclose(f);
		at = now;
	}
	return val;
}

/* @tb minus CLOCK_MONOTONIC, from the tightest of a few bracketed
 * readings (both clocks are vDSO reads: tens of ns apart). */
static int64_t sample_offset(int tb)
{
	int64_t best_w = INT64_MAX, off = 0;

	for (int i = 0; i < 5; i++) {
		struct timespec a, t, b;
		int64_t m1, m2, tv;

		clock_gettime(CLOCK_MONOTONIC, &a);
		clock_gettime(tb_clock(tb), &t);
		clock_gettime(CLOCK_MONOTONIC, &b);
		m1 = (int64_t)a.tv_sec * 1000000000 + a.tv_nsec;
		m2 = (int64_t)b.tv_sec * 1000000000 + b.tv_nsec;
		tv = (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
		if (m2 - m1 < best_w) {
			best_w = m2 - m1;
			off = tv - (m1 + (m2 - m1) / 2);
		}
	}
	return off + test_shift();
}

/* The leader's time scale: TAI when the kernel knows its offset from UTC
 * (set by chrony's leapsectz or ptp4l), else UTC (CLOCK_REALTIME). The
 * offset is whole seconds, 0 while unset: read as CLOCK_TAI minus
 * CLOCK_REALTIME rather than with adjtimex(), a @clock system call that a
 * hardened unit (ProtectClock=, SystemCallFilter=@system-service) refuses,
 * which silently made every such leader publish UTC. */
static int leader_timebase(void)
{
	struct timespec tai, utc;

	if (clock_gettime(CLOCK_REALTIME, &utc) || clock_gettime(CLOCK_TAI, &tai))
		return DIST_TB_REALTIME;
	/* Read within microseconds of each other: a difference of half a
	 * second or more is the offset. */
	return (int64_t)(tai.tv_sec - utc.tv_sec) * 1000000000 + (tai.tv_nsec - utc.tv_nsec) >=
			       500000000
		       ? DIST_TB_TAI
		       : DIST_TB_REALTIME;
}

static uint64_t scale_mult(double scale)
{
	return (uint64_t)nearbyint(scale * 4294967296.0);
}

static double mult_scale(uint64_t mult)
{
	return (double)mult / 4294967296.0;
}

/* A function's flags on the wire (DIST_F_*) as the writer's
 * (SHMCLOCK_FN_*): paused and stepped; the rest is the commit's own. */
static unsigned fn_flags(uint32_t wire)
{
	return (wire & DIST_F_PAUSED ? SHMCLOCK_FN_PAUSED : 0) |
	       (wire & DIST_F_STEPPED ? SHMCLOCK_FN_STEPPED : 0);
}

static void dist_on_tick(struct mode_plain *p, const struct clock_env *env, int64_t now);
static const struct clock_mode_ops mode_distribute_ops;

static struct dist_pending *q_at(struct dist *d, unsigned i)
{
	return &d->q[(d->q_first + i) % DIST_QUEUE_MAX];
}

static struct dist_pending *q_push(struct dist *d)
{
	struct dist_pending *p = q_at(d, d->q_n++);

	memset(p, 0, sizeof(*p));
	return p;
}

static void q_pop(struct dist *d)
{
	d->q_first = (d->q_first + 1) % DIST_QUEUE_MAX;
	d->q_n--;
}

static void q_count(struct dist *d)
{
	pthread_mutex_lock(&d->mu);
	d->queued = d->q_n + d->w_n;
	d->holding = 0;
	if (!d->leader && d->q_n && q_at(d, 0)->frozen && !q_at(d, 0)->staged)
		d->holding = q_at(d, 0)->fn.change;
	pthread_mutex_unlock(&d->mu);
}

static void close_open(const struct clock_env *env);

/* Drops every change still waiting (a leader's clients hear why); an
 * instant already held is let go on the function in force. */
static void q_clear(struct dist *d, const struct clock_env *env, const char *why)
{
	while (d->q_n) {
		struct dist_pending *p = q_at(d, 0);

		/* A change decided ahead stands: readers switch to it at its
		 * instant, and the writer (this one, or the next after a stop)
		 * completes it there; waiting for that would stall this thread. */
		if (p->frozen && !p->staged)
			close_open(env);
		if (p->c) {
			cmd_fail(p->c, -ECANCELED, why);
			clock_env_complete(env, p->c, -ECANCELED);
		}
		q_pop(d);
	}
	d->rejoin = false; /* stale meanwhile: the next function starts anew */
	for (; d->w_n; d->w_n--, d->w_first = (d->w_first + 1) % DIST_QUEUE_MAX) {
		struct cmd *c = d->waiting[d->w_first];

		cmd_fail(c, -ECANCELED, why);
		clock_env_complete(env, c, -ECANCELED);
	}
	q_count(d);
}

struct clock_mode *mode_distribute_create(const struct shmclockd_config *cfg, struct ros2 *r,
					  const struct ros2_api *api)
{
	struct dist *d;
	char host[64] = "host";

	d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	mode_plain_init(&d->plain, dist_on_tick);
	d->plain.m.ops = &mode_distribute_ops;
	d->api = api;
	d->r = r;
	d->leader = cfg->dist_publish;
	d->lead_ns = cfg->dist_lead_ns;
	d->hb_ns = cfg->dist_hb_ns;
	d->run_on_loss = cfg->dist_run_on_loss;
	d->stale_ns = cfg->dist_stale_ns;
	snprintf(d->clock, sizeof(d->clock), "%s", config_dist_clock(cfg));
	pthread_mutex_init(&d->mu, NULL);
	d->lead_cur = d->lead_ns;
	d->shown_lead = d->lead_ns;
	d->next_repeat = INT64_MAX;
	{
		struct timespec ts;

		gethostname(host, sizeof(host) - 1);
		clock_gettime(CLOCK_REALTIME, &ts);
		/* Unique per run: a restarted leader (or follower) is a new one. */
		snprintf(d->leader ? d->leader_id : d->self_id, sizeof(d->self_id),
			 "%.40s/%d/%lld.%09ld", host, (int)getpid(), (long long)ts.tv_sec, ts.tv_nsec);
	}
	return &d->plain.m;
}

static struct dist *dist_of(struct clock_mode *m)
{
	return (struct dist *)m;
}

static void dist_destroy(struct clock_mode *m)
{
	struct dist *d = dist_of(m);

	pthread_mutex_destroy(&d->mu);
	free(d);
}

/* ------------------------------------------------------------ leader */

/* Publishes @f (a change queued, or the function in force) with what is
 * committed so far. */
static void publish_fn(struct dist *d, struct dist_fn *f, unsigned how)
{
	struct timespec ts;

	/* Still listening for the terms before ours, or superseded. */
	if (d->announce_at != INT64_MAX || d->deposed)
		return;
	clock_gettime(tb_clock(f->timebase), &ts);
	f->sent_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	f->seq = ++d->seq;
	f->committed = d->committed;
	f->plan = d->plan;
	f->lead_ns = d->lead_cur;
	f->flags |= DIST_F_ECHO; /* leader_ack */
	if (d->api->dist_publish(d->r, f, how) < 0)
		log_msg(LOG_DEBUG, "distribute: a TimeFunction write failed");
}

/* The latest function: the last change queued, else the one in force. */
static void publish(struct dist *d, unsigned how)
{
	publish_fn(d, &d->fn, how);
}

/* The function the writer publishes now, anchored at @mono (its own
 * instant, translated with @off), as the next change. */
static void snapshot(shmclock_writer_t *w, struct dist *d, int64_t mono, int64_t off)
{
	shmclock_info_t in;
	int64_t v = 0;

	shmclock_writer_info(w, &in);
	shmclock_writer_eval(w, mono, &v);
	snprintf(d->fn.clock, sizeof(d->fn.clock), "%s", d->clock);
	snprintf(d->fn.leader, sizeof(d->fn.leader), "%s", d->leader_id);
	d->fn.term = d->term;
	d->fn.change++;
	d->fn.effective_ns = mono + off;
	d->fn.sim_base_ns = v;
	d->fn.mult = scale_mult(in.scale);
	d->fn.flags = (in.paused ? DIST_F_PAUSED : 0) | (in.stepped ? DIST_F_STEPPED : 0) |
		      (in.has_unix_at_zero ? DIST_F_UNIX_ZERO : 0);
	d->fn.jump_epoch = in.jump_epoch;
	d->fn.unix_at_zero_ns = in.unix_at_zero_ns;
	d->fn.source = (uint8_t)in.source;
	d->fn.heartbeat_ns = d->hb_ns;
	d->off = off;
	d->have = true;
	/* Already in force here (the clock moved on its own, or a start):
	 * nothing to agree on. Only ever taken with no change queued. */
	d->committed = d->fn.change;
	pthread_mutex_lock(&d->mu);
	d->changes++; /* status counts every function published as a change */
	pthread_mutex_unlock(&d->mu);
}

/* CMD_INIT: ticks as plain; a leader publishes its first function. */
static int dist_start(struct clock_mode *m, const struct clock_env *env)
{
	struct dist *d = dist_of(m);
	int64_t now;
	int r = mode_plain_ops.start(m, env);

	if (r)
		return r;
	/* A follower is stale until it follows (follower_fresh): a clock
	 * continued from an earlier shmclockd shows that one's function,
	 * which the leader may have left since, or gone. */
	if (!d->leader)
		return clock_env_set_stale(env, true);
	d->fn.timebase = (uint8_t)leader_timebase();
	now = mono_ns();
	snapshot(env->w, d, now, sample_offset(d->fn.timebase));
	/* Published once the terms before ours are known (announce). */
	d->announce_at = now + DIST_DISCOVER_NS;
	d->next_hb = INT64_MAX;
	return 0;
}

/* The end of the leader's listening: a term above every one heard of,
 * then the current function, published. */
static void announce(struct dist *d, const struct clock_env *env, int64_t now)
{
	d->term = d->max_term + 1;
	d->announce_at = INT64_MAX;
	pthread_mutex_lock(&d->mu);
	d->shown_term = d->term;
	pthread_mutex_unlock(&d->mu);
	if (d->q_n) {
		/* The changes queued meanwhile: announced now, in order. */
		for (unsigned i = 0; i < d->q_n; i++) {
			q_at(d, i)->fn.term = d->term;
			publish_fn(d, &q_at(d, i)->fn, DIST_PUB_FAST | DIST_PUB_RELIABLE);
		}
		d->fn.term = d->term;
	} else {
		snapshot(env->w, d, now, sample_offset(d->fn.timebase));
		publish(d, DIST_PUB_FAST | DIST_PUB_RELIABLE);
	}
	d->next_hb = now + d->hb_ns;
	log_msg(LOG_INFO, "distribute: leading clock '%s' as %s, term %llu (%s, Lead %.3f ms, "
			  "heartbeat %.3f s)",
		d->clock, d->leader_id, (unsigned long long)d->term,
		d->fn.timebase == DIST_TB_TAI ? "TAI" : "UTC", (double)d->lead_ns / 1e6,
		(double)d->hb_ns / 1e9);
}

/* Is @f from a leader alive now (sent within three of its heartbeats),
 * not a dead one's last word from the topic's history? */
static bool fn_live(const struct dist_fn *f)
{
	struct timespec ts;
	int64_t now, age;

	/* A heartbeat out of range (refused anyway) says nothing. */
	if (f->heartbeat_ns < DIST_HB_MIN_NS || f->heartbeat_ns > DIST_HB_MAX_NS)
		return false;
	clock_gettime(tb_clock(f->timebase), &ts);
	now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	return !__builtin_sub_overflow(now, f->sent_ns, &age) &&
	       age <= 3 * f->heartbeat_ns + 100000000;
}

/* (term, identity): the leader of the two that leads; > 0 when a ranks
 * above b. */
static int rank_cmp(uint64_t ta, const char *ia, uint64_t tb, const char *ib)
{
	if (ta != tb)
		return ta > tb ? 1 : -1;
	return strcmp(ia, ib);
}

/* Two live leaders of the clock: status shows it for a while, the log
 * once per other leader. */
static void note_conflict(struct dist *d, const struct dist_fn *f, uint64_t own_term,
			  const char *own_id, const char *what)
{
	pthread_mutex_lock(&d->mu);
	d->conflicts++;
	d->conflict_term = f->term;
	snprintf(d->conflict_with, sizeof(d->conflict_with), "%s", f->leader);
	d->conflict_mono = mono_ns();
	pthread_mutex_unlock(&d->mu);
	if (strcmp(d->conflict_logged, f->leader)) {
		snprintf(d->conflict_logged, sizeof(d->conflict_logged), "%s", f->leader);
		log_msg(LOG_WARN, "distribute: conflict: two live leaders of clock '%s': %s (term %llu) "
				  "and %s (term %llu); %s. Run one leader per clock",
			d->clock, f->leader, (unsigned long long)f->term, own_id,
			(unsigned long long)own_term, what);
	}
}

/* A leader hears the topic (CMD_FUNCTION): its own samples, the history
 * of the leaders before it (their terms), or another live leader. */
static int leader_heard(struct dist *d, const struct clock_env *env, const struct dist_fn *f)
{
	bool listening = d->announce_at != INT64_MAX;
	uint64_t own = listening ? d->max_term + 1 : d->term;

	if (!strcmp(f->leader, d->leader_id))
		return 0;
	if (f->term > d->max_term)
		d->max_term = f->term;
	if (!fn_live(f))
		return 0;
	if (listening) {
		note_conflict(d, f, d->max_term + 1, d->leader_id,
			      "this one starts above it and leads; the other stops publishing");
		return 0;
	}
	if (rank_cmp(f->term, f->leader, own, d->leader_id) > 0) {
		if (!d->deposed)
			note_conflict(d, f, own, d->leader_id,
				      "the other ranks above this one, which stops publishing");
		else
			note_conflict(d, f, own, d->leader_id, "this one stopped publishing");
		d->deposed = true;
		pthread_mutex_lock(&d->mu);
		d->shown_deposed = true;
		pthread_mutex_unlock(&d->mu);
		q_clear(d, env, "another leader took over the clock (status shows which)");
		return 0;
	}
	note_conflict(d, f, own, d->leader_id, "this one ranks above the other, which should stop");
	return 0;
}

/* Plans @p (a client's change, p->c, checked) to take effect at @e_mono
 * or just after @prev, the change before it (NULL: the function in force):
 * its function in both time scales. */
static void plan_entry(struct dist *d, const struct clock_env *env, const struct dist_pending *prev,
		       struct dist_pending *p, int64_t e_mono)
{
	shmclock_info_t in;
	double scale;
	unsigned fl;
	bool jump = false, paused;
	uint64_t epoch;
	int64_t v;

	shmclock_writer_info(env->w, &in);
	scale = prev ? prev->scale : in.scale;
	paused = prev ? !!(prev->fl & SHMCLOCK_FN_PAUSED) : in.paused;
	epoch = prev ? prev->fn.jump_epoch : in.jump_epoch;
	fl = paused ? SHMCLOCK_FN_PAUSED : 0;
	switch (p->c->req.kind) {
	case CMD_SCALE:
		scale = p->c->req.scale;
		break;
	case CMD_PAUSE:
		fl = SHMCLOCK_FN_PAUSED;
		break;
	case CMD_RESUME:
		fl = 0;
		break;
	case CMD_SET:
		jump = true;
		break;
	default:
		break;
	}
	/* After the change before it, so that changes commit in their order. */
	if (prev && e_mono <= prev->e_mono)
		e_mono = prev->e_mono + 1;
	if (prev)
		v = shmclock_static_eval(prev->e_mono, prev->sim_base,
					 prev->fl & SHMCLOCK_FN_PAUSED ? 0 : scale_mult(prev->scale), e_mono);
	else
		shmclock_writer_eval(env->w, e_mono, &v);
	if (p->c->req.kind == CMD_SET)
		v = p->c->req.ns;
	else if (p->c->req.kind == CMD_STEP)
		v = v > INT64_MAX - p->c->req.ns ? INT64_MAX : v + p->c->req.ns;
	p->fn.effective_ns = e_mono + d->off;
	p->fn.sim_base_ns = v;
	p->fn.mult = scale_mult(scale);
	p->fn.flags = (fl & SHMCLOCK_FN_PAUSED ? DIST_F_PAUSED : 0) |
		      (in.has_unix_at_zero ? DIST_F_UNIX_ZERO : 0);
	p->fn.jump_epoch = epoch + (jump ? 1 : 0);
	p->e_mono = e_mono;
	p->sim_base = v;
	p->scale = scale;
	p->fl = fl | (jump ? SHMCLOCK_FN_JUMP : 0);
}

static int64_t repeat_ns(const struct dist *d);
static unsigned members_live(const struct dist *d, int64_t now);
static void leave_send(struct dist *d);
static void follower_reanchor(struct dist *d, const struct clock_env *env, int64_t off);
static void leader_reanchor(struct dist *d, const struct clock_env *env, int64_t now, int64_t off);
static void lost_leader(struct dist *d, const struct clock_env *env);

/* A leader's change (pause, resume, scale, set, step): checked, then, once
 * no other change is being agreed (@in_turn: leader_next's call for the
 * next waiting one), scheduled at leader time + Lead, announced, queued;
 * the clock thread commits it at that instant once every member holds it
 * (or later, postponed) and answers the client then. */
static int leader_change(struct dist *d, const struct clock_env *env, struct cmd *c, int64_t now,
			 bool in_turn)
{
	shmclock_writer_t *w = env->w;
	struct dist_pending *p, *tail = d->q_n ? q_at(d, d->q_n - 1) : NULL;
	shmclock_info_t in;
	bool paused;

	shmclock_writer_info(w, &in);
	if (!in.initialized)
		return cmd_fail(c, -ENODATA, "the clock has no time yet");
	if (d->deposed)
		return cmd_fail(c, -EBUSY, "another leader took over this clock (status shows which): "
					   "change time there, and run one leader per clock");
	if (d->q_n + d->w_n >= DIST_QUEUE_MAX)
		return cmd_fail(c, -EBUSY, "64 changes already wait for their instants (the most "
					   "shmclockd queues): send this one after some took effect");
	/* Paused or not once the changes before this one took effect. */
	paused = tail ? !!(tail->fl & SHMCLOCK_FN_PAUSED) : in.paused;
	for (unsigned i = 0; i < d->w_n; i++) {
		enum cmd_kind k = d->waiting[(d->w_first + i) % DIST_QUEUE_MAX]->req.kind;

		paused = k == CMD_PAUSE || (paused && k != CMD_RESUME);
	}
	/* Checked before anything is published. */
	switch (c->req.kind) {
	case CMD_SCALE:
		if (!config_scale_ok(c->req.scale))
			return cmd_fail(c, -EINVAL, "scale must be a number from 1e-6 to 1e6");
		break;
	case CMD_STEP:
		if (!paused)
			return cmd_fail(c, -EINVAL, "step needs a paused clock (pause first)");
		if (c->req.ns < 0)
			return cmd_fail(c, -EINVAL, "step takes a duration >= 0 (use set to go back)");
		break;
	case CMD_PAUSE:
	case CMD_RESUME:
	case CMD_SET:
		break;
	default:
		return cmd_fail(c, -EINVAL, "not a change");
	}
	if (!in_turn && (tail || d->w_n)) {
		/* Another change is being agreed: this one waits, unannounced,
		 * and is planned from the function in force once that one took
		 * effect (leader_next). */
		d->waiting[(d->w_first + d->w_n++) % DIST_QUEUE_MAX] = c;
		q_count(d);
		return CLOCK_MODE_HELD;
	}
	/* No member to wait for: Distribute.Lead again (the adaptive Lead
	 * may have grown, doubled by each postponement, while a member that
	 * has since left or died did not answer). */
	if (!members_live(d, now))
		d->lead_cur = d->lead_ns;
	{
		int64_t off = sample_offset(d->fn.timebase);

		/* The host clock stepped since the tick last looked: the function
		 * in force re-expressed first, as the tick would. Planned from
		 * the old expression with the new offset, this change would go
		 * back (or ahead) by the step on the wire, and followers would
		 * refuse it and every one after (a review found it). */
		if (!d->q_n && llabs(off - d->off) > DIST_REANCHOR_NS)
			leader_reanchor(d, env, now, off);
		d->off = off;
	}
	p = q_push(d);
	p->c = c;
	p->fn = d->fn;
	p->fn.change = d->fn.change + 1;
	/* Nothing before it in the queue: planned from the function in force. */
	plan_entry(d, env, NULL, p, now + d->lead_cur);
	p->announced = p->first_announced = now;
	d->fn = p->fn;
	/* Twice: announcements travel best effort (a loss costs a round
	 * trip until the repetition; two cost the square of the loss). */
	publish(d, DIST_PUB_FAST);
	publish(d, DIST_PUB_FAST);
	p->fn = d->fn;
	/* Repeated until every member holds it (a lost sample is repaired by
	 * reliable delivery only at DDS's next heartbeat). */
	if (d->next_repeat == INT64_MAX)
		d->next_repeat = now + repeat_ns(d);
	q_count(d);
	return CLOCK_MODE_HELD;
}

/* A follower's change that took effect @ns after its instant (status,
 * under mu). */
static void count_late(struct dist *d, int64_t ns)
{
	latehist_add(&d->lateness, ns);
	d->late++;
	d->last_late_ns = ns;
	if (ns > d->worst_late_ns)
		d->worst_late_ns = ns;
}

static bool member_live(const struct dist_member *m, int64_t now)
{
	return m->used && now - m->seen <= m->lease;
}

/* Does every live member hold change @n under the current plan? */
static bool all_hold(const struct dist *d, uint64_t n, int64_t now)
{
	for (unsigned i = 0; i < DIST_MEMBERS_MAX; i++) {
		const struct dist_member *m = &d->members[i];

		if (member_live(m, now) && (m->plan != d->plan || m->acked < n))
			return false;
	}
	return true;
}

/* Has every live member heard the commits up to @n? */
static bool all_confirmed(const struct dist *d, uint64_t n, int64_t now)
{
	for (unsigned i = 0; i < DIST_MEMBERS_MAX; i++)
		if (member_live(&d->members[i], now) && d->members[i].committed < n)
			return false;
	return true;
}

static unsigned members_live(const struct dist *d, int64_t now)
{
	unsigned n = 0;

	for (unsigned i = 0; i < DIST_MEMBERS_MAX; i++)
		n += member_live(&d->members[i], now);
	return n;
}

/* What members lack goes out again this often: the quickest recent
 * acknowledgement (a round trip: sooner adds only load; not the median,
 * which losses raise and which would then slow their own repair), at most
 * eight times a Lead, never more often than every millisecond. */
static int64_t repeat_ns(const struct dist *d)
{
	int64_t r = d->lead_cur / 8;

	for (unsigned i = 0; i < d->recent_n; i++)
		if (d->recent[i] < r)
			r = d->recent[i];
	return r > 1000000 ? r : 1000000;
}

/* A decision must reach the members before the instant: the leader
 * decides or postpones this long before it. */
static int64_t guard_ns(const struct dist *d)
{
	return d->lead_cur / 2;
}

/* Lead from the acknowledgements measured lately: DIST_LEAD_MARGIN times
 * the slowest of the last DIST_ACK_RECENT (their p99 over that window),
 * within its bounds (Distribute.Lead while nobody acknowledged). A window,
 * not the whole history: a slow spell must not keep Lead up for ever. */
static void adapt_lead(struct dist *d, int64_t ack_ns)
{
	int64_t l = 0;

	d->recent[d->recent_i++ % DIST_ACK_RECENT] = ack_ns;
	if (d->recent_n < DIST_ACK_RECENT)
		d->recent_n++;
	for (unsigned i = 0; i < d->recent_n; i++)
		if (d->recent[i] > l)
			l = d->recent[i];
	l *= DIST_LEAD_MARGIN;
	if (l < DIST_LEAD_MIN_NS)
		l = DIST_LEAD_MIN_NS;
	if (l > DIST_LEAD_MAX_NS)
		l = DIST_LEAD_MAX_NS;
	d->lead_cur = l;
}

/* The update an instant opened (freeze_at), nothing decided, withdrawn:
 * readers go on with the function in force as if nothing had been planned
 * there (a change dropped or moved later), at once, however far the
 * instant is (a reader held past it runs on from there). */
static void close_open(const struct clock_env *env)
{
	int r = shmclock_writer_withdraw(env->w);

	if (r && r != -ENODATA)
		log_msg(LOG_WARN, "distribute: a held instant could not be let go: %s",
			shmclock_strerror(r));
}

/* Follower: the end of its lease let go (the update open there
 * withdrawn), before any other commit or hold of its own: a commit would
 * wait for that instant, freeze_at would find the update open. Opened
 * again by lease_keep at the end of the clock thread's pass. */
static void lease_let_go(struct dist *d, const struct clock_env *env)
{
	if (!d->lease_held)
		return;
	close_open(env);
	d->lease_held = false;
}

/* Follower: holds its readers at the instant of the change it waits for
 * (the queue's head, not committed): opened when heard, so no timer of
 * this thread stands between its readers and the instant. -ENODATA (no
 * function yet) holds nothing and needs nothing. */
static void hold_open(struct dist *d, const struct clock_env *env, struct dist_pending *p)
{
	int r;

	lease_let_go(d, env); /* the change's instant comes first */
	r = shmclock_writer_freeze_at(env->w, p->e_mono);

	p->frozen = r == 0 || r == -ENODATA;
	if (!p->frozen && !p->hold_failed)
		log_msg(LOG_WARN, "distribute: change %llu: its instant could not be held: %s",
			(unsigned long long)p->fn.change, shmclock_strerror(r));
	p->hold_failed = !p->frozen; /* said once, tried again each pass */
	q_count(d);
}

/* Follower: a commit of its own before the instant it holds (the stale
 * mark, UnixTimeAtZero) would wait for that instant: the hold is
 * withdrawn first and opened again by the next run of the queue, right
 * after the command. A change decided ahead stays (its commit waits, as
 * it must: readers may have switched already). */
static void hold_drop(struct dist *d, const struct clock_env *env)
{
	struct dist_pending *p = d->q_n ? q_at(d, 0) : NULL;

	lease_let_go(d, env);
	/* Past the instant the commit does not wait (and a clock held
	 * stale there may have completed the update already). */
	if (d->leader || !p || !p->frozen || p->staged || mono_ns() >= p->e_mono)
		return;
	close_open(env);
	p->frozen = false;
	q_count(d);
}

/* Leader: decides, in order, the changes every member holds. */
static void leader_decide(struct dist *d, int64_t now)
{
	for (unsigned i = 0; i < d->q_n; i++) {
		struct dist_pending *p = q_at(d, i);

		if (p->committed)
			continue;
		if (!all_hold(d, p->fn.change, now))
			break;
		/* Only while it can be decided ahead (its instant still
		 * DIST_OPEN_NS away): later, it is postponed instead. */
		if (now >= p->e_mono - DIST_OPEN_NS)
			break;
		p->committed = true; /* said once this host has it: leader_own */
		if (members_live(d, now)) {
			latehist_add(&d->acks, now - p->announced);
			adapt_lead(d, now - p->announced);
		}
		log_msg(LOG_DEBUG, "distribute: change %llu decided %.3f ms after its announcement "
				   "(plan %llu), Lead now %.3f ms",
			(unsigned long long)p->fn.change, (double)(now - p->announced) / 1e6,
			(unsigned long long)d->plan, (double)d->lead_cur / 1e6);
	}
}

/* Leader: a decided change is said committed (in every later sample) only
 * once this host has it, decided ahead in its segment or applied: no
 * follower can then switch at an instant where the leader's own readers do
 * not, however late this thread runs after deciding. */
static void leader_own(struct dist *d, const struct dist_pending *p, int64_t now)
{
	if (p->fn.change <= d->committed)
		return;
	d->committed = p->fn.change;
	publish(d, DIST_PUB_FAST | DIST_PUB_RELIABLE);
	d->next_repeat = now + repeat_ns(d);
}

/* A committed change at the head of the queue, decided ahead: readers
 * switch at its instant by themselves (the segment's next line), whenever
 * this thread runs next. Not possible once the instant came (-EALREADY),
 * or with nothing open (a follower's first function: -ENODATA from
 * freeze_at): the change is then committed at the instant as before. */
/* Follower: whether what it commits or decides ahead now must say stale:
 * a clock marked stale, unless it waits for the function a rejoin took
 * (follower_fresh clears the mark there, when its leader does not echo);
 * or one that waits for its leader's echo (admit_check clears it). The
 * segment's mark and the clock thread's stay the same: a mark cleared by a
 * commit alone is not seen by the next set_stale(). */
static bool follower_stale(const struct dist *d, const struct clock_env *env)
{
	if (d->leader)
		return false;
	if (d->admit_wait)
		return true;
	return atomic_load_explicit(env->stale, memory_order_relaxed) &&
	       (!d->rejoin || (d->fn.flags & DIST_F_ECHO));
}

static void stage(struct dist *d, const struct clock_env *env, struct dist_pending *p, int64_t now)
{
	if (!p->frozen) {
		lease_let_go(d, env);
		shmclock_writer_freeze_at(env->w, p->e_mono);
		p->frozen = true;
	}
	if (p->staged || now >= p->e_mono ||
	    shmclock_writer_set_function(env->w, p->e_mono, p->sim_base, p->scale,
					 p->fl | SHMCLOCK_FN_AHEAD |
						 (follower_stale(d, env) ? SHMCLOCK_FN_STALE : 0)))
		return;
	p->staged = true;
	pthread_mutex_lock(&d->mu);
	d->staged++;
	pthread_mutex_unlock(&d->mu);
	q_count(d); /* decided: no longer held */
}

/* Leader: the first undecided change @i is not held by every member
 * DIST_GUARD before its instant. Members silent too long are lost; the
 * rest is announced again, later, under a new plan. */
static void leader_postpone(struct dist *d, const struct clock_env *env, unsigned i, int64_t now)
{
	struct dist_pending *p = q_at(d, i);
	int64_t bound = DIST_LOST_BASE_NS + 2 * d->lead_cur;

	for (unsigned k = 0; k < DIST_MEMBERS_MAX; k++) {
		struct dist_member *m = &d->members[k];

		/* Not before the member would be stale hearing nothing (its
		 * lease: its silence bound and a margin). */
		if (!member_live(m, now) || (m->plan == d->plan && m->acked >= p->fn.change) ||
		    now - p->first_announced <= (bound > m->lease ? bound : m->lease))
			continue;
		log_msg(LOG_WARN, "distribute: follower %s lost: it did not acknowledge change %llu "
				  "within %.3f s; the clock goes on without it (it marks itself "
				  "stale, and is a member again once it hears this leader)",
			m->id, (unsigned long long)p->fn.change, (double)(now - p->first_announced) / 1e9);
		m->used = false;
		pthread_mutex_lock(&d->mu);
		d->lost_members++;
		pthread_mutex_unlock(&d->mu);
	}
	if (all_hold(d, p->fn.change, now) && now < p->e_mono - DIST_OPEN_NS)
		return; /* the next pass decides */
	d->lead_cur = d->lead_cur * 2 < DIST_LEAD_MAX_NS ? d->lead_cur * 2 : DIST_LEAD_MAX_NS;
	d->plan++;
	for (unsigned k = i; k < d->q_n; k++) {
		struct dist_pending *e = q_at(d, k);

		if (e->frozen && !e->staged) {
			/* Opened to stage it, too late: readers go on from here. */
			close_open(env);
			e->frozen = false;
		}
		plan_entry(d, env, k ? q_at(d, k - 1) : NULL, e, now + d->lead_cur);
		e->announced = now;
		e->fn.plan = d->plan;
		publish_fn(d, &e->fn, DIST_PUB_FAST);
		publish_fn(d, &e->fn, DIST_PUB_FAST);
	}
	d->fn = q_at(d, d->q_n - 1)->fn;
	d->next_repeat = now + repeat_ns(d);
	pthread_mutex_lock(&d->mu);
	d->postponed++;
	pthread_mutex_unlock(&d->mu);
	log_msg(LOG_DEBUG, "distribute: change %llu postponed by %.3f ms (plan %llu)",
		(unsigned long long)p->fn.change, (double)d->lead_cur / 1e6,
		(unsigned long long)d->plan);
}

/* Leader: what members have not acknowledged or not confirmed goes out
 * again (each change, or the latest sample with its commits). */
static int64_t leader_repeat(struct dist *d, int64_t now)
{
	bool undecided = false, unconfirmed = false;

	if (!d->q_n) {
		d->next_repeat = INT64_MAX;
		return INT64_MAX;
	}
	if (now < d->next_repeat)
		return d->next_repeat;
	for (unsigned i = 0; i < d->q_n; i++) {
		struct dist_pending *p = q_at(d, i);

		if (!p->committed && !all_hold(d, p->fn.change, now)) {
			publish_fn(d, &p->fn, DIST_PUB_FAST);
			undecided = true;
		}
	}
	unconfirmed = !all_confirmed(d, d->committed, now);
	if (unconfirmed && !undecided)
		publish(d, DIST_PUB_FAST);
	d->next_repeat = undecided || unconfirmed ? now + repeat_ns(d) : INT64_MAX;
	return d->next_repeat;
}

/* Leader: the change in flight took effect; the next waiting one is
 * announced now, planned from the function in force (one that can no
 * longer be made, e.g. a step once the clock runs, is answered with its
 * error). True once one is announced. */
static bool leader_next(struct dist *d, const struct clock_env *env)
{
	while (d->w_n && !d->q_n) {
		struct cmd *c = d->waiting[d->w_first];
		int r;

		d->w_first = (d->w_first + 1) % DIST_QUEUE_MAX;
		d->w_n--;
		r = leader_change(d, env, c, mono_ns(), true);
		if (r != CLOCK_MODE_HELD)
			clock_env_complete(env, c, r);
	}
	q_count(d);
	return d->q_n > 0;
}

/* Follower: waits to be admitted (true), or not (false). */
static void admit_set(struct dist *d, bool wait)
{
	d->admit_wait = wait;
	pthread_mutex_lock(&d->mu);
	d->shown_admit = wait;
	pthread_mutex_unlock(&d->mu);
}

/* Follower: a function of leader @f's is in force after silence or a new
 * leader: a member (it acknowledges) from @now; fresh at once, or, with a
 * leader that echoes leases, once admitted (admit_check). */
static void follower_fresh(struct dist *d, const struct clock_env *env, const struct dist_fn *f,
			   int64_t now, bool jump)
{
	/* A leave still to say (stale and back in one pass: another leader's
	 * function taken at once) goes to the one it left, while stale. */
	if (d->leave_due && atomic_load_explicit(env->stale, memory_order_relaxed))
		leave_send(d);
	d->leave_due = false;
	lease_let_go(d, env);
	/* A leader that echoes leases counts this follower once its first
	 * lease arrives, not before: stale until it says so (admit_check). */
	admit_set(d, f->flags & DIST_F_ECHO);
	d->admit_echoed = false;
	d->admit_ts = 0;
	d->admit_change = 0;
	/* (follow_apply committed it stale: the clock thread's mark too.) */
	clock_env_set_stale(env, d->admit_wait);
	d->joined = true;
	d->joined_mono = now;
	/* A lease at once: the leader waits for this follower from its
	 * arrival, and its readers go on from its sending (lease_keep), or
	 * from the sending of the last one echoed; until one is sent, no
	 * further than one would take them. */
	d->lease_until = now + DIST_LEASE_NS - DIST_LEASE_MARGIN_NS;
	d->next_lease = now;
	log_msg(LOG_INFO, "distribute: following leader %s for clock '%s'%s%s", f->leader, f->clock,
		jump ? " (a jump for readers)" : "",
		d->admit_wait ? ": stale until the leader echoes its lease (it counts this follower)"
			      : "");
}

/* Follower: fresh once admitted (follower_fresh): an echo of a lease
 * written since it joined came, and it heard every change the leader
 * announced by then, none of them waiting any more (a change queued
 * commits stale: run_queue). */
static void admit_check(struct dist *d, const struct clock_env *env)
{
	if (!d->admit_wait || !d->admit_echoed || d->q_n || d->gap || d->hold_stale ||
	    d->fn.change < d->admit_change || mono_ns() >= d->lease_until)
		return; /* (a lease run out meanwhile: the next echo) */
	admit_set(d, false);
	lease_let_go(d, env); /* a commit of its own: the lease's end opened again after */
	/* What readers show may be off the leader's function: a change that
	 * arrived after its instant while this follower waited (the leader
	 * did not wait for it then) is held, never backwards, at what its
	 * readers saw, stale (paused there for ever). Fresh means on the
	 * leader's function: taken again, a jump where it is off. */
	{
		int64_t now = mono_ns(), e_mono = d->cur.effective_ns - d->off, v = 0;
		bool still = d->cur.flags & (DIST_F_PAUSED | DIST_F_STEPPED);
		int64_t want = shmclock_static_eval(e_mono, d->cur.sim_base_ns, still ? 0 : d->cur.mult, now);
		unsigned fl = fn_flags(d->cur.flags);

		if (d->have && !shmclock_writer_eval(env->w, now, &v) && llabs(v - want) > DIST_REANCHOR_NS) {
			log_msg(LOG_INFO, "distribute: its readers were %.6f ms off the leader's function "
					  "while it waited (a change heard late): taken again, a jump",
				(double)(v - want) / 1e6);
			shmclock_writer_set_function(env->w, e_mono, d->cur.sim_base_ns,
						     mult_scale(d->cur.mult), fl | SHMCLOCK_FN_JUMP);
			d->cur_off = d->off;
		}
	}
	clock_env_set_stale(env, false);
	log_msg(LOG_INFO, "distribute: leader %s counts this follower of clock '%s': fresh",
		d->fn.leader, d->clock);
}

/* Follower: a stamp for a TimeAck (CLOCK_REALTIME, never back, never the
 * same twice): the leader's echo names the lease by it. */
static int64_t follower_stamp(struct dist *d)
{
	struct timespec ts;
	int64_t v;

	clock_gettime(CLOCK_REALTIME, &ts);
	v = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	if (v <= d->last_stamp)
		v = d->last_stamp + 1;
	d->last_stamp = v;
	return v;
}

/* Follower: its leader's echo of one of its leases (CMD_ACK, a->echo):
 * the leader waits for it until that lease's end from its arrival, so
 * its readers may go on until that lease's end from its sending; and it
 * may be what admits it. Anything else (another follower's, another
 * leader's, a lease this follower did not write lately) is nothing. */
static int follower_echo(struct dist *d, const struct clock_env *env, const struct dist_ack *a,
			 int64_t now)
{
	const struct dist_lease_sent *e = NULL;
	int64_t until;

	if (d->leader || !d->joined || !d->have || strcmp(a->follower, d->self_id) ||
	    strcmp(a->leader, d->fn.leader) || a->term != d->fn.term)
		return 0;
	for (unsigned i = 0; i < DIST_LRING_N; i++)
		if (d->lring[i].ts && d->lring[i].ts == a->written_ns)
			e = &d->lring[i];
	if (!e)
		return 0;
	until = e->mono - DIST_LEASE_MARGIN_NS + e->lease;
	if (until > d->lease_until)
		d->lease_until = until;
	if (d->admit_wait && d->admit_ts && a->written_ns >= d->admit_ts) {
		d->admit_echoed = true;
		if (a->acked > d->admit_change)
			d->admit_change = a->acked;
	}
	pthread_mutex_lock(&d->mu);
	d->echoes++;
	d->echo_mono = now;
	pthread_mutex_unlock(&d->mu);
	admit_check(d, env);
	return 0;
}

/* Follower: no longer a member (it marks itself stale). It says so (a
 * lease of 0, reliably: leave_send) once the stale mark is in its segment,
 * never before (dist_tick), so that its leader stops waiting for it at
 * once, not its lease later; a leader that misses it waits the lease, as
 * for a follower that died. */
static void follower_leave(struct dist *d)
{
	if (d->joined && d->have) {
		/* The leader it leaves (a new one's function may be taken in
		 * the same pass, before the leave goes). */
		snprintf(d->leave_leader, sizeof(d->leave_leader), "%s", d->fn.leader);
		d->leave_term = d->fn.term;
		d->leave_due = true;
	}
	d->joined = false;
	if (d->admit_wait)
		admit_set(d, false);
	d->lease_until = 0;
}

/* Follower: a TimeAck to @leader's @term from this follower, its counts
 * and lease 0 (a leave, unless the caller sets them). */
static void ack_head(struct dist *d, struct dist_ack *a, const char *leader, uint64_t term)
{
	memset(a, 0, sizeof(*a));
	a->written_ns = follower_stamp(d);
	snprintf(a->clock, sizeof(a->clock), "%s", d->clock);
	snprintf(a->follower, sizeof(a->follower), "%s", d->self_id);
	snprintf(a->leader, sizeof(a->leader), "%s", leader);
	a->term = term;
}

static void leave_send(struct dist *d)
{
	struct dist_ack a;

	ack_head(d, &a, d->leave_leader, d->leave_term);
	if (d->api->dist_ack(d->r, &a, true) < 0)
		log_msg(LOG_DEBUG, "distribute: a TimeAck write failed");
	d->leave_due = false;
}

/* Commits the queued changes whose instants came: the update is open
 * before each (freeze_at: readers stop exactly there however late this
 * thread runs; a follower's from when it heard the change, a leader's
 * from its decision or DIST_OPEN_NS before), the commit ends it. A change not committed (a
 * leader: not decided; a follower: no commit heard) is not applied: a
 * follower holds there, up to its bound, then marks itself stale; a
 * leader postpones it before that. Returns the deadline of the next step
 * (INT64_MAX: nothing queued). */
static int64_t run_queue(struct dist *d, const struct clock_env *env, int64_t now)
{
	int64_t next = INT64_MAX;

	if (d->leader && d->announce_at == INT64_MAX && !d->deposed) {
		leader_decide(d, now);
		for (unsigned i = 0; i < d->q_n; i++) {
			struct dist_pending *p = q_at(d, i);

			if (p->committed)
				continue;
			if (now >= p->e_mono - guard_ns(d))
				leader_postpone(d, env, i, now);
			if (!q_at(d, i)->committed)
				next = q_at(d, i)->e_mono - guard_ns(d);
			break;
		}
		next = (leader_repeat(d, now) < next) ? d->next_repeat : next;
	}
	while (d->q_n) {
		struct dist_pending *p = q_at(d, 0);
		int r;

		if (!d->leader && !p->committed && !p->frozen)
			hold_open(d, env, p);
		if (d->leader && !p->committed && now < p->e_mono - DIST_OPEN_NS)
			return p->e_mono - DIST_OPEN_NS < next ? p->e_mono - DIST_OPEN_NS : next;
		if (d->leader && !p->committed)
			return next; /* postponed above, before its instant */
		if (!d->leader && !p->staged && !p->frozen && p->announced < p->e_mono &&
		    now > p->e_mono) {
			/* Heard before its instant, yet neither held nor decided
			 * ahead there (the hold could not be opened, or another
			 * update open before it took effect that late): its
			 * readers showed the function before, not stale. Said,
			 * never hidden. */
			pthread_mutex_lock(&d->mu);
			d->ran_past++;
			pthread_mutex_unlock(&d->mu);
			log_msg(LOG_WARN, "distribute: change %llu reached its instant %.3f ms before "
					  "this host's clock thread ran: its readers showed the previous "
					  "function meanwhile (its hold could not be opened in time)",
				(unsigned long long)p->fn.change, (double)(now - p->e_mono) / 1e6);
		}
		if (p->committed) {
			/* Known committed: decided ahead at once, in the same
			 * run as the decision (leader) or the message (follower). */
			stage(d, env, p, now);
			if (d->leader && p->staged)
				leader_own(d, p, now);
			if (d->leader && !p->staged && p->fn.change > d->committed) {
				/* Decided too late to switch at its instant here
				 * (this thread ran late): said to nobody yet, so
				 * undecided again and postponed (the next pass).
				 * Never applied late on the leader alone: followers
				 * switch at the instant. */
				p->committed = false;
				return now;
			}
		} else if (!p->frozen) {
			hold_open(d, env, p);
		}
		if (now < p->e_mono)
			return p->e_mono < next ? p->e_mono : next;
		if (!p->committed) {
			/* A follower holds the instant: the leader has not
			 * decided yet (or this host missed it); stale if that
			 * lasts. */
			int64_t bound = DIST_LOST_BASE_NS + 2 * (p->fn.lead_ns > 0 ? p->fn.lead_ns : 0);

			if (!p->held) {
				p->held = true;
				pthread_mutex_lock(&d->mu);
				d->holds++;
				pthread_mutex_unlock(&d->mu);
			}
			if (now - p->e_mono >= bound && !d->hold_stale) {
				log_msg(LOG_WARN, "distribute: change %llu was due %.3f s ago and is not "
						  "committed: this host has lost leader %s (or the leader "
						  "lost it); the clock is stale until it hears the leader",
					(unsigned long long)p->fn.change, (double)(now - p->e_mono) / 1e9,
					d->fn.leader);
				d->hold_stale = true;
				lost_leader(d, env); /* held at the instant: stays there */
				follower_leave(d);
				pthread_mutex_lock(&d->mu);
				d->hold_stales++;
				pthread_mutex_unlock(&d->mu);
			}
			return d->hold_stale ? next : (p->e_mono + bound < next ? p->e_mono + bound : next);
		}
		/* Never a fresh commit on a clock marked stale, unless it is the
		 * function a rejoin waited for (follower_fresh, below). */
		r = p->staged ? shmclock_writer_complete(env->w)
			      : shmclock_writer_set_function(
					env->w, p->e_mono, p->sim_base, p->scale,
					p->fl | (follower_stale(d, env) ? SHMCLOCK_FN_STALE : 0));
		if (p->staged && r == -ENODATA)
			r = 0; /* another commit (a reload's, say) completed it first */
		now = mono_ns();
		latehist_add(&d->applied, now - p->e_mono);
		if (d->leader) {
			if (r)
				cmd_fail(p->c, r, shmclock_strerror(r));
			latehist_add(&d->to_commit, now - p->first_announced);
			clock_env_complete(env, p->c, r);
			leader_own(d, p, now); /* applied: said committed now if not yet */
			d->next_hb = now + d->hb_ns;
		} else {
			d->cur = p->fn;
			d->cur_off = p->fn.effective_ns - p->e_mono;
			d->have_cur = true;
			if (d->rejoin) {
				/* The function taken after silence is in force. */
				d->rejoin = false;
				follower_fresh(d, env, &p->fn, now, false);
			}
			if (p->held) {
				/* Committed after its instant: readers held there meanwhile. */
				pthread_mutex_lock(&d->mu);
				count_late(d, now - p->e_mono);
				pthread_mutex_unlock(&d->mu);
			}
		}
		pthread_mutex_lock(&d->mu);
		d->changes += d->leader;
		pthread_mutex_unlock(&d->mu);
		q_pop(d);
		q_count(d);
	}
	/* The deadlines of the change announced next are its own. */
	if (d->leader && d->w_n && leader_next(d, env))
		return run_queue(d, env, mono_ns());
	return next;
}

/* ------------------------------------------------------------ follower */

/* Refuses @f (counted; logged once per leader and kind): -EPROTO. */
static int refuse(struct dist *d, struct cmd *c, const struct dist_fn *f, enum dist_refusal kind,
		  const char *fmt, ...)
{
	char msg[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (strcmp(d->refused_leader, f->leader)) {
		snprintf(d->refused_leader, sizeof(d->refused_leader), "%s", f->leader);
		d->refused_logged = 0;
	}
	if (!(d->refused_logged & (1u << kind))) {
		d->refused_logged |= 1u << kind;
		log_msg(LOG_WARN, "distribute: refused a TimeFunction from %s: %s (further refusals "
				  "of this kind from it are counted in status, not logged)", f->leader, msg);
	}
	pthread_mutex_lock(&d->mu);
	d->refused++;
	snprintf(d->refused_last, sizeof(d->refused_last), "%s", msg);
	pthread_mutex_unlock(&d->mu);
	return cmd_fail(c, -EPROTO, msg);
}

/*
 * What no leader may send: checked before anything is applied. @fresh: a
 * new leader, or the first word after silence (its function may be as old
 * as its last change). *e_mono: the instant on this host's clock.
 */
static int dist_check(struct dist *d, struct cmd *c, const struct dist_fn *f, bool fresh,
		      int64_t now, int64_t off, int64_t *e_mono)
{
	__extension__ typedef __int128 i128;
	i128 far;

	if (f->heartbeat_ns < DIST_HB_MIN_NS || f->heartbeat_ns > DIST_HB_MAX_NS)
		return refuse(d, c, f, REF_HEARTBEAT, "heartbeat %lld ns (from 100ms to 60s)",
			      (long long)f->heartbeat_ns);
	if (f->mult < scale_mult(1e-6) || f->mult > scale_mult(1e6))
		return refuse(d, c, f, REF_RATE, "rate %.9g (from 1e-6 to 1e6)", mult_scale(f->mult));
	if (f->timebase > DIST_TB_TAI)
		return refuse(d, c, f, REF_TIMEBASE, "unknown time scale %u", f->timebase);
	if (__builtin_sub_overflow(f->effective_ns, off, e_mono))
		return refuse(d, c, f, REF_RANGE, "instant %lld out of range",
			      (long long)f->effective_ns);
	/* Differences in 128 bits: any int64 instant may come. */
	if ((i128)*e_mono - now > DIST_AHEAD_MAX_NS)
		return refuse(d, c, f, REF_AHEAD,
			      "change %llu takes effect %.3f s from now on this host, more than "
			      "the %.0f s any Lead allows: the hosts' clocks disagree (chrony/PTP "
			      "on both, TAI on both or neither)",
			      (unsigned long long)f->change, (double)(*e_mono - now) / 1e9,
			      DIST_AHEAD_MAX_NS / 1e9);
	if (!fresh && (i128)now - *e_mono > DIST_BEHIND_MAX_NS)
		return refuse(d, c, f, REF_BEHIND,
			      "change %llu took effect %.3f s ago on this host, later than %.0f s "
			      "(the hosts' clocks disagree, or the leader is broken)",
			      (unsigned long long)f->change, (double)(now - *e_mono) / 1e9,
			      DIST_BEHIND_MAX_NS / 1e9);
	/* Its value a year from its instant or from now must be a time. */
	far = (i128)f->sim_base_ns +
	      (((i128)(now > *e_mono ? now : *e_mono) - *e_mono + (i128)31536000 * 1000000000) *
	       (i128)f->mult >> 32);
	if (far > INT64_MAX)
		return refuse(d, c, f, REF_RANGE, "simulation time %lld runs out of range",
			      (long long)f->sim_base_ns);
	if (!fresh && f->jump_epoch < d->fn.jump_epoch)
		return refuse(d, c, f, REF_BACKWARDS, "change %llu: jump epoch %llu goes back from %llu",
			      (unsigned long long)f->change, (unsigned long long)f->jump_epoch,
			      (unsigned long long)d->fn.jump_epoch);
	/* The leader's re-anchor after its host clock stepped: earlier or
	 * later on the wire by the step, so it may start before the previous
	 * change and go back; taken, the writer holds readers until it
	 * catches up (as after a step of this host's clock). The bounds above
	 * still hold: the hosts' clocks may not disagree by more. Before this,
	 * a follower refused it and then every change after it, fresh on the
	 * old function (a review found it). */
	if (!fresh && (f->flags & DIST_F_REANCHOR) && f->jump_epoch == d->fn.jump_epoch)
		goto queue;
	if (!fresh && f->effective_ns < d->fn.effective_ns)
		return refuse(d, c, f, REF_BACKWARDS,
			      "change %llu takes effect %.6f s before the previous change",
			      (unsigned long long)f->change,
			      (double)(d->fn.effective_ns - f->effective_ns) / 1e9);
	if (!fresh && f->jump_epoch == d->fn.jump_epoch) {
		int64_t prev = shmclock_static_eval(
			d->fn.effective_ns, d->fn.sim_base_ns,
			d->fn.flags & (DIST_F_PAUSED | DIST_F_STEPPED) ? 0 : d->fn.mult, f->effective_ns);

		if (f->sim_base_ns < prev - DIST_BACK_TOL_NS)
			return refuse(d, c, f, REF_BACKWARDS,
				      "change %llu goes back %.6f s without a jump",
				      (unsigned long long)f->change,
				      (double)(prev - f->sim_base_ns) / 1e9);
	}
queue:
	/* Whatever its instant: past ones are queued too behind a queue (a
	 * full one wrapped its index over its head). */
	if (d->q_n == DIST_QUEUE_MAX)
		return refuse(d, c, f, REF_QUEUE, "64 changes already wait for their instants");
	return 0;
}

/* Every message: does this host's clock agree with the leader's? The
 * least arrival-minus-sending of the last few is their offset plus the
 * shortest delay; beyond the bound for DIST_SKEW_LAST_NS it is said in
 * status and the log (once each way), with the fix. */
static int64_t skew_sample(struct dist *d, const struct dist_fn *f)
{
	int64_t m = INT64_MAX, v, now = mono_ns();
	bool bad, far;

	if (f->timebase > DIST_TB_TAI ||
	    __builtin_sub_overflow(now + sample_offset(f->timebase), f->sent_ns, &v))
		return INT64_MIN;
	d->skew[d->skew_i++ % DIST_SKEW_N] = v;
	if (d->skew_n < DIST_SKEW_N)
		d->skew_n++;
	for (unsigned i = 0; i < d->skew_n; i++)
		if (d->skew[i] < m)
			m = d->skew[i];
	/* A few messages first: one may be a dead leader's last word. */
	far = d->skew_n >= 3 && (m > DIST_SKEW_MAX_NS || m < -DIST_SKEW_MAX_NS);
	if (far && !d->skew_far)
		d->skew_far_at = now;
	d->skew_far = far;
	bad = far && now - d->skew_far_at >= DIST_SKEW_LAST_NS;
	if (bad && !d->skew_bad)
		log_msg(LOG_WARN, "distribute: this host's clock is %.3f s %s leader %s's (measured "
				  "from its messages): its changes land that far off here. Synchronise "
				  "the hosts' clocks (chrony or PTP) and use TAI on every host or on none "
				  "(a TAI/UTC mismatch is 37 s)",
			fabs((double)m / 1e9), m > 0 ? "ahead of" : "behind", f->leader);
	else if (!bad && d->skew_bad)
		log_msg(LOG_INFO, "distribute: this host's clock agrees with leader %s's again "
				  "(%.3f ms apart, network delay included)", f->leader, (double)m / 1e6);
	d->skew_bad = bad;
	pthread_mutex_lock(&d->mu);
	d->host_offset_ns = m;
	d->clocks_disagree = bad;
	pthread_mutex_unlock(&d->mu);
	return v;
}

/* Follower, back from silence (@f from the leader it followed): has @f
 * waited (arrival minus sending @v more than DIST_REJOIN_LAG_NS above the
 * least seen while it followed)? Then a later sample may say otherwise, and
 * it is passed over, up to DIST_REJOIN_WAIT_NS from the first. */
static bool rejoin_stale_sample(struct dist *d, const struct dist_fn *f, int64_t v, int64_t now)
{
	if (!d->have_base || v == INT64_MIN || v - d->skew_base <= DIST_REJOIN_LAG_NS) {
		d->rejoin_skip_at = 0;
		return false;
	}
	if (!d->rejoin_skip_at) {
		d->rejoin_skip_at = now;
		log_msg(LOG_DEBUG, "distribute: change %llu arrived %.3f ms late (it waited while "
				   "this host did not take it): waiting for a recent one",
			(unsigned long long)f->change, (double)(v - d->skew_base) / 1e6);
	}
	if (now - d->rejoin_skip_at < DIST_REJOIN_WAIT_NS)
		return true;
	d->rejoin_skip_at = 0;
	d->have_base = false; /* every one late: the offset moved; measured again */
	return false;
}

/* Follower: the changes it holds: every one up to the last accepted,
 * short of the first whose instant its readers do not stop at yet (its
 * hold opens in the clock thread's next pass, after the command that
 * queued it). The leader decides on this: an acknowledgement never runs
 * ahead of the hold, however long this thread is kept from that pass. */
static uint64_t follower_holds(struct dist *d)
{
	for (unsigned i = 0; i < d->q_n; i++) {
		const struct dist_pending *p = q_at(d, i);

		if (!p->committed && !p->frozen)
			return p->fn.change - 1;
	}
	return d->fn.change;
}

/* Follower: tells the leader what it holds (follower_holds, under its
 * plan) and the commits it heard: when that changed, and every
 * DIST_ACK_HB_NS as its lease. Only a member: a follower that applied a
 * committed function since it was last stale. */
static void follower_ack(struct dist *d, int64_t now, bool force)
{
	struct dist_ack a;

	if (!d->joined || !d->have)
		return;
	bool lease = now >= d->next_lease;
	uint64_t holds = follower_holds(d);

	if (!force && !lease && d->ack_sent_acked == holds &&
	    d->ack_sent_plan == d->fplan && d->ack_sent_commit == d->commit_seen)
		return;
	ack_head(d, &a, d->fn.leader, d->fn.term);
	a.plan = d->fplan;
	a.acked = holds;
	a.committed = d->commit_seen;
	/* The leader waits for this follower, and declares it lost, no
	 * sooner than it would notice the leader's silence (and be stale). */
	pthread_mutex_lock(&d->mu);
	a.late = d->late;
	a.refused = d->refused;
	a.holds = d->holds;
	pthread_mutex_unlock(&d->mu);
	a.lease_ns = (d->stale_ns > 0 ? d->stale_ns : 3 * d->fn.heartbeat_ns) + 500000000;
	if (a.lease_ns < DIST_LEASE_NS)
		a.lease_ns = DIST_LEASE_NS;
	/* An acknowledgement goes twice (best effort, as the announcements);
	 * the lease once, reliably. */
	if (d->api->dist_ack(d->r, &a, lease) < 0 || (!lease && d->api->dist_ack(d->r, &a, false) < 0)) {
		log_msg(LOG_DEBUG, "distribute: a TimeAck write failed");
	} else if (lease) {
		/* The leader waits for this follower until its lease from this
		 * one's arrival (never sooner than its sending), as it says it
		 * (at most 60 s): from here, or, when the leader echoes, from
		 * here once its echo says it arrived (follower_echo; a lease
		 * lost on the way, one way, no longer moves it). */
		struct dist_lease_sent *e = &d->lring[d->lring_i++ % DIST_LRING_N];

		e->ts = a.written_ns;
		e->mono = now;
		e->lease = a.lease_ns > 60 * INT64_C(1000000000) ? 60 * INT64_C(1000000000) : a.lease_ns;
		if (d->admit_wait && !d->admit_ts)
			d->admit_ts = a.written_ns;
		if (!(d->fn.flags & DIST_F_ECHO))
			d->lease_until = now - DIST_LEASE_MARGIN_NS + e->lease;
	}
	d->ack_sent_acked = a.acked;
	d->ack_sent_plan = a.plan;
	d->ack_sent_commit = a.committed;
	/* The lease every DIST_ACK_HB_NS, whatever went between: the
	 * acknowledgements (best effort) keep the leader's count, not this
	 * follower's (lease_until). */
	if (lease)
		d->next_lease = now + DIST_ACK_HB_NS;
}

/* Follower: has lost the leader (silence; a change held, a gap or its
 * lease past their bounds). Its readers stop at @at (an instant they are
 * held at, past: an update open there; or now) and stay there, stale,
 * paused (OnLeaderLoss "hold", the default) or running on from there
 * ("run"): one commit completes the open update, never a withdrawal and a
 * second commit (readers would run on fresh past the instant between
 * them, and the mark then moves them on by the time they were held), nor
 * the mark alone (it completes the update running, whatever OnLeaderLoss
 * says). Then the clock thread's own mark finds the clock stale. */
static void stale_from(struct dist *d, const struct clock_env *env, int64_t at)
{
	shmclock_info_t in;
	int64_t v;
	int r;

	shmclock_writer_info(env->w, &in);
	r = shmclock_writer_eval(env->w, at, &v);
	if (!r)
		r = shmclock_writer_set_function(
			env->w, at, v, in.scale,
			SHMCLOCK_FN_STALE | (in.stepped ? SHMCLOCK_FN_STEPPED : 0) |
				(in.paused || (!d->run_on_loss && !in.stepped) ? SHMCLOCK_FN_PAUSED : 0));
	if (r && r != -ENODATA)
		log_msg(LOG_WARN, "distribute: the clock could not be marked stale where its readers "
				  "stopped: %s (marked now)", shmclock_strerror(r));
	clock_env_set_stale(env, true);
}

/* Follower: where its readers are held, past (an update open at an
 * instant that came), if anywhere: stale_from() there. */
static bool held_past(struct dist *d, int64_t now, int64_t *at)
{
	const struct dist_pending *p = d->q_n ? q_at(d, 0) : NULL;

	if (p && p->frozen && !p->staged && now >= p->e_mono)
		*at = p->e_mono;
	else if (d->gap_held)
		*at = d->gap_at; /* opened at once: always past */
	else if (d->lease_held && now >= d->lease_at)
		*at = d->lease_at;
	else
		return false;
	return true;
}

/* Follower: the leader lost (silence, a hold or a gap past its bound, the
 * lease run out). Readers held past an instant stay there; else they stop
 * now (a hold still to come let go first). Once: a clock marked already
 * stays where it was, unless it was stale only while it joined (running
 * on the leader's function until its echo, or its rejoin's function):
 * lost, it stops as OnLeaderLoss says. */
static void lost_leader(struct dist *d, const struct clock_env *env)
{
	int64_t now = mono_ns(), at;

	/* A change missed from the leader lost is nothing to hold for now
	 * (the clock is stale; what it says when back is taken afresh): a gap
	 * seen while changes were queued (no hold opened yet) outlived the
	 * loss, and the next tick held readers on the stale clock,
	 * OnLeaderLoss "run" notwithstanding (a review found it). A hold
	 * already open is the loss's to complete or let go, below. */
	d->gap = false;
	if (atomic_load_explicit(env->stale, memory_order_relaxed) && !d->admit_wait && !d->rejoin)
		return;
	/* The segment holds a function of its own from here (paused, or
	 * running on, stale): not the leader's to re-anchor after a host
	 * clock step (that ran held readers on), until a function of the
	 * leader's is committed again. */
	d->have_cur = false;
	/* A change decided ahead stands: past its instant it is completed
	 * first (what readers show is that function); still to come, the
	 * mark waits for it there (the writer settles it first) and is made
	 * on that function, as the clock thread's own mark is. */
	if (shmclock_writer_complete(env->w) == -EAGAIN) {
		shmclock_info_t in;

		lease_let_go(d, env);
		clock_env_set_stale(env, true);
		shmclock_writer_info(env->w, &in);
		if (!d->run_on_loss && in.initialized && !in.paused && !in.stepped)
			shmclock_writer_pause(env->w);
		return;
	}
	if (!held_past(d, now, &at)) {
		hold_drop(d, env);
		at = now;
	}
	stale_from(d, env, at);
	/* Completed there, or let go. (A change's hold completed keeps
	 * `frozen`: q_clear's withdrawal then finds nothing open.) */
	d->lease_held = false;
}

/* Follower: its lease ran out (it sent none for that long: this process
 * was stopped, or starved): its leader may have gone on without it. Its
 * readers stopped there, stale (lease_keep); they stay there, paused
 * (OnLeaderLoss "hold"), or run on from there (OnLeaderLoss "run"). Stale
 * until it hears the leader again, its function then a jump. */
static void lease_expire(struct dist *d, const struct clock_env *env, int64_t now)
{
	log_msg(LOG_WARN, "distribute: this follower's lease with leader %s ran out %.3f s ago (%s); "
			  "the leader may have gone on without it: the clock is stale until it "
			  "hears the leader",
		d->fn.leader, (double)(now - d->lease_until) / 1e9,
		d->fn.flags & DIST_F_ECHO ? "none echoed since: its leases do not reach the leader, or "
					    "its echoes do not come back, or this process was stopped"
					  : "it sent none meanwhile: stopped or starved");
	/* Its readers stay where they stopped (the lease's end), stale. */
	lost_leader(d, env);
	/* What waits was heard before: the leader may have moved on (and a
	 * change committed later, fresh, would undo the mark). */
	q_clear(d, env, "this follower's lease ran out");
	d->hold_stale = true;
	follower_leave(d);
	pthread_mutex_lock(&d->mu);
	d->lease_expired++;
	pthread_mutex_unlock(&d->mu);
}

/* Follower, at the end of each pass (and before anything it is told):
 * its readers stop at the end of its lease, unless another instant holds
 * them first (a change it waits for, a gap) or they are stale anyway.
 * Returns the deadline of the lease (INT64_MAX: none). */
static int64_t lease_keep(struct dist *d, const struct clock_env *env, int64_t now)
{
	bool stale = atomic_load_explicit(env->stale, memory_order_relaxed);
	int64_t at;
	int r;

	if (d->leader || !d->joined || stale || !d->lease_until) {
		lease_let_go(d, env);
		return INT64_MAX;
	}
	if (now >= d->lease_until) {
		lease_expire(d, env, now);
		return INT64_MAX;
	}
	if (d->q_n || d->gap_held) {
		lease_let_go(d, env);
		return d->lease_until;
	}
	at = d->lease_until;
	if (at > now + SHMCLOCK_FREEZE_AHEAD_MAX_NS - DIST_ACK_HB_NS)
		at = now + SHMCLOCK_FREEZE_AHEAD_MAX_NS - DIST_ACK_HB_NS;
	if (d->lease_held && at - d->lease_at < DIST_LEASE_MOVE_NS)
		return d->lease_until;
	lease_let_go(d, env);
	r = shmclock_writer_freeze_at(env->w, at);
	/* An update open already: a change decided ahead that a dropped
	 * queue left in the segment (q_clear), completed once due. */
	if (r == -EINVAL && shmclock_writer_complete(env->w) == 0)
		r = shmclock_writer_freeze_at(env->w, at);
	if (r == 0) {
		d->lease_held = true;
		d->lease_at = at;
	} else if (r != -ENODATA && r != -EINVAL && !d->lease_failed) {
		log_msg(LOG_WARN, "distribute: the end of this follower's lease could not be held "
				  "(said once): %s", shmclock_strerror(r));
	}
	d->lease_failed = r && r != -ENODATA && r != -EINVAL;
	return d->lease_until;
}

/* Follower: the commits heard (under @plan) mark what waits, only what
 * it holds under that same plan: a change it holds under an earlier plan
 * may have been moved without it hearing (the leader went on without this
 * follower, lost): never applied at the instant it knows, it is held
 * there and the clock goes stale. (A change decided before a re-plan and
 * whose commit this follower missed is held too: stale, never wrong.) */
static void mark_committed(struct dist *d, uint64_t plan, uint64_t committed)
{
	for (unsigned i = 0; i < d->q_n; i++)
		if (q_at(d, i)->fn.change <= committed && q_at(d, i)->fn.plan == plan)
			q_at(d, i)->committed = true;
}

/* Follower: a change was missed. Its instant comes after every change
 * queued (changes are ordered): once they took effect, readers hold at
 * once, behind the leader and never ahead, until the leader repeats it. */
static void gap_hold(struct dist *d, const struct clock_env *env)
{
	if (d->gap_held || d->q_n)
		return;
	lease_let_go(d, env); /* now comes first */
	d->gap_at = mono_ns();
	if (shmclock_writer_freeze_at(env->w, d->gap_at))
		return;
	d->gap_held = true;
	pthread_mutex_lock(&d->mu);
	d->holds++;
	pthread_mutex_unlock(&d->mu);
}

/* A follower's sample from the leader (CMD_FUNCTION): checked, then
 * queued for its instant (an announcement, held there until committed;
 * or a committed function), or committed at once when its instant passed
 * and it is committed. Once a committed function is applied after
 * silence, the clock is fresh again. */
static int follow_apply(struct dist *d, const struct clock_env *env, struct cmd *c)
{
	const struct dist_fn *f = c->arg_fn;
	bool new_leader = !d->have || strcmp(f->leader, d->fn.leader);
	bool stale = atomic_load_explicit(env->stale, memory_order_relaxed);
	bool fresh, committed = f->committed >= f->change, replan = false, jump;
	unsigned fl;
	int64_t off, e_mono = 0, now, late = 0;
	int r;

	int64_t v = skew_sample(d, f);

	if (!new_leader && !stale && d->joined && v != INT64_MIN &&
	    (!d->have_base || v < d->skew_base)) {
		d->skew_base = v; /* the least while it follows */
		d->have_base = true;
	}
	/* (Stale only while it joins, its leader speaks: the same rule.) */
	if (new_leader && d->have && (!stale || d->admit_wait || d->rejoin)) {
		/* Another leader while ours speaks: a dead one's history is
		 * nothing; a live one is a conflict, and only a leader that
		 * ranks above ours is followed (never back to a lower one). */
		if (!fn_live(f))
			return 0;
		if (rank_cmp(f->term, f->leader, d->fn.term, d->fn.leader) < 0) {
			note_conflict(d, f, d->fn.term, d->fn.leader,
				      "this follower stays with the latter, which ranks above");
			return 0;
		}
		note_conflict(d, f, d->fn.term, d->fn.leader,
			      "this follower follows the former, which ranks above");
	}
	/* A rejoin waiting for its function's instant is not a new start:
	 * later samples of the same leader go on from it. */
	fresh = new_leader || (stale && !d->rejoin && !d->admit_wait);
	now = mono_ns();
	if (!fresh) {
		if (f->committed > d->commit_seen)
			d->commit_seen = f->committed;
		mark_committed(d, f->plan, f->committed);
		/* An announcement of a change already held, under a later plan:
		 * it moved (postponed). */
		for (unsigned i = 0; i < d->q_n; i++)
			if (q_at(d, i)->fn.change == f->change && !q_at(d, i)->committed &&
			    f->plan > q_at(d, i)->fn.plan && !committed)
				replan = true;
		if (!replan && f->change <= d->fn.change) {
			/* A heartbeat, an old change, or an announcement
			 * repeated: the leader lacks our acknowledgement (it may
			 * have been lost), say it again. */
			follower_ack(d, now, !committed && f->plan == d->fplan);
			return 0;
		}
		/* An announcement after a gap (one lost): its function starts
		 * from the one missing, whose instant this follower does not
		 * know: its readers hold now (behind the leader, never ahead)
		 * until the leader's repetition fills the gap, stale if that
		 * lasts (tick). */
		if (!replan && !committed && f->change > d->fn.change + 1 &&
		    f->change - 1 > f->committed) {
			if (!d->gap) {
				log_msg(LOG_DEBUG, "distribute: change %llu announced after a gap "
						   "(holding %llu): readers hold until it is repeated",
					(unsigned long long)f->change, (unsigned long long)d->fn.change);
				d->gap = true;
				d->gap_since = now;
				gap_hold(d, env);
			}
			return 0;
		}
		if (!committed && f->plan < d->fplan) {
			log_msg(LOG_DEBUG, "distribute: change %llu under plan %llu: plan %llu is current",
				(unsigned long long)f->change, (unsigned long long)f->plan,
				(unsigned long long)d->fplan);
			return 0; /* announced under a plan that moved on */
		}
	} else if (!committed) {
		/* After silence, or a new leader: a function in force first
		 * (the leader says its commits in every sample). */
		log_msg(LOG_DEBUG, "distribute: change %llu announced while %s: waiting for a "
				   "function in force", (unsigned long long)f->change,
			new_leader ? "a new leader" : "stale");
		return 0;
	} else if (!new_leader && rejoin_stale_sample(d, f, v, now)) {
		/* Back from silence: the leader's present, not what waited
		 * (after a stop, the first of many, each superseded by the
		 * next: readers would show each, fresh, for a moment). */
		return 0;
	}
	if (d->gap_held)
		close_open(env); /* the gap is filled: readers go on from there */
	d->gap = d->gap_held = false;
	if (replan) {
		/* Drop the change moved and everything after it: announced
		 * again, in order. An instant already held is let go on the
		 * function in force (the leader never reached it either). The
		 * moved change is checked against what remains. */
		while (d->q_n && q_at(d, d->q_n - 1)->fn.change >= f->change) {
			struct dist_pending *t = q_at(d, d->q_n - 1);

			if (t->frozen)
				close_open(env);
			d->q_n--;
		}
		d->fn = d->q_n ? q_at(d, d->q_n - 1)->fn : d->cur;
		q_count(d);
	}
	off = sample_offset(f->timebase);
	r = dist_check(d, c, f, fresh, now, off, &e_mono);
	if (r)
		return r;
	if (fresh) {
		q_clear(d, env, "another leader"); /* what the old one announced is void */
		if (new_leader)
			d->have_base = false; /* another host, another offset */
		d->commit_seen = f->committed;
		d->fplan = f->plan;
		d->hold_stale = false;
	}
	if (!committed)
		d->fplan = f->plan;
	/* The host clock stepped since the function in force was committed
	 * (this sample is the first to see it, or a gap held the re-anchor
	 * back): re-expressed before this one is queued, which would hold
	 * the re-anchor off until its instant. */
	if (d->have_cur && !fresh && !stale && !d->q_n && !d->gap_held &&
	    llabs(off - d->cur_off) > DIST_REANCHOR_NS)
		follower_reanchor(d, env, off);
	/* Late: a function in force that arrived after its instant, sent
	 * after this follower joined (not the history it catches up with). */
	if (e_mono <= now && committed && d->have && !fresh && f->sent_ns - off > d->joined_mono)
		late = now - e_mono;
	/* Another leader, a leader back after silence, or a jump on the
	 * leader: readers' jump callbacks hear of it. */
	if (!d->have) {
		shmclock_info_t in;

		/* A clock an earlier shmclockd left: its leader may have gone
		 * back since (a jump), and a function behind would be held. */
		shmclock_writer_info(env->w, &in);
		jump = in.initialized;
	} else {
		jump = fresh || f->jump_epoch != d->fn.jump_epoch;
	}
	fl = fn_flags(f->flags) | (jump ? SHMCLOCK_FN_JUMP : 0);
	/* Stale while it waits for its leader's echo (follower_fresh), or for
	 * the function a rejoin took (a change after it, decided ahead). */
	if (d->admit_wait || (fresh && (f->flags & DIST_F_ECHO)) || (!fresh && follower_stale(d, env)))
		fl |= SHMCLOCK_FN_STALE;
	if (!d->have || (f->flags & DIST_F_UNIX_ZERO) != (d->fn.flags & DIST_F_UNIX_ZERO) ||
	    f->unix_at_zero_ns != d->fn.unix_at_zero_ns) {
		int64_t uz = f->unix_at_zero_ns;

		hold_drop(d, env); /* a commit now, not at the instant held */
		shmclock_writer_set_unix_at_zero(env->w, f->flags & DIST_F_UNIX_ZERO ? &uz : NULL);
	}
	if (e_mono <= now && committed && !d->q_n) {
		lease_let_go(d, env);
		r = shmclock_writer_set_function(env->w, e_mono, f->sim_base_ns, mult_scale(f->mult), fl);
		if (r)
			return cmd_fail(c, r, shmclock_strerror(r));
		d->cur = *f;
		d->cur_off = off;
		d->have_cur = true;
	} else {
		struct dist_pending *p = q_push(d);

		p->fn = *f;
		p->e_mono = e_mono;
		p->sim_base = f->sim_base_ns;
		p->scale = mult_scale(f->mult);
		p->fl = fl;
		p->committed = committed;
		p->announced = now;
		q_count(d);
		/* A fresh start on a function in force from an instant still
		 * to come (a leader deciding its next change ahead): until then
		 * the leader shows a function this host may have missed, so the
		 * clock is stale until this one takes effect (run_queue), not
		 * fresh at once on the function it had. Stale from there too
		 * until this thread took it (its readers switch there by
		 * themselves; the leader waits for this follower, and its lease
		 * bounds them, only once it says it follows). */
		if (fresh) {
			d->rejoin = true;
			p->fl |= SHMCLOCK_FN_STALE;
		}
	}
	if (fresh && d->rejoin) {
		lease_let_go(d, env);
		clock_env_set_stale(env, true);
		follower_leave(d);
		log_msg(LOG_INFO, "distribute: leader %s for clock '%s': stale until its function "
				  "takes effect, %.3f ms from now", f->leader, f->clock,
			(double)(e_mono - now) / 1e6);
	} else if (fresh) {
		follower_fresh(d, env, f, now, jump);
	}
	if (late)
		log_msg(LOG_DEBUG, "distribute: change %llu arrived %.3f ms after it took effect",
			(unsigned long long)f->change, (double)late / 1e6);
	d->fn = *f;
	d->off = off;
	d->have = true;
	follower_ack(d, now, false);
	admit_check(d, env);
	pthread_mutex_lock(&d->mu);
	snprintf(d->leader_id, sizeof(d->leader_id), "%s", f->leader);
	d->shown_term = f->term;
	d->changes++;
	d->leaders += new_leader;
	if (late)
		count_late(d, late);
	d->last_off = off;
	pthread_mutex_unlock(&d->mu);
	return 0;
}

/* Leader: a follower's acknowledgement (CMD_ACK): a member (again), what it
 * holds, the commits it heard. */
static int leader_ack(struct dist *d, const struct dist_ack *a, int64_t now)
{
	struct dist_member *m = NULL, *free_slot = NULL;

	if (strcmp(a->leader, d->leader_id) || a->term != d->term || d->deposed)
		return 0; /* it follows another leader, or an earlier run */
	if (!a->follower[0])
		return 0; /* nobody's (no follower sends one): never a member */
	if (a->lease_ns == 0) {
		/* It left (stale, or stopping): not waited for. Unless it
		 * wrote an acknowledgement after this leave: a leave comes
		 * through both readers (reliable and best effort), and the
		 * later copy may come after the follower is back, by a new
		 * lease; it would drop an admitted member. */
		for (unsigned i = 0; i < DIST_MEMBERS_MAX; i++)
			if (d->members[i].used && !strcmp(d->members[i].id, a->follower) &&
			    !(a->written_ns && a->written_ns < d->members[i].written)) {
				d->members[i].used = false;
				d->members[i].left = true;
				d->members[i].left_at = now;
				d->members[i].left_written = a->written_ns;
				d->api->dist_echo_forget(d->r, a->follower);
				log_msg(LOG_INFO, "distribute: follower %s left clock '%s' (stale, or "
						  "stopping): not waited for", a->follower, d->clock);
			}
		return 0;
	}
	for (unsigned i = 0; i < DIST_MEMBERS_MAX; i++) {
		struct dist_member *x = &d->members[i];

		/* An acknowledgement a follower wrote before its leave may
		 * arrive after it (best effort, another reader than the
		 * leave's): it would make that follower a member for its
		 * lease, waited for by every change meanwhile. Told by when
		 * it was written (the same host's clock as the leave's), not
		 * by its kind: one written after, by a follower back, takes
		 * it back at once (its lease may be late, retransmitted;
		 * ignoring its acknowledgements meanwhile let the leader
		 * decide without a fresh follower: a CI run under ASan, 2017
		 * readings 2.3 ms ahead). */
		if (!x->used && x->left && !strcmp(x->id, a->follower)) {
			if (!a->reliable && a->written_ns && x->left_written &&
			    a->written_ns <= x->left_written && now - x->left_at < DIST_LEAVE_ORDER_NS)
				return 0;
			x->left = false; /* back: its acknowledgements count again */
		}
		if (x->used && !strcmp(x->id, a->follower))
			m = x;
		else if (!free_slot && !member_live(x, now) &&
			 !(x->left && now - x->left_at < DIST_LEAVE_ORDER_NS))
			free_slot = x; /* not another's leave, still kept */
	}
	if (!m) {
		if (!free_slot) {
			if (!d->members_full_logged)
				log_msg(LOG_WARN, "distribute: more than %d followers of clock '%s': %s is "
						  "not waited for", DIST_MEMBERS_MAX, d->clock, a->follower);
			d->members_full_logged = true;
			return 0;
		}
		m = free_slot;
		if (m->id[0] && strcmp(m->id, a->follower))
			d->api->dist_echo_forget(d->r, m->id); /* gone: its echoes too */
		memset(m, 0, sizeof(*m));
		snprintf(m->id, sizeof(m->id), "%s", a->follower);
		m->used = true;
		log_msg(LOG_INFO, "distribute: follower %s joined clock '%s'", a->follower, d->clock);
	}
	m->seen = now;
	if (a->written_ns > m->written)
		m->written = a->written_ns;
	m->lease = a->lease_ns < DIST_LEASE_NS ? DIST_LEASE_NS
		   : a->lease_ns > 60 * INT64_C(1000000000) ? 60 * INT64_C(1000000000)
							      : a->lease_ns;
	/* What it holds under the current plan (acknowledgements of an
	 * earlier plan say only that it is alive). */
	if (a->plan == d->plan && (m->plan != d->plan || a->acked > m->acked)) {
		/* The first acknowledgement of the change announced last. */
		if (a->acked == d->fn.change && d->q_n)
			m->last_ack_ns = now - q_at(d, d->q_n - 1)->announced;
		m->acked = a->acked;
		m->plan = d->plan;
	}
	if (a->committed > m->committed)
		m->committed = a->committed;
	m->late = a->late;
	m->refused = a->refused;
	m->holds = a->holds;
	if (a->reliable && a->written_ns) {
		/* Its lease, echoed: this follower is waited for from now on
		 * (every change not decided yet), and hears here which it must
		 * know of before it is fresh (the last announced). */
		struct dist_ack e;

		memset(&e, 0, sizeof(e));
		snprintf(e.clock, sizeof(e.clock), "%s", d->clock);
		snprintf(e.follower, sizeof(e.follower), "%s", a->follower);
		snprintf(e.leader, sizeof(e.leader), "%s", d->leader_id);
		e.term = d->term;
		e.written_ns = a->written_ns;
		e.acked = d->fn.change;
		e.echo = true;
		if (d->api->dist_echo(d->r, &e) < 0)
			log_msg(LOG_DEBUG, "distribute: a TimeEcho write failed");
	}
	return 0;
}

/* ------------------------------------------------------------ both */

/* A host clock step (the offset from @was to @off) taken: said, counted. */
static void reanchored(struct dist *d, int64_t was, int64_t off)
{
	log_msg(LOG_WARN, "distribute: the host clock moved by %.6f s against CLOCK_MONOTONIC; "
			  "re-anchoring", (double)(off - was) / 1e9);
	pthread_mutex_lock(&d->mu);
	d->reanchors++;
	d->last_off = off;
	pthread_mutex_unlock(&d->mu);
}

/* Leader: the function in force re-expressed with the offset @off (the host
 * clock was stepped): the same function on this host, another on the wire,
 * flagged so that followers take it where it goes back (DIST_F_REANCHOR).
 * Only with nothing queued (the changes queued keep the offset they were
 * published with). */
static void leader_reanchor(struct dist *d, const struct clock_env *env, int64_t now, int64_t off)
{
	reanchored(d, d->off, off);
	snapshot(env->w, d, now, off);
	d->fn.flags |= DIST_F_REANCHOR; /* until the next change (plan_entry, snapshot) */
	publish(d, DIST_PUB_FAST | DIST_PUB_RELIABLE);
	d->next_hb = now + d->hb_ns;
}

/* Follower: the function in force re-expressed with the offset @off (the
 * host clock was stepped), never backwards: a function behind is held
 * until it catches up. Only with nothing queued (the commit would undo a
 * change decided ahead for an instant still to come: re-anchored once
 * they took effect, each committed with the offset it was translated
 * with) and no hold for a missed change (the commit would end it, and
 * readers would run on, fresh, past that change: re-anchored when the
 * gap is filled, or the gap's bound marks the clock stale), and only
 * while the segment holds the leader's function (have_cur: not a loss's
 * own, paused or running on). */
static void follower_reanchor(struct dist *d, const struct clock_env *env, int64_t off)
{
	int64_t e_mono = d->cur.effective_ns - off;
	unsigned fl = fn_flags(d->cur.flags) |
		      (atomic_load_explicit(env->stale, memory_order_relaxed) ? SHMCLOCK_FN_STALE : 0);

	reanchored(d, d->cur_off, off);
	lease_let_go(d, env);
	shmclock_writer_set_function(env->w, e_mono, d->cur.sim_base_ns, mult_scale(d->cur.mult), fl);
	d->off = d->cur_off = off;
}

/* Each tick: heartbeats (leader), re-anchoring after a host clock step
 * (both). */
static void dist_on_tick(struct mode_plain *p, const struct clock_env *env, int64_t now)
{
	struct dist *d = (struct dist *)p;
	int64_t off;

	if (!d->have)
		return;
	off = sample_offset(d->fn.timebase);
	/* The host clock was stepped: the same function, re-expressed. Not
	 * while changes are queued: they keep the offset they were published
	 * (leader) or translated (follower) with, and are re-anchored once
	 * they took effect; a follower's other conditions: follower_reanchor. */
	if (d->leader && !d->q_n && llabs(off - d->off) > DIST_REANCHOR_NS) {
		leader_reanchor(d, env, now, off);
	} else if (!d->leader && d->have_cur && llabs(off - d->cur_off) > DIST_REANCHOR_NS &&
		   !d->q_n && !d->gap_held) {
		follower_reanchor(d, env, off);
	}
	if (d->leader && now >= d->next_hb) {
		shmclock_info_t in;
		int64_t v = 0, want = 0, eb = d->fn.effective_ns - d->off;

		/* Whatever moved the clock besides a change (a reload's
		 * TimeScale, the system source's ticks) is a new function. */
		shmclock_writer_info(env->w, &in);
		shmclock_writer_eval(env->w, now, &v);
		want = shmclock_static_eval(eb, d->fn.sim_base_ns,
					    d->fn.flags & (DIST_F_PAUSED | DIST_F_STEPPED) ? 0 : d->fn.mult,
					    now);
		/* (With changes queued, what was published is ahead of the
		 * clock by design.) */
		if (!d->q_n &&
		    (llabs(v - want) > DIST_REANCHOR_NS || in.paused != !!(d->fn.flags & DIST_F_PAUSED) ||
		     scale_mult(in.scale) != d->fn.mult || in.jump_epoch != d->fn.jump_epoch))
			snapshot(env->w, d, now, d->off);
		publish(d, DIST_PUB_RELIABLE); /* the current function again: a heartbeat */
		d->next_hb = now + d->hb_ns;
	}
}

/* Status: the "distribute" object. */
static void dist_status(struct clock_mode *m, cJSON *status, const struct shmclockd_config *cfg,
			const shmclock_info_t *in, bool stale)
{
	struct dist *d = dist_of(m);
	cJSON *o = cJSON_CreateObject();
	struct dist_stats st;

	(void)cfg;
	(void)in;
	d->api->dist_get_stats(d->r, &st);
	cJSON_AddStringToObject(o, "role", d->leader ? "leader" : "follower");
	cJSON_AddStringToObject(o, "clock", d->clock);
	pthread_mutex_lock(&d->mu);
	cJSON_AddStringToObject(o, "leader", d->leader_id);
	cJSON_AddNumberToObject(o, "changes", (double)d->changes);
	cJSON_AddNumberToObject(o, "reanchors", (double)d->reanchors);
	cJSON_AddNumberToObject(o, "offset_ns", (double)d->last_off);
	cJSON_AddNumberToObject(o, "queued", (double)d->queued);
	if (!d->leader)
		cJSON_AddNumberToObject(o, "holding", (double)d->holding);
	cJSON_AddNumberToObject(o, "term", (double)d->shown_term);
	cJSON_AddNumberToObject(o, "conflicts", (double)d->conflicts);
	if (d->conflicts && mono_ns() - d->conflict_mono < DIST_CONFLICT_SHOW_NS) {
		cJSON_AddTrueToObject(o, "conflict");
		cJSON_AddStringToObject(o, "conflict_with", d->conflict_with);
		cJSON_AddNumberToObject(o, "conflict_term", (double)d->conflict_term);
	} else {
		cJSON_AddFalseToObject(o, "conflict");
	}
	{
		uint64_t counts[LATEHIST_N];

		/* Changes committed at their effective instant: how long after. */
		if (latehist_copy(&d->applied, counts)) {
			cJSON_AddNumberToObject(o, "applied_p50_ns", (double)latehist_quantile(counts, 0.5));
			cJSON_AddNumberToObject(o, "applied_p99_ns", (double)latehist_quantile(counts, 0.99));
			cJSON_AddNumberToObject(o, "applied_max_ns", (double)latehist_quantile(counts, 1.0));
		}
	}
	cJSON_AddNumberToObject(o, "lead_current_ns", (double)d->shown_lead);
	/* Changes whose readers switched at the instant by themselves (the
	 * rest were committed at or after it, readers held meanwhile). */
	cJSON_AddNumberToObject(o, "decided_ahead", (double)d->staged);
	if (d->leader) {
		uint64_t counts[LATEHIST_N];
		cJSON *fs = cJSON_AddArrayToObject(o, "followers");
		int64_t now = mono_ns();

		/* Two-phase: the members, how long their acknowledgements take,
		 * from a client's change to its commit. */
		for (unsigned i = 0; i < d->shown_members; i++) {
			const struct dist_member *mb = &d->shown[i];
			cJSON *f = cJSON_CreateObject();

			cJSON_AddStringToObject(f, "id", mb->id);
			cJSON_AddNumberToObject(f, "acked", (double)mb->acked);
			cJSON_AddNumberToObject(f, "committed", (double)mb->committed);
			cJSON_AddNumberToObject(f, "last_heard_ns", (double)(now - mb->seen));
			cJSON_AddNumberToObject(f, "last_ack_ns", (double)mb->last_ack_ns);
			cJSON_AddNumberToObject(f, "late_changes", (double)mb->late);
			cJSON_AddNumberToObject(f, "refused", (double)mb->refused);
			cJSON_AddNumberToObject(f, "holds", (double)mb->holds);
			cJSON_AddItemToArray(fs, f);
		}
		if (latehist_copy(&d->acks, counts)) {
			cJSON_AddNumberToObject(o, "ack_p50_ns", (double)latehist_quantile(counts, 0.5));
			cJSON_AddNumberToObject(o, "ack_p99_ns", (double)latehist_quantile(counts, 0.99));
		}
		if (latehist_copy(&d->to_commit, counts)) {
			cJSON_AddNumberToObject(o, "commit_p50_ns", (double)latehist_quantile(counts, 0.5));
			cJSON_AddNumberToObject(o, "commit_p99_ns", (double)latehist_quantile(counts, 0.99));
		}
		cJSON_AddNumberToObject(o, "postponed", (double)d->postponed);
		cJSON_AddNumberToObject(o, "lost_followers", (double)d->lost_members);
		cJSON_AddNumberToObject(o, "lead_ns", (double)d->lead_ns);
		cJSON_AddBoolToObject(o, "deposed", d->shown_deposed);
		cJSON_AddNumberToObject(o, "heartbeat_ns", (double)d->hb_ns);
		cJSON_AddNumberToObject(o, "sent", (double)st.sent);
		cJSON_AddNumberToObject(o, "acks_received", (double)st.acks_received);
	} else {
		cJSON_AddNumberToObject(o, "late_changes", (double)d->late);
		{
			uint64_t counts[LATEHIST_N];

			if (latehist_copy(&d->lateness, counts)) {
				cJSON_AddNumberToObject(
					o, "late_p50_ns",
					(double)latehist_quantile_max(counts, 0.5, d->worst_late_ns));
				cJSON_AddNumberToObject(
					o, "late_p99_ns",
					(double)latehist_quantile_max(counts, 0.99, d->worst_late_ns));
			}
		}
		cJSON_AddNumberToObject(o, "worst_late_ns", (double)d->worst_late_ns);
		cJSON_AddNumberToObject(o, "last_late_ns", (double)d->last_late_ns);
		cJSON_AddNumberToObject(o, "leaders", (double)d->leaders);
		cJSON_AddNumberToObject(o, "refused", (double)d->refused);
		if (d->skew_n >= 3) {
			cJSON_AddNumberToObject(o, "host_offset_ns", (double)d->host_offset_ns);
			cJSON_AddBoolToObject(o, "clocks_disagree", d->clocks_disagree);
		}
		if (d->refused_last[0])
			cJSON_AddStringToObject(o, "refused_last", d->refused_last);
		cJSON_AddNumberToObject(o, "holds", (double)d->holds);
		cJSON_AddNumberToObject(o, "hold_stales", (double)d->hold_stales);
		cJSON_AddNumberToObject(o, "ran_past_instant", (double)d->ran_past);
		cJSON_AddNumberToObject(o, "lease_expired", (double)d->lease_expired);
		/* The leader's echoes of this follower's leases: how many, how
		 * long ago the last one; whether it waits for one to be fresh. */
		cJSON_AddNumberToObject(o, "echoes", (double)d->echoes);
		cJSON_AddNumberToObject(o, "last_echo_age_ns",
					d->echo_mono ? (double)(mono_ns() - d->echo_mono) : -1.0);
		cJSON_AddBoolToObject(o, "awaiting_echo", d->shown_admit);
		cJSON_AddNumberToObject(o, "acks_sent", (double)st.acks_sent);
		cJSON_AddNumberToObject(o, "received", (double)st.received);
		cJSON_AddNumberToObject(o, "lost", (double)st.lost);
		cJSON_AddNumberToObject(o, "last_message_age_ns", (double)st.last_age_ns);
		cJSON_AddStringToObject(o, "on_leader_loss", d->run_on_loss ? "run" : "hold");
	}
	pthread_mutex_unlock(&d->mu);
	cJSON_AddBoolToObject(o, "stale", stale);
	cJSON_AddItemToObject(status, "distribute", o);
}

static int dist_change(struct clock_mode *m, const struct clock_env *env, struct cmd *c,
		       const shmclock_info_t *in)
{
	struct dist *d = dist_of(m);
	int64_t now = mono_ns();

	/* A follower whose lease ran out (this process stopped meanwhile)
	 * takes what waited as one back from silence. */
	if (!d->leader && d->lease_until && now >= d->lease_until)
		lease_keep(d, env, now);
	/* As plain first: the period may follow. */
	mode_plain_ops.change(m, env, c, in);
	/* A follower's clock thread refused the changes (its source takes
	 * none from clients). */
	if (d->leader && cmd_changes_time(c->req.kind))
		return leader_change(d, env, c, mono_ns(), false);
	if (!d->leader && c->req.kind == CMD_FUNCTION)
		return follow_apply(d, env, c);
	if (d->leader && c->req.kind == CMD_FUNCTION)
		return leader_heard(d, env, c->arg_fn);
	if (c->req.kind == CMD_ACK && c->arg_ack->echo)
		return d->leader ? 0 : follower_echo(d, env, c->arg_ack, mono_ns());
	if (c->req.kind == CMD_ACK)
		return d->leader ? leader_ack(d, c->arg_ack, mono_ns()) : 0;
	if (d->leader && c->req.kind == CMD_STALE)
		return 0; /* the topic is quiet: nothing to a leader */
	/* Silence: what the leader announced is void (a leader back
	 * resends its function). */
	if (!d->leader && c->req.kind == CMD_STALE && c->arg_stale) {
		/* Readers held past an instant stay there, stale (the clock
		 * thread's own mark then finds the clock marked). */
		lost_leader(d, env);
		q_clear(d, env, "the leader is silent");
		follower_leave(d); /* said once stale; a member again once it follows */
	}
	/* The clock thread's own commits (the stale mark, a reload's): now,
	 * not at an instant this follower holds (opened again after). */
	if (c->req.kind == CMD_STALE || c->req.kind == CMD_RELOAD)
		hold_drop(d, env);
	return CLOCK_MODE_PASS;
}

static int64_t dist_tick(struct clock_mode *m, const struct clock_env *env, int64_t now)
{
	struct dist *d = dist_of(m);
	int64_t next, q;

	/* A lease run out first: nothing this follower did since counts. */
	if (!d->leader && d->lease_until && now >= d->lease_until)
		lease_keep(d, env, now);
	next = mode_plain_ops.tick(m, env, now);
	if (next == CLOCK_MODE_AGAIN)
		return next;
	now = mono_ns();
	if (d->leader && d->announce_at != INT64_MAX) {
		if (now >= d->announce_at)
			announce(d, env, now);
		else if (d->announce_at < next)
			next = d->announce_at;
	}
	q = run_queue(d, env, now);
	if (q < next)
		next = q;
	if (!d->leader)
		admit_check(d, env); /* the queue it waited for may have emptied */
	if (!d->leader && d->gap)
		gap_hold(d, env);
	if (!d->leader && d->gap && !d->hold_stale) {
		int64_t bound = DIST_LOST_BASE_NS + 2 * d->fn.lead_ns;

		if (now - d->gap_since >= bound) {
			log_msg(LOG_WARN, "distribute: a change of leader %s was missed and not repeated "
					  "for %.3f s: the clock is stale until it hears the leader",
				d->fn.leader, (double)(now - d->gap_since) / 1e9);
			d->hold_stale = true;
			lost_leader(d, env); /* held where the gap was seen: stays there */
			follower_leave(d);
			pthread_mutex_lock(&d->mu);
			d->hold_stales++;
			pthread_mutex_unlock(&d->mu);
		} else if (d->gap_since + bound < next) {
			next = d->gap_since + bound;
		}
	}
	if (!d->leader && d->joined) {
		follower_ack(d, now, false);
		if (d->next_lease < next)
			next = d->next_lease;
	}
	if (!d->leader && (q = lease_keep(d, env, mono_ns())) < next)
		next = q;
	if (!d->leader && d->leave_due && atomic_load_explicit(env->stale, memory_order_relaxed))
		leave_send(d);
	pthread_mutex_lock(&d->mu);
	d->shown_lead = d->lead_cur;
	if (d->leader) {
		d->shown_members = 0;
		for (unsigned i = 0; i < DIST_MEMBERS_MAX; i++)
			if (member_live(&d->members[i], now))
				d->shown[d->shown_members++] = d->members[i];
	}
	pthread_mutex_unlock(&d->mu);
	return next;
}

static void dist_cancel(struct clock_mode *m, const struct clock_env *env)
{
	struct dist *d = dist_of(m);
	bool staged = false;

	for (unsigned i = 0; i < d->q_n; i++)
		staged |= q_at(d, i)->staged;
	lease_let_go(d, env);
	if (!d->leader && !staged && d->q_n && q_at(d, 0)->frozen &&
	    mono_ns() >= q_at(d, 0)->e_mono && clock_env_set_stale(env, true) == 0)
		/* Readers held at an instant past: the mark completes the
		 * update there, stale (withdrawn first, they would run on
		 * fresh until the mark). */
		q_at(d, 0)->frozen = false;
	q_clear(d, env, "shmclockd is stopping: the change was not made");
	/* A member that stops marks its clock stale (kept in the segment for
	 * its readers, and for the next shmclockd, which starts stale), then
	 * says it leaves: nothing its leader does without it shows here as
	 * fresh. Not with a change decided ahead in its segment (the mark
	 * would wait for its instant): the leader then waits its lease. */
	if (d->leader || staged)
		return;
	follower_leave(d);
	if (d->leave_due && clock_env_set_stale(env, true) == 0 &&
	    atomic_load_explicit(env->stale, memory_order_relaxed))
		leave_send(d);
}

/* A reload on a clock between hosts: what is the leader's function is not
 * a key of this host's file. A leader's TimeScale or UnixTimeAtZero set
 * by a reload would change this host's clock alone (apply_reload commits
 * it at once), its followers fresh on the old function until its next
 * heartbeat, and lost altogether under a change being agreed; a
 * follower's would be its own, off its leader's. Refused, naming what
 * does it. */
static int dist_reload(struct clock_mode *m, const struct clock_env *env,
		       const struct shmclockd_config *next, char *err, size_t errlen)
{
	const struct dist *d = dist_of(m);
	const struct shmclockd_config *cur = env->cfg;

	if (next->scale != cur->scale) {
		snprintf(err, errlen, "TimeScale %s",
			 d->leader ? "of a leader between hosts changes with a change its followers "
				     "agree on: shmclockctl scale"
				   : "of a follower is its leader's: change it there (shmclockctl scale)");
		return -EINVAL;
	}
	if (next->has_unix_zero != cur->has_unix_zero ||
	    (next->has_unix_zero && next->unix_zero_ns != cur->unix_zero_ns)) {
		snprintf(err, errlen, "UnixTimeAtZero %s",
			 d->leader ? "of a leader between hosts changes only with its restart (its "
				     "followers take it from its function)"
				   : "of a follower is its leader's: it changes there, with a restart");
		return -EINVAL;
	}
	return 0;
}

static const struct clock_mode_ops mode_distribute_ops = {
	.name = "distribute",
	.start = dist_start,
	.change = dist_change,
	.reload = dist_reload,
	.tick = dist_tick,
	.cancel = dist_cancel,
	.status = dist_status,
	.destroy = dist_destroy,
};
