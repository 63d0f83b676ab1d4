// SPDX-License-Identifier: MIT
// Task-returning sleeps without a thread per wait: one thread per clock
// (started by the first async wait, gone after 5 s with none) sleeps in
// shmclock_sleep_until_ex until the earliest target of all the clock's
// async waits, so the library follows pause, scale and steps for it, and
// wakes on any jump (SHMCLOCK_SLEEP_JUMP_ERROR) to re-plan. Each wait keeps
// the semantics of its blocking twin: SleepUntil keeps its absolute target;
// SleepFor counts a backward jump as no time elapsed, a forward one as
// elapsed (as the library's sleep_for); with jumpError any jump ends it.
using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;
using System.Threading;
using System.Threading.Tasks;

namespace Shmclock
{
    public sealed partial class Clock
    {
        sealed class AsyncWait
        {
            internal long Target;       // simulation ns; for SleepFor, the duration until Started
            internal bool Relative, JumpError, Started;
            internal ulong Epoch;       // the jump epoch this wait has accounted for
            internal long Deadline;     // CLOCK_MONOTONIC ns; long.MaxValue: none
            internal TaskCompletionSource<bool> Tcs;
            internal CancellationTokenRegistration Reg;
        }

        // Under `waits`: the waits, the thread and its cancel token (a
        // shmclock_cancel_t it owns: it frees it under the lock as it ends,
        // and every shmclock_cancel on it is made under the lock).
        readonly List<AsyncWait> waits = new List<AsyncWait>();
        Thread waiter;
        IntPtr waiterToken;

        // The waiter thread sleeps at most this long at once: a jump that
        // lands between its look at the clock and the start of its sleep is
        // not one the sleep reports, and is seen at the next look.
        const long SliceNs = 100000000L;

        Task SleepAsync(bool until, long ns, CancellationToken cancel, TimeSpan? timeout, bool jumpError)
        {
            if (cancel.IsCancellationRequested)
                return Task.FromCanceled(cancel);
            var w = new AsyncWait {
                Target = ns, Relative = !until, JumpError = jumpError,
                Deadline = timeout == null || timeout.Value == Timeout.InfiniteTimeSpan
                                   ? long.MaxValue : SatAdd(SteadyNow(), ToNs(timeout)),
                // User continuations never run on the waiter thread.
                Tcs = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously),
            };
            // Started now, as the blocking sleep would be: its epoch, and for
            // SleepFor its target (an unstarted clock: at its first value).
            NativeInfo n;
            int r = Native.shmclock_info(H, out n);
            GC.KeepAlive(this);
            if (r == 0 && n.initialized != 0) {
                w.Started = true;
                w.Epoch = n.jump_epoch;
                if (w.Relative)
                    w.Target = SatAdd(n.sim_ns, ns);
            }
            lock (waits) {
                if (disposed)
                    throw new ObjectDisposedException("Shmclock.Clock", "shmclock " + name + ": the clock was disposed");
                waits.Add(w);
                if (waiter == null) {
                    waiterToken = Marshal.AllocHGlobal(sizeof(int));
                    Marshal.WriteInt32(waiterToken, 0);
                    waiter = new Thread(RunWaits) { IsBackground = true, Name = "shmclock " + name + " waits" };
                    waiter.Start();
                }
                Monitor.Pulse(waits);
                // Re-plan: a sleeping waiter thread returns with -ECANCELED
                // (sticky: one about to sleep does so at once).
                Native.shmclock_cancel(h, waiterToken);
            }
            if (cancel.CanBeCanceled)
                w.Reg = cancel.Register(() => {
                    bool mine;
                    lock (waits)
                        mine = waits.Remove(w);
                    if (mine)
                        w.Tcs.TrySetCanceled(cancel);
                });
            return w.Tcs.Task;
        }

        internal static long SatAdd(long a, long b)
        {
            long s = unchecked(a + b);
            return ((a ^ s) & (b ^ s)) < 0 ? (a < 0 ? long.MinValue : long.MaxValue) : s;
        }

        void RunWaits()
        {
            var done = new List<KeyValuePair<AsyncWait, Exception>>();
            for (;;) {
                long earliest = long.MaxValue, deadline = long.MaxValue;
                IntPtr token;
                lock (waits) {
                    token = waiterToken;
                    if (disposed || waits.Count == 0) {
                        if (!disposed)
                            Monitor.Wait(waits, 5000);
                        if (disposed || waits.Count == 0) {
                            foreach (var w in waits)
                                done.Add(new KeyValuePair<AsyncWait, Exception>(w,
                                    new ObjectDisposedException("Shmclock.Clock", "shmclock " + name + ": the clock was disposed while sleeping")));
                            waits.Clear();
                            Marshal.FreeHGlobal(waiterToken);
                            waiterToken = IntPtr.Zero;
                            waiter = null;
                            break;
                        }
                    }
                    // Kicks from here on are seen by the next sleep.
                    Native.shmclock_cancel_reset(token);
                }
                NativeInfo n;
                int r = Native.shmclock_info(h, out n);
                long steady = SteadyNow();
                lock (waits) {
                    for (int i = waits.Count - 1; i >= 0; i--) {
                        AsyncWait w = waits[i];
                        Exception end = null;
                        bool finished = false;
                        if (r == 0 && n.initialized != 0) {
                            if (!w.Started) {
                                w.Started = true;
                                w.Epoch = n.jump_epoch;
                                if (w.Relative)
                                    w.Target = SatAdd(n.sim_ns, w.Target);
                            } else if (n.jump_epoch != w.Epoch) {
                                if (w.JumpError) {
                                    end = Errors.For(-Errno.EINTR, name, w.Relative ? "sleep for" : "sleep until");
                                    finished = true;
                                } else if (w.Relative && n.last_jump_ns < 0) {
                                    // rclcpp#2383: a backward jump is no time elapsed.
                                    w.Target = SatAdd(w.Target, n.last_jump_ns);
                                }
                                w.Epoch = n.jump_epoch;
                            }
                            if (!finished && n.sim_ns >= w.Target)
                                finished = true;
                        }
                        if (!finished && steady >= w.Deadline) {
                            end = Errors.For(-Errno.ETIMEDOUT, name, w.Relative ? "sleep for" : "sleep until");
                            finished = true;
                        }
                        if (finished) {
                            waits.RemoveAt(i);
                            done.Add(new KeyValuePair<AsyncWait, Exception>(w, end));
                            continue;
                        }
                        if (w.Started && w.Target < earliest)
                            earliest = w.Target;
                        if (w.Deadline < deadline)
                            deadline = w.Deadline;
                    }
                }
                Complete(done);
                long tmo = SliceNs;
                if (deadline != long.MaxValue)
                    tmo = Math.Max(0, Math.Min(tmo, deadline - steady));
                // Returns on the target, a jump, a kick (-ECANCELED) or the
                // slice; each leads to a new look. (A clock being disposed
                // is not closed under it: the finalizer runs after us.)
                Native.shmclock_sleep_until_ex(h, earliest, Native.SLEEP_JUMP_ERROR, tmo, token);
            }
            Complete(done);
        }

        // Outside the lock: a registration's Dispose waits for its callback,
        // which takes the lock.
        static void Complete(List<KeyValuePair<AsyncWait, Exception>> done)
        {
            foreach (var kv in done) {
                kv.Key.Reg.Dispose();
                if (kv.Value == null)
                    kv.Key.Tcs.TrySetResult(true);
                else
                    kv.Key.Tcs.TrySetException(kv.Value);
            }
            done.Clear();
        }

        // From Dispose(): the waiter thread fails the waits and ends.
        void StopAsyncWaits()
        {
            lock (waits) {
                Monitor.Pulse(waits);
                if (waiterToken != IntPtr.Zero)
                    Native.shmclock_cancel(h, waiterToken);
            }
        }
    }
}
