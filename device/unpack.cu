/* The unpack kernel: one launch gathers the bounce-buffer fragments of up
 * to TP_UNPACK_MAX_JOBS received chunks into their destinations.  The
 * host passes the job table by value (with each chunk's record count, read
 * from host memory); the kernel reads the records from the pinned,
 * device-mapped meta ring itself, so nothing on the host parses a chunk. */
#include <stdint.h>

#include "dev_copy.cuh"
#include "dev_priv.h"
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
			uint32_t src_off = __shfl_sync(0xffffffffu, r.x, k);
			uint32_t len = __shfl_sync(0xffffffffu, r.y, k);
			uint64_t dst_off = ((uint64_t)__shfl_sync(0xffffffffu, r.w, k) << 32) |
					   __shfl_sync(0xffffffffu, r.z, k);

			/* uniform across the warp (shuffled values) */
			if (len > TP_UNPACK_PAGE_SIZE || dst_off > job->len ||
			    len > job->len - dst_off) {
				if (lane == 0)
					atomicOr(a.err, 1u);
				continue;
			}
			tp_copy_range<32>(job->dst + dst_off, job->bounce + src_off, len, lane);
		}
	}
}

static int unpack_blocks = TP_UNPACK_BLOCKS;

extern "C" int tp__dev_unpack_set_blocks(int blocks)
{
	if (blocks < 1 || blocks > TP_UNPACK_MAX_PAGES / TP_UNPACK_WARPS)
		return tp__error(TCPX_P2P_EINVAL, "%d unpack blocks per job", blocks);
	unpack_blocks = blocks;
	return 0;
}

extern "C" int tp__dev_unpack_kernel(tp_dev_stream *s, const struct tp_unpack_job *jobs, int njobs)
{
	struct tp_unpack_args a;

	if (njobs < 0 || njobs > TP_UNPACK_MAX_JOBS)
		return tp__error(TCPX_P2P_EINVAL, "%d unpack jobs in one launch (at most %d)", njobs,
				 TP_UNPACK_MAX_JOBS);
	if (!njobs)
		return 0;
	for (int i = 0; i < njobs; i++)
		a.job[i] = jobs[i];
	a.err = s->err_dev;
	tp_unpack<<<dim3(unpack_blocks, njobs), TP_UNPACK_THREADS, 0, s->st>>>(a);
	return tp__dev_cuda_check(cudaGetLastError(), "tp_unpack<<<>>>");
}
