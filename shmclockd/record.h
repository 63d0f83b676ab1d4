/* SPDX-License-Identifier: MIT */
/*
 * The recorder (config "Record", --record FILE; doc/record.md): every
 * committed change of the time function with its cause, and lockstep's
 * events, into an MCAP file (libshmclock/common/timeline.h has the format).
 *
 * The clock thread hands each change over through a single-producer ring
 * and never waits for the disk: a thread of the recorder's own encodes and
 * writes. It writes a chunk (with its message indexes) about every 10 ms
 * while changes come, each with one write(), so a crash loses at most the
 * changes of the last 10 ms and the file is whole up to its last complete
 * chunk; at close it writes the summary (chunk indexes, statistics) that
 * viewers seek with. A full disk is an error in status and in the log: the
 * partial chunk is cut off again, the changes in it are counted as
 * dropped, and the clock goes on.
 */
#ifndef SHMCLOCKD_RECORD_H
#define SHMCLOCKD_RECORD_H

#include <stddef.h>

#include <shmclock/writer.h>

#include "timeline.h"

struct cJSON;
struct recorder;

/* Creates @path (never an existing file: a recording is not overwritten)
 * and starts the recorder's thread: 0, or -errno with a one-line @err. */
int recorder_open(const char *path, const char *clock, struct recorder **out, char *err,
		  size_t errlen);

/* As recorder_open(), on a file a control client made and passed (fd
 * taken over, closed on failure): it must be a regular, empty file open
 * for writing. */
int recorder_open_fd(int fd, const char *clock, struct recorder **out, char *err, size_t errlen);

/* Its file's path, as opened or as /proc names the descriptor passed. */
const char *recorder_path(const struct recorder *r);

/* Whether recorder_open() could create @path (it does not exist, its
 * directory does): 0, or -errno with a one-line @err. Nothing is made. */
int recorder_check(const char *path, char *err, size_t errlen);

/* As recorder_close(), for a start that failed: the file is removed if
 * this daemon made it. */
void recorder_discard(struct recorder *r);

/* A change the clock committed: @fn as shmclock_writer_function() gave it,
 * @why its cause. One thread only (the clock thread); never blocks. */
void recorder_change(struct recorder *r, const shmclock_function_t *fn, const struct tl_cause *why);

/* A lockstep event; the clock thread's too. */
void recorder_lockstep(struct recorder *r, const struct tl_lockstep *e);

/* An event between hosts (hosts/, on the clock thread too). */
void recorder_hosts(struct recorder *r, const struct tl_hosts *h);

/* Status "record": the file, what was written and dropped, the error. */
void recorder_status(struct recorder *r, struct cJSON *st);

/* Writes what is queued, the summary and the footer, and closes. NULL is
 * accepted. */
void recorder_close(struct recorder *r);

#endif
