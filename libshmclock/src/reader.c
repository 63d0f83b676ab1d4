/* SPDX-License-Identifier: MIT */
/*
 * The reader's handle: open (map read-only, check the owner), close, and
 * the fast path of shmclock_now() and its siblings (model steps R1-R6),
 * falling back to the read protocol's complete snapshot (protocol.c) when
 * the writer is busy or a jump is to be delivered (jump.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pwd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <shmclock/shmclock.h>
#include <shmclock/time.h>

#include "clock.h"
#include "jump.h"
#include "protocol.h"

/* The kernel's initial user namespace: its /proc/PID/ns/user inode is
 * this constant (PROC_USER_INIT_INO, include/linux/proc_ns.h). */
#define USERNS_INIT_INO 0xEFFFFFFDu

/* Is this process in the initial user namespace, where uid 0 is root?
 * Without /proc (a sandbox that mounts none) nothing says so: taken not
 * to be, so that uid 0 is believed there only if named. */
static bool initial_userns(void)
{
	struct stat st;

	return stat("/proc/self/ns/user", &st) == 0 && st.st_ino == USERNS_INIT_INO;
}

/* The uid a file owned by a user this namespace does not map shows as
 * (/proc/sys/kernel/overflowuid, 65534 unless changed). */
static uid_t overflow_uid(void)
{
	FILE *f = fopen("/proc/sys/kernel/overflowuid", "re");
	unsigned long u = 65534;

	if (f) {
		if (fscanf(f, "%lu", &u) != 1)
			u = 65534;
		fclose(f);
	}
	return (uid_t)u;
}

/* Does this user namespace map @uid (/proc/self/uid_map: "inside outside
 * count" a line)? Unreadable: it may, as far as we know. */
static bool uid_mapped(uid_t uid)
{
	FILE *f = fopen("/proc/self/uid_map", "re");
	unsigned long in, out, n;
	bool mapped = false;

	if (!f)
		return true;
	while (!mapped && fscanf(f, "%lu %lu %lu", &in, &out, &n) == 3)
		mapped = uid >= in && uid - in < n;
	fclose(f);
	return mapped;
}

/* Whether $SHMCLOCK_TRUST (user names or uids, separated by commas or
 * spaces; "*" trusts every owner) names @owner. "outside" names an
 * @outsider (an owner outside this user namespace: in a container with
 * one, the host's root, whose daemon made the clock, shows as the overflow
 * uid), and only where this namespace maps no user to that uid: then
 * nobody in it, its root included, can make or chown a file to it, so the
 * file came from outside (a bind mount the container was given). Where it
 * maps that uid (the usual 65536 ids), the container's own "nobody" looks
 * the same: not named (doc/containers.md). */
static bool trusted_by_env(uid_t owner, bool outsider)
{
	const char *t = getenv("SHMCLOCK_TRUST");

	while (t && *t) {
		char word[64];
		size_t n = strcspn(t, ", \t");

		if (n && n < sizeof(word)) {
			char *end;
			unsigned long u;

			memcpy(word, t, n);
			word[n] = 0;
			if (!strcmp(word, "*"))
				return true;
			if (!strcmp(word, "outside")) {
				if (outsider && !uid_mapped(owner))
					return true;
				goto next;
			}
			u = strtoul(word, &end, 10);
			if (!*end && u == owner)
				return true;
			if (*end) {
				struct passwd pw, *res = NULL;
				char buf[1024];

				if (!getpwnam_r(word, &pw, buf, sizeof(buf), &res) && res &&
				    res->pw_uid == owner)
					return true;
			}
		}
next:
		t += n;
		t += strspn(t, ", \t");
	}
	return false;
}

/*
 * A segment is believed only if its owner could not fool us: root, this
 * user, or a user named in $SHMCLOCK_TRUST (or any with
 * SHMCLOCK_OPEN_TRUST_ANY_OWNER). /dev/shm is writable by everyone, so
 * anyone can create a clock under a free name and set any time in it.
 * Root is uid 0 of the initial user namespace only: in a container with a
 * user namespace, uid 0 is the container's root, which is whoever started
 * it (trusted only if named). 0, or -EPERM; -EREMOTE when the owner is
 * outside this user namespace (the overflow uid), where SHMCLOCK_TRUST's
 * "outside" is what may apply.
 */
static int trusted(uid_t owner, unsigned flags)
{
	bool initial = initial_userns();
	/* In a user namespace the overflow uid is every owner it does not
	 * map: a reader running as that uid (--user nobody) is not their
	 * owner. */
	bool outsider = !initial && owner == overflow_uid();

	if ((owner == 0 && initial) || (!outsider && (owner == geteuid() || owner == getuid())) ||
	    (flags & SHMCLOCK_OPEN_TRUST_ANY_OWNER) || trusted_by_env(owner, outsider))
		return 0;
	return outsider ? -EREMOTE : -EPERM;
}

/* Maps the named segment read-only and checks its owner and header. */
static int map_segment(const char *name, unsigned flags, const struct shmclock_seg **out,
		       uid_t *owner)
{
	char shm[SHMCLOCK_PATH_MAX];
	struct stat st;
	void *map;
	int fd, r;

	shmclock__shm_name(shm, name);
	/* O_RDONLY and PROT_READ: nothing a reader does can change time.
	 * O_NONBLOCK: anyone may put a FIFO in /dev/shm under a clock's name,
	 * whose open would wait for a writer forever (refused below). */
	fd = shm_open(shm, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0);
	if (fd < 0)
		return errno == ELOOP ? -EPROTO : -errno;
	/* Size before mapping: a short file would SIGBUS on access. */
	if (fstat(fd, &st) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	if (!S_ISREG(st.st_mode) || st.st_size != SHMCLOCK_SEG_SIZE) {
		close(fd);
		return -EPROTO;
	}
	*owner = st.st_uid;
	if ((r = trusted(st.st_uid, flags))) {
		close(fd);
		return r;
	}
	map = mmap(NULL, SHMCLOCK_SEG_SIZE, PROT_READ, MAP_SHARED, fd, 0);
	r = map == MAP_FAILED ? -errno : 0;
	close(fd);
	if (r)
		return r;
	r = shmclock__check_header(map, st.st_size);
	/* The writer's function is on its namespace's CLOCK_MONOTONIC: in a
	 * time namespace of another offset (unshare --time, a container,
	 * CRIU) every reading here would be off by the difference, silently
	 * (issue 52). Refused, whatever reads it: C, the fast path, the shim,
	 * Python and C# all open through here. */
	if (!r && atomic_load_explicit(&((const struct shmclock_seg *)map)->writer_timens_mono_ns,
				       memory_order_relaxed) != shmclock__timens_mono_offset())
		r = -EXDEV;
	/* A copy of a live writer's segment (copied into an image, a volume
	 * that copies): its lock word says the writer lives, but nothing will
	 * ever change it, wake its sleepers or mark that writer's death.
	 * Refused as a clock without a writer, never read as a live one. A
	 * bind mount is the same file (the same st_dev and st_ino). */
	if (!r) {
		const struct shmclock_seg *seg = map;
		uint64_t ino = atomic_load_explicit(&seg->writer_file_ino, memory_order_relaxed);
		uint64_t dev = atomic_load_explicit(&seg->writer_file_dev, memory_order_relaxed);

		if (ino && (ino != (uint64_t)st.st_ino || dev != (uint64_t)st.st_dev) &&
		    shmclock__writer_alive(atomic_load_explicit(&seg->writer_lock.word,
								memory_order_acquire)))
			r = -ESTALE;
	}
	if (r) {
		munmap(map, SHMCLOCK_SEG_SIZE);
		return r;
	}
	*out = map;
	return 0;
}

/*
 * The fallback: a private page in the segment format holding system time
 * as a clock that runs at scale 1 from CLOCK_REALTIME sampled now. Every
 * read path then works unchanged, with no branch on the fast path. Its
 * "writer" is this process, alive as long as the page is.
 */
static int system_segment(const struct shmclock_seg **out)
{
	struct shmclock_seg *s = mmap(NULL, SHMCLOCK_SEG_SIZE, PROT_READ | PROT_WRITE,
				      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint32_t flags = SHMCLOCK_F_INIT | SHMCLOCK_F_UNIX_ZERO | ((uint32_t)SHMCLOCK_SOURCE_SYSTEM << SHMCLOCK_F_SOURCE_SHIFT);
	struct shmclock_params p = { .flags = flags, .mult = (uint64_t)1 << 32,
				     .nominal_mult = (uint64_t)1 << 32 };

	if (s == MAP_FAILED)
		return -errno;
	s->magic = SHMCLOCK_MAGIC;
	s->abi_version = SHMCLOCK_ABI_VERSION;
	s->size = SHMCLOCK_SEG_SIZE;
	s->record_off = offsetof(struct shmclock_seg, seq);
	s->backup_off = offsetof(struct shmclock_seg, b_flags);
	p.sim_base = shmclock__realtime_ns();
	p.mono_base = shmclock__mono_ns();
	/* Nothing else sees the page yet: plain relaxed stores will do. The
	 * backup equals the record, as after any commit. */
	shmclock__store_record(s, &p);
	shmclock__store_backup(s, &p);
	atomic_store_explicit(&s->writer_lock.word, (uint32_t)getpid() & SHMCLOCK_LOCK_TID_MASK,
			      memory_order_relaxed);
	atomic_store_explicit(&s->writer_start_unix_ns, p.sim_base, memory_order_relaxed);
	/* Readers only from here on. */
	mprotect(s, SHMCLOCK_SEG_SIZE, PROT_READ);
	*out = s;
	return 0;
}

SHMCLOCK_EXPORT int shmclock_open_ex(const char *name, unsigned flags, shmclock_t **out)
{
	const struct shmclock_seg *seg = NULL;
	struct shmclock *clk;
	bool fallback = false;
	uid_t owner = geteuid();
	int r;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (flags & ~(SHMCLOCK_OPEN_FALLBACK_SYSTEM | SHMCLOCK_OPEN_WATCH_JUMPS |
		      SHMCLOCK_OPEN_TRUST_ANY_OWNER | SHMCLOCK_OPEN_NO_CALLBACKS))
		return -EINVAL;
	if ((flags & SHMCLOCK_OPEN_NO_CALLBACKS) && (flags & SHMCLOCK_OPEN_WATCH_JUMPS))
		return -EINVAL;
	if (!name && !(flags & SHMCLOCK_OPEN_FALLBACK_SYSTEM))
		return -EINVAL;
	r = name ? shmclock__check_name(name) : -ENOENT;
	if (r && r != -ENOENT)
		return r;
	if (!r)
		r = map_segment(name, flags, &seg, &owner);
	if (r == -ENOENT && (flags & SHMCLOCK_OPEN_FALLBACK_SYSTEM)) {
		r = system_segment(&seg);
		fallback = true;
	}
	if (r)
		return r;
	clk = calloc(1, sizeof(*clk));
	if (!clk) {
		munmap((void *)seg, SHMCLOCK_SEG_SIZE);
		return -ENOMEM;
	}
	clk->seg = seg;
	clk->fallback = fallback;
	clk->owner = owner;
	snprintf(clk->name, sizeof(clk->name), "%s", name ? name : "");
	shmclock__jump_init(clk);
	clk->jumps_off = flags & SHMCLOCK_OPEN_NO_CALLBACKS;
	if (!clk->jumps_off)
		shmclock__fork_track(clk);
	if (flags & SHMCLOCK_OPEN_WATCH_JUMPS) {
		r = shmclock_jump_watch(clk, true);
		if (r) {
			shmclock_close(clk);
			return r;
		}
	}
	*out = clk;
	return 0;
}

SHMCLOCK_EXPORT int shmclock_open(const char *name, shmclock_t **out)
{
	return shmclock_open_ex(name, 0, out);
}

SHMCLOCK_EXPORT bool shmclock_is_fallback(const shmclock_t *clk)
{
	return clk->fallback;
}

static void *close_later(void *arg)
{
	shmclock_close(arg); /* joins the watcher once its callback returns */
	return NULL;
}

SHMCLOCK_EXPORT void shmclock_close(shmclock_t *clk)
{
	if (!clk)
		return;
	/* From a callback on the clock's own watcher, which cannot wait for
	 * itself: a thread of ours closes it once the callback has returned
	 * (if none can be started, the clock stays open: a leak, not a
	 * use-after-free). */
	if (shmclock__on_own_watcher(clk)) {
		pthread_attr_t a;
		pthread_t t;

		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		shmclock__thread_start(&t, &a, close_later, clk);
		pthread_attr_destroy(&a);
		return;
	}
	shmclock__jump_fini(clk);
	munmap((void *)clk->seg, SHMCLOCK_SEG_SIZE);
	free(clk);
}

SHMCLOCK_EXPORT const char *shmclock_name(const shmclock_t *clk)
{
	return clk->name;
}

/*
 * The general case of shmclock_now() for a handle: the writer was busy, or
 * a jump, a source change or a start happened since this process last
 * looked. A pending jump is delivered (callbacks first) before the value
 * it brings is returned; this thread skips that while it runs the
 * callbacks itself. Cold and out of line: the fast path's callers keep
 * none of its code in their cache lines.
 */
static __attribute__((noinline, cold)) int now_checked(struct shmclock *clk, int64_t *sim_ns,
						       int64_t *uz, int64_t *jt)
{
	for (;;) {
		struct shmclock_params p;
		int64_t mono;
		uint32_t lock;
		int r = shmclock__snapshot(clk->seg, &p, &mono, &lock);

		if (r == -EAGAIN)
			return r;
		/* Acquire: pairs with the release store of seen_key in delivery. */
		if (shmclock__key(p.jump_epoch, p.flags) !=
			    atomic_load_explicit(&clk->seen_key, memory_order_acquire) &&
		    shmclock__jump_deliver(clk))
			continue; /* delivered: read again, the clock may have moved on */
		if (!(p.flags & SHMCLOCK_F_INIT))
			return -ENODATA;
		*sim_ns = shmclock__eval(p.mono_base, p.sim_base, p.mult, mono);
		if (uz)
			*uz = (p.flags & SHMCLOCK_F_UNIX_ZERO) ? p.unix_at_zero_ns : 0;
		if (jt)
			*jt = p.jump_total_ns;
		/* A live writer that lost what it follows says so (the value is
		 * filled in, as for a dead writer). */
		return r == 0 && (p.flags & SHMCLOCK_F_STALE) ? -ESTALE : r;
	}
}

/*
 * shmclock_now() and its siblings are the one fast path of
 * <shmclock/static/shmclock.h> (model steps R1-R6), with now_checked() for
 * everything unusual: the writer mid-update or dead, an uninitialized
 * clock, a jump to deliver. The siblings load one more field in the same
 * seq window: the UNIX time of zero (record line), the jump total (info
 * line, a second cache line). The clock reading is shmclock__mono_ns():
 * the vDSO (or, in the preload shim, the real clock_gettime), never an
 * interposed one.
 */
SHMCLOCK_EXPORT int shmclock_now(shmclock_t *clk, int64_t *sim_ns)
{
	if (__builtin_expect(shmclock_static_read(clk, shmclock__mono_ns, NULL, sim_ns, NULL, NULL), 1))
		return 0;
	return now_checked(clk, sim_ns, NULL, NULL);
}

SHMCLOCK_EXPORT int shmclock_now_monotonic(shmclock_t *clk, int64_t *ns)
{
	int64_t sim, jt;
	int r;

	if (__builtin_expect(shmclock__fast_monotonic(clk, ns), 1))
		return 0;
	r = now_checked(clk, &sim, NULL, &jt);
	if (r == 0 || r == -ESTALE)
		*ns = shmclock__sat_sub(sim, jt);
	return r;
}

SHMCLOCK_EXPORT int shmclock_now_unix(shmclock_t *clk, int64_t *unix_ns)
{
	int64_t sim, uz;
	int r;

	if (__builtin_expect(shmclock__fast_unix(clk, unix_ns), 1))
		return 0;
	r = now_checked(clk, &sim, &uz, NULL);
	if (r == 0 || r == -ESTALE)
		*unix_ns = shmclock__sat_add(sim, uz);
	return r;
}

SHMCLOCK_EXPORT int shmclock_info(shmclock_t *clk, shmclock_info_t *info)
{
	struct shmclock_params p;
	int64_t mono = 0;
	uint32_t lock = 0;
	int r = shmclock__snapshot(clk->seg, &p, &mono, &lock);

	if (r == -EAGAIN)
		return r;
	shmclock__fill_info(clk->seg, &p, mono, lock, info);
	info->owner_uid = clk->owner;
	/* Held at an instant its writer has not decided yet: as stale. */
	info->stale |= shmclock__held(r, lock);
	return 0;
}

SHMCLOCK_EXPORT int shmclock_unlink(const char *name)
{
	char shm[SHMCLOCK_PATH_MAX];
	int r = shmclock__check_name(name);

	if (r)
		return r;
	shmclock__shm_name(shm, name);
	return shm_unlink(shm) < 0 ? -errno : 0;
}
