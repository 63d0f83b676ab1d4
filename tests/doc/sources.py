#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The time sources' one table (SHMCLOCK_SOURCE_MAP in <shmclock/shmclock.h>)
and the consumers that cannot expand it, read from tests/doc/tables.c's
output:

- C#'s enum ClockSource (readers/csharp, a Unity package read from the
  source tree, so hand-written) has one member per row, named after it
  (ros2: Ros2), with its value, and None = 0;
- shmclockd(8), TIME SOURCES, has one entry per row, "*name*" or
  "*name*, *alias*", with the row's alias.

(The library's enum and names, shmclockd's lookup and help and the Python
docstring are expanded from the table at build time.) A row missing in one
consumer fails here. TAP.

usage: sources.py TABLES SOURCE_ROOT
"""
import re
import subprocess
import sys

tables, src = sys.argv[1], sys.argv[2]

rows = {}  # name -> (value, alias or None, flags)
for line in subprocess.run([tables], capture_output=True, text=True, timeout=30,
                           check=True).stdout.splitlines():
    f = line.split("\t")
    if f[0] == "source":
        rows[f[2]] = (int(f[1]), None if f[3] == "-" else f[3], f[4])

results = []


def result(ok, msg):
    results.append((ok, msg))


result(len(rows) > 0 and len({v for v, _, _ in rows.values()}) == len(rows),
       f"the table has {len(rows)} sources, each its own value")

# C#: "enum ClockSource { None = 0, Simulation = 1, ... }".
path = "readers/csharp/Runtime/Shmclock/Types.cs"
with open(f"{src}/{path}", encoding="utf-8") as f:
    m = re.search(r"\benum ClockSource\s*\{([^}]*)\}", f.read())
cs = {k.lower(): int(v) for k, v in re.findall(r"\b([A-Z]\w*)\s*=\s*(\d+)", m.group(1) if m else "")}
want = {"none": 0, **{name: v for name, (v, _, _) in rows.items()}}
missing = sorted(k for k in want if k not in cs)
extra = sorted(k for k in cs if k not in want)
wrong = sorted(f"{k} = {cs[k]} (table: {want[k]})" for k in want if k in cs and cs[k] != want[k])
result(bool(m) and not missing and not extra and not wrong,
       f"{path}: ClockSource has the table's {len(rows)} sources and None"
       + (f"; missing: {' '.join(missing)}" if missing else "")
       + (f"; not in the table: {' '.join(extra)}" if extra else "")
       + (f"; wrong value: {', '.join(wrong)}" if wrong else ""))

# shmclockd(8): the entries of TIME SOURCES, up to the next heading.
page = "doc/man/shmclockd.8.scd"
with open(f"{src}/{page}", encoding="utf-8") as f:
    text = f.read()
m = re.search(r"^# TIME SOURCES\n(.*?)(?=^# )", text, re.M | re.S)
man = {}  # name -> alias or None
for line in (m.group(1) if m else "").splitlines():
    e = re.fullmatch(r"\*([a-z0-9]+)\*(?:, \*([a-z0-9]+)\*)?", line)
    if e:
        man[e.group(1)] = e.group(2)
missing = sorted(k for k in rows if k not in man)
extra = sorted(k for k in man if k not in rows)
wrong = sorted(f"{k} (alias {man[k]}; table: {rows[k][1]})" for k in rows
               if k in man and man[k] != rows[k][1])
result(bool(m) and not missing and not extra and not wrong,
       f"{page}: TIME SOURCES has an entry for each of the table's {len(rows)} sources"
       + (f"; missing: {' '.join(missing)}" if missing else "")
       + (f"; not in the table: {' '.join(extra)}" if extra else "")
       + (f"; wrong alias: {', '.join(wrong)}" if wrong else ""))

for n, (ok, msg) in enumerate(results, 1):
    print(("ok" if ok else "not ok"), n, "-", msg)
print(f"1..{len(results)}")
sys.exit(0 if all(ok for ok, _ in results) else 1)
