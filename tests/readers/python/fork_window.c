/* SPDX-License-Identifier: MIT */
/*
 * Preloaded by one case of test_concurrency.py: widens the window in which
 * glibc's pthread_create frees a reused thread stack's dynamic TLS blocks
 * without a lock fork() waits for (see tests/lib/test_fork_threads.c). Each
 * free() made inside a pthread_create returns 2 ms late, so a fork() in
 * another thread lands in that window whenever it can: a child then frees
 * those blocks a second time and aborts. Nothing else changes: the memory
 * is freed at once, by glibc's own free.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

/* glibc's free under its exported name: free itself is the one defined here. */
extern void __libc_free(void *p);

static _Atomic(create_fn) real_create;
static _Thread_local int in_create;

int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	create_fn f = atomic_load_explicit(&real_create, memory_order_relaxed);
	int r;

	if (!f) {
		void *sym = dlsym(RTLD_NEXT, "pthread_create");

		memcpy(&f, &sym, sizeof(f)); /* ISO C has no object-to-function cast */
		/* Any thread finds the same: no order needed. */
		atomic_store_explicit(&real_create, f, memory_order_relaxed);
	}
	in_create++;
	r = f(thread, attr, fn, arg);
	in_create--;
	return r;
}

void free(void *p)
{
	__libc_free(p);
	if (p && in_create) {
		struct timespec late = { 0, 2000000 };

		nanosleep(&late, NULL);
	}
}
