/* Session.stats() and Conn.stats(): the library's counters as a dict
 * (docs/python.md, "Statistics"). */
#include "tp_py.h"

static const char *const err_names[TCPX_P2P_STATS_NERR] = {
	"other", "EINVAL", "ENOMEM", "ENOTSUP", "ENOPLUGIN", "EPLUGIN", "ENET", "ETIMEDOUT",
	"EAGAIN", "ECUDA", "EPROTO", "EBUSY", "ECLOSED", "EINTERNAL", "E14", "E15",
};

static PyObject *failed_by(const tcpx_p2p_stats *st)
{
	PyObject *d = PyDict_New(), *v;
	int i;

	if (!d)
		return NULL;
	for (i = 0; i < TCPX_P2P_STATS_NERR; i++) {
		if (!st->failed_by[i])
			continue;
		v = PyLong_FromUnsignedLongLong(st->failed_by[i]);
		if (!v || PyDict_SetItemString(d, err_names[i], v)) {
			Py_XDECREF(v);
			Py_DECREF(d);
			return NULL;
		}
		Py_DECREF(v);
	}
	return d;
}

/* A count per data channel: a list of TCPX_P2P_MAX_CHANNELS ints. */
static PyObject *by_channel(const uint64_t *n)
{
	PyObject *l = PyList_New(TCPX_P2P_MAX_CHANNELS), *v;

	for (Py_ssize_t i = 0; l && i < TCPX_P2P_MAX_CHANNELS; i++) {
		v = PyLong_FromUnsignedLongLong(n[i]);
		if (!v) {
			Py_DECREF(l);
			return NULL;
		}
		PyList_SET_ITEM(l, i, v);
	}
	return l;
}

PyObject *tp_py_stats(void *obj, int conn, const char *call)
{
	tcpx_p2p_stats st = { .struct_size = sizeof(st) };
	PyObject *fb, *out_ch, *in_ch;
	int rc;

	/* With the GIL: the call only takes each connection's lock briefly,
	 * and the handle cannot be closed under it meanwhile. */
	rc = conn ? tp_api.conn_stats(obj, &st) : tp_api.session_stats(obj, &st);
	if (rc)
		return tp_py_raise(rc, call);
	fb = failed_by(&st);
	if (!fb)
		return NULL;
	out_ch = by_channel(st.chunks_out_by_channel);
	in_ch = out_ch ? by_channel(st.chunks_in_by_channel) : NULL;
	if (!out_ch || !in_ch) {
		Py_XDECREF(fb);
		Py_XDECREF(out_ch);
		Py_XDECREF(in_ch);
		return NULL;
	}
	return Py_BuildValue("{s:i,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:N,s:K,s:K,s:K,s:K,"
			     "s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:N,s:N,s:K,s:K,s:K}",
			     "conns", st.conns, "xfers_out", st.xfers_out, "xfers_in", st.xfers_in,
			     "bytes_out", st.bytes_out, "bytes_in", st.bytes_in,
			     "chunks_out", st.chunks_out, "chunks_in", st.chunks_in,
			     "notifs_out", st.notifs_out, "notifs_in", st.notifs_in,
			     "failed", st.failed, "failed_by", fb, "stalls", st.stalls,
			     "heartbeats_sent", st.heartbeats_sent,
			     "heartbeats_recv", st.heartbeats_recv,
			     "heartbeats_missed", st.heartbeats_missed,
			     "windows_full", st.windows_full, "req_samples", st.req_samples,
			     "req_ns_p50", st.req_ns_p50, "req_ns_p90", st.req_ns_p90,
			     "req_ns_p99", st.req_ns_p99, "xfer_samples", st.xfer_samples,
			     "xfer_ns_p50", st.xfer_ns_p50, "xfer_ns_p90", st.xfer_ns_p90,
			     "xfer_ns_p99", st.xfer_ns_p99, "chunks_out_by_channel", out_ch,
			     "chunks_in_by_channel", in_ch, "notifs_dropped", st.notifs_dropped,
			     "chunks_in_ahead", st.chunks_in_ahead, "in_stalls", st.in_stalls);
}
