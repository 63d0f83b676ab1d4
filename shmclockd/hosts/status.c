/* SPDX-License-Identifier: MIT */
/*
 * The hosts mode's status: the "distribute" object.
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <shmclock/time.h>
/* After shmclock.h: shmclock_static_eval(), the function readers evaluate. */
#include <shmclock/static/shmclock.h>

#include "log.h"
#include "hosts/dist.h"

/* This process's UDP sockets, DDS's: the datagrams the kernel dropped at
 * them (their receive buffers full: a daemon stopped or starved while its
 * peers went on), the "drops" column of /proc/self/net/udp and udp6 for
 * the sockets among its descriptors; and the smallest receive buffer the
 * kernel granted them (Cyclone DDS asks for 1 MiB; net.core.rmem_max caps
 * it). False: unknown. */
bool dist_udp_sockets(double *drops, double *rcvbuf)
{
	static const char *const tables[] = { "/proc/self/net/udp", "/proc/self/net/udp6" };
	struct {
		unsigned long inode;
		int fd;
	} socks[64];
	unsigned n = 0;
	bool read_any = false;
	struct dirent *e;
	DIR *fds = opendir("/proc/self/fd");

	*drops = 0;
	*rcvbuf = -1;
	if (!fds)
		return false;
	while ((e = readdir(fds)) && n < sizeof(socks) / sizeof(socks[0])) {
		char link[64];
		ssize_t len = readlinkat(dirfd(fds), e->d_name, link, sizeof(link) - 1);

		if (len > 0) {
			link[len] = 0;
			if (sscanf(link, "socket:[%lu]", &socks[n].inode) == 1) {
				socks[n].fd = atoi(e->d_name);
				n++;
			}
		}
	}
	closedir(fds);
	for (unsigned t = 0; t < 2; t++) {
		char line[512];
		FILE *f = fopen(tables[t], "re");

		if (!f)
			continue; /* udp6 on a host without IPv6 */
		read_any = true;
		while (fgets(line, sizeof(line), f)) {
			unsigned long inode, dropped;

			/* sl local rem st tx:rx tr:when retrnsmt uid timeout inode ref pointer drops */
			if (sscanf(line, " %*s %*s %*s %*s %*s %*s %*s %*s %*s %lu %*s %*s %lu", &inode,
				   &dropped) != 2)
				continue;
			for (unsigned i = 0; i < n; i++) {
				int size = 0;
				socklen_t sl = sizeof(size);

				if (socks[i].inode != inode)
					continue;
				*drops += (double)dropped;
				/* The kernel's figure: twice what was granted. */
				if (!getsockopt(socks[i].fd, SOL_SOCKET, SO_RCVBUF, &size, &sl) &&
				    (*rcvbuf < 0 || size / 2 < *rcvbuf))
					*rcvbuf = size / 2;
			}
		}
		fclose(f);
	}
	return read_any;
}

/* Status: the "distribute" object. */
void dist_status(struct clock_mode *m, cJSON *status, const struct shmclockd_config *cfg,
		 const shmclock_info_t *in, bool stale)
{
	struct dist *d = dist_of(m);
	cJSON *o = cJSON_CreateObject();
	struct dist_stats st;

	(void)cfg;
	(void)in;
	d->api->dist_get_stats(d->r, &st);
	cJSON_AddStringToObject(o, "role", d->leader ? "leader" : "follower");
	cJSON_AddStringToObject(o, "clock", d->clock);
	pthread_mutex_lock(&d->st.mu);
	cJSON_AddStringToObject(o, "leader", d->st.leader_id);
	cJSON_AddNumberToObject(o, "changes", (double)d->st.changes);
	cJSON_AddNumberToObject(o, "reanchors", (double)d->st.reanchors);
	cJSON_AddNumberToObject(o, "offset_ns", (double)d->st.last_off);
	cJSON_AddNumberToObject(o, "queued", (double)d->st.queued);
	if (!d->leader)
		cJSON_AddNumberToObject(o, "holding", (double)d->st.holding);
	cJSON_AddNumberToObject(o, "term", (double)d->st.term);
	cJSON_AddNumberToObject(o, "conflicts", (double)d->st.conflicts);
	if (d->st.conflicts && mono_ns() - d->st.conflict_mono < DIST_CONFLICT_SHOW_NS) {
		cJSON_AddTrueToObject(o, "conflict");
		cJSON_AddStringToObject(o, "conflict_with", d->st.conflict_with);
		cJSON_AddNumberToObject(o, "conflict_term", (double)d->st.conflict_term);
	} else {
		cJSON_AddFalseToObject(o, "conflict");
	}
	{
		uint64_t counts[LATEHIST_N];

		/* Changes committed at their effective instant: how long after. */
		if (latehist_copy(&d->st.applied, counts)) {
			cJSON_AddNumberToObject(o, "applied_p50_ns", (double)latehist_quantile(counts, 0.5));
			cJSON_AddNumberToObject(o, "applied_p99_ns", (double)latehist_quantile(counts, 0.99));
			cJSON_AddNumberToObject(o, "applied_max_ns", (double)latehist_quantile(counts, 1.0));
		}
	}
	cJSON_AddNumberToObject(o, "lead_current_ns", (double)d->st.lead);
	/* Changes whose readers switched at the instant by themselves (the
	 * rest were committed at or after it, readers held meanwhile). */
	cJSON_AddNumberToObject(o, "decided_ahead", (double)d->st.staged);
	if (d->leader) {
		uint64_t counts[LATEHIST_N];
		cJSON *fs = cJSON_AddArrayToObject(o, "followers");
		int64_t now = mono_ns();
		const struct dist_member *slowest = NULL;

		/* Two-phase: the members, how long their acknowledgements take,
		 * from a client's change to its commit. */
		for (unsigned i = 0; i < d->st.n_members; i++) {
			const struct dist_member *mb = &d->st.members[i];
			cJSON *f = cJSON_CreateObject();

			cJSON_AddStringToObject(f, "id", mb->id);
			cJSON_AddNumberToObject(f, "acked", (double)mb->acked);
			cJSON_AddNumberToObject(f, "committed", (double)mb->committed);
			cJSON_AddNumberToObject(f, "last_heard_ns", (double)(now - mb->seen));
			cJSON_AddNumberToObject(f, "last_ack_ns", (double)mb->last_ack_ns);
			cJSON_AddNumberToObject(f, "late_changes", (double)mb->late);
			cJSON_AddNumberToObject(f, "refused", (double)mb->refused);
			cJSON_AddNumberToObject(f, "holds", (double)mb->holds);
			cJSON_AddNumberToObject(f, "slowest", mb->slowest);
			cJSON_AddItemToArray(fs, f);
			if (mb->straggler)
				slowest = mb;
		}
		/* The straggler every change waits for, by name. */
		if (slowest)
			cJSON_AddStringToObject(o, "slowest", slowest->id);
		if (latehist_copy(&d->st.acks, counts)) {
			cJSON_AddNumberToObject(o, "ack_p50_ns", (double)latehist_quantile(counts, 0.5));
			cJSON_AddNumberToObject(o, "ack_p99_ns", (double)latehist_quantile(counts, 0.99));
		}
		if (latehist_copy(&d->st.to_commit, counts)) {
			cJSON_AddNumberToObject(o, "commit_p50_ns", (double)latehist_quantile(counts, 0.5));
			cJSON_AddNumberToObject(o, "commit_p99_ns", (double)latehist_quantile(counts, 0.99));
		}
		cJSON_AddNumberToObject(o, "postponed", (double)d->st.postponed);
		cJSON_AddNumberToObject(o, "lost_followers", (double)d->st.lost_members);
		cJSON_AddNumberToObject(o, "asked_aside", (double)d->st.asked_aside);
		cJSON_AddNumberToObject(o, "lead_ns", (double)d->lead_ns);
		cJSON_AddBoolToObject(o, "deposed", d->st.deposed);
		cJSON_AddNumberToObject(o, "heartbeat_ns", (double)d->hb_ns);
		cJSON_AddNumberToObject(o, "sent", (double)st.sent);
		cJSON_AddNumberToObject(o, "acks_received", (double)st.acks_received);
	} else {
		cJSON_AddNumberToObject(o, "late_changes", (double)d->st.late);
		{
			uint64_t counts[LATEHIST_N];

			if (latehist_copy(&d->st.lateness, counts)) {
				cJSON_AddNumberToObject(
					o, "late_p50_ns",
					(double)latehist_quantile_max(counts, 0.5, d->st.worst_late_ns));
				cJSON_AddNumberToObject(
					o, "late_p99_ns",
					(double)latehist_quantile_max(counts, 0.99, d->st.worst_late_ns));
			}
		}
		cJSON_AddNumberToObject(o, "worst_late_ns", (double)d->st.worst_late_ns);
		cJSON_AddNumberToObject(o, "last_late_ns", (double)d->st.last_late_ns);
		cJSON_AddNumberToObject(o, "leaders", (double)d->st.leaders);
		cJSON_AddNumberToObject(o, "refused", (double)d->st.refused);
		if (d->st.have_host_offset) {
			cJSON_AddNumberToObject(o, "host_offset_ns", (double)d->st.host_offset_ns);
			cJSON_AddBoolToObject(o, "clocks_disagree", d->st.clocks_disagree);
		}
		if (d->st.refused_last[0])
			cJSON_AddStringToObject(o, "refused_last", d->st.refused_last);
		cJSON_AddNumberToObject(o, "holds", (double)d->st.holds);
		cJSON_AddNumberToObject(o, "hold_stales", (double)d->st.hold_stales);
		cJSON_AddNumberToObject(o, "ran_past_instant", (double)d->st.ran_past);
		cJSON_AddNumberToObject(o, "lease_expired", (double)d->st.lease_expired);
		/* Its leader lost, by what noticed it (dist_lost_leader). */
		{
			cJSON *l = cJSON_AddObjectToObject(o, "leader_losses");

			for (int i = 0; i < LOSS_N; i++)
				cJSON_AddNumberToObject(l, dist_loss_name(i), (double)d->st.losses[i]);
			cJSON_AddStringToObject(o, "last_loss", dist_loss_name(d->st.last_loss));
		}
		/* The leader's echoes of this follower's leases: how many, how
		 * long ago the last one; whether it waits for one to be fresh. */
		cJSON_AddNumberToObject(o, "echoes", (double)d->st.echoes);
		cJSON_AddNumberToObject(o, "last_echo_age_ns",
					d->st.echo_mono ? (double)(mono_ns() - d->st.echo_mono) : -1.0);
		cJSON_AddBoolToObject(o, "awaiting_echo", d->st.admit_wait);
		cJSON_AddNumberToObject(o, "acks_sent", (double)st.acks_sent);
		cJSON_AddNumberToObject(o, "received", (double)st.received);
		cJSON_AddNumberToObject(o, "lost", (double)st.lost);
		cJSON_AddNumberToObject(o, "last_message_age_ns", (double)st.last_age_ns);
		cJSON_AddStringToObject(o, "on_leader_loss", d->run_on_loss ? "run" : "hold");
	}
	pthread_mutex_unlock(&d->st.mu);
	{
		double drops, rcvbuf;

		if (dist_udp_sockets(&drops, &rcvbuf)) {
			cJSON_AddNumberToObject(o, "udp_drops", drops);
			if (rcvbuf >= 0)
				cJSON_AddNumberToObject(o, "udp_rcvbuf_bytes", rcvbuf);
		}
	}
	cJSON_AddBoolToObject(o, "stale", stale);
	cJSON_AddItemToObject(status, "distribute", o);
}
