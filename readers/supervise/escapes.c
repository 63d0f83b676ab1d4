/* SPDX-License-Identifier: MIT */
/*
 * The escape report (escapes.h) of the supervised tree: rdtsc and rdtscp
 * trapped, emulated with the tracer's own counter, counted by site.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <stdatomic.h>

#include "escapes.h"
#include "supervise.h"
#include "sv.h"

#if defined(__x86_64__)

/*
 * The escape report (escapes.h): the child sets PR_SET_TSC(PR_TSC_SIGSEGV)
 * before its exec (the flag survives exec, fork and clone), so every rdtsc
 * and rdtscp of the tree faults; the tracer sees the SIGSEGV at its
 * signal-delivery stop, reads the instruction at RIP, emulates it with its
 * own counter, steps over it, counts it and suppresses the signal. Any
 * other SIGSEGV is delivered as it was. Dynamic programs of the tree (the
 * shim's) are handled here too: the tracer sees their faults first.
 */

/* Faulting addresses seen, by process (forgotten at its exec): the site. */
static struct {
	pid_t tgid;
	uint64_t rip;
	int site; /* escapes.h's slot; -1 none left, -2 the loader's */
} esc_seen[64];
static unsigned esc_nseen;

static long esc_fd_read(int fd, void *buf, unsigned long len)
{
	return read(fd, buf, len);
}

void sv_esc_forget(pid_t tgid)
{
	for (unsigned i = 0; i < sizeof(esc_seen) / sizeof(esc_seen[0]); i++)
		if (esc_seen[i].tgid == tgid)
			esc_seen[i].tgid = 0;
}

static void esc_count(pid_t pid, uint64_t rip, uint32_t kind)
{
	struct esc_page *pg = supervise_report;
	pid_t tgid = sv_tgid_of(pid);
	char path[64], obj[ESC_OBJ];
	uint64_t off = rip;
	unsigned i, n = sizeof(esc_seen) / sizeof(esc_seen[0]);
	int fd, site = -1;
	bool ok = false;

	for (i = 0; i < n; i++) {
		if (esc_seen[i].tgid != tgid || esc_seen[i].rip != rip)
			continue;
		site = esc_seen[i].site;
		if (site == -2) {
			atomic_fetch_add_explicit(&pg->loader, 1, memory_order_relaxed);
			return;
		}
		atomic_fetch_add_explicit(&pg->total, 1, memory_order_relaxed);
		if (site < 0)
			atomic_fetch_add_explicit(&pg->unplaced, 1, memory_order_relaxed);
		else
			atomic_fetch_add_explicit(&pg->site[site].count, 1, memory_order_relaxed);
		return;
	}
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ok = esc_where(fd, esc_fd_read, rip, obj, sizeof(obj), &off);
		close(fd);
	}
	if (!ok) {
		snprintf(obj, sizeof(obj), "[unknown]");
		off = rip;
	}
	if (esc_is_loader(obj)) {
		atomic_fetch_add_explicit(&pg->loader, 1, memory_order_relaxed);
		site = -2;
	} else {
		site = esc_record(pg, kind, obj, off, 1);
	}
	i = esc_nseen++ % n;
	esc_seen[i].tgid = tgid;
	esc_seen[i].rip = rip;
	esc_seen[i].site = site;
}

/* At @pid's SIGSEGV stop: whether it was a trapped rdtsc(p), emulated. */
bool sv_esc_emulate(pid_t pid)
{
	struct user_regs_struct r;
	siginfo_t si;
	uint8_t ins[3];
	uint32_t lo, hi, aux = 0, kind = 0;

	if (!supervise_report || ptrace(PTRACE_GETSIGINFO, pid, NULL, &si) ||
	    si.si_code != SI_KERNEL || ptrace(PTRACE_GETREGS, pid, NULL, &r) ||
	    !sv_peek(pid, r.rip, ins, 2) || ins[0] != 0x0f)
		return false;
	if (ins[1] == 0x31)
		kind = ESC_RDTSC;
	else if (ins[1] == 0x01 && sv_peek(pid, r.rip + 2, ins + 2, 1) && ins[2] == 0xf9)
		kind = ESC_RDTSCP;
	else
		return false;
	/* The tracer's own counter (its TSC is readable): the point is to
	 * report the read, not to simulate the counter. */
	if (kind == ESC_RDTSCP)
		__asm__ volatile("rdtscp" : "=a"(lo), "=d"(hi), "=c"(aux));
	else
		__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	r.rax = lo;
	r.rdx = hi;
	if (kind == ESC_RDTSCP)
		r.rcx = aux;
	r.rip += kind == ESC_RDTSCP ? 3 : 2;
	if (ptrace(PTRACE_SETREGS, pid, NULL, &r))
		return false;
	esc_count(pid, r.rip - (kind == ESC_RDTSCP ? 3 : 2), kind);
	return true;
}

#endif
