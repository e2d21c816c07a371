"""Prometheus text exposition of the library's counters (docs/python.md).

    text = tcpx_p2p.prometheus(session.stats(), labels={"peer": "decode-3"})

Counters become ``tcpx_p2p_<name>_total``, latency percentiles gauges in
seconds with a ``quantile`` label, ``failed_by`` one counter with a
``reason`` label.  Serve the text from any HTTP handler (it is the body of a
``text/plain; version=0.0.4`` response); nothing here opens a socket.
"""

_COUNTERS = (
    ("xfers_out", "transfers completed whose bytes went to the peer"),
    ("xfers_in", "transfers completed whose bytes came from the peer"),
    ("bytes_out", "bytes of those transfers sent"),
    ("bytes_in", "bytes of those transfers received"),
    ("chunks_out", "plugin send requests (chunks) of those transfers"),
    ("chunks_in", "plugin receive requests (chunks) of those transfers"),
    ("notifs_out", "notifications sent"),
    ("notifs_in", "notifications delivered here"),
    ("notifs_dropped", "notifications never delivered: their connection ended first"),
    ("failed", "transfers that failed"),
    ("stalls", "transfers found stalled (stall_ms without moving)"),
    ("heartbeats_sent", "heartbeats sent on idle control channels"),
    ("heartbeats_recv", "heartbeats received"),
    ("heartbeats_missed", "heartbeat intervals of peer silence past the first"),
    ("windows_full", "passes that found a chunk ready and its window full"),
    ("chunks_in_ahead", "received chunks that landed in a receive posted ahead of them"),
)
_LATENCIES = (
    ("req", "plugin send request latency, isend to test() done"),
    ("xfer", "transfer latency, post to completion"),
)


def _labels(base, extra=None):
    items = dict(base or {})
    items.update(extra or {})
    if not items:
        return ""
    body = ",".join('%s="%s"' % (k, str(v).replace("\\", "\\\\").replace('"', '\\"')
                                 .replace("\n", "\\n")) for k, v in sorted(items.items()))
    return "{" + body + "}"


def prometheus(stats, labels=None, prefix="tcpx_p2p"):
    """The text exposition (format 0.0.4) of a Session.stats() or
    Conn.stats() dict; labels (a dict) go on every sample."""
    out = []
    for name, help_text in _COUNTERS:
        metric = "%s_%s_total" % (prefix, name)
        out.append("# HELP %s %s" % (metric, help_text))
        out.append("# TYPE %s counter" % metric)
        out.append("%s%s %d" % (metric, _labels(labels), stats[name]))
    metric = "%s_failed_by_reason_total" % prefix
    out.append("# HELP %s transfers that failed, by error code" % metric)
    out.append("# TYPE %s counter" % metric)
    for reason, n in sorted(stats["failed_by"].items()):
        out.append("%s%s %d" % (metric, _labels(labels, {"reason": reason}), n))
    for key in ("out", "in"):
        counts = stats["chunks_%s_by_channel" % key]
        used = max([i + 1 for i, n in enumerate(counts) if n] or [0])
        metric = "%s_chunks_%s_by_channel_total" % (prefix, key)
        out.append("# HELP %s chunks_%s by the data channel that carried them" % (metric, key))
        out.append("# TYPE %s counter" % metric)
        for i in range(used):
            out.append("%s%s %d" % (metric, _labels(labels, {"channel": i}), counts[i]))
    for key, help_text in _LATENCIES:
        metric = "%s_%s_latency_seconds" % (prefix, key)
        out.append("# HELP %s %s (upper bounds of log-scale buckets)" % (metric, help_text))
        out.append("# TYPE %s summary" % metric)
        for q in ("50", "90", "99"):
            out.append("%s%s %.9g" % (metric, _labels(labels, {"quantile": "0." + q}),
                                      stats["%s_ns_p%s" % (key, q)] / 1e9))
        out.append("%s_count%s %d" % (metric, _labels(labels), stats[key + "_samples"]))
    metric = "%s_connections" % prefix
    out.append("# HELP %s connections counted" % metric)
    out.append("# TYPE %s gauge" % metric)
    out.append("%s%s %d" % (metric, _labels(labels), stats["conns"]))
    return "\n".join(out) + "\n"
