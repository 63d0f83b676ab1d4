#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The config's one table (shmclockd/config.c, config_keys[]) and the places
that list its keys agree, read from `shmclockd --help-config`:

- shmclock.json(5) has exactly the table's keys, each in its section (KEYS,
  LOCKSTEP, ROS 2, DISTRIBUTE), each entry's header marks what SIGHUP does
  with it as the table says ("restart", "new clock only", "until started";
  nothing for a key a reload applies), and an entry whose key has an option
  names that option;
- each key's option is one `shmclockd --help` lists;
- the fuzz dictionary (tests/fuzz/dict.json) has exactly the table's key
  names as JSON strings, so the fuzzers reach every key's parser.

A key added in one place only fails here. TAP.

usage: config_keys.py SHMCLOCKD SOURCE_ROOT
"""
import re
import subprocess
import sys

daemon, src = sys.argv[1], sys.argv[2]
MARK = {"live": None, "restart": "restart", "fresh": "new clock only",
        "until-start": "until started"}

out = subprocess.run([daemon, "--help-config"], capture_output=True, text=True,
                     timeout=30, check=True).stdout
table = {}  # "Section.Key" or "Key" -> (rule, option)
for line in out.splitlines()[1:]:
    if not line.strip():
        break
    path, rule = line.split()[:2]
    opt = re.search(r"\((--[a-z-]+)\)$", line)
    table[path] = (rule, opt.group(1) if opt else None)
sections = {p.split(".")[0] for p in table if "." in p}

# The man page's source: entries "*Key* (...)" at the start of a line, the
# header running until the first indented line, under a "# SECTION" heading.
man = {}  # path -> (header, body)
heading = None
with open(f"{src}/doc/man/shmclock.json.5.scd", encoding="utf-8") as f:
    lines = f.read().splitlines()
i = 0
while i < len(lines):
    line = lines[i]
    if line.startswith("# "):
        title = line[2:].replace(" ", "").lower()
        heading = "" if title == "keys" else next(
            (s for s in sections if s.lower() == title), None)
        i += 1
        continue
    m = re.match(r"\*([A-Z][A-Za-z0-9]*)\* \(", line)
    if heading is not None and m:
        header = [line]
        i += 1
        while i < len(lines) and lines[i] and not lines[i].startswith("\t"):
            header.append(lines[i])
            i += 1
        body = []
        while i < len(lines) and lines[i].startswith("\t"):
            body.append(lines[i])
            i += 1
        path = (heading + "." if heading else "") + m.group(1)
        man[path] = (" ".join(header), " ".join(body))
        continue
    i += 1
# A section's own row is its heading.
documented = set(man) | {s for s in sections}

results = []


def result(ok, msg):
    results.append((ok, msg))


missing = sorted(set(table) - documented)
extra = sorted(documented - set(table))
result(not missing and not extra and bool(table),
       f"shmclock.json(5) lists the table's {len(table)} keys"
       + (f"; not in the page: {' '.join(missing)}" if missing else "")
       + (f"; not in the table: {' '.join(extra)}" if extra else ""))

wrong = []
for path, (header, _) in sorted(man.items()):
    if path not in table:
        continue
    want = MARK[table[path][0]]
    marks = [m for m in MARK.values() if m and re.search(r"\b" + m + r"\b", header)]
    if marks != ([want] if want else []):
        wrong.append(f"{path} ({table[path][0]}: {header})")
result(not wrong, "each entry's header marks what SIGHUP does as the table says"
       + (f"; wrong: {'; '.join(wrong)}" if wrong else ""))

helptext = subprocess.run([daemon, "--help"], capture_output=True, text=True, timeout=30).stdout
bad_opt = [f"{p} ({o})" for p, (_, o) in table.items()
           if o and not re.search(r"(?<![\w-])" + re.escape(o) + r"(?![\w-])", helptext)]
result(not bad_opt, "each key's option is in shmclockd --help"
       + (f"; not there: {' '.join(bad_opt)}" if bad_opt else ""))
no_opt = [f"{p} ({o})" for p, (_, o) in table.items()
          if o and p in man and o not in man[p][1].replace("\\", "")]
result(not no_opt, "each entry names its key's option"
       + (f"; missing: {' '.join(no_opt)}" if no_opt else ""))

with open(f"{src}/tests/fuzz/dict.json", encoding="utf-8") as f:
    tokens = set(re.findall(r'^"\\"([A-Z][A-Za-z0-9]*)\\""$', f.read(), re.M))
names = {p.split(".")[-1] for p in table}
missing = sorted(names - tokens)
extra = sorted(tokens - names)
result(not missing and not extra,
       f"tests/fuzz/dict.json has the table's {len(names)} key names"
       + (f"; missing: {' '.join(missing)}" if missing else "")
       + (f"; not keys: {' '.join(extra)}" if extra else ""))

for n, (ok, msg) in enumerate(results, 1):
    print(("ok" if ok else "not ok"), n, "-", msg)
print(f"1..{len(results)}")
sys.exit(0 if all(ok for ok, _ in results) else 1)
