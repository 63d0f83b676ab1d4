/* SPDX-License-Identifier: MIT */
/* `system`: starts at the current UNIX time and runs with CLOCK_MONOTONIC
 * times TimeScale. Its simulation time is UNIX time, so simulation zero is
 * the UNIX epoch (UnixTimeAtZero = 0 unless the config says otherwise). */
#include <time.h>

#include "source.h"

static int system_start(shmclock_writer_t *w, const struct shmclockd_config *c)
{
	struct timespec ts;
	int64_t zero = 0;
	int r;

	if (!c->has_unix_zero && (r = shmclock_writer_set_unix_at_zero(w, &zero)))
		return r;
	clock_gettime(CLOCK_REALTIME, &ts);
	return shmclock_writer_set_time(w, (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec);
}

const struct source_ops source_system_ops = {
	.scalable = true,
	.start = system_start,
};
