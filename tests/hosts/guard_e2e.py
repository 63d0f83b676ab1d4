#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Nothing a leader sends can hang a follower, and no change hangs a
leader (issue 29), through the built shmclockd on loopback (Cyclone DDS
bound to 127.0.0.1, a domain of this run's own):

- a rogue publisher (rogue-publisher, the TimeFunction topic written
  directly) sends a valid function, then instants 30 s ahead and 30 s
  behind, INT64_MAX and INT64_MIN, heartbeat -1, a function going
  backwards without a jump: the follower refuses each (counted in status,
  logged once per leader and kind), its clock goes on with the valid
  function, status answers quickly throughout, SIGTERM ends it promptly;
- a follower back from silence whose leader's function in force starts at
  an instant still to come (a change decided ahead) stays stale until that
  instant: until then the leader shows a function it may have missed (here
  a pause), never the one it had, running on;
- a follower back from silence on a function decided ahead, stopped
  before its instant: its readers switch there stale, not fresh (the leader
  does not wait for it until it says it follows);
- a real leader and follower, the follower stopped longer than its lease
  while the leader pauses without it: its readers stop at the end of the
  lease, stale, never fresh past the pause; continued, it says its lease
  ran out and rejoins on the pause, forwards; stopped (SIGTERM), it marks
  its clock stale and leaves, and the leader's next change does not wait
  for its lease; restarted with the leader gone, it stays stale;
- a follower whose clock thread is stopped from before a change's instant
  until after it (a loaded host at normal priority) counts it in status
  and says so in its log (its readers showed the previous function
  meanwhile: printed, not fixed);
- a rogue leader that echoes leases only when told: its follower is
  stale until an echo of its own lease, of that leader's term, naming a
  change it has heard; stale again when the echoes stop while the leader is
  heard (a one-way break); joined on two functions decided ahead, stale past
  both until the echo; lost while it waits for the echo, its readers stop;
  a pause heard late while it waits: on the leader's pause once echoed;
- a rogue sends random samples for 20 s (changes moved, committed under
  the wrong plan, instants behind and ahead, jumps, functions going back,
  gaps, silences) while the follower is SIGSTOPped and continued at
  random: its time never goes back within a jump epoch, and it answers
  status and ends on SIGTERM after it;
- a leader with Lead 20ms gets one write of 200 pause/resume lines and
  another of 100: the changes queue (64 at most, the rest refused with a
  clear reason, the clients' further lines read as room comes), each agreed
  and made in turn, one at a time; status from another client answers at
  once, every line is answered in order, and SIGTERM with changes queued
  ends it promptly.

Times are printed; the assertions take generous bounds (a loaded CI
machine), far below the tens of seconds a blocked clock thread took.
Environment: SHMCLOCKD, ROGUE, PYTHONPATH (the built module).
"""
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from hostsenv import check, ctl_at, remove, start_daemon, starved, wait_for
import hostsenv

SHMCLOCKD = os.environ["SHMCLOCKD"]
ROGUE = os.environ["ROGUE"]
SEC = 1_000_000_000
RUN = "%d-%d" % (os.getpid(), random.randrange(1 << 20))
DOMAIN = 150 + random.randrange(80)
BOUND = 1.0  # s: generous for "promptly" (the issue's target is 100 ms)
# Split-brain runs: 50 (issue 52); under a sanitizer, where the whole test
# runs again for memory errors, not for this count, 10.
SANITIZED = os.environ.get("SANITIZE", "none") not in ("", "none")
SPLIT_RUNS = int(os.environ.get("GUARD_SPLIT_RUNS", 10 if SANITIZED else 50))
procs = []
clocks = []
rtdir = tempfile.mkdtemp(prefix="shmclock-guard-")


try:
    import shmclock
except ImportError as e:
    print("skip: the shmclock Python module was not built: %s" % e)
    sys.exit(77)

URI = ('<CycloneDDS><Domain id="any"><General><Interfaces><NetworkInterface address="127.0.0.1"/>'
       '</Interfaces><AllowMulticast>false</AllowMulticast></General><Discovery>'
       '<ParticipantIndex>auto</ParticipantIndex><MaxAutoParticipantIndex>20'
       '</MaxAutoParticipantIndex><Peers><Peer address="127.0.0.1"/></Peers></Discovery>'
       '</Domain></CycloneDDS>')
ENV = dict(os.environ, CYCLONEDDS_URI=URI, SHMCLOCK_RUNTIME_DIR=rtdir)


def start(tag, cfg, env=None):
    name = "guard-%s-%s" % (RUN, tag)
    clocks.append(name)
    p = start_daemon(SHMCLOCKD, rtdir, tag, name, dict(cfg, Ros2={"Domain": DOMAIN}),
                     dict(ENV, **(env or {})))
    procs.append(p)
    return name, p


def ctl(name, cmd, **kw):
    """One request; (reply, seconds it took)."""
    t0 = time.monotonic()
    r = ctl_at(os.path.join(rtdir, name + ".sock"), cmd, **kw)
    return r, time.monotonic() - t0


def stop_timed(p):
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        return None
    return time.monotonic() - t0


def start_rogue(wire):
    """The rogue publisher on @wire, and a function that sends one sample
    through it (True once written)."""
    rogue = subprocess.Popen([ROGUE, str(DOMAIN), wire], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=ENV)
    procs.append(rogue)

    def send(leader, change, eff, base, mult=1 << 32, flags=0, epoch=0, hb=200_000_000,
             committed=None, plan=None, lead=None):
        if lead is not None:  # the fields before it, as a leader has them
            committed = change if committed is None else committed
            plan = 0 if plan is None else plan
        rogue.stdin.write("%s %d %d %d %d %d %d %d%s%s%s\n"
                          % (leader, change, eff, base, mult, flags, epoch, hb,
                             "" if committed is None else " %d" % committed,
                             "" if plan is None else " %d" % plan,
                             "" if lead is None else " %d" % lead))
        rogue.stdin.flush()
        return rogue.stdout.readline().strip() == "ok"

    def ack(follower, leader, term, plan=0, acked=0, committed=0, lease=3_500_000_000, late=0,
            refused=0, holds=0, best_effort=False, age=0):
        """One TimeAck (a follower's lease, reliably; or best effort, as an
        acknowledgement, said written @age ns ago); "-": empty."""
        rogue.stdin.write("%s %s %s %d %d %d %d %d %d %d %d%s\n"
                          % ("ackbe" if best_effort else "ack", follower, leader, term, plan,
                             acked, committed, lease, late, refused, holds,
                             " %d" % age if best_effort else ""))
        rogue.stdin.flush()
        return rogue.stdout.readline().strip() == "ok"
    def echo(leader, term, change, forged=None, count=1):
        """Echoes the leases the rogue took since its last echo (waiting up
        to 3 s for one), as @leader's of @term that announced @change; with
        @forged, @count echoes stamped from @forged on instead of each
        lease's. The echoes written."""
        rogue.stdin.write("echo %s %d %d%s\n" % (leader, term, change,
                                                 "" if forged is None else
                                                 " %d %d" % (forged, count)))
        rogue.stdin.flush()
        out = rogue.stdout.readline().split()
        return int(out[1]) if out[:1] == ["ok"] else 0
    def match():
        """Waits (10 s at most) until a follower's reader matched."""
        rogue.stdin.write("match\n")
        rogue.stdin.flush()
        return rogue.stdout.readline().strip() == "ok"
    def echostate(follower):
        """A leader's echoes to @follower as a reader sees them: "alive",
        "gone" or "none"."""
        rogue.stdin.write("echostate %s\n" % follower)
        rogue.stdin.flush()
        out = rogue.stdout.readline().split()
        return out[1] if out[:1] == ["ok"] else "error"
    send.ack = ack
    send.echo = echo
    send.match = match
    send.echostate = echostate
    return rogue, send


def real():
    return time.clock_gettime_ns(time.CLOCK_REALTIME)


def rogue_follower(tag, leader, stale_after, env=None, lead=None, dist=None):
    """A follower (StaleAfter @stale_after, @env added to its environment,
    @dist to its Distribute section) of a rogue @leader on a wire of its
    own, following the rogue's function 1 (time 0 at t0, rate 1, Lead @lead
    ns): (name, process, rogue, send, clock, t0)."""
    wire = "guard-%s-%s" % (tag, RUN)
    name, p = start(tag, {"TimeSource": "leader",
                          "Distribute": dict({"Clock": wire, "StaleAfter": stale_after},
                                             **(dist or {}))}, env)
    rogue, rogue_send = start_rogue(wire)
    t0 = real()
    check(rogue_send(leader, 1, t0, 0, lead=lead), "the rogue publisher writes")
    clk = shmclock.Clock(name)
    check(wait_for(lambda: clk.info().initialized and not clk.info().stale, 20),
          "the follower takes function 1")
    return name, p, rogue, rogue_send, clk, t0


def echo_follower(tag, stale_after="2s"):
    """A follower (StaleAfter @stale_after) and the rogue publisher on a
    wire of their own, the follower's reader matched: (name, process,
    rogue, send)."""
    wire = "guard-%s-%s" % (tag, RUN)
    name, p = start(tag, {"TimeSource": "leader",
                          "Distribute": {"Clock": wire, "StaleAfter": stale_after}})
    rogue, send = start_rogue(wire)
    check(send.match(), "the rogue's writer matched the follower")
    return name, p, rogue, send


def finish(clk, rogue, p):
    """The end of a phase: @clk closed (if any), the rogue publisher
    ended, the daemon stopped in time."""
    if clk is not None:
        clk.close()
    rogue.stdin.close()
    rogue.wait(10)
    stop_timed(p)

def rogue_phase():
    wire = "guard-wire-" + RUN
    name, p = start("follower", {"TimeSource": "leader",
                                 "Distribute": {"Clock": wire, "StaleAfter": "5s"}})
    rogue, send = start_rogue(wire)

    # A valid function: time = 0 at t0 (CLOCK_REALTIME), rate 1.
    t0 = time.clock_gettime_ns(time.CLOCK_REALTIME)
    check(send("rogue/1", 1, t0, 0), "the rogue publisher writes")
    clk = shmclock.Clock(name)
    check(wait_for(lambda: clk.info().initialized, 20),
          "the follower takes the rogue's valid function")
    now = time.clock_gettime_ns(time.CLOCK_REALTIME)
    bad = [
        ("an instant 30 s ahead", ("rogue/1", 2, now + 30 * SEC, 40 * SEC)),
        ("an instant 30 s behind", ("rogue/1", 3, now - 30 * SEC, 0)),
        ("INT64_MAX as instant", ("rogue/1", 4, 2**63 - 1, 0)),
        ("INT64_MIN as instant", ("rogue/1", 5, -2**63, 0)),
        ("heartbeat -1", ("rogue/1", 6, now + 10_000_000, (now - t0) + 10_000_000, 1 << 32, 0,
                          0, -1)),
        ("heartbeat 0", ("rogue/1", 7, now + 10_000_000, (now - t0) + 10_000_000, 1 << 32, 0,
                         0, 0)),
        ("a function going back 5 s without a jump",
         ("rogue/1", 8, now + 10_000_000, (now - t0) - 5 * SEC)),
        ("INT64_MAX from a new leader", ("rogue/2", 1, 2**63 - 1, 0)),
        ("a rate of 0", ("rogue/1", 9, now + 10_000_000, (now - t0), 0)),
    ]
    worst_status = 0.0
    for what, args in bad:
        before = ctl(name, "status")[0]["status"]["distribute"]["refused"]
        check(send(*args), "sent %s" % what)
        got = wait_for(lambda: ctl(name, "status")[0]["status"]["distribute"]["refused"] > before,
                       10)
        # status keeps answering while (and after) the follower refuses
        for _ in range(5):
            r, dt = ctl(name, "status")
            worst_status = max(worst_status, dt)
        st = r["status"]
        check(got, "the follower refuses %s (%s)" % (what,
                                                     st["distribute"].get("refused_last")))
        # the clock goes on with the valid function: time ~ realtime - t0
        i = clk.info()
        want = time.clock_gettime_ns(time.CLOCK_REALTIME) - t0
        check(st["initialized"] and abs(i.sim_ns - want) < 0.5 * SEC and not i.paused,
              "after %s the clock follows the valid function (off by %.3f ms)"
              % (what, (i.sim_ns - want) / 1e6))
    print("# status round trip during the refusals: worst %.1f ms" % (worst_status * 1e3),
          flush=True)
    check(worst_status < BOUND, "status answers within %.1f s throughout (worst %.1f ms)"
          % (BOUND, worst_status * 1e3))
    log = open(os.path.join(rtdir, "follower.log")).read()
    n = log.count("refused a TimeFunction from rogue/1")
    check(0 < n <= 6, "refusals are logged once per leader and kind (%d lines for 8 refusals)" % n)
    r, _ = ctl(name, "pause")
    check(not r["ok"], "a follower still refuses changes from clients: %s" % r.get("error"))
    clk.close()
    dt = stop_timed(p)
    print("# follower: SIGTERM to exit %s" % ("never (killed)" if dt is None else
                                              "%.1f ms" % (dt * 1e3)), flush=True)
    check(dt is not None and dt < BOUND, "SIGTERM ends the follower promptly")
    rogue.stdin.close()
    rogue.wait(10)


def rejoin_phase():
    wire = "guard-rejoin-" + RUN
    name, p = start("rejoiner", {"TimeSource": "leader",
                                 "Distribute": {"Clock": wire, "StaleAfter": "600ms"}})
    rogue, rogue_send = start_rogue(wire)

    def send(change, eff, base):
        return rogue_send("rogue/3", change, eff, base)

    # The leader's function: 1, running from 0 at t0; 2, paused at t2 (this
    # follower misses it, silent meanwhile); 3, running again from there at
    # t3, decided ahead (sent before t3).
    t0 = time.clock_gettime_ns(time.CLOCK_REALTIME)
    check(send(1, t0, 0), "the rogue publisher writes")
    clk = shmclock.Clock(name)
    check(wait_for(lambda: clk.info().initialized, 20), "the follower takes function 1")
    check(wait_for(lambda: clk.info().stale, 10), "silent, the follower is stale")
    t2 = time.clock_gettime_ns(time.CLOCK_REALTIME) - 200_000_000
    t3 = time.clock_gettime_ns(time.CLOCK_REALTIME) + 1_200_000_000
    held = t2 - t0
    check(send(3, t3, held), "sent function 3, 1.2 s ahead, function 2 missed")
    wrong = polls = 0
    while time.clock_gettime_ns(time.CLOCK_REALTIME) < t3 - 150_000_000:
        i = clk.info()
        polls += 1
        if not i.stale and abs(i.sim_ns - held) > 1_000_000:
            wrong += 1
        if polls % 10 == 0:
            send(3, t3, held)  # the leader's heartbeats (silent 0.6 s, it would be stale)
        time.sleep(0.01)
    print("# back from silence before the instant: %d of %d readings fresh and off the leader's "
          "pause" % (wrong, polls), flush=True)
    check(polls > 20 and wrong == 0, "a follower back from silence is stale until its leader's "
          "function takes effect (%d of %d readings off, not stale)" % (wrong, polls))

    def fresh():
        send(3, t3, held)
        return not clk.info().stale
    got = wait_for(fresh, 5, 0.05)
    i = clk.info()
    want = held + time.clock_gettime_ns(time.CLOCK_REALTIME) - t3
    check(got and abs(i.sim_ns - want) < 100_000_000,
          "from the instant it follows function 3 (off by %.3f ms)" % ((i.sim_ns - want) / 1e6))
    finish(clk, rogue, p)


def echo_phase():
    """A leader that echoes leases (TimeFunction flags 8, as shmclockd's):
    its follower is stale until an echo of a lease it wrote since it joined
    came and it heard the change the echo names (the leader decided what
    came before without it); then fresh. Echoes that stop (its leases no
    longer reach the leader: a one-way break) stop its readers at the end
    of the last lease echoed, stale, while it still hears the leader; an
    echo again makes it fresh again. Before: fresh at once, and for as long
    as it heard the leader."""
    name, p, rogue, send = echo_follower("echo")
    lead = "rogue/7"
    t0 = real()
    fn = {"change": 1, "at": t0, "base": 0}

    def beat():
        return send(lead, fn["change"], fn["at"], fn["base"], flags=8)

    def status():
        return ctl(name, "status")[0]["status"]["distribute"]

    def stale_for(secs):
        """Heartbeats for @secs: the readings that were fresh, of how many."""
        fresh = n = 0
        end = time.monotonic() + secs
        while time.monotonic() < end:
            beat()
            fresh += not clk.info().stale
            n += 1
            time.sleep(0.05)
        return fresh, n

    check(beat(), "the rogue publisher writes")
    clk = shmclock.Clock(name)
    check(wait_for(lambda: clk.info().initialized, 20), "the follower takes function 1")
    fresh, n = stale_for(1.5)
    st = status()
    print("# no echo: %d of %d readings fresh; status awaiting_echo %s, echoes %s"
          % (fresh, n, st.get("awaiting_echo"), st.get("echoes")), flush=True)
    check(fresh == 0 and st.get("awaiting_echo") is True,
          "a follower whose leader echoes leases is stale until it has an echo (%d of %d "
          "readings fresh)" % (fresh, n))
    check(send.echo(lead, 1, 1, forged=12345) > 0, "the rogue echoes a stamp never written")
    fresh, n = stale_for(0.7)
    check(fresh == 0 and status().get("echoes") == 0,
          "an echo of a lease it did not write is nothing (%d of %d readings fresh)" % (fresh, n))
    check(send.echo(lead, 2, 1) > 0, "the rogue echoes under another term")
    fresh, n = stale_for(0.7)
    check(fresh == 0, "an echo of another term is nothing (%d of %d fresh)" % (fresh, n))
    check(send.echo(lead, 1, 2) > 0, "the rogue echoes, naming change 2, not sent yet")
    fresh, n = stale_for(0.7)
    check(fresh == 0 and status().get("echoes", 0) >= 1,
          "an echo naming a change it has not heard leaves it stale (%d of %d fresh; %s echoes)"
          % (fresh, n, status().get("echoes")))
    t2 = real()
    fn.update(change=2, at=t2, base=t2 - t0)
    check(wait_for(lambda: beat() and not clk.info().stale, 5, 0.05),
          "with change 2 heard, fresh")
    i, want = clk.info(), real() - t0
    check(abs(i.sim_ns - want) < 100_000_000 and status().get("awaiting_echo") is False,
          "... on change 2 (off by %.3f ms)" % ((i.sim_ns - want) / 1e6))
    # The last echo went; the leases go on, unechoed, as the heartbeats.
    t_echo = time.monotonic()
    got = wait_for(lambda: beat() and clk.info().stale, 10, 0.05)
    dt = time.monotonic() - t_echo
    st = status()
    print("# echoes stop: stale %.2f s after the last echo (lease 3.5 s less 0.25 s), "
          "lease_expired %s, last message %.0f ms ago"
          % (dt, st.get("lease_expired"), st.get("last_message_age_ns", -1) / 1e6), flush=True)
    check(got and st.get("lease_expired", 0) >= 1,
          "leases no longer echoed run out while the leader is heard: stale (%.2f s)" % dt)
    fresh, n = stale_for(0.7)
    check(fresh == 0, "... and stays stale, the leader heard, until an echo (%d of %d fresh)"
          % (fresh, n))
    # Echoed again: it follows again.
    ok = wait_for(lambda: beat() and send.echo(lead, 1, 2) >= 0 and not clk.info().stale, 10, 0.1)
    i, want = clk.info(), real() - t0
    check(ok and abs(i.sim_ns - want) < 100_000_000,
          "echoed again, it follows again (off by %.3f ms)" % ((i.sim_ns - want) / 1e6))
    finish(clk, rogue, p)


def echo_late_phase():
    """A change that reaches a follower after its instant while it waits
    for the echo (the leader did not wait for it): applied late, its
    readers are held where they were (never backwards), stale; a pause is
    held there for ever. Once echoed, fresh means on the leader's function:
    taken again, a jump. (A first version cleared the stale mark alone: a
    CI run under ASan had 371 readings 2.8 ms ahead of a pause, fresh.)"""
    name, p, rogue, send = echo_follower("echolate")
    lead = "rogue/10"
    t0 = real()
    fn = {"change": 1, "at": t0, "base": 0, "flags": 8}

    def beat():
        return send(lead, fn["change"], fn["at"], fn["base"], flags=fn["flags"])
    clk = shmclock.Clock(name)
    check(wait_for(lambda: beat() and clk.info().initialized, 10, 0.05),
          "the follower takes function 1")
    for _ in range(10):
        beat()
        time.sleep(0.05)
    # A pause 0.3 s ago, heard now.
    at = real() - 300_000_000
    fn.update(change=2, at=at, base=at - t0, flags=8 | 1)
    check(wait_for(lambda: beat() and clk.info().paused, 5, 0.05), "the late pause is taken")
    held = clk.info()
    check(send.echo(lead, 1, 2) > 0, "the rogue echoes")
    ok = wait_for(lambda: beat() and not clk.info().stale, 10, 0.05)
    i = clk.info()
    print("# a pause heard 0.3 s late while waiting for the echo: held at %.3f ms past it, "
          "stale; echoed: %.3f ms off, paused %s, jump epoch %d -> %d"
          % ((held.sim_ns - (at - t0)) / 1e6, (i.sim_ns - (at - t0)) / 1e6, i.paused,
             held.jump_epoch, i.jump_epoch), flush=True)
    check(ok and i.paused and abs(i.sim_ns - (at - t0)) <= 1000 and i.jump_epoch > held.jump_epoch,
          "echoed, fresh on the leader's pause, a jump (%.3f ms off)"
          % ((i.sim_ns - (at - t0)) / 1e6))
    finish(clk, rogue, p)


def echo_lost_phase():
    """A follower that loses its leader while it waits for the echo (stale,
    running on the leader's function): its readers stop there, as
    OnLeaderLoss "hold" says (a first version left them running, stale, for
    ever: the clock was marked stale already)."""
    name, p, rogue, send = echo_follower("echolost", "600ms")
    lead = "rogue/9"
    t0 = real()
    clk = shmclock.Clock(name)
    check(wait_for(lambda: send(lead, 1, t0, 0, flags=8) and clk.info().initialized, 10, 0.05),
          "the follower takes function 1")
    a = clk.info()
    time.sleep(0.2)
    b = clk.info()
    check(a.stale and b.stale and b.sim_ns > a.sim_ns,
          "waiting for the echo: stale, running (%.3f ms in 0.2 s)" % ((b.sim_ns - a.sim_ns) / 1e6))
    # The leader falls silent: lost after StaleAfter.
    check(wait_for(lambda: ctl(name, "status")[0]["status"]["distribute"]
                   .get("awaiting_echo") is False, 10, 0.05),
          "silent, the follower no longer waits for the echo")
    time.sleep(0.1)
    a = clk.info()
    time.sleep(0.3)
    b = clk.info()
    print("# lost while waiting for the echo: %.3f ms in 0.3 s, paused %s"
          % ((b.sim_ns - a.sim_ns) / 1e6, b.paused), flush=True)
    check(b.stale and b.paused and b.sim_ns == a.sim_ns,
          "... its readers stop (OnLeaderLoss hold): %.3f ms in 0.3 s" % ((b.sim_ns - a.sim_ns) / 1e6))
    finish(clk, rogue, p)


def echo_flood_phase():
    """A flood of forged echoes at an admitted follower (stamps it never
    wrote, 20,000 for each lease the flooder took, as its leader's, from
    a second publisher) while its leader goes on beating but echoes
    nothing: not one counts (its echo count stays), its control socket
    answers throughout, and its readings stay fresh and on the leader's
    function while its lease runs (4 s of its 5.5); after the flood its
    leader's next echo counts. A flood may push real echoes out of the
    follower's reader (it keeps the last 4): what it can cost is the
    lease, and so freshness, never a reading off the function."""
    name, p, rogue, send = echo_follower("echoflood", "5s")
    flooder, flood = start_rogue("guard-echoflood-" + RUN)
    lead = "rogue/11"
    t0 = real()
    clk = shmclock.Clock(name)
    check(wait_for(lambda: send(lead, 1, t0, 0, flags=8) and clk.info().initialized, 10, 0.05),
          "the follower takes function 1")
    check(wait_for(lambda: send(lead, 1, t0, 0, flags=8) and send.echo(lead, 1, 1) >= 0
                   and not clk.info().stale, 10, 0.1), "echoed, it is fresh")
    echoed = time.monotonic()  # its lease runs 5.5 s from a sending before this
    check(flood.match(), "the flooder's writer matched the follower")
    time.sleep(0.3)  # the last real echo counted (in flight when it went fresh)
    done = threading.Event()
    seen = {"worst_ctl": 0.0, "stale": 0, "off": 0, "reads": 0, "late_stale": 0, "errors": []}

    def beat():
        try:
            while not done.is_set():
                send(lead, 1, t0, 0, flags=8)
                time.sleep(0.05)
        except Exception as e:  # said below
            seen["errors"].append("beat: %r" % e)

    def watch():
        try:
            while not done.is_set():
                t = time.monotonic()
                ctl(name, "status")
                seen["worst_ctl"] = max(seen["worst_ctl"], time.monotonic() - t)
                i, off = off_function(clk, lambda r: r - t0)
                seen["reads"] += 1
                seen["off"] += not i.stale and off > 1000
                if i.stale:
                    seen["stale" if time.monotonic() < echoed + 4.0 else "late_stale"] += 1
                time.sleep(0.01)
        except Exception as e:  # said below
            seen["errors"].append("watch: %r" % e)
    before = ctl(name, "status")[0]["status"]["distribute"].get("echoes", 0)
    ths = [threading.Thread(target=beat), threading.Thread(target=watch)]
    for th in ths:
        th.start()
    t = time.monotonic()
    written = flood.echo(lead, 1, 1, forged=1, count=20000)
    took = time.monotonic() - t
    time.sleep(0.5)
    done.set()
    for th in ths:
        th.join()
    after = ctl(name, "status")[0]["status"]["distribute"].get("echoes", 0)
    # The leader echoes again: that one counts.
    again = wait_for(lambda: send(lead, 1, t0, 0, flags=8) and send.echo(lead, 1, 1) > 0 and
                     ctl(name, "status")[0]["status"]["distribute"].get("echoes", 0) > after,
                     10, 0.1)
    print("# %d forged echoes in %.2f s: echoes counted %d -> %d; status at worst %.1f ms; %d "
          "readings, %d stale within 4 s of the last echo (%d later), %d fresh and off the "
          "function" % (written, took, before, after, seen["worst_ctl"] * 1e3, seen["reads"],
                        seen["stale"], seen["late_stale"], seen["off"]), flush=True)
    check(not seen["errors"], "the beat and watch threads ran through (%s)" % seen["errors"][:1])
    check(written >= 20000, "the flooder floods (%d forged echoes written)" % written)
    check(after == before, "no forged echo counts (%d -> %d)" % (before, after))
    check(again, "after the flood the leader's echo counts")
    check(seen["worst_ctl"] < 1.0, "status answers within 1 s throughout (worst %.1f ms)"
          % (seen["worst_ctl"] * 1e3))
    check(seen["reads"] > 0 and seen["stale"] == 0 and seen["off"] == 0,
          "its readings stay fresh within its lease and never off the function (%d stale, %d "
          "off, of %d)" % (seen["stale"], seen["off"], seen["reads"]))
    flooder.stdin.close()
    flooder.wait(10)
    finish(clk, rogue, p)


def echo_staged_phase():
    """A follower that joins an echoing leader on a function decided ahead
    (its instant still to come), and hears the next change, decided ahead
    too, before that instant: both switch in its segment by themselves, and
    it stays stale past both until the leader echoes its lease (a first
    version decided the second ahead without the stale mark: 15 of 49
    readings fresh past its instant, unechoed). Both must arrive before the
    first instant: on a machine too loaded for that, tried again (at most
    four times, said)."""
    for attempt in range(4):
        name, p, rogue, send = echo_follower("echost%d" % attempt)
        lead = "rogue/8"

        def queued(n, until):
            return wait_for(lambda: real() < until and ctl(name, "status")[0]["status"]
                            ["distribute"].get("queued", 0) >= n, 5, 0.01) and real() < until
        t0 = real()
        t1, t2 = t0 + 1_200_000_000, t0 + 1_700_000_000
        ok = send(lead, 1, t1, 0, flags=8) and queued(1, t1 - 400_000_000)
        ok = ok and send(lead, 2, t2, 500_000_000, flags=8) and queued(2, t1 - 200_000_000)
        if ok:
            break
        print("# attempt %d: the follower did not queue both functions well before the first "
              "instant (a loaded machine): again" % attempt, flush=True)
        finish(None, rogue, p)
    check(ok, "the follower queues both functions before the first one's instant")
    clk = shmclock.Clock(name)
    fresh = n = 0
    while real() < t2 + 800_000_000:
        send(lead, 2, t2, 500_000_000, flags=8)
        i = clk.info()
        n += 1
        fresh += not i.stale
        time.sleep(0.05)
    print("# joined on two functions decided ahead, no echo: %d of %d readings fresh (0.8 s past "
          "the second's instant)" % (fresh, n), flush=True)
    check(fresh == 0, "past both instants, no echo: stale (%d of %d readings fresh)" % (fresh, n))
    ok = wait_for(lambda: send(lead, 2, t2, 500_000_000, flags=8) and
                  send.echo(lead, 1, 2) >= 0 and not clk.info().stale, 10, 0.1)
    i, want = clk.info(), 500_000_000 + real() - t2
    check(ok and abs(i.sim_ns - want) < 100_000_000,
          "echoed, fresh on function 2 (off by %.3f ms)" % ((i.sim_ns - want) / 1e6))
    finish(clk, rogue, p)


# A reader in its own process: until its stdin closes, records every fresh
# reading off fn(t) = BASE + (t - T) * RATE (ns, CLOCK_REALTIME) by more
# than 1 ms, judged between the real times just before and after it.
OFF_READER = r"""
import json, sys, threading, time, shmclock
clk = shmclock.Clock(sys.argv[1])
T, BASE, RATE = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
done = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
n = fresh = noff = 0
off = []
rt = time.clock_gettime_ns
while not done.is_set():
    a = rt(time.CLOCK_REALTIME)
    i = clk.info()
    b = rt(time.CLOCK_REALTIME)
    n += 1
    if i.stale:
        continue
    fresh += 1
    lo, hi = BASE + (a - T) * RATE, BASE + (b - T) * RATE
    if i.sim_ns < lo - 1e6 or i.sim_ns > hi + 1e6:
        noff += 1
        if len(off) < 3:
            off.append(["%.3f ms" % ((i.sim_ns - lo) / 1e6), "paused" if i.paused else "running"])
print(json.dumps(dict(reads=n, fresh=fresh, off=noff, first=off)), flush=True)
"""


def backlog_phase():
    """A follower stale (its leader silent), then stopped while the leader
    makes changes: continued, it finds the samples that waited, oldest
    first. It rejoins on the leader's present, never on one of those: each
    may have been superseded since, and it once took the first as fresh, so
    its readers showed a pause, not stale, until the next came (a real
    leader and follower, stopped 3 s: 547 readings 5.5 ms off; here, with
    the resume heard 0.1 s after the stop ends, the pause for 0.1 s)."""
    name, p, rogue, rogue_send, clk, t0 = rogue_follower("backlog", "rogue/7", "600ms")
    # Heartbeats for a while: the follower learns the usual delay.
    for _ in range(20):
        rogue_send("rogue/7", 1, t0, 0)
        time.sleep(0.02)
    check(wait_for(lambda: clk.info().stale, 5), "silent, the follower is stale")
    p.send_signal(signal.SIGSTOP)
    try:
        # Change 2 pauses, in force before the follower runs again,
        # repeated (a leader's heartbeats): these wait for it. Change 3
        # resumes at the paused value 0.3 s later; the follower hears of it
        # only 0.1 s after it runs again. Meanwhile the pause is what waited,
        # not the leader's present.
        t2 = real() + 50_000_000
        v2 = t2 - t0
        for _ in range(30):
            rogue_send("rogue/7", 2, t2, v2, 1 << 32, 1)
            time.sleep(0.005)
        t3 = t2 + 300_000_000
        rd = subprocess.Popen([sys.executable, "-c", OFF_READER, name, str(t3), str(v2), "1"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=ENV)
        procs.append(rd)
        while real() < t3 + 300_000_000:
            time.sleep(0.01)
    finally:
        p.send_signal(signal.SIGCONT)
    time.sleep(0.1)
    # The leader's present, again and again: 1.5 s, and on until the
    # follower takes it (a busy machine may delay every one of them past
    # the 3 ms it allows; after 2 s it takes them anyway).
    start = time.monotonic()
    while time.monotonic() - start < 1.5 or (clk.info().stale and time.monotonic() - start < 6):
        rogue_send("rogue/7", 3, t3, v2)
        time.sleep(0.02)
    rd.stdin.close()
    out = json.loads(rd.stdout.readline() or "{}")
    rd.wait(10)
    print("# stopped with samples waiting: %s" % out, flush=True)
    check(out.get("fresh", 0) > 0 and not clk.info().stale,
          "back, it follows the leader (%s fresh readings)" % out.get("fresh"))
    check(out.get("off") == 0, "it never showed a function the leader had left, as fresh "
          "(%s readings off, the first %s)" % (out.get("off"), out.get("first")))
    finish(clk, rogue, p)


def drops_phase():
    """A follower stopped while its leader goes on writing: the datagrams
    its full socket buffer dropped are counted in its status (udp_drops;
    issue 57: a starved host's losses were seen only in the kernel's
    counters)."""
    name, p, rogue, rogue_send, clk, t0 = rogue_follower("drops", "rogue/9", "5s")
    st = ctl(name, "status")[0]["status"]["distribute"]
    before = st.get("udp_drops")
    rcvbuf = st.get("udp_rcvbuf_bytes") or 0
    check(rcvbuf > 0, "its status says the receive buffer its sockets got (%s bytes)" % rcvbuf)
    # More samples than its buffer holds, whatever net.core.rmem_max
    # granted (each small datagram takes 700 bytes or more of it).
    p.send_signal(signal.SIGSTOP)
    try:
        for _ in range(max(3000, 2 * rcvbuf // 700)):
            rogue_send("rogue/9", 1, t0, 0)
    finally:
        p.send_signal(signal.SIGCONT)
    check(wait_for(lambda: (ctl(name, "status")[0]["status"]["distribute"].get("udp_drops") or 0)
                   > (before or 0), 10),
          "its status counts the datagrams dropped while it was stopped (%s, before %s)"
          % (ctl(name, "status")[0]["status"]["distribute"].get("udp_drops"), before))
    finish(clk, rogue, p)


def aside_phase():
    """OnSlow (issue 57): a leader with OnSlow 12 and two followers, one of
    them starved (stopped 40 ms of every 50) while changes go on: once it
    was late on 12 of the last 32 changes (postponed for it, and, once the
    Lead grew to cover it, the last by far) the leader asks it to step aside
    (log, status asked_aside; never the other); it marks its clock stale
    and leaves (its status and log say "aside"), the leader stops waiting
    for it at its leave, the other follower goes on fresh; after its 10 s
    out, no longer starved, it is a member again, fresh."""
    wire = "guard-aside-" + RUN
    lname, lp = start("aside-leader", {"TimeSource": "simulation",
                                       "Distribute": {"Publish": True, "Clock": wire,
                                                      "OnSlow": 12}})
    aname, ap = start("aside-a", {"TimeSource": "leader", "Distribute": {"Clock": wire}})
    bname, bp = start("aside-b", {"TimeSource": "leader", "Distribute": {"Clock": wire}})
    ac, bc = shmclock.Clock(aname), shmclock.Clock(bname)

    def members():
        return [f["id"] for f in ctl(lname, "status")[0]["status"]["distribute"].get("followers", [])]

    check(wait_for(lambda: len(members()) == 2 and not ac.info().stale and not bc.info().stale,
                   20), "both followers follow, members of the leader")
    n = 0
    with starved(bp):
        while n < 200 and not ctl(lname, "status")[0]["status"]["distribute"].get("asked_aside"):
            ctl(lname, "pause" if n % 2 == 0 else "resume")
            n += 1
    st = ctl(lname, "status")[0]["status"]["distribute"]
    print("# starved follower: asked aside after %d changes (postponed %d)"
          % (n, st.get("postponed", 0)), flush=True)
    llog = open(os.path.join(rtdir, "aside-leader.log")).read()
    check(st.get("asked_aside") == 1 and "/%d/" % bp.pid in llog.split("asked to step aside")[0][-300:],
          "the leader asks the starved follower to step aside (%s)" % st.get("asked_aside"))
    check(wait_for(lambda: bc.info().stale, 10), "it marks its clock stale")
    check(wait_for(lambda: not any("/%d/" % bp.pid in m for m in members()), 10),
          "it leaves: the leader no longer waits for it (%s)" % members())
    check(bc.info().stale, "the follower out is stale while it is out")
    bst = ctl(bname, "status")[0]["status"]["distribute"]
    check(bst.get("leader_losses", {}).get("aside") == 1 and bst.get("last_loss") == "aside" and
          "lost (aside)" in open(os.path.join(rtdir, "aside-b.log")).read(),
          "its status and log say it stepped aside (%s)" % bst.get("leader_losses"))
    for k in range(6):
        r, _ = ctl(lname, "pause" if (n + k) % 2 == 0 else "resume")
        check(r.get("ok"), "the leader's changes go on without it (%s)" % r.get("error", "ok"))
    paused = ctl(lname, "status")[0]["status"]["paused"]
    check(wait_for(lambda: not ac.info().stale and ac.info().paused == paused, 10),
          "the other follower is fresh on the leader's last change")
    check(wait_for(lambda: any("/%d/" % bp.pid in m for m in members()), 30, 0.1),
          "after its time out it is a member again")
    check(wait_for(lambda: not bc.info().stale and bc.info().paused == paused, 10),
          "... fresh on the leader's function")
    for c in (ac, bc):
        c.close()
    for p in (bp, ap, lp):
        stop_timed(p)


def rejoin_stopped_phase():
    """A follower back from silence on a function decided ahead (its
    instant to come), then stopped before that instant: its readers switch
    to it there by themselves, but the leader does not wait for this
    follower until it says it follows again (it may make a change without
    it). They switch stale and stay stale until the follower runs again
    (they went fresh there, and a real leader's pause 1 s later did not
    stop them)."""
    name, p, rogue, rogue_send, clk, t0 = rogue_follower("rjstop", "rogue/8", "600ms")
    check(wait_for(lambda: clk.info().stale, 10), "silent, the follower is stale")
    # 1.8 s ahead (2 s is the most a follower takes): time to stage it on
    # a busy machine.
    t3 = real() + 1_800_000_000
    v3 = t3 - t0 + 5 * SEC
    check(rogue_send("rogue/8", 3, t3, v3), "sent function 3, 1.8 s ahead")
    check(wait_for(lambda: ctl(name, "status")[0]["status"]["distribute"]["decided_ahead"] > 0,
                   1.5), "the follower decided it ahead (staged for its instant)")
    p.send_signal(signal.SIGSTOP)
    try:
        while real() < t3 + 50_000_000:
            time.sleep(0.01)
        n = fresh = 0
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            i = clk.info()
            n += 1
            fresh += not i.stale
        print("# stopped while rejoining, past the instant: %d of %d readings fresh"
              % (fresh, n), flush=True)
        check(n > 100 and fresh == 0, "its readers switch there stale, not fresh, while it "
              "does not run (%d of %d fresh)" % (fresh, n))
        i = clk.info()
        check(abs(i.sim_ns - (v3 + real() - t3)) < 100_000_000,
              "they switch to function 3 at its instant (off by %.3f ms)"
              % ((i.sim_ns - (v3 + real() - t3)) / 1e6))
    finally:
        p.send_signal(signal.SIGCONT)
    # The leader's heartbeats (silent since, it was stale by silence too).
    end = time.monotonic() + 5
    while clk.info().stale and time.monotonic() < end:
        rogue_send("rogue/8", 3, t3, v3)
        time.sleep(0.02)
    check(not clk.info().stale, "continued, it follows again")
    finish(clk, rogue, p)


def lease_phase():
    """A follower stopped longer than its lease (SIGSTOP; a host starved
    that long): its leader goes on without it, here into a pause. Its
    readers compute time by themselves; they must not run on, fresh, past
    what the leader may have done meanwhile: they stop at the end of its
    lease (stale), and continued, the follower is stale until it rejoins on
    the leader's present, forwards. (Before the lease bound its readers:
    fresh, 1 s past the leader's pause, then a jump back.)"""
    wire = "guard-lease-" + RUN
    lname, lp = start("lease-leader", {"TimeSource": "simulation",
                                       "Distribute": {"Publish": True, "Clock": wire}})
    fname, fp = start("lease-follower", {"TimeSource": "leader",
                                         "Distribute": {"Clock": wire, "StaleAfter": "1s"}})
    rogue, watch = start_rogue(wire)  # a reader of the leader's echoes
    lc, fc = shmclock.Clock(lname), shmclock.Clock(fname)
    check(wait_for(lambda: fc.info().initialized and not fc.info().stale, 20),
          "the follower follows the leader")
    check(wait_for(lambda: ctl(lname, "status")[0]["status"]["distribute"].get("followers"), 10),
          "the leader waits for it (a member)")
    fid = ctl(lname, "status")[0]["status"]["distribute"]["followers"][0]["id"]
    fp.send_signal(signal.SIGSTOP)
    try:
        r, dt = ctl(lname, "pause")
        check(r.get("ok"), "the leader pauses without the stopped follower, once its lease "
              "ran out (%.3f s; %s)" % (dt, r.get("error")))
        held = lc.info().sim_ns
        n = past = top = worst = 0
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            i = fc.info()
            n += 1
            top = max(top, i.sim_ns)
            if not i.stale and i.sim_ns > held + 1_000_000:
                past += 1
                worst = max(worst, i.sim_ns - held)
        print("# stopped past its lease: the leader paused after %.3f s; the follower's readers "
              "%d of %d fresh past the pause (up to %.3f s)" % (dt, past, n, worst / 1e9),
              flush=True)
        check(n > 100 and past == 0, "the stopped follower's readers never ran on fresh past "
              "the leader's pause (%d of %d readings, up to %.3f s)" % (past, n, worst / 1e9))
    finally:
        fp.send_signal(signal.SIGCONT)
    check(wait_for(lambda: not fc.info().stale, 10), "continued, it follows again")
    i = fc.info()
    check(i.paused and abs(i.sim_ns - held) < 1_000_000 and i.sim_ns >= top,
          "on the leader's pause (%.6f s, the leader's %.6f s; it had shown up to %.6f s)"
          % (i.sim_ns / 1e9, held / 1e9, top / 1e9))
    st = ctl(fname, "status")[0]["status"]["distribute"]
    log = open(os.path.join(rtdir, "lease-follower.log")).read()
    check(st.get("lease_expired", 0) >= 1 and "lease" in log and
          st.get("leader_losses", {}).get("lease", 0) >= 1 and "lost (lease)" in log,
          "its status and log say the lease ran out (%s, %s)"
          % (st.get("lease_expired"), st.get("leader_losses")))
    # A follower that stops says it leaves: the leader's next change does
    # not wait for its lease (3.5 s), as it does for one that died.
    check(wait_for(lambda: ctl(lname, "status")[0]["status"]["distribute"].get("followers"), 10),
          "it is a member again")
    def leaves():
        return open(os.path.join(rtdir, "lease-leader.log")).read().count("left clock")

    before = leaves()  # it left once already, when its lease ran out
    check(wait_for(lambda: watch.echostate(fid) == "alive", 10),
          "the leader echoes the follower's leases (%s)" % watch.echostate(fid))
    stop_timed(fp)
    # The leave is what the leader logs: a member whose lease ran out is
    # "lost". No real-time bound: once it logged the leave, the next change
    # is not postponed (it would be, up to the lease, waiting for a member
    # that does not answer).
    check(wait_for(lambda: leaves() > before, 10),
          "a follower that stops says it leaves (the leader's log)")
    # Its echoes' instance is let go (the leader kept one per follower run).
    check(wait_for(lambda: watch.echostate(fid) == "gone", 10),
          "the leader lets the echoes to a follower that left go (%s)" % watch.echostate(fid))
    ld = ctl(lname, "status")[0]["status"]["distribute"]
    check(not ld.get("followers"), "the leader no longer waits for it (%s)" % ld.get("followers"))
    r, dt = ctl(lname, "resume")
    after = ctl(lname, "status")[0]["status"]["distribute"]
    print("# the follower stopped (SIGTERM): the leader's next change took %.3f s (its lease "
          "3.5 s), postponed %d times" % (dt, after["postponed"] - ld["postponed"]), flush=True)
    check(r.get("ok") and after["postponed"] == ld["postponed"],
          "the leader's next change is not postponed for it (%d postponements, %.3f s)"
          % (after["postponed"] - ld["postponed"], dt))
    # With no member left, Lead is Distribute.Lead again, not what the
    # postponements while the follower was stopped made it (1 s).
    lead = ctl(lname, "status")[0]["status"]["distribute"]
    check(lead.get("lead_current_ns") == lead.get("lead_ns"),
          "with no member, the leader's Lead is its configured one again (%s ns, configured %s)"
          % (lead.get("lead_current_ns"), lead.get("lead_ns")))
    # Its clock stays marked stale for its readers and for the next
    # shmclockd: one that follows is stale until it hears the leader (here
    # gone: it never is; it went on fresh with the old function before),
    # one of another source clears the mark.
    check(fc.info().stale, "the stopped follower's clock is marked stale")
    # The leader goes back while the follower is down: restarted, the
    # follower takes its function as a jump (it held the old, higher value
    # before, fresh, ahead of the leader until it caught up).
    before = fc.info()
    r, _ = ctl(lname, "set", time="1s")
    check(r.get("ok"), "the leader goes back to 1 s (%s)" % r.get("error"))
    f1 = hostsenv.start_daemon(SHMCLOCKD, rtdir, "lease-follower1", fname,
                               {"TimeSource": "leader", "Ros2": {"Domain": DOMAIN},
                                "Distribute": {"Clock": wire, "StaleAfter": "1s"}}, ENV)
    procs.append(f1)
    check(wait_for(lambda: fc.info().writer_alive and not fc.info().stale, 10),
          "restarted, the follower follows again")
    a, i, b = lc.info().sim_ns, fc.info(), lc.info().sim_ns
    check(a - 50_000_000 <= i.sim_ns <= b + 50_000_000 and i.jump_epoch > before.jump_epoch,
          "it shows the leader's time, taken as a jump (%.3f s, the leader %.3f s; jump epoch "
          "%d, %d before)" % (i.sim_ns / 1e9, b / 1e9, i.jump_epoch, before.jump_epoch))
    stop_timed(f1)
    stop_timed(lp)
    f2 = hostsenv.start_daemon(SHMCLOCKD, rtdir, "lease-follower2", fname,
                               {"TimeSource": "leader", "Ros2": {"Domain": DOMAIN},
                                "Distribute": {"Clock": wire, "StaleAfter": "1s"}}, ENV)
    procs.append(f2)
    fresh = n = 0
    end = time.monotonic() + 1.5
    while time.monotonic() < end:
        n += 1
        fresh += not fc.info().stale
        time.sleep(0.001)
    check(fresh == 0, "restarted with its leader gone, a follower is stale until it hears one "
          "(%d of %d readings fresh)" % (fresh, n))
    stop_timed(f2)
    s2 = hostsenv.start_daemon(SHMCLOCKD, rtdir, "lease-simulation", fname,
                               {"TimeSource": "simulation"}, ENV)
    procs.append(s2)
    check(wait_for(lambda: fc.info().writer_alive and not fc.info().stale, 10),
          "the same clock under another source is not stale")
    stop_timed(s2)
    lc.close()
    fc.close()
    rogue.stdin.close()
    rogue.wait(10)


def off_function(clk, fn):
    """A reading, and how far it is off function @fn of CLOCK_REALTIME:
    0 when it lies between @fn just before and just after it (however
    long the reading took on a busy machine), else the distance in ns."""
    a = time.clock_gettime_ns(time.CLOCK_REALTIME)
    i = clk.info()
    b = time.clock_gettime_ns(time.CLOCK_REALTIME)
    lo, hi = fn(a), fn(b)
    return i, (lo - i.sim_ns if i.sim_ns < lo else i.sim_ns - hi if i.sim_ns > hi else 0)


def late_thread_phase():
    """A follower whose clock thread does not run from before a change's
    instant until after it (SIGSTOP; a loaded host at normal priority): its
    readers stop at that instant all the same, held and told so (stale),
    since the hold is opened when the change is heard, not by a timer of
    that thread before the instant (it once was, 1 ms before: the readers
    then showed the previous function, 150 ms off, not stale). Once the
    commit comes and the thread runs, they follow the new function."""
    wire = "guard-late-" + RUN
    name, p = start("late", {"TimeSource": "leader",
                             "Distribute": {"Clock": wire, "StaleAfter": "5s"}})
    rogue, rogue_send = start_rogue(wire)

    def send(change, eff, base, mult, committed):
        return rogue_send("rogue/4", change, eff, base, mult, committed=committed)

    def dist():
        return ctl(name, "status")[0].get("status", {}).get("distribute", {})

    t0 = time.clock_gettime_ns(time.CLOCK_REALTIME)
    check(send(1, t0, 0, 1 << 32, None), "the rogue publisher writes")
    clk = shmclock.Clock(name)
    check(wait_for(lambda: clk.info().initialized and not clk.info().stale, 20),
          "the follower takes function 1")
    # Function 2: half speed from its instant, announced (not committed).
    t2 = time.clock_gettime_ns(time.CLOCK_REALTIME) + 1_000_000_000
    check(send(2, t2, t2 - t0, 1 << 31, 1), "change 2 announced, 1 s ahead")
    heard = wait_for(lambda: dist().get("queued", 0) >= 1, 0.5)
    # The hold opens in the same pass of the clock thread (status says
    # which change it holds); stopped without it, the readers would show.
    held = heard and wait_for(lambda: dist().get("holding") == 2, 0.2)
    # A reload of UnixTimeAtZero while the instant is held: refused (a
    # follower's is its leader's). Taken, it committed at once: past the
    # instant, that ended the hold, and its readers ran on, fresh.
    cfgpath = os.path.join(rtdir, "late.json")
    with open(cfgpath) as f:
        cfg = json.load(f)
    with open(cfgpath, "w") as f:
        json.dump(dict(cfg, UnixTimeAtZero="2026-11-22T14:00:00Z"), f)
    p.send_signal(signal.SIGHUP)
    said = wait_for(lambda: "UnixTimeAtZero of a follower is its leader's" in
                    open(os.path.join(rtdir, "late.log")).read(), 2)
    refused = said and clk.info().unix_at_zero_ns != 1795356000 * 10**9
    held = held and wait_for(lambda: dist().get("holding") == 2, 0.2)
    p.send_signal(signal.SIGSTOP)
    # Stopped well before the instant, after the follower heard the
    # change: what this phase is about. A machine too slow for that says
    # so instead of failing.
    placed = heard and time.clock_gettime_ns(time.CLOCK_REALTIME) < t2 - 100_000_000
    try:
        while time.clock_gettime_ns(time.CLOCK_REALTIME) < t2 + 300_000_000:
            time.sleep(0.02)
        i = clk.info()
        print("# a stopped follower's readers 0.3 s past the instant: %.3f ms from the "
              "instant's value, %s" % ((i.sim_ns - (t2 - t0)) / 1e6,
                                       "stale (held)" if i.stale else "not stale"), flush=True)
        if placed:
            check(i.stale and abs(i.sim_ns - (t2 - t0)) < 1_000_000,
                  "readers of a follower stopped across an instant it heard of stop there, "
                  "held and stale (%.3f ms off, %s)"
                  % ((i.sim_ns - (t2 - t0)) / 1e6, "stale" if i.stale else "not stale"))
        else:
            print("# the follower did not hear change 2 0.1 s before its instant: the machine "
                  "was too slow to place the stop; not asserted", flush=True)
        check(held or not placed, "status said the follower held change 2 before the stop, "
              "after a refused reload")
        check(refused, "a reload of a follower's UnixTimeAtZero is refused, said in its log, "
              "the clock unchanged")
        check(send(2, t2, t2 - t0, 1 << 31, 2), "change 2 committed, while it is stopped")
    finally:
        p.send_signal(signal.SIGCONT)
    ok = wait_for(lambda: dist().get("holding") == 0 and not clk.info().stale, 10)
    i, off = off_function(clk, lambda t: (t2 - t0) + (t - t2) // 2)
    check(ok and off < 2_000_000,
          "then it follows change 2 from its instant (off by %.3f ms)" % (off / 1e6))
    st = dist()
    check(st.get("ran_past_instant") == 0,
          "no change reached its instant unheld (%s)" % st.get("ran_past_instant"))
    finish(clk, rogue, p)


def moved_hold_phase():
    """A change a follower holds, moved later before its instant (a
    leader's postponement: the same change under a higher plan): the hold
    is withdrawn at once and opened at the new instant, so its readers run
    on past the old instant (fresh, on the function in force), stop at the
    new one, and follow the change once committed."""
    name, p, rogue, rogue_send, clk, t0 = rogue_follower("moved", "rogue/5", "5s")

    def dist():
        return ctl(name, "status")[0].get("status", {}).get("distribute", {})
    t2 = real() + 800_000_000
    check(rogue_send("rogue/5", 2, t2, t2 - t0, 1 << 31, committed=1, plan=1),
          "change 2 announced, 0.8 s ahead")
    check(wait_for(lambda: dist().get("holding") == 2, 0.5), "the follower holds change 2")
    t3 = real() + 1_600_000_000
    check(rogue_send("rogue/5", 2, t3, t3 - t0, 1 << 31, committed=1, plan=2),
          "change 2 moved 0.8 s later (plan 2)")
    sent = real()
    while real() < t2 + 200_000_000:
        time.sleep(0.02)
    i, off = off_function(clk, lambda t: t - t0)
    if sent < t2 - 300_000_000:
        check(not i.stale and off < 2_000_000,
              "past the old instant its readers run on, fresh, on function 1 (%.3f ms off, %s)"
              % (off / 1e6, "stale" if i.stale else "fresh"))
        check(dist().get("holding") == 2, "and it holds the moved change")
    else:
        print("# the move came too close to the old instant on this machine; not asserted",
              flush=True)
    # The follower has heard the move once its readers run fresh past the
    # old instant (the old hold withdrawn); only then can it hold the new
    # one. A follower that had not heard it 0.1 s before the new instant
    # (a machine too busy to run it for 1.4 s) is not judged there.
    moved_at = None
    while real() < t3 + 200_000_000:
        if moved_at is None and real() > t2 + 10_000_000:
            a = real()
            if not clk.info().stale:
                moved_at = a
        time.sleep(0.02)
    i = clk.info()
    if moved_at is not None and moved_at < t3 - 100_000_000:
        check(i.stale and abs(i.sim_ns - (t3 - t0)) < 1_000_000,
              "at the new instant its readers stop, held (%.3f ms off, %s)"
              % ((i.sim_ns - (t3 - t0)) / 1e6, "stale" if i.stale else "fresh"))
    else:
        print("# the follower was not seen past the old instant 0.1 s before the new one "
              "(a busy machine); the new instant's hold not asserted", flush=True)
    check(rogue_send("rogue/5", 2, t3, t3 - t0, 1 << 31, committed=2, plan=2),
          "change 2 committed")
    ok = wait_for(lambda: not clk.info().stale, 5)
    i, off = off_function(clk, lambda t: (t3 - t0) + (t - t3) // 2)
    check(ok and off < 2_000_000,
          "then it follows change 2 from the new instant (off by %.3f ms)" % (off / 1e6))
    finish(clk, rogue, p)


def lost_held_phase():
    """A follower that loses its leader while its readers are held at an
    instant that came: they stay there, stale, paused (OnLeaderLoss
    "hold", the default), whichever loss it notices first. Three ways:
    silence (StaleAfter) past the instant of a change it heard and holds;
    that change's hold past its bound; a change missed (a gap) held past
    its bound. (Before: silence let the readers go, fresh on the previous
    function past the instant, then marked them stale and paused where
    they had run to, 0.3 s on; the two bounds marked them stale running
    on, OnLeaderLoss notwithstanding.)"""
    for tag, stale_after, gap in (("lost-silent", "600ms", False),
                                  ("lost-hold", "5s", False),
                                  ("lost-gap", "5s", True)):
        name, p, rogue, rogue_send, clk, t0 = rogue_follower(tag, "rogue/9", stale_after)

        def dist():
            return ctl(name, "status")[0]["status"]["distribute"]
        t2 = real() + 300_000_000
        sent = real()
        # Change 2 (half speed) announced, never committed; or change 3
        # after change 2 was missed. Then nothing: the rogue is silent.
        check(rogue_send("rogue/9", 3 if gap else 2, t2, t2 - t0, 1 << 31, committed=1),
              "%s: change %d announced 0.3 s ahead, then silence" % (tag, 3 if gap else 2))
        check(wait_for(lambda: real() > t2 + 1_500_000_000 and clk.info().stale, 10),
              "%s: the follower marks its clock stale" % tag)
        a = clk.info()
        time.sleep(0.2)
        b = clk.info()
        st = dist()
        where = (sent - t0) if gap else (t2 - t0)
        print("# %s: stale at %.6f s (held at %.6f s), %.6f s 0.2 s later; hold stales %d"
              % (tag, a.sim_ns / 1e9, where / 1e9, b.sim_ns / 1e9, st.get("hold_stales", -1)),
              flush=True)
        why = {"lost-silent": "silence", "lost-hold": "held", "lost-gap": "gap"}[tag]
        if tag == "lost-silent" and st.get("hold_stales"):
            print("# lost-silent: the hold's bound came before the silence (a busy machine): "
                  "that path, not silence's, is checked here", flush=True)
            why = "held"
        # Every trigger goes through one path that names it, in the log
        # and in status.
        log = open(os.path.join(rtdir, tag + ".log")).read()
        check(st.get("leader_losses", {}).get(why, 0) >= 1 and "lost (%s)" % why in log,
              "%s: status and log name the loss (%s): %s, last %s" %
              (tag, why, st.get("leader_losses"), st.get("last_loss")))
        check(a.stale and b.stale and a.sim_ns == b.sim_ns,
              "%s: its readers stay where they were held, paused (%.6f s, then %.6f s)"
              % (tag, a.sim_ns / 1e9, b.sim_ns / 1e9))
        if gap:
            # Held from when the gap was seen: at or after the send.
            check(where <= a.sim_ns < where + 1_000_000_000,
                  "%s: where the gap was seen (%.3f s after the send)"
                  % (tag, (a.sim_ns - where) / 1e9))
        else:
            check(abs(a.sim_ns - where) < 1_000_000,
                  "%s: at the instant held (%.3f ms off)" % (tag, (a.sim_ns - where) / 1e6))
        finish(clk, rogue, p)
    # A change decided ahead (a set 5 s back, a jump), then silence before
    # its instant: it stands (every host switches there), and the clock is
    # marked stale on it, paused there; not on the function before it (it
    # was: readers 5 s ahead of the leader, no jump).
    name, p, rogue, rogue_send, clk, t0 = rogue_follower("lost-staged", "rogue/10", "600ms")

    def dist():
        return ctl(name, "status")[0]["status"]["distribute"]
    t2 = real() + 1_000_000_000
    v2 = (t2 - t0) - 5 * SEC
    check(rogue_send("rogue/10", 2, t2, v2, 1 << 32, 0, 1),
          "lost-staged: a set 5 s back, committed, 1 s ahead, then silence")
    staged = wait_for(lambda: dist()["decided_ahead"] > 0, 0.5)
    check(wait_for(lambda: real() > t2 + 500_000_000 and clk.info().stale, 10),
          "lost-staged: the follower marks its clock stale")
    a = clk.info()
    time.sleep(0.2)
    b = clk.info()
    print("# lost-staged: stale at %.6f s, %.6f s 0.2 s later (the set: %.6f s at its "
          "instant), jump epoch %d" % (a.sim_ns / 1e9, b.sim_ns / 1e9, v2 / 1e9, a.jump_epoch),
          flush=True)
    if staged:
        check(a.stale and a.sim_ns == b.sim_ns and v2 <= a.sim_ns < v2 + 300_000_000 and
              a.jump_epoch == 1, "lost-staged: paused on the change decided ahead, from its "
              "instant (%.3f s past it), a jump" % ((a.sim_ns - v2) / 1e9))
    else:
        print("# lost-staged: not decided ahead within 0.5 s (a busy machine): not asserted",
              flush=True)
    finish(clk, rogue, p)


def gap_step_phase():
    """A step of the follower's host clock while its readers are held for
    a change it missed (a gap): they stay held, fresh or stale, never run
    on. (The re-anchor after the step committed the function in force,
    which ended the hold, and it was never opened again: readers ran on
    fresh past the missed change until the gap's bound.) The step is the
    SHMCLOCKD_TEST_CLOCK_SHIFT hook's, on this daemon alone; the function's
    Lead of 1 s makes that bound 2.5 s, time for the step to be seen."""
    shift = os.path.join(rtdir, "gap-step.ns")
    with open(shift, "w") as f:
        f.write("0\n")
    name, p, rogue, rogue_send, clk, t0 = rogue_follower(
        "gap-step", "rogue/12", "5s", {"SHMCLOCKD_TEST_CLOCK_SHIFT": shift}, lead=SEC)

    def dist():
        return ctl(name, "status")[0]["status"]["distribute"]
    holds = dist()["holds"]
    t3 = real() + 300_000_000
    # Change 3 announced (change 2 never sent): a gap, readers held at once.
    check(rogue_send("rogue/12", 3, t3, t3 - t0, 1 << 31, committed=1, lead=SEC),
          "gap-step: change 3 announced, change 2 missed")
    check(wait_for(lambda: dist()["holds"] > holds, 2, step=0.01),
          "gap-step: the follower holds its readers for the gap")
    held = clk.info()
    # (A reader held at an instant its writer has not decided sees the
    # clock as stale: the library's rule.)
    check(held.stale, "gap-step: its readers held (stale, as the library shows a hold)")
    with open(shift, "w") as f:
        f.write("%d\n" % (3 * SEC))
    seen = time.monotonic()
    log = os.path.join(rtdir, "gap-step.log")
    off = n = 0
    # Until the step was taken (re-anchored), or the gap's bound came,
    # then 0.3 s more: no fresh reading off the one held.
    end = None
    while time.monotonic() < seen + 6 and (end is None or time.monotonic() < end):
        i = clk.info()
        n += 1
        if not i.stale and i.sim_ns != held.sim_ns:
            off += 1
        if end is None:
            text = open(log).read()
            if "re-anchoring" in text or "missed and not repeated" in text:
                end = time.monotonic() + 0.3
        time.sleep(0.002)
    st = dist()
    print("# gap-step: %d readings over %.3f s, %d fresh off the hold (%.6f s); re-anchors %d, "
          "stale %s" % (n, time.monotonic() - seen, off, held.sim_ns / 1e9, st["reanchors"],
                        clk.info().stale), flush=True)
    check(end is not None, "gap-step: the follower took the step, or the gap's bound came")
    check(off == 0, "gap-step: no fresh reading off the hold after the step (%d of %d)" % (off, n))
    finish(clk, rogue, p)
    # The step taken once the gap is filled: the leader repeats the missed
    # change as an announcement (queued for its instant). The function in
    # force is re-expressed with the new offset then (a review: the
    # queued sample's offset swallowed the re-anchor held back during the
    # gap, and readers ran fresh on the old offset, off by the step, until
    # that change's instant). A step back of 0.5 s: the instant, 1 s ahead,
    # stays within the 2 s a follower takes.
    with open(shift, "w") as f:
        f.write("0\n")
    name, p, rogue, rogue_send, clk, t0 = rogue_follower(
        "gap-fill", "rogue/13", "5s", {"SHMCLOCKD_TEST_CLOCK_SHIFT": shift}, lead=SEC)
    holds = ctl(name, "status")[0]["status"]["distribute"]["holds"]
    t3 = real() + 300_000_000
    check(rogue_send("rogue/13", 3, t3, t3 - t0, 1 << 32, committed=1, lead=SEC),
          "gap-fill: change 3 announced, change 2 missed")
    check(wait_for(lambda: ctl(name, "status")[0]["status"]["distribute"]["holds"] > holds, 2,
                   step=0.01), "gap-fill: the follower holds its readers for the gap")
    step = -SEC // 2
    with open(shift, "w") as f:
        f.write("%d\n" % step)
    time.sleep(0.3)  # the hook is read every 20 ms
    filled = time.monotonic()
    t2 = real() + SEC
    check(rogue_send("rogue/13", 2, t2, t2 - t0, 1 << 32, committed=1, lead=SEC),
          "gap-fill: change 2 announced, 1 s ahead: the gap filled")
    # Held until the re-anchored function catches up (0.5 s), then on it,
    # until change 2's instant (1.5 s by the follower's clock).
    while time.monotonic() < filled + 0.7:
        time.sleep(0.01)
    n = fresh = 0
    worst = 0
    while time.monotonic() < filled + 1.3:
        a = real()
        i = clk.info()
        b = real()
        n += 1
        if not i.stale:
            fresh += 1
            # Function 1 on this host's clock: its CLOCK_REALTIME, stepped.
            # Ahead of it is the defect (the old offset: 0.5 s ahead);
            # behind is a re-anchor held until it catches up, which a
            # follower late to take the fill (a loaded machine) shows.
            hi = b + step - t0
            worst = max(worst, i.sim_ns - hi)
        time.sleep(0.005)
    print("# gap-fill: %d readings, %d fresh, at worst %.3f ms ahead of function 1 on the "
          "stepped clock" % (n, fresh, worst / 1e6), flush=True)
    check(fresh > 0 and worst < 50_000_000,
          "gap-fill: fresh readings never ahead of the re-anchored function (%d fresh, worst "
          "%.3f ms)"
          % (fresh, worst / 1e6))
    finish(clk, rogue, p)


def lost_step_phase():
    """A step of the host clock of a follower that lost its leader and
    holds its time (OnLeaderLoss "hold", the default): its readers stay
    where they were held, stale, paused. (The tick re-anchored the
    leader's last function after the step, and the held readers ran on
    from there, stale: a review of the re-anchor found it.)"""
    shift = os.path.join(rtdir, "lost-step.ns")
    with open(shift, "w") as f:
        f.write("0\n")
    name, p, rogue, rogue_send, clk, t0 = rogue_follower(
        "lost-step", "rogue/14", "600ms", {"SHMCLOCKD_TEST_CLOCK_SHIFT": shift})
    # The rogue says nothing more: stale after 0.6 s, held there.
    check(wait_for(lambda: clk.info().stale, 10), "lost-step: the follower marks its clock stale")
    time.sleep(0.1)
    held = clk.info()
    with open(shift, "w") as f:
        f.write("%d\n" % (2 * SEC))
    end = time.monotonic() + 0.6  # the hook is read every 20 ms, the tick every 10
    n = moved = 0
    while time.monotonic() < end:
        i = clk.info()
        n += 1
        moved += i.sim_ns != held.sim_ns or not i.stale
        time.sleep(0.005)
    print("# lost-step: held at %.6f s, %d readings after a step of 2 s, %d moved or fresh"
          % (held.sim_ns / 1e9, n, moved), flush=True)
    check(held.paused and moved == 0,
          "lost-step: its readers stay held, stale, after the step (%d of %d moved)" % (moved, n))
    finish(clk, rogue, p)


def leader_step_phase():
    """A step of the leader's host clock (the SHMCLOCKD_TEST_CLOCK_SHIFT
    hook, on the leader alone): it re-expresses its function in force on
    the wire, flagged as a re-anchor; its follower takes it, its readers
    held until it catches up, never back, and follows the changes after it.
    (A follower refused the re-anchor as going back without a jump, then
    every change after it: fresh on the old function, running on through
    the leader's pause; a review found it.)"""
    shift = os.path.join(rtdir, "leader-step.ns")
    with open(shift, "w") as f:
        f.write("0\n")
    wire = "guard-lstep-" + RUN
    lname, lp = start("lstep-leader", {"TimeSource": "simulation",
                                       "Distribute": {"Publish": True, "Clock": wire}},
                      {"SHMCLOCKD_TEST_CLOCK_SHIFT": shift})
    fname, fp = start("lstep-follower", {"TimeSource": "leader",
                                         "Distribute": {"Clock": wire, "StaleAfter": "2s"}})
    lc, fc = shmclock.Clock(lname), shmclock.Clock(fname)
    check(wait_for(lambda: fc.info().initialized and not fc.info().stale, 20),
          "leader-step: the follower follows the leader")

    def fdist():
        return ctl(fname, "status")[0]["status"]["distribute"]

    def diff():
        """Follower minus leader at one instant (both running)."""
        li, fi = lc.info(), fc.info()
        t = max(li.mono_ns, fi.mono_ns)
        return (fi.sim_ns + round((t - fi.mono_ns) * fi.scale)) - \
            (li.sim_ns + round((t - li.mono_ns) * li.scale))
    refused = fdist()["refused"]
    d0 = diff()
    step = SEC
    stop = threading.Event()
    seen = {"n": 0, "back": 0, "prev": None}

    def reader():
        # The follower's readers: never back within a jump epoch.
        while not stop.is_set():
            i = fc.info()
            prev = seen["prev"]
            if prev and i.jump_epoch == prev[0] and i.sim_ns < prev[1]:
                seen["back"] += 1
            seen["prev"] = (i.jump_epoch, i.sim_ns)
            seen["n"] += 1
            time.sleep(0.001)
    th = threading.Thread(target=reader)
    th.start()
    try:
        with open(shift, "w") as f:
            f.write("%d\n" % step)
        took = wait_for(lambda: ctl(lname, "status")[0]["status"]["distribute"]["reanchors"] > 0,
                        5)
        check(took, "leader-step: the leader re-anchors after its host clock's step")
        # Taken at its instant, 1 s ahead on the follower's clock, then held
        # 1 s until it catches up: the follower is then behind by the step,
        # as its host clock is.
        # (Both on this machine: exact but for the offsets' rounding.)
        settled = wait_for(lambda: abs(diff() + step) < 2_000_000, 10)
        d1 = diff()
        st = fdist()
        check(settled and st["refused"] == refused,
              "leader-step: the follower takes the re-anchor (refused %d -> %d, %s): behind by "
              "the step, as its host clock is (%.3f ms, before %.3f ms)"
              % (refused, st["refused"], st.get("refused_last", "-"), d1 / 1e6, d0 / 1e6))
        r, _ = ctl(lname, "pause")
        check(r.get("ok") and wait_for(lambda: fc.info().paused, 10),
              "leader-step: a pause after the step reaches the follower (%s)" % r.get("error", "ok"))
    finally:
        stop.set()
        th.join()
    print("# leader-step: %d readings, %d back" % (seen["n"], seen["back"]), flush=True)
    check(seen["n"] > 0 and seen["back"] == 0,
          "leader-step: the follower's readers never went back (%d of %d)"
          % (seen["back"], seen["n"]))
    lc.close()
    fc.close()
    stop_timed(fp)
    stop_timed(lp)


def gap_loss_phase():
    """A follower that saw a gap while changes were queued (so no hold
    was opened for it), then lost its leader, with OnLeaderLoss "run":
    its readers run on, stale. (The gap outlived the loss, and the next
    tick opened its hold on the stale clock: readers stopped, and the
    log said a change was missed; a review found it.)"""
    name, p, rogue, send, clk, t0 = rogue_follower("gap-loss", "rogue/15", "600ms", lead=SEC,
                                                   dist={"OnLeaderLoss": "run"})
    cfg_ok = clk.info()
    holds = ctl(name, "status")[0]["status"]["distribute"]["holds"]
    t2 = real() + 1_500_000_000
    # Change 2 announced, queued for its instant 1.5 s ahead (within the
    # 2 s a follower takes); change 4 announced after it (3 missed): a gap
    # with a change queued, so no hold yet.
    check(send("rogue/15", 2, t2, t2 - t0, 1 << 32, committed=1, lead=SEC)
          and send("rogue/15", 4, t2 + 300_000_000, t2 + 300_000_000 - t0, 1 << 32, committed=1,
                   lead=SEC),
          "gap-loss: change 2 queued, change 4 announced (3 missed)")
    time.sleep(0.2)
    st = ctl(name, "status")[0]["status"]["distribute"]
    check(st["holds"] == holds and st["refused"] == 0,
          "gap-loss: no hold for the gap (a change is queued; holds %d, refused %d)"
          % (st["holds"] - holds, st["refused"]))
    # Then silence: stale after 0.6 s, before change 2's instant; its queue
    # cleared.
    check(wait_for(lambda: clk.info().stale, 10), "gap-loss: the follower marks its clock stale")
    time.sleep(0.3)
    a = clk.info()
    time.sleep(0.3)
    b = clk.info()
    st = ctl(name, "status")[0]["status"]["distribute"]
    print("# gap-loss: %.3f ms in 0.3 s after the loss; holds %d, hold_stales %d"
          % ((b.sim_ns - a.sim_ns) / 1e6, st["holds"] - holds, st["hold_stales"]), flush=True)
    check(cfg_ok.initialized and b.sim_ns - a.sim_ns > 100_000_000 and not b.paused,
          "gap-loss: its readers run on, stale (OnLeaderLoss run): %.3f ms in 0.3 s"
          % ((b.sim_ns - a.sim_ns) / 1e6))
    check(st["hold_stales"] == 0, "gap-loss: no missed change said after the loss (%d)"
          % st["hold_stales"])
    finish(clk, rogue, p)


def queue_full_phase():
    """A rogue's 64 announcements (uncommitted: each waits for its commit)
    whose instants then come, and a 65th whose instant has come too: the
    follower refuses the 65th (the refusal was only for instants still to
    come: it was queued, its index wrapped over the queue's head), answers
    status and ends on SIGTERM. Lead 1 s: a change due and not committed
    counts as lost after 2.5 s, time enough for the 65th."""
    name, p, rogue, send, clk, t0 = rogue_follower("qfull", "rogue/16", "5s", lead=SEC)
    # The instants 1.5 s on (a change over 2 s ahead is refused as the
    # hosts' clocks disagreeing): the 64 are queued before the first comes.
    # A machine so starved that the rogue's sends ran past the first
    # instant + 1.5 s (of the 2.5 s after which the queue counts as lost)
    # is reported, not failed (issue 52: 64 sends once took longer than
    # that, and the queue was cleared: "64 queued (35)").
    # Sent 2 ms apart: a burst of 64 lost one now and then on the
    # best-effort path, and the changes after it waited for a repetition
    # this rogue never sends (a leader repeats what is not acknowledged).
    base = real() + 1_500_000_000
    ok = True
    for k in range(64):
        ok &= send("rogue/16", 2 + k, base + k * 1_000_000, base + k * 1_000_000 - t0, 1 << 32,
                   committed=1, lead=SEC)
        time.sleep(0.002)
    check(ok, "queue-full: 64 announcements sent")
    late = real() - base
    if late > 1_500_000_000:
        print("# queue-full: the 64 sends ended %.2f s after the first instant (a starved "
              "machine): the queue's limit not asserted" % (late / 1e9), flush=True)
        finish(clk, rogue, p)
        return

    def dist():
        return ctl(name, "status")[0]["status"]["distribute"]
    check(wait_for(lambda: dist()["queued"] >= 64, 5), "queue-full: 64 queued (%d)"
          % dist()["queued"])
    refused = dist()["refused"]
    while real() < base + 100_000_000:
        time.sleep(0.01)
    t65 = real() - 5_000_000  # come, after the 64th's
    check(send("rogue/16", 66, t65, t65 - t0, 1 << 32, committed=1, lead=SEC),
          "queue-full: a 65th sent, its instant come")
    got = wait_for(lambda: dist()["refused"] > refused, 5)
    st = dist()
    check(got and "64 changes" in str(st.get("refused_last")) and st["queued"] <= 64,
          "queue-full: the 65th refused, the queue at 64 (%d queued; %s)"
          % (st["queued"], st.get("refused_last")))
    finish(clk, rogue, p)


def leader_reload_phase():
    """A reload that changes a leader's TimeScale or UnixTimeAtZero is
    refused, said in its log, the clock unchanged: it would change this
    host alone, its followers fresh on the old function until its next
    heartbeat (a review found it). The change its followers agree on,
    `scale`, does it."""
    wire = "guard-lreload-" + RUN
    name, p = start("lreload", {"TimeSource": "simulation",
                                "Distribute": {"Publish": True, "Clock": wire}})
    clk = shmclock.Clock(name)
    check(wait_for(lambda: clk.info().initialized, 10), "the leader's clock runs")
    cfgpath = os.path.join(rtdir, "lreload.json")
    with open(cfgpath) as f:
        cfg = json.load(f)
    log = os.path.join(rtdir, "lreload.log")
    i0 = clk.info()
    for key, value, what in (("TimeScale", 2.0, "TimeScale of a leader"),
                             ("UnixTimeAtZero", "2026-11-22T14:00:00Z",
                              "UnixTimeAtZero of a leader")):
        with open(cfgpath, "w") as f:
            json.dump(dict(cfg, **{key: value}), f)
        p.send_signal(signal.SIGHUP)
        said = wait_for(lambda: what in open(log).read(), 2)
        i = clk.info()
        check(said and i.scale == i0.scale and i.unix_at_zero_ns == i0.unix_at_zero_ns,
              "a reload of the leader's %s is refused, said in its log, the clock unchanged "
              "(scale %g)" % (key, i.scale))
    with open(cfgpath, "w") as f:
        json.dump(cfg, f)
    r, _ = ctl(name, "scale", value=2)
    check(r.get("ok") and wait_for(lambda: clk.info().scale == 2.0, 5),
          "shmclockctl scale changes it (%s)" % r.get("error", "ok"))
    clk.close()
    stop_timed(p)


def rogue_ack_phase():
    """What a peer writes on TimeAck, the leader's input, as a rogue or a
    broken follower would: acknowledgements to another leader or term,
    extreme numbers, ids empty or 96 characters long, more followers than
    a leader keeps, a forged leave of its real follower. The leader keeps
    at most DIST_MEMBERS_MAX members (and says so once), forgets the fakes
    after their lease, still makes its changes, answers `status`, and
    ends on SIGTERM; its real follower stays on its function (a forged
    leave costs it its membership until its next lease, about a second:
    the trust boundary the README states); readers in other processes
    never see time go back."""
    wire = "guard-ack-" + RUN
    lname, lp = start("ack-leader", {"TimeSource": "simulation",
                                     "Distribute": {"Publish": True, "Clock": wire}})
    fname, fp = start("ack-follower", {"TimeSource": "leader", "Distribute": {"Clock": wire}})
    lc, fc = shmclock.Clock(lname), shmclock.Clock(fname)

    def dist(name=lname):
        return ctl(name, "status")[0]["status"]["distribute"]

    def members():
        return sorted(f["id"] for f in dist().get("followers", []))
    check(wait_for(lambda: fc.info().initialized and not fc.info().stale, 20) and
          wait_for(lambda: len(members()) == 1, 10), "the follower follows, a member")
    real_id, st = members()[0], dist()
    lid, term = st["leader"], int(st["term"])
    readers = []
    for name in (lname, fname):
        rd = subprocess.Popen([sys.executable, "-c", READER, name, "14"], stdout=subprocess.PIPE,
                              text=True, env=ENV)
        procs.append(rd)
        readers.append(rd)
    rogue, send = start_rogue(wire)
    ack = send.ack
    # Until the rogue is matched, what it writes is lost.
    check(wait_for(lambda: ack("fake/probe", lid, term) and "fake/probe" in members(), 10,
                   step=0.2), "the rogue's acknowledgements reach the leader")
    # Another leader's, another term's: nobody joins. (A valid one after
    # them, on the same reliable writer, says they arrived: in order.)
    for who, ld, tm in (("fake/other", "someone/else/1", term), ("fake/term", lid, term + 1),
                        ("fake/old", lid, term - 1 if term else 7)):
        check(ack(who, ld, tm), "an acknowledgement to %s term %d written" % (ld, tm))
    check(ack("fake/marker", lid, term) and wait_for(lambda: "fake/marker" in members(), 10),
          "a valid one after them joins")
    check(set(members()) == {real_id, "fake/probe", "fake/marker"},
          "acknowledgements to another leader or term join nobody (%s)" % members())
    for who in ("fake/probe", "fake/marker"):
        ack(who, lid, term, lease=0)
    check(wait_for(lambda: members() == [real_id], 5), "the probes leave")
    # Extremes, to this leader.
    odd = [("fake/max-lease", dict(lease=2**63 - 1)), ("fake/min-lease", dict(lease=-2**63)),
           ("fake/neg-lease", dict(lease=-1)), ("fake/unknown-leave", dict(lease=0)),
           ("fake/max-all", dict(plan=2**64 - 1, acked=2**64 - 1, committed=2**64 - 1,
                                 late=2**64 - 1, refused=2**64 - 1, holds=2**64 - 1)),
           ("x" * 96, {}), ("-", {})]
    for who, kw in odd:
        check(ack(who, lid, term, **kw), "written: %s %s" % (who[:20], kw))
    r, dt = ctl(lname, "status")
    check(r.get("ok") and lp.poll() is None, "the leader answers status after them (%.3f s)" % dt)
    check(wait_for(lambda: {"fake/neg-lease", "fake/max-all", "x" * 96} <= set(members()), 5),
          "the acknowledgements with odd numbers join (%d members)" % len(members()))
    time.sleep(0.3)
    ms = members()
    check("" not in ms and "fake/unknown-leave" not in ms and "fake/neg-lease" in ms,
          "no member without an id, none from a leave (%d members)" % len(ms))
    # The longest lease a leader believes is 60 s (a follower's StaleAfter
    # + 0.5 s): a change would wait that long for a member that never
    # acknowledges. This one leaves (a leave is as good as a rogue's).
    check(ack("fake/max-lease", lid, term, lease=0) and
          wait_for(lambda: "fake/max-lease" not in members(), 5), "the 60 s member leaves")
    # (Its slot is kept for 1 s after its leave: a leave overtaken, below.)
    time.sleep(1.2)
    # More followers than it keeps.
    for k in range(40):
        ack("fake/flood-%d" % k, lid, term)
    check(wait_for(lambda: len(members()) >= 32, 5),
          "a flood of followers fills the members (%d)" % len(members()))
    time.sleep(0.3)
    n = len(members())
    log = open(os.path.join(rtdir, "ack-leader.log")).read()
    check(n == 32 and log.count("more than 32 followers") == 1,
          "at most 32 members (%d), said once (%d)" % (n, log.count("more than 32 followers")))
    check(real_id in members(), "the real follower is still one of them")
    # A change with members that never acknowledge: declared lost after
    # their lease (3.5 s, the least a leader believes).
    r, dt = ctl(lname, "pause")
    print("# a pause with 31 fake members that never acknowledge: answered after %.3f s" % dt,
          flush=True)
    check(r.get("ok"), "the leader's change is made all the same (%.3f s; %s)"
          % (dt, r.get("error")))
    check(wait_for(lambda: fc.info().paused and not fc.info().stale, 10),
          "the real follower follows the pause")
    # A leave overtaken by an acknowledgement written before it (best
    # effort, another reader): not a member again (waited for, its lease).
    # One written after it, by a follower back whose lease is late, is a
    # member at once (ignored, the leader would decide without it).
    check(ack("fake/order", lid, term) and wait_for(lambda: "fake/order" in members(), 5),
          "a member by its lease")
    left = time.monotonic()
    check(ack("fake/order", lid, term, lease=0) and
          wait_for(lambda: "fake/order" not in members(), 5), "it leaves")
    check(ack("fake/order", lid, term, best_effort=True, age=300_000_000),
          "an acknowledgement written 0.3 s before arrives")
    # (The leader tells it so for 1 s after the leave.)
    late = time.monotonic() - left
    time.sleep(0.2)
    if late < 0.4:
        check("fake/order" not in members(), "a leave overtaken by an acknowledgement written "
              "before it: not a member again")
        # Within the second after the leave (the leader's from its
        # taking it, later than this one's): ignored, it would join only
        # after that second.
        check(ack("fake/order", lid, term, best_effort=True) and
              wait_for(lambda: "fake/order" in members(), 0.95 - (time.monotonic() - left)),
              "an acknowledgement written after it: a member again at once (%.3f s after "
              "the leave)" % (time.monotonic() - left))
    else:
        print("# the acknowledgement went %.3f s after the leave (a busy machine): not "
              "asserted" % late, flush=True)
    check(ack("fake/order", lid, term) and wait_for(lambda: "fake/order" in members(), 5),
          "back by its lease")
    # A leave arrives twice (through the leader's reliable reader and its
    # best-effort one): the later copy, once the follower is back by a
    # lease written after the leave, must not drop it.
    check(ack("fake/order", lid, term, lease=0, best_effort=True, age=500_000_000),
          "a copy of a leave written 0.5 s before its lease arrives")
    time.sleep(0.3)
    check("fake/order" in members(), "a leave older than the member's lease: still a member")
    check(ack("fake/order", lid, term, lease=0) and
          wait_for(lambda: "fake/order" not in members(), 5), "and gone by a leave after it")
    # A forged leave: the real follower is dropped, and back with its
    # next lease.
    before = open(os.path.join(rtdir, "ack-leader.log")).read().count("left clock")
    check(ack(real_id, lid, term, lease=0), "a forged leave of the real follower written")
    check(wait_for(lambda: open(os.path.join(rtdir, "ack-leader.log")).read().count(
        "left clock") > before, 5), "the leader takes it (the trust boundary)")
    check(wait_for(lambda: real_id in members(), 10), "the real follower is a member again "
          "with its next lease")
    r, _ = ctl(lname, "resume")
    check(r.get("ok") and wait_for(lambda: not fc.info().paused and not fc.info().stale, 10),
          "and follows the resume")
    a, b = lc.info(), fc.info()
    check(abs(a.sim_ns - b.sim_ns) < 50_000_000, "the follower on the leader's time (%.3f ms)"
          % ((b.sim_ns - a.sim_ns) / 1e6))
    for rd in readers:
        out = json.loads(rd.stdout.readline() or "{}")
        check(out.get("reads", 0) > 1000 and out.get("back", 1) == 0,
              "a reader in another process: %s reads, %s back" % (out.get("reads"),
                                                                   out.get("back")))
        rd.wait(10)
    rogue.stdin.close()
    rogue.wait(10)
    for p in (fp, lp):
        t = stop_timed(p)
        check(t is not None and p.returncode == 0, "SIGTERM ends it (%s s, exit %s)"
              % (t, p.returncode))
    lc.close()
    fc.close()


# A reader in its own process: reads the clock as fast as it can for the
# given seconds; a reading below the one before within a jump epoch is time
# going back. Prints one JSON line.
READER = r"""
import json, sys, time, shmclock
clk = shmclock.Clock(sys.argv[1])
end = time.monotonic() + float(sys.argv[2])
n = back = fresh = stuck = 0
worst = 0
prev = None
while time.monotonic() < end:
    try:
        i = clk.info()
    except BlockingIOError:
        # -EAGAIN: the writer was SIGSTOPped within the few instructions
        # that open an update, for over a second (libshmclock(3)): the
        # read says so rather than wait; nothing to compare.
        stuck += 1
        continue
    n += 1
    fresh += not i.stale
    if prev is not None and i.jump_epoch == prev.jump_epoch and i.sim_ns < prev.sim_ns:
        back += 1
        worst = max(worst, prev.sim_ns - i.sim_ns)
    prev = i
print(json.dumps(dict(reads=n, back=back, worst_ns=worst, fresh=fresh, stuck=stuck)), flush=True)
"""


def fuzz_phase():
    """A leader gone wrong and a follower that stops: for FUZZ_SECONDS
    (20) a rogue sends random samples — changes announced, moved under
    higher or lower plans, committed under the wrong plan, instants behind
    and ahead, jumps, functions going back without one, changes after a
    gap, silences — while the follower is SIGSTOPped and continued at
    random (a loaded host). Whatever it is sent, the follower's time never
    goes back within a jump epoch, and it still answers status and ends on
    SIGTERM. (A leader that keeps the protocol waits for the follower's
    acknowledgement or its lease; this one does not, so what the readings
    show is not judged against its function here.)"""
    seed = int(os.environ.get("FUZZ_SEED", random.randrange(1 << 30)))
    rnd = random.Random(seed)
    dur = float(os.environ.get("FUZZ_SECONDS", "20"))
    wire = "guard-fuzz-" + RUN
    name, p = start("fuzz", {"TimeSource": "leader",
                             "Distribute": {"Clock": wire, "StaleAfter": "1s"}})
    rogue, rogue_send = start_rogue(wire)

    def at(f, t):
        return f[1] + ((t - f[0]) * f[2] >> 32) if t > f[0] else f[1]

    def send(c, eff, base, mult, fl, ep, committed, plan):
        return rogue_send("rogue/6", c, eff, base, mult, fl, ep, committed=committed, plan=plan)

    t0 = real()
    fn = (t0, 0, 1 << 32)  # the function in force: instant, base, rate (0 paused)
    change, epoch, plan = 1, 0, 0
    check(send(1, t0, 0, 1 << 32, 0, 0, 1, 0), "the rogue publisher writes")
    clk = shmclock.Clock(name)
    check(wait_for(lambda: clk.info().initialized, 20), "the follower takes function 1")
    clk.close()
    rd = subprocess.Popen([sys.executable, "-c", READER, name, str(dur)], stdout=subprocess.PIPE,
                          text=True, env=ENV)
    procs.append(rd)
    end = time.monotonic() + dur - 1
    stops = [0]

    def stopper():
        while time.monotonic() < end - 2:
            time.sleep(rnd.uniform(0.5, 3))
            p.send_signal(signal.SIGSTOP)
            stops[0] += 1
            time.sleep(rnd.choice([0.05, 0.3, 0.9, 1.5]))
            p.send_signal(signal.SIGCONT)
    th = threading.Thread(target=stopper)
    th.start()
    pending = None
    sent = 0
    try:
        while time.monotonic() < end:
            now = real()
            r = rnd.random()
            if pending is None or r < 0.2:
                # the next change, at an instant ahead or behind
                eff = now + rnd.choice([-50, -5, 1, 5, 20, 100, 300, 800]) * 1_000_000
                mult = rnd.choice([1 << 31, 1 << 32, 2 << 32, 3 << 31])
                fl = 1 if rnd.random() < 0.3 else 0
                ep, base = epoch, at(fn, eff)
                if rnd.random() < 0.1:
                    ep, base = epoch + 1, base + rnd.choice([-5, 5]) * SEC  # a jump
                elif rnd.random() < 0.05:
                    base -= rnd.choice([1000, 1_000_000])  # back, without a jump
                pending = (change + 1, eff, base, mult, fl, ep, plan + rnd.randrange(2))
                send(*pending[:6], change, pending[6])
            elif r < 0.4:
                # moved later, under the next plan
                c, eff, base, mult, fl, ep, pl = pending
                eff = max(eff, now) + rnd.choice([10, 100, 400]) * 1_000_000
                pending = (c, eff, at(fn, eff) if ep == epoch else base, mult, fl, ep, pl + 1)
                send(*pending[:6], change, pl + 1)
            elif r < 0.75:
                # committed, now and then under another plan than announced
                c, eff, base, mult, fl, ep, pl = pending
                wp = pl if rnd.random() < 0.85 else pl + rnd.choice([-1, 1])
                send(c, eff, base, mult, fl, ep, c, wp)
                if wp == pl:
                    fn, change, epoch, plan = (eff, base, 0 if fl else mult), c, ep, pl
                    pending = None
            elif r < 0.85:
                # the function in force again (a heartbeat)
                send(change, fn[0], fn[1], fn[2] or 1 << 32, 0 if fn[2] else 1, epoch, change,
                     plan)
            elif r < 0.9:
                # a change after a gap (those between never sent)
                e2 = now + 200_000_000
                send(change + rnd.choice([2, 5]), e2, at(fn, e2), 1 << 32, 0, epoch, change, plan)
            else:
                time.sleep(rnd.choice([0.05, 0.3, 1.2]))  # silence
            sent += 1
            time.sleep(rnd.choice([0, 0.001, 0.01, 0.05]))
    finally:
        th.join()
        p.send_signal(signal.SIGCONT)
    out = json.loads(rd.stdout.readline() or "{}")
    rd.wait(10)
    r, dt = ctl(name, "status")
    st = r.get("status", {}).get("distribute", {})
    print("# fuzz (seed %d, FUZZ_SEED to repeat): %d samples, %d stops; follower: %d changes, "
          "%d refused (last: %s), %d holds, %d stale holds; reader: %s"
          % (seed, sent, stops[0], st.get("changes", -1), st.get("refused", -1),
             st.get("refused_last"), st.get("holds", -1), st.get("hold_stales", -1), out),
          flush=True)
    check(out.get("reads", 0) > 10000 and out.get("fresh", 0) > 0,
          "the reader read the clock throughout (%s reads, %s fresh)"
          % (out.get("reads"), out.get("fresh")))
    check(out.get("back", 1) == 0, "the follower's time never went back within a jump epoch "
          "(%s readings back, worst %.3f ms)" % (out.get("back"), out.get("worst_ns", 0) / 1e6))
    check(r.get("ok") and dt < BOUND, "status answers after it (%.1f ms)" % (dt * 1e3))
    # One host, one clock: the messages that waited while it was stopped
    # are late, not a clock offset.
    log = open(os.path.join(rtdir, "fuzz.log")).read()
    false_skew = [x for x in log.splitlines() if "this host's clock is" in x]
    check(not false_skew and not st.get("clocks_disagree"),
          "no clock offset reported from messages that waited while it was stopped (%d: %s)"
          % (len(false_skew), false_skew[:1]))
    rogue.stdin.close()
    rogue.wait(10)
    dt = stop_timed(p)
    check(dt is not None and dt < BOUND and p.returncode == 0,
          "SIGTERM ends it promptly and cleanly (%s, exit %s)"
          % ("never" if dt is None else "%.1f ms" % (dt * 1e3), p.returncode))


class Pipeline:
    """A client that writes many lines at once and reads the replies as
    they come (a client that stops reading is dropped once its socket
    buffer is full)."""

    def __init__(self, name, lines):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.settimeout(60)
        self.s.connect(os.path.join(rtdir, name + ".sock"))
        self.n = lines.count("\n")
        self.buf = b""
        self.t0 = time.monotonic()
        self.took = None
        self.thread = threading.Thread(target=self.read)
        self.thread.start()
        self.s.sendall(lines.encode())

    def read(self):
        try:
            while self.buf.count(b"\n") < self.n:
                chunk = self.s.recv(1 << 20)
                if not chunk:
                    break
                self.buf += chunk
        except OSError:
            pass
        self.took = time.monotonic() - self.t0

    def replies(self, timeout):
        self.thread.join(timeout)
        return [json.loads(x) for x in self.buf.decode().splitlines()]


def pause_resume(n):
    return "".join('{"cmd":"%s"}\n' % ("pause" if k % 2 == 0 else "resume") for k in range(n))


def pipeline_phase():
    wire = "guard-lead-" + RUN
    name, p = start("leader", {"TimeSource": "simulation",
                               "Distribute": {"Publish": True, "Clock": wire, "Lead": "20ms"}})
    a = Pipeline(name, pause_resume(200))
    b = Pipeline(name, pause_resume(100))
    time.sleep(0.2)
    worst = 0.0
    r, dt = ctl(name, "pause")
    check(not r["ok"] and "instants" in r["error"],
          "with 64 changes waiting, another change is refused: %s" % r.get("error"))
    while time.monotonic() - a.t0 < 0.8:  # 300 changes, one at a time: they still wait
        r, dt = ctl(name, "status")
        worst = max(worst, dt)
        time.sleep(0.05)
    queued = r["status"]["distribute"]["queued"]
    print("# 200 + 100 pipelined changes from two clients, Lead 20ms: %d queued; status from "
          "another client: worst %.1f ms" % (queued, worst * 1e3), flush=True)
    check(worst < BOUND, "status from another client answers at once meanwhile")
    check(queued == 64, "the changes wait in a queue of 64 (%d)" % queued)
    for what, pl in (("200", a), ("100", b)):
        rs = pl.replies(60)
        oks = [x for x in rs if x.get("ok")]
        print("# the %s-line client: %d replies in %.3f s, %d ok" % (what, len(rs), pl.took or -1,
                                                                    len(oks)), flush=True)
        check(len(rs) == pl.n and len(oks) == pl.n,
              "every line of the %s-line client is answered, each change made in turn" % what)
        check(not rs[-1]["status"]["paused"], "the last reply is the last line's (resume)")
        pl.s.close()
    # SIGTERM with changes queued
    c = Pipeline(name, pause_resume(64))
    time.sleep(0.2)
    queued = ctl(name, "status")[0]["status"]["distribute"]["queued"]
    dt = stop_timed(p)
    print("# leader with %d changes queued: SIGTERM to exit %s"
          % (queued, "never (killed)" if dt is None else "%.1f ms" % (dt * 1e3)), flush=True)
    check(queued > 10, "changes were queued at the SIGTERM (%d)" % queued)
    check(dt is not None and dt < BOUND, "SIGTERM ends the leader promptly with changes queued")
    c.replies(10)
    c.s.close()


def crowd_phase():
    """A leader's changes wait for their instants (Lead 300ms), so its
    clients wait with commands in flight: 32 such clients (the most the
    daemon serves) and a 33rd: the newcomer is refused with a clear line,
    and each of the 32 gets its change's reply, ok. (The daemon evicted the
    longest idle of them, commands in flight or not: its change was made,
    and it was told it was dropped.) And a client that sends its change and
    shuts its side (printf ... | socat): answered, then closed. (Its end of
    input dropped it at once, its change made, unanswered.)"""
    wire = "guard-crowd-" + RUN
    name, p = start("crowd", {"TimeSource": "simulation",
                              "Distribute": {"Publish": True, "Clock": wire, "Lead": "300ms"}})
    sock = os.path.join(rtdir, name + ".sock")
    t0 = time.monotonic()
    pls = [Pipeline(name, '{"cmd":"scale","value":%g}\n' % (1 + k / 1000)) for k in range(32)]
    setup = time.monotonic() - t0
    late = socket.socket(socket.AF_UNIX)
    late.settimeout(10)
    late.connect(sock)
    try:
        late.sendall(b'{"cmd":"status"}\n')
    except OSError:
        pass  # refused and closed before it wrote: the refusal is to read
    buf = b""
    try:
        while not buf.endswith(b"\n"):
            chunk = late.recv(65536)
            if not chunk:
                break
            buf += chunk
    except OSError:
        pass
    late.close()
    try:
        r = json.loads(buf.decode().splitlines()[0])
    except (ValueError, IndexError):
        r = {}
    if setup < 0.25:
        check(not r.get("ok") and "too many clients" in r.get("error", ""),
              "crowd: a 33rd client while 32 wait for their changes is refused: %s"
              % (r.get("error") or buf[:80]))
    else:
        # The first change (Lead 300ms) may be answered by now: its client
        # is idle again, and may make room. Not asserted; the replies below
        # still are.
        print("# crowd: 32 clients took %.3f s to connect: the 33rd not asserted (%s)"
              % (setup, r.get("error") or "admitted"), flush=True)
    bad = []
    for k, pl in enumerate(pls):
        rs = pl.replies(60)
        if len(rs) != 1 or not rs[0].get("ok"):
            bad.append((k, rs[0].get("error") if rs else "no reply"))
        pl.s.close()
    check(not bad, "crowd: each of the 32 gets its change's reply, ok (not: %s)" % bad[:3])
    # Half-closed: the reply still comes, then the end.
    hc = socket.socket(socket.AF_UNIX)
    hc.settimeout(10)
    hc.connect(sock)
    hc.sendall(b'{"cmd":"pause"}\n')
    hc.shutdown(socket.SHUT_WR)
    buf = b""
    try:
        while True:
            chunk = hc.recv(65536)
            if not chunk:
                break
            buf += chunk
    except OSError as ex:
        buf += b" (" + str(ex).encode() + b")"
    hc.close()
    lines = buf.decode(errors="replace").splitlines()
    check(len(lines) == 1 and json.loads(lines[0]).get("ok"),
          "crowd: a client that shuts its side after a change gets the reply, then the end (%r)"
          % buf[:80])
    # And one that sends more lines than may be in flight (32), a status
    # last, then shuts its side: every line answered, in order, then the end.
    hc = socket.socket(socket.AF_UNIX)
    hc.settimeout(60)
    hc.connect(sock)
    hc.sendall((pause_resume(40) + '{"cmd":"status"}\n').encode())
    hc.shutdown(socket.SHUT_WR)
    buf = b""
    try:
        while True:
            chunk = hc.recv(1 << 20)
            if not chunk:
                break
            buf += chunk
    except OSError as ex:
        buf += b" (" + str(ex).encode() + b")"
    hc.close()
    try:
        rs = [json.loads(x) for x in buf.decode(errors="replace").splitlines()]
    except ValueError:
        rs = []
    check(len(rs) == 41 and all(x.get("ok") for x in rs) and rs[-1]["status"]["paused"] is False,
          "crowd: 40 changes and a status, then its end of input: 41 replies, ok, in order (%d)"
          % len(rs))
    stop_timed(p)


def split_brain_runs_phase(runs=SPLIT_RUNS, batch=5):
    """Two leaders of one clock started together, a follower a second
    later, @runs times (@batch at once, each on a wire of its own): one
    leader leads, the other is deposed, and the follower reports the
    conflict, in status and its log, within 5 s of its start, whichever
    sample of which leader it hears first, and follows the one that leads.
    (Before: the deposed leader fell silent, and a follower that joined
    after its last sample had aged past three heartbeats saw one leader
    only: no conflict, 1 run in 7.)"""
    missed, wrong, took, still = [], [], [], []
    for b0 in range(0, runs, batch):
        trios = []
        for k in range(b0, min(runs, b0 + batch)):
            wire = "guard-split-%d-%s" % (k, RUN)
            lead = {"TimeSource": "simulation", "Distribute": {"Publish": True, "Clock": wire}}
            a = start("split%d-a" % k, lead)
            b = start("split%d-b" % k, lead)
            trios.append([k, a, b, wire])
        time.sleep(1.0)
        for t in trios:
            t.append(start("split%d-f" % t[0], {"TimeSource": "leader",
                                                 "Distribute": {"Clock": t[3]}}))
            t.append(time.monotonic())
        def dist(name):
            r, _ = ctl(name, "status")
            return r.get("status", {}).get("distribute", {})

        # Each follower polled until it reports the conflict or 5 s from
        # its start passed: the count and the log line stay.
        pending = {t[0]: t for t in trios}
        while pending:
            for k, a, b, _, f, t0 in list(pending.values()):
                d = dist(f[0])
                log = open(os.path.join(rtdir, "split%d-f.log" % k)).read()
                if d.get("conflicts", 0) >= 1 and "conflict" in log:
                    took.append(time.monotonic() - t0)
                    del pending[k]
                elif time.monotonic() > t0 + 5:
                    missed.append(k)
                    del pending[k]
            time.sleep(0.05)
        for k, a, b, _, f, t0 in trios:
            da, db = dist(a[0]), dist(b[0])
            leading = da if not da.get("deposed") else db
            if da.get("deposed") == db.get("deposed") or \
                    not wait_for(lambda: dist(f[0]).get("leader") == leading.get("leader"), 5):
                wrong.append((k, da.get("deposed"), db.get("deposed"), dist(f[0]).get("leader")))
            if k not in missed and not dist(f[0]).get("conflict"):
                # Shown while the other leader runs (10 s after the last
                # sign of it), not only once.
                still.append(k)
        ps = [p for t in trios for p in (t[1][1], t[2][1], t[4][1])]
        for p in ps:
            p.send_signal(signal.SIGTERM)
        for p in ps:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    took.sort()
    print("# split brain, %d runs: the follower reported the conflict in %d, %.3f s after its "
          "start at the median, %.3f s at most" % (runs, len(took), took[len(took) // 2] if took
                                                   else -1, took[-1] if took else -1), flush=True)
    check(not missed, "split brain: the follower reports the conflict within 5 s in each of %d "
          "runs (not in: %s)" % (runs, missed or "none"))
    check(not wrong, "split brain: one leader deposed, the follower on the other, in each run "
          "(not in: %s)" % (wrong[:3] or "none"))
    check(not still, "split brain: the follower still shows the conflict while both leaders run "
          "(not in: %s)" % (still or "none"))


def fleet_limits_phase():
    """Issue 57's small two. More daemons on one host than Cyclone has
    participant indexes (MaxAutoParticipantIndex 1 here): the surplus
    exits with a line that names the cause and the fix (before: "cannot
    create a participant (check CYCLONEDDS_URI)"). And a leader stopped
    past three of its heartbeats, then continued: it leads on, and its log
    says nothing of a leader lost or silent (before: "no word from leader
    <its own id>", the transport's silence watch on its own samples)."""
    uri = URI.replace("<MaxAutoParticipantIndex>20", "<MaxAutoParticipantIndex>1")
    wire = "guard-fleet-" + RUN
    lead = {"TimeSource": "simulation", "Distribute": {"Publish": True, "Clock": wire}}
    started, refused = [], None
    for k in range(4):
        try:
            started.append(start("fleet%d" % k, lead, {"CYCLONEDDS_URI": uri}))
        except RuntimeError as e:
            refused = str(e)
            break
    check(refused is not None and "MaxAutoParticipantIndex" in refused and
          "participant indexes" in refused,
          "fleet: a daemon past the host's participant indexes says so and names the fix "
          "(%d started; %s)" % (len(started), ([x for x in (refused or "").splitlines()
                                                 if "participant" in x] or ["none refused"])[-1]))
    for _, p in started:
        stop_timed(p)
    name, p = start("selfstale", lead)
    time.sleep(1.0)
    p.send_signal(signal.SIGSTOP)
    time.sleep(1.0)  # five heartbeats of 200 ms
    p.send_signal(signal.SIGCONT)
    time.sleep(1.0)
    r, _ = ctl(name, "status")
    d = r.get("status", {}).get("distribute", {})
    log = open(os.path.join(rtdir, "selfstale.log")).read()
    check(d.get("role") == "leader" and not d.get("deposed") and not r["status"].get("stale") and
          "no word from" not in log and "lost (" not in log,
          "fleet: a leader stopped for 1 s leads on, and does not call itself lost or silent "
          "(stale %s; log: %s)" % (r.get("status", {}).get("stale"),
                                   [x for x in log.splitlines() if "word" in x or "lost" in x][:2]))
    stop_timed(p)


def skew_wait_phase():
    """A follower stopped twice in a row, its leader silent in between: each
    backlog it finds on waking is late by the wait, which is not a clock
    offset, and it says none (a fuzz run in about twenty under ASan did:
    the second backlog kept the first one's evidence)."""
    wire = "guard-skew-" + RUN
    name, p = start("skew", {"TimeSource": "leader",
                             "Distribute": {"Clock": wire, "StaleAfter": "5s"}})
    rogue, send = start_rogue(wire)
    t0 = real()

    def beat():
        return send("rogue/15", 1, t0, 0, committed=1)

    check(beat(), "the rogue publisher writes")
    clk = shmclock.Clock(name)
    check(wait_for(lambda: clk.info().initialized, 20), "the follower takes the function")
    clk.close()
    for _ in range(20):
        beat()
        time.sleep(0.02)
    p.send_signal(signal.SIGSTOP)
    for _ in range(15):  # a backlog: 0.3 s of messages, then 0.5 s of silence
        beat()
        time.sleep(0.02)
    time.sleep(0.5)
    p.send_signal(signal.SIGCONT)
    time.sleep(0.05)
    p.send_signal(signal.SIGSTOP)
    beat()  # waits 1.2 s: later than 1 s after the first backlog was taken
    time.sleep(1.2)
    p.send_signal(signal.SIGCONT)
    time.sleep(0.3)
    log = open(os.path.join(rtdir, "skew.log")).read()
    false_skew = [x for x in log.splitlines() if "this host's clock is" in x]
    r, _ = ctl(name, "status")
    check(not false_skew and not r.get("status", {}).get("distribute", {}).get("clocks_disagree"),
          "two backlogs in a row are not a clock offset (%d: %s)" % (len(false_skew),
                                                                     false_skew[:1]))
    rogue.stdin.close()
    rogue.wait(10)
    stop_timed(p)


def main():
    crowd_phase()
    rogue_phase()
    rejoin_phase()
    backlog_phase()
    drops_phase()
    rejoin_stopped_phase()
    lease_phase()
    late_thread_phase()
    moved_hold_phase()
    lost_held_phase()
    gap_step_phase()
    lost_step_phase()
    leader_step_phase()
    gap_loss_phase()
    queue_full_phase()
    rogue_ack_phase()
    leader_reload_phase()
    echo_phase()
    echo_flood_phase()
    echo_staged_phase()
    echo_lost_phase()
    echo_late_phase()
    fuzz_phase()
    skew_wait_phase()
    pipeline_phase()
    split_brain_runs_phase()
    fleet_limits_phase()
    aside_phase()


if __name__ == "__main__":
    try:
        # GUARD_ONLY=name,name: only those phases (name_phase), to work on one.
        if os.environ.get("GUARD_ONLY"):
            for ph in os.environ["GUARD_ONLY"].split(","):
                globals()[ph + "_phase"]()
        else:
            main()
    except Exception as e:
        check(False, "the run completed: %r" % e)
        for f in os.listdir(rtdir):
            if f.endswith(".log"):
                print("# --- %s\n%s" % (f, open(os.path.join(rtdir, f)).read()[-3000:]))
    finally:
        remove(procs, clocks, rtdir)
    sys.exit(1 if hostsenv.failures else 0)
