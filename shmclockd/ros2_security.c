/* SPDX-License-Identifier: MIT */
/*
 * DDS Security for the module's participant (ros2_security.h).
 *
 * Cyclone DDS says why it refuses a peer only in its log ("Begin handshake
 * reply failed: Certificate not valid: ... subject: /CN=rogue", "Could not
 * get remote participant GUID permissions from plugin: ...", "Remote secure
 * participant GUID not allowed"), over and over, on stderr. Its log
 * sink is taken here for the participant's life: a refusal is counted and
 * logged once per peer (its certificate's subject, else its GUID); other
 * messages go to the daemon's log, the first few of them.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ros2_security.h"

/* Cyclone's other messages logged at most this many times. */
#define SEC_OTHER_MAX 20

struct ros2_sec {
	char dir[PATH_MAX];
	void (*log)(enum log_level level, const char *fmt, ...);
	pthread_mutex_t mu;
	char said[256];              /* its last error or warning */
	uint64_t refused;            /* refusals, all peers */
	int npeers;                  /* peers named (at most ROS2_SEC_PEERS) ... */
	struct ros2_refused peers[ROS2_SEC_PEERS];
	uint64_t unnamed;            /* ... and refusals of peers beyond them */
	int others;                  /* other messages logged */
	bool listening;
	bool opening;                /* until ros2_sec_opened: messages kept, not logged */
	dds_entity_t domain;         /* ros2_sec_domain's, or 0 */
	char identity[ROS2_IDENTITY_MAX + 1]; /* its certificate's common name */
};

/* An enclave directory's files (SROS2's layout) and the DDS Security
 * property each one is given as. */
static const struct {
	const char *file, *prop;
} enclave_files[] = {
	{ "identity_ca.cert.pem", "dds.sec.auth.identity_ca" },
	{ "cert.pem", "dds.sec.auth.identity_certificate" },
	{ "key.pem", "dds.sec.auth.private_key" },
	{ "permissions_ca.cert.pem", "dds.sec.access.permissions_ca" },
	{ "governance.p7s", "dds.sec.access.governance" },
	{ "permissions.p7s", "dds.sec.access.permissions" },
};

struct ros2_sec *ros2_sec_new(const char *dir, void (*log)(enum log_level level, const char *fmt, ...))
{
	struct ros2_sec *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	snprintf(s->dir, sizeof(s->dir), "%s", dir);
	s->log = log;
	pthread_mutex_init(&s->mu, NULL);
	return s;
}

/* Cyclone DDS's security plugin @name ("auth", "ac", "crypto"): Debian's
 * layout (a libddsc0debian/ directory beside libddsc), else beside libddsc
 * (upstream's). 0, or -ENOENT with a one-line err. */
static int plugin_path(const char *name, char *out, size_t n, char *err, size_t errlen)
{
	/* dladdr takes an object pointer: a function's address through a
	 * union (ISO C has no cast between the two). */
	union {
		dds_entity_t (*fn)(const dds_domainid_t, const dds_qos_t *, const dds_listener_t *);
		void *p;
	} addr = { .fn = dds_create_participant };
	char dir[PATH_MAX] = "";
	char *slash;
	Dl_info di;

	if (dladdr(addr.p, &di) && di.dli_fname)
		snprintf(dir, sizeof(dir), "%s", di.dli_fname);
	if ((slash = strrchr(dir, '/'))) {
		*slash = 0;
		snprintf(out, n, "%s/libddsc0debian/libdds_security_%s.so", dir, name);
		if (!access(out, R_OK))
			return 0;
		snprintf(out, n, "%s/libdds_security_%s.so", dir, name);
		if (!access(out, R_OK))
			return 0;
	}
	snprintf(err, errlen, "Ros2.Security: Cyclone DDS's security plugin libdds_security_%s.so "
		 "is not beside %s or in its libddsc0debian/ (Debian: apt-get install libddsc0debian)",
		 name, dir[0] ? dir : "libddsc");
	return -ENOENT;
}

/* @n bytes from @from, up to the first of the @stops found ("" none), into
 * @out, trimmed. */
static void cut(const char *from, const char *const *stops, char *out, size_t n)
{
	size_t len = strlen(from);

	for (; *stops; stops++) {
		const char *e = strstr(from, *stops);

		if (e && (size_t)(e - from) < len)
			len = (size_t)(e - from);
	}
	while (len && (from[len - 1] == ' ' || from[len - 1] == '\n' || from[len - 1] == '.'))
		len--;
	if (len >= n)
		len = n - 1;
	memcpy(out, from, len);
	out[len] = 0;
}

/* @msg a refusal of a peer: its name and why, true. */
static bool refusal(const char *msg, char *peer, size_t pn, char *why, size_t wn)
{
	static const char *const to_subject[] = { "; subject:", "(code", "\n", NULL };
	static const char *const to_end[] = { "(code", "\n", NULL };
	static const char *const to_not[] = { " not allowed", NULL };
	const char *f, *sub, *p;

	if (strstr(msg, "handshake") && (f = strstr(msg, "failed: "))) {
		cut(f + 8, to_subject, why, wn);
		if ((sub = strstr(msg, "subject: ")))
			cut(sub + 9, to_end, peer, pn);
		else
			snprintf(peer, pn, "a peer without a subject");
		return true;
	}
	if ((p = strstr(msg, "Could not get remote participant ")) &&
	    (f = strstr(p, " permissions from plugin: "))) {
		/* Its identity passed, its permissions did not (signed by
		 * another CA, tampered with, for another subject). */
		static const char *const to_space[] = { " ", NULL };
		char guid[64], what[120];

		cut(p + 33, to_space, guid, sizeof(guid));
		snprintf(peer, pn, "participant %s", guid);
		cut(f + 26, to_end, what, sizeof(what));
		snprintf(why, wn, "its permissions: %s", what);
		return true;
	}
	if ((p = strstr(msg, "Remote secure participant ")) && strstr(p, " not allowed")) {
		char guid[64];

		cut(p + 26, to_not, guid, sizeof(guid));
		snprintf(peer, pn, "participant %s", guid);
		snprintf(why, wn, "its permissions do not let it join this domain");
		return true;
	}
	return false;
}

/* @str with every byte that is not printable ASCII as '?': a peer's
 * certificate subject is the peer's to choose, and goes to the log and
 * status (no terminal escapes, no line breaks, no bidirectional tricks). */
static void printable(char *str)
{
	for (unsigned char *c = (unsigned char *)str; *c; c++)
		if (*c < 0x20 || *c > 0x7e)
			*c = '?';
}

/* A refusal of @peer: counted, named once (at most ROS2_SEC_PEERS).
 * Under s->mu. */
static void count_refusal(struct ros2_sec *s, char *peer, char *why)
{
	int i;

	printable(peer);
	printable(why);
	s->refused++;
	for (i = 0; i < s->npeers && strcmp(s->peers[i].peer, peer); i++)
		;
	if (i < s->npeers) {
		s->peers[i].count++;
	} else if (s->npeers < ROS2_SEC_PEERS) {
		struct ros2_refused *r = &s->peers[s->npeers++];

		snprintf(r->peer, sizeof(r->peer), "%s", peer);
		snprintf(r->why, sizeof(r->why), "%s", why);
		r->count = 1;
		s->log(LOG_WARN, "DDS Security refused %s: %s (counted: status ros2.security_refused)",
		       peer, why);
	} else if (!s->unnamed++) {
		s->log(LOG_WARN, "DDS Security refused more than %d peers: the others are only "
				 "counted (status ros2.security_refused)", ROS2_SEC_PEERS);
	}
}

/* Cyclone's trace sink, discovery only (ros2_sec_domain): a participant
 * without DDS Security is refused silently, endpoint by endpoint ("Non
 * secure remote writer GUID is not allowed"); counted here under its
 * participant's GUID prefix. */
static void on_trace(void *ctx, const dds_log_data_t *d)
{
	static const char *const to_space[] = { " ", NULL };
	struct ros2_sec *s = ctx;
	const char *p = strstr(d->message, "Non secure remote ");
	char guid[64], peer[96];
	char *colon;

	if (!p || !(p = strchr(p + 18, ' ')))
		return;
	cut(p + 1, to_space, guid, sizeof(guid));
	/* The participant: the GUID less its entity id (the last field). */
	if ((colon = strrchr(guid, ':')))
		*colon = 0;
	char why[] = "it has no DDS Security: none of its writers and readers is matched";

	snprintf(peer, sizeof(peer), "participant %s", guid);
	pthread_mutex_lock(&s->mu);
	count_refusal(s, peer, why);
	pthread_mutex_unlock(&s->mu);
}

dds_entity_t ros2_sec_domain(struct ros2_sec *s, int domain)
{
	static const char frag[] = "<CycloneDDS><Domain id=\"any\"><Tracing><Category>discovery"
				   "</Category><OutputFile>/dev/null</OutputFile></Tracing></Domain>"
				   "</CycloneDDS>";
	const char *uri = getenv("CYCLONEDDS_URI");
	char *cfg = NULL;
	dds_entity_t d;

	/* Tracing the user set up is theirs: then such peers are not counted. */
	if (uri && strstr(uri, "<Tracing"))
		return 0;
	if (asprintf(&cfg, "%s%s%s", uri && *uri ? uri : "", uri && *uri ? "," : "", frag) < 0)
		return 0;
	d = dds_create_domain((dds_domainid_t)domain, cfg);
	free(cfg);
	if (d < 0)
		return 0; /* (made already: the participant takes it as it is) */
	s->domain = d;
	dds_set_trace_sink(on_trace, s);
	return d;
}

/* Cyclone's log sink (any of its threads). */
static void on_message(void *ctx, const dds_log_data_t *d)
{
	struct ros2_sec *s = ctx;
	const char *msg = d->message; /* the text alone (hdrsize: the header stderr would get) */
	static const char *const to_eol[] = { "\n", NULL };
	char peer[96], why[160], line[256];


	if (!(d->priority & (DDS_LC_FATAL | DDS_LC_ERROR | DDS_LC_WARNING)))
		return;
	pthread_mutex_lock(&s->mu);
	cut(msg, to_eol, s->said, sizeof(s->said));
	if (refusal(msg, peer, sizeof(peer), why, sizeof(why))) {
		count_refusal(s, peer, why);
	} else if (s->opening) {
		/* The participant being made: its reason goes into the one line
		 * that says it was refused (ros2_sec_said). */
	} else if (s->others < SEC_OTHER_MAX) {
		cut(msg, to_eol, line, sizeof(line));
		if (++s->others == SEC_OTHER_MAX)
			s->log(LOG_WARN, "Cyclone DDS: %s (its further messages are not logged)", line);
		else
			s->log(LOG_WARN, "Cyclone DDS: %s", line);
	}
	pthread_mutex_unlock(&s->mu);
}

/* The enclave's identity: the common name of the subject its signed
 * permissions grant (permissions.p7s, clear-signed S/MIME: the document
 * is there as text; Cyclone checks its signature and that it names the
 * certificate's subject). It begins the daemon's id between hosts and
 * names the partition of its answers (ros2.c): a name a partition can
 * hold as it is (no wildcard, no ".from.") and an id can begin with (no
 * '@'). 0, or
 * -errno with a one-line err. */
static int read_identity(struct ros2_sec *s, const char *path, char *err, size_t errlen)
{
	char buf[16384], *subj, *end, *cn, why[120];
	FILE *f = fopen(path, "r");
	size_t n, len;

	if (!f) {
		int e = errno;

		snprintf(err, errlen, "Ros2.Security: %s: %s", path, strerror(e));
		return -e;
	}
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	subj = strstr(buf, "<subject_name>");
	end = subj ? strstr(subj, "</subject_name>") : NULL;
	if (!end) {
		snprintf(err, errlen, "Ros2.Security: %s grants no subject_name (shmclock-pki(1))", path);
		return -EINVAL;
	}
	*end = 0;
	subj += strlen("<subject_name>");
	/* "CN=NAME", or CN among other attributes ("CN=NAME,O=..." or
	 * "O=..., CN=NAME"); SROS2's names hold '/' ("CN=/ns/node"). */
	for (cn = subj; (cn = strstr(cn, "CN=")) && cn != subj && cn[-1] != ',' && cn[-1] != ' ';
	     cn++)
		;
	len = cn ? strcspn(cn + 3, ",") : 0;
	if (!cn || !len || len > ROS2_IDENTITY_MAX) {
		printable(subj);
		snprintf(err, errlen, "Ros2.Security: %s: subject '%.80s' has no common name of 1 to %d "
			 "characters (shmclock-pki(1))", path, subj, ROS2_IDENTITY_MAX);
		return -EINVAL;
	}
	memcpy(s->identity, cn + 3, len);
	s->identity[len] = 0;
	if (!ros2_sec_identity_ok(s->identity, why, sizeof(why))) {
		printable(s->identity);
		snprintf(err, errlen, "Ros2.Security: %s: common name '%s' %s (shmclock-pki(1))", path,
			 s->identity, why);
		return -EINVAL;
	}
	return 0;
}

bool ros2_sec_identity_ok(const char *name, char *why, size_t len)
{
	size_t n = strlen(name);
	const char *c = name;

	while (*c > ' ' && *c <= '~' && !strchr("*?[]\\@#;:", *c))
		c++;
	if (!n || n > ROS2_IDENTITY_MAX) {
		if (why)
			snprintf(why, len, "is not 1 to %d characters", ROS2_IDENTITY_MAX);
		return false;
	}
	/* "shmclock.C.from.NAME" names one identity only if no NAME holds
	 * ".from." (another's, "x.from.NAME", would end like NAME's). */
	if (strstr(name, ".from.")) {
		if (why)
			snprintf(why, len, "holds '.from.', which shmclock's partitions reserve");
		return false;
	}
	if (*c) {
		if (why)
			snprintf(why, len, "has '%c': a shmclock identity is printable, without "
				 "spaces, '*?[]\\@#;:'", *c > ' ' && *c <= '~' ? *c : '?');
		return false;
	}
	return true;
}

const char *ros2_sec_identity(const struct ros2_sec *s)
{
	return s->identity;
}

/* @peer's sample refused: counted and named as every refusal. */
void ros2_sec_refuse(struct ros2_sec *s, const char *peer, const char *why)
{
	char p[96], w[160];

	snprintf(p, sizeof(p), "%s", peer);
	snprintf(w, sizeof(w), "%s", why);
	pthread_mutex_lock(&s->mu);
	count_refusal(s, p, w);
	pthread_mutex_unlock(&s->mu);
}

int ros2_sec_qos(struct ros2_sec *s, dds_qos_t *qos, char *err, size_t errlen)
{
	static const struct {
		const char *name, *init, *fini, *prop;
	} plugins[] = {
		{ "auth", "init_authentication", "finalize_authentication", "dds.sec.auth.library" },
		{ "ac", "init_access_control", "finalize_access_control", "dds.sec.access.library" },
		{ "crypto", "init_crypto", "finalize_crypto", "dds.sec.crypto.library" },
	};
	char abs[PATH_MAX], path[PATH_MAX + 64], val[PATH_MAX + 80], prop[64];

	if (!realpath(s->dir, abs)) {
		int e = errno;

		snprintf(err, errlen, "Ros2.Security: %s: %s (an enclave directory: shmclock-pki(1))",
			 s->dir, strerror(e));
		return -e;
	}
	for (size_t i = 0; i < sizeof(enclave_files) / sizeof(enclave_files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", abs, enclave_files[i].file);
		if (access(path, R_OK)) {
			int e = errno;
			char all[200] = "";

			/* What an enclave holds, from the table. */
			for (size_t j = 0; j < sizeof(enclave_files) / sizeof(enclave_files[0]); j++)
				snprintf(all + strlen(all), sizeof(all) - strlen(all), "%s%s",
					 j ? ", " : "", enclave_files[j].file);
			snprintf(err, errlen, "Ros2.Security: %s: %s (an enclave holds %s: "
				 "shmclock-pki(1))", path, strerror(e), all);
			return -e;
		}
		snprintf(val, sizeof(val), "file:%s", path);
		dds_qset_prop(qos, enclave_files[i].prop, val);
		if (!strcmp(enclave_files[i].file, "permissions.p7s")) {
			int r = read_identity(s, path, err, errlen);

			if (r)
				return r;
		}
	}
	for (size_t i = 0; i < sizeof(plugins) / sizeof(plugins[0]); i++) {
		int r = plugin_path(plugins[i].name, path, sizeof(path), err, errlen);

		if (r)
			return r;
		snprintf(prop, sizeof(prop), "%s.path", plugins[i].prop);
		dds_qset_prop(qos, prop, path);
		snprintf(prop, sizeof(prop), "%s.init", plugins[i].prop);
		dds_qset_prop(qos, prop, plugins[i].init);
		snprintf(prop, sizeof(prop), "%s.finalize", plugins[i].prop);
		dds_qset_prop(qos, prop, plugins[i].fini);
	}
	/* Synchronous: every Cyclone thread uses it once this returns. */
	s->opening = true;
	dds_set_log_sink(on_message, s);

	s->listening = true;
	return 0;
}

void ros2_sec_opened(struct ros2_sec *s)
{
	pthread_mutex_lock(&s->mu);
	s->opening = false;
	pthread_mutex_unlock(&s->mu);
}

const char *ros2_sec_said(struct ros2_sec *s)
{
	return s->said;
}

void ros2_sec_stats(struct ros2_sec *s, struct ros2_stats *st)
{
	pthread_mutex_lock(&s->mu);
	st->secured = true;
	st->sec_refused = s->refused;
	st->sec_npeers = s->npeers;
	memcpy(st->sec_peers, s->peers, sizeof(s->peers));
	pthread_mutex_unlock(&s->mu);
}

void ros2_sec_free(struct ros2_sec *s)
{
	if (!s)
		return;
	if (s->domain > 0)
		dds_delete(s->domain);
	/* Synchronous too: no Cyclone thread is in on_message after it. */
	if (s->listening)
		dds_set_log_sink(NULL, NULL);
	if (s->domain > 0)
		dds_set_trace_sink(NULL, NULL);
	pthread_mutex_destroy(&s->mu);
	free(s);
}
