/* The rendezvous handshake (src/core/setup/handshake.c). */
#ifndef TP_CORE_HANDSHAKE_H
#define TP_CORE_HANDSHAKE_H

#include <stdbool.h>
#include <stdint.h>

#include "util/time.h"

struct tcpx_p2p_session;
struct tcpx_p2p_conn;

/* Build a connection over the connected socket fd to peer ("ip:port").
 * peer_deadline bounds what the peer must send before any plugin call
 * (the server's per-handshake limit); deadline bounds the whole set-up
 * (TP_NO_DEADLINE: none).  On success *out owns fd; on failure the caller closes it.
 * Every error detail names the peer. */
int tp__handshake(struct tcpx_p2p_session *s, int fd, const char *peer, bool server,
		  tp_deadline peer_deadline, tp_deadline deadline, struct tcpx_p2p_conn **out);

/* restart.c: fresh, just made, may be a restarted peer's: the session's
 * other conns to the same peer whose peer has another epoch fail at once
 * (EPEERRESTART).  The same peer: the same node id in its blob (any role;
 * tcpx_p2p_connect checks every conn whose peer has one), or, with
 * dialled (fresh made by tcpx_p2p_dial, which then marks it so), a
 * dialled conn to the same address. */
void tp__restart_check(struct tcpx_p2p_session *s, struct tcpx_p2p_conn *fresh, bool dialled);

/* An AUTH frame payload of len bytes for step (1..3): 0 or EPROTO.  Pure,
 * for the fuzzer. */
int tp__auth_msg_check(const void *buf, uint32_t len, int step);

#endif
