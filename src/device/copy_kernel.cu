/* The copy-list kernel: one launch performs every copy of a vectored
 * transfer (the gather before a send, the scatter after a receive).  An
 * entry is copied by one thread block (by one warp below TP_COPY_SHORT);
 * entries are at most TP_COPY_MAX_ENTRY, so blocks get similar work and no
 * entry needs several blocks to agree. */
#include <stddef.h>
#include <stdint.h>

#include "abi/dev_copy.cuh"
#include "dev_priv.h"

#define TP_COPY_THREADS 256 /* a 64 KiB entry in two unrolled rounds of uint4 */
#define TP_COPY_WARPS (TP_COPY_THREADS / 32)
/* 4 blocks per SM: ptxas may then give a thread the 64 registers that keep
 * all TP_COPY_UNROLL uint4 loads in flight (it would squeeze a block of 256
 * into 32 registers for full occupancy).  A gather of a few dozen entries
 * runs one block per SM, and those loads in flight are its bandwidth. */
#define TP_COPY_MIN_BLOCKS 4
/* The grid: 4096 blocks fill any current GPU for a few waves; a longer list
 * gives each block a run of consecutive entries. */
#define TP_COPY_MAX_BLOCKS 4096u
/* Entries a block reads at once: its run in one coalesced read, where one
 * read per entry would cost a PCIe round trip each for a list in host
 * memory. */
#define TP_COPY_BATCH 32
/* Shorter entries are copied by one warp each, the block's warps taking
 * eight at a time: the whole block on a 7-byte entry would leave all but
 * 7 threads idle and wait out the load latency of every entry in turn. */
#define TP_COPY_SHORT 512
/* An entry longer than the contract allows is still copied whole, in
 * pieces the 32-bit routines take (a multiple of 16: the relative
 * alignment of src and dst stays that of the entry). */
#define TP_COPY_PIECE (1ull << 30)

/* The kernel reads an entry as three 64-bit words. */
static_assert(sizeof(struct tp_copy) == 24 && offsetof(struct tp_copy, src) == 0 &&
		      offsetof(struct tp_copy, dst) == 8 && offsetof(struct tp_copy, len) == 16,
	      "struct tp_copy layout");
static_assert(3 * TP_COPY_BATCH <= TP_COPY_THREADS, "one word of the batch per thread");

template <unsigned W>
static __device__ __forceinline__ void copy_entry(const unsigned long long *e, unsigned t)
{
	const char *s = (const char *)e[0];
	char *d = (char *)e[1];
	uint64_t len = e[2];

	for (uint64_t off = 0; off < len; off += TP_COPY_PIECE) {
		uint64_t k = len - off < TP_COPY_PIECE ? len - off : TP_COPY_PIECE;

		tp_copy_range<W>(d + off, s + off, (uint32_t)k, t);
	}
}

/* Block b copies entries [b * per, (b + 1) * per) of the n.  The list
 * words are read with __ldcv: a caller may rewrite a pinned list between
 * launches, and no cached copy of the last one may answer. */
static __global__ void __launch_bounds__(TP_COPY_THREADS, TP_COPY_MIN_BLOCKS)
	tp_copy_list(const unsigned long long *list, uint32_t n, uint32_t per)
{
	__shared__ unsigned long long e[TP_COPY_BATCH][3];
	unsigned t = threadIdx.x, lane = t & 31, warp = t / 32;
	uint64_t first = (uint64_t)blockIdx.x * per;
	uint64_t last = first + per < n ? first + per : n;

	for (uint64_t base = first; base < last; base += TP_COPY_BATCH) {
		unsigned k = last - base < TP_COPY_BATCH ? (unsigned)(last - base) : TP_COPY_BATCH;

		__syncthreads(); /* every thread is done with the last batch */
		if (t < 3 * k)
			e[t / 3][t % 3] = __ldcv(list + 3 * base + t);
		__syncthreads();
		for (unsigned j = 0; j < k; j++)
			if (e[j][2] >= TP_COPY_SHORT)
				copy_entry<TP_COPY_THREADS>(e[j], t);
		for (unsigned j = warp; j < k; j += TP_COPY_WARPS)
			if (e[j][2] < TP_COPY_SHORT)
				copy_entry<32>(e[j], lane);
	}
}

extern "C" int tp__dev_copy_load(void)
{
	cudaFuncAttributes fa;

	return TP_CUDA(cudaFuncGetAttributes, &fa, tp_copy_list);
}

extern "C" int tp__dev_copy_kernel(tp_dev_stream *s, const struct tp_copy *list, uint32_t n)
{
	uint32_t per, blocks;

	if (!n)
		return 0;
	tp__dev_delay_op(s->st);
	/* (rounding up without n + d - 1, which wraps for n near 2^32) */
	per = n / TP_COPY_MAX_BLOCKS + (n % TP_COPY_MAX_BLOCKS != 0);
	blocks = n / per + (n % per != 0);
	tp_copy_list<<<blocks, TP_COPY_THREADS, 0, s->st>>>((const unsigned long long *)list, n, per);
	return tp__dev_cuda_check(cudaGetLastError(), "tp_copy_list<<<>>>");
}
