// SPDX-License-Identifier: MIT
using System;
using System.Runtime.InteropServices;
using System.Threading;
using System.Threading.Tasks;

namespace Shmclock
{
    // Marks a static method that native code calls back: Unity's IL2CPP
    // (ahead-of-time) needs it, and recognises it by name; Mono ignores it.
    [AttributeUsage(AttributeTargets.Method)]
    sealed class MonoPInvokeCallbackAttribute : Attribute
    {
        public MonoPInvokeCallbackAttribute(Type type) { }
    }

    /// <summary>Options of <see cref="Clock.Open(string, ClockOptions)"/>.</summary>
    [Flags]
    public enum ClockOptions
    {
        None = 0,
        /// <summary>Read system time when the clock does not exist (ROS's use_sim_time=false).</summary>
        FallbackSystem = 0x1,
        /// <summary>Believe a segment whoever owns it (see SHMCLOCK_TRUST).</summary>
        TrustAnyOwner = 0x4,
    }

    /// <summary>
    /// A shared simulation clock, read lock-free from any thread (shmclock_t).
    /// <para>Now(), NowUnix(), NowMonotonic() allocate nothing and take no
    /// lock: one call into libshmclock, which reads the page (under Mono a
    /// raw internal call, see <see cref="FastPath"/>; else a P/Invoke). Errors are
    /// exceptions with the library's message: ArgumentException for a bad
    /// name, ObjectDisposedException after Dispose(), ShmclockException (an
    /// IOException carrying the errno) otherwise. A clock whose writer died
    /// (-ESTALE) still reads: Now() returns the time extrapolated from the
    /// last committed state; TryNow() tells the two apart.</para>
    /// </summary>
    public sealed partial class Clock : IDisposable
    {
        // The native handle is freed only by the finalizer, once no thread
        // can be inside a call on it (each call keeps `this` alive until it
        // returns): Dispose() racing a Now() on another thread never frees
        // the page under it. Readers write no shared field (no reference
        // count), so reads on many threads do not contend.
        readonly IntPtr h;
        // The same clock opened with OPEN_NO_CALLBACKS, read by raw internal
        // calls (RawNative) while no jump handler is registered: `direct`.
        // Zero without the fast path. Freed by the finalizer, as h.
        readonly IntPtr rh;
        volatile bool direct;
        volatile bool disposed;
        readonly string name;
        // The jump handlers registered with the library, by id: each is a
        // JumpTarget behind a GCHandle, the `user` pointer of the one static
        // trampoline below, freed once the library no longer calls it.
        readonly System.Collections.Generic.Dictionary<ulong, GCHandle> handlers =
            new System.Collections.Generic.Dictionary<ulong, GCHandle>();
        // Targets of handlers removed from inside a handler (of any clock):
        // the library unlinks them at once but cannot wait there for a
        // delivery running on another thread, which may still call them.
        // Freed by the finalizer, with the handle. (Freed at once, another
        // watcher called a freed handle: the process crashed.)
        readonly System.Collections.Generic.List<GCHandle> graveyard =
            new System.Collections.Generic.List<GCHandle>();
        // How deep this thread is in jump handlers (the trampoline's).
        [ThreadStatic] static int inHandler;
        // The clocks (by id) whose jump handlers this thread is inside:
        // Dispose() there would wait for itself (it stops the clock's
        // watcher, the thread that runs them), so it throws instead.
        [ThreadStatic] static System.Collections.Generic.List<long> inHandlerOf;
        static long lastId;
        readonly long clockId = Interlocked.Increment(ref lastId);
        // The cancel tokens of the sleeps in progress (Dispose ends them).
        readonly System.Collections.Generic.HashSet<IntPtr> sleepers = new System.Collections.Generic.HashSet<IntPtr>();
        readonly object jumpLock = new object();
        EventHandler<JumpEventArgs> jumped;
        ulong jumpedId;

        const int ESTALE = -Errno.ESTALE;

        Clock(IntPtr p, IntPtr raw, string name)
        {
            h = p;
            rh = raw;
            direct = raw != IntPtr.Zero;
            this.name = name;
        }

        /// <summary>
        /// True when reads skip the P/Invoke: under Mono (6 and later) with
        /// libshmclock-mono.so next to Shmclock.dll, Now(), TryNow(),
        /// NowUnix() and NowMonotonic() are raw internal calls into
        /// libshmclock, without the GC transition a P/Invoke makes under
        /// Mono's default hybrid thread suspension (twice the cost of the
        /// read). They read through a second handle of the clock that never
        /// runs jump handlers. A clock with jump handlers (Jumped, OnJump)
        /// reads by P/Invoke while it has them, so that reads still wait for
        /// a handler running before a jump; so does a clock that reads system
        /// time (ClockOptions.FallbackSystem). False elsewhere (Unity's IL2CPP
        /// backend, .NET): reads are P/Invokes, with the same results.
        /// </summary>
        public static bool FastPath { get { return RawNative.On; } }

        // True when this clock's reads are raw calls now (for the tests).
        internal bool ReadsDirect { get { return direct; } }

        // The second handle for the raw reads, or Zero: without the fast
        // path, for a clock that reads system time (each handle of one keeps
        // its own), or when the name came to mean another clock between the
        // two opens (the writer's identity differs; checked twice, as a
        // takeover in between changes it too).
        static IntPtr OpenRaw(string name, uint flags, IntPtr p)
        {
            IntPtr r;
            if (!RawNative.On || name == null || Native.shmclock_is_fallback(p))
                return IntPtr.Zero;
            flags = (flags & ~(Native.OPEN_FALLBACK_SYSTEM | Native.OPEN_WATCH_JUMPS)) | Native.OPEN_NO_CALLBACKS;
            if (Native.shmclock_open_ex(name, flags, out r) != 0)
                return IntPtr.Zero;
            for (int i = 0; i < 2; i++) {
                NativeInfo a, b;
                if (Native.shmclock_info(p, out a) == 0 && Native.shmclock_info(r, out b) == 0 &&
                    a.writer_pid == b.writer_pid && a.writer_generation == b.writer_generation &&
                    a.writer_start_unix_ns == b.writer_start_unix_ns && a.owner_uid == b.owner_uid)
                    return r;
            }
            Native.shmclock_close(r);
            return IntPtr.Zero;
        }

        IntPtr D
        {
            get
            {
                if (disposed)
                    throw new ObjectDisposedException("Shmclock.Clock", "shmclock " + name + ": the clock was disposed");
                return rh;
            }
        }

        IntPtr H
        {
            get
            {
                if (disposed)
                    throw new ObjectDisposedException("Shmclock.Clock", "shmclock " + name + ": the clock was disposed");
                return h;
            }
        }

        /// <summary>The clock's name ("default" when opened by <see cref="Open()"/> without $SHMCLOCK_NAME).</summary>
        public string Name { get { return name; } }

        /// <summary>The clock named by $SHMCLOCK_NAME, else "default".</summary>
        public static Clock Open()
        {
            return Open(DefaultName(), ClockOptions.None);
        }

        public static Clock Open(string name)
        {
            return Open(name, ClockOptions.None);
        }

        /// <summary>Maps /dev/shm/shmclock.NAME read-only.</summary>
        public static Clock Open(string name, ClockOptions options)
        {
            IntPtr p;
            if (name == null && (options & ClockOptions.FallbackSystem) == 0)
                throw new ArgumentNullException("name");
            int r = Native.shmclock_open_ex(name, (uint)options, out p);
            Errors.Check(r, name, "open");
            return new Clock(p, OpenRaw(name, (uint)options, p), name);
        }

        /// <summary>Waits (real time, at most <paramref name="timeout"/>) until the clock exists and has a value, then opens it.</summary>
        public static Clock OpenWait(string name, TimeSpan timeout)
        {
            IntPtr p;
            int r = Native.shmclock_open_wait(name, 0, ToNs(timeout), out p);
            Errors.Check(r, name, "open");
            return new Clock(p, OpenRaw(name, 0, p), name);
        }

        /// <summary>$SHMCLOCK_NAME, else "default": the clock a program reads unless told otherwise.</summary>
        public static string DefaultName()
        {
            string n = Environment.GetEnvironmentVariable("SHMCLOCK_NAME");
            return string.IsNullOrEmpty(n) ? "default" : n;
        }

        internal static long ToNs(TimeSpan? t)
        {
            if (t == null || t.Value == Timeout.InfiniteTimeSpan)
                return Native.DURATION_INFINITE;
            return t.Value.Ticks < 0 ? 0 : TicksToNs(t.Value.Ticks);
        }

        /// <summary>
        /// A TimeSpan's ticks in ns, saturated at long's range: Ticks * 100
        /// wrapped for spans past 29 227 years (TimeSpan.MaxValue became
        /// -100 ns: a timeout that expired at once, a sleep refused).
        /// </summary>
        internal static long TicksToNs(long ticks)
        {
            if (ticks > long.MaxValue / 100)
                return long.MaxValue;
            if (ticks < long.MinValue / 100)
                return long.MinValue;
            return ticks * 100;
        }

        // ------------------------------------------------------------ now

        /// <summary>
        /// The current simulation time in ns. Also when the writer is gone
        /// (extrapolated from its last state). Throws ShmclockException with
        /// ENODATA before the clock's first value, EAGAIN while its writer is
        /// stopped at the start of an update.
        /// </summary>
        public long Now()
        {
            long ns;
            int r = direct ? RawNative.ReadNow(D, out ns) : Native.shmclock_now(H, out ns);
            GC.KeepAlive(this);
            return Value(r, ns);
        }

        // A read's value: also with -ESTALE (the time extrapolated from the
        // last committed state); other errors throw.
        long Value(int r, long ns)
        {
            if (r != 0 && r != ESTALE)
                throw Errors.For(r, name, "now");
            return ns;
        }

        /// <summary>
        /// Now() without exceptions: 0, -ESTALE (no writer, or it lost what
        /// it follows; <paramref name="ns"/> is set), -ENODATA, -EAGAIN.
        /// </summary>
        public int TryNow(out long ns)
        {
            long v;
            int r = direct ? RawNative.ReadNow(D, out v) : Native.shmclock_now(H, out v);
            ns = v;  // (the raw call writes only to this stack)
            GC.KeepAlive(this);
            return r;
        }

        /// <summary>The current simulation time as a TimeSpan since simulation zero (100 ns ticks).</summary>
        public TimeSpan NowTimeSpan()
        {
            return TimeSpan.FromTicks(Now() / 100);
        }

        /// <summary>The simulated world's UNIX time in ns (UnixTimeAtZero + simulation time).</summary>
        public long NowUnix()
        {
            long ns;
            int r = direct ? RawNative.ReadNowUnix(D, out ns) : Native.shmclock_now_unix(H, out ns);
            GC.KeepAlive(this);
            return Value(r, ns);
        }

        static readonly DateTime Epoch = new DateTime(1970, 1, 1, 0, 0, 0, DateTimeKind.Utc);

        /// <summary>The simulated world's UNIX time as a UTC DateTime.</summary>
        public DateTime NowUtc()
        {
            return Epoch.AddTicks(NowUnix() / 100);
        }

        /// <summary>The jump-free simulated time in ns: follows scale, pause and steps, never goes back.</summary>
        public long NowMonotonic()
        {
            long ns;
            int r = direct ? RawNative.ReadNowMonotonic(D, out ns) : Native.shmclock_now_monotonic(H, out ns);
            GC.KeepAlive(this);
            return Value(r, ns);
        }

        /// <summary>CLOCK_MONOTONIC in ns, the time base of every clock.</summary>
        public static long SteadyNow()
        {
            return Native.shmclock_steady_now();
        }

        /// <summary>A consistent snapshot of everything the page says.</summary>
        public ClockInfo Info
        {
            get
            {
                NativeInfo n;
                Errors.Check(Native.shmclock_info(H, out n), name, "info");
                return new ClockInfo(ref n);
            }
        }

        /// <summary>True when this handle reads system time because its clock did not exist.</summary>
        public bool IsFallback { get { return Native.shmclock_is_fallback(H); } }

        /// <summary>The library's version string.</summary>
        public static string LibraryVersion { get { return Native.Str(Native.shmclock_version()); } }

        /// <summary>Removes /dev/shm/shmclock.NAME (mapped readers and writers keep working).</summary>
        public static void Unlink(string name)
        {
            Errors.Check(Native.shmclock_unlink(name), name, "unlink");
        }

        /// <summary>Throws ArgumentException unless <paramref name="name"/> is 1 to 64 of [A-Za-z0-9_.-].</summary>
        public static void CheckName(string name)
        {
            if (name == null)
                throw new ArgumentNullException("name");
            Errors.Check(Native.shmclock_check_name(name), name, null);
        }

        // ------------------------------------------------------------ sleep

        /// <summary>
        /// Sleeps until simulation time reaches <paramref name="simNs"/>:
        /// follows pause, resume, scale changes and steps without polling
        /// (the library waits on the writer's change futex). A jump past the
        /// target ends it; with <paramref name="jumpError"/> any jump throws
        /// ShmclockException (EINTR). <paramref name="timeout"/> is real time
        /// (null: none) and throws TimeoutException; the token throws
        /// OperationCanceledException.
        /// </summary>
        public void SleepUntil(long simNs, CancellationToken cancel = default(CancellationToken),
                               TimeSpan? timeout = null, bool jumpError = false)
        {
            Sleep(true, simNs, cancel, timeout, jumpError);
        }

        /// <summary>
        /// Sleeps for a simulated duration: a backward jump counts as no time
        /// elapsed, a forward one as elapsed (rclcpp#2383).
        /// </summary>
        public void SleepFor(TimeSpan duration, CancellationToken cancel = default(CancellationToken),
                             TimeSpan? timeout = null, bool jumpError = false)
        {
            Sleep(false, TicksToNs(duration.Ticks), cancel, timeout, jumpError);
        }

        public void SleepForNs(long ns, CancellationToken cancel = default(CancellationToken),
                               TimeSpan? timeout = null, bool jumpError = false)
        {
            Sleep(false, ns, cancel, timeout, jumpError);
        }

        /// <summary>
        /// SleepUntil as a Task, with the same semantics. No thread per
        /// wait: one thread per clock sleeps in the library until the
        /// earliest target of all its async waits (AsyncWaits.cs). The
        /// continuation never runs on that thread. The token cancels the
        /// task (Canceled); the timeout (real time) faults it with
        /// TimeoutException; a jump with jumpError with ShmclockException
        /// EINTR; Dispose() with ObjectDisposedException.
        /// </summary>
        public Task SleepUntilAsync(long simNs, CancellationToken cancel = default(CancellationToken),
                                    TimeSpan? timeout = null, bool jumpError = false)
        {
            return SleepAsync(true, simNs, cancel, timeout, jumpError);
        }

        /// <summary>SleepFor as a Task (see SleepUntilAsync).</summary>
        public Task SleepForAsync(TimeSpan duration, CancellationToken cancel = default(CancellationToken),
                                  TimeSpan? timeout = null, bool jumpError = false)
        {
            return SleepAsync(false, TicksToNs(duration.Ticks), cancel, timeout, jumpError);
        }

        void Sleep(bool until, long ns, CancellationToken cancel, TimeSpan? timeout, bool jumpError)
        {
            uint flags = jumpError ? Native.SLEEP_JUMP_ERROR : 0;
            long tmo = ToNs(timeout);
            int r;

            // shmclock_cancel_t: one atomic int the library owns while we
            // sleep. Cancels are sticky, so Dispose() (which cancels every
            // registered token) or the caller's token ends the sleep even
            // when it comes before the sleeper has started waiting.
            IntPtr token = Marshal.AllocHGlobal(sizeof(int));
            Marshal.WriteInt32(token, 0);
            try {
                lock (sleepers) {
                    if (disposed)
                        throw new ObjectDisposedException("Shmclock.Clock", "shmclock " + name + ": the clock was disposed");
                    sleepers.Add(token);
                }
                // The registration's Dispose waits for a callback in
                // progress, so the token is never freed under shmclock_cancel.
                using (cancel.Register(() => Native.shmclock_cancel(h, token))) {
                    r = until ? Native.shmclock_sleep_until_ex(h, ns, flags, tmo, token)
                              : Native.shmclock_sleep_for_ex(h, ns, flags, tmo, token);
                }
            } finally {
                lock (sleepers)
                    sleepers.Remove(token);
                Marshal.FreeHGlobal(token);
            }
            GC.KeepAlive(this);
            if (r == -Errno.ECANCELED && cancel.IsCancellationRequested)
                throw new OperationCanceledException(cancel);
            if (r == -Errno.ECANCELED && disposed)
                throw new ObjectDisposedException("Shmclock.Clock", "shmclock " + name + ": the clock was disposed while sleeping");
            Errors.Check(r, name, until ? "sleep until" : "sleep for");
        }

        /// <summary>
        /// Wakes every blocking sleep on this clock that started before the
        /// call: each throws ShmclockException ECANCELED (rclcpp's
        /// cancel_sleep_or_wait). Async waits go on: cancel them with their
        /// token.
        /// </summary>
        public void CancelSleeps()
        {
            Native.shmclock_cancel_sleeps(H);
        }

        // ------------------------------------------------------------ jumps

        /// <summary>
        /// Every jump of any size (and clock changes), delivered twice:
        /// Before = true before any thread of this process is given the new
        /// time (threads reading meanwhile wait), then Before = false.
        /// Handlers run on the library's watcher thread (or on the thread
        /// that first reads after the jump); they must not wait for a thread
        /// that is reading this clock. An exception a handler throws is
        /// written to stderr and dropped: it cannot cross into C. A clock
        /// with subscribers stays open until Dispose().
        /// </summary>
        public event EventHandler<JumpEventArgs> Jumped
        {
            add
            {
                lock (jumpLock) {
                    if (jumped == null)
                        jumpedId = AddNative(JumpThreshold.Any, e => {
                            var j = jumped;
                            if (j != null)
                                j(this, e);
                        });
                    jumped += value;
                }
            }
            remove
            {
                lock (jumpLock) {
                    jumped -= value;
                    if (jumped == null && jumpedId != 0) {
                        RemoveNative(jumpedId);
                        jumpedId = 0;
                    }
                }
            }
        }

        sealed class Registration : IDisposable
        {
            Clock clock;
            readonly ulong id;

            internal Registration(Clock c, ulong id) { clock = c; this.id = id; }

            public void Dispose()
            {
                Clock c = Interlocked.Exchange(ref clock, null);
                if (c != null && !c.disposed)
                    c.RemoveNative(id);
            }
        }

        /// <summary>
        /// A jump handler with thresholds (rcl's jump callbacks). Dispose the
        /// result to remove it; after that it does not run again (disposed
        /// from inside a handler, a delivery already running on another
        /// thread may still call it once).
        /// </summary>
        public IDisposable OnJump(JumpThreshold threshold, Action<JumpEventArgs> handler)
        {
            if (handler == null)
                throw new ArgumentNullException("handler");
            return new Registration(this, AddNative(threshold, handler));
        }

        sealed class JumpTarget
        {
            internal Action<JumpEventArgs> Handler;
            internal string Name;
            internal long ClockId;
        }

        // The one delegate the library calls, static: its native thunk lives
        // as long as the process, so no collected delegate can ever be
        // called (a per-handler delegate would be finalized in any order
        // with its Clock), and IL2CPP accepts it (MonoPInvokeCallback).
        static readonly Native.JumpCallback Trampoline = OnNativeJump;

        [MonoPInvokeCallback(typeof(Native.JumpCallback))]
        static void OnNativeJump(IntPtr jp, byte before, IntPtr user)
        {
            JumpTarget target = null;

            inHandler++;
            if (inHandlerOf == null)
                inHandlerOf = new System.Collections.Generic.List<long>();
            try {
                target = (JumpTarget)GCHandle.FromIntPtr(user).Target;
                inHandlerOf.Add(target.ClockId);
                var j = (NativeJump)Marshal.PtrToStructure(jp, typeof(NativeJump));
                target.Handler(new JumpEventArgs {
                    Before = before != 0, Kind = (JumpKind)j.kind, DeltaNs = j.delta_ns,
                    JumpEpoch = j.jump_epoch, Jumps = j.jumps, Source = (ClockSource)j.source,
                });
            } catch (Exception e) {
                // An exception cannot cross into C.
                Console.Error.WriteLine("shmclock {0}: a jump handler threw: {1}",
                                        target != null ? target.Name : "?", e);
            } finally {
                if (target != null)
                    inHandlerOf.RemoveAt(inHandlerOf.Count - 1);
                inHandler--;
            }
        }

        // A removed handler's target: freed now, or, removed from inside a
        // handler (the removal did not wait), kept until the finalizer.
        void Release(GCHandle gh)
        {
            if (inHandler == 0) {
                gh.Free();
                return;
            }
            lock (handlers)
                graveyard.Add(gh);
        }

        ulong AddNative(JumpThreshold t, Action<JumpEventArgs> handler)
        {
            var nt = new NativeThreshold {
                on_clock_change = (byte)(t.OnClockChange ? 1 : 0),
                min_forward_ns = TicksToNs(t.MinForward.Ticks),
                min_backward_ns = TicksToNs(t.MinBackward.Ticks),
            };
            // While reads went through rh, h saw no jump: one read brings it
            // up to date, or the handler would be given the jumps that came
            // before it. Outside the lock: the read may wait for a handler
            // running on the watcher thread, which may be adding one.
            long seen;
            Native.shmclock_now(H, out seen);
            GCHandle gh = GCHandle.Alloc(new JumpTarget { Handler = handler, Name = name, ClockId = clockId });
            ulong id;
            lock (handlers) {
                // Reads go through h from here on: they wait for a handler
                // running before a jump.
                direct = false;
                int r = Native.shmclock_jump_callback_add(H, nt, Trampoline, GCHandle.ToIntPtr(gh), out id);
                if (r < 0) {
                    direct = handlers.Count == 0 && rh != IntPtr.Zero && !disposed;
                    gh.Free();
                    throw Errors.For(r, name, "jump callback");
                }
                handlers.Add(id, gh);
                r = Native.shmclock_jump_watch(h, true);
                if (r < 0)
                    throw Errors.For(r, name, "jump watcher");
            }
            return id;
        }

        void RemoveNative(ulong id)
        {
            // The removal waits for a handler running on the watcher thread,
            // so it runs outside the lock (that handler may add or remove
            // handlers); once it returns, the handler's target can go.
            GCHandle gh;
            lock (handlers) {
                if (!handlers.TryGetValue(id, out gh))
                    return;
                handlers.Remove(id);
            }
            int r = Native.shmclock_jump_callback_remove(H, id);
            Release(gh);
            // The last handler gone: raw reads again (a handler added
            // meanwhile keeps them off: it is counted under the same lock).
            lock (handlers) {
                if (handlers.Count == 0 && rh != IntPtr.Zero && !disposed)
                    direct = true;
            }
            Errors.Check(r, name, "jump callback");
        }

        /// <summary>
        /// Later calls throw ObjectDisposedException; jump handlers are
        /// removed (none runs after this returns) and sleeps in progress end
        /// with ObjectDisposedException. Not from inside a jump handler of
        /// this clock, which runs on the thread Dispose stops:
        /// InvalidOperationException there (dispose after the handler
        /// returns). The page itself is unmapped by the finalizer, when no
        /// thread can be inside a call on it.
        /// </summary>
        public void Dispose()
        {
            if (inHandlerOf != null && inHandlerOf.Contains(clockId))
                throw new InvalidOperationException("shmclock " + name + ": Dispose() from inside a jump " +
                    "handler of this clock (it would wait for itself): dispose after the handler returns");
            var gone = new System.Collections.Generic.List<System.Collections.Generic.KeyValuePair<ulong, GCHandle>>();
            lock (handlers) {
                if (disposed)
                    return;
                disposed = true;
                gone.AddRange(handlers);
                handlers.Clear();
            }
            foreach (var kv in gone) {
                Native.shmclock_jump_callback_remove(h, kv.Key);
                Release(kv.Value);
            }
            Native.shmclock_jump_watch(h, false);
            lock (sleepers) {
                foreach (IntPtr token in sleepers)
                    Native.shmclock_cancel(h, token);
            }
            StopAsyncWaits();
        }

        // A Clock with handlers is reachable from their GCHandles only if a
        // handler refers to it (the Jumped event does): such a clock stays
        // open until Dispose. Otherwise it is closed here, with the handlers
        // the library may still call.
        ~Clock()
        {
            Native.shmclock_close(h);
            Native.shmclock_close(rh);
            foreach (var gh in handlers.Values)
                gh.Free();
            foreach (var gh in graveyard)
                gh.Free();
        }
    }
}
