// SPDX-License-Identifier: MIT
// AWSIM drop-in: the Unity engine writes the shared clock.
//
// AWSIM's ClockPublisher runs a thread that publishes /clock at 100 Hz from a
// locked time source. This component instead makes the engine the clock's
// writer for the time sources where Unity drives time, so that every other
// process (and every ShmclockTimeSource in this one) reads the engine's time
// from the page, with no /clock at all:
//
//   "TimeSource"  who writes                      what this component does
//   unity         the engine: game time, scale    Update(): PublishFrame(Time.timeAsDouble, Time.timeScale)
//   ss2 (external) the scenario simulator's steps SetTime(sec, nanosec) from the co-simulation step
//   system, simulation, ros2                      nothing: shmclockd --source ... writes the clock
//
// Where it plugs in: add it to the scene's clock object in place of
// ClockPublisher, with `timeSource` set from the JSON field "TimeSource";
// for ss2, call SetTime where AWSIM calls ExternalTimeSource.SetTime.
using System;
using Shmclock;
using UnityEngine;

namespace AWSIM
{
    public class ShmclockClockPublisher : MonoBehaviour
    {
        [Tooltip("The shared clock's name (/dev/shm/shmclock.NAME); empty: $SHMCLOCK_NAME, else \"default\"")]
        public string clockName = "";

        [Tooltip("AWSIM's JSON TimeSource: unity, ss2, system, simulation or ros2")]
        public string timeSource = "unity";

        Writer writer;
        bool stepped;

        /// <summary>The writer, while this component owns the clock (null otherwise).</summary>
        public Writer Writer { get { return writer; } }

        /// <summary>True when the engine writes the clock for <paramref name="timeSource"/>.</summary>
        public static bool EngineWrites(string timeSource)
        {
            switch ((timeSource ?? "").ToLowerInvariant()) {
            case "unity":
            case "ss2":
            case "external":
                return true;
            default:
                return false;
            }
        }

        public void Awake()
        {
            if (!EngineWrites(timeSource)) {
                Debug.Log("shmclock: TimeSource " + timeSource + ": the clock is shmclockd's; not writing it");
                return;
            }
            writer = Writer.Open(string.IsNullOrEmpty(clockName) ? Clock.DefaultName() : clockName);
            stepped = timeSource.ToLowerInvariant() != "unity";
            writer.SetSource(stepped ? ClockSource.External : ClockSource.Fixed);
            if (!stepped)
                writer.SetStepped(false);
        }

        /// <summary>unity: each frame, the engine's game time and time scale (scale 0 pauses).</summary>
        public void Update()
        {
            if (writer != null && !stepped)
                writer.PublishFrame(Time.timeAsDouble, Time.timeScale);
        }

        /// <summary>ss2: the scenario simulator's step (AWSIM's ExternalTimeSource.SetTime).</summary>
        public void SetTime(int seconds, uint nanoseconds)
        {
            if (writer == null || !stepped)
                throw new InvalidOperationException("shmclock: SetTime is for TimeSource ss2 (this is " + timeSource + ")");
            writer.Advance(seconds * 1000000000L + nanoseconds);
        }

        public void OnDestroy()
        {
            if (writer != null) {
                writer.Dispose();
                writer = null;
            }
        }
    }
}
