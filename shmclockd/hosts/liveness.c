/* SPDX-License-Identifier: MIT */
/*
 * A follower's liveness: its acknowledgements and leases, its leave, its
 * readers held at its lease's end, and losing its leader
 * (dist_lost_leader, every trigger).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shmclock/time.h>
/* After shmclock.h: shmclock_static_eval(), the function readers evaluate. */
#include <shmclock/static/shmclock.h>

#include "log.h"
#include "hosts/dist.h"

/* Follower: the end of its lease let go (the update open there
 * withdrawn), before any other commit or hold of its own: a commit would
 * wait for that instant, freeze_at would find the update open. Opened
 * again by lease_keep at the end of the clock thread's pass. */
void dist_lease_let_go(struct dist *d, const struct clock_env *env)
{
	if (!d->flw.lease_held)
		return;
	dist_close_open(env);
	d->flw.lease_held = false;
}

/* Follower: a stamp for a TimeAck (CLOCK_REALTIME, never back, never the
 * same twice): the leader's echo names the lease by it. */
static int64_t follower_stamp(struct dist *d)
{
	struct timespec ts;
	int64_t v;

	clock_gettime(CLOCK_REALTIME, &ts);
	v = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	if (v <= d->flw.last_stamp)
		v = d->flw.last_stamp + 1;
	d->flw.last_stamp = v;
	return v;
}

/* Follower: its leader's echo of one of its leases (CMD_ACK, a->echo):
 * the leader waits for it until that lease's end from its arrival, so
 * its readers may go on until that lease's end from its sending; and it
 * may be what admits it. Anything else (another follower's, another
 * leader's, a lease this follower did not write lately) is nothing. */
int dist_follower_echo(struct dist *d, const struct clock_env *env, const struct dist_ack *a,
		       int64_t now)
{
	const struct dist_lease_sent *e = NULL;
	int64_t until;

	if (d->leader || !d->flw.joined || !d->have || strcmp(a->follower, d->flw.self_id) ||
	    strcmp(a->leader, d->fn.leader) || a->term != d->fn.term)
		return 0;
	/* Asked to step aside (OnSlow): stale and out, as after a loss, and
	 * back once the time is over (follow_apply). At most a minute. Only
	 * a request of this membership (naming a stamp of its since it
	 * joined): a late copy of one before it left would send it out again. */
	if (a->aside_ns > 0) {
		if (!d->flw.join_ts || a->written_ns < d->flw.join_ts)
			return 0;
		int64_t for_ns = a->aside_ns < 60 * INT64_C(1000000000) ? a->aside_ns
									 : 60 * INT64_C(1000000000);

		d->flw.aside_until = now + for_ns;
		dist_lost_leader(d, env, LOSS_ASIDE,
				 "it asked this follower to step aside for %.1f s: it held up its "
				 "changes (OnSlow)", (double)for_ns / 1e9);
		return 0;
	}
	for (unsigned i = 0; i < DIST_LRING_N; i++)
		if (d->flw.lring[i].ts && d->flw.lring[i].ts == a->written_ns)
			e = &d->flw.lring[i];
	if (!e)
		return 0;
	until = e->mono - DIST_LEASE_MARGIN_NS + e->lease;
	if (until > d->flw.lease_until)
		d->flw.lease_until = until;
	if (d->flw.admit_wait && d->flw.admit_ts && a->written_ns >= d->flw.admit_ts) {
		d->flw.admit_echoed = true;
		if (a->acked > d->flw.admit_change)
			d->flw.admit_change = a->acked;
	}
	pthread_mutex_lock(&d->st.mu);
	d->st.echoes++;
	d->st.echo_mono = now;
	pthread_mutex_unlock(&d->st.mu);
	dist_admit_check(d, env);
	return 0;
}

/* Follower: no longer a member (it marks itself stale). It says so (a
 * lease of 0, reliably: leave_send) once the stale mark is in its segment,
 * never before (dist_tick), so that its leader stops waiting for it at
 * once, not its lease later; a leader that misses it waits the lease, as
 * for a follower that died. */
void dist_follower_leave(struct dist *d)
{
	if (d->flw.joined && d->have) {
		/* The leader it leaves (a new one's function may be taken in
		 * the same pass, before the leave goes). */
		snprintf(d->flw.leave_leader, sizeof(d->flw.leave_leader), "%s", d->fn.leader);
		d->flw.leave_term = d->fn.term;
		d->flw.leave_due = true;
	}
	d->flw.joined = false;
	if (d->flw.admit_wait)
		dist_admit_set(d, false);
	d->flw.lease_until = 0;
}

/* Follower: a TimeAck to @leader's @term from this follower, its counts
 * and lease 0 (a leave, unless the caller sets them). */
static void ack_head(struct dist *d, struct dist_ack *a, const char *leader, uint64_t term)
{
	memset(a, 0, sizeof(*a));
	a->written_ns = follower_stamp(d);
	snprintf(a->clock, sizeof(a->clock), "%s", d->clock);
	snprintf(a->follower, sizeof(a->follower), "%s", d->flw.self_id);
	snprintf(a->leader, sizeof(a->leader), "%s", leader);
	a->term = term;
}

void dist_leave_send(struct dist *d)
{
	struct dist_ack a;

	ack_head(d, &a, d->flw.leave_leader, d->flw.leave_term);
	if (d->api->dist_ack(d->r, &a, true) < 0)
		log_msg(LOG_DEBUG, "distribute: a TimeAck write failed");
	d->flw.leave_due = false;
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

		if (!p->decided && !p->frozen)
			return p->fn.change - 1;
	}
	return d->fn.change;
}

/* Follower: tells the leader what it holds (follower_holds, under its
 * plan) and the commits it heard: when that changed, and every
 * DIST_ACK_HB_NS as its lease. Only a member: a follower that applied a
 * committed function since it was last stale. */
void dist_follower_ack(struct dist *d, int64_t now, bool force)
{
	struct dist_ack a;

	if (!d->flw.joined || !d->have)
		return;
	bool lease = now >= d->flw.next_lease;
	uint64_t holds = follower_holds(d);

	if (!force && !lease && d->flw.ack_sent_acked == holds &&
	    d->flw.ack_sent_plan == d->flw.fplan && d->flw.ack_sent_commit == d->flw.commit_seen)
		return;
	ack_head(d, &a, d->fn.leader, d->fn.term);
	a.plan = d->flw.fplan;
	a.acked = holds;
	a.committed = d->flw.commit_seen;
	/* The leader waits for this follower, and declares it lost, no
	 * sooner than it would notice the leader's silence (and be stale). */
	pthread_mutex_lock(&d->st.mu);
	a.late = d->st.late;
	a.refused = d->st.refused;
	a.holds = d->st.holds;
	pthread_mutex_unlock(&d->st.mu);
	a.lease_ns = dist_silence_ns(d->stale_ns, d->fn.heartbeat_ns) + 500000000;
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
		struct dist_lease_sent *e = &d->flw.lring[d->flw.lring_i++ % DIST_LRING_N];

		e->ts = a.written_ns;
		e->mono = now;
		if (!d->flw.join_ts)
			d->flw.join_ts = a.written_ns;
		e->lease = a.lease_ns > 60 * INT64_C(1000000000) ? 60 * INT64_C(1000000000) : a.lease_ns;
		if (d->flw.admit_wait && !d->flw.admit_ts)
			d->flw.admit_ts = a.written_ns;
		if (!(d->fn.flags & DIST_F_ECHO))
			d->flw.lease_until = now - DIST_LEASE_MARGIN_NS + e->lease;
	}
	d->flw.ack_sent_acked = a.acked;
	d->flw.ack_sent_plan = a.plan;
	d->flw.ack_sent_commit = a.committed;
	/* The lease every DIST_ACK_HB_NS, whatever went between: the
	 * acknowledgements (best effort) keep the leader's count, not this
	 * follower's (lease_until). */
	if (lease)
		d->flw.next_lease = now + DIST_ACK_HB_NS;
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
	else if (d->flw.gap_held)
		*at = d->flw.gap_at; /* opened at once: always past */
	else if (d->flw.lease_held && now >= d->flw.lease_at)
		*at = d->flw.lease_at;
	else
		return false;
	return true;
}

/* Follower, its leader lost: readers held past an instant stay there;
 * else they stop now (a hold still to come let go first). Once: a clock
 * marked already stays where it was, unless it was stale only while it
 * joined (running on the leader's function until its echo, or its
 * rejoin's function): lost, it stops as OnLeaderLoss says. */
static void stop_readers(struct dist *d, const struct clock_env *env)
{
	int64_t now = mono_ns(), at;

	/* A change missed from the leader lost is nothing to hold for now
	 * (the clock is stale; what it says when back is taken afresh): a gap
	 * seen while changes were queued (no hold opened yet) outlived the
	 * loss, and the next tick held readers on the stale clock,
	 * OnLeaderLoss "run" notwithstanding (a review found it). A hold
	 * already open is the loss's to complete or let go, below. */
	d->flw.gap = false;
	if (atomic_load_explicit(env->stale, memory_order_relaxed) && !d->flw.admit_wait && !d->flw.rejoin)
		return;
	/* The segment holds a function of its own from here (paused, or
	 * running on, stale): not the leader's to re-anchor after a host
	 * clock step (that ran held readers on), until a function of the
	 * leader's is committed again. */
	d->flw.have_cur = false;
	/* A change decided ahead stands: past its instant it is completed
	 * first (what readers show is that function); still to come, the
	 * mark waits for it there (the writer settles it first) and is made
	 * on that function, as the clock thread's own mark is. */
	if (shmclock_writer_complete(env->w) == -EAGAIN) {
		shmclock_info_t in;

		dist_lease_let_go(d, env);
		clock_env_set_stale(env, true);
		shmclock_writer_info(env->w, &in);
		if (!d->run_on_loss && in.initialized && !in.paused && !in.stepped)
			shmclock_writer_pause(env->w);
		return;
	}
	if (!held_past(d, now, &at)) {
		dist_hold_drop(d, env);
		at = now;
	}
	stale_from(d, env, at);
	/* Completed there, or let go. (A change's hold completed keeps
	 * `frozen`: q_clear's withdrawal then finds nothing open.) */
	d->flw.lease_held = false;
}

static const char *const loss_names[LOSS_N] = {
#define DIST_LOSS_NAME(id, name) [id] = name,
	DIST_LOSSES(DIST_LOSS_NAME)
#undef DIST_LOSS_NAME
};

const char *dist_loss_name(int why)
{
	return why >= 0 && why < LOSS_N ? loss_names[why] : "none";
}

/*
 * Follower: has lost its leader, for @why (every trigger comes here: the
 * transport's silence watch, an instant held or a change missed past its
 * bound, its lease run out). Said once per trigger with the reason, which
 * status shows too (leader_losses, last_loss). Its readers stay where they
 * stopped, stale (stop_readers); what waits was heard before and is void
 * after silence or a lease run out (the leader may have moved on, and a
 * change committed later, fresh, would undo the mark), kept otherwise (a
 * hold completed there stays); it is no longer a member, and says so once
 * the mark is in its segment. Stale until it hears the leader again.
 */
void dist_lost_leader(struct dist *d, const struct clock_env *env, enum dist_loss why,
		      const char *fmt, ...)
{
	char detail[300];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	log_msg(LOG_WARN, "distribute: leader %s lost (%s): %s; the clock is stale until it hears "
			  "the leader", d->fn.leader[0] ? d->fn.leader : "(none yet)",
		loss_names[why], detail);
	{
		char what[160];

		snprintf(what, sizeof(what), "%s: %.130s", loss_names[why], detail);
		dist_event(d, "leader-lost", d->fn.leader[0] ? d->fn.leader : "(none yet)", d->fn.term,
			   what);
	}
	stop_readers(d, env);
	{
		/* The stale mark stop_readers committed is the loss's, whatever
		 * command or pass found it. */
		const struct tl_cause stale = { .kind = TL_CAUSE_STALE, .uid = -1, .pid = -1 };

		clock_env_record(env, &stale);
	}
	if (why == LOSS_SILENCE || why == LOSS_LEASE || why == LOSS_ASIDE)
		dist_q_clear(d, env, why == LOSS_SILENCE ? "the leader is silent"
				     : why == LOSS_LEASE ? "this follower's lease ran out"
							 : "this follower steps aside");
	if (why != LOSS_SILENCE)
		d->flw.hold_stale = true;
	dist_follower_leave(d);
	pthread_mutex_lock(&d->st.mu);
	d->st.losses[why]++;
	d->st.last_loss = (int)why;
	d->st.hold_stales += why == LOSS_HELD || why == LOSS_GAP;
	d->st.lease_expired += why == LOSS_LEASE;
	pthread_mutex_unlock(&d->st.mu);
}

/* Follower: its lease ran out (it sent none for that long: this process
 * was stopped, or starved): its leader may have gone on without it. Its
 * readers stopped there, stale (lease_keep); they stay there, paused
 * (OnLeaderLoss "hold"), or run on from there (OnLeaderLoss "run"). Stale
 * until it hears the leader again, its function then a jump. */
static void lease_expire(struct dist *d, const struct clock_env *env, int64_t now)
{
	dist_lost_leader(d, env, LOSS_LEASE,
			 "this follower's lease ran out %.3f s ago (%s); the leader may have gone "
			 "on without it",
			 (double)(now - d->flw.lease_until) / 1e9,
			 d->fn.flags & DIST_F_ECHO
			 ? "none echoed since: its leases do not reach the leader, or its "
			 "echoes do not come back, or this process was stopped"
			 : "it sent none meanwhile: stopped or starved");
}

/* Follower, at the end of each pass (and before anything it is told):
 * its readers stop at the end of its lease, unless another instant holds
 * them first (a change it waits for, a gap) or they are stale anyway.
 * Returns the deadline of the lease (INT64_MAX: none). */
int64_t dist_lease_keep(struct dist *d, const struct clock_env *env, int64_t now)
{
	bool stale = atomic_load_explicit(env->stale, memory_order_relaxed);
	int64_t at;
	int r;

	if (d->leader || !d->flw.joined || stale || !d->flw.lease_until) {
		dist_lease_let_go(d, env);
		return INT64_MAX;
	}
	if (now >= d->flw.lease_until) {
		lease_expire(d, env, now);
		return INT64_MAX;
	}
	if (d->q_n || d->flw.gap_held) {
		dist_lease_let_go(d, env);
		return d->flw.lease_until;
	}
	at = d->flw.lease_until;
	if (at > now + SHMCLOCK_FREEZE_AHEAD_MAX_NS - DIST_ACK_HB_NS)
		at = now + SHMCLOCK_FREEZE_AHEAD_MAX_NS - DIST_ACK_HB_NS;
	if (d->flw.lease_held && at - d->flw.lease_at < DIST_LEASE_MOVE_NS)
		return d->flw.lease_until;
	dist_lease_let_go(d, env);
	r = shmclock_writer_freeze_at(env->w, at);
	/* An update open already: a change decided ahead that a dropped
	 * queue left in the segment (q_clear), completed once due. */
	if (r == -EINVAL && shmclock_writer_complete(env->w) == 0)
		r = shmclock_writer_freeze_at(env->w, at);
	if (r == 0) {
		d->flw.lease_held = true;
		d->flw.lease_at = at;
	} else if (r != -ENODATA && r != -EINVAL && !d->flw.lease_failed) {
		log_msg(LOG_WARN, "distribute: the end of this follower's lease could not be held "
				  "(said once): %s", shmclock_strerror(r));
	}
	d->flw.lease_failed = r && r != -ENODATA && r != -EINVAL;
	return d->flw.lease_until;
}
