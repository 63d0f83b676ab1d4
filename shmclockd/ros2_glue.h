/* SPDX-License-Identifier: MIT */
/*
 * The daemon's side of ROS 2: which DDS domain, loading the module when the
 * config asks for ROS 2, opening its participant for the clock thread.
 * ros2_glue.c with Cyclone DDS, ros2_glue_stub.c without (the config then
 * refuses every Ros2 key and TimeSource "ros2" before these are reached),
 * so main.c has no #ifdef.
 */
#ifndef SHMCLOCKD_ROS2_GLUE_H
#define SHMCLOCKD_ROS2_GLUE_H

#include "clockthread.h"
#include "config.h"
#include "ros2.h"

/* Ros2.Domain, else $ROS_DOMAIN_ID (as ROS 2 reads it), else 0, into
 * cfg->ros2_domain. 0, or -1 after a one-line message on stderr. */
int ros2_glue_domain(struct shmclockd_config *cfg);

/* The module, when the config follows or publishes /clock (*api NULL
 * otherwise), before the clock is touched. 0, or -1 after a message. */
int ros2_glue_load(const struct shmclockd_config *cfg, const struct ros2_api **api);

/* The DDS participant for the ros2 source and/or the /clock publisher,
 * feeding clock thread @ct. 0, or -1 after a message (*out NULL). */
int ros2_glue_open(const struct shmclockd_config *cfg, struct clockthread *ct,
		   const struct ros2_api *api, struct ros2 **out);

#endif
