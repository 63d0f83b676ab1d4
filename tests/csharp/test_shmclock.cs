// SPDX-License-Identifier: MIT
// The C# API (readers/csharp) against C peers in other processes (cs-peer):
// the same time on both sides of a game loop's frames, readers following
// pause/scale/set, async waits that wake at the right simulated time, jump
// events, and misuse that throws instead of crashing. TAP on stdout.
//
// Environment: CS_PEER (set by meson). Every clock is named cs-test-PID-N
// and removed at the end, also when a case fails.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using AWSIM;
using Shmclock;

static class TestShmclock
{
    const long S = 1000000000L, MS = 1000000L;

    [System.Runtime.InteropServices.DllImport("libc")]
    static extern uint getuid();
    static int n, failures, names;
    static readonly List<string> created = new List<string>();
    static readonly List<Process> procs = new List<Process>();

    static string NewName()
    {
        string s = "cs-test-" + Process.GetCurrentProcess().Id + "-" + (++names);
        created.Add(s);
        return s;
    }

    static bool Ok(bool cond, string what)
    {
        Console.WriteLine((cond ? "ok " : "not ok ") + (++n) + " - " + what);
        if (!cond)
            failures++;
        return cond;
    }

    static void Diag(string s)
    {
        foreach (var l in s.Split('\n'))
            Console.WriteLine("# " + l);
    }

    // A C process reading or writing a clock, one command per line.
    sealed class Peer : IDisposable
    {
        readonly Process p;

        public Peer(string mode, string name)
        {
            var si = new ProcessStartInfo(Environment.GetEnvironmentVariable("CS_PEER"), mode + " " + name) {
                UseShellExecute = false, RedirectStandardInput = true, RedirectStandardOutput = true,
            };
            p = Process.Start(si);
            procs.Add(p);
            string l = p.StandardOutput.ReadLine();
            if (l != "ready")
                throw new Exception("cs-peer " + mode + " " + name + " did not start: " + l);
        }

        public int Pid { get { return p.Id; } }

        public string Cmd(string c)
        {
            p.StandardInput.WriteLine(c);
            p.StandardInput.Flush();
            return p.StandardOutput.ReadLine();
        }

        // "0 NS" -> NS; anything else throws.
        public long Now()
        {
            string[] f = Cmd("now").Split(' ');
            if (f[0] != "0")
                throw new Exception("cs-peer now: " + string.Join(" ", f));
            return long.Parse(f[1]);
        }

        public void Do(string c)
        {
            string r = Cmd(c);
            if (r != "0")
                throw new Exception("cs-peer " + c + ": " + r);
        }

        public void Dispose()
        {
            try {
                p.StandardInput.Close();
                if (!p.WaitForExit(5000))
                    p.Kill();
            } catch (Exception) {
            }
        }
    }

    static T Throws<T>(Action a) where T : Exception
    {
        try {
            a();
        } catch (T e) {
            return e;
        } catch (Exception e) {
            Diag("threw " + e.GetType() + ": " + e.Message);
            return null;
        }
        return null;
    }

    // ---------------------------------------------------------------- cases

    // A fake game loop at 60 frames per second drives ShmclockClockPublisher
    // (TimeSource "unity") through scale changes and a pause; a C reader in
    // another process reads the same time as the writer, frame by frame:
    // between the writer's own reads just before and just after.
    static void GameLoopAndCReader()
    {
        string name = NewName();
        var pub = new ShmclockClockPublisher { clockName = name, timeSource = "unity" };
        pub.Awake();
        UnityEngine.Time.timeAsDouble = 100.0;
        UnityEngine.Time.timeScale = 1f;
        pub.Update();
        using (var peer = new Peer("reader", name))
        using (var ts = new ShmclockTimeSource(name)) {
            int outside = 0, frames = 0, pausedWrong = 0;
            long pausedAt = -1, pausedGame = 0;
            double game = 100.0;
            string worst = "";
            float[] scales = { 1f, 2f, 0.5f, 0f, 0f, 4f };
            foreach (float scale in scales) {
                UnityEngine.Time.timeScale = scale;
                for (int f = 0; f < 20; f++, frames++) {
                    game += (1.0 / 60) * scale;
                    UnityEngine.Time.timeAsDouble = game;
                    pub.Update();
                    long before = pub.Writer.Now(), c = peer.Now(), after = pub.Writer.Now();
                    if (c < before || c > after) {
                        outside++;
                        worst = string.Format("frame {0}: writer {1}..{2}, C reader {3}", frames, before, after, c);
                    }
                    // Paused: held where it stopped, which is the game time or,
                    // if readers had run past it at the old scale, where they
                    // were (time never goes back: by up to a frame's real
                    // duration at scale 0.5, so a loaded machine may see more
                    // than the 8 ms of a 16 ms frame; 2 s is generous).
                    if (scale == 0f) {
                        if (pausedAt < 0) {
                            pausedAt = c;
                            pausedGame = (long)Math.Round(game * 1e9);
                        }
                        if (c != pausedAt || c < (long)Math.Round(game * 1e9) || c > (long)Math.Round(game * 1e9) + 2 * S)
                            pausedWrong++;
                    }
                    Thread.Sleep(16);
                }
            }
            Ok(outside == 0, string.Format("60 fps game loop (scales 1, 2, 0.5, paused, 4), {0} frames: the C reader " +
                                           "in another process reads the writer's time at every frame{1}", frames,
                                           outside > 0 ? " (" + outside + " off; " + worst + ")" : ""));
            Ok(pausedWrong == 0, "while Time.timeScale is 0 the C reader's time stands still at the game time (" + pausedAt + ", game " + pausedGame + ")");
            var info = pub.Writer.Info;
            Ok(Math.Abs(info.Scale - 4.0) < 1e-6 && !info.Paused && info.Source == ClockSource.Fixed,
               "the clock runs at the last Time.timeScale (" + info.Scale + "), source fixed (unity)");
            int sec;
            uint nsec;
            long a = pub.Writer.Now();
            ts.GetTime(out sec, out nsec);
            long b = pub.Writer.Now(), t = sec * S + nsec;
            Ok(t >= a && t <= b && nsec < S, "ShmclockTimeSource.GetTime (AWSIM's shape) reads the same time");
        }
        pub.OnDestroy();
    }

    // TimeSource ss2: the scenario simulator's steps, stepped (no extrapolation).
    static void Ss2Steps()
    {
        string name = NewName();
        var pub = new ShmclockClockPublisher { clockName = name, timeSource = "ss2" };
        pub.Awake();
        using (var peer = new Peer("reader", name)) {
            bool ok = true;
            for (int i = 1; i <= 10; i++) {
                pub.SetTime(i, 500000000u);
                Thread.Sleep(2);
                ok &= peer.Now() == i * S + 500 * MS;
            }
            var info = pub.Writer.Info;
            Ok(ok && info.Stepped && info.Source == ClockSource.External,
               "TimeSource ss2: each SetTime(sec, nanosec) step is exactly what the C reader reads (stepped, external)");
        }
        pub.OnDestroy();
        var sys = new ShmclockClockPublisher { clockName = NewName(), timeSource = "ros2" };
        sys.Awake();
        Ok(sys.Writer == null, "TimeSource ros2: the engine does not write the clock (shmclockd does)");
    }

    // A C writer in another process; this process's C# reader follows it.
    static void ReaderFollowsCWriter()
    {
        string name = NewName();
        using (var w = new Peer("writer", name)) {
            w.Do("set " + 10 * S);
            using (var c = Clock.Open(name)) {
                long t = c.Now();
                Ok(t >= 10 * S && t < 70 * S, "set 10 s in the C writer: the C# reader reads " + t + " ns");
                Ok(Direct(c) == Clock.FastPath, "the reads below are raw internal calls when the fast path is here (" + Direct(c) + ")");
                var i0 = c.Info;
                Ok(i0.WriterPid == w.Pid && i0.WriterAlive && i0.Initialized && !i0.Stale && i0.JumpEpoch == 0 &&
                   i0.Commits >= 1 && i0.HeartbeatAgeNs >= -1 && i0.OwnerUid == getuid(),
                   string.Format("Info: the writer's pid ({0} = {1}), alive ({2}), initialized ({3}), not stale, jump epoch {4} (the first set starts the clock: no jump), {5} commits, owner uid {6}",
                                 i0.WriterPid, w.Pid, i0.WriterAlive, i0.Initialized, i0.JumpEpoch, i0.Commits, i0.OwnerUid));
                w.Do("scale 4");
                long s1 = Clock.SteadyNow(), t1 = c.Now(), s2 = Clock.SteadyNow();
                Thread.Sleep(200);
                long s3 = Clock.SteadyNow(), t2 = c.Now(), s4 = Clock.SteadyNow();
                double lo = 4.0 * (s3 - s2), hi = 4.0 * (s4 - s1);
                Ok(t2 - t1 >= lo * 0.999 && t2 - t1 <= hi * 1.001 && c.Info.Scale == 4.0,
                   string.Format("scale 4: {0:F1} ms of simulated time in {1:F1} ms of real time", (t2 - t1) / 1e6, (s3 - s2) / 1e6));
                w.Do("pause");
                long p1 = c.Now();
                Thread.Sleep(50);
                long p2 = c.Now();
                Ok(p1 == p2 && c.Info.Paused, "pause: time stands still (" + p1 + ")");
                w.Do("resume");
                Thread.Sleep(20);
                long r1 = c.Now();
                Ok(r1 > p2, "resume: time runs again from where it stopped");
                w.Do("set " + 5 * S);
                long b = c.Now();
                Ok(b >= 5 * S && b < r1, "set back to 5 s: the reader goes back (" + b + ")");
                long m = c.NowMonotonic();
                Ok(m >= r1, "NowMonotonic() does not go back with the jump (" + m + " >= " + r1 + ")");
                DateTime u = c.NowUtc();
                Ok(u.Kind == DateTimeKind.Utc && u.Year == 1970, "NowUtc() of a clock without UnixTimeAtZero: the epoch plus simulation time (" + u.ToString("o") + ")");
            }
        }
    }

    // Jumped fires twice (before, after) with the size, for a backward set in
    // the C writer; thresholds filter by size.
    static void JumpEvents()
    {
        string name = NewName();
        using (var w = new Peer("writer", name)) {
            w.Do("pause");  // exact sizes: the clock does not run between sets
            w.Do("set " + 100 * S);
            using (var c = Clock.Open(name)) {
                var seen = new List<JumpEventArgs>();
                var big = new List<JumpEventArgs>();
                var done = new ManualResetEventSlim();
                EventHandler<JumpEventArgs> h = (s, e) => {
                    lock (seen) {
                        seen.Add(e);
                        if (!e.Before)
                            done.Set();
                    }
                };
                c.Jumped += h;
                using (c.OnJump(new JumpThreshold { MinBackward = TimeSpan.FromSeconds(10) }, e => { lock (big) big.Add(e); })) {
                    w.Do("set " + 95 * S);
                    bool got = done.Wait(10000);
                    lock (seen) {
                        Ok(got && seen.Count == 2 && seen[0].Before && !seen[1].Before,
                           "a backward set in another process: Jumped fires before, then after (" + seen.Count + " events)");
                        Ok(seen.Count == 2 && seen[0].DeltaNs == -5 * S && seen[1].DeltaNs == -5 * S &&
                           seen[0].Kind == JumpKind.Backward && seen[0].Delta == TimeSpan.FromSeconds(-5),
                           "with its size, -5 s, and kind backward" + (seen.Count > 0 ? string.Format(" ({0} ns, {1})", seen[0].DeltaNs, seen[0].Kind) : ""));
                    }
                    lock (big)
                        Ok(big.Count == 0, "a handler wanting backward jumps of 10 s or more does not see it");
                    done.Reset();
                    w.Do("set " + 50 * S);
                    done.Wait(10000);
                    for (int i = 0; i < 100; i++) {
                        lock (big)
                            if (big.Count == 2)
                                break;
                        Thread.Sleep(20);
                    }
                    lock (big)
                        Ok(big.Count == 2 && big[0].DeltaNs == -45 * S, "but sees one of -45 s (" + big.Count + " events" + (big.Count > 0 ? ", " + big[0].DeltaNs + " ns" : "") + ")");
                }
                c.Jumped -= h;
                lock (seen)
                    seen.Clear();
                w.Do("set " + 10 * S);
                Thread.Sleep(300);
                c.Now();
                lock (seen)
                    Ok(seen.Count == 0, "after -= the handler no longer runs");

                // A handler that throws: reported on stderr, the others go on.
                int after = 0;
                using (c.OnJump(JumpThreshold.Any, e => { throw new InvalidOperationException("thrown by a test handler"); }))
                using (c.OnJump(JumpThreshold.Any, e => { if (!e.Before) Interlocked.Increment(ref after); })) {
                    w.Do("set " + 20 * S);
                    for (int i = 0; i < 250 && Volatile.Read(ref after) == 0; i++)
                        Thread.Sleep(20);
                    Ok(Volatile.Read(ref after) == 1, "a handler that throws does not stop the next one, nor the process");
                }
            }
            // Clocks with handlers dropped without Dispose: collected and
            // finalized while jumps come; nothing calls a freed handler.
            for (int i = 0; i < 20; i++) {
                var lost = Clock.Open(name);
                lost.OnJump(JumpThreshold.Any, e => { });
            }
            GC.Collect();
            GC.WaitForPendingFinalizers();
            for (int i = 0; i < 5; i++) {
                w.Do("set " + (30 + i) * S);
                GC.Collect();
                GC.WaitForPendingFinalizers();
            }
            Ok(true, "20 clocks with handlers dropped without Dispose, collected while the clock jumps: no crash");
        }
    }

    // Dispose() from inside the clock's own jump handler (not allowed: it
    // stops the watcher thread that runs the handler) throws
    // InvalidOperationException there, and the clock disposes once the
    // handler returned. Before (issue 52), the process hung at exit.
    static void DisposeInHandler()
    {
        string name = NewName();
        using (var w = new Peer("writer", name)) {
            w.Do("pause");
            w.Do("set " + 100 * S);
            var c = Clock.Open(name);
            Exception seen = null;
            var done = new ManualResetEventSlim();
            c.Jumped += (s, e) => {
                if (e.Before)
                    return;
                try {
                    c.Dispose();
                } catch (Exception x) {
                    seen = x;
                }
                done.Set();
            };
            w.Do("set " + 50 * S);
            Ok(done.Wait(10000) && seen is InvalidOperationException,
               "Dispose() inside its own Jumped handler: InvalidOperationException (" +
               (seen == null ? "none" : seen.GetType().Name + ": " + seen.Message) + ")");
            c.Dispose();
            bool disposed = false;
            try {
                c.Now();
            } catch (ObjectDisposedException) {
                disposed = true;
            }
            Ok(disposed, "... and Dispose() after the handler returned disposes it");
        }
    }

    // A handler of one handle removes a handler of another handle of the
    // same clock while that one is delivered on its own watcher thread.
    // Inside a handler the library cannot wait for the other delivery: the
    // removed handler's target must outlive it (it was freed at once, and
    // the other watcher called the freed handle: an exception in a native
    // callback, the process aborted).
    static void CrossHandles()
    {
        string name = NewName();
        using (var w = new Peer("writer", name)) {
            w.Do("pause");
            w.Do("set " + 1 * S);
            using (var a = Clock.Open(name))
            using (var b = Clock.Open(name)) {
                IDisposable rb = null;
                int disposed = 0, ran = 0;
                a.OnJump(JumpThreshold.Any, e => {
                    if (!e.Before)
                        return;
                    var r = Interlocked.Exchange(ref rb, null);
                    if (r != null) {
                        r.Dispose();
                        Interlocked.Increment(ref disposed);
                    }
                });
                int i;
                for (i = 0; i < 300; i++) {
                    Volatile.Write(ref rb, b.OnJump(JumpThreshold.Any, e => {
                        Interlocked.Increment(ref ran);
                        Thread.SpinWait(200);
                    }));
                    int before = Volatile.Read(ref disposed);
                    w.Do("set " + (2 + i % 2) * S);
                    for (int k = 0; k < 2500 && Volatile.Read(ref disposed) == before; k++)
                        Thread.Sleep(2);
                    if (Volatile.Read(ref disposed) == before)
                        break;
                }
                Ok(i == 300, "300 jumps, each removing the other handle's handler from a handler: "
                   + i + " done, no crash (the other ran " + Volatile.Read(ref ran) + " times)");
            }
        }
    }

    // TimeSpan.MaxValue, where a duration or a timeout is taken: saturated
    // (Ticks * 100 wrapped to -100 ns: a threshold refused with EINVAL, a
    // sleep refused, an async timeout that expired at once).
    static void Saturation()
    {
        string name = NewName();
        using (var w = Writer.Open(name))
        using (var c = Clock.Open(name)) {
            w.SetTime(0);
            Exception err = null;
            try {
                c.OnJump(new JumpThreshold { MinForward = TimeSpan.MaxValue, MinBackward = TimeSpan.MaxValue },
                         e => { }).Dispose();
            } catch (Exception e) {
                err = e;
            }
            Ok(err == null, "a jump threshold of TimeSpan.MaxValue is taken" + (err != null ? ": " + err.Message : ""));
            var cts = new CancellationTokenSource();
            var t = c.SleepForAsync(TimeSpan.FromHours(1), cts.Token, TimeSpan.MaxValue);
            Thread.Sleep(200);
            Ok(!t.IsCompleted, "SleepForAsync(1 h, timeout: TimeSpan.MaxValue) still waits after 200 ms" +
               (t.IsFaulted ? " (" + t.Exception.InnerException.GetType().Name + ")" : ""));
            cts.Cancel();
            try {
                t.Wait(5000);
            } catch (AggregateException) {
            }
            Ok(t.IsCanceled, "and ends when cancelled");
            var c2 = new CancellationTokenSource(200);
            err = null;
            try {
                c.SleepFor(TimeSpan.MaxValue, c2.Token);
            } catch (Exception e) {
                err = e;
            }
            Ok(err is OperationCanceledException, "SleepFor(TimeSpan.MaxValue) sleeps until cancelled" +
               (err != null ? " (" + err.GetType().Name + ")" : " (returned)"));
        }
    }

    // Async and blocking waits in simulated time.
    static void Waits()
    {
        string name = NewName();
        using (var w = new Peer("writer", name)) {
            w.Do("pause");  // first: the clock starts paused at exactly 10 s
            w.Do("set " + 10 * S);
            using (var c = Clock.Open(name)) {
                long target = 11 * S;
                Task t = c.SleepUntilAsync(target);
                Thread.Sleep(300);
                Ok(!t.IsCompleted, "SleepUntilAsync on a paused clock has not woken after 300 ms of real time");
                w.Do("step " + 500 * MS);
                Thread.Sleep(200);
                Ok(!t.IsCompleted, "nor after a step to 10.5 s");
                w.Do("step " + 600 * MS);
                bool woke = t.Wait(10000);
                long at = c.Now();
                Ok(woke && at == 11100 * MS, "a step to 11.1 s wakes it, at 11.1 s (" + at + ")");

                w.Do("resume");
                w.Do("scale 10");
                long start = c.Now();
                var sw = Stopwatch.StartNew();
                t = c.SleepForAsync(TimeSpan.FromSeconds(2));
                woke = t.Wait(20000);
                long end = c.Now();
                // Late by at most 2 s of real time (20 s simulated), whatever the load.
                Ok(woke && end - start >= 2 * S && end - start < 22 * S,
                   string.Format("SleepForAsync(2 s) at scale 10 wakes after {0:F3} s of simulated time ({1} ms real)",
                                 (end - start) / 1e9, sw.ElapsedMilliseconds));

                w.Do("pause");
                long now = c.Now();
                t = c.SleepUntilAsync(now + 10 * S);
                w.Do("set " + (now + 20 * S));
                Ok(t.Wait(10000), "a jump past the target wakes the sleeper");

                now = c.Now();
                t = c.SleepUntilAsync(now + 10 * S, jumpError: true);
                // A jump before the sleeper started waiting is not one it
                // sees: jump again until it has (at most 5 times).
                for (int i = 1; i <= 5 && !t.IsCompleted; i++) {
                    w.Do("set " + (now - i * S));
                    try {
                        t.Wait(2000);
                    } catch (AggregateException) {
                    }
                }
                var ex = Throws<AggregateException>(() => t.Wait(10000));
                Ok(ex != null && ex.InnerException is ShmclockException && ((ShmclockException)ex.InnerException).Errno == Errno.EINTR,
                   "with jumpError, a backward jump ends it with ShmclockException EINTR" + (ex != null ? " (" + ex.InnerException.Message + ")" : ""));

                var cts = new CancellationTokenSource();
                t = c.SleepUntilAsync(now + 100 * S, cts.Token);
                Thread.Sleep(50);
                cts.Cancel();
                ex = Throws<AggregateException>(() => t.Wait(10000));
                Ok(ex != null && t.IsCanceled, "a CancellationToken cancels it (the task is Canceled)");

                Ok(Throws<TimeoutException>(() => c.SleepUntil(now + 100 * S, timeout: TimeSpan.FromMilliseconds(100))) != null,
                   "a blocking SleepUntil on a paused clock with a 100 ms timeout throws TimeoutException");

                // CancelSleeps wakes a blocking sleep (one already sleeping:
                // called until the sleeper has been woken).
                Exception woken = null;
                var sleeper = new Thread(() => {
                    try {
                        c.SleepUntil(c.Now() + 100 * S);
                    } catch (Exception e) {
                        woken = e;
                    }
                });
                sleeper.Start();
                for (int i = 0; i < 100 && !sleeper.Join(50); i++)
                    c.CancelSleeps();
                Ok(woken is ShmclockException && ((ShmclockException)woken).Errno == Errno.ECANCELED,
                   "CancelSleeps wakes a blocking SleepUntil with ShmclockException ECANCELED");

                // SleepFor counts a backward jump as no time elapsed, a forward one as elapsed.
                now = c.Now();
                t = c.SleepForAsync(TimeSpan.FromSeconds(2));
                w.Do("set " + (now - 10 * S));
                w.Do("step " + 1500 * MS);
                Thread.Sleep(300);
                bool notYet = !t.IsCompleted;
                w.Do("step " + 600 * MS);
                Ok(notYet && t.Wait(10000), "SleepForAsync(2 s) across a 10 s backward jump: 1.5 s later not done, 2.1 s later done");
                now = c.Now();
                t = c.SleepForAsync(TimeSpan.FromSeconds(2));
                Thread.Sleep(100);
                w.Do("set " + (now + 5 * S));
                Ok(t.Wait(10000), "and a 5 s forward jump counts as elapsed");

                // Many waits at once: one thread for all, each woken at its time.
                now = c.Now();
                int threads0 = Process.GetCurrentProcess().Threads.Count;
                var many = new Task[200];
                for (int k = 0; k < many.Length; k++)
                    many[k] = c.SleepUntilAsync(now + (k + 1) * 10 * MS);
                int threads1 = Process.GetCurrentProcess().Threads.Count;
                w.Do("step " + S);
                bool firstHalf = Task.WaitAll(new ArraySegment<Task>(many, 0, 100).ToArray(), 10000);
                Thread.Sleep(100);
                int early = 0;
                for (int k = 100; k < many.Length; k++)
                    if (many[k].IsCompleted)
                        early++;
                w.Do("step " + S);
                bool all = Task.WaitAll(many, 10000);
                Ok(firstHalf && early == 0 && all && threads1 - threads0 <= 2,
                   string.Format("200 async waits on a paused clock: a step of 1 s wakes the 100 due, none of the others ({0} early), " +
                                 "the next step the rest; {1} more threads for all of them", early, threads1 - threads0));

                t = c.SleepUntilAsync(now + 100 * S);
                Thread.Sleep(50);
                c.Dispose();
                ex = Throws<AggregateException>(() => t.Wait(10000));
                Ok(ex != null && ex.InnerException is ObjectDisposedException, "Dispose ends a sleep in progress with ObjectDisposedException");
            }
        }
    }

    // A Writer takes over a clock whose writer is gone: its time goes on
    // (no jump); a game started over publishes its own time as a jump.
    static void TakeOver()
    {
        string name = NewName();
        using (var peer = new Peer("writer", name)) {
            peer.Do("pause");
            peer.Do("set " + 50 * S);
        }
        using (var w = Writer.Open(name)) {
            var i = w.Info;
            Ok(w.Now() == 50 * S && i.JumpEpoch == 0 && i.WriterGeneration == 2,
               "Writer.Open takes over a clock its C writer left: still 50 s, no jump, writer generation " + i.WriterGeneration);
        }
        var pub = new ShmclockClockPublisher { clockName = name, timeSource = "unity" };
        pub.Awake();
        UnityEngine.Time.timeAsDouble = 1.0;
        UnityEngine.Time.timeScale = 0f;
        pub.Update();
        var j = pub.Writer.Info;
        Ok(pub.Writer.Now() == S && j.JumpEpoch == 1 && j.LastJumpNs == -49 * S,
           "a game started over publishes its time as a jump (" + j.LastJumpNs + " ns)");
        UnityEngine.Time.timeAsDouble = 1.5;
        pub.Update();
        Ok(pub.Writer.Now() == 1500 * MS && pub.Writer.Info.JumpEpoch == 1, "and its next frames are no jumps");
        pub.OnDestroy();
    }

    // OSI: the UNIX time of simulation zero makes NowUtc the simulated world's time.
    static void UnixTime()
    {
        string name = NewName();
        using (var w = Writer.Open(name))
        using (var c = Clock.Open(name)) {
            var zero = new DateTime(2026, 1, 1, 0, 0, 0, DateTimeKind.Utc);
            w.Pause();
            w.SetUnixAtZero((zero - new DateTime(1970, 1, 1, 0, 0, 0, DateTimeKind.Utc)).Ticks * 100);
            w.SetTime(TimeSpan.FromSeconds(10));
            DateTime u = c.NowUtc();
            Ok(u == zero.AddSeconds(10) && c.Info.HasUnixAtZero && c.NowTimeSpan() == TimeSpan.FromSeconds(10),
               "SetUnixAtZero(2026-01-01) and SetTime(10 s): NowUtc() is " + u.ToString("o"));
            var ls = Throws<ShmclockException>(() => Lockstep.Join(name, "x"));
            Ok(ls != null && ls.Errno == Errno.EOPNOTSUPP,
               "joining the lockstep of a clock not in lockstep: ShmclockException EOPNOTSUPP");
        }
    }

    // Misuse throws; nothing crashes.
    static void Misuse()
    {
        Ok(Throws<ArgumentException>(() => Clock.Open("bad name")) != null, "a bad name: ArgumentException");
        Ok(Throws<ArgumentException>(() => Writer.Open(new string('x', 65))) != null, "a 65-character name: ArgumentException");
        var e = Throws<ShmclockException>(() => Clock.Open("cs-test-no-such-clock-" + Process.GetCurrentProcess().Id));
        Ok(e != null && e.Errno == Errno.ENOENT && e.Message.Contains("no such clock"),
           "no such clock: ShmclockException ENOENT with the library's message (" + (e != null ? e.Message : "") + ")");
        string name = NewName();
        var w = Writer.Open(name);
        var c = Clock.Open(name);
        var nd = Throws<ShmclockException>(() => c.Now());
        Ok(nd != null && nd.Errno == Errno.ENODATA, "Now() before the first value: ShmclockException ENODATA");
        int sec0;
        uint nsec0;
        using (var ts = new ShmclockTimeSource(name)) {
            ts.GetTime(out sec0, out nsec0);
            Ok(sec0 == 0 && nsec0 == 0, "ShmclockTimeSource.GetTime before the first value: 0 (ROS's uninitialized), no exception");
            w.Pause();
            w.SetTime(-1500 * MS);
            ts.GetTime(out sec0, out nsec0);
            Ok(sec0 == -2 && nsec0 == 500000000u, "and at -1.5 s: sec -2, nanosec 500000000 (" + sec0 + ", " + nsec0 + ")");
            w.Dispose();
            w = Writer.Open(name);
        }
        var busy = Throws<ShmclockException>(() => Writer.Open(name));
        Ok(busy != null && busy.Errno == Errno.EBUSY, "a second writer: ShmclockException EBUSY");
        Ok(Throws<ArgumentException>(() => { w.SetTime(0); w.SetScale(-1); }) != null, "SetScale(-1): ArgumentException");

        // Two threads on one Writer: one of them is told, none crashes.
        int wrong = 0, other = 0;
        var stop = DateTime.UtcNow.AddMilliseconds(500);
        ThreadStart hammer = () => {
            while (DateTime.UtcNow < stop) {
                try {
                    w.SetScale(2.0);
                    w.Now();
                } catch (InvalidOperationException) {
                    Interlocked.Increment(ref wrong);
                } catch (Exception) {
                    Interlocked.Increment(ref other);
                }
            }
        };
        var t1 = new Thread(hammer);
        var t2 = new Thread(hammer);
        t1.Start();
        t2.Start();
        t1.Join();
        t2.Join();
        Ok(wrong > 0 && other == 0, "a Writer used by two threads at once: InvalidOperationException (" + wrong + " times), nothing else");

        c.Dispose();
        c.Dispose();
        Ok(Throws<ObjectDisposedException>(() => c.Now()) != null, "Now() on a disposed Clock: ObjectDisposedException");
        Ok(Throws<ObjectDisposedException>(() => { var i = c.Info; }) != null, "Info of a disposed Clock: ObjectDisposedException");
        w.Dispose();
        Ok(Throws<ObjectDisposedException>(() => w.SetTime(1)) != null, "SetTime on a disposed Writer: ObjectDisposedException");

        // Dispose while other threads read: they get ObjectDisposedException, never freed memory.
        w = Writer.Open(name);
        w.SetTime(0);
        c = Clock.Open(name);
        int disposedSeen = 0, bad = 0;
        var readers = new Thread[2];
        var cc = c;
        for (int i = 0; i < readers.Length; i++) {
            readers[i] = new Thread(() => {
                for (;;) {
                    try {
                        cc.Now();
                    } catch (ObjectDisposedException) {
                        Interlocked.Increment(ref disposedSeen);
                        return;
                    } catch (Exception) {
                        Interlocked.Increment(ref bad);
                        return;
                    }
                }
            });
            readers[i].Start();
        }
        Thread.Sleep(100);
        c.Dispose();
        foreach (var r in readers)
            r.Join();
        GC.Collect();
        GC.WaitForPendingFinalizers();
        Ok(disposedSeen == 2 && bad == 0, "Dispose while two threads read: each gets ObjectDisposedException");
        long before = GC.GetAllocatedBytesForCurrentThread();
        using (var c2 = Clock.Open(name)) {
            before = GC.GetAllocatedBytesForCurrentThread();
            long s = 0;
            for (int i = 0; i < 100000; i++)
                s += c2.Now() + c2.NowMonotonic() + c2.NowUnix();
            long alloc = GC.GetAllocatedBytesForCurrentThread() - before;
            Ok(alloc == 0, "100 000 Now(), NowMonotonic(), NowUnix() allocate " + alloc + " bytes");
        }
        w.Dispose();
    }

    static bool Direct(Clock c)
    {
        return (bool)typeof(Clock).GetProperty("ReadsDirect", System.Reflection.BindingFlags.NonPublic |
                                                System.Reflection.BindingFlags.Instance).GetValue(c, null);
    }

    // Under Mono the reads are raw internal calls (libshmclock-mono.so, next
    // to Shmclock.dll here) on a handle that runs no jump handlers; a clock
    // with handlers reads by P/Invoke while it has them (reads wait for a
    // handler running before a jump), and a handler added after raw reads
    // is not given the jumps that came before it.
    static void FastPath()
    {
        bool mono = Type.GetType("Mono.Runtime") != null;
        Ok(!mono || Clock.FastPath, "under Mono the reads are raw internal calls (Clock.FastPath " + Clock.FastPath + ")");
        if (!Clock.FastPath)
            return;
        string name = NewName();
        using (var w = new Peer("writer", name)) {
            w.Do("pause");
            w.Do("set " + 10 * S);
            using (var c = Clock.Open(name)) {
                Ok(Direct(c) && c.Now() == 10 * S, "a clock without handlers reads directly (" + c.Now() + ")");
                // Jumps while this clock reads directly: its handle for
                // handlers does not see them.
                for (int i = 1; i <= 3; i++) {
                    w.Do("set " + (10 + 10 * i) * S);
                    Ok(c.Now() == (10 + 10 * i) * S, "a set the raw read follows: " + c.Now());
                }
                var seen = new List<JumpEventArgs>();
                using (c.OnJump(JumpThreshold.Any, e => { lock (seen) seen.Add(e); })) {
                    Ok(!Direct(c), "with a jump handler, reads go by P/Invoke");
                    Thread.Sleep(300);
                    lock (seen)
                        Ok(seen.Count == 0, "a handler added after three jumps read directly is given none of them (" + seen.Count + ")");
                    w.Do("set " + 5 * S);
                    Ok(c.Now() == 5 * S, "the read after a set, with a handler: " + c.Now());
                    lock (seen)
                        Ok(seen.Count >= 1 && seen[0].Before && seen[0].DeltaNs == -35 * S,
                           "and the handler ran before that read returned (" + seen.Count + " events)");
                }
                Ok(Direct(c), "the handler removed: direct reads again");
                // A handler that adds a handler (OnJump brings the handle for
                // handlers up to date with a read, here inside its delivery).
                IDisposable inner = null;
                using (c.OnJump(JumpThreshold.Any, e => {
                           if (e.Before && Volatile.Read(ref inner) == null)
                               Volatile.Write(ref inner, c.OnJump(JumpThreshold.Any, x => { }));
                       })) {
                    w.Do("set " + 6 * S);
                    c.Now();
                    for (int i = 0; i < 250 && Volatile.Read(ref inner) == null; i++)
                        Thread.Sleep(20);
                    Ok(Volatile.Read(ref inner) != null && c.Now() == 6 * S, "a handler that adds a handler during a jump: no deadlock");
                }
                if (inner != null)
                    inner.Dispose();
                Ok(Direct(c), "both removed: direct reads again");
                w.Do("set " + 7 * S);
                long u = 0;
                int tr = c.TryNow(out u);
                // The jump-free time: the sets since the start were +30 s, -35 s, +1 s, +1 s.
                Ok(c.Now() == 7 * S && tr == 0 && u == 7 * S && c.NowMonotonic() == 7 * S - (30 - 35 + 1 + 1) * S,
                   string.Format("Now, TryNow, NowMonotonic directly: {0}, {1}, {2}", c.Now(), u, c.NowMonotonic()));
                // Collections while threads read directly: the runtime
                // suspends them inside the raw call.
                int bad = 0;
                var readers = new Thread[2];
                var stop = new ManualResetEventSlim();
                for (int i = 0; i < readers.Length; i++) {
                    readers[i] = new Thread(() => {
                        while (!stop.IsSet) {
                            long v;
                            if (c.TryNow(out v) != 0 || v != 7 * S)
                                Interlocked.Increment(ref bad);
                        }
                    });
                    readers[i].Start();
                }
                for (int i = 0; i < 50; i++) {
                    var junk = new byte[1 << 16];
                    GC.KeepAlive(junk);
                    GC.Collect();
                }
                stop.Set();
                foreach (var r in readers)
                    r.Join();
                Ok(bad == 0, "50 collections while two threads read directly: every read right (" + bad + " wrong)");
            }
            using (var f = Clock.Open(null, ClockOptions.FallbackSystem))
                Ok(!Direct(f) && f.IsFallback, "system time (FallbackSystem, no clock): reads by P/Invoke");
        }
    }

    static int Main(string[] args)
    {
        var cases = new Dictionary<string, Action> {
            { "game loop and C reader", GameLoopAndCReader },
            { "ss2 steps", Ss2Steps },
            { "reader follows a C writer", ReaderFollowsCWriter },
            { "jump events", JumpEvents },
            { "handlers across handles", CrossHandles },
            { "Dispose in a handler", DisposeInHandler },
            { "TimeSpan.MaxValue", Saturation },
            { "waits", Waits },
            { "UNIX time", UnixTime },
            { "take over", TakeOver },
            { "misuse", Misuse },
            { "fast path", FastPath },
        };
        try {
            foreach (var kv in cases) {
                Diag(kv.Key);
                try {
                    kv.Value();
                } catch (Exception e) {
                    Ok(false, kv.Key + ": " + e.GetType() + ": " + e.Message);
                    Diag(e.ToString());
                }
            }
        } finally {
            foreach (var p in procs) {
                try {
                    if (!p.HasExited)
                        p.Kill();
                } catch (Exception) {
                }
            }
            foreach (var s in created)
                File.Delete("/dev/shm/shmclock." + s);
        }
        Console.WriteLine("1.." + n);
        Diag(failures + " failure(s)");
        return failures > 0 ? 1 : 0;
    }
}
