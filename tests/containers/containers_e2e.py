#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The clock shared with programs in containers (issue 56), in a real
container runtime: Podman (Debian's) with runc, as root, an image made
here without a registry (`podman import` of a root file system: Debian's
busybox-static, the build's programs and libraries at their relative
places, Python 3 with the modules it loads). The daemon runs on the host;
each container is given the clock's file (a bind mount, read-only) and,
where it controls the clock, the control socket's directory.

- a reader in a container follows pause, set, scale and resume;
- a shmclock-wait blocked in a container (a futex in the shared page) is
  woken by a set on the host;
- shmclock-run -- date (busybox's: static, so under the supervisor), a
  Python program and a C++ one read the clock;
- shmclockctl in a container controls the host's clock through the
  bind-mounted socket;
- a lockstep participant in a container holds the host's clock, and its
  death (podman kill) is seen; one given only the clock's file says which
  file is missing; a C# participant (Mono) steps the clock;
- a container with a user namespace (--uidmap, as Podman rootless and
  Docker's userns-remap run them): the host's clock is refused as owned
  by a user outside the namespace, and believed with SHMCLOCK_TRUST=outside
  where the map leaves the overflow uid out; a clock the container's root
  forges (a copy of the segment) is refused to its user 1000, with and
  without SHMCLOCK_TRUST=outside, and as a copy (stale) when it trusts
  the container's root; its root cannot use the host root's
  control socket, and can with ControlGroup set to the host gid it maps
  to (its user 1000 still cannot);
- rootless Podman (as the user .ci/setup makes): the host's clock refused
  with the usual map, believed with --uidmap 0:0:65534 and
  SHMCLOCK_TRUST=outside;
- Docker (a dockerd of the test's own) and docker-compose: the docker run
  lines and the compose file of doc/containers.md;
- doc/containers.md's podman run lines, run as written.

Root; Podman, runc and busybox-static (.ci/setup installs them): exit 77
with the reason otherwise. Environment: SHMCLOCKD, SHMCLOCKCTL, BUILD_ROOT
(the build directory), SOURCE_ROOT, PYTHON_MODULE (the built module's
directory).
"""
import glob
import json
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hosts"))
from hostsenv import check, ctl_at, remove, run, skip, start_daemon, wait_for  # noqa: E402

SHMCLOCKD = os.environ["SHMCLOCKD"]
BUILD = os.path.realpath(os.environ["BUILD_ROOT"])
SOURCE = os.path.realpath(os.environ["SOURCE_ROOT"])
PYMOD = os.path.realpath(os.environ["PYTHON_MODULE"])
RUN = "%d-%d" % (os.getpid(), random.randrange(1 << 20))
IMAGE = "localhost/shmclock-test-%s" % RUN
procs = {}
clocks = []
containers = []
groups = []
dockerd = []
CLOCK = []  # the run's clock, for local()
rootless = []
# Inside the image, the build's files keep their places relative to each
# other (RUNPATH $ORIGIN/../libshmclock; shmclock-run finds its shim
# beside itself).
OPT = "/opt/shmclock"

if os.geteuid():
    skip("needs root: rootful Podman, and containers with user namespaces")
for tool in ("podman", "runc"):
    if not shutil.which(tool):
        skip("%s is not installed (apt-get install podman runc)" % tool)
if not os.path.exists("/bin/busybox"):
    skip("busybox-static is not installed (apt-get install busybox-static)")

rtdir = tempfile.mkdtemp(prefix="shmclock-ctr-")
os.chmod(rtdir, 0o755)

# What `podman run` needs on this kind of machine: runc (crun fails on a
# hybrid cgroup hierarchy), and resource limits no higher than this
# process's (the machine lacks CAP_SYS_RESOURCE: raising them fails).
import resource  # noqa: E402


def limits():
    out = []
    for name, res, cap in (("nofile", resource.RLIMIT_NOFILE, 1 << 20),
                           ("nproc", resource.RLIMIT_NPROC, 32768)):
        soft, hard = resource.getrlimit(res)
        v = min(x for x in (hard, cap) if x != resource.RLIM_INFINITY)
        out += ["--ulimit", "%s=%d:%d" % (name, v, v)]
    return out


PODMAN = ["podman", "run", "--rm", "--runtime", "runc", "--network", "none"] + limits()


def ldd(path):
    r = subprocess.run(["ldd", path], capture_output=True, text=True)
    libs = re.findall(r"(/\S+) \(0x", r.stdout)
    return [l for l in libs]


def put(root, src, dest=None):
    """@src (a file) into the image at @dest (default: the same path), its
    shared libraries at their own paths."""
    dest = dest or src
    target = os.path.join(root, dest.lstrip("/"))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if not os.path.exists(target):
        shutil.copy2(os.path.realpath(src), target)
    for lib in ldd(src):
        t = os.path.join(root, lib.lstrip("/"))
        if not os.path.exists(t):
            os.makedirs(os.path.dirname(t), exist_ok=True)
            shutil.copy2(os.path.realpath(lib), t)


PY_PROBE = "import shmclock, json, sys, os, time, errno, ctypes\n"


def make_image():
    root = os.path.join(rtdir, "rootfs")
    os.makedirs(root)
    for d in ("bin", "tmp", "dev/shm", "run/shmclock", "proc", "sys", "etc", "usr/bin"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    os.chmod(os.path.join(root, "tmp"), 0o1777)
    shutil.copy2("/bin/busybox", os.path.join(root, "bin/busybox"))
    for applet in ("sh", "date", "sleep", "cat", "ls", "id", "cp", "echo", "kill", "test", "true",
                   "stat", "env"):
        os.symlink("busybox", os.path.join(root, "bin", applet))
    with open(os.path.join(root, "etc/passwd"), "w") as f:
        f.write("root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/tmp:/bin/sh\n"
                "nobody:x:65534:65534:nobody:/:/bin/sh\n")
    with open(os.path.join(root, "etc/group"), "w") as f:
        f.write("root:x:0:\nuser:x:1000:\nnogroup:x:65534:\n")
    for var in ("SHMCLOCK_CAT", "SHMCLOCK_WAIT", "SHMCLOCK_RUN", "SHMCLOCK_PRELOAD",
                "SHMCLOCK_SENSOR", "SHMCLOCKCTL", "LS_PARTICIPANT", "SHMCLOCKD"):
        path = os.path.realpath(os.environ[var])
        put(root, path, os.path.join(OPT, os.path.relpath(path, BUILD)))
    for lib in glob.glob(os.path.join(BUILD, "libshmclock", "libshmclock.so*")):
        if os.path.isfile(lib):
            put(root, lib, os.path.join(OPT, "libshmclock", os.path.basename(lib)))
    for var in ("SHMCLOCK_CAT", "SHMCLOCK_WAIT", "SHMCLOCK_RUN", "SHMCLOCK_SENSOR", "SHMCLOCKCTL",
                "SHMCLOCKD"):
        path = os.path.realpath(os.environ[var])
        os.symlink(os.path.join(OPT, os.path.relpath(path, BUILD)),
                   os.path.join(root, "usr/bin", os.path.basename(path)))
    if os.environ.get("CXX_READER"):
        path = os.path.realpath(os.environ["CXX_READER"])
        put(root, path, os.path.join(OPT, os.path.relpath(path, BUILD)))
    # C#: Mono and the class library files a participant loads (what strace
    # shows mono opening), the assembly and its native helper.
    if os.environ.get("LS_PARTICIPANT_CS"):
        put(root, os.path.realpath(os.environ["MONO"]), "/usr/bin/mono")
        for pattern in ("/etc/mono/config", "/usr/lib/mono/4.5/mscorlib.dll",
                        "/usr/lib/mono/gac/System/4.0.0.0__*/System.dll",
                        "/usr/lib/mono/gac/System.Core/4.0.0.0__*/System.Core.dll"):
            for f in glob.glob(pattern):
                os.makedirs(os.path.dirname(os.path.join(root, f.lstrip("/"))), exist_ok=True)
                shutil.copy2(f, os.path.join(root, f.lstrip("/")))
        cs = os.path.realpath(os.environ["CSHARP_DIR"])
        for f in ("Shmclock.dll", "Shmclock.dll.config", "libshmclock-mono.so"):
            put(root, os.path.join(cs, f), os.path.join(OPT, os.path.relpath(cs, BUILD), f))
        exe = os.path.realpath(os.environ["LS_PARTICIPANT_CS"])
        put(root, exe, os.path.join(OPT, os.path.relpath(exe, BUILD)))
    # Python: Debian's interpreter, the modules a program of ours loads,
    # and the built module (as python3-shmclock installs it).
    py = os.path.realpath("/usr/bin/python3")
    put(root, py, "/usr/bin/python3")
    probe = subprocess.run(
        [py, "-c", PY_PROBE + "print(json.dumps(sorted({getattr(m, '__file__', None) or '' "
         "for m in list(sys.modules.values())} - {''})))"],
        capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=PYMOD))
    files = json.loads(probe.stdout)
    pylib = subprocess.run([py, "-c", "import os; print(os.path.dirname(os.__file__))"],
                           capture_output=True, text=True).stdout.strip()
    for f in files:
        if f.startswith(pylib + "/"):
            t = os.path.join(root, f.lstrip("/"))
            os.makedirs(os.path.dirname(t), exist_ok=True)
            shutil.copy2(f, t)
            if f.endswith(".so"):
                put(root, f)
    # os.py's landmark, and the encodings package whole (codecs by name).
    shutil.copytree(os.path.join(pylib, "encodings"), os.path.join(root, pylib.lstrip("/"),
                    "encodings"), dirs_exist_ok=True)
    site = os.path.join(root, "usr/lib/python3/dist-packages/shmclock")
    shutil.copytree(os.path.join(PYMOD, "shmclock"), site,
                    ignore=shutil.ignore_patterns("*.p", "*.o"))
    for so in glob.glob(os.path.join(site, "*.so")):
        put(root, so, so[len(root):])
    tar = subprocess.Popen(["tar", "-C", root, "-c", "."], stdout=subprocess.PIPE)
    r = subprocess.run(["podman", "import", "-", IMAGE], stdin=tar.stdout, capture_output=True,
                       text=True)
    tar.wait()
    if r.returncode:
        raise RuntimeError("podman import: %s" % r.stderr.strip())
    return root


def podman(args, *cmd, timeout=60, **kw):
    """`podman run` of @cmd in the image with @args; the completed process."""
    return subprocess.run(PODMAN + list(args) + [IMAGE] + list(cmd), capture_output=True,
                          text=True, timeout=timeout, **kw)


def seg(name):
    return "/dev/shm/shmclock.%s" % name


def mount_clock(name):
    return ["-v", "%s:%s:ro" % (seg(name), seg(name))]


def ctl(name, cmd, **kw):
    return ctl_at(os.path.join(rtdir, name + ".sock"), cmd, **kw)


def status(name):
    return ctl(name, "status").get("status", {})


def host_ns(name):
    import shmclock
    return shmclock.Clock(name).info().sim_ns


def read_in_container(name, extra=()):
    r = podman(list(mount_clock(name)) + list(extra), "shmclock-cat", "-n", name)
    return r


def follow_phase(name):
    for cmd, kw in [("pause", {}), ("set", {"time": "100s"}), ("scale", {"value": 2}),
                    ("set", {"time": "250s"})]:
        check(ctl(name, cmd, **kw).get("ok"), "host: %s %s" % (cmd, kw))
        r = read_in_container(name)
        check(r.returncode == 0 and r.stdout.strip() == str(host_ns(name)),
              "a reader in a container reads the paused clock after %s: %s (host %d)%s"
              % (cmd, r.stdout.strip(), host_ns(name), r.stderr.strip()[-200:]))
    check(ctl(name, "resume").get("ok"), "host: resume (scale 2)")
    before = host_ns(name)
    r = read_in_container(name)
    after = host_ns(name)
    got = int(r.stdout.strip() or 0)
    check(r.returncode == 0 and before <= got <= after,
          "running at scale 2, the container's reading lies between two of the host's: "
          "%d <= %d <= %d" % (before, got, after))
    check(ctl(name, "pause").get("ok") and ctl(name, "set", time="100s").get("ok"),
          "host: pause, set 100s")


def wait_phase(name):
    """A futex wait in the container, woken by the host."""
    p = subprocess.Popen(PODMAN + mount_clock(name) + [IMAGE, "shmclock-wait", "-n", name,
                                                       "-t", "60s", "200s"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    procs["wait"] = p

    def waiting():
        """Where the waiter sleeps in the kernel (its /proc/PID/wchan, seen
        from the host), once it runs; "" before."""
        want = b"\0".join([b"-n", name.encode(), b"-t"])
        for d in glob.glob("/proc/[0-9]*"):
            try:
                with open(d + "/cmdline", "rb") as f:
                    cmd = f.read()
                if b"shmclock-wait" in cmd.split(b"\0")[0] and want in cmd:
                    with open(d + "/wchan") as f:
                        return f.read()
            except OSError:
                pass
        return ""
    blocked = wait_for(lambda: "futex" in waiting(), 60, 0.1) and p.poll() is None
    t0 = time.monotonic()
    check(ctl(name, "set", time="300s").get("ok"), "host: set 300s")
    try:
        p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
    check(blocked and p.returncode == 0,
          "shmclock-wait 200s in a container, blocked in a futex wait on the paused clock (%s), "
          "is woken by the host's set (exit %s, %.2f s after it)"
          % (blocked, p.returncode, time.monotonic() - t0))


def programs_phase(name, unix_name):
    # The UNIX clock: 2030-01-01T00:00:00Z, paused.
    r = podman(mount_clock(unix_name), "shmclock-run", "-n", unix_name, "--", "date", "-u",
               "+%Y-%m-%dT%H:%M:%S")
    check(r.returncode == 0 and r.stdout.strip() == "2030-01-01T00:00:00",
          "shmclock-run -- date (busybox, static: the supervisor) in a container prints the "
          "clock's paused UNIX time: %r %s" % (r.stdout.strip(), r.stderr.strip()[-200:]))
    # The trap (seccomp, SIGSYS) under the container's own seccomp filter:
    # a raw clock_gettime(CLOCK_REALTIME) system call (228 on x86-64, the
    # trap's architecture), and libc's.
    if os.uname().machine == "x86_64":
        raw = ("import ctypes, time; b = ctypes.create_string_buffer(16); "
               "ctypes.CDLL(None).syscall(228, 0, b); "
               "print(int.from_bytes(b.raw[:8], 'little'), int(time.time()))")
        r = podman(mount_clock(unix_name), "shmclock-run", "-n", unix_name, "--trap", "--",
                   "python3", "-c", raw)
        check(r.returncode == 0 and r.stdout.split() == ["1893456000", "1893456000"],
              "shmclock-run --trap in a container: Python's raw clock_gettime system call and "
              "its time.time() both read 2030-01-01: %r %s"
              % (r.stdout.strip(), r.stderr.strip()[-200:]))
    prog = ("import shmclock; c = shmclock.Clock(%r); i = c.info(); "
            "print(i.sim_ns, i.paused)" % name)
    r = podman(mount_clock(name), "python3", "-c", prog)
    check(r.returncode == 0 and r.stdout.split() == [str(host_ns(name)), "True"],
          "a Python program in a container reads the host's clock: %r %s"
          % (r.stdout.strip(), r.stderr.strip()[-300:]))


def cxx_phase(name):
    if not os.environ.get("CXX_READER"):
        print("# C++: no C++ compiler at build time: not run", flush=True)
        return
    path = os.path.join(OPT, os.path.relpath(os.path.realpath(os.environ["CXX_READER"]), BUILD))
    r = podman(mount_clock(name), path, name)
    check(r.returncode == 0 and r.stdout.strip() == str(host_ns(name)),
          "a C++ program (<shmclock/shmclock.hpp>) in a container reads the host's clock: %r %s"
          % (r.stdout.strip(), r.stderr.strip()[-200:]))


def csharp_phase(ls):
    """A C# lockstep participant (Mono, as Unity's runtime) in a container
    runs the host's lockstep clock to 0.5 s."""
    if not os.environ.get("LS_PARTICIPANT_CS"):
        print("# C#: no Mono build (a sanitizer build, or mono not installed): not run",
              flush=True)
        return
    cs = os.path.join(OPT, os.path.relpath(os.path.realpath(os.environ["CSHARP_DIR"]), BUILD))
    exe = os.path.join(OPT, os.path.relpath(os.path.realpath(os.environ["LS_PARTICIPANT_CS"]),
                                            BUILD))
    mounts = mount_clock(ls) + ["-v", "/dev/shm/shmclock-lockstep.%s:/dev/shm/shmclock-lockstep.%s"
                                % (ls, ls)]
    start = host_ns(ls)
    end = (start // 10_000_000 + 50) * 10_000_000
    r = podman(mounts + ["-e", "MONO_PATH=" + cs, "-e", "LD_LIBRARY_PATH=" + OPT + "/libshmclock"],
               "mono", exe, ls, "cs-boxed", "10000000", str(end), timeout=120)
    check(r.returncode == 0 and "joined" in r.stdout and host_ns(ls) >= end,
          "a C# participant (Mono) in a container steps the host's lockstep clock from %.2f s "
          "to %.2f s (exit %d: %s)" % (start / 1e9, end / 1e9, r.returncode,
                                     (r.stdout + r.stderr).strip()[-200:]))


def control_phase(name):
    sock = ["-v", "%s:/run/shmclock" % rtdir]
    r = podman(sock, "shmclockctl", "--socket", "/run/shmclock/%s.sock" % name, "set", "400s")
    check(r.returncode == 0 and host_ns(name) == 400_000_000_000,
          "shmclockctl in a container sets the host's clock through the mounted socket "
          "(%d: %s)" % (r.returncode, (r.stdout + r.stderr).strip()[-200:]))


def lockstep_phase(ls):
    mounts = mount_clock(ls) + ["-v", "/dev/shm/shmclock-lockstep.%s:/dev/shm/shmclock-lockstep.%s"
                                % (ls, ls)]
    r = podman(mount_clock(ls), os.path.join(OPT, os.path.relpath(os.path.realpath(
        os.environ["LS_PARTICIPANT"]), BUILD)), ls, "early", "10000000", "20000000")
    check(r.returncode == 1 and "participant file" in r.stderr and "mount it" in r.stderr,
          "a participant given only the clock's file says which file is missing: %s"
          % r.stderr.strip()[-240:])
    cname = "shmclock-ls-%s" % RUN
    containers.append(cname)
    p = subprocess.Popen(PODMAN + ["--name", cname] + mounts +
                         [IMAGE, os.path.join(OPT, os.path.relpath(os.path.realpath(
                             os.environ["LS_PARTICIPANT"]), BUILD)), ls, "boxed", "10000000",
                          "1000000000000", "--work-us", "20000"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    procs["ls"] = p
    member = lambda: [m for m in status(ls).get("lockstep", {}).get("members", [])
                      if m.get("name") == "boxed"]
    check(wait_for(lambda: member(), 30, 0.1), "a lockstep participant in a container joins the "
          "host's clock: %s" % member())
    # It holds the clock: each 10 ms step waits for its 20 ms of work, so
    # the clock moves, and never faster than real time (a fixed source
    # runs straight to its next due time when nobody holds it).
    t1, r1 = host_ns(ls), time.monotonic_ns()
    moved = wait_for(lambda: host_ns(ls) >= t1 + 100_000_000, 60, 0.05)
    t2, r2 = host_ns(ls), time.monotonic_ns()
    check(moved and t2 - t1 <= r2 - r1,
          "it holds the clock: %.3f s of simulated time in %.3f s of real time (it works 20 ms "
          "a 10 ms step)" % ((t2 - t1) / 1e9, (r2 - r1) / 1e9))
    subprocess.run(["podman", "kill", cname], capture_output=True, timeout=30)
    p.wait(30)
    check(wait_for(lambda: not member(), 15, 0.1) and
          wait_for(lambda: status(ls).get("lockstep", {}).get("deaths", 0) >= 1, 15, 0.1),
          "its death (podman kill) is seen on the host: no longer a member, deaths %s"
          % status(ls).get("lockstep", {}).get("deaths"))


def userns_phase(name):
    """A container whose root is host uid 100000, with and without the
    overflow uid mapped."""
    narrow = ["--uidmap", "0:100000:65534", "--gidmap", "0:100000:65534"]
    wide = ["--uidmap", "0:100000:65536", "--gidmap", "0:100000:65536"]
    r = read_in_container(name, narrow)
    check(r.returncode == 1 and "outside this user namespace" in r.stderr,
          "with a user namespace the host's clock is refused, saying why: %s" % r.stderr.strip())
    r = read_in_container(name, narrow + ["-e", "SHMCLOCK_TRUST=outside"])
    check(r.returncode == 0 and r.stdout.strip() == str(host_ns(name)),
          "SHMCLOCK_TRUST=outside believes it where the overflow uid is not mapped: %s %s"
          % (r.stdout.strip(), r.stderr.strip()))
    r = read_in_container(name, wide + ["-e", "SHMCLOCK_TRUST=outside"])
    check(r.returncode == 1 and "outside this user namespace" in r.stderr,
          "not where the container maps it too (65536 ids): %s" % r.stderr.strip())
    # The container's root forges a clock (a copy of the real one) in its
    # own /dev/shm; its user 1000 reads it.
    cname = "shmclock-forge-%s" % RUN
    containers.append(cname)
    r = subprocess.run(PODMAN[:2] + ["-d", "--name", cname] + PODMAN[2:] + narrow +
                       ["-v", "%s:/host/clock:ro" % seg(name), IMAGE, "sleep", "120"],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, "a container with a user namespace runs (%s)" % r.stderr.strip())
    ex = lambda *a: subprocess.run(["podman", "exec"] + list(a), capture_output=True, text=True,
                                   timeout=60)
    r = ex(cname, "cp", "/host/clock", "/dev/shm/shmclock.forged")
    check(r.returncode == 0, "its root copies the clock into /dev/shm/shmclock.forged (%s)"
          % r.stderr.strip())
    for trust in ("", "outside"):
        r = ex("--user", "1000", "-e", "SHMCLOCK_TRUST=" + trust, cname, "shmclock-cat",
               "-n", "forged")
        check(r.returncode == 1 and "not trusted" in r.stderr,
              "its user 1000 refuses the root's forgery (SHMCLOCK_TRUST=%r): %s"
              % (trust, r.stderr.strip()))
    r = ex("--user", "1000", "-e", "SHMCLOCK_TRUST=root", cname, "shmclock-cat", "-n", "forged")
    check(r.returncode == 1 and "stale" in r.stderr,
          "... and, told to trust the container's root, still refuses it: a copy of a live "
          "clock is not that clock (%s)" % (r.stdout + r.stderr).strip()[-160:])
    subprocess.run(["podman", "rm", "-f", "-t", "0", cname], capture_output=True, timeout=60)
    r = podman(narrow + ["-v", "%s:/run/shmclock" % rtdir], "shmclockctl", "--socket",
               "/run/shmclock/%s.sock" % name, "resume")
    check(r.returncode != 0 and "Permission denied" in r.stderr and status(name).get("paused"),
          "its root cannot use the control socket (0600, the host root's): %s"
          % (r.stdout + r.stderr).strip()[-200:])
    # ControlGroup: the host gid the container's root maps to (a group
    # made for the run when the host has none by that gid).
    if subprocess.run(["getent", "group", "100000"], capture_output=True).returncode:
        made = "shmclock-%d" % os.getpid()
        r = subprocess.run(["groupadd", "--gid", "100000", made], capture_output=True, text=True)
        check(r.returncode == 0, "a host group of gid 100000 (%s)" % r.stderr.strip())
        groups.append(made)
    grp = name + "-group"
    clocks.append(grp)
    procs["G"] = start_daemon(SHMCLOCKD, rtdir, "G", grp, {"TimeSource": "simulation",
                                                           "ControlGroup": 100000},
                              dict(os.environ, SHMCLOCK_RUNTIME_DIR=rtdir))
    r = podman(narrow + ["-v", "%s:/run/shmclock" % rtdir], "shmclockctl", "--socket",
               "/run/shmclock/%s.sock" % grp, "pause")
    check(r.returncode == 0 and status(grp).get("paused"),
          "with ControlGroup 100000 (its host gid) it controls the clock (%s)"
          % (r.stdout + r.stderr).strip()[-200:])
    r = podman(narrow + ["--user", "1000:1000", "-v", "%s:/run/shmclock" % rtdir], "shmclockctl",
               "--socket", "/run/shmclock/%s.sock" % grp, "resume")
    check(r.returncode != 0 and status(grp).get("paused"),
          "... and its user 1000 (host 101000, not in the group) does not (%s)"
          % (r.stdout + r.stderr).strip()[-200:])


ROOTLESS = os.environ.get("SHMCLOCK_ROOTLESS_USER", "shmclock-ci")


def rootless_phase(name, root):
    """Podman rootless, as ROOTLESS (.ci/setup makes it, with subordinate
    ids): the container's root is that user, the host's root is outside."""
    import pwd
    try:
        pw = pwd.getpwnam(ROOTLESS)
    except KeyError:
        print("# rootless: no user %s (.ci/setup makes one): not run" % ROOTLESS, flush=True)
        return
    # Storage, run state and runtime directory of this run's own: rootless
    # Podman keeps where they were in its database, and would go on using
    # a run's directory after it is gone.
    dirs = {}
    for d in ("xdg", "root", "run"):
        dirs[d] = os.path.join(rtdir, "rootless", d)
        os.makedirs(dirs[d], mode=0o700)
        os.chown(dirs[d], pw.pw_uid, pw.pw_gid)
    os.chown(os.path.join(rtdir, "rootless"), pw.pw_uid, pw.pw_gid)
    as_user = ["runuser", "-u", ROOTLESS, "--", "env", "HOME=" + pw.pw_dir,
               "XDG_RUNTIME_DIR=" + dirs["xdg"], "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
               "podman", "--root", dirs["root"], "--runroot", dirs["run"]]
    rootless.append((as_user, dirs["xdg"]))
    tar = subprocess.Popen(["tar", "-C", root, "-c", "."], stdout=subprocess.PIPE)
    r = subprocess.run(as_user + ["import", "-", IMAGE], stdin=tar.stdout,
                       capture_output=True, text=True, timeout=120)
    tar.wait()
    check(r.returncode == 0, "rootless Podman (%s) imports the image (%s)"
          % (ROOTLESS, r.stderr.strip()[-200:]))
    base = as_user + ["run", "--rm", "--runtime", "runc", "--network", "none"] + limits()
    mount = mount_clock(name)
    r = subprocess.run(base + mount + ["-e", "SHMCLOCK_TRUST=outside", IMAGE, "shmclock-cat",
                                       "-n", name], capture_output=True, text=True, timeout=120)
    check(r.returncode == 1 and "outside this user namespace" in r.stderr,
          "rootless, its usual map (65536 ids): the host's clock refused even with "
          "SHMCLOCK_TRUST=outside: %s" % r.stderr.strip()[-200:])
    r = subprocess.run(base + ["--uidmap", "0:0:65534", "--gidmap", "0:0:65534"] + mount +
                       ["-e", "SHMCLOCK_TRUST=outside", IMAGE, "sh", "-c",
                        "cat /proc/self/uid_map; shmclock-cat -n " + name],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0 and r.stdout.split()[-1:] == [str(host_ns(name))],
          "rootless with --uidmap 0:0:65534 (doc/containers.md): believed with "
          "SHMCLOCK_TRUST=outside: %s %s" % (" ".join(r.stdout.split()), r.stderr.strip()[-200:]))
    # The container's root forges a clock; its user 1000 reads as the
    # documented set-up says (SHMCLOCK_TRUST=outside).
    cname = "shmclock-rl-%s" % RUN
    r = subprocess.run(as_user + ["run", "-d", "--name", cname, "--runtime", "runc", "--network",
                                  "none"] + limits() +
                       ["--uidmap", "0:0:65534", "--gidmap", "0:0:65534",
                        "-v", "%s:/host/clock:ro" % seg(name), IMAGE, "sleep", "120"],
                       capture_output=True, text=True, timeout=120)
    ex = lambda *a: subprocess.run(as_user + ["exec"] + list(a), capture_output=True, text=True,
                                   timeout=60)
    r2 = ex(cname, "cp", "/host/clock", "/dev/shm/shmclock.forged")
    r3 = ex("--user", "1000", "-e", "SHMCLOCK_TRUST=outside", cname, "shmclock-cat", "-n",
            "forged")
    check(r.returncode == 0 and r2.returncode == 0 and r3.returncode == 1 and
          "not trusted" in r3.stderr,
          "rootless: a clock its root forges in the container is refused to its user 1000 with "
          "SHMCLOCK_TRUST=outside (%s %s %s)" % (r.stderr.strip()[-120:], r2.stderr.strip()[-120:],
                                                 r3.stderr.strip()[-160:]))
    subprocess.run(as_user + ["rm", "-f", "-t", "0", cname], capture_output=True, timeout=120)


DOCKER = "/usr/bin/docker"  # Debian's docker.io (another client may come first in PATH)


def docker_phase(name, root):
    """Docker: a dockerd of this run's (its own data, socket and no
    network set-up), the image imported, doc/containers.md's docker run
    lines and its compose file (docker-compose up) as written."""
    if not shutil.which("dockerd") or not os.path.exists(DOCKER) or \
            not shutil.which("docker-compose"):
        print("# docker: dockerd, docker or docker-compose not installed (.ci/setup installs "
              "docker.io and docker-compose): not run", flush=True)
        return
    ddir = os.path.join(rtdir, "d")
    os.makedirs(ddir)
    sock = os.path.join(ddir, "docker.sock")
    log = open(os.path.join(rtdir, "dockerd.log"), "w")
    dockerd.append(subprocess.Popen(
        ["dockerd", "--host", "unix://" + sock, "--data-root", os.path.join(ddir, "root"),
         "--exec-root", os.path.join(ddir, "x"), "--pidfile", os.path.join(ddir, "pid"),
         "--bridge=none", "--iptables=false", "--ip6tables=false", "--ip-forward=false",
         # Its own containerd namespaces: not the system docker's, nor
         # another run's, where a system containerd is running.
         "--containerd-namespace", "shmclock-" + RUN,
         "--containerd-plugins-namespace", "shmclock-p-" + RUN], stdout=log, stderr=log))
    docker = [DOCKER, "-H", "unix://" + sock]
    up = wait_for(lambda: subprocess.run(docker + ["version"], capture_output=True).returncode == 0,
                  60, 0.2)
    check(up, "a dockerd of this run's answers")
    if not up:
        return
    tar = subprocess.Popen(["tar", "-C", root, "-c", "."], stdout=subprocess.PIPE)
    r = subprocess.run(docker + ["import", "-", IMAGE], stdin=tar.stdout, capture_output=True,
                       text=True, timeout=120)
    tar.wait()
    check(r.returncode == 0, "docker imports the image (%s)" % r.stderr.strip()[-200:])
    text = open(os.path.join(SOURCE, "doc", "containers.md")).read()
    blocks = re.findall(r"^```sh\n(.*?)^```", text, re.M | re.S)
    cmds = [l for b in blocks for l in b.splitlines() if l.startswith("docker run ")]
    check(len(cmds) >= 3, "doc/containers.md gives its docker run lines (%d)" % len(cmds))
    for cmd in cmds:
        argv = docker + [local(a) for a in shlex.split(cmd)][1:]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        check(r.returncode == 0, "as doc/containers.md gives it: %s -> %d %s"
              % (cmd[:120], r.returncode, (r.stdout + r.stderr).strip()[-160:]))
    compose = re.findall(r"^```yaml\n(.*?)^```", text, re.M | re.S)
    check(len(compose) == 1, "doc/containers.md gives a compose file")
    path = os.path.join(rtdir, "compose.yaml")
    with open(path, "w") as f:
        f.write("\n".join(local(l) for l in compose[0].splitlines()) + "\n")
    check(ctl(name, "resume").get("ok"), "host: resume")
    env = dict(os.environ, DOCKER_HOST="unix://" + sock)
    project = ["docker-compose", "-f", path, "-p", "shmclock%s" % RUN.replace("-", "")]
    r = subprocess.run(project + ["up", "--no-color"], capture_output=True, text=True,
                       timeout=120, env=env)
    frames = re.findall(r"sensor.*\| .*measured", r.stdout)
    scale = status(name).get("scale")
    check(r.returncode == 0 and len(frames) == 3 and scale == 2,
          "docker-compose up of doc/containers.md's file: the sensor's 3 frames (%d), the "
          "controller's scale %s (exit %d %s)" % (len(frames), scale, r.returncode,
                                                  (r.stdout + r.stderr).strip()[-200:]))
    subprocess.run(project + ["down"], capture_output=True, timeout=120, env=env)
    check(ctl(name, "scale", value=1).get("ok") and ctl(name, "pause").get("ok"),
          "host: scale 1, pause")


def local(arg):
    """A doc/containers.md word with this run's clock, image and socket
    directory."""
    arg = arg.replace("/run/shmclock:/run/shmclock", rtdir + ":/run/shmclock")
    return re.sub(r"\bsim\b", CLOCK[0], arg).replace("IMAGE", IMAGE)


def daemon_phase(name):
    """doc/containers.md's daemon in a container of its own (its podman
    run -d line): the host's /dev/shm and socket directory shared; the host
    and another container read and control its clock; podman stop ends it
    with SIGTERM (as its pid namespace's init it gets the signal because it
    blocks it: the kernel drops only an init's unblocked default-action
    signals), the other container sees it gone, and the same line again
    takes the same file over, which that container follows."""
    text = open(os.path.join(SOURCE, "doc", "containers.md")).read()
    line = [l for l in text.splitlines() if l.startswith("podman run -d ") and "shmclockd" in l]
    check(len(line) == 1, "doc/containers.md gives the daemon's container (%d)" % len(line))
    if not line:
        return
    argv = [local(a) for a in shlex.split(line[0])]
    cname = argv[argv.index("--name") + 1]
    boxed = argv[-1]
    containers.append(cname)
    clocks.append(boxed)
    argv = argv[:2] + ["--runtime", "runc"] + limits() + argv[2:]
    sock = os.path.join(rtdir, boxed + ".sock")

    def serve(what):
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        up = r.returncode == 0 and wait_for(lambda: os.path.exists(sock) and
                                            ctl_at(sock, "status").get("ok"), 30, 0.1)
        check(up, "the daemon in its container serves %s (%s): %s"
              % (boxed, what, r.stderr.strip()[-200:]))
        return up

    def stop(what):
        r = subprocess.run(["podman", "stop", "-t", "30", cname], capture_output=True, text=True,
                           timeout=90)
        check(r.returncode == 0 and "SIGKILL" not in r.stderr,
              "podman stop ends it with SIGTERM (%s): %s" % (what, r.stderr.strip()[-200:]))

    if not serve("started"):
        return
    check(ctl_at(sock, "pause").get("ok") and ctl_at(sock, "set", time="7s").get("ok") and
          host_ns(boxed) == 7_000_000_000,
          "the host controls it through the shared socket directory and reads 7 s")
    reader = "shmclock-reader-%s" % RUN
    containers.append(reader)
    r = subprocess.run(PODMAN[:2] + ["-d", "--name", reader] + PODMAN[2:] + mount_clock(boxed) +
                       [IMAGE, "sleep", "300"], capture_output=True, text=True, timeout=60)
    cat = lambda: subprocess.run(["podman", "exec", reader, "shmclock-cat", "-n", boxed],
                                 capture_output=True, text=True, timeout=60)
    r = cat()
    check(r.returncode == 0 and r.stdout.strip() == "7000000000",
          "another container reads it: %s %s" % (r.stdout.strip(), r.stderr.strip()[-160:]))
    stop("first")
    r = cat()
    check("stale" in r.stderr,
          "that container sees its writer gone: %s" % r.stderr.strip()[-160:])
    if not serve("again, the same line"):
        return
    check(ctl_at(sock, "set", time="9s").get("ok"), "host: set 9 s on the restarted daemon")
    r = cat()
    check(r.returncode == 0 and r.stdout.strip() == "9000000000",
          "the container started before the restart follows it (the daemon took the same file "
          "over): %s %s" % (r.stdout.strip(), r.stderr.strip()[-160:]))
    stop("again")
    subprocess.run(["podman", "rm", "-f", "-t", "0", reader], capture_output=True, timeout=60)


def recipe_phase(name):
    """doc/containers.md's commands, each `podman run` line of its sh
    blocks, with its clock (sim) and image (IMAGE) this run's, /run/shmclock
    this run's directory, and the runtime options this machine needs."""
    text = open(os.path.join(SOURCE, "doc", "containers.md")).read()
    blocks = re.findall(r"^```sh\n(.*?)^```", text, re.M | re.S)
    cmds = [l for b in blocks for l in b.splitlines()
            if l.startswith("podman run ") and not l.startswith("podman run -d ")]
    check(len(cmds) >= 6, "doc/containers.md gives its commands (%d)" % len(cmds))
    for cmd in cmds:
        argv = [local(a) for a in shlex.split(cmd)]
        argv = argv[:2] + ["--runtime", "runc"] + limits() + argv[2:]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        check(r.returncode == 0, "as doc/containers.md gives it: %s -> %d %s"
              % (cmd[:120], r.returncode, (r.stdout + r.stderr).strip()[-160:]))


def sweep():
    """What a run killed before its cleanup left (meson's timeout sends
    SIGKILL half a second after SIGTERM): containers, images and groups
    named after a test process that is gone."""
    def gone(m):
        try:
            os.kill(int(m.group(1)), 0)
            return False
        except ProcessLookupError:
            return True
        except (PermissionError, ValueError):
            return False
    ours = re.compile(r"^(?:localhost/)?shmclock[a-z-]*?-(?:ctr-)?(\d+)-\d+(?:-[a-z]+)?$")
    r = subprocess.run(["podman", "ps", "-a", "--format", "{{.Names}}"], capture_output=True,
                       text=True, timeout=60)
    for c in r.stdout.split():
        m = ours.match(c)
        if m and gone(m):
            subprocess.run(["podman", "rm", "-f", "-t", "0", c], capture_output=True, timeout=60)
    r = subprocess.run(["podman", "images", "--format", "{{.Repository}}"], capture_output=True,
                       text=True, timeout=60)
    for i in r.stdout.split():
        m = ours.match(i)
        if m and gone(m):
            subprocess.run(["podman", "rmi", "-f", i], capture_output=True, timeout=60)
    with open("/etc/group") as f:
        for g in [l.split(":")[0] for l in f]:
            m = re.match(r"^shmclock-(\d+)$", g)
            if m and gone(m):
                subprocess.run(["groupdel", g], capture_output=True, timeout=60)


def main():
    sweep()
    root = make_image()
    env = dict(os.environ, SHMCLOCK_RUNTIME_DIR=rtdir)
    name = "ctr-%s" % RUN
    CLOCK.append(name)
    unix_name = "ctr-%s-unix" % RUN
    ls = name + "-ls"  # doc/containers.md's sim-ls
    clocks.extend([name, unix_name, ls])
    procs["D"] = start_daemon(SHMCLOCKD, rtdir, "D", name, {"TimeSource": "simulation"}, env)
    procs["U"] = start_daemon(SHMCLOCKD, rtdir, "U", unix_name,
                              {"TimeSource": "simulation", "UnixTimeAtZero": "2030-01-01T00:00:00Z"},
                              env)
    check(ctl(unix_name, "pause").get("ok") and ctl(unix_name, "set", time="0s").get("ok"),
          "host: the UNIX clock paused at 2030-01-01")
    procs["L"] = start_daemon(SHMCLOCKD, rtdir, "L", ls,
                              {"TimeSource": "fixed", "Lockstep": {"Participants": 1,
                                                                   "OnDeath": "evict"}}, env)
    follow_phase(name)
    wait_phase(name)
    programs_phase(name, unix_name)
    cxx_phase(name)
    control_phase(name)
    lockstep_phase(ls)
    csharp_phase(ls)
    userns_phase(name)
    rootless_phase(name, root)
    docker_phase(name, root)
    daemon_phase(name)
    recipe_phase(name)


def cleanup():
    for p in dockerd:
        p.terminate()
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    for c in containers:
        subprocess.run(["podman", "rm", "-f", "-t", "0", c], capture_output=True, timeout=60)
    subprocess.run(["podman", "rmi", "-f", IMAGE], capture_output=True, timeout=60)
    # Rootless: its containers (the run's own storage), then its pause
    # process (the user namespace's keeper, catatonit); the storage goes
    # with the run's directory.
    for as_user, xdg in rootless:
        subprocess.run(as_user + ["rm", "-af", "-t", "0"], capture_output=True, timeout=60)
        try:
            with open(os.path.join(xdg, "libpod", "tmp", "pause.pid")) as f:
                os.kill(int(f.read().strip()), signal.SIGKILL)
        except (OSError, ValueError):
            pass
    for g in groups:
        subprocess.run(["groupdel", g], capture_output=True, timeout=60)
    remove(list(procs.values()), clocks, rtdir)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *a: (cleanup(), sys.exit(1)))
    run(main, cleanup, procs, rtdir)
