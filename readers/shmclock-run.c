/* SPDX-License-Identifier: MIT */
/* shmclock-run: run a command under libshmclock-preload.so (like faketime). */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <shmclock/time.h>

#include "cli.h"
#include "clocks.h"
#include "paths.h"
#include "supervise.h"

#define PROG "shmclock-run"

static void usage(FILE *f)
{
	fputs("usage: shmclock-run [-n NAME] [--clocks LIST] [-w DURATION] [--fallback]\n"
	      "                    [--trap | --no-trap] [--supervise | --no-supervise] [-q]\n"
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
	      "  -h, --help           this help\n"
	      "\n"
	      "Exit status: COMMAND's; 1 clock error, 2 bad arguments, 126/127 COMMAND\n"
	      "could not be run (126 also when a statically linked COMMAND cannot be\n"
	      "supervised: ptrace denied). Under the trap or the supervisor,\n"
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
	while ((c = getopt_long(argc, argv, "+n:c:w:qh", opts, NULL)) != -1) {
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
	execvp(argv[optind], argv + optind);
	r = errno;
	fprintf(stderr, PROG ": %s: %s\n", argv[optind], strerror(r));
	return r == ENOENT ? 127 : 126;
}
