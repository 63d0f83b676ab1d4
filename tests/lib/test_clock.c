/* SPDX-License-Identifier: MIT */
/* The writer/reader contract, one process at a time. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "../helpers.h"
#include "stuck_writer.h"
#include <shmclock/static/shmclock.h>
#include <shmclock/time.h>

TestSuite(clock, .fini = test_cleanup, .timeout = 30);

#define NSEC INT64_C(1000000000)
#define MS 1000000LL

/* Until CLOCK_MONOTONIC is past @at, plus a millisecond: a fixed sleep
 * past an instant a few milliseconds ahead is a real-time bound that a
 * loaded machine (a sanitizer, two suites side by side) breaks. The
 * instants themselves are a few hundred milliseconds ahead, for the same
 * reason: the code between the reading and the call must fit. */
static void wait_past(int64_t at)
{
	int64_t now;

	while ((now = shmclock_static_mono()) <= at + MS)
		sleep_ns(at + MS - now + 1);
}

struct pair {
	const char *name;
	shmclock_writer_t *w;
	shmclock_t *r;
};

static struct pair open_pair(void)
{
	struct pair p = { test_clock_name(), NULL, NULL };

	cr_assert_eq(shmclock_writer_open(p.name, &p.w), 0);
	cr_assert_eq(shmclock_open(p.name, &p.r), 0);
	return p;
}

static void close_pair(struct pair *p)
{
	shmclock_close(p->r);
	shmclock_writer_close(p->w);
	shmclock_unlink(p->name);
}

static shmclock_info_t info_of(shmclock_t *r)
{
	shmclock_info_t i;

	cr_assert_eq(shmclock_info(r, &i), 0);
	return i;
}

Test(clock, opening_a_missing_clock_is_ENOENT)
{
	shmclock_t *r = (shmclock_t *)&r;

	cr_expect_eq(shmclock_open(test_clock_name(), &r), -ENOENT);
	cr_expect_null(r, "the handle is cleared on failure");
}

Test(clock, bad_names_are_EINVAL_for_readers_writers_and_unlink)
{
	char longname[80];
	const char *bad[] = { "", "../x", "a/b", "x y", "caf\xc3\xa9", "semi;colon", longname };
	shmclock_writer_t *w;
	shmclock_t *r;

	memset(longname, 'a', 65);
	longname[65] = 0;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_expect_eq(shmclock_open(bad[i], &r), -EINVAL, "reader, name '%s'", bad[i]);
		cr_expect_eq(shmclock_writer_open(bad[i], &w), -EINVAL, "writer, name '%s'", bad[i]);
		cr_expect_eq(shmclock_unlink(bad[i]), -EINVAL, "unlink, name '%s'", bad[i]);
	}
	cr_expect_eq(shmclock_open(NULL, &r), -EINVAL);
	longname[64] = 0; /* exactly 64 is allowed */
	cr_expect_eq(shmclock_check_name(longname), 0);
	cr_expect_eq(shmclock_check_name("a.B-9_z"), 0);
}

Test(clock, a_new_clock_is_uninitialized_until_set)
{
	struct pair p = open_pair();
	int64_t t = 12345;

	cr_expect_eq(shmclock_now(p.r, &t), -ENODATA);
	cr_expect_eq(t, 12345, "no value is written for an uninitialized clock");
	cr_expect_not(info_of(p.r).initialized);
	cr_assert_eq(shmclock_writer_set_time(p.w, 0), 0);
	cr_expect_eq(shmclock_now(p.r, &t), 0, "time zero is a time once initialized");
	cr_expect_geq(t, 0);
	close_pair(&p);
}

Test(clock, set_time_runs_at_scale_one_from_the_value_set)
{
	struct pair p = open_pair();
	shmclock_info_t a, b;

	cr_assert_eq(shmclock_writer_set_time(p.w, 5000000000), 0);
	a = info_of(p.r);
	sleep_ns(20000000);
	b = info_of(p.r);
	cr_expect(a.initialized && !a.paused && !a.stepped);
	cr_expect_eq(a.scale, 1.0);
	cr_expect_geq(a.sim_ns, 5000000000);
	/* Exactly the monotonic time elapsed between the two snapshots. */
	cr_expect_eq(b.sim_ns - a.sim_ns, b.mono_ns - a.mono_ns);
	close_pair(&p);
}

Test(clock, scale_two_doubles_the_rate_exactly)
{
	struct pair p = open_pair();
	shmclock_info_t a, b;

	cr_assert_eq(shmclock_writer_set_time(p.w, 0), 0);
	cr_assert_eq(shmclock_writer_set_scale(p.w, 2.0), 0);
	a = info_of(p.r);
	sleep_ns(20000000);
	b = info_of(p.r);
	cr_expect_eq(a.scale, 2.0);
	/* floor() per reading: the difference is within 1 ns of 2x. */
	cr_expect_leq(llabs((b.sim_ns - a.sim_ns) - 2 * (b.mono_ns - a.mono_ns)), 1);
	cr_assert_eq(shmclock_writer_set_scale(p.w, 0.25), 0);
	a = info_of(p.r);
	sleep_ns(20000000);
	b = info_of(p.r);
	cr_expect_leq(llabs((b.sim_ns - a.sim_ns) - (b.mono_ns - a.mono_ns) / 4), 1);
	close_pair(&p);
}

Test(clock, pause_freezes_time_and_resume_continues_from_there)
{
	struct pair p = open_pair();
	int64_t t1, t2, t3, m0, m1;

	cr_assert_eq(shmclock_writer_set_time(p.w, 1000), 0);
	cr_assert_eq(shmclock_writer_pause(p.w), 0);
	cr_assert_eq(shmclock_now(p.r, &t1), 0);
	sleep_ns(10000000);
	cr_assert_eq(shmclock_now(p.r, &t2), 0);
	cr_expect_eq(t1, t2, "paused time does not move");
	cr_expect(info_of(p.r).paused);
	m0 = shmclock_static_mono();
	cr_assert_eq(shmclock_writer_resume(p.w), 0);
	cr_assert_eq(shmclock_now(p.r, &t3), 0);
	m1 = shmclock_static_mono();
	cr_expect_geq(t3, t2);
	/* At scale 1, no more than the real time around the resume. */
	cr_expect_leq(t3 - t2, m1 - m0, "resume does not jump (%lld ns in %lld)", (long long)(t3 - t2),
		      (long long)(m1 - m0));
	cr_expect_eq(info_of(p.r).jump_epoch, 0, "pause and resume are not jumps");
	close_pair(&p);
}

Test(clock, set_time_is_a_jump_with_epoch_and_signed_size)
{
	struct pair p = open_pair();
	shmclock_info_t i;
	int64_t t;

	cr_assert_eq(shmclock_writer_pause(p.w), 0);
	cr_assert_eq(shmclock_writer_set_time(p.w, 10000000000), 0);
	cr_expect(info_of(p.r).paused, "pause before the first set_time holds");
	cr_expect_eq(info_of(p.r).jump_epoch, 0, "initialization is not a jump");
	cr_assert_eq(shmclock_writer_set_time(p.w, 4000000000), 0);
	i = info_of(p.r);
	cr_expect_eq(i.jump_epoch, 1);
	cr_expect_eq(i.last_jump_ns, -6000000000);
	cr_expect(i.paused, "a jump keeps the clock paused");
	cr_assert_eq(shmclock_now(p.r, &t), 0);
	cr_expect_eq(t, 4000000000);
	cr_assert_eq(shmclock_writer_set_time(p.w, 4500000000), 0);
	i = info_of(p.r);
	cr_expect_eq(i.jump_epoch, 2);
	cr_expect_eq(i.last_jump_ns, 500000000);
	close_pair(&p);
}

Test(clock, advance_steps_without_extrapolation_and_backwards_is_a_jump)
{
	struct pair p = open_pair();
	shmclock_info_t i;
	int64_t t;

	cr_assert_eq(shmclock_writer_advance(p.w, 100), 0);
	sleep_ns(5000000);
	cr_assert_eq(shmclock_now(p.r, &t), 0);
	cr_expect_eq(t, 100, "a stepped clock holds its value");
	cr_assert_eq(shmclock_writer_advance(p.w, 200), 0);
	i = info_of(p.r);
	cr_expect(i.stepped);
	cr_expect_eq(i.sim_ns, 200);
	cr_expect_eq(i.jump_epoch, 0, "forward steps are not jumps");
	cr_assert_eq(shmclock_writer_advance(p.w, 150), 0);
	i = info_of(p.r);
	cr_expect_eq(i.jump_epoch, 1);
	cr_expect_eq(i.last_jump_ns, -50);
	close_pair(&p);
}

Test(clock, step_moves_a_paused_clock_forward_exactly)
{
	struct pair p = open_pair();
	int64_t t1, t2;

	cr_expect_eq(shmclock_writer_step(p.w, 10), -ENODATA);
	cr_assert_eq(shmclock_writer_set_time(p.w, 0), 0);
	cr_assert_eq(shmclock_writer_pause(p.w), 0);
	cr_assert_eq(shmclock_now(p.r, &t1), 0);
	cr_assert_eq(shmclock_writer_step(p.w, 16666667), 0);
	cr_assert_eq(shmclock_now(p.r, &t2), 0);
	cr_expect_eq(t2 - t1, 16666667);
	cr_expect(info_of(p.r).paused);
	cr_expect_eq(info_of(p.r).jump_epoch, 0);
	cr_expect_eq(shmclock_writer_step(p.w, -1), -EINVAL);
	close_pair(&p);
}

Test(clock, bad_scales_are_refused_and_leave_the_clock_alone)
{
	struct pair p = open_pair();
	double bad[] = { 0.0, -1.0, NAN, INFINITY, -INFINITY };
	uint64_t commits;

	cr_assert_eq(shmclock_writer_set_time(p.w, 0), 0);
	cr_assert_eq(shmclock_writer_set_scale(p.w, 3.0), 0);
	commits = info_of(p.r).commits;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(shmclock_writer_set_scale(p.w, bad[i]), -EINVAL, "scale %g", bad[i]);
	cr_expect_eq(shmclock_writer_set_scale(p.w, 1e-12), -ERANGE);
	cr_expect_eq(shmclock_writer_set_scale(p.w, 1e12), -ERANGE);
	cr_expect_eq(info_of(p.r).scale, 3.0);
	cr_expect_eq(info_of(p.r).commits, commits, "nothing was published");
	close_pair(&p);
}

Test(clock, a_second_writer_is_EBUSY)
{
	struct pair p = open_pair();
	shmclock_writer_t *w2 = NULL;

	cr_expect_eq(shmclock_writer_open(p.name, &w2), -EBUSY);
	cr_expect_null(w2);
	close_pair(&p);
}

Test(clock, a_closed_writer_leaves_time_running_stale_and_the_next_one_continues)
{
	struct pair p = open_pair();
	shmclock_info_t a, b;
	int64_t t;

	cr_assert_eq(shmclock_writer_set_time(p.w, 0), 0);
	cr_assert_eq(shmclock_writer_set_scale(p.w, 2.0), 0);
	a = info_of(p.r);
	cr_expect(a.writer_alive);
	shmclock_writer_close(p.w);
	cr_expect_eq(shmclock_now(p.r, &t), -ESTALE);
	cr_expect_geq(t, a.sim_ns, "the stale value is still filled in");
	cr_expect_not(info_of(p.r).writer_alive);
	cr_assert_eq(shmclock_writer_open(p.name, &p.w), 0);
	b = info_of(p.r);
	cr_expect(b.writer_alive);
	cr_expect_eq(b.writer_generation, a.writer_generation + 1);
	cr_expect_eq(b.scale, 2.0, "the new writer keeps the time function");
	cr_expect_leq(llabs((b.sim_ns - a.sim_ns) - 2 * (b.mono_ns - a.mono_ns)), 1,
		      "no jump across the change of writer");
	cr_expect_eq(b.jump_epoch, 0);
	close_pair(&p);
}

Test(clock, info_reports_source_unix_zero_and_writer)
{
	struct pair p = open_pair();
	int64_t zero = 1700000000000000000;
	shmclock_info_t i;

	cr_assert_eq(shmclock_writer_set_source(p.w, SHMCLOCK_SOURCE_FIXED), 0);
	cr_assert_eq(shmclock_writer_set_unix_at_zero(p.w, &zero), 0);
	cr_assert_eq(shmclock_writer_heartbeat(p.w), 0);
	i = info_of(p.r);
	cr_expect_eq(i.source, SHMCLOCK_SOURCE_FIXED);
	cr_expect_str_eq(shmclock_source_name(i.source), "fixed");
	cr_expect(i.has_unix_at_zero);
	cr_expect_eq(i.unix_at_zero_ns, zero);
	cr_expect_eq(i.writer_pid, getpid());
	cr_expect_geq(i.heartbeat_age_ns, 0);
	cr_assert_eq(shmclock_writer_set_unix_at_zero(p.w, NULL), 0);
	cr_expect_not(info_of(p.r).has_unix_at_zero);
	cr_expect_eq(shmclock_writer_set_source(p.w, 256), -EINVAL);
	close_pair(&p);
}

Test(clock, now_unix_adds_unix_at_zero_in_the_same_read)
{
	struct pair p = open_pair();
	int64_t zero = 1700000000000000000, sim, unix_ns;

	cr_assert_eq(shmclock_writer_set_time(p.w, 0), 0);
	cr_assert_eq(shmclock_writer_pause(p.w), 0);
	cr_assert_eq(shmclock_writer_set_time(p.w, 5000000000), 0);
	cr_assert_eq(shmclock_now_unix(p.r, &unix_ns), 0);
	cr_expect_eq(unix_ns, 5000000000, "no UnixTimeAtZero: the simulation time itself");
	cr_assert_eq(shmclock_writer_set_unix_at_zero(p.w, &zero), 0);
	cr_assert_eq(shmclock_now(p.r, &sim), 0);
	cr_assert_eq(shmclock_now_unix(p.r, &unix_ns), 0);
	cr_expect_eq(unix_ns, zero + sim);
	cr_assert_eq(shmclock_writer_set_time(p.w, -2000000000), 0);
	cr_assert_eq(shmclock_now_unix(p.r, &unix_ns), 0, "through the jump path");
	cr_expect_eq(unix_ns, zero - 2000000000);
	close_pair(&p);
}

Test(clock, the_segment_is_created_0644_whatever_the_umask)
{
	const char *name = test_clock_name();
	char path[128];
	shmclock_writer_t *w;
	struct stat st;
	mode_t old = umask(0077);

	cr_assert_eq(shmclock_writer_open(name, &w), 0);
	umask(old);
	snprintf(path, sizeof(path), "/dev/shm/shmclock.%s", name);
	cr_assert_eq(stat(path, &st), 0);
	cr_expect_eq(st.st_mode & 0777, 0644);
	shmclock_writer_close(w);
	shmclock_unlink(name);
}

Test(clock, the_inline_fast_path_agrees_with_the_library)
{
	struct pair p = open_pair();
	int64_t a, b, c;

	cr_expect_eq(shmclock_static_now(p.r, &a), -ENODATA, "falls back when uninitialized");
	cr_assert_eq(shmclock_writer_pause(p.w), 0);
	cr_assert_eq(shmclock_writer_set_time(p.w, 777), 0);
	cr_assert_eq(shmclock_static_now(p.r, &a), 0);
	cr_assert_eq(shmclock_now(p.r, &b), 0);
	cr_expect_eq(a, 777);
	cr_expect_eq(a, b);
	shmclock_writer_close(p.w);
	cr_expect_eq(shmclock_static_now(p.r, &c), -ESTALE, "falls back for a dead writer");
	cr_expect_eq(c, 777);
	shmclock_close(p.r);
	shmclock_unlink(p.name);
}

/*
 * The time function as its comment states it, in plain 128-bit arithmetic:
 * the reference the fast path's evaluation (two half shifts, a test of the
 * high word) must match bit for bit.
 */
static int64_t eval_reference(int64_t mono_base, int64_t sim_base, uint64_t mult, int64_t mono)
{
	__extension__ typedef unsigned __int128 u128;
	__extension__ typedef __int128 s128;
	u128 q;
	s128 v;

	if (mono <= mono_base || mult == 0)
		return sim_base;
	q = ((u128)((s128)mono - (s128)mono_base) * mult) >> 32;
	if (q > (u128)INT64_MAX)
		return INT64_MAX;
	v = (s128)sim_base + (s128)q;
	return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

Test(clock, the_time_function_is_exact_and_saturates_at_every_edge)
{
	/* Edges of every input: where the product crosses 2^95 (the result's
	 * saturation), the sum crosses INT64_MAX, the difference exceeds
	 * INT64_MAX. */
	static const int64_t ints[] = { INT64_MIN, INT64_MIN + 1, -NSEC, -1, 0, 1, NSEC,
					INT64_C(1) << 31, INT64_C(1) << 32, INT64_C(1) << 62,
					INT64_MAX - NSEC, INT64_MAX - 1, INT64_MAX };
	static const uint64_t mults[] = { 0, 1, UINT64_C(1) << 31, UINT64_C(1) << 32,
					  (UINT64_C(1) << 32) + 1, UINT64_C(3) << 31,
					  UINT64_C(1) << 33, UINT64_C(1) << 63, UINT64_MAX };
	const size_t ni = sizeof(ints) / sizeof(ints[0]), nm = sizeof(mults) / sizeof(mults[0]);
	uint64_t seed = 0x9e3779b97f4a7c15u;
	long checked = 0;

	for (size_t a = 0; a < ni; a++)
		for (size_t b = 0; b < ni; b++)
			for (size_t c = 0; c < ni; c++)
				for (size_t m = 0; m < nm; m++) {
					int64_t got = shmclock_static_eval(ints[a], ints[b], mults[m], ints[c]);
					int64_t want = eval_reference(ints[a], ints[b], mults[m], ints[c]);

					cr_assert_eq(got, want,
						     "eval(%" PRId64 ", %" PRId64 ", %" PRIu64 ", %" PRId64
						     ") = %" PRId64 ", want %" PRId64,
						     ints[a], ints[b], mults[m], ints[c], got, want);
					checked++;
				}
	/* Random inputs, the difference and the rate drawn at every width so
	 * that the product lands on both sides of 2^95 often. */
	for (int i = 0; i < 2000000; i++) {
		uint64_t r = xorshift(&seed);
		int64_t mono_base = (int64_t)xorshift(&seed) >> (r & 63);
		int64_t d = (int64_t)(xorshift(&seed) >> ((r >> 6) & 63));
		int64_t sim_base = (int64_t)xorshift(&seed) >> ((r >> 12) & 63);
		uint64_t mult = xorshift(&seed) >> ((r >> 18) & 63);
		int64_t mono = (int64_t)((uint64_t)mono_base + (uint64_t)d);
		int64_t got = shmclock_static_eval(mono_base, sim_base, mult, mono);
		int64_t want = eval_reference(mono_base, sim_base, mult, mono);

		if (got != want)
			cr_assert_fail("eval(%" PRId64 ", %" PRId64 ", %" PRIu64 ", %" PRId64
				       ") = %" PRId64 ", want %" PRId64,
				       mono_base, sim_base, mult, mono, got, want);
		checked++;
	}
	cr_expect_gt(checked, 2000000);
}

Test(clock, every_error_has_a_message)
{
	int codes[] = { 0, -ENOENT, -EINVAL, -EPROTO, -ENODATA, -ESTALE, -EAGAIN, -EBUSY, -EIO, 5 };

	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		const char *m = shmclock_strerror(codes[i]);

		cr_expect(m && *m, "code %d", codes[i]);
	}
	cr_expect_str_eq(shmclock_version(), SHMCLOCK_VERSION_STRING);
}

Test(clock, the_jump_free_time_ignores_every_jump_and_survives_a_new_writer)
{
	struct pair p = open_pair();
	shmclock_info_t i;
	int64_t t, m;

	cr_assert_eq(shmclock_writer_pause(p.w), 0);
	cr_assert_eq(shmclock_writer_set_time(p.w, 10000000000), 0);
	cr_assert_eq(shmclock_now_monotonic(p.r, &m), 0);
	cr_expect_eq(m, 10000000000, "equal to the simulation time until the first jump");
	cr_assert_eq(shmclock_writer_set_time(p.w, 4000000000), 0); /* back 6 s */
	cr_assert_eq(shmclock_now_monotonic(p.r, &m), 0);
	cr_expect_eq(m, 10000000000, "a jump back does not move it");
	cr_assert_eq(shmclock_writer_step(p.w, 250), 0);
	cr_assert_eq(shmclock_now_monotonic(p.r, &m), 0);
	cr_expect_eq(m, 10000000250, "a step does");
	cr_assert_eq(shmclock_writer_set_time(p.w, 7000000000), 0); /* forward 3 s */
	cr_assert_eq(shmclock_now_monotonic(p.r, &m), 0);
	cr_expect_eq(m, 10000000250, "a jump forward does not move it either");
	i = info_of(p.r);
	cr_expect_eq(i.jump_total_ns, 7000000000 - 10000000250);
	/* A stepped source going back is a jump; forward steps are not. */
	cr_assert_eq(shmclock_writer_advance(p.w, 8000000000), 0);
	cr_assert_eq(shmclock_writer_advance(p.w, 7500000000), 0);
	cr_assert_eq(shmclock_now_monotonic(p.r, &m), 0);
	cr_expect_eq(m, 10000000250 + 1000000000);
	/* The next writer continues the sum. */
	shmclock_writer_close(p.w);
	cr_assert_eq(shmclock_writer_open(p.name, &p.w), 0);
	cr_assert_eq(shmclock_now(p.r, &t), 0);
	cr_assert_eq(shmclock_now_monotonic(p.r, &m), 0);
	cr_expect_eq(m, 10000000250 + 1000000000, "kept across writers");
	cr_expect_eq(t - m, info_of(p.r).jump_total_ns);
	close_pair(&p);
}

/* One table (SHMCLOCK_ERRNO_MAP) gives every code one meaning and its
 * message: no code twice, no message twice, strerror says the table's. */
Test(clock, every_error_code_has_one_meaning_and_its_message)
{
#define CODE(name, msg) name,
#define MSG(name, msg) msg,
	static const int codes[] = { SHMCLOCK_ERRNO_MAP(CODE) };
	static const char *const msgs[] = { SHMCLOCK_ERRNO_MAP(MSG) };
#undef CODE
#undef MSG
	size_t n = sizeof(codes) / sizeof(codes[0]);

	cr_assert_geq(n, 17);
	for (size_t i = 0; i < n; i++) {
		cr_expect_str_eq(shmclock_strerror(-codes[i]), msgs[i], "code %d", codes[i]);
		for (size_t j = i + 1; j < n; j++) {
			cr_expect_neq(codes[i], codes[j], "code %d twice", codes[i]);
			cr_expect_str_neq(msgs[i], msgs[j], "message twice: %s", msgs[i]);
		}
	}
	cr_expect_str_eq(shmclock_strerror(0), "success");
}

Test(clock, a_stale_clock_reads_ESTALE_with_its_value_on_every_path)
{
	struct pair p = open_pair();
	int64_t a, b, c, m;

	cr_assert_eq(shmclock_writer_set_time(p.w, 10 * NSEC), 0);
	cr_assert_eq(shmclock_now(p.r, &a), 0);
	cr_assert_eq(shmclock_writer_set_stale(p.w, true), 0);
	cr_expect(info_of(p.r).stale);
	cr_expect(info_of(p.r).writer_alive, "stale is not dead");
	cr_expect_eq(shmclock_now(p.r, &b), -ESTALE);
	cr_expect_geq(b, a, "the value is filled in and keeps running");
	cr_expect_eq(shmclock_static_now(p.r, &c), -ESTALE, "the inline fast path falls back");
	cr_expect_geq(c, b);
	cr_expect_eq(shmclock_now_monotonic(p.r, &m), -ESTALE);
	cr_expect_eq(shmclock_now_unix(p.r, &m), -ESTALE);
	cr_expect_eq(info_of(p.r).jump_epoch, 0, "a stale mark is not a jump");
	cr_assert_eq(shmclock_writer_set_stale(p.w, false), 0);
	cr_expect_not(info_of(p.r).stale);
	cr_expect_eq(shmclock_now(p.r, &a), 0);
	cr_expect_eq(shmclock_static_now(p.r, &a), 0, "and the fast path serves it again");
	close_pair(&p);
}

/* A commit that changes no part of the function (the stale mark, the
 * source, the UNIX time of zero) leaves it exactly as it was: a hold (a
 * function behind what readers saw, held until it catches up) went on
 * holding. The stale mark re-based the function at the commit instead, and
 * a follower marked stale during a hold ran on from the held value at once:
 * ahead of the function it was given by the rest of the hold. */
Test(clock, a_stale_mark_source_or_unix_zero_leaves_a_hold_holding)
{
	struct pair p = open_pair();
	int64_t mono = shmclock_static_mono(), held, v;
	int64_t uz = 1700000000LL * NSEC;

	cr_assert_eq(shmclock_writer_set_time(p.w, 100 * NSEC), 0);
	cr_assert_eq(shmclock_now(p.r, &held), 0);
	/* 60 s behind, no jump: held at what readers saw for 60 s. */
	cr_assert_eq(shmclock_writer_set_function(p.w, mono, 40 * NSEC, 1.0, 0), 0);
	cr_assert_eq(shmclock_now(p.r, &held), 0);
	cr_assert_geq(held, 100 * NSEC);
	for (int i = 0; i < 4; i++) {
		switch (i) {
		case 0: cr_assert_eq(shmclock_writer_set_stale(p.w, true), 0); break;
		case 1: cr_assert_eq(shmclock_writer_set_stale(p.w, false), 0); break;
		case 2: cr_assert_eq(shmclock_writer_set_source(p.w, SHMCLOCK_SOURCE_EXTERNAL), 0); break;
		case 3: cr_assert_eq(shmclock_writer_set_unix_at_zero(p.w, &uz), 0); break;
		}
		sleep_ns(20 * 1000000);
		v = 0;
		shmclock_now(p.r, &v);
		cr_expect_eq(v, held, "after change %d the clock still holds at %lld (read %lld: "
			     "%+lld ns)", i, (long long)held, (long long)v, (long long)(v - held));
	}
	close_pair(&p);
}

Test(clock, set_function_publishes_the_exact_function)
{
	struct pair p = open_pair();
	int64_t mono = shmclock_static_mono(), v, e;
	shmclock_info_t in;

	/* Anchored 1 s in the past at 100 s, scale 2: now it reads ~102 s. */
	cr_assert_eq(shmclock_writer_set_function(p.w, mono - NSEC,
						  100 * NSEC, 2.0, 0), 0);
	cr_assert_eq(shmclock_info(p.r, &in), 0);
	cr_expect_eq(in.sim_ns, 100 * NSEC + 2 * (in.mono_ns - mono + NSEC));
	cr_expect_eq(in.scale, 2.0);
	cr_expect(in.initialized && !in.paused && !in.stale);
	cr_assert_eq(shmclock_writer_eval(p.w, mono + NSEC, &e), 0);
	cr_expect_eq(e, 104 * NSEC, "eval is the function at any instant");
	/* Paused and stale in one commit, forwards: a leap, not a jump. */
	cr_assert_eq(shmclock_writer_set_function(p.w, mono, 200 * NSEC, 2.0,
						  SHMCLOCK_FN_PAUSED | SHMCLOCK_FN_STALE), 0);
	cr_assert_eq(shmclock_info(p.r, &in), 0);
	cr_expect(in.paused && in.stale);
	cr_expect_eq(in.sim_ns, 200 * NSEC);
	cr_expect_eq(in.jump_epoch, 0);
	cr_expect_eq(shmclock_now(p.r, &v), -ESTALE);
	cr_expect_eq(shmclock_writer_set_function(p.w, mono, 0, 1.0, 0x100), -EINVAL);
	cr_expect_eq(shmclock_writer_set_function(p.w, mono, 0, 0.0, 0), -EINVAL);
	cr_expect_eq(shmclock_writer_set_function(p.w, mono, 0, 1e-12, 0), -ERANGE);
	cr_assert_eq(shmclock_info(p.r, &in), 0);
	cr_expect(in.paused && in.stale && in.sim_ns == 200 * NSEC,
		  "refused: the clock is untouched");
	close_pair(&p);
}

Test(clock, set_function_never_goes_back_without_a_jump)
{
	struct pair p = open_pair();
	int64_t mono = shmclock_static_mono(), before, after;
	shmclock_info_t in;

	cr_assert_eq(shmclock_writer_set_function(p.w, mono, 50 * NSEC, 1.0, 0), 0);
	cr_assert_eq(shmclock_now(p.r, &before), 0);
	/* 10 ms behind, running: held at the current value, then followed. */
	cr_assert_eq(shmclock_writer_set_function(p.w, mono, 50 * NSEC - 10000000,
						  1.0, 0), 0);
	cr_assert_eq(shmclock_now(p.r, &after), 0);
	cr_expect_geq(after, before, "no backward read");
	cr_assert_eq(shmclock_info(p.r, &in), 0);
	cr_expect_eq(in.jump_epoch, 0);
	usleep(30000);
	cr_assert_eq(shmclock_info(p.r, &in), 0);
	cr_expect_leq(llabs(in.sim_ns - (50 * NSEC - 10000000 + (in.mono_ns - mono))), 2,
		      "after the hold it is the function itself (off by %lld)",
		      (long long)(in.sim_ns - (50 * NSEC - 10000000 + (in.mono_ns - mono))));
	/* Paused behind: held where it is for good. */
	cr_assert_eq(shmclock_now(p.r, &before), 0);
	cr_assert_eq(shmclock_writer_set_function(p.w, mono, 0, 1.0, SHMCLOCK_FN_PAUSED), 0);
	cr_assert_eq(shmclock_now(p.r, &after), 0);
	cr_expect_geq(after, before);
	/* With JUMP it goes back, as a jump. */
	cr_assert_eq(shmclock_writer_set_function(p.w, mono, 0, 1.0, SHMCLOCK_FN_PAUSED | SHMCLOCK_FN_JUMP), 0);
	cr_assert_eq(shmclock_info(p.r, &in), 0);
	cr_expect_eq(in.sim_ns, 0);
	cr_expect_eq(in.jump_epoch, 1);
	cr_expect_eq(in.last_jump_ns, -after);
	close_pair(&p);
}

Test(clock, freeze_at_schedules_the_next_change_exactly_at_its_instant)
{
	struct pair p = open_pair();
	int64_t mono, at, want, a, b;
	shmclock_info_t in;

	cr_expect_eq(shmclock_writer_freeze_at(p.w, 0), -ENODATA);
	cr_assert_eq(shmclock_writer_set_time(p.w, 7 * NSEC), 0);
	mono = shmclock_static_mono();
	at = mono + 400 * MS;
	cr_assert_eq(shmclock_writer_eval(p.w, at, &want), 0);
	cr_assert_eq(shmclock_writer_freeze_at(p.w, at), 0);
	cr_expect_eq(shmclock_writer_freeze_at(p.w, at), -EINVAL, "one open update at a time");
	/* Before the instant readers run on with the old function... */
	cr_assert_eq(shmclock_now(p.r, &a), 0);
	usleep(5000);
	cr_assert_eq(shmclock_now(p.r, &b), 0);
	if (shmclock_static_mono() < at) { /* else preempted past it: nothing to see */
		cr_expect_gt(b, a, "time runs until the instant");
		cr_expect_lt(b, want);
	}
	/* ... and stop at its value once it has passed, however late the
	 * change is committed. */
	wait_past(at);
	cr_assert_eq(shmclock_now(p.r, &a), -ESTALE, "held at an undecided instant says so");
	cr_expect_eq(a, want, "frozen at the instant: %lld, want %lld", (long long)a, (long long)want);
	cr_assert_eq(shmclock_writer_pause(p.w), 0);
	cr_assert_eq(shmclock_info(p.r, &in), 0);
	cr_expect(in.paused);
	cr_expect_eq(in.sim_ns, want, "the pause took effect at the instant, not at the commit");
	cr_expect_eq(in.jump_epoch, 0);
	/* A change called before the instant waits for it. */
	mono = shmclock_static_mono();
	cr_assert_eq(shmclock_writer_freeze_at(p.w, mono + 200 * MS), 0);
	cr_assert_eq(shmclock_writer_resume(p.w), 0);
	cr_expect_geq(shmclock_static_mono(), mono + 200 * MS, "resume waited for the instant");
	cr_assert_eq(shmclock_info(p.r, &in), 0);
	cr_expect_eq(in.sim_ns, want + (in.mono_ns - (mono + 200 * MS)),
		     "running again from the instant on");
	close_pair(&p);
}

/* The segment's anchor_mono_ns and backup mono_base (segment.h, 0x158 and
 * 0x188), as a reader process maps them. */
static void seg_anchor(const char *name, int64_t *anchor, int64_t *b_mono_base)
{
	char path[128];
	int fd;
	void *m;

	snprintf(path, sizeof(path), "/dev/shm/shmclock.%s", name);
	fd = open(path, O_RDONLY);
	cr_assert_geq(fd, 0);
	m = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	cr_assert_neq(m, MAP_FAILED);
	memcpy(anchor, (const char *)m + 0x158, 8);
	memcpy(b_mono_base, (const char *)m + 0x188, 8);
	munmap(m, 4096);
	close(fd);
}

Test(clock, a_withdrawn_instant_lets_readers_and_changes_go_on_at_once)
{
	struct pair p = open_pair();
	int64_t mono, at, want, a, b, anchor, base;
	shmclock_info_t in;

	cr_assert_eq(shmclock_writer_set_time(p.w, 7 * NSEC), 0);
	cr_expect_eq(shmclock_writer_withdraw(p.w), -ENODATA, "nothing open");
	/* Held 5 s ahead, withdrawn: no wait, the function unchanged. */
	mono = shmclock_static_mono();
	at = mono + 5 * NSEC;
	cr_assert_eq(shmclock_writer_freeze_at(p.w, at), 0);
	seg_anchor(p.name, &anchor, &base);
	cr_expect_eq(anchor, at, "the hold's anchor is published (W2a)");
	cr_assert_eq(shmclock_now(p.r, &a), 0);
	cr_assert_eq(shmclock_writer_withdraw(p.w), 0);
	cr_expect_eq(shmclock_writer_withdraw(p.w), -ENODATA, "withdrawn once");
	seg_anchor(p.name, &anchor, &base);
	cr_expect_leq(anchor, base, "the anchor is withdrawn (X2): %lld > mono_base %lld",
		      (long long)anchor, (long long)base);
	cr_assert_eq(shmclock_now(p.r, &b), 0, "fresh, not held");
	cr_expect_geq(b, a);
	/* A change now takes effect now, not at the withdrawn instant. */
	cr_assert_eq(shmclock_writer_pause(p.w), 0);
	cr_expect_lt(shmclock_static_mono(), at, "the change after a withdrawal waited for its instant");
	cr_assert_eq(shmclock_info(p.r, &in), 0);
	cr_expect(in.paused);
	cr_expect_lt(in.sim_ns, 7 * NSEC + 4 * NSEC, "paused now, not at the instant 5 s ahead");
	cr_expect_eq(in.jump_epoch, 0);
	cr_assert_eq(shmclock_writer_resume(p.w), 0);
	/* Held past its instant, then withdrawn: readers run on from the
	 * function in force (forwards from the held value, never back). */
	at = shmclock_static_mono() + 200 * MS;
	cr_assert_eq(shmclock_writer_eval(p.w, at, &want), 0);
	cr_assert_eq(shmclock_writer_freeze_at(p.w, at), 0);
	wait_past(at);
	cr_assert_eq(shmclock_now(p.r, &a), -ESTALE, "held");
	cr_expect_eq(a, want);
	cr_assert_eq(shmclock_writer_withdraw(p.w), 0);
	cr_assert_eq(shmclock_info(p.r, &in), 0);
	cr_expect_eq(in.sim_ns, want + (in.mono_ns - at), "the function in force, from the instant on");
	cr_expect_eq(in.jump_epoch, 0, "no jump");
	/* Decided ahead: the decision stands. */
	at = shmclock_static_mono() + 2 * NSEC;
	cr_assert_eq(shmclock_writer_eval(p.w, at, &want), 0);
	cr_assert_eq(shmclock_writer_freeze_at(p.w, at), 0);
	cr_assert_eq(shmclock_writer_set_function(p.w, at, want, 2.0, SHMCLOCK_FN_AHEAD), 0);
	cr_expect_eq(shmclock_writer_withdraw(p.w), -EALREADY, "a decision is not withdrawn");
	close_pair(&p);
}

Test(clock, a_change_decided_ahead_takes_effect_at_its_instant_without_its_commit)
{
	struct pair p = open_pair();
	int64_t at, want, a, b;
	shmclock_info_t in;

	cr_assert_eq(shmclock_writer_set_time(p.w, 7 * NSEC), 0);
	cr_expect_eq(shmclock_writer_set_function(p.w, 0, 0, 1.0, SHMCLOCK_FN_AHEAD), -EALREADY,
		     "nothing open to decide");
	at = shmclock_static_mono() + 400 * MS;
	cr_assert_eq(shmclock_writer_eval(p.w, at, &want), 0);
	cr_assert_eq(shmclock_writer_eval(p.w, at - 10 * MS, &a), 0);
	cr_expect_eq(shmclock_writer_freeze_at(p.w, at + 11 * NSEC), -ERANGE, "at most 10 s ahead");
	cr_assert_eq(shmclock_writer_freeze_at(p.w, at), 0);
	cr_assert_eq(shmclock_writer_set_function(p.w, at, want, 2.0, SHMCLOCK_FN_AHEAD), 0);
	/* The writer tells what readers get: the old function before the
	 * instant, the decided one from there. */
	cr_assert_eq(shmclock_writer_eval(p.w, at - 10 * MS, &b), 0);
	cr_expect_eq(b, a, "eval before the instant: %lld, want %lld", (long long)b, (long long)a);
	cr_assert_eq(shmclock_writer_eval(p.w, at + 10 * MS, &b), 0);
	cr_expect_eq(b, want + 20 * MS);
	cr_expect_eq(shmclock_writer_set_function(p.w, at, want, 3.0, SHMCLOCK_FN_AHEAD), -EALREADY,
		     "decided once");
	cr_expect_eq(shmclock_writer_complete(p.w), -EAGAIN, "its instant is still to come");
	cr_assert_eq(shmclock_now(p.r, &a), 0);
	if (shmclock_static_mono() < at) /* else preempted past it */
		cr_expect_lt(a, want, "the old function until the instant");
	/* Past the instant, with no call to the writer: readers compute the
	 * decided function themselves, exactly. */
	wait_past(at);
	cr_assert_eq(shmclock_info(p.r, &in), 0);
	cr_expect_gt(in.mono_ns, at);
	cr_expect_eq(in.sim_ns, want + 2 * (in.mono_ns - at), "%lld, want %lld",
		     (long long)in.sim_ns, (long long)(want + 2 * (in.mono_ns - at)));
	cr_expect_eq(in.scale, 2.0);
	cr_expect_eq(in.jump_epoch, 0, "a rate change is no jump");
	cr_assert_eq(shmclock_now(p.r, &a), 0, "decided: not held, not stale");
	cr_expect_gt(a, in.sim_ns);
	cr_assert_eq(shmclock_writer_complete(p.w), 0);
	cr_expect_eq(shmclock_writer_complete(p.w), -ENODATA, "completed once");
	cr_assert_eq(shmclock_now(p.r, &b), 0);
	cr_expect_geq(b, a, "the commit moves nothing");
	cr_assert_eq(shmclock_info(p.r, &in), 0);
	cr_expect_eq(in.sim_ns, want + 2 * (in.mono_ns - at), "the record is the decided function");
	close_pair(&p);
}

Test(clock, a_writer_killed_after_deciding_ahead_leaves_its_decision_standing)
{
	const char *name = test_clock_name();
	int64_t at, want, a, b;
	shmclock_info_t in;
	shmclock_writer_t *w;
	shmclock_t *r;
	int fds[2], st;
	pid_t pid;

	cr_assert_eq(pipe(fds), 0);
	at = shmclock_static_mono() + 1000 * MS;
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		/* A writer that decides a pause at @at and dies before it. */
		int64_t v = 0;

		close(fds[0]);
		if (shmclock_writer_open(name, &w) || shmclock_writer_set_time(w, 3 * NSEC) ||
		    shmclock_writer_eval(w, at, &v) || shmclock_writer_freeze_at(w, at) ||
		    shmclock_writer_set_function(w, at, v, 1.0, SHMCLOCK_FN_PAUSED | SHMCLOCK_FN_AHEAD))
			_exit(1);
		(void)!write(fds[1], &v, sizeof(v));
		_exit(0); /* no close: the kernel marks the lock's owner dead */
	}
	close(fds[1]);
	cr_assert_eq(read(fds[0], &want, sizeof(want)), (ssize_t)sizeof(want), "the writer failed");
	close(fds[0]);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert_eq(shmclock_open(name, &r), 0);
	cr_assert_eq(shmclock_now(r, &a), -ESTALE, "the writer is dead");
	if (shmclock_static_mono() < at) /* else preempted past it */
		cr_expect_lt(a, want);
	wait_past(at);
	/* Past the instant the dead writer's decision holds: paused there. */
	cr_assert_eq(shmclock_now(r, &a), -ESTALE);
	cr_expect_eq(a, want, "paused at the decided instant: %lld, want %lld", (long long)a,
		     (long long)want);
	/* A new writer keeps it and completes it there: nothing moves. */
	cr_assert_eq(shmclock_writer_open(name, &w), 0);
	cr_assert_eq(shmclock_now(r, &b), 0);
	cr_expect_eq(b, want, "a new writer keeps the decision");
	cr_assert_eq(shmclock_writer_complete(w), 0);
	cr_assert_eq(shmclock_info(r, &in), 0);
	cr_expect(in.paused);
	cr_expect_eq(in.sim_ns, want);
	cr_expect_eq(in.jump_epoch, 0);
	cr_assert_eq(shmclock_writer_resume(w), 0);
	sleep_ns(5 * MS);
	cr_assert_eq(shmclock_now(r, &b), 0);
	cr_expect_gt(b, want, "runs on from there");
	shmclock_close(r);
	shmclock_writer_close(w);
	shmclock_unlink(name);
}

Test(clock, a_writer_opening_the_clock_moves_no_decided_instant)
{
	struct pair p = open_pair();
	int64_t at, want, v;
	shmclock_writer_t *w2;
	int st;
	pid_t pid;

	cr_assert_eq(shmclock_writer_set_time(p.w, NSEC), 0);
	at = shmclock_static_mono() + 1000 * MS;
	cr_assert_eq(shmclock_writer_eval(p.w, at, &want), 0);
	cr_assert_eq(shmclock_writer_freeze_at(p.w, at), 0);
	/* A second writer (another shmclockd, a tool) opens the clock and is
	 * refused: on its way it withdraws the published anchor (V0). */
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(shmclock_writer_open(p.name, &w2) == -EBUSY ? 0 : 1);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the second writer was not refused");
	cr_assert_eq(shmclock_writer_set_function(p.w, at, 100 * NSEC, 1.0,
						  SHMCLOCK_FN_JUMP | SHMCLOCK_FN_AHEAD), 0);
	/* Before the instant, readers keep the old function. */
	cr_assert_eq(shmclock_now(p.r, &v), 0);
	if (shmclock_static_mono() < at) /* else preempted past it */
		cr_expect_lt(v, want, "a jump decided for an instant 1 s away is seen now: %lld",
			     (long long)v);
	close_pair(&p);
}

struct sleeper {
	shmclock_t *r;
	int64_t target, woke;
};

struct held_sleeper {
	shmclock_t *r;
	int64_t target, cpu;
	int e;
};

static void *sleep_with_timeout(void *arg)
{
	struct held_sleeper *s = arg;
	struct timespec c0, c1;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
	s->e = shmclock_sleep_until_ex(s->r, (shmclock_sim_time_t){ s->target }, 0,
				       (shmclock_duration_t){ 300 * MS }, NULL);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
	s->cpu = (c1.tv_sec - c0.tv_sec) * NSEC + (c1.tv_nsec - c0.tv_nsec);
	return NULL;
}

Test(clock, a_sleeper_held_at_an_undecided_instant_times_out_without_spinning)
{
	struct pair p = open_pair();
	struct held_sleeper sl;
	struct timespec lim;
	pthread_t t;
	int64_t at, v;

	cr_assert_eq(shmclock_writer_set_time(p.w, 0), 0);
	at = shmclock_static_mono() + 20 * MS;
	cr_assert_eq(shmclock_writer_eval(p.w, at, &v), 0);
	cr_assert_eq(shmclock_writer_freeze_at(p.w, at), 0);
	sl = (struct held_sleeper){ p.r, v + 10 * NSEC, 0, 1 };
	cr_assert_eq(pthread_create(&t, NULL, sleep_with_timeout, &sl), 0);
	/* Never decided while the sleeper waits: its 300 ms timeout must end
	 * it (the held clock stops; the real one does not). */
	clock_gettime(CLOCK_REALTIME, &lim);
	lim.tv_sec += 5;
	cr_assert_eq(pthread_timedjoin_np(t, NULL, &lim), 0,
		     "a sleep with a 300 ms timeout still runs after 5 s while held");
	cr_expect_eq(sl.e, -ETIMEDOUT, "%s", shmclock_strerror(sl.e));
	cr_expect_lt(sl.cpu, 150 * MS, "the held sleeper burned %lld ms of CPU in a 300 ms wait",
		     (long long)(sl.cpu / MS));
	cr_assert_eq(shmclock_writer_resume(p.w), 0);
	close_pair(&p);
}

static void *sleep_to_target(void *arg)
{
	struct sleeper *s = arg;

	if (shmclock_sleep_until(s->r, (shmclock_sim_time_t){ s->target }, 0) == 0)
		s->woke = shmclock_static_mono();
	return NULL;
}

Test(clock, a_sleeper_follows_a_rate_decided_ahead_without_its_commit)
{
	struct pair p = open_pair();
	struct sleeper sl;
	pthread_t t;
	int64_t at, want;

	cr_assert_eq(shmclock_writer_set_time(p.w, 0), 0);
	at = shmclock_static_mono() + 500 * MS;
	cr_assert_eq(shmclock_writer_eval(p.w, at, &want), 0);
	/* 2 s of simulated time past the instant: 2 s of real time at the
	 * old rate, 0.2 s at the decided one. */
	sl = (struct sleeper){ p.r, want + 2 * NSEC, 0 };
	cr_assert_eq(pthread_create(&t, NULL, sleep_to_target, &sl), 0);
	sleep_ns(10 * MS);
	cr_assert_eq(shmclock_writer_freeze_at(p.w, at), 0);
	cr_assert_eq(shmclock_writer_set_function(p.w, at, want, 10.0, SHMCLOCK_FN_AHEAD), 0);
	/* The writer commits nothing more: the sleeper must see the rate
	 * change at the instant by itself. */
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_assert_gt(sl.woke, 0, "the sleep failed");
	cr_expect_lt(sl.woke - at, 1500 * MS, "woke %lld ms after the instant (0.2 s expected, 2 s on the old rate)",
		     (long long)((sl.woke - at) / MS));
	close_pair(&p);
}

/* ---------------------------------------- hardening (issue 17) */

Test(clock, a_writer_stopped_mid_update_freezes_time_and_never_blocks_readers)
{
	const char *name = test_clock_name();
	shmclock_writer_t *w;
	struct shmclock_seg *seg;
	shmclock_t *r;
	int64_t anchor, t0, v, prev = INT64_MIN, worst = 0;

	cr_assert_eq(shmclock_writer_open(name, &w), 0);
	cr_assert_eq(shmclock_writer_set_time(w, 0), 0);
	cr_assert_eq(shmclock_open(name, &r), 0);
	sleep_ns(20 * MS);
	cr_assert_eq(shmclock_now(r, &prev), 0);
	seg = stop_mid_update(name, &anchor);
	for (int i = 0; i < 50; i++) {
		int e;

		t0 = now_mono();
		e = shmclock_now(r, &v);
		if (now_mono() - t0 > worst)
			worst = now_mono() - t0;
		cr_assert_eq(e, 0, "read %d: %s", i, shmclock_strerror(e));
		cr_assert_geq(v, prev, "time went back while the writer was stuck");
		prev = v;
		sleep_ns(2 * MS);
	}
	/* Frozen at the anchor: the last committed function's value there. */
	cr_assert_eq(v, shmclock_static_eval(atomic_load(&seg->b_mono_base), atomic_load(&seg->b_sim_base),
					     atomic_load(&seg->b_mult), anchor));
	cr_assert_lt(worst, 50 * MS, "a read took %lld ms", (long long)(worst / MS));
	/* The update completes as a pause at its anchor: nothing goes back. */
	finish_as_pause(seg, anchor);
	cr_assert_eq(shmclock_now(r, &v), 0);
	cr_assert_geq(v, prev);
	shmclock_close(r);
	shmclock_writer_close(w);
}

Test(clock, scales_the_rate_cannot_hold_within_a_tenth_of_a_percent_are_refused)
{
	const char *name = test_clock_name();
	shmclock_writer_t *w;
	shmclock_info_t in;

	cr_assert_eq(shmclock_writer_open(name, &w), 0);
	cr_assert_eq(shmclock_writer_set_scale(w, 1e-9), -ERANGE);
	cr_assert_eq(shmclock_writer_set_scale(w, 1e-6), 0);
	cr_assert_eq(shmclock_writer_info(w, &in), 0);
	cr_assert_lt(fabs(in.scale / 1e-6 - 1), 1e-3, "scale 1e-6 became %g", in.scale);
	shmclock_writer_close(w);
}
