#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A fleet of followers (issue 57), through the built shmclockd, in a network
namespace of this test's own (it runs itself under `unshare --net`: root),
so that every UDP datagram the kernel counts there is this run's:

- traffic at rest is linear in the number of followers: one leader, then 2
  and 8 followers, with the discovery doc/hosts.md gives for a fleet
  (followers name the leader as their only peer); each follower's share of
  the datagrams at rest, counted per heartbeat the leader sent (counts, not
  time), is the same with 8 as with 2 (within 20 %). Before, the leader's
  one TimeEcho writer sent every follower's echo to every follower: 1.4x
  per follower from 2 to 8, the square of the fleet.

- the leader's DDS sockets capped at 128 kB of receive buffer: it says
  so, once, when its eighth follower joins (starved, it would drop their
  datagrams within a second);
- one follower of the eight starved (SIGSTOPped 40 ms of every 50): the
  leader names it (status "slowest", one log line; changes are made until
  it names one, 200 at most), every change is still
  made and is fresh on the seven others, none of them is lost; the Lead
  follows the acknowledgements' p90, not their slowest; stopped for longer
  than its lease (5 s), it alone is lost (stale), the changes go on without
  it, and continued it is a member again, fresh on the leader's function.

Counts and times are printed; no assertion on a time (the machine may be
loaded). Environment: SHMCLOCKD, PYTHONPATH (the built module).
"""
import os
import random
import shutil
import signal
import sys
import tempfile
import time

from hostsenv import check, ctl_at, remove, start_daemon, starved, wait_for
import hostsenv



SHMCLOCKD = os.environ["SHMCLOCKD"]
INNER = os.environ.get("SHMCLOCK_FLEET_NETNS") == "1"
if not INNER:
    if os.geteuid() != 0:
        hostsenv.skip("needs root for a network namespace of its own (unshare --net)")
    if not shutil.which("unshare") or not shutil.which("ip"):
        hostsenv.skip("unshare (util-linux) or ip (iproute2) is not installed")
    # The namespace ends with this process: nothing to remove.
    os.execvpe("unshare", ["unshare", "--net", "sh", "-c",
                           'ip link set lo up && exec "$0" "$@"', sys.executable] + sys.argv,
               dict(os.environ, SHMCLOCK_FLEET_NETNS="1"))

RUN = "%d-%d" % (os.getpid(), random.randrange(1 << 20))
DOMAIN = 5
# The leader's participant index is fixed (0), so its discovery port is
# known; a follower takes a port of its own (ParticipantIndex none) and
# sends its discovery to the leader only: followers never meet. (With every
# host a peer of every other, as the single-host tests configure, DDS's own
# discovery grows with the square of the fleet: each participant renews its
# presence with every other.)
LEADER_PORT = 7400 + 250 * DOMAIN + 10
URI = ('<CycloneDDS><Domain id="any"><General><Interfaces><NetworkInterface address="127.0.0.1"/>'
       '</Interfaces><AllowMulticast>false</AllowMulticast></General><Discovery>%s</Discovery>'
       '</Domain></CycloneDDS>')
# The leader's socket buffers capped at 128 kB (what a host whose
# net.core.rmem_max is small grants): it says so once it leads 8.
LEADER_URI = (URI % "<ParticipantIndex>0</ParticipantIndex>").replace(
    "</Domain>", '<Internal><SocketReceiveBufferSize max="128kB"/></Internal></Domain>')
FOLLOWER_URI = URI % ('<ParticipantIndex>none</ParticipantIndex><Peers><Peer address="127.0.0.1:%d"/>'
                      '</Peers>' % LEADER_PORT)
procs = []
clocks = []
fleet = {}  # tag: (name, process), the followers
rtdir = tempfile.mkdtemp(prefix="shmclock-fleet-")
WIRE = "fleet-" + RUN


hostsenv.on_signals(lambda: remove(procs, clocks, rtdir))


def start(tag, cfg, uri):
    name = "fleet-%s-%s" % (RUN, tag)
    clocks.append(name)
    p = start_daemon(SHMCLOCKD, rtdir, tag, name, dict(cfg, Ros2={"Domain": DOMAIN}),
                     dict(os.environ, CYCLONEDDS_URI=uri, SHMCLOCK_RUNTIME_DIR=rtdir))
    procs.append(p)
    return name


def sock(name):
    return os.path.join(rtdir, name + ".sock")


def dist(name):
    return ctl_at(sock(name), "status")["status"]["distribute"]


def udp_in():
    """UDP datagrams delivered in this namespace so far."""
    with open("/proc/net/snmp") as f:
        rows = [line.split() for line in f if line.startswith("Udp:")]
    return int(rows[1][rows[0].index("InDatagrams")])


def at_rest(leader, n, window):
    """Datagrams per heartbeat of the leader, and per second, over @window
    seconds at rest with @n followers."""
    sent0, udp0, t0 = dist(leader)["sent"], udp_in(), time.monotonic()
    time.sleep(window)
    sent1, udp1, t1 = dist(leader)["sent"], udp_in(), time.monotonic()
    beats = sent1 - sent0
    got = udp1 - udp0
    print("# %d followers at rest: %d datagrams in %.2f s (%.1f/s, %.2f/s a follower), %d "
          "heartbeats: %.2f a heartbeat, %.3f a heartbeat and follower"
          % (n, got, t1 - t0, got / (t1 - t0), got / (t1 - t0) / n, beats, got / max(beats, 1),
             got / max(beats, 1) / n), flush=True)
    return got / max(beats, 1) / n


def traffic_phase():
    leader = start("leader", {"TimeSource": "simulation",
                              "Distribute": {"Publish": True, "Clock": WIRE}}, LEADER_URI)
    share = {}
    k = 0
    for n in (2, 8):
        while k < n:
            tag = "f%d" % k
            fleet[tag] = (start(tag, {"TimeSource": "leader", "Distribute": {"Clock": WIRE}},
                                FOLLOWER_URI), procs[-1])
            k += 1
        joined = wait_for(lambda: len(dist(leader).get("followers", [])) == n, 60, 0.1)
        check(joined, "%d followers joined (%d)" % (n, len(dist(leader).get("followers", []))))
        if not joined:
            return None
        time.sleep(3)  # discovery and joins settle
        share[n] = at_rest(leader, n, 8)
        said = open(os.path.join(rtdir, "leader.log")).read().count("of receive buffer")
        check(said == (1 if n >= 8 else 0),
              "with %d followers and 128 kB of socket buffer the leader says it %s (%d lines; "
              "status udp_rcvbuf_bytes %s)" % (n, "once" if n >= 8 else "not yet", said,
                                                dist(leader).get("udp_rcvbuf_bytes")))
    check(share[8] <= 1.2 * share[2],
          "a follower's share of the traffic at rest is the same with 8 followers as with 2 "
          "(%.3f and %.3f datagrams a heartbeat: %.2fx; the square of the fleet made it 1.4x)"
          % (share[8], share[2], share[8] / share[2]))
    return leader


def info(name):
    import shmclock
    with shmclock.Clock(name) as c:
        return c.info()


def changes(leader, count, gap=0.1):
    """@count changes (pause, resume in turn), each answered: the seconds
    each took, and whether all were made."""
    took, ok = [], True
    for i in range(count):
        t0 = time.monotonic()
        r = ctl_at(sock(leader), "pause" if i % 2 == 0 else "resume")
        took.append(time.monotonic() - t0)
        ok = ok and bool(r.get("ok"))
        time.sleep(gap)
    return took, ok


def fresh_on(name, paused):
    i = info(name)
    return not i.stale and i.paused == paused


def starve_phase(leader):
    slow_tag = "f7"
    slow, sp = fleet[slow_tag]
    others = [n for t, (n, p) in fleet.items() if t != slow_tag]
    sid = None
    lost0 = dist(leader).get("lost_followers", 0)
    # Changes until the leader names a straggler (at most 200), not a
    # fixed count: starved 40 ms of 50, the follower is the last to hold
    # 65-85 % of the changes, and the leader names one that held up 24 of
    # the last 32: after 60 changes it had not, now and then, on a loaded
    # machine.
    took, ok = [], True
    with starved(sp):
        while len(took) < 200 and not dist(leader).get("slowest"):
            t, k = changes(leader, 2)
            took += t
            ok = ok and k
    st = dist(leader)
    for f in st.get("followers", []):
        if f.get("slowest", 0) >= 12:
            sid = f["id"]
    took.sort()
    print("# starved follower: named after %d changes, answered in %.1f ms (p50), %.1f ms (max); "
          "Lead %.1f ms; its share of the changes it held up last: %s" % (
              len(took), took[len(took) // 2] * 1e3, took[-1] * 1e3,
              st.get("lead_current_ns", 0) / 1e6,
              [(f["id"].split("/")[1], f.get("slowest")) for f in st.get("followers", [])]),
          flush=True)
    check(ok, "every change was made with one follower starved")
    llog = open(os.path.join(rtdir, "leader.log")).read()
    check(sid is not None and str(sp.pid) in sid.split("/")[1] and st.get("slowest") == sid,
          "the leader names the starved follower as the one every change waits for (%s; pid %d)"
          % (st.get("slowest"), sp.pid))
    said = [line for line in llog.splitlines() if "was the last to hold" in line]
    check(len(said) == 1 and ("/%d/" % sp.pid) in said[0],
          "... and says so in its log, once (%s)" % said)
    check(st.get("lost_followers", 0) == lost0, "no follower was lost (%d)"
          % (st.get("lost_followers", 0) - lost0))
    paused = info(leader).paused
    check(wait_for(lambda: all(fresh_on(n, paused) for n in others), 10, 0.1),
          "the seven others are fresh on the leader's last change")
    # Stopped past its lease: lost alone, the others go on without it.
    sp.send_signal(signal.SIGSTOP)
    try:
        took, ok = changes(leader, 10, 0.5)
        st = dist(leader)
        print("# stopped follower: 10 changes answered in %s s; %d followers lost" % (
            " ".join("%.2f" % x for x in took), st.get("lost_followers", 0) - lost0), flush=True)
        check(ok, "every change was made with one follower stopped")
        check(st.get("lost_followers", 0) - lost0 <= 1 and
              all(("/%d/" % sp.pid) not in f["id"] for f in st.get("followers", [])),
              "it alone is no longer waited for (%d lost)" % (st.get("lost_followers", 0) - lost0))
        # Relative, not a bound on time: the first waits for its lease,
        # the rest (their median) far less, however busy the machine.
        later = sorted(took[1:])[len(took[1:]) // 2]
        check(later < took[0] / 2,
              "once it is lost the changes no longer wait for it (the first %.2f s, the rest "
              "%.2f s at the median)" % (took[0], later))
        paused = info(leader).paused
        check(wait_for(lambda: all(fresh_on(n, paused) for n in others), 10, 0.1),
              "the seven others are fresh on the last one")
    finally:
        sp.send_signal(signal.SIGCONT)
    check(wait_for(lambda: any(("/%d/" % sp.pid) in f["id"]
                               for f in dist(leader).get("followers", [])), 30, 0.1),
          "continued, it is a member again")
    check(wait_for(lambda: fresh_on(slow, info(leader).paused), 30, 0.1),
          "... and fresh on the leader's function")


try:
    leader = traffic_phase()
    if leader:
        starve_phase(leader)
except Exception as e:  # a failure's evidence, not a traceback only
    check(False, "the fleet ran (%s: %s)" % (type(e).__name__, e))
finally:
    remove(procs, clocks, rtdir)
sys.exit(1 if hostsenv.failures else 0)
