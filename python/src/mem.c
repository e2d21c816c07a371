/* Memory from Python objects, and tcpx_p2p.MR / tcpx_p2p.RMR.
 *
 * Host memory comes through the buffer protocol (bytearray, memoryview,
 * mmap, NumPy), device memory through __cuda_array_interface__ (PyTorch,
 * CuPy, Numba) or DLPack (__dlpack__: JAX, PyTorch on the CPU too); no
 * framework is imported.  The object that owns the memory is kept until
 * the region is deregistered: a Py_buffer export (which also stops a
 * bytearray from resizing or an mmap from closing), the DLPack managed
 * tensor, or a reference to the object. */
#include "tp_py.h"

/* DLPack's ABI (dlpack.h, v0.x "dltensor" capsules), as much as is read. */
enum { DL_CPU = 1, DL_CUDA = 2, DL_CUDA_HOST = 3 };
typedef struct {
	int32_t device_type;
	int32_t device_id;
} DLDevice;
typedef struct {
	uint8_t code;
	uint8_t bits;
	uint16_t lanes;
} DLDataType;
typedef struct {
	void *data;
	DLDevice device;
	int32_t ndim;
	DLDataType dtype;
	int64_t *shape;
	int64_t *strides;
	uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
	DLTensor dl_tensor;
	void *manager_ctx;
	void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

static PyObject *not_contiguous(PyObject *obj)
{
	return PyErr_Format(PyExc_ValueError, "tcpx_p2p: %.100s memory is not contiguous: "
			    "register a contiguous copy (e.g. numpy.ascontiguousarray, "
			    "tensor.contiguous()) or each contiguous piece",
			    Py_TYPE(obj)->tp_name);
}

static PyObject *empty_memory(PyObject *obj)
{
	return PyErr_Format(PyExc_ValueError, "tcpx_p2p: %.100s holds no bytes: nothing to "
			    "register", Py_TYPE(obj)->tp_name);
}

/* Whether n-dimensional strides (in units of `unit`) describe a C- or
 * Fortran-ordered array without gaps. */
static int compact(int ndim, const int64_t *shape, const int64_t *strides, int64_t unit)
{
	int64_t want = unit;
	int d, ok = 1;

	for (d = ndim - 1; d >= 0 && ok; d--) {
		if (shape[d] != 1 && strides[d] != want)
			ok = 0;
		want *= shape[d];
	}
	if (ok)
		return 1;
	want = unit;
	for (d = 0; d < ndim; d++) {
		if (shape[d] != 1 && strides[d] != want)
			return 0;
		want *= shape[d];
	}
	return 1;
}

static int from_cai(PyObject *obj, PyObject *cai, struct tp_mem *m)
{
	PyObject *data, *shape, *typestr, *strides;
	int64_t dims[32], st[32], n = 1;
	Py_ssize_t nd, d;
	unsigned long long ptr;
	long itemsize;
	int ro;

	if (!PyDict_Check(cai)) {
		PyErr_SetString(PyExc_TypeError, "__cuda_array_interface__ is not a dict");
		return -1;
	}
	data = PyDict_GetItemString(cai, "data");
	shape = PyDict_GetItemString(cai, "shape");
	typestr = PyDict_GetItemString(cai, "typestr");
	strides = PyDict_GetItemString(cai, "strides");
	if (!data || !shape || !typestr || !PyTuple_Check(shape) || !PyUnicode_Check(typestr) ||
	    !PyArg_ParseTuple(data, "Kp", &ptr, &ro)) {
		if (!PyErr_Occurred())
			PyErr_SetString(PyExc_TypeError, "malformed __cuda_array_interface__");
		return -1;
	}
	itemsize = strtol(PyUnicode_AsUTF8(typestr) + 2, NULL, 10);
	nd = PyTuple_GET_SIZE(shape);
	if (itemsize <= 0 || nd > 32) {
		PyErr_SetString(PyExc_ValueError, "unsupported __cuda_array_interface__ layout");
		return -1;
	}
	for (d = 0; d < nd; d++) {
		dims[d] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, d));
		if (dims[d] == -1 && PyErr_Occurred())
			return -1;
		n *= dims[d];
	}
	if (strides && strides != Py_None) {
		if (!PyTuple_Check(strides) || PyTuple_GET_SIZE(strides) != nd) {
			PyErr_SetString(PyExc_TypeError, "malformed __cuda_array_interface__ strides");
			return -1;
		}
		for (d = 0; d < nd; d++) {
			st[d] = PyLong_AsLongLong(PyTuple_GET_ITEM(strides, d));
			if (st[d] == -1 && PyErr_Occurred())
				return -1;
		}
		if (!compact((int)nd, dims, st, itemsize)) {
			not_contiguous(obj);
			return -1;
		}
	}
	if (n <= 0 || !ptr) {
		empty_memory(obj);
		return -1;
	}
	m->ptr = (void *)(uintptr_t)ptr;
	m->len = (size_t)n * (size_t)itemsize;
	m->cuda = 1;
	m->readonly = ro;
	m->device = -1;
	m->kind = TP_MEM_REF;
	m->owner = obj;
	Py_INCREF(obj);
	return 0;
}

static int from_dlpack(PyObject *obj, struct tp_mem *m)
{
	PyObject *cap = PyObject_CallMethod(obj, "__dlpack__", NULL);
	DLManagedTensor *t;
	const DLTensor *dl;
	int64_t n = 1, unit;
	int d;

	if (!cap)
		return -1;
	t = PyCapsule_GetPointer(cap, "dltensor");
	if (!t) {
		Py_DECREF(cap);
		return -1;
	}
	dl = &t->dl_tensor;
	unit = ((int64_t)dl->dtype.bits * dl->dtype.lanes + 7) / 8;
	for (d = 0; d < dl->ndim; d++)
		n *= dl->shape[d];
	if (dl->device.device_type != DL_CPU && dl->device.device_type != DL_CUDA &&
	    dl->device.device_type != DL_CUDA_HOST) {
		PyErr_Format(PyExc_ValueError, "tcpx_p2p: DLPack device type %d: only CPU, CUDA "
			     "and CUDA host memory can be registered", dl->device.device_type);
		goto fail;
	}
	if (dl->strides && !compact(dl->ndim, dl->shape, dl->strides, 1)) {
		not_contiguous(obj);
		goto fail;
	}
	if (n <= 0 || unit <= 0 || !dl->data) {
		empty_memory(obj);
		goto fail;
	}
	/* The capsule is consumed: its destructor leaves the tensor to us. */
	if (PyCapsule_SetName(cap, "used_dltensor"))
		goto fail;
	Py_DECREF(cap);
	m->ptr = (char *)dl->data + dl->byte_offset;
	m->len = (size_t)n * (size_t)unit;
	m->cuda = dl->device.device_type == DL_CUDA;
	m->readonly = 0;
	m->device = m->cuda ? dl->device.device_id : -1;
	m->kind = TP_MEM_DLPACK;
	m->dlm = t;
	m->owner = obj;
	Py_INCREF(obj);
	return 0;
fail:
	Py_DECREF(cap);
	return -1;
}

int tp_mem_from_object(PyObject *obj, struct tp_mem *m)
{
	PyObject *cai;
	int rc;

	memset(m, 0, sizeof(*m));
	if (PyObject_HasAttrString(obj, "__cuda_array_interface__")) {
		cai = PyObject_GetAttrString(obj, "__cuda_array_interface__");
		if (!cai)
			return -1;
		rc = from_cai(obj, cai, m);
		Py_DECREF(cai);
		return rc;
	}
	if (PyObject_CheckBuffer(obj)) {
		if (PyObject_GetBuffer(obj, &m->view, PyBUF_FULL_RO))
			return -1;
		if (!PyBuffer_IsContiguous(&m->view, 'A')) {
			PyBuffer_Release(&m->view);
			not_contiguous(obj);
			return -1;
		}
		if (m->view.len <= 0) {
			PyBuffer_Release(&m->view);
			empty_memory(obj);
			return -1;
		}
		m->ptr = m->view.buf;
		m->len = (size_t)m->view.len;
		m->readonly = m->view.readonly;
		m->device = -1;
		m->kind = TP_MEM_BUFFER;
		return 0;
	}
	if (PyObject_HasAttrString(obj, "__dlpack__"))
		return from_dlpack(obj, m);
	PyErr_Format(PyExc_TypeError, "tcpx_p2p: cannot register %.100s: it has neither the "
		     "buffer protocol, __cuda_array_interface__ nor __dlpack__",
		     Py_TYPE(obj)->tp_name);
	return -1;
}

void tp_mem_release(struct tp_mem *m)
{
	switch (m->kind) {
	case TP_MEM_BUFFER:
		PyBuffer_Release(&m->view);
		break;
	case TP_MEM_DLPACK:
		if (((DLManagedTensor *)m->dlm)->deleter)
			((DLManagedTensor *)m->dlm)->deleter(m->dlm);
		break;
	default:
		break;
	}
	Py_CLEAR(m->owner);
	m->kind = TP_MEM_NONE;
}

/* ---- MR ------------------------------------------------------------------- */

PyObject *tp_mr_new(SessionObject *s, struct tp_mem *m, int pin)
{
	tcpx_p2p_mr_params prm = { .struct_size = sizeof(prm), .flags = pin ? TCPX_P2P_MR_PIN : 0 };
	tcpx_p2p_mr *h;
	MRObject *o;
	int rc;

	if (m->cuda && m->device >= 0 && s->gpu >= 0 && m->device != s->gpu)
		return PyErr_Format(PyExc_ValueError, "tcpx_p2p: the memory is on cuda:%d, the "
				    "session on GPU %d", m->device, s->gpu);
	TP_ENTER(s);
	Py_BEGIN_ALLOW_THREADS
	rc = tp_api.mr_register_ex(s->s, m->ptr, m->len,
				   m->cuda ? TCPX_P2P_MEM_CUDA : TCPX_P2P_MEM_HOST, &prm, &h);
	Py_END_ALLOW_THREADS
	TP_LEAVE(s);
	if (rc)
		return tp_py_raise(rc, "Session.register");
	o = PyObject_New(MRObject, &tp_MRType);
	if (!o) {
		tp_api.mr_deregister(h);
		return NULL;
	}
	o->busy = 0;
	o->remote = 0;
	o->sess = s;
	Py_INCREF(s);
	o->mr = h;
	o->mem = *m;
	memset(m, 0, sizeof(*m));
	tp_list_add(&s->mrs, &o->link);
	return (PyObject *)o;
}

/* Deregister o's region (tcpx_p2p_mr_deregister_ex with flags), then let
 * go of its memory; a nonzero return leaves both as they were. */
static int mr_close_flags(MRObject *o, int gil, unsigned flags)
{
	int rc;

	if (!o->mr)
		return 0;
	if (gil) {
		/* Off the session's list while the GIL is let go, so that a
		 * close of the session in another thread does not meet it. */
		tp_list_del(&o->link);
		Py_BEGIN_ALLOW_THREADS
		rc = tp_api.mr_deregister_ex(o->mr, flags);
		Py_END_ALLOW_THREADS
		if (rc) {
			tp_list_add(&o->sess->mrs, &o->link);
			return rc;
		}
	} else {
		rc = tp_api.mr_deregister_ex(o->mr, flags);
		if (rc)
			return rc;
		tp_list_del(&o->link);
	}
	o->mr = NULL;
	tp_mem_release(&o->mem);
	return 0;
}

int tp_mr_close_handle(MRObject *o, int gil)
{
	return mr_close_flags(o, gil, 0);
}

static PyObject *mr_close(MRObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "fail_incoming", NULL };
	int fail_incoming = 0, rc;

	if (args && !PyArg_ParseTupleAndKeywords(args, kw, "|$p:close", kwlist, &fail_incoming))
		return NULL;
	if (self->busy)
		return tp_busy_error("MR.close", "the region");
	rc = mr_close_flags(self, 1, fail_incoming ? TCPX_P2P_DEREG_FAIL_INCOMING : 0);
	if (rc)
		return tp_py_raise(rc, "MR.close");
	Py_RETURN_NONE;
}

static void mr_dealloc(MRObject *self)
{
	/* A region that a failed transfer's conn may still write into waits,
	 * with its memory, until that conn is closed. */
	if (self->mr && tp_mr_close_handle(self, 1)) {
		tp_list_del(&self->link);
		tp_session_orphan_mr(self->sess, self->mr, &self->mem);
	}
	Py_DECREF(self->sess);
	PyObject_Free(self);
}

static PyObject *mr_enter(PyObject *self, PyObject *unused)
{
	Py_INCREF(self);
	return self;
}

static PyObject *mr_exit(MRObject *self, PyObject *args)
{
	return mr_close(self, NULL, NULL);
}

static Py_ssize_t mr_len(MRObject *self)
{
	return (Py_ssize_t)self->mem.len;
}

static PyObject *mr_get_ptr(MRObject *self, void *unused)
{
	return PyLong_FromVoidPtr(self->mem.ptr);
}

static PyObject *mr_get_length(MRObject *self, void *unused)
{
	return PyLong_FromSize_t(self->mem.len);
}

static PyObject *mr_get_cuda(MRObject *self, void *unused)
{
	return PyBool_FromLong(self->mem.cuda);
}

static PyObject *mr_get_readonly(MRObject *self, void *unused)
{
	return PyBool_FromLong(self->mem.readonly);
}

static PyObject *mr_get_closed(MRObject *self, void *unused)
{
	return PyBool_FromLong(self->mr == NULL);
}

static PyObject *mr_get_obj(MRObject *self, void *unused)
{
	PyObject *o = self->mem.kind == TP_MEM_BUFFER ? self->mem.view.obj : self->mem.owner;

	if (!o)
		o = Py_None;
	Py_INCREF(o);
	return o;
}

static PyObject *mr_repr(MRObject *self)
{
	return PyUnicode_FromFormat("<tcpx_p2p.MR %s %zu bytes at %p%s%s>",
				    self->mem.cuda ? "cuda" : "host", self->mem.len, self->mem.ptr,
				    self->mem.readonly ? ", read-only" : "",
				    self->mr ? "" : ", closed");
}

static PyMethodDef mr_methods[] = {
	{ "close", (PyCFunction)(void (*)(void))mr_close, METH_VARARGS | METH_KEYWORDS,
	  "close(*, fail_incoming=False): deregister, then let go of the memory's owner; "
	  "raises Busy while a transfer uses the region.  fail_incoming=True "
	  "(tcpx_p2p_mr_deregister_ex, TCPX_P2P_DEREG_FAIL_INCOMING) fails and closes every "
	  "connection whose peer's WRITE or READ holds the region, and raises Again until "
	  "they have let go of it: call again (this side's own transfers still raise Busy)" },
	{ "__enter__", mr_enter, METH_NOARGS, NULL },
	{ "__exit__", (PyCFunction)mr_exit, METH_VARARGS, NULL },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef mr_getset[] = {
	{ "ptr", (getter)mr_get_ptr, NULL, "address of the first byte", NULL },
	{ "length", (getter)mr_get_length, NULL, "bytes registered", NULL },
	{ "cuda", (getter)mr_get_cuda, NULL, "True for device memory", NULL },
	{ "readonly", (getter)mr_get_readonly, NULL, "True when it may only be sent from", NULL },
	{ "closed", (getter)mr_get_closed, NULL, "True once deregistered", NULL },
	{ "obj", (getter)mr_get_obj, NULL, "the object whose memory this is", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PySequenceMethods mr_as_sequence = { .sq_length = (lenfunc)mr_len };

PyTypeObject tp_MRType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "tcpx_p2p.MR",
	.tp_basicsize = sizeof(MRObject),
	.tp_dealloc = (destructor)mr_dealloc,
	.tp_repr = (reprfunc)mr_repr,
	.tp_as_sequence = &mr_as_sequence,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "A registered memory region (Session.register).",
	.tp_methods = mr_methods,
	.tp_getset = mr_getset,
};

/* ---- RMR ------------------------------------------------------------------ */

void tp_rmr_close_handle(RMRObject *o)
{
	if (!o->r)
		return;
	tp_api.rmr_release(o->r);
	o->r = NULL;
	tp_list_del(&o->link);
}

static PyObject *rmr_close(RMRObject *self, PyObject *unused)
{
	if (self->busy)
		return tp_busy_error("RMR.close", "the remote region");
	tp_rmr_close_handle(self);
	Py_RETURN_NONE;
}

static void rmr_dealloc(RMRObject *self)
{
	tp_rmr_close_handle(self);
	Py_DECREF(self->conn);
	PyObject_Free(self);
}

static PyObject *rmr_exit(RMRObject *self, PyObject *args)
{
	return rmr_close(self, NULL);
}

static Py_ssize_t rmr_len(RMRObject *self)
{
	return (Py_ssize_t)self->len;
}

static PyObject *rmr_get_length(RMRObject *self, void *unused)
{
	return PyLong_FromSize_t(self->len);
}

static PyObject *rmr_get_cuda(RMRObject *self, void *unused)
{
	return PyBool_FromLong(self->mem_type == TCPX_P2P_MEM_CUDA);
}

static PyObject *rmr_get_access(RMRObject *self, void *unused)
{
	return PyLong_FromUnsignedLong(self->access);
}

static PyObject *rmr_get_closed(RMRObject *self, void *unused)
{
	return PyBool_FromLong(self->r == NULL);
}

static PyObject *rmr_get_conn(RMRObject *self, void *unused)
{
	Py_INCREF(self->conn);
	return (PyObject *)self->conn;
}

static PyMethodDef rmr_methods[] = {
	{ "close", (PyCFunction)rmr_close, METH_NOARGS,
	  "close(): release the import (transfers posted with it are unaffected)" },
	{ "__enter__", mr_enter, METH_NOARGS, NULL },
	{ "__exit__", (PyCFunction)rmr_exit, METH_VARARGS, NULL },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef rmr_getset[] = {
	{ "length", (getter)rmr_get_length, NULL, "bytes exported", NULL },
	{ "cuda", (getter)rmr_get_cuda, NULL, "True for the peer's device memory", NULL },
	{ "access", (getter)rmr_get_access, NULL, "ACCESS_READ and/or ACCESS_WRITE", NULL },
	{ "closed", (getter)rmr_get_closed, NULL, "True once released", NULL },
	{ "conn", (getter)rmr_get_conn, NULL, "the connection it was imported on", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PySequenceMethods rmr_as_sequence = { .sq_length = (lenfunc)rmr_len };

PyTypeObject tp_RMRType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "tcpx_p2p.RMR",
	.tp_basicsize = sizeof(RMRObject),
	.tp_dealloc = (destructor)rmr_dealloc,
	.tp_as_sequence = &rmr_as_sequence,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "A peer's exported region, imported on the connection to it (Conn.import_rmr).",
	.tp_methods = rmr_methods,
	.tp_getset = rmr_getset,
};
