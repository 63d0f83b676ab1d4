/* SPDX-License-Identifier: MIT */
/* What writer.c lends the lockstep host (lockstep.c), which runs beside a
 * writer: the page it holds, to mark it as in lockstep and to wake its
 * sleepers without a commit. */
#ifndef SHMCLOCK_WRITER_SEG_H
#define SHMCLOCK_WRITER_SEG_H

#include <shmclock/writer.h>

#include "segment.h"

struct shmclock_seg *shmclock__writer_seg(shmclock_writer_t *w);

#endif
