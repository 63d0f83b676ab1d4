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

/* Each returns 0, or -errno with a one-line message in err (the daemon's
 * convention). */

/* Ros2.Domain, else $ROS_DOMAIN_ID (as ROS 2 reads it), else 0, into
 * cfg->ros2_domain. */
int ros2_glue_domain(struct shmclockd_config *cfg, char *err, size_t errlen);

/* The module, when the config follows or publishes /clock (*api NULL
 * otherwise), before the clock is touched. */
int ros2_glue_load(const struct shmclockd_config *cfg, const struct ros2_api **api, char *err,
		   size_t errlen);

/* The DDS participant for the ros2 source and/or the /clock publisher,
 * feeding clock thread @ct (*out NULL on error). */
int ros2_glue_open(const struct shmclockd_config *cfg, struct clockthread *ct,
		   const struct ros2_api *api, struct ros2 **out, char *err, size_t errlen);

/* Status: the "ros2" object (what the DDS side counts), into @st. */
struct cJSON;
void ros2_glue_status(struct ros2 *r, const struct ros2_api *api, const struct shmclockd_config *cfg,
		      struct cJSON *st);

#endif
