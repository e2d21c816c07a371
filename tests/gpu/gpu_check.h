/* What the GPU unit tests share: failure counting and checks, and a
 * xorshift generator (tests set rng to their seed before drawing). */
#ifndef TP_TESTS_GPU_CHECK_H
#define TP_TESTS_GPU_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "tcpx_p2p.h"

static uint64_t rng;
static int failures;

#define FAIL(...)                                                                \
	do {                                                                     \
		fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);              \
		fprintf(stderr, __VA_ARGS__);                                    \
		fputc('\n', stderr);                                             \
		failures++;                                                      \
	} while (0)

#define CK(expr)                                                                 \
	do {                                                                     \
		int ck_ = (expr);                                                \
		if (ck_) {                                                       \
			FAIL("%s = %d (%s)", #expr, ck_, tcpx_p2p_last_error()); \
			exit(1);                                                 \
		}                                                                \
	} while (0)

#define CKC(expr)                                                                \
	do {                                                                     \
		cudaError_t ckc_ = (expr);                                       \
		if (ckc_ != cudaSuccess) {                                       \
			FAIL("%s: %s", #expr, cudaGetErrorString(ckc_));          \
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

static uint32_t below(uint32_t n)
{
	return n ? (uint32_t)(next() % n) : 0;
}

#endif
