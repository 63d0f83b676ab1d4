/* SPDX-License-Identifier: MIT */
/* The replay mode (mode_replay.h). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <shmclock/time.h>

#include "log.h"
#include "mode_plain.h"
#include "mode_replay.h"
#include "timeline.h"

/* A change is decided ahead this long before its instant: readers take
 * the slower path that long, and a pause or a seek that comes meanwhile
 * waits for the instant (settle) at most that long. */
#define HORIZON_NS 20000000LL
/* The replay starts this long after its start command. */
#define LEAD_NS 2000000LL

struct mode_replay {
	struct mode_plain p;       /* first: the plain mode's ticks and heartbeat */
	struct tl_recording rec;
	char file[1024];
	size_t next;               /* the next change to publish */
	/* This host's instant t of recorded instant m: t = A + (m - B) / speed
	 * (speed 1: t = m + A - B, exactly). A, B: where the last start,
	 * resume, seek or scale anchored it. */
	int64_t a, b;
	double speed;
	int64_t staged_at;         /* a change decided ahead for this instant; 0 none */
	struct tl_cause staged_why; /* its cause: the recording's, or a command's */
	bool paused;               /* by pause: the recording waits */
	int64_t resume_m;          /* paused: the recorded instant the replay stands at */
	uint64_t late, seeks;
	/* Status (main thread) reads these: relaxed atomics. */
	_Atomic uint64_t st_applied, st_late;
	_Atomic int64_t st_offset, st_anchor;
	_Atomic double st_speed;
	_Atomic bool st_paused;
};

static struct mode_replay *rp(struct clock_mode *m)
{
	return (struct mode_replay *)m;
}

static unsigned fn_flags(const struct tl_change *c)
{
	return (c->paused ? SHMCLOCK_FN_PAUSED : 0u) | (c->stepped ? SHMCLOCK_FN_STEPPED : 0u) |
	       (c->stale ? SHMCLOCK_FN_STALE : 0u);
}

static double scale_of(const struct tl_change *c)
{
	return (double)c->nominal_mult / 4294967296.0;
}

static void publish_status(struct mode_replay *r)
{
	atomic_store_explicit(&r->st_applied, r->next, memory_order_relaxed);
	atomic_store_explicit(&r->st_late, r->late, memory_order_relaxed);
	atomic_store_explicit(&r->st_offset, r->a - r->b, memory_order_relaxed);
	atomic_store_explicit(&r->st_anchor, r->a, memory_order_relaxed);
	atomic_store_explicit(&r->st_speed, r->speed, memory_order_relaxed);
	atomic_store_explicit(&r->st_paused, r->paused, memory_order_relaxed);
}

/* This host's instant of recorded instant @m, and back. */
static int64_t to_host(const struct mode_replay *r, int64_t m)
{
	return r->speed == 1.0 ? m + (r->a - r->b) : r->a + llround((double)(m - r->b) / r->speed);
}

static int64_t to_rec(const struct mode_replay *r, int64_t t)
{
	return r->speed == 1.0 ? t - (r->a - r->b) : r->b + llround((double)(t - r->a) * r->speed);
}

/* The replay's new anchor: this host's @a is recorded instant @b. */
static void anchor(struct mode_replay *r, int64_t a, int64_t b)
{
	r->a = a;
	r->b = b;
}

/* Publishes change @k of the recording at this host's instant @at, decided
 * ahead when @at is still to come (else late). @jump: JUMP_RECORDED (a
 * jump where the recording jumped), JUMP_NEVER (a resume, mid-piece) or
 * JUMP_ALWAYS (a seek). 0 or -errno. */
enum jump { JUMP_RECORDED, JUMP_NEVER, JUMP_ALWAYS };

static int publish(struct mode_replay *r, const struct clock_env *env, size_t k, int64_t at,
		   enum jump jump, int64_t now)
{
	const struct tl_change *c = &r->rec.changes[k];
	unsigned fl = fn_flags(c);
	int e;

	if (jump == JUMP_ALWAYS ||
	    (jump == JUMP_RECORDED && k && c->jump_epoch != r->rec.changes[k - 1].jump_epoch))
		fl |= SHMCLOCK_FN_JUMP;
	if (env->cause->kind != TL_CAUSE_CONTROL)
		env->cause->kind = TL_CAUSE_REPLAY;
	if (at > now + 50000 && !shmclock_writer_freeze_at(env->w, at)) {
		e = shmclock_writer_set_function(env->w, to_host(r, c->mono_base), c->sim_base,
						 scale_of(c) * r->speed, fl | SHMCLOCK_FN_AHEAD);
		if (!e) {
			r->staged_at = at;
			r->staged_why = *env->cause;
			return 0;
		}
		shmclock_writer_withdraw(env->w);
	}
	/* Its instant has come: committed now, re-expressed there. */
	r->late++;
	return shmclock_writer_set_function(env->w, to_host(r, c->mono_base), c->sim_base,
					    scale_of(c) * r->speed, fl);
}

static int replay_start(struct clock_mode *m, const struct clock_env *env)
{
	struct mode_replay *r = rp(m);
	const struct tl_change *c0 = &r->rec.changes[0];
	shmclock_info_t in;
	int64_t now = shmclock_steady_now().ns, s;
	int e;

	mode_plain_ops.start(m, env);
	shmclock_writer_info(env->w, &in);
	/* Where the replay starts in the recording: the recording's start,
	 * or the first function's anchor when it was made then (a fresh
	 * clock): from there the replay is exact to the nanosecond. Later,
	 * the first function re-expressed there (a continued clock; within a
	 * product's rounding, 1 ns). */
	s = tl_start_mono(&r->rec);
	r->speed = 1.0;
	anchor(r, now + LEAD_NS, s);
	/* Held at the start's value until the first instant. */
	e = shmclock_writer_set_function(env->w, now, tl_eval(c0, s), scale_of(c0),
					 SHMCLOCK_FN_PAUSED | (in.initialized ? SHMCLOCK_FN_JUMP : 0u));
	if (e)
		return e;
	r->next = 1;
	e = publish(r, env, 0, to_host(r, s), JUMP_NEVER, shmclock_steady_now().ns);
	publish_status(r);
	log_msg(LOG_INFO, "replay: %s: %zu changes of clock '%s'%s%s", r->file, r->rec.nchanges,
		r->rec.clock, r->rec.truncated ? "; " : "", r->rec.truncated ? r->rec.note : "");
	return e;
}

__extension__ typedef unsigned __int128 u128;

/* The first recorded instant at which the recording's function shows @t:
 * 0 with *k (its change) and *m, or -ENOENT. */
static int find(const struct mode_replay *r, int64_t t, size_t *k, int64_t *m)
{
	for (size_t i = 0; i < r->rec.nchanges; i++) {
		const struct tl_change *c = &r->rec.changes[i];
		int64_t end = i + 1 < r->rec.nchanges ? r->rec.changes[i + 1].mono_base : INT64_MAX;

		if (t == c->sim_base) {
			*k = i;
			*m = c->mono_base;
			return 0;
		}
		if (!c->rate || t < c->sim_base)
			continue;
		{
			/* The first instant at which the piece reaches t. */
			u128 d = (u128)((uint64_t)t - (uint64_t)c->sim_base) << 32;
			u128 q = (d + c->rate - 1) / c->rate;
			int64_t at;

			/* Instants stay within 2^62 (the loader bounds a
			 * recording's within 2^61): the offsets made from
			 * them cannot overflow. */
			if (q > (u128)(INT64_C(1) << 62) ||
			    c->mono_base + (int64_t)q > (INT64_C(1) << 62))
				continue;
			at = c->mono_base + (int64_t)q;
			if (at < end && tl_eval(c, at) == t) {
				*k = i;
				*m = at;
				return 0;
			}
		}
	}
	return -ENOENT;
}

/* A change decided ahead is committed once its instant came (at most
 * HORIZON_NS from now): the next one can be scheduled. */
static void settle(struct mode_replay *r, const struct clock_env *env)
{
	while (r->staged_at) {
		int64_t now = shmclock_steady_now().ns;

		if (now < r->staged_at) {
			struct timespec ts = { 0, r->staged_at - now };

			nanosleep(&ts, NULL);
			continue;
		}
		if (shmclock_writer_complete(env->w) != -EAGAIN) {
			r->staged_at = 0;
			/* Recorded as what it is, before the command's change. */
			clock_env_record(env, &r->staged_why);
		}
	}
}

static int replay_change(struct clock_mode *m, const struct clock_env *env, struct cmd *c,
			 const shmclock_info_t *in)
{
	struct mode_replay *r = rp(m);
	int64_t now;
	int e;

	(void)in;
	/* A command that moves the replay comes after the change decided
	 * ahead: its instant may be 20 ms off. */
	if (c->req.kind == CMD_PAUSE || c->req.kind == CMD_RESUME || c->req.kind == CMD_SET ||
	    c->req.kind == CMD_SCALE || c->req.kind == CMD_RELOAD || c->req.kind == CMD_STALE)
		settle(r, env);
	now = shmclock_steady_now().ns;
	switch (c->req.kind) {
	case CMD_STEP:
		return cmd_fail(c, -EINVAL, "a replay takes its recording's steps (pause, resume, "
					    "scale and set, a seek, act on it)");
	case CMD_SCALE: {
		/* The replay's speed: its recording at X times its pace, every
		 * rate times X, from an instant just ahead where the function
		 * in force is continued (no jump). */
		double x = c->req.scale;
		const struct tl_change *p = &r->rec.changes[r->next - 1];
		int64_t at = now + LEAD_NS, v;

		if (!(x > 0) || !isfinite(x))
			return cmd_fail(c, -EINVAL, "scale must be a finite number > 0");
		if (r->paused) {
			r->speed = x; /* resume goes on at it */
			publish_status(r);
			return 0;
		}
		if ((e = shmclock_writer_eval(env->w, at, &v)))
			return e;
		anchor(r, at, to_rec(r, at));
		r->speed = x;
		clock_env_cmd_cause(c, env->cause);
		if ((e = shmclock_writer_freeze_at(env->w, at)))
			return e;
		e = shmclock_writer_set_function(env->w, at, v, scale_of(p) * x,
						 fn_flags(p) | SHMCLOCK_FN_AHEAD);
		if (e) {
			shmclock_writer_withdraw(env->w);
			return cmd_fail(c, e, "this scale gives a rate no clock can have");
		}
		r->staged_at = at;
		r->staged_why = *env->cause;
		publish_status(r);
		return 0;
	}
	case CMD_PAUSE:
		if (r->paused)
			return 0;
		/* A change decided ahead is committed first (at its instant). */
		if ((e = shmclock_writer_pause(env->w)))
			return e;
		{
			shmclock_function_t fn;

			shmclock_writer_function(env->w, &fn);
			r->resume_m = to_rec(r, fn.mono_base);
		}
		r->staged_at = 0;
		r->paused = true;
		publish_status(r);
		return 0;
	case CMD_RESUME:
		if (!r->paused)
			return 0;
		r->paused = false;
		anchor(r, now + LEAD_NS, r->resume_m);
		clock_env_cmd_cause(c, env->cause);
		/* The piece the replay stood in, from where it stood. */
		e = publish(r, env, r->next - 1, now + LEAD_NS, JUMP_NEVER, now);
		publish_status(r);
		return e;
	case CMD_SET: {
		size_t k;
		int64_t at;
		char b1[40], b2[40];

		if (find(r, c->req.ns, &k, &at)) {
			snprintf(b1, sizeof(b1), "%" PRId64, r->rec.changes[0].sim_base);
			snprintf(b2, sizeof(b2), "%" PRId64,
				 r->rec.changes[r->rec.nchanges - 1].sim_base);
			snprintf(c->err, sizeof(c->err),
				 "seek: the recording never shows %" PRId64 " ns (its changes run from "
				 "%s to %s ns)",
				 c->req.ns, b1, b2);
			return -ERANGE;
		}
		r->seeks++;
		r->next = k + 1;
		if (r->paused) {
			/* Jump, still paused: resume goes on from there. */
			r->resume_m = at;
			e = shmclock_writer_set_function(env->w, now, c->req.ns,
							 scale_of(&r->rec.changes[k]),
							 SHMCLOCK_FN_PAUSED | SHMCLOCK_FN_JUMP);
		} else {
			anchor(r, now + LEAD_NS, at);
			clock_env_cmd_cause(c, env->cause);
			e = publish(r, env, k, now + LEAD_NS, JUMP_ALWAYS, now);
		}
		publish_status(r);
		return e;
	}
	case CMD_RELOAD:
	case CMD_INIT:
		r->p.dirty = true;
		return CLOCK_MODE_PASS;
	default:
		return CLOCK_MODE_PASS;
	}
}

static int64_t replay_tick(struct clock_mode *m, const struct clock_env *env, int64_t now)
{
	struct mode_replay *r = rp(m);
	int64_t d = mode_plain_ops.tick(m, env, now), due = INT64_MAX;

	/* What commits in this pass is the recording's (a change decided
	 * ahead commits at its completion, passes later). */
	env->cause->kind = TL_CAUSE_REPLAY;

	if (r->staged_at && now >= r->staged_at && shmclock_writer_complete(env->w) != -EAGAIN) {
		r->staged_at = 0;
		/* The commit's cause, recorded after this pass: the next
		 * change is scheduled in the next pass, with its own. */
		*env->cause = r->staged_why;
		return CLOCK_MODE_AGAIN;
	}
	while (!r->paused && !r->staged_at && r->next < r->rec.nchanges) {
		const struct tl_change *c = &r->rec.changes[r->next];
		int64_t at = to_host(r, c->mono_base);

		if (at - now > HORIZON_NS) {
			due = at - HORIZON_NS;
			break;
		}
		if (publish(r, env, r->next, at, JUMP_RECORDED, now))
			log_msg(LOG_WARN, "replay: change %zu could not be published", r->next);
		/* A change published late is committed already: recorded
		 * before the next one (one pass may publish several). */
		clock_env_record(env, env->cause);
		r->next++;
		publish_status(r);
		now = shmclock_steady_now().ns;
	}
	if (r->staged_at && r->staged_at < due)
		due = r->staged_at;
	if (d == CLOCK_MODE_AGAIN)
		return d;
	return due < d ? due : d;
}

static void replay_status(struct clock_mode *m, cJSON *st, const struct shmclockd_config *cfg,
			  const shmclock_info_t *in, bool stale)
{
	struct mode_replay *r = rp(m);
	cJSON *o = cJSON_AddObjectToObject(st, "replay");

	(void)cfg;
	(void)in;
	(void)stale;
	if (!o)
		return;
	cJSON_AddStringToObject(o, "file", r->file);
	cJSON_AddNumberToObject(o, "changes", (double)r->rec.nchanges);
	cJSON_AddNumberToObject(o, "applied",
				(double)atomic_load_explicit(&r->st_applied, memory_order_relaxed));
	cJSON_AddNumberToObject(o, "late",
				(double)atomic_load_explicit(&r->st_late, memory_order_relaxed));
	/* A string: a number loses it past 2^53. */
	{
		char b[32];

		snprintf(b, sizeof(b), "%" PRId64,
			 atomic_load_explicit(&r->st_offset, memory_order_relaxed));
		cJSON_AddStringToObject(o, "offset_ns", b);
		snprintf(b, sizeof(b), "%" PRId64,
			 atomic_load_explicit(&r->st_anchor, memory_order_relaxed));
		cJSON_AddStringToObject(o, "anchor_ns", b);
	}
	cJSON_AddNumberToObject(o, "speed", atomic_load_explicit(&r->st_speed, memory_order_relaxed));
	cJSON_AddBoolToObject(o, "paused", atomic_load_explicit(&r->st_paused, memory_order_relaxed));
	cJSON_AddBoolToObject(o, "truncated", r->rec.truncated);
}

static void replay_destroy(struct clock_mode *m)
{
	struct mode_replay *r = rp(m);

	tl_free(&r->rec);
	free(r);
}

static const struct clock_mode_ops mode_replay_ops = {
	.name = "replay",
	.start = replay_start,
	.change = replay_change,
	.tick = replay_tick,
	.status = replay_status,
	.destroy = replay_destroy,
};

int mode_replay_create(const struct shmclockd_config *c, struct clock_mode **out, char *err,
		       size_t errlen)
{
	struct mode_replay *r = calloc(1, sizeof(*r));
	char why[256];
	int e;

	if (!r) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	mode_plain_init(&r->p, NULL);
	r->p.m.ops = &mode_replay_ops;
	snprintf(r->file, sizeof(r->file), "%s", c->replay);
	if ((e = tl_load(c->replay, &r->rec, why, sizeof(why)))) {
		snprintf(err, errlen, "replay: %s: %s", c->replay, why);
		free(r);
		return e;
	}
	if (!r->rec.nchanges) {
		snprintf(err, errlen, "replay: %s: no change of the time function in it%s%s", c->replay,
			 r->rec.truncated ? "; " : "", r->rec.truncated ? r->rec.note : "");
		tl_free(&r->rec);
		free(r);
		return -ENODATA;
	}
	if (r->rec.truncated)
		log_msg(LOG_WARN, "replay: %s is cut short: %s; replaying its %zu whole changes",
			c->replay, r->rec.note, r->rec.nchanges);
	*out = &r->p.m;
	return 0;
}
