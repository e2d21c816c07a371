/* Blocking-with-deadline TCP helpers and the framed protocol of the
 * rendezvous socket (TP_RDV_FRAME_*: hello, auth, barrier; not the control
 * channel's frames, TP_CTL_FRAME in core/ctl.h).
 * Every call takes a timeout in ms (< 0 waits for ever) and never blocks
 * past it; EINTR is retried. */
#ifndef TP_UTIL_SOCK_H
#define TP_UTIL_SOCK_H

#include <stddef.h>
#include <stdint.h>

/* Listen on addr:port (addr NULL = any, port 0 = ephemeral). */
int tp__sock_listen(const char *addr, uint16_t port, int *fd, uint16_t *bound_port);
/* One connection if one is queued (the listening socket is non-blocking):
 * 0, EAGAIN when none is, ENET on a real error (EMFILE included: the caller
 * must not spin on it).  The new socket is blocking, close-on-exec, with
 * TCP_NODELAY; peer gets "ip:port" (may be NULL). */
int tp__sock_accept_nb(int lfd, int *fd, char *peer, size_t peer_len);
/* Connect, retrying refused connections with backoff until the deadline. */
int tp__sock_dial(const char *host, uint16_t port, int timeout_ms, int *fd);
int tp__sock_send_all(int fd, const void *buf, size_t len, int timeout_ms);
/* ECLOSED on orderly EOF before len bytes. */
int tp__sock_recv_all(int fd, void *buf, size_t len, int timeout_ms);
void tp__sock_close(int fd);

/* Rendezvous frame: magic "TPX1", version, type, payload length, all big-endian. */
#define TP_RDV_FRAME_MAGIC 0x54505831u
#define TP_RDV_FRAME_VERSION 1u
#define TP_RDV_FRAME_MAX (64u << 10)

enum tp_rdv_frame_type {
	TP_RDV_FRAME_ANY = 0,     /* tp__rdv_frame_recv_any: whatever comes */
	TP_RDV_FRAME_HELLO = 1,   /* payload: the sender's connection blob */
	TP_RDV_FRAME_BARRIER = 2, /* empty */
	TP_RDV_FRAME_BYE = 3,     /* empty */
	TP_RDV_FRAME_AUTH = 4,    /* challenge-response (src/core/setup/auth.c) */
};

struct tp_rdv_frame_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint32_t len;
};

int tp__rdv_frame_send(int fd, uint16_t type, const void *payload, uint32_t len, int timeout_ms);
/* Receive one frame of type `type` into buf (capacity cap); *len gets its
 * length.  EPROTO on bad magic, version, type or a length over cap. */
int tp__rdv_frame_recv(int fd, uint16_t type, void *buf, uint32_t cap, uint32_t *len,
		       int timeout_ms);

/* The same for a frame of any type, reported in *type. */
int tp__rdv_frame_recv_any(int fd, uint16_t *type, void *buf, uint32_t cap, uint32_t *len,
		       int timeout_ms);

/* Pure helpers for the above, exposed for unit tests.  decode with type
 * TP_RDV_FRAME_ANY accepts every type. */
void tp__rdv_frame_encode(struct tp_rdv_frame_hdr *wire, uint16_t type, uint32_t len);
int tp__rdv_frame_decode(const struct tp_rdv_frame_hdr *wire, uint16_t type, uint32_t cap,
			 uint32_t *len);

#endif
