/* SPDX-License-Identifier: MIT */
/* shmclockd's configuration: defaults, the JSON file, command-line overrides. */
#ifndef SHMCLOCKD_CONFIG_H
#define SHMCLOCKD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <shmclock/lockstep.h>
#include <shmclock/shmclock.h>

#define CONFIG_ERR_MAX 512

/* TimeScale, --scale and the control request `scale` share these limits
 * (plain numbers: messages spell them with SHMCLOCK__XSTR). */
#define CONFIG_SCALE_MIN 1e-6
#define CONFIG_SCALE_MAX 1e6

static inline bool config_scale_ok(double scale)
{
	return scale >= CONFIG_SCALE_MIN && scale <= CONFIG_SCALE_MAX; /* false for NaN */
}

struct source;

/* Distribute.OnSlow's largest count. */
#define DIST_ON_SLOW_MAX 32

struct shmclockd_config {
	char name[SHMCLOCK_NAME_MAX + 1]; /* Name */
	const struct source *source;    /* TimeSource */
	double scale;                   /* TimeScale */
	int hz;                         /* PublishHz, 1..10000 */
	bool has_start;
	int64_t start_ns;               /* StartTime */
	bool has_unix_zero;
	int64_t unix_zero_ns;           /* UnixTimeAtZero */
	bool paused;                    /* Paused */
	int64_t step_ns;                /* StepNs, 0: one tick's worth (1e9 / hz) */
	char socket_path[108];          /* ControlSocket, "" = default */
	unsigned segment_mode;          /* SegmentMode */
	bool has_group;
	gid_t group;                    /* ControlGroup */
	int sched_priority;             /* SchedPriority: SCHED_FIFO 1..99, 0 = normal */
	int64_t control_idle_ns;        /* ControlIdleTimeout: drop quiet clients */
	bool ros2_publish;              /* Ros2.Publish: publish /clock */
	int ros2_hz;                    /* Ros2.PublishHz, 1..10000 */
	int ros2_domain;                /* Ros2.Domain, 0..232; -1: $ROS_DOMAIN_ID, else 0 */
	int64_t ros2_stale_ns;          /* Ros2.StaleAfter: ros2 source stale without samples */
	char ros2_security[1024];       /* Ros2.Security: an enclave directory, "" = none */
	char record[1024];              /* Record: the MCAP file to record to, "" = none */
	char replay[1024];              /* Replay: the recording the replay source plays */
	/* Lockstep (0 participants: no lockstep) */
	int ls_participants;            /* Lockstep.Participants, 1..64: start once this many joined */
	double ls_max_scale;            /* Lockstep.MaxScale, 0: as fast as the grants allow */
	int64_t ls_stall_ns;            /* Lockstep.StallAfter: log who holds the clock */
	bool ls_abort;                  /* Lockstep.OnDeath: "abort" (true) or "evict" */
	int64_t ls_evict_ns;            /* Lockstep.EvictAfter: a holder this long stalls; 0: never */
	enum on_stall { STALL_WAIT, STALL_EVICT, STALL_ABORT } ls_on_stall; /* Lockstep.OnStall */
	bool ls_on_stall_given;         /* OnStall was set (else it follows EvictAfter) */
	int64_t ls_max_ahead_ns;        /* Lockstep.MaxGrantAhead: the grants' horizon */
	/* Between hosts (Distribute; TimeSource "leader" follows) */
	bool dist_publish;              /* Distribute.Publish: this clock leads */
	char dist_clock[SHMCLOCK_NAME_MAX + 1]; /* Distribute.Clock: the name on the wire, "" = Name */
	int64_t dist_lead_ns;           /* Distribute.Lead: changes take effect this much later */
	int64_t dist_hb_ns;             /* Distribute.Heartbeat: the leader's period */
	int64_t dist_stale_ns;          /* Distribute.StaleAfter, 0: three leader heartbeats */
	bool dist_run_on_loss;          /* Distribute.OnLeaderLoss: "run" (true) or "hold" */
	unsigned dist_on_slow;          /* Distribute.OnSlow: 0 "wait", else the changes in a
					 * row a follower holds up before it is asked aside */
};

/* The wire name of the clock: Distribute.Clock, else Name. */
static inline const char *config_dist_clock(const struct shmclockd_config *c)
{
	return c->dist_clock[0] ? c->dist_clock : c->name;
}

/* shmclockd's exit status when a lockstep participant died with OnDeath abort. */
#define SHMCLOCKD_EXIT_LOCKSTEP_DEATH 86
/* ... and when one held the clock for EvictAfter with OnStall abort. */
#define SHMCLOCKD_EXIT_LOCKSTEP_STALL 87

/* Lockstep.Participants, at most: one slot each on one host; on a leader
 * between hosts (Distribute.Publish), which counts every host's, the slots
 * of its own and of the 32 hosts it counts (LS_HOSTS_MAX, ros2.h). */
#define CONFIG_LOCKSTEP_MAX SHMCLOCK_LOCKSTEP_SLOTS
#define CONFIG_LOCKSTEP_HOSTS_MAX 2112

void config_defaults(struct shmclockd_config *c);

/* "evict" or "abort" (OnDeath, --on-death): 0 or -EINVAL. */
int config_on_death(const char *s, bool *abort_run);

/* What a stall does: OnStall, else evict when EvictAfter is set, else wait. */
static inline enum on_stall config_stall_policy(const struct shmclockd_config *c)
{
	if (c->ls_on_stall_given)
		return c->ls_on_stall;
	return c->ls_evict_ns ? STALL_EVICT : STALL_WAIT;
}

/* "wait", "evict" or "abort" (OnStall, --on-stall): 0 or -EINVAL. */
int config_on_stall(const char *s, enum on_stall *out);
/* Its name. */
const char *config_on_stall_name(enum on_stall s);

/* A follower (TimeSource "leader") with OnLeaderLoss hold: the clock
 * pauses while its leader is silent. */
bool config_holds_on_leader_loss(const struct shmclockd_config *c);

/* How a key's value is read (config.c's table). */
enum config_kind {
	KEY_BOOL,    /* true or false */
	KEY_INT,     /* a whole number from min to max (an int) */
	KEY_SCALE,   /* a number config_scale_ok() takes (a double) */
	KEY_TIME,    /* seconds or a duration, ns from min to max (max 0: none) */
	KEY_DATE,    /* seconds, a duration or an ISO-8601 date; sets the bool at flag */
	KEY_SECTION, /* an object of the keys whose section this is */
	KEY_OWN,     /* by its own function */
};

/* What a reload (SIGHUP) does with a key whose value changed. */
enum config_reload {
	RELOAD_LIVE,        /* applies to the running clock */
	RELOAD_RESTART,     /* changes only with a restart: the reload is refused */
	RELOAD_FRESH,       /* describes a fresh clock (a start, --reset): kept for
			     * the next one, nothing changes now (the log says so) */
	RELOAD_UNTIL_START, /* applies until the clock has started (lockstep's
			     * Participants); after that the reload is refused */
};

struct config_ctx;
struct cJSON;

/* One key of the config (config_keys[], one row each). */
struct config_key {
	const char *section;     /* NULL: the top level */
	const char *name;
	enum config_kind kind;
	size_t off, size;        /* where in struct shmclockd_config it is stored */
	bool str;                /* a char array, compared as a string */
	size_t flag;             /* KEY_DATE: the bool saying it was given */
	double min, max;         /* KEY_INT, KEY_TIME */
	bool required;           /* a section's key that must be given */
	enum config_reload reload; /* what SIGHUP does with a change */
	const char *option;      /* the command-line option that sets it, or NULL */
	const char *help;        /* one line: what it is (shmclockd --help-config) */
	const char *expect;      /* what a message says is expected; a section's example */
	const char *missing;     /* a section this build lacks: why */
	int (*own)(const struct config_ctx *x, const struct cJSON *v, struct shmclockd_config *c);
};

extern const struct config_key config_keys[];
extern const size_t config_nkeys;

/* The key @name of @section (NULL: the top level), NULL if none. */
const struct config_key *config_key_find(const char *section, const char *name);

/* The first key after @from (NULL: from the first) whose reload rule is
 * @rule and whose value differs between @a and @b, or NULL. */
const struct config_key *config_reload_change(const struct shmclockd_config *a,
					      const struct shmclockd_config *b,
					      enum config_reload rule,
					      const struct config_key *from);

/* "Section.Key" or "Key", in @buf. */
const char *config_key_path(const struct config_key *k, char *buf, size_t n);

/* The table as shmclockd --help-config prints it: a line per key, its
 * path, its rule on SIGHUP (live, restart, fresh, until-start), its help
 * line and the option that sets it. */
void config_print_keys(FILE *f);

/* "TimeSource, TimeScale, ...": the keys of @section (NULL: the top
 * level), in the table's order. */
const char *config_key_names(const char *section, char *buf, size_t n);

/*
 * Reads a JSON config file over *c. On error returns -EINVAL (or -errno for
 * an unreadable file) with a one-line message naming the file, the line
 * and the key in err; *c is then unspecified (parse into a copy).
 */
int config_load_file(const char *path, struct shmclockd_config *c, char *err, size_t errlen);

/* Same, from text in memory (`what` names it in messages). For tests/fuzzing. */
int config_load_text(const char *what, const char *text, size_t len, struct shmclockd_config *c,
		     char *err, size_t errlen);

/* Checks that belong to the whole config, after overrides. */
int config_validate(const struct shmclockd_config *c, char *err, size_t errlen);

#endif
