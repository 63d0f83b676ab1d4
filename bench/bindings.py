#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""shmclock-bench-python: shmclock.Clock.now() against time.monotonic_ns() in
the same interpreter (run by `shmclock-bench bindings`). Prints one JSON
object: per-call ns of each contender, timed in batches of 50 calls (unrolled
by ten), the contenders taking turns batch by batch. Both pay the same
interpreter cost of a call to a C function, which is most of either."""

import json
import os
import sys
import time

import shmclock


def batch(fn):
    t0 = time.perf_counter_ns()
    for _ in range(5):
        fn(); fn(); fn(); fn(); fn(); fn(); fn(); fn(); fn(); fn()
    return (time.perf_counter_ns() - t0) / 50


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(p * len(v)))]


def main():
    batches = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
    name = f"bench-py-{os.getpid()}"
    try:
        with shmclock.Writer(name) as w, shmclock.Clock(name) as clock:
            w.set_time(0)
            base, sim = [], []
            mono, now = time.monotonic_ns, clock.now
            for _ in range(1000):
                now()
            for _ in range(batches):
                base.append(batch(mono))
                sim.append(batch(now))
    finally:
        try:
            os.unlink(f"/dev/shm/shmclock.{name}")
        except FileNotFoundError:
            pass
    print(json.dumps({
        "language": "Python",
        "contenders": [
            {"name": "time.monotonic_ns()", "p50": pct(base, 0.5), "p99": pct(base, 0.99),
             "p999": pct(base, 0.999), "max": max(base)},
            {"name": "shmclock.Clock.now()", "p50": pct(sim, 0.5), "p99": pct(sim, 0.99),
             "p999": pct(sim, 0.999), "max": max(sim)},
        ],
        "goal": 1.3,
    }))


if __name__ == "__main__":
    main()
