#include "bench_mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TP_BENCH_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

/* Stream `seed` from 8-byte word `word` on: word k is mix(seed * C + k). */
static void pattern(unsigned char *p, size_t len, uint64_t seed, size_t word)
{
	uint64_t base = seed * 0x9e3779b97f4a7c15ull + word, w;
	size_t i;

	for (i = 0; i < len; i += 8) {
		w = mix(base + i / 8);
		memcpy(p + i, &w, len - i < 8 ? len - i : 8);
	}
}

int bench_gpu_count(void)
{
#ifdef TP_BENCH_HAVE_CUDA
	int n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess) {
		cudaGetLastError();
		return 0;
	}
	return n;
#else
	return 0;
#endif
}

int bench_gpu_bus_id(int gpu, char *buf, int len)
{
#ifdef TP_BENCH_HAVE_CUDA
	if (cudaDeviceGetPCIBusId(buf, len, gpu) == cudaSuccess)
		return 0;
	cudaGetLastError();
#endif
	return -1;
}

int bench_buf_alloc(struct bench_buf *b, size_t len, enum bench_mem mem, int gpu, char *err,
		    size_t n)
{
	memset(b, 0, sizeof(*b));
	b->len = len;
	b->cuda = mem == BENCH_CUDA;
	b->gpu = gpu;
	if (mem == BENCH_PINNED) {
#ifdef TP_BENCH_HAVE_CUDA
		if (cudaSetDevice(gpu) != cudaSuccess ||
		    cudaHostAlloc(&b->ptr, len ? len : 1, cudaHostAllocMapped | cudaHostAllocPortable) !=
			    cudaSuccess) {
			snprintf(err, n, "cudaHostAlloc of %zu bytes failed: %s", len,
				 cudaGetErrorString(cudaGetLastError()));
			return -1;
		}
		b->pinned = 1;
		memset(b->ptr, 0, len);
		return 0;
#else
		snprintf(err, n, "built without CUDA: --mem pinned is not available");
		return -1;
#endif
	}
	if (mem == BENCH_HOST) {
		/* 4 KiB aligned, like the registrations TCPX wants */
		if (posix_memalign(&b->ptr, 4096, len ? len : 1)) {
			snprintf(err, n, "out of host memory for %zu bytes", len);
			return -1;
		}
		/* Fault every page in now: a timed transfer that lands on pages
		 * nobody touched yet would also time the kernel zeroing them. */
		memset(b->ptr, 0, len);
		return 0;
	}
#ifdef TP_BENCH_HAVE_CUDA
	if (cudaSetDevice(gpu) != cudaSuccess || cudaMalloc(&b->ptr, len ? len : 1) != cudaSuccess) {
		snprintf(err, n, "cudaMalloc of %zu bytes on GPU %d failed: %s", len, gpu,
			 cudaGetErrorString(cudaGetLastError()));
		return -1;
	}
	b->staging = malloc(len ? len : 1);
	if (!b->staging) {
		snprintf(err, n, "out of host memory for %zu bytes", len);
		cudaFree(b->ptr);
		return -1;
	}
	return 0;
#else
	snprintf(err, n, "built without CUDA: --mem cuda is not available");
	return -1;
#endif
}

void bench_buf_free(struct bench_buf *b)
{
#ifdef TP_BENCH_HAVE_CUDA
	if (b->pinned) {
		cudaFreeHost(b->ptr);
		return;
	}
	if (b->cuda) {
		cudaFree(b->ptr);
		free(b->staging);
		return;
	}
#endif
	free(b->ptr);
}

/* Host view of [off, ...): the buffer itself or its staging copy. */
static unsigned char *host_view(struct bench_buf *b, size_t off)
{
	return (unsigned char *)(b->cuda ? b->staging : b->ptr) + off;
}

static int to_device(struct bench_buf *b, size_t off, size_t len)
{
#ifdef TP_BENCH_HAVE_CUDA
	/* From pageable memory cudaMemcpy may return before the bytes reach
	 * the device, and only the legacy stream is ordered after it: the
	 * library reads the buffer on other streams, so wait for it. */
	if (cudaSetDevice(b->gpu) != cudaSuccess ||
	    cudaMemcpy((char *)b->ptr + off, host_view(b, off), len, cudaMemcpyHostToDevice) !=
		    cudaSuccess ||
	    cudaStreamSynchronize(cudaStreamLegacy) != cudaSuccess)
		return -1;
#endif
	return 0;
}

int bench_buf_fill(struct bench_buf *b, size_t off, size_t len, uint64_t seed)
{
	pattern(host_view(b, off), len, seed, 0);
	return b->cuda ? to_device(b, off, len) : 0;
}

int bench_buf_poison(struct bench_buf *b, size_t off, size_t len)
{
	memset(host_view(b, off), 0xa5, len);
	return b->cuda ? to_device(b, off, len) : 0;
}

size_t bench_buf_check(struct bench_buf *b, size_t boff, size_t len, uint64_t seed)
{
	unsigned char want[4096];
	const unsigned char *p = host_view(b, boff);
	size_t off, n, i;

#ifdef TP_BENCH_HAVE_CUDA
	if (b->cuda && (cudaSetDevice(b->gpu) != cudaSuccess ||
			cudaMemcpy(host_view(b, boff), (char *)b->ptr + boff, len,
				   cudaMemcpyDeviceToHost) != cudaSuccess))
		return (size_t)-2;
#endif
	for (off = 0; off < len; off += n) {
		n = len - off < sizeof(want) ? len - off : sizeof(want);
		pattern(want, n, seed, off / 8); /* off is a multiple of 8 */
		if (memcmp(p + off, want, n) != 0) {
			for (i = 0; i < n && p[off + i] == want[i]; i++)
				;
			return off + i;
		}
	}
	return (size_t)-1;
}
