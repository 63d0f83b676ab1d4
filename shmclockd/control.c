/* SPDX-License-Identifier: MIT */
/*
 * The control socket's server: the listener, peers' credentials, clients
 * and their lines. What a line asks and the reply are request.c's.
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <math.h>
#include <poll.h>
#include <pwd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <shmclock/time.h>

#include "clockthread.h"
#include "control.h"
#include "record.h"
#include "log.h"


/* The server's part of status (request_ctx.server_status). */
static void server_status(cJSON *st, const void *server)
{
	const struct control *c = server;
	cJSON *t = cJSON_CreateObject();
	int n = 0;

	for (int i = 0; i < CONTROL_CLIENTS_MAX; i++)
		n += c->clients[i].fd >= 0;
	cJSON_AddNumberToObject(t, "answered", (double)c->served);
	cJSON_AddNumberToObject(t, "errors", (double)c->errors);
	cJSON_AddNumberToObject(t, "refused", (double)c->refused);
	cJSON_AddNumberToObject(t, "dropped", (double)c->dropped);
	cJSON_AddNumberToObject(t, "evicted", (double)c->evicted);
	cJSON_AddNumberToObject(t, "clients", n);
	cJSON_AddNumberToObject(t, "fd_exhausted", (double)c->fd_exhausted);
	cJSON_AddItemToObject(st, "control", t);
}


/* Is uid allowed to control the clock? Root, our own user, and members of
 * ControlGroup when one is configured. */
static int allowed(const struct control *c, uid_t uid, gid_t gid)
{
	if (uid == 0 || uid == geteuid())
		return 1;
	if (c->cfg->has_group) {
		struct passwd *pw;
		gid_t groups[256];
		int n = 256;

		if (gid == c->cfg->group)
			return 1;
		pw = getpwuid(uid);
		if (pw && getgrouplist(pw->pw_name, pw->pw_gid, groups, &n) >= 0)
			for (int i = 0; i < n; i++)
				if (groups[i] == c->cfg->group)
					return 1;
	}
	return 0;
}

/* Never blocks the daemon: a client that does not read its replies is
 * dropped once its socket buffer is full. */
static int send_line(int fd, const char *line)
{
	size_t n = strlen(line);
	ssize_t w = send(fd, line, n, MSG_NOSIGNAL | MSG_DONTWAIT);

	return w == (ssize_t)n ? 0 : -1;
}

static int stale_socket(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), r;

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	r = connect(fd, (struct sockaddr *)&a, sizeof(a));
	r = r < 0 && errno == ECONNREFUSED;
	close(fd);
	return r;
}

int control_open(struct control *c, const char *path, const struct shmclockd_config *cfg,
		 struct clockthread *ct, char *err, size_t errlen)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	char dir[108], *slash;
	struct stat st;
	int fd, r;

	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->spare_fd = -1;
	c->cfg = cfg;
	c->rq = (struct request_ctx){ .ct = ct, .cfg = cfg, .server_status = server_status, .server = c };
	for (int i = 0; i < CONTROL_CLIENTS_MAX; i++) {
		c->clients[i].fd = -1;
		c->clients[i].passed_fd = -1;
	}
	if (strlen(path) >= sizeof(a.sun_path)) {
		snprintf(err, errlen, "control socket path too long: %s", path);
		return -ENAMETOOLONG;
	}
	snprintf(c->path, sizeof(c->path), "%s", path);
	/* Our runtime directory: created owner-only (group-searchable for
	 * ControlGroup). An existing one is used as it is. */
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = 0;
		if (mkdir(dir, cfg->has_group ? 0750 : 0700) == 0 && cfg->has_group &&
		    chown(dir, (uid_t)-1, cfg->group) < 0)
			log_msg(LOG_WARN, "chown %s: %s", dir, strerror(errno));
		/* Somebody who can write the directory can swap our socket for
		 * theirs: it must be ours (or root's), and writable by nobody
		 * else unless sticky (as /tmp). Catches a /tmp/shmclock-UID
		 * planted by another user before we first ran. */
		if (stat(dir, &st) < 0) {
			snprintf(err, errlen, "control socket directory %s: %s", dir, strerror(errno));
			return -errno;
		}
		const char *why = !S_ISDIR(st.st_mode) ? "is not a directory"
				  : st.st_uid != geteuid() && st.st_uid != 0 ? "belongs to another user"
				  : (st.st_mode & 022) && !(st.st_mode & S_ISVTX) ? "is writable by others"
				  : NULL;

		if (why) {
			snprintf(err, errlen,
				 "control socket directory %s %s (uid %u, mode %04o): refusing to put "
				 "the socket there (remove it, or set --socket)",
				 dir, why, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
			return -EPERM;
		}
	}
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen, "%s exists and is not a socket: refusing to replace it", path);
			return -EEXIST;
		}
		if (!stale_socket(path)) {
			snprintf(err, errlen, "%s is in use by another live daemon", path);
			return -EADDRINUSE;
		}
		unlink(path);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		goto fail;
	memcpy(a.sun_path, path, strlen(path) + 1);
	/* Bind with a tight umask so the socket is never briefly world-open. */
	{
		mode_t old = umask(0177);

		r = bind(fd, (struct sockaddr *)&a, sizeof(a));
		umask(old);
	}
	if (r < 0)
		goto fail;
	if (cfg->has_group && (chown(path, (uid_t)-1, cfg->group) < 0 || chmod(path, 0660) < 0))
		goto fail;
	if (listen(fd, 16) < 0)
		goto fail;
	c->fd = fd;
	c->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	/* Without it, status goes through the clock thread as other requests. */
	if (shmclock_open(cfg->name, &c->rq.view) < 0)
		log_msg(LOG_DEBUG, "control: no read-only view of '%s': status via the clock thread",
			cfg->name);
	return 0;
fail:
	r = -errno;
	snprintf(err, errlen, "control socket %s: %s", path, strerror(errno));
	if (fd >= 0)
		close(fd);
	return r;
}

/* Whether a client's input is read: not while a line waits for the replies
 * before it (blocked), nor after its end of input (eof). */
static bool reading(const struct client *cl)
{
	return !cl->blocked && !cl->eof;
}

int control_pollfds(struct control *c, struct pollfd *fds, int max)
{
	int n = 0;

	/* A paused listener is polled as "nothing" (fd -1) so the indexes
	 * stay; the client loop in control_handle matches by fd. */
	fds[n++] = (struct pollfd){ .fd = shmclock_steady_now().ns < c->listen_paused_until ? -1 : c->fd,
				    .events = POLLIN };
	fds[n++] = (struct pollfd){ .fd = c->rq.ct ? c->rq.ct->notify_fd : -1, .events = POLLIN };
	/* A blocked client is not read: its lines wait for its replies. */
	for (int i = 0; i < CONTROL_CLIENTS_MAX && n < max; i++)
		if (c->clients[i].fd >= 0)
			fds[n++] = (struct pollfd){ .fd = c->clients[i].fd,
						    .events = reading(&c->clients[i]) ? POLLIN : 0 };
	return n;
}

/* Closes a client's connection: dropped for @why, or (NULL) the client
 * went away by itself, which is not counted. */
static void drop(struct control *c, struct client *cl, const char *why)
{
	if (why) {
		log_msg(LOG_DEBUG, "control: dropping client (uid %u): %s", (unsigned)cl->uid, why);
		c->dropped++;
	}
	close(cl->fd);
	cl->fd = -1;
	if (cl->passed_fd >= 0)
		close(cl->passed_fd);
	cl->passed_fd = -1;
	cl->used = 0;
	cl->blocked = false;
	cl->eof = false;
	/* Their results go nowhere: the clock thread frees them. */
	for (; cl->count; cl->count--, cl->first = (cl->first + 1) % CONTROL_INFLIGHT_MAX)
		cmd_orphan(cl->inflight[cl->first]);
	cl->first = 0;
}

static void reply_error(struct client *cl, const char *msg)
{
	char *line = request_reply_error(msg);

	if (line)
		send_line(cl->fd, line);
	free(line);
}

static void read_client(struct control *c, struct client *cl, short revents);

/*
 * accept4() failed with EMFILE / ENFILE: the connection stays queued and
 * the listener stays readable, so poll() would return at once forever (a
 * core at 100 %). Give the spare descriptor up to accept it, tell the
 * client why, close it, take the spare back; without a spare, stop polling
 * the listener for a while (queued clients then wait, they are not lost).
 */
static void out_of_fds(struct control *c)
{
	int fd;

	if (c->fd_exhausted++ % 1000 == 0)
		log_msg(LOG_WARN, "control: out of file descriptors (%s); refusing clients until some "
				  "are free", strerror(errno));
	if (c->spare_fd >= 0) {
		close(c->spare_fd);
		fd = accept4(c->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd >= 0) {
			struct client tmp = { .fd = fd };

			reply_error(&tmp, "shmclockd is out of file descriptors; try again later");
			close(fd);
		}
		c->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (fd >= 0)
			return;
	}
	c->listen_paused_until = shmclock_steady_now().ns + 100000000;
}

static void accept_one(struct control *c)
{
	struct ucred cred = { .pid = 0, .uid = (uid_t)-1, .gid = (gid_t)-1 };
	socklen_t len = sizeof(cred);
	struct client tmp;
	int fd = accept4(c->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0) {
		if (errno == EMFILE || errno == ENFILE)
			out_of_fds(c);
		return;
	}
	tmp.fd = fd;
	/* Credentials we could not read are nobody's: refused, and logged as
	 * uid 4294967295 rather than as whatever the stack held. */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
	    !allowed(c, cred.uid, cred.gid)) {
		char why[160];

		tmp.uid = cred.uid;
		/* The uid as this daemon sees it: from a container with a user
		 * namespace, the host's uid its user maps to. */
		snprintf(why, sizeof(why), "permission denied: uid %u (as the daemon sees it) may not "
			 "control the clock", (unsigned)cred.uid);
		reply_error(&tmp, why);
		/* A flood of refused connections must not flood the log. */
		if (c->refused < 10 || c->refused % 1000 == 0)
			log_msg(LOG_WARN, "control: refused uid %u (pid %d)%s", (unsigned)cred.uid,
				(int)cred.pid, c->refused == 9 ? " (further refusals: every 1000th)" : "");
		c->refused++;
		close(fd);
		return;
	}
	/*
	 * A free slot, else the client quiet for longest: idle connections
	 * must not lock the owner out of their own clock. Never one with
	 * commands in flight (a leader's change waits for its instant): it is
	 * not idle, and its change would be made while it was told it was
	 * dropped. With every client waiting so, the newcomer is refused.
	 */
	struct client *slot = NULL;

	for (int i = 0; i < CONTROL_CLIENTS_MAX; i++) {
		struct client *cl = &c->clients[i];
		struct pollfd in = { .fd = cl->fd, .events = POLLIN };

		/* What it sent and this loop has not read yet first: a client
		 * whose request waits in its socket is not idle either. */
		if (cl->fd >= 0 && !cl->count && reading(cl) && poll(&in, 1, 0) == 1)
			read_client(c, cl, in.revents);
		if (cl->fd < 0) {
			slot = cl;
			break;
		}
		if (!cl->count && (!slot || cl->last_ns < slot->last_ns))
			slot = cl;
	}
	if (!slot) {
		reply_error(&tmp, "too many clients, each waiting for a change: try again when one "
				  "is answered");
		c->errors++;
		close(fd);
		return;
	}
	if (slot->fd >= 0) {
		reply_error(slot, "dropped: too many clients and this one was the longest idle");
		drop(c, slot, "evicted for a new client");
		c->evicted++;
	}
	slot->fd = fd;
	slot->uid = cred.uid;
	slot->pid = cred.pid;
	slot->used = 0;
	slot->last_ns = shmclock_steady_now().ns;
}

/* Answers the client's posted commands that are done, oldest first;
 * false when the client was dropped. */
static bool answer_done(struct control *c, struct client *cl)
{
	while (cl->count) {
		struct cmd *cmd = cl->inflight[cl->first];
		char *reply;

		/* Acquire: pairs with the clock thread's release of done
		 * (clockthread.c, complete): the results are visible. */
		if (atomic_load_explicit(&cmd->done, memory_order_acquire) != CMD_DONE)
			break;
		cl->first = (cl->first + 1) % CONTROL_INFLIGHT_MAX;
		cl->count--;
		/* record-stop is answered once the file is whole (its summary
		 * written); a record refused, once its recorder is closed. */
		if (c->rq.ct && (cmd->req.kind == CMD_RECORD_STOP || cmd->req.kind == CMD_RECORD))
			clockthread_reap(c->rq.ct);
		if (cmd->rc) {
			c->errors++;
			reply = request_reply_error(cmd->err);
		} else {
			c->served++;
			reply = request_reply_ok(&c->rq, &cmd->info);
		}
		free(cmd);
		if (reply && send_line(cl->fd, reply) < 0) {
			free(reply);
			drop(c, cl, "does not read its replies");
			return false;
		}
		free(reply);
		cl->last_ns = shmclock_steady_now().ns;
	}
	return true;
}

/* Queues an answer already known (an error) behind the client's pending
 * ones, so that replies keep the order of the lines. */
static void push_error(struct client *cl, struct cmd *cmd, const char *err)
{
	cmd_fail(cmd, -EINVAL, err);
	cmd->rc = -EINVAL;
	/* Relaxed: never posted; only this thread reads it. */
	atomic_store_explicit(&cmd->done, CMD_DONE, memory_order_relaxed);
	cl->inflight[(cl->first + cl->count++) % CONTROL_INFLIGHT_MAX] = cmd;
}

/*
 * One line: false when it must wait (kept in the buffer, the client
 * blocked) for the replies before it. Status with nothing pending is
 * answered at once (from the segment); every other command is posted to
 * the clock thread and answered when done, so a change that waits for its
 * instant (a leader's) holds up neither other clients nor signals, and a
 * client's changes queue behind each other with their instants.
 */
static bool handle_line(struct control *c, struct client *cl, const char *line, size_t len)
{
	char err[256], *reply;
	struct request req;
	struct cmd *cmd;
	shmclock_info_t info;
	int r;

	if (cl->count == CONTROL_INFLIGHT_MAX)
		return false;
	r = request_parse(line, len, &req, err, sizeof(err));
	if (!r && req.kind == CMD_STATUS && cl->count)
		return false; /* after the changes before it */
	if (!r && req.kind == CMD_STATUS) {
		r = request_exec(&c->rq, &req, &info, err, sizeof(err));
		reply = r ? request_reply_error(err) : request_reply_ok(&c->rq, &info);
		r ? c->errors++ : c->served++;
		if (reply && send_line(cl->fd, reply) < 0)
			drop(c, cl, "does not read its replies");
		free(reply);
		return true;
	}
	cmd = calloc(1, sizeof(*cmd));
	if (!cmd) {
		c->errors++;
		reply_error(cl, "shmclockd is out of memory");
		return true;
	}
	if (r) {
		push_error(cl, cmd, err);
		return true;
	}
	log_msg(LOG_INFO, "control: %.*s (uid %u)", (int)(len > 200 ? 200 : len), line,
		(unsigned)cl->uid);
	if (req.kind == CMD_RECORD) {
		/* The file is the client's: made by it, with its rights, and
		 * passed open. This daemon opens no path a client names. */
		int fd = cl->passed_fd;

		cl->passed_fd = -1;
		if (fd < 0) {
			push_error(cl, cmd, "record needs its file passed open with the request "
					    "(SCM_RIGHTS): shmclockctl record FILE makes and passes it");
			return true;
		}
		if (recorder_open_fd(fd, c->cfg->name, &cmd->arg_rec, err, sizeof(err))) {
			push_error(cl, cmd, err);
			return true;
		}
	}
	cmd->req = req;
	cmd->from_client = true;
	cmd->uid = cl->uid;
	cmd->pid = cl->pid;
	cl->inflight[(cl->first + cl->count++) % CONTROL_INFLIGHT_MAX] = cmd;
	clockthread_post(c->rq.ct, cmd);
	return true;
}

/* The complete lines in the client's buffer, until one must wait. */
static void run_lines(struct control *c, struct client *cl)
{
	char *start = cl->buf, *nl;

	cl->blocked = false;
	while (cl->fd >= 0 && (nl = memchr(start, '\n', cl->used - (size_t)(start - cl->buf)))) {
		size_t len = (size_t)(nl - start);

		if (len && start[len - 1] == '\r')
			len--;
		if (len && !handle_line(c, cl, start, len)) {
			cl->blocked = true;
			break;
		}
		start = nl + 1;
	}
	if (cl->fd < 0)
		return;
	cl->used -= (size_t)(start - cl->buf);
	memmove(cl->buf, start, cl->used);
	/* The answers already known (errors) go out now. */
	answer_done(c, cl);
}

/* Reads what the client sent, and a descriptor it passed with it
 * (SCM_RIGHTS: record's file): the last one kept, any other closed at
 * once. The kernel closes those the buffer had no room for (MSG_CTRUNC),
 * so no client can fill this daemon's table. */
static ssize_t recv_passing(struct client *cl)
{
	union {
		char buf[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { cl->buf + cl->used, CONTROL_LINE_MAX - cl->used };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf) };
	ssize_t n = recvmsg(cl->fd, &mh, MSG_CMSG_CLOEXEC);

	if (n < 0)
		return n;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		size_t k;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (cl->passed_fd >= 0)
				close(cl->passed_fd);
			cl->passed_fd = fd;
		}
	}
	return n;
}

static void read_client(struct control *c, struct client *cl, short revents)
{
	ssize_t n;

	if (!reading(cl)) {
		/* Not polled for input: only a hang-up or error comes here. */
		if (revents & (POLLHUP | POLLERR))
			drop(c, cl, NULL);
		return;
	}
	n = recv_passing(cl);
	if (n == 0 && cl->count) {
		/* It shut its side after its last line (printf ... | socat):
		 * its commands in flight are answered first, then it is
		 * closed (control_handle). Dropped at once, it went
		 * unanswered while its changes were made. */
		cl->eof = true;
		return;
	}
	if (n <= 0) {
		if (n == 0 || (errno != EAGAIN && errno != EINTR))
			drop(c, cl, NULL);
		return;
	}
	cl->used += (size_t)n;
	cl->last_ns = shmclock_steady_now().ns;
	run_lines(c, cl);
	if (cl->fd >= 0 && !cl->blocked && cl->used >= CONTROL_LINE_MAX) {
		c->errors++;
		reply_error(cl, "request line too long (at most " SHMCLOCK__XSTR(CONTROL_LINE_MAX)
				" bytes)");
		drop(c, cl, "oversized line");
	}
}

void control_handle(struct control *c, const struct pollfd *fds, int n)
{
	int64_t now = shmclock_steady_now().ns;

	for (int k = 0; k < n; k++) {
		if (!fds[k].revents)
			continue;
		if (fds[k].fd == c->fd) {
			accept_one(c);
			continue;
		}
		if (c->rq.ct && fds[k].fd == c->rq.ct->notify_fd) {
			uint64_t v;

			/* Reset the counter; the clients' queues say what is done. */
			(void)!read(fds[k].fd, &v, sizeof(v)); /* EAGAIN: already read */
			continue;
		}
		for (int i = 0; i < CONTROL_CLIENTS_MAX; i++)
			if (c->clients[i].fd == fds[k].fd) {
				read_client(c, &c->clients[i], fds[k].revents);
				break;
			}
	}
	/* Replies to what the clock thread finished; a client that waited
	 * for them goes on with its lines. */
	for (int i = 0; i < CONTROL_CLIENTS_MAX; i++) {
		struct client *cl = &c->clients[i];

		if (cl->fd < 0 || !cl->count)
			continue;
		if (answer_done(c, cl) && cl->blocked)
			run_lines(c, cl);
		/* Shut and answered: closed (its lines still waiting, if any,
		 * run as the answers come, then this). */
		if (cl->fd >= 0 && cl->eof && !cl->count && !cl->blocked)
			drop(c, cl, NULL);
	}
	for (int i = 0; i < CONTROL_CLIENTS_MAX; i++)
		if (c->clients[i].fd >= 0 && !c->clients[i].count &&
		    now - c->clients[i].last_ns > c->cfg->control_idle_ns)
			drop(c, &c->clients[i], "idle");
	/* Recorders a record-stop let go of whose client went away. */
	if (c->rq.ct)
		clockthread_reap(c->rq.ct);
}

int control_poll_ms(const struct control *c)
{
	int64_t ms = c->cfg->control_idle_ns < 2000000000 ? c->cfg->control_idle_ns / 2000000 : 1000;

	if (c->listen_paused_until) {
		int64_t left = (c->listen_paused_until - shmclock_steady_now().ns) / 1000000 + 1;

		if (left > 0 && left < ms)
			ms = left;
	}
	return (int)ms;
}

void control_close(struct control *c)
{
	if (c->spare_fd >= 0)
		close(c->spare_fd);
	c->spare_fd = -1;
	for (int i = 0; i < CONTROL_CLIENTS_MAX; i++)
		if (c->clients[i].fd >= 0)
			drop(c, &c->clients[i], NULL);
	if (c->fd >= 0) {
		close(c->fd);
		unlink(c->path);
	}
	c->fd = -1;
	shmclock_close(c->rq.view);
	c->rq.view = NULL;
}
