# SPDX-License-Identifier: MIT
"""A daemon's status against its one table (shmclockd/status_fields.h, as
`shmclockd --help-status` prints it): every field the status carries is a
row of the table, of the table's kind, and every row of the status's mode
that is not marked "sometimes" is there. The e2e tests of each mode (plain,
lockstep, a hosts leader and follower) call check() on a status they read.

    table = status_schema.load(SHMCLOCKD)
    problems = status_schema.check(reply["status"], table)   # [] when it agrees
"""
import collections
import subprocess

Field = collections.namedtuple("Field", "path kind unit modes sometimes metric help")


def load(shmclockd):
    """path -> Field, from `shmclockd --help-status`."""
    out = subprocess.run([shmclockd, "--help-status"], capture_output=True, text=True,
                         timeout=30, check=True).stdout
    table = {}
    for line in out.splitlines()[1:]:
        if not line.strip():
            break
        path, kind, unit, modes, rest = line.split(None, 4)
        metric, help_ = rest.split(": ", 1)
        ms = set(modes.split(","))
        if "all" in ms:
            ms |= {"plain", "lockstep", "leader", "follower"}
        table[path] = Field(path, kind, unit, ms - {"sometimes", "all"}, "sometimes" in ms,
                            None if metric == "-" else metric, help_)
    return table


def mode_of(status):
    if "lockstep" in status:
        return "lockstep"
    if "distribute" in status:
        return status["distribute"].get("role", "?")
    return "plain"


KINDS = {
    "text": lambda v: isinstance(v, str),
    "bool": lambda v: isinstance(v, bool),
    "gauge": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "counter": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0,
    "object": lambda v: isinstance(v, dict),
    "list": lambda v: isinstance(v, list),
    "by-reason": lambda v: isinstance(v, dict),
    "histogram": lambda v: isinstance(v, list),
}


def check(status, table):
    """The ways @status (the reply's "status" object) differs from @table."""
    mode = mode_of(status)
    problems = []

    def walk(obj, prefix):
        for k, v in obj.items():
            path = prefix + k
            f = table.get(path)
            if f is None:
                problems.append("%s: in the status, not in the table" % path)
                continue
            if mode not in f.modes:
                problems.append("%s: in a %s's status, the table says %s only"
                                % (path, mode, ",".join(sorted(f.modes))))
            if not KINDS[f.kind](v):
                problems.append("%s: %r is not a %s" % (path, v, f.kind))
            elif f.kind == "object":
                walk(v, path + ".")
            elif f.kind == "list":
                for e in v:
                    walk(e, path + "[].")
        # Rows of this object for this mode, always there.
        section = prefix[:-1]
        for f in table.values():
            sec, _, key = f.path.rpartition(".")
            if sec == section and mode in f.modes and not f.sometimes and key not in obj:
                problems.append("%s: a row for %s, not in the status" % (f.path, mode))

    walk(status, "")
    return problems
