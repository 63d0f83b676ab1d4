/* SPDX-License-Identifier: MIT */
/*
 * Helpers for end-to-end tests: run the built shmclockd / shmclockctl
 * (paths from $SHMCLOCKD and $SHMCLOCKCTL, set by meson), each test with a
 * runtime directory of its own, everything killed and removed afterwards.
 */
#ifndef SHMCLOCK_TEST_DAEMON_H
#define SHMCLOCK_TEST_DAEMON_H

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <sys/stat.h>

#include <criterion/criterion.h>

#include "helpers.h"

static char rt_dir[64];

static inline const char *bin(const char *var)
{
	const char *p = getenv(var);

	if (!p)
		cr_assert_fail("%s is not set: run the tests through meson test", var);
	return p;
}

/* A private runtime dir (the default socket location) for this test. */
static inline void daemon_setup(void)
{
	bin("SHMCLOCKD");
	bin("SHMCLOCKCTL");
	snprintf(rt_dir, sizeof(rt_dir), "/tmp/shmclock-test-%d-%ld", (int)getpid(),
		 (long)(now_mono() % 1000000));
	mkdir(rt_dir, 0700);
	setenv("SHMCLOCK_RUNTIME_DIR", rt_dir, 1);
	unsetenv("SHMCLOCK_NAME");
	unsetenv("SHMCLOCK_SOCKET");
}

static inline void daemon_teardown(void)
{
	DIR *d;
	struct dirent *e;

	test_cleanup();
	d = opendir(rt_dir);
	if (d) {
		while ((e = readdir(d))) {
			char p[400];

			if (e->d_name[0] == '.')
				continue;
			snprintf(p, sizeof(p), "%s/%s", rt_dir, e->d_name);
			unlink(p);
		}
		closedir(d);
	}
	rmdir(rt_dir);
}

static inline void socket_path(char *out, size_t n, const char *name)
{
	snprintf(out, n, "%s/%s.sock", rt_dir, name);
}

/*
 * Starts shmclockd with argv (NULL-terminated, without the program name),
 * waits for READY=1 on --notify-fd (at most 5 s). Returns its pid, or -1
 * if it exited or never got ready (*status then holds its exit status).
 */
static inline pid_t daemon_start_v(char *const *args, int *status)
{
	char *argv[64], fdarg[32];
	int p[2], n = 0;
	pid_t pid;

	if (pipe(p) < 0)
		return -1;
	argv[n++] = (char *)bin("SHMCLOCKD");
	snprintf(fdarg, sizeof(fdarg), "--notify-fd=%d", p[1]);
	argv[n++] = fdarg;
	argv[n++] = (char *)"--log-level=warn";
	for (int i = 0; args[i] && n < 62; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	pid = test_fork();
	if (pid == 0) {
		close(p[0]);
		execv(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	{
		struct pollfd pf = { .fd = p[0], .events = POLLIN };
		char buf[16] = { 0 };

		if (poll(&pf, 1, 5000) == 1 && read(p[0], buf, sizeof(buf) - 1) > 0 &&
		    !strncmp(buf, "READY=1", 7)) {
			close(p[0]);
			return pid;
		}
	}
	close(p[0]);
	kill(pid, SIGKILL);
	if (status)
		*status = test_wait(pid);
	return -1;
}

static inline pid_t daemon_start(const char *first, ...)
{
	char *args[32];
	int n = 0;
	va_list ap;

	va_start(ap, first);
	for (const char *a = first; a && n < 31; a = va_arg(ap, const char *))
		args[n++] = (char *)a;
	va_end(ap);
	args[n] = NULL;
	return daemon_start_v(args, NULL);
}

/* SIGTERM, and wait: returns the daemon's exit status. */
static inline int daemon_stop(pid_t pid)
{
	kill(pid, SIGTERM);
	return test_wait(pid);
}

static inline void slurp(int fd, char *buf, size_t len)
{
	ssize_t n = pread(fd, buf, len - 1, 0);

	buf[n > 0 ? n : 0] = 0;
	close(fd);
}

/*
 * Reads the file behind @fd into @buf (NUL-terminated, from its start)
 * until it holds @needle or @timeout_ns of real time have gone: a log line
 * the daemon writes when it gets to it, on a machine that may be loaded.
 * Returns whether it came; @fd stays open.
 */
static inline bool log_wait(int fd, char *buf, size_t len, const char *needle, int64_t timeout_ns)
{
	int64_t t0 = now_mono();

	for (;;) {
		ssize_t n = pread(fd, buf, len - 1, 0);

		buf[n > 0 ? n : 0] = 0;
		if (strstr(buf, needle))
			return true;
		if (now_mono() - t0 > timeout_ns)
			return false;
		sleep_ns(20000000);
	}
}

/*
 * Runs a program (NULL-terminated argv, argv[0] a path), its stdout and
 * stderr captured into out / err (NUL-terminated, truncated). Returns the
 * exit status as test_wait() does.
 */
static inline int run_capture(char *const *argv, char *out, size_t outlen, char *err,
			      size_t errlen)
{
	int fo = open(rt_dir, O_TMPFILE | O_RDWR, 0600);
	int fe = open(rt_dir, O_TMPFILE | O_RDWR, 0600);
	pid_t pid;
	int st;

	if (fo < 0 || fe < 0)
		return -1;
	pid = test_fork();
	if (pid == 0) {
		dup2(fo, 1);
		dup2(fe, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	st = test_wait(pid);
	slurp(fo, out, outlen);
	slurp(fe, err, errlen);
	return st;
}

static char ctl_out[8192], ctl_err[4096];

/* shmclockctl -n NAME ARGS...; output in ctl_out / ctl_err. */
static inline int ctl(const char *name, ...)
{
	char *argv[16];
	int n = 0;
	va_list ap;

	argv[n++] = (char *)bin("SHMCLOCKCTL");
	argv[n++] = (char *)"-n";
	argv[n++] = (char *)name;
	va_start(ap, name);
	for (const char *a; (a = va_arg(ap, const char *)) && n < 15;)
		argv[n++] = (char *)a;
	va_end(ap);
	argv[n] = NULL;
	return run_capture(argv, ctl_out, sizeof(ctl_out), ctl_err, sizeof(ctl_err));
}

/* Readers and daemons that must work: a failure ends the test. */
static inline shmclock_t *open_reader(const char *name)
{
	shmclock_t *r = NULL;

	cr_assert_eq(shmclock_open(name, &r), 0, "open %s", name);
	return r;
}

static inline shmclock_info_t info_of(shmclock_t *r)
{
	shmclock_info_t i;
	int e = shmclock_info(r, &i);

	cr_assert(e == 0 || e == -ESTALE, "info: %s", shmclock_strerror(e));
	return i;
}

static inline int64_t now_of(shmclock_t *r)
{
	int64_t t = 0;
	int e = shmclock_now(r, &t);

	cr_assert_eq(e, 0, "now: %s", shmclock_strerror(e));
	return t;
}

static inline pid_t must_start(const char *name, ...)
{
	char *args[32];
	int n = 0;
	va_list ap;
	pid_t pid;

	args[n++] = (char *)"-n";
	args[n++] = (char *)name;
	va_start(ap, name);
	for (const char *a; (a = va_arg(ap, const char *)) && n < 31;)
		args[n++] = (char *)a;
	va_end(ap);
	args[n] = NULL;
	pid = daemon_start_v(args, NULL);
	cr_assert_gt(pid, 0, "shmclockd -n %s did not get ready", name);
	return pid;
}

#define MS 1000000LL
#define SEC 1000000000LL

/* shmclockd ARGS... (NULL-terminated) run to its end: its exit status,
 * its stderr in err. */
static inline int daemon_run(char *err, size_t errlen, ...)
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

static inline void need_root(void)
{
	if (geteuid() != 0)
		cr_skip_test("needs root (another uid, or a mount namespace)");
}

/* The "status" object of `shmclockctl status --json`, as text (ctl_out). */
static inline const char *status_json(const char *name)
{
	cr_assert_eq(ctl(name, "status", "--json", NULL), 0, "status: %s", ctl_err);
	return ctl_out;
}

static inline void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
}

#endif
