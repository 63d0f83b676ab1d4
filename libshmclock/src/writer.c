/* SPDX-License-Identifier: MIT */
/*
 * The writer side: create or recover the segment, commit changes.
 *
 * Exclusivity: a process-shared robust mutex in the segment, nothing else.
 * Only a process that can map the page writable can take it, so a reader
 * (O_RDONLY, PROT_READ) can never lock a writer out; an flock(), which any
 * read-only opener can take, once let one do exactly that. The mutex's futex
 * word is also what readers look at: the kernel sets its OWNER_DIED bit when
 * the owner exits however it exits, so readers learn that the writer is
 * gone without a system call, and the next writer takes the mutex over.
 *
 * Commit protocol (see protocol.c for the read side and the argument why time
 * cannot go backwards across readers). The steps W1..W6 and V1..V5 are the
 * steps of the Promela model next to this file (seqlock.pml), which spin
 * checks in CI (tests/lib/spin_check.sh) with the writer killed at any step:
 *
 *   commit_begin:  fence (release)          backup complete before seq odd  W1
 *                  seq = odd (relaxed)                                      W1
 *                  fence (seq_cst)          seq odd before the clock reading W2
 *                  mono = clock             the anchor                      W2
 *                  (freeze_at: mono = the scheduled instant when later:
 *                  readers run on to it and stop there)                  W2b
 *                  anchor_mono_ns = mono    published for stuck readers    W2a
 *                  (the function kept: SHMCLOCK_ANCHOR_NONE instead, no cap,
 *                  and the record not re-based)                          W2n
 *                  cur = eval(old, mono)    the time every reader agrees on W3
 *   (caller)       new params anchored at (mono, cur)
 *   commit_end:    record stores (relaxed)                                  W4
 *                  seq = even (release)                                     W5
 *                  fence (release)          seq even before backup stores   W6
 *                  backup stores (relaxed)                                  W6
 *                  change_futex++ ; FUTEX_WAKE
 *                  (W2n: anchor_mono_ns = mono_base, withdrawn)           X2
 *
 * shmclock_writer_freeze_at() opens an update early with an anchor in the
 * future (W2b): readers, finding seq odd and the anchor published, compute
 * the last committed function up to the anchor and no further (protocol.c,
 * T4). The next change completes the update at that instant, anchored
 * there, so a change scheduled at an instant takes effect exactly there
 * whenever the commit itself runs: hosts that apply the same change agree
 * to the nanosecond, pause included. It also marks the update undecided
 * (next_seq = seq + 1, released after W2a): a reader past the instant
 * before the change is given is held there and says so (-ESTALE). Every
 * commit leaves next_seq at the new even seq (after W5), so next_seq is
 * odd only while its own update is open and decided, and no value left
 * from an old update can match a seq that wrapped round to it.
 *
 * Decided ahead (set_function with SHMCLOCK_FN_AHEAD on an update
 * freeze_at opened, before its instant): the new function goes to the
 * next line instead of the record, and readers switch to it at the
 * instant by themselves, however late this process runs:
 *
 *   stage:         next line stores (relaxed)                              N1
 *                  next_seq = seq (release)                                N2
 *   complete:      (at or after the anchor) commit_end, W4..W6
 *
 * Withdrawn (shmclock_writer_withdraw, an update freeze_at opened and
 * nothing decided): the update ends on the record as it was, without
 * waiting for its instant, and its anchor is withdrawn:
 *
 *   withdraw:      commit_end, the record unchanged (W4..W6)           X1
 *                  anchor_mono_ns = record's mono_base (relaxed)         X2
 *
 * A writer killed between N2 and W5 leaves the decision in place: readers
 * of the dead writer honour it (protocol.c, S5), and the next writer
 * completes the update at its instant (n_anchor_ns) before its first change
 * (recover, V6).
 *
 * A writer killed at any instruction leaves either seq even with a good
 * record, or seq odd with a good backup (written completely before seq went
 * odd). The next writer restores the record from the backup in the second
 * case, so it continues the last committed time function.
 *
 * One file past 800 lines, on purpose: every step that writes the segment
 * and its fences, which pair with protocol.c's, in one place for review
 * against seqlock.pml.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <shmclock/writer.h>

#include "common.h"
#include "protocol.h"
#include "writer_seg.h"

struct shmclock_writer {
	struct shmclock_seg *seg;
	int fd;
	uint32_t seq;                /* our copy of seg->seq: we are the only writer */
	struct shmclock_params p;    /* the committed state */
	int64_t anchor_mono;         /* set by commit_begin */
	bool open;                   /* freeze_at opened an update: the next change ends it */
	bool staged;                 /* ... and its function is in the next line (N1, N2) */
	struct shmclock_params before; /* while staged: the function until the anchor */
	int64_t anchor_sim;
	bool no_wake;                /* shmclock_writer_set_wake(w, false) */
	bool lost;                   /* another writer took the clock over */
};

#define SCALE_ONE (UINT64_C(1) << 32)

static void init_segment(struct shmclock_seg *s)
{
	/* The file is fresh from ftruncate: all zero, so reserved bytes are. */
	s->magic = SHMCLOCK_MAGIC;
	s->abi_version = SHMCLOCK_ABI_VERSION;
	s->size = SHMCLOCK_SEG_SIZE;
	s->record_off = offsetof(struct shmclock_seg, seq);
	s->backup_off = offsetof(struct shmclock_seg, b_flags);
	s->created_unix_ns = shmclock__realtime_ns();
	atomic_store_explicit(&s->nominal_mult, SCALE_ONE, memory_order_relaxed);
	atomic_store_explicit(&s->b_nominal_mult, SCALE_ONE, memory_order_relaxed);
	/* The function will be on this namespace's CLOCK_MONOTONIC; set
	 * before the segment is linked under its name, so no reader sees it
	 * without (map_segment in reader.c compares it with its own). */
	atomic_store_explicit(&s->writer_timens_mono_ns, shmclock__timens_mono_offset(),
			      memory_order_relaxed);
	shmclock__robust_mutex_init(&s->writer_lock.mutex);
}

/* The file this writer serves, @fd's, named in the writer line: a reader
 * of another file (a copy) then knows it is not this writer's (map_segment
 * in reader.c). Before the segment is linked under its name (create), or
 * before its lock is taken (take-over: the same file, the same values). */
static void mark_file(struct shmclock_seg *s, int fd)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return;
	atomic_store_explicit(&s->writer_file_dev, (uint64_t)st.st_dev, memory_order_relaxed);
	atomic_store_explicit(&s->writer_file_ino, (uint64_t)st.st_ino, memory_order_relaxed);
}

/* Take the robust mutex for the calling thread: 0, or -EBUSY while a live
 * thread holds it. A dead holder's mutex is taken over (EOWNERDEAD). */
static int take_mutex(struct shmclock_seg *s)
{
	int r = pthread_mutex_trylock(&s->writer_lock.mutex);

	if (r == EOWNERDEAD)
		r = pthread_mutex_consistent(&s->writer_lock.mutex);
	if (r == ENOTRECOVERABLE) {
		/* Released while inconsistent (our code never does that: it marks
		 * the mutex consistent at once); nobody can hold it, re-create it. */
		shmclock__robust_mutex_init(&s->writer_lock.mutex);
		r = pthread_mutex_trylock(&s->writer_lock.mutex);
	}
	return -r;
}

/*
 * Bring a segment left by an earlier writer into a committed state. We hold
 * the flock and the mutex, so nobody else writes. seq odd: the writer died
 * mid-update and the backup is the last committed state; seq even: the
 * record is, and the backup may be half-written.
 */
static void recover(struct shmclock_writer *w)
{
	struct shmclock_seg *s = w->seg;
	/* Model step V1. Pairs with the release fences of the dead writer
	 * (W1, W5): what it stored before seq reached this value is visible. */
	uint32_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);

	/* Acquire pairs with the dead writer's release store N2. */
	if ((seq & 1) && atomic_load_explicit(&s->next_seq, memory_order_acquire) == seq) {
		/* V6: it died after deciding the update (N2): the update stays
		 * open with its function staged, readers switch to it at its
		 * instant (the next line's, n_anchor_ns), and our first change
		 * completes it there (settle). The backup stays the last
		 * committed state. */
		shmclock__load_next(s, &w->p);
		shmclock__load_backup(s, &w->before);
		w->anchor_mono = atomic_load_explicit(&s->n_anchor_ns, memory_order_relaxed);
		w->open = w->staged = true;
		w->seq = seq;
		return;
	}
	if (seq & 1) {
		/* V2: the backup is the last committed state. */
		shmclock__load_backup(s, &w->p);
		shmclock__store_record(s, &w->p);
		seq++;
		/* V3. Pairs with the readers' acquire load of seq (as in commit_end). */
		atomic_store_explicit(&s->seq, seq, memory_order_release);
	} else {
		/* V4: the record is. */
		shmclock__load_record(s, &w->p);
	}
	/* V5. Pairs with the readers' acquire fence after loading the backup
	 * (protocol.c, wait_writer, S4). */
	atomic_thread_fence(memory_order_release);
	shmclock__store_backup(s, &w->p);
	w->seq = seq;
}

/* Create a fully initialized segment under a temporary name, lock it, then
 * link it into place: readers never see a half-made segment. -EEXIST if
 * somebody else created the name first. */
static int create_segment(const char *name, unsigned mode, struct shmclock_writer *w)
{
	char tmp[SHMCLOCK_PATH_MAX], tmp_path[SHMCLOCK_PATH_MAX + 16];
	char final_path[SHMCLOCK_PATH_MAX + 16];
	struct shmclock_seg *s;
	int fd, r;

	snprintf(tmp, sizeof(tmp), "/shmclock-tmp.%d.%s", (int)getpid(), name);
	snprintf(tmp_path, sizeof(tmp_path), "%s%s", SHMCLOCK_SHM_DIR, tmp);
	snprintf(final_path, sizeof(final_path), "%s%s%s", SHMCLOCK_SHM_DIR,
		 SHMCLOCK_SHM_PREFIX, name);
	shm_unlink(tmp); /* a leftover of ours from an earlier crash */
	fd = shm_open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	/* fchmod, not the open mode: the umask must not narrow what we promise. */
	if (fchmod(fd, mode) < 0 || ftruncate(fd, SHMCLOCK_SEG_SIZE) < 0) {
		r = -errno;
		goto fail;
	}
	/* A tmpfs page is allocated on first touch, and a full /dev/shm answers
	 * that touch with SIGBUS: allocate it now, where ENOSPC is an error. */
	r = posix_fallocate(fd, 0, SHMCLOCK_SEG_SIZE);
	if (r) {
		r = -r;
		goto fail;
	}
	s = mmap(NULL, SHMCLOCK_SEG_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (s == MAP_FAILED) {
		r = -errno;
		goto fail;
	}
	init_segment(s);
	mark_file(s, fd);
	r = take_mutex(s);
	if (r == 0 && link(tmp_path, final_path) < 0)
		r = -errno;
	if (r) {
		munmap(s, SHMCLOCK_SEG_SIZE);
		goto fail;
	}
	shm_unlink(tmp);
	w->seg = s;
	w->fd = fd;
	return 0;
fail:
	close(fd);
	shm_unlink(tmp);
	return r;
}

/* Whether the name still refers to the file open as @fd: 1, 0 (removed or
 * replaced), or -errno. */
static int still_named(const char *name, int fd)
{
	char path[SHMCLOCK_PATH_MAX + 16];
	struct stat a, b;

	snprintf(path, sizeof(path), "%s%s%s", SHMCLOCK_SHM_DIR, SHMCLOCK_SHM_PREFIX, name);
	if (fstat(fd, &a) < 0)
		return -errno;
	if (lstat(path, &b) < 0)
		return errno == ENOENT ? 0 : -errno;
	return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* -EAGAIN: the file was unlinked while we took it over; open the name again. */
static int attach_segment(const char *name, int fd, unsigned mode, struct shmclock_writer *w)
{
	struct shmclock_seg *s;
	struct stat st;
	int r;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || st.st_size != SHMCLOCK_SEG_SIZE)
		return -EPROTO;
	/* Planted by another user in the world-writable /dev/shm: that user
	 * could write it (or chmod it so) and change time under us. */
	if (st.st_uid != geteuid())
		return -EPERM;
	s = mmap(NULL, SHMCLOCK_SEG_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (s == MAP_FAILED)
		return -errno;
	r = shmclock__check_header(s, st.st_size);
	/* A clock made in a time namespace of another offset: its function's
	 * mono_base is on that namespace's CLOCK_MONOTONIC, which this one
	 * cannot continue (it would jump by the difference), nor its readers
	 * follow: refused, as a reader here refuses it. */
	if (!r && atomic_load_explicit(&s->writer_timens_mono_ns, memory_order_relaxed) !=
			  shmclock__timens_mono_offset())
		r = -EXDEV;
	if (r) {
		munmap(s, SHMCLOCK_SEG_SIZE);
		return r;
	}
	/*
	 * V0: withdraw the anchor a dead writer may have published for the
	 * update it died in. Once we hold the lock, readers see a live writer
	 * with that update's odd seq (until recover() below) and would take
	 * the stuck-writer path (protocol.c, T4), capping time at the dead
	 * writer's anchor, below what they returned while it was dead. Done
	 * before the lock, since that is when readers start to see us alive.
	 * Safe whoever holds the clock: an anchor no later than the backup's
	 * mono_base (which never decreases) only makes readers wait.
	 */
	/* An update decided ahead keeps its own instant in the next line
	 * (n_anchor_ns): readers and the recovery (V6) take it from there. */
	atomic_store_explicit(&s->anchor_mono_ns,
			      atomic_load_explicit(&s->b_mono_base, memory_order_relaxed),
			      memory_order_relaxed);
	/* Pairs with the readers' acquire fence after their lock-word load
	 * (protocol.c, T0): who sees us alive sees the withdrawn anchor. */
	atomic_thread_fence(memory_order_release);
	/* Before we are seen alive: a reader that sees our lock sees the file
	 * named ours (its own values: the same file whoever holds it). */
	mark_file(s, fd);
	r = take_mutex(s);
	if (r) {
		munmap(s, SHMCLOCK_SEG_SIZE);
		return r;
	}
	/* We hold the clock now. The previous writer may have removed the
	 * name between our open and our take-over (--remove-on-exit): then
	 * this file is an orphan nobody will read, and the name is free. */
	r = still_named(name, fd);
	/* The mode promised is the mode of this start, not of the first one:
	 * a restart with the default mode narrows a wider one left before. */
	if (r == 1 && (st.st_mode & 07777) != mode && fchmod(fd, mode) < 0)
		r = -errno;
	if (r != 1) {
		pthread_mutex_unlock(&s->writer_lock.mutex);
		munmap(s, SHMCLOCK_SEG_SIZE);
		return r < 0 ? r : -EAGAIN;
	}
	w->seg = s;
	w->fd = fd;
	return 0;
}

SHMCLOCK_EXPORT int shmclock_writer_check_mode(unsigned mode)
{
	/* The owner reads and writes (a restart maps it read-write); nobody
	 * else writes, or they could change time; nothing is executable. */
	if ((mode & ~0777u) || (mode & 0600) != 0600 || (mode & 0133))
		return -EINVAL;
	return 0;
}

SHMCLOCK_EXPORT int shmclock_writer_open_mode(const char *name, unsigned mode,
					      shmclock_writer_t **out)
{
	char shm[SHMCLOCK_PATH_MAX];
	struct shmclock_writer *w;
	struct shmclock_seg *s;
	int r, tries;

	if (!out)
		return -EINVAL;
	*out = NULL;
	r = shmclock__check_name(name);
	if (r)
		return r;
	if (mode == 0)
		mode = 0644;
	r = shmclock_writer_check_mode(mode);
	if (r)
		return r;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	shmclock__shm_name(shm, name);
	/* Open or create, retrying the race with a concurrent creator. */
	for (tries = 0; tries < 8; tries++) {
		/* O_NONBLOCK: a planted FIFO must not hang the open (refused by
		 * attach_segment, not a regular file). */
		int fd = shm_open(shm, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0);

		if (fd >= 0) {
			r = attach_segment(name, fd, mode, w);
			if (r)
				close(fd);
			if (r == -EAGAIN)
				continue;
			break;
		}
		if (errno != ENOENT) {
			r = errno == ELOOP ? -EPROTO : -errno;
			break;
		}
		r = create_segment(name, mode, w);
		if (r != -EEXIST)
			break;
	}
	if (r == -EAGAIN)
		r = -EBUSY; /* the name kept changing under us */
	if (r) {
		free(w);
		return r;
	}
	s = w->seg;
	recover(w);
	atomic_store_explicit(&s->writer_pid, (int32_t)getpid(), memory_order_relaxed);
	atomic_store_explicit(&s->writer_start_unix_ns, shmclock__realtime_ns(),
			      memory_order_relaxed);
	atomic_fetch_add_explicit(&s->writer_generation, 1, memory_order_relaxed);
	/* A predecessor's lockstep ended with it: its participants' segment
	 * names the old generation, and a new one is made by whoever runs
	 * lockstep now (shmclock_lockstep_host_create). */
	atomic_store_explicit(&s->lockstep, 0, memory_order_relaxed);
	atomic_store_explicit(&s->heartbeat_mono_ns, shmclock__mono_ns(), memory_order_relaxed);
	*out = w;
	return 0;
}

SHMCLOCK_EXPORT int shmclock_writer_open(const char *name, shmclock_writer_t **out)
{
	return shmclock_writer_open_mode(name, 0644, out);
}

SHMCLOCK_EXPORT void shmclock_writer_close(shmclock_writer_t *w)
{
	if (!w)
		return;
	if (!w->lost)
		pthread_mutex_unlock(&w->seg->writer_lock.mutex);
	munmap(w->seg, SHMCLOCK_SEG_SIZE);
	close(w->fd);
	free(w);
}

SHMCLOCK_EXPORT int shmclock_writer_unlink(shmclock_writer_t *w, const char *name)
{
	char shm[SHMCLOCK_PATH_MAX];
	int r = shmclock__check_name(name);

	if (r)
		return r;
	if (w->lost)
		return -EBUSY;
	/* Holding the clock: no successor can have replaced the file yet (it
	 * would need our lock), so what the name refers to now stays ours
	 * until the unlink. */
	r = still_named(name, w->fd);
	if (r <= 0)
		return r ? r : -ENOENT;
	shmclock__shm_name(shm, name);
	return shm_unlink(shm) < 0 ? -errno : 0;
}

static void commit_end(struct shmclock_writer *w);

/* Returns at CLOCK_MONOTONIC @at or later: sleeps to within 50 us of it,
 * then spins (a commit at its instant, not a scheduler tick after it). */
static void wait_instant(int64_t at)
{
	int64_t now;

	while ((now = shmclock__mono_ns()) < at) {
		if (at - now > 50000) {
			int64_t t = at - 50000;
			struct timespec ts = { (time_t)(t / 1000000000), (long)(t % 1000000000) };

			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
		}
	}
}

/* Completes an update whose function was decided ahead (N1, N2): at its
 * anchor or later, the record takes the function readers already switched
 * to there (W4..W6). */
static void settle(struct shmclock_writer *w)
{
	wait_instant(w->anchor_mono);
	commit_end(w);
	w->open = w->staged = false;
}

/* 0, or -EBUSY: this handle lost the clock to another writer. Every
 * path that writes the segment asks first. */
static int still_owner(struct shmclock_writer *w)
{
	struct shmclock_seg *s = w->seg;

	if (w->lost)
		return -EBUSY;
	/* The thread that took the lock has exited: take it for this one, so
	 * readers see a live writer again. Another writer may have taken it
	 * over first (it saw the owner dead too): then the clock is theirs. */
	if ((atomic_load_explicit(&s->writer_lock.word, memory_order_relaxed) &
	     SHMCLOCK_LOCK_OWNER_DIED) && take_mutex(s)) {
		w->lost = true;
		return -EBUSY;
	}
	return 0;
}

/* See the protocol at the top. Sets w->anchor_mono (the clock, or @at when
 * that is later) and w->anchor_sim. With @same (the function will not
 * change: W2n), readers get no cap. -EBUSY: this handle lost the clock to
 * another writer (see take_mutex). */
static int commit_begin_at(struct shmclock_writer *w, int64_t at, bool same)
{
	struct shmclock_seg *s = w->seg;
	int r;

	if ((r = still_owner(w)))
		return r;
	if (w->staged)
		settle(w); /* then a commit of its own */
	else if (w->open) {
		/* freeze_at opened this update: it takes effect at its anchor,
		 * not sooner (readers run on to it until then). */
		wait_instant(w->anchor_mono);
		w->open = false;
		return 0;
	}
	/* Model step W1. Pairs with the reader's acquire fence after loading
	 * the backup (protocol.c, wait_writer, S4): the backup is complete before
	 * seq is odd. */
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&s->seq, ++w->seq, memory_order_relaxed);
	/* W2. Pairs with the reader's acquire fence before its seq re-read
	 * (reader.c, now_fast, R5). Full fence: the odd store must be visible
	 * before we read the clock for the anchor (store -> clock ordering, so
	 * release is not enough), and before any record store. */
	atomic_thread_fence(memory_order_seq_cst);
	w->anchor_mono = shmclock__mono_ns();
	/* W2b: an update opened by freeze_at is anchored at its instant. */
	if (at > w->anchor_mono)
		w->anchor_mono = at;
	/* W2a: the anchor, for readers that find this update in progress
	 * (protocol.c, T1-T4). Ordered after the odd store by the W2 fence; a
	 * reader that loads it and then sees seq still odd knows it belongs to
	 * this update. W2n: an update that keeps the function publishes
	 * SHMCLOCK_ANCHOR_NONE (no cap: such a reader evaluates the function
	 * in force at its own clock reading, which the commit leaves as it
	 * is), withdrawn after the commit (commit_end_same, X2). */
	atomic_store_explicit(&s->anchor_mono_ns, same ? SHMCLOCK_ANCHOR_NONE : w->anchor_mono,
			      memory_order_relaxed);
	/* W3 */
	w->anchor_sim = shmclock__eval(w->p.mono_base, w->p.sim_base, w->p.mult, w->anchor_mono);
	return 0;
}

static int commit_begin(struct shmclock_writer *w)
{
	return commit_begin_at(w, INT64_MIN, false);
}

static void commit_end(struct shmclock_writer *w)
{
	struct shmclock_seg *s = w->seg;

	/* Model step W4. */
	shmclock__store_record(s, &w->p);
	/* W5. Pairs with the reader's acquire load of seq (reader.c, now_fast,
	 * R1). */
	atomic_store_explicit(&s->seq, ++w->seq, memory_order_release);
	/* The decision (if any) is the record now: withdrawn, so that it can
	 * never match a later update (no ordering needed: a reader that still
	 * sees it re-reads seq past its odd value and retries). */
	atomic_store_explicit(&s->next_seq, w->seq, memory_order_relaxed);
	/* W6. Pairs with the reader's acquire fence in wait_writer (S4): a
	 * reader that sees any new backup value also sees seq past the odd
	 * value. */
	atomic_thread_fence(memory_order_release);
	shmclock__store_backup(s, &w->p);
	atomic_fetch_add_explicit(&s->commits, 1, memory_order_relaxed);
	/* Pairs with the sleepers' acquire load of change_futex before they
	 * re-check the time and wait. */
	atomic_fetch_add_explicit(&s->change_futex, 1, memory_order_release);
	if (!w->no_wake)
		shmclock__futex_wake_all(&s->change_futex);
}

/*
 * A commit that changes no part of the time function (the stale mark, the
 * source, the UNIX time of zero): the record keeps its function as it is,
 * not re-based at the anchor, and readers that find the update in progress
 * are not held at an anchor (W2n). Held there, a fresh reading was behind
 * the function by the update's length times the scale: on a follower
 * marking itself stale at scale 10, 160 ns of a commit put a reading 1.6 us
 * behind its leader's, not stale (issue 52). Safe because the function is
 * the same on both sides of the commit: the argument at the top of
 * protocol.c needs the cap only where the new function differs from the
 * old after the anchor.
 */
static int commit_begin_same(struct shmclock_writer *w)
{
	return commit_begin_at(w, INT64_MIN, true);
}

static void commit_end_same(struct shmclock_writer *w)
{
	commit_end(w);
	/* X2 (as withdraw's): the anchor withdrawn to the record's mono_base,
	 * so that a reader finding the next update open before its W2a spins
	 * instead of taking SHMCLOCK_ANCHOR_NONE for that update's (no cap on
	 * a change of function: backwards time; the model's mutant
	 * SAME_KEEPS_ANCHOR). Also after an update freeze_at opened (its
	 * instant is past the function's unchanged mono_base). Ordered before
	 * the next update's odd store by the release fence of its W1. */
	atomic_store_explicit(&w->seg->anchor_mono_ns, w->p.mono_base, memory_order_relaxed);
}

struct shmclock_seg *shmclock__writer_seg(shmclock_writer_t *w)
{
	return w->seg;
}

/* Re-anchor at the commit instant with the current value and mode. */
static void reanchor(struct shmclock_writer *w)
{
	struct shmclock_params *p = &w->p;

	p->mono_base = w->anchor_mono;
	p->sim_base = w->anchor_sim;
	p->mult = (p->flags & (SHMCLOCK_F_PAUSED | SHMCLOCK_F_STEPPED)) ? 0 : p->nominal_mult;
}

static void jump_to(struct shmclock_writer *w, int64_t sim_ns, bool only_backwards)
{
	struct shmclock_params *p = &w->p;
	bool was_init = p->flags & SHMCLOCK_F_INIT;
	/* Saturated: from -9.2e9 s to +9.2e9 s is a forward jump, not a
	 * wrapped negative one; INT64_MAX / INT64_MIN say "at least". */
	int64_t delta = shmclock__sat_sub(sim_ns, w->anchor_sim);

	if (was_init && !(only_backwards && delta >= 0)) {
		p->jump_epoch++;
		p->last_jump_ns = delta;
		/* The jump-free time (sim - jump_total_ns) does not move. */
		p->jump_total_ns = shmclock__sat_add(p->jump_total_ns, delta);
	}
	p->flags |= SHMCLOCK_F_INIT;
	w->anchor_sim = sim_ns;
	reanchor(w);
}

SHMCLOCK_EXPORT int shmclock_writer_set_time(shmclock_writer_t *w, int64_t sim_ns)
{
	int r;

	if ((r = commit_begin(w)))
		return r;
	jump_to(w, sim_ns, false);
	commit_end(w);
	return 0;
}

SHMCLOCK_EXPORT int shmclock_writer_advance(shmclock_writer_t *w, int64_t sim_ns)
{
	int r;

	if ((r = commit_begin(w)))
		return r;
	w->p.flags |= SHMCLOCK_F_STEPPED;
	jump_to(w, sim_ns, true);
	commit_end(w);
	return 0;
}

SHMCLOCK_EXPORT int shmclock_writer_step(shmclock_writer_t *w, int64_t delta_ns)
{
	int r;

	if (delta_ns < 0)
		return -EINVAL;
	if (!(w->p.flags & SHMCLOCK_F_INIT))
		return -ENODATA;
	if ((r = commit_begin(w)))
		return r;
	w->anchor_sim = w->anchor_sim > INT64_MAX - delta_ns ? INT64_MAX : w->anchor_sim + delta_ns;
	reanchor(w);
	commit_end(w);
	return 0;
}

/* A user's scale as the 32.32 rate, checked: 0, or -EINVAL / -ERANGE. (Not
 * the daemon's scale_mult, which converts a scale already checked.) */
static int checked_mult(double scale, uint64_t *mult)
{
	double m;

	if (!isfinite(scale) || !(scale > 0))
		return -EINVAL;
	m = nearbyint(scale * 4294967296.0);
	if (m < 1.0 || m >= 9223372036854775808.0) /* [2^-32, 2^31) */
		return -ERANGE;
	/* The 32.32 rate is exact to 2^-33 absolute: refuse a scale it would
	 * miss by more than 0.1 % (below about 1.2e-7) rather than run 7 %
	 * slow at 1e-9 without a word. */
	if (fabs(m / 4294967296.0 - scale) > scale * 1e-3)
		return -ERANGE;
	*mult = (uint64_t)m;
	return 0;
}

SHMCLOCK_EXPORT int shmclock_writer_set_scale(shmclock_writer_t *w, double scale)
{
	uint64_t m;
	int r;

	if ((r = checked_mult(scale, &m)))
		return r;
	if ((r = commit_begin(w)))
		return r;
	w->p.nominal_mult = m;
	reanchor(w);
	commit_end(w);
	return 0;
}

/*
 * The first instant at or after @mono_base at which sim_base + (t -
 * mono_base) * mult / 2^32 reaches @target (> sim_base, mult > 0),
 * saturating at INT64_MAX.
 */
static int64_t reach_instant(int64_t mono_base, int64_t sim_base, uint64_t mult, int64_t target)
{
	__extension__ typedef unsigned __int128 u128;
	u128 need = (u128)((uint64_t)target - (uint64_t)sim_base) << 32;
	u128 dt = (need + mult - 1) / mult;

	if (dt > (u128)INT64_MAX || (int64_t)dt > INT64_MAX - (mono_base > 0 ? mono_base : 0))
		return INT64_MAX;
	return mono_base + (int64_t)dt;
}

SHMCLOCK_EXPORT int shmclock_writer_set_function(shmclock_writer_t *w, int64_t mono_base,
						 int64_t sim_base, double scale, unsigned flags)
{
	struct shmclock_params *p = &w->p;
	uint64_t m, rate;
	int64_t v;
	bool was_init = p->flags & SHMCLOCK_F_INIT;
	int r;

	if (flags & ~(SHMCLOCK_FN_PAUSED | SHMCLOCK_FN_STEPPED | SHMCLOCK_FN_JUMP | SHMCLOCK_FN_STALE |
		      SHMCLOCK_FN_AHEAD))
		return -EINVAL;
	if ((r = checked_mult(scale, &m)))
		return r;
	if (flags & SHMCLOCK_FN_AHEAD) {
		/* Decided ahead: an update freeze_at opened, not yet decided,
		 * its instant still to come; anchored there (W2b, W3 ran). */
		if ((r = still_owner(w)))
			return r;
		if (!w->open || w->staged || shmclock__mono_ns() >= w->anchor_mono)
			return -EALREADY;
		w->before = *p; /* what eval and info give before the instant */
	} else if ((r = commit_begin(w))) {
		return r;
	}
	p->nominal_mult = m;
	p->flags &= ~(SHMCLOCK_F_PAUSED | SHMCLOCK_F_STEPPED | SHMCLOCK_F_STALE);
	p->flags |= SHMCLOCK_F_INIT | ((flags & SHMCLOCK_FN_PAUSED) ? SHMCLOCK_F_PAUSED : 0) |
		    ((flags & SHMCLOCK_FN_STEPPED) ? SHMCLOCK_F_STEPPED : 0) |
		    ((flags & SHMCLOCK_FN_STALE) ? SHMCLOCK_F_STALE : 0);
	rate = (flags & (SHMCLOCK_FN_PAUSED | SHMCLOCK_FN_STEPPED)) ? 0 : m;
	/* The new function's value at the commit instant. */
	v = shmclock__eval(mono_base, sim_base, rate, w->anchor_mono);
	/* The record is never based before its commit's anchor: a reader that
	 * finds the next update open before its anchor is published (W1-W2a)
	 * reads the previous anchor and tells it from a new one only by
	 * anchor > mono_base (protocol.c, T4). So a base in the past is the
	 * same line re-expressed at the anchor (the value there, within the
	 * rounding of one product). */
	if (mono_base < w->anchor_mono) {
		mono_base = w->anchor_mono;
		sim_base = v;
	}
	p->mono_base = mono_base;
	p->sim_base = sim_base;
	p->mult = rate;
	if (was_init && (flags & SHMCLOCK_FN_JUMP)) {
		int64_t delta = shmclock__sat_sub(v, w->anchor_sim);

		p->jump_epoch++;
		p->last_jump_ns = delta;
		p->jump_total_ns = shmclock__sat_add(p->jump_total_ns, delta);
	} else if (was_init && v < w->anchor_sim) {
		/* Not a jump, and the function is behind what readers may have
		 * seen: hold at that value until the function reaches it, then
		 * follow it (one linear piece whose start is that instant). */
		p->sim_base = w->anchor_sim;
		p->mono_base = rate ? reach_instant(mono_base, sim_base, rate, w->anchor_sim)
				    : w->anchor_mono;
	}
	if (flags & SHMCLOCK_FN_AHEAD) {
		struct shmclock_seg *s = w->seg;

		/* N1: the next line (relaxed), and the instant it is for. */
		shmclock__store_next(s, p);
		atomic_store_explicit(&s->n_anchor_ns, w->anchor_mono, memory_order_relaxed);
		/* N2. Pairs with the readers' acquire load of next_seq (protocol.c,
		 * T1, S2): who sees this update's seq there sees the function. */
		atomic_store_explicit(&s->next_seq, w->seq, memory_order_release);
		w->staged = true;
		/* Sleepers re-plan with the function decided (as after a commit:
		 * pairs with their acquire load of change_futex). */
		atomic_fetch_add_explicit(&s->change_futex, 1, memory_order_release);
		if (!w->no_wake)
			shmclock__futex_wake_all(&s->change_futex);
		return 0;
	}
	commit_end(w);
	return 0;
}

/* The function readers follow at @mono: the one decided ahead from its
 * instant on, the one before it until then. */
static const struct shmclock_params *params_at(const struct shmclock_writer *w, int64_t mono)
{
	return w->staged && mono < w->anchor_mono ? &w->before : &w->p;
}

SHMCLOCK_EXPORT int shmclock_writer_eval(shmclock_writer_t *w, int64_t mono_ns, int64_t *sim_ns)
{
	const struct shmclock_params *p = params_at(w, mono_ns);

	if (!(p->flags & SHMCLOCK_F_INIT))
		return -ENODATA;
	*sim_ns = shmclock__eval(p->mono_base, p->sim_base, p->mult, mono_ns);
	return 0;
}

static int set_flag(struct shmclock_writer *w, uint32_t flag, bool on)
{
	/* The stale mark leaves the function as it is; a pause or the stepped
	 * mode changes its rate from the anchor on. */
	bool same = flag == SHMCLOCK_F_STALE;
	int r;

	if ((r = same ? commit_begin_same(w) : commit_begin(w)))
		return r;
	if (on)
		w->p.flags |= flag;
	else
		w->p.flags &= ~flag;
	if (same) {
		commit_end_same(w);
		return 0;
	}
	reanchor(w);
	commit_end(w);
	return 0;
}

SHMCLOCK_EXPORT int shmclock_writer_freeze_at(shmclock_writer_t *w, int64_t mono_ns)
{
	int r;

	if (!(w->p.flags & SHMCLOCK_F_INIT))
		return -ENODATA;
	if (w->open)
		return -EINVAL; /* one at a time */
	/* A decision stands after a crash and the next writer's first change
	 * waits for its instant (V6): never further than this. */
	if (mono_ns > shmclock__sat_add(shmclock__mono_ns(), SHMCLOCK_FREEZE_AHEAD_MAX_NS))
		return -ERANGE;
	if ((r = commit_begin_at(w, mono_ns, false)))
		return r;
	/* Undecided: seq + 1, even, never an update's own odd seq. Release
	 * pairs with the readers' acquire load of next_seq (T1): who sees the
	 * mark sees this update's anchor (W2a). */
	atomic_store_explicit(&w->seg->next_seq, w->seq + 1, memory_order_release);
	w->open = true;
	return 0;
}

SHMCLOCK_EXPORT int shmclock_writer_withdraw(shmclock_writer_t *w)
{
	struct shmclock_seg *s = w->seg;
	int r;

	if ((r = still_owner(w)))
		return r;
	if (!w->open)
		return -ENODATA;
	if (w->staged)
		return -EALREADY; /* decided: readers may have switched already */
	/* X1: W4..W6 with the record as it was (freeze_at changed nothing of
	 * w->p): readers go on with the function in force, at once, and a
	 * reader held past the instant runs on from there (forwards). */
	commit_end(w);
	w->open = false;
	/* X2: the anchor withdrawn, as V0 does for a dead writer's: the record
	 * is based before it, so a reader that finds the next update open
	 * before its W2a would take this stale anchor for that update's
	 * (T4: anchor > mono_base) and cap time at an instant past the real
	 * anchor, which a pause there would then undercut. No later than
	 * mono_base, it only makes such a reader wait for W2a. Ordered before
	 * the next update's odd store by the release fence of its W1 (and
	 * after this update's even store, W5: readers of this update keep
	 * the anchor they were held at). */
	atomic_store_explicit(&s->anchor_mono_ns, w->p.mono_base, memory_order_relaxed);
	return 0;
}

SHMCLOCK_EXPORT int shmclock_writer_complete(shmclock_writer_t *w)
{
	int r;

	if ((r = still_owner(w)))
		return r;
	if (!w->staged)
		return -ENODATA;
	if (shmclock__mono_ns() < w->anchor_mono)
		return -EAGAIN;
	settle(w);
	return 0;
}

SHMCLOCK_EXPORT int shmclock_writer_set_stale(shmclock_writer_t *w, bool stale)
{
	return set_flag(w, SHMCLOCK_F_STALE, stale);
}

SHMCLOCK_EXPORT int shmclock_writer_pause(shmclock_writer_t *w)
{
	return set_flag(w, SHMCLOCK_F_PAUSED, true);
}

SHMCLOCK_EXPORT int shmclock_writer_resume(shmclock_writer_t *w)
{
	return set_flag(w, SHMCLOCK_F_PAUSED, false);
}

SHMCLOCK_EXPORT int shmclock_writer_set_source(shmclock_writer_t *w, int source)
{
	int r;

	if (source < 0 || source > 255)
		return -EINVAL;
	if ((r = commit_begin_same(w)))
		return r;
	w->p.flags = (w->p.flags & ~SHMCLOCK_F_SOURCE_MASK) |
		     ((uint32_t)source << SHMCLOCK_F_SOURCE_SHIFT);
	/* The mode (running, paused, stepped) is not the source's business:
	 * shmclock_writer_set_stepped() changes it. */
	commit_end_same(w);
	return 0;
}

SHMCLOCK_EXPORT int shmclock_writer_set_stepped(shmclock_writer_t *w, bool stepped)
{
	return set_flag(w, SHMCLOCK_F_STEPPED, stepped);
}

SHMCLOCK_EXPORT int shmclock_writer_set_unix_at_zero(shmclock_writer_t *w, const int64_t *unix_ns)
{
	int r;

	if ((r = commit_begin_same(w)))
		return r;
	if (unix_ns) {
		w->p.flags |= SHMCLOCK_F_UNIX_ZERO;
		w->p.unix_at_zero_ns = *unix_ns;
	} else {
		w->p.flags &= ~SHMCLOCK_F_UNIX_ZERO;
		w->p.unix_at_zero_ns = 0;
	}
	commit_end_same(w);
	return 0;
}

SHMCLOCK_EXPORT int shmclock_writer_heartbeat(shmclock_writer_t *w)
{
	atomic_store_explicit(&w->seg->heartbeat_mono_ns, shmclock__mono_ns(), memory_order_relaxed);
	if (w->no_wake)
		shmclock__futex_wake_all(&w->seg->change_futex);
	return 0;
}

SHMCLOCK_EXPORT int shmclock_writer_set_wake(shmclock_writer_t *w, bool wake)
{
	w->no_wake = !wake;
	if (wake)
		shmclock__futex_wake_all(&w->seg->change_futex); /* what we held back */
	return 0;
}

SHMCLOCK_EXPORT int shmclock_writer_function(shmclock_writer_t *w, shmclock_function_t *fn)
{
	/* While an update decided ahead waits for its instant, w->p is that
	 * update's; the record still holds what w->before kept. */
	const struct shmclock_params *p = w->staged ? &w->before : &w->p;

	*fn = (shmclock_function_t){
		.mono_base = p->mono_base,
		.sim_base = p->sim_base,
		.rate = p->mult,
		.scale = (double)p->nominal_mult / 4294967296.0,
		.nominal_mult = p->nominal_mult,
		.flags = ((p->flags & SHMCLOCK_F_PAUSED) ? SHMCLOCK_FN_PAUSED : 0u) |
			 ((p->flags & SHMCLOCK_F_STEPPED) ? SHMCLOCK_FN_STEPPED : 0u) |
			 ((p->flags & SHMCLOCK_F_STALE) ? SHMCLOCK_FN_STALE : 0u),
		.initialized = p->flags & SHMCLOCK_F_INIT,
		.source = (int)((p->flags & SHMCLOCK_F_SOURCE_MASK) >> SHMCLOCK_F_SOURCE_SHIFT),
		.jump_epoch = p->jump_epoch,
		.last_jump_ns = p->last_jump_ns,
		.jump_total_ns = p->jump_total_ns,
		.has_unix_at_zero = p->flags & SHMCLOCK_F_UNIX_ZERO,
		.unix_at_zero_ns = p->unix_at_zero_ns,
		.commits = atomic_load_explicit(&w->seg->commits, memory_order_relaxed),
	};
	return 0;
}

SHMCLOCK_EXPORT int shmclock_writer_now(shmclock_writer_t *w, int64_t *sim_ns)
{
	return shmclock_writer_eval(w, shmclock__mono_ns(), sim_ns);
}

SHMCLOCK_EXPORT int shmclock_writer_info(shmclock_writer_t *w, shmclock_info_t *info)
{
	int64_t mono = shmclock__mono_ns();

	shmclock__fill_info(w->seg, params_at(w, mono), mono,
			    atomic_load_explicit(&w->seg->writer_lock.word, memory_order_relaxed),
			    info);
	info->owner_uid = geteuid(); /* created by us, or refused (attach_segment) */
	return 0;
}
