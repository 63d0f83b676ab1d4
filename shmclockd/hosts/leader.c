/* SPDX-License-Identifier: MIT */
/*
 * The leader: its function published, a client's change planned,
 * announced, decided once every member holds it, postponed when one does
 * not in time.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shmclock/time.h>
/* After shmclock.h: shmclock_static_eval(), the function readers evaluate. */
#include <shmclock/static/shmclock.h>

#include "log.h"
#include "hosts/dist.h"

/* Writes @f stamped as this leader's next sample (its sending time and
 * number, its commits, plan and Lead). */
static void send_fn(struct dist *d, struct dist_fn *f, unsigned how)
{
	struct timespec ts;

	clock_gettime(tb_clock(f->timebase), &ts);
	f->sent_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	f->seq = ++d->ldr.seq;
	f->committed = d->ldr.committed;
	f->plan = d->ldr.plan;
	f->lead_ns = d->ldr.lead_cur;
	if (d->api->dist_publish(d->r, f, how) < 0)
		log_msg(LOG_DEBUG, "distribute: a TimeFunction write failed");
}

/* Publishes @f (a change queued, or the function in force) with what is
 * committed so far. */
static void publish_fn(struct dist *d, struct dist_fn *f, unsigned how)
{
	/* Still listening for the terms before ours, or superseded. */
	if (d->ldr.announce_at != INT64_MAX || d->ldr.deposed)
		return;
	f->flags |= DIST_F_ECHO; /* leader_ack */
	send_fn(d, f, how);
}

/* A deposed leader's heartbeat (DIST_F_DEPOSED): its function as an
 * announcement never committed, so that no follower follows it and every
 * host, one that joins later too, reports the conflict for as long as this
 * leader runs (before, it fell silent, and a follower that joined after
 * its last sample had aged saw one leader only: the conflict went
 * unreported in a third of the runs). */
void dist_publish_deposed(struct dist *d)
{
	struct dist_fn g = d->fn;

	g.change = d->fn.change + 1; /* announced, never committed */
	g.heartbeat_ns = d->hb_ns;
	g.flags = (g.flags & ~DIST_F_ECHO) | DIST_F_DEPOSED;
	send_fn(d, &g, DIST_PUB_RELIABLE); /* its committed <= fn.change < g.change */
}

/* The latest function: the last change queued, else the one in force. */
void dist_publish(struct dist *d, unsigned how)
{
	publish_fn(d, &d->fn, how);
}

/* The function the writer publishes now, anchored at @mono (its own
 * instant, translated with @off), as the next change. */
void dist_snapshot(shmclock_writer_t *w, struct dist *d, int64_t mono, int64_t off)
{
	shmclock_info_t in;
	int64_t v = 0;

	shmclock_writer_info(w, &in);
	shmclock_writer_eval(w, mono, &v);
	snprintf(d->fn.clock, sizeof(d->fn.clock), "%s", d->clock);
	snprintf(d->fn.leader, sizeof(d->fn.leader), "%s", d->st.leader_id);
	d->fn.term = d->ldr.term;
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
	d->ldr.committed = d->fn.change;
	pthread_mutex_lock(&d->st.mu);
	d->st.changes++; /* status counts every function published as a change */
	pthread_mutex_unlock(&d->st.mu);
}

/* The end of the leader's listening: a term above every one heard of,
 * then the current function, published. */
void dist_announce(struct dist *d, const struct clock_env *env, int64_t now)
{
	d->ldr.term = d->ldr.max_term + 1;
	d->ldr.announce_at = INT64_MAX;
	pthread_mutex_lock(&d->st.mu);
	d->st.term = d->ldr.term;
	pthread_mutex_unlock(&d->st.mu);
	if (d->q_n) {
		/* The changes queued meanwhile: announced now, in order. */
		for (unsigned i = 0; i < d->q_n; i++) {
			q_at(d, i)->fn.term = d->ldr.term;
			publish_fn(d, &q_at(d, i)->fn, DIST_PUB_FAST | DIST_PUB_RELIABLE);
		}
		d->fn.term = d->ldr.term;
	} else {
		dist_snapshot(env->w, d, now, dist_sample_offset(d->fn.timebase));
		dist_publish(d, DIST_PUB_FAST | DIST_PUB_RELIABLE);
	}
	d->ldr.next_hb = now + d->hb_ns;
	log_msg(LOG_INFO, "distribute: leading clock '%s' as %s, term %llu (%s, Lead %.3f ms, "
			  "heartbeat %.3f s)",
		d->clock, d->st.leader_id, (unsigned long long)d->ldr.term,
		d->fn.timebase == DIST_TB_TAI ? "TAI" : "UTC", (double)d->lead_ns / 1e6,
		(double)d->hb_ns / 1e9);
}

/* A leader hears the topic (CMD_FUNCTION): its own samples, the history
 * of the leaders before it (their terms), or another live leader. */
int dist_leader_heard(struct dist *d, const struct clock_env *env, const struct dist_fn *f)
{
	bool listening = d->ldr.announce_at != INT64_MAX;
	uint64_t own = listening ? d->ldr.max_term + 1 : d->ldr.term;

	if (!strcmp(f->leader, d->st.leader_id))
		return 0;
	if (f->term > d->ldr.max_term)
		d->ldr.max_term = f->term;
	if (!dist_fn_live(f))
		return 0;
	if (f->flags & DIST_F_DEPOSED) {
		dist_note_conflict(d, f, own, d->st.leader_id,
				   "the other was deposed and stopped publishing its time, but still "
				   "runs: stop it");
		return 0;
	}
	if (listening) {
		dist_note_conflict(d, f, d->ldr.max_term + 1, d->st.leader_id,
				   "this one starts above it and leads; the other stops publishing");
		return 0;
	}
	if (dist_rank_cmp(f->term, f->leader, own, d->st.leader_id) > 0) {
		if (!d->ldr.deposed)
			dist_note_conflict(d, f, own, d->st.leader_id,
					   "the other ranks above this one, which stops publishing");
		else
			dist_note_conflict(d, f, own, d->st.leader_id, "this one stopped publishing");
		d->ldr.deposed = true;
		pthread_mutex_lock(&d->st.mu);
		d->st.deposed = true;
		pthread_mutex_unlock(&d->st.mu);
		dist_q_clear(d, env, "another leader took over the clock (status shows which)");
		return 0;
	}
	dist_note_conflict(d, f, own, d->st.leader_id, "this one ranks above the other, which should stop");
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


/* A leader's change (pause, resume, scale, set, step): checked, then, once
 * no other change is being agreed (@in_turn: leader_next's call for the
 * next waiting one), scheduled at leader time + Lead, announced, queued;
 * the clock thread commits it at that instant once every member holds it
 * (or later, postponed) and answers the client then. */
int dist_leader_change(struct dist *d, const struct clock_env *env, struct cmd *c, int64_t now,
		       bool in_turn)
{
	shmclock_writer_t *w = env->w;
	struct dist_pending *p, *tail = d->q_n ? q_at(d, d->q_n - 1) : NULL;
	shmclock_info_t in;
	bool paused;

	shmclock_writer_info(w, &in);
	if (!in.initialized)
		return cmd_fail(c, -ENODATA, "the clock has no time yet");
	if (d->ldr.deposed)
		return cmd_fail(c, -EBUSY, "another leader took over this clock (status shows which): "
					   "change time there, and run one leader per clock");
	if (d->q_n + d->ldr.w_n >= DIST_QUEUE_MAX)
		return cmd_fail(c, -EBUSY, SHMCLOCK__XSTR(DIST_QUEUE_MAX) " changes already wait for "
					   "their instants (the most shmclockd queues): send this "
					   "one after some took effect");
	/* Paused or not once the changes before this one took effect. */
	paused = tail ? !!(tail->fl & SHMCLOCK_FN_PAUSED) : in.paused;
	for (unsigned i = 0; i < d->ldr.w_n; i++) {
		enum cmd_kind k = d->ldr.waiting[(d->ldr.w_first + i) % DIST_QUEUE_MAX]->req.kind;

		paused = k == CMD_PAUSE || (paused && k != CMD_RESUME);
	}
	/* Checked before anything is published. */
	switch (c->req.kind) {
	case CMD_SCALE:
		if (!config_scale_ok(c->req.scale))
			return cmd_fail(c, -EINVAL, "scale must be a number from " SHMCLOCK__XSTR(
						    CONFIG_SCALE_MIN) " to " SHMCLOCK__XSTR(CONFIG_SCALE_MAX));
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
	if (!in_turn && (tail || d->ldr.w_n)) {
		/* Another change is being agreed: this one waits, unannounced,
		 * and is planned from the function in force once that one took
		 * effect (leader_next). */
		d->ldr.waiting[(d->ldr.w_first + d->ldr.w_n++) % DIST_QUEUE_MAX] = c;
		dist_q_count(d);
		return CLOCK_MODE_HELD;
	}
	/* No member to wait for: Distribute.Lead again (the adaptive Lead
	 * may have grown, doubled by each postponement, while a member that
	 * has since left or died did not answer). */
	if (!dist_members_live(d, now))
		d->ldr.lead_cur = d->lead_ns;
	{
		int64_t off = dist_sample_offset(d->fn.timebase);

		/* The host clock stepped since the tick last looked: the function
		 * in force re-expressed first, as the tick would. Planned from
		 * the old expression with the new offset, this change would go
		 * back (or ahead) by the step on the wire, and followers would
		 * refuse it and every one after (a review found it). */
		if (!d->q_n && llabs(off - d->off) > DIST_REANCHOR_NS)
			dist_leader_reanchor(d, env, now, off);
		d->off = off;
	}
	p = dist_q_push(d);
	p->c = c;
	p->fn = d->fn;
	p->fn.change = d->fn.change + 1;
	/* Nothing before it in the queue: planned from the function in force. */
	plan_entry(d, env, NULL, p, now + d->ldr.lead_cur);
	p->announced = p->first_announced = now;
	d->fn = p->fn;
	/* Twice: announcements travel best effort (a loss costs a round
	 * trip until the repetition; two cost the square of the loss). */
	dist_publish(d, DIST_PUB_FAST);
	dist_publish(d, DIST_PUB_FAST);
	p->fn = d->fn;
	/* Repeated until every member holds it (a lost sample is repaired by
	 * reliable delivery only at DDS's next heartbeat). */
	if (d->ldr.next_repeat == INT64_MAX)
		d->ldr.next_repeat = now + dist_repeat_ns(d);
	dist_q_count(d);
	return CLOCK_MODE_HELD;
}

/* Leader: decides, in order, the changes every member holds. */
void dist_leader_decide(struct dist *d, int64_t now)
{
	for (unsigned i = 0; i < d->q_n; i++) {
		struct dist_pending *p = q_at(d, i);

		if (p->decided)
			continue;
		if (!dist_all_hold(d, p->fn.change, now))
			break;
		/* Only while it can be decided ahead (its instant still
		 * DIST_OPEN_NS away): later, it is postponed instead. */
		if (now >= p->e_mono - DIST_OPEN_NS)
			break;
		p->decided = true; /* said once this host has it: leader_own */
		if (dist_members_live(d, now)) {
			latehist_add(&d->st.acks, now - p->announced);
			dist_adapt_lead(d, now - p->announced);
			dist_note_slowest(d, p, now);
		}
		log_msg(LOG_DEBUG, "distribute: change %llu decided %.3f ms after its announcement "
				   "(plan %llu), Lead now %.3f ms",
			(unsigned long long)p->fn.change, (double)(now - p->announced) / 1e6,
			(unsigned long long)d->ldr.plan, (double)d->ldr.lead_cur / 1e6);
	}
}

/* Leader: a decided change is said committed (in every later sample) only
 * once this host has it, decided ahead in its segment or applied: no
 * follower can then switch at an instant where the leader's own readers do
 * not, however late this thread runs after deciding. */
void dist_leader_own(struct dist *d, const struct dist_pending *p, int64_t now)
{
	if (p->fn.change <= d->ldr.committed)
		return;
	d->ldr.committed = p->fn.change;
	dist_publish(d, DIST_PUB_FAST | DIST_PUB_RELIABLE);
	d->ldr.next_repeat = now + dist_repeat_ns(d);
}

/* Leader: the first undecided change @i is not held by every member
 * DIST_GUARD before its instant. Members silent too long are lost; the
 * rest is announced again, later, under a new plan. */
void dist_leader_postpone(struct dist *d, const struct clock_env *env, unsigned i, int64_t now)
{
	struct dist_pending *p = q_at(d, i);
	int64_t bound = DIST_LOST_BASE_NS + 2 * d->ldr.lead_cur;
	bool held_by_one = false;

	/* OnSlow: the members this change waits for are late on it, if
	 * another member held it (when none did, the link or this leader's
	 * late pass is to blame, not they). Counted when it is decided. */
	for (unsigned k = 0; k < DIST_MEMBERS_MAX; k++) {
		const struct dist_member *m = &d->ldr.members[k];

		held_by_one |= member_live(m, now) && m->plan == d->ldr.plan && m->acked >= p->fn.change;
	}
	for (unsigned k = 0; k < DIST_MEMBERS_MAX; k++) {
		struct dist_member *m = &d->ldr.members[k];

		if (held_by_one && member_live(m, now) &&
		    (m->plan != d->ldr.plan || m->acked < p->fn.change))
			m->late_change = p->fn.change;
		/* Not before the member would be stale hearing nothing (its
		 * lease: its silence bound and a margin). */
		if (!member_live(m, now) || (m->plan == d->ldr.plan && m->acked >= p->fn.change) ||
		    now - p->first_announced <= (bound > m->lease ? bound : m->lease))
			continue;
		log_msg(LOG_WARN, "distribute: follower %s lost: it did not acknowledge change %llu "
				  "within %.3f s; the clock goes on without it (it marks itself "
				  "stale, and is a member again once it hears this leader)",
			m->id, (unsigned long long)p->fn.change, (double)(now - p->first_announced) / 1e9);
		{
			char why[96];

			snprintf(why, sizeof(why), "did not acknowledge change %llu within %.3f s",
				 (unsigned long long)p->fn.change,
				 (double)(now - p->first_announced) / 1e9);
			dist_event(d, "lost", m->id, d->fn.term, why);
		}
		m->used = false;
		pthread_mutex_lock(&d->st.mu);
		d->st.lost_members++;
		pthread_mutex_unlock(&d->st.mu);
	}
	if (dist_all_hold(d, p->fn.change, now) && now < p->e_mono - DIST_OPEN_NS)
		return; /* the next pass decides */
	d->ldr.lead_cur = d->ldr.lead_cur * 2 < DIST_LEAD_MAX_NS ? d->ldr.lead_cur * 2 : DIST_LEAD_MAX_NS;
	d->ldr.plan++;
	for (unsigned k = i; k < d->q_n; k++) {
		struct dist_pending *e = q_at(d, k);

		if (e->frozen && !e->staged) {
			/* Opened to stage it, too late: readers go on from here. */
			dist_close_open(env);
			e->frozen = false;
		}
		plan_entry(d, env, k ? q_at(d, k - 1) : NULL, e, now + d->ldr.lead_cur);
		e->announced = now;
		e->fn.plan = d->ldr.plan;
		publish_fn(d, &e->fn, DIST_PUB_FAST);
		publish_fn(d, &e->fn, DIST_PUB_FAST);
	}
	d->fn = q_at(d, d->q_n - 1)->fn;
	d->ldr.next_repeat = now + dist_repeat_ns(d);
	pthread_mutex_lock(&d->st.mu);
	d->st.postponed++;
	pthread_mutex_unlock(&d->st.mu);
	log_msg(LOG_DEBUG, "distribute: change %llu postponed by %.3f ms (plan %llu)",
		(unsigned long long)p->fn.change, (double)d->ldr.lead_cur / 1e6,
		(unsigned long long)d->ldr.plan);
}

/* Leader: what members have not acknowledged or not confirmed goes out
 * again (each change, or the latest sample with its commits). */
int64_t dist_leader_repeat(struct dist *d, int64_t now)
{
	bool undecided = false, unconfirmed = false;

	if (!d->q_n) {
		d->ldr.next_repeat = INT64_MAX;
		return INT64_MAX;
	}
	if (now < d->ldr.next_repeat)
		return d->ldr.next_repeat;
	for (unsigned i = 0; i < d->q_n; i++) {
		struct dist_pending *p = q_at(d, i);

		if (!p->decided && !dist_all_hold(d, p->fn.change, now)) {
			publish_fn(d, &p->fn, DIST_PUB_FAST);
			undecided = true;
		}
	}
	unconfirmed = !dist_all_confirmed(d, d->ldr.committed, now);
	if (unconfirmed && !undecided)
		dist_publish(d, DIST_PUB_FAST);
	d->ldr.next_repeat = undecided || unconfirmed ? now + dist_repeat_ns(d) : INT64_MAX;
	return d->ldr.next_repeat;
}

/* Leader: the change in flight took effect; the next waiting one is
 * announced now, planned from the function in force (one that can no
 * longer be made, e.g. a step once the clock runs, is answered with its
 * error). True once one is announced. */
bool dist_leader_next(struct dist *d, const struct clock_env *env)
{
	while (d->ldr.w_n && !d->q_n) {
		struct cmd *c = d->ldr.waiting[d->ldr.w_first];
		int r;

		d->ldr.w_first = (d->ldr.w_first + 1) % DIST_QUEUE_MAX;
		d->ldr.w_n--;
		r = dist_leader_change(d, env, c, mono_ns(), true);
		if (r != CLOCK_MODE_HELD)
			clock_env_complete(env, c, r);
	}
	dist_q_count(d);
	return d->q_n > 0;
}
