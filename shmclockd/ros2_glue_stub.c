/* SPDX-License-Identifier: MIT */
/* Built without ROS 2 support: nothing to load or open (ros2_glue.h), and
 * the sources that need it are stand-ins. */
#include "ros2_glue.h"
#include "source.h"

/* The sources that need the module: named in the table, refused here. */
#define NOT_BUILT_IN "the ros2 and leader sources are not built in (this shmclockd was built " \
		     "without Cyclone DDS)"
const struct source_ops source_ros2_ops = { .missing = NOT_BUILT_IN };
const struct source_ops source_leader_ops = { .missing = NOT_BUILT_IN };

int ros2_glue_domain(struct shmclockd_config *cfg, char *err, size_t errlen)
{
	(void)cfg;
	(void)err;
	(void)errlen;
	return 0;
}

int ros2_glue_load(const struct shmclockd_config *cfg, const struct ros2_api **api, char *err,
		   size_t errlen)
{
	(void)cfg;
	(void)err;
	(void)errlen;
	*api = NULL;
	return 0;
}

int ros2_glue_open(const struct shmclockd_config *cfg, struct clockthread *ct,
		   const struct ros2_api *api, struct ros2 **out, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	(void)cfg;
	(void)ct;
	(void)api;
	*out = NULL;
	return 0;
}

void ros2_glue_status(struct ros2 *r, const struct ros2_api *api, const struct shmclockd_config *cfg,
		      struct cJSON *st)
{
	(void)r;
	(void)api;
	(void)cfg;
	(void)st;
}
