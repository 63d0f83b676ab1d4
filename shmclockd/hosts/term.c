/* SPDX-License-Identifier: MIT */
/*
 * Leaders' terms: whether a leader is alive, which of two ranks above,
 * and two live leaders of one clock said (a conflict).
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

/* Is @f from a leader alive now (sent within three of its heartbeats),
 * not a dead one's last word from the topic's history? */
bool dist_fn_live(const struct dist_fn *f)
{
	struct timespec ts;
	int64_t now, age;

	/* A heartbeat out of range (refused anyway) says nothing. */
	if (f->heartbeat_ns < DIST_HB_MIN_NS || f->heartbeat_ns > DIST_HB_MAX_NS)
		return false;
	clock_gettime(tb_clock(f->timebase), &ts);
	now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	return !__builtin_sub_overflow(now, f->sent_ns, &age) &&
	       age <= 3 * f->heartbeat_ns + 100000000;
}

/* (term, identity): the leader of the two that leads; > 0 when a ranks
 * above b. */
int dist_rank_cmp(uint64_t ta, const char *ia, uint64_t tb, const char *ib)
{
	if (ta != tb)
		return ta > tb ? 1 : -1;
	return strcmp(ia, ib);
}

/* Two live leaders of the clock: status shows it for a while, the log
 * once per other leader. */
void dist_note_conflict(struct dist *d, const struct dist_fn *f, uint64_t own_term,
			const char *own_id, const char *what)
{
	pthread_mutex_lock(&d->st.mu);
	d->st.conflicts++;
	d->st.conflict_term = f->term;
	snprintf(d->st.conflict_with, sizeof(d->st.conflict_with), "%s", f->leader);
	d->st.conflict_mono = mono_ns();
	pthread_mutex_unlock(&d->st.mu);
	if (strcmp(d->conflict_logged, f->leader)) {
		snprintf(d->conflict_logged, sizeof(d->conflict_logged), "%s", f->leader);
		dist_event(d, "conflict", f->leader, f->term, what);
		log_msg(LOG_WARN, "distribute: conflict: two live leaders of clock '%s': %s (term %llu) "
				  "and %s (term %llu); %s. Run one leader per clock",
			d->clock, f->leader, (unsigned long long)f->term, own_id,
			(unsigned long long)own_term, what);
	}
}
