/* SPDX-License-Identifier: MIT */
/*
 * A daemon's id between hosts (hosts mode, lockstep between hosts).
 */
#ifndef SHMCLOCKD_HOSTS_ID_H
#define SHMCLOCKD_HOSTS_ID_H

#include <stddef.h>

/* Room for lockstep's "#incarnation" after it, in 96 characters. */
#define HOSTS_ID_MAX 86

/* This daemon's id, unique per run (a restarted one is a new one):
 * "HOST/PID/SEC.NSEC", the CLOCK_REALTIME of the call; secured,
 * "IDENTITY@HOST/...", its certificate's common name first
 * (ros2_api.identity), which a leader checks against the partition the
 * answer came in (ros2.c, answer_from). HOST cut to fit HOSTS_ID_MAX.
 * @len: HOSTS_ID_MAX + 1 or more. */
void hosts_id(char *buf, size_t len, const char *identity);

#endif
