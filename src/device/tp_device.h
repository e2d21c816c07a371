/* CUDA behind one seam.  Built from the .cu/.c files in src/device/ when the
 * CUDA toolkit is found, else from stub.c whose calls answer
 * TCPX_P2P_ENOTSUP (and a device count of 0); the meta-ring reader
 * (unpack_meta.c) is plain C, built either way.  Every function returns 0 or
 * a TCPX_P2P_E* code; cudaError_t is translated in one place (cuda_err.c). */
#ifndef TP_DEVICE_H
#define TP_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "abi/nccl_net.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Usable GPUs.  No driver (cudaErrorInsufficientDriver, as on build
 * machines) or no device counts as 0, not as an error. */
int tp__dev_count(int *n);
int tp__dev_set(int gpu);
/* The thread's current CUDA context (NULL when none is current: a thread
 * that never used CUDA), and putting it back: library calls select their
 * session's GPU and give the caller its own context back on return.  A
 * thread with no context is left on the session's GPU rather than switched
 * to device 0, where it would create a context the process may not use.
 * Neither touches the thread's error state. */
void *tp__dev_ctx_save(void);
void tp__dev_ctx_restore(void *ctx);
/* Whether [p, p + len) lies in one page-locked host allocation that the
 * device addresses at p itself and may write (cudaHostAlloc'd or
 * cudaHostRegister'd memory, mapped, not read-only, under UVA): kernels
 * may then write it in place.  False for anything else, and without CUDA. */
bool tp__dev_host_mapped(const void *p, size_t len);
/* Page-lock [p, p + len) for every context, mapped (cudaHostRegister,
 * portable | mapped).  EINVAL when part of it is page-locked already;
 * ECUDA for other failures; ENOTSUP without CUDA. */
int tp__dev_host_pin(void *p, size_t len);
/* Undo tp__dev_host_pin(p). */
int tp__dev_host_unpin(void *p);
/* PCI bus id of a GPU, e.g. "0000:04:00.0". */
int tp__dev_pci_bus_id(int gpu, char *buf, int len);
/* *is_dev = 1 for device memory (cudaMemoryTypeDevice), 0 otherwise,
 * including when CUDA is unavailable. */
int tp__dev_ptr_is_device(const void *p, int *is_dev);
/* *via_gpu = 1 for memory the library must reach through a GPU (device
 * copies, kernels), never with the CPU at this address: device memory,
 * and any cuMemMap'd range, whose CPU access is its mapper's choice (a
 * plugin's bounce buffer in host memory that only its GPU maps); 0
 * otherwise, including when CUDA is unavailable. */
int tp__dev_ptr_via_gpu(const void *p, int *via_gpu);
/* Synchronous copy in any direction (cudaMemcpyDefault), on the legacy
 * stream: for set-up reads into pageable host memory (a comm's unpack
 * handle), complete when it returns.  Nothing on the data path uses it. */
int tp__dev_memcpy(void *dst, const void *src, size_t n);

typedef struct tp_dev_stream tp_dev_stream;
typedef struct tp_dev_event tp_dev_event;
int tp__dev_stream_create(tp_dev_stream **s); /* non-blocking stream */
/* Load every kernel of the library into the current context now.  Under
 * CUDA's lazy loading (the default) a kernel's first launch loads it, and
 * loading may wait for the whole context: for a held stream's kernel,
 * which waits for the very work that launch would start (tp_device.h,
 * stream waits), that is a deadlock. */
int tp__dev_kernels_load(void);
void tp__dev_stream_destroy(tp_dev_stream *s);
int tp__dev_stream_sync(tp_dev_stream *s);
/* *bad = 1 if a kernel on s met a record outside its chunk (skipped, not
 * copied) since the last call; read once the work is known complete. */
int tp__dev_stream_error(tp_dev_stream *s, int *bad);
int tp__dev_event_create(tp_dev_event **e);   /* timing disabled */
void tp__dev_event_destroy(tp_dev_event *e);
int tp__dev_event_record(tp_dev_event *e, tp_dev_stream *s);
/* *done = 1 once all work before the record finished; never blocks. */
int tp__dev_event_query(tp_dev_event *e, int *done);
/* The caller's own event (a cudaEventQuery on a cudaEvent_t the library
 * did not make), on the current device: *done = 1 once it completed, 0
 * while not ready; never blocks.  Any other answer (an error recorded on
 * its stream, an invalid handle) is ECUDA with the CUDA error named. */
int tp__dev_user_event_query(void *event, int *done);

/* A receive's records in the plugin's meta ring, checked: at most
 * TP_UNPACK_MAX_PAGES, each at most a page, inside its chunk and inside
 * the bounce buffer. */
struct tp_meta_view {
	const tp_unpack_rec *rec;
	uint32_t cnt;
	uint64_t bytes; /* the sum of their lengths */
};

/* How far into the bounce buffer a record may reach.  The plugin ABI does
 * not give the buffer's size; a record's 32-bit offset addresses 4 GiB. */
#define TP_META_BOUNCE_MAX (1ull << 32)

/* Read slot `slot` of ring m, for a chunk of chunk_len bytes and a bounce
 * buffer of bounce_len: the count once, then every record.  0 and *v, or
 * TCPX_P2P_EPLUGIN with a detail that starts with `what` and names the first
 * bad record.  The one reader of the ring: everything else works from *v. */
int tp__meta_read(const struct tp_unpack_meta *m, unsigned slot, uint32_t chunk_len,
		  uint64_t bounce_len, const char *what, struct tp_meta_view *v);
/* The same checks of a record list already in hand (cnt not yet bounded). */
int tp__meta_check(const tp_unpack_rec *rec, uint64_t cnt, uint32_t chunk_len,
		   uint64_t bounce_len, const char *what, struct tp_meta_view *v);

/* One received chunk to unpack: the records of its meta-ring slot.  The
 * caller reads cnt (host memory, published before test reported done) and
 * passes it by value: it saves the kernel a dependent PCIe read per block. */
struct tp_unpack_job {
	const tp_unpack_rec *recs; /* &meta->mem[slot][0]: pinned, mapped host memory
	                             (read by the kernel and by the host) */
	uint32_t cnt;              /* tp_meta_view.cnt, <= TP_UNPACK_MAX_PAGES */
	const char *bounce;        /* bounce buffer base (device pointer) */
	char *dst;                 /* receive buffer (device pointer) */
	uint32_t len;              /* bytes of the chunk: records must stay inside */
	/* For the copy variants, what the caller knows of the operands: the
	 * bounce buffer is device memory; dst is device memory or page-locked
	 * host memory over the whole chunk.  Copies go as one batch only
	 * between such operands (pageable memory must stay out: copy_async.c). */
	bool bounce_dev, dst_pinned;
};

#define TP_UNPACK_MAX_JOBS 32 /* jobs per kernel launch (passed by value) */

/* kernel: one launch gathers every record of njobs (<= TP_UNPACK_MAX_JOBS)
 * chunks; a launch of few records gets them from the host in its
 * parameters, a larger one reads them from the ring itself. */
int tp__dev_unpack_kernel(tp_dev_stream *s, const struct tp_unpack_job *jobs, int njobs);
/* d2d and host return TCPX_P2P_EPLUGIN, copying nothing, for a record
 * outside the chunk; the kernel skips such records and flags the stream. */
/* d2d: the records' copies through the copy engines, one batch when no
 * operand is pageable; the host reads the (pinned) records. */
int tp__dev_unpack_d2d(tp_dev_stream *s, const struct tp_unpack_job *job);
/* host: every record copied through host staging memory, then to dst. */
int tp__dev_unpack_host(tp_dev_stream *s, const struct tp_unpack_job *job);

/* Pinned host memory, mapped into the device at the same address (UVA)
 * and portable (every device and context sees it): kernels read and write
 * it in place.  n > 0; free it once no queued work uses it. */
int tp__dev_host_alloc(void **p, size_t n);
void tp__dev_host_free(void *p);
/* Device memory of the current device, cleared to zero; n > 0. */
int tp__dev_malloc(void **p, size_t n);
void tp__dev_free(void *p);

/* One contiguous copy of a vectored transfer: a gather of many small
 * segments into a staging buffer before a send, a scatter of received
 * bytes into many segments.  len <= TP_COPY_MAX_ENTRY (callers split
 * longer ranges), so one thread block per entry balances. */
struct tp_copy {
	const char *src;
	char *dst;
	uint64_t len;
};

#define TP_COPY_MAX_ENTRY (64u << 10)

/* One kernel launch on s copies list[0..n); n = 0 launches nothing.  list
 * must be device-readable (pinned mapped host memory from
 * tp__dev_host_alloc, read by the kernel in place, or device memory) and
 * stay unchanged until the copy completes; every src and dst
 * device-accessible (device memory or pinned mapped host memory).  Entries
 * may be unaligned and as small as 1 byte; no dst range overlaps a src
 * range or another dst range.  A list in device memory spares the launch
 * the PCIe read of its entries, several microseconds.  Only launch errors
 * are reported. */
int tp__dev_copy_kernel(tp_dev_stream *s, const struct tp_copy *list, uint32_t n);
/* The same copies through the copy engines (cudaMemcpyDefault) on s, one
 * cudaMemcpyAsync per run of entries adjacent in both src and dst: for
 * pageable host memory, which no kernel can reach (and no batch call
 * takes safely: copy_async.c).  The host reads list. */
int tp__dev_copy_async(tp_dev_stream *s, const struct tp_copy *list, uint32_t n);

/*
 * Stream waits (swait.cu).  A caller's CUDA stream is held by a kernel (the
 * hold kernel) until a word in mapped host memory is set.  A held stream
 * stalls whatever shares its hardware queue, the session's own stream
 * included, so while any hold kernel lives the session's device work does
 * not go to its stream: it is published as jobs in a queue that every hold
 * kernel performs (and, once none is left, one drain kernel on the session's
 * stream).  Nothing a hold kernel waits for then needs the GPU.
 */
#define TP_SWQ_SLOTS 64  /* holds per session at once */
#define TP_SWQ_CAP 4096u /* jobs published and not yet known done */

enum tp_swq_kind {
	TP_SWQ_UNPACK = 1, /* a received chunk: src = its records, cnt of them */
	TP_SWQ_LIST = 2,   /* a copy list: src = cnt struct tp_copy, device-readable */
	TP_SWQ_COPY = 3,   /* one copy: src, dst, len (<= TP_COPY_MAX_ENTRY) */
};

struct tp_swq_job {
	uint32_t kind, cnt;
	const void *src;
	const char *bounce; /* TP_SWQ_UNPACK */
	char *dst;
	uint64_t len;
	uint64_t seq; /* its index + 1, written last: published */
};

/* The queue.  Host side: jobs are published in order (job, then tail);
 * done[i % TP_SWQ_CAP] becomes i + 1 once job i is complete and its writes
 * visible to the whole system.  Whoever publishes holds the session's
 * device-queue lock. */
struct tp_swq {
	struct tp_swq_job *job;     /* TP_SWQ_CAP, mapped host memory */
	volatile uint64_t *done;    /* TP_SWQ_CAP, mapped host memory */
	volatile uint64_t *tail;    /* jobs published, mapped host memory */
	volatile uint32_t *word;    /* TP_SWQ_SLOTS: nonzero releases a hold */
	volatile unsigned *err;     /* set on a record outside its chunk */
	unsigned long long *head;   /* device memory: jobs claimed by kernels */
	void *mem;                  /* the mapped allocation behind the first five */
};

int tp__dev_swq_create(struct tp_swq *q);
void tp__dev_swq_destroy(struct tp_swq *q);
/* May `stream` (a cudaStream_t) be held by the current device?
 * TCPX_P2P_EINVAL for a blocking stream (the default streams included),
 * one of another device, or one being captured into a graph. */
int tp__dev_stream_check(void *stream);
/* Hold `stream` after all work now on s: it waits for `ord` recorded on s,
 * then runs the hold kernel of slot, which performs jobs until word[slot]
 * is set; `done` is recorded on stream after it.  *launched = 1 once the
 * kernel is queued, even if what follows failed: the caller must then
 * release it and cannot know when it ends. */
int tp__dev_swait_hold(tp_dev_stream *s, void *stream, struct tp_swq *q, int slot,
		       tp_dev_event *ord, tp_dev_event *done, int *launched);
/* On s: perform every job below `until` that no kernel claimed. */
int tp__dev_swq_drain(tp_dev_stream *s, struct tp_swq *q, uint64_t until);
/* *done = 1 once work before the record finished; waits at most
 * timeout_ms (0: never blocks). */
int tp__dev_event_wait(tp_dev_event *e, int timeout_ms, int *done);

#ifdef __cplusplus
}
#endif

#endif
