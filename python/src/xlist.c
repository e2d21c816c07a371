/* tcpx_p2p.XList: a WRITE or READ prepared once and posted many times
 * (tcpx_p2p_xlist_*), from Conn.prepare and Conn.prepare_strided.  It
 * keeps its local regions (the library holds them: MR.close is refused
 * meanwhile) and is released before its connection closes. */
#include "tp_py.h"

static XListObject *xlist_new(ConnObject *conn, tcpx_p2p_xlist *l, PyObject *keep, int read,
			      size_t length)
{
	XListObject *o = PyObject_New(XListObject, &tp_XListType);

	if (!o) {
		tp_api.xlist_release(l);
		return NULL;
	}
	o->conn = conn;
	Py_INCREF(conn);
	o->l = l;
	o->keep = keep;
	Py_XINCREF(keep);
	o->op = read ? "read" : "write";
	o->length = length;
	o->busy = 0;
	tp_list_add(&conn->sess->xlists, &o->link);
	return o;
}

void tp_xlist_close_handle(XListObject *o)
{
	if (!o->l)
		return;
	tp_api.xlist_release(o->l);
	o->l = NULL;
	tp_list_del(&o->link);
	Py_CLEAR(o->keep);
}

static int op_arg(const char *op, const char *call, int *read)
{
	if (!strcmp(op, "write") || !strcmp(op, "read")) {
		*read = op[0] == 'r';
		return 0;
	}
	PyErr_Format(PyExc_ValueError, "%s: op must be 'write' or 'read', not '%s'", call, op);
	return -1;
}

PyObject *tp_py_conn_prepare(ConnObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "op", "local", "remote", NULL };
	const char *call = "Conn.prepare", *op;
	struct tp_segset loc, rem;
	PyObject *local, *remote, *x = NULL;
	tcpx_p2p_xlist *l;
	int rc, read;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "sOO:prepare", kwlist, &op, &local, &remote) ||
	    op_arg(op, call, &read) || tp_conn_check(self))
		return NULL;
	if (tp_segset_build(local, 0, read, self, call, &loc))
		return NULL;
	if (tp_segset_build(remote, 1, 0, self, call, &rem))
		goto free_local;
	TP_ENTER(self);
	tp_keep_busy(loc.keep, 1);
	tp_keep_busy(rem.keep, 1);
	Py_BEGIN_ALLOW_THREADS
	rc = tp_api.xlist_prepare(self->c, read ? TCPX_P2P_XLIST_READ : TCPX_P2P_XLIST_WRITE,
				  loc.segs, loc.n, rem.segs, rem.n, 0, &l);
	Py_END_ALLOW_THREADS
	tp_keep_busy(rem.keep, -1);
	tp_keep_busy(loc.keep, -1);
	TP_LEAVE(self);
	if (rc)
		tp_py_raise(rc, call);
	else /* the remote regions need not live on (the list copied them) */
		x = (PyObject *)xlist_new(self, l, loc.keep, read, loc.total);
	tp_segset_free(&rem);
free_local:
	tp_segset_free(&loc);
	return x;
}

static int strided_arg(PyObject *o, const char *call, const char *side, tcpx_p2p_strided *g)
{
	if (!PyArg_ParseTuple(o, "nnnn", &g->base, &g->stride, &g->count, &g->len)) {
		PyErr_Clear();
		PyErr_Format(PyExc_TypeError, "%s: %s must be (base, stride, count, length), "
			     "non-negative ints", call, side);
		return -1;
	}
	if ((Py_ssize_t)g->base < 0 || (Py_ssize_t)g->stride < 0 || (Py_ssize_t)g->count < 0 ||
	    (Py_ssize_t)g->len < 0) {
		PyErr_Format(PyExc_ValueError, "%s: %s: negative value", call, side);
		return -1;
	}
	return 0;
}

PyObject *tp_py_conn_prepare_strided(ConnObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "op", "mr", "local", "rmr", "remote", NULL };
	const char *call = "Conn.prepare_strided", *op;
	PyObject *local, *remote, *keep;
	tcpx_p2p_strided lg, rg;
	MRObject *mr;
	RMRObject *rmr;
	tcpx_p2p_xlist *l;
	XListObject *x;
	int rc, read;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "sO!OO!O:prepare_strided", kwlist, &op,
					 &tp_MRType, &mr, &local, &tp_RMRType, &rmr, &remote) ||
	    op_arg(op, call, &read) || tp_conn_check(self) ||
	    strided_arg(local, call, "local", &lg) || strided_arg(remote, call, "remote", &rg))
		return NULL;
	if (!mr->mr || !rmr->r)
		return PyErr_Format(PyExc_ValueError, "%s: the %s is closed", call,
				    !mr->mr ? "MR" : "RMR");
	if (mr->sess != self->sess || rmr->conn != self)
		return PyErr_Format(PyExc_ValueError, "%s: the MR must be of this session and the "
				    "RMR imported on this connection", call);
	if (read && mr->mem.readonly)
		return PyErr_Format(PyExc_ValueError, "%s: a read into read-only memory", call);
	TP_ENTER(self);
	mr->busy++;
	rmr->busy++;
	Py_BEGIN_ALLOW_THREADS
	rc = tp_api.xlist_prepare_strided(self->c, read ? TCPX_P2P_XLIST_READ
							 : TCPX_P2P_XLIST_WRITE,
					  mr->mr, &lg, rmr->r, &rg, 0, &l);
	Py_END_ALLOW_THREADS
	rmr->busy--;
	mr->busy--;
	TP_LEAVE(self);
	if (rc)
		return tp_py_raise(rc, call);
	keep = (PyObject *)mr;
	x = xlist_new(self, l, keep, read, lg.count * lg.len);
	return (PyObject *)x;
}

static PyObject *xlist_post(XListObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "notif", NULL };
	tcpx_p2p_xfer_params prm = { .struct_size = sizeof(prm) };
	Py_buffer notif = { 0 };
	ConnObject *conn = self->conn;
	PyObject *x = NULL;
	tcpx_p2p_xfer *h;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|z*:post", kwlist, &notif))
		return NULL;
	if (!self->l) {
		PyErr_SetString(PyExc_ValueError, "XList.post: the list is released");
		goto release_notif;
	}
	if (tp_conn_check(conn))
		goto release_notif;
	if (notif.buf) {
		if (notif.len < 1 || notif.len > TCPX_P2P_NOTIF_LIMIT) {
			PyErr_Format(PyExc_ValueError, "XList.post: notif must be 1..%d bytes",
				     TCPX_P2P_NOTIF_LIMIT);
			goto release_notif;
		}
		prm.notif = notif.buf;
		prm.notif_len = (size_t)notif.len;
	}
	TP_ENTER(conn);
	self->busy++;
	Py_BEGIN_ALLOW_THREADS
	rc = tp_api.xlist_post(self->l, notif.buf ? &prm : NULL, &h);
	Py_END_ALLOW_THREADS
	self->busy--;
	TP_LEAVE(conn);
	if (rc)
		tp_py_raise(rc, "XList.post");
	else
		x = (PyObject *)tp_xfer_new(conn, h, self->keep, self->op, self->length);
release_notif:
	if (notif.obj)
		PyBuffer_Release(&notif);
	return x;
}

static PyObject *xlist_close(XListObject *self, PyObject *unused)
{
	if (self->busy)
		return tp_busy_error("XList.close", "the prepared list");
	tp_xlist_close_handle(self);
	Py_RETURN_NONE;
}

static PyObject *xlist_exit(XListObject *self, PyObject *args)
{
	return xlist_close(self, NULL);
}

static void xlist_dealloc(XListObject *self)
{
	tp_xlist_close_handle(self);
	Py_DECREF(self->conn);
	PyObject_Free(self);
}

static PyObject *xlist_get_closed(XListObject *self, void *unused)
{
	return PyBool_FromLong(self->l == NULL);
}

static PyObject *xlist_get_op(XListObject *self, void *unused)
{
	return PyUnicode_FromString(self->op);
}

static PyObject *xlist_get_length(XListObject *self, void *unused)
{
	return PyLong_FromSize_t(self->length);
}

static PyMethodDef xlist_methods[] = {
	{ "post", TP_PY_FN(xlist_post), TP_PY_KW,
	  "post(notif=None) -> Xfer: one WRITE or READ of the prepared lists (notif: a WRITE's "
	  "notification); may be posted again while earlier posts are in flight" },
	{ "close", TP_PY_FN(xlist_close), METH_NOARGS,
	  "close(): release the list; transfers posted from it finish unaffected" },
	{ "__enter__", tp_py_enter_self, METH_NOARGS, NULL },
	{ "__exit__", TP_PY_FN(xlist_exit), METH_VARARGS, NULL },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef xlist_getset[] = {
	{ "closed", (getter)xlist_get_closed, NULL, "True once released", NULL },
	{ "op", (getter)xlist_get_op, NULL, "'write' or 'read'", NULL },
	{ "length", (getter)xlist_get_length, NULL, "bytes each post moves", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

PyTypeObject tp_XListType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "tcpx_p2p.XList",
	.tp_basicsize = sizeof(XListObject),
	.tp_dealloc = (destructor)xlist_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "A WRITE or READ prepared once and posted many times (Conn.prepare, "
		  "Conn.prepare_strided).",
	.tp_methods = xlist_methods,
	.tp_getset = xlist_getset,
};
