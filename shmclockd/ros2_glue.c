/* SPDX-License-Identifier: MIT */
/* The daemon's side of ROS 2, with Cyclone DDS (ros2_glue.h). */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "ros2_glue.h"
#include "source.h"

/* The DDS domain: Ros2.Domain, else $ROS_DOMAIN_ID (as ROS 2 reads it),
 * else 0. Checked before the clock is touched. */
int ros2_glue_domain(struct shmclockd_config *cfg, char *err, size_t errlen)
{
	const char *env = getenv("ROS_DOMAIN_ID");
	char *end;

	if (cfg->ros2_domain < 0 && env && *env) {
		long d = strtol(env, &end, 10);

		if (*end || d < 0 || d > 232) {
			snprintf(err, errlen, "ROS_DOMAIN_ID must be a DDS domain id from 0 to 232, not '%.40s'",
				 env);
			return -EINVAL;
		}
		cfg->ros2_domain = (int)d;
	}
	if (cfg->ros2_domain < 0)
		cfg->ros2_domain = 0;
	return 0;
}

/* A /clock sample, through the clock thread (ros2_host.sample). */
static int ros2_sample(void *ctx, int64_t ns, char *err, size_t errlen)
{
	struct cmd cmd = { .req = { .kind = CMD_ADVANCE, .ns = ns }, .from_source = true };
	int r = clockthread_submit(ctx, &cmd);

	if (r)
		snprintf(err, errlen, "%s", cmd.err);
	return r;
}

/* A leader's function, through the clock thread (ros2_host.function):
 * queued there for its instant, or committed at once. The mode logs its
 * refusals (-EPROTO) itself, once per leader. */
static void dist_function(void *ctx, const struct dist_fn *f)
{
	struct cmd cmd = { .req.kind = CMD_FUNCTION, .arg_fn = f, .from_source = true };

	if (clockthread_submit(ctx, &cmd) && cmd.rc != -EPROTO)
		log_msg(LOG_WARN, "distribute: a function from %s refused: %s", f->leader, cmd.err);
}

/* A follower's acknowledgement, through the clock thread (ros2_host.ack). */
static void dist_ack(void *ctx, const struct dist_ack *a)
{
	struct cmd cmd = { .req.kind = CMD_ACK, .arg_ack = a, .from_source = true };

	clockthread_submit(ctx, &cmd);
}

/* The leader or /clock fell silent, or /clock speaks again. */
static void source_stale(void *ctx, bool stale)
{
	struct cmd cmd = { .req.kind = CMD_STALE, .arg_stale = stale, .from_source = true };

	if (clockthread_submit(ctx, &cmd))
		log_msg(LOG_WARN, "cannot mark the clock %s: %s", stale ? "stale" : "fresh", cmd.err);
}

/* Opens the DDS participant for the ros2 source and/or the /clock
 * publisher (the module is loaded already). */
int ros2_glue_open(const struct shmclockd_config *cfg, struct clockthread *ct,
		   const struct ros2_api *api, struct ros2 **out, char *err, size_t errlen)
{
	static struct ros2_host host;
	char why[400];
	int domain = cfg->ros2_domain, r;

	host = (struct ros2_host){ .ctx = ct, .sample = ros2_sample, .log = log_msg,
				   .function = dist_function, .stale = source_stale,
				   .ack = dist_ack,
				   .security = cfg->ros2_security[0] ? cfg->ros2_security : NULL };
	if ((r = api->open(out, domain, &host, why, sizeof(why))) ||
	    (cfg->ros2_publish && (r = api->publisher(*out, why, sizeof(why)))) ||
	    (cfg->dist_publish && !cfg->ls_participants && (r = api->dist_publisher(*out, config_dist_clock(cfg), why, sizeof(why))))) {
		snprintf(err, errlen, "ROS 2 (domain %d): %s", domain, why);
		api->close(*out);
		*out = NULL;
		return r < 0 ? r : -EIO;
	}
	log_msg(LOG_INFO, "ros2: domain %d%s%s%s%s", domain,
		cfg->source->ops->feed == FEED_ROS2 ? ", following /clock" : "",
		cfg->ros2_publish ? ", publishing /clock" : "",
		cfg->dist_publish ? ", publishing the time function" : "",
		cfg->source->ops->feed == FEED_LEADER ? ", following a leader's time function" : "");
	return 0;
}

int ros2_glue_load(const struct shmclockd_config *cfg, const struct ros2_api **api, char *err,
		   size_t errlen)
{
	*api = NULL;
	if (cfg->source->ops->feed != FEED_ROS2 && cfg->source->ops->feed != FEED_LEADER &&
	    !cfg->ros2_publish && !cfg->dist_publish)
		return 0;
	*api = ros2_load(err, errlen);
	return *api ? 0 : -ENOENT;
}

void ros2_glue_status(struct ros2 *r, const struct ros2_api *api, const struct shmclockd_config *cfg,
		      cJSON *st)
{
	struct ros2_stats rs;
	cJSON *t = cJSON_CreateObject();

	api->get_stats(r, &rs);
	cJSON_AddNumberToObject(t, "domain", rs.domain);
	cJSON_AddBoolToObject(t, "following", rs.following);
	cJSON_AddBoolToObject(t, "publishing", rs.publishing);
	if (rs.following) {
		cJSON_AddNumberToObject(t, "samples", (double)rs.samples);
		cJSON_AddNumberToObject(t, "rate_hz", rs.rate_hz);
		cJSON_AddNumberToObject(t, "last_sample_age_ns", (double)rs.last_age_ns);
		cJSON_AddBoolToObject(t, "stale", rs.stale);
	}
	if (rs.publishing) {
		cJSON_AddNumberToObject(t, "published", (double)rs.published);
		cJSON_AddNumberToObject(t, "publish_hz", cfg->ros2_hz);
	}
	if (rs.secured) {
		cJSON *peers = cJSON_AddArrayToObject(t, "security_refused_peers");

		cJSON_AddStringToObject(t, "security", cfg->ros2_security);
		cJSON_AddNumberToObject(t, "security_refused", (double)rs.sec_refused);
		for (int i = 0; i < rs.sec_npeers; i++) {
			cJSON *p = cJSON_CreateObject();

			cJSON_AddStringToObject(p, "peer", rs.sec_peers[i].peer);
			cJSON_AddNumberToObject(p, "count", (double)rs.sec_peers[i].count);
			cJSON_AddStringToObject(p, "why", rs.sec_peers[i].why);
			cJSON_AddItemToArray(peers, p);
		}
	}
	cJSON_AddItemToObject(st, "ros2", t);
}
