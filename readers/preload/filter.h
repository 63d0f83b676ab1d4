/* SPDX-License-Identifier: MIT */
/*
 * The seccomp filter of the time system calls (x86-64), shared by the
 * shim's trap (readers/preload/trap.c: SECCOMP_RET_TRAP, answered in the
 * process) and shmclock-run's supervisor (readers/supervise.c:
 * SECCOMP_RET_TRACE for waits, answered by the tracer, and
 * SECCOMP_RET_USER_NOTIF for reads, answered by its listener). Both let through the calls
 * made from the gadget's page, the shim's own.
 */
#ifndef SHMCLOCK_PRELOAD_FILTER_H
#define SHMCLOCK_PRELOAD_FILTER_H

#include <stdbool.h>
#include <stdint.h>
#include <linux/filter.h>

/* The gadget's page: the same in every process, so that a filter a child
 * inherits across exec still lets the child's own shim through. 60 TiB up,
 * below where Linux places mappings top-down even with 32 bits of ASLR,
 * above where programs and Go's arenas (0xc000000000) go. */
#define SHIM_GADGET_ADDR 0x3c10c0000000UL
/* clock_getres(SHIM_PROBE_ID, NULL) fails with SHIM_PROBE_ERRNO only under
 * the shim's filter: a process sees whether it inherited it. */
#define SHIM_PROBE_ID 0x5c10c1c5
#define SHIM_PROBE_ERRNO 55 /* ENOANO */
#define SHIM_FILTER_MAX 160

/*
 * Writes the program into @out (SHIM_FILTER_MAX entries) and returns its
 * length. @action is what a time call with a timeout gets, @read_action
 * what a read (clock_gettime, gettimeofday, time) gets;
 * @shim adds the probe and what the shim's trap needs besides:
 * rt_sigaction(SIGSYS), rt_sigprocmask, execve(at), and the timer calls;
 * without it (the supervisor) the POSIX timer, timerfd and clock_getres
 * calls get @read_action too.
 */
unsigned shim_filter_build(struct sock_filter *out, uint32_t action, uint32_t read_action,
			   bool shim);

#endif
