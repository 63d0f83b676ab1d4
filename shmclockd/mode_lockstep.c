/* SPDX-License-Identifier: MIT */
/*
 * The clock thread in lockstep mode: instead of ticking, it advances the
 * clock to the smallest grant of the live participants (libshmclock's
 * lockstep host does the bookkeeping), within what the source allows:
 *
 *   fixed     straight to the next grant; with MaxScale X no sooner than
 *             (grant - last time) / X of real time after the last advance
 *   external  up to the last `advance`, never past a grant
 *   paused    not at all, except up to what `step` added
 *
 * The clock holds until Participants have joined, and whenever nobody is a
 * member. Deaths are found by scanning at least every SCAN_NS.
 *
 * A clock mode (mode.h): the clock thread calls the operations at the end
 * of this file; status reads the records below on the main thread.
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <shmclock/lockstep.h>
#include <shmclock/time.h>

#include "duration.h"
#include "sat.h"
#include "lockstep_hosts.h"
#include "log.h"
#include "record.h"
#include "mode_lockstep.h"
#include "ros2.h"
#include "source.h"

/* Scan for dead participants at least this often (detection < 100 ms). */
#define SCAN_NS 10000000

struct mode_lockstep {
	struct clock_mode m;
	shmclock_lockstep_host_t *host;  /* the participants' segment */
	struct ls_hosts *hosts;          /* between hosts (lockstep_hosts.h), or NULL */
	unsigned host_members;           /* a follower host's participants at its last pass */
	int notify_fd;                   /* eventfd: written when OnDeath abort fires */
	struct tl_cause holders;         /* recording: who holds the clock at its time */
	_Atomic bool started;            /* Participants joined once: the clock runs
					  * (status reads it: relaxed, information) */
	int64_t step_target;             /* paused: `step` lets the clock run to here */
	int64_t ext_target;              /* external source: the last advance */
	int64_t *due;                    /* a replay: the recording's instants, increasing */
	size_t ndue, next_due;           /* ... how many, the next one ahead */
	int64_t due_start;               /* ... where the clock starts */
	int64_t commit_mono, commit_sim; /* the last advance (MaxScale pacing) */
	_Atomic int64_t run_mono, run_sim; /* when and where the clock started
					  * running (steps/s and the real-time
					  * factor in status); set before started */
	int64_t stall_logged;            /* CLOCK_MONOTONIC of the last stall report */
	int64_t pub_sim, pub_next;       /* Ros2.Publish: the time last published, and
					  * when (CLOCK_MONOTONIC) the next may be */
	_Atomic uint64_t advances;       /* how often the clock moved */
	_Atomic uint64_t deaths;
	_Atomic bool aborted;            /* OnDeath abort or OnStall abort fired */
	_Atomic int exit_status;         /* ... with this exit status (86, 87) */
	_Atomic uint64_t stalls;         /* participants that held for EvictAfter */
	/* The records below: the clock thread rewrites them at each death or
	 * stall while status (the main thread) reads them; rec_lock guards
	 * them (never taken on the clock's fast path). */
	pthread_mutex_t rec_lock;
	char dead[512];                  /* who died last, for status */
	int64_t dead_grant, dead_clock, dead_mono; /* its last grant, the clock
					  * and CLOCK_MONOTONIC when found */
	char stalled[512];               /* who stalled (or was evicted by hand) last */
	char abort_msg[MODE_LOCKSTEP_ABORT_MAX]; /* why the clock stopped (exit message) */
};

static struct mode_lockstep *ls_of(struct clock_mode *m)
{
	return (struct mode_lockstep *)m;
}

/* OnDeath or OnStall abort: the clock stops for good; the main thread
 * prints @msg and exits with @status. */
static void abort_run(struct mode_lockstep *l, int status, const char *msg)
{
	pthread_mutex_lock(&l->rec_lock);
	snprintf(l->abort_msg, sizeof(l->abort_msg), "%s", msg);
	pthread_mutex_unlock(&l->rec_lock);
	atomic_store_explicit(&l->exit_status, status, memory_order_relaxed);
	/* Release: pairs with the acquire load in mode_lockstep_aborted (the
	 * main thread, after the eventfd): the exit status above is set. */
	atomic_store_explicit(&l->aborted, true, memory_order_release);
	if (l->notify_fd >= 0) {
		uint64_t one = 1;

		if (write(l->notify_fd, &one, sizeof(one)) < 0)
			log_msg(LOG_DEBUG, "lockstep: notify: %s", strerror(errno));
	}
}

/* What a scan's events need. */
struct scan {
	struct mode_lockstep *l;
	const struct clock_env *env;
};

/* A participant's death (@rec says whose; its last grant, the clock):
 * recorded for status, then OnDeath: abort stops the clock, evict goes on. */
static void note_death(struct mode_lockstep *l, const struct clock_env *env, const char *rec,
		       int64_t grant, int64_t clock)
{
	pthread_mutex_lock(&l->rec_lock);
	snprintf(l->dead, sizeof(l->dead), "%s", rec);
	l->dead_grant = grant;
	l->dead_clock = clock;
	l->dead_mono = shmclock_steady_now().ns;
	pthread_mutex_unlock(&l->rec_lock);
	/* Relaxed: a count; the record itself is under the lock. */
	atomic_fetch_add_explicit(&l->deaths, 1, memory_order_relaxed);
	if (env->cfg->ls_abort) {
		char msg[sizeof(l->dead) + 64];

		log_msg(LOG_ERROR, "lockstep: participant %s; OnDeath abort: the clock stops", rec);
		snprintf(msg, sizeof(msg), "participant %s (OnDeath abort)", rec);
		abort_run(l, SHMCLOCKD_EXIT_LOCKSTEP_DEATH, msg);
	} else {
		log_msg(LOG_WARN, "lockstep: participant %s; evicted, the clock goes on", rec);
	}
}

/* A lockstep event into the recording (record.h), if there is one. */
static void record_event(const struct clock_env *env, const char *event, const char *who, pid_t pid,
			 int64_t grant)
{
	struct tl_lockstep e = { .pid = pid, .grant_ns = grant };
	shmclock_info_t in;

	if (!env->rec)
		return;
	shmclock_writer_info(env->w, &in);
	e.sim_ns = in.sim_ns;
	snprintf(e.event, sizeof(e.event), "%s", event);
	snprintf(e.who, sizeof(e.who), "%s", who);
	recorder_lockstep(env->rec, &e);
}

/* The clock moves to @t (a recording is made): who will hold it there,
 * the participants whose grant is @t (it cannot pass them), their names
 * joined and the first's pid: the cause of the advance that releases it. */
static void note_holders(struct mode_lockstep *l, int64_t t)
{
	struct shmclock_lockstep_participant p[SHMCLOCK_LOCKSTEP_SLOTS];
	unsigned n = shmclock_lockstep_host_list(l->host, p, SHMCLOCK_LOCKSTEP_SLOTS);
	struct tl_cause *k = &l->holders;
	size_t len = 0;

	*k = (struct tl_cause){ .kind = TL_CAUSE_LOCKSTEP, .uid = -1, .pid = -1 };
	for (unsigned i = 0; i < n && i < SHMCLOCK_LOCKSTEP_SLOTS; i++) {
		if (p[i].grant_ns > t)
			continue;
		if (k->pid < 0)
			k->pid = p[i].pid;
		if (len < sizeof(k->who) - 1)
			len += (size_t)snprintf(k->who + len, sizeof(k->who) - len, "%s%s",
						len ? "," : "", p[i].who);
	}
	if (len >= sizeof(k->who))
		memcpy(k->who + sizeof(k->who) - 4, "...", 4);
}

static void on_event(enum shmclock_lockstep_event ev, const struct shmclock_lockstep_participant *p,
		     void *user)
{
	const struct scan *sc = user;
	struct mode_lockstep *l = sc->l;
	char g[64];

	static const char *const names[] = {
		[SHMCLOCK_LOCKSTEP_JOINED] = "join", [SHMCLOCK_LOCKSTEP_LEFT] = "leave",
		[SHMCLOCK_LOCKSTEP_DIED] = "death", [SHMCLOCK_LOCKSTEP_INVALID] = "death",
	};

	if ((unsigned)ev < sizeof(names) / sizeof(names[0]) && names[ev])
		record_event(sc->env, names[ev], p->who, p->pid, p->grant_ns);

	duration_format(p->grant_ns, g, sizeof(g));
	switch (ev) {
	case SHMCLOCK_LOCKSTEP_JOINED:
		log_msg(LOG_INFO, "lockstep: '%s' (pid %d) joined at %s", p->who, (int)p->pid, g);
		break;
	case SHMCLOCK_LOCKSTEP_LEFT:
		log_msg(LOG_INFO, "lockstep: '%s' (pid %d) left at grant %s", p->who, (int)p->pid, g);
		break;
	case SHMCLOCK_LOCKSTEP_REFUSED:
		log_msg(LOG_WARN, "lockstep: a join as '%s' (pid %d) refused: another participant "
				  "has that name, or it is not UTF-8 of the documented set, or its slot "
				  "lock is not held by the thread it names", p->who, (int)p->pid);
		break;
	case SHMCLOCK_LOCKSTEP_DIED:
	case SHMCLOCK_LOCKSTEP_INVALID: {
		shmclock_info_t in;
		char now[64], rec[sizeof(l->dead)];

		shmclock_writer_info(sc->env->w, &in);
		duration_format(in.sim_ns, now, sizeof(now));
		snprintf(rec, sizeof(rec),
			 "'%s' (pid %d) %s: last grant %s (%" PRId64 " ns), clock at %s (%" PRId64 " ns)",
			 p->who, (int)p->pid,
			 ev == SHMCLOCK_LOCKSTEP_DIED ? "died"
						      : "broke the protocol (its slot's lock word names "
							"another thread, or its grant is beyond the "
							"horizon) and counts as dead",
			 g, p->grant_ns, now, in.sim_ns);
		note_death(l, sc->env, rec, p->grant_ns, in.sim_ns);
		break;
	}
	}
}

/* After EvictAfter of real time holding the clock: OnStall evict drops
 * the participant (as if dead, but its calls return -ECANCELED), abort
 * stops the clock. Only when the clock has waited EvictAfter since its
 * last advance (ls_commit_mono): nobody can have held it longer. */
static void check_stalls(struct mode_lockstep *l, const struct clock_env *env, int64_t sim,
			 int64_t now)
{
	const struct shmclockd_config *c = env->cfg;
	struct shmclock_lockstep_participant p[SHMCLOCK_LOCKSTEP_SLOTS];
	enum on_stall policy = config_stall_policy(c);
	int64_t after = c->ls_evict_ns;
	unsigned n;

	if (policy == STALL_WAIT || !after || now - l->commit_mono < after)
		return;
	n = shmclock_lockstep_host_list(l->host, p, SHMCLOCK_LOCKSTEP_SLOTS);
	for (unsigned i = 0; i < n && i < SHMCLOCK_LOCKSTEP_SLOTS; i++) {
		char rec[sizeof(l->stalled)], held[64], at[64], g[64], ea[64];

		if (!p[i].holding_since_ns || now - p[i].holding_since_ns < after)
			continue;
		snprintf(rec, sizeof(rec), "'%s' (pid %d) held the clock at %s for %s (its grant %s; "
			 "EvictAfter %s)", p[i].who, (int)p[i].pid, duration_format(sim, at, sizeof(at)),
			 duration_format(now - p[i].holding_since_ns, held, sizeof(held)),
			 duration_format(p[i].grant_ns, g, sizeof(g)),
			 duration_format(after, ea, sizeof(ea)));
		pthread_mutex_lock(&l->rec_lock);
		memcpy(l->stalled, rec, sizeof(rec));
		pthread_mutex_unlock(&l->rec_lock);
		/* Relaxed: a count; the record is under the lock. */
		atomic_fetch_add_explicit(&l->stalls, 1, memory_order_relaxed);
		if (policy == STALL_ABORT) {
			char msg[sizeof(rec) + 64];

			log_msg(LOG_ERROR, "lockstep: %s; OnStall abort: the clock stops", rec);
			snprintf(msg, sizeof(msg), "participant %s: stalled (OnStall abort)", rec);
			abort_run(l, SHMCLOCKD_EXIT_LOCKSTEP_STALL, msg);
			return;
		}
		if (shmclock_lockstep_host_evict_slot(l->host, p[i].slot) == 0) {
			log_msg(LOG_WARN, "lockstep: %s; evicted (OnStall evict), the clock goes on", rec);
			record_event(env, "evict", p[i].who, p[i].pid, p[i].grant_ns);
		}
	}
}

/* `shmclockctl evict WHO` (the clock thread). */
static int evict(struct mode_lockstep *l, const struct clock_env *env, const char *who, char *err,
		 size_t errlen)
{
	char rec[sizeof(l->stalled)];
	int r;

	r = shmclock_lockstep_host_evict(l->host, who);
	if (r == -ENOENT) {
		snprintf(err, errlen, "no lockstep participant of that name (status lists them)");
		return r;
	}
	if (r) {
		snprintf(err, errlen, "%s", shmclock_strerror(r));
		return r;
	}
	snprintf(rec, sizeof(rec), "'%s' evicted by hand (shmclockctl evict)", who);
	record_event(env, "evict", who, 0, -1);
	log_msg(LOG_WARN, "lockstep: %s; the clock goes on", rec);
	pthread_mutex_lock(&l->rec_lock);
	memcpy(l->stalled, rec, sizeof(rec));
	pthread_mutex_unlock(&l->rec_lock);
	return 0;
}

/* After StallAfter of real time at one time: name who holds the clock
 * (again every StallAfter while it lasts). */
static void report_stall(struct mode_lockstep *l, const struct clock_env *env, int64_t sim,
			 int64_t now)
{
	const struct shmclockd_config *c = env->cfg;
	struct shmclock_lockstep_participant p[SHMCLOCK_LOCKSTEP_SLOTS];
	unsigned n = shmclock_lockstep_host_list(l->host, p, SHMCLOCK_LOCKSTEP_SLOTS);
	char line[512], d[64], t[64];
	size_t len = 0;
	int64_t held = 0;

	/* Nobody has held the clock longer than since its last advance: the
	 * list is not even looked at before StallAfter of that. */
	if (now - l->stall_logged < c->ls_stall_ns ||
	    now - l->commit_mono < c->ls_stall_ns)
		return;
	line[0] = 0;
	for (unsigned i = 0; i < n && i < SHMCLOCK_LOCKSTEP_SLOTS; i++) {
		if (!p[i].holding_since_ns || now - p[i].holding_since_ns < c->ls_stall_ns)
			continue;
		if (now - p[i].holding_since_ns > held)
			held = now - p[i].holding_since_ns;
		record_event(env, "stall", p[i].who, p[i].pid, p[i].grant_ns);
		if (len < sizeof(line))
			len += (size_t)snprintf(line + len, sizeof(line) - len, "%s'%s' (pid %d)",
						len ? ", " : "", p[i].who, (int)p[i].pid);
	}
	if (l->hosts && len < sizeof(line)) {
		/* Remote participants at or below the clock hold it, since
		 * its last advance at least. */
		size_t k = ls_hosts_holding(l->hosts, sim, line + len + (len ? 2 : 0),
					    sizeof(line) - len - (len ? 2 : 0));

		if (k && len)
			memcpy(line + len, ", ", 2);
		if (k) {
			len += k + (len ? 2 : 0);
			if (now - l->commit_mono > held)
				held = now - l->commit_mono;
		}
	}
	if (!held)
		return;
	l->stall_logged = now;
	log_msg(LOG_WARN, "lockstep: the clock has waited %s at %s for %s", duration_format(held, d, sizeof(d)),
		duration_format(sim, t, sizeof(t)), line);
}

/*
 * Ros2.Publish: /clock at each advance, at most PublishHz: a time the clock
 * moved to is published at once unless the last sample is less than a
 * period old; then at the end of that period (*@deadline), if the clock
 * has not moved again meanwhile, so the last time a run holds at is always
 * sent. One branch when not publishing.
 */
static void publish_clock(struct mode_lockstep *l, const struct clock_env *env, int64_t sim,
			  int64_t now, int64_t *deadline)
{
	if (!env->ros2_pub || sim == l->pub_sim)
		return;
	if (now < l->pub_next) {
		if (deadline && l->pub_next < *deadline)
			*deadline = l->pub_next;
		return;
	}
	if (env->ros2_api->publish(env->ros2_pub, sim) < 0)
		log_msg(LOG_DEBUG, "ros2: a /clock write failed");
	l->pub_sim = sim;
	l->pub_next = now + 1000000000 / (env->cfg->ros2_hz > 0 ? env->cfg->ros2_hz : 100);
}

/* The clock runs from @sim (steps/s and the real-time factor in status
 * count from here). */
static void mark_running(struct mode_lockstep *l, int64_t now, int64_t sim)
{
	atomic_store_explicit(&l->run_mono, now, memory_order_relaxed);
	atomic_store_explicit(&l->run_sim, sim, memory_order_relaxed);
	/* Release: pairs with status's acquire load of started; the two
	 * above are set by then. */
	atomic_store_explicit(&l->started, true, memory_order_release);
	l->commit_mono = now;
	l->commit_sim = sim;
}

/* The leader hears of its hosts (lockstep_hosts.h): a remote death or a
 * host lost is a participant's death (OnDeath). */
static void on_host_event(enum ls_hosts_event ev, const char *host, const char *what, void *user)
{
	const struct scan *sc = user;
	struct mode_lockstep *l = sc->l;
	char rec[sizeof(l->dead)];

	if (ev == LS_HOST_JOINED) {
		log_msg(LOG_INFO, "lockstep: host %s counted, its participants: %s", host,
			*what ? what : "none yet");
		return;
	}
	if (ev == LS_HOST_RENEWED) {
		log_msg(LOG_INFO, "lockstep: host %s evicted its participants and is counted anew "
				  "as %s (not a death)", host, what);
		return;
	}
	if (ev == LS_HOST_DEATH)
		snprintf(rec, sizeof(rec), "on host %s: %s", host, what);
	else
		snprintf(rec, sizeof(rec), "host %s lost (silent for its lease), its participants "
			 "count as dead: %s", host, *what ? what : "none");
	note_death(l, sc->env, rec, l->commit_sim, l->commit_sim);
}

/* A follower host's pass: shows the largest time its leader decided,
 * never past its own participants' grants, and promises the smallest of
 * these (lockstep_hosts.h). */
static int64_t follower_tick(struct mode_lockstep *l, const struct clock_env *env, int64_t now)
{
	shmclock_lockstep_host_t *h = l->host;
	const struct shmclockd_config *c = env->cfg;
	struct scan sc = { l, env };
	int64_t limit, min, join, deadline = now + SCAN_NS, next;
	struct ls_follow f;
	shmclock_info_t in;
	char dead[sizeof(l->dead)];
	unsigned n;

	shmclock_writer_info(env->w, &in);
	if (atomic_load_explicit(&l->aborted, memory_order_relaxed))
		return INT64_MAX;
	ls_hosts_follow(l->hosts, now, &f);
	if (f.evicted) {
		struct shmclock_lockstep_participant p[SHMCLOCK_LOCKSTEP_SLOTS];
		unsigned np = shmclock_lockstep_host_list(h, p, SHMCLOCK_LOCKSTEP_SLOTS);

		char a[64], b[64];

		if (f.passed_at != INT64_MIN)
			log_msg(LOG_WARN, "lockstep: the leader's time (%s) passed this host's promise "
					  "(%s): its %u participants joined behind the run and are "
					  "evicted; it joins again as a new host",
				duration_format(f.passed_at, a, sizeof(a)),
				duration_format(f.passed_promise, b, sizeof(b)), np);
		else
			log_msg(LOG_WARN, "lockstep: the leader no longer counts this host (its lease "
					  "ran out): its %u participants are evicted; it joins again "
					  "as a new host", np);
		for (unsigned i = 0; i < np && i < SHMCLOCK_LOCKSTEP_SLOTS; i++)
			shmclock_lockstep_host_evict_slot(h, p[i].slot);
	}
	if (f.heard != INT64_MIN && f.heard < in.sim_ns && !l->host_members) {
		/* Behind this clock (a new leader, or this host's clock left
		 * from an earlier run): with no participant here to hold to
		 * what it showed, the clock goes back to the leader's, a jump
		 * its readers hear of. */
		char a[64], b[64];

		log_msg(LOG_WARN, "lockstep: the leader is at %s, behind this host's clock at %s: "
				  "back to it (a jump)", duration_format(f.heard, a, sizeof(a)),
			duration_format(in.sim_ns, b, sizeof(b)));
		if (!shmclock_writer_set_time(env->w, f.heard))
			shmclock_writer_info(env->w, &in);
	} else if (f.jump) {
		log_msg(LOG_WARN, "lockstep: the new leader is behind this host's clock and its "
				  "participants: it holds until the leader's time passes its own");
	}
	if (f.silent != in.stale && clock_env_set_stale(env, f.silent))
		log_msg(LOG_DEBUG, "lockstep: cannot mark the clock %s", f.silent ? "stale" : "fresh");
	/* A participant joins where none here is behind: at the promise (the
	 * leader may be there already) or the time heard, if later than the
	 * clock (grants.pml: JOIN_AT_SHOWN fails). */
	join = f.join_at > in.sim_ns ? f.join_at : in.sim_ns;
	shmclock_lockstep_host_scan(h, join, on_event, &sc, &min, &n);
	l->host_members = n;
	limit = f.heard;
	if (n && min < limit)
		limit = min;
	if (limit > in.sim_ns && !shmclock_writer_advance(env->w, limit)) {
		l->commit_mono = now;
		l->commit_sim = limit;
		atomic_fetch_add_explicit(&l->advances, 1, memory_order_relaxed);
		in.sim_ns = limit;
		if (!atomic_load_explicit(&l->started, memory_order_relaxed))
			mark_running(l, now, limit);
	}
	shmclock_lockstep_host_committed(h, in.sim_ns);
	publish_clock(l, env, in.sim_ns, now, &deadline);
	pthread_mutex_lock(&l->rec_lock);
	memcpy(dead, l->dead, sizeof(dead));
	pthread_mutex_unlock(&l->rec_lock);
	next = ls_hosts_promise(l->hosts, now, in.sim_ns, min, n, (unsigned)c->ls_participants,
				atomic_load_explicit(&l->deaths, memory_order_relaxed), dead);
	if (next < deadline)
		deadline = next;
	if (atomic_load_explicit(&l->aborted, memory_order_relaxed))
		return CLOCK_MODE_AGAIN; /* OnDeath abort, said to the leader above */
	if (n && !f.silent) {
		report_stall(l, env, in.sim_ns, now);
		check_stalls(l, env, in.sim_ns, now);
	}
	shmclock_writer_heartbeat(env->w);
	return deadline;
}

/* The leader between hosts listens before it decides anything (nobody
 * joins meanwhile: a join is accepted at the clock's time, which a
 * takeover may move): true while it does. Then, taking over, it continues
 * from where the hosts' clocks are (never back), running at once if its
 * predecessor's participants are there. */
static bool leader_listens(struct mode_lockstep *l, const struct clock_env *env, int64_t now,
			   shmclock_info_t *in, bool *started)
{
	int64_t from;
	bool resume;

	if (ls_hosts_listen(l->hosts, now, &from, &resume)) {
		shmclock_writer_heartbeat(env->w);
		return true;
	}
	if (from > in->sim_ns && !shmclock_writer_advance(env->w, from))
		shmclock_writer_info(env->w, in);
	if (resume && !*started) {
		*started = true;
		mark_running(l, now, in->sim_ns);
	}
	return false;
}

/* One pass of the clock thread's loop: advance to what the grants allow,
 * or say until when nothing will change. */
static int64_t ls_tick(struct clock_mode *m, const struct clock_env *env, int64_t now)
{
	struct mode_lockstep *l = ls_of(m);
	shmclock_lockstep_host_t *h = l->host;
	const struct shmclockd_config *c = env->cfg;
	bool started = atomic_load_explicit(&l->started, memory_order_relaxed);
	struct scan sc = { l, env };
	int64_t limit, min, deadline = now + SCAN_NS;
	shmclock_info_t in;
	unsigned n;

	if (l->hosts && !ls_hosts_leader(l->hosts))
		return follower_tick(l, env, now);
	shmclock_writer_info(env->w, &in);
	if (atomic_load_explicit(&l->aborted, memory_order_relaxed))
		return INT64_MAX; /* stopped for good: only commands (status, stop) */
	if (l->hosts && leader_listens(l, env, now, &in, &started)) {
		int64_t until = ls_hosts_listen_until(l->hosts);

		return until < now + SCAN_NS ? until : now + SCAN_NS;
	}
	shmclock_lockstep_host_scan(h, in.sim_ns, on_event, &sc, &min, &n);
	if (l->hosts) {
		/* Every host it counts, at its promise. */
		int64_t rmin;
		unsigned rn;

		ls_hosts_promises(l->hosts, now, on_host_event, &sc, &rmin, &rn);
		if (rmin < min)
			min = rmin;
		n += rn;
	}
	if (atomic_load_explicit(&l->aborted, memory_order_relaxed))
		return CLOCK_MODE_AGAIN; /* a death with OnDeath abort: no advance after it */
	if (!started && n >= (unsigned)c->ls_participants) {
		char t[64];

		started = true;
		mark_running(l, now, in.sim_ns);
		if (env->rec)
			note_holders(l, in.sim_ns);
		log_msg(LOG_INFO, "lockstep: %u participants joined; the clock runs from %s", n,
			duration_format(in.sim_ns, t, sizeof(t)));
	}
	limit = started && n ? min : in.sim_ns;
	if (in.paused && l->step_target < limit)
		limit = l->step_target;
	if (c->source->ops->feed == FEED_CLIENT && l->ext_target < limit)
		limit = l->ext_target;
	/* A replay: never past the recording's next instant. */
	while (l->next_due < l->ndue && l->due[l->next_due] <= in.sim_ns)
		l->next_due++;
	if (l->next_due < l->ndue && l->due[l->next_due] < limit)
		limit = l->due[l->next_due];
	if (limit > in.sim_ns && c->ls_max_scale > 0) {
		/* Not sooner than the scale allows since the last advance. */
		double wait = (double)(limit - l->commit_sim) / c->ls_max_scale;
		int64_t due = wait > 9e18 ? INT64_MAX : l->commit_mono + (int64_t)wait;

		if (due > now) {
			deadline = due < deadline ? due : deadline;
			limit = in.sim_ns;
		}
	}
	if (limit > in.sim_ns) {
		int r;

		/* Recording: the advance's cause is who held the clock here,
		 * and for how long; who will hold it at limit is known now,
		 * before they can see it (each waits for the clock to reach
		 * its grant before it grants further). */
		if (env->rec) {
			*env->cause = l->holders;
			env->cause->held_ns = now - l->commit_mono;
			/* Nobody's grant held it there: a replay's instant,
			 * or an external source's value. */
			if (!l->holders.who[0])
				env->cause->kind = l->ndue ? TL_CAUSE_REPLAY
					: c->source->ops->feed == FEED_CLIENT ? TL_CAUSE_SOURCE
									     : TL_CAUSE_MODE;
			note_holders(l, limit);
		}
		r = shmclock_writer_advance(env->w, limit);
		if (r) {
			log_msg(LOG_ERROR, "lockstep: cannot advance the clock: %s", shmclock_strerror(r));
		} else {
			l->commit_mono = now;
			l->commit_sim = limit;
			atomic_fetch_add_explicit(&l->advances, 1, memory_order_relaxed);
			shmclock_lockstep_host_committed(h, limit);
			publish_clock(l, env, limit, now, NULL);
			if (l->hosts)
				ls_hosts_decided(l->hosts, limit, now, started);
			l->stall_logged = 0;
			return CLOCK_MODE_AGAIN; /* more grants may be waiting */
		}
	}
	shmclock_lockstep_host_committed(h, in.sim_ns);
	publish_clock(l, env, in.sim_ns, now, &deadline);
	if (l->hosts) {
		int64_t hb = ls_hosts_decided(l->hosts, in.sim_ns, now, started);

		if (hb < deadline)
			deadline = hb;
	}
	if (in.paused)
		l->commit_mono = now; /* a pause is nobody's stall */
	if (started && n && !in.paused) {
		report_stall(l, env, in.sim_ns, now);
		check_stalls(l, env, in.sim_ns, now);
		if (atomic_load_explicit(&l->aborted, memory_order_relaxed))
			return CLOCK_MODE_AGAIN; /* OnStall abort */
	}
	shmclock_writer_heartbeat(env->w);
	return deadline;
}

/* The participants' token, before the commands are drained: a grant made
 * after this load ends the wait below at once (pairs with the
 * participants' increments, as the kick's load with clockthread_submit's). */
static void ls_arm(struct clock_mode *m, struct clock_wake *wk)
{
	wk->token = shmclock_lockstep_host_token(ls_of(m)->host);
}

/* On the participants' word and the kick word at once (futex_waitv), or,
 * before Linux 5.16, on the participants' word alone, which
 * clockthread_submit bumps too (shmclock_lockstep_host_kick). */
static void ls_wait(struct clock_mode *m, const struct clock_wake *wk, int64_t deadline)
{
	shmclock_lockstep_host_wait(ls_of(m)->host, wk->token, (uint32_t *)wk->kick, wk->kick_val,
				    deadline);
}

/* CMD_INIT: lockstep holds the clock at a time from the start: an
 * external clock without StartTime starts at 0. */
static int ls_start(struct clock_mode *m, const struct clock_env *env)
{
	struct mode_lockstep *l = ls_of(m);
	shmclock_info_t in;
	int r = 0;

	shmclock_writer_info(env->w, &in);
	if (l->due)
		r = shmclock_writer_advance(env->w, l->due_start); /* a replay starts anew */
	else if (!in.initialized)
		r = shmclock_writer_advance(env->w, 0);
	else if (!in.stepped)
		r = shmclock_writer_set_stepped(env->w, true); /* a follower host's: the leader
								* source runs */
	shmclock_writer_info(env->w, &in);
	l->ext_target = in.sim_ns;
	l->step_target = INT64_MIN;
	return r;
}

static int ls_change(struct clock_mode *m, const struct clock_env *env, struct cmd *c,
		     const shmclock_info_t *in)
{
	struct mode_lockstep *l = ls_of(m);

	(void)env;
	/* Scale and set never come here: protocol.h's table refuses them in
	 * lockstep. */
	switch (c->req.kind) {
	case CMD_STEP:
		if (!in->paused)
			return cmd_fail(c, -EINVAL, "in lockstep, step needs a paused clock (pause "
						    "first); it then advances within the grants");
		if (c->req.ns < 0)
			return cmd_fail(c, -EINVAL, "step takes a duration >= 0");
		l->step_target = shmclock__sat_add(l->step_target > in->sim_ns ? l->step_target : in->sim_ns,
					 c->req.ns);
		return 0;
	case CMD_ADVANCE:
		/* The clock follows within the grants (ls_tick); the clock
		 * thread checked the source takes advance. */
		if (c->req.ns < l->ext_target)
			return cmd_fail(c, -EINVAL, "in lockstep, advance cannot go back (the "
						    "participants have granted ahead)");
		l->ext_target = c->req.ns;
		return 0;
	case CMD_EVICT:
		return evict(l, env, c->req.who, c->err, sizeof(c->err));
	case CMD_PAUSE:
	case CMD_RESUME:
		/* A step's target ends with its pause (a pause of a paused
		 * clock changes nothing): left, a pause after a resume ran the
		 * clock on to a step made before it, and a new step added to
		 * that (a review found it). */
		if (c->req.kind == CMD_RESUME || !in->paused)
			l->step_target = INT64_MIN;
		return CLOCK_MODE_PASS;
	default:
		return CLOCK_MODE_PASS;
	}
}

/* Every Lockstep key applies on a live clock (main.c refused turning
 * lockstep on or off): they are read from the config where they are used.
 * Participants only matters until the clock has started (RELOAD_UNTIL_START
 * in config.c): a change after that would show in status a number the
 * clock no longer waits for, so it is refused. The horizon goes to the
 * participants' segment. */
static int ls_reload(struct clock_mode *m, const struct clock_env *env,
		     const struct shmclockd_config *next, char *err, size_t errlen)
{
	struct mode_lockstep *l = ls_of(m);
	const struct config_key *k = NULL;

	while ((k = config_reload_change(next, env->cfg, RELOAD_UNTIL_START, k))) {
		char path[64];

		if (!atomic_load_explicit(&l->started, memory_order_relaxed))
			continue;
		snprintf(err, errlen, "%s changes only until the clock has started, and it has "
			 "(with %d participants)", config_key_path(k, path, sizeof(path)),
			 env->cfg->ls_participants);
		return -EINVAL;
	}
	if (next->ls_max_ahead_ns != env->cfg->ls_max_ahead_ns)
		shmclock_lockstep_host_set_max_ahead(l->host, next->ls_max_ahead_ns);
	return 0;
}

/* A member's own figures (it writes them in the participants' segment). */
static void add_figures(cJSON *m, struct mode_lockstep *l, unsigned slot, uint64_t *most,
			const char **most_who, const char *who)
{
	struct shmclock_lockstep_stats s;

	if (shmclock_lockstep_host_stats(l->host, slot, &s))
		return;
	cJSON_AddNumberToObject(m, "grants", (double)s.grants);
	cJSON_AddNumberToObject(m, "steps", (double)s.steps);
	cJSON_AddNumberToObject(m, "last_to_grant", (double)s.last_to_grant);
	cJSON_AddNumberToObject(m, "work_s", (double)s.work_ns / 1e9);
	cJSON_AddNumberToObject(m, "wait_s", (double)s.wait_ns / 1e9);
	cJSON_AddNumberToObject(m, "work_p50_us", (double)s.work_p50_ns / 1e3);
	cJSON_AddNumberToObject(m, "work_p99_us", (double)s.work_p99_ns / 1e3);
	cJSON_AddNumberToObject(m, "wait_p50_us", (double)s.wait_p50_ns / 1e3);
	cJSON_AddNumberToObject(m, "wait_p99_us", (double)s.wait_p99_ns / 1e3);
	if (s.working_for_ns)
		cJSON_AddNumberToObject(m, "working_for_s", (double)s.working_for_ns / 1e9);
	if (s.last_to_grant > *most) {
		*most = s.last_to_grant;
		*most_who = who;
	}
}

/* "lockstep": what the clock waits for, and who. */
static void ls_status(struct clock_mode *mode, cJSON *st, const struct shmclockd_config *cfg,
		      const shmclock_info_t *in, bool stale)
{
	struct mode_lockstep *l = ls_of(mode);
	int64_t sim = in->sim_ns;
	struct shmclock_lockstep_participant p[SHMCLOCK_LOCKSTEP_SLOTS];
	unsigned n = shmclock_lockstep_host_list(l->host, p, SHMCLOCK_LOCKSTEP_SLOTS);
	cJSON *t = cJSON_CreateObject(), *a = cJSON_CreateArray();
	int64_t mono = shmclock_steady_now().ns;
	/* A count (on_event's increment is relaxed): the record it counts is
	 * read under rec_lock below. */
	uint64_t deaths = atomic_load_explicit(&l->deaths, memory_order_acquire);
	char buf[64];

	(void)stale;
	bool running = atomic_load_explicit(&l->started, memory_order_acquire);
	uint64_t most = 0;
	const char *most_who = NULL;

	cJSON_AddNumberToObject(t, "participants_required", cfg->ls_participants);
	cJSON_AddBoolToObject(t, "running", running);
	if (running) {
		/* Since the clock started: steps/s and the real-time factor (the
		 * acquire above pairs with ls_tick's release). */
		double secs = (double)(mono - atomic_load_explicit(&l->run_mono,
								    memory_order_relaxed)) / 1e9;

		if (secs > 0) {
			cJSON_AddNumberToObject(t, "steps_per_s",
						(double)atomic_load_explicit(&l->advances,
									     memory_order_relaxed) / secs);
			cJSON_AddNumberToObject(t, "realtime_factor",
						(double)(sim - atomic_load_explicit(&l->run_sim,
										    memory_order_relaxed)) /
							1e9 / secs);
		}
	}
	if (cfg->ls_max_scale > 0)
		cJSON_AddNumberToObject(t, "max_scale", cfg->ls_max_scale);
	cJSON_AddStringToObject(t, "on_death", cfg->ls_abort ? "abort" : "evict");
	cJSON_AddStringToObject(t, "on_stall", config_on_stall_name(config_stall_policy(cfg)));
	if (cfg->ls_evict_ns)
		cJSON_AddStringToObject(t, "evict_after", duration_format(cfg->ls_evict_ns, buf, sizeof(buf)));
	cJSON_AddStringToObject(t, "max_grant_ahead", duration_format(cfg->ls_max_ahead_ns, buf, sizeof(buf)));
	cJSON_AddNumberToObject(t, "advances",
				(double)atomic_load_explicit(&l->advances, memory_order_relaxed));
	cJSON_AddNumberToObject(t, "deaths", (double)deaths);
	cJSON_AddNumberToObject(t, "stalls",
				(double)atomic_load_explicit(&l->stalls, memory_order_relaxed));
	/* The records the clock thread may be rewriting (a second death):
	 * under its lock, copied whole. */
	pthread_mutex_lock(&l->rec_lock);
	if (deaths) {
		cJSON_AddStringToObject(t, "last_death", l->dead);
		snprintf(buf, sizeof(buf), "%lld", (long long)l->dead_grant);
		cJSON_AddStringToObject(t, "last_death_grant_ns", buf);
		snprintf(buf, sizeof(buf), "%lld", (long long)l->dead_clock);
		cJSON_AddStringToObject(t, "last_death_clock_ns", buf);
		snprintf(buf, sizeof(buf), "%lld", (long long)l->dead_mono);
		cJSON_AddStringToObject(t, "last_death_found_mono_ns", buf);
	}
	if (l->stalled[0])
		cJSON_AddStringToObject(t, "last_eviction", l->stalled);
	pthread_mutex_unlock(&l->rec_lock);
	cJSON_AddBoolToObject(t, "aborted", atomic_load_explicit(&l->aborted, memory_order_relaxed));
	for (unsigned i = 0; i < n && i < SHMCLOCK_LOCKSTEP_SLOTS; i++) {
		cJSON *m = cJSON_CreateObject();

		cJSON_AddStringToObject(m, "name", p[i].who);
		cJSON_AddNumberToObject(m, "pid", p[i].pid);
		snprintf(buf, sizeof(buf), "%lld", (long long)p[i].grant_ns);
		cJSON_AddStringToObject(m, "grant_ns", buf);
		cJSON_AddStringToObject(m, "grant", duration_format(p[i].grant_ns, buf, sizeof(buf)));
		snprintf(buf, sizeof(buf), "%lld", (long long)p[i].joined_sim_ns);
		cJSON_AddStringToObject(m, "joined_ns", buf);
		cJSON_AddBoolToObject(m, "holding", p[i].grant_ns <= sim);
		if (p[i].holding_since_ns && p[i].grant_ns <= sim)
			cJSON_AddNumberToObject(m, "holding_for_s",
						(double)(mono - p[i].holding_since_ns) / 1e9);
		add_figures(m, l, p[i].slot, &most, &most_who, p[i].who);
		cJSON_AddItemToArray(a, m);
	}
	if (l->hosts)
		ls_hosts_status(l->hosts, t, a, sim);
	if (most_who)
		cJSON_AddStringToObject(t, "last_to_grant_most", most_who);
	cJSON_AddItemToObject(t, "members", a);
	cJSON_AddItemToObject(st, "lockstep", t);
}

/* A command was queued (the submitting thread): without futex_waitv
 * (Linux < 5.16) ls_wait sleeps on the participants' word alone. */
static void ls_kick(struct clock_mode *m)
{
	shmclock_lockstep_host_kick(ls_of(m)->host);
}

static void ls_destroy(struct clock_mode *m)
{
	struct mode_lockstep *l = ls_of(m);

	free(l->due);
	/* Its participants learn it from the clock's writer going away (or
	 * from a successor's new segment): -ESTALE. */
	ls_hosts_close(l->hosts);
	shmclock_lockstep_host_destroy(l->host);
	if (l->notify_fd >= 0)
		close(l->notify_fd);
	pthread_mutex_destroy(&l->rec_lock);
	free(l);
}

static const struct clock_mode_ops mode_lockstep_ops = {
	.name = "lockstep",
	.start = ls_start,
	.change = ls_change,
	.reload = ls_reload,
	.arm = ls_arm,
	.wait = ls_wait,
	.kick = ls_kick,
	.tick = ls_tick,
	.status = ls_status,
	.destroy = ls_destroy,
};

/* mode_lockstep_create, or with @hosts (taken over) a follower host's
 * link already open and @notify_fd the eventfd its aborts are told on
 * (duplicated; -1: one of its own). */
static int create(shmclock_writer_t *w, const struct shmclockd_config *c, struct ros2 *ros2,
		  const struct ros2_api *api, struct ls_hosts *hosts, int notify_fd,
		  struct clock_mode **out, char *err, size_t errlen)
{
	struct mode_lockstep *l = calloc(1, sizeof(*l));
	int r;

	*out = NULL;
	if (!l) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	l->m.ops = &mode_lockstep_ops;
	l->notify_fd = -1;
	l->holders = (struct tl_cause){ .kind = TL_CAUSE_MODE, .uid = -1, .pid = -1 };
	l->pub_sim = INT64_MIN;
	pthread_mutex_init(&l->rec_lock, NULL);
	r = shmclock_lockstep_host_create(w, c->name, c->has_group ? 0660 : 0600,
					  c->has_group ? c->group : (gid_t)-1, &l->host);
	if (r) {
		snprintf(err, errlen, "cannot create the lockstep segment /dev/shm/shmclock-lockstep.%s: %s",
			 c->name, shmclock_strerror(r));
		ls_destroy(&l->m);
		return r;
	}
	l->notify_fd = notify_fd >= 0 ? fcntl(notify_fd, F_DUPFD_CLOEXEC, 0)
				      : eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (l->notify_fd < 0) {
		r = -errno;
		snprintf(err, errlen, "eventfd: %s", strerror(errno));
		ls_destroy(&l->m);
		return r;
	}
	shmclock_lockstep_host_set_max_ahead(l->host, c->ls_max_ahead_ns);
	if (hosts) {
		l->hosts = hosts;
		ls_hosts_attach(hosts, l->host);
	} else if (ros2 && (c->dist_publish || c->source->ops->feed == FEED_LEADER) &&
		 (r = ls_hosts_open(c, ros2, api, l->host, &l->hosts, err, errlen)) != 0) {
		ls_destroy(&l->m);
		return r;
	}
	*out = &l->m;
	return 0;
}

int mode_lockstep_create(shmclock_writer_t *w, const struct shmclockd_config *c,
			 struct ros2 *ros2, const struct ros2_api *api, struct clock_mode **out, char *err, size_t errlen)
{
	return create(w, c, ros2, api, NULL, -1, out, err, errlen);
}

int mode_lockstep_adopt(shmclock_writer_t *w, const struct shmclockd_config *c,
			struct ls_hosts *hosts, int notify_fd, struct clock_mode **out, char *err,
			size_t errlen)
{
	return create(w, c, NULL, NULL, hosts, notify_fd, out, err, errlen);
}

void mode_lockstep_set_due(struct clock_mode *m, int64_t start, int64_t *due, size_t n)
{
	struct mode_lockstep *l = ls_of(m);

	free(l->due);
	l->due = due;
	l->ndue = n;
	l->next_due = 0;
	l->due_start = start;
}

int mode_lockstep_notify_fd(struct clock_mode *m)
{
	return ls_of(m)->notify_fd;
}

bool mode_lockstep_aborted(struct clock_mode *m, int *status, char *msg, size_t len)
{
	struct mode_lockstep *l = ls_of(m);

	/* Acquire: pairs with abort_run's release store, after which the exit
	 * status and the message are set. */
	if (!atomic_load_explicit(&l->aborted, memory_order_acquire))
		return false;
	*status = atomic_load_explicit(&l->exit_status, memory_order_relaxed);
	pthread_mutex_lock(&l->rec_lock);
	snprintf(msg, len, "%s", l->abort_msg);
	pthread_mutex_unlock(&l->rec_lock);
	return true;
}
