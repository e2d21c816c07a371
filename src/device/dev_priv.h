/* What the CUDA files of the device seam share: the objects behind the
 * opaque stream/event handles and the one cudaError_t translation. */
#ifndef TP_DEV_PRIV_H
#define TP_DEV_PRIV_H

#include <stdbool.h>
#include <stddef.h>

#include <cuda_runtime_api.h>

#include "tp_device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Copies collected for one issue (copy_async.c). */
struct tp_dev_batch {
	void **dst;
	const void **src;
	size_t *len;
	size_t n, cap;
};

struct tp_dev_stream {
	cudaStream_t st;
	struct tp_dev_batch batch;
	bool batch_ok; /* cudaMemcpyBatchAsync usable (until refused once) */
	/* host-variant staging (pinned), grown on demand, ordered on st */
	char *stage;
	size_t stage_cap;
	/* set by the unpack kernel on a record outside its chunk (pinned,
	 * mapped: err_dev is its device alias) */
	unsigned *err_host, *err_dev;
};

struct tp_dev_event {
	cudaEvent_t ev;
};

/* Load a file's kernels into the current context (kernels_load's parts). */
int tp__dev_unpack_load(void);
int tp__dev_copy_load(void);

/* A CUDA driver call through cudart (nothing links libcuda), NULL when
 * the driver lacks it (cuda.c). */
void *tp__dev_drv_fn(const char *name);

/* 0 for cudaSuccess; else clears the sticky error state, records "call:
 * cudaGetErrorString(err)" as the detail and returns TCPX_P2P_ECUDA. */
int tp__dev_cuda_check(cudaError_t err, const char *call);

/* Collect a copy (cudaMemcpyDefault) for the next issue; issue them all,
 * ordered on the stream as a group (not among themselves: no copy of a
 * batch may depend on another); pinned: every operand is device or pinned
 * host memory, so they may go as one batch.  On error the batch is
 * dropped. */
int tp__dev_batch_add(tp_dev_stream *s, void *dst, const void *src, size_t len);
int tp__dev_batch_issue(tp_dev_stream *s, bool pinned);
void tp__dev_batch_free(tp_dev_stream *s);

/* Test builds: injected stream delays (delay.c says which and why); in
 * release builds they are nothing. */
#if TP_TEST_HOOKS
void tp__dev_delay_op(cudaStream_t st);
void tp__dev_delay_clear(cudaStream_t st);
#else
static inline void tp__dev_delay_op(cudaStream_t st)
{
	(void)st;
}

static inline void tp__dev_delay_clear(cudaStream_t st)
{
	(void)st;
}
#endif

#define TP_CUDA(fn, ...) tp__dev_cuda_check(fn(__VA_ARGS__), #fn)

#ifdef __cplusplus
}
#endif

#endif
