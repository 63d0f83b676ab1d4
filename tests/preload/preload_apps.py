#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The programs people run, under the preload shim (issue 16).

Every case is a real program (python3, node, bash, a C program) that waits
5 s of its own time with one kind of timeout, which must time out. All
cases of a group run at once, against one clock at scale 10 (5 simulated
s are 0.5 s of real time), in one scenario:

  plain   the clock runs: each wait ends after 5 simulated s, well before
          5 real s;
  pause   2 simulated s in, the clock pauses for 2 real s: the waits end
          after it (≈ 2.5 real s), and burn no CPU while paused;
  back    2 simulated s in, `set` one hour back;
  fwd     2 simulated s in, `set` one hour forward.

Relative timeouts, and absolute ones on CLOCK_MONOTONIC, last their 5
simulated s through both jumps, and the program's monotonic readings never
decrease (they show 5 s, not 5 s minus or plus an hour). Absolute
CLOCK_REALTIME deadlines follow the jump: the forward one ends them at the
jump, the backward one keeps them waiting. Each scenario runs on a
system-source clock and on a simulation-source clock.

The clock starts paused; every program says "ready" just before its wait,
and the clock runs only once all have: they all wait from the same
simulated instant.

Programs that skip libc (issue 33) run in the same scenarios: Go built
with cgo (cases.go, built here if go is installed), C calling the system
calls itself (preload-raw, under shmclock-run --trap) and C calling the
vDSO's function; and programs that cannot load the shim, under
shmclock-run's supervisor: Go built with CGO_ENABLED=0 and static C
(preload-static), one of which runs a dynamic sleep(1). --mutant runs them with the trap off (Go and raw calls
must then fail), then with the vDSO left as it is (Go and the vDSO caller
must fail): or the test does not test them.

usage: preload_apps.py [--source S]... [--scenario S]... [--case NAME]... [--mutant]
Environment: SHMCLOCKD, SHMCLOCKCTL, SHMCLOCK_RUN, SHMCLOCK_PRELOAD,
PRELOAD_WAITS, PRELOAD_RAW, PRELOAD_STATIC (the C programs), CASES_DIR (cases.py, cases.js,
cases.go), GO_CACHE (optional: Go's build cache).
Exit 0 all passed, 1 a failure, 77 nothing could run.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

NS = 1_000_000_000
WAIT_NS = 5 * NS
HOUR_NS = 3600 * NS
SCALE = 10
CLK_TCK = os.sysconf("SC_CLK_TCK")

# Kinds: "rel" ends on the jump-free timeline (relative timeouts, absolute
# CLOCK_MONOTONIC ones); "rt" is an absolute CLOCK_REALTIME deadline.
C_REL = ["poll", "ppoll", "select", "pselect", "epoll_wait", "epoll_pwait", "epoll_pwait2", "sigtimedwait",
         "nanosleep", "timerfd", "timerfd_periodic", "timerfd_abs_mono", "sem_clockwait", "mutex_clocklock",
         "cond_mono"]
C_RT = ["sem_timedwait", "mutex_timedlock", "rwlock_timedrdlock", "rwlock_timedwrlock",
        "timedjoin", "mq_timedreceive", "cond_timedwait", "timerfd_abs_rt"]
PY = ["event", "condition", "lock", "queue_get", "timer", "join", "asyncio_sleep",
      "asyncio_wait_for", "selector"]
NODE = ["setTimeout", "setInterval", "execFile"]
# Programs that skip libc (issue 33): Go built with cgo (the shim is loaded,
# the runtime reads the vDSO and waits with raw system calls), and C that
# makes the system calls itself or calls the vDSO's function. The raw C
# cases run with --trap (a C program is not taken for one that needs it).
GO = ["sleep", "after", "ctx", "ticker", "http", "exec"]
RAW_REL = ["raw_nanosleep", "raw_clock_nanosleep", "raw_futex", "raw_ppoll", "raw_epoll_pwait",
           "raw_pselect6", "raw_timerfd", "raw_alarm", "raw_timer"]
RAW_RT = ["raw_clock_nanosleep_abs_rt"]
# Programs that cannot load the shim: statically linked C and Go built with
# CGO_ENABLED=0, under shmclock-run's supervisor. static:exec runs the
# dynamic sleep(1) from the static program: both follow; static:eintr has
# a signal handler end its sleep with EINTR and the rest slept.
# POSIX timers, timerfds and clock_getres are answered by its listener.
STATIC_REL = ["nanosleep", "poll", "select", "futex", "eintr", "alarm", "setitimer",
              "posix_timer", "timer_thread_id", "timer_sigev_thread", "timerfd_periodic",
              "timerfd_abs_mono", "getres"]
STATIC_RT = ["clock_nanosleep_abs_rt", "timer_abs_rt", "timerfd_abs_rt"]


def build_go(env, tmp):
    """Builds cases.go twice: with cgo and external linking (a dynamic
    executable that loads the shim) and with CGO_ENABLED=0 (static). (None,
    None), saying why, when Go is not there."""
    go = shutil.which("go")
    if not go:
        print("# skip go cases: go is not installed (apt-get install golang-go)")
        return None, None
    cache = env.get("GO_CACHE") or os.path.join(tmp, "go-cache")
    out = []
    for cgo, flags in (("1", ["-ldflags=-linkmode=external"]), ("0", [])):
        exe = os.path.join(tmp, "go-cases-cgo" + cgo)
        r = subprocess.run([go, "build"] + flags + ["-o", exe,
                                                    os.path.join(env["CASES_DIR"], "cases.go")],
                           # No user configuration, no $HOME needed (a
                           # package build may have none).
                           env=dict(os.environ, CGO_ENABLED=cgo, GOCACHE=cache, GOENV="off",
                                    GO111MODULE="off", GOPATH=os.path.join(tmp, "gopath")),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode:
            raise RuntimeError("go build cases.go (CGO_ENABLED=%s) failed: %s"
                               % (cgo, r.stdout.strip()))
        out.append(exe)
    return out[0], out[1]


def cases(env, go_cases=(None, None)):
    out = []
    for m in C_REL:
        out.append(("c:" + m, [env["PRELOAD_WAITS"], m], "rel", True))
    for m in C_RT:
        out.append(("c:" + m, [env["PRELOAD_WAITS"], m], "rt", True))
    if go_cases[0]:
        for m in GO:
            out.append(("go:" + m, [go_cases[0], m], "rel", True))
    if go_cases[1]:
        for m in GO:
            out.append(("go-static:" + m, [go_cases[1], m], "rel", True))
    for m in STATIC_REL:
        out.append(("static:" + m, [env["PRELOAD_STATIC"], m], "rel", True))
    for m in STATIC_RT:
        out.append(("static:" + m, [env["PRELOAD_STATIC"], m], "rt", True))
    out.append(("static:exec", [env["PRELOAD_STATIC"], "exec", "sleep", "5"], "rel", True))
    for m in RAW_REL:
        out.append(("raw:" + m, ["--trap", "--", env["PRELOAD_RAW"], m], "rel", True))
    for m in RAW_RT:
        out.append(("raw:" + m, ["--trap", "--", env["PRELOAD_RAW"], m], "rt", True))
    out.append(("vdso:vdso", [env["PRELOAD_RAW"], "vdso"], "rel", True))
    for m in PY:
        out.append(("py:" + m, [sys.executable, os.path.join(env["CASES_DIR"], "cases.py"), m],
                    "rel", True))
    node = shutil.which("node") or shutil.which("nodejs")
    if node:
        for m in NODE:
            out.append(("node:" + m, [node, os.path.join(env["CASES_DIR"], "cases.js"), m],
                        "rel", True))
    else:
        print("# skip node cases: node is not installed (apt-get install nodejs)")
    # bash's read -t waits with pselect; bash has no monotonic clock to show.
    out.append(("bash:read-t", ["bash", "-c",
                                'echo ready; if read -t 5 x; then r=no-timeout; '
                                'else r=timeout; fi; echo "done - - $r"'],
                "rel", False))
    # coreutils timeout: a POSIX timer armed with a relative value.
    out.append(("coreutils:timeout", ["bash", "-c",
                                      'echo ready; timeout 5 sleep 100; '
                                      'if [ $? = 124 ]; then r=timeout; else r=no-timeout; fi; '
                                      'echo "done - - $r"'],
                "rel", False))
    return out


class Proc:
    def __init__(self, name, argv, kind, has_mono, run, clock, environ):
        self.name, self.kind, self.has_mono = name, kind, has_mono
        self.ready = self.done = None
        self.m0 = self.m1 = None
        self.outcome = None
        self.lines = []
        # stdin: a pipe nobody writes (bash's read -t waits on it).
        # Options for shmclock-run come first, up to a "--" of their own.
        if "--" not in argv:
            argv = ["--"] + argv
        if environ.get("SHMCLOCK_TRAP") == "0":
            argv = ["--no-trap"] + [a for a in argv if a != "--trap"]
        self.p = subprocess.Popen([run, "-n", clock] + argv, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  env=environ, text=True, start_new_session=True)
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        for line in self.p.stdout:
            now = time.monotonic()
            line = line.strip()
            self.lines.append(line)
            if line == "ready" and self.ready is None:
                self.ready = now
            elif line.startswith("done "):
                f = line.split()
                if f[1] != "-":
                    self.m0, self.m1 = int(f[1]), int(f[2])
                self.outcome = f[3]
                self.done = now

    def cpu(self):
        try:
            with open("/proc/%d/stat" % self.p.pid) as f:
                st = f.read().rsplit(")", 1)[1].split()
            return (int(st[11]) + int(st[12])) / CLK_TCK
        except OSError:
            return None

    def kill(self):
        try:
            os.killpg(self.p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.p.wait()


class Daemon:
    def __init__(self, env, source, tmp):
        self.env = env
        self.name = "apps-%d-%s-%d" % (os.getpid(), source, int(time.monotonic() * 1000) % 100000)
        self.sock = os.path.join(tmp, self.name + ".sock")
        argv = [env["SHMCLOCKD"], "-n", self.name, "--socket", self.sock, "--source", source,
                "--scale", str(SCALE), "--paused", "--remove-on-exit", "--hz", "100"]
        if source == "simulation":
            argv += ["--start", "10000s", "--unix-zero", "2026-01-01T00:00:00Z"]
        self.p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True)
        for _ in range(200):
            if os.path.exists(self.sock) and self.ctl("status", check=False) == 0:
                return
            if self.p.poll() is not None:
                raise RuntimeError("shmclockd exited: " + self.p.stderr.read().strip())
            time.sleep(0.02)
        raise RuntimeError("shmclockd did not come up")

    def ctl(self, *args, check=True):
        r = subprocess.run([self.env["SHMCLOCKCTL"], "-n", self.name, "--socket", self.sock]
                           + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
        if check and r.returncode:
            raise RuntimeError("shmclockctl %s: %s" % (" ".join(args), r.stderr.strip()))
        return r.stdout if check else r.returncode

    def sim_ns(self):
        return int(json.loads(self.ctl("status", "--json"))["status"]["sim_ns"])

    def stop(self):
        self.p.terminate()
        try:
            self.p.wait(10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


def fmt_s(ns):
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    return "%s%d.%09d" % (sign, ns // NS, ns % NS)


# The mutation check: each half of issue 33 off in turn, and the cases
# that must fail then.
MUTANTS = [("trap off", {"SHMCLOCK_TRAP": "0"}, ("go", "raw")),
           ("vDSO left as it is", {"SHMCLOCK_VDSO": "0"}, ("go", "vdso", "go-static", "static"))]


class Late(Exception):
    """The pause or jump landed too late in the waits to test them."""


def run_group(env, source, scenario, selected, tmp, mutant=None):
    """Returns a list of failure lines; raises Late when the scenario's
    pause or jump came after the waits could have ended (a busy machine:
    at scale 10 the 5 s waits are half a real second)."""
    fails = []
    d = Daemon(env, source, tmp)
    environ = dict(os.environ, SHMCLOCK_QUIET="1")
    if mutant:
        environ.update(mutant)
    procs = []
    try:
        for name, argv, kind, has_mono in selected:
            procs.append(Proc(name, argv, kind, has_mono, env["SHMCLOCK_RUN"], d.name, environ))
        limit = time.monotonic() + 60
        while any(p.ready is None and p.p.poll() is None for p in procs):
            if time.monotonic() > limit:
                break
            time.sleep(0.02)
        for p in procs:
            if p.ready is None:
                fails.append("%s: never said ready: %s" % (p.name, " | ".join(p.lines[-3:])))
        sim0 = d.sim_ns()  # paused: where every wait began
        d.ctl("resume")
        t_run = time.monotonic()
        cpu_paused = {}
        if scenario != "plain":
            time.sleep(0.2)  # 2 simulated s
            if scenario == "pause":
                d.ctl("pause")
                at = d.sim_ns()  # paused there
            else:
                jump = -HOUR_NS if scenario == "back" else HOUR_NS
                d.ctl("set", fmt_s(d.sim_ns() + jump))
                at = d.sim_ns() - jump  # at or after where it landed
            # Landed 4 simulated s in or later (0.2 real s meant): a wait
            # may have ended before it, and then nothing is tested.
            if at - sim0 > WAIT_NS - NS:
                raise Late("the %s landed %.2f simulated s into the waits"
                           % (scenario, (at - sim0) / NS))
            if scenario == "pause":
                before = {p.name: p.cpu() for p in procs}
                time.sleep(2.0)
                for p in procs:
                    a, b = before[p.name], p.cpu()
                    if a is not None and b is not None:
                        cpu_paused[p.name] = b - a
                d.ctl("resume")
        # Everything due ends within a few real s; the realtime deadlines a
        # backward jump moved an hour out must still be waiting then.
        limit = time.monotonic() + 8
        while any(p.done is None for p in procs) and time.monotonic() < limit:
            if all(p.done is not None or (scenario == "back" and p.kind == "rt") for p in procs) \
                    and time.monotonic() > t_run + 3:
                break
            time.sleep(0.02)
        for p in procs:
            fails += check(p, scenario, t_run, cpu_paused.get(p.name))
    finally:
        for p in procs:
            p.kill()
        d.stop()
    return fails


def check(p, scenario, t_run, cpu_paused):
    out = []
    tag = p.name

    def bad(msg):
        out.append("%s: %s (output: %s)" % (tag, msg, " | ".join(p.lines[-4:])))

    if scenario == "back" and p.kind == "rt":
        if p.done is not None:
            bad("an absolute CLOCK_REALTIME deadline ended although the clock jumped an hour "
                "back before it (after %.2f real s)" % (p.done - t_run))
        return out
    if p.done is None:
        bad("did not end within 8 real s of the clock running")
        return out
    if p.outcome != "timeout":
        bad("ended as '%s', not as a timeout" % p.outcome)
    real = p.done - t_run
    el = p.m1 - p.m0 if p.m0 is not None else None
    if el is not None and el < 0:
        bad("its CLOCK_MONOTONIC went back %.3f s" % (-el / NS))
    if scenario == "fwd" and p.kind == "rt":
        # Ended by the jump, 2 simulated s in.
        if el is not None and not el < WAIT_NS:
            bad("the forward jump did not end its CLOCK_REALTIME deadline (%.3f s)" % (el / NS))
        return out
    if el is not None and not (WAIT_NS * 0.999 <= el < WAIT_NS + 60 * NS):
        bad("its monotonic clock shows %.3f s for a 5 s wait" % (el / NS))
    if el is None and scenario in ("back", "fwd") and real < 0.35:
        # No monotonic clock to show: ended at the jump (0.2 real s in)?
        bad("ended %.2f real s after the start, at the jump, not 5 simulated s later" % real)
    if real > (5.0 if scenario == "pause" else 3.5):
        bad("took %.2f real s: not simulated time at scale %d" % (real, SCALE))
    if scenario == "pause":
        if real < 2.0:
            bad("ended %.2f real s after the start: the 2 s pause did not hold it" % real)
        if cpu_paused is not None and cpu_paused > 0.3:
            bad("burned %.2f s of CPU during the 2 s pause" % cpu_paused)
    print("ok %-28s real %.2fs%s%s" % (
        tag, real, "" if el is None else " mono %.3fs" % (el / NS),
        "" if cpu_paused is None else " cpu-paused %.3fs" % cpu_paused))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", action="append", choices=["system", "simulation"])
    ap.add_argument("--scenario", action="append", choices=["plain", "pause", "back", "fwd"])
    ap.add_argument("--case", action="append",
                    help="only these cases (e.g. py:event; a prefix ending in ':' takes a kind)")
    ap.add_argument("--mutant", action="store_true",
                    help="the mutation check: the programs that skip libc, with the trap off "
                    "and the vDSO left as it is, must each fail (plain scenario unless told)")
    a = ap.parse_args()
    need = ["SHMCLOCKD", "SHMCLOCKCTL", "SHMCLOCK_RUN", "SHMCLOCK_PRELOAD", "PRELOAD_WAITS",
            "PRELOAD_RAW", "PRELOAD_STATIC", "CASES_DIR"]
    missing = [k for k in need if not os.environ.get(k)]
    if missing:
        print("preload_apps.py: set %s" % ", ".join(missing), file=sys.stderr)
        return 2
    env = {k: os.environ[k] for k in need}
    env["GO_CACHE"] = os.environ.get("GO_CACHE", "")
    failures = []
    tmp = tempfile.mkdtemp(prefix="shmclock-apps.")
    try:
        def chosen(name):
            if a.mutant and not a.case:
                return name.split(":")[0] in ("go", "raw", "vdso", "go-static", "static")
            return not a.case or any(name == c or (c.endswith(":") and name.startswith(c))
                                     for c in a.case)
        want_go = any(chosen("go:" + m) or chosen("go-static:" + m) for m in GO)
        selected = [c for c in cases(env, build_go(env, tmp) if want_go else (None, None))
                    if chosen(c[0])]
        if not selected:
            print("skip: no case selected")
            return 77
        scenarios = a.scenario or (["plain"] if a.mutant else ["plain", "pause", "back", "fwd"])
        for source in a.source or ["system", "simulation"]:
            for scenario in scenarios:
                if a.mutant:
                    for what, menv, kinds in MUTANTS:
                        sel = [c for c in selected if c[0].split(":")[0] in kinds]
                        print("# %s source, %s, %s" % (source, scenario, what), flush=True)
                        f = run_group(env, source, scenario, sel, tmp, menv)
                        # Every case must fail: one that passes without
                        # what it tests is not testing it.
                        for name, *_ in sel:
                            mine = [x for x in f if x.startswith(name + ":")]
                            if mine:
                                print("ok mutant (%s) %s fails: %s" % (what, name, mine[0][:150]))
                            else:
                                failures.append("[%s/%s] %s passed with the %s"
                                                % (source, scenario, name, what))
                                print("FAIL %s" % failures[-1], flush=True)
                    continue
                print("# %s source, %s" % (source, scenario), flush=True)
                for attempt in range(3):
                    try:
                        f = run_group(env, source, scenario, selected, tmp)
                        break
                    except Late as e:
                        print("# %s: again" % e, flush=True)
                else:
                    print("# %s source, %s: landed late 3 times (a busy machine): not asserted"
                          % (source, scenario), flush=True)
                    continue
                for line in f:
                    failures.append("[%s/%s] %s" % (source, scenario, line))
                    print("FAIL %s" % failures[-1], flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    # Again at the end: a log cut to its last lines (meson's) still shows them.
    for line in failures:
        print("FAIL %s" % line)
    print("%d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
