# SPDX-License-Identifier: MIT
"""Read and write a shmclock simulation clock from Python.

A writer (shmclockd, or a scenario script using Writer) publishes a clock in
/dev/shm/shmclock.NAME; Clock maps it read-only and computes the simulation
time itself: Clock.now() costs about as much as time.monotonic_ns().

    import shmclock

    with shmclock.Clock() as clock:          # $SHMCLOCK_NAME, else "default"
        t = clock.now()                      # simulation time, int ns
        clock.sleep(0.1)                     # 100 ms of simulated time
        for missed in clock.rate(0.05):      # every 50 simulated ms
            ...

Times are int nanoseconds. Durations are int ns, float seconds or
datetime.timedelta. Errors are exceptions: FileNotFoundError (no such clock),
PermissionError (a clock of an untrusted user: see $SHMCLOCK_TRUST),
StaleClockError (no writer is alive, or the clock is marked stale: its
leader or /clock is lost; its .value is the time anyway),
TimeoutError, ValueError.

Sleeps release the GIL and follow pause, resume, scale changes and steps
without polling; Ctrl-C interrupts them within 100 ms (they wake that often
to let Python run its signal handlers). Jump callbacks run on a thread of
their own (see Clock.on_jump).

Every method is safe from any thread against every other, close() included:
a call that close() cuts short (a sleep, a wait) raises ValueError("I/O
operation on a closed clock"). After os.fork() (multiprocessing's default
start method on Linux) the child goes on with the clocks opened before:
sleeps, asleep and jump callbacks work there as in the parent.
"""

from __future__ import annotations

import asyncio
import atexit
import datetime
import errno
import os
import threading
import time
import weakref

from . import _shmclock
from ._shmclock import ClockInfo, Jump, StaleClockError

__all__ = ["Clock", "Writer", "Lockstep", "Rate", "JumpHandle", "ClockInfo", "Jump", "StaleClockError",
           "to_ns", "LIBRARY_VERSION"]

LIBRARY_VERSION = _shmclock.LIBRARY_VERSION

#: How long (real time) a sleep waits at most before it lets Python check for
#: signals (Ctrl-C) and goes on.
_SLICE_NS = 100_000_000

_open_clocks: "weakref.WeakSet[Clock]" = weakref.WeakSet()


def to_ns(d) -> int:
    """A duration as int ns: int (ns), float (seconds) or datetime.timedelta."""
    if isinstance(d, bool):
        raise TypeError("a duration is int ns, float seconds or datetime.timedelta, not bool")
    if isinstance(d, int):
        return d
    if isinstance(d, float):
        if d != d or d in (float("inf"), float("-inf")):
            raise ValueError(f"duration {d!r} is not finite")
        return round(d * 1e9)
    if isinstance(d, datetime.timedelta):
        return (d.days * 86_400 + d.seconds) * 1_000_000_000 + d.microseconds * 1_000
    raise TypeError(f"a duration is int ns, float seconds or datetime.timedelta, not {type(d).__name__}")


def _sliced(wait, timeout) -> bool:
    """wait(slice_ns) until it returns True, a slice of real time at a time
    (Python runs its signal handlers in between: Ctrl-C), at most timeout
    (a duration; None: for ever): False when it passed first."""
    left = None if timeout is None else to_ns(timeout)
    while True:
        step = _SLICE_NS if left is None else min(_SLICE_NS, max(left, 0))
        if wait(step):
            return True
        if left is not None:
            left -= step
            if left <= 0:
                return False


def _default_name(name):
    if name is None:
        name = os.environ.get("SHMCLOCK_NAME") or "default"
    return name


class JumpHandle:
    """A registered jump callback; remove() unregisters it."""

    __slots__ = ("_clock", "_id")

    def __init__(self, clock, ident):
        self._clock = clock
        self._id = ident

    def remove(self) -> None:
        """Unregister. Once it returns the callback is not running and will
        not run again. Idempotent."""
        if self._clock is not None and not self._clock.closed:
            self._clock._remove_jump(self._id)
        self._clock = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class Rate:
    """A fixed simulated period: sleep() returns at each boundary.

    Boundaries the caller missed (it took longer than a period) are skipped
    and sleep() returns how many; a jump of the clock starts a new schedule.
    Iterating a Rate sleeps once per item and yields the missed count.
    """

    def __init__(self, clock: "Clock", period):
        self._clock = clock
        self.period_ns = to_ns(period)
        if self.period_ns <= 0:
            raise ValueError("a rate's period must be > 0")
        self._next = None
        self._epoch = None
        self.missed_total = 0

    def reset(self) -> None:
        """Start a new schedule: the next sleep lasts one period."""
        self._next = None

    def sleep(self) -> int:
        """Sleep until the next boundary; returns the boundaries missed."""
        info = self._clock.info()
        now = info.sim_ns
        if self._next is None or info.jump_epoch != self._epoch:
            self._next = now + self.period_ns
            self._epoch = info.jump_epoch
        elif now >= self._next:
            missed = (now - self._next) // self.period_ns
            self._next += (missed + 1) * self.period_ns
            self.missed_total += missed
            return missed
        self._clock.sleep_until(self._next)
        self._next += self.period_ns
        return 0

    def __iter__(self):
        while True:
            yield self.sleep()


class _Changes:
    """One thread per clock that waits for its changes (the writer's futex)
    and wakes the asyncio tasks sleeping on it, so a sleeping task costs the
    event loop nothing."""

    def __init__(self, clock):
        self._clock = weakref.ref(clock)
        self._lock = threading.Lock()
        self._waiters = set()
        self._thread = None

    def after_fork_child(self):
        """In a child of os.fork(): the thread did not come along, its lock
        may have been held by one that did not either, and the waiters are
        the parent's event loops'."""
        self._lock = threading.Lock()
        self._waiters = set()
        self._thread = None

    def add(self, loop, fut):
        with self._lock:
            self._waiters.add((loop, fut))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="shmclock-changes",
                                                daemon=True)
                self._thread.start()

    def discard(self, loop, fut):
        with self._lock:
            self._waiters.discard((loop, fut))

    def _run(self):
        clock = self._clock()
        try:
            token = clock._change_token() if clock is not None else 0
        except ValueError:
            token = 0  # closed already: the loop below wakes everybody
        while True:
            with self._lock:
                if clock is None or not self._waiters or clock.closed:
                    self._thread = None
                    waiters = list(self._waiters) if clock is not None else []
                    break
            try:
                changed = clock._wait_change(token, _SLICE_NS)
            except (OSError, ValueError):
                changed = True  # closed under us: wake everybody to see it
            if changed:
                # The new token before the notifications: a change after a
                # task registered and read the clock is never missed.
                try:
                    token = clock._change_token()
                except ValueError:
                    pass
                with self._lock:
                    waiters = list(self._waiters)
                _wake_all(waiters)
        # Closed: the tasks still waiting see it when they wake.
        _wake_all(waiters)


def _wake_all(waiters):
    for loop, fut in waiters:
        try:
            loop.call_soon_threadsafe(_wake, fut)
        except RuntimeError:
            pass  # that event loop is closed: nobody waits there any more


def _wake(fut):
    if not fut.done():
        fut.set_result(None)


class Clock(_shmclock.Clock):
    """A shmclock clock, read-only. ``Clock(name=None, *, fallback_system=False,
    wait=None, trust_any_owner=False)``

    name: the clock (default $SHMCLOCK_NAME, else "default").
    fallback_system: read system time when the clock does not exist (the ROS
        use_sim_time=false case) instead of raising FileNotFoundError.
    wait: wait (real time) up to this duration for the clock to exist and
        start; None: don't wait.
    trust_any_owner: believe the clock whoever owns its file (by default only
        root, this user and users named in $SHMCLOCK_TRUST are trusted).
    """

    def __init__(self, name=None, *, fallback_system=False, wait=None, trust_any_owner=False):
        flags = 0
        if fallback_system:
            flags |= _shmclock.OPEN_FALLBACK_SYSTEM
        if trust_any_owner:
            flags |= _shmclock.OPEN_TRUST_ANY_OWNER
        name = _default_name(name)
        if wait is None:
            super().__init__(name, flags)
        else:
            # In slices, so that Python runs its signal handlers between
            # them (Ctrl-C); one wait of an hour in C could not be
            # interrupted.
            w = to_ns(wait)
            if w < 0:
                raise ValueError("wait must be a duration >= 0 (None: don't wait)")
            deadline = time.monotonic_ns() + w
            while True:
                left = max(0, deadline - time.monotonic_ns())
                try:
                    super().__init__(name, flags, min(left, _SLICE_NS))
                    break
                except TimeoutError:
                    if left <= _SLICE_NS:
                        raise
        self._changes = _Changes(self)
        _open_clocks.add(self)

    def __repr__(self):
        return f"<shmclock.Clock {self.name!r}{' closed' if self.closed else ''}>"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def sleep_until(self, t: int) -> None:
        """Sleep until the simulation time reaches t (int ns): across pause,
        resume, scale changes and steps, without polling. Blocks while
        paused. Ctrl-C interrupts it."""
        t = int(t)
        while not self._sleep_until(t, _SLICE_NS):
            pass  # a slice of real time passed: Python runs its signal handlers here

    def sleep(self, d) -> None:
        """Sleep for a simulated duration (int ns, float s or timedelta): until
        now() + d, as sleep_until."""
        d = to_ns(d)
        if d < 0:
            raise ValueError("cannot sleep a negative duration")
        self.sleep_until(self._now_any() + d)

    def wait_change(self, timeout=None) -> bool:
        """Wait for the next change of the clock (a value of a stepped source,
        a scale, a pause, a jump). Returns False if timeout (real time) passed
        first."""
        token = self._change_token()
        return _sliced(lambda step: self._wait_change(token, step), timeout)

    def on_jump(self, callback, *, min_forward=None, min_backward=None,
                on_clock_change=None) -> JumpHandle:
        """Call callback(jump: Jump) around jumps of the clock, twice each: with
        jump.before True, then False. Thresholds: min_forward / min_backward
        (durations: forward / backward jumps of at least this size),
        on_clock_change (the source changed or the clock started). With none
        given, every jump. The callback runs on a thread of its own, soon
        after the jump; reads on other threads do not wait for it. Returns a
        handle whose remove() unregisters it."""
        if min_forward is None and min_backward is None and on_clock_change is None:
            fwd, back, change = 1, 1, True
        else:
            fwd = 0 if min_forward is None else max(to_ns(min_forward), 1)
            back = 0 if min_backward is None else max(to_ns(min_backward), 1)
            change = bool(on_clock_change)
        return JumpHandle(self, self._add_jump(callback, fwd, back, change))

    def rate(self, period) -> Rate:
        """A Rate of this clock with a simulated period (int ns, float s, timedelta)."""
        return Rate(self, period)

    async def asleep_until(self, t: int) -> None:
        """As sleep_until, without blocking the event loop."""
        t = int(t)
        loop = asyncio.get_running_loop()
        while True:
            fut = loop.create_future()
            self._changes.add(loop, fut)
            try:
                if self._now_any() >= t:
                    return
                delay = self._real_delay(t)  # None while paused
                try:
                    await asyncio.wait_for(fut, None if delay is None else delay / 1e9)
                except asyncio.TimeoutError:
                    pass
            finally:
                self._changes.discard(loop, fut)

    async def asleep(self, d) -> None:
        """As sleep, without blocking the event loop."""
        d = to_ns(d)
        if d < 0:
            raise ValueError("cannot sleep a negative duration")
        await self.asleep_until(self._now_any() + d)

    def _now_any(self) -> int:
        """now(), or the stale value when no writer is alive."""
        try:
            return self.now()
        except StaleClockError as e:
            return e.value


class Writer(_shmclock.Writer):
    """Own and publish a clock: ``Writer(name=None, *, mode=0o644)``.

    One writer per clock (another live one: OSError with errno EBUSY).
    An existing clock is taken over and continued without a jump. The clock
    has no time until the first set_time() or advance().
    """

    def __init__(self, name=None, *, mode=0o644):
        super().__init__(_default_name(name), mode)

    def __repr__(self):
        return f"<shmclock.Writer {self.name!r}>"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def set_time(self, t: int) -> None:
        """Jump to simulation time t (int ns), forwards or backwards."""
        self._set_time(int(t))

    def advance(self, t: int) -> None:
        """Publish the next value t (int ns) of a stepped source."""
        self._advance(int(t))

    def step(self, d) -> None:
        """Move time forward by a duration without changing the mode."""
        self._step(to_ns(d))


class Lockstep(_shmclock.Lockstep):
    """Hold the clock until you are done: ``Lockstep(who, name=None)`` joins
    a clock in lockstep (shmclockd --lockstep N, or a host of one between
    hosts) as participant ``who`` (unique per clock).

    The clock never passes the smallest grant of its live participants:
    ``advance(t)`` grants t (everything before simulation time t is done)
    and returns once the clock has reached it. What a participant did
    before granting t happens before any participant returns from an
    advance to t or later. The participant belongs to the thread that
    joined (calls from another raise RuntimeError); a process or thread
    that dies without leave() is seen by the daemon as a death.

    Errors: OSError (errno and the library's message: ENOENT no such clock,
    EOPNOTSUPP not in lockstep mode, ECANCELED evicted, ESTALE the daemon
    went away), ValueError for a grant behind the last one or too far
    ahead, TimeoutError from advance(timeout=...).
    """

    def __init__(self, who: str, name=None):
        super().__init__(_default_name(name), who)

    def __repr__(self):
        return f"<shmclock.Lockstep {self.name!r}{'' if self.joined else ' (left)'}>"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.leave()

    def grant(self, t: int) -> None:
        """Grant t (int ns) without waiting: the clock may move up to t."""
        self._grant(int(t))

    def advance(self, t: int, timeout=None) -> None:
        """Grant t (int ns) and wait until the clock reaches it. timeout (real
        time, a duration; None: for ever) raises TimeoutError when it passes
        first; the grant stands. Ctrl-C interrupts the wait."""
        t = int(t)
        if not _sliced(lambda step: self._advance(t, step), timeout):
            raise TimeoutError(errno.ETIMEDOUT, "the clock did not reach %d ns in time" % t,
                               self.name)


def _close_all():
    for clock in list(_open_clocks):
        clock.close()


# Jump callbacks run on library threads that take the GIL: stop them before
# the interpreter goes away.
atexit.register(_close_all)


def _after_fork_child():
    # A child of os.fork() (multiprocessing's default start method on Linux)
    # goes on with the clocks opened before: sleeps, asleep and jump
    # callbacks work there as in the parent. Python is ready for callbacks
    # now: the clocks start their callbacks' watchers again, and what Python
    # kept per clock is renewed.
    _shmclock._fork_hook(0)
    for clock in list(_open_clocks):
        clock._after_fork_child()
        clock._changes.after_fork_child()


os.register_at_fork(before=lambda: _shmclock._fork_hook(1),
                    after_in_parent=lambda: _shmclock._fork_hook(-1),
                    after_in_child=_after_fork_child)
