/* SPDX-License-Identifier: MIT */
/*
 * Compiled by tests/meson.build's "kinds" test: as is it must compile;
 * with -DMIX=N each line below must be refused by the compiler, because
 * steady, system and simulation times and durations are distinct types.
 */
#include <shmclock/time.h>

int kinds_check(shmclock_t *clk);

int kinds_check(shmclock_t *clk)
{
	shmclock_sim_time_t sim = shmclock_sim_time(1);
	shmclock_steady_time_t steady = shmclock_steady_now();
	shmclock_sys_time_t sys = shmclock_sys_now();
	shmclock_duration_t d = shmclock_msec(1);
	int r = 0;

	(void)clk;
#if MIX == 1
	r += shmclock_sim_cmp(sim, steady);       /* sim vs steady */
#elif MIX == 2
	d = shmclock_steady_diff(steady, sys);    /* steady - sys */
#elif MIX == 3
	sim = shmclock_sim_add(sim, steady);      /* a time is not a duration */
#elif MIX == 4
	r += shmclock_sleep_until(clk, steady, 0); /* sleep until a steady time */
#elif MIX == 5
	sim = steady;                             /* assignment across kinds */
#endif
	r += shmclock_sim_cmp(sim, shmclock_sim_add(sim, d));
	r += shmclock_steady_cmp(steady, shmclock_steady_add(steady, d));
	r += shmclock_sys_cmp(sys, sys);
	return r;
}
