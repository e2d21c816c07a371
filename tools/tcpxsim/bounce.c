#define _GNU_SOURCE
#include "bounce.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifdef TCPXSIM_HAVE_CUDA
#include <cuda.h>

/* The driver is opened at run time, so the simulator loads (host mode) on
 * machines without one.  The _v2 names are what cuda.h's macros call. */
static struct {
	pthread_once_t once;
	int ok;
	CUresult (*init)(unsigned);
	CUresult (*count)(int *);
	CUresult (*get)(CUdevice *, int);
	CUresult (*by_pci)(CUdevice *, const char *);
	CUresult (*retain)(CUcontext *, CUdevice);
	CUresult (*push)(CUcontext);
	CUresult (*pop)(CUcontext *);
	CUresult (*granularity)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
	CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
	CUresult (*export_fd)(void *, CUmemGenericAllocationHandle, CUmemAllocationHandleType, unsigned long long);
	CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
	CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
	CUresult (*access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
	CUresult (*htod)(CUdeviceptr, const void *, size_t);
	CUresult (*dtoh)(void *, CUdeviceptr, size_t);
	CUresult (*memset8)(CUdeviceptr, unsigned char, size_t);
	CUresult (*ptr_attr)(void *, CUpointer_attribute, CUdeviceptr);
	CUresult (*host_alloc)(void **, size_t, unsigned);
	CUresult (*stream_create)(CUstream *, unsigned);
	CUresult (*stream_sync)(CUstream);
	/* optional (CUDA 12.8+ drivers): one call for a receive's fragments */
	CUresult (*batch)(CUdeviceptr *, CUdeviceptr *, size_t *, size_t, CUmemcpyAttributes *,
			  size_t *, size_t, CUstream);
} cu = {.once = PTHREAD_ONCE_INIT};

static void cuda_load(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	int n = 0;
	if (!h)
		return;
#define SYM(field, name)                                   \
	if (!(*(void **)&cu.field = dlsym(h, name)))       \
		return;
	SYM(init, "cuInit")
	SYM(count, "cuDeviceGetCount")
	SYM(get, "cuDeviceGet")
	SYM(by_pci, "cuDeviceGetByPCIBusId")
	SYM(retain, "cuDevicePrimaryCtxRetain")
	SYM(push, "cuCtxPushCurrent_v2")
	SYM(pop, "cuCtxPopCurrent_v2")
	SYM(granularity, "cuMemGetAllocationGranularity")
	SYM(create, "cuMemCreate")
	SYM(export_fd, "cuMemExportToShareableHandle")
	SYM(reserve, "cuMemAddressReserve")
	SYM(map, "cuMemMap")
	SYM(access, "cuMemSetAccess")
	SYM(htod, "cuMemcpyHtoD_v2")
	SYM(dtoh, "cuMemcpyDtoH_v2")
	SYM(memset8, "cuMemsetD8_v2")
	SYM(ptr_attr, "cuPointerGetAttribute")
	SYM(host_alloc, "cuMemHostAlloc")
	SYM(stream_create, "cuStreamCreate")
	SYM(stream_sync, "cuStreamSynchronize")
#undef SYM
	*(void **)&cu.batch = dlsym(h, "cuMemcpyBatchAsync_v2");
	if (cu.init(0) != CUDA_SUCCESS || cu.count(&n) != CUDA_SUCCESS || n < 1)
		return;
	cu.ok = 1;
}

int sim_cuda_available(void)
{
	pthread_once(&cu.once, cuda_load);
	return cu.ok;
}

static int gpu_alloc(struct sim_bounce *b, char *err, size_t errlen)
{
	CUdevice dev;
	CUmemAllocationProp prop = {0};
	CUmemGenericAllocationHandle h;
	CUmemAccessDesc acc = {0};
	size_t gran = 0;
	int fd = -1;
	if (!sim_cuda_available()) {
		snprintf(err, errlen, "no usable CUDA driver or device");
		return -ENODEV;
	}
	if (cu.by_pci(&dev, b->gpu) != CUDA_SUCCESS) {
		snprintf(err, errlen, "no CUDA device at PCI %s", b->gpu);
		return -ENODEV;
	}
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = dev;
	prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	if (cu.retain((CUcontext *)&b->ctx, dev) != CUDA_SUCCESS ||
	    cu.granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) != CUDA_SUCCESS) {
		snprintf(err, errlen, "CUDA context or granularity for %s failed", b->gpu);
		return -EIO;
	}
	b->size = (b->size + gran - 1) / gran * gran;
	b->align = gran;
	if (cu.push(b->ctx) != CUDA_SUCCESS) {
		snprintf(err, errlen, "cuCtxPushCurrent failed");
		return -EIO;
	}
	acc.location = prop.location;
	acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	int ok = cu.create(&h, b->size, &prop, 0) == CUDA_SUCCESS &&
		 cu.export_fd(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) == CUDA_SUCCESS &&
		 cu.reserve((CUdeviceptr *)&b->dptr, b->size, gran, 0, 0) == CUDA_SUCCESS &&
		 cu.map(b->dptr, b->size, 0, h, 0) == CUDA_SUCCESS &&
		 cu.access(b->dptr, b->size, &acc, 1) == CUDA_SUCCESS &&
		 cu.memset8(b->dptr, 0, b->size) == CUDA_SUCCESS;
	CUcontext prev;
	cu.pop(&prev);
	if (!ok) {
		snprintf(err, errlen, "cuMemCreate/export/map of %zu bytes on %s failed", b->size, b->gpu);
		return -EIO;
	}
	/* The allocation lives until the process ends: the plugin maps it
	 * too, and a simulator that outlives no process needs no teardown. */
	b->fd = fd;
	b->on_gpu = 1;
	return 0;
}

static int with_ctx(void *ctx)
{
	return cu.push(ctx) == CUDA_SUCCESS ? 0 : -EIO;
}

static void without_ctx(void)
{
	CUcontext prev;
	cu.pop(&prev);
}

/* Fragments of one receive: their bytes lie back to back in `src` (pinned
 * memory from sim_stage), each goes to its own page.  One batched copy
 * where the driver has it, else a copy each. */
static int gpu_write_frags(struct sim_bounce *b, const uint8_t *src, const uint32_t *offs,
			   const uint32_t *lens, size_t n)
{
	static CUdeviceptr dst[TCPXSIM_MAX_FRAGS], from[TCPXSIM_MAX_FRAGS];
	static size_t len[TCPXSIM_MAX_FRAGS];
	int rc = 0;
	if (with_ctx(b->ctx))
		return -EIO;
	if (!b->stream && cu.stream_create((CUstream *)&b->stream, CU_STREAM_NON_BLOCKING))
		b->stream = NULL;
	for (size_t i = 0, off = 0; i < n; off += lens[i], i++) {
		dst[i] = b->dptr + offs[i];
		from[i] = (CUdeviceptr)(uintptr_t)(src + off);
		len[i] = lens[i];
	}
	CUmemcpyAttributes attr = {.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM};
	size_t first = 0;
	if (!(b->stream && cu.batch && n > 1 &&
	      cu.batch(dst, from, len, n, &attr, &first, 1, b->stream) == CUDA_SUCCESS &&
	      cu.stream_sync(b->stream) == CUDA_SUCCESS))
		for (size_t i = 0; i < n && !rc; i++)
			rc = cu.htod(dst[i], (const void *)(uintptr_t)from[i], len[i]) == CUDA_SUCCESS
				     ? 0 : -EIO;
	without_ctx();
	return rc;
}

/* Pinned (portable) host memory, made in device 0's primary context: the
 * calling thread may have none current. */
static uint8_t *gpu_stage(size_t *cap)
{
	static uint8_t *stage;
	CUcontext ctx;
	CUdevice d;
	if (!stage && sim_cuda_available() && cu.get(&d, 0) == CUDA_SUCCESS &&
	    cu.retain(&ctx, d) == CUDA_SUCCESS && with_ctx(ctx) == 0) {
		if (cu.host_alloc((void **)&stage, TCPXSIM_STAGE_BYTES, CU_MEMHOSTALLOC_PORTABLE) !=
		    CUDA_SUCCESS)
			stage = NULL;
		without_ctx();
	}
	*cap = stage ? TCPXSIM_STAGE_BYTES : 0;
	return stage;
}

static int gpu_fill(struct sim_bounce *b, size_t off, int byte, size_t n)
{
	if (with_ctx(b->ctx))
		return -EIO;
	int rc = cu.memset8(b->dptr + off, (unsigned char)byte, n) == CUDA_SUCCESS ? 0 : -EIO;
	without_ctx();
	return rc;
}

static int gpu_read(void *dst, uint64_t src, size_t n)
{
	CUcontext ctx = NULL;
	int ordinal = -1;
	if (!sim_cuda_available())
		return -ENODEV;
	/* The copy runs in the context the memory belongs to (any thread of the
	 * plugin may send). */
	if (cu.ptr_attr(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, src) != CUDA_SUCCESS || !ctx) {
		/* Memory without a context of its own (cuMemMap'd): the primary
		 * context of its device, retained once per device. */
		static CUcontext primary[64];
		CUdevice d;
		if (cu.ptr_attr(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, src) != CUDA_SUCCESS ||
		    ordinal < 0 || ordinal >= 64)
			return -EFAULT;
		if (!primary[ordinal] &&
		    (cu.get(&d, ordinal) != CUDA_SUCCESS || cu.retain(&primary[ordinal], d) != CUDA_SUCCESS))
			return -EFAULT;
		ctx = primary[ordinal];
	}
	if (with_ctx(ctx))
		return -EIO;
	int rc = cu.dtoh(dst, src, n) == CUDA_SUCCESS ? 0 : -EFAULT;
	without_ctx();
	return rc;
}
#else
int sim_cuda_available(void)
{
	return 0;
}

static int gpu_alloc(struct sim_bounce *b, char *err, size_t errlen)
{
	snprintf(err, errlen, "built without CUDA: use TCPXSIM_BOUNCE=host");
	return -ENOTSUP;
}

static int gpu_fill(struct sim_bounce *b, size_t off, int byte, size_t n)
{
	return -ENOTSUP;
}

static int gpu_write_frags(struct sim_bounce *b, const uint8_t *src, const uint32_t *offs,
			   const uint32_t *lens, size_t n)
{
	return -ENOTSUP;
}

static uint8_t *gpu_stage(size_t *cap)
{
	*cap = 0;
	return NULL;
}

static int gpu_read(void *dst, uint64_t src, size_t n)
{
	return -ENOTSUP;
}
#endif

static int host_alloc(struct sim_bounce *b, char *err, size_t errlen)
{
	int fd = memfd_create("tcpxsim-bounce", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)b->size) != 0) {
		snprintf(err, errlen, "memfd of %zu bytes: %s", b->size, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	void *p = mmap(NULL, b->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		snprintf(err, errlen, "mmap of the bounce memfd: %s", strerror(errno));
		close(fd);
		return -ENOMEM;
	}
	b->host = p;
	b->fd = fd;
	b->align = DEVMEM_PAGE;
	return 0;
}

int sim_bounce_create(const char *gpu, size_t size, int on_gpu, uint64_t seed,
		      struct sim_bounce **out, char *err, size_t errlen)
{
	struct sim_bounce *b = calloc(1, sizeof(*b));
	int rc;
	if (!b)
		return -ENOMEM;
	snprintf(b->gpu, sizeof(b->gpu), "%s", gpu);
	b->size = (size + DEVMEM_PAGE - 1) / DEVMEM_PAGE * DEVMEM_PAGE;
	b->fd = -1;
	rc = on_gpu ? gpu_alloc(b, err, errlen) : host_alloc(b, err, errlen);
	if (rc == 0 && (b->size / DEVMEM_PAGE > UINT32_MAX ||
			sim_pool_init(&b->pool, (uint32_t)(b->size / DEVMEM_PAGE), seed))) {
		snprintf(err, errlen, "page pool of %zu bytes", b->size);
		rc = -ENOMEM;
	}
	if (rc) {
		sim_bounce_destroy(b);
		return rc;
	}
	*out = b;
	return 0;
}

void sim_bounce_destroy(struct sim_bounce *b)
{
	if (!b)
		return;
	if (b->host)
		munmap(b->host, b->size);
	if (b->fd >= 0 && !b->on_gpu)
		close(b->fd);
	sim_pool_fini(&b->pool);
	free(b);
}

int sim_bounce_fill(struct sim_bounce *b, size_t off, int byte, size_t n)
{
	if (off > b->size || n > b->size - off)
		return -EFAULT;
	if (b->on_gpu)
		return gpu_fill(b, off, byte, n);
	memset(b->host + off, byte, n);
	return 0;
}

int sim_bounce_write_frags(struct sim_bounce *b, const uint8_t *src, const uint32_t *offs,
			   const uint32_t *lens, size_t n)
{
	if (n > TCPXSIM_MAX_FRAGS)
		return -EINVAL;
	if (b->on_gpu)
		return gpu_write_frags(b, src, offs, lens, n);
	for (size_t i = 0, off = 0; i < n; off += lens[i], i++)
		memcpy(b->host + offs[i], src + off, lens[i]);
	return 0;
}

uint8_t *sim_stage(int on_gpu, size_t *cap)
{
	static uint8_t *host;
	if (on_gpu)
		return gpu_stage(cap);
	if (!host)
		host = malloc(TCPXSIM_STAGE_BYTES);
	*cap = host ? TCPXSIM_STAGE_BYTES : 0;
	return host;
}

int sim_mem_read(void *dst, uint64_t src, size_t n, int on_gpu)
{
	if (on_gpu)
		return gpu_read(dst, src, n);
	memcpy(dst, (const void *)(uintptr_t)src, n);
	return 0;
}
