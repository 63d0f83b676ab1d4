/* SPDX-License-Identifier: MIT */
/*
 * The shmclock segment: a wire format, not a struct we happen to share.
 *
 * One 4096-byte page at /dev/shm/shmclock.<name>. All integers are native
 * endian (the segment never leaves the host), fixed width, naturally aligned.
 * Every byte not named below is reserved and must be zero; readers refuse a
 * segment whose header says otherwise (-EPROTO).
 *
 * ABI version 3 (version 2 had no next line: a writer could schedule a
 * change at an instant (freeze_at) but readers stopped there until its
 * commit ran; version 1 had no anchor_mono_ns, no jump_total_ns, no
 * lockstep word and no STALE flag. Their bytes and bit were reserved, and
 * readers of one version refuse every other with -EPROTO). Byte by byte:
 *
 *  off   size  field                 meaning
 *  ---- header line (written once, at creation) ----------------------------
 *  0x000  8    magic                 SHMCLOCK_MAGIC ("SHMCLK01" as a u64)
 *  0x008  4    abi_version           SHMCLOCK_ABI_VERSION
 *  0x00c  4    size                  4096, must equal the file size
 *  0x010  4    record_off            0x040
 *  0x014  4    backup_off            0x180
 *  0x018  8    created_unix_ns       CLOCK_REALTIME at creation (information)
 *  0x020 32    reserved, zero
 *  ---- record line: the reader's hot path touches only these 64 bytes -----
 *  0x040  4    seq                   sequence: odd while the writer updates
 *  0x044  4    flags                 SHMCLOCK_F_* below (INIT 0x1, PAUSED
 *                                    0x2, STEPPED 0x4, UNIX_ZERO 0x8, STALE
 *                                    0x10), and the source id in bits 8..15
 *  0x048  8    mono_base             CLOCK_MONOTONIC ns of the anchor
 *  0x050  8    sim_base              simulation ns at mono_base
 *  0x058  8    mult                  effective rate, 32.32 fixed point:
 *                                    sim = sim_base + ((mono - mono_base) * mult >> 32),
 *                                    0 while paused or stepped
 *  0x060  8    jump_epoch            number of explicit jumps so far
 *  0x068  8    last_jump_ns          signed size of the last jump
 *  0x070  8    unix_at_zero_ns       UNIX ns of simulation zero (valid when
 *                                    SHMCLOCK_F_UNIX_ZERO is set)
 *  0x078  4    writer_lock           futex word of the writer's robust lock:
 *                                    0 = no writer; bits 0..29 = the owner's
 *                                    TID; bit 30 (0x40000000) = the owner died
 *                                    (set by the kernel's robust-futex exit
 *                                    handling, so readers learn of a SIGKILLed
 *                                    writer without a system call)
 *  0x07c  4    (rest of the lock)
 *  ---- lock line (rarely written: lock / unlock only) --------------------
 *  0x078 72    the writer's process-shared robust pthread_mutex_t, starting
 *              at writer_lock; only a writer touches it, readers read only
 *              the first 4 bytes
 *  ---- info line (written under seq, read by shmclock_info) --------------
 *  0x0c0  8    nominal_mult          the rate set by the user, 32.32 fixed
 *                                    point, kept while paused or stepped
 *  0x0c8  8    jump_total_ns         signed sum of every jump so far
 *                                    (saturating): sim - jump_total_ns is the
 *                                    jump-free simulated time, which only the
 *                                    rate, pauses and steps move (what the
 *                                    preload shim shows as CLOCK_MONOTONIC;
 *                                    shmclock_now_monotonic() reads it in the
 *                                    same seq window as the record)
 *  0x0d0 48    reserved, zero
 *  ---- writer line (written when a writer takes the clock) ---------------
 *  0x100  4    writer_pid            process id of the writer (in its pid
 *                                    namespace; information only)
 *  0x104  4    writer_generation     how many writers have opened the clock
 *  0x108  8    writer_start_unix_ns  CLOCK_REALTIME when it opened the clock
 *  0x110  4    lockstep              1 while the writer runs the clock in
 *                                    lockstep: its participants' segment
 *                                    /dev/shm/shmclock-lockstep.<name>
 *                                    (lockstep_layout.h, laid out there) is in
 *                                    place; 0 otherwise
 *  0x114  4    reserved, zero
 *  0x118  8    writer_timens_mono_ns the CLOCK_MONOTONIC offset of the
 *                                    writer's time namespace
 *                                    (/proc/self/timens_offsets; 0 in the
 *                                    initial one): the function's mono_base
 *                                    is on that clock. A reader or writer
 *                                    in a namespace of another offset
 *                                    refuses the clock (-EXDEV): its
 *                                    readings would be off by the difference
 *  0x120  8    writer_file_dev       st_dev and st_ino of the file the
 *  0x128  8    writer_file_ino       writer serves, as its fstat gives
 *                                    them (0: a writer before these): a
 *                                    reader whose file is another (a copy,
 *                                    which no writer updates and no death
 *                                    marks) while the lock word says its
 *                                    writer lives refuses it (-ESTALE); a
 *                                    bind mount is the same file
 *  0x130 16    reserved, zero (readers of ABI 3 never checked 0x120..0x13f:
 *                                    these two fields are read only where
 *                                    they are known)
 *  ---- live line (written often, never read on the hot path) -------------
 *  0x140  4    change_futex          incremented after every commit; sleepers
 *                                    FUTEX_WAIT on it
 *  0x144  4    reserved, zero
 *  0x148  8    heartbeat_mono_ns     the writer's last sign of life
 *  0x150  8    commits               number of commits so far
 *  0x158  8    anchor_mono_ns        the CLOCK_MONOTONIC anchor of the update
 *                                    in progress, stored right after the
 *                                    writer's anchor reading (W2a); equal to
 *                                    the backup's mono_base when no update
 *                                    has published one. Lets readers of a
 *                                    live writer stuck mid-update return the
 *                                    last committed time, frozen at the
 *                                    anchor, instead of waiting (protocol.c, T1-T4);
 *                                    INT64_MAX (SHMCLOCK_ANCHOR_NONE) while an
 *                                    update that keeps the function is in
 *                                    progress: no cap (writer.c, W2n)
 *  0x160 32    reserved, zero
 *  ---- backup line: the last committed state, read only when the writer
 *       died mid-update (seq odd and writer_lock dead) ---------------------
 *  0x180  4    flags
 *  0x184  4    reserved, zero
 *  0x188  8    mono_base
 *  0x190  8    sim_base
 *  0x198  8    mult
 *  0x1a0  8    jump_epoch
 *  0x1a8  8    last_jump_ns
 *  0x1b0  8    unix_at_zero_ns
 *  0x1b8  8    nominal_mult
 *  ---- backup overflow line ----------------------------------------------
 *  0x1c0  8    jump_total_ns         the backup's jump_total_ns
 *  0x1c8 56    reserved, zero
 *  ---- next line: the function decided for the update in progress, read
 *       only while seq is odd (written by shmclock_writer_set_function
 *       with SHMCLOCK_FN_AHEAD on an update freeze_at opened) ---------------
 *  0x200  4    next_seq              the odd seq of the update these fields
 *                                    belong to (stored last, release): while
 *                                    seq still has that value, a reader whose
 *                                    clock reading is at or past the update's
 *                                    anchor evaluates this function itself,
 *                                    without waiting for the commit (N1, N2;
 *                                    protocol.c, T4 and S5)
 *  0x204  4    flags                 the next function's parameters, in the
 *  0x208  8    mono_base             order and widths of the backup's
 *  0x210  8    sim_base
 *  0x218  8    mult
 *  0x220  8    jump_epoch
 *  0x228  8    last_jump_ns
 *  0x230  8    unix_at_zero_ns
 *  0x238  8    nominal_mult
 *  0x240  8    jump_total_ns
 *  0x248  8    anchor_ns             the instant the decision is for: the
 *                                    update's anchor, kept here (N1) because
 *                                    anchor_mono_ns may be withdrawn by a
 *                                    writer that opens the segment (V0)
 *  0x250 ...   reserved, zero, to the end of the page
 *
 * Fields that race (everything after the header) are accessed only through
 * C11 atomics. The protocol is described in writer.c (commit) and protocol.c
 * (read); the ordering argument lives next to each fence.
 */
#ifndef SHMCLOCK_SEGMENT_H
#define SHMCLOCK_SEGMENT_H

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <shmclock/static/shmclock.h>
#include <shmclock/version.h>

#define SHMCLOCK_MAGIC UINT64_C(0x31304b4c434d4853) /* "SHMCLK01" little endian */
/* The number is public (<shmclock/version.h>): shmclockd names it. */
#define SHMCLOCK_ABI_VERSION ((uint32_t)SHMCLOCK_SEGMENT_ABI)
#define SHMCLOCK_SEG_SIZE 4096u
/* anchor_mono_ns of an update that leaves the time function as it is (the
 * stale mark, the source, the UNIX time of zero): readers that find it in
 * progress evaluate the function in force at their own clock reading,
 * uncapped (writer.c, W2n; protocol.c, T4 reads it as any anchor). */
#define SHMCLOCK_ANCHOR_NONE INT64_MAX
#define SHMCLOCK_CACHELINE 64u

/* record flags */
#define SHMCLOCK_F_INIT SHMCLOCK_FLAG_INIT /* the clock has been set: time is valid */
#define SHMCLOCK_F_PAUSED 0x2u    /* paused: mult is 0 */
#define SHMCLOCK_F_STEPPED 0x4u   /* stepped source: mult is 0 between steps */
#define SHMCLOCK_F_UNIX_ZERO 0x8u /* unix_at_zero_ns is valid */
/* The writer is alive but has lost what it follows (a leader on another
 * host, ROS 2 /clock): time is held or extrapolated from the last function.
 * Readers return -ESTALE with the value while it is set. */
#define SHMCLOCK_F_STALE SHMCLOCK_FLAG_STALE
#define SHMCLOCK_F_KNOWN 0xffu
#define SHMCLOCK_F_SOURCE_SHIFT 8
#define SHMCLOCK_F_SOURCE_MASK 0xff00u

/* writer_lock bits (SHMCLOCK_LOCK_*, in the static header) are the kernel's
 * robust futex ABI (linux/futex.h: FUTEX_TID_MASK, FUTEX_OWNER_DIED). */

/*
 * The parameters, listed once: X(type, field), in the order the writer
 * stores them (the model's W4: jump_total_ns last). Each lives twice in the
 * segment: as `field` in the record and info lines, and as `b_field` in the
 * backup lines. What copies a whole set (struct shmclock_params, the loads
 * and stores below, the system-clock stand-in in reader.c) is generated
 * from this list, so a field added here is copied everywhere; the segment's
 * layout itself stays written out in struct shmclock_seg, byte by byte.
 */
#define SHMCLOCK_PARAMS(X)        \
	X(uint32_t, flags)        \
	X(int64_t, mono_base)     \
	X(int64_t, sim_base)      \
	X(uint64_t, mult)         \
	X(uint64_t, jump_epoch)   \
	X(int64_t, last_jump_ns)  \
	X(int64_t, unix_at_zero_ns) \
	X(uint64_t, nominal_mult) \
	X(int64_t, jump_total_ns)

/* One copy of the time function and what travels with it. */
struct shmclock_params {
#define SHMCLOCK_PARAM_MEMBER(type, f) type f;
	SHMCLOCK_PARAMS(SHMCLOCK_PARAM_MEMBER)
#undef SHMCLOCK_PARAM_MEMBER
};

struct shmclock_seg {
	/* header line */
	uint64_t magic;
	uint32_t abi_version;
	uint32_t size;
	uint32_t record_off;
	uint32_t backup_off;
	int64_t created_unix_ns;
	uint8_t reserved0[32];

	/* record line */
	_Alignas(SHMCLOCK_CACHELINE) _Atomic uint32_t seq;
	_Atomic uint32_t flags;
	_Atomic int64_t mono_base;
	_Atomic int64_t sim_base;
	_Atomic uint64_t mult;
	_Atomic uint64_t jump_epoch;
	_Atomic int64_t last_jump_ns;
	_Atomic int64_t unix_at_zero_ns;
	/* writer_lock is the first word of this mutex (glibc: __lock). */
	union {
		pthread_mutex_t mutex;
		_Atomic uint32_t word;
		uint8_t pad[72];
	} writer_lock;

	/* info line */
	_Alignas(SHMCLOCK_CACHELINE) _Atomic uint64_t nominal_mult;
	_Atomic int64_t jump_total_ns;
	uint8_t reserved1[48];

	/* writer line */
	_Alignas(SHMCLOCK_CACHELINE) _Atomic int32_t writer_pid;
	_Atomic uint32_t writer_generation;
	_Atomic int64_t writer_start_unix_ns;
	_Atomic uint32_t lockstep;
	uint32_t reserved2a;
	_Atomic int64_t writer_timens_mono_ns;
	_Atomic uint64_t writer_file_dev;
	_Atomic uint64_t writer_file_ino;
	uint8_t reserved2[16];

	/* live line */
	_Alignas(SHMCLOCK_CACHELINE) _Atomic uint32_t change_futex;
	uint32_t reserved3;
	_Atomic int64_t heartbeat_mono_ns;
	_Atomic uint64_t commits;
	_Atomic int64_t anchor_mono_ns;
	uint8_t reserved4[32];

	/* backup line */
	_Alignas(SHMCLOCK_CACHELINE) _Atomic uint32_t b_flags;
	uint32_t reserved5;
	_Atomic int64_t b_mono_base;
	_Atomic int64_t b_sim_base;
	_Atomic uint64_t b_mult;
	_Atomic uint64_t b_jump_epoch;
	_Atomic int64_t b_last_jump_ns;
	_Atomic int64_t b_unix_at_zero_ns;
	_Atomic uint64_t b_nominal_mult;
	_Atomic int64_t b_jump_total_ns;
	uint8_t reserved6[56];

	/* next line */
	_Alignas(SHMCLOCK_CACHELINE) _Atomic uint32_t next_seq;
	_Atomic uint32_t n_flags;
	_Atomic int64_t n_mono_base;
	_Atomic int64_t n_sim_base;
	_Atomic uint64_t n_mult;
	_Atomic uint64_t n_jump_epoch;
	_Atomic int64_t n_last_jump_ns;
	_Atomic int64_t n_unix_at_zero_ns;
	_Atomic uint64_t n_nominal_mult;
	_Atomic int64_t n_jump_total_ns;
	_Atomic int64_t n_anchor_ns;

	uint8_t tail[SHMCLOCK_SEG_SIZE - 0x250];
};

static_assert(sizeof(_Atomic uint64_t) == 8 && sizeof(_Atomic uint32_t) == 4,
	      "atomics must have the size of the wire fields");
static_assert(sizeof(pthread_mutex_t) <= 72, "the writer lock must fit its slot");
static_assert(sizeof(struct shmclock_seg) == SHMCLOCK_SEG_SIZE, "one page");
static_assert(offsetof(struct shmclock_seg, created_unix_ns) == 0x018, "layout");
static_assert(offsetof(struct shmclock_seg, seq) == 0x040, "layout");
static_assert(offsetof(struct shmclock_seg, flags) == 0x044, "layout");
static_assert(offsetof(struct shmclock_seg, mono_base) == 0x048, "layout");
static_assert(offsetof(struct shmclock_seg, sim_base) == 0x050, "layout");
static_assert(offsetof(struct shmclock_seg, mult) == 0x058, "layout");
static_assert(offsetof(struct shmclock_seg, jump_epoch) == 0x060, "layout");
static_assert(offsetof(struct shmclock_seg, last_jump_ns) == 0x068, "layout");
static_assert(offsetof(struct shmclock_seg, unix_at_zero_ns) == 0x070, "layout");
static_assert(offsetof(struct shmclock_seg, writer_lock) == 0x078, "layout");
static_assert(offsetof(struct shmclock_seg, nominal_mult) == 0x0c0, "layout");
static_assert(offsetof(struct shmclock_seg, writer_pid) == 0x100, "layout");
static_assert(offsetof(struct shmclock_seg, writer_start_unix_ns) == 0x108, "layout");
static_assert(offsetof(struct shmclock_seg, lockstep) == 0x110, "layout");
static_assert(offsetof(struct shmclock_seg, writer_timens_mono_ns) == 0x118, "layout");
static_assert(offsetof(struct shmclock_seg, writer_file_dev) == 0x120, "layout");
static_assert(offsetof(struct shmclock_seg, writer_file_ino) == 0x128, "layout");
static_assert(offsetof(struct shmclock_seg, reserved2) == 0x130, "layout");
static_assert(offsetof(struct shmclock_seg, change_futex) == 0x140, "layout");
static_assert(offsetof(struct shmclock_seg, heartbeat_mono_ns) == 0x148, "layout");
static_assert(offsetof(struct shmclock_seg, commits) == 0x150, "layout");
static_assert(offsetof(struct shmclock_seg, anchor_mono_ns) == 0x158, "layout");
static_assert(offsetof(struct shmclock_seg, b_flags) == 0x180, "layout");
static_assert(offsetof(struct shmclock_seg, b_nominal_mult) == 0x1b8, "layout");
static_assert(offsetof(struct shmclock_seg, jump_total_ns) == 0x0c8, "layout");
static_assert(offsetof(struct shmclock_seg, b_jump_total_ns) == 0x1c0, "layout");
static_assert(offsetof(struct shmclock_seg, reserved6) == 0x1c8, "layout");
static_assert(offsetof(struct shmclock_seg, next_seq) == 0x200, "layout");
static_assert(offsetof(struct shmclock_seg, n_flags) == 0x204, "layout");
static_assert(offsetof(struct shmclock_seg, n_mono_base) == 0x208, "layout");
static_assert(offsetof(struct shmclock_seg, n_nominal_mult) == 0x238, "layout");
static_assert(offsetof(struct shmclock_seg, n_jump_total_ns) == 0x240, "layout");
static_assert(offsetof(struct shmclock_seg, n_anchor_ns) == 0x248, "layout");
static_assert(offsetof(struct shmclock_seg, tail) == 0x250, "layout");

/* Each parameter has the same width in the record, the backup and the copy. */
#define SHMCLOCK_PARAM_WIDTH(type, f)                                                     \
	static_assert(sizeof(((struct shmclock_seg *)0)->f) == sizeof(type) &&            \
			      sizeof(((struct shmclock_seg *)0)->b_##f) == sizeof(type) && \
			      sizeof(((struct shmclock_seg *)0)->n_##f) == sizeof(type),  \
		      "parameter " #f ": record, backup, next and copy agree");
SHMCLOCK_PARAMS(SHMCLOCK_PARAM_WIDTH)
#undef SHMCLOCK_PARAM_WIDTH

/*
 * Relaxed loads and stores of a whole parameter set, record or backup; the
 * callers bracket them with seq and say which fence each pairs with
 * (protocol.c, writer.c). Generated from SHMCLOCK_PARAMS.
 */
static inline void shmclock__load_record(const struct shmclock_seg *s, struct shmclock_params *p)
{
#define SHMCLOCK_LOAD(type, f) p->f = atomic_load_explicit(&s->f, memory_order_relaxed);
	SHMCLOCK_PARAMS(SHMCLOCK_LOAD)
#undef SHMCLOCK_LOAD
}

static inline void shmclock__load_backup(const struct shmclock_seg *s, struct shmclock_params *p)
{
#define SHMCLOCK_LOAD(type, f) p->f = atomic_load_explicit(&s->b_##f, memory_order_relaxed);
	SHMCLOCK_PARAMS(SHMCLOCK_LOAD)
#undef SHMCLOCK_LOAD
}

static inline void shmclock__store_record(struct shmclock_seg *s, const struct shmclock_params *p)
{
#define SHMCLOCK_STORE(type, f) atomic_store_explicit(&s->f, p->f, memory_order_relaxed);
	SHMCLOCK_PARAMS(SHMCLOCK_STORE)
#undef SHMCLOCK_STORE
}

static inline void shmclock__store_backup(struct shmclock_seg *s, const struct shmclock_params *p)
{
#define SHMCLOCK_STORE(type, f) atomic_store_explicit(&s->b_##f, p->f, memory_order_relaxed);
	SHMCLOCK_PARAMS(SHMCLOCK_STORE)
#undef SHMCLOCK_STORE
}

static inline void shmclock__load_next(const struct shmclock_seg *s, struct shmclock_params *p)
{
#define SHMCLOCK_LOAD(type, f) p->f = atomic_load_explicit(&s->n_##f, memory_order_relaxed);
	SHMCLOCK_PARAMS(SHMCLOCK_LOAD)
#undef SHMCLOCK_LOAD
}

static inline void shmclock__store_next(struct shmclock_seg *s, const struct shmclock_params *p)
{
#define SHMCLOCK_STORE(type, f) atomic_store_explicit(&s->n_##f, p->f, memory_order_relaxed);
	SHMCLOCK_PARAMS(SHMCLOCK_STORE)
#undef SHMCLOCK_STORE
}

/* The inline fast path's view of the record line must be this one. */
#define SHMCLOCK_SAME_FIELD(f, g) \
	static_assert(offsetof(struct shmclock_seg, f) - SHMCLOCK_RECORD_OFFSET == \
			      offsetof(struct shmclock_record, g), "frozen record layout")
SHMCLOCK_SAME_FIELD(seq, seq);
SHMCLOCK_SAME_FIELD(flags, flags);
SHMCLOCK_SAME_FIELD(mono_base, mono_base);
SHMCLOCK_SAME_FIELD(sim_base, sim_base);
SHMCLOCK_SAME_FIELD(mult, mult);
SHMCLOCK_SAME_FIELD(jump_epoch, jump_epoch);
SHMCLOCK_SAME_FIELD(last_jump_ns, last_jump_ns);
SHMCLOCK_SAME_FIELD(unix_at_zero_ns, unix_at_zero_ns);
SHMCLOCK_SAME_FIELD(writer_lock, writer_lock);
static_assert(sizeof(struct shmclock_record) == SHMCLOCK_CACHELINE, "one cache line");

#endif
