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
 * waits, unannounced (d->ldr.waiting), until that one took effect. The leader
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <shmclock/time.h>
/* After shmclock.h: shmclock_static_eval(), the function readers evaluate. */
#include <shmclock/static/shmclock.h>

#include "log.h"
#include "mode_distribute.h"
#include "record.h"
#include "hosts/dist.h"
#include "hosts/id.h"

static void dist_on_tick(struct mode_plain *p, const struct clock_env *env, int64_t now);
static const struct clock_mode_ops mode_distribute_ops;

struct clock_mode *mode_distribute_create(const struct shmclockd_config *cfg, struct ros2 *r,
					  const struct ros2_api *api)
{
	struct dist *d;

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
	d->on_slow = cfg->dist_on_slow;
	d->stale_ns = cfg->dist_stale_ns;
	snprintf(d->clock, sizeof(d->clock), "%s", config_dist_clock(cfg));
	pthread_mutex_init(&d->st.mu, NULL);
	d->st.last_loss = -1;
	d->ldr.lead_cur = d->lead_ns;
	d->st.lead = d->lead_ns;
	d->ldr.next_repeat = INT64_MAX;
	d->flw.created = mono_ns();
	/* Unique per run: a restarted leader (or follower) is a new one. */
	hosts_id(d->leader ? d->st.leader_id : d->flw.self_id, sizeof(d->flw.self_id),
		 api->identity ? api->identity(r) : "");
	return &d->plain.m;
}

const char *mode_distribute_id(const struct clock_mode *m)
{
	const struct dist *d = dist_of((struct clock_mode *)m);

	return d->leader ? d->st.leader_id : d->flw.self_id;
}

bool mode_distribute_following(const struct clock_mode *m)
{
	return dist_of((struct clock_mode *)m)->have;
}

static void dist_destroy(struct clock_mode *m)
{
	struct dist *d = dist_of(m);

	pthread_mutex_destroy(&d->st.mu);
	free(d);
}

void dist_event(struct dist *d, const char *event, const char *host, uint64_t term,
		const char *detail)
{
	struct tl_hosts e = { .term = term };
	shmclock_info_t in;

	if (!d->env || !d->env->rec)
		return;
	shmclock_writer_info(d->env->w, &in);
	e.sim_ns = in.sim_ns;
	snprintf(e.event, sizeof(e.event), "%s", event);
	snprintf(e.host, sizeof(e.host), "%s", host);
	snprintf(e.detail, sizeof(e.detail), "%s", detail);
	recorder_hosts(d->env->rec, &e);
}

/* CMD_INIT: ticks as plain; a leader publishes its first function. */
static int dist_start(struct clock_mode *m, const struct clock_env *env)
{
	struct dist *d = dist_of(m);
	int64_t now;
	int r = mode_plain_ops.start(m, env);

	d->env = env;
	if (r)
		return r;
	/* A follower is stale until it follows (follower_fresh): a clock
	 * continued from an earlier shmclockd shows that one's function,
	 * which the leader may have left since, or gone. */
	if (!d->leader)
		return clock_env_set_stale(env, true);
	d->fn.timebase = (uint8_t)dist_leader_timebase();
	now = mono_ns();
	dist_snapshot(env->w, d, now, dist_sample_offset(d->fn.timebase));
	/* Published once the terms before ours are known (announce). */
	d->ldr.announce_at = now + DIST_DISCOVER_NS;
	d->ldr.next_hb = INT64_MAX;
	return 0;
}

/* Each tick: heartbeats (leader), re-anchoring after a host clock step
 * (both). */
static void dist_on_tick(struct mode_plain *p, const struct clock_env *env, int64_t now)
{
	struct dist *d = (struct dist *)p;
	int64_t off;

	if (!d->have)
		return;
	off = dist_sample_offset(d->fn.timebase);
	/* The host clock was stepped: the same function, re-expressed. Not
	 * while changes are queued: they keep the offset they were published
	 * (leader) or translated (follower) with, and are re-anchored once
	 * they took effect; a follower's other conditions: follower_reanchor. */
	if (d->leader && !d->q_n && llabs(off - d->off) > DIST_REANCHOR_NS) {
		dist_leader_reanchor(d, env, now, off);
	} else if (!d->leader && d->flw.have_cur && llabs(off - d->flw.cur_off) > DIST_REANCHOR_NS &&
		   !d->q_n && !d->flw.gap_held) {
		dist_follower_reanchor(d, env, off);
	}
	if (d->leader && now >= d->ldr.next_hb) {
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
			dist_snapshot(env->w, d, now, d->off);
		if (d->ldr.deposed)
			dist_publish_deposed(d); /* not its time any more: that it runs */
		else
			dist_publish(d, DIST_PUB_RELIABLE); /* the current function again: a heartbeat */
		d->ldr.next_hb = now + d->hb_ns;
	}
}

static int dist_change(struct clock_mode *m, const struct clock_env *env, struct cmd *c,
		       const shmclock_info_t *in)
{
	struct dist *d = dist_of(m);
	int64_t now = mono_ns();

	/* A follower whose lease ran out (this process stopped meanwhile)
	 * takes what waited as one back from silence. */
	if (!d->leader && d->flw.lease_until && now >= d->flw.lease_until)
		dist_lease_keep(d, env, now);
	/* As plain first: the period may follow. */
	mode_plain_ops.change(m, env, c, in);
	/* A follower never gets a client's change: the command table's
	 * follower column refuses it before the mode is called (protocol.h). */
	if (d->leader && cmd_changes_time(c->req.kind))
		return dist_leader_change(d, env, c, mono_ns(), false);
	if (!d->leader && c->req.kind == CMD_FUNCTION)
		return dist_follow_apply(d, env, c);
	if (d->leader && c->req.kind == CMD_FUNCTION)
		return dist_leader_heard(d, env, c->arg_fn);
	if (c->req.kind == CMD_ACK && c->arg_ack->echo)
		return d->leader ? 0 : dist_follower_echo(d, env, c->arg_ack, mono_ns());
	if (c->req.kind == CMD_ACK)
		return d->leader ? dist_leader_ack(d, c->arg_ack, mono_ns()) : 0;
	if (d->leader && c->req.kind == CMD_STALE)
		return 0; /* the topic is quiet: nothing to a leader */
	/* Silence: what the leader announced is void (a leader back
	 * resends its function). */
	if (!d->leader && c->req.kind == CMD_STALE && c->arg_stale) {
		/* Readers held past an instant stay there, stale (the clock
		 * thread's own mark then finds the clock marked). */
		dist_lost_leader(d, env, LOSS_SILENCE, "no word from it for %.3f s",
				 (double)dist_silence_ns(d->stale_ns, d->fn.heartbeat_ns) / 1e9);
	}
	/* The clock thread's own commits (the stale mark, a reload's): now,
	 * not at an instant this follower holds (opened again after). */
	if (c->req.kind == CMD_STALE || c->req.kind == CMD_RELOAD)
		dist_hold_drop(d, env);
	return CLOCK_MODE_PASS;
}

static int64_t dist_tick(struct clock_mode *m, const struct clock_env *env, int64_t now)
{
	struct dist *d = dist_of(m);
	int64_t next, q;

	/* A lease run out first: nothing this follower did since counts. */
	if (!d->leader && d->flw.lease_until && now >= d->flw.lease_until)
		dist_lease_keep(d, env, now);
	next = mode_plain_ops.tick(m, env, now);
	if (next == CLOCK_MODE_AGAIN)
		return next;
	now = mono_ns();
	if (d->leader)
		dist_note_gone(d, now);
	if (d->leader && d->ldr.announce_at != INT64_MAX) {
		if (now >= d->ldr.announce_at)
			dist_announce(d, env, now);
		else if (d->ldr.announce_at < next)
			next = d->ldr.announce_at;
	}
	q = dist_run_queue(d, env, now);
	if (q < next)
		next = q;
	if (!d->leader)
		dist_admit_check(d, env); /* the queue it waited for may have emptied */
	if (!d->leader && d->flw.gap)
		dist_gap_hold(d, env);
	if (!d->leader && d->flw.gap && !d->flw.hold_stale) {
		int64_t bound = DIST_LOST_BASE_NS + 2 * d->fn.lead_ns;

		if (now - d->flw.gap_since >= bound) {
			/* held where the gap was seen: stays there */
			dist_lost_leader(d, env, LOSS_GAP,
					 "a change was missed and not repeated for %.3f s",
					 (double)(now - d->flw.gap_since) / 1e9);
		} else if (d->flw.gap_since + bound < next) {
			next = d->flw.gap_since + bound;
		}
	}
	if (!d->leader && d->flw.joined) {
		dist_follower_ack(d, now, false);
		if (d->flw.next_lease < next)
			next = d->flw.next_lease;
	}
	if (!d->leader && (q = dist_lease_keep(d, env, mono_ns())) < next)
		next = q;
	if (!d->leader && d->flw.leave_due && atomic_load_explicit(env->stale, memory_order_relaxed))
		dist_leave_send(d);
	if (!d->leader && !d->have && !d->flw.none_said) {
		if (now - d->flw.created >= DIST_NONE_HINT_NS) {
			d->flw.none_said = true;
			log_msg(LOG_WARN, "distribute: no leader of clock '%s' heard for %.0f s: "
					  "check its Distribute.Clock, Ros2.Domain, CYCLONEDDS_URI and "
					  "Ros2.Security (hosts with and without it do not see each other, "
					  "nor enclaves of two CAs)", d->clock,
				DIST_NONE_HINT_NS / 1e9);
		} else if (d->flw.created + DIST_NONE_HINT_NS < next) {
			next = d->flw.created + DIST_NONE_HINT_NS;
		}
	}
	pthread_mutex_lock(&d->st.mu);
	d->st.lead = d->ldr.lead_cur;
	if (d->leader) {
		d->st.n_members = 0;
		for (unsigned i = 0; i < DIST_MEMBERS_MAX; i++)
			if (member_live(&d->ldr.members[i], now)) {
				struct dist_member *mb = &d->st.members[d->st.n_members++];

				*mb = d->ldr.members[i];
				mb->slowest = dist_slowest_count(d, mb);
				mb->straggler = mb->serial == d->ldr.slowest_said;
			}
	}
	pthread_mutex_unlock(&d->st.mu);
	return next;
}

static void dist_cancel(struct clock_mode *m, const struct clock_env *env)
{
	struct dist *d = dist_of(m);
	bool staged = false;

	for (unsigned i = 0; i < d->q_n; i++)
		staged |= q_at(d, i)->staged;
	dist_lease_let_go(d, env);
	if (!d->leader && !staged && d->q_n && q_at(d, 0)->frozen &&
	    mono_ns() >= q_at(d, 0)->e_mono && clock_env_set_stale(env, true) == 0)
		/* Readers held at an instant past: the mark completes the
		 * update there, stale (withdrawn first, they would run on
		 * fresh until the mark). */
		q_at(d, 0)->frozen = false;
	dist_q_clear(d, env, "shmclockd is stopping: the change was not made");
	/* A member that stops marks its clock stale (kept in the segment for
	 * its readers, and for the next shmclockd, which starts stale), then
	 * says it leaves: nothing its leader does without it shows here as
	 * fresh. Not with a change decided ahead in its segment (the mark
	 * would wait for its instant): the leader then waits its lease. */
	if (d->leader || staged)
		return;
	dist_follower_leave(d);
	if (d->flw.leave_due && clock_env_set_stale(env, true) == 0 &&
	    atomic_load_explicit(env->stale, memory_order_relaxed))
		dist_leave_send(d);
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
