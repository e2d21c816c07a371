/* The bounce buffers' memory (bounce.h): GPU memory with a POSIX fd
 * handle, or a memfd in host mode. */
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

#include "settings.h"

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
	CUresult (*htod_async)(CUdeviceptr, const void *, size_t, CUstream);
	CUresult (*dtoh_async)(void *, CUdeviceptr, size_t, CUstream);
	CUresult (*memset8_async)(CUdeviceptr, unsigned char, size_t, CUstream);
	CUresult (*event_create)(CUevent *, unsigned);
	CUresult (*event_record)(CUevent, CUstream);
	CUresult (*event_sync)(CUevent);
	CUresult (*attr)(int *, CUdevice_attribute, CUdevice); /* optional */
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
	SYM(htod_async, "cuMemcpyHtoDAsync_v2")
	SYM(dtoh_async, "cuMemcpyDtoHAsync_v2")
	SYM(memset8_async, "cuMemsetD8Async")
	SYM(event_create, "cuEventCreate")
	SYM(event_record, "cuEventRecord")
	SYM(event_sync, "cuEventSynchronize")
#undef SYM
	*(void **)&cu.batch = dlsym(h, "cuMemcpyBatchAsync_v2");
	*(void **)&cu.attr = dlsym(h, "cuDeviceGetAttribute");
	if (cu.init(0) != CUDA_SUCCESS || cu.count(&n) != CUDA_SUCCESS || n < 1)
		return;
	cu.ok = 1;
}

int sim_cuda_available(void)
{
	pthread_once(&cu.once, cuda_load);
	return cu.ok;
}

/* GPU memory, or with `hostmap` host memory on the GPU's NUMA node that the
 * GPU and the CPU both map; exported as a POSIX file descriptor either way. */
static int gpu_alloc(struct sim_bounce *b, int hostmap, char *err, size_t errlen)
{
	CUdevice dev;
	CUmemAllocationProp prop = {0};
	CUmemGenericAllocationHandle h;
	CUmemAccessDesc acc[2];
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
	if (hostmap) {
		int numa = -1;
		if (!cu.attr || cu.attr(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev) != CUDA_SUCCESS ||
		    numa < 0)
			numa = 0;
		prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
		prop.location.id = numa;
	}
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
	memset(acc, 0, sizeof(acc));
	acc[0].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	acc[0].location.id = dev;
	acc[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	acc[1].location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA; /* the CPU's mapping */
	acc[1].location.id = prop.location.id;
	acc[1].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	int ok = cu.create(&h, b->size, &prop, 0) == CUDA_SUCCESS &&
		 cu.export_fd(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) == CUDA_SUCCESS &&
		 cu.reserve((CUdeviceptr *)&b->dptr, b->size, gran, 0, 0) == CUDA_SUCCESS &&
		 cu.map(b->dptr, b->size, 0, h, 0) == CUDA_SUCCESS &&
		 cu.access(b->dptr, b->size, acc, hostmap ? 2 : 1) == CUDA_SUCCESS &&
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
	b->on_gpu = !hostmap;
	b->hostmap = hostmap;
	if (hostmap)
		b->host = (uint8_t *)(uintptr_t)b->dptr;
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

static pthread_mutex_t *ctx_copy_lock(void *ctx);

/* A lane's stream, events and pinned (portable) staging buffer, in `ctx`. */
static int gpu_lane_init(struct sim_lane *l)
{
	int ok = with_ctx(l->ctx) == 0;
	if (!ok)
		return -EIO;
	ok = cu.stream_create((CUstream *)&l->stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS &&
	     cu.host_alloc((void **)&l->buf, TCPXSIM_STAGE_BYTES, CU_MEMHOSTALLOC_PORTABLE) ==
		     CUDA_SUCCESS;
	for (int i = 0; ok && i < TCPXSIM_LANE_EVENTS; i++)
		ok = cu.event_create((CUevent *)&l->ev[i], CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS;
	without_ctx();
	l->copy_lock = ctx_copy_lock(l->ctx);
	return ok ? 0 : -EIO;
}

static void cu_failed(const char *what, CUresult r);
static int gpu_batch(struct sim_lane *l, size_t first, size_t n);

/* TCPXSIM_COPY_LOCK=1 (the default with a GPU bounce buffer): the
 * simulator's GPU copies run one at a time per context (device), each
 * waited for before the next starts, as they did under the old
 * process-wide lock (the suite's 23/23, one GPU); only the copies: socket
 * calls, page and token bookkeeping and waits for data stay outside, per
 * socket.  0: every lane copies at once (batched copies still issued one
 * at a time), what the ceiling wants and what, with 8 or more sockets of a
 * GPU bounce buffer, failed on an H200 on 2026-11-27 (docs/perf/log.md).
 * With TCPXSIM_BOUNCE=hostmap, 0 is the default: receives and poisoning
 * do no GPU copy there, the sends' reads (one cuMemcpyDtoHAsync per piece
 * on a lane's own stream) are all that is left, and on a 4xH200 host on
 * 2026-11-27 the plugin suite passed 25/25 with them unlocked while one
 * GPU's ceiling with 8 sockets rose from 13.7 to 18.6 GB/s. */
static struct {
	pthread_mutex_t lock; /* adds to the table */
	int n;
	CUcontext ctx[64];
	pthread_mutex_t copy[64];
} ctx_locks = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The copy lock of `ctx` (made on first use; with more contexts than the
 * table holds, the last slot's lock serves the rest). */
static pthread_mutex_t *ctx_copy_lock(void *ctx)
{
	pthread_mutex_t *m = NULL;
	pthread_mutex_lock(&ctx_locks.lock);
	for (int i = 0; i < ctx_locks.n && !m; i++)
		if (ctx_locks.ctx[i] == ctx)
			m = &ctx_locks.copy[i];
	if (!m && ctx_locks.n < 64) {
		ctx_locks.ctx[ctx_locks.n] = ctx;
		pthread_mutex_init(&ctx_locks.copy[ctx_locks.n], NULL);
		m = &ctx_locks.copy[ctx_locks.n++];
	}
	if (!m)
		m = &ctx_locks.copy[63];
	pthread_mutex_unlock(&ctx_locks.lock);
	return m;
}

/* A setting that is on unless NAME=0, read once into *cache (-1: unread). */
static int env_on(const char *name, int *cache)
{
	int v = __atomic_load_n(cache, __ATOMIC_RELAXED);
	if (v < 0) {
		const char *e = getenv(name);
		v = !(e && !strcmp(e, "0"));
		__atomic_store_n(cache, v, __ATOMIC_RELAXED);
	}
	return v;
}

static int gpu_stream_sync(struct sim_lane *l)
{
	CUresult r = cu.stream_sync(l->stream);
	if (r != CUDA_SUCCESS)
		cu_failed("cuStreamSynchronize", r);
	return r == CUDA_SUCCESS ? 0 : -EIO;
}

/* Copies queued on the lane, done; with the copy lock, the receive's
 * copies held back until now are issued first. */
static int gpu_lane_sync(struct sim_lane *l)
{
	int rc;
	if (with_ctx(l->ctx))
		return -EIO;
	if (sim_cfg.copy_lock && l->pend_n) {
		pthread_mutex_lock(l->copy_lock);
		rc = gpu_batch(l, l->pend_first, l->pend_n);
		rc = gpu_stream_sync(l) ? -EIO : rc;
		pthread_mutex_unlock(l->copy_lock);
		l->pend_n = 0;
	} else {
		rc = gpu_stream_sync(l);
	}
	without_ctx();
	return rc;
}

/* The first failed CUDA call, once (what a later "failed" line follows). */
static void cu_failed(const char *what, CUresult r)
{
	static int said;
	if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
		fprintf(stderr, "tcpxsim: %s: CUDA error %d (later failures not reported)\n", what,
			(int)r);
}

/* Batched copies are issued one at a time in the process: on an H200
 * (driver of CUDA 13, 2026-11-27) concurrent cuMemcpyBatchAsync calls from
 * several threads, each on its own stream, ended in failed copies and
 * "unspecified launch failure", which one thread at a time never showed.
 * Only the issue is serialized; the copies and the waits overlap.
 * TCPXSIM_BATCH=0: one copy call per fragment instead. */
static pthread_mutex_t batch_lock = PTHREAD_MUTEX_INITIALIZER;

static int batch_wanted(void)
{
	static int wanted = -1;
	return env_on("TCPXSIM_BATCH", &wanted);
}

/* Copies from the lane's lists [first, first + n): one batched call where
 * the driver has it, else one call each, all on the lane's stream. */
static int gpu_batch(struct sim_lane *l, size_t first, size_t n)
{
	CUmemcpyAttributes attr = {.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM};
	size_t zero = 0;
	CUresult r = CUDA_SUCCESS;
	if (n == 0)
		return 0;
	if (with_ctx(l->ctx))
		return -EIO;
	int batched = cu.batch && n > 1 && batch_wanted();
	if (batched) {
		pthread_mutex_lock(&batch_lock);
		r = cu.batch((CUdeviceptr *)l->dst + first, (CUdeviceptr *)l->src + first,
			     l->len + first, n, &attr, &zero, 1, l->stream);
		pthread_mutex_unlock(&batch_lock);
		if (r != CUDA_SUCCESS)
			cu_failed("cuMemcpyBatchAsync", r);
	}
	if (!batched || r != CUDA_SUCCESS) {
		r = CUDA_SUCCESS;
		for (size_t i = first; i < first + n && r == CUDA_SUCCESS; i++)
			r = cu.htod_async(l->dst[i], (const void *)(uintptr_t)l->src[i], l->len[i],
					  l->stream);
		if (r != CUDA_SUCCESS)
			cu_failed("cuMemcpyHtoDAsync", r);
	}
	without_ctx();
	return r == CUDA_SUCCESS ? 0 : -EIO;
}

static int gpu_write_frags(struct sim_bounce *b, struct sim_lane *l, const uint8_t *src,
			   size_t first, size_t n)
{
	for (size_t i = first, off = 0; i < first + n; off += l->lens[i], i++) {
		l->dst[i] = b->dptr + l->offs[i];
		l->src[i] = (uint64_t)(uintptr_t)(src + off);
		l->len[i] = l->lens[i];
	}
	if (sim_cfg.copy_lock) { /* issued at sim_lane_sync, under the copy lock */
		if (!l->pend_n)
			l->pend_first = first;
		l->pend_n = first + n - l->pend_first;
		return 0;
	}
	return gpu_batch(l, first, n);
}

/* One pinned page of 0x5a, the source of every poisoning copy. */
static uint8_t *poison_src;
static pthread_once_t poison_once = PTHREAD_ONCE_INIT;

static void poison_alloc(void)
{
	CUcontext ctx;
	CUdevice d;
	if (cu.get(&d, 0) == CUDA_SUCCESS && cu.retain(&ctx, d) == CUDA_SUCCESS && !with_ctx(ctx)) {
		if (cu.host_alloc((void **)&poison_src, DEVMEM_PAGE, CU_MEMHOSTALLOC_PORTABLE) !=
		    CUDA_SUCCESS)
			poison_src = NULL;
		else
			memset(poison_src, 0x5a, DEVMEM_PAGE);
		without_ctx();
	}
}

static int gpu_poison(struct sim_bounce *b, struct sim_lane *l, const uint32_t *pages, size_t n)
{
	pthread_once(&poison_once, poison_alloc);
	for (size_t done = 0; done < n;) {
		size_t k = n - done < TCPXSIM_MAX_FRAGS ? n - done : TCPXSIM_MAX_FRAGS;
		int rc = 0;
		for (size_t i = 0; i < k; i++) {
			l->dst[i] = b->dptr + (uint64_t)pages[done + i] * DEVMEM_PAGE;
			l->src[i] = (uint64_t)(uintptr_t)poison_src;
			l->len[i] = DEVMEM_PAGE;
		}
		if (sim_cfg.copy_lock)
			pthread_mutex_lock(l->copy_lock);
		if (poison_src) {
			rc = gpu_batch(l, 0, k);
		} else if (!(rc = with_ctx(l->ctx))) {
			for (size_t i = 0; i < k && !rc; i++)
				rc = cu.memset8_async(l->dst[i], 0x5a, DEVMEM_PAGE, l->stream) ==
					     CUDA_SUCCESS ? 0 : -EIO;
			without_ctx();
		}
		if (!rc && !(rc = with_ctx(l->ctx))) {
			rc = gpu_stream_sync(l);
			without_ctx();
		}
		if (sim_cfg.copy_lock)
			pthread_mutex_unlock(l->copy_lock);
		if (rc)
			return rc;
		done += k;
	}
	return 0;
}

static int gpu_fill(struct sim_bounce *b, size_t off, int byte, size_t n)
{
	if (with_ctx(b->ctx))
		return -EIO;
	int rc = cu.memset8(b->dptr + off, (unsigned char)byte, n) == CUDA_SUCCESS ? 0 : -EIO;
	without_ctx();
	return rc;
}

/* The context registered memory belongs to (any thread of the plugin may
 * send): its own, or for memory without one (cuMemMap'd) the primary
 * context of its device, retained once per device. */
static void *gpu_mem_ctx(uint64_t src)
{
	static CUcontext primary[64];
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	CUcontext ctx = NULL;
	int ordinal = -1;
	CUdevice d;
	if (!sim_cuda_available())
		return NULL;
	if (cu.ptr_attr(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, src) == CUDA_SUCCESS && ctx)
		return ctx;
	if (cu.ptr_attr(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, src) != CUDA_SUCCESS ||
	    ordinal < 0 || ordinal >= 64)
		return NULL;
	pthread_mutex_lock(&lock);
	if (!primary[ordinal] &&
	    (cu.get(&d, ordinal) != CUDA_SUCCESS || cu.retain(&primary[ordinal], d) != CUDA_SUCCESS))
		primary[ordinal] = NULL;
	ctx = primary[ordinal];
	pthread_mutex_unlock(&lock);
	return ctx;
}

/* Pieces of `piece` bytes of [src, src + len) read into dst, piece i
 * recorded on event i.  With the copy lock all are issued under one hold
 * of the context's lock and waited for once (they run one after the other
 * on the lane's stream), not one wait per piece.  The pieces queued. */
static size_t gpu_reads(struct sim_lane *l, uint8_t *dst, uint64_t src, size_t len,
			size_t piece)
{
	size_t n = 0;
	if (with_ctx(l->ctx))
		return 0;
	int locked = sim_cfg.copy_lock;
	if (locked) /* done before the next copy of this context starts */
		pthread_mutex_lock(l->copy_lock);
	CUresult r = CUDA_SUCCESS;
	for (size_t at = 0; at < len && n < TCPXSIM_LANE_EVENTS && r == CUDA_SUCCESS; at += piece) {
		size_t k = len - at < piece ? len - at : piece;
		r = cu.dtoh_async(dst + at, src + at, k, l->stream);
		if (r == CUDA_SUCCESS)
			r = cu.event_record(l->ev[n], l->stream);
		if (r == CUDA_SUCCESS)
			n++;
	}
	const char *what = "cuMemcpyDtoHAsync";
	CUresult rs;
	if (n && locked && (rs = cu.stream_sync(l->stream)) != CUDA_SUCCESS)
		n = 0, r = rs, what = "cuStreamSynchronize";
	if (locked)
		pthread_mutex_unlock(l->copy_lock);
	if (r != CUDA_SUCCESS)
		cu_failed(what, r);
	without_ctx();
	return n;
}

static int gpu_wait(struct sim_lane *l, int ev)
{
	CUresult r = cu.event_sync(l->ev[ev]);
	if (r != CUDA_SUCCESS)
		cu_failed("cuEventSynchronize", r);
	return r == CUDA_SUCCESS ? 0 : -EFAULT;
}
#else
int sim_cuda_available(void)
{
	return 0;
}

static int gpu_alloc(struct sim_bounce *b, int hostmap, char *err, size_t errlen)
{
	snprintf(err, errlen, "built without CUDA: use TCPXSIM_BOUNCE=host");
	return -ENOTSUP;
}

static int gpu_lane_init(struct sim_lane *l)
{
	return -ENOTSUP;
}

static int gpu_lane_sync(struct sim_lane *l)
{
	return -ENOTSUP;
}

static int gpu_write_frags(struct sim_bounce *b, struct sim_lane *l, const uint8_t *src,
			   size_t first, size_t n)
{
	return -ENOTSUP;
}

static int gpu_poison(struct sim_bounce *b, struct sim_lane *l, const uint32_t *pages, size_t n)
{
	return -ENOTSUP;
}

static int gpu_fill(struct sim_bounce *b, size_t off, int byte, size_t n)
{
	return -ENOTSUP;
}

static void *gpu_mem_ctx(uint64_t src)
{
	return NULL;
}

static size_t gpu_reads(struct sim_lane *l, uint8_t *dst, uint64_t src, size_t len,
			size_t piece)
{
	return 0;
}

static int gpu_wait(struct sim_lane *l, int ev)
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

int sim_bounce_create(const char *gpu, size_t size, enum sim_bounce_mode mode, uint64_t seed,
		      struct sim_bounce **out, char *err, size_t errlen)
{
	struct sim_bounce *b = calloc(1, sizeof(*b));
	int rc;
	if (!b)
		return -ENOMEM;
	snprintf(b->gpu, sizeof(b->gpu), "%s", gpu);
	b->size = (size + DEVMEM_PAGE - 1) / DEVMEM_PAGE * DEVMEM_PAGE;
	b->fd = -1;
	pthread_mutex_init(&b->lock, NULL);
	rc = mode == SIM_BOUNCE_HOST ? host_alloc(b, err, errlen)
				     : gpu_alloc(b, mode == SIM_BOUNCE_HOSTMAP, err, errlen);
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
	if (b->host && !b->hostmap)
		munmap(b->host, b->size);
	if (b->fd >= 0 && !b->on_gpu && !b->hostmap)
		close(b->fd);
	sim_pool_fini(&b->pool);
	pthread_mutex_destroy(&b->lock);
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

int sim_bounce_write_frags(struct sim_bounce *b, struct sim_lane *l, const uint8_t *src,
			   size_t first, size_t n)
{
	if (first > TCPXSIM_MAX_FRAGS || n > TCPXSIM_MAX_FRAGS - first)
		return -EINVAL;
	if (b->on_gpu)
		return gpu_write_frags(b, l, src, first, n);
	for (size_t i = first, off = 0; i < first + n; off += l->lens[i], i++)
		memcpy(b->host + l->offs[i], src + off, l->lens[i]);
	return 0;
}

int sim_bounce_poison(struct sim_bounce *b, struct sim_lane *l, const uint32_t *pages, size_t n)
{
	if (b->on_gpu)
		return gpu_poison(b, l, pages, n);
	for (size_t i = 0; i < n; i++)
		memset(b->host + (size_t)pages[i] * DEVMEM_PAGE, 0x5a, DEVMEM_PAGE);
	return 0;
}

/* Free lanes, any context's.  Each thread keeps the lane it last gave
 * back and takes it again when its next call is in the same context, so
 * the steady state of a socket thread takes no process-wide lock for its
 * lane; the list (and its lock) serves the rest, and a thread's lane goes
 * back to it when the thread ends. */
static struct {
	pthread_mutex_t lock;
	struct sim_lane *free;
	pthread_once_t once;
	pthread_key_t key;   /* set in threads that keep a lane: its end gives it back */
} lanes = {PTHREAD_MUTEX_INITIALIZER, NULL, PTHREAD_ONCE_INIT, 0};

static __thread struct sim_lane *kept_lane;

static void lane_push(struct sim_lane *l)
{
	pthread_mutex_lock(&lanes.lock);
	l->next = lanes.free;
	lanes.free = l;
	pthread_mutex_unlock(&lanes.lock);
}

static void lane_thread_end(void *unused)
{
	struct sim_lane *l = kept_lane;
	kept_lane = NULL;
	if (l)
		lane_push(l);
}

static void lane_key_make(void)
{
	pthread_key_create(&lanes.key, lane_thread_end);
}

struct sim_lane *sim_lane_get(void *ctx)
{
	struct sim_lane *l = kept_lane, **p;
	if (l && l->ctx == ctx) {
		kept_lane = NULL;
		return l;
	}
	pthread_mutex_lock(&lanes.lock);
	for (p = &lanes.free; *p && (*p)->ctx != ctx; p = &(*p)->next)
		;
	l = *p;
	if (l)
		*p = l->next;
	pthread_mutex_unlock(&lanes.lock);
	if (l)
		return l;
	/* A new one, made outside the lock (pinned allocations are slow);
	 * lanes live until the process ends. */
	if (!(l = calloc(1, sizeof(*l))))
		return NULL;
	l->ctx = ctx;
	if (ctx ? gpu_lane_init(l) != 0 : !(l->buf = malloc(TCPXSIM_STAGE_BYTES))) {
		free(l); /* what a failed GPU lane made stays: the context's */
		return NULL;
	}
	return l;
}

void sim_lane_put(struct sim_lane *l)
{
	if (!l)
		return;
	if (!kept_lane) {
		static __thread int keyed;
		if (!keyed) {
			pthread_once(&lanes.once, lane_key_make);
			keyed = pthread_setspecific(lanes.key, (void *)1) == 0;
		}
		if (keyed) {
			kept_lane = l;
			return;
		}
	}
	lane_push(l);
}

int sim_lane_sync(struct sim_lane *l)
{
	return l->ctx ? gpu_lane_sync(l) : 0;
}

void *sim_mem_ctx(uint64_t src, int on_gpu, int *ok)
{
	void *ctx = on_gpu ? gpu_mem_ctx(src) : NULL;
	*ok = !on_gpu || ctx;
	return ctx;
}

size_t sim_mem_reads(struct sim_lane *l, uint8_t *dst, uint64_t src, size_t len, size_t piece)
{
	if (l->ctx)
		return gpu_reads(l, dst, src, len, piece);
	memcpy(dst, (const void *)(uintptr_t)src, len);
	return (len + piece - 1) / piece;
}

int sim_mem_wait(struct sim_lane *l, int ev)
{
	return l->ctx ? gpu_wait(l, ev) : 0;
}
