/* SPDX-License-Identifier: MIT */
/* shmclock-run's supervisor for programs that cannot load the shim. */
#ifndef SHMCLOCK_SUPERVISE_H
#define SHMCLOCK_SUPERVISE_H

#include <stdbool.h>

/*
 * Runs @argv under ptrace, answering its time system calls from clock
 * @name (@clocks: the SHMCLOCK_CLOCKS mask), and the whole tree it starts.
 * The environment (LD_PRELOAD, SHMCLOCK_*) is set already. Returns the
 * exit status for shmclock-run: the program's, 126 when it could not be
 * supervised (a line on stderr says why).
 */
int supervise(char **argv, const char *name, unsigned clocks, bool quiet);

/*
 * The run's escape report (escapes.h), or NULL: the tree's rdtsc and
 * rdtscp are trapped, emulated and counted in it. When the program has
 * exited, supervise() calls @supervise_report_done (if set) with its exit
 * code (128 + the signal it died of) and returns what that returns when it
 * differs (else returns, or dies, as the program did).
 */
struct esc_page;
extern struct esc_page *supervise_report;
extern int (*supervise_report_done)(int code);

/* An ELF64 executable without an interpreter (statically linked), read
 * from @fd (left open). */
bool supervise_elf_static(int fd);

#endif
