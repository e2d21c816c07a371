/* tcpx_p2p.Conn: a connection and what is posted on it (Server and
 * Listener, in server.c and listener.c, make one). */
#include "tp_py.h"

int tp_conn_check(ConnObject *c)
{
	if (c->c)
		return 0;
	PyErr_SetString(PyExc_ValueError, "the connection is closed");
	return -1;
}

PyObject *tp_conn_new(SessionObject *s, tcpx_p2p_conn *c)
{
	ConnObject *o = PyObject_New(ConnObject, &tp_ConnType);

	if (!o)
		return NULL;
	o->sess = s;
	Py_INCREF(s);
	o->c = c;
	o->busy = 0;
	o->closing = 0;
	tp_list_add(&s->conns, &o->link);
	return (PyObject *)o;
}

/* Destroy the conn (cancelling what is pending) and what depends on it. */
void tp_conn_close_handle(ConnObject *o)
{
	SessionObject *s = o->sess;
	tcpx_p2p_conn *c = o->c;
	struct tp_list *p, *t;

	if (!c)
		return;
	/* Off the session's list before the GIL is let go: other threads see
	 * it closed, and a close of the whole session never meets it again. */
	o->c = NULL;
	tp_list_del(&o->link);
	tp_list_each(p, t, &s->rmrs) {
		RMRObject *r = tp_list_entry(p, RMRObject, link);

		if (r->conn == o)
			tp_rmr_close_handle(r);
	}
	tp_list_each(p, t, &s->xlists) {
		XListObject *l = tp_list_entry(p, XListObject, link);

		if (l->conn == o)
			tp_xlist_close_handle(l);
	}
	o->closing = 1; /* its Xfers' handles stay, but wait for the close */
	Py_BEGIN_ALLOW_THREADS
	tp_api.conn_destroy(c);
	Py_END_ALLOW_THREADS
	o->closing = 0;
	tp_session_reap(s, o);
}

static PyObject *conn_close(ConnObject *self, PyObject *unused)
{
	if (!self->c)
		Py_RETURN_NONE;
	if (self->busy)
		return tp_busy_error("Conn.close", "the connection");
	tp_conn_close_handle(self);
	Py_RETURN_NONE;
}

static void conn_dealloc(ConnObject *self)
{
	tp_conn_close_handle(self);
	Py_DECREF(self->sess);
	PyObject_Free(self);
}

static PyObject *conn_exit(ConnObject *self, PyObject *args)
{
	return conn_close(self, NULL);
}

static MRObject *local_mr(ConnObject *self, PyObject *obj, const char *call)
{
	MRObject *mr;

	if (!PyObject_TypeCheck(obj, &tp_MRType)) {
		PyErr_Format(PyExc_TypeError, "%s: expected an MR, got %.100s", call,
			     Py_TYPE(obj)->tp_name);
		return NULL;
	}
	mr = (MRObject *)obj;
	if (!mr->mr) {
		PyErr_Format(PyExc_ValueError, "%s: the MR is closed", call);
		return NULL;
	}
	if (mr->sess != self->sess) {
		PyErr_Format(PyExc_ValueError, "%s: the MR belongs to another session", call);
		return NULL;
	}
	return mr;
}

/* offset and length (None: the rest of the region) against len. */
static int range_of(PyObject *off_o, PyObject *len_o, size_t len, const char *call, size_t *off,
		    size_t *n)
{
	*off = off_o ? PyLong_AsSize_t(off_o) : 0;
	if (*off == (size_t)-1 && PyErr_Occurred())
		return -1;
	if (!len_o || len_o == Py_None) {
		if (*off > len) {
			PyErr_Format(PyExc_ValueError, "%s: offset %zu is beyond the region's %zu "
				     "bytes", call, *off, len);
			return -1;
		}
		*n = len - *off;
		return 0;
	}
	*n = PyLong_AsSize_t(len_o);
	if (*n == (size_t)-1 && PyErr_Occurred())
		return -1;
	return 0;
}

/* A CUDA event from Python (a transfer's event=): None (no event), an int
 * handle (a cudaEvent_t), or an object carrying one: torch.cuda.Event's
 * cuda_event, CuPy's Event.ptr.  A handle of 0 is an event not yet
 * created (torch creates it at its first record). */
static int event_handle(PyObject *o, const char *call, void **out)
{
	PyObject *h = NULL;
	unsigned long long v;

	*out = NULL;
	if (o == Py_None)
		return 0;
	if (!PyLong_Check(o)) {
		if (PyObject_HasAttrString(o, "cuda_event"))
			h = PyObject_GetAttrString(o, "cuda_event");
		else if (PyObject_HasAttrString(o, "ptr"))
			h = PyObject_GetAttrString(o, "ptr");
		else
			PyErr_Format(PyExc_TypeError, "%s: event must be a CUDA event (torch.cuda."
				     "Event, cupy.cuda.Event) or its int handle", call);
		if (!h)
			return -1;
		o = h;
	}
	v = PyLong_AsUnsignedLongLong(o);
	Py_XDECREF(h);
	if (v == (unsigned long long)-1 && PyErr_Occurred())
		return -1;
	if (!v) {
		PyErr_Format(PyExc_ValueError, "%s: the event has no CUDA handle yet (record it "
			     "on a stream first)", call);
		return -1;
	}
	*out = (void *)(uintptr_t)v;
	return 0;
}

static PyObject *post_one(ConnObject *self, PyObject *args, PyObject *kw, int recv)
{
	static char *kwlist_s[] = { "mr", "offset", "length", "event", NULL };
	static char *kwlist_r[] = { "mr", "offset", "length", NULL };
	const char *call = recv ? "Conn.recv" : "Conn.send";
	PyObject *mr_o, *off_o = NULL, *len_o = NULL, *ev_o = Py_None, *x;
	tcpx_p2p_xfer_params prm = { .struct_size = sizeof(prm) };
	tcpx_p2p_xfer *h;
	tcpx_p2p_seg g;
	MRObject *mr;
	size_t off, len;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, recv ? "O|OO:recv" : "O|OOO:send",
					 recv ? kwlist_r : kwlist_s, &mr_o, &off_o, &len_o, &ev_o))
		return NULL;
	if (event_handle(ev_o, call, &prm.event))
		return NULL;
	if (tp_conn_check(self) || !(mr = local_mr(self, mr_o, call)) ||
	    range_of(off_o, len_o, mr->mem.len, call, &off, &len))
		return NULL;
	g = (tcpx_p2p_seg){ mr->mr, off, len };
	if (recv && mr->mem.readonly) {
		PyErr_Format(PyExc_ValueError, "%s: the MR's memory is read-only (registered from a "
			     "read-only buffer): it cannot receive", call);
		return NULL;
	}
	TP_ENTER(self);
	TP_ENTER(mr);
	Py_BEGIN_ALLOW_THREADS
	rc = recv	 ? tp_api.recv(self->c, mr->mr, off, len, &h) :
	     prm.event ? tp_api.sendv(self->c, &g, 1, &prm, &h) : /* send takes no params */
			 tp_api.send(self->c, mr->mr, off, len, &h);
	Py_END_ALLOW_THREADS
	TP_LEAVE(mr);
	TP_LEAVE(self);
	if (rc)
		return tp_py_raise(rc, call);
	x = (PyObject *)tp_xfer_new(self, h, mr_o, recv ? "recv" : "send", len);
	return x;
}

static PyObject *conn_send(ConnObject *self, PyObject *args, PyObject *kw)
{
	return post_one(self, args, kw, 0);
}

static PyObject *conn_recv(ConnObject *self, PyObject *args, PyObject *kw)
{
	return post_one(self, args, kw, 1);
}

static PyObject *post_vec(ConnObject *self, PyObject *segs_o, int recv)
{
	const char *call = recv ? "Conn.recvv" : "Conn.sendv";
	struct tp_segset set;
	tcpx_p2p_xfer *h;
	PyObject *x;
	int rc;

	if (tp_conn_check(self) || tp_segset_build(segs_o, 0, recv, self, call, &set))
		return NULL;
	TP_ENTER(self);
	tp_keep_busy(set.keep, 1);
	Py_BEGIN_ALLOW_THREADS
	rc = recv ? tp_api.recvv(self->c, set.segs, set.n, NULL, &h) :
		    tp_api.sendv(self->c, set.segs, set.n, NULL, &h);
	Py_END_ALLOW_THREADS
	tp_keep_busy(set.keep, -1);
	TP_LEAVE(self);
	if (rc) {
		tp_segset_free(&set);
		return tp_py_raise(rc, call);
	}
	x = (PyObject *)tp_xfer_new(self, h, set.keep, recv ? "recvv" : "sendv", set.total);
	tp_segset_free(&set);
	return x;
}

static PyObject *conn_sendv(ConnObject *self, PyObject *segs)
{
	return post_vec(self, segs, 0);
}

static PyObject *conn_recvv(ConnObject *self, PyObject *segs)
{
	return post_vec(self, segs, 1);
}

static PyObject *post_onesided(ConnObject *self, PyObject *args, PyObject *kw, int read)
{
	static char *kwlist_w[] = { "local", "remote", "notif", "event", NULL };
	static char *kwlist_r[] = { "local", "remote", "event", NULL };
	const char *call = read ? "Conn.read" : "Conn.write";
	tcpx_p2p_xfer_params prm = { .struct_size = sizeof(prm) };
	struct tp_segset loc, rem;
	PyObject *local, *remote, *ev_o = Py_None, *x = NULL, *keep;
	Py_buffer notif = { 0 };
	tcpx_p2p_xfer *h;
	int rc;

	if (read ? !PyArg_ParseTupleAndKeywords(args, kw, "OO|O:read", kwlist_r, &local, &remote,
						&ev_o) :
		   !PyArg_ParseTupleAndKeywords(args, kw, "OO|z*O:write", kwlist_w, &local, &remote,
						&notif, &ev_o))
		return NULL;
	if (tp_conn_check(self) || event_handle(ev_o, call, &prm.event))
		goto release_notif;
	if (notif.buf) {
		/* the peer's own bound (notif_max_bytes) is the library's to check */
		if (notif.len < 1 || notif.len > TCPX_P2P_NOTIF_LIMIT) {
			PyErr_Format(PyExc_ValueError, "%s: notif must be 1..%d bytes", call,
				     TCPX_P2P_NOTIF_LIMIT);
			goto release_notif;
		}
		prm.notif = notif.buf;
		prm.notif_len = (size_t)notif.len;
	}
	if (tp_segset_build(local, 0, read, self, call, &loc))
		goto release_notif;
	if (tp_segset_build(remote, 1, 0, self, call, &rem))
		goto free_local;
	TP_ENTER(self);
	tp_keep_busy(loc.keep, 1);
	tp_keep_busy(rem.keep, 1);
	Py_BEGIN_ALLOW_THREADS
	rc = read ? tp_api.read(self->c, loc.segs, loc.n, rem.segs, rem.n, &prm, &h) :
		    tp_api.write(self->c, loc.segs, loc.n, rem.segs, rem.n, &prm, &h);
	Py_END_ALLOW_THREADS
	tp_keep_busy(rem.keep, -1);
	tp_keep_busy(loc.keep, -1);
	TP_LEAVE(self);
	if (rc) {
		tp_py_raise(rc, call);
		goto free_remote;
	}
	/* The remote regions need not live on (the post copied them). */
	keep = loc.keep;
	x = (PyObject *)tp_xfer_new(self, h, keep, read ? "read" : "write", loc.total);
free_remote:
	tp_segset_free(&rem);
free_local:
	tp_segset_free(&loc);
release_notif:
	if (notif.obj)
		PyBuffer_Release(&notif);
	return x;
}

static PyObject *conn_write(ConnObject *self, PyObject *args, PyObject *kw)
{
	return post_onesided(self, args, kw, 0);
}

static PyObject *conn_read(ConnObject *self, PyObject *args, PyObject *kw)
{
	return post_onesided(self, args, kw, 1);
}

static PyObject *conn_notify(ConnObject *self, PyObject *args)
{
	Py_buffer msg;
	int rc;

	if (!PyArg_ParseTuple(args, "y*:notify", &msg))
		return NULL;
	if (tp_conn_check(self)) {
		PyBuffer_Release(&msg);
		return NULL;
	}
	if (msg.len < 1 || msg.len > TCPX_P2P_NOTIF_LIMIT) {
		PyBuffer_Release(&msg);
		return PyErr_Format(PyExc_ValueError, "Conn.notify: a message is 1..%d bytes",
				    TCPX_P2P_NOTIF_LIMIT);
	}
	TP_ENTER(self);
	Py_BEGIN_ALLOW_THREADS
	rc = tp_api.notify(self->c, msg.buf, (size_t)msg.len);
	Py_END_ALLOW_THREADS
	TP_LEAVE(self);
	PyBuffer_Release(&msg);
	if (rc)
		return tp_py_raise(rc, "Conn.notify");
	Py_RETURN_NONE;
}

static PyObject *conn_export(ConnObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "mr", "offset", "length", "access", NULL };
	PyObject *mr_o, *off_o = NULL, *len_o = NULL, *acc_o = Py_None;
	tcpx_p2p_rdesc desc;
	unsigned access;
	size_t off, len;
	MRObject *mr;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OOO:export", kwlist, &mr_o, &off_o, &len_o,
					 &acc_o))
		return NULL;
	if (tp_conn_check(self) || !(mr = local_mr(self, mr_o, "Conn.export")) ||
	    range_of(off_o, len_o, mr->mem.len, "Conn.export", &off, &len))
		return NULL;
	if (acc_o == Py_None) {
		access = TCPX_P2P_ACCESS_READ | (mr->mem.readonly ? 0 : TCPX_P2P_ACCESS_WRITE);
	} else {
		access = (unsigned)PyLong_AsUnsignedLong(acc_o);
		if (PyErr_Occurred())
			return NULL;
	}
	if ((access & TCPX_P2P_ACCESS_WRITE) && mr->mem.readonly)
		return PyErr_Format(PyExc_ValueError, "Conn.export: the MR's memory is read-only: "
				    "it cannot be exported for writing");
	TP_ENTER(self);
	TP_ENTER(mr);
	Py_BEGIN_ALLOW_THREADS
	rc = tp_api.mr_export(self->c, mr->mr, off, len, access, &desc);
	Py_END_ALLOW_THREADS
	TP_LEAVE(mr);
	TP_LEAVE(self);
	if (rc)
		return tp_py_raise(rc, "Conn.export");
	return PyBytes_FromStringAndSize((const char *)desc.bytes, sizeof(desc.bytes));
}

/* The descriptor argument of a call on a live conn (0), or -1 with the
 * exception set. */
static int desc_arg(ConnObject *self, PyObject *args, const char *call, tcpx_p2p_rdesc *desc)
{
	Py_buffer b;

	if (!PyArg_ParseTuple(args, "y*", &b))
		return -1;
	if (tp_conn_check(self) || b.len != TCPX_P2P_RDESC_SIZE) {
		if (!PyErr_Occurred())
			PyErr_Format(PyExc_ValueError, "%s: a descriptor is %d bytes, not %zd",
				     call, TCPX_P2P_RDESC_SIZE, b.len);
		PyBuffer_Release(&b);
		return -1;
	}
	memcpy(desc->bytes, b.buf, sizeof(desc->bytes));
	PyBuffer_Release(&b);
	return 0;
}

static PyObject *conn_unexport(ConnObject *self, PyObject *args)
{
	tcpx_p2p_rdesc desc;
	int rc;

	if (desc_arg(self, args, "Conn.unexport", &desc))
		return NULL;
	TP_ENTER(self);
	rc = tp_api.mr_unexport(self->c, &desc);
	TP_LEAVE(self);
	if (rc)
		return tp_py_raise(rc, "Conn.unexport");
	Py_RETURN_NONE;
}

static PyObject *conn_import_rmr(ConnObject *self, PyObject *args)
{
	tcpx_p2p_rdesc desc;
	tcpx_p2p_rmr *r;
	RMRObject *o;
	int rc;

	if (desc_arg(self, args, "Conn.import_rmr", &desc))
		return NULL;
	rc = tp_api.rmr_import(self->c, &desc, &r);
	if (rc)
		return tp_py_raise(rc, "Conn.import_rmr");
	o = PyObject_New(RMRObject, &tp_RMRType);
	if (!o) {
		tp_api.rmr_release(r);
		return NULL;
	}
	o->busy = 0;
	o->remote = 1;
	o->conn = self;
	Py_INCREF(self);
	o->r = r;
	tp_api.rmr_query(r, &o->len, &o->mem_type, &o->access);
	tp_list_add(&self->sess->rmrs, &o->link);
	return (PyObject *)o;
}

static PyObject *conn_progress(ConnObject *self, PyObject *unused)
{
	int rc;

	if (tp_conn_check(self))
		return NULL;
	TP_ENTER(self);
	Py_BEGIN_ALLOW_THREADS
	rc = tp_api.progress(self->c);
	Py_END_ALLOW_THREADS
	TP_LEAVE(self);
	if (rc)
		return tp_py_raise(rc, "Conn.progress");
	Py_RETURN_NONE;
}

static PyObject *conn_barrier(ConnObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "timeout", NULL };
	PyObject *timeout = Py_None;
	int ms, rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:barrier", kwlist, &timeout))
		return NULL;
	if (tp_conn_check(self) || tp_py_timeout_ms(timeout, TCPX_P2P_TIMEOUT_DEFAULT, &ms))
		return NULL;
	TP_ENTER(self);
	Py_BEGIN_ALLOW_THREADS
	rc = tp_api.conn_barrier(self->c, ms);
	Py_END_ALLOW_THREADS
	TP_LEAVE(self);
	if (rc)
		return tp_py_raise(rc, "Conn.barrier");
	Py_RETURN_NONE;
}

/* set_in_deadline(timeout): seconds, 0 or None for none; anything else not
 * >= 0 reaches the library as -1, which refuses it (InvalidArgument). */
static PyObject *conn_set_in_deadline(ConnObject *self, PyObject *arg)
{
	double t = 0;
	int ms, rc;

	if (arg != Py_None) {
		t = PyFloat_AsDouble(arg);
		if (t == -1.0 && PyErr_Occurred())
			return NULL;
	}
	if (!(t >= 0))
		ms = -1;
	else if (t * 1000.0 >= (double)INT32_MAX)
		ms = INT32_MAX;
	else
		ms = t > 0 && t * 1000.0 < 1 ? 1 : (int)(t * 1000.0 + 0.5);
	if (tp_conn_check(self))
		return NULL;
	rc = tp_api.conn_in_deadline(self->c, ms);
	if (rc)
		return tp_py_raise(rc, "Conn.set_in_deadline");
	Py_RETURN_NONE;
}

/* The session's MR object over handle mr, or None (a new reference). */
static PyObject *mr_object(SessionObject *s, tcpx_p2p_mr *mr)
{
	struct tp_list *p, *t;

	tp_list_each(p, t, &s->mrs) {
		MRObject *m = tp_list_entry(p, MRObject, link);

		if (m->mr == mr) {
			Py_INCREF(m);
			return (PyObject *)m;
		}
	}
	Py_RETURN_NONE;
}

static PyObject *hosted_dict(SessionObject *s, const tcpx_p2p_hosted *h)
{
	int nr = h->nregions < TCPX_P2P_HOSTED_REGIONS ? h->nregions : TCPX_P2P_HOSTED_REGIONS;
	PyObject *regions = PyList_New(nr), *r;

	if (!regions)
		return NULL;
	for (int i = 0; i < nr; i++) {
		r = mr_object(s, h->region[i]);
		PyList_SET_ITEM(regions, i, r);
	}
	return Py_BuildValue("{s:K,s:s,s:O,s:n,s:n,s:L,s:L,s:i,s:N}", "id",
			     (unsigned long long)h->id, "op",
			     h->op == TCPX_P2P_HOSTED_WRITE ? "write" : "read", "stalled",
			     h->stalled ? Py_True : Py_False, "length", (Py_ssize_t)h->len, "done",
			     (Py_ssize_t)h->done, "idle_ms", (long long)h->idle_ms, "age_ms",
			     (long long)h->age_ms, "nregions", h->nregions, "regions", regions);
}

/* hosted() -> list of dicts: tcpx_p2p_conn_hosted, called again with room
 * for all while the list grows under it. */
static PyObject *conn_hosted(ConnObject *self, PyObject *unused)
{
	tcpx_p2p_hosted *h = NULL, *more;
	PyObject *list, *d;
	int max = 16, n = 0, rc;

	if (tp_conn_check(self))
		return NULL;
	for (;;) {
		more = PyMem_Realloc(h, (size_t)max * sizeof(*h));
		if (!more) {
			PyMem_Free(h);
			return PyErr_NoMemory();
		}
		h = more;
		rc = tp_api.conn_hosted(self->c, h, max, &n);
		if (rc != TCPX_P2P_EAGAIN)
			break;
		max = n + 16;
	}
	if (rc) {
		PyMem_Free(h);
		return tp_py_raise(rc, "Conn.hosted");
	}
	list = PyList_New(n);
	for (int i = 0; list && i < n; i++) {
		d = hosted_dict(self->sess, &h[i]);
		if (!d) {
			Py_CLEAR(list);
			break;
		}
		PyList_SET_ITEM(list, i, d);
	}
	PyMem_Free(h);
	return list;
}

static PyObject *conn_get_closed(ConnObject *self, void *unused)
{
	return PyBool_FromLong(self->c == NULL);
}

/* generation: tcpx_p2p_conn_generation (0 for a closed conn). */
static PyObject *conn_get_generation(ConnObject *self, void *unused)
{
	uint32_t g = 0;

	if (self->c)
		(void)tp_api.conn_generation(self->c, &g);
	return PyLong_FromUnsignedLong(g);
}

static PyObject *conn_get_in_use(ConnObject *self, void *unused)
{
	return PyBool_FromLong(self->busy > 0);
}

static PyObject *conn_get_session(ConnObject *self, void *unused)
{
	Py_INCREF(self->sess);
	return (PyObject *)self->sess;
}


static PyObject *conn_stats(ConnObject *self, PyObject *unused)
{
	if (tp_conn_check(self))
		return NULL;
	return tp_py_stats(self->c, 1, "Conn.stats");
}

static PyMethodDef conn_methods[] = {
	{ "send", TP_PY_FN(conn_send), TP_PY_KW,
	  "send(mr, offset=0, length=None, event=None) -> Xfer: send length bytes (None: to the "
	  "end of mr); event: a CUDA event (torch.cuda.Event, cupy.cuda.Event or its int handle) "
	  "the send starts after (queued at once, in posting order)" },
	{ "recv", TP_PY_FN(conn_recv), TP_PY_KW,
	  "recv(mr, offset=0, length=None) -> Xfer: receive into mr; the peer's send must be "
	  "of the same length" },
	{ "sendv", TP_PY_FN(conn_sendv), METH_O,
	  "sendv(segs) -> Xfer: send segments packed back to back; segs is a Segments, a "
	  "(mr, offset, length) tuple, or a list of either" },
	{ "recvv", TP_PY_FN(conn_recvv), METH_O, "recvv(segs) -> Xfer: receive into segments" },
	{ "write", TP_PY_FN(conn_write), TP_PY_KW,
	  "write(local, remote, notif=None, event=None) -> Xfer: one-sided WRITE of the local "
	  "segments (MR) into the remote ones (RMR); notif (bytes) is delivered to the peer after "
	  "the data; event: a CUDA event the write starts after (as send)" },
	{ "read", TP_PY_FN(conn_read), TP_PY_KW,
	  "read(local, remote, event=None) -> Xfer: one-sided READ of the remote segments into "
	  "the local ones; event: a CUDA event the request waits for (as send)" },
	{ "prepare", TP_PY_FN(tp_py_conn_prepare), TP_PY_KW,
	  "prepare(op, local, remote) -> XList: a 'write' or 'read' of these segments checked "
	  "once, posted with XList.post (the local regions stay registered until it is closed)" },
	{ "prepare_strided", TP_PY_FN(tp_py_conn_prepare_strided), TP_PY_KW,
	  "prepare_strided(op, mr, local, rmr, remote) -> XList: local and remote are (base, "
	  "stride, count, length) blocks of mr and rmr" },
	{ "stats", TP_PY_FN(conn_stats), METH_NOARGS,
	  "stats() -> dict: this connection's counters (tcpx_p2p_conn_stats; docs/api.md, "
	  "\"Statistics\")" },
	{ "notify", TP_PY_FN(conn_notify), METH_VARARGS,
	  "notify(msg): send a notification, delivered after the data of every transfer "
	  "posted before it" },
	{ "export", TP_PY_FN(conn_export), TP_PY_KW,
	  "export(mr, offset=0, length=None, access=None) -> bytes: a descriptor that lets this "
	  "conn's peer write into and/or read from the range (access: ACCESS_READ | "
	  "ACCESS_WRITE; None: both, or read only for read-only memory)" },
	{ "unexport", TP_PY_FN(conn_unexport), METH_VARARGS,
	  "unexport(desc): revoke that export at once; the peer's transfers naming it that are "
	  "not yet under way here are refused" },
	{ "import_rmr", TP_PY_FN(conn_import_rmr), METH_VARARGS,
	  "import_rmr(desc) -> RMR: the peer's exported region" },
	{ "progress", TP_PY_FN(conn_progress), METH_NOARGS,
	  "progress(): drive every connection of the session once; raises the conn's error" },
	{ "set_in_deadline", TP_PY_FN(conn_set_in_deadline), METH_O,
	  "set_in_deadline(timeout): each of the peer's transfers hosted here (its WRITE "
	  "into an export, its READ from one), those under way and those accepted later, must "
	  "end within timeout seconds (>= 0) of its acceptance (of this call, for those under "
	  "way), or the connection fails with TimedOut and is closed with the peer "
	  "(tcpx_p2p_conn_in_deadline); 0 or None: no deadline (the default). Raises "
	  "InvalidArgument for a negative timeout, Closed if the connection failed" },
	{ "hosted", TP_PY_FN(conn_hosted), METH_NOARGS,
	  "hosted() -> list of dict: the peer's transfers this side hosts (its WRITEs landing in "
	  "exports here, its READs served from them), accepted and not yet ended "
	  "(tcpx_p2p_conn_hosted): id (the peer's number for it), op ('write' or 'read'), "
	  "stalled, length, done (bytes landed or sent), idle_ms (since it last moved), age_ms "
	  "(since it was accepted), nregions and regions (the MR objects of the first four "
	  "regions it holds; None for one no MR of this session wraps)" },
	{ "barrier", TP_PY_FN(conn_barrier), TP_PY_KW,
	  "barrier(timeout=None): wait until the peer calls barrier too (dial/accept conns)" },
	{ "close", TP_PY_FN(conn_close), METH_NOARGS,
	  "close(): destroy the connection; pending transfers fail with Closed" },
	{ "__enter__", tp_py_enter_self, METH_NOARGS, NULL },
	{ "__exit__", TP_PY_FN(conn_exit), METH_VARARGS, NULL },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef conn_getset[] = {
	{ "closed", (getter)conn_get_closed, NULL, "True once closed", NULL },
	{ "session", (getter)conn_get_session, NULL, "the session", NULL },
	{ "generation", (getter)conn_get_generation, NULL,
	  "how many times the library re-established the connection (Session redial_ms; "
	  "tcpx_p2p_conn_generation)", NULL },
	{ "in_use", (getter)conn_get_in_use, NULL,
	  "True while a thread is inside a call on the conn or one of its transfers", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

PyTypeObject tp_ConnType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "tcpx_p2p.Conn",
	.tp_basicsize = sizeof(ConnObject),
	.tp_dealloc = (destructor)conn_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "A connection to one peer (from Session.dial, Server.accept or "
		  "Listener.connect).",
	.tp_methods = conn_methods,
	.tp_getset = conn_getset,
};
