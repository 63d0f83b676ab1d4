#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Lockstep between hosts (issue 53), end to end: a leader shmclockd in
lockstep (Distribute.Publish) and follower hosts (TimeSource leader with
Lockstep) in network namespaces joined by a switch (netenv.py), with
ls-participant processes joined to their own host's clock. The
participants exchange messages over Unix sockets in one directory (the
namespaces share the file system), so the ordering guarantee is checked
across hosts from their logs: everything a participant sent before
granting T has arrived before any participant anywhere steps at T.

- determinism: participants with periods 1, 10 and 33 ms on 2 hosts, run
  twice: both logs are the one the guarantee predicts (byte for byte);
  then on 3 hosts with 10 % loss on every link;
- a partition shorter than a host's lease: the run goes on after it,
  the logs still as predicted;
- a remote participant SIGKILLed: OnDeath evict (the clock goes on, the
  leader names it with its host), OnDeath abort (the leader exits 86
  naming it); SIGSTOPped: its host's EvictAfter evicts it, the run goes on;
- a follower daemon SIGKILLed: the leader loses its host at its lease and
  goes on; SIGSTOPped past its lease: the leader goes on without it, and
  back, the host hears it is no longer counted, evicts its participants
  (their advance fails) and is counted again as a new host;
- the leader SIGKILLed mid-run and another started: it listens a lease
  (a takeover), goes on from the hosts' clocks, and the run's log is the
  one predicted, as if nothing had happened;
- a follower host cut off at its start, its participant joined there, the
  leader's run ahead (OnDeath abort): the participant is evicted once the
  host hears the leader, the host counted anew at once (not a death), and
  the next participant there steps with the leader;
- a follower host without Lockstep in its config, started first: a
  participant is refused until it hears the leader, then it is a host
  of the lockstep leader and the log is the one predicted; a follower
  host in lockstep of a leader without it says what to check after 5 s.

Environment: SHMCLOCKD, SHMCLOCKCTL, LS_PARTICIPANT, SHMCLOCK_SENSOR (set by
meson). With LSH_ONLY=csharp (and MONO, LS_PARTICIPANT_CS): C# participants
on both hosts, the log predicted, alone (the csharp suite's test).
Needs root (network namespaces): exit 77 with the reason otherwise.
"""
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from hostsenv import check, ctl_at, wait_for  # noqa: E402
import hostsenv  # noqa: E402
import netenv  # noqa: E402
from lockstep_log import expected_log, first_difference  # noqa: E402
import status_schema  # noqa: E402

SHMCLOCKD = os.environ["SHMCLOCKD"]
P = os.environ["LS_PARTICIPANT"]
CROWD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ls_crowd.py")
SENSOR = os.environ["SHMCLOCK_SENSOR"]
CTL = os.environ["SHMCLOCKCTL"]
MS = 1_000_000
END = 1000 * MS
RUN = "%d-%d" % (os.getpid(), random.randrange(1 << 20))


netenv.need_root()

net = netenv.Net(RUN, ("L", "F1", "F2"))
rtdir = tempfile.mkdtemp(prefix="shmclock-lshosts-")
procs = {}
clocks = []
parts = []
serial = [0]


def cleanup():
    net.teardown(list(procs.values()) + parts, clocks, rtdir)


hostsenv.on_signals(cleanup)


def start(role, tag, cfg):
    """shmclockd in namespace @role with config @cfg; its clock's name."""
    name = "lsh-%s-%s" % (RUN, tag)
    clocks.append(name)
    procs[tag] = net.daemon(SHMCLOCKD, rtdir, role, tag, name, cfg)
    return name


stopped = {}


def stop(tag):
    """SIGTERM (unless it ended), its exit status kept: one stopped so ends
    with 0, and under a sanitizer with no report (main() checks)."""
    p = procs.pop(tag)
    ended = p.poll() is not None
    if not ended:
        p.terminate()
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    if not ended:
        stopped[tag] = p.returncode
    return p.returncode


def status(name):
    return ctl_at(os.path.join(rtdir, name + ".sock"), "status")["status"]


def daemon_log(tag):
    with open(os.path.join(rtdir, tag + ".log"), errors="replace") as f:
        return f.read()


def wire():
    serial[0] += 1
    return "lsh-%s-w%d" % (RUN, serial[0])


def leader_cfg(w, n, on_death="evict"):
    return {"TimeSource": "fixed", "Lockstep": {"Participants": n, "OnDeath": on_death},
            "Distribute": {"Publish": True, "Clock": w}}


def follower_cfg(w, n, **lockstep):
    return {"TimeSource": "leader", "Lockstep": dict(lockstep, Participants=n),
            "Distribute": {"Clock": w}}


def participant(role, clock, who, period, end, peers=None, msgdir=None, work_us=0, cs=False,
                py=False):
    """ls-participant in namespace @role, joined to @clock (that host's),
    working @work_us of real time at each step; with @cs its C# twin
    (Shmclock.Lockstep, under Mono), with @py its Python one
    (shmclock.Lockstep)."""
    prog = ([os.environ["MONO"], os.environ["LS_PARTICIPANT_CS"]] if cs else
            [sys.executable, os.environ["LS_PARTICIPANT_PY"]] if py else [P])
    argv = ["ip", "netns", "exec", net.ns[role]] + prog + [clock, who, str(period), str(end)]
    if work_us:
        argv += ["--work-us", str(work_us)]
    if peers:
        argv += ["--dir", msgdir, "--peers", ",".join(peers),
                 "--log", os.path.join(msgdir, who + ".log")]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    parts.append(p)
    return p


def wait_all(ps, timeout):
    """Each participant's exit status, stderr and stdout (None: still
    running at @timeout, then killed)."""
    deadline = time.monotonic() + timeout
    out = []
    for p in ps:
        try:
            o, err = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
            out.append((p.returncode, err.strip(), o))
        except subprocess.TimeoutExpired:
            p.kill()
            o, err = p.communicate()
            out.append((None, err.strip(), o))
    return out


def scenario(layout, end, impaired=None, partition=None, work_us=0, auto=False):
    """One run: @layout maps each host to its participants (who, period,
    and "cs" for the C# one); the leader is host L. With @auto, the
    follower hosts have no Lockstep in their config: started first, they
    become hosts of the leader once they hear it. Their logs (None on a
    failure, with why)."""
    w = wire()
    periods = [x[:2] for role in layout for x in layout[role]]
    peers = [x[0] for x in periods]
    msgdir = tempfile.mkdtemp(dir=rtdir)
    tags = ["%s-%d" % (role, serial[0]) for role in layout]
    names = {}
    for role, tag in zip(layout, tags):
        if role != "L":
            names[role] = start(role, tag, {"TimeSource": "leader", "Distribute": {"Clock": w}}
                                if auto else follower_cfg(w, len(layout[role])))
    if auto:
        # Before it heard its leader a follower is not in lockstep: a
        # participant is told so, at once.
        # ... the leader started once it is refused, whatever the pace.
        res = wait_all([participant("F1", names["F1"], "early", MS, 10 * MS)], 20)[0]
        names["L"] = start("L", tags[0], leader_cfg(w, len(periods)))
        check(res[0] not in (0, None) and "not in lockstep mode" in res[1],
              "before it heard its leader, a follower without Lockstep refuses a participant, "
              "saying why (exit %s: %s)" % (res[0], res[1][-120:]))
        became = wait_for(lambda: all("lockstep" in status(names[r]) for r in layout if r != "L"),
                          20, 0.05)
        check(became and all("runs lockstep: this host is one of its hosts" in daemon_log(t)
                             for r, t in zip(layout, tags) if r != "L"),
              "followers without Lockstep in their config become hosts of the lockstep leader "
              "once they hear it (status and log)")
    else:
        names["L"] = start("L", tags[0], leader_cfg(w, len(periods)))
    how = net.impair(True, **impaired) if impaired else None
    try:
        t0 = time.monotonic()
        ps = [participant(role, names[role], x[0], x[1], end, peers, msgdir, work_us,
                          x[2:] == ("cs",), x[2:] == ("py",))
              for role in layout for x in layout[role]]
        if partition:
            # F1 cut off (its port on the switch down) for a while, once
            # the run is going (a step takes work_us at least).
            time.sleep(0.1)
            net.link("F1", False)
            time.sleep(partition)
            net.link("F1", True)
        res = wait_all(ps, 120)
        took = time.monotonic() - t0
        st = status(names["L"])["lockstep"]
    finally:
        if impaired:
            net.impair(False)
        for tag in tags:
            stop(tag)
    bad = [(who, r[:2]) for (who, _), r in zip(periods, res) if r[0] != 0]
    if bad:
        return None, "participants failed: %s" % bad, took, how, st
    log = "".join(open(os.path.join(msgdir, who + ".log")).read() for who, _ in periods)
    return log, None, took, how, st


def test_determinism():
    layout = {"L": [("a", 1 * MS)], "F1": [("b", 10 * MS), ("c", 33 * MS)]}
    want = expected_log([x for r in layout for x in layout[r]], END)
    logs = []
    for i in range(2):
        log, why, took, _, st = scenario(layout, END)
        if not check(log is not None, "2 hosts, run %d: every participant reached 1 s (%.1f s%s)"
                     % (i + 1, took, "; " + why if why else "")):
            return
        logs.append(log)
        hosts = st.get("hosts", [])
        print("# run %d: %d advances in %.2f s; the follower host's round trip %s us"
              % (i + 1, st["advances"], took, hosts[0].get("rtt_us") if hosts else "?"), flush=True)
    check(logs[0] == logs[1], "two runs on 2 hosts give byte-identical logs (%d bytes)" % len(logs[0]))
    ok = check(logs[0] == want, "and the log is the one the guarantee predicts, across hosts "
               "(every message sent before T seen at T on every host)")
    if not ok:
        print("# " + first_difference(logs[0], want))


def test_auto():
    """The determinism scenario with a follower host that has no Lockstep
    in its config (TimeSource leader alone), started before the leader:
    it becomes a host of the lockstep leader once it hears it, and the
    log is the one the guarantee predicts. One of its participants is a
    Python program (shmclock.Lockstep)."""
    layout = {"L": [("a", 1 * MS)], "F1": [("b", 10 * MS, "py"), ("c", 33 * MS)]}
    want = expected_log([x[:2] for r in layout for x in layout[r]], END)
    log, why, took, _, st = scenario(layout, END, auto=True)
    ok = check(log == want, "a follower host without Lockstep in its config, a Python "
               "participant on it: the log the guarantee predicts (%.1f s%s)"
               % (took, "; " + why if why else ""))
    if not ok and log:
        print("# " + first_difference(log, want))


def test_sensor():
    """shmclock-sensor --lockstep, unchanged, on a follower host: 50 frames at
    100 Hz, each measured and published in lockstep with a participant on
    the leader's host (1 ms period)."""
    w = wire()
    n = serial[0]
    tags = ["L-%d" % n, "F1-%d" % n]
    names = {"L": start("L", tags[0], leader_cfg(w, 2)), "F1": start("F1", tags[1],
                                                                     follower_cfg(w, 1))}
    try:
        a = participant("L", names["L"], "a", 1 * MS, 600 * MS)
        cam = subprocess.Popen(["ip", "netns", "exec", net.ns["F1"], SENSOR, "-n", names["F1"],
                                "--rate", "100", "--frames", "50", "--lockstep=cam"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        parts.append(cam)
        res = wait_all([a, cam], 60)
    finally:
        for tag in tags:
            stop(tag)
    frames = [ln for ln in res[1][2].splitlines() if ln.startswith("frame ")]
    check(res[0][0] == 0 and res[1][0] == 0 and len(frames) == 50 and
          all(ln.endswith("missed 0") for ln in frames),
          "shmclock-sensor --lockstep on a follower host: 50 frames, none missed, and the "
          "leader's participant reached its end (exits %s, %s; %d frames)"
          % (res[0][0], res[1][0], len(frames)))


def test_trace():
    """shmclockctl trace on the leader's host draws the participant on the
    follower host too (from the daemon's roster, sampled): a track named
    with its host, holding the clock most of the run (it works 20 ms a
    step, the leader's participant none)."""
    w = wire()
    n = serial[0]
    tags = ["L-%d" % n, "F1-%d" % n]
    names = {"L": start("L", tags[0], leader_cfg(w, 2)), "F1": start("F1", tags[1],
                                                                     follower_cfg(w, 1))}
    out = os.path.join(rtdir, "trace-%d.json" % n)
    try:
        a = participant("L", names["L"], "a", 10 * MS, 4000 * MS)
        slow = participant("F1", names["F1"], "slow", 10 * MS, 4000 * MS, work_us=20000)
        time.sleep(0.5)
        tr = subprocess.run(["ip", "netns", "exec", net.ns["L"], CTL, "-n", names["L"], "--socket",
                             os.path.join(rtdir, names["L"] + ".sock"), "trace", "--seconds", "1.5",
                             out], capture_output=True, text=True, timeout=60)
        for p in (a, slow):
            p.kill()
        wait_all([a, slow], 10)
    finally:
        for tag in tags:
            stop(tag)
    doc = json.load(open(out)) if tr.returncode == 0 else {}
    evs = doc.get("traceEvents", [])
    tids = {e["tid"]: e["args"]["name"] for e in evs if e.get("name") == "thread_name"}
    remote = [t for t, nm in tids.items() if nm.startswith("slow on ") and "(remote" in nm]
    held = sum(e["dur"] for e in evs if e.get("ph") == "X" and e.get("tid") in remote and
               e["name"] == "holding") / 1e3
    check(tr.returncode == 0 and len(remote) == 1 and held > 500 and
          doc.get("otherData", {}).get("remote_participants") == 1,
          "shmclockctl trace on the leader's host: the follower host's participant has a track "
          "of its own (%s), holding the clock %.0f ms of 1500 (exit %d%s)"
          % ([tids[t] for t in remote], held, tr.returncode,
             ": " + tr.stderr.strip() if tr.returncode else ""))


def test_csharp():
    """A C# participant (Shmclock.Lockstep) on a follower host beside a C
    one, and one on the leader's: the log the guarantee predicts."""
    layout = {"L": [("a", 1 * MS, "cs")], "F1": [("b", 10 * MS), ("c", 33 * MS, "cs")]}
    want = expected_log([x[:2] for r in layout for x in layout[r]], END)
    log, why, took, _, _ = scenario(layout, END)
    ok = check(log == want, "C# participants on both hosts beside a C one: the log the guarantee "
               "predicts (%.1f s%s)" % (took, "; " + why if why else ""))
    if not ok and log:
        print("# " + first_difference(log, want))


def test_lossy():
    layout = {"L": [("a", 1 * MS)], "F1": [("b", 10 * MS)], "F2": [("c", 33 * MS)]}
    end = 200 * MS
    want = expected_log([x for r in layout for x in layout[r]], end)
    log, why, took, how, st = scenario(layout, end, impaired=dict(loss=0.10, delay_ms=1.0,
                                                                  jitter_ms=0.5))
    if not check(log is not None, "3 hosts, 10 %% loss and 1 ms delay on every link (%s): every "
                 "participant reached 0.2 s (%.1f s%s)" % (how, took, "; " + why if why else "")):
        return
    ok = check(log == want, "and the log is the one the guarantee predicts (%d advances)"
               % st["advances"])
    if not ok:
        print("# " + first_difference(log, want))


def test_partition():
    layout = {"L": [("a", 1 * MS)], "F1": [("b", 10 * MS)]}
    want = expected_log([x for r in layout for x in layout[r]], END)
    log, why, took, _, st = scenario(layout, END, partition=0.4, work_us=1000)
    if not check(log is not None, "a follower host cut off for 0.4 s (less than its lease) in "
                 "a run: the run completes (%.1f s%s)" % (took, "; " + why if why else "")):
        return
    ok = check(log == want and st["deaths"] == 0,
               "with the log the guarantee predicts and no host lost (deaths %d)" % st["deaths"])
    if not ok:
        print("# " + first_difference(log, want))


def run_with_death(on_death, kill, **host_lockstep):
    """L: a (1 ms); F1: b and c (10 ms). @kill(names, ps) after 0.3 s. The
    leader's exit status (None: running), its last status, its log and the
    participants' results."""
    w = wire()
    n = serial[0]
    names = {"L": start("L", "L-%d" % n, leader_cfg(w, 3, on_death)),
             "F1": start("F1", "F1-%d" % n, follower_cfg(w, 2, **host_lockstep))}
    end = 3000 * MS
    # 1 ms of work a step: the run lasts 3 s at least.
    ps = [participant("L", names["L"], "a", 1 * MS, end, work_us=1000),
          participant("F1", names["F1"], "b", 10 * MS, end, work_us=1000),
          participant("F1", names["F1"], "c", 10 * MS, end, work_us=1000)]
    for p in ps:
        p.stdout.readline()  # joined
    time.sleep(0.3)
    # Each host's status mid-run, against the table (status_fields.h): the
    # leader's hosts and remote participants, the follower host's leader.
    table = status_schema.load(SHMCLOCKD)

    def remote_of(role):
        return sorted(m["name"] for m in status(names[role])["lockstep"]["members"] if "host" in m)
    # The follower host hears of the leader's participant with its
    # leader's next list (a heartbeat).
    wait_for(lambda: remote_of("F1") == ["a"], 5, 0.05)
    full = {role: status(names[role]) for role in names}
    schema = ["%s: %s" % (r, p) for r in full for p in status_schema.check(full[r], table)]
    remote = {r: sorted(m["name"] for m in full[r]["lockstep"]["members"] if "host" in m)
              for r in full}
    kill(names, ps, n)
    leader = procs["L-%d" % n]
    rc = None
    st = None
    try:
        if on_death == "abort":
            try:
                rc = leader.wait(20)
            except subprocess.TimeoutExpired:
                rc = None
        else:
            wait_for(lambda: ps[0].poll() is not None, 60, 0.05)
            st = status(names["L"])["lockstep"]
    finally:
        res = wait_all(ps, 1 if on_death == "abort" else 30)
        for tag in ("L-%d" % n, "F1-%d" % n):
            if tag in procs:
                stop(tag)
    return rc, st, daemon_log("L-%d" % n), res, (schema, remote)


def test_remote_participant_death():
    def kill_c(names, ps, n):
        ps[2].send_signal(signal.SIGKILL)

    _, st, log, res, (schema, remote) = run_with_death("evict", kill_c)
    check(not schema and remote == {"L": ["b", "c"], "F1": ["a"]},
          "mid-run, the leader lists the remote participants b and c with their host, the "
          "follower host the leader's a, and both hosts' status have the table's rows and "
          "nothing else (%s; %s)" % (remote, "; ".join(schema) or "they agree"))
    check(res[0][0] == 0 and res[1][0] == 0 and st is not None and st["deaths"] >= 1 and
          "'c'" in st.get("last_death", "") and "on host" in st.get("last_death", ""),
          "OnDeath evict: a remote participant SIGKILLed, the run goes on to its end on both "
          "hosts, and the leader names it with its host (%s)" % (st or {}).get("last_death"))
    rc, _, log, res, _ = run_with_death("abort", kill_c)
    m = re.search(r"OnDeath abort.*", log)
    check(rc == 86 and "'c'" in log and m is not None,
          "OnDeath abort: the leader exits 86 naming the remote participant (status %s: %s)"
          % (rc, m.group(0)[:160] if m else "no abort logged"))


def test_remote_participant_stopped():
    def stop_c(names, ps, n):
        ps[2].send_signal(signal.SIGSTOP)
        wait_for(lambda: "OnStall evict" in daemon_log("F1-%d" % n), 20, 0.05)
        ps[2].send_signal(signal.SIGCONT)

    _, st, log, res, _ = run_with_death("evict", stop_c, EvictAfter="1s", OnStall="evict")
    f1 = [ln for ln in daemon_log("F1-%d" % serial[0]).splitlines() if "OnStall evict" in ln]
    check(res[0][0] == 0 and res[1][0] == 0 and f1 and "'c'" in f1[0] and res[2][0] == 1 and
          "cancel" in res[2][1],
          "a remote participant SIGSTOPped, its host with EvictAfter 1s and OnStall evict: "
          "its host evicts it (continued, its advance fails), and the run goes on to its end on "
          "both hosts (%s)" % (f1[0][:120] if f1 else "no eviction logged"))


def test_follower_host_killed():
    def kill_f1(names, ps, n):
        procs["F1-%d" % n].send_signal(signal.SIGKILL)
        # Its participants wait on a clock nobody moves any more.
        for p in ps[1:]:
            p.kill()

    _, st, log, res, _ = run_with_death("evict", kill_f1)
    m = re.search(r"host \S+ lost \(silent for its lease\)", log)
    check(res[0][0] == 0 and m is not None and st is not None and not st.get("hosts"),
          "a follower daemon SIGKILLed: the leader loses its host at its lease (%s) and its own "
          "participant runs on to the end (exit %s)" % (m.group(0)[:60] if m else "not lost",
                                                         res[0][0]))


def test_follower_host_stopped():
    out = {}

    def stop_f1(names, ps, n):
        f = procs["F1-%d" % n]
        before = len(daemon_log("L-%d" % n))
        f.send_signal(signal.SIGSTOP)
        out["lost"] = wait_for(lambda: "lost (silent" in daemon_log("L-%d" % n)[before:], 20, 0.05)
        f.send_signal(signal.SIGCONT)
        out["evicted"] = wait_for(lambda: "no longer counts this host" in daemon_log("F1-%d" % n),
                                  10, 0.05)
        out["again"] = wait_for(lambda: any(h["host"].endswith("#1") for h in
                                            status(names["L"])["lockstep"].get("hosts", [])), 10, 0.05)
        out["fst"] = status(names["F1"])["lockstep"]

    _, st, log, res, _ = run_with_death("evict", stop_f1)
    canceled = [r for r in res[1:] if r[0] == 1 and "cancel" in r[1].lower()]
    check(out.get("lost") and out.get("evicted") and len(canceled) == 2,
          "a follower daemon SIGSTOPped past its lease: the leader goes on without its host; "
          "back, the host hears it and evicts its participants, whose advance fails (%s)"
          % ([r[1][:80] for r in res[1:]]))
    check(out.get("again") and out.get("fst", {}).get("host_evictions") == 1 and res[0][0] == 0,
          "and it is counted again as a new host (#1), while the leader's own participant ran "
          "to the end")


def test_takeover(cut=1.0):
    """The leader SIGKILLed mid-run, another started on its host: the
    follower hosts hold (stale) meanwhile; the successor listens a lease,
    goes on from where their clocks are, and the run ends with the log the
    guarantee predicts, as if nothing had happened. F2's words to the
    leader are cut for the successor's first @cut s, and it is told 1
    participant: a successor that decided on the hosts it heard so far
    (grants.pml's KNOWN_ONLY) would pass c's grant on b's alone. Cut for
    longer than a lease, F2 is not counted: the successor goes on without
    it, and F2, hearing a time past its promise, evicts c (its advance
    fails) rather than let c step on as if it had been waited for."""
    w = wire()
    n = serial[0]
    end = 2000 * MS
    periods = [("b", 10 * MS), ("c", 33 * MS)]
    msgdir = tempfile.mkdtemp(dir=rtdir)
    tags = ["L-%d" % n, "F1-%d" % n, "F2-%d" % n, "L2-%d" % n]
    names = {"F1": start("F1", tags[1], follower_cfg(w, 1)),
             "F2": start("F2", tags[2], follower_cfg(w, 1))}
    start("L", tags[0], leader_cfg(w, 2))
    try:
        # 5 ms of work a step: b's 200 steps last a second at least.
        ps = [participant(role, names[role], who, period, end, ["b", "c"], msgdir, 5000)
              for role, (who, period) in zip(("F1", "F2"), periods)]
        time.sleep(0.5)
        procs[tags[0]].send_signal(signal.SIGKILL)
        stale = wait_for(lambda: status(names["F1"])["stale"], 10, 0.05)
        at = status(names["F1"])["sim_ns"]
        hub = net.start_hub(0.0, 0.0, 0.0)
        hub.stdin.write("drop rF2 rL\n")
        hub.stdin.flush()
        hub.stdout.readline()
        start("L", tags[3], leader_cfg(w, 1))
        time.sleep(cut)
        hub.stdin.write("pass\n")
        hub.stdin.flush()
        hub.stdout.readline()
        res = wait_all(ps, 120)
    finally:
        net.impair(False)
        for tag in tags:
            if tag in procs:
                stop(tag)
    log2 = daemon_log(tags[3])
    took_over = re.findall(r"taking over.*", log2)[:1]
    if cut > 3.5:
        f2 = daemon_log(tags[2])
        check(stale and res[0][0] == 0 and res[1][0] == 1 and "cancel" in res[1][1] and
              "passed this host's promise" in f2,
              "the leader SIGKILLed, one host cut off from its successor for %.1f s (more than "
              "a lease): the run goes on without it (b exits %s), and that host evicts its "
              "participant on hearing a time past its promise (c: %s)"
              % (cut, res[0][0], res[1][1][:60]))
        return
    bad = [(who, r[:2]) for (who, _), r in zip(periods, res) if r[0] != 0]
    check(stale and not bad and took_over,
          "the leader SIGKILLed mid-run (the hosts stale, at %s ns): a new leader takes over and "
          "the run reaches its end (%s)" % (at, bad or took_over))
    if not bad:
        log = "".join(open(os.path.join(msgdir, who + ".log")).read() for who, _ in periods)
        want = expected_log(periods, end)
        ok = check(log == want, "with the log the guarantee predicts, as if nothing had happened")
        if not ok:
            print("# " + first_difference(log, want))


def test_switch_crowd():
    """200 threads of one process hammer a follower without Lockstep with
    joins while it switches to a lockstep host: refused (not in lockstep
    mode) until it hears the leader, then 64 join (every slot), the rest
    are told the slots are full (or join once those left), and those that
    joined step with the leader's participant to the end; nothing else
    happens to any of them."""
    w = wire()
    host = start("F1", "crowd-F1", {"TimeSource": "leader", "Distribute": {"Clock": w}})
    crowd = subprocess.Popen(["ip", "netns", "exec", net.ns["F1"], sys.executable, CROWD, host,
                              "200", str(10 * MS), str(200 * MS)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    parts.append(crowd)
    # the crowd refused before the leader exists (its first line)
    early = crowd.stdout.readline().strip() == "refused"
    lead = start("L", "crowd-L", leader_cfg(w, 65))  # the run starts with all
    full = wait_for(lambda: len(status(host).get("lockstep", {}).get("members", [])) == 64,
                    60, 0.05)
    a = participant("L", lead, "a", 10 * MS, 200 * MS)
    ra = wait_all([a], 60)[0]
    rc = wait_all([crowd], 60)[0]
    try:
        got = json.loads(rc[2].strip().splitlines()[-1])
    except (ValueError, IndexError):
        got = None
    # (a thread whose next try came after the first 64 left joins then,
    # past the end: it ends at once)
    check(early and full and got is not None and got["refused"] > 0 and got["joined"] >= 64 and got["ended"] == got["joined"]
          and got["joined"] + got["full"] == 200 and not got["other"] and ra[0] == 0 and
          procs["crowd-F1"].poll() is None,
          "200 threads joining a follower without Lockstep as it switches: refused before "
          "it hears the leader, then all 64 slots taken, those that joined step to the end with the leader's participant, the others "
          "are told the slots are full, nothing else (%s; a: %s %s; full %s, host %s)"
          % (got or rc[1][-300:], ra[0], ra[1][-100:], full, procs["crowd-F1"].poll()))
    stop("crowd-F1")
    stop("crowd-L")


def test_takeover_cut():
    test_takeover(cut=4.5)


def test_joined_behind():
    """A follower host cut off at its start, its participant 'b' joined
    there (at 0) while the leader's run is far ahead, OnDeath abort: once
    the link is back the leader's time passes b's promise, so b is
    evicted there (its advance fails, the host's log says why), and the
    leader counts that host anew at once, not a death: before, it waited
    the old host's lease and then aborted the run for b. A participant
    joining there after runs with the leader."""
    w = wire()
    lead = start("L", "behind-L", leader_cfg(w, 1, on_death="abort"))
    a = participant("L", lead, "a", MS, 600000 * MS, work_us=200)
    net.link("F1", False)
    try:
        host = start("F1", "behind-F1", follower_cfg(w, 1))
        b = participant("F1", host, "b", 10 * MS, 600000 * MS)
        joined = wait_for(lambda: "'b' (pid" in daemon_log("behind-F1"), 20, 0.05)
        # the leader's run well ahead of b's first grant
        ahead = wait_for(lambda: int(status(lead)["sim_ns"]) > 200 * MS, 60, 0.05)
    finally:
        net.link("F1", True)
    rb = wait_all([b], 60)[0]
    check(joined and ahead and rb[0] == 1 and "cancelled" in rb[1],
          "a participant that joined its host before the host heard the leader, the run "
          "ahead: evicted once the host hears it (exit %s: %s)" % (rb[0], rb[1][-100:]))
    check("passed this host's promise" in daemon_log("behind-F1"),
          "its host's log says the leader's time passed its promise")
    renewed = wait_for(lambda: "counted anew" in daemon_log("behind-L"), 10, 0.05)
    c = participant("F1", host, "c", 10 * MS, 600000 * MS)
    got = wait_for(lambda: "'c' (pid" in daemon_log("behind-F1"), 20, 0.05)
    joined_at = None
    if got:
        m = re.search(r"'c' \(pid \d+\) joined at (\d+)\.(\d+)s", daemon_log("behind-F1"))
        joined_at = int(m.group(1)) * 1000 * MS + int(m.group(2)) if m else None
    # c steps with the leader: the clock passes c's join by 100 ms, which
    # the leader does only counting c's grants on the host counted anew
    on = joined_at is not None and wait_for(
        lambda: int(status(lead)["sim_ns"]) >= joined_at + 100 * MS, 60, 0.05)
    log = daemon_log("behind-L")
    check(renewed and on and procs["behind-L"].poll() is None and "lost" not in log,
          "the leader counts that host anew at once (not a death: OnDeath abort did not end "
          "the run), and a participant joined there after steps with it (joined at %s)"
          % joined_at)
    stop("behind-F1")
    stop("behind-L")
    wait_all([a, c], 10)


def mismatched_start():
    """A follower host in lockstep of a leader without it has no leader to
    follow (the topics differ): it says what to check, once, after 5 s. A
    follower without Lockstep of a lockstep leader becomes one of its
    hosts (test_auto); here, beside a second lockstep leader of the same
    clock, it follows one of them."""
    w1, w2 = wire(), wire()
    start("L", "mis-L1", leader_cfg(w1, 1))
    start("F2", "mis-F2", {"TimeSource": "leader", "Distribute": {"Clock": w1}})
    # ... and a second lockstep leader of w1: a conflict, on both.
    start("F1", "mis-L1b", leader_cfg(w1, 1))
    start("L", "mis-L2", {"TimeSource": "simulation", "Distribute": {"Publish": True, "Clock": w2}})
    start("F1", "mis-F1", follower_cfg(w2, 1))
    return time.monotonic(), w1


def mismatched_check(t0, w1):
    # A leader without lockstep of the same clock, once mis-F2 is a
    # lockstep host: not followed, said once (its functions, every
    # heartbeat, are refused without a word more).
    start("L", "mis-P1", {"TimeSource": "simulation",
                          "Distribute": {"Publish": True, "Clock": w1}})
    wait_for(lambda: time.monotonic() - t0 > 6, 10, 0.1)
    wait_for(lambda: "runs without lockstep" in daemon_log("mis-F2"), 10, 0.1)
    time.sleep(1)
    plain, ls = daemon_log("mis-F2"), daemon_log("mis-F1")
    check(plain.count("runs without lockstep: not followed") == 1 and
          "lockstep" in status("lsh-%s-mis-F2" % RUN),
          "a leader without lockstep of its clock, heard after: the lockstep host does not "
          "follow it, and says so once (%d lines)" % plain.count("runs without lockstep"))
    check("followed without Lockstep" in ls,
          "a host in lockstep of a leader without it says what to check after 5 s without a "
          "leader (%s)" % re.findall(r"no lockstep leader.*", ls)[:1])
    check("runs lockstep: this host is one of its hosts" in plain,
          "a follower without Lockstep of a lockstep leader becomes one of its hosts (%s)"
          % re.findall(r"follow: .*", plain)[:1])
    st = status("lsh-%s-mis-L1" % RUN)["lockstep"]
    check("another leader of this clock is live" in daemon_log("mis-L1") and
          "another leader of this clock is live" in daemon_log("mis-L1b") and
          bool(st.get("conflict_with")),
          "two lockstep leaders of one clock: each says the other is live (%s)"
          % st.get("conflict_with"))
    for tag in ("mis-L1", "mis-L1b", "mis-F2", "mis-L2", "mis-F1", "mis-P1"):
        stop(tag)


def main():
    net.make()
    if os.environ.get("LSH_ONLY"):
        # csharp: the csharp suite's part (csharp-lockstep-hosts); any
        # other test_NAME alone, to look at one.
        globals()["test_" + os.environ["LSH_ONLY"]]()
        return
    t0, w1 = mismatched_start()
    test_determinism()
    test_auto()
    test_switch_crowd()
    test_partition()
    test_sensor()
    test_trace()
    test_lossy()
    test_remote_participant_death()
    test_remote_participant_stopped()
    test_follower_host_killed()
    test_follower_host_stopped()
    test_takeover()
    test_takeover_cut()
    test_joined_behind()
    mismatched_check(t0, w1)
    bad = {t: rc for t, rc in stopped.items() if rc != 0}
    check(stopped and not bad, "every daemon stopped by SIGTERM exited with 0 (%d; %s)"
          % (len(stopped), bad or "none otherwise"))


if __name__ == "__main__":
    hostsenv.run(main, cleanup, procs, rtdir)
