/*
 * Device bounce, fast path: a received slice arrives on the GPU with one
 * contiguous H2D copy, and this kernel moves each of its fragments to the
 * bounce page the emulator picked for it.  The records are the ones the
 * helper thread just cut for the slice's task, in its pinned, device-mapped
 * host buffer, so nothing extra is copied to describe the scatter: a
 * fragment's bytes sit in the staging buffer at dst_off - slice start, and
 * go to bounce + src_off.  They lie inside the slice; the clipping below
 * costs nothing and keeps a bad record from reaching outside it.  The
 * copies are the library's own (src/abi/dev_copy.cuh), which read the source
 * through the read-only cache: nothing writes the staging buffer while the
 * kernel runs (its H2D copy is ordered before it on the stream).
 */
#include <stdint.h>

#include <cuda_runtime.h>

#include "dev_copy.cuh"
extern "C" {
#include "emu.h"
}

#define EMU_SCATTER_THREADS 256
#define EMU_SCATTER_WARPS (EMU_SCATTER_THREADS / 32)

struct emu_scatter_args {
	const uint4 *recs;
	const char *staging;
	char *bounce;
	uint64_t off; /* the slice: bytes [off, end) of the message */
	uint64_t end;
	uint32_t nrec;
};

/* One warp per fragment.  Every lane loads the same 16-byte record (one
 * PCIe read for the warp); __ldcv because the host rewrites a slot's
 * records for every new message in it. */
static __global__ void __launch_bounds__(EMU_SCATTER_THREADS)
	emu_scatter(const __grid_constant__ struct emu_scatter_args a)
{
	unsigned lane = threadIdx.x & 31;
	uint32_t warp = blockIdx.x * EMU_SCATTER_WARPS + threadIdx.x / 32;
	uint32_t nwarps = gridDim.x * EMU_SCATTER_WARPS;

	for (uint32_t k = warp; k < a.nrec; k += nwarps) {
		uint4 r = __ldcv(a.recs + k);
		uint32_t src_off = r.x;
		uint32_t len = min(r.y, (uint32_t)TP_UNPACK_PAGE_SIZE);
		uint64_t dst_off = ((uint64_t)r.w << 32) | r.z;
		uint64_t lo = max(dst_off, a.off), hi = min(dst_off + len, a.end);

		if (lo >= hi)
			continue;
		tp_copy_range<32>(a.bounce + src_off + (lo - dst_off), a.staging + (lo - a.off),
				  (uint32_t)(hi - lo), lane);
	}
}

extern "C" int tp__emu_scatter_load(void)
{
	cudaFuncAttributes fa;

	return (int)cudaFuncGetAttributes(&fa, emu_scatter);
}

extern "C" int tp__emu_scatter_launch(const tp_unpack_rec *recs, uint32_t nrec, uint64_t off,
				      uint64_t len, const char *staging, char *bounce,
				      void *stream)
{
	struct emu_scatter_args a = {
		(const uint4 *)recs, staging, bounce, off, off + len, nrec,
	};
	uint32_t blocks = (nrec + EMU_SCATTER_WARPS - 1) / EMU_SCATTER_WARPS;

	if (!nrec)
		return (int)cudaSuccess;
	emu_scatter<<<blocks, EMU_SCATTER_THREADS, 0, (cudaStream_t)stream>>>(a);
	return (int)cudaGetLastError();
}
