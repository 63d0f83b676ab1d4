// SPDX-License-Identifier: MIT
// Stand-ins for the parts of UnityEngine and AWSIM that the AWSIM drop-ins
// (readers/csharp/Samples~/AWSIM) use, with the same names and shapes, so
// that the tests compile and drive them without Unity. A test sets Time's
// values as a game loop would.
namespace UnityEngine
{
    public class MonoBehaviour
    {
    }

    public class TooltipAttribute : System.Attribute
    {
        public TooltipAttribute(string tooltip) { }
    }

    public static class Time
    {
        public static double timeAsDouble { get; set; }
        public static float timeScale { get; set; }
        public static float fixedDeltaTime { get; set; }
    }

    public static class Debug
    {
        public static void Log(object message) { System.Console.WriteLine("# " + message); }
    }
}

namespace AWSIM
{
    // AWSIM's time source interface (AWSIM/Scripts/Common/TimeSource).
    public interface ITimeSource
    {
        void GetTime(out int seconds, out uint nanoseconds);
    }
}
