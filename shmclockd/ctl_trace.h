/* SPDX-License-Identifier: MIT */
/* shmclockctl trace: every lockstep step as Chrome trace-event JSON. */
#ifndef SHMCLOCKD_CTL_TRACE_H
#define SHMCLOCKD_CTL_TRACE_H

#define TRACE_ARGS "--seconds S FILE"
#define TRACE_HELP "lockstep: record every step for S seconds as a Chrome trace (Perfetto) in FILE"

/* The command, with its own arguments (argv[0] is "trace"); @sock, the
 * daemon's control socket (for the participants on other hosts). Exit
 * status. */
int ctl_trace(const char *name, const char *sock, int argc, char **argv);

#endif
