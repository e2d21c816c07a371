/* tcpx_p2p.Server: a TCP rendezvous point that accepts one Conn per peer
 * that dials (Session.server). */
#include "tp_py.h"

static void server_close_handle(ServerObject *o)
{
	if (!o->srv)
		return;
	tp_api.server_destroy(o->srv);
	o->srv = NULL;
	tp_list_del(&o->link);
}

static PyObject *server_close(ServerObject *self, PyObject *unused)
{
	if (self->busy)
		return tp_busy_error("Server.close", "the server");
	server_close_handle(self);
	Py_RETURN_NONE;
}

static void server_dealloc(ServerObject *self)
{
	server_close_handle(self);
	Py_DECREF(self->sess);
	PyObject_Free(self);
}

static int server_check(ServerObject *o)
{
	if (o->srv && !o->sess->closing)
		return 0;
	PyErr_SetString(PyExc_ValueError, "the server is closed");
	return -1;
}

static PyObject *server_accept(ServerObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "timeout", NULL };
	PyObject *timeout = Py_None, *conn;
	tcpx_p2p_conn *c;
	int ms, rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:accept", kwlist, &timeout))
		return NULL;
	if (server_check(self) || tp_py_timeout_ms(timeout, TCPX_P2P_TIMEOUT_DEFAULT, &ms))
		return NULL;
	TP_ENTER(self);
	TP_ENTER(self->sess);
	Py_BEGIN_ALLOW_THREADS
	rc = tp_api.server_accept(self->srv, ms, &c);
	Py_END_ALLOW_THREADS
	TP_LEAVE(self->sess);
	TP_LEAVE(self);
	if (rc)
		return tp_py_raise(rc, "Server.accept");
	conn = tp_conn_new(self->sess, c);
	if (!conn)
		tp_api.conn_destroy(c);
	return conn;
}

static PyObject *server_get_port(ServerObject *self, void *unused)
{
	uint16_t port;
	int rc;

	if (server_check(self))
		return NULL;
	rc = tp_api.server_port(self->srv, &port);
	if (rc)
		return tp_py_raise(rc, "Server.port");
	return PyLong_FromLong(port);
}

static PyObject *server_exit(ServerObject *self, PyObject *args)
{
	return server_close(self, NULL);
}

static PyMethodDef server_methods[] = {
	{ "accept", TP_PY_FN(server_accept), TP_PY_KW,
	  "accept(timeout=None) -> Conn: accept one peer that dials (timeout in seconds; None: "
	  "the session's timeout_ms)" },
	{ "close", TP_PY_FN(server_close), METH_NOARGS,
	  "close(): stop listening; accepted conns stay" },
	{ "__enter__", tp_py_enter_self, METH_NOARGS, NULL },
	{ "__exit__", TP_PY_FN(server_exit), METH_VARARGS, NULL },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef server_getset[] = {
	{ "port", (getter)server_get_port, NULL, "the TCP port the server listens on", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

PyTypeObject tp_ServerType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "tcpx_p2p.Server",
	.tp_basicsize = sizeof(ServerObject),
	.tp_dealloc = (destructor)server_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "A TCP rendezvous point (Session.server): accept() one Conn per peer.",
	.tp_methods = server_methods,
	.tp_getset = server_getset,
};

