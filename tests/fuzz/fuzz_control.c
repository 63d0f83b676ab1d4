/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: one control-socket request line (request.c). Beyond not
 * crashing: a refused request has a one-line error and its reply is valid
 * JSON saying ok:false; an accepted one carries only values the clock
 * thread can apply (a finite scale > 0, a step >= 0).
 */
#include <cjson/cJSON.h>
#include <math.h>

#include "control.h" /* CONTROL_LINE_MAX */
#include "request.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct request req;
	char err[512];
	int r;

	if (size > CONTROL_LINE_MAX) /* the socket never hands over more */
		return 0;
	err[0] = '\0';
	r = request_parse((const char *)data, size, &req, err, sizeof(err));
	if (r) {
		char *reply = request_reply_error(err);
		cJSON *o, *ok;
		size_t n;

		FUZZ_CHECK(fuzz_one_line(err), "error is not one line: \"%s\"", err);
		FUZZ_CHECK(reply, "no reply");
		n = strlen(reply);
		FUZZ_CHECK(n > 1 && reply[n - 1] == '\n' && !memchr(reply, '\n', n - 1),
			   "reply is not one line: %s", reply);
		o = cJSON_Parse(reply);
		ok = cJSON_GetObjectItemCaseSensitive(o, "ok");
		FUZZ_CHECK(cJSON_IsFalse(ok), "reply is not {\"ok\":false,...}: %s", reply);
		cJSON_Delete(o);
		free(reply);
		return 0;
	}
	switch (req.kind) {
	case CMD_SCALE:
		FUZZ_CHECK(isfinite(req.scale) && req.scale > 0, "accepted scale %g", req.scale);
		break;
	case CMD_STEP:
		FUZZ_CHECK(req.ns >= 0, "accepted step %lld", (long long)req.ns);
		break;
	default:
		break;
	}
	return 0;
}
