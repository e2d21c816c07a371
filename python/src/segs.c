/* Segment lists: tcpx_p2p.Segments (one region, arrays of offsets and
 * lengths, e.g. NumPy arrays of a KV batch's block offsets) and the lists
 * of (region, offset, length) tuples that every vectored call accepts. */
#include "tp_py.h"

/* Integers from an int (a scalar), an integer buffer of one dimension
 * (NumPy arrays of any integer dtype, array.array) or a sequence. */
struct ints {
	size_t *v;
	size_t n;
	int scalar;
};

static int int_format(const char *f, int *is_signed)
{
	if (*f == '@' || *f == '=' || *f == '<')
		f++;
	if (!f[0] || f[1])
		return -1;
	if (!strchr("bBhHiIlLqQnN", *f))
		return -1;
	*is_signed = *f >= 'a';
	return 0;
}

static int ints_read(PyObject *o, const char *what, struct ints *out)
{
	PyObject *fast;
	Py_buffer b;
	Py_ssize_t i, n;
	int sgn;

	memset(out, 0, sizeof(*out));
	if (PyLong_Check(o)) {
		out->v = PyMem_Malloc(sizeof(size_t));
		if (!out->v)
			return PyErr_NoMemory(), -1;
		out->v[0] = PyLong_AsSize_t(o);
		out->n = 1;
		out->scalar = 1;
		if (out->v[0] == (size_t)-1 && PyErr_Occurred())
			goto fail;
		return 0;
	}
	if (PyObject_CheckBuffer(o)) {
		if (PyObject_GetBuffer(o, &b, PyBUF_RECORDS_RO))
			return -1;
		if (b.ndim != 1 || int_format(b.format ? b.format : "B", &sgn)) {
			PyErr_Format(PyExc_TypeError, "Segments: %s must be a 1-D array of integers "
				     "(format %s, %d dimensions)", what, b.format ? b.format : "B",
				     b.ndim);
			PyBuffer_Release(&b);
			return -1;
		}
		n = b.shape[0];
		out->v = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(size_t));
		if (!out->v) {
			PyBuffer_Release(&b);
			return PyErr_NoMemory(), -1;
		}
		for (i = 0; i < n; i++) {
			const char *p = (const char *)b.buf + i * b.strides[0];
			long long s = 0;
			unsigned long long u = 0;

			switch (b.itemsize) {
			case 1: s = sgn ? *(const int8_t *)p : 0; u = *(const uint8_t *)p; break;
			case 2: s = sgn ? *(const int16_t *)p : 0; u = *(const uint16_t *)p; break;
			case 4: s = sgn ? *(const int32_t *)p : 0; u = *(const uint32_t *)p; break;
			case 8: s = sgn ? *(const int64_t *)p : 0; u = *(const uint64_t *)p; break;
			default:
				PyBuffer_Release(&b);
				PyErr_Format(PyExc_TypeError, "Segments: %s: %zd-byte integers",
					     what, b.itemsize);
				goto fail;
			}
			if (sgn && s < 0) {
				PyBuffer_Release(&b);
				PyErr_Format(PyExc_ValueError, "Segments: %s[%zd] = %lld is negative",
					     what, i, s);
				goto fail;
			}
			out->v[i] = sgn ? (size_t)s : (size_t)u;
		}
		out->n = (size_t)n;
		PyBuffer_Release(&b);
		return 0;
	}
	fast = PySequence_Fast(o, "Segments: offsets and lengths are ints, integer arrays or "
			       "sequences of ints");
	if (!fast)
		return -1;
	n = PySequence_Fast_GET_SIZE(fast);
	out->v = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(size_t));
	if (!out->v) {
		Py_DECREF(fast);
		return PyErr_NoMemory(), -1;
	}
	for (i = 0; i < n; i++) {
		out->v[i] = PyLong_AsSize_t(PySequence_Fast_GET_ITEM(fast, i));
		if (out->v[i] == (size_t)-1 && PyErr_Occurred()) {
			Py_DECREF(fast);
			goto fail;
		}
	}
	out->n = (size_t)n;
	Py_DECREF(fast);
	return 0;
fail:
	PyMem_Free(out->v);
	out->v = NULL;
	return -1;
}

/* The region's handle and length if it can serve; else an error. */
static int region_usable(PyObject *o, int remote, int writing, ConnObject *conn,
			 const char *call, void **handle, size_t *len)
{
	if (remote) {
		RMRObject *r = (RMRObject *)o;

		if (!PyObject_TypeCheck(o, &tp_RMRType)) {
			PyErr_Format(PyExc_TypeError, "%s: remote segments need an RMR "
				     "(Conn.import_rmr), got %.100s", call, Py_TYPE(o)->tp_name);
			return -1;
		}
		if (!r->r) {
			PyErr_Format(PyExc_ValueError, "%s: the RMR is closed", call);
			return -1;
		}
		if (conn && r->conn != conn) {
			PyErr_Format(PyExc_ValueError, "%s: the RMR was imported on another "
				     "connection", call);
			return -1;
		}
		*handle = r->r;
		*len = r->len;
		return 0;
	}
	if (!PyObject_TypeCheck(o, &tp_MRType)) {
		PyErr_Format(PyExc_TypeError, "%s: local segments need an MR (Session.register), "
			     "got %.100s", call, Py_TYPE(o)->tp_name);
		return -1;
	}
	MRObject *m = (MRObject *)o;

	if (!m->mr) {
		PyErr_Format(PyExc_ValueError, "%s: the MR is closed", call);
		return -1;
	}
	if (conn && m->sess != conn->sess) {
		PyErr_Format(PyExc_ValueError, "%s: the MR belongs to another session", call);
		return -1;
	}
	if (writing && m->mem.readonly) {
		PyErr_Format(PyExc_ValueError, "%s: an MR of read-only memory cannot receive", call);
		return -1;
	}
	*handle = m->mr;
	*len = m->mem.len;
	return 0;
}

static void put_seg(void *segs, int remote, size_t i, void *h, size_t off, size_t len)
{
	if (remote)
		((tcpx_p2p_rseg *)segs)[i] = (tcpx_p2p_rseg){ h, off, len };
	else
		((tcpx_p2p_seg *)segs)[i] = (tcpx_p2p_seg){ h, off, len };
}

/* ---- Segments ------------------------------------------------------------ */

static PyObject *segments_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "region", "offsets", "lengths", NULL };
	PyObject *region, *offs_o, *lens_o;
	struct ints offs, lens;
	SegmentsObject *o = NULL;
	size_t i, rlen, n, seg_size;
	void *h;
	int remote;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO:Segments", kwlist, &region, &offs_o,
					 &lens_o))
		return NULL;
	remote = PyObject_TypeCheck(region, &tp_RMRType);
	if (region_usable(region, remote, 0, NULL, "Segments", &h, &rlen))
		return NULL;
	if (ints_read(offs_o, "offsets", &offs))
		return NULL;
	if (ints_read(lens_o, "lengths", &lens))
		goto free_offs;
	n = offs.n;
	if (!lens.scalar && lens.n != n) {
		PyErr_Format(PyExc_ValueError, "Segments: %zu offsets but %zu lengths", n, lens.n);
		goto free_lens;
	}
	seg_size = remote ? sizeof(tcpx_p2p_rseg) : sizeof(tcpx_p2p_seg);
	o = (SegmentsObject *)type->tp_alloc(type, 0);
	if (!o)
		goto free_lens;
	o->segs = PyMem_Malloc((n ? n : 1) * seg_size);
	if (!o->segs) {
		PyErr_NoMemory();
		goto fail;
	}
	for (i = 0; i < n; i++) {
		size_t len = lens.v[lens.scalar ? 0 : i], off = offs.v[i];

		if (off > rlen || len > rlen - off) {
			PyErr_Format(PyExc_ValueError, "Segments: segment %zu [%zu, +%zu) is outside "
				     "the region's %zu bytes", i, off, len, rlen);
			goto fail;
		}
		put_seg(o->segs, remote, i, h, off, len);
		o->total += len;
	}
	o->n = n;
	o->region = (RegionObject *)region;
	Py_INCREF(region);
	PyMem_Free(lens.v);
	PyMem_Free(offs.v);
	return (PyObject *)o;
fail:
	Py_CLEAR(o);
free_lens:
	PyMem_Free(lens.v);
free_offs:
	PyMem_Free(offs.v);
	return NULL;
}

static void segments_dealloc(SegmentsObject *self)
{
	PyMem_Free(self->segs);
	Py_XDECREF(self->region);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t segments_len(SegmentsObject *self)
{
	return (Py_ssize_t)self->n;
}

static PyObject *segments_get_total(SegmentsObject *self, void *unused)
{
	return PyLong_FromSize_t(self->total);
}

static PyObject *segments_get_region(SegmentsObject *self, void *unused)
{
	Py_INCREF(self->region);
	return (PyObject *)self->region;
}

static PyGetSetDef segments_getset[] = {
	{ "total", (getter)segments_get_total, NULL, "bytes in all segments", NULL },
	{ "region", (getter)segments_get_region, NULL, "the MR or RMR", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PySequenceMethods segments_as_sequence = { .sq_length = (lenfunc)segments_len };

PyTypeObject tp_SegmentsType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "tcpx_p2p.Segments",
	.tp_basicsize = sizeof(SegmentsObject),
	.tp_dealloc = (destructor)segments_dealloc,
	.tp_as_sequence = &segments_as_sequence,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "Segments(region, offsets, lengths): pieces of one MR (local) or RMR (remote).\n\n"
		  "offsets: an int, a sequence of ints or a 1-D integer array (NumPy); lengths: "
		  "an int for every segment, or one per offset.  Checked against the region "
		  "once, here; reusable for many calls.",
	.tp_new = segments_new,
	.tp_getset = segments_getset,
};

/* ---- segment sets for one call ------------------------------------------- */

static int keep_add(PyObject *list, PyObject *o)
{
	Py_ssize_t n = PyList_GET_SIZE(list);

	if (n && PyList_GET_ITEM(list, n - 1) == o)
		return 0;
	return PyList_Append(list, o);
}

static RegionObject *keep_region(PyObject *o)
{
	return PyObject_TypeCheck(o, &tp_SegmentsType) ? ((SegmentsObject *)o)->region :
							 (RegionObject *)o;
}

void tp_keep_busy(PyObject *keep, int delta)
{
	Py_ssize_t i;

	if (!keep)
		return;
	if (!PyList_Check(keep)) {
		keep_region(keep)->busy += delta;
		return;
	}
	for (i = 0; i < PyList_GET_SIZE(keep); i++)
		keep_region(PyList_GET_ITEM(keep, i))->busy += delta;
}

static int is_seg_tuple(PyObject *o)
{
	return PyTuple_Check(o) && PyTuple_GET_SIZE(o) == 3 &&
	       (PyObject_TypeCheck(PyTuple_GET_ITEM(o, 0), &tp_MRType) ||
		PyObject_TypeCheck(PyTuple_GET_ITEM(o, 0), &tp_RMRType));
}

static int segments_usable(SegmentsObject *s, int remote, int writing, ConnObject *conn,
			   const char *call)
{
	void *h;
	size_t len;

	if (!!s->region->remote != !!remote) {
		PyErr_Format(PyExc_TypeError, "%s: %s segments need %s", call,
			     remote ? "remote" : "local", remote ? "an RMR" : "an MR");
		return -1;
	}
	return region_usable((PyObject *)s->region, remote, writing, conn, call, &h, &len);
}

int tp_segset_build(PyObject *spec, int remote, int writing, ConnObject *conn, const char *call,
		    struct tp_segset *out)
{
	size_t seg_size = remote ? sizeof(tcpx_p2p_rseg) : sizeof(tcpx_p2p_seg), n = 0, k = 0;
	PyObject *fast, *item;
	Py_ssize_t i, cnt;

	memset(out, 0, sizeof(*out));
	if (PyObject_TypeCheck(spec, &tp_SegmentsType)) {
		SegmentsObject *s = (SegmentsObject *)spec;

		if (segments_usable(s, remote, writing, conn, call))
			return -1;
		out->segs = s->segs;
		out->n = s->n;
		out->total = s->total;
		out->keep = spec;
		Py_INCREF(spec);
		return 0;
	}
	if (is_seg_tuple(spec))
		fast = PyTuple_Pack(1, spec);
	else
		fast = PySequence_Fast(spec, "segments: a Segments, a (region, offset, length) "
				       "tuple, or a list of them");
	if (!fast)
		return -1;
	cnt = PySequence_Fast_GET_SIZE(fast);
	for (i = 0; i < cnt; i++) {
		item = PySequence_Fast_GET_ITEM(fast, i);
		if (PyObject_TypeCheck(item, &tp_SegmentsType)) {
			n += ((SegmentsObject *)item)->n;
		} else if (PyTuple_Check(item) && PyTuple_GET_SIZE(item) == 3) {
			n++;
		} else {
			PyErr_Format(PyExc_TypeError, "%s: segment %zd is a %.100s, not a Segments "
				     "or a (region, offset, length) tuple", call, i,
				     Py_TYPE(item)->tp_name);
			goto fail;
		}
	}
	out->owned = PyMem_Malloc((n ? n : 1) * seg_size);
	out->keep = PyList_New(0);
	if (!out->owned || !out->keep) {
		PyErr_NoMemory();
		goto fail;
	}
	out->segs = out->owned;
	for (i = 0; i < cnt; i++) {
		item = PySequence_Fast_GET_ITEM(fast, i);
		if (PyObject_TypeCheck(item, &tp_SegmentsType)) {
			SegmentsObject *s = (SegmentsObject *)item;

			if (segments_usable(s, remote, writing, conn, call) || keep_add(out->keep, item))
				goto fail;
			memcpy((char *)out->owned + k * seg_size, s->segs, s->n * seg_size);
			k += s->n;
			out->total += s->total;
		} else {
			PyObject *r = PyTuple_GET_ITEM(item, 0);
			size_t off, len, rlen;
			void *h;

			if (region_usable(r, remote, writing, conn, call, &h, &rlen))
				goto fail;
			off = PyLong_AsSize_t(PyTuple_GET_ITEM(item, 1));
			if (off == (size_t)-1 && PyErr_Occurred())
				goto fail;
			len = PyLong_AsSize_t(PyTuple_GET_ITEM(item, 2));
			if (len == (size_t)-1 && PyErr_Occurred())
				goto fail;
			if (keep_add(out->keep, r))
				goto fail;
			put_seg(out->owned, remote, k++, h, off, len);
			out->total += len;
		}
	}
	out->n = n;
	Py_DECREF(fast);
	return 0;
fail:
	Py_DECREF(fast);
	tp_segset_free(out);
	return -1;
}

void tp_segset_free(struct tp_segset *set)
{
	PyMem_Free(set->owned);
	Py_CLEAR(set->keep);
	set->owned = set->segs = NULL;
}
