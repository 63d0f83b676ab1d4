/* SPDX-License-Identifier: MIT */
/*
 * The control protocol, one table (CONTROL_COMMANDS) that says everything
 * about a command once: its arguments (0 to PROTO_ARGS_MAX, each with its
 * kind and JSON key), whether it changes time, which clock modes take it,
 * whether the panel serves it. Generated from it: enum cmd_kind, the
 * daemon's request parser (request.c), shmclockctl's usage, help, argument
 * count and requests, cmd_changes_time() and the refusals of a mode that
 * does not take a command (command.h, checked before the mode is called),
 * the panel's allowed commands, and the messages listing the commands.
 * shmclockd --help-commands prints it; tests/doc/commands.py checks
 * shmclockctl(1), the requests the docs show and the panel's page and man
 * page against that.
 *
 * Adding a command: a row here, its case in the clock thread (clockthread.c)
 * or its mode, and its entry in shmclockctl(1) (doc/man, then
 * sh doc/render.sh build).
 *
 * Wire format: one JSON object per line, {"v":1,"cmd":NAME[,KEY:ARG]...},
 * with a KEY per argument of the command, as its row says.
 */
#ifndef SHMCLOCKD_PROTOCOL_H
#define SHMCLOCKD_PROTOCOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <shmclock/lockstep.h>

#define CONTROL_PROTOCOL 1

/* The kinds of argument a command takes, each parsed by request.c:
 * X(kind, name, what the panel asks for, an example a request may carry) */
#define PROTO_ARG_KINDS(X)                                                                         \
	/* CONFIG_SCALE_MIN to _MAX (a JSON number or string) */                                   \
	X(PARG_SCALE, "scale", "a scale (e.g. 2)", "2")                                            \
	/* seconds, "1.5s", or an ISO-8601 UTC date */                                             \
	X(PARG_TIME, "time", "a time or duration (e.g. \"1.5s\")", "1.5s")                         \
	/* seconds or "1.5s", >= 0 */                                                              \
	X(PARG_DURATION, "duration", "a time or duration (e.g. \"1.5s\")", "1.5s")                 \
	/* a participant's name: 1 to SHMCLOCK_LOCKSTEP_WHO_MAX bytes */                           \
	X(PARG_WHO, "who", "a participant's name", "p1")                                           \
	/* a whole number from 0 to 2^31 - 1 (a JSON number or string) */                          \
	X(PARG_COUNT, "count", "a whole number (e.g. 3)", "3")

#define PROTO_ARG_KIND_ENUM(kind, name, panel, example) kind,
enum proto_arg_kind {
	PARG_NONE, /* an unused argument slot */
	PROTO_ARG_KINDS(PROTO_ARG_KIND_ENUM)
};
#undef PROTO_ARG_KIND_ENUM

struct proto_arg_kind_info {
	const char *name;    /* shmclockd --help-commands */
	const char *panel;   /* what the panel says it needs */
	const char *example; /* a value a request may carry (tests) */
};

#define PROTO_ARG_KIND_INFO(kind, name, panel, example) [kind] = { name, panel, example },
static const struct proto_arg_kind_info proto_arg_kinds[] = {
	[PARG_NONE] = { "none", "nothing", "" },
	PROTO_ARG_KINDS(PROTO_ARG_KIND_INFO)
};
#undef PROTO_ARG_KIND_INFO

/* The clock modes (mode.h), the hosts mode by role: what the modes column
 * of the table is indexed by. */
enum proto_mode {
	PMODE_PLAIN,
	PMODE_LOCKSTEP,
	PMODE_LEADER,   /* Distribute.Publish */
	PMODE_FOLLOWER, /* TimeSource "leader" */
	PMODE_N,
};

static const char *const proto_mode_names[PMODE_N] = { "plain", "lockstep", "leader", "follower" };

/* One argument of a command. */
struct proto_arg {
	enum proto_arg_kind kind;
	const char *key;  /* its JSON key in a request */
	const char *meta; /* its name in shmclockctl's usage and shmclockctl(1) */
};

#define PROTO_ARGS_MAX 4

/* The table's cells (see the table). */
#define PROTO_ARG(kind, key, meta) { kind, key, meta }
#define PROTO_ARGS(...)                                                                            \
	sizeof((const struct proto_arg[]){ __VA_ARGS__ }) / sizeof(struct proto_arg), { __VA_ARGS__ }
#define PROTO_NOARGS 0, { PROTO_ARG(PARG_NONE, NULL, NULL) }
#define PROTO_OK NULL
#define PROTO_MODES(plain, lockstep, leader, follower)                                             \
	{ [PMODE_PLAIN] = plain, [PMODE_LOCKSTEP] = lockstep, [PMODE_LEADER] = leader,             \
	  [PMODE_FOLLOWER] = follower }
#define PROTO_ALL_MODES PROTO_MODES(PROTO_OK, PROTO_OK, PROTO_OK, PROTO_OK)

/* Refusals several commands share. */
#define PROTO_FOLLOWS_LEADER                                                                       \
	"this clock follows a leader on another host: change time there (status shows which)"
#define PROTO_FOLLOWER_REFUSES PROTO_MODES(PROTO_OK, PROTO_OK, PROTO_OK, PROTO_FOLLOWS_LEADER)

/*
 * X(name, kind, arguments, changes time, modes, panel, options, help)
 *
 *   arguments     PROTO_ARGS(PROTO_ARG(kind, JSON key, NAME), ...) in the
 *                 order shmclockctl takes them, or PROTO_NOARGS
 *   changes time  a client's change of the clock's function: a leader
 *                 schedules it at an instant (mode_distribute.c), a
 *                 follower must refuse it (cmd_changes_time())
 *   modes         PROTO_MODES(plain, lockstep, leader, follower): PROTO_OK
 *                 where the mode takes the command (its own rules may still
 *                 refuse an argument), else the error a client gets there
 *   panel         shmclock-panel's POST /api/control serves it
 *   options       shmclockctl's own options for it, before the arguments
 *   help          shmclockctl's one line
 */
#define CONTROL_COMMANDS(X)                                                                        \
	X("status", CMD_STATUS, PROTO_NOARGS, false, PROTO_ALL_MODES, false, "[--json]",           \
	  "show the clock (--json: the daemon's reply as it is)")                                  \
	X("pause", CMD_PAUSE, PROTO_NOARGS, true, PROTO_FOLLOWER_REFUSES, true, "",                \
	  "freeze simulation time")                                                                \
	X("resume", CMD_RESUME, PROTO_NOARGS, true, PROTO_FOLLOWER_REFUSES, true, "",              \
	  "let time run again from where it stopped")                                              \
	X("scale", CMD_SCALE, PROTO_ARGS(PROTO_ARG(PARG_SCALE, "value", "X")), true,               \
	  PROTO_MODES(PROTO_OK,                                                                    \
		      "in lockstep the participants' grants set the pace (MaxScale limits it)",    \
		      PROTO_OK, PROTO_FOLLOWS_LEADER),                                             \
	  true, "", "set the time scale (e.g. 2, 0.5)")                                            \
	X("set", CMD_SET, PROTO_ARGS(PROTO_ARG(PARG_TIME, "time", "TIME")), true,                  \
	  PROTO_MODES(PROTO_OK,                                                                    \
		      "set is refused in lockstep: the participants' grants move time (pause, "    \
		      "then step)",                                                                \
		      PROTO_OK, PROTO_FOLLOWS_LEADER),                                             \
	  true, "", "jump to TIME (1.5s, 250ms, seconds, or an ISO-8601 UTC date)")                \
	X("step", CMD_STEP, PROTO_ARGS(PROTO_ARG(PARG_DURATION, "duration", "DURATION")), true,    \
	  PROTO_FOLLOWER_REFUSES, true, "",                                                        \
	  "move forward by DURATION (stepped sources, or while paused)")                           \
	X("advance", CMD_ADVANCE, PROTO_ARGS(PROTO_ARG(PARG_TIME, "time", "TIME")), false,         \
	  PROTO_FOLLOWER_REFUSES, false, "", "external source: publish the next value")            \
	X("evict", CMD_EVICT, PROTO_ARGS(PROTO_ARG(PARG_WHO, "who", "WHO")), false,                \
	  PROTO_MODES("evict is for a lockstep clock (shmclockd --lockstep N)", PROTO_OK,          \
		      "evict is for a lockstep clock (shmclockd --lockstep N)",                    \
		      "evict is for a lockstep clock (shmclockd --lockstep N)"),                   \
	  true, "", "lockstep: drop the participant named WHO (it no longer holds the clock)")      \
	X("record", CMD_RECORD, PROTO_NOARGS, false, PROTO_ALL_MODES, false, "FILE",               \
	  "record each change of the time function to FILE, a new MCAP file (passed open)")        \
	X("record-stop", CMD_RECORD_STOP, PROTO_NOARGS, false, PROTO_ALL_MODES, false, "",         \
	  "stop recording: the summary written, the file closed")

/* The daemon's own commands, never on the wire: the same columns (the
 * name is for the tests). */
#define DAEMON_COMMANDS(X)                                                                         \
	X("reload", CMD_RELOAD, PROTO_NOARGS, false, PROTO_ALL_MODES, false, "",                   \
	  "the config again (SIGHUP): cmd.arg_config")                                             \
	X("init", CMD_INIT, PROTO_NOARGS, false, PROTO_ALL_MODES, false, "",                       \
	  "start or continue the clock (cmd.arg_init); ticks begin after it")                      \
	X("function", CMD_FUNCTION, PROTO_NOARGS, false,                                           \
	  PROTO_MODES("this clock follows no leader", "this clock follows no leader", PROTO_OK,    \
		      PROTO_OK),                                                                   \
	  false, "", "a leader's time function (cmd.arg_fn, mode_distribute.c)")                   \
	X("stale", CMD_STALE, PROTO_NOARGS, false, PROTO_ALL_MODES, false, "",                     \
	  "what the clock follows fell silent, or speaks again (cmd.arg_stale)")                   \
	X("ack", CMD_ACK, PROTO_NOARGS, false,                                                     \
	  PROTO_MODES("this clock leads no followers", "this clock leads no followers", PROTO_OK,  \
		      PROTO_OK),                                                                   \
	  false, "", "a follower's acknowledgement (cmd.arg_ack, mode_distribute.c)")              \
	X("stop", CMD_STOP, PROTO_NOARGS, false, PROTO_ALL_MODES, false, "", "the clock thread ends")

/* What the clock thread is asked to do: the protocol's commands, then the
 * daemon's own, in the tables' order. */
#define PROTO_KIND(name, kind, ...) kind,
enum cmd_kind { CONTROL_COMMANDS(PROTO_KIND) DAEMON_COMMANDS(PROTO_KIND) };
#undef PROTO_KIND

/* How many: the protocol's commands, and every command. */
#define PROTO_ONE(...) +1
#define PROTO_NCMDS ((size_t)(0 CONTROL_COMMANDS(PROTO_ONE)))
#define CMD_NKINDS ((size_t)(0 CONTROL_COMMANDS(PROTO_ONE) DAEMON_COMMANDS(PROTO_ONE)))

struct proto_cmd {
	const char *name;
	enum cmd_kind kind;
	size_t nargs;
	struct proto_arg args[PROTO_ARGS_MAX];
	bool changes_time;
	const char *refused[PMODE_N]; /* per mode: NULL where it takes the command */
	bool panel;
	const char *options;
	const char *help;
};

/* Every command, indexed by its kind: the protocol's first
 * (proto_cmds[0 .. PROTO_NCMDS)), then the daemon's own. */
#define PROTO_ENTRY(n, k, args, time, modes, panel, opts, help)                                    \
	{ n, k, args, time, modes, panel, opts, help },
static const struct proto_cmd proto_cmds[] = { CONTROL_COMMANDS(PROTO_ENTRY)
						       DAEMON_COMMANDS(PROTO_ENTRY) };
#undef PROTO_ENTRY
_Static_assert(sizeof(proto_cmds) / sizeof(proto_cmds[0]) == CMD_NKINDS,
	       "a command in the tables but not in enum cmd_kind");

/* One argument's value, as its kind parses it. */
#define PROTO_VALUE_FIELDS                                                                         \
	double scale; /* PARG_SCALE */                                                             \
	int64_t ns;   /* PARG_TIME, PARG_DURATION */                                               \
	char who[SHMCLOCK_LOCKSTEP_WHO_MAX + 1]; /* PARG_WHO */                                     \
	int64_t count; /* PARG_COUNT */

struct proto_value {
	PROTO_VALUE_FIELDS
};

/* A parsed request: what a client asked. arg[i] is the command's argument
 * i; req.scale, req.ns, req.who are arg[0]'s, for the commands of one
 * argument (the same storage). */
struct request {
	enum cmd_kind kind;
	union {
		struct proto_value arg[PROTO_ARGS_MAX];
		struct {
			PROTO_VALUE_FIELDS
		};
	};
};

static inline const struct proto_cmd *proto_cmd_of(enum cmd_kind k)
{
	return &proto_cmds[k];
}

/* A protocol command by name; NULL if none (the daemon's own included). */
static inline const struct proto_cmd *proto_find(const char *name)
{
	for (size_t i = 0; i < PROTO_NCMDS; i++)
		if (!strcmp(name, proto_cmds[i].name))
			return &proto_cmds[i];
	return NULL;
}

/* shmclockctl's synopsis of @pc into buf: its options, then the names of
 * its arguments ("[--json]", "TIME"). */
static inline const char *proto_synopsis(const struct proto_cmd *pc, char *buf, size_t len)
{
	size_t n = (size_t)snprintf(buf, len, "%s", pc->options);

	for (size_t i = 0; i < pc->nargs && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? " " : "", pc->args[i].meta);
	return buf;
}

/* "status, pause, ... or evict" into buf: every protocol command, or with
 * @panel_only those the panel serves. */
static inline const char *proto_list(char *buf, size_t len, bool panel_only)
{
	size_t n = 0, total = 0, k = 0;

	for (size_t i = 0; i < PROTO_NCMDS; i++)
		total += !panel_only || proto_cmds[i].panel;
	buf[0] = 0;
	for (size_t i = 0; i < PROTO_NCMDS && n < len; i++) {
		if (panel_only && !proto_cmds[i].panel)
			continue;
		n += (size_t)snprintf(buf + n, len - n, "%s%s",
				      k == 0 ? "" : k + 1 == total ? " or " : ", ", proto_cmds[i].name);
		k++;
	}
	return buf;
}

static inline const char *proto_names(char *buf, size_t len)
{
	return proto_list(buf, len, false);
}

#endif
