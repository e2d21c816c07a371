/* The rendezvous socket's frames (rdv_frame.c): hello, auth, barrier, bye,
 * over the util layer's deadline-bound sockets.  Not the control channel's
 * frames (TP_CTL_FRAME in core/ctl.h).  Every call takes a timeout in ms
 * (< 0 waits for ever) and never blocks past it. */
#ifndef TP_CORE_RDV_FRAME_H
#define TP_CORE_RDV_FRAME_H

#include <stdint.h>

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
