/* SPDX-License-Identifier: MIT */
/*
 * <shmclock/shmclock.h> — read a shared simulation clock.
 *
 * A writer (shmclockd, or a simulator using <shmclock/writer.h>) publishes a
 * piecewise-linear time function in /dev/shm/shmclock.<name>. Readers map it
 * read-only and compute the current simulation time themselves: lock-free,
 * with no system call when the vDSO serves clock_gettime(CLOCK_MONOTONIC).
 *
 * Every call returns 0 or a negative errno from SHMCLOCK_ERRNO_MAP below,
 * each with one meaning; errno itself is never set on purpose.
 * shmclock_strerror() gives the map's message for a code. Notes:
 *   -ESTALE   the value is still filled in, computed from the last committed
 *             state (time keeps its last rate): no writer is alive, or the
 *             writer is alive but has lost what it follows (a leader on
 *             another host, ROS 2 /clock; shmclock_info_t.stale), and time
 *             is held or extrapolated as its OnLeaderLoss says, or time is
 *             held at the instant of a change its writer scheduled and has
 *             not yet decided (shmclock_writer_freeze_at; a follower that
 *             has not heard its leader's commit)
 *   -EAGAIN   the writer is alive but was stopped (a debugger, SIGSTOP)
 *             within the few instructions that open an update, for longer
 *             than SHMCLOCK_STUCK_NS. A writer stopped anywhere later in an
 *             update does not make reads wait or fail: they return the last
 *             committed time, frozen at the instant the update takes effect
 *   -EPERM    see SHMCLOCK_OPEN_TRUST_ANY_OWNER in <shmclock/time.h>
 *   -EREMOTE  the same, for an owner outside this user namespace
 *
 * Handles are not shared-state objects: one shmclock_t may be used from many
 * threads at once (the read path writes nothing), but close it only once no
 * thread uses it.
 */
#ifndef SHMCLOCK_SHMCLOCK_H
#define SHMCLOCK_SHMCLOCK_H

/* A clock's name is 1 to SHMCLOCK_NAME_MAX of [A-Za-z0-9_.-]. */
#define SHMCLOCK_NAME_MAX 64

/* A limit's value as text ("64"), for messages written at compile time;
 * the limit must be a plain number. */
#define SHMCLOCK__STR(x) #x
#define SHMCLOCK__XSTR(x) SHMCLOCK__STR(x)

/*
 * Every error code the library returns (negated), and its one meaning, as
 * X(NAME, message): the source of shmclock_strerror() and of the bindings'
 * tables (expand it after including <errno.h>).
 */
#define SHMCLOCK_ERRNO_MAP(X)                                                                  \
	X(ENOENT, "no such clock")                                                             \
	X(EINVAL, "invalid argument (a clock name is 1 to " SHMCLOCK__XSTR(SHMCLOCK_NAME_MAX)   \
		  " of [A-Za-z0-9_.-])")                                                       \
	X(EPROTO, "not a shmclock segment of this version (bad size, magic, version or "      \
		  "layout)")                                                                   \
	X(EPERM, "the clock belongs to another user, who is not trusted (see SHMCLOCK_TRUST)") \
	X(EREMOTE, "the clock belongs to a user outside this user namespace (a container "      \
		   "with one?): see SHMCLOCK_TRUST=outside in doc/containers.md")              \
	X(EACCES, "permission denied")                                                         \
	X(ENODATA, "the clock has not been initialized")                                       \
	X(ESTALE, "the clock is stale (no writer alive, or its leader or /clock is lost): "    \
		  "time is held or extrapolated from the last committed state")                \
	X(EAGAIN, "the writer was stopped at the start of an update")                          \
	X(EBUSY, "another live writer holds the clock")                                        \
	X(ENOSPC, "no space left in /dev/shm")                                                 \
	X(ENOMEM, "out of memory")                                                             \
	X(ERANGE, "value out of range")                                                        \
	X(EOVERFLOW, "the clock is paused or stepped: no instant is known at which it "       \
		     "reaches that time")                                                      \
	X(EOPNOTSUPP, "the clock has no UnixTimeAtZero: its time is not a UNIX time")         \
	X(ETIMEDOUT, "timed out")                                                              \
	X(ECANCELED, "cancelled")                                                              \
	X(EINTR, "the clock jumped")                                                           \
	X(EXDEV, "the clock's writer is in another time namespace (its CLOCK_MONOTONIC is "   \
		 "offset from this process's): its time read here would be off by the "        \
		 "difference")

#include <stdbool.h>
#include <stdint.h>

#include <shmclock/version.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
/* C++ spells the handle's tag differently so that the name `shmclock` stays
 * free for the namespace of <shmclock/shmclock.hpp>. The handle is only
 * ever passed by pointer to these extern "C" functions: the same bytes. */
typedef struct shmclock_handle shmclock_t;
#else
typedef struct shmclock shmclock_t;
#endif

/*
 * The reads are called through the GOT, not a PLT stub (GCC's noplt; a
 * compiler without it ignores the macro): one indirect jump less on the
 * one path that runs millions of times a second (bench/README.md, read).
 */
#if defined(__has_attribute)
#if __has_attribute(noplt)
#define SHMCLOCK_READ_CALL __attribute__((noplt))
#endif
#endif
#ifndef SHMCLOCK_READ_CALL
#define SHMCLOCK_READ_CALL
#endif

/* What a time source is like: the flags of SHMCLOCK_SOURCE_MAP. */
#define SHMCLOCK_SOURCE_F_STEPPED 1u    /* time arrives in steps: no extrapolation */
#define SHMCLOCK_SOURCE_F_CONTINUOUS 2u /* time runs at a rate between changes */
#define SHMCLOCK_SOURCE_F_OWN_SCALE 4u  /* the source changes its rate itself (a
					 * follower's is its leader's), not only
					 * a request */

/*
 * Every time source (shmclock.json(5) TimeSource, shmclockd(8) TIME
 * SOURCES), as X(value, ID, name, alias, flags, help):
 *   value  its number in enum shmclock_source and in the segment; never
 *          reused: a new source takes the next one
 *   ID     the enum's SHMCLOCK_SOURCE_<ID>
 *   name   a bare word (stringized): the config's and the status' name,
 *          shmclock_source_name()'s; shmclockd implements it in
 *          shmclockd/source_<name>.c
 *   alias  AWSIM's other name for it ("ss2"), or NULL
 *   flags  SHMCLOCK_SOURCE_F_* above, never both STEPPED and CONTINUOUS
 *   help   its line in shmclockd --help
 * The one list: enum shmclock_source, shmclock_source_name(), shmclockd's
 * lookup, help and config checks and the Python binding's docstring are
 * expanded from it; tests/doc/sources.py compares the C# enum and the man
 * pages with it.
 */
#define SHMCLOCK_SOURCE_MAP(X)                                                                \
	X(1, SIMULATION, simulation, NULL, SHMCLOCK_SOURCE_F_CONTINUOUS,                      \
	  "from 0 (or StartTime), at the scale")                                              \
	X(2, SYSTEM, system, NULL, SHMCLOCK_SOURCE_F_CONTINUOUS,                              \
	  "from the current UNIX time, at the scale")                                         \
	X(3, EXTERNAL, external, "ss2", SHMCLOCK_SOURCE_F_STEPPED,                            \
	  "fed by set, step and advance; no scale")                               \
	X(4, FIXED, fixed, "unity", SHMCLOCK_SOURCE_F_STEPPED,                                \
	  "frames of StepNs, PublishHz x scale a second")                      \
	X(5, ROS2, ros2, NULL, SHMCLOCK_SOURCE_F_STEPPED,                                     \
	  "ROS 2 /clock over DDS, each sample a step")                                        \
	X(6, LEADER, leader, NULL, SHMCLOCK_SOURCE_F_CONTINUOUS | SHMCLOCK_SOURCE_F_OWN_SCALE, \
	  "a leader on another host (Distribute)")                                           \
	X(7, REPLAY, replay, NULL, SHMCLOCK_SOURCE_F_CONTINUOUS | SHMCLOCK_SOURCE_F_OWN_SCALE, \
	  "a recording's time function (Replay), at its pace")

/* Where the writer's time comes from: 0 or a value of SHMCLOCK_SOURCE_MAP. */
enum shmclock_source {
	SHMCLOCK_SOURCE_NONE = 0,
#define SHMCLOCK__SOURCE_ENUM(value, id, name, alias, flags, help) SHMCLOCK_SOURCE_##id = value,
	SHMCLOCK_SOURCE_MAP(SHMCLOCK__SOURCE_ENUM)
#undef SHMCLOCK__SOURCE_ENUM
};

/* A reader waits at most this long for a live writer stopped between its
 * first store of an update and the publication of the update's anchor. */
#define SHMCLOCK_STUCK_NS 1000000000LL

/**
 * shmclock_open() - map the clock /dev/shm/shmclock.<name> read-only.
 * @name: [A-Za-z0-9_.-], 1 to SHMCLOCK_NAME_MAX characters.
 * @out:  receives the handle on success.
 *
 * Only a segment owned by root, by this user or by a trusted user is opened
 * (see SHMCLOCK_OPEN_TRUST_ANY_OWNER in <shmclock/time.h>).
 *
 * Return: 0; -EINVAL bad name; -ENOENT no such clock; -EPROTO the file is not
 * a shmclock segment of this ABI version (wrong size, magic, version or
 * layout, or not a regular file); -EPERM the segment's owner is not trusted;
 * -EREMOTE its owner is outside this user namespace and not trusted;
 * -EXDEV its writer is in a time namespace of another CLOCK_MONOTONIC
 * offset; -ESTALE the file is a copy of a live clock's, not the one its
 * writer serves;
 * -EACCES; -ENOMEM.
 */
int shmclock_open(const char *name, shmclock_t **out);

/** shmclock_close() - unmap and free. NULL is accepted. */
void shmclock_close(shmclock_t *clk);

/**
 * shmclock_now() - the current simulation time, in ns.
 *
 * Lock-free, no system call, touches one cache line of the segment.
 * Return: 0 and *sim_ns set; -ESTALE and *sim_ns set (no writer alive, the
 * clock is marked stale, or time is held at an instant not yet decided);
 * -ENODATA the clock has not been initialized (*sim_ns untouched);
 * -EAGAIN the writer is stuck mid-update (*sim_ns untouched).
 */
SHMCLOCK_READ_CALL int shmclock_now(shmclock_t *clk, int64_t *sim_ns);

/**
 * shmclock_now_unix() - the simulated world's UNIX time, in ns: the clock's
 * UnixTimeAtZero plus the simulation time, read in the same snapshot. A
 * clock without UnixTimeAtZero counts its simulation time from the UNIX
 * epoch (the system source, or a simulator started at the epoch), so
 * *unix_ns is then the simulation time itself.
 *
 * Same cost and returns as shmclock_now().
 */
SHMCLOCK_READ_CALL int shmclock_now_unix(shmclock_t *clk, int64_t *unix_ns);

/**
 * shmclock_now_monotonic() - the jump-free simulated time, in ns: the
 * simulation time minus the sum of every jump the clock has made
 * (shmclock_info_t.jump_total_ns), read in the same snapshot. The clock's
 * rate, pauses and steps move it; a jump (a `set`, forwards or backwards,
 * a reset, an external source going back) never does, so it never
 * decreases. It is what the preload shim shows as CLOCK_MONOTONIC, and
 * the right time for relative timeouts: it equals the simulation time until
 * the first jump. Touches a second cache line of the segment; otherwise
 * the same cost and returns as shmclock_now().
 */
SHMCLOCK_READ_CALL int shmclock_now_monotonic(shmclock_t *clk, int64_t *ns);

/* A consistent snapshot of everything the segment says. */
typedef struct shmclock_info {
	int64_t sim_ns;            /* simulation time at the snapshot */
	int64_t mono_ns;           /* CLOCK_MONOTONIC at the snapshot */
	double scale;              /* nominal rate (kept while paused/stepped) */
	int source;                /* enum shmclock_source */
	bool initialized;          /* false: sim_ns means nothing */
	bool paused;
	bool stepped;              /* stepped source: no extrapolation */
	bool has_unix_at_zero;
	int64_t unix_at_zero_ns;   /* UNIX time of simulation zero (OSI) */
	uint64_t jump_epoch;       /* explicit jumps so far */
	int64_t last_jump_ns;      /* signed size of the last jump */
	bool writer_alive;
	int32_t writer_pid;        /* in the writer's pid namespace */
	uint32_t writer_generation;/* how many writers have opened the clock */
	int64_t writer_start_unix_ns;
	int64_t heartbeat_age_ns;  /* since the writer's last heartbeat; -1 never */
	uint64_t commits;          /* changes published so far */
	uint32_t owner_uid;        /* owner of the segment file */
	int64_t jump_total_ns;     /* signed sum of all jumps: sim_ns minus this
				    * is the jump-free time (shmclock_now_monotonic) */
	bool stale;                /* the writer is alive but has lost what it
				    * follows (a leader on another host, ROS 2
				    * /clock): time is held or extrapolated;
				    * or this read is held at an instant not yet
				    * decided; reads return -ESTALE */
} shmclock_info_t;

/**
 * shmclock_info() - fill *info with a consistent snapshot.
 * Return: 0 (also for an uninitialized clock or a dead writer: see the
 * fields); -EAGAIN the writer is stuck mid-update.
 */
int shmclock_info(shmclock_t *clk, shmclock_info_t *info);

/** shmclock_name() - the clock's name, as given to shmclock_open(). */
const char *shmclock_name(const shmclock_t *clk);

/**
 * shmclock_unlink() - remove /dev/shm/shmclock.<name>. Readers and a writer
 * that have it mapped keep working on the removed segment.
 * Return: 0; -EINVAL bad name; -ENOENT; -EACCES / -EPERM.
 */
int shmclock_unlink(const char *name);

/** shmclock_check_name() - 0 if @name is a valid clock name, else -EINVAL. */
int shmclock_check_name(const char *name);

/**
 * shmclock_strerror() - a message for 0 or a negative errno from this library.
 * Never NULL; the string is static.
 */
const char *shmclock_strerror(int err);

/** shmclock_source_name() - a source's name in SHMCLOCK_SOURCE_MAP ("simulation",
 * "system", ...); "none" for 0, "unknown" for a value not in the map. */
const char *shmclock_source_name(int source);

/** shmclock_version() - the library's version string, e.g. "0.1.0". */
const char *shmclock_version(void);

#ifdef __cplusplus
}
#endif

/* Opt-in inline fast path (frozen ABI; see <shmclock/static/shmclock.h>). */
#if defined(SHMCLOCK_INLINE_FASTPATH) && !defined(__cplusplus)
#include <shmclock/static/shmclock.h>
#define shmclock_now(clk, sim_ns) shmclock_static_now((clk), (sim_ns))
#endif

#endif
