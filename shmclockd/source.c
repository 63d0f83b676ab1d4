/* SPDX-License-Identifier: MIT */
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>

#include "source.h"

#define SOURCE_ROW(value, id_, name_, alias_, flags, help_)                  \
	{                                                                    \
		.name = #name_,                                              \
		.alias = alias_,                                             \
		.help = help_,                                               \
		.id = SHMCLOCK_SOURCE_##id_,                                 \
		.stepped = !!((flags) & SHMCLOCK_SOURCE_F_STEPPED),          \
		.continuous = !!((flags) & SHMCLOCK_SOURCE_F_CONTINUOUS),    \
		.own_scale = !!((flags) & SHMCLOCK_SOURCE_F_OWN_SCALE),      \
		.ops = &source_##name_##_ops,                                \
	},
static const struct source sources[] = { SHMCLOCK_SOURCE_MAP(SOURCE_ROW) };
#undef SOURCE_ROW

#define N_SOURCES (sizeof(sources) / sizeof(sources[0]))

const struct source *source_lookup(const char *name, const char **why)
{
	*why = NULL;
	for (size_t i = 0; i < N_SOURCES; i++)
		if (!strcasecmp(name, sources[i].name) ||
		    (sources[i].alias && !strcasecmp(name, sources[i].alias))) {
			*why = sources[i].ops->missing;
			return *why ? NULL : &sources[i];
		}
	return NULL;
}

const struct source *source_by_id(int id)
{
	for (size_t i = 0; i < N_SOURCES; i++)
		if (sources[i].id == id)
			return &sources[i];
	return NULL;
}

/* Built once, by whichever thread asks first. */
static char names[256], leader_names[128];
static pthread_once_t names_once = PTHREAD_ONCE_INIT;

/* Appends item @i of @count: "a, b" with @last before the last item. */
static void join(char *buf, size_t n, size_t i, size_t count, const char *last,
		 const struct source *s, bool alias)
{
	size_t used = strlen(buf);

	alias = alias && s->alias;
	snprintf(buf + used, n - used, "%s%s%s%s%s", i == 0 ? "" : i + 1 == count ? last : ", ",
		 s->name, alias ? " (alias " : "", alias ? s->alias : "", alias ? ")" : "");
}

static void names_build(void)
{
	const struct source *built[N_SOURCES], *lead[N_SOURCES];
	size_t nb = 0, nl = 0;

	for (size_t i = 0; i < N_SOURCES; i++) {
		if (sources[i].ops->missing)
			continue;
		built[nb++] = &sources[i];
		if (source_can_lead(&sources[i]))
			lead[nl++] = &sources[i];
	}
	for (size_t i = 0; i < nb; i++)
		join(names, sizeof(names), i, nb, ", ", built[i], true);
	for (size_t i = 0; i < nl; i++)
		join(leader_names, sizeof(leader_names), i, nl, " or ", lead[i], false);
}

const char *source_names(void)
{
	pthread_once(&names_once, names_build);
	return names;
}

const char *source_leader_names(void)
{
	pthread_once(&names_once, names_build);
	return leader_names;
}

void source_help(FILE *f)
{
	fprintf(f, "Time sources (--source, TimeSource):\n");
	for (size_t i = 0; i < N_SOURCES; i++) {
		const struct source *s = &sources[i];
		char name[32];

		snprintf(name, sizeof(name), "%s%s%s", s->name, s->alias ? ", " : "",
			 s->alias ? s->alias : "");
		fprintf(f, "  %-23s%s%s\n", name, s->help, s->ops->missing ? " (not built)" : "");
	}
}

int64_t source_period(const struct shmclockd_config *c, shmclock_writer_t *w)
{
	shmclock_info_t in;

	if (!c->source->ops->period)
		return 1000000000 / c->hz;
	shmclock_writer_info(w, &in);
	return c->source->ops->period(c, in.scale);
}
