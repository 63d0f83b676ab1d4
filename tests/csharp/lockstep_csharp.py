#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A C# lockstep participant among C ones (issue 35), through the built
shmclockd: participants with periods 1, 10 and 33 ms exchange messages over
Unix sockets for 1 s of simulated time, the C# one (Shmclock.Lockstep,
tests/csharp/ls_participant.cs) in each of the three roles, stepping with
Advance and with AdvanceAsync. The ordering guarantee holds when every log
is the one it predicts (every message stamped before T seen at step T), as
tests/lockstep/lockstep_e2e.py checks for C participants alone. The C#
participant also checks that a grant from another thread than the joining
one throws InvalidOperationException, and one after Leave
ObjectDisposedException, and one beyond the horizon an ArgumentException
that names MaxGrantAhead (shmclock_lockstep_strerror's words).

Environment: SHMCLOCKD, SHMCLOCKCTL, LS_PARTICIPANT, MONO, LS_PARTICIPANT_CS,
and the Mono paths (set by meson). Exit 0 when every check holds.
"""
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lockstep"))
import lockstep_e2e  # noqa: E402
from lockstep_e2e import END, MS, check, expected_log  # noqa: E402  (the C runs' oracle)

D = os.environ["SHMCLOCKD"]
P = os.environ["LS_PARTICIPANT"]
MONO = os.environ["MONO"]
CS = os.environ["LS_PARTICIPANT_CS"]


def run(tmp, periods, csharp, extra):
    """One CI-mode run; returns (log, stderr) or (None, stderr)."""
    for f in os.listdir(tmp):
        os.unlink(os.path.join(tmp, f))
    clock = "ls-cs-%d-%d" % (os.getpid(), random.randrange(1 << 30))
    peers = ",".join(w for w, _ in periods)
    lines = ["set -e"]
    for w, p in periods:
        prog = '"%s" "%s"' % (MONO, CS) if w == csharp else '"%s"' % P
        lines.append('%s %s %s %d %d --dir %s --peers %s --log %s/%s.log %s & pid_%s=$!'
                     % (prog, clock, w, p, END, tmp, peers, tmp, w,
                        extra if w == csharp else "", w))
    for w, _ in periods:
        lines.append("wait $pid_%s" % w)
    try:
        r = subprocess.run([D, "-n", clock, "--source", "fixed", "--lockstep", str(len(periods)),
                            "--log-level", "warn", "--", "sh", "-c", "\n".join(lines)],
                           capture_output=True, text=True, timeout=120)
    finally:
        for f in os.listdir("/dev/shm"):
            if clock in f:
                os.unlink(os.path.join("/dev/shm", f))
    if r.returncode != 0:
        return None, r.stderr
    return "".join(open("%s/%s.log" % (tmp, w)).read() for w, _ in periods), r.stderr


def writer_death(tmp):
    """The daemon SIGKILLed while the C# participant awaits AdvanceAsync:
    it ends with ESTALE (no timeout given), as the C one does."""
    clock = "ls-cs-%d-death" % os.getpid()
    sock = os.path.join(tmp, "death.sock")
    procs = []
    try:
        d = subprocess.Popen([D, "-n", clock, "--source", "fixed", "--lockstep", "2", "--socket", sock,
                              "--log-level", "error"])
        procs.append(d)
        end = time.monotonic() + 5
        while not os.path.exists(sock) and time.monotonic() < end:
            time.sleep(0.01)
        c = subprocess.Popen([P, clock, "c", str(MS), str(1 << 60)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        procs.append(c)
        cs = subprocess.Popen([MONO, CS, clock, "cs", str(10 * MS), str(1 << 60), "--async"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(cs)
        joined = c.stdout.readline().startswith("joined") and cs.stdout.readline().startswith("joined")
        time.sleep(0.3)
        d.kill()
        d.wait()
        try:
            err = cs.communicate(timeout=10)[1]
        except subprocess.TimeoutExpired:
            err = "(still running 10 s after the kill)"
        check(joined, "both participants joined")
        check(joined and cs.returncode == 1 and "ShmclockException" in err and "writer is gone" in err,
              "the daemon SIGKILLed during AdvanceAsync: the C# participant ends with ESTALE (%s)"
              % err.strip().splitlines()[-1][:160] if err.strip() else "no message")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        for f in os.listdir("/dev/shm"):
            if clock in f:
                os.unlink(os.path.join("/dev/shm", f))


def main():
    tmp = tempfile.mkdtemp(prefix="ls-cs-")
    os.environ["SHMCLOCK_RUNTIME_DIR"] = tmp
    os.environ.pop("SHMCLOCK_NAME", None)
    os.environ.pop("SHMCLOCK_SOCKET", None)
    periods = [("a", 1 * MS), ("b", 10 * MS), ("c", 33 * MS)]
    want = expected_log(periods, END)
    try:
        for csharp, extra in (("a", "--check-thread"), ("b", "--async"), ("c", "")):
            how = "AdvanceAsync" if extra == "--async" else "Advance"
            log, err = run(tmp, periods, csharp, extra)
            if not check(log is not None, "a run with the C# participant as %s (period %d ms, %s)"
                         % (csharp, dict(periods)[csharp] // MS, how)):
                print("#  " + err.strip().replace("\n", "\n#  "))
                continue
            ok = check(log == want, "  and its log is the one the lockstep guarantee predicts "
                       "(every message stamped before T seen at step T, %d bytes)" % len(log))
            if not ok:
                for a, b in zip(log.splitlines(), want.splitlines()):
                    if a != b:
                        print("#  got:  %s\n#  want: %s" % (a[:200], b[:200]))
                        break
            if extra == "--check-thread":
                # (A grant from another thread than the joining one
                # failing ends the run: exit 3.)
                check("a grant from another thread gave" not in err,
                      "  a grant from another thread than the joining one is the participant's")
                if "not asserted" in err:
                    print("#   two calls at once: not asserted (the step ended at once)")
                else:
                    check("used by two calls at once" in err,
                          "  a grant during an AdvanceAsync under way: InvalidOperationException")
                check("after Leave: " in err, "  a grant after Leave: ObjectDisposedException")
                hz = [l for l in err.splitlines() if ": horizon: " in l]
                check(hz and "MaxGrantAhead" in hz[0] and "clock name" not in hz[0],
                      "  a grant beyond the horizon: ArgumentException in lockstep's terms (%s)"
                      % (hz[0].split(": horizon: ")[-1][:160] if hz else "no message"))
        writer_death(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("# %d failure(s)" % lockstep_e2e.failures)
    return 1 if lockstep_e2e.failures else 0


if __name__ == "__main__":
    sys.exit(main())
