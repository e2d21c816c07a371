/* The non-unpack half of the device seam: pointer kinds, copies, streams,
 * events (including a deterministic not-ready query) and the translation
 * of CUDA errors into TCPX_P2P_ECUDA with a detail naming the call. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h>

#include "device/dev_priv.h"
#include "tcpx_p2p.h"

static int failures;

#define CHECK(cond, ...)                                                         \
	do {                                                                     \
		if (!(cond)) {                                                   \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                            \
			fputc('\n', stderr);                                     \
			failures++;                                              \
		}                                                                \
	} while (0)

#define CK(expr)                                                                 \
	do {                                                                     \
		int ck_ = (expr);                                                \
		if (ck_) {                                                       \
			fprintf(stderr, "FAIL %s:%d: %s = %d (%s)\n", __FILE__,   \
				__LINE__, #expr, ck_, tcpx_p2p_last_error());    \
			return 1;                                                \
		}                                                                \
	} while (0)

static atomic_int gate;

static void CUDART_CB hold_stream(void *arg)
{
	struct timespec ts = { 0, 1000000 };
	int spins = 0;

	/* Bounded: a broken test must not hang the stream forever. */
	while (!atomic_load(&gate) && spins++ < 10000)
		nanosleep(&ts, NULL);
}

static void test_ptr_kinds(void)
{
	void *d = NULL, *h = NULL, *m = malloc(64);
	int is_dev = -1;

	CHECK(cudaMalloc(&d, 64) == cudaSuccess, "cudaMalloc");
	CHECK(cudaMallocHost(&h, 64) == cudaSuccess, "cudaMallocHost");
	CHECK(!tp__dev_ptr_is_device(d, &is_dev) && is_dev == 1, "device memory: %d", is_dev);
	CHECK(!tp__dev_ptr_is_device(h, &is_dev) && is_dev == 0, "pinned host memory: %d", is_dev);
	CHECK(!tp__dev_ptr_is_device(m, &is_dev) && is_dev == 0, "malloc memory: %d", is_dev);
	CHECK(!tp__dev_ptr_is_device(NULL, &is_dev) && is_dev == 0, "NULL: %d", is_dev);
	CHECK(cudaGetLastError() == cudaSuccess, "pointer queries left an error behind");
	cudaFree(d);
	cudaFreeHost(h);
	free(m);
}

/* Which bounce buffers the library reaches through the GPU (issue #28):
 * device memory and, as TCPX imports its RxDM's buffer, host memory from
 * cuMemCreate (on the GPU's NUMA node, exported as a POSIX fd, what the
 * simulator's TCPXSIM_BOUNCE=hostmap makes) mapped with cuMemMap for the
 * GPU only, which the CPU cannot touch; not pinned or pageable host
 * memory, whose bounce the CPU reads and whose plugin takes host
 * receives (the emulator's TCPX_EMU_BOUNCE=host). */
static void test_ptr_via_gpu(void)
{
	CUresult (*gran)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags) =
		tp__dev_drv_fn("cuMemGetAllocationGranularity");
	CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
			   unsigned long long) = tp__dev_drv_fn("cuMemCreate");
	CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long) =
		tp__dev_drv_fn("cuMemAddressReserve");
	CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
			unsigned long long) = tp__dev_drv_fn("cuMemMap");
	CUresult (*access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t) =
		tp__dev_drv_fn("cuMemSetAccess");
	CUresult (*unmap)(CUdeviceptr, size_t) = tp__dev_drv_fn("cuMemUnmap");
	CUresult (*release)(CUmemGenericAllocationHandle) = tp__dev_drv_fn("cuMemRelease");
	CUresult (*addr_free)(CUdeviceptr, size_t) = tp__dev_drv_fn("cuMemAddressFree");
	void *d = NULL, *h = NULL, *m = malloc(64);
	int via = -1, numa = -1, dev = 0;
	struct cudaPointerAttributes a;

	CHECK(cudaMalloc(&d, 64) == cudaSuccess, "cudaMalloc");
	CHECK(cudaMallocHost(&h, 64) == cudaSuccess, "cudaMallocHost");
	CHECK(!tp__dev_ptr_via_gpu(d, &via) && via == 1, "device memory: %d", via);
	CHECK(!tp__dev_ptr_via_gpu(h, &via) && via == 0, "pinned host memory: %d", via);
	CHECK(!tp__dev_ptr_via_gpu(m, &via) && via == 0, "malloc memory: %d", via);
	CHECK(!tp__dev_ptr_via_gpu(NULL, &via) && via == 0, "NULL: %d", via);
	cudaFree(d);
	cudaFreeHost(h);
	free(m);

	CHECK(cudaGetDevice(&dev) == cudaSuccess, "cudaGetDevice");
	if (cudaDeviceGetAttribute(&numa, cudaDevAttrHostNumaId, dev) != cudaSuccess || numa < 0)
		numa = 0;
	(void)cudaGetLastError();
	CUmemAllocationProp prop = {0};
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
	prop.location.id = numa;
	prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	CUmemGenericAllocationHandle mh;
	CUdeviceptr p = 0;
	size_t g = 0;
	if (!gran || !create || !reserve || !map || !access || !unmap || !release || !addr_free ||
	    gran(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) != CUDA_SUCCESS ||
	    create(&mh, g, &prop, 0) != CUDA_SUCCESS) {
		printf("no host-NUMA cuMemCreate here: GPU-mapped host memory not checked\n");
		return;
	}
	CUmemAccessDesc acc = {0};
	acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	acc.location.id = dev;
	acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	CHECK(reserve(&p, g, g, 0, 0) == CUDA_SUCCESS && map(p, g, 0, mh, 0) == CUDA_SUCCESS &&
		      access(p, g, &acc, 1) == CUDA_SUCCESS,
	      "mapping host-NUMA memory for the GPU");
	if (cudaPointerGetAttributes(&a, (void *)p) == cudaSuccess)
		printf("GPU-mapped host memory: cudaPointerGetAttributes type %d, host %p, "
		       "device %p\n", (int)a.type, a.hostPointer, a.devicePointer);
	else
		printf("GPU-mapped host memory: cudaPointerGetAttributes fails\n");
	(void)cudaGetLastError();
	CHECK(!tp__dev_ptr_via_gpu((void *)(uintptr_t)(p + g / 2), &via) && via == 1,
	      "host memory only the GPU maps: %d", via);
	CHECK(cudaGetLastError() == cudaSuccess, "pointer queries left an error behind");
	unmap(p, g);
	addr_free(p, g);
	release(mh);
}

static void test_memcpy(void)
{
	unsigned char a[4099], b[4099];
	void *d = NULL;

	for (size_t i = 0; i < sizeof(a); i++)
		a[i] = (unsigned char)(i * 7 + 3);
	memset(b, 0, sizeof(b));
	CHECK(cudaMalloc(&d, sizeof(a)) == cudaSuccess, "cudaMalloc");
	CHECK(!tp__dev_memcpy(d, a, sizeof(a)), "H2D: %s", tcpx_p2p_last_error());
	CHECK(!tp__dev_memcpy(b, d, sizeof(b)), "D2H: %s", tcpx_p2p_last_error());
	CHECK(!memcmp(a, b, sizeof(a)), "round trip lost bytes");
	cudaFree(d);
}

static int test_stream_event(void)
{
	tp_dev_stream *s;
	tp_dev_event *e;
	int done = -1;
	unsigned flags = 0;

	CK(tp__dev_stream_create(&s));
	CK(tp__dev_event_create(&e));
	CHECK(cudaStreamGetFlags(s->st, &flags) == cudaSuccess && flags == cudaStreamNonBlocking,
	      "stream flags %u", flags);

	atomic_store(&gate, 0);
	CHECK(cudaLaunchHostFunc(s->st, hold_stream, NULL) == cudaSuccess, "cudaLaunchHostFunc");
	CK(tp__dev_event_record(e, s));
	CK(tp__dev_event_query(e, &done));
	CHECK(done == 0, "event done while the stream is held: %d", done);
	CHECK(cudaGetLastError() == cudaSuccess, "not-ready query left an error behind");
	atomic_store(&gate, 1);
	CK(tp__dev_stream_sync(s));
	CK(tp__dev_event_query(e, &done));
	CHECK(done == 1, "event not done after sync: %d", done);

	tp__dev_event_destroy(e);
	tp__dev_stream_destroy(s);
	tp__dev_event_destroy(NULL);
	tp__dev_stream_destroy(NULL);
	return 0;
}

static void test_errors(void)
{
	int n = 0, err;

	CHECK(!tp__dev_count(&n) && n > 0, "count %d", n);
	err = tp__dev_set(n + 1000);
	CHECK(err == TCPX_P2P_ECUDA, "cudaSetDevice(bad) gave %d", err);
	CHECK(strstr(tcpx_p2p_last_error(), "cudaSetDevice") != NULL, "detail '%s'",
	      tcpx_p2p_last_error());
	CHECK(cudaGetLastError() == cudaSuccess, "translated error left latched");
	CHECK(!tp__dev_set(0), "cudaSetDevice(0): %s", tcpx_p2p_last_error());
}

/* The caller's context survives a library call that selects another
 * device; a thread that never used CUDA has no context to give back. */
static void *ctx_thread(void *arg)
{
	int n = *(int *)arg, dev = -1;
	void *none, *c0;

	none = tp__dev_ctx_save();
	CHECK(none == NULL, "a new thread has a current context %p", none);
	tp__dev_ctx_restore(none);
	/* cudaSetDevice itself: tp__dev_set skips the call when the device
	 * is already the current one, which binds no context on a new thread */
	CHECK(cudaSetDevice(0) == cudaSuccess, "cudaSetDevice(0)");
	c0 = tp__dev_ctx_save();
	CHECK(c0 != NULL, "no context after cudaSetDevice(0)");
	CHECK(!tp__dev_set(n - 1), "cudaSetDevice(%d): %s", n - 1, tcpx_p2p_last_error());
	tp__dev_ctx_restore(c0);
	CHECK(cudaGetDevice(&dev) == cudaSuccess && dev == 0, "device %d after restore", dev);
	CHECK(tp__dev_ctx_save() == c0, "another context after restore");
	return NULL;
}

static void test_ctx_restore(int n)
{
	pthread_t t;

	CHECK(!pthread_create(&t, NULL, ctx_thread, &n), "pthread_create");
	pthread_join(t, NULL);
}

/* Mapped host memory: whole pinned allocations and ranges inside them
 * are; a range past the end, pageable memory and device memory are not. */
static void test_host_mapped(void)
{
	const size_t n = 1 << 20;
	char *pinned = NULL, *reg = NULL, *dev = NULL;

	CHECK(cudaHostAlloc((void **)&pinned, n, cudaHostAllocMapped) == cudaSuccess,
	      "cudaHostAlloc");
	CHECK(tp__dev_host_mapped(pinned, n), "cudaHostAlloc'd memory not mapped");
	CHECK(tp__dev_host_mapped(pinned + 4096, n - 4096), "a range inside not mapped");
	CHECK(!tp__dev_host_mapped(pinned + 4096, n), "a range past the end mapped");
	reg = aligned_alloc(4096, 2 * n);
	CHECK(reg != NULL, "aligned_alloc");
	CHECK(!tp__dev_host_mapped(reg, n), "pageable memory mapped");
	CHECK(cudaHostRegister(reg, n, cudaHostRegisterMapped | cudaHostRegisterPortable) ==
		      cudaSuccess,
	      "cudaHostRegister");
	CHECK(tp__dev_host_mapped(reg, n), "registered memory not mapped");
	CHECK(!tp__dev_host_mapped(reg, 2 * n), "a range beyond the registration mapped");
	cudaHostUnregister(reg);
	/* read-only registrations (where the device supports them) are not
	 * writable by kernels, so not mapped in this sense */
	if (cudaHostRegister(reg, n, cudaHostRegisterMapped | cudaHostRegisterReadOnly) ==
	    cudaSuccess) {
		CHECK(!tp__dev_host_mapped(reg, n), "read-only registered memory counted as mapped");
		printf("read-only host registration: checked\n");
	} else {
		(void)cudaGetLastError();
		printf("read-only host registration: not supported here\n");
	}
	CHECK(cudaMalloc((void **)&dev, n) == cudaSuccess, "cudaMalloc");
	CHECK(!tp__dev_host_mapped(dev, n), "device memory reported as mapped host memory");
	cudaFree(dev);
	(void)cudaHostUnregister(reg); /* fails where the read-only one did */
	(void)cudaGetLastError();
	free(reg);
	cudaFreeHost(pinned);
}

int main(void)
{
	int n;

	CK(tp__dev_count(&n));
	if (n == 0) {
		printf("no CUDA device: skipping\n");
		return 77;
	}
	CK(tp__dev_set(0));
	test_ptr_kinds();
	test_ptr_via_gpu();
	test_memcpy();
	if (test_stream_event())
		return 1;
	test_errors();
	test_ctx_restore(n);
	test_host_mapped();
	printf("%s\n", failures ? "FAILED" : "device seam checks passed");
	return failures ? 1 : 0;
}
