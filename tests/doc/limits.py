#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The limits the code names once (printed by tests/doc/tables.c) and where
the documents say them again: every mention of a limit in the man pages'
sources, doc/*.md, README.md and the Python and C# bindings has the
constant's value, and each limit is found at least once (a pattern that no
longer matches anything fails too, instead of checking nothing):

- the scale range, CONFIG_SCALE_MIN to CONFIG_SCALE_MAX ("1e-6 to 1e6");
- a clock name's length, SHMCLOCK_NAME_MAX ("1 to 64 of [A-Za-z0-9_.-]");
- a participant's name, SHMCLOCK_LOCKSTEP_WHO_MAX ("1 to 64 bytes of UTF-8");
- participants per clock, SHMCLOCK_LOCKSTEP_SLOTS ("64 participants
  already", "Participants (integer, 1 to 64");
- a control request line, CONTROL_LINE_MAX ("capped at 4096 bytes");
- control clients, CONTROL_CLIENTS_MAX ("with 32 clients connected");
- OnSlow's count of late changes, DIST_ON_SLOW_MAX ("OnSlow ... 1 to 32");
- a follower's (and a lockstep host's) lease between hosts, DIST_LEASE_NS
  ("a host's lease is 3.5 s", "host silent for 3.5 s");
- a secured daemon's identity, ROS2_IDENTITY_MAX ("the common name its
  permissions grant (at most 32 characters", "NAME (...; 32 at most").

(The code's own messages format the constants in.) TAP, one line a limit.

usage: limits.py TABLES SOURCE_ROOT
"""
import glob
import os
import re
import subprocess
import sys

tables, src = sys.argv[1], sys.argv[2]

limits = {}
for line in subprocess.run([tables], capture_output=True, text=True, timeout=30,
                           check=True).stdout.splitlines():
    f = line.split("\t")
    if f[0] == "limit":
        limits[f[1]] = f[2]

# Where limits are written for people. The rendered doc/*.txt are copies of
# the man pages (man-rendered checks that).
files = sorted(glob.glob(f"{src}/doc/man/*.scd") + glob.glob(f"{src}/doc/*.md")
               + [f"{src}/README.md"]
               + glob.glob(f"{src}/readers/csharp/**/*.cs", recursive=True)
               + glob.glob(f"{src}/readers/python/shmclock/*.py*"))
texts = {}
for path in files:
    with open(path, encoding="utf-8") as f:
        t = f.read()
    # Markup and comment leaders out, lines joined: a phrase may be wrapped.
    t = re.sub(r"\n\s*(///?|#)?", " ", t)
    t = re.sub(r"[*`\\]", "", t)
    texts[os.path.relpath(path, src)] = re.sub(r"\s+", " ", t)

ONE = r"\b1\s*(?:to|–|-)\s*"
CHECKS = [
    # (what, the limits it shows, pattern: each group a mention)
    ("the scale range", ("scale_min", "scale_max"),
     r"\b(\d(?:\.\d+)?e[-+]?\d+) to (\d(?:\.\d+)?e[-+]?\d+)\b"),
    ("a clock name's length", ("name_max",), ONE + r"(\d+) of \[A-Za-z0-9"),
    ("a participant's name's length", ("lockstep_who_max",),
     ONE + r"(\d+) (?:bytes of UTF-8|printable characters)"),
    ("participants per clock", ("lockstep_slots",),
     r"\((?:or )?(\d+) (?:lockstep )?participants\b|\ball (\d+) participant slots"
     r"|Participants \(integer, 1 to (\d+)|join later, up to (\d+)"),
    ("a control request line's length", ("control_line_max",),
     r"[Ll]ines are capped at (\d+) bytes"),
    ("control clients", ("control_clients_max",),
     r"with (\d+) clients connected|clients at (\d+)|with all (\d+) waiting"),
    ("OnSlow's count", ("on_slow_max",),
     r"OnSlow[^.]{0,120}?\b1 to (\d+)"),
    ("a host's lease", ("host_lease_s",),
     r"host's lease is (\d+(?:\.\d+)?) s|silent for its lease \((\d+(?:\.\d+)?) s"
     r"|a whole lease, (\d+(?:\.\d+)?) s|host silent for (\d+(?:\.\d+)?) s"
     r"|its lease, (\d+(?:\.\d+)?) s"),
    ("an identity's length", ("identity_max",),
     r"common name its permissions grant \(at most (\d+) characters|NAME_? \([^)]*?; (\d+) at most"),
]

results = []
for what, names, pattern in CHECKS:
    want = [limits[n] for n in names]
    seen, wrong = 0, []
    for path, text in texts.items():
        for m in re.finditer(pattern, text):
            got = [g for g in m.groups() if g is not None]
            seen += 1
            if len(names) == 1:
                got = got[:1]
            if got != want:
                wrong.append(f"{path}: \"{m.group(0)}\"")
    results.append((seen > 0 and not wrong,
                    f"{what} ({' to '.join(want)}): {seen} mentions"
                    + (f"; wrong: {'; '.join(wrong)}" if wrong else "")
                    + ("; none found: has the wording changed?" if not seen else "")))

for n, (ok, msg) in enumerate(results, 1):
    print(("ok" if ok else "not ok"), n, "-", msg)
print(f"1..{len(results)}")
sys.exit(0 if all(ok for ok, _ in results) else 1)
