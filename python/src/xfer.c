/* tcpx_p2p.Xfer and wait_any: waiting with the GIL released.
 *
 * A wait runs in slices of at most SLICE_MS so that the thread sees
 * signals (Ctrl-C) between them; a slice that ends with the transfer
 * pending loses nothing (ETIMEDOUT leaves it pending).  An xfer's result
 * is taken once it is final: the C handle is released then and the
 * result kept, so wait() and test() may be called again and the regions
 * it used are let go at once. */
#include <string.h>

#include "tp_py.h"

#define SLICE_MS 50

static PyObject *await_hook; /* tcpx_p2p.aio's coroutine factory */
static PyObject *let_go_hook; /* tcpx_p2p.aio.let_go */

/* This thread has stopped using x (wait, test, cancel, wait_any).  Meanwhile
 * Session.completions() may have passed it over (busy), and the end it
 * reported is not reported again: if an event loop may await x, tell it to
 * look at x again.  Any exception of the caller's is kept. */
static void let_go(XferObject *x)
{
	PyObject *type, *value, *tb, *r;

	if (!let_go_hook || !x->conn->sess->watched)
		return;
	PyErr_Fetch(&type, &value, &tb);
	r = PyObject_CallOneArg(let_go_hook, (PyObject *)x);
	if (!r)
		PyErr_Clear(); /* the loop's trouble, not this call's */
	Py_XDECREF(r);
	PyErr_Restore(type, value, tb);
}

/* The session's map from handles to Xfers (tcpx_p2p_completions reports
 * handles).  A failed insertion only hides that Xfer from completions():
 * its wait and test still work. */
static void handle_note(SessionObject *s, tcpx_p2p_xfer *h, XferObject *o)
{
	PyObject *k = PyLong_FromVoidPtr(h), *v = PyLong_FromVoidPtr(o);

	if (!k || !v || !s->handles || PyDict_SetItem(s->handles, k, v))
		PyErr_Clear();
	Py_XDECREF(k);
	Py_XDECREF(v);
}

static void handle_forget(SessionObject *s, tcpx_p2p_xfer *h)
{
	PyObject *k = PyLong_FromVoidPtr(h);

	if (!k || !s->handles || PyDict_DelItem(s->handles, k))
		PyErr_Clear();
	Py_XDECREF(k);
}

XferObject *tp_xfer_of_handle(SessionObject *s, tcpx_p2p_xfer *h)
{
	PyObject *k = PyLong_FromVoidPtr(h), *v;
	XferObject *o = NULL;

	if (!k)
		return NULL;
	v = s->handles ? PyDict_GetItemWithError(s->handles, k) : NULL;
	Py_DECREF(k);
	if (v)
		o = PyLong_AsVoidPtr(v);
	if (PyErr_Occurred()) {
		PyErr_Clear();
		return NULL;
	}
	return o && o->x == h ? o : NULL;
}

XferObject *tp_xfer_new(ConnObject *conn, tcpx_p2p_xfer *x, PyObject *keep, const char *op,
			size_t length)
{
	XferObject *o = PyObject_New(XferObject, &tp_XferType);

	if (!o) {
		/* Nobody can wait for it now: leave it to the conn's close. */
		tp_session_orphan_xfer(conn->sess, x, conn, keep);
		return NULL;
	}
	o->conn = conn;
	Py_INCREF(conn);
	o->x = x;
	o->status = 1;
	o->detail = NULL;
	o->keep = keep;
	Py_XINCREF(keep);
	o->op = op;
	o->length = length;
	o->busy = 0;
	o->chunks = o->chunks_done = 0;
	o->deadline = 0;
	tp_list_add(&conn->sess->xfers, &o->link);
	handle_note(conn->sess, x, o);
	return o;
}

/* x is final with rc: keep the result (and its chunk counts, for query())
 * and release the handle. */
int tp_xfer_take_result(XferObject *x, int rc)
{
	tcpx_p2p_xfer_info info = { .struct_size = sizeof(info) };

	if (rc) {
		x->detail = tp_py_last_detail();
		if (!x->detail)
			PyErr_Clear();
	}
	x->status = rc;
	if (tp_api.xfer_query(x->x, &info) == 0) {
		x->chunks = info.chunks;
		x->chunks_done = info.chunks_done;
	}
	if (tp_api.xfer_release(x->x) == 0) {
		handle_forget(x->conn->sess, x->x);
		x->x = NULL;
		tp_list_del(&x->link);
		Py_CLEAR(x->keep);
	}
	return rc;
}

static PyObject *result(XferObject *x, const char *call)
{
	if (x->status == 0)
		Py_RETURN_NONE;
	return tp_py_raise_detail(x->status, call, x->detail);
}

void tp_xfer_finalize_all(SessionObject *s)
{
	struct tp_list *p, *t;
	int done = 0, rc;

	tp_list_each(p, t, &s->xfers) {
		XferObject *x = tp_list_entry(p, XferObject, link);

		rc = tp_api.test(x->x, &done);
		if (rc || done)
			tp_xfer_take_result(x, rc);
	}
}

/* After a wait's ETIMEDOUT: whether x has in fact ended (its deadline,
 * set_deadline, failed it with ETIMEDOUT), with *rc its result. */
static int ended(tcpx_p2p_xfer *x, int *rc)
{
	tcpx_p2p_xfer_info info = { .struct_size = sizeof(info) };

	int done = 0;

	if (tp_api.xfer_query(x, &info) || !info.done)
		return 0;
	/* Its own result and detail, not the wait's "still pending". */
	*rc = tp_api.test(x, &done);
	return 1;
}

static PyObject *xfer_wait(XferObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "timeout", NULL };
	PyObject *timeout = Py_None;
	double deadline;
	int ms, slice, rc, over = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:wait", kwlist, &timeout) ||
	    tp_py_timeout_ms(timeout, -1, &ms))
		return NULL;
	if (self->status != 1)
		return result(self, "Xfer.wait");
	if (self->busy) /* another thread waits on it: its handle may go any time */
		return tp_busy_error("Xfer.wait", "this Xfer");
	if (self->conn->closing)
		return tp_busy_error("Xfer.wait", "its connection, being closed,");
	deadline = tp_py_now() + ms * 1e-3;
	TP_ENTER(self);
	TP_ENTER(self->conn);
	for (;;) {
		slice = ms < 0 ? SLICE_MS : (int)((deadline - tp_py_now()) * 1e3);
		slice = slice < 0 ? 0 : slice > SLICE_MS ? SLICE_MS : slice;
		Py_BEGIN_ALLOW_THREADS
		rc = tp_api.wait(self->x, slice);
		Py_END_ALLOW_THREADS
		if (rc != TCPX_P2P_ETIMEDOUT || ended(self->x, &rc))
			break;
		if (ms >= 0 && tp_py_now() >= deadline) {
			over = 1;
			break;
		}
		if (PyErr_CheckSignals()) {
			TP_LEAVE(self->conn);
			TP_LEAVE(self);
			let_go(self);
			return NULL;
		}
	}
	TP_LEAVE(self->conn);
	TP_LEAVE(self);
	if (over) { /* still pending */
		let_go(self);
		return tp_py_raise(rc, "Xfer.wait");
	}
	tp_xfer_take_result(self, rc);
	let_go(self);
	return result(self, "Xfer.wait");
}

static PyObject *xfer_test(XferObject *self, PyObject *unused)
{
	int done = 0, rc;

	if (self->status != 1) {
		if (self->status)
			return result(self, "Xfer.test");
		Py_RETURN_TRUE;
	}
	if (self->busy)
		return tp_busy_error("Xfer.test", "this Xfer");
	if (self->conn->closing)
		return tp_busy_error("Xfer.test", "its connection, being closed,");
	TP_ENTER(self);
	TP_ENTER(self->conn);
	Py_BEGIN_ALLOW_THREADS
	rc = tp_api.test(self->x, &done);
	Py_END_ALLOW_THREADS
	TP_LEAVE(self->conn);
	TP_LEAVE(self);
	if (!rc && !done) {
		let_go(self);
		Py_RETURN_FALSE;
	}
	tp_xfer_take_result(self, rc);
	let_go(self);
	if (rc)
		return result(self, "Xfer.test");
	Py_RETURN_TRUE;
}

static PyObject *xfer_query(XferObject *self, PyObject *unused)
{
	tcpx_p2p_xfer_info info = { .struct_size = sizeof(info) };
	int rc;

	if (self->status != 1 || !self->x) {
		/* Its result is taken: what the handle said last. */
		info.done = 1;
		info.err = self->status;
		info.chunks = self->chunks;
		info.chunks_done = self->chunks_done;
	} else {
		/* With the GIL: the call takes the conn's lock briefly, and the
		 * handle is released only by a thread that holds the GIL; not
		 * while another thread destroys the conn (its lock goes). */
		if (self->conn->closing)
			return tp_busy_error("Xfer.query", "its connection, being closed,");
		rc = tp_api.xfer_query(self->x, &info);
		if (rc)
			return tp_py_raise(rc, "Xfer.query");
	}
	return Py_BuildValue("{s:N,s:i,s:N,s:K,s:K}", "done", PyBool_FromLong(info.done),
			     "err", info.err, "stalled", PyBool_FromLong(info.stalled),
			     "chunks", (unsigned long long)info.chunks,
			     "chunks_done", (unsigned long long)info.chunks_done);
}

static PyObject *xfer_set_deadline(XferObject *self, PyObject *arg)
{
	double t = PyFloat_AsDouble(arg);
	int ms, rc;

	if (t == -1.0 && PyErr_Occurred())
		return NULL;
	if (!(t > 0)) {
		PyErr_SetString(PyExc_ValueError, "set_deadline: timeout must be > 0 seconds");
		return NULL;
	}
	ms = t * 1000.0 >= (double)INT32_MAX ? INT32_MAX : (int)(t * 1000.0 + 0.5);
	if (ms < 1)
		ms = 1;
	if (self->status != 1 || !self->x) /* ended: nothing happens, as in C */
		Py_RETURN_NONE;
	if (self->conn->closing)
		return tp_busy_error("Xfer.set_deadline", "its connection, being closed,");
	rc = tp_api.xfer_deadline(self->x, ms);
	if (rc)
		return tp_py_raise(rc, "Xfer.set_deadline");
	self->deadline = tp_py_now() + ms * 1e-3;
	Py_RETURN_NONE;
}

static PyObject *xfer_cancel(XferObject *self, PyObject *unused)
{
	int rc;

	if (self->status != 1 || !self->x) /* ended: nothing happens, as in C */
		Py_RETURN_NONE;
	if (self->conn->closing)
		return tp_busy_error("Xfer.cancel", "its connection, being closed,");
	TP_ENTER(self);
	TP_ENTER(self->conn); /* its Conn.close waits (Busy) meanwhile */
	Py_BEGIN_ALLOW_THREADS
	rc = tp_api.xfer_cancel(self->x);
	Py_END_ALLOW_THREADS
	TP_LEAVE(self->conn);
	TP_LEAVE(self);
	let_go(self);
	if (rc)
		return tp_py_raise(rc, "Xfer.cancel");
	Py_RETURN_NONE;
}

/* Is o one of CuPy's streams (which give their handle as ptr, as do CuPy
 * objects that are no streams)? */
static int cupy_stream(PyObject *o)
{
	PyObject *m = PyObject_GetAttrString((PyObject *)Py_TYPE(o), "__module__");
	const char *mod = m && PyUnicode_Check(m) ? PyUnicode_AsUTF8(m) : NULL;
	int yes = mod && (!strcmp(mod, "cupy") || !strncmp(mod, "cupy.", 5)) &&
		  strstr(Py_TYPE(o)->tp_name, "Stream");

	Py_XDECREF(m);
	PyErr_Clear();
	return yes;
}

/* The handle of a stream object: __cuda_stream__() (the CUDA stream
 * protocol: (0, handle)), else its cuda_stream (torch) or, for CuPy's
 * streams, ptr attribute; NULL with no exception when it is none. */
static PyObject *stream_attr(PyObject *o)
{
	PyObject *h, *v;

	if (PyObject_HasAttrString(o, "__cuda_stream__")) {
		h = PyObject_CallMethod(o, "__cuda_stream__", NULL);
		if (!h)
			return NULL;
		v = PyTuple_Check(h) && PyTuple_GET_SIZE(h) == 2 &&
				    PyLong_Check(PyTuple_GET_ITEM(h, 0)) &&
				    PyLong_AsLong(PyTuple_GET_ITEM(h, 0)) == 0
			    ? PyTuple_GET_ITEM(h, 1)
			    : NULL;
		Py_XINCREF(v);
		Py_DECREF(h);
		if (!v)
			PyErr_SetString(PyExc_TypeError, "stream_wait: __cuda_stream__() must "
					"return (0, handle)");
		return v;
	}
	if (PyObject_HasAttrString(o, "cuda_stream"))
		return PyObject_GetAttrString(o, "cuda_stream");
	if (cupy_stream(o) && PyObject_HasAttrString(o, "ptr"))
		return PyObject_GetAttrString(o, "ptr");
	return NULL;
}

/* A CUDA stream from Python: an int handle or a stream object
 * (stream_attr).  The default streams (None, handles 0, 1 and 2) are
 * refused here, whatever the transfer's state: they cannot be held. */
static int stream_handle(PyObject *o, void **out)
{
	PyObject *h = NULL;
	unsigned long long v;

	if (o != Py_None && !PyLong_Check(o)) {
		h = stream_attr(o);
		if (!h) {
			if (!PyErr_Occurred())
				PyErr_SetString(PyExc_TypeError, "stream_wait: want a non-blocking "
						"CUDA stream (torch.cuda.Stream, a CuPy stream, an "
						"object with __cuda_stream__) or its int handle");
			return -1;
		}
		o = h;
	}
	v = o == Py_None ? 0 : PyLong_AsUnsignedLongLong(o);
	Py_XDECREF(h);
	if (v == (unsigned long long)-1 && PyErr_Occurred())
		return -1;
	if (v <= 2) {
		PyErr_SetString(PyExc_ValueError, "stream_wait: a default CUDA stream cannot be "
				"held; pass a non-blocking stream (torch.cuda.Stream())");
		return -1;
	}
	*out = (void *)(uintptr_t)v;
	return 0;
}

static PyObject *xfer_stream_wait(XferObject *self, PyObject *arg)
{
	void *st;
	int rc;

	if (stream_handle(arg, &st))
		return NULL;
	if (self->status != 1) /* ended: as in C, its result */
		return result(self, "Xfer.stream_wait");
	if (self->conn->closing)
		return tp_busy_error("Xfer.stream_wait", "its connection, being closed,");
	Py_BEGIN_ALLOW_THREADS
	rc = tp_api.stream_wait(self->x, st);
	Py_END_ALLOW_THREADS
	if (rc)
		return tp_py_raise(rc, "Xfer.stream_wait");
	Py_RETURN_NONE;
}

static void xfer_dealloc(XferObject *self)
{
	if (self->x)
		handle_forget(self->conn->sess, self->x);
	if (self->x && tp_api.xfer_release(self->x) == 0)
		self->x = NULL;
	if (self->x) /* pending: released when its conn or session closes */
		tp_session_orphan_xfer(self->conn->sess, self->x, self->conn, self->keep);
	tp_list_del(&self->link);
	Py_XDECREF(self->keep);
	Py_XDECREF(self->detail);
	Py_DECREF(self->conn);
	PyObject_Free(self);
}

static PyObject *xfer_get_done(XferObject *self, void *unused)
{
	return PyBool_FromLong(self->status != 1);
}

static PyObject *xfer_get_ok(XferObject *self, void *unused)
{
	if (self->status == 1)
		Py_RETURN_NONE;
	return PyBool_FromLong(self->status == 0);
}

static PyObject *xfer_get_op(XferObject *self, void *unused)
{
	return PyUnicode_FromString(self->op);
}

static PyObject *xfer_get_length(XferObject *self, void *unused)
{
	return PyLong_FromSize_t(self->length);
}

static PyObject *xfer_get_deadline(XferObject *self, void *unused)
{
	if (self->deadline == 0)
		Py_RETURN_NONE;
	return PyFloat_FromDouble(self->deadline);
}

static PyObject *xfer_get_conn(XferObject *self, void *unused)
{
	Py_INCREF(self->conn);
	return (PyObject *)self->conn;
}

static PyObject *xfer_repr(XferObject *self)
{
	return PyUnicode_FromFormat("<tcpx_p2p.Xfer %s of %zu bytes, %s>", self->op, self->length,
				    self->status == 1 ? "pending" :
				    self->status == 0 ? "complete" : "failed");
}

static PyObject *xfer_await(XferObject *self)
{
	PyObject *coro, *it;

	if (!await_hook) {
		PyErr_SetString(PyExc_RuntimeError, "tcpx_p2p.aio is not loaded");
		return NULL;
	}
	coro = PyObject_CallOneArg(await_hook, (PyObject *)self);
	if (!coro)
		return NULL;
	it = PyObject_CallMethod(coro, "__await__", NULL);
	Py_DECREF(coro);
	return it;
}

static PyMethodDef xfer_methods[] = {
	{ "wait", (PyCFunction)(void (*)(void))xfer_wait, METH_VARARGS | METH_KEYWORDS,
	  "wait(timeout=None): wait (GIL released, driving the session) until the transfer "
	  "completes; raises its error, or TimedOut after timeout seconds (still pending; "
	  "a transfer failed by its own deadline, set_deadline, raises TimedOut with done "
	  "True)" },
	{ "test", (PyCFunction)xfer_test, METH_NOARGS,
	  "test() -> bool: drive the session once; True once complete; raises its error" },
	{ "query", (PyCFunction)xfer_query, METH_NOARGS,
	  "query() -> dict: what the transfer is doing, without driving anything "
	  "(tcpx_p2p_xfer_query): done (ended: completed or failed), err (0, or once done the "
	  "negative TCPX_P2P_E* code it failed with), stalled (pending and no chunk moved for "
	  "the session's stall_ms; not a failure), chunks (its plugin requests) and "
	  "chunks_done (retired)" },
	{ "stream_wait", (PyCFunction)xfer_stream_wait, METH_O,
	  "stream_wait(stream): make a non-blocking CUDA stream (torch.cuda.Stream, a CuPy "
	  "stream made with non_blocking=True, an object with __cuda_stream__, or its int "
	  "handle; never a default stream) of the session's GPU "
	  "wait until the transfer ended, without blocking (tcpx_p2p_stream_wait); what the "
	  "stream runs next sees every byte; a failed transfer releases it too: check the "
	  "transfer before trusting what the stream computed" },
	{ "cancel", (PyCFunction)xfer_cancel, METH_NOARGS,
	  "cancel(): ask the transfer to stop (tcpx_p2p_xfer_cancel); wait() then raises "
	  "Cancelled, unless it had ended or was too far along (every chunk handed to the plugin), "
	  "when it gives its own result. Never blocks." },
	{ "set_deadline", (PyCFunction)xfer_set_deadline, METH_O,
	  "set_deadline(timeout): fail the transfer with TimedOut if it is still pending "
	  "timeout seconds (> 0) from now; a later call replaces it (tcpx_p2p_xfer_deadline). "
	  "Its connection fails with it, closed with the peer; for a bound on one wait that "
	  "leaves the connection alone, pass wait(timeout). An ended transfer: nothing "
	  "happens" },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef xfer_getset[] = {
	{ "done", (getter)xfer_get_done, NULL, "True once wait/test saw it complete or fail",
	  NULL },
	{ "ok", (getter)xfer_get_ok, NULL, "None while pending, then True or False", NULL },
	{ "op", (getter)xfer_get_op, NULL, "send, recv, sendv, recvv, write or read", NULL },
	{ "length", (getter)xfer_get_length, NULL, "bytes moved", NULL },
	{ "conn", (getter)xfer_get_conn, NULL, "the connection", NULL },
	{ "deadline", (getter)xfer_get_deadline, NULL,
	  "when set_deadline's deadline falls, in time.monotonic() seconds; None if none was "
	  "set", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyAsyncMethods xfer_as_async = { .am_await = (unaryfunc)xfer_await };

PyTypeObject tp_XferType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "tcpx_p2p.Xfer",
	.tp_basicsize = sizeof(XferObject),
	.tp_dealloc = (destructor)xfer_dealloc,
	.tp_repr = (reprfunc)xfer_repr,
	.tp_as_async = &xfer_as_async,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "One posted transfer. wait() or test() it; `await xfer` in asyncio.",
	.tp_methods = xfer_methods,
	.tp_getset = xfer_getset,
};

/* wait_any(xfers, timeout=None) -> index of the first complete one. */
PyObject *tp_py_wait_any(PyObject *mod, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "xfers", "timeout", NULL };
	PyObject *seq, *timeout = Py_None, *fast, *ret = NULL;
	tcpx_p2p_xfer **hs = NULL;
	Py_ssize_t i, n;
	double deadline;
	int ms, slice, idx = -1, rc = 0, done = 0, got = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:wait_any", kwlist, &seq, &timeout) ||
	    tp_py_timeout_ms(timeout, -1, &ms))
		return NULL;
	fast = PySequence_Fast(seq, "wait_any: xfers must be a sequence of Xfer");
	if (!fast)
		return NULL;
	n = PySequence_Fast_GET_SIZE(fast);
	if (n == 0 || n > INT32_MAX) {
		PyErr_SetString(PyExc_ValueError, "wait_any: no xfers");
		goto out;
	}
	for (i = 0; i < n; i++) {
		PyObject *o = PySequence_Fast_GET_ITEM(fast, i);

		if (!PyObject_TypeCheck(o, &tp_XferType)) {
			PyErr_Format(PyExc_TypeError, "wait_any: item %zd is not an Xfer", i);
			goto out;
		}
		if (((XferObject *)o)->status != 1) {
			ret = PyLong_FromSsize_t(i);
			goto out;
		}
		if (((XferObject *)o)->busy) {
			tp_busy_error("wait_any", "an Xfer of the list");
			goto out;
		}
		if (((XferObject *)o)->conn->closing) {
			tp_busy_error("wait_any", "the connection of an Xfer of the list, being "
				      "closed,");
			goto out;
		}
	}
	hs = PyMem_Malloc((size_t)n * sizeof(*hs));
	if (!hs) {
		PyErr_NoMemory();
		goto out;
	}
	for (i = 0; i < n; i++) {
		XferObject *x = (XferObject *)PySequence_Fast_GET_ITEM(fast, i);

		hs[i] = x->x;
		TP_ENTER(x);
		TP_ENTER(x->conn);
	}
	deadline = tp_py_now() + ms * 1e-3;
	for (;;) {
		slice = ms < 0 ? SLICE_MS : (int)((deadline - tp_py_now()) * 1e3);
		slice = slice < 0 ? 0 : slice > SLICE_MS ? SLICE_MS : slice;
		Py_BEGIN_ALLOW_THREADS
		rc = tp_api.wait_any(hs, (int)n, slice, 0, &idx);
		if (rc == 0) {
			got = 1;
			rc = tp_api.test(hs[idx], &done);
		}
		Py_END_ALLOW_THREADS
		if (got || rc != TCPX_P2P_ETIMEDOUT || (ms >= 0 && tp_py_now() >= deadline))
			break;
		if (PyErr_CheckSignals())
			break;
	}
	for (i = 0; i < n; i++) {
		XferObject *x = (XferObject *)PySequence_Fast_GET_ITEM(fast, i);

		TP_LEAVE(x->conn);
		TP_LEAVE(x);
	}
	/* idx completed (rc 0) or failed (rc): its result is taken now. */
	if (got)
		tp_xfer_take_result((XferObject *)PySequence_Fast_GET_ITEM(fast, idx), rc);
	for (i = 0; i < n; i++)
		let_go((XferObject *)PySequence_Fast_GET_ITEM(fast, i));
	if (PyErr_Occurred())
		goto out;
	if (!got) {
		tp_py_raise(rc, "wait_any");
		goto out;
	}
	ret = PyLong_FromLong(idx);
out:
	PyMem_Free(hs);
	Py_DECREF(fast);
	return ret;
}

PyObject *tp_py_set_await(PyObject *mod, PyObject *fn)
{
	Py_INCREF(fn);
	Py_XSETREF(await_hook, fn);
	Py_RETURN_NONE;
}

PyObject *tp_py_set_let_go_hook(PyObject *mod, PyObject *fn)
{
	Py_XSETREF(let_go_hook, Py_NewRef(fn));
	Py_RETURN_NONE;
}

int tp_py_add_types(PyObject *m)
{
	static const struct {
		const char *name;
		PyTypeObject *type;
	} types[] = {
		{ "Session", &tp_SessionType }, { "Conn", &tp_ConnType },
		{ "MR", &tp_MRType }, { "RMR", &tp_RMRType },
		{ "Xfer", &tp_XferType }, { "Server", &tp_ServerType },
		{ "Listener", &tp_ListenerType }, { "Segments", &tp_SegmentsType },
		{ "XList", &tp_XListType },
	};
	size_t i;

	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (PyType_Ready(types[i].type) || PyModule_AddType(m, types[i].type))
			return -1;
	return 0;
}
