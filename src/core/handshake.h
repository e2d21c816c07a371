/* The rendezvous handshake (src/core/handshake.c). */
#ifndef TP_CORE_HANDSHAKE_H
#define TP_CORE_HANDSHAKE_H

#include <stdbool.h>
#include <stdint.h>

struct tcpx_p2p_session;
struct tcpx_p2p_conn;

int64_t tp__now_ms(void);
/* ms left before deadline (< 0: none), at least 1 so that an expired step
 * still reports its own timeout. */
int tp__left_ms(int64_t deadline);

/* Build a connection over the connected socket fd to peer ("ip:port").
 * peer_deadline bounds what the peer must send before any plugin call
 * (the server's per-handshake limit); deadline bounds the whole set-up
 * (< 0: none).  On success *out owns fd; on failure the caller closes it.
 * Every error detail names the peer. */
int tp__handshake(struct tcpx_p2p_session *s, int fd, const char *peer, bool server,
		  int64_t peer_deadline, int64_t deadline, struct tcpx_p2p_conn **out);

/* An AUTH frame payload of len bytes for step (1..3): 0 or EPROTO.  Pure,
 * for the fuzzer. */
int tp__auth_msg_check(const void *buf, uint32_t len, int step);

#endif
