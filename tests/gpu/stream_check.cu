/* The consumer of test_stream_wait: a kernel queued on the held stream
 * that counts the bytes of got that differ from want. */
#include <stddef.h>

#include <cuda_runtime_api.h>

static __global__ void count_diff(const unsigned char *got, const unsigned char *want,
				   size_t len, unsigned long long *bad)
{
	unsigned long long n = 0;

	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < len;
	     i += (size_t)gridDim.x * blockDim.x)
		n += got[i] != want[i];
	if (n)
		atomicAdd(bad, n);
}

/* Overwrite buf with byte v (the producer reusing a sent buffer). */
static __global__ void fill(unsigned char *buf, size_t len, unsigned char v)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < len;
	     i += (size_t)gridDim.x * blockDim.x)
		buf[i] = v;
}

extern "C" int check_on(cudaStream_t st, const void *got, const void *want, size_t len,
			unsigned long long *bad)
{
	count_diff<<<256, 256, 0, st>>>((const unsigned char *)got, (const unsigned char *)want,
					len, bad);
	return cudaGetLastError();
}

extern "C" int fill_on(cudaStream_t st, void *buf, size_t len, unsigned char v)
{
	fill<<<256, 256, 0, st>>>((unsigned char *)buf, len, v);
	return cudaGetLastError();
}

/* Both kernels loaded now, before any stream is held: a first launch
 * behind a held stream could wait, under CUDA's lazy loading, for the very
 * kernel that holds it. */
extern "C" int load_checks(void)
{
	cudaFuncAttributes fa;
	int rc = cudaFuncGetAttributes(&fa, count_diff);

	return rc ? rc : cudaFuncGetAttributes(&fa, fill);
}
