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

/* A number in the status (in object @obj, "" for the top level) or NAN. */
static double st_num(const struct panel_clock *c, const char *obj, const char *k)
{
	const cJSON *o = obj[0] ? sub(c, obj) : c->status;
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsNumber(v) ? v->valuedouble : NAN;
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
static double g_achieved(const struct panel_clock *c) { return st_num(c, "", "scale_achieved"); }
static double g_paused(const struct panel_clock *c) { return seg_ok(c) ? c->info.paused : NAN; }
static double g_stepped(const struct panel_clock *c) { return seg_ok(c) ? c->info.stepped : NAN; }
static double g_stale(const struct panel_clock *c) { return seg_ok(c) ? c->info.stale : NAN; }
static double g_init(const struct panel_clock *c) { return seg_ok(c) ? c->info.initialized : NAN; }
static double g_alive(const struct panel_clock *c) { return seg_ok(c) ? c->info.writer_alive : NAN; }
static double g_jumps(const struct panel_clock *c) { return seg_ok(c) ? (double)c->info.jump_epoch : NAN; }
static double g_commits(const struct panel_clock *c) { return seg_ok(c) ? (double)c->info.commits : NAN; }
static double g_status_fail(const struct panel_clock *c) { return (double)c->status_failures; }
static double g_ticks(const struct panel_clock *c) { return st_num(c, "ticks", "count"); }
static double g_skipped(const struct panel_clock *c) { return st_num(c, "ticks", "skipped"); }
static double g_ctl_answered(const struct panel_clock *c) { return st_num(c, "control", "answered"); }
static double g_ctl_errors(const struct panel_clock *c) { return st_num(c, "control", "errors"); }
static double g_ctl_refused(const struct panel_clock *c) { return st_num(c, "control", "refused"); }
static double g_ctl_dropped(const struct panel_clock *c) { return st_num(c, "control", "dropped"); }
static double g_ctl_clients(const struct panel_clock *c) { return st_num(c, "control", "clients"); }
static double g_ls_steps(const struct panel_clock *c) { return st_num(c, "lockstep", "advances"); }
static double g_ls_deaths(const struct panel_clock *c) { return st_num(c, "lockstep", "deaths"); }
static double g_ls_stalls(const struct panel_clock *c) { return st_num(c, "lockstep", "stalls"); }
static double g_ls_running(const struct panel_clock *c)
{
	return sub(c, "lockstep") ? bool_of(sub(c, "lockstep"), "running") : NAN;
}
static double g_ls_members(const struct panel_clock *c)
{
	const cJSON *t = sub(c, "lockstep");

	return t ? cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(t, "members")) : NAN;
}
static double g_ls_required(const struct panel_clock *c)
{
	return st_num(c, "lockstep", "participants_required");
}
static double g_d_changes(const struct panel_clock *c) { return st_num(c, "distribute", "changes"); }
static double g_d_late(const struct panel_clock *c) { return st_num(c, "distribute", "late_changes"); }
static double g_d_leaders(const struct panel_clock *c) { return st_num(c, "distribute", "leaders"); }
static double g_d_lost(const struct panel_clock *c) { return st_num(c, "distribute", "lost"); }
static double g_d_received(const struct panel_clock *c) { return st_num(c, "distribute", "received"); }
static double g_d_sent(const struct panel_clock *c) { return st_num(c, "distribute", "sent"); }
static double g_d_reanchors(const struct panel_clock *c) { return st_num(c, "distribute", "reanchors"); }
static double g_d_worst(const struct panel_clock *c)
{
	return st_num(c, "distribute", "worst_late_ns") / 1e9;
}
static double g_d_applied(const struct panel_clock *c)
{
	return st_num(c, "distribute", "applied_p99_ns") / 1e9;
}
static double g_d_age(const struct panel_clock *c)
{
	return st_num(c, "distribute", "last_message_age_ns") / 1e9;
}
static double g_d_term(const struct panel_clock *c) { return st_num(c, "distribute", "term"); }
static double g_d_postponed(const struct panel_clock *c) { return st_num(c, "distribute", "postponed"); }
static double g_d_lost_f(const struct panel_clock *c) { return st_num(c, "distribute", "lost_followers"); }
static double g_d_holds(const struct panel_clock *c) { return st_num(c, "distribute", "holds"); }
static double g_d_lead(const struct panel_clock *c)
{
	return st_num(c, "distribute", "lead_current_ns") / 1e9;
}
static double g_d_ack99(const struct panel_clock *c)
{
	return st_num(c, "distribute", "ack_p99_ns") / 1e9;
}
static double g_d_commit99(const struct panel_clock *c)
{
	return st_num(c, "distribute", "commit_p99_ns") / 1e9;
}
static double g_d_followers(const struct panel_clock *c)
{
	const cJSON *d = sub(c, "distribute");
	const cJSON *f = d ? cJSON_GetObjectItemCaseSensitive(d, "followers") : NULL;

	return cJSON_IsArray(f) ? cJSON_GetArraySize(f) : NAN;
}
static double g_d_conflicts(const struct panel_clock *c) { return st_num(c, "distribute", "conflicts"); }
static double g_d_refused(const struct panel_clock *c) { return st_num(c, "distribute", "refused"); }
static double g_d_queued(const struct panel_clock *c) { return st_num(c, "distribute", "queued"); }
static double g_d_conflict(const struct panel_clock *c)
{
	return sub(c, "distribute") ? bool_of(sub(c, "distribute"), "conflict") : NAN;
}
static double g_d_disagree(const struct panel_clock *c)
{
	return sub(c, "distribute") ? bool_of(sub(c, "distribute"), "clocks_disagree") : NAN;
}
static double g_d_offset(const struct panel_clock *c)
{
	return st_num(c, "distribute", "host_offset_ns") / 1e9;
}
static double g_d_stale(const struct panel_clock *c)
{
	return sub(c, "distribute") ? bool_of(sub(c, "distribute"), "stale") : NAN;
}
static double g_d_await(const struct panel_clock *c)
{
	const cJSON *d = sub(c, "distribute");

	return d && cJSON_GetObjectItemCaseSensitive(d, "awaiting_echo") ? bool_of(d, "awaiting_echo")
									  : NAN;
}
static double g_d_lease_exp(const struct panel_clock *c)
{
	return st_num(c, "distribute", "lease_expired");
}

/*
 * The tick lateness as a Prometheus histogram. The daemon sends the
 * non-empty buckets of its log-linear histogram (latehist.h: 8 per power
 * of two) as [lowest ns, count]; every power of two from 2^3 ns is a bucket
 * edge there, so the cumulative counts at le = 2^k ns are exact. _sum is
 * not kept by the daemon: estimated from each bucket's midpoint (within
 * 6.25 %).
 */
static void lateness(struct sbuf *b, struct panel *p)
{
	const char *name = "shmclock_tick_lateness_seconds";
	bool head = false;

	for (int i = 0; i < p->nclocks; i++) {
		const struct panel_clock *c = &p->clocks[i];
		const cJSON *t = sub(c, "ticks"), *pair;
		const cJSON *h = cJSON_GetObjectItemCaseSensitive(t, "late_hist");
		double total = 0, sum = 0;

		if (!cJSON_IsArray(h))
			continue;
		if (!head)
			sb_printf(b, "# HELP %s How late the daemon's clock thread ran its ticks.\n"
				     "# TYPE %s histogram\n", name, name);
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

static void participants(struct sbuf *b, struct panel *p, const char *name, const char *type,
			 const char *help, const char *key, double mul)
{
	members(b, p, "lockstep", "members", "participant", "name", name, type, help, key, mul);
}

static void followers(struct sbuf *b, struct panel *p, const char *name, const char *type,
		      const char *help, const char *key, double mul)
{
	members(b, p, "distribute", "followers", "follower", "id", name, type, help, key, mul);
}

char *panel_metrics(struct panel *p)
{
	static const struct {
		const char *name, *type, *help;
		getter get;
	} fams[] = {
		{ "shmclock_up", "gauge", "1 when the clock's daemon answered the panel's last status request.", g_up },
		{ "shmclock_readable", "gauge", "1 when the panel can read the clock's segment.", g_readable },
		{ "shmclock_simulated_time_seconds", "gauge", "Simulation time, read from the segment.", g_sim },
		{ "shmclock_scale", "gauge", "Nominal rate of simulation time to real time.", g_scale },
		{ "shmclock_realtime_factor", "gauge", "Simulation time per real time over the last second (panel's reads).", g_rtf },
		{ "shmclock_achieved_scale", "gauge", "Rate the daemon achieved (its own estimate).", g_achieved },
		{ "shmclock_paused", "gauge", "1 while the clock is paused.", g_paused },
		{ "shmclock_stepped", "gauge", "1 while the clock moves in steps (no extrapolation).", g_stepped },
		{ "shmclock_stale", "gauge", "1 while what the clock follows is silent.", g_stale },
		{ "shmclock_initialized", "gauge", "1 once the clock has a time.", g_init },
		{ "shmclock_writer_alive", "gauge", "1 while the clock's writer lives.", g_alive },
		{ "shmclock_jumps_total", "counter", "Explicit jumps of the clock (its jump epoch).", g_jumps },
		{ "shmclock_commits_total", "counter", "Changes the writer published.", g_commits },
		{ "shmclock_ticks_total", "counter", "Ticks of the daemon's clock thread.", g_ticks },
		{ "shmclock_ticks_skipped_total", "counter", "Ticks skipped because the clock thread ran late.", g_skipped },
		{ "shmclock_control_requests_total", "counter", "Control requests the daemon answered ok.", g_ctl_answered },
		{ "shmclock_control_errors_total", "counter", "Control requests the daemon answered with an error.", g_ctl_errors },
		{ "shmclock_control_refusals_total", "counter", "Control connections refused (peer credentials).", g_ctl_refused },
		{ "shmclock_control_dropped_total", "counter", "Control connections dropped (idle, oversized, not reading).", g_ctl_dropped },
		{ "shmclock_control_clients", "gauge", "Control connections open now.", g_ctl_clients },
		{ "shmclock_panel_status_failures_total", "counter", "Status requests of the panel that got no valid reply.", g_status_fail },
		{ "shmclock_lockstep_running", "gauge", "1 once every required participant joined.", g_ls_running },
		{ "shmclock_lockstep_participants", "gauge", "Lockstep participants now.", g_ls_members },
		{ "shmclock_lockstep_participants_required", "gauge", "Participants the clock waits for before it starts.", g_ls_required },
		{ "shmclock_lockstep_steps_total", "counter", "Lockstep advances of the clock.", g_ls_steps },
		{ "shmclock_lockstep_deaths_total", "counter", "Participants that died without leaving.", g_ls_deaths },
		{ "shmclock_lockstep_stalls_total", "counter", "Participants evicted for holding the clock too long.", g_ls_stalls },
		{ "shmclock_hosts_changes_total", "counter", "Changes of the time function led or followed.", g_d_changes },
		{ "shmclock_hosts_late_changes_total", "counter", "Follower: changes that arrived after their instant.", g_d_late },
		{ "shmclock_hosts_worst_late_seconds", "gauge", "Follower: the latest a change arrived after its instant.", g_d_worst },
		{ "shmclock_hosts_applied_p99_seconds", "gauge", "How long after their instant changes were committed (p99).", g_d_applied },
		{ "shmclock_hosts_leaders_total", "counter", "Follower: leaders followed so far.", g_d_leaders },
		{ "shmclock_hosts_messages_received_total", "counter", "Follower: messages received from the leader.", g_d_received },
		{ "shmclock_hosts_messages_lost_total", "counter", "Follower: messages lost.", g_d_lost },
		{ "shmclock_hosts_messages_sent_total", "counter", "Leader: messages sent.", g_d_sent },
		{ "shmclock_hosts_reanchors_total", "counter", "Host clock steps the time function was re-anchored for.", g_d_reanchors },
		{ "shmclock_hosts_last_message_age_seconds", "gauge", "Follower: since the leader's last message.", g_d_age },
		{ "shmclock_hosts_stale", "gauge", "Follower: 1 while its clock is stale (the leader silent or lost, its lease not echoed yet).", g_d_stale },
		{ "shmclock_hosts_awaiting_echo", "gauge", "Follower: 1 while it waits for the leader to echo its lease (not waited for yet: stale).", g_d_await },
		{ "shmclock_hosts_lease_expired_total", "counter", "Follower: leases run out (stopped, or its leases not echoed).", g_d_lease_exp },
		{ "shmclock_hosts_followers", "gauge", "Leader: followers that acknowledge its changes (members).", g_d_followers },
		{ "shmclock_hosts_ack_p99_seconds", "gauge", "Leader: from announcing a change to its last acknowledgement (p99).", g_d_ack99 },
		{ "shmclock_hosts_commit_p99_seconds", "gauge", "Leader: from a client's change to its commit (p99).", g_d_commit99 },
		{ "shmclock_hosts_lead_seconds", "gauge", "Leader: the adaptive Lead now.", g_d_lead },
		{ "shmclock_hosts_postponed_total", "counter", "Leader: changes postponed for a missing acknowledgement.", g_d_postponed },
		{ "shmclock_hosts_followers_lost_total", "counter", "Leader: followers declared lost.", g_d_lost_f },
		{ "shmclock_hosts_holds_total", "counter", "Follower: instants held waiting for a commit.", g_d_holds },
		{ "shmclock_hosts_term", "gauge", "The leader's term (led, or followed).", g_d_term },
		{ "shmclock_hosts_conflict", "gauge", "1 while two live leaders publish this clock.", g_d_conflict },
		{ "shmclock_hosts_conflicts_total", "counter", "Conflicts between leaders seen so far.", g_d_conflicts },
		{ "shmclock_hosts_refused_total", "counter", "Follower: changes refused (absurd instants, heartbeats, rates, functions).", g_d_refused },
		{ "shmclock_hosts_queued_changes", "gauge", "Changes waiting for their instant now.", g_d_queued },
		{ "shmclock_hosts_clocks_disagree", "gauge", "Follower: 1 while this host's clock is off the leader's by more than the bound.", g_d_disagree },
		{ "shmclock_hosts_host_offset_seconds", "gauge", "Follower: this host's clock minus the leader's, as measured.", g_d_offset },
	};
	struct sbuf b = { 0 };

	for (size_t i = 0; i < sizeof(fams) / sizeof(fams[0]); i++)
		family(&b, p, fams[i].name, fams[i].type, fams[i].help, fams[i].get);
	lateness(&b, p);
	participants(&b, p, "shmclock_lockstep_grants_total", "counter",
		     "Grants the participant made.", "grants", 1);
	participants(&b, p, "shmclock_lockstep_participant_steps_total", "counter",
		     "Returns from advance at the participant's grant.", "steps", 1);
	participants(&b, p, "shmclock_lockstep_working_seconds_total", "counter",
		     "Real time the participant spent working (from a return to its next grant).",
		     "work_s", 1);
	participants(&b, p, "shmclock_lockstep_waiting_seconds_total", "counter",
		     "Real time the participant spent waiting (from a grant to the return).",
		     "wait_s", 1);
	participants(&b, p, "shmclock_lockstep_last_to_grant_total", "counter",
		     "Advances for which the participant's grant came last.", "last_to_grant", 1);
	participants(&b, p, "shmclock_lockstep_holding", "gauge",
		     "1 while the clock waits for this participant.", "holding", 1);
	followers(&b, p, "shmclock_hosts_follower_late_changes_total", "counter",
		  "Leader: a follower's changes committed after their instant, as it reports them.",
		  "late_changes", 1);
	followers(&b, p, "shmclock_hosts_follower_refused_total", "counter",
		  "Leader: samples a follower refused, as it reports them.", "refused", 1);
	followers(&b, p, "shmclock_hosts_follower_last_ack_seconds", "gauge",
		  "Leader: how long a follower's last acknowledgement took.", "last_ack_ns", 1e-9);
	sb_printf(&b, "# HELP shmclock_panel_event_streams Event streams the panel serves now.\n"
		      "# TYPE shmclock_panel_event_streams gauge\nshmclock_panel_event_streams %d\n",
		  p->streams);
	sb_printf(&b, "# HELP shmclock_panel_clocks_not_shown Clocks found in /dev/shm past the "
		      "panel's %d.\n# TYPE shmclock_panel_clocks_not_shown gauge\n"
		      "shmclock_panel_clocks_not_shown %d\n",
		  PANEL_CLOCKS_MAX, p->not_shown);
	if (b.oom) {
		free(b.s);
		return NULL;
	}
	return b.s;
}
