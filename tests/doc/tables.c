/* SPDX-License-Identifier: MIT */
/*
 * Prints the project's tables for the tests that compare their consumers
 * with them, one row a line, tab-separated:
 *   source VALUE NAME ALIAS|- FLAGS   SHMCLOCK_SOURCE_MAP (tests/doc/sources.py);
 *                                     FLAGS: s stepped, c continuous, o changes
 *                                     its own scale, - none
 *   limit NAME VALUE                  a named limit as the code spells it
 *                                     (tests/doc/limits.py)
 */
#include <stdio.h>

#include <shmclock/lockstep.h>
#include <shmclock/shmclock.h>

#include "config.h"  /* CONFIG_SCALE_MIN, CONFIG_SCALE_MAX, DIST_ON_SLOW_MAX */
#include "ros2.h"    /* DIST_LEASE_NS, ROS2_IDENTITY_MAX */
#include "control.h" /* CONTROL_LINE_MAX, CONTROL_CLIENTS_MAX */

int main(void)
{
#define PRINT_SOURCE(value, id, name, alias, flags, help)                                  \
	printf("source\t%d\t%s\t%s\t%s%s%s%s\n", value, #name, alias ? alias : "-",        \
	       (flags) & SHMCLOCK_SOURCE_F_STEPPED ? "s" : "",                              \
	       (flags) & SHMCLOCK_SOURCE_F_CONTINUOUS ? "c" : "",                           \
	       (flags) & SHMCLOCK_SOURCE_F_OWN_SCALE ? "o" : "", (flags) ? "" : "-");
	SHMCLOCK_SOURCE_MAP(PRINT_SOURCE)
#undef PRINT_SOURCE
	printf("limit\tscale_min\t%s\n", SHMCLOCK__XSTR(CONFIG_SCALE_MIN));
	printf("limit\tscale_max\t%s\n", SHMCLOCK__XSTR(CONFIG_SCALE_MAX));
	printf("limit\tname_max\t%d\n", SHMCLOCK_NAME_MAX);
	printf("limit\tlockstep_slots\t%d\n", SHMCLOCK_LOCKSTEP_SLOTS);
	printf("limit\tlockstep_who_max\t%d\n", SHMCLOCK_LOCKSTEP_WHO_MAX);
	printf("limit\tcontrol_line_max\t%d\n", CONTROL_LINE_MAX);
	printf("limit\tcontrol_clients_max\t%d\n", CONTROL_CLIENTS_MAX);
	printf("limit\ton_slow_max\t%d\n", DIST_ON_SLOW_MAX);
	printf("limit\thost_lease_s\t%g\n", (double)DIST_LEASE_NS / 1e9);
	printf("limit\tidentity_max\t%d\n", ROS2_IDENTITY_MAX);
	return 0;
}
