/* SPDX-License-Identifier: MIT */
/* The recorder (record.h). */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <shmclock/time.h>
#include <shmclock/version.h>

#include "log.h"
#include "record.h"

#define RING 16384u         /* entries: 1.6 s of changes at 10 kHz */
#define BATCH_NS 10000000L  /* a chunk about every 10 ms while changes come */

struct entry {
	int ch; /* TL_CH_* */
	union {
		struct tl_change c;
		struct tl_lockstep e;
		struct tl_hosts h;
	} u;
};

/* What the summary needs of each chunk written. */
struct chunk_ix {
	uint64_t start, end;     /* log times */
	uint64_t offset, length; /* the Chunk record's */
	uint64_t mi_offset[TL_NCHANNELS + 1], mi_length;
	uint64_t records;        /* the chunk's records' bytes */
};

struct recorder {
	char *path;
	int fd;
	bool owned;                /* this daemon made the file (Record, --record) */
	char clock[72];
	pthread_t thread;

	/* The ring: the clock thread produces, the recorder's thread consumes. */
	struct entry *ring;
	_Atomic uint64_t head;     /* next to fill (the clock thread's) */
	_Atomic uint64_t tail;     /* next to take (the recorder's) */
	_Atomic uint32_t wake;     /* futex word the recorder sleeps on */
	_Atomic bool sleeping;     /* it does, or is about to */
	_Atomic bool stop;
	uint64_t seq;              /* function changes handed over (clock thread) */

	/* Seen by status (relaxed: figures). */
	_Atomic uint64_t written, dropped, chunks, bytes;
	_Atomic int error;         /* the last failed write's errno (0: none so far) */

	/* The recorder's thread's own. */
	uint64_t pos;              /* the file's length: every byte before it is whole */
	uint32_t data_crc;         /* of every byte before pos */
	uint32_t ch_seq[TL_NCHANNELS + 1];
	uint64_t ch_count[TL_NCHANNELS + 1];  /* messages in the chunks written */
	uint64_t cc[TL_NCHANNELS + 1];        /* ... in the open chunk */
	uint64_t msg_start, msg_end, nmsg;    /* log times and messages written */
	struct chunk_ix *ix;
	size_t nix, ixcap;
	struct mcap_buf chunk, out;
	struct mcap_buf mi[TL_NCHANNELS + 1]; /* each channel's index entries */
	bool reported;             /* the current error was logged */
};

static void futex_wait(_Atomic uint32_t *w, uint32_t v)
{
	syscall(SYS_futex, w, FUTEX_WAIT | FUTEX_PRIVATE_FLAG, v, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *w)
{
	syscall(SYS_futex, w, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, INT_MAX, NULL, NULL, 0);
}

static int64_t wall_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The clock thread's side: one entry into the ring, or counted dropped. */
static void push(struct recorder *r, const struct entry *e)
{
	uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed); /* our own */
	/* Acquire: pairs with the consumer's release store of tail; the slot
	 * it freed is read out before we overwrite it. */
	uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire);

	if (h - t >= RING) {
		atomic_fetch_add_explicit(&r->dropped, 1, memory_order_relaxed);
		return;
	}
	r->ring[h % RING] = *e;
	/* Release: pairs with the consumer's acquire load of head; the entry
	 * is whole before it is seen. */
	atomic_store_explicit(&r->head, h + 1, memory_order_release);
	/* Seq_cst fence: our head store before our load of sleeping, against
	 * the consumer's store of sleeping before its load of head (its fence
	 * in consume()): one of us sees the other's, so no entry sleeps. */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&r->sleeping, memory_order_relaxed)) {
		atomic_store_explicit(&r->sleeping, false, memory_order_relaxed);
		atomic_fetch_add_explicit(&r->wake, 1, memory_order_relaxed);
		futex_wake(&r->wake);
	}
}

void recorder_change(struct recorder *r, const shmclock_function_t *fn, const struct tl_cause *why)
{
	struct entry e = { .ch = TL_CH_FUNCTION };
	struct tl_change *c = &e.u.c;

	*c = (struct tl_change){
		.seq = r->seq++,
		.commits = fn->commits,
		.mono_base = fn->mono_base,
		.sim_base = fn->sim_base,
		.rate = fn->rate,
		.nominal_mult = fn->nominal_mult,
		.paused = fn->flags & SHMCLOCK_FN_PAUSED,
		.stepped = fn->flags & SHMCLOCK_FN_STEPPED,
		.stale = fn->flags & SHMCLOCK_FN_STALE,
		.initialized = fn->initialized,
		.source = fn->source,
		.jump_epoch = fn->jump_epoch,
		.last_jump_ns = fn->last_jump_ns,
		.jump_total_ns = fn->jump_total_ns,
		.has_unix_at_zero = fn->has_unix_at_zero,
		.unix_at_zero_ns = fn->unix_at_zero_ns,
		.wall_ns = wall_now(),
		.at_mono_ns = shmclock_steady_now().ns,
		.cause = *why,
	};
	push(r, &e);
}

void recorder_lockstep(struct recorder *r, const struct tl_lockstep *ev)
{
	struct entry e = { .ch = TL_CH_LOCKSTEP };

	e.u.e = *ev;
	if (!e.u.e.wall_ns)
		e.u.e.wall_ns = wall_now();
	push(r, &e);
}

void recorder_hosts(struct recorder *r, const struct tl_hosts *h)
{
	struct entry e = { .ch = TL_CH_HOSTS };

	e.u.h = *h;
	if (!e.u.h.wall_ns)
		e.u.h.wall_ns = wall_now();
	push(r, &e);
}

/* --- the recorder's thread --- */

/* @b whole at the file's end: 0, or -errno with the file cut back to
 * where it was (no partial record stays). */
static int append(struct recorder *r, const struct mcap_buf *b)
{
	size_t done = 0;

	if (b->oom)
		return -ENOMEM;
	while (done < b->len) {
		ssize_t k = pwrite(r->fd, b->p + done, b->len - done, (off_t)(r->pos + done));

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			int e = k < 0 ? errno : ENOSPC;

			if (ftruncate(r->fd, (off_t)r->pos) < 0) {
				/* What is past pos is a partial record: a reader
				 * stops there, as after a crash. */
			}
			return -e;
		}
		done += (size_t)k;
	}
	r->data_crc = mcap_crc32(r->data_crc, b->p, b->len);
	r->pos += b->len;
	atomic_store_explicit(&r->bytes, r->pos, memory_order_relaxed);
	return 0;
}

static void report(struct recorder *r, int e, uint64_t lost)
{
	atomic_fetch_add_explicit(&r->dropped, lost, memory_order_relaxed);
	atomic_store_explicit(&r->error, e, memory_order_relaxed);
	if (!r->reported)
		log_msg(LOG_ERROR, "record: writing %s failed at byte %" PRIu64 ": %s; %" PRIu64
			" changes lost (the clock goes on; the file is whole up to there)",
			r->path, r->pos, strerror(e), lost);
	r->reported = true;
}

/* Encodes @e into the open chunk, whose log times span [*cs, *ce]. */
static void add(struct recorder *r, const struct entry *e, uint64_t *cs, uint64_t *ce)
{
	char json[1024];
	size_t n, off = r->chunk.len;
	uint64_t log_time;
	int64_t t;
	uint64_t pub;

	if (e->ch == TL_CH_FUNCTION) {
		n = tl_change_json(&e->u.c, json, sizeof(json));
		t = e->u.c.sim_base;
		pub = (uint64_t)(e->u.c.wall_ns > 0 ? e->u.c.wall_ns : 0);
	} else if (e->ch == TL_CH_HOSTS) {
		n = tl_hosts_json(&e->u.h, json, sizeof(json));
		t = e->u.h.sim_ns;
		pub = (uint64_t)(e->u.h.wall_ns > 0 ? e->u.h.wall_ns : 0);
	} else {
		n = tl_lockstep_json(&e->u.e, json, sizeof(json));
		t = e->u.e.sim_ns;
		pub = (uint64_t)(e->u.e.wall_ns > 0 ? e->u.e.wall_ns : 0);
	}
	if (n >= sizeof(json))
		n = sizeof(json) - 1; /* cannot happen: every field is bounded */
	log_time = t > 0 ? (uint64_t)t : 0;
	mcap_put_message(&r->chunk, (uint16_t)e->ch, r->ch_seq[e->ch]++, log_time, pub, json, n);
	mcap_put_u64(&r->mi[e->ch], log_time);
	mcap_put_u64(&r->mi[e->ch], off);
	if (log_time < *cs)
		*cs = log_time;
	if (log_time > *ce)
		*ce = log_time;
	r->cc[e->ch]++;
}

/* Writes the open chunk and its message indexes (one write). */
static void flush(struct recorder *r, uint64_t start, uint64_t end, uint64_t n)
{
	struct chunk_ix ci = { .start = start, .end = end, .offset = r->pos };
	struct mcap_buf *o = &r->out;
	size_t s;

	if (!r->chunk.len)
		return;
	o->len = 0;
	o->oom = false;
	s = mcap_begin(o, MCAP_OP_CHUNK);
	mcap_put_u64(o, start);
	mcap_put_u64(o, end);
	mcap_put_u64(o, r->chunk.len);
	mcap_put_u32(o, mcap_crc32(0, r->chunk.p, r->chunk.len));
	mcap_put_str(o, "");
	mcap_put_u64(o, r->chunk.len);
	mcap_put_bytes(o, r->chunk.p, r->chunk.len);
	mcap_end(o, s);
	ci.length = o->len;
	ci.records = r->chunk.len;
	for (int ch = 1; ch <= TL_NCHANNELS; ch++) {
		if (!r->mi[ch].len)
			continue;
		ci.mi_offset[ch] = r->pos + o->len;
		s = mcap_begin(o, MCAP_OP_MESSAGE_INDEX);
		mcap_put_u16(o, (uint16_t)ch);
		mcap_put_u32(o, (uint32_t)r->mi[ch].len);
		mcap_put_bytes(o, r->mi[ch].p, r->mi[ch].len);
		mcap_end(o, s);
		r->mi[ch].len = 0;
	}
	ci.mi_length = o->len - ci.length;
	r->chunk.len = 0;
	{
		bool oom = r->chunk.oom;

		for (int ch = 1; ch <= TL_NCHANNELS; ch++) {
			oom |= r->mi[ch].oom;
			r->mi[ch].oom = false;
		}
		r->chunk.oom = false;
		if (oom) {
			memset(r->cc, 0, sizeof(r->cc));
			report(r, ENOMEM, n);
			return;
		}
	}
	{
		int e = append(r, o);

		/* The summary counts what the file holds: a chunk cut off
		 * again is not in it. */
		if (e) {
			memset(r->cc, 0, sizeof(r->cc));
			report(r, -e, n);
			return;
		}
	}
	for (int ch = 1; ch <= TL_NCHANNELS; ch++) {
		r->ch_count[ch] += r->cc[ch];
		r->cc[ch] = 0;
	}
	if (!r->nmsg || start < r->msg_start)
		r->msg_start = start;
	if (!r->nmsg || end > r->msg_end)
		r->msg_end = end;
	r->nmsg += n;
	if (r->nix == r->ixcap) {
		size_t cap = r->ixcap ? r->ixcap * 2 : 256;
		struct chunk_ix *q = realloc(r->ix, cap * sizeof(*q));

		if (!q) {
			report(r, ENOMEM, 0);
			return;
		}
		r->ix = q;
		r->ixcap = cap;
	}
	r->ix[r->nix++] = ci;
	r->reported = false; /* the next failure is logged again; status keeps the error */
	atomic_fetch_add_explicit(&r->written, n, memory_order_relaxed);
	atomic_fetch_add_explicit(&r->chunks, 1, memory_order_relaxed);
}

/* Takes everything queued into one chunk and writes it. */
static void consume(struct recorder *r)
{
	/* Acquire: pairs with push()'s release store of head. */
	uint64_t h = atomic_load_explicit(&r->head, memory_order_acquire);
	uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed); /* our own */
	uint64_t n = h - t;
	uint64_t start = UINT64_MAX, end = 0;

	if (!n)
		return;
	for (; t != h; t++) {
		add(r, &r->ring[t % RING], &start, &end);
		/* Release: pairs with push()'s acquire load of tail; the entry is
		 * read out before its slot is reused. */
		atomic_store_explicit(&r->tail, t + 1, memory_order_release);
	}
	flush(r, start, end, n);
}

static void *recorder_main(void *arg)
{
	struct recorder *r = arg;

	for (;;) {
		uint32_t w = atomic_load_explicit(&r->wake, memory_order_relaxed);
		bool stop;

		atomic_store_explicit(&r->sleeping, true, memory_order_relaxed);
		/* Seq_cst fence: pairs with push()'s (see there). */
		atomic_thread_fence(memory_order_seq_cst);
		stop = atomic_load_explicit(&r->stop, memory_order_acquire);
		if (atomic_load_explicit(&r->head, memory_order_relaxed) ==
			    atomic_load_explicit(&r->tail, memory_order_relaxed) &&
		    !stop) {
			futex_wait(&r->wake, w);
			continue;
		}
		atomic_store_explicit(&r->sleeping, false, memory_order_relaxed);
		if (!stop) {
			/* Let changes gather for a chunk: a wake costs the clock
			 * thread a system call, a chunk a write. */
			struct timespec ts = { 0, BATCH_NS };

			nanosleep(&ts, NULL);
		}
		consume(r);
		if (stop && atomic_load_explicit(&r->head, memory_order_acquire) ==
				    atomic_load_explicit(&r->tail, memory_order_relaxed))
			break;
	}
	return NULL;
}

/* The summary after the data: DataEnd, the channels again, statistics,
 * chunk indexes, their offsets, the footer and the closing magic. */
static int finish(struct recorder *r)
{
	struct mcap_buf *o = &r->out;
	uint64_t sum_start, groups[4][2], so_start, nch = 0;
	size_t s, base;
	int g = 0, e;

	o->len = 0;
	o->oom = false;
	s = mcap_begin(o, MCAP_OP_DATA_END);
	mcap_put_u32(o, r->data_crc);
	mcap_end(o, s);
	if ((e = append(r, o)))
		return e;
	sum_start = r->pos;
	o->len = 0;
	/* Schemas and channels (tl_put_channels puts them in pairs: two groups
	 * would need them apart; one group of both is what the spec's
	 * "group of records of one opcode" allows per opcode, so they are put
	 * separately here). */
	base = o->len;
	for (int ch = 1; ch <= TL_NCHANNELS; ch++)
		mcap_put_schema(o, (uint16_t)ch, tl_schema_name(ch), "jsonschema", tl_schema(ch));
	groups[g][0] = sum_start + base;
	groups[g++][1] = o->len - base;
	base = o->len;
	{
		const char *meta[] = { "shmclock.record", TL_VERSION, "shmclock.clock", r->clock, NULL };

		for (int ch = 1; ch <= TL_NCHANNELS; ch++)
			mcap_put_channel(o, (uint16_t)ch, (uint16_t)ch, tl_topic(ch), "json", meta);
	}
	groups[g][0] = sum_start + base;
	groups[g++][1] = o->len - base;
	base = o->len;
	s = mcap_begin(o, MCAP_OP_STATISTICS);
	{
		uint64_t total = 0;

		for (int ch = 1; ch <= TL_NCHANNELS; ch++) {
			total += r->ch_count[ch];
			nch += r->ch_count[ch] ? 1 : 0;
		}
		mcap_put_u64(o, total);
		mcap_put_u16(o, TL_NCHANNELS);
		mcap_put_u32(o, TL_NCHANNELS);
		mcap_put_u32(o, 0);
		mcap_put_u32(o, 0);
		mcap_put_u32(o, (uint32_t)r->nix);
		mcap_put_u64(o, total ? r->msg_start : 0);
		mcap_put_u64(o, total ? r->msg_end : 0);
		mcap_put_u32(o, (uint32_t)(nch * 10));
		for (int ch = 1; ch <= TL_NCHANNELS; ch++)
			if (r->ch_count[ch]) {
				mcap_put_u16(o, (uint16_t)ch);
				mcap_put_u64(o, r->ch_count[ch]);
			}
	}
	mcap_end(o, s);
	groups[g][0] = sum_start + base;
	groups[g++][1] = o->len - base;
	base = o->len;
	for (size_t i = 0; i < r->nix; i++) {
		const struct chunk_ix *ci = &r->ix[i];
		uint32_t n = 0;

		for (int ch = 1; ch <= TL_NCHANNELS; ch++)
			n += ci->mi_offset[ch] ? 10 : 0;
		s = mcap_begin(o, MCAP_OP_CHUNK_INDEX);
		mcap_put_u64(o, ci->start);
		mcap_put_u64(o, ci->end);
		mcap_put_u64(o, ci->offset);
		mcap_put_u64(o, ci->length);
		mcap_put_u32(o, n);
		for (int ch = 1; ch <= TL_NCHANNELS; ch++)
			if (ci->mi_offset[ch]) {
				mcap_put_u16(o, (uint16_t)ch);
				mcap_put_u64(o, ci->mi_offset[ch]);
			}
		mcap_put_u64(o, ci->mi_length);
		mcap_put_str(o, "");
		mcap_put_u64(o, ci->records);
		mcap_put_u64(o, ci->records);
		mcap_end(o, s);
	}
	if (r->nix) {
		groups[g][0] = sum_start + base;
		groups[g++][1] = o->len - base;
	}
	so_start = sum_start + o->len;
	{
		static const uint8_t ops[4] = { MCAP_OP_SCHEMA, MCAP_OP_CHANNEL, MCAP_OP_STATISTICS,
						MCAP_OP_CHUNK_INDEX };

		for (int i = 0; i < g; i++) {
			s = mcap_begin(o, MCAP_OP_SUMMARY_OFFSET);
			mcap_put_u8(o, ops[i]);
			mcap_put_u64(o, groups[i][0]);
			mcap_put_u64(o, groups[i][1]);
			mcap_end(o, s);
		}
	}
	/* The footer, its length known: the summary's CRC covers it up to
	 * the CRC itself. */
	mcap_put_u8(o, MCAP_OP_FOOTER);
	mcap_put_u64(o, 8 + 8 + 4);
	mcap_put_u64(o, sum_start);
	mcap_put_u64(o, so_start);
	if (!o->oom)
		mcap_put_u32(o, mcap_crc32(0, o->p, o->len));
	mcap_put_bytes(o, mcap_magic, MCAP_MAGIC_LEN);
	return append(r, o);
}

static void say_open_error(const char *path, int e, char *err, size_t errlen)
{
	snprintf(err, errlen, "record: %s: %s%s", path, strerror(e),
		 e == EEXIST ? " (a recording is never overwritten: remove it or name another)" : "");
}

int recorder_check(const char *path, char *err, size_t errlen)
{
	char dir[1024], *slash;
	struct stat st;

	if (!lstat(path, &st)) {
		say_open_error(path, EEXIST, err, errlen);
		return -EEXIST;
	}
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash == dir)
		slash[1] = 0;
	else if (slash)
		*slash = 0;
	else
		snprintf(dir, sizeof(dir), ".");
	if (access(dir, W_OK | X_OK)) {
		int e = errno;

		snprintf(err, errlen, "record: %s: its directory %s: %s", path, dir, strerror(e));
		return -e;
	}
	return 0;
}

/* The recorder on @fd (taken over: closed on failure), its file @path
 * (for status and messages; @owned: this daemon made it, and removes it
 * when it cannot start). */
static int start(int fd, const char *path, bool owned, const char *clock, struct recorder **out,
		 char *err, size_t errlen)
{
	struct recorder *r = calloc(1, sizeof(*r));
	struct mcap_buf b = { 0 };
	int e;

	if (!r || !(r->path = strdup(path)) || !(r->ring = calloc(RING, sizeof(*r->ring)))) {
		if (r) {
			free(r->path);
			free(r);
		}
		close(fd);
		snprintf(err, errlen, "record: out of memory");
		return -ENOMEM;
	}
	r->fd = fd;
	r->owned = owned;
	snprintf(r->clock, sizeof(r->clock), "%s", clock);
	tl_put_start(&b, clock, "shmclockd " SHMCLOCK_VERSION_STRING);
	e = append(r, &b);
	mcap_buf_free(&b);
	if (e) {
		e = -e;
		snprintf(err, errlen, "record: writing %s: %s", path, strerror(e));
		goto fail;
	}
	/* The thread takes no signal: the daemon reads them from a signalfd
	 * (a thread made before it blocks them would die of SIGTERM's default
	 * action). */
	{
		sigset_t all, old;

		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &old);
		e = pthread_create(&r->thread, NULL, recorder_main, r);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	if (e) {
		snprintf(err, errlen, "record: a thread: %s", strerror(e));
		goto fail;
	}
	*out = r;
	return 0;
fail:
	if (owned)
		unlink(path);
	close(fd);
	free(r->ring);
	free(r->path);
	free(r);
	return -e;
}

int recorder_open(const char *path, const char *clock, struct recorder **out, char *err,
		  size_t errlen)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);

	if (fd < 0) {
		int e = errno;

		say_open_error(path, e, err, errlen);
		return -e;
	}
	return start(fd, path, true, clock, out, err, errlen);
}

int recorder_open_fd(int fd, const char *clock, struct recorder **out, char *err, size_t errlen)
{
	char link[64], path[1024];
	struct stat st;
	ssize_t n;
	int fl = fcntl(fd, F_GETFL);

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	if (n <= 0)
		snprintf(path, sizeof(path), "(a passed file)");
	else
		path[n] = 0;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "record: the file passed is not a regular file");
		close(fd);
		return -EINVAL;
	}
	if (fl < 0 || (fl & O_ACCMODE) == O_RDONLY) {
		snprintf(err, errlen, "record: the file passed is not open for writing");
		close(fd);
		return -EBADF;
	}
	if (st.st_size) {
		snprintf(err, errlen, "record: the file passed is not empty (%lld bytes): a "
			 "recording is never written over another file", (long long)st.st_size);
		close(fd);
		return -EEXIST;
	}
	return start(fd, path, false, clock, out, err, errlen);
}

const char *recorder_path(const struct recorder *r)
{
	return r->path;
}

void recorder_status(struct recorder *r, cJSON *st)
{
	cJSON *o = cJSON_AddObjectToObject(st, "record");
	int e = atomic_load_explicit(&r->error, memory_order_relaxed);

	if (!o)
		return;
	cJSON_AddStringToObject(o, "file", r->path);
	cJSON_AddNumberToObject(o, "written",
				(double)atomic_load_explicit(&r->written, memory_order_relaxed));
	cJSON_AddNumberToObject(o, "dropped",
				(double)atomic_load_explicit(&r->dropped, memory_order_relaxed));
	cJSON_AddNumberToObject(o, "chunks",
				(double)atomic_load_explicit(&r->chunks, memory_order_relaxed));
	cJSON_AddNumberToObject(o, "bytes",
				(double)atomic_load_explicit(&r->bytes, memory_order_relaxed));
	cJSON_AddStringToObject(o, "error", e ? strerror(e) : "");
}

/* Stops the recorder's thread once it wrote what is queued. */
static void join(struct recorder *r)
{
	/* Release: pairs with the thread's acquire load; it drains what is
	 * queued, then ends. */
	atomic_store_explicit(&r->stop, true, memory_order_release);
	/* Release: the stop above before the new wake value. The thread
	 * loads wake, then (after its fence) stop: if it sees this value it
	 * sees stop, and if not its futex wait returns at once (the value
	 * changed). */
	atomic_fetch_add_explicit(&r->wake, 1, memory_order_release);
	futex_wake(&r->wake);
	pthread_join(r->thread, NULL);
}

static void release(struct recorder *r)
{
	close(r->fd);
	for (int ch = 0; ch <= TL_NCHANNELS; ch++)
		mcap_buf_free(&r->mi[ch]);
	mcap_buf_free(&r->chunk);
	mcap_buf_free(&r->out);
	free(r->ix);
	free(r->ring);
	free(r->path);
	free(r);
}

void recorder_discard(struct recorder *r)
{
	if (!r)
		return;
	join(r);
	if (r->owned)
		unlink(r->path);
	release(r);
}

void recorder_close(struct recorder *r)
{
	int e;

	if (!r)
		return;
	join(r);
	if ((e = finish(r)))
		log_msg(LOG_ERROR, "record: closing %s: %s (the file is whole up to byte %" PRIu64
			"; it has no summary)", r->path, strerror(-e), r->pos);
	else if (fsync(r->fd) < 0)
		log_msg(LOG_ERROR, "record: %s: fsync: %s", r->path, strerror(errno));
	else
		log_msg(LOG_INFO, "record: %s closed: %" PRIu64 " changes and events, %" PRIu64
			" dropped, %" PRIu64 " bytes", r->path,
			atomic_load_explicit(&r->written, memory_order_relaxed),
			atomic_load_explicit(&r->dropped, memory_order_relaxed), r->pos);
	release(r);
}
