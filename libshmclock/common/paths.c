/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE /* readlink */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include "paths.h"

void paths_runtime_dir(char *out, size_t len)
{
	const char *d = getenv("SHMCLOCK_RUNTIME_DIR");

	if (d && *d) {
		snprintf(out, len, "%s", d);
		return;
	}
	d = getenv("XDG_RUNTIME_DIR");
	if (d && *d)
		snprintf(out, len, "%s/shmclock", d);
	else if (geteuid() == 0)
		snprintf(out, len, "/run/shmclock");
	else
		snprintf(out, len, "/tmp/shmclock-%u", (unsigned)geteuid());
}

int paths_default_socket(const char *name, char *out, size_t len)
{
	char dir[256];
	int n;

	paths_runtime_dir(dir, sizeof(dir));
	n = snprintf(out, len, "%s/%s.sock", dir, name);
	if (n < 0 || (size_t)n >= len || (size_t)n >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return -ENAMETOOLONG;
	return 0;
}

const char *paths_beside_self(const char *rel, char *buf, size_t len)
{
	char self[PATH_MAX], *slash;
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n <= 0)
		return NULL;
	self[n] = 0;
	slash = strrchr(self, '/');
	if (!slash)
		return NULL;
	*slash = 0;
	if ((size_t)snprintf(buf, len, "%s/%s", self, rel) >= len || access(buf, R_OK) != 0)
		return NULL;
	return buf;
}
