/* SPDX-License-Identifier: MIT */
/*
 * Time sources: one file each behind this small interface (chrony's
 * refclock drivers have the same shape). The clock thread calls them; they
 * talk to the segment only through the writer API.
 */
#ifndef SHMCLOCKD_SOURCE_H
#define SHMCLOCKD_SOURCE_H

#include <stdbool.h>
#include <stdint.h>

#include <shmclock/writer.h>

#include "config.h"

/* Who moves a source's clock besides the clock thread's ticks: the
 * daemon and the clock thread ask this, never a driver's name. */
enum source_feed {
	FEED_NONE,   /* nobody: it runs by itself (advance is refused) */
	FEED_CLIENT, /* control clients, with advance (the external source) */
	FEED_ROS2,   /* ROS 2 /clock samples (needs the DDS module; advance is
		      * refused to clients) */
	FEED_LEADER, /* a leader's time function over DDS (mode_distribute.c): every
		      * change is refused to clients */
};

struct source_ops {
	const char *name;      /* as in the config's TimeSource */
	const char *alias;     /* AWSIM's other name for it, or NULL */
	int id;                /* enum shmclock_source */
	bool stepped;          /* time arrives in steps: no extrapolation */
	bool scalable;         /* TimeScale applies */
	enum source_feed feed; /* what advances it */
	/* Initialize a fresh clock from the config (not called when an existing
	 * clock is continued after a restart). Returns 0 or -errno. */
	int (*start)(shmclock_writer_t *w, const struct shmclockd_config *c);
	/* Once per clock-thread tick; NULL when nothing is to do. */
	void (*tick)(shmclock_writer_t *w, const struct shmclockd_config *c, int64_t tick_mono_ns);
	/* Real time between ticks, ns; NULL: 1e9 / PublishHz. */
	int64_t (*period)(const struct shmclockd_config *c, double scale);
};

extern const struct source_ops source_simulation;
extern const struct source_ops source_system;
extern const struct source_ops source_external;
extern const struct source_ops source_fixed;
#ifdef SHMCLOCK_HAVE_ROS2
extern const struct source_ops source_ros2;
extern const struct source_ops source_leader;
#endif

/* By name or alias; NULL if unknown. *why is set for known-but-unavailable. */
const struct source_ops *source_lookup(const char *name, const char **why);

/* "simulation, system, external (ss2), fixed (unity)" */
const char *source_names(void);

/* Real time between the clock thread's ticks for @c's source, at @w's
 * current scale, ns. */
int64_t source_period(const struct shmclockd_config *c, shmclock_writer_t *w);

#endif
