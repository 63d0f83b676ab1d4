/* SPDX-License-Identifier: MIT */
/*
 * The protocol's guarantees between threads of one process: the variant of
 * the cross-process stress tests that ThreadSanitizer can see (it cannot
 * follow memory shared across fork). Writer and readers are threads; jump
 * callbacks are added and removed while readers read; sleepers are
 * cancelled from another thread. Every case runs in the normal build too.
 *
 * Not Criterion: its sandbox cannot start under ThreadSanitizer
 * (Snaipe/Criterion#274), so this is a plain program speaking TAP.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>

#include "../helpers.h"
#include <shmclock/time.h>

static int failures_in_case;

__attribute__((format(printf, 4, 5))) static void fail_at(const char *file, int line,
							   const char *cond, const char *fmt, ...)
{
	va_list ap;

	failures_in_case++;
	printf("#   %s:%d: failed: %s: ", file, line, cond);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

/* An expectation: reports and counts a failure, and goes on. */
#define EXPECT(cond, ...)                                                \
	do {                                                             \
		if (!(cond))                                             \
			fail_at(__FILE__, __LINE__, #cond, __VA_ARGS__); \
	} while (0)
/* A precondition: the case cannot go on without it. */
#define REQUIRE(cond)                                                    \
	do {                                                             \
		if (!(cond)) {                                           \
			fail_at(__FILE__, __LINE__, #cond, "%s", "required"); \
			return;                                          \
		}                                                        \
	} while (0)

#define RUN_NS 600000000LL

struct ctx {
	const char *name;
	shmclock_t *clk;
	_Atomic int stop;
	_Atomic uint64_t reads, torn, backwards, callbacks;
};

/* Readers: each value comes from one committed state (multiples of 1000,
 * and info agrees with itself); with only continuous changes, time never
 * goes back. */
static void *reader_torn(void *p)
{
	struct ctx *c = p;
	uint64_t n = 0, bad = 0;

	while (!atomic_load_explicit(&c->stop, memory_order_relaxed)) {
		shmclock_info_t in;
		int64_t v;

		if (shmclock_info(c->clk, &in) || in.sim_ns != 1000 * (int64_t)(in.jump_epoch + 1))
			bad++;
		if (shmclock_now(c->clk, &v) || v % 1000)
			bad++;
		n += 2;
	}
	atomic_fetch_add(&c->reads, n);
	atomic_fetch_add(&c->torn, bad);
	return NULL;
}

static void two_threads_no_torn_reads(void)
{
	struct ctx c = { .name = test_clock_name() };
	shmclock_writer_t *w;
	pthread_t r;
	int64_t k = 1, end;

	REQUIRE((shmclock_writer_open(c.name, &w)) == 0);
	REQUIRE((shmclock_writer_pause(w)) == 0);
	REQUIRE((shmclock_writer_set_time(w, 1000)) == 0);
	REQUIRE((shmclock_open(c.name, &c.clk)) == 0);
	pthread_create(&r, NULL, reader_torn, &c);
	for (end = now_mono() + RUN_NS; now_mono() < end;)
		for (int j = 0; j < 200; j++)
			shmclock_writer_set_time(w, 1000 * ++k);
	atomic_store(&c.stop, 1);
	pthread_join(r, NULL);
	printf("# threads torn: %llu reads against %lld commits, %llu torn\n",
		(unsigned long long)c.reads, (long long)k, (unsigned long long)c.torn);
	EXPECT(c.reads > 100, "%llu reads", (unsigned long long)c.reads);
	EXPECT(c.torn == 0, "%llu torn", (unsigned long long)c.torn);
	shmclock_close(c.clk);
	shmclock_writer_close(w);
}

static void *reader_mono(void *p)
{
	struct ctx *c = p;
	int64_t last = INT64_MIN, v;
	uint64_t n = 0, back = 0;

	while (!atomic_load_explicit(&c->stop, memory_order_relaxed)) {
		if (shmclock_now(c->clk, &v) == 0) {
			back += v < last;
			last = v;
			n++;
		}
	}
	atomic_fetch_add(&c->reads, n);
	atomic_fetch_add(&c->backwards, back);
	return NULL;
}

static void on_jump(const shmclock_jump_t *j, bool before, void *user)
{
	struct ctx *c = user;

	(void)j;
	(void)before;
	atomic_fetch_add(&c->callbacks, 1);
}

/* A thread that keeps adding and removing jump callbacks (the RCU list). */
static void *churn(void *p)
{
	struct ctx *c = p;
	shmclock_jump_threshold_t th = { .on_clock_change = true };

	while (!atomic_load_explicit(&c->stop, memory_order_relaxed)) {
		uint64_t id;

		if (shmclock_jump_callback_add(c->clk, th, on_jump, c, &id) == 0)
			shmclock_jump_callback_remove(c->clk, id);
	}
	return NULL;
}

static void two_readers_time_never_goes_back_while_callbacks_churn(void)
{
	struct ctx c = { .name = test_clock_name() };
	shmclock_writer_t *w;
	pthread_t r[2], ch;
	int64_t end;
	uint64_t commits = 0;

	REQUIRE((shmclock_writer_open(c.name, &w)) == 0);
	REQUIRE((shmclock_writer_set_time(w, 0)) == 0);
	REQUIRE((shmclock_open(c.name, &c.clk)) == 0);
	for (int i = 0; i < 2; i++)
		pthread_create(&r[i], NULL, reader_mono, &c);
	pthread_create(&ch, NULL, churn, &c);
	for (end = now_mono() + RUN_NS; now_mono() < end; commits += 4) {
		/* Continuous changes only: none of them may step time back. */
		shmclock_writer_set_scale(w, 3.0);
		shmclock_writer_pause(w);
		shmclock_writer_resume(w);
		shmclock_writer_set_scale(w, 0.25);
	}
	atomic_store(&c.stop, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(r[i], NULL);
	pthread_join(ch, NULL);
	printf("# threads monotonic: %llu reads against %llu commits, %llu backwards\n",
		(unsigned long long)c.reads, (unsigned long long)commits,
		(unsigned long long)c.backwards);
	EXPECT(c.reads > 100, "%llu reads", (unsigned long long)c.reads);
	EXPECT(c.backwards == 0, "%llu backwards", (unsigned long long)c.backwards);
	shmclock_close(c.clk);
	shmclock_writer_close(w);
}

struct sleeper {
	shmclock_t *clk;
	shmclock_cancel_t cancel;
	int result;
};

static void *sleeper_main(void *p)
{
	struct sleeper *s = p;

	s->result = shmclock_sleep_for_ex(s->clk, shmclock_sec(1000), 0, SHMCLOCK_DURATION_INFINITE,
					  &s->cancel);
	return NULL;
}

static void a_sleeper_is_cancelled_from_another_thread_and_jumps_are_delivered(void)
{
	struct ctx c = { .name = test_clock_name() };
	struct sleeper s = { .cancel = SHMCLOCK_CANCEL_INIT };
	shmclock_jump_threshold_t th = { .min_backward_ns = 1 };
	shmclock_writer_t *w;
	pthread_t t;
	uint64_t id;

	REQUIRE((shmclock_writer_open(c.name, &w)) == 0);
	REQUIRE((shmclock_writer_set_time(w, 0)) == 0);
	REQUIRE((shmclock_open_ex(c.name, SHMCLOCK_OPEN_WATCH_JUMPS, &c.clk)) == 0);
	REQUIRE((shmclock_jump_callback_add(c.clk, th, on_jump, &c, &id)) == 0);
	s.clk = c.clk;
	pthread_create(&t, NULL, sleeper_main, &s);
	sleep_ns(50000000);
	/* A backward jump, seen by the watcher thread (nobody reads). */
	REQUIRE((shmclock_writer_set_time(w, -5000000000LL)) == 0);
	for (int i = 0; i < 200 && atomic_load(&c.callbacks) < 2; i++)
		sleep_ns(5000000);
	EXPECT(atomic_load(&c.callbacks) == 2, "pre and post callbacks: %llu",
	       (unsigned long long)atomic_load(&c.callbacks));
	shmclock_cancel(c.clk, &s.cancel);
	pthread_join(t, NULL);
	EXPECT(s.result == -ECANCELED, "%s", shmclock_strerror(s.result));
	shmclock_close(c.clk);
	shmclock_writer_close(w);
}

/*
 * A cancel issued while the sleeper is between its last look at the token
 * and its futex wait: the wake-up finds nobody waiting, and the word the
 * sleeper waits on (the segment's, read-only here) cannot be changed to
 * stop it from sleeping. The sleep must still end soon: each of these
 * sleeps is 1000 simulated seconds long, and a lost cancel would sleep it.
 */
static void *racer_main(void *p)
{
	struct sleeper *s = p;

	/* 10 s of real time at most: a lost cancel fails, it does not hang. */
	s->result = shmclock_sleep_for_ex(s->clk, shmclock_sec(1000), 0, shmclock_sec(10),
					  &s->cancel);
	return NULL;
}

static void a_cancel_racing_the_sleeper_into_its_wait_is_not_lost(void)
{
	struct ctx c = { .name = test_clock_name() };
	shmclock_writer_t *w;
	int64_t worst = 0;

	REQUIRE((shmclock_writer_open(c.name, &w)) == 0);
	REQUIRE((shmclock_writer_set_time(w, 0)) == 0);
	REQUIRE((shmclock_open(c.name, &c.clk)) == 0);
	for (int i = 0; i < 300; i++) {
		struct sleeper s = { .clk = c.clk, .cancel = SHMCLOCK_CANCEL_INIT };
		pthread_t t;
		int64_t t0;

		pthread_create(&t, NULL, racer_main, &s);
		/* Cancel at every moment of the sleeper's start: now, or after
		 * a few microseconds of spinning. */
		for (volatile int k = 0; k < (i % 30) * 200; k++)
			;
		t0 = now_mono();
		shmclock_cancel(c.clk, &s.cancel);
		pthread_join(t, NULL);
		if (now_mono() - t0 > worst)
			worst = now_mono() - t0;
		EXPECT(s.result == -ECANCELED, "round %d: %s", i, shmclock_strerror(s.result));
		if (s.result != -ECANCELED)
			break;
	}
	printf("# cancel racing 300 sleepers into their waits: slowest wake %.3f ms\n",
	       (double)worst / 1e6);
	/* Not a speed claim: a lost cancel sleeps 1000 s; 5 s means found. */
	EXPECT(worst < 5000000000LL, "a cancel took %.3f s", (double)worst / 1e9);
	shmclock_close(c.clk);
	shmclock_writer_close(w);
}

static const struct {
	const char *name;
	void (*run)(void);
} cases[] = {
	{ "a_cancel_racing_the_sleeper_into_its_wait_is_not_lost",
	  a_cancel_racing_the_sleeper_into_its_wait_is_not_lost },
	{ "two_threads_no_torn_reads", two_threads_no_torn_reads },
	{ "two_readers_time_never_goes_back_while_callbacks_churn",
	  two_readers_time_never_goes_back_while_callbacks_churn },
	{ "a_sleeper_is_cancelled_from_another_thread_and_jumps_are_delivered",
	  a_sleeper_is_cancelled_from_another_thread_and_jumps_are_delivered },
};

/* Killed (a meson timeout, Ctrl-C): the case's clocks go too. */
static void on_kill(int sig)
{
	test_cleanup();
	signal(sig, SIG_DFL);
	raise(sig);
}

int main(void)
{
	int n = (int)(sizeof(cases) / sizeof(cases[0])), failed = 0;

	signal(SIGTERM, on_kill);
	signal(SIGINT, on_kill);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("TAP version 13\n1..%d\n", n);
	for (int i = 0; i < n; i++) {
		failures_in_case = 0;
		cases[i].run();
		test_cleanup();
		printf("%sok %d - threads::%s\n", failures_in_case ? "not " : "", i + 1, cases[i].name);
		failed += failures_in_case != 0;
	}
	return failed ? 1 : 0;
}
