#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Lockstep runs end to end (issue 15), through the built shmclockd:

- determinism: participants with periods 1, 10 and 33 ms exchange messages
  over Unix sockets for 1 s of simulated time; 20 runs give byte-identical
  logs, equal to the log the lockstep guarantee predicts, also with a CPU
  hog on every core;
- barriers: the clock moves once per distinct due time;
- deaths: one of 4 participants SIGKILLed at a random moment, 30 times with
  OnDeath evict (the clock goes on, found within 1 s, never past the dead
  one's last grant before) and 30 times with OnDeath abort in CI mode (the
  run ends with status 86 naming the dead one within 1 s; the measured
  figures are printed, ~10 ms on a quiet machine);
- stalls: 8 evictions, by EvictAfter (a SIGSTOPped participant) and by hand
  (shmclockctl evict) in turns, while another thread polls status (the
  eviction record status copies is the one the clock thread rewrites: CI
  runs this file under ThreadSanitizer).

Environment: SHMCLOCKD, SHMCLOCKCTL, LS_PARTICIPANT (set by meson).
Exit 0 when every check holds; each check prints an ok / not ok line.
"""
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import status_schema  # noqa: E402
from lockstep_log import expected_log, first_difference  # noqa: E402

D = os.environ["SHMCLOCKD"]
CTL = os.environ["SHMCLOCKCTL"]
P = os.environ["LS_PARTICIPANT"]
MS = 1_000_000
# A death is found within 10 ms on a quiet machine (the daemon scans that
# often); the bound is generous for a shared, loaded one.
FOUND_LIMIT_MS = 1000
END = 1000 * MS
failures = 0
procs = []


def check(cond, what):
    global failures
    print(("ok - " if cond else "not ok - ") + what, flush=True)
    if not cond:
        failures += 1
    return cond


def name(tag):
    return "ls-e2e-%d-%s-%d" % (os.getpid(), tag, random.randrange(1 << 30))


def scenario(tmp, periods, clock):
    """One CI-mode run: shmclockd -- sh (the participants, then status)."""
    for f in os.listdir(tmp):
        os.unlink(os.path.join(tmp, f))
    peers = ",".join(w for w, _ in periods)
    lines = ["set -e"]
    for w, p in periods:
        lines.append('"%s" %s %s %d %d --dir %s --peers %s --log %s/%s.log & pid_%s=$!'
                     % (P, clock, w, p, END, tmp, peers, tmp, w, w))
    for w, _ in periods:
        lines.append("wait $pid_%s" % w)
    lines.append('"%s" status --json > %s/status.json' % (CTL, tmp))
    r = subprocess.run([D, "-n", clock, "--source", "fixed", "--lockstep", str(len(periods)),
                        "--log-level", "warn", "--", "sh", "-c", "\n".join(lines)],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        return None, None, r.stderr
    log = "".join(open("%s/%s.log" % (tmp, w)).read() for w, _ in periods)
    status = json.load(open("%s/status.json" % tmp))["status"]
    return log, status, r.stderr


def hog_start():
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(os.cpu_count() or 2)]


def sanitized():
    return os.environ.get("SANITIZE", "none") not in ("", "none")


def test_determinism(tmp):
    periods = [("a", 1 * MS), ("b", 10 * MS), ("c", 33 * MS)]
    want = expected_log(periods, END)
    for hog in (False, True):
        hogs = hog_start() if hog else []
        logs = []
        runs = 20
        try:
            t0 = time.monotonic()
            for i in range(runs):
                log, _, err = scenario(tmp, periods, name("det"))
                if log is None:
                    check(False, "determinism run %d%s: %s" % (i, " (hog)" if hog else "", err.strip()))
                    return
                logs.append(log)
            took = time.monotonic() - t0
        finally:
            for h in hogs:
                h.kill()
                h.wait()
        what = "with a CPU hog on every core" if hog else "on an idle machine"
        check(all(l == logs[0] for l in logs), "%d runs %s give byte-identical logs (%d bytes, %.1f s)"
              % (runs, what, len(logs[0]), took))
        ok = check(logs[0] == want, "and the log is the one the lockstep guarantee predicts " +
                   "(every message stamped before T seen at step T)")
        if not ok:
            print("# " + first_difference(logs[0], want))


def test_barriers(tmp):
    for ps in ([1, 10, 33], [7, 10, 33]):
        periods = [("p%d" % p, p * MS) for p in ps]
        due = set(t for _, p in periods for t in range(p, END + 1, p))
        log, st, err = scenario(tmp, periods, name("bar"))
        if st is None:
            check(False, "barrier run %s: %s" % (ps, err.strip()))
            continue
        adv = st["lockstep"]["advances"]
        check(adv == len(due), "periods %s ms over 1 s: %d advances = %d distinct due times (not %d 1-ms steps)"
              % (ps, adv, len(due), END // MS))
        # The status against its table (shmclockd/status_fields.h): a
        # lockstep clock's rows, each participant's, nothing else.
        problems = status_schema.check(st, status_schema.load(D))
        check(not problems, "its status has the table's rows for lockstep and nothing else (%s)"
              % ("; ".join(problems) or "it agrees"))


def status(clock, sock):
    r = subprocess.run([CTL, "-n", clock, "--socket", sock, "status", "--json"],
                       capture_output=True, text=True, timeout=10)
    return json.loads(r.stdout)["status"] if r.returncode == 0 else None


def start_participants(clock, n, env=None):
    ps = []
    for i in range(n):
        p = subprocess.Popen([P, clock, "p%d" % i, str((i + 1) * MS), str(1 << 60)],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
        procs.append(p)
        ps.append(p)
    for p in ps:
        p.stdout.readline()  # "joined ..."
    return ps


def stop_all(ps):
    for p in ps:
        if p.poll() is None:
            p.kill()
        p.wait()


def test_deaths_evict(tmp):
    worst = 0.0
    bad = []
    clock = name("evict")
    sock = os.path.join(tmp, "evict.sock")
    d = subprocess.Popen([D, "-n", clock, "--source", "fixed", "--lockstep", "4", "--socket", sock,
                          "--remove-on-exit", "--log-level", "error"])
    procs.append(d)
    try:
        deadline = time.monotonic() + 5
        while not os.path.exists(sock) and time.monotonic() < deadline:
            time.sleep(0.01)
        for i in range(30):
            ps = start_participants(clock, 4)
            time.sleep(random.uniform(0.005, 0.05))
            victim = random.choice(ps)
            deaths = status(clock, sock)["lockstep"]["deaths"]
            killed = time.monotonic_ns()
            victim.send_signal(signal.SIGKILL)
            victim.wait()
            st = None
            end = time.monotonic() + 2
            while time.monotonic() < end:
                st = status(clock, sock)
                if st["lockstep"]["deaths"] > deaths:
                    break
                time.sleep(0.005)
            ls = st["lockstep"]
            if ls["deaths"] <= deaths:
                bad.append("run %d: death not found within 2 s" % i)
                stop_all(ps)
                continue
            found = (int(ls["last_death_found_mono_ns"]) - killed) / 1e6
            worst = max(worst, found)
            grant, at = int(ls["last_death_grant_ns"]), int(ls["last_death_clock_ns"])
            # Generous (a shared 2-core machine): the worst is printed.
            if found > FOUND_LIMIT_MS:
                bad.append("run %d: found %.1f ms after the kill" % (i, found))
            if at > grant:
                bad.append("run %d: the clock was at %d, past the dead one's grant %d" % (i, at, grant))
            # It goes on: the three others move the clock past that grant.
            end = time.monotonic() + 2
            while int(status(clock, sock)["sim_ns"]) <= grant and time.monotonic() < end:
                time.sleep(0.005)
            if int(status(clock, sock)["sim_ns"]) <= grant:
                bad.append("run %d: the clock did not go on past %d within 2 s" % (i, grant))
            stop_all(ps)
            # Their slots free again before the next round.
            end = time.monotonic() + 2
            while status(clock, sock)["lockstep"]["members"] and time.monotonic() < end:
                time.sleep(0.005)
    finally:
        d.send_signal(signal.SIGTERM)
        d.wait(10)
    check(not bad, "OnDeath evict, 30 kills: found within %.1f ms at worst (limit %d ms), the clock "
          "never past the dead one's last grant, then goes on%s"
          % (worst, FOUND_LIMIT_MS, "".join("\n#  " + b for b in bad)))


def test_stalls(tmp):
    """Stalls ended by EvictAfter (a SIGSTOPped participant) and by hand
    (shmclockctl evict), alternating, while another thread polls status:
    the clock thread rewrites the eviction record that status copies (the
    race issue 30 named; ThreadSanitizer runs this file in CI). Each round's
    victim is named in status, the others go on."""
    bad = []
    clock = name("stall")
    sock = os.path.join(tmp, "stall.sock")
    d = subprocess.Popen([D, "-n", clock, "--source", "fixed", "--lockstep", "3", "--socket", sock,
                          "--evict-after", "200ms", "--stall-after", "100ms", "--remove-on-exit",
                          "--log-level", "error"])
    procs.append(d)
    polling = [True]
    polls = [0]

    def poll():
        while polling[0]:
            if status(clock, sock) is not None:
                polls[0] += 1

    poller = threading.Thread(target=poll)
    try:
        deadline = time.monotonic() + 5
        while not os.path.exists(sock) and time.monotonic() < deadline:
            time.sleep(0.01)
        poller.start()
        for i in range(8):
            ps = []
            for k in range(3):
                p = subprocess.Popen([P, clock, "r%d-p%d" % (i, k), str((k + 1) * MS), str(1 << 60)],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                procs.append(p)
                ps.append(p)
            for p in ps:
                p.stdout.readline()  # "joined ..."
            time.sleep(random.uniform(0.005, 0.05))
            k = random.randrange(3)
            who = "r%d-p%d" % (i, k)
            by_hand = i % 2 == 1
            if by_hand:
                r = subprocess.run([CTL, "-n", clock, "--socket", sock, "evict", who],
                                   capture_output=True, text=True, timeout=10)
                if r.returncode != 0:
                    bad.append("round %d: evict %s: %s" % (i, who, r.stderr.strip()))
            else:
                ps[k].send_signal(signal.SIGSTOP)
            st = None
            end = time.monotonic() + 5
            while time.monotonic() < end:
                st = status(clock, sock)
                if who in (st["lockstep"].get("last_eviction") or ""):
                    break
                time.sleep(0.01)
            if who not in (st["lockstep"].get("last_eviction") or ""):
                bad.append("round %d: %s not evicted within 5 s (%s)" % (i, who, "by hand" if by_hand else "stopped"))
            else:
                sim = int(st["sim_ns"])
                end = time.monotonic() + 2
                while int(status(clock, sock)["sim_ns"]) <= sim and time.monotonic() < end:
                    time.sleep(0.005)
                if int(status(clock, sock)["sim_ns"]) <= sim:
                    bad.append("round %d: the clock did not go on after evicting %s" % (i, who))
            ps[k].send_signal(signal.SIGCONT)
            stop_all(ps)
            end = time.monotonic() + 2
            while status(clock, sock)["lockstep"]["members"] and time.monotonic() < end:
                time.sleep(0.005)
    finally:
        polling[0] = False
        if poller.is_alive():
            poller.join()
        d.send_signal(signal.SIGTERM)
        d.wait(10)
    check(not bad and d.returncode == 0,
          "stalls: 8 evictions (EvictAfter and by hand, alternating) under %d status polls, each "
          "victim named, the clock going on, the daemon ending cleanly (%s)%s"
          % (polls[0], d.returncode, "".join("\n#  " + b for b in bad)))


def log_sod(line):
    """Seconds of the UTC day from a log line's "HH:MM:SS.mmm" stamp."""
    h, m, sec = line.split()[0].split(":")
    return int(h) * 3600 + int(m) * 60 + float(sec)


def test_deaths_abort(tmp):
    # Bounds generous for a shared 2-core machine (a loaded one ended a run
    # 125 ms after the kill): what is measured is printed; the bounds catch
    # a death that is not acted on. Under a sanitizer the exit itself is
    # slow (LeakSanitizer scans the heap at exit): 2 s.
    end_limit = 2000 if sanitized() else 1000
    worst = worst_found = 0.0
    bad = []
    for i in range(30):
        clock = name("abort")
        pids = os.path.join(tmp, "pids")
        script = "\n".join(['"%s" %s p%d %d %d > /dev/null & echo $! >> %s' % (P, clock, k, (k + 1) * MS, 1 << 60, pids)
                            for k in range(4)] + ["wait"])
        if os.path.exists(pids):
            os.unlink(pids)
        errf = open(os.path.join(tmp, "abort.err"), "w+")
        # stderr to a file: the orphaned participants keep a pipe open
        # until they see the writer gone, which is not the run's end.
        d = subprocess.Popen([D, "-n", clock, "--source", "fixed", "--lockstep", "4", "--on-death", "abort",
                              "--log-level", "error", "--", "sh", "-c", script],
                             stderr=errf, text=True)
        procs.append(d)
        sock = os.path.join(os.environ["SHMCLOCK_RUNTIME_DIR"], clock + ".sock")
        end = time.monotonic() + 5
        st = None
        while time.monotonic() < end:
            if os.path.exists(sock):
                st = status(clock, sock)
                if st and st["lockstep"]["advances"] > 0:
                    break
            time.sleep(0.005)
        time.sleep(random.uniform(0.0, 0.05))
        victim = random.choice([int(x) for x in open(pids).read().split()])
        killed = time.monotonic()
        killed_sod = time.time() % 86400
        os.kill(victim, signal.SIGKILL)
        try:
            d.wait(timeout=5)
        except subprocess.TimeoutExpired:
            d.kill()
            d.wait()
            bad.append("run %d: the run did not end" % i)
        took = (time.monotonic() - killed) * 1000
        errf.seek(0)
        err = errf.read()
        errf.close()
        worst = max(worst, took)
        if d.returncode != 86:
            bad.append("run %d: exit status %s, not 86: %s" % (i, d.returncode, err.strip()))
            continue
        line = [l for l in err.splitlines() if "OnDeath abort" in l and "exiting" in l]
        if not line or "pid %d" % victim not in line[0]:
            bad.append("run %d: the message does not name pid %d: %s" % (i, victim, err.strip()))
            continue
        logged = [l for l in err.splitlines() if "OnDeath abort: the clock stops" in l]
        if logged:
            # Within +-12 h of the kill (midnight); the stamp is floored
            # to the millisecond, so it may read up to 1 ms early.
            found = max(0.0, ((log_sod(logged[0]) - killed_sod + 43200) % 86400 - 43200) * 1000)
            worst_found = max(worst_found, found)
            if found > FOUND_LIMIT_MS:
                bad.append("run %d: found %.0f ms after the kill" % (i, found))
        else:
            bad.append("run %d: no log line for the death: %s" % (i, err.strip()))
        grant = int(line[0].split("last grant ")[1].split("(")[1].split(" ns")[0])
        at = int(line[0].split("clock at ")[1].split("(")[1].split(" ns")[0])
        if at > grant:
            bad.append("run %d: the clock was at %d, past the dead one's grant %d" % (i, at, grant))
        if took > end_limit:
            bad.append("run %d: the run ended %.1f ms after the kill" % (i, took))
        # The others see the writer gone and end by themselves.
        subprocess.run(["pkill", "-KILL", "-f", clock], capture_output=True)
    check(not bad, "OnDeath abort in CI mode, 30 kills: exit status 86 naming the dead participant, "
          "found within %.0f ms (log stamps, 1 ms resolution; limit %d ms) and ended within "
          "%.1f ms at worst (limit %d ms%s), never past its grant%s"
          % (worst_found, FOUND_LIMIT_MS, worst, end_limit, ", sanitizer build" if sanitized() else "",
             "".join("\n#  " + b for b in bad)))


def main():
    tmp = tempfile.mkdtemp(prefix="ls-e2e-")
    os.environ["SHMCLOCK_RUNTIME_DIR"] = tmp
    os.environ.pop("SHMCLOCK_NAME", None)
    os.environ.pop("SHMCLOCK_SOCKET", None)
    try:
        test_determinism(tmp)
        test_barriers(tmp)
        test_deaths_evict(tmp)
        test_stalls(tmp)
        test_deaths_abort(tmp)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
        for f in os.listdir("/dev/shm"):
            if "ls-e2e-%d-" % os.getpid() in f:
                os.unlink(os.path.join("/dev/shm", f))
    print("# %d failure(s)" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
