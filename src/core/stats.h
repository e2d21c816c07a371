/* Per-connection counters (stats.c; docs/api.md, "Statistics").  Every
 * field is written under the conn's lock by whichever thread runs its
 * passes or posts to it, and read under the same lock: no atomics on the
 * data path, one add per event, and a clock read only where a latency is
 * measured (a transfer's post and end, a send request's issue and test). */
#ifndef TP_CORE_STATS_H
#define TP_CORE_STATS_H

#include <stdint.h>

#include "tcpx_p2p.h"

/* A fixed log-scale histogram of nanoseconds: 4 linear sub-buckets per
 * power of two, so a percentile is within 25 % of the true value, and
 * adding a sample is a count-leading-zeros and an increment. */
#define TP_HIST_SUB_BITS 2
#define TP_HIST_BUCKETS (64u << TP_HIST_SUB_BITS)

struct tp_hist {
	uint64_t n[TP_HIST_BUCKETS];
};

static inline unsigned tp__hist_bucket(uint64_t ns)
{
	unsigned msb;

	if (ns < (1u << TP_HIST_SUB_BITS))
		return (unsigned)ns;
	msb = 63u - (unsigned)__builtin_clzll(ns);
	return ((msb - TP_HIST_SUB_BITS + 1) << TP_HIST_SUB_BITS) |
	       (unsigned)((ns >> (msb - TP_HIST_SUB_BITS)) & ((1u << TP_HIST_SUB_BITS) - 1));
}

static inline void tp__hist_add(struct tp_hist *h, int64_t ns)
{
	h->n[tp__hist_bucket(ns > 0 ? (uint64_t)ns : 0)]++;
}

#define TP_STATS_NERR TCPX_P2P_STATS_NERR

struct tp_stats {
	uint64_t xfers[2], bytes[2], chunks[2]; /* by enum tp_dir: 0 out, 1 in */
	uint64_t notifs_out, notifs_in;
	uint64_t failed, failed_by[TP_STATS_NERR];
	uint64_t stalls;
	uint64_t in_stalls; /* the peer's transfers hosted here found stalled */
	uint64_t hb_sent, hb_recv, hb_missed;
	uint64_t windows_full;
	uint64_t notifs_dropped;
	uint64_t chunks_on[2][TCPX_P2P_MAX_CHANNELS]; /* chunks[] by channel */
	uint64_t chunks_ahead; /* chunks received into a receive posted ahead of them */
	struct tp_hist req_lat, xfer_lat;
};

struct tcpx_p2p_conn;
struct tcpx_p2p_xfer;

/* x ended with err (0: success). */
void tp__stats_xfer_end(struct tcpx_p2p_conn *c, const struct tcpx_p2p_xfer *x, int err);
/* sum += a. */
void tp__stats_add(struct tp_stats *sum, const struct tp_stats *a);
/* Write the public form into out: as many bytes as out->struct_size says
 * (checked by the caller), nconns connections counted. */
void tp__stats_export(const struct tp_stats *st, int nconns, tcpx_p2p_stats *out);
/* A stats call's arguments: obj and out non-NULL, out->struct_size large
 * enough (EINVAL, said with what). */
int tp__stats_check(const void *obj, const tcpx_p2p_stats *out, const char *what);

#endif
