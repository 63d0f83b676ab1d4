/* SPDX-License-Identifier: MIT */
/*
 * The escape report (shmclock-run -v / --strict, issue 33): the program's
 * reads of the CPU's time-stamp counter, which no shim can redirect, are
 * counted with where they happened, in the run's report page (escapes.h).
 *
 * How: PR_SET_TSC(PR_TSC_SIGSEGV) makes rdtsc and rdtscp fault in this
 * thread and every thread and child it starts afterwards (the kernel
 * copies the flag at clone and fork, and keeps it across exec: trap.c
 * re-enables the counter just before an exec, the new program's shim
 * takes over). The SIGSEGV handler decodes the instruction at the faulting
 * address; for one of the two, it reads the real counter (re-enabling it
 * for that one instruction: the point is to report, not to simulate the
 * counter), writes the registers, steps over it and counts it. Any other
 * SIGSEGV goes to the program's own action: trap.c keeps it aside, as it
 * keeps SIGSYS's (Go's runtime, Mono, the JVM install their own handler).
 *
 * The vDSO itself executes rdtsc: while the report is on, the shim reads
 * the real clocks it needs (and the clocks --clocks leaves real, for libc's
 * callers) with the system call (through the gadget: it never traps), so a
 * fault in the vDSO is a read of real time the shim did not make: glibc's
 * internal ones (libc calls the vDSO without going through its exported
 * clock_gettime) or a program's direct vDSO call for a clock the shim
 * leaves real. Those are counted, at "[vdso]".
 * The dynamic loader's own rdtsc (glibc's ld.so times itself for
 * LD_DEBUG=statistics) are emulated and not counted.
 *
 * Needs the system-call trap (exec, rt_sigaction and rt_sigprocmask go
 * through it); shmclock-run turns it on with the report. x86-64 only.
 */
#include "preload.h"

#include "escapes.h"

#if defined(__x86_64__)

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

_Atomic bool shim_esc_on;
static struct esc_page *page;
/* This process started with the counter trapped: under the supervisor,
 * whose tracer answers the faults (and counts). */
static bool inherited;

/*
 * Before anything of the shim reads a clock (libshmclock's own constructor
 * probes the vDSO, at priority 102): a trap inherited from the supervisor
 * is lifted until shim_esc_setup() sets the shim's own, so the shim's
 * reads during set-up are not counted as the program's. Put back as it
 * was if the shim cannot take over.
 */
__attribute__((constructor(101))) static void esc_early(void)
{
	int v = 0;

	if (getenv(ESC_ENV) && !prctl(PR_GET_TSC, &v, 0, 0, 0) && v == PR_TSC_SIGSEGV) {
		inherited = true;
		prctl(PR_SET_TSC, PR_TSC_ENABLE, 0, 0, 0);
	}
}

static void not_watched(void)
{
	if (inherited)
		prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0);
}

/* Faulting addresses seen, each with its site (escapes.h's slot + 3: 1 the
 * loader's, 2 no slot left) in the top byte; 0 is a free entry. */
#define CACHE 64
#define ADDR_BITS 56
static _Atomic uint64_t seen[CACHE];

static long raw_read(int fd, void *buf, unsigned long len)
{
	return shim_raw(SYS_read, fd, (long)buf, (long)len, 0, 0, 0);
}

/* The shim's own reads of the real clock: the system call, not the vDSO
 * (whose rdtsc would fault and count as the program's). */
static int raw_gettime(clockid_t id, struct timespec *ts)
{
	return shim_raw(SYS_clock_gettime, id, (long)ts, 0, 0, 0, 0) ? -1 : 0;
}

static void count(uint64_t rip, uint32_t kind)
{
	char obj[ESC_OBJ];
	uint64_t off = rip, v;
	long fd;
	int site;
	bool ok = false;

	for (int i = 0; i < CACHE; i++) {
		v = atomic_load_explicit(&seen[i], memory_order_relaxed);
		if (!v)
			break;
		if ((v & ((1ULL << ADDR_BITS) - 1)) != rip)
			continue;
		site = (int)(v >> ADDR_BITS) - 3;
		if (site == -2) {
			atomic_fetch_add_explicit(&page->loader, 1, memory_order_relaxed);
		} else {
			atomic_fetch_add_explicit(&page->total, 1, memory_order_relaxed);
			if (site < 0)
				atomic_fetch_add_explicit(&page->unplaced, 1, memory_order_relaxed);
			else
				atomic_fetch_add_explicit(&page->site[site].count, 1,
							  memory_order_relaxed);
		}
		return;
	}
	/* A new address: where it is, from the maps (a few tens of µs, once
	 * per address per process). */
	fd = shim_raw(SYS_openat, AT_FDCWD, (long)"/proc/self/maps", O_RDONLY | O_CLOEXEC, 0, 0,
		      0);
	if (fd >= 0) {
		ok = esc_where((int)fd, raw_read, rip, obj, sizeof(obj), &off);
		shim_raw(SYS_close, fd, 0, 0, 0, 0, 0);
	}
	if (!ok) {
		memcpy(obj, "[unknown]", 10);
		off = rip;
	}
	if (esc_is_loader(obj)) {
		atomic_fetch_add_explicit(&page->loader, 1, memory_order_relaxed);
		site = -2;
	} else {
		site = esc_record(page, kind, obj, off, 1);
	}
	v = rip | ((uint64_t)(site + 3) << ADDR_BITS);
	for (int i = 0; i < CACHE; i++) {
		uint64_t z = 0;

		if (atomic_compare_exchange_strong_explicit(&seen[i], &z, v, memory_order_relaxed,
							    memory_order_relaxed) ||
		    z == v)
			break;
	}
}

static void on_segv(int sig, siginfo_t *si, void *uc_)
{
	ucontext_t *uc = uc_;
	greg_t *g = uc->uc_mcontext.gregs;
	const uint8_t *ip = (const uint8_t *)g[REG_RIP];
	uint32_t lo, hi, aux = 0, kind = 0;

	/* A general-protection fault (SI_KERNEL): the instruction at RIP was
	 * fetched, so its bytes can be read. */
	if (si->si_code == SI_KERNEL && ip[0] == 0x0f) {
		if (ip[1] == 0x31)
			kind = ESC_RDTSC;
		else if (ip[1] == 0x01 && ip[2] == 0xf9)
			kind = ESC_RDTSCP;
	}
	if (!kind) {
		shim_trap_forward(sig, si, uc_);
		return;
	}
	/* The real counter: readable for this one instruction. A signal
	 * handled in between may read it untrapped: missed, never wrong. */
	shim_raw(SYS_prctl, PR_SET_TSC, PR_TSC_ENABLE, 0, 0, 0, 0);
	if (kind == ESC_RDTSCP)
		__asm__ volatile("rdtscp" : "=a"(lo), "=d"(hi), "=c"(aux));
	else
		__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	shim_raw(SYS_prctl, PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0, 0);
	g[REG_RAX] = lo;
	g[REG_RDX] = hi;
	if (kind == ESC_RDTSCP)
		g[REG_RCX] = aux;
	g[REG_RIP] += kind == ESC_RDTSCP ? 3 : 2;
	count((uint64_t)(uintptr_t)ip, kind);
}

void shim_esc_setup(void)
{
	const char *path = getenv(ESC_ENV);
	void *p;
	int fd, r;

	if (!path || !*path)
		return;
	if (!atomic_load_explicit(&shim_trap_on, memory_order_acquire)) {
		if (!inherited)
			shim_say("shmclock-preload: the escape report needs the system-call trap; "
				 "this process's rdtsc are not watched\n");
		not_watched();
		return;
	}
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		shim_say("shmclock-preload: %s: %s; this process's rdtsc are not watched\n", path,
			 strerror(errno));
		not_watched();
		return;
	}
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	shim_real_close(fd);
	if (p == MAP_FAILED || ((struct esc_page *)p)->magic != ESC_MAGIC) {
		shim_say("shmclock-preload: %s is not a report page; this process's rdtsc are not "
			 "watched\n",
			 path);
		if (p != MAP_FAILED)
			munmap(p, 4096);
		not_watched();
		return;
	}
	page = p;
	/* Every real-clock read of the shim: its library's, its waits' real
	 * deadlines (waits.c) and the clocks it leaves real (clocks.c). */
	shmclock__gettime = raw_gettime;
	shim_real_gettime = raw_gettime;
	r = shim_trap_take(SIGSEGV, on_segv);
	if (r) {
		shim_say("shmclock-preload: SIGSEGV: %s; this process's rdtsc are not watched\n",
			 strerror(-r));
		not_watched();
		return;
	}
	/* Before the counter traps: rt_sigaction(SIGSEGV) is the program's
	 * from now on. */
	atomic_store_explicit(&shim_esc_on, true, memory_order_release);
	r = (int)shim_raw(SYS_prctl, PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0, 0);
	if (r)
		shim_say("shmclock-preload: PR_SET_TSC: %s; this process's rdtsc are not "
			 "watched\n",
			 strerror(-r));
}

#else /* !__x86_64__ */

_Atomic bool shim_esc_on;

/* shmclock-run says the report is unavailable here; the program runs. */
void shim_esc_setup(void)
{
}

#endif
