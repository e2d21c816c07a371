/* What a connection's passes know of the peer's liveness (live.c). */
#ifndef TP_CORE_LIVE_H
#define TP_CORE_LIVE_H

#include <stddef.h>

struct tcpx_p2p_conn;

/* init: at conn creation.  pass: after the control channel's receives
 * were tested in a pass of a live, not closing conn: queue a heartbeat
 * when this side has said nothing for heartbeat_ms, and fail (ECLOSED,
 * the silence named) when the peer has said nothing for dead_after_ms of
 * this side's passes; a transfer past its deadline closes the conn.
 * on_heartbeat: the peer's.  idle: one more message of the peer's that
 * carries no work (a heartbeat, an empty frame; what names them): 0, or
 * EPROTO past the rate this side takes (a burst of 1024, then one per ms). */
void tp__live_init(struct tcpx_p2p_conn *c);
/* A peer's transfer x was accepted here (an in-write or in-read): it gets
 * the conn's in_deadline (tcpx_p2p_conn_in_deadline), if any. */
struct tcpx_p2p_xfer;
void tp__live_hosted(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x);
int tp__live_pass(struct tcpx_p2p_conn *c);
int tp__live_on_heartbeat(struct tcpx_p2p_conn *c, size_t len);
int tp__live_idle(struct tcpx_p2p_conn *c, const char *what);

#endif
