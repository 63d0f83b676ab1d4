/* SPDX-License-Identifier: MIT */
/* MCAP records, written and read (mcap.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcap.h"

const uint8_t mcap_magic[MCAP_MAGIC_LEN] = { 0x89, 'M', 'C', 'A', 'P', '0', '\r', '\n' };

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
		crc_table[i] = c;
	}
}

uint32_t mcap_crc32(uint32_t crc, const void *p, size_t n)
{
	const uint8_t *b = p;

	/* The table once, by whichever thread comes first; pthread_once
	 * orders its stores before every caller's loads. */
	pthread_once(&crc_once, crc_init);
	crc = ~crc;
	while (n--)
		crc = crc_table[(crc ^ *b++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

void mcap_buf_free(struct mcap_buf *b)
{
	free(b->p);
	*b = (struct mcap_buf){ 0 };
}

void mcap_put_bytes(struct mcap_buf *b, const void *p, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		uint8_t *q;

		while (cap < b->len + n)
			cap *= 2;
		if (!(q = realloc(b->p, cap))) {
			b->oom = true;
			return;
		}
		b->p = q;
		b->cap = cap;
	}
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
}

void mcap_put_u8(struct mcap_buf *b, uint8_t v)
{
	mcap_put_bytes(b, &v, 1);
}

void mcap_put_u16(struct mcap_buf *b, uint16_t v)
{
	uint8_t x[2] = { (uint8_t)v, (uint8_t)(v >> 8) };

	mcap_put_bytes(b, x, 2);
}

void mcap_put_u32(struct mcap_buf *b, uint32_t v)
{
	uint8_t x[4];

	for (int i = 0; i < 4; i++)
		x[i] = (uint8_t)(v >> (8 * i));
	mcap_put_bytes(b, x, 4);
}

void mcap_put_u64(struct mcap_buf *b, uint64_t v)
{
	uint8_t x[8];

	for (int i = 0; i < 8; i++)
		x[i] = (uint8_t)(v >> (8 * i));
	mcap_put_bytes(b, x, 8);
}

void mcap_put_str(struct mcap_buf *b, const char *s)
{
	size_t n = strlen(s);

	mcap_put_u32(b, (uint32_t)n);
	mcap_put_bytes(b, s, n);
}

size_t mcap_begin(struct mcap_buf *b, enum mcap_op op)
{
	size_t start = b->len;

	mcap_put_u8(b, (uint8_t)op);
	mcap_put_u64(b, 0);
	return start;
}

void mcap_end(struct mcap_buf *b, size_t start)
{
	uint64_t n;

	if (b->oom)
		return;
	n = b->len - start - 9;
	for (int i = 0; i < 8; i++)
		b->p[start + 1 + i] = (uint8_t)(n >> (8 * i));
}

void mcap_put_header(struct mcap_buf *b, const char *profile, const char *library)
{
	size_t s = mcap_begin(b, MCAP_OP_HEADER);

	mcap_put_str(b, profile);
	mcap_put_str(b, library);
	mcap_end(b, s);
}

void mcap_put_schema(struct mcap_buf *b, uint16_t id, const char *name, const char *encoding,
		     const char *data)
{
	size_t s = mcap_begin(b, MCAP_OP_SCHEMA);

	mcap_put_u16(b, id);
	mcap_put_str(b, name);
	mcap_put_str(b, encoding);
	mcap_put_str(b, data); /* bytes, uint32-prefixed as a string is */
	mcap_end(b, s);
}

void mcap_put_channel(struct mcap_buf *b, uint16_t id, uint16_t schema, const char *topic,
		      const char *encoding, const char *const *meta)
{
	size_t s = mcap_begin(b, MCAP_OP_CHANNEL);
	size_t at;
	uint32_t n;

	mcap_put_u16(b, id);
	mcap_put_u16(b, schema);
	mcap_put_str(b, topic);
	mcap_put_str(b, encoding);
	at = b->len;
	mcap_put_u32(b, 0);
	for (; meta && meta[0]; meta += 2) {
		mcap_put_str(b, meta[0]);
		mcap_put_str(b, meta[1]);
	}
	if (!b->oom) {
		n = (uint32_t)(b->len - at - 4);
		for (int i = 0; i < 4; i++)
			b->p[at + i] = (uint8_t)(n >> (8 * i));
	}
	mcap_end(b, s);
}

void mcap_put_message(struct mcap_buf *b, uint16_t channel, uint32_t seq, uint64_t log_time,
		      uint64_t publish_time, const void *data, size_t len)
{
	size_t s = mcap_begin(b, MCAP_OP_MESSAGE);

	mcap_put_u16(b, channel);
	mcap_put_u32(b, seq);
	mcap_put_u64(b, log_time);
	mcap_put_u64(b, publish_time);
	mcap_put_bytes(b, data, len);
	mcap_end(b, s);
}

/* --- parsing a body --- */

struct cursor {
	const uint8_t *p;
	uint64_t left;
	bool bad;
};

static uint64_t get_le(struct cursor *c, unsigned n)
{
	uint64_t v = 0;

	if (c->bad || c->left < n) {
		c->bad = true;
		return 0;
	}
	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)c->p[i] << (8 * i);
	c->p += n;
	c->left -= n;
	return v;
}

static struct mcap_str get_str(struct cursor *c)
{
	struct mcap_str s = { "", 0 };
	uint32_t n = (uint32_t)get_le(c, 4);

	if (c->bad || c->left < n) {
		c->bad = true;
		return s;
	}
	s.p = (const char *)c->p;
	s.len = n;
	c->p += n;
	c->left -= n;
	return s;
}

bool mcap_str_eq(struct mcap_str s, const char *z)
{
	return strlen(z) == s.len && !memcmp(s.p, z, s.len);
}

int mcap_parse_message(const struct mcap_record *r, struct mcap_message *m)
{
	struct cursor c = { r->body, r->len, false };

	m->channel = (uint16_t)get_le(&c, 2);
	m->seq = (uint32_t)get_le(&c, 4);
	m->log_time = get_le(&c, 8);
	m->publish_time = get_le(&c, 8);
	m->data = c.p;
	m->len = (size_t)c.left;
	return c.bad ? -EBADMSG : 0;
}

int mcap_parse_channel(const struct mcap_record *r, struct mcap_channel *ch)
{
	struct cursor c = { r->body, r->len, false };

	ch->id = (uint16_t)get_le(&c, 2);
	ch->schema = (uint16_t)get_le(&c, 2);
	ch->topic = get_str(&c);
	ch->encoding = get_str(&c);
	ch->meta_len = (uint32_t)get_le(&c, 4);
	if (c.bad || c.left < ch->meta_len)
		return -EBADMSG;
	ch->meta = c.p;
	return 0;
}

int mcap_channel_meta(const struct mcap_channel *ch, const char *key, char *out, size_t outlen)
{
	struct cursor c = { ch->meta, ch->meta_len, false };

	while (c.left && !c.bad) {
		struct mcap_str k = get_str(&c), v = get_str(&c);

		if (c.bad)
			break;
		if (mcap_str_eq(k, key)) {
			snprintf(out, outlen, "%.*s", (int)v.len, v.p);
			return 0;
		}
	}
	return c.bad ? -EBADMSG : -ENOENT;
}

int mcap_parse_schema(const struct mcap_record *r, struct mcap_schema *s)
{
	struct cursor c = { r->body, r->len, false };
	struct mcap_str d;

	s->id = (uint16_t)get_le(&c, 2);
	s->name = get_str(&c);
	s->encoding = get_str(&c);
	d = get_str(&c);
	s->data = (const uint8_t *)d.p;
	s->len = d.len;
	return c.bad ? -EBADMSG : 0;
}

int mcap_parse_header(const struct mcap_record *r, struct mcap_header *h)
{
	struct cursor c = { r->body, r->len, false };

	h->profile = get_str(&c);
	h->library = get_str(&c);
	return c.bad ? -EBADMSG : 0;
}

/* --- the reader --- */

void mcap_reader_init_fd(struct mcap_reader *r, int fd, uint64_t size)
{
	*r = (struct mcap_reader){ .fd = fd, .size = size };
}

void mcap_reader_init_mem(struct mcap_reader *r, const void *mem, size_t size)
{
	*r = (struct mcap_reader){ .fd = -1, .mem = mem, .size = size };
}

void mcap_reader_free(struct mcap_reader *r)
{
	free(r->buf);
	r->buf = NULL;
	r->cap = 0;
}

static int fail(struct mcap_reader *r, int rc, uint64_t at, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int fail(struct mcap_reader *r, int rc, uint64_t at, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->err, sizeof(r->err), fmt, ap);
	va_end(ap);
	r->stopped_at = at;
	r->ended = true;
	return rc;
}

/* @n bytes at @off into the buffer (or a pointer into memory): 0 or -errno. */
static int read_at(struct mcap_reader *r, uint64_t off, uint64_t n, const uint8_t **out)
{
	if (r->fd < 0) {
		*out = r->mem + off;
		return 0;
	}
	if (n > r->cap) {
		size_t cap = r->cap ? r->cap : 4096;
		uint8_t *q;

		while (cap < n)
			cap *= 2;
		if (!(q = realloc(r->buf, cap)))
			return -ENOMEM;
		r->buf = q;
		r->cap = cap;
	}
	for (uint64_t got = 0; got < n;) {
		ssize_t k = pread(r->fd, r->buf + got, (size_t)(n - got), (off_t)(off + got));

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			return -EPIPE; /* shrank under us */
		got += (uint64_t)k;
	}
	*out = r->buf;
	return 0;
}

/* The next record inside the open chunk, or 0 when it is done. */
static int chunk_next(struct mcap_reader *r, struct mcap_record *out)
{
	struct cursor c = { r->chunk + r->chunk_off, r->chunk_len - r->chunk_off, false };
	uint8_t op;
	uint64_t len;

	if (!c.left) {
		r->chunk = NULL;
		return 0;
	}
	op = (uint8_t)get_le(&c, 1);
	len = get_le(&c, 8);
	if (c.bad || len > c.left)
		return fail(r, -EBADMSG, r->chunk_pos,
			    "byte %" PRIu64 ": a record in the chunk there runs past the chunk's end",
			    r->chunk_pos);
	*out = (struct mcap_record){ .op = op, .body = c.p, .len = len, .offset = r->chunk_pos,
				     .in_chunk = true };
	r->chunk_off += 9 + len;
	return 1;
}

/* A chunk's body: its records, checked, become the open chunk. */
static int open_chunk(struct mcap_reader *r, const uint8_t *body, uint64_t len, uint64_t at)
{
	struct cursor c = { body, len, false };
	struct mcap_str comp;
	uint64_t usize, rlen;
	uint32_t crc;

	get_le(&c, 8); /* message_start_time */
	get_le(&c, 8); /* message_end_time */
	usize = get_le(&c, 8);
	crc = (uint32_t)get_le(&c, 4);
	comp = get_str(&c);
	rlen = get_le(&c, 8);
	if (c.bad || rlen > c.left)
		return fail(r, -EBADMSG, at, "byte %" PRIu64 ": a malformed chunk", at);
	if (comp.len)
		return fail(r, -ENOTSUP, at,
			    "byte %" PRIu64 ": a chunk compressed with '%.*s' (only uncompressed "
			    "chunks are read)",
			    at, (int)(comp.len > 16 ? 16 : comp.len), comp.p);
	if (usize != rlen)
		return fail(r, -EBADMSG, at, "byte %" PRIu64 ": a chunk whose sizes disagree", at);
	if (crc && !r->no_crc && mcap_crc32(0, c.p, (size_t)rlen) != crc)
		return fail(r, -EBADMSG, at, "byte %" PRIu64 ": a chunk whose CRC does not match", at);
	r->chunk = c.p;
	r->chunk_len = rlen;
	r->chunk_off = 0;
	r->chunk_pos = at;
	return 0;
}

int mcap_next(struct mcap_reader *r, struct mcap_record *out)
{
	const uint8_t *p;
	uint64_t len, at;
	int e;

	if (r->ended)
		return r->err[0] ? -EALREADY : 0;
	if (r->chunk) {
		e = chunk_next(r, out);
		if (e)
			return e;
	}
	if (!r->started) {
		if (r->size < MCAP_MAGIC_LEN)
			return fail(r, -EPROTO, 0,
				    "not an MCAP file (%" PRIu64 " bytes, shorter than its magic)",
				    r->size);
		if ((e = read_at(r, 0, MCAP_MAGIC_LEN, &p)))
			return fail(r, e, 0, "reading the magic: %s", strerror(-e));
		if (memcmp(p, mcap_magic, MCAP_MAGIC_LEN))
			return fail(r, -EPROTO, 0, "not an MCAP file (its first bytes are not MCAP's magic)");
		r->started = true;
		r->pos = MCAP_MAGIC_LEN;
	}
	for (;;) {
		at = r->pos;
		if (r->size - at < 9) {
			/* The closing magic, or a file cut short. */
			if (r->size - at == MCAP_MAGIC_LEN) {
				if ((e = read_at(r, at, MCAP_MAGIC_LEN, &p)))
					return fail(r, e, at, "reading: %s", strerror(-e));
				if (!memcmp(p, mcap_magic, MCAP_MAGIC_LEN)) {
					r->ended = true;
					r->stopped_at = r->size;
					return 0;
				}
			}
			return fail(r, -EPIPE, at,
				    "the file ends at byte %" PRIu64 " %s (cut short: what came before is "
				    "whole)",
				    r->size, at == r->size ? "without its closing magic" : "inside a record");
		}
		if ((e = read_at(r, at, 9, &p)))
			return fail(r, e, at, "reading: %s", strerror(-e));
		{
			uint8_t op = p[0];

			len = 0;
			for (int i = 0; i < 8; i++)
				len |= (uint64_t)p[1 + i] << (8 * i);
			if (len > r->size - at - 9) {
				return fail(r, -EPIPE, at,
					    "the file ends at byte %" PRIu64 " inside a record of %" PRIu64
					    " bytes at byte %" PRIu64 " (cut short: what came before is whole)",
					    r->size, len, at);
			}
			if (len > (op == MCAP_OP_CHUNK ? MCAP_CHUNK_MAX : MCAP_RECORD_MAX))
				return fail(r, -EFBIG, at,
					    "byte %" PRIu64 ": a record of %" PRIu64 " bytes (at most %u read)",
					    at, len, (unsigned)MCAP_CHUNK_MAX);
			if ((e = read_at(r, at + 9, len, &p)))
				return fail(r, e, at, "reading: %s", strerror(-e));
			r->pos = at + 9 + len;
			if (op == MCAP_OP_CHUNK) {
				if ((e = open_chunk(r, p, len, at)))
					return e;
				if ((e = chunk_next(r, out)))
					return e;
				continue; /* an empty chunk */
			}
			if (op == MCAP_OP_FOOTER) {
				/* The closing magic must follow. */
				if (r->size - r->pos < MCAP_MAGIC_LEN)
					return fail(r, -EPIPE, r->pos,
						    "the file ends at byte %" PRIu64
						    " without its closing magic (cut short)",
						    r->size);
			}
			*out = (struct mcap_record){ .op = op, .body = p, .len = len, .offset = at };
			return 1;
		}
	}
}
