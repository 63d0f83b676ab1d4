# SPDX-License-Identifier: MIT
"""Hosts in network namespaces, for the between-hosts tests (hosts_e2e.py,
lockstep_hosts_e2e.py): each host a namespace with a veth to a bridge in a
switch namespace R, the Cyclone DDS configuration of each, and impairment
(loss, delay, one-way cuts) with tc netem where the kernel has it, else a
hub in user space (this file run with --hub). Traffic stays in the
namespaces. Needs root."""
import os
import random
import shutil
import socket
import subprocess
import sys
import threading
import time


def need_root():
    """Exit 77, said, without what network namespaces need."""
    import hostsenv
    if os.geteuid() != 0:
        hostsenv.skip("needs root for network namespaces (ip netns)")
    if not shutil.which("ip"):
        hostsenv.skip("iproute2 (ip) is not installed")


def sh(*args, check_rc=True):
    r = subprocess.run(args, capture_output=True, text=True)
    if check_rc and r.returncode:
        raise RuntimeError("%s: %s" % (" ".join(args), r.stderr.strip()))
    return r


class Net:
    """Hosts @hosts (names) in namespaces named after @run, at 10.77.0.1,
    .2, ...; make() builds them, delete() removes them (and the hub)."""

    def __init__(self, run, hosts):
        self.hosts = tuple(hosts)
        self.ns = {role: "shmclk-%s-%s" % (role, run) for role in ("R",) + self.hosts}
        self.addr = {h: "10.77.0.%d" % (i + 1) for i, h in enumerate(self.hosts)}
        self.hub = None

    def nsx(self, role, *args, check_rc=True):
        return sh("ip", "netns", "exec", self.ns[role], *args, check_rc=check_rc)

    def make(self):
        """Each host with a veth to a bridge in namespace R (the switch)."""
        for ns in self.ns.values():
            sh("ip", "netns", "add", ns)
        for role in self.ns:
            self.nsx(role, "ip", "link", "set", "lo", "up")
        self.nsx("R", "ip", "link", "add", "br0", "type", "bridge")
        self.nsx("R", "ip", "link", "set", "br0", "up")
        for role in self.hosts:
            port = "r" + role
            self.nsx("R", "ip", "link", "add", port, "type", "veth", "peer", "name", "e0",
                     "netns", self.ns[role])
            self.nsx("R", "ip", "link", "set", port, "master", "br0")
            self.nsx("R", "ip", "link", "set", port, "up")
            self.nsx(role, "ip", "addr", "add", self.addr[role] + "/24", "dev", "e0")
            self.nsx(role, "ip", "link", "set", "e0", "up")

    def delete(self):
        if self.hub and self.hub.poll() is None:
            self.hub.kill()
            self.hub.wait()
        for ns in self.ns.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    def teardown(self, procs, clocks, rtdir):
        """What a run made: @procs killed, the namespaces deleted, the
        segments of @clocks and @rtdir removed (hostsenv.remove)."""
        import hostsenv
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.delete()
        hostsenv.remove([], clocks, rtdir)

    def link(self, role, up):
        """Host @role's port on the switch up or down (a partition)."""
        self.nsx("R", "ip", "link", "set", "r" + role, "up" if up else "down")

    def daemon(self, shmclockd, rtdir, role, tag, name, cfg, env_extra=None):
        """shmclockd in namespace @role with config @cfg (its Name @name),
        DDS on @role's address, its socket in @rtdir (hostsenv.start_daemon)."""
        import hostsenv
        env = dict(os.environ, CYCLONEDDS_URI=self.cyclone_uri(role), SHMCLOCK_RUNTIME_DIR=rtdir,
                   **(env_extra or {}))
        return hostsenv.start_daemon(shmclockd, rtdir, tag, name, cfg, env,
                                     ("ip", "netns", "exec", self.ns[role]))

    def cyclone_uri(self, role):
        """Unicast discovery of every host, on @role's address only."""
        peers = "".join('<Peer address="%s"/>' % a for a in self.addr.values())
        return ('<CycloneDDS><Domain id="any"><General><Interfaces><NetworkInterface address="%s"/>'
                '</Interfaces><AllowMulticast>false</AllowMulticast></General><Discovery>'
                '<ParticipantIndex>auto</ParticipantIndex><MaxAutoParticipantIndex>20'
                '</MaxAutoParticipantIndex><Peers>%s</Peers></Discovery></Domain></CycloneDDS>'
                % (self.addr[role], peers))

    def start_hub(self, loss, delay_ms, jitter_ms):
        """The user-space hub in place of the bridge (its stdin takes "drop
        P Q" and "pass"); impair(False) puts the bridge back."""
        ports = ["r" + h for h in self.hosts]
        for p in ports:
            self.nsx("R", "ip", "link", "set", p, "nomaster")
        self.hub = subprocess.Popen(["ip", "netns", "exec", self.ns["R"], sys.executable,
                                     os.path.abspath(__file__), "--hub", ",".join(ports),
                                     str(loss), str(delay_ms), str(jitter_ms)],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if self.hub.stdout.readline().strip() != "hub ready":
            raise RuntimeError("the hub did not start")
        return self.hub

    def impair(self, on, loss=0.20, delay_ms=5.0, jitter_ms=2.0):
        """Loss @loss, delay @delay_ms +- @jitter_ms on every link: tc netem
        on the switch's ports where the kernel has it, else the user-space
        hub. What was used, said for the log."""
        ports = ["r" + h for h in self.hosts]
        if on:
            netem = ["netem", "loss", "%g%%" % (loss * 100), "delay", "%gms" % delay_ms,
                     "%gms" % jitter_ms]
            r = self.nsx("R", "tc", "qdisc", "add", "dev", ports[0], "root", *netem,
                         check_rc=False)
            if r.returncode == 0:
                for p in ports[1:]:
                    self.nsx("R", "tc", "qdisc", "add", "dev", p, "root", *netem)
                return "tc netem"
            self.start_hub(loss, delay_ms, jitter_ms)
            return "a user-space hub (this kernel has no sch_netem: %s)" % r.stderr.strip()
        if self.hub:
            self.hub.kill()
            self.hub.wait()
            self.hub = None
            for p in ports:
                self.nsx("R", "ip", "link", "set", p, "master", "br0")
        else:
            for p in ports:
                self.nsx("R", "tc", "qdisc", "del", "dev", p, "root", check_rc=False)


def hub_main(ports, loss, delay_ms, jitter_ms):
    """A hub in user space between @ports (run in namespace R): every frame
    from one port goes to the others, each copy dropped with probability
    @loss or delayed by delay +- jitter: netem's impairment, for kernels
    without sch_netem. Lines on stdin: "drop P Q" drops every frame from
    port P to port Q (one way) until "pass"."""
    import heapq

    oneway = set()

    def control():
        for line in sys.stdin:
            w = line.split()
            if w[:1] == ["drop"] and len(w) == 3:
                oneway.add((w[1], w[2]))
            elif w[:1] == ["pass"]:
                oneway.clear()
            print("hub: " + " ".join(w), flush=True)
    threading.Thread(target=control, daemon=True).start()

    # The hub stands for the network, which the hosts' load does not slow
    # down: it runs at a real-time priority above the CPU hogs.
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(20))
    except OSError as e:
        print("hub: no real-time priority (%s)" % e, file=sys.stderr, flush=True)
    socks = {}
    for p in ports:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))  # ETH_P_ALL
        s.bind((p, 0))
        socks[p] = s
    queue, cv = [], threading.Condition()

    def rx(p):
        s = socks[p]
        while True:
            frame, addr = s.recvfrom(65536)
            if addr[2] == socket.PACKET_OUTGOING:
                continue  # our own sends
            if frame[12:14] == b"\x08\x00" and frame[23] == 17:
                # IPv4 UDP: veth leaves the checksum to an offload that
                # never happens on this path; 0 means "none" in IPv4.
                o = 14 + (frame[14] & 0xF) * 4 + 6
                frame = frame[:o] + b"\0\0" + frame[o + 2:]
            now = time.monotonic()
            with cv:
                for q in ports:
                    if q != p and (p, q) not in oneway and random.random() >= loss:
                        due = now + (delay_ms + random.uniform(-jitter_ms, jitter_ms)) / 1e3
                        heapq.heappush(queue, (due, random.random(), q, frame))
                cv.notify()

    for p in ports:
        threading.Thread(target=rx, args=(p,), daemon=True).start()
    print("hub ready", flush=True)
    while True:
        with cv:
            while not queue or queue[0][0] > time.monotonic():
                cv.wait(None if not queue else max(0, queue[0][0] - time.monotonic()))
            _, _, q, frame = heapq.heappop(queue)
        try:
            socks[q].send(frame)
        except OSError as e:
            print("hub: %s: %s" % (q, e), file=sys.stderr, flush=True)


if __name__ == "__main__" and sys.argv[1:2] == ["--hub"]:
    hub_main(sys.argv[2].split(","), float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]))
