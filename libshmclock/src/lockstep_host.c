/* SPDX-License-Identifier: MIT */
/* Lockstep, the host's side (the clock's writer: scan, commit, wait, evict)
 * and observers (the segment read-only, for shmclockctl trace); the
 * protocol, steps H: lockstep_layout.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <shmclock/lockstep.h>

#include "lockstep_layout.h"
#include "writer_seg.h"

struct shmclock_lockstep_host {
	shmclock_writer_t *w;
	struct shmclock_seg *clock;
	struct ls_seg *ls;
	char path[SHMCLOCK_PATH_MAX + 32];
	dev_t dev;
	ino_t ino;
	uint64_t members;   /* bit i: slot i is a member (as of the last scan) */
	int32_t tid[LS_SLOTS]; /* the joining thread of slot i, recorded at
				* acceptance: its lock word must name it */
	int64_t max_ahead_check; /* the largest horizon ever set: a member
				  * beyond it broke the protocol */
	int last_granter;   /* the member with the latest grant at the last scan */
	/* How often slot i's grant was the last the clock waited for (any
	 * thread reads them: relaxed, statistics). */
	_Atomic uint64_t last_count[LS_SLOTS];
	int64_t now_sim;    /* the clock's time at the last scan or commit */
	int64_t held_sim;   /* ... at the last shmclock_lockstep_host_committed() */
	uint32_t yield_backoff; /* waits left without yielding (yield_briefly) */
};

SHMCLOCK_EXPORT int shmclock_lockstep_host_create(shmclock_writer_t *w, const char *name,
						  unsigned mode, gid_t gid,
						  shmclock_lockstep_host_t **out)
{
	char tmp[SHMCLOCK_PATH_MAX + 32], tmp_path[SHMCLOCK_PATH_MAX + 48];
	shmclock_lockstep_host_t *h;
	struct stat st;
	int fd, r;

	if (!w || !out || shmclock__check_name(name) || (mode & ~0660u))
		return -EINVAL;
	*out = NULL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->w = w;
	h->clock = shmclock__writer_seg(w);
	ls_path(h->path, sizeof(h->path), name, false);
	/* Made whole under a temporary name, then renamed into place: a
	 * joiner never sees half a segment, and a predecessor's is replaced. */
	snprintf(tmp, sizeof(tmp), "/shmclock-tmp.%d.lockstep.%s", (int)getpid(), name);
	snprintf(tmp_path, sizeof(tmp_path), "%s%s", SHMCLOCK_SHM_DIR, tmp);
	shm_unlink(tmp);
	fd = shm_open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		free(h);
		return -errno;
	}
	if ((gid != (gid_t)-1 && fchown(fd, (uid_t)-1, gid) < 0) || fchmod(fd, mode) < 0 ||
	    ftruncate(fd, LS_SIZE) < 0 || fstat(fd, &st) < 0) {
		r = -errno;
		goto fail;
	}
	r = -posix_fallocate(fd, 0, LS_SIZE);
	if (r)
		goto fail;
	h->ls = mmap(NULL, LS_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (h->ls == MAP_FAILED) {
		r = -errno;
		h->ls = NULL;
		goto fail;
	}
	h->ls->magic = LS_MAGIC;
	h->ls->abi_version = LS_ABI_VERSION;
	h->ls->size = LS_SIZE;
	h->ls->slots = LS_SLOTS;
	h->ls->slot_size = sizeof(struct ls_slot);
	h->ls->writer_generation =
		atomic_load_explicit(&h->clock->writer_generation, memory_order_relaxed);
	atomic_store_explicit(&h->ls->max_ahead_ns, SHMCLOCK_LOCKSTEP_MAX_AHEAD_DEFAULT,
			      memory_order_relaxed);
	h->max_ahead_check = SHMCLOCK_LOCKSTEP_MAX_AHEAD_DEFAULT;
	for (unsigned i = 0; i < LS_SLOTS; i++)
		shmclock__robust_mutex_init(&h->ls->slot[i].lock.mutex);
	if (rename(tmp_path, h->path) < 0) {
		r = -errno;
		goto fail;
	}
	close(fd);
	h->dev = st.st_dev;
	h->ino = st.st_ino;
	/* Release: a joiner that sees the mark finds the file in place. */
	atomic_store_explicit(&h->clock->lockstep, 1, memory_order_release);
	*out = h;
	return 0;
fail:
	if (h->ls)
		munmap(h->ls, LS_SIZE);
	close(fd);
	shm_unlink(tmp);
	free(h);
	return r;
}

SHMCLOCK_EXPORT uint32_t shmclock_lockstep_host_token(shmclock_lockstep_host_t *h)
{
	/* Acquire: pairs with the participants' increments (kick_host). */
	return atomic_load_explicit(&h->ls->grant_futex, memory_order_acquire);
}

static void free_slot(shmclock_lockstep_host_t *h, unsigned i)
{
	struct ls_slot *sl = &h->ls->slot[i];

	atomic_store_explicit(&sl->holding_since, 0, memory_order_relaxed);
	atomic_store_explicit(&sl->pid, 0, memory_order_relaxed);
	who_set(sl, "");
	/* Release: a joiner that sees FREE sees the slot cleared. */
	atomic_store_explicit(&sl->state, LS_FREE, memory_order_release);
	h->members &= ~(UINT64_C(1) << i);
}

/* A join the host accepts: a name of the documented set, and a slot lock
 * held by the thread the joiner says it is (tid, written before JOINING). */
static bool join_valid(const struct ls_slot *sl, uint32_t word)
{
	char who[SHMCLOCK_LOCKSTEP_WHO_MAX + 1];
	int32_t tid = atomic_load_explicit(&sl->tid, memory_order_relaxed);

	who_get(sl, who);
	return !shmclock__ls_check_who(who) && tid > 0 && (word & SHMCLOCK_LOCK_TID_MASK) == (uint32_t)tid;
}

/* Whether a live member is called what the joiner in slot @i says it is:
 * of two joins under one name, the first scanned is the member, the other
 * refused. The joiner's own test (state MEMBER, lock alive), so a refused
 * joiner finds the name taken and says so; one that left or died no longer
 * holds its name. */
static bool name_taken(const shmclock_lockstep_host_t *h, unsigned i)
{
	char who[SHMCLOCK_LOCKSTEP_WHO_MAX + 1];

	who_get(&h->ls->slot[i], who);
	return shmclock__ls_name_taken(h->ls, who, (int)i);
}

/* MEMBER -> EVICTED: its calls return -ECANCELED; the slot is free again
 * once its lock is released. -ENOENT: not a member (any more). */
static int evict_slot(shmclock_lockstep_host_t *h, unsigned i)
{
	struct ls_slot *sl = &h->ls->slot[i];
	uint32_t member = LS_MEMBER;

	if (!atomic_compare_exchange_strong_explicit(&sl->state, &member, LS_EVICTED,
						     memory_order_acq_rel, memory_order_relaxed))
		return -ENOENT; /* it left meanwhile: the next scan says so */
	h->members &= ~(UINT64_C(1) << i);
	atomic_fetch_add_explicit(&sl->ack, 1, memory_order_release);
	shmclock__futex_wake_all(&sl->ack);
	/* It may sleep on the clock: wake it without a commit (a change of
	 * the word is only a hint to sleepers). Release: pairs with the
	 * participant's acquire load of change_futex before it re-checks its
	 * state. */
	atomic_fetch_add_explicit(&h->clock->change_futex, 1, memory_order_release);
	shmclock__futex_wake_all(&h->clock->change_futex);
	return 0;
}

SHMCLOCK_EXPORT void shmclock_lockstep_host_scan(shmclock_lockstep_host_t *h, int64_t now_sim,
						 shmclock_lockstep_event_cb cb, void *user,
						 int64_t *min_grant, unsigned *members)
{
	struct shmclock_lockstep_participant info;
	int64_t min = INT64_MAX, latest = INT64_MIN;
	unsigned n = 0;

	h->now_sim = now_sim;
	h->last_granter = -1;
	for (unsigned i = 0; i < LS_SLOTS; i++) {
		struct ls_slot *sl = &h->ls->slot[i];
		/* H2: the lock word first, then the state, then the grant: a
		 * grant we count belongs to a participant whose lock was alive
		 * after (or when) it was made. */
		uint32_t word = lock_word(sl);
		bool alive = shmclock__writer_alive(word);
		uint32_t st = atomic_load_explicit(&sl->state, memory_order_acquire);
		uint32_t joining = LS_JOINING;
		uint64_t bit = UINT64_C(1) << i;
		int64_t g;

		switch (st) {
		case LS_FREE:
			continue;
		case LS_JOINING:
			if (!alive) { /* died while joining */
				atomic_compare_exchange_strong_explicit(&sl->state, &joining, LS_FREE,
									memory_order_acq_rel,
									memory_order_relaxed);
				continue;
			}
			if (!join_valid(sl, word) || name_taken(h, i)) {
				/* Refused: the joiner sees FREE and gets -ECANCELED
				 * (-EEXIST for a taken name; the CAS fails if it
				 * withdrew meanwhile). */
				if (atomic_compare_exchange_strong_explicit(&sl->state, &joining, LS_FREE,
									    memory_order_acq_rel,
									    memory_order_relaxed)) {
					atomic_fetch_add_explicit(&sl->ack, 1, memory_order_release);
					shmclock__futex_wake_all(&sl->ack);
					if (cb) {
						shmclock__ls_fill(sl, i, &info);
						cb(SHMCLOCK_LOCKSTEP_REFUSED, &info, user);
					}
				}
				continue;
			}
			h->tid[i] = atomic_load_explicit(&sl->tid, memory_order_relaxed);
			/* Before the CAS below (release): the joiner sees it. */
			atomic_store_explicit(&sl->max_ahead_ns,
					      atomic_load_explicit(&h->ls->max_ahead_ns,
								   memory_order_relaxed),
					      memory_order_relaxed);
			atomic_store_explicit(&h->last_count[i], 0, memory_order_relaxed);
			atomic_store_explicit(&sl->grant_ns, now_sim, memory_order_relaxed);
			atomic_store_explicit(&sl->joined_sim_ns, now_sim, memory_order_relaxed);
			atomic_store_explicit(&sl->holding_since, 0, memory_order_relaxed);
			atomic_fetch_add_explicit(&sl->incarnation, 1, memory_order_relaxed);
			/* H1. Release: the joiner that sees MEMBER sees the
			 * values above. It may have withdrawn meanwhile (CAS). */
			if (!atomic_compare_exchange_strong_explicit(&sl->state, &joining, LS_MEMBER,
								     memory_order_acq_rel,
								     memory_order_relaxed))
				continue;
			atomic_fetch_add_explicit(&sl->ack, 1, memory_order_release);
			shmclock__futex_wake_all(&sl->ack);
			h->members |= UINT64_C(1) << i;
			if (cb) {
				shmclock__ls_fill(sl, i, &info);
				cb(SHMCLOCK_LOCKSTEP_JOINED, &info, user);
			}
			break;
		case LS_MEMBER:
			if (!(h->members & bit)) {
				/* Never accepted by us: written by hand. */
				free_slot(h, i);
				continue;
			}
			if (!alive) {
				if (cb) {
					shmclock__ls_fill(sl, i, &info);
					cb(SHMCLOCK_LOCKSTEP_DIED, &info, user);
				}
				free_slot(h, i);
				continue;
			}
			/* Alive, but is it still the thread that joined? A lock
			 * word naming any other (TID 1 lives for ever) would
			 * hold the clock as long as that one lives. */
			if ((word & SHMCLOCK_LOCK_TID_MASK) != (uint32_t)h->tid[i] ||
			    atomic_load_explicit(&sl->grant_ns, memory_order_relaxed) >
				    shmclock__sat_add(now_sim, h->max_ahead_check)) {
				if (cb) {
					shmclock__ls_fill(sl, i, &info);
					cb(SHMCLOCK_LOCKSTEP_INVALID, &info, user);
				}
				evict_slot(h, i);
				continue;
			}
			break;
		case LS_LEFT:
			if (cb) {
				shmclock__ls_fill(sl, i, &info);
				cb(SHMCLOCK_LOCKSTEP_LEFT, &info, user);
			}
			free_slot(h, i);
			continue;
		case LS_EVICTED:
		default:
			/* An evicted participant's slot is free once its lock
			 * is released; garbage in state is no member. */
			if (!alive || st != LS_EVICTED)
				free_slot(h, i);
			continue;
		}
		h->members |= bit;
		/* Acquire: pairs with the release store of the grant (G1). */
		g = atomic_load_explicit(&sl->grant_ns, memory_order_acquire);
		if (g < min)
			min = g;
		n++;
		{
			/* Relaxed: a statistic, on the line the grant is on. */
			int64_t gm = atomic_load_explicit(&sl->granted_mono, memory_order_relaxed);

			if (gm > latest) {
				latest = gm;
				h->last_granter = (int)i;
			}
		}
	}
	*min_grant = min;
	*members = n;
}

SHMCLOCK_EXPORT void shmclock_lockstep_host_committed(shmclock_lockstep_host_t *h, int64_t now_sim)
{
	/* The clock moved: whoever holds it now has held it since now. */
	bool moved = now_sim != h->held_sim;
	int64_t mono = 0;

	if (moved && h->last_granter >= 0 && (h->members & (UINT64_C(1) << h->last_granter)))
		atomic_fetch_add_explicit(&h->last_count[h->last_granter], 1, memory_order_relaxed);
	h->now_sim = h->held_sim = now_sim;
	for (uint64_t m = h->members; m; m &= m - 1) {
		struct ls_slot *sl = &h->ls->slot[__builtin_ctzll(m)];
		bool holds = atomic_load_explicit(&sl->grant_ns, memory_order_relaxed) <= now_sim;
		int64_t since = atomic_load_explicit(&sl->holding_since, memory_order_relaxed);

		if (holds && (!since || moved)) {
			if (!mono)
				mono = shmclock__mono_ns();
			atomic_store_explicit(&sl->holding_since, mono, memory_order_relaxed);
		} else if (!holds && since) {
			atomic_store_explicit(&sl->holding_since, 0, memory_order_relaxed);
		}
	}
}

/* Without futex_waitv: how long a host sleeps at most before it looks at
 * the private word of a caller that does not call host_kick(). */
#define ALSO_SLICE_NS 100000000

SHMCLOCK_EXPORT void shmclock_lockstep_host_kick(shmclock_lockstep_host_t *h)
{
	/* seq_cst: as kick_host's increment, with the host's seq_cst store
	 * of host_waiting and its load of grant_futex (Dekker): either the
	 * host sees the increment before it sleeps, or the wake finds it. */
	atomic_fetch_add_explicit(&h->ls->grant_futex, 1, memory_order_seq_cst);
	syscall(SYS_futex, &h->ls->grant_futex, FUTEX_WAKE, 1, NULL, NULL, 0);
}

SHMCLOCK_EXPORT int shmclock_lockstep_host_set_max_ahead(shmclock_lockstep_host_t *h, int64_t ns)
{
	if (!h || ns <= 0)
		return -EINVAL;
	/* Relaxed: participants check it before granting, and either value
	 * is a valid horizon while it changes. The host's own check of grants
	 * uses the largest ever set, so a grant made under a larger horizon
	 * is never held against its participant. */
	atomic_store_explicit(&h->ls->max_ahead_ns, ns, memory_order_relaxed);
	for (unsigned i = 0; i < LS_SLOTS; i++)
		atomic_store_explicit(&h->ls->slot[i].max_ahead_ns, ns, memory_order_relaxed);
	if (ns > h->max_ahead_check)
		h->max_ahead_check = ns;
	return 0;
}

SHMCLOCK_EXPORT void shmclock_lockstep_host_wait(shmclock_lockstep_host_t *h, uint32_t token,
						 uint32_t *also, uint32_t also_val,
						 int64_t deadline_mono)
{
	struct ls_seg *ls = h->ls;

	if (h->yield_backoff)
		h->yield_backoff--;
	for (int i = 0; i < SHMCLOCK_LS_HOST_YIELDS && !h->yield_backoff; i++) {
		if (atomic_load_explicit(&ls->grant_futex, memory_order_acquire) != token ||
		    (also && __atomic_load_n(also, __ATOMIC_ACQUIRE) != also_val))
			return;
		if (!shmclock__ls_yield_briefly(&h->yield_backoff))
			break;
	}
	/* Blocked at the clock's time, not at a grant loaded anew: one that
	 * moved since the scan would hide the last grant we wait for (the
	 * spin model's mutant LS_BLOCK_AT_FRESH hangs). seq_cst: pairs with
	 * kick_host's increment and loads (Dekker). */
	atomic_store_explicit(&ls->block_at_ns, h->now_sim, memory_order_seq_cst);
	atomic_store_explicit(&ls->host_waiting, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&ls->grant_futex, memory_order_seq_cst) == token &&
	    shmclock__ls_futex_waitv2(&ls->grant_futex, token, also, also_val, deadline_mono) < 0 &&
	    errno == ENOSYS) {
		/* No futex_waitv (Linux < 5.16): the grant word only, which
		 * shmclock_lockstep_host_kick() bumps for whoever changes
		 * *also. An absolute deadline: one already past (the yields
		 * above can overrun it) returns at once, where a relative
		 * timeout computed from it went negative, which FUTEX_WAIT
		 * took as none at all. A caller that does not kick is seen
		 * within ALSO_SLICE_NS. */
		int64_t until = deadline_mono;

		if (also) {
			int64_t cap = shmclock__sat_add(shmclock__mono_ns(), ALSO_SLICE_NS);

			if (cap < until)
				until = cap;
		}
		if (!also || __atomic_load_n(also, __ATOMIC_ACQUIRE) == also_val)
			shmclock__futex_wait_until(&ls->grant_futex, token, until);
	}
	atomic_store_explicit(&ls->host_waiting, 0, memory_order_relaxed);
}

SHMCLOCK_EXPORT int shmclock_lockstep_host_evict(shmclock_lockstep_host_t *h, const char *who)
{
	char name[SHMCLOCK_LOCKSTEP_WHO_MAX + 1];

	if (!who)
		return -EINVAL;
	for (uint64_t m = h->members; m; m &= m - 1) {
		unsigned i = (unsigned)__builtin_ctzll(m);

		who_get(&h->ls->slot[i], name);
		if (!strcmp(name, who) && !evict_slot(h, i))
			return 0;
	}
	return -ENOENT;
}

SHMCLOCK_EXPORT int shmclock_lockstep_host_evict_slot(shmclock_lockstep_host_t *h, unsigned slot)
{
	if (!h || slot >= LS_SLOTS || !(h->members & (UINT64_C(1) << slot)))
		return -ENOENT;
	return evict_slot(h, slot);
}

SHMCLOCK_EXPORT unsigned shmclock_lockstep_host_list(shmclock_lockstep_host_t *h,
						     struct shmclock_lockstep_participant *out,
						     unsigned max)
{
	unsigned n = 0;

	/* Any thread: only loads of the shared slots. */
	for (unsigned i = 0; i < LS_SLOTS; i++) {
		const struct ls_slot *sl = &h->ls->slot[i];

		if (atomic_load_explicit(&sl->state, memory_order_acquire) != LS_MEMBER)
			continue;
		if (n < max)
			shmclock__ls_fill(sl, i, &out[n]);
		n++;
	}
	return n;
}

SHMCLOCK_EXPORT int shmclock_lockstep_host_stats(shmclock_lockstep_host_t *h, unsigned slot,
						 struct shmclock_lockstep_stats *out)
{
	const struct ls_stats *st;
	int64_t ret;

	if (!h || !out || slot >= LS_SLOTS ||
	    atomic_load_explicit(&h->ls->slot[slot].state, memory_order_acquire) != LS_MEMBER)
		return -ENOENT;
	/* Any thread: relaxed loads of figures the participant writes. */
	st = &h->ls->stats[slot];
	memset(out, 0, sizeof(*out));
	out->grants = atomic_load_explicit(&st->grants, memory_order_relaxed);
	out->steps = atomic_load_explicit(&st->steps, memory_order_relaxed);
	out->last_to_grant = atomic_load_explicit(&h->last_count[slot], memory_order_relaxed);
	out->work_ns = atomic_load_explicit(&st->work_ns, memory_order_relaxed);
	out->wait_ns = atomic_load_explicit(&st->wait_ns, memory_order_relaxed);
	out->work_p50_ns = shmclock__ls_hist_pct(st->work_hist, 0.50);
	out->work_p99_ns = shmclock__ls_hist_pct(st->work_hist, 0.99);
	out->wait_p50_ns = shmclock__ls_hist_pct(st->wait_hist, 0.50);
	out->wait_p99_ns = shmclock__ls_hist_pct(st->wait_hist, 0.99);
	ret = atomic_load_explicit(&st->returned_mono, memory_order_relaxed);
	if (ret) {
		out->working_for_ns = shmclock__mono_ns() - ret;
		if (out->working_for_ns < 0)
			out->working_for_ns = 0;
	}
	return 0;
}

SHMCLOCK_EXPORT void shmclock_lockstep_host_destroy(shmclock_lockstep_host_t *h)
{
	struct stat st;

	if (!h)
		return;
	atomic_store_explicit(&h->clock->lockstep, 0, memory_order_release);
	/* Only our file: a successor may have put its own in place. */
	if (stat(h->path, &st) == 0 && st.st_dev == h->dev && st.st_ino == h->ino)
		unlink(h->path);
	munmap(h->ls, LS_SIZE);
	free(h);
}
/*
 * Observers (shmclockctl trace): the participants' segment mapped
 * read-only, sampled with relaxed loads of what participants write anyway.
 * Nothing here is on a participant's or the host's path; a sample may mix
 * a participant's figures from either side of a step, which the caller
 * sees as a step between two samples.
 */
struct shmclock_lockstep_observer {
	shmclock_t *clk;
	struct ls_seg *ls;
};

SHMCLOCK_EXPORT int shmclock_lockstep_observe(const char *name,
					      shmclock_lockstep_observer_t **out)
{
	shmclock_lockstep_observer_t *o;
	int r;

	if (!out)
		return -EINVAL;
	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	r = shmclock_open(name, &o->clk);
	if (!r)
		r = shmclock__ls_map_segment(name, o->clk, false, &o->ls);
	if (r) {
		shmclock_close(o->clk);
		free(o);
		return r;
	}
	*out = o;
	return 0;
}

SHMCLOCK_EXPORT unsigned shmclock_lockstep_observe_sample(shmclock_lockstep_observer_t *o,
							  struct shmclock_lockstep_sample *out,
							  unsigned max)
{
	unsigned n = 0;

	for (unsigned i = 0; i < LS_SLOTS; i++) {
		const struct ls_slot *sl = &o->ls->slot[i];
		const struct ls_stats *st = &o->ls->stats[i];
		struct shmclock_lockstep_sample *x;

		/* Acquire: pairs with the host's release of MEMBER; the
		 * figures are relaxed (statistics, nothing ordered by them). */
		if (atomic_load_explicit(&sl->state, memory_order_acquire) != LS_MEMBER)
			continue;
		if (n >= max) {
			n++;
			continue;
		}
		x = &out[n++];
		memset(x, 0, sizeof(*x));
		shmclock__ls_fill(sl, i, &x->p);
		x->incarnation = atomic_load_explicit(&sl->incarnation, memory_order_relaxed);
		x->grants = atomic_load_explicit(&st->grants, memory_order_relaxed);
		x->steps = atomic_load_explicit(&st->steps, memory_order_relaxed);
		x->work_ns = atomic_load_explicit(&st->work_ns, memory_order_relaxed);
		x->wait_ns = atomic_load_explicit(&st->wait_ns, memory_order_relaxed);
		x->granted_mono = atomic_load_explicit(&sl->granted_mono, memory_order_relaxed);
		x->returned_mono = atomic_load_explicit(&st->returned_mono, memory_order_relaxed);
	}
	return n;
}

SHMCLOCK_EXPORT shmclock_t *shmclock_lockstep_observe_clock(shmclock_lockstep_observer_t *o)
{
	return o ? o->clk : NULL;
}

SHMCLOCK_EXPORT void shmclock_lockstep_observe_close(shmclock_lockstep_observer_t *o)
{
	if (!o)
		return;
	munmap(o->ls, LS_SIZE);
	shmclock_close(o->clk);
	free(o);
}
