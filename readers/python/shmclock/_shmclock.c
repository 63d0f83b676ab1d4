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
 * the GIL), and close() with calls in flight wakes them and leaves the
 * unmapping to the last one out.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include <shmclock/shmclock.h>
#include <shmclock/time.h>
#include <shmclock/writer.h>

static PyObject *StaleClockError;
static PyTypeObject InfoType, JumpType;

/* ------------------------------------------------------------- errors */

/* Raises the exception for -errno @r about clock @name; returns NULL. */
static PyObject *raise_errno(int r, const char *name)
{
	PyObject *e;

	if (r == -EINVAL || r == -ERANGE)
		return PyErr_Format(PyExc_ValueError, "clock '%s': %s", name, shmclock_strerror(r));
	/* OSError(errno, msg) picks its subclass: FileNotFoundError,
	 * PermissionError, TimeoutError, ... */
	e = PyObject_CallFunction(PyExc_OSError, "(is)", -r, shmclock_strerror(r));
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

static PyStructSequence_Field info_fields[] = {
	{ "sim_ns", "simulation time at the snapshot, ns (meaningless when not initialized)" },
	{ "mono_ns", "CLOCK_MONOTONIC at the snapshot, ns" },
	{ "scale", "nominal rate (kept while paused or stepped)" },
	{ "source", "time source: 'simulation', 'system', 'external', 'fixed', 'ros2', 'none'" },
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
	uint64_t id;
	struct jump_entry *next;
};

typedef struct {
	PyObject_HEAD
	shmclock_t *h;          /* reads and sleeps: never waits for callbacks */
	shmclock_t *jh;         /* callbacks, on its watcher thread; NULL until needed */
	unsigned flags;         /* the open flags, less NO_CALLBACKS */
	struct jump_entry *jumps;
	int busy;               /* calls in flight without the GIL */
	bool close_pending;     /* closed while busy: the last one out unmaps */
	char name[65];
} ClockObject;

static int closed(ClockObject *c)
{
	if (c->h && !c->close_pending)
		return 0;
	PyErr_SetString(PyExc_ValueError, "I/O operation on a closed clock");
	return 1;
}

static void clock_release(ClockObject *c);

/* Around a call that releases the GIL: both run with the GIL held. */
static void enter(ClockObject *c)
{
	c->busy++;
}

static void leave(ClockObject *c)
{
	if (--c->busy == 0 && c->close_pending)
		clock_release(c);
}

static int Clock_init(ClockObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "name", "flags", "wait_ns", NULL };
	const char *name;
	unsigned flags = 0;
	long long wait_ns = -2; /* -2: do not wait; -1: forever */
	int r;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "s|IL", kwlist, &name, &flags, &wait_ns))
		return -1;
	if (self->h) {
		PyErr_SetString(PyExc_RuntimeError, "Clock.__init__ called twice");
		return -1;
	}
	snprintf(self->name, sizeof(self->name), "%s", name);
	self->flags = flags & ~SHMCLOCK_OPEN_NO_CALLBACKS;
	Py_BEGIN_ALLOW_THREADS
	if (wait_ns == -2)
		r = shmclock_open_ex(name, flags | SHMCLOCK_OPEN_NO_CALLBACKS, &self->h);
	else
		r = shmclock_open_wait(name, flags | SHMCLOCK_OPEN_NO_CALLBACKS,
				       shmclock_nsec(wait_ns), &self->h);
	Py_END_ALLOW_THREADS
	if (r) {
		raise_errno(r, name);
		return -1;
	}
	return 0;
}

/* Drops every callback and both handles. The GIL is released while the
 * watcher is stopped: it may be waiting for the GIL to call one. */
static void clock_release(ClockObject *c)
{
	shmclock_t *h = c->h, *jh = c->jh;
	struct jump_entry *e = c->jumps;

	c->h = c->jh = NULL;
	c->jumps = NULL;
	c->close_pending = false;
	Py_BEGIN_ALLOW_THREADS
	shmclock_close(jh);
	shmclock_close(h);
	Py_END_ALLOW_THREADS
	while (e) {
		struct jump_entry *n = e->next;

		Py_DECREF(e->callback);
		free(e);
		e = n;
	}
}

/* close(): at once, or, with calls in flight, once the last returns; they
 * are woken (a sleep ends with -ECANCELED, a wait within its slice). */
static void clock_close(ClockObject *c)
{
	if (!c->h || c->close_pending)
		return;
	if (c->busy) {
		c->close_pending = true;
		shmclock_cancel_sleeps(c->h);
		return;
	}
	clock_release(c);
}

static void Clock_dealloc(ClockObject *self)
{
	/* No call can be in flight: it would hold a reference to self. */
	clock_release(self);
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
	int64_t t;
	int r;

	if (!self->h)
		return closed(self), NULL;
	r = shmclock_now(self->h, &t);
	if (__builtin_expect(r == 0, 1))
		return PyLong_FromLongLong(t);
	return r == -ESTALE ? raise_stale(t, self->name) : raise_errno(r, self->name);
}

/* now_unix(), now_monotonic(): one of the library's other reads. */
static PyObject *read_with(ClockObject *self, int (*read)(shmclock_t *, int64_t *))
{
	int64_t t;
	int r;

	if (closed(self))
		return NULL;
	r = read(self->h, &t);
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
	shmclock_info_t in;
	int r;

	if (closed(self))
		return NULL;
	r = shmclock_info(self->h, &in);
	return r ? raise_errno(r, self->name) : make_info(&in);
}

/* _sleep_until(t_ns, slice_ns) -> True once reached, False when the slice
 * of real time ran out first (the caller checks for signals and calls
 * again). */
static PyObject *Clock_sleep_until(ClockObject *self, PyObject *args)
{
	long long t, slice;
	int r;

	if (!PyArg_ParseTuple(args, "LL", &t, &slice) || closed(self))
		return NULL;
	enter(self);
	Py_BEGIN_ALLOW_THREADS
	r = shmclock_sleep_until_ex(self->h, shmclock_sim_time(t), 0, shmclock_nsec(slice), NULL);
	Py_END_ALLOW_THREADS
	leave(self);
	if (r == -ECANCELED || closed(self))
		return NULL; /* closed meanwhile */
	if (r == 0)
		Py_RETURN_TRUE;
	if (r == -ETIMEDOUT)
		Py_RETURN_FALSE;
	return raise_errno(r, self->name);
}

static PyObject *Clock_change_token(ClockObject *self, PyObject *unused)
{
	if (closed(self))
		return NULL;
	return PyLong_FromUnsignedLong(shmclock_change_token(self->h));
}

/* _wait_change(token, slice_ns) -> True if the clock changed since token. */
static PyObject *Clock_wait_change(ClockObject *self, PyObject *args)
{
	unsigned long tok;
	long long slice;
	int r;

	if (!PyArg_ParseTuple(args, "kL", &tok, &slice) || closed(self))
		return NULL;
	enter(self);
	Py_BEGIN_ALLOW_THREADS
	r = shmclock_wait_change(self->h, (uint32_t)tok, shmclock_nsec(slice));
	Py_END_ALLOW_THREADS
	leave(self);
	if (closed(self))
		return NULL;
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
	long long t;
	int r;

	if (!PyArg_ParseTuple(args, "L", &t) || closed(self))
		return NULL;
	r = shmclock_sim_to_steady(self->h, shmclock_sim_time(t), &at);
	if (r == -EOVERFLOW || r == -EAGAIN || r == -ENODATA)
		Py_RETURN_NONE;
	if (r && r != -ESTALE)
		return raise_errno(r, self->name);
	{
		int64_t d = at.ns - shmclock_steady_now().ns;

		return PyLong_FromLongLong(d > 0 ? d : 0);
	}
}

/* On the watcher thread (or a reading thread of the callbacks handle,
 * which only this file uses): takes the GIL to call the Python callable. */
static void jump_trampoline(const shmclock_jump_t *j, bool before, void *user)
{
	struct jump_entry *e = user;
	PyGILState_STATE g;
	PyObject *o, *r;
	int i = 0;

	if (!Py_IsInitialized())
		return;
	g = PyGILState_Ensure();
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
	PyGILState_Release(g);
}

/* _add_jump(callable, min_forward_ns, min_backward_ns, on_clock_change) -> id */
static PyObject *Clock_add_jump(ClockObject *self, PyObject *args)
{
	shmclock_jump_threshold_t th = { 0 };
	struct jump_entry *e;
	PyObject *cb;
	long long fwd, back;
	int change, r;

	if (!PyArg_ParseTuple(args, "OLLp", &cb, &fwd, &back, &change) || closed(self))
		return NULL;
	if (!PyCallable_Check(cb))
		return PyErr_Format(PyExc_TypeError, "callback must be callable");
	if (fwd < 0 || back < 0)
		return PyErr_Format(PyExc_ValueError, "thresholds must be >= 0");
	th.min_forward_ns = fwd;
	th.min_backward_ns = back;
	th.on_clock_change = change;
	if (!self->jh) {
		shmclock_t *jh = NULL;

		Py_BEGIN_ALLOW_THREADS
		r = shmclock_open_ex(shmclock_is_fallback(self->h) ? NULL : self->name,
				     self->flags | SHMCLOCK_OPEN_WATCH_JUMPS, &jh);
		Py_END_ALLOW_THREADS
		if (r)
			return raise_errno(r, self->name);
		self->jh = jh;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return PyErr_NoMemory();
	e->callback = Py_NewRef(cb);
	r = shmclock_jump_callback_add(self->jh, th, jump_trampoline, e, &e->id);
	if (r) {
		Py_DECREF(cb);
		free(e);
		return raise_errno(r, self->name);
	}
	e->next = self->jumps;
	self->jumps = e;
	return PyLong_FromUnsignedLongLong(e->id);
}

/* _remove_jump(id) -> True if it was registered */
static PyObject *Clock_remove_jump(ClockObject *self, PyObject *args)
{
	unsigned long long id;
	struct jump_entry **p;

	if (!PyArg_ParseTuple(args, "K", &id))
		return NULL;
	for (p = &self->jumps; *p; p = &(*p)->next) {
		struct jump_entry *e = *p;
		shmclock_t *jh = self->jh;

		if (e->id != id)
			continue;
		*p = e->next;
		/* Waits until the callback is not running: it may be waiting
		 * for the GIL. */
		enter(self);
		Py_BEGIN_ALLOW_THREADS
		shmclock_jump_callback_remove(jh, id);
		Py_END_ALLOW_THREADS
		leave(self);
		Py_DECREF(e->callback);
		free(e);
		Py_RETURN_TRUE;
	}
	Py_RETURN_FALSE;
}

static PyObject *Clock_get_name(ClockObject *self, void *unused)
{
	return PyUnicode_FromString(self->name);
}

static PyObject *Clock_get_closed(ClockObject *self, void *unused)
{
	return PyBool_FromLong(!self->h || self->close_pending);
}

static PyObject *Clock_get_is_fallback(ClockObject *self, void *unused)
{
	if (closed(self))
		return NULL;
	return PyBool_FromLong(shmclock_is_fallback(self->h));
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
	  "close()\n\nUnmap the clock and drop its jump callbacks. Idempotent." },
	{ "_sleep_until", (PyCFunction)Clock_sleep_until, METH_VARARGS, NULL },
	{ "_change_token", (PyCFunction)Clock_change_token, METH_NOARGS, NULL },
	{ "_wait_change", (PyCFunction)Clock_wait_change, METH_VARARGS, NULL },
	{ "_real_delay", (PyCFunction)Clock_real_delay, METH_VARARGS, NULL },
	{ "_add_jump", (PyCFunction)Clock_add_jump, METH_VARARGS, NULL },
	{ "_remove_jump", (PyCFunction)Clock_remove_jump, METH_VARARGS, NULL },
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
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)Clock_init,
	.tp_dealloc = (destructor)Clock_dealloc,
	.tp_methods = Clock_methods,
	.tp_getset = Clock_getset,
};

/* ------------------------------------------------------------- Writer */

typedef struct {
	PyObject_HEAD
	shmclock_writer_t *w;
	char name[65];
} WriterObject;

static int Writer_init(WriterObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "name", "mode", NULL };
	const char *name;
	unsigned mode = 0644;
	int r;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "s|I", kwlist, &name, &mode))
		return -1;
	if (self->w) {
		PyErr_SetString(PyExc_RuntimeError, "Writer.__init__ called twice");
		return -1;
	}
	snprintf(self->name, sizeof(self->name), "%s", name);
	r = shmclock_writer_open_mode(name, mode, &self->w);
	if (r) {
		raise_errno(r, name);
		return -1;
	}
	return 0;
}

static void Writer_dealloc(WriterObject *self)
{
	shmclock_writer_close(self->w);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static int wclosed(WriterObject *w)
{
	if (w->w)
		return 0;
	PyErr_SetString(PyExc_ValueError, "I/O operation on a closed writer");
	return 1;
}

static PyObject *wresult(WriterObject *self, int r)
{
	if (r)
		return raise_errno(r, self->name);
	Py_RETURN_NONE;
}

#define WRITER_NS(fn)                                                      \
	static PyObject *Writer_##fn(WriterObject *self, PyObject *args)   \
	{                                                                  \
		long long ns;                                              \
		if (!PyArg_ParseTuple(args, "L", &ns) || wclosed(self))    \
			return NULL;                                       \
		return wresult(self, shmclock_writer_##fn(self->w, ns));   \
	}
WRITER_NS(set_time)
WRITER_NS(advance)
WRITER_NS(step)
#undef WRITER_NS

static PyObject *Writer_set_scale(WriterObject *self, PyObject *args)
{
	double s;

	if (!PyArg_ParseTuple(args, "d", &s) || wclosed(self))
		return NULL;
	return wresult(self, shmclock_writer_set_scale(self->w, s));
}

static PyObject *Writer_pause(WriterObject *self, PyObject *unused)
{
	return wclosed(self) ? NULL : wresult(self, shmclock_writer_pause(self->w));
}

static PyObject *Writer_resume(WriterObject *self, PyObject *unused)
{
	return wclosed(self) ? NULL : wresult(self, shmclock_writer_resume(self->w));
}

static PyObject *Writer_set_unix_at_zero(WriterObject *self, PyObject *arg)
{
	int64_t ns;

	if (wclosed(self))
		return NULL;
	if (arg == Py_None)
		return wresult(self, shmclock_writer_set_unix_at_zero(self->w, NULL));
	ns = PyLong_AsLongLong(arg);
	if (ns == -1 && PyErr_Occurred())
		return NULL;
	return wresult(self, shmclock_writer_set_unix_at_zero(self->w, &ns));
}

static PyObject *Writer_now(WriterObject *self, PyObject *unused)
{
	int64_t t;
	int r;

	if (wclosed(self))
		return NULL;
	r = shmclock_writer_now(self->w, &t);
	return r ? raise_errno(r, self->name) : PyLong_FromLongLong(t);
}

static PyObject *Writer_info(WriterObject *self, PyObject *unused)
{
	shmclock_info_t in;

	if (wclosed(self))
		return NULL;
	shmclock_writer_info(self->w, &in);
	return make_info(&in);
}

static PyObject *Writer_close(WriterObject *self, PyObject *unused)
{
	shmclock_writer_close(self->w);
	self->w = NULL;
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
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)Writer_init,
	.tp_dealloc = (destructor)Writer_dealloc,
	.tp_methods = Writer_methods,
	.tp_getset = Writer_getset,
};

/* ------------------------------------------------------------- module */

static PyObject *mod_strerror(PyObject *m, PyObject *arg)
{
	long e = PyLong_AsLong(arg);

	if (e == -1 && PyErr_Occurred())
		return NULL;
	return PyUnicode_FromString(shmclock_strerror((int)-labs(e)));
}

static PyMethodDef mod_methods[] = {
	{ "strerror", mod_strerror, METH_O, "strerror(errno) -> str: the library's message" },
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

	if (PyType_Ready(&ClockType) < 0 || PyType_Ready(&WriterType) < 0)
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
