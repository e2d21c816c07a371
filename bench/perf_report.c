/* tcpx_perf output: a table comparable to nccl-tests, and JSON records. */
#include <stdlib.h>
#include <string.h>

#include "perf.h"

static const char *unpack_name(int u)
{
	return u == TCPX_P2P_UNPACK_D2D ? "d2d" : u == TCPX_P2P_UNPACK_HOST ? "host" : "kernel";
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

	fprintf(out, "# tcpx_perf %s: plugin %s (ABI v%d, %s), net dev %d\n",
	       pi->role ? "client (sender)" : "server (receiver)", info->plugin_name,
	       info->plugin_abi, info->plugin_path, info->net_dev);
	fprintf(out, "# mem %s (gpu %d), conns %d, channels %d, chunk %zu, window %d/%d, unpack %s, "
	       "%s, warm-up %d, iters %d%s\n", o->cuda ? "cuda" : "host", info->gpu, o->conns,
	       o->cfg.num_channels, o->cfg.chunk_bytes, o->cfg.send_window, o->cfg.recv_window,
	       unpack_name(o->cfg.unpack), o->bidir ? "bidirectional" : "unidirectional",
	       o->sweep.warmup, o->sweep.iters, o->verify ? ", verified" : "");
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

void perf_json_row(FILE *f, const struct perf_opts *o, const struct perf_peer_info *pi,
		   const struct bench_row *r, int first)
{
	const tcpx_p2p_session_info *info = &pi->session;

	if (!f)
		return;
	fprintf(f, "%s  {\"size\": %zu, \"iters\": %d, \"time_us\": %.3f, \"gbps\": %.4f, "
		"\"p50_us\": %.3f, \"p99_us\": %.3f, \"setup_ms\": %.3f, "
		"\"config\": {\"role\": \"%s\", \"mem\": \"%s\", \"gpu\": %d, \"conns\": %d, "
		"\"channels\": %d, \"chunk_bytes\": %zu, "
		"\"send_window\": %d, \"recv_window\": %d, \"unpack\": \"%s\", \"bidir\": %s, "
		"\"verify\": %s, \"warmup\": %d, \"plugin\": \"%s\", \"plugin_abi\": %d, "
		"\"net_dev\": %d, \"numa_node\": %d, \"version\": \"%s\"}}",
		first ? "" : ",\n", r->size, r->iters, r->avg_us, r->gbps, r->p50_us, r->p99_us,
		pi->setup_ms, pi->role ? "client" : "server", o->cuda ? "cuda" : "host", info->gpu,
		o->conns, o->cfg.num_channels, o->cfg.chunk_bytes, o->cfg.send_window,
		o->cfg.recv_window, unpack_name(o->cfg.unpack), o->bidir ? "true" : "false",
		o->verify ? "true" : "false", o->sweep.warmup, info->plugin_name, info->plugin_abi,
		info->net_dev, pi->numa_node, tcpx_p2p_version());
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
