/* SPDX-License-Identifier: MIT */
/*
 * Clock modes: what moves the clock between the commands the clock thread
 * applies. One file each behind this small interface, as time sources are
 * (source.h):
 *
 *   plain       mode_plain.c       ticks at the source's period
 *   lockstep    mode_lockstep.c    to the participants' smallest grant
 *   distribute  mode_distribute.c  a leader or follower between hosts,
 *                                  ticking as plain
 *   follow      mode_follow.c      a follower of either kind of leader:
 *                                  distribute, or lockstep once it hears one
 *
 * main.c picks one at start; the clock thread (clockthread.c) calls it,
 * never the other way round: what a mode may use of the clock thread comes
 * with each call (struct clock_env), and a mode answers only by what it
 * returns. Every operation runs on the clock thread, except kick (the
 * thread that queues a command), status (the main thread) and destroy
 * (after the clock thread stopped); NULL means nothing to do.
 */
#ifndef SHMCLOCKD_MODE_H
#define SHMCLOCKD_MODE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <shmclock/writer.h>

#include "command.h"
#include "config.h"
#include "ticks.h"
#include "timeline.h"

struct cJSON;
struct recorder;
struct ros2;
struct ros2_api;

/* What the clock thread lends its mode for a call (clock thread only). */
struct clock_env {
	shmclock_writer_t *w;               /* the clock */
	const struct shmclockd_config *cfg; /* the clock thread's config */
	struct ros2 *ros2_pub;              /* the /clock publisher, or NULL */
	const struct ros2_api *ros2_api;
	const _Atomic bool *stale;          /* what the clock follows fell silent */
	struct tick_stats *ticks;           /* a ticking mode's statistics (status "ticks") */
	int notify_fd;                      /* eventfd: an async command completed */
	/* Why the mode's next commit happens, for the recording: a mode that
	 * knows (a lockstep grant and its holder, a leader's term) fills it
	 * before it commits; the clock thread takes it with the commit and
	 * resets it to TL_CAUSE_MODE. */
	struct tl_cause *cause;
	struct recorder *rec;               /* the recorder (record.h), or NULL */
};

/* How the clock thread sleeps between passes of its loop. */
struct clock_wake {
	_Atomic uint32_t *kick; /* bumped after each command is queued */
	uint32_t kick_val;      /* its value before the commands were drained */
	uint32_t token;         /* the mode's own word, read by arm */
};

/* change: the mode leaves the command to the clock thread. */
#define CLOCK_MODE_PASS 1
/* change: the mode keeps the command (a change that waits for its
 * instant) and completes it later with clock_env_complete(); the clock
 * thread goes on meanwhile. */
#define CLOCK_MODE_HELD 2
/* tick: pass again at once, without sleeping. */
#define CLOCK_MODE_AGAIN INT64_MIN

struct clock_mode;

struct clock_mode_ops {
	const char *name;
	/* CMD_INIT, once the clock is initialized or continued: 0 or -errno. */
	int (*start)(struct clock_mode *m, const struct clock_env *env);
	/* A command, before the clock thread applies it (@in: the clock
	 * before): 0 or -errno (c->err set) when the mode applied or refused
	 * it; CLOCK_MODE_PASS to leave it to the clock thread. */
	int (*change)(struct clock_mode *m, const struct clock_env *env, struct cmd *c,
		      const shmclock_info_t *in);
	/* A reload, before the clock thread's config becomes @next (env->cfg
	 * is still the old one); the keys a reload may not change are equal.
	 * 0, or -errno with a message in @err: the reload is refused and
	 * nothing has changed (the mode checks before it applies). */
	int (*reload)(struct clock_mode *m, const struct clock_env *env,
		      const struct shmclockd_config *next, char *err, size_t errlen);
	/* Before the commands are drained: read wk->token, whatever a wait
	 * after the drain must not miss. */
	void (*arm)(struct clock_mode *m, struct clock_wake *wk);
	/* Sleep until @deadline (CLOCK_MONOTONIC; INT64_MAX: none), until
	 * *wk->kick moves from wk->kick_val, or until the mode's own event.
	 * NULL: the kick word alone. */
	void (*wait)(struct clock_mode *m, const struct clock_wake *wk, int64_t deadline);
	/* After a command is queued and the kick word bumped, on the
	 * submitting thread: wake a wait that may not watch the kick word. */
	void (*kick)(struct clock_mode *m);
	/* One pass of the clock thread's loop once the clock is initialized:
	 * the deadline of the mode's next event (INT64_MAX: none), or
	 * CLOCK_MODE_AGAIN. */
	int64_t (*tick)(struct clock_mode *m, const struct clock_env *env, int64_t now);
	/* Status (main thread): the mode's own part of @st, with @cfg the main
	 * thread's config, @in the clock, @stale the clock thread's mark. */
	void (*status)(struct clock_mode *m, struct cJSON *st, const struct shmclockd_config *cfg,
		       const shmclock_info_t *in, bool stale);
	/* The clock thread stops: complete every command the mode holds
	 * (CLOCK_MODE_HELD), as refused. */
	void (*cancel)(struct clock_mode *m, const struct clock_env *env);
	/* Releases the mode, after the clock thread stopped. */
	void (*destroy)(struct clock_mode *m);
	/* True when it serves a lockstep clock without the config's Lockstep
	 * (a follower that became a lockstep host, mode_follow.c): its own
	 * participants are evicted here. Clock thread. */
	bool (*lockstep)(struct clock_mode *m);
};

/* Completes a command the mode held (CLOCK_MODE_HELD) with @rc (c->err
 * set when @rc < 0): its submitter gets the reply. Clock thread only. */
void clock_env_complete(const struct clock_env *env, struct cmd *c, int rc);

/* The recording's cause of what command @c commits: a control request
 * (its command, argument, uid and pid), the start, a reload, ... A mode
 * that commits a command's change later (decided ahead) gives it as
 * env->cause then. */
void clock_env_cmd_cause(const struct cmd *c, struct tl_cause *k);

/* Hands the recorder (if any) what was committed since it last looked,
 * with @why: a mode that commits two changes of different causes in one
 * call records the first before it makes the second. */
void clock_env_record(const struct clock_env *env, const struct tl_cause *why);

/* The clock thread's sleep for a mode without a wait of its own: until
 * @deadline or until the kick word moves. */
void clock_env_wait(const struct clock_wake *wk, int64_t deadline);

/* Marks the clock stale (what it follows cannot be trusted now) or fresh
 * again, in the segment and in status; 0 or -errno. Clock thread only. */
int clock_env_set_stale(const struct clock_env *env, bool stale);

/* The first member of each mode's state. */
struct clock_mode {
	const struct clock_mode_ops *ops;
};

static inline void clock_mode_destroy(struct clock_mode *m)
{
	if (m && m->ops->destroy)
		m->ops->destroy(m);
}

#endif
