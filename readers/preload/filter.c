/* SPDX-License-Identifier: MIT */
/* The time system calls' seccomp filter (filter.h). */
#define _GNU_SOURCE
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <linux/audit.h>
#include <linux/futex.h>
#include <linux/seccomp.h>
#include <sys/syscall.h>

#include "filter.h"

/* ------------------------------------------------------------ the filter */

#define LD(off) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (off))
#define JEQ(k, t, f) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (k), (t), (f))
#define JSET(k, t, f) BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, (k), (t), (f))
#define RET(k) BPF_STMT(BPF_RET | BPF_K, (k))
#define ARG_LO(i) (offsetof(struct seccomp_data, args) + 8 * (i))
#define ARG_HI(i) (offsetof(struct seccomp_data, args) + 8 * (i) + 4)
#define IP_LO offsetof(struct seccomp_data, instruction_pointer)
#define IP_HI (offsetof(struct seccomp_data, instruction_pointer) + 4)
#define ALLOW SECCOMP_RET_ALLOW

/*
 * Blocks of the program: jumps are relative and forward only (at most
 * 255), so the checks jump by label to blocks placed after them, each
 * block to the two returns at the end. Built at run time into this table.
 */
enum {
	L_ALLOW,
	L_TRAP,
	L_READ, /* a read of the clock */
	L_PTR3,  /* trap if args[3] is not NULL */
	L_PTR2,  /* args[2] */
	L_PTR4,  /* args[4] */
	L_INT3,  /* trap if (int)args[3] is > 0 */
	L_INT2,  /* (int)args[2] */
	L_FUTEX, /* the futex checks */
	L_SIGACT, /* trap rt_sigaction on SIGSYS and SIGSEGV */
	L_N
};

struct prog {
	struct sock_filter f[SHIM_FILTER_MAX];
	unsigned n;
	unsigned label[L_N];
	struct {
		unsigned at;
		int t, f; /* label or -1 (next) */
	} fix[64];
	unsigned nfix;
};

static void emit(struct prog *p, struct sock_filter s)
{
	p->f[p->n++] = s;
}

/* A conditional jump to labels (-1: the next instruction). */
static void jump(struct prog *p, uint16_t code, uint32_t k, int t, int f)
{
	p->fix[p->nfix].at = p->n;
	p->fix[p->nfix].t = t;
	p->fix[p->nfix].f = f;
	p->nfix++;
	emit(p, (struct sock_filter)BPF_JUMP(code, k, 0, 0));
}

static void here(struct prog *p, int label)
{
	p->label[label] = p->n;
}

static void resolve(struct prog *p)
{
	for (unsigned i = 0; i < p->nfix; i++) {
		unsigned at = p->fix[i].at;

		if (p->fix[i].t >= 0)
			p->f[at].jt = (uint8_t)(p->label[p->fix[i].t] - at - 1);
		if (p->fix[i].f >= 0)
			p->f[at].jf = (uint8_t)(p->label[p->fix[i].f] - at - 1);
	}
}

unsigned shim_filter_build(struct sock_filter *out, uint32_t action, uint32_t read_action,
			   bool shim)
{
	static struct prog prog;
	struct prog *p = &prog;
	/* Not reentrant (one static table): called once, at set-up. */
	static const struct {
		int nr;
		int label;
	} calls[] = {
		{ SYS_clock_gettime, L_READ },  { SYS_gettimeofday, L_READ },
		{ SYS_time, L_READ },           { SYS_nanosleep, L_TRAP },
		{ SYS_clock_nanosleep, L_TRAP }, { SYS_futex, L_FUTEX },
		{ SYS_epoll_wait, L_INT3 },     { SYS_epoll_pwait, L_INT3 },
		{ SYS_poll, L_INT2 },           { SYS_ppoll, L_PTR2 },
		{ SYS_select, L_PTR4 },         { SYS_pselect6, L_PTR4 },
		{ SYS_rt_sigtimedwait, L_PTR2 },
		/* The interval timers go where the reads go (the supervisor's
		 * listener answers them). */
		{ SYS_alarm, L_READ },          { SYS_setitimer, L_READ },
		{ SYS_getitimer, L_READ },
#ifdef SYS_epoll_pwait2
		{ SYS_epoll_pwait2, L_PTR3 },
#endif
	}, sup_calls[] = {
		/* The supervisor's listener answers POSIX timers, timerfds and
		 * clock_getres on the simulated clocks (supervise.c); the
		 * shim's trap takes the timer calls itself (below). */
		{ SYS_timer_create, L_READ },   { SYS_timer_settime, L_READ },
		{ SYS_timer_gettime, L_READ },  { SYS_timer_getoverrun, L_READ },
		{ SYS_timer_delete, L_READ },   { SYS_timerfd_create, L_READ },
		{ SYS_timerfd_settime, L_READ }, { SYS_timerfd_gettime, L_READ },
		{ SYS_clock_getres, L_READ },
	}, shim_calls[] = {
		/* rt_sigprocmask, every one: trap.c keeps SIGSYS's state. */
		{ SYS_rt_sigaction, L_SIGACT }, { SYS_rt_sigprocmask, L_TRAP },
		{ SYS_execve, L_TRAP },         { SYS_execveat, L_TRAP },
		/* Timers: rare calls, all of them (trap.c hands them to
		 * timers.c). */
		{ SYS_timer_create, L_TRAP },   { SYS_timer_settime, L_TRAP },
		{ SYS_timer_gettime, L_TRAP },  { SYS_timer_delete, L_TRAP },
		{ SYS_timerfd_create, L_TRAP },
		{ SYS_timerfd_settime, L_TRAP }, { SYS_timerfd_gettime, L_TRAP },
	};

	memset(p, 0, sizeof(*p));
	/* Another architecture's calls (int 0x80): let be. */
	emit(p, (struct sock_filter)LD(offsetof(struct seccomp_data, arch)));
	jump(p, BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, -1, L_ALLOW);
	emit(p, (struct sock_filter)LD(offsetof(struct seccomp_data, nr)));
	/* The probe: answers only under the shim's filter. */
	if (shim) {
		emit(p, (struct sock_filter)JEQ(SYS_clock_getres, 0, 3));
		emit(p, (struct sock_filter)LD(ARG_LO(0)));
		emit(p, (struct sock_filter)JEQ(SHIM_PROBE_ID, 0, 1));
		emit(p, (struct sock_filter)RET(SECCOMP_RET_ERRNO | SHIM_PROBE_ERRNO));
	}
	/* The gadget's page. */
	emit(p, (struct sock_filter)LD(IP_HI));
	emit(p, (struct sock_filter)JEQ((uint32_t)(SHIM_GADGET_ADDR >> 32), 0, 3));
	emit(p, (struct sock_filter)LD(IP_LO));
	emit(p, (struct sock_filter)BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xfffff000u));
	jump(p, BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)SHIM_GADGET_ADDR, L_ALLOW, -1);
	emit(p, (struct sock_filter)LD(offsetof(struct seccomp_data, nr)));
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
		jump(p, BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)calls[i].nr, calls[i].label, -1);
	for (size_t i = 0; !shim && i < sizeof(sup_calls) / sizeof(sup_calls[0]); i++)
		jump(p, BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)sup_calls[i].nr, sup_calls[i].label, -1);
	for (size_t i = 0; shim && i < sizeof(shim_calls) / sizeof(shim_calls[0]); i++)
		jump(p, BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)shim_calls[i].nr, shim_calls[i].label, -1);
	emit(p, (struct sock_filter)RET(ALLOW));
	/* rt_sigaction(SIGSYS, ...), and (SIGSEGV, ...), which the escape
	 * report takes (trap.c lets the latter through when it is off). */
	here(p, L_SIGACT);
	emit(p, (struct sock_filter)LD(ARG_LO(0)));
	jump(p, BPF_JMP | BPF_JEQ | BPF_K, SIGSYS, L_TRAP, -1);
	jump(p, BPF_JMP | BPF_JEQ | BPF_K, SIGSEGV, L_TRAP, L_ALLOW);
	/* futex: FUTEX_WAIT and FUTEX_WAIT_BITSET with a timeout. */
	here(p, L_FUTEX);
	emit(p, (struct sock_filter)LD(ARG_LO(1)));
	emit(p, (struct sock_filter)BPF_STMT(BPF_ALU | BPF_AND | BPF_K, FUTEX_CMD_MASK));
	jump(p, BPF_JMP | BPF_JEQ | BPF_K, FUTEX_WAIT, L_PTR3, -1);
	jump(p, BPF_JMP | BPF_JEQ | BPF_K, FUTEX_WAIT_BITSET, L_PTR3, L_ALLOW);
	/* An int timeout: 0 (just look) and negative (forever) need no plan. */
	here(p, L_INT3);
	emit(p, (struct sock_filter)LD(ARG_LO(3)));
	jump(p, BPF_JMP | BPF_JEQ | BPF_K, 0, L_ALLOW, -1);
	jump(p, BPF_JMP | BPF_JSET | BPF_K, 0x80000000u, L_ALLOW, L_TRAP);
	here(p, L_INT2);
	emit(p, (struct sock_filter)LD(ARG_LO(2)));
	jump(p, BPF_JMP | BPF_JEQ | BPF_K, 0, L_ALLOW, -1);
	jump(p, BPF_JMP | BPF_JSET | BPF_K, 0x80000000u, L_ALLOW, L_TRAP);
	/* A timeout pointer: NULL is forever. */
	here(p, L_PTR2);
	emit(p, (struct sock_filter)LD(ARG_LO(2)));
	jump(p, BPF_JMP | BPF_JEQ | BPF_K, 0, -1, L_TRAP);
	emit(p, (struct sock_filter)LD(ARG_HI(2)));
	jump(p, BPF_JMP | BPF_JEQ | BPF_K, 0, L_ALLOW, L_TRAP);
	here(p, L_PTR3);
	emit(p, (struct sock_filter)LD(ARG_LO(3)));
	jump(p, BPF_JMP | BPF_JEQ | BPF_K, 0, -1, L_TRAP);
	emit(p, (struct sock_filter)LD(ARG_HI(3)));
	jump(p, BPF_JMP | BPF_JEQ | BPF_K, 0, L_ALLOW, L_TRAP);
	here(p, L_PTR4);
	emit(p, (struct sock_filter)LD(ARG_LO(4)));
	jump(p, BPF_JMP | BPF_JEQ | BPF_K, 0, -1, L_TRAP);
	emit(p, (struct sock_filter)LD(ARG_HI(4)));
	jump(p, BPF_JMP | BPF_JEQ | BPF_K, 0, L_ALLOW, L_TRAP);
	here(p, L_ALLOW);
	emit(p, (struct sock_filter)RET(ALLOW));
	here(p, L_TRAP);
	emit(p, (struct sock_filter)RET(action));
	here(p, L_READ);
	emit(p, (struct sock_filter)RET(read_action));
	resolve(p);
	memcpy(out, p->f, p->n * sizeof(p->f[0]));
	return p->n;
}

