/* SPDX-License-Identifier: MIT */
/* `external` (AWSIM's `ss2`): time is fed from outside with `advance`,
 * `set` and `step`. Stepped: readers see each value until the next one.
 * Uninitialized (readers get -ENODATA) until the first value, unless the
 * config gives a StartTime. TimeScale does not apply. */
#include "source.h"

static int external_start(shmclock_writer_t *w, const struct shmclockd_config *c)
{
	return c->has_start ? shmclock_writer_advance(w, c->start_ns) : 0;
}

const struct source_ops source_external_ops = {
	.feed = FEED_CLIENT,
	.start = external_start,
};
