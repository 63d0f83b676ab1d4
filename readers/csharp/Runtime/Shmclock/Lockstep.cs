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
    /// <para>Thread rule (from the C API: "a handle belongs to the thread
    /// that joined"): Grant, Advance, AdvanceAsync and Leave/Dispose must be
    /// called on the thread that joined; any other thread gets
    /// InvalidOperationException. If that thread exits without leaving, the
    /// participant is dead for the clock.</para>
    /// </summary>
    public sealed class Lockstep : IDisposable
    {
        IntPtr p;
        readonly string name, who;
        readonly int thread;
        readonly Clock clock;

        Lockstep(IntPtr p, string name, string who)
        {
            this.p = p;
            this.name = name;
            this.who = who;
            thread = Thread.CurrentThread.ManagedThreadId;
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
            if (p == IntPtr.Zero)
                throw new ObjectDisposedException("Shmclock.Lockstep");
            if (Thread.CurrentThread.ManagedThreadId != thread)
                throw new InvalidOperationException("shmclock " + name + ": lockstep participant " + who +
                    " used from another thread than the one that joined");
            return p;
        }

        /// <summary>The clock time at which the writer accepted this participant.</summary>
        public long JoinedAt { get { return Native.shmclock_lockstep_joined_at(Handle()); } }

        /// <summary>Grants <paramref name="untilNs"/> without waiting: everything before it is done.</summary>
        public void Grant(long untilNs)
        {
            IntPtr h = Handle();
            Errors.CheckLockstep(Native.shmclock_lockstep_grant(h, untilNs), h, name, who + ": grant");
        }

        /// <summary>
        /// Grants <paramref name="untilNs"/>, then sleeps until the clock
        /// reaches it. TimeoutException after <paramref name="timeout"/> of
        /// real time (null: none); ShmclockException ECANCELED evicted,
        /// ESTALE the writer died.
        /// </summary>
        public void Advance(long untilNs, TimeSpan? timeout = null)
        {
            IntPtr h = Handle();
            Errors.CheckLockstep(Native.shmclock_lockstep_advance(h, untilNs, Clock.ToNs(timeout)), h, name,
                                 who + ": advance");
        }

        /// <summary>
        /// Grants <paramref name="untilNs"/> on this thread, then waits for
        /// the clock to reach it without blocking this thread (the await
        /// resumes on the caller's SynchronizationContext: Unity's main
        /// thread). The wait ends with TimeoutException after
        /// <paramref name="timeout"/> (null: none), with
        /// OperationCanceledException on the token, and with
        /// ShmclockException ESTALE within a second of the clock's writer
        /// dying (the wait is on the clock: an eviction shows only as the
        /// timeout).
        /// </summary>
        public async Task AdvanceAsync(long untilNs, TimeSpan? timeout = null,
                                       CancellationToken cancel = default(CancellationToken))
        {
            Grant(untilNs);
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
                    throw Errors.ForLockstep(-Errno.ESTALE, p, name, who + ": advance");
            }
        }

        const long SliceNs = 1000000000L;

        /// <summary>Leaves cleanly (on the joining thread): the clock no longer waits for this participant.</summary>
        public void Dispose()
        {
            if (p == IntPtr.Zero)
                return;
            IntPtr q = Handle();
            p = IntPtr.Zero;
            Native.shmclock_lockstep_leave(q);
            clock.Dispose();
        }

        public void Leave() { Dispose(); }
    }
}
