/* SPDX-License-Identifier: MIT */
/*
 * A command for the clock thread: what the control side, the ROS 2 glue
 * and main.c hand it (clockthread_submit), and what a clock mode sees of
 * it (mode.h). Results are valid once done is set.
 */
#ifndef SHMCLOCKD_COMMAND_H
#define SHMCLOCKD_COMMAND_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <urcu/wfcqueue.h>

#include <shmclock/writer.h>

#include "config.h"
#include "protocol.h"

struct dist_fn;
struct recorder;
struct dist_ack;

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
	bool from_client;                /* sent by a control client: */
	uint32_t uid;                    /* its uid and pid, for the recording's causes */
	int32_t pid;
	const struct dist_fn *arg_fn;    /* CMD_FUNCTION */
	const struct dist_ack *arg_ack;  /* CMD_ACK */
	bool arg_stale;                  /* CMD_STALE */
	struct recorder *arg_rec;        /* CMD_RECORD: the recorder to take (the clock
					  * thread's once the command is applied) */
	/* Queued by clockthread_post: nobody waits on done; the clock
	 * thread signals its notify descriptor instead. */
	bool async;
	/* results, valid once done != 0 */
	int rc;
	char err[256];
	shmclock_info_t info;
	/* CMD_PENDING until applied, then CMD_DONE; an async command whose
	 * submitter went away is CMD_ORPHAN, freed by whichever side comes
	 * last (cmd_orphan, clockthread.c's completion). */
	_Atomic uint32_t done;
};

#define CMD_PENDING 0u
#define CMD_DONE 1u
#define CMD_ORPHAN 2u

/* A client's change of the clock's function (pause, resume, scale, set,
 * step): a leader schedules it; a follower refuses it. protocol.h's
 * "changes time" column. */
static inline bool cmd_changes_time(enum cmd_kind k)
{
	return proto_cmd_of(k)->changes_time;
}

/* Why a clock in mode @m refuses every command of kind @k, whatever its
 * argument (protocol.h's modes column): the error a client gets; NULL when
 * the mode takes the command (its own rules and the source's may still
 * refuse it). The clock thread asks before its mode sees the command. */
static inline const char *cmd_refused(enum cmd_kind k, enum proto_mode m)
{
	return proto_cmd_of(k)->refused[m];
}

/* Refuses @c: @msg into c->err; returns @rc. */
static inline int cmd_fail(struct cmd *c, int rc, const char *msg)
{
	snprintf(c->err, sizeof(c->err), "%s", msg);
	return rc;
}

#endif
