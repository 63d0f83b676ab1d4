/* SPDX-License-Identifier: MIT */
/*
 * The threads the library starts, and fork() in another thread.
 *
 * glibc's pthread_create, when it reuses the stack of a thread that has
 * ended, frees that thread's dynamically allocated TLS blocks (those of
 * libraries loaded by dlopen, such as a Python module) after it has released
 * its stack lists' lock, and fork() does not wait for it. A child forked in
 * between frees them again when its next thread gets that stack. The Python
 * stress (python-concurrency) found it: in one run in 12 to 100, a forked
 * child aborted with "double free or corruption (fasttop)" or "malloc():
 * unaligned fastbin chunk detected". The library therefore starts no thread
 * while another thread forks: a fork waits until a pthread_create of the
 * library's has returned.
 *
 * Deterministic, not a stress: this program defines pthread_create, so the
 * library's calls (it is a shared object) come here first; the case's call
 * is held inside it while another thread forks. Two fork handlers of this
 * program's frame the library's: `first` is registered after them (prepare
 * handlers run in reverse order: it runs before them), `last` before them
 * (it runs after them). The fork either gets to `last` with that
 * pthread_create still held (the defect: the library let it through), or
 * its thread sleeps between `first` and `last`, where the library's handlers
 * can only be waiting for that pthread_create: then it is let go, and `last`
 * must see it finished.
 *
 * A plain TAP program, like test_threads.c.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <sys/syscall.h>

#include "../helpers.h"
#include <shmclock/time.h>

static int failures_in_case;

__attribute__((format(printf, 4, 5))) static void fail_at(const char *file, int line,
							   const char *cond, const char *fmt, ...)
{
	va_list ap;

	failures_in_case++;
	printf("#   %s:%d: failed: %s: ", file, line, cond);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

#define EXPECT(cond, ...)                                                \
	do {                                                             \
		if (!(cond))                                             \
			fail_at(__FILE__, __LINE__, #cond, __VA_ARGS__); \
	} while (0)
#define REQUIRE(cond)                                                         \
	do {                                                                  \
		if (!(cond)) {                                                \
			fail_at(__FILE__, __LINE__, #cond, "%s", "required"); \
			return;                                               \
		}                                                             \
	} while (0)

/* ------------------------------------------------ a held pthread_create */

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

/* This thread's next pthread_create is held until `release` is posted. */
static _Thread_local bool hold_next;
/* A held pthread_create is in progress (from `held` to its return). */
static _Atomic int in_create;
static sem_t held, release;

int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	static _Atomic(create_fn) real;
	create_fn f = atomic_load(&real);
	int r;

	if (!f) {
		void *sym = dlsym(RTLD_NEXT, "pthread_create");

		memcpy(&f, &sym, sizeof(f)); /* ISO C has no object-to-function cast */
		atomic_store(&real, f);
	}
	if (!hold_next)
		return f(thread, attr, fn, arg);
	hold_next = false;
	atomic_store(&in_create, 1);
	sem_post(&held);
	while (sem_wait(&release) && errno == EINTR)
		;
	r = f(thread, attr, fn, arg);
	atomic_store(&in_create, 0);
	return r;
}

/* ------------------------------------------------ the fork's handlers */

static _Atomic int armed;           /* the handlers watch this fork */
static _Atomic int first_ran, last_ran, in_create_at_last;

static void prepare_first(void)
{
	if (atomic_load(&armed))
		atomic_store(&first_ran, 1);
}

static void prepare_last(void)
{
	if (!atomic_load(&armed))
		return;
	atomic_store(&in_create_at_last, atomic_load(&in_create));
	atomic_store(&last_ran, 1);
}

static _Atomic pid_t forker_tid;

/* Forks; the child leaves at once. @arg: its wait status. */
static void *forker(void *arg)
{
	int *status = arg;
	pid_t pid;

	atomic_store(&forker_tid, (pid_t)syscall(SYS_gettid));
	pid = fork();
	if (pid == 0)
		_exit(0);
	if (pid < 0 || waitpid(pid, status, 0) != pid)
		*status = -1;
	return NULL;
}

/* A thread's state letter from /proc ('S': asleep, on a lock here). */
static char task_state(pid_t tid)
{
	char path[64], buf[512], *p;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	f = fopen(path, "r");
	if (!f)
		return '?';
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* the name may hold anything */
	return p && p[1] == ' ' ? p[2] : '?';
}

/*
 * Runs @start on a thread of its own, which makes the library start a
 * thread (held in pthread_create above), and forks meanwhile from another.
 * The fork must not get past the library's prepare handlers before that
 * pthread_create has returned.
 */
struct starter {
	void (*start)(struct starter *);
	const char *name;
	shmclock_writer_t *w;
	shmclock_t *c;
	shmclock_timer_t *timer;
	int r;
};

static void *starter_main(void *arg)
{
	struct starter *s = arg;

	s->start(s);
	if (hold_next) {
		/* The library started no thread here: say so. */
		hold_next = false;
		sem_post(&held);
	}
	return NULL;
}

static void fork_while_the_library_starts_a_thread(struct starter *s)
{
	pthread_t st, fk;
	int status = -2;

	atomic_store(&first_ran, 0);
	atomic_store(&last_ran, 0);
	atomic_store(&in_create_at_last, 0);
	atomic_store(&forker_tid, 0);
	REQUIRE(pthread_create(&st, NULL, starter_main, s) == 0);
	while (sem_wait(&held) && errno == EINTR)
		;
	if (!atomic_load(&in_create)) {
		EXPECT(0, "the library started no thread: %s", shmclock_strerror(s->r));
		pthread_join(st, NULL);
		return;
	}
	atomic_store(&armed, 1);
	if (pthread_create(&fk, NULL, forker, &status)) {
		EXPECT(0, "%s", "no thread to fork from");
		sem_post(&release);
		pthread_join(st, NULL);
		return;
	}
	/* Until the fork has passed the library's handlers, or sleeps in
	 * them: nothing else there waits (no lock of theirs is held here but
	 * by this case), and no bound on time is needed either way. */
	for (;;) {
		if (atomic_load(&last_ran))
			break;
		if (atomic_load(&first_ran) && task_state(atomic_load(&forker_tid)) == 'S')
			break;
		sleep_ns(100000);
	}
	sem_post(&release);
	pthread_join(fk, NULL);
	pthread_join(st, NULL);
	atomic_store(&armed, 0);
	EXPECT(atomic_load(&last_ran), "%s", "the fork's prepare handlers did not all run");
	EXPECT(!atomic_load(&in_create_at_last), "%s",
	       "the fork went on while the library was creating a thread");
	EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's wait status %#x", status);
	EXPECT(s->r == 0, "%s", shmclock_strerror(s->r));
}

/* ------------------------------------------------ the cases */

static void start_watcher(struct starter *s)
{
	hold_next = true;
	s->r = shmclock_open_ex(s->name, SHMCLOCK_OPEN_WATCH_JUMPS, &s->c);
}

static void a_fork_waits_for_a_watcher_being_started(void)
{
	struct starter s = { .start = start_watcher, .name = test_clock_name() };

	REQUIRE(shmclock_writer_open(s.name, &s.w) == 0);
	REQUIRE(shmclock_writer_set_time(s.w, 0) == 0);
	fork_while_the_library_starts_a_thread(&s);
	shmclock_close(s.c);
	shmclock_writer_close(s.w);
}

static void tick(shmclock_sim_time_t now, uint64_t missed, void *user)
{
	(void)now, (void)missed, (void)user;
}

static void start_timer(struct starter *s)
{
	hold_next = true;
	s->r = shmclock_timer_start(s->c, shmclock_msec(1), tick, NULL, &s->timer);
}

static void a_fork_waits_for_a_timer_being_started(void)
{
	struct starter s = { .start = start_timer, .name = test_clock_name() };

	REQUIRE(shmclock_writer_open(s.name, &s.w) == 0);
	REQUIRE(shmclock_writer_set_time(s.w, 0) == 0);
	REQUIRE(shmclock_open(s.name, &s.c) == 0);
	fork_while_the_library_starts_a_thread(&s);
	shmclock_timer_stop(s.timer);
	shmclock_close(s.c);
	shmclock_writer_close(s.w);
}

/* On the watcher: the clock closes itself, which the library hands to a
 * thread it starts (the watcher cannot join itself). */
static void close_own_clock(const shmclock_jump_t *j, bool before, void *user)
{
	struct starter *s = user;

	(void)j;
	if (before)
		return;
	hold_next = true;
	shmclock_close(s->c);
	if (hold_next) {
		hold_next = false;
		sem_post(&held);
	}
}

static void start_close_from_callback(struct starter *s)
{
	shmclock_jump_threshold_t th = { .min_forward_ns = 1 };

	s->r = shmclock_open_ex(s->name, SHMCLOCK_OPEN_WATCH_JUMPS, &s->c);
	if (!s->r)
		s->r = shmclock_jump_callback_add(s->c, th, close_own_clock, s, NULL);
	if (!s->r)
		s->r = shmclock_writer_set_time(s->w, 100 * 1000000000LL);
	/* The watcher makes the held call, not this thread: starter_main
	 * waits for `held` from it. */
	if (s->r)
		hold_next = true; /* tells starter_main nothing was started */
}

static void a_fork_waits_for_a_close_a_callback_started(void)
{
	struct starter s = { .start = start_close_from_callback, .name = test_clock_name() };

	REQUIRE(shmclock_writer_open(s.name, &s.w) == 0);
	REQUIRE(shmclock_writer_set_time(s.w, 0) == 0);
	/* The clock is closed by the library's thread once the callback
	 * has returned. */
	fork_while_the_library_starts_a_thread(&s);
	shmclock_writer_close(s.w);
}

static const struct {
	const char *name;
	void (*run)(void);
} cases[] = {
	{ "a_fork_waits_for_a_watcher_being_started", a_fork_waits_for_a_watcher_being_started },
	{ "a_fork_waits_for_a_timer_being_started", a_fork_waits_for_a_timer_being_started },
	{ "a_fork_waits_for_a_close_a_callback_started",
	  a_fork_waits_for_a_close_a_callback_started },
};

/* Makes the library start each kind of thread once, so that its fork
 * handlers exist before `first` is registered. */
static void warm_up(void)
{
	const char *name = test_clock_name();
	shmclock_timer_t *t;
	shmclock_writer_t *w;
	shmclock_t *c;

	if (shmclock_writer_open(name, &w) || shmclock_writer_set_time(w, 0)) {
		printf("Bail out! no clock to start with\n");
		exit(1);
	}
	if (!shmclock_open_ex(name, SHMCLOCK_OPEN_WATCH_JUMPS, &c)) {
		if (!shmclock_timer_start(c, shmclock_msec(1), tick, NULL, &t))
			shmclock_timer_stop(t);
		shmclock_close(c);
	}
	shmclock_writer_close(w);
}

static void on_kill(int sig)
{
	test_cleanup();
	signal(sig, SIG_DFL);
	raise(sig);
}

int main(void)
{
	int n = (int)(sizeof(cases) / sizeof(cases[0])), failed = 0;

	signal(SIGTERM, on_kill);
	signal(SIGINT, on_kill);
	setvbuf(stdout, NULL, _IOLBF, 0);
	sem_init(&held, 0, 0);
	sem_init(&release, 0, 0);
	/* Before the library's handlers: runs after them. */
	pthread_atfork(prepare_last, NULL, NULL);
	warm_up();
	/* After them: runs before them. */
	pthread_atfork(prepare_first, NULL, NULL);
	test_cleanup();
	printf("TAP version 13\n1..%d\n", n);
	for (int i = 0; i < n; i++) {
		failures_in_case = 0;
		cases[i].run();
		test_cleanup();
		printf("%sok %d - fork-threads::%s\n", failures_in_case ? "not " : "", i + 1,
		       cases[i].name);
		failed += failures_in_case != 0;
	}
	return failed ? 1 : 0;
}
