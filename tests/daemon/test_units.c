/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the daemon's modules, linked against the internal daemon
 * library (libshmclockd-core) and libshmclock/common: the config parser,
 * the control request parser and its command table, the duration and time
 * parsers. The fuzzers
 * check they never crash and always answer one line; these check that they
 * answer right.
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <ctype.h>
#include <errno.h>
#include <string.h>

#include <shmclock/shmclock.h>

#include "command.h"
#include "config.h"
#include "request.h"
#include "duration.h"
#include "source.h"

#define SEC 1000000000LL
#define MS 1000000LL

static int load(const char *text, struct shmclockd_config *c, char *err, size_t n)
{
	config_defaults(c);
	return config_load_text("test.json", text, strlen(text), c, err, n);
}

TestSuite(units, .timeout = 30);

Test(units, config_defaults_are_the_documented_ones)
{
	struct shmclockd_config c;

	config_defaults(&c);
	cr_expect_str_eq(c.name, "default");
	cr_expect_eq(c.scale, 1.0);
	cr_expect_eq(c.hz, 100);
	cr_expect_eq(c.source->id, SHMCLOCK_SOURCE_SIMULATION);
	cr_expect_not(c.paused);
	cr_expect_eq(c.segment_mode, 0644u);
}

Test(units, config_reads_every_kind_of_value)
{
	struct shmclockd_config c;
	char err[256] = "";

	cr_assert_eq(load("{\"Name\":\"sim1\",\"TimeSource\":\"fixed\",\"TimeScale\":2.5,"
			  "\"PublishHz\":250,\"StartTime\":\"1.5s\",\"Paused\":true,\"StepNs\":4000000,"
			  "\"UnixTimeAtZero\":\"2030-01-01T00:00:00Z\",\"ControlIdleTimeout\":\"10s\"}",
			  &c, err, sizeof(err)),
		     0, "%s", err);
	cr_expect_str_eq(c.name, "sim1");
	cr_expect_eq(c.source->id, SHMCLOCK_SOURCE_FIXED);
	cr_expect_eq(c.scale, 2.5);
	cr_expect_eq(c.hz, 250);
	cr_expect(c.has_start);
	cr_expect_eq(c.start_ns, 1500 * MS);
	cr_expect(c.paused);
	cr_expect_eq(c.step_ns, 4 * MS);
	cr_expect(c.has_unix_zero);
	cr_expect_eq(c.unix_zero_ns, 1893456000LL * SEC);
	cr_expect_eq(c.control_idle_ns, 10 * SEC);
}

Test(units, config_errors_name_the_key_and_leave_one_line)
{
	static const struct {
		const char *text, *want;
	} bad[] = {
		{ "{\"TimeScale\":0}", "TimeScale" },
		{ "{\"TimeScale\":\"fast\"}", "TimeScale" },
		{ "{\"PublishHz\":20000}", "PublishHz" },
		{ "{\"TimeSource\":\"sundial\"}", "TimeSource" },
		{ "{\"Name\":\"a/b\"}", "Name" },
		{ "{\"StartTime\":\"yesterday\"}", "StartTime" },
		{ "{\"Bogus\":1}", "Bogus" },
		{ "{\"TimeScale\":1,\"TimeScale\":2}", "TimeScale" },
		{ "{\"TimeScale\":1} trailing", "" },
		{ "[1,2]", "" },
	};
	struct shmclockd_config c;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char err[512] = "";

		cr_expect_neq(load(bad[i].text, &c, err, sizeof(err)), 0, "accepted: %s", bad[i].text);
		cr_expect(strstr(err, bad[i].want) != NULL, "'%s': the error '%s' does not name %s",
			  bad[i].text, err, bad[i].want);
		cr_expect(err[0] && !strchr(err, '\n'), "'%s': not one line: '%s'", bad[i].text, err);
	}
}

Test(units, control_requests_parse_to_their_command)
{
	struct request r;
	char err[256] = "";

	cr_assert_eq(request_parse("{\"v\":1,\"cmd\":\"pause\"}", 21, &r, err, sizeof(err)),
		     0, "%s", err);
	cr_expect_eq(r.kind, CMD_PAUSE);
	{
		const char *l = "{\"v\":1,\"cmd\":\"scale\",\"value\":0.5}";

		cr_assert_eq(request_parse(l, strlen(l), &r, err, sizeof(err)), 0, "%s", err);
		cr_expect_eq(r.kind, CMD_SCALE);
		cr_expect_eq(r.scale, 0.5);
	}
	{
		const char *l = "{\"v\":1,\"cmd\":\"set\",\"time\":\"90s\"}";

		cr_assert_eq(request_parse(l, strlen(l), &r, err, sizeof(err)), 0, "%s", err);
		cr_expect_eq(r.kind, CMD_SET);
		cr_expect_eq(r.ns, 90 * SEC);
	}
}

Test(units, numbers_are_decimal_as_documented)
{
	static const struct {
		const char *text;
		double value;
	} ok[] = { { "2", 2 }, { "0.5", 0.5 }, { " 1e3 ", 1e3 }, { "-1.5E-2", -1.5e-2 },
		   { ".5", 0.5 }, { "+3", 3 }, { "7.", 7 } };
	static const char *const bad[] = { "", " ", "0x10", "0X1p4", "inf", "nan", "1e", "e5",
					   "1.2.3", "2 x", ".", "-", "1e+", "١" };
	double v;

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		cr_assert_eq(number_parse(ok[i].text, &v), 0, "'%s' refused", ok[i].text);
		cr_expect_eq(v, ok[i].value, "'%s': %g", ok[i].text, v);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(number_parse(bad[i], &v), -EINVAL, "'%s' accepted as %g", bad[i], v);
}

Test(units, bad_control_requests_are_refused_with_one_line)
{
	static const char *const bad[] = {
		"",
		"not json",
		"{\"v\":2,\"cmd\":\"pause\"}",
		"{\"v\":1,\"cmd\":\"explode\"}",
		"{\"v\":1,\"cmd\":\"scale\"}",
		"{\"v\":1,\"cmd\":\"scale\",\"value\":-1}",
		"{\"v\":1,\"cmd\":\"set\",\"time\":\"soon\"}",
		"{\"v\":1,\"cmd\":\"step\",\"duration\":\"-1s\"}",
		/* Numbers as documented (decimal), not all strtod() takes
		 * (issue 52): "0x10" was 16. */
		"{\"v\":1,\"cmd\":\"scale\",\"value\":\"0x10\"}",
		"{\"v\":1,\"cmd\":\"scale\",\"value\":\"0x1p1\"}",
		"{\"v\":1,\"cmd\":\"scale\",\"value\":\"infinity\"}",
		"{\"v\":1,\"cmd\":\"scale\",\"value\":\"2x\"}",
		"{\"v\":1,\"cmd\":\"scale\",\"value\":\"e3\"}",
	};
	struct request r;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char err[256] = "";

		cr_expect_eq(request_parse(bad[i], strlen(bad[i]), &r, err, sizeof(err)),
			     -EINVAL, "accepted: %s", bad[i]);
		cr_expect(err[0] && !strchr(err, '\n'), "'%s': '%s'", bad[i], err);
	}
}

Test(units, durations_and_times_parse_and_format_back)
{
	static const struct {
		const char *text;
		long long ns;
	} ok[] = {
		{ "1.5s", 1500 * MS }, { "250ms", 250 * MS }, { "2", 2 * SEC },
		{ "1m", 60 * SEC },    { "10us", 10000 },     { "0", 0 },
	};
	char err[256], buf[64];
	int64_t ns;

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		cr_assert_eq(duration_parse(ok[i].text, &ns, err, sizeof(err)), 0, "%s: %s",
			     ok[i].text, err);
		cr_expect_eq(ns, ok[i].ns, "%s", ok[i].text);
		cr_assert_eq(duration_parse(duration_format(ns, buf, sizeof(buf)), &ns, err,
					    sizeof(err)),
			     0, "%s does not read back", buf);
		cr_expect_eq(ns, ok[i].ns, "%s read back as %lld", buf, (long long)ns);
	}
	cr_expect_neq(duration_parse("fast", &ns, err, sizeof(err)), 0);
	cr_expect_neq(duration_parse("1.5parsecs", &ns, err, sizeof(err)), 0);
	cr_assert_eq(time_parse("2030-01-01T00:00:00Z", &ns, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(ns, 1893456000LL * SEC);
	cr_expect_str_eq(time_format_iso(ns, buf, sizeof(buf)), "2030-01-01T00:00:00.000000000Z");
}

#ifdef SHMCLOCK_HAVE_ROS2
Test(units, distribute_config_reads_and_refuses_with_one_line)
{
	static const struct {
		const char *text, *want;
	} bad[] = {
		{ "{\"Distribute\":{\"Lead\":\"-1ms\"}}", "Lead" },
		{ "{\"Distribute\":{\"Lead\":\"2s\"}}", "Lead" },
		{ "{\"Distribute\":{\"Heartbeat\":\"10ms\"}}", "Heartbeat" },
		{ "{\"Distribute\":{\"OnLeaderLoss\":\"panic\"}}", "OnLeaderLoss" },
		{ "{\"Distribute\":{\"OnSlow\":\"lose\"}}", "OnSlow" },
		{ "{\"Distribute\":{\"OnSlow\":0}}", "OnSlow" },
		{ "{\"Distribute\":{\"OnSlow\":2.5}}", "OnSlow" },
		{ "{\"Distribute\":{\"OnSlow\":33}}", "OnSlow" },
		{ "{\"Distribute\":{\"OnSlow\":1e20}}", "OnSlow" },
		{ "{\"Distribute\":{\"Clock\":\"a b\"}}", "Clock" },
		{ "{\"Distribute\":{\"Publish\":1}}", "Publish" },
		{ "{\"Distribute\":{\"Pub\":true}}", "Pub" },
		{ "{\"Distribute\":true}", "Distribute" },
		{ "{\"Ros2\":{\"Security\":5}}", "Security" },
		{ "{\"Ros2\":{\"Security\":\"\"}}", "Security" },
	};
	static const struct {
		const char *text, *want;
	} invalid[] = {
		{ "{\"TimeSource\":\"leader\",\"Distribute\":{\"Publish\":true}}", "no relays" },
		{ "{\"TimeSource\":\"fixed\",\"Distribute\":{\"Publish\":true}}", "continuous" },
		/* An enclave for a daemon that uses no DDS: not secured, said. */
		{ "{\"Ros2\":{\"Security\":\"/etc/keys/a\"}}", "no DDS to secure" },
	};
	struct shmclockd_config c;
	char err[512] = "";

	cr_assert_eq(load("{\"TimeSource\":\"leader\",\"Distribute\":{\"Clock\":\"w\",\"Lead\":\"3ms\","
			  "\"Heartbeat\":\"1s\",\"StaleAfter\":\"2s\",\"OnLeaderLoss\":\"run\","
			  "\"OnSlow\":3}}",
			  &c, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(c.source->id, SHMCLOCK_SOURCE_LEADER);
	cr_expect_str_eq(config_dist_clock(&c), "w");
	cr_expect_str_eq(c.ros2_security, "", "no DDS Security unless asked");
	cr_expect_eq(c.dist_lead_ns, 3 * MS);
	cr_expect_eq(c.dist_hb_ns, SEC);
	cr_expect_eq(c.dist_stale_ns, 2 * SEC);
	cr_expect(c.dist_run_on_loss);
	cr_expect_eq(c.dist_on_slow, 3);
	cr_expect_eq(config_validate(&c, err, sizeof(err)), 0, "%s", err);
	config_defaults(&c);
	cr_expect_eq(c.dist_on_slow, 0, "OnSlow defaults to wait");
	cr_expect_eq(c.dist_lead_ns, 5 * MS, "Lead defaults to 5 ms");
	cr_expect_eq(c.dist_hb_ns, 200 * MS, "heartbeats default to 5 a second");
	cr_expect_str_eq(config_dist_clock(&c), "default", "the wire name defaults to Name");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		cr_expect_neq(load(bad[i].text, &c, err, sizeof(err)), 0, "accepted: %s", bad[i].text);
		cr_expect(strstr(err, bad[i].want) != NULL, "'%s': '%s' does not name %s", bad[i].text,
			  err, bad[i].want);
		cr_expect(err[0] && !strchr(err, '\n'), "'%s': not one line: '%s'", bad[i].text, err);
	}
	for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++) {
		err[0] = 0;
		cr_assert_eq(load(invalid[i].text, &c, err, sizeof(err)), 0, "%s", err);
		cr_expect_neq(config_validate(&c, err, sizeof(err)), 0, "valid: %s", invalid[i].text);
		cr_expect(strstr(err, invalid[i].want) != NULL, "'%s': '%s'", invalid[i].text, err);
	}
}
#endif

/* Issue 53: a leader between hosts counts every host's participants, more
 * than one host's 64 slots; any other clock is refused more than those. */
Test(units, lockstep_participants_beyond_one_host)
{
	static const char *const leader = "{\"TimeSource\":\"fixed\",\"Lockstep\":{\"Participants\":%d},"
					  "\"Distribute\":{\"Publish\":true,\"Clock\":\"w\"}}";
	static const char *const others[] = {
		"{\"TimeSource\":\"fixed\",\"Lockstep\":{\"Participants\":65}}",
		"{\"TimeSource\":\"leader\",\"Lockstep\":{\"Participants\":65},\"Distribute\":{\"Clock\":\"w\"}}",
	};
	struct shmclockd_config c;
	char err[512] = "", text[256];

	snprintf(text, sizeof(text), leader, 200);
	cr_assert_eq(load(text, &c, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(c.ls_participants, 200);
	cr_expect_eq(config_validate(&c, err, sizeof(err)), 0, "a leader of 200: %s", err);
	snprintf(text, sizeof(text), leader, CONFIG_LOCKSTEP_HOSTS_MAX + 1);
	cr_expect_neq(load(text, &c, err, sizeof(err)), 0, "accepted: %s", text);
	cr_expect(strstr(err, "2112") != NULL, "'%s'", err);
	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
		err[0] = 0;
		cr_assert_eq(load(others[i], &c, err, sizeof(err)), 0, "%s", err);
		cr_expect_neq(config_validate(&c, err, sizeof(err)), 0, "valid: %s", others[i]);
		cr_expect(strstr(err, "64 participant slots") != NULL && !strchr(err, '\n'), "'%s': '%s'",
			  others[i], err);
	}
}

/* Issue 30: the stall policy and the horizon, and what lockstep refuses. */
Test(units, lockstep_stall_keys_and_their_refusals)
{
	static const struct { const char *text, *want; } bad[] = {
		{ "{\"TimeSource\":\"fixed\",\"Lockstep\":{\"Participants\":1,\"EvictAfter\":\"-1s\"}}", "EvictAfter" },
		{ "{\"TimeSource\":\"fixed\",\"Lockstep\":{\"Participants\":1,\"EvictAfter\":0}}", "EvictAfter" },
		{ "{\"TimeSource\":\"fixed\",\"Lockstep\":{\"Participants\":1,\"OnStall\":\"shrug\"}}", "OnStall" },
		{ "{\"TimeSource\":\"fixed\",\"Lockstep\":{\"Participants\":1,\"OnStall\":1}}", "OnStall" },
		{ "{\"TimeSource\":\"fixed\",\"Lockstep\":{\"Participants\":1,\"MaxGrantAhead\":\"0s\"}}", "MaxGrantAhead" },
		{ "{\"TimeSource\":\"fixed\",\"Lockstep\":{\"Participants\":1,\"MaxGrantAhead\":true}}", "MaxGrantAhead" },
	};
	static const struct { const char *text, *want; } invalid[] = {
		{ "{\"TimeSource\":\"fixed\",\"Lockstep\":{\"Participants\":1,\"OnStall\":\"evict\"}}", "EvictAfter" },
		{ "{\"TimeSource\":\"fixed\",\"Lockstep\":{\"Participants\":1,\"OnStall\":\"abort\"}}", "EvictAfter" },
		{ "{\"TimeSource\":\"fixed\",\"Lockstep\":{\"Participants\":1,\"OnStall\":\"wait\",\"EvictAfter\":\"1s\"}}", "nothing" },
	};
	struct shmclockd_config c;
	char err[512] = "";

	config_defaults(&c);
	cr_expect_eq(c.ls_max_ahead_ns, 86400 * SEC, "one day");
	cr_expect_eq(config_stall_policy(&c), STALL_WAIT, "as before: wait");
	cr_assert_eq(load("{\"TimeSource\":\"fixed\",\"Lockstep\":{\"Participants\":2,\"EvictAfter\":\"500ms\","
			  "\"MaxGrantAhead\":\"1h\"}}", &c, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(c.ls_evict_ns, 500 * MS);
	cr_expect_eq(c.ls_max_ahead_ns, 3600 * SEC);
	cr_expect_eq(config_stall_policy(&c), STALL_EVICT, "EvictAfter alone evicts");
	cr_expect_eq(config_validate(&c, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(load("{\"TimeSource\":\"fixed\",\"Lockstep\":{\"Participants\":2,\"EvictAfter\":\"2s\","
			  "\"OnStall\":\"abort\"}}", &c, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(config_stall_policy(&c), STALL_ABORT);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		cr_expect_neq(load(bad[i].text, &c, err, sizeof(err)), 0, "accepted: %s", bad[i].text);
		cr_expect(strstr(err, bad[i].want) != NULL, "'%s': '%s'", bad[i].text, err);
		cr_expect(err[0] && !strchr(err, '\n'), "not one line: '%s'", err);
	}
	for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++) {
		err[0] = 0;
		cr_assert_eq(load(invalid[i].text, &c, err, sizeof(err)), 0, "%s", err);
		cr_expect_neq(config_validate(&c, err, sizeof(err)), 0, "valid: %s", invalid[i].text);
		cr_expect(strstr(err, invalid[i].want) != NULL, "'%s': '%s'", invalid[i].text, err);
	}
}

Test(units, evict_takes_a_participants_name)
{
	struct request r;
	char err[256];
	const char *l = "{\"v\":1,\"cmd\":\"evict\",\"who\":\"caf\\u00e9\"}";

	cr_assert_eq(request_parse(l, strlen(l), &r, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(r.kind, CMD_EVICT);
	cr_expect_str_eq(r.who, "caf\xc3\xa9");
	l = "{\"v\":1,\"cmd\":\"evict\"}";
	cr_expect_neq(request_parse(l, strlen(l), &r, err, sizeof(err)), 0);
	cr_expect(strstr(err, "participant's name"), "%s", err);
	l = "{\"v\":1,\"cmd\":\"evict\",\"who\":\"\"}";
	cr_expect_neq(request_parse(l, strlen(l), &r, err, sizeof(err)), 0);
	l = "{\"v\":1,\"cmd\":\"evict\",\"who\":7}";
	cr_expect_neq(request_parse(l, strlen(l), &r, err, sizeof(err)), 0);
	l = "{\"v\":1,\"cmd\":\"evict\",\"who\":\"a-name-that-is-longer-than-sixty-four-bytes-which-is-the-limit-xx\"}";
	cr_expect_neq(request_parse(l, strlen(l), &r, err, sizeof(err)), 0);
}

/*
 * The config's table (config.c) says each thing once, and what it says
 * agrees with itself: every key has a help line and a unique name in its
 * section, a ranged key's message names its range (min and max are what the
 * parser checks, expect is what a refusal says), and the parser refuses
 * just past each end and takes each end.
 */
Test(units, the_config_table_agrees_with_itself)
{
	for (size_t i = 0; i < config_nkeys; i++) {
		const struct config_key *k = &config_keys[i];
		char path[64], lo[32], hi[32];

		config_key_path(k, path, sizeof(path));
		cr_expect(k->help && k->help[0], "%s has no help line", path);
		cr_expect_eq(config_key_find(k->section, k->name), k, "%s is in the table twice", path);
		if (k->kind == KEY_SECTION)
			cr_expect_not_null(k->expect, "section %s has no example", path);
		if (k->kind != KEY_INT && !(k->kind == KEY_TIME && k->max))
			continue;
		cr_assert_not_null(k->expect, "%s has a range but no message for it", path);
		if (k->kind == KEY_INT) {
			snprintf(lo, sizeof(lo), "%g", k->min);
			snprintf(hi, sizeof(hi), "%g", k->max);
			cr_expect(strstr(k->expect, lo) && strstr(k->expect, hi),
				  "%s: range %s to %s, but its message says \"%s\"", path, lo, hi, k->expect);
		} else {
			/* "a duration from 100ms (...) to 24h": the words after
			 * "from" and "to", read as durations. */
			const char *f = strstr(k->expect, "from "), *t = f ? strstr(f, " to ") : NULL;
			int64_t a = -1, b = -1;
			char why[128];

			cr_assert(f && t, "%s: its message \"%s\" names no range", path, k->expect);
			sscanf(f + 5, "%31[^ )]", lo);
			sscanf(t + 4, "%31[^ )]", hi);
			cr_expect(!duration_parse(lo, &a, why, sizeof(why)) && a == (int64_t)k->min &&
					  !duration_parse(hi, &b, why, sizeof(why)) && b == (int64_t)k->max,
				  "%s: range %.0f to %.0f ns, but its message says \"%s\"", path, k->min, k->max,
				  k->expect);
		}
		/* The parser holds each end, and the messages past them. */
		if (k->kind == KEY_INT && !k->section) {
			struct shmclockd_config c;
			char text[128], err[512];

			snprintf(text, sizeof(text), "{ \"%s\": %g }", k->name, k->min);
			cr_expect_eq(load(text, &c, err, sizeof(err)), 0, "%s: %s", text, err);
			snprintf(text, sizeof(text), "{ \"%s\": %g }", k->name, k->max);
			cr_expect_eq(load(text, &c, err, sizeof(err)), 0, "%s: %s", text, err);
			snprintf(text, sizeof(text), "{ \"%s\": %g }", k->name, k->max + 1);
			cr_expect_eq(load(text, &c, err, sizeof(err)), -EINVAL, "%s taken", text);
			cr_expect(strstr(err, k->expect), "%s: %s", text, err);
		}
	}
}

/*
 * The control protocol's table (protocol.h) says each thing once, and what
 * it says holds together: a command is at its kind's index, named once;
 * each argument has a kind, a key no other argument of the command (nor
 * the protocol's own "v" and "cmd") uses, and an upper-case name for
 * shmclockctl; every command is taken by some mode and says why where it
 * is not; a command that changes time is refused by a follower (else the
 * follower leaves its leader's time).
 */
Test(units, the_command_table_agrees_with_itself)
{
	cr_assert_eq(sizeof(proto_cmds) / sizeof(proto_cmds[0]), CMD_NKINDS);
	for (size_t i = 0; i < CMD_NKINDS; i++) {
		const struct proto_cmd *pc = &proto_cmds[i];
		bool taken = false;

		cr_expect_eq((size_t)pc->kind, i, "%s is not at its kind's index", pc->name);
		cr_expect_eq(proto_cmd_of(pc->kind), pc, "%s", pc->name);
		cr_expect(pc->help && pc->help[0], "%s has no help line", pc->name);
		cr_expect(pc->name && pc->name[0] && pc->options, "command %zu has no name", i);
		for (size_t j = 0; j < i; j++)
			cr_expect_str_neq(proto_cmds[j].name, pc->name, "%s is in the table twice",
					  pc->name);
		/* Only the protocol's own are found by name. */
		cr_expect_eq(proto_find(pc->name), i < PROTO_NCMDS ? pc : NULL, "%s", pc->name);
		cr_expect_leq(pc->nargs, PROTO_ARGS_MAX, "%s: too many arguments", pc->name);
		for (size_t a = 0; a < pc->nargs && a < PROTO_ARGS_MAX; a++) {
			const struct proto_arg *x = &pc->args[a];

			cr_expect_neq(x->kind, PARG_NONE, "%s: argument %zu has no kind", pc->name, a);
			cr_assert(x->key && x->key[0] && x->meta && x->meta[0], "%s: argument %zu",
				  pc->name, a);
			cr_expect(strcmp(x->key, "v") && strcmp(x->key, "cmd"), "%s: key %s", pc->name,
				  x->key);
			for (size_t b = 0; b < a; b++)
				cr_expect_str_neq(pc->args[b].key, x->key, "%s: key %s twice", pc->name,
						  x->key);
			for (const char *m = x->meta; *m; m++)
				cr_expect(isupper((unsigned char)*m), "%s: name %s", pc->name, x->meta);
		}
		for (size_t m = 0; m < PMODE_N; m++) {
			taken |= !pc->refused[m];
			cr_expect(!pc->refused[m] || pc->refused[m][0], "%s: an empty refusal", pc->name);
		}
		cr_expect(taken, "%s is taken by no mode", pc->name);
		if (pc->changes_time)
			cr_expect_not_null(pc->refused[PMODE_FOLLOWER],
					   "%s changes time but a follower takes it", pc->name);
		cr_expect(!pc->panel || i < PROTO_NCMDS, "%s: the panel serves the daemon's own", pc->name);
	}
}

/* Every command of the table parses from a request with its arguments
 * under their keys (each kind's example value), into its kind and its
 * arguments in order; without any one of them it is refused, naming that
 * argument's key. */
Test(units, every_command_parses_with_its_arguments_and_not_without)
{
	for (size_t i = 0; i < PROTO_NCMDS; i++) {
		const struct proto_cmd *pc = &proto_cmds[i];

		for (size_t drop = 0; drop <= pc->nargs; drop++) {
			cJSON *o = cJSON_CreateObject();
			struct request r;
			char err[256] = "", *line;
			int rc;

			cJSON_AddNumberToObject(o, "v", CONTROL_PROTOCOL);
			cJSON_AddStringToObject(o, "cmd", pc->name);
			for (size_t a = 0; a < pc->nargs; a++)
				if (a != drop)
					cJSON_AddStringToObject(o, pc->args[a].key,
								proto_arg_kinds[pc->args[a].kind].example);
			line = cJSON_PrintUnformatted(o);
			cJSON_Delete(o);
			cr_assert_not_null(line);
			rc = request_parse(line, strlen(line), &r, err, sizeof(err));
			if (drop == pc->nargs) {
				cr_expect_eq(rc, 0, "%s: %s", line, err);
				cr_expect_eq(r.kind, pc->kind, "%s", line);
			} else {
				char key[64];

				snprintf(key, sizeof(key), "\"%s\"", pc->args[drop].key);
				cr_expect_eq(rc, -EINVAL, "%s: accepted", line);
				cr_expect(strstr(err, key), "%s: the error '%s' does not name %s", line, err,
					  key);
			}
			free(line);
		}
	}
}

/* Arguments land in the request in the table's order, and the named fields
 * the commands of one argument read are the first one's. */
Test(units, arguments_land_in_order)
{
	static const struct proto_cmd two = {
		.name = "two", .nargs = 2,
		.args = { PROTO_ARG(PARG_DURATION, "duration", "DURATION"),
			  PROTO_ARG(PARG_COUNT, "count", "COUNT") },
	};
	cJSON *o = cJSON_Parse("{\"duration\":\"2s\",\"count\":5}");
	struct request r;
	char err[256] = "";

	memset(&r, 0, sizeof(r));
	for (size_t a = 0; a < two.nargs; a++)
		cr_assert_eq(request_parse_arg(o, &two, &two.args[a], &r.arg[a], err, sizeof(err)), 0,
			     "%s", err);
	cr_expect_eq(r.arg[0].ns, 2 * SEC);
	cr_expect_eq(r.arg[1].count, 5);
	cr_expect_eq(r.ns, 2 * SEC, "req.ns is not the first argument's");
	cJSON_Delete(o);
	{
		const char *l = "{\"v\":1,\"cmd\":\"evict\",\"who\":\"p7\"}";

		cr_assert_eq(request_parse(l, strlen(l), &r, err, sizeof(err)), 0, "%s", err);
		cr_expect_str_eq(r.arg[0].who, "p7");
		cr_expect_str_eq(r.who, "p7");
	}
}

/* A count: a whole number from 0 to 2^31 - 1, as a JSON number or a
 * decimal string; anything else is refused naming the command and key. */
Test(units, a_count_is_a_whole_number)
{
	static const struct proto_cmd cmd = { .name = "nudge", .nargs = 1,
					      .args = { PROTO_ARG(PARG_COUNT, "count", "COUNT") } };
	static const struct {
		const char *json;
		int64_t want; /* -1: refused */
	} cases[] = {
		{ "{\"count\":0}", 0 },		  { "{\"count\":3}", 3 },
		{ "{\"count\":\"42\"}", 42 },	  { "{\"count\":2147483647}", 2147483647 },
		{ "{\"count\":2147483648}", -1 }, { "{\"count\":-1}", -1 },
		{ "{\"count\":1.5}", -1 },	  { "{\"count\":\"x\"}", -1 },
		{ "{\"count\":true}", -1 },	  { "{}", -1 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cJSON *o = cJSON_Parse(cases[i].json);
		struct proto_value v = { 0 };
		char err[256] = "";
		int rc = request_parse_arg(o, &cmd, &cmd.args[0], &v, err, sizeof(err));

		if (cases[i].want < 0) {
			cr_expect_eq(rc, -EINVAL, "%s: accepted as %lld", cases[i].json, (long long)v.count);
			cr_expect(strstr(err, "nudge needs \"count\""), "%s: '%s'", cases[i].json, err);
		} else {
			cr_expect_eq(rc, 0, "%s: %s", cases[i].json, err);
			cr_expect_eq(v.count, cases[i].want, "%s", cases[i].json);
		}
		cJSON_Delete(o);
	}
}

/* What each mode refuses outright, with the words it used before the table
 * said it (clockthread.c, mode_lockstep.c), and what changes time (a
 * leader schedules it, a follower refuses it): the columns change no reply
 * of the commands there were. */
Test(units, the_commands_there_were_keep_their_modes_and_words)
{
	static const char follows[] = "this clock follows a leader on another host: change time "
				      "there (status shows which)";
	static const char evict[] = "evict is for a lockstep clock (shmclockd --lockstep N)";
	static const char no_leader[] = "this clock follows no leader";
	static const char no_followers[] = "this clock leads no followers";
	static const struct {
		enum cmd_kind k;
		bool changes_time;
		const char *want[PMODE_N]; /* plain, lockstep, leader, follower */
	} rows[] = {
		{ CMD_STATUS, false, { NULL, NULL, NULL, NULL } },
		{ CMD_PAUSE, true, { NULL, NULL, NULL, follows } },
		{ CMD_RESUME, true, { NULL, NULL, NULL, follows } },
		{ CMD_SCALE, true,
		  { NULL, "in lockstep the participants' grants set the pace (MaxScale limits it)", NULL,
		    follows } },
		{ CMD_SET, true,
		  { NULL, "set is refused in lockstep: the participants' grants move time (pause, then step)",
		    NULL, follows } },
		{ CMD_STEP, true, { NULL, NULL, NULL, follows } },
		{ CMD_ADVANCE, false, { NULL, NULL, NULL, follows } },
		{ CMD_EVICT, false, { evict, NULL, evict, evict } },
		{ CMD_RELOAD, false, { NULL, NULL, NULL, NULL } },
		{ CMD_INIT, false, { NULL, NULL, NULL, NULL } },
		{ CMD_FUNCTION, false, { no_leader, no_leader, NULL, NULL } },
		{ CMD_STALE, false, { NULL, NULL, NULL, NULL } },
		{ CMD_ACK, false, { no_followers, no_followers, NULL, NULL } },
		{ CMD_STOP, false, { NULL, NULL, NULL, NULL } },
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const char *name = proto_cmd_of(rows[i].k)->name;

		cr_expect_eq(cmd_changes_time(rows[i].k), rows[i].changes_time, "%s", name);
		for (size_t m = 0; m < PMODE_N; m++) {
			const char *got = cmd_refused(rows[i].k, (enum proto_mode)m);

			if (!rows[i].want[m])
				cr_expect_null(got, "%s in %s: refused: %s", name, proto_mode_names[m], got);
			else
				cr_expect(got && !strcmp(got, rows[i].want[m]), "%s in %s: '%s'", name,
					  proto_mode_names[m], got ? got : "(taken)");
		}
	}
}
