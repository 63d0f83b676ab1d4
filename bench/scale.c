/* SPDX-License-Identifier: MIT */
/*
 * scale: per-read cost with 1, 2, 4, 8, 16 and 32 readers at once, as
 * processes and as threads; more readers than cores on purpose. Every
 * reader alternates the contenders batch by batch (clock_gettime, the
 * baseline; shmclock_now; and, for threads, the AWSIM-style mutex source,
 * which is in-process by nature). Readers write nothing shared while they
 * read, so shmclock's cost should stay flat; the mutex's cannot.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#define MAXR 32
#define NCONT 3

struct shared {
	_Atomic int ready;
	_Atomic int go;
};

struct scale_run {
	struct shared *sh;
	shmclock_t *clk;
	pthread_mutex_t *mutex; /* NULL: processes, no mutex contender */
	int64_t *aw_base;
	long per;
	int batch;
	double *out; /* [NCONT][readers][per] */
	int readers;
	int index;
};

static int64_t read_gettime(struct scale_run *r, int n)
{
	struct timespec ts;
	int64_t acc = 0;

	(void)r;
	for (int i = 0; i < n; i++) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		acc += ts.tv_nsec;
	}
	return acc;
}

static int64_t read_shmclock(struct scale_run *r, int n)
{
	int64_t acc = 0, t;

	for (int i = 0; i < n; i++) {
		shmclock_now(r->clk, &t);
		acc += t;
	}
	return acc;
}

static int64_t read_mutex(struct scale_run *r, int n)
{
	struct timespec ts;
	int64_t acc = 0;

	for (int i = 0; i < n; i++) {
		pthread_mutex_lock(r->mutex);
		clock_gettime(CLOCK_MONOTONIC, &ts);
		acc += *r->aw_base + (int64_t)((double)ts.tv_nsec * 1.0);
		pthread_mutex_unlock(r->mutex);
	}
	return acc;
}

static void reader(struct scale_run *r)
{
	int64_t (*fns[NCONT])(struct scale_run *, int) = { read_gettime, read_shmclock, read_mutex };
	int nc = r->mutex ? 3 : 2;

	atomic_fetch_add(&r->sh->ready, 1);
	while (!atomic_load_explicit(&r->sh->go, memory_order_acquire))
		sched_yield();
	for (long i = 0; i < r->per; i++) {
		for (int k = 0; k < nc; k++) {
			int64_t t0 = bench_mono_ns();

			bench_sink += fns[k](r, r->batch);
			r->out[((long)k * r->readers + r->index) * r->per + i] =
				(double)(bench_mono_ns() - t0) / r->batch;
		}
	}
}

static void *reader_thread(void *p)
{
	reader(p);
	return NULL;
}

static const char *names[NCONT] = { "clock_gettime", "shmclock_now", "AWSIM mutex" };

int bench_scale(const struct bench_opts *o, cJSON *out)
{
	static const int counts[] = { 1, 2, 4, 8, 16, 32 };
	long per = o->samples ? o->samples : o->quick ? 1000 : 10000;
	int batch = o->batch ? o->batch : 50;
	cJSON *results = cJSON_AddArrayToObject(out, "results");
	cJSON *flat = cJSON_AddObjectToObject(out, "flatness");
	pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
	int64_t aw_base = 0;
	double first_p50[2][NCONT] = { { 0 } }, last_p50[2][NCONT] = { { 0 } };
	char name[64];
	shmclock_writer_t *w;
	shmclock_t *clk;

	if (bench_clock_open(name, sizeof(name), &w, &clk))
		return 1;
	cJSON_AddNumberToObject(out, "batches_per_reader", (double)per);
	cJSON_AddNumberToObject(out, "batch", batch);
	printf("scale: ns per read (p50 / p99) with N readers at once on %d cpus, %ld batches of %d "
	       "reads per reader%s\n",
	       bench_ncpu(), per, batch, o->quick ? " (quick)" : "");
	printf("  %-10s %5s %20s %20s %9s %20s %9s\n", "mode", "N", "clock_gettime",
	       "shmclock_now", "ratio", "AWSIM mutex", "ratio");
	for (int mode = 0; mode < 2; mode++) {
		for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
			int n = counts[ci], nc = mode ? 3 : 2;
			size_t bytes = sizeof(double) * NCONT * (size_t)n * (size_t)per;
			struct shared *sh = bench_shared(sizeof(*sh));
			double *samples = mode ? malloc(bytes) : bench_shared(bytes);
			struct scale_run rs[MAXR];
			pthread_t th[MAXR];
			pid_t pids[MAXR];
			struct bench_stats st[NCONT];

			if (!samples) {
				fprintf(stderr, "shmclock-bench: out of memory\n");
				return 1;
			}
			for (int i = 0; i < n; i++) {
				rs[i] = (struct scale_run){ sh, clk, mode ? &mutex : NULL, &aw_base, per,
							    batch, samples, n, i };
				if (mode) {
					pthread_create(&th[i], NULL, reader_thread, &rs[i]);
				} else if ((pids[i] = fork()) == 0) {
					reader(&rs[i]);
					_exit(0);
				}
			}
			while (atomic_load(&sh->ready) < n)
				sched_yield();
			/* Release pairs with the readers' acquire load of go. */
			atomic_store_explicit(&sh->go, 1, memory_order_release);
			for (int i = 0; i < n; i++) {
				if (mode)
					pthread_join(th[i], NULL);
				else
					waitpid(pids[i], NULL, 0);
			}
			for (int k = 0; k < nc; k++) {
				cJSON *r = cJSON_CreateObject();

				st[k] = bench_summarise(samples + (long)k * n * per, (long)n * per);
				cJSON_AddStringToObject(r, "mode", mode ? "threads" : "processes");
				cJSON_AddNumberToObject(r, "readers", n);
				cJSON_AddStringToObject(r, "name", names[k]);
				bench_json_stats(r, &st[k]);
				cJSON_AddNumberToObject(r, "ratio_p50", st[k].p50 / st[0].p50);
				cJSON_AddItemToArray(results, r);
				if (ci == 0)
					first_p50[mode][k] = st[k].p50;
				last_p50[mode][k] = st[k].p50;
			}
			printf("  %-10s %5d %9.2f / %8.1f %9.2f / %8.1f %8.3fx", mode ? "threads" : "processes",
			       n, st[0].p50, st[0].p99, st[1].p50, st[1].p99, st[1].p50 / st[0].p50);
			if (mode)
				printf(" %9.2f / %8.1f %8.3fx", st[2].p50, st[2].p99, st[2].p50 / st[0].p50);
			printf("\n");
			if (mode)
				free(samples);
			else
				munmap(samples, bytes);
			munmap(sh, sizeof(*sh));
		}
	}
	printf("\n flatness: p50 with 32 readers / p50 with 1 (target: shmclock_now stays flat)\n");
	for (int mode = 0; mode < 2; mode++) {
		for (int k = 0; k < (mode ? 3 : 2); k++) {
			char key[64];
			double f = last_p50[mode][k] / first_p50[mode][k];

			snprintf(key, sizeof(key), "%s %s", names[k], mode ? "threads" : "processes");
			printf("  %-34s %8.3fx\n", key, f);
			cJSON_AddNumberToObject(flat, key, f);
		}
	}
	bench_clock_close(name, w, clk);
	return 0;
}
