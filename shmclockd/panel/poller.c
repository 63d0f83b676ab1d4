/* SPDX-License-Identifier: MIT */
/*
 * The one poller: segments every frame, daemons every status interval,
 * one rendered frame for every browser.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <shmclock/time.h>

#include "control_client.h"
#include "duration.h"
#include "panel.h"
#include "paths.h"
#include "status_json.h"

/* A daemon that does not answer status within this is shown as such; the
 * next round asks again. */
#define STATUS_TIMEOUT_MS 1000

struct panel_clock *panel_find(struct panel *p, const char *name)
{
	for (int i = 0; i < p->nclocks; i++)
		if (!strcmp(p->clocks[i].name, name))
			return &p->clocks[i];
	return NULL;
}

int panel_add_clock(struct panel *p, const char *name, bool given)
{
	struct panel_clock *c;

	if (panel_find(p, name))
		return -EEXIST;
	if (p->nclocks >= PANEL_CLOCKS_MAX)
		return -ENOSPC;
	c = &p->clocks[p->nclocks];
	memset(c, 0, sizeof(*c));
	snprintf(c->name, sizeof(c->name), "%s", name);
	c->given = given;
	if (paths_default_socket(name, c->sock, sizeof(c->sock)))
		c->sock[0] = 0;
	p->nclocks++;
	return 0;
}

/* Drops clock @i from the table (what it holds freed, the later ones
 * moved down). Only the status poller's own round calls it (discover()),
 * so the indices it asks status by stay valid. Caller holds p->mu. */
static void forget_clock(struct panel *p, int i)
{
	struct panel_clock *c = &p->clocks[i];

	if (c->clk)
		shmclock_close(c->clk);
	cJSON_Delete(c->status);
	free(c->reply);
	memmove(c, c + 1, (size_t)(p->nclocks - i - 1) * sizeof(*c));
	p->nclocks--;
}

/* Every clock in /dev/shm that this user may open (the readers' trust rules
 * decide, as for shmclock-cat); a discovered clock whose segment is gone
 * is forgotten (issue 52: clocks were only ever added, and a panel that
 * had seen 64 names went blind to new ones). More than PANEL_CLOCKS_MAX at
 * once: those left out are counted (p->not_shown, a metric) and said once
 * per episode on stderr. Caller holds p->mu. */
static void discover(struct panel *p)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	char path[128], first[SHMCLOCK_NAME_MAX + 1] = "";
	int not_shown = 0;

	if (!d)
		return;
	for (int i = 0; i < p->nclocks;) {
		snprintf(path, sizeof(path), "/dev/shm/shmclock.%s", p->clocks[i].name);
		if (!p->clocks[i].given && access(path, F_OK) && errno == ENOENT) {
			fprintf(stderr, "shmclock-panel: clock '%s' removed: no longer shown\n",
				p->clocks[i].name);
			forget_clock(p, i);
		} else {
			i++;
		}
	}
	while ((e = readdir(d))) {
		shmclock_t *clk;

		if (strncmp(e->d_name, "shmclock.", 9) || shmclock_check_name(e->d_name + 9) ||
		    panel_find(p, e->d_name + 9))
			continue;
		if (shmclock_open(e->d_name + 9, &clk))
			continue;
		shmclock_close(clk);
		if (panel_add_clock(p, e->d_name + 9, false) == -ENOSPC && !not_shown++)
			snprintf(first, sizeof(first), "%s", e->d_name + 9);
	}
	closedir(d);
	if (not_shown && !p->not_shown)
		fprintf(stderr, "shmclock-panel: more than %d clocks: '%s' and %d more not shown until "
				"others are removed (or name the clocks with -n)\n",
			PANEL_CLOCKS_MAX, first, not_shown - 1);
	p->not_shown = not_shown;
}

static void read_segment(struct panel_clock *c)
{
	if (!c->clk) {
		c->open_err = shmclock_open(c->name, &c->clk);
		if (c->open_err) {
			c->clk = NULL;
			c->info_r = c->open_err;
			return;
		}
	}
	c->info_r = shmclock_info(c->clk, &c->info);
	if (c->info_r)
		return;
	/* A writer that replaced a dead one continues the same mapping; a
	 * clock that was removed and made again is a new file: reopen when
	 * the writer is gone, to find it. */
	if (!c->info.writer_alive) {
		shmclock_close(c->clk);
		c->clk = NULL;
	}
	if (!c->rtf_mono) {
		c->rtf_mono = c->info.mono_ns;
		c->rtf_sim = c->info.sim_ns;
	} else if (c->info.mono_ns - c->rtf_mono >= 1000000000) {
		c->rtf = (double)(c->info.sim_ns - c->rtf_sim) / (double)(c->info.mono_ns - c->rtf_mono);
		c->rtf_mono = c->info.mono_ns;
		c->rtf_sim = c->info.sim_ns;
		c->history[c->hist_head] = c->rtf;
		c->hist_head = (c->hist_head + 1) % PANEL_HISTORY;
		if (c->hist_n < PANEL_HISTORY)
			c->hist_n++;
	}
}

/* Asks the daemon of @c for status, without p->mu held (it may take up to
 * STATUS_TIMEOUT_MS). */
static void ask_status(struct panel *p, int i, char *buf)
{
	static const char line[] = "{\"v\":1,\"cmd\":\"status\"}\n";
	char sock[108], err[200] = "";
	cJSON *reply = NULL, *st = NULL;
	int r;

	pthread_mutex_lock(&p->mu);
	memcpy(sock, p->clocks[i].sock, sizeof(sock));
	pthread_mutex_unlock(&p->mu);
	if (!sock[0]) {
		snprintf(err, sizeof(err), "the default control socket path is too long");
	} else if ((r = control_client_request(sock, line, buf, STATUS_MAX, STATUS_TIMEOUT_MS))) {
		snprintf(err, sizeof(err), "%s at %s",
			 r == -ETIMEDOUT ? "shmclockd did not answer status within 1 s"
			 : r == -ENOENT || r == -ECONNREFUSED ? "no shmclockd"
			 : r == -EPROTO ? "shmclockd closed the connection without a reply"
					: strerror(-r), sock);
	} else if (!(reply = cJSON_Parse(buf)) ||
		   !cJSON_IsObject(st = cJSON_GetObjectItemCaseSensitive(reply, "status"))) {
		snprintf(err, sizeof(err), "shmclockd at %s sent no valid status", sock);
	}
	pthread_mutex_lock(&p->mu);
	struct panel_clock *c = &p->clocks[i];

	cJSON_Delete(c->status);
	free(c->reply);
	c->status = NULL;
	c->reply = NULL;
	snprintf(c->status_err, sizeof(c->status_err), "%s", err);
	if (err[0]) {
		c->status_failures++;
		cJSON_Delete(reply);
	} else {
		c->status = cJSON_DetachItemViaPointer(reply, st);
		cJSON_Delete(reply);
		c->reply = strdup(buf);
	}
	pthread_mutex_unlock(&p->mu);
}

static const char *state_of(const struct panel_clock *c)
{
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(c->status, "distribute");

	if (c->info_r == -EAGAIN)
		return "stuck";
	if (c->info_r)
		return "absent";
	if (!c->info.writer_alive)
		return "dead";
	if (!c->info.initialized)
		return "uninitialized";
	if (c->info.stale)
		return "stale";
	if (c->info.paused)
		return "paused";
	if (c->info.source == SHMCLOCK_SOURCE_LEADER ||
	    (d && !strcmp(str_of(d, "role"), "follower")))
		return "following";
	if (c->info.stepped)
		return "stepped";
	return "running";
}

/* One clock's part of a frame; @full adds its status and history. */
static cJSON *clock_json(const struct panel_clock *c, bool full)
{
	cJSON *o = cJSON_CreateObject();
	char buf[64];

	cJSON_AddStringToObject(o, "name", c->name);
	cJSON_AddStringToObject(o, "state", state_of(c));
	if (c->info_r && c->info_r != -EAGAIN) {
		cJSON_AddStringToObject(o, "error", shmclock_strerror(c->info_r));
	} else if (!c->info_r) {
		const shmclock_info_t *in = &c->info;

		snprintf(buf, sizeof(buf), "%lld", (long long)in->sim_ns);
		cJSON_AddStringToObject(o, "sim_ns", buf);
		cJSON_AddStringToObject(o, "sim", duration_format(in->sim_ns, buf, sizeof(buf)));
		if (in->has_unix_at_zero)
			cJSON_AddStringToObject(o, "world",
						time_format_iso(in->unix_at_zero_ns + in->sim_ns, buf,
								sizeof(buf)));
		cJSON_AddStringToObject(o, "source", shmclock_source_name(in->source));
		cJSON_AddNumberToObject(o, "scale", in->scale);
		cJSON_AddNumberToObject(o, "jump_epoch", (double)in->jump_epoch);
		cJSON_AddNumberToObject(o, "writer_pid", in->writer_pid);
	}
	if (c->hist_n)
		cJSON_AddNumberToObject(o, "rtf", c->rtf);
	if (c->status_err[0])
		cJSON_AddStringToObject(o, "status_error", c->status_err);
	if (full) {
		cJSON *h = cJSON_CreateArray();

		for (int k = 0; k < c->hist_n; k++)
			cJSON_AddItemToArray(h, cJSON_CreateNumber(
				c->history[(c->hist_head - c->hist_n + k + PANEL_HISTORY) % PANEL_HISTORY]));
		cJSON_AddItemToObject(o, "history", h);
		if (c->status)
			cJSON_AddItemToObject(o, "status", cJSON_Duplicate(c->status, 1));
	}
	return o;
}

/* "data: {...}\n\n" for SSE. */
static char *sse_event(cJSON *o)
{
	char *s = cJSON_PrintUnformatted(o), *ev;
	size_t n;

	cJSON_Delete(o);
	if (!s)
		return NULL;
	n = strlen(s);
	ev = malloc(n + 9);
	if (ev)
		snprintf(ev, n + 9, "data: %s\n\n", s);
	free(s);
	return ev;
}

/* Caller holds p->mu. */
static void render(struct panel *p)
{
	cJSON *light = cJSON_CreateObject(), *full = cJSON_CreateObject();
	cJSON *la = cJSON_CreateArray(), *fa = cJSON_CreateArray();
	char *l, *f;

	for (int i = 0; i < p->nclocks; i++) {
		cJSON_AddItemToArray(la, clock_json(&p->clocks[i], false));
		cJSON_AddItemToArray(fa, clock_json(&p->clocks[i], true));
	}
	cJSON_AddNumberToObject(light, "seq", (double)p->frame_seq + 1);
	cJSON_AddNumberToObject(full, "seq", (double)p->frame_seq + 1);
	cJSON_AddNumberToObject(full, "status_seq", (double)p->status_seq);
	cJSON_AddBoolToObject(full, "control", p->control);
	cJSON_AddItemToObject(light, "clocks", la);
	cJSON_AddItemToObject(full, "clocks", fa);
	l = sse_event(light);
	f = sse_event(full);
	if (!l || !f) {
		/* Out of memory: browsers keep the previous frame. */
		free(l);
		free(f);
		return;
	}
	free(p->frame);
	free(p->frame_full);
	p->frame = l;
	p->frame_full = f;
	p->frame_seq++;
	pthread_cond_broadcast(&p->frame_cv);
}

/* Every clock's daemon asked for status, in turn: a daemon that does not
 * answer holds up this round only, never the frames. */
static void status_round(struct panel *p)
{
	static char *buf;
	int n;

	if (!buf && !(buf = malloc(STATUS_MAX)))
		return;
	pthread_mutex_lock(&p->mu);
	if (p->every)
		discover(p);
	n = p->nclocks;
	pthread_mutex_unlock(&p->mu);
	/* Only discover() above adds and removes clocks, and only here: index
	 * i stays valid through the round. */
	for (int i = 0; i < n; i++)
		ask_status(p, i, buf);
	pthread_mutex_lock(&p->mu);
	p->status_seq++;
	pthread_mutex_unlock(&p->mu);
}

static void frame_round(struct panel *p)
{
	pthread_mutex_lock(&p->mu);
	for (int i = 0; i < p->nclocks; i++)
		read_segment(&p->clocks[i]);
	render(p);
	pthread_mutex_unlock(&p->mu);
}

void panel_poll_once(struct panel *p, bool with_status)
{
	if (with_status)
		status_round(p);
	frame_round(p);
}

static bool stopping(struct panel *p)
{
	bool stop;

	pthread_mutex_lock(&p->mu);
	stop = p->stop;
	pthread_mutex_unlock(&p->mu);
	return stop;
}

void *panel_poller(void *arg)
{
	struct panel *p = arg;

	for (;;) {
		struct timespec ts = { 0, (long)p->frame_ms * 1000000 };

		nanosleep(&ts, NULL);
		if (stopping(p))
			break;
		frame_round(p);
	}
	return NULL;
}

void *panel_status_poller(void *arg)
{
	struct panel *p = arg;
	int64_t next = shmclock_steady_now().ns + (int64_t)p->status_ms * 1000000;

	/* Asleep a frame at a time, so that a stop is seen within one. */
	for (;;) {
		struct timespec ts = { 0, (long)p->frame_ms * 1000000 };
		int64_t now;

		nanosleep(&ts, NULL);
		if (stopping(p))
			break;
		now = shmclock_steady_now().ns;
		if (now < next)
			continue;
		status_round(p);
		next = now + (int64_t)p->status_ms * 1000000;
	}
	return NULL;
}
