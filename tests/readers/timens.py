#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Readers and writers in another time namespace (issue 52).

A clock's function is on its writer's CLOCK_MONOTONIC. In a time namespace
with another offset (unshare --time, a container, CRIU) a reader's
CLOCK_MONOTONIC differs by that offset, and every reading was off by it,
silently: `unshare --time --monotonic 3600 shmclock-cat` printed the clock
an hour ahead, exit 0. Now the writer records its namespace's offset in the
segment and every reader compares it with its own at open: -EXDEV, with a
message, from every reader (C and its fast path: shmclock-cat; the shim:
shmclock-run; Python; C#), for positive and negative offsets; a writer
refuses to take over a clock made in a namespace of another offset; a
writer and its readers in one namespace work as anywhere.

Needs root (unshare --time) and a kernel with time namespaces: exit 77
with the reason otherwise.
Environment: SHMCLOCKD, SHMCLOCK_CAT, SHMCLOCK_RUN, PYTHONPATH (the
module); MONO and LS_PARTICIPANT_CS for C#, when built.
"""
import os
import signal
import subprocess
import sys
import tempfile
import time

failures = 0
D = os.environ["SHMCLOCKD"]
CAT = os.environ["SHMCLOCK_CAT"]
RUN = os.environ["SHMCLOCK_RUN"]
WORDS = "another time namespace"


def check(ok, what):
    global failures
    print("%s - %s" % ("ok" if ok else "not ok", what), flush=True)
    if not ok:
        failures += 1
    return ok


def ns(offset, *cmd, **kw):
    """@cmd in a new time namespace whose CLOCK_MONOTONIC is @offset s
    ahead (negative: behind) of this one."""
    return subprocess.run(["unshare", "--time", "--monotonic", str(offset), "--fork"] + list(cmd),
                          capture_output=True, text=True, timeout=60, **kw)


def start(name, env, *prefix, extra=()):
    p = subprocess.Popen(list(prefix) + [D, "-n", name, "--log-level", "warn"] + list(extra),
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for _ in range(200):
        if os.path.exists("/dev/shm/shmclock." + name) and subprocess.run(
                [CAT, "-n", name], env=env, capture_output=True).returncode in (0, 1):
            break
        time.sleep(0.05)
    return p


def stop(p):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def main():
    if os.geteuid() != 0:
        print("SKIP: unshare --time needs root")
        return 77
    probe = ns(1, "cat", "/proc/self/timens_offsets")
    if probe.returncode or "monotonic" not in probe.stdout:
        print("SKIP: no time namespaces here (unshare --time: %s)" % probe.stderr.strip()[-120:])
        return 77
    # How far back a negative offset may go: not past this machine's boot.
    with open("/proc/uptime") as f:
        back = -min(30, int(float(f.read().split()[0])) // 2)
    tmp = tempfile.mkdtemp(prefix="shmclock-timens.")
    env = dict(os.environ, SHMCLOCK_RUNTIME_DIR=tmp)
    name = "timens-%d" % os.getpid()
    procs = []
    try:
        d = start(name, env, extra=["--remove-on-exit"])
        procs.append(d)
        r = subprocess.run([CAT, "-n", name], env=env, capture_output=True, text=True)
        check(r.returncode == 0, "the clock reads in the writer's namespace (%s)" % r.stdout.strip())
        for off in (3600, back):
            r = ns(off, CAT, "-n", name, env=env)
            check(r.returncode != 0 and WORDS in r.stderr and not r.stdout.strip(),
                  "shmclock-cat (C, the fast path) with CLOCK_MONOTONIC %+d s: refused, says why "
                  "(exit %d, %r%s)" % (off, r.returncode, r.stderr.strip()[-90:],
                                        ", printed %s" % r.stdout.strip() if r.stdout.strip() else ""))
            r = ns(off, RUN, "-n", name, "--", "date", "+%s", env=env)
            check(r.returncode == 1 and WORDS in r.stderr and "nsenter" in r.stderr,
                  "shmclock-run (the shim) %+d s: refused, says what to do (exit %d, %r)"
                  % (off, r.returncode, r.stderr.strip()[-120:]))
            r = ns(off, sys.executable, "-c",
                   "import errno, shmclock, sys\n"
                   "try:\n    shmclock.Clock(sys.argv[1])\nexcept OSError as e:\n"
                   "    print(errno.errorcode.get(e.errno), e)\n    sys.exit(3)\n",
                   name, env=env)
            check(r.returncode == 3 and r.stdout.startswith("EXDEV") and WORDS in r.stdout,
                  "Python %+d s: OSError EXDEV (%s)" % (off, (r.stdout + r.stderr).strip()[-120:]))
            if os.environ.get("MONO") and os.environ.get("LS_PARTICIPANT_CS"):
                r = ns(off, os.environ["MONO"], os.environ["LS_PARTICIPANT_CS"], name, "cs", "1000000",
                       "2000000", env=env)
                check(r.returncode == 1 and WORDS in r.stderr,
                      "C# %+d s: the clock refused (exit %d, %r)"
                      % (off, r.returncode, r.stderr.strip()[-120:]))
        # A writer in another namespace cannot take over this clock: its
        # function is on this namespace's CLOCK_MONOTONIC.
        kept = name + "-kept"
        k = start(kept, env)
        stop(k)
        r = ns(3600, D, "-n", kept, "--log-level", "warn", "--", "true", env=env)
        check(r.returncode != 0 and WORDS in r.stderr,
              "a writer in another namespace does not take over a clock made here (exit %d, %r)"
              % (r.returncode, r.stderr.strip()[-120:]))
        r = subprocess.run([CAT, "-n", kept], env=env, capture_output=True, text=True)
        check(r.stdout.strip().lstrip("-").isdigit() and WORDS not in r.stderr,
              "... and readers here still read it, its writer gone (%s)"
              % (r.stdout.strip() or r.stderr.strip()[-80:]))
        try:
            os.unlink("/dev/shm/shmclock." + kept)
        except FileNotFoundError:
            pass
        # A writer and its reader in one namespace of their own: as anywhere;
        # the namespace's clock refused here.
        inner = name + "-inner"
        script = ("%s -n %s --remove-on-exit --log-level warn -- sh -c '%s -n %s; sleep 1; %s -n %s'"
                  % (D, inner, CAT, inner, CAT, inner))
        box = subprocess.Popen(["unshare", "--time", "--monotonic", "3600", "--fork", "sh", "-c",
                                script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
        procs.append(box)
        seen = None
        for _ in range(100):
            seen = subprocess.run([CAT, "-n", inner], env=env, capture_output=True, text=True)
            if WORDS in seen.stderr:
                break
            time.sleep(0.02)
        out, err = box.communicate(timeout=60)
        t = [int(x) for x in out.split()]
        check(box.returncode == 0 and len(t) == 2 and 0 < t[1] - t[0] < 60 * 10 ** 9,
              "a writer and its readers in one time namespace: read as anywhere (%s, exit %d %r)"
              % (t, box.returncode, err.strip()[-120:]))
        check(seen is not None and seen.returncode != 0 and WORDS in seen.stderr,
              "... and that clock is refused from the initial namespace (%r)"
              % (seen.stderr.strip()[-90:] if seen else None))
    finally:
        for p in procs:
            stop(p)
        for f in os.listdir("/dev/shm"):
            if f.startswith("shmclock.timens-%d" % os.getpid()):
                os.unlink("/dev/shm/" + f)
        subprocess.run(["rm", "-rf", tmp])
    print("# %d failure(s)" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
