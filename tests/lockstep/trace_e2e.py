#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""shmclockctl trace (issue 34): a lockstep clock with three participants,
each working 2 ms of real time per 10 ms step, traced for 3 s. The file
parses as Chrome trace-event JSON; each participant has its own track whose
slices alternate working / waiting and add up to the traced real time
within 5 %; working slices last at least the participants' 2 ms (a sleep is
never shorter); the clock's advances and a real-time factor counter are
there. Bad input gets one-line errors.
Environment: SHMCLOCKD, SHMCLOCKCTL, LS_PARTICIPANT; PYTHONPATH has
tests/panel (panelenv).
"""
import json
import os
import statistics
import subprocess
import time

from panelenv import CTL, Env, check, finish

SECONDS = 3


def main():
    with Env(participants=3, period_ms=10, work_us=2000, tag="trace", panel=False) as e:
        out = os.path.join(e.tmp, "trace.json")
        t0 = time.monotonic()
        r = e.ctl("trace", "--seconds", str(SECONDS), out)
        took = time.monotonic() - t0
        check(r.returncode == 0, "shmclockctl trace --seconds %d: exit %d %s" % (SECONDS, r.returncode, r.stderr.strip()))
        try:
            j = json.load(open(out))
            ev = j["traceEvents"]
        except (OSError, ValueError, KeyError) as ex:
            check(False, "the trace parses as trace-event JSON: %s" % ex)
            finish()
        check(isinstance(ev, list) and all({"ph", "pid"} <= set(x) for x in ev),
              "the trace parses as trace-event JSON (%d events)" % len(ev))
        names = {x["tid"]: x["args"]["name"] for x in ev if x["ph"] == "M" and x["name"] == "thread_name"}
        tracks = {tid: n.split(" ")[0] for tid, n in names.items() if tid != 0}
        check(sorted(tracks.values()) == e.who, "one track per participant: %s" % sorted(tracks.values()))
        dur = j.get("otherData", {}).get("duration_s", 0)
        # At least what was asked, at most the command's own time: a loaded
        # machine may end the trace late, never early.
        check(SECONDS - 0.05 <= dur <= took, "traced %.3f s (the command took %.3f s)" % (dur, took))
        for tid, who in sorted(tracks.items()):
            s = sorted((x for x in ev if x["ph"] == "X" and x["tid"] == tid), key=lambda x: x["ts"])
            alt = all(a["name"] != b["name"] for a, b in zip(s, s[1:])) and \
                {x["name"] for x in s} == {"working", "waiting"}
            total = sum(x["dur"] for x in s) / 1e6
            check(alt, "%s: %d slices, alternating working / waiting" % (who, len(s)))
            check(abs(total - dur) <= 0.05 * dur,
                  "%s: they add up to %.4f s of the %.4f s traced (within 5 %%)" % (who, total, dur))
            work = [x["dur"] / 1e3 for x in s if x["name"] == "working" and "args" not in x][1:-1]
            med = statistics.median(work) if work else 0
            check(med >= 2.0, "%s: its working slices last %.2f ms (median), at least the 2 ms it sleeps" % (who, med))
        adv = [x for x in ev if x["ph"] == "i" and x["name"] == "advance"]
        check(len(adv) > 10 and all(b["args"]["sim_ns"] > a["args"]["sim_ns"] for a, b in zip(adv, adv[1:])),
              "the clock's advances are instant events (%d), in increasing time" % len(adv))
        rtf = [x["args"]["factor"] for x in ev if x["ph"] == "C"]
        check(len(rtf) >= SECONDS * 5 and all(f >= 0 for f in rtf),
              "a real-time factor counter track (%d points, last %.3g)" % (len(rtf), rtf[-1] if rtf else 0))

        for args, rc, want in [
            (["trace", out], 2, "--seconds"),
            (["trace", "--seconds", "-1", out], 2, "from 0 to 86400"),
            (["trace", "--seconds", "1", "/nonexistent/dir/t.json"], 1, "No such file"),
        ]:
            r = e.ctl(*args)
            err = r.stderr.strip()
            check(r.returncode == rc and want in err and len(err.splitlines()) == 1,
                  "shmclockctl %s: exit %d, %s" % (" ".join(args[:-1]), r.returncode, err))
        r = subprocess.run([CTL, "-n", "no-such-clock-%d" % os.getpid(), "trace", "--seconds", "1", out],
                           env=e.env, capture_output=True, text=True)
        check(r.returncode == 1 and "no-such-clock" in r.stderr and len(r.stderr.strip().splitlines()) == 1,
              "trace of no clock: %s" % r.stderr.strip())
    finish()


if __name__ == "__main__":
    main()
