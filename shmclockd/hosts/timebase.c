/* SPDX-License-Identifier: MIT */
/*
 * The hosts mode's time bases: the host-independent time scale (TAI or
 * UTC), its offset to CLOCK_MONOTONIC, and re-anchoring the function in
 * force when a host clock is stepped.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shmclock/time.h>
/* After shmclock.h: shmclock_static_eval(), the function readers evaluate. */
#include <shmclock/static/shmclock.h>

#include "log.h"
#include "hosts/dist.h"

/*
 * A test hook: $SHMCLOCKD_TEST_CLOCK_SHIFT names a file holding a number of
 * ns added to this daemon's readings of the host clock, i.e. a step of the
 * host clock on this host alone, which a test cannot make for real without
 * stepping every process on the machine. Re-read at most every 20 ms; the
 * clock thread's alone.
 */
static int64_t test_shift(void)
{
	static const char *path;
	static bool looked;
	static int64_t val, at = INT64_MIN;
	int64_t now;

	if (!looked) {
		path = getenv("SHMCLOCKD_TEST_CLOCK_SHIFT");
		looked = true;
	}
	if (!path || !*path)
		return 0;
	now = mono_ns();
	if (at == INT64_MIN || now - at > 20000000) {
		FILE *f = fopen(path, "r");
		long long v;

		if (f && fscanf(f, "%lld", &v) == 1)
			val = v;
		if (f)
			fclose(f);
		at = now;
	}
	return val;
}

/* @tb minus CLOCK_MONOTONIC, from the tightest of a few bracketed
 * readings (both clocks are vDSO reads: tens of ns apart). */
int64_t dist_sample_offset(int tb)
{
	int64_t best_w = INT64_MAX, off = 0;

	for (int i = 0; i < 5; i++) {
		struct timespec a, t, b;
		int64_t m1, m2, tv;

		clock_gettime(CLOCK_MONOTONIC, &a);
		clock_gettime(tb_clock(tb), &t);
		clock_gettime(CLOCK_MONOTONIC, &b);
		m1 = (int64_t)a.tv_sec * 1000000000 + a.tv_nsec;
		m2 = (int64_t)b.tv_sec * 1000000000 + b.tv_nsec;
		tv = (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
		if (m2 - m1 < best_w) {
			best_w = m2 - m1;
			off = tv - (m1 + (m2 - m1) / 2);
		}
	}
	return off + test_shift();
}

/* The leader's time scale: TAI when the kernel knows its offset from UTC
 * (set by chrony's leapsectz or ptp4l), else UTC (CLOCK_REALTIME). The
 * offset is whole seconds, 0 while unset: read as CLOCK_TAI minus
 * CLOCK_REALTIME rather than with adjtimex(), a @clock system call that a
 * hardened unit (ProtectClock=, SystemCallFilter=@system-service) refuses,
 * which silently made every such leader publish UTC. */
int dist_leader_timebase(void)
{
	struct timespec tai, utc;

	if (clock_gettime(CLOCK_REALTIME, &utc) || clock_gettime(CLOCK_TAI, &tai))
		return DIST_TB_REALTIME;
	/* Read within microseconds of each other: a difference of half a
	 * second or more is the offset. */
	return (int64_t)(tai.tv_sec - utc.tv_sec) * 1000000000 + (tai.tv_nsec - utc.tv_nsec) >=
			       500000000
		       ? DIST_TB_TAI
		       : DIST_TB_REALTIME;
}


/* A host clock step (the offset from @was to @off) taken: said, counted. */
static void reanchored(struct dist *d, int64_t was, int64_t off)
{
	log_msg(LOG_WARN, "distribute: the host clock moved by %.6f s against CLOCK_MONOTONIC; "
			  "re-anchoring", (double)(off - was) / 1e9);
	pthread_mutex_lock(&d->st.mu);
	d->st.reanchors++;
	d->st.last_off = off;
	pthread_mutex_unlock(&d->st.mu);
}

/* Leader: the function in force re-expressed with the offset @off (the host
 * clock was stepped): the same function on this host, another on the wire,
 * flagged so that followers take it where it goes back (DIST_F_REANCHOR).
 * Only with nothing queued (the changes queued keep the offset they were
 * published with). */
void dist_leader_reanchor(struct dist *d, const struct clock_env *env, int64_t now, int64_t off)
{
	reanchored(d, d->off, off);
	dist_snapshot(env->w, d, now, off);
	d->fn.flags |= DIST_F_REANCHOR; /* until the next change (plan_entry, snapshot) */
	dist_publish(d, DIST_PUB_FAST | DIST_PUB_RELIABLE);
	d->ldr.next_hb = now + d->hb_ns;
}

/* Follower: the function in force re-expressed with the offset @off (the
 * host clock was stepped), never backwards: a function behind is held
 * until it catches up. Only with nothing queued (the commit would undo a
 * change decided ahead for an instant still to come: re-anchored once
 * they took effect, each committed with the offset it was translated
 * with) and no hold for a missed change (the commit would end it, and
 * readers would run on, fresh, past that change: re-anchored when the
 * gap is filled, or the gap's bound marks the clock stale), and only
 * while the segment holds the leader's function (have_cur: not a loss's
 * own, paused or running on). */
void dist_follower_reanchor(struct dist *d, const struct clock_env *env, int64_t off)
{
	int64_t e_mono = d->flw.cur.effective_ns - off;
	unsigned fl = fn_flags(d->flw.cur.flags) |
		      (atomic_load_explicit(env->stale, memory_order_relaxed) ? SHMCLOCK_FN_STALE : 0);

	reanchored(d, d->flw.cur_off, off);
	dist_lease_let_go(d, env);
	shmclock_writer_set_function(env->w, e_mono, d->flw.cur.sim_base_ns, mult_scale(d->flw.cur.mult), fl);
	d->off = d->flw.cur_off = off;
}
