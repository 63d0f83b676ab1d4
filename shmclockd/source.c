/* SPDX-License-Identifier: MIT */
#include <stddef.h>
#include <string.h>
#include <strings.h>

#include "source.h"

static const struct source_ops *const sources[] = {
	&source_simulation, &source_system, &source_external, &source_fixed,
#ifdef SHMCLOCK_HAVE_ROS2
	&source_ros2, &source_leader,
#endif
};

const struct source_ops *source_lookup(const char *name, const char **why)
{
	*why = NULL;
	for (size_t i = 0; i < sizeof(sources) / sizeof(sources[0]); i++)
		if (!strcasecmp(name, sources[i]->name) ||
		    (sources[i]->alias && !strcasecmp(name, sources[i]->alias)))
			return sources[i];
	if (!strcasecmp(name, "ros2") || !strcasecmp(name, "leader"))
		*why = "the ros2 and leader sources are not built in (this shmclockd was built without "
		       "Cyclone DDS)";
	return NULL;
}

const char *source_names(void)
{
#ifdef SHMCLOCK_HAVE_ROS2
	return "simulation, system, external (alias ss2), fixed (alias unity), ros2, leader";
#else
	return "simulation, system, external (alias ss2), fixed (alias unity)";
#endif
}

int64_t source_period(const struct shmclockd_config *c, shmclock_writer_t *w)
{
	shmclock_info_t in;

	if (!c->source->period)
		return 1000000000 / c->hz;
	shmclock_writer_info(w, &in);
	return c->source->period(c, in.scale);
}
