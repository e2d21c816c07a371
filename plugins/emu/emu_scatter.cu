/*
 * Device bounce, fast path: a received slice arrives on the GPU with one
 * contiguous H2D copy, and this kernel moves each of its fragments to the
 * bounce page the emulator picked for it.  The records are the ones the
 * helper thread just cut for the slice's task, in its pinned, device-mapped
 * host buffer, so nothing extra is copied to describe the scatter: a
 * fragment's bytes sit in the staging buffer at dst_off - slice start, and
 * go to bounce + src_off.  They lie inside the slice; the clipping below
 * costs nothing and keeps a bad record from reaching outside it.
 */
#include <stdint.h>

#include <cuda_runtime.h>

extern "C" {
#include "emu.h"
}

#define EMU_SCATTER_THREADS 256
#define EMU_SCATTER_WARPS (EMU_SCATTER_THREADS / 32)
#define EMU_SCATTER_UNROLL 8 /* a 4 KiB fragment: 8 uint4 per lane, all in flight */

struct emu_scatter_args {
	const uint4 *recs;
	const char *staging;
	char *bounce;
	uint64_t off; /* the slice: bytes [off, end) of the message */
	uint64_t end;
	uint32_t nrec;
};

/* Bytes [i, n), one per lane: heads, tails and short fragments. */
static __device__ __forceinline__ void copy_bytes(char *d, const char *s, uint32_t i, uint32_t n,
						 int lane)
{
	for (i += lane; i < n; i += 32)
		d[i] = s[i];
}

/* d and s agree modulo sizeof(T): bytes up to an aligned d, then T-wide
 * coalesced words with several loads in flight per lane, then the tail. */
template <typename T>
static __device__ __forceinline__ void copy_vec(char *d, const char *s, uint32_t len, int lane)
{
	uint32_t head = (uint32_t)(-(uintptr_t)d & (sizeof(T) - 1));

	if (head > len)
		head = len;
	copy_bytes(d, s, 0, head, lane);

	T *dv = (T *)(d + head);
	const T *sv = (const T *)(s + head);
	uint32_t nv = (len - head) / (uint32_t)sizeof(T);
	uint32_t i = (uint32_t)lane;

	for (; i + 32 * (EMU_SCATTER_UNROLL - 1) < nv; i += 32 * EMU_SCATTER_UNROLL) {
		T v[EMU_SCATTER_UNROLL];
#pragma unroll
		for (int u = 0; u < EMU_SCATTER_UNROLL; u++)
			v[u] = sv[i + 32 * u];
#pragma unroll
		for (int u = 0; u < EMU_SCATTER_UNROLL; u++)
			dv[i + 32 * u] = v[u];
	}
	for (; i < nv; i += 32)
		dv[i] = sv[i];
	copy_bytes(d, s, head + nv * (uint32_t)sizeof(T), len, lane);
}

/* No common 4-byte alignment (15 cases in 16 with random page offsets):
 * aligned 32-bit stores, each built with a funnel shift from the two
 * aligned source words that hold it.  A load may reach up to 3 bytes past
 * the fragment, but never beyond the aligned word of a byte inside it. */
static __device__ __forceinline__ void copy_shift(char *d, const char *s, uint32_t len, int lane)
{
	uint32_t head = (uint32_t)(-(uintptr_t)d & 3);

	if (head > len)
		head = len;
	copy_bytes(d, s, 0, head, lane);

	uint32_t *dw = (uint32_t *)(d + head);
	const char *sp = s + head;
	uint32_t shift = (uint32_t)((uintptr_t)sp & 3) * 8;
	const uint32_t *sw = (const uint32_t *)(sp - ((uintptr_t)sp & 3));
	uint32_t nw = (len - head) / 4;

	for (uint32_t i = (uint32_t)lane; i < nw; i += 32) {
		uint32_t lo = sw[i], hi = sw[i + 1];

		dw[i] = __funnelshift_r(lo, hi, shift);
	}
	copy_bytes(d, s, head + nw * 4, len, lane);
}

static __device__ __forceinline__ void copy_frag(char *d, const char *s, uint32_t len, int lane)
{
	uintptr_t rel = (uintptr_t)d ^ (uintptr_t)s;

	if (len < 64)
		copy_bytes(d, s, 0, len, lane);
	else if (!(rel & 15))
		copy_vec<uint4>(d, s, len, lane);
	else if (!(rel & 7))
		copy_vec<uint2>(d, s, len, lane);
	else if (!(rel & 3))
		copy_vec<uint32_t>(d, s, len, lane);
	else
		copy_shift(d, s, len, lane);
}

/* One warp per fragment.  Every lane loads the same 16-byte record (one
 * PCIe read for the warp); __ldcv because the host rewrites a slot's
 * records for every new message in it. */
static __global__ void __launch_bounds__(EMU_SCATTER_THREADS)
	emu_scatter(const __grid_constant__ struct emu_scatter_args a)
{
	int lane = threadIdx.x & 31;
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
		copy_frag(a.bounce + src_off + (lo - dst_off), a.staging + (lo - a.off),
			  (uint32_t)(hi - lo), lane);
	}
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
