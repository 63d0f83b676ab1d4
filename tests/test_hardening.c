/* SPDX-License-Identifier: MIT */
/*
 * Hardening, round 2 (issue 17): one case per defect found by trying to
 * break shmclock, each named after the behaviour it guards. Every case
 * failed before its fix. Cases that need root (another uid, mount
 * namespaces) skip without it.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>

#include <shmclock/time.h>

#include "control_client.h"
#include "daemon.h"
#include "segment.h"

TestSuite(hardening, .init = daemon_setup, .fini = daemon_teardown, .timeout = 90);

#define MS 1000000LL
#define SEC 1000000000LL

/* shmclockd ARGS... run to its end; exit status, stderr in err. */
static int daemon_run(char *err, size_t errlen, ...)
{
	char *argv[32], out[1024];
	int n = 0;
	va_list ap;

	argv[n++] = (char *)bin("SHMCLOCKD");
	va_start(ap, errlen);
	for (const char *a; (a = va_arg(ap, const char *)) && n < 31;)
		argv[n++] = (char *)a;
	va_end(ap);
	argv[n] = NULL;
	return run_capture(argv, out, sizeof(out), err, errlen);
}

static void need_root(void)
{
	if (geteuid() != 0)
		cr_skip_test("needs root (another uid, or a mount namespace)");
}

/* The "status" object of `shmclockctl status --json`, as text. */
static const char *status_json(const char *name)
{
	cr_assert_eq(ctl(name, "status", "--json", NULL), 0, "status: %s", ctl_err);
	return ctl_out;
}

/* ------------------------------------------------------------- item 1 */

Test(hardening, a_clock_once_stepped_runs_again_under_a_continuous_source)
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

/* ------------------------------------------------------------- item 2 */

Test(hardening, a_reader_holding_flock_cannot_lock_the_writer_out)
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

/* ------------------------------------------------------------- item 3 */

Test(hardening, readers_refuse_a_clock_another_user_created)
{
	const char *name = test_clock_name();
	int64_t y2100 = 4102444800LL * SEC;
	shmclock_t *r = NULL;
	shmclock_info_t in;
	pid_t p;

	need_root();
	p = test_fork();
	if (p == 0) {
		shmclock_writer_t *w;

		if (setgid(65534) || setuid(65534))
			_exit(3);
		if (shmclock_writer_open(name, &w) || shmclock_writer_set_time(w, y2100))
			_exit(4);
		shmclock_writer_close(w);
		_exit(0);
	}
	cr_assert_eq(test_wait(p), 0, "uid 65534 could not create the clock");
	unsetenv("SHMCLOCK_TRUST");
	cr_assert_eq(shmclock_open(name, &r), -EPERM, "a clock of uid 65534 was believed");
	cr_assert(strstr(shmclock_strerror(-EPERM), "SHMCLOCK_TRUST"));
	/* The programs say so, and do not show its time. */
	{
		char *argv[] = { (char *)bin("SHMCLOCK_CAT"), "-n", (char *)name, "--format", "iso", NULL };
		char out[512], err[512];
		int st = run_capture(argv, out, sizeof(out), err, sizeof(err));

		cr_assert_neq(st, 0);
		cr_assert_null(strstr(out, "2100"), "shmclock-cat showed %s", out);
		cr_assert(strstr(err, "not trusted"), "stderr: %s", err);
	}
	{
		char *argv[] = { (char *)bin("SHMCLOCK_RUN"), "-n", (char *)name, "--", "date", "+%Y", NULL };
		char out[512], err[512];
		int st = run_capture(argv, out, sizeof(out), err, sizeof(err));

		cr_assert_neq(st, 0, "shmclock-run ran date: %s", out);
		cr_assert_null(strstr(out, "2100"));
	}
	/* Trusted by uid, by name, or by the flag: then it is read, and its
	 * owner reported. */
	setenv("SHMCLOCK_TRUST", "4242, 65534", 1);
	cr_assert_eq(shmclock_open(name, &r), 0);
	cr_assert_eq(shmclock_info(r, &in), 0);
	cr_assert_eq(in.owner_uid, 65534);
	cr_assert(in.sim_ns >= y2100 && in.sim_ns < y2100 + 60 * SEC, "the trusted clock reads as written");
	shmclock_close(r);
	setenv("SHMCLOCK_TRUST", "nobody", 1);
	cr_assert_eq(shmclock_open(name, &r), 0);
	shmclock_close(r);
	unsetenv("SHMCLOCK_TRUST");
	cr_assert_eq(shmclock_open_ex(name, SHMCLOCK_OPEN_TRUST_ANY_OWNER, &r), 0);
	shmclock_close(r);
	/* Our own clocks need nothing. */
	{
		const char *mine = test_clock_name();
		shmclock_writer_t *w;

		cr_assert_eq(shmclock_writer_open(mine, &w), 0);
		cr_assert_eq(shmclock_open(mine, &r), 0);
		cr_assert_eq(shmclock_info(r, &in), 0);
		cr_assert_eq(in.owner_uid, geteuid());
		shmclock_close(r);
		shmclock_writer_close(w);
	}
}

/* ------------------------------------------------------------- item 4 */

/* Puts a live writer's clock into the state of an update stopped right
 * after its anchor (writer.c, commit_begin after W2a): seq odd, anchor
 * published. Returns the writable mapping. */
static struct shmclock_seg *stop_mid_update(const char *name, int64_t *anchor)
{
	struct shmclock_seg *seg = map_clock_rw(name);

	cr_assert_not_null(seg);
	atomic_fetch_add(&seg->seq, 1);
	atomic_thread_fence(memory_order_seq_cst);
	*anchor = now_mono();
	atomic_store(&seg->anchor_mono_ns, *anchor);
	return seg;
}

/* ... and completes it as a pause at the anchor would (W4, W5). */
static void finish_as_pause(struct shmclock_seg *seg, int64_t anchor)
{
	int64_t v = shmclock_static_eval(atomic_load(&seg->mono_base), atomic_load(&seg->sim_base),
					 atomic_load(&seg->mult), anchor);

	atomic_store(&seg->mono_base, anchor);
	atomic_store(&seg->sim_base, v);
	atomic_store(&seg->mult, 0);
	atomic_store(&seg->flags, atomic_load(&seg->flags) | SHMCLOCK_F_PAUSED);
	atomic_fetch_add(&seg->seq, 1);
	munmap(seg, SHMCLOCK_SEG_SIZE);
}

Test(hardening, a_writer_stopped_mid_update_freezes_time_and_never_blocks_readers)
{
	const char *name = test_clock_name();
	shmclock_writer_t *w;
	struct shmclock_seg *seg;
	shmclock_t *r;
	int64_t anchor, t0, v, prev = INT64_MIN, worst = 0;

	cr_assert_eq(shmclock_writer_open(name, &w), 0);
	cr_assert_eq(shmclock_writer_set_time(w, 0), 0);
	r = open_reader(name);
	sleep_ns(20 * MS);
	prev = now_of(r);
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
	cr_assert_geq(now_of(r), prev);
	shmclock_close(r);
	shmclock_writer_close(w);
}

Test(hardening, the_shim_never_falls_back_to_the_real_clock_while_the_writer_is_stuck)
{
	const char *name = test_clock_name();
	char *argv[] = { (char *)bin("SHMCLOCK_RUN"), "-n", (char *)name, "--clocks", "monotonic", "--",
			 "python3", "-c",
			 "import time\nfor _ in range(5): print(time.monotonic())", NULL };
	char out[1024], err[1024];
	shmclock_writer_t *w;
	struct shmclock_seg *seg;
	int64_t anchor, t0;
	int st;

	if (access("/usr/bin/python3", X_OK))
		cr_skip_test("python3 is not installed (.ci/setup installs it)");
	cr_assert_eq(shmclock_writer_open(name, &w), 0);
	cr_assert_eq(shmclock_writer_set_time(w, 5 * SEC), 0);
	seg = stop_mid_update(name, &anchor);
	t0 = now_mono();
	st = run_capture(argv, out, sizeof(out), err, sizeof(err));
	cr_assert_eq(st, 0, "exit %d: %s", st, err);
	/* Each reading is the frozen simulated 5 s, not the machine's uptime,
	 * and nobody waited a second per read. */
	for (char *l = strtok(out, "\n"); l; l = strtok(NULL, "\n")) {
		double m = atof(l);

		cr_assert(m >= 5.0 && m < 6.0, "CLOCK_MONOTONIC read %s under the shim", l);
	}
	cr_assert_lt(now_mono() - t0, 3 * SEC);
	finish_as_pause(seg, anchor);
	shmclock_writer_close(w);
}

/* ------------------------------------------------------------- item 5: tests/daemon (a_full_dev_shm_...) */

Test(hardening, the_fixed_source_runs_at_the_scale_asked)
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

/* ------------------------------------------------------------- item 7 */

Test(hardening, a_start_that_fails_leaves_the_clock_untouched)
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

/* ------------------------------------------------------------- item 8 */

Test(hardening, a_fifo_as_config_is_refused_at_start_and_on_SIGHUP)
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

/* ------------------------------------------------------------- item 9 */

Test(hardening, huge_jumps_saturate_instead_of_wrapping)
{
	const char *name = test_clock_name();
	shmclock_writer_t *w;
	shmclock_info_t in;
	shmclock_rate_t rate;
	shmclock_t *r;
	uint64_t missed = 1;
	int64_t t0;

	cr_assert_eq(shmclock_writer_open(name, &w), 0);
	cr_assert_eq(shmclock_writer_set_time(w, -9200000000LL * SEC), 0);
	cr_assert_eq(shmclock_writer_set_time(w, 9200000000LL * SEC), 0);
	cr_assert_eq(shmclock_writer_info(w, &in), 0);
	cr_assert_eq(in.last_jump_ns, INT64_MAX, "jump of %lld", (long long)in.last_jump_ns);
	cr_assert_eq(shmclock_writer_set_time(w, -9200000000LL * SEC), 0);
	cr_assert_eq(shmclock_writer_info(w, &in), 0);
	cr_assert_eq(in.last_jump_ns, INT64_MIN);

	/* A rate across a huge forward jump: a new schedule, nothing missed,
	 * and it still waits its period. */
	cr_assert_eq(shmclock_writer_set_time(w, 0), 0);
	r = open_reader(name);
	cr_assert_eq(shmclock_rate_init(&rate, r, shmclock_msec(10)), 0);
	cr_assert_eq(shmclock_rate_sleep(&rate, &missed), 0);
	cr_assert_eq(shmclock_writer_set_time(w, INT64_MAX - 1000 * SEC), 0);
	t0 = now_mono();
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(shmclock_rate_sleep(&rate, &missed), 0);
		cr_assert_eq(missed, 0, "missed %llu", (unsigned long long)missed);
	}
	cr_assert_geq(now_mono() - t0, 20 * MS, "the rate stopped waiting");
	shmclock_close(r);
	shmclock_writer_close(w);
}

Test(hardening, status_world_time_near_2262_does_not_wrap_to_1969)
{
	const char *name = test_clock_name();
	pid_t d = must_start(name, "--start", "2262-04-01T00:00:00Z", "--unix-zero",
			     "2000-01-01T00:00:00Z", "--paused", NULL);
	const char *st = status_json(name), *u = strstr(st, "\"sim_unix\":\"");

	cr_assert_not_null(u, "status: %s", st);
	cr_assert(!strncmp(u + 12, "2262-", 5), "world time %.30s", u + 12);
	cr_assert_eq(daemon_stop(d), 0);
}

/* ------------------------------------------------------------ item 10 */

Test(hardening, remove_on_exit_never_deletes_a_successors_clock)
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

/* ------------------------------------------------------------ item 11 */

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

Test(hardening, out_of_descriptors_the_control_loop_neither_spins_nor_hangs_clients)
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

/* ------------------------------------------------------------ item 12 */

Test(hardening, SegmentMode_refuses_write_for_others_and_is_applied_on_every_start)
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

/* ------------------------------------------------------------ item 13 */

Test(hardening, the_sensor_refuses_impossible_rates_and_pipelines_its_latency)
{
	const char *name = test_clock_name();
	char out[8192], err[1024];
	pid_t d = must_start(name, NULL);
	int st, frames = 0;

	{
		char *argv[] = { (char *)bin("SHMCLOCK_SENSOR"), "-n", (char *)name, "--rate", "1e-10",
				 "--frames", "1", NULL };

		st = run_capture(argv, out, sizeof(out), err, sizeof(err));
		cr_assert_eq(st, 2, "--rate 1e-10: exit %d (%s)", st, err);
		cr_assert(strstr(err, "--rate"), "message: %s", err);
	}
	{
		/* 10 ms period, 20 ms latency: a frame every 10 ms, none missed. */
		char *argv[] = { (char *)bin("SHMCLOCK_SENSOR"), "-n", (char *)name, "--rate", "100",
				 "--frames", "20", NULL };
		int64_t prev = -1;

		st = run_capture(argv, out, sizeof(out), err, sizeof(err));
		cr_assert_eq(st, 0, "exit %d: %s", st, err);
		for (char *l = strtok(out, "\n"); l; l = strtok(NULL, "\n")) {
			long long m, p;
			unsigned long long missed;

			if (sscanf(l, "frame %*d measured %lld published %lld missed %llu", &m, &p, &missed) != 3)
				continue;
			frames++;
			cr_assert_eq(p - m, 20 * MS);
			cr_assert_eq(missed, 0, "%s", l);
			/* A measurement is stamped when the sensor wakes: on a
			 * loaded machine that is late (18.5 ms apart was seen in
			 * a CI rehearsal), which "missed" above accounts for; this
			 * only catches frames that stopped coming. */
			if (prev >= 0)
				cr_assert(m > prev && m - prev < 1000 * MS, "frames %lld ns apart",
					  m - prev);
			prev = m;
		}
		cr_assert_eq(frames, 20);
	}
	cr_assert_eq(daemon_stop(d), 0);
}

/* ------------------------------------------------------------ item 14 */

Test(hardening, shmclockctl_gives_up_on_a_stopped_daemon)
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

/* ------------------------------------------------------------ item 15 */

Test(hardening, config_errors_point_at_the_right_line)
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

Test(hardening, scale_and_paused_apply_to_a_continued_clock)
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

Test(hardening, scales_the_rate_cannot_hold_within_a_tenth_of_a_percent_are_refused)
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

Test(hardening, the_shims_cut_short_messages_end_in_a_newline)
{
	char name[301], *argv[] = { "/bin/true", NULL }, out[64], err[1024];
	char *env_preload;
	int st;

	memset(name, 'a', 300);
	name[300] = 0;
	env_preload = getenv("SHMCLOCK_PRELOAD");
	cr_assert_not_null(env_preload);
	setenv("LD_PRELOAD", env_preload, 1);
	setenv("SHMCLOCK_NAME", name, 1);
	st = run_capture(argv, out, sizeof(out), err, sizeof(err));
	unsetenv("LD_PRELOAD");
	unsetenv("SHMCLOCK_NAME");
	cr_assert_eq(st, 0);
	cr_assert_gt(strlen(err), 0);
	cr_assert_eq(err[strlen(err) - 1], '\n', "message: %s", err);
}

/* ------------------------------------------- issue 21, item 3 (reload) */

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

Test(hardening, SIGHUP_applies_ControlGroup_and_what_status_reports)
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

/* ----------------------------------------- issue 21, items 2 and 6 */

/* preload-probe MODE under shmclock-run, against a daemon of its own; its
 * output in out (the probe must exit 0). */
static void probe_under_shim(const char *mode, char *out, size_t outlen)
{
	const char *name = test_clock_name();
	char *argv[] = { (char *)bin("SHMCLOCK_RUN"), "-n", (char *)name, "--",
			 (char *)bin("PRELOAD_PROBE"), (char *)mode, NULL };
	char err[1024];
	pid_t d = must_start(name, NULL);
	int st = run_capture(argv, out, outlen, err, sizeof(err));

	cr_assert_eq(st, 0, "preload-probe %s: exit %d: %s", mode, st, err);
	cr_assert_eq(daemon_stop(d), 0);
}

Test(hardening, the_shim_takes_a_timeout_of_centuries_as_a_long_wait)
{
	char out[256];

	/* {LONG_MAX, 0}: 9.2e27 ns. Multiplied before saturating, it wrapped
	 * into a timeout in the past: select returned at once, nothing ready. */
	probe_under_shim("forever", out, sizeof(out));
	cr_assert(!strncmp(out, "ready", 5), "select(..., {LONG_MAX, 0}) under the shim: %s", out);
}

Test(hardening, a_periodic_timer_looked_at_loses_no_expiry)
{
	char out[256];
	int n = -1;

	probe_under_shim("timer", out, sizeof(out));
	cr_assert_eq(sscanf(out, "expiries %d", &n), 1, "output: %s", out);
	fprintf(stderr, "# 100 ms timer over 2 s with one timer_gettime: %d expiries\n", n);
	/* 20 due; one either side for where the 2 s fall on a loaded machine. */
	cr_assert(n >= 19 && n <= 21, "%d expiries in 2 s of a 100 ms timer", n);
}

/* -------------------------------- issue 21, item 4 (peer credentials) */

Test(hardening, a_client_whose_credentials_cannot_be_read_is_refused_and_logged_as_nobody)
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
