/* SPDX-License-Identifier: MIT */
/*
 * waits: what a program waiting under the preload shim costs while the
 * clock is paused. A wait with a timeout (poll, select, epoll, a semaphore,
 * a condition variable) cannot sleep on the clock's futex, since it must
 * also see its fd or its lock: the shim waits in real-time slices of at most
 * 20 ms and re-plans from the clock after each (readers/preload/core.c,
 * dl_slice). A paused clock therefore costs a waiter ~50 wake-ups a second;
 * sleeps (nanosleep) do sleep on the futex and cost none.
 *
 * Each contender is a child process (this program again, under the shim)
 * that waits an hour of simulated time on a paused clock; we count its
 * wake-ups (context switches) and its CPU time (schedstat, ns) over the run.
 * Baseline, measured in the same run: the same epoll wait without the shim
 * (the kernel alone: no wake-ups).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

static const char *const modes[] = { "epoll_wait", "poll", "select", "sem_clockwait",
				     "cond_clockwait", "nanosleep" };

/* The child: one wait of an hour. */
int bench_waits_child(const char *mode)
{
	int p[2], ep;
	struct timespec hour = { 3600, 0 }, abs;

	if (pipe(p))
		return 1;
	if (!strcmp(mode, "epoll_wait")) {
		struct epoll_event ev = { .events = EPOLLIN }, out;

		ep = epoll_create1(0);
		epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev);
		return epoll_wait(ep, &out, 1, 3600 * 1000) < 0;
	}
	if (!strcmp(mode, "poll")) {
		struct pollfd f = { p[0], POLLIN, 0 };

		return poll(&f, 1, 3600 * 1000) < 0;
	}
	if (!strcmp(mode, "select")) {
		fd_set rd;
		struct timeval tv = { 3600, 0 };

		FD_ZERO(&rd);
		FD_SET(p[0], &rd);
		return select(p[0] + 1, &rd, NULL, NULL, &tv) < 0;
	}
	clock_gettime(CLOCK_MONOTONIC, &abs);
	abs.tv_sec += 3600;
	if (!strcmp(mode, "sem_clockwait")) {
		sem_t s;

		sem_init(&s, 0, 0);
		return sem_clockwait(&s, CLOCK_MONOTONIC, &abs) < 0 && errno != ETIMEDOUT;
	}
	if (!strcmp(mode, "cond_clockwait")) {
		pthread_cond_t c = PTHREAD_COND_INITIALIZER;
		pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;

		pthread_mutex_lock(&m);
		return pthread_cond_clockwait(&c, &m, CLOCK_MONOTONIC, &abs) == EINVAL;
	}
	return nanosleep(&hour, NULL) < 0;
}

/* Context switches and CPU ns of every thread of @pid. */
static bool usage_of(pid_t pid, long long *switches, long long *cpu_ns)
{
	char path[64];
	struct dirent *e;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return false;
	*switches = *cpu_ns = 0;
	while ((e = readdir(d))) {
		char p[320], line[256];
		long long run = 0;
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "/proc/%d/task/%s/schedstat", (int)pid, e->d_name);
		if ((f = fopen(p, "r"))) {
			if (fscanf(f, "%lld", &run) == 1)
				*cpu_ns += run;
			fclose(f);
		}
		snprintf(p, sizeof(p), "/proc/%d/task/%s/status", (int)pid, e->d_name);
		if ((f = fopen(p, "r"))) {
			while (fgets(line, sizeof(line), f)) {
				long long v;

				if (sscanf(line, "voluntary_ctxt_switches: %lld", &v) == 1 ||
				    sscanf(line, "nonvoluntary_ctxt_switches: %lld", &v) == 1)
					*switches += v;
			}
			fclose(f);
		}
	}
	closedir(d);
	return true;
}

struct result {
	double wakeups, cpu_us;
};

static int measure(const char *mode, const char *shim, const char *clock, double secs,
		   struct result *res)
{
	long long s0, c0, s1, c1;
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (pid == 0) {
		if (shim) {
			setenv("LD_PRELOAD", shim, 1);
			setenv("SHMCLOCK_NAME", clock, 1);
			setenv("SHMCLOCK_CLOCKS", "all", 1);
			setenv("SHMCLOCK_QUIET", "1", 1);
		}
		execl("/proc/self/exe", "shmclock-bench", "__waits-child", mode, (char *)NULL);
		_exit(127);
	}
	bench_sleep_s(0.3); /* start-up, and into the wait */
	if (!usage_of(pid, &s0, &c0)) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return -1;
	}
	bench_sleep_s(secs);
	if (!usage_of(pid, &s1, &c1) || waitpid(pid, NULL, WNOHANG) != 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return -1; /* it did not wait */
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	res->wakeups = (double)(s1 - s0) / secs;
	res->cpu_us = (double)(c1 - c0) / secs / 1e3;
	return 0;
}

int bench_waits(const struct bench_opts *o, cJSON *out)
{
	double secs = o->duration_s > 0 ? o->duration_s : o->quick ? 1.0 : 5.0;
	cJSON *results = cJSON_AddArrayToObject(out, "results");
	char name[64], path[4096];
	const char *shim;
	shmclock_writer_t *w;
	shmclock_t *clk;
	struct result base, r, poll_r = { 0, 0 };
	int rc = 0;

	shim = bench_find("SHMCLOCK_PRELOAD", "readers", "libshmclock-preload.so",
			  SHMCLOCK_PRELOAD_INSTALLED, path, sizeof(path));
	if (access(shim, R_OK)) {
		fprintf(stderr, "shmclock-bench: waits: no preload shim at %s\n", shim);
		return 1;
	}
	if (bench_clock_open(name, sizeof(name), &w, &clk))
		return 1;
	shmclock_writer_pause(w);
	printf("waits: a waiter on a paused clock under the preload shim, %.1f s each\n\n", secs);
	printf("  %-40s %12s %12s %14s\n", "contender", "wake-ups/s", "CPU us/s", "CPU us/wake-up");
	if (measure("epoll_wait", NULL, name, secs, &base)) {
		fprintf(stderr, "shmclock-bench: waits: the baseline did not wait\n");
		rc = 1;
		goto out;
	}
	printf("  %-40s %12.1f %12.1f %14s\n", "epoll_wait without the shim (baseline)",
	       base.wakeups, base.cpu_us, "-");
	cJSON_AddNumberToObject(out, "seconds", secs);
	{
		cJSON *b = cJSON_CreateObject();

		cJSON_AddStringToObject(b, "name", "epoll_wait, no shim");
		cJSON_AddNumberToObject(b, "wakeups_per_s", base.wakeups);
		cJSON_AddNumberToObject(b, "cpu_us_per_s", base.cpu_us);
		cJSON_AddItemToArray(results, b);
	}
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		char label[64];
		cJSON *j;

		if (measure(modes[i], shim, name, secs, &r)) {
			fprintf(stderr, "shmclock-bench: waits: %s under the shim did not wait\n",
				modes[i]);
			rc = 1;
			continue;
		}
		if (!strcmp(modes[i], "poll"))
			poll_r = r;
		snprintf(label, sizeof(label), "%s under the shim", modes[i]);
		if (r.wakeups >= 1)
			printf("  %-40s %12.1f %12.1f %14.2f\n", label, r.wakeups, r.cpu_us,
			       r.cpu_us / r.wakeups);
		else
			printf("  %-40s %12.1f %12.1f %14s\n", label, r.wakeups, r.cpu_us, "-");
		j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "name", modes[i]);
		cJSON_AddNumberToObject(j, "wakeups_per_s", r.wakeups);
		cJSON_AddNumberToObject(j, "cpu_us_per_s", r.cpu_us);
		if (r.wakeups >= 1)
			cJSON_AddNumberToObject(j, "cpu_us_per_wakeup", r.cpu_us / r.wakeups);
		if (poll_r.wakeups > 0)
			cJSON_AddNumberToObject(j, "wakeups_vs_poll", r.wakeups / poll_r.wakeups);
		cJSON_AddItemToArray(results, j);
	}
	printf("\n  slices: at most 20 ms of real time each, re-planned from the clock; a paused\n"
	       "  clock costs a waiter the wake-ups above and the CPU share they add up to.\n");
out:
	bench_clock_close(name, w, clk);
	return rc;
}
