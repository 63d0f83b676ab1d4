/* SPDX-License-Identifier: MIT */
/*
 * The seccomp listener (SECCOMP_RET_USER_NOTIF): the filter installed in
 * the child, its descriptor passed back, and the thread that answers
 * reads and timer calls without stopping the program.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include "preload/filter.h"
#include "clocks.h"
#include "sv.h"

#if defined(__x86_64__)

/*
 * Reads come to a listener (SECCOMP_RET_USER_NOTIF): a thread of the
 * supervisor answers them without stopping the program, several times
 * cheaper than a ptrace stop (shmclock-bench bypass). Without one (a kernel
 * before 5.0) they stop for the tracer as the waits do.
 */
int sv_listener = -1;

void *sv_answer_reads(void *arg)
{
	struct seccomp_notif *req;
	struct seccomp_notif_resp *resp;
	struct seccomp_notif_sizes sz;

	(void)arg;
	if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sz))
		return NULL;
	req = calloc(1, sz.seccomp_notif > sizeof(*req) ? sz.seccomp_notif : sizeof(*req));
	resp = calloc(1, sz.seccomp_notif_resp > sizeof(*resp) ? sz.seccomp_notif_resp
							       : sizeof(*resp));
	while (req && resp) {
		int64_t ns;
		long nr, val = 0;
		bool ok = true;
		pid_t pid;

		memset(req, 0, sz.seccomp_notif);
		if (ioctl(sv_listener, SECCOMP_IOCTL_NOTIF_RECV, req)) {
			if (errno == EINTR || errno == ENOENT)
				continue;
			break;
		}
		memset(resp, 0, sz.seccomp_notif_resp);
		resp->id = req->id;
		nr = req->data.nr;
		pid = (pid_t)req->pid;
		/* The caller may be gone and its id taken: the answer is
		 * written only while the notification is live. */
		if (ioctl(sv_listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &req->id))
			continue;
		if (nr == SYS_clock_gettime && sim((long)req->data.args[0]) &&
		    read_clock(is_rt((long)req->data.args[0]), &ns)) {
			struct timespec ts = ns_ts(ns);

			ok = sv_poke(pid, req->data.args[1], &ts, sizeof(ts));
		} else if (nr == SYS_gettimeofday && sim(CLOCK_REALTIME) && read_clock(true, &ns)) {
			struct timespec ts = ns_ts(ns);
			struct timeval tv = { ts.tv_sec, ts.tv_nsec / 1000 };

			ok = !req->data.args[0] || sv_poke(pid, req->data.args[0], &tv, sizeof(tv));
			if (req->data.args[1]) {
				uint64_t z = 0;

				sv_poke(pid, req->data.args[1], &z, sizeof(z));
			}
		} else if (nr == SYS_time && sim(CLOCK_REALTIME) && read_clock(true, &ns)) {
			time_t t = ns_ts(ns).tv_sec;

			if (req->data.args[0])
				ok = sv_poke(pid, req->data.args[0], &t, sizeof(t));
			resp->val = t;
		} else if ((nr == SYS_alarm || nr == SYS_setitimer || nr == SYS_getitimer) &&
			   sv_answer_itimer(pid, nr, (const uint64_t *)req->data.args, &val, &ok)) {
			resp->val = val;
		} else if (nr == SYS_timer_create || nr == SYS_timer_settime ||
			   nr == SYS_timer_gettime || nr == SYS_timer_getoverrun ||
			   nr == SYS_timer_delete || nr == SYS_timerfd_create ||
			   nr == SYS_timerfd_settime || nr == SYS_timerfd_gettime ||
			   nr == SYS_clock_getres) {
			bool sent;
			int r = sv_answer_timer(req, &val, &sent);

			if (sent)
				continue;
			if (r == 1)
				resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
			else if (r < 0)
				resp->error = r;
			else
				resp->val = val;
		} else {
			/* Not a simulated clock: the kernel's call. */
			resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
		}
		if (!ok)
			resp->error = -EFAULT;
		ioctl(sv_listener, SECCOMP_IOCTL_NOTIF_SEND, resp);
	}
	free(req);
	free(resp);
	return NULL;
}

/* In the child: the filter, and its listener's descriptor sent to the
 * supervisor on @sock (no descriptor: reads go to the tracer). */
int sv_install_filter(int sock)
{
	struct sock_filter f[SHIM_FILTER_MAX];
	struct sock_fprog fp;
	char cbuf[CMSG_SPACE(sizeof(int))], one = 1;
	struct iovec iov = { &one, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	long fd;

	fp.filter = f;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -errno;
	fp.len = (unsigned short)shim_filter_build(f, SECCOMP_RET_TRACE, SECCOMP_RET_USER_NOTIF,
						   false);
	fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &fp);
	if (fd < 0) {
		fp.len = (unsigned short)shim_filter_build(f, SECCOMP_RET_TRACE, SECCOMP_RET_TRACE,
							   false);
		if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp))
			return -errno;
	} else {
		struct cmsghdr *c;

		memset(cbuf, 0, sizeof(cbuf));
		m.msg_control = cbuf;
		m.msg_controllen = sizeof(cbuf);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &(int){ (int)fd }, sizeof(int));
	}
	if (sendmsg(sock, &m, 0) != 1)
		return -errno;
	if (fd >= 0)
		close((int)fd);
	return 0;
}

/* The listener the child sent, or -1. */
int sv_receive_listener(int sock)
{
	char cbuf[CMSG_SPACE(sizeof(int))], one;
	struct iovec iov = { &one, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c;
	int fd = -1;

	if (recvmsg(sock, &m, MSG_CMSG_CLOEXEC) != 1)
		return -1;
	c = CMSG_FIRSTHDR(&m);
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
		memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

#endif
