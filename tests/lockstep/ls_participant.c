/* SPDX-License-Identifier: MIT */
/*
 * A lockstep participant for the end-to-end tests (lockstep_e2e.py).
 *
 *   ls-participant CLOCK WHO PERIOD END [--dir DIR --peers A,B,...] [--log FILE]
 *                  [--work-us N]
 *
 * Joins CLOCK as WHO and steps at every multiple of PERIOD (durations in
 * ns) up to END, then leaves. With --dir it binds DIR/WHO.sock (a Unix
 * datagram socket) and, at each step T, sends "WHO@T" to every peer and
 * takes in what arrived. The log line for step T lists the messages
 * stamped before T, ordered: the lockstep guarantee says each of them has
 * arrived by then, so the log is the same in every run. A message stamped
 * T or later is kept for a later step. With --work-us it sleeps N us of
 * real time at each step before granting the next (work the panel's and
 * trace's tests can see).
 * Exit: 0; 1 a lockstep call failed (printed); 2 usage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <shmclock/lockstep.h>

struct msg {
	int64_t t;
	char who[128];
};

static struct msg pending[4096];
static int npending;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int cmp(const void *a, const void *b)
{
	const struct msg *x = a, *y = b;

	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	return strcmp(x->who, y->who);
}

/* Under lock: a message is either in the socket or in pending, never in
 * between, when a step looks. */
static void take_in(int fd)
{
	char buf[128];
	ssize_t n;

	while ((n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT)) > 0) {
		char *at;

		buf[n] = 0;
		at = strchr(buf, '@');
		if (!at || npending >= (int)(sizeof(pending) / sizeof(pending[0])))
			continue;
		*at = 0;
		snprintf(pending[npending].who, sizeof(pending[npending].who), "%s", buf);
		pending[npending++].t = strtoll(at + 1, NULL, 10);
	}
}

static void *receiver(void *arg)
{
	struct pollfd pfd = { .fd = *(int *)arg, .events = POLLIN };

	while (poll(&pfd, 1, -1) >= 0) {
		pthread_mutex_lock(&lock);
		take_in(pfd.fd);
		pthread_mutex_unlock(&lock);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	const char *dir = NULL, *peers = NULL, *logpath = NULL;
	struct sockaddr_un self = { .sun_family = AF_UNIX };
	shmclock_lockstep_t *p;
	int64_t period, end, t, work_us = 0;
	FILE *log = NULL;
	int fd = -1, r;

	if (argc < 5) {
		fprintf(stderr, "usage: ls-participant CLOCK WHO PERIOD END [--dir DIR --peers A,B] [--log FILE] [--work-us N]\n");
		return 2;
	}
	period = strtoll(argv[3], NULL, 10);
	end = strtoll(argv[4], NULL, 10);
	for (int i = 5; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--dir"))
			dir = argv[i + 1];
		else if (!strcmp(argv[i], "--peers"))
			peers = argv[i + 1];
		else if (!strcmp(argv[i], "--log"))
			logpath = argv[i + 1];
		else if (!strcmp(argv[i], "--work-us"))
			work_us = strtoll(argv[i + 1], NULL, 10);
	}
	if (period <= 0)
		return 2;
	if (dir) {
		fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		snprintf(self.sun_path, sizeof(self.sun_path), "%s/%s.sock", dir, argv[2]);
		unlink(self.sun_path);
		if (fd < 0 || bind(fd, (struct sockaddr *)&self, sizeof(self)) < 0) {
			perror("ls-participant: bind");
			return 1;
		}
	}
	if (fd >= 0) {
		pthread_t th;

		pthread_create(&th, NULL, receiver, &fd);
		pthread_detach(th);
	}
	if (logpath && !(log = fopen(logpath, "w"))) {
		perror(logpath);
		return 1;
	}
	r = shmclock_lockstep_join(argv[1], argv[2], &p);
	if (r) {
		fprintf(stderr, "ls-participant %s: join: %s\n", argv[2],
			shmclock_lockstep_strerror(NULL, r));
		return 1;
	}
	/* Ready: the test starts the next participant (or the clock) now. */
	printf("joined %" PRId64 "\n", shmclock_lockstep_joined_at(p));
	fflush(stdout);
	for (t = (shmclock_lockstep_joined_at(p) / period + 1) * period; t <= end; t += period) {
		r = shmclock_lockstep_advance(p, t, shmclock_sec(30));
		if (r) {
			fprintf(stderr, "ls-participant %s: advance to %" PRId64 ": %s\n", argv[2], t,
				shmclock_strerror(r));
			return 1;
		}
		if (work_us > 0) {
			struct timespec ts = { work_us / 1000000, (work_us % 1000000) * 1000 };

			nanosleep(&ts, NULL);
		}
		if (fd >= 0) {
			int keep = 0;

			pthread_mutex_lock(&lock);
			take_in(fd);
			qsort(pending, (size_t)npending, sizeof(pending[0]), cmp);
			if (log)
				fprintf(log, "%" PRId64 " %s:", t, argv[2]);
			for (int i = 0; i < npending; i++) {
				if (pending[i].t < t) {
					if (log)
						fprintf(log, " %s@%" PRId64, pending[i].who, pending[i].t);
				} else {
					pending[keep++] = pending[i];
				}
			}
			npending = keep;
			pthread_mutex_unlock(&lock);
			if (log)
				fputc('\n', log);
		}
		if (fd >= 0 && peers) {
			char list[1024], *save = NULL, msg[128];
			int len = snprintf(msg, sizeof(msg), "%s@%" PRId64, argv[2], t);

			snprintf(list, sizeof(list), "%s", peers);
			for (char *peer = strtok_r(list, ",", &save); peer; peer = strtok_r(NULL, ",", &save)) {
				struct sockaddr_un to = { .sun_family = AF_UNIX };

				snprintf(to.sun_path, sizeof(to.sun_path), "%s/%s.sock", dir, peer);
				if (sendto(fd, msg, (size_t)len, 0, (struct sockaddr *)&to, sizeof(to)) < 0 &&
				    errno != ECONNREFUSED && errno != ENOENT)
					fprintf(stderr, "ls-participant %s: send to %s: %s\n", argv[2], peer,
						strerror(errno));
			}
		} else if (log && fd < 0) {
			fprintf(log, "%" PRId64 " %s\n", t, argv[2]);
		}
	}
	shmclock_lockstep_leave(p);
	if (log)
		fclose(log);
	if (fd >= 0)
		unlink(self.sun_path);
	return 0;
}
