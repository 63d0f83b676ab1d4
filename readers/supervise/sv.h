/* SPDX-License-Identifier: MIT */
/*
 * The supervisor's insides (readers/supervise.c and the files beside this
 * header), one job per file:
 *   supervise.c  entry: the tracer process and its loop, the report pipe
 *                to shmclock-run (enum sv_report)
 *   procs.c      the tracee's memory, its threads, the process table
 *                (static or not) and the hidden vDSO
 *   waits.c      the calls the tracer answers: reads without a listener,
 *                and waits re-planned in slices of real time
 *   listener.c   the seccomp listener's thread (reads, timers) and the
 *                filter that feeds it
 *   timers.c     ITIMER_REAL, POSIX timers and timerfds in simulated time
 *   escapes.c    rdtsc and rdtscp trapped, emulated and reported
 * x86-64 only (supervise.c says so elsewhere).
 */
#ifndef SHMCLOCK_SUPERVISE_SV_H
#define SHMCLOCK_SUPERVISE_SV_H

#define PROG "shmclock-run"

#if defined(__x86_64__)
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>
#include <time.h>

#include <shmclock/shmclock.h>

#include "clocks.h"

#define NS 1000000000LL
#define SLICE_NS 20000000LL
#define SCRATCH_BELOW 160


/* What a thread is doing for the tracer. */
struct thr {
	pid_t tid;
	bool used;
	bool known;  /* has stopped once (a new one starts with SIGSTOP) */
	bool waiting; /* a re-planned wait is under way */
	bool in_slice; /* its slice runs: the exit stop comes next */
	long nr;
	struct user_regs_struct orig; /* the program's registers at the call */
	bool mono;     /* deadline on the jump-free timeline, else the world's */
	int64_t target;
	int64_t start; /* jump-free time at the start (rem of nanosleep) */
	/* select, pselect6: the program's three sets as it passed them
	 * (each slice starts from them; the kernel rewrites them), @setlen
	 * bytes each, NULL for a set it did not pass. */
	uint8_t *sets[3];
	size_t setlen;
};

/* The clock answered from and the SHMCLOCK_CLOCKS mask, whether to be
 * quiet (supervise.c sets them before anything runs). */
extern shmclock_t *sv_clk;
extern unsigned sv_mask;
extern bool sv_quiet;
/* The seccomp listener's descriptor (listener.c), -1: none (the tracer
 * answers the reads). */
extern int sv_listener;
/* Signalled when an itimer, POSIX timer or timerfd is armed (timers.c). */
extern pthread_cond_t sv_it_cond;



static inline bool is_rt(long id)
{
	return (SHMCLOCK_G_REALTIME >> id) & 1;
}

static inline bool sim(long id)
{
	return id >= 0 && id < 32 && (sv_mask & (1u << id));
}

static inline bool read_clock(bool rt, int64_t *ns)
{
	for (int i = 0; i < 1000; i++) {
		int r = rt ? shmclock_now_unix(sv_clk, ns) : shmclock_now_monotonic(sv_clk, ns);

		if (r == 0 || r == -ESTALE)
			return true;
		if (r != -EAGAIN)
			return false;
	}
	return false;
}

static inline int64_t ts_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * NS + ts->tv_nsec;
}

static inline struct timespec ns_ts(int64_t ns)
{
	struct timespec ts = { (time_t)(ns / NS), (long)(ns % NS) };

	if (ts.tv_nsec < 0) {
		ts.tv_nsec += NS;
		ts.tv_sec--;
	}
	return ts;
}

/* procs.c */
struct thr *sv_find(pid_t tid, bool add);
bool sv_peek(pid_t pid, uintptr_t addr, void *buf, size_t len);
bool sv_poke(pid_t pid, uintptr_t addr, const void *buf, size_t len);
pid_t sv_tgid_of(pid_t tid);
bool sv_proc_static_tgid(pid_t tgid);
bool sv_proc_static(pid_t tid);
void sv_proc_forget(pid_t tgid);
void sv_hide_vdso(pid_t pid);

/* waits.c */
void sv_on_call(pid_t pid, struct thr *t);
void sv_on_slice_exit(pid_t pid, struct thr *t);
void sv_between_slices(pid_t pid, struct thr *t);

/* timers.c */
bool sv_answer_itimer(pid_t pid, long nr, const uint64_t *args, long *val, bool *ok);
void sv_pt_forget(pid_t tgid);
int sv_answer_timer(const struct seccomp_notif *req, long *val, bool *sent);
void *sv_fire_itimers(void *arg);
void sv_itimer_exit(pid_t tgid);

/* listener.c */
void *sv_answer_reads(void *arg);
int sv_install_filter(int sock);
int sv_receive_listener(int sock);

/* escapes.c */
void sv_esc_forget(pid_t tgid);
bool sv_esc_emulate(pid_t pid);

#endif
#endif
