/* SPDX-License-Identifier: MIT */
/*
 * The escape report of shmclock-run -v / --strict (issue 33): the reads of
 * real time that nothing redirected to the simulated clock, counted with
 * where they happened, for the whole tree of processes of one run.
 *
 * One page in a file shmclock-run creates and names in $SHMCLOCK_REPORT;
 * every process under the shim maps it shared (preload/escape.c), as does
 * the supervisor (supervise.c), and shmclock-run reads it when the program
 * has exited. It is private to the run (mode 0600, removed at the end), not
 * a wire format between versions: writer and reader are the same build.
 *
 * What is counted: rdtsc and rdtscp, which PR_SET_TSC(PR_TSC_SIGSEGV) makes
 * fault. Each is emulated with the real counter (the point is to report,
 * not to simulate it). The dynamic loader's own (glibc's ld.so times its
 * start for LD_DEBUG=statistics) is emulated and not counted.
 */
#ifndef SHMCLOCK_ESCAPES_H
#define SHMCLOCK_ESCAPES_H

#include <assert.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define ESC_ENV "SHMCLOCK_REPORT"
#define ESC_MAGIC 0x31435345u /* "ESC1" */
#define ESC_SITES 24
#define ESC_OBJ 136

enum esc_kind { ESC_RDTSC = 1, ESC_RDTSCP = 2 };

struct esc_site {
	_Atomic uint32_t state; /* 0 free, 1 being filled, 2 ready */
	uint32_t kind;
	_Atomic uint64_t count;
	uint64_t off; /* offset in the file @obj (as in /proc/PID/maps) */
	char obj[ESC_OBJ];
};

struct esc_page {
	uint32_t magic;
	uint32_t size;
	_Atomic uint64_t total;    /* escapes counted */
	_Atomic uint64_t loader;   /* the dynamic loader's: emulated, not counted */
	_Atomic uint64_t unplaced; /* counted, with no site slot left to say where */
	struct esc_site site[ESC_SITES];
};
static_assert(sizeof(struct esc_page) <= 4096, "the report is one page");

static inline const char *esc_kind_name(uint32_t kind)
{
	return kind == ESC_RDTSCP ? "rdtscp" : "rdtsc";
}

/* The dynamic loader (ld-linux-x86-64.so.2, ld-musl-*.so.1). */
static inline bool esc_is_loader(const char *obj)
{
	const char *b = strrchr(obj, '/');

	b = b ? b + 1 : obj;
	return !strncmp(b, "ld-linux", 8) || !strncmp(b, "ld-musl", 7) || !strncmp(b, "ld.so", 5);
}

/*
 * Counts @n escapes of @kind at @obj + @off; the site's slot, -1 when none
 * was left. Lock-free: a slot is claimed by one compare-and-swap, filled,
 * then published (release; the acquire load pairs with it). A slot left
 * half-filled by a process killed meanwhile is skipped after a while.
 */
static inline int esc_record(struct esc_page *pg, uint32_t kind, const char *obj, uint64_t off,
			     uint64_t n)
{
	atomic_fetch_add_explicit(&pg->total, n, memory_order_relaxed);
	for (int i = 0; i < ESC_SITES; i++) {
		struct esc_site *s = &pg->site[i];
		uint32_t st = atomic_load_explicit(&s->state, memory_order_acquire);

		for (long spin = 0; st == 1 && spin < 1000000; spin++)
			st = atomic_load_explicit(&s->state, memory_order_acquire);
		if (st == 0) {
			uint32_t z = 0;

			if (atomic_compare_exchange_strong_explicit(&s->state, &z, 1,
								    memory_order_acquire,
								    memory_order_acquire)) {
				size_t len = strlen(obj);

				if (len >= ESC_OBJ)
					obj += len - (ESC_OBJ - 1); /* keep the name's end */
				s->kind = kind;
				s->off = off;
				memcpy(s->obj, obj, strlen(obj) + 1);
				atomic_fetch_add_explicit(&s->count, n, memory_order_relaxed);
				atomic_store_explicit(&s->state, 2, memory_order_release);
				return i;
			}
			i--; /* taken meanwhile: look at it again */
			continue;
		}
		if (st == 2 && s->kind == kind && s->off == off &&
		    !strncmp(s->obj, obj + (strlen(obj) >= ESC_OBJ ? strlen(obj) - (ESC_OBJ - 1) : 0),
			     ESC_OBJ)) {
			atomic_fetch_add_explicit(&s->count, n, memory_order_relaxed);
			return i;
		}
	}
	atomic_fetch_add_explicit(&pg->unplaced, n, memory_order_relaxed);
	return -1;
}

/* Past @n blank-separated fields of a /proc/PID/maps line, and the blanks
 * after them. */
static inline char *esc_skip_fields(char *p, int n)
{
	for (int f = 0; f < n && *p; f++) {
		while (*p == ' ')
			p++;
		while (*p && *p != ' ')
			p++;
	}
	while (*p == ' ')
		p++;
	return p;
}

/*
 * Where @addr is in a process, from its /proc/PID/maps opened at @fd, read
 * with @rd (a raw read in a signal handler): the mapped file (or "[vdso]",
 * "[anon]") into @obj and the offset in it into *@off. False if no mapping
 * holds @addr.
 */
static inline bool esc_where(int fd, long (*rd)(int fd, void *buf, unsigned long len),
			     uint64_t addr, char *obj, size_t objlen, uint64_t *off)
{
	char buf[1024];
	size_t have = 0;
	bool eof = false;

	for (;;) {
		char *nl, *p;
		uint64_t lo = 0, hi = 0, fo = 0;

		if (!eof && have < sizeof(buf)) {
			long n = rd(fd, buf + have, sizeof(buf) - have);

			if (n <= 0)
				eof = true;
			else
				have += (size_t)n;
		}
		nl = memchr(buf, '\n', have);
		if (!nl) {
			if (eof || have == sizeof(buf))
				return false; /* the end, or a line longer than the buffer */
			continue;
		}
		*nl = 0;
		p = buf;
#define ESC_HEX(v)                                                                         \
	for (; (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'); p++)                  \
		v = v * 16 + (uint64_t)(*p <= '9' ? *p - '0' : *p - 'a' + 10)
		ESC_HEX(lo);
		p += *p == '-';
		ESC_HEX(hi);
		if (addr >= lo && addr < hi) {
			p = esc_skip_fields(p, 1); /* the permissions */
			ESC_HEX(fo);
			p = esc_skip_fields(p, 2); /* device, inode */
			{
				const char *name = *p ? p : "[anon]";
				size_t n = strlen(name);

				if (n >= objlen)
					n = objlen - 1;
				memcpy(obj, name, n);
				obj[n] = 0;
			}
			*off = addr - lo + (*p == '[' ? 0 : fo);
			return true;
		}
#undef ESC_HEX
		have -= (size_t)(nl + 1 - buf);
		memmove(buf, nl + 1, have);
	}
}

#endif
