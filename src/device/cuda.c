/* Devices, memory, pointers, streams and events through the CUDA runtime. */
#include <pthread.h>
#include <stdlib.h>

#include "dev_priv.h"
#include "dev_tune.h"
#include "util/error.h"
#include "util/log.h"

int tp__dev_count(int *n)
{
	int count = 0;
	cudaError_t err = cudaGetDeviceCount(&count);

	/* Build machines carry cudart without a driver, or with the
	 * toolkit's stub libcuda (CI images, CPU-only containers): that is
	 * "no GPU", and the count is left unwritten, so never read it then. */
	if (err == cudaErrorInsufficientDriver || err == cudaErrorNoDevice ||
	    err == cudaErrorStubLibrary) {
		(void)cudaGetLastError();
		*n = 0;
		return 0;
	}
	if (err != cudaSuccess)
		return tp__dev_cuda_check(err, "cudaGetDeviceCount");
	*n = count;
	return 0;
}

/* Cheap when gpu is already current (a thread-local read in cudart), so
 * callers may call it before every plugin or CUDA call. */
int tp__dev_set(int gpu)
{
	int cur = -1;

	if (cudaGetDevice(&cur) == cudaSuccess && cur == gpu)
		return 0;
	return TP_CUDA(cudaSetDevice, gpu);
}

/* Driver calls through cudart's driver entry points: the library does not
 * link libcuda (it must load on machines without a driver).  They take
 * and return CUresult (0 = CUDA_SUCCESS); NULL where the driver lacks one. */
typedef int (*ctx_get_fn)(void **ctx);
typedef int (*ctx_set_fn)(void *ctx);
typedef int (*ptr_attr_fn)(void *data, int attribute, unsigned long long ptr);
typedef int (*mem_retain_fn)(unsigned long long *handle, void *addr);
typedef int (*mem_release_fn)(unsigned long long handle);
static ctx_get_fn ctx_get;
static ctx_set_fn ctx_set;
static ptr_attr_fn ptr_attr;
static mem_retain_fn mem_retain;   /* cuMemRetainAllocationHandle */
static mem_release_fn mem_release; /* cuMemRelease */
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;

#define TP_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR 11
#define TP_CU_POINTER_ATTRIBUTE_RANGE_SIZE 12
#define TP_CU_POINTER_ATTRIBUTE_ACCESS_FLAGS 16
#define TP_CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE 3

void *tp__dev_drv_fn(const char *name)
{
	enum cudaDriverEntryPointQueryResult q;
	void *fn = NULL;

	if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q) !=
		    cudaSuccess ||
	    q != cudaDriverEntryPointSuccess) {
		(void)cudaGetLastError();
		return NULL;
	}
	return fn;
}

static void drv_resolve(void)
{
	ctx_get = (ctx_get_fn)tp__dev_drv_fn("cuCtxGetCurrent");
	ctx_set = (ctx_set_fn)tp__dev_drv_fn("cuCtxSetCurrent");
	ptr_attr = (ptr_attr_fn)tp__dev_drv_fn("cuPointerGetAttribute");
	mem_retain = (mem_retain_fn)tp__dev_drv_fn("cuMemRetainAllocationHandle");
	mem_release = (mem_release_fn)tp__dev_drv_fn("cuMemRelease");
}

void *tp__dev_ctx_save(void)
{
	void *ctx = NULL;

	pthread_once(&drv_once, drv_resolve);
	if (!ctx_get || ctx_get(&ctx) != 0)
		return NULL;
	return ctx;
}

void tp__dev_ctx_restore(void *ctx)
{
	void *cur = NULL;

	if (!ctx || !ctx_get || !ctx_set || (ctx_get(&cur) == 0 && cur == ctx))
		return;
	(void)ctx_set(ctx);
}

bool tp__dev_host_mapped(const void *p, size_t len)
{
	struct cudaPointerAttributes a;
	unsigned long long start = 0, access = 0;
	size_t size = 0;

	if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
		(void)cudaGetLastError();
		return false;
	}
	if (a.type != cudaMemoryTypeHost || a.devicePointer != p)
		return false;
	pthread_once(&drv_once, drv_resolve);
	if (!ptr_attr || ptr_attr(&start, TP_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
				  (unsigned long long)(uintptr_t)p) ||
	    ptr_attr(&size, TP_CU_POINTER_ATTRIBUTE_RANGE_SIZE, (unsigned long long)(uintptr_t)p) ||
	    ptr_attr(&access, TP_CU_POINTER_ATTRIBUTE_ACCESS_FLAGS, (unsigned long long)(uintptr_t)p))
		return false;
	/* cudaHostRegisterReadOnly memory: kernel writes would fault */
	if ((access & TP_CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE) !=
	    TP_CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE)
		return false;
	return (uintptr_t)p >= start && (uintptr_t)p - start < size &&
	       len <= size - ((uintptr_t)p - start);
}

int tp__dev_host_pin(void *p, size_t len)
{
	cudaError_t err = cudaHostRegister(p, len, cudaHostRegisterPortable |
						   cudaHostRegisterMapped);

	if (err == cudaErrorHostMemoryAlreadyRegistered) {
		(void)cudaGetLastError();
		return tp__error(TCPX_P2P_EINVAL, "[%p, +%zu) is page-locked in part already "
				 "(or read-only): pin all of it or none", p, len);
	}
	return tp__dev_cuda_check(err, "cudaHostRegister");
}

int tp__dev_host_unpin(void *p)
{
	return TP_CUDA(cudaHostUnregister, p);
}

int tp__dev_pci_bus_id(int gpu, char *buf, int len)
{
	return TP_CUDA(cudaDeviceGetPCIBusId, buf, len, gpu);
}

int tp__dev_ptr_is_device(const void *p, int *is_dev)
{
	struct cudaPointerAttributes a;

	/* Unknown (never registered) host memory may fail on old drivers:
	 * it is host memory all the same. */
	if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
		(void)cudaGetLastError();
		*is_dev = 0;
		return 0;
	}
	*is_dev = a.type == cudaMemoryTypeDevice;
	return 0;
}

/* Memory mapped with the virtual memory management API (cuMemMap): the
 * allocation behind it has a handle. */
static bool vmm_mapped(const void *p)
{
	unsigned long long h = 0;

	pthread_once(&drv_once, drv_resolve);
	if (!p || !mem_retain || !mem_release || mem_retain(&h, (void *)p) != 0)
		return false;
	(void)mem_release(h); /* the reference the retain took */
	return true;
}

int tp__dev_ptr_via_gpu(const void *p, int *via_gpu)
{
	int dev;

	tp__dev_ptr_is_device(p, &dev);
	/* Host memory that the mapper made with cuMemCreate and mapped with
	 * cuMemMap is reached as the mapping's access list says, and the
	 * mapper need not have granted the CPU any: TCPX's import of its
	 * RxDM bounce buffer grants only its GPU (the simulator's
	 * TCPXSIM_BOUNCE=hostmap hands it host memory that way). */
	*via_gpu = dev || vmm_mapped(p);
	return 0;
}

int tp__dev_memcpy(void *dst, const void *src, size_t n)
{
	return TP_CUDA(cudaMemcpy, dst, src, n, cudaMemcpyDefault);
}

int tp__dev_host_alloc(void **p, size_t n)
{
	void *h, *d;
	int err;

	if (!n)
		return tp__error(TCPX_P2P_EINVAL, "a 0-byte pinned allocation");
	err = TP_CUDA(cudaHostAlloc, &h, n, cudaHostAllocMapped | cudaHostAllocPortable);
	if (err)
		return err;
	/* Kernels are handed the host address itself.  Unified addressing
	 * (every 64-bit platform CUDA supports) makes it the device address
	 * too: checked here rather than assumed at every use. */
	err = TP_CUDA(cudaHostGetDevicePointer, &d, h, 0);
	if (!err && d != h)
		err = tp__error(TCPX_P2P_ENOTSUP, "pinned memory %p mapped at %p: no unified addressing",
				h, d);
	if (err)
		goto free_h;
	*p = h;
	return 0;

free_h:
	(void)cudaFreeHost(h);
	return err;
}

void tp__dev_host_free(void *p)
{
	if (p && TP_CUDA(cudaFreeHost, p))
		TP_WARN("dev", "pinned memory free: %s", tcpx_p2p_last_error());
}

/* Cleared: the library's device buffers (staging, landing) must never show
 * a peer what earlier allocations of this process left there.  And cleared
 * to completion before the pointer is handed out: a plain cudaMemset goes
 * to the legacy default stream and may return before it ran, and nothing
 * orders that stream with the library's non-blocking stream, the plugin's
 * streams or the application's.  A late clear then zeroed a send staging
 * slot after its gather had filled it, and a WRITE delivered zeros with a
 * correct notification.  A private non-blocking stream, waited for here,
 * also keeps the clear from queueing behind the application's work on the
 * legacy stream. */
static int dev_clear(void *d, size_t n)
{
	cudaStream_t st;
	int err = TP_CUDA(cudaStreamCreateWithFlags, &st, cudaStreamNonBlocking);

	if (err)
		return err;
	tp__dev_delay_clear(st);
	err = TP_CUDA(cudaMemsetAsync, d, 0, n, st);
	if (!err)
		err = TP_CUDA(cudaStreamSynchronize, st);
	if (cudaStreamDestroy(st) != cudaSuccess)
		(void)cudaGetLastError();
	return err;
}

int tp__dev_malloc(void **p, size_t n)
{
	void *d;
	int err;

	if (!n)
		return tp__error(TCPX_P2P_EINVAL, "a 0-byte device allocation");
	err = TP_CUDA(cudaMalloc, &d, n);
	if (err)
		return err;
	err = dev_clear(d, n);
	if (err) {
		cudaFree(d);
		return err;
	}
	*p = d;
	return 0;
}

void tp__dev_free(void *p)
{
	if (p && TP_CUDA(cudaFree, p))
		TP_WARN("dev", "device memory free: %s", tcpx_p2p_last_error());
}

#if TP_TEST_HOOKS
void *tp__dev_stream_cuda(tp_dev_stream *s)
{
	return s->st;
}

void tp__dev_stream_set_batch(tp_dev_stream *s, bool on)
{
	s->batch_ok = on;
}
#endif

int tp__dev_stream_create(tp_dev_stream **s)
{
	struct tp_dev_stream *ds = calloc(1, sizeof(*ds));
	int err;

	if (!ds)
		return tp__error(TCPX_P2P_ENOMEM, "cannot allocate a device stream");
	/* Non-blocking: the legacy default stream of other code in the
	 * process must not serialise against our unpacks. */
	err = TP_CUDA(cudaStreamCreateWithFlags, &ds->st, cudaStreamNonBlocking);
	if (err)
		goto free_ds;
	err = TP_CUDA(cudaHostAlloc, (void **)&ds->err_host, sizeof(unsigned), cudaHostAllocMapped);
	if (err)
		goto destroy_stream;
	*ds->err_host = 0;
	ds->batch_ok = true;
	err = TP_CUDA(cudaHostGetDevicePointer, (void **)&ds->err_dev, ds->err_host, 0);
	if (err)
		goto free_err;
	*s = ds;
	return 0;

free_err:
	(void)cudaFreeHost(ds->err_host);
destroy_stream:
	(void)cudaStreamDestroy(ds->st);
free_ds:
	free(ds);
	return err;
}

void tp__dev_stream_destroy(tp_dev_stream *s)
{
	if (!s)
		return;
	/* The staging buffer may still be read by queued copies. */
	if (TP_CUDA(cudaStreamSynchronize, s->st) ||
	    (s->stage && TP_CUDA(cudaFreeHost, s->stage)) || TP_CUDA(cudaFreeHost, s->err_host) ||
	    TP_CUDA(cudaStreamDestroy, s->st))
		TP_WARN("dev", "stream teardown: %s", tcpx_p2p_last_error());
	tp__dev_batch_free(s);
	free(s);
}

int tp__dev_stream_sync(tp_dev_stream *s)
{
	return TP_CUDA(cudaStreamSynchronize, s->st);
}

int tp__dev_stream_error(tp_dev_stream *s, int *bad)
{
	*bad = __atomic_exchange_n(s->err_host, 0u, __ATOMIC_ACQ_REL) != 0;
	return 0;
}

int tp__dev_event_create(tp_dev_event **e)
{
	struct tp_dev_event *de = malloc(sizeof(*de));
	int err;

	if (!de)
		return tp__error(TCPX_P2P_ENOMEM, "cannot allocate a device event");
	/* Timing off: such events are cheaper to record and to query. */
	err = TP_CUDA(cudaEventCreateWithFlags, &de->ev, cudaEventDisableTiming);
	if (err)
		goto free_de;
	*e = de;
	return 0;

free_de:
	free(de);
	return err;
}

void tp__dev_event_destroy(tp_dev_event *e)
{
	if (!e)
		return;
	if (TP_CUDA(cudaEventDestroy, e->ev))
		TP_WARN("dev", "event teardown: %s", tcpx_p2p_last_error());
	free(e);
}

int tp__dev_event_record(tp_dev_event *e, tp_dev_stream *s)
{
	tp__dev_delay_op(s->st);
	return TP_CUDA(cudaEventRecord, e->ev, s->st);
}

int tp__dev_event_query(tp_dev_event *e, int *done)
{
	cudaError_t err = cudaEventQuery(e->ev);

	if (err == cudaErrorNotReady) {
		/* Not an error, but some runtimes latch it like one. */
		(void)cudaGetLastError();
		*done = 0;
		return 0;
	}
	if (err != cudaSuccess)
		return tp__dev_cuda_check(err, "cudaEventQuery");
	*done = 1;
	return 0;
}
