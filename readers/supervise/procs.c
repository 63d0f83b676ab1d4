/* SPDX-License-Identifier: MIT */
/*
 * The supervisor's view of the traced tree: the tracee's memory, its
 * threads, which processes are static (and whether they carry the shim),
 * and the vDSO hidden from a static program at its exec.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <dirent.h>
#include <elf.h>
#include "supervise.h"
#include "sv.h"

#if defined(__x86_64__)

/* The tracer's threads (sv_find). */
static struct thr *thr;
static size_t nthr;

struct thr *sv_find(pid_t tid, bool add)
{
	struct thr *free_slot = NULL;

	for (size_t i = 0; i < nthr; i++) {
		if (thr[i].used && thr[i].tid == tid)
			return &thr[i];
		if (!thr[i].used && !free_slot)
			free_slot = &thr[i];
	}
	if (!add)
		return NULL;
	if (!free_slot) {
		struct thr *n = realloc(thr, (nthr * 2 + 16) * sizeof(*thr));

		if (!n)
			return NULL;
		memset(n + nthr, 0, (nthr + 16) * sizeof(*thr));
		thr = n;
		free_slot = &thr[nthr];
		nthr = nthr * 2 + 16;
	}
	memset(free_slot, 0, sizeof(*free_slot));
	free_slot->used = true;
	free_slot->tid = tid;
	return free_slot;
}


bool sv_peek(pid_t pid, uintptr_t addr, void *buf, size_t len)
{
	struct iovec l = { buf, len }, r = { (void *)addr, len };

	return process_vm_readv(pid, &l, 1, &r, 1, 0) == (ssize_t)len;
}

/* Through /proc/PID/mem when process_vm_writev cannot (a read-only page). */
bool sv_poke(pid_t pid, uintptr_t addr, const void *buf, size_t len)
{
	struct iovec l = { (void *)buf, len }, r = { (void *)addr, len };
	char path[64];
	ssize_t w;
	int fd;

	if (process_vm_writev(pid, &l, 1, &r, 1, 0) == (ssize_t)len)
		return true;
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return false;
	w = pwrite(fd, buf, len, (off_t)addr);
	close(fd);
	return w == (ssize_t)len;
}


bool supervise_elf_static(int fd)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	bool interp = false;

	if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(ph))
		return false;
	for (unsigned i = 0; i < eh.e_phnum && !interp; i++) {
		if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))) !=
		    (ssize_t)sizeof(ph))
			break;
		interp = ph.p_type == PT_INTERP;
	}
	return !interp;
}

static bool is_static_exe(pid_t pid)
{
	char path[64];
	bool st;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	st = supervise_elf_static(fd);
	close(fd);
	return st;
}

/* Whether process @pid's environment preloads the shim (LD_PRELOAD names
 * libshmclock-preload): a dynamic program that has it answers its own
 * calls. */
static bool env_has_shim(pid_t pid)
{
	char path[64], *buf;
	size_t cap = 1 << 16, len = 0;
	bool found = false;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	buf = malloc(cap + 1);
	while (buf && len < cap && (n = read(fd, buf + len, cap - len)) > 0)
		len += (size_t)n;
	close(fd);
	if (!buf)
		return false;
	buf[len] = 0;
	for (size_t i = 0; i < len && !found; i += strlen(buf + i) + 1)
		found = !strncmp(buf + i, "LD_PRELOAD=", 11) &&
			strstr(buf + i, "libshmclock-preload") != NULL;
	free(buf);
	return found;
}

/* Supervised or not, by process (the thread group): a static program, or a
 * dynamic one that does not preload the shim (its environment was
 * cleared); asked at its first time call after an exec. */
struct proc {
	pid_t tgid;
	int st; /* 0 unknown, 1 static, 2 dynamic */
};
static struct proc procs[256];

pid_t sv_tgid_of(pid_t tid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return tid;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return tid;
	buf[n] = 0;
	p = strstr(buf, "\nTgid:");
	return p ? (pid_t)atoi(p + 6) : tid;
}

/* The tracer and the listener both ask. */
static pthread_mutex_t procs_lock = PTHREAD_MUTEX_INITIALIZER;

bool sv_proc_static_tgid(pid_t tgid)
{
	struct proc *slot = &procs[(unsigned)tgid % 256];
	bool st;

	pthread_mutex_lock(&procs_lock);
	if (slot->tgid != tgid || !slot->st) {
		slot->tgid = tgid;
		slot->st = is_static_exe(tgid) || !env_has_shim(tgid) ? 1 : 2;
	}
	st = slot->st == 1;
	pthread_mutex_unlock(&procs_lock);
	return st;
}

bool sv_proc_static(pid_t tid)
{
	return sv_proc_static_tgid(sv_tgid_of(tid));
}

void sv_proc_forget(pid_t tgid)
{
	struct proc *slot = &procs[(unsigned)tgid % 256];

	pthread_mutex_lock(&procs_lock);
	if (slot->tgid == tgid)
		slot->st = 0;
	pthread_mutex_unlock(&procs_lock);
}

/* The AT_SYSINFO_EHDR entry of a program just exec'd becomes AT_IGNORE. */
void sv_hide_vdso(pid_t pid)
{
	struct user_regs_struct r;
	uint64_t w[4096];
	size_t i, n, got = 0;

	if (ptrace(PTRACE_GETREGS, pid, NULL, &r))
		return;
	/* argc, argv..., NULL, envp..., NULL, auxv pairs: what lies between
	 * the stack pointer and the end of the stack, page by page up to 32
	 * KiB. Few bytes with a small environment (a container's), and how
	 * few depends on the stack's random offset in its page: asked for
	 * all at once, a short stack read nothing, and the vDSO stayed. */
	while (got < sizeof(w)) {
		size_t chunk = 4096 - ((r.rsp + got) & 4095);

		if (chunk > sizeof(w) - got)
			chunk = sizeof(w) - got;
		if (!sv_peek(pid, r.rsp + got, (char *)w + got, chunk))
			break;
		got += chunk;
	}
	n = got / sizeof(w[0]);
	if (n < 4 || w[0] > n)
		return;
	i = 1 + w[0] + 1;
	while (i < n && w[i])
		i++;
	for (i++; i + 1 < n && w[i] != AT_NULL; i += 2) {
		if (w[i] == AT_SYSINFO_EHDR) {
			uint64_t ign = AT_IGNORE;

			sv_poke(pid, r.rsp + i * sizeof(w[0]), &ign, sizeof(ign));
			return;
		}
	}
}

#endif
