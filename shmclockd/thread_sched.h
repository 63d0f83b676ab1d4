/* SPDX-License-Identifier: MIT */
/* The calling (clock) thread's scheduling: its timer slack and policy. */
#ifndef SHMCLOCKD_THREAD_SCHED_H
#define SHMCLOCKD_THREAD_SCHED_H

#include <stdint.h>

/* Timer slack for the shortest period the thread keeps, @period_ns. */
void thread_set_slack(int64_t period_ns);

/* SCHED_FIFO at @prio, or normal for 0; not permitted is a warning. */
void thread_set_sched(int prio);

#endif
