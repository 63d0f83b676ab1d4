// SPDX-License-Identifier: MIT
// shmclock-bench-csharp: run by `shmclock-bench csharp` under mono. Prints
// one JSON object:
//  - contenders: Clock.Now() against Stopwatch.GetTimestamp() in the same
//    process, per call, timed in batches of 50 (unrolled by ten), taking
//    turns batch by batch (goal: 1.5x);
//  - awsim: AWSIM's design, a `lock`-protected GetTime() (as its
//    DotNetSimulationTimeSource: the state is advanced under the lock on
//    every call) read by a 100 Hz clock thread and 1, 4, 8 sensor threads
//    reading as fast as they can, against ShmclockTimeSource under the same
//    load: per-read p50/p99 (batches of 10 reads, timed with CLOCK_MONOTONIC)
//    and the clock thread's lateness behind its 10 ms deadlines.
//
//   mono shmclock-bench-csharp.exe BATCHES SECONDS_PER_LOAD
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Globalization;
using System.Text;
using System.Threading;
using AWSIM;
using Shmclock;

// AWSIM's DotNetSimulationTimeSource, in shape: every GetTime takes the lock.
sealed class LockedTimeSource : ITimeSource
{
    readonly object lockObject = new object();
    DateTime prev = DateTime.UtcNow;
    double time;

    public void GetTime(out int seconds, out uint nanoseconds)
    {
        lock (lockObject) {
            DateTime now = DateTime.UtcNow;
            time += (now - prev).TotalSeconds * 1.0;  // * TimeScaleProvider.TimeScale
            prev = now;
            seconds = (int)time;
            nanoseconds = (uint)((time - seconds) * 1e9);
        }
    }
}

static class BenchCsharp
{
    static double Pct(List<double> v, double p)
    {
        v.Sort();
        return v.Count == 0 ? 0 : v[Math.Min(v.Count - 1, (int)(p * v.Count))];
    }

    static string Stats(List<double> v)
    {
        double max = 0;
        foreach (double x in v)
            max = Math.Max(max, x);
        return string.Format(CultureInfo.InvariantCulture, "\"p50\": {0:F2}, \"p99\": {1:F2}, \"p999\": {2:F2}, \"max\": {3:F2}",
                             Pct(v, 0.5), Pct(v, 0.99), Pct(v, 0.999), max);
    }

    static double BatchNow(Clock c)
    {
        long t0 = Clock.SteadyNow(), s = 0;
        for (int i = 0; i < 5; i++) {
            s += c.Now(); s += c.Now(); s += c.Now(); s += c.Now(); s += c.Now();
            s += c.Now(); s += c.Now(); s += c.Now(); s += c.Now(); s += c.Now();
        }
        return (Clock.SteadyNow() - t0 + (s & 0)) / 50.0;
    }

    static double BatchStopwatch()
    {
        long t0 = Clock.SteadyNow(), s = 0;
        for (int i = 0; i < 5; i++) {
            s += Stopwatch.GetTimestamp(); s += Stopwatch.GetTimestamp(); s += Stopwatch.GetTimestamp();
            s += Stopwatch.GetTimestamp(); s += Stopwatch.GetTimestamp(); s += Stopwatch.GetTimestamp();
            s += Stopwatch.GetTimestamp(); s += Stopwatch.GetTimestamp(); s += Stopwatch.GetTimestamp();
            s += Stopwatch.GetTimestamp();
        }
        return (Clock.SteadyNow() - t0 + (s & 0)) / 50.0;
    }

    // One load: a 100 Hz clock thread and @sensors threads on @src for @seconds.
    static string Load(ITimeSource src, int sensors, double seconds)
    {
        var stop = new ManualResetEventSlim();
        var reads = new List<double>[sensors];
        var late = new List<double>();
        var threads = new List<Thread>();
        long total = 0;
        for (int k = 0; k < sensors; k++) {
            var mine = reads[k] = new List<double>(1 << 20);
            threads.Add(new Thread(() => {
                int sec;
                uint nsec;
                long n = 0;
                while (!stop.IsSet) {
                    long t0 = Clock.SteadyNow();
                    for (int i = 0; i < 10; i++)
                        src.GetTime(out sec, out nsec);
                    long t1 = Clock.SteadyNow();
                    n += 10;
                    if (mine.Count < (1 << 20))
                        mine.Add((t1 - t0) / 10.0);
                }
                Interlocked.Add(ref total, n);
            }));
        }
        // The clock thread: AWSIM's ClockPublisher reads its time source
        // every 10 ms and publishes it; lateness is how far behind its
        // deadline the read returned.
        threads.Add(new Thread(() => {
            long next = Clock.SteadyNow() + 10000000L;
            int sec;
            uint nsec;
            while (!stop.IsSet) {
                long wait = next - Clock.SteadyNow();
                if (wait > 0)
                    Thread.Sleep(TimeSpan.FromTicks(wait / 100));
                while (Clock.SteadyNow() < next) {
                }
                src.GetTime(out sec, out nsec);
                late.Add((Clock.SteadyNow() - next) / 1e3);
                next += 10000000L;
            }
        }));
        foreach (var t in threads)
            t.Start();
        Thread.Sleep(TimeSpan.FromSeconds(seconds));
        stop.Set();
        foreach (var t in threads)
            t.Join();
        var all = new List<double>();
        foreach (var r in reads)
            all.AddRange(r);
        // (A closing brace after a format item would be read as part of it.)
        return "{" + string.Format(CultureInfo.InvariantCulture,
                                   "\"read_p50\": {0:F1}, \"read_p99\": {1:F1}, \"reads_per_s\": {2:F0}, " +
                                   "\"late_p50_us\": {3:F1}, \"late_p99_us\": {4:F1}, \"late_max_us\": {5:F1}",
                                   Pct(all, 0.5), Pct(all, 0.99), total / seconds, Pct(late, 0.5), Pct(late, 0.99),
                                   late.Count > 0 ? Pct(late, 1.0) : 0) + "}";
    }

    static int Main(string[] args)
    {
        int batches = args.Length > 0 ? int.Parse(args[0]) : 200000;
        double seconds = args.Length > 1 ? double.Parse(args[1], CultureInfo.InvariantCulture) : 3;
        string name = "bench-cs-" + Process.GetCurrentProcess().Id;
        var json = new StringBuilder();
        try {
            using (var w = Writer.Open(name))
            using (var c = Clock.Open(name)) {
                w.SetTime(0);
                var sw = new List<double>(batches);
                var now = new List<double>(batches);
                for (int i = 0; i < 1000; i++) {
                    BatchNow(c);
                    BatchStopwatch();
                }
                for (int i = 0; i < batches; i++) {
                    sw.Add(BatchStopwatch());
                    now.Add(BatchNow(c));
                }
                string suspend = Environment.GetEnvironmentVariable("MONO_THREADS_SUSPEND");
                json.Append("{\"language\": \"C# (Mono " + Environment.Version +
                            (string.IsNullOrEmpty(suspend) ? "" : ", MONO_THREADS_SUSPEND=" + suspend) +
                            (Clock.FastPath ? ", raw internal calls" : ", P/Invoke") + ")\", ");
                json.Append("\"contenders\": [{\"name\": \"Stopwatch.GetTimestamp()\", " + Stats(sw) + "}, ");
                json.Append("{\"name\": \"Shmclock.Clock.Now()\", " + Stats(now) + "}], \"goal\": 1.5");
                if (seconds > 0) {
                    json.Append(", \"awsim\": [");
                    int[] loads = { 1, 4, 8 };
                    for (int i = 0; i < loads.Length; i++) {
                        string locked = Load(new LockedTimeSource(), loads[i], seconds);
                        string shm;
                        using (var ts = new ShmclockTimeSource(name))
                            shm = Load(ts, loads[i], seconds);
                        json.Append((i > 0 ? ", " : "") + "{\"sensors\": " + loads[i] + ", \"lock\": " + locked +
                                    ", \"shmclock\": " + shm + "}");
                    }
                    json.Append("]");
                }
                json.Append("}");
                w.Unlink();
            }
        } catch (Exception e) {
            Console.Error.WriteLine("shmclock-bench-csharp: " + e.Message);
            try {
                Clock.Unlink(name);
            } catch (Exception) {
            }
            return 1;
        }
        Console.WriteLine(json.ToString());
        return 0;
    }
}
