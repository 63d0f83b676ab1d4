/* SPDX-License-Identifier: MIT */
/*
 * propagate: how fast a change reaches readers in other processes, and how
 * stale their time is, against delivering time as messages (how ROS 2
 * /clock reaches nodes), on the same machine in the same run.
 *
 * 1. Commit to reader: the writer (this process) stamps CLOCK_MONOTONIC,
 *    commits a step of a paused clock; a reader process sees it by
 *    - polling shmclock_now (a reader that reads when it needs time),
 *    - blocking in shmclock_wait_change (N subscribers, futex-woken),
 *    and, the baseline, N subscribers blocked in recv() on a Unix
 *    datagram socket each, to which the writer sends the update.
 * 2. Staleness: ticks of a 1x clock sent as datagrams at 100 Hz and 1 kHz;
 *    a subscriber samples "true time - last tick" at random moments. The
 *    same for a continuous shmclock (its readers compute the time).
 * 3. Subscriber CPU per second at those tick rates: datagram subscribers
 *    blocked in recv(), against shmclock subscribers blocked in
 *    shmclock_wait_change() while the writer steps at the same rate (a
 *    stepped source: the case where shmclock readers are notified too).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <shmclock/time.h>

#include "bench.h"

#define MAXSUB 64
#define STEP_NS 1000
/* Rounds in which the futex-woken and the datagram subscribers take turns. */
#define PROPAGATE_ROUNDS 6

struct msg {
	long seq;
	int64_t t0;
	int64_t sim;
};

struct shared {
	_Atomic long ack;
	_Atomic long raw; /* RAW: the bare cache-line handoff */
	_Atomic int stop;
	_Atomic int ready;
	double cpu_s[MAXSUB]; /* per subscriber, written at its end */
	long nstale[MAXSUB];
	_Atomic int64_t t0[]; /* [n + 1] commit stamps */
};

static void sleep_ns(int64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000), (long)(ns % 1000000000) };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void sleep_until(int64_t deadline)
{
	struct timespec ts = { (time_t)(deadline / 1000000000), (long)(deadline % 1000000000) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

static double cpu_self(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static uint64_t rng = 88172645463325252ULL;

static uint64_t xorshift(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Pin the calling process to @cpu (modulo the machine's), so that the
 * writer and a spinning reader never share one and the scheduler's
 * placement is not what is measured. */
static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu % bench_ncpu(), &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static void unpin(void)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	for (int i = 0; i < bench_ncpu(); i++)
		CPU_SET(i, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static void wait_ack(struct shared *sh, long want)
{
	while (atomic_load_explicit(&sh->ack, memory_order_acquire) < want)
		sched_yield();
}

enum kind { RAW, POLL, FUTEX, DGRAM };

/*
 * Where the blocked subscribers (FUTEX, DGRAM) run: where the scheduler
 * puts them, or pinned with the writer on CPU 0 (ONE_CPU) or on CPU 1
 * (OTHER_CPU). Which CPU a woken subscriber lands on decides its latency
 * on a 2-vCPU machine more than the wake itself: a socket's wake-up is a
 * synchronous one (the kernel's WF_SYNC: the waker is about to block, so
 * the wakee may take its CPU), a FUTEX_WAKE is not, and its subscribers are
 * sent to the other, idle, CPU more often. Pinned, both contenders pay
 * the same placement and only the wake is compared.
 */
enum placement { FREE, ONE_CPU, OTHER_CPU };

/* One commit-to-reader run: @subs readers of @kind, @n commits. Fills lat
 * [n * subs] (ns). */
static void run_latency(enum kind kind, enum placement where, int subs, long n,
			shmclock_writer_t *w, shmclock_t *clk, double *lat_shared)
{
	size_t shsz = sizeof(struct shared) + sizeof(_Atomic int64_t) * (size_t)(n + 1);
	struct shared *sh = bench_shared(shsz);
	int socks[MAXSUB][2];
	pid_t pids[MAXSUB];
	int64_t base;

	shmclock_writer_pause(w);
	shmclock_writer_now(w, &base);
	/* The subscribers inherit the CPU their parent is on when forked. */
	if (where != FREE)
		pin(where == ONE_CPU ? 0 : 1);
	for (int s = 0; s < subs; s++) {
		if (kind == DGRAM && socketpair(AF_UNIX, SOCK_DGRAM, 0, socks[s]) < 0) {
			perror("shmclock-bench: socketpair");
			exit(1);
		}
		pids[s] = fork();
		if (pids[s] == 0) {
			if (kind == POLL || kind == RAW)
				pin(1);
			atomic_fetch_add(&sh->ready, 1);
			for (long i = 1; i <= n; i++) {
				int64_t t = 0, want = base + i * STEP_NS, t1;

				if (kind == RAW) {
					while (atomic_load_explicit(&sh->raw, memory_order_acquire) < i)
						;
					t1 = bench_mono_ns();
				} else if (kind == POLL) {
					do
						shmclock_now(clk, &t);
					while (t < want);
					t1 = bench_mono_ns();
				} else if (kind == FUTEX) {
					for (;;) {
						uint32_t tok = shmclock_change_token(clk);

						shmclock_now(clk, &t);
						if (t >= want)
							break;
						shmclock_wait_change(clk, tok, SHMCLOCK_DURATION_INFINITE);
					}
					t1 = bench_mono_ns();
				} else {
					struct msg m;

					if (recv(socks[s][1], &m, sizeof(m), 0) != sizeof(m))
						_exit(1);
					t1 = bench_mono_ns();
					t = m.sim;
				}
				/* The stamp was stored before the commit (or send)
				 * whose effect this reader has just seen. */
				lat_shared[(i - 1) * subs + s] =
					(double)(t1 - atomic_load_explicit(&sh->t0[i],
									   memory_order_relaxed));
				atomic_fetch_add_explicit(&sh->ack, 1, memory_order_release);
			}
			_exit(0);
		}
	}
	if (kind == POLL || kind == RAW || where != FREE)
		pin(0);
	while (atomic_load(&sh->ready) < subs)
		sched_yield();
	sleep_ns(2000000);
	for (long i = 1; i <= n; i++) {
		int64_t t0 = bench_mono_ns();

		atomic_store_explicit(&sh->t0[i], t0, memory_order_relaxed);
		if (kind == RAW) {
			/* Release publishes t0[i] with the value. */
			atomic_store_explicit(&sh->raw, i, memory_order_release);
		} else if (kind == DGRAM) {
			struct msg m = { i, t0, base + i * STEP_NS };

			for (int s = 0; s < subs; s++)
				send(socks[s][0], &m, sizeof(m), 0);
		} else {
			/* The commit's release store publishes t0[i] too. */
			shmclock_writer_step(w, STEP_NS);
		}
		wait_ack(sh, i * subs);
		/* A random gap: readers meet commits at every phase. Spun, not
		 * slept, when a reader spins too: a writer just woken from
		 * sleep on a virtual CPU runs its first microseconds late, and
		 * that is not what this measures. */
		if (kind == POLL || kind == RAW) {
			int64_t until = bench_mono_ns() + 20000 + (int64_t)(xorshift() % 80000);

			while (bench_mono_ns() < until)
				;
		} else {
			sleep_ns(20000 + (int64_t)(xorshift() % 80000));
		}
	}
	unpin();
	for (int s = 0; s < subs; s++) {
		waitpid(pids[s], NULL, 0);
		if (kind == DGRAM) {
			close(socks[s][0]);
			close(socks[s][1]);
		}
	}
	munmap(sh, shsz);
}

/* Staleness of message-fed time at @hz: one subscriber samples at random
 * moments for @secs; fills @out (ns), returns the count. */
static long run_stale_dgram(double hz, double secs, double *out, long cap)
{
	struct shared *sh = bench_shared(sizeof(*sh));
	int sv[2];
	int64_t m0 = bench_mono_ns(), period = (int64_t)(1e9 / hz), next;
	pid_t pid;
	long n;

	if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) < 0) {
		perror("shmclock-bench: socketpair");
		exit(1);
	}
	pid = fork();
	if (pid == 0) {
		int64_t last = -1;
		long k = 0;

		while (!atomic_load(&sh->stop) && k < cap) {
			struct msg m;

			while (recv(sv[1], &m, sizeof(m), MSG_DONTWAIT) == sizeof(m))
				last = m.sim;
			if (last >= 0)
				out[k++] = (double)(bench_mono_ns() - m0 - last);
			sleep_ns((int64_t)(xorshift() % (uint64_t)(2 * period / 10 + 1)) + 100000);
		}
		sh->nstale[0] = k;
		_exit(0);
	}
	next = bench_mono_ns();
	for (int64_t end = next + (int64_t)(secs * 1e9); next < end; next += period) {
		struct msg m;

		sleep_until(next);
		m = (struct msg){ 0, 0, bench_mono_ns() - m0 };
		send(sv[0], &m, sizeof(m), 0);
	}
	atomic_store(&sh->stop, 1);
	waitpid(pid, NULL, 0);
	n = sh->nstale[0];
	close(sv[0]);
	close(sv[1]);
	munmap(sh, sizeof(*sh));
	return n;
}

/* Staleness of shmclock's continuous time: read, then compare with the
 * clock function's exact value at the instant right after. */
static long run_stale_shm(shmclock_writer_t *w, shmclock_t *clk, double *out, long n)
{
	shmclock_info_t i;
	int64_t m0;

	shmclock_writer_set_scale(w, 1.0);
	shmclock_writer_resume(w);
	shmclock_info(clk, &i);
	m0 = i.mono_ns - i.sim_ns; /* scale 1: sim = mono - m0 exactly */
	for (long k = 0; k < n; k++) {
		int64_t t;

		shmclock_now(clk, &t);
		out[k] = (double)(bench_mono_ns() - m0 - t);
	}
	return n;
}

/* CPU seconds per second of @subs subscribers fed at @hz for @secs:
 * datagrams (shm = false) or shmclock steps (shm = true). Mean per
 * subscriber. */
static double run_cpu(bool shm, int subs, double hz, double secs, shmclock_writer_t *w,
		      shmclock_t *clk)
{
	struct shared *sh = bench_shared(sizeof(*sh));
	int socks[MAXSUB][2];
	pid_t pids[MAXSUB];
	int64_t period = (int64_t)(1e9 / hz), next;
	double sum = 0;

	shmclock_writer_pause(w);
	for (int s = 0; s < subs; s++) {
		if (!shm && socketpair(AF_UNIX, SOCK_DGRAM, 0, socks[s]) < 0) {
			perror("shmclock-bench: socketpair");
			exit(1);
		}
		pids[s] = fork();
		if (pids[s] == 0) {
			double c0 = cpu_self();
			volatile int64_t last = 0;

			atomic_fetch_add(&sh->ready, 1);
			while (!atomic_load(&sh->stop)) {
				if (shm) {
					uint32_t tok = shmclock_change_token(clk);
					int64_t t;

					shmclock_now(clk, &t);
					last = t;
					shmclock_wait_change(clk, tok, shmclock_msec(100));
				} else {
					struct msg m;
					struct timeval tv = { 0, 100000 };

					setsockopt(socks[s][1], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
					if (recv(socks[s][1], &m, sizeof(m), 0) == sizeof(m))
						last = m.sim;
				}
			}
			(void)last;
			sh->cpu_s[s] = cpu_self() - c0;
			_exit(0);
		}
	}
	while (atomic_load(&sh->ready) < subs)
		sched_yield();
	next = bench_mono_ns();
	for (int64_t end = next + (int64_t)(secs * 1e9); next < end; next += period) {
		sleep_until(next);
		if (shm) {
			shmclock_writer_step(w, period);
		} else {
			struct msg m = { 0, 0, next };

			for (int s = 0; s < subs; s++)
				send(socks[s][0], &m, sizeof(m), 0);
		}
	}
	atomic_store(&sh->stop, 1);
	if (shm)
		shmclock_writer_step(w, 1); /* wake the blocked subscribers */
	for (int s = 0; s < subs; s++) {
		waitpid(pids[s], NULL, 0);
		sum += sh->cpu_s[s];
		if (!shm) {
			close(socks[s][0]);
			close(socks[s][1]);
		}
	}
	munmap(sh, sizeof(*sh));
	return sum / subs / secs;
}

int bench_propagate(const struct bench_opts *o, cJSON *out)
{
	long n = o->samples ? o->samples : o->quick ? 300 : 3000;
	int subs = o->subscribers ? o->subscribers : 4;
	double secs = o->duration_s > 0 ? o->duration_s : o->quick ? 0.5 : 3.0;
	static const double rates[] = { 100, 1000 };
	cJSON *lat = cJSON_AddArrayToObject(out, "latency");
	cJSON *stale = cJSON_AddArrayToObject(out, "staleness");
	cJSON *cpu = cJSON_AddArrayToObject(out, "subscriber_cpu");
	struct {
		const char *name;
		enum kind kind;
		int subs;
	} runs[] = {
		{ "floor: one atomic store, reader spinning", RAW, 1 }, /* pinned: cpus 0, 1 */
		{ "shmclock, reader polling", POLL, 1 },               /* pinned: cpus 0, 1 */
		{ "shmclock, futex-woken subscribers", FUTEX, subs },
		{ "unix datagram per subscriber", DGRAM, subs },
	};
	static const struct {
		enum placement where;
		const char *label;
		const char *row; /* the short form, for the table's rows */
	} fixed[] = { { ONE_CPU, "all on one CPU", "all on CPU 0" },
		      { OTHER_CPU, "subscribers on the other CPU", "on CPU 1, writer 0" } };
	struct bench_stats st[4], pinned[2][2];
	int nfixed = bench_ncpu() > 1 ? 2 : 1;
	char name[64], label[96];
	shmclock_writer_t *w;
	shmclock_t *clk;
	long cap = (long)(secs * 20000) + 1000;
	double *buf;

	if (bench_clock_open(name, sizeof(name), &w, &clk))
		return 1;
	buf = bench_shared(sizeof(double) * (size_t)(n * subs > cap ? n * subs : cap));
	cJSON_AddNumberToObject(out, "commits", (double)n);
	cJSON_AddNumberToObject(out, "subscribers", subs);
	cJSON_AddNumberToObject(out, "seconds", secs);

	printf("propagate: commit (or send) to a reader in another process seeing it, %ld updates%s\n",
	       n, o->quick ? " (quick)" : "");
	/* Measured first, printed after: the datagram is every row's baseline. */
	for (int r = 0; r < 2; r++) {
		run_latency(runs[r].kind, FREE, runs[r].subs, n, w, clk, buf);
		st[r] = bench_summarise(buf, n * runs[r].subs);
	}
	/* The two ways of waking blocked subscribers take turns, in rounds,
	 * each first in every other round: whichever ran first after the
	 * pinned spinning above was 1.1x-1.5x slower, whichever it was (the
	 * machine settling: 2 vCPUs), which is not what this compares. Then
	 * the same with the placement fixed, half the updates each. */
	for (int f = -1; f < nfixed; f++) {
		long total = f < 0 ? n : n / 2;
		size_t wsz = sizeof(double) * (size_t)(total * subs);
		double *wake[2] = { bench_shared(wsz), bench_shared(wsz) };
		long per = total / PROPAGATE_ROUNDS;

		for (int k = 0; k < PROPAGATE_ROUNDS; k++) {
			long m = k == PROPAGATE_ROUNDS - 1 ? total - per * k : per;

			for (int j = 0; j < 2; j++) {
				int r = 2 + (k + j) % 2; /* FUTEX first in even rounds */

				run_latency(runs[r].kind, f < 0 ? FREE : fixed[f].where, runs[r].subs,
					    m, w, clk, wake[r - 2] + per * k * subs);
			}
		}
		for (int r = 2; r < 4; r++) {
			struct bench_stats x = bench_summarise(wake[r - 2], total * subs);

			if (f < 0)
				st[r] = x;
			else
				pinned[f][r - 2] = x;
			munmap(wake[r - 2], wsz);
		}
	}
	bench_header("us; ratio to the datagram");
	for (int r = 0; r < 4; r++) {
		cJSON *j = cJSON_CreateObject();

		snprintf(label, sizeof(label), "%s (%d)", runs[r].name, runs[r].subs);
		bench_row(label, &st[r], st[3].p50, 1000);
		cJSON_AddStringToObject(j, "name", runs[r].name);
		cJSON_AddNumberToObject(j, "subscribers", runs[r].subs);
		bench_json_stats(j, &st[r]);
		cJSON_AddNumberToObject(j, "ratio_p50", st[r].p50 / st[3].p50);
		cJSON_AddItemToArray(lat, j);
	}
	for (int f = 0; f < nfixed; f++)
		for (int r = 2; r < 4; r++) {
			cJSON *j = cJSON_CreateObject();

			snprintf(label, sizeof(label), "%s (%d) %s", r == 2 ? "futex-woken" : "datagram",
				 runs[r].subs, fixed[f].row);
			bench_row(label, &pinned[f][r - 2], pinned[f][1].p50, 1000);
			cJSON_AddStringToObject(j, "name", runs[r].name);
			cJSON_AddStringToObject(j, "placement", fixed[f].label);
			cJSON_AddNumberToObject(j, "subscribers", runs[r].subs);
			bench_json_stats(j, &pinned[f][r - 2]);
			cJSON_AddNumberToObject(j, "ratio_p50", pinned[f][r - 2].p50 / pinned[f][1].p50);
			cJSON_AddItemToArray(lat, j);
		}
	printf("  %-58s %8.2f us  target < 5 us  %s\n", "shmclock propagation p99 (reader polling)",
	       st[1].p99 / 1000, st[1].p99 < 5000 ? "met" : "NOT MET");
	printf("  %-58s %8.2f us  (the machine's own tail)\n", "floor p99 (one atomic store)",
	       st[0].p99 / 1000);
	printf("  %-58s %8.1fx  expected >= 10x\n", "datagram p50 / shmclock polling p50",
	       st[3].p50 / st[1].p50);
	printf("  %-58s %8.3fx  (the scheduler places them)\n",
	       "futex-woken p50 / datagram p50", st[2].p50 / st[3].p50);
	for (int f = 0; f < nfixed; f++) {
		char what[96];

		snprintf(what, sizeof(what), "futex-woken p50 / datagram p50, %s", fixed[f].label);
		printf("  %-58s %8.3fx  target <= 1x  %s\n", what,
		       pinned[f][0].p50 / pinned[f][1].p50,
		       pinned[f][0].p50 <= pinned[f][1].p50 ? "met" : "NOT MET");
	}
	cJSON_AddNumberToObject(out, "futex_over_dgram_p50", st[2].p50 / st[3].p50);
	cJSON_AddNumberToObject(out, "dgram_over_shm_p50", st[3].p50 / st[1].p50);

	printf("\n staleness of time as a reader sees it (true time - what it reads), %.3g s per "
	       "run\n",
	       secs);
	printf("  %-40s %12s %12s %12s\n", "source", "p50", "p99", "max");
	for (size_t i = 0; i < sizeof(rates) / sizeof(rates[0]); i++) {
		long k = run_stale_dgram(rates[i], secs, buf, cap);
		struct bench_stats s = bench_summarise(buf, k);
		cJSON *j = cJSON_CreateObject();

		snprintf(label, sizeof(label), "datagram ticks at %g Hz", rates[i]);
		printf("  %-40s %9.3f ms %9.3f ms %9.3f ms\n", label, s.p50 / 1e6, s.p99 / 1e6,
		       s.max / 1e6);
		cJSON_AddStringToObject(j, "name", label);
		bench_json_stats(j, &s);
		cJSON_AddItemToArray(stale, j);
	}
	{
		long k = run_stale_shm(w, clk, buf, cap);
		struct bench_stats s = bench_summarise(buf, k);
		cJSON *j = cJSON_CreateObject();

		printf("  %-40s %9.0f ns %9.0f ns %9.0f ns\n", "shmclock, continuous clock", s.p50,
		       s.p99, s.max);
		cJSON_AddStringToObject(j, "name", "shmclock, continuous clock");
		bench_json_stats(j, &s);
		cJSON_AddItemToArray(stale, j);
	}

	printf("\n subscriber CPU (mean per subscriber, %d subscribers, %.3g s per run)\n", subs, secs);
	printf("  %-10s %24s %30s %9s\n", "tick rate", "datagram (recv)", "shmclock stepped (wait_change)",
	       "ratio");
	for (size_t i = 0; i < sizeof(rates) / sizeof(rates[0]); i++) {
		double d = run_cpu(false, subs, rates[i], secs, w, clk);
		double s = run_cpu(true, subs, rates[i], secs, w, clk);
		cJSON *j = cJSON_CreateObject();

		printf("  %7g Hz %21.3f %% %27.3f %% %8.2fx\n", rates[i], d * 100, s * 100,
		       d > 0 ? s / d : 0);
		cJSON_AddNumberToObject(j, "hz", rates[i]);
		cJSON_AddNumberToObject(j, "datagram_cpu_fraction", d);
		cJSON_AddNumberToObject(j, "shmclock_cpu_fraction", s);
		cJSON_AddItemToArray(cpu, j);
	}
	printf("  (a continuous shmclock needs no ticks at all: its subscribers use no CPU until they "
	       "read)\n");
	munmap(buf, sizeof(double) * (size_t)(n * subs > cap ? n * subs : cap));
	bench_clock_close(name, w, clk);
	return 0;
}
