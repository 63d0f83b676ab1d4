/* SPDX-License-Identifier: MIT */
/* shmclock-bench: statistics, JSON, the machine, private clocks. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "control_client.h"
#include "paths.h"

volatile int64_t bench_sink;

int64_t bench_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double bench_pct(const double *sorted, long n, double p)
{
	long i = (long)(p / 100.0 * (double)(n - 1) + 0.5);

	return sorted[i < 0 ? 0 : i >= n ? n - 1 : i];
}

struct bench_stats bench_summarise(double *v, long n)
{
	struct bench_stats s = { 0 };

	if (n <= 0)
		return s;
	qsort(v, (size_t)n, sizeof(double), cmp_double);
	s.p50 = bench_pct(v, n, 50);
	s.p90 = bench_pct(v, n, 90);
	s.p99 = bench_pct(v, n, 99);
	s.p999 = bench_pct(v, n, 99.9);
	s.max = v[n - 1];
	return s;
}

void bench_json_stats(cJSON *obj, const struct bench_stats *s)
{
	cJSON_AddNumberToObject(obj, "p50_ns", s->p50);
	cJSON_AddNumberToObject(obj, "p90_ns", s->p90);
	cJSON_AddNumberToObject(obj, "p99_ns", s->p99);
	cJSON_AddNumberToObject(obj, "p999_ns", s->p999);
	cJSON_AddNumberToObject(obj, "max_ns", s->max);
}

cJSON *bench_json_cdf(const double *sorted, long n)
{
	static const double tail[] = { 99.2, 99.4, 99.6, 99.8, 99.9, 99.95, 99.99, 100 };
	cJSON *a = cJSON_CreateArray();

	for (int p = 0; p <= 99; p++) {
		double pt[2] = { p, bench_pct(sorted, n, p) };

		cJSON_AddItemToArray(a, cJSON_CreateDoubleArray(pt, 2));
	}
	for (size_t i = 0; i < sizeof(tail) / sizeof(tail[0]); i++) {
		double pt[2] = { tail[i], bench_pct(sorted, n, tail[i]) };

		cJSON_AddItemToArray(a, cJSON_CreateDoubleArray(pt, 2));
	}
	return a;
}

int bench_ncpu(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 0 ? (int)n : 1;
}

/* @s into @out, cut to fit. */
static void copy_cut(char *out, size_t len, const char *s)
{
	size_t k = strlen(s);

	if (k >= len)
		k = len - 1;
	memcpy(out, s, k);
	out[k] = 0;
}

/* First line of @path starting with @key, value after the colon. */
static void read_field(const char *path, const char *key, char *out, size_t len)
{
	FILE *f = fopen(path, "r");
	char line[512];

	snprintf(out, len, "unknown");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *c = strchr(line, ':');

		if (!key && line[0]) {
			line[strcspn(line, "\n")] = 0;
			copy_cut(out, len, line);
			break;
		}
		if (key && c && !strncmp(line, key, strlen(key))) {
			c++;
			while (*c == ' ' || *c == '\t')
				c++;
			c[strcspn(c, "\n")] = 0;
			copy_cut(out, len, c);
			break;
		}
	}
	fclose(f);
}

cJSON *bench_machine(void)
{
	cJSON *m = cJSON_CreateObject();
	struct utsname u;
	char buf[256];
	time_t now = time(NULL);
	struct tm tm;

	read_field("/proc/cpuinfo", "model name", buf, sizeof(buf));
	cJSON_AddStringToObject(m, "cpu", buf);
	cJSON_AddNumberToObject(m, "cpus", bench_ncpu());
	if (uname(&u) == 0)
		cJSON_AddStringToObject(m, "kernel", u.release);
	read_field("/sys/devices/system/clocksource/clocksource0/current_clocksource", NULL, buf,
		   sizeof(buf));
	cJSON_AddStringToObject(m, "clocksource", buf);
	gmtime_r(&now, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
	cJSON_AddStringToObject(m, "date", buf);
	cJSON_AddStringToObject(m, "shmclock", shmclock_version());
	return m;
}

/* The private clock a run has open, removed if a signal ends the run (a
 * closed pipe under `| head`, Ctrl-C): the segment path, ready made. */
static char live_path[128];
static pid_t live_owner;

static void on_fatal(int sig)
{
	/* unlink is async-signal-safe; only the process that made it. */
	if (live_path[0] && getpid() == live_owner)
		unlink(live_path);
	signal(sig, SIG_DFL);
	raise(sig);
}

int bench_clock_open(char *name, size_t len, shmclock_writer_t **w, shmclock_t **clk)
{
	static const int fatal[] = { SIGINT, SIGTERM, SIGHUP, SIGPIPE };
	static int seq;
	int r;

	snprintf(name, len, "bench-%d-%d", (int)getpid(), seq++);
	snprintf(live_path, sizeof(live_path), "/dev/shm/shmclock.%s", name);
	live_owner = getpid();
	for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++)
		signal(fatal[i], on_fatal);
	r = shmclock_writer_open(name, w);
	if (r == 0)
		r = shmclock_writer_set_time(*w, 0);
	if (r == 0)
		r = shmclock_open(name, clk);
	if (r)
		fprintf(stderr, "shmclock-bench: clock %s: %s\n", name, shmclock_strerror(r));
	return r;
}

void bench_clock_close(const char *name, shmclock_writer_t *w, shmclock_t *clk)
{
	shmclock_close(clk);
	shmclock_writer_close(w);
	shmclock_unlink(name);
	live_path[0] = 0;
}

const char *bench_find(const char *env, const char *dir, const char *file, const char *fallback,
		       char *buf, size_t len)
{
	const char *e = env ? getenv(env) : NULL, *beside;
	char rel[PATH_MAX];

	if (e && *e)
		return e;
	snprintf(rel, sizeof(rel), "../%s/%s", dir, file);
	beside = paths_beside_self(rel, buf, len);
	return beside ? beside : fallback;
}

void *bench_shared(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		fprintf(stderr, "shmclock-bench: mmap %zu bytes: %s\n", n, strerror(errno));
		exit(1);
	}
	return p;
}

void bench_header(const char *unit_note)
{
	printf("  %-40s %9s %9s %9s %9s %10s   (%s)\n", "contender", "p50", "p99", "p99.9", "max",
	       "p50 ratio", unit_note);
}

void bench_row(const char *name, const struct bench_stats *s, double base_p50, double unit)
{
	printf("  %-40s %9.2f %9.2f %9.2f %9.1f %9.3fx\n", name, s->p50 / unit, s->p99 / unit,
	       s->p999 / unit, s->max / unit, base_p50 > 0 ? s->p50 / base_p50 : 0);
}

/* Starts argv; with @notify, waits for READY=1 on a pipe (5 s). */
/* The child's side: dies with us (a benchmark killed by a signal or a
 * closed pipe must not leave a daemon behind), @out_fd (if >= 0) as its
 * stdout, @close_fd closed. */
static pid_t spawn(char **argv, int close_fd, int out_fd)
{
	pid_t pid = fork();

	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (close_fd >= 0)
			close(close_fd);
		if (out_fd >= 0 && (dup2(out_fd, 1) < 0 || close(out_fd) < 0))
			_exit(127);
		execvp(argv[0], argv);
		fprintf(stderr, "shmclock-bench: %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	return pid;
}

/* Reads from @fd what arrives within 5 s (one read) into @buf; closes @fd.
 * Kills and reaps @pid when nothing came. */
static pid_t await_first(pid_t pid, int fd, char *buf, size_t len)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	ssize_t n = -1;

	if (pid > 0 && poll(&pf, 1, 5000) == 1)
		n = read(fd, buf, len - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	if (n <= 0 && pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return -1;
	}
	return pid;
}

pid_t bench_spawn(char **argv, bool notify)
{
	int p[2] = { -1, -1 };
	char fdarg[32], buf[16];
	pid_t pid;

	if (!notify)
		return spawn(argv, -1, -1);
	if (pipe(p) < 0)
		return -1;
	snprintf(fdarg, sizeof(fdarg), "--notify-fd=%d", p[1]);
	for (int i = 0; argv[i]; i++)
		if (!strcmp(argv[i], "--notify-fd"))
			argv[i] = fdarg;
	pid = spawn(argv, p[0], -1);
	close(p[1]);
	pid = await_first(pid, p[0], buf, sizeof(buf));
	if (pid > 0 && strncmp(buf, "READY=1", 7)) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return -1;
	}
	return pid;
}

pid_t bench_spawn_line(char **argv, char *line, size_t len)
{
	int p[2];
	pid_t pid;

	if (pipe(p) < 0)
		return -1;
	pid = spawn(argv, p[0], p[1]);
	close(p[1]);
	return await_first(pid, p[0], line, len);
}

pid_t bench_spawn_to(char **argv, int out)
{
	return spawn(argv, -1, out);
}

void bench_sleep_s(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void *req_main(void *arg)
{
	struct bench_req *a = arg;

	a->rc = control_client_request(a->sock, a->req, a->buf, a->len, 10000);
	return NULL;
}

int bench_req_start(struct bench_req *a)
{
	a->buf[0] = 0;
	a->rc = -1;
	return pthread_create(&a->thread, NULL, req_main, a) ? -1 : 0;
}

int bench_req_join(struct bench_req *a)
{
	pthread_join(a->thread, NULL);
	return a->rc || !strstr(a->buf, "\"ok\":true") ? -1 : 0;
}

int bench_runtime_dir(char *rt, size_t len)
{
	snprintf(rt, len, "/tmp/shmclock-bench-%d", (int)getpid());
	if (mkdir(rt, 0700) < 0 && errno != EEXIST) {
		fprintf(stderr, "shmclock-bench: %s: %s\n", rt, strerror(errno));
		return -1;
	}
	setenv("SHMCLOCK_RUNTIME_DIR", rt, 1);
	return 0;
}

double bench_status_num(const char *rt, const char *name, const char *key)
{
	char buf[16384], pat[80], *p, sock[256];

	snprintf(sock, sizeof(sock), "%s/%s.sock", rt, name);
	if (control_client_request(sock, "{\"v\":1,\"cmd\":\"status\"}\n", buf, sizeof(buf), 10000))
		return -1;
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = strstr(buf, pat);
	if (!p)
		return -1;
	p += strlen(pat);
	return !strncmp(p, "true", 4) ? 1 : !strncmp(p, "false", 5) ? 0 : strtod(p, NULL);
}
