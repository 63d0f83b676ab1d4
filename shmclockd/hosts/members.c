/* SPDX-License-Identifier: MIT */
/*
 * The leader's followers (members): who holds what, their
 * acknowledgements, leases and echoes, and the Lead adapted to them.
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

/* Does every live member hold change @n under the current plan? */
bool dist_all_hold(const struct dist *d, uint64_t n, int64_t now)
{
	for (unsigned i = 0; i < DIST_MEMBERS_MAX; i++) {
		const struct dist_member *m = &d->ldr.members[i];

		if (member_live(m, now) && (m->plan != d->ldr.plan || m->acked < n))
			return false;
	}
	return true;
}

/* Has every live member heard the commits up to @n? */
bool dist_all_confirmed(const struct dist *d, uint64_t n, int64_t now)
{
	for (unsigned i = 0; i < DIST_MEMBERS_MAX; i++)
		if (member_live(&d->ldr.members[i], now) && d->ldr.members[i].committed < n)
			return false;
	return true;
}

unsigned dist_members_live(const struct dist *d, int64_t now)
{
	unsigned n = 0;

	for (unsigned i = 0; i < DIST_MEMBERS_MAX; i++)
		n += member_live(&d->ldr.members[i], now);
	return n;
}

/* What members lack goes out again this often: the quickest recent
 * acknowledgement (a round trip: sooner adds only load; not the median,
 * which losses raise and which would then slow their own repair), at most
 * eight times a Lead, never more often than every millisecond. */
int64_t dist_repeat_ns(const struct dist *d)
{
	int64_t r = d->ldr.lead_cur / 8;

	for (unsigned i = 0; i < d->ldr.recent_n; i++)
		if (d->ldr.recent[i] < r)
			r = d->ldr.recent[i];
	return r > 1000000 ? r : 1000000;
}

/* Lead from the time every member held a change (its slowest member's
 * acknowledgement) over the last DIST_ACK_RECENT changes: DIST_LEAD_MARGIN
 * times their DIST_LEAD_PCT percentile, within its bounds (Distribute.Lead
 * while nobody acknowledged). Not their maximum: the slowest of many
 * followers is a load spike of one machine more often than the link, and
 * Lead is what every change waits (4 x the maximum made a commit at 16
 * followers 10 x that at one; a change the percentile misses is postponed,
 * once). A window, not the whole history: a slow spell must not keep Lead
 * up for ever. */
void dist_adapt_lead(struct dist *d, int64_t ack_ns)
{
	int64_t v[DIST_ACK_RECENT], l;
	unsigned n, k;

	d->ldr.recent[d->ldr.recent_i++ % DIST_ACK_RECENT] = ack_ns;
	if (d->ldr.recent_n < DIST_ACK_RECENT)
		d->ldr.recent_n++;
	n = d->ldr.recent_n;
	memcpy(v, d->ldr.recent, n * sizeof(v[0]));
	/* Insertion sort: 32 at most. */
	for (unsigned i = 1; i < n; i++)
		for (unsigned j = i; j > 0 && v[j - 1] > v[j]; j--) {
			int64_t t = v[j];

			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	k = (n * DIST_LEAD_PCT + 99) / 100; /* the nearest rank */
	l = v[k ? k - 1 : 0] * DIST_LEAD_MARGIN;
	if (l < DIST_LEAD_MIN_NS)
		l = DIST_LEAD_MIN_NS;
	if (l > DIST_LEAD_MAX_NS)
		l = DIST_LEAD_MAX_NS;
	d->ldr.lead_cur = l;
}

/* Leader: change @p is held by every live member. Which one it waited
 * for last (the latest to acknowledge it) counts against that member over
 * the last DIST_ACK_RECENT changes; one that holds up most of them, while
 * Lead is above its floor, is said once, by name (status: "slowest"). And
 * OnSlow: each member was late on it or not (late_bits): late if it was
 * postponed for it while another member held it, or if it was the last to
 * hold it, more than DIST_LEAD_MIN_NS after all the others and longer
 * after them than they took (so once Lead has grown to cover it, it is
 * still late: measured against the others, not against Lead). Only with
 * two members or more. */
void dist_note_slowest(struct dist *d, const struct dist_pending *p, int64_t now)
{
	struct dist_member *last = NULL;
	int64_t second = INT64_MIN;
	unsigned live = 0, times = 0;

	for (unsigned i = 0; i < DIST_MEMBERS_MAX; i++) {
		struct dist_member *m = &d->ldr.members[i];

		if (!member_live(m, now))
			continue;
		live++;
		if (!last || m->acked_at > last->acked_at) {
			if (last)
				second = last->acked_at;
			last = m;
		} else if (m->acked_at > second) {
			second = m->acked_at;
		}
	}
	if (live < 2)
		return;
	for (unsigned i = 0; i < DIST_MEMBERS_MAX; i++) {
		struct dist_member *m = &d->ldr.members[i];
		bool late;

		if (!member_live(m, now))
			continue;
		late = m->late_change == p->fn.change ||
		       (m == last && last->acked_at - second > DIST_LEAD_MIN_NS &&
			last->acked_at - second > second - p->announced);
		m->late_bits = m->late_bits << 1 | late;
		dist_ask_aside(d, m);
	}
	d->ldr.slow[d->ldr.slow_i++ % DIST_ACK_RECENT] = last->serial;
	/* The straggler said last: said again only once it was not one. */
	if (d->ldr.slowest_said) {
		for (unsigned i = 0; i < DIST_ACK_RECENT; i++)
			times += d->ldr.slow[i] == d->ldr.slowest_said;
		if (times < DIST_SLOWEST_OF / 2)
			d->ldr.slowest_said = 0;
		return;
	}
	for (unsigned i = 0; i < DIST_ACK_RECENT; i++)
		times += d->ldr.slow[i] == last->serial;
	/* Not while Lead is at its floor: waiting for it costs nothing
	 * (one of two followers on one machine is the last most times). */
	if (times >= DIST_SLOWEST_OF && d->ldr.lead_cur > DIST_LEAD_MIN_NS) {
		log_msg(LOG_WARN, "distribute: follower %s of clock '%s' was the last to hold %u of "
				  "the last %u changes: every change waits for it (Lead %.3f ms; "
				  "status \"slowest\")", last->id, d->clock, times, DIST_ACK_RECENT,
			(double)d->ldr.lead_cur / 1e6);
		d->ldr.slowest_said = last->serial;
	}
}

/* Leader, as a follower joins: once it has DIST_FLEET_WARN members, a
 * look at its sockets (once: /proc is read on this thread), and a line if
 * they got less receive buffer than Cyclone asks for (the buffers do not
 * change while it runs). */
static void fleet_buffers_check(struct dist *d, int64_t now)
{
	double drops, rcvbuf;
	unsigned n = dist_members_live(d, now);

	if (d->ldr.rcvbuf_said || n < DIST_FLEET_WARN)
		return;
	d->ldr.rcvbuf_said = true;
	if (!dist_udp_sockets(&drops, &rcvbuf) || rcvbuf < 0 || rcvbuf >= DIST_RCVBUF_WANT)
		return;
	log_msg(LOG_WARN, "distribute: %u followers of clock '%s', and this host's DDS sockets got "
			  "%.0f KiB of receive buffer, not the 1024 KiB Cyclone DDS asks for "
			  "(net.core.rmem_max): starved, this leader would drop their datagrams "
			  "within a second; raise it (doc/hosts.md, \"A fleet\")",
		n, d->clock, rcvbuf / 1024);
}

/* Leader: an echo to @follower of its lease stamped @written, naming the
 * last change announced; with @aside_ns, asking it to step aside that
 * long (OnSlow). 0, or -EIO (said at debug level). */
static int echo_to(struct dist *d, const char *follower, int64_t written, int64_t aside_ns)
{
	struct dist_ack e;

	memset(&e, 0, sizeof(e));
	snprintf(e.clock, sizeof(e.clock), "%s", d->clock);
	snprintf(e.follower, sizeof(e.follower), "%s", follower);
	snprintf(e.leader, sizeof(e.leader), "%s", d->st.leader_id);
	e.term = d->ldr.term;
	e.written_ns = written;
	e.acked = d->fn.change;
	e.aside_ns = aside_ns;
	e.echo = true;
	if (d->api->dist_echo(d->r, &e) < 0) {
		log_msg(LOG_DEBUG, "distribute: a TimeEcho write failed");
		return -EIO;
	}
	return 0;
}

/* Leader, OnSlow: member @m was late on d->on_slow of the last 32
 * changes (dist_note_slowest): asked to step aside for DIST_ASIDE_NS, in
 * an echo to it alone (aside_ns), and again in every echo of its leases
 * (an echo writer keeps the last only: a lost request is replaced). It
 * then marks itself stale and leaves, as a follower that lost its leader
 * does, and the leader stops waiting for it at its leave, or at its
 * lease: never before, whatever it was asked (it may not have heard), so
 * this changes nothing the leader decides without it. */
void dist_ask_aside(struct dist *d, struct dist_member *m)
{
	if (!d->on_slow || (unsigned)__builtin_popcount(m->late_bits) < d->on_slow ||
	    m->asked_aside)
		return;
	if (echo_to(d, m->id, m->written, DIST_ASIDE_NS) < 0)
		return;
	m->asked_aside = true;
	log_msg(LOG_WARN, "distribute: follower %s of clock '%s' was late on %d of the last 32 "
			  "changes: asked to step aside for %.0f s (OnSlow %u); waited for until it "
			  "leaves", m->id, d->clock, __builtin_popcount(m->late_bits),
		(double)DIST_ASIDE_NS / 1e9, d->on_slow);
	pthread_mutex_lock(&d->st.mu);
	d->st.asked_aside++;
	pthread_mutex_unlock(&d->st.mu);
}

/* How many of the last changes waited for member @m last. */
unsigned dist_slowest_count(const struct dist *d, const struct dist_member *m)
{
	unsigned times = 0;

	for (unsigned i = 0; i < DIST_ACK_RECENT; i++)
		times += m->serial && d->ldr.slow[i] == m->serial;
	return times;
}

/* Leader: a follower's acknowledgement (CMD_ACK): a member (again), what it
 * holds, the commits it heard. */
int dist_leader_ack(struct dist *d, const struct dist_ack *a, int64_t now)
{
	struct dist_member *m = NULL, *free_slot = NULL;
	bool joined = false;

	if (strcmp(a->leader, d->st.leader_id) || a->term != d->ldr.term || d->ldr.deposed)
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
			if (d->ldr.members[i].used && !strcmp(d->ldr.members[i].id, a->follower) &&
			    !(a->written_ns && a->written_ns < d->ldr.members[i].written)) {
				d->ldr.members[i].used = false;
				d->ldr.members[i].left = true;
				d->ldr.members[i].left_at = now;
				d->ldr.members[i].left_written = a->written_ns;
				d->api->dist_echo_forget(d->r, a->follower);
				log_msg(LOG_INFO, "distribute: follower %s left clock '%s' (stale, or "
						  "stopping): not waited for", a->follower, d->clock);
				dist_event(d, "left", a->follower, d->fn.term, "stale, or stopping");
			}
		return 0;
	}
	for (unsigned i = 0; i < DIST_MEMBERS_MAX; i++) {
		struct dist_member *x = &d->ldr.members[i];

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
		if (x->used && !strcmp(x->id, a->follower)) {
			m = x;
			/* Back after its lease ran out, in the same slot: what it
			 * was late on and asked is of its last membership. */
			if (!member_live(m, now)) {
				m->late_bits = 0;
				m->late_change = 0;
				m->asked_aside = false;
			}
			if (m->gone) {
				m->gone = false;
				dist_event(d, "joined", m->id, d->fn.term, "back after its lease ran out");
			}
		}
		else if (!free_slot && !member_live(x, now) &&
			 !(x->left && now - x->left_at < DIST_LEAVE_ORDER_NS))
			free_slot = x; /* not another's leave, still kept */
	}
	if (!m) {
		if (!free_slot) {
			if (!d->ldr.members_full_logged)
				log_msg(LOG_WARN, "distribute: more than %d followers of clock '%s': %s is "
						  "not waited for", DIST_MEMBERS_MAX, d->clock, a->follower);
			d->ldr.members_full_logged = true;
			return 0;
		}
		m = free_slot;
		if (m->id[0] && strcmp(m->id, a->follower))
			d->api->dist_echo_forget(d->r, m->id); /* gone: its echoes too */
		memset(m, 0, sizeof(*m));
		snprintf(m->id, sizeof(m->id), "%s", a->follower);
		m->used = true;
		m->serial = ++d->ldr.serials;
		log_msg(LOG_INFO, "distribute: follower %s joined clock '%s'", a->follower, d->clock);
		dist_event(d, "joined", a->follower, d->fn.term, "");
		joined = true;
	}
	m->seen = now;
	if (a->written_ns > m->written)
		m->written = a->written_ns;
	m->lease = a->lease_ns < DIST_LEASE_NS ? DIST_LEASE_NS
		   : a->lease_ns > 60 * INT64_C(1000000000) ? 60 * INT64_C(1000000000)
							      : a->lease_ns;
	if (joined)
		fleet_buffers_check(d, now); /* with it live */
	/* What it holds under the current plan (acknowledgements of an
	 * earlier plan say only that it is alive). */
	if (a->plan == d->ldr.plan && (m->plan != d->ldr.plan || a->acked > m->acked)) {
		/* The first acknowledgement of the change announced last. */
		if (a->acked == d->fn.change && d->q_n)
			m->last_ack_ns = now - q_at(d, d->q_n - 1)->announced;
		m->acked = a->acked;
		m->plan = d->ldr.plan;
		m->acked_at = now;
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
		echo_to(d, a->follower, a->written_ns, m->asked_aside ? DIST_ASIDE_NS : 0);
	}
	return 0;
}

void dist_note_gone(struct dist *d, int64_t now)
{
	if (!d->env || !d->env->rec)
		return;
	for (unsigned i = 0; i < DIST_MEMBERS_MAX; i++) {
		struct dist_member *m = &d->ldr.members[i];

		if (m->used && !m->gone && !member_live(m, now)) {
			m->gone = true;
			dist_event(d, "lost", m->id, d->fn.term, "its lease ran out (silent)");
		}
	}
}
