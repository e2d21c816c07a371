/* The caller's current CUDA device, for gpu=auto.  No usable device (no
 * driver, no GPU) is not an error here: the session is then host-only. */
#include "tcpx_params.h"

#include <cstring>

#include <cuda_runtime_api.h>

int tcpxCurrentGpu()
{
	int n = 0, dev = -1;
	if (cudaGetDeviceCount(&n) != cudaSuccess || n <= 0) {
		(void)cudaGetLastError(); /* clear the sticky "no device" */
		return -1;
	}
	if (cudaGetDevice(&dev) != cudaSuccess) {
		(void)cudaGetLastError();
		return -1;
	}
	return dev;
}

int tcpxCopy(void *dst, const void *src, size_t len, bool vram)
{
	if (!vram) {
		memcpy(dst, src, len);
		return 0;
	}
	return cudaMemcpy(dst, src, len, cudaMemcpyDefault) == cudaSuccess ? 0 : -1;
}
