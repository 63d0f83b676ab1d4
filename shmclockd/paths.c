/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
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
