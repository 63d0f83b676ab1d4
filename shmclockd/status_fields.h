/* SPDX-License-Identifier: MIT */
/*
 * What `status` answers, one table (STATUS_FIELDS): every field of the
 * daemon's status object, its kind and unit, the modes whose status carries
 * it, and the Prometheus metric shmclock-panel makes of it. Printed by
 * `shmclockd --help-status`; shmclock-panel's /metrics (names, HELP, TYPE)
 * comes from it (shmclockd/panel/metrics.c) and `shmclock-panel
 * --help-metrics` prints what it serves. Checked by tests:
 * tests/doc/status_fields.py (shmclock-panel(1)'s metric list, every key
 * shmclockctl, the panel and panel.js read is a row here) and
 * tests/lib/status_schema.py (a daemon's real status in each mode has the
 * rows of that mode, and nothing that is not a row).
 *
 * Adding a field: a row here, and its value where the daemon computes it
 * (the cJSON_Add... call in request.c, clockthread.c, ticks.c, control.c,
 * ros2_glue.c, mode_lockstep.c or hosts/status.c).
 */
#ifndef SHMCLOCKD_STATUS_FIELDS_H
#define SHMCLOCKD_STATUS_FIELDS_H

/* A field's kind. */
enum sf_kind {
	SF_TEXT,   /* a string */
	SF_BOOL,   /* true or false (a metric: 1 or 0) */
	SF_GAUGE,  /* a number that goes up and down */
	SF_COUNT,  /* a number that only grows while the daemon runs */
	SF_OBJECT, /* an object: its fields are the rows of section "KEY" */
	SF_LIST,   /* an array of objects, the rows of section "SECTION.KEY[]" (a metric: its length) */
	SF_BY,     /* an object of counters, one per label value (a metric labelled SF_LABEL) */
	SF_HIST,   /* [lowest ns, count] pairs: a latehist (a metric: a histogram) */
};

/* Its unit: a metric of a time is in seconds, whatever the field's unit. */
enum sf_unit {
	SF_NONE,
	SF_NS,
	SF_US,
	SF_S,
	SF_HZ,
};

/* The modes whose status has it (mode.h; hosts: a leader or a follower). */
#define SF_PLAIN 1u
#define SF_LOCKSTEP 2u
#define SF_LEADER 4u
#define SF_FOLLOWER 8u
#define SF_HOSTS (SF_LEADER | SF_FOLLOWER)
#define SF_ALL (SF_PLAIN | SF_LOCKSTEP | SF_HOSTS)
/* ... and only under a condition its help names (else always there). */
#define SF_SOMETIMES 16u

/*
 * X(section, key, kind, unit, modes, metric, help): section "" is the top
 * level, "a" the object a, "a.b[]" each element of the array b in a. The
 * metric is NULL for a field the panel does not export; a field's help is
 * the metric's HELP where it has one (a sentence), else a phrase.
 */
#define STATUS_FIELDS(X)                                                                           \
	X("", "name", SF_TEXT, SF_NONE, SF_ALL, NULL, "the clock's name")                         \
	X("", "source", SF_TEXT, SF_NONE, SF_ALL, NULL, "its time source")                        \
	X("", "initialized", SF_BOOL, SF_NONE, SF_ALL, NULL, "the clock has a time")              \
	X("", "sim_ns", SF_TEXT, SF_NS, SF_ALL, NULL, "simulation time, a decimal string")         \
	X("", "sim", SF_TEXT, SF_NONE, SF_ALL, NULL, "simulation time, for people")               \
	X("", "scale", SF_GAUGE, SF_NONE, SF_ALL, NULL, "the nominal scale")                      \
	X("", "scale_achieved", SF_GAUGE, SF_NONE, SF_ALL | SF_SOMETIMES,                         \
	  "shmclock_achieved_scale", "the scale the daemon achieved (after a second of running)") \
	X("", "paused", SF_BOOL, SF_NONE, SF_ALL, NULL, "the clock is paused")                    \
	X("", "stepped", SF_BOOL, SF_NONE, SF_ALL, NULL, "the clock moves in steps")              \
	X("", "jump_epoch", SF_COUNT, SF_NONE, SF_ALL, NULL, "the jumps so far")                  \
	X("", "last_jump_ns", SF_GAUGE, SF_NS, SF_ALL, NULL, "the size of the last jump")         \
	X("", "unix_at_zero_ns", SF_TEXT, SF_NS, SF_ALL | SF_SOMETIMES, NULL,                     \
	  "UNIX time of simulation zero (with UnixTimeAtZero)")                                   \
	X("", "sim_unix", SF_TEXT, SF_NONE, SF_ALL | SF_SOMETIMES, NULL,                          \
	  "simulation time as an ISO-8601 UTC date (with UnixTimeAtZero)")                        \
	X("", "publish_hz", SF_GAUGE, SF_HZ, SF_ALL, NULL, "the clock thread's tick rate")         \
	X("", "writer_pid", SF_GAUGE, SF_NONE, SF_ALL, NULL, "the writer's pid")                  \
	X("", "commits", SF_COUNT, SF_NONE, SF_ALL, NULL, "changes the writer published")         \
	X("", "stale", SF_BOOL, SF_NONE, SF_ALL, NULL, "what the clock follows is silent or lost") \
	X("", "ticks", SF_OBJECT, SF_NONE, SF_ALL, NULL, "the clock thread's ticks")              \
	X("ticks", "count", SF_COUNT, SF_NONE, SF_ALL, "shmclock_ticks_total",                   \
	  "Ticks of the daemon's clock thread.")                                                  \
	X("ticks", "skipped", SF_COUNT, SF_NONE, SF_ALL, "shmclock_ticks_skipped_total",          \
	  "Ticks skipped because the clock thread ran late.")                                     \
	X("ticks", "late_p50_ns", SF_GAUGE, SF_NS, SF_ALL, NULL, "tick lateness, median")         \
	X("ticks", "late_p99_ns", SF_GAUGE, SF_NS, SF_ALL, NULL, "tick lateness, p99")            \
	X("ticks", "late_p999_ns", SF_GAUGE, SF_NS, SF_ALL, NULL, "tick lateness, p99.9")         \
	X("ticks", "late_max_ns", SF_GAUGE, SF_NS, SF_ALL, NULL, "tick lateness, the worst")      \
	X("ticks", "late_hist", SF_HIST, SF_NS, SF_ALL, "shmclock_tick_lateness_seconds",        \
	  "How late the daemon's clock thread ran its ticks.")                                    \
	X("", "control", SF_OBJECT, SF_NONE, SF_ALL, NULL, "the control socket")                  \
	X("control", "answered", SF_COUNT, SF_NONE, SF_ALL, "shmclock_control_requests_total",   \
	  "Control requests the daemon answered ok.")                                             \
	X("control", "errors", SF_COUNT, SF_NONE, SF_ALL, "shmclock_control_errors_total",       \
	  "Control requests the daemon answered with an error.")                                  \
	X("control", "refused", SF_COUNT, SF_NONE, SF_ALL, "shmclock_control_refusals_total",    \
	  "Control connections refused (peer credentials).")                                      \
	X("control", "dropped", SF_COUNT, SF_NONE, SF_ALL, "shmclock_control_dropped_total",     \
	  "Control connections dropped (idle, oversized, not reading).")                          \
	X("control", "evicted", SF_COUNT, SF_NONE, SF_ALL, "shmclock_control_evicted_total",     \
	  "Control connections closed to make room for a new one (all slots taken).")             \
	X("control", "clients", SF_GAUGE, SF_NONE, SF_ALL, "shmclock_control_clients",           \
	  "Control connections open now.")                                                        \
	X("control", "fd_exhausted", SF_COUNT, SF_NONE, SF_ALL,                                   \
	  "shmclock_control_fd_exhausted_total",                                                  \
	  "Control connections the daemon could not accept: out of file descriptors.")            \
	X("", "record", SF_OBJECT, SF_NONE, SF_ALL | SF_SOMETIMES, NULL,                          \
	  "the recorder (with Record)")                                                           \
	X("record", "file", SF_TEXT, SF_NONE, SF_ALL, NULL, "the MCAP file it writes")           \
	X("record", "written", SF_COUNT, SF_NONE, SF_ALL, "shmclock_record_written_total",        \
	  "Changes and events written to the recording.")                                         \
	X("record", "dropped", SF_COUNT, SF_NONE, SF_ALL, "shmclock_record_dropped_total",        \
	  "Changes and events lost to the recording (its queue full, or a write failed).")        \
	X("record", "chunks", SF_COUNT, SF_NONE, SF_ALL, NULL, "chunks written")                  \
	X("record", "bytes", SF_GAUGE, SF_NONE, SF_ALL, NULL, "the file's whole length")          \
	X("record", "error", SF_TEXT, SF_NONE, SF_ALL, NULL,                                      \
	  "the last failed write's error, \"\" if none")                                          \
	X("", "replay", SF_OBJECT, SF_NONE, SF_PLAIN | SF_SOMETIMES, NULL,                        \
	  "the replay (the replay source)")                                                       \
	X("replay", "file", SF_TEXT, SF_NONE, SF_PLAIN, NULL, "the recording")                    \
	X("replay", "changes", SF_GAUGE, SF_NONE, SF_PLAIN, NULL, "the changes in it")            \
	X("replay", "applied", SF_GAUGE, SF_NONE, SF_PLAIN, NULL, "the changes published so far")  \
	X("replay", "late", SF_COUNT, SF_NONE, SF_PLAIN, NULL,                                    \
	  "changes published after their instant")                                                \
	X("replay", "offset_ns", SF_TEXT, SF_NS, SF_PLAIN, NULL,                                  \
	  "at the anchor: this host's instant minus the recording's")                             \
	X("replay", "anchor_ns", SF_TEXT, SF_NS, SF_PLAIN, NULL,                                  \
	  "this host's instant the replay was last anchored at (start, resume, seek, scale)")     \
	X("replay", "speed", SF_GAUGE, SF_NONE, SF_PLAIN, NULL,                                   \
	  "the recording's pace times this (scale), 1 as recorded")                               \
	X("replay", "paused", SF_BOOL, SF_NONE, SF_PLAIN, NULL, "paused by pause")                \
	X("replay", "truncated", SF_BOOL, SF_NONE, SF_PLAIN, NULL,                                \
	  "the recording is cut short")                                                           \
	X("", "ros2", SF_OBJECT, SF_NONE, SF_ALL | SF_SOMETIMES, NULL,                            \
	  "the ROS 2 side (when the config uses it)")                                             \
	X("ros2", "domain", SF_GAUGE, SF_NONE, SF_ALL, NULL, "the DDS domain")                    \
	X("ros2", "following", SF_BOOL, SF_NONE, SF_ALL, NULL, "it follows /clock")               \
	X("ros2", "publishing", SF_BOOL, SF_NONE, SF_ALL, NULL, "it publishes /clock")            \
	X("ros2", "samples", SF_COUNT, SF_NONE, SF_ALL | SF_SOMETIMES, NULL,                      \
	  "/clock samples received (following)")                                                  \
	X("ros2", "rate_hz", SF_GAUGE, SF_HZ, SF_ALL | SF_SOMETIMES, NULL,                        \
	  "their rate (following)")                                                               \
	X("ros2", "last_sample_age_ns", SF_GAUGE, SF_NS, SF_ALL | SF_SOMETIMES, NULL,             \
	  "since the last sample, -1 none yet (following)")                                       \
	X("ros2", "stale", SF_BOOL, SF_NONE, SF_ALL | SF_SOMETIMES, NULL,                         \
	  "/clock is silent (following)")                                                         \
	X("ros2", "published", SF_COUNT, SF_NONE, SF_ALL | SF_SOMETIMES, NULL,                    \
	  "/clock samples published (publishing)")                                                \
	X("ros2", "publish_hz", SF_GAUGE, SF_HZ, SF_ALL | SF_SOMETIMES, NULL,                     \
	  "the rate it publishes at (publishing)")                                                \
	X("ros2", "security", SF_TEXT, SF_NONE, SF_ALL | SF_SOMETIMES, NULL,                      \
	  "the enclave it joins DDS with (Ros2.Security)")                                        \
	X("ros2", "security_refused", SF_COUNT, SF_NONE, SF_ALL | SF_SOMETIMES,                   \
	  "shmclock_dds_security_refused_total",                                                  \
	  "Peers DDS Security refused: a failed handshake or a permission (Ros2.Security).")      \
	X("ros2", "security_refused_peers", SF_LIST, SF_NONE, SF_ALL | SF_SOMETIMES, NULL,        \
	  "the first peers refused, by name")                                                     \
	X("ros2.security_refused_peers[]", "peer", SF_TEXT, SF_NONE, SF_ALL, NULL,                \
	  "its certificate's subject, else its participant's GUID")                               \
	X("ros2.security_refused_peers[]", "count", SF_COUNT, SF_NONE, SF_ALL, NULL,              \
	  "its refusals")                                                                         \
	X("ros2.security_refused_peers[]", "why", SF_TEXT, SF_NONE, SF_ALL, NULL,                 \
	  "DDS Security's reason, the first time")                                                \
	STATUS_FIELDS_LOCKSTEP(X)                                                                  \
	STATUS_FIELDS_HOSTS(X)

#define STATUS_FIELDS_LOCKSTEP(X)                                                                  \
	X("", "lockstep", SF_OBJECT, SF_NONE, SF_LOCKSTEP, NULL, "lockstep (doc/lockstep.md)")    \
	X("lockstep", "participants_required", SF_GAUGE, SF_NONE, SF_LOCKSTEP,                    \
	  "shmclock_lockstep_participants_required",                                              \
	  "Participants the clock waits for before it starts.")                                   \
	X("lockstep", "running", SF_BOOL, SF_NONE, SF_LOCKSTEP, "shmclock_lockstep_running",     \
	  "1 once every required participant joined.")                                            \
	X("lockstep", "steps_per_s", SF_GAUGE, SF_HZ, SF_LOCKSTEP | SF_SOMETIMES, NULL,           \
	  "advances per second since it started running")                                         \
	X("lockstep", "realtime_factor", SF_GAUGE, SF_NONE, SF_LOCKSTEP | SF_SOMETIMES, NULL,     \
	  "simulated per real time since it started running")                                     \
	X("lockstep", "max_scale", SF_GAUGE, SF_NONE, SF_LOCKSTEP | SF_SOMETIMES, NULL,           \
	  "Lockstep.MaxScale (when set)")                                                         \
	X("lockstep", "on_death", SF_TEXT, SF_NONE, SF_LOCKSTEP, NULL, "evict or abort")          \
	X("lockstep", "on_stall", SF_TEXT, SF_NONE, SF_LOCKSTEP, NULL, "what a stall does")       \
	X("lockstep", "evict_after", SF_TEXT, SF_NONE, SF_LOCKSTEP | SF_SOMETIMES, NULL,          \
	  "Lockstep.EvictAfter (when set)")                                                       \
	X("lockstep", "max_grant_ahead", SF_TEXT, SF_NONE, SF_LOCKSTEP, NULL,                     \
	  "how far ahead a grant may be")                                                         \
	X("lockstep", "advances", SF_COUNT, SF_NONE, SF_LOCKSTEP, "shmclock_lockstep_steps_total", \
	  "Lockstep advances of the clock.")                                                      \
	X("lockstep", "deaths", SF_COUNT, SF_NONE, SF_LOCKSTEP, "shmclock_lockstep_deaths_total", \
	  "Participants that died without leaving.")                                              \
	X("lockstep", "stalls", SF_COUNT, SF_NONE, SF_LOCKSTEP, "shmclock_lockstep_stalls_total", \
	  "Participants evicted for holding the clock too long.")                                 \
	X("lockstep", "last_death", SF_TEXT, SF_NONE, SF_LOCKSTEP | SF_SOMETIMES, NULL,           \
	  "the participant that died last (after a death)")                                       \
	X("lockstep", "last_death_grant_ns", SF_TEXT, SF_NS, SF_LOCKSTEP | SF_SOMETIMES, NULL,    \
	  "its last grant (after a death)")                                                       \
	X("lockstep", "last_death_clock_ns", SF_TEXT, SF_NS, SF_LOCKSTEP | SF_SOMETIMES, NULL,    \
	  "the clock when it died (after a death)")                                               \
	X("lockstep", "last_death_found_mono_ns", SF_TEXT, SF_NS, SF_LOCKSTEP | SF_SOMETIMES,     \
	  NULL, "when the death was found (after a death)")                                       \
	X("lockstep", "last_eviction", SF_TEXT, SF_NONE, SF_LOCKSTEP | SF_SOMETIMES, NULL,        \
	  "the participant evicted last (after an eviction)")                                     \
	X("lockstep", "aborted", SF_BOOL, SF_NONE, SF_LOCKSTEP, NULL, "a death stopped the clock") \
	X("lockstep", "last_to_grant_most", SF_TEXT, SF_NONE, SF_LOCKSTEP | SF_SOMETIMES, NULL,   \
	  "the participant last to grant most often (once one was)")                              \
	X("lockstep", "members", SF_LIST, SF_NONE, SF_LOCKSTEP, "shmclock_lockstep_participants", \
	  "Lockstep participants now.")                                                           \
	X("lockstep.members[]", "name", SF_TEXT, SF_NONE, SF_LOCKSTEP, NULL, "the participant's name")    \
	X("lockstep.members[]", "pid", SF_GAUGE, SF_NONE, SF_LOCKSTEP, NULL, "its pid")                   \
	X("lockstep.members[]", "grant_ns", SF_TEXT, SF_NS, SF_LOCKSTEP, NULL, "its grant")               \
	X("lockstep.members[]", "grant", SF_TEXT, SF_NONE, SF_LOCKSTEP, NULL, "its grant, for people")    \
	X("lockstep.members[]", "joined_ns", SF_TEXT, SF_NS, SF_LOCKSTEP, NULL, "when it joined")         \
	X("lockstep.members[]", "holding", SF_BOOL, SF_NONE, SF_LOCKSTEP, "shmclock_lockstep_holding",    \
	  "1 while the clock waits for this participant.")                                        \
	X("lockstep.members[]", "holding_for_s", SF_GAUGE, SF_S, SF_LOCKSTEP | SF_SOMETIMES, NULL,        \
	  "how long it has held the clock (while it holds)")                                      \
	X("lockstep.members[]", "grants", SF_COUNT, SF_NONE, SF_LOCKSTEP | SF_SOMETIMES,                  \
	  "shmclock_lockstep_grants_total", "Grants the participant made.")                       \
	X("lockstep.members[]", "steps", SF_COUNT, SF_NONE, SF_LOCKSTEP | SF_SOMETIMES,                   \
	  "shmclock_lockstep_participant_steps_total",                                            \
	  "Returns from advance at the participant's grant.")                                     \
	X("lockstep.members[]", "last_to_grant", SF_COUNT, SF_NONE, SF_LOCKSTEP | SF_SOMETIMES,           \
	  "shmclock_lockstep_last_to_grant_total",                                                \
	  "Advances for which the participant's grant came last.")                                \
	X("lockstep.members[]", "work_s", SF_COUNT, SF_S, SF_LOCKSTEP | SF_SOMETIMES,                     \
	  "shmclock_lockstep_working_seconds_total",                                              \
	  "Real time the participant spent working (from a return to its next grant).")           \
	X("lockstep.members[]", "wait_s", SF_COUNT, SF_S, SF_LOCKSTEP | SF_SOMETIMES,                     \
	  "shmclock_lockstep_waiting_seconds_total",                                              \
	  "Real time the participant spent waiting (from a grant to the return).")                \
	X("lockstep.members[]", "work_p50_us", SF_GAUGE, SF_US, SF_LOCKSTEP | SF_SOMETIMES, NULL,         \
	  "its work between steps, median")                                                       \
	X("lockstep.members[]", "work_p99_us", SF_GAUGE, SF_US, SF_LOCKSTEP | SF_SOMETIMES, NULL,         \
	  "its work between steps, p99")                                                          \
	X("lockstep.members[]", "wait_p50_us", SF_GAUGE, SF_US, SF_LOCKSTEP | SF_SOMETIMES, NULL,         \
	  "its wait for the others, median")                                                      \
	X("lockstep.members[]", "wait_p99_us", SF_GAUGE, SF_US, SF_LOCKSTEP | SF_SOMETIMES, NULL,         \
	  "its wait for the others, p99")                                                         \
	X("lockstep.members[]", "working_for_s", SF_GAUGE, SF_S, SF_LOCKSTEP | SF_SOMETIMES, NULL,        \
	  "how long it has worked since its last return (while it works)")                        \
	X("lockstep.members[]", "host", SF_TEXT, SF_NONE, SF_LOCKSTEP | SF_SOMETIMES, NULL,               \
	  "a participant's host, when not this one (between hosts)")                               \
	X("lockstep", "hosts", SF_LIST, SF_NONE, SF_LOCKSTEP | SF_SOMETIMES, NULL,                \
	  "the leader between hosts: the follower hosts it counts")                               \
	X("lockstep.hosts[]", "host", SF_TEXT, SF_NONE, SF_LOCKSTEP, NULL,                        \
	  "its id ([identity@]host/pid/start#incarnation)")                                       \
	X("lockstep.hosts[]", "participants", SF_GAUGE, SF_NONE, SF_LOCKSTEP, NULL,               \
	  "its participants")                                                                     \
	X("lockstep.hosts[]", "promise_ns", SF_TEXT, SF_NS, SF_LOCKSTEP, NULL,                    \
	  "its promise: its participants' smallest grant (none: no participant)")                 \
	X("lockstep.hosts[]", "shown_ns", SF_TEXT, SF_NS, SF_LOCKSTEP, NULL, "its clock")         \
	X("lockstep.hosts[]", "heard_s", SF_GAUGE, SF_S, SF_LOCKSTEP, NULL, "since its last word") \
	X("lockstep.hosts[]", "rtt_us", SF_GAUGE, SF_US, SF_LOCKSTEP | SF_SOMETIMES, NULL,        \
	  "the last round trip to it (a time out, its next promise back, less its hold)")         \
	X("lockstep.hosts[]", "deaths", SF_COUNT, SF_NONE, SF_LOCKSTEP, NULL,                     \
	  "its participants found dead")                                                          \
	X("lockstep", "host", SF_TEXT, SF_NONE, SF_LOCKSTEP | SF_SOMETIMES, NULL,                 \
	  "a follower host in lockstep: its id")                                                  \
	X("lockstep", "leader", SF_TEXT, SF_NONE, SF_LOCKSTEP | SF_SOMETIMES, NULL,               \
	  "a follower host: the leader whose times it takes")                                     \
	X("lockstep", "heard_ns", SF_TEXT, SF_NS, SF_LOCKSTEP | SF_SOMETIMES, NULL,               \
	  "a follower host: the largest time heard")                                              \
	X("lockstep", "heard_s", SF_GAUGE, SF_S, SF_LOCKSTEP | SF_SOMETIMES, NULL,                \
	  "a follower host: since its leader's last time")                                        \
	X("lockstep", "promised_ns", SF_TEXT, SF_NS, SF_LOCKSTEP | SF_SOMETIMES, NULL,            \
	  "a follower host: its last promise (none: no participant)")                             \
	X("lockstep", "counted", SF_BOOL, SF_NONE, SF_LOCKSTEP | SF_SOMETIMES, NULL,              \
	  "a follower host: its leader counts it")                                                \
	X("lockstep", "host_evictions", SF_COUNT, SF_NONE, SF_LOCKSTEP | SF_SOMETIMES, NULL,      \
	  "a follower host: times its leader lost it (its participants were evicted)")            \
	X("lockstep", "promise_repeats", SF_COUNT, SF_NONE, SF_LOCKSTEP | SF_SOMETIMES, NULL,     \
	  "a follower host: promises repeated (no time named them yet)")                          \
	X("lockstep", "conflict_with", SF_TEXT, SF_NONE, SF_LOCKSTEP | SF_SOMETIMES, NULL,        \
	  "the leader between hosts: another live leader of its clock, the last heard (once one was)") \
	X("lockstep", "conflict_s", SF_GAUGE, SF_S, SF_LOCKSTEP | SF_SOMETIMES, NULL,             \
	  "... since it was last heard")                                                          \
	X("lockstep", "roster_s", SF_GAUGE, SF_S, SF_LOCKSTEP | SF_SOMETIMES, NULL,               \
	  "a follower host: since the leader's last list of every participant (the other "        \
	  "hosts' among the members, with their host)")

#define STATUS_FIELDS_HOSTS(X)                                                                     \
	X("", "distribute", SF_OBJECT, SF_NONE, SF_HOSTS, NULL, "between hosts (doc/hosts.md)")   \
	X("distribute", "role", SF_TEXT, SF_NONE, SF_HOSTS, NULL, "leader or follower")           \
	X("distribute", "clock", SF_TEXT, SF_NONE, SF_HOSTS, NULL, "the clock's name on the wire") \
	X("distribute", "leader", SF_TEXT, SF_NONE, SF_HOSTS, NULL,                               \
	  "the leader's id (this one, or the one followed; empty: none yet)")                     \
	X("distribute", "changes", SF_COUNT, SF_NONE, SF_HOSTS, "shmclock_hosts_changes_total",   \
	  "Changes of the time function led or followed.")                                        \
	X("distribute", "reanchors", SF_COUNT, SF_NONE, SF_HOSTS,                                 \
	  "shmclock_hosts_reanchors_total",                                                       \
	  "Host clock steps the time function was re-anchored for.")                              \
	X("distribute", "offset_ns", SF_GAUGE, SF_NS, SF_HOSTS, NULL,                             \
	  "the time scale minus CLOCK_MONOTONIC, as last sampled")                                \
	X("distribute", "queued", SF_GAUGE, SF_NONE, SF_HOSTS, "shmclock_hosts_queued_changes",   \
	  "Changes waiting for their instant now.")                                               \
	X("distribute", "holding", SF_GAUGE, SF_NONE, SF_FOLLOWER, NULL,                          \
	  "the change whose instant its readers stop at (0: none)")                               \
	X("distribute", "term", SF_GAUGE, SF_NONE, SF_HOSTS, "shmclock_hosts_term",               \
	  "The leader's term (led, or followed).")                                                \
	X("distribute", "conflicts", SF_COUNT, SF_NONE, SF_HOSTS, "shmclock_hosts_conflicts_total", \
	  "Conflicts between leaders seen so far.")                                               \
	X("distribute", "conflict", SF_BOOL, SF_NONE, SF_HOSTS, "shmclock_hosts_conflict",        \
	  "1 while two live leaders publish this clock.")                                         \
	X("distribute", "conflict_with", SF_TEXT, SF_NONE, SF_HOSTS | SF_SOMETIMES, NULL,         \
	  "the other leader (during a conflict)")                                                 \
	X("distribute", "conflict_term", SF_GAUGE, SF_NONE, SF_HOSTS | SF_SOMETIMES, NULL,        \
	  "its term (during a conflict)")                                                         \
	X("distribute", "applied_p50_ns", SF_GAUGE, SF_NS, SF_HOSTS | SF_SOMETIMES, NULL,         \
	  "how long after their instant changes were committed, median (after one)")             \
	X("distribute", "applied_p99_ns", SF_GAUGE, SF_NS, SF_HOSTS | SF_SOMETIMES,               \
	  "shmclock_hosts_applied_p99_seconds",                                                   \
	  "How long after their instant changes were committed (p99).")                           \
	X("distribute", "applied_max_ns", SF_GAUGE, SF_NS, SF_HOSTS | SF_SOMETIMES, NULL,         \
	  "... the latest (after one)")                                                           \
	X("distribute", "udp_drops", SF_COUNT, SF_NONE, SF_HOSTS | SF_SOMETIMES,                  \
	  "shmclock_hosts_udp_drops_total",                                                       \
	  "Datagrams the kernel dropped at the daemon's full DDS socket buffers.")                \
	X("distribute", "udp_rcvbuf_bytes", SF_GAUGE, SF_NONE, SF_HOSTS | SF_SOMETIMES,           \
	  "shmclock_hosts_udp_rcvbuf_bytes",                                                      \
	  "The smallest receive buffer the kernel granted the daemon's DDS sockets.")             \
	X("distribute", "lead_current_ns", SF_GAUGE, SF_NS, SF_HOSTS, "shmclock_hosts_lead_seconds", \
	  "Leader: the adaptive Lead now.")                                                       \
	X("distribute", "decided_ahead", SF_COUNT, SF_NONE, SF_HOSTS,                             \
	  "shmclock_hosts_decided_ahead_total",                                                   \
	  "Changes whose readers switched at the instant by themselves (decided ahead).")         \
	X("distribute", "stale", SF_BOOL, SF_NONE, SF_HOSTS, "shmclock_hosts_stale",              \
	  "Follower: 1 while its clock is stale (the leader silent or lost, its lease not "       \
	  "echoed yet).")                                                                         \
	X("distribute", "followers", SF_LIST, SF_NONE, SF_LEADER, "shmclock_hosts_followers",     \
	  "Leader: followers that acknowledge its changes (members).")                            \
	X("distribute.followers[]", "id", SF_TEXT, SF_NONE, SF_LEADER, NULL,                      \
	  "the follower's id ([identity@]host/pid/start)")                                        \
	X("distribute.followers[]", "acked", SF_GAUGE, SF_NONE, SF_LEADER, NULL,                            \
	  "it holds every change up to this one")                                                 \
	X("distribute.followers[]", "committed", SF_GAUGE, SF_NONE, SF_LEADER, NULL,                        \
	  "it heard the commits up to this one")                                                  \
	X("distribute.followers[]", "last_heard_ns", SF_GAUGE, SF_NS, SF_LEADER, NULL, "since its last word") \
	X("distribute.followers[]", "last_ack_ns", SF_GAUGE, SF_NS, SF_LEADER,                              \
	  "shmclock_hosts_follower_last_ack_seconds",                                             \
	  "Leader: how long a follower's last acknowledgement took.")                             \
	X("distribute.followers[]", "late_changes", SF_COUNT, SF_NONE, SF_LEADER,                           \
	  "shmclock_hosts_follower_late_changes_total",                                           \
	  "Leader: a follower's changes committed after their instant, as it reports them.")      \
	X("distribute.followers[]", "refused", SF_COUNT, SF_NONE, SF_LEADER,                                \
	  "shmclock_hosts_follower_refused_total",                                                \
	  "Leader: samples a follower refused, as it reports them.")                              \
	X("distribute.followers[]", "holds", SF_COUNT, SF_NONE, SF_LEADER, NULL,                            \
	  "its holds past an instant, as it reports them")                                        \
	X("distribute.followers[]", "slowest", SF_GAUGE, SF_NONE, SF_LEADER,                                \
	  "shmclock_hosts_follower_slowest_changes",                                              \
	  "Leader: of the last 32 changes, those a follower was the last to hold.")               \
	X("distribute", "slowest", SF_TEXT, SF_NONE, SF_LEADER | SF_SOMETIMES, NULL,             \
	  "the follower that was the last to hold 24 of the last 32 changes (until 12): every "  \
	  "change waits for it")                                                                  \
	X("distribute", "ack_p50_ns", SF_GAUGE, SF_NS, SF_LEADER | SF_SOMETIMES, NULL,            \
	  "from announcing a change to its last acknowledgement, median (after one)")             \
	X("distribute", "ack_p99_ns", SF_GAUGE, SF_NS, SF_LEADER | SF_SOMETIMES,                  \
	  "shmclock_hosts_ack_p99_seconds",                                                       \
	  "Leader: from announcing a change to its last acknowledgement (p99).")                  \
	X("distribute", "commit_p50_ns", SF_GAUGE, SF_NS, SF_LEADER | SF_SOMETIMES, NULL,         \
	  "from a client's change to its commit, median (after one)")                             \
	X("distribute", "commit_p99_ns", SF_GAUGE, SF_NS, SF_LEADER | SF_SOMETIMES,               \
	  "shmclock_hosts_commit_p99_seconds", "Leader: from a client's change to its commit (p99).") \
	X("distribute", "postponed", SF_COUNT, SF_NONE, SF_LEADER, "shmclock_hosts_postponed_total", \
	  "Leader: changes postponed for a missing acknowledgement.")                             \
	X("distribute", "lost_followers", SF_COUNT, SF_NONE, SF_LEADER,                           \
	  "shmclock_hosts_followers_lost_total", "Leader: followers declared lost.")              \
	X("distribute", "asked_aside", SF_COUNT, SF_NONE, SF_LEADER,                              \
	  "shmclock_hosts_asked_aside_total",                                                     \
	  "Leader: followers asked to step aside for holding up changes (OnSlow).")               \
	X("distribute", "lead_ns", SF_GAUGE, SF_NS, SF_LEADER, NULL, "Distribute.Lead")           \
	X("distribute", "deposed", SF_BOOL, SF_NONE, SF_LEADER, NULL,                             \
	  "a live leader above it took over: it stopped publishing")                              \
	X("distribute", "heartbeat_ns", SF_GAUGE, SF_NS, SF_LEADER, NULL, "Distribute.Heartbeat") \
	X("distribute", "sent", SF_COUNT, SF_NONE, SF_LEADER, "shmclock_hosts_messages_sent_total", \
	  "Leader: messages sent.")                                                               \
	X("distribute", "acks_received", SF_COUNT, SF_NONE, SF_LEADER,                            \
	  "shmclock_hosts_acks_received_total", "Leader: acknowledgements received.")             \
	X("distribute", "late_changes", SF_COUNT, SF_NONE, SF_FOLLOWER,                           \
	  "shmclock_hosts_late_changes_total",                                                    \
	  "Follower: changes that arrived after their instant.")                                  \
	X("distribute", "late_p50_ns", SF_GAUGE, SF_NS, SF_FOLLOWER | SF_SOMETIMES, NULL,         \
	  "how late those were, median (after one)")                                              \
	X("distribute", "late_p99_ns", SF_GAUGE, SF_NS, SF_FOLLOWER | SF_SOMETIMES, NULL,         \
	  "how late those were, p99 (after one)")                                                 \
	X("distribute", "worst_late_ns", SF_GAUGE, SF_NS, SF_FOLLOWER,                            \
	  "shmclock_hosts_worst_late_seconds",                                                    \
	  "Follower: the latest a change arrived after its instant.")                             \
	X("distribute", "last_late_ns", SF_GAUGE, SF_NS, SF_FOLLOWER, NULL,                       \
	  "how late the last late change was")                                                    \
	X("distribute", "leaders", SF_COUNT, SF_NONE, SF_FOLLOWER, "shmclock_hosts_leaders_total", \
	  "Follower: leaders followed so far.")                                                   \
	X("distribute", "refused", SF_COUNT, SF_NONE, SF_FOLLOWER, "shmclock_hosts_refused_total", \
	  "Follower: changes refused (absurd instants, heartbeats, rates, functions).")            \
	X("distribute", "host_offset_ns", SF_GAUGE, SF_NS, SF_FOLLOWER | SF_SOMETIMES,            \
	  "shmclock_hosts_host_offset_seconds",                                                   \
	  "Follower: this host's clock minus the leader's, as measured.")                         \
	X("distribute", "clocks_disagree", SF_BOOL, SF_NONE, SF_FOLLOWER | SF_SOMETIMES,          \
	  "shmclock_hosts_clocks_disagree",                                                       \
	  "Follower: 1 while this host's clock is off the leader's by more than the bound.")      \
	X("distribute", "refused_last", SF_TEXT, SF_NONE, SF_FOLLOWER | SF_SOMETIMES, NULL,       \
	  "why it refused last (after a refusal)")                                                \
	X("distribute", "holds", SF_COUNT, SF_NONE, SF_FOLLOWER, "shmclock_hosts_holds_total",    \
	  "Follower: instants held waiting for a commit.")                                        \
	X("distribute", "hold_stales", SF_COUNT, SF_NONE, SF_FOLLOWER,                            \
	  "shmclock_hosts_hold_stales_total",                                                     \
	  "Follower: stale marks made by an instant held, or a change missed, past its bound.")   \
	X("distribute", "ran_past_instant", SF_COUNT, SF_NONE, SF_FOLLOWER,                       \
	  "shmclock_hosts_ran_past_instant_total",                                                \
	  "Follower: changes its clock thread first acted on after their instant.")               \
	X("distribute", "lease_expired", SF_COUNT, SF_NONE, SF_FOLLOWER,                          \
	  "shmclock_hosts_lease_expired_total",                                                   \
	  "Follower: leases run out (stopped, or its leases not echoed).")                        \
	X("distribute", "leader_losses", SF_BY, SF_NONE, SF_FOLLOWER,                             \
	  "shmclock_hosts_leader_losses_total",                                                   \
	  "Follower: its leader lost, by what noticed it (silence, held, gap, lease, aside).")    \
	X("distribute", "last_loss", SF_TEXT, SF_NONE, SF_FOLLOWER, NULL,                         \
	  "the reason of the last loss (none: never)")                                            \
	X("distribute", "echoes", SF_COUNT, SF_NONE, SF_FOLLOWER, "shmclock_hosts_echoes_total",  \
	  "Follower: the leader's echoes of its leases.")                                         \
	X("distribute", "last_echo_age_ns", SF_GAUGE, SF_NS, SF_FOLLOWER, NULL,                   \
	  "since the last echo (-1: none yet)")                                                   \
	X("distribute", "awaiting_echo", SF_BOOL, SF_NONE, SF_FOLLOWER,                           \
	  "shmclock_hosts_awaiting_echo",                                                         \
	  "Follower: 1 while it waits for the leader to echo its lease (not waited for yet: "     \
	  "stale).")                                                                              \
	X("distribute", "acks_sent", SF_COUNT, SF_NONE, SF_FOLLOWER,                              \
	  "shmclock_hosts_acks_sent_total", "Follower: acknowledgements and leases sent.")        \
	X("distribute", "received", SF_COUNT, SF_NONE, SF_FOLLOWER,                               \
	  "shmclock_hosts_messages_received_total", "Follower: messages received from the leader.") \
	X("distribute", "lost", SF_COUNT, SF_NONE, SF_FOLLOWER, "shmclock_hosts_messages_lost_total", \
	  "Follower: messages lost.")                                                             \
	X("distribute", "last_message_age_ns", SF_GAUGE, SF_NS, SF_FOLLOWER,                      \
	  "shmclock_hosts_last_message_age_seconds", "Follower: since the leader's last message.") \
	X("distribute", "on_leader_loss", SF_TEXT, SF_NONE, SF_FOLLOWER, NULL,                    \
	  "OnLeaderLoss: hold or run")

/* The label of an SF_BY field's metric (the one there is: leader_losses). */
#define SF_BY_LABEL "reason"

struct status_field {
	const char *section, *key;
	enum sf_kind kind;
	enum sf_unit unit;
	unsigned modes;
	const char *metric, *help;
};

#define STATUS_FIELD_ROW(s, k, kind, unit, modes, metric, help) { s, k, kind, unit, modes, metric, help },
static const struct status_field status_fields[] = { STATUS_FIELDS(STATUS_FIELD_ROW) };
#undef STATUS_FIELD_ROW
#define STATUS_NFIELDS (sizeof(status_fields) / sizeof(status_fields[0]))

#endif
