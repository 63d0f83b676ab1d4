#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""shmclock-panel in a real browser (issue 34): headless Chromium under
Selenium (Debian: chromium, chromium-driver, python3-selenium) loads the
panel of a running lockstep clock with three participants:

- the displayed time moves; the participants' rows appear;
- with --control and the token, clicking Pause pauses the clock (checked
  with shmclockctl status) and the displayed time stops;
- a read-only panel shows no controls, and what its page can forge against
  the controlling panel (a request without the token, the token in a cookie,
  which the browser sends to every port of 127.0.0.1) is refused and leaves
  the clock running.
A screenshot goes to BUILD_DIR/panel.png (the README's doc/panel.png is a
copy). usage: panel_browser.py BUILD_DIR. Exit 77 (skipped) without
Selenium or chromedriver, saying which.
"""
import os
import shutil
import signal
import sys
import time

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
except ImportError:
    print("1..0 # SKIP python3-selenium is not installed for %s (Debian: python3-selenium)"
          % sys.executable)
    sys.exit(77)

from panelenv import Env, check, finish, running

DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


def browser():
    o = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1280,900", "--no-first-run", "--disable-extensions",
              "--disable-background-networking", "--disable-sync"):
        o.add_argument(a)
    return webdriver.Chrome(service=Service(DRIVER), options=o)


def wait(fn, timeout=20, step=0.1):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            v = fn()
            if v:
                return v
        except Exception:  # the page may still be building the element
            pass
        time.sleep(step)
    return None


def rows(b, holding=False):
    """The participants' rows as {name: background colour of the first
    cell}, read in one script: the page rebuilds the table on every status
    frame, so an element found by one call can be gone by the next
    (StaleElementReferenceException)."""
    return b.execute_script(
        "const out = {};"
        "for (const r of document.querySelectorAll(arguments[0]))"
        "  out[r.dataset.name] = getComputedStyle(r.querySelector('td')).backgroundColor;"
        "return out;", "tr.participant.holding" if holding else "tr.participant")


def sim_text(b, name):
    return b.find_element(By.CSS_SELECTOR, 'section[data-clock="%s"] .sim' % name).text


def main():
    if len(sys.argv) != 2:
        print("usage: panel_browser.py BUILD_DIR", file=sys.stderr)
        sys.exit(2)
    if not os.access(DRIVER, os.X_OK):
        print("1..0 # SKIP no chromedriver (Debian: chromium-driver)")
        sys.exit(77)
    shot = os.path.join(sys.argv[1], "panel.png")
    with Env(participants=3, period_ms=10, work_us=2000, tag="panel-web") as e:
        b = browser()
        try:
            url = "http://127.0.0.1:%d/" % e.port
            b.get(url + "#token=" + e.token)
            t1 = wait(lambda: sim_text(b, e.name) if "s" in sim_text(b, e.name) else None)
            time.sleep(1.0)
            t2 = sim_text(b, e.name)
            check(t1 and t2 and t1 != t2, "the displayed time moves: %s -> %s" % (t1, t2))
            shown = wait(lambda: len(rows(b)) == 3 and rows(b))
            names = sorted(shown or [])
            check(names == e.who, "the participants' rows appear: %s" % names)
            pause = wait(lambda: [x for x in b.find_elements(By.CSS_SELECTOR, 'button[data-cmd="pause"]')
                                  if x.is_displayed()])
            check(bool(pause), "with --control the Pause button is shown")
            # A few seconds of history for the plot; then p1 stops granting
            # (stopped), holds the clock, and its row is highlighted.
            time.sleep(3)
            hold = e.participants[1]
            hold.send_signal(signal.SIGSTOP)
            try:
                held = wait(lambda: list(rows(b, holding=True)) == ["p1"], timeout=10)
                check(held, "a participant that stops granting is shown holding the clock: %s" %
                      list(rows(b, holding=True)))
                bg = rows(b)
                check(bg.get("p1") and bg["p1"] != bg.get("p0") and bg["p1"] != bg.get("p2"),
                      "its row is highlighted: %s" % bg)
                time.sleep(1.5)  # its holding time counts up on the page
                b.save_screenshot(shot)
            finally:
                hold.send_signal(signal.SIGCONT)
            check(os.path.getsize(shot) > 10000, "screenshot written: %s" % shot)
            if pause:
                pause[0].click()
                paused = wait(lambda: (e.status() or {}).get("paused"), timeout=10)
                check(paused, "clicking Pause pauses the clock (shmclockctl status)")
                time.sleep(0.5)
                p1 = sim_text(b, e.name)
                time.sleep(1.0)
                p2 = sim_text(b, e.name)
                check(p1 == p2, "and the displayed time stops: %s, %s" % (p1, p2))
                state = b.find_element(By.CSS_SELECTOR, 'section[data-clock="%s"] .state' % e.name).text
                check(state.lower() == "paused", "the state shown is %s" % state)
                b.find_element(By.CSS_SELECTOR, 'button[data-cmd="resume"]').click()
                check(wait(lambda: not (e.status() or {"paused": True})["paused"], timeout=10),
                      "Resume lets it run again")

            ro = e.panel(False)
            b.get("http://127.0.0.1:%d/" % ro)
            wait(lambda: "s" in sim_text(b, e.name))
            time.sleep(1.5)  # a full frame (status) has arrived
            shown = [x for x in b.find_elements(By.CSS_SELECTOR, "button[data-cmd]") if x.is_displayed()]
            check(not shown and not b.find_element(By.ID, "tokenform").is_displayed(),
                  "a panel without --control shows no controls (%d buttons)" % len(shown))
            # Forgeries from this page (another origin: another port) against
            # the controlling panel.
            target = url + "api/control"
            body = '{"clock":"%s","cmd":"pause"}' % e.name
            results = {}
            for what, script in [
                ("no token", "fetch(arguments[0], {method: 'POST', mode: 'no-cors', body: arguments[1]})"),
                ("the token in a cookie",
                 "document.cookie = 'X-Shmclock-Token=' + arguments[2] + '; path=/'; "
                 "fetch(arguments[0], {method: 'POST', mode: 'no-cors', credentials: 'include', body: arguments[1]})"),
                ("the token header (CORS preflight)",
                 "fetch(arguments[0], {method: 'POST', headers: {'X-Shmclock-Token': arguments[2]}, body: arguments[1]})"),
            ]:
                results[what] = b.execute_async_script(
                    "const done = arguments[arguments.length - 1];" + script +
                    ".then(r => done('status ' + r.status), e => done('error ' + e));",
                    target, body, e.token)
            time.sleep(0.3)
            st = e.status()
            check(st and not st["paused"] and running(e),
                  "forged requests from another page are refused and the clock keeps running: %s" % results)
        finally:
            b.quit()
    finish()


if __name__ == "__main__":
    main()
