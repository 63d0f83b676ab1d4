/* SPDX-License-Identifier: MIT */
/* Durations and times as people write them in configs and on command lines. */
#ifndef SHMCLOCKD_DURATION_H
#define SHMCLOCKD_DURATION_H

#include <stddef.h>
#include <stdint.h>

/*
 * Parses "1.5s", "250ms", "100us", "42ns", "2m", "1h", or a plain number of
 * seconds ("0.25", "-3"), into ns. Decimal fractions are exact to the ns
 * (no floating point). Whitespace around is allowed, nothing else.
 * Returns 0, or -EINVAL / -ERANGE with a reason in err.
 */
int duration_parse(const char *s, int64_t *ns, char *err, size_t errlen);

/*
 * As duration_parse(), and also an ISO-8601 UTC date:
 * "2026-11-22T14:00:00Z", with optional ".fraction" and "Z" or "+00:00",
 * giving UNIX ns. For StartTime, UnixTimeAtZero, `set` and `advance`.
 */
int time_parse(const char *s, int64_t *ns, char *err, size_t errlen);

/*
 * Parses a decimal number as JSON writes one ("2", "0.5", "-1.5e3", and
 * ".5"), whitespace around allowed, into *out. Hexadecimal ("0x10"),
 * "inf", "nan" and anything else strtod() would take are refused, so a
 * number means what the documentation says it does. Returns 0 or -EINVAL.
 */
int number_parse(const char *s, double *out);

/*
 * Text from outside (a config value, a request, an argument) as it may
 * appear in a one-line error: control characters as \xNN, cut to at most
 * 40 bytes with "..." after. Returns buf.
 */
char *text_quote(const char *s, char *buf, size_t len);

/* "12.345678901s" style, always with 9 decimals. Returns buf. */
char *duration_format(int64_t ns, char *buf, size_t len);

/* "2026-11-22T14:00:00.123456789Z" for UNIX ns. Returns buf. */
char *time_format_iso(int64_t unix_ns, char *buf, size_t len);

#endif
