// SPDX-License-Identifier: MIT
// AWSIM drop-in: a time source that reads the shared clock lock-free.
//
// AWSIM's time sources (UnityTimeSource, DotNetSimulationTimeSource, ...)
// serve GetTime() from a `lock`-protected state shared by the 100 Hz clock
// thread and every sensor; this one computes the time from the shmclock page
// on the calling thread: no lock, no allocation, no message, never stale.
//
// Where it plugs in: AWSIM's TimeSourceProvider creates the ITimeSource for
// the JSON field "TimeSource"; return `new ShmclockTimeSource()` there (for
// every value: the engine or shmclockd writes the clock, see
// ShmclockClockPublisher), and every sensor's GetTime() reads the page.
using System;
using Shmclock;

namespace AWSIM
{
    public class ShmclockTimeSource : ITimeSource, IDisposable
    {
        readonly Clock clock;

        /// <summary>
        /// Opens clock <paramref name="name"/> (null: $SHMCLOCK_NAME, else
        /// "default"); with <paramref name="fallbackSystem"/>, system time
        /// when no such clock exists (ROS's use_sim_time=false).
        /// </summary>
        public ShmclockTimeSource(string name = null, bool fallbackSystem = false)
        {
            clock = Clock.Open(name ?? Clock.DefaultName(),
                               fallbackSystem ? ClockOptions.FallbackSystem : ClockOptions.None);
        }

        /// <summary>The clock, for sleeps, jump handlers and Info.</summary>
        public Clock Clock { get { return clock; } }

        /// <summary>
        /// AWSIM's ITimeSource: the simulation time as ROS's (sec, nanosec).
        /// A clock not started yet reads 0 (ROS's "uninitialized"), as does
        /// a writer stuck mid-update; a clock whose writer died reads the
        /// time extrapolated from its last state.
        /// </summary>
        public void GetTime(out int seconds, out uint nanoseconds)
        {
            long ns;
            int r = clock.TryNow(out ns);
            if (r != 0 && r != -Errno.ESTALE)
                ns = 0;
            long s = ns / 1000000000L, rem = ns % 1000000000L;
            if (rem < 0) {
                s -= 1;
                rem += 1000000000L;
            }
            seconds = (int)s;
            nanoseconds = (uint)rem;
        }

        public void Dispose()
        {
            clock.Dispose();
        }
    }
}
