/* SPDX-License-Identifier: MIT */
/*
 * The changes waiting for their instants (leader and follower), readers
 * held there, and each committed at its instant (dist_run_queue).
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

struct dist_pending *dist_q_push(struct dist *d)
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

void dist_q_count(struct dist *d)
{
	pthread_mutex_lock(&d->st.mu);
	d->st.queued = d->q_n + d->ldr.w_n;
	d->st.holding = 0;
	if (!d->leader && d->q_n && q_at(d, 0)->frozen && !q_at(d, 0)->staged)
		d->st.holding = q_at(d, 0)->fn.change;
	pthread_mutex_unlock(&d->st.mu);
}


/* Drops every change still waiting (a leader's clients hear why); an
 * instant already held is let go on the function in force. */
void dist_q_clear(struct dist *d, const struct clock_env *env, const char *why)
{
	while (d->q_n) {
		struct dist_pending *p = q_at(d, 0);

		/* A change decided ahead stands: readers switch to it at its
		 * instant, and the writer (this one, or the next after a stop)
		 * completes it there; waiting for that would stall this thread. */
		if (p->frozen && !p->staged)
			dist_close_open(env);
		if (p->c) {
			cmd_fail(p->c, -ECANCELED, why);
			clock_env_complete(env, p->c, -ECANCELED);
		}
		q_pop(d);
	}
	d->flw.rejoin = false; /* stale meanwhile: the next function starts anew */
	for (; d->ldr.w_n; d->ldr.w_n--, d->ldr.w_first = (d->ldr.w_first + 1) % DIST_QUEUE_MAX) {
		struct cmd *c = d->ldr.waiting[d->ldr.w_first];

		cmd_fail(c, -ECANCELED, why);
		clock_env_complete(env, c, -ECANCELED);
	}
	dist_q_count(d);
}

/* A follower's change that took effect @ns after its instant (status,
 * under mu). */
void dist_count_late(struct dist *d, int64_t ns)
{
	latehist_add(&d->st.lateness, ns);
	d->st.late++;
	d->st.last_late_ns = ns;
	if (ns > d->st.worst_late_ns)
		d->st.worst_late_ns = ns;
}

/* The update an instant opened (freeze_at), nothing decided, withdrawn:
 * readers go on with the function in force as if nothing had been planned
 * there (a change dropped or moved later), at once, however far the
 * instant is (a reader held past it runs on from there). */
void dist_close_open(const struct clock_env *env)
{
	int r = shmclock_writer_withdraw(env->w);

	if (r && r != -ENODATA)
		log_msg(LOG_WARN, "distribute: a held instant could not be let go: %s",
			shmclock_strerror(r));
}

/* Follower: holds its readers at the instant of the change it waits for
 * (the queue's head, not committed): opened when heard, so no timer of
 * this thread stands between its readers and the instant. -ENODATA (no
 * function yet) holds nothing and needs nothing. */
static void hold_open(struct dist *d, const struct clock_env *env, struct dist_pending *p)
{
	int r;

	dist_lease_let_go(d, env); /* the change's instant comes first */
	r = shmclock_writer_freeze_at(env->w, p->e_mono);

	p->frozen = r == 0 || r == -ENODATA;
	if (!p->frozen && !p->hold_failed)
		log_msg(LOG_WARN, "distribute: change %llu: its instant could not be held: %s",
			(unsigned long long)p->fn.change, shmclock_strerror(r));
	p->hold_failed = !p->frozen; /* said once, tried again each pass */
	dist_q_count(d);
}

/* Follower: a commit of its own before the instant it holds (the stale
 * mark, UnixTimeAtZero) would wait for that instant: the hold is
 * withdrawn first and opened again by the next run of the queue, right
 * after the command. A change decided ahead stays (its commit waits, as
 * it must: readers may have switched already). */
void dist_hold_drop(struct dist *d, const struct clock_env *env)
{
	struct dist_pending *p = d->q_n ? q_at(d, 0) : NULL;

	dist_lease_let_go(d, env);
	/* Past the instant the commit does not wait (and a clock held
	 * stale there may have completed the update already). */
	if (d->leader || !p || !p->frozen || p->staged || mono_ns() >= p->e_mono)
		return;
	dist_close_open(env);
	p->frozen = false;
	dist_q_count(d);
}

/* Follower: whether what it commits or decides ahead now must say stale:
 * a clock marked stale, unless it waits for the function a rejoin took
 * (follower_fresh clears the mark there, when its leader does not echo);
 * or one that waits for its leader's echo (admit_check clears it). The
 * segment's mark and the clock thread's stay the same: a mark cleared by a
 * commit alone is not seen by the next set_stale(). */
bool dist_follower_stale(const struct dist *d, const struct clock_env *env)
{
	if (d->leader)
		return false;
	if (d->flw.admit_wait)
		return true;
	return atomic_load_explicit(env->stale, memory_order_relaxed) &&
	       (!d->flw.rejoin || (d->fn.flags & DIST_F_ECHO));
}

/* A committed change at the head of the queue, decided ahead: readers
 * switch at its instant by themselves (the segment's next line), whenever
 * this thread runs next. Not possible once the instant came (-EALREADY),
 * or with nothing open (a follower's first function: -ENODATA from
 * freeze_at): the change is then committed at the instant as before. */
static void stage(struct dist *d, const struct clock_env *env, struct dist_pending *p, int64_t now)
{
	if (!p->frozen) {
		dist_lease_let_go(d, env);
		shmclock_writer_freeze_at(env->w, p->e_mono);
		p->frozen = true;
	}
	if (p->staged || now >= p->e_mono ||
	    shmclock_writer_set_function(env->w, p->e_mono, p->sim_base, p->scale,
					 p->fl | SHMCLOCK_FN_AHEAD |
						 (dist_follower_stale(d, env) ? SHMCLOCK_FN_STALE : 0)))
		return;
	p->staged = true;
	pthread_mutex_lock(&d->st.mu);
	d->st.staged++;
	pthread_mutex_unlock(&d->st.mu);
	dist_q_count(d); /* decided: no longer held */
}

/* Commits the queued changes whose instants came: the update is open
 * before each (freeze_at: readers stop exactly there however late this
 * thread runs; a follower's from when it heard the change, a leader's
 * from its decision or DIST_OPEN_NS before), the commit ends it. A change not committed (a
 * leader: not decided; a follower: no commit heard) is not applied: a
 * follower holds there, up to its bound, then marks itself stale; a
 * leader postpones it before that. Returns the deadline of the next step
 * (INT64_MAX: nothing queued). */
int64_t dist_run_queue(struct dist *d, const struct clock_env *env, int64_t now)
{
	int64_t next = INT64_MAX;

	if (d->leader && d->ldr.announce_at == INT64_MAX && !d->ldr.deposed) {
		dist_leader_decide(d, now);
		for (unsigned i = 0; i < d->q_n; i++) {
			struct dist_pending *p = q_at(d, i);

			if (p->decided)
				continue;
			if (now >= p->e_mono - guard_ns(d))
				dist_leader_postpone(d, env, i, now);
			if (!q_at(d, i)->decided)
				next = q_at(d, i)->e_mono - guard_ns(d);
			break;
		}
		next = (dist_leader_repeat(d, now) < next) ? d->ldr.next_repeat : next;
	}
	while (d->q_n) {
		struct dist_pending *p = q_at(d, 0);
		int r;

		if (!d->leader && !p->decided && !p->frozen)
			hold_open(d, env, p);
		if (d->leader && !p->decided && now < p->e_mono - DIST_OPEN_NS)
			return p->e_mono - DIST_OPEN_NS < next ? p->e_mono - DIST_OPEN_NS : next;
		if (d->leader && !p->decided)
			return next; /* postponed above, before its instant */
		if (!d->leader && !p->staged && !p->frozen && p->announced < p->e_mono &&
		    now > p->e_mono) {
			/* Heard before its instant, yet neither held nor decided
			 * ahead there (the hold could not be opened, or another
			 * update open before it took effect that late): its
			 * readers showed the function before, not stale. Said,
			 * never hidden. */
			pthread_mutex_lock(&d->st.mu);
			d->st.ran_past++;
			pthread_mutex_unlock(&d->st.mu);
			log_msg(LOG_WARN, "distribute: change %llu reached its instant %.3f ms before "
					  "this host's clock thread ran: its readers showed the previous "
					  "function meanwhile (its hold could not be opened in time)",
				(unsigned long long)p->fn.change, (double)(now - p->e_mono) / 1e6);
		}
		if (p->decided) {
			/* Known committed: decided ahead at once, in the same
			 * run as the decision (leader) or the message (follower). */
			stage(d, env, p, now);
			if (d->leader && p->staged)
				dist_leader_own(d, p, now);
			if (d->leader && !p->staged && p->fn.change > d->ldr.committed) {
				/* Decided too late to switch at its instant here
				 * (this thread ran late): said to nobody yet, so
				 * undecided again and postponed (the next pass).
				 * Never applied late on the leader alone: followers
				 * switch at the instant. */
				p->decided = false;
				return now;
			}
		} else if (!p->frozen) {
			hold_open(d, env, p);
		}
		if (now < p->e_mono)
			return p->e_mono < next ? p->e_mono : next;
		if (!p->decided) {
			/* A follower holds the instant: the leader has not
			 * decided yet (or this host missed it); stale if that
			 * lasts. */
			int64_t bound = DIST_LOST_BASE_NS + 2 * (p->fn.lead_ns > 0 ? p->fn.lead_ns : 0);

			if (!p->held) {
				p->held = true;
				pthread_mutex_lock(&d->st.mu);
				d->st.holds++;
				pthread_mutex_unlock(&d->st.mu);
			}
			if (now - p->e_mono >= bound && !d->flw.hold_stale)
				/* held at the instant: stays there */
				dist_lost_leader(d, env, LOSS_HELD,
						 "change %llu was due %.3f s ago and is not committed: "
						 "this host has lost the leader (or the leader lost it)",
						 (unsigned long long)p->fn.change,
						 (double)(now - p->e_mono) / 1e9);
			return d->flw.hold_stale ? next : (p->e_mono + bound < next ? p->e_mono + bound : next);
		}
		/* Never a fresh commit on a clock marked stale, unless it is the
		 * function a rejoin waited for (follower_fresh, below). */
		r = p->staged ? shmclock_writer_complete(env->w)
			      : shmclock_writer_set_function(
					env->w, p->e_mono, p->sim_base, p->scale,
					p->fl | (dist_follower_stale(d, env) ? SHMCLOCK_FN_STALE : 0));
		if (p->staged && r == -ENODATA)
			r = 0; /* another commit (a reload's, say) completed it first */
		now = mono_ns();
		latehist_add(&d->st.applied, now - p->e_mono);
		if (d->leader) {
			if (r)
				cmd_fail(p->c, r, shmclock_strerror(r));
			latehist_add(&d->st.to_commit, now - p->first_announced);
			clock_env_complete(env, p->c, r);
			dist_leader_own(d, p, now); /* applied: said committed now if not yet */
			d->ldr.next_hb = now + d->hb_ns;
		} else {
			/* Recorded as the leader's (term), before whatever this
			 * pass commits next. */
			struct tl_cause why = { .kind = TL_CAUSE_LEADER, .uid = -1, .pid = -1,
						.term = p->fn.term };

			if (!r)
				clock_env_record(env, &why);
			d->flw.cur = p->fn;
			d->flw.cur_off = p->fn.effective_ns - p->e_mono;
			d->flw.have_cur = true;
			if (d->flw.rejoin) {
				/* The function taken after silence is in force. */
				d->flw.rejoin = false;
				dist_follower_fresh(d, env, &p->fn, now, false);
			}
			if (p->held) {
				/* Committed after its instant: readers held there meanwhile. */
				pthread_mutex_lock(&d->st.mu);
				dist_count_late(d, now - p->e_mono);
				pthread_mutex_unlock(&d->st.mu);
			}
		}
		pthread_mutex_lock(&d->st.mu);
		d->st.changes += d->leader;
		pthread_mutex_unlock(&d->st.mu);
		q_pop(d);
		dist_q_count(d);
	}
	/* The deadlines of the change announced next are its own. */
	if (d->leader && d->ldr.w_n && dist_leader_next(d, env))
		return dist_run_queue(d, env, mono_ns());
	return next;
}
