/* A CUDA stream of the application made to wait, on the GPU, for a word of
 * pinned, mapped host memory that the library writes when a transfer
 * ends: cuStreamWaitValue32 where the driver has stream memory operations,
 * else a one-thread kernel that polls the word.  Neither blocks the CPU. */
#include <pthread.h>
#include <stdint.h>

#include "dev_priv.h"

#define TP_CU_STREAM_WAIT_VALUE_GEQ 0x0

/* CUresult cuStreamWaitValue32(CUstream, CUdeviceptr, cuuint32_t, unsigned) */
typedef int (*wait_value_fn)(void *stream, unsigned long long addr, uint32_t value,
			     unsigned flags);
static wait_value_fn wait_value;
static pthread_once_t wait_once = PTHREAD_ONCE_INIT;

static void wait_resolve(void)
{
	enum cudaDriverEntryPointQueryResult q;
	void *fn = NULL;

	if (cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &fn, 12000, cudaEnableDefault,
					     &q) == cudaSuccess &&
	    q == cudaDriverEntryPointSuccess)
		wait_value = (wait_value_fn)fn;
	else
		(void)cudaGetLastError();
}

/* Polls from one thread; the sleep keeps it from flooding PCIe. */
static __global__ void tp_wait_word(const volatile uint32_t *word, uint32_t value)
{
	while (*word < value)
		__nanosleep(2000);
}

extern "C" int tp__dev_stream_wait_word(void *stream, const uint32_t *word, uint32_t value)
{
	wait_value_fn fn;

	pthread_once(&wait_once, wait_resolve);
	tp__dev_delay_op((cudaStream_t)stream);
	fn = __atomic_load_n(&wait_value, __ATOMIC_RELAXED);
	/* A driver without stream memory operations refuses the call: the
	 * kernel from then on. */
	if (fn && fn(stream, (unsigned long long)(uintptr_t)word, value,
		     TP_CU_STREAM_WAIT_VALUE_GEQ) == 0)
		return 0;
	__atomic_store_n(&wait_value, (wait_value_fn)NULL, __ATOMIC_RELAXED);
	tp_wait_word<<<1, 1, 0, (cudaStream_t)stream>>>(word, value);
	return tp__dev_cuda_check(cudaGetLastError(), "tp_wait_word<<<>>>");
}

extern "C" int tp__dev_event_record_on(tp_dev_event *e, void *stream)
{
	return TP_CUDA(cudaEventRecord, e->ev, (cudaStream_t)stream);
}
