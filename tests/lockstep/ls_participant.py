#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""ls-participant (ls_participant.c) in Python, over shmclock.Lockstep: the
same arguments, the same log, so a run with it gives the log the lockstep
guarantee predicts, byte for byte, as the C one's does.

  ls_participant.py CLOCK WHO PERIOD END [--dir DIR --peers A,B] [--log FILE]
                    [--work-us N]

Exit: 0; 1 a lockstep call failed (printed); 2 usage.
"""
import os
import socket
import sys
import threading
import time

import shmclock


def main(argv):
    if len(argv) < 5:
        print("usage: ls_participant.py CLOCK WHO PERIOD END [--dir DIR --peers A,B] "
              "[--log FILE] [--work-us N]", file=sys.stderr)
        return 2
    clock, who, period, end = argv[1], argv[2], int(argv[3]), int(argv[4])
    opt = dict(zip(argv[5::2], argv[6::2]))
    d, peers, logpath = opt.get("--dir"), opt.get("--peers"), opt.get("--log")
    work_us = int(opt.get("--work-us", "0"))
    if period <= 0:
        return 2
    pending, lock, sock, path = [], threading.Lock(), None, None
    if d:
        path = os.path.join(d, who + ".sock")
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(path)

        def take_in():
            # Under lock: a message is in the socket or in pending, never
            # in between, when a step looks.
            while True:
                try:
                    m = sock.recv(128, socket.MSG_DONTWAIT).decode()
                except BlockingIOError:
                    return
                w, _, t = m.partition("@")
                if t:
                    pending.append((int(t), w))

        def receiver():
            import select
            while True:
                select.select([sock], [], [])
                with lock:
                    take_in()

        threading.Thread(target=receiver, daemon=True).start()
    log = open(logpath, "w") if logpath else None
    try:
        p = shmclock.Lockstep(who, clock)
    except (OSError, ValueError) as e:
        print("ls_participant.py %s: join: %s" % (who, e.strerror if isinstance(e, OSError)
                                                  else e), file=sys.stderr)
        return 1
    # Ready: the test starts the next participant (or the clock) now.
    print("joined %d" % p.joined_at, flush=True)
    t = (p.joined_at // period + 1) * period
    while t <= end:
        try:
            p.advance(t, timeout=30.0)
        except (OSError, ValueError) as e:
            print("ls_participant.py %s: advance to %d: %s" % (who, t, e), file=sys.stderr)
            return 1
        if work_us > 0:
            time.sleep(work_us / 1e6)
        if sock:
            with lock:
                take_in()
                pending.sort()
                if log:
                    log.write("%d %s:" % (t, who) +
                              "".join(" %s@%d" % (w, s) for s, w in pending if s < t) + "\n")
                pending[:] = [(s, w) for s, w in pending if s >= t]
            for peer in (peers.split(",") if peers else []):
                try:
                    sock.sendto(("%s@%d" % (who, t)).encode(), os.path.join(d, peer + ".sock"))
                except (ConnectionRefusedError, FileNotFoundError):
                    pass
        elif log:
            log.write("%d %s\n" % (t, who))
        t += period
    p.leave()
    if log:
        log.close()
    if path:
        os.unlink(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
