/* Device seam for builds without the CUDA toolkit: no GPUs, every GPU
 * operation unsupported. */
#include "tp_device.h"
#include "util/error.h"

#define TP_NO_CUDA() tp__error(TCPX_P2P_ENOTSUP, "built without CUDA")

int tp__dev_count(int *n) { *n = 0; return 0; }
int tp__dev_set(int gpu) { return TP_NO_CUDA(); }
void *tp__dev_ctx_save(void) { return NULL; }
bool tp__dev_host_mapped(const void *p, size_t len) { return false; }
int tp__dev_host_pin(void *p, size_t len) { return TP_NO_CUDA(); }
int tp__dev_host_unpin(void *p) { return TP_NO_CUDA(); }
void tp__dev_ctx_restore(void *ctx) {}
int tp__dev_pci_bus_id(int gpu, char *buf, int len) { return TP_NO_CUDA(); }
int tp__dev_ptr_is_device(const void *p, int *is_dev) { *is_dev = 0; return 0; }
int tp__dev_ptr_via_gpu(const void *p, int *via_gpu) { *via_gpu = 0; return 0; }
int tp__dev_memcpy(void *dst, const void *src, size_t n) { return TP_NO_CUDA(); }
int tp__dev_stream_create(tp_dev_stream **s) { return TP_NO_CUDA(); }
void tp__dev_stream_destroy(tp_dev_stream *s) {}
int tp__dev_stream_sync(tp_dev_stream *s) { return TP_NO_CUDA(); }
int tp__dev_stream_error(tp_dev_stream *s, int *bad) { return TP_NO_CUDA(); }
int tp__dev_event_create(tp_dev_event **e) { return TP_NO_CUDA(); }
void tp__dev_event_destroy(tp_dev_event *e) {}
int tp__dev_event_record(tp_dev_event *e, tp_dev_stream *s) { return TP_NO_CUDA(); }
int tp__dev_event_query(tp_dev_event *e, int *done) { return TP_NO_CUDA(); }
int tp__dev_user_event_query(void *event, int *done) { return TP_NO_CUDA(); }
int tp__dev_unpack_kernel(tp_dev_stream *s, const struct tp_unpack_job *jobs, int njobs)
{ return TP_NO_CUDA(); }
int tp__dev_unpack_d2d(tp_dev_stream *s, const struct tp_unpack_job *job) { return TP_NO_CUDA(); }
int tp__dev_unpack_host(tp_dev_stream *s, const struct tp_unpack_job *job) { return TP_NO_CUDA(); }
int tp__dev_host_alloc(void **p, size_t n) { return TP_NO_CUDA(); }
void tp__dev_host_free(void *p) {}
int tp__dev_malloc(void **p, size_t n) { return TP_NO_CUDA(); }
void tp__dev_free(void *p) {}
int tp__dev_copy_kernel(tp_dev_stream *s, const struct tp_copy *list, uint32_t n)
{ return TP_NO_CUDA(); }
int tp__dev_copy_async(tp_dev_stream *s, const struct tp_copy *list, uint32_t n)
{ return TP_NO_CUDA(); }
int tp__dev_kernels_load(void) { return TP_NO_CUDA(); }
int tp__dev_swq_create(struct tp_swq *q) { return TP_NO_CUDA(); }
void tp__dev_swq_destroy(struct tp_swq *q) {}
int tp__dev_stream_check(void *stream) { return TP_NO_CUDA(); }
int tp__dev_swait_hold(tp_dev_stream *s, void *stream, struct tp_swq *q, int slot,
		       tp_dev_event *ord, tp_dev_event *done, int *launched)
{ *launched = 0; return TP_NO_CUDA(); }
int tp__dev_swq_drain(tp_dev_stream *s, struct tp_swq *q, uint64_t until) { return TP_NO_CUDA(); }
int tp__dev_event_wait(tp_dev_event *e, int timeout_ms, int *done) { return TP_NO_CUDA(); }
