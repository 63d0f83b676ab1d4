/* SPDX-License-Identifier: MIT */
/* Where a clock's control socket lives by default (daemon and CLI agree). */
#ifndef SHMCLOCKD_PATHS_H
#define SHMCLOCKD_PATHS_H

#include <stddef.h>

/*
 * $SHMCLOCK_RUNTIME_DIR, else $XDG_RUNTIME_DIR/shmclock, else /run/shmclock
 * for root and /tmp/shmclock-<uid> for others.
 */
void paths_runtime_dir(char *out, size_t len);

/* <runtime dir>/<name>.sock; -ENAMETOOLONG if it does not fit a sockaddr_un. */
int paths_default_socket(const char *name, char *out, size_t len);

/* <directory of the running program>/<rel> in buf if that file is
 * readable (a build tree keeps its pieces side by side), else NULL. */
const char *paths_beside_self(const char *rel, char *buf, size_t len);

#endif
