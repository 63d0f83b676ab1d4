/* SPDX-License-Identifier: MIT */
/*
 * Signals for a supervised program, delivered once (issue 52).
 *
 * Under the supervisor three processes share the caller's process group:
 * shmclock-run (the pid the user or harness started), the tracer, and the
 * program. A signal reaches the program by two ways: sent to the group (a
 * service manager's stop, `timeout`, a closing terminal, ^C), it reaches
 * the program itself; sent to shmclock-run alone (a harness's kill of the
 * pid it started), shmclock-run relays it. A group signal reaches
 * shmclock-run too, which relays it as well: the tracer, which sees every
 * signal the program is given (ptrace's signal-delivery stops), lets the
 * second of the two go by.
 *
 * shmclock-run relays with sigqueue(), carrying who sent the signal it
 * got (the sender's pid and uid, or the kernel's 0 for a terminal's): the
 * tracer knows a relayed signal by its sender (shmclock-run) and lets it go
 * when the same signal from the same sender was seen within RELAY_PAIR_NS,
 * either way (the group's signal may reach the program before or after
 * shmclock-run relays it, and timeout signals shmclock-run twice: itself,
 * then the group); a direct one goes when a relay delivered before it
 * stood for it. A relayed signal that is delivered is given the original's
 * siginfo (SI_USER from the sender, or SI_KERNEL), as if shmclock-run were
 * not there.
 *
 * The tracer itself ignores every signal a group may carry that would end
 * or stop it: its death would take the program with it (PTRACE_O_EXITKILL).
 */
#ifndef SHMCLOCK_RELAY_H
#define SHMCLOCK_RELAY_H

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

/* A direct and a relayed signal this close in real time are one. */
#define RELAY_PAIR_NS 2000000000LL

/* Whether shmclock-run relays @sig to the program: SIGHUP, SIGINT,
 * SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2. */
bool relay_relays(int sig);

/* shmclock-run's part: relays the signals above to @program from now on. */
void relay_start(pid_t program);

/* The tracer's part, in the tracer: ignores the signals that would end or
 * stop it (not SIGKILL, SIGSTOP, SIGCHLD, SIGCONT, nor the synchronous
 * faults). @runner is shmclock-run's pid (the relayed signals' sender). */
void relay_tracer_init(pid_t runner);

/*
 * The tracer's part: @tid, a thread of the program (the process
 * shmclock-run relays to), stopped to be given @sig. Returns the signal to
 * deliver: @sig, or 0 for the second of a pair. A relayed signal that is
 * delivered gets the original's siginfo.
 */
int relay_deliver(pid_t tid, int sig);

#endif
