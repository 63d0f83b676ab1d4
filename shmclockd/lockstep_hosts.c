/* SPDX-License-Identifier: MIT */
/* Lockstep between hosts: the leader's hosts and a follower's promise
 * (lockstep_hosts.h). */
#define _GNU_SOURCE
#include <assert.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <shmclock/time.h>

#include "duration.h"
#include "hosts/id.h"
#include "lockstep_hosts.h"
#include "log.h"

static_assert(CONFIG_LOCKSTEP_HOSTS_MAX == SHMCLOCK_LOCKSTEP_SLOTS * (LS_HOSTS_MAX + 1),
	      "a leader's Lockstep.Participants: its slots and those of every host it counts");

/* A host is lost this long after its last word (it writes one every
 * Distribute.Heartbeat): a follower's lease between hosts (ros2.h),
 * 3.5 s. Not shorter: a link back after a cut carries nothing for a
 * while (lockstep_hosts_e2e.py: a host cut off for 0.4 s was heard again
 * 1.2 s after the cut began), and a host lost is a death (OnDeath). */
#define LS_LEASE_NS DIST_LEASE_NS
/* A leader listens this long before it decides: a host that names another
 * leader means a takeover, and then it listens a whole lease. */
#define LS_LISTEN_NS INT64_C(500000000)
/* A promise no time named is repeated after this, then after twice as
 * long each time, up to a heartbeat. */
#define LS_RETRY_MIN_NS INT64_C(5000000)

/* A host the leader heard. */
struct ls_remote {
	char id[97];
	bool used;
	bool lost;       /* silent for its lease: never counted again (it comes
			  * back as a new host, under a new id) */
	bool joined_said;
	bool renewed;    /* lost because a later incarnation of it spoke: it
			  * evicted its participants first (not a death) */
	char renewed_as[97];
	uint64_t seq;
	int64_t grant, shown, lease, heard; /* heard: CLOCK_MONOTONIC */
	uint32_t members;
	uint64_t deaths, deaths_said;
	char last_death[256];
	char who[LS_WHO_LEN];
	int64_t rtt;     /* the last round trip measured (-1: none) */
};

struct ls_hosts {
	const struct ros2_api *api;
	struct ros2 *r;
	/* What a time heard kicks: the lockstep host (under mu: a probe has
	 * none until ls_hosts_attach), else wake(wake_ctx). */
	shmclock_lockstep_host_t *host;
	void (*wake)(void *ctx);
	void *wake_ctx;
	bool leader;
	int64_t hb_ns, lease_ns;
	char id[97];            /* leader: its id; follower: without its incarnation */
	pthread_mutex_t mu;     /* the DDS thread's inbox, and what status reads */
	/* leader */
	struct ls_remote hosts[LS_HOSTS_MAX];
	bool full_said, changed;
	/* ... listening before it decides (ls_hosts_listen): until when,
	 * whether a host named another leader (a takeover: then a lease),
	 * which, and whether it is over */
	int64_t listen_from, listen_until;
	bool takeover, listened;
	char predecessor[97];
	/* ... and its roster (every participant, in a time every heartbeat
	 * and when the hosts changed: hosts_seen counts their changes) */
	int64_t next_roster;
	uint64_t hosts_seen, roster_hosts;
	/* ... and another live leader's times: the last ("": none), when */
	char rival[97];
	int64_t rival_mono;
	uint64_t tseq;
	int64_t sent_sim, next_hb;
	bool sent_running;      /* the last time sent said the run has started */
	/* follower (under mu: what the DDS thread took) */
	char leader_id[97];
	int64_t heard, heard_mono, echo_ns, echo_mono;
	bool named, evicted, jump;
	/* evicted by the past-promise rule: the time, the promise it passed */
	int64_t passed_at, passed_promise;
	bool leader_running;    /* its leader's run has started */
	int64_t hb_leader;      /* the leader's heartbeat */
	char roster[LS_ROSTER_LEN]; /* the leader's last roster, when it came */
	int64_t roster_mono;
	uint64_t acked;         /* the last promise a time named */
	/* the first promise since this host had no participant, and the
	 * leader whose time named it (since when a time past its promise
	 * means it is not counted) */
	uint64_t bound_seq;
	char bound_by[97];
	/* follower (clock thread; status reads under mu) */
	char self[97];          /* id#incarnation */
	unsigned incarnation;
	uint64_t gseq, deaths_sent, repeats;
	struct ls_grant last;   /* the promise written last (repeated as is) */
	int64_t retry, next_retry; /* its repetition until a time names it */
	bool who_due;
	int64_t promised, next_grant;
	uint32_t promised_n;
	bool gate_met, silent, silent_said, none_said;
	uint64_t evictions;
};

static int64_t mono(void)
{
	return shmclock_steady_now().ns;
}

bool ls_hosts_leader(const struct ls_hosts *h)
{
	return h->leader;
}

/* Appends a whole entry to @buf (@used so far of @len): false, and the
 * entry left out, when it does not fit. */
static bool __attribute__((format(printf, 4, 5)))
append(char *buf, size_t len, size_t *used, const char *fmt, ...)
{
	va_list ap;
	int k;

	va_start(ap, fmt);
	k = vsnprintf(buf + *used, len - *used, fmt, ap);
	va_end(ap);
	if (k < 0 || (size_t)k >= len - *used) {
		buf[*used] = 0;
		return false;
	}
	*used += (size_t)k;
	return true;
}

/* ------------------------------------------------------------ leader */

static struct ls_remote *remote_of(struct ls_hosts *h, const char *id)
{
	struct ls_remote *free_slot = NULL;

	for (unsigned i = 0; i < LS_HOSTS_MAX; i++) {
		if (h->hosts[i].used && !strcmp(h->hosts[i].id, id))
			return &h->hosts[i];
		if (!free_slot && (!h->hosts[i].used || h->hosts[i].lost))
			free_slot = &h->hosts[i];
	}
	/* A lost host's slot is reused: its id is then forgotten, and a word
	 * from it would make it a new host. A lost follower never speaks
	 * under its old id again (it takes a new incarnation when it hears it
	 * is no longer named), except a sample in flight: only with 32 hosts
	 * lost at once could that one be taken as a new host's. */
	if (!free_slot)
		return NULL;
	memset(free_slot, 0, sizeof(*free_slot));
	snprintf(free_slot->id, sizeof(free_slot->id), "%s", id);
	free_slot->used = true;
	free_slot->rtt = -1;
	return free_slot;
}

/* A follower's id is ID#INCARNATION: the length of ID in @id, and the
 * incarnation in *inc (-1: none). */
static size_t id_base(const char *id, long *inc)
{
	const char *hash = strrchr(id, '#');
	char *end;

	*inc = -1;
	if (!hash)
		return strlen(id);
	*inc = strtol(hash + 1, &end, 10);
	if (*end || end == hash + 1 || *inc < 0)
		*inc = -1;
	return (size_t)(hash - id);
}

/* Under mu: @x, just heard for the first time, is a later incarnation of
 * hosts still counted: each took a new id only after it evicted all its
 * participants (lockstep_hosts.h: the past-promise rule, or named no
 * more), so nothing of theirs is live; they are lost now, not at the end
 * of their lease, and not as a death (OnDeath is for participants that
 * died, not for those their host evicted). */
static void renewed(struct ls_hosts *h, const struct ls_remote *x)
{
	long inc, old;
	size_t n = id_base(x->id, &inc);

	if (inc < 0)
		return;
	for (unsigned i = 0; i < LS_HOSTS_MAX; i++) {
		struct ls_remote *y = &h->hosts[i];

		if (!y->used || y->lost || y == x || id_base(y->id, &old) != n ||
		    strncmp(y->id, x->id, n) || old < 0 || old >= inc)
			continue;
		y->lost = true;
		y->renewed = true;
		snprintf(y->renewed_as, sizeof(y->renewed_as), "%s", x->id);
		h->changed = true;
		h->hosts_seen++;
	}
}

/* The DDS thread: a host's promise. */
static void on_grant(void *ctx, const struct ls_grant *g)
{
	struct ls_hosts *h = ctx;
	struct ls_remote *x;
	int64_t now = mono();

	if (!g->host[0])
		return;
	pthread_mutex_lock(&h->mu);
	if (g->leader[0] && strcmp(g->leader, h->id) && !h->listened && !h->takeover) {
		/* A host of another leader, before this one decided anything:
		 * a takeover. It listens a whole lease (every host of its
		 * predecessor still alive speaks within it). */
		h->takeover = true;
		h->listen_until = h->listen_from + h->lease_ns;
		snprintf(h->predecessor, sizeof(h->predecessor), "%s", g->leader);
	}
	x = remote_of(h, g->host);
	if (!x) {
		if (!h->full_said)
			log_msg(LOG_WARN, "lockstep: host %s not counted: %d hosts already", g->host,
				LS_HOSTS_MAX);
		h->full_said = true;
	} else if (!x->lost && g->seq >= x->seq) {
		/* A new promise, or a repetition (the host saw no time naming
		 * it yet: one of the two was lost; or it says it lives): a time
		 * answers each. An older one, overtaken, or a lost host's word
		 * changes nothing. */
		if (x->heard && now - x->heard > h->hb_ns + h->hb_ns / 2)
			log_msg(LOG_DEBUG, "lockstep: host %s heard again after %.3f s", x->id,
				(double)(now - x->heard) / 1e9);
		x->heard = now;
		h->changed = true;
	}
	if (x && !x->lost && g->seq > x->seq) {
		if (!x->seq)
			renewed(h, x);
		if (!x->seq || x->members != g->members)
			h->hosts_seen++;
		x->seq = g->seq;
		x->grant = g->grant_ns;
		x->shown = g->shown_ns;
		x->lease = g->lease_ns > 0 && g->lease_ns < INT64_C(60000000000) ? g->lease_ns
										: h->lease_ns;
		x->members = g->members;
		x->deaths = g->deaths;
		snprintf(x->last_death, sizeof(x->last_death), "%s", g->last_death);
		snprintf(x->who, sizeof(x->who), "%s", g->who);
		if (g->echo_ns > 0 && now - g->echo_ns - g->held_ns >= 0)
			x->rtt = now - g->echo_ns - g->held_ns;
	}
	pthread_mutex_unlock(&h->mu);
	shmclock_lockstep_host_kick(h->host);
}

void ls_hosts_promises(struct ls_hosts *h, int64_t now, ls_hosts_event_cb cb, void *user,
		       int64_t *min, unsigned *members)
{
	int64_t m = LS_NO_GRANT;
	unsigned n = 0;

	pthread_mutex_lock(&h->mu);
	for (unsigned i = 0; i < LS_HOSTS_MAX; i++) {
		struct ls_remote *x = &h->hosts[i];

		if (x->used && x->renewed) {
			/* said once, on the clock thread */
			x->renewed = false;
			cb(LS_HOST_RENEWED, x->id, x->renewed_as, user);
		}
		if (!x->used || x->lost)
			continue;
		if (!x->joined_said) {
			x->joined_said = true;
			cb(LS_HOST_JOINED, x->id, x->who, user);
		}
		if (x->deaths > x->deaths_said) {
			x->deaths_said = x->deaths;
			cb(LS_HOST_DEATH, x->id, x->last_death, user);
		}
		if (now - x->heard > x->lease) {
			x->lost = true;
			h->changed = true;
			h->hosts_seen++;
			cb(LS_HOST_LOST, x->id, x->who, user);
			continue;
		}
		n += x->members;
		if (x->grant < m)
			m = x->grant;
	}
	pthread_mutex_unlock(&h->mu);
	*min = m;
	*members = n;
}

/* The DDS thread: a time on the leader's own clock, its own (taken too) or
 * another live leader's: a conflict, said once per leader. */
static void on_rival(void *ctx, const struct ls_time *t)
{
	struct ls_hosts *h = ctx;

	if (!strcmp(t->leader, h->id))
		return;
	pthread_mutex_lock(&h->mu);
	h->rival_mono = mono();
	if (strcmp(h->rival, t->leader)) {
		snprintf(h->rival, sizeof(h->rival), "%s", t->leader);
		log_msg(LOG_ERROR, "lockstep: another leader of this clock is live, %s (at %" PRId64
				   " ns): each host follows the first it hears; stop one of them",
			t->leader, t->time_ns);
	}
	pthread_mutex_unlock(&h->mu);
}

bool ls_hosts_listen(struct ls_hosts *h, int64_t now, int64_t *from, bool *resume)
{
	*from = INT64_MIN;
	*resume = false;
	if (h->listened)
		return false;
	pthread_mutex_lock(&h->mu);
	if (now < h->listen_until) {
		pthread_mutex_unlock(&h->mu);
		return true;
	}
	h->listened = true;
	for (unsigned i = 0; i < LS_HOSTS_MAX; i++) {
		const struct ls_remote *x = &h->hosts[i];

		if (!x->used || x->lost)
			continue;
		if (x->shown > *from)
			*from = x->shown;
		if (h->takeover && x->members)
			*resume = true;
	}
	if (h->takeover)
		log_msg(LOG_WARN, "lockstep: taking over from leader %s: its hosts' clocks reach %" PRId64
				  " ns%s", h->predecessor, *from,
			*resume ? "; the run goes on with their participants" : "");
	pthread_mutex_unlock(&h->mu);
	return false;
}

int64_t ls_hosts_listen_until(struct ls_hosts *h)
{
	int64_t t;

	pthread_mutex_lock(&h->mu);
	t = h->listen_until;
	pthread_mutex_unlock(&h->mu);
	return t;
}

/* This host's participants, "name pid grant joined;" each
 * (LockstepGrant.who), or with @host first in each (LockstepTime.roster);
 * whole entries only. What of @len it used. */
static size_t local_list(struct ls_hosts *h, const char *host, char *buf, size_t len)
{
	struct shmclock_lockstep_participant p[SHMCLOCK_LOCKSTEP_SLOTS];
	unsigned n = shmclock_lockstep_host_list(h->host, p, SHMCLOCK_LOCKSTEP_SLOTS);
	size_t used = 0;

	buf[0] = 0;
	for (unsigned i = 0; i < n && i < SHMCLOCK_LOCKSTEP_SLOTS; i++)
		if (!append(buf, len, &used, "%s%s%s %d %" PRId64 " %" PRId64 ";", host ? host : "",
			    host ? " " : "", p[i].who, (int)p[i].pid, p[i].grant_ns,
			    p[i].joined_sim_ns))
			break;
	return used;
}

/* Every participant the leader counts, "host name pid grant joined;" each
 * (LockstepTime.roster): its own under its id, then each host's; whole
 * entries only. Under mu. */
static void roster(struct ls_hosts *h, char *buf, size_t len)
{
	size_t used = local_list(h, h->id, buf, len);

	for (unsigned i = 0; i < LS_HOSTS_MAX; i++) {
		const struct ls_remote *x = &h->hosts[i];
		char who[LS_WHO_LEN], *save = NULL;

		if (!x->used || x->lost)
			continue;
		snprintf(who, sizeof(who), "%s", x->who);
		for (char *e = strtok_r(who, ";", &save); e; e = strtok_r(NULL, ";", &save))
			if (!append(buf, len, &used, "%s %s;", x->id, e))
				return;
	}
}

int64_t ls_hosts_decided(struct ls_hosts *h, int64_t sim, int64_t now, bool running)
{
	struct ls_time t;
	size_t len = 0;
	bool changed;

	pthread_mutex_lock(&h->mu);
	changed = h->changed;
	pthread_mutex_unlock(&h->mu);
	if (sim == h->sent_sim && !changed && running == h->sent_running && now < h->next_hb)
		return h->next_hb;
	memset(&t, 0, sizeof(t));
	snprintf(t.leader, sizeof(t.leader), "%s", h->id);
	t.seq = ++h->tseq;
	t.time_ns = sim;
	t.heartbeat_ns = h->hb_ns;
	t.running = running;
	pthread_mutex_lock(&h->mu);
	h->changed = false;
	for (unsigned i = 0; i < LS_HOSTS_MAX; i++)
		if (h->hosts[i].used && !h->hosts[i].lost && len < sizeof(t.hosts))
			len += (size_t)snprintf(t.hosts + len, sizeof(t.hosts) - len, "%s%s:%" PRIu64,
						len ? " " : "", h->hosts[i].id, h->hosts[i].seq);
	if (now >= h->next_roster || h->hosts_seen != h->roster_hosts) {
		roster(h, t.roster, sizeof(t.roster));
		h->roster_hosts = h->hosts_seen;
		h->next_roster = now + h->hb_ns;
	}
	pthread_mutex_unlock(&h->mu);
	/* Stamped last: the round trip a host's next promise measures starts
	 * here. */
	t.sent_ns = mono();
	if (h->api->ls_time(h->r, &t))
		log_msg(LOG_DEBUG, "lockstep: a LockstepTime write failed");
	h->sent_sim = sim;
	h->sent_running = running;
	h->next_hb = now + h->hb_ns;
	return h->next_hb;
}

size_t ls_hosts_holding(struct ls_hosts *h, int64_t sim, char *buf, size_t len)
{
	size_t n = 0;

	if (!h->leader || !len)
		return 0;
	buf[0] = 0;
	pthread_mutex_lock(&h->mu);
	for (unsigned i = 0; i < LS_HOSTS_MAX; i++) {
		const struct ls_remote *x = &h->hosts[i];
		char who[LS_WHO_LEN], *save = NULL;

		if (!x->used || x->lost || x->grant > sim)
			continue;
		snprintf(who, sizeof(who), "%s", x->who);
		for (char *p = strtok_r(who, ";", &save); p; p = strtok_r(NULL, ";", &save)) {
			char name[80];
			int pid;
			long long g;

			if (sscanf(p, "%79s %d %lld", name, &pid, &g) == 3 && g <= sim && n < len)
				n += (size_t)snprintf(buf + n, len - n, "%s'%s' (pid %d) on %s",
						      n ? ", " : "", name, pid, x->id);
		}
	}
	pthread_mutex_unlock(&h->mu);
	return n < len ? n : len - 1;
}

/* ------------------------------------------------------------ follower */

/* The promise of @id a leader's list ("id:seq ...") names: its number,
 * or 0 if @id is not in it. */
static uint64_t named_in(const char *list, const char *id)
{
	size_t n = strlen(id);

	for (const char *p = list; (p = strstr(p, id)); p += n)
		if ((p == list || p[-1] == ' ') && p[n] == ':')
			return strtoull(p + n + 1, NULL, 10);
	return 0;
}

/* The DDS thread: a leader's time. */
static void on_time(void *ctx, const struct ls_time *t)
{
	struct ls_hosts *h = ctx;
	shmclock_lockstep_host_t *host;
	int64_t now = mono();

	pthread_mutex_lock(&h->mu);
	if (strcmp(t->leader, h->leader_id)) {
		/* Another leader: taken only once the one followed is silent
		 * (or there is none yet), from its time on. */
		if (h->leader_id[0] && !h->silent) {
			pthread_mutex_unlock(&h->mu);
			return;
		}
		if (h->leader_id[0])
			log_msg(LOG_WARN, "lockstep: leader %s follows %s, at %" PRId64 " ns", t->leader,
				h->leader_id, t->time_ns);
		else
			log_msg(LOG_INFO, "lockstep: following leader %s, at %" PRId64 " ns", t->leader,
				t->time_ns);
		snprintf(h->leader_id, sizeof(h->leader_id), "%s", t->leader);
		h->roster[0] = 0;
		h->jump = h->heard != INT64_MIN && t->time_ns < h->heard;
		h->heard = t->time_ns;
		h->named = false;
	}
	if (t->time_ns > h->heard)
		h->heard = t->time_ns;
	h->leader_running = t->running;
	{
		uint64_t seq = named_in(t->hosts, h->self);
		bool past = h->promised != LS_NO_GRANT && t->time_ns > h->promised;

		if (seq) {
			h->named = true;
			if (seq > h->acked)
				h->acked = seq;
		} else if (h->named) {
			h->evicted = true;
		}
		/* A time past this host's promise, from a leader that heard
		 * its promises since they hold anything (bound_seq: the first
		 * since it had no participant): that leader does not count it
		 * (it never passes a promise it counts, and they only grow).
		 * Or from a leader other than the one that heard them: a
		 * successor that went on without hearing this host (cut off
		 * from it for its lease) never names it. Not from a time sent
		 * before the leader heard them (a late joiner here waits for
		 * the clock to reach its grant). */
		if (seq && seq >= h->bound_seq && h->promised != LS_NO_GRANT && !h->bound_by[0])
			snprintf(h->bound_by, sizeof(h->bound_by), "%s", t->leader);
		if (past && ((seq && seq >= h->bound_seq) ||
			     (h->bound_by[0] && strcmp(h->bound_by, t->leader)))) {
			if (!h->evicted) {
				h->passed_at = t->time_ns;
				h->passed_promise = h->promised;
			}
			h->evicted = true;
		}
	}
	if (t->roster[0]) {
		snprintf(h->roster, sizeof(h->roster), "%s", t->roster);
		h->roster_mono = now;
	}
	h->heard_mono = now;
	h->echo_ns = t->sent_ns;
	h->echo_mono = now;
	if (t->heartbeat_ns >= DIST_HB_MIN_NS && t->heartbeat_ns <= DIST_HB_MAX_NS)
		h->hb_leader = t->heartbeat_ns;
	host = h->host;
	pthread_mutex_unlock(&h->mu);
	if (host)
		shmclock_lockstep_host_kick(host);
	else if (h->wake)
		h->wake(h->wake_ctx);
}

bool ls_hosts_heard_leader(struct ls_hosts *h, char *leader, size_t len)
{
	bool heard;

	pthread_mutex_lock(&h->mu);
	heard = h->heard_mono != 0;
	snprintf(leader, len, "%s", h->leader_id);
	pthread_mutex_unlock(&h->mu);
	return heard;
}

void ls_hosts_attach(struct ls_hosts *h, shmclock_lockstep_host_t *host)
{
	pthread_mutex_lock(&h->mu);
	h->host = host;
	h->listen_from = mono();
	pthread_mutex_unlock(&h->mu);
}

void ls_hosts_follow(struct ls_hosts *h, int64_t now, struct ls_follow *f)
{
	pthread_mutex_lock(&h->mu);
	f->heard = h->heard;
	f->evicted = h->evicted;
	f->passed_at = h->evicted ? h->passed_at : INT64_MIN;
	f->passed_promise = h->passed_promise;
	f->jump = h->jump;
	h->jump = false;
	if (!h->heard_mono && !h->none_said && now - h->listen_from >= DIST_NONE_HINT_NS) {
		h->none_said = true;
		log_msg(LOG_WARN, "lockstep: no lockstep leader heard for %.0f s: a leader without "
				  "Lockstep is followed without Lockstep (doc/hosts.md); else check "
				  "Distribute.Clock, Ros2.Domain, CYCLONEDDS_URI and Ros2.Security "
				  "(hosts with and without it do not see each other)",
			DIST_NONE_HINT_NS / 1e9);
	}
	/* Stale until the first time heard, and after three heartbeats of
	 * silence. */
	f->silent = !h->heard_mono || now - h->heard_mono > 3 * h->hb_leader;
	if (h->evicted) {
		/* A new host from now on: a new id, no promise, not named. */
		h->evicted = false;
		h->named = false;
		h->evictions++;
		h->incarnation++;
		snprintf(h->self, sizeof(h->self), "%.86s#%u", h->id, h->incarnation);
		h->promised = LS_NO_GRANT;
		h->promised_n = 0;
		h->gseq = 0;
		h->acked = 0;
		h->bound_seq = 0;
		h->bound_by[0] = 0;
		h->passed_at = INT64_MIN;
	}
	if (f->silent != h->silent) {
		h->silent = f->silent;
		if (h->heard_mono && f->silent) {
			log_msg(LOG_WARN, "lockstep: no time from leader %s for %.3f s: this host holds "
					  "its clock (stale)", h->leader_id, (double)(now - h->heard_mono) / 1e9);
			h->silent_said = true;
		} else if (!f->silent && h->silent_said) {
			log_msg(LOG_INFO, "lockstep: leader %s speaks again", h->leader_id);
			h->silent_said = false;
		}
	}
	f->join_at = h->heard;
	if (h->promised != LS_NO_GRANT && h->promised > f->join_at)
		f->join_at = h->promised;
	pthread_mutex_unlock(&h->mu);
}


int64_t ls_hosts_promise(struct ls_hosts *h, int64_t now, int64_t shown, int64_t min, unsigned n,
			 unsigned needed, uint64_t deaths, const char *last_death)
{
	struct ls_grant *g = &h->last;
	int64_t p = n ? min : LS_NO_GRANT, next;

	pthread_mutex_lock(&h->mu);
	/* Until its participants have all joined once (Participants here),
	 * or, requiring none, until its leader's run has started (all of
	 * every host joined), the host holds the clock where it is: a
	 * participant that joins meanwhile joins where the others start,
	 * not at a promise made before it came. */
	if (needed ? n >= needed : h->leader_running)
		h->gate_met = true;
	if (!h->gate_met && shown < p)
		p = shown;
	if (p != h->promised || n != h->promised_n || deaths != h->deaths_sent || !h->gseq) {
		/* A new promise. */
		memset(g, 0, sizeof(*g));
		snprintf(g->host, sizeof(g->host), "%s", h->self);
		g->seq = ++h->gseq;
		g->grant_ns = p;
		g->shown_ns = shown;
		g->lease_ns = h->lease_ns;
		g->members = n;
		g->deaths = deaths;
		snprintf(g->last_death, sizeof(g->last_death), "%s", last_death ? last_death : "");
		if (p == LS_NO_GRANT) {
			h->bound_by[0] = 0;
		} else if (h->promised == LS_NO_GRANT || !h->bound_seq) {
			h->bound_seq = g->seq;
			h->bound_by[0] = 0;
		}
		h->promised = p;
		h->promised_n = n;
		h->deaths_sent = deaths;
		h->retry = LS_RETRY_MIN_NS;
		h->who_due = true;
	} else if (h->acked < h->gseq && now >= h->next_retry) {
		/* Not named by a time yet: it, or the time, was lost. */
		h->retry = h->retry * 2 < h->hb_ns ? h->retry * 2 : h->hb_ns;
		h->repeats++;
	} else if (now < h->next_grant) {
		next = h->acked < h->gseq && h->next_retry < h->next_grant ? h->next_retry
									     : h->next_grant;
		pthread_mutex_unlock(&h->mu);
		return next;
	}
	/* A heartbeat, a repetition or a new promise: the same number for the
	 * same promise. */
	snprintf(g->leader, sizeof(g->leader), "%s", h->leader_id);
	g->echo_ns = h->echo_ns;
	g->held_ns = h->echo_mono ? now - h->echo_mono : 0;
	h->next_grant = now + h->hb_ns;
	h->next_retry = now + h->retry;
	next = h->next_retry < h->next_grant ? h->next_retry : h->next_grant;
	pthread_mutex_unlock(&h->mu);
	if (h->who_due) {
		local_list(h, NULL, g->who, sizeof(g->who));
		h->who_due = false;
	}
	if (h->api->ls_grant(h->r, g))
		log_msg(LOG_DEBUG, "lockstep: a LockstepGrant write failed");
	return next;
}

/* ------------------------------------------------------------ both */

static int open_hosts(const struct shmclockd_config *cfg, struct ros2 *r,
		      const struct ros2_api *api, shmclock_lockstep_host_t *host,
		      void (*wake)(void *ctx), void *wake_ctx, struct ls_hosts **out, char *err,
		      size_t errlen)
{
	struct ls_hosts *h = calloc(1, sizeof(*h));
	int rc;

	*out = NULL;
	if (!h) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	h->api = api;
	h->r = r;
	h->host = host;
	h->wake = wake;
	h->wake_ctx = wake_ctx;
	h->leader = cfg->dist_publish;
	h->hb_ns = cfg->dist_hb_ns;
	h->lease_ns = LS_LEASE_NS;
	h->hb_leader = cfg->dist_hb_ns;
	h->heard = INT64_MIN;
	h->passed_at = INT64_MIN;
	h->promised = LS_NO_GRANT;
	h->sent_sim = INT64_MIN;
	pthread_mutex_init(&h->mu, NULL);
	/* Unique per run, as the hosts mode's ids. */
	hosts_id(h->id, sizeof(h->id), api->identity ? api->identity(r) : "");
	snprintf(h->self, sizeof(h->self), "%.86s#0", h->id);
	h->listen_from = mono();
	h->listen_until = h->listen_from + LS_LISTEN_NS;
	if (h->leader)
		rc = api->ls_lead(r, config_dist_clock(cfg), on_grant, on_rival, h, err, errlen);
	else
		rc = api->ls_follow(r, config_dist_clock(cfg), on_time, h, err, errlen);
	if (rc) {
		ls_hosts_close(h);
		return rc;
	}
	if (host)
		log_msg(LOG_INFO, "lockstep: between hosts, as %s %s", h->leader ? "the leader" : "host",
			h->leader ? h->id : h->self);
	*out = h;
	return 0;
}

int ls_hosts_open(const struct shmclockd_config *cfg, struct ros2 *r, const struct ros2_api *api,
		  shmclock_lockstep_host_t *host, struct ls_hosts **out, char *err, size_t errlen)
{
	return open_hosts(cfg, r, api, host, NULL, NULL, out, err, errlen);
}

int ls_hosts_probe(const struct shmclockd_config *cfg, struct ros2 *r, const struct ros2_api *api,
		   void (*wake)(void *ctx), void *ctx, struct ls_hosts **out, char *err,
		   size_t errlen)
{
	return open_hosts(cfg, r, api, NULL, wake, ctx, out, err, errlen);
}

void ls_hosts_close(struct ls_hosts *h)
{
	if (!h)
		return;
	pthread_mutex_destroy(&h->mu);
	free(h);
}

/* The participants of @list ("name pid grant joined;" each, or with
 * @with_host "host name pid grant joined;"), each as a member of @members
 * on @host (or its own), but those of @skip. */
static void remote_members(const char *list, bool with_host, const char *host, const char *skip,
			   cJSON *members, int64_t sim)
{
	char who[LS_ROSTER_LEN], *save = NULL, buf[64];

	snprintf(who, sizeof(who), "%s", list);
	for (char *p = strtok_r(who, ";", &save); p; p = strtok_r(NULL, ";", &save)) {
		char name[80], on[97];
		int pid;
		long long g, j;
		cJSON *m;

		if (with_host ? sscanf(p, "%96s %79s %d %lld %lld", on, name, &pid, &g, &j) != 5
			      : sscanf(p, "%79s %d %lld %lld", name, &pid, &g, &j) != 4)
			continue;
		if (with_host)
			host = on;
		if (skip && !strcmp(host, skip))
			continue;
		m = cJSON_CreateObject();
		cJSON_AddStringToObject(m, "name", name);
		cJSON_AddNumberToObject(m, "pid", pid);
		snprintf(buf, sizeof(buf), "%lld", g);
		cJSON_AddStringToObject(m, "grant_ns", buf);
		cJSON_AddStringToObject(m, "grant", duration_format(g, buf, sizeof(buf)));
		snprintf(buf, sizeof(buf), "%lld", j);
		cJSON_AddStringToObject(m, "joined_ns", buf);
		cJSON_AddBoolToObject(m, "holding", g <= sim);
		cJSON_AddStringToObject(m, "host", host);
		cJSON_AddItemToArray(members, m);
	}
}

void ls_hosts_status(struct ls_hosts *h, cJSON *t, cJSON *members, int64_t sim)
{
	char buf[64];
	int64_t now = mono();

	pthread_mutex_lock(&h->mu);
	if (h->leader) {
		cJSON *a = cJSON_CreateArray();

		for (unsigned i = 0; i < LS_HOSTS_MAX; i++) {
			const struct ls_remote *x = &h->hosts[i];
			cJSON *o;

			if (!x->used || x->lost)
				continue;
			o = cJSON_CreateObject();
			cJSON_AddStringToObject(o, "host", x->id);
			cJSON_AddNumberToObject(o, "participants", x->members);
			snprintf(buf, sizeof(buf), "%lld", (long long)x->grant);
			cJSON_AddStringToObject(o, "promise_ns", x->grant == LS_NO_GRANT ? "none" : buf);
			snprintf(buf, sizeof(buf), "%lld", (long long)x->shown);
			cJSON_AddStringToObject(o, "shown_ns", buf);
			cJSON_AddNumberToObject(o, "heard_s", (double)(now - x->heard) / 1e9);
			if (x->rtt >= 0)
				cJSON_AddNumberToObject(o, "rtt_us", (double)x->rtt / 1e3);
			cJSON_AddNumberToObject(o, "deaths", (double)x->deaths);
			cJSON_AddItemToArray(a, o);
			remote_members(x->who, false, x->id, NULL, members, sim);
		}
		cJSON_AddItemToObject(t, "hosts", a);
		if (h->rival[0]) {
			cJSON_AddStringToObject(t, "conflict_with", h->rival);
			cJSON_AddNumberToObject(t, "conflict_s", (double)(now - h->rival_mono) / 1e9);
		}
	} else {
		cJSON_AddStringToObject(t, "host", h->self);
		cJSON_AddStringToObject(t, "leader", h->leader_id);
		if (h->heard != INT64_MIN) {
			snprintf(buf, sizeof(buf), "%lld", (long long)h->heard);
			cJSON_AddStringToObject(t, "heard_ns", buf);
			cJSON_AddNumberToObject(t, "heard_s", (double)(now - h->heard_mono) / 1e9);
		}
		snprintf(buf, sizeof(buf), "%lld", (long long)h->promised);
		cJSON_AddStringToObject(t, "promised_ns", h->promised == LS_NO_GRANT ? "none" : buf);
		cJSON_AddBoolToObject(t, "counted", h->named);
		cJSON_AddNumberToObject(t, "host_evictions", (double)h->evictions);
		/* Who else holds the clock, as the leader said last (every
		 * heartbeat): the leader's participants and the other hosts'. */
		if (h->roster_mono)
			cJSON_AddNumberToObject(t, "roster_s", (double)(now - h->roster_mono) / 1e9);
		remote_members(h->roster, true, NULL, h->self, members, sim);
		cJSON_AddNumberToObject(t, "promise_repeats", (double)h->repeats);
	}
	pthread_mutex_unlock(&h->mu);
}
