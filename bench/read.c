/* SPDX-License-Identifier: MIT */
/*
 * read: the cost of one read of the time, for shmclock and what users would
 * pick instead, in the same run:
 *
 *   clock_gettime(CLOCK_MONOTONIC)  the floor (the baseline of every ratio)
 *   shmclock_now                    the library call
 *   shmclock_now (inline)           the opt-in inline fast path
 *   inline path, local call, ...    the same behind a call of this file's,
 *                                   the value through memory or in a
 *                                   register (what the exported call costs)
 *   preload shim clock_gettime      libshmclock-preload.so's clock_gettime
 *   libfaketime clock_gettime       Debian's libfaketime, FAKETIME="+0 x2"
 *   AWSIM-style mutex source        a pthread mutex around "read the clock,
 *                                   scale, add the delta" (AWSIM's TimeSource)
 *
 * Phases: idle writer; threads on every core at once; and a writer thread
 * committing 1k, 10k and 100k changes per second (scale changes, which are
 * continuous, so no jump handling muddies the figure). Reads are timed in
 * batches so that the timer does not dominate, and the contenders take
 * turns batch by batch so that a shared machine's noise falls on all alike.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#include <shmclock/static/shmclock.h>

typedef int64_t (*batch_fn)(void *ctx, int n);
typedef int (*gettime_fn)(clockid_t, struct timespec *);

struct contender {
	const char *name;
	batch_fn fn;
	void *ctx;
};

/* ------------------------------------------------------------ contenders */

static int64_t batch_clock_gettime(void *ctx, int n)
{
	struct timespec ts;
	int64_t acc = 0;

	(void)ctx;
	for (int i = 0; i < n; i++) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		acc += ts.tv_nsec;
	}
	return acc;
}

static int64_t batch_shmclock_now(void *ctx, int n)
{
	int64_t acc = 0, t;

	for (int i = 0; i < n; i++) {
		shmclock_now(ctx, &t);
		acc += t;
	}
	return acc;
}

static int64_t batch_shmclock_inline(void *ctx, int n)
{
	int64_t acc = 0, t;

	for (int i = 0; i < n; i++) {
		shmclock_static_now(ctx, &t);
		acc += t;
	}
	return acc;
}

/*
 * The same fast path behind a call of this file's (no PLT, no GOT), the
 * value once through memory as shmclock_now() returns it, once in a
 * register: what the exported call's two costs are on this CPU (the call
 * and its frame; the out-parameter's store the caller loads back), as
 * against the inline path. Diagnostics, printed with the targets.
 */
static __attribute__((noinline)) int local_now_out(void *ctx, int64_t *t)
{
	if (__builtin_expect(shmclock_static_read(ctx, shmclock_static_mono, NULL, t, NULL, NULL), 1))
		return 0;
	return shmclock_now(ctx, t);
}

static __attribute__((noinline)) int64_t local_now_reg(void *ctx)
{
	int64_t t;

	if (__builtin_expect(shmclock_static_read(ctx, shmclock_static_mono, NULL, &t, NULL, NULL), 1))
		return t;
	shmclock_now(ctx, &t);
	return t;
}

static int64_t batch_local_out(void *ctx, int n)
{
	int64_t acc = 0, t;

	for (int i = 0; i < n; i++) {
		local_now_out(ctx, &t);
		acc += t;
	}
	return acc;
}

static int64_t batch_local_reg(void *ctx, int n)
{
	int64_t acc = 0;

	for (int i = 0; i < n; i++)
		acc += local_now_reg(ctx);
	return acc;
}

/* A clock_gettime from a preloaded library (the shim, libfaketime). */
static int64_t batch_foreign_gettime(void *ctx, int n)
{
	gettime_fn f = *(gettime_fn *)ctx;
	struct timespec ts;
	int64_t acc = 0;

	for (int i = 0; i < n; i++) {
		f(CLOCK_MONOTONIC, &ts);
		acc += ts.tv_nsec;
	}
	return acc;
}

/* AWSIM's TimeSource, in C: one lock around read, scale, add. */
struct awsim {
	pthread_mutex_t m;
	int64_t sim_base, mono_base;
	double scale;
};

static int64_t awsim_now(struct awsim *a)
{
	struct timespec ts;
	int64_t v;

	pthread_mutex_lock(&a->m);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	v = a->sim_base +
	    (int64_t)((double)((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec - a->mono_base) *
		      a->scale);
	pthread_mutex_unlock(&a->m);
	return v;
}

static void awsim_set_scale(struct awsim *a, double scale)
{
	int64_t mono = bench_mono_ns();

	pthread_mutex_lock(&a->m);
	a->sim_base += (int64_t)((double)(mono - a->mono_base) * a->scale);
	a->mono_base = mono;
	a->scale = scale;
	pthread_mutex_unlock(&a->m);
}

static int64_t batch_awsim(void *ctx, int n)
{
	int64_t acc = 0;

	for (int i = 0; i < n; i++)
		acc += awsim_now(ctx);
	return acc;
}

/* clock_gettime of a library dlopen()ed privately (it interposes nothing
 * here; we call its function directly). NULL, with a note, if absent. */
static gettime_fn foreign_gettime(const char *path, const char *what)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	void *f = h ? dlsym(h, "clock_gettime") : NULL;
	gettime_fn fn;

	if (!f) {
		printf("  (%s not measured: %s)\n", what, dlerror());
		return NULL;
	}
	memcpy(&fn, &f, sizeof(fn));
	return fn;
}

/* ------------------------------------------------------------ measuring */

struct run {
	const struct contender *cs;
	int nc;
	long samples;
	int batch;
	double **out; /* [nc][samples] ns per read */
};

static void measure(struct run *r)
{
	for (int k = 0; k < r->nc; k++)
		bench_sink += r->cs[k].fn(r->cs[k].ctx, 5000); /* warm up */
	for (long i = 0; i < r->samples; i++) {
		for (int k = 0; k < r->nc; k++) {
			int64_t t0 = bench_mono_ns();

			bench_sink += r->cs[k].fn(r->cs[k].ctx, r->batch);
			r->out[k][i] = (double)(bench_mono_ns() - t0) / r->batch;
		}
	}
}

static void *measure_thread(void *p)
{
	measure(p);
	return NULL;
}

static double **alloc_samples(int nc, long n)
{
	double **s = calloc((size_t)nc, sizeof(*s));

	for (int k = 0; s && k < nc; k++) {
		s[k] = malloc((size_t)n * sizeof(double));
		if (!s[k]) {
			fprintf(stderr, "shmclock-bench: out of memory\n");
			exit(1);
		}
	}
	return s;
}

/* A writer thread committing @rate changes per second to both the shared
 * clock and the AWSIM source, until stopped. */
struct writer {
	shmclock_writer_t *w;
	struct awsim *a;
	double rate;
	_Atomic bool stop;
	uint64_t commits;
	double seconds;
};

static void *writer_main(void *p)
{
	struct writer *wr = p;
	int64_t period = (int64_t)(1e9 / wr->rate), start = bench_mono_ns(), next = start + period;

	while (!atomic_load_explicit(&wr->stop, memory_order_relaxed)) {
		double s = (wr->commits & 1) ? 1.0 : 1.000001;
		int64_t now = bench_mono_ns();

		if (period >= 50000) {
			struct timespec ts = { (time_t)(next / 1000000000), (long)(next % 1000000000) };

			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
		} else {
			while ((now = bench_mono_ns()) < next)
				; /* finer than the timer's slack: spin */
		}
		shmclock_writer_set_scale(wr->w, s);
		awsim_set_scale(wr->a, s);
		wr->commits++;
		next += period;
		if (now - next > 100 * period)
			next = now + period; /* fell far behind: do not burst */
	}
	wr->seconds = (double)(bench_mono_ns() - start) / 1e9;
	return NULL;
}

/* Prints and records one phase; @st receives each contender's stats. */
static void report(cJSON *results, const char *phase, const struct contender *cs, int nc,
		   double **s, long n, struct bench_stats *st)
{
	for (int k = 0; k < nc; k++) {
		cJSON *o = cJSON_CreateObject();

		st[k] = bench_summarise(s[k], n);
		bench_row(cs[k].name, &st[k], st[0].p50, 1);
		cJSON_AddStringToObject(o, "phase", phase);
		cJSON_AddStringToObject(o, "name", cs[k].name);
		bench_json_stats(o, &st[k]);
		cJSON_AddNumberToObject(o, "ratio_p50", st[k].p50 / st[0].p50);
		cJSON_AddItemToObject(o, "cdf", bench_json_cdf(s[k], n));
		cJSON_AddItemToArray(results, o);
	}
}

static void target(cJSON *t, const char *what, double value, double limit, const char *unit)
{
	cJSON *o = cJSON_CreateObject();
	bool met = value <= limit;

	printf("  %-58s %8.3f%s  target <= %g%s  %s\n", what, value, unit, limit, unit,
	       met ? "met" : "NOT MET");
	cJSON_AddStringToObject(o, "what", what);
	cJSON_AddNumberToObject(o, "value", value);
	cJSON_AddNumberToObject(o, "limit", limit);
	cJSON_AddBoolToObject(o, "met", met);
	cJSON_AddItemToArray(t, o);
}

int bench_read(const struct bench_opts *o, cJSON *out)
{
	long samples = o->samples ? o->samples : o->quick ? 20000 : 200000;
	int batch = o->batch ? o->batch : 50, ncpu = bench_ncpu();
	static const double rates[] = { 1000, 10000, 100000 };
	struct awsim aw = { .m = PTHREAD_MUTEX_INITIALIZER, .scale = 1.0 };
	char name[64], path[4096], shim_name[80];
	gettime_fn shim = NULL, fake = NULL;
	struct contender cs[10];
	struct bench_stats st[10], idle_now, busy_now = { 0 };
	shmclock_writer_t *w;
	shmclock_t *clk;
	cJSON *results = cJSON_AddArrayToObject(out, "results");
	cJSON *targets = cJSON_AddArrayToObject(out, "targets");
	double shim_ratio = 0, idle_ratio = 0, call_ratio = 0, fake_p50 = 0, shim_p50 = 0;
	double local_out_ratio = 0, local_reg_ratio = 0;
	double held_ratio = 0;
	int nc = 0;

	if (samples < 100 || batch < 1) {
		fprintf(stderr, "shmclock-bench: --samples must be >= 100 and --batch >= 1\n");
		return 2;
	}
	if (bench_clock_open(name, sizeof(name), &w, &clk))
		return 1;
	aw.mono_base = bench_mono_ns();
	cJSON_AddNumberToObject(out, "samples", (double)samples);
	cJSON_AddNumberToObject(out, "batch", batch);
	printf("read: ns per read, %ld batches of %d reads per contender%s\n", samples, batch,
	       o->quick ? " (quick)" : "");

	/* The shim follows our private clock; libfaketime runs at x2. */
	snprintf(shim_name, sizeof(shim_name), "%s", name);
	setenv("SHMCLOCK_NAME", shim_name, 1);
	setenv("SHMCLOCK_CLOCKS", "monotonic", 1);
	setenv("SHMCLOCK_QUIET", "1", 1);
	shim = foreign_gettime(bench_find("SHMCLOCK_PRELOAD", "readers", "libshmclock-preload.so",
					  SHMCLOCK_PRELOAD_INSTALLED, path, sizeof(path)),
			       "preload shim");
	setenv("FAKETIME", "+0 x2", 1);
	fake = foreign_gettime(getenv("LIBFAKETIME") ? getenv("LIBFAKETIME")
						     : "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
			       "libfaketime (apt-get install libfaketime)");

	cs[nc++] = (struct contender){ "clock_gettime(MONOTONIC)", batch_clock_gettime, NULL };
	cs[nc++] = (struct contender){ "shmclock_now", batch_shmclock_now, clk };
	cs[nc++] = (struct contender){ "shmclock_now (inline)", batch_shmclock_inline, clk };
	cs[nc++] = (struct contender){ "inline path, local call, out-param", batch_local_out, clk };
	cs[nc++] = (struct contender){ "inline path, local call, in register", batch_local_reg, clk };
	if (shim)
		cs[nc++] = (struct contender){ "preload shim clock_gettime", batch_foreign_gettime,
					       &shim };
	if (fake)
		cs[nc++] = (struct contender){ "libfaketime clock_gettime (x2)",
					       batch_foreign_gettime, &fake };
	cs[nc++] = (struct contender){ "AWSIM-style mutex source", batch_awsim, &aw };

	/* Phase 1: one reader, writer idle. */
	{
		struct run r = { cs, nc, samples, batch, alloc_samples(nc, samples) };

		measure(&r);
		printf("\n idle writer, 1 reader thread\n");
		bench_header("ns per read");
		report(results, "idle", cs, nc, r.out, samples, st);
		idle_now = st[1];
		idle_ratio = st[1].p50 / st[0].p50;
		call_ratio = st[1].p50 / st[2].p50;
		local_out_ratio = st[3].p50 / st[2].p50;
		local_reg_ratio = st[4].p50 / st[2].p50;
		for (int k = 0; k < nc; k++) {
			if (cs[k].fn == batch_foreign_gettime && cs[k].ctx == &shim) {
				shim_ratio = st[k].p50 / st[0].p50;
				shim_p50 = st[k].p50;
			}
			if (cs[k].fn == batch_foreign_gettime && cs[k].ctx == &fake)
				fake_p50 = st[k].p50;
			free(r.out[k]);
		}
		free(r.out);
	}

	/* Phase 1b: a follower's clock between hosts, whose update is open
	 * ahead (freeze_at: the end of its lease, or a change it waits for):
	 * every read takes the checked path (the record's seq is odd). */
	{
		struct contender hc[3] = {
			cs[0],
			{ "shmclock_now, update open ahead", batch_shmclock_now, clk },
			{ "preload shim, update open ahead", batch_foreign_gettime, &shim },
		};
		int hn = shim ? 3 : 2, fr;
		struct run r = { hc, hn, samples, batch, alloc_samples(3, samples) };

		fr = shmclock_writer_freeze_at(w, bench_mono_ns() + SHMCLOCK_FREEZE_AHEAD_MAX_NS - 500000000);
		if (fr == 0) {
			measure(&r);
			shmclock_writer_withdraw(w);
			printf("\n idle writer, its update open ahead (a follower between hosts), 1 reader thread\n");
			bench_header("ns per read");
			report(results, "update open ahead", hc, hn, r.out, samples, st);
			held_ratio = st[1].p50 / st[0].p50;
		} else {
			fprintf(stderr, "shmclock-bench: freeze_at: %s\n", shmclock_strerror(fr));
		}
		for (int k = 0; k < 3; k++)
			free(r.out[k]);
		free(r.out);
	}

	/* Phase 2: a reader thread on every core, all at once. */
	{
		struct contender mc[3] = { cs[0], cs[1], cs[nc - 1] };
		long per = samples / 4;
		struct run *rs = calloc((size_t)ncpu, sizeof(*rs));
		pthread_t *th = calloc((size_t)ncpu, sizeof(*th));
		double **merged = alloc_samples(3, per * ncpu);
		char phase[64];

		for (int t = 0; t < ncpu; t++) {
			rs[t] = (struct run){ mc, 3, per, batch, alloc_samples(3, per) };
			pthread_create(&th[t], NULL, measure_thread, &rs[t]);
		}
		for (int t = 0; t < ncpu; t++) {
			pthread_join(th[t], NULL);
			for (int k = 0; k < 3; k++) {
				memcpy(merged[k] + (long)t * per, rs[t].out[k], (size_t)per * sizeof(double));
				free(rs[t].out[k]);
			}
			free(rs[t].out);
		}
		snprintf(phase, sizeof(phase), "%d threads (every core)", ncpu);
		printf("\n idle writer, %s\n", phase);
		bench_header("ns per read");
		report(results, phase, mc, 3, merged, per * ncpu, st);
		for (int k = 0; k < 3; k++)
			free(merged[k]);
		free(merged);
		free(rs);
		free(th);
	}

	/* Phase 3: the writer committing at 1k, 10k, 100k changes/s. */
	for (size_t i = 0; i < sizeof(rates) / sizeof(rates[0]); i++) {
		struct contender mc[3] = { cs[0], cs[1], cs[nc - 1] };
		long per = samples / 2;
		struct run r = { mc, 3, per, batch, alloc_samples(3, per) };
		struct writer wr = { .w = w, .a = &aw, .rate = rates[i] };
		pthread_t th;
		char phase[64];

		pthread_create(&th, NULL, writer_main, &wr);
		measure(&r);
		atomic_store(&wr.stop, true);
		pthread_join(th, NULL);
		snprintf(phase, sizeof(phase), "writer %gk changes/s", rates[i] / 1000);
		printf("\n %s (achieved %.0f/s)\n", phase, (double)wr.commits / wr.seconds);
		bench_header("ns per read");
		report(results, phase, mc, 3, r.out, per, st);
		busy_now = st[1];
		for (int k = 0; k < 3; k++)
			free(r.out[k]);
		free(r.out);
	}

	printf("\n targets\n");
	target(targets, "shmclock_now p50 / clock_gettime p50 (idle)", idle_ratio, 1.15, "x");
	/* The exported call against the same fast path inlined: what the call
	 * itself costs (the call, the value's trip through memory). */
	target(targets, "shmclock_now p50 / inline fast path p50 (idle)", call_ratio, 1.02, "x");
	/* What of that the call is, and what the value's trip through memory:
	 * the same fast path behind a call of this program's own. */
	printf("  %-58s %8.3fx\n", "  of which: a local call, out-param / inline p50", local_out_ratio);
	printf("  %-58s %8.3fx\n", "  of which: a local call, in a register / inline p50", local_reg_ratio);
	cJSON_AddNumberToObject(out, "local_call_out_vs_inline_p50", local_out_ratio);
	cJSON_AddNumberToObject(out, "local_call_reg_vs_inline_p50", local_reg_ratio);
	target(targets, "shmclock_now p99 at 100k changes/s / idle p99", busy_now.p99 / idle_now.p99,
	       2.0, "x");
	if (held_ratio > 0) {
		/* What a follower's readers pay for the bound on their time. */
		printf("  %-58s %8.3fx\n", "shmclock_now p50, update open ahead / clock_gettime p50",
		       held_ratio);
		cJSON_AddNumberToObject(out, "open_ahead_vs_clock_gettime_p50", held_ratio);
	}
	if (shim) {
		target(targets, "preload shim clock_gettime p50 / clock_gettime p50", shim_ratio, 1.3,
		       "x");
		if (fake) {
			printf("  %-58s %8.3fx  (libfaketime %.1f ns, shim %.1f ns)\n",
			       "preload shim p50 / libfaketime p50", shim_p50 / fake_p50, fake_p50,
			       shim_p50);
			cJSON_AddNumberToObject(out, "shim_vs_libfaketime_p50", shim_p50 / fake_p50);
		}
	}
	bench_clock_close(name, w, clk);
	return 0;
}
