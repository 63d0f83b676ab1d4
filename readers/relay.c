/* SPDX-License-Identifier: MIT */
/* Signals for a supervised program, delivered once: relay.h says how. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/ptrace.h>
#include <time.h>
#include <unistd.h>

#include "relay.h"

static const int relayed[] = { SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2 };

bool relay_relays(int sig)
{
	for (size_t i = 0; i < sizeof(relayed) / sizeof(relayed[0]); i++)
		if (relayed[i] == sig)
			return true;
	return false;
}

/* shmclock-run's side. */

static volatile pid_t program;

/* Who sent a signal: the sender's pid, or 0 when the kernel did (a
 * terminal's ^C, ^\ and hangup). Both sides name senders so. */
static pid_t sender_of(const siginfo_t *si)
{
	return si->si_code == SI_KERNEL ? 0 : si->si_pid;
}

static void relay(int sig, siginfo_t *si, void *uc)
{
	int e = errno;
	union sigval v;

	(void)uc;
	/* The sender's pid and uid, in the value's 64 bits. */
	v.sival_ptr = (void *)(uintptr_t)((uint64_t)(uint32_t)si->si_uid << 32 |
					  (uint32_t)sender_of(si));
	if (program > 0)
		sigqueue(program, sig, v);
	errno = e;
}

void relay_start(pid_t p)
{
	struct sigaction sa = { .sa_sigaction = relay, .sa_flags = SA_SIGINFO | SA_RESTART };

	program = p;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(relayed) / sizeof(relayed[0]); i++)
		sigaction(relayed[i], &sa, NULL);
}

/* The tracer's side. */

static pid_t runner;

/* Signals seen lately: which, from whom, whether it is a delivered relay
 * no direct copy has been paired with yet, when (the tracer's own
 * CLOCK_MONOTONIC: it is never under the shim). */
static struct seen {
	int sig;
	pid_t from;
	bool open;
	long long at;
} seen[16];

static long long mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void relay_tracer_init(pid_t r)
{
	runner = r;
	for (int sig = 1; sig < NSIG; sig++) {
		switch (sig) {
		case SIGKILL: case SIGSTOP: /* cannot be */
		case SIGCHLD: /* its waitpid() needs it (ignored, children are reaped) */
		case SIGCONT:
		case SIGSEGV: case SIGBUS: case SIGILL: case SIGFPE: case SIGSYS:
		case SIGTRAP: case SIGABRT: /* its own faults */
			continue;
		default:
			/* glibc refuses its own two real-time signals: fine. */
			signal(sig, SIG_IGN);
		}
	}
}

int relay_deliver(pid_t tid, int sig)
{
	siginfo_t si;
	bool is_relayed;
	pid_t from;
	uint32_t uid = 0;
	long long now = mono_ns();
	struct seen *free_slot = NULL, *oldest = &seen[0];

	if (!relay_relays(sig) || ptrace(PTRACE_GETSIGINFO, tid, NULL, &si))
		return sig;
	is_relayed = si.si_code == SI_QUEUE && si.si_pid == runner && runner > 0;
	if (is_relayed) {
		uint64_t v = (uint64_t)(uintptr_t)si.si_value.sival_ptr;

		from = (pid_t)(uint32_t)v;
		uid = (uint32_t)(v >> 32);
	} else {
		from = sender_of(&si);
	}
	/*
	 * One delivery for one signal, however many ways it came. A relay is
	 * let go when the same signal from the same sender was seen within
	 * RELAY_PAIR_NS, either way: the program got it directly (a group's
	 * signal), or it is the second relay of one sender's two (timeout
	 * signals shmclock-run, then the whole group, shmclock-run included).
	 * A direct one is let go when a relay delivered before it stood for it
	 * (the group's signal reached shmclock-run first), once. Direct ones
	 * alone are all delivered.
	 */
	bool drop = false;

	for (size_t i = 0; i < sizeof(seen) / sizeof(seen[0]); i++) {
		struct seen *s = &seen[i];

		if (s->sig && now - s->at > RELAY_PAIR_NS)
			s->sig = 0;
		if (!s->sig) {
			free_slot = free_slot ? free_slot : s;
			continue;
		}
		if (s->at < oldest->at)
			oldest = s;
		if (s->sig != sig || s->from != from || drop)
			continue;
		if (is_relayed) {
			drop = true;
		} else if (s->open) {
			s->open = false;
			drop = true;
		}
	}
	if (!free_slot)
		free_slot = oldest;
	/* Seen, delivered or not: a later relay of it is let go. */
	*free_slot = (struct seen){ sig, from, is_relayed && !drop, now };
	if (drop)
		return 0;
	if (is_relayed) {
		/* As the sender sent it, not as shmclock-run relayed it. */
		memset(&si, 0, sizeof(si));
		si.si_signo = sig;
		si.si_code = from ? SI_USER : SI_KERNEL;
		si.si_pid = from;
		si.si_uid = uid;
		ptrace(PTRACE_SETSIGINFO, tid, NULL, &si);
	}
	return sig;
}
