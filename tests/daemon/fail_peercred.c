/* SPDX-License-Identifier: MIT */
/*
 * LD_PRELOAD for tests: getsockopt(SO_PEERCRED) fails with ENOPROTOOPT and
 * writes nothing, as it may on a socket the kernel has no credentials for.
 * Everything else goes to libc.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	static int (*real)(int, int, int, void *, socklen_t *);

	if (level == SOL_SOCKET && name == SO_PEERCRED) {
		errno = ENOPROTOOPT;
		return -1;
	}
	if (!real) {
		void *f = dlsym(RTLD_NEXT, "getsockopt");

		memcpy(&real, &f, sizeof(real));
	}
	return real(fd, level, name, val, len);
}
