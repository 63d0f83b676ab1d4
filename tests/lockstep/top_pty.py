#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""shmclockctl top in a pseudo-terminal (issue 30): it refreshes in place
(cursor home and clear before each frame) and shows every participant with
its steps, working and waiting times, and who holds the clock; piped, the
frames follow one another. Also: top on a clock that is not in lockstep is
refused in one line.

Environment: SHMCLOCKD, SHMCLOCKCTL, LS_PARTICIPANT (set by meson).
"""
import os
import pty
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

D = os.environ["SHMCLOCKD"]
CTL = os.environ["SHMCLOCKCTL"]
P = os.environ["LS_PARTICIPANT"]
MS = 1000000
failures = 0
n = 0


def check(cond, what):
    global failures, n
    n += 1
    print(("ok %d - " if cond else "not ok %d - ") % n + what, flush=True)
    if not cond:
        failures += 1


def run_in_pty(argv, timeout=20):
    """argv's whole output, read from the master side of a pty."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(argv[0], argv)
    out, end = b"", time.monotonic() + timeout
    while time.monotonic() < end:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    _, st = os.waitpid(pid, 0)
    os.close(fd)
    return out.decode("utf-8", "replace"), st


def main():
    tmp = tempfile.mkdtemp(prefix="shmclock-top-")
    clock = "top%d_%d" % (os.getpid(), time.monotonic_ns() % 1000000)
    plain = clock + "_plain"
    sock = os.path.join(tmp, "c.sock")
    psock = os.path.join(tmp, "p.sock")
    procs = []
    print("1..6", flush=True)
    try:
        procs.append(subprocess.Popen([D, "-n", clock, "--source", "fixed", "--lockstep", "2",
                                       "--socket", sock, "--log-level", "warn"]))
        for _ in range(200):
            if os.path.exists(sock):
                break
            time.sleep(0.01)
        for who, period in (("fast-model", 1), ("slow-model", 3)):
            p = subprocess.Popen([P, clock, who, str(period * MS), str(1 << 60)],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            procs.append(p)
            p.stdout.readline()  # "joined ..."
        out, st = run_in_pty([CTL, "-n", clock, "--socket", sock, "top", "--interval", "200",
                              "--count", "3"])
        frames = out.split("\x1b[H\x1b[2J")
        check(os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0, "top --count 3 exits 0 (status %d)" % st)
        check(len(frames) == 4 and frames[0] == "",
              "three frames, each drawn in place (cursor home, clear): %d" % (len(frames) - 1))
        last = frames[-1]
        check("PARTICIPANT" in last and "WORK p50" in last and "WAIT p50" in last and "HOLDING" in last,
              "a header with working and waiting times and holding: %r" % last[:300])
        rows = [l for l in last.splitlines() if l.startswith(("fast-model", "slow-model"))]
        ok = len(rows) == 2 and all(int(r.split()[2]) > 0 for r in rows)
        check(ok, "a row per participant with its steps: %r" % rows)
        check("steps/s" in last and "last to grant most often: " in last,
              "the clock's steps/s and who was last to grant: %r" % last.splitlines()[:2])
        procs.append(subprocess.Popen([D, "-n", plain, "--source", "fixed", "--socket", psock,
                                       "--log-level", "warn"]))
        for _ in range(200):
            if os.path.exists(psock):
                break
            time.sleep(0.01)
        r = subprocess.run([CTL, "-n", plain, "--socket", psock, "top", "--count", "1"],
                           capture_output=True, text=True, timeout=20)
        check(r.returncode == 1 and "lockstep" in r.stderr and r.stderr.count("\n") == 1,
              "not in lockstep: refused in one line: %r" % r.stderr)
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        for c in (clock, plain):
            for f in ("/dev/shm/shmclock." + c, "/dev/shm/shmclock-lockstep." + c):
                try:
                    os.unlink(f)
                except FileNotFoundError:
                    pass
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
