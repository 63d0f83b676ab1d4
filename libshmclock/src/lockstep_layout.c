/* SPDX-License-Identifier: MIT */
/* Lockstep: what participants (lockstep_participant.c) and the host
 * (lockstep_host.c) share beyond the wire format of lockstep_layout.h. The
 * protocol and its steps are described there. */
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

bool shmclock__ls_yield_briefly(uint32_t *backoff)
{
	int64_t t0 = shmclock__mono_ns();

	sched_yield();
	if (shmclock__mono_ns() - t0 <= YIELD_SLOW_NS)
		return true;
	*backoff = YIELD_BACKOFF;
	return false;
}

int shmclock__ls_futex_waitv2(_Atomic uint32_t *shared, uint32_t sval, uint32_t *priv,
			      uint32_t pval, int64_t deadline)
{
	/* struct futex_waitv from linux/futex.h (5.16); spelled out so that
	 * older headers build. */
	struct {
		uint64_t val;
		uint64_t uaddr;
		uint32_t flags;
		uint32_t reserved;
	} w[2] = {
		{ sval, (uintptr_t)shared, 2 /* FUTEX2_SIZE_U32 */, 0 },
		{ pval, (uintptr_t)priv, 2 | 128 /* FUTEX2_PRIVATE */, 0 },
	};
	struct timespec ts = { (time_t)(deadline / 1000000000), (long)(deadline % 1000000000) };

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif
	return (int)syscall(SYS_futex_waitv, w, priv ? 2 : 1, 0,
			    deadline == INT64_MAX ? NULL : &ts, CLOCK_MONOTONIC);
}

int64_t shmclock__ls_hist_pct(const _Atomic uint32_t *hist, double q)
{
	uint32_t c[LS_HIST];
	uint64_t total = 0, acc = 0;

	for (unsigned i = 0; i < LS_HIST; i++)
		total += c[i] = atomic_load_explicit(&hist[i], memory_order_relaxed);
	if (!total)
		return 0;
	for (unsigned i = 0; i < LS_HIST; i++) {
		acc += c[i];
		if ((double)acc >= q * (double)total)
			return hist_value(i);
	}
	return hist_value(LS_HIST - 1);
}

/* Unicode's invisible formatting characters (general category Cf, and the
 * line and paragraph separators Zl, Zp): a name holding one shows in status,
 * top and the log as something it is not (U+202E RIGHT-TO-LEFT OVERRIDE
 * turns the rest of the line around; issue 52). Ranges from Unicode 15's
 * UnicodeData.txt. */
static bool ls_format_char(uint32_t cp)
{
	static const uint32_t ranges[][2] = {
		{ 0x00ad, 0x00ad },   { 0x0600, 0x0605 },   { 0x061c, 0x061c },
		{ 0x06dd, 0x06dd },   { 0x070f, 0x070f },   { 0x0890, 0x0891 },
		{ 0x08e2, 0x08e2 },   { 0x180e, 0x180e },   { 0x200b, 0x200f },
		{ 0x2028, 0x202e },   { 0x2060, 0x2064 },   { 0x2066, 0x206f },
		{ 0xfeff, 0xfeff },   { 0xfff9, 0xfffb },   { 0x110bd, 0x110bd },
		{ 0x110cd, 0x110cd }, { 0x13430, 0x1343f }, { 0x1bca0, 0x1bca3 },
		{ 0x1d173, 0x1d17a }, { 0xe0001, 0xe0001 }, { 0xe0020, 0xe007f },
	};

	for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++)
		if (cp >= ranges[i][0] && cp <= ranges[i][1])
			return true;
	return false;
}

int shmclock__ls_check_who(const char *who)
{
	const unsigned char *s = (const unsigned char *)who;
	size_t n = 0;

	if (!who)
		return -EINVAL;
	while (s[n]) {
		uint32_t cp, min;
		unsigned len;

		if (s[n] < 0x80) {
			cp = s[n];
			len = 1;
			min = 0;
		} else if ((s[n] & 0xe0) == 0xc0) {
			cp = s[n] & 0x1f;
			len = 2;
			min = 0x80;
		} else if ((s[n] & 0xf0) == 0xe0) {
			cp = s[n] & 0x0f;
			len = 3;
			min = 0x800;
		} else if ((s[n] & 0xf8) == 0xf0) {
			cp = s[n] & 0x07;
			len = 4;
			min = 0x10000;
		} else {
			return -EINVAL; /* a continuation byte first, or 0xf8-0xff */
		}
		for (unsigned k = 1; k < len; k++) {
			if ((s[n + k] & 0xc0) != 0x80)
				return -EINVAL; /* also stops at the NUL */
			cp = cp << 6 | (s[n + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || cp < 0x20 ||
		    (cp >= 0x7f && cp <= 0x9f) || ls_format_char(cp))
			return -EINVAL;
		n += len;
		if (n > SHMCLOCK_LOCKSTEP_WHO_MAX)
			return -EINVAL;
	}
	return n ? 0 : -EINVAL;
}

bool shmclock__ls_name_taken(const struct ls_seg *ls, const char *who, int self)
{
	char other[SHMCLOCK_LOCKSTEP_WHO_MAX + 1];

	for (int i = 0; i < LS_SLOTS; i++) {
		const struct ls_slot *sl = &ls->slot[i];

		if (i == self ||
		    atomic_load_explicit(&sl->state, memory_order_acquire) != LS_MEMBER ||
		    !shmclock__writer_alive(lock_word(sl)))
			continue;
		who_get(sl, other);
		if (!strcmp(other, who))
			return true;
	}
	return false;
}

void shmclock__ls_kick_host(struct ls_seg *ls, bool grant)
{
	int64_t at;

	/* seq_cst, with the host's seq_cst stores of block_at_ns and
	 * host_waiting and its load of grant_futex (host_wait): either the
	 * host sees this increment before it sleeps, or we see it waiting,
	 * with the block_at_ns it published. */
	atomic_fetch_add_explicit(&ls->grant_futex, 1, memory_order_seq_cst);
	if (!atomic_load_explicit(&ls->host_waiting, memory_order_seq_cst))
		return;
	if (grant) {
		at = atomic_load_explicit(&ls->block_at_ns, memory_order_seq_cst);
		/* seq_cst loads: of two last grants made at once, at least one
		 * sees the other's (Dekker on the grant stores). */
		for (unsigned i = 0; i < LS_SLOTS; i++)
			if (atomic_load_explicit(&ls->slot[i].state, memory_order_seq_cst) == LS_MEMBER &&
			    atomic_load_explicit(&ls->slot[i].grant_ns, memory_order_seq_cst) <= at)
				return; /* somebody still holds the clock there */
	}
	syscall(SYS_futex, &ls->grant_futex, FUTEX_WAKE, 1, NULL, NULL, 0);
}

int shmclock__ls_map_segment(const char *name, const shmclock_t *clk, bool writable,
			     struct ls_seg **out)
{
	char path[SHMCLOCK_PATH_MAX + 32];
	struct ls_seg *ls;
	struct stat st;
	int fd, r = 0;

	ls_path(path, sizeof(path), name, false);
	/* O_NONBLOCK: a FIFO planted under the name must not hang the open
	 * (it is refused below, not a regular file). */
	fd = open(path, (writable ? O_RDWR : O_RDONLY) | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return errno == ENOENT ? -EOPNOTSUPP : -errno;
	if (fstat(fd, &st) < 0)
		r = -errno;
	else if (!S_ISREG(st.st_mode) || st.st_size != (off_t)LS_SIZE)
		r = -EPROTO;
	else if (st.st_uid != clk->owner)
		r = -EPERM; /* not made by the clock's owner: not believed */
	if (r) {
		close(fd);
		return r;
	}
	ls = mmap(NULL, LS_SIZE, PROT_READ | (writable ? PROT_WRITE : 0), MAP_SHARED, fd, 0);
	close(fd);
	if (ls == MAP_FAILED)
		return -errno;
	if (ls->magic != LS_MAGIC || ls->abi_version != LS_ABI_VERSION ||
	    ls->size != LS_SIZE || ls->slots != LS_SLOTS || ls->slot_size != sizeof(struct ls_slot)) {
		munmap(ls, LS_SIZE);
		return -EPROTO;
	}
	*out = ls;
	return 0;
}

void shmclock__ls_fill(const struct ls_slot *sl, unsigned i, struct shmclock_lockstep_participant *p)
{
	p->slot = i;
	p->pid = atomic_load_explicit(&sl->pid, memory_order_relaxed);
	who_get(sl, p->who);
	/* Checked at the join, but a member can rewrite its name since:
	 * logs and status --json get valid UTF-8 whatever it wrote. */
	if (shmclock__ls_check_who(p->who))
		for (char *c = p->who; *c; c++)
			if ((unsigned char)*c >= 0x7f || (unsigned char)*c < 0x20)
				*c = '?';
	p->grant_ns = atomic_load_explicit(&sl->grant_ns, memory_order_acquire);
	p->joined_sim_ns = atomic_load_explicit(&sl->joined_sim_ns, memory_order_relaxed);
	p->holding_since_ns = atomic_load_explicit(&sl->holding_since, memory_order_relaxed);
}
