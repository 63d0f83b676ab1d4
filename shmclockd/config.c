/* SPDX-License-Identifier: MIT */
/*
 * The JSON config, read with cJSON. cJSON keeps no positions, so a key's
 * line is found again in the text; a syntax error's line comes from the
 * offset cJSON stopped at.
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <shmclock/shmclock.h>

#include "config.h"
#include "duration.h"
#include "source.h"

#define CONFIG_MAX_BYTES (1 << 20)

void config_defaults(struct shmclockd_config *c)
{
	memset(c, 0, sizeof(*c));
	strcpy(c->name, "default");
	c->source = &source_simulation;
	c->scale = 1.0;
	c->hz = 100;
	c->segment_mode = 0644;
	c->control_idle_ns = 30000000000LL;
	c->ros2_hz = 100;
	c->ros2_domain = -1;
	c->ros2_stale_ns = 1000000000;
	c->ls_stall_ns = 2000000000;
	c->ls_max_ahead_ns = 86400LL * 1000000000LL; /* SHMCLOCK_LOCKSTEP_MAX_AHEAD_DEFAULT */
	c->dist_lead_ns = 5000000;
	c->dist_hb_ns = 200000000;
}

struct ctx {
	const char *what;
	const char *text;
	size_t len;
	char *err;
	size_t errlen;
	int depth;   /* of the object whose keys are being applied: 1 top level */
	int nth;     /* which occurrence of a key an error is about (1: the first) */
};

static int line_at(const struct ctx *x, size_t off)
{
	int line = 1;

	for (size_t i = 0; i < off && i < x->len; i++)
		line += x->text[i] == '\n';
	return line;
}

/*
 * Decodes the JSON string starting at text[*i] (the opening quote) into
 * out (truncated to n bytes, NUL-terminated; \u escapes of ASCII decoded,
 * others kept as '?'), leaving *i after the closing quote.
 */
static void json_string(const struct ctx *x, size_t *i, char *out, size_t n)
{
	size_t o = 0, j = *i + 1;

	while (j < x->len && x->text[j] != '"') {
		char ch = x->text[j++];

		if (ch == '\\' && j < x->len) {
			char e = x->text[j++];

			switch (e) {
			case 'u': {
				unsigned u = 0;
				int k;

				for (k = 0; k < 4 && j < x->len; k++, j++) {
					char h = x->text[j];

					u = u * 16 + (unsigned)(h >= 'a' ? h - 'a' + 10 : h >= 'A' ? h - 'A' + 10 : h - '0');
				}
				ch = u < 0x80 ? (char)u : '?';
				break;
			}
			case 'n': ch = '\n'; break;
			case 't': ch = '\t'; break;
			case 'r': ch = '\r'; break;
			case 'b': ch = '\b'; break;
			case 'f': ch = '\f'; break;
			default: ch = e; break; /* \" \\ \/ */
			}
		}
		if (o + 1 < n)
			out[o++] = ch;
	}
	out[o] = 0;
	*i = j < x->len ? j + 1 : j;
}

/*
 * The line of the x->nth key `key` of an object at nesting depth x->depth,
 * found by scanning the JSON text itself (cJSON keeps no positions). Keys
 * are compared decoded, so "\u0054imeSource" is TimeSource. 0: not found.
 */
static int line_of_key(const struct ctx *x, const char *key)
{
	char s[128];
	int line = 1, depth = 0, seen = 0;

	for (size_t i = 0; i < x->len;) {
		char ch = x->text[i];

		if (ch == '"') {
			int at = line;
			size_t j;

			for (j = i + 1; j < x->len && x->text[j] != '"'; j++) {
				if (x->text[j] == '\\')
					j++;
				else if (x->text[j] == '\n')
					line++;
			}
			json_string(x, &i, s, sizeof(s));
			for (j = i; j < x->len && strchr(" \t\r\n", x->text[j]); j++)
				line += x->text[j] == '\n';
			i = j;
			if (j < x->len && x->text[j] == ':' && depth == x->depth && !strcmp(s, key) &&
			    ++seen == x->nth)
				return at;
			continue;
		}
		if (ch == '{' || ch == '[')
			depth++;
		else if (ch == '}' || ch == ']')
			depth--;
		else if (ch == '\n')
			line++;
		i++;
	}
	return 0;
}

/* Whether v's key appeared before it in object o; if so, an error pointing
 * at this (the later) occurrence. A key twice is a mistake whichever would
 * win. */
static int key_error(const struct ctx *x, const char *key, const char *fmt, ...);

static bool twice(const struct ctx *x, const cJSON *o, const cJSON *v)
{
	struct ctx at = *x;

	at.nth = 1;
	for (const cJSON *u = o->child; u != v; u = u->next)
		at.nth += !strcmp(u->string, v->string);
	if (at.nth == 1)
		return false;
	key_error(&at, v->string, "given twice");
	return true;
}

__attribute__((format(printf, 3, 4)))
static int key_error(const struct ctx *x, const char *key, const char *fmt, ...)
{
	char msg[CONFIG_ERR_MAX], k[64];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(x->err, x->errlen, "%s:%d: %s: %s", x->what, line_of_key(x, key),
		 text_quote(key, k, sizeof(k)), msg);
	return -EINVAL;
}

/* A short rendering of a bad value for messages. */
static const char *shown(const cJSON *v, char *buf, size_t n)
{
	char *s = cJSON_PrintUnformatted(v);

	/* cJSON escapes most control characters, but not DEL. */
	text_quote(s ? s : "?", buf, n);
	free(s);
	return buf;
}

/* A JSON true or false; @section ("Ros2", NULL at the top) prefixes the
 * message as the section's other errors are. */
static int get_bool(const struct ctx *x, const cJSON *v, const char *section, bool *out)
{
	char b[64], at[96] = "";

	if (!cJSON_IsBool(v)) {
		if (section)
			snprintf(at, sizeof(at), "%s.%s: ", section, v->string);
		return key_error(x, v->string, "%sexpected true or false, got %s", at,
				 shown(v, b, sizeof(b)));
	}
	*out = cJSON_IsTrue(v);
	return 0;
}

static int get_time(const struct ctx *x, const cJSON *v, const char *key, bool dates, int64_t *out)
{
	char why[256], b[64];

	if (cJSON_IsNumber(v)) {
		double d = v->valuedouble * 1e9;

		if (!isfinite(d) || fabs(d) > 9.2e18)
			return key_error(x, key, "%s seconds is out of range", shown(v, b, sizeof(b)));
		*out = (int64_t)llround(d);
		return 0;
	}
	if (!cJSON_IsString(v))
		return key_error(x, key, "expected %s, got %s",
				 dates ? "seconds, a duration like \"1.5s\" or an ISO-8601 UTC date"
				       : "seconds or a duration like \"1.5s\"",
				 shown(v, b, sizeof(b)));
	if ((dates ? time_parse : duration_parse)(v->valuestring, out, why, sizeof(why)))
		return key_error(x, key, "%s", why);
	return 0;
}

/* A section object (Ros2, Distribute, Lockstep): checks that @o is one and
 * makes *in the context its keys are read in (one level deeper). */
static int enter_section(const struct ctx *x, const cJSON *o, const char *name,
			 const char *example, struct ctx *in)
{
	char b[64];

	if (!cJSON_IsObject(o))
		return key_error(x, name, "expected an object like %s, got %s", example,
				 shown(o, b, sizeof(b)));
	*in = *x;
	in->depth = x->depth + 1;
	return 0;
}

#ifdef SHMCLOCK_HAVE_ROS2
/* "Ros2": { "Publish": true, "PublishHz": 100, "Domain": 0, "StaleAfter": "1s" } */
static int apply_ros2(const struct ctx *x, const cJSON *o, struct shmclockd_config *c)
{
	const cJSON *v;
	char b[64];
	struct ctx in;

	if (enter_section(x, o, "Ros2", "{\"Publish\": true}", &in))
		return -EINVAL;
	x = &in;
	cJSON_ArrayForEach(v, o) {
		const char *k = v->string;

		if (twice(x, o, v))
			return -EINVAL;

		if (!strcmp(k, "Publish")) {
			if (get_bool(x, v, "Ros2", &c->ros2_publish))
				return -EINVAL;
		} else if (!strcmp(k, "PublishHz")) {
			if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) ||
			    v->valuedouble < 1 || v->valuedouble > 10000)
				return key_error(x, k, "Ros2.PublishHz: expected a whole number from 1 to 10000, got %s",
						 shown(v, b, sizeof(b)));
			c->ros2_hz = (int)v->valuedouble;
		} else if (!strcmp(k, "Domain")) {
			if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) ||
			    v->valuedouble < 0 || v->valuedouble > 232)
				return key_error(x, k, "Ros2.Domain: expected a DDS domain id from 0 to 232, got %s",
						 shown(v, b, sizeof(b)));
			c->ros2_domain = (int)v->valuedouble;
		} else if (!strcmp(k, "StaleAfter")) {
			if (get_time(x, v, k, false, &c->ros2_stale_ns))
				return -EINVAL;
			if (c->ros2_stale_ns <= 0)
				return key_error(x, k, "Ros2.StaleAfter: must be positive");
		} else {
			return key_error(x, k, "unknown key in Ros2 (known: Publish, PublishHz, Domain, StaleAfter)");
		}
	}
	return 0;
}
#endif

#ifdef SHMCLOCK_HAVE_ROS2
/* "Distribute": { "Publish": true, "Clock": "sim", "Lead": "5ms", "Heartbeat":
 * "200ms", "StaleAfter": "600ms", "OnLeaderLoss": "hold" } */
static int apply_distribute(const struct ctx *x, const cJSON *o, struct shmclockd_config *c)
{
	const cJSON *v;
	char b[64];
	struct ctx in;

	if (enter_section(x, o, "Distribute", "{\"Publish\": true}", &in))
		return -EINVAL;
	x = &in;
	cJSON_ArrayForEach(v, o) {
		const char *k = v->string;

		if (twice(x, o, v))
			return -EINVAL;
		if (!strcmp(k, "Publish")) {
			if (get_bool(x, v, "Distribute", &c->dist_publish))
				return -EINVAL;
		} else if (!strcmp(k, "Clock")) {
			if (!cJSON_IsString(v) || shmclock_check_name(v->valuestring))
				return key_error(x, k, "Distribute.Clock: expected a clock name (1 to 64 of "
						       "[A-Za-z0-9_.-]), got %s", shown(v, b, sizeof(b)));
			snprintf(c->dist_clock, sizeof(c->dist_clock), "%s", v->valuestring);
		} else if (!strcmp(k, "Lead")) {
			if (get_time(x, v, k, false, &c->dist_lead_ns))
				return -EINVAL;
			/* The clock thread waits for each change's instant: status
			 * and the next change wait as long. */
			if (c->dist_lead_ns < 0 || c->dist_lead_ns > 1000000000)
				return key_error(x, k, "Distribute.Lead: expected a duration from 0 to 1s");
		} else if (!strcmp(k, "Heartbeat")) {
			if (get_time(x, v, k, false, &c->dist_hb_ns))
				return -EINVAL;
			if (c->dist_hb_ns < 100000000 || c->dist_hb_ns > 60000000000)
				return key_error(x, k, "Distribute.Heartbeat: expected a duration from 100ms "
						       "(10 messages/s) to 60s");
		} else if (!strcmp(k, "StaleAfter")) {
			if (get_time(x, v, k, false, &c->dist_stale_ns))
				return -EINVAL;
			if (c->dist_stale_ns <= 0)
				return key_error(x, k, "Distribute.StaleAfter: must be positive");
		} else if (!strcmp(k, "OnLeaderLoss")) {
			if (!cJSON_IsString(v) || (strcmp(v->valuestring, "hold") &&
						   strcmp(v->valuestring, "run")))
				return key_error(x, k, "Distribute.OnLeaderLoss: expected \"hold\" or "
						       "\"run\", got %s", shown(v, b, sizeof(b)));
			c->dist_run_on_loss = !strcmp(v->valuestring, "run");
		} else {
			return key_error(x, k, "unknown key in Distribute (known: Publish, Clock, Lead, "
					       "Heartbeat, StaleAfter, OnLeaderLoss)");
		}
	}
	return 0;
}
#endif

/* "Lockstep": { "Participants": 3, "MaxScale": 1, "StallAfter": "2s", "OnDeath": "evict",
 *              "EvictAfter": "500ms", "OnStall": "evict", "MaxGrantAhead": "1h" } */
static int apply_lockstep(const struct ctx *x, const cJSON *o, struct shmclockd_config *c)
{
	const struct ctx *outer = x;
	struct ctx in;
	const cJSON *v;
	char b[64];

	if (enter_section(x, o, "Lockstep", "{\"Participants\": 3}", &in))
		return -EINVAL;
	x = &in;
	c->ls_participants = 0;
	cJSON_ArrayForEach(v, o) {
		const char *k = v->string;

		if (twice(x, o, v))
			return -EINVAL;
		if (!strcmp(k, "Participants")) {
			if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) ||
			    v->valuedouble < 1 || v->valuedouble > CONFIG_LOCKSTEP_MAX)
				return key_error(x, k, "Lockstep.Participants: expected a whole number from 1 to 64, got %s",
						 shown(v, b, sizeof(b)));
			c->ls_participants = (int)v->valuedouble;
		} else if (!strcmp(k, "MaxScale")) {
			if (!cJSON_IsNumber(v) || !config_scale_ok(v->valuedouble))
				return key_error(x, k, "Lockstep.MaxScale: expected a number from 1e-6 to 1e6, got %s",
						 shown(v, b, sizeof(b)));
			c->ls_max_scale = v->valuedouble;
		} else if (!strcmp(k, "StallAfter")) {
			if (get_time(x, v, k, false, &c->ls_stall_ns))
				return -EINVAL;
			if (c->ls_stall_ns <= 0)
				return key_error(x, k, "Lockstep.StallAfter: must be positive");
		} else if (!strcmp(k, "OnDeath")) {
			if (!cJSON_IsString(v) || config_on_death(v->valuestring, &c->ls_abort))
				return key_error(x, k, "Lockstep.OnDeath: expected \"evict\" or \"abort\", got %s",
						 shown(v, b, sizeof(b)));
		} else if (!strcmp(k, "EvictAfter")) {
			if (get_time(x, v, k, false, &c->ls_evict_ns))
				return -EINVAL;
			if (c->ls_evict_ns <= 0)
				return key_error(x, k, "Lockstep.EvictAfter: must be positive");
		} else if (!strcmp(k, "OnStall")) {
			if (!cJSON_IsString(v) || config_on_stall(v->valuestring, &c->ls_on_stall))
				return key_error(x, k, "Lockstep.OnStall: expected \"wait\", \"evict\" or \"abort\", got %s",
						 shown(v, b, sizeof(b)));
			c->ls_on_stall_given = true;
		} else if (!strcmp(k, "MaxGrantAhead")) {
			if (get_time(x, v, k, false, &c->ls_max_ahead_ns))
				return -EINVAL;
			if (c->ls_max_ahead_ns <= 0)
				return key_error(x, k, "Lockstep.MaxGrantAhead: must be positive");
		} else {
			return key_error(x, k, "unknown key in Lockstep (known: Participants, MaxScale, StallAfter, "
					 "OnDeath, EvictAfter, OnStall, MaxGrantAhead)");
		}
	}
	if (!c->ls_participants)
		return key_error(outer, "Lockstep", "Lockstep.Participants is required (1 to 64)");
	return 0;
}

int config_on_stall(const char *s, enum on_stall *out)
{
	if (!strcmp(s, "wait"))
		*out = STALL_WAIT;
	else if (!strcmp(s, "evict"))
		*out = STALL_EVICT;
	else if (!strcmp(s, "abort"))
		*out = STALL_ABORT;
	else
		return -EINVAL;
	return 0;
}

const char *config_on_stall_name(enum on_stall s)
{
	return s == STALL_EVICT ? "evict" : s == STALL_ABORT ? "abort" : "wait";
}

int config_on_death(const char *s, bool *abort_run)
{
	if (!strcmp(s, "evict"))
		*abort_run = false;
	else if (!strcmp(s, "abort"))
		*abort_run = true;
	else
		return -EINVAL;
	return 0;
}

static int apply_key(const struct ctx *x, const cJSON *v, struct shmclockd_config *c)
{
	const char *k = v->string;
	char b[64];

	if (!strcmp(k, "TimeSource")) {
		const char *why;

		if (!cJSON_IsString(v))
			return key_error(x, k, "expected a string, one of %s", source_names());
		c->source = source_lookup(v->valuestring, &why);
		if (!c->source)
			return why ? key_error(x, k, "%s", why)
				   : key_error(x, k, "unknown source \"%s\"; expected one of %s",
					       text_quote(v->valuestring, b, sizeof(b)),
					       source_names());
	} else if (!strcmp(k, "TimeScale")) {
		if (!cJSON_IsNumber(v) || !config_scale_ok(v->valuedouble))
			return key_error(x, k, "expected a number from 1e-6 to 1e6, got %s",
					 shown(v, b, sizeof(b)));
		c->scale = v->valuedouble;
	} else if (!strcmp(k, "PublishHz")) {
		if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) ||
		    v->valuedouble < 1 || v->valuedouble > 10000)
			return key_error(x, k, "expected a whole number from 1 to 10000, got %s",
					 shown(v, b, sizeof(b)));
		c->hz = (int)v->valuedouble;
	} else if (!strcmp(k, "StartTime")) {
		if (get_time(x, v, k, true, &c->start_ns))
			return -EINVAL;
		c->has_start = true;
	} else if (!strcmp(k, "UnixTimeAtZero")) {
		if (get_time(x, v, k, true, &c->unix_zero_ns))
			return -EINVAL;
		c->has_unix_zero = true;
	} else if (!strcmp(k, "Paused")) {
		if (get_bool(x, v, NULL, &c->paused))
			return -EINVAL;
	} else if (!strcmp(k, "StepNs")) {
		if (cJSON_IsNumber(v)) {
			if (v->valuedouble != floor(v->valuedouble) || v->valuedouble < 1 ||
			    v->valuedouble > 3.6e12)
				return key_error(x, k, "expected a whole number of ns from 1 to 3.6e12, got %s",
						 shown(v, b, sizeof(b)));
			c->step_ns = (int64_t)v->valuedouble;
		} else {
			char why[256];

			if (!cJSON_IsString(v) || duration_parse(v->valuestring, &c->step_ns, why, sizeof(why)))
				return key_error(x, k, "expected ns or a duration like \"10ms\", got %s",
						 shown(v, b, sizeof(b)));
			if (c->step_ns < 1)
				return key_error(x, k, "must be positive");
		}
	} else if (!strcmp(k, "Name")) {
		if (!cJSON_IsString(v) || shmclock_check_name(v->valuestring))
			return key_error(x, k, "expected a clock name of 1 to 64 of [A-Za-z0-9_.-], got %s",
					 shown(v, b, sizeof(b)));
		strcpy(c->name, v->valuestring);
	} else if (!strcmp(k, "ControlSocket")) {
		if (!cJSON_IsString(v) || !v->valuestring[0] ||
		    strlen(v->valuestring) >= sizeof(c->socket_path))
			return key_error(x, k, "expected a path of 1 to %zu bytes, got %s",
					 sizeof(c->socket_path) - 1, shown(v, b, sizeof(b)));
		strcpy(c->socket_path, v->valuestring);
	} else if (!strcmp(k, "SegmentMode")) {
		char *end = NULL;
		long m = -1;

		if (cJSON_IsString(v))
			m = strtol(v->valuestring, &end, 8);
		if (!end || *end || end == v->valuestring || m < 0 || m > 0777 ||
		    shmclock_writer_check_mode((unsigned)m))
			return key_error(x, k, "expected an octal mode string like \"0644\" or \"0640\": the "
					 "owner reads and writes, nobody else writes, got %s",
					 shown(v, b, sizeof(b)));
		c->segment_mode = (unsigned)m;
	} else if (!strcmp(k, "ControlGroup")) {
		struct group *g = NULL;

		if (cJSON_IsString(v))
			g = getgrnam(v->valuestring);
		else if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 4294967295.0 &&
			 v->valuedouble == floor(v->valuedouble))
			g = getgrgid((gid_t)v->valuedouble); /* (gid_t)-1 means "no group" */
		if (!g)
			return key_error(x, k, "expected an existing group name or gid, got %s",
					 shown(v, b, sizeof(b)));
		c->group = g->gr_gid;
		c->has_group = true;
	} else if (!strcmp(k, "ControlIdleTimeout")) {
		if (get_time(x, v, k, false, &c->control_idle_ns))
			return -EINVAL;
		if (c->control_idle_ns < 100000000 || c->control_idle_ns > 86400000000000LL)
			return key_error(x, k, "expected a duration from 100ms to 24h, got %s",
					 shown(v, b, sizeof(b)));
	} else if (!strcmp(k, "SchedPriority")) {
		if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) ||
		    v->valuedouble < 0 || v->valuedouble > 99)
			return key_error(x, k, "expected a whole number from 0 (normal) to 99 (SCHED_FIFO), got %s",
					 shown(v, b, sizeof(b)));
		c->sched_priority = (int)v->valuedouble;
	} else if (!strcmp(k, "Lockstep")) {
		return apply_lockstep(x, v, c);
	} else if (!strcmp(k, "Distribute")) {
#ifdef SHMCLOCK_HAVE_ROS2
		return apply_distribute(x, v, c);
#else
		return key_error(x, k, "this shmclockd was built without DDS (Cyclone DDS) support");
#endif
	} else if (!strcmp(k, "Ros2")) {
#ifdef SHMCLOCK_HAVE_ROS2
		return apply_ros2(x, v, c);
#else
		return key_error(x, k, "this shmclockd was built without ROS 2 support");
#endif
	} else {
		return key_error(x, k,
				 "unknown key (known: TimeSource, TimeScale, PublishHz, StartTime, "
				 "UnixTimeAtZero, Paused, StepNs, Name, ControlSocket, SegmentMode, "
				 "ControlGroup, ControlIdleTimeout, SchedPriority, Lockstep, Distribute, "
				 "Ros2)");
	}
	return 0;
}

int config_load_text(const char *what, const char *text, size_t len, struct shmclockd_config *c,
		     char *err, size_t errlen)
{
	struct ctx x = { what, text, len, err, errlen, 1, 1 };
	const char *end = NULL;
	cJSON *root, *v;
	int r = 0;

	root = cJSON_ParseWithLengthOpts(text, len, &end, false);
	if (root && end) {
		/* One object and nothing after it but white space (and the NUL
		 * cJSON may have stopped at). */
		size_t off = (size_t)(end - text);

		while (off < len && (text[off] == ' ' || text[off] == '\t' || text[off] == '\n' ||
				     text[off] == '\r' || text[off] == 0))
			off++;
		if (off < len) {
			snprintf(err, errlen, "%s:%d: unexpected text after the config object", what,
				 line_at(&x, off));
			cJSON_Delete(root);
			return -EINVAL;
		}
	}
	if (!root) {
		size_t off = end && end >= text ? (size_t)(end - text) : 0;

		snprintf(err, errlen, "%s:%d: not valid JSON near offset %zu", what, line_at(&x, off), off);
		return -EINVAL;
	}
	if (!cJSON_IsObject(root)) {
		snprintf(err, errlen, "%s:1: the config must be a JSON object ({ \"TimeSource\": ... })", what);
		cJSON_Delete(root);
		return -EINVAL;
	}
	cJSON_ArrayForEach(v, root) {
		r = twice(&x, root, v) ? -EINVAL : apply_key(&x, v, c);
		if (r)
			break;
	}
	cJSON_Delete(root);
	return r;
}

int config_load_file(const char *path, struct shmclockd_config *c, char *err, size_t errlen)
{
	struct stat st;
	char *buf;
	ssize_t n;
	int fd, r;

	/* O_NONBLOCK: a FIFO (or a device) must not hang the daemon in open()
	 * or read(); it is refused below as not a regular file. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0 || fstat(fd, &st) < 0) {
		r = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return r;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > CONFIG_MAX_BYTES) {
		snprintf(err, errlen, "%s: not a regular file of at most 1 MiB", path);
		close(fd);
		return -EINVAL;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		snprintf(err, errlen, "%s: out of memory", path);
		return -ENOMEM;
	}
	n = read(fd, buf, (size_t)st.st_size);
	close(fd);
	if (n < 0) {
		r = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		free(buf);
		return r;
	}
	buf[n] = 0;
	r = config_load_text(path, buf, (size_t)n, c, err, errlen);
	free(buf);
	return r;
}

int config_validate(const struct shmclockd_config *c, char *err, size_t errlen)
{
	if (c->ros2_publish && c->source->feed == FEED_ROS2) {
		snprintf(err, errlen, "Ros2.Publish: this shmclockd follows /clock (TimeSource ros2) and "
			 "would publish it back: refused (no echo loop)");
		return -EINVAL;
	}
	if (c->ls_participants && c->source != &source_fixed && c->source != &source_external) {
		snprintf(err, errlen, "Lockstep needs the fixed or the external source (TimeSource is %s)",
			 c->source->name);
		return -EINVAL;
	}
	if (c->dist_publish && c->source->feed == FEED_LEADER) {
		snprintf(err, errlen, "Distribute.Publish: this shmclockd follows a leader (TimeSource "
			 "leader); one leader per clock, no relays");
		return -EINVAL;
	}
	if (c->dist_publish && (c->source->stepped || c->ls_participants)) {
		snprintf(err, errlen, "Distribute.Publish needs a continuous source (simulation or "
			 "system), not %s%s: every step would be a message; use Ros2.Publish",
			 c->source->name, c->ls_participants ? " in lockstep" : "");
		return -EINVAL;
	}
	if (c->ls_participants && c->ls_on_stall_given && c->ls_on_stall != STALL_WAIT &&
	    !c->ls_evict_ns) {
		snprintf(err, errlen, "Lockstep.OnStall %s needs Lockstep.EvictAfter (how long a "
			 "participant may hold the clock)", config_on_stall_name(c->ls_on_stall));
		return -EINVAL;
	}
	if (c->ls_participants && c->ls_on_stall_given && c->ls_on_stall == STALL_WAIT &&
	    c->ls_evict_ns) {
		snprintf(err, errlen, "Lockstep.EvictAfter with OnStall wait would do nothing: "
			 "OnStall evict or abort, or no EvictAfter");
		return -EINVAL;
	}
	if (c->source->feed == FEED_LEADER && c->ls_participants) {
		snprintf(err, errlen, "Lockstep is for the fixed or the external source, not a follower");
		return -EINVAL;
	}
	if (c->source->stepped && !c->source->scalable && c->scale != 1.0) {
		snprintf(err, errlen, "TimeScale does not apply to the %s source (it is stepped from outside)",
			 c->source->name);
		return -EINVAL;
	}
	return 0;
}

bool config_holds_on_leader_loss(const struct shmclockd_config *c)
{
	return c->source->feed == FEED_LEADER && !c->dist_run_on_loss;
}
