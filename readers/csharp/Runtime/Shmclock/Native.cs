// SPDX-License-Identifier: MIT
// The C API of libshmclock, as P/Invoke declarations. Nothing of the
// segment's protocol is repeated here: every read, write and wait is a call
// into libshmclock.so ("shmclock": Unity finds Runtime/Plugins/x86_64/
// libshmclock.so; Mono maps it to libshmclock.so.1 through Shmclock.dll.config).
//
// Every parameter is blittable (long, double, byte, IntPtr), so
// a call copies nothing and allocates nothing. C structs passed by value
// that hold one int64_t (shmclock_duration_t, shmclock_sim_time_t) are a
// long in the x86-64 System V ABI, and are declared so.
using System;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Security;

namespace Shmclock
{
    [SuppressUnmanagedCodeSecurity]
    internal static class Native
    {
        const string Lib = "shmclock";

        // Open flags (<shmclock/time.h>).
        internal const uint OPEN_FALLBACK_SYSTEM = 0x1;
        internal const uint OPEN_WATCH_JUMPS = 0x2;
        internal const uint OPEN_TRUST_ANY_OWNER = 0x4;
        internal const uint OPEN_NO_CALLBACKS = 0x8;
        internal const uint SLEEP_JUMP_ERROR = 0x1;
        internal const uint FN_PAUSED = 0x1;
        internal const uint FN_STEPPED = 0x2;
        internal const uint FN_JUMP = 0x4;
        internal const long DURATION_INFINITE = -1;

        // ---- readers: <shmclock/shmclock.h>, <shmclock/time.h>
        [DllImport(Lib)] internal static extern int shmclock_open_ex(string name, uint flags, out IntPtr clk);
        [DllImport(Lib)] internal static extern void shmclock_close(IntPtr clk);
        [DllImport(Lib)] internal static extern int shmclock_now(IntPtr clk, out long ns);
        [DllImport(Lib)] internal static extern int shmclock_now_unix(IntPtr clk, out long ns);
        [DllImport(Lib)] internal static extern int shmclock_now_monotonic(IntPtr clk, out long ns);
        [DllImport(Lib)] internal static extern int shmclock_info(IntPtr clk, out NativeInfo info);
        [DllImport(Lib)] internal static extern int shmclock_unlink(string name);
        [DllImport(Lib)] internal static extern int shmclock_check_name(string name);
        [DllImport(Lib)] internal static extern IntPtr shmclock_strerror(int err);
        [DllImport(Lib)] internal static extern IntPtr shmclock_source_name(int source);
        [DllImport(Lib)] internal static extern IntPtr shmclock_version();
        [DllImport(Lib)] internal static extern long shmclock_steady_now();
        [DllImport(Lib)] internal static extern int shmclock_open_wait(string name, uint flags, long timeout, out IntPtr clk);
        [DllImport(Lib)] [return: MarshalAs(UnmanagedType.U1)]
        internal static extern bool shmclock_is_fallback(IntPtr clk);
        [DllImport(Lib)] internal static extern int shmclock_sleep_until_ex(IntPtr clk, long simNs, uint flags, long timeout, IntPtr cancel);
        [DllImport(Lib)] internal static extern int shmclock_sleep_for_ex(IntPtr clk, long ns, uint flags, long timeout, IntPtr cancel);
        [DllImport(Lib)] internal static extern void shmclock_cancel(IntPtr clk, IntPtr cancel);
        [DllImport(Lib)] internal static extern void shmclock_cancel_reset(IntPtr cancel);
        [DllImport(Lib)] internal static extern void shmclock_cancel_sleeps(IntPtr clk);
        [DllImport(Lib)] internal static extern int shmclock_jump_callback_add(IntPtr clk, NativeThreshold threshold,
                                                                               JumpCallback cb, IntPtr user, out ulong id);
        [DllImport(Lib)] internal static extern int shmclock_jump_callback_remove(IntPtr clk, ulong id);
        [DllImport(Lib)] internal static extern int shmclock_jump_watch(IntPtr clk, [MarshalAs(UnmanagedType.U1)] bool on);

        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate void JumpCallback(IntPtr jump, byte before, IntPtr user);

        // ---- writers: <shmclock/writer.h>
        [DllImport(Lib)] internal static extern int shmclock_writer_open_mode(string name, uint mode, out IntPtr w);
        [DllImport(Lib)] internal static extern void shmclock_writer_close(IntPtr w);
        [DllImport(Lib)] internal static extern int shmclock_writer_unlink(IntPtr w, string name);
        [DllImport(Lib)] internal static extern int shmclock_writer_set_time(IntPtr w, long ns);
        [DllImport(Lib)] internal static extern int shmclock_writer_set_scale(IntPtr w, double scale);
        [DllImport(Lib)] internal static extern int shmclock_writer_pause(IntPtr w);
        [DllImport(Lib)] internal static extern int shmclock_writer_resume(IntPtr w);
        [DllImport(Lib)] internal static extern int shmclock_writer_advance(IntPtr w, long ns);
        [DllImport(Lib)] internal static extern int shmclock_writer_step(IntPtr w, long deltaNs);
        [DllImport(Lib)] internal static extern int shmclock_writer_set_source(IntPtr w, int source);
        [DllImport(Lib)] internal static extern int shmclock_writer_set_stepped(IntPtr w, [MarshalAs(UnmanagedType.U1)] bool stepped);
        [DllImport(Lib)] internal static extern int shmclock_writer_set_function(IntPtr w, long monoBase, long simBase,
                                                                                 double scale, uint flags);
        [DllImport(Lib)] internal static extern int shmclock_writer_set_unix_at_zero(IntPtr w, ref long unixNs);
        [DllImport(Lib, EntryPoint = "shmclock_writer_set_unix_at_zero")]
        internal static extern int shmclock_writer_clear_unix_at_zero(IntPtr w, IntPtr none);
        [DllImport(Lib)] internal static extern int shmclock_writer_now(IntPtr w, out long ns);
        [DllImport(Lib)] internal static extern int shmclock_writer_info(IntPtr w, out NativeInfo info);

        // ---- lockstep: <shmclock/lockstep.h>
        [DllImport(Lib)] internal static extern int shmclock_lockstep_join(string name, string who, out IntPtr p);
        [DllImport(Lib)] internal static extern int shmclock_lockstep_grant(IntPtr p, long untilNs);
        [DllImport(Lib)] internal static extern int shmclock_lockstep_advance(IntPtr p, long untilNs, long timeout);
        [DllImport(Lib)] internal static extern long shmclock_lockstep_joined_at(IntPtr p);
        [DllImport(Lib)] internal static extern void shmclock_lockstep_leave(IntPtr p);
        [DllImport(Lib)] internal static extern IntPtr shmclock_lockstep_strerror(IntPtr p, int err);

        internal static string Str(IntPtr s)
        {
            return s == IntPtr.Zero ? "" : Marshal.PtrToStringAnsi(s);
        }
    }

    // The reads as Mono raw internal calls (Native~/shmclock-mono.c): under
    // Mono's default hybrid thread suspension a P/Invoke enters and leaves a
    // GC-safe region around the call, which costs more than the read; a raw
    // internal call is called as the runtime's own (Stopwatch.GetTimestamp),
    // without that transition. libshmclock-mono.so registers them, found
    // next to Shmclock.dll; it needs a Mono runtime that exports
    // mono_dangerous_add_raw_internal_call (Mono 6 and later). Elsewhere
    // (Unity's IL2CPP backend, .NET, no libshmclock-mono.so) On is false and
    // Clock reads by P/Invoke, as before.
    //
    // Sound only on a handle opened with OPEN_NO_CALLBACKS (it never runs jump
    // callbacks, which would call into C# from a raw call, nor waits for
    // their delivery), with the result in a local of the caller's stack:
    // Clock passes nothing else.
    [SuppressUnmanagedCodeSecurity]
    internal static class RawNative
    {
        // Registered by the static constructor. Mono looks an internal call
        // up when it compiles its caller, and remembers a failed lookup (the
        // call then throws MissingMethodException): the calls sit in methods
        // that are never inlined, so compiled at their first call, which
        // comes only once On is true, after the registration.
        internal static readonly bool On = Register();

        [DllImport("shmclock-mono")] static extern int shmclock_mono_register();

        static bool Register()
        {
            try {
                // libshmclock first: libshmclock-mono.so needs it loaded.
                Native.shmclock_version();
                return shmclock_mono_register() == 1;
            } catch (DllNotFoundException) {
            } catch (EntryPointNotFoundException) {
            }
            return false;
        }

        [MethodImpl(MethodImplOptions.InternalCall)] static extern int Now(IntPtr clk, out long ns);
        [MethodImpl(MethodImplOptions.InternalCall)] static extern int NowUnix(IntPtr clk, out long ns);
        [MethodImpl(MethodImplOptions.InternalCall)] static extern int NowMonotonic(IntPtr clk, out long ns);

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static int ReadNow(IntPtr clk, out long ns) { return Now(clk, out ns); }
        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static int ReadNowUnix(IntPtr clk, out long ns) { return NowUnix(clk, out ns); }
        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static int ReadNowMonotonic(IntPtr clk, out long ns) { return NowMonotonic(clk, out ns); }
    }

    // shmclock_info_t, byte for byte (x86-64; checked by the tests against
    // values the C side reports).
    [StructLayout(LayoutKind.Explicit, Size = 120)]
    internal struct NativeInfo
    {
        [FieldOffset(0)] public long sim_ns;
        [FieldOffset(8)] public long mono_ns;
        [FieldOffset(16)] public double scale;
        [FieldOffset(24)] public int source;
        [FieldOffset(28)] public byte initialized;
        [FieldOffset(29)] public byte paused;
        [FieldOffset(30)] public byte stepped;
        [FieldOffset(31)] public byte has_unix_at_zero;
        [FieldOffset(32)] public long unix_at_zero_ns;
        [FieldOffset(40)] public ulong jump_epoch;
        [FieldOffset(48)] public long last_jump_ns;
        [FieldOffset(56)] public byte writer_alive;
        [FieldOffset(60)] public int writer_pid;
        [FieldOffset(64)] public uint writer_generation;
        [FieldOffset(72)] public long writer_start_unix_ns;
        [FieldOffset(80)] public long heartbeat_age_ns;
        [FieldOffset(88)] public ulong commits;
        [FieldOffset(96)] public uint owner_uid;
        [FieldOffset(104)] public long jump_total_ns;
        [FieldOffset(112)] public byte stale;
    }

    // shmclock_jump_threshold_t (passed by value: 24 bytes, on the stack).
    [StructLayout(LayoutKind.Explicit, Size = 24)]
    internal struct NativeThreshold
    {
        [FieldOffset(0)] public byte on_clock_change;
        [FieldOffset(8)] public long min_forward_ns;
        [FieldOffset(16)] public long min_backward_ns;
    }

    // shmclock_jump_t.
    [StructLayout(LayoutKind.Explicit, Size = 32)]
    internal struct NativeJump
    {
        [FieldOffset(0)] public uint kind;
        [FieldOffset(8)] public long delta_ns;
        [FieldOffset(16)] public ulong jump_epoch;
        [FieldOffset(24)] public uint jumps;
        [FieldOffset(28)] public int source;
    }
}
