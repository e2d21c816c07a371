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
/* Copy list[0..n) on the session's stream: one kernel (list, sources and
 * destinations device-accessible) or a cudaMemcpyAsync per entry.
 * *launch numbers the work for tp__devq_done. */
int tp__devq_copies(struct tcpx_p2p_session *s, const struct tp_copy *list, uint32_t n,
		    bool kernel, uint64_t *launch);
/* Wait for all work queued on the session's device queue (conn teardown). */
void tp__devq_drain(struct tcpx_p2p_session *s);
/* Has device work number `launch` finished?  Never blocks. */
int tp__devq_done(struct tcpx_p2p_session *s, uint64_t launch, bool *done);
void tp__devq_destroy(struct tp_devq *u);

#endif
