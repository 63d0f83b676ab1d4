/* SPDX-License-Identifier: MIT */
/*
 * The clock thread: the only thread that writes the segment. Other threads
 * hand it commands through a wait-free queue (liburcu wfcqueue) and wait
 * for the result; a reply is only sent after the change is committed.
 */
#ifndef SHMCLOCKD_CLOCKTHREAD_H
#define SHMCLOCKD_CLOCKTHREAD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <urcu/wfcqueue.h>

#include <shmclock/writer.h>

#include "config.h"
#include "latehist.h"
#include "protocol.h"

struct ros2;
struct ros2_api;
struct dist_fn;
struct shmclock_lockstep_host;


/* How CMD_INIT treats an existing clock. */
struct init_args {
	bool reset;        /* --reset: start over from the config */
	bool scale_given;  /* --scale on the command line: applied to a continued clock */
	bool paused_given; /* --paused likewise */
};

struct cmd {
	struct cds_wfcq_node node;
	struct request req;              /* the command and its argument */
	const struct shmclockd_config *arg_config;
	struct init_args arg_init;
	bool from_source;                /* sent by the time source (ros2), not a client */
	const struct dist_fn *arg_fn;    /* CMD_FUNCTION */
	bool arg_stale;                  /* CMD_STALE */
	/* results, valid once done != 0 */
	int rc;
	char err[256];
	shmclock_info_t info;
	_Atomic uint32_t done;
};

struct clockthread {
	shmclock_writer_t *w;
	struct shmclockd_config cfg;     /* owned by the clock thread once started */
	struct __cds_wfcq_head head;
	struct cds_wfcq_tail tail;
	_Atomic uint32_t kick;           /* futex: bumped after each enqueue */
	pthread_t thread;
	bool started;                    /* CMD_INIT done: the clock thread ticks */
	_Atomic uint64_t ticks, late_ticks;
	/* The rate simulated time actually ran at over the last second of
	 * running (the fixed source may fall short of TimeScale); 0: unknown. */
	_Atomic double achieved_scale;
	int64_t win_mono, win_sim;       /* clock thread only: the window's start */
	uint64_t win_epoch;
	_Atomic int64_t worst_lateness_ns;
	struct latehist lateness;        /* how late each tick ran */
	/* Lockstep (lockstep.c); host NULL: not in lockstep. Set before
	 * clockthread_start; the clock thread owns the host, status lists it. */
	struct shmclock_lockstep_host *ls_host;
	int ls_notify_fd;                /* eventfd: written when OnDeath abort fires */
	_Atomic bool ls_started;         /* Participants joined once: the clock runs
					  * (status reads it: relaxed, information) */
	int64_t ls_step_target;          /* paused: `step` lets the clock run to here */
	int64_t ls_ext_target;           /* external source: the last advance */
	int64_t ls_commit_mono, ls_commit_sim; /* the last advance (MaxScale pacing) */
	_Atomic int64_t ls_run_mono, ls_run_sim; /* when and where the clock started
					  * running (steps/s and the real-time
					  * factor in status); set before ls_started */
	int64_t ls_stall_logged;         /* CLOCK_MONOTONIC of the last stall report */
	int64_t ls_pub_sim, ls_pub_next; /* Ros2.Publish: the time last published, and
					  * when (CLOCK_MONOTONIC) the next may be */
	_Atomic uint64_t ls_advances;    /* how often the clock moved */
	_Atomic uint64_t ls_deaths;
	_Atomic bool ls_aborted;         /* OnDeath abort or OnStall abort fired */
	_Atomic int ls_exit_status;      /* ... with this exit status (86, 87) */
	_Atomic uint64_t ls_stalls;      /* participants that held for EvictAfter */
	/* The records below: the clock thread rewrites them at each death or
	 * stall while status (the main thread) reads them; ls_rec_lock
	 * guards them (never taken on the clock's fast path). */
	pthread_mutex_t ls_rec_lock;
	char ls_dead[512];               /* who died last, for status */
	int64_t ls_dead_grant, ls_dead_clock, ls_dead_mono; /* its last grant, the
					  * clock and CLOCK_MONOTONIC when found */
	char ls_stalled[512];            /* who stalled (or was evicted by hand) last */
	char ls_abort_msg[640];          /* why the clock stopped (exit message) */
	/* /clock publisher (ros2.c), set before clockthread_start; NULL: none.
	 * Publishes at ros2_hz on absolute deadlines of its own. */
	struct ros2 *ros2_pub;
	const struct ros2_api *ros2_api;
	/* Between hosts (distribute.c): set before clockthread_start. dist
	 * NULL: neither leader nor follower. */
	struct dist *dist;
	/* The ros2 or leader source lost what it follows (CMD_STALE); the
	 * clock thread's, read by status (relaxed). */
	_Atomic bool stale;
};

/* Starts the thread. The writer must be open. The thread changes nothing
 * until a CMD_INIT is submitted: a start that fails before it leaves the
 * clock as it found it. */
int clockthread_start(struct clockthread *ct, shmclock_writer_t *w,
		      const struct shmclockd_config *cfg);

/* Queues cmd and waits until the clock thread has applied it. Returns cmd->rc. */
int clockthread_submit(struct clockthread *ct, struct cmd *cmd);

/* The clock thread's own: applies every queued command; true after
 * CMD_STOP. *period_changed is set when the tick period may have. */
bool clockthread_drain(struct clockthread *ct, bool *period_changed);

/* Between hosts (distribute.c), on the clock thread. */
struct dist;
/* Creates the state for a leader (dist_publish) or a follower (FEED_LEADER):
 * NULL otherwise, or on no memory (*err set). */
struct dist *dist_create(const struct shmclockd_config *cfg, struct ros2 *r,
			 const struct ros2_api *api);
void dist_destroy(struct dist *d);
/* A leader's change (pause, resume, scale, set, step): scheduled at
 * leader time + Lead, published, applied at that instant. */
int dist_leader_change(struct clockthread *ct, struct cmd *c);
/* The leader's first function, once the clock is initialized. */
void dist_leader_start(struct clockthread *ct);
/* A follower's function from the leader (CMD_FUNCTION). */
int dist_follow_apply(struct clockthread *ct, struct cmd *c);
/* Each tick: heartbeats (leader), re-anchoring after a host clock step
 * (both). */
void dist_tick(struct clockthread *ct, int64_t now_mono);
/* What the clock follows fell silent (true) or speaks again: the segment's
 * stale mark, and with @hold the clock paused. */
int dist_stale(struct clockthread *ct, bool stale, bool hold);
/* A follower with OnLeaderLoss hold. */
bool dist_holds_on_loss(const struct clockthread *ct);
/* Status: the "distribute" object's fields. */
struct cJSON;
void dist_status(struct clockthread *ct, struct cJSON *obj);

/* The clock thread's loop in lockstep mode (lockstep.c). */
void lockstep_run(struct clockthread *ct);
/* CMD_EVICT: 0, or a negative errno with @err set. */
int lockstep_evict(struct clockthread *ct, const char *who, char *err, size_t errlen);
/* Status: the "lockstep" object (what the clock waits for, and who), with
 * @cfg the main thread's config, @sim the clock's time. */
void lockstep_status(struct clockthread *ct, struct cJSON *st, const struct shmclockd_config *cfg,
		     int64_t sim);

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

#endif
