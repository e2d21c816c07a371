/* For test_stream_wait: a kernel that compares what a stream sees in a
 * buffer with what it must hold, queued behind tcpx_p2p_stream_wait. */
#include <stddef.h>

#include <cuda_runtime_api.h>

#include "check_kernel.h"

static __global__ void count_diff(const unsigned char *got, const unsigned char *want, size_t n,
				  unsigned long long *diff)
{
	unsigned long long bad = 0;

	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		bad += got[i] != want[i];
	if (bad)
		atomicAdd(diff, bad);
}

extern "C" int check_launch(const void *got, const void *want, size_t n,
			    unsigned long long *diff, void *stream)
{
	count_diff<<<128, 256, 0, (cudaStream_t)stream>>>((const unsigned char *)got,
							  (const unsigned char *)want, n, diff);
	return cudaGetLastError() == cudaSuccess ? 0 : -1;
}
