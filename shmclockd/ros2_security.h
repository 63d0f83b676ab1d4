/* SPDX-License-Identifier: MIT */
/*
 * DDS Security for the module's participant (ros2.c): an enclave
 * directory in SROS2's layout (shmclock-pki(1) writes one) turned into the
 * participant's security properties, and Cyclone DDS's own messages routed
 * to the daemon's log, its refusals of peers counted and named once each.
 * Part of the ROS 2 module; nothing else links Cyclone.
 */
#ifndef SHMCLOCKD_ROS2_SECURITY_H
#define SHMCLOCKD_ROS2_SECURITY_H

#include <stdbool.h>
#include <stddef.h>

#include <dds/dds.h>

#include "ros2.h"

struct ros2_sec;

/* For the enclave @dir, logging through @log. NULL: out of memory. */
struct ros2_sec *ros2_sec_new(const char *dir,
			      void (*log)(enum log_level level, const char *fmt, ...));

/* @qos joins with the enclave's identity, governance and permissions:
 * every file there and readable, Cyclone's plugins found. From here on
 * Cyclone's messages go to the log. 0, or -errno with a one-line err that
 * names the file. */
int ros2_sec_qos(struct ros2_sec *s, dds_qos_t *qos, char *err, size_t errlen);

/* The enclave's identity (the common name its permissions grant; read by
 * ros2_sec_qos): at most ROS2_IDENTITY_MAX characters, no wildcard, '@'
 * or '#'. */
const char *ros2_sec_identity(const struct ros2_sec *s);

/* Can @name be an identity: 1 to ROS2_IDENTITY_MAX printable characters,
 * no space, wildcard, '@' (ids), '#', ';' or ':' (lockstep's lists), nor
 * ".from." (partitions)? Else false, and why in @why (NULL: not said). */
bool ros2_sec_identity_ok(const char *name, char *why, size_t len);

/* A sample of @peer (its identity) refused for @why: counted and logged
 * once per peer, as Cyclone's refusals (status ros2.security_refused). */
void ros2_sec_refuse(struct ros2_sec *s, const char *peer, const char *why);

/* Before the participant: its domain, made with CYCLONEDDS_URI's
 * configuration plus discovery tracing to a sink of ours (to /dev/null
 * otherwise), so that a participant without DDS Security, which Cyclone
 * refuses without a word in its log, is counted too. 0 when the user's
 * configuration traces itself (left as it is) or the domain exists. */
dds_entity_t ros2_sec_domain(struct ros2_sec *s, int domain);

/* The participant is made: Cyclone's other messages are logged from now
 * on (before, only kept for ros2_sec_said; refusals of peers always). */
void ros2_sec_opened(struct ros2_sec *s);

/* Cyclone's last error or warning since ros2_sec_qos ("" none): why it
 * refused to make the participant. */
const char *ros2_sec_said(struct ros2_sec *s);

/* The refusals so far, into @st. */
void ros2_sec_stats(struct ros2_sec *s, struct ros2_stats *st);

/* Cyclone's messages back to stderr, then freed. NULL: nothing. */
void ros2_sec_free(struct ros2_sec *s);

#endif
