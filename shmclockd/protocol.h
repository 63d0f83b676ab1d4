/* SPDX-License-Identifier: MIT */
/*
 * The control protocol, one table (CONTROL_COMMANDS): the daemon's request
 * parser (request.c), shmclockctl's usage, argument handling and requests,
 * and the error messages listing the commands all come from it. Adding a
 * command is a line here plus its case in the clock thread.
 *
 * Wire format: one JSON object per line, {"v":1,"cmd":NAME[,KEY:ARG]},
 * where KEY is the command's argument key below.
 */
#ifndef SHMCLOCKD_PROTOCOL_H
#define SHMCLOCKD_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <shmclock/lockstep.h>

#define CONTROL_PROTOCOL 1

/* What the clock thread is asked to do: the protocol's commands, then the
 * daemon's own. */
enum cmd_kind {
	CMD_STATUS,
	CMD_PAUSE,
	CMD_RESUME,
	CMD_SCALE,   /* req.scale */
	CMD_SET,     /* req.ns: a jump */
	CMD_STEP,    /* req.ns: forward by a duration */
	CMD_ADVANCE, /* req.ns: next value of an external source */
	CMD_RELOAD,  /* arg_config */
	CMD_INIT,    /* arg_init: start or continue the clock; ticks begin after it */
	CMD_FUNCTION, /* arg_fn: a leader's time function (mode_distribute.c) */
	CMD_STALE,   /* arg_stale: what the clock follows fell silent, or speaks again */
	CMD_EVICT,   /* req.who: drop a lockstep participant */
	CMD_ACK,     /* arg_ack: a follower's acknowledgement (mode_distribute.c) */
	CMD_STOP,
};

/* The argument a command takes. */
enum proto_arg {
	PARG_NONE,
	PARG_SCALE,    /* a number from CONFIG_SCALE_MIN to CONFIG_SCALE_MAX (a JSON
			* number or string) */
	PARG_TIME,     /* seconds, "1.5s", or an ISO-8601 UTC date */
	PARG_DURATION, /* seconds or "1.5s", >= 0 */
	PARG_WHO,      /* a lockstep participant's name: a string of 1 to
			* SHMCLOCK_LOCKSTEP_WHO_MAX bytes */
};

/* X(name, kind, argument, JSON key, shmclockctl synopsis, help) */
#define CONTROL_COMMANDS(X)                                                                        \
	X("status", CMD_STATUS, PARG_NONE, NULL, "[--json]",                                      \
	  "show the clock (--json: the daemon's reply as it is)")                                  \
	X("pause", CMD_PAUSE, PARG_NONE, NULL, "", "freeze simulation time")                      \
	X("resume", CMD_RESUME, PARG_NONE, NULL, "", "let time run again from where it stopped")  \
	X("scale", CMD_SCALE, PARG_SCALE, "value", "X", "set the time scale (e.g. 2, 0.5)")       \
	X("set", CMD_SET, PARG_TIME, "time", "TIME",                                               \
	  "jump to TIME (1.5s, 250ms, seconds, or an ISO-8601 UTC date)")                          \
	X("step", CMD_STEP, PARG_DURATION, "duration", "DURATION",                                \
	  "move forward by DURATION (stepped sources, or while paused)")                           \
	X("advance", CMD_ADVANCE, PARG_TIME, "time", "TIME", "external source: publish the next value") \
	X("evict", CMD_EVICT, PARG_WHO, "who", "WHO",                                              \
	  "lockstep: drop the participant named WHO (it no longer holds the clock)")

struct proto_cmd {
	const char *name;
	enum cmd_kind kind;
	enum proto_arg arg;
	const char *key;      /* the argument's JSON key; NULL: none */
	const char *synopsis; /* shmclockctl's argument synopsis */
	const char *help;
};

#define PROTO_ENTRY(n, k, a, key, syn, help) { n, k, a, key, syn, help },
static const struct proto_cmd proto_cmds[] = { CONTROL_COMMANDS(PROTO_ENTRY) };
#undef PROTO_ENTRY
#define PROTO_NCMDS (sizeof(proto_cmds) / sizeof(proto_cmds[0]))

/* A parsed request: what a client asked. */
struct request {
	enum cmd_kind kind;
	double scale; /* PARG_SCALE */
	int64_t ns;   /* PARG_TIME, PARG_DURATION */
	char who[SHMCLOCK_LOCKSTEP_WHO_MAX + 1]; /* PARG_WHO */
};

static inline const struct proto_cmd *proto_find(const char *name)
{
	for (size_t i = 0; i < PROTO_NCMDS; i++)
		if (!strcmp(name, proto_cmds[i].name))
			return &proto_cmds[i];
	return NULL;
}

/* "status, pause, ... or advance" into buf. */
static inline const char *proto_names(char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = 0;
	for (size_t i = 0; i < PROTO_NCMDS && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s%s",
				      i == 0 ? "" : i + 1 == PROTO_NCMDS ? " or " : ", ",
				      proto_cmds[i].name);
	return buf;
}

#endif
