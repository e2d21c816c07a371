/* Statistics (stats.h): counting at the points where things already end,
 * and the public queries.  A session's totals are its live connections'
 * counters added up with those of the connections destroyed before
 * (engine.c keeps those, under its list lock, so a connection is counted
 * exactly once whenever the query runs). */
#include <stddef.h>
#include <string.h>

#include "core/conn.h"
#include "core/pipeline/chunk.h"
#include "core/pipeline/comm.h"
#include "core/stats.h"
#include "core/xfer.h"
#include "util/error.h"
#include "util/time.h"

void tp__stats_xfer_end(struct tcpx_p2p_conn *c, const struct tcpx_p2p_xfer *x, int err)
{
	struct tp_stats *st = &c->stats;

	if (x->op == TP_OP_DISCARD)
		return;
	if (err) {
		st->failed++;
		st->failed_by[err < 0 && err > -TP_STATS_NERR ? -err : 0]++;
		return;
	}
	st->xfers[x->dir]++;
	st->bytes[x->dir] += x->len;
	st->chunks[x->dir] += x->nchunks;
	for (unsigned i = 0, n = (unsigned)c->nchan; i < n; i++)
		st->chunks_on[x->dir][i] += tp_chunk_on(x->first_seq, x->nchunks, n, i);
	tp__hist_add(&st->xfer_lat, tp__now_ns() - x->t_post);
}

void tp__stats_add(struct tp_stats *sum, const struct tp_stats *a)
{
	/* Every field is a uint64_t count: add them as an array. */
	const uint64_t *src = (const uint64_t *)(const void *)a;
	uint64_t *dst = (uint64_t *)(void *)sum;

	_Static_assert(sizeof(struct tp_stats) % sizeof(uint64_t) == 0, "counts only");
	for (size_t i = 0; i < sizeof(*a) / sizeof(uint64_t); i++)
		dst[i] += src[i];
}

static uint64_t hist_total(const struct tp_hist *h)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < TP_HIST_BUCKETS; i++)
		n += h->n[i];
	return n;
}

/* The largest value bucket i holds (tp__hist_bucket's inverse). */
static uint64_t bucket_top(unsigned i)
{
	unsigned sub = i & ((1u << TP_HIST_SUB_BITS) - 1), e = i >> TP_HIST_SUB_BITS;
	uint64_t lo;

	if (e == 0)
		return i;
	lo = (uint64_t)((1u << TP_HIST_SUB_BITS) | sub) << (e - 1);
	return lo + (((uint64_t)1 << (e - 1)) - 1);
}

/* The upper bound of the bucket that holds quantile q (0..1); 0 when empty. */
static uint64_t hist_quantile(const struct tp_hist *h, double q)
{
	uint64_t total = hist_total(h), seen = 0, want;

	if (!total)
		return 0;
	want = (uint64_t)(q * (double)total);
	if (want >= total)
		want = total - 1;
	for (unsigned i = 0; i < TP_HIST_BUCKETS; i++) {
		seen += h->n[i];
		if (seen > want)
			return bucket_top(i);
	}
	return bucket_top(TP_HIST_BUCKETS - 1);
}

void tp__stats_export(const struct tp_stats *st, int nconns, tcpx_p2p_stats *out)
{
	tcpx_p2p_stats full = { .struct_size = sizeof(full), .conns = nconns };
	size_t n = out->struct_size < sizeof(full) ? out->struct_size : sizeof(full);

	full.xfers_out = st->xfers[TP_SEND];
	full.xfers_in = st->xfers[TP_RECV];
	full.bytes_out = st->bytes[TP_SEND];
	full.bytes_in = st->bytes[TP_RECV];
	full.chunks_out = st->chunks[TP_SEND];
	full.chunks_in = st->chunks[TP_RECV];
	memcpy(full.chunks_out_by_channel, st->chunks_on[TP_SEND],
	       sizeof(full.chunks_out_by_channel));
	memcpy(full.chunks_in_by_channel, st->chunks_on[TP_RECV],
	       sizeof(full.chunks_in_by_channel));
	full.notifs_out = st->notifs_out;
	full.notifs_in = st->notifs_in;
	full.failed = st->failed;
	memcpy(full.failed_by, st->failed_by, sizeof(full.failed_by));
	full.stalls = st->stalls;
	full.in_stalls = st->in_stalls;
	full.heartbeats_sent = st->hb_sent;
	full.heartbeats_recv = st->hb_recv;
	full.heartbeats_missed = st->hb_missed;
	full.windows_full = st->windows_full;
	full.notifs_dropped = st->notifs_dropped;
	full.chunks_in_ahead = st->chunks_ahead;
	full.req_samples = hist_total(&st->req_lat);
	full.req_ns_p50 = hist_quantile(&st->req_lat, 0.50);
	full.req_ns_p90 = hist_quantile(&st->req_lat, 0.90);
	full.req_ns_p99 = hist_quantile(&st->req_lat, 0.99);
	full.xfer_samples = hist_total(&st->xfer_lat);
	full.xfer_ns_p50 = hist_quantile(&st->xfer_lat, 0.50);
	full.xfer_ns_p90 = hist_quantile(&st->xfer_lat, 0.90);
	full.xfer_ns_p99 = hist_quantile(&st->xfer_lat, 0.99);
	full.struct_size = n;
	memcpy(out, &full, n);
}

int tp__stats_check(const void *obj, const tcpx_p2p_stats *out, const char *what)
{
	if (!obj || !out)
		return tp__error(TCPX_P2P_EINVAL, "%s: NULL argument", what);
	if (out->struct_size < offsetof(tcpx_p2p_stats, xfers_out))
		return tp__error(TCPX_P2P_EINVAL, "%s: struct_size %zu is too small (set it to "
				 "sizeof(tcpx_p2p_stats))", what, out->struct_size);
	return 0;
}
