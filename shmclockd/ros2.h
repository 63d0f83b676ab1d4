/* SPDX-License-Identifier: MIT */
/*
 * ROS 2 interop over DDS (Eclipse Cyclone DDS): the `ros2` time source
 * follows the ROS 2 topic /clock (DDS topic rt/clock, type
 * rosgraph_msgs::msg::dds_::Clock_), and any source can publish /clock.
 *
 * It lives in a module of its own, libshmclockd-ros2.so, that shmclockd
 * loads only when the config asks for ROS 2: linked in, Cyclone DDS would
 * cost every shmclockd ~4 MiB of resident memory and ~10 ms of start-up
 * whether it speaks DDS or not. Built with the Meson feature `ros2`
 * (Cyclone DDS found); without it the config's Ros2 keys and TimeSource
 * "ros2" are clear errors.
 *
 * QoS (ros2_qos.h), as rclcpp and AWSIM use them: the follower reads best
 * effort (a reliable reader would never match AWSIM's best-effort writer);
 * the publisher writes reliable so that both kinds of subscriber match.
 * XCDR1 and participant user data "enclave=/;" as the ROS 2 RMW layers.
 */
#ifndef SHMCLOCKD_ROS2_H
#define SHMCLOCKD_ROS2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log.h"

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

/* What the daemon lends the module. */
struct ros2_host {
	void *ctx;
	/* A /clock sample for the clock (the follower thread calls it): 0, or
	 * -errno with a message in err. */
	int (*sample)(void *ctx, int64_t ns, char *err, size_t errlen);
	__attribute__((format(printf, 2, 3))) void (*log)(enum log_level level, const char *fmt, ...);
};

struct ros2_api {
	/* A DDS participant on @domain. 0, or -errno with a one-line err. */
	int (*open)(struct ros2 **out, int domain, const struct ros2_host *host, char *err,
		    size_t errlen);
	/* Follows /clock: each sample goes to host->sample (a backward one is
	 * a jump there). Stale after @stale_ns without a sample. A thread. */
	int (*follow)(struct ros2 *r, int64_t stale_ns, char *err, size_t errlen);
	/* Creates the /clock writer; publish() then writes one sample. */
	int (*publisher)(struct ros2 *r, char *err, size_t errlen);
	int (*publish)(struct ros2 *r, int64_t sim_ns);
	void (*get_stats)(struct ros2 *r, struct ros2_stats *st);
	/* Stops following (joins the thread): before the clock thread stops. */
	void (*stop)(struct ros2 *r);
	/* Deletes the participant and everything in it. NULL is accepted. */
	void (*close)(struct ros2 *r);
};

/* The module's one exported symbol. */
#define ROS2_API_SYMBOL "shmclockd_ros2_api"
#define ROS2_MODULE "libshmclockd-ros2.so"

/* The daemon's side: loads the module ($SHMCLOCKD_ROS2_MODULE, else next
 * to the shmclockd executable, else the installed one). NULL with err. */
const struct ros2_api *ros2_load(char *err, size_t errlen);

#endif
