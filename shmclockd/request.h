/* SPDX-License-Identifier: MIT */
/*
 * The control protocol's requests and replies (control.h has the socket
 * that carries them): a request line parsed into a command, run (through
 * the clock thread, or read from the segment for status), and its reply
 * line. Each module writes its own part of the status reply: the clock
 * thread and its mode (clockthread_status), the server (through
 * request_ctx.server_status), ROS 2 (ros2_glue_status).
 */
#ifndef SHMCLOCKD_REQUEST_H
#define SHMCLOCKD_REQUEST_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <shmclock/shmclock.h>

#include "config.h"
#include "protocol.h"

struct cJSON;
struct clockthread;
struct ros2;
struct ros2_api;

/* What answering a request needs; the server fills it. */
struct request_ctx {
	struct clockthread *ct;
	shmclock_t *view;                /* read-only handle: status answers; NULL: none */
	const struct shmclockd_config *cfg; /* the main thread's (a reload replaces it) */
	struct ros2 *ros2;               /* ROS 2 link for status, or NULL */
	const struct ros2_api *ros2_api;
	/* The server's own part of status ("control"), or NULL. */
	void (*server_status)(struct cJSON *st, const void *server);
	const void *server;
};

/* Parses one request line (without its newline): the command, then each
 * of its arguments (protocol.h's table). 0, or -EINVAL with err. */
int request_parse(const char *line, size_t len, struct request *req, char *err, size_t errlen);

/* Argument @a of command @pc from the request object @root into @out, as
 * its kind says: 0, or -EINVAL with a message naming the command and the
 * key in err. request_parse's, for the tests of a kind no command uses. */
int request_parse_arg(const struct cJSON *root, const struct proto_cmd *pc,
		      const struct proto_arg *a, struct proto_value *out, char *err, size_t errlen);

/* The protocol's table as shmclockd --help-commands prints it: a header,
 * then a line per command: its name; its arguments, each NAME:KEY:KIND
 * (comma-separated; - for none); whether it changes time; the clock modes
 * that take it; whether the panel serves it. tests/doc/commands.py reads
 * it. */
void request_print_commands(FILE *f);

/* Runs a parsed request and waits for it (status from the segment when
 * the view allows): 0 with *info, or -errno with err. */
int request_exec(const struct request_ctx *x, const struct request *req, shmclock_info_t *info,
		 char *err, size_t errlen);

/* The reply to a request that succeeded: the clock's status, each
 * module's part. Newline-terminated, malloc'd (NULL on out of memory). */
char *request_reply_ok(const struct request_ctx *x, const shmclock_info_t *in);

/* An error reply line, newline-terminated, malloc'd (NULL on out of memory). */
char *request_reply_error(const char *msg);

#endif
