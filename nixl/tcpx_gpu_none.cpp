/* Builds without CUDA: no GPU, host memory only. */
#include "tcpx_params.h"

#include <cstring>

int tcpxCurrentGpu()
{
	return -1;
}

int tcpxCopy(void *dst, const void *src, size_t len, bool vram)
{
	if (vram)
		return -1;
	memcpy(dst, src, len);
	return 0;
}
