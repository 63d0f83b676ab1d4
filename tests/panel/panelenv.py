# SPDX-License-Identifier: MIT
"""A lockstep clock with participants and a shmclock-panel in front of it,
for the panel's tests: a unique clock name and runtime directory per run,
and everything stopped and removed on exit, whatever failed.

Environment (set by meson): SHMCLOCKD, SHMCLOCKCTL, SHMCLOCK_PANEL,
LS_PARTICIPANT.
"""
import http.client
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

D = os.environ["SHMCLOCKD"]
CTL = os.environ["SHMCLOCKCTL"]
PANEL = os.environ.get("SHMCLOCK_PANEL", "")
P = os.environ["LS_PARTICIPANT"]
MS = 1_000_000

failures = 0


def check(cond, what):
    global failures
    print(("ok - " if cond else "not ok - ") + what, flush=True)
    if not cond:
        failures += 1
    return cond


def finish():
    print("%d failure(s)" % failures)
    sys.exit(1 if failures else 0)


class Env:
    """with Env(participants=3) as e: e.port, e.name, e.token, e.ctl(...);
    panel=False: the clock and its participants only."""

    def __init__(self, participants=3, period_ms=10, work_us=0, max_scale="1",
                 control=True, tag="panel", panel=True):
        self.n = participants
        self.period = period_ms * MS
        self.work_us = work_us
        self.max_scale = max_scale
        self.control = control
        self.with_panel = panel
        self.name = "%s-%d-%d" % (tag, os.getpid(), random.randrange(1 << 30))
        self.procs = []
        self.panels = []
        self.tmp = tempfile.mkdtemp(prefix="shmclock-panel-test.")
        self.env = dict(os.environ, SHMCLOCK_RUNTIME_DIR=self.tmp)
        self.token = "t%032x" % random.randrange(1 << 128)
        self.token_file = os.path.join(self.tmp, "token")

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def start_daemon(self):
        d = subprocess.Popen([D, "-n", self.name, "--source", "fixed", "--lockstep", str(self.n),
                              "--max-scale", self.max_scale, "--remove-on-exit",
                              "--log-level", "warn"],
                             env=self.env, stdout=subprocess.DEVNULL)
        self.procs.append(d)
        self.daemon = d
        for _ in range(200):
            if self.ctl("status").returncode == 0:
                break
            time.sleep(0.05)
        else:
            raise RuntimeError("shmclockd did not start")

    def start(self):
        self.start_daemon()
        self.start_participants()
        fd = os.open(self.token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, (self.token + "\n").encode())
        os.close(fd)
        if self.with_panel:
            self.port = self.panel(self.control)

    def start_participants(self):
        self.who = ["p%d" % i for i in range(self.n)]
        self.participants = []
        for w in self.who:
            args = [P, self.name, w, str(self.period), str(10 ** 15)]
            if self.work_us:
                args += ["--work-us", str(self.work_us)]
            p = subprocess.Popen(args, env=self.env, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True)
            self.procs.append(p)
            self.participants.append(p)
            p.stdout.readline()  # "joined T"

    def restart_daemon(self):
        """A new shmclockd for the same clock (the old one killed) and new
        participants (the old ones may have left with it)."""
        for p in self.procs:
            if p not in self.panels and p.poll() is None:
                p.kill()
                p.wait()
        self.start_daemon()
        self.start_participants()

    def panel(self, control, extra=()):
        """Starts a panel; returns its port."""
        args = [PANEL, "-n", self.name, "--listen", "127.0.0.1:0"] + list(extra)
        if control:
            args += ["--control", "--token-file", self.token_file]
        p = subprocess.Popen(args, env=self.env, stdout=subprocess.PIPE, text=True)
        self.procs.append(p)
        self.panels.append(p)
        line = p.stdout.readline()
        if "http://127.0.0.1:" not in line:
            raise RuntimeError("shmclock-panel did not start: %r" % line)
        return int(line.split("http://127.0.0.1:")[1].split("/")[0])

    def ctl(self, *args):
        return subprocess.run([CTL, "-n", self.name] + list(args), env=self.env,
                              capture_output=True, text=True, timeout=30)

    def status(self):
        r = self.ctl("status", "--json")
        return json.loads(r.stdout)["status"] if r.returncode == 0 else None

    def get(self, path, port=None, headers=None, method="GET", body=None, timeout=10):
        c = http.client.HTTPConnection("127.0.0.1", port or self.port, timeout=timeout)
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return r.status, r.read().decode(errors="replace"), r
        finally:
            c.close()

    def control_req(self, cmd, arg=None, headers=None, port=None):
        body = {"clock": self.name, "cmd": cmd}
        if arg is not None:
            body["arg"] = arg
        h = {"Host": "127.0.0.1:%d" % (port or self.port), "Content-Type": "application/json",
             "X-Shmclock-Token": self.token}
        if headers is not None:
            h = dict(h, **headers)
            h = {k: v for k, v in h.items() if v is not None}
        return self.get("/api/control", port=port, headers=h, method="POST", body=json.dumps(body))

    def __exit__(self, *exc):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in reversed(self.procs):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for f in ("shmclock." + self.name, "shmclock-lockstep." + self.name):
            try:
                os.unlink("/dev/shm/" + f)
            except FileNotFoundError:
                pass
        shutil.rmtree(self.tmp, ignore_errors=True)
        return False


def sim_ns(env):
    st = env.status()
    return int(st["sim_ns"]) if st else None


def running(env, wait=1.0):
    """Whether the clock moves over @wait seconds of real time."""
    a = sim_ns(env)
    time.sleep(wait)
    b = sim_ns(env)
    return a is not None and b is not None and b > a
