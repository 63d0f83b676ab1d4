/* SPDX-License-Identifier: MIT */
/*
 * A kernel without futex_waitv (Linux < 5.16: Ubuntu 22.04, where ROS 2
 * Humble runs), on any kernel: a seccomp filter that makes the system call
 * fail with ENOSYS, as an old kernel does. Inherited by every child and
 * kept across exec, so a daemon the test starts sees it too.
 */
#ifndef SHMCLOCK_TEST_NO_WAITV_H
#define SHMCLOCK_TEST_NO_WAITV_H

#include <errno.h>
#include <stddef.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif

#if defined(__x86_64__)
#define NO_WAITV_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NO_WAITV_ARCH AUDIT_ARCH_AARCH64
#endif

/* 0, or a reason why the filter cannot be set (the caller skips). */
static inline const char *deny_futex_waitv(void)
{
#ifdef NO_WAITV_ARCH
	struct sock_filter f[] = {
		/* Another architecture's call numbers (x32, i386): allowed. */
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NO_WAITV_ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_futex_waitv, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return "prctl(PR_SET_NO_NEW_PRIVS) failed";
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
		return "seccomp filters are not available";
	errno = 0;
	if (syscall(SYS_futex_waitv, NULL, 0, 0, NULL, 0) != -1 || errno != ENOSYS)
		return "the seccomp filter did not deny futex_waitv";
	return NULL;
#else
	return "no seccomp filter for this architecture in the test";
#endif
}

#endif
