/* SPDX-License-Identifier: MIT */
/*
 * Prints the project's tables for the tests that compare their consumers
 * with them (tests/doc/sources.py), one row a line, tab-separated:
 *   source VALUE NAME ALIAS|- FLAGS   FLAGS: s stepped, c continuous,
 *                                     o changes its own scale, - none
 */
#include <stdio.h>

#include <shmclock/shmclock.h>

int main(void)
{
#define PRINT_SOURCE(value, id, name, alias, flags, help)                                  \
	printf("source\t%d\t%s\t%s\t%s%s%s%s\n", value, #name, alias ? alias : "-",        \
	       (flags) & SHMCLOCK_SOURCE_F_STEPPED ? "s" : "",                              \
	       (flags) & SHMCLOCK_SOURCE_F_CONTINUOUS ? "c" : "",                           \
	       (flags) & SHMCLOCK_SOURCE_F_OWN_SCALE ? "o" : "", (flags) ? "" : "-");
	SHMCLOCK_SOURCE_MAP(PRINT_SOURCE)
#undef PRINT_SOURCE
	return 0;
}
