/* SPDX-License-Identifier: MIT */
/*
 * Reads of the time-stamp counter, which no shim can redirect: what
 * shmclock-run -v / --strict must report (preload_escapes.py, issue 33).
 * Built dynamic (preload-tsc) and static (preload-tsc-static).
 *
 *   rdtsc N [STATUS]   N rdtsc and N rdtscp (where the CPU has it), each
 *                      checked not to go backwards; prints "ok N", exits
 *                      STATUS (default 0)
 *   none               no counter, no clock; prints "ok 0"
 *   segv N             its own SIGSEGV handler (read back by sigaction),
 *                      N rdtsc, then a real NULL dereference that the
 *                      handler must catch: prints "caught"
 *   fork N             a child does "rdtsc N"; the parent waits, prints
 *                      "child ok" if it exited 0
 *   exec PROG ARG...   execv(PROG, [PROG, ARG...])
 */
#define _GNU_SOURCE
#include <cpuid.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t rdtsc(void)
{
	uint32_t lo, hi;

	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t)hi << 32 | lo;
}

static uint64_t rdtscp(void)
{
	uint32_t lo, hi, aux;

	__asm__ volatile("rdtscp" : "=a"(lo), "=d"(hi), "=c"(aux));
	return (uint64_t)hi << 32 | lo;
}

static bool have_rdtscp(void)
{
	unsigned a, b, c, d;

	return __get_cpuid(0x80000001, &a, &b, &c, &d) && (d & (1u << 27));
}

/* @n of each; 0 when the counter went backwards. */
static int reads(long n)
{
	uint64_t last = rdtsc(), now;
	bool p = have_rdtscp();
	int got = 1;

	for (long i = 1; i < n; i++, got++) {
		now = rdtsc();
		if (now < last)
			return 0;
		last = now;
	}
	for (long i = 0; p && i < n; i++) {
		now = rdtscp();
		if (now < last)
			return 0;
		last = now;
	}
	return got;
}

static sigjmp_buf back;

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	if (sig == SIGSEGV && si->si_addr == NULL)
		siglongjmp(back, 1);
	_exit(20);
}

int main(int argc, char **argv)
{
	long n = argc > 2 ? strtol(argv[2], NULL, 10) : 1;

	if (argc < 2) {
		fprintf(stderr, "usage: preload-tsc rdtsc N [STATUS] | none | segv N | fork N | "
				"exec PROG ARG...\n");
		return 2;
	}
	if (!strcmp(argv[1], "rdtsc")) {
		if (!reads(n)) {
			printf("the counter went backwards\n");
			return 1;
		}
		printf("ok %ld\n", n);
		return argc > 3 ? atoi(argv[3]) : 0;
	}
	if (!strcmp(argv[1], "none")) {
		printf("ok 0\n");
		return 0;
	}
	if (!strcmp(argv[1], "segv")) {
		struct sigaction sa = { .sa_sigaction = on_segv, .sa_flags = SA_SIGINFO }, old;
		volatile int *null = NULL;

		sigemptyset(&sa.sa_mask);
		if (sigaction(SIGSEGV, &sa, NULL) || sigaction(SIGSEGV, NULL, &old) ||
		    old.sa_sigaction != on_segv) {
			printf("sigaction does not show the program's own handler\n");
			return 1;
		}
		if (!reads(n))
			return 1;
		if (sigsetjmp(back, 1) == 0) {
			(void)*null;
			printf("no fault\n");
			return 1;
		}
		printf("caught\n");
		return 0;
	}
	if (!strcmp(argv[1], "fork")) {
		pid_t c;
		int st;

		fflush(stdout);
		c = fork();
		if (c == 0)
			_exit(reads(n) ? 0 : 1);
		if (c < 0 || waitpid(c, &st, 0) != c)
			return 1;
		printf(WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "child ok\n" : "child failed\n");
		return 0;
	}
	if (!strcmp(argv[1], "exec") && argc > 2) {
		fflush(stdout);
		execv(argv[2], argv + 2);
		perror("execv");
		return 127;
	}
	fprintf(stderr, "preload-tsc: unknown mode %s\n", argv[1]);
	return 2;
}
