/* unpack_bench: the unpack variants (kernel, d2d, host) against a
 * cudaMemcpy D2D of the same payload, over emulator-like layouts (random
 * intra-page offsets, shuffled pages) and whole 4 KiB pages, for 1, 4 and
 * 16 chunks per launch.  Each variant's output is verified once before it
 * is timed; warm-up runs are excluded; times are CUDA-event medians. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "device/dev_tune.h"
#include "tcpx_p2p.h"

#define PAGE TP_UNPACK_PAGE_SIZE
#define POISON 0x5a
#define MAX_CHUNKS TP_UNPACK_QUEUE_DEPTH

enum layout { LAYOUT_EMU, LAYOUT_PAGES };
/* kernel is the library's choice (records in the launch's parameters when
 * they fit, else read from the ring); kern-ring always reads the ring;
 * kern-dev is a diagnostic: the ring path reading a device copy of the
 * ring, which separates the cost of reading host memory from the copy
 * itself.  d2d-1 and host-1 are d2d and host with one cudaMemcpyAsync per
 * copy instead of a batch (the variants before batching). */
enum variant {
	VAR_KERNEL,
	VAR_KERNEL_RING,
	VAR_KERNEL_DEVMETA,
	VAR_D2D,
	VAR_D2D_ONE,
	VAR_HOST,
	VAR_HOST_ONE,
	VAR_MEMCPY,
	NVARIANTS
};

static const char *const layout_name[] = { "emu", "pages" };
static const char *const variant_name[] = { "kernel", "kern-ring", "kern-dev", "d2d", "d2d-1",
					    "host", "host-1", "memcpy" };

struct opts {
	size_t chunk;
	int reps, warmup, json, gpu, blocks;
	int hostmap; /* bounce pages in mapped host memory (TCPXSIM_BOUNCE=hostmap) */
};

struct setup {
	enum layout lay;
	int nchunks;
	size_t chunk;
	uint32_t npages;
	unsigned char *bounce_h; /* host copy of the bounce pages */
	unsigned char *ref;      /* expected dst */
	char *bounce, *dst, *src; /* device: bounce pages, dst, memcpy source */
	int hostmap;              /* bounce is mapped host memory (its device address: UVA) */
	struct tp_unpack_job jobs[MAX_CHUNKS];
	struct tp_unpack_job jobs_dev[MAX_CHUNKS]; /* ring copy in device memory */
	struct tp_unpack_meta *dmeta;
};

static struct tp_unpack_meta *meta;
static tp_dev_stream *stream;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

#define CK(expr)                                                                 \
	do {                                                                     \
		int ck_ = (expr);                                                \
		if (ck_) {                                                       \
			fprintf(stderr, "unpack_bench: %s failed: %d (%s)\n", #expr, \
				ck_, tcpx_p2p_last_error());                     \
			exit(1);                                                 \
		}                                                                \
	} while (0)

#define CKC(expr)                                                                \
	do {                                                                     \
		cudaError_t ckc_ = (expr);                                       \
		if (ckc_ != cudaSuccess) {                                       \
			fprintf(stderr, "unpack_bench: %s: %s\n", #expr,          \
				cudaGetErrorString(ckc_));                       \
			exit(1);                                                 \
		}                                                                \
	} while (0)

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p) {
		fprintf(stderr, "unpack_bench: out of memory (%zu bytes)\n", n);
		exit(1);
	}
	return p;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: unpack_bench [--chunk BYTES] [--reps N] [--warmup N] [--gpu N] "
		   "[--blocks N] [--hostmap] [--json]\n"
		   "  --chunk   bytes per chunk (default 524288, at most 4 MiB)\n"
		   "  --reps    timed repetitions, the median is reported (default 50)\n"
		   "  --warmup  untimed repetitions first (default 5)\n"
		   "  --blocks  unpack kernel blocks per chunk (default: the library's)\n"
		   "  --hostmap bounce pages in mapped host memory that the GPU reads over the bus,\n"
		   "            as the TCPX simulator's TCPXSIM_BOUNCE=hostmap hands them out\n"
		   "  --json    one JSON object per row instead of the table\n");
}

static int parse_num(const char *s, long long min, long long max, long long *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 0);
	if (errno || end == s || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

static int parse(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){ .chunk = 512 << 10, .reps = 50, .warmup = 5 };
	for (int i = 1; i < argc; i++) {
		long long v;

		if (!strcmp(argv[i], "--json")) {
			o->json = 1;
		} else if (!strcmp(argv[i], "--hostmap")) {
			o->hostmap = 1;
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			exit(0);
		} else if (i + 1 < argc && !strcmp(argv[i], "--chunk") &&
			   !parse_num(argv[i + 1], 1, 4 << 20, &v)) {
			o->chunk = (size_t)v;
			i++;
		} else if (i + 1 < argc && !strcmp(argv[i], "--reps") &&
			   !parse_num(argv[i + 1], 1, 100000, &v)) {
			o->reps = (int)v;
			i++;
		} else if (i + 1 < argc && !strcmp(argv[i], "--warmup") &&
			   !parse_num(argv[i + 1], 0, 100000, &v)) {
			o->warmup = (int)v;
			i++;
		} else if (i + 1 < argc && !strcmp(argv[i], "--blocks") &&
			   !parse_num(argv[i + 1], 1, 256, &v)) {
			o->blocks = (int)v;
			i++;
		} else if (i + 1 < argc && !strcmp(argv[i], "--gpu") &&
			   !parse_num(argv[i + 1], 0, 1023, &v)) {
			o->gpu = (int)v;
			i++;
		} else {
			fprintf(stderr, "unpack_bench: bad argument '%s'\n", argv[i]);
			usage(stderr);
			return -1;
		}
	}
	return 0;
}

/* Records of every chunk on pages of one shuffled pool, as the emulator
 * and TCPX place them; the expected dst image is built alongside. */
static void setup_create(struct setup *st, enum layout lay, int nchunks, size_t chunk,
			 int hostmap)
{
	uint32_t n[MAX_CHUNKS], *perm, p = 0;
	size_t total = (size_t)nchunks * chunk;
	void *dm;

	memset(st, 0, sizeof(*st));
	st->lay = lay;
	st->nchunks = nchunks;
	st->chunk = chunk;
	for (int j = 0; j < nchunks; j++) {
		tp_unpack_rec *rec = meta->mem[j];
		uint64_t off = 0;

		n[j] = 0;
		while (off < chunk) {
			uint32_t intra = lay == LAYOUT_EMU ? (uint32_t)(next() % (PAGE / 2)) : 0;
			uint64_t len = PAGE - intra;

			len = len > chunk - off ? chunk - off : len;
			rec[n[j]].src_off = intra;
			rec[n[j]].len = (uint32_t)len;
			rec[n[j]].dst_off = off;
			off += len;
			n[j]++;
		}
		meta->cnt[j] = n[j];
		st->npages += n[j];
	}

	perm = xmalloc(st->npages * sizeof(*perm));
	for (uint32_t i = 0; i < st->npages; i++)
		perm[i] = i;
	for (uint32_t i = st->npages - 1; i > 0; i--) {
		uint32_t k = (uint32_t)(next() % (i + 1)), t = perm[i];

		perm[i] = perm[k];
		perm[k] = t;
	}
	st->bounce_h = xmalloc((size_t)st->npages * PAGE);
	for (size_t i = 0; i + 8 <= (size_t)st->npages * PAGE; i += 8) {
		uint64_t v = next();

		memcpy(st->bounce_h + i, &v, 8);
	}
	st->ref = xmalloc(total);
	st->hostmap = hostmap;
	if (hostmap)
		CKC(cudaHostAlloc((void **)&st->bounce, (size_t)st->npages * PAGE,
				  cudaHostAllocMapped));
	else
		CKC(cudaMalloc((void **)&st->bounce, (size_t)st->npages * PAGE));
	CKC(cudaMalloc((void **)&st->dst, total));
	CKC(cudaMalloc((void **)&st->src, total));
	if (hostmap)
		memcpy(st->bounce, st->bounce_h, (size_t)st->npages * PAGE);
	else
		CKC(cudaMemcpy(st->bounce, st->bounce_h, (size_t)st->npages * PAGE,
			       cudaMemcpyHostToDevice));
	CKC(cudaHostGetDevicePointer(&dm, meta, 0));
	for (int j = 0; j < nchunks; j++) {
		for (uint32_t i = 0; i < n[j]; i++, p++) {
			tp_unpack_rec *r = &meta->mem[j][i];

			r->src_off += perm[p] * PAGE;
			memcpy(st->ref + j * chunk + r->dst_off, st->bounce_h + r->src_off, r->len);
		}
		st->jobs[j].recs = ((struct tp_unpack_meta *)dm)->mem[j];
		st->jobs[j].cnt = n[j];
		st->jobs[j].bounce = st->bounce;
		st->jobs[j].dst = st->dst + j * chunk;
		st->jobs[j].len = (uint32_t)chunk;
		/* both cudaMalloc'd; mapped host pages count as device memory, as
		 * the library counts the simulator's (their UVA address) */
		st->jobs[j].bounce_dev = st->jobs[j].dst_pinned = true;
	}
	/* memcpy copies the same payload bytes from a contiguous source. */
	CKC(cudaMemcpy(st->src, st->ref, total, cudaMemcpyHostToDevice));
	CKC(cudaMalloc((void **)&st->dmeta, sizeof(*meta)));
	CKC(cudaMemcpy(st->dmeta, meta, sizeof(*meta), cudaMemcpyHostToDevice));
	for (int j = 0; j < nchunks; j++) {
		st->jobs_dev[j] = st->jobs[j];
		st->jobs_dev[j].recs = st->dmeta->mem[j];
	}
	free(perm);
}

static void setup_destroy(struct setup *st)
{
	CKC(cudaFree(st->dmeta));
	CKC(cudaFree(st->src));
	CKC(cudaFree(st->dst));
	if (st->hostmap)
		CKC(cudaFreeHost(st->bounce));
	else
		CKC(cudaFree(st->bounce));
	free(st->ref);
	free(st->bounce_h);
}

static void run_once(struct setup *st, enum variant var)
{
	tp__dev_unpack_set_inline(var == VAR_KERNEL);
	tp__dev_stream_set_batch(stream, var != VAR_D2D_ONE && var != VAR_HOST_ONE);
	switch (var) {
	case VAR_KERNEL:
	case VAR_KERNEL_RING:
		CK(tp__dev_unpack_kernel(stream, st->jobs, st->nchunks));
		break;
	case VAR_KERNEL_DEVMETA:
		CK(tp__dev_unpack_kernel(stream, st->jobs_dev, st->nchunks));
		break;
	case VAR_D2D:
	case VAR_D2D_ONE:
		for (int j = 0; j < st->nchunks; j++)
			CK(tp__dev_unpack_d2d(stream, &st->jobs[j]));
		break;
	case VAR_HOST:
	case VAR_HOST_ONE:
		for (int j = 0; j < st->nchunks; j++)
			CK(tp__dev_unpack_host(stream, &st->jobs[j]));
		break;
	default:
		for (int j = 0; j < st->nchunks; j++)
			CKC(cudaMemcpyAsync(st->dst + j * st->chunk, st->src + j * st->chunk,
					    st->chunk, cudaMemcpyDeviceToDevice, (cudaStream_t)tp__dev_stream_cuda(stream)));
		break;
	}
}

static int verify(struct setup *st, enum variant var)
{
	size_t total = (size_t)st->nchunks * st->chunk;
	unsigned char *out = xmalloc(total);
	int bad;

	CKC(cudaMemsetAsync(st->dst, POISON, total, (cudaStream_t)tp__dev_stream_cuda(stream)));
	run_once(st, var);
	CK(tp__dev_stream_sync(stream));
	CKC(cudaMemcpy(out, st->dst, total, cudaMemcpyDeviceToHost));
	bad = memcmp(out, st->ref, total) != 0;
	if (bad)
		fprintf(stderr, "unpack_bench: %s/%s x%d: output differs from the reference\n",
			layout_name[st->lay], variant_name[var], st->nchunks);
	free(out);
	return bad;
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return (x > y) - (x < y);
}

/* Median milliseconds of one repetition. */
static float time_variant(struct setup *st, enum variant var, const struct opts *o, float *ms)
{
	cudaEvent_t t0, t1;
	float med;

	CKC(cudaEventCreate(&t0));
	CKC(cudaEventCreate(&t1));
	for (int i = 0; i < o->warmup; i++)
		run_once(st, var);
	CK(tp__dev_stream_sync(stream));
	for (int i = 0; i < o->reps; i++) {
		CKC(cudaEventRecord(t0, (cudaStream_t)tp__dev_stream_cuda(stream)));
		run_once(st, var);
		CKC(cudaEventRecord(t1, (cudaStream_t)tp__dev_stream_cuda(stream)));
		CKC(cudaEventSynchronize(t1));
		CKC(cudaEventElapsedTime(&ms[i], t0, t1));
	}
	qsort(ms, (size_t)o->reps, sizeof(*ms), cmp_float);
	med = o->reps & 1 ? ms[o->reps / 2] : (ms[o->reps / 2 - 1] + ms[o->reps / 2]) / 2;
	CKC(cudaEventDestroy(t1));
	CKC(cudaEventDestroy(t0));
	return med;
}

/* Launch latency alone: every job's cnt is 0 (no record read or copied). */
static float kernel_floor(int njobs, const struct opts *o, float *ms)
{
	struct setup st;

	memset(&st, 0, sizeof(st));
	st.nchunks = njobs;
	for (int j = 0; j < njobs; j++) {
		void *dm;

		meta->cnt[j] = 0;
		CKC(cudaHostGetDevicePointer(&dm, meta, 0));
		st.jobs[j].recs = ((struct tp_unpack_meta *)dm)->mem[j];
		st.jobs[j].cnt = 0;
	}
	return time_variant(&st, VAR_KERNEL, o, ms) * 1e3f;
}

int main(int argc, char **argv)
{
	static const int counts[] = { 1, 4, 16 };
	struct cudaDeviceProp prop;
	struct opts o;
	float *ms;
	int ngpu, bad = 0;

	if (parse(argc, argv, &o))
		return 1;
	CK(tp__dev_count(&ngpu));
	if (ngpu == 0) {
		fprintf(stderr, "unpack_bench: no CUDA device: skipping\n");
		return 77;
	}
	CK(tp__dev_set(o.gpu));
	CKC(cudaGetDeviceProperties(&prop, o.gpu));
	CK(tp__dev_stream_create(&stream));
	CKC(cudaHostAlloc((void **)&meta, sizeof(*meta), cudaHostAllocMapped));
	ms = xmalloc((size_t)o.reps * sizeof(*ms));
	if (o.blocks)
		CK(tp__dev_unpack_set_blocks(o.blocks));

	if (!o.json) {
		printf("# unpack_bench on %s: %zu-byte chunks, bounce pages in %s memory, median of %d "
		       "reps after %d warm-up\n"
		       "# GB/s = 1e9 bytes of chunk payload per second; us/chunk = median time / "
		       "chunks\n",
		       prop.name, o.chunk, o.hostmap ? "mapped host" : "device", o.reps, o.warmup);
		printf("# kernel floor (every cnt 0): %.2f us for 1 job, %.2f us for 16 jobs\n",
		       kernel_floor(1, &o, ms), kernel_floor(16, &o, ms));
		printf("%-7s %-9s %7s %10s %10s %9s\n", "layout", "variant", "chunks", "frags",
		       "GB/s", "us/chunk");
	}
	for (int lay = LAYOUT_EMU; lay <= LAYOUT_PAGES; lay++) {
		for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
			struct setup st;

			setup_create(&st, lay, counts[c], o.chunk, o.hostmap);
			for (int var = 0; var < NVARIANTS; var++) {
				size_t bytes = (size_t)st.nchunks * st.chunk;
				float med;

				if (verify(&st, var)) {
					bad = 1;
					continue;
				}
				med = time_variant(&st, var, &o, ms);
				if (o.json)
					printf("{\"layout\":\"%s\",\"variant\":\"%s\",\"chunks\":%d,"
					       "\"chunk_bytes\":%zu,\"frags\":%u,\"median_us\":%.3f,"
					       "\"gbps\":%.3f,\"us_per_chunk\":%.3f}\n",
					       layout_name[lay], variant_name[var], st.nchunks,
					       st.chunk, st.npages, med * 1e3, bytes / (med * 1e6),
					       med * 1e3 / st.nchunks);
				else
					printf("%-7s %-9s %7d %10u %10.1f %9.2f\n", layout_name[lay],
					       variant_name[var], st.nchunks, st.npages,
					       bytes / (med * 1e6), med * 1e3 / st.nchunks);
			}
			setup_destroy(&st);
		}
	}
	free(ms);
	CKC(cudaFreeHost(meta));
	tp__dev_stream_destroy(stream);
	return bad;
}
