// SPDX-License-Identifier: MIT
// The values the API hands out: a clock's snapshot and a jump.
using System;

namespace Shmclock
{
    /// <summary>Where a clock's time comes from (enum shmclock_source).</summary>
    // One member per row of SHMCLOCK_SOURCE_MAP (<shmclock/shmclock.h>), by
    // hand: Unity reads this file from the source tree. tests/doc/sources.py
    // fails when a row is missing here.
    public enum ClockSource
    {
        None = 0, Simulation = 1, System = 2, External = 3, Fixed = 4, Ros2 = 5, Leader = 6,
        Replay = 7,
    }

    /// <summary>Which jumps happened (enum shmclock_jump_kind bits).</summary>
    [Flags]
    public enum JumpKind
    {
        Forward = 1, Backward = 2, ClockChange = 4,
    }

    /// <summary>A consistent snapshot of a clock (shmclock_info_t).</summary>
    public struct ClockInfo
    {
        public long SimNs;
        public long MonoNs;
        public double Scale;
        public ClockSource Source;
        public bool Initialized, Paused, Stepped, HasUnixAtZero;
        public long UnixAtZeroNs;
        public ulong JumpEpoch;
        public long LastJumpNs;
        public bool WriterAlive;
        public int WriterPid;
        public uint WriterGeneration;
        public long WriterStartUnixNs;
        public long HeartbeatAgeNs;
        public ulong Commits;
        public uint OwnerUid;
        public long JumpTotalNs;
        public bool Stale;

        internal ClockInfo(ref NativeInfo n)
        {
            SimNs = n.sim_ns;
            MonoNs = n.mono_ns;
            Scale = n.scale;
            Source = (ClockSource)n.source;
            Initialized = n.initialized != 0;
            Paused = n.paused != 0;
            Stepped = n.stepped != 0;
            HasUnixAtZero = n.has_unix_at_zero != 0;
            UnixAtZeroNs = n.unix_at_zero_ns;
            JumpEpoch = n.jump_epoch;
            LastJumpNs = n.last_jump_ns;
            WriterAlive = n.writer_alive != 0;
            WriterPid = n.writer_pid;
            WriterGeneration = n.writer_generation;
            WriterStartUnixNs = n.writer_start_unix_ns;
            HeartbeatAgeNs = n.heartbeat_age_ns;
            Commits = n.commits;
            OwnerUid = n.owner_uid;
            JumpTotalNs = n.jump_total_ns;
            Stale = n.stale != 0;
        }
    }

    /// <summary>
    /// Which jumps a handler wants (rcl_jump_threshold_t, with magnitudes):
    /// forward jumps of at least <see cref="MinForward"/>, backward jumps of
    /// at least <see cref="MinBackward"/> (zero: none), clock changes.
    /// </summary>
    public struct JumpThreshold
    {
        public bool OnClockChange;
        public TimeSpan MinForward;
        public TimeSpan MinBackward;

        /// <summary>Every jump, of any size, and clock changes.</summary>
        public static JumpThreshold Any
        {
            get { return new JumpThreshold { OnClockChange = true, MinForward = new TimeSpan(1), MinBackward = new TimeSpan(1) }; }
        }
    }

    /// <summary>
    /// One jump, delivered twice (ROS 2 semantics): <see cref="Before"/> true
    /// before any thread of this process is given the new time, then false.
    /// </summary>
    public sealed class JumpEventArgs : EventArgs
    {
        public bool Before { get; internal set; }
        public JumpKind Kind { get; internal set; }
        /// <summary>Signed size of the jump in ns (the last one if several collapsed).</summary>
        public long DeltaNs { get; internal set; }
        public TimeSpan Delta { get { return TimeSpan.FromTicks(DeltaNs / 100); } }
        public ulong JumpEpoch { get; internal set; }
        /// <summary>Jumps since the last delivery (more than 1: collapsed).</summary>
        public uint Jumps { get; internal set; }
        public ClockSource Source { get; internal set; }
    }
}
