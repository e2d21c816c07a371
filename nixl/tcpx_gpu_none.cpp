/* Builds without CUDA: no GPU, host memory only. */
#include "tcpx_params.h"

int tcpxCurrentGpu()
{
	return -1;
}
