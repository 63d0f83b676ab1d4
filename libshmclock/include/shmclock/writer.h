/* SPDX-License-Identifier: MIT */
/*
 * <shmclock/writer.h> — own and publish a shared simulation clock.
 *
 * One writer per clock: a robust mutex inside the segment is held for the
 * writer's lifetime, and a second writer gets -EBUSY. Only a process that
 * can map the segment writable can take it: readers cannot lock a writer out. Every change is committed atomically:
 * readers in every process see either the old or the new time function,
 * re-anchored at the instant of the change so that pause, resume and scale
 * changes never move time backwards. Only shmclock_writer_set_time() and a
 * backward shmclock_writer_advance() jump (and bump the jump epoch).
 *
 * A writer handle is not thread-safe: call it from one thread at a time. The
 * thread that opens it holds the lock readers use to tell that the writer is
 * alive; if that thread exits before the writer is closed, readers see a
 * dead writer until the next change, which re-takes the lock, unless another
 * writer took the clock over meanwhile: every call then returns -EBUSY.
 *
 * Every call returns 0 or a negative errno (see <shmclock/shmclock.h>).
 */
#ifndef SHMCLOCK_WRITER_H
#define SHMCLOCK_WRITER_H

#include <stdbool.h>
#include <stdint.h>

#include <shmclock/shmclock.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct shmclock_writer shmclock_writer_t;

/**
 * shmclock_writer_open() - create the clock, or take over an existing one.
 *
 * A new segment is created with mode 0644 (readable by everyone, writable
 * by its owner only), fully initialized before it appears under its name.
 * An existing segment whose writer died (even mid-update) is recovered: the
 * new writer continues the last committed time function, so time does not
 * jump. The new clock is uninitialized until the first set_time() or
 * advance(): readers get -ENODATA.
 *
 * An existing segment must belong to the caller's effective uid: /dev/shm
 * is writable by everyone, and a segment planted there by another user
 * (who could then change time through it) is refused, not used.
 *
 * Return: 0; -EINVAL bad name; -EBUSY another live writer holds it;
 * -EPROTO the existing file is not a shmclock segment of this ABI version
 * (it is left alone: remove it to start a new clock); -EPERM the existing
 * segment belongs to another user (left alone); -ENOSPC /dev/shm is full
 * (nothing is left behind); -EACCES; -ENOMEM.
 */
int shmclock_writer_open(const char *name, shmclock_writer_t **out);

/**
 * shmclock_writer_open_mode() - as shmclock_writer_open(), with the file
 * mode of the segment (e.g. 0640); 0 means 0644. The mode is applied to an
 * existing segment too, so each start promises its own mode.
 * Return: as shmclock_writer_open(); -EINVAL @mode fails
 * shmclock_writer_check_mode().
 */
int shmclock_writer_open_mode(const char *name, unsigned mode, shmclock_writer_t **out);

/**
 * shmclock_writer_check_mode() - 0 if @mode is a mode a clock may have: the
 * owner reads and writes it (0600 set), nobody else writes it and nothing
 * executes it (0133 clear). Else -EINVAL.
 */
int shmclock_writer_check_mode(unsigned mode);

/**
 * shmclock_writer_unlink() - remove the clock's name, while still holding
 * it: a successor that starts at the same time either finds the name (and
 * waits for our close) or creates a new segment; its file is never removed
 * by us. Readers that have the old segment mapped keep it (and see a dead
 * writer after the close); new readers get -ENOENT until a writer creates
 * the name again.
 * Return: 0; -EINVAL bad name; -ENOENT the name no longer refers to this
 * writer's segment (nothing is removed); -EBUSY this handle lost the clock.
 */
int shmclock_writer_unlink(shmclock_writer_t *w, const char *name);

/**
 * shmclock_writer_close() - release the clock. The segment stays, with its
 * time function; readers get -ESTALE until a later writer recovers it.
 * NULL is accepted.
 */
void shmclock_writer_close(shmclock_writer_t *w);

/**
 * shmclock_writer_set_time() - jump to @sim_ns (forwards or backwards).
 * The first call initializes the clock, running at the nominal scale
 * (1 unless set) or paused if pause() came first. Later calls keep the
 * clock's state (running, paused or stepped), bump the jump epoch and record
 * the signed jump size (saturated at INT64_MIN / INT64_MAX for a jump
 * larger than the int64_t range).
 * Return: 0; -EBUSY this handle lost the clock (see above), as every call
 * that changes the clock.
 */
int shmclock_writer_set_time(shmclock_writer_t *w, int64_t sim_ns);

/**
 * shmclock_writer_set_scale() - change the rate continuously.
 * Return: 0; -EINVAL @scale is not finite or not > 0; -ERANGE @scale is
 * too small or too large for the 32.32 fixed-point rate to hold within
 * 0.1 % (below about 1.2e-7, or at least 2^31).
 */
int shmclock_writer_set_scale(shmclock_writer_t *w, double scale);

/** shmclock_writer_pause() - freeze time (continuous). Return: 0. */
int shmclock_writer_pause(shmclock_writer_t *w);

/** shmclock_writer_resume() - let time run again from where it stopped. */
int shmclock_writer_resume(shmclock_writer_t *w);

/**
 * shmclock_writer_advance() - publish the next value of a stepped source.
 * The clock becomes stepped (no extrapolation between values). A value
 * before the current time is a jump (epoch bump, signed size recorded);
 * a later one is not. The first call initializes the clock.
 * Return: 0.
 */
int shmclock_writer_advance(shmclock_writer_t *w, int64_t sim_ns);

/**
 * shmclock_writer_step() - move time forward by @delta_ns without changing
 * the clock's mode (running, paused or stepped). Not a jump.
 * Return: 0; -EINVAL @delta_ns < 0; -ENODATA the clock is uninitialized.
 */
int shmclock_writer_step(shmclock_writer_t *w, int64_t delta_ns);

/** shmclock_writer_set_source() - record the time source (enum
 * shmclock_source). It does not change the mode: see set_stepped(). */
int shmclock_writer_set_source(shmclock_writer_t *w, int source);

/**
 * shmclock_writer_set_stepped() - whether time arrives in steps (advance(),
 * step(): no extrapolation in between) or runs continuously at the scale.
 * Continuous: no jump. advance() sets it; only this call clears it, e.g.
 * when a clock that was stepped is taken over by a continuous source.
 * Return: 0.
 */
int shmclock_writer_set_stepped(shmclock_writer_t *w, bool stepped);

/* shmclock_writer_set_function() flags */
#define SHMCLOCK_FN_PAUSED 0x1u  /* the function is paused (rate 0) */
#define SHMCLOCK_FN_STEPPED 0x2u /* stepped: no extrapolation (rate 0) */
#define SHMCLOCK_FN_JUMP 0x4u    /* a jump: bump the epoch, callbacks run */
#define SHMCLOCK_FN_STALE 0x8u   /* mark the clock stale (see set_stale) */
#define SHMCLOCK_FN_AHEAD 0x10u  /* decide the update freeze_at opened, ahead */

/**
 * shmclock_writer_set_function() - publish a whole time function at once:
 * sim(t) = @sim_base + (t - @mono_base) * @scale for t >= @mono_base (t in
 * CLOCK_MONOTONIC ns; @mono_base may lie in the past), held at @sim_base
 * before it, with rate 0 when paused or stepped; the nominal scale is
 * @scale either way. This is how a follower commits a function received
 * from another host, exactly and in one commit (mode, rate and the stale
 * mark together). Unless @flags has SHMCLOCK_FN_JUMP, time never goes
 * back: a function behind the clock's current value is held at that value
 * until it reaches it, then followed. With SHMCLOCK_FN_JUMP it is a jump
 * (forwards or backwards) as shmclock_writer_set_time(). The first call
 * initializes the clock.
 *
 * With SHMCLOCK_FN_AHEAD the function is decided for the update
 * shmclock_writer_freeze_at() opened, before its instant: it is anchored
 * there and published beside the record, and readers switch to it at the
 * instant by themselves, however late this process runs; the record takes
 * it at the next change or shmclock_writer_complete(). If this writer dies
 * meanwhile, the decision stands: readers still switch at the instant, and
 * the next writer completes the update there.
 * Return: 0; -EINVAL unknown flag or @scale not finite and > 0; -ERANGE
 * @scale as in set_scale(); with SHMCLOCK_FN_AHEAD, -EALREADY no update is
 * open, it is decided already, or its instant has come (call again
 * without the flag: the change then commits at the instant as usual).
 */
int shmclock_writer_set_function(shmclock_writer_t *w, int64_t mono_base, int64_t sim_base,
				 double scale, unsigned flags);

/**
 * shmclock_writer_freeze_at() - schedule the next change at CLOCK_MONOTONIC
 * @mono_ns: readers keep the current function up to that instant and stop
 * there (frozen at its value) until the next change commits; that change
 * (set_function, pause, set_time, ...) takes effect anchored at @mono_ns,
 * whenever it is called (called sooner, it waits for the instant, unless
 * the update is withdrawn first: shmclock_writer_withdraw()). Until the
 * change, reads take the slower path. This makes a change scheduled at an instant exact on every host
 * that applies it: a pause stops at the value the function had there, not
 * at the value when the commit happened to run. An instant already past is
 * the commit's own (a change applied late). A reader whose clock is past
 * the instant while the change is not yet decided (set_function with
 * SHMCLOCK_FN_AHEAD) gets the frozen value with -ESTALE: it is held.
 * At most SHMCLOCK_FREEZE_AHEAD_MAX_NS ahead: a change decided for it
 * outlives a crash, and the next writer's first change waits for it.
 * Return: 0; -ENODATA uninitialized; -EINVAL an update is already open;
 * -ERANGE @mono_ns more than SHMCLOCK_FREEZE_AHEAD_MAX_NS ahead.
 */
#define SHMCLOCK_FREEZE_AHEAD_MAX_NS (10 * 1000000000LL)
int shmclock_writer_freeze_at(shmclock_writer_t *w, int64_t mono_ns);

/**
 * shmclock_writer_withdraw() - withdraw the update
 * shmclock_writer_freeze_at() opened while nothing is decided for it: the
 * change scheduled there is dropped, and readers go on with the function
 * in force as if nothing had been scheduled (a reader held past the
 * instant runs on from there). Unlike a change, it does not wait for the
 * instant: a writer can hold its readers at an instant long before it,
 * and still withdraw, mark the clock stale or change it meanwhile (withdraw
 * first, then change, then schedule again).
 * Return: 0; -ENODATA no update is open; -EALREADY it was decided ahead
 * (set_function with SHMCLOCK_FN_AHEAD: readers may have switched at the
 * instant already, so the decision stands); -EBUSY this handle lost the
 * clock to another writer.
 */
int shmclock_writer_withdraw(shmclock_writer_t *w);

/**
 * shmclock_writer_complete() - the record takes the function decided ahead
 * (set_function with SHMCLOCK_FN_AHEAD) once its instant has come, so that
 * readers are back on the fast path. Any later change does this first by
 * itself; this call only makes it sooner.
 * Return: 0; -ENODATA nothing decided ahead; -EAGAIN the instant is still
 * to come; -EBUSY this handle lost the clock to another writer.
 */
int shmclock_writer_complete(shmclock_writer_t *w);

/**
 * shmclock_writer_set_stale() - mark the clock stale, or clear the mark:
 * the writer is alive but has lost what it follows (a leader on another
 * host, ROS 2 /clock). Readers get -ESTALE with the value and see
 * shmclock_info_t.stale. Time keeps its function (pause() to hold it).
 * Return: 0.
 */
int shmclock_writer_set_stale(shmclock_writer_t *w, bool stale);

/**
 * shmclock_writer_eval() - the published function at CLOCK_MONOTONIC
 * @mono_ns (past or future): exactly what a reader computes at that
 * instant if nothing is committed meanwhile.
 * Return: 0; -ENODATA uninitialized.
 */
int shmclock_writer_eval(shmclock_writer_t *w, int64_t mono_ns, int64_t *sim_ns);

/**
 * shmclock_writer_set_unix_at_zero() - the UNIX time of simulation zero,
 * for OSI-style stamping; NULL forgets it.
 */
int shmclock_writer_set_unix_at_zero(shmclock_writer_t *w, const int64_t *unix_ns);

/**
 * shmclock_writer_set_wake() - whether each commit wakes sleepers (default
 * true). A wake is a FUTEX_WAKE system call, about a microsecond on a VM:
 * it caps a writer near a million commits per second. A writer that commits
 * far faster than anyone sleeps may turn it off; sleepers are then woken
 * only by shmclock_writer_heartbeat() and by turning wakes back on, so they
 * wake late by up to the heartbeat period. Return: 0.
 */
int shmclock_writer_set_wake(shmclock_writer_t *w, bool wake);

/** shmclock_writer_heartbeat() - refresh the heartbeat (its own cache line);
 * with wakes off, also wakes sleepers. */
int shmclock_writer_heartbeat(shmclock_writer_t *w);

/**
 * shmclock_writer_now() - the writer's own view of the time it publishes.
 * Return: 0; -ENODATA uninitialized.
 */
int shmclock_writer_now(shmclock_writer_t *w, int64_t *sim_ns);

/* The committed time function, whole (shmclock_writer_function()). */
typedef struct shmclock_function {
	int64_t mono_base;        /* CLOCK_MONOTONIC ns of the anchor */
	int64_t sim_base;         /* simulation ns there */
	uint64_t rate;            /* effective rate, 32.32 fixed point (0 paused or stepped) */
	double scale;             /* the nominal rate: nominal_mult / 2^32, exactly */
	uint64_t nominal_mult;    /* the nominal rate, 32.32 fixed point */
	unsigned flags;           /* SHMCLOCK_FN_PAUSED, _STEPPED, _STALE */
	bool initialized;
	int source;               /* enum shmclock_source */
	uint64_t jump_epoch;
	int64_t last_jump_ns;
	int64_t jump_total_ns;
	bool has_unix_at_zero;
	int64_t unix_at_zero_ns;
	uint64_t commits;         /* changes published so far */
} shmclock_function_t;

/**
 * shmclock_writer_function() - the function the last commit published:
 * what a recorder writes down. A function decided ahead
 * (SHMCLOCK_FN_AHEAD) shows once it is committed. Passing the same
 * mono_base, sim_base, scale and flags to shmclock_writer_set_function()
 * (at an instant freeze_at opened there) publishes the same function.
 * Return: 0.
 */
int shmclock_writer_function(shmclock_writer_t *w, shmclock_function_t *fn);

/** shmclock_writer_info() - as shmclock_info(), from the writer's side. */
int shmclock_writer_info(shmclock_writer_t *w, shmclock_info_t *info);

#ifdef __cplusplus
}
#endif

#endif
