/* SPDX-License-Identifier: MIT */
/* The clock thread's scheduling (thread_sched.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/prctl.h>

#include "log.h"
#include "thread_sched.h"

/*
 * The kernel may fire a sleeping thread's timer up to its timer slack late
 * (50 us by default) to batch wake-ups: at 10 kHz that is half a period.
 * A tight slack costs CPU, though (measured at 100 Hz: 0.2% of a core with
 * 50 us, 0.4% with 1 us). So the slack follows the shortest period the
 * thread keeps: 1/200 of it, from 1 us to the default 50 us.
 */
void thread_set_slack(int64_t period_ns)
{
	int64_t slack = period_ns / 200;

	slack = slack < 1000 ? 1000 : slack > 50000 ? 50000 : slack;
	if (prctl(PR_SET_TIMERSLACK, (unsigned long)slack, 0, 0, 0) < 0)
		log_msg(LOG_DEBUG, "clock thread: timer slack: %s", strerror(errno));
}

/* Not permitted (no CAP_SYS_NICE, or RLIMIT_RTPRIO) is a warning: the
 * clock works without it, only with more jitter under CPU load. */
void thread_set_sched(int prio)
{
	struct sched_param sp = { .sched_priority = prio };
	int r = pthread_setschedparam(pthread_self(), prio ? SCHED_FIFO : SCHED_OTHER, &sp);

	if (r)
		log_msg(LOG_WARN, "SchedPriority %d: %s (needs CAP_SYS_NICE); the clock thread keeps "
				  "its scheduling", prio, strerror(r));
	else if (prio)
		log_msg(LOG_INFO, "clock thread: SCHED_FIFO priority %d", prio);
}
