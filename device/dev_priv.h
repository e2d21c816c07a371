/* What the CUDA files of the device seam share: the objects behind the
 * opaque stream/event handles and the one cudaError_t translation. */
#ifndef TP_DEV_PRIV_H
#define TP_DEV_PRIV_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#include "tp_device.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tp_dev_stream {
	cudaStream_t st;
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

/* 0 for cudaSuccess; else clears the sticky error state, records "call:
 * cudaGetErrorString(err)" as the detail and returns TCPX_P2P_ECUDA. */
int tp__dev_cuda_check(cudaError_t err, const char *call);

/* Blocks per job of the unpack kernel (a tuning knob for unpack_bench;
 * not thread-safe against concurrent launches). */
int tp__dev_unpack_set_blocks(int blocks);

#define TP_CUDA(fn, ...) tp__dev_cuda_check(fn(__VA_ARGS__), #fn)

#ifdef __cplusplus
}
#endif

#endif
