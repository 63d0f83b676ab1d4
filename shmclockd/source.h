/* SPDX-License-Identifier: MIT */
/*
 * Time sources: one row each in SHMCLOCK_SOURCE_MAP (<shmclock/shmclock.h>),
 * one file each behind this small interface (chrony's refclock drivers
 * have the same shape). The clock thread calls them; they talk to the
 * segment only through the writer API.
 *
 * A new source: its row in the map (the next value), its file
 * source_<name>.c defining source_<name>_ops, that file in meson.build, its
 * entry in shmclockd(8) TIME SOURCES and its member in C#'s ClockSource
 * (tests/doc/sources.py fails until both are there).
 */
#ifndef SHMCLOCKD_SOURCE_H
#define SHMCLOCKD_SOURCE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <shmclock/shmclock.h>
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

/* What a source's own file gives (source_<name>.c): how the daemon drives
 * it. What the source is (its name, alias, whether stepped) is its row of
 * SHMCLOCK_SOURCE_MAP in <shmclock/shmclock.h>. */
struct source_ops {
	const char *missing;   /* not built in: why (a stand-in's only field) */
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

/* Every source's file defines source_<name>_ops (source.c expands the
 * table's names into these); one not built in is a stand-in with only
 * .missing (ros2_glue_stub.c). */
#define SOURCE_OPS_DECLARE(value, id, name, alias, flags, help) \
	extern const struct source_ops source_##name##_ops;
SHMCLOCK_SOURCE_MAP(SOURCE_OPS_DECLARE)
#undef SOURCE_OPS_DECLARE

/* A time source: its row of SHMCLOCK_SOURCE_MAP and its file's ops. */
struct source {
	const char *name;  /* as in the config's TimeSource */
	const char *alias; /* AWSIM's other name for it, or NULL */
	const char *help;  /* its line in shmclockd --help */
	int id;            /* enum shmclock_source */
	bool stepped;      /* time arrives in steps: no extrapolation */
	bool continuous;   /* time runs at a rate between changes */
	bool own_scale;    /* the source changes its rate itself (a follower's
			    * is its leader's) */
	const struct source_ops *ops;
};

/* Runs by itself at the rate this daemon sets: continuous, and the source
 * does not change its rate itself. What a leader between hosts publishes
 * as a time function, once per change (config_validate). */
static inline bool source_can_lead(const struct source *s)
{
	return s->continuous && !s->own_scale;
}

/* By name or alias; NULL if unknown. *why is set for known-but-unavailable. */
const struct source *source_lookup(const char *name, const char **why);

/* By enum shmclock_source; NULL if not in the table. */
const struct source *source_by_id(int id);

/* The built sources, with aliases: "simulation, system, external (alias
 * ss2), fixed (alias unity), ros2, leader". */
const char *source_names(void);

/* Those that can lead between hosts (source_can_lead()): "simulation or system". */
const char *source_leader_names(void);

/* The "time sources:" part of shmclockd --help: each source, its alias and
 * its help line, one a line. */
void source_help(FILE *f);

/* Real time between the clock thread's ticks for @c's source, at @w's
 * current scale, ns. */
int64_t source_period(const struct shmclockd_config *c, shmclock_writer_t *w);

#endif
