/* SPDX-License-Identifier: MIT */
/*
 * Timers in simulated time for supervised programs: ITIMER_REAL (alarm,
 * setitimer), POSIX timers and timerfds, answered by the listener and
 * fired by a thread of the supervisor.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <dirent.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <sys/wait.h>

#include "sat.h"
#include "sv.h"

#if defined(__x86_64__)

#ifndef KCMP_FILE
#define KCMP_FILE 0
#endif

/*
 * ITIMER_REAL (alarm, setitimer) of the supervised processes, in simulated
 * time on the jump-free timeline: the listener answers the calls, a thread
 * sends SIGALRM when one is due (to the process, as the kernel's timer
 * does). Kept per process, across exec, as the kernel keeps it; a fork
 * child starts without one.
 */
struct itimer {
	pid_t tgid;
	bool armed;
	int64_t next;     /* jump-free simulated ns */
	int64_t interval; /* 0: one-shot */
};

static struct itimer itimers[256];
static pthread_mutex_t it_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t sv_it_cond;

static struct itimer *it_find(pid_t tgid, bool add)
{
	struct itimer *free_slot = NULL;

	for (size_t i = 0; i < sizeof(itimers) / sizeof(itimers[0]); i++) {
		if (itimers[i].tgid == tgid)
			return &itimers[i];
		if (!itimers[i].tgid && !free_slot)
			free_slot = &itimers[i];
	}
	if (add && free_slot) {
		memset(free_slot, 0, sizeof(*free_slot));
		free_slot->tgid = tgid;
	}
	return add ? free_slot : NULL;
}

/* it_lock held: what is left of @t, as an itimerval. */
static struct itimerval it_get(const struct itimer *t)
{
	struct itimerval v = { { 0, 0 }, { 0, 0 } };
	int64_t now = 0, left;

	if (!t || !t->armed)
		return v;
	read_clock(false, &now);
	left = t->next - now;
	if (left <= 0)
		left = 1000; /* due: as the kernel, never 0 while armed */
	v.it_value.tv_sec = left / NS;
	v.it_value.tv_usec = (left % NS + 999) / 1000;
	if (v.it_value.tv_usec >= 1000000) {
		v.it_value.tv_sec++;
		v.it_value.tv_usec -= 1000000;
	}
	v.it_interval.tv_sec = t->interval / NS;
	v.it_interval.tv_usec = t->interval % NS / 1000;
	return v;
}

/* it_lock held: arm @t with @v (all zero: disarm). */
static void it_set(struct itimer *t, const struct itimerval *v)
{
	int64_t now = 0, val = (int64_t)v->it_value.tv_sec * NS + (int64_t)v->it_value.tv_usec * 1000;

	read_clock(false, &now);
	t->armed = val > 0;
	t->next = now + val;
	t->interval = (int64_t)v->it_interval.tv_sec * NS + (int64_t)v->it_interval.tv_usec * 1000;
	if (!t->armed)
		t->tgid = 0;
	pthread_cond_signal(&sv_it_cond);
}

/* The answer to alarm, setitimer or getitimer from @pid: true with
 * *@val, or false to let the kernel make it (not ITIMER_REAL). */
bool sv_answer_itimer(pid_t pid, long nr, const uint64_t *args, long *val, bool *ok)
{
	pid_t tgid = sv_tgid_of(pid);
	struct itimerval old, nv;
	struct itimer *t;

	if (nr != SYS_alarm && args[0] != ITIMER_REAL)
		return false;
	if (!sim(CLOCK_REALTIME))
		return false;
	if (nr == SYS_setitimer && args[1] && !sv_peek(pid, args[1], &nv, sizeof(nv))) {
		*ok = false;
		return true;
	}
	pthread_mutex_lock(&it_lock);
	t = it_find(tgid, nr != SYS_getitimer);
	old = it_get(t);
	if (t && nr == SYS_alarm) {
		struct itimerval a = { { 0, 0 }, { (time_t)(unsigned)args[0], 0 } };

		it_set(t, &a);
	} else if (t && nr == SYS_setitimer && args[1]) {
		it_set(t, &nv);
	}
	pthread_mutex_unlock(&it_lock);
	*val = 0;
	if (nr == SYS_alarm) {
		/* Seconds left, rounded as Linux's alarm rounds them. */
		*val = old.it_value.tv_sec;
		if ((!old.it_value.tv_sec && old.it_value.tv_usec) ||
		    old.it_value.tv_usec >= 500000)
			(*val)++;
	} else if (nr == SYS_setitimer && args[2]) {
		*ok = sv_poke(pid, args[2], &old, sizeof(old));
	} else if (nr == SYS_getitimer) {
		*ok = sv_poke(pid, args[1], &old, sizeof(old));
	}
	return true;
}

/*
 * POSIX timers (timer_create ...) and timerfds of the supervised
 * processes on the simulated clocks, answered by the listener and fired by
 * the same thread as the itimers, under it_lock. Timelines as for waits: a
 * relative value, or a monotonic or boottime clock, expires on the
 * jump-free timeline; an absolute CLOCK_REALTIME one on the world's, jumps
 * and all (its periods too, as the kernel's).
 *
 * A POSIX timer lives only in this table, its id in a range the kernel
 * does not reach (it counts its own from 0, for the CPU-time clocks the
 * kernel still serves). Its signal goes with rt_(tg)sigqueueinfo carrying
 * what the kernel's would: SI_TIMER, the id, sigev_value and the overrun.
 * While the previous one is still pending (/proc's SigPnd or ShdPnd), an
 * expiry only adds to the overrun, as the kernel's single queued signal
 * does. Timers die at exec and exit and are not inherited by fork (a
 * table keyed by the thread group).
 *
 * A timerfd is an eventfd installed in the program (SECCOMP_IOCTL_NOTIF_ADDFD
 * answers the call with it): read(2), poll and epoll work natively, the
 * supervisor adds expiry counts through its own copy, and the program's
 * descriptor is known by its open file (kcmp), so dup, fork and exec share
 * it as they share a timerfd. Expiry counts not read are dropped when it is
 * re-armed, as the kernel does.
 */
#define PT_ID_BASE 0x3c100000
#define PT_PER_PROC 4096
#define PT_MAX 16384
#define TFD_MAX 1024

struct ptimer {
	pid_t tgid; /* 0: a free slot */
	int id;
	int clock;
	int notify; /* SIGEV_NONE, SIGEV_SIGNAL, SIGEV_THREAD_ID */
	int signo;
	pid_t tid;    /* SIGEV_THREAD_ID */
	uint64_t value;
	bool armed, mono;
	bool sent;        /* a signal is out, maybe not delivered yet */
	int64_t next;     /* on its timeline */
	int64_t interval; /* 0: one-shot */
	int overrun;      /* expiries not signalled since the last signal */
	int overrun_last; /* what timer_getoverrun answers */
};

struct tfd {
	int fd; /* the supervisor's copy of the eventfd; -1: a free slot */
	int clock;
	bool armed, mono;
	int64_t next, interval;
};

static struct ptimer *ptimers;
static size_t nptimers;
static int pt_next_id = PT_ID_BASE;
static struct tfd tfds[TFD_MAX];
static bool tfds_init;

/* Now on a timer's timeline (@mono: the jump-free one). */
static int64_t tl_now(bool mono)
{
	int64_t now = 0;

	read_clock(!mono, &now);
	return now;
}

static bool pt_clock(long id)
{
	return (id == CLOCK_REALTIME || id == CLOCK_MONOTONIC || id == CLOCK_BOOTTIME) && sim(id);
}

static struct ptimer *pt_find(pid_t tgid, int id)
{
	for (size_t i = 0; i < nptimers; i++)
		if (ptimers[i].tgid == tgid && ptimers[i].id == id)
			return &ptimers[i];
	return NULL;
}

/* Whether signal @sig is pending for @p's target (thread or process). */
static bool pt_pending(const struct ptimer *p)
{
	char path[96], buf[2048], *l;
	const char *key = p->notify == SIGEV_THREAD_ID ? "\nSigPnd:" : "\nShdPnd:";
	ssize_t n;
	int fd;

	if (p->notify == SIGEV_THREAD_ID)
		snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)p->tgid, (int)p->tid);
	else
		snprintf(path, sizeof(path), "/proc/%d/status", (int)p->tgid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	l = strstr(buf, key);
	return l && (strtoull(l + strlen(key), NULL, 16) >> (p->signo - 1)) & 1;
}

static int overrun_add(int a, int64_t b)
{
	int64_t s = (int64_t)a + b;

	return s > INT32_MAX ? INT32_MAX : (int)s;
}

/* it_lock held: @p is due at @now on its timeline. */
static void pt_fire(struct ptimer *p, int64_t now)
{
	int64_t missed = 0;
	siginfo_t si;

	if (p->interval > 0) {
		missed = shmclock__sat_sub(now, p->next) / p->interval;
		p->next = shmclock__sat_add(p->next, shmclock__sat_add(missed * p->interval, p->interval));
	} else {
		p->armed = false;
	}
	if (p->notify == SIGEV_NONE)
		return;
	if (p->sent && pt_pending(p)) {
		p->overrun = overrun_add(p->overrun, 1 + missed);
		return;
	}
	p->overrun = overrun_add(p->overrun, missed);
	memset(&si, 0, sizeof(si));
	si.si_signo = p->signo;
	si.si_code = SI_TIMER;
	si.si_timerid = p->id;
	si.si_overrun = p->overrun;
	memcpy(&si.si_value, &p->value, sizeof(si.si_value));
	if (p->notify == SIGEV_THREAD_ID)
		syscall(SYS_rt_tgsigqueueinfo, p->tgid, p->tid, p->signo, &si);
	else
		syscall(SYS_rt_sigqueueinfo, p->tgid, p->signo, &si);
	p->overrun_last = p->overrun;
	p->overrun = 0;
	p->sent = true;
}

/* it_lock held: an itimerspec's two values, checked as the kernel checks
 * them; false: EINVAL. */
static bool its_ns(const struct itimerspec *v, int64_t *val, int64_t *intv)
{
	const struct timespec *t[2] = { &v->it_value, &v->it_interval };

	for (int k = 0; k < 2; k++)
		if (t[k]->tv_sec < 0 || t[k]->tv_nsec < 0 || t[k]->tv_nsec >= NS)
			return false;
	/* Beyond 292 years: as far as a time goes (the kernel's KTIME_MAX). */
	*val = v->it_value.tv_sec >= INT64_MAX / NS - 1 ? INT64_MAX : ts_ns(&v->it_value);
	*intv = v->it_interval.tv_sec >= INT64_MAX / NS - 1 ? INT64_MAX : ts_ns(&v->it_interval);
	return true;
}


/* What is left of a timer on its timeline, as timer_gettime says it. */
static struct itimerspec left_its(bool armed, bool mono, int64_t next, int64_t interval,
				  bool due_is_one)
{
	struct itimerspec v;
	int64_t l = 0;

	memset(&v, 0, sizeof(v));
	if (!armed)
		return v;
	l = shmclock__sat_sub(next, tl_now(mono));
	if (l <= 0)
		l = due_is_one ? 1 : 0;
	v.it_value = ns_ts(l);
	v.it_interval = ns_ts(interval);
	return v;
}

/* it_lock held: arms (or disarms) a timer from the program's value. */
static void arm(bool *armed, bool *mono, int64_t *next, int64_t *interval, int clock,
		bool abs, int64_t val, int64_t intv)
{
	*armed = val > 0;
	*interval = intv;
	if (abs) {
		*mono = !is_rt(clock);
		*next = val;
	} else {
		*mono = true;
		*next = shmclock__sat_add(tl_now(true), val);
	}
}

/* timer_create: -errno, 0 answered (*val), 1 the kernel's. */
static int pt_create(pid_t pid, pid_t tgid, const uint64_t *args, long *val,
		     struct ptimer **made)
{
	struct sigevent ev;
	struct ptimer *p = NULL;
	size_t mine = 0;
	int id;

	if (!pt_clock((long)args[0]))
		return 1;
	memset(&ev, 0, sizeof(ev));
	if (args[1]) {
		if (!sv_peek(pid, args[1], &ev, sizeof(ev)))
			return -EFAULT;
	} else {
		ev.sigev_notify = SIGEV_SIGNAL;
		ev.sigev_signo = SIGALRM;
	}
	switch (ev.sigev_notify) {
	case SIGEV_THREAD_ID:
		if (ev._sigev_un._tid <= 0 || sv_tgid_of(ev._sigev_un._tid) != tgid ||
		    kill(ev._sigev_un._tid, 0))
			return -EINVAL;
		/* fall through */
	case SIGEV_SIGNAL:
	case SIGEV_THREAD:
		if (ev.sigev_signo <= 0 || ev.sigev_signo > SIGRTMAX)
			return -EINVAL;
		break;
	case SIGEV_NONE:
		break;
	default:
		return -EINVAL;
	}
	for (size_t i = 0; i < nptimers; i++) {
		if (ptimers[i].tgid == tgid)
			mine++;
		else if (!ptimers[i].tgid && !p)
			p = &ptimers[i];
	}
	if (mine >= PT_PER_PROC)
		return -EAGAIN;
	if (!p) {
		size_t n = nptimers ? nptimers * 2 : 64;
		struct ptimer *g;

		if (n > PT_MAX)
			n = PT_MAX;
		if (n <= nptimers || !(g = realloc(ptimers, n * sizeof(*g))))
			return -EAGAIN;
		memset(g + nptimers, 0, (n - nptimers) * sizeof(*g));
		ptimers = g;
		p = &ptimers[nptimers];
		nptimers = n;
	}
	do {
		id = pt_next_id;
		pt_next_id = pt_next_id == INT32_MAX ? PT_ID_BASE : pt_next_id + 1;
	} while (pt_find(tgid, id));
	if (!sv_poke(pid, args[2], &id, sizeof(id)))
		return -EFAULT;
	memset(p, 0, sizeof(*p));
	p->tgid = tgid;
	p->id = id;
	p->clock = (int)args[0];
	p->notify = ev.sigev_notify == SIGEV_THREAD ? SIGEV_SIGNAL : ev.sigev_notify;
	p->signo = ev.sigev_signo;
	p->tid = ev._sigev_un._tid;
	if (args[1])
		memcpy(&p->value, &ev.sigev_value, sizeof(ev.sigev_value));
	else
		p->value = (uint64_t)(unsigned)id;
	*made = p;
	*val = 0;
	return 0;
}

/* timer_settime, timer_gettime, timer_getoverrun, timer_delete: -errno, 0
 * answered (*val), 1 the kernel's (not one of ours). */
static int pt_call(pid_t pid, pid_t tgid, long nr, const uint64_t *args, long *val)
{
	struct ptimer *p = pt_find(tgid, (int)args[0]);
	struct itimerspec nv, old;
	int64_t v, iv;

	if (!p)
		return 1;
	*val = 0;
	if (p->armed && p->notify == SIGEV_NONE) {
		/* Tracked only: brought up to date when asked. */
		int64_t now = tl_now(p->mono);

		if (p->next <= now)
			pt_fire(p, now);
	}
	old = left_its(p->armed, p->mono, p->next, p->interval, p->notify != SIGEV_NONE);
	switch (nr) {
	case SYS_timer_settime:
		if (!args[2])
			return -EINVAL;
		if (!sv_peek(pid, args[2], &nv, sizeof(nv)))
			return -EFAULT;
		if (!its_ns(&nv, &v, &iv))
			return -EINVAL;
		arm(&p->armed, &p->mono, &p->next, &p->interval, p->clock,
		    args[1] & TIMER_ABSTIME, v, iv);
		p->overrun = 0;
		p->sent = false;
		if (p->notify != SIGEV_NONE) /* nothing for the thread to send */
			pthread_cond_signal(&sv_it_cond);
		if (args[3] && !sv_poke(pid, args[3], &old, sizeof(old)))
			return -EFAULT;
		return 0;
	case SYS_timer_gettime:
		return sv_poke(pid, args[1], &old, sizeof(old)) ? 0 : -EFAULT;
	case SYS_timer_getoverrun:
		*val = p->overrun_last;
		return 0;
	default: /* timer_delete */
		p->tgid = 0;
		return 0;
	}
}

/* A process exec'd or exited: its POSIX timers go. */
void sv_pt_forget(pid_t tgid)
{
	pthread_mutex_lock(&it_lock);
	for (size_t i = 0; i < nptimers; i++)
		if (ptimers[i].tgid == tgid)
			ptimers[i].tgid = 0;
	pthread_mutex_unlock(&it_lock);
}

/* ---- timerfds */

/* it_lock held: the timerfd that is @pid's descriptor @fd, or NULL. */
static struct tfd *tfd_find(pid_t pid, int fd)
{
	for (size_t i = 0; tfds_init && i < TFD_MAX; i++)
		if (tfds[i].fd >= 0 &&
		    syscall(SYS_kcmp, pid, getpid(), KCMP_FILE, fd, tfds[i].fd) == 0)
			return &tfds[i];
	return NULL;
}

/* it_lock held, the table full: drops the timerfds no process has any
 * more (the program closed each copy; ours is the last). */
static void tfd_sweep(void)
{
	bool held[TFD_MAX] = { false };
	DIR *d = opendir("/proc");
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		char path[300], link[64];
		pid_t pid = (pid_t)atoi(e->d_name);
		struct dirent *f;
		DIR *fdd;

		if (pid <= 0 || pid == getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
		fdd = opendir(path);
		if (!fdd)
			continue;
		while ((f = readdir(fdd))) {
			char lp[600];
			ssize_t n;

			if (f->d_name[0] == '.')
				continue;
			snprintf(lp, sizeof(lp), "%s/%s", path, f->d_name);
			n = readlink(lp, link, sizeof(link) - 1);
			if (n <= 0)
				continue;
			link[n] = 0;
			if (strcmp(link, "anon_inode:[eventfd]"))
				continue;
			for (size_t i = 0; i < TFD_MAX; i++)
				if (tfds[i].fd >= 0 && !held[i] &&
				    syscall(SYS_kcmp, pid, getpid(), KCMP_FILE, atoi(f->d_name),
					    tfds[i].fd) == 0)
					held[i] = true;
		}
		closedir(fdd);
	}
	closedir(d);
	for (size_t i = 0; i < TFD_MAX; i++) {
		if (tfds[i].fd >= 0 && !held[i]) {
			close(tfds[i].fd);
			tfds[i].fd = -1;
		}
	}
}

/* Expiry counts not read yet are dropped (a re-arm). */
static void tfd_drain(struct tfd *t)
{
	uint64_t n;
	struct iovec io = { &n, sizeof(n) };

	(void)!preadv2(t->fd, &io, 1, -1, RWF_NOWAIT);
}

/* it_lock held: @t is due at @now on its timeline. The count is added
 * only if the write cannot block (eventfd's write has no RWF_NOWAIT): a
 * program that filled the counter itself loses the expiries, not the
 * supervisor its thread. */
static void tfd_fire(struct tfd *t, int64_t now)
{
	struct pollfd pf = { t->fd, POLLOUT, 0 };
	uint64_t n = 1;

	if (t->interval > 0) {
		int64_t missed = shmclock__sat_sub(now, t->next) / t->interval;

		n += (uint64_t)missed;
		t->next = shmclock__sat_add(t->next, shmclock__sat_add(missed * t->interval, t->interval));
	} else {
		t->armed = false;
	}
	if (poll(&pf, 1, 0) == 1 && (pf.revents & POLLOUT))
		(void)!write(t->fd, &n, sizeof(n));
}

/* timerfd_create: -errno, 0 answered (the notification is answered by
 * the ioctl that installs the descriptor), 1 the kernel's. */
static int tfd_create(const struct seccomp_notif *req)
{
	struct seccomp_notif_addfd add;
	struct tfd *t = NULL;
	long clock = (long)req->data.args[0];
	int flags = (int)req->data.args[1], r;

	if (!pt_clock(clock) || (flags & ~(TFD_CLOEXEC | TFD_NONBLOCK)))
		return 1;
	if (!tfds_init) {
		for (size_t i = 0; i < TFD_MAX; i++)
			tfds[i].fd = -1;
		tfds_init = true;
	}
	for (int pass = 0; pass < 2 && !t; pass++) {
		for (size_t i = 0; i < TFD_MAX && !t; i++)
			if (tfds[i].fd < 0)
				t = &tfds[i];
		if (!t && !pass)
			tfd_sweep();
	}
	if (!t)
		return -EMFILE;
	memset(t, 0, sizeof(*t));
	t->fd = eventfd(0, EFD_CLOEXEC | (flags & TFD_NONBLOCK ? EFD_NONBLOCK : 0));
	if (t->fd < 0) {
		t->fd = -1;
		return -ENFILE;
	}
	t->clock = (int)clock;
	memset(&add, 0, sizeof(add));
	add.id = req->id;
	add.flags = SECCOMP_ADDFD_FLAG_SEND;
	add.srcfd = (uint32_t)t->fd;
	add.newfd_flags = flags & TFD_CLOEXEC ? O_CLOEXEC : 0;
	r = ioctl(sv_listener, SECCOMP_IOCTL_NOTIF_ADDFD, &add);
	if (r < 0) {
		r = errno;
		close(t->fd);
		t->fd = -1;
		/* No SECCOMP_ADDFD_FLAG_SEND (before Linux 5.14): the
		 * kernel's timerfd, on real time. */
		return r == EINVAL ? 1 : r == ENOENT ? 0 : -r;
	}
	return 0;
}

/* timerfd_settime, timerfd_gettime: as pt_call. */
static int tfd_call(pid_t pid, long nr, const uint64_t *args)
{
	struct tfd *t = tfd_find(pid, (int)args[0]);
	struct itimerspec nv, old;
	int64_t v, iv;

	if (!t)
		return 1;
	if (t->armed) {
		int64_t now = tl_now(t->mono);

		if (t->next <= now)
			tfd_fire(t, now);
	}
	old = left_its(t->armed, t->mono, t->next, t->interval, false);
	if (nr == SYS_timerfd_gettime)
		return sv_poke(pid, args[1], &old, sizeof(old)) ? 0 : -EFAULT;
	if (args[1] & ~(uint64_t)(TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET))
		return -EINVAL;
	if (!sv_peek(pid, args[2], &nv, sizeof(nv)))
		return -EFAULT;
	if (!its_ns(&nv, &v, &iv))
		return -EINVAL;
	arm(&t->armed, &t->mono, &t->next, &t->interval, t->clock, args[1] & TFD_TIMER_ABSTIME,
	    v, iv);
	tfd_drain(t);
	pthread_cond_signal(&sv_it_cond);
	if (args[3] && !sv_poke(pid, args[3], &old, sizeof(old)))
		return -EFAULT;
	return 0;
}

/* The answer to the timer calls and clock_getres of a supervised process
 * (-errno, 0 answered with *val, 1 the kernel's); for timerfd_create, 0
 * with *sent: answered already. */
int sv_answer_timer(const struct seccomp_notif *req, long *val, bool *sent)
{
	pid_t pid = (pid_t)req->pid, tgid;
	const uint64_t *args = (const uint64_t *)req->data.args;
	struct ptimer *made = NULL;
	long nr = req->data.nr;
	int r;

	*sent = false;
	if (nr == SYS_clock_getres) {
		/* Simulated time is a nanosecond count whatever the clock
		 * (the coarse ones read it in full too); the shim says the
		 * same, so any process of the tree gets it, as its reads. */
		struct timespec res = { 0, 1 };

		if (!sim((long)args[0]))
			return 1;
		*val = 0;
		return !args[1] || sv_poke(pid, args[1], &res, sizeof(res)) ? 0 : -EFAULT;
	}
	/* A dynamic program's shim makes its own timers on the kernel's
	 * clocks (without its trap, through here). */
	tgid = sv_tgid_of(pid);
	if (!sv_proc_static_tgid(tgid))
		return 1;
	pthread_mutex_lock(&it_lock);
	switch (nr) {
	case SYS_timer_create:
		r = pt_create(pid, tgid, args, val, &made);
		/* Killed meanwhile, its exit perhaps handled already: the
		 * timer must not outlive it (and signal whoever gets its
		 * pid). Checked under it_lock, which the exit's clean-up
		 * takes after the death. */
		if (r == 0 && made && ioctl(sv_listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &req->id))
			made->tgid = 0;
		break;
	case SYS_timerfd_create:
		r = tfd_create(req);
		*sent = r == 0;
		break;
	case SYS_timerfd_settime:
	case SYS_timerfd_gettime:
		*val = 0;
		r = tfd_call(pid, nr, args);
		break;
	default:
		r = pt_call(pid, tgid, nr, args, val);
		break;
	}
	pthread_mutex_unlock(&it_lock);
	return r;
}

/* Sends SIGALRM as each itimer comes due, and fires the POSIX timers and
 * timerfds; sleeps in slices meanwhile (a jump of the clock is seen within
 * one). */
void *sv_fire_itimers(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&it_lock);
	for (;;) {
		int64_t now = 0, now_rt = 0, soonest = INT64_MAX, real;
		struct timespec until;
		shmclock_info_t i;

		read_clock(false, &now);
		read_clock(true, &now_rt);
		for (size_t k = 0; k < sizeof(itimers) / sizeof(itimers[0]); k++) {
			struct itimer *t = &itimers[k];

			if (!t->tgid || !t->armed)
				continue;
			if (t->next <= now) {
				kill(t->tgid, SIGALRM);
				if (t->interval > 0) {
					t->next += t->interval;
					if (t->next <= now)
						t->next = now + t->interval;
				} else {
					t->armed = false;
					t->tgid = 0;
					continue;
				}
			}
			if (t->next - now < soonest)
				soonest = t->next - now;
		}
		for (size_t k = 0; k < nptimers; k++) {
			struct ptimer *p = &ptimers[k];
			int64_t n = p->mono ? now : now_rt;

			/* SIGEV_NONE: nothing to send, brought up to date
			 * when asked. */
			if (!p->tgid || !p->armed || p->notify == SIGEV_NONE)
				continue;
			if (p->next <= n)
				pt_fire(p, n);
			if (p->armed && shmclock__sat_sub(p->next, n) < soonest)
				soonest = shmclock__sat_sub(p->next, n);
		}
		for (size_t k = 0; tfds_init && k < TFD_MAX; k++) {
			struct tfd *t = &tfds[k];
			int64_t n = t->mono ? now : now_rt;

			if (t->fd < 0 || !t->armed)
				continue;
			if (t->next <= n)
				tfd_fire(t, n);
			if (t->armed && shmclock__sat_sub(t->next, n) < soonest)
				soonest = shmclock__sat_sub(t->next, n);
		}
		if (soonest == INT64_MAX) {
			pthread_cond_wait(&sv_it_cond, &it_lock);
			continue;
		}
		real = SLICE_NS;
		if (!shmclock_info(sv_clk, &i) && i.initialized && !i.paused && !i.stepped &&
		    i.scale > 0) {
			real = (int64_t)((double)soonest / i.scale);
			real = real < 1000 ? 1000 : real > SLICE_NS ? SLICE_NS : real;
		}
		clock_gettime(CLOCK_MONOTONIC, &until);
		until = ns_ts(ts_ns(&until) + real);
		pthread_cond_timedwait(&sv_it_cond, &it_lock, &until);
	}
	return NULL;
}

/* A process has exited: its timer goes with it. */
void sv_itimer_exit(pid_t tgid)
{
	struct itimer *t;

	pthread_mutex_lock(&it_lock);
	t = it_find(tgid, false);
	if (t) {
		t->armed = false;
		t->tgid = 0;
	}
	pthread_mutex_unlock(&it_lock);
}

#endif
