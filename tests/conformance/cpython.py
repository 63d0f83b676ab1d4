#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""CPython's own regression tests under the shim (issue 28).

The same program under the same time: each module runs under shmclock-run
on a system-source clock at scale 1, and every test must give the result
it gives without the shim. A test that passes without the shim must pass
under it; none may hang (regrtest's --timeout); no module may take more
than 1.5x as long plus a second under the shim (judged on the better of two
runs each way when the first run exceeds it: the machine is shared). Tests
that fail without the shim (the machine's doing: no network, root) are
listed, not judged.

The results without the shim are a function of the interpreter and its
test suite, not of our code: they are recorded per Python version in
cpython-baseline.json beside this file (issue 50), so each module runs
once, under the shim, two modules at a time. A module is run again without
the shim, now, whenever the record cannot settle it: no record for this
interpreter or for the module, another set of cases, a case that passed in
the record and does not under the shim, or more than 1.5x the recorded
time. So a difference is always judged against a run of this machine, and
a record can only save time, never decide a failure. Without a record for
this interpreter every module runs both ways at once (as before the
record), and the record for it is written into the build directory.

Prints a table per module: passed / failed / skipped and seconds, both ways
("rec" where the column without the shim is the record's).

usage: cpython.py [--record] [MODULE...]
         (default: the modules of issue 28, with test_asyncio as its
         submodules); --record: run every module without the shim (two at a
         time) and write the record (BASELINE) for this interpreter.
Environment: SHMCLOCKD, SHMCLOCK_RUN, SHMCLOCK_PRELOAD (set by meson);
CPYTHON (default /usr/bin/python3: Debian's, whose libpython3.11-testsuite
holds the tests); BASELINE (the record; default cpython-baseline.json
beside this file); BASELINE_OUT (where a new record is written; default
the current directory).
Exit 0 the same both ways, 1 a difference, 77 no CPython test suite.
"""
import concurrent.futures
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

MODULES = ["test_time", "test_threading", "test_selectors", "test_select", "test_poll",
           "test_epoll", "test_signal", "test_eintr", "test_sched", "test_queue", "test_thread",
           "test_subprocess", "test_asyncio"]
TEST_TIMEOUT = 300  # regrtest's per-module watchdog (a hang)
RATIO, SLACK = 1.5, 1.0


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(77)


def expand(python, mods):
    """test_asyncio as its submodules: they run (and are timed) one by one."""
    out = []
    for m in mods:
        if m != "test_asyncio":
            out.append(m)
            continue
        r = subprocess.run([python, "-c", "import test.test_asyncio, os; "
                            "print(os.path.dirname(test.test_asyncio.__file__))"],
                           capture_output=True, text=True)
        d = r.stdout.strip()
        out += sorted("test_asyncio." + f[:-3] for f in os.listdir(d)
                      if f.startswith("test_") and f.endswith(".py"))
    return out


def run_module(cmd_prefix, python, mod, workdir, tag):
    """Run one module; its cases' results {name: 'pass'|'fail'|'skip'} and
    the wall time. A run that leaves no results (crash, hang) gives {}."""
    xml = os.path.join(workdir, f"{mod}.{tag}.xml")
    if os.path.exists(xml):
        os.unlink(xml)
    cmd = cmd_prefix + [python, "-m", "test", "--timeout", str(TEST_TIMEOUT),
                        "--junit-xml", xml, mod]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=TEST_TIMEOUT + 60, start_new_session=True, cwd=workdir)
        log = p.stdout
    except subprocess.TimeoutExpired as e:
        log = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) \
            else (e.stdout or "")
        log += "\n(killed: no end after %d s)" % (TEST_TIMEOUT + 60)
    wall = time.monotonic() - t0
    res = {}
    try:
        for tc in ET.parse(xml).getroot().iter("testcase"):
            kinds = {c.tag for c in tc}
            res[tc.get("name")] = ("fail" if kinds & {"failure", "error"}
                                   else "skip" if "skipped" in kinds else "pass")
    except (OSError, ET.ParseError):
        pass
    with open(os.path.join(workdir, f"{mod}.{tag}.log"), "w") as f:
        f.write(log)
    return res, wall


def counts(res):
    v = list(res.values())
    return v.count("pass"), v.count("fail"), v.count("skip")


def interpreter_key(python):
    """What the results without the shim depend on: the interpreter's
    version and build, and its test suite's package version."""
    v = subprocess.run([python, "-c", "import sys; print(sys.version)"],
                       capture_output=True, text=True).stdout.strip()
    pkg = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "libpython3.11-testsuite"],
                         capture_output=True, text=True).stdout.strip()
    return f"{v} | libpython3.11-testsuite {pkg or '?'}"


def names_hash(res):
    return hashlib.sha256("\n".join(sorted(res)).encode()).hexdigest()[:16]


def record_of(res, wall):
    """A module's record: its cases (by hash and count), those that do
    not pass, and the seconds."""
    return {"cases": len(res), "names": names_hash(res),
            "notpass": {n: r for n, r in sorted(res.items()) if r != "pass"},
            "seconds": round(wall, 1)}


def unsettled(rec, rs, ts):
    """Why the record cannot judge a run under the shim (None: it can)."""
    if rec is None:
        return "no record"
    if not rs:
        return "no result under the shim"
    if len(rs) != rec["cases"] or names_hash(rs) != rec["names"]:
        return "another set of cases"
    lost = [n for n, r in rs.items() if r != "pass" and n not in rec["notpass"]]
    if lost:
        return f"{len(lost)} recorded passes do not pass under the shim"
    if ts > RATIO * rec["seconds"] + SLACK:
        return f"{ts:.1f} s against the recorded {rec['seconds']:.1f} s"
    return None


def main():
    args = sys.argv[1:]
    record = "--record" in args
    args = [a for a in args if a != "--record"]
    python = os.environ.get("CPYTHON", "/usr/bin/python3")
    daemon = os.environ.get("SHMCLOCKD")
    runner = os.environ.get("SHMCLOCK_RUN")
    here = os.path.dirname(os.path.abspath(__file__))
    baseline = os.environ.get("BASELINE", os.path.join(here, "cpython-baseline.json"))
    if not daemon or not runner:
        print("SHMCLOCKD and SHMCLOCK_RUN must be set (run through meson test)")
        return 1
    if not shutil.which(python):
        skip(f"no {python}")
    if subprocess.run([python, "-c", "import test.libregrtest, test.test_time"],
                      capture_output=True).returncode:
        skip(f"{python} has no test suite (Debian: apt-get install libpython3.11-testsuite)")
    mods = expand(python, args or MODULES)
    key = interpreter_key(python)
    recorded = {}
    try:
        with open(baseline) as f:
            rec_all = json.load(f)
        if rec_all.get("python") == key:
            recorded = rec_all.get("modules", {})
    except (OSError, ValueError):
        pass

    work = tempfile.mkdtemp(prefix="shmclock-conformance-")
    if record:
        # Two at a time, as the runs under the shim are judged against it.
        print(f"CPython {python} ({key}): {len(mods)} modules without the shim, two at a time",
              flush=True)
        out = {}
        with concurrent.futures.ThreadPoolExecutor(2) as ex:
            runs = {m: ex.submit(run_module, [], python, m, work, "bare") for m in mods}
        for mod in mods:
            rb, tb = runs[mod].result()
            if not rb:
                print(f"{mod}: no result (not recorded)")
                continue
            out[mod] = record_of(rb, tb)
            print(f"{mod:36} {'%d/%d/%d' % counts(rb):>11} {tb:6.1f}s", flush=True)
        with open(baseline, "w") as f:
            json.dump({"python": key, "modules": out}, f, indent=1, sort_keys=True)
            f.write("\n")
        shutil.rmtree(work, ignore_errors=True)
        print(f"recorded: {baseline}")
        return 0

    name = f"conformance-{os.getpid()}-{int(time.time() * 1000) % 1000000}"
    sock = os.path.join(work, "clock.sock")
    d = subprocess.Popen([daemon, "-n", name, "--source", "system", "--remove-on-exit",
                          "--socket", sock], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    shim = [runner, "-n", name, "-w", "10s", "-q", "--"]
    bad = []
    rows = []
    fresh = {}
    try:
        # The clock is up (shmclock-run -w waits for it).
        if subprocess.run(shim + ["true"]).returncode:
            print("FAIL: the system-source clock did not start")
            return 1

        def both(mod):
            with concurrent.futures.ThreadPoolExecutor(2) as ex:
                b = ex.submit(run_module, [], python, mod, work, "bare")
                s = ex.submit(run_module, shim, python, mod, work, "shim")
                return b.result(), s.result()

        if recorded:
            print(f"CPython {python}: {len(mods)} modules under the shim, two at a time, against "
                  f"the record without it (clock '{name}', system source, scale 1)", flush=True)
            with concurrent.futures.ThreadPoolExecutor(2) as ex:
                shim_runs = {m: ex.submit(run_module, shim, python, m, work, "shim") for m in mods}
                first = {m: f.result() for m, f in shim_runs.items()}
        else:
            print(f"CPython {python}: no record for this interpreter ({key}): {len(mods)} modules "
                  f"without and under the shim at once (clock '{name}', system source, scale 1)",
                  flush=True)
            first = {}
        for mod in mods:
            # Settled by its record, or run without the shim now.
            why = unsettled(recorded.get(mod), *first[mod]) if mod in first else "no record"
            from_rec = why is None
            if from_rec:
                rs, ts = first[mod]
                rb = {n: "pass" for n in rs}
                rb.update(recorded[mod]["notpass"])
                tb = recorded[mod]["seconds"]
            else:
                if mod in first:
                    print(f"    {mod}: run without the shim now ({why})", flush=True)
                (rb, tb), (rs, ts) = both(mod)
                if rb:
                    fresh[mod] = record_of(rb, tb)
            if not from_rec and ts > RATIO * tb + SLACK:
                # Once more, one at a time, the better of two each way.
                rb2, tb2 = run_module([], python, mod, work, "bare2")
                rs2, ts2 = run_module(shim, python, mod, work, "shim2")
                tb, ts = min(tb, tb2), min(ts, ts2)
            notes = []
            whole_skip = False
            if not from_rec:
                with open(os.path.join(work, f"{mod}.bare.log")) as f:
                    whole_skip = not rb and " skipped" in f.read()
            if whole_skip:
                notes.append("skipped as a whole (not judged)")
            elif not rb:
                notes.append("no result without the shim (not judged)")
            elif not rs:
                notes.append("no result under the shim (crash or hang: see %s.shim.log)" % mod)
            lost = sorted(n for n, r in rb.items() if r == "pass" and rs.get(n) != "pass")
            for n in lost:
                notes.append(f"{n}: passes without the shim, {rs.get(n, 'not run')} under it")
            if rb and ts > RATIO * tb + SLACK:
                notes.append(f"{ts:.1f} s under the shim against {tb:.1f} s without "
                             f"(more than {RATIO}x + {SLACK:.0f} s)")
            unjudged = sorted(n for n, r in rb.items() if r == "fail")
            rows.append((mod, counts(rb), tb, counts(rs), ts))
            line = (f"{mod:36} {'%d/%d/%d' % counts(rb):>11} {tb:6.1f}s{'rec' if from_rec else '   '}"
                    f"{'%d/%d/%d' % counts(rs):>11} {ts:6.1f}s")
            judged = [x for x in notes if "not judged" not in x]
            print(line + ("   DIFFERENT" if judged else ""), flush=True)
            for x in notes:
                print("    " + x)
            for n in unjudged:
                print(f"    {n}: fails without the shim too (not judged)")
            if judged:
                bad.append(mod)
    finally:
        d.send_signal(signal.SIGTERM)
        try:
            d.wait(10)
        except subprocess.TimeoutExpired:
            d.kill()
            d.wait()
        if not bad:
            shutil.rmtree(work, ignore_errors=True)
    if not recorded and fresh:
        out = os.path.join(os.environ.get("BASELINE_OUT", "."), "cpython-baseline.json")
        with open(out, "w") as f:
            json.dump({"python": key, "modules": fresh}, f, indent=1, sort_keys=True)
            f.write("\n")
        print(f"a record for this interpreter: {os.path.abspath(out)} (commit it as {baseline} "
              f"to run each module once; or cpython.py --record)")
    tb = sum(r[2] for r in rows)
    ts = sum(r[4] for r in rows)
    pb = [sum(r[1][i] for r in rows) for i in range(3)]
    ps = [sum(r[3][i] for r in rows) for i in range(3)]
    print(f"{'(columns: passed/failed/skipped, seconds)':36} {'without':>11} {'':7}   "
          f"{'under the shim':>11}")
    print(f"{'total':36} {'%d/%d/%d' % tuple(pb):>11} {tb:6.1f}s   "
          f"{'%d/%d/%d' % tuple(ps):>11} {ts:6.1f}s   ({ts / tb if tb else 0:.2f}x)")
    if bad:
        print(f"FAIL: {len(bad)} modules differ under the shim: {' '.join(bad)} "
              f"(logs in {work})")
        return 1
    print("the same both ways")
    return 0


if __name__ == "__main__":
    sys.exit(main())
