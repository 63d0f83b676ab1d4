/* SPDX-License-Identifier: MIT */
/*
 * MCAP (https://mcap.dev/spec), the part shmclock writes and reads: the
 * recorder's records (shmclockd/record.c) and a reader for the replay, for
 * shmclock-cat --mcap and for the fuzz target.
 *
 * A file is the magic, a Header, then records of a 1-byte opcode, a 64-bit
 * little-endian length and a body. Written here: Schema and Channel records
 * at the start of the data section, then Chunks (uncompressed) each followed
 * by its MessageIndex records, and at close DataEnd, a summary (Schema,
 * Channel, Statistics, ChunkIndex), its SummaryOffsets, the Footer and the
 * magic again. Read here: any such file record by record, chunks opened
 * (uncompressed ones; a compressed chunk is an error naming its
 * compression), each chunk's CRC checked; a file cut short ends at its
 * last complete record, and the reader says where.
 */
#ifndef SHMCLOCK_COMMON_MCAP_H
#define SHMCLOCK_COMMON_MCAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MCAP_MAGIC_LEN 8
extern const uint8_t mcap_magic[MCAP_MAGIC_LEN];

enum mcap_op {
	MCAP_OP_HEADER = 0x01,
	MCAP_OP_FOOTER = 0x02,
	MCAP_OP_SCHEMA = 0x03,
	MCAP_OP_CHANNEL = 0x04,
	MCAP_OP_MESSAGE = 0x05,
	MCAP_OP_CHUNK = 0x06,
	MCAP_OP_MESSAGE_INDEX = 0x07,
	MCAP_OP_CHUNK_INDEX = 0x08,
	MCAP_OP_ATTACHMENT = 0x09,
	MCAP_OP_ATTACHMENT_INDEX = 0x0a,
	MCAP_OP_STATISTICS = 0x0b,
	MCAP_OP_METADATA = 0x0c,
	MCAP_OP_METADATA_INDEX = 0x0d,
	MCAP_OP_SUMMARY_OFFSET = 0x0e,
	MCAP_OP_DATA_END = 0x0f,
};

/* CRC-32 (ISO-HDLC, as zlib's), continued from @crc (0 to start). */
uint32_t mcap_crc32(uint32_t crc, const void *p, size_t n);

/* A growing byte buffer that records are built in. On out of memory it
 * keeps its length and sets oom; every later put is a no-op. */
struct mcap_buf {
	uint8_t *p;
	size_t len, cap;
	bool oom;
};

void mcap_buf_free(struct mcap_buf *b);
void mcap_put_bytes(struct mcap_buf *b, const void *p, size_t n);
void mcap_put_u8(struct mcap_buf *b, uint8_t v);
void mcap_put_u16(struct mcap_buf *b, uint16_t v);
void mcap_put_u32(struct mcap_buf *b, uint32_t v);
void mcap_put_u64(struct mcap_buf *b, uint64_t v);
void mcap_put_str(struct mcap_buf *b, const char *s);

/* A record: mcap_begin(b, op) returns the record's start; the body is put
 * after it; mcap_end(b, start) fills in its length. */
size_t mcap_begin(struct mcap_buf *b, enum mcap_op op);
void mcap_end(struct mcap_buf *b, size_t start);

void mcap_put_header(struct mcap_buf *b, const char *profile, const char *library);
void mcap_put_schema(struct mcap_buf *b, uint16_t id, const char *name, const char *encoding,
		     const char *data);
/* @meta: NULL-terminated key, value pairs, or NULL. */
void mcap_put_channel(struct mcap_buf *b, uint16_t id, uint16_t schema, const char *topic,
		      const char *encoding, const char *const *meta);
void mcap_put_message(struct mcap_buf *b, uint16_t channel, uint32_t seq, uint64_t log_time,
		      uint64_t publish_time, const void *data, size_t len);

/* A parsed record: its opcode, its body, where it starts in the file (for
 * a record inside a chunk: the chunk's start) and, inside a chunk, its
 * offset in the chunk's records. */
struct mcap_record {
	uint8_t op;
	const uint8_t *body;
	uint64_t len;
	uint64_t offset;
	bool in_chunk;
};

struct mcap_message {
	uint16_t channel;
	uint32_t seq;
	uint64_t log_time, publish_time;
	const uint8_t *data;
	size_t len;
};

/* A length-prefixed string of a body, not terminated. */
struct mcap_str {
	const char *p;
	uint32_t len;
};

struct mcap_channel {
	uint16_t id, schema;
	struct mcap_str topic, encoding;
	const uint8_t *meta; /* its map, raw */
	uint32_t meta_len;
};

struct mcap_schema {
	uint16_t id;
	struct mcap_str name, encoding;
	const uint8_t *data;
	uint32_t len;
};

struct mcap_header {
	struct mcap_str profile, library;
};

/* Each: 0, or -EBADMSG when the body is too short for its fields. */
int mcap_parse_message(const struct mcap_record *r, struct mcap_message *m);
int mcap_parse_channel(const struct mcap_record *r, struct mcap_channel *c);
int mcap_parse_schema(const struct mcap_record *r, struct mcap_schema *s);
int mcap_parse_header(const struct mcap_record *r, struct mcap_header *h);
/* The value of @key in a channel's metadata, into @out (@outlen with its
 * terminator): 0, -ENOENT, or -EBADMSG for a malformed map. */
int mcap_channel_meta(const struct mcap_channel *c, const char *key, char *out, size_t outlen);

bool mcap_str_eq(struct mcap_str s, const char *z);

/*
 * The reader: over a file (by descriptor, read with pread) or over memory.
 * mcap_next() returns 1 with the next record, 0 at the end of a complete
 * file (the closing magic read), or -errno with err (one line) and
 * stopped_at (the byte where reading stopped; every record before it was
 * returned):
 *   -EPROTO    not an MCAP file (its magic)
 *   -EPIPE     the file ends inside a record, or without its closing
 *              magic: a recording cut short (a crash); what came before
 *              it is whole
 *   -EBADMSG   a record is malformed (a length past its container, a
 *              chunk's CRC that does not match)
 *   -ENOTSUP   a compressed chunk
 *   -EFBIG     a chunk larger than MCAP_CHUNK_MAX
 *   -EIO, -ENOMEM
 * A record's body stays valid until the next call.
 */
#define MCAP_CHUNK_MAX (64u << 20)
#define MCAP_RECORD_MAX (64u << 20)

struct mcap_reader {
	int fd;             /* or -1: mem */
	const uint8_t *mem;
	uint64_t size;      /* the file's or the memory's */
	uint64_t pos;       /* the next record in the file */
	uint8_t *buf;       /* the current top-level record's body */
	size_t cap;
	/* the open chunk */
	uint64_t chunk_pos, chunk_len, chunk_off;
	const uint8_t *chunk;
	bool started, ended;
	bool no_crc;        /* chunks' CRCs not checked (the fuzz target's second pass) */
	uint64_t stopped_at;
	char err[160];
};

void mcap_reader_init_fd(struct mcap_reader *r, int fd, uint64_t size);
void mcap_reader_init_mem(struct mcap_reader *r, const void *mem, size_t size);
int mcap_next(struct mcap_reader *r, struct mcap_record *out);
void mcap_reader_free(struct mcap_reader *r);

#endif
