/* SPDX-License-Identifier: MIT */
/* Readers and writers refuse anything that is not a valid segment. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <fcntl.h>
#include <setjmp.h>
#include <sys/stat.h>

#include "../helpers.h"
#include "segment.h"

TestSuite(segment, .fini = test_cleanup, .timeout = 30);

static void path_of(char *out, size_t n, const char *name)
{
	snprintf(out, n, "/dev/shm/shmclock.%s", name);
}

/* A valid segment's bytes, made by the real writer and copied out. */
static void valid_bytes(uint8_t *buf)
{
	const char *name = test_clock_name();
	shmclock_writer_t *w;
	char path[128];
	int fd;

	cr_assert_eq(shmclock_writer_open(name, &w), 0);
	cr_assert_eq(shmclock_writer_set_time(w, 42), 0);
	shmclock_writer_close(w); /* a copy must not claim a live owner */
	path_of(path, sizeof(path), name);
	fd = open(path, O_RDONLY);
	cr_assert_geq(fd, 0);
	cr_assert_eq(read(fd, buf, SHMCLOCK_SEG_SIZE), SHMCLOCK_SEG_SIZE);
	close(fd);
	shmclock_unlink(name);
}

static const char *plant(const void *bytes, size_t n)
{
	const char *name = test_clock_name();
	char path[128];
	int fd;

	path_of(path, sizeof(path), name);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, bytes, n), (ssize_t)n);
	close(fd);
	return name;
}

static void expect_refused(const void *bytes, size_t n, const char *what)
{
	const char *name = plant(bytes, n);
	uint8_t after[SHMCLOCK_SEG_SIZE + 8];
	shmclock_writer_t *w = NULL;
	shmclock_t *r = NULL;
	char path[128];
	int fd;

	cr_expect_eq(shmclock_open(name, &r), -EPROTO, "reader, %s", what);
	cr_expect_null(r);
	cr_expect_eq(shmclock_writer_open(name, &w), -EPROTO, "writer, %s", what);
	cr_expect_null(w);
	/* The writer must not have "fixed" a file that is not its own. */
	path_of(path, sizeof(path), name);
	fd = open(path, O_RDONLY);
	cr_assert_geq(fd, 0);
	cr_expect_eq(read(fd, after, sizeof(after)), (ssize_t)n, "%s: size unchanged", what);
	cr_expect_eq(memcmp(after, bytes, n), 0, "%s: bytes unchanged", what);
	close(fd);
	shmclock_unlink(name);
}

Test(segment, a_copy_of_a_valid_segment_is_accepted)
{
	uint8_t buf[SHMCLOCK_SEG_SIZE];
	shmclock_t *r;
	int64_t t;

	valid_bytes(buf);
	const char *name = plant(buf, sizeof(buf));
	cr_assert_eq(shmclock_open(name, &r), 0, "the control case must pass");
	cr_expect_eq(shmclock_now(r, &t), -ESTALE, "no writer holds the copy");
	shmclock_close(r);
}

/* Issue 56: a copy of a live writer's segment (copied into a container's
 * image or a volume that copies) claims a live writer in its lock word,
 * yet nothing will ever change it, wake its sleepers or mark the writer's
 * death. It is refused as stale at open; the writer's own file under a
 * second name (a hard link, as a bind mount is the same file) is not.
 * Before: the copy opened and read 42 s for ever. */
Test(segment, a_copy_of_a_live_writers_segment_is_stale_the_same_file_is_not)
{
	const char *name = test_clock_name();
	uint8_t buf[SHMCLOCK_SEG_SIZE];
	char path[128], linked[160];
	shmclock_writer_t *w;
	shmclock_t *r = NULL;
	int64_t t;
	int fd;

	cr_assert_eq(shmclock_writer_open(name, &w), 0);
	cr_assert_eq(shmclock_writer_pause(w), 0);
	cr_assert_eq(shmclock_writer_set_time(w, 42000000000), 0);
	path_of(path, sizeof(path), name);
	fd = open(path, O_RDONLY);
	cr_assert_geq(fd, 0);
	cr_assert_eq(read(fd, buf, sizeof(buf)), SHMCLOCK_SEG_SIZE);
	close(fd);
	const char *copy = plant(buf, sizeof(buf));
	cr_expect_eq(shmclock_open(copy, &r), -ESTALE, "a copy of a live writer's clock");
	cr_expect_null(r);
	snprintf(linked, sizeof(linked), "/dev/shm/shmclock.%s-same", name);
	cr_assert_eq(link(path, linked), 0);
	char same[96];
	snprintf(same, sizeof(same), "%s-same", name);
	cr_assert_eq(shmclock_open(same, &r), 0, "the writer's own file, another name");
	cr_expect_eq(shmclock_now(r, &t), 0);
	cr_expect_eq(t, 42000000000);
	shmclock_close(r);
	unlink(linked);
	shmclock_unlink(copy);
	shmclock_writer_unlink(w, name);
	shmclock_writer_close(w);
}

Test(segment, empty_truncated_and_oversized_files_are_EPROTO)
{
	uint8_t buf[SHMCLOCK_SEG_SIZE + 1];

	valid_bytes(buf);
	buf[SHMCLOCK_SEG_SIZE] = 0;
	expect_refused(buf, 0, "empty");
	expect_refused(buf, 8, "8 bytes");
	expect_refused(buf, SHMCLOCK_SEG_SIZE - 1, "one byte short");
	expect_refused(buf, SHMCLOCK_SEG_SIZE + 1, "one byte long");
}

Test(segment, wrong_magic_version_size_field_layout_or_reserved_bytes_are_EPROTO)
{
	uint8_t good[SHMCLOCK_SEG_SIZE], buf[SHMCLOCK_SEG_SIZE];
	struct {
		size_t off;
		const char *what;
	} pokes[] = {
		{ offsetof(struct shmclock_seg, magic), "magic" },
		{ offsetof(struct shmclock_seg, abi_version), "abi version" },
		{ offsetof(struct shmclock_seg, size), "size field" },
		{ offsetof(struct shmclock_seg, record_off), "record offset" },
		{ offsetof(struct shmclock_seg, backup_off), "backup offset" },
		{ offsetof(struct shmclock_seg, reserved0) + 5, "header reserved" },
		{ SHMCLOCK_SEG_SIZE - 1, "tail reserved" },
	};

	valid_bytes(good);
	for (size_t i = 0; i < sizeof(pokes) / sizeof(pokes[0]); i++) {
		memcpy(buf, good, sizeof(buf));
		buf[pokes[i].off] ^= 0x5a;
		expect_refused(buf, sizeof(buf), pokes[i].what);
	}
}

Test(segment, random_bytes_are_EPROTO_and_never_crash)
{
	uint8_t buf[SHMCLOCK_SEG_SIZE];
	unsigned seed = 12345;

	for (int round = 0; round < 20; round++) {
		for (size_t i = 0; i < sizeof(buf); i++)
			buf[i] = (uint8_t)rand_r(&seed);
		expect_refused(buf, sizeof(buf), "random bytes");
	}
}

Test(segment, symlinks_and_directories_are_refused_not_followed)
{
	const char *name = test_clock_name(), *target = test_clock_name();
	char path[128], tpath[128];
	shmclock_writer_t *w = NULL;
	shmclock_t *r = NULL;
	struct stat st;

	path_of(path, sizeof(path), name);
	path_of(tpath, sizeof(tpath), target);
	cr_assert_eq(symlink(tpath, path), 0);
	cr_expect_eq(shmclock_open(name, &r), -EPROTO);
	cr_expect_eq(shmclock_writer_open(name, &w), -EPROTO);
	cr_expect_neq(stat(tpath, &st), 0, "the writer created nothing through the link");
	unlink(path);
	cr_assert_eq(mkdir(path, 0755), 0);
	cr_expect_eq(shmclock_open(name, &r), -EPROTO);
	cr_expect_neq(shmclock_writer_open(name, &w), 0);
	rmdir(path);
}

/*
 * A FIFO under a clock's name (anyone may make one in /dev/shm): opening it
 * for reading would wait for a writer forever, and with it shmclock-cat,
 * the panel's discovery (its lock held: every page), a lockstep join. Run
 * in a child with a deadline, so that a hang fails the test, not the suite.
 */
static void expect_prompt(const char *what, int (*fn)(const char *), const char *name)
{
	int *rc = shared_alloc(sizeof(int));
	pid_t p = test_fork();
	int st;

	if (p == 0)
		_exit((*rc = fn(name)) == 0 ? 1 : 0);
	st = test_wait_for(p, 10000000000LL);
	cr_expect_neq(st, -1, "%s: still in open() after 10 s (a FIFO waits for a writer)", what);
	cr_expect(st == 0 || st == -1, "%s accepted a FIFO", what);
	if (st == 0)
		fprintf(stderr, "# %s on a FIFO: %s\n", what, shmclock_strerror(*rc));
	munmap(rc, sizeof(int));
}

static int open_reader(const char *name)
{
	shmclock_t *r = NULL;

	return shmclock_open(name, &r);
}

static int open_writer(const char *name)
{
	shmclock_writer_t *w = NULL;

	return shmclock_writer_open(name, &w);
}

Test(segment, a_fifo_under_the_name_is_refused_at_once_not_waited_on)
{
	const char *name = test_clock_name();
	char path[128];

	path_of(path, sizeof(path), name);
	cr_assert_eq(mkfifo(path, 0666), 0, "mkfifo %s: %s", path, strerror(errno));
	expect_prompt("shmclock_open", open_reader, name);
	expect_prompt("shmclock_writer_open", open_writer, name);
	unlink(path);
}

Test(segment, a_valid_segment_planted_by_another_user_is_refused_by_the_writer)
{
	uint8_t buf[SHMCLOCK_SEG_SIZE], after[SHMCLOCK_SEG_SIZE];
	shmclock_writer_t *w = NULL;
	char path[128];
	int fd;

	if (geteuid() != 0)
		cr_skip_test("needs root to give a file to another user");
	valid_bytes(buf);
	const char *name = plant(buf, sizeof(buf));
	path_of(path, sizeof(path), name);
	/* World-writable too: the planter keeps a way to change time. */
	cr_assert_eq(chown(path, 65534, 65534), 0);
	cr_assert_eq(chmod(path, 0666), 0);
	cr_expect_eq(shmclock_writer_open(name, &w), -EPERM);
	cr_expect_null(w);
	fd = open(path, O_RDONLY);
	cr_assert_geq(fd, 0);
	cr_assert_eq(read(fd, after, sizeof(after)), (ssize_t)sizeof(after));
	close(fd);
	cr_expect_eq(memcmp(after, buf, sizeof(buf)), 0, "the writer touched a file not its own");
	/* Control case: the same bytes owned by us are taken over. */
	cr_assert_eq(chown(path, 0, 0), 0);
	cr_expect_eq(shmclock_writer_open(name, &w), 0);
	shmclock_writer_close(w);
}

static sigjmp_buf fault_jmp;

static void on_fault(int sig)
{
	(void)sig;
	siglongjmp(fault_jmp, 1);
}

Test(segment, a_reader_cannot_write_the_segment)
{
	const char *name = test_clock_name();
	shmclock_writer_t *w;
	shmclock_t *r;
	char path[128];
	volatile int faulted = 0;

	cr_assert_eq(shmclock_writer_open(name, &w), 0);
	cr_assert_eq(shmclock_open(name, &r), 0);
	/* The mapping: the handle's first word (frozen ABI). */
	uint8_t *map = *(uint8_t **)(void *)r;
	signal(SIGSEGV, on_fault);
	if (sigsetjmp(fault_jmp, 1) == 0)
		map[0x40] = 1;
	else
		faulted = 1;
	signal(SIGSEGV, SIG_DFL);
	cr_expect(faulted, "a store through the reader's mapping must fault");
	/* Nor can it reopen the file for writing through the library: the
	 * reader side has no call that does. The file is 0644, so another
	 * user could not open it for writing either. */
	path_of(path, sizeof(path), name);
	cr_expect_eq(mprotect(map, 4096, PROT_READ | PROT_WRITE), -1,
		     "the mapping cannot be made writable (opened O_RDONLY)");
	cr_expect_eq(errno, EACCES);
	shmclock_close(r);
	shmclock_writer_close(w);
}

/* Readers that find an update open before its anchor is published (W1-W2a)
 * read the previous anchor, and tell it from a new one only by anchor >
 * the record's mono_base (protocol.c, T4): a commit must never leave a
 * record based before its own anchor. set_function once did, for a function
 * whose instant had passed (a late change on a follower): the next update's
 * early readers then froze at that anchor, behind what they had read. */
Test(segment, no_commit_leaves_the_record_based_before_its_anchor)
{
	const char *name = test_clock_name();
	char path[128];
	shmclock_writer_t *w;
	const struct shmclock_seg *s;
	int64_t mono;
	int fd;

	cr_assert_eq(shmclock_writer_open(name, &w), 0);
	path_of(path, sizeof(path), name);
	fd = open(path, O_RDONLY);
	cr_assert_geq(fd, 0);
	s = mmap(NULL, SHMCLOCK_SEG_SIZE, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	cr_assert_neq(s, MAP_FAILED);
	cr_assert_eq(shmclock_writer_set_time(w, 0), 0);
	mono = shmclock_static_mono();
	/* Ahead, behind (held), paused: each based 10 ms in the past. */
	for (int i = 0; i < 3; i++) {
		static const int64_t sim[] = { 5000000000LL, 0, 9000000000LL };
		static const unsigned fl[] = { 0, 0, SHMCLOCK_FN_PAUSED };

		cr_assert_eq(shmclock_writer_set_function(w, mono - 10000000, sim[i], 1.5, fl[i]), 0);
		cr_expect_geq(atomic_load(&s->mono_base), atomic_load(&s->anchor_mono_ns),
			      "case %d: mono_base %lld before the anchor %lld", i,
			      (long long)atomic_load(&s->mono_base),
			      (long long)atomic_load(&s->anchor_mono_ns));
	}
	munmap((void *)s, SHMCLOCK_SEG_SIZE);
	shmclock_writer_close(w);
	shmclock_unlink(name);
}
