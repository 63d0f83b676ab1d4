/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dds/dds.h>

#include "Clock.h"
#include "ros2.h"
#include "ros2_qos.h"

#define ROS2_TOPIC "rt/clock"
#define ROS2_TAKE_MAX 16
#define ROS2_POLL_NS 50000000 /* how often the follower looks at staleness */

struct ros2 {
	struct ros2_host host;
	int domain;
	dds_entity_t participant, topic, reader, writer, waitset, readcond, stop_guard;
	/* following */
	int64_t stale_ns;
	pthread_t thread;
	bool thread_started;
	/* statistics: written by the follower thread and the clock thread,
	 * read by the control thread; under the mutex */
	pthread_mutex_t mu;
	uint64_t samples, published;
	int64_t last_mono, ewma_interval_ns;
	bool stale;
};

static int64_t mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ROS Time <-> ns. Negative times have a negative sec and 0 <= nanosec <
 * 1e9; beyond int32 seconds saturates. */
static void time_from_ns(int64_t ns, int32_t *sec, uint32_t *nanosec)
{
	int64_t s = ns / 1000000000, n = ns % 1000000000;

	if (n < 0) {
		n += 1000000000;
		s--;
	}
	if (s > INT32_MAX) {
		s = INT32_MAX;
		n = 999999999;
	} else if (s < INT32_MIN) {
		s = INT32_MIN;
		n = 0;
	}
	*sec = (int32_t)s;
	*nanosec = (uint32_t)n;
}

static int64_t time_to_ns(int32_t sec, uint32_t nanosec)
{
	return (int64_t)sec * 1000000000 + (int64_t)nanosec;
}

static int dds_fail(char *err, size_t errlen, const char *what, dds_return_t rc)
{
	snprintf(err, errlen, "DDS: %s: %s", what, dds_strretcode(rc));
	return -EIO;
}

static void ros2_close(struct ros2 *r);

static int ros2_open(struct ros2 **out, int domain, const struct ros2_host *host, char *err,
		     size_t errlen)
{
	static const char enclave[] = "enclave=/;";
	struct ros2 *r = calloc(1, sizeof(*r));
	dds_qos_t *qos;

	*out = NULL;
	if (!r)
		return -ENOMEM;
	r->host = *host;
	r->domain = domain;
	r->last_mono = -1;
	pthread_mutex_init(&r->mu, NULL);
	/* What the ROS 2 RMW layers put in the participant's user data. */
	qos = dds_create_qos();
	dds_qset_userdata(qos, enclave, sizeof(enclave) - 1);
	r->participant = dds_create_participant((dds_domainid_t)domain, qos, NULL);
	dds_delete_qos(qos);
	if (r->participant < 0) {
		int rc = dds_fail(err, errlen, "cannot create a participant (check CYCLONEDDS_URI)",
				  r->participant);

		free(r);
		return rc;
	}
	r->topic = dds_create_topic(r->participant, &rosgraph_msgs_msg_dds__Clock__desc, ROS2_TOPIC,
				    NULL, NULL);
	if (r->topic < 0) {
		int rc = dds_fail(err, errlen, "cannot create topic " ROS2_TOPIC, r->topic);

		ros2_close(r);
		return rc;
	}
	*out = r;
	return 0;
}

static void take_samples(struct ros2 *r)
{
	void *ptrs[ROS2_TAKE_MAX] = { 0 };
	dds_sample_info_t infos[ROS2_TAKE_MAX];
	int n = dds_take(r->readcond, ptrs, infos, ROS2_TAKE_MAX, ROS2_TAKE_MAX);

	for (int i = 0; i < n; i++) {
		const rosgraph_msgs_msg_dds__Clock_ *m = ptrs[i];
		char why[256] = "";
		int64_t now;

		if (!infos[i].valid_data)
			continue;
		if (r->host.sample(r->host.ctx, time_to_ns(m->clock.sec, m->clock.nanosec), why,
				   sizeof(why)))
			r->host.log(LOG_WARN, "ros2: /clock sample refused: %s", why);
		now = mono_now();
		pthread_mutex_lock(&r->mu);
		if (r->last_mono >= 0) {
			int64_t dt = now - r->last_mono;

			/* An average over the last ~16 intervals. */
			r->ewma_interval_ns = r->ewma_interval_ns ?
						      r->ewma_interval_ns + (dt - r->ewma_interval_ns) / 16 :
						      dt;
		}
		r->last_mono = now;
		r->samples++;
		if (r->stale) {
			r->stale = false;
			r->host.log(LOG_INFO, "ros2: /clock samples arrive again");
		}
		pthread_mutex_unlock(&r->mu);
	}
	if (n > 0)
		dds_return_loan(r->readcond, ptrs, n);
}

static void *follow_main(void *arg)
{
	struct ros2 *r = arg;
	dds_attach_t hits[2];

	for (;;) {
		int n = dds_waitset_wait(r->waitset, hits, 2, ROS2_POLL_NS);
		bool stop = false;

		for (int i = 0; i < n; i++)
			if (hits[i] == (dds_attach_t)r->stop_guard)
				stop = true;
		if (stop)
			break;
		take_samples(r);
		pthread_mutex_lock(&r->mu);
		if (!r->stale && r->stale_ns > 0 && r->last_mono >= 0 &&
		    mono_now() - r->last_mono > r->stale_ns) {
			r->stale = true;
			r->host.log(LOG_WARN, "ros2: no /clock sample for %.3f s: the clock is stale",
				(double)r->stale_ns / 1e9);
		}
		pthread_mutex_unlock(&r->mu);
	}
	return NULL;
}

static int ros2_follow(struct ros2 *r, int64_t stale_ns, char *err, size_t errlen)
{
	dds_qos_t *qos = ros2_clock_qos(DDS_RELIABILITY_BEST_EFFORT);
	int rc;

	r->stale_ns = stale_ns;
	r->reader = dds_create_reader(r->participant, r->topic, qos, NULL);
	dds_delete_qos(qos);
	if (r->reader < 0)
		return dds_fail(err, errlen, "cannot create the /clock reader", r->reader);
	r->readcond = dds_create_readcondition(r->reader, DDS_ANY_STATE);
	r->waitset = dds_create_waitset(r->participant);
	r->stop_guard = dds_create_guardcondition(r->participant);
	if (r->readcond < 0 || r->waitset < 0 || r->stop_guard < 0 ||
	    dds_waitset_attach(r->waitset, r->readcond, (dds_attach_t)r->readcond) < 0 ||
	    dds_waitset_attach(r->waitset, r->stop_guard, (dds_attach_t)r->stop_guard) < 0)
		return dds_fail(err, errlen, "cannot wait for /clock", DDS_RETCODE_ERROR);
	rc = pthread_create(&r->thread, NULL, follow_main, r);
	if (rc) {
		snprintf(err, errlen, "ros2: thread: %s", strerror(rc));
		return -rc;
	}
	r->thread_started = true;
	return 0;
}

static int ros2_publisher(struct ros2 *r, char *err, size_t errlen)
{
	dds_qos_t *qos = ros2_clock_qos(DDS_RELIABILITY_RELIABLE);

	r->writer = dds_create_writer(r->participant, r->topic, qos, NULL);
	dds_delete_qos(qos);
	if (r->writer < 0)
		return dds_fail(err, errlen, "cannot create the /clock writer", r->writer);
	return 0;
}

static int ros2_publish(struct ros2 *r, int64_t sim_ns)
{
	rosgraph_msgs_msg_dds__Clock_ m;
	dds_return_t rc;

	time_from_ns(sim_ns, &m.clock.sec, &m.clock.nanosec);
	rc = dds_write(r->writer, &m);
	if (rc < 0)
		return -EIO;
	pthread_mutex_lock(&r->mu);
	r->published++;
	pthread_mutex_unlock(&r->mu);
	return 0;
}

static void ros2_get_stats(struct ros2 *r, struct ros2_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->domain = r->domain;
	st->following = r->reader > 0;
	st->publishing = r->writer > 0;
	pthread_mutex_lock(&r->mu);
	st->samples = r->samples;
	st->published = r->published;
	st->rate_hz = r->ewma_interval_ns > 0 ? 1e9 / (double)r->ewma_interval_ns : 0;
	st->last_age_ns = r->last_mono >= 0 ? mono_now() - r->last_mono : -1;
	st->stale = r->stale || (r->reader > 0 && r->last_mono < 0);
	pthread_mutex_unlock(&r->mu);
}

static void ros2_stop(struct ros2 *r)
{
	if (!r || !r->thread_started)
		return;
	dds_set_guardcondition(r->stop_guard, true);
	pthread_join(r->thread, NULL);
	r->thread_started = false;
}

static void ros2_close(struct ros2 *r)
{
	if (!r)
		return;
	ros2_stop(r);
	if (r->participant > 0)
		dds_delete(r->participant);
	pthread_mutex_destroy(&r->mu);
	free(r);
}

__attribute__((visibility("default"))) const struct ros2_api shmclockd_ros2_api = {
	.open = ros2_open,
	.follow = ros2_follow,
	.publisher = ros2_publisher,
	.publish = ros2_publish,
	.get_stats = ros2_get_stats,
	.stop = ros2_stop,
	.close = ros2_close,
};
