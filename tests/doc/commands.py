#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The control protocol's one table (shmclockd/protocol.h, CONTROL_COMMANDS)
and every place that lists its commands agree, read from
`shmclockd --help-commands`:

- shmclockctl --help has a line per command, and COMMAND --help its
  arguments' names in order (generated: this keeps it so);
- shmclockctl(1), as rendered in doc/shmclockctl.1.txt, has an entry per
  command headed by its arguments' names in order, showing its request
  with each argument under its key in order, and no entry for a command
  neither the table nor shmclockctl has;
- every request the docs show (doc/man, doc/*.md, README.md) is a command
  of the table with its keys; every panel request a command the panel
  serves;
- the panel serves the commands the table gives it: shmclock-panel --help
  names exactly those, so do both places shmclock-panel(1) lists them, and
  the panel's page has a control sending each.

A command added to the table and missing in one of them fails here. TAP.

usage: commands.py SHMCLOCKD SHMCLOCKCTL SHMCLOCK_PANEL|- SOURCE_ROOT
"""
import glob
import json
import os
import re
import subprocess
import sys

daemon, ctl, panel, src = sys.argv[1:5]


def run(*argv):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    return r.stdout + r.stderr


# The table: name -> {"args": [(NAME, key, kind)], "panel": bool}.
table = {}
for line in run(daemon, "--help-commands").splitlines()[1:]:
    name, args, _time, _modes, panel_col = line.split()
    table[name] = {
        "args": [] if args == "-" else [tuple(a.split(":")) for a in args.split(",")],
        "panel": panel_col == "yes",
    }
served = sorted(n for n, c in table.items() if c["panel"])
# Words of a command that are shmclockctl's own, not the request's: record's
# FILE is made by shmclockctl and passed open (SCM_RIGHTS), never sent.
OWN_WORDS = {"record": ["FILE"]}

results = []


def result(ok, msg, detail=()):
    results.append((ok, msg + ("" if ok else "; " + "; ".join(detail))))


def request(name):
    """The request shmclockctl(1) shows for @name: {"cmd":"NAME","key":NAME...}."""
    return "{" + ",".join(['"cmd":"%s"' % name] + ['"%s":%s' % (k, m) for m, k, _ in
                                                   table[name]["args"]]) + "}"


# shmclockctl --help: "  NAME  [OPTIONS] ARGS...  help", its own commands too.
helptext = run(ctl, "--help")
lines = helptext.split("commands:")[1].split("\n\n")[0].splitlines()
ctl_cmds = {l.split()[0]: l.split()[1:] for l in lines if l.startswith("  ")}
bad = []
for name, c in table.items():
    metas = [m for m, _, _ in c["args"]]
    usage = run(ctl, name, "--help").splitlines()[0].split()
    words = usage[usage.index(name) + 1:] if name in usage else None
    own_words = OWN_WORDS.get(name, [])
    if name not in ctl_cmds or words is None or \
            [w for w in words if w[0] != "[" and w not in own_words] != metas:
        bad.append("%s %s" % (name, " ".join(metas)))
result(bool(table) and not bad, "shmclockctl --help lists the table's %d commands, each with "
       "its arguments" % len(table), ["not so: " + " | ".join(bad)])
own = sorted(set(ctl_cmds) - set(table))

# shmclockctl(1) as rendered: entries are lines indented by 7 under COMMANDS.
with open(os.path.join(src, "doc", "shmclockctl.1.txt"), encoding="utf-8") as f:
    page = f.read()
section = page.split("\nCOMMANDS\n")[1]
section = re.split(r"\n[A-Z][A-Z ]+\n", section)[0]
heads = {}  # an entry: its head indented by 7, its body by 11 under it
sl = section.splitlines()
for l, nxt in zip(sl, sl[1:]):
    m = re.match(r"^ {7}([a-z][a-z-]*)((?: \S+)*)$", l)
    if m and re.match(r"^ {11}\S", nxt):
        heads[m.group(1)] = m.group(2).split()
bad = []
for name, c in table.items():
    metas = [m for m, _, _ in c["args"]]
    words = heads.get(name)
    if words is None or [w for w in words if not w.startswith("[") and
                         w not in OWN_WORDS.get(name, [])] != metas:
        bad.append("%s %s" % (name, " ".join(metas)))
result(not bad, "doc/shmclockctl.1.txt has an entry per command, its arguments in order",
       ["missing or other: " + " | ".join(bad)])
text = re.sub(r"\s+", " ", section)
bad = [request(n) for n in table if request(n) not in text]
result(not bad, "doc/shmclockctl.1.txt shows each command's request, its keys in order",
       ["not shown: " + " ".join(bad)])
extra = sorted(set(heads) - set(table) - set(own))
result(not extra, "doc/shmclockctl.1.txt has no entry for a command neither the table nor "
       "shmclockctl (%s) has" % " ".join(own), ["extra: " + " ".join(extra)])

# Requests in the docs' sources: {"cmd":...} objects, markup and all.
docs = (glob.glob(os.path.join(src, "doc", "man", "*.scd")) +
        glob.glob(os.path.join(src, "doc", "*.md")) + [os.path.join(src, "README.md")])
bad = []
seen = 0
for path in sorted(docs):
    with open(path, encoding="utf-8") as f:
        body = f.read()
    for obj in re.findall(r'\{[^{}\n]*"cmd"\s*:\s*"[^"]*"[^{}\n]*\}', body):
        seen += 1
        name = re.search(r'"cmd"\s*:\s*"([^"]*)"', obj).group(1)
        keys = set(re.findall(r'"(\w+)"\s*:', obj))
        where = "%s: %s" % (os.path.relpath(path, src), obj)
        if "clock" in keys:  # a panel request
            if name not in served or not keys <= {"clock", "cmd", "arg"}:
                bad.append(where)
        elif name not in table or not keys <= {"v", "cmd"} | {k for _, k, _ in
                                                            table[name]["args"]}:
            bad.append(where)
result(seen > 0 and not bad, "the %d requests the docs show are the table's commands with "
       "their keys" % seen, ["not so: " + " | ".join(bad)])

# The panel.
if panel == "-":
    results.append((True, "# SKIP shmclock-panel not built"))
else:
    h = re.sub(r"\s+", " ", run(panel, "--help"))
    m = re.search(r"serve POST /api/control \(([^)]*)\)", h)
    listed = sorted(re.findall(r"[a-z]+", m.group(1).replace(" or ", ", "))) if m else []
    result(listed == served, "shmclock-panel --help names the %d commands the table gives the "
           "panel" % len(served), ["it names: " + " ".join(listed)])
with open(os.path.join(src, "doc", "man", "shmclock-panel.1.scd"), encoding="utf-8") as f:
    man = f.read()
for title, pat in (("*--control*", r"\n\*--control\*\n(.*?)\n\n"),
                   ("*POST /api/control*", r"\n\*POST /api/control\*\n(.*?)\n\n")):
    m = re.search(pat, man, re.S)
    entry = m.group(1) if m else ""
    if title.startswith("*POST"):
        entry = entry.split("*cmd* is", 1)[-1].split("*arg*", 1)[0]
    else:
        entry = entry.split("Serve *POST /api/control*:", 1)[-1].split("through", 1)[0]
    named = sorted(set(re.findall(r"[a-z]+", entry)) & set(table))
    result(named == served, "shmclock-panel(1)'s %s entry names the commands the panel serves"
           % title, ["it names: " + " ".join(named)])
with open(os.path.join(src, "shmclockd", "panel", "static", "panel.js"), encoding="utf-8") as f:
    js = f.read()
sent = set(re.findall(r"\b(?:btn|send)\([^()]*'([a-z]+)'", js))
missing = sorted(set(served) - sent)
result(not missing, "the panel's page has a control sending each of them",
       ["no control for: " + " ".join(missing)])

for n, (ok, msg) in enumerate(results, 1):
    print(("ok" if ok else "not ok"), n, "-", msg)
print("1..%d" % len(results))
sys.exit(0 if all(ok for ok, _ in results) else 1)
