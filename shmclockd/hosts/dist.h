/* SPDX-License-Identifier: MIT */
/*
 * The hosts mode's insides (mode_distribute.c and the files beside this
 * header): its limits, its state split by role, and what each file offers
 * the others. The protocol's words (committed, announced, held, stale,
 * lease, echo, term, plan, epoch) are the glossary's in doc/hacking.md.
 *
 * Files, one job each:
 *   timebase.c  the host-independent time scale, the offset to
 *               CLOCK_MONOTONIC, re-anchoring after a host clock step
 *   term.c      leaders' terms: which of two ranks above, conflicts
 *   queue.c     changes waiting for their instants, readers' holds there,
 *               and committing them (dist_run_queue)
 *   leader.c    publishing, planning and deciding a change
 *   members.c   the leader's followers: acknowledgements, leases and
 *               echoes, the adaptive Lead
 *   follower.c  checking and applying what a leader sends
 *   liveness.c  a follower's acknowledgements and leases, its leave, and
 *               losing its leader (dist_lost_leader: every trigger)
 *   status.c    the "distribute" object of status
 *
 * On the clock thread only, except the status part (struct dist_shown,
 * under its mu), read by status from the control thread.
 */
#ifndef SHMCLOCKD_HOSTS_DIST_H
#define SHMCLOCKD_HOSTS_DIST_H

#include <assert.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <shmclock/shmclock.h>
#include <shmclock/time.h>

#include "latehist.h"
#include "mode.h"
#include "mode_plain.h"
#include "ros2.h"


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
/* ... and the evidence starts again when a message's delay grows by more
 * than this over the one before: an offset between two clocks is the same
 * on every message, while a wait (this process stopped, a backlog behind
 * it) grows the delay at once. Without it, a follower stopped twice in a
 * row, its leader silent between, took two backlogs for an offset (one
 * hosts-guard fuzz run in about twenty under ASan). */
#define DIST_SKEW_JUMP_NS 50000000
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
static_assert(DIST_ECHO_WRITERS >= DIST_MEMBERS_MAX, "an echo writer for every member");
static_assert(DIST_ON_SLOW_MAX <= 32, "OnSlow counts in a member's 32 late_bits");
/* DIST_ACK_HB_NS, DIST_LEASE_NS: ros2.h (lockstep between hosts too) */
/* How long after a follower's leave an acknowledgement from it (best
 * effort) written before the leave is taken as overtaken by it. */
#define DIST_LEAVE_ORDER_NS INT64_C(1000000000)
#define DIST_LOST_BASE_NS INT64_C(500000000)
#define DIST_LEAD_MIN_NS INT64_C(3000000)
#define DIST_LEAD_MAX_NS INT64_C(1000000000)
/* Lead: DIST_LEAD_MARGIN times the DIST_LEAD_PCT percentile of the time
 * every member held a change, over the last DIST_ACK_RECENT changes
 * (dist_adapt_lead). A change not held by all half a Lead before its
 * instant is postponed: 3 x p90 covers 1.5 x p90. */
#define DIST_LEAD_MARGIN 3
#define DIST_LEAD_PCT 90
#define DIST_ACK_RECENT 32
/* A follower that was the last to hold this many of the last
 * DIST_ACK_RECENT changes is the fleet's straggler (until it holds up fewer
 * than half as many): said in the log and in
 * status ("slowest"), every change waits for it. */
#define DIST_SLOWEST_OF 24
/* OnSlow: a follower asked to step aside stays out this long (stale, not a
 * member), then rejoins as after silence. */
#define DIST_ASIDE_NS INT64_C(10000000000)
/* A leader of this many followers whose DDS sockets got less receive
 * buffer than Cyclone asks for (1 MiB; net.core.rmem_max caps it) says so,
 * once: starved, it would drop their datagrams within a second. */
#define DIST_FLEET_WARN 8
#define DIST_RCVBUF_WANT (1024 * 1024)
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
	/* two-phase: decided (the glossary's word, doc/hacking.md): the
	 * leader decided it (every member holds it), or a follower heard it
	 * said committed (the wire's word for a decided change) */
	bool decided;
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
	int64_t acked_at;       /* CLOCK_MONOTONIC when acked last grew */
	uint64_t serial;        /* its join's number: who it is in slow[] */
	unsigned slowest;       /* status: of the last changes, those it held up last */
	bool straggler;         /* status: it is the straggler said (slowest_said) */
	/* OnSlow: of the last 32 changes decided while it was a member, those
	 * it was late on (bit 0 the last: dist_note_slowest); the last change
	 * postponed for it while another member held it; asked to step aside
	 * (said in every echo to it from then on) */
	uint32_t late_bits;
	uint64_t late_change;
	bool asked_aside;
	bool used;
	bool gone;              /* its lease ran out, said (recording); back: joined again */
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

/* Why a follower lost its leader (dist_lost_leader): one path, the reason
 * in the log and in status. */
#define DIST_LOSSES(X)                                                                             \
	X(LOSS_SILENCE, "silence")   /* no word for StaleAfter (ros2.c's watch) */                 \
	X(LOSS_HELD, "held")         /* an instant held that long, not committed */               \
	X(LOSS_GAP, "gap")           /* a change missed, not repeated that long */                \
	X(LOSS_LEASE, "lease")       /* its lease ran out (it was stopped or starved) */          \
	X(LOSS_ASIDE, "aside")       /* the leader asked it to step aside (OnSlow) */

enum dist_loss {
#define DIST_LOSS_ENUM(id, name) id,
	DIST_LOSSES(DIST_LOSS_ENUM)
#undef DIST_LOSS_ENUM
	LOSS_N
};

/* The leader's part. */
struct dist_leader {
	int64_t next_hb;        /* CLOCK_MONOTONIC of the next heartbeat */
	uint64_t seq;           /* of the samples it published */
	/* Terms: its own (a follower's is fn.term), the highest it heard
	 * of, when it starts publishing (INT64_MAX: it did), and whether a
	 * live leader above it took over (it stopped publishing). */
	uint64_t term, max_term;
	int64_t announce_at;
	bool deposed;
	/* two-phase: its members, the last change decided, the plan
	 * (re-plans so far), the adaptive Lead, the next repetition of what
	 * members have not acknowledged or confirmed */
	struct dist_member members[DIST_MEMBERS_MAX];
	uint64_t committed, plan;
	int64_t lead_cur;
	int64_t recent[DIST_ACK_RECENT]; /* the last acknowledgement delays */
	unsigned recent_n, recent_i;
	/* the member (serial) each of the last changes waited for last */
	uint64_t slow[DIST_ACK_RECENT], serials;
	unsigned slow_i;
	uint64_t slowest_said;  /* the straggler said (serial), until it is none */
	bool rcvbuf_said;       /* its buffers looked at (DIST_FLEET_WARN): once */
	int64_t next_repeat;
	bool members_full_logged;
	/* clients' changes not announced yet, oldest first. One change is
	 * agreed at a time: the next is announced once the one before took
	 * effect (dist_leader_next), so that every change has its own
	 * instant, decided ahead on every host, as the model has it. */
	struct cmd *waiting[DIST_QUEUE_MAX];
	unsigned w_first, w_n;
};

/* The follower's part. */
struct dist_follower {
	/* the function committed last (re-anchoring re-commits it), and the
	 * offset it is in the segment with: not always d->off, which a
	 * sample queued for later moves on (a re-anchor compared with off
	 * was lost then, and readers ran on the old offset until that
	 * change's instant) */
	struct dist_fn cur;
	int64_t cur_off;
	bool have_cur;          /* ... and the segment holds it (not a loss's own) */
	/* two-phase: its identity, the commits heard, the plan of what it
	 * holds, what it acknowledged last and when, whether it marked
	 * itself stale holding an instant, whether it is a member (it
	 * applied a committed function since it was last stale) */
	char self_id[97];
	uint64_t commit_seen, fplan;
	uint64_t ack_sent_acked, ack_sent_plan, ack_sent_commit;
	int64_t next_lease;     /* when its next lease is due */
	bool hold_stale, joined;
	/* ... how far its readers may go on the leader's function (0: not
	 * known yet), and the instant they stop at meanwhile (if held) */
	int64_t lease_until, lease_at;
	bool lease_held;
	int64_t aside_until;    /* ... asked aside by its leader (OnSlow): out until then */
	int64_t join_ts;        /* ... the stamp of its first lease since it joined */
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
	 * back). */
	bool admit_wait, admit_echoed;
	int64_t admit_ts;
	uint64_t admit_change;
	struct dist_lease_sent {
		int64_t ts, mono, lease;
	} lring[DIST_LRING_N];
	unsigned lring_i;
	int64_t last_stamp;
	/* ... and whether it follows again once the function in force it
	 * took after silence (or from a new leader) takes effect: its instant
	 * was still to come, and what the leader shows until then is not
	 * known here (changes it missed). Stale until then. */
	bool rejoin;
	int64_t joined_mono;
	bool gap;               /* a change missed (announced after a gap) */
	bool gap_held;          /* ... and readers held for it */
	int64_t gap_since, gap_at; /* ... seen, and held from */
	/* arrival minus sending of the last messages (ring) */
	int64_t skew[DIST_SKEW_N];
	int64_t skew_last;          /* the last message's arrival minus sending */
	unsigned skew_n, skew_i;
	bool skew_bad, skew_far;  /* said; seen beyond the bound (since skew_far_at) */
	int64_t skew_far_at;
	/* the least arrival minus sending while it followed its leader (if
	 * have_base), and since when late samples are passed over (0: not) */
	int64_t skew_base, rejoin_skip_at;
	bool have_base;
	/* when it started, and whether it said no leader was heard since
	 * (DIST_NONE_HINT_NS) */
	int64_t created;
	bool none_said;
	/* the kinds of refusal logged for refused_leader */
	char refused_leader[97];
	unsigned refused_logged;
};

/* What status shows, under mu (the clock thread writes, status reads). */
struct dist_shown {
	pthread_mutex_t mu;
	char leader_id[97];     /* the leader: this one's own id, or the one followed */
	uint64_t changes, late, leaders, reanchors, refused, queued;
	char refused_last[200];
	/* the last conflict: another live leader of the clock */
	uint64_t conflicts, conflict_term;
	char conflict_with[97];
	int64_t conflict_mono;
	uint64_t term;          /* the term led or followed */
	int64_t host_offset_ns; /* follower: this host's clock minus the leader's (+ delay) */
	bool clocks_disagree, have_host_offset;
	bool deposed;
	int64_t worst_late_ns, last_late_ns;
	int64_t last_off;
	/* two-phase: postponements, members lost (leader), holds past an
	 * instant and the stale marks they made (follower) */
	uint64_t postponed, lost_members, holds, hold_stales;
	uint64_t asked_aside;   /* leader: followers asked to step aside (OnSlow) */
	uint64_t staged;        /* changes decided ahead of their instant */
	/* follower: changes this thread first acted on after their instant
	 * (it ran late): its readers showed the function before meanwhile */
	uint64_t ran_past;
	/* follower: its lease ran out (it sent none for that long) */
	uint64_t lease_expired;
	/* follower: its leader lost, by reason, and the last reason */
	uint64_t losses[LOSS_N];
	int last_loss;          /* enum dist_loss; -1: none */
	uint64_t holding;       /* follower: the change whose instant its readers stop at */
	/* follower: the leader's echoes of its leases, when the last came,
	 * whether it waits to be admitted */
	uint64_t echoes;
	int64_t echo_mono;
	bool admit_wait;
	/* the adaptive Lead, the members (leader) */
	int64_t lead;
	unsigned n_members;
	struct dist_member members[DIST_MEMBERS_MAX];
	/* leader: from an announcement to its last acknowledgement; from a
	 * client's change to its commit */
	struct latehist acks;
	struct latehist to_commit;
	/* how long after the effective instant each change was committed */
	struct latehist applied;
	/* how late the changes that arrived after their instant were */
	struct latehist lateness;
};

struct dist {
	struct mode_plain plain;  /* first: it ticks as the plain mode */
	const struct ros2_api *api;
	struct ros2 *r;
	bool leader;
	int64_t lead_ns, hb_ns;
	bool run_on_loss;
	unsigned on_slow;       /* Distribute.OnSlow (0: wait) */
	int64_t stale_ns;       /* follower: Distribute.StaleAfter (0: three heartbeats) */
	char clock[SHMCLOCK_NAME_MAX + 1];
	/* the function last published (leader) or applied (follower) */
	struct dist_fn fn;
	bool have;
	int64_t off;            /* the offset fn was translated with */
	/* waiting for their instants, oldest first */
	struct dist_pending q[DIST_QUEUE_MAX];
	unsigned q_first, q_n;
	char conflict_logged[97];  /* the other leader last logged */
	struct dist_leader ldr;
	struct dist_follower flw;
	struct dist_shown st;
	/* What the clock thread lends (its recorder, record.h, may come and
	 * go: record, record-stop). Set at start, on the clock thread. */
	const struct clock_env *env;
};

/* Leader: members whose lease ran out since the last pass, said once
 * each to the recording ("lost"; one heard again is "joined" again). */
void dist_note_gone(struct dist *d, int64_t now);

/* An event between hosts into the recording, if there is one: @event
 * (joined, left, lost, following, leader-lost, conflict), @host, @term (0:
 * unknown), @detail ("" none). Clock thread. */
void dist_event(struct dist *d, const char *event, const char *host, uint64_t term,
		const char *detail);


static inline int64_t mono_ns(void)
{
	return shmclock_steady_now().ns;
}

static inline clockid_t tb_clock(int tb)
{
	return tb == DIST_TB_TAI ? CLOCK_TAI : CLOCK_REALTIME;
}

static inline uint64_t scale_mult(double scale)
{
	return (uint64_t)nearbyint(scale * 4294967296.0);
}

static inline double mult_scale(uint64_t mult)
{
	return (double)mult / 4294967296.0;
}

/* A function's flags on the wire (DIST_F_*) as the writer's
 * (SHMCLOCK_FN_*): paused and stepped; the rest is the commit's own. */
static inline unsigned fn_flags(uint32_t wire)
{
	return (wire & DIST_F_PAUSED ? SHMCLOCK_FN_PAUSED : 0) |
	       (wire & DIST_F_STEPPED ? SHMCLOCK_FN_STEPPED : 0);
}

static inline struct dist_pending *q_at(struct dist *d, unsigned i)
{
	return &d->q[(d->q_first + i) % DIST_QUEUE_MAX];
}

static inline struct dist *dist_of(struct clock_mode *m)
{
	return (struct dist *)m;
}

static inline bool member_live(const struct dist_member *m, int64_t now)
{
	return m->used && now - m->seen <= m->lease;
}

/* A decision must reach the members before the instant: the leader
 * decides or postpones this long before it. */
static inline int64_t guard_ns(const struct dist *d)
{
	return d->ldr.lead_cur / 2;
}

/* timebase.c */
int64_t dist_sample_offset(int tb);
int dist_leader_timebase(void);
void dist_leader_reanchor(struct dist *d, const struct clock_env *env, int64_t now, int64_t off);
void dist_follower_reanchor(struct dist *d, const struct clock_env *env, int64_t off);

/* term.c */
bool dist_fn_live(const struct dist_fn *f);
int dist_rank_cmp(uint64_t ta, const char *ia, uint64_t tb, const char *ib);
void dist_note_conflict(struct dist *d, const struct dist_fn *f, uint64_t own_term,
			const char *own_id, const char *what);

/* queue.c */
struct dist_pending *dist_q_push(struct dist *d);
void dist_q_count(struct dist *d);
void dist_q_clear(struct dist *d, const struct clock_env *env, const char *why);
void dist_close_open(const struct clock_env *env);
void dist_hold_drop(struct dist *d, const struct clock_env *env);
bool dist_follower_stale(const struct dist *d, const struct clock_env *env);
int64_t dist_run_queue(struct dist *d, const struct clock_env *env, int64_t now);
void dist_count_late(struct dist *d, int64_t ns);

/* leader.c */
void dist_publish(struct dist *d, unsigned how);
void dist_publish_deposed(struct dist *d);
void dist_snapshot(shmclock_writer_t *w, struct dist *d, int64_t mono, int64_t off);
void dist_announce(struct dist *d, const struct clock_env *env, int64_t now);
int dist_leader_heard(struct dist *d, const struct clock_env *env, const struct dist_fn *f);
int dist_leader_change(struct dist *d, const struct clock_env *env, struct cmd *c, int64_t now,
		       bool in_turn);
void dist_leader_decide(struct dist *d, int64_t now);
void dist_leader_own(struct dist *d, const struct dist_pending *p, int64_t now);
void dist_leader_postpone(struct dist *d, const struct clock_env *env, unsigned i, int64_t now);
int64_t dist_leader_repeat(struct dist *d, int64_t now);
bool dist_leader_next(struct dist *d, const struct clock_env *env);

/* members.c */
bool dist_all_hold(const struct dist *d, uint64_t n, int64_t now);
bool dist_all_confirmed(const struct dist *d, uint64_t n, int64_t now);
unsigned dist_members_live(const struct dist *d, int64_t now);
int64_t dist_repeat_ns(const struct dist *d);
void dist_adapt_lead(struct dist *d, int64_t ack_ns);
void dist_note_slowest(struct dist *d, const struct dist_pending *p, int64_t now);
void dist_ask_aside(struct dist *d, struct dist_member *m);
/* This process's DDS sockets: datagrams dropped, the smallest receive
 * buffer granted (status.c). False: unknown. */
bool dist_udp_sockets(double *drops, double *rcvbuf);
unsigned dist_slowest_count(const struct dist *d, const struct dist_member *m);
int dist_leader_ack(struct dist *d, const struct dist_ack *a, int64_t now);

/* follower.c */
void dist_gap_hold(struct dist *d, const struct clock_env *env);
int dist_follow_apply(struct dist *d, const struct clock_env *env, struct cmd *c);
void dist_admit_set(struct dist *d, bool wait);
void dist_follower_fresh(struct dist *d, const struct clock_env *env, const struct dist_fn *f,
			 int64_t now, bool jump);
void dist_admit_check(struct dist *d, const struct clock_env *env);

/* liveness.c */
void dist_lease_let_go(struct dist *d, const struct clock_env *env);
int dist_follower_echo(struct dist *d, const struct clock_env *env, const struct dist_ack *a,
		       int64_t now);
void dist_follower_leave(struct dist *d);
void dist_leave_send(struct dist *d);
void dist_follower_ack(struct dist *d, int64_t now, bool force);
void dist_lost_leader(struct dist *d, const struct clock_env *env, enum dist_loss why,
		      const char *fmt, ...) __attribute__((format(printf, 4, 5)));
const char *dist_loss_name(int why);
int64_t dist_lease_keep(struct dist *d, const struct clock_env *env, int64_t now);

/* status.c */
void dist_status(struct clock_mode *m, cJSON *status, const struct shmclockd_config *cfg,
		 const shmclock_info_t *in, bool stale);

#endif
