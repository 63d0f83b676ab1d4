/* SPDX-License-Identifier: MIT */
/*
 * dds: the gap this project exists to close, measured against the real
 * thing — ROS 2's /clock delivered by Eclipse Cyclone DDS (the topic, type
 * and QoS shmclockd's ros2 link uses), on this machine, in the same run:
 *
 * 1. Delivery: a /clock writer (reliable, keep last 1) sends a sample
 *    carrying its CLOCK_MONOTONIC stamp; a subscriber process (best effort,
 *    as rclcpp's clock QoS) blocked on a waitset takes it and computes
 *    now - stamp. Against: the same update committed to a shmclock segment
 *    (a stepped clock advanced to the stamp) and seen by a reader process
 *    blocked in shmclock_wait_change.
 * 2. Subscriber CPU at 1 kHz: N DDS subscribers taking every sample,
 *    against N shmclock subscribers woken by every step (the notified case;
 *    a reader that just reads when it needs time costs nothing between
 *    reads).
 *
 * DDS stays on 127.0.0.1 on a domain of its own unless CYCLONEDDS_URI is set.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <dds/dds.h>
#include <dds/version.h>
#include <shmclock/time.h>

#include "Clock.h"
#include "bench.h"
#include "ros2_qos.h"

#define DDS_MAXSUB 16

struct dds_shared {
	_Atomic int ready, stop;
	_Atomic long got[DDS_MAXSUB];
	double cpu_s[DDS_MAXSUB];
	double lat[]; /* [n] delivery ns, subscriber 0 */
};

static int domain;

static double cpu_self(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
	       ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
}

static dds_entity_t make_topic(dds_entity_t *pp)
{
	*pp = dds_create_participant((dds_domainid_t)domain, NULL, NULL);
	if (*pp < 0)
		return *pp;
	return dds_create_topic(*pp, &rosgraph_msgs_msg_dds__Clock__desc, "rt/clock", NULL, NULL);
}

/* A DDS subscriber process: takes samples until told to stop; subscriber
 * 0 records each sample's delivery time when @lat. */
static void dds_subscriber(struct dds_shared *sh, int id, bool lat)
{
	dds_entity_t pp, tp = make_topic(&pp), rd, ws;
	dds_qos_t *q = ros2_clock_qos(DDS_RELIABILITY_BEST_EFFORT);
	double c0;

	if (tp < 0)
		_exit(1);
	rd = dds_create_reader(pp, tp, q, NULL);
	dds_delete_qos(q);
	ws = dds_create_waitset(pp);
	dds_set_status_mask(rd, DDS_DATA_AVAILABLE_STATUS);
	dds_waitset_attach(ws, rd, 0);
	atomic_fetch_add(&sh->ready, 1);
	c0 = cpu_self();
	while (!atomic_load_explicit(&sh->stop, memory_order_relaxed)) {
		void *ptrs[1] = { 0 };
		dds_sample_info_t info;
		int n;

		dds_waitset_wait(ws, NULL, 0, DDS_MSECS(100));
		while ((n = dds_take(rd, ptrs, &info, 1, 1)) > 0) {
			const rosgraph_msgs_msg_dds__Clock_ *m = ptrs[0];

			if (info.valid_data) {
				int64_t t1 = bench_mono_ns();
				long k = atomic_load_explicit(&sh->got[id], memory_order_relaxed);

				if (lat && id == 0)
					sh->lat[k] = (double)(t1 - ((int64_t)m->clock.sec * 1000000000 +
								   m->clock.nanosec));
				atomic_store_explicit(&sh->got[id], k + 1, memory_order_release);
			}
			dds_return_loan(rd, ptrs, n);
		}
	}
	sh->cpu_s[id] = cpu_self() - c0;
	dds_delete(pp);
	_exit(0);
}

/* A shmclock subscriber: woken by every commit, reads the time. */
static void shm_subscriber(struct dds_shared *sh, int id, bool lat, shmclock_t *clk)
{
	int64_t last = INT64_MIN;
	double c0 = cpu_self();

	atomic_fetch_add(&sh->ready, 1);
	while (!atomic_load_explicit(&sh->stop, memory_order_relaxed)) {
		uint32_t tok = shmclock_change_token(clk);
		int64_t t = 0;

		shmclock_now(clk, &t);
		if (t != last && last != INT64_MIN) {
			long k = atomic_load_explicit(&sh->got[id], memory_order_relaxed);

			if (lat && id == 0)
				sh->lat[k] = (double)(bench_mono_ns() - t);
			atomic_store_explicit(&sh->got[id], k + 1, memory_order_release);
		}
		last = t;
		shmclock_wait_change(clk, tok, shmclock_msec(100));
	}
	sh->cpu_s[id] = cpu_self() - c0;
	_exit(0);
}

/* One update of @ns (a positive CLOCK_MONOTONIC reading): a /clock sample,
 * or a step of the shmclock segment. */
static void publish(bool dds, dds_entity_t wr, shmclock_writer_t *w, int64_t ns)
{
	if (dds) {
		rosgraph_msgs_msg_dds__Clock_ m = { .clock = { .sec = (int32_t)(ns / 1000000000),
							       .nanosec = (uint32_t)(ns % 1000000000) } };

		dds_write(wr, &m);
	} else {
		shmclock_writer_advance(w, ns);
	}
}

/* Waits until every subscriber has @want samples (or 200 ms passed). */
static bool wait_got(struct dds_shared *sh, int subs, long want)
{
	int64_t end = bench_mono_ns() + 200000000;

	for (;;) {
		int ok = 0;

		for (int s = 0; s < subs; s++)
			ok += atomic_load_explicit(&sh->got[s], memory_order_acquire) >= want;
		if (ok == subs)
			return true;
		if (bench_mono_ns() > end)
			return false;
		sched_yield();
	}
}

/*
 * One run: @subs subscribers (DDS or shmclock), then @n updates: spaced
 * 1-3 ms with each waited for (latency), or at @hz for @secs (CPU).
 * Returns the lost updates; fills lat (subscriber 0) and the mean CPU.
 */
static long run(bool dds, int subs, long n, double hz, double secs, double *lat, double *cpu,
		shmclock_writer_t *w, shmclock_t *clk)
{
	size_t sz = sizeof(struct dds_shared) + sizeof(double) * (size_t)(n > 0 ? n : 1);
	struct dds_shared *sh = bench_shared(sz);
	pid_t pids[DDS_MAXSUB];
	dds_entity_t pp = 0, wr = 0;
	long lost = 0, sent = 0;

	for (int s = 0; s < subs; s++) {
		pids[s] = fork();
		if (pids[s] == 0) {
			if (dds)
				dds_subscriber(sh, s, n > 0);
			else
				shm_subscriber(sh, s, n > 0, clk);
		}
	}
	while (atomic_load(&sh->ready) < subs)
		sched_yield();
	if (dds) {
		/* The writer is made after the fork: DDS's threads do not fork. */
		dds_entity_t tp = make_topic(&pp);
		dds_qos_t *q = ros2_clock_qos(DDS_RELIABILITY_RELIABLE);
		dds_publication_matched_status_t ms = { 0 };
		int64_t end = bench_mono_ns() + 10000000000LL;

		wr = dds_create_writer(pp, tp, q, NULL);
		dds_delete_qos(q);
		while (bench_mono_ns() < end &&
		       (dds_get_publication_matched_status(wr, &ms) < 0 || (int)ms.current_count < subs))
			bench_sleep_s(0.01);
		bench_sleep_s(0.2); /* the readers' side of discovery too */
	} else {
		bench_sleep_s(0.01);
	}
	if (n > 0) {
		for (long i = 0; i < n; i++) {
			int64_t t0 = bench_mono_ns();

			publish(dds, wr, w, t0);
			sent++;
			if (!wait_got(sh, subs, sent)) {
				lost++;
				/* Resynchronise the counters on what arrived. */
				sent = atomic_load(&sh->got[0]);
			}
			bench_sleep_s(0.001 + (double)(rand() % 2000) / 1e6);
		}
	} else {
		int64_t period = (int64_t)(1e9 / hz), next = bench_mono_ns();

		for (int64_t end = next + (int64_t)(secs * 1e9); next < end; next += period) {
			int64_t now = bench_mono_ns();

			if (next > now)
				bench_sleep_s((double)(next - now) / 1e9);
			publish(dds, wr, w, next);
		}
	}
	atomic_store(&sh->stop, 1);
	if (!dds)
		shmclock_writer_advance(w, bench_mono_ns()); /* wake blocked subscribers */
	*cpu = 0;
	for (int s = 0; s < subs; s++) {
		waitpid(pids[s], NULL, 0);
		*cpu += sh->cpu_s[s];
	}
	*cpu /= subs;
	if (n > 0) {
		long got = atomic_load(&sh->got[0]);

		memcpy(lat, sh->lat, sizeof(double) * (size_t)(got < n ? got : n));
		lost = n - (got < n ? got : n);
	}
	if (pp > 0)
		dds_delete(pp);
	return lost;
}

int bench_dds(const struct bench_opts *o, cJSON *out)
{
	long n = o->samples ? o->samples : o->quick ? 200 : 2000;
	double secs = o->duration_s > 0 ? o->duration_s : o->quick ? 0.5 : 3.0;
	static const int subs_list[] = { 1, 4, 8 };
	double *lat = calloc((size_t)n, sizeof(double)), cpu, base_p50 = 0;
	cJSON *jl = cJSON_AddArrayToObject(out, "latency"), *jc = cJSON_AddArrayToObject(out, "cpu");
	char name[64];
	shmclock_writer_t *w;
	shmclock_t *clk;

	if (!lat)
		return 1;
	bool own_uri = !getenv("CYCLONEDDS_URI");

	if (own_uri)
		setenv("CYCLONEDDS_URI", ROS2_LOOPBACK_URI, 1);
	domain = 1 + (int)(getpid() % 200);
	if (bench_clock_open(name, sizeof(name), &w, &clk))
		return 1;
	/* A stepped clock: each update is one advance, as the ros2 source makes. */
	shmclock_writer_set_source(w, SHMCLOCK_SOURCE_EXTERNAL);
	shmclock_writer_advance(w, bench_mono_ns());

	printf("dds: /clock over Cyclone DDS %s (domain %d%s) against a shmclock segment\n",
	       DDS_VERSION, domain, own_uri ? ", 127.0.0.1 only" : ", your CYCLONEDDS_URI");
	printf("  delivery to a blocked subscriber process (%ld updates, 1-3 ms apart), us\n", n);
	printf("  %-40s %9s %9s %9s %9s %8s %6s\n", "", "p50", "p90", "p99", "max", "ratio", "lost");
	for (int k = 0; k < 2; k++) {
		bool dds = k == 1;
		long lost = run(dds, 1, n, 0, 0, lat, &cpu, w, clk);
		long got = n - lost;
		struct bench_stats st = bench_summarise(lat, got);
		const char *label = dds ? "/clock via DDS (reliable -> best effort)"
					: "shmclock commit -> wait_change reader";
		cJSON *j = cJSON_CreateObject();

		if (!dds)
			base_p50 = st.p50;
		printf("  %-40s %9.1f %9.1f %9.1f %9.1f %7.1fx %6ld\n", label, st.p50 / 1e3, st.p90 / 1e3,
		       st.p99 / 1e3, st.max / 1e3, base_p50 > 0 ? st.p50 / base_p50 : 0, lost);
		cJSON_AddStringToObject(j, "name", label);
		bench_json_stats(j, &st);
		cJSON_AddNumberToObject(j, "lost", (double)lost);
		cJSON_AddItemToArray(jl, j);
	}
	printf("  subscriber CPU at 1 kHz over %.3g s (%% of one core, each)\n", secs);
	printf("  %-40s %12s %12s %8s\n", "subscribers", "shmclock", "DDS", "ratio");
	for (size_t i = 0; i < sizeof(subs_list) / sizeof(subs_list[0]); i++) {
		double c_shm, c_dds;
		cJSON *j = cJSON_CreateObject();

		run(false, subs_list[i], 0, 1000, secs, NULL, &c_shm, w, clk);
		run(true, subs_list[i], 0, 1000, secs, NULL, &c_dds, w, clk);
		printf("  %-40d %10.3f %% %10.3f %% %7.1fx\n", subs_list[i], c_shm / secs * 100,
		       c_dds / secs * 100, c_shm > 0 ? c_dds / c_shm : 0);
		cJSON_AddNumberToObject(j, "subscribers", subs_list[i]);
		cJSON_AddNumberToObject(j, "shmclock_cpu_fraction", c_shm / secs);
		cJSON_AddNumberToObject(j, "dds_cpu_fraction", c_dds / secs);
		cJSON_AddItemToArray(jc, j);
	}
	printf("  (a shmclock reader that reads when it needs time is not woken at all)\n");
	bench_clock_close(name, w, clk);
	free(lat);
	return 0;
}
