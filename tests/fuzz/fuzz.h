/* SPDX-License-Identifier: MIT */
/*
 * What every fuzz target shares: the libFuzzer entry point and a check that
 * aborts with a message (an abort is what libFuzzer and the replay runner
 * both report as a failure, with the input that caused it).
 */
#ifndef SHMCLOCK_FUZZ_H
#define SHMCLOCK_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Run before a failed check aborts (atexit handlers do not run on abort):
 * a target that made files removes them here. */
static __attribute__((unused)) void (*fuzz_cleanup_hook)(void);

#define FUZZ_CHECK(cond, ...)                                                          \
	do {                                                                           \
		if (!(cond)) {                                                         \
			fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, \
				#cond);                                                \
			fprintf(stderr, __VA_ARGS__);                                  \
			fputc('\n', stderr);                                           \
			if (fuzz_cleanup_hook)                                         \
				fuzz_cleanup_hook();                                   \
			abort();                                                       \
		}                                                                      \
	} while (0)

/* An error message users see: one non-empty line of printable text. */
static inline int fuzz_one_line(const char *msg)
{
	if (!msg[0])
		return 0;
	for (const unsigned char *p = (const unsigned char *)msg; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return 0;
	return 1;
}

/* The input as a NUL-terminated string (the caller frees it). */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);

	if (!s)
		abort();
	memcpy(s, data, size);
	s[size] = '\0';
	return s;
}

#endif
