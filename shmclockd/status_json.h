/* SPDX-License-Identifier: MIT */
/*
 * Reading the daemon's status reply (request.c writes it): a field, or a
 * harmless default when it is absent or of another type, so that a client
 * shows what an older or newer daemon sends. Shared by shmclockctl and
 * shmclock-panel.
 */
#ifndef SHMCLOCKD_STATUS_JSON_H
#define SHMCLOCKD_STATUS_JSON_H

#include <cjson/cJSON.h>
#include <stdbool.h>

/* The string @k of @st, or "?". */
static inline const char *str_of(const cJSON *st, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(st, k);

	return cJSON_IsString(v) ? v->valuestring : "?";
}

/* The number @k of @st, or 0. */
static inline double num_of(const cJSON *st, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(st, k);

	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* Whether @k of @st is true (absent: false). */
static inline bool bool_of(const cJSON *st, const char *k)
{
	return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(st, k));
}

#endif
