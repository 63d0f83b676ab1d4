/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
/* Loads libshmclockd-ros2.so when a config asks for ROS 2 (see ros2.h). */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "paths.h"
#include "ros2.h"

#ifndef SHMCLOCKD_MODULE_DIR
#define SHMCLOCKD_MODULE_DIR "/usr/local/lib/shmclockd"
#endif

static void *try_open(const char *path, char *err, size_t errlen)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);

	if (!h && !err[0])
		snprintf(err, errlen, "%s", dlerror());
	return h;
}

const struct ros2_api *ros2_load(char *err, size_t errlen)
{
	const char *env = getenv("SHMCLOCKD_ROS2_MODULE"), *beside;
	char path[PATH_MAX];
	void *h = NULL;

	err[0] = 0;
	if (env && *env)
		h = try_open(env, err, errlen);
	else if ((beside = paths_beside_self(ROS2_MODULE, path, sizeof(path))))
		h = try_open(beside, err, errlen); /* the build tree */
	else
		h = try_open(SHMCLOCKD_MODULE_DIR "/" ROS2_MODULE, err, errlen);
	if (!h) {
		char why[256];

		snprintf(why, sizeof(why), "%s", err);
		snprintf(err, errlen, "ROS 2 support is not installed (%s)", why);
		return NULL;
	}
	const struct ros2_api *api = dlsym(h, ROS2_API_SYMBOL);

	if (!api)
		snprintf(err, errlen, "%s has no %s: not a shmclockd ROS 2 module", ROS2_MODULE,
			 ROS2_API_SYMBOL);
	return api; /* the module stays loaded for the process's life */
}
