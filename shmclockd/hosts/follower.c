/* SPDX-License-Identifier: MIT */
/*
 * The follower: what a leader sends, checked (what no leader may send is
 * refused), then applied or queued for its instant; joining and being
 * admitted.
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

/* Follower: waits to be admitted (true), or not (false). */
void dist_admit_set(struct dist *d, bool wait)
{
	d->flw.admit_wait = wait;
	pthread_mutex_lock(&d->st.mu);
	d->st.admit_wait = wait;
	pthread_mutex_unlock(&d->st.mu);
}

/* Follower: a function of leader @f's is in force after silence or a new
 * leader: a member (it acknowledges) from @now; fresh at once, or, with a
 * leader that echoes leases, once admitted (admit_check). */
void dist_follower_fresh(struct dist *d, const struct clock_env *env, const struct dist_fn *f,
			 int64_t now, bool jump)
{
	/* A leave still to say (stale and back in one pass: another leader's
	 * function taken at once) goes to the one it left, while stale. */
	if (d->flw.leave_due && atomic_load_explicit(env->stale, memory_order_relaxed))
		dist_leave_send(d);
	d->flw.leave_due = false;
	dist_lease_let_go(d, env);
	/* A leader that echoes leases counts this follower once its first
	 * lease arrives, not before: stale until it says so (admit_check). */
	dist_admit_set(d, f->flags & DIST_F_ECHO);
	d->flw.join_ts = 0;
	d->flw.admit_echoed = false;
	d->flw.admit_ts = 0;
	d->flw.admit_change = 0;
	/* (follow_apply committed it stale: the clock thread's mark too.) */
	clock_env_set_stale(env, d->flw.admit_wait);
	d->flw.joined = true;
	d->flw.joined_mono = now;
	/* A lease at once: the leader waits for this follower from its
	 * arrival, and its readers go on from its sending (lease_keep), or
	 * from the sending of the last one echoed; until one is sent, no
	 * further than one would take them. */
	d->flw.lease_until = now + DIST_LEASE_NS - DIST_LEASE_MARGIN_NS;
	d->flw.next_lease = now;
	dist_event(d, "following", f->leader, f->term, jump ? "a jump for readers" : "");
	log_msg(LOG_INFO, "distribute: following leader %s for clock '%s'%s%s", f->leader, f->clock,
		jump ? " (a jump for readers)" : "",
		d->flw.admit_wait ? ": stale until the leader echoes its lease (it counts this follower)"
			      : "");
}

/* Follower: fresh once admitted (follower_fresh): an echo of a lease
 * written since it joined came, and it heard every change the leader
 * announced by then, none of them waiting any more (a change queued
 * commits stale: run_queue). */
void dist_admit_check(struct dist *d, const struct clock_env *env)
{
	if (!d->flw.admit_wait || !d->flw.admit_echoed || d->q_n || d->flw.gap || d->flw.hold_stale ||
	    d->fn.change < d->flw.admit_change || mono_ns() >= d->flw.lease_until)
		return; /* (a lease run out meanwhile: the next echo) */
	dist_admit_set(d, false);
	dist_lease_let_go(d, env); /* a commit of its own: the lease's end opened again after */
	/* What readers show may be off the leader's function: a change that
	 * arrived after its instant while this follower waited (the leader
	 * did not wait for it then) is held, never backwards, at what its
	 * readers saw, stale (paused there for ever). Fresh means on the
	 * leader's function: taken again, a jump where it is off. */
	{
		int64_t now = mono_ns(), e_mono = d->flw.cur.effective_ns - d->off, v = 0;
		bool still = d->flw.cur.flags & (DIST_F_PAUSED | DIST_F_STEPPED);
		int64_t want = shmclock_static_eval(e_mono, d->flw.cur.sim_base_ns, still ? 0 : d->flw.cur.mult, now);
		unsigned fl = fn_flags(d->flw.cur.flags);

		if (d->have && !shmclock_writer_eval(env->w, now, &v) && llabs(v - want) > DIST_REANCHOR_NS) {
			log_msg(LOG_INFO, "distribute: its readers were %.6f ms off the leader's function "
					  "while it waited (a change heard late): taken again, a jump",
				(double)(v - want) / 1e6);
			shmclock_writer_set_function(env->w, e_mono, d->flw.cur.sim_base_ns,
						     mult_scale(d->flw.cur.mult), fl | SHMCLOCK_FN_JUMP);
			d->flw.cur_off = d->off;
		}
	}
	clock_env_set_stale(env, false);
	log_msg(LOG_INFO, "distribute: leader %s counts this follower of clock '%s': fresh",
		d->fn.leader, d->clock);
}


/* Refuses @f (counted; logged once per leader and kind): -EPROTO. */
static int refuse(struct dist *d, struct cmd *c, const struct dist_fn *f, enum dist_refusal kind,
		  const char *fmt, ...)
{
	char msg[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (strcmp(d->flw.refused_leader, f->leader)) {
		snprintf(d->flw.refused_leader, sizeof(d->flw.refused_leader), "%s", f->leader);
		d->flw.refused_logged = 0;
	}
	if (!(d->flw.refused_logged & (1u << kind))) {
		d->flw.refused_logged |= 1u << kind;
		log_msg(LOG_WARN, "distribute: refused a TimeFunction from %s: %s (further refusals "
				  "of this kind from it are counted in status, not logged)", f->leader, msg);
	}
	pthread_mutex_lock(&d->st.mu);
	d->st.refused++;
	snprintf(d->st.refused_last, sizeof(d->st.refused_last), "%s", msg);
	pthread_mutex_unlock(&d->st.mu);
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
	if (f->mult < scale_mult(CONFIG_SCALE_MIN) || f->mult > scale_mult(CONFIG_SCALE_MAX))
		return refuse(d, c, f, REF_RATE, "rate %.9g (from " SHMCLOCK__XSTR(CONFIG_SCALE_MIN) " to "
			      SHMCLOCK__XSTR(CONFIG_SCALE_MAX) ")", mult_scale(f->mult));
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
		return refuse(d, c, f, REF_QUEUE, "%d changes already wait for their instants",
			      DIST_QUEUE_MAX);
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
	    __builtin_sub_overflow(now + dist_sample_offset(f->timebase), f->sent_ns, &v))
		return INT64_MIN;
	/* A delay that grew at once is a wait, not an offset: the evidence
	 * so far is dropped (DIST_SKEW_JUMP_NS). */
	if (d->flw.skew_n && v - d->flw.skew_last > DIST_SKEW_JUMP_NS) {
		d->flw.skew_n = 0;
		d->flw.skew_i = 0;
	}
	d->flw.skew_last = v;
	d->flw.skew[d->flw.skew_i++ % DIST_SKEW_N] = v;
	if (d->flw.skew_n < DIST_SKEW_N)
		d->flw.skew_n++;
	for (unsigned i = 0; i < d->flw.skew_n; i++)
		if (d->flw.skew[i] < m)
			m = d->flw.skew[i];
	/* A few messages first: one may be a dead leader's last word. */
	far = d->flw.skew_n >= 3 && (m > DIST_SKEW_MAX_NS || m < -DIST_SKEW_MAX_NS);
	if (far && !d->flw.skew_far)
		d->flw.skew_far_at = now;
	d->flw.skew_far = far;
	bad = far && now - d->flw.skew_far_at >= DIST_SKEW_LAST_NS;
	if (bad && !d->flw.skew_bad)
		log_msg(LOG_WARN, "distribute: this host's clock is %.3f s %s leader %s's (measured "
				  "from its messages): its changes land that far off here. Synchronise "
				  "the hosts' clocks (chrony or PTP) and use TAI on every host or on none "
				  "(a TAI/UTC mismatch is 37 s)",
			fabs((double)m / 1e9), m > 0 ? "ahead of" : "behind", f->leader);
	else if (!bad && d->flw.skew_bad)
		log_msg(LOG_INFO, "distribute: this host's clock agrees with leader %s's again "
				  "(%.3f ms apart, network delay included)", f->leader, (double)m / 1e6);
	d->flw.skew_bad = bad;
	pthread_mutex_lock(&d->st.mu);
	d->st.host_offset_ns = m;
	d->st.have_host_offset = d->flw.skew_n >= 3;
	d->st.clocks_disagree = bad;
	pthread_mutex_unlock(&d->st.mu);
	return v;
}

/* Follower, back from silence (@f from the leader it followed): has @f
 * waited (arrival minus sending @v more than DIST_REJOIN_LAG_NS above the
 * least seen while it followed)? Then a later sample may say otherwise, and
 * it is passed over, up to DIST_REJOIN_WAIT_NS from the first. */
static bool rejoin_stale_sample(struct dist *d, const struct dist_fn *f, int64_t v, int64_t now)
{
	if (!d->flw.have_base || v == INT64_MIN || v - d->flw.skew_base <= DIST_REJOIN_LAG_NS) {
		d->flw.rejoin_skip_at = 0;
		return false;
	}
	if (!d->flw.rejoin_skip_at) {
		d->flw.rejoin_skip_at = now;
		log_msg(LOG_DEBUG, "distribute: change %llu arrived %.3f ms late (it waited while "
				   "this host did not take it): waiting for a recent one",
			(unsigned long long)f->change, (double)(v - d->flw.skew_base) / 1e6);
	}
	if (now - d->flw.rejoin_skip_at < DIST_REJOIN_WAIT_NS)
		return true;
	d->flw.rejoin_skip_at = 0;
	d->flw.have_base = false; /* every one late: the offset moved; measured again */
	return false;
}

/* Follower: the commits heard (under @plan) mark what waits, only what
 * it holds under that same plan: a change it holds under an earlier plan
 * may have been moved without it hearing (the leader went on without this
 * follower, lost): never applied at the instant it knows, it is held
 * there and the clock goes stale. (A change decided before a re-plan and
 * whose commit this follower missed is held too: stale, never wrong.) */
static void mark_decided(struct dist *d, uint64_t plan, uint64_t committed)
{
	for (unsigned i = 0; i < d->q_n; i++)
		if (q_at(d, i)->fn.change <= committed && q_at(d, i)->fn.plan == plan)
			q_at(d, i)->decided = true;
}

/* Follower: a change was missed. Its instant comes after every change
 * queued (changes are ordered): once they took effect, readers hold at
 * once, behind the leader and never ahead, until the leader repeats it. */
void dist_gap_hold(struct dist *d, const struct clock_env *env)
{
	if (d->flw.gap_held || d->q_n)
		return;
	dist_lease_let_go(d, env); /* now comes first */
	d->flw.gap_at = mono_ns();
	if (shmclock_writer_freeze_at(env->w, d->flw.gap_at))
		return;
	d->flw.gap_held = true;
	pthread_mutex_lock(&d->st.mu);
	d->st.holds++;
	pthread_mutex_unlock(&d->st.mu);
}

/* A follower's sample from the leader (CMD_FUNCTION): checked, then
 * queued for its instant (an announcement, held there until committed;
 * or a committed function), or committed at once when its instant passed
 * and it is committed. Once a committed function is applied after
 * silence, the clock is fresh again. */
int dist_follow_apply(struct dist *d, const struct clock_env *env, struct cmd *c)
{
	const struct dist_fn *f = c->arg_fn;
	bool new_leader = !d->have || strcmp(f->leader, d->fn.leader);
	bool stale = atomic_load_explicit(env->stale, memory_order_relaxed);
	bool fresh, committed = f->committed >= f->change, replan = false, jump;
	unsigned fl;
	int64_t off, e_mono = 0, now, late = 0;
	int r;

	int64_t v;

	/* A deposed leader that still runs: never followed (nor is its
	 * heartbeat a word from the leader: ros2.c); a conflict while it runs. */
	if (f->flags & DIST_F_DEPOSED) {
		if (dist_fn_live(f) && (!d->have || strcmp(f->leader, d->fn.leader)))
			dist_note_conflict(d, f, d->have ? d->fn.term : 0,
					   d->have ? d->fn.leader : "(no leader yet)",
					   "the former was deposed by a leader above it and stopped "
					   "publishing its time, but still runs: stop it");
		return 0;
	}
	v = skew_sample(d, f);

	if (!new_leader && !stale && d->flw.joined && v != INT64_MIN &&
	    (!d->flw.have_base || v < d->flw.skew_base)) {
		d->flw.skew_base = v; /* the least while it follows */
		d->flw.have_base = true;
	}
	/* (Stale only while it joins, its leader speaks: the same rule.) */
	if (new_leader && d->have && (!stale || d->flw.admit_wait || d->flw.rejoin)) {
		/* Another leader while ours speaks: a dead one's history is
		 * nothing; a live one is a conflict, and only a leader that
		 * ranks above ours is followed (never back to a lower one). */
		if (!dist_fn_live(f))
			return 0;
		if (dist_rank_cmp(f->term, f->leader, d->fn.term, d->fn.leader) < 0) {
			dist_note_conflict(d, f, d->fn.term, d->fn.leader,
					   "this follower stays with the latter, which ranks above");
			return 0;
		}
		dist_note_conflict(d, f, d->fn.term, d->fn.leader,
				   "this follower follows the former, which ranks above");
	}
	/* A rejoin waiting for its function's instant is not a new start:
	 * later samples of the same leader go on from it. */
	fresh = new_leader || (stale && !d->flw.rejoin && !d->flw.admit_wait);
	now = mono_ns();
	/* Asked aside by this leader (OnSlow): out, stale, until the time is
	 * over; then it rejoins on the leader's present, as after silence. */
	if (fresh && !new_leader && now < d->flw.aside_until)
		return 0;
	if (!fresh) {
		if (f->committed > d->flw.commit_seen)
			d->flw.commit_seen = f->committed;
		mark_decided(d, f->plan, f->committed);
		/* An announcement of a change already held, under a later plan:
		 * it moved (postponed). */
		for (unsigned i = 0; i < d->q_n; i++)
			if (q_at(d, i)->fn.change == f->change && !q_at(d, i)->decided &&
			    f->plan > q_at(d, i)->fn.plan && !committed)
				replan = true;
		if (!replan && f->change <= d->fn.change) {
			/* A heartbeat, an old change, or an announcement
			 * repeated: the leader lacks our acknowledgement (it may
			 * have been lost), say it again. */
			dist_follower_ack(d, now, !committed && f->plan == d->flw.fplan);
			return 0;
		}
		/* An announcement after a gap (one lost): its function starts
		 * from the one missing, whose instant this follower does not
		 * know: its readers hold now (behind the leader, never ahead)
		 * until the leader's repetition fills the gap, stale if that
		 * lasts (tick). */
		if (!replan && !committed && f->change > d->fn.change + 1 &&
		    f->change - 1 > f->committed) {
			if (!d->flw.gap) {
				log_msg(LOG_DEBUG, "distribute: change %llu announced after a gap "
						   "(holding %llu): readers hold until it is repeated",
					(unsigned long long)f->change, (unsigned long long)d->fn.change);
				d->flw.gap = true;
				d->flw.gap_since = now;
				dist_gap_hold(d, env);
			}
			return 0;
		}
		if (!committed && f->plan < d->flw.fplan) {
			log_msg(LOG_DEBUG, "distribute: change %llu under plan %llu: plan %llu is current",
				(unsigned long long)f->change, (unsigned long long)f->plan,
				(unsigned long long)d->flw.fplan);
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
	if (d->flw.gap_held)
		dist_close_open(env); /* the gap is filled: readers go on from there */
	d->flw.gap = d->flw.gap_held = false;
	if (replan) {
		/* Drop the change moved and everything after it: announced
		 * again, in order. An instant already held is let go on the
		 * function in force (the leader never reached it either). The
		 * moved change is checked against what remains. */
		while (d->q_n && q_at(d, d->q_n - 1)->fn.change >= f->change) {
			struct dist_pending *t = q_at(d, d->q_n - 1);

			if (t->frozen)
				dist_close_open(env);
			d->q_n--;
		}
		d->fn = d->q_n ? q_at(d, d->q_n - 1)->fn : d->flw.cur;
		dist_q_count(d);
	}
	off = dist_sample_offset(f->timebase);
	r = dist_check(d, c, f, fresh, now, off, &e_mono);
	if (r)
		return r;
	if (fresh) {
		dist_q_clear(d, env, "another leader"); /* what the old one announced is void */
		if (new_leader)
			d->flw.have_base = false; /* another host, another offset */
		d->flw.commit_seen = f->committed;
		d->flw.fplan = f->plan;
		d->flw.hold_stale = false;
	}
	if (!committed)
		d->flw.fplan = f->plan;
	/* The host clock stepped since the function in force was committed
	 * (this sample is the first to see it, or a gap held the re-anchor
	 * back): re-expressed before this one is queued, which would hold
	 * the re-anchor off until its instant. */
	if (d->flw.have_cur && !fresh && !stale && !d->q_n && !d->flw.gap_held &&
	    llabs(off - d->flw.cur_off) > DIST_REANCHOR_NS)
		dist_follower_reanchor(d, env, off);
	/* Late: a function in force that arrived after its instant, sent
	 * after this follower joined (not the history it catches up with). */
	if (e_mono <= now && committed && d->have && !fresh && f->sent_ns - off > d->flw.joined_mono)
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
	if (d->flw.admit_wait || (fresh && (f->flags & DIST_F_ECHO)) || (!fresh && dist_follower_stale(d, env)))
		fl |= SHMCLOCK_FN_STALE;
	if (!d->have || (f->flags & DIST_F_UNIX_ZERO) != (d->fn.flags & DIST_F_UNIX_ZERO) ||
	    f->unix_at_zero_ns != d->fn.unix_at_zero_ns) {
		int64_t uz = f->unix_at_zero_ns;

		dist_hold_drop(d, env); /* a commit now, not at the instant held */
		shmclock_writer_set_unix_at_zero(env->w, f->flags & DIST_F_UNIX_ZERO ? &uz : NULL);
	}
	if (e_mono <= now && committed && !d->q_n) {
		dist_lease_let_go(d, env);
		r = shmclock_writer_set_function(env->w, e_mono, f->sim_base_ns, mult_scale(f->mult), fl);
		if (r)
			return cmd_fail(c, r, shmclock_strerror(r));
		d->flw.cur = *f;
		d->flw.cur_off = off;
		d->flw.have_cur = true;
	} else {
		struct dist_pending *p = dist_q_push(d);

		p->fn = *f;
		p->e_mono = e_mono;
		p->sim_base = f->sim_base_ns;
		p->scale = mult_scale(f->mult);
		p->fl = fl;
		p->decided = committed;
		p->announced = now;
		dist_q_count(d);
		/* A fresh start on a function in force from an instant still
		 * to come (a leader deciding its next change ahead): until then
		 * the leader shows a function this host may have missed, so the
		 * clock is stale until this one takes effect (run_queue), not
		 * fresh at once on the function it had. Stale from there too
		 * until this thread took it (its readers switch there by
		 * themselves; the leader waits for this follower, and its lease
		 * bounds them, only once it says it follows). */
		if (fresh) {
			d->flw.rejoin = true;
			p->fl |= SHMCLOCK_FN_STALE;
		}
	}
	if (fresh && d->flw.rejoin) {
		dist_lease_let_go(d, env);
		clock_env_set_stale(env, true);
		dist_follower_leave(d);
		log_msg(LOG_INFO, "distribute: leader %s for clock '%s': stale until its function "
				  "takes effect, %.3f ms from now", f->leader, f->clock,
			(double)(e_mono - now) / 1e6);
	} else if (fresh) {
		dist_follower_fresh(d, env, f, now, jump);
	}
	if (late)
		log_msg(LOG_DEBUG, "distribute: change %llu arrived %.3f ms after it took effect",
			(unsigned long long)f->change, (double)late / 1e6);
	d->fn = *f;
	d->off = off;
	d->have = true;
	dist_follower_ack(d, now, false);
	dist_admit_check(d, env);
	pthread_mutex_lock(&d->st.mu);
	snprintf(d->st.leader_id, sizeof(d->st.leader_id), "%s", f->leader);
	d->st.term = f->term;
	d->st.changes++;
	d->st.leaders += new_leader;
	if (late)
		dist_count_late(d, late);
	d->st.last_off = off;
	pthread_mutex_unlock(&d->st.mu);
	return 0;
}
