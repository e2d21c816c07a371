/*
 * The emulator's only contact with CUDA.  Built without the toolkit every
 * function reports failure, so the rest of the plugin has no #ifdefs.  A
 * runtime without a driver (cudaGetDeviceCount -> error 35) counts as "no
 * GPU": the plugin then offers host memory only.
 */
#include "emu.h"

#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#if TP_EMU_HAVE_CUDA
#include <cuda_runtime_api.h>

static int checked(cudaError_t err, const char *what)
{
	if (err == cudaSuccess)
		return 0;
	EMU_WARN("%s failed: %s (%d)", what, cudaGetErrorString(err), (int)err);
	return -1;
}

/*
 * TCPX_EMU_STREAM_DELAY_US=N (a fault setting): before each copy, clear or
 * scatter the plugin queues on its streams, a host function sleeping a
 * random 0..N us, so that a consumer that reads the plugin's buffers
 * without waiting for its work shows wrong bytes instead of passing by
 * luck of timing.  Read once per process.
 */
static unsigned delay_max_us;
static uint64_t delay_rng;
static pthread_once_t delay_once = PTHREAD_ONCE_INIT;

static void delay_init(void)
{
	const char *s = getenv("TCPX_EMU_STREAM_DELAY_US");
	char *end;
	unsigned long v;

	if (!s || !*s)
		return;
	v = strtoul(s, &end, 0);
	if (*end || v > 10ul * 1000 * 1000) {
		EMU_WARN("ignoring TCPX_EMU_STREAM_DELAY_US=%s (want 0..10000000)", s);
		return;
	}
	delay_max_us = (unsigned)v;
	delay_rng = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	if (v)
		EMU_WARN("stream delays injected: random 0..%lu us before each device operation", v);
}

static void CUDART_CB sleep_fn(void *arg)
{
	unsigned us = (unsigned)(uintptr_t)arg;
	struct timespec t = { .tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000 };

	nanosleep(&t, NULL);
}

static void stream_delay(void *stream)
{
	uint64_t z;

	pthread_once(&delay_once, delay_init);
	if (!delay_max_us)
		return;
	z = __atomic_add_fetch(&delay_rng, 0x9e3779b97f4a7c15ull, __ATOMIC_RELAXED);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z = (z ^ (z >> 31)) % ((uint64_t)delay_max_us + 1);
	if (cudaLaunchHostFunc((cudaStream_t)stream, sleep_fn, (void *)(uintptr_t)z) != cudaSuccess)
		(void)cudaGetLastError();
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

/* The scatter kernel turned off for the process (tp__emu_cuda_scatter). */
static int broken;

static void scatter_off(cudaError_t err, const char *what)
{
	if (!__atomic_exchange_n(&broken, 1, __ATOMIC_RELAXED))
		EMU_WARN("scatter kernel %s failed: %s (%d); copying fragments one by one", what,
			 cudaGetErrorString(err), (int)err);
	(void)cudaGetLastError();
}

/* Every stream is made before its comm moves data: the scatter kernel is
 * loaded into the current context then, never by a first launch
 * mid-transfer (CUDA's lazy loading may wait for every running kernel
 * there, a caller's kernel that waits for this very receive included). */
static void scatter_load(void)
{
	cudaError_t err;

	if (__atomic_load_n(&broken, __ATOMIC_RELAXED))
		return;
	err = (cudaError_t)tp__emu_scatter_load();
	if (err != cudaSuccess)
		scatter_off(err, "load");
}

int tp__emu_cuda_stream_create(void **stream)
{
	cudaStream_t s;

	if (checked(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"))
		return -1;
	scatter_load();
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
	stream_delay(stream);
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
		stream_delay(stream);
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
	stream_delay(stream);
	return checked(cudaMemsetAsync(dst, val, n, (cudaStream_t)stream), "cudaMemsetAsync");
}

int tp__emu_cuda_sync(void *stream)
{
	return checked(cudaStreamSynchronize((cudaStream_t)stream), "cudaStreamSynchronize");
}

/* Complete when it returns, whatever the direction: a cudaMemcpy from
 * pageable memory may return once the bytes are staged, before they reach
 * the device, and only the legacy stream is ordered after it. */
int tp__emu_cuda_copy_sync(void *dst, const void *src, size_t n)
{
	if (checked(cudaMemcpy(dst, src, n, cudaMemcpyDefault), "cudaMemcpy"))
		return -1;
	return checked(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize");
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
	cudaError_t err;

	if (__atomic_load_n(&broken, __ATOMIC_RELAXED))
		return 1;
	stream_delay(stream);
	err = (cudaError_t)tp__emu_scatter_launch(recs, nrec, off, len, staging, bounce, stream);
	if (err == cudaSuccess)
		return 0;
	scatter_off(err, "launch");
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
