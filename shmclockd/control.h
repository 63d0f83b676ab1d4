/* SPDX-License-Identifier: MIT */
/*
 * The control socket's server: a Unix stream socket, one JSON object per
 * line each way (request.h parses the lines and writes the replies). Requests: {"v":1,"cmd":"pause"}; {"cmd":"scale","value":2};
 * {"cmd":"set","time":"1.5s"}; {"cmd":"step","duration":"10ms"};
 * {"cmd":"advance","time":"3s"}; {"cmd":"status"}. "v" is optional and
 * must be 1 when given. Replies: {"v":1,"ok":true,"status":{...}} after the
 * change is committed, or {"v":1,"ok":false,"error":"..."}.
 */
#ifndef SHMCLOCKD_CONTROL_H
#define SHMCLOCKD_CONTROL_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "clockthread.h"
#include "config.h"
#include "request.h"

#define CONTROL_LINE_MAX 4096
#define CONTROL_CLIENTS_MAX 32
/* Commands of one client on their way through the clock thread (a
 * leader's changes wait for their instants): further lines wait in the
 * client's buffer, unread, until the oldest is answered. Their replies
 * (~1.5 KiB each) may all come at once: 32 fit a Unix socket's default
 * send buffer, so a client that reads is never taken for one that does
 * not (replies are sent without blocking). */
#define CONTROL_INFLIGHT_MAX 32

struct cmd;

struct client {
	int fd;
	uid_t uid;
	pid_t pid; /* when it connected (SO_PEERCRED) */
	int passed_fd; /* the last descriptor it passed (SCM_RIGHTS), for record; -1 none */
	size_t used;
	int64_t last_ns;
	/* A complete line waits for the commands before it to be answered
	 * (status after a pending change, or the queue full). */
	bool blocked;
	/* It shut its side (end of input) with commands still to answer: not
	 * read any more; answered, then closed. */
	bool eof;
	/* Commands posted to the clock thread, answered in this order. */
	struct cmd *inflight[CONTROL_INFLIGHT_MAX];
	unsigned first, count;
	char buf[CONTROL_LINE_MAX + 1];
};

struct control {
	int fd;
	char path[108];
	const struct shmclockd_config *cfg;
	/* What the requests are answered with: the clock thread, the
	 * read-only view for status, the ROS 2 link (rq.ros2, NULL: none). */
	struct request_ctx rq;
	struct client clients[CONTROL_CLIENTS_MAX];
	/* requests answered ok / answered with an error; connections refused
	 * (peer credentials), dropped (idle, oversized, not reading, evicted),
	 * evicted (the longest idle, for a new client when the table is full) */
	unsigned long served, errors, refused, dropped, evicted;
	/* Out of file descriptors: a descriptor kept in reserve to accept and
	 * close a connection with (-1: none), and, when even that fails, the
	 * instant until which the listener is not polled. */
	int spare_fd;
	int64_t listen_paused_until;
	unsigned long fd_exhausted;      /* accepts that failed for want of fds */
};

/* Binds the socket (0600, or 0660 for ControlGroup). A stale socket left by
 * a dead daemon is replaced; a live one, or anything that is not a socket,
 * is refused. Returns 0 or -errno with err. */
int control_open(struct control *c, const char *path, const struct shmclockd_config *cfg,
		 struct clockthread *ct, char *err, size_t errlen);

/* Fills pollfds for the listener, the clock thread's notify descriptor
 * and the clients; returns how many (at most CONTROL_CLIENTS_MAX + 2). */
int control_pollfds(struct control *c, struct pollfd *fds, int max);

/* How long the main loop may sleep in poll(): until the next idle client
 * is due to be dropped or a paused listener to be polled again. */
int control_poll_ms(const struct control *c);

/* Handles what poll() reported on the fds control_pollfds() filled. */
void control_handle(struct control *c, const struct pollfd *fds, int n);

/* Closes everything and removes the socket file. */
void control_close(struct control *c);

#endif
