/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <errno.h>
#include <stddef.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <shmclock/time.h>

#include "clockthread.h"
#include "duration.h"
#include "log.h"
#include "record.h"
#include "ros2.h"
#include "source.h"
#include "thread_sched.h"
#include "tsan.h" /* libshmclock/common: the queue's ordering for ThreadSanitizer */

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

void clock_env_wait(const struct clock_wake *wk, int64_t deadline)
{
	wait_until(wk->kick, wk->kick_val, deadline);
}

static void wake(_Atomic uint32_t *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, INT_MAX, NULL, NULL, 0);
}

/* A command's results are in: its submitter is told (a sync one waits on
 * done, an async one hears through the notify descriptor), or, when it
 * went away, the command is freed here. */
static void complete(shmclock_writer_t *w, int notify_fd, struct cmd *c, int rc)
{
	uint32_t old;

	c->rc = rc;
	if (rc && !c->err[0])
		cmd_fail(c, rc, shmclock_strerror(rc));
	shmclock_writer_info(w, &c->info);
	if (!c->async) {
		/* Pairs with the acquire load in clockthread_submit: the
		 * results above are visible once done is. */
		atomic_store_explicit(&c->done, CMD_DONE, memory_order_release);
		wake(&c->done);
		return;
	}
	/* Release: pairs with the acquire in cmd_orphan and in the control
	 * server's load of done (the results are visible once done is).
	 * Acquire: an orphaning submitter's last writes are ours before the
	 * free. */
	old = atomic_exchange_explicit(&c->done, CMD_DONE, memory_order_acq_rel);
	if (old == CMD_ORPHAN) {
		free(c);
		return;
	}
	{
		uint64_t one = 1;

		/* Fails only with the counter saturated: readable anyway. */
		(void)!write(notify_fd, &one, sizeof(one));
	}
}

static int set_stale(struct clockthread *ct, bool stale, bool hold);

void clock_env_cmd_cause(const struct cmd *c, struct tl_cause *k)
{
	const struct proto_cmd *pc = proto_cmd_of(c->req.kind);

	*k = (struct tl_cause){ .kind = TL_CAUSE_MODE, .uid = -1, .pid = -1 };
	if (c->from_client) {
		k->kind = TL_CAUSE_CONTROL;
		k->uid = c->uid;
		k->pid = c->pid;
		snprintf(k->command, sizeof(k->command), "%s", pc->name);
		for (size_t i = 0; i < pc->nargs && i < 1; i++) {
			const struct proto_value *v = &c->req.arg[i];

			switch (pc->args[i].kind) {
			case PARG_SCALE:
				snprintf(k->arg, sizeof(k->arg), "%.17g", v->scale);
				break;
			case PARG_TIME:
			case PARG_DURATION:
				duration_format(v->ns, k->arg, sizeof(k->arg));
				break;
			case PARG_WHO:
				snprintf(k->arg, sizeof(k->arg), "%.47s", v->who);
				break;
			case PARG_COUNT:
				snprintf(k->arg, sizeof(k->arg), "%lld", (long long)v->count);
				break;
			default:
				break;
			}
		}
		return;
	}
	switch (c->req.kind) {
	case CMD_INIT:
		k->kind = TL_CAUSE_START;
		break;
	case CMD_RELOAD:
		k->kind = TL_CAUSE_RELOAD;
		break;
	case CMD_STALE:
		k->kind = TL_CAUSE_STALE;
		break;
	case CMD_FUNCTION:
		k->kind = TL_CAUSE_LEADER;
		k->term = c->arg_fn ? c->arg_fn->term : 0;
		break;
	default:
		if (c->from_source)
			k->kind = TL_CAUSE_SOURCE;
		break;
	}
}

/* Hands the recorder what was committed since it last looked, with its
 * cause (@force: the function as it is, committed or not: the
 * recording's start). */
static void record(struct clockthread *ct, const struct tl_cause *why, bool force)
{
	shmclock_function_t fn;

	if (!ct->rec)
		return;
	shmclock_writer_function(ct->w, &fn);
	if ((fn.commits == ct->rec_commits && !force) || !fn.initialized)
		return;
	ct->rec_commits = fn.commits;
	recorder_change(ct->rec, &fn, why);
}

void clock_env_record(const struct clock_env *env, const struct tl_cause *why)
{
	struct clockthread *ct = (struct clockthread *)((char *)env - offsetof(struct clockthread, env));

	record(ct, why, false);
}

static void record_cmd(struct clockthread *ct, const struct cmd *c)
{
	struct tl_cause k;

	if (!ct->rec)
		return;
	clock_env_cmd_cause(c, &k);
	record(ct, &k, c->req.kind == CMD_INIT);
}

void clock_env_complete(const struct clock_env *env, struct cmd *c, int rc)
{
	struct clockthread *ct = (struct clockthread *)((char *)env - offsetof(struct clockthread, env));

	/* A change the mode held commits just before it completes it. */
	record_cmd(ct, c);
	complete(env->w, env->notify_fd, c, rc);
}

int clock_env_set_stale(const struct clock_env *env, bool stale)
{
	struct clockthread *ct = (struct clockthread *)((char *)env - offsetof(struct clockthread, env));

	return set_stale(ct, stale, false);
}

void cmd_orphan(struct cmd *c)
{
	/* Acq_rel: pairs with complete()'s exchange; whoever comes second
	 * frees. */
	if (atomic_exchange_explicit(&c->done, CMD_ORPHAN, memory_order_acq_rel) == CMD_DONE)
		free(c);
}

/* A reload: what the writer holds first, then the whole new config, not
 * the fields someone remembered to copy (main.c checked equal what a
 * reload may not change). */
static int apply_reload(struct clockthread *ct, struct cmd *c)
{
	const struct shmclockd_config *n = c->arg_config;
	shmclock_writer_t *w = ct->w;
	int r = 0;

	/* The mode first: it may refuse (a key live only until the clock
	 * started), and then nothing has changed. */
	if (ct->mode->ops->reload &&
	    (r = ct->mode->ops->reload(ct->mode, &ct->env, n, c->err, sizeof(c->err))))
		return r;
	if (ct->cfg.source->ops->scalable && n->scale != ct->cfg.scale)
		r = shmclock_writer_set_scale(w, n->scale);
	if (!r && (n->has_unix_zero != ct->cfg.has_unix_zero || n->unix_zero_ns != ct->cfg.unix_zero_ns))
		r = shmclock_writer_set_unix_at_zero(w, n->has_unix_zero ? &n->unix_zero_ns : NULL);
	if (r)
		return r;
	if (n->sched_priority != ct->cfg.sched_priority)
		thread_set_sched(n->sched_priority);
	ct->cfg = *n;
	return 0;
}

/* A fresh clock, or a continued one after a restart: time does not jump. */
static int init_clock(shmclock_writer_t *w, const struct shmclockd_config *c,
		      const struct init_args *a)
{
	const struct source *s = c->source;
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
		if (!r && a->scale_given && s->ops->scalable && c->scale != in.scale) {
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
	if (!r && s->ops->scalable)
		r = shmclock_writer_set_scale(w, c->scale);
	if (!r && in.paused != c->paused)
		r = c->paused ? shmclock_writer_pause(w) : shmclock_writer_resume(w);
	if (!r && c->has_unix_zero)
		r = shmclock_writer_set_unix_at_zero(w, &c->unix_zero_ns);
	if (!r)
		r = s->ops->start(w, c);
	return r;
}

/* What the clock follows fell silent (true) or speaks again: the segment's
 * stale mark, and with @hold the clock paused. */
static int set_stale(struct clockthread *ct, bool stale, bool hold)
{
	shmclock_info_t in;
	int r;

	if (stale == atomic_load_explicit(&ct->stale, memory_order_relaxed))
		return 0;
	shmclock_writer_info(ct->w, &in);
	r = shmclock_writer_set_stale(ct->w, stale);
	if (!r && stale && hold && in.initialized && !in.paused && !in.stepped)
		r = shmclock_writer_pause(ct->w);
	if (!r)
		atomic_store_explicit(&ct->stale, stale, memory_order_relaxed);
	return r;
}

/* The mode protocol.h's table names for this clock: main.c's choice
 * (open_mode), the hosts mode by role (config_validate refused the
 * combinations that would make this ambiguous). A leader source is a
 * follower's: its clients change time on the leader. */
static enum proto_mode mode_of(const struct shmclockd_config *c)
{
	if (c->source->ops->feed == FEED_LEADER)
		return PMODE_FOLLOWER;
	if (c->ls_participants)
		return PMODE_LOCKSTEP;
	if (c->dist_publish)
		return PMODE_LEADER;
	return PMODE_PLAIN;
}

/* Room to let one more recorder go (clock thread). */
static bool retire_room(struct clockthread *ct)
{
	bool room;

	pthread_mutex_lock(&ct->retired_mu);
	room = ct->nretired < sizeof(ct->retired) / sizeof(ct->retired[0]);
	pthread_mutex_unlock(&ct->retired_mu);
	return room;
}

/* Lets @r go, for the main thread to close (clock thread; retire_room()
 * said there is room). */
static void retire(struct clockthread *ct, struct recorder *r)
{
	atomic_store_explicit(&ct->rec_shown, NULL, memory_order_relaxed);
	pthread_mutex_lock(&ct->retired_mu);
	ct->retired[ct->nretired++] = r;
	pthread_mutex_unlock(&ct->retired_mu);
}

/* Applies one command; on the clock thread only. What the mode refuses
 * whatever the argument (protocol.h) first, then the source's rules, then
 * the mode's, then the clock thread's own. */
static int apply(struct clockthread *ct, struct cmd *c)
{
	const struct source *src = ct->cfg.source;
	const char *refused = cmd_refused(c->req.kind, mode_of(&ct->cfg));

	/* A follower host in lockstep (lockstep_hosts.h) evicts its own
	 * participants; the rest belongs to its leader, as any follower's. */
	if (c->req.kind == CMD_EVICT &&
	    (ct->cfg.ls_participants || (ct->mode->ops->lockstep && ct->mode->ops->lockstep(ct->mode))))
		refused = NULL;
	shmclock_writer_t *w = ct->w;
	shmclock_info_t in;
	int r = 0;

	if (refused)
		return cmd_fail(c, -EINVAL, refused);
	shmclock_writer_info(w, &in);
	if (c->req.kind == CMD_ADVANCE && src->ops->feed == FEED_ROS2 && !c->from_source)
		return cmd_fail(c, -EINVAL, "the ros2 source is fed by /clock; advance is for the "
					    "external source");
	if (c->req.kind == CMD_ADVANCE && src->ops->feed == FEED_NONE)
		return cmd_fail(c, -EINVAL, "advance is for the external source (use set or step)");
	r = ct->mode->ops->change ? ct->mode->ops->change(ct->mode, &ct->env, c, &in) : CLOCK_MODE_PASS;
	if (r == CLOCK_MODE_HELD)
		return r; /* the mode completes it */
	if (r != CLOCK_MODE_PASS)
		goto out;
	r = 0;
	switch (c->req.kind) {
	case CMD_STATUS:
	case CMD_STOP:
		break;
	case CMD_STALE:
		r = set_stale(ct, c->arg_stale, config_holds_on_leader_loss(&ct->cfg));
		break;
	case CMD_INIT:
		r = init_clock(w, &ct->cfg, &c->arg_init);
		if (!r) {
			/* A stale mark an earlier shmclockd left (it had lost
			 * what it followed, or stopped as a follower): this one
			 * keeps it where it follows something (a leader: stale
			 * until it follows, mode_distribute.c; /clock: until its
			 * first sample), else it goes. */
			shmclock_writer_info(w, &in); /* after init_clock */
			atomic_store_explicit(&ct->stale, in.stale, memory_order_relaxed);
			if (in.stale && src->ops->feed != FEED_LEADER && src->ops->feed != FEED_ROS2)
				r = set_stale(ct, false, false);
		}
		if (!r && ct->mode->ops->start)
			r = ct->mode->ops->start(ct->mode, &ct->env);
		if (!r)
			ct->started = true;
		break;
	case CMD_PAUSE:
		r = shmclock_writer_pause(w);
		break;
	case CMD_RESUME:
		r = shmclock_writer_resume(w);
		break;
	case CMD_SCALE:
		if (!src->ops->scalable)
			return cmd_fail(c, -EINVAL, "the time scale does not apply to this source (it is stepped from outside)");
		r = shmclock_writer_set_scale(w, c->req.scale);
		if (r == -EINVAL || r == -ERANGE)
			return cmd_fail(c, r, "scale must be a finite number > 0 (and between ~2.4e-10 and 2^31)");
		break;
	case CMD_SET:
		/* A stepped clock stays stepped: its first value initializes it. */
		r = src->stepped && !in.initialized ? shmclock_writer_advance(w, c->req.ns)
						    : shmclock_writer_set_time(w, c->req.ns);
		break;
	case CMD_STEP:
		if (!src->stepped && !in.paused)
			return cmd_fail(c, -EINVAL, "step needs a paused clock or a stepped source (pause first)");
		if (c->req.ns < 0)
			return cmd_fail(c, -EINVAL, "step takes a duration >= 0 (use set to go back)");
		r = shmclock_writer_step(w, c->req.ns);
		if (r == -ENODATA)
			return cmd_fail(c, r, "the clock has no time yet (set or advance it first)");
		break;
	case CMD_ADVANCE:
		r = shmclock_writer_advance(w, c->req.ns);
		/* /clock speaks: a mark left from before it spoke goes (the
		 * follower clears its own only once it marked the clock). */
		if (!r && c->from_source && atomic_load_explicit(&ct->stale, memory_order_relaxed))
			r = set_stale(ct, false, false);
		break;
	case CMD_RELOAD:
		r = apply_reload(ct, c);
		break;
	case CMD_RECORD:
		if (ct->rec) {
			snprintf(c->err, sizeof(c->err), "already recording to %s (record-stop first)",
				 recorder_path(ct->rec));
			return -EBUSY;
		}
		if (!retire_room(ct))
			return cmd_fail(c, -EAGAIN, "recordings stopped are still being closed: "
						    "try again");
		ct->rec = c->arg_rec;
		c->arg_rec = NULL; /* the clock thread's now */
		ct->env.rec = ct->rec;
		/* Release: the recorder is whole before status sees it. */
		atomic_store_explicit(&ct->rec_shown, ct->rec, memory_order_release);
		{
			struct tl_cause k;

			/* The function as it is: the recording's start. */
			clock_env_cmd_cause(c, &k);
			record(ct, &k, true);
		}
		break;
	case CMD_RECORD_STOP:
		if (!ct->rec)
			return cmd_fail(c, -ENOENT, "not recording");
		if (!retire_room(ct))
			return cmd_fail(c, -EAGAIN, "recordings stopped are still being closed: "
						    "try again");
		retire(ct, ct->rec);
		ct->rec = NULL;
		ct->env.rec = NULL;
		break;
	case CMD_FUNCTION:
	case CMD_EVICT:
	case CMD_ACK:
		/* The modes that take them apply them; the others refused
		 * them above. */
		return cmd_fail(c, -EINVAL, "not for this clock's mode");
	}
out:
	if (!r && c->req.kind == CMD_SCALE)
		ct->cfg.scale = c->req.scale; /* a reload compares TimeScale with it */
	if (r && !c->err[0])
		cmd_fail(c, r, shmclock_strerror(r));
	return r;
}

void clockthread_reap(struct clockthread *ct)
{
	struct recorder *r[sizeof(ct->retired) / sizeof(ct->retired[0])];
	unsigned n;

	pthread_mutex_lock(&ct->retired_mu);
	n = ct->nretired;
	memcpy(r, ct->retired, n * sizeof(r[0]));
	ct->nretired = 0;
	pthread_mutex_unlock(&ct->retired_mu);
	for (unsigned i = 0; i < n; i++)
		recorder_close(r[i]);
}

/* Applies every queued command; true after CMD_STOP. */
static bool drain(struct clockthread *ct)
{
	struct cds_wfcq_node *n;
	bool stop = false;

	while ((n = __cds_wfcq_dequeue_blocking(&ct->head, &ct->tail))) {
		struct cmd *c = caa_container_of(n, struct cmd, node);

		shmclock__tsan_acquire(c); /* pairs with the release in enqueue */
		int rc = apply(ct, c);

		if (c->req.kind == CMD_STOP) {
			stop = true;
			/* Nothing the mode holds outlives the thread. */
			if (ct->mode->ops->cancel)
				ct->mode->ops->cancel(ct->mode, &ct->env);
		}
		if (rc != CLOCK_MODE_HELD) {
			record_cmd(ct, c);
			/* A record command refused: its recorder goes back to
			 * the main thread, closed there (its client is told, and
			 * removes the file it made). */
			if (c->arg_rec) {
				if (retire_room(ct))
					retire(ct, c->arg_rec);
				else
					recorder_close(c->arg_rec); /* 32 waiting: never, in practice */
				c->arg_rec = NULL;
			}
			complete(ct->w, ct->notify_fd, c, rc);
		}
	}
	return stop;
}

static void *clock_main(void *arg)
{
	struct clockthread *ct = arg;
	const struct clock_mode_ops *mo = ct->mode->ops;
	int64_t period = source_period(&ct->cfg, ct->w);

	thread_set_slack(period);
	if (ct->cfg.sched_priority)
		thread_set_sched(ct->cfg.sched_priority);
	log_msg(LOG_DEBUG, "clock thread: %s source, period %lld ns", ct->cfg.source->name,
		(long long)period);
	for (;;) {
		/* Read kick before draining: an enqueue after the drain changes
		 * it and the wait below returns at once (pairs with the
		 * increment in clockthread_submit). */
		struct clock_wake wk = {
			.kick = &ct->kick,
			.kick_val = atomic_load_explicit(&ct->kick, memory_order_acquire),
		};
		int64_t deadline = INT64_MAX;

		if (mo->arm)
			mo->arm(ct->mode, &wk);
		if (drain(ct))
			break;
		/* Nothing is touched before CMD_INIT. */
		if (ct->started) {
			deadline = mo->tick(ct->mode, &ct->env, shmclock_steady_now().ns);
			if (ct->rec) {
				/* A tick's commit: the mode's word, else the
				 * source's (a fixed source's frame). */
				if (ct->cause.kind == TL_CAUSE_MODE && ct->cfg.source->ops->tick)
					ct->cause.kind = TL_CAUSE_SOURCE;
				record(ct, &ct->cause, false);
				ct->cause = (struct tl_cause){ .kind = TL_CAUSE_MODE, .uid = -1, .pid = -1 };
			}
			if (deadline == CLOCK_MODE_AGAIN)
				continue;
		}
		if (mo->wait)
			mo->wait(ct->mode, &wk, deadline);
		else
			wait_until(&ct->kick, wk.kick_val, deadline);
	}
	return NULL;
}

int clockthread_start(struct clockthread *ct, shmclock_writer_t *w,
		      const struct shmclockd_config *cfg, struct clock_mode *mode)
{
	int r;

	ct->w = w;
	ct->cfg = *cfg;
	ct->mode = mode;
	__cds_wfcq_init(&ct->head, &ct->tail);
	atomic_store(&ct->kick, 0);
	atomic_init(&ct->stale, false);
	tick_stats_init(&ct->ticks);
	ct->notify_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ct->notify_fd < 0)
		return -errno;
	ct->env = (struct clock_env){ .w = w, .cfg = &ct->cfg, .ros2_pub = ct->ros2_pub,
				      .ros2_api = ct->ros2_api, .stale = &ct->stale,
				      .ticks = &ct->ticks, .notify_fd = ct->notify_fd,
				      .cause = &ct->cause, .rec = ct->rec };
	ct->cause = (struct tl_cause){ .kind = TL_CAUSE_MODE, .uid = -1, .pid = -1 };
	ct->rec_commits = 0;
	atomic_init(&ct->rec_shown, ct->rec);
	pthread_mutex_init(&ct->retired_mu, NULL);
	ct->nretired = 0;
	ct->started = false;
	r = pthread_create(&ct->thread, NULL, clock_main, ct);
	if (r) {
		close(ct->notify_fd);
		ct->notify_fd = -1;
	}
	return -r;
}

static void enqueue(struct clockthread *ct, struct cmd *cmd, bool async)
{
	cds_wfcq_node_init(&cmd->node);
	atomic_store_explicit(&cmd->done, CMD_PENDING, memory_order_relaxed);
	cmd->async = async;
	cmd->err[0] = 0;
	/* The queue's own ordering, said to ThreadSanitizer (pairs with the
	 * acquire after the dequeue in drain). */
	shmclock__tsan_release(cmd);
	cds_wfcq_enqueue(&ct->head, &ct->tail, &cmd->node);
	/* Pairs with the acquire load of kick at the top of the clock loop. */
	atomic_fetch_add_explicit(&ct->kick, 1, memory_order_release);
	wake(&ct->kick);
	/* A mode's wait may sleep on a word of its own alone (lockstep on
	 * Linux < 5.16): it bumps that one too. */
	if (ct->mode->ops->kick)
		ct->mode->ops->kick(ct->mode);
}

void clockthread_post(struct clockthread *ct, struct cmd *cmd)
{
	enqueue(ct, cmd, true);
}

int clockthread_submit(struct clockthread *ct, struct cmd *cmd)
{
	enqueue(ct, cmd, false);
	/* Acquire: pairs with drain's release store of done; the results
	 * are visible once it is set. */
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
	clockthread_reap(ct);
	pthread_mutex_destroy(&ct->retired_mu);
	if (ct->notify_fd >= 0)
		close(ct->notify_fd);
	ct->notify_fd = -1;
}

double clockthread_scale_achieved(const struct clockthread *ct)
{
	return tick_stats_achieved(&ct->ticks);
}

void clockthread_status(struct clockthread *ct, cJSON *st, const struct shmclockd_config *cfg,
			const shmclock_info_t *in)
{
	/* Relaxed: information (the clock thread's own mark). */
	bool stale = atomic_load_explicit(&ct->stale, memory_order_relaxed);

	tick_stats_status(&ct->ticks, st);
	/* Acquire: pairs with the clock thread's release when it took the
	 * recorder. Only this (main) thread closes recorders (reap, stop), so
	 * one shown here is alive. */
	struct recorder *rec = atomic_load_explicit(&ct->rec_shown, memory_order_acquire);

	if (rec)
		recorder_status(rec, st);
	if (ct->mode->ops->status)
		ct->mode->ops->status(ct->mode, st, cfg, in, stale);
	cJSON_AddBoolToObject(st, "stale", stale);
}
