/* tcpx_perf output: a table comparable to nccl-tests, and JSON records. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "perf.h"

static const char *unpack_name(int u)
{
	return u == TCPX_P2P_UNPACK_D2D ? "d2d" : u == TCPX_P2P_UNPACK_HOST ? "host" : "kernel";
}

/* "0,1": the devices the session stripes its channels over ("-" if the
 * library reports none). */
static const char *nic_list(const tcpx_p2p_session_info *info, char *buf, size_t len)
{
	size_t used = 0;
	int k;

	snprintf(buf, len, "-");
	for (k = 0; k < info->nnics && k < TCPX_P2P_MAX_NICS && used < len; k++)
		used += (size_t)snprintf(buf + used, len - used, "%s%d", k ? "," : "", info->nic[k]);
	return buf;
}

/* The human table goes to stdout unless the JSON does. */
static FILE *table_out(const struct perf_opts *o)
{
	return o->json && !strcmp(o->json, "-") ? stderr : stdout;
}

void perf_print_header(const struct perf_opts *o, const struct perf_peer_info *pi)
{
	const tcpx_p2p_session_info *info = &pi->session;
	FILE *out = table_out(o);
	char nics[64];

	fprintf(out, "# tcpx_perf %s: plugin %s (ABI v%d, %s), net dev %d, nics %s\n",
	       pi->role ? "client (sender)" : "server (receiver)", info->plugin_name,
	       info->plugin_abi, info->plugin_path, info->net_dev,
	       nic_list(info, nics, sizeof(nics)));
	fprintf(out, "# mem %s (gpu %d), conns %d, channels %d, chunk %zu (up to %d a channel's "
	       "share), window %d/%d, unpack %s, %s, warm-up %d, iters %d%s\n", perf_mem_name(o),
	       info->gpu, o->conns, o->cfg.num_channels, o->cfg.chunk_bytes,
	       o->cfg.chunks_per_channel, o->cfg.send_window, o->cfg.recv_window,
	       unpack_name(o->cfg.unpack), o->bidir ? "bidirectional" : "unidirectional",
	       o->sweep.warmup, o->sweep.iters, o->verify ? ", verified" : "");
	if (o->inflight > 1)
		fprintf(out, "# each conn's share as %d transfers posted at once\n", o->inflight);
	fprintf(out, "# set-up %.1f ms (%s until %d conn%s existed)\n", pi->setup_ms,
	       pi->role ? "first dial" : "first accept", o->conns, o->conns > 1 ? "s" : "");
	if (pi->numa_node >= 0)
		fprintf(out, "# NUMA node %d\n", pi->numa_node);
	else
		fprintf(out, "# NUMA: not bound (%s)\n", pi->numa_why);
	fprintf(out, "# GB/s = 10^9 bytes/s of completed payload%s%s; time = average per "
	       "transfer\n", o->bidir ? " (both directions summed)" : "",
	       o->conns > 1 ? " (all conns summed)" : "");
	fprintf(out, "# %12s %8s %12s %10s %12s %12s\n", "size(B)", "iters", "time(us)", "GB/s",
	       "p50(us)", "p99(us)");
	fflush(out);
}

void perf_print_stats(const struct perf_opts *o, int role, const tcpx_p2p_stats *st)
{
	FILE *out = table_out(o);
	const char *who = role ? "client" : "server";

	fprintf(out, "# stats %s: conns %d, transfers out %llu in %llu, bytes out %llu in %llu, "
		"chunks out %llu in %llu, notifications out %llu in %llu, failed %llu, stalls "
		"%llu\n", who,
		st->conns, (unsigned long long)st->xfers_out, (unsigned long long)st->xfers_in,
		(unsigned long long)st->bytes_out, (unsigned long long)st->bytes_in,
		(unsigned long long)st->chunks_out, (unsigned long long)st->chunks_in,
		(unsigned long long)st->notifs_out, (unsigned long long)st->notifs_in,
		(unsigned long long)st->failed, (unsigned long long)st->stalls);
	fprintf(out, "# stats %s: heartbeats sent %llu received %llu missed %llu, windows full "
		"%llu, chunks in ahead %llu\n", who, (unsigned long long)st->heartbeats_sent,
		(unsigned long long)st->heartbeats_recv, (unsigned long long)st->heartbeats_missed,
		(unsigned long long)st->windows_full, (unsigned long long)st->chunks_in_ahead);
	fprintf(out, "# stats %s: send requests p50/p90/p99 %.1f/%.1f/%.1f us (%llu), transfers "
		"%.1f/%.1f/%.1f us (%llu)\n", who, st->req_ns_p50 / 1e3, st->req_ns_p90 / 1e3,
		st->req_ns_p99 / 1e3, (unsigned long long)st->req_samples, st->xfer_ns_p50 / 1e3,
		st->xfer_ns_p90 / 1e3, st->xfer_ns_p99 / 1e3, (unsigned long long)st->xfer_samples);
	fflush(out);
}

void perf_print_row(const struct perf_opts *o, const struct bench_row *r)
{
	FILE *out = table_out(o);

	fprintf(out, "  %12zu %8d %12.1f %10.3f %12.1f %12.1f\n", r->size, r->iters, r->avg_us, r->gbps,
	       r->p50_us, r->p99_us);
	fflush(out);
}

int perf_json_open(const struct perf_opts *o, FILE **f)
{
	*f = NULL;
	if (!o->json)
		return 0;
	*f = strcmp(o->json, "-") ? fopen(o->json, "w") : stdout;
	if (!*f) {
		perror(o->json);
		return -1;
	}
	fputs("[\n", *f);
	return 0;
}

/* The run's settings; gpu/net_dev/numa of one pair, or (pi NULL, the
 * aggregate) the lists of all pairs from g. */
static void json_config(FILE *f, const struct perf_opts *o, const struct perf_peer_info *pi,
			const struct perf_group *g)
{
	const struct perf_peer_info *p0 = pi ? pi : &g->pi[0];
	int k;

	fprintf(f, "\"config\": {\"role\": \"%s\", \"mem\": \"%s\", ", p0->role ? "client" : "server",
		perf_mem_name(o));
	if (pi)
		fprintf(f, "\"gpu\": %d, ", pi->session.gpu);
	if (o->multi)
		fprintf(f, "\"pairs\": %d, ", o->npairs);
	fprintf(f, "\"conns\": %d, \"channels\": %d, \"chunk_bytes\": %zu, "
		"\"chunks_per_channel\": %d, \"inflight\": %d, "
		"\"send_window\": %d, \"recv_window\": %d, \"unpack\": \"%s\", \"bidir\": %s, "
		"\"verify\": %s, \"warmup\": %d, \"plugin\": \"%s\", \"plugin_abi\": %d, ",
		o->conns, o->cfg.num_channels, o->cfg.chunk_bytes, o->cfg.chunks_per_channel,
		o->inflight, o->cfg.send_window,
		o->cfg.recv_window, unpack_name(o->cfg.unpack), o->bidir ? "true" : "false",
		o->verify ? "true" : "false", o->sweep.warmup, p0->session.plugin_name,
		p0->session.plugin_abi);
	if (pi) {
		fprintf(f, "\"net_dev\": %d, ", pi->session.net_dev);
		for (k = 0; k < pi->session.nnics && k < TCPX_P2P_MAX_NICS; k++)
			fprintf(f, "%s%d", k ? ", " : "\"nics\": [", pi->session.nic[k]);
		fprintf(f, "%s\"numa_node\": %d, ", pi->session.nnics > 0 ? "], " : "",
			pi->numa_node);
	} else {
		for (k = 0; k < o->npairs; k++)
			fprintf(f, "%s%d", k ? ", " : "\"gpus\": [", g->pi[k].session.gpu);
		for (k = 0; k < o->npairs; k++)
			fprintf(f, "%s%d", k ? ", " : "], \"net_devs\": [", g->pi[k].session.net_dev);
		fputs("], ", f);
	}
	fprintf(f, "\"version\": \"%s\"}}", tcpx_p2p_version());
}

static void json_stats(FILE *f, const struct bench_row *r, double setup_ms, int first)
{
	fprintf(f, "%s  {\"size\": %zu, \"iters\": %d, \"time_us\": %.3f, \"gbps\": %.4f, "
		"\"p50_us\": %.3f, \"p99_us\": %.3f, \"setup_ms\": %.3f, ", first ? "" : ",\n",
		r->size, r->iters, r->avg_us, r->gbps, r->p50_us, r->p99_us, setup_ms);
}

void perf_json_row(FILE *f, const struct perf_opts *o, const struct perf_peer_info *pi,
		   const struct bench_row *r, int first, int pair)
{
	if (!f)
		return;
	json_stats(f, r, pi->setup_ms, first);
	if (pair >= 0)
		fprintf(f, "\"pair\": %d, \"aggregate\": false, ", pair);
	json_config(f, o, pi, NULL);
	fflush(f);
}

void perf_json_close(FILE *f)
{
	if (!f)
		return;
	fputs("\n]\n", f);
	if (f != stdout)
		fclose(f);
}

/* ---- multi-session mode ---------------------------------------------------- */

static double slowest_setup(const struct perf_group *g)
{
	double m = 0;
	int k;

	for (k = 0; k < g->o->npairs; k++)
		m = g->pi[k].setup_ms > m ? g->pi[k].setup_ms : m;
	return m;
}

void perf_group_header(struct perf_group *g)
{
	const struct perf_opts *o = g->o;
	const struct perf_peer_info *p0 = &g->pi[0];
	FILE *out = table_out(o);
	int k, same_numa = 1;

	fprintf(out, "# tcpx_perf %s: plugin %s (ABI v%d, %s), loaded once for the process\n",
		g->role ? "client (sender)" : "server (receiver)", p0->session.plugin_name,
		p0->session.plugin_abi, p0->session.plugin_path);
	fprintf(out, "# %d pair%s in one process: a session and a thread each, all transferring at "
		"once\n", o->npairs, o->npairs > 1 ? "s" : "");
	fprintf(out, "# mem %s, conns %d per pair, channels %d, chunk %zu (up to %d a channel's "
		"share), window %d/%d, unpack %s, %s, warm-up %d, iters %d%s\n", perf_mem_name(o),
		o->conns, o->cfg.num_channels, o->cfg.chunk_bytes, o->cfg.chunks_per_channel,
		o->cfg.send_window, o->cfg.recv_window,
		unpack_name(o->cfg.unpack), o->bidir ? "bidirectional" : "unidirectional",
		o->sweep.warmup, o->sweep.iters, o->verify ? ", verified" : "");
	if (o->inflight > 1)
		fprintf(out, "# each conn's share as %d transfers posted at once\n", o->inflight);
	fprintf(out, "# set-up %.1f ms (slowest pair, %s until its %d conn%s existed)\n",
		slowest_setup(g), g->role ? "first dial" : "first accept", o->conns,
		o->conns > 1 ? "s" : "");
	for (k = 1; k < o->npairs; k++)
		same_numa &= g->pi[k].numa_node == p0->numa_node;
	if (same_numa && p0->numa_node < 0)
		fprintf(out, "# NUMA: not bound (%s)\n", p0->numa_why);
	else
		for (k = 0; k < o->npairs; k++)
			fprintf(out, "%s%d", k ? " " : "# NUMA node per pair (-1 = not bound): ",
				g->pi[k].numa_node);
	if (!(same_numa && p0->numa_node < 0))
		fputc('\n', out);
	fprintf(out, "# GB/s = 10^9 bytes/s of completed payload%s%s; a pair's time = its average "
		"per transfer; all = every pair's bytes / wall time of the iteration (first start to "
		"last completion), averaged\n", o->bidir ? " (both directions summed)" : "",
		o->conns > 1 ? " (all conns summed)" : "");
	fprintf(out, "# %12s %5s %4s %7s %-11s %8s %12s %10s %12s %12s\n", "size(B)", "pair", "gpu",
		"net_dev", "nics", "iters", "time(us)", "GB/s", "p50(us)", "p99(us)");
	fflush(out);
}

void perf_json_aggregate(FILE *f, const struct perf_opts *o, const struct perf_group *g,
			 const struct bench_row *r)
{
	if (!f)
		return;
	json_stats(f, r, slowest_setup(g), 0);
	fputs("\"pair\": -1, \"aggregate\": true, ", f);
	json_config(f, o, NULL, g);
	fflush(f);
}

/* Per NIC: each pair's GB/s shared out over its channels (channel i of a
 * conn runs on nic[i % nnics]), summed over the pairs.  By index only: the
 * names live in sessions that pairs finished earlier may have destroyed. */
static void print_per_nic(FILE *out, const struct perf_group *g)
{
	const struct perf_opts *o = g->o;
	int ch = o->cfg.num_channels, k, i, j, dev;
	double share[256] = { 0 };
	bool used[256] = { false };

	for (k = 0; k < o->npairs; k++) {
		const tcpx_p2p_session_info *si = &g->pi[k].session;

		if (si->nnics <= 0)
			continue;
		for (i = 0; i < ch; i++) {
			j = i % si->nnics;
			dev = si->nic[j];
			if (dev < 0 || dev >= 256)
				continue;
			share[dev] += g->rows[k].gbps / ch;
			used[dev] = true;
		}
	}
	for (dev = 0; dev < 256; dev++)
		if (used[dev])
			fprintf(out, "# nic %d: %.3f GB/s of the pairs' rates\n", dev, share[dev]);
}

void perf_group_report(struct perf_group *g, size_t size)
{
	const struct perf_opts *o = g->o;
	struct bench_row all = { .size = size, .iters = o->sweep.iters };
	FILE *out = table_out(o);
	double *wall, a, b;
	char nics[64];
	int k, it, n = o->sweep.iters;

	for (k = 0; k < o->npairs; k++) {
		const struct bench_row *r = &g->rows[k];

		fprintf(out, "  %12zu %5d %4d %7d %-11s %8d %12.1f %10.3f %12.1f %12.1f\n", r->size,
			k, g->pi[k].session.gpu, g->pi[k].session.net_dev,
			nic_list(&g->pi[k].session, nics, sizeof(nics)), r->iters, r->avg_us,
			r->gbps, r->p50_us, r->p99_us);
		perf_json_row(g->json, o, &g->pi[k], r, g->first, k);
		g->first = 0;
	}
	wall = calloc((size_t)n, sizeof(*wall));
	if (!wall) {
		fprintf(out, "  (no memory for the aggregate)\n");
		return;
	}
	for (it = 0; it < n; it++) {
		a = g->t0[it];
		b = g->t1[it];
		for (k = 1; k < o->npairs; k++) {
			a = g->t0[k * n + it] < a ? g->t0[k * n + it] : a;
			b = g->t1[k * n + it] > b ? g->t1[k * n + it] : b;
		}
		wall[it] = (b - a) * 1e6;
	}
	bench_stats(&all, wall, (size_t)o->npairs * (o->bidir ? 2 * size : size));
	fprintf(out, "  %12zu %5s %4s %7s %-11s %8d %12.1f %10.3f %12.1f %12.1f\n", size, "all", "-",
		"-", "-", n, all.avg_us, all.gbps, all.p50_us, all.p99_us);
	print_per_nic(out, g);
	fflush(out);
	perf_json_aggregate(g->json, o, g, &all);
	free(wall);
}
