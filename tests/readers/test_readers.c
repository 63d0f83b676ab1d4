/* SPDX-License-Identifier: MIT */
/* End to end: the reader programs against a real shmclockd. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include "../daemon.h"

TestSuite(readers, .init = daemon_setup, .fini = daemon_teardown, .timeout = 60);

static char out[16384], err[4096];

/* Runs reader program @prog (env var with its path) with args. */
static int run(const char *prog, ...)
{
	char *argv[20];
	int n = 0;
	va_list ap;

	argv[n++] = (char *)bin(prog);
	va_start(ap, prog);
	for (const char *a; (a = va_arg(ap, const char *)) && n < 19;)
		argv[n++] = (char *)a;
	va_end(ap);
	argv[n] = NULL;
	return run_capture(argv, out, sizeof(out), err, sizeof(err));
}

static pid_t start(const char *name, const char *extra)
{
	char *args[] = { "-n", (char *)name, (char *)extra, NULL };
	pid_t d = daemon_start_v(args, NULL);

	cr_assert_gt(d, 0, "shmclockd did not start");
	return d;
}

Test(readers, cat_prints_the_clock)
{
	const char *name = test_clock_name();
	pid_t d = start(name, "--start=100s");
	long long v;

	cr_assert_eq(run("SHMCLOCK_CAT", "-n", name, NULL), 0, "%s", err);
	v = atoll(out);
	cr_assert_geq(v, 100000000000LL);
	cr_assert_lt(v, 102000000000LL);
	cr_assert_eq(run("SHMCLOCK_CAT", "-n", name, "--format", "s", NULL), 0);
	cr_assert(strstr(out, "10") && strchr(out, '.') && strstr(out, "s\n"), "%s", out);
	cr_assert_eq(run("SHMCLOCK_CAT", "-n", name, "--follow", "100", "--count", "3", NULL), 0);
	{
		long long a, b, c;

		cr_assert_eq(sscanf(out, "%lld\n%lld\n%lld", &a, &b, &c), 3, "%s", out);
		cr_assert(a < b && b < c, "%s", out);
	}
	cr_assert_eq(run("SHMCLOCK_CAT", "-n", name, "--format", "iso", NULL), 1);
	cr_assert(strstr(err, "UnixTimeAtZero"), "%s", err);
	cr_assert_eq(run("SHMCLOCK_CAT", "-n", name, "--format", "hex", NULL), 2);
	cr_assert_eq(run("SHMCLOCK_CAT", "-n", "no-such-clock-here", NULL), 1);
	cr_assert(strstr(err, "no such clock"), "%s", err);
	cr_assert_eq(run("SHMCLOCK_CAT", "--help", NULL), 0);
	daemon_stop(d);

	d = start(name, "--unix-zero=2026-01-01T00:00:00Z");
	cr_assert_eq(run("SHMCLOCK_CAT", "-n", name, "--format", "iso", NULL), 0, "%s", err);
	/* The clock continued from ~100 s: 00:01:40 in the simulated world. */
	cr_assert(!strncmp(out, "2026-01-01T00:01:4", 18), "%s", out);
	daemon_stop(d);
}

Test(readers, wait_blocks_until_the_time_and_honours_pause)
{
	const char *name = test_clock_name();
	pid_t d = start(name, "--scale=1");
	int64_t t0;
	pid_t resumer;

	t0 = now_mono();
	cr_assert_eq(run("SHMCLOCK_WAIT", "-n", name, "--for", "150ms", NULL), 0, "%s", err);
	cr_assert_geq(now_mono() - t0, 150000000LL);

	cr_assert_eq(run("SHMCLOCK_WAIT", "-n", name, "-t", "100ms", "1h", NULL), 3);
	cr_assert(strstr(err, "within the timeout"), "%s", err);
	cr_assert_eq(run("SHMCLOCK_WAIT", "-n", name, "soon", NULL), 2);
	cr_assert_eq(run("SHMCLOCK_WAIT", "-n", name, NULL), 2);

	/* Paused for 300 ms in the middle of a 50 ms wait. */
	cr_assert_eq(ctl(name, "pause", NULL), 0, "%s", ctl_err);
	resumer = test_fork();
	if (resumer == 0) {
		sleep_ns(300000000);
		_exit(ctl(name, "resume", NULL));
	}
	t0 = now_mono();
	cr_assert_eq(run("SHMCLOCK_WAIT", "-n", name, "--for", "50ms", NULL), 0, "%s", err);
	cr_assert_geq(now_mono() - t0, 300000000LL, "returned while paused");
	cr_assert_eq(test_wait(resumer), 0);
	daemon_stop(d);
}

Test(readers, wait_for_a_clock_that_starts_later)
{
	const char *name = test_clock_name();
	pid_t starter = test_fork();

	if (starter == 0) {
		sleep_ns(200000000);
		execv(bin("SHMCLOCKD"), (char *[]){ (char *)bin("SHMCLOCKD"), "-n", (char *)name,
						    "--log-level=error", "--", "sleep", "3", NULL });
		_exit(127);
	}
	cr_assert_eq(run("SHMCLOCK_WAIT", "-n", name, "-t", "5s", "100ms", NULL), 0, "%s", err);
	kill(starter, SIGTERM);
	test_wait(starter);
}

Test(readers, sensor_survives_pause_scale_and_backward_jump)
{
	const char *name = test_clock_name();
	pid_t d = start(name, "--start=10s");
	pid_t driver = test_fork();
	int frames = 0, jumps = 0, drops = 0;
	long long prev = -1, back_at = -1;
	char *save, *line;

	if (driver == 0) {
		sleep_ns(150000000);
		ctl(name, "pause", NULL);
		sleep_ns(150000000);
		ctl(name, "resume", NULL);
		ctl(name, "scale", "2", NULL);
		sleep_ns(150000000);
		ctl(name, "set", "2s", NULL);
		_exit(0);
	}
	/* 100 frames (2 simulated s, about 1.2 s real): long enough that the
	 * driver's jump lands inside the run even on a slow (sanitizer) build. */
	cr_assert_eq(run("SHMCLOCK_SENSOR", "-n", name, "--rate", "50", "--latency", "5ms", "--frames",
			 "100", NULL), 0, "%s", err);
	cr_assert_eq(test_wait(driver), 0);
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		long long n, m, p;
		unsigned long long missed;

		if (sscanf(line, "frame %lld measured %lld published %lld missed %llu", &n, &m, &p,
			   &missed) == 4) {
			frames++;
			cr_assert_eq(p - m, 5000000, "publish = measurement + latency: %s", line);
			if (prev >= 0 && m < prev)
				back_at = m;
			else if (prev >= 0)
				cr_assert_lt(m - prev, 1000000000LL, "gap: %s", line);
			prev = m;
		} else if (!strncmp(line, "jump -", 6)) {
			jumps++;
		} else if (!strncmp(line, "drop", 4)) {
			drops++;
		} else {
			cr_assert_fail("unexpected line: %s", line);
		}
	}
	cr_assert_eq(frames + drops, 100, "%d frames, %d drops\n%s", frames, drops, out);
	cr_assert_eq(jumps, 1, "the backward jump was reported");
	cr_assert_geq(back_at, 2000000000LL);
	cr_assert_lt(back_at, 3000000000LL, "frames after the jump continue from 2 s");
	daemon_stop(d);
}
