/* What unpack_bench (and the GPU tests of the ring path and grid shapes)
 * may turn or reach in the device seam: the unpack kernel's tuning knobs
 * and the CUDA stream behind a handle and how it copies.  Compiled into test-hook builds
 * (TCPX_P2P_TEST_HOOKS) only; a release library has no knob to turn and
 * launches as the defaults below say. */
#ifndef TP_DEVICE_DEV_TUNE_H
#define TP_DEVICE_DEV_TUNE_H

#include <stdbool.h>

#include "device/tp_device.h"

#ifdef __cplusplus
extern "C" {
#endif

#if TP_TEST_HOOKS
/* Blocks per job of the unpack kernel (default 32; not thread-safe
 * against concurrent launches). */
int tp__dev_unpack_set_blocks(int blocks);
/* Whether launches of few records carry them in their parameters (the
 * default) or every launch reads the ring (same thread rule). */
void tp__dev_unpack_set_inline(bool on);
/* The cudaStream_t of s, for timing with CUDA events around launches. */
void *tp__dev_stream_cuda(tp_dev_stream *s);
/* Whether copies on s go as one cudaMemcpyBatchAsync per chunk (the
 * default where the driver has it) or one cudaMemcpyAsync each. */
void tp__dev_stream_set_batch(tp_dev_stream *s, bool on);
#endif

#ifdef __cplusplus
}
#endif

#endif
