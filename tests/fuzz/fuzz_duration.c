/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: shmclockd's duration and date parser (duration.c), used by
 * the config, the control socket, shmclockctl and the reader programs.
 * Beyond not crashing: an error is one line, and what parses formats back
 * to text that parses to the same value (durations and ISO dates).
 */
#include <errno.h>
#include <inttypes.h>

#include "duration.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = fuzz_cstr(data, size);
	char err[256], buf[64];
	int64_t ns, back;
	int r;

	err[0] = '\0';
	r = duration_parse(s, &ns, err, sizeof(err));
	FUZZ_CHECK(r == 0 || r == -EINVAL || r == -ERANGE, "duration_parse returned %d", r);
	if (r == 0) {
		duration_format(ns, buf, sizeof(buf));
		FUZZ_CHECK(duration_parse(buf, &back, err, sizeof(err)) == 0 && back == ns,
			   "%" PRId64 " formats as \"%s\" which does not parse back", ns, buf);
	} else {
		FUZZ_CHECK(fuzz_one_line(err), "duration_parse error is not one line: \"%s\"", err);
	}

	err[0] = '\0';
	r = time_parse(s, &ns, err, sizeof(err));
	FUZZ_CHECK(r == 0 || r == -EINVAL || r == -ERANGE, "time_parse returned %d", r);
	if (r == 0) {
		time_format_iso(ns, buf, sizeof(buf));
		FUZZ_CHECK(time_parse(buf, &back, err, sizeof(err)) == 0 && back == ns,
			   "%" PRId64 " formats as \"%s\" which does not parse back (%s)", ns, buf,
			   err);
	} else {
		FUZZ_CHECK(fuzz_one_line(err), "time_parse error is not one line: \"%s\"", err);
	}
	free(s);
	return 0;
}
