#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""shmclock-run -v / --strict (issue 33): a program that escapes the clock
is reported, never silently on real time. preload-tsc reads the CPU's
time-stamp counter (rdtsc, rdtscp), which no shim redirects; built dynamic
(under the shim) and static (under the supervisor).

  report       -v: exit status and output unchanged; the report counts at
               least the reads the program made, at preload-tsc's file
  strict       --strict: exit status 3 when the program exited 0 and read
               the counter; its own status when it failed; a line naming
               where
  none         a program without escapes: -v says none, --strict exits 0;
               also a dynamic one exec'd by a supervised static program
               (whose trapped counter it inherits)
  quiet        without -v or --strict: no report, output unchanged
  fork, exec   a forked child's reads, and those of a program exec'd (a
               dynamic one by a dynamic and by a static program, a static
               one by a static program), are counted
  segv         a program's own SIGSEGV handler still catches its real NULL
               dereference (and reads back as its own)
  go           a Go program (runtime.cputicks, its own SIGSEGV handler)
               runs correctly under -v, dynamic and static

Counts are lower bounds (glibc or the runtime may read the counter too);
nothing depends on real-time bounds. Environment: SHMCLOCKD, SHMCLOCKCTL,
SHMCLOCK_RUN, PRELOAD_TSC, PRELOAD_TSC_STATIC, CASES_DIR (cases.go),
GO_CACHE. Exit 0 all passed, 1 a failure, 77 skipped (not x86-64, ptrace
denied).
"""
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import preload_apps  # noqa: E402  (build_go)

N = 25  # reads of each kind a case makes


class Clock:
    def __init__(self, env, tmp):
        self.name = "esc-%d-%d" % (os.getpid(), int(time.monotonic() * 1000) % 100000)
        self.sock = os.path.join(tmp, self.name + ".sock")
        self.p = subprocess.Popen([env["SHMCLOCKD"], "-n", self.name, "--socket", self.sock,
                                   "--remove-on-exit"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(250):
            if os.path.exists(self.sock) and subprocess.run(
                    [env["SHMCLOCKCTL"], "-n", self.name, "--socket", self.sock, "status"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
                return
            time.sleep(0.02)
        raise RuntimeError("shmclockd did not come up")

    def stop(self):
        self.p.terminate()
        self.p.wait(10)


def run(env, clock, opts, argv):
    """shmclock-run OPTS -- ARGV in a session of its own: (status, out, err);
    whatever of the session is left is killed."""
    p = subprocess.Popen([env["SHMCLOCK_RUN"], "-n", clock.name] + opts + ["--"] + argv,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        out, err = "", "timed out"
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
    return p.returncode, out, err


def escapes(err):
    """The count the report gives: 0 for "none", None without a report."""
    if "escapes: none" in err:
        return 0
    m = re.search(r"escapes: (\d+) reads? of real time", err)
    return int(m.group(1)) if m else None


def at(err, exe):
    """The report's count at @exe's file."""
    name = os.path.basename(exe)
    return sum(int(m.group(1)) for m in
               re.finditer(r":\s+(\d+) rdtscp? at (\S+)\+0x", err)
               if os.path.basename(m.group(2)) == name)


def reads():
    with open("/proc/cpuinfo") as f:
        return 2 * N if re.search(r"^flags.*\brdtscp\b", f.read(), re.M) else N


def cases(env, clock, exe, kind):
    fails = []
    want = reads()

    def bad(msg, r):
        fails.append("%s %s (exit %d, out %r, err %r)" % (kind, msg, r[0], r[1], r[2]))

    r = run(env, clock, ["-v"], [exe, "rdtsc", str(N)])
    if r[0] != 0 or r[1] != "ok %d\n" % N:
        bad("report: the program's result changed", r)
    elif (escapes(r[2]) or 0) < want or at(r[2], exe) < want:
        bad("report: fewer than the %d reads it made" % want, r)
    r = run(env, clock, ["-v"], [exe, "rdtsc", str(N), "5"])
    if r[0] != 5 or (escapes(r[2]) or 0) < want:
        bad("report: the program's exit status 5 changed, or no report", r)

    r = run(env, clock, ["--strict"], [exe, "rdtsc", str(N)])
    if r[0] != 3 or r[1] != "ok %d\n" % N or at(r[2], exe) < want:
        bad("strict: not exit 3 with the place named", r)
    r = run(env, clock, ["--strict"], [exe, "rdtsc", str(N), "5"])
    if r[0] != 5:
        bad("strict: the program's own failure (5) not kept", r)

    r = run(env, clock, ["-v"], [exe, "none"])
    if r[0] != 0 or r[1] != "ok 0\n" or escapes(r[2]) != 0:
        bad("none: -v does not report none", r)
    r = run(env, clock, ["--strict"], [exe, "none"])
    if r[0] != 0 or r[1] != "ok 0\n" or escapes(r[2]) not in (None, 0):
        bad("none: --strict failed a program without escapes", r)

    r = run(env, clock, [], [exe, "rdtsc", str(N)])
    if r[0] != 0 or r[1] != "ok %d\n" % N or escapes(r[2]) is not None:
        bad("quiet: a report without -v, or a changed result", r)

    r = run(env, clock, ["-v"], [exe, "fork", str(N)])
    if r[0] != 0 or r[1] != "child ok\n" or at(r[2], exe) < want:
        bad("fork: the child's reads not counted", r)
    r = run(env, clock, ["-v"], [exe, "exec", env["PRELOAD_TSC"], "rdtsc", str(N)])
    if r[0] != 0 or r[1] != "ok %d\n" % N or at(r[2], env["PRELOAD_TSC"]) < want:
        bad("exec: the dynamic program exec'd not counted", r)
    if kind == "static":
        # A dynamic program under the trap cannot exec a static one (EPERM,
        # preload-apps); a supervised one can, and its flag goes with it.
        r = run(env, clock, ["-v"], [exe, "exec", exe, "rdtsc", str(N)])
        if r[0] != 0 or r[1] != "ok %d\n" % N or at(r[2], exe) < want:
            bad("exec: the static program exec'd not counted", r)
        # The dynamic program it execs inherits the trapped counter: the
        # shim's own set-up reads (through the vDSO) are not the program's.
        r = run(env, clock, ["-v"], [exe, "exec", env["PRELOAD_TSC"], "none"])
        if r[0] != 0 or r[1] != "ok 0\n" or escapes(r[2]) != 0:
            bad("exec: the shim's set-up in a dynamic program exec'd counted", r)

    r = run(env, clock, ["-v"], [exe, "segv", str(N)])
    if r[0] != 0 or r[1] != "caught\n" or at(r[2], exe) < N:
        bad("segv: the program's handler did not catch its fault, or no report", r)
    return fails


def go_cases(env, clock, tmp):
    try:
        dyn, static = preload_apps.build_go({"CASES_DIR": env["CASES_DIR"],
                                             "GO_CACHE": env.get("GO_CACHE", "")}, tmp)
    except RuntimeError as e:
        return ["go: %s" % e]
    if not dyn:
        return []
    fails = []
    for exe in (dyn, static):
        for opts in (["-v"], []):
            r = run(env, clock, opts, [exe])
            if r[0] != 0 or r[1] != "recovered true\nadvanced true\n":
                fails.append("go %s %s: wrong result (exit %d, out %r, err %r)"
                             % (os.path.basename(exe), opts, r[0], r[1], r[2]))
            elif opts and escapes(r[2]) is None:
                fails.append("go %s: no report (err %r)" % (os.path.basename(exe), r[2]))
    return fails


def main():
    need = ["SHMCLOCKD", "SHMCLOCKCTL", "SHMCLOCK_RUN", "PRELOAD_TSC", "PRELOAD_TSC_STATIC",
            "CASES_DIR"]
    missing = [k for k in need if not os.environ.get(k)]
    if missing:
        print("preload_escapes.py: set %s" % ", ".join(missing), file=sys.stderr)
        return 2
    if platform.machine() != "x86_64":
        print("skip: the escape report (rdtsc) is for x86-64 only")
        return 77
    env = {k: os.environ.get(k, "") for k in need + ["GO_CACHE"]}
    failures = 0
    with tempfile.TemporaryDirectory(prefix="shmclock-esc.") as tmp:
        clock = Clock(env, tmp)
        try:
            r = run(env, clock, [], [env["PRELOAD_TSC_STATIC"], "none"])
            if r[0] == 126 and "ptrace" in r[2]:
                print("skip: ptrace is denied here, static programs cannot be supervised")
                return 77
            for name, fn in (("dynamic", lambda: cases(env, clock, env["PRELOAD_TSC"],
                                                          "dynamic")),
                             ("static", lambda: cases(env, clock, env["PRELOAD_TSC_STATIC"],
                                                         "static")),
                             ("go", lambda: go_cases(env, clock, tmp))):
                f = fn()
                for line in f:
                    print("FAIL %s: %s" % (name, line))
                if not f:
                    print("ok %s" % name)
                failures += len(f)
        finally:
            clock.stop()
    print("%d failures" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
