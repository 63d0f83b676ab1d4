#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Between hosts end to end (issue 18), through the built shmclockd, on
three network namespaces joined by a bridge (veth pairs; no traffic leaves
them): a leader in one, followers in the others, Cyclone DDS bound to the
veth addresses. The namespaces share one kernel clock, so follower time
minus leader time at the same instant measures the protocol alone.

- 10,000 random commands (pause, resume, scale, set, step) on the leader:
  the error of each follower at every change (p50 / p99 / max printed; the
  median must be within 1 us), no backward read on any follower within an
  epoch, every jump delivered to every follower's jump callbacks;
- a follower started after the leader gets the current function at once
  (transient-local);
- SIGKILL the leader: followers are stale (in the segment: info().stale,
  reads raise StaleClockError) within StaleAfter, held; a new leader takes
  over as a jump;
- issue 29: 1,000 random changes with a CPU hog on every core and loss
  20 %, delay 5 ms +- 2 ms on every link (two-phase commit): no backward
  read, no follower lost or stale; a sampler compares each follower with
  two leader readings around it (printed); then a follower's link down for
  2 s: it is stale within its bound, the leader goes on within the lost
  follower's lease, it catches up without a backward read; then the
  leader's way to a follower cut (one way) 0.9 s, four times, while the
  leader makes a change every 20 ms: the follower is stale each time and
  fresh once its lease is echoed, and never off the leader's function
  while not stale; then 12 followers start at once (6 under a sanitizer)
  while the leader makes a change every 20 ms: each is stale until its
  lease is echoed, then fresh, never off the leader's function while not
  stale; stopped at once, the leader lets them all go.

Needs root (ip netns, tc). Exit 77 with the reason when a capability is
missing. Environment: SHMCLOCKD, PYTHONPATH (the built module), SANITIZE.
Every namespace, daemon and segment is removed on the way out.
"""
import multiprocessing as mp
import os
import random
import re
import signal
import subprocess
import tempfile
import threading
import time

from hostsenv import check, ctl_at, wait_for
import hostsenv
import netenv

SHMCLOCKD = os.environ["SHMCLOCKD"]
SHMCLOCKCTL = os.environ.get("SHMCLOCKCTL")
SANITIZED = os.environ.get("SANITIZE", "none") not in ("", "none")
COMMANDS = int(os.environ.get("HOSTS_COMMANDS", 2000 if SANITIZED else 10000))
# Changes under loss and load (issue 29; each takes about a Lead, which
# grows with the acknowledgements' delay there).
LOSSY_COMMANDS = int(os.environ.get("HOSTS_LOSSY_COMMANDS", 200 if SANITIZED else 1000))
# ... and from several clients at once, so that changes queue on the leader.
PIPELINED_COMMANDS = int(os.environ.get("HOSTS_PIPELINED_COMMANDS", 120 if SANITIZED else 200))
PIPELINED_CLIENTS = 4
# Followers that start at once (storm_phase).
STORM = int(os.environ.get("HOSTS_STORM", 6 if SANITIZED else 12))
SEC = 1_000_000_000
MS = 1_000_000
RUN = "%d-%d" % (os.getpid(), random.randrange(1 << 20))


netenv.need_root()
try:
    import shmclock
except ImportError as e:
    hostsenv.skip("the shmclock Python module was not built: %s" % e)

net = netenv.Net(RUN, ("L", "F1", "F2"))
HOSTS, NS = net.hosts, net.ns
rtdir = tempfile.mkdtemp(prefix="shmclock-hosts-")
procs = {}
clocks = []


nsx = net.nsx


def cleanup():
    net.teardown(procs.values(), clocks, rtdir)


hostsenv.on_signals(cleanup)


def start(role, tag, cfg, env_extra=None):
    """shmclockd in namespace @role with config @cfg (plus Name)."""
    name = "hosts-%s-%s" % (RUN, tag)
    clocks.append(name)
    procs[tag] = net.daemon(SHMCLOCKD, rtdir, role, tag, name, cfg, env_extra)
    return name


def ctl(name, cmd, **kw):
    return ctl_at(os.path.join(rtdir, name + ".sock"), cmd, **kw)


def log_lines(pattern, last=60):
    """The daemons' log lines matching @pattern (a failure's evidence)."""
    for tag in procs:
        path = os.path.join(rtdir, tag + ".log")
        if os.path.exists(path):
            hits = [ln for ln in open(path, errors="replace") if re.search(pattern, ln)]
            for ln in hits[-last:]:
                print("# %s.log: %s" % (tag, ln.rstrip()), flush=True)


def dist(name):
    return ctl(name, "status")["status"]["distribute"]


def value_at(info, t):
    """The clock's value at CLOCK_MONOTONIC t from a snapshot."""
    if info.paused or info.stepped:
        return info.sim_ns
    return info.sim_ns + round((t - info.mono_ns) * info.scale)


# ------------------------------------------------------------ readers

def reader_main(name, stop, ready, out):
    """Reads a follower's clock until @stop: backward reads within an
    epoch, and the jumps its callbacks hear of."""
    c = shmclock.Clock(name)
    jumps = [0]
    c.on_jump(lambda j: jumps.__setitem__(0, jumps[0] + j.jumps) if not j.before else None)
    c.info()
    ready.release()
    last = None
    reads = back = 0
    worst = 0
    while not stop.is_set():
        i = c.info()
        if i.initialized:
            if last and i.jump_epoch == last[0] and i.sim_ns < last[1]:
                back += 1
                worst = max(worst, last[1] - i.sim_ns)
            last = (i.jump_epoch, i.sim_ns)
            reads += 1
        time.sleep(0.0002)
    time.sleep(0.5)  # the last jump's callbacks (their own thread)
    out.put((name, reads, back, worst, jumps[0]))
    c.close()


class Readers:
    def __init__(self, names):
        self.stop = mp.Event()
        self.q = mp.Queue()
        ready = mp.Semaphore(0)
        self.ps = [mp.Process(target=reader_main, args=(n, self.stop, ready, self.q))
                   for n in names]
        for p in self.ps:
            p.start()
        for _ in self.ps:  # every callback registered before the first change
            if not ready.acquire(timeout=30):
                raise RuntimeError("a reader did not start")

    def finish(self):
        self.stop.set()
        res = {}
        for _ in self.ps:
            n, reads, back, worst, jumps = self.q.get(timeout=30)
            res[n] = dict(reads=reads, back=back, worst=worst, jumps=jumps)
        for p in self.ps:
            p.join(10)
        return res


# ------------------------------------------------------------ phases

def random_command(paused):
    c = random.choice(["pause", "resume", "scale", "set", "step"] if paused else
                      ["pause", "scale", "scale", "set"])
    if c == "scale":
        return c, {"value": random.choice([0.1, 0.25, 0.5, 1, 2, 4, 10])}
    if c == "set":
        return c, {"time": "%dms" % random.randrange(0, 10_000_000)}
    if c == "step":
        return c, {"duration": "%dms" % random.randrange(0, 5000)}
    return c, {}


def commands_phase(leader, followers):
    lead_clock = shmclock.Clock(leader)
    fol = {f: shmclock.Clock(f) for f in followers}
    readers = Readers(followers)
    errors = []
    sets = 0
    paused = lead_clock.info().paused
    t0 = time.monotonic()
    for _ in range(COMMANDS):
        cmd, kw = random_command(paused)
        before = {f: c.info().commits for f, c in fol.items()}
        r = ctl(leader, cmd, **kw)
        if not r.get("ok"):
            check(False, "leader refused %s %s: %s" % (cmd, kw, r))
            break
        sets += cmd == "set"
        paused = cmd == "pause" or (paused and cmd not in ("resume",))
        # The reply comes once the leader committed at the effective
        # instant; the followers commit at that instant too (their readers
        # are frozen there until they do), or as soon as a late change
        # arrives (counted in status). Then one instant, every clock.
        for f, c in fol.items():
            wait_for(lambda: c.info().commits > before[f], 2, 0.0002)
        li = lead_clock.info()
        for f, c in fol.items():
            fi = c.info()
            t = max(li.mono_ns, fi.mono_ns)
            errors.append(value_at(fi, t) - value_at(li, t))
    secs = time.monotonic() - t0
    res = readers.finish()
    a = sorted(abs(e) for e in errors)
    n = len(a)
    p50, p99, mx = a[n // 2], a[min(n - 1, int(n * 0.99))], a[-1]
    print("# %d commands in %.1f s on the leader; follower error at each change over %d "
          "samples: p50 %d ns, p99 %d ns, max %d ns" % (COMMANDS, secs, n, p50, p99, mx),
          flush=True)
    check(p50 <= 1000, "the median follower error is within 1 us (%d ns)" % p50)
    for f in followers:
        st = dist(f)
        print("# %s: %d changes, %d late (worst %.3f ms), %d samples lost, applied p99 %d ns"
              % (f, st["changes"], st["late_changes"], st["worst_late_ns"] / 1e6, st["lost"],
                 st.get("applied_p99_ns", -1)), flush=True)
        check(res[f]["back"] == 0, "%s: no backward read within an epoch (%d reads, %d back, "
              "worst %d ns)" % (f, res[f]["reads"], res[f]["back"], res[f]["worst"]))
        check(res[f]["jumps"] == sets, "%s: every jump reached the jump callbacks (%d of %d)"
              % (f, res[f]["jumps"], sets))
    lead_clock.close()
    for c in fol.values():
        c.close()
    return p50, p99, mx


def late_joiner(leader, cfg_follower):
    ctl(leader, "set", time="1234s")
    t0 = time.monotonic()
    name = start("F2", "late", cfg_follower)
    c = shmclock.Clock(name)
    got = wait_for(lambda: c.info().initialized, 10, 0.001)
    took = time.monotonic() - t0
    li, fi = shmclock.Clock(leader).info(), c.info()
    t = max(li.mono_ns, fi.mono_ns)
    err = value_at(fi, t) - value_at(li, t)
    check(got and abs(err) <= 10_000,
          "a follower started after the leader has its current function at once "
          "(%.3f s after its start, error %d ns)" % (took, err))
    c.close()
    procs.pop("late").terminate()
    return name


def host_clock_step(leader, follower, shift_file):
    """The follower's host clock steps back 50 ms, then forward again (the
    SHMCLOCKD_TEST_CLOCK_SHIFT hook: on this host alone): it re-anchors,
    never going back within the epoch, and is then off by exactly what its
    host clock is off by; back in step, it agrees again."""
    readers = Readers([follower])
    lc, fc = shmclock.Clock(leader), shmclock.Clock(follower)
    r0 = dist(follower)["reanchors"]

    def error():
        li, fi = lc.info(), fc.info()
        t = max(li.mono_ns, fi.mono_ns)
        return value_at(fi, t) - value_at(li, t)

    with open(shift_file, "w") as f:
        f.write("-50000000\n")
    ok = wait_for(lambda: dist(follower)["reanchors"] > r0, 5)
    time.sleep(0.15)  # past the 50 ms hold
    e1 = error()
    with open(shift_file, "w") as f:
        f.write("0\n")
    wait_for(lambda: dist(follower)["reanchors"] > r0 + 1, 5)
    time.sleep(0.05)
    e2 = error()
    res = readers.finish()[follower]
    check(ok and abs(e1 + 50 * MS) <= 100_000,
          "a step of the follower's host clock re-anchors it: off by the step (%d ns)" % e1)
    check(abs(e2) <= 1000, "its host clock back in step, it agrees with the leader (%d ns)" % e2)
    check(res["back"] == 0 and res["jumps"] == 0,
          "no backward read and no jump across the host clock's steps (%d back, %d jumps)"
          % (res["back"], res["jumps"]))
    lc.close()
    fc.close()


def kill_leader(leader_tag, followers, cfg_leader, stale_after_s, running):
    readers = Readers(followers)
    time.sleep(0.2)
    procs[leader_tag].kill()
    procs[leader_tag].wait()
    t0 = time.monotonic()
    cs = {f: shmclock.Clock(f) for f in followers}
    for f, c in cs.items():
        ok = wait_for(lambda: c.info().stale, stale_after_s + 5)
        took = time.monotonic() - t0
        # StaleAfter, by the follower's clock thread: late by what a
        # loaded machine delays it (a sanitizer, two suites at once); a
        # follower that waited for its lease (3.5 s) or never went stale
        # still fails.
        check(ok and took <= stale_after_s + 2.0,
              "%s is stale %.3f s after the leader's SIGKILL (StaleAfter %.1f s)"
              % (f, took, stale_after_s))
        try:
            c.now()
            raised = False
        except shmclock.StaleClockError:
            raised = True
        check(raised, "%s: reading a stale clock raises StaleClockError" % f)
        a = c.info()
        time.sleep(0.05)
        b = c.info()
        if f in running:
            check(b.sim_ns > a.sim_ns or a.paused, "%s keeps running while the leader is gone "
                  "(OnLeaderLoss run)" % f)
        else:
            check(b.sim_ns == a.sim_ns, "%s holds its time while the leader is gone "
                  "(OnLeaderLoss hold)" % f)
    # A new leader: same wire clock, a new process (a new identity).
    new = start("L", "leader2", cfg_leader)
    ctl(new, "resume")
    for f, c in cs.items():
        check(wait_for(lambda: not c.info().stale, 10), "%s follows the new leader" % f)
    res = readers.finish()
    for f in followers:
        check(res[f]["jumps"] >= 1, "%s: the new leader reached the jump callbacks (%d jumps)"
              % (f, res[f]["jumps"]))
        check(res[f]["back"] == 0, "%s: no backward read within an epoch across the loss" % f)
        st = dist(f)
        check(st["leaders"] >= 2, "%s: status counts the leaders followed (%d)" % (f, st["leaders"]))
    for c in cs.values():
        c.close()
    return new


def sampler_main(leader, followers, stop, out, count=None):
    """Reads leader, follower, leader, over and over: the follower's value
    must lie between the two leader readings (within 1 us) unless the
    follower is marked stale. Counts the samples outside and their size
    (and, in @count, the samples compared so far)."""
    lc = shmclock.Clock(leader)
    fcs = [shmclock.Clock(f) for f in followers]
    n = stale = across = 0
    outside, seen = [], []
    i = 0
    while not stop.is_set():
        fc = fcs[i % len(fcs)]
        i += 1
        a = lc.info()
        b = fc.info()
        c = lc.info()
        if not (a.initialized and b.initialized and c.initialized):
            continue
        if b.stale:
            stale += 1
            continue
        if a.jump_epoch != c.jump_epoch:
            # The leader jumped between its two readings: the follower may
            # show either function, at an instant between them, and
            # [a, c] is not where those lie (a jump back: new(t_b) < c,
            # old(t_b) > a). A follower that jumps late is still seen by
            # the samples after the jump, within one epoch.
            across += 1
            continue
        lo, hi = min(a.sim_ns, c.sim_ns), max(a.sim_ns, c.sim_ns)
        n += 1
        if count is not None and n % 256 == 0:
            count.value = n
        if b.sim_ns < lo - 1000 or b.sim_ns > hi + 1000:
            outside.append(b.sim_ns - lo if b.sim_ns < lo else b.sim_ns - hi)
            if len(seen) < 5:
                seen.append("%s: leader %d (mono %d, epoch %d, scale %g%s) .. %d (mono %d, epoch %d, "
                            "scale %g%s), follower %d (mono %d, epoch %d, scale %g%s)"
                            % (followers[(i - 1) % len(fcs)], a.sim_ns, a.mono_ns, a.jump_epoch,
                               a.scale, " paused" if a.paused else "", c.sim_ns, c.mono_ns,
                               c.jump_epoch, c.scale, " paused" if c.paused else "", b.sim_ns,
                               b.mono_ns, b.jump_epoch, b.scale, " paused" if b.paused else ""))
    for line in seen:
        print("# outside: " + line, flush=True)
    out.put((n, stale, across, outside))


class Sampler:
    """sampler_main in a process of its own, over @followers against
    @leader, until finish(): (samples, stale, across a jump, outside)."""

    def __init__(self, leader, followers):
        self.stop, self.q = mp.Event(), mp.Queue()
        self.count = mp.Value("q", 0, lock=False)
        self.p = mp.Process(target=sampler_main,
                            args=(leader, followers, self.stop, self.q, self.count))
        self.p.start()

    def compared(self):
        """The samples compared so far (in steps of 256)."""
        return self.count.value

    def finish(self):
        self.stop.set()
        res = self.q.get(timeout=60)
        self.p.join(10)
        return res


def hog_main():
    while True:
        pass


def pipelined(leader, total, clients, took):
    """@total random changes from @clients clients at once: each waits for
    its change's commit, so up to @clients changes wait on the leader.
    Only changes valid in any state (no step: whether the clock is paused
    depends on the order the leader takes them in)."""
    refused = []

    def client(n):
        for _ in range(n):
            cmd = random.choice(["pause", "resume", "scale", "set"])
            kw = ({"value": random.choice([0.25, 0.5, 1, 2, 4])} if cmd == "scale" else
                  {"time": "%dms" % random.randrange(0, 10_000_000)} if cmd == "set" else {})
            t = time.monotonic()
            r = ctl(leader, cmd, **kw)
            took.append(time.monotonic() - t)
            if not r.get("ok"):
                refused.append("%s: %s" % (cmd, r))

    ths = [threading.Thread(target=client, args=(total // clients,)) for _ in range(clients)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    check(not refused, "the leader takes every change of %d clients at once under loss (%d "
          "refused%s)" % (clients, len(refused), (": " + refused[0]) if refused else ""))


def lossy_phase(leader, followers, clients=1):
    """Issue 29: random changes with a CPU hog on every core and loss 20 %,
    delay 5 +- 2 ms on every link. Two-phase commit: no follower sample
    outside the leader's readings by more than 1 us while not stale, no
    late change, no backward read. With @clients > 1 the changes come from
    that many clients at once and queue on the leader (it agrees them one
    at a time; before it did, followers switched at instants the leader
    had moved, and 2.7-22 % of their readings were off by up to hours)."""
    # Members, fresh, before the links go bad: what is tested is the
    # agreement among them, not how long a join takes under loss.
    check(wait_for(lambda: all(not dist(f)["stale"] for f in followers) and
                   len(dist(leader).get("followers", [])) >= len(followers), 20, 0.1),
          "the followers are fresh members of %s before the loss" % leader)
    how = net.impair(True)
    print("# loss 20 %%, delay 5 ms +- 2 ms on every link, by %s; a CPU hog on each of %d "
          "cores; %d client%s" % (how, os.cpu_count(), clients, "s at once" if clients > 1 else ""),
          flush=True)
    hogs = [mp.Process(target=hog_main, daemon=True) for _ in range(os.cpu_count() or 2)]
    for h in hogs:
        h.start()
    before = {f: dist(f) for f in followers}
    lbefore = dist(leader)
    readers = Readers(followers)
    sampler = Sampler(leader, followers)
    lc = shmclock.Clock(leader)
    paused = lc.info().paused
    took = []
    t0 = time.monotonic()
    total = PIPELINED_COMMANDS if clients > 1 else LOSSY_COMMANDS
    if clients > 1:
        pipelined(leader, total, clients, took)
    # The changes asked for; then more, up to 20 s, until the sampler has
    # compared enough samples (a starved machine may keep the followers
    # stale a while: the safe side, which compares nothing).
    k = 0
    while clients == 1 and (k < LOSSY_COMMANDS or (sampler.compared() <= 1000 and
                                                  time.monotonic() - t0 < 20)):
        k += 1
        cmd, kw = random_command(paused)
        t = time.monotonic()
        r = ctl(leader, cmd, **kw)
        took.append(time.monotonic() - t)
        if not r.get("ok"):
            check(False, "leader refused %s under loss: %s" % (cmd, r))
            break
        paused = cmd == "pause" or (paused and cmd != "resume")
    secs = time.monotonic() - t0
    time.sleep(0.5)
    n, stale, across, outside = sampler.finish()
    res = readers.finish()
    for h in hogs:
        h.kill()
    net.impair(False)
    lst = dist(leader)
    took.sort()
    print("# %d changes under loss and load in %.1f s: command to commit p50 %.1f ms, p99 %.1f ms; "
          "Lead now %.1f ms, ack p99 %.1f ms, %d postponed, %d followers lost"
          % (len(took), secs, took[len(took) // 2] * 1e3, took[int(len(took) * 0.99)] * 1e3,
             lst["lead_current_ns"] / 1e6, lst.get("ack_p99_ns", 0) / 1e6,
             lst["postponed"] - lbefore["postponed"],
             lst["lost_followers"] - lbefore["lost_followers"]), flush=True)
    a = sorted(abs(x) for x in outside)
    print("# %d follower samples between two leader readings (%d while stale, %d across a leader "
          "jump): %d outside by more than 1 us%s" % (n, stale, across, len(a),
                                                    (" (p50 %d ns, max %d ns; %d ahead, %d behind)"
                                                   % (a[len(a) // 2], a[-1],
                                                      sum(1 for x in outside if x > 0),
                                                      sum(1 for x in outside if x < 0)))
                               if a else ""), flush=True)
    check(n > 1000, "the sampler compared enough samples (%d)" % n)
    # Every host's readers switch at the instant by themselves (a change
    # decided ahead: the segment's next line), so lateness of a clock
    # thread shows nowhere; a follower that has not heard the commit by
    # the instant, or missed an announcement, holds there and its readers
    # say so (stale: counted apart above).
    if not check(not a, "no follower sample outside the leader's readings by more than 1 us "
                 "while not stale (%d of %d)" % (len(a), n)):
        log_lines("stale|re-anchor|missed|due|lost|following|instant")
    for h in [leader] + list(followers):
        b = lbefore if h == leader else before[h]
        print("# %s: %d changes decided ahead of their instant"
              % (h, dist(h)["decided_ahead"] - b["decided_ahead"]), flush=True)
    # Losing a follower is the protocol's answer to a member silent for its
    # lease: a fault only while the leader kept its pace. A machine so
    # starved that even the p99 of the changes took longer than the
    # largest Lead (1 s: CI once ran this phase 2.7 times slower under
    # ASan beside other work, p99 1011 ms) delays the user-space hub's
    # packets by as much; a protocol stall of one change shows in the max,
    # never in that p99.
    lost = lst["lost_followers"] - lbefore["lost_followers"]
    # (A client's command waits for the changes queued before it.)
    starved = took[int(len(took) * 0.99)] > 1.0 * clients
    if lost and starved:
        print("# %d followers lost on a starved machine (command to commit p99 over the 1 s "
              "largest Lead): not counted" % lost, flush=True)
    elif not check(lost == 0, "no follower is declared lost under loss and load (%d)" % lost):
        log_lines("lost|postponed|gap|plan")
    if lost:
        log_lines("lost")
    for f in followers:
        st = dist(f)
        late = st["late_changes"] - before[f]["late_changes"]
        print("# %s: %d changes, %d late, %d held at an instant, %d stale from holding, %d samples "
              "lost, %d reached their instant before its clock thread ran"
              % (f, st["changes"] - before[f]["changes"], late,
                 st["holds"] - before[f]["holds"],
                 st["hold_stales"] - before[f]["hold_stales"],
                 st["lost"] - before[f]["lost"],
                 st["ran_past_instant"] - before[f]["ran_past_instant"]), flush=True)
        check(res[f]["back"] == 0, "%s: no backward read under loss, delay and load (%d reads, "
              "%d back, worst %d ns)" % (f, res[f]["reads"], res[f]["back"], res[f]["worst"]))
        # Stale from holding: a commit not heard for its bound (2.5 s
        # and more) after the instant; the safe side, never a wrong
        # reading. Under loss a repeat always comes in time unless the
        # machine starved the leader or this follower: then commits came
        # after their instants too (late), and it is reported, not failed
        # (issue 52: under ASan beside other work, 4 late and 1 stale).
        holds = st["hold_stales"] - before[f]["hold_stales"]
        if holds and late:
            print("# %s: %d stale from holding with %d changes committed late (a starved "
                  "machine): not counted" % (f, holds, late), flush=True)
        else:
            check(holds == 0, "%s: never stale from holding an instant while its links work (%d)"
                  % (f, holds))
    lc.close()


def link_drop_phase(leader, followers):
    """A follower whose link drops for 2 s: it is stale within its silence
    bound, the leader and the other follower go on (a change waits at most
    for the lost follower's lease), and it catches up on return without a
    backward read."""
    import threading
    gone, other = followers[1], followers[0]
    readers = Readers([gone])
    gc, oc = shmclock.Clock(gone), shmclock.Clock(other)
    lc = shmclock.Clock(leader)
    # The leader declares a follower lost after 0.5 s + 2 Lead, or its
    # lease (3.5 s at least) if longer; a change may wait that long.
    bound = max(0.5 + 2 * dist(leader)["lead_current_ns"] / 1e9, 3.5)
    worst = [0.0]
    refused = []

    def changes():
        paused = lc.info().paused
        t0 = time.monotonic()
        while time.monotonic() - t0 < 2.0:
            cmd, kw = random_command(paused)
            t = time.monotonic()
            r = ctl(leader, cmd, **kw)
            worst[0] = max(worst[0], time.monotonic() - t)
            if not r.get("ok"):
                refused.append((cmd, r))
            paused = cmd == "pause" or (paused and cmd != "resume")
            time.sleep(0.05)
    nsx("R", "ip", "link", "set", "r" + HOSTS[2], "down")
    t0 = time.monotonic()
    th = threading.Thread(target=changes)
    th.start()
    stale_at = None
    while time.monotonic() - t0 < 2.0:
        if stale_at is None and gc.info().stale:
            stale_at = time.monotonic() - t0
        time.sleep(0.005)
    nsx("R", "ip", "link", "set", "r" + HOSTS[2], "up")
    th.join()
    print("# link of %s down 2 s: stale after %s s (StaleAfter 0.6 s); the worst change on the "
          "leader took %.3f s (bound %.3f s)" % (
              gone, "%.3f" % stale_at if stale_at is not None else "never", worst[0], bound),
          flush=True)
    check(not refused, "the leader takes every change while a follower's link is down (%s)"
          % refused[:1])
    # Loose bounds (a shared machine): stale during the 2 s drop, changes
    # held no longer than twice the lost follower's lease; the times are
    # printed above.
    check(stale_at is not None, "%s is stale while its link is down" % gone)
    check(worst[0] <= 2 * bound, "the leader goes on without it: the worst change took %.3f s "
          "(lease %.3f s)" % (worst[0], bound))
    check(not oc.info().stale, "%s stays fresh" % other)
    check(wait_for(lambda: not gc.info().stale, 10), "%s catches up once its link is back" % gone)
    res = readers.finish()
    check(res[gone]["back"] == 0, "%s: no backward read across the drop (%d back)"
          % (gone, res[gone]["back"]))
    for c in (gc, oc, lc):
        c.close()


def changes_every(leader, secs):
    """Random changes on @leader, one every @secs, in a thread until the
    event returned is set: (event, thread, the changes refused)."""
    done, refused = threading.Event(), []

    def changes():
        paused = shmclock.Clock(leader).info().paused
        while not done.is_set():
            cmd, kw = random_command(paused)
            r = ctl(leader, cmd, **kw)
            if not r.get("ok"):
                refused.append((cmd, r))
            paused = cmd == "pause" or (paused and cmd != "resume")
            time.sleep(secs)
    th = threading.Thread(target=changes)
    th.start()
    return done, th, refused


def oneway_phase(leader, followers):
    """A follower that stops hearing its leader while the leader still
    hears it (one way, 0.9 s or until it is stale, four times) while the leader makes a change
    every 20 ms: it goes stale by silence and says it leaves, which the
    leader hears (it goes on without it at once); back, it is stale until
    the leader echoes its lease and it heard what the leader decided
    meanwhile. Its readings lie on the leader's function whenever they are
    not stale. (Fresh at once on its return, it could show the function
    before a change decided without it past that change's instant: a CI
    run under ASan, 747 readings 23.6 ms ahead.)"""
    gone = followers[1]
    hub = net.start_hub(0.0, 0.0, 0.0)
    sampler = Sampler(leader, [gone])
    done, th, refused = changes_every(leader, 0.02)
    gc = shmclock.Clock(gone)
    stale = back = 0
    worst = worst_stale = 0.0
    before = dist(gone)
    try:
        for _ in range(4):
            hub.stdin.write("drop r%s r%s\n" % (HOSTS[0], HOSTS[2]))
            hub.stdin.flush()
            hub.stdout.readline()
            t0 = time.monotonic()
            # Cut for 0.9 s, or until it is stale (by silence: StaleAfter
            # 0.6 s, later on a starved machine; 10 s at most).
            if wait_for(lambda: gc.info().stale, 10, 0.01):
                stale += 1
                worst_stale = max(worst_stale, time.monotonic() - t0)
            time.sleep(max(0.0, 0.9 - (time.monotonic() - t0)))
            hub.stdin.write("pass\n")
            hub.stdin.flush()
            hub.stdout.readline()
            t1 = time.monotonic()
            back += wait_for(lambda: not gc.info().stale, 10, 0.01)
            worst = max(worst, time.monotonic() - t1)
            time.sleep(0.3)
    finally:
        done.set()
        th.join()
        sampler.stop.set()  # ends it on a failure too (a child left would hang the exit)
    n, nstale, across, outside = sampler.finish()
    gc.close()
    net.impair(False)
    after = dist(gone)
    print("# one way (leader to %s) cut 0.9 s, 4 times, a change every 20 ms: stale %d times "
          "(at worst %.3f s into the cut), fresh again %d times (at worst %.3f s after the cut "
          "ended); %d samples (%d stale, %d across a jump): %d outside by more than 1 us"
          % (gone, stale, worst_stale, back, worst, n, nstale, across, len(outside)), flush=True)
    check(not refused, "the leader takes every change (%s)" % refused[:1])
    check(stale == 4 and back == 4, "%s is stale each time it cannot hear the leader (%d of 4) "
          "and fresh once back (%d of 4)" % (gone, stale, back))
    check(not outside, "no sample of %s outside the leader's readings by more than 1 us while "
          "not stale (%d of %d; worst %s ns)" % (gone, len(outside), n,
                                                   max(outside, key=abs) if outside else 0))
    check(after.get("echoes", 0) > before.get("echoes", 0),
          "its leases were echoed (%s -> %s)" % (before.get("echoes"), after.get("echoes")))


def storm_phase(leader, cfg_follower):
    """STORM followers start at once, half on each follower host, while
    the leader makes a change every 20 ms: each is fresh once the leader
    echoed a lease of its own (counted), and never off the leader's function
    while not stale; the leader takes every change and counts them all;
    stopped at once, each says it leaves and the leader lets them all go."""
    before = dist(leader)
    base = len(before["followers"])
    names = [None] * STORM
    errors = []

    def one(k):
        try:
            names[k] = start(HOSTS[1 + k % 2], "storm%d" % k, cfg_follower)
        except Exception as e:  # said below, with the others
            errors.append(repr(e))
    done, th, refused = changes_every(leader, 0.02)
    t0 = time.monotonic()
    starters = [threading.Thread(target=one, args=(k,)) for k in range(STORM)]
    for t in starters:
        t.start()
    for t in starters:
        t.join()
    check(not errors, "%d followers start at once (%s)" % (STORM, errors[:1]))
    if errors:
        done.set()
        th.join()
        for k in range(STORM):  # those that did start: not members in what follows
            p = procs.pop("storm%d" % k, None)
            if p:
                p.kill()
                p.wait()
        return
    sampler = Sampler(leader, names)
    cs = [shmclock.Clock(n) for n in names]
    try:
        fresh = wait_for(lambda: all(c.info().initialized and not c.info().stale for c in cs),
                         90, 0.05)
        took = time.monotonic() - t0
        counted = wait_for(lambda: len(dist(leader)["followers"]) >= base + STORM, 30, 0.1)
        time.sleep(1.0)  # changes decided with every one of them
    finally:
        done.set()
        th.join()
        sampler.stop.set()  # ends it on a failure too (a child left would hang the exit)
    n, nstale, across, outside = sampler.finish()
    for c in cs:
        c.close()
    members = len(dist(leader)["followers"])
    # Each was admitted by an echo of its own lease (not fresh at once).
    unechoed = [n for n in names if dist(n).get("echoes", 0) < 1]
    print("# %d followers started at once, a change every 20 ms: all fresh %.1f s after the "
          "start, the leader counts %d members; %d samples (%d stale, %d across a jump): %d "
          "outside by more than 1 us" % (STORM, took, members, n, nstale, across, len(outside)),
          flush=True)
    check(fresh and not unechoed, "every follower of the storm is fresh, once its lease is "
          "echoed (%.1f s; %d fresh without an echo)" % (took, len(unechoed)))
    check(counted, "the leader counts every one of them (%d of %d)" % (members, base + STORM))
    check(not refused, "the leader takes every change meanwhile (%s)" % refused[:1])
    check(not outside, "no sample outside the leader's readings by more than 1 us while not "
          "stale (%d of %d; worst %s ns)" % (len(outside), n,
                                             max(outside, key=abs) if outside else 0))
    # All stopped at once: each says it leaves.
    ps = [procs.pop("storm%d" % k) for k in range(STORM)]
    for p in ps:
        p.send_signal(signal.SIGTERM)
    codes = []
    for p in ps:
        try:
            codes.append(p.wait(20))
        except subprocess.TimeoutExpired:
            p.kill()
            codes.append(p.wait())
    left = wait_for(lambda: len(dist(leader)["followers"]) == base, 10, 0.1)
    after = dist(leader)
    check(all(c == 0 for c in codes), "SIGTERM ends every one of them cleanly (%s)" % codes)
    check(left, "the leader lets them all go (%d members, %d before the storm)"
          % (len(after["followers"]), base))
    check(after.get("lost_followers", 0) == before.get("lost_followers", 0),
          "... as leaves, none lost (%s -> %s)"
          % (before.get("lost_followers"), after.get("lost_followers")))


def split_brain(leader, leader_tag, followers, cfg_leader):
    """A second live leader of the same wire clock, started after the first:
    it takes a higher term and leads, the first stops publishing, every host
    reports the conflict; followers switch once (a jump, with callbacks) and
    never back. Then the other order: a leader at 0 after one at 1000 s."""
    readers = Readers(followers)
    cur, cur_tag = leader, leader_tag
    for tag, start_at in (("leader3", "1000s"), ("leader4", "0s")):
        before = {f: dist(f) for f in followers}
        old = dist(cur)
        old_term = old["term"]
        t0 = time.monotonic()
        new = start("L", tag, dict(cfg_leader, StartTime=start_at))
        hosts = [cur, new] + followers
        seen = dict(before, **{cur: old, new: {"conflicts": 0}})

        def all_conflict():
            # a new conflict on every host (an earlier one may still show)
            return all(dist(h)["conflicts"] > seen[h]["conflicts"] and dist(h)["conflict"]
                       for h in hosts) and dist(new)["term"] > 0
        ok = wait_for(all_conflict, 10)
        took = time.monotonic() - t0
        print("# %s (StartTime %s) after a live leader: conflict in status on every host "
              "%.3f s after its start (it listens 0.5 s for terms first)" % (tag, start_at, took),
              flush=True)
        # About a second (printed above); the bound leaves a loaded
        # machine (daemons under a sanitizer, starting) 3 s more.
        check(ok and took < 1.5 + 3.5, "%s: conflict in status on every host within seconds "
              "of its first message (%.3f s)" % (tag, took))
        dn, do = dist(new), dist(cur)
        check(dn["term"] > old_term and not dn["deposed"] and do["deposed"],
              "%s takes term %d above %d and leads; the first stops publishing (deposed)"
              % (tag, dn["term"], old_term))
        for f in followers:
            check(wait_for(lambda: dist(f)["leader"] == dn["leader"], 5),
                  "%s follows the leader with the higher term" % f)
        time.sleep(1.0)  # the deposed one may not win them back
        for f in followers:
            st = dist(f)
            check(st["leader"] == dn["leader"] and st["leaders"] == before[f]["leaders"] + 1,
                  "%s: followed the higher term once, never back (%d leaders followed)"
                  % (f, st["leaders"] - before[f]["leaders"]))
        if SHMCLOCKCTL:
            for h in hosts:
                for cmd in (["status"], ["watch", "--count", "1"]):
                    out = subprocess.run([SHMCLOCKCTL, "-n", h] + cmd, capture_output=True,
                                         text=True,
                                         env=dict(os.environ, SHMCLOCK_RUNTIME_DIR=rtdir))
                    check("CONFLICT" in out.stdout, "shmclockctl %s on %s shows the conflict"
                          % (cmd[0], h))
        procs.pop(cur_tag).terminate()
        cur, cur_tag = new, tag
    res = readers.finish()
    for f in followers:
        check(res[f]["back"] == 0 and res[f]["jumps"] == 2,
              "%s: no backward read within an epoch across the two takeovers (%d back, %d jumps)"
              % (f, res[f]["back"], res[f]["jumps"]))


def clocks_disagree(follower, shift_file):
    """The follower's host clock 5 s ahead of the leader's (the test hook):
    status says so with the offset, the log with the fix; back in step, it
    agrees again."""
    with open(shift_file, "w") as f:
        f.write("5000000000\n")
    t0 = time.monotonic()
    # (8 messages at 5/s fill the window, then it must last 1 s.)
    ok = wait_for(lambda: dist(follower).get("clocks_disagree"), 10)
    st = dist(follower)
    print("# host clock 5 s ahead: reported after %.3f s, offset %.3f s"
          % (time.monotonic() - t0, st.get("host_offset_ns", 0) / 1e9), flush=True)
    check(ok and abs(st["host_offset_ns"] - 5 * SEC) < 100 * MS,
          "a follower whose host clock is 5 s ahead says so in status, with the offset")
    log = open(os.path.join(rtdir, "f1.log")).read()
    check("5.0" in log and "ahead of" in log and "TAI" in log,
          "... and in the log, with how to fix it")
    with open(shift_file, "w") as f:
        f.write("0\n")
    check(wait_for(lambda: not dist(follower).get("clocks_disagree"), 10),
          "back in step, it agrees again")


def main():
    net.make()
    wire = "hosts-wire-" + RUN
    lead = {"TimeSource": "simulation", "Distribute": {"Publish": True, "Clock": wire,
                                                       "Lead": "2ms"}}
    follow = {"TimeSource": "leader", "Distribute": {"Clock": wire, "StaleAfter": "600ms"}}
    # F1 also publishes /clock from its own function for the ROS 2 nodes
    # of its host; F2 keeps running when the leader is lost.
    follow1 = dict(follow, Ros2={"Publish": True, "PublishHz": 100})
    follow2 = dict(follow, Distribute=dict(follow["Distribute"], OnLeaderLoss="run"))
    leader = start("L", "leader", lead)
    shift_file = os.path.join(rtdir, "f1-clock-shift")
    with open(shift_file, "w") as f:
        f.write("0\n")
    f1 = start("F1", "f1", follow1, {"SHMCLOCKD_TEST_CLOCK_SHIFT": shift_file})
    f2 = start("F2", "f2", follow2)
    for f in (f1, f2):
        c = shmclock.Clock(f)
        check(wait_for(lambda: c.info().initialized, 10), "%s gets the leader's function" % f)
        c.close()
    r = ctl(f1, "pause")
    check(not r.get("ok") and "leader" in r.get("error", ""),
          "a follower refuses changes, naming the leader: %s" % r.get("error"))
    # /clock on F1's host, from F1's function: a ros2 follower there gets it.
    c1 = start("F1", "ros2", {"TimeSource": "ros2"})
    c = shmclock.Clock(c1)
    got = wait_for(lambda: c.info().initialized, 10)
    fi, ci = shmclock.Clock(f1).info(), c.info()
    check(got and abs(value_at(fi, ci.mono_ns) - ci.sim_ns) <= 50 * MS,
          "a follower publishes /clock from its own function (Ros2.Publish)")
    c.close()
    procs.pop("ros2").terminate()
    commands_phase(leader, [f1, f2])
    # At rest the leader repeats its function: heartbeats, not new changes
    # (its check of what it published against what it holds agrees).
    before = dist(leader)
    time.sleep(0.7)
    after = dist(leader)
    check(after["changes"] == before["changes"] and after["sent"] > before["sent"],
          "at rest the leader sends heartbeats (%d), no new change (%d -> %d)"
          % (after["sent"] - before["sent"], before["changes"], after["changes"]))
    late_joiner(leader, follow)
    ctl(leader, "resume")
    ctl(leader, "scale", value=1)
    host_clock_step(leader, f1, shift_file)
    new_leader = kill_leader("leader", [f1, f2], lead, 0.6, [f2])
    lossy_phase(new_leader, [f1, f2])
    lossy_phase(new_leader, [f1, f2], PIPELINED_CLIENTS)
    link_drop_phase(new_leader, [f1, f2])
    oneway_phase(new_leader, [f1, f2])
    storm_phase(new_leader, follow)
    split_brain(new_leader, "leader2", [f1, f2], lead)
    clocks_disagree(f1, shift_file)


if __name__ == "__main__":
    hostsenv.run(main, cleanup, procs, rtdir)
