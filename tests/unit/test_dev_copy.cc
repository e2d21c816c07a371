/* The kernels' copy routine (src/abi/dev_copy.cuh) run on the host: the
 * threads of a group one after another (they write disjoint bytes and only
 * read the source), for every relative alignment of dst and src and lengths
 * around each path's limits.  Every byte of the range is copied, nothing
 * outside it is written, and no word load touches a byte outside the source
 * range (bytes the range does not own may be uninitialised, or another
 * fragment's that someone is writing). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include <cmocka.h>
}

/* The CUDA built-ins the header uses, for the host. */
#define __device__
#define __forceinline__ inline
struct uint4 {
	uint32_t x, y, z, w;
};
struct uint2 {
	uint32_t x, y;
};

static const char *src_lo, *src_hi; /* the range being copied */
static unsigned loads_outside;

template <typename T> static T __ldg(const T *p)
{
	const char *b = (const char *)p;
	T v;

	if (b < src_lo || b + sizeof(T) > src_hi)
		loads_outside++;
	memcpy(&v, p, sizeof(v));
	return v;
}

/* The fetch-again load of the stream-wait kernel: the same check. */
template <typename T> static T __ldcv(const T *p)
{
	return __ldg(p);
}

/* The low 32 bits of hi:lo shifted right by shift & 31. */
static uint32_t __funnelshift_r(uint32_t lo, uint32_t hi, uint32_t shift)
{
	shift &= 31;
	return shift ? (lo >> shift) | (hi << (32 - shift)) : lo;
}

#include "dev_copy.cuh"

enum { GUARD = 64, MAXLEN = 4096 + 300 };

template <unsigned W, bool Fresh>
static void copy_all_threads(char *d, const char *s, uint32_t len)
{
	for (unsigned t = 0; t < W; t++)
		tp_copy_range<W, Fresh>(d, s, len, t);
}

template <unsigned W, bool Fresh = false> static void check_group(void)
{
	static const uint32_t lens[] = { 0, 1, 3, 4, 5, 15, 16, 17, 63, 64, 65, 66, 67, 68,
					 69, 70, 71, 72, 127, 128, 129, 255, 1000, 4093,
					 4096, 4099, MAXLEN };
	alignas(16) static char src[MAXLEN + 2 * GUARD], dst[MAXLEN + 2 * GUARD];

	for (unsigned sa = 0; sa < 16; sa++)
		for (unsigned da = 0; da < 16; da++)
			for (uint32_t len : lens) {
				char *s = src + GUARD + sa, *d = dst + GUARD + da;

				for (size_t i = 0; i < sizeof(src); i++)
					src[i] = (char)(i * 131 + sa * 7 + len);
				memset(dst, 0xee, sizeof(dst));
				src_lo = s;
				src_hi = s + len;
				loads_outside = 0;
				copy_all_threads<W, Fresh>(d, s, len);
				assert_memory_equal(d, s, len);
				for (char *p = dst; p < dst + sizeof(dst); p++)
					if (p < d || p >= d + len)
						assert_int_equal((unsigned char)*p, 0xee);
				if (loads_outside)
					fail_msg("W %u, src +%u, dst +%u, %u bytes: %u loads outside "
						 "the range",
						 W, sa, da, len, loads_outside);
			}
}

static void test_warp(void **state)
{
	(void)state;
	check_group<32>(); /* the unpack and scatter kernels */
}

static void test_block(void **state)
{
	(void)state;
	check_group<256>(); /* the copy-list kernel */
}

static void test_block_l2(void **state)
{
	(void)state;
	check_group<256, true>(); /* the stream-wait kernel: every load fetched again */
}

int main(void)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_warp),
					    cmocka_unit_test(test_block),
					    cmocka_unit_test(test_block_l2) };

	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
