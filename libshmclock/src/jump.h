/* SPDX-License-Identifier: MIT */
/* Jump callbacks and their delivery (jump.c), on a reader's handle. */
#ifndef SHMCLOCK_JUMP_H
#define SHMCLOCK_JUMP_H

#include <stdbool.h>

#include "clock.h"

void shmclock__jump_init(struct shmclock *clk);
void shmclock__jump_fini(struct shmclock *clk);
/* Deliver a pending jump (callbacks, then seen_key). Returns false, doing
 * nothing, when this thread is inside this clock's callbacks. */
bool shmclock__jump_deliver(struct shmclock *clk);
/* Puts a clock with callbacks on the list fork() keeps consistent: its
 * locks are usable in a child and its watcher goes on there. */
void shmclock__fork_track(struct shmclock *clk);
/* Whether this thread is @clk's watcher. */
bool shmclock__on_own_watcher(const struct shmclock *clk);
/* pthread_create for every thread the library starts: never while another
 * thread forks (see jump.c). Returns pthread_create's result. */
int shmclock__thread_start(pthread_t *thread, const pthread_attr_t *attr, void *(*fn)(void *),
			   void *arg);

#endif
