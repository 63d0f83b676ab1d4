/* SPDX-License-Identifier: MIT */
/*
 * <shmclock/lockstep.h> — participants that hold the clock until they are
 * done: deterministic runs, as fast as the slowest process.
 *
 * Model: time-advance grants (conservative synchronisation, as in HLA's time
 * advance request/grant and FMI co-simulation). A participant grants T when
 * it has finished everything it does before simulation time T. A clock in
 * lockstep never advances past the smallest grant of its live participants,
 * and it moves straight to that grant: participants with periods of 1, 10
 * and 33 ms meet once per distinct due time, not once per millisecond.
 *
 * Guarantee: everything a participant did before granting T happens before
 * any participant returns from shmclock_lockstep_advance() with a time >= T
 * (the grant is a release store that the clock's writer acquires before it
 * commits T, and readers acquire the commit). So a message a participant
 * sent (socket, shared memory, file) at simulated time < T can be received
 * by every participant at the start of its step T. Messages stamped T
 * itself may or may not have arrived: consume those at a later step.
 *
 * Where the state lives: participants never write the clock page. The
 * clock's writer creates a second segment, /dev/shm/shmclock-lockstep.<name>,
 * readable and writable by the writer's user and (with ControlGroup) its
 * group: a process that cannot open it gets -EACCES. Each participant has a
 * slot with a process-shared robust mutex; the kernel marks it when the
 * thread that joined exits, however it exits, so the writer learns of a
 * SIGKILLed participant without heartbeats (a participant stopped in a
 * debugger is alive and holds the clock).
 *
 * A handle belongs to the thread that joined: call leave() from it. If that
 * thread exits without leave(), the participant is dead for the clock.
 *
 * Trust: the participants' segment is writable by every process of the
 * clock's user (and ControlGroup). The writer checks what it can: a join
 * whose name is not valid UTF-8 or whose slot lock is not held by the
 * joining thread of the pid it wrote is refused; a member whose lock word
 * no longer names the thread recorded at its join, or whose grant lies
 * beyond the horizon, is dropped as dead. But such a process can still
 * hold the clock (join and never grant) or forge a member's grant: the
 * same boundary as for the clock page's writer. Lockstep.EvictAfter
 * bounds how long anyone holds the clock.
 *
 * Every call returns 0 or a negative errno (see <shmclock/shmclock.h>).
 */
#ifndef SHMCLOCK_LOCKSTEP_H
#define SHMCLOCK_LOCKSTEP_H

#include <stdint.h>
#include <sys/types.h>

#include <shmclock/time.h>
#include <shmclock/writer.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct shmclock_lockstep shmclock_lockstep_t;

#define SHMCLOCK_LOCKSTEP_SLOTS 64    /* participants per clock, at most */
#define SHMCLOCK_LOCKSTEP_WHO_MAX 64  /* characters in a participant's name */

/**
 * shmclock_lockstep_join() - join the lockstep of clock @name as @who.
 * @who: 1 to SHMCLOCK_LOCKSTEP_WHO_MAX bytes of UTF-8 (shortest forms, no surrogates) without
 *       control characters (U+0000-U+001F, U+007F-U+009F) or invisible
 *       formatting ones (Unicode's Cf, U+2028, U+2029: U+202E and its kin
 *       would spoof status); shown in status and logs.
 *
 * Returns once the clock's writer has accepted the participant (within a
 * second of real time when it runs). Until the first grant the participant
 * holds the clock at the time it joined (shmclock_lockstep_joined_at()).
 *
 * Return: 0; -ENOENT no such clock; -EOPNOTSUPP the clock is not in
 * lockstep mode; -ENXIO it is, but its participant file is not here (a
 * container given only the clock's file); -ENOSPC no free slot; -EEXIST a live participant of
 * this clock has the name @who already (names are unique per clock: one
 * process per name in status, evict and metrics); -EACCES not allowed (not a member
 * of the clock's group); -EINVAL bad name or who; -ESTALE the clock's
 * writer is gone; -ETIMEDOUT the writer did not answer; -EPROTO not a
 * lockstep segment of this ABI; -ECANCELED the writer refused the join
 * (its own checks of the slot failed: see Trust above); -ENOMEM.
 * shmclock_lockstep_strerror(NULL, r) says each in lockstep's terms.
 */
int shmclock_lockstep_join(const char *name, const char *who, shmclock_lockstep_t **out);

/**
 * shmclock_lockstep_grant() - grant @until_ns without waiting: this
 * participant has finished everything before simulation time @until_ns.
 *
 * Return: 0; -EINVAL @until_ns is before this participant's last grant (or
 * before the time it joined at), is INT64_MAX (beyond the clock's range),
 * or is beyond the horizon: the clock's time + the writer's MaxGrantAhead
 * (shmclock_lockstep_max_ahead()); shmclock_lockstep_strerror(@p, r) says
 * which. -ECANCELED the participant was evicted. -EPERM this process is a
 * fork of the one that joined: the participant is the parent's (a child
 * joins on its own; its leave() of the copy only frees the copy).
 */
int shmclock_lockstep_grant(shmclock_lockstep_t *p, int64_t until_ns);

/**
 * shmclock_lockstep_advance() - grant @until_ns, then sleep until the clock
 * reaches it (on the clock's change futex: no polling).
 * @timeout: real time to wait at most; SHMCLOCK_DURATION_INFINITE: forever.
 *
 * Return: 0 the clock is at @until_ns or later; -ETIMEDOUT; -ECANCELED this
 * participant was evicted; -ESTALE the clock's writer died (or was replaced:
 * join again); -EINVAL, -EPERM as for grant() (nothing is granted).
 */
int shmclock_lockstep_advance(shmclock_lockstep_t *p, int64_t until_ns,
			      shmclock_duration_t timeout);

/**
 * shmclock_lockstep_strerror() - what @err from a lockstep call means, in
 * lockstep's terms ("all SHMCLOCK_LOCKSTEP_SLOTS participant slots are taken", not "no space
 * left in /dev/shm"). With @p (NULL is fine), -EINVAL names the check the
 * last refused grant of @p failed. Never NULL; a static string.
 */
const char *shmclock_lockstep_strerror(const shmclock_lockstep_t *p, int err);

/* How far ahead of the clock's time a grant may go (the writer's
 * MaxGrantAhead, ns). */
int64_t shmclock_lockstep_max_ahead(const shmclock_lockstep_t *p);

/* The clock time at which the writer accepted this participant. */
int64_t shmclock_lockstep_joined_at(const shmclock_lockstep_t *p);

/* The clock this participant is in, for reading time (owned by @p). */
shmclock_t *shmclock_lockstep_clock(shmclock_lockstep_t *p);

/**
 * shmclock_lockstep_leave() - leave cleanly: the clock no longer waits for
 * this participant. Frees @p (NULL is fine). Call it from the joining
 * thread (the slot's lock is that thread's); from another, the clock stops
 * waiting at once and the slot comes free when the joining thread ends.
 */
void shmclock_lockstep_leave(shmclock_lockstep_t *p);

/*
 * The writer's side: accept participants, collect grants, find the dead.
 * The daemon (shmclockd --lockstep N) runs this; a simulator that links the
 * writer API can run it too. One thread calls a host's functions, except
 * shmclock_lockstep_host_list(), which any thread may call.
 */
typedef struct shmclock_lockstep_host shmclock_lockstep_host_t;

struct shmclock_lockstep_participant {
	unsigned slot;
	pid_t pid;
	char who[SHMCLOCK_LOCKSTEP_WHO_MAX + 1];
	int64_t grant_ns;         /* its last grant (the join time before any) */
	int64_t joined_sim_ns;    /* the clock time it was accepted at */
	int64_t holding_since_ns; /* CLOCK_MONOTONIC since when the clock has
				   * waited for it (its grant is the clock's
				   * time); 0 when it is not holding */
};

enum shmclock_lockstep_event {
	SHMCLOCK_LOCKSTEP_JOINED,
	SHMCLOCK_LOCKSTEP_LEFT,    /* left cleanly */
	SHMCLOCK_LOCKSTEP_DIED,    /* its thread or process exited without leaving */
	SHMCLOCK_LOCKSTEP_INVALID, /* a member broke the protocol (its lock word no
				    * longer names the thread that joined, or its
				    * grant is beyond the horizon): dropped as dead */
	SHMCLOCK_LOCKSTEP_REFUSED, /* a join refused: its name is not valid UTF-8,
				    * or its slot lock is not the joiner's */
};

typedef void (*shmclock_lockstep_event_cb)(enum shmclock_lockstep_event ev,
					   const struct shmclock_lockstep_participant *p,
					   void *user);

/**
 * shmclock_lockstep_host_create() - create the participants' segment of the
 * clock @w writes and mark the clock as in lockstep.
 * @mode: the segment's file mode (0600, or 0660 with @gid)
 * @gid: its group, or (gid_t)-1 for the caller's
 *
 * Return: 0; -EINVAL; -EPERM (chown); -ENOSPC; -ENOMEM.
 * The horizon starts at SHMCLOCK_LOCKSTEP_MAX_AHEAD_DEFAULT.
 */
int shmclock_lockstep_host_create(shmclock_writer_t *w, const char *name, unsigned mode,
				  gid_t gid, shmclock_lockstep_host_t **out);

/* The default horizon: a grant may be at most one day of simulated time
 * ahead of the clock (a grant of INT64_MAX - 1 would otherwise move the
 * clock to 2262, where no grant is possible any more). */
#define SHMCLOCK_LOCKSTEP_MAX_AHEAD_DEFAULT (86400LL * 1000000000LL)

/**
 * shmclock_lockstep_host_set_max_ahead() - grants beyond the clock's time
 * + @ns are refused (participants: -EINVAL; a member whose grant is beyond
 * the largest horizon ever set is dropped, SHMCLOCK_LOCKSTEP_INVALID).
 * Return: 0; -EINVAL @ns <= 0.
 */
int shmclock_lockstep_host_set_max_ahead(shmclock_lockstep_host_t *h, int64_t ns);

/**
 * shmclock_lockstep_host_kick() - end a shmclock_lockstep_host_wait() in
 * progress (any thread). Whoever changes the wait's *@also word must call
 * it too: on kernels without futex_waitv (before Linux 5.16) the host
 * sleeps on the participants' word only.
 */
void shmclock_lockstep_host_kick(shmclock_lockstep_host_t *h);

/* A token for shmclock_lockstep_host_wait(): read it before a scan. */
uint32_t shmclock_lockstep_host_token(shmclock_lockstep_host_t *h);

/**
 * shmclock_lockstep_host_scan() - accept joins (at clock time @now_sim),
 * notice leaves and deaths (each reported once through @cb, which may be
 * NULL; a dead or departed participant's slot is free again afterwards),
 * and return the smallest grant of the members in *@min_grant (INT64_MAX
 * when there are none) and their number in *@members.
 */
void shmclock_lockstep_host_scan(shmclock_lockstep_host_t *h, int64_t now_sim,
				 shmclock_lockstep_event_cb cb, void *user,
				 int64_t *min_grant, unsigned *members);

/* After committing clock time @now_sim: note who holds the clock there
 * (for holding_since_ns) and wake evicted participants. */
void shmclock_lockstep_host_committed(shmclock_lockstep_host_t *h, int64_t now_sim);

/**
 * shmclock_lockstep_host_wait() - sleep until a participant grants, joins or
 * leaves after @token was read, until *@also (a process-private futex word,
 * may be NULL) is no longer @also_val, or until @deadline_mono
 * (CLOCK_MONOTONIC, INT64_MAX: none; a deadline already past returns at
 * once). A participant's death wakes nobody: scan at least every few
 * milliseconds to detect it promptly. Without futex_waitv (Linux < 5.16),
 * *@also is only looked at every 100 ms unless its changer calls
 * shmclock_lockstep_host_kick().
 */
void shmclock_lockstep_host_wait(shmclock_lockstep_host_t *h, uint32_t token,
				 uint32_t *also, uint32_t also_val, int64_t deadline_mono);

/**
 * shmclock_lockstep_host_evict() - drop the live participant @who: its
 * grant no longer counts, and its calls return -ECANCELED.
 * Return: 0; -ENOENT no such participant.
 */
int shmclock_lockstep_host_evict(shmclock_lockstep_host_t *h, const char *who);

/* As shmclock_lockstep_host_evict(), for the member in @slot (names need
 * not be unique). Return: 0; -ENOENT no member there. */
int shmclock_lockstep_host_evict_slot(shmclock_lockstep_host_t *h, unsigned slot);

/* A participant's own figures, from the timestamps it writes in its slot
 * (never a system call of the host's). */
struct shmclock_lockstep_stats {
	uint64_t grants;        /* grants it made */
	uint64_t steps;         /* returns from advance at its grant */
	uint64_t last_to_grant; /* advances for which its grant came last */
	int64_t work_ns;        /* real time working (from a return from advance
				 * to its next grant), summed */
	int64_t wait_ns;        /* real time waiting (grant to return), summed */
	int64_t work_p50_ns, work_p99_ns; /* per step, within ~12% */
	int64_t wait_p50_ns, wait_p99_ns;
	int64_t working_for_ns; /* since it last returned from advance, when it
				 * has not granted since; 0 otherwise */
	int64_t reserved[6];
};

/**
 * shmclock_lockstep_host_stats() - the figures of the member in @slot
 * (any thread). Return: 0; -ENOENT no member there.
 */
int shmclock_lockstep_host_stats(shmclock_lockstep_host_t *h, unsigned slot,
				 struct shmclock_lockstep_stats *out);

/* Copies up to @max members into @out; returns how many there are. */
unsigned shmclock_lockstep_host_list(shmclock_lockstep_host_t *h,
				     struct shmclock_lockstep_participant *out, unsigned max);

/* Removes the segment (participants then get -ESTALE) and frees @h. */
void shmclock_lockstep_host_destroy(shmclock_lockstep_host_t *h);

/*
 * Observers: see every step from outside (shmclockctl trace) by sampling
 * the timestamps participants already write in their slots: read-only,
 * nothing is added to a participant's or the writer's path. Any process
 * that may read the participants' segment (the clock's user, and its
 * ControlGroup) can observe.
 */
typedef struct shmclock_lockstep_observer shmclock_lockstep_observer_t;

/* One member as a sample saw it. A step between two samples shows as
 * grants / steps and the working / waiting sums moving on. */
struct shmclock_lockstep_sample {
	struct shmclock_lockstep_participant p;
	uint32_t incarnation;   /* changes when the slot is taken again */
	uint64_t grants, steps; /* as in struct shmclock_lockstep_stats */
	int64_t work_ns, wait_ns;
	int64_t granted_mono;   /* CLOCK_MONOTONIC of its last grant (0: none) */
	int64_t returned_mono;  /* of its last return from advance; 0 once it
				 * granted again (it is then waiting) */
	int64_t reserved[4];
};

/**
 * shmclock_lockstep_observe() - map the participants' segment of clock
 * @name read-only.
 * Return: 0; -ENOENT no such clock; -EOPNOTSUPP the clock is not in
 * lockstep; -EACCES; -EPERM the segment is not the clock owner's; -EPROTO
 * not a lockstep segment of this ABI; -EINVAL; -ENOMEM.
 */
int shmclock_lockstep_observe(const char *name, shmclock_lockstep_observer_t **out);

/* Copies up to @max members into @out; returns how many there are. */
unsigned shmclock_lockstep_observe_sample(shmclock_lockstep_observer_t *o,
					  struct shmclock_lockstep_sample *out, unsigned max);

/* The observed clock, for reading its time (owned by @o). */
shmclock_t *shmclock_lockstep_observe_clock(shmclock_lockstep_observer_t *o);

/* Unmaps and frees @o (NULL is fine). */
void shmclock_lockstep_observe_close(shmclock_lockstep_observer_t *o);

#ifdef __cplusplus
}
#endif

#endif
