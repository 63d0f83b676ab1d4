/* SPDX-License-Identifier: MIT */
/* The plain clock mode (mode_plain.h). */
#include <stdlib.h>

#include <shmclock/time.h>

#include "log.h"
#include "mode_plain.h"
#include "ros2.h"
#include "source.h"
#include "thread_sched.h"

static struct mode_plain *plain(struct clock_mode *m)
{
	return (struct mode_plain *)m;
}

static int plain_start(struct clock_mode *m, const struct clock_env *env)
{
	struct mode_plain *p = plain(m);

	/* The first tick at once. */
	p->next = p->pub_next = shmclock_steady_now().ns;
	p->pub_period = 1000000000 / (env->cfg->ros2_hz > 0 ? env->cfg->ros2_hz : 100);
	p->dirty = true;
	return 0;
}

static int plain_change(struct clock_mode *m, const struct clock_env *env, struct cmd *c,
			const shmclock_info_t *in)
{
	(void)env;
	(void)in;
	/* The period may follow (the fixed source's follows the scale;
	 * PublishHz and StepNs reload), whether the command succeeds or not. */
	if (c->req.kind == CMD_SCALE || c->req.kind == CMD_RELOAD || c->req.kind == CMD_INIT)
		plain(m)->dirty = true;
	return CLOCK_MODE_PASS;
}

/* Over windows of about a second of running time: the rate simulated time
 * really advanced at. Paused, or jumped: a new window. */
static void measure_scale(struct mode_plain *p, const struct clock_env *env, int64_t now)
{
	shmclock_info_t in;

	shmclock_writer_info(env->w, &in);
	if (!in.initialized || in.paused || in.jump_epoch != p->win_epoch || !p->win_mono) {
		p->win_mono = now;
		p->win_sim = in.sim_ns;
		p->win_epoch = in.jump_epoch;
		if (in.paused)
			tick_stats_set_achieved(env->ticks, 0.0);
		return;
	}
	if (now - p->win_mono < 1000000000)
		return;
	tick_stats_set_achieved(env->ticks,
				(double)(in.sim_ns - p->win_sim) / (double)(now - p->win_mono));
	p->win_mono = now;
	p->win_sim = in.sim_ns;
}

static int64_t plain_tick(struct clock_mode *m, const struct clock_env *env, int64_t now)
{
	struct mode_plain *p = plain(m);

	if (p->dirty) {
		p->dirty = false;
		p->period = source_period(env->cfg, env->w);
		thread_set_slack(env->ros2_pub && p->pub_period < p->period ? p->pub_period : p->period);
	}
	if (env->ros2_pub && now >= p->pub_next) {
		shmclock_info_t in;

		shmclock_writer_info(env->w, &in);
		if (in.initialized && env->ros2_api->publish(env->ros2_pub, in.sim_ns) < 0)
			log_msg(LOG_DEBUG, "ros2: a /clock write failed");
		p->pub_next += p->pub_period;
		if (p->pub_next <= now)
			p->pub_next += ((now - p->pub_next) / p->pub_period + 1) * p->pub_period;
	}
	if (now >= p->next) {
		tick_stats_record(env->ticks, now - p->next);
		if (env->cfg->source->ops->tick)
			env->cfg->source->ops->tick(env->w, env->cfg, now);
		if (p->on_tick)
			p->on_tick(p, env, now);
		measure_scale(p, env, now);
		shmclock_writer_heartbeat(env->w);
		p->next += p->period;
		if (p->next <= now) {
			/* Fell behind by whole periods: skip them rather than
			 * burst (a fixed source would otherwise race ahead). */
			int64_t missed = (now - p->next) / p->period + 1;

			tick_stats_skipped(env->ticks, (uint64_t)missed);
			p->next += missed * p->period;
		}
		return CLOCK_MODE_AGAIN;
	}
	return env->ros2_pub && p->pub_next < p->next ? p->pub_next : p->next;
}

static void plain_destroy(struct clock_mode *m)
{
	free(plain(m));
}

const struct clock_mode_ops mode_plain_ops = {
	.name = "plain",
	.start = plain_start,
	.change = plain_change,
	.tick = plain_tick,
	.destroy = plain_destroy,
};

void mode_plain_init(struct mode_plain *p,
		     void (*on_tick)(struct mode_plain *p, const struct clock_env *env, int64_t now))
{
	*p = (struct mode_plain){ .m.ops = &mode_plain_ops, .on_tick = on_tick };
}

struct clock_mode *mode_plain_create(void)
{
	struct mode_plain *p = malloc(sizeof(*p));

	if (p)
		mode_plain_init(p, NULL);
	return p ? &p->m : NULL;
}
