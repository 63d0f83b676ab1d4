/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "duration.h"

__attribute__((format(printf, 4, 5)))
static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

char *text_quote(const char *s, char *buf, size_t len)
{
	size_t o = 0, shown = 0;

	if (!len)
		return buf;
	for (; *s && o + 8 < len; s++) {
		unsigned char ch = (unsigned char)*s;

		if (shown == 40) {
			memcpy(buf + o, "...", 3);
			o += 3;
			break;
		}
		if (ch < 0x20 || ch == 0x7f)
			o += (size_t)snprintf(buf + o, len - o, "\\x%02x", ch);
		else
			buf[o++] = (char)ch;
		shown++;
	}
	buf[o] = '\0';
	return buf;
}

static const char *skip_space(const char *p)
{
	while (isspace((unsigned char)*p))
		p++;
	return p;
}

int duration_parse(const char *s, int64_t *ns, char *err, size_t errlen)
{
	static const struct {
		const char *suffix;
		int64_t mult;
	} units[] = {
		{ "ns", 1 }, { "us", 1000 }, { "ms", 1000000 }, { "s", 1000000000 },
		{ "m", 60000000000 }, { "h", 3600000000000 }, { "", 1000000000 },
	};
	const char *p;
	uint64_t whole = 0, frac = 0, frac_div = 1;
	int neg = 0, digits = 0;
	size_t u;

	char q[64];

	if (!s)
		return fail(err, errlen, -EINVAL, "missing value%s", "");
	text_quote(s, q, sizeof(q));
	p = skip_space(s);
	if (*p == '-' || *p == '+')
		neg = *p++ == '-';
	for (; isdigit((unsigned char)*p); p++, digits++) {
		if (whole > (UINT64_MAX - 9) / 10)
			return fail(err, errlen, -ERANGE, "'%s' is too large", q);
		whole = whole * 10 + (uint64_t)(*p - '0');
	}
	if (*p == '.') {
		for (p++; isdigit((unsigned char)*p); p++, digits++) {
			if (frac_div < 1000000000000000000ULL) {
				frac = frac * 10 + (uint64_t)(*p - '0');
				frac_div *= 10;
			}
		}
	}
	if (!digits)
		return fail(err, errlen, -EINVAL,
			    "'%s' is not a duration (expected e.g. 1.5s, 250ms, 100us, 42ns or seconds)", q);
	for (u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
		size_t n = strlen(units[u].suffix);

		if (strncmp(p, units[u].suffix, n) == 0 && *skip_space(p + n) == '\0')
			break;
	}
	if (u == sizeof(units) / sizeof(units[0]))
		return fail(err, errlen, -EINVAL,
			    "'%s' has an unknown unit (use ns, us, ms, s, m or h)", q);
	{
		__extension__ typedef unsigned __int128 u128;
		u128 total = (u128)whole * (uint64_t)units[u].mult +
			     (u128)frac * (uint64_t)units[u].mult / frac_div;

		if (total > (u128)INT64_MAX)
			return fail(err, errlen, -ERANGE, "'%s' is out of range (at most ~292 years)", q);
		*ns = neg ? -(int64_t)total : (int64_t)total;
	}
	return 0;
}

static int parse_digits(const char **p, int n, int *out)
{
	int v = 0;

	for (int i = 0; i < n; i++, (*p)++) {
		if (!isdigit((unsigned char)**p))
			return -1;
		v = v * 10 + (**p - '0');
	}
	*out = v;
	return 0;
}

static int iso_parse(const char *s, int64_t *ns)
{
	const char *p = skip_space(s);
	int Y, M, D, h = 0, m = 0, sec = 0;
	int64_t frac = 0, scale = 100000000;
	struct tm tm = { 0 };
	time_t t;

	if (parse_digits(&p, 4, &Y) || *p++ != '-' || parse_digits(&p, 2, &M) || *p++ != '-' ||
	    parse_digits(&p, 2, &D))
		return -EINVAL;
	if (*p == 'T' || *p == ' ') {
		p++;
		if (parse_digits(&p, 2, &h) || *p++ != ':' || parse_digits(&p, 2, &m))
			return -EINVAL;
		if (*p == ':') {
			p++;
			if (parse_digits(&p, 2, &sec))
				return -EINVAL;
			if (*p == '.') {
				for (p++; isdigit((unsigned char)*p); p++) {
					frac += (*p - '0') * scale;
					scale /= 10;
				}
			}
		}
		if (*p == 'Z')
			p++;
		else if (!strncmp(p, "+00:00", 6))
			p += 6;
		else
			return -EINVAL; /* local times are ambiguous: UTC only */
	}
	if (*skip_space(p))
		return -EINVAL;
	if (M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || sec > 60)
		return -EINVAL;
	tm.tm_year = Y - 1900;
	tm.tm_mon = M - 1;
	tm.tm_mday = D;
	tm.tm_hour = h;
	tm.tm_min = m;
	tm.tm_sec = sec;
	t = timegm(&tm);
	if (tm.tm_mday != D) /* timegm normalised 31 Feb into March */
		return -EINVAL;
	/* int64 ns reach from 1677 to 2262; four-digit years go further.
	 * Before 1970 the fraction counts towards zero: borrow a second, or
	 * the whole seconds of an instant just after INT64_MIN overflow
	 * although the instant itself fits. */
	if (t < 0 && frac > 0) {
		t++;
		frac -= 1000000000;
	}
	if (__builtin_mul_overflow((int64_t)t, (int64_t)1000000000, ns) ||
	    __builtin_add_overflow(*ns, frac, ns))
		return -ERANGE;
	return 0;
}

int time_parse(const char *s, int64_t *ns, char *err, size_t errlen)
{
	const char *p = s ? skip_space(s) : NULL;
	char q[64];

	/* A date starts with four digits and a dash. */
	if (p && strlen(p) >= 5 && isdigit((unsigned char)p[0]) && isdigit((unsigned char)p[3]) &&
	    p[4] == '-') {
		int r = iso_parse(p, ns);

		if (r == 0)
			return 0;
		text_quote(s, q, sizeof(q));
		if (r == -ERANGE)
			return fail(err, errlen, r,
				    "'%s' is out of range (UNIX ns from 1677 to 2262)", q);
		return fail(err, errlen, -EINVAL,
			    "'%s' is not an ISO-8601 UTC date (expected e.g. 2026-11-22T14:00:00Z)", q);
	}
	return duration_parse(s, ns, err, errlen);
}

char *duration_format(int64_t ns, char *buf, size_t len)
{
	uint64_t a = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;

	snprintf(buf, len, "%s%" PRIu64 ".%09" PRIu64 "s", ns < 0 ? "-" : "", a / 1000000000,
		 a % 1000000000);
	return buf;
}

char *time_format_iso(int64_t unix_ns, char *buf, size_t len)
{
	int64_t sec = unix_ns / 1000000000, nsec = unix_ns % 1000000000;
	struct tm tm;
	time_t t;

	if (nsec < 0) {
		nsec += 1000000000;
		sec--;
	}
	t = (time_t)sec;
	gmtime_r(&t, &tm);
	snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%09dZ", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)nsec);
	return buf;
}

int number_parse(const char *s, double *out)
{
	const char *p = s;
	char *end;
	bool digits = false;

	while (isspace((unsigned char)*p))
		p++;
	const char *start = p;

	/* [+-] digits [. digits] [(e|E) [+-] digits]: at least one digit
	 * before the exponent. */
	if (*p == '+' || *p == '-')
		p++;
	while (isdigit((unsigned char)*p))
		p++, digits = true;
	if (*p == '.')
		for (p++; isdigit((unsigned char)*p); p++)
			digits = true;
	if (!digits)
		return -EINVAL;
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (!isdigit((unsigned char)*p))
			return -EINVAL;
		while (isdigit((unsigned char)*p))
			p++;
	}
	const char *stop = p;

	while (isspace((unsigned char)*p))
		p++;
	if (*p)
		return -EINVAL;
	*out = strtod(start, &end);
	return end == stop ? 0 : -EINVAL;
}
