#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The status's one table (shmclockd/status_fields.h) and the places that
name its fields agree, read from `shmclockd --help-status` and
`shmclock-panel --help-metrics`:

- shmclock-panel(1)'s METRICS section has exactly the metrics the panel
  serves, each with its type; the panel serves every metric of the table;
- the metric names follow Prometheus' conventions: counters end in _total,
  a time's metric is in seconds (its name says so), nothing else ends in
  _total;
- every status key that shmclockctl, the panel's C code and panel.js read
  is a field of the table (in its section where the reader's variable
  says which).

The other half, that a daemon's real status has the rows of its mode and
nothing else, is tests/lib/status_schema.py, run by the e2e tests of each
mode. A field added in one place only fails here or there. TAP.

usage: status_fields.py SHMCLOCKD SHMCLOCK_PANEL SOURCE_ROOT
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

daemon, panel, src = sys.argv[1:4]
sys.path.insert(0, os.path.join(src, "tests", "lib"))
import status_schema  # noqa: E402

n = 0
failed = False


def check(ok, what):
    global n, failed
    n += 1
    print("%s %d - %s" % ("ok" if ok else "not ok", n, what))
    failed |= not ok


table = status_schema.load(daemon)
out = subprocess.run([panel, "--help-metrics"], capture_output=True, text=True, timeout=30,
                     check=True).stdout
served = {}
for line in out.splitlines():
    name, typ, _ = line.split(None, 2)
    served[name] = typ
check(len(table) > 100 and len(served) > 50,
      "the table (%d fields) and the panel's metrics (%d) are read" % (len(table), len(served)))

# The man page's METRICS section: "*name* (type)" entries.
scd = open(os.path.join(src, "doc", "man", "shmclock-panel.1.scd")).read()
sec = scd.split("\n# METRICS\n", 1)[1].split("\n# ", 1)[0]
man = {m.group(1).replace("\\_", "_"): m.group(2)
       for m in re.finditer(r"^\*([a-z0-9_\\]+)\* \(([a-z]+)\)$", sec, re.M)}
missing = sorted(set(served) - set(man))
extra = sorted(set(man) - set(served))
check(not missing and not extra,
      "shmclock-panel(1) METRICS lists exactly what /metrics serves (missing: %s; not served: %s)"
      % (", ".join(missing) or "none", ", ".join(extra) or "none"))
wrong = sorted(k for k in set(man) & set(served) if man[k] != served[k])
check(not wrong, "each with its type (%s)" % (", ".join(wrong) or "all agree"))

KIND_TYPE = {"counter": "counter", "by-reason": "counter", "histogram": "histogram"}
unserved, bad_name = [], []
for f in table.values():
    if not f.metric:
        continue
    want = KIND_TYPE.get(f.kind, "gauge")
    if served.get(f.metric) != want:
        unserved.append("%s (%s)" % (f.metric, served.get(f.metric)))
    if (want == "counter") != f.metric.endswith("_total"):
        bad_name.append(f.metric)
    if f.unit in ("ns", "us", "s") and "_seconds" not in f.metric:
        bad_name.append(f.metric)
check(not unserved, "the panel serves each metric of the table as its kind says (%s)"
      % (", ".join(unserved) or "all"))
check(not bad_name, "metric names follow the conventions: _total for counters, _seconds for times "
      "(%s)" % (", ".join(bad_name) or "all do"))

# The readers of status. Keys that are not status fields: the reply's own.
REPLY = {"v", "ok", "error", "status", "clocks", "cmd", "arg", "clock"}
keys = {f.path.rpartition(".")[2] for f in table.values()}


def c_keys(path):
    text = open(os.path.join(src, path)).read()
    return set(re.findall(r'(?:num_of|str_of|bool_of|st_num|cJSON_GetObjectItemCaseSensitive)'
                          r'\([^,()]+(?:\([^()]*\))?[^,()]*, "([a-z0-9_]+)"', text))


for path in ("shmclockd/shmclockctl.c", "shmclockd/panel/main.c", "shmclockd/panel/poller.c"):
    ks = c_keys(path)
    unknown = sorted(ks - keys - REPLY)
    check(ks and not unknown, "%s reads only status fields (%d keys; not in the table: %s)"
          % (path, len(ks), ", ".join(unknown) or "none"))

# panel.js: its variables name the section (st: the status, ls: lockstep,
# m: a participant, d: distribute, st.ticks).
js = open(os.path.join(src, "shmclockd", "panel", "static", "panel.js")).read()
JS = {"st": "", "ls": "lockstep", "m": "lockstep.members[]", "d": "distribute"}
unknown, seen = [], 0
for var, section in JS.items():
    for k in set(re.findall(r"(?<![\w.])%s\.([a-z0-9_]+)" % var, js)):
        seen += 1
        if (section + "." + k if section else k) not in table:
            unknown.append("%s.%s" % (var, k))
for k in set(re.findall(r"\bst\.ticks\.([a-z0-9_]+)", js)):
    seen += 1
    if "ticks." + k not in table:
        unknown.append("st.ticks." + k)
check(seen > 30 and not unknown, "panel.js reads only status fields, each in its section (%d; "
      "not in the table: %s)" % (seen, ", ".join(sorted(unknown)) or "none"))

# A plain daemon's real status against the table (the other modes: the
# e2e tests of lockstep and hosts, panel-hosts and lockstep-e2e).
tmp = tempfile.mkdtemp(prefix="shmclock-status-fields-")
name = "status-fields-%d" % os.getpid()
d = subprocess.Popen([daemon, "-n", name, "--source", "simulation", "--unix-zero",
                      "2024-01-01T00:00:00Z", "--remove-on-exit", "--log-level", "warn"],
                     env=dict(os.environ, SHMCLOCK_RUNTIME_DIR=tmp))
try:
    reply = None
    for _ in range(500):
        try:
            with socket.socket(socket.AF_UNIX) as c:
                c.settimeout(10)
                c.connect(os.path.join(tmp, name + ".sock"))
                c.sendall(b'{"v":1,"cmd":"status"}\n')
                reply = json.loads(c.makefile().readline())
            break
        except OSError:
            time.sleep(0.02)
    problems = status_schema.check(reply["status"], table) if reply else ["no status"]
    check(not problems, "a plain daemon's status has the table's rows for plain and nothing "
          "else (%s)" % ("; ".join(problems) or "it agrees"))
finally:
    d.terminate()
    d.wait(30)
    shutil.rmtree(tmp, ignore_errors=True)
print("1..%d" % n)
sys.exit(1 if failed else 0)
