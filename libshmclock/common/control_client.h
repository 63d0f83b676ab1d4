/* SPDX-License-Identifier: MIT */
/*
 * The client side of the control socket (control.h has the protocol):
 * connect, send one request line, read one reply line. Used by
 * shmclockctl, the tests, the soak and the flood benchmark.
 */
#ifndef SHMCLOCKD_CONTROL_CLIENT_H
#define SHMCLOCKD_CONTROL_CLIENT_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static inline int64_t control_client_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * A connection to the control socket at @path within @timeout_ms (-1: no
 * limit): fd (blocking), or -errno (-ETIMEDOUT). Not a blocking connect():
 * a daemon that does not accept (stopped, hung) fills its listen backlog
 * with the connections its clients gave up on, and the next blocking
 * connect() on a Unix socket then waits until it accepts again, whatever
 * the caller's timeout. Non-blocking, a full backlog is EAGAIN: tried again
 * every 10 ms until the deadline.
 */
static inline int control_client_connect_within(const char *path, int timeout_ms)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int64_t deadline = control_client_ms() + timeout_ms;
	int fd, e, fl;

	if (strlen(path) >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	memcpy(a.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	while (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		e = errno;
		if (e == EINTR)
			continue;
		if (e != EAGAIN || (timeout_ms >= 0 && control_client_ms() >= deadline)) {
			close(fd);
			return e == EAGAIN ? -ETIMEDOUT : -e;
		}
		poll(NULL, 0, 10);
	}
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
		e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

/* A connection to the control socket at @path: fd, or -errno. */
static inline int control_client_connect(const char *path)
{
	return control_client_connect_within(path, -1);
}

/* Reads until a newline, EOF, or @timeout_ms in all (-1: no limit) into
 * @buf, NUL-terminated. Returns the bytes read. */
static inline size_t control_client_read_line(int fd, char *buf, size_t len, int timeout_ms)
{
	int64_t deadline = control_client_ms() + timeout_ms;
	size_t used = 0;

	while (used + 1 < len) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int64_t left = deadline - control_client_ms();
		ssize_t n;

		if (timeout_ms >= 0 && left <= 0)
			break;
		if (poll(&p, 1, timeout_ms < 0 ? -1 : (int)left) != 1)
			break;
		n = recv(fd, buf + used, len - 1 - used, 0);
		if (n <= 0)
			break;
		used += (size_t)n;
		if (memchr(buf, '\n', used))
			break;
	}
	buf[len ? used : 0] = 0;
	return used;
}

/* One request on a fresh connection; the reply line in @buf. Returns 0
 * with a whole line, -ETIMEDOUT when none came within @timeout_ms, -EPROTO
 * when the connection ended without one, or -errno (no daemon, say). */
/* As control_client_request(), passing descriptor @pass (SCM_RIGHTS) with
 * the request when it is >= 0 (record's file). */
static inline int control_client_request_fd(const char *path, const char *req, int pass,
					    char *buf, size_t len, int timeout_ms)
{
	int64_t t0 = control_client_ms();
	int fd = control_client_connect_within(path, timeout_ms), e;
	union {
		char c[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { (void *)req, strlen(req) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	buf[0] = 0;
	if (fd < 0)
		return fd;
	if (pass >= 0) {
		struct cmsghdr *cm;

		memset(&u, 0, sizeof(u));
		mh.msg_control = u.c;
		mh.msg_controllen = sizeof(u.c);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &pass, sizeof(int));
	}
	if (sendmsg(fd, &mh, MSG_NOSIGNAL) != (ssize_t)strlen(req)) {
		e = errno;
		close(fd);
		return -e;
	}
	{
		/* What the connection left of the timeout (at least 1 ms). */
		int left = timeout_ms < 0 ? -1 : (int)(timeout_ms - (control_client_ms() - t0));

		if (timeout_ms >= 0 && left < 1)
			left = 1;
		control_client_read_line(fd, buf, len, left);
		close(fd);
		if (strchr(buf, '\n'))
			return 0;
		return timeout_ms >= 0 && control_client_ms() - t0 >= timeout_ms ? -ETIMEDOUT : -EPROTO;
	}
}

static inline int control_client_request(const char *path, const char *req, char *buf,
					 size_t len, int timeout_ms)
{
	return control_client_request_fd(path, req, -1, buf, len, timeout_ms);
}

#endif
