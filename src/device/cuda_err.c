/* The one place where cudaError_t becomes a TCPX_P2P_E* code. */
#include "dev_priv.h"
#include "util/error.h"

int tp__dev_cuda_check(cudaError_t err, const char *call)
{
	if (err == cudaSuccess)
		return 0;
	/* Non-sticky errors stay latched until read; read it so the next
	 * unrelated check does not report this failure again. */
	(void)cudaGetLastError();
	return tp__error(TCPX_P2P_ECUDA, "%s: %s (cuda error %d)", call, cudaGetErrorString(err),
			 (int)err);
}
