#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The panel in front of several hosts (issues 34 and 29): a leader and a
follower of one clock on loopback (Cyclone DDS bound to 127.0.0.1, a domain
of this run's own), both shown by one shmclock-panel. /metrics carries the
hosts' figures from each daemon's status — the term (the same on both), no
conflict, refusals, queued changes, the clock offset between the hosts —
and they follow a change made on the leader; /api/status carries the
distribute part as shmclockctl status --json does.

Environment: SHMCLOCKD, SHMCLOCK_PANEL (meson registers it only in a build
with the ROS 2 side). Exit 0 when every check holds.
"""
import http.client
import json
import os
import random
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hosts"))
from hostsenv import check, ctl_at, remove, start_daemon, wait_for  # noqa: E402
import hostsenv  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import status_schema  # noqa: E402

SHMCLOCKD = os.environ["SHMCLOCKD"]
PANEL = os.environ["SHMCLOCK_PANEL"]
RUN = "%d-%d" % (os.getpid(), random.randrange(1 << 20))
DOMAIN = 150 + random.randrange(80)
URI = hostsenv.LOOPBACK_URI
procs = []
clocks = []
rtdir = tempfile.mkdtemp(prefix="shmclock-panel-hosts-")
ENV = dict(os.environ, CYCLONEDDS_URI=URI, SHMCLOCK_RUNTIME_DIR=rtdir)


def metrics(port):
    """{(name, clock): value} of the panel's /metrics."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or "{" not in line:
            continue
        name, rest = line.split("{", 1)
        labels, value = rest.rsplit("} ", 1)
        clock = labels.split('clock="', 1)[1].split('"', 1)[0] if 'clock="' in labels else ""
        out[(name, clock)] = float(value)
    return out


def find(o):
    """The distribute part anywhere in a status reply."""
    if isinstance(o, dict):
        if isinstance(o.get("distribute"), dict):
            return o["distribute"]
        for v in o.values():
            r = find(v)
            if r:
                return r
    return {}


def main():
    wire = "panel-wire-" + RUN
    lead, fol = "panel-lead-" + RUN, "panel-fol-" + RUN
    clocks.extend([lead, fol])
    procs.append(start_daemon(SHMCLOCKD, rtdir, "leader", lead,
                              {"TimeSource": "simulation", "Ros2": {"Domain": DOMAIN},
                               "Distribute": {"Publish": True, "Clock": wire}}, ENV))
    procs.append(start_daemon(SHMCLOCKD, rtdir, "follower", fol,
                              {"TimeSource": "leader", "Ros2": {"Domain": DOMAIN},
                               "Distribute": {"Clock": wire, "StaleAfter": "5s"}}, ENV))
    p = subprocess.Popen([PANEL, "-n", lead, "-n", fol, "--listen", "127.0.0.1:0"], env=ENV,
                         stdout=subprocess.PIPE, text=True)
    procs.append(p)
    line = p.stdout.readline()
    if not check("http://127.0.0.1:" in line, "the panel starts (%r)" % line.strip()):
        return 1
    port = int(line.split("http://127.0.0.1:")[1].split("/")[0])

    # The follower follows (its term is the leader's) once DDS has met.
    m = {}

    def following():
        nonlocal m
        m = metrics(port)
        return m.get(("shmclock_hosts_term", fol), 0) >= 1 and \
            m.get(("shmclock_hosts_stale", fol), 1) == 0
    wait_for(following, 30, 0.2)
    check(m.get(("shmclock_hosts_term", lead), 0) >= 1 and
          m.get(("shmclock_hosts_term", fol)) == m.get(("shmclock_hosts_term", lead)),
          "/metrics: the follower follows the leader's term (%s, %s)"
          % (m.get(("shmclock_hosts_term", lead)), m.get(("shmclock_hosts_term", fol))))
    check(m.get(("shmclock_hosts_conflict", lead)) == 0 and m.get(("shmclock_hosts_conflict", fol)) == 0,
          "/metrics: no conflict between leaders on either host")
    check(m.get(("shmclock_hosts_refused_total", fol)) == 0,
          "/metrics: the follower refused nothing")
    check(m.get(("shmclock_hosts_awaiting_echo", fol)) == 0 and
          ("shmclock_hosts_awaiting_echo", lead) not in m and
          m.get(("shmclock_hosts_lease_expired_total", fol)) == 0,
          "/metrics: the follower's lease is echoed (awaiting_echo %s, lease_expired %s)"
          % (m.get(("shmclock_hosts_awaiting_echo", fol)),
             m.get(("shmclock_hosts_lease_expired_total", fol))))
    check(("shmclock_hosts_queued_changes", lead) in m and
          ("shmclock_hosts_host_offset_seconds", fol) in m and
          m.get(("shmclock_hosts_clocks_disagree", fol)) == 0,
          "/metrics: the leader's queued changes, the follower's measured offset, the hosts agree")

    # A change on the leader reaches the follower and its figures.
    before = m.get(("shmclock_hosts_changes_total", fol), 0)
    r = ctl_at(os.path.join(rtdir, lead + ".sock"), "pause")
    check(r.get("ok"), "the leader pauses (%s)" % r.get("error", "ok"))

    def changed():
        nonlocal m
        m = metrics(port)
        return m.get(("shmclock_hosts_changes_total", fol), 0) > before
    check(wait_for(changed, 15, 0.2),
          "/metrics: the follower's changes count the leader's pause (%s -> %s)"
          % (before, m.get(("shmclock_hosts_changes_total", fol))))
    # Two-phase (issue 29): the leader counts the follower as a member and
    # measures its acknowledgements; the panel shows both.
    def acked():
        nonlocal m
        m = metrics(port)
        return (m.get(("shmclock_hosts_followers", lead)) == 1 and
                m.get(("shmclock_hosts_ack_p99_seconds", lead), 0) > 0)
    check(wait_for(acked, 15, 0.2),
          "/metrics: the leader's followers (%s) and acknowledgement p99 (%s s), Lead %s s"
          % (m.get(("shmclock_hosts_followers", lead)), m.get(("shmclock_hosts_ack_p99_seconds", lead)),
             m.get(("shmclock_hosts_lead_seconds", lead))))
    check(m.get(("shmclock_hosts_commit_p99_seconds", lead), 0) > 0 and
          m.get(("shmclock_hosts_postponed_total", lead)) is not None,
          "/metrics: command-to-commit p99 (%s s), postponed (%s)"
          % (m.get(("shmclock_hosts_commit_p99_seconds", lead)),
             m.get(("shmclock_hosts_postponed_total", lead))))
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/api/status?clock=" + lead)
    ld = find(json.loads(c.getresponse().read()))
    fl = ld.get("followers") or []
    check(len(fl) == 1 and fl[0].get("acked", 0) >= 1 and fl[0].get("late_changes") == 0 and
          fl[0].get("refused") == 0,
          "/api/status: the leader lists its follower with what it acknowledged, its late and "
          "refused changes (%s)" % fl)
    check(m.get(("shmclock_hosts_follower_late_changes_total", lead)) == 0 and
          m.get(("shmclock_hosts_follower_refused_total", lead)) == 0 and
          m.get(("shmclock_hosts_follower_last_ack_seconds", lead), 0) > 0,
          "/metrics: the leader's follower's late and refused changes and last acknowledgement "
          "(label follower)")
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/api/status?clock=" + fol)
    st = json.loads(c.getresponse().read())

    d = find(st)
    check(d.get("role") == "follower" and d.get("term", 0) >= 1,
          "/api/status: the follower's distribute part, with its term (%s)"
          % {k: d.get(k) for k in ("role", "term", "conflict", "refused")})
    # Both statuses against the status table (shmclockd/status_fields.h):
    # the rows of a leader's and a follower's, nothing that is not a row.
    table = status_schema.load(SHMCLOCKD)
    for name, role in ((lead, "leader"), (fol, "follower")):
        st = ctl_at(os.path.join(rtdir, name + ".sock"), "status").get("status", {})
        problems = status_schema.check(st, table)
        check(status_schema.mode_of(st) == role and not problems,
              "the %s's status has the table's rows for %s and nothing else (%s)"
              % (role, role, "; ".join(problems) or "it agrees"))
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    reasons = [r for r in ("silence", "held", "gap", "lease")
               if 'shmclock_hosts_leader_losses_total{clock="%s",reason="%s"} 0\n' % (fol, r) in text]
    check(len(reasons) == 4 and "# TYPE shmclock_hosts_leader_losses_total counter" in text,
          "/metrics: the follower's losses of its leader, a counter per reason, none (%s)"
          % ", ".join(reasons))
    return 0


if __name__ == "__main__":
    try:
        r = main()
    finally:
        remove(procs, clocks, rtdir)
    print("# %d failure(s)" % hostsenv.failures)
    sys.exit(r if r else (1 if hostsenv.failures else 0))
