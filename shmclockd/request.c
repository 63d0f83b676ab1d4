/* SPDX-License-Identifier: MIT */
/*
 * Requests and replies (request.h): what a control line asks, and the
 * reply assembled from each module's own part of status.
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shmclock/time.h>

#include "clockthread.h"
#include "duration.h"
#include "sat.h"
#include "request.h"
#include "ros2_glue.h"
#include "source.h"

static int bad(char *err, size_t errlen, const char *msg)
{
	snprintf(err, errlen, "%s", msg);
	return -EINVAL;
}

/* A time argument: a number of seconds or a string duration_parse/time_parse takes. */
static int arg_time(const cJSON *root, const char *key, int dates, int64_t *ns, char *err,
		    size_t errlen)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
	char why[200];

	if (cJSON_IsNumber(v)) {
		double d = v->valuedouble * 1e9;

		if (!isfinite(d) || fabs(d) > 9.2e18)
			return bad(err, errlen, "time out of range");
		*ns = (int64_t)llround(d);
		return 0;
	}
	if (!cJSON_IsString(v)) {
		snprintf(err, errlen, "\"%s\" is required: seconds or a string like \"1.5s\"", key);
		return -EINVAL;
	}
	if ((dates ? time_parse : duration_parse)(v->valuestring, ns, why, sizeof(why))) {
		snprintf(err, errlen, "%s: %s", key, why);
		return -EINVAL;
	}
	return 0;
}

/* A whole number from 0 to INT32_MAX: a JSON number or a decimal string. */
static int arg_count(const cJSON *v, int64_t *out)
{
	double d;

	if (cJSON_IsNumber(v))
		d = v->valuedouble;
	else if (!cJSON_IsString(v) || number_parse(v->valuestring, &d))
		return -EINVAL;
	if (!(d >= 0 && d <= INT32_MAX) || d != floor(d))
		return -EINVAL;
	*out = (int64_t)d;
	return 0;
}

int request_parse_arg(const cJSON *root, const struct proto_cmd *pc, const struct proto_arg *a,
		      struct proto_value *out, char *err, size_t errlen)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, a->key);
	char msg[256];
	int r = 0;

	switch (a->kind) {
	case PARG_SCALE:
		if (cJSON_IsString(v)) {
			if (number_parse(v->valuestring, &out->scale))
				out->scale = NAN;
		} else if (cJSON_IsNumber(v)) {
			out->scale = v->valuedouble;
		} else {
			out->scale = NAN;
		}
		if (!config_scale_ok(out->scale)) {
			snprintf(msg, sizeof(msg), "%s needs \"%s\": a number from %s to %s",
				 pc->name, a->key, SHMCLOCK__XSTR(CONFIG_SCALE_MIN),
				 SHMCLOCK__XSTR(CONFIG_SCALE_MAX));
			r = bad(err, errlen, msg);
		}
		break;
	case PARG_TIME:
		r = arg_time(root, a->key, 1, &out->ns, err, errlen);
		break;
	case PARG_DURATION:
		r = arg_time(root, a->key, 0, &out->ns, err, errlen);
		if (!r && out->ns < 0) {
			snprintf(msg, sizeof(msg), "%s takes a duration >= 0 (use set to go back)",
				 pc->name);
			r = bad(err, errlen, msg);
		}
		break;
	case PARG_WHO:
		if (!cJSON_IsString(v) || !v->valuestring[0] ||
		    strlen(v->valuestring) >= sizeof(out->who)) {
			snprintf(msg, sizeof(msg), "%s needs \"%s\": a participant's name (1 to %d bytes)",
				 pc->name, a->key, SHMCLOCK_LOCKSTEP_WHO_MAX);
			r = bad(err, errlen, msg);
			break;
		}
		snprintf(out->who, sizeof(out->who), "%s", v->valuestring);
		break;
	case PARG_COUNT:
		if (arg_count(v, &out->count)) {
			snprintf(msg, sizeof(msg), "%s needs \"%s\": a whole number from 0 to %d",
				 pc->name, a->key, INT32_MAX);
			r = bad(err, errlen, msg);
		}
		break;
	case PARG_NONE:
		break;
	}
	return r;
}

int request_parse(const char *line, size_t len, struct request *req, char *err, size_t errlen)
{
	const struct proto_cmd *pc;
	const cJSON *v, *cmd;
	char names[160], msg[256];
	cJSON *root;
	int r = 0;

	memset(req, 0, sizeof(*req));
	root = cJSON_ParseWithLength(line, len);
	if (!root)
		return bad(err, errlen, "malformed JSON (send one object per line)");
	if (!cJSON_IsObject(root)) {
		r = bad(err, errlen, "a request is a JSON object like {\"cmd\":\"status\"}");
		goto out;
	}
	v = cJSON_GetObjectItemCaseSensitive(root, "v");
	if (v && (!cJSON_IsNumber(v) || v->valuedouble != CONTROL_PROTOCOL)) {
		r = bad(err, errlen, "unsupported protocol version (this daemon speaks v 1)");
		goto out;
	}
	cmd = cJSON_GetObjectItemCaseSensitive(root, "cmd");
	if (!cJSON_IsString(cmd)) {
		snprintf(msg, sizeof(msg), "\"cmd\" is required: %s", proto_names(names, sizeof(names)));
		r = bad(err, errlen, msg);
		goto out;
	}
	pc = proto_find(cmd->valuestring);
	if (!pc) {
		snprintf(msg, sizeof(msg), "unknown command (known: %s)",
			 proto_names(names, sizeof(names)));
		r = bad(err, errlen, msg);
		goto out;
	}
	req->kind = pc->kind;
	/* In the table's order: the first argument in error is the one named. */
	for (size_t i = 0; i < pc->nargs && !r; i++)
		r = request_parse_arg(root, pc, &pc->args[i], &req->arg[i], err, errlen);
out:
	cJSON_Delete(root);
	return r;
}

void request_print_commands(FILE *f)
{
	fprintf(f, "%-9s %-30s %-13s %-31s %s\n", "COMMAND", "ARGUMENTS (NAME:KEY:KIND)",
		"CHANGES TIME", "MODES THAT TAKE IT", "PANEL");
	for (size_t i = 0; i < PROTO_NCMDS; i++) {
		const struct proto_cmd *pc = &proto_cmds[i];
		char args[160] = "-", modes[64] = "";
		size_t n = 0;

		for (size_t j = 0; j < pc->nargs && n < sizeof(args); j++)
			n += (size_t)snprintf(args + n, sizeof(args) - n, "%s%s:%s:%s", j ? "," : "",
					      pc->args[j].meta, pc->args[j].key,
					      proto_arg_kinds[pc->args[j].kind].name);
		n = 0;
		for (size_t m = 0; m < PMODE_N && n < sizeof(modes); m++)
			if (!pc->refused[m])
				n += (size_t)snprintf(modes + n, sizeof(modes) - n, "%s%s", n ? "," : "",
						      proto_mode_names[m]);
		fprintf(f, "%-9s %-30s %-13s %-31s %s\n", pc->name, args, pc->changes_time ? "yes" : "no",
			modes[0] ? modes : "-", pc->panel ? "yes" : "no");
	}
}

static char *finish(cJSON *o)
{
	char *s = cJSON_PrintUnformatted(o), *line;
	size_t n;

	cJSON_Delete(o);
	if (!s)
		return NULL;
	n = strlen(s);
	line = realloc(s, n + 2);
	if (!line) {
		free(s);
		return NULL;
	}
	line[n] = '\n';
	line[n + 1] = 0;
	return line;
}

char *request_reply_ok(const struct request_ctx *x, const shmclock_info_t *in)
{
	const struct shmclockd_config *cfg = x->cfg;
	cJSON *o = cJSON_CreateObject(), *st = cJSON_CreateObject();
	char buf[64];

	cJSON_AddNumberToObject(o, "v", CONTROL_PROTOCOL);
	cJSON_AddTrueToObject(o, "ok");
	cJSON_AddItemToObject(o, "status", st);
	cJSON_AddStringToObject(st, "name", cfg->name);
	cJSON_AddStringToObject(st, "source", cfg->source->name);
	cJSON_AddBoolToObject(st, "initialized", in->initialized);
	/* ns as a decimal string too: JSON numbers lose precision past 2^53. */
	snprintf(buf, sizeof(buf), "%lld", (long long)in->sim_ns);
	cJSON_AddStringToObject(st, "sim_ns", buf);
	cJSON_AddStringToObject(st, "sim", duration_format(in->sim_ns, buf, sizeof(buf)));
	cJSON_AddNumberToObject(st, "scale", in->scale);
	if (x->ct) {
		/* 0 until a second of running time. */
		double a = clockthread_scale_achieved(x->ct);

		if (a > 0)
			cJSON_AddNumberToObject(st, "scale_achieved", a);
	}
	cJSON_AddBoolToObject(st, "paused", in->paused);
	cJSON_AddBoolToObject(st, "stepped", in->stepped);
	cJSON_AddNumberToObject(st, "jump_epoch", (double)in->jump_epoch);
	cJSON_AddNumberToObject(st, "last_jump_ns", (double)in->last_jump_ns);
	if (in->has_unix_at_zero) {
		snprintf(buf, sizeof(buf), "%lld", (long long)in->unix_at_zero_ns);
		cJSON_AddStringToObject(st, "unix_at_zero_ns", buf);
		/* Saturated: StartTime near 2262 plus UnixTimeAtZero must not
		 * wrap to 1969. */
		cJSON_AddStringToObject(st, "sim_unix",
					time_format_iso(shmclock__sat_add(in->unix_at_zero_ns, in->sim_ns), buf,
							sizeof(buf)));
	}
	cJSON_AddNumberToObject(st, "publish_hz", cfg->hz);
	cJSON_AddNumberToObject(st, "writer_pid", in->writer_pid);
	cJSON_AddNumberToObject(st, "commits", (double)in->commits);
	/* Each module's own part. */
	if (x->ct)
		clockthread_status(x->ct, st, cfg, in);
	if (x->server_status)
		x->server_status(st, x->server);
	if (x->ros2)
		ros2_glue_status(x->ros2, x->ros2_api, cfg, st);
	return finish(o);
}

char *request_reply_error(const char *msg)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddNumberToObject(o, "v", CONTROL_PROTOCOL);
	cJSON_AddFalseToObject(o, "ok");
	cJSON_AddStringToObject(o, "error", msg);
	return finish(o);
}

int request_exec(const struct request_ctx *x, const struct request *req, shmclock_info_t *info,
		 char *err, size_t errlen)
{
	struct cmd cmd;
	int r;

	/* Status is read from the segment here, lock-free, as any reader
	 * would: a client polling status never wakes the clock thread. */
	if (req->kind == CMD_STATUS && x->view) {
		r = shmclock_info(x->view, info);
		if (r == 0 || r == -ESTALE)
			return 0;
	}
	memset(&cmd, 0, sizeof(cmd));
	cmd.req = *req;
	r = clockthread_submit(x->ct, &cmd);
	if (r) {
		snprintf(err, errlen, "%s", cmd.err);
		return r;
	}
	*info = cmd.info;
	return 0;
}
