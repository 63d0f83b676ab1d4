// SPDX-License-Identifier: MIT
// Negative errnos from libshmclock as exceptions, each carrying the
// library's own message (shmclock_strerror, SHMCLOCK_ERRNO_MAP).
using System;
using System.IO;

namespace Shmclock
{
    /// <summary>Linux errno values the library returns (negated).</summary>
    public static class Errno
    {
        public const int EPERM = 1, ENOENT = 2, EINTR = 4, ENXIO = 6, EAGAIN = 11, ENOMEM = 12, EACCES = 13,
            EBUSY = 16, EEXIST = 17, EXDEV = 18, EINVAL = 22, ENOSPC = 28, ERANGE = 34, ENODATA = 61, EREMOTE = 66,
            EPROTO = 71,
            EOVERFLOW = 75, EOPNOTSUPP = 95, ETIMEDOUT = 110, ESTALE = 116, ECANCELED = 125;
    }

    /// <summary>
    /// A libshmclock error: <see cref="Errno"/> is the positive errno, the
    /// message is shmclock_strerror's, prefixed with the clock's name.
    /// </summary>
    public class ShmclockException : IOException
    {
        public int Errno { get; private set; }

        public ShmclockException(int errno, string message) : base(message)
        {
            Errno = errno;
        }
    }

    internal static class Errors
    {
        internal static string Message(int r)
        {
            return Native.Str(Native.shmclock_strerror(r));
        }

        // A lockstep call's error in lockstep's terms ("all 64 participant
        // slots are taken", the check a refused grant failed), as the C API's
        // shmclock_lockstep_strerror says it; @p may be IntPtr.Zero.
        internal static Exception ForLockstep(int r, IntPtr p, string name, string what)
        {
            return Make(r, name, what, Native.Str(Native.shmclock_lockstep_strerror(p, r)));
        }

        internal static void CheckLockstep(int r, IntPtr p, string name, string what)
        {
            if (r < 0)
                throw ForLockstep(r, p, name, what);
        }

        // The exception for -errno @r from a call about clock @name.
        // EINVAL is an ArgumentException (a bad name or value); ETIMEDOUT a
        // TimeoutException; the rest ShmclockException (an IOException).
        internal static Exception For(int r, string name, string what)
        {
            return Make(r, name, what, Message(r));
        }

        static Exception Make(int r, string name, string what, string text)
        {
            string msg = (name != null ? "shmclock " + name + ": " : "shmclock: ") +
                         (what != null ? what + ": " : "") + text;
            switch (-r) {
            case Shmclock.Errno.EINVAL:
                return new ArgumentException(msg);
            case Shmclock.Errno.ETIMEDOUT:
                return new TimeoutException(msg);
            default:
                return new ShmclockException(-r, msg);
            }
        }

        internal static void Check(int r, string name, string what)
        {
            if (r < 0)
                throw For(r, name, what);
        }
    }
}
