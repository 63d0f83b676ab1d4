// SPDX-License-Identifier: MIT
using System;
using System.Threading;

namespace Shmclock
{
    /// <summary>
    /// Owns a shared clock and publishes its time (shmclock_writer_t): what a
    /// simulator's game loop drives. One writer per clock: a second one gets
    /// ShmclockException EBUSY. Open it on the thread that lives as long as
    /// the simulation (Unity's main thread: Awake/OnDestroy): that thread
    /// holds the lock readers use to tell that the writer is alive.
    /// <para>Like the C handle, a Writer is not for two threads at once: a
    /// call made while another thread is inside one throws
    /// InvalidOperationException instead of racing.</para>
    /// </summary>
    public sealed class Writer : IDisposable
    {
        IntPtr h;
        readonly string name;
        int busy;
        bool published;
        double lastScale = 1.0;

        Writer(IntPtr p, string name)
        {
            h = p;
            this.name = name;
        }

        public string Name { get { return name; } }

        /// <summary>The clock named by $SHMCLOCK_NAME, else "default".</summary>
        public static Writer Open()
        {
            return Open(Clock.DefaultName(), 0);
        }

        /// <summary>
        /// Creates the clock, or takes over one whose writer died (its time
        /// continues: no jump). <paramref name="mode"/>: the file mode (0: 0644).
        /// Uninitialized until the first SetTime / Advance / PublishFrame.
        /// </summary>
        public static Writer Open(string name, int mode = 0)
        {
            IntPtr p;
            if (name == null)
                throw new ArgumentNullException("name");
            Errors.Check(Native.shmclock_writer_open_mode(name, (uint)mode, out p), name, "open writer");
            return new Writer(p, name);
        }

        void Enter()
        {
            if (Interlocked.CompareExchange(ref busy, 1, 0) != 0)
                throw new InvalidOperationException("shmclock " + name +
                    ": the Writer is in use by another thread (a writer handle is for one thread at a time)");
            if (h == IntPtr.Zero) {
                Volatile.Write(ref busy, 0);
                throw new ObjectDisposedException("Shmclock.Writer", "shmclock " + name + ": the writer was disposed");
            }
        }

        void Leave()
        {
            Volatile.Write(ref busy, 0);
        }

        void Call(int r, string what)
        {
            Errors.Check(r, name, what);
        }

        /// <summary>Jumps to <paramref name="simNs"/> (forwards or backwards; the first call starts the clock).</summary>
        public void SetTime(long simNs)
        {
            Enter();
            try { Call(Native.shmclock_writer_set_time(h, simNs), "set time"); published = true; } finally { Leave(); }
        }

        public void SetTime(TimeSpan t) { SetTime(Clock.TicksToNs(t.Ticks)); }

        /// <summary>Changes the rate continuously (no jump). ArgumentException unless finite and > 0.</summary>
        public void SetScale(double scale)
        {
            Enter();
            try { Call(Native.shmclock_writer_set_scale(h, scale), "set scale"); } finally { Leave(); }
        }

        /// <summary>Freezes time (continuous: no jump).</summary>
        public void Pause()
        {
            Enter();
            try { Call(Native.shmclock_writer_pause(h), "pause"); } finally { Leave(); }
        }

        /// <summary>Lets time run again from where it stopped.</summary>
        public void Resume()
        {
            Enter();
            try { Call(Native.shmclock_writer_resume(h), "resume"); } finally { Leave(); }
        }

        /// <summary>Moves time forward by <paramref name="deltaNs"/> without changing the mode (a fixed step: Time.fixedDeltaTime).</summary>
        public void Step(long deltaNs)
        {
            Enter();
            try { Call(Native.shmclock_writer_step(h, deltaNs), "step"); } finally { Leave(); }
        }

        public void Step(TimeSpan delta) { Step(Clock.TicksToNs(delta.Ticks)); }

        /// <summary>Publishes the next value of a stepped source (no extrapolation in between); earlier than now is a jump.</summary>
        public void Advance(long simNs)
        {
            Enter();
            try { Call(Native.shmclock_writer_advance(h, simNs), "advance"); published = true; } finally { Leave(); }
        }

        public void Advance(TimeSpan t) { Advance(Clock.TicksToNs(t.Ticks)); }

        /// <summary>Records where time comes from (shown by status and info); does not change the mode.</summary>
        public void SetSource(ClockSource source)
        {
            Enter();
            try { Call(Native.shmclock_writer_set_source(h, (int)source), "set source"); } finally { Leave(); }
        }

        /// <summary>Whether time arrives in steps (no extrapolation) or runs at the scale.</summary>
        public void SetStepped(bool stepped)
        {
            Enter();
            try { Call(Native.shmclock_writer_set_stepped(h, stepped), "set stepped"); } finally { Leave(); }
        }

        /// <summary>The UNIX time of simulation zero (OSI stamping); null forgets it.</summary>
        public void SetUnixAtZero(long? unixNs)
        {
            Enter();
            try {
                if (unixNs.HasValue) {
                    long v = unixNs.Value;
                    Call(Native.shmclock_writer_set_unix_at_zero(h, ref v), "set unix at zero");
                } else {
                    Call(Native.shmclock_writer_clear_unix_at_zero(h, IntPtr.Zero), "set unix at zero");
                }
            } finally { Leave(); }
        }

        /// <summary>
        /// Publishes a game engine's frame: its game time (Unity:
        /// Time.timeAsDouble, seconds) and time scale (Time.timeScale) at
        /// this instant. Readers extrapolate at the scale until the next
        /// frame; a frame behind what they already saw is held until reached,
        /// so time never goes back; scale 0 pauses. The first frame a new
        /// Writer publishes on a clock that already has a time is a jump to
        /// the engine's time (a restarted game starts over).
        /// </summary>
        public void PublishFrame(double timeSeconds, double timeScale)
        {
            long ns = (long)Math.Round(timeSeconds * 1e9);
            bool paused = !(timeScale > 0);
            if (!paused)
                lastScale = timeScale;
            Enter();
            try {
                uint flags = paused ? Native.FN_PAUSED : 0;
                if (!published) {
                    NativeInfo n;
                    Call(Native.shmclock_writer_info(h, out n), "info");
                    if (n.initialized != 0)
                        flags |= Native.FN_JUMP;
                }
                Call(Native.shmclock_writer_set_function(h, Native.shmclock_steady_now(), ns, lastScale, flags),
                     "publish frame");
                published = true;
            } finally { Leave(); }
        }

        /// <summary>The time this writer publishes, as its readers compute it now.</summary>
        public long Now()
        {
            long ns;
            Enter();
            try { Call(Native.shmclock_writer_now(h, out ns), "now"); } finally { Leave(); }
            return ns;
        }

        public ClockInfo Info
        {
            get
            {
                NativeInfo n;
                Enter();
                try { Call(Native.shmclock_writer_info(h, out n), "info"); } finally { Leave(); }
                return new ClockInfo(ref n);
            }
        }

        /// <summary>Removes the clock's name while holding it (readers that have it keep it).</summary>
        public void Unlink()
        {
            Enter();
            try { Call(Native.shmclock_writer_unlink(h, name), "unlink"); } finally { Leave(); }
        }

        /// <summary>
        /// Releases the clock: the page stays, readers see -ESTALE until a
        /// later writer takes over. Call it on the thread that opened the
        /// writer. There is no finalizer: a writer never disposed holds its
        /// clock until the process exits, as a simulation's clock should.
        /// </summary>
        public void Dispose()
        {
            if (Interlocked.CompareExchange(ref busy, 1, 0) != 0)
                throw new InvalidOperationException("shmclock " + name +
                    ": the Writer is in use by another thread (a writer handle is for one thread at a time)");
            IntPtr p = h;
            h = IntPtr.Zero;
            Native.shmclock_writer_close(p);
            Volatile.Write(ref busy, 0);
        }
    }
}
