#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Between hosts with DDS Security (issue 54), through the built shmclockd
on loopback (Cyclone DDS bound to 127.0.0.1, a domain of this run's own),
with a keystore shmclock-pki makes here with Debian's openssl:

- a secured leader and two secured followers: each follower takes every
  pause, set, scale and resume, its clock on the leader's (within 1 us of
  two leader readings bracketing it); an unsecured follower beside them
  never hears the leader and names Ros2.Security in its hint after 5 s;
- rogues on the same domain and clock: a publisher without an identity
  sending a newer function, a leader without one, a leader whose identity
  another CA issued, a leader that stole a follower's key and signed
  itself leader's permissions with its own CA: no follower's function
  changes, the leader counts its two followers only, and the followers
  count the identities they refused, each named once in their logs (the
  unsecured follower, meanwhile, follows the rogue publisher);
- a follower's identity (F9) speaking for F1 and for a host without an
  identity in its own partition: refused, counted, named once; for a host
  of its own: a member; in F1's partition: not allowed to write;
- a follower's enclave given to a leader, and to the rogue publisher, and a
  leader's enclave for another clock: each refused at its start (the
  enclave's permissions do not let it write this clock's time function);
- an expired certificate (made under libfaketime), a governance document
  tampered with, a missing key: shmclockd does not start, one line says
  which file and why.

- the README's secured set-up commands, run as written;
- a keystore made with --encrypt: a leader and a follower follow a set;
- lockstep between hosts, secured: a leader host and a follower host run
  their participants to 1 s; an unsecured follower host whose participant
  would hold the clock a minute is not counted, nor F9's grants at 0 for
  the follower host and for a host without an identity.

Environment: SHMCLOCKD, ROGUE, LS_PARTICIPANT, SHMCLOCK_PKI, PYTHONPATH (the
built module).
"""
import glob
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from hostsenv import check, ctl_at, remove, run, skip, start_daemon, wait_for

SHMCLOCKD = os.environ["SHMCLOCKD"]
ROGUE = os.environ["ROGUE"]
LSP = os.environ["LS_PARTICIPANT"]
PKI = os.environ["SHMCLOCK_PKI"]
RUN = "%d-%d" % (os.getpid(), random.randrange(1 << 20))
DOMAIN = 150 + random.randrange(80)
procs = {}
clocks = []
rtdir = tempfile.mkdtemp(prefix="shmclock-secure-")

try:
    import shmclock
except ImportError as e:
    skip("the shmclock Python module was not built: %s" % e)
if not shutil.which("openssl"):
    skip("openssl is not installed (apt-get install openssl): shmclock-pki needs it")
if not glob.glob("/usr/lib/*/libddsc0debian/libdds_security_auth.so"):
    skip("Cyclone DDS's security plugins are not installed (libddsc0debian)")

URI = ('<CycloneDDS><Domain id="any"><General><Interfaces><NetworkInterface address="127.0.0.1"/>'
       '</Interfaces><AllowMulticast>false</AllowMulticast></General><Discovery>'
       '<ParticipantIndex>auto</ParticipantIndex><MaxAutoParticipantIndex>30'
       '</MaxAutoParticipantIndex><Peers><Peer address="127.0.0.1"/></Peers></Discovery>%s'
       '</Domain></CycloneDDS>')
ENV = dict(os.environ, CYCLONEDDS_URI=URI % "", SHMCLOCK_RUNTIME_DIR=rtdir)
WIRE = "secure-%s" % RUN
KS = os.path.join(rtdir, "keystore")
ROGUE_KS = os.path.join(rtdir, "rogue-keystore")


def pki(*args, env=None):
    r = subprocess.run([PKI] + list(args), capture_output=True, text=True,
                       env=dict(os.environ, **(env or {})))
    if r.returncode:
        raise RuntimeError("shmclock-pki %s: %s" % (" ".join(args), r.stderr.strip()))
    return r


def enclave(name, ks=KS):
    return os.path.join(ks, "enclaves", name)


def start(tag, cfg, security, domain=DOMAIN):
    name = "secure-%s-%s" % (RUN, tag)
    clocks.append(name)
    ros = {"Domain": domain}
    if security:
        ros["Security"] = security
    procs[tag] = start_daemon(SHMCLOCKD, rtdir, tag, name, dict(cfg, Ros2=ros), ENV)
    return name


def refused_start(tag, cfg, security):
    """shmclockd with @security that must not start: (exit status, its
    stderr's lines, whether its control socket ever appeared)."""
    name = "secure-%s-%s" % (RUN, tag)
    clocks.append(name)
    path = os.path.join(rtdir, tag + ".json")
    with open(path, "w") as f:
        f.write('{"Name": "%s", "TimeSource": "simulation", "Ros2": {"Domain": %d, '
                '"Security": "%s"}, "Distribute": {"Publish": true, "Clock": "%s"}}'
                % (name, DOMAIN, security, WIRE))
    r = subprocess.run([SHMCLOCKD, "-c", path], capture_output=True, text=True, env=ENV,
                       timeout=60)
    # The error, without the log's timestamped lines (peers refused
    # meanwhile, the start's own steps).
    lines = [l for l in r.stderr.splitlines() if not re.match(r"\d\d:\d\d:\d\d\.\d{3} shmclockd ", l)]
    return r.returncode, lines, os.path.exists(os.path.join(rtdir, name + ".sock"))


def ctl(name, cmd, **kw):
    return ctl_at(os.path.join(rtdir, name + ".sock"), cmd, **kw)


def status(name):
    return ctl(name, "status").get("status", {})


LEAD = {"TimeSource": "simulation", "Distribute": {"Publish": True, "Clock": WIRE}}
FOLLOW = {"TimeSource": "leader", "Distribute": {"Clock": WIRE}}


def on_leader(lc, fc):
    """The follower's reading lies between two of the leader's (within
    1 us), both clocks in the same mode and jump epoch, the follower fresh."""
    a, b, c = lc.info(), fc.info(), lc.info()
    return (not b.stale and b.paused == a.paused and b.scale == a.scale and
            a.jump_epoch == c.jump_epoch == b.jump_epoch and
            min(a.sim_ns, c.sim_ns) - 1000 <= b.sim_ns <= max(a.sim_ns, c.sim_ns) + 1000)


def follow_phase(leader, followers):
    lc = shmclock.Clock(leader)
    fcs = [shmclock.Clock(f) for f in followers]
    check(wait_for(lambda: len(status(leader).get("distribute", {}).get("followers", [])) == 2 and
                   all(on_leader(lc, fc) for fc in fcs), 30, 0.05),
          "two secured followers are members of the secured leader, on its clock")
    for cmd, kw in [("pause", {}), ("set", {"time": "100s"}), ("scale", {"value": 2}),
                    ("resume", {}), ("scale", {"value": 0.5}), ("set", {"time": "5000s"})]:
        r = ctl(leader, cmd, **kw)
        check(r.get("ok"), "the leader takes %s %s" % (cmd, kw))
        check(wait_for(lambda: all(on_leader(lc, fc) for fc in fcs), 10, 0.01),
              "both followers follow %s %s" % (cmd, kw))
    return lc, fcs


def rogue_phase(leader, followers, lc, fcs):
    before = {f: status(f) for f in followers}
    lid = before[followers[0]]["distribute"]["leader"]
    epochs = [fc.info().jump_epoch for fc in fcs]
    # (a) A publisher without an identity: a newer function, committed,
    # from a leader id of its own, over and over.
    rogue = subprocess.Popen([ROGUE, str(DOMAIN), WIRE], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    procs["rogue"] = rogue
    # A leader without an identity, one whose identity another CA issued,
    # one with a follower's stolen key and permissions its own CA signed.
    start("V", LEAD, None)
    start("R", LEAD, enclave("rogue-lead", ROGUE_KS))
    start("S", LEAD, os.path.join(rtdir, "stolen"))
    written = acks = 0
    term = status(leader).get("distribute", {}).get("term", 1)
    t_end = time.monotonic() + 4
    while time.monotonic() < t_end:
        now = time.clock_gettime_ns(time.CLOCK_REALTIME)
        rogue.stdin.write("rogue/1/1 %d %d %d %d 0 9 200000000 %d\n"
                          % (1000, now, 999_000_000_000, 1 << 33, 1000))
        rogue.stdin.flush()
        written += rogue.stdout.readline().strip() == "ok"
        # A forged member of the secured leader: a 60 s lease that, were
        # it counted, would hold each change for it.
        rogue.stdin.write("ack rogue-f/1/1 %s %d 0 0 0 60000000000 0 0 0\n" % (lid, term))
        rogue.stdin.flush()
        acks += rogue.stdout.readline().strip() == "ok"
        time.sleep(0.05)
    rogue.stdin.close()
    rogue.wait(10)
    check(written > 10 and acks > 10, "the rogue publisher without an identity wrote %d functions "
          "and %d leases of a forged member" % (written, acks))
    for f, fc, ep in zip(followers, fcs, epochs):
        st = status(f)
        d = st.get("distribute", {})
        check(d.get("leader") == lid and not d.get("stale") and d.get("leaders") == 1,
              "%s follows its secured leader alone (%s, %s leader(s) seen)"
              % (f, d.get("leader"), d.get("leaders")))
        # (On the leader's clock again within 10 s: a follower of a
        # starved machine may be stale a moment, which is not a rogue's.)
        check(fc.info().jump_epoch == ep and wait_for(lambda: on_leader(lc, fc), 10, 0.01),
              "%s: its clock is the secured leader's, no jump (epoch %d, was %d)"
              % (f, fc.info().jump_epoch, ep))
        ros = st.get("ros2", {})
        peers = {p["peer"]: p for p in ros.get("security_refused_peers", [])}
        named = [p for p in peers if "rogue-lead" in p]
        check(ros.get("security") == enclave(f.rsplit("-", 1)[1]) and
              ros.get("security_refused", 0) >= 1 and named,
              "%s counts the identities it refused (%d), the other CA's by name: %s"
              % (f, ros.get("security_refused", 0), sorted(peers)))
        if named:
            check("certificate" in peers[named[0]]["why"].lower(),
                  "%s says why: %s" % (f, peers[named[0]]["why"]))
        bare = [p for p in peers if peers[p]["why"].startswith("it has no DDS Security")]
        check(len(bare) >= 2, "%s counts the participants without DDS Security (the rogue "
              "publisher, the unsecured leader and follower): %d" % (f, len(bare)))
        forged = [p for p in peers if p.startswith("participant ") and
                  peers[p]["why"].startswith("its permissions")]
        check(forged, "%s refused the stolen key's forged permissions: %s"
              % (f, [peers[p]["why"][:60] for p in forged]))
    log = open(os.path.join(rtdir, "F1.log")).read()
    n = log.count("DDS Security refused /CN=rogue-lead")
    check(n == 1, "the other CA's identity is named once in a follower's log (%d)" % n)
    members = status(leader).get("distribute", {}).get("followers", [])
    check(len(members) == 2 and not any("rogue" in json.dumps(m) for m in members),
          "the leader counts its two followers only, not the forged one (%d)" % len(members))
    r1, r2 = ctl(leader, "pause"), ctl(leader, "resume")
    check(r1.get("ok") and r2.get("ok") and
          all(wait_for(lambda: on_leader(lc, fc), 10, 0.01) for fc in fcs),
          "the leader's changes are not held for the forged member; both followers take them "
          "(%s, %s)" % (r1.get("ok") or r1, r2.get("ok") or r2))
    for tag in ("V", "R", "S"):
        procs[tag].send_signal(signal.SIGTERM)
        procs[tag].wait(10)


def rogue_uri(e):
    """CYCLONEDDS_URI for the rogue publisher with the enclave @e."""
    return URI % ('<Security><Authentication><Library path="%(lib)s/libdds_security_auth.so" '
           'initFunction="init_authentication" finalizeFunction="finalize_authentication"/>'
           '<IdentityCA>file:%(e)s/identity_ca.cert.pem</IdentityCA><IdentityCertificate>'
           'file:%(e)s/cert.pem</IdentityCertificate><PrivateKey>file:%(e)s/key.pem</PrivateKey>'
           '</Authentication><AccessControl><Library path="%(lib)s/libdds_security_ac.so" '
           'initFunction="init_access_control" finalizeFunction="finalize_access_control"/>'
           '<Governance>file:%(e)s/governance.p7s</Governance><PermissionsCA>'
           'file:%(e)s/permissions_ca.cert.pem</PermissionsCA><Permissions>'
           'file:%(e)s/permissions.p7s</Permissions></AccessControl><Cryptographic><Library '
           'path="%(lib)s/libdds_security_crypto.so" initFunction="init_crypto" '
           'finalizeFunction="finalize_crypto"/></Cryptographic></Security>'
           % {"lib": os.path.dirname(glob.glob("/usr/lib/*/libddsc0debian/libdds_security_auth.so")[0]),
              "e": e})


def impersonation_phase(leader, followers, lc, fcs):
    """(c) A valid identity whose permissions allow only following (F9):
    it answers in its own partition (shmclock.CLOCK.from.F9) for F1's
    host and for a host with no identity: refused, counted and named
    once; for a host of its own (F9@...): a member, as any follower; in
    F1's partition: Cyclone does not let it write there at all."""
    members = status(leader).get("distribute", {}).get("followers", [])
    ids = sorted(m.get("id", "") for m in members)
    check(len(ids) == 2 and ids[0].startswith("F1@") and ids[1].startswith("F2@"),
          "a secured follower's id begins with its identity: %s" % ids)
    lid = status(followers[0])["distribute"]["leader"]
    term = status(leader).get("distribute", {}).get("term", 1)
    check(lid.startswith("L@"), "a secured leader's id begins with its identity: %s" % lid)
    env = dict(ENV, CYCLONEDDS_URI=rogue_uri(enclave("F9")), ROGUE_FROM="shmclock.%s.from.F9" % WIRE)
    rogue = subprocess.Popen([ROGUE, str(DOMAIN), WIRE], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    procs["impersonator"] = rogue
    own = "F9@ghost/1/1"

    def say(line):
        rogue.stdin.write(line + "\n")
        rogue.stdin.flush()
        return rogue.stdout.readline().strip()

    def member_ids():
        return [m.get("id") for m in status(leader).get("distribute", {}).get("followers", [])]

    sent = 0
    t_end = time.monotonic() + 60
    while time.monotonic() < t_end and own not in member_ids():
        for host, lease in ((ids[0], 60_000_000_000), ("ghost/1/1", 60_000_000_000),
                            (own, 1_000_000_000)):
            sent += say("ack %s %s %d 0 0 0 %d 0 0 0" % (host, lid, term, lease)) == "ok"
        time.sleep(0.05)
    check(own in member_ids(), "the follower identity's own host is a member of the leader "
          "(%d leases written): %s" % (sent, member_ids()))
    for _ in range(10):
        for host in (ids[0], "ghost/1/1"):
            say("ack %s %s %d 0 0 0 60000000000 0 0 0" % (host, lid, term))
        time.sleep(0.05)
    rogue.stdin.close()
    rogue.wait(10)
    # Its own host's lease (1 s) runs out; F1 and F2 stay, nothing else.
    check(wait_for(lambda: sorted(member_ids()) == ids, 15, 0.1),
          "the leader counts F1 and F2 again, never F1's host or a host without an identity "
          "for the impersonator: %s" % member_ids())
    ros = status(leader).get("ros2", {})
    peers = {p["peer"]: p for p in ros.get("security_refused_peers", [])}
    f9 = peers.get("/CN=F9", {})
    check(f9.get("count", 0) >= 20 and "spoke for host" in f9.get("why", ""),
          "the leader counts the answers F9 gave for other hosts (%d): %s"
          % (f9.get("count", 0), f9.get("why")))
    log = open(os.path.join(rtdir, "L.log")).read()
    n = log.count("DDS Security refused /CN=F9: spoke for host")
    check(n == 1, "F9 is named once in the leader's log (%d)" % n)
    r1, r2 = ctl(leader, "pause"), ctl(leader, "resume")
    check(r1.get("ok") and r2.get("ok") and
          all(wait_for(lambda: on_leader(lc, fc), 10, 0.01) for fc in fcs),
          "the leader's changes are not held for F1's forged lease; both followers take them")
    # EVIL, a follower of any clock (its permissions: "shmclock.*.from.EVIL"),
    # writes where the partition's tail, cut to an identity's 32
    # characters, would be another identity's (V, 32 characters).
    victim = "V" * 32
    evil = dict(ENV, CYCLONEDDS_URI=rogue_uri(enclave("EVIL")),
                ROGUE_FROM="shmclock.%s.from.%sX.from.EVIL" % (WIRE, victim))
    rogue = subprocess.Popen([ROGUE, str(DOMAIN), WIRE], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=evil)
    procs["evil"] = rogue
    seen, peers = [], {}
    t_end = time.monotonic() + 60
    while time.monotonic() < t_end and not seen and \
            peers.get("/CN=?", {}).get("count", 0) < 20:
        say("ack %s@ghost/1/1 %s %d 0 0 0 60000000000 0 0 0" % (victim, lid, term))
        seen = [m for m in member_ids() if m.startswith(victim)]
        peers = {p["peer"]: p
                 for p in status(leader).get("ros2", {}).get("security_refused_peers", [])}
        time.sleep(0.05)
    rogue.stdin.close()
    rogue.wait(10)
    check(not seen and peers.get("/CN=?", {}).get("count", 0) >= 10,
          "EVIL (any clock), writing where the partition's tail cut to 32 characters would name V, "
          "is not V: no member %s@..., its answers refused (%d): %s"
          % (victim, peers.get("/CN=?", {}).get("count", 0), seen))
    env["ROGUE_FROM"] = "shmclock.%s.from.F1" % WIRE
    r = subprocess.run([ROGUE, str(DOMAIN), WIRE], input="", capture_output=True, text=True,
                       env=env, timeout=60)
    check(r.returncode != 0 and "no writer: Not Allowed By Security" in r.stderr,
          "F9 cannot write answers in F1's partition (%d: %s)"
          % (r.returncode, r.stderr.strip().splitlines()[-1:] if r.stderr.strip() else ""))


def refused_phase():
    # A follower's enclave, as a leader and as the rogue publisher.
    rc, lines, sock = refused_start("B", LEAD, enclave("F2"))
    check(rc != 0 and not sock and len(lines) == 1 and "Not Allowed By Security" in lines[0] and
          "shmclock-pki(1)" in lines[0],
          "a follower's enclave cannot lead: one line, no clock served (%d: %s)"
          % (rc, " | ".join(lines)))
    # A leader's enclave for another clock (shmclock-pki --clock).
    rc, lines, sock = refused_start("O", LEAD, enclave("elsewhere"))
    check(rc != 0 and not sock and len(lines) == 1 and "Not Allowed By Security" in lines[0],
          "a leader's enclave for another clock cannot lead this one (%d: %s)"
          % (rc, " | ".join(lines)))
    r = subprocess.run([ROGUE, str(DOMAIN), WIRE], input="", capture_output=True, text=True,
                       env=dict(ENV, CYCLONEDDS_URI=rogue_uri(enclave("F2"))), timeout=60)
    check(r.returncode != 0 and "no writer: Not Allowed By Security" in r.stderr,
          "the rogue publisher with a follower's enclave cannot write the time function (%d: %s)"
          % (r.returncode, r.stderr.strip().splitlines()[-1:] if r.stderr.strip() else ""))
    # Start-up errors: each one line, naming the file or the reason.
    faked = glob.glob("/usr/lib/*/faketime/libfaketime.so.1")
    if faked:
        # libfaketime leaves a shared-memory pair per forking process
        # (/dev/shm/faketime_shm_PID, sem.faketime_sem_PID): those of processes of
        # this call that are gone are removed after it.
        pattern = ["/dev/shm/faketime_shm_*", "/dev/shm/sem.faketime_sem_*"]
        left = {f for p in pattern for f in glob.glob(p)}
        pki("follower", KS, "old", env={"LD_PRELOAD": faked[0], "FAKETIME": "-800d"})
        for f in {f for p in pattern for f in glob.glob(p)} - left:
            try:
                os.kill(int(f.rsplit("_", 1)[1]), 0)
            except ProcessLookupError:
                os.unlink(f)
            except (ValueError, OSError):
                pass
        rc, lines, sock = refused_start("X", LEAD, enclave("old"))
        check(rc != 0 and not sock and len(lines) == 1 and "refused by DDS Security" in lines[0]
              and "expired" in lines[0].lower(),
              "an expired certificate: one line with the reason (%d: %s)" % (rc, " | ".join(lines)))
    else:
        print("# no libfaketime: the expired certificate is not tried", flush=True)
    bad = os.path.join(rtdir, "tampered")
    shutil.copytree(enclave("F2"), bad)
    with open(os.path.join(bad, "governance.p7s"), "r+") as f:
        text = f.read()
        f.seek(0)
        f.write(text.replace("<enable_join_access_control>true", "<enable_join_access_control>fals"))
    rc, lines, sock = refused_start("T", LEAD, bad)
    check(rc != 0 and not sock and len(lines) == 1 and "refused by DDS Security" in lines[0],
          "a governance document tampered with: one line with the reason (%d: %s)"
          % (rc, " | ".join(lines)))
    # An identity shmclock cannot name its partition by (the daemon reads
    # it before Cyclone checks the document's signature).
    with open(os.path.join(bad, "permissions.p7s"), "r+") as f:
        text = f.read().replace("<subject_name>CN=F2<", "<subject_name>CN=x.from.F2<")
        f.seek(0)
        f.write(text)
    rc, lines, sock = refused_start("N", LEAD, bad)
    check(rc != 0 and not sock and len(lines) == 1 and "'.from.'" in lines[0]
          and "permissions.p7s" in lines[0],
          "an identity named x.from.F2: one line naming the file (%d: %s)" % (rc, " | ".join(lines)))
    os.unlink(os.path.join(bad, "key.pem"))
    rc, lines, sock = refused_start("K", LEAD, bad)
    check(rc != 0 and not sock and len(lines) == 1 and os.path.join(bad, "key.pem") in lines[0]
          and "No such file" in lines[0],
          "a missing key: one line naming the file (%d: %s)" % (rc, " | ".join(lines)))


def lockstep_phase():
    """Lockstep between hosts, secured: a leader host and a follower host,
    a participant on each, run to 1 s; an unsecured follower host of the
    same clock beside them, whose participant would hold the clock for a
    minute, is not counted."""
    w2 = WIRE + "-ls"
    pki("leader", KS, "LL", "--clock", w2)
    pki("follower", KS, "FL", "--clock", w2)
    lead = start("LL", {"TimeSource": "fixed", "Lockstep": {"Participants": 2},
                        "Distribute": {"Publish": True, "Clock": w2}}, enclave("LL"))
    fol = start("FL", {"TimeSource": "leader", "Lockstep": {"Participants": 1},
                       "Distribute": {"Clock": w2}}, enclave("FL"))
    rogue = start("RL", {"TimeSource": "leader", "Lockstep": {"Participants": 1},
                         "Distribute": {"Clock": w2}}, None)
    # F9, a follower's identity, speaks for FL's host and for one without
    # an identity: grants at 0 that would hold the clock there.
    check(wait_for(lambda: status(fol).get("lockstep", {}).get("host", "").startswith("FL@"),
                   15, 0.05), "the secured follower host's id begins with its identity: %s"
          % status(fol).get("lockstep", {}).get("host"))
    fl = status(fol)["lockstep"]["host"]
    forger = subprocess.Popen([ROGUE, str(DOMAIN), w2], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=dict(ENV, CYCLONEDDS_URI=rogue_uri(enclave("F9")),
                                       ROGUE_FROM="shmclock.%s.from.F9" % w2))
    procs["forger"] = forger
    forging = threading.Event()

    def forge():
        seq = 1 << 40
        while not forging.is_set():
            for host in (fl, "ghost/1/1#0"):
                seq += 1
                forger.stdin.write("grant %s - %d 0 10000000000 1\n" % (host, seq))
                forger.stdin.flush()
                forger.stdout.readline()
            time.sleep(0.02)

    forge_thread = threading.Thread(target=forge, daemon=True)
    forge_thread.start()
    ps = []
    for clock, who, period, work in [(rogue, "holder", 10_000_000, 60_000_000),
                                     (lead, "a", 10_000_000, 0), (fol, "b", 20_000_000, 0)]:
        argv = [LSP, clock, who, str(period), "1000000000"]
        if work:
            argv += ["--work-us", str(work)]
        ps.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True))
        procs["ls-" + who] = ps[-1]
    done = []
    for p in ps[1:]:
        try:
            p.communicate(timeout=60)
            done.append(p.returncode)
        except subprocess.TimeoutExpired:
            done.append(None)
    forging.set()
    forge_thread.join(10)
    forger.stdin.close()
    forger.wait(10)
    f9 = {p["peer"]: p for p in status(lead).get("ros2", {}).get("security_refused_peers", [])
          }.get("/CN=F9", {})
    check(f9.get("count", 0) >= 2 and "spoke for host" in f9.get("why", ""),
          "the secured leader refused F9's grants for FL's host and for a host without an "
          "identity (%d): %s" % (f9.get("count", 0), f9.get("why")))
    hosts = status(lead).get("lockstep", {}).get("hosts", [])
    check(done == [0, 0] and len(hosts) == 1,
          "secured lockstep between hosts: both participants run to 1 s (%s), the leader counts "
          "one follower host (%d), not the unsecured one whose participant holds" % (done, len(hosts)))
    ps[0].kill()
    ps[0].wait()
    for tag in ("LL", "FL", "RL"):
        procs[tag].send_signal(signal.SIGTERM)
        procs[tag].wait(10)


def encrypt_phase():
    """A keystore made with --encrypt (on a domain of its own): a leader and
    a follower follow a change as signed ones do."""
    ks, dom, w = os.path.join(rtdir, "encrypted"), DOMAIN + 1, WIRE + "-enc"
    pki("init", ks, "--domain", str(dom), "--encrypt")
    pki("leader", ks, "EL", "--clock", w)
    pki("follower", ks, "EF", "--clock", w)
    gov = open(os.path.join(ks, "public", "governance.xml")).read()
    lead = start("EL", {"TimeSource": "simulation", "Distribute": {"Publish": True, "Clock": w}},
                 enclave("EL", ks), dom)
    fol = start("EF", {"TimeSource": "leader", "Distribute": {"Clock": w}}, enclave("EF", ks), dom)
    lc, fc = shmclock.Clock(lead), shmclock.Clock(fol)
    ok = wait_for(lambda: on_leader(lc, fc), 30, 0.05)
    ok = ok and ctl(lead, "set", time="42s").get("ok") and wait_for(lambda: on_leader(lc, fc), 10, 0.01)
    check("<data_protection_kind>ENCRYPT" in gov and ok,
          "an encrypted domain (--encrypt): the follower follows its leader and a set")
    for tag in ("EL", "EF"):
        procs[tag].send_signal(signal.SIGTERM)
        procs[tag].wait(10)


def readme_phase():
    """The README's secured set-up, run as written (its shmclock-pki line)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(PKI)))
    text = open(os.path.join(root, "README.md")).read()
    m = re.search(r"`(shmclock-pki init [^`]*)`", text)
    if not check(m, "the README's Several hosts gives the secured set-up's commands"):
        return
    work = os.path.join(rtdir, "readme")
    os.makedirs(work)
    r = subprocess.run(["sh", "-c", m.group(1)], cwd=work, capture_output=True, text=True,
                       env=dict(os.environ, PATH=os.path.dirname(os.path.abspath(PKI)) + ":" +
                                os.environ.get("PATH", "")))
    made = sorted(glob.glob(os.path.join(work, "keys", "enclaves", "*", "permissions.p7s")))
    check(r.returncode == 0 and len(made) == 2,
          "the README's commands run as written: %s (%d enclaves)%s"
          % (m.group(1), len(made), "" if r.returncode == 0 else ": " + r.stderr.strip()))


def main():
    readme_phase()
    pki("init", KS, "--domain", str(DOMAIN))
    # Enclaves for this clock alone (shmclock-pki --clock), and a leader's
    # for another clock.
    for role, name in [("leader", "L"), ("follower", "F1"), ("follower", "F2")]:
        pki(role, KS, name, "--clock", WIRE)
    pki("follower", KS, "F9", "--clock", WIRE, "--clock", WIRE + "-ls")
    pki("follower", KS, "EVIL")
    pki("leader", KS, "elsewhere", "--clock", WIRE + "-other")
    check(all(os.path.exists(os.path.join(enclave(n), f)) for n in ("L", "F1", "F2")
              for f in ("cert.pem", "key.pem", "identity_ca.cert.pem", "permissions_ca.cert.pem",
                        "governance.p7s", "permissions.p7s")),
          "shmclock-pki makes a keystore and three enclaves in SROS2's layout")
    pki("init", ROGUE_KS, "--domain", str(DOMAIN))
    pki("leader", ROGUE_KS, "rogue-lead")
    # The stolen key: F1's identity (the real CA's), with a governance and
    # a leader's permissions for CN=F1 that the rogue CA signed.
    pki("leader", ROGUE_KS, "F1")
    stolen = os.path.join(rtdir, "stolen")
    shutil.copytree(enclave("F1", ROGUE_KS), stolen)
    for f in ("cert.pem", "key.pem", "identity_ca.cert.pem"):
        shutil.copy(os.path.join(enclave("F1"), f), stolen)
    leader = start("L", LEAD, enclave("L"))
    # A follower without DDS Security: it never sees the secured leader,
    # and says what to check.
    unsecured = start("U", FOLLOW, None)
    followers = [start("F1", FOLLOW, enclave("F1")), start("F2", FOLLOW, enclave("F2"))]
    lc, fcs = follow_phase(leader, followers)
    ulog = os.path.join(rtdir, "U.log")
    check(wait_for(lambda: "Ros2.Security" in open(ulog).read(), 15, 0.1) and
          "following leader" not in open(ulog).read(),
          "an unsecured follower never hears the secured leader, and after 5 s its log names "
          "Ros2.Security among what to check")
    rogue_phase(leader, followers, lc, fcs)
    # What the secured followers were kept from: the unsecured one beside
    # them followed the rogues.
    led = [l for l in open(ulog).read().splitlines() if "following leader" in l]
    check(led and "rogue/1/1" in " ".join(led),
          "the unsecured follower beside them followed the rogue publisher: %s"
          % (led[0][-100:] if led else "nothing"))
    impersonation_phase(leader, followers, lc, fcs)
    refused_phase()
    lockstep_phase()
    encrypt_phase()
    for tag in ("L", "F1", "F2"):
        procs[tag].send_signal(signal.SIGTERM)
        check(procs[tag].wait(10) == 0, "%s stops cleanly on SIGTERM" % tag)


def cleanup():
    remove(list(procs.values()), clocks, rtdir)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *a: (cleanup(), sys.exit(1)))
    run(main, cleanup, procs, rtdir)
