/* tcpx_p2p.Session: a session, its configuration and its cascade close. */
#include <sched.h>

#include "tp_py.h"

enum cfg_type { CFG_INT, CFG_SIZE, CFG_BOOL, CFG_STR, CFG_UNPACK };

/* The keyword arguments of Session(): the fields of tcpx_p2p_config. */
static const struct cfg_field {
	const char *name;
	enum cfg_type type;
	size_t off;
} cfg_fields[] = {
	{ "gpu", CFG_INT, offsetof(tcpx_p2p_config, gpu) },
	{ "net_dev", CFG_INT, offsetof(tcpx_p2p_config, net_dev) },
	{ "num_channels", CFG_INT, offsetof(tcpx_p2p_config, num_channels) },
	{ "chunk_bytes", CFG_SIZE, offsetof(tcpx_p2p_config, chunk_bytes) },
	{ "chunks_per_channel", CFG_INT, offsetof(tcpx_p2p_config, chunks_per_channel) },
	{ "send_window", CFG_INT, offsetof(tcpx_p2p_config, send_window) },
	{ "recv_window", CFG_INT, offsetof(tcpx_p2p_config, recv_window) },
	{ "unpack", CFG_UNPACK, offsetof(tcpx_p2p_config, unpack) },
	{ "timeout_ms", CFG_INT, offsetof(tcpx_p2p_config, timeout_ms) },
	{ "plugin_path", CFG_STR, offsetof(tcpx_p2p_config, plugin_path) },
	{ "progress_thread", CFG_BOOL, offsetof(tcpx_p2p_config, progress_thread) },
	{ "mss", CFG_INT, offsetof(tcpx_p2p_config, mss) },
	{ "nics", CFG_STR, offsetof(tcpx_p2p_config, nics) },
	{ "handshake_ms", CFG_INT, offsetof(tcpx_p2p_config, handshake_ms) },
	{ "auth_token", CFG_STR, offsetof(tcpx_p2p_config, auth_token) },
	{ "peer_max_items", CFG_INT, offsetof(tcpx_p2p_config, peer_max_items) },
	{ "peer_max_segments", CFG_INT, offsetof(tcpx_p2p_config, peer_max_segments) },
	{ "peer_max_notifs", CFG_INT, offsetof(tcpx_p2p_config, peer_max_notifs) },
	{ "peer_max_ctl_bytes", CFG_SIZE, offsetof(tcpx_p2p_config, peer_max_ctl_bytes) },
	{ "require_plugin", CFG_BOOL, offsetof(tcpx_p2p_config, require_plugin) },
	{ "close_timeout_ms", CFG_INT, offsetof(tcpx_p2p_config, close_timeout_ms) },
	{ "heartbeat_ms", CFG_INT, offsetof(tcpx_p2p_config, heartbeat_ms) },
	{ "dead_after_ms", CFG_INT, offsetof(tcpx_p2p_config, dead_after_ms) },
	{ "notif_max_bytes", CFG_INT, offsetof(tcpx_p2p_config, notif_max_bytes) },
	{ "stall_ms", CFG_INT, offsetof(tcpx_p2p_config, stall_ms) },
	{ "redial_ms", CFG_INT, offsetof(tcpx_p2p_config, redial_ms) },
};

static const char *const unpack_names[] = { "kernel", "d2d", "host" };

PyObject *tp_busy_error(const char *call, const char *what)
{
	PyObject *d = PyUnicode_FromFormat("%s is in use by another thread", what);

	if (!d)
		return NULL;
	tp_py_raise_detail(TCPX_P2P_EBUSY, call, d);
	Py_DECREF(d);
	return NULL;
}

int tp_session_check(SessionObject *s)
{
	if (s->s && !s->closing)
		return 0;
	PyErr_SetString(PyExc_ValueError, "the session is closed");
	return -1;
}

static int set_field(tcpx_p2p_config *cfg, const struct cfg_field *f, PyObject *v,
		     PyObject *strings)
{
	char *p = (char *)cfg + f->off;
	PyObject *b;
	long l;
	size_t z;
	int k;

	switch (f->type) {
	case CFG_BOOL:
		k = PyObject_IsTrue(v);
		if (k < 0)
			return -1;
		*(int *)p = k;
		return 0;
	case CFG_SIZE:
		z = PyLong_AsSize_t(v);
		if (z == (size_t)-1 && PyErr_Occurred())
			return -1;
		*(size_t *)p = z;
		return 0;
	case CFG_UNPACK:
		if (PyUnicode_Check(v)) {
			for (k = 0; k < 3; k++)
				if (!PyUnicode_CompareWithASCIIString(v, unpack_names[k])) {
					*(int *)p = k;
					return 0;
				}
			PyErr_Format(PyExc_ValueError, "unpack must be 'kernel', 'd2d' or 'host', "
				     "not %R", v);
			return -1;
		}
		/* the enum's value */
		__attribute__((fallthrough));
	case CFG_INT:
		l = PyLong_AsLong(v);
		if (l == -1 && PyErr_Occurred())
			return -1;
		if (l < INT32_MIN || l > INT32_MAX) {
			PyErr_Format(PyExc_OverflowError, "%s = %ld is out of range", f->name, l);
			return -1;
		}
		*(int *)p = (int)l;
		return 0;
	case CFG_STR:
		if (v == Py_None) {
			*(const char **)p = NULL;
			return 0;
		}
		b = PyUnicode_Check(v) ? PyUnicode_AsUTF8String(v) : (Py_INCREF(v), v);
		if (!b)
			return -1;
		if (!PyBytes_Check(b)) {
			Py_DECREF(b);
			PyErr_Format(PyExc_TypeError, "%s must be a str or None", f->name);
			return -1;
		}
		if (PyList_Append(strings, b)) {
			Py_DECREF(b);
			return -1;
		}
		*(const char **)p = PyBytes_AS_STRING(b);
		Py_DECREF(b);
		return 0;
	}
	return 0;
}

static PyObject *session_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	SessionObject *s = (SessionObject *)type->tp_alloc(type, 0);

	if (!s)
		return NULL;
	s->gpu = -1;
	tp_list_init(&s->conns);
	tp_list_init(&s->mrs);
	tp_list_init(&s->rmrs);
	tp_list_init(&s->xlists);
	tp_list_init(&s->xfers);
	tp_list_init(&s->servers);
	tp_list_init(&s->listeners);
	tp_list_init(&s->orphan_xfers);
	tp_list_init(&s->orphan_mrs);
	s->handles = PyDict_New();
	if (!s->handles) {
		Py_DECREF(s);
		return NULL;
	}
	return (PyObject *)s;
}

static int session_init(SessionObject *self, PyObject *args, PyObject *kw)
{
	tcpx_p2p_config cfg;
	tcpx_p2p_session_info info = { .struct_size = sizeof(info) };
	PyObject *key, *val;
	Py_ssize_t pos = 0;
	size_t i;
	int rc;

	if (tp_py_need_lib())
		return -1;
	if (self->s || self->strings) {
		PyErr_SetString(PyExc_RuntimeError, "Session.__init__ called twice");
		return -1;
	}
	if (PyTuple_GET_SIZE(args)) {
		PyErr_SetString(PyExc_TypeError, "Session() takes keyword arguments only");
		return -1;
	}
	self->strings = PyList_New(0);
	if (!self->strings)
		return -1;
	rc = tp_api.config_init(&cfg);
	if (rc) {
		tp_py_raise(rc, "Session (TCPX_P2P_* environment)");
		return -1;
	}
	while (kw && PyDict_Next(kw, &pos, &key, &val)) {
		for (i = 0; i < sizeof(cfg_fields) / sizeof(cfg_fields[0]); i++)
			if (!PyUnicode_CompareWithASCIIString(key, cfg_fields[i].name))
				break;
		if (i == sizeof(cfg_fields) / sizeof(cfg_fields[0])) {
			PyErr_Format(PyExc_TypeError, "Session() got an unexpected keyword argument "
				     "%R", key);
			return -1;
		}
		if (set_field(&cfg, &cfg_fields[i], val, self->strings))
			return -1;
	}
	self->progress_thread = cfg.progress_thread;
	Py_BEGIN_ALLOW_THREADS
	rc = tp_api.session_create(&cfg, &self->s);
	Py_END_ALLOW_THREADS
	if (rc) {
		self->s = NULL;
		tp_py_raise(rc, "Session");
		return -1;
	}
	if (tp_api.session_query(self->s, &info) == 0)
		self->gpu = info.gpu;
	return 0;
}

/* Orphans: handles whose Python objects are gone.  closed: a conn just
 * destroyed (its transfers are final now), or NULL for all. */
struct orphan_xfer {
	struct tp_list link;
	tcpx_p2p_xfer *x;
	const void *conn; /* identity of its ConnObject; never dereferenced */
	PyObject *keep;
};

struct orphan_mr {
	struct tp_list link;
	tcpx_p2p_mr *mr;
	struct tp_mem mem;
};

void tp_session_orphan_xfer(SessionObject *s, tcpx_p2p_xfer *x, const void *conn, PyObject *keep)
{
	struct orphan_xfer *o = PyMem_RawMalloc(sizeof(*o));

	if (!o) { /* keep the regions alive for ever rather than free them under the plugin */
		Py_XINCREF(keep);
		return;
	}
	o->x = x;
	o->conn = conn;
	o->keep = keep;
	Py_XINCREF(keep);
	tp_list_add(&s->orphan_xfers, &o->link);
}

void tp_session_orphan_mr(SessionObject *s, tcpx_p2p_mr *mr, struct tp_mem *mem)
{
	struct orphan_mr *o = PyMem_RawMalloc(sizeof(*o));

	if (!o)
		return; /* leaked, never freed under the plugin */
	o->mr = mr;
	o->mem = *mem;
	memset(mem, 0, sizeof(*mem));
	tp_list_add(&s->orphan_mrs, &o->link);
}

void tp_session_reap(SessionObject *s, ConnObject *closed)
{
	struct tp_list *p, *t;
	int done, rc;

	tp_list_each(p, t, &s->orphan_xfers) {
		struct orphan_xfer *o = tp_list_entry(p, struct orphan_xfer, link);

		if (closed && o->conn != closed)
			continue;
		if (!closed && s->s) {
			rc = tp_api.test(o->x, &done);
			if (rc == 0 && !done)
				continue;
		}
		if (tp_api.xfer_release(o->x))
			continue;
		tp_list_del(&o->link);
		Py_XDECREF(o->keep);
		PyMem_RawFree(o);
	}
	tp_list_each(p, t, &s->orphan_mrs) {
		struct orphan_mr *o = tp_list_entry(p, struct orphan_mr, link);

		if (tp_api.mr_deregister(o->mr))
			continue;
		tp_list_del(&o->link);
		tp_mem_release(&o->mem);
		PyMem_RawFree(o);
	}
}

static int any_busy(struct tp_list *head, size_t link_off, size_t busy_off)
{
	struct tp_list *p;

	for (p = head->next; p != head; p = p->next)
		if (*(int *)((char *)p - link_off + busy_off))
			return 1;
	return 0;
}

#define LIST_BUSY(head, type) any_busy(head, offsetof(type, link), offsetof(type, busy))

static int session_in_use(SessionObject *s)
{
	return s->busy || LIST_BUSY(&s->conns, ConnObject) || LIST_BUSY(&s->mrs, MRObject) ||
	       LIST_BUSY(&s->rmrs, RMRObject) || LIST_BUSY(&s->xfers, XferObject) ||
	       LIST_BUSY(&s->xlists, XListObject) ||
	       LIST_BUSY(&s->servers, ServerObject) || LIST_BUSY(&s->listeners, ListenerObject);
}

/* Release everything of the session in the order the C API requires,
 * then the session.  Returns the session_destroy result. */
static PyObject *close_hook; /* tcpx_p2p.aio.forget */

PyObject *tp_py_set_close_hook(PyObject *mod, PyObject *fn)
{
	Py_XSETREF(close_hook, Py_NewRef(fn));
	Py_RETURN_NONE;
}

static int session_close_all(SessionObject *s)
{
	struct tp_list *p, *t;
	PyObject *r;
	int rc;

	s->closing = 1;
	/* Event loops stop watching the fd before session_destroy closes it. */
	if (close_hook && Py_REFCNT(s) > 0 && !PyErr_Occurred()) {
		r = PyObject_CallOneArg(close_hook, (PyObject *)s);
		if (!r)
			PyErr_Clear();
		Py_XDECREF(r);
	}
	tp_list_each(p, t, &s->servers) {
		ServerObject *o = tp_list_entry(p, ServerObject, link);

		tp_api.server_destroy(o->srv);
		o->srv = NULL;
		tp_list_del(&o->link);
	}
	tp_list_each(p, t, &s->listeners) {
		ListenerObject *o = tp_list_entry(p, ListenerObject, link);

		tp_api.listener_destroy(o->l);
		o->l = NULL;
		tp_list_del(&o->link);
	}
	/* Each close lets the GIL go: take the first conn afresh every time. */
	while (!tp_list_empty(&s->conns))
		tp_conn_close_handle(tp_list_entry(s->conns.next, ConnObject, link));
	tp_xfer_finalize_all(s);
	tp_session_reap(s, NULL);
	tp_list_each(p, t, &s->rmrs)
		tp_rmr_close_handle(tp_list_entry(p, RMRObject, link));
	tp_list_each(p, t, &s->mrs)
		tp_mr_close_handle(tp_list_entry(p, MRObject, link), 0);
	Py_BEGIN_ALLOW_THREADS
	rc = tp_api.session_destroy(s->s);
	Py_END_ALLOW_THREADS
	if (rc == 0)
		s->s = NULL;
	s->closing = 0;
	return rc;
}

static PyObject *session_close(SessionObject *self, PyObject *unused)
{
	int rc;

	if (!self->s)
		Py_RETURN_NONE;
	if (session_in_use(self))
		return tp_busy_error("Session.close", "the session or one of its objects");
	rc = session_close_all(self);
	if (rc)
		return tp_py_raise(rc, "Session.close");
	Py_RETURN_NONE;
}

static void session_dealloc(SessionObject *self)
{
	/* Every conn, region and xfer holds the session: only orphans remain. */
	if (self->s)
		session_close_all(self);
	Py_XDECREF(self->strings);
	Py_XDECREF(self->handles);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *session_enter(PyObject *self, PyObject *unused)
{
	Py_INCREF(self);
	return self;
}

static PyObject *session_exit(SessionObject *self, PyObject *args)
{
	return session_close(self, NULL);
}

static PyObject *session_query(SessionObject *self, PyObject *unused)
{
	tcpx_p2p_session_info info = { .struct_size = sizeof(info) };
	PyObject *nics, *d;
	int rc, i;

	if (tp_session_check(self))
		return NULL;
	rc = tp_api.session_query(self->s, &info);
	if (rc)
		return tp_py_raise(rc, "Session.query");
	nics = PyList_New(info.nnics);
	if (!nics)
		return NULL;
	for (i = 0; i < info.nnics; i++) {
		PyObject *t = Py_BuildValue("(is)", info.nic[i], info.nic_name[i] ? info.nic_name[i] : "");

		if (!t) {
			Py_DECREF(nics);
			return NULL;
		}
		PyList_SET_ITEM(nics, i, t);
	}
	d = Py_BuildValue("{s:s,s:s,s:i,s:i,s:i,s:s,s:N,s:n,s:O,s:s,s:i,s:i,s:i,s:K}",
			  "plugin_path", info.plugin_path, "plugin_name", info.plugin_name,
			  "plugin_abi", info.plugin_abi, "net_dev", info.net_dev, "gpu", info.gpu,
			  "unpack",
			  info.unpack >= 0 && info.unpack < 3 ? unpack_names[info.unpack] : "?",
			  "nics", nics, "chunk_bytes", (Py_ssize_t)info.chunk_bytes,
			  "plugin_fallback", info.plugin_fallback ? Py_True : Py_False,
			  "plugin_tried", info.plugin_tried ? info.plugin_tried : "",
			  "send_window", info.send_window, "recv_window", info.recv_window,
			  "conns_closing", info.conns_closing,
			  "unclean_closes", (unsigned long long)info.unclean_closes);
	return d;
}

static PyObject *session_register(SessionObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "obj", "pin", NULL };
	struct tp_mem m;
	PyObject *obj, *mr;
	int pin = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$p:register", kwlist, &obj, &pin))
		return NULL;
	if (tp_session_check(self) || tp_mem_from_object(obj, &m))
		return NULL;
	mr = tp_mr_new(self, &m, pin);
	if (!mr)
		tp_mem_release(&m);
	return mr;
}

static PyObject *session_register_ptr(SessionObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "ptr", "length", "cuda", "owner", "readonly", "pin", NULL };
	unsigned long long ptr;
	Py_ssize_t len;
	int cuda = 0, readonly = 0, pin = 0;
	PyObject *owner = Py_None, *mr;
	struct tp_mem m = { 0 };

	if (!PyArg_ParseTupleAndKeywords(args, kw, "Kn|$pOpp:register_ptr", kwlist, &ptr, &len,
					 &cuda, &owner, &readonly, &pin))
		return NULL;
	if (tp_session_check(self))
		return NULL;
	if (!ptr || len <= 0) {
		PyErr_SetString(PyExc_ValueError, "register_ptr: ptr must be non-zero and length > 0");
		return NULL;
	}
	m.ptr = (void *)(uintptr_t)ptr;
	m.len = (size_t)len;
	m.cuda = cuda;
	m.readonly = readonly;
	m.device = -1;
	m.kind = TP_MEM_REF;
	m.owner = owner;
	Py_INCREF(owner);
	mr = tp_mr_new(self, &m, pin);
	if (!mr)
		tp_mem_release(&m);
	return mr;
}

static PyObject *session_server(SessionObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "bind", "port", NULL };
	const char *bind = NULL;
	int port = 0, rc;
	tcpx_p2p_server *srv;
	ServerObject *o;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|zi:server", kwlist, &bind, &port))
		return NULL;
	if (tp_session_check(self))
		return NULL;
	if (port < 0 || port > 65535) {
		PyErr_SetString(PyExc_ValueError, "port must be 0..65535");
		return NULL;
	}
	TP_ENTER(self);
	Py_BEGIN_ALLOW_THREADS
	rc = tp_api.server_create(self->s, bind, (uint16_t)port, &srv);
	Py_END_ALLOW_THREADS
	TP_LEAVE(self);
	if (rc)
		return tp_py_raise(rc, "Session.server");
	o = PyObject_New(ServerObject, &tp_ServerType);
	if (!o) {
		tp_api.server_destroy(srv);
		return NULL;
	}
	o->sess = self;
	Py_INCREF(self);
	o->srv = srv;
	o->busy = 0;
	tp_list_add(&self->servers, &o->link);
	return (PyObject *)o;
}

static PyObject *session_dial(SessionObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "host", "port", "timeout", NULL };
	const char *host;
	int port, ms, rc;
	PyObject *timeout = Py_None, *conn;
	tcpx_p2p_conn *c;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "si|O:dial", kwlist, &host, &port, &timeout))
		return NULL;
	if (tp_session_check(self) || tp_py_timeout_ms(timeout, TCPX_P2P_TIMEOUT_DEFAULT, &ms))
		return NULL;
	if (port <= 0 || port > 65535) {
		PyErr_SetString(PyExc_ValueError, "port must be 1..65535");
		return NULL;
	}
	TP_ENTER(self);
	Py_BEGIN_ALLOW_THREADS
	rc = tp_api.dial(self->s, host, (uint16_t)port, ms, &c);
	Py_END_ALLOW_THREADS
	TP_LEAVE(self);
	if (rc)
		return tp_py_raise(rc, "Session.dial");
	conn = tp_conn_new(self, c);
	if (!conn)
		tp_api.conn_destroy(c);
	return conn;
}

static PyObject *session_listen(SessionObject *self, PyObject *unused)
{
	tcpx_p2p_listener *l;
	ListenerObject *o;
	int rc;

	if (tp_session_check(self))
		return NULL;
	TP_ENTER(self);
	Py_BEGIN_ALLOW_THREADS
	rc = tp_api.listen(self->s, &l);
	Py_END_ALLOW_THREADS
	TP_LEAVE(self);
	if (rc)
		return tp_py_raise(rc, "Session.listen");
	o = PyObject_New(ListenerObject, &tp_ListenerType);
	if (!o) {
		tp_api.listener_destroy(l);
		return NULL;
	}
	o->sess = self;
	Py_INCREF(self);
	o->l = l;
	o->busy = 0;
	tp_list_add(&self->listeners, &o->link);
	return (PyObject *)o;
}

/* set_node_id(node_id): a str (or None) for tcpx_p2p_session_set_node_id. */
static PyObject *session_set_node_id(SessionObject *self, PyObject *arg)
{
	const char *id = NULL;
	int rc;

	if (arg != Py_None && !(id = PyUnicode_AsUTF8(arg)))
		return NULL;
	if (tp_session_check(self))
		return NULL;
	rc = tp_api.session_set_node_id(self->s, id);
	if (rc)
		return tp_py_raise(rc, "Session.set_node_id");
	Py_RETURN_NONE;
}

static PyObject *session_progress(SessionObject *self, PyObject *unused)
{
	int rc;

	if (tp_session_check(self))
		return NULL;
	TP_ENTER(self);
	Py_BEGIN_ALLOW_THREADS
	rc = tp_api.session_progress(self->s);
	Py_END_ALLOW_THREADS
	TP_LEAVE(self);
	if (rc)
		return tp_py_raise(rc, "Session.progress");
	if (!tp_list_empty(&self->orphan_xfers) || !tp_list_empty(&self->orphan_mrs))
		tp_session_reap(self, NULL);
	Py_RETURN_NONE;
}

static PyObject *session_fileno(SessionObject *self, PyObject *unused)
{
	int fd, rc;

	if (tp_session_check(self))
		return NULL;
	rc = tp_api.session_fd(self->s, &fd);
	if (rc)
		return tp_py_raise(rc, "Session.fileno");
	self->watched = 1;
	return PyLong_FromLong(fd);
}

/* Take the session's ended transfers: each one's result is taken (its
 * handle released), as wait() would, and its Xfer returned.  An Xfer that
 * another thread is using (wait, cancel …) is left to that thread, which
 * tells the event loops when it lets go (tp_xfer_let_go); a transfer whose
 * Xfer is gone (released with its conn or session) is skipped. */
static PyObject *session_completions(SessionObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "max", NULL };
	tcpx_p2p_completion *out;
	PyObject *list;
	int max = 256, n = 0, rc, i;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|i:completions", kwlist, &max))
		return NULL;
	if (tp_session_check(self))
		return NULL;
	if (max < 1 || max > 65536) {
		PyErr_SetString(PyExc_ValueError, "max must be 1..65536");
		return NULL;
	}
	out = PyMem_RawMalloc((size_t)max * sizeof(*out));
	if (!out)
		return PyErr_NoMemory();
	TP_ENTER(self);
	Py_BEGIN_ALLOW_THREADS
	rc = tp_api.completions(self->s, out, max, &n);
	Py_END_ALLOW_THREADS
	TP_LEAVE(self);
	if (rc) {
		PyMem_RawFree(out);
		return tp_py_raise(rc, "Session.completions");
	}
	list = PyList_New(0);
	for (i = 0; list && i < n; i++) {
		XferObject *x = tp_xfer_of_handle(self, out[i].xfer);
		tcpx_p2p_xfer_info info = { .struct_size = sizeof(info) };
		int st, done = 0;

		if (!x || x->busy || x->status != 1)
			continue;
		/* The handle may have been released by another thread's wait
		 * while this call ran, and its address reused by a new transfer:
		 * only a transfer that has ended is taken, with its own result
		 * and detail (as wait() reports them), never the entry's. */
		if (tp_api.xfer_query(x->x, &info) || !info.done)
			continue;
		st = tp_api.test(x->x, &done);
		tp_xfer_take_result(x, st);
		if (PyList_Append(list, (PyObject *)x))
			Py_CLEAR(list);
	}
	PyMem_RawFree(out);
	if (!tp_list_empty(&self->orphan_xfers) || !tp_list_empty(&self->orphan_mrs))
		tp_session_reap(self, NULL);
	return list;
}

static ConnObject *conn_of(SessionObject *s, tcpx_p2p_conn *c)
{
	struct tp_list *p;

	for (p = s->conns.next; p != &s->conns; p = p->next) {
		ConnObject *o = tp_list_entry(p, ConnObject, link);

		if (o->c == c)
			return o;
	}
	return NULL;
}

/* A notification longer than tcpx_p2p_notif's TCPX_P2P_NOTIF_MAX, taken
 * with tcpx_p2p_notif_take into a buffer grown to its length. */
struct long_note {
	tcpx_p2p_conn *conn;
	unsigned char *buf;
	size_t cap, len;
	int got;
};

/* Up to max short notifications, then, with room left, the oldest one
 * whatever its length (notif_poll leaves a long one, and its connection's
 * later ones, for notif_take; > 0 says some wait): each connection's order
 * is kept.  Runs without the GIL. */
static int poll_mixed(tcpx_p2p_session *s, tcpx_p2p_notif *out, int max, int *n,
		      struct long_note *ln)
{
	tcpx_p2p_notif_buf nb = { .struct_size = sizeof(nb) };
	unsigned char *p;
	int rc = tp_api.notif_poll(s, out, max, n);

	if (rc < 0)
		return rc;
	if (*n == max)
		return 0;
	if (!ln->buf) { /* never NULL: a bytes object, even of length 0 */
		ln->buf = PyMem_RawMalloc(64 << 10);
		if (!ln->buf)
			return TCPX_P2P_ENOMEM;
		ln->cap = 64 << 10;
	}
	for (;;) {
		nb.buf = ln->buf;
		nb.cap = ln->cap;
		nb.len = 0;
		rc = tp_api.notif_take(s, &nb, &ln->got);
		if (rc != TCPX_P2P_EINVAL || nb.len <= ln->cap)
			break;
		p = PyMem_RawRealloc(ln->buf, nb.len);
		if (!p)
			return TCPX_P2P_ENOMEM;
		ln->buf = p;
		ln->cap = nb.len;
	}
	if (!rc && ln->got) {
		ln->conn = nb.conn;
		ln->len = nb.len;
	}
	return rc;
}

/* Poll until a notification is there or `until` (monotonic s) passes,
 * spinning, then yielding the CPU between empty polls as tcpx_perf does.
 * Runs without the GIL. */
static int poll_until(tcpx_p2p_session *s, tcpx_p2p_notif *out, int max, int *n,
		      struct long_note *ln, double until)
{
	long empty = 0;
	int rc;

	for (;;) {
		rc = poll_mixed(s, out, max, n, ln);
		if (rc || *n > 0 || ln->got)
			return rc;
		if (++empty > 64)
			sched_yield();
		if ((empty & 63) == 0 && tp_py_now() >= until)
			return 0;
	}
}

static PyObject *session_notif_poll(SessionObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "max", "timeout", NULL };
	PyObject *timeout = NULL, *list;
	tcpx_p2p_notif *out;
	struct long_note ln = { 0 };
	double deadline, until;
	int max = 16, n = 0, rc, i, ms;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|iO:notif_poll", kwlist, &max, &timeout))
		return NULL;
	if (tp_session_check(self) || tp_py_timeout_ms(timeout, 0, &ms))
		return NULL;
	if (timeout == Py_None)
		ms = -1;
	if (max < 1 || max > 4096) {
		PyErr_SetString(PyExc_ValueError, "max must be 1..4096");
		return NULL;
	}
	out = PyMem_RawMalloc((size_t)max * sizeof(*out));
	if (!out)
		return PyErr_NoMemory();
	deadline = tp_py_now() + ms * 1e-3;
	TP_ENTER(self);
	for (;;) {
		Py_BEGIN_ALLOW_THREADS
		if (ms == 0) {
			rc = poll_mixed(self->s, out, max, &n, &ln);
		} else {
			until = tp_py_now() + 0.05;
			rc = poll_until(self->s, out, max, &n, &ln,
					ms < 0 || until < deadline ? until : deadline);
		}
		Py_END_ALLOW_THREADS
		if (rc || n > 0 || ln.got || ms == 0 || (ms > 0 && tp_py_now() >= deadline))
			break;
		if (PyErr_CheckSignals()) {
			TP_LEAVE(self);
			PyMem_RawFree(ln.buf);
			PyMem_RawFree(out);
			return NULL;
		}
	}
	TP_LEAVE(self);
	if (rc) {
		PyMem_RawFree(ln.buf);
		PyMem_RawFree(out);
		return tp_py_raise(rc, "Session.notif_poll");
	}
	list = PyList_New(n + ln.got);
	if (list && ln.got) {
		ConnObject *c = conn_of(self, ln.conn);
		PyObject *t = Py_BuildValue("(Oy#)", c ? (PyObject *)c : Py_None, ln.buf,
					    (Py_ssize_t)ln.len);

		if (t)
			PyList_SET_ITEM(list, n, t);
		else
			Py_CLEAR(list);
	}
	PyMem_RawFree(ln.buf);
	for (i = 0; list && i < n; i++) {
		ConnObject *c = conn_of(self, out[i].conn);
		PyObject *t = Py_BuildValue("(Oy#)", c ? (PyObject *)c : Py_None, out[i].msg,
					    (Py_ssize_t)out[i].len);

		if (!t) {
			Py_CLEAR(list);
			break;
		}
		PyList_SET_ITEM(list, i, t);
	}
	PyMem_RawFree(out);
	return list;
}

static PyObject *session_get_closed(SessionObject *self, void *unused)
{
	return PyBool_FromLong(self->s == NULL);
}

static PyObject *session_get_gpu(SessionObject *self, void *unused)
{
	return PyLong_FromLong(self->gpu);
}

static PyObject *session_get_progress_thread(SessionObject *self, void *unused)
{
	return PyBool_FromLong(self->progress_thread);
}

static PyObject *session_stats(SessionObject *self, PyObject *unused)
{
	if (tp_session_check(self))
		return NULL;
	return tp_py_stats(self->s, 0, "Session.stats");
}

static PyMethodDef session_methods[] = {
	{ "close", (PyCFunction)session_close, METH_NOARGS,
	  "close(): close every server, listener and connection of the session (cancelling what "
	  "is pending), release its transfers and regions, then the session. Raises Busy while "
	  "another thread is inside a call on any of them." },
	{ "set_node_id", (PyCFunction)session_set_node_id, METH_O,
	  "set_node_id(node_id): this session's stable identity (1..31 printable ASCII bytes, "
	  "the same for every incarnation of it; None or '' for none), carried in its blobs: a "
	  "peer that holds a connection from an earlier incarnation (same node id, another "
	  "epoch) fails it with PeerRestarted when this one connects, in any role "
	  "(tcpx_p2p_session_set_node_id). Raises InvalidArgument for a bad one" },
	{ "__enter__", session_enter, METH_NOARGS, NULL },
	{ "__exit__", (PyCFunction)session_exit, METH_VARARGS, NULL },
	{ "query", (PyCFunction)session_query, METH_NOARGS,
	  "query() -> dict: plugin_path, plugin_name, plugin_abi, net_dev, gpu, unpack, nics "
	  "[(index, name)], chunk_bytes" },
	{ "stats", (PyCFunction)session_stats, METH_NOARGS,
	  "stats() -> dict: the counters of every connection the session has had "
	  "(tcpx_p2p_session_stats; docs/api.md, \"Statistics\")" },
	{ "register", (PyCFunction)(void (*)(void))session_register, METH_VARARGS | METH_KEYWORDS,
	  "register(obj, *, pin=False) -> MR: register the memory of obj (buffer protocol, "
	  "__cuda_array_interface__ or __dlpack__); obj is kept alive until the MR is closed" },
	{ "register_ptr", (PyCFunction)(void (*)(void))session_register_ptr,
	  METH_VARARGS | METH_KEYWORDS,
	  "register_ptr(ptr, length, *, cuda=False, owner=None, readonly=False, pin=False) -> MR: "
	  "register raw memory; owner is kept alive until the MR is closed" },
	{ "server", (PyCFunction)(void (*)(void))session_server, METH_VARARGS | METH_KEYWORDS,
	  "server(bind=None, port=0) -> Server: listen for peers that dial" },
	{ "dial", (PyCFunction)(void (*)(void))session_dial, METH_VARARGS | METH_KEYWORDS,
	  "dial(host, port, timeout=None) -> Conn: connect to a Server (timeout in seconds; "
	  "None: the session's timeout_ms)" },
	{ "listen", (PyCFunction)session_listen, METH_NOARGS,
	  "listen() -> Listener: the first half of a connection made by blob exchange" },
	{ "progress", (PyCFunction)session_progress, METH_NOARGS,
	  "progress(): drive every connection of the session once" },
	{ "fileno", (PyCFunction)session_fileno, METH_NOARGS,
	  "fileno() -> int: the session's completion fd (tcpx_p2p_session_fd): readable once a "
	  "transfer ended or a notification arrived since the last completions(); for "
	  "selectors, epoll or asyncio's add_reader.  Never read or close it." },
	{ "completions", (PyCFunction)(void (*)(void))session_completions,
	  METH_VARARGS | METH_KEYWORDS,
	  "completions(max=256) -> [Xfer]: the transfers that ended since the last call, "
	  "oldest first, their results taken (done is True; wait(0) returns or raises at once); "
	  "clears fileno(); drives the session once (unless a progress thread does)." },
	{ "notif_poll", (PyCFunction)(void (*)(void))session_notif_poll,
	  METH_VARARGS | METH_KEYWORDS,
	  "notif_poll(max=16, timeout=0) -> [(conn, bytes)]: delivered notifications, oldest "
	  "first, driving the session; timeout 0 polls once (never blocks), else waits up to "
	  "timeout seconds (None: no limit) for one, GIL released; [] if none came.  An empty "
	  "message (b'') is the library's own: that conn failed (conn.progress() raises its "
	  "error)" },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef session_getset[] = {
	{ "closed", (getter)session_get_closed, NULL, "True once closed", NULL },
	{ "gpu", (getter)session_get_gpu, NULL, "the session's CUDA device, -1 for host only", NULL },
	{ "progress_thread", (getter)session_get_progress_thread, NULL,
	  "True when a thread of the library drives the session", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

PyTypeObject tp_SessionType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "tcpx_p2p.Session",
	.tp_basicsize = sizeof(SessionObject),
	.tp_dealloc = (destructor)session_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "Session(**config): one process and one GPU (gpu=-1: host memory only).\n\n"
		  "Keyword arguments set fields of tcpx_p2p_config (gpu, net_dev, num_channels, "
		  "chunk_bytes, chunks_per_channel, send_window, recv_window, unpack, timeout_ms, "
		  "plugin_path, progress_thread, mss, nics, handshake_ms, auth_token, peer_max_items, "
		  "peer_max_segments, peer_max_notifs, peer_max_ctl_bytes, require_plugin, "
		  "close_timeout_ms, heartbeat_ms, dead_after_ms, notif_max_bytes, stall_ms, redial_ms); "
		  "the others keep their defaults and TCPX_P2P_* environment values.",
	.tp_methods = session_methods,
	.tp_getset = session_getset,
	.tp_init = (initproc)session_init,
	.tp_new = session_new,
};
