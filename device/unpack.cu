/* The unpack kernel: one launch gathers the bounce-buffer fragments of up
 * to TP_UNPACK_MAX_JOBS received chunks into their destinations.  The
 * host passes the job table by value (with each chunk's record count, read
 * from host memory); the kernel reads the records from the pinned,
 * device-mapped meta ring itself, so nothing on the host parses a chunk. */
#include <stdint.h>

#include "dev_priv.h"
extern "C" {
#include "util/error.h"
}

#define TP_UNPACK_THREADS 256
#define TP_UNPACK_WARPS (TP_UNPACK_THREADS / 32)
/* Blocks per job: up to 256 warps, so a 4 MiB chunk (up to 2048 records)
 * gives each warp at most 8 and a 512 KiB one about one per warp. */
#define TP_UNPACK_BLOCKS 32
#define TP_UNPACK_UNROLL 8 /* a 4 KiB record: 8 uint4 per lane, all in flight */

struct tp_unpack_args {
	struct tp_unpack_job job[TP_UNPACK_MAX_JOBS];
	unsigned *err; /* mapped: set when a record lies outside its chunk */
};

/* Bytes [i, n) of the record, one per lane: heads, tails, short records. */
static __device__ __forceinline__ void copy_bytes(char *d, const char *s, uint32_t i, uint32_t n,
						 int lane)
{
	for (i += lane; i < n; i += 32)
		d[i] = s[i];
}

/* dst and src share alignment modulo sizeof(T): bytes up to an aligned
 * dst, then T-wide coalesced words (several in flight per lane), then the
 * byte tail. */
template <typename T>
static __device__ __forceinline__ void copy_vec(char *d, const char *s, uint32_t len, int lane)
{
	uint32_t head = (uint32_t)(-(uintptr_t)d & (sizeof(T) - 1));
	if (head > len)
		head = len;
	copy_bytes(d, s, 0, head, lane);

	T *dv = (T *)(d + head);
	const T *sv = (const T *)(s + head);
	uint32_t nv = (len - head) / sizeof(T);
	uint32_t i = lane;

	for (; i + 32 * (TP_UNPACK_UNROLL - 1) < nv; i += 32 * TP_UNPACK_UNROLL) {
		T v[TP_UNPACK_UNROLL];
#pragma unroll
		for (int u = 0; u < TP_UNPACK_UNROLL; u++)
			v[u] = __ldg(sv + i + 32 * u);
#pragma unroll
		for (int u = 0; u < TP_UNPACK_UNROLL; u++)
			dv[i + 32 * u] = v[u];
	}
	for (; i < nv; i += 32)
		dv[i] = __ldg(sv + i);
	copy_bytes(d, s, head + nv * (uint32_t)sizeof(T), len, lane);
}

/* No common 4-byte alignment: store aligned 32-bit dst words built with a
 * funnel shift from the two aligned src words that hold them.  Those loads
 * may touch up to 3 bytes past either end of the fragment, never outside
 * the aligned word of a byte that is in it, so never outside its page. */
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

	for (uint32_t i = lane; i < nw; i += 32) {
		uint32_t lo = __ldg(sw + i), hi = __ldg(sw + i + 1);
		dw[i] = __funnelshift_r(lo, hi, shift);
	}
	copy_bytes(d, s, head + nw * 4, len, lane);
}

static __device__ __forceinline__ void copy_rec(char *d, const char *s, uint32_t len, int lane)
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
			copy_rec(job->dst + dst_off, job->bounce + src_off, len, lane);
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
