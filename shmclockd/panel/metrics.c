/* SPDX-License-Identifier: MIT */
/*
 * /metrics: the Prometheus text exposition format (version 0.0.4), built
 * from what the poller last read: the segment (live time, scale, flags)
 * and the daemon's status (ticks, control, lockstep, hosts). Names follow
 * Prometheus' conventions: prefix shmclock_, base units (_seconds),
 * counters end in _total. A figure the status does not carry (an older
 * daemon, no lockstep) is left out, never reported as 0.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "panel.h"
#include "status_fields.h"
#include "status_json.h"

void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->oom)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->oom = true;
			return;
		}
		if (b->s && b->len + (size_t)n < b->cap) {
			b->len += (size_t)n;
			return;
		}
		size_t cap = (b->cap ? b->cap * 2 : 4096) + (size_t)n;
		char *s = realloc(b->s, cap);

		if (!s) {
			b->oom = true;
			return;
		}
		b->s = s;
		b->cap = cap;
	}
}

void sb_label(struct sbuf *b, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			sb_printf(b, "\\%c", *s);
		else if (*s == '\n')
			sb_printf(b, "\\n");
		else
			sb_printf(b, "%c", *s);
	}
}

/* One sample of family @name (its HELP and TYPE first, once: *@head),
 * labelled with @clock and, when @label is not NULL, @label=@who. */
static void sample(struct sbuf *b, bool *head, const char *name, const char *type,
		   const char *help, const char *clock, const char *label, const char *who, double v)
{
	if (!*head)
		sb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
	*head = true;
	sb_printf(b, "%s{clock=\"", name);
	sb_label(b, clock);
	if (label) {
		sb_printf(b, "\",%s=\"", label);
		sb_label(b, who);
	}
	sb_printf(b, "\"} %.17g\n", v);
}

/* One metric family: its HELP and TYPE lines, then one sample per clock
 * that has it (each clock's value from @get; NAN: absent). */
typedef double (*getter)(const struct panel_clock *c);

static void family(struct sbuf *b, struct panel *p, const char *name, const char *type,
		   const char *help, getter get)
{
	bool head = false;

	for (int i = 0; i < p->nclocks; i++) {
		double v = get(&p->clocks[i]);

		if (!isnan(v))
			sample(b, &head, name, type, help, p->clocks[i].name, NULL, NULL, v);
	}
}

static const cJSON *sub(const struct panel_clock *c, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(c->status, k);
}

static bool seg_ok(const struct panel_clock *c)
{
	return c->info_r == 0;
}

static double g_up(const struct panel_clock *c) { return c->status ? 1 : 0; }
static double g_readable(const struct panel_clock *c) { return seg_ok(c) ? 1 : 0; }
static double g_sim(const struct panel_clock *c)
{
	return seg_ok(c) && c->info.initialized ? (double)c->info.sim_ns / 1e9 : NAN;
}
static double g_scale(const struct panel_clock *c) { return seg_ok(c) ? c->info.scale : NAN; }
static double g_rtf(const struct panel_clock *c) { return c->hist_n ? c->rtf : NAN; }
static double g_paused(const struct panel_clock *c) { return seg_ok(c) ? c->info.paused : NAN; }
static double g_stepped(const struct panel_clock *c) { return seg_ok(c) ? c->info.stepped : NAN; }
static double g_stale(const struct panel_clock *c) { return seg_ok(c) ? c->info.stale : NAN; }
static double g_init(const struct panel_clock *c) { return seg_ok(c) ? c->info.initialized : NAN; }
static double g_alive(const struct panel_clock *c) { return seg_ok(c) ? c->info.writer_alive : NAN; }
static double g_jumps(const struct panel_clock *c) { return seg_ok(c) ? (double)c->info.jump_epoch : NAN; }
static double g_commits(const struct panel_clock *c) { return seg_ok(c) ? (double)c->info.commits : NAN; }
static double g_status_fail(const struct panel_clock *c) { return (double)c->status_failures; }
/*
 * The tick lateness as a Prometheus histogram. The daemon sends the
 * non-empty buckets of its log-linear histogram (latehist.h: 8 per power
 * of two) as [lowest ns, count]; every power of two from 2^3 ns is a bucket
 * edge there, so the cumulative counts at le = 2^k ns are exact. _sum is
 * not kept by the daemon: estimated from each bucket's midpoint (within
 * 6.25 %).
 */
static void lateness(struct sbuf *b, struct panel *p, const struct status_field *x)
{
	const char *name = x->metric;
	bool head = false;

	for (int i = 0; i < p->nclocks; i++) {
		const struct panel_clock *c = &p->clocks[i];
		const cJSON *t = sub(c, x->section), *pair;
		const cJSON *h = cJSON_GetObjectItemCaseSensitive(t, x->key);
		double total = 0, sum = 0;

		if (!cJSON_IsArray(h))
			continue;
		if (!head)
			sb_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, x->help, name);
		head = true;
		/* 1 us (2^10 ns) to 1.07 s (2^30 ns), by powers of four. */
		for (int k = 10; k <= 32; k += 2) {
			double le = (double)(1LL << k), n = 0;

			cJSON_ArrayForEach(pair, h)
				if (cJSON_GetArraySize(pair) == 2 &&
				    cJSON_GetArrayItem(pair, 0)->valuedouble < le)
					n += cJSON_GetArrayItem(pair, 1)->valuedouble;
			sb_printf(b, "%s_bucket{clock=\"", name);
			sb_label(b, c->name);
			sb_printf(b, "\",le=\"%.9g\"} %.17g\n", le / 1e9, n);
		}
		cJSON_ArrayForEach(pair, h) {
			double lo, n, w;

			if (cJSON_GetArraySize(pair) != 2)
				continue;
			lo = cJSON_GetArrayItem(pair, 0)->valuedouble;
			n = cJSON_GetArrayItem(pair, 1)->valuedouble;
			/* A bucket from 2^e on is 2^(e-3) wide; below 8 ns, 1. */
			w = lo < 8 ? 1 : exp2(floor(log2(lo)) - 3);
			total += n;
			sum += n * (lo + (w - 1) / 2);
		}
		sb_printf(b, "%s_bucket{clock=\"", name);
		sb_label(b, c->name);
		sb_printf(b, "\",le=\"+Inf\"} %.17g\n%s_sum{clock=\"", total, name);
		sb_label(b, c->name);
		sb_printf(b, "\"} %.17g\n%s_count{clock=\"", sum / 1e9, name);
		sb_label(b, c->name);
		sb_printf(b, "\"} %.17g\n", total);
	}
}

/* Per member of a clock (a lockstep participant, a leader's follower):
 * one family per figure, labelled @label with the member's @id key. */
static void members(struct sbuf *b, struct panel *p, const char *section, const char *array,
		    const char *label, const char *id, const char *name, const char *type,
		    const char *help, const char *key, double mul)
{
	bool head = false;

	for (int i = 0; i < p->nclocks; i++) {
		const cJSON *m, *ms = cJSON_GetObjectItemCaseSensitive(sub(&p->clocks[i], section),
									array);

		cJSON_ArrayForEach(m, ms) {
			const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, key);
			double x = cJSON_IsNumber(v) ? v->valuedouble : cJSON_IsBool(v) ? cJSON_IsTrue(v) : NAN;

			if (!isnan(x))
				sample(b, &head, name, type, help, p->clocks[i].name, label, str_of(m, id),
				       x * mul);
		}
	}
}

/* The arrays of members whose fields are metrics: the label each member's
 * samples carry, and the field that names it. */
static const struct {
	const char *rows, *object, *array, *label, *id;
} member_lists[] = {
	{ "lockstep.members[]", "lockstep", "members", "participant", "name" },
	{ "distribute.followers[]", "distribute", "followers", "follower", "id" },
};

/* The panel's own metrics: what it reads off the segment, and itself. */
static const struct {
	const char *name, *type, *help;
	getter get;
} own[] = {
	{ "shmclock_up", "gauge", "1 when the clock's daemon answered the panel's last status request.", g_up },
	{ "shmclock_readable", "gauge", "1 when the panel can read the clock's segment.", g_readable },
	{ "shmclock_simulated_time_seconds", "gauge", "Simulation time, read from the segment.", g_sim },
	{ "shmclock_scale", "gauge", "Nominal rate of simulation time to real time.", g_scale },
	{ "shmclock_realtime_factor", "gauge", "Simulation time per real time over the last second (panel's reads).", g_rtf },
	{ "shmclock_paused", "gauge", "1 while the clock is paused.", g_paused },
	{ "shmclock_stepped", "gauge", "1 while the clock moves in steps (no extrapolation).", g_stepped },
	{ "shmclock_stale", "gauge", "1 while what the clock follows is silent.", g_stale },
	{ "shmclock_initialized", "gauge", "1 once the clock has a time.", g_init },
	{ "shmclock_writer_alive", "gauge", "1 while the clock's writer lives.", g_alive },
	{ "shmclock_jumps_total", "counter", "Explicit jumps of the clock (its jump epoch).", g_jumps },
	{ "shmclock_commits_total", "counter", "Changes the writer published.", g_commits },
	{ "shmclock_panel_status_failures_total", "counter", "Status requests of the panel that got no valid reply.", g_status_fail },
};
#define EVENT_STREAMS_HELP "Event streams the panel serves now."
#define STR_(x) #x
#define STR(x) STR_(x)
#define NOT_SHOWN_HELP "Clocks found in /dev/shm past the panel's " STR(PANEL_CLOCKS_MAX) "."

static const char *metric_type(const struct status_field *x)
{
	return x->kind == SF_COUNT || x->kind == SF_BY ? "counter"
	       : x->kind == SF_HIST			? "histogram"
							: "gauge";
}

static double unit_mul(const struct status_field *x)
{
	return x->unit == SF_NS ? 1e-9 : x->unit == SF_US ? 1e-6 : 1;
}

/* A status field's value for one clock (NAN: absent): a number, a bool as
 * 1 or 0, a list's length. */
static double field_value(const struct panel_clock *c, const struct status_field *x)
{
	const cJSON *o = x->section[0] ? sub(c, x->section) : c->status;
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, x->key);

	if (x->kind == SF_LIST)
		return cJSON_IsArray(v) ? cJSON_GetArraySize(v) : NAN;
	if (cJSON_IsBool(v))
		return cJSON_IsTrue(v);
	return cJSON_IsNumber(v) ? v->valuedouble * unit_mul(x) : NAN;
}

/* An SF_BY field: one sample per key of its object, labelled with it. */
static void by_label(struct sbuf *b, struct panel *p, const struct status_field *x)
{
	bool head = false;

	for (int i = 0; i < p->nclocks; i++) {
		const cJSON *o = x->section[0] ? sub(&p->clocks[i], x->section) : p->clocks[i].status;
		const cJSON *v, *by = cJSON_GetObjectItemCaseSensitive(o, x->key);

		cJSON_ArrayForEach(v, by)
			if (cJSON_IsNumber(v))
				sample(b, &head, x->metric, metric_type(x), x->help, p->clocks[i].name,
				       SF_BY_LABEL, v->string, v->valuedouble);
	}
}

/* A field of each member of a list ("a.b[]"): labelled by member. */
static void member_field(struct sbuf *b, struct panel *p, const struct status_field *x)
{
	for (size_t k = 0; k < sizeof(member_lists) / sizeof(member_lists[0]); k++)
		if (!strcmp(member_lists[k].rows, x->section))
			members(b, p, member_lists[k].object, member_lists[k].array,
				member_lists[k].label, member_lists[k].id, x->metric, metric_type(x),
				x->help, x->key, unit_mul(x));
}

void panel_metric_list(void (*each)(const char *name, const char *type, const char *help,
				    void *arg),
		       void *arg)
{
	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		each(own[i].name, own[i].type, own[i].help, arg);
	for (size_t i = 0; i < STATUS_NFIELDS; i++)
		if (status_fields[i].metric)
			each(status_fields[i].metric, metric_type(&status_fields[i]),
			     status_fields[i].help, arg);
	each("shmclock_panel_event_streams", "gauge", EVENT_STREAMS_HELP, arg);
	each("shmclock_panel_clocks_not_shown", "gauge", NOT_SHOWN_HELP, arg);
}

char *panel_metrics(struct panel *p)
{
	struct sbuf b = { 0 };

	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		family(&b, p, own[i].name, own[i].type, own[i].help, own[i].get);
	/* From the status, as the table says (status_fields.h). */
	for (size_t i = 0; i < STATUS_NFIELDS; i++) {
		const struct status_field *x = &status_fields[i];
		size_t n = strlen(x->section);
		bool head = false;

		if (!x->metric)
			continue;
		if (x->kind == SF_HIST) {
			lateness(&b, p, x);
			continue;
		}
		if (x->kind == SF_BY) {
			by_label(&b, p, x);
			continue;
		}
		if (n > 2 && !strcmp(x->section + n - 2, "[]")) {
			member_field(&b, p, x);
			continue;
		}
		for (int k = 0; k < p->nclocks; k++) {
			double v = field_value(&p->clocks[k], x);

			if (!isnan(v))
				sample(&b, &head, x->metric, metric_type(x), x->help, p->clocks[k].name,
				       NULL, NULL, v);
		}
	}
	sb_printf(&b, "# HELP shmclock_panel_event_streams " EVENT_STREAMS_HELP "\n"
		      "# TYPE shmclock_panel_event_streams gauge\nshmclock_panel_event_streams %d\n",
		  p->streams);
	sb_printf(&b, "# HELP shmclock_panel_clocks_not_shown " NOT_SHOWN_HELP "\n"
		      "# TYPE shmclock_panel_clocks_not_shown gauge\n"
		      "shmclock_panel_clocks_not_shown %d\n",
		  p->not_shown);
	if (b.oom) {
		free(b.s);
		return NULL;
	}
	return b.s;
}
