/* Blocking-with-deadline TCP helpers (the rendezvous's frames over them:
 * core/setup/rdv_frame.h).  Every call takes a timeout in ms (< 0 waits for
 * ever) or a deadline and never blocks past it; EINTR is retried. */
#ifndef TP_UTIL_SOCK_H
#define TP_UTIL_SOCK_H

#include <stddef.h>
#include <stdint.h>

#include "util/time.h"

/* Room for any peer's name: "[ipv6]:port". */
#define TP_SOCK_ADDR_LEN 64

/* Listen on addr:port (addr NULL = any, port 0 = ephemeral). */
int tp__sock_listen(const char *addr, uint16_t port, int *fd, uint16_t *bound_port);
/* One connection if one is queued (the listening socket is non-blocking):
 * 0, EAGAIN when none is, ENET on a real error (EMFILE included: the caller
 * must not spin on it).  The new socket is blocking, close-on-exec, with
 * TCP_NODELAY; peer gets "ip:port" (may be NULL). */
int tp__sock_accept_nb(int lfd, int *fd, char *peer, size_t peer_len);
/* Connect, retrying refused connections with backoff until the deadline. */
int tp__sock_dial(const char *host, uint16_t port, int timeout_ms, int *fd);
/* Move all len bytes to (send) or from (recv) the socket by the deadline:
 * 0, ETIMEDOUT, ECLOSED (the peer closed or reset it, or an orderly EOF
 * before len bytes), ENET; the detail names the peer. */
int tp__sock_send_by(int fd, const void *buf, size_t len, tp_deadline deadline);
int tp__sock_recv_by(int fd, void *buf, size_t len, tp_deadline deadline);
/* fd's peer as "ip:port" (or what is known of it), for error details. */
void tp__sock_peer_name(int fd, char *buf, size_t len);
void tp__sock_close(int fd);

#endif
