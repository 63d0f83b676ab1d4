/* SPDX-License-Identifier: MIT */
/*
 * What every /clock endpoint here shares with ROS 2 (shmclockd's link in
 * ros2.c, the ROS 2 tests, the dds benchmark): the QoS, and the loopback-only
 * Cyclone DDS configuration the tests and benchmarks use (see the README).
 * And what every endpoint of the hosts topics shares (ros2.c, the rogue
 * publisher of tests/hosts): the partition of a follower's echoes.
 */
#ifndef SHMCLOCKD_ROS2_QOS_H
#define SHMCLOCKD_ROS2_QOS_H

#include <stdint.h>
#include <stdio.h>

#include <dds/dds.h>

/* DDS on 127.0.0.1 only, no multicast: unicast discovery of participant
 * indices up to 50 on this host. */
#define ROS2_LOOPBACK_URI                                                                    \
	"<CycloneDDS><Domain id=\"any\"><General><Interfaces>"                               \
	"<NetworkInterface address=\"127.0.0.1\"/></Interfaces>"                             \
	"<AllowMulticast>false</AllowMulticast></General><Discovery>"                        \
	"<ParticipantIndex>auto</ParticipantIndex><MaxAutoParticipantIndex>50"              \
	"</MaxAutoParticipantIndex><Peers><Peer address=\"127.0.0.1\"/></Peers>"            \
	"</Discovery></Domain></CycloneDDS>"

/* /clock's QoS: @rel (readers best effort, as rclcpp's ClockQoS; writers
 * reliable, so that both kinds of reader match), volatile, keep last 1,
 * XCDR1 as the ROS 2 RMW layers use. dds_delete_qos() it. */
static inline dds_qos_t *ros2_clock_qos(dds_reliability_kind_t rel)
{
	dds_qos_t *q = dds_create_qos();
	dds_data_representation_id_t xcdr1 = DDS_DATA_REPRESENTATION_XCDR1;

	dds_qset_reliability(q, rel, DDS_MSECS(100));
	dds_qset_durability(q, DDS_DURABILITY_VOLATILE);
	dds_qset_history(q, DDS_HISTORY_KEEP_LAST, 1);
	dds_qset_data_representation(q, 1, &xcdr1);
	return q;
}

/* The DDS partition of the echoes to one follower (TimeEcho, issue 57): a
 * leader writes each follower's echoes in that follower's partition, and
 * the follower reads its own only, so that no host receives the others'
 * (one writer for all sent every echo to every follower: traffic in the
 * square of the fleet). Named by a hash (FNV-1a, 64 bits) of the clock and
 * the follower's id, never by the id itself: an id comes from the wire,
 * and a partition name with '*' or '?' would be a pattern matching
 * others'. A collision costs traffic only: a follower takes the echoes
 * that name it (hosts/liveness.c). @buf: ROS2_ECHO_PARTITION_LEN. */
#define ROS2_ECHO_PARTITION_LEN 32
static inline void ros2_echo_partition(char *buf, size_t len, const char *clock,
				       const char *follower)
{
	uint64_t h = UINT64_C(14695981039346656037);

	for (const char *p = clock; *p; p++)
		h = (h ^ (unsigned char)*p) * UINT64_C(1099511628211);
	h = (h ^ 0xffu) * UINT64_C(1099511628211); /* not a byte of a name: "ab"+"c" != "a"+"bc" */
	for (const char *p = follower; *p; p++)
		h = (h ^ (unsigned char)*p) * UINT64_C(1099511628211);
	snprintf(buf, len, "shmclock.echo.%016llx", (unsigned long long)h);
}

#endif
