/* SPDX-License-Identifier: MIT */
/*
 * Lockstep between hosts (issue 53, doc/lockstep.md "Between hosts"; the
 * protocol is tests/hosts/grants.pml): the part of the lockstep mode
 * (mode_lockstep.c) that speaks to the other hosts, over the DDS link
 * (ros2.h: LockstepGrant, LockstepTime).
 *
 *   a follower host (TimeSource leader with Lockstep) promises its leader
 *   the smallest grant of its participants, one LockstepGrant per change
 *   of that promise and one a heartbeat; it shows the largest time it
 *   heard, never past its own participants' grants; a participant joins
 *   there at the largest of its clock, the time heard and the promise.
 *
 *   the leader (Lockstep with Distribute.Publish) counts each host it
 *   heard as its participants, at its promise: the clock never passes the
 *   smallest promise, and each time it moves is one LockstepTime to every
 *   host, naming the hosts it counts. A host silent for its lease is lost
 *   (its participants count as dead: OnDeath); named no more, it tells its
 *   participants they were evicted and comes back as a new host.
 *
 * The DDS thread hands what it takes to the clock thread under mu and
 * wakes it (shmclock_lockstep_host_kick); everything else runs on the
 * clock thread, except status (the main thread, under mu).
 */
#ifndef SHMCLOCKD_LOCKSTEP_HOSTS_H
#define SHMCLOCKD_LOCKSTEP_HOSTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <shmclock/lockstep.h>

#include "config.h"
#include "ros2.h"

struct cJSON;
struct ls_hosts;

/* No promise: a host with no participant holds nothing. */
#define LS_NO_GRANT INT64_MAX

/* A leader (cfg->dist_publish) or a follower (TimeSource leader) of the
 * lockstep clock of @host over @r: the DDS endpoints made, their thread
 * started. 0, or -errno with a one-line message in err. */
int ls_hosts_open(const struct shmclockd_config *cfg, struct ros2 *r, const struct ros2_api *api,
		  shmclock_lockstep_host_t *host, struct ls_hosts **out, char *err, size_t errlen);
/* A follower's link before it knows whether its leader is in lockstep
 * (mode_follow.c): the same endpoints, no lockstep host yet; a time heard
 * calls @wake(@ctx) (on the DDS thread). ls_hosts_heard_leader says when
 * one came; ls_hosts_attach gives it the host it then serves. */
int ls_hosts_probe(const struct shmclockd_config *cfg, struct ros2 *r, const struct ros2_api *api,
		   void (*wake)(void *ctx), void *ctx, struct ls_hosts **out, char *err,
		   size_t errlen);
/* True once a lockstep leader's time was heard; @leader: its id. */
bool ls_hosts_heard_leader(struct ls_hosts *h, char *leader, size_t len);
/* From now on a time heard kicks @host (clock thread, before the mode
 * that serves @host first runs). */
void ls_hosts_attach(struct ls_hosts *h, shmclock_lockstep_host_t *host);
/* After the DDS thread stopped (ros2_api.stop). */
void ls_hosts_close(struct ls_hosts *h);
bool ls_hosts_leader(const struct ls_hosts *h);

/* What the leader learns from its hosts at a pass (clock thread). */
enum ls_hosts_event {
	LS_HOST_JOINED,  /* a host heard for the first time */
	LS_HOST_LOST,    /* silent for its lease: its participants count as dead */
	LS_HOST_DEATH,   /* a host found one of its participants dead */
	LS_HOST_RENEWED, /* a host evicted its participants and speaks under a
			  * new id (@what): not a death */
};
typedef void (*ls_hosts_event_cb)(enum ls_hosts_event ev, const char *host, const char *what,
				  void *user);

/* Leader: true while it listens before it decides anything: half a second,
 * or a whole lease once a host names another leader (a takeover: every
 * host of its predecessor still alive speaks within it, so it decides only
 * once it heard them all, as grants.pml's successor). Once, when it stops:
 * *from the largest clock of the hosts heard (INT64_MIN: none), where the
 * predecessor's run was at least; *resume whether that run goes on (hosts
 * with participants). */
bool ls_hosts_listen(struct ls_hosts *h, int64_t now, int64_t *from, bool *resume);
int64_t ls_hosts_listen_until(struct ls_hosts *h);
/* Leader: the smallest promise of the hosts it counts (LS_NO_GRANT: none)
 * and their participants, after losing those silent for their lease. */
void ls_hosts_promises(struct ls_hosts *h, int64_t now, ls_hosts_event_cb cb, void *user,
		       int64_t *min, unsigned *members);
/* Leader: the clock is at @sim, and the run has started (@running): said
 * to every host when either changed, when the hosts counted changed, and
 * every heartbeat. The next heartbeat's CLOCK_MONOTONIC. */
int64_t ls_hosts_decided(struct ls_hosts *h, int64_t sim, int64_t now, bool running);
/* Leader: the remote participants holding the clock at @sim, for a stall
 * report ("'name' (pid N) on HOST, ..."); 0 when none. */
size_t ls_hosts_holding(struct ls_hosts *h, int64_t sim, char *buf, size_t len);

/* What a follower knows of its leader (clock thread). */
struct ls_follow {
	int64_t heard;  /* the largest time heard (INT64_MIN: none yet) */
	int64_t join_at; /* where a participant joins: the promise, or heard */
	bool evicted;   /* the leader stopped counting this host: tell the
			 * participants (once; the host is a new one after) */
	int64_t passed_at; /* ... because its time passed this host's promise
			    * (passed_promise): else INT64_MIN (named no more) */
	int64_t passed_promise;
	bool silent;    /* no time from the leader for three heartbeats */
	bool jump;      /* a new leader, behind this clock: a jump back */
};
void ls_hosts_follow(struct ls_hosts *h, int64_t now, struct ls_follow *f);
/* Follower: its promise, after a pass: @min and @n its participants'
 * smallest grant and number (all @needed joined once: else it holds at
 * @shown), @deaths found so far and the last; written when it changed, and
 * every heartbeat. The next heartbeat's CLOCK_MONOTONIC. */
int64_t ls_hosts_promise(struct ls_hosts *h, int64_t now, int64_t shown, int64_t min, unsigned n,
			 unsigned needed, uint64_t deaths, const char *last_death);

/* Status: the "hosts" of "lockstep" (leader) or "leader", "host",
 * "heard_ns", "promised_ns" (follower); and each remote participant
 * added to @members (leader). */
void ls_hosts_status(struct ls_hosts *h, struct cJSON *lockstep, struct cJSON *members,
		     int64_t sim);

#endif
