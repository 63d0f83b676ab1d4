/* SPDX-License-Identifier: MIT */
/*
 * What every /clock endpoint here shares with ROS 2 (shmclockd's link in
 * ros2.c, the ROS 2 tests, the dds benchmark): the QoS, and the loopback-only
 * Cyclone DDS configuration the tests and benchmarks use (see the README).
 */
#ifndef SHMCLOCKD_ROS2_QOS_H
#define SHMCLOCKD_ROS2_QOS_H

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

#endif
