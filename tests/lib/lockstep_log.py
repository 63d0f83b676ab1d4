# SPDX-License-Identifier: MIT
"""What the lockstep guarantee predicts of the participants' logs
(ls-participant --dir --log): lockstep_e2e.py on one host,
lockstep_hosts_e2e.py across hosts."""


def expected_log(periods, end):
    """What each participant (who, period in ns) logs up to @end when
    everything stamped before T has arrived by its step T, and nothing
    stamped T or later is shown."""
    out = []
    for who, p in periods:
        for t in range(p, end + 1, p):
            seen = sorted((s, w) for w, q in periods
                          for s in range(q, end + 1, q) if t - p <= s < t)
            out.append("%d %s:%s\n" % (t, who, "".join(" %s@%d" % (w, s) for s, w in seen)))
    return "".join(out)


def first_difference(got, want):
    """The first line that differs, for a failure's evidence."""
    for a, b in zip(got.splitlines(), want.splitlines()):
        if a != b:
            return "got: %s / want: %s" % (a[:200], b[:200])
    return "lengths %d and %d" % (len(got), len(want))
