/* tcpx_perf command line.  Settings of the library itself come from its
 * configuration (defaults, then TCPX_P2P_* environment), then flags. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "bench_numa.h"
#include "bench_util.h"
#include "perf.h"

static void usage(FILE *f)
{
	fprintf(f,
"usage: tcpx_perf [kv] server|client|loopback|auto [options]\n"
"  roles: server listens and receives, client dials and sends (bidir: both do\n"
"  both); loopback runs both in this process; auto takes rank 0 = server,\n"
"  1 = client from OMPI_COMM_WORLD_RANK, SLURM_PROCID or PMI_RANK.\n"
"  -H, --host ADDR        peer to dial (client/auto; env TCPX_P2P_PEER)\n"
"      --bind ADDR        address to listen on (server; default all)\n"
"  -p, --port N           rendezvous TCP port (default 18515); 0: a server of one\n"
"                         pair listens on any free port and prints it on stderr\n"
"                         (\"tcpx_perf: listening on port P\"), for the client's -p\n"
BENCH_SWEEP_USAGE
"                         (env TCPX_P2P_PERF_SIZE, TCPX_P2P_PERF_ITERS)\n"
"      --chunk N          bytes per plugin request (TCPX_P2P_CHUNK_BYTES)\n"
"      --chunks-per-channel N  cut each channel's share of a transfer into up to N\n"
"                         chunks of at least 128 KiB (TCPX_P2P_CHUNKS_PER_CHANNEL)\n"
"      --channels N       channels per connection, 1..16 (TCPX_P2P_NUM_CHANNELS)\n"
"      --inflight N       each conn's share as N transfers posted at once, 1..64\n"
"                         (default 1): many small transfers in flight together\n"
"      --conns N          connections between the peers, 1..64 (default 1; env\n"
"                         TCPX_P2P_PERF_CONNS): each size is split evenly over them\n"
"      --window N         send and receive window per channel (1..16)\n"
"      --unpack K         kernel|d2d|host (TCPX_P2P_UNPACK)\n"
"      --mem host|cuda|pinned|pin  buffer memory (default host; pinned: cudaHostAlloc'd\n"
"                         host memory; pin: malloc'd host memory registered with\n"
"                         TCPX_P2P_MR_PIN; both with the session on --gpu)\n"
"  -g, --gpu N[,M]        GPU of this peer (loopback: server,client; default 0,1 with\n"
"                         two or more GPUs, else 0,0)\n"
"      --gpus LIST        multi-session mode with --mem cuda: pair k is a session on\n"
"                         GPU LIST[k] (e.g. 0-7, 0,1,2,3 or 0,0,0,0; loopback: both\n"
"                         ends), in its own thread, connected to the peer's pair k\n"
"      --pairs N          multi-session mode with --mem host: N pairs (1..64)\n"
"                         (both modes: pair k uses port + k; all pairs transfer at\n"
"                         once; prints each pair and the aggregate)\n"
"      --bidir            both directions at once (GB/s counts both)\n"
"      --verify           check every byte of every iteration\n"
"      --stats            print each peer's counters (tcpx_p2p_session_stats) after the run\n"
"      --switches         per size, the process's context switches per timed transfer\n"
"                         (getrusage; in loopback both peers' and the plugin's threads)\n"
"      --json FILE        write results as a JSON array (- = stdout)\n"
"      --timeout MS       connection and per-transfer deadline (TCPX_P2P_TIMEOUT_MS)\n"
"      --numa auto|off|N  run each peer on its GPU's NUMA node (auto, default) or node N\n"
"      --dump-config      print the configuration and exit\n"
"  -q, --quiet            no progress lines\n"
"kv mode (tcpx_perf kv ROLE): the server exports a KV-cache pool, the client writes\n"
"  (or reads) batches of scattered blocks into it with one one-sided call each;\n"
"  -n/-w, --mem, --gpu, --verify, --json, --chunk, --channels, --window apply:\n"
"      --layers L         layers, each with a K and a V block array (default 4)\n"
"      --block-size LIST  block bytes, one row each (e.g. 16K,64K,128K; default 64K)\n"
"      --blocks B         blocks per batch, a multiple of 2 x layers (default 1024)\n"
"      --pool-blocks P    blocks in each peer's pool (default 4 x blocks)\n"
"      --op write|read    one-sided WRITE with a notification (default), or READ\n"
"      --prep             the post's cost: one fixed batch posted as lists (write/read),\n"
"                         as a prepared list and as a strided one (tcpx_p2p_xlist_*);\n"
"                         prints the caller's time per post and segments per second\n"
"      --seed N           block ids of batch i come from (seed, size, i) (default 1)\n"
"GB/s means 10^9 bytes per second of completed payload.\n");
}

static const char *env2(const char *a, const char *b)
{
	const char *v = getenv(a);

	return v ? v : getenv(b);
}

static int launcher_rank(void)
{
	const char *names[] = { "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK" };
	int i, r;

	for (i = 0; i < 3; i++)
		if (getenv(names[i]) && bench_parse_int(getenv(names[i]), 0, 1 << 30, &r) == 0)
			return r;
	return -1;
}

enum { O_BIND = 256, O_CHUNK, O_CHANNELS, O_WINDOW, O_UNPACK, O_MEM, O_BIDIR, O_VERIFY,
       O_JSON, O_TIMEOUT, O_DUMP, O_NUMA, O_CONNS, O_GPUS, O_PAIRS, O_LAYERS, O_BLOCK_SIZE,
       O_BLOCKS, O_POOL_BLOCKS, O_OP, O_PREP, O_SEED, O_STATS, O_DEPTH, O_INFLIGHT,
       O_SWITCHES };

static int bad(const char *opt, const char *val)
{
	fprintf(stderr, "tcpx_perf: bad value for %s: '%s'\n", opt, val);
	return -1;
}

/* "16K,64K,128K": block sizes, each a non-zero multiple of 8 bytes. */
static int parse_size_list(const char *arg, size_t *size, int *n)
{
	char item[32];
	const char *s = arg, *comma;
	size_t len;

	for (*n = 0;; s = comma + 1) {
		comma = strchr(s, ',');
		len = comma ? (size_t)(comma - s) : strlen(s);
		if (len == 0 || len >= sizeof(item) || *n == PERF_KV_MAX_SIZES)
			return -1;
		memcpy(item, s, len);
		item[len] = 0;
		if (bench_parse_size(item, &size[*n]) || size[*n] == 0 || size[*n] % 8)
			return -1;
		(*n)++;
		if (!comma)
			return 0;
	}
}

/* The kv mode's own flags; 1 when c is not one of them. */
static int parse_kv_flag(struct perf_kv_opts *kv, int c, const char *arg)
{
	char *end;

	switch (c) {
	case O_LAYERS:
		return bench_parse_int(arg, 1, 1024, &kv->layers) ? bad("--layers", arg) : 0;
	case O_BLOCK_SIZE:
		return parse_size_list(arg, kv->block, &kv->nblock) ? bad("--block-size", arg) : 0;
	case O_BLOCKS:
		return bench_parse_int(arg, 1, 1 << 20, &kv->blocks) ? bad("--blocks", arg) : 0;
	case O_POOL_BLOCKS:
		return bench_parse_int(arg, 1, 1 << 24, &kv->pool_blocks) ?
			       bad("--pool-blocks", arg) : 0;
	case O_OP:
		if (strcmp(arg, "write") && strcmp(arg, "read"))
			return bad("--op", arg);
		kv->read = !strcmp(arg, "read");
		return 0;
	case O_PREP:
		kv->prep = 1;
		return 0;
	case O_SEED:
		kv->seed = strtoull(arg, &end, 0);
		return *arg == '-' || *arg == 0 || *end ? bad("--seed", arg) : 0;
	default:
		return 1;
	}
}

/* "0-7", "0,1,2,3", "0,0,2-3": entries in order, repeats allowed. */
static int parse_gpu_list(const char *arg, int *gpu, int *n)
{
	const char *s = arg;
	char *end;
	long a, b;

	*n = 0;
	for (;;) {
		if (*s < '0' || *s > '9')
			return -1;
		a = b = strtol(s, &end, 10);
		if (*end == '-') {
			s = end + 1;
			if (*s < '0' || *s > '9')
				return -1;
			b = strtol(s, &end, 10);
		}
		if (a > 1023 || b > 1023 || b < a || *n + (b - a + 1) > PERF_MAX_PAIRS)
			return -1;
		while (a <= b)
			gpu[(*n)++] = (int)a++;
		if (!*end)
			return 0;
		if (*end != ',')
			return -1;
		s = end + 1;
	}
}

static int parse_flag(struct perf_opts *o, int c, const char *arg)
{
	int v;

	if (c == 's' || c == 'b' || c == 'e' || c == 'f')
		o->sized = 1;
	v = bench_sweep_flag(&o->sweep, c, arg, "tcpx_perf");
	if (v)
		return v < 0 ? -1 : 0;
	if (c >= O_LAYERS && c <= O_SEED) {
		if (!o->kv.on) {
			fprintf(stderr, "tcpx_perf: --layers, --block-size, --blocks, --pool-blocks, "
				"--op, --prep and --seed are flags of the kv mode (tcpx_perf kv ...)\n");
			return -1;
		}
		return parse_kv_flag(&o->kv, c, arg) ? -1 : 0;
	}
	switch (c) {
	case 'H': o->host = arg; break;
	case O_BIND: o->bind = arg; break;
	case 'p':
		if (bench_parse_int(arg, 0, 65535, &v))
			return bad("--port", arg);
		o->port = (uint16_t)v;
		break;
	case O_CHUNK:
		if (bench_parse_size(arg, &o->cfg.chunk_bytes))
			return bad("--chunk", arg);
		break;
	case O_DEPTH:
		if (bench_parse_int(arg, 1, 16, &o->cfg.chunks_per_channel))
			return bad("--chunks-per-channel", arg);
		break;
	case O_CHANNELS:
		/* The library's range, refused here rather than at session creation. */
		if (bench_parse_int(arg, 1, TCPX_P2P_MAX_CHANNELS, &o->cfg.num_channels))
			return bad("--channels", arg);
		break;
	case O_CONNS:
		if (bench_parse_int(arg, 1, PERF_MAX_CONNS, &o->conns))
			return bad("--conns", arg);
		break;
	case O_INFLIGHT:
		if (bench_parse_int(arg, 1, PERF_MAX_INFLIGHT, &o->inflight))
			return bad("--inflight", arg);
		break;
	case O_WINDOW:
		if (bench_parse_int(arg, 1, 16, &v))
			return bad("--window", arg);
		o->cfg.send_window = o->cfg.recv_window = v;
		break;
	case O_UNPACK:
		if (!strcmp(arg, "kernel"))
			o->cfg.unpack = TCPX_P2P_UNPACK_KERNEL;
		else if (!strcmp(arg, "d2d"))
			o->cfg.unpack = TCPX_P2P_UNPACK_D2D;
		else if (!strcmp(arg, "host"))
			o->cfg.unpack = TCPX_P2P_UNPACK_HOST;
		else
			return bad("--unpack", arg);
		break;
	case O_MEM:
		if (strcmp(arg, "host") && strcmp(arg, "cuda") && strcmp(arg, "pinned") &&
		    strcmp(arg, "pin"))
			return bad("--mem", arg);
		o->cuda = !strcmp(arg, "cuda");
		o->pinned = !strcmp(arg, "pinned");
		o->pin = !strcmp(arg, "pin");
		break;
	case 'g':
		if (sscanf(arg, "%d,%d", &o->gpu[0], &o->gpu[1]) < 1 || o->gpu[0] < 0)
			return bad("--gpu", arg);
		if (!strchr(arg, ','))
			o->gpu[1] = o->gpu[0];
		break;
	case O_GPUS:
		if (parse_gpu_list(arg, o->pair_gpu, &o->npairs))
			return bad("--gpus", arg);
		o->multi |= 1;
		break;
	case O_PAIRS:
		if (bench_parse_int(arg, 1, PERF_MAX_PAIRS, &o->npairs))
			return bad("--pairs", arg);
		o->multi |= 2;
		break;
	case O_BIDIR: o->bidir = 1; break;
	case O_VERIFY: o->verify = 1; break;
	case O_STATS: o->stats = 1; break;
	case O_SWITCHES: o->switches = 1; break;
	case O_JSON: o->json = arg; break;
	case O_TIMEOUT:
		if (bench_parse_int(arg, 1, 1 << 30, &o->timeout_ms))
			return bad("--timeout", arg);
		break;
	case O_DUMP: o->dump_config = 1; break;
	case O_NUMA:
		if (!strcmp(arg, "auto"))
			o->numa = BENCH_NUMA_AUTO;
		else if (!strcmp(arg, "off"))
			o->numa = BENCH_NUMA_OFF;
		else if (bench_parse_int(arg, 0, 1023, &o->numa))
			return bad("--numa", arg);
		break;
	case 'q': o->quiet = 1; break;
	default: return -1;
	}
	return 0;
}

static int parse_mode(struct perf_opts *o, const char *m)
{
	int rank;

	if (!strcmp(m, "server"))
		o->mode = PERF_SERVER;
	else if (!strcmp(m, "client"))
		o->mode = PERF_CLIENT;
	else if (!strcmp(m, "loopback"))
		o->mode = PERF_LOOPBACK;
	else if (!strcmp(m, "auto"))
		o->mode = PERF_AUTO;
	else
		return bad("mode", m);
	if (o->mode != PERF_AUTO)
		return 0;
	rank = launcher_rank();
	if (rank != 0 && rank != 1) {
		fprintf(stderr, "tcpx_perf auto: no launcher rank 0 or 1 in OMPI_COMM_WORLD_RANK, "
			"SLURM_PROCID or PMI_RANK\n");
		return -1;
	}
	o->mode = rank == 0 ? PERF_SERVER : PERF_CLIENT;
	return 0;
}

/* --gpus goes with device memory, --pairs with host memory, never both. */
static int check_multi(struct perf_opts *o, int gpu_given)
{
	const char *why = NULL;
	int k;

	if (o->multi == 3)
		why = "give --gpus LIST (--mem cuda) or --pairs N (--mem host), not both";
	else if (o->multi && (o->pinned || o->pin))
		why = "--mem pinned and pin are for one session (--gpu), not --gpus or --pairs";
	else if (o->multi == 1 && !o->cuda)
		why = "--gpus needs --mem cuda; with host memory give --pairs N";
	else if (o->multi == 2 && o->cuda)
		why = "--pairs is for --mem host; with --mem cuda give --gpus LIST";
	else if (o->multi && gpu_given)
		why = "--gpu names one session's GPU; in multi-session mode --gpus names them all";
	else if (o->multi && o->port + o->npairs - 1 > 65535)
		why = "--port + number of pairs passes 65535";
	if (why) {
		fprintf(stderr, "tcpx_perf: %s\n", why);
		return -1;
	}
	if (o->multi == 2)
		for (k = 0; k < o->npairs; k++)
			o->pair_gpu[k] = -1;
	o->multi = o->multi != 0;
	return 0;
}

/* The kv mode: one session and one conn per peer, one direction; a batch
 * covers every layer's K and V alike, and the pool holds at least one. */
static int check_kv(struct perf_opts *o)
{
	struct perf_kv_opts *kv = &o->kv;
	const char *why = NULL;

	if (!kv->on)
		return 0;
	if (kv->pool_blocks == 0)
		kv->pool_blocks = 4 * kv->blocks;
	if (o->multi)
		why = "kv runs one session per peer: no --pairs or --gpus";
	else if (o->conns != 1)
		why = "kv uses one connection (--conns, TCPX_P2P_PERF_CONNS)";
	else if (o->inflight != 1)
		why = "kv posts one batch at a time (--inflight)";
	else if (o->bidir)
		why = "kv moves one way: no --bidir";
	else if (o->sized)
		why = "kv sizes come from --block-size and --blocks, not -s/-b/-e/-f";
	else if (kv->blocks % (2 * kv->layers))
		why = "--blocks must be a multiple of 2 x --layers (a batch covers every layer's K "
		      "and V)";
	else if (kv->pool_blocks % (2 * kv->layers) || kv->pool_blocks < kv->blocks)
		why = "--pool-blocks must be a multiple of 2 x --layers and at least --blocks";
	else if (kv->prep && kv->pool_blocks % kv->blocks)
		why = "--prep: --pool-blocks must be a multiple of --blocks (the strided form "
		      "takes every (pool-blocks / blocks)-th block)";
	if (why) {
		fprintf(stderr, "tcpx_perf: %s\n", why);
		return -1;
	}
	return 0;
}

int perf_parse(int argc, char **argv, struct perf_opts *o)
{
	static const struct option longs[] = {
		{ "host", 1, NULL, 'H' }, { "bind", 1, NULL, O_BIND }, { "port", 1, NULL, 'p' },
		BENCH_SWEEP_LONGOPTS,
		{ "chunk", 1, NULL, O_CHUNK }, { "chunks-per-channel", 1, NULL, O_DEPTH },
		{ "channels", 1, NULL, O_CHANNELS },
		{ "conns", 1, NULL, O_CONNS }, { "inflight", 1, NULL, O_INFLIGHT }, { "window", 1, NULL, O_WINDOW }, { "unpack", 1, NULL, O_UNPACK },
		{ "mem", 1, NULL, O_MEM }, { "gpu", 1, NULL, 'g' }, { "bidir", 0, NULL, O_BIDIR },
		{ "verify", 0, NULL, O_VERIFY }, { "json", 1, NULL, O_JSON },
		{ "stats", 0, NULL, O_STATS }, { "switches", 0, NULL, O_SWITCHES },
		{ "timeout", 1, NULL, O_TIMEOUT }, { "dump-config", 0, NULL, O_DUMP },
		{ "numa", 1, NULL, O_NUMA }, { "gpus", 1, NULL, O_GPUS }, { "pairs", 1, NULL, O_PAIRS },
		{ "layers", 1, NULL, O_LAYERS }, { "block-size", 1, NULL, O_BLOCK_SIZE },
		{ "blocks", 1, NULL, O_BLOCKS }, { "pool-blocks", 1, NULL, O_POOL_BLOCKS },
		{ "op", 1, NULL, O_OP }, { "prep", 0, NULL, O_PREP }, { "seed", 1, NULL, O_SEED },
		{ "quiet", 0, NULL, 'q' }, { "help", 0, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	const char *v;
	int c, gpu_given = 0;

	memset(o, 0, sizeof(*o));
	o->port = 18515;
	o->npairs = 1;
	o->conns = 1;
	o->inflight = 1;
	bench_sweep_defaults(&o->sweep);
	o->numa = BENCH_NUMA_AUTO;
	o->gpu[0] = 0;
	o->gpu[1] = -1;
	o->kv.layers = 4;
	o->kv.block[0] = 64 << 10;
	o->kv.nblock = 1;
	o->kv.blocks = 1024;
	o->kv.seed = 1;
	/* "tcpx_perf kv ROLE ...": the rest parses as usual, argv[0] aside. */
	if (argc > 1 && !strcmp(argv[1], "kv")) {
		o->kv.on = 1;
		argc--;
		argv++;
	}
	o->host = getenv("TCPX_P2P_PEER");
	if (tcpx_p2p_config_init(&o->cfg))
		fprintf(stderr, "tcpx_perf: %s\n", tcpx_p2p_last_error());
	o->timeout_ms = o->cfg.timeout_ms;
	if ((v = env2("TCPX_P2P_PERF_SIZE", "UCCL_TCPX_PERF_SIZE")) &&
	    bench_parse_size(v, &o->sweep.min_bytes) == 0)
		o->sweep.max_bytes = o->sweep.min_bytes;
	if ((v = env2("TCPX_P2P_PERF_ITERS", "UCCL_TCPX_PERF_ITERS")) &&
	    bench_parse_int(v, 1, 1 << 24, &o->sweep.iters))
		return bad("TCPX_P2P_PERF_ITERS", v);
	if ((v = getenv("TCPX_P2P_PERF_CONNS")) &&
	    bench_parse_int(v, 1, PERF_MAX_CONNS, &o->conns))
		return bad("TCPX_P2P_PERF_CONNS", v);
	while ((c = getopt_long(argc, argv, BENCH_SWEEP_SHORTOPTS "H:p:g:qh", longs, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			return 1;
		}
		if (c == 'g')
			gpu_given = 1;
		if (c == '?' || parse_flag(o, c, optarg)) {
			usage(stderr);
			return -1;
		}
	}
	if (check_multi(o, gpu_given) || check_kv(o))
		return -1;
	if (o->dump_config)
		return 0;
	if (optind != argc - 1) {
		usage(stderr);
		return -1;
	}
	if (parse_mode(o, argv[optind]))
		return -1;
	bench_sweep_finish(&o->sweep);
	/* Loopback's two sessions go on two GPUs where there are two, else
	 * both on the one: a default naming a GPU the machine lacks only fails. */
	if (o->gpu[1] < 0)
		o->gpu[1] = o->mode == PERF_LOOPBACK && perf_mem_on_gpu(o) &&
					    bench_gpu_count() >= 2 ? 1 : o->gpu[0];
	if (o->mode == PERF_CLIENT && !o->host) {
		fprintf(stderr, "tcpx_perf client: give the server with --host or TCPX_P2P_PEER\n");
		return -1;
	}
	/* Any port: only a server can take one, and only one pair's (a client
	 * dials port + k); loopback picks its own. */
	if (o->port == 0 && o->mode != PERF_LOOPBACK && (o->mode != PERF_SERVER || o->multi ||
							 !strcmp(argv[optind], "auto"))) {
		fprintf(stderr, "tcpx_perf: --port 0 (any free port) is for a server of one pair: "
			"the client dials the port the server printed\n");
		return -1;
	}
	return 0;
}

void perf_dump_config(const struct perf_opts *o, FILE *f)
{
	const char *name, *help;
	char val[256];
	int i, n = tcpx_p2p_config_count();

	fprintf(f, "# libtcpx_p2p %s configuration (defaults, then environment, then flags)\n",
		tcpx_p2p_version());
	for (i = 0; i < n; i++) {
		if (tcpx_p2p_config_describe(&o->cfg, i, &name, &help, val, sizeof(val)))
			continue;
		fprintf(f, "%-24s = %-16s # %s\n", name, val, help);
	}
	fprintf(f, "%-24s = %-16zu # %s\n", "TCPX_P2P_PERF_SIZE", o->sweep.min_bytes,
		"tcpx_perf size in bytes when no sweep is given");
	fprintf(f, "%-24s = %-16d # %s\n", "TCPX_P2P_PERF_ITERS", o->sweep.iters,
		"tcpx_perf timed iterations per size");
	fprintf(f, "%-24s = %-16d # %s\n", "TCPX_P2P_PERF_CONNS", o->conns,
		"tcpx_perf connections between the peers");
}
