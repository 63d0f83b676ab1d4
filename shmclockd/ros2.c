/* SPDX-License-Identifier: MIT */
/*
 * The DDS side (ros2.h): /clock in and out, and the hosts mode's topics
 * (TimeFunction, TimeAck, TimeEcho), over Cyclone DDS. Built as a module
 * the daemon loads only for a config that needs it (ros2_load.c).
 *
 * One file past 800 lines: everything that calls Cyclone's API, so that
 * nothing else links it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dds/dds.h>

#include "Clock.h"
#include "TimeFunction.h"
#include "ros2.h"
#include "ros2_qos.h"
#include "ros2_security.h"

#define ROS2_TOPIC "rt/clock"
#define ROS2_TAKE_MAX 16
#define ROS2_POLL_NS 50000000 /* how often the follower looks at staleness */
#define DIST_TOPIC "shmclock_TimeFunction"
#define ACK_TOPIC "shmclock_TimeAck"
#define ECHO_TOPIC "shmclock_TimeEcho"
#define LS_GRANT_TOPIC "shmclock_LockstepGrant"
#define LS_TIME_TOPIC "shmclock_LockstepTime"
/* The TimeFunction history: every change the leader may have announced
 * and not committed (DIST_QUEUE_MAX in hosts/dist.h) and a few more,
 * so that reliable delivery loses no announcement to a newer sample. */
#define DIST_DEPTH 72
/* The sample numbers a follower remembers, to take each once of its two
 * readers. */
#define DIST_SEEN_N 512
#define DIST_POLL_NS 10000000 /* how often the follower looks at the leader's silence */

/* A reader with a thread that waits on it (the /clock follower, the
 * TimeFunction follower): a waitset of the reader's condition and a guard
 * that stops the thread. */
struct follower {
	dds_entity_t reader, readcond, waitset, guard;
	/* a second, best-effort reader of the same topic (TimeFunction): it
	 * gets each sample as it arrives, where the reliable one waits for a
	 * lost one's repair (in order) */
	dds_entity_t reader2, readcond2;
	pthread_t thread;
	bool started;
};

/* Writers of answers and the identity each writes as (answer_from). */
#define SPEAKERS 128 /* 2 writers a follower: 64 followers before one is looked up again */
struct speakers {
	struct speaker {
		dds_instance_handle_t h;
		char who[ROS2_IDENTITY_MAX + 1];
	} e[SPEAKERS];
	unsigned next;
};

struct ros2 {
	struct ros2_host host;
	struct ros2_sec *sec;       /* Ros2.Security, or NULL */
	int domain;
	dds_entity_t participant, topic, writer;
	struct follower clk;        /* /clock */
	/* following */
	int64_t stale_ns;
	/* statistics: written by the follower thread and the clock thread,
	 * read by the control thread; under the mutex */
	pthread_mutex_t mu;
	uint64_t samples, published;
	int64_t last_mono, ewma_interval_ns;
	bool stale;
	/* between hosts */
	dds_entity_t dist_topic, dist_writer, dist_fast_writer;
	struct follower fn;         /* TimeFunction */
	dds_entity_t ack_topic, ack_writer, ack_lease_writer;
	struct follower acks;       /* TimeAck (leader) */
	struct speakers ack_speakers, grant_speakers; /* secured: who wrote them */
	/* TimeEcho: the leader's writers, one per follower in its partition
	 * (the clock thread's alone); the follower's reader of its own,
	 * waited for by the TimeFunction follower's thread */
	dds_entity_t echo_topic, echo_reader, echo_cond;
	bool echoing;
	struct echo_to {
		char follower[97];
		dds_entity_t w;
		bool gone;     /* its follower left: its instance let go */
		uint64_t used; /* echo_uses when last written: the oldest is reused */
	} echo_to[DIST_ECHO_WRITERS];
	uint64_t echo_uses;
	/* lockstep between hosts: the topics, the writer of the role, the
	 * reader's thread, and where what it takes goes */
	dds_entity_t ls_grant_topic, ls_time_topic, ls_writer;
	struct follower ls;
	void (*ls_grant_cb)(void *ctx, const struct ls_grant *g);
	void (*ls_time_cb)(void *ctx, const struct ls_time *t);
	void *ls_ctx;
	char ls_clock[65];
	char dist_clock[65];
	int64_t dist_stale_ns;
	dds_time_t dist_created;    /* the follower's reader: what is older is history */
	uint64_t dist_seen[DIST_SEEN_N]; /* the sample numbers taken lately, by number */
	/* under mu */
	uint64_t dist_sent, dist_received, dist_lost, dist_last_seq, acks_sent, acks_received;
	int64_t dist_last_mono, dist_hb_ns;
	char dist_leader[97];
	bool dist_stale;
};

static int64_t mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ROS Time <-> ns. Negative times have a negative sec and 0 <= nanosec <
 * 1e9; beyond int32 seconds saturates. */
static void time_from_ns(int64_t ns, int32_t *sec, uint32_t *nanosec)
{
	int64_t s = ns / 1000000000, n = ns % 1000000000;

	if (n < 0) {
		n += 1000000000;
		s--;
	}
	if (s > INT32_MAX) {
		s = INT32_MAX;
		n = 999999999;
	} else if (s < INT32_MIN) {
		s = INT32_MIN;
		n = 0;
	}
	*sec = (int32_t)s;
	*nanosec = (uint32_t)n;
}

static int64_t time_to_ns(int32_t sec, uint32_t nanosec)
{
	return (int64_t)sec * 1000000000 + (int64_t)nanosec;
}

static int dds_fail(char *err, size_t errlen, const char *what, dds_return_t rc)
{
	snprintf(err, errlen, "DDS: %s: %s%s", what, dds_strretcode(rc),
		 rc == DDS_RETCODE_NOT_ALLOWED_BY_SECURITY
			 ? " (the enclave's permissions do not give this daemon that topic for this "
			   "clock: a leader's enclave to lead, a follower's to follow, each for its "
			   "clocks, shmclock-pki(1))"
			 : "");
	return -EIO;
}

static void ros2_close(struct ros2 *r);

static int ros2_open(struct ros2 **out, int domain, const struct ros2_host *host, char *err,
		     size_t errlen)
{
	static const char enclave[] = "enclave=/;";
	struct ros2 *r = calloc(1, sizeof(*r));
	dds_qos_t *qos;

	*out = NULL;
	if (!r)
		return -ENOMEM;
	r->host = *host;
	r->domain = domain;
	r->last_mono = -1;
	pthread_mutex_init(&r->mu, NULL);
	/* What the ROS 2 RMW layers put in the participant's user data. */
	qos = dds_create_qos();
	dds_qset_userdata(qos, enclave, sizeof(enclave) - 1);
	if (host->security) {
		/* Cyclone's words go to the daemon's log from here on (its
		 * refusals of peers among them, counted). */
		int e = (r->sec = ros2_sec_new(host->security, host->log)) ? ros2_sec_qos(r->sec, qos, err, errlen)
									    : -ENOMEM;

		if (e) {
			dds_delete_qos(qos);
			ros2_sec_free(r->sec);
			free(r);
			return e;
		}
	}
	if (r->sec)
		ros2_sec_domain(r->sec, domain);
	r->participant = dds_create_participant((dds_domainid_t)domain, qos, NULL);
	dds_delete_qos(qos);
	if (r->participant < 0 && r->sec) {
		/* Cyclone's reason (an expired or wrongly signed certificate,
		 * a document it cannot verify). */
		snprintf(err, errlen, "Ros2.Security: %s refused by DDS Security: %s", host->security,
			 ros2_sec_said(r->sec)[0] ? ros2_sec_said(r->sec) : dds_strretcode(r->participant));
		ros2_sec_free(r->sec);
		free(r);
		return -EACCES;
	}
	if (r->sec)
		ros2_sec_opened(r->sec);
	if (r->participant < 0) {
		/* Cyclone says only "Error" (and, on stderr, "Failed to find a
		 * free participant index"): the usual cause, on a host with
		 * many daemons and unicast discovery, named with its fix. */
		int rc = dds_fail(err, errlen,
				  "cannot create a participant: with unicast discovery "
				  "(ParticipantIndex auto) the host's participant indexes may be "
				  "exhausted, one per daemon: raise MaxAutoParticipantIndex in "
				  "CYCLONEDDS_URI (doc/hosts.md, 'Many hosts'); else check "
				  "CYCLONEDDS_URI",
				  r->participant);

		free(r);
		return rc;
	}
	r->topic = dds_create_topic(r->participant, &rosgraph_msgs_msg_dds__Clock__desc, ROS2_TOPIC,
				    NULL, NULL);
	if (r->topic < 0) {
		int rc = dds_fail(err, errlen, "cannot create topic " ROS2_TOPIC, r->topic);

		ros2_close(r);
		return rc;
	}
	*out = r;
	return 0;
}

static void take_samples(struct ros2 *r)
{
	void *ptrs[ROS2_TAKE_MAX] = { 0 };
	dds_sample_info_t infos[ROS2_TAKE_MAX];
	int n = dds_take(r->clk.readcond, ptrs, infos, ROS2_TAKE_MAX, ROS2_TAKE_MAX);

	for (int i = 0; i < n; i++) {
		const rosgraph_msgs_msg_dds__Clock_ *m = ptrs[i];
		char why[256] = "";
		int64_t now;

		if (!infos[i].valid_data)
			continue;
		if (r->host.sample(r->host.ctx, time_to_ns(m->clock.sec, m->clock.nanosec), why,
				   sizeof(why)))
			r->host.log(LOG_WARN, "ros2: /clock sample refused: %s", why);
		now = mono_now();
		pthread_mutex_lock(&r->mu);
		if (r->last_mono >= 0) {
			int64_t dt = now - r->last_mono;

			/* An average over the last ~16 intervals. */
			r->ewma_interval_ns = r->ewma_interval_ns ?
						      r->ewma_interval_ns + (dt - r->ewma_interval_ns) / 16 :
						      dt;
		}
		r->last_mono = now;
		r->samples++;
		bool back = r->stale;

		r->stale = false;
		pthread_mutex_unlock(&r->mu);
		if (back) {
			r->host.log(LOG_INFO, "ros2: /clock samples arrive again");
			r->host.stale(r->host.ctx, false);
		}
	}
	if (n > 0)
		dds_return_loan(r->clk.readcond, ptrs, n);
}

/* Waits on @f's waitset up to @timeout: false once its guard is set (the
 * thread is to stop), true otherwise (samples may be there, or none). */
static bool follower_wait(struct follower *f, dds_duration_t timeout)
{
	dds_attach_t hits[4];
	int n = dds_waitset_wait(f->waitset, hits, 4, timeout);

	for (int i = 0; i < n; i++)
		if (hits[i] == (dds_attach_t)f->guard)
			return false;
	return true;
}

static void *follow_main(void *arg)
{
	struct ros2 *r = arg;

	while (follower_wait(&r->clk, ROS2_POLL_NS)) {
		take_samples(r);
		bool lost = false;

		pthread_mutex_lock(&r->mu);
		if (!r->stale && r->stale_ns > 0 && r->last_mono >= 0 &&
		    mono_now() - r->last_mono > r->stale_ns) {
			r->stale = true;
			lost = true;
		}
		pthread_mutex_unlock(&r->mu);
		if (lost) {
			r->host.log(LOG_WARN, "ros2: no /clock sample for %.3f s: the clock is stale",
				    (double)r->stale_ns / 1e9);
			r->host.stale(r->host.ctx, true);
		}
	}
	return NULL;
}

/* Creates @f's reader of @topic with @qos (and a second one with @qos2,
 * unless NULL) and starts @main on it. */
static int follower_start(struct ros2 *r, struct follower *f, dds_entity_t topic, dds_qos_t *qos,
			  dds_qos_t *qos2, void *(*main)(void *), const char *what, char *err,
			  size_t errlen)
{
	char why[96];
	int rc;

	f->reader = dds_create_reader(r->participant, topic, qos, NULL);
	if (f->reader < 0) {
		snprintf(why, sizeof(why), "cannot create the %s reader", what);
		return dds_fail(err, errlen, why, f->reader);
	}
	if (qos2) {
		f->reader2 = dds_create_reader(r->participant, topic, qos2, NULL);
		f->readcond2 = f->reader2 < 0 ? f->reader2
					      : dds_create_readcondition(f->reader2, DDS_ANY_STATE);
	}
	f->readcond = dds_create_readcondition(f->reader, DDS_ANY_STATE);
	f->waitset = dds_create_waitset(r->participant);
	f->guard = dds_create_guardcondition(r->participant);
	if (f->readcond < 0 || f->waitset < 0 || f->guard < 0 ||
	    dds_waitset_attach(f->waitset, f->readcond, (dds_attach_t)f->readcond) < 0 ||
	    dds_waitset_attach(f->waitset, f->guard, (dds_attach_t)f->guard) < 0 ||
	    (qos2 && (f->readcond2 < 0 ||
		      dds_waitset_attach(f->waitset, f->readcond2, (dds_attach_t)f->readcond2) < 0))) {
		snprintf(why, sizeof(why), "cannot wait for %s", what);
		return dds_fail(err, errlen, why, DDS_RETCODE_ERROR);
	}
	rc = pthread_create(&f->thread, NULL, main, r);
	if (rc) {
		snprintf(err, errlen, "%s: thread: %s", what, strerror(rc));
		return -rc;
	}
	f->started = true;
	return 0;
}

/* Stops @f's thread (its reader goes with the participant). */
static void follower_stop(struct follower *f)
{
	if (!f->started)
		return;
	dds_set_guardcondition(f->guard, true);
	pthread_join(f->thread, NULL);
	f->started = false;
}

static int ros2_follow(struct ros2 *r, int64_t stale_ns, char *err, size_t errlen)
{
	dds_qos_t *qos = ros2_clock_qos(DDS_RELIABILITY_BEST_EFFORT);
	int rc;

	r->stale_ns = stale_ns;
	rc = follower_start(r, &r->clk, r->topic, qos, NULL, follow_main, "/clock", err, errlen);
	dds_delete_qos(qos);
	return rc;
}

static int ros2_publisher(struct ros2 *r, char *err, size_t errlen)
{
	dds_qos_t *qos = ros2_clock_qos(DDS_RELIABILITY_RELIABLE);

	r->writer = dds_create_writer(r->participant, r->topic, qos, NULL);
	dds_delete_qos(qos);
	if (r->writer < 0)
		return dds_fail(err, errlen, "cannot create the /clock writer", r->writer);
	return 0;
}

static int ros2_publish(struct ros2 *r, int64_t sim_ns)
{
	rosgraph_msgs_msg_dds__Clock_ m;
	dds_return_t rc;

	time_from_ns(sim_ns, &m.clock.sec, &m.clock.nanosec);
	rc = dds_write(r->writer, &m);
	if (rc < 0)
		return -EIO;
	pthread_mutex_lock(&r->mu);
	r->published++;
	pthread_mutex_unlock(&r->mu);
	return 0;
}

static void ros2_get_stats(struct ros2 *r, struct ros2_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->domain = r->domain;
	st->following = r->clk.reader > 0;
	st->publishing = r->writer > 0;
	pthread_mutex_lock(&r->mu);
	st->samples = r->samples;
	st->published = r->published;
	st->rate_hz = r->ewma_interval_ns > 0 ? 1e9 / (double)r->ewma_interval_ns : 0;
	st->last_age_ns = r->last_mono >= 0 ? mono_now() - r->last_mono : -1;
	st->stale = r->stale || (r->clk.reader > 0 && r->last_mono < 0);
	pthread_mutex_unlock(&r->mu);
	if (r->sec)
		ros2_sec_stats(r->sec, st);
}

/* ------------------------------------------------ between hosts */

/* TimeFunction's QoS: reliable, transient-local (a late joiner gets the
 * current function from the leader's history at once), keep last @depth
 * per clock. TimeAck's: reliable, volatile (a dead follower's last word is
 * no member), keep last @depth per follower. */
/* The hosts channel's QoS. Secured (Ros2.Security), every writer and
 * reader of clock @clock is in its partition "shmclock.CLOCK", so that a
 * permissions document can name the clocks an identity may lead or follow
 * (shmclock-pki --clock); unsecured, in the default one, as always. */
/* A partition with a clock's name (dist_clock, ls_clock: 64 at most). */
#define ROS2_SEC_PARTITION_LEN (sizeof("shmclock..from.") + 64 + ROS2_IDENTITY_MAX + ROS2_ECHO_PARTITION_LEN)

static dds_qos_t *dist_qos(const struct ros2 *r, const char *clock, int depth, bool history)
{
	dds_qos_t *q = dds_create_qos();

	dds_qset_reliability(q, DDS_RELIABILITY_RELIABLE, DDS_MSECS(100));
	dds_qset_durability(q, history ? DDS_DURABILITY_TRANSIENT_LOCAL : DDS_DURABILITY_VOLATILE);
	dds_qset_history(q, DDS_HISTORY_KEEP_LAST, depth);
	if (r->sec) {
		char part[ROS2_SEC_PARTITION_LEN];

		snprintf(part, sizeof(part), "shmclock.%s", clock);
		dds_qset_partition1(q, part);
	}
	return q;
}

/* The answers, TimeAck and LockstepGrant: secured, a host writes them in
 * the partition "shmclock.CLOCK.from.IDENTITY", which only its identity's
 * permissions allow (shmclock-pki), and the leader reads them from
 * "shmclock.CLOCK.from.*" (@reader): the partition a sample came in names
 * the identity that wrote it, and the host's id it speaks for must begin
 * with that name (answer_from). Unsecured, dist_qos's. */
static void answer_partition(char *buf, size_t len, const char *clock, const char *who)
{
	snprintf(buf, len, "shmclock.%s.from.%s", clock, who);
}

static dds_qos_t *answer_qos(const struct ros2 *r, const char *clock, int depth, bool reader)
{
	dds_qos_t *q = dist_qos(r, clock, depth, false);

	if (r->sec) {
		char part[ROS2_SEC_PARTITION_LEN];

		answer_partition(part, sizeof(part), clock, reader ? "*" : ros2_sec_identity(r->sec));
		dds_qset_partition1(q, part);
	}
	return q;
}

/* The identity that wrote @info's sample, from its writer's partition
 * ("shmclock.CLOCK.from.NAME"): Cyclone's matched-writer data, kept per
 * writer in @c (one per reader; each reader is taken on one thread).
 * "" when the writer is no longer matched and was never seen. */
static const char *speaker_of(struct speakers *c, dds_entity_t reader,
			      const dds_sample_info_t *info, const char *clock)
{
	struct speaker *k;
	dds_builtintopic_endpoint_t *ep;
	uint32_t n = 0;
	char **ps = NULL, prefix[ROS2_SEC_PARTITION_LEN];

	for (unsigned i = 0; i < SPEAKERS; i++)
		if (c->e[i].h == info->publication_handle)
			return c->e[i].who;
	ep = dds_get_matched_publication_data(reader, info->publication_handle);
	if (!ep)
		return "";
	k = &c->e[c->next++ % SPEAKERS];
	k->h = info->publication_handle;
	k->who[0] = 0;
	answer_partition(prefix, sizeof(prefix), clock, "");
	if (ep->qos && dds_qget_partition(ep->qos, &n, &ps))
		for (uint32_t i = 0; i < n; i++) {
			/* Only a name an identity can have: an identity allowed
			 * "shmclock.*.from.EVIL" may write in
			 * "shmclock.C.from.<V>X.from.EVIL", which cut to the
			 * longest name, or read up to a ".from.", would be V's. */
			if (!k->who[0] && !strncmp(ps[i], prefix, strlen(prefix)) &&
			    ros2_sec_identity_ok(ps[i] + strlen(prefix), NULL, 0))
				snprintf(k->who, sizeof(k->who), "%s", ps[i] + strlen(prefix));
			dds_free(ps[i]);
		}
	dds_free(ps);
	dds_builtintopic_free_endpoint(ep);
	return k->who;
}

/* Secured: does the answer for host @id come from that host's identity
 * (@id is "IDENTITY@...", hosts/id.c)? Else it is refused, counted and
 * its writer named once (ros2_sec_refuse): a permitted follower cannot
 * speak for another one. Unsecured: always. */
static bool answer_from(struct ros2 *r, struct speakers *c, dds_entity_t reader,
			const dds_sample_info_t *info, const char *clock, const char *id)
{
	const char *who;
	size_t len;
	char peer[ROS2_IDENTITY_MAX + 8], why[160];

	if (!r->sec)
		return true;
	who = speaker_of(c, reader, info, clock);
	len = strlen(who);
	if (len && !strncmp(id, who, len) && id[len] == '@')
		return true;
	snprintf(peer, sizeof(peer), "/CN=%s", len ? who : "?");
	snprintf(why, sizeof(why), "spoke for host '%.80s' (a host's id begins with its identity)",
		 id);
	ros2_sec_refuse(r->sec, peer, why);
	return false;
}

/* A follower's echo partition (ros2_echo_partition); secured, with the
 * clock's name in it, so that permissions can name it too
 * ("shmclock.echo.CLOCK.*"). */
static void echo_partition(const struct ros2 *r, char *buf, size_t len, const char *clock,
			   const char *follower)
{
	char h[ROS2_ECHO_PARTITION_LEN];

	ros2_echo_partition(h, sizeof(h), clock, follower);
	if (r->sec)
		snprintf(buf, len, "shmclock.echo.%s.%s", clock, h + strlen("shmclock.echo."));
	else
		snprintf(buf, len, "%s", h);
}

static int ack_topic(struct ros2 *r, char *err, size_t errlen)
{
	if (r->ack_topic > 0)
		return 0;
	r->ack_topic = dds_create_topic(r->participant, &shmclock_TimeAck_desc, ACK_TOPIC, NULL, NULL);
	if (r->ack_topic < 0)
		return dds_fail(err, errlen, "cannot create topic " ACK_TOPIC, r->ack_topic);
	if (r->echo_topic > 0)
		return 0;
	r->echo_topic = dds_create_topic(r->participant, &shmclock_TimeEcho_desc, ECHO_TOPIC, NULL,
					 NULL);
	if (r->echo_topic < 0)
		return dds_fail(err, errlen, "cannot create topic " ECHO_TOPIC, r->echo_topic);
	return 0;
}

/* A TimeAck's or TimeEcho's names and term, into @a (the rest 0). */
static void ack_names(struct dist_ack *a, const char *clock, const char *follower,
		      const char *leader, uint64_t term)
{
	memset(a, 0, sizeof(*a));
	snprintf(a->clock, sizeof(a->clock), "%s", clock);
	snprintf(a->follower, sizeof(a->follower), "%s", follower);
	snprintf(a->leader, sizeof(a->leader), "%s", leader);
	a->term = term;
}

/* The four names and the term of a TimeAck or a TimeEcho to be written
 * (both types spell them alike) from @a. */
#define WIRE_NAMES(m, a)                                                       \
	do {                                                                   \
		snprintf((m)->clock, sizeof((m)->clock), "%s", (a)->clock);       \
		snprintf((m)->follower, sizeof((m)->follower), "%s", (a)->follower); \
		snprintf((m)->leader, sizeof((m)->leader), "%s", (a)->leader);    \
		(m)->term = (a)->term;                                         \
	} while (0)

/* A TimeAck (@echo false) or a TimeEcho taken, as the host's dist_ack;
 * false when it is not this clock's. */
static bool ack_from_wire(const struct ros2 *r, const void *sample, const dds_sample_info_t *info,
			  bool echo, struct dist_ack *a)
{
	if (echo) {
		const shmclock_TimeEcho *m = sample;

		if (strcmp(m->clock, r->dist_clock))
			return false;
		ack_names(a, m->clock, m->follower, m->leader, m->term);
		a->written_ns = m->written_ns;
		a->acked = m->change;
		a->aside_ns = m->aside_ns;
		a->echo = true;
	} else {
		const shmclock_TimeAck *m = sample;

		if (strcmp(m->clock, r->dist_clock))
			return false;
		ack_names(a, m->clock, m->follower, m->leader, m->term);
		a->plan = m->plan;
		a->acked = m->acked;
		a->committed = m->committed;
		a->lease_ns = m->lease_ns;
		a->late = m->late;
		a->refused = m->refused;
		a->holds = m->holds;
		a->written_ns = info->source_timestamp;
	}
	return true;
}

/* Everything @cond holds, each to host->ack: the leader's
 * acknowledgements (@echo false; @reliable: from the reader that only a
 * reliable writer matches, leases and leaves; the other reader takes
 * those too, and the acknowledgements), or the follower's echoes. */
static void ack_take_from(struct ros2 *r, dds_entity_t reader, dds_entity_t cond, bool reliable,
			  bool echo)
{
	void *ptrs[ROS2_TAKE_MAX] = { 0 };
	dds_sample_info_t infos[ROS2_TAKE_MAX];
	int n = dds_take(cond, ptrs, infos, ROS2_TAKE_MAX, ROS2_TAKE_MAX);

	for (int i = 0; i < n; i++) {
		struct dist_ack a;

		if (!infos[i].valid_data || !ack_from_wire(r, ptrs[i], &infos[i], echo, &a))
			continue;
		if (!echo && !answer_from(r, &r->ack_speakers, reader, &infos[i],
					  r->dist_clock, a.follower))
			continue;
		a.reliable = reliable;
		if (!echo) {
			pthread_mutex_lock(&r->mu);
			r->acks_received++;
			pthread_mutex_unlock(&r->mu);
		}
		r->host.ack(r->host.ctx, &a);
	}
	if (n > 0)
		dds_return_loan(cond, ptrs, n);
}

static void ack_take(struct ros2 *r)
{
	ack_take_from(r, r->acks.reader2, r->acks.readcond2, false, false);
	ack_take_from(r, r->acks.reader, r->acks.readcond, true, false);
}

static void *ack_main(void *arg)
{
	struct ros2 *r = arg;

	while (follower_wait(&r->acks, DDS_INFINITY))
		ack_take(r);
	return NULL;
}

static int dist_ack(struct ros2 *r, const struct dist_ack *a, bool reliable)
{
	shmclock_TimeAck m;
	dds_entity_t w = reliable ? r->ack_lease_writer : r->ack_writer;

	if (w <= 0)
		return -ENOTCONN;
	memset(&m, 0, sizeof(m));
	WIRE_NAMES(&m, a);
	m.plan = a->plan;
	m.acked = a->acked;
	m.committed = a->committed;
	m.lease_ns = a->lease_ns;
	m.late = a->late;
	m.refused = a->refused;
	m.holds = a->holds;
	/* The follower's own stamp, never back: a leader's echo names the
	 * lease by it. */
	if ((a->written_ns ? dds_write_ts(w, &m, a->written_ns) : dds_write(w, &m)) < 0)
		return -EIO;
	pthread_mutex_lock(&r->mu);
	r->acks_sent++;
	pthread_mutex_unlock(&r->mu);
	return 0;
}

/* The writer of the echoes to @follower: its own, made at its first echo
 * in its partition (ros2_echo_partition), reliable and transient-local
 * with the last echo, so that the follower's reader, matched a few
 * milliseconds later (discovery of a new writer), still gets it. Made
 * and deleted on the clock thread: a follower's first echo costs it the
 * creation; a writer is deleted only to make room, the one gone longest
 * (after DIST_ECHO_WRITERS followers came and went), and Cyclone's delete
 * waits for its unacknowledged samples (its unregistration) up to its
 * linger time, 1 s, only if that follower's reader is still matched and
 * silent: rare, and said here. 0: none. */
static dds_entity_t echo_writer_of(struct ros2 *r, const char *follower)
{
	struct echo_to *e = NULL;
	char part[ROS2_SEC_PARTITION_LEN];
	dds_qos_t *qos;

	for (unsigned i = 0; i < DIST_ECHO_WRITERS; i++)
		if (r->echo_to[i].w > 0 && !strcmp(r->echo_to[i].follower, follower)) {
			r->echo_to[i].gone = false;
			r->echo_to[i].used = ++r->echo_uses;
			return r->echo_to[i].w;
		}
	/* An empty entry, else the one gone longest, else the oldest. */
	for (unsigned i = 0; i < DIST_ECHO_WRITERS; i++) {
		struct echo_to *x = &r->echo_to[i];

		if (x->w <= 0) {
			e = x;
			break;
		}
		if (!e || (x->gone && !e->gone) || (x->gone == e->gone && x->used < e->used))
			e = x;
	}
	if (e->w > 0)
		dds_delete(e->w);
	memset(e, 0, sizeof(*e));
	echo_partition(r, part, sizeof(part), r->dist_clock, follower);
	qos = dist_qos(r, r->dist_clock, 1, true);
	dds_qset_partition1(qos, part);
	e->w = dds_create_writer(r->participant, r->echo_topic, qos, NULL);
	dds_delete_qos(qos);
	if (e->w < 0) {
		e->w = 0;
		return 0;
	}
	snprintf(e->follower, sizeof(e->follower), "%s", follower);
	e->used = ++r->echo_uses;
	return e->w;
}

static int dist_echo(struct ros2 *r, const struct dist_ack *a)
{
	shmclock_TimeEcho m;
	dds_entity_t w;

	if (!r->echoing || !a->follower[0])
		return -ENOTCONN;
	if (!(w = echo_writer_of(r, a->follower)))
		return -EIO;
	memset(&m, 0, sizeof(m));
	WIRE_NAMES(&m, a);
	m.written_ns = a->written_ns;
	m.change = a->acked;
	m.aside_ns = a->aside_ns;
	return dds_write(w, &m) < 0 ? -EIO : 0;
}

/* A follower gone (left, or its slot taken by another): its echo
 * instance let go, and its writer kept for reuse (a follower's writer
 * per run would pile up). */
static void dist_echo_forget(struct ros2 *r, const char *follower)
{
	shmclock_TimeEcho m;

	if (!r->echoing || !follower[0])
		return;
	memset(&m, 0, sizeof(m));
	snprintf(m.clock, sizeof(m.clock), "%s", r->dist_clock);
	snprintf(m.follower, sizeof(m.follower), "%s", follower);
	for (unsigned i = 0; i < DIST_ECHO_WRITERS; i++)
		if (r->echo_to[i].w > 0 && !r->echo_to[i].gone &&
		    !strcmp(r->echo_to[i].follower, follower)) {
			dds_unregister_instance(r->echo_to[i].w, &m);
			r->echo_to[i].gone = true;
		}
}

static int dist_topic(struct ros2 *r, char *err, size_t errlen)
{
	if (r->dist_topic > 0)
		return 0;
	r->dist_topic = dds_create_topic(r->participant, &shmclock_TimeFunction_desc, DIST_TOPIC,
					 NULL, NULL);
	if (r->dist_topic < 0)
		return dds_fail(err, errlen, "cannot create topic " DIST_TOPIC, r->dist_topic);
	return 0;
}

static int dist_publisher(struct ros2 *r, const char *clock, char *err, size_t errlen)
{
	dds_qos_t *qos, *qos2;
	int rc = dist_topic(r, err, errlen);

	if (!rc)
		rc = ack_topic(r, err, errlen);
	if (rc)
		return rc;
	snprintf(r->dist_clock, sizeof(r->dist_clock), "%s", clock);
	/* Two writers: a reliable one (the function in force, heartbeats;
	 * a late joiner gets its last sample), and a best-effort one for the
	 * announcements and their repetitions, which reliable delivery would
	 * hold behind a lost sample until DDS repairs it (in order; Cyclone
	 * does so for a best-effort reader of a reliable writer too). */
	qos = dist_qos(r, r->dist_clock, 1, true);
	r->dist_writer = dds_create_writer(r->participant, r->dist_topic, qos, NULL);
	dds_delete_qos(qos);
	if (r->dist_writer < 0)
		return dds_fail(err, errlen, "cannot create the TimeFunction writer", r->dist_writer);
	qos = dist_qos(r, r->dist_clock, 1, false);
	dds_qset_reliability(qos, DDS_RELIABILITY_BEST_EFFORT, 0);
	r->dist_fast_writer = dds_create_writer(r->participant, r->dist_topic, qos, NULL);
	dds_delete_qos(qos);
	if (r->dist_fast_writer < 0)
		return dds_fail(err, errlen, "cannot create the TimeFunction writer",
				r->dist_fast_writer);
	/* Two readers: a reliable one for the leases (a best-effort writer
	 * does not match it) and a best-effort one for the acknowledgements
	 * (it takes the leases too: duplicates are harmless). */
	qos = answer_qos(r, r->dist_clock, 16, true);
	qos2 = answer_qos(r, r->dist_clock, 16, true);
	dds_qset_reliability(qos2, DDS_RELIABILITY_BEST_EFFORT, 0);
	rc = follower_start(r, &r->acks, r->ack_topic, qos, qos2, ack_main, "TimeAck", err, errlen);
	dds_delete_qos(qos);
	dds_delete_qos(qos2);
	if (rc)
		return rc;
	/* The echoes: a writer per follower, at its first (echo_writer_of). */
	r->echoing = true;
	return 0;
}

static int dist_publish(struct ros2 *r, const struct dist_fn *f, unsigned how)
{
	shmclock_TimeFunction m;

	memset(&m, 0, sizeof(m));
	snprintf(m.clock, sizeof(m.clock), "%s", f->clock);
	snprintf(m.leader, sizeof(m.leader), "%s", f->leader);
	m.term = f->term;
	m.change = f->change;
	m.seq = f->seq;
	m.effective_ns = f->effective_ns;
	m.sim_base_ns = f->sim_base_ns;
	m.mult = f->mult;
	m.flags = f->flags;
	m.jump_epoch = f->jump_epoch;
	m.unix_at_zero_ns = f->unix_at_zero_ns;
	m.source = f->source;
	m.timebase = f->timebase;
	m.sent_ns = f->sent_ns;
	m.heartbeat_ns = f->heartbeat_ns;
	m.committed = f->committed;
	m.plan = f->plan;
	m.lead_ns = f->lead_ns;
	if (((how & DIST_PUB_FAST) && dds_write(r->dist_fast_writer, &m) < 0) ||
	    ((how & DIST_PUB_RELIABLE) && dds_write(r->dist_writer, &m) < 0))
		return -EIO;
	pthread_mutex_lock(&r->mu);
	r->dist_sent++;
	pthread_mutex_unlock(&r->mu);
	return 0;
}

/* Has this sample (by its number) come already, on the other reader?
 * Counts the gaps in the numbers as lost until a late one fills them.
 * Under mu. */
static bool dist_seen(struct ros2 *r, const char *leader, uint64_t seq)
{
	uint64_t *slot = &r->dist_seen[seq % DIST_SEEN_N];

	if (strcmp(leader, r->dist_leader)) {
		snprintf(r->dist_leader, sizeof(r->dist_leader), "%s", leader);
		memset(r->dist_seen, 0, sizeof(r->dist_seen));
		r->dist_last_seq = seq - 1;
	}
	if (*slot == seq)
		return true;
	if (seq + DIST_SEEN_N <= r->dist_last_seq)
		return true; /* too old to tell: as good as seen */
	*slot = seq;
	if (seq > r->dist_last_seq) {
		r->dist_lost += seq - r->dist_last_seq - 1;
		r->dist_last_seq = seq;
	} else if (r->dist_lost) {
		r->dist_lost--; /* a gap filled (the reliable reader's repair) */
	}
	return false;
}

static void dist_take_from(struct ros2 *r, dds_entity_t cond)
{
	void *ptrs[DIST_DEPTH + 8] = { 0 };
	dds_sample_info_t infos[DIST_DEPTH + 8];
	int n = dds_take(cond, ptrs, infos, DIST_DEPTH + 8, DIST_DEPTH + 8);

	/* The leader's history, written before this reader existed: only its
	 * last sample (a whole function, with the commits so far) matters; the
	 * ones before it would replay old changes and jumps. */
	for (int i = 0; i < n; i++) {
		const shmclock_TimeFunction *m = ptrs[i];
		struct dist_fn f;
		bool later = false;

		if (!infos[i].valid_data || strcmp(m->clock, r->dist_clock))
			continue;
		/* Of each leader's history, its last sample (two leaders' are
		 * two: the one a later sample of the other replaced was lost,
		 * and with it a conflict). */
		for (int j = i + 1; j < n && infos[i].source_timestamp < r->dist_created; j++)
			later |= infos[j].valid_data &&
				 infos[j].source_timestamp < r->dist_created &&
				 !strcmp(((const shmclock_TimeFunction *)ptrs[j])->leader, m->leader);
		if (later)
			continue;
		memset(&f, 0, sizeof(f));
		snprintf(f.clock, sizeof(f.clock), "%s", m->clock);
		snprintf(f.leader, sizeof(f.leader), "%s", m->leader);
		f.term = m->term;
		f.change = m->change;
		f.seq = m->seq;
		f.effective_ns = m->effective_ns;
		f.sim_base_ns = m->sim_base_ns;
		f.mult = m->mult;
		f.flags = m->flags;
		f.jump_epoch = m->jump_epoch;
		f.unix_at_zero_ns = m->unix_at_zero_ns;
		f.source = m->source;
		f.timebase = m->timebase;
		f.sent_ns = m->sent_ns;
		f.heartbeat_ns = m->heartbeat_ns;
		f.committed = m->committed;
		f.plan = m->plan;
		f.lead_ns = m->lead_ns;
		/* A deposed leader's heartbeat: for the conflict only, neither a
		 * word from the leader nor a sample to count (its numbers are
		 * its own). */
		if (f.flags & DIST_F_DEPOSED) {
			r->host.function(r->host.ctx, &f);
			continue;
		}
		pthread_mutex_lock(&r->mu);
		/* Each sample comes on both readers: the first one counts. */
		if (dist_seen(r, f.leader, f.seq)) {
			pthread_mutex_unlock(&r->mu);
			continue;
		}
		r->dist_received++;
		r->dist_last_mono = mono_now();
		/* An absurd heartbeat (the daemon refuses the sample) must not
		 * change when the leader counts as silent. */
		if (f.heartbeat_ns >= DIST_HB_MIN_NS && f.heartbeat_ns <= DIST_HB_MAX_NS)
			r->dist_hb_ns = f.heartbeat_ns;
		r->dist_stale = false;
		pthread_mutex_unlock(&r->mu);
		r->host.function(r->host.ctx, &f);
	}
	if (n > 0)
		dds_return_loan(cond, ptrs, n);
}

/* Both readers: the best-effort one first (what it has is newest). */
static void dist_take(struct ros2 *r)
{
	if (r->fn.readcond2 > 0)
		dist_take_from(r, r->fn.readcond2);
	dist_take_from(r, r->fn.readcond);
}

static void *dist_main(void *arg)
{
	struct ros2 *r = arg;

	while (follower_wait(&r->fn, DIST_POLL_NS)) {
		bool lost = false;
		int64_t limit;

		dist_take(r);
		if (r->echo_cond > 0)
			ack_take_from(r, r->echo_reader, r->echo_cond, false, true);
		pthread_mutex_lock(&r->mu);
		limit = dist_silence_ns(r->dist_stale_ns, r->dist_hb_ns);
		if (!r->dist_stale && r->dist_last_mono >= 0 && limit > 0 &&
		    mono_now() - r->dist_last_mono > limit) {
			r->dist_stale = true;
			lost = true;
		}
		pthread_mutex_unlock(&r->mu);
		/* Said by the clock mode, with the reason (dist_lost_leader). */
		if (lost)
			r->host.stale(r->host.ctx, true);
	}
	return NULL;
}

static int dist_follow(struct ros2 *r, const char *clock, const char *self, int64_t stale_ns,
		       char *err, size_t errlen)
{
	char part[ROS2_SEC_PARTITION_LEN];
	dds_qos_t *qos, *qos2;
	int rc = dist_topic(r, err, errlen);

	if (rc)
		return rc;
	snprintf(r->dist_clock, sizeof(r->dist_clock), "%s", clock);
	r->dist_stale_ns = stale_ns;
	r->dist_created = dds_time();
	r->dist_last_mono = -1;
	if ((rc = ack_topic(r, err, errlen)))
		return rc;
	/* Best effort: a follower acknowledges again at each repetition of
	 * an announcement, no retransmission in order behind a lost one. */
	qos = answer_qos(r, r->dist_clock, 1, false);
	dds_qset_reliability(qos, DDS_RELIABILITY_BEST_EFFORT, 0);
	r->ack_writer = dds_create_writer(r->participant, r->ack_topic, qos, NULL);
	dds_delete_qos(qos);
	if (r->ack_writer < 0)
		return dds_fail(err, errlen, "cannot create the TimeAck writer", r->ack_writer);
	qos = answer_qos(r, r->dist_clock, 1, false);
	r->ack_lease_writer = dds_create_writer(r->participant, r->ack_topic, qos, NULL);
	dds_delete_qos(qos);
	if (r->ack_lease_writer < 0)
		return dds_fail(err, errlen, "cannot create the TimeAck writer", r->ack_lease_writer);
	/* The echoes first: the thread waits for them too. Its own only
	 * (its partition), the last one written before the leader's writer
	 * matched it too (transient-local). */
	qos = dist_qos(r, r->dist_clock, 4, true);
	echo_partition(r, part, sizeof(part), clock, self);
	dds_qset_partition1(qos, part);
	r->echo_reader = dds_create_reader(r->participant, r->echo_topic, qos, NULL);
	dds_delete_qos(qos);
	if (r->echo_reader < 0)
		return dds_fail(err, errlen, "cannot create the TimeEcho reader", r->echo_reader);
	r->echo_cond = dds_create_readcondition(r->echo_reader, DDS_ANY_STATE);
	if (r->echo_cond < 0)
		return dds_fail(err, errlen, "cannot wait for TimeEcho", r->echo_cond);
	qos = dist_qos(r, r->dist_clock, 4, true);
	qos2 = dist_qos(r, r->dist_clock, DIST_DEPTH, false);
	dds_qset_reliability(qos2, DDS_RELIABILITY_BEST_EFFORT, 0);
	rc = follower_start(r, &r->fn, r->dist_topic, qos, qos2, dist_main, "TimeFunction", err,
			    errlen);
	dds_delete_qos(qos);
	dds_delete_qos(qos2);
	if (!rc && dds_waitset_attach(r->fn.waitset, r->echo_cond, (dds_attach_t)r->echo_cond) < 0)
		return dds_fail(err, errlen, "cannot wait for TimeEcho", DDS_RETCODE_ERROR);
	return rc;
}

static void dist_get_stats(struct ros2 *r, struct dist_stats *st)
{
	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&r->mu);
	st->sent = r->dist_sent;
	st->received = r->dist_received;
	st->acks_sent = r->acks_sent;
	st->acks_received = r->acks_received;
	st->lost = r->dist_lost;
	st->last_age_ns = r->dist_last_mono >= 0 ? mono_now() - r->dist_last_mono : -1;
	st->stale = r->dist_stale;
	pthread_mutex_unlock(&r->mu);
}

/* ------------------------------------------------ lockstep between hosts */

static int ls_topics(struct ros2 *r, const char *clock, char *err, size_t errlen)
{
	snprintf(r->ls_clock, sizeof(r->ls_clock), "%s", clock);
	r->ls_grant_topic = dds_create_topic(r->participant, &shmclock_LockstepGrant_desc,
					     LS_GRANT_TOPIC, NULL, NULL);
	if (r->ls_grant_topic < 0)
		return dds_fail(err, errlen, "cannot create topic " LS_GRANT_TOPIC, r->ls_grant_topic);
	r->ls_time_topic = dds_create_topic(r->participant, &shmclock_LockstepTime_desc,
					    LS_TIME_TOPIC, NULL, NULL);
	if (r->ls_time_topic < 0)
		return dds_fail(err, errlen, "cannot create topic " LS_TIME_TOPIC, r->ls_time_topic);
	return 0;
}

/* Grants (@grants) or times: everything @reader holds, each of this clock
 * to its callback. */
static void ls_take(struct ros2 *r, dds_entity_t reader, bool grants)
{
	void *ptrs[ROS2_TAKE_MAX] = { 0 };
	dds_sample_info_t infos[ROS2_TAKE_MAX];
	int n = dds_take(reader, ptrs, infos, ROS2_TAKE_MAX, ROS2_TAKE_MAX);

	for (int i = 0; i < n; i++) {
		if (!infos[i].valid_data)
			continue;
		if (grants) {
			const shmclock_LockstepGrant *m = ptrs[i];
			struct ls_grant g;

			if (strcmp(m->clock, r->ls_clock) ||
			    !answer_from(r, &r->grant_speakers, reader, &infos[i], r->ls_clock, m->host))
				continue;
			memset(&g, 0, sizeof(g));
			snprintf(g.clock, sizeof(g.clock), "%s", m->clock);
			snprintf(g.host, sizeof(g.host), "%s", m->host);
			snprintf(g.leader, sizeof(g.leader), "%s", m->leader);
			g.seq = m->seq;
			g.grant_ns = m->grant_ns;
			g.shown_ns = m->shown_ns;
			g.lease_ns = m->lease_ns;
			g.members = m->members;
			g.deaths = m->deaths;
			snprintf(g.last_death, sizeof(g.last_death), "%s", m->last_death);
			snprintf(g.who, sizeof(g.who), "%s", m->who);
			g.echo_ns = m->echo_ns;
			g.held_ns = m->held_ns;
			r->ls_grant_cb(r->ls_ctx, &g);
		} else {
			const shmclock_LockstepTime *m = ptrs[i];
			struct ls_time t;

			if (strcmp(m->clock, r->ls_clock))
				continue;
			memset(&t, 0, sizeof(t));
			snprintf(t.clock, sizeof(t.clock), "%s", m->clock);
			snprintf(t.leader, sizeof(t.leader), "%s", m->leader);
			t.seq = m->seq;
			t.time_ns = m->time_ns;
			t.sent_ns = m->sent_ns;
			t.heartbeat_ns = m->heartbeat_ns;
			t.running = m->running;
			snprintf(t.hosts, sizeof(t.hosts), "%s", m->hosts);
			snprintf(t.roster, sizeof(t.roster), "%s", m->roster);
			r->ls_time_cb(r->ls_ctx, &t);
		}
	}
	if (n > 0)
		dds_return_loan(reader, ptrs, n);
}

/* Called by Cyclone on the thread that received the sample: no thread of
 * ours between the network and the clock thread (a waitset's cost 10 %
 * of a step between hosts). */
static void ls_on_grants(dds_entity_t reader, void *arg)
{
	ls_take(arg, reader, true);
}

static void ls_on_times(dds_entity_t reader, void *arg)
{
	ls_take(arg, reader, false);
}

/* Both topics best effort, volatile, keep last 1 per instance: a
 * reliable reader would hold a sample behind a lost one until the
 * writer's next heartbeat; a host repeats its promise until a time names
 * it instead (after 5 ms), and the leader answers each repetition
 * (lockstep_hosts.c). */
static int ls_reader(struct ros2 *r, dds_entity_t topic, void (*fn)(dds_entity_t, void *),
		     dds_entity_t *out, const char *what, char *err, size_t errlen)
{
	/* deep enough for every host's promise at once */
	dds_qos_t *qos = topic == r->ls_grant_topic ? answer_qos(r, r->ls_clock, 4, true)
						      : dist_qos(r, r->ls_clock, 4, false);
	dds_listener_t *l = dds_create_listener(r);

	dds_qset_reliability(qos, DDS_RELIABILITY_BEST_EFFORT, 0);
	dds_lset_data_available(l, fn);
	*out = dds_create_reader(r->participant, topic, qos, l);
	dds_delete_listener(l);
	dds_delete_qos(qos);
	if (*out < 0) {
		int rc = dds_fail(err, errlen, what, *out);

		*out = 0;
		return rc;
	}
	return 0;
}

static int ls_writer(struct ros2 *r, dds_entity_t topic, char *err, size_t errlen)
{
	dds_qos_t *qos = topic == r->ls_grant_topic ? answer_qos(r, r->ls_clock, 1, false)
						      : dist_qos(r, r->ls_clock, 1, false);

	dds_qset_reliability(qos, DDS_RELIABILITY_BEST_EFFORT, 0);
	/* Above Cyclone's SynchronousDeliveryPriorityThreshold (0): the
	 * receiving host delivers on the thread that received the sample, not
	 * through its delivery queue's thread. */
	dds_qset_transport_priority(qos, 1);
	r->ls_writer = dds_create_writer(r->participant, topic, qos, NULL);
	dds_delete_qos(qos);
	if (r->ls_writer < 0)
		return dds_fail(err, errlen, "cannot create the lockstep writer", r->ls_writer);
	return 0;
}

/* The leader reads the times too: another live leader's (a conflict). */
static int ls_lead(struct ros2 *r, const char *clock, void (*cb)(void *ctx, const struct ls_grant *g),
		   void (*rival)(void *ctx, const struct ls_time *t), void *ctx, char *err,
		   size_t errlen)
{
	int rc = ls_topics(r, clock, err, errlen);

	if (rc)
		return rc;
	r->ls_grant_cb = cb;
	r->ls_time_cb = rival;
	r->ls_ctx = ctx;
	if ((rc = ls_writer(r, r->ls_time_topic, err, errlen)) ||
	    (rc = ls_reader(r, r->ls_grant_topic, ls_on_grants, &r->ls.reader, LS_GRANT_TOPIC, err,
			    errlen)))
		return rc;
	return ls_reader(r, r->ls_time_topic, ls_on_times, &r->ls.reader2, LS_TIME_TOPIC, err,
			 errlen);
}

static int ls_follow(struct ros2 *r, const char *clock, void (*cb)(void *ctx, const struct ls_time *t),
		     void *ctx, char *err, size_t errlen)
{
	int rc = ls_topics(r, clock, err, errlen);

	if (rc)
		return rc;
	r->ls_time_cb = cb;
	r->ls_ctx = ctx;
	if ((rc = ls_writer(r, r->ls_grant_topic, err, errlen)))
		return rc;
	return ls_reader(r, r->ls_time_topic, ls_on_times, &r->ls.reader, LS_TIME_TOPIC, err,
			 errlen);
}

static int ls_time(struct ros2 *r, const struct ls_time *t)
{
	shmclock_LockstepTime m;

	if (r->ls_writer <= 0 || !r->ls_grant_cb)
		return -ENOTCONN; /* a leader's */
	memset(&m, 0, sizeof(m));
	snprintf(m.clock, sizeof(m.clock), "%s", r->ls_clock);
	snprintf(m.leader, sizeof(m.leader), "%s", t->leader);
	m.seq = t->seq;
	m.time_ns = t->time_ns;
	m.sent_ns = t->sent_ns;
	m.heartbeat_ns = t->heartbeat_ns;
	m.running = t->running;
	snprintf(m.hosts, sizeof(m.hosts), "%s", t->hosts);
	snprintf(m.roster, sizeof(m.roster), "%s", t->roster);
	return dds_write(r->ls_writer, &m) < 0 ? -EIO : 0;
}

static int ls_grant(struct ros2 *r, const struct ls_grant *g)
{
	shmclock_LockstepGrant m;

	if (r->ls_writer <= 0 || r->ls_grant_cb)
		return -ENOTCONN; /* a follower's */
	memset(&m, 0, sizeof(m));
	snprintf(m.clock, sizeof(m.clock), "%s", r->ls_clock);
	snprintf(m.host, sizeof(m.host), "%s", g->host);
	snprintf(m.leader, sizeof(m.leader), "%s", g->leader);
	m.seq = g->seq;
	m.grant_ns = g->grant_ns;
	m.shown_ns = g->shown_ns;
	m.lease_ns = g->lease_ns;
	m.members = g->members;
	m.deaths = g->deaths;
	snprintf(m.last_death, sizeof(m.last_death), "%s", g->last_death);
	snprintf(m.who, sizeof(m.who), "%s", g->who);
	m.echo_ns = g->echo_ns;
	m.held_ns = g->held_ns;
	return dds_write(r->ls_writer, &m) < 0 ? -EIO : 0;
}

/* Secured: the identity this daemon's id between hosts begins with. */
static const char *ros2_identity(struct ros2 *r)
{
	return r->sec ? ros2_sec_identity(r->sec) : "";
}

static void ros2_stop(struct ros2 *r)
{
	if (!r)
		return;
	follower_stop(&r->fn);
	follower_stop(&r->acks);
	/* The lockstep reader's listener: deleted, which waits for a call in
	 * progress, so that none comes once the daemon frees what it calls. */
	if (r->ls.reader > 0)
		dds_delete(r->ls.reader);
	if (r->ls.reader2 > 0)
		dds_delete(r->ls.reader2);
	r->ls.reader = r->ls.reader2 = 0;
	follower_stop(&r->clk);
}

static void ros2_close(struct ros2 *r)
{
	if (!r)
		return;
	ros2_stop(r);
	if (r->participant > 0)
		dds_delete(r->participant);
	ros2_sec_free(r->sec); /* after: Cyclone may speak while it ends */
	pthread_mutex_destroy(&r->mu);
	free(r);
}

__attribute__((visibility("default"))) const struct ros2_api shmclockd_ros2_api = {
	.open = ros2_open,
	.identity = ros2_identity,
	.follow = ros2_follow,
	.publisher = ros2_publisher,
	.publish = ros2_publish,
	.get_stats = ros2_get_stats,
	.dist_publisher = dist_publisher,
	.dist_publish = dist_publish,
	.dist_ack = dist_ack,
	.dist_echo = dist_echo,
	.dist_echo_forget = dist_echo_forget,
	.dist_follow = dist_follow,
	.dist_get_stats = dist_get_stats,
	.ls_lead = ls_lead,
	.ls_time = ls_time,
	.ls_follow = ls_follow,
	.ls_grant = ls_grant,
	.stop = ros2_stop,
	.close = ros2_close,
};
