/* SPDX-License-Identifier: MIT */
/*
 * The lockstep clock mode (mode.h, mode_lockstep.c): the clock advances to
 * the smallest grant of the live participants, within what the source
 * allows, instead of ticking.
 */
#ifndef SHMCLOCKD_MODE_LOCKSTEP_H
#define SHMCLOCKD_MODE_LOCKSTEP_H

#include <stdbool.h>
#include <stddef.h>

#include <shmclock/writer.h>

#include "config.h"
#include "mode.h"

/* The longest abort message (mode_lockstep_aborted). */
#define MODE_LOCKSTEP_ABORT_MAX 640

struct ros2;
struct ros2_api;
struct ls_hosts;

/* Creates the participants' segment, with the control socket's access
 * rule (the owner, and ControlGroup when set), and the mode over it;
 * between hosts (Distribute.Publish: the leader; TimeSource leader: a
 * follower host) over the DDS link @ros2 (lockstep_hosts.h). 0, or
 * -errno with a one-line message in err. */
int mode_lockstep_create(shmclock_writer_t *w, const struct shmclockd_config *c,
			 struct ros2 *ros2, const struct ros2_api *api, struct clock_mode **out,
			 char *err, size_t errlen);

/* A follower host made at run time (mode_follow.c), once its leader was
 * heard to be in lockstep: as mode_lockstep_create, over @hosts (the link
 * ls_hosts_probe opened; the mode owns it once this returns 0, the caller
 * still does after an error) and telling aborts on @notify_fd (duplicated). Clock thread. */
int mode_lockstep_adopt(shmclock_writer_t *w, const struct shmclockd_config *c,
			struct ls_hosts *hosts, int notify_fd, struct clock_mode **out, char *err,
			size_t errlen);

/* A replay in lockstep (the replay source with Lockstep): the clock starts
 * at @start and stops at each of the @n increasing @due times (the
 * recording's changes, tl_due_times; taken over, freed with the mode),
 * whatever its participants grant: the run is paced by them, the
 * recording's instants are barriers. Before the clock thread starts. */
void mode_lockstep_set_due(struct clock_mode *m, int64_t start, int64_t *due, size_t n);

/* An eventfd the clock thread writes when OnDeath or OnStall abort fired. */
int mode_lockstep_notify_fd(struct clock_mode *m);

/* True once OnDeath or OnStall abort stopped the clock for good: *status
 * is the exit status (86, 87), @msg says why. */
bool mode_lockstep_aborted(struct clock_mode *m, int *status, char *msg, size_t len);

#endif
