/* SPDX-License-Identifier: MIT */
/* A run's timeline as MCAP messages (timeline.h). */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <shmclock/shmclock.h>
#include <shmclock/static/shmclock.h>

#include "duration.h"
#include "timeline.h"

static const char *const cause_names[TL_NCAUSES] = {
	[TL_CAUSE_START] = "start",       [TL_CAUSE_CONTROL] = "control",
	[TL_CAUSE_SOURCE] = "source",     [TL_CAUSE_LOCKSTEP] = "lockstep",
	[TL_CAUSE_LEADER] = "leader",     [TL_CAUSE_STALE] = "stale",
	[TL_CAUSE_RELOAD] = "reload",     [TL_CAUSE_REPLAY] = "replay",
	[TL_CAUSE_MODE] = "mode",
};

const char *tl_cause_name(enum tl_cause_kind k)
{
	return (unsigned)k < TL_NCAUSES ? cause_names[k] : "?";
}

#define I64 "{\"type\":\"string\",\"pattern\":\"^-?[0-9]{1,19}$\"}"
#define U64 "{\"type\":\"string\",\"pattern\":\"^[0-9]{1,20}$\"}"
#define STR "{\"type\":\"string\"}"
#define INT "{\"type\":\"integer\"}"
#define BOOL "{\"type\":\"boolean\"}"

static const char function_schema[] =
	"{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\","
	"\"title\":\"shmclock.FunctionChange\","
	"\"description\":\"A committed change of a shmclock clock's time function: "
	"sim(t) = sim_ns + (t - mono_ns) * rate / 2^32 for CLOCK_MONOTONIC t >= mono_ns on the "
	"writer's host. 64-bit integers are decimal strings.\","
	"\"type\":\"object\","
	"\"required\":[\"seq\",\"commits\",\"mono_ns\",\"sim_ns\",\"rate\",\"nominal_mult\",\"scale\","
	"\"paused\",\"stepped\",\"stale\",\"source\",\"jump_epoch\",\"jump_ns\",\"jump_total_ns\","
	"\"unix_at_zero_ns\",\"wall_ns\",\"at_mono_ns\",\"cause\"],"
	"\"properties\":{"
	"\"seq\":" U64 ",\"commits\":" U64 ",\"mono_ns\":" I64 ",\"sim_ns\":" I64 ","
	"\"rate\":" U64 ",\"nominal_mult\":" U64 ",\"scale\":{\"type\":\"number\"},"
	"\"paused\":" BOOL ",\"stepped\":" BOOL ",\"stale\":" BOOL ",\"source\":" STR ","
	"\"jump_epoch\":" U64 ",\"jump_ns\":" I64 ",\"jump_total_ns\":" I64 ","
	"\"unix_at_zero_ns\":{\"oneOf\":[{\"type\":\"null\"}," I64 "]},"
	"\"wall_ns\":" I64 ",\"at_mono_ns\":" I64 ","
	"\"cause\":{\"type\":\"object\",\"required\":[\"kind\"],\"properties\":{"
	"\"kind\":{\"enum\":[\"start\",\"control\",\"source\",\"lockstep\",\"leader\",\"stale\","
	"\"reload\",\"replay\",\"mode\"]},"
	"\"command\":" STR ",\"arg\":" STR ",\"uid\":" INT ",\"pid\":" INT ",\"who\":" STR ","
	"\"held_ns\":" I64 ",\"term\":" U64 "}}"
	"}}";

static const char lockstep_schema[] =
	"{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\","
	"\"title\":\"shmclock.LockstepEvent\","
	"\"description\":\"A lockstep participant joined, left, died, stalled or was evicted.\","
	"\"type\":\"object\","
	"\"required\":[\"event\",\"who\",\"pid\",\"sim_ns\",\"grant_ns\",\"wall_ns\"],"
	"\"properties\":{"
	"\"event\":{\"enum\":[\"join\",\"leave\",\"death\",\"stall\",\"evict\"]},"
	"\"who\":" STR ",\"pid\":" INT ",\"sim_ns\":" I64 ",\"grant_ns\":" I64 ",\"wall_ns\":" I64
	"}}";

static const char hosts_schema[] =
	"{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\","
	"\"title\":\"shmclock.HostsEvent\","
	"\"description\":\"Between hosts: a follower joined, left or was lost (on the leader); a "
	"leader followed, lost, or in conflict with another (on a follower).\","
	"\"type\":\"object\","
	"\"required\":[\"event\",\"host\",\"detail\",\"term\",\"sim_ns\",\"wall_ns\"],"
	"\"properties\":{"
	"\"event\":{\"enum\":[\"joined\",\"left\",\"lost\",\"following\",\"leader-lost\","
	"\"conflict\"]},"
	"\"host\":" STR ",\"detail\":" STR ",\"term\":" U64 ",\"sim_ns\":" I64
	",\"wall_ns\":" I64 "}}";

struct tl_channel {
	int id;
	const char *topic, *schema_name, *schema;
};

static const struct tl_channel channels[] = {
#define TL_ROW(id, topic, name) { id, topic, name, NULL },
	TL_CHANNELS(TL_ROW)
#undef TL_ROW
};

const char *tl_topic(int ch)
{
	return ch >= 1 && ch <= TL_NCHANNELS ? channels[ch - 1].topic : NULL;
}

const char *tl_schema_name(int ch)
{
	return ch >= 1 && ch <= TL_NCHANNELS ? channels[ch - 1].schema_name : NULL;
}

const char *tl_schema(int ch)
{
	return ch == TL_CH_FUNCTION   ? function_schema
	       : ch == TL_CH_LOCKSTEP ? lockstep_schema
	       : ch == TL_CH_HOSTS    ? hosts_schema
				      : NULL;
}

/* @s as a JSON string's contents (quotes not included) into @out. */
static void json_escape(const char *s, char *out, size_t outlen)
{
	size_t o = 0;

	for (; *s && o + 7 < outlen; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\') {
			out[o++] = '\\';
			out[o++] = (char)ch;
		} else if (ch < 0x20 || ch == 0x7f) {
			o += (size_t)snprintf(out + o, outlen - o, "\\u%04x", ch);
		} else {
			out[o++] = (char)ch;
		}
	}
	out[o] = 0;
}

size_t tl_change_json(const struct tl_change *c, char *buf, size_t len)
{
	char cause[400], esc1[100], esc2[140];
	char uz[32];
	const struct tl_cause *k = &c->cause;
	int n;

	switch (k->kind) {
	case TL_CAUSE_CONTROL:
		json_escape(k->command, esc1, sizeof(esc1));
		json_escape(k->arg, esc2, sizeof(esc2));
		snprintf(cause, sizeof(cause),
			 "{\"kind\":\"control\",\"command\":\"%s\",\"arg\":\"%s\",\"uid\":%" PRId64
			 ",\"pid\":%" PRId64 "}",
			 esc1, esc2, k->uid, k->pid);
		break;
	case TL_CAUSE_LOCKSTEP:
		json_escape(k->who, esc2, sizeof(esc2));
		snprintf(cause, sizeof(cause),
			 "{\"kind\":\"lockstep\",\"who\":\"%s\",\"pid\":%" PRId64 ",\"held_ns\":\"%" PRId64
			 "\"}",
			 esc2, k->pid, k->held_ns);
		break;
	case TL_CAUSE_LEADER:
		snprintf(cause, sizeof(cause), "{\"kind\":\"leader\",\"term\":\"%" PRIu64 "\"}", k->term);
		break;
	default:
		snprintf(cause, sizeof(cause), "{\"kind\":\"%s\"}", tl_cause_name(k->kind));
		break;
	}
	if (c->has_unix_at_zero)
		snprintf(uz, sizeof(uz), "\"%" PRId64 "\"", c->unix_at_zero_ns);
	else
		snprintf(uz, sizeof(uz), "null");
	n = snprintf(buf, len,
		     "{\"seq\":\"%" PRIu64 "\",\"commits\":\"%" PRIu64 "\",\"mono_ns\":\"%" PRId64
		     "\",\"sim_ns\":\"%" PRId64 "\",\"rate\":\"%" PRIu64 "\",\"nominal_mult\":\"%" PRIu64
		     "\",\"scale\":%.17g,\"paused\":%s,\"stepped\":%s,\"stale\":%s,\"source\":\"%s\","
		     "\"jump_epoch\":\"%" PRIu64 "\",\"jump_ns\":\"%" PRId64 "\",\"jump_total_ns\":\"%" PRId64
		     "\",\"unix_at_zero_ns\":%s,\"wall_ns\":\"%" PRId64 "\",\"at_mono_ns\":\"%" PRId64
		     "\",\"cause\":%s}",
		     c->seq, c->commits, c->mono_base, c->sim_base, c->rate, c->nominal_mult,
		     (double)c->nominal_mult / 4294967296.0, c->paused ? "true" : "false",
		     c->stepped ? "true" : "false", c->stale ? "true" : "false",
		     shmclock_source_name(c->source), c->jump_epoch, c->last_jump_ns, c->jump_total_ns,
		     uz, c->wall_ns, c->at_mono_ns, cause);
	return n < 0 ? len : (size_t)n;
}

size_t tl_lockstep_json(const struct tl_lockstep *e, char *buf, size_t len)
{
	char who[140], ev[40];
	int n;

	json_escape(e->who, who, sizeof(who));
	json_escape(e->event, ev, sizeof(ev));
	n = snprintf(buf, len,
		     "{\"event\":\"%s\",\"who\":\"%s\",\"pid\":%" PRId64 ",\"sim_ns\":\"%" PRId64
		     "\",\"grant_ns\":\"%" PRId64 "\",\"wall_ns\":\"%" PRId64 "\"}",
		     ev, who, e->pid, e->sim_ns, e->grant_ns, e->wall_ns);
	return n < 0 ? len : (size_t)n;
}

size_t tl_hosts_json(const struct tl_hosts *e, char *buf, size_t len)
{
	char ev[40], host[210], detail[330];
	int n;

	json_escape(e->event, ev, sizeof(ev));
	json_escape(e->host, host, sizeof(host));
	json_escape(e->detail, detail, sizeof(detail));
	n = snprintf(buf, len,
		     "{\"event\":\"%s\",\"host\":\"%s\",\"detail\":\"%s\",\"term\":\"%" PRIu64
		     "\",\"sim_ns\":\"%" PRId64 "\",\"wall_ns\":\"%" PRId64 "\"}",
		     ev, host, detail, e->term, e->sim_ns, e->wall_ns);
	return n < 0 ? len : (size_t)n;
}

/* --- parsing --- */

static int bad(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int bad(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EBADMSG;
}

/* A decimal string member @k of @o into *v: 0, or -EBADMSG. */
static int get_i64(const cJSON *o, const char *k, int64_t *v, bool is_unsigned, char *err,
		   size_t errlen)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
	const char *s;
	char *end;

	if (!cJSON_IsString(x) || !(s = x->valuestring) || !*s)
		return bad(err, errlen, "'%s' is not a decimal string", k);
	errno = 0;
	if (is_unsigned) {
		if (*s == '-')
			return bad(err, errlen, "'%s' is negative", k);
		*v = (int64_t)strtoull(s, &end, 10);
	} else {
		*v = strtoll(s, &end, 10);
	}
	if (errno || *end)
		return bad(err, errlen, "'%s' is not a decimal 64-bit integer", k);
	return 0;
}

static int get_bool(const cJSON *o, const char *k, bool *v, char *err, size_t errlen)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);

	if (!cJSON_IsBool(x))
		return bad(err, errlen, "'%s' is not a boolean", k);
	*v = cJSON_IsTrue(x);
	return 0;
}

static int get_str(const cJSON *o, const char *k, char *out, size_t outlen, bool need, char *err,
		   size_t errlen)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);

	if (!x && !need) {
		out[0] = 0;
		return 0;
	}
	if (!cJSON_IsString(x) || strlen(x->valuestring) >= outlen)
		return bad(err, errlen, "'%s' is not a string (of at most %zu bytes)", k, outlen - 1);
	strcpy(out, x->valuestring);
	return 0;
}

static int64_t get_int(const cJSON *o, const char *k, int64_t dflt)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsNumber(x) && x->valuedouble >= -9e15 && x->valuedouble <= 9e15
		       ? (int64_t)x->valuedouble
		       : dflt;
}

static int source_id(const char *name)
{
#define TL_SOURCE_ID(value, id, sname, alias, flags, help) \
	if (!strcmp(name, #sname))                        \
		return value;
	SHMCLOCK_SOURCE_MAP(TL_SOURCE_ID)
#undef TL_SOURCE_ID
	return -1;
}

int tl_change_parse(const void *json, size_t len, struct tl_change *c, char *err, size_t errlen)
{
	cJSON *o = cJSON_ParseWithLength(json, len);
	const cJSON *k, *uz;
	char src[32], kind[16];
	int64_t v;
	int r = -EBADMSG;

	memset(c, 0, sizeof(*c));
	if (!cJSON_IsObject(o)) {
		bad(err, errlen, "not a JSON object");
		goto out;
	}
#define I(name, field)                                                  \
	if (get_i64(o, name, &v, false, err, errlen))                   \
		goto out;                                               \
	c->field = v;
#define U(name, field)                                                  \
	if (get_i64(o, name, &v, true, err, errlen))                    \
		goto out;                                               \
	c->field = (uint64_t)v;
	U("seq", seq)
	U("commits", commits)
	I("mono_ns", mono_base)
	I("sim_ns", sim_base)
	U("rate", rate)
	U("nominal_mult", nominal_mult)
	U("jump_epoch", jump_epoch)
	I("jump_ns", last_jump_ns)
	I("jump_total_ns", jump_total_ns)
	I("wall_ns", wall_ns)
	I("at_mono_ns", at_mono_ns)
#undef I
#undef U
	if (get_bool(o, "paused", &c->paused, err, errlen) ||
	    get_bool(o, "stepped", &c->stepped, err, errlen) ||
	    get_bool(o, "stale", &c->stale, err, errlen) ||
	    get_str(o, "source", src, sizeof(src), true, err, errlen))
		goto out;
	if ((c->source = source_id(src)) < 0) {
		bad(err, errlen, "unknown source '%s'", src);
		goto out;
	}
	/* What a writer can publish (set_function's 32.32 rate below 2^63),
	 * and instants a replay can shift without overflow: CLOCK_MONOTONIC
	 * within +-2^61 ns (73 years), simulated times within +-2^62. */
	if (!c->nominal_mult || c->nominal_mult >= (UINT64_C(1) << 63)) {
		bad(err, errlen, "'nominal_mult' %" PRIu64 " is not a rate a clock can have",
		    c->nominal_mult);
		goto out;
	}
	if (c->mono_base < -(INT64_C(1) << 61) || c->mono_base > (INT64_C(1) << 61) ||
	    c->at_mono_ns < -(INT64_C(1) << 61) || c->at_mono_ns > (INT64_C(1) << 61) ||
	    c->sim_base < -(INT64_C(1) << 62) || c->sim_base > (INT64_C(1) << 62)) {
		bad(err, errlen, "an instant or a time out of range");
		goto out;
	}
	if (c->rate && c->rate != c->nominal_mult) {
		bad(err, errlen, "'rate' is neither 0 nor 'nominal_mult'");
		goto out;
	}
	if (!c->rate != (c->paused || c->stepped)) {
		bad(err, errlen, "'rate' disagrees with 'paused' and 'stepped'");
		goto out;
	}
	c->initialized = true;
	uz = cJSON_GetObjectItemCaseSensitive(o, "unix_at_zero_ns");
	if (cJSON_IsNull(uz)) {
		c->has_unix_at_zero = false;
	} else {
		if (get_i64(o, "unix_at_zero_ns", &v, false, err, errlen))
			goto out;
		c->has_unix_at_zero = true;
		c->unix_at_zero_ns = v;
	}
	k = cJSON_GetObjectItemCaseSensitive(o, "cause");
	if (!cJSON_IsObject(k) || get_str(k, "kind", kind, sizeof(kind), true, err, errlen)) {
		if (!cJSON_IsObject(k))
			bad(err, errlen, "'cause' is not an object");
		goto out;
	}
	c->cause.kind = TL_NCAUSES;
	for (int i = 0; i < TL_NCAUSES; i++)
		if (!strcmp(kind, cause_names[i]))
			c->cause.kind = (enum tl_cause_kind)i;
	if (c->cause.kind == TL_NCAUSES) {
		bad(err, errlen, "unknown cause '%s'", kind);
		goto out;
	}
	if (get_str(k, "command", c->cause.command, sizeof(c->cause.command), false, err, errlen) ||
	    get_str(k, "arg", c->cause.arg, sizeof(c->cause.arg), false, err, errlen) ||
	    get_str(k, "who", c->cause.who, sizeof(c->cause.who), false, err, errlen))
		goto out;
	c->cause.uid = get_int(k, "uid", -1);
	c->cause.pid = get_int(k, "pid", -1);
	if (cJSON_GetObjectItemCaseSensitive(k, "held_ns") &&
	    get_i64(k, "held_ns", &c->cause.held_ns, false, err, errlen))
		goto out;
	if (cJSON_GetObjectItemCaseSensitive(k, "term")) {
		if (get_i64(k, "term", &v, true, err, errlen))
			goto out;
		c->cause.term = (uint64_t)v;
	}
	r = 0;
out:
	cJSON_Delete(o);
	return r;
}

/* A message's JSON object, or NULL with @err. */
static cJSON *parse_object(const void *json, size_t len, char *err, size_t errlen)
{
	cJSON *o = cJSON_ParseWithLength(json, len);

	if (!cJSON_IsObject(o)) {
		bad(err, errlen, "not a JSON object");
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

int tl_lockstep_parse(const void *json, size_t len, struct tl_lockstep *e, char *err, size_t errlen)
{
	cJSON *o;
	int r = -EBADMSG;

	memset(e, 0, sizeof(*e));
	if (!(o = parse_object(json, len, err, errlen)))
		return r;
	if (get_str(o, "event", e->event, sizeof(e->event), true, err, errlen) ||
	    get_str(o, "who", e->who, sizeof(e->who), true, err, errlen) ||
	    get_i64(o, "sim_ns", &e->sim_ns, false, err, errlen) ||
	    get_i64(o, "grant_ns", &e->grant_ns, false, err, errlen) ||
	    get_i64(o, "wall_ns", &e->wall_ns, false, err, errlen))
		goto out;
	e->pid = get_int(o, "pid", -1);
	r = 0;
out:
	cJSON_Delete(o);
	return r;
}

int tl_hosts_parse(const void *json, size_t len, struct tl_hosts *e, char *err, size_t errlen)
{
	cJSON *o;
	int64_t v;
	int r = -EBADMSG;

	memset(e, 0, sizeof(*e));
	if (!(o = parse_object(json, len, err, errlen)))
		return r;
	if (get_str(o, "event", e->event, sizeof(e->event), true, err, errlen) ||
	    get_str(o, "host", e->host, sizeof(e->host), true, err, errlen) ||
	    get_str(o, "detail", e->detail, sizeof(e->detail), false, err, errlen) ||
	    get_i64(o, "term", &v, true, err, errlen) ||
	    get_i64(o, "sim_ns", &e->sim_ns, false, err, errlen) ||
	    get_i64(o, "wall_ns", &e->wall_ns, false, err, errlen))
		goto out;
	e->term = (uint64_t)v;
	r = 0;
out:
	cJSON_Delete(o);
	return r;
}

/* --- writing the start --- */

void tl_put_channels(struct mcap_buf *b, const char *clock)
{
	const char *meta[] = { "shmclock.record", TL_VERSION, "shmclock.clock", clock, NULL };

	for (int ch = 1; ch <= TL_NCHANNELS; ch++) {
		mcap_put_schema(b, (uint16_t)ch, tl_schema_name(ch), "jsonschema", tl_schema(ch));
		mcap_put_channel(b, (uint16_t)ch, (uint16_t)ch, tl_topic(ch), "json", meta);
	}
}

void tl_put_start(struct mcap_buf *b, const char *clock, const char *library)
{
	mcap_put_bytes(b, mcap_magic, MCAP_MAGIC_LEN);
	mcap_put_header(b, TL_PROFILE, library);
	tl_put_channels(b, clock);
}

/* --- loading --- */

void tl_free(struct tl_recording *rec)
{
	free(rec->changes);
	free(rec->events);
	free(rec->hosts);
	memset(rec, 0, sizeof(*rec));
}

static int grow(void **p, size_t *cap, size_t n, size_t size)
{
	void *q;

	if (n < *cap)
		return 0;
	*cap = *cap ? *cap * 2 : 256;
	if (!(q = realloc(*p, *cap * size)))
		return -ENOMEM;
	*p = q;
	return 0;
}

static int load(struct mcap_reader *rd, struct tl_recording *rec, char *err, size_t errlen)
{
	struct mcap_record r;
	bool known[TL_NCHANNELS + 1] = { false };
	bool header = false, data_end = false;
	size_t ccap = 0, ecap = 0, hcap = 0;
	uint64_t last_seq = 0;
	int e;

	memset(rec, 0, sizeof(*rec));
	while ((e = mcap_next(rd, &r)) > 0) {
		if (!header) {
			struct mcap_header h;

			if (r.op != MCAP_OP_HEADER || mcap_parse_header(&r, &h)) {
				snprintf(err, errlen, "an MCAP file without a Header record first");
				return -EPROTO;
			}
			if (!mcap_str_eq(h.profile, TL_PROFILE)) {
				snprintf(err, errlen,
					 "an MCAP file of profile '%.*s', not a shmclock recording",
					 (int)(h.profile.len > 40 ? 40 : h.profile.len), h.profile.p);
				return -EPROTO;
			}
			header = true;
			continue;
		}
		if (r.op == MCAP_OP_CHANNEL && !data_end) {
			struct mcap_channel ch;
			char v[16] = "";

			if (mcap_parse_channel(&r, &ch)) {
				snprintf(err, errlen, "byte %" PRIu64 ": a malformed Channel record",
					 r.offset);
				return -EBADMSG;
			}
			if (ch.id < 1 || ch.id > TL_NCHANNELS || !mcap_str_eq(ch.topic, tl_topic(ch.id)))
				continue; /* not ours: skipped */
			if (mcap_channel_meta(&ch, "shmclock.record", v, sizeof(v)) ||
			    strcmp(v, TL_VERSION)) {
				snprintf(err, errlen,
					 "a recording of another format (channel %.*s, version '%s'; this "
					 "shmclock reads version %s)",
					 (int)ch.topic.len, ch.topic.p, v, TL_VERSION);
				return -EPROTO;
			}
			if (mcap_channel_meta(&ch, "shmclock.clock", rec->clock, sizeof(rec->clock)))
				rec->clock[0] = 0;
			known[ch.id] = true;
			continue;
		}
		if (r.op == MCAP_OP_DATA_END)
			data_end = true; /* the summary repeats what was read: read on, skipped */
		if (r.op != MCAP_OP_MESSAGE || data_end)
			continue;
		{
			struct mcap_message m;
			char why[160];

			if (mcap_parse_message(&r, &m)) {
				snprintf(err, errlen, "byte %" PRIu64 ": a malformed Message record",
					 r.offset);
				return -EBADMSG;
			}
			if (m.channel < 1 || m.channel > TL_NCHANNELS || !known[m.channel])
				continue;
			if (m.channel == TL_CH_FUNCTION) {
				struct tl_change c;

				if (tl_change_parse(m.data, m.len, &c, why, sizeof(why))) {
					snprintf(err, errlen, "byte %" PRIu64 ": function change %" PRIu32 ": %s",
						 r.offset, m.seq, why);
					return -EBADMSG;
				}
				if (rec->nchanges && c.seq <= last_seq) {
					snprintf(err, errlen,
						 "byte %" PRIu64 ": function change %" PRIu64
						 " after %" PRIu64 " (out of order)",
						 r.offset, c.seq, last_seq);
					return -EBADMSG;
				}
				last_seq = c.seq;
				if (grow((void **)&rec->changes, &ccap, rec->nchanges, sizeof(c)))
					return -ENOMEM;
				rec->changes[rec->nchanges++] = c;
			} else if (m.channel == TL_CH_HOSTS) {
				struct tl_hosts h;

				if (tl_hosts_parse(m.data, m.len, &h, why, sizeof(why))) {
					snprintf(err, errlen, "byte %" PRIu64 ": hosts event: %s", r.offset,
						 why);
					return -EBADMSG;
				}
				if (grow((void **)&rec->hosts, &hcap, rec->nhosts, sizeof(h)))
					return -ENOMEM;
				rec->hosts[rec->nhosts++] = h;
			} else {
				struct tl_lockstep ev;

				if (tl_lockstep_parse(m.data, m.len, &ev, why, sizeof(why))) {
					snprintf(err, errlen, "byte %" PRIu64 ": lockstep event: %s",
						 r.offset, why);
					return -EBADMSG;
				}
				if (grow((void **)&rec->events, &ecap, rec->nevents, sizeof(ev)))
					return -ENOMEM;
				rec->events[rec->nevents++] = ev;
			}
		}
	}
	if (e == -EPIPE && header) {
		rec->truncated = true;
		rec->stopped_at = rd->stopped_at;
		snprintf(rec->note, sizeof(rec->note), "%s%s", rd->err,
			 data_end ? "; its data is whole, its summary is not" : "");
		e = 0;
	} else if (e < 0) {
		snprintf(err, errlen, "%s", rd->err);
		return e;
	}
	if (!header) {
		snprintf(err, errlen, "an MCAP file without a Header record");
		return -EPROTO;
	}
	if (!known[TL_CH_FUNCTION]) {
		snprintf(err, errlen, "no %s channel: not a shmclock recording, or cut before it",
			 tl_topic(TL_CH_FUNCTION));
		return -EPROTO;
	}
	return 0;
}

int tl_load_mem(const void *mem, size_t size, struct tl_recording *rec, char *err, size_t errlen)
{
	return tl_load_mem_flags(mem, size, 0, rec, err, errlen);
}

int tl_load_mem_flags(const void *mem, size_t size, unsigned flags, struct tl_recording *rec,
		      char *err, size_t errlen)
{
	struct mcap_reader rd;
	int r;

	mcap_reader_init_mem(&rd, mem, size);
	rd.no_crc = flags & TL_NO_CRC;
	r = load(&rd, rec, err, errlen);
	mcap_reader_free(&rd);
	if (r)
		tl_free(rec);
	return r;
}

int tl_load(const char *path, struct tl_recording *rec, char *err, size_t errlen)
{
	struct mcap_reader rd;
	struct stat st;
	/* O_NONBLOCK: a FIFO given for a recording must not hang the open
	 * (it is refused below); reads of a regular file ignore the flag. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	int r;

	memset(rec, 0, sizeof(*rec));
	if (fd < 0) {
		r = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return r;
	}
	if (fstat(fd, &st)) {
		r = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		close(fd);
		return r;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: not a regular file", path);
		close(fd);
		return -EINVAL;
	}
	mcap_reader_init_fd(&rd, fd, (uint64_t)st.st_size);
	r = load(&rd, rec, err, errlen);
	mcap_reader_free(&rd);
	close(fd);
	if (r)
		tl_free(rec);
	return r;
}

int64_t tl_eval(const struct tl_change *c, int64_t mono)
{
	return shmclock_static_eval(c->mono_base, c->sim_base, c->rate, mono);
}

void tl_describe(const struct tl_change *prev, const struct tl_change *c, char *buf, size_t len)
{
	char d[48];
	double x = (double)c->nominal_mult / 4294967296.0;
	size_t n;

	if (c->stepped)
		n = (size_t)snprintf(buf, len, "stepped");
	else if (c->paused)
		n = (size_t)snprintf(buf, len, "paused");
	else
		n = (size_t)snprintf(buf, len, "running x%g", x);
	if (prev && c->jump_epoch != prev->jump_epoch && n < len) {
		/* Its magnitude as unsigned: INT64_MIN (a saturated jump) has
		 * no int64_t negation. */
		uint64_t m = c->last_jump_ns < 0 ? 0 - (uint64_t)c->last_jump_ns
						 : (uint64_t)c->last_jump_ns;

		duration_format(m > INT64_MAX ? INT64_MAX : (int64_t)m, d, sizeof(d));
		n += (size_t)snprintf(buf + n, len - n, ", jumped %c%s", c->last_jump_ns < 0 ? '-' : '+',
				      d);
	}
	if (c->stale && n < len)
		snprintf(buf + n, len - n, ", stale");
}

void tl_cause_text(const struct tl_cause *k, char *buf, size_t len)
{
	char d[48];

	switch (k->kind) {
	case TL_CAUSE_CONTROL:
		snprintf(buf, len, "control %s%s%s (uid %" PRId64 ", pid %" PRId64 ")", k->command,
			 k->arg[0] ? " " : "", k->arg, k->uid, k->pid);
		break;
	case TL_CAUSE_LOCKSTEP:
		snprintf(buf, len, "lockstep: released by %s (pid %" PRId64 "), held %s", k->who, k->pid,
			 duration_format(k->held_ns, d, sizeof(d)));
		break;
	case TL_CAUSE_LEADER:
		snprintf(buf, len, "leader, term %" PRIu64, k->term);
		break;
	default:
		snprintf(buf, len, "%s", tl_cause_name(k->kind));
		break;
	}
}

int64_t tl_start_mono(const struct tl_recording *rec)
{
	const struct tl_change *c0 = &rec->changes[0];

	return c0->at_mono_ns > c0->mono_base + 2000000000LL ? c0->at_mono_ns : c0->mono_base;
}

int tl_due_times(const struct tl_recording *rec, int64_t *start, int64_t **due, size_t *n,
		 char *err, size_t errlen)
{
	int64_t *d, last;
	size_t k = 0;

	*due = NULL;
	*n = 0;
	if (!rec->nchanges) {
		snprintf(err, errlen, "no change of the time function in it");
		return -EINVAL;
	}
	last = *start = tl_eval(&rec->changes[0], tl_start_mono(rec));
	if (!(d = malloc(2 * rec->nchanges * sizeof(*d)))) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 1; i < rec->nchanges; i++) {
		const struct tl_change *c = &rec->changes[i];
		int64_t at = tl_eval(c - 1, c->mono_base), to = c->sim_base;

		if (at < last || to < at) {
			char a[48], b[48];

			snprintf(err, errlen,
				 "change %zu goes back (from %s to %s): a replay in lockstep only moves "
				 "forward",
				 i, duration_format(to < at ? at : last, a, sizeof(a)),
				 duration_format(to < at ? to : at, b, sizeof(b)));
			free(d);
			return -EINVAL;
		}
		if (at > last)
			d[k++] = last = at;
		if (to > last)
			d[k++] = last = to;
	}
	*due = d;
	*n = k;
	return 0;
}
