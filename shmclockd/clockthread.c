/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <shmclock/lockstep.h>
#include <shmclock/time.h>

#include "clockthread.h"
#include "duration.h"
#include "log.h"
#include "ros2.h"
#include "source.h"

/*
 * The kernel may fire a sleeping thread's timer up to its timer slack late
 * (50 us by default) to batch wake-ups: at 10 kHz that is half a period.
 * A tight slack costs CPU, though (measured at 100 Hz: 0.2% of a core with
 * 50 us, 0.4% with 1 us). So the slack follows the shortest period the
 * thread keeps: 1/200 of it, from 1 us to the default 50 us.
 */
static void set_slack(int64_t period_ns)
{
	int64_t slack = period_ns / 200;

	slack = slack < 1000 ? 1000 : slack > 50000 ? 50000 : slack;
	if (prctl(PR_SET_TIMERSLACK, (unsigned long)slack, 0, 0, 0) < 0)
		log_msg(LOG_DEBUG, "clock thread: timer slack: %s", strerror(errno));
}


/* Sleep until `deadline` (CLOCK_MONOTONIC, absolute) or until *word moves
 * from `val`. FUTEX_WAIT_BITSET takes an absolute deadline, so ticks are
 * scheduled exactly like clock_nanosleep(TIMER_ABSTIME) and do not drift,
 * yet a queued command wakes the thread at once. */
static void wait_until(_Atomic uint32_t *word, uint32_t val, int64_t deadline)
{
	struct timespec ts = { (time_t)(deadline / 1000000000), (long)(deadline % 1000000000) };

	/* INT64_MAX: no deadline, only a command wakes us. */
	syscall(SYS_futex, word, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, val,
		deadline == INT64_MAX ? NULL : &ts, NULL, FUTEX_BITSET_MATCH_ANY);
}

static void wake(_Atomic uint32_t *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, INT_MAX, NULL, NULL, 0);
}

static int64_t tick_period(const struct clockthread *ct)
{
	shmclock_info_t in;

	if (!ct->cfg.source->period)
		return 1000000000 / ct->cfg.hz;
	shmclock_writer_info(ct->w, &in);
	return ct->cfg.source->period(&ct->cfg, in.scale);
}

static int64_t sat_add(int64_t a, int64_t b)
{
	int64_t r;

	return __builtin_add_overflow(a, b, &r) ? (b > 0 ? INT64_MAX : INT64_MIN) : r;
}

static int fail(struct cmd *c, int rc, const char *msg)
{
	snprintf(c->err, sizeof(c->err), "%s", msg);
	return rc;
}

/* The calling (clock) thread's scheduling: SCHED_FIFO at @prio, or normal
 * for 0. Not permitted (no CAP_SYS_NICE, or RLIMIT_RTPRIO) is a warning:
 * the clock works without it, only with more jitter under CPU load. */
static void set_sched(int prio)
{
	struct sched_param sp = { .sched_priority = prio };
	int r = pthread_setschedparam(pthread_self(), prio ? SCHED_FIFO : SCHED_OTHER, &sp);

	if (r)
		log_msg(LOG_WARN, "SchedPriority %d: %s (needs CAP_SYS_NICE); the clock thread keeps "
				  "its scheduling", prio, strerror(r));
	else if (prio)
		log_msg(LOG_INFO, "clock thread: SCHED_FIFO priority %d", prio);
}

static int apply_reload(struct clockthread *ct, const struct shmclockd_config *n)
{
	shmclock_writer_t *w = ct->w;
	int r = 0;

	if (ct->cfg.source->scalable && n->scale != ct->cfg.scale)
		r = shmclock_writer_set_scale(w, n->scale);
	if (!r && (n->has_unix_zero != ct->cfg.has_unix_zero || n->unix_zero_ns != ct->cfg.unix_zero_ns))
		r = shmclock_writer_set_unix_at_zero(w, n->has_unix_zero ? &n->unix_zero_ns : NULL);
	if (r)
		return r;
	ct->cfg.scale = n->scale;
	ct->cfg.hz = n->hz;
	ct->cfg.step_ns = n->step_ns;
	ct->cfg.has_unix_zero = n->has_unix_zero;
	ct->cfg.unix_zero_ns = n->unix_zero_ns;
	/* Lockstep: every key applies on a live clock (main.c refused turning
	 * lockstep on or off). Participants only matters until the clock has
	 * started; the horizon goes to the participants' segment. */
	if (ct->ls_host) {
		if (n->ls_max_ahead_ns != ct->cfg.ls_max_ahead_ns)
			shmclock_lockstep_host_set_max_ahead(ct->ls_host, n->ls_max_ahead_ns);
		ct->cfg.ls_participants = n->ls_participants;
		ct->cfg.ls_max_scale = n->ls_max_scale;
		ct->cfg.ls_stall_ns = n->ls_stall_ns;
		ct->cfg.ls_abort = n->ls_abort;
		ct->cfg.ls_evict_ns = n->ls_evict_ns;
		ct->cfg.ls_on_stall = n->ls_on_stall;
		ct->cfg.ls_on_stall_given = n->ls_on_stall_given;
		ct->cfg.ls_max_ahead_ns = n->ls_max_ahead_ns;
	}
	if (n->sched_priority != ct->cfg.sched_priority) {
		set_sched(n->sched_priority);
		ct->cfg.sched_priority = n->sched_priority;
	}
	return 0;
}

/* A fresh clock, or a continued one after a restart: time does not jump. */
static int init_clock(shmclock_writer_t *w, const struct shmclockd_config *c,
		      const struct init_args *a)
{
	const struct source_ops *s = c->source;
	shmclock_info_t in;
	char buf[64];
	int r = 0;

	shmclock_writer_info(w, &in);
	if (in.initialized && in.source == s->id && !a->reset) {
		log_msg(LOG_INFO, "continuing clock '%s' at %s (%s, scale %g%s); --reset starts over",
			c->name, duration_format(in.sim_ns, buf, sizeof(buf)), s->name, in.scale,
			in.paused ? ", paused" : "");
		/* A continuous clock left stepped by an older shmclockd (which
		 * never cleared the mode) would stay frozen. */
		if (in.stepped != s->stepped)
			r = shmclock_writer_set_stepped(w, s->stepped);
		/* What the command line asks for explicitly is continuous and
		 * applies; the config's TimeScale and Paused describe a fresh
		 * start (--reset). */
		if (!r && a->scale_given && s->scalable && c->scale != in.scale) {
			r = shmclock_writer_set_scale(w, c->scale);
			log_msg(LOG_INFO, "--scale %g applied to the continued clock", c->scale);
		}
		if (!r && a->paused_given && !in.paused) {
			r = shmclock_writer_pause(w);
			log_msg(LOG_INFO, "--paused applied to the continued clock");
		}
		/* Labels that do not move time still follow the new config. */
		if (!r && c->has_unix_zero &&
		    (!in.has_unix_at_zero || in.unix_at_zero_ns != c->unix_zero_ns))
			r = shmclock_writer_set_unix_at_zero(w, &c->unix_zero_ns);
		return r;
	}
	if (in.initialized)
		log_msg(LOG_INFO, "resetting clock '%s' (was %s, %s)", c->name,
			shmclock_source_name(in.source), duration_format(in.sim_ns, buf, sizeof(buf)));
	r = shmclock_writer_set_source(w, s->id);
	/* The mode is the new source's: a clock that was stepped (fixed,
	 * external) runs again under a continuous source. */
	if (!r)
		r = shmclock_writer_set_stepped(w, s->stepped);
	if (!r && s->scalable)
		r = shmclock_writer_set_scale(w, c->scale);
	if (!r && in.paused != c->paused)
		r = c->paused ? shmclock_writer_pause(w) : shmclock_writer_resume(w);
	if (!r && c->has_unix_zero)
		r = shmclock_writer_set_unix_at_zero(w, &c->unix_zero_ns);
	if (!r)
		r = s->start(w, c);
	return r;
}

/* Over windows of about a second of running time: the rate simulated time
 * really advanced at. Paused, or jumped: a new window. */
static void measure_scale(struct clockthread *ct, int64_t now)
{
	shmclock_info_t in;

	shmclock_writer_info(ct->w, &in);
	if (!in.initialized || in.paused || in.jump_epoch != ct->win_epoch || !ct->win_mono) {
		ct->win_mono = now;
		ct->win_sim = in.sim_ns;
		ct->win_epoch = in.jump_epoch;
		if (in.paused)
			atomic_store_explicit(&ct->achieved_scale, 0.0, memory_order_relaxed);
		return;
	}
	if (now - ct->win_mono < 1000000000)
		return;
	/* Relaxed: a statistic for status. */
	atomic_store_explicit(&ct->achieved_scale,
			      (double)(in.sim_ns - ct->win_sim) / (double)(now - ct->win_mono),
			      memory_order_relaxed);
	ct->win_mono = now;
	ct->win_sim = in.sim_ns;
}

/* Applies one command; on the clock thread only. */
static int apply(struct clockthread *ct, struct cmd *c)
{
	const struct source_ops *src = ct->cfg.source;
	shmclock_writer_t *w = ct->w;
	shmclock_info_t in;
	int r = 0;

	shmclock_writer_info(w, &in);
	switch (c->req.kind) {
	case CMD_PAUSE:
	case CMD_RESUME:
	case CMD_SCALE:
	case CMD_SET:
	case CMD_STEP:
	case CMD_ADVANCE:
		if (src->feed == FEED_LEADER)
			return fail(c, -EINVAL, "this clock follows a leader on another host: change "
						"time there (status shows which)");
		if (ct->dist && c->req.kind != CMD_ADVANCE)
			return dist_leader_change(ct, c);
		break;
	default:
		break;
	}
	switch (c->req.kind) {
	case CMD_STATUS:
	case CMD_STOP:
		break;
	case CMD_FUNCTION:
		r = dist_follow_apply(ct, c);
		break;
	case CMD_STALE:
		r = dist_stale(ct, c->arg_stale, dist_holds_on_loss(ct));
		break;
	case CMD_INIT:
		r = init_clock(w, &ct->cfg, &c->arg_init);
		/* Lockstep holds the clock at a time from the start: an
		 * external clock without StartTime starts at 0. */
		if (!r && ct->ls_host) {
			shmclock_writer_info(w, &in);
			if (!in.initialized)
				r = shmclock_writer_advance(w, 0);
			shmclock_writer_info(w, &in);
			ct->ls_ext_target = in.sim_ns;
			ct->ls_step_target = INT64_MIN;
		}
		if (!r) {
			ct->started = true;
			dist_leader_start(ct);
		}
		break;
	case CMD_PAUSE:
		r = shmclock_writer_pause(w);
		break;
	case CMD_RESUME:
		r = shmclock_writer_resume(w);
		break;
	case CMD_SCALE:
		if (ct->ls_host)
			return fail(c, -EINVAL, "in lockstep the participants' grants set the pace "
						"(MaxScale limits it)");
		if (!src->scalable)
			return fail(c, -EINVAL, "the time scale does not apply to this source (it is stepped from outside)");
		r = shmclock_writer_set_scale(w, c->req.scale);
		if (r == -EINVAL || r == -ERANGE)
			return fail(c, r, "scale must be a finite number > 0 (and between ~2.4e-10 and 2^31)");
		if (!r)
			ct->cfg.scale = c->req.scale;
		break;
	case CMD_SET:
		if (ct->ls_host)
			return fail(c, -EINVAL, "set is refused in lockstep: the participants' grants "
						"move time (pause, then step)");
		/* A stepped clock stays stepped: its first value initializes it. */
		r = src->stepped && !in.initialized ? shmclock_writer_advance(w, c->req.ns)
						    : shmclock_writer_set_time(w, c->req.ns);
		break;
	case CMD_STEP:
		if (ct->ls_host) {
			if (!in.paused)
				return fail(c, -EINVAL, "in lockstep, step needs a paused clock (pause "
							"first); it then advances within the grants");
			if (c->req.ns < 0)
				return fail(c, -EINVAL, "step takes a duration >= 0");
			ct->ls_step_target = sat_add(ct->ls_step_target > in.sim_ns
							      ? ct->ls_step_target : in.sim_ns,
							      c->req.ns);
			break;
		}
		if (!src->stepped && !in.paused)
			return fail(c, -EINVAL, "step needs a paused clock or a stepped source (pause first)");
		if (c->req.ns < 0)
			return fail(c, -EINVAL, "step takes a duration >= 0 (use set to go back)");
		r = shmclock_writer_step(w, c->req.ns);
		if (r == -ENODATA)
			return fail(c, r, "the clock has no time yet (set or advance it first)");
		break;
	case CMD_ADVANCE:
		if (src->feed == FEED_ROS2 && !c->from_source)
			return fail(c, -EINVAL, "the ros2 source is fed by /clock; advance is for the "
						"external source");
		if (src->feed == FEED_NONE)
			return fail(c, -EINVAL, "advance is for the external source (use set or step)");
		if (ct->ls_host) {
			/* The clock follows within the grants (lockstep.c). */
			if (c->req.ns < ct->ls_ext_target)
				return fail(c, -EINVAL, "in lockstep, advance cannot go back (the "
							"participants have granted ahead)");
			ct->ls_ext_target = c->req.ns;
			break;
		}
		r = shmclock_writer_advance(w, c->req.ns);
		break;
	case CMD_RELOAD:
		r = apply_reload(ct, c->arg_config);
		break;
	case CMD_EVICT:
		r = lockstep_evict(ct, c->req.who, c->err, sizeof(c->err));
		break;
	}
	if (r && !c->err[0])
		fail(c, r, shmclock_strerror(r));
	return r;
}

bool clockthread_drain(struct clockthread *ct, bool *period_changed)
{
	struct cds_wfcq_node *n;
	bool stop = false;

	while ((n = __cds_wfcq_dequeue_blocking(&ct->head, &ct->tail))) {
		struct cmd *c = caa_container_of(n, struct cmd, node);

		c->rc = apply(ct, c);
		shmclock_writer_info(ct->w, &c->info);
		if (c->req.kind == CMD_STOP)
			stop = true;
		if (c->req.kind == CMD_SCALE || c->req.kind == CMD_RELOAD || c->req.kind == CMD_INIT)
			*period_changed = true;
		/* Pairs with the acquire load in clockthread_submit: the
		 * results above are visible once done is. */
		atomic_store_explicit(&c->done, 1, memory_order_release);
		wake(&c->done);
	}
	return stop;
}

static void *clock_main(void *arg)
{
	struct clockthread *ct = arg;
	int64_t next = shmclock_steady_now().ns, period = tick_period(ct);
	/* /clock: a rate in real time of its own, whatever the scale. */
	int64_t pub_next = next;
	int64_t pub_period = 1000000000 / (ct->cfg.ros2_hz > 0 ? ct->cfg.ros2_hz : 100);
	int stop = 0;

	set_slack(ct->ros2_pub && pub_period < period ? pub_period : period);
	if (ct->cfg.sched_priority)
		set_sched(ct->cfg.sched_priority);
	log_msg(LOG_DEBUG, "clock thread: %s source, period %lld ns", ct->cfg.source->name,
		(long long)period);
	if (ct->ls_host) {
		lockstep_run(ct);
		return NULL;
	}
	while (!stop) {
		/* Read kick before draining: an enqueue after the drain changes
		 * it and the wait below returns at once (pairs with the
		 * increment in clockthread_submit). */
		uint32_t k = atomic_load_explicit(&ct->kick, memory_order_acquire);
		bool changed = false;
		int64_t now;

		stop = clockthread_drain(ct, &changed);
		if (changed) {
			period = tick_period(ct);
			set_slack(ct->ros2_pub && pub_period < period ? pub_period : period);
		}
		now = shmclock_steady_now().ns;
		if (!ct->started) {
			/* Nothing is touched before CMD_INIT. */
			next = pub_next = now;
			if (!stop)
				wait_until(&ct->kick, k, INT64_MAX);
			continue;
		}
		if (ct->ros2_pub && now >= pub_next) {
			shmclock_info_t in;

			shmclock_writer_info(ct->w, &in);
			if (in.initialized && ct->ros2_api->publish(ct->ros2_pub, in.sim_ns) < 0)
				log_msg(LOG_DEBUG, "ros2: a /clock write failed");
			pub_next += pub_period;
			if (pub_next <= now)
				pub_next += ((now - pub_next) / pub_period + 1) * pub_period;
		}
		if (now >= next) {
			int64_t late = now - next;

			if (late > atomic_load_explicit(&ct->worst_lateness_ns, memory_order_relaxed))
				atomic_store_explicit(&ct->worst_lateness_ns, late, memory_order_relaxed);
			latehist_add(&ct->lateness, late);
			if (ct->cfg.source->tick)
				ct->cfg.source->tick(ct->w, &ct->cfg, now);
			if (ct->dist)
				dist_tick(ct, now);
			measure_scale(ct, now);
			shmclock_writer_heartbeat(ct->w);
			atomic_fetch_add_explicit(&ct->ticks, 1, memory_order_relaxed);
			next += period;
			if (next <= now) {
				/* Fell behind by whole periods: skip them rather than
				 * burst (a fixed source would otherwise race ahead). */
				int64_t missed = (now - next) / period + 1;

				atomic_fetch_add_explicit(&ct->late_ticks, (uint64_t)missed,
							  memory_order_relaxed);
				next += missed * period;
			}
			continue;
		}
		if (!stop)
			wait_until(&ct->kick, k, ct->ros2_pub && pub_next < next ? pub_next : next);
	}
	return NULL;
}

int clockthread_start(struct clockthread *ct, shmclock_writer_t *w,
		      const struct shmclockd_config *cfg)
{
	int r;

	ct->w = w;
	ct->cfg = *cfg;
	__cds_wfcq_init(&ct->head, &ct->tail);
	atomic_store(&ct->kick, 0);
	atomic_init(&ct->ticks, 0);
	atomic_init(&ct->late_ticks, 0);
	atomic_init(&ct->worst_lateness_ns, 0);
	atomic_init(&ct->achieved_scale, 0.0);
	pthread_mutex_init(&ct->ls_rec_lock, NULL);
	if (ct->ls_host)
		shmclock_lockstep_host_set_max_ahead(ct->ls_host, cfg->ls_max_ahead_ns);
	ct->started = false;
	ct->win_mono = 0;
	for (int i = 0; i < LATEHIST_N; i++)
		atomic_init(&ct->lateness.n[i], 0);
	r = pthread_create(&ct->thread, NULL, clock_main, ct);
	return -r;
}

int clockthread_submit(struct clockthread *ct, struct cmd *cmd)
{
	cds_wfcq_node_init(&cmd->node);
	atomic_store_explicit(&cmd->done, 0, memory_order_relaxed);
	cmd->err[0] = 0;
	cds_wfcq_enqueue(&ct->head, &ct->tail, &cmd->node);
	/* Pairs with the acquire load of kick at the top of the clock loop. */
	atomic_fetch_add_explicit(&ct->kick, 1, memory_order_release);
	wake(&ct->kick);
	/* In lockstep the clock thread may sleep on the participants' word
	 * alone (no futex_waitv: Linux < 5.16): bump that one too. */
	if (ct->ls_host)
		shmclock_lockstep_host_kick(ct->ls_host);
	while (!atomic_load_explicit(&cmd->done, memory_order_acquire)) {
		struct timespec ts = { 1, 0 };

		syscall(SYS_futex, &cmd->done, FUTEX_WAIT | FUTEX_PRIVATE_FLAG, 0, &ts, NULL, 0);
	}
	return cmd->rc;
}

void clockthread_stop(struct clockthread *ct)
{
	struct cmd c = { .req.kind = CMD_STOP };

	clockthread_submit(ct, &c);
	pthread_join(ct->thread, NULL);
}

/* The clock thread's ticks: counts, lateness quantiles, and the non-empty
 * buckets ([lowest ns, count] pairs) so a client can diff two replies. */
static void add_ticks(cJSON *st, const struct clockthread *ct)
{
	uint64_t counts[LATEHIST_N];
	cJSON *t = cJSON_CreateObject(), *hist = cJSON_CreateArray();
	int64_t worst;

	latehist_copy(&ct->lateness, counts);
	/* Relaxed: statistics, nothing is ordered by them. */
	cJSON_AddNumberToObject(t, "count",
				(double)atomic_load_explicit(&ct->ticks, memory_order_relaxed));
	cJSON_AddNumberToObject(t, "skipped",
				(double)atomic_load_explicit(&ct->late_ticks, memory_order_relaxed));
	/* A quantile is its bucket's upper bound, which may exceed the exact
	 * maximum in that bucket: capped there (status once showed p99 1.835 ms
	 * above a max of 1.706 ms). */
	worst = atomic_load_explicit(&ct->worst_lateness_ns, memory_order_relaxed);
	cJSON_AddNumberToObject(t, "late_p50_ns", (double)latehist_quantile_max(counts, 0.5, worst));
	cJSON_AddNumberToObject(t, "late_p99_ns", (double)latehist_quantile_max(counts, 0.99, worst));
	cJSON_AddNumberToObject(t, "late_p999_ns",
				(double)latehist_quantile_max(counts, 0.999, worst));
	cJSON_AddNumberToObject(t, "late_max_ns", (double)worst);
	for (int i = 0; i < LATEHIST_N; i++) {
		if (counts[i]) {
			cJSON *pair = cJSON_CreateArray();

			cJSON_AddItemToArray(pair, cJSON_CreateNumber((double)latehist_lo(i)));
			cJSON_AddItemToArray(pair, cJSON_CreateNumber((double)counts[i]));
			cJSON_AddItemToArray(hist, pair);
		}
	}
	cJSON_AddItemToObject(t, "late_hist", hist);
	cJSON_AddItemToObject(st, "ticks", t);
}

double clockthread_scale_achieved(const struct clockthread *ct)
{
	/* Relaxed: a statistic. */
	return atomic_load_explicit(&ct->achieved_scale, memory_order_relaxed);
}

void clockthread_status(struct clockthread *ct, cJSON *st, const struct shmclockd_config *cfg,
			const shmclock_info_t *in)
{
	add_ticks(st, ct);
	if (ct->ls_host)
		lockstep_status(ct, st, cfg, in->sim_ns);
	if (ct->dist) {
		cJSON *t = cJSON_CreateObject();

		dist_status(ct, t);
		cJSON_AddItemToObject(st, "distribute", t);
	}
	cJSON_AddBoolToObject(st, "stale", atomic_load_explicit(&ct->stale, memory_order_relaxed));
}
