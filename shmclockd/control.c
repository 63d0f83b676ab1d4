/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <math.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <shmclock/lockstep.h>
#include <shmclock/time.h>

#include "control.h"
#include "ros2.h"
#include "duration.h"
#include "log.h"
#include "source.h"


static int64_t sat_add(int64_t a, int64_t b)
{
	int64_t r;

	if (__builtin_add_overflow(a, b, &r))
		return b > 0 ? INT64_MAX : INT64_MIN;
	return r;
}

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

int control_parse_request(const char *line, size_t len, struct request *req, char *err,
			  size_t errlen)
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
	switch (pc->arg) {
	case PARG_SCALE:
		v = cJSON_GetObjectItemCaseSensitive(root, pc->key);
		if (cJSON_IsString(v)) {
			char *end;

			req->scale = strtod(v->valuestring, &end);
			if (end == v->valuestring || *end)
				req->scale = NAN;
		} else if (cJSON_IsNumber(v)) {
			req->scale = v->valuedouble;
		} else {
			req->scale = NAN;
		}
		if (!config_scale_ok(req->scale)) {
			snprintf(msg, sizeof(msg), "%s needs \"%s\": a number from 1e-6 to 1e6",
				 pc->name, pc->key);
			r = bad(err, errlen, msg);
		}
		break;
	case PARG_TIME:
		r = arg_time(root, pc->key, 1, &req->ns, err, errlen);
		break;
	case PARG_DURATION:
		r = arg_time(root, pc->key, 0, &req->ns, err, errlen);
		if (!r && req->ns < 0) {
			snprintf(msg, sizeof(msg), "%s takes a duration >= 0 (use set to go back)",
				 pc->name);
			r = bad(err, errlen, msg);
		}
		break;
	case PARG_WHO:
		v = cJSON_GetObjectItemCaseSensitive(root, pc->key);
		if (!cJSON_IsString(v) || !v->valuestring[0] ||
		    strlen(v->valuestring) >= sizeof(req->who)) {
			snprintf(msg, sizeof(msg), "%s needs \"%s\": a participant's name (1 to 64 bytes)",
				 pc->name, pc->key);
			r = bad(err, errlen, msg);
			break;
		}
		snprintf(req->who, sizeof(req->who), "%s", v->valuestring);
		break;
	case PARG_NONE:
		break;
	}
out:
	cJSON_Delete(root);
	return r;
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

/* The clock thread's ticks: counts, lateness quantiles, and the non-empty
 * buckets ([lowest ns, count] pairs) so a client can diff two replies. */
static void add_ticks(cJSON *st, const struct clockthread *ct)
{
	uint64_t counts[LATEHIST_N];
	cJSON *t = cJSON_CreateObject(), *hist = cJSON_CreateArray();
	int64_t worst;

	latehist_copy(&ct->lateness, counts);
	/* Relaxed: statistics, nothing is ordered by them. */
	cJSON_AddNumberToObject(t, "count",
				(double)atomic_load_explicit(&ct->ticks, memory_order_relaxed));
	cJSON_AddNumberToObject(t, "skipped",
				(double)atomic_load_explicit(&ct->late_ticks, memory_order_relaxed));
	/* A quantile is its bucket's upper bound, which may exceed the exact
	 * maximum in that bucket: capped there (status once showed p99 1.835 ms
	 * above a max of 1.706 ms). */
	worst = atomic_load_explicit(&ct->worst_lateness_ns, memory_order_relaxed);
	cJSON_AddNumberToObject(t, "late_p50_ns", (double)latehist_quantile_max(counts, 0.5, worst));
	cJSON_AddNumberToObject(t, "late_p99_ns", (double)latehist_quantile_max(counts, 0.99, worst));
	cJSON_AddNumberToObject(t, "late_p999_ns",
				(double)latehist_quantile_max(counts, 0.999, worst));
	cJSON_AddNumberToObject(t, "late_max_ns", (double)worst);
	for (int i = 0; i < LATEHIST_N; i++) {
		if (counts[i]) {
			cJSON *pair = cJSON_CreateArray();

			cJSON_AddItemToArray(pair, cJSON_CreateNumber((double)latehist_lo(i)));
			cJSON_AddItemToArray(pair, cJSON_CreateNumber((double)counts[i]));
			cJSON_AddItemToArray(hist, pair);
		}
	}
	cJSON_AddItemToObject(t, "late_hist", hist);
	cJSON_AddItemToObject(st, "ticks", t);
}

static void add_control(cJSON *st, const struct control *c)
{
	cJSON *t = cJSON_CreateObject();
	int n = 0;

	for (int i = 0; i < CONTROL_CLIENTS_MAX; i++)
		n += c->clients[i].fd >= 0;
	cJSON_AddNumberToObject(t, "answered", (double)c->served);
	cJSON_AddNumberToObject(t, "errors", (double)c->errors);
	cJSON_AddNumberToObject(t, "refused", (double)c->refused);
	cJSON_AddNumberToObject(t, "dropped", (double)c->dropped);
	cJSON_AddNumberToObject(t, "evicted", (double)c->evicted);
	cJSON_AddNumberToObject(t, "clients", n);
	cJSON_AddNumberToObject(t, "fd_exhausted", (double)c->fd_exhausted);
	cJSON_AddItemToObject(st, "control", t);
}

/* A member's own figures (it writes them in the participants' segment). */
static void add_figures(cJSON *m, struct clockthread *ct, unsigned slot, uint64_t *most,
			const char **most_who, const char *who)
{
	struct shmclock_lockstep_stats s;

	if (shmclock_lockstep_host_stats(ct->ls_host, slot, &s))
		return;
	cJSON_AddNumberToObject(m, "grants", (double)s.grants);
	cJSON_AddNumberToObject(m, "steps", (double)s.steps);
	cJSON_AddNumberToObject(m, "last_to_grant", (double)s.last_to_grant);
	cJSON_AddNumberToObject(m, "work_s", (double)s.work_ns / 1e9);
	cJSON_AddNumberToObject(m, "wait_s", (double)s.wait_ns / 1e9);
	cJSON_AddNumberToObject(m, "work_p50_us", (double)s.work_p50_ns / 1e3);
	cJSON_AddNumberToObject(m, "work_p99_us", (double)s.work_p99_ns / 1e3);
	cJSON_AddNumberToObject(m, "wait_p50_us", (double)s.wait_p50_ns / 1e3);
	cJSON_AddNumberToObject(m, "wait_p99_us", (double)s.wait_p99_ns / 1e3);
	if (s.working_for_ns)
		cJSON_AddNumberToObject(m, "working_for_s", (double)s.working_for_ns / 1e9);
	if (s.last_to_grant > *most) {
		*most = s.last_to_grant;
		*most_who = who;
	}
}

/* "lockstep": what the clock waits for, and who. */
static void add_lockstep(cJSON *st, struct clockthread *ct, const struct shmclockd_config *cfg,
			 int64_t sim)
{
	struct shmclock_lockstep_participant p[SHMCLOCK_LOCKSTEP_SLOTS];
	unsigned n = shmclock_lockstep_host_list(ct->ls_host, p, SHMCLOCK_LOCKSTEP_SLOTS);
	cJSON *t = cJSON_CreateObject(), *a = cJSON_CreateArray();
	int64_t mono = shmclock_steady_now().ns;
	uint64_t deaths = atomic_load_explicit(&ct->ls_deaths, memory_order_acquire);
	char buf[64];

	bool running = atomic_load_explicit(&ct->ls_started, memory_order_acquire);
	uint64_t most = 0;
	const char *most_who = NULL;

	cJSON_AddNumberToObject(t, "participants_required", cfg->ls_participants);
	cJSON_AddBoolToObject(t, "running", running);
	if (running) {
		/* Since the clock started: steps/s and the real-time factor (the
		 * acquire above pairs with the clock thread's release). */
		double secs = (double)(mono - atomic_load_explicit(&ct->ls_run_mono,
								    memory_order_relaxed)) / 1e9;

		if (secs > 0) {
			cJSON_AddNumberToObject(t, "steps_per_s",
						(double)atomic_load_explicit(&ct->ls_advances,
									     memory_order_relaxed) / secs);
			cJSON_AddNumberToObject(t, "realtime_factor",
						(double)(sim - atomic_load_explicit(&ct->ls_run_sim,
										    memory_order_relaxed)) /
							1e9 / secs);
		}
	}
	if (cfg->ls_max_scale > 0)
		cJSON_AddNumberToObject(t, "max_scale", cfg->ls_max_scale);
	cJSON_AddStringToObject(t, "on_death", cfg->ls_abort ? "abort" : "evict");
	cJSON_AddStringToObject(t, "on_stall", config_on_stall_name(config_stall_policy(cfg)));
	if (cfg->ls_evict_ns)
		cJSON_AddStringToObject(t, "evict_after", duration_format(cfg->ls_evict_ns, buf, sizeof(buf)));
	cJSON_AddStringToObject(t, "max_grant_ahead", duration_format(cfg->ls_max_ahead_ns, buf, sizeof(buf)));
	cJSON_AddNumberToObject(t, "advances",
				(double)atomic_load_explicit(&ct->ls_advances, memory_order_relaxed));
	cJSON_AddNumberToObject(t, "deaths", (double)deaths);
	cJSON_AddNumberToObject(t, "stalls",
				(double)atomic_load_explicit(&ct->ls_stalls, memory_order_relaxed));
	/* The records the clock thread may be rewriting (a second death):
	 * under its lock, copied whole. */
	pthread_mutex_lock(&ct->ls_rec_lock);
	if (deaths) {
		cJSON_AddStringToObject(t, "last_death", ct->ls_dead);
		snprintf(buf, sizeof(buf), "%lld", (long long)ct->ls_dead_grant);
		cJSON_AddStringToObject(t, "last_death_grant_ns", buf);
		snprintf(buf, sizeof(buf), "%lld", (long long)ct->ls_dead_clock);
		cJSON_AddStringToObject(t, "last_death_clock_ns", buf);
		snprintf(buf, sizeof(buf), "%lld", (long long)ct->ls_dead_mono);
		cJSON_AddStringToObject(t, "last_death_found_mono_ns", buf);
	}
	if (ct->ls_stalled[0])
		cJSON_AddStringToObject(t, "last_eviction", ct->ls_stalled);
	pthread_mutex_unlock(&ct->ls_rec_lock);
	cJSON_AddBoolToObject(t, "aborted", atomic_load_explicit(&ct->ls_aborted, memory_order_relaxed));
	for (unsigned i = 0; i < n && i < SHMCLOCK_LOCKSTEP_SLOTS; i++) {
		cJSON *m = cJSON_CreateObject();

		cJSON_AddStringToObject(m, "name", p[i].who);
		cJSON_AddNumberToObject(m, "pid", p[i].pid);
		snprintf(buf, sizeof(buf), "%lld", (long long)p[i].grant_ns);
		cJSON_AddStringToObject(m, "grant_ns", buf);
		cJSON_AddStringToObject(m, "grant", duration_format(p[i].grant_ns, buf, sizeof(buf)));
		snprintf(buf, sizeof(buf), "%lld", (long long)p[i].joined_sim_ns);
		cJSON_AddStringToObject(m, "joined_ns", buf);
		cJSON_AddBoolToObject(m, "holding", p[i].grant_ns <= sim);
		if (p[i].holding_since_ns && p[i].grant_ns <= sim)
			cJSON_AddNumberToObject(m, "holding_for_s",
						(double)(mono - p[i].holding_since_ns) / 1e9);
		add_figures(m, ct, p[i].slot, &most, &most_who, p[i].who);
		cJSON_AddItemToArray(a, m);
	}
	if (most_who)
		cJSON_AddStringToObject(t, "last_to_grant_most", most_who);
	cJSON_AddItemToObject(t, "members", a);
	cJSON_AddItemToObject(st, "lockstep", t);
}

char *control_reply_ok(const struct control *c, const shmclock_info_t *in)
{
	const struct shmclockd_config *cfg = c->cfg;
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
	if (c->ct) {
		/* Relaxed: a statistic. 0 until a second of running time. */
		double a = atomic_load_explicit(&c->ct->achieved_scale, memory_order_relaxed);

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
					time_format_iso(sat_add(in->unix_at_zero_ns, in->sim_ns), buf,
							sizeof(buf)));
	}
	cJSON_AddNumberToObject(st, "publish_hz", cfg->hz);
	cJSON_AddNumberToObject(st, "writer_pid", in->writer_pid);
	cJSON_AddNumberToObject(st, "commits", (double)in->commits);
	if (c->ct)
		add_ticks(st, c->ct);
	if (c->ct && c->ct->ls_host)
		add_lockstep(st, c->ct, cfg, in->sim_ns);
	add_control(st, c);
	if (c->ct && c->ct->dist) {
		cJSON *t = cJSON_CreateObject();

		dist_status(c->ct, t);
		cJSON_AddItemToObject(st, "distribute", t);
	}
	if (c->ct)
		cJSON_AddBoolToObject(st, "stale", atomic_load_explicit(&c->ct->stale,
									memory_order_relaxed));
	if (c->ros2) {
		struct ros2_stats rs;
		cJSON *t = cJSON_CreateObject();

		c->ros2_api->get_stats(c->ros2, &rs);
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
		cJSON_AddItemToObject(st, "ros2", t);
	}
	return finish(o);
}

char *control_reply_error(const char *msg)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddNumberToObject(o, "v", CONTROL_PROTOCOL);
	cJSON_AddFalseToObject(o, "ok");
	cJSON_AddStringToObject(o, "error", msg);
	return finish(o);
}

/* Is uid allowed to control the clock? Root, our own user, and members of
 * ControlGroup when one is configured. */
static int allowed(const struct control *c, uid_t uid, gid_t gid)
{
	if (uid == 0 || uid == geteuid())
		return 1;
	if (c->cfg->has_group) {
		struct passwd *pw;
		gid_t groups[256];
		int n = 256;

		if (gid == c->cfg->group)
			return 1;
		pw = getpwuid(uid);
		if (pw && getgrouplist(pw->pw_name, pw->pw_gid, groups, &n) >= 0)
			for (int i = 0; i < n; i++)
				if (groups[i] == c->cfg->group)
					return 1;
	}
	return 0;
}

/* Never blocks the daemon: a client that does not read its replies is
 * dropped once its socket buffer is full. */
static int send_line(int fd, const char *line)
{
	size_t n = strlen(line);
	ssize_t w = send(fd, line, n, MSG_NOSIGNAL | MSG_DONTWAIT);

	return w == (ssize_t)n ? 0 : -1;
}

static int stale_socket(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), r;

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	r = connect(fd, (struct sockaddr *)&a, sizeof(a));
	r = r < 0 && errno == ECONNREFUSED;
	close(fd);
	return r;
}

int control_open(struct control *c, const char *path, const struct shmclockd_config *cfg,
		 struct clockthread *ct, char *err, size_t errlen)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	char dir[108], *slash;
	struct stat st;
	int fd, r;

	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->spare_fd = -1;
	c->ct = ct;
	c->cfg = cfg;
	for (int i = 0; i < CONTROL_CLIENTS_MAX; i++)
		c->clients[i].fd = -1;
	if (strlen(path) >= sizeof(a.sun_path)) {
		snprintf(err, errlen, "control socket path too long: %s", path);
		return -ENAMETOOLONG;
	}
	snprintf(c->path, sizeof(c->path), "%s", path);
	/* Our runtime directory: created owner-only (group-searchable for
	 * ControlGroup). An existing one is used as it is. */
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = 0;
		if (mkdir(dir, cfg->has_group ? 0750 : 0700) == 0 && cfg->has_group &&
		    chown(dir, (uid_t)-1, cfg->group) < 0)
			log_msg(LOG_WARN, "chown %s: %s", dir, strerror(errno));
		/* Somebody who can write the directory can swap our socket for
		 * theirs: it must be ours (or root's), and writable by nobody
		 * else unless sticky (as /tmp). Catches a /tmp/shmclock-UID
		 * planted by another user before we first ran. */
		if (stat(dir, &st) < 0) {
			snprintf(err, errlen, "control socket directory %s: %s", dir, strerror(errno));
			return -errno;
		}
		const char *why = !S_ISDIR(st.st_mode) ? "is not a directory"
				  : st.st_uid != geteuid() && st.st_uid != 0 ? "belongs to another user"
				  : (st.st_mode & 022) && !(st.st_mode & S_ISVTX) ? "is writable by others"
				  : NULL;

		if (why) {
			snprintf(err, errlen,
				 "control socket directory %s %s (uid %u, mode %04o): refusing to put "
				 "the socket there (remove it, or set --socket)",
				 dir, why, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
			return -EPERM;
		}
	}
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen, "%s exists and is not a socket: refusing to replace it", path);
			return -EEXIST;
		}
		if (!stale_socket(path)) {
			snprintf(err, errlen, "%s is in use by another live daemon", path);
			return -EADDRINUSE;
		}
		unlink(path);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		goto fail;
	memcpy(a.sun_path, path, strlen(path) + 1);
	/* Bind with a tight umask so the socket is never briefly world-open. */
	{
		mode_t old = umask(0177);

		r = bind(fd, (struct sockaddr *)&a, sizeof(a));
		umask(old);
	}
	if (r < 0)
		goto fail;
	if (cfg->has_group && (chown(path, (uid_t)-1, cfg->group) < 0 || chmod(path, 0660) < 0))
		goto fail;
	if (listen(fd, 16) < 0)
		goto fail;
	c->fd = fd;
	c->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	/* Without it, status goes through the clock thread as other requests. */
	if (shmclock_open(cfg->name, &c->view) < 0)
		log_msg(LOG_DEBUG, "control: no read-only view of '%s': status via the clock thread",
			cfg->name);
	return 0;
fail:
	r = -errno;
	snprintf(err, errlen, "control socket %s: %s", path, strerror(errno));
	if (fd >= 0)
		close(fd);
	return r;
}

int control_pollfds(struct control *c, struct pollfd *fds, int max)
{
	int n = 0;

	/* A paused listener is polled as "nothing" (fd -1) so the indexes
	 * stay; the client loop in control_handle matches by fd. */
	fds[n++] = (struct pollfd){ .fd = shmclock_steady_now().ns < c->listen_paused_until ? -1 : c->fd,
				    .events = POLLIN };
	for (int i = 0; i < CONTROL_CLIENTS_MAX && n < max; i++)
		if (c->clients[i].fd >= 0)
			fds[n++] = (struct pollfd){ .fd = c->clients[i].fd, .events = POLLIN };
	return n;
}

/* Closes a client's connection: dropped for @why, or (NULL) the client
 * went away by itself, which is not counted. */
static void drop(struct control *c, struct client *cl, const char *why)
{
	if (why) {
		log_msg(LOG_DEBUG, "control: dropping client (uid %u): %s", (unsigned)cl->uid, why);
		c->dropped++;
	}
	close(cl->fd);
	cl->fd = -1;
	cl->used = 0;
}

static void reply_error(struct client *cl, const char *msg)
{
	char *line = control_reply_error(msg);

	if (line)
		send_line(cl->fd, line);
	free(line);
}

/*
 * accept4() failed with EMFILE / ENFILE: the connection stays queued and
 * the listener stays readable, so poll() would return at once forever (a
 * core at 100 %). Give the spare descriptor up to accept it, tell the
 * client why, close it, take the spare back; without a spare, stop polling
 * the listener for a while (queued clients then wait, they are not lost).
 */
static void out_of_fds(struct control *c)
{
	int fd;

	if (c->fd_exhausted++ % 1000 == 0)
		log_msg(LOG_WARN, "control: out of file descriptors (%s); refusing clients until some "
				  "are free", strerror(errno));
	if (c->spare_fd >= 0) {
		close(c->spare_fd);
		fd = accept4(c->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd >= 0) {
			struct client tmp = { .fd = fd };

			reply_error(&tmp, "shmclockd is out of file descriptors; try again later");
			close(fd);
		}
		c->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (fd >= 0)
			return;
	}
	c->listen_paused_until = shmclock_steady_now().ns + 100000000;
}

static void accept_one(struct control *c)
{
	struct ucred cred = { .pid = 0, .uid = (uid_t)-1, .gid = (gid_t)-1 };
	socklen_t len = sizeof(cred);
	struct client tmp;
	int fd = accept4(c->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0) {
		if (errno == EMFILE || errno == ENFILE)
			out_of_fds(c);
		return;
	}
	tmp.fd = fd;
	/* Credentials we could not read are nobody's: refused, and logged as
	 * uid 4294967295 rather than as whatever the stack held. */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
	    !allowed(c, cred.uid, cred.gid)) {
		tmp.uid = cred.uid;
		reply_error(&tmp, "permission denied: this user may not control the clock");
		/* A flood of refused connections must not flood the log. */
		if (c->refused < 10 || c->refused % 1000 == 0)
			log_msg(LOG_WARN, "control: refused uid %u (pid %d)%s", (unsigned)cred.uid,
				(int)cred.pid, c->refused == 9 ? " (further refusals: every 1000th)" : "");
		c->refused++;
		close(fd);
		return;
	}
	/*
	 * A free slot, else the client quiet for longest: idle connections
	 * must not lock the owner out of their own clock.
	 */
	struct client *slot = NULL;

	for (int i = 0; i < CONTROL_CLIENTS_MAX; i++) {
		struct client *cl = &c->clients[i];

		if (cl->fd < 0) {
			slot = cl;
			break;
		}
		if (!slot || cl->last_ns < slot->last_ns)
			slot = cl;
	}
	if (slot->fd >= 0) {
		reply_error(slot, "dropped: too many clients and this one was the longest idle");
		drop(c, slot, "evicted for a new client");
		c->evicted++;
	}
	slot->fd = fd;
	slot->uid = cred.uid;
	slot->used = 0;
	slot->last_ns = shmclock_steady_now().ns;
}

static void handle_line(struct control *c, struct client *cl, const char *line, size_t len)
{
	char err[256], *reply;
	struct request req;
	struct cmd cmd;

	if (control_parse_request(line, len, &req, err, sizeof(err))) {
		c->errors++;
		reply_error(cl, err);
		return;
	}
	memset(&cmd, 0, sizeof(cmd));
	cmd.req = req;
	/* Status is read from the segment here, lock-free, as any reader
	 * would: a client polling status never wakes the clock thread. */
	if (cmd.req.kind == CMD_STATUS && c->view) {
		int r = shmclock_info(c->view, &cmd.info);

		if (r == 0 || r == -ESTALE)
			goto answer;
	}
	if (clockthread_submit(c->ct, &cmd)) {
		c->errors++;
		reply_error(cl, cmd.err);
		return;
	}
	if (cmd.req.kind != CMD_STATUS)
		log_msg(LOG_INFO, "control: %.*s (uid %u)", (int)(len > 200 ? 200 : len), line,
			(unsigned)cl->uid);
answer:
	c->served++;
	reply = control_reply_ok(c, &cmd.info);
	if (reply && send_line(cl->fd, reply) < 0)
		drop(c, cl, "does not read its replies");
	free(reply);
}

static void read_client(struct control *c, struct client *cl)
{
	ssize_t n = recv(cl->fd, cl->buf + cl->used, CONTROL_LINE_MAX - cl->used, 0);
	char *start, *nl;

	if (n <= 0) {
		if (n == 0 || (errno != EAGAIN && errno != EINTR))
			drop(c, cl, NULL);
		return;
	}
	cl->used += (size_t)n;
	cl->last_ns = shmclock_steady_now().ns;
	start = cl->buf;
	while (cl->fd >= 0 && (nl = memchr(start, '\n', cl->used - (size_t)(start - cl->buf)))) {
		size_t len = (size_t)(nl - start);

		if (len && start[len - 1] == '\r')
			len--;
		if (len)
			handle_line(c, cl, start, len);
		start = nl + 1;
	}
	if (cl->fd < 0)
		return;
	cl->used -= (size_t)(start - cl->buf);
	memmove(cl->buf, start, cl->used);
	if (cl->used >= CONTROL_LINE_MAX) {
		c->errors++;
		reply_error(cl, "request line too long (at most 4096 bytes)");
		drop(c, cl, "oversized line");
	}
}

void control_handle(struct control *c, const struct pollfd *fds, int n)
{
	int64_t now = shmclock_steady_now().ns;

	for (int k = 0; k < n; k++) {
		if (!fds[k].revents)
			continue;
		if (fds[k].fd == c->fd) {
			accept_one(c);
			continue;
		}
		for (int i = 0; i < CONTROL_CLIENTS_MAX; i++)
			if (c->clients[i].fd == fds[k].fd) {
				read_client(c, &c->clients[i]);
				break;
			}
	}
	for (int i = 0; i < CONTROL_CLIENTS_MAX; i++)
		if (c->clients[i].fd >= 0 && now - c->clients[i].last_ns > c->cfg->control_idle_ns)
			drop(c, &c->clients[i], "idle");
}

int control_poll_ms(const struct control *c)
{
	int64_t ms = c->cfg->control_idle_ns < 2000000000 ? c->cfg->control_idle_ns / 2000000 : 1000;

	if (c->listen_paused_until) {
		int64_t left = (c->listen_paused_until - shmclock_steady_now().ns) / 1000000 + 1;

		if (left > 0 && left < ms)
			ms = left;
	}
	return (int)ms;
}

void control_close(struct control *c)
{
	if (c->spare_fd >= 0)
		close(c->spare_fd);
	c->spare_fd = -1;
	for (int i = 0; i < CONTROL_CLIENTS_MAX; i++)
		if (c->clients[i].fd >= 0)
			close(c->clients[i].fd);
	if (c->fd >= 0) {
		close(c->fd);
		unlink(c->path);
	}
	c->fd = -1;
	shmclock_close(c->view);
	c->view = NULL;
}
