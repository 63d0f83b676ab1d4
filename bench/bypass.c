/* SPDX-License-Identifier: MIT */
/*
 * bypass: what the shim's ways of reaching programs that skip libc cost
 * (issue 33), against the bare calls, in the same run:
 *
 *   reads   clock_gettime(CLOCK_MONOTONIC) made through libc (the shim's
 *           interposed function), through the vDSO's own symbol (redirected
 *           to the shim's reader), and as a raw system call (trapped by the
 *           seccomp filter, answered by the SIGSYS handler);
 *   sleeps  a 1 us nanosleep through libc and as a raw system call.
 *
 * The bare figures are this process's (no shim); the others come from a
 * child under the shim on a private running clock (scale 1), once with the
 * trap on and once off: the libc rows must not move (the filter costs
 * only the system calls it sees, and the libc read makes none), the raw
 * rows show the trap's price; and once under shmclock-run --supervise
 * (ptrace, no shim, the vDSO hidden: every read is a stop of the tracer).
 * Reads are timed in batches; sleeps one by one. p50 of each. Last, what
 * the supervisor costs a program that makes many other system calls: dd
 * copying 1 byte at a time, a million times, bare and supervised (the
 * filter sees every call, the tracer none).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

typedef int (*gettime_fn)(clockid_t, struct timespec *);

enum { R_LIBC, R_VDSO, R_RAW, S_LIBC, S_RAW, N_ROWS };

static const char *const row_name[N_ROWS] = {
	"read: libc clock_gettime", "read: the vDSO's clock_gettime",
	"read: syscall(SYS_clock_gettime)", "sleep 1 us: libc nanosleep",
	"sleep 1 us: syscall(SYS_nanosleep)",
};

static gettime_fn vdso_fn(void)
{
	void *h = dlopen("linux-vdso.so.1", RTLD_LAZY | RTLD_NOLOAD);
	void *f = h ? dlsym(h, "__vdso_clock_gettime") : NULL;
	gettime_fn fn = NULL;

	memcpy(&fn, &f, sizeof(fn));
	return fn;
}

static int raw_gettime(clockid_t c, struct timespec *ts)
{
	return (int)syscall(SYS_clock_gettime, c, ts);
}

/* p50 ns of one read with @fn: @samples batches of @batch. */
static double time_reads(gettime_fn fn, long samples, int batch)
{
	double *v = malloc(sizeof(double) * (size_t)samples);
	struct timespec ts;
	struct bench_stats st;
	volatile long acc = 0;

	if (!v)
		return -1;
	for (long s = 0; s < samples; s++) {
		int64_t t0 = bench_mono_ns();

		for (int i = 0; i < batch; i++) {
			fn(CLOCK_MONOTONIC, &ts);
			acc += ts.tv_nsec;
		}
		v[s] = (double)(bench_mono_ns() - t0) / batch;
	}
	st = bench_summarise(v, samples);
	free(v);
	return st.p50;
}

/* p50 ns of one 1 us sleep, libc's or raw. */
static double time_sleeps(bool raw, long samples)
{
	double *v = malloc(sizeof(double) * (size_t)samples);
	struct timespec us = { 0, 1000 };
	struct bench_stats st;

	if (!v)
		return -1;
	for (long s = 0; s < samples; s++) {
		int64_t t0 = bench_mono_ns();

		if (raw)
			syscall(SYS_nanosleep, &us, NULL);
		else
			nanosleep(&us, NULL);
		v[s] = (double)(bench_mono_ns() - t0);
	}
	st = bench_summarise(v, samples);
	free(v);
	return st.p50;
}

static void measure_all(double out[N_ROWS], long reads, int batch, long sleeps)
{
	gettime_fn v = vdso_fn();

	out[R_LIBC] = time_reads(clock_gettime, reads, batch);
	out[R_VDSO] = v ? time_reads(v, reads, batch) : -1;
	out[R_RAW] = time_reads(raw_gettime, reads, batch / 10 ? batch / 10 : 1);
	out[S_LIBC] = time_sleeps(false, sleeps);
	out[S_RAW] = time_sleeps(true, sleeps);
}

/* The child under the shim: its figures, one "%d %f" line each. */
int bench_bypass_child(const char *args)
{
	long reads = 0, sleeps = 0;
	int batch = 0;
	double r[N_ROWS];

	if (sscanf(args, "%ld,%d,%ld", &reads, &batch, &sleeps) != 3 || reads <= 0 || batch <= 0 ||
	    sleeps <= 0)
		return 2;
	measure_all(r, reads, batch, sleeps);
	for (int i = 0; i < N_ROWS; i++)
		printf("%d %.3f\n", i, r[i]);
	return 0;
}

/* @run: shmclock-run for the supervised child, else NULL (the shim). */
static bool run_child(const char *shim, const char *run, const char *clock, const char *trap,
		      const char *args, double out[N_ROWS])
{
	char e1[4200], e2[128], e3[64], e4[64], self[4096];
	char *env[] = { e1, e2, e3, e4, NULL };
	char *argv[] = { "/proc/self/exe", "__bypass-child", (char *)args, NULL };
	char *sargv[] = { (char *)run, "-q", "-n", (char *)clock, "--supervise", "--", self,
			  "__bypass-child", (char *)args, NULL };
	char *text, *line, *save = NULL;
	ssize_t n;
	int got = 0;

	snprintf(e1, sizeof(e1), "LD_PRELOAD=%s", shim);
	snprintf(e2, sizeof(e2), "SHMCLOCK_NAME=%s", clock);
	snprintf(e3, sizeof(e3), "SHMCLOCK_TRAP=%s", trap);
	snprintf(e4, sizeof(e4), "SHMCLOCK_QUIET=1");
	if (run) {
		n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (n <= 0)
			return false;
		self[n] = 0;
		snprintf(e1, sizeof(e1), "SHMCLOCK_BENCH_UNUSED=1");
	}
	text = bench_run_helper(run ? sargv : argv, env);
	if (!text)
		return false;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		int i;
		double x;

		if (sscanf(line, "%d %lf", &i, &x) == 2 && i >= 0 && i < N_ROWS) {
			out[i] = x;
			got++;
		}
	}
	free(text);
	return got == N_ROWS;
}

/*
 * The floor of a supervised read: a child whose getppid() a thread of its
 * own answers through a seccomp listener (SECCOMP_RET_USER_NOTIF), p50 ns
 * per call. The supervisor answers reads that way (a ptrace stop cost 3 to
 * 7 times more on the machine of bench/README.md); waits stay with ptrace,
 * as a listener cannot make a futex or epoll wait in the caller's place.
 */
struct unotif {
	int fd;
	long calls;
};

static void *unotif_answer(void *arg)
{
	struct unotif *u = arg;
	struct seccomp_notif *req = calloc(1, 4096);
	struct seccomp_notif_resp *resp = calloc(1, 4096);

	while (req && resp) {
		memset(req, 0, 4096);
		if (ioctl(u->fd, SECCOMP_IOCTL_NOTIF_RECV, req))
			break;
		memset(resp, 0, 4096);
		resp->id = req->id;
		resp->val = 42;
		if (ioctl(u->fd, SECCOMP_IOCTL_NOTIF_SEND, resp) && errno != ENOENT)
			break;
	}
	free(req);
	free(resp);
	return NULL;
}

static double time_unotif(long samples)
{
	double *res = bench_shared(sizeof(double));
	pid_t pid;
	int st;

	*res = -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		struct sock_filter f[] = {
			BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getppid, 0, 1),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		};
		struct sock_fprog fp = { sizeof(f) / sizeof(f[0]), f };
		struct unotif u = { -1, samples };
		double *v = malloc(sizeof(double) * (size_t)samples);
		pthread_t th;
		struct bench_stats bs;

		if (!v || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
			_exit(1);
		/* This thread only (no TSYNC): the answering thread is not
		 * filtered, whenever it starts. */
		u.fd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
				    SECCOMP_FILTER_FLAG_NEW_LISTENER, &fp);
		if (u.fd < 0 || pthread_create(&th, NULL, unotif_answer, &u))
			_exit(1);
		for (long i = 0; i < samples; i++) {
			int64_t t0 = bench_mono_ns();

			if (syscall(SYS_getppid) != 42)
				_exit(1);
			v[i] = (double)(bench_mono_ns() - t0);
		}
		bs = bench_summarise(v, samples);
		*res = bs.p50;
		_exit(0);
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
		return -1;
	return *res;
}

/* Wall-clock seconds of the fastest of 3 runs of @argv (stdout and
 * stderr to /dev/null); < 0 when it failed. */
static double time_cmd(char **argv)
{
	double best = -1;

	for (int i = 0; i < 3; i++) {
		int64_t t0 = bench_mono_ns();
		pid_t pid = fork();
		int st;

		if (pid < 0)
			return -1;
		if (pid == 0) {
			int fd = open("/dev/null", O_WRONLY);

			dup2(fd, 1);
			dup2(fd, 2);
			execvp(argv[0], argv);
			_exit(127);
		}
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
			return -1;
		{
			double s = (double)(bench_mono_ns() - t0) / 1e9;

			if (best < 0 || s < best)
				best = s;
		}
	}
	return best;
}

int bench_bypass(const struct bench_opts *o, cJSON *out)
{
	long reads = o->samples > 0 ? o->samples : o->quick ? 200 : 2000;
	int batch = o->batch > 0 ? o->batch : 200;
	long sleeps = o->quick ? 300 : 3000;
	char name[64], path[4096], rpath[4096], args[64], count[32];
	const char *shim, *run;
	shmclock_writer_t *w;
	shmclock_t *clk;
	double bare[N_ROWS], on[N_ROWS], off[N_ROWS], sup[N_ROWS];
	double dd_bare, dd_sup;
	cJSON *rows = cJSON_AddArrayToObject(out, "results");
	int rc = 0;

	shim = bench_find("SHMCLOCK_PRELOAD", "readers", "libshmclock-preload.so",
			  SHMCLOCK_PRELOAD_INSTALLED, path, sizeof(path));
	if (access(shim, R_OK)) {
		fprintf(stderr, "shmclock-bench: bypass: no preload shim at %s\n", shim);
		return 1;
	}
	run = bench_find("SHMCLOCK_RUN", "readers", "shmclock-run", "shmclock-run", rpath,
			 sizeof(rpath));
	if (bench_clock_open(name, sizeof(name), &w, &clk))
		return 1;
	snprintf(args, sizeof(args), "%ld,%d,%ld", reads, batch, sleeps);
	measure_all(bare, reads, batch, sleeps);
	if (!run_child(shim, NULL, name, "1", args, on) ||
	    !run_child(shim, NULL, name, "0", args, off) ||
	    !run_child(shim, run, name, "1", args, sup)) {
		fprintf(stderr, "shmclock-bench: bypass: the child under the shim gave no figures\n");
		rc = 1;
		goto out;
	}
	printf("bypass: reads and 1 us sleeps without libc's time functions, under the shim\n"
	       "(p50, ns; ratio to the same call made bare, without the shim)\n\n");
	printf("  %-36s %10s %13s %7s %13s %7s %11s %8s\n", "call", "bare", "shim, trap", "ratio",
	       "shim, no trap", "ratio", "supervised", "ratio");
	for (int i = 0; i < N_ROWS; i++) {
		cJSON *r = cJSON_CreateObject();

		printf("  %-36s %10.1f %13.1f %6.2fx %13.1f %6.2fx", row_name[i], bare[i], on[i],
		       on[i] / bare[i], off[i], off[i] / bare[i]);
		if (sup[i] > 0)
			printf(" %11.1f %7.2fx\n", sup[i], sup[i] / bare[i]);
		else
			printf(" %11s %8s\n", "(hidden)", "-");
		cJSON_AddStringToObject(r, "name", row_name[i]);
		cJSON_AddNumberToObject(r, "bare_p50_ns", bare[i]);
		cJSON_AddNumberToObject(r, "trap_p50_ns", on[i]);
		cJSON_AddNumberToObject(r, "no_trap_p50_ns", off[i]);
		if (sup[i] > 0)
			cJSON_AddNumberToObject(r, "supervised_p50_ns", sup[i]);
		cJSON_AddItemToArray(rows, r);
	}
	printf("\n  libc clock_gettime under the shim, trap on / trap off: %.2fx\n",
	       on[R_LIBC] / off[R_LIBC]);
	cJSON_AddNumberToObject(out, "libc_read_trap_on_vs_off", on[R_LIBC] / off[R_LIBC]);
	{
		double un = time_unotif(o->quick ? 2000 : 20000);

		if (un > 0) {
			printf("  the floor of a supervised read, a getppid answered by a seccomp "
			       "listener: %.1f ns p50\n",
			       un);
			cJSON_AddNumberToObject(out, "user_notif_p50_ns", un);
		}
	}
	snprintf(count, sizeof(count), "count=%d", o->quick ? 200000 : 1000000);
	{
		char *dd[] = { "dd", "if=/dev/zero", "of=/dev/null", "bs=1", count, "status=none",
			       NULL };
		char *dds[] = { (char *)run, "-q", "-n", name, "--supervise", "--", "dd",
				"if=/dev/zero", "of=/dev/null", "bs=1", count, "status=none", NULL };

		dd_bare = time_cmd(dd);
		dd_sup = time_cmd(dds);
	}
	if (dd_bare > 0 && dd_sup > 0) {
		printf("  dd bs=1 %s (2 system calls a byte), best of 3: bare %.3f s, supervised "
		       "%.3f s: %.2fx\n",
		       count, dd_bare, dd_sup, dd_sup / dd_bare);
		cJSON_AddNumberToObject(out, "dd_bare_s", dd_bare);
		cJSON_AddNumberToObject(out, "dd_supervised_s", dd_sup);
	} else {
		printf("  dd: could not run it bare and supervised\n");
	}
out:
	bench_clock_close(name, w, clk);
	return rc;
}
