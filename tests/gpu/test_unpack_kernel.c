/* The three unpack variants against a CPU reference: random fragment
 * layouts (scattered, shuffled 4 KiB bounce pages, random intra-page
 * offsets and lengths), chunk sizes from 0 B to 4 MiB, 1-32 jobs per
 * kernel launch, unaligned destinations, device and host memory.  The
 * whole destination allocation is compared, so a byte written outside a
 * chunk (or a record beyond cnt copied) fails the test. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "device/dev_priv.h"
#include "device/dev_tune.h"
#include "gpu_check.h"
#include "tcpx_p2p.h"

#define PAGE TP_UNPACK_PAGE_SIZE
#define GUARD 4096
#define POISON 0xa5
#define NMETA 2 /* 32 jobs use slots k % 16 of two rings */

enum layout { LAYOUT_RANDOM, LAYOUT_ALIGNED, LAYOUT_EMU };
enum variant { VAR_KERNEL, VAR_D2D, VAR_HOST };

static const char *const layout_name[] = { "random", "aligned16", "emu" };
static const char *const variant_name[] = { "kernel", "d2d", "host" };

static const uint64_t sizes[] = {
	0, 1, 17, 4095, 4096, 4097, 65536 + 13, 512 << 10, (1 << 20) + 1, 4 << 20,
};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
static const uint32_t dst_shifts[] = { 0, 1, 3, 5, 8, 13, 15, 4 };
#define NSHIFTS (sizeof(dst_shifts) / sizeof(dst_shifts[0]))

static struct tp_unpack_meta *meta[NMETA];
static tp_dev_stream *stream;


/* Split [0, size) into fragments; each gets (page-less) src_off = intra-page
 * offset for now.  At most TP_UNPACK_MAX_PAGES fragments, as on TCPX. */
static uint32_t gen_layout(tp_unpack_rec *rec, uint64_t size, enum layout lay)
{
	uint64_t off = 0;
	uint32_t n = 0;

	while (off < size) {
		uint64_t left = size - off;
		uint64_t slack = (uint64_t)(TP_UNPACK_MAX_PAGES - n - 1) * PAGE;
		uint32_t min = left > slack ? (uint32_t)(left - slack) : 1;
		uint32_t max = left < PAGE ? (uint32_t)left : PAGE;
		uint32_t len, intra;

		switch (lay) {
		case LAYOUT_EMU:
			intra = below(PAGE / 2);
			len = PAGE - intra;
			break;
		case LAYOUT_ALIGNED:
			len = 16 * (1 + below(PAGE / 16));
			intra = 16 * below((PAGE - len) / 16 + 1);
			break;
		default:
			len = next() & 1 ? PAGE : 1 + below(PAGE);
			intra = 0;
			break;
		}
		len = len < min ? min : len > max ? max : len;
		if (lay == LAYOUT_RANDOM || intra > PAGE - len)
			intra = below(PAGE - len + 1);
		rec[n].src_off = intra;
		rec[n].len = len;
		rec[n].dst_off = off;
		off += len;
		n++;
	}
	return n;
}

struct batch {
	int njobs;
	uint64_t size[TP_UNPACK_MAX_JOBS];
	uint32_t shift[TP_UNPACK_MAX_JOBS];
	int host_bounce, host_dst;
};

/* One batch: lay out, fill, run the variant, compare everything. */
static void run_batch(const struct batch *b, enum layout lay, enum variant var)
{
	static tp_unpack_rec recs[TP_UNPACK_MAX_JOBS][TP_UNPACK_MAX_PAGES];
	struct tp_unpack_job jobs[TP_UNPACK_MAX_JOBS];
	uint32_t nrec[TP_UNPACK_MAX_JOBS], npages = 0, *perm;
	uint64_t region[TP_UNPACK_MAX_JOBS], dst_bytes = 0;
	unsigned char *bounce_h, *ref, *out;
	char *bounce, *dst;

	for (int j = 0; j < b->njobs; j++) {
		nrec[j] = gen_layout(recs[j], b->size[j], lay);
		npages += nrec[j];
		region[j] = dst_bytes;
		/* 16-aligned regions: the shift alone sets the dst alignment. */
		dst_bytes = (dst_bytes + GUARD + b->size[j] + GUARD + 15) & ~(uint64_t)15;
	}
	/* Every fragment on its own page, pages of all jobs shuffled together. */
	npages = npages ? npages : 1;
	perm = malloc(npages * sizeof(*perm));
	bounce_h = malloc((size_t)npages * PAGE);
	ref = malloc(dst_bytes);
	out = malloc(dst_bytes);
	if (!perm || !bounce_h || !ref || !out) {
		FAIL("out of host memory");
		exit(1);
	}
	for (uint32_t i = 0; i < npages; i++)
		perm[i] = i;
	for (uint32_t i = npages - 1; i > 0; i--) {
		uint32_t k = below(i + 1), t = perm[i];

		perm[i] = perm[k];
		perm[k] = t;
	}
	for (size_t i = 0; i < (size_t)npages * PAGE; i += 8) {
		uint64_t v = next();

		memcpy(bounce_h + i, &v, 8);
	}
	memset(ref, POISON, dst_bytes);

	if (b->host_bounce) {
		bounce = (char *)bounce_h;
	} else {
		CKC(cudaMalloc((void **)&bounce, (size_t)npages * PAGE));
		CKC(cudaMemcpy(bounce, bounce_h, (size_t)npages * PAGE, cudaMemcpyHostToDevice));
	}
	if (b->host_dst) {
		dst = malloc(dst_bytes);
		if (!dst) {
			FAIL("out of host memory");
			exit(1);
		}
		memset(dst, POISON, dst_bytes);
	} else {
		CKC(cudaMalloc((void **)&dst, dst_bytes));
		CKC(cudaMemset(dst, POISON, dst_bytes));
	}
	/* The copy from pageable memory and the memset may both still run on
	 * the legacy stream, which the kernel's non-blocking stream does not
	 * wait for. */
	CKC(cudaDeviceSynchronize());

	for (int j = 0, p = 0; j < b->njobs; j++) {
		struct tp_unpack_meta *m = meta[j / TP_UNPACK_QUEUE_DEPTH];
		int slot = j % TP_UNPACK_QUEUE_DEPTH;
		uint64_t base = region[j] + GUARD + b->shift[j];
		void *dm;

		for (uint32_t i = 0; i < nrec[j]; i++, p++) {
			recs[j][i].src_off += perm[p] * PAGE;
			memcpy(ref + base + recs[j][i].dst_off, bounce_h + recs[j][i].src_off,
			       recs[j][i].len);
			m->mem[slot][i] = recs[j][i];
		}
		/* Stale records past cnt aim at the guard zone: copying any of
		 * them (the kernel must stop at cnt) shows up as lost poison. */
		for (uint32_t i = nrec[j]; i < nrec[j] + 4 && i < TP_UNPACK_MAX_PAGES; i++) {
			m->mem[slot][i].src_off = 0;
			m->mem[slot][i].len = 64;
			m->mem[slot][i].dst_off = b->size[j] + 8;
		}
		m->cnt[slot] = nrec[j];
		CKC(cudaHostGetDevicePointer(&dm, m, 0));
		jobs[j].recs = ((struct tp_unpack_meta *)dm)->mem[slot];
		jobs[j].cnt = nrec[j];
		jobs[j].bounce = bounce;
		jobs[j].dst = dst + base;
		jobs[j].len = (uint32_t)b->size[j];
		jobs[j].bounce_dev = !b->host_bounce;
		jobs[j].dst_pinned = !b->host_dst;
	}

	if (var == VAR_KERNEL) {
		CK(tp__dev_unpack_kernel(stream, jobs, b->njobs));
	} else {
		for (int j = 0; j < b->njobs; j++)
			CK((var == VAR_D2D ? tp__dev_unpack_d2d : tp__dev_unpack_host)(stream, &jobs[j]));
	}
	CK(tp__dev_stream_sync(stream));
	if (b->host_dst)
		memcpy(out, dst, dst_bytes);
	else
		CKC(cudaMemcpy(out, dst, dst_bytes, cudaMemcpyDeviceToHost));

	if (memcmp(out, ref, dst_bytes)) {
		uint64_t i = 0;
		int j = 0;

		while (out[i] == ref[i])
			i++;
		while (j + 1 < b->njobs && region[j + 1] <= i)
			j++;
		FAIL("%s/%s njobs %d%s%s: job %d (size %llu, dst shift %u) byte %lld of the "
		     "chunk is 0x%02x, want 0x%02x",
		     layout_name[lay], variant_name[var], b->njobs,
		     b->host_bounce ? " host-bounce" : "", b->host_dst ? " host-dst" : "", j,
		     (unsigned long long)b->size[j], b->shift[j],
		     (long long)(i - region[j] - GUARD - b->shift[j]), out[i], ref[i]);
	}

	if (b->host_dst)
		free(dst);
	else
		CKC(cudaFree(dst));
	if (!b->host_bounce)
		CKC(cudaFree(bounce));
	free(out);
	free(ref);
	free(bounce_h);
	free(perm);
}

/* Each size alone, then 4, 16 and 32 jobs per batch cycling through the
 * sizes and destination shifts. */
static void run_all(enum layout lay, enum variant var, int host_bounce, int host_dst)
{
	static const int njobs[] = { 4, 16, 32 };
	struct batch b = { .host_bounce = host_bounce, .host_dst = host_dst };

	for (size_t s = 0; s < NSIZES; s++) {
		b.njobs = 1;
		b.size[0] = sizes[s];
		b.shift[0] = dst_shifts[s % NSHIFTS];
		run_batch(&b, lay, var);
	}
	/* Host memory through pageable copies is slow: one batch is enough. */
	for (size_t k = host_bounce || host_dst ? 1 : 0; k < (host_bounce || host_dst ? 2 : 3); k++) {
		b.njobs = njobs[k];
		for (int j = 0; j < b.njobs; j++) {
			b.size[j] = sizes[(j + k) % NSIZES];
			b.shift[j] = dst_shifts[(j * 3 + k) % NSHIFTS];
		}
		run_batch(&b, lay, var);
	}
}

/* A record reaching past its chunk (a sender larger than the receive, on
 * TCPX where sizes are overwritten): the kernel copies the good records,
 * skips the bad one and flags the stream; d2d and host refuse the job. */
static void check_out_of_range(void)
{
	const uint32_t len = 8192;
	char *bounce, *dst, out[3 * 8192];
	struct tp_unpack_job job;
	void *dm;
	int bad = 0;

	CKC(cudaMalloc((void **)&bounce, 2 * PAGE));
	CKC(cudaMemset(bounce, 0x11, 2 * PAGE));
	CKC(cudaMalloc((void **)&dst, sizeof(out)));
	CKC(cudaMemset(dst, POISON, sizeof(out)));
	CKC(cudaDeviceSynchronize()); /* legacy-stream memsets: done only now */
	meta[0]->mem[0][0] = (tp_unpack_rec){ .src_off = 0, .len = PAGE, .dst_off = 0 };
	meta[0]->mem[0][1] = (tp_unpack_rec){ .src_off = PAGE, .len = PAGE, .dst_off = len };
	meta[0]->cnt[0] = 2;
	CKC(cudaHostGetDevicePointer(&dm, meta[0], 0));
	job = (struct tp_unpack_job){ .recs = ((struct tp_unpack_meta *)dm)->mem[0], .cnt = 2,
				      .bounce = bounce, .dst = dst, .len = len,
				      .bounce_dev = true, .dst_pinned = true };
	CK(tp__dev_stream_error(stream, &bad));
	CK(tp__dev_unpack_kernel(stream, &job, 1));
	CK(tp__dev_stream_sync(stream));
	CK(tp__dev_stream_error(stream, &bad));
	if (!bad)
		FAIL("kernel: record outside the chunk not flagged");
	CK(tp__dev_stream_error(stream, &bad));
	if (bad)
		FAIL("stream error flag not cleared by reading it");
	CKC(cudaMemcpy(out, dst, sizeof(out), cudaMemcpyDeviceToHost));
	if (out[0] != 0x11 || out[PAGE - 1] != 0x11)
		FAIL("kernel: the record inside the chunk was not copied");
	for (size_t i = len; i < sizeof(out); i++) {
		if ((unsigned char)out[i] != POISON) {
			FAIL("kernel: byte %zu past the chunk written", i);
			break;
		}
	}
	job.recs = meta[0]->mem[0];
	if (tp__dev_unpack_d2d(stream, &job) != TCPX_P2P_EPLUGIN)
		FAIL("d2d: record outside the chunk accepted");
	if (tp__dev_unpack_host(stream, &job) != TCPX_P2P_EPLUGIN)
		FAIL("host: record outside the chunk accepted");
	CK(tp__dev_stream_sync(stream));
	CKC(cudaFree(dst));
	CKC(cudaFree(bounce));
}

int main(void)
{
	struct tp_unpack_job none[1] = { { 0 } };
	int ngpu;

	rng = 0x243f6a8885a308d3ull;

	CK(tp__dev_count(&ngpu));
	if (ngpu == 0) {
		printf("no CUDA device: skipping\n");
		return 77;
	}
	CK(tp__dev_set(0));
	CK(tp__dev_stream_create(&stream));
	for (int i = 0; i < NMETA; i++)
		CKC(cudaHostAlloc((void **)&meta[i], sizeof(*meta[i]), cudaHostAllocMapped));

	if (tp__dev_unpack_kernel(stream, none, TP_UNPACK_MAX_JOBS + 1) != TCPX_P2P_EINVAL)
		FAIL("a launch of %d jobs was accepted", TP_UNPACK_MAX_JOBS + 1);
	CK(tp__dev_unpack_kernel(stream, none, 0));

	for (int lay = LAYOUT_RANDOM; lay <= LAYOUT_EMU; lay++)
		for (int var = VAR_KERNEL; var <= VAR_HOST; var++)
			run_all(lay, var, 0, 0);
	/* Single jobs of few records went with their records in the launch;
	 * now every launch reads the ring (test-hook builds: the knobs of
	 * dev_tune.h).  And the copies one call each, as with a runtime
	 * without batch copies. */
#if TP_TEST_HOOKS
	tp__dev_unpack_set_inline(false);
	for (int lay = LAYOUT_RANDOM; lay <= LAYOUT_EMU; lay++)
		run_all(lay, VAR_KERNEL, 0, 0);
	tp__dev_unpack_set_inline(true);
#endif
	stream->batch_ok = false;
	for (int var = VAR_D2D; var <= VAR_HOST; var++)
		run_all(LAYOUT_RANDOM, var, 0, 0);
	stream->batch_ok = true;
	/* Other grid shapes: 1 and 7 blocks give warps several 32-record
	 * batches; 256 gives every warp a single record. */
#if TP_TEST_HOOKS
	if (tp__dev_unpack_set_blocks(0) != TCPX_P2P_EINVAL)
		FAIL("0 blocks per job accepted");
	for (size_t i = 0; i < 3; i++) {
		static const int blocks[] = { 1, 7, 256 };

		CK(tp__dev_unpack_set_blocks(blocks[i]));
		run_all(LAYOUT_RANDOM, VAR_KERNEL, 0, 0);
	}
	CK(tp__dev_unpack_set_blocks(32));
#endif
	check_out_of_range();
#if TP_TEST_HOOKS
	tp__dev_unpack_set_inline(false);
	check_out_of_range();
	tp__dev_unpack_set_inline(true);
#endif
	for (int var = VAR_D2D; var <= VAR_HOST; var++) {
		run_all(LAYOUT_RANDOM, var, 1, 0);
		run_all(LAYOUT_RANDOM, var, 0, 1);
		run_all(LAYOUT_RANDOM, var, 1, 1);
	}

	for (int i = 0; i < NMETA; i++)
		CKC(cudaFreeHost(meta[i]));
	tp__dev_stream_destroy(stream);
	printf("%s\n", failures ? "FAILED" : "all unpack checks passed");
	return failures ? 1 : 0;
}
