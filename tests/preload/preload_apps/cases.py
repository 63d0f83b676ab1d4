# SPDX-License-Identifier: MIT
"""Python's timeouts, run under the preload shim by tests/preload/preload_apps.py.

    python3 cases.py CASE

Prints "ready" just before one wait of 5 s that must time out, then
"done M0 M1 OUTCOME" (time.monotonic_ns() before and after; OUTCOME
"timeout" when the call ended as a timeout).
"""
import asyncio
import os
import queue
import selectors
import sys
import threading
import time

W = 5.0


def ready():
    print("ready", flush=True)


def event():
    ready()
    return not threading.Event().wait(W)


def condition():
    c = threading.Condition()
    with c:
        ready()
        return not c.wait(W)


def lock():
    lk = threading.Lock()
    lk.acquire()
    ready()
    return not lk.acquire(timeout=W)


def queue_get():
    ready()
    try:
        queue.Queue().get(timeout=W)
    except queue.Empty:
        return True
    return False


def timer():
    fired = threading.Event()
    t = threading.Timer(W, fired.set)
    ready()
    t.start()
    t.join()
    return fired.is_set()


def join():
    stop = threading.Event()
    th = threading.Thread(target=stop.wait, daemon=True)
    th.start()
    ready()
    th.join(W)
    return th.is_alive()


def asyncio_sleep():
    ready()
    asyncio.run(asyncio.sleep(W))
    return True


def asyncio_wait_for():
    async def main():
        try:
            await asyncio.wait_for(asyncio.Event().wait(), W)
        except asyncio.TimeoutError:
            return True
        return False
    ready()
    return asyncio.run(main())


def selector():
    r, _ = os.pipe()
    sel = selectors.DefaultSelector()
    sel.register(r, selectors.EVENT_READ)
    ready()
    return sel.select(W) == []


CASES = {f.__name__: f for f in (event, condition, lock, queue_get, timer, join,
                                 asyncio_sleep, asyncio_wait_for, selector)}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        sys.exit("usage: cases.py {%s}" % "|".join(CASES))
    m0 = time.monotonic_ns()
    ok = CASES[sys.argv[1]]()
    m1 = time.monotonic_ns()
    print("done %d %d %s" % (m0, m1, "timeout" if ok else "no-timeout"), flush=True)
