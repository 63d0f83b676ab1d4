/* SPDX-License-Identifier: MIT */
/*
 * shmclock-panel: a web panel and Prometheus exporter for shmclock clocks.
 *
 * One poller thread (poller.c) reads each clock's segment, as any reader
 * does, every frame (50 ms); another asks each daemon for status over the
 * control socket every status interval (1 s, as `shmclockctl top`). One
 * frame is rendered for all browsers; the HTTP side (main.c) only copies
 * frames out, so the daemons see one client however many browsers watch.
 */
#ifndef SHMCLOCK_PANEL_H
#define SHMCLOCK_PANEL_H

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <shmclock/shmclock.h>

#define PANEL_CLOCKS_MAX 64
/* The largest reply read from a daemon (status, and a change's ok, which
 * carries the status): 64 participants with their figures. */
#define STATUS_MAX (256 * 1024)
/* The real-time factor's history: one sample a second, five minutes. */
#define PANEL_HISTORY 300

struct panel_clock {
	char name[SHMCLOCK_NAME_MAX + 1];
	char sock[108];
	bool given;             /* named with -n (else found in /dev/shm) */
	bool sock_given;        /* sock from --socket (else the default) */
	shmclock_t *clk;        /* NULL while the segment cannot be opened */
	int open_err;           /* shmclock_open()'s last error, or 0 */
	shmclock_info_t info;   /* the latest read of the segment */
	int info_r;             /* shmclock_info()'s return */
	cJSON *status;          /* the daemon's last reply's "status", or NULL */
	char *reply;            /* that reply as the daemon sent it (a line) */
	char status_err[200];   /* why the last status request failed, or "" */
	uint64_t status_failures;
	/* real-time factor: sim time per real time over the last second */
	double rtf;
	int64_t rtf_mono, rtf_sim;
	double history[PANEL_HISTORY];
	int hist_n, hist_head;
};

struct panel {
	pthread_mutex_t mu;     /* guards everything below */
	pthread_cond_t frame_cv; /* broadcast at each new frame */
	struct panel_clock clocks[PANEL_CLOCKS_MAX];
	int nclocks;
	bool every;             /* no -n: every clock this user can read */
	int not_shown;          /* clocks discovery found past PANEL_CLOCKS_MAX */
	int frame_ms, status_ms;
	uint64_t frame_seq;     /* frames rendered so far */
	uint64_t status_seq;    /* status rounds so far */
	char *frame;            /* the SSE event of the latest frame, without
				 * the daemons' status */
	char *frame_full;       /* the same with each clock's status and history */
	bool stop;
	int streams;            /* event streams open now */
	uint64_t streams_refused, requests, control_requests, control_refused;
	bool control;           /* --control: POST /api/control is served */
};

/* Adds clock @name (validated) to be watched. 0, -ENOSPC, -EEXIST. */
int panel_add_clock(struct panel *p, const char *name, bool given);

/* The frame poller (segments, every frame) and the status poller (the
 * daemons, every status interval), each in a thread of its own so that a
 * daemon slow to answer never stops the live time: run until p->stop. */
void *panel_poller(void *arg);
void *panel_status_poller(void *arg);

/* One round now (the first frame before the server starts). Caller does
 * not hold p->mu. */
void panel_poll_once(struct panel *p, bool with_status);

/* The clock named @name, or NULL. Caller holds p->mu. */
struct panel_clock *panel_find(struct panel *p, const char *name);

/* The Prometheus text exposition of every clock. Caller holds p->mu.
 * malloc'd; NULL on out of memory. */
char *panel_metrics(struct panel *p);
/* Every metric /metrics may serve, its type and HELP, to @each (the
 * panel's own, then status_fields.h's): shmclock-panel --help-metrics. */
void panel_metric_list(void (*each)(const char *name, const char *type, const char *help,
				    void *arg),
		       void *arg);

/* A growing string. */
struct sbuf {
	char *s;
	size_t len, cap;
	bool oom;
};

void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* @s as a Prometheus label value (backslash, quote and newline escaped). */
void sb_label(struct sbuf *b, const char *s);

#endif
