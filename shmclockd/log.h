/* SPDX-License-Identifier: MIT */
/* Leveled logging to stderr, one line per message. */
#ifndef SHMCLOCKD_LOG_H
#define SHMCLOCKD_LOG_H

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

extern enum log_level log_threshold;

/* Parses "error", "warn", "info", "debug"; -1 if unknown. */
int log_level_parse(const char *s);

__attribute__((format(printf, 2, 3)))
void log_msg(enum log_level level, const char *fmt, ...);

#endif
