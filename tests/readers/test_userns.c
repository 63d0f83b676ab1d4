/* SPDX-License-Identifier: MIT */
/*
 * Readers in user namespaces (issue 56), as containers make them: a child
 * becomes host uid 100000 and enters a user namespace of its own whose
 * maps this test (root) writes, as a container runtime does.
 *
 * - "0 100000 1" (Podman rootless's root alone): the host root's clock
 *   shows as the overflow uid; refused with -EREMOTE, opened with
 *   SHMCLOCK_TRUST=outside (nobody inside can own a file by that uid);
 * - "0 100000 65536" (the usual map, the overflow uid mapped): refused
 *   even with SHMCLOCK_TRUST=outside (the container's own "nobody" looks
 *   the same);
 * - a clock the container's root makes, read by the container's user 1000:
 *   refused (-EPERM: uid 0 in a user namespace is not root), also with
 *   SHMCLOCK_TRUST=outside; believed with SHMCLOCK_TRUST=0 (named);
 * - a reader running as uid 65534 in the namespace (--user nobody): the
 *   host's clock, shown as the overflow uid, is not its own.
 *
 * TAP. Needs root (to write another user's maps): exit 77 otherwise.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <shmclock/shmclock.h>
#include <shmclock/writer.h>

#define HOST_BASE 100000

static int failed, n;

static void check(int ok, const char *what, int got)
{
	printf("%s %d - %s (%d: %s)\n", ok ? "ok" : "not ok", ++n, what, got,
	       got ? shmclock_strerror(got) : "opened");
	fflush(stdout);
	failed |= !ok;
}

static int write_file(pid_t pid, const char *what, const char *text)
{
	char path[64];
	int fd, ok;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, what);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
	close(fd);
	return ok ? 0 : -EIO;
}

/* The reader's result, in a user namespace with @map (uids and gids
 * alike), as inside uid @as, with SHMCLOCK_TRUST @trust (NULL: unset);
 * @make: first, as the namespace's root, make clock @make (a forgery).
 * What shmclock_open of @name returned, or 1000 + a setup step failed. */
static int in_userns(const char *map, uid_t as, const char *trust, const char *name,
		     const char *make)
{
	int go[2], ready[2], status;
	char c = 0;
	pid_t pid;

	if (pipe2(go, O_CLOEXEC) || pipe2(ready, O_CLOEXEC))
		return 1001;
	pid = fork();
	if (pid < 0)
		return 1002;
	if (pid == 0) {
		shmclock_t *clk;
		int r;

		if (setgroups(0, NULL) || setgid(HOST_BASE) || setuid(HOST_BASE) ||
		    unshare(CLONE_NEWUSER))
			_exit(110);
		if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1 || c != 1)
			_exit(111);
		if (make) {
			shmclock_writer_t *w;

			if (shmclock_writer_open(make, &w) || shmclock_writer_set_time(w, 7))
				_exit(112);
			/* Left for the reader: the writer lives on in this
			 * process until it exits. */
		}
		if (setgid(as) || setuid(as))
			_exit(113);
		if (trust)
			setenv("SHMCLOCK_TRUST", trust, 1);
		else
			unsetenv("SHMCLOCK_TRUST");
		r = shmclock_open(name, &clk);
		if (!r)
			shmclock_close(clk);
		_exit(-r);
	}
	close(ready[1]);
	close(go[0]);
	if (read(ready[0], &c, 1) != 1) {
		waitpid(pid, &status, 0);
		return 1000 + (WIFEXITED(status) ? WEXITSTATUS(status) : 99);
	}
	c = write_file(pid, "uid_map", map) || write_file(pid, "gid_map", map) ? 0 : 1;
	if (write(go[1], &c, 1) != 1)
		c = 0;
	close(go[1]);
	close(ready[0]);
	waitpid(pid, &status, 0);
	if (!c)
		return 1003;
	if (!WIFEXITED(status))
		return 1099;
	return WEXITSTATUS(status) >= 110 ? 1000 + WEXITSTATUS(status) : -WEXITSTATUS(status);
}

int main(void)
{
	char host[48], forged[64];
	shmclock_writer_t *w;
	int r;

	if (geteuid()) {
		printf("1..0 # SKIP needs root: the test writes the user namespaces' maps\n");
		return 77;
	}
	snprintf(host, sizeof(host), "userns-%d-%ld", (int)getpid(), (long)time(NULL) % 100000);
	snprintf(forged, sizeof(forged), "%s-forged", host);
	r = shmclock_writer_open(host, &w);
	if (!r)
		r = shmclock_writer_set_time(w, 42000000000);
	if (r) {
		printf("Bail out! cannot serve clock %s: %s\n", host, shmclock_strerror(r));
		return 1;
	}
	r = in_userns("0 100000 1\n", 0, NULL, host, NULL);
	if (r == 1110 || r == 1003) {
		printf("1..0 # SKIP no user namespaces here (unshare or its maps failed: %d)\n", r);
		shmclock_writer_unlink(w, host);
		shmclock_writer_close(w);
		return 77;
	}
	printf("1..8\n");
	check(r == -EREMOTE, "a rootless container's root: the host root's clock is outside, refused", r);
	r = in_userns("0 100000 1\n", 0, "outside", host, NULL);
	check(r == 0, "... believed with SHMCLOCK_TRUST=outside (the overflow uid unmapped there)", r);
	r = in_userns("0 100000 65536\n", 0, "outside", host, NULL);
	check(r == -EREMOTE, "the usual map (65536 ids, the overflow uid among them): refused even "
	      "with SHMCLOCK_TRUST=outside", r);
	r = in_userns("0 100000 1\n1000 101000 1\n", 1000, NULL, forged, forged);
	check(r == -EPERM, "a clock the container's root made, read by its user 1000: uid 0 in a user "
	      "namespace is not root", r);
	r = in_userns("0 100000 1\n1000 101000 1\n", 1000, "outside", forged, forged);
	check(r == -EPERM, "... refused with SHMCLOCK_TRUST=outside too", r);
	r = in_userns("0 100000 1\n1000 101000 1\n", 1000, "0", forged, forged);
	check(r == 0, "... believed when the user names it (SHMCLOCK_TRUST=0)", r);
	r = in_userns("0 100000 1\n65534 165534 1\n", 65534, NULL, host, NULL);
	check(r == -EREMOTE, "a reader running as the namespace's own nobody (65534) is not the "
	      "owner of every file it does not map", r);
	{
		shmclock_t *clk;

		r = shmclock_open(host, &clk);
		if (!r)
			shmclock_close(clk);
		check(r == 0, "outside any user namespace, root's clock opens as always", r);
	}
	{
		char path[96];

		snprintf(path, sizeof(path), "/dev/shm/shmclock.%s", forged);
		unlink(path);
	}
	shmclock_writer_unlink(w, host);
	shmclock_writer_close(w);
	return failed;
}
