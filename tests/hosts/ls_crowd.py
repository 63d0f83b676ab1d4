#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A crowd of would-be participants (lockstep_hosts_e2e.py's switch_crowd):

    ls_crowd.py CLOCK THREADS PERIOD END

THREADS threads each try to join CLOCK (shmclock.Lockstep) every
millisecond for as long as the clock says it is not in lockstep mode
(EOPNOTSUPP: a follower that has not heard its lockstep leader yet); one
that joins steps every PERIOD ns from where it joined up to END, then
leaves; one refused otherwise stops there. Prints "refused" at the first
refusal, then, at the end, one JSON line: the refusals, how many joined,
reached END, were refused for want of a slot (ENOSPC), and any
other outcome with its message (which the test wants none of).
"""
import errno
import json
import sys
import threading
import time

import shmclock

clock, n, period, end = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
lock = threading.Lock()
out = {"refused": 0, "joined": 0, "ended": 0, "full": 0, "other": []}


def note(key, what=None):
    with lock:
        if what is None:
            out[key] += 1
        else:
            out[key].append(what)


def crowd(i):
    while True:
        try:
            p = shmclock.Lockstep("crowd-%d" % i, clock)
            break
        except OSError as e:
            if e.errno == errno.EOPNOTSUPP:
                with lock:
                    out["refused"] += 1
                    if out["refused"] == 1:
                        print("refused", flush=True)  # the test starts the leader
                time.sleep(0.001)
                continue
            note("full" if e.errno == errno.ENOSPC else "other",
                 None if e.errno == errno.ENOSPC else "join: %r" % e)
            return
    note("joined")
    try:
        with p:
            t = p.joined_at
            while t + period <= end:
                t += period
                p.advance(t, 60.0)
        note("ended")
    except Exception as e:  # noqa: BLE001 (every outcome is reported)
        note("other", "step: %r" % e)


threads = [threading.Thread(target=crowd, args=(i,)) for i in range(n)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps(out), flush=True)
