#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""shmclock-run's supervisor (issue 33): what must hold beside the waits
(those are in preload_apps.py).

  child-killed     a static program under the supervisor runs a dynamic
                   `sleep 100`; the sleep is killed: the program sees it
                   die, ends, and shmclock-run exits with its status;
                   nothing is left stopped or traced;
  supervisor-killed  the tracer (shmclock-run's child, the program's
                   parent) is killed while the tree waits: every process
                   of the tree dies with it (none is left to run with time
                   calls nobody answers), and shmclock-run ends;
  sigterm-passed-on  a SIGTERM to shmclock-run goes on to the program,
                   which dies of it, and shmclock-run with it at once,
                   while the program's orphan (sleep) still runs, still
                   supervised;
  group-signals    SIGTERM, SIGHUP, SIGINT and SIGUSR1 to the whole group
                   reach a static program's handler once; it finishes, and
                   its exit status is shmclock-run's (issue 52);
  signals-to-shmclock-run  SIGINT, SIGTERM and SIGQUIT to shmclock-run
                   alone reach the handler once (SIGINT was lost);
  under-timeout    timeout --preserve-status around it: the same;
  runner-killed    kill -9 of shmclock-run leaves nothing of the tree;
  ptrace-denied    a supervisor inside the tree of another cannot trace
                   (a traced process's child cannot PTRACE_TRACEME): a
                   clear error, exit 126, the program never runs;
  no-supervise     --no-supervise refuses a static program, exit 126;
  signal-between-slices  a 5 s nanosleep with a SIGUSR1 handler on a
                   paused clock; the tracer is stopped while a slice runs
                   out, the signal sent then: the sleep ends with EINTR, as
                   the kernel ends it (the handler used to run and the call
                   go on for ever);
  timer-robust     POSIX timers and timerfds as a program may misuse them
                   (preload-static timer_robust): a bound with EAGAIN, bad
                   pointers get EFAULT, a timer deleted by another thread,
                   fork (the child has no POSIX timer, shares the timerfd),
                   exec (the timer is gone); the supervisor goes on serving,
                   and nothing is left of the tree.

Environment: SHMCLOCKD, SHMCLOCKCTL, SHMCLOCK_RUN, PRELOAD_STATIC.
Exit 0 all passed, 1 a failure.
"""
import os
import signal
import subprocess
import sys
import tempfile
import time


def procs_in_session(sid):
    """(pid, state, comm) of the processes in session @sid."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
        except OSError:
            continue
        comm = st[st.index("(") + 1:st.rindex(")")]
        f = st[st.rindex(")") + 2:].split()
        if int(f[3]) == sid:
            out.append((int(d), f[0], comm))
    return out

def left_behind(p):
    """What is still running in @p's session 5 s on: nothing, or a failure."""
    left = wait_for(lambda: not procs_in_session(p.pid), 5) or procs_in_session(p.pid)
    return [] if left is True else ["left behind: %s" % left]


def tree_gone(sid, what):
    """Nothing left of session @sid 5 s after @what (the tree dies with
    its supervisor), and the session ended whatever happened."""
    try:
        left = wait_for(lambda: not procs_in_session(sid), 5)
        if left is not True:
            return ["after %s, left running: %s" % (what, procs_in_session(sid))]
        return []
    finally:
        end_session(sid)


def end_session(sid):
    """SIGKILLs whatever is left of session @sid."""
    try:
        os.killpg(sid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def kill_session(p):
    """Ends whatever is left of @p's session (a failed run's too)."""
    end_session(p.pid)
    p.wait()



def wait_for(pred, secs):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    return pred()


class Clock:
    def __init__(self, env, tmp):
        self.env = env
        self.name = "sup-%d-%d" % (os.getpid(), int(time.monotonic() * 1000) % 100000)
        self.sock = os.path.join(tmp, self.name + ".sock")
        self.p = subprocess.Popen([env["SHMCLOCKD"], "-n", self.name, "--socket", self.sock,
                                   "--scale", "10", "--remove-on-exit"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            if os.path.exists(self.sock) and subprocess.run(
                    [env["SHMCLOCKCTL"], "-n", self.name, "--socket", self.sock, "status"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
                return
            time.sleep(0.02)
        raise RuntimeError("shmclockd did not come up")

    def stop(self):
        self.p.terminate()
        self.p.wait(10)


def run(env, clock, args, environ=None):
    return subprocess.Popen([env["SHMCLOCK_RUN"], "-n", clock.name] + args,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env=environ)


def child_killed(env, clock):
    p = run(env, clock, ["--", env["PRELOAD_STATIC"], "exec", "sleep", "100"])
    fails = []
    try:
        sleep = wait_for(lambda: [x for x in procs_in_session(p.pid) if x[2] == "sleep"], 10)
        if not sleep:
            return ["the supervised tree never ran sleep"]
        os.kill(sleep[0][0], signal.SIGKILL)
        try:
            out, err = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            return ["shmclock-run did not end after the program's child was killed"]
        if p.returncode != 0 or "no-timeout" not in out:
            fails.append("the program did not see its child die and end (exit %d, out %r, "
                         "err %r)" % (p.returncode, out, err))
        fails += left_behind(p)
    finally:
        kill_session(p)
    return fails


def ppid(pid):
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def supervisor_killed(env, clock):
    p = run(env, clock, ["--", env["PRELOAD_STATIC"], "exec", "sleep", "100"])
    sid = p.pid
    try:
        prog = wait_for(lambda: [x for x in procs_in_session(sid) if x[2] == "preload-static"],
                        10)
        if not prog or not wait_for(
                lambda: [x for x in procs_in_session(sid) if x[2] == "sleep"], 10):
            return ["the supervised tree never ran sleep"]
        # The tracer: the program's parent (shmclock-run's child).
        os.kill(ppid(prog[0][0]), signal.SIGKILL)
        try:
            p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            return ["shmclock-run did not end when its tree died"]
        # EXITKILL: the static program dies at once; its child, a dynamic
        # program with the shim's own trap, is killed with it too (traced).
        return tree_gone(sid, "the supervisor died")
    finally:
        end_session(sid)


def sigterm_passed_on(env, clock):
    # SIGTERM to shmclock-run goes to the program (which dies of it, as
    # without the supervisor), and shmclock-run then ends the same way.
    p = run(env, clock, ["--", env["PRELOAD_STATIC"], "exec", "sleep", "100"])
    sid = p.pid
    try:
        if not wait_for(lambda: [x for x in procs_in_session(sid) if x[2] == "sleep"], 10):
            return ["the supervised tree never ran sleep"]
        os.kill(p.pid, signal.SIGTERM)
        try:
            p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            return ["shmclock-run did not end after a SIGTERM"]
        if p.returncode != -signal.SIGTERM:
            return ["shmclock-run ended with %d, not by the SIGTERM its program died of"
                    % p.returncode]
        orphan = [x for x in procs_in_session(sid) if x[2] == "sleep"]
        if not orphan or orphan[0][1] in "tT":
            return ["the program's orphan is not running on (%s)" % procs_in_session(sid)]
        return []
    finally:
        end_session(sid)


def handler_run(env, clock, prefix=()):
    """shmclock-run of preload-static's handler mode, started in a session
    of its own (behind @prefix, e.g. timeout); returns it once the program
    said "ready" (its handlers are in place), or None."""
    p = subprocess.Popen(list(prefix) + [env["SHMCLOCK_RUN"], "-n", clock.name, "--",
                                         env["PRELOAD_STATIC"], "handler"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    if p.stdout.readline().strip() != "ready":
        kill_session(p)
        return None
    return p


def handled(p, sig, what):
    """The program's end after @sig: its handler ran once and its own exit
    status (40 + the signal) is what the caller got."""
    try:
        out, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        return ["%s: the program never ended (its handler never ran?)" % what]
    fails = []
    n = [int(x.split()[1]) for x in out.splitlines() if x.startswith("handled ")]
    if n != [1]:
        fails.append("%s: the handler ran %s times, not once (out %r)" % (what, n or "no", out))
    if p.returncode != 40 + sig:
        fails.append("%s: exit %d, not the program's %d (err %r)"
                     % (what, p.returncode, 40 + sig, err.strip()[-300:]))
    return fails


def group_signals(env, clock):
    """Issue 52: a signal to the whole process group (a service manager's
    stop, a closing terminal, killpg) reaches a static program once, and
    its handler finishes: shmclock-run exits with the program's status.
    Before, the tracer (in the same group, SIGTERM and SIGHUP at their
    default action) died first, and PTRACE_O_EXITKILL killed the program:
    exit 126 ("the supervisor ended before the program")."""
    fails = []
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGUSR1):
        p = handler_run(env, clock)
        if not p:
            fails.append("the handler program did not start")
            continue
        try:
            os.killpg(p.pid, sig)
            fails += handled(p, sig, "killpg %s" % sig.name)
            fails += left_behind(p)
        finally:
            kill_session(p)
    return fails


def signals_to_shmclock_run(env, clock):
    """A harness's signal to the pid it started (Popen.send_signal): the
    program gets it once, and exits as it chooses. Before, SIGINT to
    shmclock-run alone was lost for a static program (dynamic ones got
    it)."""
    fails = []
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT):
        p = handler_run(env, clock)
        if not p:
            fails.append("the handler program did not start")
            continue
        try:
            p.send_signal(sig)
            fails += handled(p, sig, "%s to shmclock-run" % sig.name)
        finally:
            kill_session(p)
    return fails


def under_timeout(env, clock):
    """GNU timeout signals the command and then its whole group (as when
    the time runs out: here timeout is told to, once the program is ready,
    so that nothing depends on the machine's speed); with
    --preserve-status the program's own status comes back."""
    p = handler_run(env, clock, ["timeout", "--preserve-status", "600"])
    if not p:
        return ["the handler program did not start under timeout"]
    try:
        p.send_signal(signal.SIGTERM)  # timeout passes it on to its command and group
        return handled(p, signal.SIGTERM, "timeout") + left_behind(p)
    finally:
        kill_session(p)


def runner_killed(env, clock):
    """kill -9 of the pid a harness started (Popen.kill(), a CI timeout):
    nothing of the tree is left. Before, the tracer (re-parented to init)
    and the program ran on for ever."""
    p = run(env, clock, ["--", env["PRELOAD_STATIC"], "exec", "sleep", "100"])
    sid = p.pid
    try:
        if not wait_for(lambda: [x for x in procs_in_session(sid) if x[2] == "sleep"], 10):
            return ["the supervised tree never ran sleep"]
        p.kill()
        p.wait()
        return tree_gone(sid, "kill -9 of shmclock-run")
    finally:
        end_session(sid)


def ptrace_denied(env, clock):
    # The inner shmclock-run is traced (it runs in the outer tree): the
    # child it forks is traced by the outer supervisor, so its
    # PTRACE_TRACEME fails (EPERM), as under YAMA or a container.
    # The inner shmclock-run loads the shim (it is dynamic, in a tree whose
    # environment preloads it): in a sanitizer build its ASan runtime is
    # then not first, which ASan accepts when told.
    p = run(env, clock, ["--", env["PRELOAD_STATIC"], "exec", env["SHMCLOCK_RUN"], "-n",
                         clock.name, "--", env["PRELOAD_STATIC"], "nanosleep"],
            environ=dict(os.environ, ASAN_OPTIONS=(os.environ.get("ASAN_OPTIONS", "") +
                                                   ":verify_asan_link_order=0").lstrip(":")))
    try:
        out, err = p.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        kill_session(p)
        return ["the nested supervisor did not end"]
    fails = []
    if "must run under ptrace, which this system denies" not in err:
        fails.append("no clear error when ptrace is denied: %r" % err)
    if out.count("ready") != 1:
        fails.append("the inner program ran although it could not be supervised: %r" % out)
    if "no-timeout" not in out:
        fails.append("the outer program did not see the inner shmclock-run fail: %r" % out)
    return fails


def no_supervise(env, clock):
    p = run(env, clock, ["--no-supervise", "--", env["PRELOAD_STATIC"], "nanosleep"])
    out, err = p.communicate(timeout=20)
    if p.returncode != 126 or "statically linked" not in err or "ready" in out:
        return ["--no-supervise did not refuse the static program (exit %d, %r)"
                % (p.returncode, err)]
    return []


def ctl(env, clock, cmd):
    subprocess.run([env["SHMCLOCKCTL"], "-n", clock.name, "--socket", clock.sock, cmd],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)


def signal_between_slices(env, clock):
    ctl(env, clock, "pause")
    p = run(env, clock, ["--", env["PRELOAD_STATIC"], "eintr_wait"])
    tracer = None
    try:
        prog = wait_for(lambda: [x for x in procs_in_session(p.pid)
                                 if x[2] == "preload-static"], 10)
        if not prog or "ready" not in p.stdout.readline():
            return ["the program never got to its wait"]
        time.sleep(0.2)  # in its nanosleep, slice after slice (paused)
        tracer = ppid(prog[0][0])
        os.kill(tracer, signal.SIGSTOP)
        time.sleep(0.1)  # a 20 ms slice runs out: the program stops for its tracer
        os.kill(prog[0][0], signal.SIGUSR1)
        time.sleep(0.05)
        os.kill(tracer, signal.SIGCONT)
        tracer = None
        try:
            out, err = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            return ["the nanosleep did not end with EINTR: the handler ran and the call went on "
                    "(the clock is paused)"]
        if not out.rstrip().endswith(" timeout"):
            return ["the nanosleep did not end with EINTR: %r %r" % (out, err)]
        return left_behind(p)
    finally:
        if tracer:
            os.kill(tracer, signal.SIGCONT)
        kill_session(p)
        ctl(env, clock, "resume")


def timer_robust(env, clock):
    p = run(env, clock, ["--", env["PRELOAD_STATIC"], "timer_robust"])
    fails = []
    try:
        try:
            out, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            return ["preload-static timer_robust did not end in 60 s"]
        if p.returncode != 0 or "robust ok" not in out:
            fails.append("exit %d: %s %s" % (p.returncode, out.strip(), err.strip()))
        fails += left_behind(p)
    finally:
        kill_session(p)
    return fails


def small_stack(env, clock):
    """A static program whose initial stack ends a few hundred bytes above
    its stack pointer (no environment, no randomization): the supervisor
    still finds and hides its vDSO. It read every page up to 32 KiB or
    nothing, and missed it whenever fewer than 1 KiB were left: 7 % of
    `shmclock-run -- date` in a container, each time here."""
    r = subprocess.run(["setarch", os.uname().machine, "-R", "env", "-i", env["SHMCLOCK_RUN"],
                        "-n", clock.name, "--", env["PRELOAD_STATIC"], "nanosleep"],
                       capture_output=True, text=True, timeout=60)
    done = [l.split() for l in r.stdout.splitlines() if l.startswith("done ")]
    if r.returncode != 0 or not done or done[0][3] != "timeout" or \
            int(done[0][2]) - int(done[0][1]) < 4_500_000_000:
        return ["its 5 s sleep measured by the vDSO it should not see (exit %d): %s %s"
                % (r.returncode, r.stdout.strip(), r.stderr.strip()[-200:])]
    return []


def main():
    need = ["SHMCLOCKD", "SHMCLOCKCTL", "SHMCLOCK_RUN", "PRELOAD_STATIC"]
    missing = [k for k in need if not os.environ.get(k)]
    if missing:
        print("preload_supervise.py: set %s" % ", ".join(missing), file=sys.stderr)
        return 2
    env = {k: os.environ[k] for k in need}
    failures = 0
    with tempfile.TemporaryDirectory(prefix="shmclock-sup.") as tmp:
        clock = Clock(env, tmp)
        try:
            for name, fn in (("child-killed", child_killed),
                             ("supervisor-killed", supervisor_killed),
                             ("sigterm-passed-on", sigterm_passed_on),
                             ("group-signals", group_signals),
                             ("signals-to-shmclock-run", signals_to_shmclock_run),
                             ("under-timeout", under_timeout),
                             ("runner-killed", runner_killed),
                             ("ptrace-denied", ptrace_denied), ("no-supervise", no_supervise),
                             ("signal-between-slices", signal_between_slices),
                             ("timer-robust", timer_robust), ("small-stack", small_stack)):
                f = fn(env, clock)
                for line in f:
                    print("FAIL %s: %s" % (name, line))
                if not f:
                    print("ok %s" % name)
                failures += len(f)
        finally:
            clock.stop()
    print("%d failures" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
