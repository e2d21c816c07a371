/* tcpx_p2p.Listener: the first half of a connection made by blob exchange
 * (Session.listen); connect() with the peer's blob makes the Conn. */
#include "tp_py.h"

static void listener_close_handle(ListenerObject *o)
{
	if (!o->l)
		return;
	tp_api.listener_destroy(o->l);
	o->l = NULL;
	tp_list_del(&o->link);
}

static PyObject *listener_close(ListenerObject *self, PyObject *unused)
{
	if (self->busy)
		return tp_busy_error("Listener.close", "the listener");
	listener_close_handle(self);
	Py_RETURN_NONE;
}

static void listener_dealloc(ListenerObject *self)
{
	listener_close_handle(self);
	Py_DECREF(self->sess);
	PyObject_Free(self);
}

static int listener_check(ListenerObject *o)
{
	if (o->l && !o->sess->closing)
		return 0;
	PyErr_SetString(PyExc_ValueError, "the listener is closed or was used by connect()");
	return -1;
}

static PyObject *listener_get_blob(ListenerObject *self, void *unused)
{
	const void *blob;
	size_t len;
	int rc;

	if (listener_check(self))
		return NULL;
	rc = tp_api.listener_blob(self->l, &blob, &len);
	if (rc)
		return tp_py_raise(rc, "Listener.blob");
	return PyBytes_FromStringAndSize(blob, (Py_ssize_t)len);
}

static PyObject *listener_connect(ListenerObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "peer_blob", "timeout", NULL };
	PyObject *timeout = Py_None, *conn;
	tcpx_p2p_conn *c;
	Py_buffer blob;
	int ms, rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "y*|O:connect", kwlist, &blob, &timeout))
		return NULL;
	if (listener_check(self) || tp_py_timeout_ms(timeout, TCPX_P2P_TIMEOUT_DEFAULT, &ms)) {
		PyBuffer_Release(&blob);
		return NULL;
	}
	TP_ENTER(self);
	TP_ENTER(self->sess);
	Py_BEGIN_ALLOW_THREADS
	rc = tp_api.connect(self->l, blob.buf, (size_t)blob.len, ms, &c);
	Py_END_ALLOW_THREADS
	TP_LEAVE(self->sess);
	TP_LEAVE(self);
	PyBuffer_Release(&blob);
	if (rc)
		return tp_py_raise(rc, "Listener.connect");
	/* connect consumed the listener */
	self->l = NULL;
	tp_list_del(&self->link);
	conn = tp_conn_new(self->sess, c);
	if (!conn)
		tp_api.conn_destroy(c);
	return conn;
}

static PyObject *listener_exit(ListenerObject *self, PyObject *args)
{
	return listener_close(self, NULL);
}

static PyMethodDef listener_methods[] = {
	{ "connect", TP_PY_FN(listener_connect), TP_PY_KW,
	  "connect(peer_blob, timeout=None) -> Conn: both peers call it concurrently with the "
	  "other's blob; consumes the listener on success" },
	{ "close", TP_PY_FN(listener_close), METH_NOARGS, "close(): destroy an unused listener" },
	{ "__enter__", tp_py_enter_self, METH_NOARGS, NULL },
	{ "__exit__", TP_PY_FN(listener_exit), METH_VARARGS, NULL },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef listener_getset[] = {
	{ "blob", (getter)listener_get_blob, NULL,
	  "bytes to give the peer by your own means (at most 4 KiB)", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

PyTypeObject tp_ListenerType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "tcpx_p2p.Listener",
	.tp_basicsize = sizeof(ListenerObject),
	.tp_dealloc = (destructor)listener_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "The first half of a connection made by blob exchange (Session.listen).",
	.tp_methods = listener_methods,
	.tp_getset = listener_getset,
};
