/*
 * The emulator's only contact with CUDA.  Built without the toolkit every
 * function reports failure, so the rest of the plugin has no #ifdefs.  A
 * runtime without a driver (cudaGetDeviceCount -> error 35) counts as "no
 * GPU": the plugin then offers host memory only.
 */
#include "emu.h"

#if TP_EMU_HAVE_CUDA
#include <cuda_runtime_api.h>

static int checked(cudaError_t err, const char *what)
{
	if (err == cudaSuccess)
		return 0;
	EMU_WARN("%s failed: %s (%d)", what, cudaGetErrorString(err), (int)err);
	return -1;
}

int tp__emu_cuda_usable(void)
{
	static int usable = -1;
	int count = 0;

	if (__atomic_load_n(&usable, __ATOMIC_ACQUIRE) >= 0)
		return usable;
	/* The count is left unwritten on failure, hence the initialiser. */
	if (cudaGetDeviceCount(&count) != cudaSuccess) {
		(void)cudaGetLastError();
		count = 0;
	}
	__atomic_store_n(&usable, count > 0, __ATOMIC_RELEASE);
	return count > 0;
}

int tp__emu_cuda_get_device(int *dev)
{
	if (!tp__emu_cuda_usable())
		return -1;
	return checked(cudaGetDevice(dev), "cudaGetDevice");
}

int tp__emu_cuda_set_device(int dev)
{
	if (dev < 0)
		return 0;
	return checked(cudaSetDevice(dev), "cudaSetDevice");
}

int tp__emu_cuda_malloc(void **ptr, size_t size)
{
	return checked(cudaMalloc(ptr, size), "cudaMalloc");
}

void tp__emu_cuda_free(void *ptr)
{
	if (ptr)
		(void)checked(cudaFree(ptr), "cudaFree");
}

int tp__emu_cuda_host_alloc(void **ptr, size_t size)
{
	return checked(cudaHostAlloc(ptr, size, cudaHostAllocPortable), "cudaHostAlloc");
}

int tp__emu_cuda_host_alloc_mapped(void **host, void **dev_alias, size_t size)
{
	if (checked(cudaHostAlloc(host, size, cudaHostAllocMapped | cudaHostAllocPortable),
		    "cudaHostAlloc(mapped)"))
		return -1;
	if (checked(cudaHostGetDevicePointer(dev_alias, *host, 0), "cudaHostGetDevicePointer")) {
		(void)cudaFreeHost(*host);
		*host = NULL;
		return -1;
	}
	return 0;
}

void tp__emu_cuda_host_free(void *ptr)
{
	if (ptr)
		(void)checked(cudaFreeHost(ptr), "cudaFreeHost");
}

int tp__emu_cuda_stream_create(void **stream)
{
	cudaStream_t s;

	if (checked(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"))
		return -1;
	*stream = s;
	return 0;
}

void tp__emu_cuda_stream_destroy(void *stream)
{
	if (stream)
		(void)checked(cudaStreamDestroy((cudaStream_t)stream), "cudaStreamDestroy");
}

int tp__emu_cuda_copy(void *dst, const void *src, size_t n, void *stream)
{
	return checked(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, (cudaStream_t)stream),
		       "cudaMemcpyAsync");
}

/*
 * A 4 MiB bounce receive is over a thousand scattered runs; one batched call
 * instead of one cudaMemcpyAsync each is what keeps device mode usable as a
 * benchmark transport.  Falls back to single copies where batching is absent.
 * Concurrent batches from two helper threads faulted (error 719) on an H100
 * with CUDA 13, so batches are serialised, each synchronised under the lock.
 */
int tp__emu_cuda_copy_batch(void **dst, const void **src, size_t *len, size_t n, int use_batch,
			    void *stream)
{
#if CUDART_VERSION >= 12080
	struct cudaMemcpyAttributes attr = { .srcAccessOrder = cudaMemcpySrcAccessOrderStream };
	size_t attr_idx = 0;
	static pthread_mutex_t batch_lock = PTHREAD_MUTEX_INITIALIZER;
	static int batch_broken;
	cudaError_t err;

	if (n && use_batch && !__atomic_load_n(&batch_broken, __ATOMIC_RELAXED)) {
		pthread_mutex_lock(&batch_lock);
#if CUDART_VERSION >= 13000
		err = cudaMemcpyBatchAsync((void *const *)dst, (const void *const *)src, len, n,
					   &attr, &attr_idx, 1, (cudaStream_t)stream);
#else
		size_t fail = 0;

		err = cudaMemcpyBatchAsync((void **)dst, (void **)src, len, n, &attr, &attr_idx, 1,
					   &fail, (cudaStream_t)stream);
#endif
		if (err == cudaSuccess) {
			err = cudaStreamSynchronize((cudaStream_t)stream);
			pthread_mutex_unlock(&batch_lock);
			return checked(err, "cudaMemcpyBatchAsync");
		}
		pthread_mutex_unlock(&batch_lock);
		(void)cudaGetLastError();
		EMU_INFO("cudaMemcpyBatchAsync unavailable (%s): copying fragments one by one",
			 cudaGetErrorString(err));
		__atomic_store_n(&batch_broken, 1, __ATOMIC_RELAXED);
	}
#endif
	for (size_t i = 0; i < n; i++)
		if (tp__emu_cuda_copy(dst[i], src[i], len[i], stream))
			return -1;
	return 0;
}

int tp__emu_cuda_memset(void *dst, int val, size_t n, void *stream)
{
	return checked(cudaMemsetAsync(dst, val, n, (cudaStream_t)stream), "cudaMemsetAsync");
}

int tp__emu_cuda_sync(void *stream)
{
	return checked(cudaStreamSynchronize((cudaStream_t)stream), "cudaStreamSynchronize");
}

int tp__emu_cuda_copy_sync(void *dst, const void *src, size_t n)
{
	return checked(cudaMemcpy(dst, src, n, cudaMemcpyDefault), "cudaMemcpy");
}

/*
 * A launch that fails outright (a GPU the kernel was not built for, say)
 * turns the kernel off for the process: those errors are not sticky, and
 * the per-fragment copies still work.  Faults while it runs show up at the
 * caller's stream synchronisation like any other copy error.
 */
int tp__emu_cuda_scatter(const tp_unpack_rec *recs, uint32_t nrec, uint64_t off, uint64_t len,
			 const char *staging, char *bounce, void *stream)
{
	static int broken;
	cudaError_t err;

	if (__atomic_load_n(&broken, __ATOMIC_RELAXED))
		return 1;
	err = (cudaError_t)tp__emu_scatter_launch(recs, nrec, off, len, staging, bounce, stream);
	if (err == cudaSuccess)
		return 0;
	if (!__atomic_exchange_n(&broken, 1, __ATOMIC_RELAXED))
		EMU_WARN("scatter kernel launch failed: %s (%d); copying fragments one by one",
			 cudaGetErrorString(err), (int)err);
	(void)cudaGetLastError();
	return 1;
}

#else /* !TP_EMU_HAVE_CUDA */

int tp__emu_cuda_usable(void)
{
	return 0;
}

int tp__emu_cuda_get_device(int *dev)
{
	*dev = -1;
	return -1;
}

int tp__emu_cuda_set_device(int dev)
{
	return dev < 0 ? 0 : -1;
}

int tp__emu_cuda_malloc(void **ptr, size_t size)
{
	*ptr = NULL;
	return -1;
}

void tp__emu_cuda_free(void *ptr)
{
}

int tp__emu_cuda_host_alloc(void **ptr, size_t size)
{
	*ptr = NULL;
	return -1;
}

int tp__emu_cuda_host_alloc_mapped(void **host, void **dev_alias, size_t size)
{
	*host = NULL;
	*dev_alias = NULL;
	return -1;
}

void tp__emu_cuda_host_free(void *ptr)
{
}

int tp__emu_cuda_stream_create(void **stream)
{
	*stream = NULL;
	return -1;
}

void tp__emu_cuda_stream_destroy(void *stream)
{
}

int tp__emu_cuda_copy(void *dst, const void *src, size_t n, void *stream)
{
	return -1;
}

int tp__emu_cuda_copy_batch(void **dst, const void **src, size_t *len, size_t n, int use_batch,
			    void *stream)
{
	return -1;
}

int tp__emu_cuda_memset(void *dst, int val, size_t n, void *stream)
{
	return -1;
}

int tp__emu_cuda_sync(void *stream)
{
	return -1;
}

int tp__emu_cuda_copy_sync(void *dst, const void *src, size_t n)
{
	return -1;
}

int tp__emu_cuda_scatter(const tp_unpack_rec *recs, uint32_t nrec, uint64_t off, uint64_t len,
			 const char *staging, char *bounce, void *stream)
{
	return 1;
}

#endif
