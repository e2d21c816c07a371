/* The producer of test_event_post: a kernel that waits for the host's go
 * (so that every write is posted before any layer is computed), and one
 * that "computes" a layer: a pattern of its own, written after a spin. */
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

static __global__ void wait_go(volatile int *go)
{
	while (!*go)
		__nanosleep(1000);
}

static __global__ void layer(unsigned char *buf, size_t len, unsigned seed, long long spin)
{
	long long t0 = clock64();

	while (clock64() - t0 < spin)
		;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < len;
	     i += (size_t)gridDim.x * blockDim.x)
		buf[i] = (unsigned char)(i * 31 + seed * 7 + (i >> 12));
}

extern "C" int wait_go_on(cudaStream_t st, int *go)
{
	wait_go<<<1, 1, 0, st>>>(go);
	return cudaGetLastError();
}

extern "C" int layer_on(cudaStream_t st, void *buf, size_t len, unsigned seed, long long spin)
{
	layer<<<128, 256, 0, st>>>((unsigned char *)buf, len, seed, spin);
	return cudaGetLastError();
}

/* The byte the layer kernel writes at offset i of layer seed. */
extern "C" unsigned char layer_byte(size_t i, unsigned seed)
{
	return (unsigned char)(i * 31 + seed * 7 + (i >> 12));
}
