/* nccl_pair: NCCL ncclSend/ncclRecv from one GPU to another in one process,
 * with tcpx_perf's sweep flags, columns and JSON records, so that the two can
 * be compared transport for transport (force NCCL onto its socket transport
 * with NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket).
 * Exit status: 0 success, 1 error or verification mismatch, 2 usage,
 * 77 fewer than two usable GPUs. */
#define _GNU_SOURCE
#include <getopt.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "bench_util.h"

struct opts {
	struct bench_sweep sweep;
	int gpu[2];
	int verify, quiet, bidir;
	int timeout_ms;
	const char *json;
};

struct pair {
	ncclComm_t comm[2];
	cudaStream_t stream[2];
	void *sbuf, *rbuf;
	void *sbuf2, *rbuf2;  /* --bidir: B -> A, on B and on A */
	unsigned char *host;  /* pattern and copy-back buffer for --verify */
	size_t cap;
	int broken;           /* a transfer failed or stalled: abort, never destroy */
};


/* The NCCL settings that decide which transport and how many sockets a
 * send/recv between two local GPUs uses; echoed into every JSON record. */
static const char *const nccl_env[] = {
	"NCCL_NET", "NCCL_NET_PLUGIN", "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE",
	"NCCL_SOCKET_IFNAME", "NCCL_SOCKET_NTHREADS", "NCCL_NSOCKS_PERTHREAD",
	"NCCL_NVLS_ENABLE", "NCCL_PROTO", "NCCL_ALGO", "NCCL_BUFFSIZE",
	"NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_NCHANNELS_PER_NET_PEER",
	"NCCL_P2P_NET_CHUNKSIZE", "NCCL_DYNAMIC_CHUNK_SIZE", "NCCL_MIN_P2P_NCHANNELS",
	"NCCL_MAX_P2P_NCHANNELS", "NCCL_NET_GDR_LEVEL", "NCCL_NET_GDR_READ",
};

static void usage(FILE *f)
{
	fprintf(f,
"usage: nccl_pair [options]\n"
"  ncclSend on GPU A, ncclRecv on GPU B, both in this process (ncclCommInitAll).\n"
BENCH_SWEEP_USAGE
"  -g, --gpu A,B          sending and receiving GPU (default 0,1)\n"
"      --bidir            also B -> A at the same time (GB/s counts both)\n"
"      --verify           fill a pattern on A, copy B's buffer back and compare\n"
"      --json FILE        write results as a JSON array (- = stdout)\n"
"      --timeout MS       per-transfer deadline (default 60000)\n"
"  -q, --quiet            no table\n"
"Transport and sockets come from the NCCL_* environment (see docs/benchmarks.md).\n"
"GB/s means 10^9 bytes per second of completed payload.\n");
}

static int bad(const char *opt, const char *val)
{
	fprintf(stderr, "nccl_pair: bad value for %s: '%s'\n", opt, val);
	return -1;
}

enum { O_VERIFY = 256, O_JSON, O_TIMEOUT, O_BIDIR };

static int parse_flag(struct opts *o, int c, const char *arg)
{
	int v = bench_sweep_flag(&o->sweep, c, arg, "nccl_pair");

	if (v)
		return v < 0 ? -1 : 0;
	switch (c) {
	case 'g':
		if (sscanf(arg, "%d,%d", &o->gpu[0], &o->gpu[1]) != 2 || o->gpu[0] < 0 ||
		    o->gpu[1] < 0 || o->gpu[0] == o->gpu[1])
			return bad("--gpu", arg);
		break;
	case O_VERIFY: o->verify = 1; break;
	case O_BIDIR: o->bidir = 1; break;
	case O_JSON: o->json = arg; break;
	case O_TIMEOUT:
		if (bench_parse_int(arg, 1, 1 << 30, &o->timeout_ms))
			return bad("--timeout", arg);
		break;
	case 'q': o->quiet = 1; break;
	default: return -1;
	}
	return 0;
}

/* Returns 0, 1 for --help, -1 on a usage error. */
static int parse(int argc, char **argv, struct opts *o)
{
	static const struct option longs[] = {
		BENCH_SWEEP_LONGOPTS, { "gpu", 1, NULL, 'g' },
		{ "verify", 0, NULL, O_VERIFY }, { "json", 1, NULL, O_JSON },
		{ "bidir", 0, NULL, O_BIDIR },
		{ "timeout", 1, NULL, O_TIMEOUT }, { "quiet", 0, NULL, 'q' },
		{ "help", 0, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	int c;

	memset(o, 0, sizeof(*o));
	bench_sweep_defaults(&o->sweep);
	o->gpu[0] = 0;
	o->gpu[1] = 1;
	o->timeout_ms = 60000;
	while ((c = getopt_long(argc, argv, BENCH_SWEEP_SHORTOPTS "g:qh", longs, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			return 1;
		}
		if (c == '?' || parse_flag(o, c, optarg)) {
			usage(stderr);
			return -1;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return -1;
	}
	bench_sweep_finish(&o->sweep);
	if (o->sweep.min_bytes == 0)
		return bad("--min-bytes", "0");
	return 0;
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cuda_ok(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return 1;
	fprintf(stderr, "nccl_pair: %s: %s\n", what, cudaGetErrorString(e));
	return 0;
}

static int nccl_ok(ncclResult_t r, const char *what)
{
	if (r == ncclSuccess)
		return 1;
	fprintf(stderr, "nccl_pair: %s: %s (%s)\n", what, ncclGetErrorString(r),
		ncclGetLastError(NULL));
	return 0;
}

/* Wait for both streams without blocking in the driver, so that a stalled
 * socket transport turns into a timeout and an abort instead of a hang. */
static int pair_wait(struct pair *p, int timeout_ms)
{
	double deadline = now_us() + timeout_ms * 1e3;
	ncclResult_t async;
	cudaError_t e;
	int i;

	for (i = 0; i < 2; i++) {
		while ((e = cudaStreamQuery(p->stream[i])) == cudaErrorNotReady) {
			if (ncclCommGetAsyncError(p->comm[i], &async) != ncclSuccess ||
			    async != ncclSuccess) {
				nccl_ok(async, "asynchronous error");
				p->broken = 1;
				return -1;
			}
			if (now_us() > deadline) {
				fprintf(stderr, "nccl_pair: transfer not done after %d ms\n",
					timeout_ms);
				p->broken = 1;
				return -1;
			}
			sched_yield();
		}
		if (!cuda_ok(e, "cudaStreamQuery")) {
			p->broken = 1;
			return -1;
		}
	}
	return 0;
}

static int pair_xfer(struct pair *p, const struct opts *o, size_t bytes)
{
	if (!nccl_ok(ncclGroupStart(), "ncclGroupStart"))
		return -1;
	if (!cuda_ok(cudaSetDevice(o->gpu[0]), "cudaSetDevice") ||
	    !nccl_ok(ncclSend(p->sbuf, bytes, ncclInt8, 1, p->comm[0], p->stream[0]), "ncclSend") ||
	    !cuda_ok(cudaSetDevice(o->gpu[1]), "cudaSetDevice") ||
	    !nccl_ok(ncclRecv(p->rbuf, bytes, ncclInt8, 0, p->comm[1], p->stream[1]), "ncclRecv") ||
	    (o->bidir &&
	     (!nccl_ok(ncclSend(p->sbuf2, bytes, ncclInt8, 0, p->comm[1], p->stream[1]), "ncclSend") ||
	      !cuda_ok(cudaSetDevice(o->gpu[0]), "cudaSetDevice") ||
	      !nccl_ok(ncclRecv(p->rbuf2, bytes, ncclInt8, 1, p->comm[0], p->stream[0]),
		       "ncclRecv")))) {
		ncclGroupEnd();
		p->broken = 1;
		return -1;
	}
	if (!nccl_ok(ncclGroupEnd(), "ncclGroupEnd")) {
		p->broken = 1;
		return -1;
	}
	return pair_wait(p, o->timeout_ms);
}

static unsigned char pattern(size_t i, unsigned seed)
{
	return (unsigned char)((i * 131u + (i >> 12) * 7u + seed * 29u) ^ (seed >> 3));
}

/* Before a verified iteration: a fresh pattern into the sender's buffer,
 * zeros into the receiver's (`dir` 1: the --bidir direction B -> A). */
static int verify_prepare_dir(struct pair *p, const struct opts *o, size_t bytes, unsigned seed,
			      int dir)
{
	size_t i;

	for (i = 0; i < bytes; i++)
		p->host[i] = pattern(i, seed);
	return cuda_ok(cudaSetDevice(o->gpu[dir]), "cudaSetDevice") &&
	       cuda_ok(cudaMemcpy(dir ? p->sbuf2 : p->sbuf, p->host, bytes,
				  cudaMemcpyHostToDevice), "H2D") &&
	       cuda_ok(cudaSetDevice(o->gpu[!dir]), "cudaSetDevice") &&
	       cuda_ok(cudaMemset(dir ? p->rbuf2 : p->rbuf, 0, bytes), "cudaMemset") ? 0 : -1;
}

static int verify_check_dir(struct pair *p, const struct opts *o, size_t bytes, unsigned seed,
			    int dir)
{
	size_t i;

	if (!cuda_ok(cudaSetDevice(o->gpu[!dir]), "cudaSetDevice") ||
	    !cuda_ok(cudaMemcpy(p->host, dir ? p->rbuf2 : p->rbuf, bytes, cudaMemcpyDeviceToHost),
		     "D2H"))
		return -1;
	for (i = 0; i < bytes; i++) {
		if (p->host[i] != pattern(i, seed)) {
			fprintf(stderr, "nccl_pair: size %zu%s: byte %zu is 0x%02x, expected 0x%02x\n",
				bytes, dir ? " (B -> A)" : "", i, p->host[i], pattern(i, seed));
			return -1;
		}
	}
	return 0;
}

static int verify_prepare(struct pair *p, const struct opts *o, size_t bytes, unsigned seed)
{
	return verify_prepare_dir(p, o, bytes, seed, 0) ||
	       (o->bidir && verify_prepare_dir(p, o, bytes, seed + 1000u, 1)) ? -1 : 0;
}

static int verify_check(struct pair *p, const struct opts *o, size_t bytes, unsigned seed)
{
	return verify_check_dir(p, o, bytes, seed, 0) ||
	       (o->bidir && verify_check_dir(p, o, bytes, seed + 1000u, 1)) ? -1 : 0;
}

static int run_size(struct pair *p, const struct opts *o, size_t bytes, double *us,
		    struct bench_row *r)
{
	unsigned seed = (unsigned)(bytes >> 10);
	double t0;
	int i;

	for (i = 0; i < o->sweep.warmup; i++)
		if (pair_xfer(p, o, bytes))
			return -1;
	for (i = 0; i < o->sweep.iters; i++) {
		if (o->verify && verify_prepare(p, o, bytes, seed + (unsigned)i))
			return -1;
		t0 = now_us();
		if (pair_xfer(p, o, bytes))
			return -1;
		us[i] = now_us() - t0;
		if (o->verify && verify_check(p, o, bytes, seed + (unsigned)i))
			return -1;
	}
	r->size = bytes;
	r->iters = o->sweep.iters;
	bench_stats(r, us, o->bidir ? 2 * r->size : r->size);
	return 0;
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", (unsigned char)*s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

static void json_row(FILE *f, const struct opts *o, const struct bench_row *r, int nccl_version,
		     int first)
{
	size_t i;
	const char *v;

	fprintf(f, "%s  {\"size\": %zu, \"iters\": %d, \"time_us\": %.3f, \"gbps\": %.4f, "
		"\"p50_us\": %.3f, \"p99_us\": %.3f, \"config\": {\"bench\": \"nccl_pair\", "
		"\"mem\": \"cuda\", \"gpu\": [%d, %d], \"bidir\": %s, \"verify\": %s, "
		"\"warmup\": %d, \"nccl_version\": %d, \"env\": {", first ? "" : ",\n", r->size,
		r->iters, r->avg_us, r->gbps, r->p50_us, r->p99_us, o->gpu[0], o->gpu[1],
		o->bidir ? "true" : "false", o->verify ? "true" : "false", o->sweep.warmup,
		nccl_version);
	for (i = 0; i < sizeof(nccl_env) / sizeof(nccl_env[0]); i++) {
		fprintf(f, "%s\"%s\": ", i ? ", " : "", nccl_env[i]);
		v = getenv(nccl_env[i]);
		if (v)
			json_str(f, v);
		else
			fputs("null", f);
	}
	fputs("}}}", f);
	fflush(f);
}

static int gpu_count(void)
{
	int n = 0;

	/* Without a driver the runtime fails here (35) and leaves n alone. */
	if (cudaGetDeviceCount(&n) != cudaSuccess)
		return 0;
	return n;
}

static void pair_destroy(struct pair *p, const struct opts *o)
{
	int i;

	for (i = 0; i < 2; i++) {
		/* Destroying a comm with a stalled operation waits for it. */
		if (p->comm[i] && p->broken)
			ncclCommAbort(p->comm[i]);
		else if (p->comm[i])
			ncclCommDestroy(p->comm[i]);
		if (p->stream[i]) {
			cudaSetDevice(o->gpu[i]);
			cudaStreamDestroy(p->stream[i]);
		}
	}
	if (p->sbuf) {
		cudaSetDevice(o->gpu[0]);
		cudaFree(p->sbuf);
	}
	if (p->rbuf) {
		cudaSetDevice(o->gpu[1]);
		cudaFree(p->rbuf);
	}
	if (p->sbuf2) {
		cudaSetDevice(o->gpu[1]);
		cudaFree(p->sbuf2);
	}
	if (p->rbuf2) {
		cudaSetDevice(o->gpu[0]);
		cudaFree(p->rbuf2);
	}
	free(p->host);
}

static int pair_create(struct pair *p, const struct opts *o)
{
	int i;

	memset(p, 0, sizeof(*p));
	p->cap = o->sweep.max_bytes;
	if (!nccl_ok(ncclCommInitAll(p->comm, 2, o->gpu), "ncclCommInitAll"))
		goto fail;
	for (i = 0; i < 2; i++) {
		if (!cuda_ok(cudaSetDevice(o->gpu[i]), "cudaSetDevice") ||
		    !cuda_ok(cudaStreamCreateWithFlags(&p->stream[i], cudaStreamNonBlocking),
			     "cudaStreamCreate") ||
		    !cuda_ok(cudaMalloc(i ? &p->rbuf : &p->sbuf, p->cap), "cudaMalloc") ||
		    (o->bidir && !cuda_ok(cudaMalloc(i ? &p->sbuf2 : &p->rbuf2, p->cap), "cudaMalloc")))
			goto fail;
	}
	if (o->verify && !(p->host = malloc(p->cap))) {
		fprintf(stderr, "nccl_pair: out of memory for %zu bytes\n", p->cap);
		goto fail;
	}
	return 0;
fail:
	pair_destroy(p, o);
	memset(p, 0, sizeof(*p));
	return -1;
}

static void print_header(const struct opts *o, int nccl_version)
{
	const char *net = getenv("NCCL_NET");

	printf("# nccl_pair: NCCL %d, ncclSend GPU %d -> ncclRecv GPU %d%s, one process\n",
	       nccl_version, o->gpu[0], o->gpu[1], o->bidir ? " and back at once" : "");
	printf("# NCCL_NET=%s NCCL_P2P_DISABLE=%s NCCL_SHM_DISABLE=%s NCCL_SOCKET_NTHREADS=%s "
	       "NCCL_NSOCKS_PERTHREAD=%s, warm-up %d, iters %d%s\n", net ? net : "(unset)",
	       getenv("NCCL_P2P_DISABLE") ? getenv("NCCL_P2P_DISABLE") : "(unset)",
	       getenv("NCCL_SHM_DISABLE") ? getenv("NCCL_SHM_DISABLE") : "(unset)",
	       getenv("NCCL_SOCKET_NTHREADS") ? getenv("NCCL_SOCKET_NTHREADS") : "(unset)",
	       getenv("NCCL_NSOCKS_PERTHREAD") ? getenv("NCCL_NSOCKS_PERTHREAD") : "(unset)",
	       o->sweep.warmup, o->sweep.iters, o->verify ? ", verified" : "");
	printf("# GB/s = 10^9 bytes/s of completed payload%s; time = average per transfer\n",
	       o->bidir ? " (both directions summed)" : "");
	printf("# %12s %8s %12s %10s %12s %12s\n", "size(B)", "iters", "time(us)", "GB/s",
	       "p50(us)", "p99(us)");
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct opts o;
	struct pair p;
	struct bench_row r;
	FILE *json = NULL;
	double *us = NULL;
	size_t bytes, next;
	int nccl_version = 0, first = 1, rc = 1, n;

	n = parse(argc, argv, &o);
	if (n)
		return n > 0 ? 0 : 2;
	n = gpu_count();
	if (n < 2 || o.gpu[0] >= n || o.gpu[1] >= n) {
		fprintf(stderr, "nccl_pair: needs GPUs %d and %d, %d usable CUDA device(s): "
			"skipping\n", o.gpu[0], o.gpu[1], n);
		return 77;
	}
	ncclGetVersion(&nccl_version);
	us = calloc((size_t)o.sweep.iters, sizeof(*us));
	if (!us) {
		fprintf(stderr, "nccl_pair: out of memory\n");
		return 1;
	}
	if (o.json) {
		json = strcmp(o.json, "-") ? fopen(o.json, "w") : stdout;
		if (!json) {
			perror(o.json);
			goto free_us;
		}
		fputs("[\n", json);
	}
	if (pair_create(&p, &o))
		goto close_json;
	if (!o.quiet)
		print_header(&o, nccl_version);
	for (bytes = o.sweep.min_bytes; bytes <= o.sweep.max_bytes; bytes = next) {
		if (run_size(&p, &o, bytes, us, &r))
			goto destroy_pair;
		if (!o.quiet)
			printf("  %12zu %8d %12.1f %10.3f %12.1f %12.1f\n", r.size, r.iters,
			       r.avg_us, r.gbps, r.p50_us, r.p99_us);
		fflush(stdout);
		if (json)
			json_row(json, &o, &r, nccl_version, first);
		first = 0;
		next = bench_sweep_next(&o.sweep, bytes);
	}
	rc = 0;
destroy_pair:
	pair_destroy(&p, &o);
close_json:
	if (json) {
		fputs("\n]\n", json);
		if (json != stdout)
			fclose(json);
	}
free_us:
	free(us);
	return rc;
}
