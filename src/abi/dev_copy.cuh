/* The copy routine every kernel shares, the library's (src/device/: the unpack
 * and copy-list kernels) and the emulator's (its device-bounce scatter):
 * one contiguous range copied by a group of W threads (W = 32: a warp of
 * the unpack and scatter kernels; a whole block of the copy-list kernel),
 * thread t of the group handling words t, t + W, ...  W is a template
 * argument so that each kernel gets the strides as constants.  Nothing but
 * CUDA's own headers: both sides include it. */
#ifndef TP_DEV_COPY_CUH
#define TP_DEV_COPY_CUH

#include <stdint.h>

#define TP_COPY_UNROLL 8 /* a 4 KiB range in a warp: 8 uint4 per lane, all in flight */

/* Loads of the source.  Fresh = false: through the read-only cache (__ldg),
 * for a kernel during which its sources do not change.  Fresh = true:
 * fetched again on every load (__ldcv: no line of L1, nor of L2 for system
 * memory, is trusted), for a kernel that outlives the plugin's refills of
 * the pages it reads (the stream-wait kernel), where a line cached for an
 * earlier job could be stale — bounce pages in device memory and in host
 * memory the GPU maps alike. */
template <bool Fresh, typename T>
static __device__ __forceinline__ T tp_ld(const T *p)
{
	return Fresh ? __ldcv(p) : __ldg(p);
}

/* Bytes [i, n) of the range: heads, tails, short ranges. */
template <unsigned W, bool Fresh = false>
static __device__ __forceinline__ void tp_copy_bytes(char *d, const char *s, uint32_t i,
						     uint32_t n, unsigned t)
{
	for (i += t; i < n; i += W)
		d[i] = Fresh ? tp_ld<true>(s + i) : s[i];
}

/* dst and src share alignment modulo sizeof(T): bytes up to an aligned
 * dst, then T-wide coalesced words (several in flight per thread), then
 * the byte tail. */
template <unsigned W, typename T, bool Fresh = false>
static __device__ __forceinline__ void tp_copy_vec(char *d, const char *s, uint32_t len,
						   unsigned t)
{
	uint32_t head = (uint32_t)(-(uintptr_t)d & (sizeof(T) - 1));
	if (head > len)
		head = len;
	tp_copy_bytes<W, Fresh>(d, s, 0, head, t);

	T *dv = (T *)(d + head);
	const T *sv = (const T *)(s + head);
	uint32_t nv = (len - head) / sizeof(T);
	uint32_t i = t;

	for (; i + W * (TP_COPY_UNROLL - 1) < nv; i += W * TP_COPY_UNROLL) {
		T v[TP_COPY_UNROLL];
#pragma unroll
		for (int u = 0; u < TP_COPY_UNROLL; u++)
			v[u] = tp_ld<Fresh>(sv + i + W * u);
#pragma unroll
		for (int u = 0; u < TP_COPY_UNROLL; u++)
			dv[i + W * u] = v[u];
	}
	for (; i < nv; i += W)
		dv[i] = tp_ld<Fresh>(sv + i);
	tp_copy_bytes<W, Fresh>(d, s, head + nv * (uint32_t)sizeof(T), len, t);
}

/* No common 4-byte alignment: store aligned 32-bit dst words built with a
 * funnel shift from the two aligned src words that hold them.  The src
 * pointer is then never 4-byte aligned, so the first of those aligned words
 * begins before the range and the last may end past it: dst words 0 and
 * nw - 1 go through the byte path, and no load touches a byte outside the
 * range (memory the range does not own may be uninitialised, or written by
 * someone else meanwhile; compute-sanitizer's initcheck reported such
 * reads). */
template <unsigned W, bool Fresh = false>
static __device__ __forceinline__ void tp_copy_shift(char *d, const char *s, uint32_t len,
						     unsigned t)
{
	uint32_t head = (uint32_t)(-(uintptr_t)d & 3);
	if (head > len)
		head = len;
	uint32_t nw = (len - head) / 4;
	if (nw < 3) {
		tp_copy_bytes<W, Fresh>(d, s, 0, len, t);
		return;
	}
	tp_copy_bytes<W, Fresh>(d, s, 0, head + 4, t);

	uint32_t *dw = (uint32_t *)(d + head);
	const char *sp = s + head;
	uint32_t shift = (uint32_t)((uintptr_t)sp & 3) * 8;
	const uint32_t *sw = (const uint32_t *)(sp - ((uintptr_t)sp & 3));

	/* word i takes src bytes [4i, 4i + 4) past sp, from sw[i] and sw[i + 1]:
	 * for 1 <= i < nw - 1 both lie inside the range */
	for (uint32_t i = 1 + t; i < nw - 1; i += W) {
		uint32_t lo = tp_ld<Fresh>(sw + i), hi = tp_ld<Fresh>(sw + i + 1);
		dw[i] = __funnelshift_r(lo, hi, shift);
	}
	tp_copy_bytes<W, Fresh>(d, s, head + (nw - 1) * 4, len, t);
}

/* The widest words the relative alignment of dst and src allows.  src is
 * read through the read-only cache: it must not be written during the
 * kernel (no range being copied overlaps another's source). */
template <unsigned W, bool Fresh = false>
static __device__ __forceinline__ void tp_copy_range(char *d, const char *s, uint32_t len,
						     unsigned t)
{
	uintptr_t rel = (uintptr_t)d ^ (uintptr_t)s;

	if (len < 64)
		tp_copy_bytes<W, Fresh>(d, s, 0, len, t);
	else if (!(rel & 15))
		tp_copy_vec<W, uint4, Fresh>(d, s, len, t);
	else if (!(rel & 7))
		tp_copy_vec<W, uint2, Fresh>(d, s, len, t);
	else if (!(rel & 3))
		tp_copy_vec<W, uint32_t, Fresh>(d, s, len, t);
	else
		tp_copy_shift<W, Fresh>(d, s, len, t);
}

#endif
