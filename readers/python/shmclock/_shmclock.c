/* SPDX-License-Identifier: MIT */
/*
 * _shmclock: the C core of the Python package `shmclock` (shmclock/__init__.py
 * builds the public API on it). Everything that touches the clock is here;
 * argument conversion, loops and asyncio are in Python.
 *
 * The GIL and jump callbacks: the library makes a reader wait while
 * another thread of its process runs jump callbacks, and a Python callback
 * needs the GIL. A thread holding the GIL in now() and a thread delivering
 * a jump to Python would wait for each other. So a Clock reads through a
 * handle that never runs or waits for callbacks (SHMCLOCK_OPEN_NO_CALLBACKS),
 * and Python callbacks run on a second handle's watcher thread, which
 * takes the GIL to call them. Every call that may wait for that watcher
 * (remove, close) releases the GIL first.
 *
 * A handle in use by a call that released the GIL (a sleep, a wait) must
 * not be unmapped under it: such calls count themselves in `busy` (under
 * the clock's own mutex, not the GIL: free-threaded CPython has none), and
 * close() with calls in flight wakes them and leaves the unmapping to the
 * last one out.
 *
 * fork(): the library keeps a child's clocks usable and restarts their
 * watchers; os.register_at_fork (in __init__.py) renews what this module
 * keeps per clock there and holds those watchers until Python is ready.
 * No thread may be created while another forks (glibc can then give the
 * child a thread stack whose TLS it frees twice): the library's own
 * (watchers, opened here without the GIL) wait for a fork in progress, and
 * this module creates its one kind of thread (release_now) with the GIL
 * held, which os.fork() holds throughout.
 *
 * One file past 800 lines: a CPython extension module is one translation
 * unit by convention (its method table and types beside their methods).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include <shmclock/lockstep.h>
#include <shmclock/shmclock.h>
#include <shmclock/time.h>
#include <shmclock/writer.h>

static PyObject *StaleClockError;
static PyTypeObject InfoType, JumpType;

/* ------------------------------------------------------------- errors */

/* Raises the exception for -errno @r about clock @name, saying @msg;
 * returns NULL. */
static PyObject *raise_msg(int r, const char *msg, const char *name)
{
	PyObject *e;

	if (r == -EINVAL || r == -ERANGE)
		return PyErr_Format(PyExc_ValueError, "clock '%s': %s", name, msg);
	/* OSError(errno, msg) picks its subclass: FileNotFoundError,
	 * PermissionError, TimeoutError, ... */
	e = PyObject_CallFunction(PyExc_OSError, "(is)", -r, msg);
	if (!e)
		return NULL;
	if (name) {
		PyObject *f = PyUnicode_FromString(name);

		if (f)
			PyObject_SetAttrString(e, "filename", f);
		Py_XDECREF(f);
	}
	PyErr_SetObject((PyObject *)Py_TYPE(e), e);
	Py_DECREF(e);
	return NULL;
}

/* ... with the library's message. */
static PyObject *raise_errno(int r, const char *name)
{
	return raise_msg(r, shmclock_strerror(r), name);
}

/* StaleClockError, with the value computed from the last committed state. */
static PyObject *raise_stale(int64_t value, const char *name)
{
	PyObject *e = PyObject_CallFunction(StaleClockError, "(is)", ESTALE, shmclock_strerror(-ESTALE));
	PyObject *v;

	if (!e)
		return NULL;
	v = PyLong_FromLongLong(value);
	if (v)
		PyObject_SetAttrString(e, "value", v);
	Py_XDECREF(v);
	if (name) {
		PyObject *f = PyUnicode_FromString(name);

		if (f)
			PyObject_SetAttrString(e, "filename", f);
		Py_XDECREF(f);
	}
	PyErr_SetObject(StaleClockError, e);
	Py_DECREF(e);
	return NULL;
}

/* ------------------------------------------------------------- info */

/* "'simulation', 'system', ...": every name of SHMCLOCK_SOURCE_MAP. */
#define SOURCE_NAME(value, id, name, alias, flags, help) "'" #name "', "
#define SOURCE_NAMES SHMCLOCK_SOURCE_MAP(SOURCE_NAME)

static PyStructSequence_Field info_fields[] = {
	{ "sim_ns", "simulation time at the snapshot, ns (meaningless when not initialized)" },
	{ "mono_ns", "CLOCK_MONOTONIC at the snapshot, ns" },
	{ "scale", "nominal rate (kept while paused or stepped)" },
	{ "source", "time source: " SOURCE_NAMES "'none'" },
	{ "initialized", "False: the clock has no time yet" },
	{ "paused", NULL },
	{ "stepped", "time arrives in steps (no extrapolation)" },
	{ "unix_at_zero_ns", "UNIX time of simulation zero, ns, or None" },
	{ "jump_epoch", "explicit jumps so far" },
	{ "last_jump_ns", "signed size of the last jump, ns" },
	{ "writer_alive", NULL },
	{ "writer_pid", "in the writer's pid namespace" },
	{ "writer_generation", "how many writers have opened the clock" },
	{ "writer_start_unix_ns", NULL },
	{ "heartbeat_age_ns", "since the writer's last heartbeat, ns, or None" },
	{ "commits", "changes published so far" },
	{ "owner_uid", "owner of the segment file" },
	{ "jump_total_ns", "signed sum of all jumps, ns: sim_ns minus it is now_monotonic()" },
	{ "stale", "the writer lost what it follows (a leader, /clock): now() raises StaleClockError" },
	{ NULL, NULL },
};

static PyStructSequence_Desc info_desc = {
	"shmclock.ClockInfo",
	"A consistent snapshot of a clock (immutable).",
	info_fields,
	19,
};

static PyObject *make_info(const shmclock_info_t *in)
{
	PyObject *o = PyStructSequence_New(&InfoType);
	int i = 0;

	if (!o)
		return NULL;
#define SET(v) PyStructSequence_SET_ITEM(o, i++, (v))
	SET(PyLong_FromLongLong(in->sim_ns));
	SET(PyLong_FromLongLong(in->mono_ns));
	SET(PyFloat_FromDouble(in->scale));
	SET(PyUnicode_FromString(shmclock_source_name(in->source)));
	SET(PyBool_FromLong(in->initialized));
	SET(PyBool_FromLong(in->paused));
	SET(PyBool_FromLong(in->stepped));
	SET(in->has_unix_at_zero ? PyLong_FromLongLong(in->unix_at_zero_ns) : Py_NewRef(Py_None));
	SET(PyLong_FromUnsignedLongLong(in->jump_epoch));
	SET(PyLong_FromLongLong(in->last_jump_ns));
	SET(PyBool_FromLong(in->writer_alive));
	SET(PyLong_FromLong(in->writer_pid));
	SET(PyLong_FromUnsignedLong(in->writer_generation));
	SET(PyLong_FromLongLong(in->writer_start_unix_ns));
	SET(in->heartbeat_age_ns < 0 ? Py_NewRef(Py_None) : PyLong_FromLongLong(in->heartbeat_age_ns));
	SET(PyLong_FromUnsignedLongLong(in->commits));
	SET(PyLong_FromUnsignedLong(in->owner_uid));
	SET(PyLong_FromLongLong(in->jump_total_ns));
	SET(PyBool_FromLong(in->stale));
#undef SET
	if (PyErr_Occurred()) {
		Py_DECREF(o);
		return NULL;
	}
	return o;
}

static PyStructSequence_Field jump_fields[] = {
	{ "before", "True: called before the process sees the new time; False: after" },
	{ "forward", NULL },
	{ "backward", NULL },
	{ "clock_change", "the source changed, or the clock started" },
	{ "delta_ns", "signed size of the (last) jump, ns" },
	{ "jump_epoch", "the clock's jump epoch after it" },
	{ "jumps", "jumps since the last delivery (> 1: collapsed)" },
	{ "source", NULL },
	{ NULL, NULL },
};

static PyStructSequence_Desc jump_desc = {
	"shmclock.Jump",
	"A jump of the clock, as passed to on_jump() callbacks.",
	jump_fields,
	8,
};

/* ------------------------------------------------------------- Clock */

struct jump_entry {
	PyObject *callback;
	shmclock_t *jh;         /* the handle it runs on (for the thread check) */
	uint64_t id;
	struct jump_entry *next;
};

typedef struct {
	PyObject_HEAD
	/* Guards every field below it. Held only for a few loads and stores,
	 * never while waiting for anything (the GIL included), so it may be
	 * taken with or without the GIL. */
	pthread_mutex_t mu;
	shmclock_t *h;          /* reads and sleeps: never waits for callbacks */
	shmclock_t *jh;         /* callbacks, on its watcher thread; NULL until needed */
	unsigned flags;         /* the open flags, less NO_CALLBACKS */
	struct jump_entry *jumps;
	int busy;               /* calls using h or jh without the GIL */
	bool close_pending;     /* closed while busy: the last one out unmaps */
	char name[SHMCLOCK_NAME_MAX + 1];
} ClockObject;

/* The jump handle whose callback this thread is running (set by the
 * trampoline): that thread cannot close it, its watcher being itself. */
static _Thread_local shmclock_t *running_jh;

/*
 * Threads of ours that take the GIL (watchers running callbacks, the
 * closer) and os.fork(). Such a thread creates its Python thread state in
 * PyGILState_Ensure without the GIL, holding the runtime's thread list
 * lock, and CPython 3.11 takes that lock in a child before it renews it: a
 * fork at that moment leaves the child hanging in os.fork(). So a thread
 * counts itself in `entering` until it holds the GIL, and the before-fork
 * hook waits, the GIL released, until none is entering; `forking` keeps new
 * ones out meanwhile (seq_cst on both sides: each sees the other's count).
 * In a child, `forking` is as the parent's fork left it (at least 1)
 * until the child's hook, which starts the callbacks' watchers, sets it to
 * zero once Python is ready there.
 */
static _Atomic int forking;  /* os.fork() calls between before and after */
static _Atomic int entering; /* threads between the check and holding the GIL */

static PyGILState_STATE ensure_gil(void)
{
	PyGILState_STATE g;

	for (;;) {
		struct timespec ms = { 0, 1000000 };

		atomic_fetch_add(&entering, 1);
		if (!atomic_load(&forking))
			break;
		atomic_fetch_sub(&entering, 1);
		nanosleep(&ms, NULL);
	}
	g = PyGILState_Ensure();
	atomic_fetch_sub(&entering, 1);
	return g;
}

static PyObject *raise_closed(void)
{
	PyErr_SetString(PyExc_ValueError, "I/O operation on a closed clock");
	return NULL;
}

/* Handles released by the last user of a closed clock. */
struct released {
	shmclock_t *h, *jh;
	struct jump_entry *jumps;
};

static void *close_later(void *arg);

/* Closes what a closed clock held. With the GIL (callbacks are dropped
 * here); the handles are closed without it (the watcher may be waiting for
 * it to run a callback). On the watcher's own thread (a callback closed its
 * clock, or dropped the last reference to it) the watcher cannot wait for
 * itself: a thread of our own does it once the callback has returned. */
static void release_now(struct released r)
{
	struct jump_entry *e = r.jumps;

	if (r.jh && running_jh == r.jh) {
		struct released *copy = malloc(sizeof(*copy));
		pthread_attr_t a;
		pthread_t t;

		if (copy) {
			*copy = r;
			pthread_attr_init(&a);
			pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
			if (pthread_create(&t, &a, close_later, copy) == 0) {
				pthread_attr_destroy(&a);
				return;
			}
			pthread_attr_destroy(&a);
			free(copy);
		}
		/* No thread: the handles stay open (a leak, never a crash). */
		return;
	}
	Py_BEGIN_ALLOW_THREADS
	shmclock_close(r.jh);
	shmclock_close(r.h);
	Py_END_ALLOW_THREADS
	while (e) {
		struct jump_entry *n = e->next;

		Py_DECREF(e->callback);
		free(e);
		e = n;
	}
}

static void *close_later(void *arg)
{
	struct released *r = arg;
	struct jump_entry *e = r->jumps;

	shmclock_close(r->jh); /* waits for the callback to return */
	shmclock_close(r->h);
	if (e && Py_IsInitialized()) {
		PyGILState_STATE g = ensure_gil();

		while (e) {
			struct jump_entry *n = e->next;

			Py_DECREF(e->callback);
			free(e);
			e = n;
		}
		PyGILState_Release(g);
	}
	free(r);
	return NULL;
}

/* Takes everything out of @c (with c->mu held); the caller releases it. */
static struct released take_all(ClockObject *c)
{
	struct released r = { c->h, c->jh, c->jumps };

	c->h = c->jh = NULL;
	c->jumps = NULL;
	c->close_pending = false;
	return r;
}

/*
 * A call that uses the handles without the GIL counts itself in busy:
 * use() returns the reading handle (NULL with ValueError set when closed),
 * done() ends the use and, if it was the last of a closed clock, releases
 * it. Both with the GIL held.
 */
static shmclock_t *use(ClockObject *c)
{
	shmclock_t *h = NULL;

	pthread_mutex_lock(&c->mu);
	if (c->h && !c->close_pending) {
		h = c->h;
		c->busy++;
	}
	pthread_mutex_unlock(&c->mu);
	if (!h)
		raise_closed();
	return h;
}

static void done(ClockObject *c)
{
	struct released r = { 0 };
	bool last;

	pthread_mutex_lock(&c->mu);
	last = --c->busy == 0 && c->close_pending;
	if (last)
		r = take_all(c);
	pthread_mutex_unlock(&c->mu);
	if (last)
		release_now(r);
}

/*
 * The calls that hold the GIL throughout (now and the other reads) need no
 * count with a GIL: close() cannot run meanwhile. Without one (free-threaded
 * CPython) they count themselves like the others.
 */
#ifdef Py_GIL_DISABLED
#define USE_QUICK(c) use(c)
#define DONE_QUICK(c) done(c)
#else
static shmclock_t *use_quick(ClockObject *c)
{
	if (c->h && !c->close_pending)
		return c->h;
	raise_closed();
	return NULL;
}
#define USE_QUICK(c) use_quick(c)
#define DONE_QUICK(c) ((void)(c))
#endif

static PyObject *Clock_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	ClockObject *self = (ClockObject *)type->tp_alloc(type, 0);

	if (self)
		pthread_mutex_init(&self->mu, NULL);
	return (PyObject *)self;
}

static int Clock_init(ClockObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "name", "flags", "wait_ns", NULL };
	const char *name;
	unsigned flags = 0;
	long long wait_ns = -2; /* -2: do not wait; -1: forever */
	shmclock_t *h = NULL;
	bool twice;
	int r;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "s|IL", kwlist, &name, &flags, &wait_ns))
		return -1;
	pthread_mutex_lock(&self->mu);
	twice = self->h || self->name[0];
	if (!twice)
		snprintf(self->name, sizeof(self->name), "%s", name);
	pthread_mutex_unlock(&self->mu);
	if (twice) {
		PyErr_SetString(PyExc_RuntimeError, "Clock.__init__ called twice");
		return -1;
	}
	Py_BEGIN_ALLOW_THREADS
	if (wait_ns == -2)
		r = shmclock_open_ex(name, flags | SHMCLOCK_OPEN_NO_CALLBACKS, &h);
	else
		r = shmclock_open_wait(name, flags | SHMCLOCK_OPEN_NO_CALLBACKS,
				       shmclock_nsec(wait_ns), &h);
	Py_END_ALLOW_THREADS
	if (r) {
		/* Not opened: __init__ may be tried again (the module waits in
		 * slices, so that Python can run its signal handlers). */
		pthread_mutex_lock(&self->mu);
		self->name[0] = 0;
		pthread_mutex_unlock(&self->mu);
		raise_errno(r, name);
		return -1;
	}
	pthread_mutex_lock(&self->mu);
	self->flags = flags & ~SHMCLOCK_OPEN_NO_CALLBACKS;
	self->h = h;
	pthread_mutex_unlock(&self->mu);
	return 0;
}

/* close(): at once, or, with calls in flight, once the last returns; they
 * are woken (a sleep ends with -ECANCELED, a wait within its slice). */
static void clock_close(ClockObject *c)
{
	struct released r = { 0 };
	bool now = false;

	pthread_mutex_lock(&c->mu);
	if (c->h && !c->close_pending) {
		if (c->busy) {
			c->close_pending = true;
			shmclock_cancel_sleeps(c->h);
		} else {
			r = take_all(c);
			now = true;
		}
	}
	pthread_mutex_unlock(&c->mu);
	if (now)
		release_now(r);
}

static void Clock_dealloc(ClockObject *self)
{
	struct released r;

	/* No call can be in flight: it would hold a reference to self. */
	r = take_all(self);
	release_now(r);
	pthread_mutex_destroy(&self->mu);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Clock_close(ClockObject *self, PyObject *unused)
{
	clock_close(self);
	Py_RETURN_NONE;
}

/* The hot path: no GIL release (it would cost more than the read). */
static PyObject *Clock_now(ClockObject *self, PyObject *unused)
{
	shmclock_t *h = USE_QUICK(self);
	int64_t t;
	int r;

	if (!h)
		return NULL;
	r = shmclock_now(h, &t);
	DONE_QUICK(self);
	if (__builtin_expect(r == 0, 1))
		return PyLong_FromLongLong(t);
	return r == -ESTALE ? raise_stale(t, self->name) : raise_errno(r, self->name);
}

/* now_unix(), now_monotonic(): one of the library's other reads. */
static PyObject *read_with(ClockObject *self, int (*read)(shmclock_t *, int64_t *))
{
	shmclock_t *h = USE_QUICK(self);
	int64_t t;
	int r;

	if (!h)
		return NULL;
	r = read(h, &t);
	DONE_QUICK(self);
	if (r == 0)
		return PyLong_FromLongLong(t);
	return r == -ESTALE ? raise_stale(t, self->name) : raise_errno(r, self->name);
}

static PyObject *Clock_now_unix(ClockObject *self, PyObject *unused)
{
	return read_with(self, shmclock_now_unix);
}

static PyObject *Clock_now_monotonic(ClockObject *self, PyObject *unused)
{
	return read_with(self, shmclock_now_monotonic);
}

static PyObject *Clock_info(ClockObject *self, PyObject *unused)
{
	shmclock_t *h = USE_QUICK(self);
	shmclock_info_t in;
	int r;

	if (!h)
		return NULL;
	r = shmclock_info(h, &in);
	DONE_QUICK(self);
	return r ? raise_errno(r, self->name) : make_info(&in);
}

/* After a call that used the handle without the GIL: the clock may have
 * been closed meanwhile, which ends it with the closed error whatever the
 * call returned (a sleep cut short returns -ECANCELED). */
static bool closed_meanwhile(ClockObject *c)
{
	bool closed;

	pthread_mutex_lock(&c->mu);
	closed = !c->h || c->close_pending;
	pthread_mutex_unlock(&c->mu);
	return closed;
}

/* _sleep_until(t_ns, slice_ns) -> True once reached, False when the slice
 * of real time ran out first (the caller checks for signals and calls
 * again). */
static PyObject *Clock_sleep_until(ClockObject *self, PyObject *args)
{
	long long t, slice;
	shmclock_t *h;
	int r;

	if (!PyArg_ParseTuple(args, "LL", &t, &slice) || !(h = use(self)))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	r = shmclock_sleep_until_ex(h, shmclock_sim_time(t), 0, shmclock_nsec(slice), NULL);
	Py_END_ALLOW_THREADS
	if (r == -ECANCELED || closed_meanwhile(self)) {
		done(self); /* may drop callbacks: before the exception is set */
		return raise_closed();
	}
	done(self);
	if (r == 0)
		Py_RETURN_TRUE;
	if (r == -ETIMEDOUT)
		Py_RETURN_FALSE;
	return raise_errno(r, self->name);
}

static PyObject *Clock_change_token(ClockObject *self, PyObject *unused)
{
	shmclock_t *h = USE_QUICK(self);
	uint32_t tok;

	if (!h)
		return NULL;
	tok = shmclock_change_token(h);
	DONE_QUICK(self);
	return PyLong_FromUnsignedLong(tok);
}

/* _wait_change(token, slice_ns) -> True if the clock changed since token. */
static PyObject *Clock_wait_change(ClockObject *self, PyObject *args)
{
	unsigned long tok;
	long long slice;
	shmclock_t *h;
	int r;

	if (!PyArg_ParseTuple(args, "kL", &tok, &slice) || !(h = use(self)))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	r = shmclock_wait_change(h, (uint32_t)tok, shmclock_nsec(slice));
	Py_END_ALLOW_THREADS
	if (closed_meanwhile(self)) {
		done(self);
		return raise_closed();
	}
	done(self);
	if (r == 0)
		Py_RETURN_TRUE;
	if (r == -ETIMEDOUT)
		Py_RETURN_FALSE;
	return raise_errno(r, self->name);
}

/* _real_delay(t_ns) -> real ns until the clock reaches t at its current
 * rate (0 if reached), or None while no instant is known (paused). */
static PyObject *Clock_real_delay(ClockObject *self, PyObject *args)
{
	shmclock_steady_time_t at;
	shmclock_t *h;
	long long t;
	int r;

	if (!PyArg_ParseTuple(args, "L", &t) || !(h = USE_QUICK(self)))
		return NULL;
	r = shmclock_sim_to_steady(h, shmclock_sim_time(t), &at);
	DONE_QUICK(self);
	if (r == -EOVERFLOW || r == -EAGAIN || r == -ENODATA)
		Py_RETURN_NONE;
	if (r && r != -ESTALE)
		return raise_errno(r, self->name);
	{
		int64_t d = at.ns - shmclock_steady_now().ns;

		return PyLong_FromLongLong(d > 0 ? d : 0);
	}
}

/* On the watcher thread of a callbacks handle (only the watcher reads it):
 * takes the GIL to call the Python callable. */
static void jump_trampoline(const shmclock_jump_t *j, bool before, void *user)
{
	struct jump_entry *e = user;
	shmclock_t *outer = running_jh;
	PyGILState_STATE g;
	PyObject *o, *r;
	int i = 0;

	if (!Py_IsInitialized())
		return;
	g = ensure_gil();
	running_jh = e->jh;
	o = PyStructSequence_New(&JumpType);
	if (o) {
		PyStructSequence_SET_ITEM(o, i++, PyBool_FromLong(before));
		PyStructSequence_SET_ITEM(o, i++, PyBool_FromLong(j->kind & SHMCLOCK_JUMP_FORWARD));
		PyStructSequence_SET_ITEM(o, i++, PyBool_FromLong(j->kind & SHMCLOCK_JUMP_BACKWARD));
		PyStructSequence_SET_ITEM(o, i++, PyBool_FromLong(j->kind & SHMCLOCK_JUMP_CLOCK_CHANGE));
		PyStructSequence_SET_ITEM(o, i++, PyLong_FromLongLong(j->delta_ns));
		PyStructSequence_SET_ITEM(o, i++, PyLong_FromUnsignedLongLong(j->jump_epoch));
		PyStructSequence_SET_ITEM(o, i++, PyLong_FromUnsignedLong(j->jumps));
		PyStructSequence_SET_ITEM(o, i++, PyUnicode_FromString(shmclock_source_name(j->source)));
		r = PyErr_Occurred() ? NULL : PyObject_CallOneArg(e->callback, o);
		Py_DECREF(o);
		if (r)
			Py_DECREF(r);
	}
	if (PyErr_Occurred())
		PyErr_WriteUnraisable(e->callback);
	running_jh = outer;
	PyGILState_Release(g);
}

/* _add_jump(callable, min_forward_ns, min_backward_ns, on_clock_change) -> id */
static PyObject *Clock_add_jump(ClockObject *self, PyObject *args)
{
	shmclock_jump_threshold_t th = { 0 };
	struct jump_entry *e;
	shmclock_t *h, *jh, *mine = NULL;
	PyObject *cb;
	long long fwd, back;
	uint64_t id;
	int change, r;

	if (!PyArg_ParseTuple(args, "OLLp", &cb, &fwd, &back, &change))
		return NULL;
	if (!PyCallable_Check(cb))
		return PyErr_Format(PyExc_TypeError, "callback must be callable");
	if (fwd < 0 || back < 0)
		return PyErr_Format(PyExc_ValueError, "thresholds must be >= 0");
	th.min_forward_ns = fwd;
	th.min_backward_ns = back;
	th.on_clock_change = change;
	if (!(h = use(self)))
		return NULL;
	pthread_mutex_lock(&self->mu);
	jh = self->jh;
	pthread_mutex_unlock(&self->mu);
	if (!jh) {
		/* Opened without the GIL; two threads may race here, and the
		 * one that loses closes its handle. */
		const char *name = shmclock_is_fallback(h) ? NULL : self->name;
		unsigned flags = self->flags | SHMCLOCK_OPEN_WATCH_JUMPS;

		Py_BEGIN_ALLOW_THREADS
		r = shmclock_open_ex(name, flags, &mine);
		Py_END_ALLOW_THREADS
		if (r) {
			done(self);
			return raise_errno(r, self->name);
		}
		pthread_mutex_lock(&self->mu);
		if (!self->jh)
			self->jh = mine, mine = NULL;
		jh = self->jh;
		pthread_mutex_unlock(&self->mu);
		if (mine) {
			Py_BEGIN_ALLOW_THREADS
			shmclock_close(mine);
			Py_END_ALLOW_THREADS
		}
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		done(self);
		return PyErr_NoMemory();
	}
	e->callback = Py_NewRef(cb);
	e->jh = jh;
	/* Listed before it can run, so that close() finds it. */
	pthread_mutex_lock(&self->mu);
	r = shmclock_jump_callback_add(jh, th, jump_trampoline, e, &e->id);
	if (!r) {
		e->next = self->jumps;
		self->jumps = e;
	}
	pthread_mutex_unlock(&self->mu);
	if (r) {
		Py_DECREF(cb);
		free(e);
		done(self);
		return raise_errno(r, self->name);
	}
	id = e->id; /* e is the clock's now: a close() may free it */
	done(self);
	return PyLong_FromUnsignedLongLong(id);
}

/* _remove_jump(id) -> True if it was registered (False on a closed clock:
 * its callbacks are gone already). */
static PyObject *Clock_remove_jump(ClockObject *self, PyObject *args)
{
	unsigned long long id;
	struct jump_entry **p, *e = NULL;
	shmclock_t *jh = NULL;

	if (!PyArg_ParseTuple(args, "K", &id))
		return NULL;
	pthread_mutex_lock(&self->mu);
	if (self->h && !self->close_pending) {
		for (p = &self->jumps; *p; p = &(*p)->next) {
			/* 0: an entry removed inside a callback, kept until close. */
			if (id && (*p)->id == id) {
				e = *p;
				*p = e->next;
				jh = self->jh;
				self->busy++;
				break;
			}
		}
	}
	pthread_mutex_unlock(&self->mu);
	if (!e)
		Py_RETURN_FALSE;
	if (running_jh) {
		/* From a callback (of any clock): the library unlinks it at
		 * once but cannot wait for it to finish running elsewhere, so
		 * the entry stays allocated until close. */
		shmclock_jump_callback_remove(jh, id);
		pthread_mutex_lock(&self->mu);
		e->next = self->jumps;
		e->id = 0; /* never matches again */
		self->jumps = e;
		pthread_mutex_unlock(&self->mu);
	} else {
		/* Waits until the callback is not running: it may be waiting
		 * for the GIL. */
		Py_BEGIN_ALLOW_THREADS
		shmclock_jump_callback_remove(jh, id);
		Py_END_ALLOW_THREADS
		Py_DECREF(e->callback);
		free(e);
	}
	done(self);
	Py_RETURN_TRUE;
}

/* _after_fork_child(): in a child of os.fork(), nothing of the parent's
 * threads is in flight: calls counted as busy are gone with them. */
static PyObject *Clock_after_fork_child(ClockObject *self, PyObject *unused)
{
	struct released r = { 0 };
	bool release;

	pthread_mutex_init(&self->mu, NULL);
	self->busy = 0;
	release = self->close_pending;
	if (release)
		r = take_all(self);
	if (release)
		release_now(r);
	else if (self->jh)
		/* The library starts it at the first read, and nobody but the
		 * watcher reads this handle. */
		shmclock_jump_watch(self->jh, true);
	Py_RETURN_NONE;
}

static PyObject *Clock_get_name(ClockObject *self, void *unused)
{
	return PyUnicode_FromString(self->name);
}

static PyObject *Clock_get_closed(ClockObject *self, void *unused)
{
	bool closed;

	pthread_mutex_lock(&self->mu);
	closed = !self->h || self->close_pending;
	pthread_mutex_unlock(&self->mu);
	return PyBool_FromLong(closed);
}

static PyObject *Clock_get_is_fallback(ClockObject *self, void *unused)
{
	shmclock_t *h = USE_QUICK(self);
	bool fb;

	if (!h)
		return NULL;
	fb = shmclock_is_fallback(h);
	DONE_QUICK(self);
	return PyBool_FromLong(fb);
}

static PyMethodDef Clock_methods[] = {
	{ "now", (PyCFunction)Clock_now, METH_NOARGS,
	  "now() -> int\n\nThe current simulation time, ns. Lock-free, no system call.\n"
	  "Raises StaleClockError (its .value is the time) when no writer is alive or the clock is stale." },
	{ "now_monotonic", (PyCFunction)Clock_now_monotonic, METH_NOARGS,
	  "now_monotonic() -> int\n\nThe jump-free simulated time, ns: now() minus the sum of\n"
	  "every jump. Moved by the rate, pauses and steps, never by a jump; never\n"
	  "decreases. The right time for relative timeouts." },
	{ "now_unix", (PyCFunction)Clock_now_unix, METH_NOARGS,
	  "now_unix() -> int\n\nThe simulated world's UNIX time, ns (UnixTimeAtZero + now())." },
	{ "info", (PyCFunction)Clock_info, METH_NOARGS, "info() -> ClockInfo\n\nA consistent snapshot." },
	{ "close", (PyCFunction)Clock_close, METH_NOARGS,
	  "close()\n\nUnmap the clock and drop its jump callbacks. Idempotent. Sleeps and\n"
	  "waits in other threads end with ValueError (a closed clock); the clock is\n"
	  "unmapped when the last of them returns." },
	{ "_sleep_until", (PyCFunction)Clock_sleep_until, METH_VARARGS, NULL },
	{ "_change_token", (PyCFunction)Clock_change_token, METH_NOARGS, NULL },
	{ "_wait_change", (PyCFunction)Clock_wait_change, METH_VARARGS, NULL },
	{ "_real_delay", (PyCFunction)Clock_real_delay, METH_VARARGS, NULL },
	{ "_add_jump", (PyCFunction)Clock_add_jump, METH_VARARGS, NULL },
	{ "_remove_jump", (PyCFunction)Clock_remove_jump, METH_VARARGS, NULL },
	{ "_after_fork_child", (PyCFunction)Clock_after_fork_child, METH_NOARGS, NULL },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef Clock_getset[] = {
	{ "name", (getter)Clock_get_name, NULL, "the clock's name", NULL },
	{ "closed", (getter)Clock_get_closed, NULL, "True after close()", NULL },
	{ "is_fallback", (getter)Clock_get_is_fallback, NULL,
	  "True when this clock reads system time because the named one did not exist", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyTypeObject ClockType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "shmclock._shmclock.Clock",
	.tp_basicsize = sizeof(ClockObject),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
	.tp_doc = "The C core of shmclock.Clock (use that).",
	.tp_new = Clock_new,
	.tp_init = (initproc)Clock_init,
	.tp_dealloc = (destructor)Clock_dealloc,
	.tp_methods = Clock_methods,
	.tp_getset = Clock_getset,
};

/* ------------------------------------------------------------- Writer */

typedef struct {
	PyObject_HEAD
	/* Guards w: held for each call (they are short and never wait for the
	 * GIL), so close() on one thread and a change on another never meet,
	 * with or without a GIL. */
	pthread_mutex_t mu;
	shmclock_writer_t *w;
	char name[SHMCLOCK_NAME_MAX + 1];
} WriterObject;

static PyObject *Writer_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	WriterObject *self = (WriterObject *)type->tp_alloc(type, 0);

	if (self)
		pthread_mutex_init(&self->mu, NULL);
	return (PyObject *)self;
}

static int Writer_init(WriterObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "name", "mode", NULL };
	shmclock_writer_t *w = NULL;
	const char *name;
	unsigned mode = 0644;
	bool twice;
	int r;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "s|I", kwlist, &name, &mode))
		return -1;
	pthread_mutex_lock(&self->mu);
	twice = self->w || self->name[0];
	if (!twice)
		snprintf(self->name, sizeof(self->name), "%s", name);
	pthread_mutex_unlock(&self->mu);
	if (twice) {
		PyErr_SetString(PyExc_RuntimeError, "Writer.__init__ called twice");
		return -1;
	}
	r = shmclock_writer_open_mode(name, mode, &w);
	if (r) {
		raise_errno(r, name);
		return -1;
	}
	pthread_mutex_lock(&self->mu);
	self->w = w;
	pthread_mutex_unlock(&self->mu);
	return 0;
}

static void Writer_dealloc(WriterObject *self)
{
	shmclock_writer_close(self->w);
	pthread_mutex_destroy(&self->mu);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The writer, with mu held (wunlock() after the call), or NULL with
 * ValueError set when closed. */
static shmclock_writer_t *wlock(WriterObject *self)
{
	pthread_mutex_lock(&self->mu);
	if (self->w)
		return self->w;
	pthread_mutex_unlock(&self->mu);
	PyErr_SetString(PyExc_ValueError, "I/O operation on a closed writer");
	return NULL;
}

static void wunlock(WriterObject *self)
{
	pthread_mutex_unlock(&self->mu);
}

/* Runs one writer call under the lock: None, or the error. */
#define WRITER_CALL(self, call)                                              \
	do {                                                                 \
		shmclock_writer_t *w_ = wlock(self);                         \
		int r_;                                                      \
		if (!w_)                                                     \
			return NULL;                                         \
		r_ = (call);                                                 \
		wunlock(self);                                               \
		if (r_)                                                      \
			return raise_errno(r_, (self)->name);                \
		Py_RETURN_NONE;                                              \
	} while (0)

#define WRITER_NS(fn)                                                      \
	static PyObject *Writer_##fn(WriterObject *self, PyObject *args)   \
	{                                                                  \
		long long ns;                                              \
		if (!PyArg_ParseTuple(args, "L", &ns))                     \
			return NULL;                                       \
		WRITER_CALL(self, shmclock_writer_##fn(w_, ns));           \
	}
WRITER_NS(set_time)
WRITER_NS(advance)
WRITER_NS(step)
#undef WRITER_NS

static PyObject *Writer_set_scale(WriterObject *self, PyObject *args)
{
	double s;

	if (!PyArg_ParseTuple(args, "d", &s))
		return NULL;
	WRITER_CALL(self, shmclock_writer_set_scale(w_, s));
}

static PyObject *Writer_pause(WriterObject *self, PyObject *unused)
{
	WRITER_CALL(self, shmclock_writer_pause(w_));
}

static PyObject *Writer_resume(WriterObject *self, PyObject *unused)
{
	WRITER_CALL(self, shmclock_writer_resume(w_));
}

static PyObject *Writer_set_unix_at_zero(WriterObject *self, PyObject *arg)
{
	int64_t ns = 0;

	if (arg != Py_None) {
		ns = PyLong_AsLongLong(arg);
		if (ns == -1 && PyErr_Occurred())
			return NULL;
	}
	WRITER_CALL(self, shmclock_writer_set_unix_at_zero(w_, arg == Py_None ? NULL : &ns));
}

static PyObject *Writer_now(WriterObject *self, PyObject *unused)
{
	shmclock_writer_t *w = wlock(self);
	int64_t t;
	int r;

	if (!w)
		return NULL;
	r = shmclock_writer_now(w, &t);
	wunlock(self);
	return r ? raise_errno(r, self->name) : PyLong_FromLongLong(t);
}

static PyObject *Writer_info(WriterObject *self, PyObject *unused)
{
	shmclock_writer_t *w = wlock(self);
	shmclock_info_t in;

	if (!w)
		return NULL;
	shmclock_writer_info(w, &in);
	wunlock(self);
	return make_info(&in);
}

static PyObject *Writer_close(WriterObject *self, PyObject *unused)
{
	shmclock_writer_t *w;

	pthread_mutex_lock(&self->mu);
	w = self->w;
	self->w = NULL;
	pthread_mutex_unlock(&self->mu);
	shmclock_writer_close(w);
	Py_RETURN_NONE;
}

static PyObject *Writer_get_name(WriterObject *self, void *unused)
{
	return PyUnicode_FromString(self->name);
}

static PyMethodDef Writer_methods[] = {
	{ "_set_time", (PyCFunction)Writer_set_time, METH_VARARGS, NULL },
	{ "_advance", (PyCFunction)Writer_advance, METH_VARARGS, NULL },
	{ "_step", (PyCFunction)Writer_step, METH_VARARGS, NULL },
	{ "set_scale", (PyCFunction)Writer_set_scale, METH_VARARGS,
	  "set_scale(scale: float)\n\nChange the rate continuously (no jump)." },
	{ "pause", (PyCFunction)Writer_pause, METH_NOARGS, "pause()\n\nFreeze time (continuous)." },
	{ "resume", (PyCFunction)Writer_resume, METH_NOARGS,
	  "resume()\n\nLet time run again from where it stopped." },
	{ "set_unix_at_zero", (PyCFunction)Writer_set_unix_at_zero, METH_O,
	  "set_unix_at_zero(unix_ns: int | None)\n\nThe UNIX time of simulation zero (OSI)." },
	{ "now", (PyCFunction)Writer_now, METH_NOARGS, "now() -> int\n\nThe time this writer publishes, ns." },
	{ "info", (PyCFunction)Writer_info, METH_NOARGS, "info() -> ClockInfo" },
	{ "close", (PyCFunction)Writer_close, METH_NOARGS,
	  "close()\n\nRelease the clock; it stays for the next writer. Idempotent." },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef Writer_getset[] = {
	{ "name", (getter)Writer_get_name, NULL, "the clock's name", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyTypeObject WriterType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "shmclock._shmclock.Writer",
	.tp_basicsize = sizeof(WriterObject),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
	.tp_doc = "The C core of shmclock.Writer (use that).",
	.tp_new = Writer_new,
	.tp_init = (initproc)Writer_init,
	.tp_dealloc = (destructor)Writer_dealloc,
	.tp_methods = Writer_methods,
	.tp_getset = Writer_getset,
};

/* ------------------------------------------------------------- Lockstep */

/* A participant (<shmclock/lockstep.h>). The library's handle belongs to
 * the thread that joined: every call is refused on another (RuntimeError),
 * so no two calls ever meet on it and it needs no lock. Freed on another
 * thread (nobody can be calling it then), it is left all the same: the
 * clock stops waiting for it at once, and its slot comes free when the
 * joining thread ends (the library's leave() from another thread). */
typedef struct {
	PyObject_HEAD
	shmclock_lockstep_t *p;
	pthread_t owner;
	bool joined;
	char name[SHMCLOCK_NAME_MAX + 1];
} LockstepObject;

/* Raises for -errno @r of participant @p, in lockstep's terms (a refused
 * grant names its limit); NULL. */
static PyObject *raise_lockstep(int r, const shmclock_lockstep_t *p, const char *name)
{
	return raise_msg(r, shmclock_lockstep_strerror(p, r), name);
}

/* The handle, for a call on the joining thread; NULL with the error set. */
static shmclock_lockstep_t *participant(LockstepObject *self)
{
	if (!self->joined) {
		PyErr_SetString(PyExc_ValueError, "not a member: the participant left (or never "
						  "joined)");
		return NULL;
	}
	if (!pthread_equal(self->owner, pthread_self())) {
		PyErr_SetString(PyExc_RuntimeError, "a Lockstep participant belongs to the thread "
						    "that joined: call it from there");
		return NULL;
	}
	return self->p;
}

static int Lockstep_init(LockstepObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "name", "who", NULL };
	const char *name, *who;
	shmclock_lockstep_t *p = NULL;
	int r;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "ss", kwlist, &name, &who))
		return -1;
	if (self->joined) {
		PyErr_SetString(PyExc_RuntimeError, "Lockstep.__init__ called twice");
		return -1;
	}
	snprintf(self->name, sizeof(self->name), "%s", name);
	/* The join waits for the daemon to accept it (a few ms). */
	Py_BEGIN_ALLOW_THREADS
	r = shmclock_lockstep_join(name, who, &p);
	Py_END_ALLOW_THREADS
	if (r) {
		raise_lockstep(r, NULL, name);
		return -1;
	}
	self->p = p;
	self->owner = pthread_self();
	self->joined = true;
	return 0;
}

static void Lockstep_dealloc(LockstepObject *self)
{
	if (self->joined)
		shmclock_lockstep_leave(self->p);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Lockstep_grant(LockstepObject *self, PyObject *args)
{
	shmclock_lockstep_t *p = participant(self);
	long long t;
	int r;

	if (!p || !PyArg_ParseTuple(args, "L", &t))
		return NULL;
	r = shmclock_lockstep_grant(p, t);
	return r ? raise_lockstep(r, p, self->name) : (Py_INCREF(Py_None), Py_None);
}

/* _advance(t, slice_ns): grants t and waits for the clock to reach it, at
 * most slice_ns (the Python layer loops, checking for signals): True once
 * there, False after the slice. */
static PyObject *Lockstep_advance(LockstepObject *self, PyObject *args)
{
	shmclock_lockstep_t *p = participant(self);
	long long t, slice;
	int r;

	if (!p || !PyArg_ParseTuple(args, "LL", &t, &slice))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	r = shmclock_lockstep_advance(p, t, shmclock_nsec(slice));
	Py_END_ALLOW_THREADS
	if (r == -ETIMEDOUT)
		Py_RETURN_FALSE;
	return r ? raise_lockstep(r, p, self->name) : (Py_INCREF(Py_True), Py_True);
}

static PyObject *Lockstep_leave(LockstepObject *self, PyObject *unused)
{
	if (!self->joined)
		Py_RETURN_NONE;
	if (!participant(self))
		return NULL;
	self->joined = false;
	shmclock_lockstep_leave(self->p);
	self->p = NULL;
	Py_RETURN_NONE;
}

static PyObject *Lockstep_get_joined_at(LockstepObject *self, void *unused)
{
	shmclock_lockstep_t *p = participant(self);

	return p ? PyLong_FromLongLong(shmclock_lockstep_joined_at(p)) : NULL;
}

static PyObject *Lockstep_get_max_ahead(LockstepObject *self, void *unused)
{
	shmclock_lockstep_t *p = participant(self);

	return p ? PyLong_FromLongLong(shmclock_lockstep_max_ahead(p)) : NULL;
}

static PyObject *Lockstep_get_name(LockstepObject *self, void *unused)
{
	return PyUnicode_FromString(self->name);
}

static PyObject *Lockstep_get_joined(LockstepObject *self, void *unused)
{
	return PyBool_FromLong(self->joined);
}

static PyMethodDef Lockstep_methods[] = {
	{ "_grant", (PyCFunction)Lockstep_grant, METH_VARARGS, NULL },
	{ "_advance", (PyCFunction)Lockstep_advance, METH_VARARGS, NULL },
	{ "leave", (PyCFunction)Lockstep_leave, METH_NOARGS,
	  "leave()\n\nNo longer hold the clock. Idempotent; from the joining thread." },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef Lockstep_getset[] = {
	{ "name", (getter)Lockstep_get_name, NULL, "the clock's name", NULL },
	{ "joined", (getter)Lockstep_get_joined, NULL, "a member (joined, not left)", NULL },
	{ "joined_at", (getter)Lockstep_get_joined_at, NULL,
	  "the clock's time when it joined, ns: the first grant is after it", NULL },
	{ "max_ahead", (getter)Lockstep_get_max_ahead, NULL,
	  "how far past the clock's time a grant may go, ns (Lockstep.MaxGrantAhead)", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyTypeObject LockstepType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "shmclock._shmclock.Lockstep",
	.tp_basicsize = sizeof(LockstepObject),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
	.tp_doc = "The C core of shmclock.Lockstep (use that).",
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)Lockstep_init,
	.tp_dealloc = (destructor)Lockstep_dealloc,
	.tp_methods = Lockstep_methods,
	.tp_getset = Lockstep_getset,
};

/* ------------------------------------------------------------- module */

static PyObject *mod_strerror(PyObject *m, PyObject *arg)
{
	long e = PyLong_AsLong(arg);

	if (e == -1 && PyErr_Occurred())
		return NULL;
	return PyUnicode_FromString(shmclock_strerror((int)-labs(e)));
}

/* _fork_hook(1) before os.fork(), _fork_hook(-1) after it in the parent,
 * _fork_hook(0) in the child, once Python is ready there: see
 * jump_trampoline. */
static PyObject *mod_fork_hook(PyObject *m, PyObject *arg)
{
	long d = PyLong_AsLong(arg);

	if (d == -1 && PyErr_Occurred())
		return NULL;
	if (d > 0) {
		/* Keeps new ones out, then waits for those on their way in
		 * (they may need the GIL to get there). */
		atomic_fetch_add(&forking, 1);
		Py_BEGIN_ALLOW_THREADS
		while (atomic_load(&entering)) {
			struct timespec us = { 0, 100000 };

			nanosleep(&us, NULL);
		}
		Py_END_ALLOW_THREADS
	} else if (d < 0) {
		atomic_fetch_sub(&forking, 1);
	} else {
		/* The child: nobody else was on the way in here. */
		atomic_store(&entering, 0);
		atomic_store(&forking, 0);
	}
	Py_RETURN_NONE;
}

static PyMethodDef mod_methods[] = {
	{ "strerror", mod_strerror, METH_O, "strerror(errno) -> str: the library's message" },
	{ "_fork_hook", mod_fork_hook, METH_O, NULL },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef mod_def = {
	PyModuleDef_HEAD_INIT, "_shmclock", "The C core of the shmclock package.", -1, mod_methods,
	NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__shmclock(void);

PyMODINIT_FUNC PyInit__shmclock(void)
{
	PyObject *m;

	if (PyType_Ready(&ClockType) < 0 || PyType_Ready(&WriterType) < 0 ||
	    PyType_Ready(&LockstepType) < 0)
		return NULL;
	if (!InfoType.tp_name && PyStructSequence_InitType2(&InfoType, &info_desc) < 0)
		return NULL;
	if (!JumpType.tp_name && PyStructSequence_InitType2(&JumpType, &jump_desc) < 0)
		return NULL;
	m = PyModule_Create(&mod_def);
	if (!m)
		return NULL;
	StaleClockError = PyErr_NewExceptionWithDoc(
		"shmclock.StaleClockError",
		"No writer is alive. The time computed from the last committed state (the\n"
		"clock keeps its last rate) is in the .value attribute, in ns.",
		PyExc_OSError, NULL);
	if (!StaleClockError || PyModule_AddObjectRef(m, "StaleClockError", StaleClockError) < 0 ||
	    PyModule_AddObjectRef(m, "Clock", (PyObject *)&ClockType) < 0 ||
	    PyModule_AddObjectRef(m, "Writer", (PyObject *)&WriterType) < 0 ||
	    PyModule_AddObjectRef(m, "Lockstep", (PyObject *)&LockstepType) < 0 ||
	    PyModule_AddObjectRef(m, "ClockInfo", (PyObject *)&InfoType) < 0 ||
	    PyModule_AddObjectRef(m, "Jump", (PyObject *)&JumpType) < 0 ||
	    PyModule_AddIntConstant(m, "OPEN_FALLBACK_SYSTEM", SHMCLOCK_OPEN_FALLBACK_SYSTEM) < 0 ||
	    PyModule_AddIntConstant(m, "OPEN_TRUST_ANY_OWNER", SHMCLOCK_OPEN_TRUST_ANY_OWNER) < 0 ||
	    PyModule_AddStringConstant(m, "LIBRARY_VERSION", shmclock_version()) < 0) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
