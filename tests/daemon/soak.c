/* SPDX-License-Identifier: MIT */
/*
 * soak: the clock under load and faults, for a bounded time.
 *
 * shmclockd runs at PublishHz 10000 (the simulation source, started at
 * scale 1). Reader processes read as sensor models would (bursts of reads,
 * then a 1 ms nap); control clients hammer the socket with pause, resume,
 * scale 0.5 / 1 / 2 and status; every few seconds the daemon is SIGKILLed
 * (possibly mid-commit) and started again, continuing the same clock.
 *
 * Checked in every reader, on every read:
 *   backward  a read returned less than the one before it (no jumps are
 *             requested, so time must never decrease, across restarts too)
 *   torn      a snapshot (shmclock_info: sim and mono of one read) off the
 *             clock's curve: between two snapshots simulated time must
 *             advance by 0 to 2x (the largest scale) the monotonic time
 *             that passed; a state mixed from two commits lands outside
 *   errors    any return other than 0 and -ESTALE (no writer, value given)
 * Printed as figures: reads, stale reads, calls slower than 10 ms, control
 * requests answered vs not, how long each restart took.
 *
 * usage: soak [--seconds S] [--readers N] [--clients N] [--restarts N]
 * Exit 0 when nothing was torn, backward or in error; 1 otherwise.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <shmclock/shmclock.h>

#include "control_client.h"

#define SLOW_NS 10000000 /* a "slow" reader call: 10 ms */
#define MAX_SCALE 2.0    /* the largest scale the clients set */
#define BURST 2000       /* reads between naps */

struct reader_stats {
	_Atomic uint64_t reads, stale, slow, backward, torn, errors;
	_Atomic int64_t slowest_ns;
	_Atomic int last_error;
	char first_problem[160];
};

struct client_stats {
	_Atomic uint64_t sent, ok, refused_by_daemon, unanswered;
};

struct shared {
	_Atomic int stop;
	struct reader_stats r[64];
	struct client_stats c[16];
};

static struct shared *sh;
static char name[48], rt_dir[40], sock_path[100];
static const char *daemon_path;
static pid_t daemon_pid = -1;
static pid_t kids[96];
static int nkids;

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void nap_ns(int64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000), (long)(ns % 1000000000) };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Everything we started dies with us, and nothing stays in /dev/shm or
 * the runtime directory, however the run ends. */
static void cleanup(void)
{
	for (int i = 0; i < nkids; i++)
		if (kids[i] > 0) {
			kill(kids[i], SIGKILL);
			waitpid(kids[i], NULL, 0);
		}
	nkids = 0;
	if (daemon_pid > 0) {
		kill(daemon_pid, SIGKILL);
		waitpid(daemon_pid, NULL, 0);
		daemon_pid = -1;
	}
	if (name[0])
		shmclock_unlink(name);
	if (sock_path[0])
		unlink(sock_path);
	if (rt_dir[0])
		rmdir(rt_dir);
}

static void on_signal(int sig)
{
	cleanup();
	signal(sig, SIG_DFL);
	raise(sig);
}

static pid_t spawn_child(void)
{
	pid_t p = fork();

	if (p == 0)
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* if the soak itself is killed */
	return p;
}

/* Starts shmclockd and waits for READY=1 (5 s). */
static pid_t start_daemon(void)
{
	char fdarg[32];
	int p[2];
	pid_t pid;

	if (pipe(p) < 0)
		return -1;
	snprintf(fdarg, sizeof(fdarg), "--notify-fd=%d", p[1]);
	pid = spawn_child();
	if (pid == 0) {
		close(p[0]);
		execl(daemon_path, daemon_path, "-n", name, "--hz", "10000", fdarg,
		      "--log-level=error", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	if (pid > 0) {
		struct pollfd pf = { .fd = p[0], .events = POLLIN };
		char buf[16] = { 0 };

		if (poll(&pf, 1, 5000) != 1 || read(p[0], buf, sizeof(buf) - 1) <= 0 ||
		    strncmp(buf, "READY=1", 7)) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			pid = -1;
		}
	}
	close(p[0]);
	return pid;
}

static void problem(struct reader_stats *st, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void problem(struct reader_stats *st, const char *fmt, ...)
{
	va_list ap;

	if (st->first_problem[0])
		return;
	va_start(ap, fmt);
	vsnprintf(st->first_problem, sizeof(st->first_problem), fmt, ap);
	va_end(ap);
}

static void reader(struct reader_stats *st)
{
	shmclock_t *clk = NULL;
	int64_t last = INT64_MIN;
	shmclock_info_t prev = { 0 };
	bool have_prev = false;

	while (shmclock_open(name, &clk) < 0)
		nap_ns(1000000);
	while (!atomic_load_explicit(&sh->stop, memory_order_relaxed)) {
		for (int i = 0; i < BURST; i++) {
			int64_t t0 = mono_ns(), t = 0, dt;
			int r = shmclock_now(clk, &t);

			dt = mono_ns() - t0;
			atomic_fetch_add_explicit(&st->reads, 1, memory_order_relaxed);
			if (dt > SLOW_NS)
				atomic_fetch_add_explicit(&st->slow, 1, memory_order_relaxed);
			if (dt > atomic_load_explicit(&st->slowest_ns, memory_order_relaxed))
				atomic_store_explicit(&st->slowest_ns, dt, memory_order_relaxed);
			if (r == -ESTALE) {
				atomic_fetch_add_explicit(&st->stale, 1, memory_order_relaxed);
			} else if (r != 0) {
				atomic_fetch_add_explicit(&st->errors, 1, memory_order_relaxed);
				problem(st, "shmclock_now: %s", shmclock_strerror(r));
				continue;
			}
			if (t < last) {
				atomic_fetch_add_explicit(&st->backward, 1, memory_order_relaxed);
				problem(st, "backward: %lld after %lld", (long long)t, (long long)last);
			}
			last = t;
		}
		/* A snapshot: on the curve between the last one and now? */
		{
			shmclock_info_t in;
			int r = shmclock_info(clk, &in);

			if (r != 0 || !in.initialized) {
				atomic_fetch_add_explicit(&st->errors, 1, memory_order_relaxed);
				problem(st, "shmclock_info: %s", shmclock_strerror(r));
			} else {
				if (have_prev) {
					int64_t ds = in.sim_ns - prev.sim_ns, dm = in.mono_ns - prev.mono_ns;

					/* 4 ns: the fixed-point evaluation rounds each end. */
					if (ds < -4 || (double)ds > MAX_SCALE * (double)dm + 4) {
						atomic_fetch_add_explicit(&st->torn, 1, memory_order_relaxed);
						problem(st, "off the curve: sim +%lld ns over mono +%lld ns",
							(long long)ds, (long long)dm);
					}
				}
				if (in.sim_ns < last) {
					atomic_fetch_add_explicit(&st->backward, 1, memory_order_relaxed);
					problem(st, "backward: snapshot %lld after %lld", (long long)in.sim_ns,
						(long long)last);
				}
				last = in.sim_ns;
				prev = in;
				have_prev = true;
			}
		}
		nap_ns(1000000);
	}
	shmclock_close(clk);
}

/* One request on a fresh connection: 1 answered ok, 0 answered with an
 * error, -1 not answered (no daemon, or it died mid-request). */
static int request(const char *req)
{
	char buf[8192];

	if (control_client_request(sock_path, req, buf, sizeof(buf), 2000) < 0)
		return -1;
	return strstr(buf, "\"ok\":true") ? 1 : 0;
}

static void client(struct client_stats *st, unsigned seed)
{
	static const char *const reqs[] = {
		"{\"cmd\":\"pause\"}\n",           "{\"cmd\":\"resume\"}\n",
		"{\"cmd\":\"scale\",\"value\":0.5}\n", "{\"cmd\":\"scale\",\"value\":1}\n",
		"{\"cmd\":\"scale\",\"value\":2}\n",   "{\"cmd\":\"status\"}\n",
	};

	while (!atomic_load_explicit(&sh->stop, memory_order_relaxed)) {
		int r = request(reqs[rand_r(&seed) % (sizeof(reqs) / sizeof(reqs[0]))]);

		atomic_fetch_add_explicit(&st->sent, 1, memory_order_relaxed);
		if (r > 0)
			atomic_fetch_add_explicit(&st->ok, 1, memory_order_relaxed);
		else if (r == 0)
			atomic_fetch_add_explicit(&st->refused_by_daemon, 1, memory_order_relaxed);
		else
			atomic_fetch_add_explicit(&st->unanswered, 1, memory_order_relaxed);
		nap_ns(rand_r(&seed) % 500000);
	}
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static void usage(FILE *f)
{
	fputs("usage: soak [--seconds S] [--readers N] [--clients N] [--restarts N]\n"
	      "Runs shmclockd ($SHMCLOCKD) at 10 kHz under reader and control load, SIGKILLs\n"
	      "and restarts it N times, and checks that no read is torn or goes backwards.\n"
	      "Defaults: 20 s, 6 readers, 2 clients, 5 restarts.\n",
	      f);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "seconds", required_argument, NULL, 's' }, { "readers", required_argument, NULL, 'r' },
		{ "clients", required_argument, NULL, 'c' }, { "restarts", required_argument, NULL, 'k' },
		{ "help", no_argument, NULL, 'h' },          { 0 },
	};
	double secs = 20;
	int nreaders = 6, nclients = 2, nrestarts = 5, c, failed = 0;
	int64_t restart_ns[64], t_end;
	int restarts = 0;

	while ((c = getopt_long(argc, argv, "s:r:c:k:h", opts, NULL)) != -1) {
		char *end = NULL;
		double v = c == 'h' ? 0 : strtod(optarg, &end);

		if (c == 'h') {
			usage(stdout);
			return 0;
		}
		if (c == '?' || !end || *end || !(v >= 0)) {
			fprintf(stderr, "soak: bad option value%s%s\n", optarg ? ": " : "",
				optarg ? optarg : "");
			usage(stderr);
			return 2;
		}
		if (c == 's')
			secs = v;
		else if (c == 'r')
			nreaders = (int)v;
		else if (c == 'c')
			nclients = (int)v;
		else if (c == 'k')
			nrestarts = (int)v;
	}
	if (secs < 1 || nreaders < 1 || nreaders > 64 || nclients > 16 || nrestarts > 64) {
		fprintf(stderr, "soak: --seconds >= 1, --readers 1..64, --clients 0..16, --restarts 0..64\n");
		return 2;
	}
	daemon_path = getenv("SHMCLOCKD");
	if (!daemon_path) {
		fprintf(stderr, "soak: set SHMCLOCKD to the shmclockd to test (meson test does)\n");
		return 2;
	}
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;

	/* Unique per run: parallel runs do not collide. */
	snprintf(name, sizeof(name), "soak-%d-%lld", (int)getpid(), (long long)(mono_ns() % 1000000));
	snprintf(rt_dir, sizeof(rt_dir), "/tmp/shmclock-soak-%d", (int)getpid());
	snprintf(sock_path, sizeof(sock_path), "%s/%s.sock", rt_dir, name);
	if (mkdir(rt_dir, 0700) < 0) {
		fprintf(stderr, "soak: %s: %s\n", rt_dir, strerror(errno));
		return 1;
	}
	setenv("SHMCLOCK_RUNTIME_DIR", rt_dir, 1);
	atexit(cleanup);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);

	daemon_pid = start_daemon();
	if (daemon_pid < 0) {
		fprintf(stderr, "soak: %s did not start\n", daemon_path);
		return 1;
	}
	for (int i = 0; i < nreaders; i++) {
		pid_t p = spawn_child();

		if (p == 0) {
			reader(&sh->r[i]);
			_exit(0);
		}
		kids[nkids++] = p;
	}
	for (int i = 0; i < nclients; i++) {
		pid_t p = spawn_child();

		if (p == 0) {
			client(&sh->c[i], (unsigned)(getpid() * 7919 + i));
			_exit(0);
		}
		kids[nkids++] = p;
	}

	/* The faults: SIGKILL at evenly spread moments, start again at once. */
	t_end = mono_ns() + (int64_t)(secs * 1e9);
	for (int k = 1; k <= nrestarts; k++) {
		int64_t at = t_end - (int64_t)(secs * 1e9) + (int64_t)(secs * 1e9) * k / (nrestarts + 1);
		int64_t t0;

		if (at > mono_ns())
			nap_ns(at - mono_ns());
		kill(daemon_pid, SIGKILL);
		waitpid(daemon_pid, NULL, 0);
		t0 = mono_ns();
		daemon_pid = start_daemon();
		if (daemon_pid < 0) {
			fprintf(stderr, "soak: shmclockd did not come back after SIGKILL %d\n", k);
			failed = 1;
			break;
		}
		restart_ns[restarts++] = mono_ns() - t0;
	}
	if (mono_ns() < t_end)
		nap_ns(t_end - mono_ns());
	atomic_store_explicit(&sh->stop, 1, memory_order_relaxed);
	for (int i = 0; i < nkids; i++) {
		int st;

		waitpid(kids[i], &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "soak: child %d ended badly (status 0x%x)\n", (int)kids[i], st);
			failed = 1;
		}
		kids[i] = 0;
	}
	nkids = 0;

	{
		uint64_t reads = 0, stale = 0, slow = 0, backward = 0, torn = 0, errors = 0;
		uint64_t sent = 0, ok = 0, refused = 0, unanswered = 0;
		int64_t slowest = 0;

		for (int i = 0; i < nreaders; i++) {
			struct reader_stats *s = &sh->r[i];

			reads += s->reads;
			stale += s->stale;
			slow += s->slow;
			backward += s->backward;
			torn += s->torn;
			errors += s->errors;
			if (s->slowest_ns > slowest)
				slowest = s->slowest_ns;
			if (s->first_problem[0])
				fprintf(stderr, "soak: reader %d: %s\n", i, s->first_problem);
		}
		for (int i = 0; i < nclients; i++) {
			sent += sh->c[i].sent;
			ok += sh->c[i].ok;
			refused += sh->c[i].refused_by_daemon;
			unanswered += sh->c[i].unanswered;
		}
		qsort(restart_ns, (size_t)restarts, sizeof(int64_t), cmp_i64);
		printf("soak: %.0f s, shmclockd at 10 kHz, %d reader processes, %d control clients, "
		       "%d SIGKILL restarts\n", secs, nreaders, nclients, restarts);
		printf("  reads              %llu (%llu while no daemon was alive: -ESTALE, value given)\n",
		       (unsigned long long)reads, (unsigned long long)stale);
		printf("  torn reads         %llu (snapshots off the clock's curve)\n",
		       (unsigned long long)torn);
		printf("  backward steps     %llu\n", (unsigned long long)backward);
		printf("  read errors        %llu\n", (unsigned long long)errors);
		printf("  calls > 10 ms      %llu (slowest %.3f ms)\n", (unsigned long long)slow,
		       (double)slowest / 1e6);
		printf("  control requests   %llu sent: %llu answered ok, %llu answered with an error, "
		       "%llu not answered (daemon down)\n", (unsigned long long)sent,
		       (unsigned long long)ok, (unsigned long long)refused,
		       (unsigned long long)unanswered);
		if (restarts)
			printf("  restart to ready   p50 %.1f ms, max %.1f ms\n",
			       (double)restart_ns[restarts / 2] / 1e6,
			       (double)restart_ns[restarts - 1] / 1e6);
		if (torn || backward || errors || !reads)
			failed = 1;
		if (nclients && !ok) {
			fprintf(stderr, "soak: no control request was answered\n");
			failed = 1;
		}
	}
	printf("soak: %s\n", failed ? "FAILED" : "ok");
	return failed;
}
