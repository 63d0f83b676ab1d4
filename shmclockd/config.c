/* SPDX-License-Identifier: MIT */
/*
 * The JSON config, read with cJSON. cJSON keeps no positions, so a key's
 * line is found again in the text; a syntax error's line comes from the
 * offset cJSON stopped at.
 *
 * One file past 800 lines, on purpose: the key table and each key's own
 * parser read best beside each other (a key is a row and, at most, a
 * function under it).
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
	c->source = source_by_id(SHMCLOCK_SOURCE_SIMULATION);
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

struct config_ctx {
	const char *what;
	const char *text;
	size_t len;
	char *err;
	size_t errlen;
	int depth;   /* of the object whose keys are being applied: 1 top level */
	int nth;     /* which occurrence of a key an error is about (1: the first) */
};

static int line_at(const struct config_ctx *x, size_t off)
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
static void json_string(const struct config_ctx *x, size_t *i, char *out, size_t n)
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
static int line_of_key(const struct config_ctx *x, const char *key)
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
static int key_error(const struct config_ctx *x, const char *key, const char *fmt, ...);

static bool twice(const struct config_ctx *x, const cJSON *o, const cJSON *v)
{
	struct config_ctx at = *x;

	at.nth = 1;
	for (const cJSON *u = o->child; u != v; u = u->next)
		at.nth += !strcmp(u->string, v->string);
	if (at.nth == 1)
		return false;
	key_error(&at, v->string, "given twice");
	return true;
}

__attribute__((format(printf, 3, 4)))
static int key_error(const struct config_ctx *x, const char *key, const char *fmt, ...)
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
static int get_bool(const struct config_ctx *x, const cJSON *v, const char *section, bool *out)
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

static int get_time(const struct config_ctx *x, const cJSON *v, const char *key, bool dates, int64_t *out)
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
static int enter_section(const struct config_ctx *x, const cJSON *o, const char *name,
			 const char *example, struct config_ctx *in)
{
	char b[64];

	if (!cJSON_IsObject(o))
		return key_error(x, name, "expected an object like %s, got %s", example,
				 shown(o, b, sizeof(b)));
	*in = *x;
	in->depth = x->depth + 1;
	return 0;
}

/* ---------------------------------------------------- keys with their own rules */

static int own_source(const struct config_ctx *x, const cJSON *v, struct shmclockd_config *c)
{
	const char *k = v->string, *why;
	char b[64];

	if (!cJSON_IsString(v))
		return key_error(x, k, "expected a string, one of %s", source_names());
	c->source = source_lookup(v->valuestring, &why);
	if (!c->source)
		return why ? key_error(x, k, "%s", why)
			   : key_error(x, k, "unknown source \"%s\"; expected one of %s",
				       text_quote(v->valuestring, b, sizeof(b)), source_names());
	return 0;
}

static int own_step(const struct config_ctx *x, const cJSON *v, struct shmclockd_config *c)
{
	const char *k = v->string;
	char b[64];

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
	return 0;
}

static int own_name(const struct config_ctx *x, const cJSON *v, struct shmclockd_config *c)
{
	char b[64];

	if (!cJSON_IsString(v) || shmclock_check_name(v->valuestring))
		return key_error(x, v->string, "expected a clock name of 1 to %d of [A-Za-z0-9_.-], got %s",
				 SHMCLOCK_NAME_MAX, shown(v, b, sizeof(b)));
	strcpy(c->name, v->valuestring);
	return 0;
}

static int own_socket(const struct config_ctx *x, const cJSON *v, struct shmclockd_config *c)
{
	char b[64];

	if (!cJSON_IsString(v) || !v->valuestring[0] ||
	    strlen(v->valuestring) >= sizeof(c->socket_path))
		return key_error(x, v->string, "expected a path of 1 to %zu bytes, got %s",
				 sizeof(c->socket_path) - 1, shown(v, b, sizeof(b)));
	strcpy(c->socket_path, v->valuestring);
	return 0;
}

static int own_security(const struct config_ctx *x, const cJSON *v, struct shmclockd_config *c)
{
	char b[64];

	if (!cJSON_IsString(v) || !v->valuestring[0] ||
	    strlen(v->valuestring) >= sizeof(c->ros2_security))
		return key_error(x, v->string, "expected an enclave directory's path of 1 to %zu "
				 "bytes (shmclock-pki(1)), got %s", sizeof(c->ros2_security) - 1,
				 shown(v, b, sizeof(b)));
	strcpy(c->ros2_security, v->valuestring);
	return 0;
}

/* Record and Replay: a file's path. */
static int own_file(const struct config_ctx *x, const cJSON *v, char *out, size_t outlen)
{
	char b[64];

	if (!cJSON_IsString(v) || !v->valuestring[0] || strlen(v->valuestring) >= outlen)
		return key_error(x, v->string, "expected an MCAP file's path of 1 to %zu bytes, got %s",
				 outlen - 1, shown(v, b, sizeof(b)));
	strcpy(out, v->valuestring);
	return 0;
}

static int own_record(const struct config_ctx *x, const cJSON *v, struct shmclockd_config *c)
{
	return own_file(x, v, c->record, sizeof(c->record));
}

static int own_replay(const struct config_ctx *x, const cJSON *v, struct shmclockd_config *c)
{
	return own_file(x, v, c->replay, sizeof(c->replay));
}

static int own_mode(const struct config_ctx *x, const cJSON *v, struct shmclockd_config *c)
{
	char *end = NULL, b[64];
	long m = -1;

	if (cJSON_IsString(v))
		m = strtol(v->valuestring, &end, 8);
	if (!end || *end || end == v->valuestring || m < 0 || m > 0777 ||
	    shmclock_writer_check_mode((unsigned)m))
		return key_error(x, v->string, "expected an octal mode string like \"0644\" or \"0640\": "
				 "the owner reads and writes, nobody else writes, got %s",
				 shown(v, b, sizeof(b)));
	c->segment_mode = (unsigned)m;
	return 0;
}

static int own_group(const struct config_ctx *x, const cJSON *v, struct shmclockd_config *c)
{
	struct group *g = NULL;
	char b[64];

	if (cJSON_IsString(v))
		g = getgrnam(v->valuestring);
	else if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 4294967295.0 &&
		 v->valuedouble == floor(v->valuedouble))
		g = getgrgid((gid_t)v->valuedouble); /* (gid_t)-1 means "no group" */
	if (!g)
		return key_error(x, v->string, "expected an existing group name or gid, got %s",
				 shown(v, b, sizeof(b)));
	c->group = g->gr_gid;
	c->has_group = true;
	return 0;
}

static int own_dist_clock(const struct config_ctx *x, const cJSON *v, struct shmclockd_config *c)
{
	char b[64];

	if (!cJSON_IsString(v) || shmclock_check_name(v->valuestring))
		return key_error(x, v->string, "Distribute.Clock: expected a clock name (1 to %d of "
				 "[A-Za-z0-9_.-]), got %s", SHMCLOCK_NAME_MAX, shown(v, b, sizeof(b)));
	snprintf(c->dist_clock, sizeof(c->dist_clock), "%s", v->valuestring);
	return 0;
}

static int own_leader_loss(const struct config_ctx *x, const cJSON *v, struct shmclockd_config *c)
{
	char b[64];

	if (!cJSON_IsString(v) || (strcmp(v->valuestring, "hold") && strcmp(v->valuestring, "run")))
		return key_error(x, v->string, "Distribute.OnLeaderLoss: expected \"hold\" or \"run\", "
				 "got %s", shown(v, b, sizeof(b)));
	c->dist_run_on_loss = !strcmp(v->valuestring, "run");
	return 0;
}

static int own_on_slow(const struct config_ctx *x, const cJSON *v, struct shmclockd_config *c)
{
	char b[64];

	if (cJSON_IsString(v) && !strcmp(v->valuestring, "wait")) {
		c->dist_on_slow = 0;
		return 0;
	}
	/* The range first: the cast of a number beyond int is undefined. */
	if (!cJSON_IsNumber(v) || !(v->valuedouble >= 1 && v->valuedouble <= DIST_ON_SLOW_MAX) ||
	    v->valuedouble != (double)(int)v->valuedouble)
		return key_error(x, v->string, "Distribute.OnSlow: expected \"wait\" or a whole "
				 "number of changes from 1 to %d (of the last 32), got %s",
				 DIST_ON_SLOW_MAX, shown(v, b, sizeof(b)));
	c->dist_on_slow = (unsigned)v->valuedouble;
	return 0;
}

static int own_on_death(const struct config_ctx *x, const cJSON *v, struct shmclockd_config *c)
{
	char b[64];

	if (!cJSON_IsString(v) || config_on_death(v->valuestring, &c->ls_abort))
		return key_error(x, v->string, "Lockstep.OnDeath: expected \"evict\" or \"abort\", got %s",
				 shown(v, b, sizeof(b)));
	return 0;
}

static int own_on_stall(const struct config_ctx *x, const cJSON *v, struct shmclockd_config *c)
{
	char b[64];

	if (!cJSON_IsString(v) || config_on_stall(v->valuestring, &c->ls_on_stall))
		return key_error(x, v->string, "Lockstep.OnStall: expected \"wait\", \"evict\" or "
				 "\"abort\", got %s", shown(v, b, sizeof(b)));
	c->ls_on_stall_given = true;
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

/* ---------------------------------------------------- the table of keys */

/* Where a key's value is stored. */
#define FIELD(f) .off = offsetof(struct shmclockd_config, f), \
		 .size = sizeof(((struct shmclockd_config *)0)->f)
#define STR(f) FIELD(f), .str = true
#ifdef SHMCLOCK_HAVE_ROS2
#define WITHOUT_DDS(msg) NULL
#else
#define WITHOUT_DDS(msg) msg
#endif

/*
 * Every key of the config, once: its section (NULL: the top level), how it
 * is read, its range, where it is stored, what a reload does with it, the
 * option that sets it and its help line. The parser, the keys' lists in
 * messages and in --help, the command line's ranges, SIGHUP's rules and
 * --help-config come from here; tests/doc/config_keys.py checks that
 * shmclock.json(5) and the fuzz dictionary list exactly these keys, with
 * the restart keys marked. The order is the order the messages list them
 * in.
 */
#define SCALE_EXPECT \
	"a number from " SHMCLOCK__XSTR(CONFIG_SCALE_MIN) " to " SHMCLOCK__XSTR(CONFIG_SCALE_MAX)

const struct config_key config_keys[] = {
	{ NULL, "TimeSource", KEY_OWN, FIELD(source), .own = own_source, .reload = RELOAD_RESTART,
	  .option = "--source", .help = "where time comes from (shmclockd(8), TIME SOURCES)" },
	{ NULL, "TimeScale", KEY_SCALE, FIELD(scale), .expect = SCALE_EXPECT,
	  .option = "--scale", .help = "simulated seconds per real second" },
	{ NULL, "PublishHz", KEY_INT, FIELD(hz), .min = 1, .max = 10000,
	  .expect = "a whole number from 1 to 10000", .option = "--hz",
	  .help = "clock-thread tick rate (the fixed source's frame rate)" },
	{ NULL, "StartTime", KEY_DATE, FIELD(start_ns), .flag = offsetof(struct shmclockd_config, has_start),
	  .reload = RELOAD_FRESH, .option = "--start", .help = "simulation time of a fresh clock" },
	{ NULL, "UnixTimeAtZero", KEY_DATE, FIELD(unix_zero_ns),
	  .flag = offsetof(struct shmclockd_config, has_unix_zero), .option = "--unix-zero",
	  .help = "UNIX time of simulation zero (OSI stamping)" },
	{ NULL, "Paused", KEY_BOOL, FIELD(paused), .reload = RELOAD_FRESH, .option = "--paused",
	  .help = "a fresh clock starts paused" },
	{ NULL, "StepNs", KEY_OWN, FIELD(step_ns), .own = own_step, .option = "--step",
	  .help = "fixed source: simulated time per tick" },
	{ NULL, "Name", KEY_OWN, STR(name), .own = own_name, .reload = RELOAD_RESTART,
	  .option = "--name", .help = "the clock's name: /dev/shm/shmclock.NAME" },
	{ NULL, "ControlSocket", KEY_OWN, STR(socket_path), .own = own_socket,
	  .reload = RELOAD_RESTART, .option = "--socket", .help = "the control socket's path" },
	{ NULL, "Record", KEY_OWN, STR(record), .own = own_record, .reload = RELOAD_RESTART,
	  .option = "--record",
	  .help = "record each change of the time function to this new MCAP file" },
	{ NULL, "Replay", KEY_OWN, STR(replay), .own = own_replay, .reload = RELOAD_RESTART,
	  .option = "--replay", .help = "the replay source's recording (an MCAP file)" },
	{ NULL, "SegmentMode", KEY_OWN, FIELD(segment_mode), .own = own_mode,
	  .reload = RELOAD_RESTART, .help = "mode of the clock's segment, \"0644\" or narrower" },
	{ NULL, "ControlGroup", KEY_OWN, FIELD(group), .own = own_group,
	  .help = "a group that may control the clock too" },
	{ NULL, "ControlIdleTimeout", KEY_TIME, FIELD(control_idle_ns), .min = 1e8,
	  .max = 8.64e13, .expect = "a duration from 100ms to 24h",
	  .help = "drop a control client that sends nothing for this long" },
	{ NULL, "SchedPriority", KEY_INT, FIELD(sched_priority), .min = 0, .max = 99,
	  .expect = "a whole number from 0 (normal) to 99 (SCHED_FIFO)", .option = "--sched-priority",
	  .help = "run the clock thread SCHED_FIFO at this priority (0: normal)" },
	/* Adding or removing the Lockstep object takes a restart (main.c);
	 * each key of Ros2 and Distribute does (a section row's rule is what
	 * --help-config shows for it; it stores nothing to compare). */
	{ NULL, "Lockstep", KEY_SECTION, .expect = "{\"Participants\": 3}", .reload = RELOAD_RESTART,
	  .help = "run in lockstep with participants (an object)" },
	{ NULL, "Distribute", KEY_SECTION, .expect = "{\"Publish\": true}",
	  .missing = WITHOUT_DDS("this shmclockd was built without DDS (Cyclone DDS) support"),
	  .reload = RELOAD_RESTART, .help = "lead or follow the clock between hosts (an object)" },
	{ NULL, "Ros2", KEY_SECTION, .expect = "{\"Publish\": true}",
	  .missing = WITHOUT_DDS("this shmclockd was built without ROS 2 support"),
	  .reload = RELOAD_RESTART, .help = "ROS 2 /clock (an object)" },

	/* "Lockstep": { "Participants": 3, "MaxScale": 1, "StallAfter": "2s", "OnDeath": "evict",
	 *              "EvictAfter": "500ms", "OnStall": "evict", "MaxGrantAhead": "1h" }
	 * Every key applies on a live clock, Participants until it started
	 * (mode_lockstep.c). */
	{ "Lockstep", "Participants", KEY_INT, FIELD(ls_participants), .min = 1,
	  .max = CONFIG_LOCKSTEP_HOSTS_MAX, .required = true,
	  .expect = "a whole number from 1 to " SHMCLOCK__XSTR(CONFIG_LOCKSTEP_MAX) " (" SHMCLOCK__XSTR(
		  CONFIG_LOCKSTEP_HOSTS_MAX) " on a leader between hosts)",
	  .reload = RELOAD_UNTIL_START, .option = "--lockstep",
	  .help = "the clock starts once this many participants joined" },
	{ "Lockstep", "MaxScale", KEY_SCALE, FIELD(ls_max_scale), .expect = SCALE_EXPECT,
	  .option = "--max-scale", .help = "never faster than this times real time" },
	{ "Lockstep", "StallAfter", KEY_TIME, FIELD(ls_stall_ns), .min = 1, .option = "--stall-after",
	  .help = "log who holds the clock after this much real time" },
	{ "Lockstep", "OnDeath", KEY_OWN, FIELD(ls_abort), .own = own_on_death, .option = "--on-death",
	  .help = "a dead participant: evict it, or abort the run (status 86)" },
	{ "Lockstep", "EvictAfter", KEY_TIME, FIELD(ls_evict_ns), .min = 1, .option = "--evict-after",
	  .help = "a participant holding the clock this long has stalled" },
	{ "Lockstep", "OnStall", KEY_OWN, FIELD(ls_on_stall), .own = own_on_stall, .option = "--on-stall",
	  .help = "a stalled participant: wait, evict it, or abort the run (status 87)" },
	{ "Lockstep", "MaxGrantAhead", KEY_TIME, FIELD(ls_max_ahead_ns), .min = 1,
	  .option = "--max-grant-ahead", .help = "refuse grants beyond the clock's time plus this" },

	/* "Distribute": { "Publish": true, "Clock": "sim", "Lead": "5ms", "Heartbeat":
	 * "200ms", "StaleAfter": "600ms", "OnLeaderLoss": "hold" } */
	{ "Distribute", "Publish", KEY_BOOL, FIELD(dist_publish), .reload = RELOAD_RESTART,
	  .help = "this clock leads: publish its time function" },
	{ "Distribute", "Clock", KEY_OWN, STR(dist_clock), .own = own_dist_clock,
	  .reload = RELOAD_RESTART, .help = "the clock's name on the wire (default: Name)" },
	/* Changes wait for their instants in the mode's queue, not on the
	 * clock thread (mode_distribute.c). */
	{ "Distribute", "Lead", KEY_TIME, FIELD(dist_lead_ns), .min = 0, .max = 1e9,
	  .expect = "a duration from 0 to 1s", .reload = RELOAD_RESTART,
	  .help = "leader: changes take effect this much later" },
	{ "Distribute", "Heartbeat", KEY_TIME, FIELD(dist_hb_ns), .min = 1e8,
	  .max = 6e10, .expect = "a duration from 100ms (10 messages/s) to 60s",
	  .reload = RELOAD_RESTART, .help = "leader: the period of its messages" },
	{ "Distribute", "StaleAfter", KEY_TIME, FIELD(dist_stale_ns), .min = 1,
	  .reload = RELOAD_RESTART, .help = "follower: stale without its leader this long" },
	{ "Distribute", "OnLeaderLoss", KEY_OWN, FIELD(dist_run_on_loss), .own = own_leader_loss,
	  .reload = RELOAD_RESTART, .help = "follower without its leader: hold (pause) or run" },
	{ "Distribute", "OnSlow", KEY_OWN, FIELD(dist_on_slow), .own = own_on_slow,
	  .reload = RELOAD_RESTART,
	  .help = "leader: \"wait\" for a slow follower, or ask it aside once late on N of 32" },

	/* "Ros2": { "Publish": true, "PublishHz": 100, "Domain": 0, "StaleAfter": "1s" } */
	{ "Ros2", "Publish", KEY_BOOL, FIELD(ros2_publish), .reload = RELOAD_RESTART,
	  .help = "publish the clock on /clock" },
	{ "Ros2", "PublishHz", KEY_INT, FIELD(ros2_hz), .min = 1, .max = 10000,
	  .expect = "a whole number from 1 to 10000", .reload = RELOAD_RESTART,
	  .help = "the /clock rate, in real time" },
	{ "Ros2", "Domain", KEY_INT, FIELD(ros2_domain), .min = 0, .max = 232,
	  .expect = "a DDS domain id from 0 to 232", .reload = RELOAD_RESTART,
	  .help = "the DDS domain (default $ROS_DOMAIN_ID, else 0)" },
	{ "Ros2", "StaleAfter", KEY_TIME, FIELD(ros2_stale_ns), .min = 1, .reload = RELOAD_RESTART,
	  .help = "ros2 source: stale without a sample this long" },
	{ "Ros2", "Security", KEY_OWN, STR(ros2_security), .own = own_security,
	  .reload = RELOAD_RESTART,
	  .help = "join DDS with this enclave's identity and permissions (DDS Security)" },
};

const size_t config_nkeys = sizeof(config_keys) / sizeof(config_keys[0]);

static bool same_section(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

const struct config_key *config_key_find(const char *section, const char *name)
{
	for (size_t i = 0; i < config_nkeys; i++)
		if (same_section(config_keys[i].section, section) && !strcmp(config_keys[i].name, name))
			return &config_keys[i];
	return NULL;
}

const char *config_key_names(const char *section, char *buf, size_t n)
{
	size_t len = 0;

	buf[0] = 0;
	for (size_t i = 0; i < config_nkeys && len < n; i++)
		if (same_section(config_keys[i].section, section))
			len += (size_t)snprintf(buf + len, n - len, "%s%s", len ? ", " : "",
						config_keys[i].name);
	return buf;
}

static int apply_section(const struct config_ctx *x, const struct config_key *sec, const cJSON *o,
			 struct shmclockd_config *c);

static int apply_one(const struct config_ctx *x, const struct config_key *key, const cJSON *v,
		     struct shmclockd_config *c)
{
	char *at = (char *)c + key->off, pre[96] = "", b[64];
	const char *k = v->string;

	/* A section's keys are named with it in their messages. */
	if (key->section)
		snprintf(pre, sizeof(pre), "%s.%s: ", key->section, key->name);
	switch (key->kind) {
	case KEY_BOOL:
		return get_bool(x, v, key->section, (bool *)at);
	case KEY_INT:
		if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) ||
		    v->valuedouble < key->min || v->valuedouble > key->max)
			return key_error(x, k, "%sexpected %s, got %s", pre, key->expect,
					 shown(v, b, sizeof(b)));
		*(int *)at = (int)v->valuedouble;
		return 0;
	case KEY_SCALE:
		if (!cJSON_IsNumber(v) || !config_scale_ok(v->valuedouble))
			return key_error(x, k, "%sexpected %s, got %s", pre, key->expect,
					 shown(v, b, sizeof(b)));
		*(double *)at = v->valuedouble;
		return 0;
	case KEY_TIME: {
		int64_t ns;

		if (get_time(x, v, k, false, (int64_t *)at))
			return -EINVAL;
		ns = *(int64_t *)at;
		if (!key->max && ns < key->min)
			return key_error(x, k, "%smust be positive", pre);
		if (key->max && (ns < key->min || ns > key->max))
			return key_error(x, k, "%sexpected %s, got %s", pre, key->expect,
					 shown(v, b, sizeof(b)));
		return 0;
	}
	case KEY_DATE:
		if (get_time(x, v, k, true, (int64_t *)at))
			return -EINVAL;
		*(bool *)((char *)c + key->flag) = true;
		return 0;
	case KEY_SECTION:
		if (key->missing)
			return key_error(x, k, "%s", key->missing);
		return apply_section(x, key, v, c);
	case KEY_OWN:
		return key->own(x, v, c);
	}
	return -EINVAL;
}

/* A section object (Ros2, Distribute, Lockstep): its keys are read one
 * level deeper. A required key is unset until the section sets it. */
static int apply_section(const struct config_ctx *x, const struct config_key *sec, const cJSON *o,
			 struct shmclockd_config *c)
{
	const struct config_key *req = NULL;
	struct config_ctx in;
	const cJSON *v;
	char names[256];

	if (enter_section(x, o, sec->name, sec->expect, &in))
		return -EINVAL;
	for (size_t i = 0; i < config_nkeys; i++)
		if (same_section(config_keys[i].section, sec->name) && config_keys[i].required) {
			req = &config_keys[i];
			*(int *)((char *)c + req->off) = 0;
		}
	cJSON_ArrayForEach(v, o) {
		const struct config_key *key;

		if (twice(&in, o, v))
			return -EINVAL;
		key = config_key_find(sec->name, v->string);
		if (!key)
			return key_error(&in, v->string, "unknown key in %s (known: %s)", sec->name,
					 config_key_names(sec->name, names, sizeof(names)));
		if (apply_one(&in, key, v, c))
			return -EINVAL;
	}
	if (req && !*(int *)((char *)c + req->off))
		return key_error(x, sec->name, "%s.%s is required (%g to %g)", sec->name, req->name,
				 req->min, req->max);
	return 0;
}

static int apply_key(const struct config_ctx *x, const cJSON *v, struct shmclockd_config *c)
{
	const struct config_key *key = config_key_find(NULL, v->string);
	char names[512];

	if (!key)
		return key_error(x, v->string, "unknown key (known: %s)",
				 config_key_names(NULL, names, sizeof(names)));
	return apply_one(x, key, v, c);
}

const struct config_key *config_reload_change(const struct shmclockd_config *a,
					      const struct shmclockd_config *b,
					      enum config_reload rule,
					      const struct config_key *from)
{
	for (size_t i = from ? (size_t)(from - config_keys) + 1 : 0; i < config_nkeys; i++) {
		const struct config_key *k = &config_keys[i];
		const char *pa = (const char *)a + k->off, *pb = (const char *)b + k->off;

		if (k->reload == rule && (k->str ? strcmp(pa, pb) : memcmp(pa, pb, k->size)))
			return k;
	}
	return NULL;
}

const char *config_key_path(const struct config_key *k, char *buf, size_t n)
{
	snprintf(buf, n, "%s%s%s", k->section ? k->section : "", k->section ? "." : "", k->name);
	return buf;
}

void config_print_keys(FILE *f)
{
	static const char *const rules[] = {
		[RELOAD_LIVE] = "live", [RELOAD_RESTART] = "restart",
		[RELOAD_FRESH] = "fresh", [RELOAD_UNTIL_START] = "until-start",
	};
	char path[64];

	fprintf(f, "%-26s %-11s %s\n", "KEY", "ON SIGHUP", "WHAT (OPTION)");
	for (size_t i = 0; i < config_nkeys; i++) {
		const struct config_key *k = &config_keys[i];

		fprintf(f, "%-26s %-11s %s%s%s%s\n", config_key_path(k, path, sizeof(path)),
			rules[k->reload], k->help, k->option ? " (" : "", k->option ? k->option : "",
			k->option ? ")" : "");
	}
	fprintf(f, "\nlive: a reload applies it; restart: a reload that changes it is refused; "
		   "fresh: it describes\na fresh clock (a start, --reset), a reload keeps it for "
		   "the next one; until-start:\nlive until the lockstep clock started, then as "
		   "restart. See shmclock.json(5).\n");
}

int config_load_text(const char *what, const char *text, size_t len, struct shmclockd_config *c,
		     char *err, size_t errlen)
{
	struct config_ctx x = { what, text, len, err, errlen, 1, 1 };
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
	/* Security that secures nothing would let a user believe the daemon
	 * is on a secured domain (ros2_glue_load: what uses DDS). */
	if (c->ros2_security[0] && !c->ros2_publish && !c->dist_publish &&
	    c->source->ops->feed != FEED_ROS2 && c->source->ops->feed != FEED_LEADER) {
		snprintf(err, errlen, "Ros2.Security: this shmclockd uses no DDS to secure (give it "
			 "Ros2.Publish, Distribute.Publish, or the ros2 or leader source)");
		return -EINVAL;
	}
	if (c->ros2_publish && c->source->ops->feed == FEED_ROS2) {
		snprintf(err, errlen, "Ros2.Publish: this shmclockd follows /clock (TimeSource ros2) and "
			 "would publish it back: refused (no echo loop)");
		return -EINVAL;
	}
	/* Lockstep between hosts: the leader's source is fixed or external,
	 * a follower host's the leader (lockstep_hosts.h). */
	if (c->ls_participants && c->source->id != SHMCLOCK_SOURCE_FIXED &&
	    c->source->id != SHMCLOCK_SOURCE_EXTERNAL && c->source->id != SHMCLOCK_SOURCE_REPLAY &&
	    c->source->ops->feed != FEED_LEADER) {
		snprintf(err, errlen, "Lockstep needs the fixed, external or replay source, or the "
			 "leader source on a follower host (TimeSource is %s)", c->source->name);
		return -EINVAL;
	}
	if (c->ls_participants > CONFIG_LOCKSTEP_MAX && !c->dist_publish) {
		snprintf(err, errlen, "Lockstep.Participants: %d, but one host has "
			 SHMCLOCK__XSTR(CONFIG_LOCKSTEP_MAX) " participant slots; more only on a "
			 "leader between hosts (Distribute.Publish), where it counts every host's",
			 c->ls_participants);
		return -EINVAL;
	}
	if (c->dist_publish && c->source->ops->feed == FEED_LEADER) {
		snprintf(err, errlen, "Distribute.Publish: this shmclockd follows a leader (TimeSource "
			 "leader); one leader per clock, no relays");
		return -EINVAL;
	}
	/* A source that changes its rate itself is not one a leader can
	 * publish as a function either (the leader's own is refused above). */
	if (c->dist_publish && !source_can_lead(c->source) && !c->ls_participants) {
		snprintf(err, errlen, "Distribute.Publish needs a continuous source (%s), or "
			 "Lockstep, not %s: every step would be a message; use Ros2.Publish",
			 source_leader_names(), c->source->name);
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
	if (c->replay[0] && c->source->id != SHMCLOCK_SOURCE_REPLAY) {
		snprintf(err, errlen, "Replay: a recording is replayed by the replay source "
			 "(TimeSource is %s)", c->source->name);
		return -EINVAL;
	}
	if (c->source->id == SHMCLOCK_SOURCE_REPLAY && !c->replay[0]) {
		snprintf(err, errlen, "TimeSource replay needs Replay: the recording's file "
			 "(--replay FILE)");
		return -EINVAL;
	}
	if (c->source->id == SHMCLOCK_SOURCE_REPLAY && (c->dist_publish || c->ros2_publish)) {
		snprintf(err, errlen, "the replay source runs alone here: no Distribute.Publish or "
			 "Ros2.Publish with it");
		return -EINVAL;
	}
	if (c->record[0] && c->replay[0] && !strcmp(c->record, c->replay)) {
		snprintf(err, errlen, "Record and Replay name the same file");
		return -EINVAL;
	}
	if (c->source->stepped && !c->source->ops->scalable && c->scale != 1.0) {
		snprintf(err, errlen, "TimeScale does not apply to the %s source (it is stepped from outside)",
			 c->source->name);
		return -EINVAL;
	}
	return 0;
}

bool config_holds_on_leader_loss(const struct shmclockd_config *c)
{
	return c->source->ops->feed == FEED_LEADER && !c->dist_run_on_loss;
}
