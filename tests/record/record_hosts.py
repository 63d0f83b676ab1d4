#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Recording between hosts (issue 55): a leader and two followers of one
clock on loopback (Cyclone DDS bound to 127.0.0.1, a domain of the run's
own), each recording (--record):

- the leader's file has each follower joining, one stopped (SIGSTOP) past
  its lease lost and back, the one stopped (SIGTERM) leaving,
  and the control requests that changed the clock; the leader is then
  killed (SIGKILL): its file, cut, is read up to its last whole chunk;
- the follower's file has the leader it follows with its term, each change
  of the leader's function with cause "leader" and that term, at the
  leader's simulated times (within 1 us: the hosts' timebase), and the
  leader's loss with its reason (the
  silence) and the stale mark that followed it;
- both read by npm's @mcap/core (the follower's whole; the leader's cut).

Environment: SHMCLOCKD, SHMCLOCK_CAT (meson); SHMCLOCK_NPM_DIR.
"""
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "hosts"))
from hostsenv import check, ctl_at, remove, run, skip, start_daemon, wait_for  # noqa: E402
import hostsenv  # noqa: E402

SHMCLOCKD = os.environ["SHMCLOCKD"]
CAT = os.environ["SHMCLOCK_CAT"]
NPM = os.environ.get("SHMCLOCK_NPM_DIR", "/var/cache/shmclock-npm/node_modules")
NODE = shutil.which("node") or shutil.which("nodejs")
RUN = "%d-%d" % (os.getpid(), random.randrange(1 << 20))
DOMAIN = 150 + random.randrange(80)
URI = hostsenv.LOOPBACK_URI
rtdir = tempfile.mkdtemp(prefix="shmclock-record-hosts-")
ENV = dict(os.environ, CYCLONEDDS_URI=URI, SHMCLOCK_RUNTIME_DIR=rtdir)
procs = {}
clocks = []


def timeline(path):
    r = subprocess.run([CAT, "--mcap", path, "--json"], capture_output=True, text=True, timeout=60)
    if r.returncode:
        raise RuntimeError("shmclock-cat --mcap %s: %s" % (path, r.stderr.strip()))
    out = {"function": [], "hosts": [], "lockstep": []}
    for line in r.stdout.splitlines():
        o = json.loads(line)
        for k, v in o.items():
            out[k].append(v)
    return out, r.stderr


def validate(path, *extra):
    r = subprocess.run([NODE, os.path.join(HERE, "validate.mjs")] + list(extra) + [path],
                       capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, SHMCLOCK_NPM_DIR=NPM))
    return r.returncode, r.stdout.strip(), r.stderr.strip()


def sock(name):
    return os.path.join(rtdir, name + ".sock")


def status(name):
    return ctl_at(sock(name), "status")["status"]


def main():
    wire = "rec-wire-" + RUN
    lead, f1, f2 = "rec-lead-" + RUN, "rec-f1-" + RUN, "rec-f2-" + RUN
    clocks.extend([lead, f1, f2])
    files = {n: os.path.join(rtdir, n + ".mcap") for n in (lead, f1, f2)}
    procs["leader"] = start_daemon(SHMCLOCKD, rtdir, "leader", lead,
                                   {"TimeSource": "simulation", "Ros2": {"Domain": DOMAIN},
                                    "Distribute": {"Publish": True, "Clock": wire},
                                    "Record": files[lead]}, ENV)
    for tag, n in (("f1", f1), ("f2", f2)):
        procs[tag] = start_daemon(SHMCLOCKD, rtdir, tag, n,
                                  {"TimeSource": "leader", "Ros2": {"Domain": DOMAIN},
                                   "Distribute": {"Clock": wire, "StaleAfter": "2s"},
                                   "Record": files[n]}, ENV)

    def following():
        try:
            return all(not status(n).get("stale", True) and
                       status(n).get("distribute", {}).get("term", 0) >= 1 for n in (f1, f2))
        except (OSError, ValueError, KeyError):
            return False
    check(wait_for(following, 60, 0.2), "both followers follow the leader")
    term = status(lead)["distribute"]["term"]
    for cmd, kw in (("pause", {}), ("scale", {"value": "2"}), ("resume", {}),
                    ("set", {"time": "50s"})):
        r = ctl_at(sock(lead), cmd, **kw)
        check(r.get("ok") is True, "leader: %s (%s)" % (cmd, r.get("error", "ok")))
        time.sleep(0.2)
    check(wait_for(lambda: status(f1)["jump_epoch"] >= 1, 20, 0.1), "f1 took the leader's set")
    # f1 stopped past its lease, then on again: lost, and back.
    f1_id = [m["id"] for m in status(lead)["distribute"]["followers"]
             if m["id"].split("/")[1] == str(procs["f1"].pid)]
    procs["f1"].send_signal(signal.SIGSTOP)
    gone = lambda: any(h["event"] == "lost" for h in timeline(files[lead])[0]["hosts"])  # noqa
    check(wait_for(gone, 30, 0.2), "the leader records f1 lost once its lease ran out")
    procs["f1"].send_signal(signal.SIGCONT)
    back = lambda: sum(1 for h in timeline(files[lead])[0]["hosts"]  # noqa
                       if h["event"] == "joined") >= 3
    check(wait_for(back, 30, 0.2), "the leader records f1 back")
    check(wait_for(following, 30, 0.2), "f1 follows again")
    procs["f2"].send_signal(signal.SIGTERM)
    check(procs["f2"].wait(timeout=60) == 0, "f2 stopped cleanly")
    # The leader hears the leave: its status no longer counts f2.
    check(wait_for(lambda: len(status(lead)["distribute"].get("followers", [])) == 1, 20, 0.1),
          "the leader counts one follower after f2's leave")
    # The leave recorded and written before the leader is killed: its
    # recorder counts it (status), not a time.
    written = status(lead)["record"]["written"]
    check(wait_for(lambda: status(lead)["record"]["written"] > written - 1 and
                   status(lead)["record"]["chunks"] >= 1, 10, 0.05), "the leader's recorder runs")
    left = lambda: any(h["event"] == "left" for h in timeline(files[lead])[0]["hosts"])  # noqa
    check(wait_for(left, 20, 0.1), "the leader's file has f2's leave before the leader dies")
    procs["leader"].send_signal(signal.SIGKILL)
    procs["leader"].wait(timeout=60)
    check(wait_for(lambda: status(f1).get("stale", False), 30, 0.1),
          "f1 marks its clock stale once the leader is silent (StaleAfter 2s)")
    time.sleep(0.3)
    procs["f1"].send_signal(signal.SIGTERM)
    procs["f1"].wait(timeout=60)

    # The leader's file, cut by its SIGKILL.
    t, err = timeline(files[lead])
    ev = [(h["event"], h["host"]) for h in t["hosts"]]
    check(sum(1 for e, _ in ev if e == "joined") >= 3 and any(e == "left" for e, _ in ev),
          "leader's file: both followers joined, one left: %s" % ev)
    # Back: in its slot ("back after its lease ran out"), or, when it
    # said it left first (stale once it runs again), as a new member.
    me = f1_id[0] if f1_id else "?"
    lost_at = ev.index(("lost", me)) if ("lost", me) in ev else len(ev)
    check(lost_at < len(ev) and ("joined", me) in ev[lost_at:],
          "leader's file: f1 lost (its lease ran out), then joined again: %s"
          % [(h["event"], h["detail"]) for h in t["hosts"]])
    cmds = [f["cause"].get("command") for f in t["function"] if f["cause"]["kind"] == "control"]
    check(cmds == ["pause", "scale", "resume", "set"],
          "leader's file: the changes and their control requests: %s" % cmds)
    check("cut short" in err, "leader's file (SIGKILL): read up to its last whole chunk: %s"
          % err.strip())
    rc, out, e2 = validate(files[lead], "--cut")
    check(rc == 0 and json.loads(out)["messages"] == len(t["function"]) + len(t["hosts"]),
          "leader's file: @mcap/core reads the same whole messages: %s%s" % (out, e2))

    # The follower's file, closed.
    g, err = timeline(files[f1])
    hv = [(h["event"], h["host"], int(h["term"])) for h in g["hosts"]]
    check(any(e == "following" and tm == term for e, _, tm in hv),
          "f1's file: the leader it follows, term %d: %s" % (term, hv))
    # The silence, or, under load, the lease that runs out just after it.
    lost = [h for h in g["hosts"] if h["event"] == "leader-lost"]
    check(lost and ("silence" in lost[0]["detail"] or "lease" in lost[0]["detail"]),
          "f1's file: the leader's loss and its reason: %s" % [h["detail"] for h in lost])
    led = [f for f in g["function"] if f["cause"]["kind"] == "leader"]
    check(led and all(int(f["cause"]["term"]) == term for f in led),
          "f1's file: %d changes caused by the leader, term %d" % (len(led), term))
    lsims = [int(f["sim_ns"]) for f in t["function"] if f["cause"]["kind"] == "control"]
    fsims = [int(f["sim_ns"]) for f in led]
    # At the leader's simulated time, within a microsecond: a follower
    # translates the instant through its timebase (hosts.md: 0.036 us p99).
    check(all(any(abs(s - x) <= 1000 for x in fsims) for s in lsims),
          "f1's file: each of the leader's changes at the leader's simulated time (within 1 us): "
          "%s in %s" % (lsims, fsims))
    stale = [f for f in g["function"] if f["cause"]["kind"] == "stale"]
    check(stale and stale[-1]["stale"], "f1's file: the stale mark after the loss, its cause")
    rc, out, e2 = validate(files[f1])
    check(rc == 0, "f1's file: @mcap/core reads it whole: %s%s" % (out, e2))


def cleanup():
    remove(list(procs.values()), clocks, rtdir)


if __name__ == "__main__":
    if not NODE or not os.path.isdir(os.path.join(NPM, "@mcap", "core")):
        skip("no Node.js or no @mcap/core in %s (.ci/setup installs it)" % NPM)
    run(main, cleanup, procs, rtdir)
