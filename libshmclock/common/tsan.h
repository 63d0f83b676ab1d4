/* SPDX-License-Identifier: MIT */
/*
 * ThreadSanitizer cannot see liburcu's orderings (rcu_assign_pointer,
 * rcu_dereference, the grace period, the wait-free queues' uatomic steps:
 * not C11 atomics to it). These tell it what they guarantee, on the address
 * of the entry concerned; they compile to nothing in other builds. Shared
 * by the library (its callback lists) and the daemon (its command queue).
 */
#ifndef SHMCLOCK_COMMON_TSAN_H
#define SHMCLOCK_COMMON_TSAN_H

#if defined(__SANITIZE_THREAD__)
#define SHMCLOCK_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SHMCLOCK_TSAN 1
#endif
#endif
#ifdef SHMCLOCK_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define shmclock__tsan_acquire(p) __tsan_acquire(p)
#define shmclock__tsan_release(p) __tsan_release(p)
#else
#define shmclock__tsan_acquire(p) ((void)(p))
#define shmclock__tsan_release(p) ((void)(p))
#endif

#endif
