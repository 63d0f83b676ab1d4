/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: arbitrary bytes as a recording (issue 55), read the way the
 * replay source and shmclock-cat --mcap read one (tl_load_mem, over the MCAP
 * reader). Beyond not crashing or reading outside the input:
 *   - every record the MCAP reader returns lies inside the input;
 *   - a recording accepted has changes with a valid rate (0, or the nominal
 *     one), in increasing order, and a cut said to be within the input;
 *   - reading a prefix never gives more changes than the whole, when both
 *     are accepted (what is whole before a cut is the same records);
 *   - and once more without the chunks' CRCs, so that mutations reach the
 *     messages' JSON and its checks.
 */
#include <errno.h>

#include "fuzz.h"
#include "mcap.h"
#include "timeline.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tl_recording rec, pre;
	struct mcap_reader rd;
	struct mcap_record r;
	char err[256];
	int rc, rp, e;

	mcap_reader_init_mem(&rd, data, size);
	while ((e = mcap_next(&rd, &r)) > 0)
		FUZZ_CHECK(r.body >= data && r.body + r.len <= data + size,
			   "record at %llu outside the input", (unsigned long long)r.offset);
	FUZZ_CHECK(e <= 0 && (e == 0 || rd.err[0]), "an error without a message (%d)", e);
	mcap_reader_free(&rd);

	rc = tl_load_mem(data, size, &rec, err, sizeof(err));
	FUZZ_CHECK(rc <= 0 && (rc == 0 || err[0]), "an error without a message (%d)", rc);
	if (rc == 0) {
		FUZZ_CHECK(!rec.truncated || rec.stopped_at <= size, "cut at %llu of %zu",
			   (unsigned long long)rec.stopped_at, size);
		for (size_t i = 0; i < rec.nchanges; i++) {
			const struct tl_change *c = &rec.changes[i];

			FUZZ_CHECK(c->nominal_mult && (!c->rate || c->rate == c->nominal_mult),
				   "change %zu: rate %llu, nominal %llu", i,
				   (unsigned long long)c->rate, (unsigned long long)c->nominal_mult);
			FUZZ_CHECK(!i || c->seq > rec.changes[i - 1].seq, "change %zu out of order", i);
			(void)tl_eval(c, c->mono_base + 1000000000);
		}
	}
	/* Again without the chunks' CRCs: mutations inside a chunk reach
	 * the messages and their JSON. */
	if (tl_load_mem_flags(data, size, TL_NO_CRC, &pre, err, sizeof(err)) == 0) {
		for (size_t i = 0; i < pre.nchanges; i++)
			FUZZ_CHECK(pre.changes[i].nominal_mult, "change %zu: nominal 0", i);
		tl_free(&pre);
	}
	rp = tl_load_mem(data, size / 2, &pre, err, sizeof(err));
	if (rc == 0 && rp == 0)
		FUZZ_CHECK(pre.nchanges <= rec.nchanges, "a prefix gives %zu changes, the whole %zu",
			   pre.nchanges, rec.nchanges);
	if (rp == 0)
		tl_free(&pre);
	if (rc == 0)
		tl_free(&rec);
	return 0;
}
