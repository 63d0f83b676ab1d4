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

Counts are printed. Environment: SHMCLOCKD, PYTHONPATH (the built module).
"""
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from hostsenv import check, ctl_at, remove, start_daemon, wait_for
import hostsenv


def skip(why):
    print("skip: " + why, flush=True)
    sys.exit(77)


SHMCLOCKD = os.environ["SHMCLOCKD"]
INNER = os.environ.get("SHMCLOCK_FLEET_NETNS") == "1"
if not INNER:
    if os.geteuid() != 0:
        skip("needs root for a network namespace of its own (unshare --net)")
    if not shutil.which("unshare") or not shutil.which("ip"):
        skip("unshare (util-linux) or ip (iproute2) is not installed")
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
LEADER_URI = URI % "<ParticipantIndex>0</ParticipantIndex>"
FOLLOWER_URI = URI % ('<ParticipantIndex>none</ParticipantIndex><Peers><Peer address="127.0.0.1:%d"/>'
                      '</Peers>' % LEADER_PORT)
procs = []
clocks = []
rtdir = tempfile.mkdtemp(prefix="shmclock-fleet-")
WIRE = "fleet-" + RUN


def on_signal(sig, frame):
    remove(procs, clocks, rtdir)
    sys.exit(1)


signal.signal(signal.SIGTERM, on_signal)
signal.signal(signal.SIGINT, on_signal)


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
            start("f%d" % k, {"TimeSource": "leader", "Distribute": {"Clock": WIRE}}, FOLLOWER_URI)
            k += 1
        joined = wait_for(lambda: len(dist(leader).get("followers", [])) == n, 60, 0.1)
        check(joined, "%d followers joined (%d)" % (n, len(dist(leader).get("followers", []))))
        if not joined:
            return
        time.sleep(3)  # discovery and joins settle
        share[n] = at_rest(leader, n, 8)
    check(share[8] <= 1.2 * share[2],
          "a follower's share of the traffic at rest is the same with 8 followers as with 2 "
          "(%.3f and %.3f datagrams a heartbeat: %.2fx; the square of the fleet made it 1.4x)"
          % (share[8], share[2], share[8] / share[2]))


try:
    traffic_phase()
except Exception as e:  # a failure's evidence, not a traceback only
    check(False, "the fleet ran (%s: %s)" % (type(e).__name__, e))
finally:
    remove(procs, clocks, rtdir)
sys.exit(1 if hostsenv.failures else 0)
