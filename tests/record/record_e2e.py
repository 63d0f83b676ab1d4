#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Recording a run's clock to MCAP and replaying it (issue 55), through the
built shmclockd:

- record: a clock under random pauses, resumes, scales, steps and sets
  (forwards and back) from shmclockctl, recorded with --record; a reader
  samples it every millisecond meanwhile. The file is read by a reader
  somebody else wrote (npm's @mcap/core: every record, its CRCs, the data
  section's CRC, the summary's statistics and chunk indexes, a seek by log
  time; ajv: each message against its channel's JSON Schema); shmclock-cat
  --mcap gives every change with its cause (the command, its argument, the
  client's uid and pid); every sample the reader took equals the recorded
  function at its instant, to the nanosecond;
- replay: shmclockd --replay publishes the function again, itself
  recorded: the same changes (base, rate, mode, jumps) at the same
  instants relative to the start (one offset, the status'), and a reader's
  samples equal the recorded function at the same relative instants;
- pause, resume, set (a seek) and scale act on a replay: held while
  paused, going on from there, jumping to where the recording first shows
  the time, the recording at twice its pace;
- a file cut at every byte of its last 4 KiB: shmclock's reader and
  @mcap/core find the same whole changes; the replay of cut files takes
  what is whole and says so;
- a replay in lockstep: a recording (pauses, scales, steps, sets forward)
  replayed as a lockstep clock twice, its participant working 0.3 ms and
  4 ms a step: the same sequence of times both runs, with a stop at every
  recorded instant; a recording that jumps back is refused;
- lockstep: two participants, one stopped (SIGSTOP) past StallAfter: the
  recording has their joins, the stall and their leaving, and each advance
  names who held the clock and for how long;
- shmclockctl record FILE and record-stop on a running daemon: the file is
  made by shmclockctl and passed open; the daemon refuses a request without
  it, a pipe, a file open read-only or with data in it, a second record
  while recording; descriptors passed with other requests are closed;
- a full disk (RLIMIT_FSIZE) while recording: an error in status and the
  log, changes counted as dropped, the clock going on, the file whole up to
  its last chunk;
- a disk full, then space again (a tmpfs of the daemon's own): the
  recording goes on, and its summary counts what the file holds;
- bad input: a file that is not MCAP, an MCAP file of another profile, a
  missing file, Record onto an existing file, Replay with another source:
  one-line errors, nothing served.

Environment: SHMCLOCKD, SHMCLOCKCTL, SHMCLOCK_CAT, RECORD_SAMPLER,
RECORD_CUTS, LS_PARTICIPANT (meson); SHMCLOCK_NPM_DIR (the npm packages, .ci/setup's).
Exit 0 when every check holds, 77 without Node.js or the npm packages.
"""
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

D = os.environ["SHMCLOCKD"]
CTL = os.environ["SHMCLOCKCTL"]
CAT = os.environ["SHMCLOCK_CAT"]
SAMPLER = os.environ["RECORD_SAMPLER"]
CUTS = os.environ["RECORD_CUTS"]
LSP = os.environ["LS_PARTICIPANT"]
MS = 1000000
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "hosts"))
from hostsenv import request  # noqa: E402  (one control-socket request, fds passed)
NPM = os.environ.get("SHMCLOCK_NPM_DIR", "/var/cache/shmclock-npm/node_modules")
NODE = shutil.which("node") or shutil.which("nodejs")
failures = 0
procs = []
pids = []
names = []


def check(cond, what):
    global failures
    print(("ok - " if cond else "not ok - ") + what, flush=True)
    if not cond:
        failures += 1
    return cond


def name(tag):
    n = "rec-e2e-%d-%s-%d" % (os.getpid(), tag, random.randrange(1 << 30))
    names.append(n)
    return n


def ctl(tmp, clock, *args, check_rc=True):
    r = subprocess.run([CTL, "-n", clock, "--socket", "%s/%s.sock" % (tmp, clock)] + list(args),
                       capture_output=True, text=True, timeout=60)
    if check_rc and r.returncode:
        raise RuntimeError("shmclockctl %s: %s" % (" ".join(args), r.stderr.strip()))
    return r


def status(tmp, clock):
    return json.loads(ctl(tmp, clock, "status", "--json").stdout)["status"]


def daemon(tmp, clock, *args, preexec=None):
    log = open("%s/%s.log" % (tmp, clock), "w")
    p = subprocess.Popen([D, "-n", clock, "--socket", "%s/%s.sock" % (tmp, clock),
                          "--log-level", "info"] + list(args),
                         stdout=log, stderr=subprocess.STDOUT, preexec_fn=preexec)
    procs.append(p)
    for _ in range(1000):
        if os.path.exists("%s/%s.sock" % (tmp, clock)) or p.poll() is not None:
            break
        time.sleep(0.01)
    return p


def stop(p):
    p.send_signal(signal.SIGTERM)
    return p.wait(timeout=60)


def sampler(clock, secs, period_us=1000):
    p = subprocess.Popen([SAMPLER, clock, str(secs), str(period_us)], stdout=subprocess.PIPE,
                         text=True)
    procs.append(p)
    return p


def samples(p):
    out, _ = p.communicate(timeout=120)
    return [tuple(int(x) for x in line.split()) for line in out.splitlines()]


def timeline(path):
    r = subprocess.run([CAT, "--mcap", path, "--json"], capture_output=True, text=True, timeout=60)
    if r.returncode:
        raise RuntimeError("shmclock-cat --mcap %s: %s" % (path, r.stderr.strip()))
    fns = [json.loads(line)["function"] for line in r.stdout.splitlines()
           if line.startswith('{"function"')]
    for f in fns:
        for k in ("mono_ns", "sim_ns", "rate", "nominal_mult", "jump_epoch", "at_mono_ns"):
            f[k] = int(f[k])
    return fns, r.stderr


def ev(f, mono):
    """The function f at CLOCK_MONOTONIC mono, as a reader computes it."""
    if mono <= f["mono_ns"] or f["rate"] == 0:
        return f["sim_ns"]
    return f["sim_ns"] + (((mono - f["mono_ns"]) * f["rate"]) >> 32)


def piece(fns, mono):
    """The change in force at mono: the last one anchored at or before it."""
    best = None
    for f in fns:
        if f["mono_ns"] <= mono:
            best = f
        else:
            break
    return best


def validate(path, *extra):
    r = subprocess.run([NODE, os.path.join(HERE, "validate.mjs")] + list(extra) + [path],
                       capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, SHMCLOCK_NPM_DIR=NPM))
    return r.returncode, r.stdout.strip(), r.stderr.strip()


def mismatches(fns, smp, offset=0):
    """Samples that are not the recorded function at their instant."""
    bad, n = [], 0
    for mono, sim, held in smp:
        m = mono - offset
        f = piece(fns, m)
        if f is None or held:
            continue
        n += 1
        if sim != ev(f, m):
            bad.append((mono, sim, ev(f, m)))
    return n, bad


def record_phase(tmp):
    clock = name("rec")
    path = "%s/run.mcap" % tmp
    p = daemon(tmp, clock, "--record", path)
    smp = sampler(clock, 5.0)
    time.sleep(0.3)
    rng = random.Random(os.getpid())
    paused, issued = False, []
    t_end = time.monotonic() + 3.5
    while time.monotonic() < t_end:
        choices = ["scale", "set"] + (["resume", "step"] if paused else ["pause"])
        op = rng.choice(choices)
        if op == "scale":
            arg = ["%.3f" % rng.uniform(0.25, 4)]
        elif op == "set":
            arg = ["%dms" % rng.randrange(0, 200000)]
        elif op == "step":
            arg = ["%dms" % rng.randrange(1, 5000)]
        else:
            arg = []
        ctl(tmp, clock, op, *arg)
        paused = {"pause": True, "resume": False}.get(op, paused)
        issued.append((op, arg[0] if arg else ""))
        time.sleep(rng.uniform(0.06, 0.25))
    st = status(tmp, clock)
    check(st.get("record", {}).get("file") == path and st["record"]["error"] == "",
          "record: status names the file, no error: %s" % st.get("record"))
    smp_out = samples(smp)
    rc = stop(p)
    check(rc == 0, "record: shmclockd stopped cleanly (%d)" % rc)

    rc, out, err = validate(path)
    check(rc == 0, "record: @mcap/core reads the file whole, CRCs, summary, seek, schemas: %s%s"
          % (out, err))
    fns, _ = timeline(path)
    check(len(fns) == len(issued) + 1,
          "record: %d changes recorded for %d commands and the start" % (len(fns), len(issued)))
    check(fns and fns[0]["cause"]["kind"] == "start", "record: the first change is the start")
    causes = [(f["cause"].get("command"), f["cause"].get("uid")) for f in fns[1:]]
    check(causes == [(op, os.getuid()) for op, _ in issued],
          "record: each change's cause is its command and the client's uid")
    check(all(f["cause"].get("pid", 0) > 0 for f in fns[1:]), "record: each names the client's pid")
    scale_args = [f["cause"]["arg"] for f in fns[1:] if f["cause"]["command"] == "scale"]
    check(all(float(a) == float(b) for a, (op, b) in
              zip(scale_args, [x for x in issued if x[0] == "scale"])),
          "record: a scale's argument is recorded")
    n, bad = mismatches(fns, smp_out)
    check(n > 2000 and not bad, "record: %d samples, each the recorded function at its instant%s"
          % (n, "; first off: %s" % (bad[:3],) if bad else ""))
    jumps = sum(1 for op, _ in issued if op == "set")
    check(fns[-1]["jump_epoch"] - fns[0]["jump_epoch"] == jumps,
          "record: %d sets, %d jumps recorded" % (jumps, fns[-1]["jump_epoch"]))
    return path, fns


def replay_phase(tmp, path, fns):
    clock = name("replay")
    again = "%s/replayed.mcap" % tmp
    dur = (fns[-1]["mono_ns"] - fns[0]["mono_ns"]) / 1e9 + 1.0
    p = daemon(tmp, clock, "--replay", path, "--record", again)
    smp = sampler(clock, dur + 0.5)
    time.sleep(0.2)
    st = status(tmp, clock)
    check(st["source"] == "replay" and st.get("replay", {}).get("changes") == len(fns),
          "replay: source replay, %s changes" % st.get("replay", {}).get("changes"))
    offset = int(st["replay"]["offset_ns"])
    smp_out = samples(smp)
    st = status(tmp, clock)
    check(st["replay"]["applied"] == len(fns), "replay: every change applied (%d)"
          % st["replay"]["applied"])
    late = st["replay"]["late"]
    rc = stop(p)
    check(rc == 0, "replay: shmclockd stopped cleanly")
    n, bad = mismatches(fns, smp_out, offset)
    # A change the clock thread published after its instant (late: a
    # loaded machine) shows the old function until then.
    check(n > 2000 and (not bad if late == 0 else len(bad) < n // 100),
          "replay: %d samples, each the recording's function at the same relative instant "
          "(%d late changes)%s" % (n, late, "; first off: %s" % (bad[:3],) if bad else ""))
    got, _ = timeline(again)
    # The replay's own recording: its start hold, then the same changes.
    rep = [f for f in got if f["cause"]["kind"] == "replay"]
    same = len(rep) == len(fns)
    for a, b in zip(fns, rep):
        same = same and (a["sim_ns"], a["nominal_mult"], a["rate"], a["paused"], a["stepped"]) == \
            (b["sim_ns"], b["nominal_mult"], b["rate"], b["paused"], b["stepped"])
        same = same and (late or b["mono_ns"] - a["mono_ns"] == offset)
    check(same, "replay: its own recording has the same %d changes, each at the recorded instant "
          "+ the offset" % len(fns))
    jumps = [f["jump_epoch"] for f in rep]
    check(jumps[-1] - jumps[0] == fns[-1]["jump_epoch"] - fns[0]["jump_epoch"],
          "replay: the same jumps")


def near(fns, smp, offset, since):
    """Samples from CLOCK_MONOTONIC since on that are not the recording's
    function at their instant - offset within 1 ns: a replay resumed or
    sought is the recorded line re-anchored there (as any change anchors
    a clock), within the rounding of one product."""
    bad, n = [], 0
    for mono, sim, held in smp:
        f = piece(fns, mono - offset)
        if mono < since or f is None or held:
            continue
        n += 1
        if abs(sim - ev(f, mono - offset)) > 1:
            bad.append((mono, sim, ev(f, mono - offset)))
    return n, bad


def control_phase(tmp, path, fns):
    clock = name("ctl")
    own = "%s/ctl.mcap" % tmp
    p = daemon(tmp, clock, "--replay", path, "--record", own)
    time.sleep(0.4)
    ctl(tmp, clock, "pause")
    a = status(tmp, clock)
    time.sleep(0.3)
    b = status(tmp, clock)
    check(a["paused"] and a["sim_ns"] == b["sim_ns"], "control: a paused replay holds")
    ctl(tmp, clock, "resume")
    offset1 = int(status(tmp, clock)["replay"]["offset_ns"])
    out1 = samples(sampler(clock, 0.5))
    # A seek: to a time the recording shows while running.
    run = [f for f in fns if f["rate"]]
    target = ev(run[len(run) // 2], run[len(run) // 2]["mono_ns"] + 1000)  # a value it shows
    ctl(tmp, clock, "seek", "%dns" % target)  # set's other name
    offset2 = int(status(tmp, clock)["replay"]["offset_ns"])
    out2 = samples(sampler(clock, 0.3))
    # Scale: the recording at twice its pace, every rate doubled, from an
    # instant just ahead (no jump).
    ctl(tmp, clock, "scale", "2")
    st = status(tmp, clock)["replay"]
    a, off, speed = int(st["anchor_ns"]), int(st["offset_ns"]), st["speed"]
    out3 = samples(sampler(clock, 0.3))
    n3, bad3 = 0, []
    for mono, sim, held in out3:
        m = (a - off) + round((mono - a) * speed)
        f = piece(fns, m)
        if mono < a or f is None or held:
            continue
        n3 += 1
        if abs(sim - ev(f, m)) > 1000:
            bad3.append((mono, sim, ev(f, m)))
    check(speed == 2 and n3 > 50 and not bad3,
          "control: scale 2 replays the recording at twice its pace (%d samples within 1 us%s)"
          % (n3, "; off: %s" % (bad3[:3],) if bad3 else ""))
    r = ctl(tmp, clock, "step", "1s", check_rc=False)
    check(r.returncode != 0 and "recording" in r.stderr,
          "control: step is refused on a replay: %s" % r.stderr.strip())
    r = ctl(tmp, clock, "set", "-5000000s", check_rc=False)
    check(r.returncode != 0 and "never shows" in r.stderr,
          "control: a seek to a time the recording never shows is refused: %s" % r.stderr.strip())
    check(stop(p) == 0, "control: stopped cleanly")

    g, _ = timeline(own)
    i = next((k for k, f in enumerate(g) if f["cause"].get("command") == "pause"), None)
    if not check(i is not None and i + 2 < len(g), "control: the replay's own recording has the "
                 "pause and what followed"):
        return
    held, resumed = g[i], g[i + 1]
    check(resumed["sim_ns"] == held["sim_ns"] and resumed["jump_epoch"] == held["jump_epoch"],
          "control: resumed from the value it held, no jump: %s"
          % ([(f["sim_ns"], f["jump_epoch"], f["cause"]) for f in (held, resumed)],))
    n, bad = near(fns, out1, offset1, resumed["mono_ns"])
    check(n > 100 and not bad, "control: resumed, the recording goes on from where it stood "
          "(%d samples%s)" % (n, "; off: %s" % (bad[:3],) if bad else ""))
    j = next((k for k in range(i + 1, len(g)) if g[k]["cause"].get("command") == "set"), None)
    if not check(j is not None and g[j]["sim_ns"] == target and
                 g[j]["jump_epoch"] == g[j - 1]["jump_epoch"] + 1,
                 "control: the seek is a jump to %d exactly, recorded with its cause (%s)"
                 % (target, g[j]["sim_ns"] if j is not None else None)):
        return
    n, bad = near(fns, out2, offset2, g[j]["mono_ns"])
    check(n > 50 and not bad, "control: after the seek the replay is the recording from there "
          "(%d samples%s)" % (n, "; off: %s" % (bad[:3],) if bad else ""))


def cut_phase(tmp, path, fns):
    size = os.path.getsize(path)
    start = max(0, size - 4096)
    r = subprocess.run([CUTS, path, str(start)], capture_output=True, text=True, timeout=300)
    ours = {}
    for line in r.stdout.splitlines():
        f = line.split(" ", 2)
        ours[int(f[0])] = f[1:]
    rc, out, err = validate(path, "--cuts", str(start))
    theirs = json.loads(out) if rc == 0 else {}
    diff = []
    for n in range(start, size + 1):
        o = ours.get(n)
        t = theirs.get(str(n))
        if o is None or t is None or o[0] == "error" or int(o[0]) != t:
            diff.append((n, o, t))
    check(r.returncode == 0 and rc == 0 and not diff,
          "cut: at each of %d lengths shmclock's reader and @mcap/core find the same whole "
          "changes%s" % (size + 1 - start, "; first: %s" % (diff[:3],) if diff else err))
    whole = [n for n in range(start, size) if ours.get(n, ["x", "0"])[1].strip() == "0"]
    check(not whole, "cut: every cut short of the whole file is said to be cut (%s)" % whole[:3])
    # Replays of cut files: one cut in the data, one in the summary.
    for cut_at in (start + 100, size - 20):
        part = "%s/cut-%d.mcap" % (tmp, cut_at)
        with open(path, "rb") as f, open(part, "wb") as g:
            g.write(f.read(cut_at))
        want = int(ours[cut_at][0])
        clock = name("cut")
        p = daemon(tmp, clock, "--replay", part)
        time.sleep(0.3)
        st = status(tmp, clock)
        check(st["replay"]["truncated"] and st["replay"]["changes"] == want,
              "cut: the replay of %d bytes takes its %d whole changes and says it is cut"
              % (cut_at, want))
        stop(p)
        log = open("%s/%s.log" % (tmp, clock)).read()
        check("cut short" in log, "cut: its log says where the file stops")


def lockstep_phase(tmp):
    """A lockstep run recorded: who joined, held, stalled and left, and
    each advance's holder."""
    clock = name("ls")
    path = "%s/ls.mcap" % tmp
    p = daemon(tmp, clock, "--source", "fixed", "--lockstep", "2", "--stall-after", "200ms",
               "--record", path)
    a = subprocess.Popen([LSP, clock, "fast", str(10 * MS), str(400 * MS)])
    b = subprocess.Popen([LSP, clock, "slow", str(33 * MS), str(400 * MS), "--work-us", "20000"])
    procs.extend([a, b])
    time.sleep(0.15)
    b.send_signal(signal.SIGSTOP)
    time.sleep(0.7)
    b.send_signal(signal.SIGCONT)
    ra, rb = a.wait(timeout=60), b.wait(timeout=60)
    check(ra == 0 and rb == 0, "lockstep: both participants ran to the end (%d, %d)" % (ra, rb))
    stop(p)
    r = subprocess.run([CAT, "--mcap", path, "--json"], capture_output=True, text=True, timeout=60)
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    events = [(x["lockstep"]["event"], x["lockstep"]["who"]) for x in lines if "lockstep" in x]
    fns = [x["function"] for x in lines if "function" in x]
    for want in (("join", "fast"), ("join", "slow"), ("stall", "slow"), ("leave", "fast"),
                 ("leave", "slow")):
        check(want in events, "lockstep: the recording has %s %s" % want)
    adv = [f for f in fns if f["cause"]["kind"] == "lockstep"]
    check(len(adv) > 10 and all(f["cause"]["who"] in ("fast", "slow", "fast,slow", "slow,fast")
                                for f in adv),
          "lockstep: %d advances, each naming who held the clock %s"
          % (len(adv), sorted(set(f["cause"]["who"] for f in adv))))
    long_hold = [f for f in adv if int(f["cause"]["held_ns"]) >= 500 * MS]
    check(long_hold and all("slow" in f["cause"]["who"] for f in long_hold),
          "lockstep: the advance after the stop names slow, held %s ms"
          % [int(f["cause"]["held_ns"]) // MS for f in long_hold])
    text = subprocess.run([CAT, "--mcap", path], capture_output=True, text=True).stdout
    check("lockstep stall slow" in text and "released by slow" in text,
          "lockstep: shmclock-cat --mcap says who stalled and who released the clock")


def lockstep_replay_phase(tmp):
    """A recording replayed as a lockstep clock: paced by its participant,
    stopping at each recorded instant, the same sequence of times whatever
    the participant's pace."""
    clock = name("fwd")
    path = "%s/fwd.mcap" % tmp
    p = daemon(tmp, clock, "--record", path)
    # Sets forward of the clock whatever the machine's pace (a set to a
    # fixed time was behind it under ASan: a jump back, refused below).
    for op in (["scale", "2"], ["pause"], ["step", "700ms"], ["resume"], ["set", "+1s"],
               ["scale", "0.5"], ["pause"], ["step", "1ms"], ["set", "+100ms"]):
        time.sleep(0.03)
        if op[0] == "set":
            now = int(status(tmp, clock)["sim_ns"])
            op = ["set", "%dns" % (now + (MS * 1000 if op[1] == "+1s" else MS * 100))]
        ctl(tmp, clock, *op)
    stop(p)
    fns, _ = timeline(path)
    end = max(f["sim_ns"] for f in fns) + 100 * MS
    runs = []
    for work in ("300", "4000"):
        rc = name("lsr")
        own = "%s/%s.mcap" % (tmp, rc)
        p = daemon(tmp, rc, "--replay", path, "--lockstep", "1", "--record", own)
        part = subprocess.run([LSP, rc, "p", str(7 * MS), str(end), "--work-us", work],
                              capture_output=True, text=True, timeout=120)
        check(part.returncode == 0, "lockstep replay: the participant ran (work %s us): %s %s"
              % (work, part.stderr.strip(),
                 "" if part.returncode == 0 else open("%s/%s.log" % (tmp, rc)).read()[-800:]))
        stop(p)
        g, _ = timeline(own)
        runs.append([f["sim_ns"] for f in g])
    check(runs[0] == runs[1] and len(runs[0]) > 100,
          "lockstep replay: the same %d times in both runs, whatever the participant's pace"
          % len(runs[0]))
    due = set()
    for a, b in zip(fns, fns[1:]):
        due.add(ev(a, b["mono_ns"]))
        due.add(b["sim_ns"])
    missing = sorted(t for t in due if t > fns[0]["sim_ns"] and t not in runs[0])
    check(not missing, "lockstep replay: the clock stopped at each recorded instant (%d; missing "
          "%s)" % (len(due), missing[:3]))
    # A recording that jumps back cannot pace a lockstep clock.
    clock = name("bk")
    backwards = "%s/back.mcap" % tmp
    p = daemon(tmp, clock, "--record", backwards)
    ctl(tmp, clock, "set", "10s")
    ctl(tmp, clock, "set", "5s")
    stop(p)
    clock = name("back")
    r = subprocess.run([D, "-n", clock, "--socket", "%s/%s.sock" % (tmp, clock), "--replay",
                        backwards, "--lockstep", "1"], capture_output=True, text=True, timeout=60)
    check(r.returncode != 0 and "only moves forward" in r.stderr
          and not os.path.exists("/dev/shm/shmclock." + clock),
          "lockstep replay: a recording that jumps back is refused: %s" % r.stderr.strip())


def control_record_phase(tmp):
    """shmclockctl record FILE and record-stop on a running daemon; the
    file passed open, and what a client may pass refused."""
    clock = name("ctlrec")
    sock = "%s/%s.sock" % (tmp, clock)
    p = daemon(tmp, clock)
    pid = p.pid
    r = ctl(tmp, clock, "record-stop", check_rc=False)
    check(r.returncode == 1 and "not recording" in r.stderr, "record-stop: refused when not "
          "recording: %s" % r.stderr.strip())
    r = request(sock, '{"v":1,"cmd":"record"}\n')
    check(not r.get("ok") and "passed open" in r.get("error", ""),
          "record: a request without its file is refused: %s" % r.get("error"))
    rd, wr = os.pipe()
    r = request(sock, '{"v":1,"cmd":"record"}\n', [wr])
    check(not r.get("ok") and "not a regular file" in r.get("error", ""),
          "record: a pipe passed is refused: %s" % r.get("error"))
    os.close(rd)
    os.close(wr)
    ro = "%s/ro.mcap" % tmp
    open(ro, "w").close()
    fd = os.open(ro, os.O_RDONLY)
    r = request(sock, '{"v":1,"cmd":"record"}\n', [fd])
    os.close(fd)
    check(not r.get("ok") and "not open for writing" in r.get("error", ""),
          "record: a file passed read-only is refused: %s" % r.get("error"))
    full = "%s/full.txt" % tmp
    open(full, "w").write("somebody's data\n")
    fd = os.open(full, os.O_WRONLY)
    r = request(sock, '{"v":1,"cmd":"record"}\n', [fd])
    os.close(fd)
    check(not r.get("ok") and "not empty" in r.get("error", "") and
          open(full).read() == "somebody's data\n",
          "record: a file passed with data in it is refused, untouched: %s" % r.get("error"))
    # Descriptors passed with other requests: kept one at a time, the
    # rest closed, so a client cannot fill the daemon's table.
    before = len(os.listdir("/proc/%d/fd" % pid))
    fds = [os.open("/dev/null", os.O_RDONLY) for _ in range(4)]
    for _ in range(200):
        request(sock, '{"v":1,"cmd":"status"}\n', fds)
    for fd in fds:
        os.close(fd)
    # The last connection's close may still be on its way (its socket and
    # its one kept descriptor): a few, not hundreds.
    after = len(os.listdir("/proc/%d/fd" % pid))
    for _ in range(100):
        if after <= before + 2:
            break
        time.sleep(0.02)
        after = len(os.listdir("/proc/%d/fd" % pid))
    check(after <= before + 2, "record: 800 descriptors passed with status requests leave "
          "the daemon's table as it was (%d, then %d)" % (before, after))
    f1, f2 = "%s/ctl1.mcap" % tmp, "%s/ctl2.mcap" % tmp
    r = ctl(tmp, clock, "record", f1, check_rc=False)
    check(r.returncode == 0, "record FILE: recording (%s)" % r.stderr.strip())
    st = status(tmp, clock)
    check(st.get("record", {}).get("file") == f1, "status names the file: %s" % st.get("record"))
    r = ctl(tmp, clock, "record", "start", f2, check_rc=False)
    check(r.returncode == 1 and "already recording" in r.stderr and not os.path.exists(f2),
          "record start FILE2: refused while recording, FILE2 removed: %s" % r.stderr.strip())
    ctl(tmp, clock, "pause")
    ctl(tmp, clock, "scale", "3")
    r = ctl(tmp, clock, "record", "stop", check_rc=False)
    check(r.returncode == 0 and "record" not in status(tmp, clock),
          "record stop: stopped (%s)" % r.stderr.strip())
    rc, out, err = validate(f1)
    check(rc == 0, "record stop: the file is whole when it returns (@mcap/core: %s%s)"
          % (out, err))
    fns, _ = timeline(f1)
    check([f["cause"].get("command") for f in fns] == ["record", "pause", "scale"],
          "the recording starts with the function as it was, then each change: %s"
          % [f["cause"].get("command") for f in fns])
    r = ctl(tmp, clock, "record", f1, check_rc=False)
    check(r.returncode == 1 and "never written over" in r.stderr and validate(f1)[0] == 0,
          "record onto an existing file: refused, the file untouched: %s" % r.stderr.strip())
    r = ctl(tmp, clock, "record", f2, check_rc=False)
    check(r.returncode == 0 and status(tmp, clock).get("record", {}).get("file") == f2,
          "record again to another file")
    stop(p)
    check(validate(f2)[0] == 0, "a recording the daemon's exit ends is whole")


def disk_full_phase(tmp):
    clock = name("full")
    path = "%s/full.mcap" % tmp

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (24000, 24000))

    p = daemon(tmp, clock, "--record", path, preexec=limit)
    for i in range(150):
        ctl(tmp, clock, "scale", "%d" % (1 + i % 3))
        if i % 10 == 0:
            time.sleep(0.02)
    time.sleep(0.2)
    st = status(tmp, clock)
    rec = st.get("record", {})
    check(rec.get("error") and rec.get("dropped", 0) > 0,
          "disk full: status has the error and the dropped changes: %s" % rec)
    check(st["scale"] == 1 + 149 % 3, "disk full: the clock took every change anyway")
    check(p.poll() is None, "disk full: shmclockd runs on")
    stop(p)
    log = open("%s/%s.log" % (tmp, clock)).read()
    check("record: writing" in log and "changes lost" in log, "disk full: the log says so")
    fns, err = timeline(path)
    check(0 < len(fns) < 151 and "cut short" in err,
          "disk full: the file is whole up to its last chunk (%d changes): %s"
          % (len(fns), err.strip()))
    rc, out, err = validate(path, "--cut")
    v = json.loads(out) if rc == 0 else {}
    # The changes lost between written chunks show as gaps; those after
    # the last written chunk cannot.
    check(v.get("messages") == len(fns) and 0 <= v.get("gaps", -1) <= rec["dropped"],
          "disk full: @mcap/core reads the same %d changes, and of the %d lost those between "
          "chunks as gaps in their sequence: %s%s" % (len(fns), rec["dropped"], out, err))


def mcap(meta, messages):
    """A small MCAP file by hand: our Header, the function channel with
    @meta, then @messages ((channel, JSON text)) outside chunks."""
    import struct

    def st(b):
        b = b.encode() if isinstance(b, str) else b
        return struct.pack("<I", len(b)) + b

    def rec(op, body):
        return bytes([op]) + struct.pack("<Q", len(body)) + body

    magic = b"\x89MCAP0\r\n"
    out = magic + rec(1, st("shmclock") + st("test"))
    out += rec(3, struct.pack("<H", 1) + st("shmclock.FunctionChange") + st("jsonschema") + st("{}"))
    m = b"".join(st(k) + st(v) for k, v in meta)
    out += rec(4, struct.pack("<HH", 1, 1) + st("/shmclock/function") + st("json") + st(m))
    out += rec(4, struct.pack("<HH", 2, 1) + st("/shmclock/lockstep") + st("json") + st(m))
    for i, (ch, text) in enumerate(messages):
        out += rec(5, struct.pack("<HIQQ", ch, i, 0, 0) + text.encode())
    return out + magic


def change_json(f, **over):
    """Change @f as its JSON message, with fields replaced."""
    g = dict(f)
    for k in ("mono_ns", "sim_ns", "rate", "nominal_mult", "jump_epoch", "at_mono_ns"):
        g[k] = str(g[k])
    g.update(over)
    return json.dumps(g)


def disk_recovers_phase(tmp):
    """A disk full, then space again: the recording goes on, and its
    summary counts what the file holds (the statistics @mcap/core checks
    against the messages)."""
    small = "%s/small" % tmp
    os.mkdir(small)
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "mount", "-t", "tmpfs",
                            "-o", "size=64k", "shmclock-test", small], capture_output=True,
                           text=True) if os.geteuid() == 0 and shutil.which("unshare") else None
    if not probe or probe.returncode:
        print("ok - disk recovers # SKIP needs root, unshare and a tmpfs mount of its own: %s"
              % (probe.stderr.strip() if probe else "not root, or no unshare"))
        return
    clock = name("small")
    sock = "%s/%s.sock" % (tmp, clock)
    # A 64 KiB tmpfs in a mount namespace of the daemon's own, 40 KiB of it
    # taken; the file is copied out when the daemon ends.
    script = ('mount -t tmpfs -o size=64k shmclock-test "$1" && head -c 40960 /dev/zero > "$1/filler"'
              ' && "$2" -n "$3" --socket "$4" --record "$1/run.mcap" --log-level info; rc=$?;'
              ' cp "$1/run.mcap" "$5"; exit $rc')
    log = open("%s/%s.log" % (tmp, clock), "w")
    p = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh",
                          small, D, clock, sock, "%s/recovered.mcap" % tmp],
                         stdout=log, stderr=subprocess.STDOUT)
    procs.append(p)
    for _ in range(1000):
        if os.path.exists(sock) or p.poll() is not None:
            break
        time.sleep(0.01)
    pid = status(tmp, clock)["writer_pid"]
    pids.append(pid)  # the daemon is sh's child: killed by pid if the test fails
    for i in range(120):
        ctl(tmp, clock, "scale", "%d" % (1 + i % 3))
        if i % 10 == 0:
            time.sleep(0.02)
    time.sleep(0.1)
    full = status(tmp, clock)["record"]
    subprocess.run(["nsenter", "-t", str(pid), "-m", "rm", "%s/filler" % small], check=True)
    for i in range(30):
        ctl(tmp, clock, "scale", "%d" % (1 + i % 3))
        time.sleep(0.02)
    time.sleep(0.1)
    after = status(tmp, clock)["record"]
    os.kill(pid, signal.SIGTERM)
    p.wait(timeout=60)
    check(full["dropped"] > 0 and after["written"] > full["written"],
          "disk recovers: changes dropped while full (%d), written again once space came back "
          "(%d, then %d)" % (full["dropped"], full["written"], after["written"]))
    rc, out, err = validate("%s/recovered.mcap" % tmp, "--lossy")
    v = json.loads(out) if rc == 0 else {}
    check(rc == 0 and v.get("gaps") == after["dropped"],
          "disk recovers: @mcap/core reads the whole file, its statistics and chunk indexes the "
          "messages it holds, the %d lost as gaps: %s%s" % (after["dropped"], out, err))


def bad_input_phase(tmp, path, fns):
    def refused(args, want, what):
        clock = name("bad")
        r = subprocess.run([D, "-n", clock, "--socket", "%s/%s.sock" % (tmp, clock)] + args,
                           capture_output=True, text=True, timeout=60)
        lines = [x for x in r.stderr.splitlines() if x.strip()]
        check(r.returncode != 0 and len(lines) == 1 and want in lines[0]
              and not os.path.exists("/dev/shm/shmclock." + clock),
              "bad input: %s: %s" % (what, lines))

    junk = "%s/junk.mcap" % tmp
    open(junk, "w").write("not an mcap file at all\n")
    other = "%s/other.mcap" % tmp
    with open(path, "rb") as f:
        b = bytearray(f.read())
    b[8 + 9 + 4:8 + 9 + 4 + 8] = b"shmclocX"  # the Header's profile
    open(other, "wb").write(bytes(b))
    refused(["--replay", junk], "not an MCAP file", "not MCAP")
    refused(["--replay", other], "profile", "another profile")
    refused(["--replay", "%s/nonexistent.mcap" % tmp], "No such file", "a missing file")
    refused(["--record", path], "never overwritten", "Record onto an existing file")
    refused(["--source", "simulation", "--replay", path], "replay source", "Replay with another "
            "source")
    nover = "%s/nover.mcap" % tmp
    open(nover, "wb").write(mcap([("shmclock.clock", "x")], []))
    refused(["--replay", nover], "version ''", "a channel without its format's version")
    rate = "%s/rate.mcap" % tmp
    open(rate, "wb").write(mcap([("shmclock.record", "1")], [
        (1, change_json(fns[0], nominal_mult="9223372036854775808", rate="9223372036854775808"))]))
    refused(["--replay", rate], "not a rate a clock can have", "a rate no clock can have")
    far = "%s/far.mcap" % tmp
    open(far, "wb").write(mcap([("shmclock.record", "1")], [
        (1, change_json(fns[0], mono_ns="9223372036854775000"))]))
    refused(["--replay", far], "out of range", "an instant out of range")
    fifo = "%s/fifo.mcap" % tmp
    os.mkfifo(fifo)
    refused(["--replay", fifo], "not a regular file", "a FIFO (never opened for long)")
    esc = "%s/esc.mcap" % tmp
    open(esc, "wb").write(mcap([("shmclock.record", "1")], [
        (1, change_json(fns[0], cause={"kind": "control", "command": "set\u001b[2J",
                                       "arg": "\u001b]0;x\u0007", "uid": 0, "pid": 1}))]))
    late = "%s/late.mcap" % tmp
    open(late, "wb").write(mcap([("shmclock.record", "1")], [
        (1, change_json(fns[0])),
        (2, json.dumps({"event": "join", "who": "x", "pid": 1, "sim_ns": "0", "grant_ns": "0",
                        "wall_ns": "9223372036854775807"}))]))
    r = subprocess.run([CAT, "--mcap", late], capture_output=True, timeout=60)
    check(r.returncode == 0 and r.stdout.count(b"\n") == 4 and b"lockstep join x" in r.stdout,
          "bad input: shmclock-cat --mcap prints an event of the last instant there is (rc %d)"
          % r.returncode)
    r = subprocess.run([CAT, "--mcap", esc], capture_output=True, timeout=60)
    check(r.returncode == 0 and b"\x1b" not in r.stdout and b"\x07" not in r.stdout
          and b"set?[2J" in r.stdout,
          "bad input: shmclock-cat --mcap prints a file's control characters as '?'")


def main():
    if not NODE or not os.path.isdir(os.path.join(NPM, "@mcap", "core")) or \
            not os.path.isdir(os.path.join(NPM, "ajv")):
        print("1..0 # SKIP no Node.js or no @mcap/core and ajv in %s (.ci/setup installs them)"
              % NPM)
        return 77
    tmp = tempfile.mkdtemp(prefix="rec-e2e-")
    try:
        path, fns = record_phase(tmp)
        replay_phase(tmp, path, fns)
        control_phase(tmp, path, fns)
        cut_phase(tmp, path, fns)
        lockstep_phase(tmp)
        lockstep_replay_phase(tmp)
        control_record_phase(tmp)
        disk_full_phase(tmp)
        disk_recovers_phase(tmp)
        bad_input_phase(tmp, path, fns)
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for n in names:
            for f in ("/dev/shm/shmclock." + n,):
                if os.path.exists(f):
                    os.unlink(f)
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
