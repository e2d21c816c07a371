/* The unpack kernel: one launch gathers the bounce-buffer fragments of up
 * to TP_UNPACK_MAX_JOBS received chunks into their destinations.  The
 * host passes the job table by value (with each chunk's record count, read
 * from host memory).  A launch of few records carries the records too (a
 * plain copy out of the ring, no parsing: the kernel checks them); a
 * larger one reads them from the pinned, device-mapped meta ring itself. */
#include <stdint.h>
#include <string.h>

#include "abi/dev_copy.cuh"
#include "dev_priv.h"
#include "dev_tune.h"
extern "C" {
#include "util/error.h"
}

#define TP_UNPACK_THREADS 256
#define TP_UNPACK_WARPS (TP_UNPACK_THREADS / 32)
/* Blocks per job: up to 256 warps, so a 4 MiB chunk (up to 2048 records)
 * gives each warp at most 8 and a 512 KiB one about one per warp. */
#define TP_UNPACK_BLOCKS 32

struct tp_unpack_args {
	struct tp_unpack_job job[TP_UNPACK_MAX_JOBS];
	unsigned *err; /* mapped: set when a record lies outside its chunk */
};

/* A launch whose records the host copied into the parameters: no read of
 * the ring (a dependent PCIe round trip, ~10 us of a 20 us single-chunk
 * unpack on an H200) before the copies start.  Two sizes, since every
 * launch passes its whole parameter block: one within the classic 4 KiB
 * for a single chunk, one within the 32 KiB that CUDA 12.1+ allows
 * (Volta and later) for a few chunks. */
template <int JOBS, int RECS>
struct tp_unpack_inline_args {
	struct tp_unpack_job job[JOBS]; /* recs unused */
	uint32_t first[JOBS];           /* the job's records in rec */
	unsigned *err;
	tp_unpack_rec rec[RECS];
};

typedef struct tp_unpack_inline_args<4, 240> tp_inline_small;
static_assert(sizeof(tp_inline_small) <= 4096, "small inline launch within 4 KiB");
#if CUDART_VERSION >= 12010
#define TP_UNPACK_INLINE_LARGE 1
typedef struct tp_unpack_inline_args<16, 1600> tp_inline_large;
static_assert(sizeof(tp_inline_large) <= 32764, "large inline launch within 32 KiB");
#else
#define TP_UNPACK_INLINE_LARGE 0
#endif

/* One record with the whole warp; a record outside its chunk is skipped
 * and flagged.  Every argument is uniform across the warp. */
static __device__ __forceinline__ void unpack_rec(const struct tp_unpack_job *job,
						  uint32_t src_off, uint32_t len,
						  uint64_t dst_off, unsigned *err, int lane)
{
	if (len > TP_UNPACK_PAGE_SIZE || dst_off > job->len || len > job->len - dst_off) {
		if (lane == 0)
			atomicOr(err, 1u);
		return;
	}
	tp_copy_range<32>(job->dst + dst_off, job->bounce + src_off, len, lane);
}

/* Grid: x = blocks per job, y = job.  Each warp owns a contiguous range of
 * the records below cnt (passed by value), loads up to 32 of them at once
 * (one 16-byte load per lane, coalesced) and copies them one after another
 * with the whole warp.  The ring is in host memory: every read of it is a
 * PCIe round trip, so nothing reads records past cnt. */
static __global__ void __launch_bounds__(TP_UNPACK_THREADS)
	tp_unpack(const __grid_constant__ struct tp_unpack_args a)
{
	const struct tp_unpack_job *job = &a.job[blockIdx.y];
	int lane = threadIdx.x & 31;
	uint32_t warp = blockIdx.x * TP_UNPACK_WARPS + threadIdx.x / 32;
	uint32_t nwarps = gridDim.x * TP_UNPACK_WARPS;
	uint32_t cnt = min(job->cnt, (uint32_t)TP_UNPACK_MAX_PAGES);
	uint32_t per = (cnt + nwarps - 1) / nwarps;
	uint32_t first = warp * per;
	uint32_t last = min(first + per, cnt);
	const uint4 *recs = (const uint4 *)job->recs;

	for (uint32_t base = first; base < last; base += 32) {
		uint32_t n = min(last - base, 32u);
		uint4 r = make_uint4(0, 0, 0, 0);

		if ((uint32_t)lane < n)
			r = __ldcv(recs + base + lane);
		for (uint32_t k = 0; k < n; k++) {
			uint64_t dst_off = ((uint64_t)__shfl_sync(0xffffffffu, r.w, k) << 32) |
					   __shfl_sync(0xffffffffu, r.z, k);

			unpack_rec(job, __shfl_sync(0xffffffffu, r.x, k),
				   __shfl_sync(0xffffffffu, r.y, k), dst_off, a.err, lane);
		}
	}
}

/* The same copies from records in the parameters: warp w of a job takes
 * records w, w + nwarps, ...; the whole warp reads one record (a uniform
 * parameter load, served from the constant cache). */
template <typename Args>
static __global__ void __launch_bounds__(TP_UNPACK_THREADS)
	tp_unpack_inline(const __grid_constant__ Args a)
{
	const struct tp_unpack_job *job = &a.job[blockIdx.y];
	int lane = threadIdx.x & 31;
	uint32_t nwarps = gridDim.x * TP_UNPACK_WARPS;
	const tp_unpack_rec *rec = a.rec + a.first[blockIdx.y];

	for (uint32_t i = blockIdx.x * TP_UNPACK_WARPS + threadIdx.x / 32; i < job->cnt;
	     i += nwarps)
		unpack_rec(job, rec[i].src_off, rec[i].len, rec[i].dst_off, a.err, lane);
}

#if TP_TEST_HOOKS
static int unpack_blocks = TP_UNPACK_BLOCKS;
static bool inline_on = true;

extern "C" int tp__dev_unpack_set_blocks(int blocks)
{
	if (blocks < 1 || blocks > TP_UNPACK_MAX_PAGES / TP_UNPACK_WARPS)
		return tp__error(TCPX_P2P_EINVAL, "%d unpack blocks per job", blocks);
	unpack_blocks = blocks;
	return 0;
}

extern "C" void tp__dev_unpack_set_inline(bool on)
{
	inline_on = on;
}
#else
static const int unpack_blocks = TP_UNPACK_BLOCKS;
static const bool inline_on = true;
#endif

/* Launch jobs with their records in an Args block, read here from the
 * ring in host memory; false when they do not fit. */
template <int JOBS, int RECS>
static bool launch_inline(tp_dev_stream *s, const struct tp_unpack_job *jobs, int njobs,
			  cudaError_t *err)
{
	struct tp_unpack_inline_args<JOBS, RECS> a;
	uint32_t n = 0, most = 0;

	if (njobs > JOBS)
		return false;
	for (int i = 0; i < njobs; i++) {
		uint32_t cnt = min(jobs[i].cnt, (uint32_t)TP_UNPACK_MAX_PAGES);

		if (cnt > RECS - n)
			return false;
		a.job[i] = jobs[i];
		a.job[i].cnt = cnt;
		a.first[i] = n;
		memcpy(&a.rec[n], jobs[i].recs, cnt * sizeof(tp_unpack_rec));
		n += cnt;
		most = max(most, cnt);
	}
	a.err = s->err_dev;
	/* one record per warp, within the configured blocks */
	unsigned blocks = min((most + TP_UNPACK_WARPS - 1) / TP_UNPACK_WARPS,
			      (unsigned)unpack_blocks);
	tp_unpack_inline<<<dim3(max(blocks, 1u), njobs), TP_UNPACK_THREADS, 0, s->st>>>(a);
	*err = cudaGetLastError();
	return true;
}

extern "C" int tp__dev_unpack_load(void)
{
	cudaFuncAttributes fa;
	int rc = TP_CUDA(cudaFuncGetAttributes, &fa, tp_unpack);

	if (!rc)
		rc = TP_CUDA(cudaFuncGetAttributes, &fa, tp_unpack_inline<tp_inline_small>);
#if TP_UNPACK_INLINE_LARGE
	if (!rc)
		rc = TP_CUDA(cudaFuncGetAttributes, &fa, tp_unpack_inline<tp_inline_large>);
#endif
	return rc;
}

extern "C" int tp__dev_unpack_kernel(tp_dev_stream *s, const struct tp_unpack_job *jobs, int njobs)
{
	struct tp_unpack_args a;
	cudaError_t err;

	if (njobs < 0 || njobs > TP_UNPACK_MAX_JOBS)
		return tp__error(TCPX_P2P_EINVAL, "%d unpack jobs in one launch (at most %d)", njobs,
				 TP_UNPACK_MAX_JOBS);
	if (!njobs)
		return 0;
	tp__dev_delay_op(s->st);
	/* Few records (a latency-bound chunk or two) go in the parameters;
	 * the rest read the ring from the kernel. */
	if (inline_on && (launch_inline<4, 240>(s, jobs, njobs, &err)
#if TP_UNPACK_INLINE_LARGE
			  || launch_inline<16, 1600>(s, jobs, njobs, &err)
#endif
			  ))
		return tp__dev_cuda_check(err, "tp_unpack_inline<<<>>>");
	for (int i = 0; i < njobs; i++)
		a.job[i] = jobs[i];
	a.err = s->err_dev;
	tp_unpack<<<dim3(unpack_blocks, njobs), TP_UNPACK_THREADS, 0, s->st>>>(a);
	return tp__dev_cuda_check(cudaGetLastError(), "tp_unpack<<<>>>");
}
