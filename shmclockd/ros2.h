/* SPDX-License-Identifier: MIT */
/*
 * ROS 2 interop over DDS (Eclipse Cyclone DDS): the `ros2` time source
 * follows the ROS 2 topic /clock (DDS topic rt/clock, type
 * rosgraph_msgs::msg::dds_::Clock_), and any source can publish /clock.
 *
 * It lives in a module of its own, libshmclockd-ros2.so, that shmclockd
 * loads only when the config asks for ROS 2: linked in, Cyclone DDS would
 * cost every shmclockd ~4 MiB of resident memory and ~10 ms of start-up
 * whether it speaks DDS or not. Built with the Meson feature `ros2`
 * (Cyclone DDS found); without it the config's Ros2 keys and TimeSource
 * "ros2" are clear errors.
 *
 * QoS (ros2_qos.h), as rclcpp and AWSIM use them: the follower reads best
 * effort (a reliable reader would never match AWSIM's best-effort writer);
 * the publisher writes reliable so that both kinds of subscriber match.
 * XCDR1 and participant user data "enclave=/;" as the ROS 2 RMW layers.
 *
 * The same module carries shmclock's own topic between hosts
 * (ros2/TimeFunction.idl, "Several hosts" in the README): a leader
 * publishes its time function (reliable, transient-local, keep last 1 per
 * clock, so a late joiner gets the current one at once); a follower thread
 * hands each sample to the daemon and reports when the leader goes silent.
 */
#ifndef SHMCLOCKD_ROS2_H
#define SHMCLOCKD_ROS2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log.h"

struct ros2;

/* A time function between hosts (ros2/TimeFunction.idl, field by field). */
struct dist_fn {
	char clock[65];
	char leader[97];
	uint64_t term;
	uint64_t change, seq;
	int64_t effective_ns, sim_base_ns; /* effective_ns in the timebase */
	uint64_t mult;                     /* nominal rate, 32.32 */
	uint32_t flags;                    /* DIST_F_* */
	uint64_t jump_epoch;
	int64_t unix_at_zero_ns;
	uint8_t source, timebase;          /* enum shmclock_source; DIST_TB_* */
	int64_t sent_ns, heartbeat_ns;
	uint64_t committed, plan; /* two-phase: committed < change announces */
	int64_t lead_ns;
};

/* A follower's acknowledgement (ros2/TimeFunction.idl, TimeAck). */
struct dist_ack {
	char clock[65];
	char follower[97];
	char leader[97];
	uint64_t term, plan, acked, committed;
	int64_t lease_ns;
	uint64_t late, refused, holds; /* the follower's counts, for the leader's status */
	bool reliable; /* leader: taken from the reliable reader (a lease, a leave) */
	/* When the follower wrote it (its CLOCK_REALTIME, never back: the
	 * sample's source timestamp, which dist_ack writes when not 0); the
	 * leader: 0 unknown */
	int64_t written_ns;
	/* A leader's echo of a lease (TimeEcho; follower, leader, term,
	 * written_ns the lease's): the follower takes it as an acknowledgement
	 * of its own, with acked the leader's last change announced. */
	bool echo;
	/* An echo that asks the follower to step aside this long (OnSlow). */
	int64_t aside_ns;
};

/* Lockstep between hosts (ros2/TimeFunction.idl, LockstepGrant and
 * LockstepTime; shmclockd/lockstep_hosts.c). */
#define LS_HOSTS_MAX 32
#define LS_WHO_LEN 1024
#define LS_HOSTS_LEN 4001
#define LS_ROSTER_LEN 8001
struct ls_grant {
	char clock[65];
	char host[97];
	char leader[97];
	uint64_t seq;
	int64_t grant_ns, shown_ns, lease_ns;
	uint32_t members;
	uint64_t deaths;
	char last_death[256];
	char who[LS_WHO_LEN];
	int64_t echo_ns, held_ns;
};
struct ls_time {
	char clock[65];
	char leader[97];
	uint64_t seq;
	int64_t time_ns, sent_ns, heartbeat_ns;
	char hosts[LS_HOSTS_LEN];
	char roster[LS_ROSTER_LEN];
	bool running; /* the run has started */
};

#define DIST_F_PAUSED 0x1u
#define DIST_F_STEPPED 0x2u
#define DIST_F_UNIX_ZERO 0x4u
/* The leader echoes leases (TimeEcho): its followers wait for the echo. */
#define DIST_F_ECHO 0x8u
/* The leader's function in force re-expressed after its host clock stepped
 * (the same function on its host; on the wire earlier or later by the
 * step): its followers take it where it goes back too, their readers held
 * until it catches up. A follower that does not know the flag refuses it,
 * as before the flag. */
#define DIST_F_REANCHOR 0x10u
/* A leader that a leader above it deposed, still running: its heartbeat
 * says so (dist_publish_deposed), so that every host reports the conflict
 * for as long as both run, a follower that joins later too. Never
 * followed; never counted as a word from the leader (the silence watch).
 * Sent as an announcement never committed, which a follower of an older
 * version never follows either. */
#define DIST_F_DEPOSED 0x20u
/* The heartbeats a follower believes (Distribute.Heartbeat's range). */
#define DIST_HB_MIN_NS INT64_C(100000000)
#define DIST_HB_MAX_NS INT64_C(60000000000)
/* How long a follower hears nothing from its leader before it counts the
 * leader lost (silence): Distribute.StaleAfter, or three of the leader's
 * heartbeats when that is 0. The one copy: the transport's watch (ros2.c)
 * and the lease a follower asks of its leader (hosts/liveness.c). */
static inline int64_t dist_silence_ns(int64_t stale_after_ns, int64_t heartbeat_ns)
{
	return stale_after_ns > 0 ? stale_after_ns : 3 * heartbeat_ns;
}
/* A follower that has heard no leader this long says what to check, once:
 * a follower host with Lockstep follows only a leader in lockstep (their
 * topics differ: TimeFunction, LockstepTime); one without follows either
 * (mode_follow.c). */
#define DIST_NONE_HINT_NS INT64_C(5000000000)
/* How often a follower acknowledges at rest, and its lease: three of those
 * and a half second (hosts/dist.h); a lockstep host's lease too
 * (lockstep_hosts.c). */
#define DIST_ACK_HB_NS INT64_C(1000000000)
#define DIST_LEASE_NS (3 * DIST_ACK_HB_NS + 500000000)
/* How a TimeFunction sample goes (dist_publish): best effort, at once and
 * never held behind a lost one (announcements, their repetitions); and/or
 * reliably, kept for late joiners (the function in force, heartbeats). */
/* The leader's echo writers (one per follower, ros2.c): the members
 * (DIST_MEMBERS_MAX, hosts/dist.h, asserted there) and as many gone, whose
 * writers wait to be reused. */
#define DIST_ECHO_WRITERS 64
#define DIST_PUB_FAST 1u
#define DIST_PUB_RELIABLE 2u
#define DIST_TB_REALTIME 0
#define DIST_TB_TAI 1

struct dist_stats {
	uint64_t sent;        /* TimeFunction samples written (leader) */
	uint64_t received;    /* samples of our clock taken (follower) */
	uint64_t lost;        /* gaps in the leader's sample numbers (follower) */
	uint64_t acks_sent;   /* TimeAck samples written (follower) */
	uint64_t acks_received; /* ... and taken (leader) */
	int64_t last_age_ns;  /* since the last sample; -1: none yet */
	bool stale;           /* the leader is silent (follower) */
};

/* A secured daemon's identity, the common name of its certificate, at
 * most this long: its id between hosts begins with it (hosts/id.h). */
#define ROS2_IDENTITY_MAX 32

#define ROS2_SEC_PEERS 8 /* refused peers named in status (the rest counted) */

struct ros2_stats {
	int domain;
	bool following, publishing;
	uint64_t samples;        /* /clock samples taken (following) */
	double rate_hz;          /* the publisher's rate, as received */
	int64_t last_age_ns;     /* since the last sample; -1: none yet */
	bool stale;              /* no sample for longer than the timeout */
	uint64_t published;      /* /clock samples written (publishing) */
	/* Ros2.Security: peers DDS Security refused (a handshake or a
	 * permission), in all and the first few by name */
	bool secured;
	uint64_t sec_refused;
	int sec_npeers;
	struct ros2_refused {
		char peer[96];   /* the certificate's subject, else the participant's GUID */
		char why[160];
		uint64_t count;
	} sec_peers[ROS2_SEC_PEERS];
};

/* What the daemon lends the module. */
struct ros2_host {
	void *ctx;
	/* Ros2.Security: an enclave directory (SROS2's layout) whose identity,
	 * governance and permissions the participant joins with (DDS
	 * Security), or NULL. */
	const char *security;
	/* A /clock sample for the clock (the follower thread calls it): 0, or
	 * -errno with a message in err. */
	int (*sample)(void *ctx, int64_t ns, char *err, size_t errlen);
	__attribute__((format(printf, 2, 3))) void (*log)(enum log_level level, const char *fmt, ...);
	/* A leader's function (the distribute follower thread calls it). */
	void (*function)(void *ctx, const struct dist_fn *f);
	/* What the clock follows (a leader, /clock) fell silent (true) or
	 * speaks again (false; /clock only: a leader's next function clears
	 * it). */
	void (*stale)(void *ctx, bool stale);
	/* A follower's acknowledgement (the leader's ack thread calls it), or
	 * a leader's echo of a lease (a->echo; the follower thread). */
	void (*ack)(void *ctx, const struct dist_ack *a);
};

struct ros2_api {
	/* A DDS participant on @domain. 0, or -errno with a one-line err. */
	int (*open)(struct ros2 **out, int domain, const struct ros2_host *host, char *err,
		    size_t errlen);
	/* Ros2.Security's identity ("" unsecured): a host's id between
	 * hosts begins with it (hosts/id.h), which the leader checks. */
	const char *(*identity)(struct ros2 *r);
	/* Follows /clock: each sample goes to host->sample (a backward one is
	 * a jump there). Stale after @stale_ns without a sample. A thread. */
	int (*follow)(struct ros2 *r, int64_t stale_ns, char *err, size_t errlen);
	/* Creates the /clock writer; publish() then writes one sample. */
	int (*publisher)(struct ros2 *r, char *err, size_t errlen);
	int (*publish)(struct ros2 *r, int64_t sim_ns);
	void (*get_stats)(struct ros2 *r, struct ros2_stats *st);
	/* Between hosts: the TimeFunction writer and the TimeAck reader of
	 * @clock, whose samples go to host->ack (leader; a thread) ... */
	int (*dist_publisher)(struct ros2 *r, const char *clock, char *err, size_t errlen);
	int (*dist_publish)(struct ros2 *r, const struct dist_fn *f, unsigned how);
	/* ... a follower's acknowledgement (its writers made by dist_follow):
	 * best effort (an announcement's, repeated with it) or @reliable (the
	 * lease, which must not lapse for a lost sample) ... */
	int (*dist_ack)(struct ros2 *r, const struct dist_ack *a, bool reliable);
	/* ... a leader's echo of a lease (a->echo; reliably), and the end of
	 * the echoes to @follower (gone: its instance let go) ... */
	int (*dist_echo)(struct ros2 *r, const struct dist_ack *a);
	void (*dist_echo_forget)(struct ros2 *r, const char *follower);
	/* ... and the follower (@self: its id, which names its echoes'
	 * partition): every sample of @clock goes to host->function,
	 * every echo to host->ack; host->stale(true) after @stale_ns without one (0: three of the
	 * leader's heartbeats). A thread. */
	int (*dist_follow)(struct ros2 *r, const char *clock, const char *self, int64_t stale_ns,
			   char *err, size_t errlen);
	void (*dist_get_stats)(struct ros2 *r, struct dist_stats *st);
	/* Lockstep between hosts: the leader's LockstepTime writer and its
	 * readers of @clock, each grant to @cb(@ctx) and each time (its own,
	 * another leader's) to @rival(@ctx), on a thread of the module; and one
	 * LockstepTime written ... */
	int (*ls_lead)(struct ros2 *r, const char *clock,
		       void (*cb)(void *ctx, const struct ls_grant *g),
		       void (*rival)(void *ctx, const struct ls_time *t), void *ctx, char *err,
		       size_t errlen);
	int (*ls_time)(struct ros2 *r, const struct ls_time *t);
	/* ... a follower's LockstepGrant writer and LockstepTime reader, each
	 * time to @cb(@ctx) on a thread of the module; and one LockstepGrant
	 * written. */
	int (*ls_follow)(struct ros2 *r, const char *clock,
			 void (*cb)(void *ctx, const struct ls_time *t), void *ctx, char *err,
			 size_t errlen);
	int (*ls_grant)(struct ros2 *r, const struct ls_grant *g);

	/* Stops following (joins the threads): before the clock thread stops. */
	void (*stop)(struct ros2 *r);
	/* Deletes the participant and everything in it. NULL is accepted. */
	void (*close)(struct ros2 *r);
};

/* The module's one exported symbol. */
#define ROS2_API_SYMBOL "shmclockd_ros2_api"
#define ROS2_MODULE "libshmclockd-ros2.so"

/* The daemon's side: loads the module ($SHMCLOCKD_ROS2_MODULE, else next
 * to the shmclockd executable, else the installed one). NULL with err. */
const struct ros2_api *ros2_load(char *err, size_t errlen);

#endif
