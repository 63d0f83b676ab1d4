#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""shmclock-panel scraped by a real Prometheus server (issue 34): the test
starts /usr/bin/prometheus (Debian: prometheus) on 127.0.0.1 with a
temporary data directory and a scrape config pointing at the panel of a
lockstep clock with three participants, every second. After two scrapes,
PromQL over the HTTP API returns the clock's scale, a rising simulated
time and per-participant waiting seconds. Exit 77 (skipped) without
prometheus, saying so.
"""
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request

from panelenv import Env, check, finish

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def query(port, q, **extra):
    args = dict(extra, query=q)
    path = "/api/v1/query_range" if "start" in extra else "/api/v1/query"
    url = "http://127.0.0.1:%d%s?%s" % (port, path, urllib.parse.urlencode(args))
    with urllib.request.urlopen(url, timeout=10) as r:
        j = json.load(r)
    return j["data"]["result"] if j.get("status") == "success" else None


def main():
    if not os.access(PROMETHEUS, os.X_OK):
        print("1..0 # SKIP no prometheus server (Debian: prometheus)")
        raise SystemExit(77)
    with Env(participants=3, period_ms=10, tag="panel-prom") as e:
        port = free_port()
        cfg = os.path.join(e.tmp, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "scrape_configs:\n  - job_name: shmclock\n    static_configs:\n"
                    "      - targets: ['127.0.0.1:%d']\n" % e.port)
        log = open(os.path.join(e.tmp, "prometheus.log"), "w")
        prom = subprocess.Popen([PROMETHEUS, "--config.file=" + cfg,
                                 "--storage.tsdb.path=" + os.path.join(e.tmp, "data"),
                                 "--web.listen-address=127.0.0.1:%d" % port],
                                stdout=log, stderr=subprocess.STDOUT)
        e.procs.append(prom)
        sel = '{clock="%s"}' % e.name
        up = scale = None
        for _ in range(120):
            time.sleep(0.5)
            try:
                up = query(port, "up" + '{job="shmclock"}')
                scale = query(port, "shmclock_scale" + sel)
                n = query(port, "count_over_time(shmclock_scale%s[1m])" % sel)
            except OSError:
                continue
            if scale and n and float(n[0]["value"][1]) >= 2:
                break
        check(up and up[0]["value"][1] == "1", "Prometheus scrapes the panel (up = %s)" %
              (up[0]["value"][1] if up else None))
        check(scale and float(scale[0]["value"][1]) == 1.0,
              "shmclock_scale%s = %s" % (sel, scale[0]["value"][1] if scale else None))
        now = time.time()
        r = query(port, "shmclock_simulated_time_seconds" + sel, start=now - 60, end=now, step=1)
        vals = [float(v) for _, v in r[0]["values"]] if r else []
        check(len(vals) >= 2 and vals[-1] > vals[0] and vals == sorted(vals),
              "shmclock_simulated_time_seconds rises over the scrapes: %s" % vals[-4:])
        r = query(port, "shmclock_lockstep_waiting_seconds_total" + sel)
        waits = {x["metric"].get("participant"): float(x["value"][1]) for x in r or []}
        check(sorted(waits) == e.who and all(v > 0 for v in waits.values()),
              "shmclock_lockstep_waiting_seconds_total per participant: %s" % waits)
        r = query(port, "histogram_quantile(0.99, shmclock_tick_lateness_seconds_bucket%s)" % sel)
        check(r is not None, "histogram_quantile over the tick lateness is a valid query (%s)" %
              (r[0]["value"][1] if r else "no ticks"))
    finish()


if __name__ == "__main__":
    main()
