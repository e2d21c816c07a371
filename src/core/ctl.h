/* The control channel of a connection: one more plugin channel that
 * carries a byte stream of small messages in both directions, next to the
 * data channels' chunk streams (docs/architecture.md "Control channel").
 *
 * Every item of a data stream is announced on it before its bytes flow:
 * the receiving side posts its receives for an item only once it knows
 * what the item is (a send to match with a receive, a write into exported
 * memory, the response to a read), so lengths are checked and one-sided
 * transfers need nothing posted by the target's application.
 *
 * The stream is cut into frames of at most TP_CTL_FRAME bytes (a header
 * with the payload length, since test() never reports a received size);
 * messages may span frames.  Everything received is untrusted: lengths
 * are bounded before anything is allocated, and a malformed stream fails
 * the connection with EPROTO. */
#ifndef TP_CORE_CTL_H
#define TP_CORE_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/pipeline/comm.h"
#include "net/net.h"
#include "tcpx_p2p.h"

struct tcpx_p2p_conn;
struct tcpx_p2p_mr;

#define TP_CTL_FRAME (64u << 10) /* bytes per control receive */
#define TP_CTL_SLOTS 4u          /* control requests in flight per direction */
#define TP_CTL_FRAME_MAGIC 0x43585054u /* "TPXC" */
#define TP_CTL_FRAME_HDR 8u      /* u32 magic, u32 payload bytes */
/* Message header: u8 type, u8 chan, u16 0, u32 body bytes.  chan: the
 * channel an announced item's first chunk travels on (SEND, WRITE,
 * READ_RESP; below the conn's channel count), 0 in other messages. */
#define TP_CTL_MSG_HDR 8u
/* Largest message body a peer may announce: bounds what one message can
 * make this side allocate (about 2.8 M remote segments). */
#define TP_CTL_MSG_MAX (64u << 20)
/* Largest transfer a peer may announce (256 TiB): keeps chunk numbers far
 * from wrapping whatever the peer sends. */
#define TP_CTL_LEN_MAX (1ull << 48)

enum tp_ctl_type {
	TP_CTL_SEND = 1,      /* {id, len}: next item of the sender's stream is a send */
	TP_CTL_WRITE = 2,     /* {id, len, nseg, notif_len, segs, notif}: a write */
	TP_CTL_READ_REQ = 3,  /* {id, len, nseg, 0, segs}: send me these bytes */
	TP_CTL_READ_RESP = 4, /* {id, len}: next item is the response to read id */
	TP_CTL_ACK = 5,       /* {id, status, 0, value}: answer to send/write/read id */
	TP_CTL_NOTIF = 6,     /* {len, msg}: deliver after the items before it */
	TP_CTL_CLOSE = 7,     /* {nchan, per channel: sends, receives}: the sender's last
			       * message, with its count of data requests (the close) */
	TP_CTL_CREDIT = 8,    /* {n}: n more notifications the sender has room for */
	TP_CTL_HEARTBEAT = 9, /* {}: the sender is alive (sent after heartbeat_ms of silence) */
	TP_CTL_CANCEL = 10,   /* {id}: the sender's read id is cancelled (blob version 10) */
};

/* An export's secret: 128 random bits a peer must name with its index. */
#define TP_KEY_BYTES 16u

/* A remote segment as it travels: an export of the target and a range in
 * it (u32 idx, u32 0, key, u64 off, u64 len). */
struct tp_wseg {
	uint32_t idx;
	unsigned char key[TP_KEY_BYTES];
	uint64_t off, len;
};
#define TP_WSEG_BYTES 40u

/* Little-endian fields (the stream is the library's own; explicit byte
 * order keeps it a format, not a struct dump). */
static inline void tp_put32(unsigned char *p, uint32_t v)
{
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
	v = __builtin_bswap32(v);
#endif
	memcpy(p, &v, sizeof(v));
}

static inline void tp_put64(unsigned char *p, uint64_t v)
{
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	memcpy(p, &v, sizeof(v));
}

/* A remote segment in its wire form (TP_WSEG_BYTES at p). */
static inline void tp_wseg_put(unsigned char *p, uint32_t idx, const unsigned char *key,
			       uint64_t off, uint64_t len)
{
	tp_put32(p, idx);
	tp_put32(p + 4, 0);
	memcpy(p + 8, key, TP_KEY_BYTES);
	tp_put64(p + 8 + TP_KEY_BYTES, off);
	tp_put64(p + 16 + TP_KEY_BYTES, len);
}

static inline uint32_t tp_get32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
	v = __builtin_bswap32(v);
#endif
	return v;
}

static inline uint64_t tp_get64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	return v;
}

/* The control channel's state (ctl.c; here so that the fuzz target can
 * build one without a plugin). */
struct tp_ctl {
	struct tp_comm tx, rx;
	char *txbuf;                /* TP_CTL_SLOTS host frames, registered on tx */
	char *rxbuf;                /* TP_CTL_SLOTS host frames the parser reads */
	char *land;                 /* what rx receives are posted into */
	bool rx_pinned, land_dev;
	struct tcpx_p2p_mr *txmr, *landmr;
	/* Outgoing stream: bytes [out_off, out_len) not yet framed. */
	unsigned char *out;
	size_t out_off, out_len, out_cap;
	/* Incoming stream: messages [in_off, in_parsed) parsed and waiting
	 * for the pass (tp__ctl_next), bytes [in_parsed, in_len) not yet
	 * parsed. */
	unsigned char *in;
	size_t in_off, in_parsed, in_len, in_cap;
	struct tp_copy cp[TP_UNPACK_MAX_PAGES]; /* device bounce -> frame copies */
	/* The close handshake (docs/architecture.md "Closing a connection"):
	 * close_queued, our CLOSE ends the outgoing stream; tx_end, once it is
	 * framed, the frames sent in all (TP_CTL_SLOTS - 1 empty ones follow
	 * it); rx_end, once the peer's CLOSE arrived, the receives posted in
	 * all; close_rc, an error that stopped the handshake. */
	bool close_queued, close_framed, peer_closed;
	/* Sending on tx failed (a plugin call or the frame behind it):
	 * nothing more is posted on it (a CLOSE that tells the peer of a
	 * failure, tp__ctl_push, is not tried). */
	bool tx_broken;
	uint32_t tx_end, rx_end;
	int close_rc;
	char close_why[160];  /* close_rc's detail, kept for whoever finishes the conn */
	/* The chunks of every item the peer announced (SEND, WRITE,
	 * READ_RESP), parsed or dropped, numbered as its stream numbers them
	 * (peer_seq: the next number) and counted per channel: all it can
	 * have posted sends for, which bounds the counts its CLOSE may carry
	 * (on_close). */
	uint64_t peer_seq;
	uint32_t peer_on[TCPX_P2P_MAX_CHANNELS];
};

/* Set up the control channel on its two comms (the conn's last channel). */
int tp__ctl_create(struct tcpx_p2p_conn *c, void *send_comm, void *recv_comm,
		   const ncclNetDeviceHandle_v7_t *devh);
/* After the comms are closed: free the buffers and internal regions. */
void tp__ctl_destroy(struct tcpx_p2p_conn *c);
/* The plugin comms (for closing them). */
void *tp__ctl_comm(struct tcpx_p2p_conn *c, enum tp_dir dir);

/* Append a message with a body of body_len bytes to the outgoing stream;
 * *body is where the body goes.  ECLOSED after our CLOSE, EINVAL past
 * TP_CTL_MSG_MAX, ENOMEM (each recorded).  The conn's lock is held. */
int tp__ctl_msg(struct tcpx_p2p_conn *c, enum tp_ctl_type type, size_t body_len,
		unsigned char **body);
/* ... announcing an item whose first chunk travels on channel chan. */
int tp__ctl_item_msg(struct tcpx_p2p_conn *c, enum tp_ctl_type type, unsigned chan,
		     size_t body_len, unsigned char **body);

/* Bytes wait in the outgoing stream; how many. */
bool tp__ctl_queued(const struct tcpx_p2p_conn *c);
size_t tp__ctl_out_bytes(const struct tcpx_p2p_conn *c);
/* This side still owes the peer control bytes that no plugin thread has:
 * queued, or posted and not yet handed over by a test(). */
bool tp__ctl_owes(const struct tcpx_p2p_conn *c);

/* tp__ctl_msg for the last message of the outgoing stream (our CLOSE):
 * none may follow it. */
int tp__ctl_last_msg(struct tcpx_p2p_conn *c, enum tp_ctl_type type, size_t body_len,
		     unsigned char **body);
/* Our CLOSE is queued: the conn is closing. */
bool tp__ctl_closing(const struct tcpx_p2p_conn *c);
/* The peer's CLOSE arrived (its counts on the comms: peer_count). */
bool tp__ctl_peer_closed(const struct tcpx_p2p_conn *c);
/* Both CLOSEs went through and every control request has completed: the
 * comms can be closed with nothing posted. */
bool tp__ctl_close_done(const struct tcpx_p2p_conn *c);
/* Our CLOSE and the empty frames after it are all in the plugin's hands. */
bool tp__ctl_close_sent(const struct tcpx_p2p_conn *c);
/* Control requests posted and not yet completed (and consumed). */
uint32_t tp__ctl_inflight(const struct tcpx_p2p_conn *c);

/* One pass over the control channel: send what is queued, receive and
 * parse (tp__ctl_feed).  Returns 0 or the error that fails the conn.
 * *pending: a test still owes a hand-over, or bytes wait to go out. */
int tp__ctl_progress(struct tcpx_p2p_conn *c, bool *moved, bool *pending);

/* The outgoing half of a pass alone: send what is queued, never receive.
 * For answers queued in the middle of a pass (pass.c: before the data
 * stages) and for a failed conn that tells its peer with a CLOSE
 * (close/exchange.c, tp__close_tell).  0 (also once tx is broken) or the
 * plugin's error (tx then broken). */
int tp__ctl_push(struct tcpx_p2p_conn *c, bool *moved);
/* tx can still take frames (no plugin call on it failed). */
bool tp__ctl_can_send(const struct tcpx_p2p_conn *c);

/* Append received stream bytes and parse every complete message: each is
 * checked for size and header and its chunks counted; the peer's CLOSE and
 * HEARTBEAT are taken here (recorded, never handed on); the others wait
 * for the pass (tp__ctl_next).  0, or the error that fails the conn. */
int tp__ctl_feed(struct tcpx_p2p_conn *c, const void *bytes, size_t n);

/* One parsed message of the peer's for the item protocol. */
struct tp_ctl_msg {
	unsigned type, chan;
	const unsigned char *body; /* valid until the next tp__ctl_feed */
	uint32_t len;
};
/* The oldest parsed message waiting for the pass: true and *m; false when
 * none waits.  Once this side's CLOSE is queued, what the peer still says
 * is moot: dropped here. */
bool tp__ctl_next(struct tcpx_p2p_conn *c, struct tp_ctl_msg *m);
/* Every parsed message was taken (none waits behind one whose handling
 * failed). */
bool tp__ctl_taken(const struct tcpx_p2p_conn *c);

/* Messages of the peer's that carry no work (heartbeats, empty frames,
 * cancels of reads this side is not making) are rate-bounded per conn: a
 * burst of TP_IDLE_BURST, then one per ms.  tp__ctl_idle counts one more
 * (what names them): 0, or EPROTO past that rate. */
#define TP_IDLE_BURST 1024u
int tp__ctl_idle(struct tcpx_p2p_conn *c, const char *what);

#endif
