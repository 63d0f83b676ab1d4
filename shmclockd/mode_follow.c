/* SPDX-License-Identifier: MIT */
/* A follower of either kind of leader (mode_follow.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <shmclock/shmclock.h>

#include "lockstep_hosts.h"
#include "log.h"
#include "mode_distribute.h"
#include "mode_follow.h"
#include "mode_lockstep.h"

struct mode_follow {
	struct clock_mode m;
	struct clock_mode *dist;
	/* The lockstep follower host, once made (clock thread); published
	 * for the main thread (status, aborts) with release, pairs with the
	 * acquire in mode_follow_lockstep. */
	_Atomic(struct clock_mode *) ls;
	/* The LockstepTime reader, until the lockstep mode takes it over
	 * (NULL: none could be made, this follower stays a hosts one). */
	struct ls_hosts *probe;
	shmclock_writer_t *w;
	int notify_fd;
	bool failed; /* the lockstep mode could not be made: said once (clock
		      * thread) */
	bool other_said; /* a leader without lockstep heard after: said once */
	/* Whether it may still become a lockstep host: a time heard wakes the
	 * clock thread only while it may (once it follows a plain leader, or
	 * could not switch, a leader's every advance would be a futile pass). */
	atomic_bool deciding;
	/* The clock thread's kick word (from its first arm): what a time
	 * heard bumps, so the switch is not left for the next tick. */
	_Atomic(_Atomic uint32_t *) kick;
};

static struct mode_follow *fw_of(struct clock_mode *m)
{
	return (struct mode_follow *)m;
}

/* The mode that runs now (clock thread: the only writer of ls). */
static struct clock_mode *active(struct mode_follow *f)
{
	struct clock_mode *ls = atomic_load_explicit(&f->ls, memory_order_relaxed);

	return ls ? ls : f->dist;
}

/* The DDS thread: a lockstep time came. */
static void on_heard(void *ctx)
{
	struct mode_follow *f = ctx;
	/* Acquire: pairs with arm's release store of the word. */
	_Atomic uint32_t *k = atomic_load_explicit(&f->kick, memory_order_acquire);

	if (!k || !atomic_load_explicit(&f->deciding, memory_order_relaxed))
		return; /* before the first pass: it looks anyway */
	/* Release, as clockthread_submit's increment: the clock thread's
	 * acquire load of the word before it sleeps sees it, or the wake
	 * finds it asleep. */
	atomic_fetch_add_explicit(k, 1, memory_order_release);
	syscall(SYS_futex, k, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, INT_MAX, NULL, NULL, 0);
}

static int fw_start(struct clock_mode *m, const struct clock_env *env)
{
	struct clock_mode *a = active(fw_of(m));

	return a->ops->start ? a->ops->start(a, env) : 0;
}

static int fw_change(struct clock_mode *m, const struct clock_env *env, struct cmd *c,
		     const shmclock_info_t *in)
{
	struct mode_follow *f = fw_of(m);
	struct clock_mode *a = active(f);

	/* A lockstep host now: what the hosts-mode side still hears is not
	 * its leader's (a follower host configured with Lockstep does not
	 * listen to it at all). A function from a leader without lockstep
	 * is said once; the silence of none is no news. */
	if (a != f->dist && c->from_source &&
	    (c->req.kind == CMD_FUNCTION || c->req.kind == CMD_STALE || c->req.kind == CMD_ACK)) {
		if (c->req.kind != CMD_FUNCTION)
			return 0;
		if (!f->other_said) {
			f->other_said = true;
			log_msg(LOG_WARN, "follow: leader %s of this clock runs without lockstep: not "
					  "followed, this host is a lockstep host",
				c->arg_fn->leader);
		}
		return cmd_fail(c, -EPROTO, "this host is a lockstep host");
	}
	return a->ops->change ? a->ops->change(a, env, c, in) : CLOCK_MODE_PASS;
}

static int fw_reload(struct clock_mode *m, const struct clock_env *env,
		     const struct shmclockd_config *next, char *err, size_t errlen)
{
	struct clock_mode *a = active(fw_of(m));

	return a->ops->reload ? a->ops->reload(a, env, next, err, errlen) : 0;
}

static void fw_arm(struct clock_mode *m, struct clock_wake *wk)
{
	struct mode_follow *f = fw_of(m);
	struct clock_mode *a = active(f);

	/* Release: pairs with on_heard's acquire load. */
	atomic_store_explicit(&f->kick, wk->kick, memory_order_release);
	if (a->ops->arm)
		a->ops->arm(a, wk);
}

static void fw_wait(struct clock_mode *m, const struct clock_wake *wk, int64_t deadline)
{
	struct clock_mode *a = active(fw_of(m));

	if (a->ops->wait)
		a->ops->wait(a, wk, deadline);
	else
		clock_env_wait(wk, deadline);
}

static void fw_kick(struct clock_mode *m)
{
	/* Any thread, after the kick word's increment (enqueue). Either this
	 * load sees the lockstep mode, whose kick wakes its wait (on Linux
	 * before 5.16 it sleeps on the participants' word alone), or the
	 * clock thread, publishing it, then reads the kick word as
	 * incremented and drains the command before it waits: the fences
	 * (seq_cst, this one and become_lockstep's) forbid both missing the
	 * other's store. Acquire: the mode whole, as the release that
	 * published it. */
	struct mode_follow *f = fw_of(m);
	struct clock_mode *a;

	atomic_thread_fence(memory_order_seq_cst);
	a = atomic_load_explicit(&f->ls, memory_order_acquire);

	if (!a)
		a = f->dist;
	if (a->ops->kick)
		a->ops->kick(a);
}

/* Its leader runs lockstep: from now on a follower host of that clock.
 * true when it switched. */
static bool become_lockstep(struct mode_follow *f, const struct clock_env *env)
{
	char leader[128], err[256];
	struct clock_mode *ls;
	int r;

	if (!f->probe || f->failed || !ls_hosts_heard_leader(f->probe, leader, sizeof(leader)))
		return false;
	r = mode_lockstep_adopt(f->w, env->cfg, f->probe, f->notify_fd, &ls, err, sizeof(err));
	if (r) {
		/* The probe is still ours: it is released with the mode. */
		f->failed = true;
		atomic_store_explicit(&f->deciding, false, memory_order_relaxed);
		log_msg(LOG_ERROR, "follow: leader %s runs lockstep, but this host cannot be one of "
				   "its hosts: %s", leader, err);
		return false;
	}
	f->probe = NULL;
	/* Release: the mode whole before the main thread (status, aborts)
	 * or a kick uses it. The fence: pairs with fw_kick's (before the
	 * clock thread's next load of the kick word, at the loop's top). */
	atomic_store_explicit(&f->ls, ls, memory_order_release);
	atomic_thread_fence(memory_order_seq_cst);
	atomic_store_explicit(&f->deciding, false, memory_order_relaxed);
	/* Its start, as CMD_INIT's for a follower host: the clock stepped,
	 * held until the leader's time and its own participants move it. */
	if (ls->ops->start && (r = ls->ops->start(ls, env)))
		log_msg(LOG_ERROR, "follow: the clock cannot be held for lockstep: %s",
			shmclock_strerror(r));
	log_msg(LOG_INFO, "follow: leader %s runs lockstep: this host is one of its hosts from now "
			  "on (participants join /dev/shm/shmclock-lockstep.%s)", leader,
		env->cfg->name);
	return true;
}

static int64_t fw_tick(struct clock_mode *m, const struct clock_env *env, int64_t now)
{
	struct mode_follow *f = fw_of(m);
	struct clock_mode *ls = atomic_load_explicit(&f->ls, memory_order_relaxed);

	if (!ls && !f->failed && mode_distribute_following(f->dist))
		atomic_store_explicit(&f->deciding, false, memory_order_relaxed); /* a plain leader's */
	else if (!ls && !f->failed && become_lockstep(f, env))
		return CLOCK_MODE_AGAIN; /* armed anew for the lockstep wait */
	ls = active(f);
	return ls->ops->tick(ls, env, now);
}

static void fw_status(struct clock_mode *m, struct cJSON *st, const struct shmclockd_config *cfg,
		      const shmclock_info_t *in, bool stale)
{
	struct clock_mode *a = mode_follow_lockstep(m);

	if (!a)
		a = fw_of(m)->dist;
	if (a->ops->status)
		a->ops->status(a, st, cfg, in, stale);
}

static void fw_cancel(struct clock_mode *m, const struct clock_env *env)
{
	struct mode_follow *f = fw_of(m);
	struct clock_mode *ls = atomic_load_explicit(&f->ls, memory_order_relaxed);

	/* Both: the hosts follower may hold a command from before. */
	if (f->dist->ops->cancel)
		f->dist->ops->cancel(f->dist, env);
	if (ls && ls->ops->cancel)
		ls->ops->cancel(ls, env);
}

static bool fw_lockstep(struct clock_mode *m)
{
	struct mode_follow *f = fw_of(m);

	return atomic_load_explicit(&f->ls, memory_order_relaxed) != NULL;
}

static void fw_destroy(struct clock_mode *m)
{
	struct mode_follow *f = fw_of(m);

	clock_mode_destroy(atomic_load_explicit(&f->ls, memory_order_relaxed));
	ls_hosts_close(f->probe);
	clock_mode_destroy(f->dist);
	if (f->notify_fd >= 0)
		close(f->notify_fd);
	free(f);
}

static const struct clock_mode_ops mode_follow_ops = {
	.name = "follow",
	.start = fw_start,
	.change = fw_change,
	.reload = fw_reload,
	.arm = fw_arm,
	.wait = fw_wait,
	.kick = fw_kick,
	.tick = fw_tick,
	.status = fw_status,
	.cancel = fw_cancel,
	.destroy = fw_destroy,
	.lockstep = fw_lockstep,
};

int mode_follow_create(shmclock_writer_t *w, const struct shmclockd_config *c, struct ros2 *r,
		       const struct ros2_api *api, struct clock_mode **out, char *err,
		       size_t errlen)
{
	struct mode_follow *f = calloc(1, sizeof(*f));
	char why[256];

	*out = NULL;
	if (!f) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	f->m.ops = &mode_follow_ops;
	f->w = w;
	atomic_init(&f->deciding, true);
	f->notify_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	f->dist = mode_distribute_create(c, r, api);
	if (f->notify_fd < 0 || !f->dist) {
		snprintf(err, errlen, "%s", f->notify_fd < 0 ? strerror(errno) : "out of memory");
		fw_destroy(&f->m);
		return -ENOMEM;
	}
	/* Without the lockstep topics (a module or permissions without
	 * them) it is a hosts follower only, as before; said once. */
	if (ls_hosts_probe(c, r, api, on_heard, f, &f->probe, why, sizeof(why))) {
		f->probe = NULL;
		log_msg(LOG_WARN, "follow: a leader in lockstep will not be followed: %s", why);
	}
	*out = &f->m;
	return 0;
}

struct clock_mode *mode_follow_distribute(struct clock_mode *m)
{
	return fw_of(m)->dist;
}

struct clock_mode *mode_follow_lockstep(struct clock_mode *m)
{
	return atomic_load_explicit(&fw_of(m)->ls, memory_order_acquire);
}

int mode_follow_notify_fd(struct clock_mode *m)
{
	return fw_of(m)->notify_fd;
}
