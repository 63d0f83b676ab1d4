/* SPDX-License-Identifier: MIT */
/*
 * A run's timeline as MCAP messages (doc/record.md): what shmclockd's
 * recorder writes (shmclockd/record.c), what its replay and shmclock-cat
 * --mcap read. One table of channels; each message is JSON with a JSON
 * Schema, 64-bit integers as decimal strings (JSON numbers lose them past
 * 2^53: protobuf's JSON mapping does the same).
 *
 *   /shmclock/function   each committed change of the time function, with
 *                        its cause; log_time its simulated instant (0 if
 *                        negative), publish_time its wall-clock time
 *   /shmclock/lockstep   participants joining, leaving, dying, stalling,
 *                        evicted, and who held the clock before a release
 *   /shmclock/hosts      between hosts: a follower joined, left or was lost
 *                        (on its leader); a leader followed, lost (with its
 *                        reason), in conflict with another (on a follower)
 */
#ifndef SHMCLOCK_COMMON_TIMELINE_H
#define SHMCLOCK_COMMON_TIMELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mcap.h"

/* The recording's format: the Header's profile is "shmclock" and each
 * channel's metadata says "shmclock.record" = TL_VERSION; a reader refuses
 * any other. */
#define TL_PROFILE "shmclock"
#define TL_VERSION "1"

/* X(id, topic, schema name): channel and schema ids are the same. */
#define TL_CHANNELS(X)                                            \
	X(1, "/shmclock/function", "shmclock.FunctionChange")     \
	X(2, "/shmclock/lockstep", "shmclock.LockstepEvent")     \
	X(3, "/shmclock/hosts", "shmclock.HostsEvent")

enum { TL_CH_FUNCTION = 1, TL_CH_LOCKSTEP = 2, TL_CH_HOSTS = 3, TL_NCHANNELS = 3 };

const char *tl_topic(int channel);
const char *tl_schema_name(int channel);
const char *tl_schema(int channel); /* its JSON Schema */

/* Why the function changed. */
enum tl_cause_kind {
	TL_CAUSE_START,    /* the daemon started the clock, or continued it */
	TL_CAUSE_CONTROL,  /* a control request: command, arg, uid, pid */
	TL_CAUSE_SOURCE,   /* the time source: a tick (fixed), a sample (ros2) */
	TL_CAUSE_LOCKSTEP, /* a grant released the clock: who held it, for how long */
	TL_CAUSE_LEADER,   /* a leader's function (term) */
	TL_CAUSE_STALE,    /* what the clock follows was lost or is back */
	TL_CAUSE_RELOAD,   /* a reloaded config */
	TL_CAUSE_REPLAY,   /* a recording replayed */
	TL_CAUSE_MODE,     /* the clock's mode, otherwise */
	TL_NCAUSES
};

const char *tl_cause_name(enum tl_cause_kind k);

struct tl_cause {
	enum tl_cause_kind kind;
	char command[16];  /* CONTROL: the request's command */
	char arg[48];      /* CONTROL: its argument as given, or "" */
	int64_t uid, pid;  /* CONTROL: the client's (-1 unknown); LOCKSTEP: the holder's pid */
	char who[68];      /* LOCKSTEP: the participant that held the clock */
	int64_t held_ns;   /* LOCKSTEP: how long (real time) it held it */
	uint64_t term;     /* LEADER */
};

/* One change of the function: what shmclock_writer_function() gives, and
 * when. */
struct tl_change {
	uint64_t seq;           /* the recording's count, from 0 */
	uint64_t commits;       /* the clock's commit count after it */
	int64_t mono_base;      /* the writer host's CLOCK_MONOTONIC */
	int64_t sim_base;
	uint64_t rate;          /* 32.32, effective */
	uint64_t nominal_mult;  /* 32.32, nominal */
	bool paused, stepped, stale, initialized;
	int source;             /* enum shmclock_source */
	uint64_t jump_epoch;
	int64_t last_jump_ns, jump_total_ns;
	bool has_unix_at_zero;
	int64_t unix_at_zero_ns;
	int64_t wall_ns;        /* CLOCK_REALTIME when recorded */
	int64_t at_mono_ns;     /* CLOCK_MONOTONIC when recorded (>= the commit) */
	struct tl_cause cause;
};

/* The change as its JSON message into @buf: its length, or a value >=
 * @len when it did not fit. */
size_t tl_change_json(const struct tl_change *c, char *buf, size_t len);
/* A message of /shmclock/function back into @c: 0, or -EBADMSG with @err. */
int tl_change_parse(const void *json, size_t len, struct tl_change *c, char *err, size_t errlen);

/* A lockstep event. */
struct tl_lockstep {
	char event[16];     /* join, leave, death, stall, evict */
	char who[68];
	int64_t pid;
	int64_t sim_ns;     /* the clock when it happened */
	int64_t grant_ns;   /* the participant's last grant (-1 none) */
	int64_t wall_ns;
};

size_t tl_lockstep_json(const struct tl_lockstep *e, char *buf, size_t len);
int tl_lockstep_parse(const void *json, size_t len, struct tl_lockstep *e, char *err,
		      size_t errlen);

/* An event between hosts. */
struct tl_hosts {
	char event[16];     /* joined, left, lost, following, leader-lost, conflict */
	char host[100];     /* the follower's or the leader's id */
	char detail[160];   /* why (a loss's reason), or "" */
	uint64_t term;      /* the leader's term, 0 unknown */
	int64_t sim_ns;     /* the clock when it happened */
	int64_t wall_ns;
};

size_t tl_hosts_json(const struct tl_hosts *e, char *buf, size_t len);
int tl_hosts_parse(const void *json, size_t len, struct tl_hosts *e, char *err, size_t errlen);

/* Writes the start of a recording into @b: the magic, the Header, every
 * channel's Schema and Channel record. */
void tl_put_start(struct mcap_buf *b, const char *clock, const char *library);
/* The summary's Schema and Channel records. */
void tl_put_channels(struct mcap_buf *b, const char *clock);

/*
 * A recording read whole (the replay, shmclock-cat --mcap): its function
 * changes in order and its lockstep events. tl_load() reads what is
 * complete; a file cut short loads what came before the cut, with
 * truncated set and where/why in note. 0, or -errno with a one-line err.
 */
struct tl_recording {
	char clock[72];
	struct tl_change *changes;
	size_t nchanges;
	struct tl_lockstep *events;
	size_t nevents;
	struct tl_hosts *hosts;
	size_t nhosts;
	bool truncated;
	uint64_t stopped_at;  /* the byte where reading stopped */
	char note[200];       /* why, when truncated */
};

int tl_load(const char *path, struct tl_recording *rec, char *err, size_t errlen);
int tl_load_mem(const void *mem, size_t size, struct tl_recording *rec, char *err,
		size_t errlen);
/* As tl_load_mem(), with TL_NO_CRC: chunks' CRCs not checked, so that a
 * fuzzer's mutations reach the messages. */
#define TL_NO_CRC 1u
int tl_load_mem_flags(const void *mem, size_t size, unsigned flags, struct tl_recording *rec,
		      char *err, size_t errlen);
void tl_free(struct tl_recording *rec);

/* What change @c made after @prev (NULL: the first), in words: "running
 * x2", "paused", "jumped -3s", "stale". */
void tl_describe(const struct tl_change *prev, const struct tl_change *c, char *buf, size_t len);
/* Its cause in words: "control pause (uid 1000, pid 42)". */
void tl_cause_text(const struct tl_cause *k, char *buf, size_t len);

/*
 * A replay in lockstep (mode_lockstep.c): where the recording starts
 * (*start) and, in increasing order, the simulated instants its changes
 * happened at and moved to (*due, malloc'd, *n of them): a lockstep clock
 * stops at each, whatever its participants grant. 0, or -EINVAL with @err
 * for a recording that jumps back (a lockstep replay only moves forward:
 * its participants' grants are ahead), -ENOMEM.
 */
int tl_due_times(const struct tl_recording *rec, int64_t *start, int64_t **due, size_t *n,
		 char *err, size_t errlen);

/* Where a replay starts in the recording (its CLOCK_MONOTONIC): the
 * recording's start, or its first function's anchor when that function was
 * made then (a fresh clock; then the replay is exact from its first
 * instant). */
int64_t tl_start_mono(const struct tl_recording *rec);

/* The function of @c at CLOCK_MONOTONIC @mono (of the recording host), as
 * a reader computes it. */
int64_t tl_eval(const struct tl_change *c, int64_t mono);

#endif
