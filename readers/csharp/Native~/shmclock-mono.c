/* SPDX-License-Identifier: MIT */
/*
 * libshmclock-mono.so: Clock.Now() under Mono without the P/Invoke's GC
 * transition. Shmclock.dll calls shmclock_mono_register() once, by an
 * ordinary P/Invoke; when the process runs on a Mono runtime that exports
 * mono_dangerous_add_raw_internal_call, it registers the three reads below
 * as raw internal calls of Shmclock.RawNative, and C# calls them as
 * [MethodImpl(InternalCall)] methods.
 *
 * Why: under Mono's default hybrid thread suspension every P/Invoke leaves
 * GC-unsafe mode for a GC-safe region and comes back (about 40 ns, more than
 * the read itself). A raw internal call is called like the runtime's own
 * (Stopwatch.GetTimestamp is one): no transition, no wrapper that checks for
 * exceptions. In exchange the function runs in GC-unsafe mode: under hybrid
 * suspension a collection suspends the thread with a signal wherever it is,
 * as it does for all native code under preemptive suspension; under full
 * cooperative suspension a collection waits until it returns. So it must not
 * block, must not call back into managed code, and must not touch managed
 * objects. shmclock_now and its siblings qualify on a handle opened with
 * SHMCLOCK_OPEN_NO_CALLBACKS, and only there: such a handle never runs jump
 * callbacks (which call into C#) and never waits for another thread's
 * delivery; a writer stuck mid-update holds a read at most SHMCLOCK_STUCK_NS
 * before -EAGAIN. The C# side passes only such handles, and only pointers
 * to its stack for the result.
 *
 * Nothing of the protocol is here: each function is one call of the library.
 * Elsewhere (Unity's IL2CPP, .NET) the symbol is absent, registration
 * returns 0, and Shmclock.dll reads by P/Invoke.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

#include <shmclock/shmclock.h>

#define SHMCLOCK_MONO_EXPORT __attribute__((visibility("default")))

typedef void (*add_icall_fn)(const char *name, const void *method);
typedef int (*read_fn)(shmclock_t *clk, int64_t *ns);

SHMCLOCK_MONO_EXPORT int shmclock_mono_register(void);

static int raw_now(shmclock_t *clk, int64_t *ns)
{
	return shmclock_now(clk, ns);
}

static int raw_now_unix(shmclock_t *clk, int64_t *ns)
{
	return shmclock_now_unix(clk, ns);
}

static int raw_now_monotonic(shmclock_t *clk, int64_t *ns)
{
	return shmclock_now_monotonic(clk, ns);
}

/* The runtime's registration function: in the executable (mono, which
 * exports its API), else in a runtime library the process has loaded
 * (embedders such as Unity's editor and player load it themselves). */
static add_icall_fn find_add_raw(void)
{
	add_icall_fn fn = NULL;
	static const char *const libs[] = { "libmonosgen-2.0.so.1", "libmonosgen-2.0.so",
					    "libmonobdwgc-2.0.so", "libmono-2.0.so.1" };
	void *f = dlsym(RTLD_DEFAULT, "mono_dangerous_add_raw_internal_call");

	for (unsigned i = 0; !f && i < sizeof(libs) / sizeof(libs[0]); i++) {
		/* RTLD_NOLOAD: only a runtime already in the process. */
		void *h = dlopen(libs[i], RTLD_LAZY | RTLD_NOLOAD);

		if (h) {
			f = dlsym(h, "mono_dangerous_add_raw_internal_call");
			dlclose(h); /* the runtime's own reference keeps it */
		}
	}
	/* (ISO C has no cast between object and function pointers: POSIX
	 * guarantees they have the same representation.) */
	if (f)
		memcpy(&fn, &f, sizeof(fn));
	return fn;
}

/* The runtime takes the function as a data pointer (see above). */
static const void *code(read_fn fn)
{
	const void *p;

	memcpy(&p, &fn, sizeof(p));
	return p;
}

/* 1 when the raw internal calls are registered, 0 when this is no Mono
 * runtime (or one without raw internal calls). Called once, before any
 * method that calls them is compiled (RawNative's static constructor). */
SHMCLOCK_MONO_EXPORT int shmclock_mono_register(void)
{
	add_icall_fn add = find_add_raw();

	if (!add)
		return 0;
	add("Shmclock.RawNative::Now", code(raw_now));
	add("Shmclock.RawNative::NowUnix", code(raw_now_unix));
	add("Shmclock.RawNative::NowMonotonic", code(raw_now_monotonic));
	return 1;
}
