/* SPDX-License-Identifier: MIT */
/*
 * A daemon's id between hosts (hosts/id.h).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hosts/id.h"

void hosts_id(char *buf, size_t len, const char *identity)
{
	char host[256] = "host";
	struct timespec ts;
	/* 40 characters of the host name (as always unsecured), fewer by the
	 * identity's: at most 40 + "/" + 10 + "/" + 20 + "." + 9 = 82. */
	int keep = 40 - (identity && identity[0] ? (int)strlen(identity) + 1 : 0);

	gethostname(host, sizeof(host) - 1);
	clock_gettime(CLOCK_REALTIME, &ts);
	if (keep < 8)
		keep = 8;
	snprintf(buf, len < HOSTS_ID_MAX + 1 ? len : HOSTS_ID_MAX + 1, "%s%s%.*s/%d/%lld.%09ld",
		 identity && identity[0] ? identity : "", identity && identity[0] ? "@" : "", keep,
		 host, (int)getpid(), (long long)ts.tv_sec, ts.tv_nsec);
}
