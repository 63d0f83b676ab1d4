/* SPDX-License-Identifier: MIT */
/*
 * End to end: the built shmclockd and shmclockctl, observed through
 * libshmclock readers. Each case has its own clock name and runtime dir.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <math.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <stddef.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "control_client.h"
#include "../daemon.h"

TestSuite(daemon, .init = daemon_setup, .fini = daemon_teardown, .timeout = 60);

static bool exists(const char *path)
{
	return access(path, F_OK) == 0;
}

Test(daemon, pause_freezes_time_once_ctl_returns)
{
	const char *name = test_clock_name();
	pid_t d = must_start(name, NULL);
	shmclock_t *r = open_reader(name);
	int64_t a, b;

	cr_assert_eq(ctl(name, "pause", NULL), 0, "%s", ctl_err);
	/* No sleep: the reply comes after the commit. */
	cr_assert(info_of(r).paused);
	a = now_of(r);
	sleep_ns(60000000);
	b = now_of(r);
	cr_assert_eq(a, b, "paused clock moved by %lld ns", (long long)(b - a));

	cr_assert_eq(ctl(name, "resume", NULL), 0, "%s", ctl_err);
	sleep_ns(20000000);
	b = now_of(r);
	cr_assert_gt(b, a, "resumed clock did not move");
	/* Resume continues from the paused value: no jump. */
	cr_assert_lt(b - a, 1000000000LL);
	cr_assert_eq(info_of(r).jump_epoch, 0);
	shmclock_close(r);
	cr_assert_eq(daemon_stop(d), 0);
}

Test(daemon, scale_two_doubles_the_rate)
{
	const char *name = test_clock_name();
	pid_t d = must_start(name, NULL);
	shmclock_t *r = open_reader(name);
	shmclock_info_t a, b;
	double rate;

	cr_assert_eq(ctl(name, "scale", "2", NULL), 0, "%s", ctl_err);
	a = info_of(r);
	cr_assert_float_eq(a.scale, 2.0, 1e-12);
	sleep_ns(200000000);
	b = info_of(r);
	rate = (double)(b.sim_ns - a.sim_ns) / (double)(b.mono_ns - a.mono_ns);
	cr_assert_float_eq(rate, 2.0, 1e-6, "rate %.9f over %lld ns", rate,
			   (long long)(b.mono_ns - a.mono_ns));
	cr_assert_eq(b.jump_epoch, 0, "a scale change is not a jump");

	cr_assert_eq(ctl(name, "scale", "0.5", NULL), 0, "%s", ctl_err);
	a = info_of(r);
	sleep_ns(100000000);
	b = info_of(r);
	rate = (double)(b.sim_ns - a.sim_ns) / (double)(b.mono_ns - a.mono_ns);
	cr_assert_float_eq(rate, 0.5, 1e-6, "rate %.9f", rate);
	shmclock_close(r);
	daemon_stop(d);
}

Test(daemon, set_jumps_and_bumps_the_epoch)
{
	const char *name = test_clock_name();
	pid_t d = must_start(name, NULL);
	shmclock_t *r = open_reader(name);
	shmclock_info_t i;
	int64_t before = now_of(r);

	cr_assert_eq(ctl(name, "set", "100s", NULL), 0, "%s", ctl_err);
	i = info_of(r);
	cr_assert_eq(i.jump_epoch, 1);
	cr_assert_geq(i.sim_ns, 100000000000LL);
	cr_assert_lt(i.sim_ns, 101000000000LL);
	cr_assert_gt(i.last_jump_ns, 100000000000LL - before - 1000000000LL);
	cr_assert_leq(i.last_jump_ns, 100000000000LL - before);

	cr_assert_eq(ctl(name, "set", "2.5", NULL), 0, "%s", ctl_err);
	i = info_of(r);
	cr_assert_eq(i.jump_epoch, 2);
	cr_assert_lt(i.last_jump_ns, -97000000000LL, "a backwards jump is negative");
	cr_assert_geq(i.sim_ns, 2500000000LL);
	cr_assert_lt(i.sim_ns, 3500000000LL);
	shmclock_close(r);
	daemon_stop(d);
}

Test(daemon, simulation_source_starts_at_zero_or_start_time)
{
	const char *name = test_clock_name();
	pid_t d = must_start(name, "--source", "simulation", NULL);
	shmclock_t *r = open_reader(name);
	shmclock_info_t i = info_of(r);

	cr_assert_eq(i.source, SHMCLOCK_SOURCE_SIMULATION);
	cr_assert_geq(i.sim_ns, 0);
	cr_assert_lt(i.sim_ns, 2000000000LL);
	shmclock_close(r);
	daemon_stop(d);

	/* --reset: start from the options, not from the existing clock. */
	d = must_start(name, "--start", "1h", "--reset", NULL);
	r = open_reader(name);
	i = info_of(r);
	cr_assert_geq(i.sim_ns, 3600000000000LL);
	cr_assert_lt(i.sim_ns, 3602000000000LL);
	shmclock_close(r);
	daemon_stop(d);
}

Test(daemon, system_source_starts_at_unix_time)
{
	const char *name = test_clock_name();
	pid_t d = must_start(name, "--source", "system", NULL);
	shmclock_t *r = open_reader(name);
	struct timespec ts;
	int64_t unix_ns, sim = now_of(r);

	clock_gettime(CLOCK_REALTIME, &ts);
	unix_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	cr_assert_eq(info_of(r).source, SHMCLOCK_SOURCE_SYSTEM);
	cr_assert_lt(llabs(unix_ns - sim), 1000000000LL, "system source %lld vs UNIX %lld",
		     (long long)sim, (long long)unix_ns);
	shmclock_close(r);
	daemon_stop(d);
}

Test(daemon, external_source_is_stepped_by_advance)
{
	const char *name = test_clock_name();
	pid_t d = must_start(name, "--source", "ss2", NULL);
	shmclock_t *r = open_reader(name);
	int64_t t = 0;
	shmclock_info_t i;

	cr_assert_eq(shmclock_now(r, &t), -ENODATA, "external clock has no value yet");
	cr_assert_eq(ctl(name, "advance", "3s", NULL), 0, "%s", ctl_err);
	cr_assert_eq(now_of(r), 3000000000LL);
	sleep_ns(50000000);
	cr_assert_eq(now_of(r), 3000000000LL, "no extrapolation between values");
	i = info_of(r);
	cr_assert(i.stepped);
	cr_assert_eq(i.source, SHMCLOCK_SOURCE_EXTERNAL);

	cr_assert_eq(ctl(name, "step", "250ms", NULL), 0, "%s", ctl_err);
	cr_assert_eq(now_of(r), 3250000000LL);
	cr_assert_eq(info_of(r).jump_epoch, 0);

	cr_assert_eq(ctl(name, "advance", "1s", NULL), 0, "%s", ctl_err);
	i = info_of(r);
	cr_assert_eq(i.sim_ns, 1000000000LL);
	cr_assert_eq(i.jump_epoch, 1, "going backwards counts as a jump");
	cr_assert_eq(i.last_jump_ns, -2250000000LL);

	/* An external clock is not scaled. */
	cr_assert_neq(ctl(name, "scale", "2", NULL), 0);
	cr_assert_eq(now_of(r), 1000000000LL);
	shmclock_close(r);
	daemon_stop(d);
}

Test(daemon, fixed_source_advances_whole_steps)
{
	const char *name = test_clock_name();
	pid_t d = must_start(name, "--source", "unity", "--step", "10ms", "--hz", "100", NULL);
	shmclock_t *r = open_reader(name);
	int64_t a, b;

	cr_assert_eq(info_of(r).source, SHMCLOCK_SOURCE_FIXED);
	cr_assert(info_of(r).stepped);
	a = now_of(r);
	sleep_ns(300000000);
	b = now_of(r);
	cr_assert_eq(a % 10000000, 0, "%lld is not a whole step", (long long)a);
	cr_assert_eq(b % 10000000, 0, "%lld is not a whole step", (long long)b);
	/* 30 ticks in 300 ms; allow a loaded machine to lose most of them. */
	cr_assert_gt(b - a, 50000000LL, "fixed clock advanced only %lld ns", (long long)(b - a));

	/* Paused: ticks stop; step moves by exactly the asked duration. */
	cr_assert_eq(ctl(name, "pause", NULL), 0, "%s", ctl_err);
	a = now_of(r);
	sleep_ns(50000000);
	cr_assert_eq(now_of(r), a);
	cr_assert_eq(ctl(name, "step", "30ms", NULL), 0, "%s", ctl_err);
	cr_assert_eq(now_of(r), a + 30000000);
	shmclock_close(r);
	daemon_stop(d);
}

#ifndef SHMCLOCK_HAVE_ROS2
/* Built with ROS 2 support, tests/daemon/test_ros2.c covers the source instead. */
Test(daemon, ros2_source_is_a_clear_error)
{
	const char *name = test_clock_name();
	char *argv[] = { (char *)bin("SHMCLOCKD"), "-n", (char *)name, "--source", "ros2", NULL };
	char out[512], err[1024];
	char path[128];
	int st = run_capture(argv, out, sizeof(out), err, sizeof(err));

	cr_assert_eq(st, 2, "exit %d: %s", st, err);
	cr_assert(strstr(err, "ros2") && strstr(err, "not built"), "%s", err);
	snprintf(path, sizeof(path), "/dev/shm/shmclock.%s", name);
	cr_assert_not(exists(path));
}
#endif

Test(daemon, bad_config_names_file_line_and_key)
{
	const char *name = test_clock_name();
	char cfg[256], shm[128], loc[300];
	char *argv[] = { (char *)bin("SHMCLOCKD"), "-c", cfg, "-n", (char *)name, NULL };
	char out[512], err[2048];
	int st;

	snprintf(cfg, sizeof(cfg), "%s/bad.json", rt_dir);
	snprintf(shm, sizeof(shm), "/dev/shm/shmclock.%s", name);

	write_file(cfg, "{\n  \"TimeSource\": \"simulation\",\n  \"TimeScal\": 2\n}\n");
	st = run_capture(argv, out, sizeof(out), err, sizeof(err));
	snprintf(loc, sizeof(loc), "%s:3", cfg);
	cr_assert_eq(st, 2, "exit %d: %s", st, err);
	cr_assert(strstr(err, loc) && strstr(err, "TimeScal"), "message: %s", err);
	cr_assert_not(exists(shm), "a rejected config must not create the clock");

	write_file(cfg, "{\n\"PublishHz\": \"fast\"\n}\n");
	st = run_capture(argv, out, sizeof(out), err, sizeof(err));
	snprintf(loc, sizeof(loc), "%s:2", cfg);
	cr_assert_eq(st, 2);
	cr_assert(strstr(err, loc) && strstr(err, "PublishHz"), "message: %s", err);

	write_file(cfg, "{\n\"TimeScale\": 2,\n\n\"PublishHz\": 50000\n}\n");
	st = run_capture(argv, out, sizeof(out), err, sizeof(err));
	snprintf(loc, sizeof(loc), "%s:4", cfg);
	cr_assert_eq(st, 2);
	cr_assert(strstr(err, loc) && strstr(err, "PublishHz"), "message: %s", err);

	write_file(cfg, "{\n\"SchedPriority\": 100\n}\n");
	st = run_capture(argv, out, sizeof(out), err, sizeof(err));
	snprintf(loc, sizeof(loc), "%s:2", cfg);
	cr_assert_eq(st, 2);
	cr_assert(strstr(err, loc) && strstr(err, "SchedPriority"), "message: %s", err);

	write_file(cfg, "{\n\"TimeScale\": 2,\n");
	st = run_capture(argv, out, sizeof(out), err, sizeof(err));
	cr_assert_eq(st, 2);
	cr_assert(strstr(err, cfg), "message: %s", err);
	cr_assert_not(exists(shm));
}

/* The scheduling policy of each thread of @pid: how many run SCHED_FIFO. */
static int fifo_threads(pid_t pid)
{
	char dir[64];
	struct dirent *e;
	int n = 0;
	DIR *d;

	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
	d = opendir(dir);
	cr_assert_not_null(d);
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' && sched_getscheduler(atoi(e->d_name)) == SCHED_FIFO)
			n++;
	closedir(d);
	return n;
}

Test(daemon, sched_priority_runs_the_clock_thread_fifo_and_status_shows_ticks)
{
	const char *name = test_clock_name();
	pid_t d;

	if (geteuid() != 0)
		cr_skip_test("needs root (CAP_SYS_NICE) for SCHED_FIFO");
	d = must_start(name, "--hz", "1000", "--sched-priority", "10", NULL);
	/* The clock thread sets its policy as it starts, maybe after READY. */
	for (int i = 0; i < 200 && fifo_threads(d) == 0; i++)
		sleep_ns(10000000);
	cr_assert_eq(fifo_threads(d), 1, "exactly the clock thread runs SCHED_FIFO");
	sleep_ns(100000000);
	cr_assert_eq(ctl(name, "status", "--json", NULL), 0, "%s", ctl_err);
	cr_assert(strstr(ctl_out, "\"ticks\":{\"count\":") && strstr(ctl_out, "\"late_hist\":[["),
		  "%s", ctl_out);
	cr_assert_eq(ctl(name, "status", NULL), 0, "%s", ctl_err);
	cr_assert(strstr(ctl_out, "late p50"), "%s", ctl_out);
	daemon_stop(d);

	d = must_start(name, NULL);
	cr_assert_eq(fifo_threads(d), 0, "normal scheduling by default");
	daemon_stop(d);
}

Test(daemon, sighup_rejects_bad_config_and_applies_good_one)
{
	const char *name = test_clock_name();
	char cfg[256];
	pid_t d;
	shmclock_t *r;
	double scale = 0;

	snprintf(cfg, sizeof(cfg), "%s/c.json", rt_dir);
	write_file(cfg, "{ \"TimeSource\": \"simulation\", \"TimeScale\": 1.5 }\n");
	d = must_start(name, "-c", cfg, NULL);
	r = open_reader(name);
	cr_assert_float_eq(info_of(r).scale, 1.5, 1e-12);

	write_file(cfg, "{ \"TimeScale\": -3 }\n");
	kill(d, SIGHUP);
	sleep_ns(200000000);
	cr_assert_eq(kill(d, 0), 0, "daemon died on a bad reload");
	cr_assert_float_eq(info_of(r).scale, 1.5, 1e-12, "bad reload changed the clock");
	cr_assert_eq(ctl(name, "status", NULL), 0, "%s", ctl_err);

	write_file(cfg, "{ \"TimeSource\": \"simulation\", \"TimeScale\": 3 }\n");
	kill(d, SIGHUP);
	for (int i = 0; i < 100 && scale != 3.0; i++) {
		sleep_ns(20000000);
		scale = info_of(r).scale;
	}
	cr_assert_float_eq(scale, 3.0, 1e-12);
	cr_assert_eq(info_of(r).jump_epoch, 0, "a reload that changes the scale is not a jump");
	shmclock_close(r);
	daemon_stop(d);
}

/* systemd's Type=notify (the unit shmclockd@.service): READY=1 reaches
 * $NOTIFY_SOCKET, a path or an abstract name, once the clock is served. */
static void expect_ready_on(const char *ns)
{
	const char *name = test_clock_name();
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct timeval tv = { 10, 0 };
	char buf[256], shm[128];
	socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(ns));
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ssize_t n;
	pid_t d;

	cr_assert_geq(fd, 0);
	memcpy(a.sun_path, ns, strlen(ns));
	if (ns[0] == '@')
		a.sun_path[0] = 0;
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, len), 0, "bind %s: %s", ns, strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setenv("NOTIFY_SOCKET", ns, 1);
	d = must_start(name, NULL);
	n = recv(fd, buf, sizeof(buf) - 1, 0);
	cr_assert_gt(n, 0, "no notification on %s: %s", ns, strerror(errno));
	buf[n] = 0;
	cr_assert(strstr(buf, "READY=1"), "notification: %s", buf);
	snprintf(shm, sizeof(shm), "/dev/shm/shmclock.%s", name);
	cr_assert(exists(shm), "READY before the clock exists");
	cr_assert_eq(ctl(name, "status", NULL), 0, "READY before the socket answers: %s", ctl_err);
	unsetenv("NOTIFY_SOCKET");
	daemon_stop(d);
	close(fd);
	if (ns[0] == '/')
		unlink(ns);
}

Test(daemon, notify_socket_gets_ready_once_the_clock_is_served)
{
	char path[256], abstract[128];

	snprintf(path, sizeof(path), "%s/notify.sock", rt_dir);
	expect_ready_on(path);
	snprintf(abstract, sizeof(abstract), "@shmclock-test-notify-%d", (int)getpid());
	expect_ready_on(abstract);
}

static double json_number(const char *json, const char *key)
{
	char k[64];
	const char *p;

	snprintf(k, sizeof(k), "\"%s\":", key);
	p = strstr(json, k);
	cr_assert(p, "no %s in %s", key, json);
	return strtod(p + strlen(k), NULL);
}

/* The lateness quantiles in status never exceed the exact maximum (each is
 * its histogram bucket's upper bound: a daemon showed p99 1.835 ms above a
 * max of 1.706 ms). */
Test(daemon, status_quantiles_never_exceed_the_maximum)
{
	const char *name = test_clock_name();
	pid_t d = must_start(name, "--hz", "1000", NULL);
	double p50, p99, p999, max;

	sleep_ns(150000000);
	cr_assert_eq(ctl(name, "status", "--json", NULL), 0, "%s", ctl_err);
	p50 = json_number(ctl_out, "late_p50_ns");
	p99 = json_number(ctl_out, "late_p99_ns");
	p999 = json_number(ctl_out, "late_p999_ns");
	max = json_number(ctl_out, "late_max_ns");
	cr_assert(max > 0 && p50 <= p99 && p99 <= p999 && p999 <= max,
		  "p50 %.0f p99 %.0f p99.9 %.0f max %.0f ns", p50, p99, p999, max);
	daemon_stop(d);
}

/* The systemd unit's config: read when present, the defaults when not
 * (and then read on SIGHUP once it exists); a present bad file is an error
 * as with -c, and -c still requires its file. */
Test(daemon, config_if_present_reads_the_file_only_when_it_exists)
{
	const char *name = test_clock_name();
	char cfg[256], out[512], err[2048];
	char *argv[] = { (char *)bin("SHMCLOCKD"), "--config-if-present", cfg, "-n", (char *)name,
			 NULL };
	char *argv_c[] = { (char *)bin("SHMCLOCKD"), "-c", cfg, "-n", (char *)name, NULL };
	double scale = 0;
	shmclock_t *r;
	pid_t d;
	int st;

	snprintf(cfg, sizeof(cfg), "%s/%s.json", rt_dir, name);
	st = run_capture(argv_c, out, sizeof(out), err, sizeof(err));
	cr_assert_eq(st, 2, "-c with a missing file: exit %d: %s", st, err);
	cr_assert(strstr(err, cfg), "message: %s", err);

	d = must_start(name, "--config-if-present", cfg, NULL);
	r = open_reader(name);
	cr_assert_float_eq(info_of(r).scale, 1.0, 1e-12, "defaults without the file");
	write_file(cfg, "{ \"TimeScale\": 2 }\n");
	kill(d, SIGHUP);
	for (int i = 0; i < 100 && scale != 2.0; i++) {
		sleep_ns(20000000);
		scale = info_of(r).scale;
	}
	cr_assert_float_eq(scale, 2.0, 1e-12, "SIGHUP reads the file once it exists");
	shmclock_close(r);
	daemon_stop(d);

	write_file(cfg, "{ \"TimeScale\": -1 }\n");
	st = run_capture(argv, out, sizeof(out), err, sizeof(err));
	cr_assert_eq(st, 2, "a present bad file: exit %d: %s", st, err);
	cr_assert(strstr(err, "TimeScale"), "message: %s", err);
	unlink(cfg);
}

static int connect_ctl(const char *name)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	socket_path(a.sun_path, sizeof(a.sun_path), name);
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0, "connect %s", a.sun_path);
	return fd;
}

/* Reads until a newline, EOF or 2 s; returns the bytes read. */
static ssize_t read_reply(int fd, char *buf, size_t len)
{
	return (ssize_t)control_client_read_line(fd, buf, len, 2000);
}

Test(daemon, garbage_on_the_socket_leaves_it_serving)
{
	const char *name = test_clock_name();
	pid_t d = must_start(name, NULL);
	shmclock_t *r = open_reader(name);
	int64_t before = now_of(r);
	char reply[4096];
	static char big[200000];
	int fd;

	fd = connect_ctl(name);
	cr_assert_gt(write(fd, "{nope\n", 6), 0);
	read_reply(fd, reply, sizeof(reply));
	cr_assert(strstr(reply, "\"ok\":false") && strstr(reply, "malformed"), "%s", reply);

	cr_assert_gt(write(fd, "{\"cmd\":\"explode\"}\n", 18), 0);
	read_reply(fd, reply, sizeof(reply));
	cr_assert(strstr(reply, "\"ok\":false") && strstr(reply, "unknown command"), "%s", reply);

	cr_assert_gt(write(fd, "{\"cmd\":\"scale\",\"value\":\"NaN\"}\n", 30), 0);
	read_reply(fd, reply, sizeof(reply));
	cr_assert(strstr(reply, "\"ok\":false"), "%s", reply);
	cr_assert_float_eq(info_of(r).scale, 1.0, 1e-12);

	cr_assert_gt(write(fd, "[1,2]\n\x01\x02\xff\n", 11), 0);
	read_reply(fd, reply, sizeof(reply));
	cr_assert(strstr(reply, "\"ok\":false"), "%s", reply);
	close(fd);

	/* An oversized line without a newline: error reply or drop, never a hang. */
	memset(big, 'x', sizeof(big));
	fd = connect_ctl(name);
	{
		ssize_t sent = 0, n;

		signal(SIGPIPE, SIG_IGN);
		while (sent < (ssize_t)sizeof(big) &&
		       (n = send(fd, big + sent, sizeof(big) - (size_t)sent, MSG_NOSIGNAL)) > 0)
			sent += n;
	}
	read_reply(fd, reply, sizeof(reply));
	cr_assert(reply[0] == 0 || strstr(reply, "\"ok\":false"), "%s", reply);
	close(fd);

	/* Many idle clients at once. */
	{
		int fds[40];

		for (int i = 0; i < 40; i++) {
			struct sockaddr_un a = { .sun_family = AF_UNIX };

			fds[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
			socket_path(a.sun_path, sizeof(a.sun_path), name);
			connect(fds[i], (struct sockaddr *)&a, sizeof(a));
		}
		cr_assert_eq(ctl(name, "status", NULL), 0, "status with 40 idle clients: %s",
			     ctl_err);
		for (int i = 0; i < 40; i++)
			close(fds[i]);
	}

	cr_assert_eq(kill(d, 0), 0, "daemon died");
	cr_assert_eq(ctl(name, "pause", NULL), 0, "%s", ctl_err);
	cr_assert(info_of(r).paused);
	cr_assert_gt(now_of(r), before, "now %lld before %lld", (long long)now_of(r), (long long)before);
	cr_assert_eq(info_of(r).jump_epoch, 0, "garbage moved the clock");
	shmclock_close(r);
	cr_assert_eq(daemon_stop(d), 0);
}

Test(daemon, second_daemon_on_the_same_name_is_refused)
{
	const char *name = test_clock_name();
	pid_t d = must_start(name, NULL);
	char *argv[] = { (char *)bin("SHMCLOCKD"), "-n", (char *)name, NULL };
	char out[512], err[2048];
	int st;

	st = run_capture(argv, out, sizeof(out), err, sizeof(err));
	cr_assert_neq(st, 0);
	cr_assert(strstr(err, name) && (strstr(err, "already") || strstr(err, "another")),
		  "message: %s", err);
	cr_assert_eq(kill(d, 0), 0, "the first daemon must keep running");
	cr_assert_eq(ctl(name, "status", NULL), 0, "%s", ctl_err);
	daemon_stop(d);
}

Test(daemon, sigkill_and_restart_continues_time)
{
	const char *name = test_clock_name();
	pid_t d = must_start(name, "--scale", "2", NULL);
	shmclock_t *r = open_reader(name);
	shmclock_info_t a, b;
	int64_t t;

	cr_assert_eq(ctl(name, "set", "50s", NULL), 0, "%s", ctl_err);
	kill(d, SIGKILL);
	test_wait(d);
	a = info_of(r);
	cr_assert_not(a.writer_alive);
	cr_assert_eq(shmclock_now(r, &t), -ESTALE);

	d = must_start(name, NULL);
	b = info_of(r);
	cr_assert(b.writer_alive);
	cr_assert_eq(b.jump_epoch, a.jump_epoch, "restart must not jump");
	cr_assert_float_eq(b.scale, 2.0, 1e-12, "restart keeps the running scale");
	/* The same line: sim advanced exactly scale * mono elapsed. */
	cr_assert_lt(llabs((b.sim_ns - a.sim_ns) - 2 * (b.mono_ns - a.mono_ns)), 1000,
		     "sim %lld over mono %lld", (long long)(b.sim_ns - a.sim_ns),
		     (long long)(b.mono_ns - a.mono_ns));
	cr_assert_eq(shmclock_now(r, &t), 0);
	shmclock_close(r);
	daemon_stop(d);
}

Test(daemon, command_mode_exits_with_status_and_cleans_up)
{
	const char *name = test_clock_name();
	char shm[128], sock[256];
	char *argv[] = { (char *)bin("SHMCLOCKD"), "-n", (char *)name, "--log-level=warn", "--",
			 "sh", "-c",
			 "[ -e \"/dev/shm/shmclock.$SHMCLOCK_NAME\" ] || exit 9; "
			 "[ \"$SHMCLOCK_NAME\" = \"$EXPECT\" ] || exit 8; exit 3",
			 NULL };
	char out[512], err[2048];
	int st;

	setenv("EXPECT", name, 1);
	snprintf(shm, sizeof(shm), "/dev/shm/shmclock.%s", name);
	socket_path(sock, sizeof(sock), name);
	st = run_capture(argv, out, sizeof(out), err, sizeof(err));
	cr_assert_eq(st, 3, "exit %d: %s", st, err);
	cr_assert_not(exists(shm), "%s left behind", shm);
	cr_assert_not(exists(sock), "%s left behind", sock);

	/* A command killed by a signal: 128 + signal, still cleaned up. */
	argv[7] = "kill -TERM $$";
	st = run_capture(argv, out, sizeof(out), err, sizeof(err));
	cr_assert_eq(st, 128 + SIGTERM, "exit %d: %s", st, err);
	cr_assert_not(exists(shm));

	/* A command that cannot run: 127, cleaned up. */
	argv[5] = "/nonexistent/program";
	st = run_capture(argv, out, sizeof(out), err, sizeof(err));
	cr_assert_eq(st, 127, "exit %d: %s", st, err);
	cr_assert_not(exists(shm));
}

Test(daemon, ctl_errors_are_one_line_and_nonzero)
{
	const char *name = test_clock_name();
	pid_t d;

	cr_assert_neq(ctl(name, "status", NULL), 0);
	cr_assert(strstr(ctl_err, "shmclockctl") && strstr(ctl_err, name), "%s", ctl_err);
	cr_assert_eq(strchr(ctl_err, '\n'), ctl_err + strlen(ctl_err) - 1, "one line: %s",
		     ctl_err);

	d = must_start(name, NULL);
	cr_assert_neq(ctl(name, "scale", "fast", NULL), 0);
	cr_assert_neq(ctl(name, "scale", NULL), 0);
	cr_assert_neq(ctl(name, "set", "yesterday", NULL), 0);
	cr_assert_neq(ctl(name, "frobnicate", NULL), 0);
	cr_assert(strstr(ctl_err, "frobnicate"), "%s", ctl_err);
	cr_assert_eq(ctl(name, "--help", NULL), 0);
	cr_assert(strstr(ctl_out, "usage"), "%s", ctl_out);
	cr_assert_eq(ctl(name, "scale", "--help", NULL), 0);

	cr_assert_eq(ctl(name, "status", "--json", NULL), 0, "%s", ctl_err);
	cr_assert(strstr(ctl_out, "\"ok\":true") && strstr(ctl_out, name), "%s", ctl_out);
	cr_assert_eq(ctl(name, "watch", "--count", "2", "--interval", "10", NULL), 0, "%s",
		     ctl_err);
	cr_assert(strstr(ctl_out, "simulation"), "%s", ctl_out);
	daemon_stop(d);
}

Test(daemon, other_users_are_refused_by_peer_credentials)
{
	const char *name = test_clock_name();
	int *result = shared_alloc(sizeof(int) * 6);
	char sock[100];
	pid_t d, c;

	if (geteuid() != 0)
		cr_skip_test("needs root to connect as another user");
	d = must_start(name, NULL);
	/* Open the file permissions so only the credential check stands. */
	socket_path(sock, sizeof(sock), name);
	chmod(rt_dir, 0755);
	chmod(sock, 0666);
	c = test_fork();
	if (c == 0) {
		struct sockaddr_un a = { .sun_family = AF_UNIX };
		char reply[512] = { 0 };
		int fd;

		if (setgid(65534) || setuid(65534))
			_exit(3);
		/* Reading time works for this uid (control is refused below). */
		{
			shmclock_t *r = NULL;
			int64_t t1 = 0, t2 = 0;

			result[3] = shmclock_open(name, &r);
			if (!result[3]) {
				result[4] = shmclock_now(r, &t1);
				sleep_ns(2000000);
				result[5] = shmclock_now(r, &t2);
				result[2] = !result[4] && !result[5] && t2 > t1;
				shmclock_close(r);
			}
		}
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		snprintf(a.sun_path, sizeof(a.sun_path), "%s", sock);
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)))
			_exit(4);
		/* The daemon may refuse and close first: no SIGPIPE. */
		if (send(fd, "{\"cmd\":\"pause\"}\n", 16, MSG_NOSIGNAL) < 0) {
			result[0] = 1; /* dropped before reading: refused */
			_exit(0);
		}
		read_reply(fd, reply, sizeof(reply));
		result[0] = strstr(reply, "permission denied") != NULL;
		result[1] = strstr(reply, "\"ok\":true") != NULL;
		_exit(0);
	}
	{
		int st = test_wait(c);

		cr_assert_eq(st, 0, "child: exit %d (3 setuid, 4 connect, 128+N signal N)", st);
	}
	cr_assert(result[0], "another uid was not refused");
	cr_assert_not(result[1]);
	cr_assert(result[2], "uid 65534 could not read running time: open %d, now %d, %d", result[3],
		  result[4], result[5]);
	{
		shmclock_t *r = open_reader(name);

		cr_assert_not(info_of(r).paused, "another uid paused the clock");
		shmclock_close(r);
	}
	daemon_stop(d);
}

/* Runs shmclockd on `name` expecting a refusal; returns its stderr. */
static const char *expect_refusal(const char *name, const char *needle)
{
	static char err[2048];
	char out[256];
	char *argv[] = { (char *)bin("SHMCLOCKD"), "-n", (char *)name, "--log-level=warn", "--",
			 "true", NULL };
	int st = run_capture(argv, out, sizeof(out), err, sizeof(err));

	cr_expect_neq(st, 0, "shmclockd started: %s", err);
	cr_expect(strstr(err, needle), "expected '%s' in: %s", needle, err);
	cr_expect_eq(strchr(err, '\n'), err + strlen(err) - 1, "one line: %s", err);
	return err;
}

Test(daemon, planted_socket_files_links_and_open_directories_are_refused)
{
	const char *name = test_clock_name();
	char sock[256], target[300], dir[300], buf[64] = { 0 };
	struct stat st;
	int fd;

	socket_path(sock, sizeof(sock), name);
	/* A regular file where the socket goes: refused, left as it was. */
	write_file(sock, "precious");
	expect_refusal(name, "not a socket");
	fd = open(sock, O_RDONLY);
	cr_assert_geq(fd, 0);
	slurp(fd, buf, sizeof(buf));
	cr_expect_str_eq(buf, "precious", "the planted file was clobbered");
	unlink(sock);

	/* A symlink there: not followed, the target not created. */
	snprintf(target, sizeof(target), "%s/target", rt_dir);
	cr_assert_eq(symlink(target, sock), 0);
	expect_refusal(name, "not a socket");
	cr_expect_neq(lstat(target, &st), 0, "the daemon created the link's target");
	cr_expect_eq(lstat(sock, &st), 0);
	cr_expect(S_ISLNK(st.st_mode), "the link was replaced");
	unlink(sock);

	/* A runtime directory others can write (a planted /tmp/shmclock-UID). */
	snprintf(dir, sizeof(dir), "%s/open", rt_dir);
	cr_assert_eq(mkdir(dir, 0700), 0);
	chmod(dir, 0777);
	setenv("SHMCLOCK_RUNTIME_DIR", dir, 1);
	expect_refusal(name, "writable by others");
	/* Sticky (as /tmp itself) is fine: others cannot remove our socket. */
	chmod(dir, 01777);
	{
		pid_t d = must_start(name, NULL);

		cr_assert_eq(daemon_stop(d), 0);
	}
	/* Owned by another user: refused. */
	if (geteuid() == 0) {
		chmod(dir, 0755);
		cr_assert_eq(chown(dir, 65534, 65534), 0);
		expect_refusal(name, "belongs to another user");
	}
	setenv("SHMCLOCK_RUNTIME_DIR", rt_dir, 1);
	rmdir(dir);
}

Test(daemon, a_segment_planted_by_another_user_is_refused)
{
	const char *name = test_clock_name();
	char path[128];
	int fd;

	if (geteuid() != 0)
		cr_skip_test("needs root to give a file to another user");
	/* A valid segment (made by a writer), handed to uid 65534. */
	{
		shmclock_writer_t *w;

		cr_assert_eq(shmclock_writer_open(name, &w), 0);
		cr_assert_eq(shmclock_writer_set_time(w, 7), 0);
		shmclock_writer_close(w);
	}
	snprintf(path, sizeof(path), "/dev/shm/shmclock.%s", name);
	fd = open(path, O_RDONLY);
	cr_assert_geq(fd, 0);
	cr_assert_eq(fchown(fd, 65534, 65534), 0);
	close(fd);
	expect_refusal(name, "belongs to another user");
}

Test(daemon, the_socket_is_0600_in_a_0700_directory_or_group_0660_with_ControlGroup)
{
	const char *name = test_clock_name();
	char dir[300], sock[400], cfg[300];
	struct stat st;
	pid_t d;

	/* A runtime directory that does not exist yet: the daemon makes it. */
	snprintf(dir, sizeof(dir), "%s/made", rt_dir);
	snprintf(sock, sizeof(sock), "%s/%s.sock", dir, name);
	setenv("SHMCLOCK_RUNTIME_DIR", dir, 1);
	umask(0);
	d = must_start(name, NULL);
	umask(022);
	cr_assert_eq(lstat(dir, &st), 0);
	cr_expect_eq(st.st_mode & 07777, 0700, "directory mode %o", st.st_mode & 07777);
	cr_assert_eq(lstat(sock, &st), 0);
	cr_expect(S_ISSOCK(st.st_mode));
	cr_expect_eq(st.st_mode & 0777, 0600, "socket mode %o (umask 0 must not widen it)",
		     st.st_mode & 0777);
	cr_assert_eq(daemon_stop(d), 0);
	cr_expect_neq(lstat(sock, &st), 0, "socket left behind");
	rmdir(dir);

	if (geteuid() == 0) {
		snprintf(cfg, sizeof(cfg), "%s/group.json", rt_dir);
		write_file(cfg, "{\"ControlGroup\": 65534}\n");
		d = must_start(name, "-c", cfg, NULL);
		cr_assert_eq(lstat(dir, &st), 0);
		cr_expect_eq(st.st_mode & 07777, 0750, "directory mode %o", st.st_mode & 07777);
		cr_expect_eq(st.st_gid, 65534);
		cr_assert_eq(lstat(sock, &st), 0);
		cr_expect_eq(st.st_mode & 0777, 0660, "socket mode %o", st.st_mode & 0777);
		cr_expect_eq(st.st_gid, 65534);
		cr_assert_eq(daemon_stop(d), 0);
		unlink(cfg);
		rmdir(dir);
	}
	setenv("SHMCLOCK_RUNTIME_DIR", rt_dir, 1);
}

Test(daemon, idle_clients_are_dropped_after_ControlIdleTimeout)
{
	const char *name = test_clock_name();
	char cfg[300], buf[256];
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd;
	pid_t d;
	ssize_t n;

	snprintf(cfg, sizeof(cfg), "%s/idle.json", rt_dir);
	write_file(cfg, "{\"ControlIdleTimeout\": \"300ms\"}\n");
	d = must_start(name, "-c", cfg, NULL);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	socket_path(a.sun_path, sizeof(a.sun_path), name);
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	/* Half a request, then silence: closed after ~300 ms (EOF). */
	cr_assert_eq(send(fd, "{\"cmd\":", 7, MSG_NOSIGNAL), 7);
	{
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		int64_t t0 = now_mono();

		cr_assert_eq(poll(&pf, 1, 5000), 1, "an idle client was not dropped within 5 s");
		n = recv(fd, buf, sizeof(buf), 0);
		cr_assert_eq(n, 0, "expected EOF, got %zd bytes", n);
		cr_assert_geq(now_mono() - t0, 250000000, "dropped before it was idle for 300 ms");
	}
	close(fd);
	cr_assert_eq(ctl(name, "status", "--json", NULL), 0, "%s", ctl_err);
	cr_assert(strstr(ctl_out, "\"dropped\":1"), "%s", ctl_out);
	cr_assert_eq(daemon_stop(d), 0);

	write_file(cfg, "{\"ControlIdleTimeout\": \"1ms\"}\n");
	{
		char *argv[] = { (char *)bin("SHMCLOCKD"), "-n", (char *)name, "-c", cfg, NULL };
		char out[256], err[1024];
		int st = run_capture(argv, out, sizeof(out), err, sizeof(err));

		cr_assert_eq(st, 2, "exit %d: %s", st, err);
		cr_assert(strstr(err, "ControlIdleTimeout"), "%s", err);
	}
}

/* ------------------------------------------------ the daemon owns its segment */

/* Starts shmclockd ARGS as must_start() does, its log (stderr) going to a
 * file whose descriptor is *@logfd (read it with slurp()). */
static pid_t start_logged(char *const *args, int *logfd)
{
	char path[256];
	int saved = dup(2);
	pid_t d;

	snprintf(path, sizeof(path), "%s/daemon.log", rt_dir);
	*logfd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	cr_assert_geq(*logfd, 0);
	dup2(*logfd, 2); /* the daemon inherits it */
	d = daemon_start_v(args, NULL);
	dup2(saved, 2);
	close(saved);
	cr_assert_gt(d, 0, "shmclockd did not start");
	return d;
}

/* SIGHUP and the config's table (config.c): a key a reload applies does,
 * one that describes a new clock changes nothing and the log says so (it
 * said nothing), one that takes a restart has the reload refused whole. */
Test(daemon, sighup_applies_live_keys_and_says_what_it_does_not)
{
	const char *name = test_clock_name();
	char cfg[256], log[4096];
	char *args[] = { "-n", (char *)name, "-c", cfg, "--log-level=info", NULL };
	shmclock_t *r;
	int fd;
	pid_t d;
	double scale = 0;

	snprintf(cfg, sizeof(cfg), "%s/c.json", rt_dir);
	write_file(cfg, "{ \"StartTime\": \"10s\", \"Paused\": true, \"TimeScale\": 2 }\n");
	d = start_logged(args, &fd);
	r = open_reader(name);
	write_file(cfg, "{ \"StartTime\": \"99s\", \"TimeScale\": 3 }\n");
	kill(d, SIGHUP);
	for (int i = 0; i < 250 && scale != 3.0; i++) {
		sleep_ns(20000000);
		scale = info_of(r).scale;
	}
	cr_assert_float_eq(scale, 3.0, 1e-12, "TimeScale applies on a reload");
	cr_assert(info_of(r).paused, "Paused describes a new clock: the running one stays paused");
	cr_assert_eq(now_of(r), 10000000000LL, "StartTime describes a new clock: no jump");
	write_file(cfg, "{ \"StartTime\": \"99s\", \"TimeScale\": 4, \"SegmentMode\": \"0640\" }\n");
	kill(d, SIGHUP);
	/* Until the daemon has read it (the refusal is its last line), not a
	 * fixed time: a loaded machine may take longer. */
	cr_assert(log_wait(fd, log, sizeof(log), "SegmentMode changes only with a restart", 20 * SEC),
		  "the refused reload was not logged: %s", log);
	cr_assert_float_eq(info_of(r).scale, 3.0, 1e-12, "a refused reload changed the scale");
	close(fd);
	cr_assert(strstr(log, "StartTime applies to a new clock"), "log: %s", log);
	cr_assert(strstr(log, "Paused applies to a new clock"), "log: %s", log);
	cr_assert(strstr(log, "SegmentMode changes only with a restart"), "log: %s", log);
	shmclock_close(r);
	daemon_stop(d);
}

/*
 * Runs shmclockd ARGS (NULL-terminated, without the program name) in a
 * mount namespace of its own whose /dev/shm is a tmpfs of @size ("64k"),
 * filled first when @fill. Returns the daemon's exit status (72: killed,
 * 73: killed by SIGBUS, 71: a shmclock file was left in that /dev/shm), or
 * skips the test where a tmpfs cannot be mounted. Its stderr in @err.
 */
static int run_in_small_shm(const char *size, bool fill, char *err, size_t errlen,
			    char *const *args)
{
	char errpath[256], opts[32];
	pid_t p;
	int st;

	if (geteuid() != 0)
		cr_skip_test("needs root (a mount namespace with a small /dev/shm)");
	snprintf(errpath, sizeof(errpath), "%s/daemon.err", rt_dir);
	snprintf(opts, sizeof(opts), "size=%s", size);
	p = test_fork();
	if (p == 0) {
		char fillbuf[4096], *argv[32];
		pid_t d;
		int fd, dst, n = 0;
		DIR *dir;
		struct dirent *e;

		if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
		    mount("tmpfs", "/dev/shm", "tmpfs", 0, opts))
			_exit(70);
		if (fill) {
			memset(fillbuf, 'x', sizeof(fillbuf));
			fd = open("/dev/shm/filler", O_WRONLY | O_CREAT, 0600);
			while (write(fd, fillbuf, sizeof(fillbuf)) > 0)
				;
			close(fd);
		}
		argv[n++] = (char *)bin("SHMCLOCKD");
		argv[n++] = (char *)"--log-level=warn";
		for (int i = 0; args[i] && n < 31; i++)
			argv[n++] = args[i];
		argv[n] = NULL;
		d = fork();
		if (d == 0) {
			int efd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);

			dup2(efd, 2);
			execv(argv[0], argv);
			_exit(127);
		}
		waitpid(d, &dst, 0);
		dir = opendir("/dev/shm");
		while (dir && (e = readdir(dir)))
			if (!strncmp(e->d_name, "shmclock", 8))
				_exit(71); /* a segment or a temporary file left behind */
		if (!WIFEXITED(dst))
			_exit(72 + (WTERMSIG(dst) == SIGBUS));
		_exit(WEXITSTATUS(dst));
	}
	st = test_wait(p);
	if (st == 70)
		cr_skip_test("cannot mount a tmpfs in a new mount namespace here");
	{
		int fd = open(errpath, O_RDONLY);

		cr_assert_geq(fd, 0);
		slurp(fd, err, errlen);
	}
	return st;
}

Test(daemon, a_full_dev_shm_gives_a_clear_error_and_leaves_nothing_behind)
{
	const char *name = test_clock_name();
	char sock[256], err[1024];
	char *args[] = { "-n", (char *)name, "--socket", sock, NULL };
	int st;

	socket_path(sock, sizeof(sock), name);
	st = run_in_small_shm("64k", true, err, sizeof(err), args);
	cr_assert_neq(st, 73, "shmclockd died of SIGBUS");
	cr_assert_neq(st, 71, "a file was left in /dev/shm");
	cr_assert_eq(st, 1, "exit status %d", st);
	cr_assert(strstr(err, "no space left"), "message: %s", err);
}

/* The clock's page fits, the participants' segment does not: the start
 * fails after the clock's segment was made, and takes it away again (a
 * clock nobody initialised, left in /dev/shm, is one readers would open). */
Test(daemon, a_lockstep_start_without_room_leaves_no_clock_behind)
{
	const char *name = test_clock_name();
	char sock[256], err[1024];
	char *args[] = { "-n", (char *)name, "--socket", sock, "--source", "fixed",
			 "--lockstep", "2", NULL };
	int st;

	socket_path(sock, sizeof(sock), name);
	st = run_in_small_shm("8k", false, err, sizeof(err), args);
	cr_assert_neq(st, 71, "the clock's segment was left in /dev/shm");
	cr_assert_eq(st, 1, "exit status %d: %s", st, err);
	cr_assert(strstr(err, "lockstep") && strstr(err, "no space left"), "message: %s", err);
	cr_assert_eq(access(sock, F_OK), -1, "%s left behind", sock);
}

/* A start that fails on an existing clock leaves it there, as it was. */
Test(daemon, a_failed_start_keeps_an_existing_clock)
{
	const char *name = test_clock_name();
	pid_t d = must_start(name, "--start", "42s", "--paused", NULL);
	char sock[256], err[1024], out[256];
	char *argv[] = { (char *)bin("SHMCLOCKD"), "-n", (char *)name, "--socket", sock,
			 "--log-level=warn", NULL };
	shmclock_t *r;
	int64_t t = 0;
	int st;

	cr_assert_eq(daemon_stop(d), 0);
	/* A socket under a regular file, which no directory can be made
	 * at: the start fails after the clock was opened. */
	snprintf(sock, sizeof(sock), "%s/file", rt_dir);
	write_file(sock, "");
	snprintf(sock, sizeof(sock), "%s/file/x.sock", rt_dir);
	st = run_capture(argv, out, sizeof(out), err, sizeof(err));
	cr_assert_eq(st, 1, "exit %d: %s", st, err);
	r = open_reader(name);
	cr_assert(info_of(r).initialized, "the existing clock was lost");
	/* No writer now: -ESTALE, with the time it held (paused at 42 s). */
	cr_assert_eq(shmclock_now(r, &t), -ESTALE);
	cr_assert_eq(t, 42000000000LL, "the clock moved: %lld", (long long)t);
	shmclock_close(r);
}

/*
 * Someone removes /dev/shm/shmclock.NAME under a running daemon (a careless
 * rm, a purge): readers that open the name would find no clock while the
 * daemon serves one nobody can open. It says so and stops (shmclockd(8),
 * THE SEGMENT), exiting with status 1 so that its unit restarts it.
 */
Test(daemon, a_removed_segment_is_noticed_logged_and_ends_the_daemon)
{
	const char *name = test_clock_name();
	char shm[128], err[2048];
	char *args[] = { "-n", (char *)name, NULL };
	int efd, st;
	pid_t d = start_logged(args, &efd);

	snprintf(shm, sizeof(shm), "/dev/shm/shmclock.%s", name);
	cr_assert_eq(unlink(shm), 0, "%s: %s", shm, strerror(errno));
	/* No timeout here: the test's own (60 s) ends a daemon that never
	 * notices. */
	st = test_wait(d);
	slurp(efd, err, sizeof(err));
	cr_assert_eq(st, 1, "exit %d: %s", st, err);
	cr_assert(strstr(err, shm) && strstr(err, "removed"), "log: %s", err);
	cr_assert_eq(access(shm, F_OK), -1, "a segment appeared again at %s", shm);
}

/* ---------------------------------------- hardening (issues 17 and 21) */

Test(daemon, a_clock_once_stepped_runs_again_under_a_continuous_source)
{
	const char *name = test_clock_name();
	const char *from[][4] = { { "--source", "fixed", NULL, NULL },
				  { "--source", "external", "--start", "1s" } };

	for (int k = 0; k < 2; k++) {
		pid_t d = must_start(name, from[k][0], from[k][1], from[k][2], from[k][3], NULL);
		shmclock_t *r;
		int64_t a, b;

		cr_assert_eq(daemon_stop(d), 0);
		d = must_start(name, "--source", "simulation", "--reset", NULL);
		r = open_reader(name);
		cr_assert_not(info_of(r).stepped, "still stepped after a reset from %s", from[k][1]);
		a = now_of(r);
		sleep_ns(100 * MS);
		b = now_of(r);
		cr_assert_gt(b - a, 50 * MS, "from %s: time stood still (%lld ns in 100 ms)", from[k][1],
			     (long long)(b - a));
		shmclock_close(r);
		cr_assert_eq(daemon_stop(d), 0);
	}
}

Test(daemon, a_reader_holding_flock_cannot_lock_the_writer_out)
{
	const char *name = test_clock_name();
	_Atomic int *locked = shared_alloc(sizeof(*locked));
	pid_t d = must_start(name, NULL), reader;
	shmclock_t *r;

	reader = test_fork();
	if (reader == 0) {
		char path[128];
		int fd;

		/* As an unprivileged user where we can: read access is all it takes. */
		if (geteuid() == 0 && (setgid(65534) || setuid(65534)))
			_exit(3);
		snprintf(path, sizeof(path), "/dev/shm/shmclock.%s", name);
		fd = open(path, O_RDONLY);
		if (fd < 0)
			_exit(4);
		/* Waits while the daemon runs if the daemon holds it. */
		if (flock(fd, LOCK_EX) < 0)
			_exit(5);
		atomic_store(locked, 1);
		pause();
		_exit(0);
	}
	sleep_ns(100 * MS);
	kill(d, SIGKILL);
	test_wait(d);
	for (int i = 0; i < 200 && !atomic_load(locked); i++)
		sleep_ns(5 * MS);
	cr_assert(atomic_load(locked), "the reader never got its flock");
	/* A new daemon takes the clock over although the reader holds a lock. */
	d = must_start(name, NULL);
	r = open_reader(name);
	{
		int64_t t;

		cr_assert_eq(shmclock_now(r, &t), 0, "readers see a live writer");
	}
	shmclock_close(r);
	cr_assert_eq(daemon_stop(d), 0);
}

Test(daemon, the_fixed_source_runs_at_the_scale_asked)
{
	const char *name = test_clock_name();
	pid_t d = must_start(name, "--source", "fixed", "--scale", "1000", NULL);
	shmclock_t *r = open_reader(name);
	int64_t a, b, t0, t1;
	const char *st;

	sleep_ns(100 * MS);
	t0 = now_mono();
	a = now_of(r);
	sleep_ns(1200 * MS);
	t1 = now_mono();
	b = now_of(r);
	{
		double achieved = (double)(b - a) / (double)(t1 - t0);

		fprintf(stderr, "# fixed at scale 1000: achieved %.0f\n", achieved);
		cr_assert(achieved > 800 && achieved < 1200, "achieved scale %.1f", achieved);
	}
	st = status_json(name);
	cr_assert(strstr(st, "\"scale_achieved\":"), "status: %s", st);
	{
		double s = atof(strstr(st, "\"scale_achieved\":") + 17);

		cr_assert(s > 800 && s < 1200, "status says it achieved %g", s);
	}
	shmclock_close(r);
	cr_assert_eq(daemon_stop(d), 0);
}

Test(daemon, a_start_that_fails_leaves_the_clock_untouched)
{
	const char *name = test_clock_name(), *other = test_clock_name();
	char other_sock[256], err[2048];
	pid_t d = must_start(name, NULL), o;
	shmclock_t *r;
	shmclock_info_t before, after;
	int st;

	cr_assert_eq(daemon_stop(d), 0);
	o = must_start(other, NULL);
	socket_path(other_sock, sizeof(other_sock), other);
	r = open_reader(name);
	before = info_of(r);
	/* The control socket is another live daemon's: refused, after the
	 * writer was opened but before the clock is touched. */
	st = daemon_run(err, sizeof(err), "-n", name, "--socket", other_sock, "--reset", "--paused",
			"--start", "100s", "--log-level=warn", NULL);
	cr_assert_eq(st, 1, "exit %d: %s", st, err);
	cr_assert(strstr(err, "in use"), "message: %s", err);
	after = info_of(r);
	cr_assert_not(after.paused, "the failed start paused the clock");
	cr_assert_eq(after.jump_epoch, before.jump_epoch, "the failed start jumped the clock");
	cr_assert_lt(after.sim_ns, 100 * SEC);
	cr_assert_eq(after.commits, before.commits, "the failed start committed");
	/* Out-of-range scales are refused on the command line, by name. */
	for (int k = 0; k < 3; k++) {
		const char *bad[] = { "1e-300", "3e9", "1e7" };

		st = daemon_run(err, sizeof(err), "-n", name, "--scale", bad[k], NULL);
		cr_assert_eq(st, 2, "--scale %s: exit %d", bad[k], st);
		cr_assert(strstr(err, "--scale"), "message: %s", err);
	}
	cr_assert_eq(info_of(r).commits, before.commits);
	shmclock_close(r);
	cr_assert_eq(daemon_stop(o), 0);
}

Test(daemon, a_fifo_as_config_is_refused_at_start_and_on_SIGHUP)
{
	const char *name = test_clock_name();
	char fifo[256], cfg[256], err[1024];
	int64_t t0;
	pid_t d;
	int st;

	snprintf(fifo, sizeof(fifo), "%s/fifo.json", rt_dir);
	snprintf(cfg, sizeof(cfg), "%s/cfg.json", rt_dir);
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	t0 = now_mono();
	st = daemon_run(err, sizeof(err), "-n", name, "-c", fifo, NULL);
	cr_assert_eq(st, 2, "exit %d: %s", st, err);
	cr_assert(strstr(err, "not a regular file"), "message: %s", err);
	cr_assert_lt(now_mono() - t0, 3 * SEC);

	write_file(cfg, "{ \"TimeScale\": 2 }\n");
	d = must_start(name, "-c", cfg, NULL);
	cr_assert_eq(rename(fifo, cfg), 0);
	kill(d, SIGHUP);
	sleep_ns(200 * MS);
	cr_assert_eq(ctl(name, "--timeout", "2", "status", NULL), 0, "no status after SIGHUP: %s", ctl_err);
	t0 = now_mono();
	cr_assert_eq(daemon_stop(d), 0);
	cr_assert_lt(now_mono() - t0, 3 * SEC);
}

Test(daemon, status_world_time_near_2262_does_not_wrap_to_1969)
{
	const char *name = test_clock_name();
	pid_t d = must_start(name, "--start", "2262-04-01T00:00:00Z", "--unix-zero",
			     "2000-01-01T00:00:00Z", "--paused", NULL);
	const char *st = status_json(name), *u = strstr(st, "\"sim_unix\":\"");

	cr_assert_not_null(u, "status: %s", st);
	cr_assert(!strncmp(u + 12, "2262-", 5), "world time %.30s", u + 12);
	cr_assert_eq(daemon_stop(d), 0);
}

Test(daemon, remove_on_exit_never_deletes_a_successors_clock)
{
	const char *name = test_clock_name();
	_Atomic pid_t *holder = shared_alloc(sizeof(*holder));

	for (int k = 0; k < 10; k++) {
		pid_t d = must_start(name, "--remove-on-exit", NULL), succ;
		shmclock_t *r;
		shmclock_info_t in;

		atomic_store(holder, 0);
		succ = test_fork();
		if (succ == 0) {
			shmclock_writer_t *w;
			int e;

			/* No pause between tries: the window between the old
			 * daemon's release and its removal is microseconds. */
			while ((e = shmclock_writer_open(name, &w)) == -EBUSY || e == -ENOENT)
				;
			if (e || shmclock_writer_set_time(w, 42 * SEC))
				_exit(3);
			atomic_store(holder, getpid());
			pause();
			_exit(0);
		}
		sleep_ns((k % 5) * MS);
		cr_assert_eq(daemon_stop(d), 0);
		for (int i = 0; i < 400 && !atomic_load(holder); i++)
			sleep_ns(5 * MS);
		cr_assert_eq(atomic_load(holder), succ, "try %d: the successor never took the clock", k);
		cr_assert_eq(shmclock_open(name, &r), 0, "try %d: the successor's clock was removed", k);
		in = info_of(r);
		cr_assert(in.writer_alive && in.writer_pid == succ, "try %d: clock served by %d", k,
			  (int)in.writer_pid);
		shmclock_close(r);
		kill(succ, SIGKILL);
		test_wait(succ);
		shmclock_unlink(name);
	}
}

static int64_t cpu_ticks(pid_t pid)
{
	char path[64], buf[1024], *p;
	long long ut = 0, st = 0;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY);
	cr_assert_geq(fd, 0);
	slurp(fd, buf, sizeof(buf));
	p = strrchr(buf, ')');
	cr_assert_not_null(p);
	/* fields 14 and 15 (utime, stime), counted after the comm field */
	cr_assert_eq(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lld %lld", &ut, &st), 2);
	return ut + st;
}

static int count_fds(pid_t pid)
{
	char path[64];
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	cr_assert_not_null(d);
	for (struct dirent *e; (e = readdir(d));)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

Test(daemon, out_of_descriptors_the_control_loop_neither_spins_nor_hangs_clients)
{
	const char *name = test_clock_name();
	pid_t d = must_start(name, NULL);
	char sock[256], buf[512];
	struct rlimit rl;
	int fds[3], lowest_free = 0;
	int64_t c0, c1;
	long hz = sysconf(_SC_CLK_TCK);

	socket_path(sock, sizeof(sock), name);
	/* The daemon may open no descriptor numbered at or above its lowest
	 * free one now: its next accept() fails with EMFILE. */
	{
		char path[64];
		bool used[1024] = { false };
		DIR *dir;

		snprintf(path, sizeof(path), "/proc/%d/fd", (int)d);
		dir = opendir(path);
		cr_assert_not_null(dir);
		for (struct dirent *e; (e = readdir(dir));)
			if (e->d_name[0] != '.' && atoi(e->d_name) < 1024)
				used[atoi(e->d_name)] = true;
		closedir(dir);
		while (used[lowest_free])
			lowest_free++;
	}
	fprintf(stderr, "# shmclockd holds %d descriptors, lowest free %d\n", count_fds(d), lowest_free);
	cr_assert_eq(prlimit(d, RLIMIT_NOFILE, NULL, &rl), 0);
	rl.rlim_cur = (rlim_t)lowest_free;
	cr_assert_eq(prlimit(d, RLIMIT_NOFILE, &rl, NULL), 0, "prlimit: %s", strerror(errno));
	for (int i = 0; i < 3; i++) {
		fds[i] = control_client_connect(sock);
		cr_assert_geq(fds[i], 0);
	}
	/* The first is told why, at once, rather than left hanging. */
	control_client_read_line(fds[0], buf, sizeof(buf), 2000);
	cr_assert(strstr(buf, "out of file descriptors"), "reply: '%s'", buf);
	c0 = cpu_ticks(d);
	sleep_ns(1 * SEC);
	c1 = cpu_ticks(d);
	fprintf(stderr, "# out of descriptors: %lld ms of CPU in 1 s\n", (long long)((c1 - c0) * 1000 / hz));
	cr_assert_lt((c1 - c0) * 1000 / hz, 300, "the daemon used %lld ms of CPU in 1 s",
		     (long long)((c1 - c0) * 1000 / hz));
	for (int i = 0; i < 3; i++)
		close(fds[i]);
	/* With descriptors back, it serves again. */
	rl.rlim_cur = 1024;
	cr_assert_eq(prlimit(d, RLIMIT_NOFILE, &rl, NULL), 0);
	sleep_ns(300 * MS);
	cr_assert_eq(ctl(name, "status", NULL), 0, "%s", ctl_err);
	cr_assert_eq(daemon_stop(d), 0);
}

Test(daemon, SegmentMode_refuses_write_for_others_and_is_applied_on_every_start)
{
	const char *name = test_clock_name();
	char cfg[256], shm[128], err[1024];
	struct stat st;
	pid_t d;

	snprintf(cfg, sizeof(cfg), "%s/mode.json", rt_dir);
	snprintf(shm, sizeof(shm), "/dev/shm/shmclock.%s", name);
	for (int k = 0; k < 3; k++) {
		const char *bad[] = { "{ \"SegmentMode\": \"0666\" }", "{ \"SegmentMode\": \"0400\" }",
				      "{ \"SegmentMode\": \"0620\" }" };

		write_file(cfg, bad[k]);
		cr_assert_eq(daemon_run(err, sizeof(err), "-n", name, "-c", cfg, NULL), 2, "%s", bad[k]);
		cr_assert(strstr(err, "SegmentMode"), "message: %s", err);
	}
	cr_assert_eq(shmclock_writer_check_mode(0640), 0);
	cr_assert_eq(shmclock_writer_check_mode(0666), -EINVAL);
	d = must_start(name, NULL);
	cr_assert_eq(daemon_stop(d), 0);
	/* As an older shmclockd with "0666" would have left it. */
	cr_assert_eq(chmod(shm, 0666), 0);
	d = must_start(name, NULL);
	cr_assert_eq(stat(shm, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0644, "mode %o after a restart", st.st_mode & 0777);
	cr_assert_eq(daemon_stop(d), 0);
}

Test(daemon, shmclockctl_gives_up_on_a_stopped_daemon)
{
	const char *name = test_clock_name();
	pid_t d = must_start(name, NULL);
	int64_t t0;
	int st;

	kill(d, SIGSTOP);
	t0 = now_mono();
	st = ctl(name, "--timeout", "0.5", "status", NULL);
	kill(d, SIGCONT);
	cr_assert_eq(st, 3, "exit %d: %s", st, ctl_err);
	cr_assert(strstr(ctl_err, "did not answer"), "message: %s", ctl_err);
	cr_assert_lt(now_mono() - t0, 2 * SEC);
	cr_assert_eq(ctl(name, "--timeout", "x", "status", NULL), 2);
	cr_assert_eq(daemon_stop(d), 0);
}

/*
 * A daemon stopped long enough that its listen backlog filled with the
 * connections its clients gave up on (the panel's status rounds, one a
 * second): shmclockctl --timeout still gives up in time. A blocking
 * connect() on a full Unix backlog waits until the daemon accepts again:
 * shmclockctl hung, the panel's poller and its control requests with it.
 */
Test(daemon, shmclockctl_gives_up_on_a_stopped_daemon_whose_backlog_is_full)
{
	const char *name = test_clock_name();
	pid_t d = must_start(name, NULL), c;
	char sock[256];
	int fds[256], n = 0, st;

	socket_path(sock, sizeof(sock), name);
	kill(d, SIGSTOP);
	/* Connections queue until the backlog is full (then EAGAIN). */
	while (n < 256 && (fds[n] = control_client_connect_within(sock, 100)) >= 0)
		n++;
	cr_assert_lt(n, 256, "the backlog never filled");
	cr_assert_eq(fds[n], -ETIMEDOUT, "connect on a full backlog: %s", strerror(-fds[n]));
	fprintf(stderr, "# a stopped daemon's backlog: full after %d connections\n", n);
	c = test_fork();
	if (c == 0)
		_exit(ctl(name, "--timeout", "0.5", "status", NULL));
	st = test_wait_for(c, 10 * SEC);
	kill(d, SIGCONT);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	cr_assert_neq(st, -1, "shmclockctl --timeout 0.5 still waiting after 10 s (in connect)");
	cr_assert_eq(st, 3, "exit %d", st);
	cr_assert_eq(daemon_stop(d), 0);
}

Test(daemon, config_errors_point_at_the_right_line)
{
	const char *name = test_clock_name();
	char cfg[256], err[1024], loc[300];
	int st;

	snprintf(cfg, sizeof(cfg), "%s/c.json", rt_dir);
	write_file(cfg, "{\n\"TimeScale\": 2,\n\"PublishHz\": 50,\n\"TimeScale\": 3\n}\n");
	st = daemon_run(err, sizeof(err), "-n", name, "-c", cfg, NULL);
	snprintf(loc, sizeof(loc), "%s:4:", cfg);
	cr_assert_eq(st, 2);
	cr_assert(strstr(err, loc) && strstr(err, "given twice"), "duplicate: %s", err);

	write_file(cfg, "{\n\n\"\\u0054imeScale\": -1\n}\n");
	st = daemon_run(err, sizeof(err), "-n", name, "-c", cfg, NULL);
	snprintf(loc, sizeof(loc), "%s:3:", cfg);
	cr_assert_eq(st, 2);
	cr_assert(strstr(err, loc), "escaped key: %s", err);

	write_file(cfg, "{ \"TimeScale\": 2 }\n{ \"TimeScale\": 3 }\n");
	st = daemon_run(err, sizeof(err), "-n", name, "-c", cfg, NULL);
	cr_assert_eq(st, 2, "trailing content accepted");
	cr_assert(strstr(err, "after the config object"), "message: %s", err);
#ifdef SHMCLOCK_HAVE_ROS2
	write_file(cfg, "{\n\"Ros2\": {\n  \"PublishHz\": 10,\n  \"PublishHz\": 20 }\n}\n");
	st = daemon_run(err, sizeof(err), "-n", name, "-c", cfg, NULL);
	snprintf(loc, sizeof(loc), "%s:4:", cfg);
	cr_assert_eq(st, 2, "a duplicate inside Ros2 was accepted");
	cr_assert(strstr(err, loc) && strstr(err, "given twice"), "Ros2 duplicate: %s", err);
#endif
}

Test(daemon, scale_and_paused_apply_to_a_continued_clock)
{
	const char *name = test_clock_name();
	pid_t d = must_start(name, NULL);
	shmclock_t *r;
	shmclock_info_t in;

	cr_assert_eq(daemon_stop(d), 0);
	d = must_start(name, "--scale", "5", "--paused", NULL);
	r = open_reader(name);
	in = info_of(r);
	cr_assert_eq(in.scale, 5.0);
	cr_assert(in.paused);
	cr_assert_eq(in.jump_epoch, 0, "continuing must not jump");
	shmclock_close(r);
	cr_assert_eq(daemon_stop(d), 0);
}

/* As uid/gid 65534 (a member of ControlGroup "nogroup" by its gid): 1 if
 * the daemon answers a status request, 0 if it refuses. */
static int nobody_may_control(const char *sock)
{
	struct {
		_Atomic int ok, err;
		char reply[256];
	} *res = shared_alloc(sizeof(*res));
	pid_t c = test_fork();

	if (c == 0) {
		char reply[8192];
		int e;

		if (setgid(65534) || setuid(65534))
			_exit(3);
		e = control_client_request(sock, "{\"cmd\":\"status\"}\n", reply, sizeof(reply), 2000);
		atomic_store(&res->err, e);
		snprintf(res->reply, sizeof(res->reply), "%.200s", reply);
		atomic_store(&res->ok, !e && strstr(reply, "\"ok\":true") != NULL);
		_exit(0);
	}
	cr_assert_eq(test_wait(c), 0);
	fprintf(stderr, "# uid 65534 asks for status: %.40s (%s)\n", res->reply,
		atomic_load(&res->err) ? strerror(-atomic_load(&res->err)) : "answered");
	return atomic_load(&res->ok);
}

Test(daemon, SIGHUP_applies_ControlGroup_and_what_status_reports)
{
	const char *name = test_clock_name();
	char cfg[256], sock[256];
	pid_t d;

	need_root();
	snprintf(cfg, sizeof(cfg), "%s/group.json", rt_dir);
	socket_path(sock, sizeof(sock), name);
	write_file(cfg, "{ \"ControlGroup\": \"nogroup\", \"PublishHz\": 50 }\n");
	d = must_start(name, "-c", cfg, NULL);
	chmod(rt_dir, 0755); /* only the credential check stands */
	cr_assert_eq(nobody_may_control(sock), 1, "a ControlGroup member was refused");
	/* Revoked by a reload: refused from then on. */
	write_file(cfg, "{ \"PublishHz\": 40 }\n");
	kill(d, SIGHUP);
	sleep_ns(300 * MS);
	chmod(sock, 0666);
	cr_assert_eq(nobody_may_control(sock), 0, "a revoked ControlGroup still controls the clock");
	cr_assert(strstr(status_json(name), "\"publish_hz\":40"), "status: %s", ctl_out);
	cr_assert_eq(daemon_stop(d), 0);
}

Test(daemon, a_client_whose_credentials_cannot_be_read_is_refused_and_logged_as_nobody)
{
	const char *name = test_clock_name();
	char sock[256], reply[512], logpath[300], log[4096];
	pid_t d;
	int fd;

	snprintf(logpath, sizeof(logpath), "%s/daemon.log", rt_dir);
	/* An ASan shmclockd accepts a library loaded before its runtime. */
	setenv("LD_PRELOAD", bin("FAIL_PEERCRED"), 1);
	setenv("ASAN_OPTIONS", "verify_asan_link_order=0", 1);
	fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	cr_assert_geq(fd, 0);
	{
		int saved = dup(2);

		dup2(fd, 2); /* the daemon inherits it as its log */
		d = must_start(name, NULL);
		dup2(saved, 2);
		close(saved);
	}
	close(fd);
	unsetenv("LD_PRELOAD");
	unsetenv("ASAN_OPTIONS");
	socket_path(sock, sizeof(sock), name);
	/* The daemon refuses on accept, before any request: just read. */
	fd = control_client_connect(sock);
	cr_assert_geq(fd, 0);
	control_client_read_line(fd, reply, sizeof(reply), 2000);
	close(fd);
	cr_assert(strstr(reply, "permission denied"), "reply: %s", reply);
	cr_assert_eq(daemon_stop(d), 0);
	fd = open(logpath, O_RDONLY);
	cr_assert_geq(fd, 0);
	slurp(fd, log, sizeof(log));
	/* Not whatever the stack held: the credentials nobody has. */
	cr_assert(strstr(log, "refused uid 4294967295 (pid 0)"), "log: %s", log);
}
