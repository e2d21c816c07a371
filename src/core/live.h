/* What a connection's passes know of the peer's liveness (live.c). */
#ifndef TP_CORE_LIVE_H
#define TP_CORE_LIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tcpx_p2p_conn;

/* pass: after the control channel's receives
 * were tested in a pass of a live, not closing conn: queue a heartbeat
 * when this side has said nothing for heartbeat_ms, and fail (ECLOSED,
 * the silence named) when the peer has said nothing for dead_after_ms of
 * this side's passes; a transfer past its deadline closes the conn.  (The
 * state starts at conn creation, conn.c; the peer's heartbeats are
 * recorded by the control channel, ctl_stream.c.) */
/* A peer's transfer x was accepted here (an in-write or in-read): it gets
 * the conn's in_deadline (tcpx_p2p_conn_in_deadline), if any. */
struct tcpx_p2p_xfer;
void tp__live_hosted(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x);
int tp__live_pass(struct tcpx_p2p_conn *c);
/* A look at x (conn lock held): a chunk of it retired since the last look
 * (true), so now is when it last moved and it is no longer stalled. */
bool tp__live_moved(struct tcpx_p2p_xfer *x, int64_t now);

#endif
