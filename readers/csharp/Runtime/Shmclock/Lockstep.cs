// SPDX-License-Identifier: MIT
using System;
using System.Threading;
using System.Threading.Tasks;

namespace Shmclock
{
    /// <summary>
    /// A lockstep participant (shmclock_lockstep_t): the clock never passes
    /// the smallest grant of its live participants. A Unity FixedUpdate
    /// loop: each step, Advance(next step's time) — or await AdvanceAsync.
    /// <para>Threads: the participant lives as long as the thread that
    /// joined (the C API's rule: the kernel tells the clock's writer when
    /// that thread ends, however it ends); if it exits without leaving,
    /// the participant is dead for the clock. Grant, Advance and
    /// AdvanceAsync may be called from any thread of the process, one call
    /// at a time: the natural loop <c>for (...) await p.AdvanceAsync(t);</c>
    /// resumes on pool threads outside Unity (no SynchronizationContext),
    /// and each step's grant comes from whichever thread that is. A call
    /// made while another is under way (an AdvanceAsync not yet awaited to
    /// its end) gets InvalidOperationException. Leave/Dispose from the
    /// joining thread frees the slot at once; from another, the clock stops
    /// waiting at once and the slot comes free when the joining thread
    /// ends.</para>
    /// </summary>
    public sealed class Lockstep : IDisposable
    {
        IntPtr p;
        readonly string name, who;
        readonly Clock clock;
        int busy; // 1 while a call is under way (Interlocked)

        Lockstep(IntPtr p, string name, string who)
        {
            this.p = p;
            this.name = name;
            this.who = who;
            try {
                clock = Clock.Open(name);
            } catch {
                Native.shmclock_lockstep_leave(p);
                throw;
            }
        }

        /// <summary>
        /// Joins clock <paramref name="name"/>'s lockstep as <paramref name="who"/>
        /// (1-64 printable characters). Returns once the clock's writer
        /// accepted it; until its first grant it holds the clock at JoinedAt.
        /// ShmclockException: ENOENT no clock, EOPNOTSUPP not in lockstep,
        /// ENOSPC no free slot, EACCES, ESTALE writer gone; the messages are
        /// shmclock_lockstep_strerror's (lockstep's own terms).
        /// </summary>
        public static Lockstep Join(string name, string who)
        {
            IntPtr p;
            if (name == null)
                throw new ArgumentNullException("name");
            if (who == null)
                throw new ArgumentNullException("who");
            Errors.CheckLockstep(Native.shmclock_lockstep_join(name, who, out p), IntPtr.Zero, name, "join as " + who);
            return new Lockstep(p, name, who);
        }

        public string Who { get { return who; } }

        /// <summary>The clock this participant is in, for reading time (disposed with it).</summary>
        public Clock Clock { get { return clock; } }

        IntPtr Handle()
        {
            IntPtr h = p;
            if (h == IntPtr.Zero)
                throw new ObjectDisposedException("Shmclock.Lockstep");
            return h;
        }

        // The handle for one call, which must end with Exit(): the C
        // participant's state (its last grant, the time it saw) is not for
        // two calls at once.
        IntPtr Enter()
        {
            IntPtr h = Handle();
            if (Interlocked.CompareExchange(ref busy, 1, 0) != 0)
                throw new InvalidOperationException("shmclock " + name + ": lockstep participant " + who +
                    " used by two calls at once (await each AdvanceAsync before the next call)");
            if (p == IntPtr.Zero) {
                Exit();
                throw new ObjectDisposedException("Shmclock.Lockstep");
            }
            return h;
        }

        void Exit() { Volatile.Write(ref busy, 0); }

        /// <summary>The clock time at which the writer accepted this participant.</summary>
        public long JoinedAt { get { return Native.shmclock_lockstep_joined_at(Handle()); } }

        /// <summary>Grants <paramref name="untilNs"/> without waiting: everything before it is done.</summary>
        public void Grant(long untilNs)
        {
            IntPtr h = Enter();
            try {
                Errors.CheckLockstep(Native.shmclock_lockstep_grant(h, untilNs), h, name, who + ": grant");
            } finally {
                Exit();
            }
        }

        /// <summary>
        /// Grants <paramref name="untilNs"/>, then sleeps until the clock
        /// reaches it. TimeoutException after <paramref name="timeout"/> of
        /// real time (null: none); ShmclockException ECANCELED evicted,
        /// ESTALE the writer died.
        /// </summary>
        public void Advance(long untilNs, TimeSpan? timeout = null)
        {
            IntPtr h = Enter();
            try {
                Errors.CheckLockstep(Native.shmclock_lockstep_advance(h, untilNs, Clock.ToNs(timeout)), h, name,
                                     who + ": advance");
            } finally {
                Exit();
            }
        }

        /// <summary>
        /// Grants <paramref name="untilNs"/> on this thread, then waits for
        /// the clock to reach it without blocking this thread (the await
        /// resumes on the caller's SynchronizationContext: Unity's main
        /// thread; without one, a pool thread, from which the next step may
        /// grant). The wait ends with TimeoutException after
        /// <paramref name="timeout"/> (null: none), with
        /// OperationCanceledException on the token, and with
        /// ShmclockException ESTALE within a second of the clock's writer
        /// dying (the wait is on the clock: an eviction shows only as the
        /// timeout).
        /// </summary>
        public async Task AdvanceAsync(long untilNs, TimeSpan? timeout = null,
                                       CancellationToken cancel = default(CancellationToken))
        {
            IntPtr h = Enter();
            try {
                Errors.CheckLockstep(Native.shmclock_lockstep_grant(h, untilNs), h, name, who + ": grant");
                long deadline = timeout == null || timeout.Value == Timeout.InfiniteTimeSpan
                                        ? long.MaxValue : Clock.SatAdd(Clock.SteadyNow(), Clock.ToNs(timeout));
                for (;;) {
                    // In slices of a second, to look at the writer in between.
                    long left = deadline == long.MaxValue ? SliceNs : Math.Min(SliceNs, deadline - Clock.SteadyNow());
                    try {
                        await clock.SleepUntilAsync(untilNs, cancel, TimeSpan.FromTicks(Math.Max(0, left) / 100))
                            .ConfigureAwait(false);
                        return;
                    } catch (TimeoutException) {
                        if (Clock.SteadyNow() >= deadline)
                            throw;
                    }
                    if (!clock.Info.WriterAlive)
                        throw Errors.ForLockstep(-Errno.ESTALE, h, name, who + ": advance");
                }
            } finally {
                Exit();
            }
        }

        const long SliceNs = 1000000000L;

        /// <summary>
        /// Leaves cleanly: the clock no longer waits for this participant
        /// (from another thread than the joining one, its slot comes free
        /// when that thread ends). Not while a call is under way
        /// (InvalidOperationException): await it first.
        /// </summary>
        public void Dispose()
        {
            if (p == IntPtr.Zero)
                return;
            IntPtr q = Enter();
            p = IntPtr.Zero;
            Exit();
            Native.shmclock_lockstep_leave(q);
            clock.Dispose();
        }

        public void Leave() { Dispose(); }
    }
}
