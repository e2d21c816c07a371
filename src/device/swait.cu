/* Stream waits: the hold kernel, which keeps a caller's stream until its
 * release word is set and meanwhile performs the session's device work
 * published as jobs (tp_device.h says why), and the drain kernel, which
 * performs what is left once no hold kernel lives.
 *
 * Each block claims one job at a time (thread 0, by compare-and-swap on
 * the device-memory head, only below the published tail: a claimed job is
 * always performed), performs it with all its threads and stamps it done
 * after a system-wide fence.  A hold kernel outlives many refills of the
 * plugin's bounce pages, so it fetches them again on every load
 * (tp_copy_range<..., true>), never trusting a line an earlier job cached. */
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "abi/dev_copy.cuh"
#include "dev_priv.h"
extern "C" {
#include "util/error.h"
#include "util/time.h"
}

#define TP_SWAIT_THREADS 256
#define TP_SWAIT_WARPS (TP_SWAIT_THREADS / 32)
/* Blocks per kernel: jobs performed at once.  Few enough to leave the
 * caller's own kernels the GPU, enough for a window of chunks. */
#define TP_SWAIT_BLOCKS 16
#define TP_SWAIT_NO_LIMIT (~0ull)
#define TP_SWAIT_IDLE_NS 8000

static_assert(sizeof(struct tp_swq_job) == 48, "struct tp_swq_job layout");

struct tp_swait_args {
	const struct tp_swq_job *job;
	const volatile uint64_t *tail;
	volatile uint64_t *done;
	const volatile uint32_t *word; /* hold: this kernel's release word */
	volatile unsigned *err;
	unsigned long long *head;
	uint64_t until; /* drain: stop at this job; hold: TP_SWAIT_NO_LIMIT */
};

/* Thread 0: the next job for this block, or -1 when it should stop.  Idle,
 * it looks again after a pause that doubles up to TP_SWAIT_IDLE_NS: the
 * words it polls are host memory, read over PCIe, by 16 blocks of up to
 * 64 kernels. */
static __device__ long long claim(const struct tp_swait_args &a)
{
	unsigned pause = 500;

	for (;;) {
		/* released: go at once, leaving jobs to the other kernels */
		if (a.until == TP_SWAIT_NO_LIMIT && *a.word != 0)
			return -1;
		unsigned long long h = *(volatile unsigned long long *)a.head;
		unsigned long long t = *a.tail;

		if (h < t && h < a.until) {
			if (atomicCAS(a.head, h, h + 1) == h)
				return (long long)h;
			continue;
		}
		if (h >= a.until)
			return -1; /* a drain's end */
		__nanosleep(pause);
		pause = min(2 * pause, (unsigned)TP_SWAIT_IDLE_NS);
	}
}

static __device__ void unpack(const struct tp_swq_job &j, volatile unsigned *err)
{
	const uint4 *recs = (const uint4 *)j.src;
	unsigned lane = threadIdx.x & 31;
	uint32_t cnt = min(j.cnt, (uint32_t)TP_UNPACK_MAX_PAGES);

	for (uint32_t i = threadIdx.x / 32; i < cnt; i += TP_SWAIT_WARPS) {
		uint4 r = __ldcv(recs + i);
		uint64_t dst_off = ((uint64_t)r.w << 32) | r.z;

		if (r.y > TP_UNPACK_PAGE_SIZE || dst_off > j.len || r.y > j.len - dst_off) {
			if (lane == 0)
				*err = 1u;
			continue;
		}
		tp_copy_range<32, true>(j.dst + dst_off, j.bounce + r.x, r.y, lane);
	}
}

static __device__ void copy_one(const char *src, char *dst, uint64_t len)
{
	for (uint64_t off = 0; off < len; off += 1u << 30) {
		uint64_t k = len - off < (1u << 30) ? len - off : 1u << 30;

		tp_copy_range<TP_SWAIT_THREADS, true>(dst + off, src + off, (uint32_t)k, threadIdx.x);
	}
}

static __global__ void __launch_bounds__(TP_SWAIT_THREADS) tp_swait(const struct tp_swait_args a)
{
	__shared__ long long mine;
	__shared__ struct tp_swq_job j;

	for (;;) {
		if (threadIdx.x == 0) {
			mine = claim(a);
			if (mine >= 0) {
				/* published before the tail that let us claim it */
				__threadfence_system();
				const volatile struct tp_swq_job *p = a.job + mine % TP_SWQ_CAP;
				j.kind = p->kind;
				j.cnt = p->cnt;
				j.src = (const void *)p->src;
				j.bounce = (const char *)p->bounce;
				j.dst = (char *)p->dst;
				j.len = p->len;
				j.seq = p->seq;
				if (j.seq != (uint64_t)mine + 1)
					j.kind = 0; /* cannot happen: flagged, not performed */
			} else {
				/* what a release word orders: every job the host saw
				 * done before it set the word */
				__threadfence_system();
			}
		}
		__syncthreads();
		if (mine < 0)
			return;
		if (j.kind == TP_SWQ_UNPACK) {
			unpack(j, a.err);
		} else if (j.kind == TP_SWQ_LIST) {
			const unsigned long long *e = (const unsigned long long *)j.src;

			for (uint32_t i = 0; i < j.cnt; i++)
				copy_one((const char *)__ldcv(e + 3 * i), (char *)__ldcv(e + 3 * i + 1),
					 __ldcv(e + 3 * i + 2));
		} else if (j.kind == TP_SWQ_COPY) {
			copy_one((const char *)j.src, j.dst, j.len);
		} else if (threadIdx.x == 0) {
			*a.err = 1u;
		}
		__syncthreads(); /* every thread's writes issued */
		if (threadIdx.x == 0) {
			__threadfence_system();
			a.done[mine % TP_SWQ_CAP] = (uint64_t)mine + 1;
		}
	}
}

struct swq_mem {
	struct tp_swq_job job[TP_SWQ_CAP];
	uint64_t done[TP_SWQ_CAP];
	uint64_t tail;
	uint32_t word[TP_SWQ_SLOTS];
	unsigned err;
};

extern "C" int tp__dev_swq_create(struct tp_swq *q)
{
	struct swq_mem *m;
	int rc;

	memset(q, 0, sizeof(*q));
	rc = tp__dev_host_alloc((void **)&m, sizeof(*m));
	if (rc)
		return rc;
	memset(m, 0, sizeof(*m));
	rc = tp__dev_malloc((void **)&q->head, sizeof(*q->head));
	if (rc) {
		tp__dev_host_free(m);
		return rc;
	}
	q->mem = m;
	q->job = m->job;
	q->done = m->done;
	q->tail = &m->tail;
	q->word = m->word;
	q->err = &m->err;
	return 0;
}

extern "C" void tp__dev_swq_destroy(struct tp_swq *q)
{
	tp__dev_free(q->head);
	tp__dev_host_free(q->mem);
	memset(q, 0, sizeof(*q));
}

/* The device of `stream` through the driver: its context made current for
 * the question. */
static int stream_device_drv(cudaStream_t st, int *dev)
{
	typedef int (*stream_ctx_fn)(cudaStream_t st, void **ctx);
	typedef int (*ctx_fn)(void *ctx);
	typedef int (*ctx_dev_fn)(int *dev);
	typedef int (*ctx_pop_fn)(void **ctx);
	stream_ctx_fn get = (stream_ctx_fn)tp__dev_drv_fn("cuStreamGetCtx");
	ctx_fn push = (ctx_fn)tp__dev_drv_fn("cuCtxPushCurrent");
	ctx_dev_fn ask = (ctx_dev_fn)tp__dev_drv_fn("cuCtxGetDevice");
	ctx_pop_fn pop = (ctx_pop_fn)tp__dev_drv_fn("cuCtxPopCurrent");
	void *ctx = NULL, *was;
	int rc;

	if (!get || !push || !ask || !pop)
		return tp__error(TCPX_P2P_ECUDA, "stream_wait: the CUDA driver lacks cuStreamGetCtx");
	if ((rc = get(st, &ctx)) || (rc = push(ctx)))
		return tp__error(TCPX_P2P_ECUDA, "stream_wait: cuStreamGetCtx/cuCtxPushCurrent: "
				 "CUDA driver error %d", rc);
	rc = ask(dev);
	pop(&was);
	return rc ? tp__error(TCPX_P2P_ECUDA, "stream_wait: cuCtxGetDevice: CUDA driver error %d",
			      rc) : 0;
}

/* The device of `stream`: cudaStreamGetDevice where the toolkit has it and
 * the driver serves it (an older driver under minor-version compatibility
 * may not), else the driver's way. */
static int stream_device(cudaStream_t st, int *dev)
{
#if CUDART_VERSION >= 12080
	cudaError_t e = cudaStreamGetDevice(st, dev);

	if (e != cudaErrorCallRequiresNewerDriver)
		return tp__dev_cuda_check(e, "cudaStreamGetDevice");
	(void)cudaGetLastError();
#endif
	return stream_device_drv(st, dev);
}

extern "C" int tp__dev_stream_check(void *stream)
{
	cudaStream_t st = (cudaStream_t)stream;
	cudaStreamCaptureStatus cap;
	unsigned flags = 0;
	int dev, mine;
	int rc = TP_CUDA(cudaGetDevice, &mine);

	if (!rc)
		rc = TP_CUDA(cudaStreamIsCapturing, st, &cap);
	if (!rc && cap != cudaStreamCaptureStatusNone)
		return tp__error(TCPX_P2P_EINVAL, "stream_wait: the stream is being captured into "
				 "a CUDA graph (a wait for a transfer cannot be replayed)");
	if (!rc)
		rc = TP_CUDA(cudaStreamGetFlags, st, &flags);
	/* A blocking stream (the default streams too) orders the legacy default
	 * stream behind it, and with it every synchronous CUDA call of the
	 * process, the library's own and the plugin's among them. */
	if (!rc && !(flags & cudaStreamNonBlocking))
		return tp__error(TCPX_P2P_EINVAL, "stream_wait: a blocking stream cannot be held "
				 "(every synchronous CUDA call of the process would wait for the "
				 "transfer): use a stream made with cudaStreamNonBlocking "
				 "(torch.cuda.Stream())");
	if (rc)
		return rc;
	rc = stream_device(st, &dev);
	if (!rc && dev != mine)
		rc = tp__error(TCPX_P2P_EINVAL, "stream_wait: the stream belongs to GPU %d, the "
			       "session to GPU %d", dev, mine);
	return rc;
}

/* One hold or drain kernel on st: cudaLaunchKernel's own result, not an
 * error some earlier call of the caller's thread left behind. */
static int launch_swait(cudaStream_t st, struct tp_swait_args a, const char *what)
{
	void *params[] = { &a };

	return tp__dev_cuda_check(cudaLaunchKernel((const void *)tp_swait, dim3(TP_SWAIT_BLOCKS),
						   dim3(TP_SWAIT_THREADS), params, 0, st),
				  what);
}

static struct tp_swait_args args(struct tp_swq *q, const volatile uint32_t *word,
				 uint64_t until)
{
	return (struct tp_swait_args){ q->job, q->tail, q->done, word, q->err, q->head, until };
}

extern "C" int tp__dev_swait_hold(tp_dev_stream *s, void *stream, struct tp_swq *q, int slot,
				  tp_dev_event *ord, tp_dev_event *done, int *launched)
{
	cudaStream_t st = (cudaStream_t)stream;
	int rc;

	*launched = 0;
	if (slot < 0 || slot >= TP_SWQ_SLOTS)
		return tp__error(TCPX_P2P_EINVAL, "stream wait slot %d", slot);
	rc = TP_CUDA(cudaEventRecord, ord->ev, s->st);
	if (!rc)
		rc = TP_CUDA(cudaStreamWaitEvent, st, ord->ev, 0);
	if (!rc)
		rc = launch_swait(st, args(q, q->word + slot, TP_SWAIT_NO_LIMIT), "tp_swait (hold)");
	if (rc)
		return rc;
	*launched = 1;
	return TP_CUDA(cudaEventRecord, done->ev, st);
}

extern "C" int tp__dev_swq_drain(tp_dev_stream *s, struct tp_swq *q, uint64_t until)
{
	return launch_swait(s->st, args(q, NULL, until), "tp_swait (drain)");
}

extern "C" int tp__dev_kernels_load(void)
{
	cudaFuncAttributes fa;
	int rc = TP_CUDA(cudaFuncGetAttributes, &fa, tp_swait);

	if (!rc)
		rc = tp__dev_unpack_load();
	if (!rc)
		rc = tp__dev_copy_load();
	return rc;
}

extern "C" int tp__dev_event_wait(tp_dev_event *e, int timeout_ms, int *done)
{
	int64_t end = tp__now_ns() + (int64_t)timeout_ms * TP_NS_PER_MS;
	int rc;

	for (;;) {
		rc = tp__dev_event_query(e, done);
		if (rc || *done || tp__now_ns() >= end)
			return rc;
		usleep(200);
	}
}
