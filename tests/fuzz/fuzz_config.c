/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: a config file's text (config.c). Beyond not crashing: a
 * refused config has a one-line error naming the file; an accepted one
 * holds only values shmclockd can run with.
 */
#include <errno.h>

#include "config.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct shmclockd_config c;
	char err[CONFIG_ERR_MAX];
	int r;

	config_defaults(&c);
	err[0] = '\0';
	r = config_load_text("fuzz.json", (const char *)data, size, &c, err, sizeof(err));
	if (r == 0) {
		err[0] = '\0';
		r = config_validate(&c, err, sizeof(err));
	}
	if (r) {
		FUZZ_CHECK(r == -EINVAL, "returned %d", r);
		FUZZ_CHECK(fuzz_one_line(err), "error is not one line: \"%s\"", err);
		return 0;
	}
	FUZZ_CHECK(c.hz >= 1 && c.hz <= 10000, "accepted PublishHz %d", c.hz);
	FUZZ_CHECK(config_scale_ok(c.scale), "accepted TimeScale %g", c.scale);
	FUZZ_CHECK(c.name[0] && strlen(c.name) <= 64 && !strchr(c.name, '/'),
		   "accepted Name \"%s\"", c.name);
	FUZZ_CHECK(c.step_ns >= 0, "accepted StepNs %lld", (long long)c.step_ns);
	FUZZ_CHECK(c.source != NULL, "no source");
	/* The library's rule: owner rw, nobody else writes, nothing executes. */
	FUZZ_CHECK((c.segment_mode & ~0777u) == 0 && (c.segment_mode & 0600) == 0600 &&
			   !(c.segment_mode & 0133),
		   "accepted SegmentMode %o", c.segment_mode);
	FUZZ_CHECK(c.sched_priority >= 0 && c.sched_priority <= 99, "accepted SchedPriority %d",
		   c.sched_priority);
	FUZZ_CHECK(c.control_idle_ns >= 100000000 && c.control_idle_ns <= 86400000000000LL,
		   "accepted ControlIdleTimeout %lld", (long long)c.control_idle_ns);
	return 0;
}
