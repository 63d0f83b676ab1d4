# SPDX-License-Identifier: MIT
"""What the between-hosts tests share (hosts_e2e.py, guard_e2e.py,
fleet_e2e.py, lockstep_hosts_e2e.py; record_e2e.py its control request):
TAP lines with a failure count, a skip, a control request (with descriptors
passed), a bounded wait, the removal of what a run made
(also on SIGTERM), and the run of a test's main."""
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

failures = 0

# Cyclone DDS on loopback only, unicast discovery: the one-host tests
# (panel_hosts.py, record_hosts.py) pass it as CYCLONEDDS_URI.
LOOPBACK_URI = ('<CycloneDDS><Domain id="any"><General><Interfaces>'
                '<NetworkInterface address="127.0.0.1"/></Interfaces>'
                '<AllowMulticast>false</AllowMulticast></General><Discovery>'
                '<ParticipantIndex>auto</ParticipantIndex><MaxAutoParticipantIndex>20'
                '</MaxAutoParticipantIndex><Peers><Peer address="127.0.0.1"/></Peers></Discovery>'
                '</Domain></CycloneDDS>')


def skip(why):
    """A capability missing: said, exit 77 (meson's skip)."""
    print("skip: " + why, flush=True)
    sys.exit(77)


def check(cond, what):
    global failures
    print(("ok - " if cond else "not ok - ") + what, flush=True)
    if not cond:
        failures += 1
    return cond


def request(sock, line, fds=()):
    """One request @line as it is on the control socket @sock, passing the
    descriptors @fds with it (SCM_RIGHTS); the reply ({} when none)."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(30)
    s.connect(sock)
    if fds:
        socket.send_fds(s, [line.encode()], list(fds))
    else:
        s.sendall(line.encode())
    r = b""
    while not r.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        r += chunk
    s.close()
    return json.loads(r) if r else {}


def ctl_at(sock, cmd, **kw):
    """One request on the control socket @sock; the reply."""
    return request(sock, json.dumps(dict(v=1, cmd=cmd, **kw)) + "\n")


def wait_for(pred, timeout, step=0.01):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step)
    return pred()


@contextlib.contextmanager
def starved(p, stopped=0.04, ran=0.01):
    """@p starved while the block runs: SIGSTOPped @stopped s of every
    @stopped + @ran (a host whose daemon gets a slice of a core), continued
    at the end."""
    stop = threading.Event()

    def starve():
        while not stop.is_set():
            p.send_signal(signal.SIGSTOP)
            time.sleep(stopped)
            p.send_signal(signal.SIGCONT)
            time.sleep(ran)

    t = threading.Thread(target=starve)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join()
        p.send_signal(signal.SIGCONT)


def remove(procs, clocks, rtdir):
    """Kills what still runs of @procs, removes the segments of @clocks (and
    their participant files) and
    the run's directory (kept with HOSTS_KEEP=1: the daemons' logs, for a
    failure's evidence; with HOSTS_LOG_LEVEL=debug they say every step)."""
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    for c in clocks:
        # A lockstep clock's participant file too: a daemon killed (the
        # takeover phases) leaves it, and lockstep-hosts left three a run.
        for path in ("/dev/shm/shmclock." + c, "/dev/shm/shmclock-lockstep." + c):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
    if os.environ.get("HOSTS_KEEP") == "1":
        print("# kept: %s" % rtdir, flush=True)
        return
    shutil.rmtree(rtdir, ignore_errors=True)


def on_signals(cleanup):
    """SIGTERM and SIGINT (meson's timeout, ^C) run @cleanup, then exit 1."""
    def handler(sig, frame):
        cleanup()
        sys.exit(1)
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def start_daemon(shmclockd, rtdir, tag, name, cfg, env, argv_prefix=()):
    """shmclockd with config @cfg (plus Name) under @argv_prefix; waits for
    its control socket. The process."""
    cfg = dict(cfg, Name=name)
    path = os.path.join(rtdir, tag + ".json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    log = open(os.path.join(rtdir, tag + ".log"), "w")
    # HOSTS_LOG_LEVEL=debug: every decision in the logs, to diagnose a run.
    level = ["--log-level", os.environ["HOSTS_LOG_LEVEL"]] if os.environ.get("HOSTS_LOG_LEVEL") else []
    p = subprocess.Popen(list(argv_prefix) + [shmclockd, "-c", path] + level, stdout=log,
                         stderr=subprocess.STDOUT, env=env)
    sock = os.path.join(rtdir, name + ".sock")
    deadline = time.monotonic() + 20
    while not os.path.exists(sock):
        if p.poll() is not None or time.monotonic() > deadline:
            if p.poll() is None:  # not left behind: the caller never saw it
                p.kill()
                p.wait()
            raise RuntimeError("%s did not start:\n%s" % (tag, open(log.name).read()))
        time.sleep(0.02)
    return p


def run(main, cleanup, procs, rtdir):
    """main(), a broken setup counted as a failure with its reason and the
    daemons' last log lines (procs: tag -> process, each logging to
    rtdir/TAG.log), then cleanup(); exits 1 on any failure, else 0."""
    try:
        main()
    except Exception as e:
        check(False, "the run completed: %r" % e)
        for tag in procs:
            path = os.path.join(rtdir, tag + ".log")
            if os.path.exists(path):
                print("# --- %s.log\n%s" % (tag, open(path).read()[-2000:]))
    finally:
        cleanup()
    sys.exit(1 if failures else 0)
