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
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <shmclock/lockstep.h>

#include "clockthread.h"
#include "duration.h"
#include "log.h"
#include "ros2.h"
#include "source.h"

/* Scan for dead participants at least this often (detection < 100 ms). */
#define SCAN_NS 10000000

/* OnDeath or OnStall abort: the clock stops for good; the main thread
 * prints @msg and exits with @status. */
static void abort_run(struct clockthread *ct, int status, const char *msg)
{
	pthread_mutex_lock(&ct->ls_rec_lock);
	snprintf(ct->ls_abort_msg, sizeof(ct->ls_abort_msg), "%s", msg);
	pthread_mutex_unlock(&ct->ls_rec_lock);
	atomic_store_explicit(&ct->ls_exit_status, status, memory_order_relaxed);
	/* Release: pairs with the acquire loads of ls_aborted (status, and
	 * the main thread after the eventfd): the status above is set. */
	atomic_store_explicit(&ct->ls_aborted, true, memory_order_release);
	if (ct->ls_notify_fd >= 0) {
		uint64_t one = 1;

		if (write(ct->ls_notify_fd, &one, sizeof(one)) < 0)
			log_msg(LOG_DEBUG, "lockstep: notify: %s", strerror(errno));
	}
}

static void on_event(enum shmclock_lockstep_event ev, const struct shmclock_lockstep_participant *p,
		     void *user)
{
	struct clockthread *ct = user;
	char g[64];

	duration_format(p->grant_ns, g, sizeof(g));
	switch (ev) {
	case SHMCLOCK_LOCKSTEP_JOINED:
		log_msg(LOG_INFO, "lockstep: '%s' (pid %d) joined at %s", p->who, (int)p->pid, g);
		break;
	case SHMCLOCK_LOCKSTEP_LEFT:
		log_msg(LOG_INFO, "lockstep: '%s' (pid %d) left at grant %s", p->who, (int)p->pid, g);
		break;
	case SHMCLOCK_LOCKSTEP_REFUSED:
		log_msg(LOG_WARN, "lockstep: a join as '%s' (pid %d) refused: its name is not UTF-8 "
				  "of the documented set, or its slot lock is not held by the thread "
				  "it names", p->who, (int)p->pid);
		break;
	case SHMCLOCK_LOCKSTEP_DIED:
	case SHMCLOCK_LOCKSTEP_INVALID: {
		shmclock_info_t in;
		char now[64], rec[sizeof(ct->ls_dead)];

		shmclock_writer_info(ct->w, &in);
		duration_format(in.sim_ns, now, sizeof(now));
		snprintf(rec, sizeof(rec),
			 "'%s' (pid %d) %s: last grant %s (%" PRId64 " ns), clock at %s (%" PRId64 " ns)",
			 p->who, (int)p->pid,
			 ev == SHMCLOCK_LOCKSTEP_DIED ? "died"
						      : "broke the protocol (its slot's lock word names "
							"another thread, or its grant is beyond the "
							"horizon) and counts as dead",
			 g, p->grant_ns, now, in.sim_ns);
		pthread_mutex_lock(&ct->ls_rec_lock);
		memcpy(ct->ls_dead, rec, sizeof(rec));
		ct->ls_dead_grant = p->grant_ns;
		ct->ls_dead_clock = in.sim_ns;
		ct->ls_dead_mono = shmclock_steady_now().ns;
		pthread_mutex_unlock(&ct->ls_rec_lock);
		/* Relaxed: a count; the record itself is under the lock. */
		atomic_fetch_add_explicit(&ct->ls_deaths, 1, memory_order_relaxed);
		if (ct->cfg.ls_abort) {
			char msg[sizeof(rec) + 64];

			log_msg(LOG_ERROR, "lockstep: participant %s; OnDeath abort: the clock stops", rec);
			snprintf(msg, sizeof(msg), "participant %s (OnDeath abort)", rec);
			abort_run(ct, SHMCLOCKD_EXIT_LOCKSTEP_DEATH, msg);
		} else {
			log_msg(LOG_WARN, "lockstep: participant %s; evicted, the clock goes on", rec);
		}
		break;
	}
	}
}

/* After EvictAfter of real time holding the clock: OnStall evict drops
 * the participant (as if dead, but its calls return -ECANCELED), abort
 * stops the clock. Only when the clock has waited EvictAfter since its
 * last advance (ls_commit_mono): nobody can have held it longer. */
static void check_stalls(struct clockthread *ct, int64_t sim, int64_t now)
{
	struct shmclock_lockstep_participant p[SHMCLOCK_LOCKSTEP_SLOTS];
	enum on_stall policy = config_stall_policy(&ct->cfg);
	int64_t after = ct->cfg.ls_evict_ns;
	unsigned n;

	if (policy == STALL_WAIT || !after || now - ct->ls_commit_mono < after)
		return;
	n = shmclock_lockstep_host_list(ct->ls_host, p, SHMCLOCK_LOCKSTEP_SLOTS);
	for (unsigned i = 0; i < n && i < SHMCLOCK_LOCKSTEP_SLOTS; i++) {
		char rec[sizeof(ct->ls_stalled)], held[64], at[64], g[64], ea[64];

		if (!p[i].holding_since_ns || now - p[i].holding_since_ns < after)
			continue;
		snprintf(rec, sizeof(rec), "'%s' (pid %d) held the clock at %s for %s (its grant %s; "
			 "EvictAfter %s)", p[i].who, (int)p[i].pid, duration_format(sim, at, sizeof(at)),
			 duration_format(now - p[i].holding_since_ns, held, sizeof(held)),
			 duration_format(p[i].grant_ns, g, sizeof(g)),
			 duration_format(after, ea, sizeof(ea)));
		pthread_mutex_lock(&ct->ls_rec_lock);
		memcpy(ct->ls_stalled, rec, sizeof(rec));
		pthread_mutex_unlock(&ct->ls_rec_lock);
		/* Relaxed: a count; the record is under the lock. */
		atomic_fetch_add_explicit(&ct->ls_stalls, 1, memory_order_relaxed);
		if (policy == STALL_ABORT) {
			char msg[sizeof(rec) + 64];

			log_msg(LOG_ERROR, "lockstep: %s; OnStall abort: the clock stops", rec);
			snprintf(msg, sizeof(msg), "participant %s: stalled (OnStall abort)", rec);
			abort_run(ct, SHMCLOCKD_EXIT_LOCKSTEP_STALL, msg);
			return;
		}
		if (shmclock_lockstep_host_evict_slot(ct->ls_host, p[i].slot) == 0)
			log_msg(LOG_WARN, "lockstep: %s; evicted (OnStall evict), the clock goes on", rec);
	}
}

/* `shmclockctl evict WHO` (the clock thread). */
int lockstep_evict(struct clockthread *ct, const char *who, char *err, size_t errlen)
{
	char rec[sizeof(ct->ls_stalled)];
	int r;

	if (!ct->ls_host) {
		snprintf(err, errlen, "evict is for a lockstep clock (shmclockd --lockstep N)");
		return -EINVAL;
	}
	r = shmclock_lockstep_host_evict(ct->ls_host, who);
	if (r == -ENOENT) {
		snprintf(err, errlen, "no lockstep participant of that name (status lists them)");
		return r;
	}
	if (r) {
		snprintf(err, errlen, "%s", shmclock_strerror(r));
		return r;
	}
	snprintf(rec, sizeof(rec), "'%s' evicted by hand (shmclockctl evict)", who);
	log_msg(LOG_WARN, "lockstep: %s; the clock goes on", rec);
	pthread_mutex_lock(&ct->ls_rec_lock);
	memcpy(ct->ls_stalled, rec, sizeof(rec));
	pthread_mutex_unlock(&ct->ls_rec_lock);
	return 0;
}

/* After StallAfter of real time at one time: name who holds the clock
 * (again every StallAfter while it lasts). */
static void report_stall(struct clockthread *ct, int64_t sim, int64_t now)
{
	struct shmclock_lockstep_participant p[SHMCLOCK_LOCKSTEP_SLOTS];
	unsigned n = shmclock_lockstep_host_list(ct->ls_host, p, SHMCLOCK_LOCKSTEP_SLOTS);
	char line[512], d[64], t[64];
	size_t len = 0;
	int64_t held = 0;

	/* Nobody has held the clock longer than since its last advance: the
	 * list is not even looked at before StallAfter of that. */
	if (now - ct->ls_stall_logged < ct->cfg.ls_stall_ns ||
	    now - ct->ls_commit_mono < ct->cfg.ls_stall_ns)
		return;
	line[0] = 0;
	for (unsigned i = 0; i < n && i < SHMCLOCK_LOCKSTEP_SLOTS; i++) {
		if (!p[i].holding_since_ns || now - p[i].holding_since_ns < ct->cfg.ls_stall_ns)
			continue;
		if (now - p[i].holding_since_ns > held)
			held = now - p[i].holding_since_ns;
		if (len < sizeof(line))
			len += (size_t)snprintf(line + len, sizeof(line) - len, "%s'%s' (pid %d)",
						len ? ", " : "", p[i].who, (int)p[i].pid);
	}
	if (!held)
		return;
	ct->ls_stall_logged = now;
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
static void publish_clock(struct clockthread *ct, int64_t sim, int64_t now, int64_t *deadline)
{
	if (!ct->ros2_pub || sim == ct->ls_pub_sim)
		return;
	if (now < ct->ls_pub_next) {
		if (deadline && ct->ls_pub_next < *deadline)
			*deadline = ct->ls_pub_next;
		return;
	}
	if (ct->ros2_api->publish(ct->ros2_pub, sim) < 0)
		log_msg(LOG_DEBUG, "ros2: a /clock write failed");
	ct->ls_pub_sim = sim;
	ct->ls_pub_next = now + 1000000000 / (ct->cfg.ros2_hz > 0 ? ct->cfg.ros2_hz : 100);
}

void lockstep_run(struct clockthread *ct)
{
	shmclock_lockstep_host_t *h = ct->ls_host;
	const struct shmclockd_config *c = &ct->cfg;
	bool stop = false;

	ct->ls_pub_sim = INT64_MIN;
	ct->ls_pub_next = 0;
	while (!stop) {
		bool started = atomic_load_explicit(&ct->ls_started, memory_order_relaxed);
		/* Both tokens before the work they guard: a command queued or a
		 * grant made after these loads ends the wait below at once
		 * (pairs with clockthread_submit's and the participants'
		 * increments). */
		uint32_t k = atomic_load_explicit(&ct->kick, memory_order_acquire);
		uint32_t tok = shmclock_lockstep_host_token(h);
		int64_t now, limit, min, deadline;
		bool changed = false;
		shmclock_info_t in;
		unsigned n;

		stop = clockthread_drain(ct, &changed);
		if (stop)
			break;
		now = shmclock_steady_now().ns;
		deadline = now + SCAN_NS;
		if (!ct->started) {
			/* Nothing is touched before CMD_INIT, joins included. */
			shmclock_lockstep_host_wait(h, tok, (uint32_t *)&ct->kick, k, deadline);
			continue;
		}
		shmclock_writer_info(ct->w, &in);
		if (atomic_load_explicit(&ct->ls_aborted, memory_order_relaxed)) {
			/* Stopped for good: only commands (status, stop). */
			shmclock_lockstep_host_wait(h, tok, (uint32_t *)&ct->kick, k, INT64_MAX);
			continue;
		}
		shmclock_lockstep_host_scan(h, in.sim_ns, on_event, ct, &min, &n);
		if (atomic_load_explicit(&ct->ls_aborted, memory_order_relaxed))
			continue; /* a death with OnDeath abort: no advance after it */
		if (!started && n >= (unsigned)c->ls_participants) {
			char t[64];

			started = true;
			atomic_store_explicit(&ct->ls_run_mono, now, memory_order_relaxed);
			atomic_store_explicit(&ct->ls_run_sim, in.sim_ns, memory_order_relaxed);
			/* Release: pairs with status's acquire load of ls_started;
			 * the two above are set by then. */
			atomic_store_explicit(&ct->ls_started, true, memory_order_release);
			ct->ls_commit_mono = now;
			ct->ls_commit_sim = in.sim_ns;
			log_msg(LOG_INFO, "lockstep: %u participants joined; the clock runs from %s", n,
				duration_format(in.sim_ns, t, sizeof(t)));
		}
		limit = started && n ? min : in.sim_ns;
		if (in.paused && ct->ls_step_target < limit)
			limit = ct->ls_step_target;
		if (c->source->feed == FEED_CLIENT && ct->ls_ext_target < limit)
			limit = ct->ls_ext_target;
		if (limit > in.sim_ns && c->ls_max_scale > 0) {
			/* Not sooner than the scale allows since the last advance. */
			double wait = (double)(limit - ct->ls_commit_sim) / c->ls_max_scale;
			int64_t due = wait > 9e18 ? INT64_MAX : ct->ls_commit_mono + (int64_t)wait;

			if (due > now) {
				deadline = due < deadline ? due : deadline;
				limit = in.sim_ns;
			}
		}
		if (limit > in.sim_ns) {
			int r = shmclock_writer_advance(ct->w, limit);

			if (r) {
				log_msg(LOG_ERROR, "lockstep: cannot advance the clock: %s", shmclock_strerror(r));
			} else {
				ct->ls_commit_mono = now;
				ct->ls_commit_sim = limit;
				atomic_fetch_add_explicit(&ct->ls_advances, 1, memory_order_relaxed);
				shmclock_lockstep_host_committed(h, limit);
				publish_clock(ct, limit, now, NULL);
				ct->ls_stall_logged = 0;
				continue; /* more grants may be waiting */
			}
		}
		shmclock_lockstep_host_committed(h, in.sim_ns);
		publish_clock(ct, in.sim_ns, now, &deadline);
		if (in.paused)
			ct->ls_commit_mono = now; /* a pause is nobody's stall */
		if (started && n && !in.paused) {
			report_stall(ct, in.sim_ns, now);
			check_stalls(ct, in.sim_ns, now);
			if (atomic_load_explicit(&ct->ls_aborted, memory_order_relaxed))
				continue; /* OnStall abort */
		}
		shmclock_writer_heartbeat(ct->w);
		shmclock_lockstep_host_wait(h, tok, (uint32_t *)&ct->kick, k, deadline);
	}
}

/* A member's own figures (it writes them in the participants' segment). */
static void add_figures(cJSON *m, struct clockthread *ct, unsigned slot, uint64_t *most,
			const char **most_who, const char *who)
{
	struct shmclock_lockstep_stats s;

	if (shmclock_lockstep_host_stats(ct->ls_host, slot, &s))
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
void lockstep_status(struct clockthread *ct, cJSON *st, const struct shmclockd_config *cfg,
		     int64_t sim)
{
	struct shmclock_lockstep_participant p[SHMCLOCK_LOCKSTEP_SLOTS];
	unsigned n = shmclock_lockstep_host_list(ct->ls_host, p, SHMCLOCK_LOCKSTEP_SLOTS);
	cJSON *t = cJSON_CreateObject(), *a = cJSON_CreateArray();
	int64_t mono = shmclock_steady_now().ns;
	uint64_t deaths = atomic_load_explicit(&ct->ls_deaths, memory_order_acquire);
	char buf[64];

	bool running = atomic_load_explicit(&ct->ls_started, memory_order_acquire);
	uint64_t most = 0;
	const char *most_who = NULL;

	cJSON_AddNumberToObject(t, "participants_required", cfg->ls_participants);
	cJSON_AddBoolToObject(t, "running", running);
	if (running) {
		/* Since the clock started: steps/s and the real-time factor (the
		 * acquire above pairs with the clock thread's release). */
		double secs = (double)(mono - atomic_load_explicit(&ct->ls_run_mono,
								    memory_order_relaxed)) / 1e9;

		if (secs > 0) {
			cJSON_AddNumberToObject(t, "steps_per_s",
						(double)atomic_load_explicit(&ct->ls_advances,
									     memory_order_relaxed) / secs);
			cJSON_AddNumberToObject(t, "realtime_factor",
						(double)(sim - atomic_load_explicit(&ct->ls_run_sim,
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
				(double)atomic_load_explicit(&ct->ls_advances, memory_order_relaxed));
	cJSON_AddNumberToObject(t, "deaths", (double)deaths);
	cJSON_AddNumberToObject(t, "stalls",
				(double)atomic_load_explicit(&ct->ls_stalls, memory_order_relaxed));
	/* The records the clock thread may be rewriting (a second death):
	 * under its lock, copied whole. */
	pthread_mutex_lock(&ct->ls_rec_lock);
	if (deaths) {
		cJSON_AddStringToObject(t, "last_death", ct->ls_dead);
		snprintf(buf, sizeof(buf), "%lld", (long long)ct->ls_dead_grant);
		cJSON_AddStringToObject(t, "last_death_grant_ns", buf);
		snprintf(buf, sizeof(buf), "%lld", (long long)ct->ls_dead_clock);
		cJSON_AddStringToObject(t, "last_death_clock_ns", buf);
		snprintf(buf, sizeof(buf), "%lld", (long long)ct->ls_dead_mono);
		cJSON_AddStringToObject(t, "last_death_found_mono_ns", buf);
	}
	if (ct->ls_stalled[0])
		cJSON_AddStringToObject(t, "last_eviction", ct->ls_stalled);
	pthread_mutex_unlock(&ct->ls_rec_lock);
	cJSON_AddBoolToObject(t, "aborted", atomic_load_explicit(&ct->ls_aborted, memory_order_relaxed));
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
		add_figures(m, ct, p[i].slot, &most, &most_who, p[i].who);
		cJSON_AddItemToArray(a, m);
	}
	if (most_who)
		cJSON_AddStringToObject(t, "last_to_grant_most", most_who);
	cJSON_AddItemToObject(t, "members", a);
	cJSON_AddItemToObject(st, "lockstep", t);
}
