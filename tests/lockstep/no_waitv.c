/* SPDX-License-Identifier: MIT */
/*
 * no-waitv PROGRAM [ARGS]: runs PROGRAM with futex_waitv denied (ENOSYS),
 * as on a kernel before 5.16: the lockstep suites' second run takes the
 * fallback path of shmclock_lockstep_host_wait(). Exit 77 (skipped) with
 * the reason when the filter cannot be set.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "no_waitv.h"

int main(int argc, char **argv)
{
	const char *why;

	if (argc < 2) {
		fprintf(stderr, "usage: no-waitv PROGRAM [ARGS]\n");
		return 2;
	}
	why = deny_futex_waitv();
	if (why) {
		printf("1..0 # SKIP %s\n", why);
		fprintf(stderr, "no-waitv: skipped: %s\n", why);
		return 77;
	}
	execvp(argv[1], argv + 1);
	fprintf(stderr, "no-waitv: cannot run %s: %s\n", argv[1], strerror(errno));
	return 127;
}
