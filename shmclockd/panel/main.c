/* SPDX-License-Identifier: MIT */
/*
 * shmclock-panel: the HTTP side. libmicrohttpd parses HTTP and enforces
 * the limits (connections, per-connection memory, idle timeout); this file
 * routes, checks and answers. Every refusal is one line saying why.
 *
 * One file past 800 lines: the routes and their checks, one refusal
 * policy; the poller (poller.c) and metrics (metrics.c) are apart.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "control_client.h"
#include "panel.h"
#include "paths.h"
#include "protocol.h"
#include "status_json.h"

#ifndef PANEL_DATADIR
#define PANEL_DATADIR "/usr/share/shmclock/panel"
#endif

/* A control request's body, at most (the daemon's own line limit). */
#define BODY_MAX 4096
/* Connections at once; beyond, libmicrohttpd closes new ones at accept. */
#define CONN_MAX 256
/* An idle connection (a slow client) is closed after this, seconds. */
#define CONN_TIMEOUT_S 10
/* Memory per connection for its request (headers, URL); larger: 431/414. */
#define CONN_MEMORY (32 * 1024)
/* A request must arrive whole within this, seconds, however it trickles
 * in: the idle timeout alone let a client sending a byte every few seconds
 * (slow loris) keep its connection, and CONN_MAX of them all of them. */
#define REQUEST_DEADLINE_S 10
/* The kernel's send buffer of a connection: what a page that stopped
 * reading its event stream can leave queued before the stream blocks. */
#define CONN_SNDBUF (64 * 1024)

static struct panel P = { .mu = PTHREAD_MUTEX_INITIALIZER, .frame_cv = PTHREAD_COND_INITIALIZER,
			  .frame_ms = 50, .status_ms = 1000 };
static int max_streams = 64;
static char token[257];
static size_t token_len;
static char host[80]; /* what the Host header of a control request must be */
/* ... or this, the address alone, when the port is 80: what a browser
 * sends for http://ADDR/ (the default port is left out of Host and Origin,
 * RFC 9110 7.2 and RFC 6454 6.2). Empty on other ports. */
static char host_default_port[80];

struct asset {
	const char *path, *file, *type;
	char *data;
	size_t len;
};

static struct asset assets[] = {
	{ "/", "index.html", "text/html; charset=utf-8", NULL, 0 },
	{ "/index.html", "index.html", "text/html; charset=utf-8", NULL, 0 },
	{ "/panel.css", "panel.css", "text/css; charset=utf-8", NULL, 0 },
	{ "/panel.js", "panel.js", "text/javascript; charset=utf-8", NULL, 0 },
};
#define NASSETS (sizeof(assets) / sizeof(assets[0]))

/* @text from column @col on, words wrapped before column 82 onto lines
 * indented by @col, as the option lines of usage() are. */
static void print_wrapped(FILE *f, const char *text, int col)
{
	int at = col;

	while (*text) {
		int n = (int)strcspn(text, " ");

		if (at > col && at + 1 + n > 82) {
			fprintf(f, "\n%*s", col, "");
			at = col;
		}
		at += fprintf(f, "%s%.*s", at > col ? " " : "", n, text);
		text += n;
		text += strspn(text, " ");
	}
	fputc('\n', f);
}

static void usage(FILE *f)
{
	char names[256], control[512];

	/* The commands the table gives the panel (protocol.h). */
	snprintf(control, sizeof(control), "serve POST /api/control (%s), each request carrying "
		 "the token in the header X-Shmclock-Token", proto_list(names, sizeof(names), true));
	fprintf(f,
		"usage: shmclock-panel [-n NAME [--socket PATH]]... [--listen ADDR:PORT] [--control --token-file FILE]\n"
		"\nA web page, Prometheus metrics and a JSON API for shmclock clocks.\n\n"
		"  -n, --name NAME         a clock to show (repeatable; default: every clock this\n"
		"                          user can read, found in /dev/shm)\n"
		"      --socket PATH       the control socket of the -n NAME before it (a daemon\n"
		"                          run with --socket PATH; default: the daemon's default)\n"
		"  -l, --listen ADDR:PORT  where to serve (default 127.0.0.1:8077; [::1]:PORT for\n"
		"                          IPv6; port 0: any free port, printed at start)\n"
		"      --control           ");
	print_wrapped(f, control, 26);
	fprintf(f,
		"      --token-file FILE   the token (its first line; 16 to 256 bytes); the file\n"
		"                          must be mode 0600 (or 0400) and this user's\n"
		"      --status-interval MS  ask each daemon for status every MS (default 1000;\n"
		"                          100 to 60000); the live time comes from the segment\n"
		"      --max-streams N     event streams (open pages) at once (default 64)\n"
		"      --static-dir DIR    the page's files (default: beside the program in a\n"
		"                          build tree, else " PANEL_DATADIR ")\n"
		"  -h, --help              this help\n"
		"      --help-metrics      every metric /metrics may serve: name, type, help\n");
}

static void print_metric(const char *name, const char *type, const char *help, void *arg)
{
	fprintf(arg, "%-46s %-9s %s\n", name, type, help);
}

static char *slurp(const char *path, size_t *len, size_t max)
{
	FILE *f = fopen(path, "rb");
	char *buf;

	if (!f)
		return NULL;
	buf = malloc(max + 1);
	if (buf) {
		*len = fread(buf, 1, max + 1, f);
		if (*len > max) {
			free(buf);
			buf = NULL;
			errno = EFBIG;
		}
	}
	fclose(f);
	return buf;
}

static int load_assets(const char *dir)
{
	char self[4096], path[4096];

	if (!dir) {
		dir = PANEL_DATADIR;
		if (paths_beside_self("static/index.html", self, sizeof(self))) {
			*strrchr(self, '/') = 0;
			dir = self;
		}
	}
	for (size_t i = 0; i < NASSETS; i++) {
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, assets[i].file) >= sizeof(path)) {
			fprintf(stderr, "shmclock-panel: --static-dir is too long\n");
			return -1;
		}
		assets[i].data = slurp(path, &assets[i].len, 1 << 20);
		if (!assets[i].data) {
			fprintf(stderr, "shmclock-panel: cannot read the page's file %s: %s (see --static-dir)\n",
				path, strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* The token: the first line of @path, which must be this user's and
 * readable by nobody else. */
static int load_token(const char *path)
{
	struct stat st;
	char *data, *nl;
	size_t len;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK); /* a FIFO: refused, not waited on */

	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "shmclock-panel: --token-file %s: %s\n", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	if (!S_ISREG(st.st_mode)) {
		fprintf(stderr, "shmclock-panel: --token-file %s is not a regular file\n", path);
		return -1;
	}
	if (st.st_mode & 077) {
		fprintf(stderr, "shmclock-panel: --token-file %s is mode %04o: others may read the token; "
				"refusing it (chmod 600 %s)\n", path, (unsigned)(st.st_mode & 07777), path);
		return -1;
	}
	if (st.st_uid != geteuid()) {
		fprintf(stderr, "shmclock-panel: --token-file %s belongs to uid %u, not to this user (%u)\n",
			path, (unsigned)st.st_uid, (unsigned)geteuid());
		return -1;
	}
	data = slurp(path, &len, 4096);
	if (!data) {
		fprintf(stderr, "shmclock-panel: --token-file %s: %s\n", path, strerror(errno));
		return -1;
	}
	data[len] = 0;
	if ((nl = strpbrk(data, "\r\n")))
		*nl = 0;
	len = strlen(data);
	if (len < 16 || len > 256 || strpbrk(data, " \t")) {
		fprintf(stderr, "shmclock-panel: --token-file %s: the token (first line) must be 16 to 256 "
				"bytes without spaces, not %zu\n", path, len);
		free(data);
		return -1;
	}
	memcpy(token, data, len + 1);
	token_len = len;
	free(data);
	return 0;
}

/* ADDR:PORT or [ADDR6]:PORT. */
static int parse_listen(const char *s, struct sockaddr_storage *ss)
{
	const char *colon = strrchr(s, ':');
	char addr[64], *end;
	long port;

	if (!colon || (size_t)(colon - s) >= sizeof(addr))
		return -1;
	port = strtol(colon + 1, &end, 10);
	if (end == colon + 1 || *end || port < 0 || port > 65535)
		return -1;
	memcpy(addr, s, (size_t)(colon - s));
	addr[colon - s] = 0;
	memset(ss, 0, sizeof(*ss));
	if (addr[0] == '[' && addr[strlen(addr) - 1] == ']') {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;

		addr[strlen(addr) - 1] = 0;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		return inet_pton(AF_INET6, addr + 1, &a->sin6_addr) == 1 ? 0 : -1;
	}
	struct sockaddr_in *a = (struct sockaddr_in *)ss;

	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)port);
	return inet_pton(AF_INET, addr, &a->sin_addr) == 1 ? 0 : -1;
}

/* 0.0.0.0 or [::]: every address of the host. */
static bool listen_wildcard(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET6)
		return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)ss)->sin6_addr);
	return ((const struct sockaddr_in *)ss)->sin_addr.s_addr == htonl(INADDR_ANY);
}

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned code, const char *type,
			     const char *body, size_t len, enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, mode);
	enum MHD_Result ret;

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(r, "Content-Security-Policy",
				"default-src 'self'; frame-ancestors 'none'");
	ret = MHD_queue_response(conn, code, r);
	MHD_destroy_response(r);
	return ret;
}

/* A one-line refusal: JSON {"ok":false,"error":...} for the API, text
 * otherwise. */
static enum MHD_Result refuse(struct MHD_Connection *conn, unsigned code, bool api, const char *fmt,
			      ...) __attribute__((format(printf, 4, 5)));
static enum MHD_Result refuse(struct MHD_Connection *conn, unsigned code, bool api, const char *fmt,
			      ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	/* One byte kept for the text reply's newline: a message that echoes
	 * a long URL is cut, never written past the buffer. */
	vsnprintf(msg, sizeof(msg) - 1, fmt, ap);
	va_end(ap);
	if (api) {
		cJSON *o = cJSON_CreateObject();
		char *s, *line;

		cJSON_AddFalseToObject(o, "ok");
		cJSON_AddStringToObject(o, "error", msg);
		s = cJSON_PrintUnformatted(o);
		cJSON_Delete(o);
		if (!s)
			return MHD_NO;
		line = malloc(strlen(s) + 2);
		if (!line) {
			free(s);
			return MHD_NO;
		}
		sprintf(line, "%s\n", s);
		free(s);
		return reply(conn, code, "application/json", line, strlen(line), MHD_RESPMEM_MUST_FREE);
	}
	strcat(msg, "\n");
	return reply(conn, code, "text/plain; charset=utf-8", msg, strlen(msg), MHD_RESPMEM_MUST_COPY);
}

/* The clocks this panel shows, "a, b, c", for errors. */
static const char *clock_names(char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = 0;
	for (int i = 0; i < P.nclocks && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? ", " : "", P.clocks[i].name);
	return P.nclocks ? buf : "none";
}

/* ---- Connections waiting for a request, each with its deadline. ---- */

struct conn_watch {
	struct conn_watch *prev, *next;
	int fd;
	int64_t since; /* waiting for a request since (CLOCK_MONOTONIC ns); 0: serving one */
};

/* Guards the list and every watch's since; held while a socket is shut
 * down, so that its connection, which leaves the list before its socket is
 * closed, cannot have closed it (and the number gone to another file). */
static pthread_mutex_t conns_mu = PTHREAD_MUTEX_INITIALIZER;
static struct conn_watch conns = { &conns, &conns, -1, 0 };

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void conn_notify(void *cls, struct MHD_Connection *conn, void **sctx,
			enum MHD_ConnectionNotificationCode toe)
{
	struct conn_watch *w = *sctx;

	(void)cls;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		int sndbuf = CONN_SNDBUF;

		if (!ci || !(w = calloc(1, sizeof(*w))))
			return; /* (unwatched: the idle timeout still applies) */
		w->fd = ci->connect_fd;
		setsockopt(w->fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
		w->since = mono_ns();
		pthread_mutex_lock(&conns_mu);
		w->next = &conns;
		w->prev = conns.prev;
		conns.prev->next = w;
		conns.prev = w;
		pthread_mutex_unlock(&conns_mu);
		*sctx = w;
	} else if (w) {
		pthread_mutex_lock(&conns_mu);
		w->prev->next = w->next;
		w->next->prev = w->prev;
		pthread_mutex_unlock(&conns_mu);
		free(w);
		*sctx = NULL;
	}
}

/* @conn waits for a request (@waiting), or its request has arrived. */
static void conn_waiting(struct MHD_Connection *conn, bool waiting)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct conn_watch *w = ci ? ci->socket_context : NULL;

	if (!w)
		return;
	pthread_mutex_lock(&conns_mu);
	w->since = waiting ? mono_ns() : 0;
	pthread_mutex_unlock(&conns_mu);
}

/* Shuts down every connection whose request is overdue; libmicrohttpd then
 * sees it closed and lets it go. */
static void conns_reap(void)
{
	int64_t now = mono_ns();

	pthread_mutex_lock(&conns_mu);
	for (struct conn_watch *w = conns.next; w != &conns; w = w->next)
		if (w->since && now - w->since > (int64_t)REQUEST_DEADLINE_S * 1000000000) {
			shutdown(w->fd, SHUT_RDWR);
			w->since = 0;
		}
	pthread_mutex_unlock(&conns_mu);
}

/* ---- /events: Server-Sent Events, one thread per stream (libmicrohttpd's
 * thread-per-connection mode), each waiting on the poller's frames. ---- */

struct stream {
	char *buf;
	size_t len, off;
	uint64_t seq, status_seq;
};

static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max)
{
	struct stream *s = cls;
	size_t n;

	(void)pos;
	if (s->off == s->len) {
		struct timespec dl;
		const char *frame;
		bool timed_out = false;

		clock_gettime(CLOCK_REALTIME, &dl);
		dl.tv_sec += 15;
		pthread_mutex_lock(&P.mu);
		while (!P.stop && P.frame_seq == s->seq && !timed_out)
			timed_out = pthread_cond_timedwait(&P.frame_cv, &P.mu, &dl) == ETIMEDOUT;
		if (P.stop) {
			pthread_mutex_unlock(&P.mu);
			return MHD_CONTENT_READER_END_OF_STREAM;
		}
		/* A comment keeps proxies from closing a quiet stream. */
		frame = timed_out ? ": idle\n\n" : s->status_seq != P.status_seq ? P.frame_full : P.frame;
		n = strlen(frame);
		free(s->buf);
		s->buf = malloc(n);
		if (!s->buf) {
			pthread_mutex_unlock(&P.mu);
			return MHD_CONTENT_READER_END_WITH_ERROR;
		}
		memcpy(s->buf, frame, n);
		s->len = n;
		s->off = 0;
		if (!timed_out) {
			s->seq = P.frame_seq;
			s->status_seq = P.status_seq;
		}
		pthread_mutex_unlock(&P.mu);
	}
	n = s->len - s->off < max ? s->len - s->off : max;
	memcpy(out, s->buf + s->off, n);
	s->off += n;
	return (ssize_t)n;
}

static void stream_free(void *cls)
{
	struct stream *s = cls;

	free(s->buf);
	free(s);
	pthread_mutex_lock(&P.mu);
	P.streams--;
	pthread_mutex_unlock(&P.mu);
}

static enum MHD_Result events(struct MHD_Connection *conn)
{
	struct MHD_Response *r;
	struct stream *s;
	enum MHD_Result ret;

	pthread_mutex_lock(&P.mu);
	if (P.streams >= max_streams) {
		P.streams_refused++;
		pthread_mutex_unlock(&P.mu);
		return refuse(conn, MHD_HTTP_SERVICE_UNAVAILABLE, false,
			      "too many event streams open (at most %d): close another page of this "
			      "panel, or start it with a larger --max-streams", max_streams);
	}
	P.streams++;
	pthread_mutex_unlock(&P.mu);
	s = calloc(1, sizeof(*s));
	if (s)
		s->status_seq = UINT64_MAX;
	r = s ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_read, s,
						  stream_free) : NULL;
	if (!r) {
		if (s)
			stream_free(s);
		else {
			pthread_mutex_lock(&P.mu);
			P.streams--;
			pthread_mutex_unlock(&P.mu);
		}
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	MHD_add_response_header(r, "X-Accel-Buffering", "no");
	ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

/* ---- /api/status ---- */

static enum MHD_Result api_status(struct MHD_Connection *conn)
{
	const char *name = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "clock");
	struct panel_clock *c;
	char names[1024];
	struct sbuf b = { 0 };

	pthread_mutex_lock(&P.mu);
	if (name) {
		c = panel_find(&P, name);
		if (!c) {
			pthread_mutex_unlock(&P.mu);
			return refuse(conn, MHD_HTTP_NOT_FOUND, true,
				      "unknown clock (this panel shows: %s)", clock_names(names, sizeof(names)));
		}
		if (!c->reply) {
			char err[256];

			snprintf(err, sizeof(err), "%s", c->status_err[0] ? c->status_err : "no status yet");
			pthread_mutex_unlock(&P.mu);
			return refuse(conn, MHD_HTTP_SERVICE_UNAVAILABLE, true, "clock %s: %s", name, err);
		}
		sb_printf(&b, "%s", c->reply);
	} else {
		sb_printf(&b, "{\"clocks\":{");
		for (int i = 0; i < P.nclocks; i++) {
			c = &P.clocks[i];
			sb_printf(&b, "%s\"", i ? "," : "");
			sb_label(&b, c->name);
			if (c->reply) {
				sb_printf(&b, "\":%.*s", (int)strcspn(c->reply, "\n"), c->reply);
			} else {
				cJSON *e = cJSON_CreateString(c->status_err[0] ? c->status_err : "no status yet");
				char *es = cJSON_PrintUnformatted(e);

				sb_printf(&b, "\":{\"ok\":false,\"error\":%s}", es ? es : "\"\"");
				free(es);
				cJSON_Delete(e);
			}
		}
		sb_printf(&b, "}}\n");
	}
	pthread_mutex_unlock(&P.mu);
	if (b.oom) {
		free(b.s);
		return MHD_NO;
	}
	return reply(conn, MHD_HTTP_OK, "application/json", b.s, b.len, MHD_RESPMEM_MUST_FREE);
}

/* ---- POST /api/control ---- */

struct post {
	char body[BODY_MAX + 1];
	size_t used;
	bool too_big;
};

static bool token_ok(const char *t)
{
	unsigned char d = 0;
	size_t n;

	if (!t)
		return false;
	n = strlen(t);
	/* Compares every byte whatever the first difference: no timing hint. */
	for (size_t i = 0; i < token_len; i++)
		d |= (unsigned char)(token[i] ^ (i < n ? t[i] : 0));
	return d == 0 && n == token_len;
}

static enum MHD_Result control(struct MHD_Connection *conn, struct post *po)
{
	const struct proto_cmd *pc = NULL;
	const cJSON *clk, *cmd, *arg;
	char sock[108], names[1024], *line, buf[4096], *rbuf;
	cJSON *req, *o;
	int r;

	o = cJSON_ParseWithLength(po->body, po->used);
	if (!cJSON_IsObject(o)) {
		cJSON_Delete(o);
		return refuse(conn, MHD_HTTP_BAD_REQUEST, true,
			      "the body must be a JSON object like {\"clock\":\"NAME\",\"cmd\":\"pause\"}");
	}
	clk = cJSON_GetObjectItemCaseSensitive(o, "clock");
	cmd = cJSON_GetObjectItemCaseSensitive(o, "cmd");
	arg = cJSON_GetObjectItemCaseSensitive(o, "arg");
	/* The commands the table gives the panel (protocol.h). */
	if (cJSON_IsString(cmd))
		pc = proto_find(cmd->valuestring);
	if (!pc || !pc->panel) {
		cJSON_Delete(o);
		return refuse(conn, MHD_HTTP_BAD_REQUEST, true, "\"cmd\" must be %s",
			      proto_list(names, sizeof(names), true));
	}
	if (!cJSON_IsString(clk)) {
		cJSON_Delete(o);
		return refuse(conn, MHD_HTTP_BAD_REQUEST, true, "\"clock\" (a clock's name) is required");
	}
	pthread_mutex_lock(&P.mu);
	struct panel_clock *c = panel_find(&P, clk->valuestring);

	if (c)
		memcpy(sock, c->sock, sizeof(sock));
	else
		clock_names(names, sizeof(names));
	pthread_mutex_unlock(&P.mu);
	if (!c) {
		cJSON_Delete(o);
		return refuse(conn, MHD_HTTP_NOT_FOUND, true, "unknown clock (this panel shows: %s)", names);
	}
	/* One argument is "arg" itself, several an array of them in order. */
	if (pc->nargs > 1 && (!cJSON_IsArray(arg) || (size_t)cJSON_GetArraySize(arg) != pc->nargs)) {
		cJSON_Delete(o);
		return refuse(conn, MHD_HTTP_BAD_REQUEST, true,
			      "%s needs \"arg\": an array of its %zu arguments", pc->name, pc->nargs);
	}
	for (size_t i = 0; i < pc->nargs; i++) {
		const cJSON *a = pc->nargs == 1 ? arg : cJSON_GetArrayItem(arg, (int)i);

		if (!cJSON_IsString(a) && !cJSON_IsNumber(a)) {
			cJSON_Delete(o);
			return refuse(conn, MHD_HTTP_BAD_REQUEST, true, "%s needs \"arg\"%s: %s",
				      pc->name, pc->nargs == 1 ? "" : " (each)",
				      proto_arg_kinds[pc->args[i].kind].panel);
		}
	}
	/* The daemon's parser is the one authority on the arguments. */
	req = cJSON_CreateObject();
	cJSON_AddNumberToObject(req, "v", CONTROL_PROTOCOL);
	cJSON_AddStringToObject(req, "cmd", pc->name);
	for (size_t i = 0; i < pc->nargs; i++)
		cJSON_AddItemToObject(req, pc->args[i].key,
				      cJSON_Duplicate(pc->nargs == 1 ? arg : cJSON_GetArrayItem(arg, (int)i), 0));
	cJSON_Delete(o);
	line = cJSON_PrintUnformatted(req);
	cJSON_Delete(req);
	if (!line || strlen(line) + 2 > sizeof(buf)) {
		free(line);
		return refuse(conn, MHD_HTTP_BAD_REQUEST, true, "the request is too long");
	}
	snprintf(buf, sizeof(buf), "%s\n", line);
	free(line);
	line = strdup(buf);
	if (!line)
		return MHD_NO;
	pthread_mutex_lock(&P.mu);
	P.control_requests++;
	pthread_mutex_unlock(&P.mu);
	/* The reply to a change carries the whole status: as large as the
	 * poller's (a 4 KiB buffer cut a lockstep clock's of 8 participants,
	 * and a change made was answered 502, inviting a second one). */
	rbuf = malloc(STATUS_MAX);
	if (!rbuf) {
		free(line);
		return MHD_NO;
	}
	r = control_client_request(sock, line, rbuf, STATUS_MAX, 5000);
	free(line);
	if (r) {
		free(rbuf);
		return refuse(conn, MHD_HTTP_BAD_GATEWAY, true, "shmclockd at %s: %s", sock,
			      r == -ETIMEDOUT ? "no answer within 5 s" : strerror(-r));
	}
	o = cJSON_Parse(rbuf);
	r = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "ok"));
	cJSON_Delete(o);
	/* Passed on as the daemon sent it: ok with the status, or its error. */
	{
		enum MHD_Result ret = reply(conn, r ? MHD_HTTP_OK : MHD_HTTP_CONFLICT,
					    "application/json", rbuf, strlen(rbuf),
					    MHD_RESPMEM_MUST_COPY);

		free(rbuf);
		return ret;
	}
}

/* Whether a control request may go on; else the refusal is queued. */
static bool control_allowed(struct MHD_Connection *conn, enum MHD_Result *ret)
{
	const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
	const char *origin = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin");
	const char *t = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Shmclock-Token");
	char want[100];

	pthread_mutex_lock(&P.mu);
	P.control_refused++;
	pthread_mutex_unlock(&P.mu);
	if (!P.control) {
		*ret = refuse(conn, MHD_HTTP_FORBIDDEN, true,
			      "this panel is read-only (start it with --control --token-file FILE)");
		return false;
	}
	/* DNS rebinding: a page of another site, its name now resolving to
	 * us, sends its own name as Host. */
	if (!h || (strcmp(h, host) && (!host_default_port[0] || strcmp(h, host_default_port)))) {
		*ret = refuse(conn, MHD_HTTP_FORBIDDEN, true,
			      "the Host header must be %s, the address this panel listens on", host);
		return false;
	}
	snprintf(want, sizeof(want), "http://%s", host);
	if (origin && strcmp(origin, want)) {
		snprintf(want, sizeof(want), "http://%s", host_default_port);
		if (!host_default_port[0] || strcmp(origin, want)) {
			*ret = refuse(conn, MHD_HTTP_FORBIDDEN, true,
				      "requests from another origin are refused");
			return false;
		}
	}
	/* In a header, never a cookie: a browser attaches cookies to another
	 * site's requests, but only our page's script can set this header. */
	if (!token_ok(t)) {
		*ret = refuse(conn, MHD_HTTP_FORBIDDEN, true, t ? "wrong token (header X-Shmclock-Token)"
								 : "the token is required in the header "
								   "X-Shmclock-Token (a cookie is not accepted)");
		return false;
	}
	pthread_mutex_lock(&P.mu);
	P.control_refused--;
	pthread_mutex_unlock(&P.mu);
	return true;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
			      const char *method, const char *version, const char *upload,
			      size_t *upload_size, void **ctx)
{
	bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
	char names[1024];

	(void)cls;
	(void)version;
	conn_waiting(conn, false);
	if (!strcmp(url, "/api/control")) {
		struct post *po = *ctx;
		enum MHD_Result ret;

		if (strcmp(method, "POST"))
			return refuse(conn, MHD_HTTP_METHOD_NOT_ALLOWED, true, "/api/control takes POST");
		if (!po) {
			const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
								     MHD_HTTP_HEADER_CONTENT_LENGTH);

			/* Refused before the body is read: a forged or oversized
			 * request costs us its headers only. */
			if (!control_allowed(conn, &ret))
				return ret;
			if (cl && strtoull(cl, NULL, 10) > BODY_MAX)
				return refuse(conn, MHD_HTTP_CONTENT_TOO_LARGE, true,
					      "request body too large (%s bytes; at most %d)", cl, BODY_MAX);
			po = calloc(1, sizeof(*po));
			if (!po)
				return MHD_NO;
			*ctx = po;
			return MHD_YES;
		}
		if (*upload_size) {
			if (po->used + *upload_size > BODY_MAX)
				po->too_big = true;
			else
				memcpy(po->body + po->used, upload, *upload_size);
			po->used += *upload_size;
			*upload_size = 0;
			return MHD_YES;
		}
		if (po->too_big)
			return refuse(conn, MHD_HTTP_CONTENT_TOO_LARGE, true,
				      "request body too large (at most %d bytes)", BODY_MAX);
		return control(conn, po);
	}
	if (*upload_size || (*ctx == NULL && !get)) {
		/* Any other endpoint takes no body. */
		*upload_size = 0;
		return refuse(conn, MHD_HTTP_METHOD_NOT_ALLOWED, false, "%s takes GET only", url);
	}
	pthread_mutex_lock(&P.mu);
	P.requests++;
	pthread_mutex_unlock(&P.mu);
	/* A clock's page is looked up by its name in the panel's table, never
	 * as a file: a valid name may hold "..", "v1..2" (issue 52). */
	if (!strncmp(url, "/clock/", 7)) {
		pthread_mutex_lock(&P.mu);
		bool known = panel_find(&P, url + 7) != NULL;

		clock_names(names, sizeof(names));
		pthread_mutex_unlock(&P.mu);
		if (!known)
			return refuse(conn, MHD_HTTP_NOT_FOUND, false, "unknown clock (this panel shows: %s)",
				      names);
		return reply(conn, MHD_HTTP_OK, assets[0].type, assets[0].data, assets[0].len,
			     MHD_RESPMEM_PERSISTENT);
	}
	if (strstr(url, "..") || strchr(url, '\\'))
		return refuse(conn, MHD_HTTP_BAD_REQUEST, false, "path traversal refused: only this panel's "
								 "own files are served");
	if (!strcmp(url, "/events"))
		return events(conn);
	if (!strcmp(url, "/api/status"))
		return api_status(conn);
	if (!strcmp(url, "/metrics")) {
		char *m;

		pthread_mutex_lock(&P.mu);
		m = panel_metrics(&P);
		pthread_mutex_unlock(&P.mu);
		if (!m)
			return MHD_NO;
		return reply(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", m, strlen(m),
			     MHD_RESPMEM_MUST_FREE);
	}
	for (size_t i = 0; i < NASSETS; i++)
		if (!strcmp(url, assets[i].path))
			return reply(conn, MHD_HTTP_OK, assets[i].type, assets[i].data, assets[i].len,
				     MHD_RESPMEM_PERSISTENT);
	return refuse(conn, MHD_HTTP_NOT_FOUND, false,
		      "no such page (this panel serves /, /clock/NAME, /events, /api/status, "
		      "/api/control, /metrics)");
}

static void completed(void *cls, struct MHD_Connection *conn, void **ctx,
		      enum MHD_RequestTerminationCode why)
{
	(void)cls;
	(void)why;
	free(*ctx);
	*ctx = NULL;
	/* Kept alive: the next request has the same deadline. */
	conn_waiting(conn, true);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "name", required_argument, NULL, 'n' },
		{ "listen", required_argument, NULL, 'l' },
		{ "control", no_argument, NULL, 'C' },
		{ "token-file", required_argument, NULL, 'T' },
		{ "status-interval", required_argument, NULL, 'S' },
		{ "max-streams", required_argument, NULL, 'M' },
		{ "static-dir", required_argument, NULL, 'D' },
		{ "socket", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ "help-metrics", no_argument, NULL, 'H' },
		{ 0 },
	};
	const char *listen = "127.0.0.1:8077", *token_file = NULL, *static_dir = NULL;
	struct sockaddr_storage ss;
	struct MHD_Daemon *d;
	const union MHD_DaemonInfo *di;
	pthread_t poller, status_poller;
	sigset_t sigs;
	char addr[64], *end;
	long v;
	int c, sig;

	opterr = 0; /* our own one-line message */
	while ((c = getopt_long(argc, argv, "n:l:h", opts, NULL)) != -1) {
		switch (c) {
		case 'n':
			if (cli_check_name("shmclock-panel", optarg))
				return 2;
			if (panel_add_clock(&P, optarg, true) == -ENOSPC) {
				fprintf(stderr, "shmclock-panel: at most %d clocks\n", PANEL_CLOCKS_MAX);
				return 2;
			}
			break;
		case 's':
			/* The control socket of the clock named just before: a
			 * daemon run with --socket PATH (issue 52). */
			if (!P.nclocks || P.clocks[P.nclocks - 1].sock_given) {
				fprintf(stderr, "shmclock-panel: --socket PATH follows the -n NAME it is for "
						"(one each), not '%s'\n", optarg);
				return 2;
			}
			if (strlen(optarg) >= sizeof(P.clocks[0].sock)) {
				fprintf(stderr, "shmclock-panel: --socket: a path of at most %zu bytes, "
						"not '%s'\n", sizeof(P.clocks[0].sock) - 1, optarg);
				return 2;
			}
			snprintf(P.clocks[P.nclocks - 1].sock, sizeof(P.clocks[0].sock), "%s", optarg);
			P.clocks[P.nclocks - 1].sock_given = true;
			break;
		case 'l':
			listen = optarg;
			break;
		case 'C':
			P.control = true;
			break;
		case 'T':
			token_file = optarg;
			break;
		case 'S':
		case 'M':
			v = strtol(optarg, &end, 10);
			if (end == optarg || *end || (c == 'S' && (v < 100 || v > 60000)) ||
			    (c == 'M' && (v < 1 || v > 200))) {
				fprintf(stderr, "shmclock-panel: --%s takes a whole number %s, not '%s'\n",
					c == 'S' ? "status-interval" : "max-streams",
					c == 'S' ? "of ms from 100 to 60000" : "from 1 to 200", optarg);
				return 2;
			}
			*(c == 'S' ? &P.status_ms : &max_streams) = (int)v;
			break;
		case 'D':
			static_dir = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'H':
			panel_metric_list(print_metric, stdout);
			return 0;
		default:
			fprintf(stderr, "shmclock-panel: unknown option or missing argument '%s' (see --help)\n",
				argv[optind - 1]);
			return 2;
		}
	}
	if (cli_no_args("shmclock-panel", argc, argv, optind))
		return 2;
	if (parse_listen(listen, &ss)) {
		fprintf(stderr, "shmclock-panel: --listen takes ADDR:PORT (127.0.0.1:8077, [::1]:8077), not '%s'\n",
			listen);
		return 2;
	}
	/* A browser names the address it connects to, never 0.0.0.0 or ::,
	 * so every control request would be refused by the Host check:
	 * refused here, at once, with the reason (issue 52). */
	if (P.control && listen_wildcard(&ss)) {
		fprintf(stderr, "shmclock-panel: --control needs --listen on one address (the Host a "
				"browser sends), not the wildcard '%s'\n", listen);
		return 2;
	}
	if (P.control != (token_file != NULL)) {
		fprintf(stderr, "shmclock-panel: %s\n", P.control
			? "--control needs --token-file FILE (mode 0600, the token on its first line)"
			: "--token-file is only for --control");
		return 2;
	}
	if (token_file && load_token(token_file))
		return 2;
	if (load_assets(static_dir))
		return 1;
	P.every = P.nclocks == 0;
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	/* Every thread started below inherits the mask: only sigwait() sees them. */
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	panel_poll_once(&P, true);
	d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
				     (ss.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0),
			     0, NULL, NULL, handle, NULL,
			     MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
			     MHD_OPTION_CONNECTION_LIMIT, (unsigned)CONN_MAX,
			     MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONN_TIMEOUT_S,
			     MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONN_MEMORY,
			     MHD_OPTION_THREAD_STACK_SIZE, (size_t)(256 * 1024),
			     MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
			     MHD_OPTION_NOTIFY_CONNECTION, conn_notify, NULL,
			     MHD_OPTION_END);
	if (!d) {
		fprintf(stderr, "shmclock-panel: cannot listen on %s: %s\n", listen, strerror(errno));
		return 1;
	}
	di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	memcpy(addr, listen, (size_t)(strrchr(listen, ':') - listen));
	addr[strrchr(listen, ':') - listen] = 0;
	snprintf(host, sizeof(host), "%s:%u", addr, di ? (unsigned)di->port : 0);
	if (di && di->port == 80)
		snprintf(host_default_port, sizeof(host_default_port), "%s", addr);
	pthread_create(&poller, NULL, panel_poller, &P);
	pthread_create(&status_poller, NULL, panel_status_poller, &P);
	printf("shmclock-panel: serving http://%s/ (%d clock%s%s, control %s)\n", host, P.nclocks,
	       P.nclocks == 1 ? "" : "s", P.every ? ", and any that appear" : "",
	       P.control ? "on" : "off");
	fflush(stdout);
	/* Overdue requests are looked for once a second meanwhile. */
	for (;;) {
		struct timespec one = { 1, 0 };

		sig = sigtimedwait(&sigs, NULL, &one);
		if (sig == SIGINT || sig == SIGTERM)
			break;
		conns_reap();
	}
	pthread_mutex_lock(&P.mu);
	P.stop = true;
	pthread_cond_broadcast(&P.frame_cv);
	pthread_mutex_unlock(&P.mu);
	MHD_stop_daemon(d);
	pthread_join(poller, NULL);
	pthread_join(status_poller, NULL);
	return 0;
}
