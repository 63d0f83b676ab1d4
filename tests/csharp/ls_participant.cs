// SPDX-License-Identifier: MIT
// A C# lockstep participant (Shmclock.Lockstep), the twin of
// tests/lockstep/ls_participant.c, for lockstep_csharp.py:
//
//   ls-participant-cs.exe CLOCK WHO PERIOD END [--dir DIR --peers A,B,...] [--log FILE]
//                         [--async] [--check-thread]
//
// Joins CLOCK as WHO, steps at every multiple of PERIOD (ns) up to END, then
// leaves. With --dir it binds DIR/WHO.sock (a Unix datagram socket, through
// libc: Mono's class library has no Unix endpoint) and at each step T sends
// "WHO@T" to every peer, after logging the messages stamped before T that
// have arrived (the lockstep guarantee: all of them), in the C twin's
// format. --async steps with AdvanceAsync in an async loop (its steps
// resume on pool threads); --check-thread checks that a grant from another
// thread works, that one during an AdvanceAsync throws
// InvalidOperationException, and one after Leave ObjectDisposedException.
// Exit: 0; 1 a lockstep call failed (printed); 2 usage; 3 the thread check failed.
using System;
using System.Collections.Generic;
using System.IO;
using System.Runtime.InteropServices;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Shmclock;

static class LsParticipant
{
    [DllImport("libc", SetLastError = true)] static extern int socket(int domain, int type, int protocol);
    [DllImport("libc", SetLastError = true)] static extern int bind(int fd, byte[] addr, int len);
    [DllImport("libc", SetLastError = true)] static extern long sendto(int fd, byte[] buf, long len, int flags, byte[] addr, int alen);
    [DllImport("libc", SetLastError = true)] static extern long recv(int fd, byte[] buf, long len, int flags);
    [DllImport("libc")] static extern int unlink(string path);

    const int AF_UNIX = 1, SOCK_DGRAM = 2, SOCK_CLOEXEC = 0x80000, MSG_PEEK = 0x2, MSG_DONTWAIT = 0x40;

    static byte[] Addr(string path)
    {
        var a = new byte[110];  // sa_family_t + sun_path[108]
        a[0] = AF_UNIX;
        Encoding.ASCII.GetBytes(path, 0, path.Length, a, 2);
        return a;
    }

    struct Msg : IComparable<Msg>
    {
        public long T;
        public string Who;

        public int CompareTo(Msg o)
        {
            return T != o.T ? T.CompareTo(o.T) : string.CompareOrdinal(Who, o.Who);
        }
    }

    static int Main(string[] args)
    {
        if (args.Length < 4) {
            Console.Error.WriteLine("usage: ls-participant-cs.exe CLOCK WHO PERIOD END [--dir DIR --peers A,B] [--log FILE] [--async] [--check-thread]");
            return 2;
        }
        string clock = args[0], who = args[1], dir = null, peers = null, logPath = null;
        long period = long.Parse(args[2]), end = long.Parse(args[3]);
        bool async = false, checkThread = false;
        for (int i = 4; i < args.Length; i++) {
            if (args[i] == "--async")
                async = true;
            else if (args[i] == "--check-thread")
                checkThread = true;
            else if (i + 1 < args.Length && args[i] == "--dir")
                dir = args[++i];
            else if (i + 1 < args.Length && args[i] == "--peers")
                peers = args[++i];
            else if (i + 1 < args.Length && args[i] == "--log")
                logPath = args[++i];
        }
        if (period <= 0)
            return 2;
        int fd = -1;
        string self = null;
        if (dir != null) {
            self = dir + "/" + who + ".sock";
            unlink(self);
            fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
            byte[] a = Addr(self);
            if (fd < 0 || bind(fd, a, a.Length) < 0) {
                Console.Error.WriteLine("ls-participant-cs: bind: errno " + Marshal.GetLastWin32Error());
                return 1;
            }
        }
        StreamWriter log = logPath != null ? new StreamWriter(logPath) { NewLine = "\n" } : null;
        Lockstep p;
        try {
            p = Lockstep.Join(clock, who);
        } catch (Exception e) {
            Console.Error.WriteLine("ls-participant-cs " + who + ": join: " + e.Message);
            return 1;
        }
        if (checkThread) {
            // Another thread's grant, not during a call here, is this
            // participant's (the joining thread lives): how an await
            // resumes outside Unity (issue 52).
            Exception seen = null;
            var t = new Thread(() => {
                try {
                    p.Grant(p.JoinedAt);
                } catch (Exception e) {
                    seen = e;
                }
            });
            t.Start();
            t.Join();
            if (seen != null) {
                Console.Error.WriteLine("ls-participant-cs " + who + ": a grant from another thread gave " +
                                        seen.GetType() + ": " + seen.Message);
                return 3;
            }
            // Two calls at once are refused: a grant while an
            // AdvanceAsync is under way (asserted when the step had not
            // ended by then: the other participants may have let the
            // clock there at once).
            long first = (p.JoinedAt / period + 1) * period;
            var inFlight = p.AdvanceAsync(first, TimeSpan.FromSeconds(30));
            if (!inFlight.IsCompleted) {
                try {
                    p.Grant(first);
                    if (!inFlight.IsCompleted) {
                        Console.Error.WriteLine("ls-participant-cs " + who + ": a grant during AdvanceAsync gave no exception");
                        return 3;
                    }
                } catch (InvalidOperationException e) {
                    Console.Error.WriteLine("ls-participant-cs " + who + ": " + e.Message);
                }
            } else {
                Console.Error.WriteLine("ls-participant-cs " + who + ": two calls at once: not asserted (the step ended at once)");
            }
            inFlight.Wait();
            // A grant beyond the horizon: ArgumentException with lockstep's
            // own words for the check it failed (not a clock name's).
            seen = null;
            try {
                p.Grant(long.MaxValue - 1);
            } catch (Exception e) {
                seen = e;
            }
            if (!(seen is ArgumentException)) {
                Console.Error.WriteLine("ls-participant-cs " + who + ": a grant beyond the horizon gave " +
                                        (seen == null ? "no exception" : seen.GetType().ToString()));
                return 3;
            }
            Console.Error.WriteLine("ls-participant-cs " + who + ": horizon: " + seen.Message);
        }
        long joined = p.JoinedAt;
        Console.WriteLine("joined " + joined);
        Console.Out.Flush();
        var pending = new List<Msg>();
        // Under the lock: a message is either in the socket or in pending,
        // never in between, when a step looks.
        Action takeIn = () => {
            var b = new byte[128];
            long n;
            while ((n = recv(fd, b, b.Length, MSG_DONTWAIT)) > 0) {
                string m = Encoding.ASCII.GetString(b, 0, (int)n);
                int at = m.IndexOf('@');
                if (at > 0)
                    pending.Add(new Msg { Who = m.Substring(0, at), T = long.Parse(m.Substring(at + 1)) });
            }
        };
        if (fd >= 0) {
            // A Unix datagram socket's queue is short (net.unix.max_dgram_qlen,
            // often 10): a peer stepping every 1 ms would block on it while
            // we wait for the clock, so a thread takes messages in as they
            // come (MSG_PEEK waits for one without taking it).
            var rx = new Thread(() => {
                var one = new byte[1];
                while (recv(fd, one, 1, MSG_PEEK) >= 0)
                    lock (pending)
                        takeIn();
            });
            rx.IsBackground = true;
            rx.Start();
        }
        string[] peerList = peers != null ? peers.Split(',') : new string[0];
        long firstStep = (joined / period + 1) * period;
        // What a step does once the clock is at T.
        Action<long> step = t => {
            if (fd >= 0) {
                lock (pending) {
                    takeIn();
                    pending.Sort();
                    if (log != null) {
                        var line = new StringBuilder();
                        line.Append(t).Append(' ').Append(who).Append(':');
                        foreach (var m in pending)
                            if (m.T < t)
                                line.Append(' ').Append(m.Who).Append('@').Append(m.T);
                        log.WriteLine(line.ToString());
                    }
                    long now = t;
                    pending.RemoveAll(m => m.T < now);
                }
                byte[] msg = Encoding.ASCII.GetBytes(who + "@" + t);
                foreach (string peer in peerList) {
                    byte[] to = Addr(dir + "/" + peer + ".sock");
                    // A peer not bound yet or gone: its loss (as the C twin).
                    sendto(fd, msg, msg.Length, 0, to, to.Length);
                }
            } else if (log != null) {
                log.WriteLine(t + " " + who);
            }
        };
        try {
            if (async) {
                // The natural .NET loop, awaited step after step: with no
                // SynchronizationContext (Mono outside Unity) each await
                // resumes on a pool thread, which grants the next step.
                // Before issue 52 the second step threw
                // InvalidOperationException ("another thread").
                Func<Task> loop = async () => {
                    for (long t = firstStep; t <= end; t += period) {
                        await p.AdvanceAsync(t, TimeSpan.FromSeconds(30));
                        step(t);
                    }
                };
                loop().Wait();
            } else {
                for (long t = firstStep; t <= end; t += period) {
                    p.Advance(t, TimeSpan.FromSeconds(30));
                    step(t);
                }
            }
        } catch (Exception e) {
            if (e is AggregateException)
                e = e.InnerException;
            Console.Error.WriteLine("ls-participant-cs " + who + ": advance: " + e.GetType().Name + ": " + e.Message);
            return 1;
        }
        p.Leave();
        if (checkThread) {
            try {
                p.Grant(end + period);
                Console.Error.WriteLine("ls-participant-cs " + who + ": a grant after Leave gave no exception");
                return 3;
            } catch (ObjectDisposedException e) {
                Console.Error.WriteLine("ls-participant-cs " + who + ": after Leave: " + e.Message);
            }
        }
        if (log != null)
            log.Close();
        if (self != null)
            unlink(self);
        return 0;
    }
}
