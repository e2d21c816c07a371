/* The session's device queue (devq.c): one CUDA stream and an event ring,
 * for unpacks, copy lists and the control channel's frame copies. */
#ifndef TP_CORE_DEVQ_H
#define TP_CORE_DEVQ_H

#include <stdbool.h>
#include <stdint.h>

#include "device/tp_device.h"

struct tcpx_p2p_conn;
struct tcpx_p2p_session;
struct tp_comm;
struct tp_devq;
struct tp_slot;

/* devq.c: the session's device queue, and the unpack handle of a comm */
int tp__unpack_prepare(struct tcpx_p2p_session *s, struct tp_comm *cm);
int tp__unpack_start(struct tcpx_p2p_conn *c, struct tp_comm **cms, struct tp_slot **slots,
		     int n);
/* What a copy list's memory allows. */
enum tp_list_how {
	TP_LIST_ASYNC,  /* an operand in pageable memory: cudaMemcpyAsync per entry */
	TP_LIST_MAPPED, /* every operand reached by the GPU, the list in host memory */
	TP_LIST_KERNEL, /* ... and the list device-readable, unchanged until done: a kernel */
};

/* Copy list[0..n) on the session's device queue, as `how` allows (a
 * MAPPED list goes as cudaMemcpyAsync on the stream, as jobs while a
 * stream is held).  *launch numbers the work for tp__devq_done. */
int tp__devq_copies(struct tcpx_p2p_session *s, const struct tp_copy *list, uint32_t n,
		    enum tp_list_how how, uint64_t *launch);
/* Hold the caller's CUDA stream `stream` (of the session's GPU, current)
 * after all work now queued, until tp__devq_release(slot); the device
 * work a hold waits for goes to the hold kernels meanwhile.  EAGAIN when
 * TP_SWQ_SLOTS holds are in place. */
int tp__devq_hold(struct tcpx_p2p_session *s, void *stream, int *slot);
/* Release a hold: its transfer ended and every byte of it was written, or
 * it failed (then after the device work queued so far, bounded). */
void tp__devq_release(struct tcpx_p2p_session *s, int slot, bool failed);
/* Free pinned host memory (tp__dev_host_alloc); while a stream is held, not
 * before the session ends: freeing it waits for the whole GPU, a hold
 * kernel included. */
void tp__devq_host_free(struct tcpx_p2p_session *s, void *p);
/* Wait for all work queued on the session's device queue (conn teardown),
 * jobs published to hold kernels included (bounded). */
void tp__devq_drain(struct tcpx_p2p_session *s);
/* Has device work number `launch` finished?  Never blocks. */
int tp__devq_done(struct tcpx_p2p_session *s, uint64_t launch, bool *done);
void tp__devq_destroy(struct tp_devq *u);

#endif
