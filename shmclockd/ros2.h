/* SPDX-License-Identifier: MIT */
/*
 * ROS 2 interop over DDS (Eclipse Cyclone DDS): the `ros2` time source
 * follows the ROS 2 topic /clock (DDS topic rt/clock, type
 * rosgraph_msgs::msg::dds_::Clock_), and any source can publish /clock.
 * Built only with the Meson feature `ros2` (Cyclone DDS found); without it
 * the config's Ros2 keys and TimeSource "ros2" are clear errors.
 *
 * QoS, as rclcpp and AWSIM use them: the follower reads BEST_EFFORT,
 * VOLATILE, KEEP_LAST 1 (a RELIABLE reader would never match AWSIM's
 * best-effort writer); the publisher writes RELIABLE, VOLATILE, KEEP_LAST 1
 * so that best-effort and reliable subscribers both match. XCDR1 data
 * representation and participant user data "enclave=/;" as the ROS 2 RMW
 * layers put them.
 */
#ifndef SHMCLOCKD_ROS2_H
#define SHMCLOCKD_ROS2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct clockthread;
struct ros2;

struct ros2_stats {
	int domain;
	bool following, publishing;
	uint64_t samples;        /* /clock samples taken (following) */
	double rate_hz;          /* the publisher's rate, as received */
	int64_t last_age_ns;     /* since the last sample; -1: none yet */
	bool stale;              /* no sample for longer than the timeout */
	uint64_t published;      /* /clock samples written (publishing) */
};

/* A DDS participant on @domain. 0, or -errno with a one-line err. */
int ros2_open(struct ros2 **out, int domain, char *err, size_t errlen);

/* Follows /clock: each sample becomes the clock's next stepped value
 * through the clock thread (a backward one is a jump). Stale after
 * @stale_ns without a sample. Starts a thread. */
int ros2_follow(struct ros2 *r, struct clockthread *ct, int64_t stale_ns, char *err,
		size_t errlen);

/* Creates the /clock writer; ros2_publish() then writes. */
int ros2_publisher(struct ros2 *r, char *err, size_t errlen);

/* Writes one /clock sample of @sim_ns (the clock thread calls it). */
int ros2_publish(struct ros2 *r, int64_t sim_ns);

void ros2_get_stats(struct ros2 *r, struct ros2_stats *st);

/* Stops following (joins the thread): before the clock thread stops. */
void ros2_stop(struct ros2 *r);

/* Deletes the participant and everything in it. NULL is accepted. */
void ros2_close(struct ros2 *r);

/* ROS Time <-> ns. Negative times have a negative sec and 0 <= nanosec <
 * 1e9; out of int32 seconds saturates. */
void ros2_time_from_ns(int64_t ns, int32_t *sec, uint32_t *nanosec);
int64_t ros2_time_to_ns(int32_t sec, uint32_t nanosec);

#endif
