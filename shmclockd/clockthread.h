/* SPDX-License-Identifier: MIT */
/*
 * The clock thread: the only thread that writes the segment. Other threads
 * hand it commands (command.h) through a wait-free queue (liburcu
 * wfcqueue) and wait for the result; a reply is only sent after the change
 * is committed. Between commands its clock mode (mode.h) moves the clock:
 * the thread calls the mode, never the other way round.
 */
#ifndef SHMCLOCKD_CLOCKTHREAD_H
#define SHMCLOCKD_CLOCKTHREAD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <urcu/wfcqueue.h>

#include <shmclock/writer.h>

#include "command.h"
#include "config.h"
#include "mode.h"
#include "timeline.h"
#include "ticks.h"

struct ros2;
struct ros2_api;
struct cJSON;

struct clockthread {
	shmclock_writer_t *w;
	struct shmclockd_config cfg;     /* owned by the clock thread once started */
	struct clock_mode *mode;         /* plain, lockstep or distribute */
	struct clock_env env;            /* what the mode is lent (mode.h) */
	struct __cds_wfcq_head head;
	struct cds_wfcq_tail tail;
	_Atomic uint32_t kick;           /* futex: bumped after each enqueue */
	pthread_t thread;
	bool started;                    /* CMD_INIT done: the mode moves the clock */
	struct tick_stats ticks;         /* status "ticks" */
	/* /clock publisher (ros2.c), set before clockthread_start; NULL: none. */
	struct ros2 *ros2_pub;
	const struct ros2_api *ros2_api;
	/* The ros2 or leader source lost what it follows (CMD_STALE); the
	 * clock thread's, read by status (relaxed). */
	_Atomic bool stale;
	/* eventfd, readable once an async command (clockthread_post) is done. */
	int notify_fd;
	/* The recorder (record.h), set before clockthread_start; NULL: none.
	 * The clock thread hands it each commit (rec_commits: the count it
	 * saw last) with its cause. */
	struct recorder *rec;
	uint64_t rec_commits;
	/* The recorder status shows (the main thread reads it; the clock
	 * thread sets it), and those record-stop let go of, for the main
	 * thread to close (clockthread_reap): closing writes the summary,
	 * which the clock thread never waits for. */
	_Atomic(struct recorder *) rec_shown;
	pthread_mutex_t retired_mu;
	struct recorder *retired[32];
	unsigned nretired;
	struct tl_cause cause;           /* a mode's word on its next commit (env.cause) */
};

/* Starts the thread, with @mode (the caller's: destroyed after
 * clockthread_stop). The writer must be open. The thread changes nothing
 * until a CMD_INIT is submitted: a start that fails before it leaves the
 * clock as it found it. */
int clockthread_start(struct clockthread *ct, shmclock_writer_t *w,
		      const struct shmclockd_config *cfg, struct clock_mode *mode);

/* Queues @cmd (malloc'd) without waiting: the clock thread makes
 * ct->notify_fd readable once cmd->done is CMD_DONE (read with acquire);
 * a submitter that no longer wants the result calls cmd_orphan(). A
 * change a mode schedules at an instant (a leader's) completes then,
 * while the clock thread goes on with other commands. */
void clockthread_post(struct clockthread *ct, struct cmd *cmd);

/* The submitter of a posted command goes away: it is freed now if done,
 * else when the clock thread completes it. */
void cmd_orphan(struct cmd *c);

/* Queues cmd and waits until the clock thread has applied it. Returns cmd->rc. */
int clockthread_submit(struct clockthread *ct, struct cmd *cmd);

/* Status, on the main thread: the clock thread's part ("ticks", its mode's
 * object, "stale") into @st; @cfg is the main thread's config, @in the
 * clock. */
void clockthread_status(struct clockthread *ct, struct cJSON *st, const struct shmclockd_config *cfg,
			const shmclock_info_t *in);
/* The rate simulated time ran at over the last second of running; 0:
 * unknown. */
double clockthread_scale_achieved(const struct clockthread *ct);

/* Stops and joins the thread. */
void clockthread_stop(struct clockthread *ct);

/* Closes the recorders record-stop let go of (main thread): each writes its
 * summary. */
void clockthread_reap(struct clockthread *ct);

#endif
