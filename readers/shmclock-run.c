/* SPDX-License-Identifier: MIT */
/* shmclock-run: run a command under libshmclock-preload.so (like faketime). */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <shmclock/time.h>

#include "cli.h"
#include "clocks.h"
#include "escapes.h"
#include "paths.h"
#include "supervise.h"

#define PROG "shmclock-run"

static void usage(FILE *f)
{
	fputs("usage: shmclock-run [-n NAME] [--clocks LIST] [-w DURATION] [--fallback]\n"
	      "                    [--trap | --no-trap] [--supervise | --no-supervise] [-q]\n"
	      "                    [-v | --strict]\n"
	      "                    -- COMMAND [ARG...]\n"
	      "\n"
	      "Run COMMAND (and everything it starts) with simulated time from clock NAME:\n"
	      "its clocks follow the live clock through pause, scale, steps and jumps, and\n"
	      "its sleeps, timeouts and timers wait in simulated time.\n"
	      "\n"
	      "  -n, --name NAME      clock name (default: $SHMCLOCK_NAME, else default)\n"
	      "  -c, --clocks LIST    which clocks follow it, comma-separated: realtime,\n"
	      "                       monotonic, boottime; or all, none (default all)\n"
	      "                       realtime: the simulated world's UNIX time\n"
	      "                       (UnixTimeAtZero + simulation time); monotonic and\n"
	      "                       boottime: the simulation time\n"
	      "  -w, --wait DURATION  wait up to DURATION (real time) for the clock to exist\n"
	      "                       and start (default: do not wait)\n"
	      "      --fallback       run COMMAND with the real clocks if the clock is not\n"
	      "                       there (default: refuse, exit 1)\n"
	      "      --trap           trap the time system calls a program makes without\n"
	      "                       libc (seccomp), whatever the program; default: Go\n"
	      "                       programs only (and their children)\n"
	      "      --no-trap        never trap them (Go's waits then keep real time)\n"
	      "      --supervise      run COMMAND under ptrace, without the shim, whatever\n"
	      "                       its linking (default: only a static COMMAND is)\n"
	      "      --no-supervise   refuse a statically linked COMMAND rather than run it\n"
	      "                       under ptrace (which answers its time system calls)\n"
	      "  -q, --quiet          the shim says nothing on stderr\n"
	      "  -v, --verbose        when COMMAND exits, report the reads of real time\n"
	      "                       that escaped the clock: rdtsc and rdtscp, trapped\n"
	      "                       (and emulated) in every process of the tree, counted\n"
	      "                       by place (file+offset); implies --trap. x86-64 only\n"
	      "      --strict         -v, and an escape is an error: exit status 3 if\n"
	      "                       COMMAND would have exited 0\n"
	      "  -h, --help           this help\n"
	      "\n"
	      "Exit status: COMMAND's; 1 clock error, 2 bad arguments, 3 --strict and\n"
	      "COMMAND read real time (it exited 0), 126/127 COMMAND could not be run\n"
	      "(126 also when a statically linked COMMAND cannot be supervised: ptrace\n"
	      "denied). Under the trap or the supervisor,\n"
	      "set-user-ID programs run with the caller's rights (no_new_privs).\n",
	      f);
}

/* $SHMCLOCK_PRELOAD, else next to this program (a build tree), else the
 * installed library. */
static const char *find_shim(char *buf, size_t len)
{
	const char *env = getenv("SHMCLOCK_PRELOAD"), *beside;

	if (env && *env)
		return env;
	beside = paths_beside_self("libshmclock-preload.so", buf, len);
	return beside ? beside : SHMCLOCK_PRELOAD_INSTALLED;
}

/* @path (found in $PATH as execvp does, into @buf) is an ELF executable
 * without an interpreter. Anything else (a script, not found, unreadable)
 * is left to execvp to run or to refuse. */
static bool is_static(const char *cmd, char *buf, size_t len)
{
	const char *path = getenv("PATH");
	bool found = false;
	int fd = -1;

	if (strchr(cmd, '/')) {
		snprintf(buf, len, "%s", cmd);
		found = access(buf, X_OK) == 0;
	} else {
		for (const char *p = path ? path : "/usr/local/bin:/usr/bin:/bin"; !found && *p;) {
			size_t n = strcspn(p, ":");

			snprintf(buf, len, "%.*s%s%s", (int)n, p, n ? "/" : "", cmd);
			found = access(buf, X_OK) == 0;
			p += n + (p[n] == ':');
		}
	}
	if (!found || (fd = open(buf, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	found = supervise_elf_static(fd);
	close(fd);
	return found;
}

/* ------------------------------------------------------------ escapes */

/* The escape report (escapes.h) of -v and --strict. */
static struct esc_page *report;
static char report_path[PATH_MAX];
static bool strict, verbose;

static void report_unlink(void)
{
	if (report_path[0])
		unlink(report_path);
}

/* The report's page: a file of the caller's only (0600), named in the
 * environment of the whole tree, removed when the report is made. */
static bool report_create(void)
{
	const char *dir = getenv("TMPDIR");
	void *p;
	int fd;

	snprintf(report_path, sizeof(report_path), "%s/shmclock-run.XXXXXX",
		 dir && *dir ? dir : "/tmp");
	fd = mkostemp(report_path, O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, PROG ": %s: %s\n", report_path, strerror(errno));
		return false;
	}
	if (ftruncate(fd, 4096) ||
	    (p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
		fprintf(stderr, PROG ": %s: %s\n", report_path, strerror(errno));
		close(fd);
		unlink(report_path);
		return false;
	}
	close(fd);
	atexit(report_unlink); /* shmclock-run returning early (not the children's _exit) */
	report = p;
	report->magic = ESC_MAGIC;
	report->size = sizeof(*report);
	if (setenv(ESC_ENV, report_path, 1)) {
		fprintf(stderr, PROG ": setenv: %s\n", strerror(errno));
		unlink(report_path);
		return false;
	}
	return true;
}

/* Says what escaped (with -v, also that nothing did); the exit code:
 * @code, or 3 under --strict when COMMAND read real time and exited 0. */
static int report_done(int code)
{
	uint64_t total = atomic_load_explicit(&report->total, memory_order_relaxed);
	uint64_t unplaced = atomic_load_explicit(&report->unplaced, memory_order_relaxed);

	unlink(report_path);
	if (!total) {
		if (verbose)
			fprintf(stderr, PROG ": escapes: none (no rdtsc or rdtscp read real time)\n");
		return code;
	}
	fprintf(stderr, PROG ": escapes: %llu read%s of real time not redirected to the clock%s\n",
		(unsigned long long)total, total == 1 ? "" : "s",
		strict ? (code == 0 ? " (--strict: exit status 3)" : " (--strict)") : "");
	for (int i = 0; i < ESC_SITES; i++) {
		const struct esc_site *st = &report->site[i];

		if (atomic_load_explicit(&st->state, memory_order_acquire) != 2)
			continue;
		fprintf(stderr, PROG ":   %llu %s at %.*s+%#llx\n",
			(unsigned long long)atomic_load_explicit(&st->count, memory_order_relaxed),
			esc_kind_name(st->kind), ESC_OBJ, st->obj, (unsigned long long)st->off);
	}
	if (unplaced)
		fprintf(stderr, PROG ":   %llu more, at places not recorded (too many)\n",
			(unsigned long long)unplaced);
	return strict && code == 0 ? 3 : code;
}

static volatile pid_t report_child;

static void pass_on(int sig)
{
	int e = errno;

	if (report_child > 0)
		kill(report_child, sig);
	errno = e;
}

/* Exits as @st says COMMAND did: its code, or its signal (without a core
 * of our own), as a shell expects of the command. */
static int end_as(int st, int code)
{
	if (WIFSIGNALED(st) && code == 128 + WTERMSIG(st)) {
		struct rlimit no = { 0, 0 };

		setrlimit(RLIMIT_CORE, &no);
		signal(WTERMSIG(st), SIG_DFL);
		kill(getpid(), WTERMSIG(st));
	}
	return code;
}

/* Under the report, COMMAND (with the shim) runs in a child: shmclock-run
 * stays to make the report when it exits. SIGTERM and SIGHUP go on to it;
 * a terminal's ^C and ^\ reach it anyway (the same process group). */
static int run_reported(char **argv)
{
	struct sigaction fwd = { .sa_handler = pass_on, .sa_flags = SA_RESTART };
	pid_t c;
	int st, e;

	sigaction(SIGTERM, &fwd, NULL);
	sigaction(SIGHUP, &fwd, NULL);
	signal(SIGINT, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);
	c = fork();
	if (c < 0) {
		fprintf(stderr, PROG ": fork: %s\n", strerror(errno));
		return 1;
	}
	if (c == 0) {
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		signal(SIGQUIT, SIG_DFL);
		execvp(argv[0], argv);
		e = errno;
		fprintf(stderr, PROG ": %s: %s\n", argv[0], strerror(e));
		_exit(e == ENOENT ? 127 : 126);
	}
	report_child = c;
	while (waitpid(c, &st, 0) < 0)
		if (errno != EINTR)
			return 1;
	return end_as(st, report_done(WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st)));
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_OPTION_NAME,
		{ "clocks", required_argument, NULL, 'c' },
		{ "wait", required_argument, NULL, 'w' },
		{ "fallback", no_argument, NULL, 'F' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "trap", no_argument, NULL, 'T' },
		{ "no-trap", no_argument, NULL, 'N' },
		{ "no-supervise", no_argument, NULL, 'S' },
		{ "supervise", no_argument, NULL, 'U' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "strict", no_argument, NULL, 'X' },
		CLI_OPTION_HELP,
		{ 0 }
	};
	const char *name = NULL, *clocks = "all", *shim, *old, *bad = NULL;
	unsigned mask;
	size_t badlen = 0;
	shmclock_duration_t wait = { 0 };
	bool fallback = false, quiet = false;
	const char *trap = NULL;
	bool supervised, nosuper = false, force_super = false;
	char shimbuf[PATH_MAX], *preload;
	shmclock_t *clk = NULL;
	int c, r;

	/* '+': stop at the first non-option, which is COMMAND. */
	while ((c = getopt_long(argc, argv, "+n:c:w:qvh", opts, NULL)) != -1) {
		switch (c) {
		case 'n':
			name = optarg;
			break;
		case 'c':
			clocks = optarg;
			if (shmclock_parse_clocks(clocks, &mask, &bad, &badlen)) {
				fprintf(stderr, PROG ": --clocks '%s': use realtime, monotonic, "
						"boottime (comma-separated), all or none\n",
					clocks);
				return 2;
			}
			break;
		case 'w':
			if (!cli_duration(PROG, "--wait", optarg, &wait.ns))
				return 2;
			break;
		case 'F':
			fallback = true;
			break;
		case 'q':
			quiet = true;
			break;
		case 'T':
			trap = "1";
			break;
		case 'N':
			trap = "0";
			break;
		case 'S':
			nosuper = true;
			break;
		case 'U':
			force_super = true;
			break;
		case 'v':
			verbose = true;
			break;
		case 'X':
			strict = true;
			break;
		case 'h':
		default:
			return cli_help(usage, c);
		}
	}
	if (optind >= argc) {
		fprintf(stderr, PROG ": no COMMAND given (try --help)\n");
		return 2;
	}
	name = cli_clock_name(name);
	if (cli_check_name(PROG, name))
		return 2;
	if ((verbose || strict) && trap && !strcmp(trap, "0")) {
		/* The report needs the trap: it re-enables the counter at each
		 * exec and keeps SIGSEGV's handler. */
		fprintf(stderr, PROG ": %s needs the system-call trap: drop --no-trap\n",
			strict ? "--strict" : "-v");
		return 2;
	}
#if !defined(__x86_64__)
	if (strict) {
		fprintf(stderr, PROG ": --strict: the escape report (rdtsc) is for x86-64 only; "
				"this machine cannot check; not run\n");
		return 2;
	}
	if (verbose)
		fprintf(stderr, PROG ": -v: the escape report (rdtsc) is for x86-64 only; running "
				"without it\n");
	verbose = false;
#endif

	/* Refuse early, with the reason, rather than run on the real clocks
	 * by surprise; the shim itself would only warn. */
	r = wait.ns > 0 ? shmclock_open_wait(name, 0, wait, &clk) : shmclock_open(name, &clk);
	if (r == 0 && wait.ns > 0)
		r = shmclock_wait_started(clk, wait);
	if (r == 0) {
		shmclock_info_t i;

		r = shmclock_info(clk, &i);
		if (r == 0 && !i.initialized)
			r = -ENODATA;
		else if (r == 0 && !i.writer_alive)
			r = -ESTALE;
	}
	shmclock_close(clk);
	if (r == -EXDEV && !fallback) {
		/* Waiting would not help: run it in the writer's time
		 * namespace (issue 52). */
		fprintf(stderr, PROG ": clock '%s': %s; run in the writer's time namespace (nsenter "
				"--time, or a container without its own), or --fallback to run on the real "
				"clocks\n",
			name, shmclock_strerror(r));
		return 1;
	}
	if (r && !fallback) {
		fprintf(stderr, PROG ": clock '%s': %s (--wait to wait for it, --fallback to run "
				"on the real clocks)\n",
			name, r == -ESTALE ? "its writer is gone" : shmclock_strerror(r));
		return 1;
	}

	/* A static executable cannot load the shim: it runs supervised
	 * (supervise.c), or not at all, never on the real clocks unsaid. */
	supervised = is_static(argv[optind], shimbuf, sizeof(shimbuf));
	if (force_super && nosuper) {
		fprintf(stderr, PROG ": --supervise and --no-supervise: choose one\n");
		return 2;
	}
	/* --fallback with the clock missing: the real clocks, as asked, with
	 * nothing to supervise. */
	if (r && (verbose || strict)) {
		fprintf(stderr, PROG ": the clock is missing: COMMAND runs on the real clocks "
				"(--fallback); no escape report\n");
		verbose = strict = false;
	}
	if ((verbose || strict) && !report_create())
		return 1;
	if (report) {
		supervise_report = report;
		supervise_report_done = report_done;
		if (!trap)
			trap = "1";
	}
	if (r && (force_super || supervised)) {
		execvp(argv[optind], argv + optind);
		r = errno;
		fprintf(stderr, PROG ": %s: %s\n", argv[optind], strerror(r));
		return r == ENOENT ? 127 : 126;
	}
	if (force_super) {
		/* Everything under the supervisor, nothing preloaded. */
		if (setenv("SHMCLOCK_NAME", name, 1) || setenv("SHMCLOCK_CLOCKS", clocks, 1)) {
			fprintf(stderr, PROG ": setenv: %s\n", strerror(errno));
			return 1;
		}
		if (shmclock_parse_clocks(clocks, &mask, &bad, &badlen))
			mask = 0;
		return supervise(argv + optind, name, mask, quiet);
	}
	if (supervised && nosuper) {
		fprintf(stderr, PROG ": %s is statically linked: it cannot load the shim, and "
				"--no-supervise forbids running it under ptrace; not run\n",
			shimbuf);
		return 126;
	}
	shim = find_shim(shimbuf, sizeof(shimbuf));
	if (access(shim, R_OK)) {
		fprintf(stderr, PROG ": %s: %s (set SHMCLOCK_PRELOAD to the library)\n", shim,
			strerror(errno));
		return 1;
	}
	/* Ours first; a program's own preloads keep working after it. */
	old = getenv("LD_PRELOAD");
	if (old && *old) {
		size_t len = strlen(shim) + strlen(old) + 2;

		preload = malloc(len);
		if (!preload) {
			fprintf(stderr, PROG ": out of memory\n");
			return 1;
		}
		snprintf(preload, len, "%s:%s", shim, old);
	} else {
		preload = (char *)shim;
	}
	if (setenv("LD_PRELOAD", preload, 1) || setenv("SHMCLOCK_NAME", name, 1) ||
	    setenv("SHMCLOCK_CLOCKS", clocks, 1) || (quiet && setenv("SHMCLOCK_QUIET", "1", 1)) ||
	    (trap && setenv("SHMCLOCK_TRAP", trap, 1))) {
		fprintf(stderr, PROG ": setenv: %s\n", strerror(errno));
		return 1;
	}
	if (supervised) {
		/* Dynamic programs it starts trap their own calls (the
		 * supervisor only answers static ones). */
		if (!trap && setenv("SHMCLOCK_TRAP", "1", 1)) {
			fprintf(stderr, PROG ": setenv: %s\n", strerror(errno));
			return 1;
		}
		if (shmclock_parse_clocks(clocks, &mask, &bad, &badlen))
			mask = 0;
		return supervise(argv + optind, name, mask, quiet);
	}
	if (report)
		return run_reported(argv + optind);
	execvp(argv[optind], argv + optind);
	r = errno;
	fprintf(stderr, PROG ": %s: %s\n", argv[optind], strerror(r));
	return r == ENOENT ? 127 : 126;
}
