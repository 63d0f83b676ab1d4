#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""shmclockd makes only the system calls its systemd unit allows.

shmclockd@.service filters system calls to @system-service (refused with
EPERM) and sets ProtectClock=. A call outside that set works when the daemon
is started by hand and fails only under systemd, silently: the leader's TAI
check once used adjtimex() (@clock), so every hardened leader published UTC.
This runs the daemon under strace through a start, every control command (a
recording started and stopped among them), a reload and a stop, with the ROS 2 module (/clock out, leading other hosts)
when it is built, and checks each call against the unit's filter, expanded by
systemd-analyze. TAP.

usage: syscalls.py SHMCLOCKD SHMCLOCKCTL UNIT_FILE [ROS2_MODULE]
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

daemon, ctl, unit = sys.argv[1:4]
module = sys.argv[4] if len(sys.argv) > 4 else ""


def skip(why):
    print(f"1..0 # SKIP {why}")
    sys.exit(77)


for tool in ("strace", "systemd-analyze"):
    if not shutil.which(tool):
        skip(f"{tool} is not installed")


def expand(group, seen=None):
    seen = set() if seen is None else seen
    if group in seen:
        return set()
    seen.add(group)
    out = subprocess.run(["systemd-analyze", "syscall-filter", group],
                         capture_output=True, text=True, check=True).stdout
    calls = set()
    for line in out.splitlines():
        w = line.strip()
        if not w or w.startswith("#") or w == group:
            continue
        calls |= expand(w, seen) if w.startswith("@") else {w}
    return calls


with open(unit, encoding="utf-8") as f:
    unit_text = f.read()
allowed, denied = set(), set()
for spec in re.findall(r"^SystemCallFilter=(.*)$", unit_text, re.M):
    target = denied if spec.startswith("~") else allowed
    for w in spec.lstrip("~").split():
        target |= expand(w) if w.startswith("@") else {w}
if re.search(r"^ProtectClock=yes", unit_text, re.M):
    denied |= expand("@clock")
allowed -= denied
if not allowed:
    print("not ok 1 - no SystemCallFilter= allow list in " + unit)
    sys.exit(1)

tmp = tempfile.mkdtemp(prefix="shmclock-syscalls-")
name = f"syscalls-{os.getpid()}"
env = dict(os.environ, SHMCLOCK_RUNTIME_DIR=tmp)
cfg = {"Name": name}
if module:
    env["SHMCLOCKD_ROS2_MODULE"] = module
    env["CYCLONEDDS_URI"] = (
        '<CycloneDDS><Domain id="any"><General><Interfaces><NetworkInterface address="127.0.0.1"/>'
        "</Interfaces><AllowMulticast>false</AllowMulticast></General><Discovery><Peers>"
        '<Peer address="127.0.0.1"/></Peers></Discovery></Domain></CycloneDDS>')
    cfg.update({"Ros2": {"Publish": True, "Domain": 100 + os.getpid() % 100},
                "Distribute": {"Publish": True, "Lead": "1ms"}})
cfg_path = os.path.join(tmp, "c.json")
with open(cfg_path, "w", encoding="utf-8") as f:
    json.dump(cfg, f)
log = os.path.join(tmp, "strace")
proc = subprocess.Popen(["strace", "-f", "-qq", "-o", log, daemon, "-c", cfg_path,
                         "--remove-on-exit"], env=env, stderr=subprocess.DEVNULL)
results = []
pid = None
try:
    def run_ctl(*args):
        return subprocess.run([ctl, "-n", name, *args], env=env, capture_output=True, text=True,
                              timeout=30)

    for _ in range(500):
        r = run_ctl("status", "--json")
        if r.returncode == 0:
            break
        time.sleep(0.02)
    else:
        print("not ok 1 - shmclockd did not start under strace")
        sys.exit(1)
    pid = json.loads(r.stdout)["status"]["writer_pid"]
    # A recording too (doc/record.md): its thread, its file passed open
    # (recvmsg), written, summarised and closed (record-stop).
    for cmd in (["record", os.path.join(tmp, "r.mcap")], ["pause"], ["step", "10ms"],
                ["resume"], ["scale", "2"], ["set", "5"], ["status"], ["record-stop"],
                ["nonsense"]):
        run_ctl(*cmd)
    os.kill(pid, signal.SIGHUP)
    time.sleep(0.3)
    run_ctl("status")
    os.kill(pid, signal.SIGTERM)
    proc.wait(timeout=30)
    used = set()
    with open(log, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = re.match(r"^\d+\s+([a-z_0-9]+)\(", line)
            if m:
                used.add(m.group(1))
    outside = sorted(used - allowed)
    results.append((len(used) > 20, f"{len(used)} distinct system calls traced"
                    + (" (with the ROS 2 module)" if module else "")))
    results.append((not outside, "every one is in the unit's SystemCallFilter and not @clock"
                    + (f"; outside: {' '.join(outside)}" if outside else "")))
finally:
    if pid and proc.poll() is None:
        try:
            os.kill(pid, signal.SIGKILL)  # the daemon first: strace killed would leave it
        except ProcessLookupError:
            pass
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for p in (f"/dev/shm/shmclock.{name}",):
        if os.path.exists(p):
            os.unlink(p)
    shutil.rmtree(tmp, ignore_errors=True)
for i, (ok, msg) in enumerate(results, 1):
    print("ok" if ok else "not ok", i, "-", msg)
print(f"1..{len(results)}")
sys.exit(0 if all(ok for ok, _ in results) else 1)
