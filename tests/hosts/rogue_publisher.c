/* SPDX-License-Identifier: MIT */
/*
 * A TimeFunction and TimeAck publisher that is not shmclockd, for the tests
 * of what a follower refuses and what a leader takes (guard_e2e.py): it
 * writes whatever it is told, fields and all, on the topics leaders and
 * followers use, with their QoS.
 *
 *   rogue-publisher DOMAIN CLOCK
 *
 * Each line on stdin is one sample:
 *   LEADER CHANGE EFFECTIVE_NS SIM_BASE_NS MULT FLAGS JUMP_EPOCH HEARTBEAT_NS [COMMITTED [PLAN [LEAD_NS]]]
 * (EFFECTIVE_NS in CLOCK_REALTIME, timebase 0; COMMITTED, the changes said
 * committed, CHANGE unless given: CHANGE - 1 makes the sample an
 * announcement; PLAN, 0 unless given: a higher one moves a change announced
 * before, as a leader's postponement does; LEAD_NS, the leader's Lead, 0
 * unless given), or one acknowledgement:
 *   ack FOLLOWER LEADER TERM PLAN ACKED COMMITTED LEASE_NS LATE REFUSED HOLDS
 * (FOLLOWER or LEADER "-": empty), reliably as a lease; "ackbe" the same,
 * best effort, as an acknowledgement, with one more field: AGE_NS, how
 * long before now it says it was written (its source timestamp). Or a
 * leader's echo of leases:
 *   echo LEADER TERM CHANGE [WRITTEN_NS [COUNT]]
 * echoes each lease (a reliable TimeAck with a lease) of the clock taken
 * since the last "echo", waiting up to 3 s for one, as LEADER's of TERM
 * that announced CHANGE; with WRITTEN_NS, one echo with that stamp to
 * every follower whose lease it took instead (a forged one); with COUNT,
 * COUNT of them for each lease taken, stamped WRITTEN_NS, WRITTEN_NS + 1,
 * ... (a flood). Or
 *   match
 * waits up to 10 s until a reader (a follower) matched its TimeFunction
 * writer, so that the next sample reaches it at once. Or
 *   echostate FOLLOWER
 * what a leader's echoes to FOLLOWER are, as a follower's reader sees them:
 * "alive", "gone" (the leader let the instance go) or "none". Echoes are
 * written and read in each follower's partition (ros2_echo_partition), as
 * a leader and a follower do. It answers
 * "ok" (an echo: "ok N", N the echoes written) or "error" on stdout after
 * each; end of input ends it.
 *
 * With ROGUE_FROM=PARTITION in the environment it is a secured follower
 * (its identity from CYCLONEDDS_URI): only the TimeAck writers, in that
 * partition, as a secured shmclockd writes its answers
 * ("shmclock.CLOCK.from.IDENTITY", ros2.c); only "ack" lines, and
 * lockstep grants:
 *   grant HOST LEADER SEQ GRANT_NS LEASE_NS MEMBERS
 * (best effort, as a follower host's, its clock's time GRANT_NS).
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dds/dds.h>

#include "TimeFunction.h"
#include "ros2_qos.h"

/* A writer of echoes to one follower, and a reader of them, each in that
 * follower's partition: made at the first use. */
#define PEERS_MAX 32
static struct peer {
	char follower[97];
	dds_entity_t w, r;
} peers[PEERS_MAX];

static dds_entity_t echo_entity(dds_entity_t pp, dds_entity_t etopic, const char *clock,
				const char *follower, bool reader)
{
	struct peer *p = NULL;
	char part[ROS2_ECHO_PARTITION_LEN];
	dds_entity_t *e;
	dds_qos_t *q;

	for (int i = 0; i < PEERS_MAX && !p; i++)
		if (!peers[i].follower[0] || !strcmp(peers[i].follower, follower))
			p = &peers[i];
	if (!p)
		return -1;
	snprintf(p->follower, sizeof(p->follower), "%s", follower);
	e = reader ? &p->r : &p->w;
	if (*e > 0)
		return *e;
	/* As a leader's echo writer and a follower's reader (ros2.c). */
	q = dds_create_qos();
	dds_qset_reliability(q, DDS_RELIABILITY_RELIABLE, DDS_MSECS(100));
	dds_qset_durability(q, DDS_DURABILITY_TRANSIENT_LOCAL);
	dds_qset_history(q, DDS_HISTORY_KEEP_LAST, 1);
	ros2_echo_partition(part, sizeof(part), clock, follower);
	dds_qset_partition1(q, part);
	*e = reader ? dds_create_reader(pp, etopic, q, NULL) : dds_create_writer(pp, etopic, q, NULL);
	dds_delete_qos(q);
	return *e;
}

int main(int argc, char **argv)
{
	dds_entity_t pp, topic, wr, atopic, awr, bwr, ard, etopic, gtopic = 0, gwr = 0;
	dds_qos_t *q;
	char line[512];
	uint64_t seq = 0;
	const char *from;

	if (argc != 3) {
		fprintf(stderr, "usage: rogue-publisher DOMAIN CLOCK\n");
		return 2;
	}
	pp = dds_create_participant((dds_domainid_t)atoi(argv[1]), NULL, NULL);
	if (pp < 0) {
		fprintf(stderr, "rogue-publisher: no participant: %s\n", dds_strretcode(pp));
		return 1;
	}
	from = getenv("ROGUE_FROM");
	topic = from ? 1 : dds_create_topic(pp, &shmclock_TimeFunction_desc, "shmclock_TimeFunction",
					    NULL, NULL);
	/* As a leader's writer (ros2.c, dist_qos). */
	q = dds_create_qos();
	dds_qset_reliability(q, DDS_RELIABILITY_RELIABLE, DDS_MSECS(100));
	dds_qset_durability(q, DDS_DURABILITY_TRANSIENT_LOCAL);
	dds_qset_history(q, DDS_HISTORY_KEEP_LAST, 1);
	wr = from ? 1 : dds_create_writer(pp, topic, q, NULL);
	dds_delete_qos(q);
	/* As a follower's lease writer (reliable, volatile). */
	atopic = dds_create_topic(pp, &shmclock_TimeAck_desc, "shmclock_TimeAck", NULL, NULL);
	q = dds_create_qos();
	dds_qset_reliability(q, DDS_RELIABILITY_RELIABLE, DDS_MSECS(100));
	dds_qset_history(q, DDS_HISTORY_KEEP_LAST, 1);
	if (from)
		dds_qset_partition1(q, from);
	awr = atopic < 0 ? atopic : dds_create_writer(pp, atopic, q, NULL);
	dds_qset_reliability(q, DDS_RELIABILITY_BEST_EFFORT, 0);
	bwr = atopic < 0 ? atopic : dds_create_writer(pp, atopic, q, NULL);
	if (from) {
		/* As a follower host's grant writer (ros2.c, ls_writer). */
		gtopic = dds_create_topic(pp, &shmclock_LockstepGrant_desc, "shmclock_LockstepGrant",
					  NULL, NULL);
		gwr = gtopic < 0 ? gtopic : dds_create_writer(pp, gtopic, q, NULL);
	}
	dds_delete_qos(q);
	/* As a leader's lease reader and echo writer (reliable, volatile). */
	q = dds_create_qos();
	dds_qset_reliability(q, DDS_RELIABILITY_RELIABLE, DDS_MSECS(100));
	dds_qset_history(q, DDS_HISTORY_KEEP_LAST, 16);
	ard = atopic < 0 || from ? atopic : dds_create_reader(pp, atopic, q, NULL);
	dds_qset_history(q, DDS_HISTORY_KEEP_LAST, 1);
	etopic = from ? 1 : dds_create_topic(pp, &shmclock_TimeEcho_desc, "shmclock_TimeEcho", NULL, NULL);
	dds_delete_qos(q);
	if (topic < 0 || wr < 0 || awr < 0 || bwr < 0 || ard < 0 || etopic < 0 || gwr < 0) {
		dds_return_t rc = topic < 0 ? topic : wr < 0 ? wr : awr < 0 ? awr : bwr < 0 ? bwr
				  : ard < 0 ? ard : etopic < 0 ? etopic : gwr;

		fprintf(stderr, "rogue-publisher: no writer: %s\n", dds_strretcode(rc));
		dds_delete(pp);
		return 1;
	}
	while (fgets(line, sizeof(line), stdin)) {
		shmclock_TimeFunction m;

		if (from && !strncmp(line, "grant ", 6)) {
			shmclock_LockstepGrant g;
			char host[97], lead[97];

			memset(&g, 0, sizeof(g));
			if (sscanf(line + 6, "%96s %96s %" SCNu64 " %" SCNd64 " %" SCNd64 " %" SCNu32,
				   host, lead, &g.seq, &g.grant_ns, &g.lease_ns, &g.members) != 6) {
				puts("error: bad grant line");
				fflush(stdout);
				continue;
			}
			snprintf(g.clock, sizeof(g.clock), "%s", argv[2]);
			snprintf(g.host, sizeof(g.host), "%s", host);
			snprintf(g.leader, sizeof(g.leader), "%s", strcmp(lead, "-") ? lead : "");
			g.shown_ns = g.grant_ns;
			puts(dds_write(gwr, &g) >= 0 ? "ok" : "error: write failed");
			fflush(stdout);
			continue;
		}
		if (from && strncmp(line, "ack ", 4) && strncmp(line, "ackbe ", 6)) {
			puts("error: only acks and grants with ROGUE_FROM");
			fflush(stdout);
			continue;
		}
		char leader[97];
		struct timespec ts;
		int ok;

		int n;

		if (!strncmp(line, "echostate ", 10)) {
			shmclock_TimeEcho k;
			void *ptrs[1] = { 0 };
			dds_sample_info_t info;
			dds_instance_handle_t h;
			const char *state = "none";

			memset(&k, 0, sizeof(k));
			snprintf(k.clock, sizeof(k.clock), "%s", argv[2]);
			if (sscanf(line + 10, "%96s", k.follower) != 1) {
				puts("error: bad echostate line");
				fflush(stdout);
				continue;
			}
			dds_entity_t erd = echo_entity(pp, etopic, argv[2], k.follower, true);

			h = erd > 0 ? dds_lookup_instance(erd, &k) : 0;
			if (h && dds_read_instance(erd, ptrs, &info, 1, 1, h) == 1) {
				state = info.instance_state == DDS_IST_ALIVE ? "alive" : "gone";
				dds_return_loan(erd, ptrs, 1);
			}
			printf("ok %s\n", state);
			fflush(stdout);
			continue;
		}
		if (!strcmp(line, "match\n")) {
			dds_publication_matched_status_t st = { 0 };

			for (int tries = 0; tries < 1000; tries++) {
				if (dds_get_publication_matched_status(wr, &st) < 0 || st.current_count > 0)
					break;
				dds_sleepfor(DDS_MSECS(10));
			}
			puts(st.current_count > 0 ? "ok" : "error: no reader matched");
			fflush(stdout);
			continue;
		}
		if (!strncmp(line, "echo ", 5)) {
			shmclock_TimeEcho e;
			char lead[97];
			int64_t forged = 0;
			int written = 0, count = 1;

			memset(&e, 0, sizeof(e));
			n = sscanf(line + 5, "%96s %" SCNu64 " %" SCNu64 " %" SCNd64 " %d", lead, &e.term,
				   &e.change, &forged, &count);
			if (n < 3 || count < 1) {
				puts("error: bad echo line");
				fflush(stdout);
				continue;
			}
			snprintf(e.clock, sizeof(e.clock), "%s", argv[2]);
			snprintf(e.leader, sizeof(e.leader), "%s", lead);
			for (int tries = 0; tries < 300 && !written; tries++) {
				void *ptrs[16] = { 0 };
				dds_sample_info_t infos[16];
				int k = dds_take(ard, ptrs, infos, 16, 16);

				for (int i = 0; i < k; i++) {
					const shmclock_TimeAck *a = ptrs[i];

					if (!infos[i].valid_data || strcmp(a->clock, argv[2]) ||
					    a->lease_ns <= 0)
						continue;
					dds_entity_t ewr = echo_entity(pp, etopic, argv[2], a->follower,
								       false);

					snprintf(e.follower, sizeof(e.follower), "%s", a->follower);
					for (int j = 0; ewr > 0 && j < (n >= 4 ? count : 1); j++) {
						e.written_ns = n >= 4 ? forged + j : infos[i].source_timestamp;
						written += dds_write(ewr, &e) >= 0;
					}
				}
				if (k > 0)
					dds_return_loan(ard, ptrs, k);
				if (!written)
					dds_sleepfor(DDS_MSECS(10));
			}
			printf(written ? "ok %d\n" : "error: no lease to echo\n", written);
			fflush(stdout);
			continue;
		}
		if (!strncmp(line, "ack ", 4) || !strncmp(line, "ackbe ", 6)) {
			bool be = line[3] == 'b';
			shmclock_TimeAck a;
			char follower[97], lead[97];

			memset(&a, 0, sizeof(a));
			int64_t age = 0;

			n = sscanf(line + (be ? 6 : 4), "%96s %96s %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64
					     " %" SCNd64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNd64,
				   follower, lead, &a.term, &a.plan, &a.acked, &a.committed, &a.lease_ns,
				   &a.late, &a.refused, &a.holds, &age);
			if (n != (be ? 11 : 10)) {
				puts("error: bad ack line");
				fflush(stdout);
				continue;
			}
			snprintf(a.clock, sizeof(a.clock), "%s", argv[2]);
			snprintf(a.follower, sizeof(a.follower), "%s", strcmp(follower, "-") ? follower : "");
			snprintf(a.leader, sizeof(a.leader), "%s", strcmp(lead, "-") ? lead : "");
			ok = (be ? dds_write_ts(bwr, &a, dds_time() - age) : dds_write(awr, &a)) >= 0;
			puts(ok ? "ok" : "error: write failed");
			fflush(stdout);
			continue;
		}
		memset(&m, 0, sizeof(m));
		n = sscanf(line, "%96s %" SCNu64 " %" SCNd64 " %" SCNd64 " %" SCNu64 " %" SCNu32
				 " %" SCNu64 " %" SCNd64 " %" SCNu64 " %" SCNu64 " %" SCNd64,
			   leader, &m.change, &m.effective_ns, &m.sim_base_ns, &m.mult, &m.flags,
			   &m.jump_epoch, &m.heartbeat_ns, &m.committed, &m.plan, &m.lead_ns);
		if (n < 8 || n > 11) {
			puts("error: bad line");
			fflush(stdout);
			continue;
		}
		snprintf(m.clock, sizeof(m.clock), "%s", argv[2]);
		snprintf(m.leader, sizeof(m.leader), "%s", leader);
		m.term = 1;
		m.seq = ++seq;
		/* Unless told: a function in force, committed up to itself. */
		if (n == 8)
			m.committed = m.change;
		clock_gettime(CLOCK_REALTIME, &ts);
		m.sent_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
		ok = dds_write(wr, &m) >= 0;
		puts(ok ? "ok" : "error: write failed");
		fflush(stdout);
	}
	dds_delete(pp);
	return 0;
}
