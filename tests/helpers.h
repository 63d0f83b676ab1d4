/* SPDX-License-Identifier: MIT */
/*
 * Test helpers: unique clock names per run, cleanup even when a test fails,
 * children that die with their test, memory shared across fork().
 */
#ifndef SHMCLOCK_TEST_HELPERS_H
#define SHMCLOCK_TEST_HELPERS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <shmclock/shmclock.h>
#include <shmclock/writer.h>

#define MAX_CHILDREN 64

static char test_names[8][65];
static int test_nnames;
static pid_t test_children[MAX_CHILDREN];
static int test_nchildren;

static inline int64_t now_mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void sleep_ns(int64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000), (long)(ns % 1000000000) };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* A clock name no other run or test uses; removed by test_cleanup(). */
static inline const char *test_clock_name(void)
{
	char *n = test_names[test_nnames++ % 8];

	snprintf(n, 65, "test-%d-%d-%ld", (int)getpid(), test_nnames, (long)(now_mono() % 1000000));
	return n;
}

/* Memory that parent and forked children share. */
static inline void *shared_alloc(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		abort();
	}
	return p;
}

/* fork() a child that is killed if the test process dies. */
static inline pid_t test_fork(void)
{
	pid_t parent = getpid();
	pid_t pid = fork();

	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(99);
		return 0;
	}
	if (pid > 0 && test_nchildren < MAX_CHILDREN)
		test_children[test_nchildren++] = pid;
	return pid;
}

/* Wait for a child; returns its exit status, or 128 + signal. */
static inline int test_wait(pid_t pid)
{
	int st;

	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	for (int i = 0; i < test_nchildren; i++)
		if (test_children[i] == pid)
			test_children[i] = 0;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* test_wait() with a deadline of real time: -1 when the child was still
 * running at @timeout_ns (it is killed and reaped then). */
static inline int test_wait_for(pid_t pid, int64_t timeout_ns)
{
	int64_t t0 = now_mono();
	int st;
	pid_t r;

	while ((r = waitpid(pid, &st, WNOHANG)) == 0 && now_mono() - t0 < timeout_ns)
		sleep_ns(10000000);
	if (r == 0) {
		kill(pid, SIGKILL);
		test_wait(pid);
		return -1;
	}
	if (r < 0)
		return test_wait(pid);
	for (int i = 0; i < test_nchildren; i++)
		if (test_children[i] == pid)
			test_children[i] = 0;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Criterion .fini: runs after a failed assertion too. */
static inline void test_cleanup(void)
{
	for (int i = 0; i < test_nchildren; i++) {
		if (test_children[i] > 0) {
			kill(test_children[i], SIGKILL);
			waitpid(test_children[i], NULL, 0);
		}
	}
	test_nchildren = 0;
	for (int i = 0; i < test_nnames && i < 8; i++) {
		char ls[640];

		shmclock_unlink(test_names[i]);
		/* A lockstep segment a killed writer left behind. */
		snprintf(ls, sizeof(ls), "/dev/shm/shmclock-lockstep.%s", test_names[i]);
		unlink(ls);
	}
	test_nnames = 0;
}

/* Raise a shared 64-bit maximum; returns the value before. */
static inline int64_t atomic_max(_Atomic int64_t *m, int64_t v)
{
	int64_t cur = atomic_load_explicit(m, memory_order_acquire);

	while (cur < v &&
	       !atomic_compare_exchange_weak_explicit(m, &cur, v, memory_order_acq_rel,
						      memory_order_acquire))
		;
	return cur;
}

/* The clock's page mapped writable, as only a writer (or a test playing
 * one) may. NULL if it cannot be. */
static inline void *map_clock_rw(const char *name)
{
	char path[128];
	void *seg;
	int fd;

	snprintf(path, sizeof(path), "/dev/shm/shmclock.%s", name);
	fd = open(path, O_RDWR);
	if (fd < 0)
		return NULL;
	seg = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	return seg == MAP_FAILED ? NULL : seg;
}

#endif
