/* SPDX-License-Identifier: MIT */
/*
 * The vDSO's time entry points, redirected to the shim's readers, for the
 * programs that read the clock without libc: Go (its runtime finds
 * __vdso_clock_gettime in the vDSO itself and calls it from assembly) and C
 * that looks the symbol up (dlsym on "linux-vdso.so.1", or the vDSO's ELF
 * from getauxval(AT_SYSINFO_EHDR), as the kernel's parse_vdso.c does).
 *
 * How: the value of each time symbol in the vDSO's dynamic symbol table is
 * rewritten to point at the shim's function (a symbol's address is the
 * load offset plus its st_value, with wrap-around: every reader of the
 * table, Go's included, computes it so). The vDSO's code itself is left
 * as it was, so
 *   - the shim keeps calling the real functions (libc's pointers into the
 *     vDSO were taken by the dynamic linker before the shim was loaded,
 *     and the originals are kept here): a simulated read needs the real
 *     CLOCK_MONOTONIC, and an unsimulated clock (CPU time, or one left out
 *     of SHMCLOCK_CLOCKS) reads the real one at full speed;
 *   - nothing depends on the machine code of a kernel's vDSO (no
 *     instruction to decode or move), and it works on every architecture
 *     whose vDSO exports these names (x86-64: __vdso_*, arm64: __kernel_*).
 * What it cannot reach: a pointer into the vDSO taken before the shim's
 * set-up (only the dynamic linker's, for libc, whose entry points the
 * shim interposes anyway) and code that finds the functions by scanning
 * memory. The table sits in the vDSO's first, read-only page: it is made
 * writable for the few stores (a private, copy-on-write page of this
 * process only) and read-only again.
 *
 * The replacements run on whatever stack the caller has (Go calls the vDSO
 * on the g0 or signal stack, 32 KiB): they only read the clock, which
 * takes well under a kilobyte, never initialise, allocate or lock.
 */
#include "preload.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <unistd.h>

typedef int (*gettime_fn)(clockid_t, struct timespec *);
typedef int (*gettimeofday_fn)(struct timeval *, void *);
typedef time_t (*time_fn)(time_t *);
typedef int (*getres_fn)(clockid_t, struct timespec *);

/* The vDSO's own functions, before the rewrite (NULL: not exported). */
static gettime_fn v_gettime;
static gettimeofday_fn v_gettimeofday;
static time_fn v_time;
static getres_fn v_getres;

/* The clock is live and @id follows it; never initialises (the table is
 * rewritten only after the shim's set-up reached ST_SIM). */
static inline bool vdso_sim(clockid_t id)
{
	return sim_active() && (unsigned)id < 32 && (shim_mask & (1u << id));
}

static int vdso_clock_gettime(clockid_t id, struct timespec *ts)
{
	int64_t ns;

	if (vdso_sim(id) && sim_read(id, &ns)) {
		ns_to_ts(ns, ts);
		return 0;
	}
	return v_gettime(id, ts);
}

static int vdso_gettimeofday(struct timeval *tv, void *tz)
{
	struct timespec ts;
	int64_t ns;

	if (!vdso_sim(CLOCK_REALTIME) || !sim_read(CLOCK_REALTIME, &ns))
		return v_gettimeofday(tv, tz);
	if (tz)
		v_gettimeofday(NULL, tz);
	if (tv) {
		ns_to_ts(ns, &ts);
		tv->tv_sec = ts.tv_sec;
		tv->tv_usec = (suseconds_t)(ts.tv_nsec / 1000);
	}
	return 0;
}

/* A simulated clock is a nanosecond count, the coarse ones too (they read
 * it in full): 1 ns, as libc's clock_getres under the shim and the
 * supervisor say. */
static int vdso_clock_getres(clockid_t id, struct timespec *res)
{
	if (!vdso_sim(id))
		return v_getres(id, res);
	if (res) {
		res->tv_sec = 0;
		res->tv_nsec = 1;
	}
	return 0;
}

static time_t vdso_time(time_t *t)
{
	int64_t ns;
	time_t s;

	if (!vdso_sim(CLOCK_REALTIME) || !sim_read(CLOCK_REALTIME, &ns))
		return v_time(t);
	s = (time_t)(ns >= 0 ? ns / NS : (ns - NS + 1) / NS);
	if (t)
		*t = s;
	return s;
}

enum { F_GETTIME, F_GETTIMEOFDAY, F_TIME, F_GETRES };

static const struct {
	const char *name;
	int fn;
} names[] = {
	{ "__vdso_clock_gettime", F_GETTIME },    { "clock_gettime", F_GETTIME },
	{ "__kernel_clock_gettime", F_GETTIME },  { "__vdso_gettimeofday", F_GETTIMEOFDAY },
	{ "gettimeofday", F_GETTIMEOFDAY },       { "__kernel_gettimeofday", F_GETTIMEOFDAY },
	{ "__vdso_time", F_TIME },                { "time", F_TIME },
	{ "__vdso_clock_getres", F_GETRES },      { "clock_getres", F_GETRES },
	{ "__kernel_clock_getres", F_GETRES },
};

static void *replacement(int fn)
{
	void *p = NULL;

	switch (fn) {
	case F_GETTIME: {
		gettime_fn f = vdso_clock_gettime;
		memcpy(&p, &f, sizeof(p));
		break;
	}
	case F_GETTIMEOFDAY: {
		gettimeofday_fn f = vdso_gettimeofday;
		memcpy(&p, &f, sizeof(p));
		break;
	}
	case F_GETRES: {
		getres_fn f = vdso_clock_getres;
		memcpy(&p, &f, sizeof(p));
		break;
	}
	default: {
		time_fn f = vdso_time;
		memcpy(&p, &f, sizeof(p));
		break;
	}
	}
	return p;
}

static void keep_original(int fn, uintptr_t addr)
{
	void *p = (void *)addr;

	switch (fn) {
	case F_GETTIME:
		if (!v_gettime)
			memcpy(&v_gettime, &p, sizeof(p));
		break;
	case F_GETTIMEOFDAY:
		if (!v_gettimeofday)
			memcpy(&v_gettimeofday, &p, sizeof(p));
		break;
	case F_GETRES:
		if (!v_getres)
			memcpy(&v_getres, &p, sizeof(p));
		break;
	default:
		if (!v_time)
			memcpy(&v_time, &p, sizeof(p));
		break;
	}
}

/* The number of symbols in the table: DT_HASH says it (nchain); with only
 * DT_GNU_HASH, one past the last symbol a chain ends at. */
static size_t sym_count(const ElfW(Word) *hash, const uint32_t *gnu)
{
	uint32_t nbuckets, symoffset, bloom, max = 0;
	const uint32_t *buckets, *chain;

	if (hash)
		return hash[1];
	if (!gnu)
		return 0;
	nbuckets = gnu[0];
	symoffset = gnu[1];
	bloom = gnu[2];
	buckets = gnu + 4 + bloom * (sizeof(ElfW(Addr)) / 4);
	chain = buckets + nbuckets;
	for (uint32_t b = 0; b < nbuckets; b++)
		if (buckets[b] > max)
			max = buckets[b];
	if (max < symoffset)
		return symoffset;
	while (!(chain[max - symoffset] & 1))
		max++;
	return max + 1;
}

/* The vDSO's symbols and their load offset; false when there is no vDSO
 * or it is not what an ELF reader expects. */
static bool vdso_table(ElfW(Sym) **symtab, const char **strtab, size_t *nsyms, uintptr_t *off)
{
	uintptr_t base = getauxval(AT_SYSINFO_EHDR);
	const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)base;
	const ElfW(Phdr) *ph;
	const ElfW(Dyn) *dyn = NULL;
	const ElfW(Word) *hash = NULL;
	const uint32_t *gnu = NULL;
	bool have_load = false;

	if (!base || memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != (__ELF_NATIVE_CLASS == 64 ? ELFCLASS64 : ELFCLASS32))
		return false;
	ph = (const ElfW(Phdr) *)(base + eh->e_phoff);
	for (int i = 0; i < eh->e_phnum; i++) {
		if (ph[i].p_type == PT_LOAD && !have_load) {
			*off = base + ph[i].p_offset - ph[i].p_vaddr;
			have_load = true;
		} else if (ph[i].p_type == PT_DYNAMIC) {
			dyn = (const ElfW(Dyn) *)(base + ph[i].p_offset);
		}
	}
	if (!have_load || !dyn)
		return false;
	*symtab = NULL;
	*strtab = NULL;
	for (; dyn->d_tag != DT_NULL; dyn++) {
		uintptr_t p = *off + dyn->d_un.d_ptr;

		switch (dyn->d_tag) {
		case DT_SYMTAB:
			*symtab = (ElfW(Sym) *)p;
			break;
		case DT_STRTAB:
			*strtab = (const char *)p;
			break;
		case DT_HASH:
			hash = (const ElfW(Word) *)p;
			break;
		case DT_GNU_HASH:
			gnu = (const uint32_t *)p;
			break;
		}
	}
	*nsyms = sym_count(hash, gnu);
	return *symtab && *strtab && *nsyms;
}

/*
 * Rewrites one symbol's value. The page is made writable for the store
 * (keeping it executable: code may share the page); kernels that refuse
 * mprotect on the vDSO (Linux 6.18 answers EINVAL) take a write through
 * /proc/self/mem, as a debugger's breakpoint (a private copy of the page).
 */
static bool set_value(ElfW(Sym) *s, ElfW(Addr) value)
{
	long pg = sysconf(_SC_PAGESIZE);
	uintptr_t lo = (uintptr_t)&s->st_value & ~(uintptr_t)(pg - 1);
	uintptr_t hi = ((uintptr_t)(&s->st_value + 1) - 1) & ~(uintptr_t)(pg - 1);
	size_t len = hi - lo + (size_t)pg;
	ssize_t w;
	int fd;

	if (!mprotect((void *)lo, len, PROT_READ | PROT_WRITE | PROT_EXEC)) {
		s->st_value = value;
		mprotect((void *)lo, len, PROT_READ | PROT_EXEC);
		return true;
	}
	fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return false;
	w = pwrite(fd, &value, sizeof(value), (off_t)(uintptr_t)&s->st_value);
	shim_real_close(fd);
	if (w != (ssize_t)sizeof(value)) {
		errno = w < 0 ? errno : EIO;
		return false;
	}
	return true;
}

static _Atomic bool redirected;

static bool shim_vdso_is_ours(const void *addr)
{
	return addr && (addr == replacement(F_GETTIME) || addr == replacement(F_GETTIMEOFDAY) ||
			addr == replacement(F_TIME));
}

static void *shim_vdso_original(const void *addr)
{
	void *p = NULL;

	if (addr == replacement(F_GETTIME))
		memcpy(&p, &v_gettime, sizeof(p));
	else if (addr == replacement(F_GETTIMEOFDAY))
		memcpy(&p, &v_gettimeofday, sizeof(p));
	else if (addr == replacement(F_TIME))
		memcpy(&p, &v_time, sizeof(p));
	return p;
}

int shim_vdso_redirect(void)
{
	ElfW(Sym) *symtab;
	const char *strtab;
	size_t nsyms;
	uintptr_t off = 0;
	int done = 0;

	if (atomic_exchange_explicit(&redirected, true, memory_order_relaxed))
		return 0;
	if (!vdso_table(&symtab, &strtab, &nsyms, &off))
		return -ENOENT;
	/* First every original, then the rewrite: a replacement never runs
	 * before the function it falls back on is known. */
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 1; i < nsyms; i++) {
			ElfW(Sym) *s = &symtab[i];

			if (s->st_shndx == SHN_UNDEF || (s->st_info & 0xf) != STT_FUNC)
				continue;
			for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
				if (strcmp(strtab + s->st_name, names[k].name))
					continue;
				if (pass == 0) {
					keep_original(names[k].fn, off + s->st_value);
				} else if (set_value(s, (ElfW(Addr))((uintptr_t)replacement(names[k].fn) - off))) {
					done++;
				} else {
					return -errno;
				}
				break;
			}
		}
	}
	/* The library reads the real CLOCK_MONOTONIC through the vDSO; it
	 * must keep the original (it looked it up at load time, and may look
	 * again: the dlsym wrapper below answers with the original too). */
	if (v_gettime)
		shmclock__gettime = v_gettime;
	return done;
}

/*
 * The shim's own dlsym (its copy of libshmclock looks the vDSO's
 * clock_gettime up, maybe after the rewrite, by constructor order): never
 * one of the replacements, which would read the simulated clock to compute
 * the simulated clock. Linked with --wrap=dlsym, for the shim's objects
 * only; the program's dlsym is untouched.
 */
void *__real_dlsym(void *h, const char *sym);
void *__wrap_dlsym(void *h, const char *sym);
void *__wrap_dlsym(void *h, const char *sym)
{
	void *p = __real_dlsym(h, sym);

	return shim_vdso_is_ours(p) ? shim_vdso_original(p) : p;
}
